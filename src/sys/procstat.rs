//! A process's (or thread's) state from /proc: the one parser of
//! `/proc/PID/stat` ([`ProcStat`]), the thread list (`/proc/PID/task`), the
//! one scan for SCHED_DEADLINE threads ([`deadline_tasks`]), and the uid and
//! rlimit lines of `/proc/PID/status` and `/proc/PID/limits`. Pure parsers
//! over file contents, plus thin readers that fetch the text.

use std::io;
use std::path::Path;

use crate::sys::sched;

/// The fields of a `/proc/PID/stat` (or `/proc/PID/task/TID/stat`) line that
/// schedlab uses, parsed once.
///
/// Only the pid, the command name and the state are required; a later field
/// missing from a short line is None.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcStat {
    /// Field 1: the process (or thread) id.
    pub pid: i32,
    /// Field 2 without its parentheses; it may itself contain spaces and
    /// parentheses (and is truncated by the kernel to 15 bytes).
    pub comm: String,
    /// Field 3: 'R', 'S', 'D', 'T', 'Z', …
    pub state: char,
    /// Field 19: the nice value.
    pub nice: Option<i32>,
    /// Field 22: when the process started, in clock ticks after boot. Tells
    /// a live process from a later one that reuses its pid.
    pub start_ticks: Option<u64>,
    /// Field 41: the scheduling policy (`SCHED_*`).
    pub policy: Option<u32>,
}

/// Parses a `/proc/PID/stat` line. The command name in field 2 may contain
/// spaces and parentheses, so it runs from the first '(' to the last ')' and
/// the other fields are counted after that last ')'.
pub fn parse_stat(text: &str) -> Option<ProcStat> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text.get(open + 1..close)?.to_string();
    let pid = text[..open].trim().parse().ok()?;
    // `rest[0]` is field 3.
    let rest: Vec<&str> = text[close + 1..].split_ascii_whitespace().collect();
    Some(ProcStat {
        pid,
        comm,
        state: rest.first()?.chars().next()?,
        nice: field(&rest, 19),
        start_ticks: field(&rest, 22),
        policy: field(&rest, 41),
    })
}

/// Field `n` (counted from 1, as in proc(5)) of a stat line whose fields
/// from 3 on are `rest`.
fn field<T: std::str::FromStr>(rest: &[&str], n: usize) -> Option<T> {
    rest.get(n - 3)?.parse().ok()
}

/// Reads and parses a stat file; None when missing (the task is gone),
/// unreadable or not a stat line.
pub fn read_stat_at(path: &Path) -> Option<ProcStat> {
    parse_stat(&std::fs::read_to_string(path).ok()?)
}

/// `/proc/PID/stat`.
pub fn read_stat(pid: i32) -> Option<ProcStat> {
    read_stat_at(Path::new(&format!("/proc/{pid}/stat")))
}

/// `/proc/PID/task/TID/stat`.
pub fn read_task_stat(pid: i32, tid: i32) -> Option<ProcStat> {
    read_stat_at(Path::new(&format!("/proc/{pid}/task/{tid}/stat")))
}

/// The thread ids of a process, ascending.
pub fn list_threads(pid: i32) -> io::Result<Vec<i32>> {
    let mut tids: Vec<i32> = std::fs::read_dir(format!("/proc/{pid}/task"))?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    tids.sort_unstable();
    Ok(tids)
}

/// The process ids in /proc (unordered).
fn list_pids() -> Vec<i32> {
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    procs
        .flatten()
        .filter_map(|p| p.file_name().to_str()?.parse().ok())
        .collect()
}

/// A SCHED_DEADLINE thread found in /proc.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadlineTask {
    /// The process the thread belongs to.
    pub pid: i32,
    pub tid: i32,
    /// The thread's command name.
    pub comm: String,
    /// Its `sched_getattr`, with the runtime, deadline and period; None if
    /// the call failed (the thread exited meanwhile).
    pub attr: Option<sched::SchedAttr>,
}

/// Every SCHED_DEADLINE thread of every process: the threads whose stat line
/// names the policy, with their parameters from `sched_getattr`.
pub fn deadline_tasks() -> Vec<DeadlineTask> {
    let mut found = Vec::new();
    for pid in list_pids() {
        for tid in list_threads(pid).unwrap_or_default() {
            let Some(stat) = read_task_stat(pid, tid) else {
                continue;
            };
            if stat.policy != Some(sched::SCHED_DEADLINE) {
                continue;
            }
            found.push(DeadlineTask {
                pid,
                tid,
                comm: stat.comm,
                attr: sched::get_attr(tid).ok(),
            });
        }
    }
    found
}

