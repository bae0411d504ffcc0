//! From a stored campaign to its statistics: conditions and their per-run
//! values, descriptive statistics with confidence intervals, flagged
//! outliers, policy comparisons with Holm-corrected p-values, scaling fits
//! and fairness. Every statistic comes from [`crate::stats`]; this module
//! only decides what to compute on which values, and says why.

use anyhow::Result;
use serde::Serialize;
use std::collections::HashMap;

use super::fmt::{self, fnv1a};
use super::metric::{Metric, PER_PROCESS, process_values};
use crate::policy::{Class, Policy};
use crate::stats::{self, Fit, MannWhitney, MannWhitneyMethod, Summary, WelchTest};
use crate::store::{ReportCampaign, ReportEnvironment, ReportProcess, ReportRun, Store};

/// Family-wise significance level of the comparisons.
pub const ALPHA: f64 = 0.05;
/// Fewer runs than this on either side: no test, "too few runs".
pub const MIN_PER_SIDE: usize = 3;
/// At least this many runs: bootstrap CI of the mean (else the t interval
/// unless the data are skewed).
pub const BOOTSTRAP_MIN_N: usize = 10;
/// Resamples × values per bootstrap interval are kept under this budget so
/// that large campaigns stay fast; never fewer than [`MIN_RESAMPLES`].
pub const BOOTSTRAP_BUDGET: usize = 250_000;
pub const MIN_RESAMPLES: usize = 400;
/// |Pearson's median skewness| 3·(mean − median)/sd above which a sample
/// (n ≥ 5) is called skewed.
pub const SKEW_THRESHOLD: f64 = 1.5;
/// Modified z-score above which a run is flagged: hyperfine's threshold
/// (|x − median| > 14.826·MAD, i.e. ten robust standard deviations, as
/// 0.6745·(x − median)/MAD > 10). Iglewicz and Hoaglin's 3.5
/// ([`stats::outliers::MODIFIED_Z_THRESHOLD`]) flags ordinary noise in
/// low-variance timings of a few runs.
pub const OUTLIER_Z: f64 = 10.0;
/// Fewest runs in a condition for outlier flagging: with 3 or 4 values the
/// MAD is one or two gaps and the score is meaningless.
pub const OUTLIER_MIN_N: usize = 5;

/// What to analyse and how.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// The campaign (default: the latest).
    pub campaign: Option<i64>,
    /// Metrics, in report order (empty: all).
    pub metrics: Vec<Metric>,
    /// Base seed of every bootstrap; each interval uses this XOR an FNV-1a
    /// hash of its label.
    pub bootstrap_seed: u64,
    /// Most resamples per bootstrap interval.
    pub resamples: usize,
    /// The WRR run whose slices are drawn (default: the first ok WRR run).
    pub gantt_run: Option<i64>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            campaign: None,
            metrics: Metric::ALL.to_vec(),
            bootstrap_seed: 1,
            resamples: 2000,
            gantt_run: None,
        }
    }
}

/// The settings a report was computed with (recorded in every output).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Settings {
    pub metrics: Vec<Metric>,
    pub alpha: f64,
    pub min_runs_per_side: usize,
    pub bootstrap_seed: u64,
    pub max_resamples: usize,
    pub bootstrap_min_n: usize,
    pub outlier_threshold: f64,
    pub outlier_min_runs: usize,
    pub skew_threshold: f64,
}

/// Runs by status.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct StatusCounts {
    pub ok: usize,
    pub failed: usize,
    pub timed_out: usize,
    pub skipped: usize,
}

impl StatusCounts {
    fn add(&mut self, status: &str) {
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

/// A workload of the campaign.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorkloadInfo {
    pub name: String,
    pub kind: String,
    pub work_unit: String,
    /// Stops after a duration (work done is the result) rather than after
    /// a fixed amount of work (time taken is the result).
    pub duration_based: bool,
}

/// The levels of each factor, in the campaign's order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Factors {
    pub policies: Vec<String>,
    pub workloads: Vec<WorkloadInfo>,
    pub processes: Vec<i64>,
    pub priority_modes: Vec<String>,
    pub cpus: Vec<String>,
    pub rt_runtime_us: Vec<i64>,
}

/// Everything of a condition but the policy: policies are compared within
/// a group.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct GroupKey {
    pub workload: String,
    pub processes: i64,
    pub priority_mode: String,
    pub cpus: String,
    pub rt_runtime_us: Option<i64>,
}

/// A group of conditions that differ only in policy.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Group {
    pub key: GroupKey,
    /// "pi, 2 processes" plus the factors that vary in the campaign.
    pub label: String,
    /// Indices into [`Analysis::conditions`], in policy order.
    pub conditions: Vec<usize>,
}

/// How a confidence interval of a mean was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CiMethod {
    /// Student-t interval.
    T,
    /// Seeded percentile bootstrap.
    Bootstrap,
}

impl CiMethod {
    pub fn name(self) -> &'static str {
        match self {
            CiMethod::T => "t",
            CiMethod::Bootstrap => "bootstrap",
        }
    }
}

/// A 95 % confidence interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Interval {
    pub lo: f64,
    pub hi: f64,
    pub method: CiMethod,
    /// Bootstrap resamples and seed (None for t).
    pub resamples: Option<usize>,
    pub seed: Option<u64>,
}

/// Statistics of one metric in one condition.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cell {
    pub metric: Metric,
    /// Runs with a value.
    pub n: usize,
    /// Of the per-run values (mean over the run's processes).
    pub summary: Option<Summary>,
    pub ci: Option<Interval>,
    /// Outliers or |3·(mean − median)/sd| > 1.5.
    pub skewed: bool,
    /// Of every process of every run (the seeds' per-process tables).
    pub per_process: Option<Summary>,
    /// Per-run values and the runs they come from, in campaign order.
    pub run_ids: Vec<i64>,
    pub values: Vec<f64>,
    /// Whether each value is a flagged outlier.
    pub flagged: Vec<bool>,
}

/// One factor combination of the campaign.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Condition {
    pub policy: String,
    pub group: usize,
    /// "pi, 2 processes, OTHER" plus the factors that vary.
    pub label: String,
    /// CPUs the workers could use (most over the runs).
    pub cpus_used: usize,
    pub runs: StatusCounts,
    /// One per metric of [`Settings::metrics`], in that order.
    pub cells: Vec<Cell>,
}

/// Verdict of a comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Holm-adjusted Mann–Whitney p < α.
    Different,
    /// Tested, not significant.
    NotSeparated,
    /// Fewer than [`MIN_PER_SIDE`] runs on a side.
    TooFewRuns,
}

/// Two policies compared on one metric within one group. `a` is the policy
/// with the lower (or equal) mean, so `ratio` = mean(a)/mean(b) ≤ 1.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    pub group: usize,
    pub metric: Metric,
    pub a: String,
    pub b: String,
    pub n_a: usize,
    pub n_b: usize,
    pub mean_a: Option<f64>,
    pub mean_b: Option<f64>,
    pub ratio: Option<f64>,
    /// 95 % percentile-bootstrap interval of the ratio of means.
    pub ratio_ci: Option<(f64, f64)>,
    pub resamples: usize,
    pub seed: u64,
    pub mann_whitney: Option<MannWhitney>,
    pub welch: Option<WelchTest>,
    /// Holm-adjusted over every comparison of the report.
    pub p_adjusted: Option<f64>,
    pub welch_p_adjusted: Option<f64>,
    /// Smallest Mann–Whitney p these sample sizes can give (exact test).
    pub min_attainable_p: Option<f64>,
    /// Flagged outlier runs on each side (kept in the test).
    pub outliers_a: usize,
    pub outliers_b: usize,
    pub verdict: Verdict,
    /// The finding in words, without the group ("OTHER wall time is …").
    pub statement: String,
    /// The statement prefixed with its group ("copy, 200 processes: …").
    pub sentence: String,
}

