//! Raising schedlab above its real-time workers while it waits for them, and
//! putting it back afterwards (also when the wait fails).

use crate::sys::sched::{self, SchedAttr};

/// The parent's scheduling while a run of RT or DEADLINE workers goes on.
/// Dropping it restores the original policy.
pub struct ParentPriority {
    original: Option<SchedAttr>,
    /// What the parent runs as meanwhile, for logs ("deadline", "fifo 99").
    pub label: &'static str,
}

impl ParentPriority {
    pub fn unchanged() -> ParentPriority {
        ParentPriority {
            original: None,
            label: "unchanged",
        }
    }

    /// SCHED_DEADLINE (500 µs every 10 ms) outranks every FIFO/RR priority,
    /// including 99, and its small reservation keeps the parent from taking
    /// more than 5% of a CPU even if it spun. If the kernel refuses it
    /// (admission test, no privilege), FIFO 99; if that fails too, the parent
    /// stays as it is and relies on RT throttling to run.
    pub fn raise() -> ParentPriority {
        let Ok(original) = sched::get_attr(0) else {
            return Self::unchanged();
        };
        if sched::set_attr(0, &SchedAttr::deadline(500_000, 10_000_000, 10_000_000)).is_ok() {
            return ParentPriority {
                original: Some(original),
                label: "deadline 0.5/10 ms",
            };
        }
        if sched::set_attr(0, &SchedAttr::realtime(sched::SCHED_FIFO, 99)).is_ok() {
            return ParentPriority {
                original: Some(original),
                label: "fifo 99",
            };
        }
        Self::unchanged()
    }
}

impl Drop for ParentPriority {
    fn drop(&mut self) {
        if let Some(mut attr) = self.original.take() {
            attr.size = std::mem::size_of::<SchedAttr>() as u32;
            attr.sched_flags = 0;
            let _ = sched::set_attr(0, &attr);
        }
    }
}
