//! [`TreeGroup`]: one worker's groups (one per hierarchy of the session),
//! the tree's processes moved in, watched until empty, killed with a
//! grace, and its figures read. Dropping it kills what is left and
//! removes its groups.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use anyhow::{Context, Result, bail};

use super::files;
use super::kill::{GroupDirs, remove_dir_retrying};
use super::session::TreeGroups;
use super::stats::{AtRelease, Sources, TreeStats, at_release, gather};

/// How long `Drop` waits for a killed tree to empty.
const DROP_WAIT: Duration = Duration::from_secs(5);

/// One worker's groups; see the module documentation.
pub struct TreeGroup {
    session: TreeGroups,
    pub(super) dirs: GroupDirs,
    cpuacct: Option<PathBuf>,
    memory: Option<PathBuf>,
    start_seq: u64,
    pub(super) top: Option<i32>,
    /// Every task seen in the group, for attributing exit records.
    known: Mutex<BTreeSet<i32>>,
    /// Every process seen in the group, with its start time (clock ticks
    /// after boot), for finding those that left it (`escapes.rs`).
    pub(super) seen: Mutex<BTreeMap<i32, u64>>,
    /// The counters at release ([`mark_release`](Self::mark_release)).
    at_release: Option<AtRelease>,
}

/// A run tag as a group name component: letters, digits, `-`, `_`, at
/// most 64 characters.
fn clean_tag(tag: &str) -> String {
    tag.chars()
        .map(
            |c| match c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                true => c,
                false => '_',
            },
        )
        .take(64)
        .collect()
}

impl TreeGroups {
    /// Makes worker `worker_index`'s groups of run `run_tag` under every
    /// parent of the session.
    pub fn create(&self, run_tag: &str, worker_index: usize) -> Result<TreeGroup> {
        let name = format!("{}.w{worker_index}", clean_tag(run_tag));
        let start_seq = self.inner.hold_records();
        let mut group = TreeGroup {
            session: self.clone(),
            dirs: GroupDirs::default(),
            cpuacct: None,
            memory: None,
            start_seq,
            top: None,
            known: Mutex::new(BTreeSet::new()),
            seen: Mutex::new(BTreeMap::new()),
            at_release: None,
        };
        for (h, parent) in &self.inner.parents {
            let dir = parent.join(&name);
            std::fs::create_dir(&dir)
                .with_context(|| format!("making cgroup {}", dir.display()))?;
            match h.name.as_str() {
                "cgroup2" => group.dirs.v2 = Some(dir.clone()),
                "freezer" => group.dirs.freezer = Some(dir.clone()),
                "cpuacct" => group.cpuacct = Some(dir.clone()),
                "memory" => group.memory = Some(dir.clone()),
                _ => {}
            }
            // v2 first, so that membership is read there.
            match h.is_v2() {
                true => group.dirs.all.insert(0, dir),
                false => group.dirs.all.push(dir),
            }
        }
        Ok(group)
    }
}

impl TreeGroup {
    /// Moves process `pid` (with its threads) into every group of the
    /// tree. For a just-spawned worker still blocked before its barrier,
    /// from the parent: nothing of it can have forked yet. The first pid
    /// attached is the tree's top process.
    pub fn attach_pid(&mut self, pid: i32) -> Result<()> {
        if pid <= 0 {
            bail!("cannot attach pid {pid} to a cgroup");
        }
        for dir in &self.dirs.all {
            files::write(dir, "cgroup.procs", &pid.to_string())
                .with_context(|| format!("moving pid {pid} into cgroup {}", dir.display()))?;
        }
        if self.top.is_none() {
            self.top = Some(pid);
        }
        self.note_members();
        Ok(())
    }

    /// Reads the tree's counters now, at release, as the start of its
    /// figures' window: the worker's start-up before it (schedlab's exec,
    /// loading and setup, from the attach to the barrier) is not the
    /// program's CPU time.
    pub fn mark_release(&mut self) {
        self.at_release = Some(at_release(self.dirs.v2.as_deref(), self.cpuacct.as_deref()));
    }

    /// The groups, one per hierarchy (v2 first).
    pub fn dirs(&self) -> &[PathBuf] {
        &self.dirs.all
    }

