//! [`TreeStats`]: what one worker's whole process tree used, each figure
//! from the kernel's accounting made for it, and None with the reason
//! where this kernel or machine cannot give it (never the top process's
//! own figure in the tree's place).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use super::exits::attribute;
use super::files::{
    CpuStat, parse_cpu_stat, parse_cpuacct_stat_ticks, parse_pressure_some_total_us,
};
use super::session::Session;
use super::taskstats::ExitRecord;

/// The tree's figures; `missing` holds, for every figure that is None, its
/// name and why.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TreeStats {
    /// CPU time of every task of the tree, exited ones included, from
    /// release when the group was marked then
    /// ([`TreeGroup::mark_release`](super::TreeGroup::mark_release)).
    pub cpu_usage_ns: Option<u64>,
    pub cpu_user_ns: Option<u64>,
    pub cpu_system_ns: Option<u64>,
    /// The most memory the tree held at once (v1 `memory.max_usage_in_bytes`,
    /// v2 `memory.peak`).
    pub peak_memory_bytes: Option<u64>,
    /// Microseconds in which some task of the tree waited for a CPU (v2
    /// `cpu.pressure`, `some total`), from release as the CPU time.
    pub cpu_pressure_some_us: Option<u64>,
    /// Tasks (processes and threads) of the tree, the top process
    /// included: its exit records.
    pub tasks: Option<u64>,
    /// Run-queue wait summed over the tree's tasks (taskstats
    /// `cpu_delay_total`).
    pub run_queue_wait_ns: Option<u64>,
    /// Times a task of the tree was put on a CPU, summed over its tasks
    /// (taskstats `cpu_count`: the scheduler's `sched_info.pcount`, the
    /// second field of `/proc/PID/schedstat`'s three).
    pub timeslices: Option<u64>,
    /// Minor and major page faults summed over the tree's tasks (taskstats
    /// `ac_minflt`/`ac_majflt`, each task's own).
    pub minor_faults: Option<u64>,
    pub major_faults: Option<u64>,
    pub voluntary_switches: Option<u64>,
    pub involuntary_switches: Option<u64>,
    /// Filesystem input and output operations in 512-byte blocks summed
    /// over the tree's tasks, each task's as its rusage counts them
    /// (`read_bytes / 512`; `(write_bytes - cancelled_write_bytes) / 512`),
    /// from its taskstats bytes, which are rounded down to KiB (a task
    /// that cancelled more than it wrote, by truncating others' dirty
    /// pages, counts 0 written where the kernel's own count wraps).
    pub read_blocks: Option<u64>,
    pub write_blocks: Option<u64>,
    /// The top process's wait status, from its exit record.
    pub top_exit_status: Option<u32>,
    /// Tasks of the tree by the policy they exited under (the kernel's
    /// number; empty without exit records).
    pub exit_policies: BTreeMap<u32, u64>,
    pub missing: BTreeMap<&'static str, String>,
}

impl TreeStats {
    fn set<T>(&mut self, name: &'static str, value: Result<T, String>) -> Option<T> {
        match value {
            Ok(v) => Some(v),
            Err(why) => {
                self.missing.insert(name, why);
                None
            }
        }
    }
}

/// The figures of a tree whose groups are `v2`, `cpuacct` and `memory`,
/// whose known tasks are `known` (top process first) and whose exit
/// records start at `start_seq` in the session's log. `running` when the
/// tree is not empty yet (exit records are then incomplete).
pub(super) struct Sources<'a> {
    pub v2: Option<&'a Path>,
    pub cpuacct: Option<&'a Path>,
    pub memory: Option<&'a Path>,
    pub top: Option<i32>,
    pub known: &'a BTreeSet<i32>,
    pub start_seq: u64,
    pub running: bool,
    /// The counters at release, when the group was marked then.
    pub at_release: Option<&'a AtRelease>,
}

/// A tree's counters at release, the start of its window: what its first
/// process did before (a worker's start-up, from its exec to the
/// barrier: schedlab's code, not the program's) is left out of its
/// figures. Under QEMU without KVM that start-up is tens to hundreds of
/// milliseconds of CPU.
#[derive(Debug, Clone)]
pub(super) struct AtRelease {
    cpu: Result<CpuStat, String>,
    pressure_some_us: Option<u64>,
}

/// Reads the counters of the groups `v2` and `cpuacct` now.
pub(super) fn at_release(v2: Option<&Path>, cpuacct: Option<&Path>) -> AtRelease {
    AtRelease {
        cpu: cpu_now(v2, cpuacct),
        pressure_some_us: v2.and_then(|d| pressure_now(d).ok()),
    }
}

