//! What the kernel's scheduling traces say about each condition: slice
//! lengths (pooled histograms, binned for a chart), how slices ended,
//! migrations, the trace's wake-up-to-run latency beside the workload's own
//! latency, and the agreement of each traced process with the kernel's
//! counters (trace on-CPU time vs schedstat run time, trace switches vs
//! rusage nvcsw + nivcsw; for a program's tree, vs its tasks' exit
//! records with each task's last switch added: [`expected_switches`]).
//! Runs whose trace lost events (or contradicts itself) are listed and
//! left out of everything else.
//!
//! Pure: takes what [`crate::store::Store::campaign_traces`] and the process
//! rows and latency histograms of those runs loaded.

use serde::Serialize;
use std::collections::HashMap;

use super::Analysis;
use super::conditions::Condition;
use crate::fields::Field;
use crate::record::ProcessRecord;
use crate::store::{ProcessLatency, RunTrace};
use crate::trace::summary::ProcessTrace;
use crate::workload::latency::Latency;

/// Trace and kernel counter disagreeing by more than this share are
/// flagged.
pub const AGREEMENT_TOLERANCE: f64 = 0.01;

/// A traced run left out: its trace lost events, or switches the kernel
/// never emitted cannot be repaired or leave too much time unattributed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExcludedRun {
    pub run_id: i64,
    pub lost_events: u64,
    pub mismatched_switches: u64,
    /// Exactly why ([`crate::trace::verdict::Verdict::reason`]).
    pub reason: String,
}

/// One bin of a slice-length histogram: [lo_ns, hi_ns).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Bin {
    pub lo_ns: u64,
    pub hi_ns: u64,
    pub count: u64,
}

/// Percentiles of a pooled histogram, µs (None when it is empty).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Spread {
    pub count: u64,
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
    pub max_us: Option<f64>,
}

impl Spread {
    fn of(h: &Latency) -> Spread {
        let us = |ns: u64| (h.count() > 0).then_some(ns as f64 / 1e3);
        let p = h.percentiles();
        Spread {
            count: p.count,
            p50_us: us(p.p50_ns),
            p99_us: us(p.p99_ns),
            max_us: us(p.max_ns),
        }
    }
}

/// One condition's traced runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConditionTrace {
    pub condition: usize,
    pub label: String,
    pub policy: String,
    pub group: usize,
    /// Usable traced runs.
    pub runs: usize,
    /// Slices in the windows (clipped ones included).
    pub slices: u64,
    /// Lengths of the complete slices.
    pub slice: Spread,
    /// The complete slices binned on the group's edges.
    pub bins: Vec<Bin>,
    pub preempted: u64,
    pub yielded: u64,
    pub voluntary: u64,
    pub migrations: u64,
    /// Wake-up-to-run latency in the trace (sched_waking → switch-in).
    pub trace_wake: Spread,
    /// The workload's own primary latency over the same runs, and its name.
    pub workload_latency: Option<(String, Spread)>,
    /// Processes compared with the kernel counters, and those flagged.
    pub compared: usize,
    pub flagged: usize,
}

/// One traced process against the kernel's counters.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Agreement {
    pub run_id: i64,
    pub condition: usize,
    pub process_index: u32,
    pub pid: i32,
    pub trace_oncpu_ns: u64,
    /// schedstat run time over the measured window.
    pub schedstat_run_ns: Option<u64>,
    /// trace / schedstat.
    pub oncpu_ratio: Option<f64>,
    /// Switches the trace saw, as rusage counts them.
    pub trace_switches: u64,
    /// rusage nvcsw + nivcsw (a program's tree: summed over its tasks'
    /// exit records; None where the kernel gave none, and then no
    /// comparison of switches is made).
    pub rusage_switches: Option<u64>,
    /// A program's tree: its tasks (the switches its exit records lack,
    /// [`expected_switches`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tree_tasks: Option<u64>,
    /// trace / rusage (a tree: trace / (rusage + its tasks)).
    pub switch_ratio: Option<f64>,
    /// A ratio beyond [`AGREEMENT_TOLERANCE`] of 1 (or a count where the
    /// other side has none).
    pub flagged: bool,
    /// Unattributed time of repaired gaps next to the process in the
    /// window (switches the kernel never emitted), ns.
    pub unattributed_ns: u64,
    /// Its switch-outs the kernel never emitted in the window.
    pub missing_switches: u64,
    /// For a flagged process: whether missing events explain it.
    pub explanation: Option<String>,
}

