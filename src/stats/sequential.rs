//! The stopping rule of `repetitions = "auto"`: a sequential fixed-width
//! confidence interval in the manner of Chow and Robbins (1965), made
//! relative to the mean and corrected for small samples.
//!
//! After each round a condition has `n` values x₁…xₙ of its primary metric
//! with mean x̄ₙ and sample variance sₙ². With d = `target_ci_pct` / 100 it
//! stops at the first n ≥ n_min with
//!
//! ```text
//!     t(n−1, 0.975) · √((sₙ² + K·(d·x̄ₙ)²/n) / n)  ≤  d·|x̄ₙ|
//! ```
//!
//! and reports the 95 % interval x̄ₙ ± t(n−1, 0.975)·sₙ/√n, whose half-width
//! is then at most d·|x̄ₙ|. The term K·(d·x̄ₙ)²/n is Chow and Robbins'
//! small-sample term (their sₙ² + 1/n), measured in units of the target
//! width so that the rule does not depend on the metric's unit. Without it
//! the rule stops whenever a few runs happen to agree, and the interval it
//! reports then covers the mean less often than it says: with n_min = 5,
//! 91–92 % for normal data whose CV is twice the target (the simulation
//! test below shows it). With K = [`SMALL_SAMPLE_K`] the term keeps the
//! rule from stopping before about 10 values (t·√K/n ≤ 1 needs n ≥ 10) and
//! fades as n grows; the simulation holds the coverage of the reported
//! interval within 95 % ± 2 % for normal and lognormal (σ = 0.2) data from
//! loose targets (stop at n_min) to tight ones (a hundred runs).

use super::dist::t_quantile;

/// Chow–Robbins' small-sample term, in units of (d·x̄)²/n.
pub const SMALL_SAMPLE_K: f64 = 16.0;

/// Running count, mean and sum of squared deviations (Welford), so that a
/// sequential rule costs O(1) per new value.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Moments {
    pub n: usize,
    pub mean: f64,
    m2: f64,
}

impl Moments {
    /// The moments of `values` (non-finite ones are left out).
    pub fn of(values: &[f64]) -> Moments {
        let mut m = Moments::default();
        values.iter().for_each(|&x| m.push(x));
        m
    }

    /// Add one value; NaN and infinities are ignored.
    pub fn push(&mut self, x: f64) {
        if !x.is_finite() {
            return;
        }
        self.n += 1;
        let delta = x - self.mean;
        self.mean += delta / self.n as f64;
        self.m2 += delta * (x - self.mean);
    }

    /// Sample variance (denominator n − 1); None below two values.
    pub fn variance(&self) -> Option<f64> {
        (self.n >= 2).then(|| (self.m2 / (self.n - 1) as f64).max(0.0))
    }

    /// Half-width of the 95 % Student-t interval of the mean; None below
    /// two values.
    pub fn half_width(&self) -> Option<f64> {
        let v = self.variance()?;
        Some(t975(self.n) * (v / self.n as f64).sqrt())
    }

    /// [`Moments::half_width`] in % of |mean|; None below two values or at
    /// a zero mean.
    pub fn half_width_pct(&self) -> Option<f64> {
        let h = self.half_width()?;
        (self.mean != 0.0).then(|| 100.0 * h / self.mean.abs())
    }
}

/// t(n−1, 0.975): the quantile of the 95 % two-sided interval of a mean of
/// `n` values (NaN below 2).
pub fn t975(n: usize) -> f64 {
    if n < 2 {
        return f64::NAN;
    }
    t_quantile(0.975, (n - 1) as f64)
}

/// When to stop repeating a condition.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StopRule {
    /// The half-width of the 95 % interval of the mean to reach, in % of
    /// the mean.
    pub target_ci_pct: f64,
    /// Never stop with fewer values (at least 2).
    pub min_n: usize,
}

impl StopRule {
    /// Whether a condition with these moments has reached its precision.
    pub fn satisfied(&self, m: &Moments) -> bool {
        self.satisfied_with(m, t975(m.n))
    }

    /// [`StopRule::satisfied`] given t(n−1, 0.975) (simulations cache it).
    pub fn satisfied_with(&self, m: &Moments, t: f64) -> bool {
        let Some(var) = m.variance() else {
            return false;
        };
        if m.n < self.min_n.max(2) || m.mean == 0.0 || !t.is_finite() {
            return false;
        }
        let n = m.n as f64;
        let width = self.target_ci_pct / 100.0 * m.mean.abs();
        let inflated = var + SMALL_SAMPLE_K * width * width / n;
        t * t * inflated / n <= width * width
    }

