//! A worker replacing itself with another program (a `command` workload):
//! the descriptors it must not hand on marked close-on-exec, and the
//! `exec` itself; and a program started inside cgroups
//! ([`spawn_in_cgroups`]), so that nothing it forks is outside them.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command};

/// Mark `fd` close-on-exec, so the program a worker becomes does not
/// inherit it (the start barrier, the result pipe: a program holding the
/// result pipe open would keep the parent from seeing its end). A
/// descriptor that is not open is left as it is.
pub fn close_on_exec(fd: i32) -> io::Result<()> {
    // SAFETY: fcntl with integer arguments only.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
    if flags < 0 {
        let e = io::Error::last_os_error();
        return if e.raw_os_error() == Some(libc::EBADF) {
            Ok(())
        } else {
            Err(e)
        };
    }
    // SAFETY: fcntl with integer arguments only.
    if unsafe { libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

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

/// Starts `cmd` as a member of the cgroups whose `cgroup.procs` files
/// are `procs_files`: between fork and exec the child asks to be killed
/// with its parent (after the change of user `cmd` may ask for, which
/// clears that setting) and writes "0" (itself) into each, so nothing of
/// the program runs, or forks, outside them. A group that refuses it fails
/// the spawn, and the program is not run.
pub fn spawn_in_cgroups(cmd: &mut Command, procs_files: &[PathBuf]) -> io::Result<Child> {
    let paths: Vec<CString> = procs_files
        .iter()
        .map(|p| CString::new(p.as_os_str().as_bytes()))
        .collect::<Result<_, _>>()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    // SAFETY: the closure runs in the child between fork and exec and
    // calls only async-signal-safe functions (prctl, open, write, close)
    // on memory made before the fork.
    unsafe {
        cmd.pre_exec(move || {
            crate::sys::proc::die_with_parent_raw().map_err(io::Error::from_raw_os_error)?;
            for path in &paths {
                let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if fd < 0 {
                    return Err(io::Error::last_os_error());
                }
                let n = libc::write(fd, b"0".as_ptr().cast(), 1);
                let e = io::Error::last_os_error();
                libc::close(fd);
                if n != 1 {
                    return Err(e);
                }
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
    fn close_on_exec_sets_the_flag_and_ignores_closed_numbers() {
        let (r, _w) = crate::sys::proc::pipe().unwrap();
        let fd = r.as_raw_fd();
        crate::sys::fds::keep_across_exec_raw(fd).unwrap();
        let flag = |fd| std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")).unwrap();
        // fdinfo's flags are octal; O_CLOEXEC is 02000000.
        let cloexec = |fd| {
            let text = flag(fd);
            let line = text.lines().find(|l| l.starts_with("flags:")).unwrap();
            let v = u32::from_str_radix(line[6..].trim(), 8).unwrap();
            v & 0o2000000 != 0
        };
        assert!(!cloexec(fd));
        close_on_exec(fd).unwrap();
        assert!(cloexec(fd));
        close_on_exec(100_000).unwrap();
    }

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
        let e = spawn_in_cgroups(&mut cmd, &[dir.path().join("absent/cgroup.procs")]).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        assert!(!mark.exists(), "the program ran outside its group");
        // No group at all: it just runs (a new command: closures add up).
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(format!("touch {}", mark.display()));
        let mut child = spawn_in_cgroups(&mut cmd, &[]).unwrap();
        assert!(child.wait().unwrap().success());
        assert!(mark.exists());
    }
}
