//! Reading a process's state: its scheduling as the kernel reports it
//! ([`SchedInfo`], from `sched_getattr`, `sched_rr_get_interval`, the
//! affinity and /proc via [`crate::sys`]), and the text of `policy get`
//! ([`render_text`]).

use std::io;
use std::path::Path;

use anyhow::{Result, anyhow};
use serde::{Deserialize, Serialize};

use super::explain::strerror;
use crate::policy::{Class, NICE_MAX, NICE_MIN, Policy, RT_MAX, RT_MIN};
use crate::sys::envinfo::format_cpu_list;
use crate::sys::procstat::list_threads;
use crate::sys::{procfs, sched};
use crate::units::format_ns;

const RR_TIMESLICE_SYSCTL: &str = "/proc/sys/kernel/sched_rr_timeslice_ms";

/// A process's (or thread's) scheduling as the kernel reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SchedInfo {
    /// The process id (for entries of `threads`: the thread id).
    pub pid: i32,
    /// `/proc/PID/comm`.
    pub comm: String,
    /// "other", "batch", "idle", "fifo", "rr", "deadline" ("ext" for
    /// sched_ext, "unknown" otherwise).
    pub policy: String,
    /// The kernel's name: "SCHED_FIFO", …
    pub kernel_policy: String,
    /// Fair policies only.
    pub nice: Option<i32>,
    /// FIFO / RR only: 1..99.
    pub priority: Option<u32>,
    /// Fair policies on kernels that report it (6.12+): the EEVDF slice
    /// (`sched_attr.sched_runtime`).
    pub slice_ns: Option<u64>,
    /// DEADLINE only.
    pub runtime_ns: Option<u64>,
    pub deadline_ns: Option<u64>,
    pub period_ns: Option<u64>,
    /// `sched_rr_get_interval`; None if the call failed.
    pub rr_interval_ns: Option<u64>,
    /// What the interval is and where it comes from.
    pub rr_interval_source: String,
    /// The CPUs the task may run on.
    pub affinity: Vec<usize>,
    /// The same as a compact list: "0-3,6".
    pub affinity_list: String,
    pub reset_on_fork: bool,
    /// The raw `sched_flags`.
    pub sched_flags: u64,
    /// With --all-threads: every thread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<Vec<SchedInfo>>,
}

/// Short and kernel names of a kernel policy number.
pub fn policy_names(id: u32) -> (String, String) {
    match Policy::from_kernel_id(id) {
        Some(p) => {
            let kernel = match p {
                Policy::Other => "SCHED_OTHER".to_string(),
                p => format!("SCHED_{}", p.name().to_ascii_uppercase()),
            };
            (p.name().to_string(), kernel)
        }
        None if id == 7 => ("ext".into(), "SCHED_EXT".into()),
        None => ("unknown".into(), format!("policy {id}")),
    }
}

impl SchedInfo {
    /// Builds the report from what the system calls returned.
    pub fn new(
        pid: i32,
        comm: String,
        attr: &sched::SchedAttr,
        rr_interval_ns: Option<u64>,
        rr_timeslice_ms: Option<i64>,
        affinity: Vec<usize>,
    ) -> SchedInfo {
        let (policy, kernel_policy) = policy_names(attr.sched_policy);
        let class = Policy::from_kernel_id(attr.sched_policy).map(Policy::class);
        let dl = class == Some(Class::Deadline);
        let rr_interval_source = match Policy::from_kernel_id(attr.sched_policy) {
            Some(Policy::Rr) => match rr_timeslice_ms {
                Some(ms) => format!("kernel.sched_rr_timeslice_ms = {ms}, {RR_TIMESLICE_SYSCTL}"),
                None => format!("kernel.sched_rr_timeslice_ms, {RR_TIMESLICE_SYSCTL}"),
            },
            Some(Policy::Fifo) => "SCHED_FIFO has no time slice: it runs until it blocks, yields \
                                   or a higher priority preempts it"
                .into(),
            Some(Policy::Deadline) => {
                "SCHED_DEADLINE has no time slice: it runs for its runtime in every period".into()
            }
            Some(_) => "the fair-class slice as the kernel reports it: the EEVDF slice rounded \
                        down to whole jiffies, 0 if shorter than a jiffy or while the task's \
                        run queue is empty"
                .into(),
            None => "what sched_rr_get_interval reports for this policy".into(),
        };
        SchedInfo {
            pid,
            comm,
            policy,
            kernel_policy,
            nice: (class == Some(Class::Fair)).then_some(attr.sched_nice),
            priority: (class == Some(Class::Realtime)).then_some(attr.sched_priority),
            slice_ns: (class == Some(Class::Fair) && attr.sched_runtime > 0)
                .then_some(attr.sched_runtime),
            runtime_ns: dl.then_some(attr.sched_runtime),
            deadline_ns: dl.then_some(attr.sched_deadline),
            period_ns: dl.then_some(attr.sched_period),
            rr_interval_ns,
            rr_interval_source,
            affinity_list: format_cpu_list(&affinity),
            affinity,
            reset_on_fork: attr.sched_flags & sched::SCHED_FLAG_RESET_ON_FORK != 0,
            sched_flags: attr.sched_flags,
            threads: None,
        }
    }