/// The CPU used since release: `now` less the reading at release, when
/// there was one.
fn cpu_since(
    now: Result<CpuStat, String>,
    at_release: Option<&AtRelease>,
) -> Result<CpuStat, String> {
    let now = now?;
    match at_release.map(|a| &a.cpu) {
        None => Ok(now),
        Some(Ok(base)) => Ok(now.since(*base)),
        Some(Err(why)) => Err(format!("the tree's CPU at release: {why}")),
    }
}

pub(super) fn gather(session: &Session, src: &Sources<'_>) -> TreeStats {
    let mut s = TreeStats::default();
    let cpu = cpu_since(cpu_now(src.v2, src.cpuacct), src.at_release);
    let (usage, user, system) = match cpu {
        Ok(c) => (Ok(c.usage_ns), Ok(c.user_ns), Ok(c.system_ns)),
        Err(why) => (Err(why.clone()), Err(why.clone()), Err(why)),
    };
    s.cpu_usage_ns = s.set("cpu_usage_ns", usage);
    s.cpu_user_ns = s.set("cpu_user_ns", user);
    s.cpu_system_ns = s.set("cpu_system_ns", system);
    s.peak_memory_bytes = s.set("peak_memory_bytes", peak_memory(src));
    s.cpu_pressure_some_us = s.set("cpu_pressure_some_us", pressure(src));
    match exit_records(session, src) {
        Ok(records) => {
            let refs: Vec<&ExitRecord> = records.iter().collect();
            s.tasks = Some(refs.len() as u64);
            // A task that ran has a run count; none means the kernel kept
            // no delay record for it. Every task's own wait counts, the top
            // process's too: a shell woken by its child's exit waits on the
            // run queue like the children it forked.
            let delay = refs.iter().all(|r| r.cpu_count > 0);
            let from_delay = |f: fn(&ExitRecord) -> u64| -> Result<u64, String> {
                match delay {
                    true => Ok(refs.iter().map(|r| f(r)).sum()),
                    false => Err("this kernel keeps no delay records (built without \
                                  CONFIG_TASK_DELAY_ACCT, or booted with nodelayacct)"
                        .to_string()),
                }
            };
            s.run_queue_wait_ns = s.set("run_queue_wait_ns", from_delay(|r| r.cpu_delay_ns));
            s.timeslices = s.set("timeslices", from_delay(|r| r.cpu_count));
            s.minor_faults = Some(refs.iter().map(|r| r.minflt).sum());
            s.major_faults = Some(refs.iter().map(|r| r.majflt).sum());
            let sum = |f: fn(&ExitRecord) -> Option<u64>| -> Result<u64, String> {
                refs.iter()
                    .map(|r| f(r))
                    .sum::<Option<u64>>()
                    .ok_or_else(|| "this kernel's taskstats have no context switches".into())
            };
            s.voluntary_switches = s.set("voluntary_switches", sum(|r| r.nvcsw));
            s.involuntary_switches = s.set("involuntary_switches", sum(|r| r.nivcsw));
            let (read, write) = io_blocks(&refs);
            s.read_blocks = s.set("read_blocks", read);
            s.write_blocks = s.set("write_blocks", write);
            for p in refs.iter().filter_map(|r| r.policy) {
                *s.exit_policies.entry(p).or_default() += 1;
            }
            let top = refs
                .iter()
                .find(|r| Some(r.tid) == src.top)
                .map(|r| r.exit_code);
            s.top_exit_status = s.set(
                "top_exit_status",
                top.ok_or_else(|| "no exit record of the top process".to_string()),
            );
        }
        Err(why) => {
            for name in [
                "tasks",
                "run_queue_wait_ns",
                "timeslices",
                "minor_faults",
                "major_faults",
                "voluntary_switches",
                "involuntary_switches",
                "read_blocks",
                "write_blocks",
                "top_exit_status",
            ] {
                s.missing.insert(name, why.clone());
            }
        }
    }
    s
}

/// The tree's blocks read and written ([`TreeStats::read_blocks`]), or why
/// this kernel gives none.
fn io_blocks(refs: &[&ExitRecord]) -> (Result<u64, String>, Result<u64, String>) {
    if !crate::sys::proc::io_accounted() {
        let why = "this kernel keeps no per-task I/O accounting (built without \
                   CONFIG_TASK_IO_ACCOUNTING: no /proc/PID/io)";
        return (Err(why.into()), Err(why.into()));
    }
    let sum = |f: fn(&ExitRecord) -> Option<u64>| -> Result<u64, String> {
        refs.iter()
            .map(|r| f(r).map(|bytes| bytes >> 9))
            .sum::<Option<u64>>()
            .ok_or_else(|| "this kernel's taskstats have no storage I/O bytes".into())
    };
    (
        sum(|r| r.read_bytes),
        sum(|r| Some(r.write_bytes?.saturating_sub(r.cancelled_write_bytes?))),
    )
}

