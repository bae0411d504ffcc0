//! The comparison itself, from two analysed campaigns (pure: no database):
//! conditions matched by their factor values, per condition and metric the
//! ratio candidate / baseline with a bootstrap interval, Mann–Whitney p,
//! Holm's correction over the whole comparison, a verdict in the metric's
//! direction, each side's coefficient of variation; with a margin, the
//! equivalence test (TOST on the log ratio) and its verdict, and which rows
//! are regressions beyond the margin; for a row not separated, the smallest
//! change its runs could have seen; the latency percentiles of campaigns
//! that store them; a geometric-mean summary per metric; the spec and
//! environment differences.

use serde::Serialize;
use thiserror::Error;

use super::environment::{EnvField, EnvRow, SideEnvironments, environment_rows};
use super::spec_diff::{SpecDifference, spec_differences};
use crate::report::analyse::latency::LatencyAnalysis;
use crate::report::analyse::{
    ALPHA, Analysis, BOOTSTRAP_MIN_N, Cell, Factors, GroupKey, MIN_PER_SIDE, Options, cell,
    group_label, min_exact_p, policy_label, resamples_for, seed_for,
};
use crate::report::detectable::{Detectable, detectable};
use crate::report::fmt;
use crate::report::metric::{Direction, Metric};
use crate::stats::{self, Tost};
use crate::store::ReportCampaign;

/// Why two campaigns are not compared.
#[derive(Debug, Error, PartialEq)]
pub enum CompareError {
    #[error(
        "the two campaigns' specs differ in {} key{}:\n  {}\ncompare them anyway with --force (conditions are \
         then matched by their factor values)",
        .0.len(),
        if .0.len() == 1 { "" } else { "s" },
        .0.iter().map(SpecDifference::line).collect::<Vec<_>>().join("\n  ")
    )]
    SpecsDiffer(Vec<SpecDifference>),
    #[error(
        "no condition of the baseline has the factor values of one of the candidate's (baseline: {baseline}; \
         candidate: {candidate}): nothing to compare"
    )]
    NothingInCommon { baseline: String, candidate: String },
    #[error(
        "compare needs a candidate: --vs CANDIDATE.db (its latest campaign, or --vs-campaign N) or \
         --vs-campaign N (a campaign of --db), or --machine A --vs-machine B (two machine levels of one campaign)"
    )]
    NoCandidate,
    #[error(
        "baseline and candidate are the same campaign ({0}): give another with --vs or --vs-campaign, or two \
         machine levels with --machine and --vs-machine"
    )]
    SameCampaign(String),
    #[error(
        "baseline and candidate are the same campaign (UUID {uuid}): {candidate} is a copy of {baseline}; \
         give another with --vs or --vs-campaign"
    )]
    CopiedCampaign {
        baseline: String,
        candidate: String,
        uuid: String,
    },
}

/// Verdict of one comparison, in the metric's direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Verdict {
    #[serde(rename = "better")]
    Better,
    #[serde(rename = "worse")]
    Worse,
    /// Not significant after Holm's correction, or too few runs to test.
    #[serde(rename = "not separated")]
    NotSeparated,
}

impl Verdict {
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Better => "better",
            Verdict::Worse => "worse",
            Verdict::NotSeparated => "not separated",
        }
    }
}

/// With a margin: whether a change is within it, beyond it, or neither.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum MarginVerdict {
    /// The equivalence test (TOST, Holm-adjusted) puts the ratio within
    /// 1 ± margin (even when the difference test also separates the sides:
    /// a real change smaller than the margin).
    #[serde(rename = "equivalent")]
    Equivalent,
    /// Not shown equivalent, and the difference test separates the sides
    /// (better or worse).
    #[serde(rename = "different")]
    Different,
    /// Neither: too few runs or too much noise to say.
    #[serde(rename = "neither shown")]
    NeitherShown,
}

