//! Scheduling system calls: `sched_setattr`/`sched_getattr`, CPU affinity and
//! the round-robin interval.
//!
//! The `*_raw` functions are async-signal-safe (a system call and nothing
//! else: no allocation, no locks) so that they can run in a forked child
//! between `fork` and `exec`.

use std::io;

pub const SCHED_OTHER: u32 = 0;
pub const SCHED_FIFO: u32 = 1;
pub const SCHED_RR: u32 = 2;
pub const SCHED_BATCH: u32 = 3;
pub const SCHED_IDLE: u32 = 5;
pub const SCHED_DEADLINE: u32 = 6;

/// `SCHED_FLAG_RESET_ON_FORK`.
pub const SCHED_FLAG_RESET_ON_FORK: u64 = 0x01;

/// `struct sched_attr` from `include/uapi/linux/sched/types.h` (version 1,
/// 56 bytes, with the utilisation-clamp fields).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SchedAttr {
    pub size: u32,
    pub sched_policy: u32,
    pub sched_flags: u64,
    pub sched_nice: i32,
    pub sched_priority: u32,
    pub sched_runtime: u64,
    pub sched_deadline: u64,
    pub sched_period: u64,
    pub sched_util_min: u32,
    pub sched_util_max: u32,
}

impl SchedAttr {
    pub fn new(policy: u32) -> Self {
        SchedAttr {
            size: std::mem::size_of::<SchedAttr>() as u32,
            sched_policy: policy,
            ..Default::default()
        }
    }

    /// A fair-class policy (OTHER, BATCH, IDLE) with a nice value.
    pub fn fair(policy: u32, nice: i32) -> Self {
        SchedAttr {
            sched_nice: nice,
            ..Self::new(policy)
        }
    }

    /// A real-time policy (FIFO, RR) at a static priority 1..=99.
    pub fn realtime(policy: u32, priority: u32) -> Self {
        SchedAttr {
            sched_priority: priority,
            ..Self::new(policy)
        }
    }

    /// SCHED_DEADLINE with runtime ≤ deadline ≤ period, in nanoseconds.
    pub fn deadline(runtime_ns: u64, deadline_ns: u64, period_ns: u64) -> Self {
        SchedAttr {
            sched_runtime: runtime_ns,
            sched_deadline: deadline_ns,
            sched_period: period_ns,
            ..Self::new(SCHED_DEADLINE)
        }
    }
}

/// Current thread's errno.
fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// `sched_setattr(pid, attr, 0)`; `pid` 0 is the calling thread.
/// Async-signal-safe. Returns the errno on failure.
pub fn set_attr_raw(pid: i32, attr: &SchedAttr) -> Result<(), i32> {
    // SAFETY: `attr` points to a live, properly sized `struct sched_attr`
    // whose `size` field matches; the kernel only reads it.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_sched_setattr,
            pid as libc::c_long,
            attr as *const SchedAttr,
            0 as libc::c_long,
        )
    };
    if rc == 0 { Ok(()) } else { Err(errno()) }
}

/// `sched_setattr` with an `io::Error`.
pub fn set_attr(pid: i32, attr: &SchedAttr) -> io::Result<()> {
    set_attr_raw(pid, attr).map_err(io::Error::from_raw_os_error)
}

