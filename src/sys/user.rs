//! Users by name: the user database's ids of a user (`getpwnam_r`) and the
//! groups it belongs to (`getgrouplist`), and the switch of the calling
//! process to them (`setgroups`, `setgid`, `setuid`), as a `command`
//! workload's `user` key asks: run the program as this user.

use std::ffi::CString;
use std::io;

/// A user's ids, as the user database gives them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserIds {
    pub name: String,
    pub uid: u32,
    /// The primary group.
    pub gid: u32,
    /// Every group the user is in, the primary one included.
    pub groups: Vec<u32>,
}

/// First size of the buffer `getpwnam_r` fills with strings; doubled on
/// ERANGE up to `PW_BUF_MAX`.
const PW_BUF_START: usize = 1024;
const PW_BUF_MAX: usize = 1 << 20;

/// The user called `name`; `None` when the database has no such user. A
/// name with a NUL byte is refused with `InvalidInput`.
pub fn lookup(name: &str) -> io::Result<Option<UserIds>> {
    let c = CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let mut buf = vec![0u8; PW_BUF_START];
    let (uid, gid) = loop {
        // SAFETY: passwd is plain old data (integers and pointers), for
        // which all-zero bytes are a valid value; getpwnam_r fills it.
        let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
        let mut found: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: `c` is a NUL-terminated string, `pw` and `found` are
        // valid for writes, and `buf` is valid for `buf.len()` bytes; the
        // strings `pw` points to live in `buf`, which is not read here.
        let rc = unsafe {
            libc::getpwnam_r(
                c.as_ptr(),
                &mut pw,
                buf.as_mut_ptr().cast(),
                buf.len(),
                &mut found,
            )
        };
        if rc == libc::ERANGE && buf.len() < PW_BUF_MAX {
            buf.resize(buf.len() * 2, 0);
            continue;
        }
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        if found.is_null() {
            return Ok(None);
        }
        break (pw.pw_uid, pw.pw_gid);
    };
    let groups = group_list(&c, gid)?;
    Ok(Some(UserIds {
        name: name.to_string(),
        uid,
        gid,
        groups,
    }))
}

/// The groups of the user `name` whose primary group is `gid`.
fn group_list(name: &CString, gid: u32) -> io::Result<Vec<u32>> {
    let mut groups: Vec<libc::gid_t> = vec![0; 32];
    for _ in 0..8 {
        let mut n = libc::c_int::try_from(groups.len()).unwrap_or(libc::c_int::MAX);
        // SAFETY: `name` is NUL-terminated and `groups` is valid for `n`
        // entries; getgrouplist writes at most `n` and sets `n` to the
        // count it needs.
        let rc = unsafe { libc::getgrouplist(name.as_ptr(), gid, groups.as_mut_ptr(), &mut n) };
        let n = usize::try_from(n).unwrap_or(0);
        if rc >= 0 {
            groups.truncate(n);
            return Ok(groups);
        }
        groups.resize(n.max(groups.len() * 2), 0);
    }
    Err(io::Error::other("getgrouplist kept asking for more room"))
}

/// Switch the calling process for good to `ids`: its groups, then its
/// group, then its user (in that order: once the user is not root the
/// other two are no longer allowed). glibc applies each to every thread.
/// Needs root (CAP_SETUID, CAP_SETGID) unless `ids` are the caller's own.
/// The parent-death signal is cleared by the kernel on this change: a
/// caller that relies on it sets it again.
pub fn become_user(ids: &UserIds) -> io::Result<()> {
    let check = |rc: libc::c_int, what: &str| {
        if rc == 0 {
            Ok(())
        } else {
            let e = io::Error::last_os_error();
            Err(io::Error::new(
                e.kind(),
                format!("{what} for user {}: {e}", ids.name),
            ))
        }
    };
    // SAFETY: `ids.groups` is valid for `len` entries, which setgroups only
    // reads.
    let rc = unsafe { libc::setgroups(ids.groups.len(), ids.groups.as_ptr()) };
    check(rc, "setgroups")?;
    // SAFETY: setgid with an integer argument.
    check(unsafe { libc::setgid(ids.gid) }, "setgid")?;
    // SAFETY: setuid with an integer argument.
    check(unsafe { libc::setuid(ids.uid) }, "setuid")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_is_uid_zero_and_in_its_group() {
        let root = lookup("root").unwrap().expect("every Linux has root");
        assert_eq!((root.uid, root.gid), (0, 0));
        assert!(root.groups.contains(&0), "{root:?}");
    }

    #[test]
    fn an_unknown_user_is_none_and_a_nul_is_refused() {
        assert_eq!(lookup("schedlab-no-such-user-42").unwrap(), None);
        let e = lookup("ro\0ot").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }

    /// Set in the child the test below starts: become `nobody` and check.
    const CHILD_ENV: &str = "SCHEDLAB_TEST_BECOME_NOBODY";

    #[test]
    fn become_user_switches_every_id_of_a_process() {
        let nobody = lookup("nobody").unwrap().expect("Debian has user nobody");
        if std::env::var_os(CHILD_ENV).is_some() {
            // In the child: switch for good, then read back what the kernel says.
            become_user(&nobody).unwrap();
            let status = std::fs::read_to_string("/proc/self/status").unwrap();
            let field = |k: &str| {
                let line = status.lines().find(|l| l.starts_with(k)).unwrap();
                line[k.len()..]
                    .split_whitespace()
                    .map(str::to_string)
                    .collect::<Vec<_>>()
            };
            let uid = nobody.uid.to_string();
            let gid = nobody.gid.to_string();
            assert_eq!(field("Uid:"), [uid.as_str(); 4]);
            assert_eq!(field("Gid:"), [gid.as_str(); 4]);
            let mut want: Vec<String> = nobody.groups.iter().map(u32::to_string).collect();
            want.sort();
            let mut got = field("Groups:");
            got.sort();
            assert_eq!(got, want);
            // No way back: root's ids are refused now.
            let root = lookup("root").unwrap().unwrap();
            assert!(become_user(&root).is_err());
            return;
        }
        if !crate::testing::require(
            crate::sys::proc::euid() == 0,
            "switching to another user needs root",
        ) {
            return;
        }
        // The switch is for good, so it runs in a copy of this test program.
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "sys::user::tests::become_user_switches_every_id_of_a_process",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, "1")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("1 passed"),
            "{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