impl MarginVerdict {
    /// "equivalent within ±2 %", "different", "neither shown".
    pub fn text(self, margin_pct: f64) -> String {
        match self {
            MarginVerdict::Equivalent => format!("equivalent within {}", margin_label(margin_pct)),
            MarginVerdict::Different => "different".into(),
            MarginVerdict::NeitherShown => "neither shown".into(),
        }
    }
}

/// "±2 %".
pub fn margin_label(margin_pct: f64) -> String {
    format!("±{} %", fmt::sig(margin_pct, 3))
}

/// The spec key that sets the default margin of `compare`.
pub const MARGIN_KEY: &str = "compare_margin_pct";

/// The baseline spec's default margin (%), if it sets one.
pub fn spec_margin_pct(spec_json: &str) -> Option<f64> {
    serde_json::from_str::<serde_json::Value>(spec_json)
        .ok()?
        .get(MARGIN_KEY)?
        .as_f64()
}

/// A margin as given to `--margin`: "2%", "2 %", "2" (percent), more than 0
/// and less than 100.
pub fn parse_margin_pct(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let t = t.strip_suffix('%').unwrap_or(t).trim_end();
    match t.parse::<f64>() {
        Ok(v) if v > 0.0 && v < 100.0 => Ok(v),
        Ok(v) => Err(format!(
            "the margin must be more than 0 % and less than 100 %, got {v}"
        )),
        Err(_) => Err(format!(
            "\"{s}\" is not a margin: give a percentage such as 2% or 0.5%"
        )),
    }
}

/// The factor values that identify a condition in either campaign.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct ConditionKey {
    #[serde(flatten)]
    pub group: GroupKey,
    pub policy: String,
}

/// One condition and metric compared.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// "pi, 2 processes, OTHER".
    pub condition: String,
    pub factors: ConditionKey,
    pub metric: Metric,
    pub direction: Direction,
    pub unit: String,
    pub n_baseline: usize,
    pub n_candidate: usize,
    pub baseline_mean: Option<f64>,
    pub candidate_mean: Option<f64>,
    /// Coefficient of variation (sd / mean) of the runs on each side.
    pub baseline_cv: Option<f64>,
    pub candidate_cv: Option<f64>,
    /// candidate mean / baseline mean.
    pub ratio: Option<f64>,
    /// 95 % percentile-bootstrap interval of the ratio.
    pub ci_low: Option<f64>,
    pub ci_high: Option<f64>,
    /// Two-sided Mann–Whitney U p (None: fewer than 3 runs on a side).
    pub p: Option<f64>,
    /// Holm-adjusted over every tested row of the comparison.
    pub p_adjusted: Option<f64>,
    /// Smallest p the exact Mann–Whitney test can give for these sizes
    /// (None for the normal approximation, from 11 runs a side).
    pub min_attainable_p: Option<f64>,
    pub verdict: Verdict,
    /// Not separated: the smallest change (of the baseline's mean) these
    /// runs could have seen with 80 % power.
    pub detectable: Option<Detectable>,
    /// With a margin: the TOST of the log ratio within ln(1 ± margin)
    /// (candidate − baseline; None with fewer than 3 runs a side or a value
    /// that is not positive).
    pub equivalence: Option<Tost>,
    /// The TOST p, Holm-adjusted over every row with one.
    pub equivalence_p_adjusted: Option<f64>,
    /// p of the one-sided test that the change is worse than the margin
    /// (in the metric's direction), Holm-adjusted over every row with one.
    pub beyond_margin_p_adjusted: Option<f64>,
    /// The margin (%) of the comparison, if it has one.
    pub margin_pct: Option<f64>,
    /// With a margin: equivalent, different or neither shown.
    pub margin_verdict: Option<MarginVerdict>,
    /// Worse beyond the margin with significance (what `--fail-on
    /// regression` fails on); without a margin, worse.
    pub regression: bool,
    /// Run-to-run noise larger than the change: the larger CV of the two
    /// sides exceeds |ratio − 1|.
    pub noise_exceeds_change: bool,
    pub resamples: usize,
    pub seed: u64,
}

