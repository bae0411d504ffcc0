//! The process trees of a run's programs (`kind = "command"`) while the
//! run is waited for. A program's worker ends when the last process of its
//! tree has exited, not when the program itself has: a tree whose top was
//! reaped is polled until its cgroup is empty. Its members are noted every
//! [`NOTE_EVERY_NS`] (so that exit records of reparented tasks are still
//! the tree's). With `duration_s`, every tree gets SIGTERM at release +
//! duration and SIGKILL after `grace_s`: such a tree was stopped by us.
//!
//! A tree whose top exited while other processes of it live on (a daemon)
//! is named at once on standard error (pid and command of each), and its
//! list is kept for the run's record; with `end = "exit"` those processes
//! are killed then, and the run ends with its program. When a tree is seen
//! empty, processes of it alive outside its groups (they moved themselves
//! out: `sys::cgroup::escapes`) are killed and named.

use std::collections::{HashMap, HashSet};

use crate::sys::cgroup::{Escaped, TreeGroup, kill_escaped};
use crate::workload::command::params::End;

use super::members::Member;

/// How often the trees' members are noted, and an emptied tree is looked
/// for, while some tree is alive.
pub const NOTE_EVERY_NS: u64 = 20_000_000;
/// How soon after its top process a tree that still has processes is
/// looked at again.
const RECHECK_NS: u64 = 2_000_000;

/// The programs' trees of one run, by member index.
pub struct TreeWatch<'a> {
    trees: &'a [Option<TreeGroup>],
    /// Members whose top process was reaped while their tree still had
    /// processes.
    pending: HashSet<usize>,
    /// Monotonic ns each tree was seen empty.
    pub ended_ns: HashMap<usize, u64>,
    /// Trees stopped at the end of `duration_s`.
    pub stopped: HashSet<usize>,
    /// Per member whose top exited before the rest of its tree: the
    /// processes left then (pid, command), or at the timeout's kill.
    pub left: HashMap<usize, Vec<(i32, String)>>,
    /// Members whose tree's rest was killed at their program's exit
    /// (`end = "exit"`).
    pub killed_at_exit: HashSet<usize>,
    /// Per member: its processes found alive outside its groups, killed.
    pub escaped: HashMap<usize, Vec<Escaped>>,
    /// Each member's `end` (`tree` for other kinds).
    ends: Vec<End>,
    /// Say nothing on standard error.
    quiet: bool,
    stop_at_ns: Option<u64>,
    grace_ns: u64,
    kill_at_ns: Option<u64>,
    next_note_ns: u64,
}

impl<'a> TreeWatch<'a> {
    pub fn new(
        trees: &'a [Option<TreeGroup>],
        members: &[Member],
        release_ns: u64,
        quiet: bool,
    ) -> Self {
        let command = members.iter().find_map(|m| m.workload.command());
        TreeWatch {
            trees,
            pending: HashSet::new(),
            ended_ns: HashMap::new(),
            stopped: HashSet::new(),
            left: HashMap::new(),
            killed_at_exit: HashSet::new(),
            escaped: HashMap::new(),
            ends: members
                .iter()
                .map(|m| m.workload.command().map_or(End::Tree, |c| c.end))
                .collect(),
            quiet,
            stop_at_ns: command.and_then(|c| c.duration_ns).map(|d| release_ns + d),
            grace_ns: command.map_or(0, |c| c.grace_ns),
            kill_at_ns: None,
            next_note_ns: release_ns + NOTE_EVERY_NS,
        }
    }

    /// Whether any tree is being watched at all.
    fn any(&self) -> bool {
        self.trees.iter().any(Option::is_some)
    }

    /// Whether member `index` is a program with a tree of its own.
    pub fn has_tree(&self, index: usize) -> bool {
        self.tree(index).is_some()
    }

    /// Member `index`'s top process `pid` was reaped at `seen_ns`
    /// (monotonic), `release_ns` being the run's release.
    pub fn top_reaped(&mut self, index: usize, pid: i32, seen_ns: u64, release_ns: u64) {
        let Some(Some(tree)) = self.trees.get(index) else {
            return;
        };
        if !tree.populated() {
            self.tree_ended(index, seen_ns);
            return;
        }
        self.pending.insert(index);
        let left = remaining(tree);
        let at_exit = self.ends.get(index) == Some(&End::Exit);
        if !self.quiet {
            note!(
                "worker {index}: its program (pid {pid}) exited {:.2} s after release, {}: {}",
                seen_ns.saturating_sub(release_ns) as f64 / 1e9,
                match at_exit {
                    true => "and end = \"exit\": killing what is left of its tree",
                    false =>
                        "but its process tree lives on (the run waits for it; end = \"exit\" \
                              would end it here)",
                },
                crate::out::esc(&describe(&left)),
            );
        }
        self.left.insert(index, left);
        if at_exit {
            // The run's end is the program's; the tree is waited for until
            // it is empty, so that its figures are complete.
            self.killed_at_exit.insert(index);
            self.ended_ns.insert(index, seen_ns);
            tree.kill_now();
        }
    }

