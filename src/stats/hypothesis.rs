//! Two-sample hypothesis tests and multiple-comparison correction: Welch's
//! unequal-variance t-test (with a confidence interval of the difference),
//! the Mann–Whitney U rank test (exact or normal approximation), and the
//! Holm–Bonferroni step-down adjustment of a family of p-values.
//!
//! Use Welch for "is the mean run time different, and by how much"; use
//! Mann–Whitney when runs are skewed or contain outliers; when a report
//! compares several policy pairs, pass all their p-values through [`holm`]
//! before calling any difference real.

use serde::Serialize;

use super::dist::{normal_sf, t_quantile, t_two_sided_p};
use super::summary::summarize;

/// Result of [`welch_t_test`]; the difference is always `mean(a) − mean(b)`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WelchTest {
    /// t statistic (±inf when both variances are 0 and the means differ).
    pub t: f64,
    /// Welch–Satterthwaite degrees of freedom (fractional).
    pub df: f64,
    /// Two-sided p-value.
    pub p: f64,
    /// mean(a) − mean(b).
    pub mean_diff: f64,
    /// Lower end of the 95 % Welch interval of mean(a) − mean(b).
    pub ci95_lo: f64,
    /// Upper end of the 95 % Welch interval of mean(a) − mean(b).
    pub ci95_hi: f64,
}

/// Welch's two-sample t-test of equal means, not assuming equal variances
/// (`scipy.stats.ttest_ind(a, b, equal_var=False)`).
///
/// Edge cases:
/// - `None` when either sample has fewer than 2 values or any value is NaN
///   or infinite (a variance is needed from each).
/// - Both variances 0: `p = 1` if the means are equal (t = 0) else `p = 0`
///   (t = ±inf); df is reported as n_a + n_b − 2 and the interval collapses
///   to the observed difference.
/// - One variance 0: the test proceeds; df becomes n − 1 of the other group.
pub fn welch_t_test(a: &[f64], b: &[f64]) -> Option<WelchTest> {
    if a.len() < 2 || b.len() < 2 {
        return None;
    }
    let sa = summarize(a)?;
    let sb = summarize(b)?;
    let (na, nb) = (a.len() as f64, b.len() as f64);
    let diff = sa.mean - sb.mean;
    let va = sa.sd * sa.sd / na;
    let vb = sb.sd * sb.sd / nb;
    let se2 = va + vb;
    if se2 == 0.0 {
        let (t, p) = if diff == 0.0 {
            (0.0, 1.0)
        } else {
            (diff.signum() * f64::INFINITY, 0.0)
        };
        return Some(WelchTest {
            t,
            df: na + nb - 2.0,
            p,
            mean_diff: diff,
            ci95_lo: diff,
            ci95_hi: diff,
        });
    }
    let se = se2.sqrt();
    let t = diff / se;
    let df = se2 * se2 / (va * va / (na - 1.0) + vb * vb / (nb - 1.0));
    let p = t_two_sided_p(t, df);
    let half = t_quantile(0.975, df) * se;
    Some(WelchTest {
        t,
        df,
        p,
        mean_diff: diff,
        ci95_lo: diff - half,
        ci95_hi: diff + half,
    })
}

/// How a Mann–Whitney p-value was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum MannWhitneyMethod {
    /// Exact null distribution of U (both n ≤ 10, no ties).
    Exact,
    /// Normal approximation with tie and continuity corrections.
    Normal,
}

/// Result of [`mann_whitney_u`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MannWhitney {
    /// U statistic of the first sample: the number of pairs (x from a,
    /// y from b) with x > y, ties counting ½ (scipy's `statistic`).
    pub u: f64,
    /// Two-sided p-value.
    pub p: f64,
    pub method: MannWhitneyMethod,
}

/// Largest group size for which the exact distribution is used.
pub const MANN_WHITNEY_EXACT_MAX_N: usize = 10;

