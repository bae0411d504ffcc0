//! The journal of settings changed by schedlab, with their original
//! values: the mechanism, whatever the settings are.
//!
//! A journal names the schedlab that wrote it (pid, start time, boot id)
//! and lists [`Setting`]s, each with what it was before schedlab changed
//! it. It is written (to a temporary file, fsync'ed, renamed into place
//! without replacing anything, directory fsync'ed) before any setting is
//! touched, and an exclusive `flock` on `<journal>.lock` is held for as long
//! as the change is in force; the kernel drops the lock when the process
//! dies, however it dies, so a journal whose lock is free and whose writer
//! is gone is a leftover to restore (`recover.rs`).
//!
//! What is recorded is the business of `setting.rs`: a new kind of setting
//! (a tracefs file, a sched_ext switch) is a new [`Setting`] variant, not a
//! new journal.
//!
//! # On-disk format
//!
//! JSON, format 2 (written by this version):
//!
//! ```json
//! { "format": 2, "pid": 4242, "pid_start_ticks": 123456,
//!   "boot_id": "…", "created_unix_s": 1700000000,
//!   "settings": [ { "kind": "rt_bandwidth", "sched_rt_runtime_us": 950000,
//!                   "sched_rt_period_us": 1000000,
//!                   "root_group_rt_runtime_us": 950000,
//!                   "root_group_rt_period_us": 1000000 } ] }
//! ```
//!
//! Format 1 (schedlab before the journal was generic: the RT pair's fields
//! at the top level, no `settings`) is still read, as one
//! [`Setting::RtBandwidth`], so that a journal left by an older schedlab
//! killed with SIGKILL is restored by this one.

use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io::{self, Write as _};
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use super::JOURNAL_ENV;
use super::procs::{boot_id, pid_alive, process_start_ticks, self_pid};
use super::setting::{RtOriginals, Setting};
use crate::sys::fsinfo::writable;

const JOURNAL_DIR: &str = "/var/lib/schedlab";
const JOURNAL_DIR_FALLBACK: &str = "/run/schedlab";
pub(super) const JOURNAL_NAME: &str = "rt-journal.json";
/// The journal of a tracing session (its tracefs mount and instance),
/// beside the RT journal: a campaign may hold both at once.
pub(super) const TRACE_JOURNAL_NAME: &str = "trace-journal.json";
/// The format this version writes.
pub const JOURNAL_FORMAT: u32 = 2;
/// The format of schedlab before the journal was generic: the RT pair only.
const JOURNAL_FORMAT_V1: u32 = 1;

/// The journal of settings changed by schedlab, written before anything is
/// changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Journal {
    /// Format version ([`JOURNAL_FORMAT`]).
    pub format: u32,
    /// The schedlab process that made the change.
    pub pid: i32,
    /// Its start time (field 22 of /proc/PID/stat), to tell it from a later
    /// process that got the same pid.
    pub pid_start_ticks: Option<u64>,
    /// /proc/sys/kernel/random/boot_id at the time: the settings do not
    /// survive a reboot.
    pub boot_id: Option<String>,
    /// Seconds since the Unix epoch.
    pub created_unix_s: u64,
    /// What was changed, each with its original value, in the order they
    /// were journaled; put back in the reverse order.
    pub settings: Vec<Setting>,
}

/// Format 1, as older schedlab wrote it.
#[derive(Deserialize)]
struct JournalV1 {
    pid: i32,
    pid_start_ticks: Option<u64>,
    boot_id: Option<String>,
    created_unix_s: u64,
    sched_rt_runtime_us: i64,
    sched_rt_period_us: i64,
    root_group_rt_runtime_us: Option<i64>,
    root_group_rt_period_us: Option<i64>,
}

