//! [`TreeControl`]: what the WRR dispatcher does to a whole worker's
//! tree, through the worker's own groups only, turn after turn: stop and
//! continue it, list its tasks (for raising and lowering each one's
//! priority), read its CPU time and whether it still has processes.
//!
//! Stopping prefers the kernel's freezer over signals ([`Freezer`]:
//! cgroup2's `cgroup.freeze`, present in every non-root cgroup2 group
//! since Linux 5.2, with no controller enabled — so in the unified
//! hierarchy of a hybrid machine too; else the v1 freezer's
//! `freezer.state`), else SIGSTOP/SIGCONT to each process of
//! `cgroup.procs`. The freezer acts on the group, not on a list read a
//! moment earlier: a child forked while
//! the group is frozen is born frozen (kernel/cgroup/cgroup.c
//! `cgroup_post_fork`; v1: kernel/cgroup/legacy_freezer.c `freezer_fork`),
//! no parent sees its children stop (no SIGCHLD, no `wait` woken for a
//! stop as under SIGSTOP), and no pid is addressed that may have been
//! reused.
//!
//! CPU time: v1 `cpuacct.usage` (ns, the per-CPU counters summed, no
//! flush) when there is a cpuacct group, else cgroup2 `cpu.stat`
//! `usage_usec`. Both count the time of tasks that have already exited,
//! which a sum over the live tasks' schedstat would lose.

use std::path::{Path, PathBuf};

use super::files::{self, keyed_u64, parse_events, parse_pids};
use super::freezer::{Freezer, FreezerKind};
use crate::sys::events::PidFd;

/// How a tree is stopped and continued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopper {
    /// cgroup2 `cgroup.freeze`.
    FreezeV2,
    /// v1 `freezer.state`.
    FreezerV1,
    /// SIGSTOP/SIGCONT to each process of `cgroup.procs`.
    Signals,
}

impl Stopper {
    pub fn describe(self) -> &'static str {
        match self {
            Stopper::FreezeV2 => "cgroup2 cgroup.freeze",
            Stopper::FreezerV1 => "the v1 freezer (freezer.state)",
            Stopper::Signals => "SIGSTOP/SIGCONT to each process of cgroup.procs",
        }
    }
}

/// The groups of one worker's tree, as the dispatcher uses them. Cheap to
/// clone: paths only; the [`super::TreeGroup`] that made the groups owns
/// and removes them.
#[derive(Debug, Clone)]
pub struct TreeControl {
    v2: Option<PathBuf>,
    freezer: Option<PathBuf>,
    cpuacct: Option<PathBuf>,
    /// The group whose member lists are read (v2's, else the first v1 one).
    members: PathBuf,
}

impl Stopper {
    /// The stopper of a tree with this freezer (signals without one).
    fn of(freezer: Option<FreezerKind>) -> Stopper {
        match freezer {
            Some(FreezerKind::V2) => Stopper::FreezeV2,
            Some(FreezerKind::V1) => Stopper::FreezerV1,
            None => Stopper::Signals,
        }
    }
}

impl TreeControl {
    pub(super) fn new(
        v2: Option<PathBuf>,
        freezer: Option<PathBuf>,
        cpuacct: Option<PathBuf>,
        members: PathBuf,
    ) -> TreeControl {
        TreeControl {
            v2,
            freezer,
            cpuacct,
            members,
        }
    }

    /// The group whose member lists are read.
    pub fn dir(&self) -> &Path {
        &self.members
    }

    /// The tree's freezer (see [`Freezer::of`]): None, signals.
    fn freezer(&self) -> Option<Freezer> {
        Freezer::of(self.v2.as_deref(), self.freezer.as_deref())
    }

    /// How this tree is stopped and continued.
    pub fn stopper(&self) -> Stopper {
        Stopper::of(self.freezer().map(|f| f.kind()))
    }

    /// Stops (`on`) or continues the whole tree. The freezer returns once
    /// asked (the tasks stop as they next leave the kernel, as under
    /// SIGSTOP; [`frozen`](Self::frozen) says when all have); signals go
    /// to each process of the group, none outside it.
    pub fn stop(&self, on: bool) -> std::io::Result<()> {
        match self.freezer() {
            Some(f) => f
                .set(on)
                .map_err(|e| std::io::Error::other(format!("{e:#}"))),
            None => self.signal_each(if on { libc::SIGSTOP } else { libc::SIGCONT }),
        }
    }

    /// Whether every task of the tree is stopped: frozen, or (signals)
    /// every process in state 'T'. None when it cannot be told.
    pub fn frozen(&self) -> Option<bool> {
        match self.freezer() {
            Some(f) => f.frozen(),
            None => Some(self.procs().iter().all(|&p| {
                matches!(
                    crate::sys::procstat::read_stat(p).map(|s| s.state),
                    None | Some('T' | 't' | 'Z' | 'X')
                )
            })),
        }
    }

