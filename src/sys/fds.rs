//! Descriptors that cooperating workers share: event counters, moving a
//! descriptor above the numbers a child's set-up reuses, keeping one open
//! across `exec`, taking ownership of an inherited one in the worker, and
//! waiting on one (readable; a pipe's reader gone); and the launcher's own:
//! non-blocking read ends and anonymous memory files; and every descriptor
//! above standard error marked close-on-exec before another program's exec.

use std::collections::HashSet;
use std::ffi::CStr;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::Mutex;

/// An eventfd counter starting at 0, close-on-exec. `semaphore`: each read
/// takes 1 rather than the whole count.
pub fn eventfd(semaphore: bool) -> io::Result<OwnedFd> {
    let mut flags = libc::EFD_CLOEXEC;
    if semaphore {
        flags |= libc::EFD_SEMAPHORE;
    }
    // SAFETY: eventfd takes integers only.
    let fd = unsafe { libc::eventfd(0, flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: eventfd succeeded: a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `fd` itself when its number is at least `min`, else a close-on-exec
/// duplicate numbered `min` or above (the original is closed).
pub fn at_least(fd: OwnedFd, min: i32) -> io::Result<OwnedFd> {
    if fd.as_raw_fd() >= min {
        return Ok(fd);
    }
    // SAFETY: fcntl on a descriptor we own, integer arguments only.
    let dup = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, min) };
    if dup < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: F_DUPFD_CLOEXEC succeeded: a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(dup) })
}

/// Poll one descriptor for `events` for at most `timeout_ms` (-1: no
/// limit); its returned events (POLLERR and POLLHUP are always reported),
/// 0 on timeout. EINTR is reported as a timeout (the caller looks again).
fn poll_one(fd: BorrowedFd<'_>, events: i16, timeout_ms: i32) -> io::Result<i16> {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events,
        revents: 0,
    };
    // SAFETY: one valid pollfd that outlives the call.
    let rc = unsafe { libc::poll(&mut p, 1, timeout_ms) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        return match e.kind() {
            io::ErrorKind::Interrupted => Ok(0),
            _ => Err(e),
        };
    }
    Ok(if rc == 0 { 0 } else { p.revents })
}

/// Wait at most `timeout_ms` until `fd` can be read without blocking
/// (data, end-of-file, or an error to report): false on timeout.
pub fn wait_readable(fd: BorrowedFd<'_>, timeout_ms: i32) -> io::Result<bool> {
    Ok(poll_one(fd, libc::POLLIN, timeout_ms)? != 0)
}

/// Whether the read end of the pipe whose write end is `fd` has been
/// closed by every process (a write would fail with EPIPE). Does not block.
pub fn pipe_reader_gone(fd: BorrowedFd<'_>) -> io::Result<bool> {
    Ok(poll_one(fd, 0, 0)? & libc::POLLERR != 0)
}