    /// Member `index`'s tree was seen empty at `now_ns`: what of it lives
    /// on outside its groups is killed and kept.
    fn tree_ended(&mut self, index: usize, now_ns: u64) {
        self.ended_ns.entry(index).or_insert(now_ns);
        let Some(tree) = self.tree(index) else {
            return;
        };
        let escaped = tree.escaped();
        if escaped.is_empty() {
            return;
        }
        let killed = kill_escaped(&escaped);
        if !self.quiet {
            let named: Vec<(i32, String)> =
                escaped.iter().map(|e| (e.pid, e.command.clone())).collect();
            note!(
                "worker {index}: processes of its tree left its cgroups and lived on outside \
                 them: {} (killed: {killed:?})",
                crate::out::esc(&describe(&named))
            );
        }
        self.escaped.insert(index, escaped);
    }

    /// Whether a reaped program still has processes in its tree.
    pub fn busy(&self) -> bool {
        !self.pending.is_empty()
    }

    /// What is due at `now_ns`: emptied trees, members noted, the
    /// duration's SIGTERM and the grace's SIGKILL. Returns when to look
    /// again (None: nothing to watch).
    pub fn tick(&mut self, now_ns: u64) -> Option<u64> {
        if !self.any() {
            return None;
        }
        let emptied: Vec<usize> = self
            .pending
            .iter()
            .copied()
            .filter(|&i| self.tree(i).is_none_or(|t| !t.populated()))
            .collect();
        for i in emptied {
            self.pending.remove(&i);
            self.tree_ended(i, now_ns);
        }
        if now_ns >= self.next_note_ns {
            self.live().for_each(|(_, t)| t.note_members());
            self.next_note_ns = now_ns + NOTE_EVERY_NS;
        }
        if let Some(stop) = self.stop_at_ns
            && now_ns >= stop
            && self.kill_at_ns.is_none()
        {
            let live: Vec<usize> = self.live().map(|(i, _)| i).collect();
            for i in live {
                self.stopped.insert(i);
                if let Some(t) = self.tree(i) {
                    t.signal_now(libc::SIGTERM);
                }
            }
            self.kill_at_ns = Some(now_ns + self.grace_ns);
        }
        if let Some(kill) = self.kill_at_ns
            && now_ns >= kill
        {
            self.kill_all();
        }
        let mut next = self.next_note_ns;
        if self.busy() {
            next = next.min(now_ns + RECHECK_NS);
        }
        for t in [self.stop_at_ns, self.kill_at_ns].into_iter().flatten() {
            if t > now_ns {
                next = next.min(t);
            }
        }
        Some(next)
    }

    /// SIGKILL to every tree that still has processes; the processes a
    /// reaped program left are noted first (what the timeout found).
    pub fn kill_all(&mut self) {
        let pending: Vec<usize> = self.pending.iter().copied().collect();
        for i in pending {
            if let Some(t) = self.tree(i) {
                let now = remaining(t);
                if !now.is_empty() {
                    self.left.insert(i, now);
                }
            }
        }
        self.live().for_each(|(_, t)| t.kill_now());
    }

    fn tree(&self, index: usize) -> Option<&TreeGroup> {
        self.trees.get(index).and_then(Option::as_ref)
    }

    /// The trees that still have processes, with their member index.
    fn live(&self) -> impl Iterator<Item = (usize, &TreeGroup)> {
        self.trees
            .iter()
            .enumerate()
            .filter_map(|(i, t)| t.as_ref().map(|t| (i, t)))
            .filter(|(_, t)| t.populated())
    }
}

/// The processes of `tree` now, with their command lines.
fn remaining(tree: &TreeGroup) -> Vec<(i32, String)> {
    tree.procs()
        .into_iter()
        .map(|p| (p, crate::sys::procfs::command_line(p)))
        .collect()
}

/// How many processes to name in a line; the rest are counted.
const NAMED: usize = 8;

/// `pid 12 (sleep 30), pid 13 (…)`: the first [`NAMED`], then how many more.
pub fn describe(procs: &[(i32, String)]) -> String {
    let mut s = procs
        .iter()
        .take(NAMED)
        .map(|(p, c)| format!("pid {p} ({c})"))
        .collect::<Vec<_>>()
        .join(", ");
    if procs.len() > NAMED {
        s.push_str(&format!(" and {} more", procs.len() - NAMED));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn processes_are_named_up_to_a_bound() {
        let few = [(12, "sleep 30".to_string())];
        assert_eq!(describe(&few), "pid 12 (sleep 30)");
        let many: Vec<(i32, String)> = (0..10).map(|i| (i, "x".to_string())).collect();
        let d = describe(&many);
        assert!(d.ends_with("pid 7 (x) and 2 more"), "{d}");
    }
}
