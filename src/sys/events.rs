//! Waiting on several things at once, as the WRR dispatcher does:
//! process descriptors (signals and exit notification that cannot hit a
//! recycled pid), an absolute CLOCK_MONOTONIC timer, a stop event, one
//! `poll` over the three, and the state letter of `/proc/PID/stat` (parsed by
//! [`crate::sys::procstat`]); and, for the launcher, an `epoll` set over
//! many descriptors (the workers' pipes, the control signals, a timer).

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// A process descriptor (`pidfd_open`). It stays bound to the process it was
/// opened for: signals sent through it can never reach a later process that
/// reuses the pid, and it becomes readable when the process exits (turns
/// zombie), before the launcher reaps it.
#[derive(Debug)]
pub struct PidFd {
    fd: OwnedFd,
}

impl PidFd {
    pub fn open(pid: i32) -> io::Result<PidFd> {
        // SAFETY: pidfd_open takes a pid and flags (0) and returns a new
        // descriptor or -1; no memory is passed.
        let fd =
            unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::c_long, 0 as libc::c_long) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(PidFd {
            // SAFETY: the call succeeded, so `fd` is a fresh descriptor we
            // own (pidfds are always close-on-exec).
            fd: unsafe { OwnedFd::from_raw_fd(fd as i32) },
        })
    }

    /// `pidfd_send_signal(fd, sig)`; ESRCH once the process has exited.
    pub fn signal(&self, sig: i32) -> io::Result<()> {
        // SAFETY: a valid pidfd, a signal number, no siginfo (NULL) and no
        // flags; the kernel reads no memory from us.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                self.fd.as_raw_fd() as libc::c_long,
                sig as libc::c_long,
                std::ptr::null::<libc::siginfo_t>(),
                0 as libc::c_long,
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// Whether the process has exited (zombie or reaped), without waiting.
    pub fn exited(&self) -> bool {
        let mut pfd = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid, writable pollfd; timeout 0 never blocks.
        let rc = unsafe { libc::poll(&mut pfd, 1, 0) };
        rc > 0 && pfd.revents != 0
    }
}

/// A CLOCK_MONOTONIC timerfd armed at absolute times. Unlike a relative
/// sleep it cannot drift when the caller is delayed between computing and
/// arming, and timerfd expiry is not widened by the thread's timer slack.
#[derive(Debug)]
pub struct AbsTimer {
    fd: OwnedFd,
}