/// Make reads (and writes) of `fd`'s open file description non-blocking:
/// they fail with `WouldBlock` instead of waiting. Only this description is
/// changed (a pipe's other end, a separate description, keeps blocking).
pub fn set_nonblocking(fd: impl AsFd) -> io::Result<()> {
    let raw = fd.as_fd().as_raw_fd();
    // SAFETY: fcntl on a descriptor the caller keeps open (borrowed),
    // integer arguments only.
    let flags = unsafe { libc::fcntl(raw, libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above.
    if unsafe { libc::fcntl(raw, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// An anonymous file in memory (`memfd_create`), close-on-exec: no
/// directory, no disk; gone when the last descriptor closes. `name` only
/// shows in `/proc/PID/fd`.
pub fn memfd(name: &CStr) -> io::Result<OwnedFd> {
    // SAFETY: `name` is a valid NUL-terminated string for the call's
    // duration; the flags are integers.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: memfd_create succeeded: a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Mark every descriptor from `first` up close-on-exec, so that a program
/// exec'd next gets none of them: what schedlab inherited (a shell's
/// `exec 9</etc/shadow`) and its own pipes alike. `close_range` with
/// CLOSE_RANGE_CLOEXEC (Linux 5.11); on older kernels every number below
/// the open-files limit, one `fcntl` each. Async-signal-safe (system calls
/// only): usable between fork and exec.
pub fn close_on_exec_from_raw(first: i32) -> Result<(), i32> {
    let first_u = libc::c_uint::try_from(first).map_err(|_| libc::EBADF)?;
    // SAFETY: close_range with integer arguments only; CLOEXEC closes
    // nothing, so no descriptor in use by this process goes away.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            first_u,
            libc::c_uint::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    if rc == 0 {
        return Ok(());
    }
    // SAFETY: reading errno of this thread.
    let errno = unsafe { *libc::__errno_location() };
    if errno != libc::ENOSYS && errno != libc::EINVAL {
        return Err(errno);
    }
    // SAFETY: rlimit is plain old data that getrlimit fills.
    let mut lim: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: `lim` is valid for writes.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        // SAFETY: reading errno of this thread.
        return Err(unsafe { *libc::__errno_location() });
    }
    let last = i32::try_from(lim.rlim_cur.min(1 << 20)).unwrap_or(1 << 20);
    for fd in first..last {
        // SAFETY: fcntl with integer arguments only; a number that is not
        // open answers EBADF, which is skipped.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
        if flags >= 0 {
            // SAFETY: as above.
            unsafe { libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC) };
        }
    }
    Ok(())
}

/// Between fork and exec: keep `fd` open across `exec` (clear its
/// close-on-exec flag). Async-signal-safe.
pub fn keep_across_exec_raw(fd: i32) -> Result<(), i32> {
    // SAFETY: fcntl with integer arguments only.
    if unsafe { libc::fcntl(fd, libc::F_SETFD, 0) } == 0 {
        Ok(())
    } else {
        // SAFETY: reading errno of this thread.
        Err(unsafe { *libc::__errno_location() })
    }
}

static TAKEN: Mutex<Option<HashSet<i32>>> = Mutex::new(None);

/// In a worker: own descriptor `fd`, which the parent kept open across
/// `exec` for it. Each number can be taken once; an unknown or closed
/// number, or one already taken, is an error.
pub fn inherited(fd: i32) -> io::Result<OwnedFd> {
    let mut taken = TAKEN.lock().unwrap_or_else(|p| p.into_inner());
    let taken = taken.get_or_insert_with(HashSet::new);
    if fd <= crate::sys::proc::LAST_FIXED_FD || taken.contains(&fd) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("descriptor {fd} is not an unclaimed inherited channel"),
        ));
    }
    // SAFETY: F_GETFD only reads the descriptor's flags.
    if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
        return Err(io::Error::last_os_error());
    }
    taken.insert(fd);
    // SAFETY: the descriptor is open (checked above), was inherited for this
    // worker and is not owned by anything else in this process: the set
    // above makes this the only place that takes it, once.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_descriptor_from_a_number_up_is_marked_close_on_exec() {
        use std::os::fd::AsRawFd;
        // Numbers far above what other tests of this process use (the
        // marking reaches every descriptor above the one given).
        let (r, _w) = crate::sys::proc::pipe().unwrap();
        let (low, high) = (900, 901);
        crate::sys::proc::dup2_raw(r.as_raw_fd(), low).unwrap();
        crate::sys::proc::dup2_raw(r.as_raw_fd(), high).unwrap();
        let _close = Defer(|| {
            for fd in [low, high] {
                // SAFETY: closes only the two numbers this test made.
                unsafe { libc::close(fd) };
            }
        });
        let cloexec = |fd| {
            // SAFETY: fcntl with integer arguments only.
            let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
            flags & libc::FD_CLOEXEC != 0
        };
        assert!(!cloexec(low) && !cloexec(high));
        close_on_exec_from_raw(high).unwrap();
        assert!(!cloexec(low) && cloexec(high));
        close_on_exec_from_raw(low).unwrap();
        assert!(cloexec(low) && cloexec(high));
    }

    struct Defer<F: FnMut()>(F);
    impl<F: FnMut()> Drop for Defer<F> {
        fn drop(&mut self) {
            (self.0)()
        }
    }

    #[test]
    fn eventfd_counts_and_moves_up() {
        use std::io::{Read, Write};
        let fd = eventfd(false).unwrap();
        let fd = at_least(fd, 40).unwrap();
        assert!(fd.as_raw_fd() >= 40);
        let mut f = std::fs::File::from(fd);
        f.write_all(&3u64.to_ne_bytes()).unwrap();
        let mut buf = [0u8; 8];
        f.read_exact(&mut buf).unwrap();
        assert_eq!(u64::from_ne_bytes(buf), 3);
    }

    #[test]
    fn an_inherited_descriptor_is_taken_once() {
        let fd = eventfd(true).unwrap();
        let raw = at_least(fd, 50).unwrap();
        let n = raw.as_raw_fd();
        std::mem::forget(raw); // as if inherited: nothing owns it now
        let owned = inherited(n).unwrap();
        assert!(inherited(n).is_err());
        drop(owned);
        assert!(inherited(1000).is_err());
        assert!(inherited(2).is_err());
        assert!(inherited(crate::sys::proc::LAST_FIXED_FD).is_err());
    }

    #[test]
    fn a_nonblocking_read_end_does_not_wait() {
        use std::io::{Read, Write};
        let (r, w) = crate::sys::proc::pipe().unwrap();
        set_nonblocking(&r).unwrap();
        let mut r = std::fs::File::from(r);
        let mut buf = [0u8; 8];
        assert_eq!(
            r.read(&mut buf).unwrap_err().kind(),
            io::ErrorKind::WouldBlock
        );
        let w = std::fs::File::from(w);
        (&w).write_all(b"hi").unwrap();
        assert_eq!(r.read(&mut buf).unwrap(), 2);
        drop(w);
        assert_eq!(r.read(&mut buf).unwrap(), 0, "end of file once closed");
    }

    #[test]
    fn a_memfd_keeps_what_is_written_at_an_offset() {
        use std::os::unix::fs::FileExt;
        let f = std::fs::File::from(memfd(c"schedlab-test").unwrap());
        let mut buf = [0u8; 8];
        assert_eq!(f.read_at(&mut buf, 0).unwrap(), 0, "empty at first");
        f.write_at(&42u64.to_le_bytes(), 0).unwrap();
        f.read_exact_at(&mut buf, 0).unwrap();
        assert_eq!(u64::from_le_bytes(buf), 42);
    }

    #[test]
    fn readiness_and_a_vanished_pipe_reader() {
        use std::io::Write;
        use std::os::fd::AsFd;
        let (r, w) = crate::sys::proc::pipe().unwrap();
        assert!(!wait_readable(r.as_fd(), 0).unwrap());
        assert!(!pipe_reader_gone(w.as_fd()).unwrap());
        std::fs::File::from(w.try_clone().unwrap())
            .write_all(b"x")
            .unwrap();
        assert!(wait_readable(r.as_fd(), 1000).unwrap());
        drop(r);
        assert!(pipe_reader_gone(w.as_fd()).unwrap());
        // End-of-file is readable too.
        let (r, w) = crate::sys::proc::pipe().unwrap();
        drop(w);
        assert!(wait_readable(r.as_fd(), 0).unwrap());
    }
}
