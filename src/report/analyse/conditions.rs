//! Conditions (a group and a policy) and their cells: the statistics of
//! one metric over the condition's runs, with confidence intervals.

use super::groups::Grouping;
use super::runs::{RunValues, StatusCounts};
use super::{
    BOOTSTRAP_BUDGET, BOOTSTRAP_MIN_N, MIN_PER_SIDE, MIN_RESAMPLES, OUTLIER_MIN_N, OUTLIER_Z,
    SKEW_THRESHOLD,
};
use super::{Options, Settings, par_map};
use crate::report::metric::Metric;
use crate::rng::fnv1a;
use crate::stats::{self, Summary};
use crate::store::ReportRun;
use serde::Serialize;

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

pub(super) fn cpu_count(list: &str) -> usize {
    match crate::spec::Cpus::parse(list) {
        Ok(crate::spec::Cpus::List(l)) => l.len(),
        _ => 0,
    }
}

/// The seed of one bootstrap interval: the base seed XOR an FNV-1a hash of
/// its label, kept to 53 bits so that JSON readers using doubles see it
/// exactly.
pub(crate) fn seed_for(opts: &Options, label: &str) -> u64 {
    (opts.bootstrap_seed ^ fnv1a(label)) & ((1 << 53) - 1)
}

/// Resamples for a bootstrap over `n` values in total.
pub(crate) fn resamples_for(max: usize, n: usize) -> usize {
    (BOOTSTRAP_BUDGET / n.max(1)).clamp(MIN_RESAMPLES.min(max), max.max(1))
}

/// Statistics of one metric in one condition.
pub(crate) fn cell(
    metric: Metric,
    run_ids: Vec<i64>,
    values: Vec<f64>,
    label: &str,
    opts: &Options,
) -> Cell {
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

/// The conditions with their cells, and the ok runs of each condition
/// (indices into the runs, in campaign order). `per_process`: each
/// condition's per-process summary of each metric ([`super::fold`]).
pub(super) fn conditions(
    runs: &[ReportRun],
    grouping: &Grouping,
    run_values: &[Option<RunValues>],
    per_process: &[Vec<Option<Summary>>],
    metrics: &[Metric],
    opts: &Options,
) -> (Vec<Condition>, Vec<Vec<usize>>) {
    let Grouping {
        keyed,
        cond_of_run,
        groups,
        cond_group,
    } = grouping;
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
        .map(|(ci, (_, p))| {
            format!(
                "{}, {}",
                groups[cond_group[ci]].label,
                super::policy_label(p)
            )
        })
        .collect();
    let cell_jobs: Vec<(usize, usize)> = (0..keyed.len())
        .flat_map(|c| (0..metrics.len()).map(move |m| (c, m)))
        .collect();
    let mut cells: Vec<Cell> = par_map(&cell_jobs, |&(c, m)| {
        let metric = metrics[m];
        let slot = metric.index();
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
        cell.per_process = per_process[c][m].clone();
        cell
    });
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
    (conditions, cond_runs)
}
