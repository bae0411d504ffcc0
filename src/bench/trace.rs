//! `schedlab bench trace`: what tracing costs and how well the trace agrees
//! with schedlab's other counters. A CPU-bound campaign and a pingpong
//! campaign are run with and without `trace = true`, alternating, several
//! trials each; printed: the median campaign wall time and median run
//! makespan of each side and their ratio (traced / untraced), with the
//! spread of the trials' own makespan ratios (each trial's two campaigns
//! ran back to back, so its ratio is the fairest single figure), then, over
//! the traced runs' workers, how the trace's on-CPU time compares with
//! schedstat's run time and its switch count with rusage's nvcsw + nivcsw;
//! last, a traced WRR campaign's dispatcher slice ends against the kernel's
//! switch-outs in the trace.

use std::collections::HashMap;
use std::time::Instant;

use anyhow::{Context, Result, bail};

use crate::campaign::{self, Options};
use crate::fields::Field;
use crate::report::analyse::trace::{AGREEMENT_TOLERANCE, expected_switches, explain, run_totals};
use crate::stats::summary::percentile;
use crate::store::{ExportRow, ExportTrace, Store};
use crate::trace::derive::Slice;

pub struct TraceBenchOptions {
    /// Trials per side and workload.
    pub trials: u32,
    /// The CPU the workers share.
    pub cpu: usize,
}

/// The two workloads: (label, kind, its table's keys).
const LOADS: [(&str, &str, &str); 2] = [
    ("cpu (pi ×2)", "pi", "iterations = 100_000_000"),
    ("pingpong ×2", "pingpong", "round_trips = 20_000"),
];

fn spec_text(kind: &str, keys: &str, cpu: usize, trace: bool, trial: u32) -> String {
    format!(
        "name = \"bench-trace-{kind}-{trial}-{trace}\"\nrepetitions = 3\ncooldown_s = 0\n\
         trace = {trace}\norder = \"sequential\"\n[matrix]\npolicy = [\"other\"]\n\
         cpus = [\"{cpu}\"]\nworkload = [\"{kind}\"]\nprocesses = [2]\n[workloads.{kind}]\n{keys}\n"
    )
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    percentile(&v, 0.5)
}

/// One campaign: its wall time (s), its runs' makespans (s), its rows.
fn one(db: &std::path::Path, text: &str) -> Result<(f64, Vec<f64>, Vec<ExportRow>)> {
    let spec = crate::spec::load(text, "bench trace", &[])?;
    let opts = Options {
        db: db.to_path_buf(),
        quiet: true,
        retry_failed: false,
        force: false,
        allow_concurrent: false,
    };
    let t0 = Instant::now();
    let summary = campaign::run(&spec, "bench trace", text, &[], &opts)?;
    let wall_s = t0.elapsed().as_secs_f64();
    if let Some(sig) = summary.interrupted {
        bail!("interrupted by signal {sig}");
    }
    let rows = Store::open(db)?.export_rows(Some(summary.campaign.id))?;
    if let Some(r) = rows.iter().find(|r| r.status != "ok") {
        bail!("a run was {}: {}", r.status, r.reason);
    }
    let mut makespans: Vec<f64> = rows
        .iter()
        .filter(|r| r.process_index == Some(0))
        .filter_map(|r| r.makespan_ns.map(|m| m as f64 / 1e9))
        .collect();
    makespans.sort_by(f64::total_cmp);
    Ok((wall_s, makespans, rows))
}

