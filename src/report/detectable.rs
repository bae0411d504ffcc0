//! What a "not separated" means: the smallest change the test actually used
//! (Mann–Whitney U, Holm-corrected) could have seen in these runs with 80 %
//! power, and that in words ("a change smaller than 3.1 % could not be seen
//! with 10 runs a side").
//!
//! The approximation, stated once: the runs are taken as normal with the
//! two sides' pooled standard deviation; Mann–Whitney's power is the
//! t-test's with each side's runs scaled by its asymptotic relative
//! efficiency 3/π ([`stats::mann_whitney_detectable_d`]); the level is the
//! campaign's α divided by the number of tests Holm's correction runs over
//! (its first step: what a single real change among unchanged ones must
//! reach). The effect is then d · pooled sd, as a fraction of the
//! reference side's mean. When the exact test's smallest attainable p
//! cannot reach that level at all, no change could have been seen.

use serde::Serialize;

use super::fmt;
use crate::stats::{self, POWER};

/// The smallest change detectable in one comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Detectable {
    /// Smallest change, as a fraction of the reference mean, detected with
    /// 80 % power; None when no change could reach the level (too few runs
    /// for the exact test).
    pub relative: Option<f64>,
    /// The level per test it was computed at (α / tests).
    pub alpha_per_test: f64,
    /// Tests in the Holm family.
    pub tests: usize,
    pub n_a: usize,
    pub n_b: usize,
}

/// Sample standard deviation pooled over both sides.
fn pooled_sd(a: &[f64], b: &[f64]) -> Option<f64> {
    let (sa, sb) = (stats::summarize(a)?, stats::summarize(b)?);
    let (na, nb) = (a.len() as f64, b.len() as f64);
    let df = na + nb - 2.0;
    (df > 0.0).then(|| {
        (((na - 1.0) * sa.sd * sa.sd + (nb - 1.0) * sb.sd * sb.sd) / df)
            .max(0.0)
            .sqrt()
    })
}

/// The smallest change a Mann–Whitney test of `a` against `b` at level
/// `alpha` (the family's), Holm-corrected over `tests` tests, detects with
/// 80 % power, relative to `reference_mean`. `min_attainable_p`: the exact
/// test's smallest p for these sizes (None: normal approximation). None
/// when a side has fewer than 2 runs, a value is not finite, or the
/// reference mean is 0 (no relative scale).
pub fn detectable(
    a: &[f64],
    b: &[f64],
    reference_mean: f64,
    alpha: f64,
    tests: usize,
    min_attainable_p: Option<f64>,
) -> Option<Detectable> {
    if a.len() < 2 || b.len() < 2 || reference_mean == 0.0 || !reference_mean.is_finite() {
        return None;
    }
    let sd = pooled_sd(a, b)?;
    let tests = tests.max(1);
    let alpha_per_test = alpha / tests as f64;
    let reachable = min_attainable_p.is_none_or(|p| p < alpha_per_test);
    let relative = if reachable {
        stats::mann_whitney_detectable_d(a.len(), b.len(), alpha_per_test, POWER)
            .map(|d| d * sd / reference_mean.abs())
    } else {
        None
    };
    Some(Detectable {
        relative,
        alpha_per_test,
        tests,
        n_a: a.len(),
        n_b: b.len(),
    })
}

impl Detectable {
    /// "10 runs a side", "10 and 8 runs".
    fn runs(&self) -> String {
        if self.n_a == self.n_b {
            format!(
                "{} run{} a side",
                self.n_a,
                if self.n_a == 1 { "" } else { "s" }
            )
        } else {
            format!("{} and {} runs", self.n_a, self.n_b)
        }
    }

    /// "3.1 %" (None when no change could be seen).
    pub fn percent(&self) -> Option<String> {
        self.relative
            .map(|r| format!("{} %", fmt::sig(100.0 * r, 2)))
    }

    /// The sentence: "a change smaller than 3.1 % could not be seen with 10
    /// runs a side".
    pub fn sentence(&self) -> String {
        match self.relative {
            Some(0.0) => format!(
                "the runs do not vary, so any change would have been seen with {}",
                self.runs()
            ),
            Some(_) => format!(
                "a change smaller than {} could not be seen with {}",
                self.percent().unwrap_or_default(),
                self.runs()
            ),
            None => format!(
                "no change could be seen with {}: too few for p < {}{}",
                self.runs(),
                fmt::sig(self.alpha_per_test * self.tests as f64, 2),
                if self.tests == 1 {
                    String::new()
                } else {
                    format!(" over {} tests", self.tests)
                }
            ),
        }
    }

    /// Short form for a table cell: "< 3.1 % unseen", "none seeable".
    pub fn cell(&self) -> String {
        match self.percent() {
            Some(p) => format!("changes < {p} unseen"),
            None => "no change seeable".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detectable_change_is_d_times_pooled_sd_over_the_mean() {
        // Both sides sd 1 around 100 and 101: pooled sd 1; 10 runs a side,
        // one test at 0.05: d = 1.3600521901770015 (statsmodels, with the
        // ARE; see stats::power), so 1.36 % of a mean of 100.
        let a: Vec<f64> = [-1.5, -1.0, -0.5, 0.0, 0.0, 0.5, 0.5, 1.0, 1.0, 0.0]
            .iter()
            .map(|x| 100.0 + x)
            .collect();
        let sd = stats::summarize(&a).unwrap().sd;
        let b: Vec<f64> = a.iter().map(|x| x + 1.0).collect();
        let d = detectable(&a, &b, 100.0, 0.05, 1, None).unwrap();
        let want = 1.3600521901770015 * sd / 100.0;
        assert!(
            (d.relative.unwrap() - want).abs() < 1e-6 * want,
            "{d:?} vs {want}"
        );
        assert_eq!(d.alpha_per_test, 0.05);
        let s = d.sentence();
        assert!(s.starts_with("a change smaller than 1."), "{s}");
        assert!(s.ends_with("with 10 runs a side"), "{s}");
        // Over 16 tests the level is 0.05/16 and the effect larger.
        let d16 = detectable(&a, &b, 100.0, 0.05, 16, None).unwrap();
        assert!(d16.relative.unwrap() > d.relative.unwrap());
        assert_eq!(d16.alpha_per_test, 0.05 / 16.0);
    }

    #[test]
    fn unreachable_zero_spread_and_degenerate_inputs() {
        // 3 runs a side: the exact test's best p is 0.1, never below 0.05.
        let d = detectable(&[1.0, 2.0, 3.0], &[1.5, 2.5, 3.5], 2.0, 0.05, 1, Some(0.1)).unwrap();
        assert_eq!(d.relative, None);
        assert_eq!(
            d.sentence(),
            "no change could be seen with 3 runs a side: too few for p < 0.05"
        );
        assert_eq!(d.cell(), "no change seeable");
        // No spread at all: any change would show.
        let z = detectable(&[2.0; 5], &[2.0; 6], 2.0, 0.05, 1, None).unwrap();
        assert_eq!(z.relative, Some(0.0));
        assert!(
            z.sentence()
                .contains("any change would have been seen with 5 and 6 runs")
        );
        assert!(detectable(&[1.0, 2.0], &[1.0, 2.0], 0.0, 0.05, 1, None).is_none());
        assert!(detectable(&[1.0], &[1.0, 2.0], 1.0, 0.05, 1, None).is_none());
    }
}