/// The geometric mean of a metric's ratios over the matched conditions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricSummary {
    pub metric: Metric,
    pub direction: Direction,
    /// Conditions with a positive ratio (those in the geometric mean).
    pub conditions: usize,
    pub geomean_ratio: Option<f64>,
    /// 95 % bootstrap interval (every condition's runs resampled).
    pub ci_low: Option<f64>,
    pub ci_high: Option<f64>,
    /// The interval's side of 1 in the metric's direction; not separated
    /// whenever a condition has fewer than 10 runs on a side (the
    /// percentile bootstrap of so few runs is too narrow to decide on).
    pub verdict: Verdict,
    pub better: usize,
    pub worse: usize,
    pub not_separated: usize,
}

/// One side of the comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Side {
    /// The database it was read from, as given.
    pub db: String,
    pub campaign: ReportCampaign,
    pub ok_runs: usize,
    pub runs: usize,
    /// The machine level whose runs it is (`--machine`, `--vs-machine`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub machine: Option<String>,
    /// The accelerators of the guests its runs ran in ("tcg",
    /// "tcg-icount", "kvm"); empty for a host.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub guest_accels: Vec<String>,
}

impl Side {
    /// What the side's timings are worth when it ran in an emulated guest
    /// (None on a host or under KVM).
    pub fn trust(&self, which: &str) -> Option<String> {
        let has = |a: &str| self.guest_accels.iter().any(|x| x == a);
        let level = self
            .machine
            .as_ref()
            .map_or_else(String::new, |l| format!(" (machine {l})"));
        if has("tcg") {
            Some(format!(
                "The {which}{level} ran in a guest under TCG: its wall times, latencies and CPU times are \
                 emulation timings (the guest's clock runs while its vCPUs wait for the host); its counts, orders \
                 and placements are its kernel's decisions."
            ))
        } else if has("tcg-icount") {
            Some(format!(
                "The {which}{level} ran in a guest under TCG with icount: its times are virtual (counted in \
                 instructions), not those of any real CPU."
            ))
        } else {
            None
        }
    }
    /// ", machine cfs" for one machine level's runs, else nothing.
    pub fn level(&self) -> String {
        self.machine
            .as_ref()
            .map_or_else(String::new, |l| format!(", machine {l}"))
    }
}

/// Everything a comparison shows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    pub baseline: Side,
    pub candidate: Side,
    /// The specs' differences (compared only with --force).
    pub spec_differences: Vec<SpecDifference>,
    pub forced: bool,
    pub environment: Vec<EnvRow>,
    pub metrics: Vec<Metric>,
    pub alpha: f64,
    /// The equivalence margin (%), from --margin or the baseline spec's
    /// `compare_margin_pct`; None: no equivalence test.
    pub margin_pct: Option<f64>,
    /// Where the margin came from ("--margin", "compare_margin_pct").
    pub margin_from: Option<String>,
    pub bootstrap_seed: u64,
    pub max_resamples: usize,
    /// Condition × metric, conditions in the baseline's order, metrics in
    /// report order within each.
    pub comparisons: Vec<Row>,
    pub summary: Vec<MetricSummary>,
    /// Metrics of a compared condition that some runs of a side have no
    /// value of, and why: "baseline: pi, 2 processes, OTHER: voluntary
    /// context switches: not given for …" (those runs are not in its n).
    pub absent: Vec<String>,
    /// Conditions of one campaign without a counterpart in the other.
    pub only_in_baseline: Vec<String>,
    pub only_in_candidate: Vec<String>,
}

impl Comparison {
    pub fn count(&self, v: Verdict) -> usize {
        self.comparisons.iter().filter(|r| r.verdict == v).count()
    }

    /// Tested rows that could never be significant after Holm's first
    /// step: their smallest attainable p times the number of tests is at
    /// least α (3 runs a side: 0.1 whatever the data).
    pub fn unreachable(&self) -> usize {
        let m = self.comparisons.iter().filter(|r| r.p.is_some()).count();
        self.comparisons
            .iter()
            .filter(|r| {
                r.min_attainable_p
                    .is_some_and(|p| p * m.max(1) as f64 >= self.alpha)
            })
            .count()
    }

