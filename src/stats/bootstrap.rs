//! Seeded percentile-bootstrap confidence intervals: of a mean
//! ([`bootstrap_mean_ci`]) and of a ratio of two independent groups' means
//! ([`bootstrap_ratio_ci`], e.g. "policy A's run time relative to B's"), and
//! of the geometric mean of several such ratios ([`bootstrap_geomean_ratio_ci`],
//! "the candidate's run time relative to the baseline's, over all
//! conditions").
//!
//! Resampling draws indices with [`SplitMix64::below`], so an interval is a
//! pure function of (data, level, resamples, seed): the same seed reproduces
//! it bit for bit, on any machine and any version of this crate whose
//! algorithm is unchanged. Quantiles of the bootstrap distribution are type-7
//! [`percentile`](super::summary::percentile)s (numpy's default).

use crate::rng::{Below, SplitMix64};

use super::summary::select_percentile;

/// Whether `level` is a usable confidence level (strictly between 0 and 1).
fn valid_level(level: f64) -> bool {
    level > 0.0 && level < 1.0
}

/// Mean of `xs[i]` over `n` indices drawn with replacement.
///
/// The indices are `rng.below(n)`'s and the sum is taken in draw order, so
/// the mean is the same bit for bit; the draws run on a copy of the
/// generator with the bound's threshold worked out once, and read with
/// `get` (an index is the high word of a 64-bit value times n, so below
/// n): an indexing panic path kept the generator in memory, a quarter
/// slower per draw. Not inlined: inlined into the ratio's loop, the draws
/// were twice as slow (1.7 against 3.4 ns a draw there, measured).
#[inline(never)]
fn resample_mean(xs: &[f64], rng: &mut SplitMix64) -> f64 {
    let n = xs.len();
    let below = Below::new(n as u64);
    let mut local = rng.clone();
    let mut sum = 0.0;
    for _ in 0..n {
        sum += xs
            .get(below.draw(&mut local) as usize)
            .copied()
            .unwrap_or(f64::NAN);
    }
    *rng = local;
    sum / n as f64
}

fn min_max(xs: &[f64]) -> (f64, f64) {
    xs.iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
            (lo.min(x), hi.max(x))
        })
}

/// The two percentile-interval ends of `stats` at `level`: the type-7
/// percentiles of the sorted values, found by selection (reorders `stats`).
fn percentile_interval(stats: &mut [f64], level: f64) -> (f64, f64) {
    let alpha = (1.0 - level) / 2.0;
    (
        select_percentile(stats, alpha),
        select_percentile(stats, 1.0 - alpha),
    )
}

/// Percentile-bootstrap confidence interval of the mean of `xs`.
///
/// Draws `resamples` resamples of `xs.len()` values with replacement from a
/// [`SplitMix64`] seeded with `seed`, and returns the `(1 − level)/2` and
/// `(1 + level)/2` type-7 percentiles of their means. Use a few thousand
/// resamples (e.g. 10 000) for a report.
///
/// Edge cases:
/// - `(NaN, NaN)` when `xs` is empty, contains a NaN or infinity,
///   `resamples == 0`, or `level` is not strictly between 0 and 1.
/// - n == 1 or all values equal: both ends equal the value (resample means
///   are clamped to [min, max] so rounding cannot move them off it).
/// - For small n the percentile bootstrap is too narrow (it ignores the
///   n/(n−1) variance factor); prefer the t-interval of
///   [`summarize`](super::summary::summarize) below ~15 runs.
pub fn bootstrap_mean_ci(xs: &[f64], level: f64, resamples: usize, seed: u64) -> (f64, f64) {
    if xs.is_empty() || resamples == 0 || !valid_level(level) || xs.iter().any(|x| !x.is_finite()) {
        return (f64::NAN, f64::NAN);
    }
    let (lo, hi) = min_max(xs);
    let mut rng = SplitMix64::new(seed);
    let mut means: Vec<f64> = (0..resamples)
        .map(|_| resample_mean(xs, &mut rng).clamp(lo, hi))
        .collect();
    percentile_interval(&mut means, level)
}