    /// The number of leading values of `values` after which the rule
    /// stops, if it does (the smallest such n).
    pub fn stopping_n(&self, values: &[f64]) -> Option<usize> {
        let mut m = Moments::default();
        for (i, &x) in values.iter().enumerate() {
            m.push(x);
            if self.satisfied(&m) {
                return Some(i + 1);
            }
        }
        None
    }

    /// The least n at which values with this coefficient of variation
    /// (sd / mean) would stop, at most `max_n` (for estimates).
    pub fn expected_n(&self, cv: f64, max_n: usize) -> usize {
        let d = self.target_ci_pct / 100.0;
        let from = self.min_n.max(2);
        (from..=max_n.max(from))
            .find(|&n| {
                let nf = n as f64;
                let t = t975(n);
                t * t * (cv * cv + SMALL_SAMPLE_K * d * d / nf) / nf <= d * d
            })
            .unwrap_or(max_n.max(from))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;

    #[test]
    fn moments_match_the_two_pass_formulas() {
        let xs = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0];
        let m = Moments::of(&xs);
        assert_eq!(m.n, 8);
        assert!((m.mean - 5.0).abs() < 1e-12);
        assert!((m.variance().unwrap() - 32.0 / 7.0).abs() < 1e-12);
        // t(7, 0.975) = 2.364624
        let h = m.half_width().unwrap();
        assert!((h - 2.364624 * (32.0f64 / 7.0 / 8.0).sqrt()).abs() < 1e-5);
        assert!((m.half_width_pct().unwrap() - 100.0 * h / 5.0).abs() < 1e-9);
        assert_eq!(Moments::of(&[1.0]).variance(), None);
        assert_eq!(Moments::of(&[f64::NAN, 3.0]).n, 1);
        assert_eq!(Moments::of(&[0.0, 0.0]).half_width_pct(), None);
    }

    #[test]
    fn the_rule_needs_n_min_and_the_small_sample_term_stops_early_agreement() {
        let rule = StopRule {
            target_ci_pct: 5.0,
            min_n: 2,
        };
        // Identical values: zero variance, yet no stop before the term
        // allows it (t(n−1)·4 ≤ n first holds at n = 10).
        let same = [1.0; 30];
        assert_eq!(rule.stopping_n(&same), Some(10));
        let strict = StopRule { min_n: 12, ..rule };
        assert_eq!(strict.stopping_n(&same), Some(12));
        // Too noisy for ±5 % within 30 values.
        let noisy: Vec<f64> = (0..30)
            .map(|i| if i % 2 == 0 { 1.0 } else { 2.0 })
            .collect();
        assert_eq!(rule.stopping_n(&noisy), None);
        // At the stop the reported interval is within the target.
        let mut r = SplitMix64::new(7);
        let xs: Vec<f64> = (0..200).map(|_| 10.0 + normal(&mut r)).collect();
        let n = rule.stopping_n(&xs).unwrap();
        assert!(Moments::of(&xs[..n]).half_width_pct().unwrap() <= 5.0);
        assert!(Moments::of(&xs[..n - 1]).half_width_pct().unwrap() > 0.0);
        assert!(!rule.satisfied(&Moments::of(&[0.0, 0.0, 0.0])));
    }

    #[test]
    fn expected_n_grows_with_the_noise_and_is_capped() {
        let rule = StopRule {
            target_ci_pct: 2.0,
            min_n: 10,
        };
        assert_eq!(rule.expected_n(0.0, 50), 10);
        let a = rule.expected_n(0.04, 500);
        let b = rule.expected_n(0.08, 500);
        assert!(a > 10 && b > 3 * a, "{a} {b}");
        assert_eq!(rule.expected_n(1.0, 50), 50);
    }

