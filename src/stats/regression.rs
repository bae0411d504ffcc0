//! Straight-line fits: ordinary least squares ([`ols`]) and the power-law
//! exponent from a fit in log–log space ([`loglog_slope`]), e.g. how run
//! time grows with the number of competing tasks (slope 1 = linear).

use serde::Serialize;

/// A fitted line `y = slope·x + intercept` (in log space for
/// [`loglog_slope`]: `ln y = slope·ln x + intercept`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fit {
    pub slope: f64,
    pub intercept: f64,
    /// Coefficient of determination (the squared Pearson correlation).
    pub r2: f64,
    /// Number of points used.
    pub n: usize,
}

/// Ordinary least-squares line through the points `(xs[i], ys[i])`
/// (`scipy.stats.linregress`). Sums are taken about the means, so large
/// offsets (timestamps) do not cost precision.
///
/// Edge cases — `None` when:
/// - the slices differ in length, or have fewer than 2 points;
/// - any value is NaN or infinite;
/// - all x are equal (zero x-variance: the slope is undefined).
///
/// When all y are equal the fit is the horizontal line through them, which
/// passes through every point, and `r2` is reported as 1 rather than NaN
/// (the correlation is 0/0 there; scipy 1.17's `linregress` gives NaN).
/// A slope of 0 with r² = 1 thus reads as "y does not depend on x".
pub fn ols(xs: &[f64], ys: &[f64]) -> Option<Fit> {
    if xs.len() != ys.len() || xs.len() < 2 || xs.iter().chain(ys).any(|v| !v.is_finite()) {
        return None;
    }
    let n = xs.len();
    let nf = n as f64;
    let mx = xs.iter().sum::<f64>() / nf;
    let my = ys.iter().sum::<f64>() / nf;
    let (mut sxx, mut sxy, mut syy) = (0.0, 0.0, 0.0);
    for (&x, &y) in xs.iter().zip(ys) {
        let (dx, dy) = (x - mx, y - my);
        sxx += dx * dx;
        sxy += dx * dy;
        syy += dy * dy;
    }
    if sxx == 0.0 || xs.iter().all(|&x| x == xs[0]) {
        return None;
    }
    let slope = sxy / sxx;
    let intercept = my - slope * mx;
    let r2 = if syy == 0.0 {
        1.0
    } else {
        (sxy * sxy / (sxx * syy)).clamp(0.0, 1.0)
    };
    Some(Fit {
        slope,
        intercept,
        r2,
        n,
    })
}