/// The switches the trace should count of a process whose kernel count
/// (rusage nvcsw + nivcsw) is `counted`, and by how many fewer or more,
/// beyond [`AGREEMENT_TOLERANCE`], it may count: `(expected, below,
/// above)`.
///
/// A single process: its count, no slack. A program's tree of
/// `tree_tasks` tasks is counted from its tasks' taskstats exit records,
/// and a task's record is taken before its last switch: `do_exit()`
/// (kernel/exit.c) calls `taskstats_exit()` — which copies `nvcsw` and
/// `nivcsw` into the record (`bacct_add_tsk()`, kernel/tsacct.c) — before
/// `exit_mm()`, `exit_files()` and `exit_notify()`, and only then
/// `do_task_dead()`, whose `__schedule()` (kernel/sched/core.c) switches
/// away from the dead task and counts that switch in its `nvcsw`. The
/// trace sees that switch inside the tree's window (which ends when its
/// last task has exited), so it counts one switch per task more than the
/// records: `counted + tasks`. Above that, up to two more per task: on
/// the exit path after its record a task wakes whoever reads its pipes
/// (`exit_files()` closing the last writer) and its parent
/// (`exit_notify()`), and each woken task may preempt it once (or
/// `exit_mm()` may sleep on a lock). Below it, up to one fewer per task:
/// the top process's switches before release (spawning, waiting at the
/// barrier) are in its record but not in the window. (Measured on this
/// 6.18 VM, a shell forking three children: 6 to 9 switches more than
/// the four tasks' records, `tests/trace_tree.rs`.)
pub fn expected_switches(counted: u64, tree_tasks: Option<u64>) -> (u64, u64, u64) {
    match tree_tasks {
        Some(tasks) => (counted + tasks, tasks, 2 * tasks),
        None => (counted, 0, 0),
    }
}

/// trace / expected switches ([`expected_switches`]), and whether the
/// trace is off by more than the allowance plus the tolerance.
pub fn switch_agreement(trace: u64, counted: u64, tree_tasks: Option<u64>) -> (Option<f64>, bool) {
    let (expected, below, above) = expected_switches(counted, tree_tasks);
    if tree_tasks.is_none() {
        return ratio(trace, expected);
    }
    let r = (expected > 0).then(|| trace as f64 / expected as f64);
    let tolerance = AGREEMENT_TOLERANCE * expected as f64;
    let (t, e) = (trace as f64, expected as f64);
    let off = t < e - below as f64 - tolerance || t > e + above as f64 + tolerance;
    (r, off)
}

/// The most the trace's time stamp of one switch lies after the clock
/// reading the kernel charges both of its tasks at, ns.
///
/// `__schedule()` (kernel/sched/core.c) reads the run queue's clock once
/// (`update_rq_clock()`), and both the outgoing task's last
/// `update_curr()` and the incoming task's `exec_start` (fair.c) use that
/// reading; `trace_sched_switch()` fires later, just before
/// `context_switch()`, with the run queue locked and interrupts off. Each
/// switch so moves the time between the two from the incoming task to the
/// outgoing one in the trace's view, and how long that path is depends on
/// how the outgoing task left (blocking or preempted). Between two
/// processes taking turns on one CPU the one that blocks more often gets
/// less of its time in the trace, the other more, and their sum agrees.
/// Measured on this VM (`schedlab bench trace`, pingpong pairs on one
/// CPU): 6 to 74 ns a switch; a few hundred instructions, so 1 µs bounds
/// it.
pub const SWITCH_STAMP_MAX_NS: u64 = 1_000;

/// Whether where the trace stamps a switch ([`SWITCH_STAMP_MAX_NS`])
/// explains a process's on-CPU time `trace_ns` against schedstat's `run_ns`:
/// the run's compared processes together (`run_totals`: their trace
/// on-CPU time and schedstat run time) agree within the tolerance, and
/// this one is off by no more than the bound times its switches.
fn stamp_explains(
    trace_ns: u64,
    run_ns: u64,
    switches: u64,
    run_totals: Option<(u64, u64)>,
) -> Option<String> {
    let (trace_sum, run_sum) = run_totals?;
    let (Some(together), false) = ratio(trace_sum, run_sum) else {
        return None;
    };
    let off_ns = trace_ns.abs_diff(run_ns);
    (switches > 0 && off_ns <= switches.saturating_mul(SWITCH_STAMP_MAX_NS)).then(|| {
        format!(
            "on-CPU: explained by where the trace stamps a switch ({:+.3} ms over {switches} \
             switches, {:.0} ns each; the run's processes together agree within {:.3} %)",
            (trace_ns as f64 - run_ns as f64) / 1e6,
            off_ns as f64 / switches as f64,
            100.0 * (together - 1.0).abs()
        )
    })
}