impl From<JournalV1> for Journal {
    fn from(v1: JournalV1) -> Journal {
        Journal {
            format: JOURNAL_FORMAT,
            pid: v1.pid,
            pid_start_ticks: v1.pid_start_ticks,
            boot_id: v1.boot_id,
            created_unix_s: v1.created_unix_s,
            settings: vec![Setting::RtBandwidth(RtOriginals {
                sched_rt_runtime_us: v1.sched_rt_runtime_us,
                sched_rt_period_us: v1.sched_rt_period_us,
                root_group_rt_runtime_us: v1.root_group_rt_runtime_us,
                root_group_rt_period_us: v1.root_group_rt_period_us,
            })],
        }
    }
}

impl Journal {
    /// A journal of `settings` by this process, now.
    pub fn of_this_process(settings: Vec<Setting>) -> Journal {
        Journal {
            format: JOURNAL_FORMAT,
            pid: self_pid(),
            pid_start_ticks: process_start_ticks(self_pid()),
            boot_id: boot_id(),
            created_unix_s: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            settings,
        }
    }

    pub fn to_json(&self) -> String {
        // Plain fields only: serialisation cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_default() + "\n"
    }

    /// Parses a journal of this format or of format 1.
    pub fn from_json(text: &str) -> Result<Journal> {
        let value: serde_json::Value = serde_json::from_str(text).context("parsing the journal")?;
        let format = value.get("format").and_then(serde_json::Value::as_u64);
        match format {
            Some(f) if f == u64::from(JOURNAL_FORMAT) => {
                serde_json::from_value(value).context("parsing the journal")
            }
            Some(f) if f == u64::from(JOURNAL_FORMAT_V1) => {
                serde_json::from_value::<JournalV1>(value)
                    .map(Journal::from)
                    .context("parsing the journal (format 1)")
            }
            Some(f) => bail!(
                "journal format {f} is not known to this schedlab (expects \
                 {JOURNAL_FORMAT}, or {JOURNAL_FORMAT_V1} as older schedlab wrote it)"
            ),
            None => bail!("parsing the journal: it has no format number"),
        }
    }

    /// The original values, for messages.
    pub fn originals(&self) -> String {
        if self.settings.is_empty() {
            return "no settings".to_string();
        }
        let all: Vec<String> = self.settings.iter().map(Setting::describe).collect();
        all.join("; ")
    }
}