/// Percentile-bootstrap confidence interval of `mean(a) / mean(b)`, resampling
/// each group independently (for each resample: `a.len()` draws from `a`,
/// then `b.len()` draws from `b`, from one [`SplitMix64`] seeded with `seed`).
///
/// Resamples whose `b` mean is exactly 0 have no ratio and are dropped; the
/// interval is computed from the rest.
///
/// Edge cases — returns `None` when:
/// - `a` or `b` is empty, or contains a NaN or infinity;
/// - `resamples == 0`, or `level` is not strictly between 0 and 1;
/// - more than half of the resamples had a `b` mean of 0 (e.g. `b` all
///   zeros), since the ratio is then mostly undefined.
///
/// A ratio CI excluding 1 indicates a real relative difference; note that
/// when `b`'s mean is near 0 the ratio is unstable and the interval wide.
pub fn bootstrap_ratio_ci(
    a: &[f64],
    b: &[f64],
    level: f64,
    resamples: usize,
    seed: u64,
) -> Option<(f64, f64)> {
    if a.is_empty()
        || b.is_empty()
        || resamples == 0
        || !valid_level(level)
        || a.iter().chain(b).any(|x| !x.is_finite())
    {
        return None;
    }
    let (a_lo, a_hi) = min_max(a);
    let (b_lo, b_hi) = min_max(b);
    let mut rng = SplitMix64::new(seed);
    let mut ratios = Vec::with_capacity(resamples);
    let mut zero_denominators = 0usize;
    for _ in 0..resamples {
        let ma = resample_mean(a, &mut rng).clamp(a_lo, a_hi);
        let mb = resample_mean(b, &mut rng).clamp(b_lo, b_hi);
        if mb == 0.0 {
            zero_denominators += 1;
        } else {
            ratios.push(ma / mb);
        }
    }
    if 2 * zero_denominators > resamples || ratios.is_empty() {
        return None;
    }
    Some(percentile_interval(&mut ratios, level))
}

/// Geometric mean of positive finite values (None when empty or when one is
/// not positive and finite).
pub fn geometric_mean(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() || xs.iter().any(|x| !(x.is_finite() && *x > 0.0)) {
        return None;
    }
    Some((xs.iter().map(|x| x.ln()).sum::<f64>() / xs.len() as f64).exp())
}

/// Percentile-bootstrap confidence interval of the geometric mean over
/// `pairs` of the ratios mean(a) / mean(b): each resample resamples both
/// groups of every pair independently (in order, from one [`SplitMix64`]
/// seeded with `seed`), takes each pair's ratio of means and their
/// geometric mean. The interval carries the run-to-run noise of every
/// pair, not only the spread between pairs.
///
/// Returns `None` when `pairs` is empty, a group is empty or holds a
/// non-finite or negative value, `resamples == 0`, `level` is not strictly
/// between 0 and 1, or more than half of the resamples have a ratio that is
/// not positive (a mean of 0 on either side).
pub fn bootstrap_geomean_ratio_ci(
    pairs: &[(&[f64], &[f64])],
    level: f64,
    resamples: usize,
    seed: u64,
) -> Option<(f64, f64)> {
    if pairs.is_empty()
        || resamples == 0
        || !valid_level(level)
        || pairs.iter().any(|(a, b)| {
            a.is_empty()
                || b.is_empty()
                || a.iter().chain(b.iter()).any(|x| !x.is_finite() || *x < 0.0)
        })
    {
        return None;
    }
    let bounds: Vec<((f64, f64), (f64, f64))> = pairs
        .iter()
        .map(|(a, b)| (min_max(a), min_max(b)))
        .collect();
    let mut rng = SplitMix64::new(seed);
    let mut stats = Vec::with_capacity(resamples);
    let mut undefined = 0usize;
    for _ in 0..resamples {
        let mut log_sum = 0.0;
        let mut ok = true;
        for ((a, b), ((a_lo, a_hi), (b_lo, b_hi))) in pairs.iter().zip(&bounds) {
            let ma = resample_mean(a, &mut rng).clamp(*a_lo, *a_hi);
            let mb = resample_mean(b, &mut rng).clamp(*b_lo, *b_hi);
            if ma > 0.0 && mb > 0.0 {
                log_sum += (ma / mb).ln();
            } else {
                ok = false;
            }
        }
        if ok {
            stats.push((log_sum / pairs.len() as f64).exp());
        } else {
            undefined += 1;
        }
    }
    if 2 * undefined > resamples || stats.is_empty() {
        return None;
    }
    Some(percentile_interval(&mut stats, level))
}