/// A flagged run of a condition and metric (kept in every statistic).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Outlier {
    pub condition: usize,
    pub label: String,
    pub metric: Metric,
    pub run_id: i64,
    pub seq: i64,
    pub rep: i64,
    pub value: f64,
    pub median: f64,
    /// Modified z-score.
    pub z: f64,
    /// value / median (None when the median is 0).
    pub times_median: Option<f64>,
}

/// Mean of a condition at one process count, for scaling plots.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScalingPoint {
    pub processes: i64,
    pub n: usize,
    pub mean: f64,
    pub ci: Option<(f64, f64)>,
}

/// How a metric grows with the number of processes for one policy and
/// workload: log–log slope over every run (1 = linear).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Scaling {
    pub policy: String,
    pub workload: String,
    pub priority_mode: String,
    pub cpus: String,
    pub rt_runtime_us: Option<i64>,
    pub label: String,
    pub metric: Metric,
    pub fit: Option<Fit>,
    pub points: Vec<ScalingPoint>,
}

/// Jain's fairness index within the runs of a condition.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fairness {
    pub condition: usize,
    pub label: String,
    /// Of per-process CPU time (user + system), one value per run.
    pub jain_cpu: Option<Summary>,
    /// Of per-process work done.
    pub jain_work: Option<Summary>,
    pub run_ids: Vec<i64>,
    pub jain_cpu_values: Vec<f64>,
}

/// Observed against predicted CPU share of one process position.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ShareRow {
    pub index: i64,
    pub nice: i64,
    pub predicted: f64,
    /// Mean over runs of the process's share: of the CPU time the run's
    /// processes received over their common window (duration workloads), or
    /// of the summed CPU rates, CPU time / own wall time (fixed work).
    pub observed: f64,
    /// observed / predicted − 1.
    pub error: f64,
}

/// Non-uniform nice under a fair policy: the shares the kernel's weight
/// table predicts against what the processes got.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ShareCheck {
    pub condition: usize,
    pub label: String,
    pub runs: usize,
    pub processes: usize,
    pub cpus_used: usize,
    /// More processes than CPUs and all on the same CPUs: the prediction's
    /// premise (one shared run queue) roughly holds.
    pub competing: bool,
    /// The workload stops after a fixed amount of work (not a duration).
    pub fixed_work: bool,
    pub rows: Vec<ShareRow>,
    pub max_abs_error: f64,
}

/// Duration workloads: whether every worker's window ended at release +
/// duration, as the workers are built to (all shares, fairness and work per
/// second assume one common window).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct WindowCheck {
    /// Ok runs of duration workloads with end times for their workers.
    pub runs_checked: usize,
    /// Runs whose workers' windows ended further apart than
    /// `max(WINDOW_TOLERANCE_MS, 1 % of the makespan)`.
    pub differing: Vec<WindowDiff>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WindowDiff {
    pub run_id: i64,
    pub label: String,
    /// Last worker's end minus first worker's end.
    pub spread_ms: f64,
}

/// Windows of one run may end this far apart before the report says so (a
/// worker notices the deadline between two steps of its loop, and a noisy
/// machine delays that by milliseconds).
pub const WINDOW_TOLERANCE_MS: f64 = 20.0;

/// Last end minus first end over a run's workers (None when any is unknown).
fn window_spread(ends: impl Iterator<Item = Option<i64>>) -> Option<i64> {
    let ends: Option<Vec<i64>> = ends.collect();
    let ends = ends.filter(|e| !e.is_empty())?;
    Some(ends.iter().max()? - ends.iter().min()?)
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

/// The analysed campaign: what every report section is built from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Analysis {
    pub campaign: ReportCampaign,
    pub settings: Settings,
    pub counts: StatusCounts,
    pub factors: Factors,
    pub environments: Vec<ReportEnvironment>,
    pub load: Option<LoadSummary>,
    pub interference: InterferenceSummary,
    pub process_rows: u64,
    pub groups: Vec<Group>,
    pub conditions: Vec<Condition>,
    pub comparisons: Vec<Comparison>,
    pub outliers: Vec<Outlier>,
    pub scaling: Vec<Scaling>,
    pub fairness: Vec<Fairness>,
    pub shares: Vec<ShareCheck>,
    pub windows: WindowCheck,
    pub problems: Vec<ProblemRun>,
    /// run id → (seq, rep), for labels.
    #[serde(skip)]
    pub run_info: HashMap<i64, (i64, i64)>,
}

impl Analysis {
    /// Position of a metric among the analysed ones.
    pub fn metric_index(&self, m: Metric) -> Option<usize> {
        self.settings.metrics.iter().position(|&x| x == m)
    }

    /// Unit of a metric for a workload (work's unit is the workload's).
    pub fn unit(&self, m: Metric, workload: &str) -> String {
        if m == Metric::Work {
            self.factors
                .workloads
                .iter()
                .find(|w| w.name == workload)
                .map_or_else(String::new, |w| w.work_unit.clone())
        } else {
            m.unit().to_string()
        }
    }

    /// "wall time (s)".
    pub fn axis_label(&self, m: Metric, workload: &str) -> String {
        let u = self.unit(m, workload);
        if u.is_empty() {
            m.label().to_string()
        } else {
            format!("{} ({u})", m.label())
        }
    }

    /// Comparisons by verdict.
    pub fn count_verdict(&self, v: Verdict) -> usize {
        self.comparisons.iter().filter(|c| c.verdict == v).count()
    }
}

