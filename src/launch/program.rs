//! The record of a worker that became another program (`kind =
//! "command"`): measured over its whole process tree through its cgroup
//! and the tree's exit records, never through the top process alone. Its
//! wall time runs from release to the exit of the tree's last process, and
//! its CPU time from release too (the worker's start-up is not counted); its
//! figures come from the program's own output (regex, JSON pointer or a
//! standard benchmark's parser). A figure the kernel cannot give for a
//! tree stays empty, with the reason in the run's `extra.command`.

use std::collections::BTreeMap;
use std::path::Path;

use crate::fields::Field;
use crate::policy::Policy;
use crate::record::{KernelCounts, ProcessRecord, ProcessUsage};
use crate::sys::cgroup::{Escaped, TreeStats};
use crate::sys::proc::Exit;
use crate::workload::command::CommandParams;
use crate::workload::command::figures::{self, Captured};

use super::members::Member;
use super::outputs::{Outputs, ProgramOutput};

/// What the launcher observed of one program.
pub struct Observed<'a> {
    pub index: usize,
    pub pid: i32,
    pub member: &'a Member,
    pub params: &'a CommandParams,
    /// How the top process ended.
    pub exit: Exit,
    /// ns after release the tree was seen empty (None: it never was).
    pub end_ns: Option<u64>,
    /// schedlab stopped it at the end of `duration_s`.
    pub stopped: bool,
    /// The run directory, the default working directory.
    pub run_dir: Option<&'a Path>,
    /// The tree's figures, read once its last process had gone.
    pub stats: TreeStats,
    /// The processes (pid, command) left when the program itself exited
    /// before the rest of its tree.
    pub left: &'a [(i32, String)],
    /// Those were killed at the program's exit (`end = "exit"`).
    pub killed_at_exit: bool,
    /// Processes of the tree found alive outside its groups, killed.
    pub escaped: &'a [Escaped],
}

/// A program's process record, and why it failed when it did.
pub fn record(o: &Observed, outputs: &Outputs) -> (ProcessRecord, Option<String>) {
    let stats = &o.stats;
    let out = outputs.program_output(o.index);
    let exit_ok = match o.exit {
        Exit::Code(c) => u8::try_from(c).is_ok_and(|c| o.params.ok_exit.contains(&c)),
        Exit::Signal(_) => false,
    };
    let cwd = o
        .params
        .cwd
        .as_deref()
        .or(o.run_dir)
        .unwrap_or(Path::new("."));
    let mut failure = match (o.stopped || exit_ok, o.end_ns) {
        _ if !o.escaped.is_empty() => Some(escape_failure(o.escaped)),
        (_, None) if !o.left.is_empty() => Some(format!(
            "its process tree did not end: the program (pid {}) exited, and left {}",
            o.pid,
            super::trees::describe(o.left)
        )),
        (_, None) => Some("its process tree did not end".to_string()),
        (false, _) => Some(format!(
            "the program ended with {} (ok_exit: {:?})",
            o.exit.describe(),
            o.params.ok_exit
        )),
        (true, Some(_)) => None,
    };
    if failure.is_none() {
        failure = cpu_unread(stats);
    }
    let extracted = match (&failure, &out) {
        (None, Some(out)) => match figures::extract(o.params, captured(out, cwd)) {
            Ok(x) => Some(x),
            Err(e) => {
                failure = Some(e.to_string());
                None
            }
        },
        _ => None,
    };
    let mut figs: BTreeMap<String, f64> =
        extracted.as_ref().map(|x| x.values()).unwrap_or_default();
    if let Some(t) = stats.tasks {
        figs.insert("tree_tasks".into(), t as f64);
    }
    if let Some(us) = stats.cpu_pressure_some_us {
        figs.insert("tree_cpu_pressure_some_us".into(), us as f64);
    }
    let tail = match (&failure, &out) {
        (Some(_), Some(out)) => figures::tail_lines(out.stderr, figures::TAIL_LINES),
        _ => String::new(),
    };
    let record = ProcessRecord {
        index: o.index as u32,
        role: o.member.role.as_str().to_string(),
        pid: o.pid,
        sched: o.member.sched,
        start_ns: Some(0),
        end_ns: o.end_ns,
        wall_ns: o.end_ns.unwrap_or(0),
        usage: tree_usage(stats),
        // The tree's CPU time from its cgroup, its switches, faults, block
        // I/O, waits and slices from its tasks' exit records. /proc/PID/sched counts
        // migrations per task, and a task's exit record (taskstats)
        // carries none: not counted over a tree.
        kernel: KernelCounts::default()
            .with(Field::Nvcsw, stats.voluntary_switches)
            .with(Field::Nivcsw, stats.involuntary_switches)
            .with(Field::Minflt, stats.minor_faults)
            .with(Field::Majflt, stats.major_faults)
            .with(Field::Inblock, stats.read_blocks)
            .with(Field::Oublock, stats.write_blocks)
            .with(Field::RunNs, stats.cpu_usage_ns)
            .with(Field::WaitNs, stats.run_queue_wait_ns)
            .with(Field::Timeslices, stats.timeslices),
        work: Some(u64::from(failure.is_none())),
        work_unit: o.member.workload.work_unit().to_string(),
        figures: figs,
        latency: extracted
            .as_ref()
            .map(|x| x.latency_encoded())
            .unwrap_or_default(),
        slice_ns: None,
        exit: o.exit.describe(),
        ok: failure.is_none(),
        stderr_tail: tail,
    };
    (record, failure)
}