    /// Rows whose margin verdict is `v`.
    pub fn count_margin(&self, v: MarginVerdict) -> usize {
        self.comparisons
            .iter()
            .filter(|r| r.margin_verdict == Some(v))
            .count()
    }

    /// The regressions: worse beyond the margin with significance.
    pub fn regressions(&self) -> Vec<&Row> {
        self.comparisons.iter().filter(|r| r.regression).collect()
    }

    /// Environment differences nobody said they meant.
    pub fn unexpected_environment(&self) -> Vec<&EnvRow> {
        self.environment.iter().filter(|r| r.unexpected()).collect()
    }

    /// The rows of a metric.
    pub fn rows_of(&self, m: Metric) -> impl Iterator<Item = &Row> {
        self.comparisons.iter().filter(move |r| r.metric == m)
    }
}

/// One side as the comparison takes it.
#[derive(Debug, Clone, Copy)]
pub struct Input<'a> {
    pub db: &'a str,
    pub analysis: &'a Analysis,
    /// The sched_ext state of each of the analysis's environments.
    pub sched_ext: &'a [Option<String>],
    /// The campaign's latency, when it stored histograms: its per-run
    /// p50 and p99 become metrics.
    pub latency: Option<&'a LatencyAnalysis>,
}

/// How to compare.
#[derive(Debug, Clone, PartialEq)]
pub struct CompareOptions {
    /// Bootstrap seed, resamples and metrics (the campaign is not used).
    pub analysis: Options,
    /// Compare specs that differ (listing the differences).
    pub force: bool,
    /// Environment fields meant to differ.
    pub expect: Vec<EnvField>,
    /// The equivalence margin (%), overriding the baseline spec's
    /// `compare_margin_pct`.
    pub margin_pct: Option<f64>,
}

/// The levels of both campaigns' factors, for labels that name every
/// factor that varies in either.
fn merged(a: &Factors, b: &Factors) -> Factors {
    fn union<T: Clone + PartialEq>(x: &[T], y: &[T]) -> Vec<T> {
        let mut v = x.to_vec();
        v.extend(y.iter().filter(|e| !x.contains(e)).cloned());
        v
    }
    let mut workloads = a.workloads.clone();
    workloads.extend(
        b.workloads
            .iter()
            .filter(|w| !a.workloads.iter().any(|x| x.name == w.name))
            .cloned(),
    );
    Factors {
        policies: union(&a.policies, &b.policies),
        workloads,
        processes: union(&a.processes, &b.processes),
        priority_modes: union(&a.priority_modes, &b.priority_modes),
        cpus: union(&a.cpus, &b.cpus),
        rt_runtime_us: union(&a.rt_runtime_us, &b.rt_runtime_us),
        slice_us: union(&a.slice_us, &b.slice_us),
        ext_schedulers: union(&a.ext_schedulers, &b.ext_schedulers),
        machines: union(&a.machines, &b.machines),
        by: None,
    }
}

/// Each condition of an analysis with its key, in the analysis's order.
fn keyed(a: &Analysis) -> Vec<(ConditionKey, usize)> {
    a.conditions
        .iter()
        .enumerate()
        .map(|(i, c)| {
            (
                ConditionKey {
                    group: a.groups[c.group].key.clone(),
                    policy: c.policy.clone(),
                },
                i,
            )
        })
        .collect()
}

fn label(k: &ConditionKey, f: &Factors) -> String {
    format!("{}, {}", group_label(&k.group, f), policy_label(&k.policy))
}

fn side_env<'a>(i: &Input<'a>) -> SideEnvironments<'a> {
    SideEnvironments {
        environments: &i.analysis.environments,
        sched_ext: i.sched_ext,
    }
}

