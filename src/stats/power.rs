//! Power of the two-sample tests: the noncentral Student-t distribution,
//! the power of the two-sided two-sample t-test, the smallest effect it
//! detects with a given power, and the same for the Mann–Whitney U test
//! through its asymptotic relative efficiency.
//!
//! Used to say what a "not separated" means: the smallest change these runs
//! could have seen (80 % power), not that there is no change.

use super::dist::{ln_gamma, normal_sf, reg_inc_beta, t_quantile};

/// Power that "could have been seen" means throughout schedlab.
pub const POWER: f64 = 0.8;

/// Asymptotic relative efficiency of the Mann–Whitney U test against the
/// t-test when the data are normal: 3/π ≈ 0.955. n runs tested by
/// Mann–Whitney detect about what 3n/π runs tested by t do.
pub const MANN_WHITNEY_ARE: f64 = 3.0 / std::f64::consts::PI;

/// P(T ≤ t) for the noncentral t distribution with `df` degrees of freedom
/// and noncentrality `nc` (`scipy.stats.nct.cdf(t, df, nc)`).
///
/// Lenth's algorithm AS 243 (Applied Statistics 38, 1989): the series in
/// incomplete beta functions, summed until its error bound is below 1e-14.
/// Accurate while exp(−nc²/2) does not underflow (|nc| < ~37), which covers
/// every power computation here. NaN for df ≤ 0 or NaN input.
pub fn nct_cdf(t: f64, df: f64, nc: f64) -> f64 {
    if t.is_nan() || df.is_nan() || nc.is_nan() || df <= 0.0 {
        return f64::NAN;
    }
    if t == f64::INFINITY {
        return 1.0;
    }
    if t == f64::NEG_INFINITY {
        return 0.0;
    }
    // P(T ≤ t; nc) = 1 − P(T ≤ −t; −nc): the series is for t ≥ 0.
    let (tt, del, negate) = if t < 0.0 {
        (-t, -nc, true)
    } else {
        (t, nc, false)
    };
    let mut tnc = 0.0;
    let x = tt * tt / (tt * tt + df);
    if x > 0.0 {
        let lambda = del * del;
        let mut p = 0.5 * (-0.5 * lambda).exp();
        let mut q = (2.0 / std::f64::consts::PI).sqrt() * p * del;
        let mut s = 0.5 - p;
        let mut a = 0.5;
        let b = 0.5 * df;
        let rxb = (1.0 - x).powf(b);
        let albeta = ln_gamma(a) + ln_gamma(b) - ln_gamma(a + b);
        let mut xodd = reg_inc_beta(a, b, x);
        let mut godd = 2.0 * rxb * (a * x.ln() - albeta).exp();
        let mut xeven = 1.0 - rxb;
        let mut geven = b * x * rxb;
        tnc = p * xodd + q * xeven;
        let mut en = 1.0;
        loop {
            a += 1.0;
            xodd -= godd;
            xeven -= geven;
            godd *= x * (a + b - 1.0) / a;
            geven *= x * (a + b - 0.5) / (a + 0.5);
            p *= lambda / (2.0 * en);
            q *= lambda / (2.0 * en + 1.0);
            s -= p;
            en += 1.0;
            tnc += p * xodd + q * xeven;
            let bound = 2.0 * s * (xodd - godd);
            if bound <= 1e-14 || en > 2000.0 {
                break;
            }
        }
    }
    tnc += normal_sf(del);
    let tnc = tnc.clamp(0.0, 1.0);
    if negate { 1.0 - tnc } else { tnc }
}

/// Power of the two-sided two-sample t-test at level `alpha` for a
/// standardised effect `d` (difference of means / common sd) with `n1` and
/// `n2` values (which may be fractional, for effective sizes):
/// P(T' > t₁₋α/₂) + P(T' < −t₁₋α/₂), T' noncentral t with n1 + n2 − 2
/// degrees of freedom and noncentrality d·√(n1·n2/(n1 + n2))
/// (`statsmodels.stats.power.TTestIndPower().power(d, n1, alpha,
/// ratio=n2/n1)`). NaN when n1 + n2 ≤ 2 or alpha is not in (0, 1).
pub fn ttest_ind_power(d: f64, n1: f64, n2: f64, alpha: f64) -> f64 {
    let df = n1 + n2 - 2.0;
    if !(df > 0.0 && n1 > 0.0 && n2 > 0.0 && alpha > 0.0 && alpha < 1.0) {
        return f64::NAN;
    }
    let nc = d * (n1 * n2 / (n1 + n2)).sqrt();
    let crit = t_quantile(1.0 - alpha / 2.0, df);
    (1.0 - nct_cdf(crit, df, nc)) + nct_cdf(-crit, df, nc)
}