/// Why a tree some of whose processes left its groups fails: its figures
/// miss them from the moment they left, and its end is not theirs.
fn escape_failure(escaped: &[Escaped]) -> String {
    let named: Vec<(i32, String)> = escaped.iter().map(|e| (e.pid, e.command.clone())).collect();
    format!(
        "processes of its tree moved themselves out of its cgroups and lived on unmeasured \
         (killed by schedlab): {}",
        super::trees::describe(&named)
    )
}

/// The tree's usage: CPU and peak memory of every process it had (its
/// switches and page faults are fields of the registry). A figure the
/// kernel could not give stays None (stored NULL), named with why in
/// `extra.command.missing`; a tree whose CPU was not read has failed its
/// run ([`cpu_unread`]), so its 0 is never taken for a measurement.
fn tree_usage(s: &TreeStats) -> ProcessUsage {
    ProcessUsage {
        utime_us: s.cpu_user_ns.unwrap_or(0) / 1000,
        stime_us: s.cpu_system_ns.unwrap_or(0) / 1000,
        maxrss_kb: s.peak_memory_bytes.map(|b| b / 1024),
    }
}

/// Why the tree's CPU time could not be read, when it could not: the
/// record's user and system time have no empty value, so such a run fails
/// rather than store 0 as the tree's CPU (neither cgroup2's `cpu.stat` nor a
/// v1 cpuacct group gave it).
fn cpu_unread(s: &TreeStats) -> Option<String> {
    match (s.cpu_user_ns, s.cpu_system_ns) {
        (Some(_), Some(_)) => None,
        _ => {
            let why = ["cpu_user_ns", "cpu_system_ns"]
                .iter()
                .find_map(|k| s.missing.get(k))
                .map_or("no reading", String::as_str);
            Some(format!("the tree's CPU time could not be read: {why}"))
        }
    }
}

fn captured<'a>(out: &ProgramOutput<'a>, cwd: &'a Path) -> figures::Outputs<'a> {
    figures::Outputs {
        stdout: Captured {
            bytes: out.stdout,
            dropped_bytes: out.stdout_dropped,
        },
        stderr: Captured {
            bytes: out.stderr,
            dropped_bytes: out.stderr_dropped,
        },
        cwd,
    }
}