/// "base.db campaign 3", with its machine level when it is one level's
/// runs ("base.db campaign 3, machine cfs").
fn side_label(i: &Input<'_>) -> String {
    let level = i
        .analysis
        .machine_level
        .as_ref()
        .map_or_else(String::new, |l| format!(", machine {l}"));
    format!("{} campaign {}{level}", i.db, i.analysis.campaign.id)
}

/// Compare one condition on one metric (without Holm's correction and
/// verdict, which need every row).
fn row(
    key: &ConditionKey,
    condition: String,
    unit: String,
    base: &Cell,
    cand: &Cell,
    opts: &Options,
    margin_pct: Option<f64>,
) -> Row {
    let margin = margin_pct.map(|m| m / 100.0);
    let metric = base.metric;
    let mean = |c: &Cell| c.summary.as_ref().map(|s| s.mean);
    let cv = |c: &Cell| c.summary.as_ref().and_then(|s| s.cv);
    let (bm, cm) = (mean(base), mean(cand));
    let ratio = match (bm, cm) {
        (Some(b), Some(c)) if b != 0.0 => Some(c / b),
        _ => None,
    };
    let resamples = resamples_for(opts.resamples, base.n + cand.n);
    let seed = seed_for(opts, &format!("compare|{condition}|{}", metric.name()));
    let enough = base.n >= MIN_PER_SIDE && cand.n >= MIN_PER_SIDE;
    let ci = if enough && ratio.is_some() {
        stats::bootstrap_ratio_ci(&cand.values, &base.values, 0.95, resamples, seed)
    } else {
        None
    };
    let p = if enough {
        stats::mann_whitney_u(&cand.values, &base.values).map(|m| m.p)
    } else {
        None
    };
    let equivalence = margin
        .filter(|_| enough)
        .and_then(|m| stats::tost_log_ratio(&cand.values, &base.values, m));
    let (baseline_cv, candidate_cv) = (cv(base), cv(cand));
    let noise = baseline_cv
        .into_iter()
        .chain(candidate_cv)
        .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
    let noise_exceeds_change = matches!((noise, ratio), (Some(n), Some(r)) if n > (r - 1.0).abs());
    Row {
        condition,
        factors: key.clone(),
        metric,
        direction: metric.direction(),
        unit,
        n_baseline: base.n,
        n_candidate: cand.n,
        baseline_mean: bm,
        candidate_mean: cm,
        baseline_cv,
        candidate_cv,
        ratio,
        ci_low: ci.map(|c| c.0),
        ci_high: ci.map(|c| c.1),
        p,
        p_adjusted: None,
        min_attainable_p: (enough
            && base.n <= stats::hypothesis::MANN_WHITNEY_EXACT_MAX_N
            && cand.n <= stats::hypothesis::MANN_WHITNEY_EXACT_MAX_N)
            .then(|| min_exact_p(base.n, cand.n)),
        verdict: Verdict::NotSeparated,
        detectable: None,
        equivalence,
        equivalence_p_adjusted: None,
        beyond_margin_p_adjusted: None,
        margin_pct,
        margin_verdict: None,
        regression: false,
        noise_exceeds_change,
        resamples,
        seed,
    }
}

/// The cells of one condition's latency percentiles (runs with a
/// histogram), or None when the campaign stored none for it.
fn latency_cell(
    l: Option<&LatencyAnalysis>,
    condition: usize,
    m: Metric,
    label: &str,
    opts: &Options,
) -> Option<Cell> {
    let c = l?.conditions.iter().find(|c| c.condition == condition)?;
    let values = match m {
        Metric::LatencyP50 => c.run_p50_us.clone(),
        Metric::LatencyP99 => c.run_p99_us.clone(),
        _ => return None,
    };
    Some(cell(m, c.run_ids.clone(), values, label, opts))
}

