//! Outlier flagging for runs: the Iglewicz–Hoaglin modified z-score (robust,
//! median/MAD based) and Tukey's IQR fences.
//!
//! These functions only *flag*: they return the indices of suspicious values
//! and never remove anything. Whether a 618 s run among 35 s runs is a
//! measurement accident or a real pathology of the policy is for the report
//! reader to decide, so the report must show it rather than silently drop it.
//!
//! NaN values are ignored when computing the median, MAD and quartiles, and
//! are never flagged.

use super::summary::percentile;

/// |modified z| above which a value is flagged (Iglewicz & Hoaglin 1993).
pub const MODIFIED_Z_THRESHOLD: f64 = 3.5;
/// 0.6745 ≈ Φ⁻¹(0.75): makes MAD a consistent estimator of σ for normal data.
pub const MAD_CONSISTENCY: f64 = 0.6745;
/// √(π/2) ≈ 1.253314: makes the mean absolute deviation a consistent
/// estimator of σ for normal data (used when MAD is 0).
pub const MEAN_AD_CONSISTENCY: f64 = 1.253314;
/// Tukey's fence multiplier: values beyond Q1 − 1.5·IQR or Q3 + 1.5·IQR.
pub const TUKEY_K: f64 = 1.5;

/// Non-NaN values, sorted ascending.
fn sorted_finite(xs: &[f64]) -> Vec<f64> {
    let mut v: Vec<f64> = xs.iter().copied().filter(|x| !x.is_nan()).collect();
    v.sort_by(f64::total_cmp);
    v
}

/// Modified z-score of every value: `0.6745·(x − median)/MAD`, where MAD is
/// the median absolute deviation from the median.
///
/// Edge cases:
/// - MAD == 0 (more than half the values identical): falls back to
///   `(x − median)/(1.253314·MeanAD)`, MeanAD being the mean absolute
///   deviation from the median (the IBM SPSS convention).
/// - MeanAD == 0 too (all values equal): every score is 0, nothing is an
///   outlier.
/// - Empty input gives an empty vector; a NaN value gets a NaN score and
///   does not influence the others.
pub fn modified_z_scores(xs: &[f64]) -> Vec<f64> {
    let sorted = sorted_finite(xs);
    if sorted.is_empty() {
        return vec![f64::NAN; xs.len()];
    }
    let median = percentile(&sorted, 0.5);
    let mut dev: Vec<f64> = sorted.iter().map(|x| (x - median).abs()).collect();
    dev.sort_by(f64::total_cmp);
    let mad = percentile(&dev, 0.5);
    let scale = if mad > 0.0 {
        // z = 0.6745·(x − med)/MAD  ⇔  (x − med)/(MAD/0.6745)
        mad / MAD_CONSISTENCY
    } else {
        let mean_ad = dev.iter().sum::<f64>() / dev.len() as f64;
        MEAN_AD_CONSISTENCY * mean_ad
    };
    xs.iter()
        .map(|&x| {
            if x.is_nan() {
                f64::NAN
            } else if scale > 0.0 {
                (x - median) / scale
            } else {
                0.0
            }
        })
        .collect()
}

/// Indices of values whose modified z-score exceeds 3.5 in absolute value
/// (see [`modified_z_scores`] for the MAD == 0 fallback), in increasing
/// order.
///
/// Edge cases: empty for empty input and for all-equal values; never
/// anything for n ≤ 2 (two distinct values always score ±0.6745).
pub fn modified_z_outliers(xs: &[f64]) -> Vec<usize> {
    modified_z_scores(xs)
        .iter()
        .enumerate()
        .filter(|(_, z)| z.abs() > MODIFIED_Z_THRESHOLD)
        .map(|(i, _)| i)
        .collect()
}

/// Tukey fences `(Q1 − k·IQR, Q3 + k·IQR)` with type-7 quartiles (numpy's
/// default `np.percentile(xs, [25, 75])`).
///
/// Edge cases: `None` when there is no non-NaN value or `k` is negative or
/// NaN; with all values equal both fences equal the value.
pub fn iqr_fences(xs: &[f64], k: f64) -> Option<(f64, f64)> {
    let sorted = sorted_finite(xs);
    if sorted.is_empty() || k.is_nan() || k < 0.0 {
        return None;
    }
    let q1 = percentile(&sorted, 0.25);
    let q3 = percentile(&sorted, 0.75);
    let iqr = q3 - q1;
    Some((q1 - k * iqr, q3 + k * iqr))
}

/// Indices of values strictly outside the Tukey fences with multiplier `k`
/// (3.0 gives Tukey's "far out" values), in increasing order.
///
/// Edge cases: empty when [`iqr_fences`] is `None`. With all values equal
/// nothing is flagged; when more than 3/4 of the values are equal the IQR is
/// 0 and *every* different value is flagged — check the count before
/// treating flags as accidents.
pub fn iqr_outliers_k(xs: &[f64], k: f64) -> Vec<usize> {
    let Some((lo, hi)) = iqr_fences(xs, k) else {
        return Vec::new();
    };
    xs.iter()
        .enumerate()
        .filter(|(_, x)| **x < lo || **x > hi)
        .map(|(i, _)| i)
        .collect()
}

