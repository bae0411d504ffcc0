//! From a stored campaign to its statistics: conditions and their per-run
//! values, descriptive statistics with confidence intervals, flagged
//! outliers, policy comparisons with Holm-corrected p-values, scaling fits
//! and fairness. Every statistic comes from [`crate::stats`]; this module
//! only decides what to compute on which values, and says why.
//!
//! [`analyse`] loads the campaign's runs through the store, then reads the
//! process rows condition by condition on every CPU and folds them into the
//! runs' values ([`fold`], [`runs`]); [`analyse_data`] computes everything
//! from plain data ([`Store::load_report_data`]), without a database, the
//! same way. One file per job.

mod absent;
mod comparisons;
mod conditions;
mod fairness;
mod fold;
mod groups;
pub mod latency;
pub mod level;
pub mod model;
pub mod noise;
mod outliers;
mod precision;
mod runs;
mod scaling;
#[cfg(test)]
mod tests;
pub mod trace;
mod windows;

use anyhow::Result;
use serde::Serialize;
use std::collections::{HashMap, HashSet};

use super::metric::Metric;
use crate::store::{
    ReportCampaign, ReportData, ReportEnvironment, ReportProcess, ReportRun, RunFactor, Store,
};

pub use absent::Absent;
pub(crate) use comparisons::min_exact_p;
pub use comparisons::{Comparison, Verdict, mw_method, unreachable};
pub use conditions::{Cell, CiMethod, Condition, Interval, mean_interval, ratio_interval};
pub(crate) use conditions::{cell, resamples_for, seed_for};
pub use fairness::{Fairness, ShareCheck, ShareRow};
pub use groups::{ByLevels, Factors, Group, GroupKey, WorkloadInfo, group_label};
pub use outliers::Outlier;
pub use precision::AutoPrecision;
pub use runs::{
    InterferenceSummary, LoadSummary, OTHER_CPU_NOTE_PCT, OTHERS_RUNNABLE_NOTE, ProblemRun,
    STEAL_NOTE_PCT, StatusCounts,
};
pub use scaling::{Scaling, ScalingPoint};
pub use windows::{WINDOW_TOLERANCE_MS, WindowCheck, WindowDiff};

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
    /// The traced run whose per-CPU timeline is drawn (default: the first
    /// usable traced run).
    pub timeline_run: Option<i64>,
    /// The part of its trace drawn (default: the first
    /// [`crate::report::sections::details::DEFAULT_WINDOW_NS`]).
    pub timeline_window: Option<crate::report::window::TimeWindow>,
    /// A simulated database whose run of the timeline run's condition and
    /// repetition is drawn beside it, the model's prediction
    /// (`--model-timeline`).
    pub model_timeline: Option<std::path::PathBuf>,
    /// Report every campaign of the campaign's spec, from any host, with
    /// the host or kernel as a factor (`--by`).
    pub by: Option<RunFactor>,
    /// Only the runs of this machine level, the machine factor dropped
    /// (`compare --machine A --vs-machine B`; [`level::at_machine`]).
    pub machine: Option<String>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            campaign: None,
            metrics: Metric::ALL.to_vec(),
            bootstrap_seed: 1,
            resamples: 2000,
            gantt_run: None,
            timeline_run: None,
            timeline_window: None,
            model_timeline: None,
            by: None,
            machine: None,
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
    /// Runs whose interrupts and softirqs were beyond the campaign's usual,
    /// and the findings without them.
    pub noise: noise::NoiseCheck,
    pub process_rows: u64,
    pub groups: Vec<Group>,
    pub conditions: Vec<Condition>,
    /// Metrics some ok runs of a condition have no value of, and why
    /// (left out of its statistics, never counted as 0).
    pub absent: Vec<Absent>,
    pub comparisons: Vec<Comparison>,
    pub outliers: Vec<Outlier>,
    pub scaling: Vec<Scaling>,
    pub fairness: Vec<Fairness>,
    pub shares: Vec<ShareCheck>,
    pub windows: WindowCheck,
    pub problems: Vec<ProblemRun>,
    /// `repetitions = "auto"`: the rule, and where each condition stopped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub precision: Option<AutoPrecision>,
    /// run id → (seq, rep), for labels.
    #[serde(skip)]
    pub run_info: HashMap<i64, (i64, i64)>,
    /// Every stored run, any status, in campaign order (for the sections
    /// that show more of some runs).
    #[serde(skip)]
    pub runs: Vec<ReportRun>,
    /// The machine level the analysis is of, when it holds one level's
    /// runs only ([`Options::machine`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub machine_level: Option<String>,
}

