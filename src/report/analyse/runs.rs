//! The runs of a campaign: status counts, the runs left out and why, the
//! per-run values folded from their processes, load and interference.

use super::groups::{Factors, run_label};
use super::windows::window_spread;
use crate::report::metric::{Metric, PER_PROCESS, process_values};
use crate::stats;
use crate::store::{ReportProcess, ReportRun};
use serde::Serialize;

/// Runs by status.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct StatusCounts {
    pub ok: usize,
    pub failed: usize,
    pub timed_out: usize,
    pub skipped: usize,
}

impl StatusCounts {
    pub(super) fn add(&mut self, status: &str) {
        match status {
            "ok" => self.ok += 1,
            "failed" => self.failed += 1,
            "timed_out" => self.timed_out += 1,
            _ => self.skipped += 1,
        }
    }

    pub fn total(&self) -> usize {
        self.ok + self.failed + self.timed_out + self.skipped
    }

    pub fn not_ok(&self) -> usize {
        self.total() - self.ok
    }
}

/// A run that is not in the statistics, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProblemRun {
    pub run_id: i64,
    pub seq: i64,
    pub rep: i64,
    pub label: String,
    pub status: String,
    pub reason: String,
}

/// Min / median / max of the 1-minute load average at run starts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LoadSummary {
    pub min: f64,
    pub median: f64,
    pub max: f64,
}

/// Runs with at least this many runnable tasks of other programs at start
/// are named in the summary (one is often a passing kernel thread).
pub const OTHERS_RUNNABLE_NOTE: i64 = 2;
/// Runs with at least this much steal time (%) are named in the summary.
pub const STEAL_NOTE_PCT: f64 = 2.0;
/// Runs whose CPUs other programs kept busy at least this much (%) are
/// named in the summary (`/proc/stat`'s ticks make a few % noise).
pub const OTHER_CPU_NOTE_PCT: f64 = 10.0;

/// Other programs' activity over the ok runs, schedlab's own processes
/// never counted (see `record::Interference`). Run lists are in campaign
/// order.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct InterferenceSummary {
    /// Ok runs with a count of runnable tasks at start.
    pub measured_runs: usize,
    pub max_others_runnable: Option<i64>,
    /// Ok runs with [`OTHERS_RUNNABLE_NOTE`] or more at start.
    pub busy_runs: Vec<i64>,
    pub max_steal_pct: Option<f64>,
    /// Ok runs with [`STEAL_NOTE_PCT`] or more steal time.
    pub steal_runs: Vec<i64>,
    pub max_other_cpu_pct: Option<f64>,
    /// Ok runs whose CPUs other programs kept [`OTHER_CPU_NOTE_PCT`] or
    /// more busy.
    pub other_cpu_runs: Vec<i64>,
}

impl InterferenceSummary {
    /// Summarise the ok runs of `runs`.
    pub fn of(runs: &[ReportRun]) -> InterferenceSummary {
        let ok: Vec<&ReportRun> = runs.iter().filter(|r| r.status == "ok").collect();
        let max_i = |v: &dyn Fn(&ReportRun) -> Option<i64>| ok.iter().filter_map(|r| v(r)).max();
        let max_f = |v: &dyn Fn(&ReportRun) -> Option<f64>| {
            ok.iter().filter_map(|r| v(r)).max_by(f64::total_cmp)
        };
        let over = |v: &dyn Fn(&ReportRun) -> bool| -> Vec<i64> {
            ok.iter().filter(|r| v(r)).map(|r| r.id).collect()
        };
        InterferenceSummary {
            measured_runs: ok.iter().filter(|r| r.others_runnable.is_some()).count(),
            max_others_runnable: max_i(&|r| r.others_runnable),
            busy_runs: over(&|r| r.others_runnable.is_some_and(|n| n >= OTHERS_RUNNABLE_NOTE)),
            max_steal_pct: max_f(&|r| r.steal_pct),
            steal_runs: over(&|r| r.steal_pct.is_some_and(|p| p >= STEAL_NOTE_PCT)),
            max_other_cpu_pct: max_f(&|r| r.other_cpu_pct),
            other_cpu_runs: over(&|r| r.other_cpu_pct.is_some_and(|p| p >= OTHER_CPU_NOTE_PCT)),
        }
    }

    /// Whether anything was measured.
    pub fn measured(&self) -> bool {
        self.measured_runs > 0 || self.max_steal_pct.is_some() || self.max_other_cpu_pct.is_some()
    }
}

/// One process of a run, kept until the run's values are derived.
struct ProcLite {
    index: i64,
    nice: Option<i64>,
    vals: [f64; PER_PROCESS],
    cpu_s: f64,
    work: f64,
    rate: f64,
    end_ns: Option<i64>,
}

