//! [`TreeGroups`]: one schedlab's cgroup session: its parent group in
//! every usable hierarchy (`schedlab.<pid>.<start ticks>.<token>`, a name
//! that proves whose it is), journaled before it is made; the taskstats
//! exit listener shared by its workers' groups. Dropping it removes the
//! parents (killing anything a worker group left) and the journal.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result, bail};

use super::files;
use super::journal::{remove_session_journal, session_journal_path};
use super::kill::clear_parent;
use super::layout::{Hierarchy, Layout, plan_layout};
use super::mounts::{read_membership, read_mounts};
use super::taskstats::ExitListener;
use super::watchdog::Watchdog;
use crate::sys::knobs::{
    Journal, Setting, process_start_ticks, restore_in_drop, self_pid, try_lock,
    write_journal_exclusive,
};

/// The v2 controllers enabled for the workers' groups where the
/// hierarchy offers them: they account, they do not schedule.
const V2_CONTROLLERS: [&str; 2] = ["memory", "pids"];

pub(super) struct Session {
    pub(super) parents: Vec<(Hierarchy, PathBuf)>,
    pub(super) left_out: Vec<String>,
    pub(super) listener: Result<ExitListener, String>,
    /// The first exit record of every live worker group: records before
    /// the oldest are forgotten when a group goes.
    live_starts: Mutex<BTreeMap<u64, usize>>,
    journal_path: PathBuf,
    /// Thaws, lowers and kills the trees should schedlab die; None where
    /// it could not start (said in `left_out`).
    watchdog: Option<Watchdog>,
    _lock: File,
}

/// A cgroup session; see the module documentation.
#[derive(Clone)]
pub struct TreeGroups {
    pub(super) inner: Arc<Session>,
}

/// Which kinds of hierarchy a session may use: both by default; one
/// alone to test that path on a hybrid machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Versions {
    Both,
    V2Only,
    V1Only,
}

impl TreeGroups {
    /// Journals and makes this process's parent groups and starts the
    /// exit listener. Needs root.
    pub fn open() -> Result<TreeGroups> {
        Self::open_with(Versions::Both)
    }

    /// [`open`](Self::open), with only the hierarchies of `versions`.
    pub fn open_with(versions: Versions) -> Result<TreeGroups> {
        if crate::sys::proc::euid() != 0 {
            bail!("a cgroup per worker needs root: schedlab makes groups and moves workers in");
        }
        let Layout {
            mut hierarchies,
            mut left_out,
        } = plan_layout(&read_mounts(), &read_membership());
        if versions != Versions::Both {
            let keep_v2 = versions == Versions::V2Only;
            hierarchies.retain(|h| h.is_v2() == keep_v2);
            left_out.push(format!("only {versions:?} asked for"));
        }
        if hierarchies.is_empty() {
            bail!(
                "no cgroup hierarchy schedlab may use is mounted ({})",
                left_out.join("; ")
            );
        }
        let token = uuid::Uuid::new_v4().simple().to_string()[..8].to_string();
        let start = process_start_ticks(self_pid()).unwrap_or(0);
        let name = format!("schedlab.{}.{start}.{token}", self_pid());
        let parents: Vec<(Hierarchy, PathBuf)> = hierarchies
            .into_iter()
            .map(|h| {
                let p = h.base.join(&name);
                (h, p)
            })
            .collect();
        let journal_path = session_journal_path(&token);
        let settings: Vec<Setting> = parents
            .iter()
            .map(|(_, p)| Setting::CgroupParent { path: p.clone() })
            .collect();
        let lock = try_lock(&journal_path)?
            .with_context(|| format!("{} is locked by another process", journal_path.display()))?;
        write_journal_exclusive(&journal_path, &Journal::of_this_process(settings))?;
        let mut session = Session {
            parents: Vec::new(),
            left_out,
            listener: Err("not started".into()),
            live_starts: Mutex::new(BTreeMap::new()),
            journal_path,
            watchdog: None,
            _lock: lock,
        };
        // A hierarchy that refuses a group (a read-only mount, a
        // delegated subtree) is left out, not fatal: the others still
        // account and kill.
        for (h, p) in parents {
            if let Err(e) = std::fs::create_dir(&p) {
                session
                    .left_out
                    .push(format!("{}: making {}: {e}", h.name, p.display()));
                continue;
            }
            // Marked at once: a group without schedlab's marker is never
            // emptied or removed by a later start.
            if let Err(e) = super::owned::mark(&p) {
                session
                    .left_out
                    .push(format!("{}: marking {}: {e}", h.name, p.display()));
                let _ = std::fs::remove_dir(&p);
                continue;
            }
            if h.is_v2() {
                enable_v2_controllers(&p, &mut session.left_out);
            }
            session.parents.push((h, p));
        }
        if session.parents.is_empty() {
            bail!(
                "no cgroup hierarchy took schedlab's group ({})",
                session.left_out.join("; ")
            );
        }
        session.watchdog = match Watchdog::start(&session.parents) {
            Ok(w) => w,
            Err(e) => {
                session.left_out.push(format!("no watchdog: {e:#}"));
                None
            }
        };
        session.listener = ExitListener::start_online().map_err(|e| format!("{e:#}"));
        Ok(TreeGroups {
            inner: Arc::new(session),
        })
    }