fn cpu_now(v2: Option<&Path>, cpuacct: Option<&Path>) -> Result<CpuStat, String> {
    if let Some(v2) = v2 {
        let text = std::fs::read_to_string(v2.join("cpu.stat"))
            .map_err(|e| format!("reading {}: {e}", v2.join("cpu.stat").display()))?;
        let c = parse_cpu_stat(&text)
            .ok_or_else(|| format!("{} lacks usage/user/system", v2.join("cpu.stat").display()))?;
        return Ok(c);
    }
    let Some(acct) = cpuacct else {
        return Err(
            "no cgroup2 hierarchy, and v1 cpuacct is not mounted on its own (mounted with cpu, \
             a group there would change scheduling)"
                .into(),
        );
    };
    let read = |name: &str| crate::sys::procfs::read_u64_file(&acct.join(name));
    let usage = read("cpuacct.usage").ok_or("no cpuacct.usage")?;
    let (user, system) = match (read("cpuacct.usage_user"), read("cpuacct.usage_sys")) {
        (Some(u), Some(s)) => (u, s),
        _ => {
            let text = std::fs::read_to_string(acct.join("cpuacct.stat")).unwrap_or_default();
            let (u, s) = parse_cpuacct_stat_ticks(&text).ok_or("no cpuacct.stat")?;
            let ns_per_tick = crate::sys::activity::tick_ns();
            (u * ns_per_tick, s * ns_per_tick)
        }
    };
    Ok(CpuStat {
        usage_ns: usage,
        user_ns: user,
        system_ns: system,
    })
}

fn peak_memory(src: &Sources<'_>) -> Result<u64, String> {
    if let Some(v2) = src.v2
        && let Some(p) = crate::sys::procfs::read_u64_file(&v2.join("memory.peak"))
    {
        return Ok(p);
    }
    if let Some(m) = src.memory
        && let Some(p) = crate::sys::procfs::read_u64_file(&m.join("memory.max_usage_in_bytes"))
    {
        return Ok(p);
    }
    Err(
        "neither v2 memory.peak (memory controller enabled, Linux 5.19+) nor a v1 memory \
         group"
            .into(),
    )
}

fn pressure(src: &Sources<'_>) -> Result<u64, String> {
    let v2 = src.v2.ok_or("no cgroup2 hierarchy")?;
    let now = pressure_now(v2)?;
    let base = src.at_release.and_then(|a| a.pressure_some_us);
    Ok(now.saturating_sub(base.unwrap_or(0)))
}

fn pressure_now(v2: &Path) -> Result<u64, String> {
    let text = std::fs::read_to_string(v2.join("cpu.pressure"))
        .map_err(|_| "no cpu.pressure (pressure stall information is off)".to_string())?;
    parse_pressure_some_total_us(&text).ok_or_else(|| "cpu.pressure has no some total".into())
}

fn exit_records(session: &Session, src: &Sources<'_>) -> Result<Vec<ExitRecord>, String> {
    if src.running {
        return Err("the tree is still running (its exit records are not all in)".into());
    }
    let listener = session
        .listener
        .as_ref()
        .map_err(|why| format!("no taskstats exit listener: {why}"))?;
    if !listener.sync(Duration::from_secs(2)) {
        return Err("the taskstats reader did not catch up within 2 s".into());
    }
    let log = listener
        .log()
        .lock()
        .map_err(|_| "the taskstats log is poisoned".to_string())?;
    if log.lost > 0 {
        return Err(format!(
            "the kernel dropped exit records {} time(s) (its socket buffer overflowed)",
            log.lost
        ));
    }
    let records: Vec<ExitRecord> = log
        .records
        .iter()
        .filter(|(seq, _)| *seq >= src.start_seq)
        .map(|(_, r)| r.clone())
        .collect();
    let tree: Vec<ExitRecord> = attribute(&records, src.known)
        .into_iter()
        .cloned()
        .collect();
    complete(tree, src.top)
}

