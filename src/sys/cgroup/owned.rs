//! Proving that a cgroup is a session parent schedlab made, before anything
//! in it is killed or removed: its name (`schedlab.<pid>.<start>.<token>`),
//! a real directory reached without any symbolic link, on a cgroup
//! filesystem, and carrying schedlab's marker: the extended attribute
//! [`MARKER_XATTR`] holding the group's own name, set right after it was
//! made (cgroupfs keeps `trusted.*` attributes in every hierarchy; only
//! root can set them). A symbolic link named like a parent, or another
//! group renamed or bind-mounted to look like one, has no marker of that
//! name and is left alone.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use anyhow::{Result, bail};

/// The extended attribute marking a session parent as schedlab's.
pub const MARKER_XATTR: &str = "trusted.schedlab.session";

/// Whether `name` is shaped like a session parent's name.
pub fn named_ours(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("schedlab.") && n.split('.').count() == 4)
}

/// Marks the group at `dir` as the session parent named so.
pub fn mark(dir: &Path) -> std::io::Result<()> {
    let name = dir.file_name().map(|n| n.as_bytes()).unwrap_or_default();
    set_xattr(dir, MARKER_XATTR, name)
}

/// The group's marker, if it has one.
pub fn marker(dir: &Path) -> Option<Vec<u8>> {
    get_xattr(dir, MARKER_XATTR)
}

/// Checks everything the module documentation lists; the error names the
/// path and what is wrong. `Ok(false)`: the path does not exist.
pub fn check_parent(path: &Path) -> Result<bool> {
    if !named_ours(path) {
        bail!(
            "the journal names {}, which is not a group schedlab makes; it is left alone",
            path.display()
        );
    }
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => bail!("cannot look at {}: {e}; it is left alone", path.display()),
    };
    let resolved = std::fs::canonicalize(path).ok();
    if !meta.is_dir() || resolved.as_deref() != Some(path) {
        bail!(
            "the journal names {}, which is reached through a symbolic link ({}); it is left \
             alone",
            path.display(),
            resolved.map_or("unresolvable".into(), |r| format!(
                "it resolves to {}",
                r.display()
            ))
        );
    }
    if !super::mounts::on_cgroupfs(path) {
        bail!(
            "the journal names {}, which is not on a cgroup filesystem; it is left alone",
            path.display()
        );
    }
    let name = path.file_name().map(|n| n.as_bytes().to_vec());
    if marker(path) != name {
        bail!(
            "the journal names {}, which does not carry schedlab's marker ({MARKER_XATTR}); it \
             is left alone",
            path.display()
        );
    }
    Ok(true)
}

fn c_path(path: &Path) -> std::io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))
}

fn set_xattr(path: &Path, name: &str, value: &[u8]) -> std::io::Result<()> {
    let p = c_path(path)?;
    let n =
        CString::new(name).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    // SAFETY: NUL-terminated path and name, a value buffer of its length;
    // lsetxattr does not follow a symbolic link.
    let rc = unsafe {
        libc::lsetxattr(
            p.as_ptr(),
            n.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    };
    match rc {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

fn get_xattr(path: &Path, name: &str) -> Option<Vec<u8>> {
    let p = c_path(path).ok()?;
    let n = CString::new(name).ok()?;
    let mut buf = vec![0u8; 256];
    // SAFETY: NUL-terminated path and name, a buffer of its length; lgetxattr
    // does not follow a symbolic link.
    let len =
        unsafe { libc::lgetxattr(p.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    let len = usize::try_from(len).ok()?;
    buf.truncate(len);
    Some(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A symbolic link named like a parent (the hostile finding: it led to
    /// another group, whose processes were killed) is refused, naming it,
    /// and what it points to is untouched. Needs no privilege: the link's
    /// check comes before the filesystem's and the marker's.
    #[test]
    fn a_symlink_named_like_a_parent_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let other = tmp.path().join("other-group");
        std::fs::create_dir(&other).unwrap();
        let link = tmp.path().join("schedlab.1.2.deadbeef");
        std::os::unix::fs::symlink(&other, &link).unwrap();
        let tmp_real = std::fs::canonicalize(tmp.path()).unwrap();
        let link = tmp_real.join("schedlab.1.2.deadbeef");
        let err = check_parent(&link).unwrap_err();
        assert!(format!("{err:#}").contains("symbolic link"), "{err:#}");
        assert!(other.exists());
        // A directory reached through a linked directory above it too.
        let real_parent = tmp_real.join("real");
        std::fs::create_dir_all(real_parent.join("schedlab.1.2.cafe0000")).unwrap();
        std::os::unix::fs::symlink(&real_parent, tmp_real.join("alias")).unwrap();
        let err = check_parent(&tmp_real.join("alias/schedlab.1.2.cafe0000")).unwrap_err();
        assert!(format!("{err:#}").contains("symbolic link"), "{err:#}");
    }
}
