//! The pi workload: partial sums of the Leibniz series, pure floating-point
//! CPU work with a tiny working set (no memory traffic, no system calls).
//!
//! This file owns the pure series function (`leibniz`), the blocked
//! accumulator the pi and mixed workloads share (`PiSeries`), and the loop a
//! pi worker runs. Figures: `pi_error` (|π − estimate|), `iter_per_s`.

use super::kind::{Entry, Kind, scale_stop, stop_cost_s};
use super::modelled::{Compute, ModelTask, Rate, Scale};
use super::{Deadline, Stop, WorkOutput, elapsed_ns, figures, per_second};
use super::{Rates, WorkContext, Workload};
use serde::{Deserialize, Serialize};
use std::hint::black_box;
use std::time::Instant;

/// Leibniz-series pi. Work unit: iterations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PiParams {
    pub stop: Stop,
}

/// Iterations per block: the clock is read between blocks in duration mode
/// (a block takes around a millisecond), and the series is accumulated per
/// block so that rounding error does not grow with the total count.
pub const BLOCK: u64 = 1 << 20;

/// Partial sum 4·Σ (-1)^k / (2k+1) for k in `start..start + count`.
///
/// The bound and the result pass through `black_box`, so the compiler can
/// neither precompute the loop nor drop it when the caller ignores the value.
pub fn leibniz(start: u64, count: u64) -> f64 {
    let end = black_box(start.saturating_add(count));
    // The index becomes a double through a signed conversion wherever it
    // can: x86-64 has a one-instruction signed conversion (cvtsi2sd) and
    // none for unsigned, which Rust then builds from five instructions in
    // the loop (C compilers test the sign and take the signed one). That
    // was why pi ran at 0.93x the same loop in C. Below 2^63 both give the
    // same double, so the sums are bit for bit the same.
    let sum = match end <= i64::MAX as u64 {
        true => partial_sum(start, end, |k| k as i64 as f64),
        false => partial_sum(start, end, |k| k as f64),
    };
    black_box(4.0 * sum)
}

/// Σ (-1)^k / (2k+1) for k in `start..end`, `to_f64` making k a double.
#[inline(always)]
fn partial_sum(start: u64, end: u64, to_f64: impl Fn(u64) -> f64) -> f64 {
    let mut sign = if start.is_multiple_of(2) { 1.0 } else { -1.0 };
    let mut sum = 0.0_f64;
    let mut k = start;
    while k < end {
        sum += sign / (2.0 * to_f64(k) + 1.0);
        sign = -sign;
        k += 1;
    }
    sum
}

/// A running Leibniz estimate that can be advanced by any number of
/// iterations, continuing the series where it left off.
#[derive(Debug, Clone, Default)]
pub struct PiSeries {
    /// Next term index, which is also the number of iterations done.
    next: u64,
    /// Sum of the per-block partial sums.
    sum: f64,
}

impl PiSeries {
    pub fn new() -> Self {
        Self::default()
    }

    /// Advance by `count` iterations, in blocks of at most `BLOCK`.
    pub fn advance(&mut self, count: u64) {
        let mut left = count;
        while left > 0 {
            let n = left.min(BLOCK);
            self.sum += leibniz(self.next, n);
            self.next += n;
            left -= n;
        }
    }

    /// Iterations done so far.
    pub fn iterations(&self) -> u64 {
        self.next
    }

    pub fn estimate(&self) -> f64 {
        self.sum
    }

    /// |π − estimate|.
    pub fn error(&self) -> f64 {
        (std::f64::consts::PI - self.sum).abs()
    }

    /// Check the estimate against the series' own error bound: the Leibniz
    /// remainder after N terms is below 1/N, so 2/N (+ 1e-9 for rounding) can
    /// only be exceeded if the work was not actually done.
    pub fn check(&self) -> anyhow::Result<()> {
        let n = self.next;
        if n == 0 {
            return Ok(());
        }
        let bound = 2.0 / n as f64 + 1e-9;
        anyhow::ensure!(
            self.error() <= bound,
            "pi check failed: estimate {} after {n} iterations is {} from π (bound {bound})",
            self.sum,
            self.error()
        );
        Ok(())
    }
}

/// Iterations between two clock reads in duration mode (about 60 µs), so a
/// worker overshoots the common deadline by little CPU time.
const DURATION_STEP: u64 = BLOCK / 16;

/// Worker loop for the pi workload; a duration counts from `release_ns`
/// (see `Deadline`).
pub fn run(p: &PiParams, release_ns: Option<u64>) -> anyhow::Result<WorkOutput> {
    let mut series = PiSeries::new();
    let start = Instant::now();
    match p.stop {
        Stop::Work(n) => series.advance(n),
        Stop::DurationNs(ns) => {
            let end = Deadline::after(release_ns, ns);
            while !end.past() {
                series.advance(DURATION_STEP);
            }
        }
    }
    let elapsed = elapsed_ns(start);
    series.check()?;
    let work = series.iterations();
    Ok(WorkOutput {
        work,
        elapsed_ns: elapsed,
        figures: figures([
            ("pi_error", series.error()),
            ("iter_per_s", per_second(work as f64, elapsed)),
        ]),
        latency: Default::default(),
    })
}