    /// `sig` to each process of the group: each is held by a pidfd opened
    /// before the group's list is read again, and only those still listed
    /// are signalled, so a pid reused outside the group is never hit.
    /// ESRCH when the group has no process left.
    pub fn signal_each(&self, sig: i32) -> std::io::Result<()> {
        let before = self.procs();
        if before.is_empty() {
            return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
        }
        let held: Vec<(i32, PidFd)> = before
            .into_iter()
            .filter_map(|p| PidFd::open(p).ok().map(|fd| (p, fd)))
            .collect();
        let still = self.procs();
        for (pid, fd) in held.iter().filter(|(p, _)| still.contains(p)) {
            match fd.signal(sig) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
                Err(e) => {
                    return Err(std::io::Error::new(
                        e.kind(),
                        format!(
                            "signal {sig} to pid {pid} of {}: {e}",
                            self.members.display()
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// The processes of the tree now.
    pub fn procs(&self) -> Vec<i32> {
        files::procs(&self.members)
    }

    /// Every task (thread) of the tree now: v2 `cgroup.threads`, v1
    /// `tasks`.
    pub fn threads(&self) -> Vec<i32> {
        let name = match self.v2.is_some() {
            true => "cgroup.threads",
            false => "tasks",
        };
        files::read(&self.members, name)
            .map(|t| parse_pids(&t))
            .unwrap_or_default()
    }

    /// Whether any process of the tree is left (v2 `cgroup.events`, else a
    /// non-empty `cgroup.procs`).
    pub fn populated(&self) -> bool {
        if let Some(v2) = &self.v2
            && let Some(e) = files::read(v2, "cgroup.events")
                .ok()
                .and_then(|t| parse_events(&t))
        {
            return e.populated;
        }
        !self.procs().is_empty()
    }

    /// CPU time of every task the tree ever had, ns: v1 `cpuacct.usage`,
    /// else cgroup2 `cpu.stat` (µs). None when neither can be read.
    pub fn usage_ns(&self) -> Option<u64> {
        if let Some(acct) = &self.cpuacct
            && let Some(ns) = files::read(acct, "cpuacct.usage")
                .ok()
                .and_then(|t| t.trim().parse().ok())
        {
            return Some(ns);
        }
        let v2 = self.v2.as_ref()?;
        let text = files::read(v2, "cpu.stat").ok()?;
        keyed_u64(&text, "usage_usec")?.checked_mul(1000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_freezer_is_preferred_to_signals() {
        assert_eq!(Stopper::of(Some(FreezerKind::V2)), Stopper::FreezeV2);
        assert_eq!(Stopper::of(Some(FreezerKind::V1)), Stopper::FreezerV1);
        assert_eq!(Stopper::of(None), Stopper::Signals);
    }

    /// Plain directories stand for the groups: the files are what the
    /// kernel would show, so the readers are checked without cgroupfs.
    #[test]
    fn readers_over_group_files() {
        let tmp = tempfile::tempdir().unwrap();
        let v2 = tmp.path().join("v2");
        let acct = tmp.path().join("acct");
        std::fs::create_dir(&v2).unwrap();
        std::fs::create_dir(&acct).unwrap();
        std::fs::write(v2.join("cgroup.procs"), "10\n12\n").unwrap();
        std::fs::write(v2.join("cgroup.threads"), "10\n11\n12\n").unwrap();
        std::fs::write(v2.join("cgroup.events"), "populated 1\nfrozen 0\n").unwrap();
        std::fs::write(v2.join("cgroup.freeze"), "0").unwrap();
        std::fs::write(v2.join("cpu.stat"), "usage_usec 1500\nuser_usec 1000\n").unwrap();
        let c = TreeControl::new(Some(v2.clone()), None, None, v2.clone());
        assert_eq!(c.stopper(), Stopper::FreezeV2);
        assert_eq!(c.procs(), vec![10, 12]);
        assert_eq!(c.threads(), vec![10, 11, 12]);
        assert!(c.populated());
        assert_eq!(c.frozen(), Some(false));
        assert_eq!(c.usage_ns(), Some(1_500_000));
        c.stop(true).unwrap();
        assert_eq!(
            std::fs::read_to_string(v2.join("cgroup.freeze")).unwrap(),
            "1"
        );
        // cpuacct's nanoseconds win over cpu.stat's microseconds.
        std::fs::write(acct.join("cpuacct.usage"), "1500123\n").unwrap();
        let c = TreeControl::new(Some(v2.clone()), None, Some(acct), v2.clone());
        assert_eq!(c.usage_ns(), Some(1_500_123));
        std::fs::write(v2.join("cgroup.events"), "populated 0\nfrozen 0\n").unwrap();
        assert!(!c.populated());
        // v1 only: `tasks`, and no group without a freezer file.
        let v1 = tmp.path().join("v1");
        std::fs::create_dir(&v1).unwrap();
        std::fs::write(v1.join("tasks"), "7\n8\n").unwrap();
        std::fs::write(v1.join("freezer.state"), "THAWED\n").unwrap();
        let c = TreeControl::new(None, Some(v1.clone()), None, v1.clone());
        assert_eq!(c.stopper(), Stopper::FreezerV1);
        assert_eq!(c.threads(), vec![7, 8]);
        assert_eq!(c.usage_ns(), None);
        c.stop(true).unwrap();
        assert_eq!(c.frozen(), Some(true));
        // Signals to an empty group: ESRCH, nobody addressed.
        let empty = tmp.path().join("empty");
        std::fs::create_dir(&empty).unwrap();
        std::fs::write(empty.join("cgroup.procs"), "").unwrap();
        let c = TreeControl::new(None, None, None, empty);
        assert_eq!(c.stopper(), Stopper::Signals);
        let err = c.stop(true).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ESRCH));
    }
}
