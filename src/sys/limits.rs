//! The machine's limits on what one run may start, read before a campaign:
//! tasks (RLIMIT_NPROC for this user, `kernel.pid_max`, `kernel.threads-max`,
//! the cgroup's `pids.max`), open files (RLIMIT_NOFILE) and memory
//! (`MemAvailable`). The comparison against what a run needs is pure
//! (`Limits::refusal`), so it is tested without the machine.

use crate::sys::probe::rlimit;

/// What one run needs at most.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Need {
    /// Processes and threads it starts (workers, hog, dispatcher threads).
    pub tasks: u64,
    /// Descriptors schedlab holds open at once.
    pub fds: u64,
    pub memory_bytes: u64,
}

/// The limits in force, as read from the machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Soft RLIMIT_NPROC, when the kernel enforces it (not for root).
    pub nproc: Option<u64>,
    /// Tasks (threads) this real user has now.
    pub user_tasks: u64,
    /// min(pid_max, threads-max), and the tasks that exist now.
    pub kernel_tasks_max: Option<u64>,
    pub tasks_now: Option<u64>,
    /// This cgroup's pids.max and pids.current (cgroup v2), when limited.
    pub cgroup_pids: Option<(u64, u64)>,
    /// Soft RLIMIT_NOFILE.
    pub nofile: u64,
    pub mem_available_bytes: Option<u64>,
}

impl Limits {
    pub fn capture() -> Limits {
        // SAFETY: getuid cannot fail and touches no memory.
        let uid = unsafe { libc::getuid() };
        let (nproc_soft, _) = rlimit(libc::RLIMIT_NPROC);
        let read = |p: &str| -> Option<String> { std::fs::read_to_string(p).ok() };
        let num = |p: &str| read(p).and_then(|s| s.trim().parse::<u64>().ok());
        let kernel_tasks_max = match (
            num("/proc/sys/kernel/pid_max"),
            num("/proc/sys/kernel/threads-max"),
        ) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Limits {
            // The kernel does not apply RLIMIT_NPROC to root.
            nproc: (uid != 0 && nproc_soft != u64::MAX).then_some(nproc_soft),
            user_tasks: user_tasks(uid),
            kernel_tasks_max,
            tasks_now: read("/proc/loadavg").and_then(|s| parse_loadavg_tasks(&s)),
            cgroup_pids: cgroup_pids(),
            nofile: rlimit(libc::RLIMIT_NOFILE).0,
            mem_available_bytes: read("/proc/meminfo").and_then(|s| parse_mem_available(&s)),
        }
    }

    /// The first limit a run needing `need` would hit: (what, message).
    pub fn refusal(&self, need: Need) -> Option<String> {
        if let Some(limit) = self.nproc
            && self.user_tasks + need.tasks > limit
        {
            return Some(format!(
                "it starts {} processes and threads, but this user may have {limit} (RLIMIT_NPROC, `ulimit -u`) \
                 and already has {}; raise the limit or run fewer processes",
                need.tasks, self.user_tasks
            ));
        }
        if let (Some(max), Some(now)) = (self.kernel_tasks_max, self.tasks_now)
            && now + need.tasks > max
        {
            return Some(format!(
                "it starts {} processes and threads, but the kernel allows {max} tasks \
                 (kernel.pid_max / kernel.threads-max) and {now} exist",
                need.tasks
            ));
        }
        if let Some((max, now)) = self.cgroup_pids
            && now + need.tasks > max
        {
            return Some(format!(
                "it starts {} processes and threads, but this cgroup's pids.max is {max} and it has {now}",
                need.tasks
            ));
        }
        if need.fds > self.nofile {
            return Some(format!(
                "it needs about {} open files, above RLIMIT_NOFILE ({}, `ulimit -n`)",
                need.fds, self.nofile
            ));
        }
        if let Some(avail) = self.mem_available_bytes
            && need.memory_bytes > avail
        {
            return Some(format!(
                "its processes need about {} of memory, and {} is available (MemAvailable)",
                crate::units::human_bytes(need.memory_bytes),
                crate::units::human_bytes(avail)
            ));
        }
        None
    }
}

/// Raise the soft RLIMIT_NOFILE of this process to `to` (at most the hard
/// limit) when it is lower; never lowers it. Returns the soft limit now.
pub fn raise_open_files(to: u64) -> std::io::Result<u64> {
    let (soft, hard) = rlimit(libc::RLIMIT_NOFILE);
    if soft >= to || soft >= hard {
        return Ok(soft);
    }
    let rl = libc::rlimit {
        rlim_cur: to.min(hard),
        rlim_max: hard,
    };
    // SAFETY: `rl` is a valid rlimit the kernel reads.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &rl) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(rl.rlim_cur)
}