/// Whether missing switches explain a disagreement: the trace's on-CPU
/// time is short of schedstat's by no more than the unattributed time next
/// to the process (its true time lies in `[trace, trace + unattributed]`),
/// and its switches (short of what [`expected_switches`] allows) by no more
/// than the switch-outs never emitted. An on-CPU disagreement they cannot
/// cover may still be where the trace stamps switches
/// ([`SWITCH_STAMP_MAX_NS`]), judged with `run_totals`: the trace on-CPU
/// time and schedstat run time of the run's compared processes together.
/// Nothing else is claimed: a disagreement none of these covers is "not
/// explained".
pub fn explain(
    trace_oncpu_ns: u64,
    schedstat_run_ns: Option<u64>,
    unattributed_ns: u64,
    trace_switches: u64,
    (rusage_switches, tree_tasks): (Option<u64>, Option<u64>),
    missing_switches: u64,
    run_totals: Option<(u64, u64)>,
) -> String {
    let mut parts = Vec::new();
    if let Some(run) = schedstat_run_ns {
        let (_, off) = ratio(trace_oncpu_ns, run);
        if off {
            let covered = run >= trace_oncpu_ns && run - trace_oncpu_ns <= unattributed_ns;
            parts.push(if covered {
                format!(
                    "on-CPU: explained by switches never emitted ({:.3} ms unattributed)",
                    unattributed_ns as f64 / 1e6
                )
            } else if let Some(why) =
                stamp_explains(trace_oncpu_ns, run, trace_switches, run_totals)
            {
                why
            } else if unattributed_ns > 0 {
                format!(
                    "on-CPU: not explained ({:.3} ms unattributed, off by {:+.3} ms)",
                    unattributed_ns as f64 / 1e6,
                    (trace_oncpu_ns as f64 - run as f64) / 1e6
                )
            } else {
                "on-CPU: not explained by a missing event (none next to it)".to_string()
            });
        }
    }
    let Some(rusage_switches) = rusage_switches else {
        return parts.join("; ");
    };
    let (_, off) = switch_agreement(trace_switches, rusage_switches, tree_tasks);
    if off {
        let (expected, below, _) = expected_switches(rusage_switches, tree_tasks);
        let least = expected - below;
        let covered = least >= trace_switches && least - trace_switches <= missing_switches;
        parts.push(if covered {
            format!("switches: explained by {missing_switches} never emitted")
        } else {
            format!("switches: not explained ({missing_switches} never emitted)")
        });
    }
    parts.join("; ")
}

/// The trace part of a report.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TraceAnalysis {
    /// Traced ok runs, usable or not.
    pub traced_runs: usize,
    pub excluded: Vec<ExcludedRun>,
    pub conditions: Vec<ConditionTrace>,
    pub agreement: Vec<Agreement>,
}

/// trace / kernel, and whether it is off by more than the tolerance.
fn ratio(trace: u64, kernel: u64) -> (Option<f64>, bool) {
    if kernel == 0 {
        return (None, trace != 0);
    }
    let r = trace as f64 / kernel as f64;
    (Some(r), (r - 1.0).abs() > AGREEMENT_TOLERANCE)
}

/// Bin edges of the 1-2-5 series (1, 2, 5, 10, 20, … ns) from the last at
/// or below the smallest value to the first above the largest.
pub fn edges_125(min_ns: u64, max_ns: u64) -> Vec<u64> {
    let series = (0..19u32).flat_map(|d| [1u64, 2, 5].map(|m| 10u64.pow(d) * m));
    let mut edges: Vec<u64> = Vec::new();
    for e in series {
        if e <= min_ns.max(1) {
            edges.clear();
            edges.push(e);
            continue;
        }
        edges.push(e);
        if e > max_ns {
            break;
        }
    }
    edges
}