#[cfg(test)]
mod tests {
    use super::super::summary::summarize;
    use super::*;

    /// Deterministic, roughly normal sample: Box–Muller on SplitMix64.
    fn normal_sample(n: usize, mean: f64, sd: f64, seed: u64) -> Vec<f64> {
        let mut rng = SplitMix64::new(seed);
        (0..n)
            .map(|_| {
                let u1 = 1.0 - rng.next_f64(); // (0, 1]
                let u2 = rng.next_f64();
                let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
                mean + sd * z
            })
            .collect()
    }

    #[test]
    fn mean_ci_is_deterministic_for_a_seed() {
        let xs = [35.2, 34.9, 36.1, 35.5, 35.0, 34.7, 35.8, 41.3];
        let a = bootstrap_mean_ci(&xs, 0.95, 2000, 42);
        let b = bootstrap_mean_ci(&xs, 0.95, 2000, 42);
        assert_eq!(a, b);
        let c = bootstrap_mean_ci(&xs, 0.95, 2000, 43);
        assert_ne!(a, c);
        assert!(a.0 < a.1);
    }

    #[test]
    fn mean_ci_matches_independent_python_replay() {
        // Replayed in Python with an independent SplitMix64 + Lemire `below`
        // (same algorithm as src/rng.rs) drawing the same indices, then
        // numpy.percentile(means, [2.5, 97.5]) (type 7) over 1000 resamples
        // of xs with seed 7 -> [35.0746875, 37.613125000000004].
        let xs = [35.2, 34.9, 36.1, 35.5, 35.0, 34.7, 35.8, 41.3];
        let (lo, hi) = bootstrap_mean_ci(&xs, 0.95, 1000, 7);
        assert!((lo - 35.0746875).abs() < 1e-9, "{lo}");
        assert!((hi - 37.613125000000004).abs() < 1e-9, "{hi}");
    }

    #[test]
    fn mean_ci_of_large_normal_sample_is_close_to_t_interval() {
        let xs = normal_sample(2000, 100.0, 15.0, 2024);
        let s = summarize(&xs).unwrap();
        let (lo, hi) = bootstrap_mean_ci(&xs, 0.95, 4000, 99);
        assert!(lo < s.mean && s.mean < hi);
        let half_t = (s.ci95_hi - s.ci95_lo) / 2.0;
        assert!(
            (lo - s.ci95_lo).abs() < 0.1 * half_t,
            "lo {lo} vs {}",
            s.ci95_lo
        );
        assert!(
            (hi - s.ci95_hi).abs() < 0.1 * half_t,
            "hi {hi} vs {}",
            s.ci95_hi
        );
        let width_ratio = (hi - lo) / (s.ci95_hi - s.ci95_lo);
        assert!(
            (0.9..1.1).contains(&width_ratio),
            "width ratio {width_ratio}"
        );
    }

    #[test]
    fn mean_ci_edge_cases() {
        assert!(bootstrap_mean_ci(&[], 0.95, 100, 1).0.is_nan());
        assert!(bootstrap_mean_ci(&[1.0, 2.0], 0.95, 0, 1).1.is_nan());
        assert!(bootstrap_mean_ci(&[1.0, 2.0], 1.0, 100, 1).0.is_nan());
        assert!(bootstrap_mean_ci(&[1.0, 2.0], 0.0, 100, 1).0.is_nan());
        assert!(bootstrap_mean_ci(&[1.0, f64::NAN], 0.9, 100, 1).0.is_nan());
        assert_eq!(bootstrap_mean_ci(&[3.5], 0.95, 100, 1), (3.5, 3.5));
        // Zero variance: exactly the value, no NaN, no rounding drift.
        assert_eq!(bootstrap_mean_ci(&[0.1; 7], 0.95, 500, 1), (0.1, 0.1));
    }

    #[test]
    fn ratio_ci_matches_independent_python_replay() {
        // Python replay as above (for each resample: 6 draws from a, then
        // 5 from b, one SplitMix64 seeded 11), 1000 resamples,
        // numpy.percentile(ratios, [5, 95])
        //   -> [1.1364398946461833, 1.1754744023482175]
        let a = [40.1, 41.0, 39.5, 42.2, 40.8, 41.5];
        let b = [35.2, 34.9, 36.1, 35.5, 35.0];
        let (lo, hi) = bootstrap_ratio_ci(&a, &b, 0.90, 1000, 11).unwrap();
        assert!((lo - 1.1364398946461833).abs() < 1e-12, "{lo}");
        assert!((hi - 1.1754744023482175).abs() < 1e-12, "{hi}");
        assert_eq!(
            bootstrap_ratio_ci(&a, &b, 0.90, 1000, 11),
            bootstrap_ratio_ci(&a, &b, 0.90, 1000, 11)
        );
    }

