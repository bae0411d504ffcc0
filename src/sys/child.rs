//! What a child process does between `fork` and `exec`, described as data
//! and carried out by async-signal-safe system calls only: unblock signals,
//! die with the parent, take a process group (or session) of its own, move descriptors,
//! keep descriptors open across `exec`, and take a scheduling policy and CPU
//! affinity. The one `pre_exec` closure
//! of schedlab lives here, so no other module needs `unsafe` to start a
//! process.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;

use crate::sys::{proc, sched};

/// Which system call the kernel refused when applying a policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// `sched_setattr`.
    Attr,
    /// `sched_setaffinity`.
    Affinity,
}

/// What the child does before `exec`, in this order.
#[derive(Clone, Default)]
pub struct ChildSetup {
    /// Unblock every signal (the parent blocks its control signals).
    pub unblock_signals: bool,
    /// `PR_SET_PDEATHSIG` SIGKILL: die when the parent dies.
    pub die_with_parent: bool,
    /// A process group of its own (so signals to the parent's group miss it).
    pub own_process_group: bool,
    /// A session of its own (a process group too, and no controlling
    /// terminal), in place of `own_process_group`: for a worker that
    /// becomes another program, which must not reach schedlab's terminal.
    pub own_session: bool,
    /// `dup2(from, to)` for each, in order (the copies stay open across
    /// `exec`). No `from` may be an earlier pair's `to`: keep the sources
    /// above the targets (see `fds::at_least`).
    pub move_fds: Vec<(i32, i32)>,
    /// Descriptors kept open across `exec` (the workload's channels); none
    /// may be a `move_fds` target.
    pub keep_fds: Vec<i32>,
    /// The scheduling policy and parameters.
    pub attr: Option<sched::SchedAttr>,
    /// The CPU affinity.
    pub affinity: Option<libc::cpu_set_t>,
}

/// Applies the policy and the affinity to thread `tid` (0: the caller).
/// A DEADLINE policy needs the wide affinity first; leaving DEADLINE for a
/// narrow affinity needs the policy first. Async-signal-safe (system calls
/// only): usable between fork and exec.
pub fn apply_sched_raw(
    tid: i32,
    attr: Option<&sched::SchedAttr>,
    set: Option<&libc::cpu_set_t>,
) -> Result<(), (Step, i32)> {
    let affinity_first = attr.is_some_and(|a| a.sched_policy == sched::SCHED_DEADLINE);
    let set_attr = || match attr {
        Some(a) => sched::set_attr_raw(tid, a).map_err(|e| (Step::Attr, e)),
        None => Ok(()),
    };
    let set_affinity = || match set {
        Some(s) => sched::set_affinity_raw(tid, s).map_err(|e| (Step::Affinity, e)),
        None => Ok(()),
    };
    if affinity_first {
        set_affinity()?;
        set_attr()
    } else {
        set_attr()?;
        set_affinity()
    }
}

/// A failure between fork and exec reaches the parent as the errno of
/// `Command::spawn`; which scheduling step failed is encoded above bit 16,
/// so that it is told apart from any other failure (and from `exec`'s).
const STEP_SHIFT: i32 = 16;

pub fn encode_step(step: Step, errno: i32) -> i32 {
    let code = match step {
        Step::Attr => 1,
        Step::Affinity => 2,
    };
    (code << STEP_SHIFT) | (errno & 0xffff)
}

/// The step and errno of an encoded failure; None for a plain errno.
pub fn decode_step(raw: i32) -> Option<(Step, i32)> {
    let errno = raw & 0xffff;
    match raw >> STEP_SHIFT {
        1 => Some((Step::Attr, errno)),
        2 => Some((Step::Affinity, errno)),
        _ => None,
    }
}

/// The errno of a spawn failure, with the step when it was a scheduling one.
pub fn spawn_failure(e: &io::Error) -> (Option<Step>, Option<i32>) {
    match e.raw_os_error() {
        Some(raw) => match decode_step(raw) {
            Some((step, errno)) => (Some(step), Some(errno)),
            None => (None, Some(raw)),
        },
        None => (None, None),
    }
}

/// Make `cmd` carry out `setup` in the child before `exec`.
pub fn configure(cmd: &mut Command, setup: ChildSetup) {
    let os = io::Error::from_raw_os_error;
    let run = move || -> io::Result<()> {
        if setup.unblock_signals {
            proc::unblock_all_raw().map_err(os)?;
        }
        if setup.die_with_parent {
            proc::die_with_parent_raw().map_err(os)?;
        }
        if setup.own_session {
            proc::own_session_raw().map_err(os)?;
        } else if setup.own_process_group {
            proc::own_process_group_raw().map_err(os)?;
        }
        for &(from, to) in &setup.move_fds {
            proc::dup2_raw(from, to).map_err(os)?;
        }
        for &fd in &setup.keep_fds {
            crate::sys::fds::keep_across_exec_raw(fd).map_err(os)?;
        }
        apply_sched_raw(0, setup.attr.as_ref(), setup.affinity.as_ref())
            .map_err(|(step, errno)| os(encode_step(step, errno)))
    };
    // SAFETY: the closure runs in the forked child before exec. It only
    // reads `setup` (moved in, no allocation) and makes system calls, which
    // are async-signal-safe: no allocation, no locks, no other thread's state.
    unsafe {
        cmd.pre_exec(run);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_survive_the_errno_channel() {
        for step in [Step::Attr, Step::Affinity] {
            for errno in [libc::EPERM, libc::EINVAL, libc::EBUSY] {
                assert_eq!(decode_step(encode_step(step, errno)), Some((step, errno)));
            }
        }
        assert_eq!(decode_step(libc::ENOENT), None);
        assert_eq!(decode_step(libc::EACCES), None);
    }

    #[test]
    fn a_child_takes_its_setup_before_exec() {
        let mut cmd = Command::new("/bin/true");
        configure(
            &mut cmd,
            ChildSetup {
                unblock_signals: true,
                own_process_group: true,
                ..ChildSetup::default()
            },
        );
        assert!(cmd.status().unwrap().success());
        // An impossible policy fails the spawn with the step encoded.
        let mut bad = Command::new("/bin/true");
        let mut attr = sched::SchedAttr::fair(sched::SCHED_OTHER, 0);
        attr.sched_policy = 12345;
        configure(
            &mut bad,
            ChildSetup {
                attr: Some(attr),
                ..ChildSetup::default()
            },
        );
        let e = bad.spawn().unwrap_err();
        assert_eq!(spawn_failure(&e), (Some(Step::Attr), Some(libc::EINVAL)));
    }
}
