//! Latency of each condition from the stored histograms: every worker's
//! primary histogram pooled over the condition's runs (percentiles of the
//! pooled histogram, never averages of percentiles), with bootstrap
//! intervals over runs, deadline misses, the kernel's run-queue wait beside
//! the workload's own latency, and p99 compared between the policies of a
//! group (Mann–Whitney on per-run p99, Holm-corrected over the section).
//!
//! Pure: takes what [`crate::store::Store::campaign_latency`] loaded and the
//! analysed conditions.

use serde::Serialize;
use std::collections::HashMap;

use super::{Analysis, min_exact_p};
use crate::report::detectable::{Detectable, detectable};
use crate::rng::SplitMix64;
use crate::stats::hypothesis::{holm, mann_whitney_u};
use crate::store::ProcessLatency;
use crate::workload::latency::Latency;

/// Bootstrap resamples of a condition's runs.
const RESAMPLES: usize = 400;

/// A percentile with its 95 % bootstrap interval over runs, µs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Pct {
    pub us: f64,
    pub ci_us: Option<(f64, f64)>,
}

/// One condition's latency.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConditionLatency {
    pub condition: usize,
    pub label: String,
    pub policy: String,
    pub group: usize,
    /// The histogram's name ("wakeup", "round_trip", "request").
    pub name: String,
    pub runs: usize,
    /// The runs with a histogram, in run order (the per-run values' order).
    pub run_ids: Vec<i64>,
    pub events: u64,
    pub p50: Pct,
    pub p90: Pct,
    pub p99: Pct,
    pub p999: Pct,
    pub max_us: f64,
    /// Per-run p99 (µs), in run order: what the comparisons test.
    pub run_p99_us: Vec<f64>,
    /// Per-run p50 (µs), in run order (a metric of `compare`).
    pub run_p50_us: Vec<f64>,
    /// Σ misses / Σ activations over the condition's processes, where the
    /// workload counts them (periodic).
    pub misses: Option<u64>,
    pub activations: Option<u64>,
    /// The kernel's view: run-queue wait per time on a CPU (schedstat),
    /// mean over processes, µs.
    pub rq_wait_per_slice_us: Option<f64>,
}

/// p99 of two policies of one group, compared.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LatencyComparison {
    pub group: usize,
    pub a: usize,
    pub b: usize,
    /// Median per-run p99 of b / of a.
    pub ratio: f64,
    pub p: f64,
    pub p_adjusted: f64,
    /// Holm-adjusted p below the report's alpha.
    pub separated: bool,
    /// Not separated: the smallest change of a's per-run p99 these runs
    /// could have seen with 80 % power.
    pub detectable: Option<Detectable>,
}

/// The latency part of a report.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LatencyAnalysis {
    pub conditions: Vec<ConditionLatency>,
    pub comparisons: Vec<LatencyComparison>,
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1e3
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => v[n / 2],
        _ => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// The 2.5 % and 97.5 % points of `q` over `resamples` resamples of the
/// runs (with replacement), each pooling its runs' histograms.
fn bootstrap(runs: &[Latency], qs: &[f64], seed: u64) -> Vec<Option<(f64, f64)>> {
    if runs.len() < 2 {
        return vec![None; qs.len()];
    }
    let mut rng = SplitMix64::new(seed);
    let mut draws: Vec<Vec<f64>> = vec![Vec::with_capacity(RESAMPLES); qs.len()];
    for _ in 0..RESAMPLES {
        let mut pooled = Latency::new();
        for _ in 0..runs.len() {
            pooled.add(&runs[rng.below(runs.len() as u64) as usize]);
        }
        for (d, &q) in draws.iter_mut().zip(qs) {
            d.push(us(pooled.quantile_ns(q)));
        }
    }
    draws
        .into_iter()
        .map(|mut d| {
            d.sort_by(f64::total_cmp);
            let at = |p: f64| d[((p * (d.len() - 1) as f64).round() as usize).min(d.len() - 1)];
            Some((at(0.025), at(0.975)))
        })
        .collect()
}

