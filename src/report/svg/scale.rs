//! Scales: nice ticks, linear and log maps from values to pixels, and
//! axes from the extent of some values.

/// Axis ticks: `values` are multiples of `step` covering [lo, hi].
#[derive(Debug, Clone, PartialEq)]
pub struct Ticks {
    pub lo: f64,
    pub hi: f64,
    pub step: f64,
    pub values: Vec<f64>,
}

/// The "nice" number (1, 2, 5 × 10^k) nearest to `x` (`round`) or not below
/// it (Heckbert, Graphics Gems 1990).
pub(super) fn nice_num(x: f64, round: bool) -> f64 {
    let exp = x.log10().floor();
    let f = x / 10f64.powf(exp);
    let nf = if round {
        if f < 1.5 {
            1.0
        } else if f < 3.0 {
            2.0
        } else if f < 7.0 {
            5.0
        } else {
            10.0
        }
    } else if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    };
    nf * 10f64.powf(exp)
}

/// Nice ticks covering [lo, hi] with about `target` intervals. A degenerate
/// range (lo == hi) is widened around the value; non-finite input gives
/// [0, 1].
pub fn nice_ticks(lo: f64, hi: f64, target: usize) -> Ticks {
    let (mut lo, mut hi) = if lo.is_finite() && hi.is_finite() {
        (lo.min(hi), lo.max(hi))
    } else {
        (0.0, 1.0)
    };
    if lo == hi {
        let d = if lo == 0.0 { 1.0 } else { lo.abs() * 0.1 };
        if lo >= 0.0 && lo - d < 0.0 {
            lo = 0.0;
        } else {
            lo -= d;
        }
        hi += d;
    }
    let range = nice_num(hi - lo, false);
    let step = nice_num(range / target.max(1) as f64, true);
    let t_lo = (lo / step).floor() * step;
    let t_hi = (hi / step).ceil() * step;
    let count = ((t_hi - t_lo) / step).round() as usize;
    // Snap values like 0.6000000000000001 to the decimals of the step.
    let decimals = (1 - step.log10().floor() as i32).clamp(0, 15);
    let snap = 10f64.powi(decimals);
    let values = (0..=count)
        .map(|i| ((t_lo + i as f64 * step) * snap).round() / snap)
        .collect();
    Ticks {
        lo: t_lo,
        hi: t_hi,
        step,
        values,
    }
}

/// Ticks for a log axis over [lo, hi] (both > 0): 1-2-5 per decade when the
/// range spans a decade or more, else nice linear ticks inside the range.
pub fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    if !(lo > 0.0 && hi >= lo && hi.is_finite()) {
        return Vec::new();
    }
    if hi / lo < 10.0 {
        let t = nice_ticks(lo, hi, 4);
        let mut v: Vec<f64> = t
            .values
            .into_iter()
            .filter(|&x| x >= lo * 0.999 && x <= hi * 1.001 && x > 0.0)
            .collect();
        if v.len() < 2 {
            v = vec![lo, hi];
        }
        return v;
    }
    let mut out = Vec::new();
    let mut e = lo.log10().floor() as i32;
    let mults: &[f64] = if hi / lo > 1e4 {
        &[1.0]
    } else {
        &[1.0, 2.0, 5.0]
    };
    while 10f64.powi(e) <= hi * 1.001 {
        for m in mults {
            let v = m * 10f64.powi(e);
            if v >= lo * 0.999 && v <= hi * 1.001 {
                out.push(v);
            }
        }
        e += 1;
    }
    out
}

/// A map from data values to pixels, linear or logarithmic.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scale {
    pub d0: f64,
    pub d1: f64,
    pub r0: f64,
    pub r1: f64,
    pub log: bool,
}

impl Scale {
    pub fn linear(d0: f64, d1: f64, r0: f64, r1: f64) -> Scale {
        Scale {
            d0,
            d1,
            r0,
            r1,
            log: false,
        }
    }

    pub fn log(d0: f64, d1: f64, r0: f64, r1: f64) -> Scale {
        Scale {
            d0,
            d1,
            r0,
            r1,
            log: true,
        }
    }

    /// Pixel position of `v` (a degenerate domain maps to the middle).
    pub fn map(&self, v: f64) -> f64 {
        let (a, b, x) = if self.log {
            (self.d0.ln(), self.d1.ln(), v.max(f64::MIN_POSITIVE).ln())
        } else {
            (self.d0, self.d1, v)
        };
        if b == a {
            return (self.r0 + self.r1) / 2.0;
        }
        self.r0 + (x - a) / (b - a) * (self.r1 - self.r0)
    }
}

/// Domain of some values (finite ones), or None.
pub(super) fn extent(vals: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    let (lo, hi) = vals
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
            (a.min(v), b.max(v))
        });
    lo.is_finite().then_some((lo, hi))
}

/// Axis from an extent: a scale and its ticks.
pub(super) fn axis(
    lo: f64,
    hi: f64,
    log: bool,
    r0: f64,
    r1: f64,
    fixed: &[f64],
) -> (Scale, Vec<f64>, f64) {
    if log && lo > 0.0 {
        let (lo, hi) = if hi / lo < 1.2 {
            (lo / 1.1, hi * 1.1)
        } else {
            (lo / 1.05, hi * 1.05)
        };
        let ticks = if fixed.is_empty() {
            log_ticks(lo, hi)
        } else {
            fixed.to_vec()
        };
        (Scale::log(lo, hi, r0, r1), ticks, 0.0)
    } else {
        let t = nice_ticks(lo.min(0.0), hi, 5);
        let ticks = if fixed.is_empty() {
            t.values.clone()
        } else {
            fixed.to_vec()
        };
        (Scale::linear(t.lo, t.hi, r0, r1), ticks, t.step)
    }
}