impl Analysis {
    /// The campaigns whose runs the analysis holds: the campaign, or in a
    /// report `--by` host or kernel every campaign of its spec.
    pub fn campaign_ids(&self) -> Vec<i64> {
        if self.campaign.campaigns.is_empty() {
            vec![self.campaign.id]
        } else {
            self.campaign.campaigns.clone()
        }
    }

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

/// Map items to results on up to `available_parallelism` threads, in order.
pub(super) fn par_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
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

/// The settings of a report with these options.
fn settings(opts: &Options) -> Settings {
    let metrics = if opts.metrics.is_empty() {
        Metric::ALL.to_vec()
    } else {
        let mut m = opts.metrics.clone();
        m.sort();
        m.dedup();
        m
    };
    Settings {
        metrics,
        alpha: ALPHA,
        min_runs_per_side: MIN_PER_SIDE,
        bootstrap_seed: opts.bootstrap_seed,
        max_resamples: opts.resamples,
        bootstrap_min_n: BOOTSTRAP_MIN_N,
        outlier_threshold: OUTLIER_Z,
        outlier_min_runs: OUTLIER_MIN_N,
        skew_threshold: SKEW_THRESHOLD,
    }
}

/// Analyse a campaign of the store (`opts.campaign`, or the latest),
/// reading and folding its process rows condition by condition on every
/// CPU ([`fold::from_store`]).
pub fn analyse(store: &Store, opts: &Options) -> Result<Analysis> {
    let mut frame = store.load_report_frame(opts.campaign, opts.by)?;
    if let Some(level) = &opts.machine {
        frame = level::at_machine(frame, level)?;
    }
    let mut a = analyse_values(frame, opts, |runs, ok, timed, metrics| {
        fold::from_store(store, runs, ok, timed, metrics)
    })?;
    a.precision = precision::of_campaign(store, &a.campaign)?;
    a.machine_level = opts.machine.clone();
    Ok(a)
}

/// Analyse a loaded campaign: every statistic of the report, from plain
/// data. `opts.campaign` is not used (the data are of one campaign).
pub fn analyse_data(data: ReportData, opts: &Options) -> Analysis {
    let ReportData {
        campaign,
        runs,
        processes,
        process_rows,
        environments,
        work_units,
    } = data;
    let frame = ReportData {
        campaign,
        processes: vec![(); runs.len()],
        runs,
        process_rows,
        environments,
        work_units,
    };
    // Each run's rows by its id: the analysis without noisy runs (if any)
    // folds a subset of the runs again.
    let by_id: HashMap<i64, Vec<ReportProcess>> =
        frame.runs.iter().map(|r| r.id).zip(processes).collect();
    let Ok(a) = analyse_values(frame, opts, |runs, ok, timed, metrics| {
        let rows = runs
            .iter()
            .map(|r| by_id.get(&r.id).cloned().unwrap_or_default())
            .collect();
        // The data say how many rows were read.
        Ok::<_, std::convert::Infallible>(fold::Folded {
            rows: 0,
            ..fold::from_rows(runs, rows, ok, timed, metrics)
        })
    });
    a
}

/// Analyse a campaign whose process rows `fold` reads and folds, given the
/// runs, the ok runs of each condition, the workloads that run for a
/// duration and the metrics; and again without its noisy runs when it has
/// some (`noise`): the analysis keeps every run and says what leaving those
/// out changes. `data.process_rows` counts rows already read.
fn analyse_values<E, F>(data: ReportData<()>, opts: &Options, fold: F) -> Result<Analysis, E>
where
    F: Fn(&[ReportRun], &[Vec<usize>], &[String], &[Metric]) -> Result<fold::Folded, E>,
{
    let mut check = noise::flag(&data.runs);
    let without = (!check.noisy_runs.is_empty()).then(|| {
        let noisy: HashSet<i64> = check.noisy_runs.iter().map(|r| r.0).collect();
        let runs: Vec<ReportRun> = data
            .runs
            .iter()
            .filter(|r| !noisy.contains(&r.id))
            .cloned()
            .collect();
        ReportData {
            campaign: data.campaign.clone(),
            processes: vec![(); runs.len()],
            runs,
            process_rows: data.process_rows,
            environments: data.environments.clone(),
            work_units: data.work_units.clone(),
        }
    });
    let mut analysis = analyse_all(data, opts, &fold)?;
    if let Some(data) = without {
        let quieter = analyse_all(data, opts, &fold)?;
        check.without = Some(noise::findings_without(
            &analysis.comparisons,
            &quieter.comparisons,
        ));
    }
    analysis.noise = check;
    Ok(analysis)
}

/// Analyse every run of a campaign whose process rows `fold` reads and
/// folds.
fn analyse_all<E, F>(data: ReportData<()>, opts: &Options, fold: &F) -> Result<Analysis, E>
where
    F: Fn(&[ReportRun], &[Vec<usize>], &[String], &[Metric]) -> Result<fold::Folded, E>,
{
    let ReportData {
        campaign,
        runs,
        processes: _,
        process_rows,
        environments,
        work_units,
    } = data;
    let settings = settings(opts);
    let metrics = settings.metrics.clone();
    let units: HashMap<String, String> = work_units.into_iter().collect();

    let order = groups::spec_order(&campaign.spec_json);
    let factors = groups::factors(&runs, &order, &units, campaign.by);
    let grouping = groups::group(&runs, &factors);
    let (counts, problems) = runs::statuses(&runs, &factors);
    let ok = fold::ok_runs_by_condition(&runs, &grouping.cond_of_run, grouping.keyed.len());
    let folded = fold(&runs, &ok, &order.timed, &metrics)?;
    let run_values = folded.values;
    let process_rows = process_rows + folded.rows;
    let (conditions, cond_runs) = conditions::conditions(
        &runs,
        &grouping,
        &run_values,
        &folded.per_process,
        &metrics,
        opts,
    );
    let groups = grouping.groups;
    let absent = absent::absent(&conditions, &cond_runs, &runs);

    let run_info: HashMap<i64, (i64, i64)> = runs.iter().map(|r| (r.id, (r.seq, r.rep))).collect();
    let outliers = outliers::find_outliers(&conditions, &run_info);
    let per_condition: Vec<Vec<(i64, &runs::RunValues)>> = cond_runs
        .iter()
        .map(|rs| {
            rs.iter()
                .map(|&ri| (runs[ri].id, run_values[ri].as_ref().expect("ok run")))
                .collect()
        })
        .collect();
    let (fairness, shares) =
        fairness::fairness_and_shares(&conditions, &groups, &per_condition, &order.timed);
    let windows = windows::check_windows(&runs, &run_values, &factors);
    let scaling = scaling::scaling_fits(&conditions, &groups, &factors, &metrics);
    let load = runs::load_summary(&runs);
    let interference = InterferenceSummary::of(&runs);

    let mut analysis = Analysis {
        campaign,
        settings,
        counts,
        factors,
        environments,
        load,
        interference,
        noise: noise::NoiseCheck::default(),
        process_rows,
        groups,
        conditions,
        absent,
        comparisons: Vec::new(),
        outliers,
        scaling,
        fairness,
        shares,
        windows,
        problems,
        run_info,
        runs,
        precision: None,
        machine_level: None,
    };
    analysis.comparisons = comparisons::all_comparisons(&analysis, opts);
    Ok(analysis)
}
