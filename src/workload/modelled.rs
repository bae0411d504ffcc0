//! How the scheduler model (`crate::sim`) represents a worker of a
//! workload kind: each kind's [`super::kind::Kind::model`] returns a
//! [`ModelTask`], the shape of its demand in the model's terms, and the
//! model, its calibration and the report's model section read only that.
//! A new kind the model can represent names one of these shapes in its own
//! file; a kind that returns [`ModelTask::Unmodelled`] (the default) is
//! skipped by the model with the reason given.

use super::copy::CopyParams;
use super::mixed::MixedParams;
use super::{Rates, SyncMode};

/// One worker of a workload as the model sees it.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelTask<'a> {
    /// Work on the CPU only, at one calibrated rate (pi, hash, matmul).
    Compute(Compute),
    /// A file copy: CPU at the copy rate, plus the storage device's time
    /// when it syncs.
    Copy(&'a CopyParams),
    /// Rounds of a pi burst and a copy.
    Mixed(&'a MixedParams),
    /// Wakes every `period_us` on a timer and runs `run_us`.
    Periodic { period_us: u64, run_us: u64 },
    /// Pairs passing a token: worker i hands off to worker i ^ 1.
    Pingpong,
    /// A synthesized replay: each worker's tree of tasks with their bursts,
    /// sleeps, wake-ups and forks (`crate::sim::replay`).
    Replay(&'a super::replay::ReplayParams),
    /// The model does not represent it: why (a run's skip reason).
    Unmodelled(String),
}

/// CPU-only work: the rate its cost is calibrated in, and the figure its
/// real loop reports.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Compute {
    /// The rate of [`Rates`] that one unit of its work is costed in.
    pub rate: Rate,
    /// The rate, from a run measured at w units of work per second.
    pub calibrate: Scale,
    /// The figure the real loop reports (name, and its value from work per
    /// second).
    pub figure: (&'static str, Scale),
}

/// `x × num / den`, in that order (the order the kinds compute it in).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scale {
    pub num: f64,
    pub den: f64,
}

impl Scale {
    /// The identity.
    pub const ONE: Scale = Scale { num: 1.0, den: 1.0 };

    pub fn of(self, x: f64) -> f64 {
        x * self.num / self.den
    }
}

/// One of the CPU speeds of [`Rates`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rate {
    PiIter,
    Hash,
    Flops,
    CopyBytes,
}

impl Rate {
    /// Its field's name in [`Rates`].
    pub fn name(self) -> &'static str {
        match self {
            Rate::PiIter => "pi_iter_per_s",
            Rate::Hash => "hash_per_s",
            Rate::Flops => "flops_per_s",
            Rate::CopyBytes => "copy_bytes_per_s",
        }
    }

    /// Set it in `rates`.
    pub fn set(self, rates: &mut Rates, value: f64) {
        match self {
            Rate::PiIter => rates.pi_iter_per_s = value,
            Rate::Hash => rates.hash_per_s = value,
            Rate::Flops => rates.flops_per_s = value,
            Rate::CopyBytes => rates.copy_bytes_per_s = value,
        }
    }
}

impl ModelTask<'_> {
    /// The CPU speed a run of it calibrates, and from its work per second
    /// how: CPU-only work and a copy that never syncs; None for the rest.
    pub fn calibrates(&self) -> Option<(Rate, Scale)> {
        match self {
            ModelTask::Compute(c) => Some((c.rate, c.calibrate)),
            ModelTask::Copy(c) if c.sync == SyncMode::None => Some((Rate::CopyBytes, Scale::ONE)),
            _ => None,
        }
    }

    /// Whether it wakes on a timer (its calibration prefers an RT run).
    pub fn is_periodic(&self) -> bool {
        matches!(self, ModelTask::Periodic { .. })
    }
}

/// The reason of a kind without a model.
pub fn unmodelled(kind: &str) -> ModelTask<'static> {
    ModelTask::Unmodelled(format!(
        "the model does not represent the {kind} workload yet"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scale_multiplies_then_divides() {
        assert_eq!(Scale::ONE.of(3.5), 3.5);
        assert_eq!(Scale { num: 6.0, den: 4.0 }.of(2.0), 3.0);
    }

    #[test]
    fn a_rate_sets_its_own_field() {
        let mut r = Rates {
            pi_iter_per_s: 0.0,
            hash_per_s: 0.0,
            flops_per_s: 0.0,
            copy_bytes_per_s: 0.0,
            wake_round_trip_s: 0.0,
        };
        for (rate, name) in [
            (Rate::PiIter, "pi_iter_per_s"),
            (Rate::Hash, "hash_per_s"),
            (Rate::Flops, "flops_per_s"),
            (Rate::CopyBytes, "copy_bytes_per_s"),
        ] {
            rate.set(&mut r, 7.0);
            assert_eq!(rate.name(), name);
            assert_eq!(serde_json::to_value(r).unwrap()[name], 7.0);
        }
    }
}
