//! Directories schedlab makes in a work directory (per run, for
//! calibration), and the removal of those a killed schedlab left behind.
//!
//! A directory is schedlab's only if it provably is: it holds a marker file
//! that names the directory's own device and inode (so a copy or a
//! look-alike made by someone else does not qualify), and the schedlab that
//! made it holds an exclusive `flock` on that marker for the directory's
//! whole life. A leftover is removed only when its marker is intact and the
//! lock is free; a live owner's lock is seen across PID namespaces sharing
//! the directory, where its PID would mean nothing. A name alone never
//! qualifies a directory for removal.
//!
//! The same directories, under a name of the caller's ([`OwnedDir::create_named`],
//! [`remove_leftovers_named`]), hold the temporary file of an output being
//! written ([`crate::output`]).

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Name prefix of the directories (for people looking at the work directory).
const PREFIX: &str = "schedlab-";
/// The marker file inside an owned directory.
pub const MARKER: &str = ".schedlab-owned";
/// The marker while it is being written (renamed to [`MARKER`] when whole).
const MARKER_STAGING: &str = ".schedlab-owned.new";
/// First line of a marker; the format's version follows the last space.
const MAGIC: &str = "schedlab owned directory v1";
/// A marker is a few lines; anything longer is not one of ours.
const MARKER_MAX_BYTES: u64 = 4096;

/// A directory schedlab made and holds: removed with its contents when
/// dropped; the lock on its marker is released with it.
pub struct OwnedDir {
    path: PathBuf,
    // Held for the directory's life: another schedlab's clean-up sees it.
    _lock: File,
    /// Left in place when dropped (tests of the clean-up only).
    kept: bool,
}

impl Drop for OwnedDir {
    fn drop(&mut self) {
        if !self.kept {
            // Removed before the lock (a field) is released, so no other
            // schedlab judges a half-removed directory.
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

impl OwnedDir {
    /// Make `parent/schedlab-<pid>-<random>` with its locked marker.
    pub fn create_in(parent: &Path) -> io::Result<OwnedDir> {
        OwnedDir::create_named(parent, &format!("{PREFIX}{}-", std::process::id()))
    }

    /// Make `parent/<prefix><random>` with its locked marker.
    pub fn create_named(parent: &Path, prefix: &str) -> io::Result<OwnedDir> {
        for _ in 0..NAME_TRIES {
            let random = uuid::Uuid::new_v4().simple().to_string();
            let name = format!("{prefix}{}", &random[..10]);
            match OwnedDir::create_exact(parent, &name) {
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                made => return made,
            }
        }
        Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("no free name {prefix}… in {}", parent.display()),
        ))
    }

    /// Make `parent/name` and its marker. The intent to make it is
    /// announced first, in a locked file that appears whole
    /// ([`Intent`]): a schedlab killed between the directory and its marker
    /// leaves an empty directory that the intent proves its own.
    fn create_exact(parent: &Path, name: &str) -> io::Result<OwnedDir> {
        let intent = Intent::announce(parent, name)?;
        let path = parent.join(name);
        std::fs::create_dir(&path)?;
        let lock = match write_marker(&path) {
            Ok(lock) => lock,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&path);
                return Err(e);
            }
        };
        // The marker now proves the directory; the intent is done.
        drop(intent);
        Ok(OwnedDir {
            path,
            _lock: lock,
            kept: false,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Release the lock and keep the directory, as a SIGKILL would: for
    /// tests of the clean-up.
    #[cfg(test)]
    pub(crate) fn abandon(mut self) -> PathBuf {
        self.kept = true;
        self.path.clone()
    }
}

/// Write the directory's marker, whole under another name and renamed into
/// place, so a schedlab killed while making it never leaves an empty or
/// partial marker under its name. Returns the marker, locked.
fn write_marker(dir: &Path) -> io::Result<File> {
    let meta = std::fs::symlink_metadata(dir)?;
    let staging = dir.join(MARKER_STAGING);
    let mut marker = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&staging)?;
    // A new file nobody else has opened: the lock cannot be held. The
    // lock belongs to the open file and stays with it through the rename.
    marker.try_lock().map_err(io::Error::other)?;
    let text = format!(
        "{MAGIC}\ndev {}\nino {}\npid {}\nboot {}\n",
        meta.dev(),
        meta.ino(),
        std::process::id(),
        boot_id()
    );
    marker.write_all(text.as_bytes())?;
    marker.sync_all()?;
    std::fs::rename(&staging, dir.join(MARKER))?;
    Ok(marker)
}

/// How many random names are tried before giving up.
const NAME_TRIES: usize = 64;
/// Name prefix of an intent file, followed by the directory's name.
const INTENT_PREFIX: &str = ".schedlab-intent-";
/// First line of an intent file.
const INTENT_MAGIC: &str = "schedlab intends directory v1";

/// A schedlab's announcement, beside the directory, that it is about to
/// make it: `parent/.schedlab-intent-<name>`, created whole and locked
/// ([`crate::sys::wholefile`]), removed once the directory's marker is in
/// place. Without `O_TMPFILE` on the filesystem there is no intent, and a
/// kill in that instant can leave an empty directory (never removed, as it
/// is not provably ours).
struct Intent {
    path: PathBuf,
    _file: File,
    /// Left in place when dropped (tests of the clean-up only).
    kept: bool,
}

impl Intent {
    fn announce(parent: &Path, name: &str) -> io::Result<Option<Intent>> {
        let file_name = format!("{INTENT_PREFIX}{name}");
        let text = format!(
            "{INTENT_MAGIC}\nname {name}\npid {}\nboot {}\n",
            std::process::id(),
            boot_id()
        );
        let made = crate::sys::wholefile::create_locked(parent, &file_name, text.as_bytes())?;
        Ok(made.map(|file| Intent {
            path: parent.join(file_name),
            _file: file,
            kept: false,
        }))
    }