/// `sched_getattr(pid)`: the policy and parameters of a thread.
pub fn get_attr(pid: i32) -> io::Result<SchedAttr> {
    let mut attr = SchedAttr::new(0);
    // SAFETY: the kernel writes at most `size` bytes (the size we pass) into
    // `attr`, which is a valid, writable `SchedAttr`.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_sched_getattr,
            pid as libc::c_long,
            &mut attr as *mut SchedAttr,
            std::mem::size_of::<SchedAttr>() as libc::c_long,
            0 as libc::c_long,
        )
    };
    if rc == 0 {
        Ok(attr)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// A CPU set for `sched_setaffinity`.
/// The slice of fair task `pid` as the kernel reports it (`sched_runtime`
/// of `sched_getattr`, Linux 6.12+); None when it reports none (older
/// kernels) or the task is not in the fair class.
pub fn fair_slice_ns(pid: i32) -> Option<u64> {
    let a = get_attr(pid).ok()?;
    let fair = matches!(a.sched_policy, SCHED_OTHER | SCHED_BATCH | SCHED_IDLE);
    (fair && a.sched_runtime > 0).then_some(a.sched_runtime)
}

/// Whether the kernel honours a custom fair slice: a scratch thread asks
/// for 3 ms and reads back what it got. The caller's own threads are left
/// as they were. False when no thread can be made (see
/// [`default_fair_slice_ns`]).
pub fn custom_slice_honoured() -> bool {
    const ASKED_NS: u64 = 3_000_000;
    std::thread::Builder::new()
        .spawn(|| {
            let attr = SchedAttr {
                sched_runtime: ASKED_NS,
                ..SchedAttr::fair(SCHED_OTHER, current_nice())
            };
            set_attr(0, &attr).is_ok() && fair_slice_ns(0) == Some(ASKED_NS)
        })
        .is_ok_and(|h| h.join().unwrap_or(false))
}

/// The fair slice the kernel gives a thread that asked for none (its base
/// slice), as it reports it for a scratch thread; None before Linux 6.12.
/// schedlab's own threads never ask for a slice of their own. None too
/// when no thread can be made (a SCHED_DEADLINE caller may not fork or
/// clone: EAGAIN).
pub fn default_fair_slice_ns() -> Option<u64> {
    std::thread::Builder::new()
        .spawn(|| fair_slice_ns(0))
        .ok()?
        .join()
        .ok()
        .flatten()
}

/// The calling thread's nice value.
fn current_nice() -> i32 {
    get_attr(0).map_or(0, |a| a.sched_nice)
}

pub fn cpu_set(cpus: &[usize]) -> libc::cpu_set_t {
    // SAFETY: cpu_set_t is a plain bit array; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &cpu in cpus {
        // SAFETY: CPU_SET bounds-checks against the set's size internally.
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    set
}

/// `sched_setaffinity(pid, set)`. Async-signal-safe. Returns the errno.
pub fn set_affinity_raw(pid: i32, set: &libc::cpu_set_t) -> Result<(), i32> {
    // SAFETY: `set` is a valid cpu_set_t of the size we pass.
    let rc = unsafe { libc::sched_setaffinity(pid, std::mem::size_of::<libc::cpu_set_t>(), set) };
    if rc == 0 { Ok(()) } else { Err(errno()) }
}

/// The CPUs a thread may run on.
pub fn get_affinity(pid: i32) -> io::Result<Vec<usize>> {
    // SAFETY: zeroed cpu_set_t is valid; the kernel fills at most its size.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is valid storage of the size passed; the kernel fills it.
    let rc =
        unsafe { libc::sched_getaffinity(pid, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: CPU_ISSET only reads the bit array.
    Ok((0..libc::CPU_SETSIZE as usize)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect())
}

/// `sched_rr_get_interval(pid)` in nanoseconds.
pub fn rr_interval_ns(pid: i32) -> io::Result<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    let rc = unsafe { libc::sched_rr_get_interval(pid, &mut ts) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// The id of the calling thread.
pub fn gettid() -> i32 {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::gettid() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sched_attr_has_the_kernel_size() {
        assert_eq!(std::mem::size_of::<SchedAttr>(), 56);
    }

    #[test]
    fn getattr_of_self_reads_a_fair_policy() {
        let attr = get_attr(0).expect("sched_getattr on self");
        assert!(matches!(
            attr.sched_policy,
            SCHED_OTHER | SCHED_BATCH | SCHED_IDLE
        ));
    }

    #[test]
    fn batch_round_trip_on_a_thread() {
        // Moving a thread to SCHED_BATCH with a higher nice needs no privilege.
        std::thread::spawn(|| {
            let tid = gettid();
            set_attr(tid, &SchedAttr::fair(SCHED_BATCH, 5)).expect("set batch");
            let got = get_attr(tid).unwrap();
            assert_eq!(got.sched_policy, SCHED_BATCH);
            assert_eq!(got.sched_nice, 5);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn affinity_round_trip() {
        let cpus = get_affinity(0).unwrap();
        assert!(!cpus.is_empty());
        std::thread::spawn(move || {
            let tid = gettid();
            set_affinity_raw(tid, &cpu_set(&cpus[..1])).unwrap();
            assert_eq!(get_affinity(tid).unwrap(), vec![cpus[0]]);
        })
        .join()
        .unwrap();
    }
}
