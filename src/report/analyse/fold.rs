//! Reading and folding the worker processes of a campaign condition by
//! condition: each condition's rows are read, folded into its runs' values
//! and summarised per process, then dropped, so that a campaign of ten
//! million process rows never holds them all, and the conditions are read
//! on every CPU (one read-only connection per thread).

use super::runs::{RunValues, fold_run};
use crate::report::metric::Metric;
use crate::stats::{self, Summary};
use crate::store::{ReportProcess, ReportRun, Store};
use anyhow::Result;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The runs' values and each condition's per-process summaries.
pub(super) struct Folded {
    /// Indexed like the runs: the values of an ok run, None for the others.
    pub(super) values: Vec<Option<RunValues>>,
    /// By condition, then by metric (of the report's metrics, in order):
    /// the summary of every process of every ok run of the condition
    /// (None for metrics not of a process).
    pub(super) per_process: Vec<Vec<Option<Summary>>>,
    /// Process rows read.
    pub(super) rows: u64,
}

/// One condition folded: its ok runs' values (in the order given), its
/// per-process summaries by metric, and the rows read.
type CondFold = (Vec<RunValues>, Vec<Option<Summary>>, u64);

/// A thread's columns of per-process values, one per metric, emptied and
/// refilled for each condition it folds: a condition of ten million rows
/// fills tens of megabytes, and fresh ones for each condition were paid
/// again in page faults.
type Columns = Vec<Vec<f64>>;

/// The ok runs of each condition (indices into `runs`, in campaign order).
pub(super) fn ok_runs_by_condition(
    runs: &[ReportRun],
    cond_of_run: &[usize],
    conditions: usize,
) -> Vec<Vec<usize>> {
    let mut out = vec![Vec::new(); conditions];
    for (i, r) in runs.iter().enumerate() {
        if r.status == "ok" {
            out[cond_of_run[i]].push(i);
        }
    }
    out
}

/// Fold one condition's ok runs (`ok`, indices into `runs`). `read` hands
/// each run's rows, in any order of the runs, to the callback it is given,
/// with the run's position in `ok`; a run it does not hand has no rows. The
/// per-process values go into the summaries and are then dropped from the
/// runs' values.
fn fold_condition<E>(
    runs: &[ReportRun],
    ok: &[usize],
    timed: &[String],
    metrics: &[Metric],
    columns: &mut Columns,
    read: impl FnOnce(&mut dyn FnMut(usize, &[ReportProcess])) -> Result<(), E>,
) -> Result<CondFold, E> {
    let mut slots: Vec<Option<RunValues>> = (0..ok.len()).map(|_| None).collect();
    let mut rows = 0u64;
    read(&mut |k, ps| {
        rows += ps.len() as u64;
        slots[k] = fold_run(&runs[ok[k]], ps, timed);
    })?;
    // Values in the order of `ok` (campaign order), whatever order the
    // rows came in.
    let mut values: Vec<RunValues> = slots
        .into_iter()
        .zip(ok)
        .filter_map(|(v, &ri)| v.or_else(|| fold_run(&runs[ri], &[], timed)))
        .collect();
    // Every process of every run, in campaign order and then by process
    // index: the order the sums of the summaries always had. One pass puts
    // each metric's values in its own column (a pass per metric read every
    // process's values once per metric), dropping the runs' per-process
    // values as it goes.
    let slots: Vec<Option<usize>> = metrics.iter().map(|m| m.process_slot()).collect();
    let processes: usize = values.iter().map(|v| v.processes.len()).sum();
    columns.resize_with(slots.len(), Vec::new);
    for (column, slot) in columns.iter_mut().zip(&slots) {
        column.clear();
        if slot.is_some() {
            column.reserve(processes);
        }
    }
    for v in &mut values {
        for p in std::mem::take(&mut v.processes) {
            for (column, slot) in columns.iter_mut().zip(&slots) {
                if let Some(x) = slot.map(|s| p[s]).filter(|x| x.is_finite()) {
                    column.push(x);
                }
            }
        }
    }
    let per_process = slots
        .iter()
        .zip(columns.iter())
        .map(|(slot, column)| slot.and_then(|_| stats::summarize(column)))
        .collect();
    Ok((values, per_process, rows))
}