    /// Release the lock and keep the file, as a SIGKILL would (tests).
    #[cfg(test)]
    fn abandon(mut self) {
        self.kept = true;
    }
}

impl Drop for Intent {
    fn drop(&mut self) {
        // Unlinked while still locked, so a clean-up never acts on it.
        if !self.kept {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// The kernel's boot id, recorded for people reading a marker.
fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Whether `marker`'s text names the directory with this device and inode.
pub fn marker_matches(text: &str, dev: u64, ino: u64) -> bool {
    let mut lines = text.lines();
    if lines.next() != Some(MAGIC) {
        return false;
    }
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
            .and_then(|v| v.parse::<u64>().ok())
    };
    field("dev") == Some(dev) && field("ino") == Some(ino)
}

/// What a clean-up did with one candidate directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// A leftover of a schedlab no longer holding it: removed.
    Removed,
    /// Ours, but a live schedlab holds it.
    Live,
    /// Not provably schedlab's (no marker, a marker of another directory,
    /// not a plain directory): left alone.
    NotOurs,
}

/// Remove the directories in `workdir` that a schedlab made and no longer
/// holds. Returns what was removed. Never follows symbolic links and never
/// touches a directory without an intact marker.
pub fn remove_leftovers(workdir: &Path) -> Vec<PathBuf> {
    remove_leftovers_named(workdir, PREFIX)
}

/// [`remove_leftovers`] of the directories whose names start with `prefix`
/// (the name only picks the candidates; each is judged by its marker).
pub fn remove_leftovers_named(workdir: &Path, prefix: &str) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(workdir) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for e in entries.flatten() {
        if !e.file_name().to_string_lossy().starts_with(prefix) {
            continue;
        }
        let path = e.path();
        if judge(&path) == Verdict::Removed {
            removed.push(path);
        }
    }
    removed.extend(settle_intents(workdir, prefix));
    removed
}

/// Settle the intents dead schedlabs left in `workdir` for directories
/// named `prefix…`: each names the directory its maker was making when it
/// died. That directory is removed when it is a marked leftover, or still
/// unmarked and empty (or holding only a cut-short staging marker); then
/// the intent goes. Returns the directories removed.
fn settle_intents(workdir: &Path, prefix: &str) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(workdir) else {
        return Vec::new();
    };
    let wanted = format!("{INTENT_PREFIX}{prefix}");
    let mut removed = Vec::new();
    for e in entries.flatten() {
        if e.file_name().to_string_lossy().starts_with(&wanted) {
            removed.extend(settle_intent(workdir, &e.path()));
        }
    }
    removed
}