/// What the run's `extra.command` says of each program: the figures the
/// kernel could not give for its tree (and why), what was dropped of its
/// output, whether schedlab stopped it.
pub fn extra(o: &Observed, outputs: &Outputs) -> serde_json::Value {
    let mut missing: BTreeMap<String, String> = o
        .stats
        .missing
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    missing.insert(
        "nr_migrations".into(),
        "migrations are counted per task by /proc/PID/sched, and exit records carry none".into(),
    );
    let out = outputs.program_output(o.index);
    let exit_policies: BTreeMap<String, u64> = o
        .stats
        .exit_policies
        .iter()
        .map(|(&p, &n)| (policy_name(p), n))
        .collect();
    let mut v = serde_json::json!({
        "worker": o.index,
        "stopped_by_schedlab": o.stopped,
        "top_exit": o.exit.describe(),
        "stdout_dropped_bytes": out.as_ref().map_or(0, |x| x.stdout_dropped),
        "stderr_dropped_bytes": out.as_ref().map_or(0, |x| x.stderr_dropped),
        "missing": missing,
        "exit_policies": exit_policies,
    });
    if let Some(c) = policy_caveat(o.member.sched.policy, &o.stats.exit_policies) {
        v["caveat"] = c.into();
    }
    let named = |l: &[(i32, String)]| -> serde_json::Value {
        l.iter()
            .map(|(pid, command)| serde_json::json!({"pid": pid, "command": command}))
            .collect()
    };
    if !o.left.is_empty() {
        // The processes that outlived the program, and what became of them.
        v["left_at_exit"] = named(o.left);
        v["killed_at_exit"] = o.killed_at_exit.into();
    }
    if !o.escaped.is_empty() {
        let l: Vec<(i32, String)> = o
            .escaped
            .iter()
            .map(|e| (e.pid, e.command.clone()))
            .collect();
        v["escaped_cgroups"] = named(&l);
    }
    v
}

/// A kernel policy number's name (`fifo`; `ext` for sched_ext's).
fn policy_name(id: u32) -> String {
    match Policy::from_kernel_id(id) {
        Some(p) => p.name().to_string(),
        None if id == SCHED_EXT => "ext".into(),
        None => format!("policy {id}"),
    }
}

/// The kernel's number for SCHED_EXT, which the tasks of a run under
/// `matrix.ext_scheduler` inherit.
const SCHED_EXT: u32 = 7;

/// What to say when tasks of the tree exited under another policy than the
/// run gave it: the program changed it for itself (`chrt -f 50 …`), so its
/// figures are not the run's policy's. Not under WRR (its dispatcher gives
/// turns as FIFO), nor of SCHED_EXT (a sched_ext scheduler's tasks).
fn policy_caveat(given: Policy, exits: &BTreeMap<u32, u64>) -> Option<String> {
    if given == Policy::Wrr {
        return None;
    }
    let other: Vec<String> = exits
        .iter()
        .filter(|&(&p, _)| p != given.kernel_id() && p != SCHED_EXT)
        .map(|(&p, &n)| format!("{n} under {}", policy_name(p)))
        .collect();
    (!other.is_empty()).then(|| {
        format!(
            "of its tasks, {} at their exit, not {}: the program changed its own policy (as \
             chrt does), so what it measured is not {}'s alone",
            other.join(", "),
            given.name(),
            given.name()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tasks_that_changed_their_policy_are_named() {
        let exits = BTreeMap::from([(0, 1), (1, 3)]);
        let c = policy_caveat(Policy::Other, &exits).unwrap();
        assert!(c.contains("3 under fifo") && c.contains("not other"), "{c}");
        assert_eq!(policy_caveat(Policy::Fifo, &BTreeMap::from([(1, 4)])), None);
        // sched_ext's tasks and WRR's dispatched ones are not the program's doing.
        assert_eq!(
            policy_caveat(Policy::Other, &BTreeMap::from([(7, 2)])),
            None
        );
        assert_eq!(policy_caveat(Policy::Wrr, &exits), None);
        assert_eq!(policy_name(7), "ext");
        assert_eq!(policy_name(42), "policy 42");
    }

    #[test]
    fn a_tree_whose_cpu_was_not_read_fails_naming_why() {
        let mut s = TreeStats {
            cpu_user_ns: Some(5_000),
            cpu_system_ns: Some(1_000),
            ..Default::default()
        };
        assert_eq!(cpu_unread(&s), None);
        s.cpu_user_ns = None;
        s.cpu_system_ns = None;
        s.missing.insert(
            "cpu_user_ns",
            "no cgroup2 cpu.stat and no cpuacct group".into(),
        );
        let why = cpu_unread(&s).unwrap();
        assert!(why.contains("CPU time could not be read"), "{why}");
        assert!(why.contains("no cpuacct group"), "{why}");
    }
}