/// The smallest standardised effect (Cohen's d, > 0) the two-sided
/// two-sample t-test detects with probability `power` at level `alpha`
/// (`TTestIndPower().solve_power(effect_size=None, nobs1=n1, alpha=alpha,
/// power=power, ratio=n2/n1)`). Found by bisection on the power, which
/// rises with d. None when the sizes or levels make no test (n1 + n2 ≤ 2,
/// alpha or power outside (0, 1), power ≤ alpha).
pub fn ttest_ind_detectable_d(n1: f64, n2: f64, alpha: f64, power: f64) -> Option<f64> {
    if !(power > alpha && power < 1.0) || ttest_ind_power(0.0, n1, n2, alpha).is_nan() {
        return None;
    }
    let (mut lo, mut hi) = (0.0_f64, 1.0_f64);
    // Power → 1 as d grows; |nc| < 37 keeps the series accurate, and no
    // realistic power needs more.
    while ttest_ind_power(hi, n1, n2, alpha) < power {
        hi *= 2.0;
        if hi * (n1 * n2 / (n1 + n2)).sqrt() > 36.0 {
            return None;
        }
    }
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if ttest_ind_power(mid, n1, n2, alpha) < power {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi - lo <= 1e-13 * hi {
            break;
        }
    }
    Some(0.5 * (lo + hi))
}