/// Settle one intent file (see [`settle_intents`]).
fn settle_intent(workdir: &Path, intent: &Path) -> Option<PathBuf> {
    let (file, text) = open_small(intent)?;
    let name = intent_names(&text)?;
    let own_name = intent.file_name()?.to_str()?;
    if own_name.strip_prefix(INTENT_PREFIX) != Some(name) {
        return None;
    }
    // Held by its live maker: the directory is being made right now.
    file.try_lock().ok()?;
    let dir = workdir.join(name);
    let removed = match judge(&dir) {
        Verdict::Removed => Some(dir),
        Verdict::Live => return None,
        Verdict::NotOurs => remove_unmarked(&dir).then_some(dir),
    };
    let _ = std::fs::remove_file(intent);
    removed
}

/// The directory name an intent's text announces, if it is one of ours.
fn intent_names(text: &str) -> Option<&str> {
    let mut lines = text.lines();
    if lines.next() != Some(INTENT_MAGIC) {
        return None;
    }
    let name = text.lines().find_map(|l| l.strip_prefix("name "))?;
    let plain = !name.is_empty() && !name.contains('/') && name != "." && name != "..";
    plain.then_some(name)
}

/// Remove `dir` when it is a plain directory holding nothing, or only a
/// staging marker (its maker died while writing it). Anything else in it
/// is not provably ours and keeps the directory.
fn remove_unmarked(dir: &Path) -> bool {
    let is_dir = std::fs::symlink_metadata(dir).is_ok_and(|m| m.file_type().is_dir());
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    let names: Vec<_> = entries.flatten().map(|e| e.file_name()).collect();
    let only_staging = names.iter().all(|n| n.as_os_str() == MARKER_STAGING);
    if !is_dir || names.len() > 1 || !only_staging {
        return false;
    }
    if !names.is_empty() {
        let staging = dir.join(MARKER_STAGING);
        if !is_small_file(&staging) || std::fs::remove_file(&staging).is_err() {
            return false;
        }
    }
    std::fs::remove_dir(dir).is_ok()
}

/// Whether `p` is a regular file (not a link) no longer than a marker.
fn is_small_file(p: &Path) -> bool {
    std::fs::symlink_metadata(p)
        .is_ok_and(|m| m.file_type().is_file() && m.len() <= MARKER_MAX_BYTES)
}

/// A marker or an intent, opened and read: a regular file no longer than
/// [`MARKER_MAX_BYTES`] (anything else is not one of ours).
fn open_small(p: &Path) -> Option<(File, String)> {
    if !is_small_file(p) {
        return None;
    }
    let mut file = OpenOptions::new().read(true).open(p).ok()?;
    let mut text = String::new();
    (&mut file)
        .take(MARKER_MAX_BYTES)
        .read_to_string(&mut text)
        .ok()?;
    Some((file, text))
}