/// Number of arrangements giving each value of U for group sizes (m, n):
/// `counts[u]` for u in 0..=m·n. Built from the recurrence
/// c(u; m, n) = c(u − n; m − 1, n) + c(u; m, n − 1) (the largest of the m+n
/// values belongs to the first group and beats all n, or to the second).
fn u_null_counts(m: usize, n: usize) -> Vec<f64> {
    // prev[j] holds the distribution for (i − 1, j); cur[j] for (i, j).
    let mut prev: Vec<Vec<f64>> = (0..=n).map(|_| vec![1.0]).collect();
    for i in 1..=m {
        let mut cur: Vec<Vec<f64>> = Vec::with_capacity(n + 1);
        cur.push(vec![1.0]);
        for j in 1..=n {
            let mut c = vec![0.0; i * j + 1];
            for (u, slot) in c.iter_mut().enumerate() {
                let from_first = if u >= j {
                    prev[j].get(u - j).copied().unwrap_or(0.0)
                } else {
                    0.0
                };
                let from_second = cur[j - 1].get(u).copied().unwrap_or(0.0);
                *slot = from_first + from_second;
            }
            cur.push(c);
        }
        prev = cur;
    }
    prev.swap_remove(n)
}

/// Average ranks (1-based) of `values`, and Σ(t³ − t) over tie groups.
fn average_ranks(values: &[f64]) -> (Vec<f64>, f64) {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&i, &j| values[i].total_cmp(&values[j]));
    let mut ranks = vec![0.0; values.len()];
    let mut tie_term = 0.0;
    let mut start = 0;
    while start < order.len() {
        let mut end = start + 1;
        while end < order.len() && values[order[end]] == values[order[start]] {
            end += 1;
        }
        // Positions start..end (0-based) share ranks start+1..=end.
        let avg = (start + 1 + end) as f64 / 2.0;
        for &k in &order[start..end] {
            ranks[k] = avg;
        }
        let t = (end - start) as f64;
        tie_term += t * t * t - t;
        start = end;
    }
    (ranks, tie_term)
}

/// Two-sided Mann–Whitney U test (Wilcoxon rank-sum) that the two samples
/// come from the same distribution.
///
/// Method: the exact null distribution of U when both samples have at most
/// 10 values and there are no ties (`scipy.stats.mannwhitneyu(a, b,
/// alternative='two-sided', method='exact')`); otherwise the normal
/// approximation with tie-corrected variance and continuity correction
/// (`method='asymptotic', use_continuity=True`). Either way
/// p = 2·P(U ≥ max(U₁, U₂)), capped at 1.
///
/// Edge cases:
/// - `None` when either sample is empty or contains a NaN.
/// - All values tied (zero rank variance): U = n_a·n_b/2 and p = 1.
pub fn mann_whitney_u(a: &[f64], b: &[f64]) -> Option<MannWhitney> {
    if a.is_empty() || b.is_empty() || a.iter().chain(b).any(|x| x.is_nan()) {
        return None;
    }
    let (n1, n2) = (a.len(), b.len());
    let pooled: Vec<f64> = a.iter().chain(b).copied().collect();
    let (ranks, tie_term) = average_ranks(&pooled);
    let r1: f64 = ranks[..n1].iter().sum();
    let (n1f, n2f) = (n1 as f64, n2 as f64);
    let u1 = r1 - n1f * (n1f + 1.0) / 2.0;
    let u2 = n1f * n2f - u1;
    let u_big = u1.max(u2);

    if n1 <= MANN_WHITNEY_EXACT_MAX_N && n2 <= MANN_WHITNEY_EXACT_MAX_N && tie_term == 0.0 {
        let counts = u_null_counts(n1, n2);
        let total: f64 = counts.iter().sum();
        // Without ties U is an integer.
        let k = u_big.round() as usize;
        let upper: f64 = counts[k..].iter().sum();
        let p = (2.0 * upper / total).min(1.0);
        return Some(MannWhitney {
            u: u1,
            p,
            method: MannWhitneyMethod::Exact,
        });
    }

    let n = n1f + n2f;
    let mu = n1f * n2f / 2.0;
    let var = n1f * n2f / 12.0 * ((n + 1.0) - tie_term / (n * (n - 1.0)));
    let p = if var <= 0.0 {
        1.0
    } else {
        let z = (u_big - mu - 0.5) / var.sqrt();
        (2.0 * normal_sf(z)).min(1.0)
    };
    Some(MannWhitney {
        u: u1,
        p,
        method: MannWhitneyMethod::Normal,
    })
}