/// Put the conditions' folds together, indexed like the runs.
fn assemble(runs: usize, ok: &[Vec<usize>], folds: Vec<CondFold>) -> Folded {
    let mut values: Vec<Option<RunValues>> = (0..runs).map(|_| None).collect();
    let mut per_process = Vec::with_capacity(folds.len());
    let mut rows = 0;
    for (ok, (vals, summaries, n)) in ok.iter().zip(folds) {
        for (&ri, v) in ok.iter().zip(vals) {
            values[ri] = Some(v);
        }
        per_process.push(summaries);
        rows += n;
    }
    Folded {
        values,
        per_process,
        rows,
    }
}

/// Read and fold the worker processes of the ok runs of `store`, condition
/// by condition, on up to `available_parallelism` threads with a read-only
/// connection each; on this connection alone when the database allows no
/// second one (see [`Store::open_reader`]).
pub(super) fn from_store(
    store: &Store,
    runs: &[ReportRun],
    ok: &[Vec<usize>],
    timed: &[String],
    metrics: &[Metric],
) -> Result<Folded> {
    let fold = |s: &Store, columns: &mut Columns, c: usize| {
        fold_condition(runs, &ok[c], timed, metrics, columns, |each| {
            let ids: Vec<i64> = ok[c].iter().map(|&ri| runs[ri].id).collect();
            let slot: HashMap<i64, usize> =
                ids.iter().enumerate().map(|(k, &id)| (id, k)).collect();
            s.for_each_report_run(&ids, |id, ps| {
                if let Some(&k) = slot.get(&id) {
                    each(k, ps);
                }
            })
            .map(drop)
        })
    };
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(8)
        .min(ok.len());
    let folds = match store.open_reader() {
        Some(first) if threads > 1 => par_conditions(ok.len(), threads, first, store, fold)?,
        _ => {
            let mut columns = Columns::new();
            (0..ok.len())
                .map(|c| fold(store, &mut columns, c))
                .collect::<Result<Vec<_>>>()?
        }
    };
    Ok(assemble(runs.len(), ok, folds))
}