    /// A standard normal variate (Box–Muller).
    fn normal(r: &mut SplitMix64) -> f64 {
        let u1 = 1.0 - r.next_f64();
        let u2 = r.next_f64();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    #[derive(Clone, Copy)]
    enum Dist {
        /// Normal with mean 1 and this sd.
        Normal(f64),
        /// exp(σ·Z): right-skewed, mean exp(σ²/2).
        LogNormal(f64),
    }

    impl Dist {
        fn draw(self, r: &mut SplitMix64) -> f64 {
            match self {
                Dist::Normal(sd) => 1.0 + sd * normal(r),
                Dist::LogNormal(s) => (s * normal(r)).exp(),
            }
        }
        fn mean(self) -> f64 {
            match self {
                Dist::Normal(_) => 1.0,
                Dist::LogNormal(s) => (s * s / 2.0).exp(),
            }
        }
        fn cv(self) -> f64 {
            match self {
                Dist::Normal(sd) => sd,
                Dist::LogNormal(s) => ((s * s).exp() - 1.0).sqrt(),
            }
        }
    }

    /// Over `campaigns` synthetic campaigns of one condition: the share
    /// whose reported interval (mean ± t·s/√n at the stop, or at max_n)
    /// holds the true mean, and the mean n.
    fn coverage(
        rule: StopRule,
        dist: Dist,
        max_n: usize,
        campaigns: usize,
        seed: u64,
    ) -> (f64, f64) {
        let t: Vec<f64> = (0..=max_n).map(t975).collect();
        let mut r = SplitMix64::new(seed);
        let (mut covered, mut total_n) = (0usize, 0usize);
        for _ in 0..campaigns {
            let mut m = Moments::default();
            while m.n < max_n {
                m.push(dist.draw(&mut r));
                if rule.satisfied_with(&m, t[m.n]) {
                    break;
                }
            }
            let h = t[m.n] * (m.variance().unwrap() / m.n as f64).sqrt();
            covered += usize::from((m.mean - dist.mean()).abs() <= h);
            total_n += m.n;
        }
        (
            covered as f64 / campaigns as f64,
            total_n as f64 / campaigns as f64,
        )
    }

    /// The coverage simulation: the rule's reported 95 % interval holds the
    /// true mean in 95 % ± 2 % of many synthetic campaigns, for normal and
    /// right-skewed (lognormal) data, with targets from loose (the rule
    /// stops at n_min) to tight (the CV is 4× the target: ~60 runs). 20,000
    /// campaigns per case: the simulation's own standard error is 0.15 %.
    #[test]
    fn coverage_simulation_holds_95_percent_within_2() {
        let mut seed = 2026;
        let mut worst = (1.0f64, String::new());
        for dist in [Dist::Normal(0.1), Dist::LogNormal(0.2)] {
            for cv_per_target in [0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0] {
                let rule = StopRule {
                    target_ci_pct: 100.0 * dist.cv() / cv_per_target,
                    min_n: 10,
                };
                seed += 1;
                let (cov, mean_n) = coverage(rule, dist, 400, 20_000, seed);
                let what = format!(
                    "{} cv/target {cv_per_target}: coverage {cov:.4}, mean n {mean_n:.1}",
                    match dist {
                        Dist::Normal(_) => "normal",
                        Dist::LogNormal(_) => "lognormal",
                    }
                );
                assert!((0.93..=0.97).contains(&cov), "{what}");
                if cov < worst.0 {
                    worst = (cov, what);
                }
            }
        }
        eprintln!("worst case: {}", worst.1);
    }

    /// The test above can fail: Chow–Robbins without the small-sample
    /// correction, from 5 runs, under-covers where the CV is about twice
    /// the target (it stops when a few runs happen to agree).
    #[test]
    fn without_the_correction_small_samples_under_cover() {
        let (cov, _) = {
            let dist = Dist::Normal(0.1);
            let t: Vec<f64> = (0..=400).map(t975).collect();
            let mut r = SplitMix64::new(99);
            let d = 0.05;
            let mut covered = 0;
            for _ in 0..20_000 {
                let mut m = Moments::default();
                loop {
                    m.push(dist.draw(&mut r));
                    let plain = m.n >= 5
                        && t[m.n] * (m.variance().unwrap() / m.n as f64).sqrt() <= d * m.mean.abs();
                    if plain || m.n == 400 {
                        break;
                    }
                }
                let h = t[m.n] * (m.variance().unwrap() / m.n as f64).sqrt();
                covered += usize::from((m.mean - 1.0).abs() <= h);
            }
            (covered as f64 / 20_000.0, ())
        };
        assert!(cov < 0.93, "plain Chow–Robbins from n = 5 covered {cov}");
    }
}