pub fn run(o: TraceBenchOptions) -> Result<()> {
    if o.trials == 0 {
        bail!("--trials must be at least 1");
    }
    let tmp = tempfile::tempdir().context("creating a temporary directory")?;
    let db = tmp.path().join("bench-trace.db");
    outln!(
        "{} trials per side, 3 runs per campaign, 2 processes on CPU {}, traced and untraced \
         alternating; medians",
        o.trials,
        o.cpu
    )?;
    outln!(
        "{:<14} {:>12} {:>12} {:>7}   {:>13} {:>13} {:>7}   {}",
        "workload",
        "wall plain",
        "wall traced",
        "ratio",
        "makespan pl.",
        "makespan tr.",
        "ratio",
        "trials' ratios min / median / max"
    )?;
    let mut traced_rows: Vec<ExportRow> = Vec::new();
    let mut pingpong_wall_ratio = f64::NAN;
    for (label, kind, keys) in LOADS {
        let (mut wall, mut span) = ([Vec::new(), Vec::new()], [Vec::new(), Vec::new()]);
        for trial in 0..o.trials {
            // Alternate which side goes first, so drift hits both alike.
            let order = if trial % 2 == 0 {
                [false, true]
            } else {
                [true, false]
            };
            for trace in order {
                let (w, m, rows) = one(&db, &spec_text(kind, keys, o.cpu, trace, trial))
                    .with_context(|| format!("{label}, trace = {trace}"))?;
                wall[usize::from(trace)].push(w);
                span[usize::from(trace)].push(median(m));
                if trace {
                    traced_rows.extend(rows);
                }
            }
        }
        let w = [median(wall[0].clone()), median(wall[1].clone())];
        let m = [median(span[0].clone()), median(span[1].clone())];
        let mut per_trial: Vec<f64> = span[1].iter().zip(&span[0]).map(|(t, p)| t / p).collect();
        per_trial.sort_by(f64::total_cmp);
        if kind == "pingpong" {
            pingpong_wall_ratio = w[1] / w[0];
        }
        outln!(
            "{label:<14} {:>10.3} s {:>10.3} s {:>7.3}   {:>11.4} s {:>11.4} s {:>7.3}   \
             {:.3} / {:.3} / {:.3}",
            w[0],
            w[1],
            w[1] / w[0],
            m[0],
            m[1],
            m[1] / m[0],
            per_trial.first().copied().unwrap_or(f64::NAN),
            median(per_trial.clone()),
            per_trial.last().copied().unwrap_or(f64::NAN)
        )?;
    }
    outln!(
        "\nagreement over the traced runs' workers, each over its own work window (the window \
         of its schedstat and rusage figures):"
    )?;
    let workers: Vec<&ExportRow> = traced_rows
        .iter()
        .filter(|r| r.role.as_deref() == Some("worker"))
        .collect();
    let mut cpu_err = Vec::new();
    let mut sw_err = Vec::new();
    let mut lost = 0;
    let mut off: Vec<Disagreement> = Vec::new();
    let totals = run_totals_by_run(&workers);
    let mut run_err: Vec<f64> = totals
        .values()
        .filter(|(_, run)| *run > 0)
        .map(|(trace, run)| *trace as f64 / *run as f64 - 1.0)
        .collect();
    for r in &workers {
        let run_ns = r.kernel.get(Field::RunNs).map(|v| v as i64);
        // A row with a process (run_ns is one of its fields) and a trace.
        let (Some(t), Some(run_ns)) = (&r.trace, run_ns) else {
            continue;
        };
        lost += t.lost_events;
        // Built-in workloads' rusage always has switches; a row without
        // them (a program's tree the kernel gave none for) is not compared.
        let switches = r.kernel.get(Field::Nvcsw).zip(r.kernel.get(Field::Nivcsw));
        let Some(rusage) = switches.map(|(v, i)| v + i) else {
            continue;
        };
        if let Some(on) = t.work_oncpu_ns.filter(|_| run_ns > 0) {
            cpu_err.push(on as f64 / run_ns as f64 - 1.0);
        }
        // A program's tree against its exit records plus each task's last
        // switch ([`expected_switches`]).
        let (expected, _, _) = expected_switches(rusage, tree_tasks(r));
        if let Some(switches) = t.work_switches
            && expected > 0
        {
            sw_err.push(switches as f64 / expected as f64 - 1.0);
        }
        if let Some(d) = Disagreement::of(r, t, run_ns, rusage, totals.get(&r.run).copied()) {
            off.push(d);
        }
    }
    let show = |name: &str, v: &mut Vec<f64>| -> Result<()> {
        v.sort_by(f64::total_cmp);
        let within = v.iter().filter(|e| e.abs() <= AGREEMENT_TOLERANCE).count();
        outln!(
            "  {name:<44} n={:<3} p50 {:+.2}%  p90 {:+.2}%  max |{:.2}|%  within 1%: {}/{}",
            v.len(),
            100.0 * percentile(v, 0.5),
            100.0 * percentile(v, 0.9),
            100.0 * v.iter().map(|e| e.abs()).fold(0.0, f64::max),
            within,
            v.len()
        )?;
        Ok(())
    };
    show("trace on-CPU time / schedstat run time − 1", &mut cpu_err)?;
    show("the same over each run's workers together", &mut run_err)?;
    show("trace switches / rusage (nvcsw + nivcsw) − 1", &mut sw_err)?;
    outln!("  events lost over all traced runs: {lost}")?;
    let unexplained = print_disagreements(&off)?;
    wrr_boundaries(&db, o.cpu)?;
    let within = cpu_err
        .iter()
        .filter(|e| e.abs() <= AGREEMENT_TOLERANCE)
        .count();
    outln!(
        "\ntargets: pingpong campaign wall ≤ {WALL_TARGET}× untraced: {} ({pingpong_wall_ratio:.3}×); \
         trace on-CPU within 1 % of schedstat for ≥ 34 of 36 workers or each miss explained: {} \
         ({within}/{}, {unexplained} unexplained)",
        verdict(pingpong_wall_ratio <= WALL_TARGET),
        verdict(agreement_met(within, cpu_err.len(), unexplained)),
        cpu_err.len()
    )?;
    Ok(())
}