/// Holm-adjust `p(row)` over the rows that have one, writing each
/// adjusted value with `set`.
fn holm_over(
    jobs: &mut [(Row, &Cell, &Cell)],
    p: impl Fn(&Row) -> Option<f64>,
    set: impl Fn(&mut Row, f64),
) {
    let ps: Vec<f64> = jobs.iter().filter_map(|(r, _, _)| p(r)).collect();
    let adjusted = stats::holm(&ps);
    let mut k = 0;
    for (r, _, _) in jobs.iter_mut() {
        if p(r).is_some() {
            set(r, adjusted[k]);
            k += 1;
        }
    }
}

/// p of the one-sided test that the change is worse than the margin, in
/// the metric's direction.
fn beyond_margin_p(r: &Row) -> Option<f64> {
    let t = r.equivalence.as_ref()?;
    Some(match r.direction {
        Direction::LowerIsBetter => t.p_above_upp,
        Direction::HigherIsBetter => t.p_below_low,
    })
}

/// Verdicts, margin verdicts, regressions and detectable changes of every
/// row, once each row has its raw p-values.
fn decide(jobs: &mut [(Row, &Cell, &Cell)], margin: Option<f64>) {
    holm_over(jobs, |r| r.p, |r, p| r.p_adjusted = Some(p));
    holm_over(
        jobs,
        |r| r.equivalence.as_ref().map(|t| t.p),
        |r, p| r.equivalence_p_adjusted = Some(p),
    );
    holm_over(jobs, beyond_margin_p, |r, p| {
        r.beyond_margin_p_adjusted = Some(p)
    });
    let tested = jobs.iter().filter(|(r, _, _)| r.p.is_some()).count();
    for (r, b, c) in jobs.iter_mut() {
        let significant = r.p_adjusted.is_some_and(|p| p < ALPHA);
        r.verdict = match (significant, r.baseline_mean, r.candidate_mean) {
            (true, Some(b), Some(c)) => match r.direction.improved(b, c) {
                Some(true) => Verdict::Better,
                Some(false) => Verdict::Worse,
                None => Verdict::NotSeparated,
            },
            _ => Verdict::NotSeparated,
        };
        if r.verdict == Verdict::NotSeparated && r.p.is_some() {
            r.detectable = r.baseline_mean.and_then(|m| {
                detectable(&c.values, &b.values, m, ALPHA, tested, r.min_attainable_p)
            });
        }
        let Some(m) = margin else {
            r.regression = r.verdict == Verdict::Worse;
            continue;
        };
        r.margin_verdict = Some(if r.equivalence_p_adjusted.is_some_and(|p| p < ALPHA) {
            MarginVerdict::Equivalent
        } else if r.verdict != Verdict::NotSeparated {
            MarginVerdict::Different
        } else {
            MarginVerdict::NeitherShown
        });
        // Worse, and worse than the margin with significance; where the log
        // test cannot run (a value not positive), the ratio's interval
        // must lie wholly beyond the margin.
        let beyond = match r.beyond_margin_p_adjusted {
            Some(p) => p < ALPHA,
            None => match (r.direction, r.ci_low, r.ci_high) {
                (Direction::LowerIsBetter, Some(lo), _) => lo > 1.0 + m,
                (Direction::HigherIsBetter, _, Some(hi)) => hi < 1.0 - m,
                _ => false,
            },
        };
        r.regression = r.verdict == Verdict::Worse && beyond;
    }
}