/// The journal at `path`, if there is one. An unreadable one is an error
/// that names it, says what it records and how to put the machine back by
/// hand ([`unreadable_remedy`]).
pub fn read_journal(path: &Path) -> Result<Option<Journal>> {
    match std::fs::read_to_string(path) {
        Ok(text) => Journal::from_json(&text).map(Some).with_context(|| {
            format!(
                "{} {} is unreadable ({text:?}); {}",
                journal_kind(path),
                path.display(),
                unreadable_remedy(path)
            )
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

/// "tracing journal" or "RT journal", from the file's name.
pub fn journal_kind(path: &Path) -> &'static str {
    match path.file_name().is_some_and(|n| n == TRACE_JOURNAL_NAME) {
        true => "tracing journal",
        false => "RT journal",
    }
}

/// How to recover by hand from an unreadable journal at `path`: what it
/// records, how to check and put back the machine, then remove it.
pub fn unreadable_remedy(path: &Path) -> String {
    let check = match path.file_name().is_some_and(|n| n == TRACE_JOURNAL_NAME) {
        true => {
            "it records the tracefs instance (and mount) an earlier schedlab made: remove any \
             `schedlab-*` directory under /sys/kernel/tracing/instances with rmdir, unmount any \
             /run/schedlab/tracefs-* with umount"
        }
        false => {
            "it records the RT settings an earlier schedlab changed: check \
             /proc/sys/kernel/sched_rt_runtime_us (950000 by default) and the root cgroup's \
             cpu.rt_runtime_us, and write the original values back"
        }
    };
    format!(
        "{check}; then remove {} (and its .lock beside it). Until then schedlab refuses to \
         change kernel settings; commands that only read go on",
        path.display()
    )
}

/// Where the journal of original values is kept: `$SCHEDLAB_JOURNAL` if
/// set, else `/var/lib/schedlab/rt-journal.json`, or
/// `/run/schedlab/rt-journal.json` when `/var/lib` is not writable. Creates
/// the chosen directory. See the module documentation for why.
pub fn journal_path() -> PathBuf {
    journal_location(true)
}

pub(crate) fn journal_location(create: bool) -> PathBuf {
    if let Some(p) = std::env::var_os(JOURNAL_ENV).filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    journal_location_in(
        &[Path::new(JOURNAL_DIR), Path::new(JOURNAL_DIR_FALLBACK)],
        create,
    )
}

/// The journal in the first of `dirs` that is (or, when `create`, can be
/// made) writable, else in the first; creates that directory only when
/// `create`.
pub(super) fn journal_location_in(dirs: &[&Path], create: bool) -> PathBuf {
    for &dir in dirs {
        let usable = if create {
            std::fs::create_dir_all(dir).is_ok() && writable(dir).is_ok()
        } else if dir.exists() {
            writable(dir).is_ok()
        } else {
            dir.parent().is_some_and(|p| writable(p).is_ok())
        };
        if usable {
            return dir.join(JOURNAL_NAME);
        }
    }
    dirs[0].join(JOURNAL_NAME)
}

/// Every place a journal may have been left: the override alone, or both
/// default locations (which one is used depends on what was writable).
pub(crate) fn journal_candidates() -> Vec<PathBuf> {
    match std::env::var_os(JOURNAL_ENV).filter(|p| !p.is_empty()) {
        Some(p) => vec![PathBuf::from(p)],
        None => [JOURNAL_DIR, JOURNAL_DIR_FALLBACK]
            .into_iter()
            .map(|d| Path::new(d).join(JOURNAL_NAME))
            .collect(),
    }
}

/// Where the journal of a tracing session goes: beside the RT journal
/// (`$SCHEDLAB_JOURNAL`'s directory when set).
pub fn trace_journal_path() -> PathBuf {
    journal_path().with_file_name(TRACE_JOURNAL_NAME)
}

/// Every place a tracing session's journal may have been left.
pub(super) fn trace_journal_candidates() -> Vec<PathBuf> {
    journal_candidates()
        .into_iter()
        .map(|p| p.with_file_name(TRACE_JOURNAL_NAME))
        .collect()
}

pub(crate) fn lock_path(journal: &Path) -> PathBuf {
    let mut name = journal.file_name().unwrap_or_default().to_os_string();
    name.push(".lock");
    journal.with_file_name(name)
}

/// An exclusive `flock` on `<journal>.lock`, or `None` when a live process
/// holds it. The lock file is never removed (removing it would race).
pub(crate) fn try_lock(journal: &Path) -> Result<Option<File>> {
    let path = lock_path(journal);
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&path)
        .with_context(|| format!("opening the RT journal lock {}", path.display()))?;
    // SAFETY: flock on a descriptor we own; no memory arguments.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(Some(f));
    }
    let err = io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(None)
    } else {
        Err(err).with_context(|| format!("locking {}", path.display()))
    }
}

pub(super) fn fsync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

pub(crate) fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Writes the journal to a temporary file, fsyncs it, renames it to `path`
/// without replacing an existing file (`RENAME_NOREPLACE`, or `link` where
/// the filesystem lacks it), and fsyncs the directory.
pub(crate) fn write_journal_exclusive(path: &Path, journal: &Journal) -> Result<()> {
    let dir = parent_dir(path);
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        path.file_name().unwrap_or_default().to_string_lossy(),
        std::process::id()
    ));
    let written = (|| -> io::Result<()> {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(journal.to_json().as_bytes())?;
        f.sync_all()?;
        rename_noreplace(&tmp, path)?;
        fsync_dir(dir)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e).with_context(|| format!("writing the RT journal {}", path.display()));
    }
    Ok(())
}