/// Counts of `h` in each bin of `edges`, from differences of cumulative
/// counts (so that no event lands in two bins); an edge is as exact as
/// the histogram (3 significant digits): values in its bucket fall above.
fn binned(h: &Latency, edges: &[u64]) -> Vec<Bin> {
    edges
        .windows(2)
        .map(|w| Bin {
            lo_ns: w[0],
            hi_ns: w[1],
            count: h.count_below(w[1]).saturating_sub(h.count_below(w[0])),
        })
        .collect()
}

/// The trace analysis of a campaign.
pub fn analyse(
    a: &Analysis,
    traces: &[RunTrace],
    processes: &HashMap<i64, Vec<ProcessRecord>>,
    latency: &[ProcessLatency],
) -> TraceAnalysis {
    let mut out = TraceAnalysis {
        traced_runs: traces.len(),
        ..TraceAnalysis::default()
    };
    let mut lat_by_run: HashMap<i64, Vec<&ProcessLatency>> = HashMap::new();
    for l in latency {
        lat_by_run.entry(l.run_id).or_default().push(l);
    }
    let runs = Runs {
        usable: usable_traces(traces, &mut out.excluded),
        processes,
        lat_by_run,
    };
    // Pooled slice histograms first: a group's bins span its conditions.
    let mut pooled_slices: Vec<Latency> = Vec::new();
    for (ci, c) in a.conditions.iter().enumerate() {
        let mut run_ids: Vec<i64> = c
            .cells
            .iter()
            .flat_map(|cell| cell.run_ids.iter().copied())
            .filter(|id| runs.usable.contains_key(id))
            .collect();
        run_ids.sort_unstable();
        run_ids.dedup();
        if run_ids.is_empty() {
            continue;
        }
        let (ct, slice) = condition_trace(ci, c, &run_ids, &runs, &mut out.agreement);
        out.conditions.push(ct);
        pooled_slices.push(slice);
    }
    bin_groups(&mut out.conditions, &pooled_slices);
    out
}

/// The usable traces by run id; the others go to `excluded` with the
/// reason.
fn usable_traces<'t>(
    traces: &'t [RunTrace],
    excluded: &mut Vec<ExcludedRun>,
) -> HashMap<i64, &'t RunTrace> {
    let mut usable: HashMap<i64, &RunTrace> = HashMap::new();
    for t in traces {
        if t.info.unusable {
            excluded.push(ExcludedRun {
                run_id: t.info.run_id,
                lost_events: t.info.lost_events,
                mismatched_switches: t.info.mismatched_switches,
                reason: t
                    .info
                    .verdict
                    .reason()
                    .unwrap_or_else(|| "marked unusable when stored".to_string()),
            });
        } else {
            usable.insert(t.info.run_id, t);
        }
    }
    usable
}

/// What [`analyse`] reads of each run: its usable trace, its process
/// records and its workload latency histograms.
struct Runs<'a> {
    usable: HashMap<i64, &'a RunTrace>,
    processes: &'a HashMap<i64, Vec<ProcessRecord>>,
    lat_by_run: HashMap<i64, Vec<&'a ProcessLatency>>,
}