    /// The v2 group, when there is a cgroup2 hierarchy.
    pub fn v2_dir(&self) -> Option<&Path> {
        self.dirs.v2.as_deref()
    }

    /// The processes of the tree now.
    pub fn procs(&self) -> Vec<i32> {
        self.dirs.procs()
    }

    /// What the WRR dispatcher acts on the tree through (paths only; this
    /// group still owns and removes the groups).
    pub fn control(&self) -> Option<super::TreeControl> {
        let members = self.dirs.all.first()?.clone();
        Some(super::TreeControl::new(
            self.dirs.v2.clone(),
            self.dirs.freezer.clone(),
            self.cpuacct.clone(),
            members,
        ))
    }

    /// Whether any process of the tree is left.
    pub fn populated(&self) -> bool {
        self.dirs.populated()
    }

    /// Records the tasks in the group now (see `exits.rs`: a task once
    /// seen here is the tree's, wherever it was reparented).
    pub fn note_members(&self) {
        let threads = self.dirs.threads();
        if let Ok(mut k) = self.known.lock() {
            k.extend(threads);
        }
        self.note_processes();
    }

    /// Waits until the tree is empty, noting its members meanwhile; the
    /// monotonic time (ns) it was seen empty, or None after `timeout`.
    pub fn wait_empty(&self, timeout: Duration) -> Option<u64> {
        self.dirs.wait_empty(timeout, || self.note_members())
    }

    /// SIGTERM to every process of the tree (frozen while signalled),
    /// then SIGKILL to whatever is left after `grace`; returns once the
    /// tree is empty, or fails naming the group and what is left.
    pub fn kill_tree(&self, grace: Duration) -> Result<()> {
        if !self.populated() {
            return Ok(());
        }
        let seen = self.dirs.signal_all(libc::SIGTERM);
        self.note(seen);
        if self.wait_empty(grace).is_some() {
            return Ok(());
        }
        let seen = self.dirs.kill_all();
        self.note(seen);
        if self.wait_empty(DROP_WAIT).is_some() {
            return Ok(());
        }
        bail!(
            "processes {:?} are still in cgroup {} {} s after SIGKILL",
            self.procs(),
            self.dirs
                .all
                .first()
                .map_or(String::new(), |d| d.display().to_string()),
            DROP_WAIT.as_secs()
        )
    }

    /// `sig` to every process of the tree now (frozen while signalled, so
    /// none escapes by forking), without waiting for them to go.
    pub fn signal_now(&self, sig: i32) {
        let seen = self.dirs.signal_all(sig);
        self.note(seen);
    }

    /// SIGKILL to every process of the tree now (cgroup2's `cgroup.kill`
    /// where there is one), without waiting for them to go.
    pub fn kill_now(&self) {
        let seen = self.dirs.kill_all();
        self.note(seen);
    }

    fn note(&self, tids: Vec<i32>) {
        if let Ok(mut k) = self.known.lock() {
            k.extend(tids);
        }
    }

    /// The tree's figures (see [`TreeStats`]); complete once the tree is
    /// empty.
    pub fn stats(&self) -> TreeStats {
        let known = self.known.lock().map(|k| k.clone()).unwrap_or_default();
        let mut known = known;
        known.extend(self.top);
        gather(
            &self.session.inner,
            &Sources {
                v2: self.dirs.v2.as_deref(),
                cpuacct: self.cpuacct.as_deref(),
                memory: self.memory.as_deref(),
                top: self.top,
                known: &known,
                start_seq: self.start_seq,
                running: self.populated(),
                at_release: self.at_release.as_ref(),
            },
        )
    }
}

impl Drop for TreeGroup {
    fn drop(&mut self) {
        self.session.inner.release_records(self.start_seq);
        if self.populated() {
            self.dirs.kill_all();
            if self.dirs.wait_empty(DROP_WAIT, || {}).is_none() {
                eprintln!(
                    "schedlab: processes {:?} survived SIGKILL in cgroup {:?}; the session \
                     removes the group when it ends",
                    self.procs(),
                    self.dirs.all
                );
                return;
            }
        }
        for dir in self.dirs.all.iter().rev() {
            if let Err(e) = remove_dir_retrying(dir) {
                eprintln!("schedlab: {e:#}");
            }
        }
    }
}