    /// "nice 5", "priority 10", "1 ms / 10 ms / 10 ms".
    fn params(&self) -> String {
        if let Some(n) = self.nice {
            format!("nice {n}")
        } else if let Some(p) = self.priority {
            format!("priority {p}")
        } else if let (Some(r), Some(d), Some(p)) =
            (self.runtime_ns, self.deadline_ns, self.period_ns)
        {
            format!("{} / {} / {}", format_ns(r), format_ns(d), format_ns(p))
        } else {
            "-".into()
        }
    }
}

/// The aligned key/value text of `policy get`.
pub fn render_text(info: &SchedInfo) -> String {
    let mut rows: Vec<(&str, String)> = vec![("pid", format!("{} ({})", info.pid, info.comm))];
    let class = Policy::parse(&info.policy)
        .filter(|_| info.policy != "unknown")
        .map(Policy::class);
    let class_label = match class {
        Some(Class::Fair) => ", fair",
        Some(Class::Realtime) => ", real-time",
        Some(Class::Deadline | Class::Wrr) | None => "",
    };
    rows.push((
        "policy",
        format!("{} ({}{class_label})", info.policy, info.kernel_policy),
    ));
    if let Some(n) = info.nice {
        rows.push((
            "nice",
            if info.policy == "idle" {
                format!("{n} (kept, but SCHED_IDLE ignores it: the lowest weight)")
            } else {
                format!("{n} ({NICE_MIN}..{NICE_MAX}, lower gets more CPU)")
            },
        ));
    }
    if let Some(s) = info.slice_ns {
        rows.push(("slice", format!("{} (EEVDF request size)", format_ns(s))));
    }
    if let Some(p) = info.priority {
        rows.push((
            "priority",
            format!("{p} ({RT_MIN}..{RT_MAX}, higher runs first)"),
        ));
    }
    if let (Some(r), Some(d), Some(p)) = (info.runtime_ns, info.deadline_ns, info.period_ns) {
        rows.push(("runtime", format_ns(r)));
        rows.push(("deadline", format_ns(d)));
        rows.push(("period", format_ns(p)));
        if p > 0 {
            rows.push((
                "bandwidth",
                format!(
                    "{:.1}% of one CPU (runtime / period)",
                    r as f64 * 100.0 / p as f64
                ),
            ));
        }
    }
    rows.push((
        "rr interval",
        match info.rr_interval_ns {
            Some(ns) => format!("{} ({})", format_ns(ns), info.rr_interval_source),
            None => format!("unknown ({})", info.rr_interval_source),
        },
    ));
    rows.push(("affinity", format!("CPUs {}", info.affinity_list)));
    rows.push((
        "reset-on-fork",
        if info.reset_on_fork { "yes" } else { "no" }.to_string(),
    ));
    let mut out = String::new();
    for (k, v) in rows {
        out += &format!("{k:<15}{v}\n");
    }
    if let Some(threads) = &info.threads {
        out += &format!("{:<15}{}\n", "threads", threads.len());
        out += &format!(
            "  {:<8} {:<16} {:<9} {:<28} {:<10} {}\n",
            "TID", "COMM", "POLICY", "PARAMETERS", "AFFINITY", "RESET-ON-FORK"
        );
        for t in threads {
            out += &format!(
                "  {:<8} {:<16} {:<9} {:<28} {:<10} {}\n",
                t.pid,
                t.comm,
                t.policy,
                t.params(),
                t.affinity_list,
                if t.reset_on_fork { "yes" } else { "no" }
            );
        }
    }
    out
}

