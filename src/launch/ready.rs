//! Waiting, before release, until the workers whose start-up would
//! otherwise count in what is measured wait at the barrier:
//! - programs (`kind = "command"`): a program's tree is measured from
//!   release (its wall time and, through its cgroup, its CPU time), so its
//!   worker's start-up (schedlab's exec, loading and setup: a few ms on this
//!   machine, half a second or more under QEMU without KVM) must be over by
//!   then, or it would count as the program's;
//! - the processes of cooperating groups (messaging, pingpong, ...): a
//!   worker waits for its peers' messages, so a peer still loading after
//!   release would stretch every peer's time, and the run's makespan would
//!   count the start-ups competing for the CPUs (with 160 messaging
//!   workers on 2 CPUs, a fifth of the run's CPU went to the loading of
//!   late workers). hackbench likewise starts its clock once every child
//!   is ready.
//!
//! Other workers of schedlab's own measure themselves from after the
//! barrier and are not waited for.

use std::time::{Duration, Instant};

use crate::sys::{proc, procfs};

use super::Early;
use super::members::Role;
use crate::workload::Workload;

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

/// Whether a member of `role` running `workload` is waited for at the
/// barrier before release (see the module docs).
pub fn waited_for(role: Role, workload: &Workload) -> bool {
    role == Role::Worker && (workload.is_command() || workload.group_size() > 1)
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

    fn workload(kind: &str, text: &str) -> Workload {
        let table: toml::Table = text.parse().unwrap();
        crate::workload::registry::parse("w", kind, &table).unwrap()
    }

    #[test]
    fn programs_and_groups_are_waited_for_and_lone_workers_and_hogs_not() {
        let messaging = workload("messaging", "senders = 1\nreceivers = 1");
        let pingpong = workload("pingpong", "");
        let pi = workload("pi", "duration_s = 1");
        assert!(waited_for(Role::Worker, &messaging));
        assert!(waited_for(Role::Worker, &pingpong));
        assert!(!waited_for(Role::Worker, &pi));
        // A hog never waits at the barrier: waiting for it would time out.
        assert!(!waited_for(Role::Hog, &pi));
        assert!(!waited_for(Role::Hog, &messaging));
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
