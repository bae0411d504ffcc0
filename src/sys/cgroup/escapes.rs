//! Processes that left their tree's groups while alive: a program can
//! write its own pid into another group's `cgroup.procs` (as root, or into
//! a group it may write), and from then on its tree looks empty (or, when
//! it left cgroup2 alone, ends early) while it runs on, unmeasured and
//! outliving the run.
//!
//! A tree's processes are known four ways, each with its start time so
//! that a recycled pid is never taken for one of them: every process seen
//! in the group while the tree ran (noted with its members, every 20 ms);
//! every process still in one of the tree's other groups (one that left
//! cgroup2 alone is still in the v1 ones); every live process of the top's
//! process group (every worker leads its own) started since the top, that
//! schedlab did not start itself (a child that left at once, whose parent
//! has exited since); and every
//! live descendant of those started since the top. One that is alive and
//! outside the session's groups (cgroup2's membership, else the tree's
//! first group) has escaped; it is killed through a process descriptor
//! opened and checked against its start time, so no other process can be
//! hit.
//!
//! Not seen: a process that left within 20 ms of its start, changed its
//! process group (`setsid`, `setpgid`), and whose parent was gone by the
//! check (it was reparented away from the tree).

use std::collections::{BTreeMap, HashMap};

use super::files::procs;
use super::group::TreeGroup;
use crate::sys::events::PidFd;
use crate::sys::procfs::{self, Lineage};

/// A process outside its tree's groups: pid, start time (ticks after
/// boot), and its command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Escaped {
    pub pid: i32,
    pub start_ticks: u64,
    pub command: String,
}

/// Where a tree's processes are looked for among all live ones.
pub struct Search<'a> {
    /// Processes known to be the tree's: pid → start time.
    pub known: &'a BTreeMap<i32, u64>,
    /// The top's process group, and its start time: processes of that
    /// group started since are the tree's unless schedlab started them.
    pub pgrp: i32,
    pub since_ticks: u64,
    /// schedlab's pid: its own children (workers, hogs, helpers) are not
    /// any tree's descendants by the group rule.
    pub schedlab: i32,
}

/// The tree's live processes by the rules of [`Search`], given every live
/// process: pid → start time.
pub fn tree_of(s: &Search, all: &HashMap<i32, Lineage>) -> BTreeMap<i32, u64> {
    let mut out: BTreeMap<i32, u64> = s
        .known
        .iter()
        .filter(|&(pid, start)| all.get(pid).is_some_and(|l| l.start_ticks == *start))
        .map(|(&p, &t)| (p, t))
        .collect();
    for (&pid, l) in all {
        if l.pgrp == s.pgrp
            && l.start_ticks >= s.since_ticks
            && l.ppid != s.schedlab
            && pid != s.schedlab
        {
            out.insert(pid, l.start_ticks);
        }
    }
    let mut frontier: Vec<i32> = out.keys().copied().collect();
    while let Some(parent) = frontier.pop() {
        for (&pid, l) in all {
            if l.ppid == parent && l.start_ticks >= s.since_ticks && !out.contains_key(&pid) {
                out.insert(pid, l.start_ticks);
                frontier.push(pid);
            }
        }
    }
    out
}

/// Every live (not zombie) process.
fn live_processes() -> HashMap<i32, Lineage> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return HashMap::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| {
            let l = procfs::state_parent_start(pid)?;
            (l.state != 'Z' && l.state != 'X').then_some((pid, l))
        })
        .collect()
}

/// Whether process `pid` is in a group of the session named `session`
/// (the parent group's directory name) by its cgroup2 membership.
fn in_session_v2(pid: i32, session: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/cgroup")).is_ok_and(|t| {
        t.lines()
            .filter_map(|l| l.strip_prefix("0::"))
            .any(|path| path.split('/').any(|c| c == session))
    })
}

impl TreeGroup {
    /// Notes the processes in the group now with their start times.
    pub(super) fn note_processes(&self) {
        let now = self.dirs.procs();
        let Ok(mut seen) = self.seen.lock() else {
            return;
        };
        for pid in now {
            if let std::collections::btree_map::Entry::Vacant(v) = seen.entry(pid)
                && let Some(l) = procfs::state_parent_start(pid)
            {
                v.insert(l.start_ticks);
            }
        }
    }