/// Tasks (threads included) whose real user is `uid`: what RLIMIT_NPROC counts.
fn user_tasks(uid: u32) -> u64 {
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return 0;
    };
    rd.flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter_map(|e| std::fs::read_to_string(e.path().join("status")).ok())
        .filter_map(|s| parse_status_uid_threads(&s))
        .filter(|&(u, _)| u == uid)
        .map(|(_, t)| t)
        .sum()
}

/// (real uid, threads) from /proc/PID/status text.
pub fn parse_status_uid_threads(status: &str) -> Option<(u32, u64)> {
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
    };
    Some((
        field("Uid:")?.parse().ok()?,
        field("Threads:")?.parse().ok()?,
    ))
}

/// Total tasks from /proc/loadavg ("0.10 0.20 0.30 2/345 6789").
pub fn parse_loadavg_tasks(s: &str) -> Option<u64> {
    s.split_whitespace().nth(3)?.split('/').nth(1)?.parse().ok()
}

/// MemAvailable in bytes from /proc/meminfo.
pub fn parse_mem_available(s: &str) -> Option<u64> {
    let kb: u64 = s
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kb * 1024)
}

/// pids.max and pids.current of this process's cgroup (v2), when limited.
fn cgroup_pids() -> Option<(u64, u64)> {
    let cg = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let path = cg.lines().find_map(|l| l.strip_prefix("0::"))?;
    let dir = std::path::Path::new("/sys/fs/cgroup").join(path.trim_start_matches('/'));
    let max = std::fs::read_to_string(dir.join("pids.max")).ok()?;
    let max: u64 = max.trim().parse().ok()?; // "max" = unlimited
    let now: u64 = std::fs::read_to_string(dir.join("pids.current"))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some((max, now))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_files_are_raised_up_to_the_hard_limit_never_lowered() {
        let (soft, hard) = rlimit(libc::RLIMIT_NOFILE);
        assert_eq!(raise_open_files(soft.saturating_sub(1)).unwrap(), soft);
        assert_eq!(raise_open_files(soft).unwrap(), soft);
        let raised = raise_open_files(soft.saturating_add(8)).unwrap();
        assert_eq!(raised, soft.saturating_add(8).min(hard));
        assert_eq!(rlimit(libc::RLIMIT_NOFILE).0, raised);
    }

    fn roomy() -> Limits {
        Limits {
            nproc: None,
            user_tasks: 50,
            kernel_tasks_max: Some(4_000_000),
            tasks_now: Some(300),
            cgroup_pids: None,
            nofile: 1024,
            mem_available_bytes: Some(8 << 30),
        }
    }

    const SMALL: Need = Need {
        tasks: 10,
        fds: 40,
        memory_bytes: 1 << 20,
    };

    #[test]
    fn each_limit_is_named_when_exceeded() {
        assert_eq!(roomy().refusal(SMALL), None);
        let l = Limits {
            nproc: Some(200),
            ..roomy()
        };
        let big = Need {
            tasks: 501,
            ..SMALL
        };
        assert!(l.refusal(big).unwrap().contains("RLIMIT_NPROC"));
        assert!(l.refusal(SMALL).is_none());
        let l = Limits {
            kernel_tasks_max: Some(500),
            ..roomy()
        };
        assert!(l.refusal(big).unwrap().contains("pid_max"));
        let l = Limits {
            cgroup_pids: Some((100, 20)),
            ..roomy()
        };
        assert!(l.refusal(big).unwrap().contains("pids.max"));
        let many_fds = Need { fds: 5000, ..SMALL };
        assert!(roomy().refusal(many_fds).unwrap().contains("RLIMIT_NOFILE"));
        let huge = Need {
            memory_bytes: 1 << 40,
            ..SMALL
        };
        assert!(roomy().refusal(huge).unwrap().contains("MemAvailable"));
    }

    #[test]
    fn proc_files_are_parsed() {
        assert_eq!(
            parse_status_uid_threads("Name:\tx\nUid:\t1000\t1000\t1000\t1000\nThreads:\t7\n"),
            Some((1000, 7))
        );
        assert_eq!(
            parse_loadavg_tasks("0.10 0.20 0.30 2/345 6789\n"),
            Some(345)
        );
        assert_eq!(
            parse_mem_available("MemTotal: 100 kB\nMemAvailable:   2048 kB\n"),
            Some(2 << 20)
        );
        assert_eq!(parse_mem_available("MemTotal: 100 kB\n"), None);
    }

    #[test]
    fn this_machine_has_readable_limits() {
        let l = Limits::capture();
        assert!(l.nofile > 0);
        assert!(l.kernel_tasks_max.is_some() && l.tasks_now.is_some());
        assert!(l.mem_available_bytes.is_some_and(|m| m > 0));
    }
}
