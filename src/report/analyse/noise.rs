//! Runs whose noise was beyond the campaign's usual, and whether leaving
//! them out changes a finding. A run's noise is the interrupts and softirqs
//! on its CPUs per second of run and per CPU (`record::Interference`); a
//! run is noisy when that is above the median of the campaign's ok runs by
//! more than [`NOISE_MAD_K`] normal-consistent MADs. The flagged runs stay
//! in every figure; the report says which they are and whether the
//! significant findings stay the same without them.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{Comparison, Verdict};
use crate::store::ReportRun;

/// How many MADs (scaled by 1.4826, so one is a standard deviation for
/// normal data) above the median a run's noise must be to be flagged:
/// Iglewicz and Hoaglin's 3.5 for modified z-scores.
pub const NOISE_MAD_K: f64 = 3.5;
/// The MAD of normal data is 0.6745 σ.
const MAD_TO_SIGMA: f64 = 1.4826;
/// Fewer measured ok runs than this give no usual to compare with.
pub const NOISE_MIN_RUNS: usize = 5;

/// The noise check of a campaign.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct NoiseCheck {
    /// Ok runs with interrupts and softirqs recorded.
    pub measured_runs: usize,
    /// Median interrupts + softirqs per second per CPU over those runs.
    pub median_per_cpu_s: Option<f64>,
    /// Runs above it flag: median + k · 1.4826 · MAD.
    pub threshold_per_cpu_s: Option<f64>,
    /// (run id, its interrupts + softirqs per second per CPU), in campaign
    /// order.
    pub noisy_runs: Vec<(i64, f64)>,
    /// The significant findings without the noisy runs, when any were
    /// flagged.
    pub without: Option<FindingsWithout>,
}

/// How the significant findings change when the noisy runs are left out.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct FindingsWithout {
    /// Significant with every run, not without the noisy ones.
    pub lost: Vec<String>,
    /// Significant only without the noisy runs.
    pub gained: Vec<String>,
}

impl FindingsWithout {
    /// The same significant set either way.
    pub fn same(&self) -> bool {
        self.lost.is_empty() && self.gained.is_empty()
    }
}

/// Number of CPUs in a CPU list label ("0-3,6"); None if it is not one.
pub fn cpu_count(label: &str) -> Option<usize> {
    let mut n = 0;
    for part in label.split(',') {
        let part = part.trim();
        n += match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.parse().ok()?, b.parse().ok()?);
                b.checked_sub(a)? + 1
            }
            None => {
                part.parse::<usize>().ok()?;
                1
            }
        };
    }
    (n > 0).then_some(n)
}

/// Interrupts + softirqs per second of run per CPU of the run; None when
/// either count, the makespan or the CPU list is missing.
pub fn noise_per_cpu_s(r: &ReportRun) -> Option<f64> {
    let events = r.interrupts? + r.softirqs?;
    let seconds = r.makespan_ns.filter(|&ns| ns > 0)? as f64 / 1e9;
    Some(events as f64 / seconds / cpu_count(&r.cpu_list)? as f64)
}