    /// The tree's processes that are alive outside its counting group now.
    pub fn escaped(&self) -> Vec<Escaped> {
        let mut known = self.seen.lock().map(|s| s.clone()).unwrap_or_default();
        // Still in one of the tree's other groups: the tree's for sure.
        let mut in_v1 = std::collections::HashSet::new();
        for dir in self.dirs.all.iter().skip(1) {
            for pid in procs(dir) {
                if let Some(l) = procfs::state_parent_start(pid) {
                    known.entry(pid).or_insert(l.start_ticks);
                    in_v1.insert(pid);
                }
            }
        }
        // Every worker leads a process group (and, for a program, a
        // session) of its own: the top's pid.
        let Some((top, since)) = self.top.and_then(|t| Some((t, *known.get(&t)?))) else {
            return Vec::new();
        };
        let search = Search {
            known: &known,
            pgrp: top,
            since_ticks: since,
            schedlab: std::process::id() as i32,
        };
        self.outside(tree_of(&search, &live_processes()), &in_v1)
    }

    /// Those of `tree` outside the session's groups (a process still in a
    /// v1 group of the tree but not in its cgroup2 one is outside).
    fn outside(
        &self,
        tree: BTreeMap<i32, u64>,
        in_v1: &std::collections::HashSet<i32>,
    ) -> Vec<Escaped> {
        let inside: std::collections::HashSet<i32> = self.dirs.procs().into_iter().collect();
        let session = self
            .dirs
            .all
            .first()
            .and_then(|d| d.parent()?.file_name()?.to_str())
            .unwrap_or_default()
            .to_string();
        tree.into_iter()
            .filter(|(pid, _)| !inside.contains(pid))
            .filter(|(pid, _)| match self.dirs.v2.is_some() && !session.is_empty() {
                // In another tree of the session (cgroup2): not escaped.
                true => !in_session_v2(*pid, &session),
                false => true,
            } || in_v1.contains(pid))
            .map(|(pid, start_ticks)| Escaped {
                pid,
                start_ticks,
                command: procfs::command_line(pid),
            })
            .collect()
    }
}

/// SIGKILL to each escaped process that is still the one seen (its start
/// time checked through a descriptor bound to it); the pids killed.
pub fn kill_escaped(escaped: &[Escaped]) -> Vec<i32> {
    escaped
        .iter()
        .filter(|e| {
            let Ok(fd) = PidFd::open(e.pid) else {
                return false;
            };
            // The descriptor is bound now: if the start time still matches,
            // the signal reaches the process seen and no later one.
            let same =
                procfs::state_parent_start(e.pid).is_some_and(|l| l.start_ticks == e.start_ticks);
            same && fd.signal(libc::SIGKILL).is_ok()
        })
        .map(|e| e.pid)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tree_is_the_known_live_processes_and_their_later_descendants() {
        // 10 (start 100) forked 11 (start 105), which forked 12 (106); 30
        // is a child of 10 from before the tree's start (90, impossible
        // for a real child, so not the tree's); 40 was known but its pid
        // now belongs to a process started later (recycled); 50 is
        // unrelated.
        // 60 is of the top's process group, started since, its parent
        // gone (reparented to 1); 70 is of that group too but schedlab's
        // own child (a hog); 80 of that group started before the top.
        let l = |ppid, pgrp, start_ticks| Lineage {
            state: 'S',
            ppid,
            pgrp,
            start_ticks,
        };
        let all = HashMap::from([
            (10, l(1, 5, 100)),
            (11, l(10, 5, 105)),
            (12, l(11, 12, 106)),
            (30, l(10, 9, 90)),
            (40, l(1, 9, 500)),
            (50, l(1, 9, 120)),
            (60, l(1, 5, 130)),
            (70, l(2, 5, 130)),
            (80, l(1, 5, 50)),
        ]);
        let known = BTreeMap::from([(10, 100), (40, 110)]);
        let s = Search {
            known: &known,
            pgrp: 5,
            since_ticks: 100,
            schedlab: 2,
        };
        let tree = tree_of(&s, &all);
        assert_eq!(tree.keys().copied().collect::<Vec<_>>(), [10, 11, 12, 60]);
    }

    #[test]
    fn a_process_no_longer_the_one_seen_is_not_killed() {
        let me = std::process::id() as i32;
        let start = procfs::state_parent_start(me).unwrap().start_ticks;
        let other = Escaped {
            pid: me,
            start_ticks: start + 1,
            command: String::new(),
        };
        assert!(kill_escaped(&[other]).is_empty());
    }
}
