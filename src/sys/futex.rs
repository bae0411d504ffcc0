//! What a replay (`kind = "replay"`) needs of the kernel beyond clocks:
//! counting semaphores in memory shared by every process and thread of a
//! run ([`Doorbells`], one `u32` per task in a `memfd` mapped
//! `MAP_SHARED`, waited on and woken with shared futexes), `fork` of a
//! replayed process, reaping of every child, and leaving a child at once.
//!
//! A post is one wake-up of one task by another: the poster's
//! `FUTEX_WAKE` is what the kernel traces as its `sched_waking`, as a
//! pipe write's wake-up would be.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicU32, Ordering};

/// Counting semaphores (one per task) in a shared mapping.
pub struct Doorbells {
    base: *mut AtomicU32,
    len: usize,
}

// SAFETY: the mapping is only ever accessed through `AtomicU32`s, which
// are safe to share between threads (and processes).
unsafe impl Send for Doorbells {}
// SAFETY: as above.
unsafe impl Sync for Doorbells {}

/// Bytes of the shared memory `len` doorbells take.
pub fn doorbell_bytes(len: usize) -> usize {
    len.max(1) * std::mem::size_of::<u32>()
}

impl Doorbells {
    /// Map `len` doorbells of the memory file `fd` (at least
    /// [`doorbell_bytes`] long, zeroed: every count 0).
    pub fn map(fd: BorrowedFd<'_>, len: usize) -> io::Result<Doorbells> {
        let bytes = doorbell_bytes(len);
        // SAFETY: a fresh shared mapping of a file descriptor we borrow;
        // the kernel checks the file's size and mode; the result is checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Doorbells {
            base: p.cast(),
            len,
        })
    }

    fn cell(&self, i: usize) -> &AtomicU32 {
        assert!(i < self.len, "doorbell {i} of {}", self.len);
        // SAFETY: `i` is inside the mapping (checked above), which lives as
        // long as `self`, is aligned (page-aligned base, 4-byte cells) and
        // is only accessed atomically.
        unsafe { &*self.base.add(i) }
    }

    /// One wake-up for task `i`: count it, and wake the task if it waits.
    pub fn post(&self, i: usize) {
        let c = self.cell(i);
        c.fetch_add(1, Ordering::Release);
        // SAFETY: FUTEX_WAKE on an aligned u32 of a live shared mapping;
        // the other arguments are unused by this operation.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                c.as_ptr(),
                libc::FUTEX_WAKE,
                1,
                std::ptr::null::<libc::timespec>(),
            );
        }
    }

    /// Wait for one wake-up of task `i` (take one from its count, sleeping
    /// while it is 0).
    pub fn wait(&self, i: usize) {
        let c = self.cell(i);
        loop {
            let v = c.load(Ordering::Acquire);
            if v > 0 {
                if c.compare_exchange(v, v - 1, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
                {
                    return;
                }
                continue;
            }
            // SAFETY: FUTEX_WAIT on an aligned u32 of a live shared mapping,
            // sleeping only while it still holds 0 (EAGAIN otherwise; EINTR
            // on a signal): both are retried by the loop.
            unsafe {
                libc::syscall(
                    libc::SYS_futex,
                    c.as_ptr(),
                    libc::FUTEX_WAIT,
                    0,
                    std::ptr::null::<libc::timespec>(),
                );
            }
        }
    }

    /// The pending wake-ups of task `i` (tests).
    pub fn count(&self, i: usize) -> u32 {
        self.cell(i).load(Ordering::Acquire)
    }
}

impl Drop for Doorbells {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`, of this length, unmapped once.
        unsafe {
            libc::munmap(self.base.cast(), doorbell_bytes(self.len));
        }
    }
}

/// Fork this process: Some(child pid) in the parent, None in the child.
/// The child must leave with [`exit_now`], never by returning into code
/// that belongs to the parent's process (a worker's result pipe).
pub fn fork() -> io::Result<Option<i32>> {
    // SAFETY: fork has no memory-safety preconditions; in the child only
    // this thread exists, and glibc's fork makes its allocator usable there.
    let pid = unsafe { libc::fork() };
    match pid {
        p if p < 0 => Err(io::Error::last_os_error()),
        0 => Ok(None),
        p => Ok(Some(p)),
    }
}

/// Reap every child of this process, waiting for each; the number that
/// did not exit with status 0.
pub fn reap_children() -> u32 {
    let mut failed = 0;
    loop {
        let mut status = 0;
        // SAFETY: waitpid with a valid pointer to a local status.
        let pid = unsafe { libc::waitpid(-1, &mut status, 0) };
        if pid < 0 {
            if io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return failed; // ECHILD: none left.
        }
        if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
            failed += 1;
        }
    }
}

/// Leave this process at once with `code`, running no exit handlers (a
/// forked child must not flush or run what its parent registered).
pub fn exit_now(code: i32) -> ! {
    // SAFETY: _exit never returns and has no preconditions.
    unsafe { libc::_exit(code) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn a_post_wakes_a_waiter_once_and_counts_in_between() {
        let fd = crate::sys::fds::memfd(c"doorbells").unwrap();
        let f = std::fs::File::from(fd);
        f.set_len(doorbell_bytes(2) as u64).unwrap();
        let d = std::sync::Arc::new(Doorbells::map(f.as_fd(), 2).unwrap());
        d.post(1);
        d.post(1);
        assert_eq!(d.count(1), 2);
        d.wait(1);
        assert_eq!(d.count(1), 1);
        let d2 = d.clone();
        let t = std::thread::spawn(move || {
            d2.wait(0);
            d2.post(1);
        });
        std::thread::sleep(std::time::Duration::from_millis(5));
        d.post(0);
        t.join().unwrap();
        d.wait(1);
        d.wait(1);
        assert_eq!((d.count(0), d.count(1)), (0, 0));
    }

    #[test]
    fn doorbells_are_shared_with_a_forked_child() {
        let fd = crate::sys::fds::memfd(c"doorbells").unwrap();
        let f = std::fs::File::from(fd);
        f.set_len(doorbell_bytes(2) as u64).unwrap();
        let d = Doorbells::map(f.as_fd(), 2).unwrap();
        match fork().unwrap() {
            None => {
                d.wait(0);
                d.post(1);
                exit_now(0);
            }
            Some(_) => {
                d.post(0);
                d.wait(1);
                assert_eq!(reap_children(), 0);
            }
        }
    }
}