fn median(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    match n % 2 {
        1 => sorted[n / 2],
        _ => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

/// Flag the ok runs of `runs` whose noise is beyond the usual (see the
/// module); `without` is left for the caller.
pub fn flag(runs: &[ReportRun]) -> NoiseCheck {
    let measured: Vec<(i64, f64)> = runs
        .iter()
        .filter(|r| r.status == "ok")
        .filter_map(|r| Some((r.id, noise_per_cpu_s(r)?)))
        .collect();
    let mut check = NoiseCheck {
        measured_runs: measured.len(),
        ..NoiseCheck::default()
    };
    if measured.len() < NOISE_MIN_RUNS {
        return check;
    }
    let mut values: Vec<f64> = measured.iter().map(|m| m.1).collect();
    values.sort_by(f64::total_cmp);
    let med = median(&values);
    let mut deviations: Vec<f64> = values.iter().map(|v| (v - med).abs()).collect();
    deviations.sort_by(f64::total_cmp);
    let threshold = med + NOISE_MAD_K * MAD_TO_SIGMA * median(&deviations);
    check.median_per_cpu_s = Some(med);
    check.threshold_per_cpu_s = Some(threshold);
    check.noisy_runs = measured.into_iter().filter(|m| m.1 > threshold).collect();
    check
}

/// The significant comparisons by what they compare (group, metric, and
/// the policies in the order of their means, so a reversal is a change),
/// with their sentences: the sentence alone would differ with every mean.
fn significant(comparisons: &[Comparison]) -> BTreeMap<(usize, String, &str, &str), &str> {
    comparisons
        .iter()
        .filter(|c| c.verdict == Verdict::Different)
        .map(|c| {
            let key = (
                c.group,
                format!("{:?}", c.metric),
                c.a.as_str(),
                c.b.as_str(),
            );
            (key, c.sentence.as_str())
        })
        .collect()
}

/// The significant findings with every run against those without the
/// noisy runs.
pub fn findings_without(all: &[Comparison], without: &[Comparison]) -> FindingsWithout {
    let (a, b) = (significant(all), significant(without));
    let only = |x: &BTreeMap<_, &str>, y: &BTreeMap<_, &str>| -> Vec<String> {
        x.iter()
            .filter(|(k, _)| !y.contains_key(*k))
            .map(|(_, s)| s.to_string())
            .collect()
    };
    FindingsWithout {
        lost: only(&a, &b),
        gained: only(&b, &a),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(id: i64, events: i64) -> ReportRun {
        let mut r = crate::report::analyse::tests::mem_run(id, "other", id, "ok", 2.0);
        r.cpu_list = "0-1".into();
        r.interrupts = Some(events / 2);
        r.softirqs = Some(events - events / 2);
        r
    }

    #[test]
    fn cpu_lists_are_counted() {
        assert_eq!(cpu_count("0"), Some(1));
        assert_eq!(cpu_count("0-3,6"), Some(5));
        assert_eq!(cpu_count("2,4"), Some(2));
        assert_eq!(cpu_count(""), None);
        assert_eq!(cpu_count("3-1"), None);
        assert_eq!(cpu_count("all"), None);
    }

    #[test]
    fn noise_is_per_second_and_cpu() {
        // 8000 events over 2 s on 2 CPUs.
        assert_eq!(noise_per_cpu_s(&run(1, 8000)), Some(2000.0));
        let mut r = run(1, 8000);
        r.softirqs = None;
        assert_eq!(noise_per_cpu_s(&r), None);
    }

    #[test]
    fn a_run_far_above_the_usual_is_flagged_and_only_it() {
        // 2000 ± 100 per CPU-second, and one at 10000.
        let mut runs: Vec<ReportRun> = [7600, 8000, 8400, 7800, 8200, 8000]
            .iter()
            .enumerate()
            .map(|(i, &e)| run(i as i64 + 1, e))
            .collect();
        runs.push(run(7, 40_000));
        let check = flag(&runs);
        assert_eq!(check.measured_runs, 7);
        assert_eq!(check.median_per_cpu_s, Some(2000.0));
        assert_eq!(check.noisy_runs, vec![(7, 10_000.0)]);
        // Median 2000, MAD 50: 2000 + 3.5 × 1.4826 × 50.
        assert!((check.threshold_per_cpu_s.unwrap() - 2259.455).abs() < 1e-6);
        // A failed run is never the usual nor flagged.
        runs[6].status = "failed".into();
        assert!(flag(&runs).noisy_runs.is_empty());
    }

    #[test]
    fn too_few_runs_flag_nothing() {
        let runs: Vec<ReportRun> = (1..=4).map(|i| run(i, i * 10_000)).collect();
        let check = flag(&runs);
        assert_eq!((check.measured_runs, check.threshold_per_cpu_s), (4, None));
        assert!(check.noisy_runs.is_empty());
    }
}