/// Holm–Bonferroni step-down adjustment: returns adjusted p-values in the
/// original order. A difference is significant at family-wise level α when
/// its adjusted p-value is ≤ α.
///
/// With the m p-values sorted ascending, p₍ᵢ₎ becomes
/// max_{j ≤ i} min(1, (m − j + 1)·p₍ⱼ₎) (1-based), so adjusted values are
/// monotone in the raw ones and never exceed 1
/// (`statsmodels.stats.multitest.multipletests(p, method='holm')[1]`).
///
/// Edge cases: empty input gives an empty vector; a NaN p-value stays NaN in
/// the output and still counts towards m (conservative: a comparison that
/// could not be computed is part of the family), sorting after all others.
pub fn holm(pvalues: &[f64]) -> Vec<f64> {
    let m = pvalues.len();
    let mut order: Vec<usize> = (0..m).collect();
    // NaN sorts last with total_cmp (for positive-signed NaN).
    order.sort_by(|&i, &j| {
        let (a, b) = (pvalues[i], pvalues[j]);
        match (a.is_nan(), b.is_nan()) {
            (false, false) => a.total_cmp(&b),
            (true, true) => std::cmp::Ordering::Equal,
            (true, false) => std::cmp::Ordering::Greater,
            (false, true) => std::cmp::Ordering::Less,
        }
    });
    let mut adjusted = vec![f64::NAN; m];
    let mut running_max = 0.0_f64;
    for (rank, &i) in order.iter().enumerate() {
        let p = pvalues[i];
        if p.is_nan() {
            continue;
        }
        let candidate = ((m - rank) as f64 * p).min(1.0);
        running_max = running_max.max(candidate);
        adjusted[i] = running_max;
    }
    adjusted
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_rel(got: f64, want: f64, tol: f64, what: &str) {
        let err = if want == 0.0 {
            got.abs()
        } else {
            ((got - want) / want).abs()
        };
        assert!(err <= tol, "{what}: got {got:e}, want {want:e}");
    }

    const A: [f64; 8] = [35.2, 34.9, 36.1, 35.5, 35.0, 34.7, 35.8, 41.3];
    const B: [f64; 6] = [33.1, 33.9, 32.8, 34.0, 33.5, 33.3];

    #[test]
    fn welch_matches_scipy() {
        // r = scipy.stats.ttest_ind(A, B, equal_var=False)
        // r.statistic, r.pvalue, r.df -> 3.3303131552009932,
        //   0.01068752028316341, 7.837873719014604
        // r.confidence_interval(0.95) -> (0.802080803374847, 4.456252529958479)
        // np.mean(A) - np.mean(B) -> 2.629166666666663
        let w = welch_t_test(&A, &B).unwrap();
        assert_rel(w.t, 3.3303131552009932, 1e-9, "t");
        assert_rel(w.df, 7.837873719014604, 1e-9, "df");
        assert_rel(w.p, 0.01068752028316341, 1e-9, "p");
        assert_rel(w.mean_diff, 2.629166666666663, 1e-9, "diff");
        assert_rel(w.ci95_lo, 0.802080803374847, 1e-9, "lo");
        assert_rel(w.ci95_hi, 4.456252529958479, 1e-9, "hi");
        // Swapping the samples flips the sign, keeps p.
        let s = welch_t_test(&B, &A).unwrap();
        assert_rel(s.t, -w.t, 1e-12, "swapped t");
        assert_rel(s.p, w.p, 1e-12, "swapped p");
    }

    #[test]
    fn welch_small_difference_is_not_significant() {
        // scipy.stats.ttest_ind([10.0, 10.4, 9.8, 10.1], [10.2, 10.5, 9.9, 10.3],
        //   equal_var=False) -> statistic -0.8485281374238695,
        //   pvalue 0.42869150723530747, df 6.000000000000001
        let w = welch_t_test(&[10.0, 10.4, 9.8, 10.1], &[10.2, 10.5, 9.9, 10.3]).unwrap();
        assert_rel(w.t, -0.8485281374238695, 1e-9, "t");
        assert_rel(w.df, 6.000000000000001, 1e-9, "df");
        assert_rel(w.p, 0.42869150723530747, 1e-9, "p");
        assert!(w.ci95_lo < 0.0 && w.ci95_hi > 0.0);
    }

    #[test]
    fn welch_zero_variance_edge_cases() {
        let same = welch_t_test(&[5.0, 5.0, 5.0], &[5.0, 5.0]).unwrap();
        assert_eq!((same.t, same.p, same.df), (0.0, 1.0, 3.0));
        assert_eq!((same.ci95_lo, same.ci95_hi), (0.0, 0.0));
        let diff = welch_t_test(&[5.0, 5.0, 5.0], &[4.0, 4.0]).unwrap();
        assert_eq!((diff.t, diff.p), (f64::INFINITY, 0.0));
        assert_eq!((diff.ci95_lo, diff.ci95_hi), (1.0, 1.0));
        // One variance zero: df = n − 1 of the other group.
        // scipy.stats.ttest_ind([5,5,5], [4,5,6], equal_var=False)
        //   -> statistic 0.0, pvalue 1.0, df 2.0
        let one = welch_t_test(&[5.0, 5.0, 5.0], &[4.0, 5.0, 6.0]).unwrap();
        assert_rel(one.df, 2.0, 1e-12, "df");
        assert_eq!(one.p, 1.0);
        assert!(welch_t_test(&[1.0], &[1.0, 2.0]).is_none());
        assert!(welch_t_test(&[], &[1.0, 2.0]).is_none());
        assert!(welch_t_test(&[1.0, f64::NAN], &[1.0, 2.0]).is_none());
    }

    #[test]
    fn mann_whitney_exact_matches_scipy() {
        // scipy.stats.mannwhitneyu([1.1,2.2,3.3,4.4], [5.5,6.6,7.7,8.8],
        //   alternative='two-sided', method='exact') -> U 0.0, p 0.02857142857142857
        let r = mann_whitney_u(&[1.1, 2.2, 3.3, 4.4], &[5.5, 6.6, 7.7, 8.8]).unwrap();
        assert_eq!(r.method, MannWhitneyMethod::Exact);
        assert_eq!(r.u, 0.0);
        assert_rel(r.p, 0.02857142857142857, 1e-12, "p");
        // scipy.stats.mannwhitneyu(A, B, alternative='two-sided',
        //   method='exact') -> U 48.0, p 0.000666000666000666
        let r = mann_whitney_u(&A, &B).unwrap();
        assert_eq!(r.u, 48.0);
        assert_rel(r.p, 0.000666000666000666, 1e-12, "p");
        // Interleaved: scipy.stats.mannwhitneyu([1,3,5,8], [2,4,6,7],
        //   alternative='two-sided', method='exact') -> U 7.0, p 0.8857142857142857
        let r = mann_whitney_u(&[1.0, 3.0, 5.0, 8.0], &[2.0, 4.0, 6.0, 7.0]).unwrap();
        assert_eq!(r.u, 7.0);
        assert_rel(r.p, 0.8857142857142857, 1e-12, "p");
        // Unequal sizes at the exact limit: a = [i*1.5 for i in range(10)],
        // b = [i*2.0+0.25 for i in range(7)]; scipy.stats.mannwhitneyu(a, b,
        //   alternative='two-sided', method='exact') -> U 37.0, p 0.8867749897161661
        let a: Vec<f64> = (0..10).map(|i| f64::from(i) * 1.5).collect();
        let b: Vec<f64> = (0..7).map(|i| f64::from(i) * 2.0 + 0.25).collect();
        let r = mann_whitney_u(&a, &b).unwrap();
        assert_eq!(r.u, 37.0);
        assert_rel(r.p, 0.8867749897161661, 1e-12, "p");
    }

    #[test]
    fn mann_whitney_ties_use_normal_approximation() {
        // scipy.stats.mannwhitneyu([1,2,2,3,4], [2,3,3,5,6,6],
        //   alternative='two-sided', method='asymptotic', use_continuity=True)
        //   -> U 6.0, p 0.1130499788563229
        let r =
            mann_whitney_u(&[1.0, 2.0, 2.0, 3.0, 4.0], &[2.0, 3.0, 3.0, 5.0, 6.0, 6.0]).unwrap();
        assert_eq!(r.method, MannWhitneyMethod::Normal);
        assert_eq!(r.u, 6.0);
        assert_rel(r.p, 0.1130499788563229, 1e-10, "p");
    }

    #[test]
    fn mann_whitney_large_samples_use_normal_approximation() {
        // a = [i*0.7 for i in range(15)]; b = [i*0.9+2.05 for i in range(12)]
        // scipy.stats.mannwhitneyu(a, b, alternative='two-sided',
        //   method='asymptotic') -> U 58.0, p 0.12428287406255234
        let a: Vec<f64> = (0..15).map(|i| f64::from(i) * 0.7).collect();
        let b: Vec<f64> = (0..12).map(|i| f64::from(i) * 0.9 + 2.05).collect();
        let r = mann_whitney_u(&a, &b).unwrap();
        assert_eq!(r.method, MannWhitneyMethod::Normal);
        assert_eq!(r.u, 58.0);
        assert_rel(r.p, 0.12428287406255234, 1e-10, "p");
    }

    #[test]
    fn mann_whitney_edge_cases() {
        assert!(mann_whitney_u(&[], &[1.0]).is_none());
        assert!(mann_whitney_u(&[1.0], &[f64::NAN]).is_none());
        // All values tied: no evidence of a difference (scipy
        //   mannwhitneyu([3,3,3], [3,3], method='asymptotic') -> U 3.0, p 1.0)
        let r = mann_whitney_u(&[3.0, 3.0, 3.0], &[3.0, 3.0]).unwrap();
        assert_eq!((r.u, r.p), (3.0, 1.0));
        // n = 1 each, exact: scipy ... method='exact' -> U 0.0, p 1.0
        let r = mann_whitney_u(&[1.0], &[2.0]).unwrap();
        assert_eq!((r.u, r.p), (0.0, 1.0));
    }

    #[test]
    fn exact_null_counts_sum_to_binomial() {
        // Sum over U of the counts is C(m + n, m); the distribution is
        // symmetric around m·n/2.
        let c = u_null_counts(4, 6);
        assert_eq!(c.iter().sum::<f64>(), 210.0);
        assert_eq!(c.len(), 25);
        for u in 0..c.len() {
            assert_eq!(c[u], c[c.len() - 1 - u]);
        }
        assert_eq!(u_null_counts(10, 10).iter().sum::<f64>(), 184_756.0);
    }

    #[test]
    fn holm_matches_statsmodels_and_keeps_order() {
        // statsmodels.stats.multitest.multipletests(
        //   [0.01, 0.04, 0.03, 0.005, 0.20], method='holm')[1]
        //   -> [0.04, 0.09, 0.09, 0.025, 0.2]
        let adj = holm(&[0.01, 0.04, 0.03, 0.005, 0.20]);
        let want = [0.04, 0.09, 0.09, 0.025, 0.2];
        for (g, w) in adj.iter().zip(want) {
            assert_rel(*g, w, 1e-12, "holm");
        }
    }

    #[test]
    fn holm_caps_at_one_and_is_monotone() {
        // multipletests([0.5, 0.3, 0.02, 0.9], method='holm')[1]
        //   -> [1.0, 0.9, 0.08, 1.0]
        let adj = holm(&[0.5, 0.3, 0.02, 0.9]);
        let want = [1.0, 0.9, 0.08, 1.0];
        for (g, w) in adj.iter().zip(want) {
            assert_rel(*g, w, 1e-12, "holm");
        }
        assert!(holm(&[]).is_empty());
        assert_eq!(holm(&[0.03]), vec![0.03]);
        // Ties get the same adjusted value.
        assert_eq!(holm(&[0.01, 0.01]), vec![0.02, 0.02]);
    }

    #[test]
    fn holm_nan_counts_in_family() {
        // The NaN is treated as the largest of m = 3 p-values, so the others
        // match multipletests([0.01, 0.02, 0.03], method='holm')[1][:2]
        //   -> [0.03, 0.04]
        let adj = holm(&[0.01, f64::NAN, 0.02]);
        assert!(adj[1].is_nan());
        assert_rel(adj[0], 0.03, 1e-12, "first");
        assert_rel(adj[2], 0.04, 1e-12, "third");
    }
}