impl AbsTimer {
    pub fn new() -> io::Result<AbsTimer> {
        // SAFETY: timerfd_create takes two integers and returns a new
        // descriptor or -1.
        let fd = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_CLOEXEC | libc::TFD_NONBLOCK,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(AbsTimer {
            // SAFETY: fresh descriptor, owned from here on.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    /// Fire once at CLOCK_MONOTONIC `at_ns` (at once if that has passed).
    /// Re-arming resets the expiry count, so it never needs to be read.
    pub fn arm_at(&self, at_ns: u64) -> io::Result<()> {
        // 0 would disarm the timer; 1 ns is "already passed" all the same.
        let at_ns = at_ns.max(1);
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: (at_ns / 1_000_000_000) as libc::time_t,
                tv_nsec: (at_ns % 1_000_000_000) as libc::c_long,
            },
        };
        // SAFETY: valid descriptor, a valid itimerspec to read, and no old
        // value requested (NULL).
        let rc = unsafe {
            libc::timerfd_settime(
                self.fd.as_raw_fd(),
                libc::TFD_TIMER_ABSTIME,
                &spec,
                std::ptr::null_mut(),
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
}

impl AsFd for AbsTimer {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// An `epoll` set: descriptors watched for reading (level-triggered), each
/// reported by the token it was added with. Waiting costs the same however
/// many descriptors are in the set.
#[derive(Debug)]
pub struct Poller {
    fd: OwnedFd,
}

impl Poller {
    pub fn new() -> io::Result<Poller> {
        // SAFETY: epoll_create1 takes a flag and returns a new descriptor
        // or -1.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Poller {
            // SAFETY: fresh descriptor, owned from here on.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    /// Watch `fd` for reading (and end of file, errors): reported as `token`.
    /// The set holds no reference: closing `fd` removes it.
    pub fn add(&self, fd: BorrowedFd<'_>, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: token,
        };
        // SAFETY: valid epoll and target descriptors, and a valid event the
        // kernel copies.
        let rc = unsafe {
            libc::epoll_ctl(
                self.fd.as_raw_fd(),
                libc::EPOLL_CTL_ADD,
                fd.as_raw_fd(),
                &mut ev,
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// Stop watching `fd`.
    pub fn remove(&self, fd: BorrowedFd<'_>) -> io::Result<()> {
        // SAFETY: valid descriptors; a null event is allowed for DEL.
        let rc = unsafe {
            libc::epoll_ctl(
                self.fd.as_raw_fd(),
                libc::EPOLL_CTL_DEL,
                fd.as_raw_fd(),
                std::ptr::null_mut(),
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// Wait until at least one descriptor is ready (for ever with `None`,
    /// else up to `timeout`, rounded up to whole milliseconds), and put the
    /// tokens of the ready ones in `ready` (cleared first; empty on timeout
    /// or when a signal interrupted the wait).
    pub fn wait(
        &self,
        ready: &mut Vec<u64>,
        timeout: Option<std::time::Duration>,
    ) -> io::Result<()> {
        const MAX: usize = 256;
        ready.clear();
        let ms = match timeout {
            None => -1,
            Some(d) => d.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as i32,
        };
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; MAX];
        // SAFETY: `events` has room for MAX events, which the kernel fills.
        let n =
            unsafe { libc::epoll_wait(self.fd.as_raw_fd(), events.as_mut_ptr(), MAX as i32, ms) };
        if n < 0 {
            let err = io::Error::last_os_error();
            return match err.raw_os_error() {
                Some(libc::EINTR) => Ok(()),
                _ => Err(err),
            };
        }
        ready.extend(events[..n as usize].iter().map(|e| e.u64));
        Ok(())
    }
}

/// A level-triggered event (eventfd never read): once set, every waiter
/// sees it, now and later.
#[derive(Debug)]
pub struct Event {
    fd: OwnedFd,
}

impl Event {
    pub fn new() -> io::Result<Event> {
        // SAFETY: eventfd takes two integers and returns a new descriptor
        // or -1.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Event {
            // SAFETY: fresh descriptor, owned from here on.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    pub fn set(&self) {
        let one: u64 = 1;
        // SAFETY: writes the 8 bytes of `one` to our eventfd. It can only
        // fail with EAGAIN when the counter is near u64::MAX, which a
        // handful of writes of 1 never reach; then it is set anyway.
        unsafe {
            libc::write(
                self.fd.as_raw_fd(),
                (&one as *const u64).cast(),
                std::mem::size_of::<u64>(),
            )
        };
    }
}

/// What ended a [`wait`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    Stop,
    Exited,
    Timer,
}

/// Sleep until the timer fires, the process exits or the stop event is set
/// (checked in that order of precedence: stop, exit, timer). Without a
/// process, only the timer and the stop event wake it.
pub fn wait(timer: &AbsTimer, process: Option<&PidFd>, stop: &Event) -> io::Result<Wake> {
    let mut fds = [
        stop.fd.as_raw_fd(),
        // poll skips a negative descriptor and leaves its revents 0.
        process.map_or(-1, |p| p.fd.as_raw_fd()),
        timer.fd.as_raw_fd(),
    ]
    .map(|fd| libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    });
    loop {
        // SAFETY: `fds` is an array of three valid, writable pollfds;
        // timeout -1 waits until one is ready.
        let rc = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, -1) };
        if rc > 0 {
            break;
        }
        let err = io::Error::last_os_error();
        if rc < 0 && err.raw_os_error() != Some(libc::EINTR) {
            return Err(err);
        }
    }
    Ok(if fds[0].revents != 0 {
        Wake::Stop
    } else if fds[1].revents != 0 {
        Wake::Exited
    } else {
        Wake::Timer
    })
}

/// The state letter of process `pid`, None if it cannot be read (gone).
pub fn proc_state(pid: i32) -> Option<char> {
    crate::sys::procstat::read_stat(pid).map(|s| s.state)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_state_of_this_thread() {
        // This thread is running while it reads its own state.
        assert_eq!(proc_state(crate::sys::sched::gettid()), Some('R'));
    }

    #[test]
    fn timer_and_event_wake_a_wait() {
        let me = PidFd::open(std::process::id() as i32).unwrap();
        assert!(!me.exited());
        let timer = AbsTimer::new().unwrap();
        let stop = Event::new().unwrap();
        let at = crate::sys::proc::monotonic_ns() + 2_000_000;
        timer.arm_at(at).unwrap();
        assert_eq!(wait(&timer, Some(&me), &stop).unwrap(), Wake::Timer);
        assert!(crate::sys::proc::monotonic_ns() >= at);
        // Re-arming in the past fires at once.
        timer.arm_at(1).unwrap();
        assert_eq!(wait(&timer, Some(&me), &stop).unwrap(), Wake::Timer);
        // Without a process: the timer alone.
        timer.arm_at(1).unwrap();
        assert_eq!(wait(&timer, None, &stop).unwrap(), Wake::Timer);
        stop.set();
        timer.arm_at(u64::MAX / 2).unwrap();
        assert_eq!(wait(&timer, Some(&me), &stop).unwrap(), Wake::Stop);
        assert_eq!(
            wait(&timer, Some(&me), &stop).unwrap(),
            Wake::Stop,
            "stays set"
        );
    }

    #[test]
    fn a_poller_reports_ready_descriptors_by_token() {
        use std::io::Write;
        let poller = Poller::new().unwrap();
        let (r1, w1) = crate::sys::proc::pipe().unwrap();
        let (r2, w2) = crate::sys::proc::pipe().unwrap();
        poller.add(r1.as_fd(), 7).unwrap();
        poller.add(r2.as_fd(), 9).unwrap();
        let mut ready = vec![1];
        poller
            .wait(&mut ready, Some(std::time::Duration::ZERO))
            .unwrap();
        assert!(ready.is_empty());
        std::fs::File::from(w2).write_all(b"x").unwrap(); // and closed
        poller.wait(&mut ready, None).unwrap();
        assert_eq!(ready, vec![9]);
        // A timer in the set wakes the wait at its time.
        let timer = AbsTimer::new().unwrap();
        poller.remove(r2.as_fd()).unwrap();
        poller.add(timer.as_fd(), 3).unwrap();
        timer
            .arm_at(crate::sys::proc::monotonic_ns() + 2_000_000)
            .unwrap();
        poller.wait(&mut ready, None).unwrap();
        assert_eq!(ready, vec![3]);
        drop(w1); // end of file is "ready" too
        timer.arm_at(u64::MAX / 2).unwrap();
        poller.wait(&mut ready, None).unwrap();
        assert_eq!(ready, vec![7]);
    }

    #[test]
    fn pidfd_sees_exit_before_reaping() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "exit 0"])
            .spawn()
            .unwrap();
        let pidfd = PidFd::open(child.id() as i32).unwrap();
        let timer = AbsTimer::new().unwrap();
        let stop = Event::new().unwrap();
        timer
            .arm_at(crate::sys::proc::monotonic_ns() + 10_000_000_000)
            .unwrap();
        assert_eq!(wait(&timer, Some(&pidfd), &stop).unwrap(), Wake::Exited);
        assert!(pidfd.exited());
        assert_eq!(proc_state(child.id() as i32), Some('Z'));
        child.wait().unwrap();
        // Reaped: the descriptor refuses rather than reaching a new owner of
        // the pid.
        assert!(pidfd.exited());
        assert_eq!(
            pidfd.signal(libc::SIGCONT).unwrap_err().raw_os_error(),
            Some(libc::ESRCH)
        );
    }
}