pub(super) fn no_process(pid: i32) -> anyhow::Error {
    anyhow!("no process with pid {pid}")
}

pub(super) fn is_esrch(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::ESRCH)
}

/// Reads the scheduling of thread `tid` (a pid is its main thread), with the
/// command name from `comm_path`.
fn read_task(tid: i32, comm_path: &Path) -> io::Result<SchedInfo> {
    let attr = sched::get_attr(tid)?;
    let rr = sched::rr_interval_ns(tid).ok();
    let affinity = sched::get_affinity(tid)?;
    let comm = procfs::read_trimmed(comm_path).unwrap_or_else(|| "?".into());
    let timeslice = procfs::read_i64_file(Path::new(RR_TIMESLICE_SYSCTL));
    Ok(SchedInfo::new(tid, comm, &attr, rr, timeslice, affinity))
}

/// The scheduling of `pid`, and of each of its threads with `all_threads`.
pub fn read_info(pid: i32, all_threads: bool) -> Result<SchedInfo> {
    let mut info =
        read_task(pid, &Path::new("/proc").join(pid.to_string()).join("comm")).map_err(|e| {
            if is_esrch(&e) {
                no_process(pid)
            } else {
                anyhow!("cannot read the scheduling of pid {pid}: {}", strerror(&e))
            }
        })?;
    if all_threads {
        let mut threads = Vec::new();
        for tid in list_threads(pid).map_err(|_| no_process(pid))? {
            let comm = format!("/proc/{pid}/task/{tid}/comm");
            match read_task(tid, Path::new(&comm)) {
                Ok(t) => threads.push(t),
                Err(e) if is_esrch(&e) => {} // the thread exited meanwhile
                Err(e) => return Err(anyhow!("cannot read thread {tid} of pid {pid}: {e}")),
            }
        }
        info.threads = Some(threads);
    }
    Ok(info)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(policy: u32) -> sched::SchedAttr {
        match policy {
            sched::SCHED_FIFO | sched::SCHED_RR => sched::SchedAttr::realtime(policy, 10),
            sched::SCHED_DEADLINE => sched::SchedAttr::deadline(1_000_000, 10_000_000, 10_000_000),
            p => sched::SchedAttr::fair(p, 5),
        }
    }

    #[test]
    fn info_keeps_only_the_values_of_its_class() {
        let i = SchedInfo::new(
            7,
            "sleep".into(),
            &sample(sched::SCHED_FIFO),
            Some(0),
            Some(100),
            vec![0],
        );
        assert_eq!(
            (i.policy.as_str(), i.kernel_policy.as_str()),
            ("fifo", "SCHED_FIFO")
        );
        assert_eq!((i.priority, i.nice, i.runtime_ns), (Some(10), None, None));
        assert!(i.rr_interval_source.contains("no time slice"));
        let mut a = sample(sched::SCHED_BATCH);
        a.sched_runtime = 2_800_000;
        let i = SchedInfo::new(
            7,
            "sleep".into(),
            &a,
            Some(2_000_000),
            Some(100),
            vec![0, 1],
        );
        assert_eq!(
            (i.nice, i.priority, i.slice_ns),
            (Some(5), None, Some(2_800_000))
        );
        assert_eq!(i.runtime_ns, None);
        assert!(i.rr_interval_source.contains("fair-class slice"));
        let mut a = sample(sched::SCHED_RR);
        a.sched_flags = sched::SCHED_FLAG_RESET_ON_FORK;
        let i = SchedInfo::new(7, "x".into(), &a, Some(100_000_000), Some(100), vec![1]);
        assert!(i.reset_on_fork);
        assert!(
            i.rr_interval_source
                .contains("kernel.sched_rr_timeslice_ms = 100")
        );
        assert!(i.rr_interval_source.contains(RR_TIMESLICE_SYSCTL));
        let i = SchedInfo::new(
            7,
            "x".into(),
            &sample(sched::SCHED_DEADLINE),
            Some(0),
            None,
            vec![0, 1],
        );
        assert_eq!(
            (i.runtime_ns, i.deadline_ns, i.period_ns, i.priority, i.nice),
            (
                Some(1_000_000),
                Some(10_000_000),
                Some(10_000_000),
                None,
                None
            )
        );
        assert_eq!(policy_names(7), ("ext".into(), "SCHED_EXT".into()));
        assert_eq!(policy_names(0), ("other".into(), "SCHED_OTHER".into()));
        assert_eq!(policy_names(42).0, "unknown");
    }

    #[test]
    fn renders_aligned_text_and_json() {
        let mut info = SchedInfo::new(
            4242,
            "sleep".into(),
            &sample(sched::SCHED_DEADLINE),
            Some(0),
            Some(100),
            vec![0, 1, 2, 5],
        );
        let text = render_text(&info);
        let expected = "pid            4242 (sleep)\n\
                        policy         deadline (SCHED_DEADLINE)\n\
                        runtime        1 ms\n\
                        deadline       10 ms\n\
                        period         10 ms\n\
                        bandwidth      10.0% of one CPU (runtime / period)\n\
                        rr interval    0 ns (SCHED_DEADLINE has no time slice: it runs for its runtime in every period)\n\
                        affinity       CPUs 0-2,5\n\
                        reset-on-fork  no\n";
        assert_eq!(text, expected);

        let rr = SchedInfo::new(
            4242,
            "sleep".into(),
            &sample(sched::SCHED_RR),
            Some(100_000_000),
            Some(100),
            vec![0],
        );
        let text = render_text(&rr);
        assert!(
            text.contains("policy         rr (SCHED_RR, real-time)\n"),
            "{text}"
        );
        assert!(
            text.contains("priority       10 (1..99, higher runs first)\n"),
            "{text}"
        );
        assert!(
            text.contains("rr interval    100 ms (kernel.sched_rr_timeslice_ms = 100, "),
            "{text}"
        );
        let other = SchedInfo::new(
            1,
            "init".into(),
            &sample(sched::SCHED_OTHER),
            Some(3_000_000),
            Some(100),
            vec![0],
        );
        let text = render_text(&other);
        assert!(
            text.contains("policy         other (SCHED_OTHER, fair)\n"),
            "{text}"
        );
        assert!(text.contains("nice           5 (-20..19"), "{text}");
        assert!(!text.contains("priority"), "{text}");

        info.threads = Some(vec![rr.clone(), other.clone()]);
        let text = render_text(&info);
        assert!(text.contains("threads        2\n"), "{text}");
        assert!(text.contains("priority 10"), "{text}");
        assert!(text.contains("nice 5"), "{text}");

        let v: serde_json::Value = serde_json::to_value(&rr).unwrap();
        assert_eq!(v["policy"], "rr");
        assert_eq!(v["priority"], 10);
        assert_eq!(v["nice"], serde_json::Value::Null);
        assert_eq!(v["affinity"], serde_json::json!([0]));
        assert_eq!(v["affinity_list"], "0");
        assert_eq!(v["rr_interval_ns"], 100_000_000);
        assert_eq!(v["reset_on_fork"], false);
        assert!(v.get("threads").is_none());
        let back: SchedInfo = serde_json::from_value(serde_json::to_value(&info).unwrap()).unwrap();
        assert_eq!(back, info);
    }

    #[test]
    fn reads_this_process() {
        let me = std::process::id() as i32;
        let info = read_info(me, true).unwrap();
        assert_eq!(info.pid, me);
        assert!(!info.affinity.is_empty());
        assert!(
            info.threads
                .as_ref()
                .is_some_and(|t| t.iter().any(|t| t.pid == me))
        );
    }

    #[test]
    fn missing_process_is_named() {
        let pid_max =
            procfs::read_i64_file(Path::new("/proc/sys/kernel/pid_max")).unwrap_or(4_194_304);
        let e = read_info(pid_max as i32, false).unwrap_err();
        assert_eq!(e.to_string(), format!("no process with pid {pid_max}"));
    }
}
