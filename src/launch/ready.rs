//! Waiting, before release, until the workers that become programs
//! (`kind = "command"`) wait at the barrier. A program's tree is measured
//! from release (its wall time and, through its cgroup, its CPU time), so
//! its worker's start-up (schedlab's exec, loading and setup: a few ms on
//! this machine, half a second or more under QEMU without KVM) must be
//! over by then, or it would count as the program's. schedlab's own
//! workers measure themselves from after the barrier and are not waited
//! for.

use std::time::{Duration, Instant};

use crate::sys::{proc, procfs};

use super::Early;

/// How long the workers may take to reach the barrier before the run goes
/// on without waiting longer (the start-up then counts, as it did before).
const READY_WAIT: Duration = Duration::from_secs(10);
/// How often they are looked at meanwhile.
const POLL: Duration = Duration::from_millis(1);

/// Whether worker `index`, whose `/proc/PID/comm` and state letter are
/// `comm` and `state`, needs no more waiting for: it named itself
/// `schedlab-wN` (its last step before the barrier) and sleeps (on the
/// barrier: nothing else puts it to sleep after the naming), or it is gone
/// (the run reports why).
fn at_barrier(index: usize, comm: Option<&str>, state: Option<char>) -> bool {
    let name = format!("schedlab-w{index}");
    // The kernel keeps 15 bytes of a name.
    let named = comm.is_some_and(|c| c == &name[..name.len().min(15)]);
    match state {
        None | Some('Z' | 'X' | 'x') => true,
        Some('S') => named,
        Some(_) => false,
    }
}

/// Waits until each of `workers` ((index, pid)) is at the barrier, at
/// most [`READY_WAIT`]; a stop signal (Ctrl-C) ends the run.
pub fn wait_at_barrier(workers: &[(usize, i32)], signals: &libc::sigset_t) -> Result<(), Early> {
    let deadline = Instant::now() + READY_WAIT;
    let mut waiting: Vec<(usize, i32)> = workers.to_vec();
    loop {
        waiting.retain(|&(index, pid)| {
            !at_barrier(index, procfs::comm(pid).as_deref(), procfs::state(pid))
        });
        if waiting.is_empty() || Instant::now() >= deadline {
            return Ok(());
        }
        if let Some(sig) = proc::pending_stop_signal_within(signals, POLL) {
            return Err(Early::Interrupted(sig));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_is_at_the_barrier_once_named_and_asleep() {
        // Still loading: the re-executed binary's name, or running.
        assert!(!at_barrier(3, Some("exe"), Some('S')));
        assert!(!at_barrier(3, Some("schedlab-w3"), Some('R')));
        assert!(!at_barrier(3, Some("schedlab-w3"), Some('D')));
        assert!(at_barrier(3, Some("schedlab-w3"), Some('S')));
        // Another worker's name is not this one's.
        assert!(!at_barrier(3, Some("schedlab-w31"), Some('S')));
        // Names past 15 bytes are cut by the kernel.
        assert!(at_barrier(123_456, Some("schedlab-w12345"), Some('S')));
        // Gone or dead: nothing to wait for.
        assert!(at_barrier(3, None, None));
        assert!(at_barrier(3, Some("schedlab-w3"), Some('Z')));
    }
}
