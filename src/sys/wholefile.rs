//! Files that appear whole or not at all: written unnamed (`O_TMPFILE`),
//! locked, synced, and only then given their name (`linkat`). A process
//! killed at any point leaves either nothing or the complete file, never an
//! empty or partial one under the name.

use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Make `dir/name` holding `content`, with an exclusive `flock` held on the
/// returned file (taken before the file has a name, so nobody ever sees it
/// unlocked while its maker lives). `Ok(None)` when the filesystem cannot
/// make unnamed files (`O_TMPFILE`: e.g. NFS, or a kernel before 3.11);
/// `AlreadyExists` when the name is taken.
pub fn create_locked(dir: &Path, name: &str, content: &[u8]) -> io::Result<Option<File>> {
    let file = match OpenOptions::new()
        .read(true)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_TMPFILE)
        .open(dir)
    {
        Ok(f) => f,
        Err(e) if unsupported(&e) => return Ok(None),
        Err(e) => return Err(e),
    };
    // A new unnamed file nobody else can open: the lock cannot be held.
    file.try_lock().map_err(io::Error::other)?;
    (&file).write_all(content)?;
    file.sync_all()?;
    link(&file, &dir.join(name))?;
    Ok(Some(file))
}

/// Whether `open(O_TMPFILE)` failed because the filesystem or kernel lacks
/// it (the kernel's documented errors for that case).
fn unsupported(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EOPNOTSUPP) | Some(libc::EISDIR) | Some(libc::EINVAL)
    )
}

/// Give the unnamed `file` the name `to` through its `/proc/self/fd` link
/// (`AT_SYMLINK_FOLLOW`: works without CAP_DAC_READ_SEARCH, unlike
/// `AT_EMPTY_PATH`).
fn link(file: &File, to: &Path) -> io::Result<()> {
    let from = CString::new(format!("/proc/self/fd/{}", file.as_raw_fd()))
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let to = CString::new(to.as_os_str().as_bytes())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    // SAFETY: both are NUL-terminated paths that outlive the call; no other
    // memory is involved.
    let rc = unsafe {
        libc::linkat(
            libc::AT_FDCWD,
            from.as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            libc::AT_SYMLINK_FOLLOW,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_appears_whole_and_locked() {
        let d = tempfile::tempdir().unwrap();
        let Some(f) = create_locked(d.path(), "x", b"hello").unwrap() else {
            // tmpfs and ext4 both have O_TMPFILE; a test directory without
            // it would make this test meaningless, so say so loudly.
            panic!("O_TMPFILE unsupported under {}", d.path().display());
        };
        assert_eq!(std::fs::read(d.path().join("x")).unwrap(), b"hello");
        let other = File::open(d.path().join("x")).unwrap();
        assert!(matches!(
            other.try_lock(),
            Err(std::fs::TryLockError::WouldBlock)
        ));
        drop(f);
        assert!(other.try_lock().is_ok());
        // The name is never replaced.
        let e = create_locked(d.path(), "x", b"again").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read(d.path().join("x")).unwrap(), b"hello");
    }
}
