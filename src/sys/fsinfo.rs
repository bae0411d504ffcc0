//! Facts about filesystems schedlab writes to: whether a path may be
//! written (`faccessat`), and how much space is free there (`statvfs`).

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// `faccessat(path, W_OK, AT_EACCESS)`: EACCES, EROFS, ENOENT, … as errors.
/// Root passes permission checks but not a read-only mount (EROFS).
pub fn writable(path: &Path) -> io::Result<()> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    // SAFETY: `c` is a NUL-terminated path; no other memory is involved.
    let rc = unsafe { libc::faccessat(libc::AT_FDCWD, c.as_ptr(), libc::W_OK, libc::AT_EACCESS) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Bytes an unprivileged writer may still use on the filesystem of `path`
/// (`f_bavail × f_frsize`).
pub fn free_bytes(path: &Path) -> io::Result<u64> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    // SAFETY: statvfs is plain old data; zeroed is a valid value for it.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path and `st` a valid, writable statvfs.
    let rc = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((st.f_bavail as u64).saturating_mul(st.f_frsize as u64))
}

/// `path` itself when it exists, else its nearest existing ancestor (where
/// a `create_dir_all(path)` would start): the directory whose filesystem
/// and permissions decide whether `path` can be made and written.
pub fn nearest_existing(path: &Path) -> Option<PathBuf> {
    let mut p = Some(path);
    while let Some(cur) = p {
        if std::fs::symlink_metadata(cur).is_ok() {
            return Some(cur.to_path_buf());
        }
        p = cur.parent().filter(|x| !x.as_os_str().is_empty());
    }
    Some(PathBuf::from("."))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_temporary_directory_is_writable_and_has_space() {
        let d = tempfile::tempdir().unwrap();
        writable(d.path()).unwrap();
        assert!(free_bytes(d.path()).unwrap() > 0);
        assert!(writable(&d.path().join("missing")).is_err());
        assert!(free_bytes(&d.path().join("missing")).is_err());
    }

    #[test]
    fn the_nearest_existing_ancestor_is_found() {
        let d = tempfile::tempdir().unwrap();
        let deep = d.path().join("a/b/c");
        assert_eq!(nearest_existing(&deep).unwrap(), d.path());
        assert_eq!(nearest_existing(d.path()).unwrap(), d.path());
        assert_eq!(
            nearest_existing(Path::new("relative/missing")).unwrap(),
            PathBuf::from(".")
        );
    }
}
