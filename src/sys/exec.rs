//! A worker replacing itself with another program (a `command` workload):
//! the `exec` itself (the descriptors it must not hand on are marked
//! close-on-exec by `fds::close_on_exec_from_raw`); and a helper program started confined
//! ([`spawn_confined`]): inside cgroups, so that nothing it forks is
//! outside them, in a session of its own, with no descriptor of ours, as
//! the workload's user.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command};

/// Replace the calling process with `cmd` (its program, arguments,
/// environment, directory and standard input; the process keeps its pid,
/// policy, priority, affinity and cgroup). Returns only on failure, with
/// the process as it was: the standard library resets SIGPIPE to its
/// default just before exec (Rust programs ignore it) and does not put it
/// back when exec fails, which would let a later write to a closed pipe
/// kill the process instead of returning EPIPE.
pub fn exec(cmd: &mut Command) -> io::Error {
    let e = cmd.exec();
    // SAFETY: signal() with a constant disposition for a valid signal
    // number; SIGPIPE ignored is how every Rust program starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
    e
}

/// Ask the kernel again to SIGKILL the calling process when its parent
/// dies: a change of user clears the setting (prctl(2)).
pub fn die_with_parent() -> io::Result<()> {
    crate::sys::proc::die_with_parent_raw().map_err(io::Error::from_raw_os_error)
}

/// Whom a program started by [`spawn_confined`] runs as, and where.
pub struct Confinement<'a> {
    /// The `cgroup.procs` files of the groups it joins.
    pub procs_files: &'a [PathBuf],
    /// The user it runs as (None: schedlab's own).
    pub user: Option<&'a crate::sys::user::UserIds>,
    /// Its working directory, entered again as `user` (the standard
    /// library enters it before the switch, as root).
    pub dir: &'a std::path::Path,
}

/// Starts `cmd` confined: between fork and exec the child asks to be
/// killed with its parent, joins the cgroups of `c.procs_files` (writing
/// "0", itself, into each: nothing of the program runs or forks outside
/// them; a group that refuses it fails the spawn and the program is not
/// run), takes a session of its own (no controlling terminal: it cannot
/// type into schedlab's), marks every descriptor above standard error
/// close-on-exec (it gets 0-2 alone), and only then switches to `c.user`
/// (groups, group, user: joining a root-owned cgroup needs root), enters
/// `c.dir` as that user and asks again to die with its parent (the switch
/// cleared it). Its process group is its pid, as with `process_group(0)`,
/// which `cmd` must not set (a group leader cannot start a session).
pub fn spawn_confined(cmd: &mut Command, c: &Confinement) -> io::Result<Child> {
    let cstr = |p: &std::path::Path| {
        CString::new(p.as_os_str().as_bytes())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
    };
    let paths: Vec<CString> = c
        .procs_files
        .iter()
        .map(|p| cstr(p))
        .collect::<Result<_, _>>()?;
    let dir = cstr(c.dir)?;
    let user = c
        .user
        .map(|u| (u.uid, u.gid, u.groups.clone()))
        .filter(|(uid, _, _)| *uid != crate::sys::proc::euid());
    let os = io::Error::from_raw_os_error;
    let last = || io::Error::last_os_error();
    // SAFETY: the closure runs in the child between fork and exec and
    // calls only async-signal-safe functions (prctl, open, write, close,
    // setsid, close_range or fcntl, setgroups, setgid, setuid, chdir) on
    // memory made before the fork; it allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            crate::sys::proc::die_with_parent_raw().map_err(os)?;
            for path in &paths {
                let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if fd < 0 {
                    return Err(last());
                }
                let n = libc::write(fd, b"0".as_ptr().cast(), 1);
                let e = last();
                libc::close(fd);
                if n != 1 {
                    return Err(e);
                }
            }
            crate::sys::proc::own_session_raw().map_err(os)?;
            crate::sys::fds::close_on_exec_from_raw(3).map_err(os)?;
            if let Some((uid, gid, groups)) = &user {
                if libc::setgroups(groups.len(), groups.as_ptr()) != 0
                    || libc::setgid(*gid) != 0
                    || libc::setuid(*uid) != 0
                    || libc::chdir(dir.as_ptr()) != 0
                {
                    return Err(last());
                }
                crate::sys::proc::die_with_parent_raw().map_err(os)?;
            }
            Ok(())
        });
    }
    cmd.spawn()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsRawFd;

    #[test]
    fn a_failed_exec_returns_the_error_and_leaves_sigpipe_ignored() {
        let e = exec(&mut Command::new("/nonexistent/schedlab-no-such-program"));
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        // A write to a pipe without a reader is EPIPE, not death.
        let (r, w) = crate::sys::proc::pipe().unwrap();
        drop(r);
        let err = std::fs::File::from(w).write_all(b"x").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::BrokenPipe);
    }

    #[test]
    fn a_child_started_in_a_group_that_refuses_it_never_runs() {
        let dir = tempfile::tempdir().unwrap();
        let mark = dir.path().join("ran");
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(format!("touch {}", mark.display()));
        let absent = [dir.path().join("absent/cgroup.procs")];
        let confined = Confinement {
            procs_files: &absent,
            user: None,
            dir: dir.path(),
        };
        let e = spawn_confined(&mut cmd, &confined).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        assert!(!mark.exists(), "the program ran outside its group");
        // No group at all: it just runs (a new command: closures add up).
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(format!("touch {}", mark.display()));
        let none = Confinement {
            procs_files: &[],
            user: None,
            dir: dir.path(),
        };
        let mut child = spawn_confined(&mut cmd, &none).unwrap();
        assert!(child.wait().unwrap().success());
        assert!(mark.exists());
    }

    /// Issue 34: a helper gets a session of its own (no controlling
    /// terminal) and descriptors 0-2 alone, whatever its parent holds.
    #[test]
    fn a_confined_child_has_its_own_session_and_no_descriptor_of_ours() {
        let dir = tempfile::tempdir().unwrap();
        let (r, _w) = crate::sys::proc::pipe().unwrap();
        // Open across exec, as a shell's `exec 9<file` is.
        crate::sys::fds::keep_across_exec_raw(r.as_raw_fd()).unwrap();
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg("ls /proc/$$/fd; ps -o sid= -p $$; ps -o tty= -p $$")
            .stdout(std::process::Stdio::piped());
        let none = Confinement {
            procs_files: &[],
            user: None,
            dir: dir.path(),
        };
        let child = spawn_confined(&mut cmd, &none).unwrap();
        let pid = child.id();
        let out = child.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let lines: Vec<&str> = text.lines().map(str::trim).collect();
        assert_eq!(lines, ["0", "1", "2", &pid.to_string(), "?"], "{text}");
    }
}