/// Decide about one directory, removing it when it is a free leftover.
pub fn judge(path: &Path) -> Verdict {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return Verdict::NotOurs;
    };
    if !meta.file_type().is_dir() {
        return Verdict::NotOurs;
    }
    // The marker, or else its staging copy: a schedlab killed while syncing
    // the marker, before renaming it into place, leaves a whole one under
    // that name, which proves the directory just as well.
    let marker_path = match (path.join(MARKER), path.join(MARKER_STAGING)) {
        (m, _) if is_small_file(&m) => m,
        (_, s) if is_small_file(&s) => s,
        _ => return Verdict::NotOurs,
    };
    let Some((marker, text)) = open_small(&marker_path) else {
        return Verdict::NotOurs;
    };
    if !marker_matches(&text, meta.dev(), meta.ino()) {
        return Verdict::NotOurs;
    }
    match marker.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => return Verdict::Live,
        Err(std::fs::TryLockError::Error(_)) => return Verdict::NotOurs,
    }
    // Held while removing, so no other schedlab judges it at the same time.
    match std::fs::remove_dir_all(path) {
        Ok(()) => Verdict::Removed,
        Err(_) => Verdict::NotOurs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marker_names_its_own_directory_only() {
        let t = format!("{MAGIC}\ndev 5\nino 77\npid 1\nboot x\n");
        assert!(marker_matches(&t, 5, 77));
        assert!(!marker_matches(&t, 5, 78));
        assert!(!marker_matches(&t, 6, 77));
        assert!(!marker_matches("dev 5\nino 77\n", 5, 77));
        assert!(!marker_matches(&format!("{MAGIC}\nino 77\n"), 5, 77));
    }

    #[test]
    fn a_held_directory_is_live_and_a_released_one_is_removed() {
        let parent = tempfile::tempdir().unwrap();
        let owned = OwnedDir::create_in(parent.path()).unwrap();
        let path = owned.path().to_path_buf();
        // The marker is in place whole; its staging name is gone.
        let meta = std::fs::metadata(&path).unwrap();
        let text = std::fs::read_to_string(path.join(MARKER)).unwrap();
        assert!(marker_matches(&text, meta.dev(), meta.ino()), "{text}");
        assert!(!path.join(MARKER_STAGING).exists());
        assert_eq!(judge(&path), Verdict::Live);
        assert!(path.exists());
        // Release the lock but keep the directory, as a SIGKILL would.
        let kept = owned.abandon();
        assert_eq!(remove_leftovers(parent.path()), vec![kept.clone()]);
        assert!(!kept.exists());
    }

    #[test]
    fn a_leftover_killed_before_its_marker_was_renamed_is_removed() {
        let parent = tempfile::tempdir().unwrap();
        let kept = OwnedDir::create_in(parent.path()).unwrap().abandon();
        // As if killed after writing the staging marker, before the rename.
        std::fs::rename(kept.join(MARKER), kept.join(MARKER_STAGING)).unwrap();
        assert_eq!(remove_leftovers(parent.path()), vec![kept.clone()]);
        assert!(!kept.exists());
        // A staging marker that was cut short proves nothing: left alone.
        let kept = OwnedDir::create_in(parent.path()).unwrap().abandon();
        std::fs::remove_file(kept.join(MARKER)).unwrap();
        std::fs::write(kept.join(MARKER_STAGING), format!("{MAGIC}\ndev ")).unwrap();
        assert!(remove_leftovers(parent.path()).is_empty());
        assert!(kept.exists());
    }

    #[test]
    fn look_alikes_are_left_alone() {
        let parent = tempfile::tempdir().unwrap();
        let p = parent.path();
        // A user's directory named like ours, with and without a forged marker.
        std::fs::create_dir(p.join("schedlab-2024-results")).unwrap();
        std::fs::write(p.join("schedlab-2024-results/important.txt"), "x").unwrap();
        std::fs::create_dir(p.join("schedlab-99999999-abc")).unwrap();
        std::fs::write(
            p.join("schedlab-99999999-abc").join(MARKER),
            format!("{MAGIC}\ndev 1\nino 2\n"),
        )
        .unwrap();
        // A copy of a real one: its marker names another inode.
        let owned = OwnedDir::create_in(p).unwrap();
        std::fs::create_dir(p.join("schedlab-copy")).unwrap();
        std::fs::copy(
            owned.path().join(MARKER),
            p.join("schedlab-copy").join(MARKER),
        )
        .unwrap();
        // A symbolic link to a real leftover.
        std::os::unix::fs::symlink(owned.path(), p.join("schedlab-link")).unwrap();
        // A plain file.
        std::fs::write(p.join("schedlab-file"), "x").unwrap();
        drop(owned);
        assert!(remove_leftovers(p).is_empty());
        for name in [
            "schedlab-2024-results/important.txt",
            "schedlab-99999999-abc",
            "schedlab-copy",
            "schedlab-file",
        ] {
            assert!(p.join(name).exists(), "{name} was removed");
        }
    }

    /// The files of `dir`, sorted.
    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn making_a_directory_leaves_no_intent_behind() {
        let parent = tempfile::tempdir().unwrap();
        let owned = OwnedDir::create_in(parent.path()).unwrap();
        let name = owned
            .path()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        assert_eq!(names(parent.path()), vec![name]);
        drop(owned);
        assert!(names(parent.path()).is_empty());
    }

    #[test]
    fn a_directory_killed_before_its_marker_is_removed_through_its_intent() {
        let parent = tempfile::tempdir().unwrap();
        let p = parent.path();
        // Killed right after making the directory.
        let intent = Intent::announce(p, "schedlab-1-aaaa").unwrap().unwrap();
        std::fs::create_dir(p.join("schedlab-1-aaaa")).unwrap();
        // While its maker lives, nothing is touched.
        assert!(remove_leftovers(p).is_empty());
        assert!(p.join("schedlab-1-aaaa").exists());
        intent.abandon();
        // Killed while writing the staging marker.
        let intent = Intent::announce(p, "schedlab-1-bbbb").unwrap().unwrap();
        std::fs::create_dir(p.join("schedlab-1-bbbb")).unwrap();
        std::fs::write(p.join("schedlab-1-bbbb").join(MARKER_STAGING), "sched").unwrap();
        intent.abandon();
        // Killed before making the directory at all.
        Intent::announce(p, "schedlab-1-cccc")
            .unwrap()
            .unwrap()
            .abandon();
        let mut removed = remove_leftovers(p);
        removed.sort();
        assert_eq!(
            removed,
            vec![p.join("schedlab-1-aaaa"), p.join("schedlab-1-bbbb")]
        );
        assert!(names(p).is_empty(), "{:?}", names(p));
    }

    #[test]
    fn intents_never_remove_what_is_not_provably_ours() {
        let parent = tempfile::tempdir().unwrap();
        let p = parent.path();
        // A directory with someone's file in it, named by a dead intent.
        std::fs::create_dir(p.join("schedlab-1-data")).unwrap();
        std::fs::write(p.join("schedlab-1-data/important.txt"), "x").unwrap();
        Intent::announce(p, "schedlab-1-data")
            .unwrap()
            .unwrap()
            .abandon();
        // Forged intents: another name inside, a path, no magic.
        std::fs::create_dir(p.join("schedlab-1-empty")).unwrap();
        std::fs::write(
            p.join(format!("{INTENT_PREFIX}schedlab-1-x")),
            format!("{INTENT_MAGIC}\nname schedlab-1-empty\n"),
        )
        .unwrap();
        std::fs::write(
            p.join(format!("{INTENT_PREFIX}schedlab-1-..")),
            format!("{INTENT_MAGIC}\nname schedlab-1-../..\n"),
        )
        .unwrap();
        std::fs::write(
            p.join(format!("{INTENT_PREFIX}schedlab-1-empty")),
            "name schedlab-1-empty\n",
        )
        .unwrap();
        assert!(remove_leftovers(p).is_empty());
        assert!(p.join("schedlab-1-data/important.txt").exists());
        assert!(p.join("schedlab-1-empty").exists());
    }
}