/// The traced pingpong campaign's wall time, at most this many times the
/// untraced one's (issue 34's target).
const WALL_TARGET: f64 = 1.3;

fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "MISSED" }
}

/// Issue 34's agreement target: on-CPU time within 1 % of schedstat for at
/// least 34 of every 36 workers, or every miss explained by a measured
/// cause.
fn agreement_met(within: usize, workers: usize, unexplained: usize) -> bool {
    workers > 0 && (36 * within >= 34 * workers || unexplained == 0)
}

/// Each run's traced workers together: their trace on-CPU time and
/// schedstat run time summed ([`run_totals`]).
fn run_totals_by_run(workers: &[&ExportRow]) -> HashMap<i64, (u64, u64)> {
    let mut by_run: HashMap<i64, Vec<(u64, Option<u64>)>> = HashMap::new();
    for r in workers {
        let u = |v: i64| u64::try_from(v).ok();
        if let Some(on) = r.trace.as_ref().and_then(|t| t.work_oncpu_ns).and_then(u) {
            by_run
                .entry(r.run)
                .or_default()
                .push((on, r.kernel.get(Field::RunNs)));
        }
    }
    by_run
        .into_iter()
        .filter_map(|(run, pairs)| Some((run, run_totals(pairs)?)))
        .collect()
}

/// A program's tree: its tasks (from their exit records), whose last
/// switches the records lack.
fn tree_tasks(r: &ExportRow) -> Option<u64> {
    r.figures.get("tree_tasks").map(|&t| t as u64)
}

/// One traced worker off its kernel counters by more than the tolerance.
struct Disagreement {
    run: i64,
    process_index: i64,
    trace_oncpu_ns: i64,
    schedstat_run_ns: i64,
    trace_switches: i64,
    rusage_switches: u64,
    /// The run's CPUs' steal time over the run, %.
    steal_pct: Option<f64>,
    /// Why its trace is unusable, if it is.
    unusable: Option<String>,
    /// Whether missing switches explain it ([`explain`]).
    explanation: String,
}

impl Disagreement {
    fn of(
        r: &ExportRow,
        t: &ExportTrace,
        run_ns: i64,
        rusage: u64,
        run_totals: Option<(u64, u64)>,
    ) -> Option<Disagreement> {
        let (on, switches) = (t.work_oncpu_ns?, t.work_switches?);
        let u = |v: i64| u64::try_from(v).unwrap_or(0);
        let explanation = explain(
            u(on),
            Some(u(run_ns)),
            u(t.work_unattributed_ns.unwrap_or(0)),
            u(switches),
            (Some(rusage), tree_tasks(r)),
            u(t.work_missing_switches.unwrap_or(0)),
            run_totals,
        );
        (!explanation.is_empty()).then(|| Disagreement {
            run: r.run,
            process_index: r.process_index.unwrap_or(-1),
            trace_oncpu_ns: on,
            schedstat_run_ns: run_ns,
            trace_switches: switches,
            rusage_switches: rusage,
            steal_pct: r.steal_pct,
            unusable: t
                .unusable
                .then(|| t.unusable_reason.clone().unwrap_or_default()),
            explanation,
        })
    }
}

