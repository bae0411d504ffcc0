//! Who may measure, and who may write a campaign: the machine-wide
//! measurement lock (two measurements on one machine disturb each other, so
//! the measured part of a run holds it) and the one-runner-per-database lock
//! (two `run`s of one database would run the same pending runs twice).
//!
//! Both are `flock`s, released by the kernel when their holder dies, so a
//! killed schedlab never leaves one held. A holder writes who it is into
//! the lock file, for the message a waiting or refused schedlab prints.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Where the measurement lock lives: a sticky, world-writable directory so
/// that every user's schedlab sees the same lock.
const MACHINE_LOCK_DIRS: [&str; 2] = ["/run/lock", "/tmp"];
const MACHINE_LOCK_NAME: &str = "schedlab-measure.lock";

/// A held lock; released when dropped (or when the process dies).
pub struct Held {
    _file: File,
}

/// The lock file of the machine-wide measurement lock.
pub fn machine_lock_path() -> PathBuf {
    MACHINE_LOCK_DIRS
        .iter()
        .map(Path::new)
        .find(|d| d.is_dir())
        .unwrap_or(Path::new("/tmp"))
        .join(MACHINE_LOCK_NAME)
}

/// The lock file of a database's runner lock: beside it, like SQLite's own
/// `-wal` and `-shm` files.
pub fn database_lock_path(db: &Path) -> PathBuf {
    let mut name = db.file_name().unwrap_or_default().to_os_string();
    name.push("-runner.lock");
    db.with_file_name(name)
}

/// Open (creating, world-readable and -writable so that other users'
/// schedlabs can take it too) without following a symbolic link.
fn open_lock_file(path: &Path) -> io::Result<File> {
    let opened = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o666)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path);
    match opened {
        Ok(f) => Ok(f),
        // Made by another user with our umask: a read-only descriptor
        // locks just as well; only the holder note is lost.
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path),
        Err(e) => Err(e),
    }
}

/// Take the lock at `path` if it is free; `Ok(None)` when someone holds it.
/// The holder note (`who`) is written into the file once it is ours.
pub fn try_take(path: &Path, who: &str) -> io::Result<Option<Held>> {
    let mut f = open_lock_file(path)?;
    match f.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => return Ok(None),
        Err(std::fs::TryLockError::Error(e)) => return Err(e),
    }
    // Best effort: a read-only descriptor cannot say who holds it.
    if f.set_len(0).is_ok() {
        let _ = f.rewind();
        let _ = f.write_all(who.as_bytes());
    }
    Ok(Some(Held { _file: f }))
}

/// What the current holder wrote, or "another schedlab" when it is unknown.
pub fn holder(path: &Path) -> String {
    let mut s = String::new();
    let read = File::open(path).and_then(|f| f.take(1024).read_to_string(&mut s));
    let s = s.trim();
    if read.is_err() || s.is_empty() {
        "another schedlab".into()
    } else {
        crate::out::esc(s).into_owned()
    }
}

/// The note a holder leaves: its pid, what it runs and since when.
pub fn holder_note(what: &str) -> String {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    format!(
        "pid {} ({what}, since unix time {since})",
        std::process::id()
    )
}

/// Take the measurement lock for a short measurement of one's own (a
/// calibration), polling while a run holds it; Ctrl-C ends the wait with
/// the process. Says once who holds it.
pub fn wait_quietly_for_machine(what: &str) -> io::Result<Held> {
    let path = machine_lock_path();
    let note = holder_note(what);
    let mut told = false;
    loop {
        if let Some(held) = try_take(&path, &note)? {
            return Ok(held);
        }
        if !told {
            crate::note!("waiting for the machine: {} is measuring", holder(&path));
            told = true;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_lock_is_refused_and_names_its_holder_until_released() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("l.lock");
        let held = try_take(&p, "pid 1 (test)").unwrap().expect("free");
        assert!(try_take(&p, "pid 2").unwrap().is_none());
        assert_eq!(holder(&p), "pid 1 (test)");
        drop(held);
        let again = try_take(&p, "pid 3 (again)").unwrap().expect("released");
        assert_eq!(holder(&p), "pid 3 (again)");
        drop(again);
    }

    #[test]
    fn a_symbolic_link_is_not_followed() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("target");
        std::fs::write(&target, "keep").unwrap();
        let link = d.path().join("l.lock");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(try_take(&link, "x").is_err());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
    }

    #[test]
    fn the_database_lock_sits_beside_the_database() {
        assert_eq!(
            database_lock_path(Path::new("/a/b/t.db")),
            Path::new("/a/b/t.db-runner.lock")
        );
        assert_eq!(
            database_lock_path(Path::new("t.db")),
            Path::new("t.db-runner.lock")
        );
    }
}