/// (real, effective) uid from `/proc/PID/status`.
pub fn parse_status_uids(status: &str) -> Option<(u32, u32)> {
    let line = status.lines().find_map(|l| l.strip_prefix("Uid:"))?;
    let mut f = line.split_ascii_whitespace().map(|v| v.parse::<u32>().ok());
    Some((f.next()??, f.next()??))
}

/// (soft, hard) of a `/proc/PID/limits` line such as "Max realtime
/// priority"; `u64::MAX` for unlimited.
pub fn parse_limit(limits: &str, name: &str) -> Option<(u64, u64)> {
    let line = limits.lines().find_map(|l| l.strip_prefix(name))?;
    let mut f = line.split_ascii_whitespace().map(|v| match v {
        "unlimited" => Some(u64::MAX),
        v => v.parse().ok(),
    });
    Some((f.next()??, f.next()??))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(text: &str) -> Option<char> {
        parse_stat(text).map(|s| s.state)
    }

    fn nice(text: &str) -> Option<i32> {
        parse_stat(text)?.nice
    }

    #[test]
    fn stat_state_parses_odd_names() {
        assert_eq!(state("42 (sh) R 1 42 42 0"), Some('R'));
        assert_eq!(state("42 (a) b) (c) T 1 42"), Some('T'));
        assert_eq!(state("42 (sh)"), None);
        assert_eq!(state("garbage"), None);
    }

    #[test]
    fn stat_parsing() {
        let s = parse_stat("12 (a (b) c) S 1 12 12 0 -1").unwrap();
        assert_eq!(s.comm, "a (b) c");
        assert_eq!(s.state, 'S');
        assert_eq!(s.pid, 12);
        assert_eq!((s.nice, s.start_ticks, s.policy), (None, None, None));
    }

    #[test]
    fn stat_nice() {
        let stat = "123 (a) b (c)) S 1 123 123 0 -1 4194304 100 0 0 0 1 2 0 0 20 5 1 0 100 \
                    1000 50 18446744073709551615";
        assert_eq!(nice(stat), Some(5));
        let stat = "9 (kworker) S 2 0 0 0 -1 0 0 0 0 0 0 0 0 0 0 -20 1 0";
        assert_eq!(nice(stat), Some(-20));
        assert_eq!(nice("garbage"), None);
    }

    #[test]
    fn reads_this_process() {
        let me = std::process::id() as i32;
        let s = read_stat(me).unwrap();
        assert_eq!(s.pid, me);
        assert!(s.nice.is_some() && s.start_ticks.is_some(), "{s:?}");
        assert!(s.policy.is_some(), "{s:?}");
        let t = read_task_stat(me, sched::gettid()).unwrap();
        assert_eq!(t.state, 'R');
        assert!(list_threads(me).unwrap().contains(&me));
        assert!(list_pids().contains(&me));
        // PIDs are capped by pid_max (at most 2^22), so this one never exists.
        assert_eq!(read_stat(i32::MAX), None);
    }

    #[test]
    fn deadline_scan_finds_only_deadline_threads() {
        for t in deadline_tasks() {
            assert!(t.tid > 0 && t.pid > 0, "{t:?}");
            if let Some(a) = t.attr {
                assert_eq!(a.sched_policy, sched::SCHED_DEADLINE, "{t:?}");
            }
        }
    }

    #[test]
    fn status_and_limits() {
        let status = "Name:\tsleep\nUid:\t1000\t1001\t1000\t1000\nGid:\t0\t0\t0\t0\n";
        assert_eq!(parse_status_uids(status), Some((1000, 1001)));
        assert_eq!(parse_status_uids("Name:\tx\n"), None);
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \n\
                      Max nice priority         0                    0                    \n\
                      Max realtime priority     10                   unlimited            \n";
        assert_eq!(
            parse_limit(limits, "Max realtime priority"),
            Some((10, u64::MAX))
        );
        assert_eq!(parse_limit(limits, "Max nice priority"), Some((0, 0)));
        assert_eq!(parse_limit(limits, "Max open files"), None);
    }
}