/// Latency per condition and the p99 comparisons. `seed` makes the
/// bootstrap reproducible.
pub fn analyse(a: &Analysis, processes: &[ProcessLatency], seed: u64) -> LatencyAnalysis {
    let mut by_run: HashMap<i64, Vec<&ProcessLatency>> = HashMap::new();
    for p in processes {
        by_run.entry(p.run_id).or_default().push(p);
    }
    let mut out = LatencyAnalysis::default();
    for (ci, c) in a.conditions.iter().enumerate() {
        let mut run_ids: Vec<i64> = c
            .cells
            .iter()
            .flat_map(|cell| cell.run_ids.clone())
            .collect();
        run_ids.sort_unstable();
        run_ids.dedup();
        let (run_ids, runs): (Vec<i64>, Vec<&Vec<&ProcessLatency>>) = run_ids
            .iter()
            .filter_map(|id| by_run.get(id).map(|r| (*id, r)))
            .unzip();
        if runs.is_empty() {
            continue;
        }
        let per_run: Vec<Latency> = runs
            .iter()
            .map(|ps| Latency::pooled(ps.iter().map(|p| &p.histogram)))
            .collect();
        let pooled = Latency::pooled(&per_run);
        let qs = [0.5, 0.9, 0.99, 0.999];
        let cis = bootstrap(&per_run, &qs, seed ^ (ci as u64).wrapping_mul(0x9E37_79B9));
        let pct = |i: usize| Pct {
            us: us(pooled.quantile_ns(qs[i])),
            ci_us: cis[i],
        };
        let all: Vec<&ProcessLatency> = runs.iter().flat_map(|ps| ps.iter().copied()).collect();
        let sum = |f: fn(&ProcessLatency) -> Option<f64>| -> Option<u64> {
            let v: Vec<f64> = all.iter().filter_map(|p| f(p)).collect();
            (!v.is_empty()).then(|| v.iter().sum::<f64>().round() as u64)
        };
        let waits: Vec<f64> = all
            .iter()
            .filter_map(|p| crate::store::rq_wait_per_slice_us(&p.kernel))
            .collect();
        out.conditions.push(ConditionLatency {
            condition: ci,
            label: c.label.clone(),
            policy: c.policy.clone(),
            group: c.group,
            name: all[0].name.clone(),
            runs: per_run.len(),
            run_ids,
            events: pooled.count(),
            p50: pct(0),
            p90: pct(1),
            p99: pct(2),
            p999: pct(3),
            max_us: us(pooled.percentiles().max_ns),
            run_p99_us: per_run.iter().map(|h| us(h.quantile_ns(0.99))).collect(),
            run_p50_us: per_run.iter().map(|h| us(h.quantile_ns(0.5))).collect(),
            misses: sum(|p| p.misses),
            activations: sum(|p| p.activations),
            rq_wait_per_slice_us: (!waits.is_empty())
                .then(|| waits.iter().sum::<f64>() / waits.len() as f64),
        });
    }
    // Every pair of policies within a group.
    let mut pairs = Vec::new();
    for (i, x) in out.conditions.iter().enumerate() {
        for (j, y) in out.conditions.iter().enumerate().skip(i + 1) {
            if x.group != y.group {
                continue;
            }
            if let Some(t) = mann_whitney_u(&x.run_p99_us, &y.run_p99_us) {
                let ratio = median(y.run_p99_us.clone()) / median(x.run_p99_us.clone());
                pairs.push((i, j, ratio, t.p));
            }
        }
    }
    let adjusted = holm(&pairs.iter().map(|p| p.3).collect::<Vec<_>>());
    let tests = pairs.len();
    out.comparisons = pairs
        .into_iter()
        .zip(adjusted)
        .map(|((i, j, ratio, p), p_adjusted)| {
            let separated = p_adjusted < a.settings.alpha;
            let (x, y) = (&out.conditions[i].run_p99_us, &out.conditions[j].run_p99_us);
            let exact = x.len() <= crate::stats::hypothesis::MANN_WHITNEY_EXACT_MAX_N
                && y.len() <= crate::stats::hypothesis::MANN_WHITNEY_EXACT_MAX_N;
            let detectable = (!separated)
                .then(|| {
                    let reference = x.iter().sum::<f64>() / x.len() as f64;
                    detectable(
                        x,
                        y,
                        reference,
                        a.settings.alpha,
                        tests,
                        exact.then(|| min_exact_p(x.len(), y.len())),
                    )
                })
                .flatten();
            LatencyComparison {
                group: out.conditions[i].group,
                a: i,
                b: j,
                ratio,
                p,
                p_adjusted,
                separated,
                detectable,
            }
        })
        .collect();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hist(values: &[u64]) -> Latency {
        let mut h = Latency::new();
        for &v in values {
            h.record_ns(v);
        }
        h
    }

    #[test]
    fn bootstrap_brackets_the_pooled_percentile_and_needs_two_runs() {
        let runs: Vec<Latency> = (1..=6u64)
            .map(|r| hist(&(1..=200).map(|v| v * 1000 * r).collect::<Vec<_>>()))
            .collect();
        let pooled = Latency::pooled(&runs);
        let ci = bootstrap(&runs, &[0.5], 7)[0].unwrap();
        let p50 = us(pooled.quantile_ns(0.5));
        assert!(ci.0 <= p50 && p50 <= ci.1, "{ci:?} vs {p50}");
        assert!(ci.0 < ci.1);
        assert_eq!(bootstrap(&runs[..1], &[0.5], 7), vec![None]);
        // Reproducible from its seed.
        assert_eq!(bootstrap(&runs, &[0.99], 3), bootstrap(&runs, &[0.99], 3));
    }

    #[test]
    fn p99_comparisons_not_separated_say_what_could_have_been_seen() {
        // The planted pair's baseline: OTHER and BATCH with the same latency
        // (1.5 % run-to-run noise), 10 runs each, in 2 groups.
        use crate::testing::planted::{Planted, latency, report_data};
        let cfg = Planted::new(10);
        let data = report_data(&cfg, false, 1).unwrap();
        let hist = latency(&cfg, &data, false);
        let a = super::super::analyse_data(data, &super::super::Options::default());
        let l = analyse(&a, &hist, 1);
        assert_eq!(l.conditions.len(), 4);
        assert!(l.conditions.iter().all(|c| c.run_p50_us.len() == 10));
        assert_eq!(l.comparisons.len(), 2);
        for c in &l.comparisons {
            assert!(!c.separated, "{c:?}");
            let d = c.detectable.as_ref().unwrap();
            assert_eq!((d.tests, d.n_a, d.n_b), (2, 10, 10));
            // Noise of about 1.5 %: a few % could have been seen.
            let r = d.relative.unwrap();
            assert!(r > 0.005 && r < 0.06, "{d:?}");
        }
    }

    #[test]
    fn median_of_even_and_odd() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(vec![]).is_nan());
    }
}