/// OLS fit of `ln y` on `ln x`: the slope is the exponent k of a power law
/// `y ≈ e^intercept · x^k`.
///
/// Edge cases: points with a non-positive (or non-finite) x or y are skipped
/// (their logarithm is undefined) and `n` counts only the points used;
/// `None` when the slices differ in length, fewer than 2 usable points
/// remain, or the usable x are all equal. Other edge cases as for [`ols`].
pub fn loglog_slope(xs: &[f64], ys: &[f64]) -> Option<Fit> {
    if xs.len() != ys.len() {
        return None;
    }
    let usable = |v: f64| v.is_finite() && v > 0.0;
    let (lx, ly): (Vec<f64>, Vec<f64>) = xs
        .iter()
        .zip(ys)
        .filter(|&(&x, &y)| usable(x) && usable(y))
        .map(|(&x, &y)| (x.ln(), y.ln()))
        .unzip();
    ols(&lx, &ly)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_rel(got: f64, want: f64, tol: f64) {
        let err = if want == 0.0 {
            got.abs()
        } else {
            ((got - want) / want).abs()
        };
        assert!(err <= tol, "got {got:e}, want {want:e}");
    }

    #[test]
    fn ols_matches_scipy() {
        // r = scipy.stats.linregress([1,2,3,4,5,6], [2.1,3.9,6.2,7.8,10.1,12.2])
        // r.slope, r.intercept, r.rvalue**2 -> 2.0199999999999996,
        //   -0.019999999999998685, 0.9982106661074996
        let xs = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let ys = [2.1, 3.9, 6.2, 7.8, 10.1, 12.2];
        let f = ols(&xs, &ys).unwrap();
        assert_rel(f.slope, 2.0199999999999996, 1e-12);
        assert_rel(f.intercept, -0.019999999999998685, 1e-9);
        assert_rel(f.r2, 0.9982106661074996, 1e-12);
        assert_eq!(f.n, 6);
    }

    #[test]
    fn ols_with_large_offset_keeps_precision() {
        // Timestamps near 1.7e9: linregress(x, y) with x = 1.7e9 + [0, 1, 2, 3]
        // and y = [5, 7, 9, 11.5] -> slope 2.15, intercept -3654999995.1,
        //   rvalue**2 0.9967654986522911
        let xs = [1.7e9, 1.7e9 + 1.0, 1.7e9 + 2.0, 1.7e9 + 3.0];
        let ys = [5.0, 7.0, 9.0, 11.5];
        let f = ols(&xs, &ys).unwrap();
        assert_rel(f.slope, 2.15, 1e-12);
        assert_rel(f.intercept, -3654999995.1, 1e-12);
        assert_rel(f.r2, 0.9967654986522911, 1e-12);
    }

    #[test]
    fn ols_edge_cases() {
        assert_eq!(ols(&[], &[]), None);
        assert_eq!(ols(&[1.0], &[2.0]), None);
        assert_eq!(ols(&[1.0, 2.0], &[2.0]), None);
        assert_eq!(ols(&[3.0, 3.0, 3.0], &[1.0, 2.0, 3.0]), None);
        assert_eq!(ols(&[1.0, f64::NAN], &[1.0, 2.0]), None);
        // Two points: exact line, r² = 1.
        let f = ols(&[1.0, 3.0], &[2.0, 6.0]).unwrap();
        assert_eq!((f.slope, f.intercept, f.r2, f.n), (2.0, 0.0, 1.0, 2));
        // Constant y: horizontal line through every point, r² = 1, no NaN
        // (scipy.stats.linregress([1,2,3], [4,4,4]) -> slope 0.0,
        //  intercept 4.0, rvalue nan).
        let f = ols(&[1.0, 2.0, 3.0], &[4.0, 4.0, 4.0]).unwrap();
        assert_eq!((f.slope, f.intercept, f.r2), (0.0, 4.0, 1.0));
    }

    #[test]
    fn loglog_matches_scipy() {
        // x = [1, 2, 4, 8, 16]; y = [3.0, 6.3, 11.8, 25.1, 49.0]
        // r = scipy.stats.linregress(np.log(x), np.log(y))
        // r.slope, r.intercept, r.rvalue**2 -> 1.0053758317238959,
        //   1.1106430732320598, 0.9993703786879412
        let xs = [1.0, 2.0, 4.0, 8.0, 16.0];
        let ys = [3.0, 6.3, 11.8, 25.1, 49.0];
        let f = loglog_slope(&xs, &ys).unwrap();
        assert_rel(f.slope, 1.0053758317238959, 1e-12);
        assert_rel(f.intercept, 1.1106430732320598, 1e-12);
        assert_rel(f.r2, 0.9993703786879412, 1e-12);
        assert_eq!(f.n, 5);
    }

    #[test]
    fn loglog_exact_power_law() {
        // y = 3·x^1.5 exactly: slope 1.5, intercept ln 3, r² 1.
        let xs = [1.0, 2.0, 3.0, 5.0, 8.0];
        let ys: Vec<f64> = xs.iter().map(|x: &f64| 3.0 * x.powf(1.5)).collect();
        let f = loglog_slope(&xs, &ys).unwrap();
        assert_rel(f.slope, 1.5, 1e-12);
        assert_rel(f.intercept, 3.0_f64.ln(), 1e-12);
        assert_rel(f.r2, 1.0, 1e-12);
    }

    #[test]
    fn loglog_skips_non_positive_points() {
        // Points with x ≤ 0 or y ≤ 0 are dropped; the rest are y = 2x.
        let xs = [0.0, 1.0, -2.0, 2.0, 4.0, 5.0];
        let ys = [1.0, 2.0, 3.0, 4.0, 8.0, -1.0];
        let f = loglog_slope(&xs, &ys).unwrap();
        assert_eq!(f.n, 3);
        assert_rel(f.slope, 1.0, 1e-12);
        assert_rel(f.intercept, 2.0_f64.ln(), 1e-12);
        assert_eq!(loglog_slope(&[0.0, 1.0, -1.0], &[1.0, 2.0, 3.0]), None);
        assert_eq!(loglog_slope(&[2.0, 2.0], &[1.0, 3.0]), None);
        assert_eq!(loglog_slope(&[1.0, 2.0], &[1.0]), None);
        assert_eq!(loglog_slope(&[], &[]), None);
    }
}
