//! What `/proc` says about processes, for the journal (is the schedlab
//! that wrote it still alive?) and for refusals (which SCHED_DEADLINE
//! threads hold bandwidth): a `/proc/PID/stat` parser, start times,
//! liveness, the boot id, and the SCHED_DEADLINE thread scan.

use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Every SCHED_DEADLINE thread, as "pid 123 (name) 10000/100000 µs".
pub(super) fn deadline_tasks() -> Vec<String> {
    let mut found = Vec::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return found;
    };
    for p in procs.flatten() {
        if !p.file_name().as_bytes().iter().all(u8::is_ascii_digit) {
            continue;
        }
        let Ok(tasks) = std::fs::read_dir(p.path().join("task")) else {
            continue;
        };
        for t in tasks.flatten() {
            let Ok(stat) = std::fs::read_to_string(t.path().join("stat")) else {
                continue;
            };
            let Some((comm, fields)) = parse_stat(&stat) else {
                continue;
            };
            // Field 41 (policy); `fields` starts at field 3.
            if fields.get(38).and_then(|v| v.parse::<u32>().ok())
                != Some(crate::sys::sched::SCHED_DEADLINE)
            {
                continue;
            }
            let tid: i32 = t.file_name().to_string_lossy().parse().unwrap_or(0);
            let bw = crate::sys::sched::get_attr(tid)
                .map(|a| {
                    format!(
                        " {}/{} µs",
                        a.sched_runtime / 1000,
                        a.sched_period.max(a.sched_deadline) / 1000
                    )
                })
                .unwrap_or_default();
            found.push(format!("pid {tid} ({comm}){bw}"));
        }
    }
    found
}

/// `/proc/PID/stat` text → (comm, fields from field 3 on).
pub(super) fn parse_stat(text: &str) -> Option<(String, Vec<&str>)> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text.get(open + 1..close)?.to_string();
    Some((comm, text[close + 1..].split_ascii_whitespace().collect()))
}

/// Field 22 of `/proc/PID/stat`: when the process started, in clock ticks
/// after boot. Tells a live process from a later one that reuses its pid.
pub(super) fn process_start_ticks(pid: i32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&text)?.1.get(19)?.parse().ok()
}

pub(super) fn boot_id() -> Option<String> {
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

/// This process's effective user id.
pub(super) fn euid() -> u32 {
    // SAFETY: geteuid has no arguments and cannot fail.
    unsafe { libc::geteuid() }
}

/// This process's pid.
pub(super) fn self_pid() -> i32 {
    std::process::id() as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_parsing() {
        let (comm, f) = parse_stat("12 (a (b) c) S 1 12 12 0 -1").unwrap();
        assert_eq!(comm, "a (b) c");
        assert_eq!(f[0], "S");
        assert!(process_start_ticks(self_pid()).is_some());
    }
}
