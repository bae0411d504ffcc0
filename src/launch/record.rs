//! The last phase of a run: what was observed becomes its [`RunRecord`].
//! Each worker is measured over its own window (barrier → end of its work,
//! from the usage and schedstat it reported), a hog over the workers'
//! window and over whole RT periods; the run gets its status, makespan, CPU
//! utilisation, other programs' interference, and the facts of whatever
//! ran beside it (the WRR dispatcher's slices, another program's sched_ext
//! scheduler, the trace's counts).

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use crate::fields::Field;
use crate::plan::Run;
use crate::record::{KernelCounts, ProcessRecord, RunRecord, RunStatus, SliceRow, rusage_fields};
use crate::sys::cgroup::TreeGroup;
use crate::sys::envinfo::EnvSnapshot;
use crate::sys::proc::{self, Exit, Usage};
use crate::sys::procfs;
use crate::trace::Capture;
use crate::worker::WorkerResult;
use crate::workload::command::CommandParams;
use crate::wrr::{DispatchReport, Mechanism};

use super::guard::ParentPriority;
use super::interference;
use super::members::{Cast, Member, Role};
use super::outputs::Outputs;
use super::program;
use super::wait::{Ended, Waited};

/// When and against what machine state a run started.
pub struct Start {
    pub started_unix_ms: i64,
    pub env: EnvSnapshot,
}

impl Start {
    pub fn now() -> Start {
        Start {
            started_unix_ms: crate::store::unix_ms(),
            env: crate::sys::envinfo::capture(),
        }
    }

    /// The record of a run that ended before it was released.
    pub fn ended_early(
        &self,
        run: &Run,
        status: RunStatus,
        cpus: Vec<usize>,
        reason: String,
    ) -> RunRecord {
        RunRecord {
            run: run.clone(),
            status,
            reason,
            makespan_ns: None,
            cpu_util: None,
            cpu_list: cpus,
            started_unix_ms: self.started_unix_ms,
            env: self.env.clone(),
            processes: Vec::new(),
            slices: Vec::new(),
            extra: serde_json::json!({}),
            interference: Default::default(),
        }
    }
}

/// The record of a run that went to its end, and its capture when traced.
pub fn record(
    run: &Run,
    cast: &Cast,
    ended: Ended,
    start: Start,
    timeout: Duration,
    cpu_dma_latency_us: Option<u32>,
) -> (RunRecord, Option<Box<Capture>>) {
    let ctx = RecordContext {
        run,
        members: &cast.members,
        pids: &ended.spawned.workers.pids,
        waited: &ended.waited,
        hog_start: &ended.hog_start,
        release_ns: ended.release_ns,
        outputs: &ended.spawned.outputs,
        timeout,
        trees: &ended.spawned.trees,
        run_dir: ended.spawned.prepared.dir.as_ref().map(|d| d.path()),
    };
    let mut record = ctx.build(cast.cpus.clone(), start.started_unix_ms, start.env);
    for (p, g) in record.processes.iter_mut().zip(&ended.spawned.granted) {
        p.slice_ns = *g;
    }
    record.interference = interference::measure(
        &ended.before,
        &ended.after,
        &cast.run_cpus,
        interference::processes_cpu_ns(&record.processes),
        crate::sys::activity::tick_ns(),
    );
    let busy = interference::cpu_busy_pct(&ended.before, &ended.after);
    if !busy.is_empty() {
        // Each CPU's utilisation over the run, where the work went, as
        // "CPU:% CPU:%" (one string: the CSV export's cell holds no comma).
        let by_cpu = busy
            .iter()
            .map(|(c, pct)| format!("{c}:{pct:.1}"))
            .collect::<Vec<_>>()
            .join(" ");
        add_extra(&mut record, "cpu_busy_pct", serde_json::json!(by_cpu));
    }
    if let Some(us) = cpu_dma_latency_us {
        // No CPU slept deeper than this while the run went on.
        add_extra(&mut record, "cpu_dma_latency_us", serde_json::json!(us));
    }
    if ended.parent != ParentPriority::unchanged().label {
        // What schedlab itself ran as while it watched RT workers.
        add_extra(&mut record, "parent", serde_json::json!(ended.parent));
    }
    if cast.bandwidth_cpus < record.cpu_list.len() {
        let note = format!(
            "SCHED_DEADLINE cannot be pinned to cpus = \"{}\": the workers ran on every CPU \
             with the bandwidth of {} CPU(s) reserved",
            run.cpus.label(),
            cast.bandwidth_cpus
        );
        add_extra(&mut record, "deadline", serde_json::json!(note));
    }
    if let Some(report) = &ended.dispatched {
        attach_dispatch(&mut record, report, ended.release_ns);
    }
    if let Some(x) = ended.ext_report {
        add_extra(&mut record, "ext_scheduler", x.json);
        if let Some(why) = x.failure
            && record.status == RunStatus::Ok
        {
            record.status = RunStatus::Failed;
            record.reason = why;
        }
    }
    let capture = attach_trace(&mut record, ended.traced, ended.release_ns);
    (record, capture)
}

