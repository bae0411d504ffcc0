//! A `command` worker's whole process tree as the user-space dispatcher
//! acts on it: every task of the worker's cgroup, those forked after the
//! run started included, and nothing outside it.
//!
//! * Signals: the tree is frozen and thawed as one (cgroup2
//!   `cgroup.freeze`, else the v1 freezer, else SIGSTOP/SIGCONT to each
//!   process of the group: [`TreeControl::stop`] says why in that order).
//!   A child forked while its group is frozen is born frozen.
//! * Fifo: every task of the group (`cgroup.threads`, v1 `tasks`, read
//!   again at every turn) is raised to `base + 1` or lowered to `base`. A
//!   child inherits its parent's policy and priority at fork (no
//!   `SCHED_RESET_ON_FORK` is set), so one forked during a turn is at
//!   `base + 1` and one forked while the tree waits is at `base`. Lowering
//!   and restoring read the list again until a reading shows no task not
//!   yet changed ([`cover_all`]): every task alive at that last reading
//!   was already lowered, so whatever forks later inherits the lower
//!   priority, and no task of the tree keeps `base + 1` past its turn.
//!   (The tree's tasks inherit the worker's CPU and the dispatcher's thread
//!   runs above them there, so in practice none can fork during a pass;
//!   the re-reading covers a task that moved itself to another CPU.)
//!
//! Tasks are addressed by the ids the group lists. A thread id read there
//! could in principle be reused by a task outside the group between the
//! reading and the change (the kernel offers no thread descriptor for
//! `sched_setattr`); that needs the id space (`kernel.pid_max`) to wrap
//! in those microseconds. Processes are signalled through pidfds checked
//! against the group (`TreeControl::signal_each`), which closes that gap.

use std::collections::HashSet;
use std::io;

use crate::sys::cgroup::TreeControl;
use crate::sys::sched::{self, SCHED_FIFO, SCHED_OTHER, SchedAttr};

/// How many readings of the tree a lowering or restoring may take before
/// giving up: a tree forking faster than it can be read (not possible
/// while its tasks share the dispatcher's CPU).
const MAX_READINGS: usize = 64;

/// What the tree is doing, for the end of a slice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TreeState {
    /// No process left in the group.
    Empty,
    /// Some task is runnable ('R').
    Runnable,
    /// Every task is asleep, stopped or frozen.
    Asleep,
}

/// The tree's state from its tasks' state letters.
pub fn state_of(letters: &[char]) -> TreeState {
    if letters.is_empty() {
        TreeState::Empty
    } else if letters.contains(&'R') {
        TreeState::Runnable
    } else {
        TreeState::Asleep
    }
}

/// The tree's state now.
pub fn state(tree: &TreeControl) -> TreeState {
    let letters: Vec<char> = tree
        .threads()
        .into_iter()
        .filter_map(|tid| crate::sys::procstat::read_stat(tid).map(|s| s.state))
        .filter(|c| !matches!(c, 'Z' | 'X' | 'x'))
        .collect();
    match (state_of(&letters), tree.populated()) {
        // Only zombies left, or the reading raced the last exit.
        (TreeState::Empty, true) => TreeState::Asleep,
        (s, _) => s,
    }
}

/// `act` on every id `read` lists, reading again until a reading lists
/// none not acted on yet. An id that `act` finds gone (ESRCH) counts as
/// done. Returns how many ids were acted on; ESRCH when the first reading
/// is empty; an error after [`MAX_READINGS`] readings that each brought
/// new ids.
pub fn cover_all(
    mut read: impl FnMut() -> Vec<i32>,
    mut act: impl FnMut(i32) -> io::Result<()>,
) -> io::Result<usize> {
    let mut done: HashSet<i32> = HashSet::new();
    for _ in 0..MAX_READINGS {
        let fresh: Vec<i32> = read().into_iter().filter(|t| !done.contains(t)).collect();
        if fresh.is_empty() {
            return match done.is_empty() {
                true => Err(io::Error::from_raw_os_error(libc::ESRCH)),
                false => Ok(done.len()),
            };
        }
        for tid in fresh {
            match act(tid) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
                Err(e) => return Err(io::Error::new(e.kind(), format!("task {tid}: {e}"))),
            }
            done.insert(tid);
        }
    }
    Err(io::Error::other(format!(
        "new tasks kept appearing in the tree over {MAX_READINGS} readings"
    )))
}

