//! What `/proc` says about processes, for the journal (is the schedlab
//! that wrote it still alive?) and for refusals (which SCHED_DEADLINE
//! threads hold bandwidth): start times, liveness, the boot id, and the
//! SCHED_DEADLINE threads (read through `sys::procstat`).

use std::io;
use std::path::Path;

/// Every SCHED_DEADLINE thread, as "pid 123 (name) 10000/100000 µs".
pub(super) fn deadline_tasks() -> Vec<String> {
    crate::sys::procstat::deadline_tasks()
        .into_iter()
        .map(|t| {
            let bw = t
                .attr
                .map(|a| {
                    format!(
                        " {}/{} µs",
                        a.sched_runtime / 1000,
                        a.sched_period.max(a.sched_deadline) / 1000
                    )
                })
                .unwrap_or_default();
            format!("pid {} ({}){bw}", t.tid, t.comm)
        })
        .collect()
}

/// Field 22 of `/proc/PID/stat`: when the process started, in clock ticks
/// after boot. Tells a live process from a later one that reuses its pid.
pub(crate) fn process_start_ticks(pid: i32) -> Option<u64> {
    crate::sys::procstat::read_stat(pid)?.start_ticks
}

pub(crate) fn boot_id() -> Option<String> {
    crate::sys::procfs::read_trimmed(Path::new("/proc/sys/kernel/random/boot_id"))
}

/// Whether `pid` is a live process that is the one that started at
/// `start_ticks` (when known).
pub(super) fn pid_alive(pid: i32, start_ticks: Option<u64>) -> bool {
    if pid <= 0 {
        return false;
    }
    // SAFETY: kill with signal 0 only checks for existence.
    let rc = unsafe { libc::kill(pid, 0) };
    let exists = rc == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
    if !exists {
        return false;
    }
    match (start_ticks, process_start_ticks(pid)) {
        (Some(recorded), Some(now)) => recorded == now,
        _ => true,
    }
}

pub(super) use crate::sys::proc::euid;

/// This process's pid.
pub(crate) fn self_pid() -> i32 {
    std::process::id() as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_ticks_of_this_process() {
        // The parsing itself is tested in sys::procstat.
        assert!(process_start_ticks(self_pid()).is_some());
    }
}
