//! Every pair of policies within each group on every metric: tests,
//! Holm's correction, verdicts and sentences.

use super::conditions::{Cell, resamples_for, seed_for};
use super::{ALPHA, Analysis, MIN_PER_SIDE, Options, par_map, policy_label};
use crate::report::detectable::{Detectable, detectable};
use crate::report::fmt;
use crate::report::metric::Metric;
use crate::stats::{self, MannWhitney, MannWhitneyMethod, WelchTest};
use serde::Serialize;

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
    /// For a comparison not separated: the smallest change (of B's mean)
    /// these runs could have seen with 80 % power.
    pub detectable: Option<Detectable>,
    /// The finding in words, without the group ("OTHER wall time is …").
    pub statement: String,
    /// The statement prefixed with its group ("copy, 200 processes: …").
    pub sentence: String,
}

/// Smallest two-sided exact Mann–Whitney p for sizes (m, n): 2 / C(m+n, m).
pub(crate) fn min_exact_p(m: usize, n: usize) -> f64 {
    let mut c = 1.0_f64;
    for i in 0..m.min(n) {
        c = c * (m + n - i) as f64 / (i + 1) as f64;
    }
    (2.0 / c).min(1.0)
}

/// A comparison to compute: group, the two conditions, the metric slot.
pub(super) struct Job {
    group: usize,
    ca: usize,
    cb: usize,
    slot: usize,
}

pub(super) fn compare(a: &Analysis, job: &Job, opts: &Options) -> Comparison {
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
        detectable: None,
        statement: String::new(),
        sentence: String::new(),
    }
}

/// The plain-language statement of a comparison (without its group).
pub(super) fn statement(c: &Comparison) -> String {
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
            let seen = c
                .detectable
                .as_ref()
                .map_or_else(String::new, |d| format!("; {}", d.sentence()));
            format!(
                "the data do not separate {pa} and {pb} on {what} ({r}{ci}, {p}, {n}{note}){seen}"
            )
        }
    }
}

/// correction over all of them, verdicts and sentences.
pub(super) fn all_comparisons(a: &Analysis, opts: &Options) -> Vec<Comparison> {
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
    // What a "not separated" could have seen: the test over this family,
    // on every CPU (each a power search; serial, they were a fifth of the
    // report's single-threaded time at ten million rows).
    let tested = ps.len();
    let at: Vec<usize> = (0..jobs.len()).collect();
    let seen = par_map(&at, |&i| {
        let (c, j) = (&comparisons[i], &jobs[i]);
        if c.verdict != Verdict::NotSeparated {
            return None;
        }
        let (xa, xb) = (
            &a.conditions[j.ca].cells[j.slot],
            &a.conditions[j.cb].cells[j.slot],
        );
        c.mean_b.and_then(|reference| {
            detectable(
                &xa.values,
                &xb.values,
                reference,
                a.settings.alpha,
                tested,
                c.min_attainable_p,
            )
        })
    });
    for (c, d) in comparisons.iter_mut().zip(seen) {
        c.detectable = d;
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