/// The geometric-mean summary of one metric over `rows` (its rows), with
/// the runs of each row's cells for the interval.
fn summarise(metric: Metric, rows: &[(&Row, &Cell, &Cell)], opts: &Options) -> MetricSummary {
    let used: Vec<&(&Row, &Cell, &Cell)> = rows
        .iter()
        .filter(|(r, b, c)| r.ratio.is_some_and(|x| x > 0.0) && b.n >= 2 && c.n >= 2)
        .collect();
    let ratios: Vec<f64> = used.iter().filter_map(|(r, _, _)| r.ratio).collect();
    let geomean_ratio = stats::geometric_mean(&ratios);
    let pairs: Vec<(&[f64], &[f64])> = used
        .iter()
        .map(|(_, b, c)| (c.values.as_slice(), b.values.as_slice()))
        .collect();
    let n: usize = used.iter().map(|(_, b, c)| b.n + c.n).sum();
    let ci = if pairs.is_empty() {
        None
    } else {
        stats::bootstrap_geomean_ratio_ci(
            &pairs,
            0.95,
            resamples_for(opts.resamples, n),
            seed_for(opts, &format!("compare-geomean|{}", metric.name())),
        )
    };
    let direction = metric.direction();
    // A percentile bootstrap of a few runs is too narrow (as the report's
    // intervals of a mean, it is trusted from BOOTSTRAP_MIN_N runs on).
    let enough = used.iter().all(|(_, b, c)| b.n.min(c.n) >= BOOTSTRAP_MIN_N);
    let verdict = match ci.filter(|_| enough) {
        Some((lo, _)) if lo > 1.0 => direction.improved(1.0, lo),
        Some((_, hi)) if hi < 1.0 => direction.improved(1.0, hi),
        _ => None,
    }
    .map_or(Verdict::NotSeparated, |better| {
        if better {
            Verdict::Better
        } else {
            Verdict::Worse
        }
    });
    let count = |v: Verdict| rows.iter().filter(|(r, _, _)| r.verdict == v).count();
    MetricSummary {
        metric,
        direction,
        conditions: ratios.len(),
        geomean_ratio,
        ci_low: ci.map(|c| c.0),
        ci_high: ci.map(|c| c.1),
        verdict,
        better: count(Verdict::Better),
        worse: count(Verdict::Worse),
        not_separated: count(Verdict::NotSeparated),
    }
}