/// The tree's exit records, if the top process's is among them. The top
/// process always exits before its tree is seen empty, so without its
/// record the records are not all in, and sums over them would pass a
/// part of the tree (often nothing: 0 switches, 0 tasks) off as the
/// whole. Taskstats sends exit records to listeners in the initial
/// network namespace only: schedlab in a network namespace of its own (a
/// container's; `unshare --net`) registers a listener that receives none.
fn complete(tree: Vec<ExitRecord>, top: Option<i32>) -> Result<Vec<ExitRecord>, String> {
    match top {
        // The reason is the same for every run it happens to (no pid), so
        // that a report says it once.
        Some(top) if !tree.iter().any(|r| r.tid == top) => Err(
            "no taskstats exit record of the tree's top process arrived, so the tree's records \
             are not all in (taskstats sends them to listeners in the initial network namespace \
             only: is schedlab in a network namespace of its own, e.g. a container's?)"
                .to_string(),
        ),
        _ => Ok(tree),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without the top process's exit record none of the tree's records
    /// are used (an empty log gives no figure at all, not zeros).
    #[test]
    fn a_tree_without_its_top_s_exit_record_has_no_record_figures() {
        let rec = |tid: i32| ExitRecord {
            tid,
            ..ExitRecord::default()
        };
        let why = complete(vec![], Some(40)).unwrap_err();
        assert!(
            why.contains("top process") && why.contains("network namespace"),
            "{why}"
        );
        assert!(complete(vec![rec(41)], Some(40)).is_err());
        assert_eq!(complete(vec![rec(41), rec(40)], Some(40)).unwrap().len(), 2);
        assert_eq!(complete(vec![rec(41)], None).unwrap().len(), 1);
    }

    /// A tree's blocks are its tasks' own, each counted as its rusage
    /// counts them (a write truncated before writeback is not one); a
    /// record too short to have the bytes empties them rather than count
    /// 0; a kernel without I/O accounting gives none, saying why.
    #[test]
    fn a_tree_s_block_io_sums_its_tasks_as_rusage_counts_them() {
        let rec = |read: u64, write: u64, cancelled: u64| ExitRecord {
            read_bytes: Some(read),
            write_bytes: Some(write),
            cancelled_write_bytes: Some(cancelled),
            ..ExitRecord::default()
        };
        let (a, b) = (rec(1 << 20, 3 << 20, 1 << 20), rec(1024, 4096, 0));
        let (read, write) = io_blocks(&[&a, &b]);
        if !crate::sys::proc::io_accounted() {
            assert!(read.unwrap_err().contains("CONFIG_TASK_IO_ACCOUNTING"));
            assert!(write.is_err());
            return;
        }
        assert_eq!(read, Ok(2048 + 2));
        assert_eq!(write, Ok(4096 + 8));
        let short = ExitRecord::default();
        let (read, write) = io_blocks(&[&a, &short]);
        assert!(read.unwrap_err().contains("no storage I/O"));
        assert!(write.is_err());
    }

    #[test]
    fn every_missing_figure_says_why() {
        let mut s = TreeStats::default();
        assert_eq!(
            s.set("cpu_usage_ns", Err::<u64, _>("no cgroup2".into())),
            None
        );
        assert_eq!(s.set("tasks", Ok(3u64)), Some(3));
        assert_eq!(
            s.missing.get("cpu_usage_ns").map(String::as_str),
            Some("no cgroup2")
        );
        assert!(!s.missing.contains_key("tasks"));
    }

    /// A tree's CPU runs from release: the worker's start-up before it is
    /// left out; a reading at release that failed empties the figure (with
    /// why) rather than counting the start-up; an unmarked group counts
    /// everything since it was made.
    #[test]
    fn cpu_from_release() {
        let cpu = |usage_ms: u64, user_ms: u64| CpuStat {
            usage_ns: usage_ms * 1_000_000,
            user_ns: user_ms * 1_000_000,
            system_ns: (usage_ms - user_ms) * 1_000_000,
        };
        let marked = AtRelease {
            cpu: Ok(cpu(180, 150)),
            pressure_some_us: None,
        };
        assert_eq!(
            cpu_since(Ok(cpu(1180, 1100)), Some(&marked)),
            Ok(cpu(1000, 950))
        );
        assert_eq!(cpu_since(Ok(cpu(1180, 1100)), None), Ok(cpu(1180, 1100)));
        let unread = AtRelease {
            cpu: Err("reading x/cpu.stat: gone".into()),
            pressure_some_us: None,
        };
        assert_eq!(
            cpu_since(Ok(cpu(1180, 1100)), Some(&unread)),
            Err("the tree's CPU at release: reading x/cpu.stat: gone".to_string())
        );
        assert_eq!(
            cpu_since(Err("no cpu.stat".into()), Some(&marked)),
            Err("no cpu.stat".to_string())
        );
    }
}
