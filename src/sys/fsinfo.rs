//! Facts about filesystems schedlab writes to: whether a path may be
//! written (`faccessat`), and how much space is free there (`statvfs`).

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

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
}