/// A policy as written in sentences: "OTHER".
pub fn policy_label(p: &str) -> String {
    p.to_uppercase()
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

/// Per-run values derived from its processes.
struct RunValues {
    /// Indexed like [`Metric::ALL`]; NaN when absent.
    values: [f64; 11],
    jain_cpu: Option<f64>,
    jain_work: Option<f64>,
    nices: Vec<Option<i64>>,
    /// Each process's share: of the CPU time all received over the run's
    /// common window (duration workloads), or of the summed CPU rates over
    /// each one's own lifetime (fixed work).
    rate_shares: Option<Vec<f64>>,
    /// Duration workloads: how far apart the workers' windows ended.
    window_spread_ns: Option<i64>,
}

/// Order of factor levels from the campaign's spec (JSON), where present.
struct SpecOrder {
    policies: Vec<String>,
    workloads: Vec<String>,
    priorities: Vec<String>,
    cpus: Vec<String>,
    /// Workloads that stop after a duration rather than an amount of work.
    timed: Vec<String>,
}

fn spec_order(spec_json: &str) -> SpecOrder {
    let v: serde_json::Value = serde_json::from_str(spec_json).unwrap_or_default();
    let strings = |key: &str, field: Option<&str>| -> Vec<String> {
        v.get(key)
            .and_then(|a| a.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|x| match field {
                        Some(f) => x.get(f).and_then(|n| n.as_str()).map(str::to_string),
                        None => x.as_str().map(str::to_string),
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let cpus = v
        .get("cpus")
        .and_then(|a| a.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|x| serde_json::from_value::<crate::spec::Cpus>(x.clone()).ok())
                .map(|c| c.label())
                .collect()
        })
        .unwrap_or_default();
    let timed = v
        .get("workloads")
        .and_then(|a| a.as_array())
        .map(|a| {
            a.iter()
                .filter(|w| w.pointer("/workload/stop/duration_ns").is_some())
                .filter_map(|w| w.get("name").and_then(|n| n.as_str()).map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    SpecOrder {
        timed,
        policies: strings("policies", None),
        workloads: strings("workloads", Some("name")),
        priorities: strings("priorities", Some("name")),
        cpus,
    }
}

/// Sort `levels` by their position in `order`, unknown ones after, by
/// `fallback` then name.
fn sort_levels(levels: &mut [String], order: &[String], fallback: impl Fn(&str) -> usize) {
    levels.sort_by_key(|l| {
        (
            order.iter().position(|o| o == l).unwrap_or(usize::MAX),
            fallback(l),
            l.clone(),
        )
    });
}

fn cpu_count(list: &str) -> usize {
    match crate::spec::Cpus::parse(list) {
        Ok(crate::spec::Cpus::List(l)) => l.len(),
        _ => 0,
    }
}

/// Map items to results on up to `available_parallelism` threads, in order.
fn par_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(8);
    if threads <= 1 || items.len() < 16 {
        return items.iter().map(&f).collect();
    }
    let chunk = items.len().div_ceil(threads);
    std::thread::scope(|s| {
        let handles: Vec<_> = items
            .chunks(chunk)
            .map(|c| {
                let f = &f;
                s.spawn(move || c.iter().map(f).collect::<Vec<R>>())
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("analysis worker thread"))
            .collect()
    })
}

/// The seed of one bootstrap interval: the base seed XOR an FNV-1a hash of
/// its label, kept to 53 bits so that JSON readers using doubles see it
/// exactly.
fn seed_for(opts: &Options, label: &str) -> u64 {
    (opts.bootstrap_seed ^ fnv1a(label)) & ((1 << 53) - 1)
}

/// Resamples for a bootstrap over `n` values in total.
fn resamples_for(max: usize, n: usize) -> usize {
    (BOOTSTRAP_BUDGET / n.max(1)).clamp(MIN_RESAMPLES.min(max), max.max(1))
}

/// Smallest two-sided exact Mann–Whitney p for sizes (m, n): 2 / C(m+n, m).
fn min_exact_p(m: usize, n: usize) -> f64 {
    let mut c = 1.0_f64;
    for i in 0..m.min(n) {
        c = c * (m + n - i) as f64 / (i + 1) as f64;
    }
    (2.0 / c).min(1.0)
}

/// Statistics of one metric in one condition.
fn cell(metric: Metric, run_ids: Vec<i64>, values: Vec<f64>, label: &str, opts: &Options) -> Cell {
    let n = values.len();
    let summary = stats::summarize(&values);
    let z = stats::modified_z_scores(&values);
    let flagged: Vec<bool> = z
        .iter()
        .map(|z| n >= OUTLIER_MIN_N && z.abs() > OUTLIER_Z)
        .collect();
    let skewed = match &summary {
        Some(s) if n >= MIN_PER_SIDE && s.sd > 0.0 => {
            flagged.iter().any(|&f| f)
                || (n >= 5 && (3.0 * (s.mean - s.median) / s.sd).abs() > SKEW_THRESHOLD)
        }
        _ => false,
    };
    let ci = summary.as_ref().and_then(|s| {
        if n < 2 {
            None
        } else if n >= BOOTSTRAP_MIN_N || skewed {
            let resamples = resamples_for(opts.resamples, n);
            let seed = seed_for(opts, &format!("mean|{label}|{}", metric.name()));
            let (lo, hi) = stats::bootstrap_mean_ci(&values, 0.95, resamples, seed);
            (lo.is_finite() && hi.is_finite()).then_some(Interval {
                lo,
                hi,
                method: CiMethod::Bootstrap,
                resamples: Some(resamples),
                seed: Some(seed),
            })
        } else {
            Some(Interval {
                lo: s.ci95_lo,
                hi: s.ci95_hi,
                method: CiMethod::T,
                resamples: None,
                seed: None,
            })
        }
    });
    Cell {
        metric,
        n,
        summary,
        ci,
        skewed,
        per_process: None,
        run_ids,
        values,
        flagged,
    }
}

/// The 95 % CI of the mean of `values` for the report's special sections:
/// Student-t below [`BOOTSTRAP_MIN_N`] values, a seeded percentile bootstrap
/// from there on (seed: the report's base seed XOR an FNV-1a hash of
/// `label`). None below 2 values or for non-finite input.
pub fn mean_interval(values: &[f64], label: &str, settings: &Settings) -> Option<Interval> {
    let s = stats::summarize(values)?;
    if s.n < 2 {
        return None;
    }
    if s.n < BOOTSTRAP_MIN_N {
        return Some(Interval {
            lo: s.ci95_lo,
            hi: s.ci95_hi,
            method: CiMethod::T,
            resamples: None,
            seed: None,
        });
    }
    let resamples = resamples_for(settings.max_resamples, s.n);
    let seed = (settings.bootstrap_seed ^ fnv1a(&format!("mean|{label}"))) & ((1 << 53) - 1);
    let (lo, hi) = stats::bootstrap_mean_ci(values, 0.95, resamples, seed);
    (lo.is_finite() && hi.is_finite()).then_some(Interval {
        lo,
        hi,
        method: CiMethod::Bootstrap,
        resamples: Some(resamples),
        seed: Some(seed),
    })
}

/// The 95 % percentile-bootstrap interval of mean(a) / mean(b) for the
/// report's special sections (seeded like [`mean_interval`]). None with
/// fewer than 2 values on a side.
pub fn ratio_interval(
    a: &[f64],
    b: &[f64],
    label: &str,
    settings: &Settings,
) -> Option<(f64, f64)> {
    if a.len() < 2 || b.len() < 2 {
        return None;
    }
    let resamples = resamples_for(settings.max_resamples, a.len() + b.len());
    let seed = (settings.bootstrap_seed ^ fnv1a(&format!("ratio|{label}"))) & ((1 << 53) - 1);
    stats::bootstrap_ratio_ci(a, b, 0.95, resamples, seed)
}

/// The settings of a report with default options (for tests of the
/// sections' computations).
#[cfg(test)]
pub(crate) fn tests_settings() -> Settings {
    Settings {
        metrics: Metric::ALL.to_vec(),
        alpha: ALPHA,
        min_runs_per_side: MIN_PER_SIDE,
        bootstrap_seed: 1,
        max_resamples: 2000,
        bootstrap_min_n: BOOTSTRAP_MIN_N,
        outlier_threshold: OUTLIER_Z,
        outlier_min_runs: OUTLIER_MIN_N,
        skew_threshold: SKEW_THRESHOLD,
    }
}

/// A comparison to compute: group, the two conditions, the metric slot.
struct Job {
    group: usize,
    ca: usize,
    cb: usize,
    slot: usize,
}

fn compare(a: &Analysis, job: &Job, opts: &Options) -> Comparison {
    let metric = a.settings.metrics[job.slot];
    let (ca, cb) = (&a.conditions[job.ca], &a.conditions[job.cb]);
    let (xa, xb) = (&ca.cells[job.slot], &cb.cells[job.slot]);
    let mean = |c: &Cell| c.summary.as_ref().map(|s| s.mean);
    // Lower mean first, so that ratios read "0.62× B's".
    let swap = matches!((mean(xa), mean(xb)), (Some(ma), Some(mb)) if mb < ma);
    let (ca, cb, xa, xb) = if swap {
        (cb, ca, xb, xa)
    } else {
        (ca, cb, xa, xb)
    };
    let (mean_a, mean_b) = (mean(xa), mean(xb));
    let ratio = match (mean_a, mean_b) {
        (Some(x), Some(y)) if y != 0.0 => Some(x / y),
        _ => None,
    };
    let n_total = xa.n + xb.n;
    let resamples = resamples_for(opts.resamples, n_total);
    let seed = seed_for(
        opts,
        &format!(
            "ratio|{}|{}|{}|{}",
            a.groups[job.group].label,
            ca.policy,
            cb.policy,
            metric.name()
        ),
    );
    let enough = xa.n >= MIN_PER_SIDE && xb.n >= MIN_PER_SIDE;
    let (mann_whitney, welch, ratio_ci) = if enough {
        (
            stats::mann_whitney_u(&xa.values, &xb.values),
            stats::welch_t_test(&xa.values, &xb.values),
            ratio.and_then(|_| {
                stats::bootstrap_ratio_ci(&xa.values, &xb.values, 0.95, resamples, seed)
            }),
        )
    } else {
        (None, None, None)
    };
    let min_attainable_p = (enough
        && xa.n <= stats::hypothesis::MANN_WHITNEY_EXACT_MAX_N
        && xb.n <= stats::hypothesis::MANN_WHITNEY_EXACT_MAX_N)
        .then(|| min_exact_p(xa.n, xb.n));
    Comparison {
        group: job.group,
        metric,
        a: ca.policy.clone(),
        b: cb.policy.clone(),
        n_a: xa.n,
        n_b: xb.n,
        mean_a,
        mean_b,
        ratio,
        ratio_ci,
        resamples,
        seed,
        mann_whitney,
        welch,
        p_adjusted: None,
        welch_p_adjusted: None,
        min_attainable_p,
        outliers_a: xa.flagged.iter().filter(|&&f| f).count(),
        outliers_b: xb.flagged.iter().filter(|&&f| f).count(),
        verdict: Verdict::TooFewRuns,
        statement: String::new(),
        sentence: String::new(),
    }
}

/// The plain-language statement of a comparison (without its group).
fn statement(c: &Comparison) -> String {
    let (pa, pb) = (policy_label(&c.a), policy_label(&c.b));
    let what = c.metric.label();
    let verb = if c.metric.plural() { "are" } else { "is" };
    let p = c.p_adjusted.map_or_else(|| "p –".into(), fmt::p_eq);
    let n = format!("n = {} vs {}", c.n_a, c.n_b);
    let mut flagged = Vec::new();
    for (pol, k) in [(&pa, c.outliers_a), (&pb, c.outliers_b)] {
        if k > 0 {
            flagged.push(format!(
                "{pol} includes {}",
                if k == 1 {
                    "1 outlier run".to_string()
                } else {
                    format!("{k} outlier runs")
                }
            ));
        }
    }
    let note = if flagged.is_empty() {
        String::new()
    } else {
        format!("; {}", flagged.join(", "))
    };
    match c.verdict {
        Verdict::TooFewRuns => format!(
            "too few runs to compare {pa} and {pb} on {what} ({n}; at least {MIN_PER_SIDE} per side needed)"
        ),
        Verdict::Different => match (c.ratio, c.mean_a) {
            (_, Some(0.0)) => format!(
                "{pa} has no {what} (mean 0) against {pb}'s {} ({p}, {n}{note})",
                fmt::opt(c.mean_b)
            ),
            (Some(r), _) => {
                let ci = c.ratio_ci.map_or_else(String::new, |(lo, hi)| {
                    format!("95% CI {}–{}, ", fmt::ratio(lo), fmt::ratio(hi))
                });
                format!(
                    "{pa} {what} {verb} {}× {pb}'s ({ci}{p}, {n}{note})",
                    fmt::ratio(r)
                )
            }
            (None, _) => format!(
                "{pa} {what} average {} against {pb}'s {} ({p}, {n}{note})",
                fmt::opt(c.mean_a),
                fmt::opt(c.mean_b)
            ),
        },
        Verdict::NotSeparated => {
            let r = c.ratio.map_or_else(
                || "ratio undefined".into(),
                |r| format!("ratio {}", fmt::ratio(r)),
            );
            let ci = c.ratio_ci.map_or_else(String::new, |(lo, hi)| {
                format!(", CI {}–{}", fmt::ratio(lo), fmt::ratio(hi))
            });
            format!("the data do not separate {pa} and {pb} on {what} ({r}{ci}, {p}, {n}{note})")
        }
    }
}

/// A scaling line: policy, workload, priority mode, CPUs, RT runtime.
type LineKey = (String, String, String, String, Option<i64>);

/// Analyse a campaign of the store.
pub fn analyse(store: &Store, opts: &Options) -> Result<Analysis> {
    let campaign = store.report_campaign(opts.campaign)?;
    let runs = store.report_runs(campaign.id)?;
    let environments = store.report_environments(campaign.id)?;
    let units: HashMap<String, String> =
        store.report_work_units(campaign.id)?.into_iter().collect();
    let metrics = if opts.metrics.is_empty() {
        Metric::ALL.to_vec()
    } else {
        let mut m = opts.metrics.clone();
        m.sort();
        m.dedup();
        m
    };
    let settings = Settings {
        metrics: metrics.clone(),
        alpha: ALPHA,
        min_runs_per_side: MIN_PER_SIDE,
        bootstrap_seed: opts.bootstrap_seed,
        max_resamples: opts.resamples,
        bootstrap_min_n: BOOTSTRAP_MIN_N,
        outlier_threshold: OUTLIER_Z,
        outlier_min_runs: OUTLIER_MIN_N,
        skew_threshold: SKEW_THRESHOLD,
    };

    // Stream the processes of ok runs into per-run lists.
    let run_index: HashMap<i64, usize> = runs.iter().enumerate().map(|(i, r)| (r.id, i)).collect();
    let mut procs: Vec<Vec<ProcLite>> = runs.iter().map(|_| Vec::new()).collect();
    let process_rows = store.for_each_report_process(campaign.id, |p: &ReportProcess| {
        if let Some(&i) = run_index.get(&p.run_id) {
            let vals = process_values(p);
            let cpu_s = (p.usage.utime_us + p.usage.stime_us) as f64 / 1e6;
            let wall_s = p.wall_ns as f64 / 1e9;
            procs[i].push(ProcLite {
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
            });
        }
    })?;

    // Factor levels in the spec's order.
    let order = spec_order(&campaign.spec_json);
    let mut policies: Vec<String> = Vec::new();
    let mut workloads: Vec<String> = Vec::new();
    let mut processes: Vec<i64> = Vec::new();
    let mut modes: Vec<String> = Vec::new();
    let mut cpus: Vec<String> = Vec::new();
    let mut rts: Vec<i64> = Vec::new();
    for r in &runs {
        if !policies.contains(&r.policy) {
            policies.push(r.policy.clone());
        }
        if !workloads.contains(&r.workload) {
            workloads.push(r.workload.clone());
        }
        if !processes.contains(&r.processes) {
            processes.push(r.processes);
        }
        if !modes.contains(&r.priority_mode) {
            modes.push(r.priority_mode.clone());
        }
        if !cpus.contains(&r.cpus) {
            cpus.push(r.cpus.clone());
        }
        if let Some(v) = r.rt_runtime_us
            && !rts.contains(&v)
        {
            rts.push(v);
        }
    }
    sort_levels(&mut policies, &order.policies, |p| {
        Policy::parse(p)
            .and_then(|p| Policy::ALL.iter().position(|&x| x == p))
            .unwrap_or(usize::MAX)
    });
    sort_levels(&mut workloads, &order.workloads, |_| 0);
    sort_levels(&mut modes, &order.priorities, |_| 0);
    sort_levels(&mut cpus, &order.cpus, |c| usize::from(c != "all"));
    processes.sort_unstable();
    rts.sort_unstable();
    let factors = Factors {
        policies: policies.clone(),
        workloads: workloads
            .iter()
            .map(|w| WorkloadInfo {
                name: w.clone(),
                kind: runs
                    .iter()
                    .find(|r| &r.workload == w)
                    .map(|r| r.workload_kind.clone())
                    .unwrap_or_default(),
                work_unit: units.get(w).cloned().unwrap_or_default(),
                duration_based: order.timed.contains(w),
            })
            .collect(),
        processes: processes.clone(),
        priority_modes: modes.clone(),
        cpus: cpus.clone(),
        rt_runtime_us: rts.clone(),
    };
    let pos = |v: &[String], x: &str| v.iter().position(|y| y == x).unwrap_or(usize::MAX);

    let group_label = |k: &GroupKey| {
        let mut s = format!(
            "{}, {} process{}",
            k.workload,
            k.processes,
            if k.processes == 1 { "" } else { "es" }
        );
        if modes.len() > 1 {
            s.push_str(&format!(", priorities {}", k.priority_mode));
        }
        if cpus.len() > 1 {
            s.push_str(&format!(", cpus {}", k.cpus));
        }
        if let Some(rt) = k.rt_runtime_us {
            s.push_str(&format!(", rt_runtime {rt} µs"));
        }
        s
    };
    let run_label = |r: &ReportRun| {
        format!(
            "{}, {}",
            group_label(&GroupKey {
                workload: r.workload.clone(),
                processes: r.processes,
                priority_mode: r.priority_mode.clone(),
                cpus: r.cpus.clone(),
                rt_runtime_us: r.rt_runtime_us,
            }),
            policy_label(&r.policy)
        )
    };

    // Groups and conditions, in factor order.
    let mut keyed: Vec<(GroupKey, String)> = Vec::new();
    let mut cond_of_run: Vec<usize> = Vec::with_capacity(runs.len());
    let mut cond_index: HashMap<(GroupKey, String), usize> = HashMap::new();
    for r in &runs {
        let key = (
            GroupKey {
                workload: r.workload.clone(),
                processes: r.processes,
                priority_mode: r.priority_mode.clone(),
                cpus: r.cpus.clone(),
                rt_runtime_us: r.rt_runtime_us,
            },
            r.policy.clone(),
        );
        let n = cond_index.len();
        let i = *cond_index.entry(key.clone()).or_insert_with(|| {
            keyed.push(key);
            n
        });
        cond_of_run.push(i);
    }
    let sort_key = |(g, p): &(GroupKey, String)| {
        (
            pos(&workloads, &g.workload),
            g.processes,
            pos(&modes, &g.priority_mode),
            pos(&cpus, &g.cpus),
            g.rt_runtime_us,
            pos(&policies, p),
        )
    };
    let mut sorted: Vec<usize> = (0..keyed.len()).collect();
    sorted.sort_by_key(|&i| sort_key(&keyed[i]));
    let mut new_pos = vec![0; keyed.len()];
    for (new, &old) in sorted.iter().enumerate() {
        new_pos[old] = new;
    }
    let cond_of_run: Vec<usize> = cond_of_run.iter().map(|&c| new_pos[c]).collect();
    let keyed: Vec<(GroupKey, String)> = sorted.iter().map(|&i| keyed[i].clone()).collect();
    let mut groups: Vec<Group> = Vec::new();
    let mut cond_group = Vec::with_capacity(keyed.len());
    for (ci, (g, _)) in keyed.iter().enumerate() {
        if groups.last().is_none_or(|last| &last.key != g) {
            groups.push(Group {
                key: g.clone(),
                label: group_label(g),
                conditions: Vec::new(),
            });
        }
        let gi = groups.len() - 1;
        groups[gi].conditions.push(ci);
        cond_group.push(gi);
    }

    // Per-run values.
    let mut counts = StatusCounts::default();
    let mut problems = Vec::new();
    let mut run_values: Vec<Option<RunValues>> = Vec::with_capacity(runs.len());
    for (i, r) in runs.iter().enumerate() {
        counts.add(&r.status);
        if r.status != "ok" {
            problems.push(ProblemRun {
                run_id: r.id,
                seq: r.seq,
                rep: r.rep,
                label: run_label(r),
                status: r.status.clone(),
                reason: r.reason.clone(),
            });
            run_values.push(None);
            continue;
        }
        let ps = &mut procs[i];
        ps.sort_by_key(|p| p.index);
        let mut values = [f64::NAN; 11];
        for (slot, v) in values.iter_mut().enumerate().take(PER_PROCESS) {
            let (sum, n) = ps
                .iter()
                .map(|p| p.vals[slot])
                .filter(|v| v.is_finite())
                .fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
            if n > 0 {
                *v = sum / n as f64;
            }
        }
        values[Metric::Makespan as usize] = r.makespan_ns.map_or(f64::NAN, |ns| ns as f64 / 1e9);
        let cpu: Vec<f64> = ps.iter().map(|p| p.cpu_s).collect();
        let work: Vec<f64> = ps.iter().map(|p| p.work).collect();
        let rates: Vec<f64> = ps.iter().map(|p| p.rate).collect();
        let multi = ps.len() >= 2;
        // A duration workload runs every worker from release to release +
        // duration: one common window, so each share is of the CPU time all
        // received in it. A share of rates over each process's own lifetime
        // would favour one that started late or ran on after the others.
        let timed_run = order.timed.contains(&r.workload);
        let share_basis = if timed_run { &cpu } else { &rates };
        let window_spread_ns = if timed_run {
            window_spread(ps.iter().map(|p| p.end_ns))
        } else {
            None
        };
        run_values.push(Some(RunValues {
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
        }));
    }

    // Conditions with their per-run values.
    let mut cond_runs: Vec<Vec<usize>> = vec![Vec::new(); keyed.len()];
    let mut cond_status: Vec<StatusCounts> = vec![StatusCounts::default(); keyed.len()];
    let mut cond_cpus: Vec<usize> = vec![0; keyed.len()];
    for (i, r) in runs.iter().enumerate() {
        let c = cond_of_run[i];
        cond_status[c].add(&r.status);
        cond_cpus[c] = cond_cpus[c].max(cpu_count(&r.cpu_list));
        if run_values[i].is_some() {
            cond_runs[c].push(i);
        }
    }
    let labels: Vec<String> = keyed
        .iter()
        .enumerate()
        .map(|(ci, (_, p))| format!("{}, {}", groups[cond_group[ci]].label, policy_label(p)))
        .collect();
    let cell_jobs: Vec<(usize, usize)> = (0..keyed.len())
        .flat_map(|c| (0..metrics.len()).map(move |m| (c, m)))
        .collect();
    let mut cells: Vec<Cell> = par_map(&cell_jobs, |&(c, m)| {
        let metric = metrics[m];
        let slot = metric as usize;
        let mut ids = Vec::new();
        let mut vals = Vec::new();
        for &ri in &cond_runs[c] {
            let v = run_values[ri].as_ref().expect("ok run").values[slot];
            if v.is_finite() {
                ids.push(runs[ri].id);
                vals.push(v);
            }
        }
        let mut cell = cell(metric, ids, vals, &labels[c], opts);
        if let Some(ps) = metric.process_slot() {
            let all: Vec<f64> = cond_runs[c]
                .iter()
                .flat_map(|&ri| procs[ri].iter().map(move |p| p.vals[ps]))
                .filter(|v| v.is_finite())
                .collect();
            cell.per_process = stats::summarize(&all);
        }
        cell
    });
    drop(procs);
    let mut conditions: Vec<Condition> = Vec::with_capacity(keyed.len());
    for (ci, (_, policy)) in keyed.iter().enumerate() {
        let rest = cells.split_off(metrics.len());
        let mine = std::mem::replace(&mut cells, rest);
        conditions.push(Condition {
            policy: policy.clone(),
            group: cond_group[ci],
            label: labels[ci].clone(),
            cpus_used: cond_cpus[ci],
            runs: cond_status[ci].clone(),
            cells: mine,
        });
    }

    let run_info: HashMap<i64, (i64, i64)> = runs.iter().map(|r| (r.id, (r.seq, r.rep))).collect();

    let outliers = find_outliers(&conditions, &run_info);

    let per_condition: Vec<Vec<(i64, &RunValues)>> = cond_runs
        .iter()
        .map(|rs| {
            rs.iter()
                .map(|&ri| (runs[ri].id, run_values[ri].as_ref().expect("ok run")))
                .collect()
        })
        .collect();
    let (fairness, shares) =
        fairness_and_shares(&conditions, &groups, &per_condition, &order.timed);
    let mut windows = WindowCheck::default();
    for (r, v) in runs.iter().zip(&run_values) {
        let Some(spread_ns) = v.as_ref().and_then(|v| v.window_spread_ns) else {
            continue;
        };
        windows.runs_checked += 1;
        let spread_ms = spread_ns as f64 / 1e6;
        let makespan_ms = r.makespan_ns.unwrap_or(0) as f64 / 1e6;
        if spread_ms > WINDOW_TOLERANCE_MS.max(0.01 * makespan_ms) {
            windows.differing.push(WindowDiff {
                run_id: r.id,
                label: run_label(r),
                spread_ms,
            });
        }
    }

    let scaling = scaling_fits(&conditions, &groups, &factors, &metrics);

    // Load average over the runs.
    let mut loads: Vec<f64> = runs.iter().filter_map(|r| r.load_avg_1m).collect();
    loads.sort_by(f64::total_cmp);
    let load = (!loads.is_empty()).then(|| LoadSummary {
        min: loads[0],
        median: stats::percentile(&loads, 0.5),
        max: loads[loads.len() - 1],
    });

    let interference = InterferenceSummary::of(&runs);

    let mut analysis = Analysis {
        campaign,
        settings,
        counts,
        factors,
        environments,
        load,
        interference,
        process_rows,
        groups,
        conditions,
        comparisons: Vec::new(),
        outliers,
        scaling,
        fairness,
        shares,
        windows,
        problems,
        run_info,
    };

    analysis.comparisons = all_comparisons(&analysis, opts);
    Ok(analysis)
}

/// Every flagged value, most extreme first.
fn find_outliers(conditions: &[Condition], run_info: &HashMap<i64, (i64, i64)>) -> Vec<Outlier> {
    let mut outliers = Vec::new();
    for (ci, c) in conditions.iter().enumerate() {
        for cell in &c.cells {
            if !cell.flagged.iter().any(|&f| f) {
                continue;
            }
            let z = stats::modified_z_scores(&cell.values);
            let median = cell.summary.as_ref().map_or(f64::NAN, |s| s.median);
            for (k, &f) in cell.flagged.iter().enumerate() {
                if f {
                    let (seq, rep) = run_info.get(&cell.run_ids[k]).copied().unwrap_or((0, 0));
                    outliers.push(Outlier {
                        condition: ci,
                        label: c.label.clone(),
                        metric: cell.metric,
                        run_id: cell.run_ids[k],
                        seq,
                        rep,
                        value: cell.values[k],
                        median,
                        z: z[k],
                        times_median: (median != 0.0).then(|| cell.values[k] / median),
                    });
                }
            }
        }
    }

    outliers.sort_by(|a, b| b.z.abs().total_cmp(&a.z.abs()));
    outliers
}

/// Jain's indices of each condition, and shares against the weight table
/// where nice varies under a fair policy.
fn fairness_and_shares(
    conditions: &[Condition],
    groups: &[Group],
    per_condition: &[Vec<(i64, &RunValues)>],
    timed: &[String],
) -> (Vec<Fairness>, Vec<ShareCheck>) {
    let mut fairness = Vec::new();
    let mut shares = Vec::new();
    for (ci, c) in conditions.iter().enumerate() {
        let rv = &per_condition[ci];
        let mut ids = Vec::new();
        let mut jc = Vec::new();
        for (id, v) in rv {
            if let Some(j) = v.jain_cpu {
                ids.push(*id);
                jc.push(j);
            }
        }
        let jw: Vec<f64> = rv.iter().filter_map(|(_, v)| v.jain_work).collect();
        if !jc.is_empty() || !jw.is_empty() {
            fairness.push(Fairness {
                condition: ci,
                label: c.label.clone(),
                jain_cpu: stats::summarize(&jc),
                jain_work: stats::summarize(&jw),
                run_ids: ids,
                jain_cpu_values: jc,
            });
        }
        let fair =
            Policy::parse(&c.policy).is_some_and(|p| p.class() == Class::Fair && p != Policy::Idle);
        let Some((_, first)) = rv.first() else {
            continue;
        };
        let nices: Option<Vec<i64>> = first.nices.iter().copied().collect();
        let Some(nices) = nices else { continue };
        if !fair || nices.len() < 2 || nices.iter().all(|&n| n == nices[0]) {
            continue;
        }
        let same: Vec<&Vec<f64>> = rv
            .iter()
            .filter(|(_, v)| {
                v.nices
                    .iter()
                    .copied()
                    .collect::<Option<Vec<i64>>>()
                    .as_ref()
                    == Some(&nices)
            })
            .filter_map(|(_, v)| v.rate_shares.as_ref())
            .collect();
        if same.is_empty() {
            continue;
        }
        let nice32: Vec<i32> = nices.iter().map(|&n| n.clamp(-20, 19) as i32).collect();
        let predicted = stats::predicted_shares(&nice32);
        let observed: Vec<f64> = (0..nices.len())
            .map(|k| same.iter().map(|s| s[k]).sum::<f64>() / same.len() as f64)
            .collect();
        let err = stats::share_error(&observed, &predicted);
        let rows: Vec<ShareRow> = (0..nices.len())
            .map(|k| ShareRow {
                index: k as i64,
                nice: nices[k],
                predicted: predicted[k],
                observed: observed[k],
                error: err[k],
            })
            .collect();
        let max_abs_error = err
            .iter()
            .filter(|e| e.is_finite())
            .fold(0.0_f64, |m, e| m.max(e.abs()));
        let g = &groups[c.group].key;
        shares.push(ShareCheck {
            condition: ci,
            label: c.label.clone(),
            runs: same.len(),
            processes: nices.len(),
            cpus_used: c.cpus_used,
            competing: c.cpus_used >= 1 && (g.processes as usize) > c.cpus_used,
            fixed_work: !timed.contains(&g.workload),
            rows,
            max_abs_error,
        });
    }

    (fairness, shares)
}

/// Log–log fits against the number of processes, per policy, workload,
/// priority mode, CPUs and RT runtime, for every metric that varies.
fn scaling_fits(
    conditions: &[Condition],
    groups: &[Group],
    factors: &Factors,
    metrics: &[Metric],
) -> Vec<Scaling> {
    let mut scaling = Vec::new();
    if factors.processes.len() >= 2 {
        let mut lines: Vec<(LineKey, Vec<usize>)> = Vec::new();
        for (ci, c) in conditions.iter().enumerate() {
            let g = &groups[c.group].key;
            let k = (
                c.policy.clone(),
                g.workload.clone(),
                g.priority_mode.clone(),
                g.cpus.clone(),
                g.rt_runtime_us,
            );
            match lines.iter_mut().find(|(lk, _)| lk == &k) {
                Some((_, v)) => v.push(ci),
                None => lines.push((k, vec![ci])),
            }
        }
        for ((policy, workload, mode, cpu, rt), conds) in lines {
            let distinct = conds
                .iter()
                .map(|&ci| groups[conditions[ci].group].key.processes)
                .collect::<std::collections::BTreeSet<_>>();
            if distinct.len() < 2 {
                continue;
            }
            let mut label = format!("{workload}, {}", policy_label(&policy));
            if factors.priority_modes.len() > 1 {
                label.push_str(&format!(", priorities {mode}"));
            }
            if factors.cpus.len() > 1 {
                label.push_str(&format!(", cpus {cpu}"));
            }
            if let Some(rt) = rt {
                label.push_str(&format!(", rt_runtime {rt} µs"));
            }
            for (slot, &metric) in metrics.iter().enumerate() {
                let mut xs = Vec::new();
                let mut ys = Vec::new();
                let mut points = Vec::new();
                for &ci in &conds {
                    let p = groups[conditions[ci].group].key.processes;
                    let cell = &conditions[ci].cells[slot];
                    for &v in &cell.values {
                        xs.push(p as f64);
                        ys.push(v);
                    }
                    if let Some(s) = &cell.summary {
                        points.push(ScalingPoint {
                            processes: p,
                            n: cell.n,
                            mean: s.mean,
                            ci: cell.ci.as_ref().map(|i| (i.lo, i.hi)),
                        });
                    }
                }
                if ys.iter().all(|&y| y == ys[0]) {
                    // Constant (e.g. fixed work): nothing scales.
                    continue;
                }
                scaling.push(Scaling {
                    policy: policy.clone(),
                    workload: workload.clone(),
                    priority_mode: mode.clone(),
                    cpus: cpu.clone(),
                    rt_runtime_us: rt,
                    label: label.clone(),
                    metric,
                    fit: stats::loglog_slope(&xs, &ys),
                    points,
                });
            }
        }
    }

    scaling
}

/// Every pair of policies within each group on every metric, with Holm's
/// correction over all of them, verdicts and sentences.
fn all_comparisons(a: &Analysis, opts: &Options) -> Vec<Comparison> {
    let mut jobs = Vec::new();
    for (gi, g) in a.groups.iter().enumerate() {
        for slot in 0..a.settings.metrics.len() {
            for (i, &ca) in g.conditions.iter().enumerate() {
                for &cb in &g.conditions[i + 1..] {
                    jobs.push(Job {
                        group: gi,
                        ca,
                        cb,
                        slot,
                    });
                }
            }
        }
    }
    let mut comparisons = par_map(&jobs, |j| compare(a, j, opts));
    let ps: Vec<f64> = comparisons
        .iter()
        .filter_map(|c| c.mann_whitney.as_ref().map(|m| m.p))
        .collect();
    let ws: Vec<f64> = comparisons
        .iter()
        .filter_map(|c| c.welch.as_ref().map(|w| w.p))
        .collect();
    let (adj, wadj) = (stats::holm(&ps), stats::holm(&ws));
    let (mut k, mut kw) = (0, 0);
    for c in &mut comparisons {
        if c.mann_whitney.is_some() {
            c.p_adjusted = Some(adj[k]);
            k += 1;
        }
        if c.welch.is_some() {
            c.welch_p_adjusted = Some(wadj[kw]);
            kw += 1;
        }
        c.verdict = match c.p_adjusted {
            None => Verdict::TooFewRuns,
            Some(p) if p < ALPHA => Verdict::Different,
            Some(_) => Verdict::NotSeparated,
        };
    }
    for c in &mut comparisons {
        c.statement = statement(c);
        c.sentence = format!("{}: {}", a.groups[c.group].label, c.statement);
    }
    comparisons
}

/// Whether the exact Mann–Whitney test could never reach significance for
/// a comparison after Holm's first step (m × smallest attainable p ≥ α).
pub fn unreachable(a: &Analysis, c: &Comparison) -> bool {
    let m = a
        .comparisons
        .iter()
        .filter(|c| c.p_adjusted.is_some())
        .count();
    c.min_attainable_p
        .is_some_and(|p| p * m.max(1) as f64 >= a.settings.alpha)
}

/// Which method a Mann–Whitney p came from, for tables.
pub fn mw_method(c: &Comparison) -> &'static str {
    match c.mann_whitney.as_ref().map(|m| m.method) {
        Some(MannWhitneyMethod::Exact) => "exact",
        Some(MannWhitneyMethod::Normal) => "normal",
        None => "–",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::ProcSched;
    use crate::record::{ProcessRecord, RunStatus};
    use crate::report::sections::Section;
    use crate::report::synth::{synthetic_env, synthetic_process, synthetic_record};

    /// A campaign of pi × 2 processes with the given per-run wall times
    /// (s) per policy, analysed on wall time only.
    fn analysed(samples: &[(&str, Vec<f64>)]) -> Analysis {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("t.db")).unwrap();
        let policies: Vec<String> = samples.iter().map(|(p, _)| format!("\"{p}\"")).collect();
        let toml = format!(
            "name = \"t\"\n[matrix]\npolicy = [{}]\nworkload = [\"pi\"]\nprocesses = [2]\n",
            policies.join(", ")
        );
        let spec = crate::spec::load(&toml, "t", &[]).unwrap();
        let c = store.create_campaign(&spec, &toml, &[], 1, 0).unwrap();
        let plan = crate::plan::expand(&spec, 1);
        let env = synthetic_env(2);
        let mut runs = Vec::new();
        for (policy, values) in samples {
            let mut run = plan
                .iter()
                .find(|r| r.policy.name() == *policy)
                .unwrap()
                .clone();
            for (k, &v) in values.iter().enumerate() {
                let proc_ = |index: u32| {
                    let base = synthetic_process(
                        index,
                        ProcSched {
                            policy: run.policy,
                            nice: Some(0),
                            rt_priority: None,
                            dl_runtime_ns: None,
                            dl_deadline_ns: None,
                            dl_period_ns: None,
                            weight: None,
                        },
                        (v * 1e9) as u64,
                        100_000,
                    );
                    ProcessRecord {
                        usage: crate::record::Usage {
                            nvcsw: 1,
                            nivcsw: 2,
                            ..base.usage
                        },
                        run_ns: Some(100_000_000),
                        wait_ns: Some(0),
                        timeslices: Some(3),
                        work: Some(1000),
                        work_unit: "iterations".into(),
                        ..base
                    }
                };
                run.key = format!("{policy}-{k}");
                run.seq = runs.len();
                run.rep = k as u32 + 1;
                let mut rec = synthetic_record(
                    &run,
                    &env,
                    vec![0, 1],
                    0,
                    Some(0.1),
                    vec![proc_(0), proc_(1)],
                );
                rec.cpu_util = Some(0.5);
                runs.push(rec);
            }
        }
        store.insert_runs(c.id, &runs).unwrap();
        let opts = Options {
            metrics: vec![Metric::Wall],
            ..Options::default()
        };
        analyse(&store, &opts).unwrap()
    }

    #[test]
    fn campaigns_without_ok_runs_still_report() {
        use crate::report::{Format, Report};
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("t.db")).unwrap();
        let toml = "name = \"t\"\n[matrix]\npolicy = [\"fifo\"]\nworkload = [\"pi\"]\n";
        let spec = crate::spec::load(toml, "t", &[]).unwrap();
        let c = store.create_campaign(&spec, toml, &[], 1, 3).unwrap();
        // No run stored yet.
        let r = Report::build(&store, &Options::default()).unwrap();
        for f in [Format::Html, Format::Md, Format::Json] {
            assert!(!r.render(f).is_empty());
        }
        assert!(
            r.render(Format::Md)
                .contains("The campaign is incomplete: 0 of 3")
        );
        // Only skipped runs.
        let mut run = crate::plan::expand(&spec, 1).swap_remove(0);
        run.key = "k".into();
        run.seq = 0;
        run.processes = 1;
        run.rep = 1;
        let mut skipped =
            synthetic_record(&run, &synthetic_env(2), vec![0, 1], 0, None, Vec::new());
        skipped.status = RunStatus::Skipped;
        skipped.reason = "SCHED_FIFO needs CAP_SYS_NICE".into();
        skipped.makespan_ns = None;
        skipped.cpu_util = None;
        store.insert_runs(c.id, &[skipped]).unwrap();
        let r = Report::build(&store, &Options::default()).unwrap();
        let md = r.render(Format::Md);
        assert!(md.contains("SCHED_FIFO needs CAP_SYS_NICE"), "{md}");
        assert!(
            md.contains("0 ok, 0 failed, 0 timed out, 1 skipped"),
            "{md}"
        );
        let html = r.render(Format::Html);
        assert!(!html.contains("data-kind=\"bars\""));
        let v: serde_json::Value = serde_json::from_str(&r.render(Format::Json)).unwrap();
        assert_eq!(v["failures"]["runs"][0]["status"], "skipped");
    }

    fn seq(start: f64, step: f64, n: usize) -> Vec<f64> {
        (0..n).map(|i| start + step * i as f64).collect()
    }

    #[test]
    fn clearly_different_policies_give_one_finding_in_the_right_direction() {
        let a = analysed(&[("fifo", seq(2.0, 0.01, 10)), ("other", seq(1.0, 0.01, 10))]);
        assert_eq!(a.comparisons.len(), 1);
        let c = &a.comparisons[0];
        assert_eq!(c.verdict, Verdict::Different);
        assert_eq!(
            (c.a.as_str(), c.b.as_str()),
            ("other", "fifo"),
            "lower mean first"
        );
        let r = c.ratio.unwrap();
        assert!((r - 1.045 / 2.045).abs() < 1e-9, "{r}");
        let (lo, hi) = c.ratio_ci.unwrap();
        assert!(lo < r && r < hi && hi < 1.0);
        assert!(c.p_adjusted.unwrap() < 0.001);
        assert!(
            c.sentence
                .starts_with("pi, 2 processes: OTHER wall time is 0.51× FIFO's (95% CI "),
            "{}",
            c.sentence
        );
        assert!(
            c.sentence.ends_with("p < 0.001, n = 10 vs 10)"),
            "{}",
            c.sentence
        );
        // Both conditions used the bootstrap (n ≥ 10) with a recorded seed.
        let ci = a.conditions[0].cells[0].ci.as_ref().unwrap();
        assert_eq!(ci.method, CiMethod::Bootstrap);
        assert!(ci.seed.is_some());
    }

    #[test]
    fn identical_samples_are_not_separated() {
        let v = vec![3.1, 2.9, 3.0, 3.2, 2.8, 3.05];
        let a = analysed(&[("other", v.clone()), ("rr", v)]);
        let c = &a.comparisons[0];
        assert_eq!(c.verdict, Verdict::NotSeparated);
        assert_eq!(c.ratio, Some(1.0));
        assert!(c.p_adjusted.unwrap() > 0.9);
        assert!(
            c.sentence
                .starts_with("pi, 2 processes: the data do not separate OTHER and RR on wall time (ratio 1.00, CI "),
            "{}",
            c.sentence
        );
        assert_eq!(a.count_verdict(Verdict::Different), 0);
    }

    #[test]
    fn one_run_per_side_is_too_few_to_compare() {
        let a = analysed(&[("other", vec![1.0]), ("fifo", vec![2.0])]);
        let c = &a.comparisons[0];
        assert_eq!(c.verdict, Verdict::TooFewRuns);
        assert!(c.mann_whitney.is_none() && c.p_adjusted.is_none());
        assert!(
            c.sentence
                .contains("too few runs to compare OTHER and FIFO"),
            "{}",
            c.sentence
        );
        let cell = &a.conditions[0].cells[0];
        assert_eq!(cell.n, 1);
        assert!(cell.ci.is_none());
        assert_eq!(cell.summary.as_ref().unwrap().sd, 0.0);
    }

    #[test]
    fn all_equal_values_give_no_nan_and_no_difference() {
        let a = analysed(&[("other", vec![5.0; 4]), ("batch", vec![5.0; 4])]);
        let c = &a.comparisons[0];
        assert_eq!(c.verdict, Verdict::NotSeparated);
        assert_eq!(c.mann_whitney.as_ref().unwrap().p, 1.0);
        assert_eq!(c.ratio_ci, Some((1.0, 1.0)));
        assert!(a.outliers.is_empty());
        let json = serde_json::to_string(&a).unwrap();
        assert!(!json.contains("NaN"));
    }

    #[test]
    fn an_outlier_is_flagged_and_named_but_kept() {
        let v = vec![35.1, 34.8, 35.6, 618.0, 35.3, 34.9, 36.0, 35.2, 35.4, 34.7];
        let a = analysed(&[("other", v.clone()), ("fifo", seq(35.0, 0.1, 10))]);
        assert_eq!(a.outliers.len(), 1);
        let o = &a.outliers[0];
        assert_eq!(o.value, 618.0);
        assert_eq!(o.rep, 4);
        assert!(o.z > 1000.0);
        assert!((o.times_median.unwrap() - 618.0 / 35.25).abs() < 1e-9);
        let cell = &a
            .conditions
            .iter()
            .find(|c| c.policy == "other")
            .unwrap()
            .cells[0];
        assert_eq!(cell.n, 10, "the outlier stays in the statistics");
        assert!(cell.summary.as_ref().unwrap().max == 618.0);
        assert!(cell.skewed);
        let r = crate::report::Report::with_sections(
            &Store::open(std::path::Path::new(":memory:")).unwrap(),
            &Options::default(),
            Vec::new(),
        );
        assert!(r.is_err(), "an empty database has no campaign");
        let md = crate::report::sections::OutliersSection.markdown(&a);
        let id = o.run_id.to_string();
        assert!(
            md.lines()
                .any(|l| l.split('|').nth(1).map(str::trim) == Some(id.as_str())),
            "{md}"
        );
        assert!(md.contains("618 s"), "{md}");
    }

    #[test]
    fn smallest_exact_p() {
        // 2 / C(6, 3) = 0.1: three runs per side can never reach p < 0.05.
        assert!((min_exact_p(3, 3) - 0.1).abs() < 1e-12);
        assert!((min_exact_p(5, 5) - 2.0 / 252.0).abs() < 1e-12);
        assert!((min_exact_p(10, 10) - 2.0 / 184_756.0).abs() < 1e-15);
        assert_eq!(min_exact_p(1, 1), 1.0);
    }

    #[test]
    fn resample_budget() {
        assert_eq!(resamples_for(2000, 20), 2000);
        assert_eq!(resamples_for(2000, 500), 500);
        assert_eq!(resamples_for(2000, 100_000), MIN_RESAMPLES);
        assert_eq!(resamples_for(100, 100_000), 100);
    }

    #[test]
    fn cells_choose_their_interval() {
        let o = Options::default();
        let one = cell(Metric::Wall, vec![1], vec![3.0], "x", &o);
        assert_eq!(one.n, 1);
        assert!(one.ci.is_none());
        let few = cell(Metric::Wall, vec![1, 2, 3], vec![1.0, 1.1, 1.2], "x", &o);
        assert_eq!(few.ci.as_ref().unwrap().method, CiMethod::T);
        let many: Vec<f64> = (0..12).map(|i| 10.0 + f64::from(i) * 0.1).collect();
        let c = cell(Metric::Wall, (0..12).collect(), many, "x", &o);
        let ci = c.ci.as_ref().unwrap();
        assert_eq!(ci.method, CiMethod::Bootstrap);
        assert!(ci.seed.is_some() && ci.resamples == Some(2000));
        // Skewed by an outlier: bootstrap even with few runs, and flagged.
        let s = cell(
            Metric::Wall,
            (0..6).collect(),
            vec![35.1, 34.8, 35.6, 618.0, 35.3, 34.9],
            "x",
            &o,
        );
        assert!(s.skewed);
        assert_eq!(s.ci.as_ref().unwrap().method, CiMethod::Bootstrap);
        assert_eq!(s.flagged, vec![false, false, false, true, false, false]);
        // All equal: no NaN anywhere, nothing flagged.
        let e = cell(Metric::Wall, (0..4).collect(), vec![2.0; 4], "x", &o);
        assert_eq!(e.summary.as_ref().unwrap().sd, 0.0);
        assert!(!e.skewed && e.flagged.iter().all(|f| !f));
        let ci = e.ci.unwrap();
        assert_eq!((ci.lo, ci.hi), (2.0, 2.0));
    }
}

#[cfg(test)]
mod window_tests {
    use super::window_spread;

    #[test]
    fn spread_is_last_end_minus_first_end() {
        let ends = [
            Some(2_000_000_000),
            Some(2_000_400_000),
            Some(2_163_000_000),
        ];
        assert_eq!(window_spread(ends.into_iter()), Some(163_000_000));
        assert_eq!(window_spread([Some(5)].into_iter()), Some(0));
    }

    #[test]
    fn unknown_ends_give_no_spread() {
        assert_eq!(window_spread([Some(1), None].into_iter()), None);
        assert_eq!(window_spread(std::iter::empty()), None);
    }
}
