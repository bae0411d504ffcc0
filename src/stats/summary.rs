//! Descriptive statistics of one sample: the [`Summary`] of a set of runs
//! (mean, median, sample standard deviation, coefficient of variation,
//! t-interval of the mean) and type-7 [`percentile`]s.
//!
//! Zero variance (all runs equal) never produces NaN: the standard deviation,
//! standard error and CV are exactly 0 and the interval collapses to the
//! value.

use serde::Serialize;

use super::dist::t_quantile;

/// Descriptive statistics of a sample, as produced by [`summarize`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// Number of values.
    pub n: usize,
    pub mean: f64,
    /// Type-7 median (mean of the two middle values for even n).
    pub median: f64,
    /// Sample standard deviation (denominator n − 1); 0 when n == 1.
    pub sd: f64,
    pub min: f64,
    pub max: f64,
    /// Coefficient of variation sd / mean; `None` when mean == 0 or n < 2.
    pub cv: Option<f64>,
    /// Lower end of the 95 % Student-t interval of the mean.
    pub ci95_lo: f64,
    /// Upper end of the 95 % Student-t interval of the mean.
    pub ci95_hi: f64,
    /// Standard error of the mean sd / √n; 0 when n == 1.
    pub se: f64,
}

/// Summarize a sample.
///
/// Edge cases:
/// - `None` for an empty slice or when any value is NaN or infinite (a
///   summary of a corrupt measurement would be meaningless).
/// - n == 1: sd = se = 0, cv = None, and both interval ends equal the value.
/// - all values equal: mean is exactly that value, sd = se = 0, cv = 0
///   (or None when the value is 0), interval collapsed to the value.
pub fn summarize(xs: &[f64]) -> Option<Summary> {
    if xs.is_empty() || xs.iter().any(|x| !x.is_finite()) {
        return None;
    }
    let n = xs.len();
    // The ends and the middle are all a summary needs of the order: a
    // selection finds them without sorting (a condition of a large campaign
    // summarises hundreds of thousands of process values per metric).
    let min = xs
        .iter()
        .copied()
        .min_by(f64::total_cmp)
        .expect("not empty");
    let max = xs
        .iter()
        .copied()
        .max_by(f64::total_cmp)
        .expect("not empty");
    let median = median_of(&mut xs.to_vec());
    let nf = n as f64;
    let (mean, sd) = if min == max {
        (min, 0.0)
    } else {
        // Two-pass: mean first, then squared deviations from it. The mean is
        // clamped because rounding can push it just outside [min, max].
        let mean = (xs.iter().sum::<f64>() / nf).clamp(min, max);
        let ss: f64 = xs.iter().map(|x| (x - mean) * (x - mean)).sum();
        let sd = if n > 1 { (ss / (nf - 1.0)).sqrt() } else { 0.0 };
        (mean, sd)
    };
    let se = sd / nf.sqrt();
    let cv = if n < 2 || mean == 0.0 {
        None
    } else {
        Some(sd / mean)
    };
    let (ci95_lo, ci95_hi) = if n < 2 || se == 0.0 {
        (mean, mean)
    } else {
        let half = t_quantile(0.975, nf - 1.0) * se;
        (mean - half, mean + half)
    };
    Some(Summary {
        n,
        mean,
        median,
        sd,
        min,
        max,
        cv,
        ci95_lo,
        ci95_hi,
        se,
    })
}

/// The type-7 median of `xs`, which is reordered: the value
/// [`percentile`]`(sorted, 0.5)` gives, bit for bit ([`select_percentile`]).
fn median_of(xs: &mut [f64]) -> f64 {
    select_percentile(xs, 0.5)
}

/// The value [`percentile`]`(sorted, p)` gives, bit for bit, for `xs`
/// sorted in `f64::total_cmp` order, from a selection of the one or two
/// values at its ranks instead of a sort (`xs` is reordered; a bootstrap
/// interval's two ends were two sorts of thousands of resampled values).
pub fn select_percentile(xs: &mut [f64], p: f64) -> f64 {
    let n = xs.len();
    if n == 0 || p.is_nan() {
        return f64::NAN;
    }
    let h = (n - 1) as f64 * p.clamp(0.0, 1.0);
    let lo = h.floor() as usize;
    let frac = h - lo as f64;
    let (_, &mut a, upper) = xs.select_nth_unstable_by(lo, f64::total_cmp);
    if frac == 0.0 {
        return a;
    }
    // The next value in order is the least of those above rank `lo`.
    let Some(b) = upper.iter().copied().min_by(f64::total_cmp) else {
        return a;
    };
    if a == b { a } else { a + frac * (b - a) }
}

