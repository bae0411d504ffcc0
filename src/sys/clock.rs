//! Clocks a workload sleeps on and measures itself with: an absolute sleep
//! on CLOCK_MONOTONIC (the clock of [`super::proc::monotonic_ns`], which
//! parent and workers share) and the calling thread's own CPU time.

use std::io;

/// The timespec of `ns` nanoseconds.
fn timespec(ns: u64) -> libc::timespec {
    libc::timespec {
        // u64 / 1e9 is below 2^35: always fits a 64-bit time_t.
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    }
}

/// Sleep until CLOCK_MONOTONIC reaches `abs_ns` (`clock_nanosleep` with
/// `TIMER_ABSTIME`). A time already past returns at once. A signal that
/// interrupts the sleep (EINTR) resumes it: the target is absolute, so a
/// resumed sleep still ends at the same instant.
pub fn sleep_until_ns(abs_ns: u64) -> io::Result<()> {
    let ts = timespec(abs_ns);
    loop {
        // SAFETY: `ts` is a valid timespec that outlives the call; with
        // TIMER_ABSTIME the remainder pointer is not used and may be null.
        let rc = unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &ts,
                std::ptr::null_mut(),
            )
        };
        match rc {
            0 => return Ok(()),
            libc::EINTR => continue,
            // clock_nanosleep returns the error number instead of setting errno.
            e => return Err(io::Error::from_raw_os_error(e)),
        }
    }
}

/// CPU time the calling thread has used, in nanoseconds
/// (CLOCK_THREAD_CPUTIME_ID): it advances only while the thread runs, so
/// time spent preempted or waiting does not count.
pub fn thread_cpu_ns() -> io::Result<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is valid and writable for the duration of the call.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::proc::monotonic_ns;

    #[test]
    fn sleeps_until_an_absolute_time_and_a_past_one_returns_at_once() {
        let target = monotonic_ns() + 5_000_000;
        sleep_until_ns(target).unwrap();
        assert!(monotonic_ns() >= target);
        let before = monotonic_ns();
        sleep_until_ns(before - 1_000_000).unwrap();
        sleep_until_ns(0).unwrap();
        // Returning at once: well under the 5 ms slept above.
        assert!(monotonic_ns() - before < 5_000_000);
    }

    #[test]
    fn thread_cpu_time_advances_with_work_not_with_sleep() {
        let a = thread_cpu_ns().unwrap();
        let mut x = 1u64;
        while thread_cpu_ns().unwrap() - a < 2_000_000 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        let b = thread_cpu_ns().unwrap();
        assert!(b - a >= 2_000_000);
        std::thread::sleep(std::time::Duration::from_millis(20));
        let c = thread_cpu_ns().unwrap();
        // A 20 ms sleep costs far less than 20 ms of CPU.
        assert!(c - b < 10_000_000, "{}", c - b);
    }
}
