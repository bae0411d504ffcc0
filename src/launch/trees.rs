//! The process trees of a run's programs (`kind = "command"`) while the
//! run is waited for. A program's worker ends when the last process of its
//! tree has exited, not when the program itself has: a tree whose top was
//! reaped is polled until its cgroup is empty. Its members are noted every
//! [`NOTE_EVERY_NS`] (so that exit records of reparented tasks are still
//! the tree's). With `duration_s`, every tree gets SIGTERM at release +
//! duration and SIGKILL after `grace_s`: such a tree was stopped by us.

use std::collections::{HashMap, HashSet};

use crate::sys::cgroup::TreeGroup;

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
    stop_at_ns: Option<u64>,
    grace_ns: u64,
    kill_at_ns: Option<u64>,
    next_note_ns: u64,
}

impl<'a> TreeWatch<'a> {
    pub fn new(trees: &'a [Option<TreeGroup>], members: &[Member], release_ns: u64) -> Self {
        let command = members.iter().find_map(|m| m.workload.command());
        TreeWatch {
            trees,
            pending: HashSet::new(),
            ended_ns: HashMap::new(),
            stopped: HashSet::new(),
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

    /// Member `index`'s top process was reaped at `seen_ns`.
    pub fn top_reaped(&mut self, index: usize, seen_ns: u64) {
        let Some(Some(tree)) = self.trees.get(index) else {
            return;
        };
        match tree.populated() {
            true => {
                self.pending.insert(index);
            }
            false => {
                self.ended_ns.insert(index, seen_ns);
            }
        }
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
            self.ended_ns.insert(i, now_ns);
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

    /// SIGKILL to every tree that still has processes.
    pub fn kill_all(&self) {
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