/// One condition's traced runs `run_ids` (usable, sorted): its row, with
/// each compared process's agreement pushed to `agreement`, and its pooled
/// slice lengths.
fn condition_trace(
    ci: usize,
    c: &Condition,
    run_ids: &[i64],
    runs: &Runs,
    agreement: &mut Vec<Agreement>,
) -> (ConditionTrace, Latency) {
    let mut slice = Latency::new();
    let mut wake = Latency::new();
    let mut own = Latency::new();
    let mut own_name = None;
    let mut ct = ConditionTrace {
        condition: ci,
        label: c.label.clone(),
        policy: c.policy.clone(),
        group: c.group,
        runs: run_ids.len(),
        slices: 0,
        slice: Spread::of(&slice),
        bins: Vec::new(),
        preempted: 0,
        yielded: 0,
        voluntary: 0,
        migrations: 0,
        trace_wake: Spread::of(&wake),
        workload_latency: None,
        compared: 0,
        flagged: 0,
    };
    for id in run_ids {
        let t = runs.usable[id];
        let records = runs.processes.get(id).map_or(&[][..], Vec::as_slice);
        let first_of_run = agreement.len();
        for p in &t.processes {
            ct.slices += p.slices;
            ct.preempted += p.preempted;
            ct.yielded += p.yielded;
            ct.voluntary += p.voluntary;
            ct.migrations += p.migrations;
            slice.add(&p.slice_ns);
            wake.add(&p.wake_ns);
            // A simulated run's timeline and counters are both the
            // model's: comparing them would test nothing.
            if t.info.predicted {
                continue;
            }
            let Some(rec) = records.iter().find(|r| r.pid == p.tgid) else {
                continue;
            };
            let g = agreement_of(*id, ci, p, rec);
            ct.compared += 1;
            ct.flagged += usize::from(g.flagged);
            agreement.push(g);
        }
        explain_run(&mut agreement[first_of_run..]);
        for l in runs.lat_by_run.get(id).into_iter().flatten() {
            own.add(&l.histogram);
            own_name.get_or_insert_with(|| l.name.clone());
        }
    }
    ct.slice = Spread::of(&slice);
    ct.trace_wake = Spread::of(&wake);
    ct.workload_latency = own_name.map(|n| (n, Spread::of(&own)));
    (ct, slice)
}

/// A traced process of run `run_id` against its record's counters.
fn agreement_of(run_id: i64, ci: usize, p: &ProcessTrace, rec: &ProcessRecord) -> Agreement {
    // Inside the process's own work window when it is known (the window
    // rusage and schedstat cover), else the whole traced window.
    let (trace_oncpu_ns, trace_switches, unattributed_ns, missing_switches) = match p.work {
        Some(w) => (
            w.oncpu_ns,
            w.switches,
            w.unattributed_ns,
            w.missing_switches,
        ),
        None => {
            let (vol, invol) = p.rusage_switches();
            (
                p.oncpu_ns,
                vol + invol,
                p.unattributed_ns,
                p.missing_switches,
            )
        }
    };
    let switch = |f| rec.kernel.get(f);
    let rusage_switches = switch(Field::Nvcsw)
        .zip(switch(Field::Nivcsw))
        .map(|(v, i)| v + i);
    let tree_tasks = rec.figures.get("tree_tasks").map(|&t| t as u64);
    let schedstat_run_ns = rec.kernel.get(crate::fields::Field::RunNs);
    let (oncpu_ratio, oncpu_off) = match schedstat_run_ns {
        Some(run) => ratio(trace_oncpu_ns, run),
        None => (None, false),
    };
    // A tree whose exit records the kernel did not give has no
    // count to compare the trace's switches with.
    let (switch_ratio, switch_off) = match rusage_switches {
        Some(counted) => switch_agreement(trace_switches, counted, tree_tasks),
        None => (None, false),
    };
    let flagged = oncpu_off || switch_off;
    Agreement {
        run_id,
        condition: ci,
        process_index: rec.index,
        pid: p.tgid,
        trace_oncpu_ns,
        schedstat_run_ns,
        oncpu_ratio,
        trace_switches,
        rusage_switches,
        tree_tasks,
        switch_ratio,
        flagged,
        unattributed_ns,
        missing_switches,
        explanation: None,
    }
}

/// The trace on-CPU time and schedstat run time of a run's compared
/// processes together (those schedstat gave a run time).
pub fn run_totals(pairs: impl IntoIterator<Item = (u64, Option<u64>)>) -> Option<(u64, u64)> {
    pairs
        .into_iter()
        .filter_map(|(trace, run)| Some((trace, run?)))
        .reduce(|(ts, rs), (t, r)| (ts + t, rs + r))
}

/// Each flagged agreement of one run (`run`) gets its explanation, judged
/// with the run's processes together ([`explain`]).
fn explain_run(run: &mut [Agreement]) {
    let totals = run_totals(run.iter().map(|g| (g.trace_oncpu_ns, g.schedstat_run_ns)));
    for g in run.iter_mut().filter(|g| g.flagged) {
        g.explanation = Some(explain(
            g.trace_oncpu_ns,
            g.schedstat_run_ns,
            g.unattributed_ns,
            g.trace_switches,
            (g.rusage_switches, g.tree_tasks),
            g.missing_switches,
            totals,
        ));
    }
}