/// The capture of a traced run, marked in the run itself too: a capture
/// with lost events is never used as if it were whole.
fn attach_trace(
    record: &mut RunRecord,
    traced: Option<anyhow::Result<Capture>>,
    release_ns: u64,
) -> Option<Box<Capture>> {
    match traced? {
        Ok(mut c) => {
            c.release_ns = Some(release_ns);
            add_extra(
                record,
                "trace",
                serde_json::json!({
                    "events": c.events.len(),
                    "lost_events": c.lost_events,
                }),
            );
            Some(Box::new(c))
        }
        Err(e) => {
            add_extra(
                record,
                "trace",
                serde_json::json!({ "error": format!("{e:#}") }),
            );
            None
        }
    }
}

/// Add one policy-specific fact to a run's `extra` object.
pub fn add_extra(record: &mut RunRecord, key: &str, value: serde_json::Value) {
    if !record.extra.is_object() {
        record.extra = serde_json::json!({});
    }
    if let Some(map) = record.extra.as_object_mut() {
        map.insert(key.to_string(), value);
    }
}

/// Store what the WRR dispatcher did: every slice (times after barrier
/// release) and a summary of its precision and cost.
fn attach_dispatch(record: &mut RunRecord, report: &DispatchReport, release_ns: u64) {
    let since = |t: u64| t.saturating_sub(release_ns);
    record.slices = report
        .slices
        .iter()
        // The kernel scheduler also reports the turns of workers still
        // starting up (from SCHED_EXT to the barrier): not the run's.
        .filter(|s| report.mechanism != Mechanism::Ext || s.actual_end_ns > release_ns)
        .map(|s| SliceRow {
            process_index: s.task as u32,
            cpu: s.cpu as u32,
            planned_start_ns: since(s.planned_start_ns),
            planned_end_ns: since(s.planned_end_ns),
            actual_end_ns: since(s.actual_end_ns),
            cpu_ns: s.cpu_ns,
        })
        .collect();
    add_extra(
        record,
        "wrr",
        serde_json::json!({
            "mechanism": report.mechanism.name(),
            "slices": report.slices.len(),
            "dispatcher_cpu_ns": report.dispatcher_cpu_ns,
            "dispatcher_overhead": report.overhead(),
            "dispatcher_rt": report.dispatcher_rt,
            "load_cpu_ns": report.load_cpu_ns,
            "lateness_p50_ns": report.lateness_quantile(0.5),
            "lateness_p99_ns": report.lateness_quantile(0.99),
            "errors": report.errors,
        }),
    );
    if !report.errors.is_empty() && record.status == RunStatus::Ok {
        record.status = RunStatus::Failed;
        record.reason = format!("WRR dispatcher: {}", report.errors.join("; "));
    }
}

/// Everything needed to turn what was observed into a [`RunRecord`].
struct RecordContext<'a> {
    run: &'a Run,
    members: &'a [Member],
    pids: &'a [i32],
    waited: &'a Waited,
    hog_start: &'a HashMap<i32, procfs::SchedStat>,
    release_ns: u64,
    outputs: &'a Outputs,
    timeout: Duration,
    /// Per member: its program's process tree (`kind = "command"`).
    trees: &'a [Option<TreeGroup>],
    run_dir: Option<&'a Path>,
}