/// Percentile of an already sorted (ascending) slice by linear interpolation
/// between closest ranks: Hyndman & Fan type 7, numpy's default
/// (`np.percentile(xs, 100 * p)`). `p` is a fraction in [0, 1], not a
/// percentage.
///
/// Edge cases: NaN for an empty slice or NaN `p`; `p` outside [0, 1] is
/// clamped (p ≤ 0 gives the minimum, p ≥ 1 the maximum); a single value is
/// returned for every p. The slice is not checked for order.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() || p.is_nan() {
        return f64::NAN;
    }
    let p = p.clamp(0.0, 1.0);
    let h = (sorted.len() - 1) as f64 * p;
    let lo = h.floor() as usize;
    let frac = h - lo as f64;
    if lo + 1 >= sorted.len() || frac == 0.0 {
        return sorted[lo.min(sorted.len() - 1)];
    }
    let (a, b) = (sorted[lo], sorted[lo + 1]);
    if a == b { a } else { a + frac * (b - a) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` values of `distinct` possible ones (few in some rounds, to have
    /// ties), with signed zeros at every `zero_every`-th place where a zero
    /// is drawn (total_cmp orders them), spread around `centre` by `step`.
    fn tied(
        rng: &mut crate::rng::SplitMix64,
        n: usize,
        distinct: u64,
        zero_every: usize,
        centre: f64,
        step: f64,
    ) -> Vec<f64> {
        (0..n)
            .map(|i| match rng.below(distinct) {
                0 if i % zero_every == 0 => -0.0,
                0 => 0.0,
                v => (v as f64 - centre) * step,
            })
            .collect()
    }

    #[test]
    fn the_selected_median_is_the_sorted_median_bit_for_bit() {
        let mut rng = crate::rng::SplitMix64::new(42);
        for n in 1..=64usize {
            for round in 0..20 {
                // Few distinct values in some rounds, to have ties; signed
                // zeros in all, whose order total_cmp fixes.
                let distinct = if round % 2 == 0 { 3 } else { 1_000_000 };
                let xs = tied(&mut rng, n, distinct, 3, distinct as f64 / 2.0, 0.37);
                let mut sorted = xs.clone();
                sorted.sort_by(f64::total_cmp);
                let want = percentile(&sorted, 0.5);
                let got = median_of(&mut xs.clone());
                assert_eq!(got.to_bits(), want.to_bits(), "n {n}, {xs:?}");
                let s = summarize(&xs).unwrap();
                assert_eq!(s.min.to_bits(), sorted[0].to_bits());
                assert_eq!(s.max.to_bits(), sorted[n - 1].to_bits());
                assert_eq!(s.median.to_bits(), want.to_bits());
            }
        }
        assert!(median_of(&mut []).is_nan());
    }

    #[test]
    fn a_selected_percentile_is_the_sorted_one_bit_for_bit() {
        let mut rng = crate::rng::SplitMix64::new(7);
        let ps = [0.0, 0.025, 0.1, 0.333, 0.5, 0.9, 0.975, 1.0, -1.0, 2.0];
        for n in 1..=80usize {
            for round in 0..10 {
                let distinct = if round % 2 == 0 { 4 } else { 1_000_000 };
                let xs = tied(&mut rng, n, distinct, 2, distinct as f64 / 3.0, 1.37);
                let mut sorted = xs.clone();
                sorted.sort_by(f64::total_cmp);
                // Both ends from one slice, as a bootstrap interval takes them.
                let mut once = xs.clone();
                for p in ps {
                    let want = percentile(&sorted, p);
                    let got = select_percentile(&mut once, p);
                    assert_eq!(got.to_bits(), want.to_bits(), "n {n}, p {p}, {xs:?}");
                }
            }
        }
        assert!(select_percentile(&mut [], 0.5).is_nan());
        assert!(select_percentile(&mut [1.0], f64::NAN).is_nan());
    }

    fn close(a: f64, b: f64, rel: f64) -> bool {
        a == b || (a - b).abs() <= rel * b.abs().max(f64::MIN_POSITIVE)
    }

    macro_rules! assert_close {
        ($a:expr, $b:expr) => {
            assert_close!($a, $b, 1e-9)
        };
        ($a:expr, $b:expr, $rel:expr) => {{
            let (a, b): (f64, f64) = ($a, $b);
            assert!(
                close(a, b, $rel),
                "{} = {a:e}, expected {b:e}",
                stringify!($a)
            );
        }};
    }

    #[test]
    fn summary_matches_numpy_scipy() {
        // Eight run times (s) of one policy, with one slow run.
        let xs = [35.2, 34.9, 36.1, 35.5, 35.0, 34.7, 35.8, 41.3];
        let s = summarize(&xs).unwrap();
        // import numpy as np, scipy.stats as st
        // np.mean(xs) -> 36.0625; np.median(xs) -> 35.35
        // np.std(xs, ddof=1) -> 2.167907154047752
        // st.sem(xs) -> 0.7664709248049973
        // st.t.interval(0.95, 7, loc=np.mean(xs), scale=st.sem(xs))
        //   -> (34.250084263065354, 37.874915736934646)
        assert_eq!(s.n, 8);
        assert_close!(s.mean, 36.0625);
        assert_close!(s.median, 35.35);
        assert_close!(s.sd, 2.167907154047752);
        assert_close!(s.se, 0.7664709248049973);
        assert_close!(s.ci95_lo, 34.250084263065354);
        assert_close!(s.ci95_hi, 37.874915736934646);
        // np.std(xs, ddof=1) / np.mean(xs) -> 0.060115276368741824
        assert_close!(s.cv.unwrap(), 0.060115276368741824);
        assert_eq!((s.min, s.max), (34.7, 41.3));
    }

    #[test]
    fn summary_two_values() {
        // scipy.stats.t.interval(0.95, 1, loc=2.0, scale=st.sem([1.0, 3.0]))
        //   -> (-10.706204736174694, 14.706204736174694)
        let s = summarize(&[1.0, 3.0]).unwrap();
        assert_close!(s.sd, std::f64::consts::SQRT_2);
        assert_close!(s.ci95_lo, -10.706204736174694);
        assert_close!(s.ci95_hi, 14.706204736174694);
    }

    #[test]
    fn summary_single_value() {
        let s = summarize(&[42.5]).unwrap();
        assert_eq!(s.n, 1);
        assert_eq!((s.mean, s.median, s.min, s.max), (42.5, 42.5, 42.5, 42.5));
        assert_eq!((s.sd, s.se), (0.0, 0.0));
        assert_eq!(s.cv, None);
        assert_eq!((s.ci95_lo, s.ci95_hi), (42.5, 42.5));
    }

    #[test]
    fn summary_zero_variance_has_no_nan() {
        // 0.1 summed three times is not 0.3: the mean must still be 0.1.
        let s = summarize(&[0.1, 0.1, 0.1]).unwrap();
        assert_eq!(s.mean, 0.1);
        assert_eq!((s.sd, s.se), (0.0, 0.0));
        assert_eq!(s.cv, Some(0.0));
        assert_eq!((s.ci95_lo, s.ci95_hi), (0.1, 0.1));
        let z = summarize(&[0.0; 5]).unwrap();
        assert_eq!(z.cv, None);
        assert_eq!((z.mean, z.sd, z.ci95_lo, z.ci95_hi), (0.0, 0.0, 0.0, 0.0));
    }

    #[test]
    fn summary_rejects_empty_and_non_finite() {
        assert_eq!(summarize(&[]), None);
        assert_eq!(summarize(&[1.0, f64::NAN]), None);
        assert_eq!(summarize(&[1.0, f64::INFINITY]), None);
    }

    #[test]
    fn summary_mean_zero_has_no_cv() {
        let s = summarize(&[-1.0, 1.0]).unwrap();
        assert_eq!(s.mean, 0.0);
        assert_eq!(s.cv, None);
    }

    #[test]
    fn percentile_matches_numpy_type7() {
        let xs = [1.0, 2.0, 4.0, 7.0, 11.0, 16.0];
        // np.percentile([1,2,4,7,11,16], [0,10,25,50,75,90,100,33.3])
        //   -> [1., 1.5, 2.5, 5.5, 10., 13.5, 16., 3.33]
        let expected = [
            (0.0, 1.0),
            (0.10, 1.5),
            (0.25, 2.5),
            (0.50, 5.5),
            (0.75, 10.0),
            (0.90, 13.5),
            (1.0, 16.0),
            (0.333, 3.33),
        ];
        for (p, want) in expected {
            assert_close!(percentile(&xs, p), want, 1e-12);
        }
    }

    #[test]
    fn percentile_edge_cases() {
        assert!(percentile(&[], 0.5).is_nan());
        assert!(percentile(&[1.0, 2.0], f64::NAN).is_nan());
        assert_eq!(percentile(&[3.0], 0.0), 3.0);
        assert_eq!(percentile(&[3.0], 0.7), 3.0);
        assert_eq!(percentile(&[1.0, 2.0], -1.0), 1.0);
        assert_eq!(percentile(&[1.0, 2.0], 2.0), 2.0);
        assert_eq!(percentile(&[0.1, 0.1, 0.1], 0.37), 0.1);
    }
}