/// Compare the candidate with the baseline. The two analyses must have been
/// made with the same metrics (`opts.analysis.metrics`).
pub fn compare(
    baseline: Input<'_>,
    candidate: Input<'_>,
    opts: &CompareOptions,
) -> Result<Comparison, CompareError> {
    let (ba, ca) = (baseline.analysis, candidate.analysis);
    if baseline.db == candidate.db
        && ba.campaign.id == ca.campaign.id
        && ba.machine_level == ca.machine_level
    {
        return Err(CompareError::SameCampaign(side_label(&baseline)));
    }
    let spec_differences = spec_differences(&ba.campaign.spec_json, &ca.campaign.spec_json);
    if !spec_differences.is_empty() && !opts.force {
        return Err(CompareError::SpecsDiffer(spec_differences));
    }
    let factors = merged(&ba.factors, &ca.factors);
    let (bk, ck) = (keyed(ba), keyed(ca));
    let matched: Vec<(&ConditionKey, usize, usize)> = bk
        .iter()
        .filter_map(|(k, bi)| ck.iter().find(|(x, _)| x == k).map(|(_, ci)| (k, *bi, *ci)))
        .collect();
    if matched.is_empty() {
        return Err(CompareError::NothingInCommon {
            baseline: side_label(&baseline),
            candidate: side_label(&candidate),
        });
    }
    let only = |mine: &[(ConditionKey, usize)], other: &[(ConditionKey, usize)]| -> Vec<String> {
        mine.iter()
            .filter(|(k, _)| !other.iter().any(|(x, _)| x == k))
            .map(|(k, _)| label(k, &factors))
            .collect()
    };
    let (margin_pct, margin_from) = match opts.margin_pct {
        Some(m) => (Some(m), Some("--margin".to_string())),
        None => match spec_margin_pct(&ba.campaign.spec_json) {
            Some(m) => (Some(m), Some(MARGIN_KEY.to_string())),
            None => (None, None),
        },
    };
    let margin = margin_pct.map(|m| m / 100.0);
    let mut metrics = ba.settings.metrics.clone();
    // Latency percentiles, per condition where both sides stored them.
    let latency: Vec<(usize, Metric, Cell, Cell)> = matched
        .iter()
        .enumerate()
        .flat_map(|(i, &(key, bi, ci))| {
            let condition = label(key, &factors);
            Metric::LATENCY.into_iter().filter_map(move |m| {
                let b = latency_cell(baseline.latency, bi, m, &condition, &opts.analysis)?;
                let c = latency_cell(candidate.latency, ci, m, &condition, &opts.analysis)?;
                Some((i, m, b, c))
            })
        })
        .collect();
    for m in Metric::LATENCY {
        if latency.iter().any(|(_, x, _, _)| *x == m) {
            metrics.push(m);
        }
    }
    let mut jobs: Vec<(Row, &Cell, &Cell)> = Vec::new();
    for (i, &(key, bi, ci)) in matched.iter().enumerate() {
        let condition = label(key, &factors);
        let mut cells: Vec<(Metric, &Cell, &Cell)> = Vec::new();
        for (slot, &m) in ba.settings.metrics.iter().enumerate() {
            let Some(cslot) = ca.metric_index(m) else {
                continue;
            };
            cells.push((
                m,
                &ba.conditions[bi].cells[slot],
                &ca.conditions[ci].cells[cslot],
            ));
        }
        for (_, m, b, c) in latency.iter().filter(|(j, _, _, _)| *j == i) {
            cells.push((*m, b, c));
        }
        for (m, b, c) in cells {
            // A metric neither side measured (no schedstat) is no comparison.
            if b.n == 0 && c.n == 0 {
                continue;
            }
            let unit = ba.unit(m, &key.group.workload);
            jobs.push((
                row(
                    key,
                    condition.clone(),
                    unit,
                    b,
                    c,
                    &opts.analysis,
                    margin_pct,
                ),
                b,
                c,
            ));
        }
    }
    decide(&mut jobs, margin);
    let summary = metrics
        .iter()
        .map(|&m| {
            let rows: Vec<(&Row, &Cell, &Cell)> = jobs
                .iter()
                .filter(|(r, _, _)| r.metric == m)
                .map(|(r, b, c)| (r, *b, *c))
                .collect();
            summarise(m, &rows, &opts.analysis)
        })
        .filter(|s| s.conditions > 0 || s.better + s.worse + s.not_separated > 0)
        .collect();
    let side = |i: &Input<'_>| Side {
        db: i.db.to_string(),
        campaign: i.analysis.campaign.clone(),
        ok_runs: i.analysis.counts.ok,
        runs: i.analysis.counts.total(),
        machine: i.analysis.machine_level.clone(),
        guest_accels: {
            let mut v: Vec<String> = i
                .analysis
                .environments
                .iter()
                .filter_map(|e| e.guest_accel.clone())
                .collect();
            v.sort();
            v.dedup();
            v
        },
    };
    let absent = absent_figures(&baseline, &candidate, &metrics);
    Ok(Comparison {
        baseline: side(&baseline),
        candidate: side(&candidate),
        spec_differences,
        forced: opts.force,
        environment: environment_rows(side_env(&baseline), side_env(&candidate), &opts.expect),
        metrics,
        alpha: ALPHA,
        margin_pct,
        margin_from,
        bootstrap_seed: opts.analysis.bootstrap_seed,
        max_resamples: opts.analysis.resamples,
        comparisons: jobs.into_iter().map(|(r, _, _)| r).collect(),
        summary,
        absent,
        only_in_baseline: only(&bk, &ck),
        only_in_candidate: only(&ck, &bk),
    })
}

/// Each side's metrics among `metrics` that some ok runs of a condition
/// lack, with why ([`crate::report::analyse::Absent`]).
fn absent_figures(baseline: &Input<'_>, candidate: &Input<'_>, metrics: &[Metric]) -> Vec<String> {
    [("baseline", baseline), ("candidate", candidate)]
        .into_iter()
        .flat_map(|(side, i)| {
            i.analysis
                .absent
                .iter()
                .filter(|x| metrics.contains(&x.metric))
                .map(move |x| {
                    format!(
                        "{side}: {}: {}",
                        i.analysis.conditions[x.condition].label,
                        x.sentence()
                    )
                })
        })
        .collect()
}
