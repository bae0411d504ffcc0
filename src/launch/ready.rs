//! Waiting, before release, until every worker waits at the barrier, so
//! that no worker's start-up (schedlab's exec, loading and setup: a few ms
//! on this machine, hundreds of ms under QEMU without KVM) runs inside what
//! is measured:
//! - programs (`kind = "command"`): a program's tree is measured from
//!   release (its wall time and, through its cgroup, its CPU time), so its
//!   start-up would count as the program's;
//! - the processes of cooperating groups (messaging, pingpong, ...): a
//!   worker waits for its peers' messages, so a peer still loading after
//!   release would stretch every peer's time, and the run's makespan would
//!   count the start-ups competing for the CPUs (with 160 messaging
//!   workers on 2 CPUs, a fifth of the run's CPU went to the loading of
//!   late workers). hackbench likewise starts its clock once every child
//!   is ready;
//! - lone workers: their work competes for the CPUs from release, and a
//!   fixed `duration_s` ends at release + duration for all. A worker still
//!   loading at release takes the CPU from the others' measured work with
//!   its loading, and loses its own window: in a Debian 6.1 guest under
//!   TCG, nice 5 beside nice 0 on one CPU reached its work 0.3–0.4 s after
//!   release (it loaded with a quarter of the CPU while nice 0 worked), past
//!   the 0.4 s window, so nice 0 got 0.93–0.99 of their measured CPU time
//!   where the kernel's own accounting over nice 0's window gave it
//!   0.73–0.76 (the weight table: 0.7535).
//!
//! Hogs do not wait at the barrier; they are spawned once the workers wait
//! there (launch::spawned), so that an RT hog cannot hold up their loading.

use std::time::{Duration, Instant};

use crate::sys::{proc, procfs};

use super::Early;
use super::members::Role;

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

/// Whether a member of `role` is waited for at the barrier before release:
/// every worker (see the module docs); a hog never waits at the barrier,
/// so waiting for it would time out.
pub fn waited_for(role: Role) -> bool {
    role == Role::Worker
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
    fn every_worker_is_waited_for_and_no_hog() {
        assert!(waited_for(Role::Worker));
        assert!(!waited_for(Role::Hog));
    }

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