pub(super) fn rename_noreplace(from: &Path, to: &Path) -> io::Result<()> {
    let c = |p: &Path| {
        CString::new(p.as_os_str().as_bytes())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
    };
    let (cf, ct) = (c(from)?, c(to)?);
    // SAFETY: two NUL-terminated paths relative to the working directory.
    let rc = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            cf.as_ptr(),
            libc::AT_FDCWD,
            ct.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if rc == 0 {
        return Ok(());
    }
    let err = io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::EINVAL | libc::ENOSYS) => {
            std::fs::hard_link(from, to)?;
            std::fs::remove_file(from)
        }
        _ => Err(err),
    }
}

/// A guard's restore from `Drop`: runs it, catching a panic, and says what
/// went wrong (None when it was put back), for the guard to report.
pub(crate) fn restore_in_drop(restore: impl FnOnce() -> Result<()>) -> Option<String> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(restore)) {
        Ok(Ok(())) => None,
        Ok(Err(e)) => Some(format!("{e:#}")),
        Err(_) => Some("a panic while restoring".to_string()),
    }
}

/// Another live schedlab holds a journal: what a guard's `acquire` fails
/// with when waiting for that schedlab would succeed ([`HeldByAnother::is`]).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct HeldByAnother(pub String);

impl HeldByAnother {
    /// Whether `e` (or what it wraps) is this refusal.
    pub fn is(e: &anyhow::Error) -> bool {
        e.chain().any(|c| c.is::<HeldByAnother>())
    }
}

/// The refusal when another schedlab holds the journal at `path`:
/// "{who} {doing} (it holds PATH and its lock); {rule}".
pub(super) fn refusal_held(path: &Path, doing: &str, rule: &str) -> anyhow::Error {
    let who = match read_journal(path) {
        Ok(Some(j)) => format!("schedlab pid {}", j.pid),
        _ => "another schedlab".to_string(),
    };
    HeldByAnother(format!(
        "{who} {doing} (it holds {} and its lock); {rule}",
        path.display()
    ))
    .into()
}

pub(crate) fn remove_journal(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("removing {}", path.display())),
    }
    fsync_dir(parent_dir(path)).with_context(|| format!("syncing {}", parent_dir(path).display()))
}

/// Whether the schedlab that wrote `j` still runs. Called with the lock
/// held, so a journal of this very process is a leftover (a guard whose
/// restore failed), not a live holder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Holder {
    Alive,
    Dead,
    EarlierBoot,
}