/// Per-run values derived from its processes: all the analysis keeps of
/// them.
#[derive(Clone)]
pub(super) struct RunValues {
    /// Indexed by `metric.index()`; NaN when absent.
    pub(super) values: [f64; Metric::COUNT],
    pub(super) jain_cpu: Option<f64>,
    pub(super) jain_work: Option<f64>,
    pub(super) nices: Vec<Option<i64>>,
    /// Each process's share: of the CPU time all received over the run's
    /// common window (duration workloads), or of the summed CPU rates over
    /// each one's own lifetime (fixed work).
    pub(super) rate_shares: Option<Vec<f64>>,
    /// Duration workloads: how far apart the workers' windows ended.
    pub(super) window_spread_ns: Option<i64>,
    /// Each process's values by process index, indexed by
    /// [`Metric::process_slot`] (for the per-process view of a condition).
    pub(super) processes: Vec<[f64; PER_PROCESS]>,
}

impl ProcLite {
    fn of(p: &ReportProcess) -> ProcLite {
        let vals = process_values(p);
        let cpu_s = (p.usage.utime_us + p.usage.stime_us) as f64 / 1e6;
        let wall_s = p.wall_ns as f64 / 1e9;
        ProcLite {
            index: p.process_index,
            nice: p.nice,
            vals,
            cpu_s,
            work: p.work.map_or(f64::NAN, |w| w as f64),
            rate: if wall_s > 0.0 {
                cpu_s / wall_s
            } else {
                f64::NAN
            },
            end_ns: p.end_ns,
        }
    }
}

/// What the analysis keeps of a run's worker processes (`rows`, in any
/// order): the values of an ok run, None for the others. `timed`: the
/// workloads that run for a duration. The store folds each run's rows with
/// this as it reads them.
pub(super) fn fold_run(
    run: &ReportRun,
    rows: &[ReportProcess],
    timed: &[String],
) -> Option<RunValues> {
    if run.status != "ok" {
        return None;
    }
    let mut ps: Vec<ProcLite> = rows.iter().map(ProcLite::of).collect();
    ps.sort_by_key(|p| p.index);
    let mut values = [f64::NAN; Metric::COUNT];
    for (slot, v) in values.iter_mut().enumerate().take(PER_PROCESS) {
        let (sum, n) = ps
            .iter()
            .map(|p| p.vals[slot])
            .filter(|v| v.is_finite())
            .fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
        // The run's figure only when every worker has one: a mean over
        // the workers that have it would pass for the run's. A run
        // without it is listed as lacking it (`absent`).
        if n > 0 && n == ps.len() {
            *v = sum / n as f64;
        }
    }
    values[Metric::Makespan.index()] = run.makespan_ns.map_or(f64::NAN, |ns| ns as f64 / 1e9);
    let cpu: Vec<f64> = ps.iter().map(|p| p.cpu_s).collect();
    let work: Vec<f64> = ps.iter().map(|p| p.work).collect();
    let rates: Vec<f64> = ps.iter().map(|p| p.rate).collect();
    let multi = ps.len() >= 2;
    // A duration workload runs every worker from release to release +
    // duration: one common window, so each share is of the CPU time all
    // received in it. A share of rates over each process's own lifetime
    // would favour one that started late or ran on after the others.
    let timed_run = timed.contains(&run.workload);
    let share_basis = if timed_run { &cpu } else { &rates };
    let window_spread_ns = if timed_run {
        window_spread(ps.iter().map(|p| p.end_ns))
    } else {
        None
    };
    Some(RunValues {
        values,
        jain_cpu: if multi { stats::jain_index(&cpu) } else { None },
        jain_work: if multi {
            stats::jain_index(&work)
        } else {
            None
        },
        nices: ps.iter().map(|p| p.nice).collect(),
        rate_shares: stats::normalize_shares(share_basis),
        window_spread_ns,
        processes: ps.iter().map(|p| p.vals).collect(),
    })
}

/// Status counts and the runs left out and why.
pub(super) fn statuses(runs: &[ReportRun], factors: &Factors) -> (StatusCounts, Vec<ProblemRun>) {
    let mut counts = StatusCounts::default();
    let mut problems = Vec::new();
    for r in runs {
        counts.add(&r.status);
        if r.status != "ok" {
            problems.push(ProblemRun {
                run_id: r.id,
                seq: r.seq,
                rep: r.rep,
                label: run_label(r, factors),
                status: r.status.clone(),
                reason: r.reason.clone(),
            });
        }
    }
    (counts, problems)
}

/// Min / median / max of the load average over the runs that have one.
pub(super) fn load_summary(runs: &[ReportRun]) -> Option<LoadSummary> {
    let mut loads: Vec<f64> = runs.iter().filter_map(|r| r.load_avg_1m).collect();
    loads.sort_by(f64::total_cmp);
    (!loads.is_empty()).then(|| LoadSummary {
        min: loads[0],
        median: stats::percentile(&loads, 0.5),
        max: loads[loads.len() - 1],
    })
}