/// The smallest standardised shift the two-sided Mann–Whitney U test
/// detects with `power` at level `alpha`, approximated as the t-test's with
/// each side's size scaled by the test's asymptotic relative efficiency
/// [`MANN_WHITNEY_ARE`] (3/π, for normal data). The approximation is an
/// asymptotic one: with few runs it is optimistic for the exact test, which
/// can only reach a few p-values (see the callers' check of the smallest
/// attainable p).
pub fn mann_whitney_detectable_d(n1: usize, n2: usize, alpha: f64, power: f64) -> Option<f64> {
    ttest_ind_detectable_d(
        n1 as f64 * MANN_WHITNEY_ARE,
        n2 as f64 * MANN_WHITNEY_ARE,
        alpha,
        power,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_rel(got: f64, want: f64, tol: f64, what: &str) {
        let err = ((got - want) / want).abs();
        assert!(
            err <= tol,
            "{what}: got {got:e}, want {want:e} (rel err {err:e})"
        );
    }

    #[test]
    fn noncentral_t_matches_scipy() {
        // scipy.stats.nct.cdf(1.5, 8, 2.0) -> 0.30373577781728106
        assert_rel(nct_cdf(1.5, 8.0, 2.0), 0.30373577781728106, 1e-10, "cdf");
        // scipy.stats.nct.cdf(-2.3, 17.5, 0.7) -> 0.002738412845721181
        assert_rel(
            nct_cdf(-2.3, 17.5, 0.7),
            0.002738412845721181,
            1e-8,
            "cdf<0",
        );
        // scipy.stats.nct.sf(2.1, 30, 3.2) -> 0.859648415107581
        assert_rel(
            1.0 - nct_cdf(2.1, 30.0, 3.2),
            0.859648415107581,
            1e-10,
            "sf",
        );
        // Noncentrality 0 is Student's t.
        assert_rel(
            nct_cdf(1.3, 7.0, 0.0),
            crate::stats::t_cdf(1.3, 7.0),
            1e-12,
            "central",
        );
        assert_eq!(nct_cdf(f64::INFINITY, 5.0, 1.0), 1.0);
        assert_eq!(nct_cdf(f64::NEG_INFINITY, 5.0, 1.0), 0.0);
        assert!(nct_cdf(1.0, 0.0, 1.0).is_nan());
        assert!(nct_cdf(f64::NAN, 3.0, 1.0).is_nan());
    }

    #[test]
    fn power_matches_statsmodels() {
        // from statsmodels.stats.power import TTestIndPower
        // TTestIndPower().power(effect_size=1.0, nobs1=10, alpha=0.05,
        //   ratio=1.0) -> 0.5620066465861491
        assert_rel(
            ttest_ind_power(1.0, 10.0, 10.0, 0.05),
            0.5620066465861491,
            1e-9,
            "power",
        );
        // TTestIndPower().power(effect_size=0.5, nobs1=7, alpha=0.01,
        //   ratio=12/7) -> 0.05253681679877075
        assert_rel(
            ttest_ind_power(0.5, 7.0, 12.0, 0.01),
            0.05253681679877075,
            1e-8,
            "power",
        );
        // No effect: the power is the level.
        assert_rel(ttest_ind_power(0.0, 10.0, 10.0, 0.05), 0.05, 1e-9, "d=0");
        assert!(ttest_ind_power(1.0, 1.0, 1.0, 0.05).is_nan());
        assert!(ttest_ind_power(1.0, 5.0, 5.0, 0.0).is_nan());
    }

    #[test]
    fn detectable_effect_matches_statsmodels_solve_power() {
        // TTestIndPower().solve_power(effect_size=None, nobs1=n1, alpha=a,
        //   power=0.8, ratio=n2/n1, alternative='two-sided'):
        //   (10, 10, 0.05)     -> 1.324947368330822
        //   (5, 8, 0.05)       -> 1.75495255474794
        //   (10, 10, 0.05/16)  -> 1.9354156421598645
        //   (20, 20, 0.01)     -> 1.1304385800662409
        // solve_power's root finder stops early (its own power at its
        // answer for (5, 8) is 0.80000044): hence the tolerance of 1e-6.
        // Its power function at this d is 0.8 to 1e-14 (e.g.
        // TTestIndPower().power(1.7549515584695996, 5, 0.05, ratio=1.6)
        //   -> 0.8000000000000101).
        for (n1, n2, a, want) in [
            (10.0, 10.0, 0.05, 1.324947368330822),
            (5.0, 8.0, 0.05, 1.75495255474794),
            (10.0, 10.0, 0.05 / 16.0, 1.9354156421598645),
            (20.0, 20.0, 0.01, 1.1304385800662409),
        ] {
            let d = ttest_ind_detectable_d(n1, n2, a, POWER).unwrap();
            assert_rel(d, want, 1e-6, &format!("d({n1}, {n2}, {a})"));
            assert_rel(ttest_ind_power(d, n1, n2, a), POWER, 1e-9, "power at d");
        }
        assert!(ttest_ind_detectable_d(1.0, 1.0, 0.05, POWER).is_none());
        assert!(ttest_ind_detectable_d(10.0, 10.0, 0.05, 0.01).is_none());
    }

    #[test]
    fn mann_whitney_detectable_effect_uses_the_are() {
        // k = 3/np.pi; TTestIndPower().solve_power(effect_size=None,
        //   nobs1=n1*k, alpha=a, power=0.8, ratio=n2/n1):
        //   (10, 10, 0.05)    -> 1.3600521901770015
        //   (10, 10, 0.05/16) -> 1.9953582279367252
        //   (6, 9, 0.05)      -> 1.6424614656310546
        for (n1, n2, a, want) in [
            (10, 10, 0.05, 1.3600521901770015),
            (10, 10, 0.05 / 16.0, 1.9953582279367252),
            (6, 9, 0.05, 1.6424614656310546),
        ] {
            let d = mann_whitney_detectable_d(n1, n2, a, POWER).unwrap();
            assert_rel(d, want, 1e-6, &format!("mw d({n1}, {n2}, {a})"));
        }
        // Mann–Whitney needs a slightly larger effect than t; more runs, a
        // smaller one.
        let t = ttest_ind_detectable_d(10.0, 10.0, 0.05, POWER).unwrap();
        let mw = mann_whitney_detectable_d(10, 10, 0.05, POWER).unwrap();
        assert!(mw > t);
        assert!(mann_whitney_detectable_d(40, 40, 0.05, POWER).unwrap() < mw);
    }
}