pub(crate) fn holder_state(j: &Journal, current_boot: Option<&str>, self_pid: i32) -> Holder {
    if let (Some(then), Some(now)) = (j.boot_id.as_deref(), current_boot)
        && then != now
    {
        return Holder::EarlierBoot;
    }
    if j.pid == self_pid {
        return Holder::Dead;
    }
    if pid_alive(j.pid, j.pid_start_ticks) {
        Holder::Alive
    } else {
        Holder::Dead
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::knobs::fake::sample_journal;

    #[test]
    fn journal_round_trips() {
        let j = sample_journal();
        let text = j.to_json();
        assert!(text.contains("\"sched_rt_runtime_us\": 950000"), "{text}");
        assert!(text.contains("\"pid\": 4242"), "{text}");
        assert_eq!(Journal::from_json(&text).unwrap(), j);
        let mut no_group = j.clone();
        no_group.settings = vec![Setting::RtBandwidth(RtOriginals {
            root_group_rt_runtime_us: None,
            root_group_rt_period_us: None,
            ..*j.rt_bandwidth().unwrap()
        })];
        assert_eq!(Journal::from_json(&no_group.to_json()).unwrap(), no_group);
        assert!(Journal::from_json("{\"pid\": 1}").is_err());
        assert!(Journal::from_json(&text.replace("\"format\": 2", "\"format\": 9")).is_err());
        // An unknown kind of setting (from a later schedlab) is refused,
        // not skipped.
        assert!(Journal::from_json(&text.replace("rt_bandwidth", "tracefs_file")).is_err());
    }

    /// Format 1, as schedlab wrote it before the journal was generic (the
    /// fixture is such a file, byte for byte), is read as one RT setting.
    #[test]
    fn format_1_is_still_read() {
        let text = include_str!("../../../tests/fixtures/rt-journal-v1.json");
        let j = Journal::from_json(text).unwrap();
        assert_eq!(j.format, JOURNAL_FORMAT);
        assert_eq!(j.pid, i32::MAX);
        assert_eq!(j.pid_start_ticks, Some(123_456));
        assert_eq!(j.boot_id, None);
        assert_eq!(j.created_unix_s, 1_700_000_000);
        assert_eq!(
            j.settings,
            vec![Setting::RtBandwidth(RtOriginals {
                sched_rt_runtime_us: 950_000,
                sched_rt_period_us: 1_000_000,
                root_group_rt_runtime_us: Some(950_000),
                root_group_rt_period_us: Some(1_000_000),
            })]
        );
        // Written back, it is format 2.
        assert!(j.to_json().contains("\"format\": 2"));
        assert!(Journal::from_json(&text.replace("950000,", "\"x\",")).is_err());
    }

    #[test]
    fn holder_states() {
        let mut j = sample_journal();
        j.pid = i32::MAX; // above pid_max: never a live process
        assert_eq!(holder_state(&j, j.boot_id.as_deref(), 1), Holder::Dead);
        assert_eq!(holder_state(&j, Some("other-boot"), 1), Holder::EarlierBoot);
        // This very process, with its real start time: alive to others.
        j.pid = self_pid();
        j.pid_start_ticks = process_start_ticks(self_pid());
        assert!(j.pid_start_ticks.is_some());
        assert_eq!(holder_state(&j, None, 1), Holder::Alive);
        // ... but a leftover to itself (it holds the lock, so no guard lives).
        assert_eq!(holder_state(&j, None, self_pid()), Holder::Dead);
        // Same pid, other start time: the pid was reused.
        j.pid_start_ticks = j.pid_start_ticks.map(|t| t + 1);
        assert_eq!(holder_state(&j, None, 1), Holder::Dead);
    }

    /// What `capability` (and so `schedlab env`) asks: where the journal
    /// would go, which must not create the journal directory.
    #[test]
    fn asking_where_the_journal_goes_creates_no_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let var_lib = tmp.path().join("var/lib");
        std::fs::create_dir_all(&var_lib).unwrap();
        let dir = var_lib.join("schedlab");
        let fallback = tmp.path().join("run/schedlab");
        let dirs = [dir.as_path(), fallback.as_path()];

        // Neither exists, the first one's parent is writable: it is chosen,
        // and neither is created.
        assert_eq!(journal_location_in(&dirs, false), dir.join(JOURNAL_NAME));
        assert!(!dir.exists(), "{} was created", dir.display());
        assert!(!fallback.exists(), "{} was created", fallback.display());
        assert!(!fallback.parent().unwrap().exists());

        // Where the first could not be made (no parent), the next is
        // named; neither is made.
        let no_parent = tmp.path().join("missing/schedlab");
        assert_eq!(
            journal_location_in(&[no_parent.as_path(), dir.as_path()], false),
            dir.join(JOURNAL_NAME)
        );
        assert!(!tmp.path().join("missing").exists());
        assert!(!dir.exists(), "{} was created", dir.display());

        // The writing path does create it (the check above can fail).
        assert_eq!(journal_location_in(&dirs, true), dir.join(JOURNAL_NAME));
        assert!(dir.is_dir());
        assert!(!fallback.exists());
    }
}