/// `attr` to every task of the tree (see [`cover_all`]).
pub fn set_each(tree: &TreeControl, attr: &SchedAttr) -> io::Result<()> {
    cover_all(|| tree.threads(), |tid| sched::set_attr(tid, attr)).map(|_| ())
}

/// Every task of the tree pinned to `cpu`.
pub fn pin_each(tree: &TreeControl, cpu: usize) -> io::Result<()> {
    let set = sched::cpu_set(&[cpu]);
    cover_all(
        || tree.threads(),
        |tid| sched::set_affinity_raw(tid, &set).map_err(io::Error::from_raw_os_error),
    )
    .map(|_| ())
}

/// Raise the tree to `base + 1` (its turn), lower it to `base`, or give
/// it back as SCHED_OTHER nice 0.
pub fn fifo(tree: &TreeControl, priority: Option<u32>) -> io::Result<()> {
    match priority {
        Some(p) => set_each(tree, &SchedAttr::realtime(SCHED_FIFO, p)),
        None => set_each(tree, &SchedAttr::fair(SCHED_OTHER, 0)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    #[test]
    fn states() {
        assert_eq!(state_of(&[]), TreeState::Empty);
        assert_eq!(state_of(&['S', 'R', 'S']), TreeState::Runnable);
        assert_eq!(state_of(&['S', 'T', 'D']), TreeState::Asleep);
    }

    /// A child forked while the pass runs (it appears in the second
    /// reading) is changed too, and the pass ends on a reading with
    /// nothing new.
    #[test]
    fn a_task_forked_during_a_pass_is_covered() {
        let tree = RefCell::new(vec![1, 2]);
        let readings = RefCell::new(0);
        let acted = RefCell::new(Vec::new());
        let n = cover_all(
            || {
                *readings.borrow_mut() += 1;
                tree.borrow().clone()
            },
            |tid| {
                acted.borrow_mut().push(tid);
                if tid == 2 && !tree.borrow().contains(&3) {
                    tree.borrow_mut().push(3); // task 2 forks task 3
                }
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(n, 3);
        assert_eq!(*acted.borrow(), vec![1, 2, 3]);
        assert_eq!(*readings.borrow(), 3, "the last reading finds nothing new");
    }

    #[test]
    fn gone_tasks_empty_trees_and_errors() {
        // A task that exited between the reading and the change is done.
        let r = cover_all(
            || vec![5, 6],
            |tid| match tid {
                5 => Err(io::Error::from_raw_os_error(libc::ESRCH)),
                _ => Ok(()),
            },
        );
        assert_eq!(r.unwrap(), 2);
        // An empty tree is ESRCH, as a process that has exited.
        let r = cover_all(Vec::new, |_| Ok(()));
        assert_eq!(r.unwrap_err().raw_os_error(), Some(libc::ESRCH));
        // Any other error stops the pass and names the task.
        let r = cover_all(
            || vec![7],
            |_| Err(io::Error::from_raw_os_error(libc::EPERM)),
        );
        let e = r.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied);
        assert!(e.to_string().contains("task 7"), "{e}");
        // A tree that never stops forking is given up on.
        let next = RefCell::new(100);
        let r = cover_all(
            || {
                *next.borrow_mut() += 1;
                vec![*next.borrow()]
            },
            |_| Ok(()),
        );
        assert!(r.unwrap_err().to_string().contains("kept appearing"));
    }

    /// Children inherit the policy at fork (kernel/sched/core.c
    /// `sched_fork`: the parent's policy and priority are kept unless
    /// `sched_reset_on_fork`) because neither the dispatcher nor the
    /// sched_ext paths (schedlab's WRR `ext`, another program's
    /// scheduler of `matrix.ext_scheduler`) ask the kernel to reset them.
    #[test]
    fn the_policies_set_are_inherited_at_fork() {
        use crate::sys::sched::SCHED_FLAG_RESET_ON_FORK;
        for attr in [
            SchedAttr::realtime(SCHED_FIFO, 2),
            SchedAttr::fair(SCHED_OTHER, 0),
            SchedAttr::new(crate::sys::scx::SCHED_EXT),
            SchedAttr::fair(crate::sys::scx::SCHED_EXT, 5),
        ] {
            assert_eq!(attr.sched_flags & SCHED_FLAG_RESET_ON_FORK, 0, "{attr:?}");
        }
    }
}