    /// Hierarchies and controllers left out, and why.
    pub fn left_out(&self) -> &[String] {
        &self.inner.left_out
    }

    /// The hierarchies used: "cgroup2", or a v1 controller's name.
    pub fn hierarchies(&self) -> Vec<&str> {
        self.inner
            .parents
            .iter()
            .map(|(h, _)| h.name.as_str())
            .collect()
    }

    /// The parent groups, one per hierarchy used.
    pub fn parents(&self) -> Vec<&Path> {
        self.inner
            .parents
            .iter()
            .map(|(_, p)| p.as_path())
            .collect()
    }
}

impl Session {
    /// A new worker group's first exit record, kept until the group goes.
    pub(super) fn hold_records(&self) -> u64 {
        let Ok(listener) = &self.listener else {
            return 0;
        };
        let seq = listener.log().lock().map_or(0, |l| l.next_seq());
        if let Ok(mut live) = self.live_starts.lock() {
            *live.entry(seq).or_default() += 1;
        }
        seq
    }

    /// A worker group held from `seq` is gone: forgets the records no
    /// live group needs (every exit on the machine is logged).
    pub(super) fn release_records(&self, seq: u64) {
        let (Ok(listener), Ok(mut live)) = (&self.listener, self.live_starts.lock()) else {
            return;
        };
        if let Some(n) = live.get_mut(&seq) {
            *n -= 1;
            if *n == 0 {
                live.remove(&seq);
            }
        }
        if let Ok(mut log) = listener.log().lock() {
            let keep_from = live.keys().next().copied().unwrap_or(log.next_seq());
            log.prune_before(keep_from);
        }
    }
}

/// Enables the accounting controllers the parent's hierarchy offers in
/// its `cgroup.subtree_control`, so that its worker groups have
/// `memory.peak` and `pids.current`; notes those it cannot.
fn enable_v2_controllers(parent: &Path, notes: &mut Vec<String>) {
    let offered = files::read(parent, "cgroup.controllers").unwrap_or_default();
    for c in V2_CONTROLLERS {
        if !offered.split_ascii_whitespace().any(|o| o == c) {
            notes.push(format!(
                "cgroup2 {c} controller is not enabled above {} (its figures come from v1 or \
                 are missing)",
                parent.display()
            ));
            continue;
        }
        if let Err(e) = files::write(parent, "cgroup.subtree_control", &format!("+{c}")) {
            notes.push(format!("cgroup2 {c} controller: {e:#}"));
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let problem = restore_in_drop(|| {
            // The listener stops before anything is removed.
            self.listener = Err("stopped".into());
            let mut failures = Vec::new();
            for (_, p) in self.parents.iter().rev() {
                if let Err(e) = clear_parent(p) {
                    failures.push(format!("{e:#}"));
                }
            }
            if !failures.is_empty() {
                bail!(failures.join("; "));
            }
            remove_session_journal(&self.journal_path)
        });
        // Told to stop only once the groups are gone: it finds nothing.
        drop(self.watchdog.take());
        if let Some(problem) = problem {
            eprintln!(
                "schedlab: could not remove its worker cgroups ({problem}); the journal {} is \
                 kept for the next start",
                self.journal_path.display()
            );
        }
    }
}