/// Fold conditions `0..n` on `threads` threads, each taking the next
/// condition when done with one (sizes differ), each with its own reader
/// (`first` for one of them). Results by condition.
fn par_conditions(
    n: usize,
    threads: usize,
    first: Store,
    store: &Store,
    fold: impl Fn(&Store, &mut Columns, usize) -> Result<CondFold> + Sync,
) -> Result<Vec<CondFold>> {
    let next = AtomicUsize::new(0);
    let work = |reader: Store| -> Result<Vec<(usize, CondFold)>> {
        let mut done = Vec::new();
        let mut columns = Columns::new();
        loop {
            let c = next.fetch_add(1, Ordering::Relaxed);
            if c >= n {
                return Ok(done);
            }
            done.push((c, fold(&reader, &mut columns, c)?));
        }
    };
    // The readers are opened here: a connection is Send but not Sync.
    let mut readers = vec![first];
    for _ in 1..threads {
        match store.open_reader() {
            Some(r) => readers.push(r),
            None => break,
        }
    }
    let mut all: Vec<(usize, CondFold)> = std::thread::scope(|s| {
        let handles: Vec<_> = readers
            .into_iter()
            .map(|r| {
                let work = &work;
                s.spawn(move || work(r))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("report reader thread"))
            .collect::<Result<Vec<_>>>()
    })?
    .into_iter()
    .flatten()
    .collect();
    all.sort_by_key(|(c, _)| *c);
    Ok(all.into_iter().map(|(_, f)| f).collect())
}

/// Fold rows already in memory (`processes`, indexed like `runs`),
/// condition by condition, as [`from_store`] does.
pub(super) fn from_rows(
    runs: &[ReportRun],
    mut processes: Vec<Vec<ReportProcess>>,
    ok: &[Vec<usize>],
    timed: &[String],
    metrics: &[Metric],
) -> Folded {
    let mut columns = Columns::new();
    let folds = ok
        .iter()
        .map(|ok| {
            let Ok(fold) = fold_condition(runs, ok, timed, metrics, &mut columns, |each| {
                for (k, &ri) in ok.iter().enumerate() {
                    each(k, &std::mem::take(&mut processes[ri]));
                }
                Ok::<_, std::convert::Infallible>(())
            });
            fold
        })
        .collect();
    assemble(runs.len(), ok, folds)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(id: i64, status: &str) -> ReportRun {
        ReportRun {
            id,
            seq: id,
            policy: "other".into(),
            workload: "pi".into(),
            workload_kind: "pi".into(),
            processes: 2,
            priority_mode: "none".into(),
            cpus: "all".into(),
            cpu_list: "0-1".into(),
            rt_runtime_us: None,
            rep: id,
            status: status.into(),
            reason: String::new(),
            makespan_ns: Some(1_000_000_000),
            cpu_util: None,
            load_avg_1m: None,
            environment_id: 1,
            others_runnable: None,
            steal_pct: None,
            other_cpu_pct: None,
            interrupts: None,
            softirqs: None,
            slice_us: None,
            ext_scheduler: None,
            machine: None,
            by: None,
            not_given: Default::default(),
            cpu_busy_pct: Vec::new(),
        }
    }

    /// A small synthetic campaign in a database file, its runs and the ok
    /// runs of each condition.
    fn synthetic() -> (tempfile::TempDir, Store, Vec<ReportRun>, Vec<Vec<usize>>) {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("t.db")).unwrap();
        crate::testing::synth::create(&mut store, &crate::testing::synth::SynthConfig::small())
            .unwrap();
        let frame = store.load_report_frame(None, None).unwrap();
        let order = super::super::groups::spec_order(&frame.campaign.spec_json);
        let factors = super::super::groups::factors(&frame.runs, &order, &Default::default(), None);
        let grouping = super::super::groups::group(&frame.runs, &factors);
        let ok = ok_runs_by_condition(&frame.runs, &grouping.cond_of_run, grouping.keyed.len());
        (dir, store, frame.runs, ok)
    }

    #[test]
    fn conditions_read_apart_fold_as_the_whole_campaign_read_at_once() {
        let (_dir, store, runs, ok) = synthetic();
        assert!(ok.len() >= 2, "the test needs several conditions");
        assert!(
            store.open_reader().is_some(),
            "a file allows a second reader"
        );
        let data = store.load_report_data(None).unwrap();
        let metrics = Metric::ALL.to_vec();
        let timed: Vec<String> = Vec::new();
        let got = from_store(&store, &runs, &ok, &timed, &metrics).unwrap();
        assert_eq!(got.rows, data.process_rows);
        for (c, ok) in ok.iter().enumerate() {
            for (m, metric) in metrics.iter().enumerate() {
                // Every process of the condition's ok runs, in campaign
                // order and by process index, summarised at once.
                let want = metric.process_slot().and_then(|slot| {
                    let all: Vec<f64> = ok
                        .iter()
                        .flat_map(|&ri| {
                            fold_run(&runs[ri], &data.processes[ri], &timed)
                                .unwrap()
                                .processes
                        })
                        .map(|p| p[slot])
                        .filter(|v| v.is_finite())
                        .collect();
                    stats::summarize(&all)
                });
                assert_eq!(got.per_process[c][m], want, "condition {c}, {metric:?}");
            }
        }
        for (i, r) in runs.iter().enumerate() {
            let v = got.values[i].as_ref();
            assert_eq!(v.is_some(), r.status == "ok", "run {}", r.id);
            if let Some(v) = v {
                let whole = fold_run(r, &data.processes[i], &timed).unwrap();
                assert!(v.processes.is_empty(), "per-process values are dropped");
                assert_eq!(v.values.map(f64::to_bits), whole.values.map(f64::to_bits));
                assert_eq!(v.nices, whole.nices);
            }
        }
        let in_memory = from_rows(&runs, data.processes, &ok, &timed, &metrics);
        assert_eq!(in_memory.per_process, got.per_process);
        assert_eq!(in_memory.rows, got.rows);
    }

    #[test]
    fn ok_runs_are_grouped_by_condition_in_campaign_order() {
        let runs = vec![run(1, "ok"), run(2, "failed"), run(3, "ok"), run(4, "ok")];
        let got = ok_runs_by_condition(&runs, &[1, 0, 1, 0], 3);
        assert_eq!(got, vec![vec![3], vec![0, 2], vec![]]);
    }
}