impl Kind for PiParams {
    fn name(&self) -> &'static str {
        "pi"
    }
    fn work_unit(&self) -> &'static str {
        "iterations"
    }
    fn stop(&self) -> Stop {
        self.stop
    }
    fn set_stop(&mut self, stop: Stop) {
        self.stop = stop;
    }
    fn scaled(&self, f: f64) -> Workload {
        Workload::Pi(PiParams {
            stop: scale_stop(self.stop, f),
        })
    }
    fn run(&self, ctx: &WorkContext) -> anyhow::Result<WorkOutput> {
        run(self, ctx.release_ns)
    }
    fn estimate_cpu_s(&self, rates: &Rates) -> f64 {
        stop_cost_s(self.stop, 1.0 / rates.pi_iter_per_s)
    }
    /// CPU at the calibrated pi rate.
    fn model(&self) -> ModelTask<'_> {
        ModelTask::Compute(Compute {
            rate: Rate::PiIter,
            calibrate: Scale::ONE,
            figure: ("iter_per_s", Scale::ONE),
        })
    }
}

/// The pi workload's registration.
pub const ENTRY: Entry = Entry {
    name: "pi",
    parse: |k| {
        k.only(&["iterations", "duration_s"])?;
        Ok(Workload::Pi(PiParams {
            stop: k.stop("iterations", 100_000_000)?,
        }))
    },
};

#[cfg(test)]
mod tests {
    use super::*;
    use std::f64::consts::PI;

    /// The series as first written, converting every index unsigned.
    fn leibniz_unsigned(start: u64, count: u64) -> f64 {
        let end = start.saturating_add(count);
        let mut sign = if start.is_multiple_of(2) { 1.0 } else { -1.0 };
        let (mut sum, mut k) = (0.0_f64, start);
        while k < end {
            sum += sign / (2.0 * k as f64 + 1.0);
            sign = -sign;
            k += 1;
        }
        4.0 * sum
    }

    #[test]
    fn the_signed_conversion_changes_no_bit() {
        for (start, count) in [
            (0, BLOCK),
            (12_345, 100_001),
            ((1 << 53) - 500, 1000),
            (i64::MAX as u64 - 600, 1000),
            (u64::MAX - 700, 1000),
        ] {
            assert_eq!(
                leibniz(start, count).to_bits(),
                leibniz_unsigned(start, count).to_bits(),
                "from {start}, {count} terms"
            );
        }
    }

    #[test]
    fn known_partial_sums() {
        assert_eq!(leibniz(0, 0), 0.0);
        assert_eq!(leibniz(0, 1), 4.0);
        assert!((leibniz(0, 2) - (4.0 - 4.0 / 3.0)).abs() < 1e-15);
        assert!((leibniz(0, 3) - (4.0 - 4.0 / 3.0 + 4.0 / 5.0)).abs() < 1e-15);
        // A single term at an odd index is negative.
        assert!((leibniz(1, 1) + 4.0 / 3.0).abs() < 1e-15);
        // After N terms the remainder π − S_N is 1/N to first order (the
        // next term is O(1/N³)), so S_1e6 sits 1e-6 below π.
        let big = leibniz(0, 1_000_000);
        assert!((PI - big - 1e-6).abs() < 1e-11, "{big}");
    }

    #[test]
    fn start_offset_is_additive() {
        for (a, b) in [(0, 5), (1, 1), (7, 1000), (12_345, 67_891)] {
            let split = leibniz(0, a) + leibniz(a, b);
            let whole = leibniz(0, a + b);
            assert!(
                (split - whole).abs() < 1e-12,
                "a={a} b={b}: {split} vs {whole}"
            );
        }
    }

    #[test]
    fn series_continues_across_blocks() {
        let mut s = PiSeries::new();
        s.advance(3);
        s.advance(BLOCK + 5);
        assert_eq!(s.iterations(), BLOCK + 8);
        assert!((s.estimate() - leibniz(0, BLOCK + 8)).abs() < 1e-12);
        s.check().unwrap();
    }

    #[test]
    fn check_rejects_wrong_estimate() {
        let s = PiSeries {
            next: 1_000_000,
            sum: 3.0,
        };
        let e = s.check().unwrap_err().to_string();
        assert!(e.contains("pi check failed"), "{e}");
    }

    #[test]
    fn run_work_mode() {
        let out = run(
            &PiParams {
                stop: Stop::Work(100_000),
            },
            None,
        )
        .unwrap();
        assert_eq!(out.work, 100_000);
        assert!(out.elapsed_ns > 0);
        assert!(out.figures["pi_error"] < 2.0 / 100_000.0);
        assert!(out.figures["iter_per_s"] > 0.0);
    }

    #[test]
    fn run_duration_mode() {
        let t = Instant::now();
        let out = run(
            &PiParams {
                stop: Stop::DurationNs(20_000_000),
            },
            None,
        )
        .unwrap();
        assert!(out.elapsed_ns >= 20_000_000);
        assert!(t.elapsed().as_secs_f64() < 1.0);
        assert!(
            out.work >= DURATION_STEP && out.work.is_multiple_of(DURATION_STEP),
            "{}",
            out.work
        );
        assert!(out.figures["pi_error"] < 2.0 / out.work as f64);
    }
}