impl RecordContext<'_> {
    fn build(&self, cpu_list: Vec<usize>, started_unix_ms: i64, env: EnvSnapshot) -> RunRecord {
        let mut processes = Vec::with_capacity(self.pids.len());
        let mut failures = Vec::new();
        let mut programs = Vec::new();
        for (index, (&pid, m)) in self.pids.iter().zip(self.members).enumerate() {
            let tree = self.trees.get(index).and_then(Option::as_ref);
            let (p, why) = match (m.role, tree, m.workload.command()) {
                (Role::Worker, Some(tree), Some(params)) => {
                    let o = self.observed(index, pid, m, params, tree);
                    programs.push(program::extra(&o, self.outputs));
                    program::record(&o, self.outputs)
                }
                (Role::Worker, _, _) => (self.worker(index, pid, m), None),
                (Role::Hog, _, _) => (self.hog(index, pid, m), None),
            };
            if !p.ok && m.role == Role::Worker && !self.waited.timed_out {
                let what = match why {
                    Some(why) => why,
                    None if p.exit == "exit code 0" => "exited without a result".to_string(),
                    None => p.exit.clone(),
                };
                failures.push(match p.stderr_tail.lines().last() {
                    Some(last) if !last.is_empty() && !what.contains(last) => {
                        format!("worker {index}: {what}: {last}")
                    }
                    _ => format!("worker {index}: {what}"),
                });
            }
            processes.push(p);
        }
        let workers = || processes.iter().filter(|p| p.role == "worker");
        let makespan_ns = workers().map(|p| p.wall_ns).max();
        let cpu_us: u64 = workers().map(|p| p.usage.utime_us + p.usage.stime_us).sum();
        let cpu_util = makespan_ns
            .filter(|&m| m > 0)
            .map(|m| cpu_us as f64 * 1000.0 / (m as f64 * cpu_list.len().max(1) as f64));
        let (status, reason) = if self.waited.timed_out {
            let unfinished = workers().filter(|p| !p.ok).count();
            let total = workers().count();
            let timeout_s = self.timeout.as_secs_f64();
            (
                RunStatus::TimedOut,
                format!(
                    "{}{}",
                    crate::record::timeout_reason(timeout_s, unfinished, total),
                    self.lived_on()
                ),
            )
        } else if !failures.is_empty() {
            let more = match failures.len() {
                n if n > 3 => format!(" (and {} more)", n - 3),
                _ => String::new(),
            };
            let shown = failures[..failures.len().min(3)].join("; ");
            (RunStatus::Failed, format!("{shown}{more}"))
        } else {
            (RunStatus::Ok, String::new())
        };
        RunRecord {
            run: self.run.clone(),
            status,
            reason,
            makespan_ns,
            cpu_util,
            cpu_list,
            started_unix_ms,
            env,
            processes,
            slices: Vec::new(),
            extra: match programs.is_empty() {
                true => serde_json::json!({}),
                false => serde_json::json!({ "command": programs }),
            },
            interference: Default::default(),
        }
    }

    /// What was observed of member `index`'s program.
    fn observed<'b>(
        &'b self,
        index: usize,
        pid: i32,
        member: &'b Member,
        params: &'b CommandParams,
        tree: &'b TreeGroup,
    ) -> program::Observed<'b> {
        program::Observed {
            index,
            pid,
            member,
            params,
            exit: self.ended(pid).0,
            end_ns: self.waited.tree_end.get(&index).map(|&t| self.since(t)),
            stopped: self.waited.stopped.contains(&index),
            run_dir: self.run_dir,
            stats: tree.stats(),
            left: self.waited.left.get(&index).map_or(&[], Vec::as_slice),
            killed_at_exit: self.waited.killed_at_exit.contains(&index),
            escaped: self.waited.escaped.get(&index).map_or(&[], Vec::as_slice),
        }
    }

    /// What the programs that exited before their trees left behind, for
    /// a timed-out run's reason: `; worker 0's program exited, and its
    /// tree lived on: pid 12 (sleep 30)`.
    fn lived_on(&self) -> String {
        let mut left: Vec<_> = self
            .waited
            .left
            .iter()
            .filter(|(i, _)| !self.waited.killed_at_exit.contains(i))
            .collect();
        left.sort_by_key(|(i, _)| **i);
        left.iter()
            .map(|(i, l)| {
                format!(
                    "; worker {i}'s program exited, and its tree lived on: {}",
                    super::trees::describe(l)
                )
            })
            .collect()
    }

    fn since(&self, t: u64) -> u64 {
        t.saturating_sub(self.release_ns)
    }

    fn ended(&self, pid: i32) -> (Exit, Usage, Option<procfs::SchedStat>, u64) {
        self.waited.ended.get(&pid).copied().unwrap_or((
            Exit::Signal(libc::SIGKILL),
            Usage::default(),
            None,
            proc::monotonic_ns(),
        ))
    }

    fn worker(&self, index: usize, pid: i32, m: &Member) -> ProcessRecord {
        let (exit, usage, stat, seen_ns) = self.ended(pid);
        let result: Option<WorkerResult> = self.outputs.result(index);
        let ok = exit.success() && result.is_some();
        let tail = if ok {
            String::new()
        } else {
            self.outputs.stderr_tail(index)
        };
        let (start_ns, end_ns) = match &result {
            Some(r) => (Some(self.since(r.start_ns)), Some(self.since(r.end_ns))),
            None => (None, None),
        };
        // The measured window is barrier → end of work when the worker
        // reported; the whole process life (from wait4) when it did not.
        let (usage, stat) = match &result {
            Some(r) => (
                Usage {
                    maxrss_kb: usage.maxrss_kb,
                    ..r.usage_end.since(&r.usage_start)
                },
                match (r.schedstat_start, r.schedstat_end) {
                    (Some(a), Some(b)) => Some(b.since(&a)),
                    _ => stat,
                },
            ),
            None => (usage, stat),
        };
        ProcessRecord {
            index: index as u32,
            role: m.role.as_str().to_string(),
            pid,
            sched: m.sched,
            start_ns,
            end_ns,
            wall_ns: end_ns.unwrap_or_else(|| self.since(seen_ns)),
            usage: usage.into(),
            kernel: rusage_fields(KernelCounts::default(), &usage)
                .with(Field::RunNs, stat.map(|s| s.run_ns))
                .with(Field::WaitNs, stat.map(|s| s.wait_ns))
                .with(Field::Timeslices, stat.map(|s| s.timeslices))
                .with(
                    Field::NrMigrations,
                    result.as_ref().and_then(|r| {
                        Some(r.nr_migrations_end?.saturating_sub(r.nr_migrations_start?))
                    }),
                ),
            work: result.as_ref().map(|r| r.output.work),
            work_unit: m.workload.work_unit().to_string(),
            figures: result
                .as_ref()
                .map(|r| r.output.figures.clone())
                .unwrap_or_default(),
            slice_ns: None,
            latency: result
                .as_ref()
                .map(|r| r.output.latency.clone())
                .unwrap_or_default(),
            exit: exit.describe(),
            ok,
            stderr_tail: tail,
        }
    }

    /// A hog is measured by the parent over the workers' window: from
    /// barrier release to the moment the last worker ended.
    fn hog(&self, index: usize, pid: i32, m: &Member) -> ProcessRecord {
        let (exit, usage, _, seen_ns) = self.ended(pid);
        let window = match (self.hog_start.get(&pid), self.waited.hog_end.get(&pid)) {
            (Some(a), Some((b, t))) => Some((b.since(a), self.since(*t))),
            _ => None,
        };
        let mut figures = std::collections::BTreeMap::new();
        // The share over whole RT periods (the hog's steady state), and over
        // the workers' whole window for reference.
        let periods = match (self.hog_start.get(&pid), self.waited.hog_periods.get(&pid)) {
            (Some(a), Some((b, t))) => Some((b.since(a), self.since(*t))),
            _ => None,
        };
        if let Some((stat, wall)) = periods
            && wall > 0
        {
            figures.insert("cpu_share".to_string(), stat.run_ns as f64 / wall as f64);
            figures.insert("share_window_s".to_string(), wall as f64 / 1e9);
        }
        if let Some((stat, wall)) = window
            && wall > 0
        {
            figures.insert(
                "cpu_share_run".to_string(),
                stat.run_ns as f64 / wall as f64,
            );
        }
        ProcessRecord {
            index: index as u32,
            role: m.role.as_str().to_string(),
            pid,
            sched: m.sched,
            start_ns: Some(0),
            end_ns: window.map(|w| w.1),
            wall_ns: window.map(|w| w.1).unwrap_or_else(|| self.since(seen_ns)),
            usage: usage.into(),
            kernel: rusage_fields(KernelCounts::default(), &usage)
                .with(Field::RunNs, window.map(|w| w.0.run_ns))
                .with(Field::WaitNs, window.map(|w| w.0.wait_ns))
                .with(Field::Timeslices, window.map(|w| w.0.timeslices)),
            work: None,
            work_unit: "ns".to_string(),
            figures,
            slice_ns: None,
            latency: Default::default(),
            exit: exit.describe(),
            // Killed on purpose once the workers were done.
            ok: window.is_some(),
            stderr_tail: String::new(),
        }
    }
}