/// Which workers disagree, by how much, and whether a missing event
/// explains it (the run's steal time beside it: schedstat's run time
/// leaves out time stolen by the hypervisor, the trace's clock does not).
/// Returns how many are not explained.
fn print_disagreements(off: &[Disagreement]) -> Result<usize> {
    if off.is_empty() {
        return Ok(0);
    }
    let explained = off
        .iter()
        .filter(|d| !d.explanation.contains("not explained"))
        .count();
    outln!(
        "  {} off by more than 1 % ({} explained, by switches the kernel never emitted or by where \
         the trace stamps a switch; steal: the run's CPUs' steal time, which schedstat's run \
         time leaves out and the trace's clock counts):",
        off.len(),
        explained
    )?;
    for d in off {
        outln!(
            "    run {} worker {}: on-CPU {:.3} / {:.3} ms ({:+.2}%), switches {} / {}, steal {}: {}{}",
            d.run,
            d.process_index,
            d.trace_oncpu_ns as f64 / 1e6,
            d.schedstat_run_ns as f64 / 1e6,
            100.0 * (d.trace_oncpu_ns as f64 / d.schedstat_run_ns.max(1) as f64 - 1.0),
            d.trace_switches,
            d.rusage_switches,
            d.steal_pct
                .map_or_else(|| "–".to_string(), |s| format!("{s:.2}%")),
            d.explanation,
            d.unusable
                .as_ref()
                .map_or_else(String::new, |why| format!(" [trace unusable: {why}]"))
        )?;
    }
    Ok(off.len() - explained)
}

/// A traced WRR run (user-space FIFO dispatcher): three hash workers of
/// weights 1, 2, 4 on the CPU, 10 ms quantum.
fn wrr_spec_text(cpu: usize) -> String {
    format!(
        "name = \"bench-trace-wrr\"\nrepetitions = 2\ncooldown_s = 0\ntrace = true\n\
         [matrix]\npolicy = [\"wrr\"]\nworkload = [\"hash\"]\nprocesses = [3]\n\
         priorities = [\"w\"]\ncpus = [\"{cpu}\"]\n[priorities.w]\nmode = \"weights\"\n\
         weight = [1, 2, 4]\n[workloads.hash]\nduration_s = 1.0\n[wrr]\nquantum_ms = 10\n"
    )
}

/// Where the kernel ended each of the dispatcher's slices, against where the
/// dispatcher says it ended it: for each dispatcher slice (pid, absolute
/// start and end on the trace's clock), the end of the last trace slice of
/// that pid that began inside it, minus the dispatcher's end, ns. Slices the
/// trace has nothing for are left out.
pub fn boundary_diffs_ns(dispatched: &[(i32, u64, u64)], traced: &[Slice]) -> Vec<i64> {
    dispatched
        .iter()
        .filter_map(|&(pid, start, end)| {
            traced
                .iter()
                .filter(|s| s.pid == pid && s.start_ns >= start && s.start_ns < end)
                .map(|s| s.end_ns)
                .max()
                .map(|t| t as i64 - end as i64)
        })
        .collect()
}

