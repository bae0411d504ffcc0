//! Equivalence tests: Schuirmann's two one-sided tests (TOST) with Welch's
//! unequal-variance t, on differences or, for a relative margin, on the log
//! scale (a ratio of geometric means).
//!
//! Why the log scale for "equivalent within ±2 %": a relative margin is a
//! margin on the ratio candidate / baseline, and on logs a ratio is a
//! difference, so the two one-sided tests are ordinary t-tests with the
//! bounds ln(1 − m) and ln(1 + m). Run-time data are positive and
//! right-skewed, which the log also tames. The price: every value must be
//! positive, and what is compared is the ratio of geometric means (for the
//! small run-to-run spreads of timings, within a fraction of a percent of
//! the ratio of means).

use serde::Serialize;

use super::dist::{t_cdf, t_sf};
use super::summary::summarize;

/// Result of [`tost_welch`] or [`tost_log_ratio`]: the difference is
/// mean(a) − mean(b) (of logs for the ratio form).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Tost {
    /// Equivalence bounds on the tested scale.
    pub low: f64,
    pub upp: f64,
    /// mean(a) − mean(b).
    pub diff: f64,
    /// Welch–Satterthwaite degrees of freedom.
    pub df: f64,
    /// (diff − low) / se and its p for H₀: diff ≤ low.
    pub t_low: f64,
    pub p_low: f64,
    /// (diff − upp) / se and its p for H₀: diff ≥ upp.
    pub t_upp: f64,
    pub p_upp: f64,
    /// The TOST p: max(p_low, p_upp). Below α: equivalent at level α.
    pub p: f64,
    /// p of the opposite one-sided tests: H₀: diff ≥ low (evidence the
    /// difference is below the lower bound) and H₀: diff ≤ upp (above the
    /// upper bound). Below α: different by more than the margin.
    pub p_below_low: f64,
    pub p_above_upp: f64,
}

/// P(T > t) and P(T < t) with the zero-variance limits: t = ±inf gives
/// 0 or 1, t = 0 from 0/0 (difference on a bound) gives ½.
fn tails(t: f64, df: f64) -> (f64, f64) {
    if t.is_infinite() {
        if t > 0.0 { (0.0, 1.0) } else { (1.0, 0.0) }
    } else {
        (t_sf(t, df), t_cdf(t, df))
    }
}

/// TOST of mean(a) − mean(b) within (low, upp), Welch's t for each side
/// (`statsmodels.stats.weightstats.ttost_ind(a, b, low, upp,
/// usevar='unequal')`: its p, and (t, p, df) of each one-sided test).
///
/// Edge cases: `None` when either sample has fewer than 2 values or a value
/// that is not finite, or when low ≥ upp. Both variances 0: each statistic
/// is ±inf by the side of its bound the difference lies on (p 0 or 1), ½ on
/// the bound; df is n_a + n_b − 2.
pub fn tost_welch(a: &[f64], b: &[f64], low: f64, upp: f64) -> Option<Tost> {
    if a.len() < 2 || b.len() < 2 || low.is_nan() || upp.is_nan() || low >= upp {
        return None;
    }
    let sa = summarize(a)?;
    let sb = summarize(b)?;
    let (na, nb) = (a.len() as f64, b.len() as f64);
    let diff = sa.mean - sb.mean;
    let va = sa.sd * sa.sd / na;
    let vb = sb.sd * sb.sd / nb;
    let se2 = va + vb;
    let (df, t_of): (f64, Box<dyn Fn(f64) -> f64>) = if se2 == 0.0 {
        let t = move |bound: f64| {
            let d = diff - bound;
            if d == 0.0 {
                0.0
            } else {
                d.signum() * f64::INFINITY
            }
        };
        (na + nb - 2.0, Box::new(t))
    } else {
        let se = se2.sqrt();
        (
            se2 * se2 / (va * va / (na - 1.0) + vb * vb / (nb - 1.0)),
            Box::new(move |bound: f64| (diff - bound) / se),
        )
    };
    let (t_low, t_upp) = (t_of(low), t_of(upp));
    let (p_low, p_below_low) = tails(t_low, df);
    let (p_above_upp, p_upp) = tails(t_upp, df);
    Some(Tost {
        low,
        upp,
        diff,
        df,
        t_low,
        p_low,
        t_upp,
        p_upp,
        p: p_low.max(p_upp),
        p_below_low,
        p_above_upp,
    })
}

