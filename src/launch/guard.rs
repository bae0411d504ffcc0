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

    /// Above RT workers, FIFO 99 (RT throttling bounds it should it spin).
    /// Above DEADLINE workers (`deadline_workers`), only SCHED_DEADLINE
    /// outranks them: 500 µs every 10 ms, first. If the kernel refuses
    /// (admission test, no privilege), FIFO 99; if that fails too, the
    /// parent stays as it is and relies on RT throttling to run.
    ///
    /// DEADLINE is not used otherwise: on Linux 6.18 a throttled DEADLINE
    /// parent was once seen never replenished (runtime −6 µs, its deadline
    /// long past, runnable on idle CPUs for 20 minutes), which hung the run.
    pub fn raise(deadline_workers: bool) -> ParentPriority {
        let Ok(original) = sched::get_attr(0) else {
            return Self::unchanged();
        };
        if deadline_workers
            && sched::set_attr(0, &SchedAttr::deadline(500_000, 10_000_000, 10_000_000)).is_ok()
        {
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
