//! The journals of cgroup sessions: one file per session
//! (`cgroup-journal.<pid>.<token>.json` beside the RT journal), written
//! through the knobs' journal mechanism (fsync, rename without replacing,
//! a `flock` held while the session lives) before any group is made, and
//! the recovery of those whose schedlab died.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::sys::knobs::{
    self, Holder, boot_id, holder_state, journal_candidates, lock_path, read_journal,
    remove_journal, self_pid, try_lock,
};

const PREFIX: &str = "cgroup-journal.";
const SUFFIX: &str = ".json";

/// The journal of a new session with `token`, in the journal directory
/// in use (`$SCHEDLAB_JOURNAL`'s directory in tests).
pub fn session_journal_path(token: &str) -> PathBuf {
    let rt = knobs::journal_location(true);
    rt.with_file_name(format!("{PREFIX}{}.{token}{SUFFIX}", self_pid()))
}

/// Every cgroup journal in the directories a journal may be in.
pub fn all_journals() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = journal_candidates()
        .iter()
        .filter_map(|p| p.parent().map(Path::to_path_buf))
        .collect();
    dirs.dedup();
    let mut out = Vec::new();
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with(PREFIX) && name.ends_with(SUFFIX) {
                out.push(e.path());
            }
        }
    }
    out.sort();
    out
}

/// Removes a session's journal and then its lock file (safe to remove:
/// the journal's name is unique to this session, so no one else waits on
/// that lock for another journal).
pub fn remove_session_journal(path: &Path) -> Result<()> {
    remove_journal(path)?;
    let lock = lock_path(path);
    match std::fs::remove_file(&lock) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("removing {}", lock.display())),
    }
}

/// For every start of schedlab: kills what is left in the groups of
/// every cgroup session whose schedlab died, removes the groups and the
/// journal. Returns one
/// note per session recovered.
pub fn recover_leftover_sessions() -> Result<Vec<String>> {
    let mut notes = Vec::new();
    for path in all_journals() {
        let Some(_lock) = try_lock(&path)? else {
            continue;
        };
        let Some(j) = read_journal(&path)? else {
            continue;
        };
        if holder_state(&j, boot_id().as_deref(), self_pid()) == Holder::Alive {
            continue;
        }
        // Every group of the session thawed, lowered and killed first, in
        // all hierarchies: a tree still frozen in one (the v1 freezer holds
        // off SIGKILL) would keep another's group from emptying.
        let parents: Vec<PathBuf> = j
            .settings
            .iter()
            .filter_map(|s| match s {
                knobs::Setting::CgroupParent { path } => Some(path.clone()),
                _ => None,
            })
            .filter(|p| super::owned::check_parent(p).unwrap_or(false))
            .collect();
        super::watchdog::release_parents(&parents);
        // After a reboot the groups are gone with the kernel's state;
        // restoring finds nothing and only removes the journal.
        let restored = knobs::restore_journal(&j).with_context(|| {
            format!(
                "{} was left by schedlab pid {} and its groups could not be removed; the \
                 journal is kept",
                path.display(),
                j.pid
            )
        })?;
        remove_session_journal(&path)?;
        let what = match restored.is_empty() {
            true => "found nothing left".to_string(),
            false => restored.join(", "),
        };
        notes.push(format!(
            "{what}: worker cgroups left by schedlab pid {} that did not exit cleanly (journal {})",
            j.pid,
            path.display()
        ));
    }
    Ok(notes)
}