/// TOST that the ratio of a's geometric mean to b's lies within
/// (1 − margin, 1 + margin): [`tost_welch`] on the logs of the values with
/// bounds ln(1 − margin) and ln(1 + margin)
/// (`ttost_ind(a, b, 1 - margin, 1 + margin, usevar='unequal',
/// transform=np.log)`).
///
/// `None` when margin is not in (0, 1), a value is not positive, or as
/// [`tost_welch`].
pub fn tost_log_ratio(a: &[f64], b: &[f64], margin: f64) -> Option<Tost> {
    if !(margin > 0.0 && margin < 1.0) || a.iter().chain(b).any(|&v| v.is_nan() || v <= 0.0) {
        return None;
    }
    let la: Vec<f64> = a.iter().map(|v| v.ln()).collect();
    let lb: Vec<f64> = b.iter().map(|v| v.ln()).collect();
    tost_welch(&la, &lb, (1.0 - margin).ln(), (1.0 + margin).ln())
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
    const C: [f64; 10] = [
        10.02, 9.97, 10.05, 9.99, 10.01, 10.03, 9.96, 10.00, 10.04, 9.98,
    ];
    const D: [f64; 8] = [10.01, 10.06, 9.98, 10.03, 10.00, 10.05, 9.97, 10.02];

    #[test]
    fn tost_on_differences_matches_statsmodels() {
        // from statsmodels.stats.weightstats import ttost_ind
        // ttost_ind(A, B, -1.0, 3.0, usevar='unequal') ->
        //   (0.3256703213003205,
        //    (4.596993277622925, 0.000929457662822487, 7.837873719014602),
        //    (-0.4697272120648048, 0.3256703213003205, 7.837873719014602))
        let r = tost_welch(&A, &B, -1.0, 3.0).unwrap();
        assert_rel(r.p, 0.3256703213003205, 1e-9, "p");
        assert_rel(r.t_low, 4.596993277622925, 1e-9, "t_low");
        assert_rel(r.p_low, 0.000929457662822487, 1e-8, "p_low");
        assert_rel(r.t_upp, -0.4697272120648048, 1e-9, "t_upp");
        assert_rel(r.p_upp, 0.3256703213003205, 1e-9, "p_upp");
        assert_rel(r.df, 7.837873719014602, 1e-9, "df");
        // The opposite one-sided tests are the complements.
        assert_rel(r.p_below_low, 1.0 - r.p_low, 1e-12, "below");
        assert_rel(r.p_above_upp, 1.0 - r.p_upp, 1e-12, "above");
    }

    #[test]
    fn tost_on_ratios_matches_statsmodels() {
        // ttost_ind(C, D, 0.98, 1.02, usevar='unequal', transform=np.log) ->
        //   (7.718112925539006e-10,
        //    (13.060479631861156, 7.718112925539006e-10, 14.83627214048063),
        //    (-14.146888240467726, 2.5627675581125515e-10, 14.83627214048063))
        let r = tost_log_ratio(&C, &D, 0.02).unwrap();
        assert_rel(r.p, 7.718112925539006e-10, 1e-6, "p");
        assert_rel(r.t_low, 13.060479631861156, 1e-9, "t_low");
        assert_rel(r.p_low, 7.718112925539006e-10, 1e-6, "p_low");
        assert_rel(r.t_upp, -14.146888240467726, 1e-9, "t_upp");
        assert_rel(r.p_upp, 2.5627675581125515e-10, 1e-6, "p_upp");
        assert_rel(r.df, 14.83627214048063, 1e-9, "df");
        assert!(r.p < 0.05, "equivalent within ±2 %");
        // ttost_ind(A, B, 0.95, 1.05, usevar='unequal', transform=np.log) ->
        //   (0.8715426271202167,
        //    (6.004353766062216, 0.00015484183228036183, 8.078562315128625),
        //    (1.219904098097914, 0.8715426271202167, 8.078562315128625))
        let r = tost_log_ratio(&A, &B, 0.05).unwrap();
        assert_rel(r.p, 0.8715426271202167, 1e-9, "p");
        assert_rel(r.t_low, 6.004353766062216, 1e-9, "t_low");
        assert_rel(r.p_low, 0.00015484183228036183, 1e-7, "p_low");
        assert_rel(r.t_upp, 1.219904098097914, 1e-9, "t_upp");
        assert_rel(r.df, 8.078562315128625, 1e-9, "df");
        // A is about 7 % above B: not equivalent within ±5 %, and the
        // evidence that it is above +5 % is weak (p_above = 1 − 0.87).
        assert_rel(r.p_above_upp, 1.0 - 0.8715426271202167, 1e-8, "above");
    }

    #[test]
    fn edge_cases() {
        assert!(tost_welch(&[1.0], &[1.0, 2.0], -1.0, 1.0).is_none());
        assert!(tost_welch(&[1.0, 2.0], &[1.0, f64::INFINITY], -1.0, 1.0).is_none());
        assert!(tost_welch(&[1.0, 2.0], &[1.0, 2.0], 1.0, -1.0).is_none());
        assert!(tost_log_ratio(&[1.0, 0.0], &[1.0, 2.0], 0.05).is_none());
        assert!(tost_log_ratio(&[1.0, 2.0], &[1.0, 2.0], 0.0).is_none());
        assert!(tost_log_ratio(&[1.0, 2.0], &[1.0, 2.0], 1.0).is_none());
        // No variance: equal values are equivalent, values 10 % apart are
        // beyond a 5 % margin, with certainty either way.
        let same = tost_log_ratio(&[5.0, 5.0, 5.0], &[5.0, 5.0], 0.05).unwrap();
        assert_eq!(
            (same.p, same.p_above_upp, same.p_below_low),
            (0.0, 1.0, 1.0)
        );
        assert_eq!(same.df, 3.0);
        let apart = tost_log_ratio(&[5.5, 5.5, 5.5], &[5.0, 5.0], 0.05).unwrap();
        assert_eq!((apart.p, apart.p_above_upp), (1.0, 0.0));
        // On a bound: half.
        let on = tost_welch(&[1.0, 1.0], &[0.0, 0.0], -1.0, 1.0).unwrap();
        assert_eq!((on.p_upp, on.p_above_upp), (0.5, 0.5));
    }
}