/// Indices of values outside Tukey's fences Q1 − 1.5·IQR, Q3 + 1.5·IQR.
/// See [`iqr_outliers_k`] for edge cases.
pub fn iqr_outliers(xs: &[f64]) -> Vec<usize> {
    iqr_outliers_k(xs, TUKEY_K)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The case that motivated this module: one 618 s run among ~35 s runs.
    const RUNS: [f64; 10] = [35.1, 34.8, 35.6, 618.0, 35.3, 34.9, 36.0, 35.2, 35.4, 34.7];

    #[test]
    fn modified_z_matches_numpy() {
        // med = np.median(RUNS) -> 35.25
        // mad = scipy.stats.median_abs_deviation(RUNS) -> 0.35
        // 0.6745 * (np.array(RUNS) - med) / mad ->
        let want = [
            -0.28907142857142465,
            -0.8672142857142877,
            0.6745,
            1123.0424999999955,
            0.096357142857137,
            -0.6745,
            1.4453571428571368,
            -0.096357142857137,
            0.28907142857142465,
            -1.0599285714285616,
        ];
        let got = modified_z_scores(&RUNS);
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() <= 1e-9 * w.abs().max(1.0), "{g} vs {w}");
        }
        assert_eq!(modified_z_outliers(&RUNS), vec![3]);
    }

    #[test]
    fn mad_zero_falls_back_to_mean_absolute_deviation() {
        // scipy.stats.median_abs_deviation(xs) -> 0.0 (6 of 8 values are 10);
        // mean_ad = np.mean(np.abs(xs - np.median(xs))) -> 1.75
        // (np.array(xs) - 10) / (1.253314 * mean_ad) ->
        //   [0, 0, 0, 0, 0, 0, 0.45593408469750707, 5.927143101067592]
        let xs = [10.0, 10.0, 10.0, 10.0, 10.0, 10.0, 11.0, 23.0];
        let z = modified_z_scores(&xs);
        assert!((z[6] - 0.45593408469750707).abs() < 1e-12, "{}", z[6]);
        assert!((z[7] - 5.927143101067592).abs() < 1e-12, "{}", z[7]);
        assert_eq!(modified_z_outliers(&xs), vec![7]);
    }

    #[test]
    fn all_equal_values_are_never_outliers() {
        let xs = [7.0; 6];
        assert_eq!(modified_z_scores(&xs), vec![0.0; 6]);
        assert!(modified_z_outliers(&xs).is_empty());
        assert!(iqr_outliers(&xs).is_empty());
        assert_eq!(iqr_fences(&xs, 1.5), Some((7.0, 7.0)));
    }

    #[test]
    fn empty_single_and_nan_inputs() {
        assert!(modified_z_scores(&[]).is_empty());
        assert!(modified_z_outliers(&[]).is_empty());
        assert!(iqr_outliers(&[]).is_empty());
        assert_eq!(iqr_fences(&[], 1.5), None);
        assert_eq!(modified_z_scores(&[3.0]), vec![0.0]);
        assert!(iqr_outliers(&[3.0]).is_empty());
        let with_nan = [
            35.1,
            f64::NAN,
            34.8,
            35.6,
            618.0,
            35.3,
            34.9,
            36.0,
            35.2,
            35.4,
            34.7,
        ];
        assert!(modified_z_scores(&with_nan)[1].is_nan());
        assert_eq!(modified_z_outliers(&with_nan), vec![4]);
        assert_eq!(iqr_outliers(&with_nan), vec![4]);
        assert!(modified_z_scores(&[f64::NAN]).iter().all(|z| z.is_nan()));
    }

    #[test]
    fn tukey_fences_match_numpy() {
        // q1, q3 = np.percentile(RUNS, [25, 75]) -> 34.95, 35.55;
        // (q1 - 1.5*(q3-q1), q3 + 1.5*(q3-q1)) -> (34.05000000000001, 36.44999999999999)
        let (lo, hi) = iqr_fences(&RUNS, 1.5).unwrap();
        assert!((lo - 34.05000000000001).abs() < 1e-12, "{lo}");
        assert!((hi - 36.44999999999999).abs() < 1e-12, "{hi}");
        assert_eq!(iqr_outliers(&RUNS), vec![3]);
        // Values below the lower fence are flagged too, and order is kept.
        // np.percentile(xs, [25, 75]) -> 50.5, 53.5: fences (46.0, 58.0)
        let xs = [1.0, 50.0, 51.0, 52.0, 53.0, 54.0, 200.0];
        assert_eq!(iqr_outliers(&xs), vec![0, 6]);
        assert_eq!(iqr_fences(&xs, -1.0), None);
    }

    /// Flags are indices into the input as given, every value (NaN too)
    /// keeping its place: nothing is dropped or reordered before flagging.
    #[test]
    fn flagging_never_removes_values() {
        // Median 35.0, MAD 0.1: 618 scores 0.6745·583/0.1; quartiles 34.95
        // and 35.15 put the fences at 34.65 and 35.45.
        let xs = [35.0, f64::NAN, 618.0, 34.9, 35.2, 35.1, 34.8, 35.0];
        assert_eq!(modified_z_outliers(&xs), vec![2]);
        assert_eq!(iqr_outliers(&xs), vec![2]);
        let z = modified_z_scores(&xs);
        assert_eq!(z.len(), xs.len());
        assert!(z[1].is_nan(), "{z:?}");
        assert!((z[2] - 0.6745 * 583.0 / 0.1).abs() < 1e-6, "{z:?}");
        assert!((z[6] + 0.6745 * 2.0).abs() < 1e-9, "{z:?}");
    }
}