    #[test]
    fn ratio_ci_covers_true_ratio_of_large_samples() {
        let a = normal_sample(1000, 120.0, 10.0, 1);
        let b = normal_sample(1000, 100.0, 10.0, 2);
        let (lo, hi) = bootstrap_ratio_ci(&a, &b, 0.95, 2000, 3).unwrap();
        let ratio = summarize(&a).unwrap().mean / summarize(&b).unwrap().mean;
        assert!(lo < ratio && ratio < hi, "{lo} {ratio} {hi}");
        assert!(lo > 1.1 && hi < 1.3);
    }

    #[test]
    fn ratio_ci_edge_cases() {
        assert_eq!(bootstrap_ratio_ci(&[], &[1.0], 0.95, 100, 1), None);
        assert_eq!(bootstrap_ratio_ci(&[1.0], &[], 0.95, 100, 1), None);
        assert_eq!(bootstrap_ratio_ci(&[1.0], &[1.0], 0.95, 0, 1), None);
        assert_eq!(bootstrap_ratio_ci(&[1.0], &[1.0], 1.5, 100, 1), None);
        // Denominator always zero.
        assert_eq!(
            bootstrap_ratio_ci(&[1.0, 2.0], &[0.0, 0.0], 0.95, 100, 1),
            None
        );
        // One of two denominators zero: resamples of b = [0, 0] have
        // probability 1/4, well under half, so an interval exists.
        let r = bootstrap_ratio_ci(&[2.0, 2.0], &[0.0, 4.0], 0.95, 400, 5).unwrap();
        assert_eq!(r, (0.5, 1.0));
        assert_eq!(
            bootstrap_ratio_ci(&[3.0], &[2.0], 0.95, 10, 1),
            Some((1.5, 1.5))
        );
    }

    #[test]
    fn geometric_mean_of_ratios() {
        assert_eq!(geometric_mean(&[]), None);
        assert_eq!(geometric_mean(&[2.0, 0.0]), None);
        let g = geometric_mean(&[2.0, 8.0]).unwrap();
        assert!((g - 4.0).abs() < 1e-12, "{g}");
    }

    #[test]
    fn geomean_ratio_interval_covers_the_planted_ratio() {
        // Two pairs with a true ratio of 1.2 each, 5 % noise.
        let a1 = normal_sample(20, 12.0, 0.6, 1);
        let b1 = normal_sample(20, 10.0, 0.5, 2);
        let a2 = normal_sample(20, 2.4, 0.12, 3);
        let b2 = normal_sample(20, 2.0, 0.1, 4);
        let pairs: [(&[f64], &[f64]); 2] = [(&a1, &b1), (&a2, &b2)];
        let (lo, hi) = bootstrap_geomean_ratio_ci(&pairs, 0.95, 2000, 9).unwrap();
        assert!(lo < 1.2 && 1.2 < hi, "{lo}..{hi}");
        assert!(lo > 1.1 && hi < 1.3, "too wide: {lo}..{hi}");
        // Deterministic in the seed.
        assert_eq!(
            bootstrap_geomean_ratio_ci(&pairs, 0.95, 2000, 9),
            Some((lo, hi))
        );
        // A single pair: the interval of that ratio.
        let one: [(&[f64], &[f64]); 1] = [(&a1, &b1)];
        let (l1, h1) = bootstrap_geomean_ratio_ci(&one, 0.95, 2000, 9).unwrap();
        assert!(l1 < 1.2 && 1.2 < h1);
        // Degenerate input.
        assert_eq!(bootstrap_geomean_ratio_ci(&[], 0.95, 100, 1), None);
        let zeros = [0.0, 0.0];
        let z: [(&[f64], &[f64]); 1] = [(&a1, &zeros)];
        assert_eq!(bootstrap_geomean_ratio_ci(&z, 0.95, 100, 1), None);
        assert_eq!(bootstrap_geomean_ratio_ci(&pairs, 1.0, 100, 1), None);
    }
}