/// Bins per group, on the 1-2-5 series over the group's slice lengths
/// (`pooled_slices`: each condition's).
fn bin_groups(conditions: &mut [ConditionTrace], pooled_slices: &[Latency]) {
    let mut groups: Vec<usize> = conditions.iter().map(|c| c.group).collect();
    groups.dedup();
    for g in groups {
        let idx: Vec<usize> = (0..conditions.len())
            .filter(|&i| conditions[i].group == g)
            .collect();
        let filled: Vec<&Latency> = idx
            .iter()
            .map(|&i| &pooled_slices[i])
            .filter(|h| h.count() > 0)
            .collect();
        if filled.is_empty() {
            continue;
        }
        let lo = filled.iter().map(|h| h.quantile_ns(0.0)).min().unwrap_or(0);
        let hi = filled
            .iter()
            .map(|h| h.percentiles().max_ns)
            .max()
            .unwrap_or(0);
        let edges = edges_125(lo, hi);
        let mut bins: Vec<Vec<Bin>> = idx
            .iter()
            .map(|&i| binned(&pooled_slices[i], &edges))
            .collect();
        // Bins empty in every condition at either end (the histogram's
        // buckets straddle the edges) are dropped.
        let used = |k: usize| bins.iter().any(|b| b[k].count > 0);
        let n = edges.len().saturating_sub(1);
        let first = (0..n).find(|&k| used(k)).unwrap_or(0);
        let last = (0..n).rev().find(|&k| used(k)).map_or(0, |k| k + 1);
        for (b, &i) in bins.iter_mut().zip(&idx) {
            conditions[i].bins = b.drain(first..last.max(first)).collect();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_switches_explain_only_what_they_can_cover() {
        // 10 ms short of schedstat's 1 s with 12 ms unattributed: explained.
        assert_eq!(
            explain(
                990_000_000,
                Some(1_000_000_000),
                12_000_000,
                10,
                (Some(10), None),
                0,
                None
            ),
            "on-CPU: explained by switches never emitted (12.000 ms unattributed)"
        );
        // More than schedstat (the trace cannot gain time from a gap): not.
        assert_eq!(
            explain(
                1_020_000_000,
                Some(1_000_000_000),
                12_000_000,
                10,
                (Some(10), None),
                0,
                None
            ),
            "on-CPU: not explained (12.000 ms unattributed, off by +20.000 ms)"
        );
        assert_eq!(
            explain(
                1_020_000_000,
                Some(1_000_000_000),
                0,
                10,
                (Some(10), None),
                0,
                None
            ),
            "on-CPU: not explained by a missing event (none next to it)"
        );
        // Two switches short, two never emitted: explained; three short: not.
        assert_eq!(
            explain(1_000, Some(1_000), 0, 98, (Some(100), None), 2, None),
            "switches: explained by 2 never emitted"
        );
        assert_eq!(
            explain(1_000, Some(1_000), 0, 97, (Some(100), None), 2, None),
            "switches: not explained (2 never emitted)"
        );
        // A tree of 4 tasks counted 100 by its exit records is expected at
        // 104, from 4 fewer to 8 more (and 1 %): 98 switches with 2 never
        // emitted reach the 100 of one switch fewer per task; 97 do not.
        assert_eq!(
            explain(1_000, Some(1_000), 0, 98, (Some(100), Some(4)), 2, None),
            "switches: explained by 2 never emitted"
        );
        assert_eq!(
            explain(1_000, Some(1_000), 0, 97, (Some(100), Some(4)), 2, None),
            "switches: not explained (2 never emitted)"
        );
    }

    /// Two processes taking turns on one CPU (a pingpong pair measured on
    /// this VM by `bench trace`, 20,008 switches each): the trace gave one
    /// 1.486 ms less than schedstat (−2.20 %) and the other 1.486 ms more
    /// (+2.19 %), their sum the same: where the trace stamps a switch
    /// explains both. A lone process off by as much, or a pair whose
    /// shift is more than 1 µs a switch, is not explained.
    #[test]
    fn where_the_trace_stamps_switches_explains_time_moved_between_a_run_s_processes() {
        let pair = [
            (65_996_000, Some(67_482_000)),
            (69_173_000, Some(67_687_000)),
        ];
        let totals = run_totals(pair);
        assert_eq!(totals, Some((135_169_000, 135_169_000)));
        let why = |trace, run, switches, totals| {
            explain(
                trace,
                Some(run),
                0,
                switches,
                (Some(switches), None),
                0,
                totals,
            )
        };
        assert_eq!(
            why(69_173_000, 67_687_000, 20_008, totals),
            "on-CPU: explained by where the trace stamps a switch (+1.486 ms over 20008 \
             switches, 74 ns each; the run's processes together agree within 0.000 %)"
        );
        assert!(why(65_996_000, 67_482_000, 20_008, totals).contains("(-1.486 ms over"));
        let alone = run_totals([(69_173_000, Some(67_687_000))]);
        assert_eq!(
            why(69_173_000, 67_687_000, 20_008, alone),
            "on-CPU: not explained by a missing event (none next to it)"
        );
        // 1.486 ms over 1,000 switches is 1.5 µs a switch: beyond the bound.
        assert_eq!(
            why(69_173_000, 67_687_000, 1_000, totals),
            "on-CPU: not explained by a missing event (none next to it)"
        );
        // Processes without a schedstat run time are left out of the sum.
        assert_eq!(run_totals([(5, None)]), None);
    }

    /// A traced tree counts one switch per task more than its tasks' exit
    /// records (each task's last, after its record): 4 % more for a tree
    /// of four tasks and 100 recorded switches, flagged by the plain 1 %
    /// rule and not by the tree's.
    #[test]
    fn a_tree_s_switches_are_compared_with_its_exit_adjusted_count() {
        assert_eq!(expected_switches(100, None), (100, 0, 0));
        assert_eq!(expected_switches(100, Some(4)), (104, 4, 8));
        assert!(ratio(104, 100).1, "the plain rule flags it");
        let (r, off) = switch_agreement(104, 100, Some(4));
        assert_eq!(r, Some(1.0));
        assert!(!off);
        // Tasks preempted on their exit path (up to two more each), or
        // the top's switches before release (up to one fewer each), and
        // 1 % (1.04 here) around that.
        for trace in [99, 100, 104, 109, 113] {
            assert!(!switch_agreement(trace, 100, Some(4)).1, "{trace}");
        }
        // Beyond that: flagged.
        for trace in [97, 98, 114, 116] {
            assert!(switch_agreement(trace, 100, Some(4)).1, "{trace}");
        }
        // A process is still held to 1 %.
        assert!(!switch_agreement(1009, 1000, None).1);
        assert!(switch_agreement(1020, 1000, None).1);
        // A tree whose records count nothing yet has its tasks' last switches.
        assert_eq!(switch_agreement(3, 0, Some(3)), (Some(1.0), false));
    }

    #[test]
    fn edges_bracket_the_values_on_the_125_series() {
        assert_eq!(
            edges_125(3_000, 40_000),
            vec![2_000, 5_000, 10_000, 20_000, 50_000]
        );
        assert_eq!(edges_125(1_000, 1_000), vec![1_000, 2_000]);
        assert_eq!(edges_125(0, 7), vec![1, 2, 5, 10]);
        let e = edges_125(999_999, 4_000_000);
        assert_eq!(e.first(), Some(&500_000));
        assert_eq!(e.last(), Some(&5_000_000));
    }

    #[test]
    fn bins_count_every_value_once() {
        let mut h = Latency::new();
        for v in [1_500u64, 1_999, 2_000, 2_001, 4_900, 5_100, 9_000, 19_000] {
            h.record_ns(v);
        }
        let edges = edges_125(h.quantile_ns(0.0), h.percentiles().max_ns);
        let bins = binned(&h, &edges);
        assert_eq!(bins.iter().map(|b| b.count).sum::<u64>(), 8);
        assert_eq!(bins[0].lo_ns, 1_000);
        // 1.5 and 1.999 µs below 2 µs; 2.0 to 4.9 µs in the next bin.
        assert_eq!(bins.len(), 4);
        assert_eq!(bins[0].count, 2);
        assert_eq!(bins[1].count, 3);
    }

    #[test]
    fn ratios_flag_beyond_one_percent_and_counts_against_none() {
        assert_eq!(ratio(1000, 1000), (Some(1.0), false));
        assert_eq!(ratio(1009, 1000), (Some(1.009), false));
        assert!(ratio(1020, 1000).1);
        assert!(ratio(980, 1000).1);
        assert_eq!(ratio(0, 0), (None, false));
        assert_eq!(ratio(3, 0), (None, true));
    }
}
