//! The campaign's tracing instance between runs ([`TraceSlot`]): handed
//! from each traced run to the next (`trace::capture::Kept`), made on a
//! thread before the first run needs it, and removed on a thread once the
//! last run has recorded. Making an instance (its clock, its buffers) and
//! removing it each wait for RCU grace periods, about 50 ms in all on the
//! 2-CPU VM, during which the CPU is free: off the main thread, those waits
//! overlap the campaign's calibration and the storing of its last run.

use std::sync::Mutex;
use std::thread::JoinHandle;

use crate::trace::capture::Kept;

enum Held {
    /// A finished run's instance, or one made ahead and joined.
    Ready(Box<Kept>),
    /// Being made ahead of the first run.
    Making(JoinHandle<anyhow::Result<Kept>>),
}

/// The instance no run holds at the moment, and its removal once the
/// campaign is done with it.
#[derive(Default)]
pub struct TraceSlot {
    held: Mutex<Option<Held>>,
    removing: Mutex<Option<JoinHandle<()>>>,
}

impl TraceSlot {
    /// Starts making the instance on a thread with `make`; a run takes it
    /// with [`TraceSlot::take`]. An instance already held is kept.
    pub fn make_ahead(&self, make: impl FnOnce() -> anyhow::Result<Kept> + Send + 'static) {
        let Ok(mut held) = self.held.lock() else {
            return;
        };
        if held.is_some() {
            return;
        }
        // Best effort: a thread that cannot start leaves the first run to
        // make its instance itself.
        if let Ok(h) = std::thread::Builder::new()
            .name("trace-ahead".into())
            .spawn(make)
        {
            *held = Some(Held::Making(h));
        }
    }

    /// The instance for a run (taken: the run owns it until it hands it
    /// back with [`TraceSlot::keep`]), waiting for one being made. One
    /// that could not be made is `None`: the run makes its own, and says
    /// why that fails.
    pub fn take(&self) -> Option<Kept> {
        match self.held.lock().ok()?.take()? {
            Held::Ready(k) => Some(*k),
            Held::Making(h) => h.join().ok()?.ok(),
        }
    }

    /// Keeps a finished run's instance for the next run.
    pub fn keep(&self, kept: Kept) {
        if let Ok(mut held) = self.held.lock() {
            *held = Some(Held::Ready(Box::new(kept)));
        }
    }

    /// No run will record again: the instance is removed on a thread
    /// (dropping a `Kept` removes its instance), while the caller goes on.
    /// [`TraceSlot::removed`] waits for it.
    pub fn remove_in_background(&self) {
        let Some(held) = self.held.lock().ok().and_then(|mut h| h.take()) else {
            return;
        };
        let removal = std::thread::Builder::new()
            .name("trace-removal".into())
            .spawn(move || drop_held(held));
        // A thread that cannot start dropped the closure, and the
        // instance with it: removed on this thread.
        if let Ok(h) = removal
            && let Ok(mut r) = self.removing.lock()
        {
            *r = Some(h);
        }
    }

    /// Waits until a removal begun by [`TraceSlot::remove_in_background`]
    /// is over.
    pub fn removed(&self) {
        if let Some(h) = self.removing.lock().ok().and_then(|mut r| r.take()) {
            let _ = h.join();
        }
    }
}

fn drop_held(held: Held) {
    match held {
        Held::Ready(k) => drop(k),
        Held::Making(h) => drop(h.join()),
    }
}

impl Drop for TraceSlot {
    /// The instance is gone when the slot is: the campaign's trace guard,
    /// dropped after the launcher, finds nothing left to remove.
    fn drop(&mut self) {
        self.removed();
        if let Some(held) = self.held.get_mut().ok().and_then(Option::take) {
            drop_held(held);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_instance_that_could_not_be_made_leaves_the_run_to_make_its_own() {
        let slot = TraceSlot::default();
        slot.make_ahead(|| anyhow::bail!("no tracefs"));
        assert!(slot.take().is_none());
        // Taken: nothing is held any more.
        assert!(slot.take().is_none());
        slot.remove_in_background();
        slot.removed();
    }
}