/// The WRR dispatcher's slice boundaries against the kernel's trace.
fn wrr_boundaries(db: &std::path::Path, cpu: usize) -> Result<()> {
    let text = wrr_spec_text(cpu);
    let (_, _, rows) = one(db, &text).context("WRR, traced")?;
    let store = Store::open(db)?;
    let mut runs: Vec<i64> = rows.iter().map(|r| r.run).collect();
    runs.dedup();
    let mut diffs_ns = Vec::new();
    let mut mechanism = String::new();
    for run in runs {
        let cap = store.load_trace(run)?;
        let Some(release_ns) = cap.release_ns else {
            bail!("run {run}: the trace has no release time");
        };
        let pid_of = |index: u32| {
            rows.iter()
                .find(|r| r.run == run && r.process_index == Some(i64::from(index)))
                .and_then(|r| r.pid)
                .and_then(|p| i32::try_from(p).ok())
        };
        if mechanism.is_empty() {
            mechanism = rows
                .iter()
                .find(|r| r.run == run)
                .and_then(|r| serde_json::from_str::<serde_json::Value>(&r.extra_json).ok())
                .and_then(|e| e["wrr"]["mechanism"].as_str().map(str::to_string))
                .unwrap_or_else(|| "?".to_string());
        }
        let dispatched: Vec<(i32, u64, u64)> = store
            .slices(run)?
            .iter()
            .filter_map(|s| {
                Some((
                    pid_of(s.process_index)?,
                    release_ns + s.planned_start_ns,
                    release_ns + s.actual_end_ns,
                ))
            })
            .collect();
        let traced = store.trace_slices(run, None)?;
        diffs_ns.extend(boundary_diffs_ns(&dispatched, &traced));
    }
    let mut abs_ms: Vec<f64> = diffs_ns.iter().map(|d| d.abs() as f64 / 1e6).collect();
    abs_ms.sort_by(f64::total_cmp);
    if abs_ms.is_empty() {
        bail!("the traced WRR runs have no dispatcher slices the trace saw");
    }
    let signed_ms: Vec<f64> = {
        let mut v: Vec<f64> = diffs_ns.iter().map(|&d| d as f64 / 1e6).collect();
        v.sort_by(f64::total_cmp);
        v
    };
    let within = abs_ms.iter().filter(|&&d| d <= 1.0).count();
    outln!(
        "\nWRR ({mechanism}) slice ends, the kernel's (trace) − the dispatcher's, over {} slices: \
         p50 {:+.3} ms, p10..p90 {:+.3}..{:+.3} ms, |max| {:.3} ms; within 1 ms: {}/{}",
        abs_ms.len(),
        percentile(&signed_ms, 0.5),
        percentile(&signed_ms, 0.1),
        percentile(&signed_ms, 0.9),
        abs_ms.last().copied().unwrap_or(0.0),
        within,
        abs_ms.len()
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agreement_is_met_at_34_of_36_or_with_every_miss_explained() {
        assert!(agreement_met(34, 36, 2));
        assert!(!agreement_met(33, 36, 1));
        assert!(agreement_met(30, 36, 0));
        assert!(agreement_met(57, 60, 3));
        assert!(!agreement_met(56, 60, 1));
        assert!(!agreement_met(0, 0, 0));
    }

    #[test]
    fn bench_specs_are_valid_and_differ_only_in_trace() {
        for (_, kind, keys) in LOADS {
            let on = crate::spec::load(&spec_text(kind, keys, 0, true, 1), "b", &[]).unwrap();
            let off = crate::spec::load(&spec_text(kind, keys, 0, false, 1), "b", &[]).unwrap();
            assert!(on.trace && !off.trace);
            assert_eq!(on.workloads, off.workloads);
            assert_eq!(on.processes, vec![2]);
            assert_eq!(on.repetitions, 3);
        }
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        let wrr = crate::spec::load(&wrr_spec_text(0), "b", &[]).unwrap();
        assert!(wrr.trace);
    }

    #[test]
    fn boundaries_pair_each_dispatched_slice_with_the_kernels_last_switch_out() {
        let s = |pid, start_ns, end_ns| Slice {
            pid,
            cpu: 0,
            start_ns,
            end_ns,
            end: Some(crate::trace::SwitchEnd::Preempted),
            start_clipped: false,
            start_repaired: false,
            end_repaired: false,
        };
        // Pid 1 is given 0..10 ms (interrupted once by a kernel thread) and
        // switched out 0.2 ms late; pid 2 is given 10..30 ms and switched out
        // 0.1 ms early; pid 3 never shows in the trace.
        let traced = [
            s(1, 0, 4_000_000),
            s(1, 4_100_000, 10_200_000),
            s(2, 10_200_000, 29_900_000),
        ];
        let dispatched = [
            (1, 0, 10_000_000),
            (2, 10_000_000, 30_000_000),
            (3, 30_000_000, 40_000_000),
        ];
        assert_eq!(
            boundary_diffs_ns(&dispatched, &traced),
            vec![200_000, -100_000]
        );
    }
}
