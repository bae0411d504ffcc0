//! Opening a file named relative to a directory without ever leaving that
//! directory: no symbolic link (nor `..`) resolves outside it, so a
//! program cannot have schedlab (root) read `/etc/shadow` by leaving a
//! link to it where a figure's source is looked for. `openat2` with
//! RESOLVE_BENEATH (Linux 5.6); where the kernel lacks it, a walk that
//! refuses every symbolic link on the way (O_NOFOLLOW).

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path};

/// Flags of the file opened: read only, never blocking on a FIFO, never
/// becoming our controlling terminal.
const OPEN_FLAGS: libc::c_int =
    libc::O_RDONLY | libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY;

/// Open `rel` (relative) beneath `dir` for reading. A path that would
/// resolve outside `dir` fails with EXDEV (openat2) or ELOOP (a symbolic
/// link met by the fallback walk); an absolute `rel` or one with `..`
/// fails with EXDEV before any look-up.
pub fn open_beneath(dir: &Path, rel: &Path) -> io::Result<File> {
    if rel.is_absolute() || rel.components().any(|c| c == Component::ParentDir) {
        return Err(io::Error::from_raw_os_error(libc::EXDEV));
    }
    let dir = open_at(
        None,
        dir,
        libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
    )?;
    let name = cstring(rel)?;
    // SAFETY: open_how is plain old data (integers); all-zero is valid.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = OPEN_FLAGS as u64;
    how.resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS;
    // SAFETY: `dir` is an open descriptor, `name` a NUL-terminated string
    // and `how` a valid open_how of the size passed, all alive for the call.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir.as_raw_fd(),
            name.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    if fd >= 0 {
        // SAFETY: openat2 succeeded: a fresh descriptor nobody else owns.
        return Ok(File::from(unsafe { OwnedFd::from_raw_fd(fd as i32) }));
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() != Some(libc::ENOSYS) {
        return Err(e);
    }
    walk_nofollow(dir, rel)
}

/// The fallback: each directory on the way, then the file, opened with
/// O_NOFOLLOW relative to the one before.
fn walk_nofollow(mut at: OwnedFd, rel: &Path) -> io::Result<File> {
    let parts: Vec<&std::ffi::OsStr> = rel
        .components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s),
            _ => None,
        })
        .collect();
    let Some((last, dirs)) = parts.split_last() else {
        return Err(io::Error::from_raw_os_error(libc::EISDIR));
    };
    for d in dirs {
        at = open_at(
            Some(&at),
            Path::new(d),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )?;
    }
    open_at(Some(&at), Path::new(last), OPEN_FLAGS | libc::O_NOFOLLOW).map(File::from)
}

fn cstring(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
}

/// `openat(at or the working directory, path, flags)`.
fn open_at(at: Option<&OwnedFd>, path: &Path, flags: libc::c_int) -> io::Result<OwnedFd> {
    let c = cstring(path)?;
    let dirfd = at.map_or(libc::AT_FDCWD, |f| f.as_raw_fd());
    // SAFETY: `c` is a NUL-terminated string alive for the call; the flags
    // are integers.
    let fd = unsafe { libc::openat(dirfd, c.as_ptr(), flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: openat succeeded: a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::unix::fs::symlink;

    fn read(dir: &Path, rel: &str) -> io::Result<String> {
        let mut s = String::new();
        open_beneath(dir, Path::new(rel))?.read_to_string(&mut s)?;
        Ok(s)
    }

    #[test]
    fn links_inside_are_followed_and_links_out_refused() {
        let outside = tempfile::tempdir().unwrap();
        let secret = outside.path().join("secret");
        std::fs::write(&secret, "secret").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir(d.join("sub")).unwrap();
        std::fs::write(d.join("sub/out.txt"), "mine").unwrap();
        symlink("sub/out.txt", d.join("inner")).unwrap();
        symlink(&secret, d.join("absolute")).unwrap();
        symlink("../../etc/passwd", d.join("sub/up")).unwrap();
        symlink(outside.path(), d.join("outdir")).unwrap();
        assert_eq!(read(d, "sub/out.txt").unwrap(), "mine");
        assert_eq!(read(d, "inner").unwrap(), "mine");
        for rel in [
            "absolute",
            "sub/up",
            "outdir/secret",
            "../secret",
            "/etc/passwd",
        ] {
            let e = read(d, rel).unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::EXDEV), "{rel}: {e}");
        }
        // The fallback walk refuses every link, inside or not.
        let root = open_at(None, d, libc::O_PATH | libc::O_DIRECTORY).unwrap();
        assert!(walk_nofollow(root, Path::new("sub/out.txt")).is_ok());
        for rel in ["inner", "absolute", "outdir/secret"] {
            let root = open_at(None, d, libc::O_PATH | libc::O_DIRECTORY).unwrap();
            let e = walk_nofollow(root, Path::new(rel)).unwrap_err();
            assert!(
                matches!(e.raw_os_error(), Some(libc::ELOOP | libc::ENOTDIR)),
                "{rel}: {e}"
            );
        }
    }
}
