//! The export's rows ([`ExportRow`]: one per process of every run, with
//! its trace and latency figures), read by one query and streamed to the
//! CSV, JSON and Parquet writers.

use anyhow::Result;
use std::collections::{BTreeMap, BTreeSet};

use super::Store;
use super::counts;
use super::named::{Columns, Named};
use crate::record::{KernelCounts, ProcessUsage};

/// One row of an export: one process of one run (or one row for a run
/// without processes, such as a skipped one). Process fields are None in
/// such a row, and wherever a database written before the column existed
/// has no value.
#[derive(Debug, Clone, PartialEq)]
pub struct ExportRow {
    pub campaign: i64,
    pub campaign_name: String,
    pub run: i64,
    pub run_key: String,
    pub seq: i64,
    pub policy: String,
    pub workload: String,
    pub workload_kind: String,
    pub processes: i64,
    pub priority_mode: String,
    pub cpus: String,
    pub cpu_list: String,
    pub rep: i64,
    pub scale: f64,
    pub rt_runtime_us: Option<i64>,
    pub status: String,
    pub reason: String,
    pub makespan_ns: Option<i64>,
    pub cpu_util: Option<f64>,
    pub started_unix_ms: i64,
    pub load_avg_1m: Option<f64>,
    pub environment_id: i64,
    /// The run's policy-specific facts (a JSON object, as stored).
    pub extra_json: String,
    pub others_runnable: Option<i64>,
    pub steal_pct: Option<f64>,
    pub other_cpu_pct: Option<f64>,
    /// The run's noise (`record::Interference`): interrupts and softirqs
    /// on its CPUs, their clock in kHz, thermal throttling events.
    pub interrupts: Option<i64>,
    pub softirqs: Option<i64>,
    pub cpu_freq_khz: Option<f64>,
    pub throttle_count: Option<i64>,
    pub process_index: Option<i64>,
    pub role: Option<String>,
    pub pid: Option<i64>,
    /// The process's own policy (an RT hog's differs from the run's).
    pub process_policy: Option<String>,
    pub nice: Option<i64>,
    pub rt_priority: Option<i64>,
    pub weight: Option<i64>,
    pub dl_runtime_ns: Option<i64>,
    pub dl_deadline_ns: Option<i64>,
    pub dl_period_ns: Option<i64>,
    pub start_ns: Option<i64>,
    pub end_ns: Option<i64>,
    pub wall_ns: Option<i64>,
    /// The process's resource usage; None in a row without a process.
    pub usage: Option<ProcessUsage>,
    pub work: Option<i64>,
    pub work_unit: Option<String>,
    /// The workload's own figures (`processes.figures_json`); a figure
    /// stored as null (not a number) is left out.
    pub figures: BTreeMap<String, f64>,
    pub exit: Option<String>,
    pub ok: Option<bool>,
    pub stderr_tail: Option<String>,
    /// The process's primary latency (the workload's `primary_latency`).
    pub latency: Option<ExportLatency>,
    /// The run's EEVDF slice factor (µs asked), when swept.
    pub slice_us: Option<i64>,
    /// The slice the kernel reported for the process, ns.
    pub slice_ns: Option<i64>,
    /// The campaign's UUID (stable across databases).
    pub campaign_uuid: String,
    /// The host the run was measured on (its environment's), None where a
    /// database of an older schedlab did not record it.
    pub hostname: Option<String>,
    pub host_id: Option<String>,
    pub kernel_release: String,
    /// The run's trace, when it was traced.
    pub trace: Option<ExportTrace>,
    /// The run's sched_ext scheduler level, when swept.
    pub ext_scheduler: Option<String>,
    /// The run's machine level, when swept.
    pub machine: Option<String>,
    /// The process's fields of the registry (schedstat's, the
    /// migrations, …; all None in a row without a process).
    pub kernel: KernelCounts,
}

/// What a run's kernel trace saw of one process (`trace_processes`), for
/// export; the process figures are None where the trace did not see it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ExportTrace {
    pub lost_events: i64,
    /// Lost events or mismatched switches: not to be used.
    pub unusable: bool,
    pub slices: Option<i64>,
    pub slice_p50_ns: Option<i64>,
    pub slice_p99_ns: Option<i64>,
    pub slice_max_ns: Option<i64>,
    pub oncpu_ns: Option<i64>,
    pub preempted: Option<i64>,
    pub yielded: Option<i64>,
    pub voluntary: Option<i64>,
    pub migrations: Option<i64>,
    pub wake_p50_ns: Option<i64>,
    pub wake_p99_ns: Option<i64>,
    /// On-CPU time and switches out of a CPU inside the process's own work
    /// window (the window of its schedstat and rusage figures).
    pub work_oncpu_ns: Option<i64>,
    pub work_switches: Option<i64>,
    /// Why the trace is unusable (None: usable, or stored before reasons).
    pub unusable_reason: Option<String>,
    /// Inside the work window: CPU time of repaired gaps next to the
    /// process, and its switch-outs the kernel never emitted.
    pub work_unattributed_ns: Option<i64>,
    pub work_missing_switches: Option<i64>,
}

/// Percentiles of one process's primary latency histogram.
#[derive(Debug, Clone, PartialEq)]
pub struct ExportLatency {
    pub count: u64,
    pub p50_ns: i64,
    pub p90_ns: i64,
    pub p99_ns: i64,
    pub p999_ns: i64,
    pub max_ns: i64,
}

/// The export's rows in campaign, run and process order. The order comes
/// from indexes (`runs_by_campaign_seq`, the processes' primary key), so
/// SQLite streams the rows without sorting them first. Each result column
/// is named as the [`ExportRow`] field it fills and read by that name, in
/// this order; the registry's fields follow ([`export_sql`]).
const EXPORT_SQL: &str = "SELECT c.id AS campaign, c.name AS campaign_name, r.id AS run, r.run_key, r.seq, r.policy,
        r.workload, r.workload_kind, r.processes, r.priority_mode, r.cpus, r.cpu_list, r.rep, c.scale,
        r.rt_runtime_us, r.status, r.reason, r.makespan_ns, r.cpu_util, r.started_unix_ms, r.load_avg_1m,
        r.environment_id, r.extra_json, r.others_runnable, r.steal_pct, r.other_cpu_pct, r.interrupts,
        r.softirqs, r.cpu_freq_khz, r.throttle_count, p.process_index, p.role, p.pid,
        p.policy AS process_policy, p.nice, p.rt_priority, p.weight, p.dl_runtime_ns, p.dl_deadline_ns,
        p.dl_period_ns, p.start_ns, p.end_ns, p.wall_ns, p.utime_us, p.stime_us, p.maxrss_kb, p.work, p.work_unit, p.figures_json, p.exit, p.ok, p.stderr_tail, l.count AS latency_count, l.p50_ns, l.p90_ns, l.p99_ns, l.p999_ns, l.max_ns,
        r.slice_us, p.slice_ns, c.uuid AS campaign_uuid, e.hostname, e.host_id, e.kernel_release,
        tc.lost_events, tc.unusable, tp.slices, tp.slice_p50_ns, tp.slice_p99_ns, tp.slice_max_ns,
        tp.oncpu_ns, tp.preempted, tp.yielded, tp.voluntary, tp.migrations, tp.wake_p50_ns, tp.wake_p99_ns,
        tp.work_oncpu_ns, tp.work_switches, tc.unusable_reason, tp.work_unattributed_ns,
        tp.work_missing_switches, r.ext_scheduler, r.machine{counts}
     FROM runs r JOIN campaigns c ON c.id = r.campaign_id
     JOIN environments e ON e.id = r.environment_id
     LEFT JOIN processes p ON p.run_id = r.id
     LEFT JOIN latency l ON l.run_id = p.run_id AND l.process_index = p.process_index
         AND l.is_primary = 1
     LEFT JOIN trace_captures tc ON tc.run_id = r.id AND tc.source = 'kernel'
     LEFT JOIN trace_processes tp ON tp.run_id = tc.run_id AND tp.tgid = p.pid
     WHERE ?1 IS NULL OR c.id = ?1
     ORDER BY c.id, r.seq, r.id, p.process_index";

/// The export's query, with the kernel counters' columns.
pub(super) fn export_sql() -> String {
    EXPORT_SQL.replace("{counts}", &counts::select_list("p.", counts::Which::All))
}

/// One row of [`EXPORT_SQL`].
fn export_row(n: &Named<'_, '_, '_>) -> rusqlite::Result<ExportRow> {
    Ok(ExportRow {
        campaign: n.get("campaign")?,
        campaign_name: n.get("campaign_name")?,
        run: n.get("run")?,
        run_key: n.get("run_key")?,
        seq: n.get("seq")?,
        policy: n.get("policy")?,
        workload: n.get("workload")?,
        workload_kind: n.get("workload_kind")?,
        processes: n.get("processes")?,
        priority_mode: n.get("priority_mode")?,
        cpus: n.get("cpus")?,
        cpu_list: n.get("cpu_list")?,
        rep: n.get("rep")?,
        scale: n.get("scale")?,
        rt_runtime_us: n.get("rt_runtime_us")?,
        status: n.get("status")?,
        reason: n.get("reason")?,
        makespan_ns: n.get("makespan_ns")?,
        cpu_util: n.get("cpu_util")?,
        started_unix_ms: n.get("started_unix_ms")?,
        load_avg_1m: n.get("load_avg_1m")?,
        environment_id: n.get("environment_id")?,
        extra_json: n.get("extra_json")?,
        others_runnable: n.get("others_runnable")?,
        steal_pct: n.get("steal_pct")?,
        other_cpu_pct: n.get("other_cpu_pct")?,
        interrupts: n.get("interrupts")?,
        softirqs: n.get("softirqs")?,
        cpu_freq_khz: n.get("cpu_freq_khz")?,
        throttle_count: n.get("throttle_count")?,
        process_index: n.get("process_index")?,
        role: n.get("role")?,
        pid: n.get("pid")?,
        process_policy: n.get("process_policy")?,
        nice: n.get("nice")?,
        rt_priority: n.get("rt_priority")?,
        weight: n.get("weight")?,
        dl_runtime_ns: n.get("dl_runtime_ns")?,
        dl_deadline_ns: n.get("dl_deadline_ns")?,
        dl_period_ns: n.get("dl_period_ns")?,
        start_ns: n.get("start_ns")?,
        end_ns: n.get("end_ns")?,
        wall_ns: n.get("wall_ns")?,
        usage: export_usage(n)?,
        work: n.get("work")?,
        work_unit: n.get("work_unit")?,
        figures: n
            .get::<Option<String>>("figures_json")?
            .as_deref()
            .map(parse_figures)
            .unwrap_or_default(),
        exit: n.get("exit")?,
        ok: n.get("ok")?,
        stderr_tail: n.get("stderr_tail")?,
        latency: match n.get::<Option<i64>>("latency_count")? {
            None => None,
            Some(count) => Some(ExportLatency {
                count: count.max(0) as u64,
                p50_ns: n.get("p50_ns")?,
                p90_ns: n.get("p90_ns")?,
                p99_ns: n.get("p99_ns")?,
                p999_ns: n.get("p999_ns")?,
                max_ns: n.get("max_ns")?,
            }),
        },
        slice_us: n.get("slice_us")?,
        slice_ns: n.get("slice_ns")?,
        campaign_uuid: n.get("campaign_uuid")?,
        hostname: n.get("hostname")?,
        host_id: n.get("host_id")?,
        kernel_release: n.get("kernel_release")?,
        trace: export_trace(n)?,
        ext_scheduler: n.get("ext_scheduler")?,
        machine: n.get("machine")?,
        kernel: counts::read(n)?,
    })
}

/// The trace columns of an export row, or None for a run not traced.
fn export_trace(n: &Named<'_, '_, '_>) -> rusqlite::Result<Option<ExportTrace>> {
    let Some(lost_events) = n.get::<Option<i64>>("lost_events")? else {
        return Ok(None);
    };
    Ok(Some(ExportTrace {
        lost_events,
        unusable: n.get("unusable")?,
        slices: n.get("slices")?,
        slice_p50_ns: n.get("slice_p50_ns")?,
        slice_p99_ns: n.get("slice_p99_ns")?,
        slice_max_ns: n.get("slice_max_ns")?,
        oncpu_ns: n.get("oncpu_ns")?,
        preempted: n.get("preempted")?,
        yielded: n.get("yielded")?,
        voluntary: n.get("voluntary")?,
        migrations: n.get("migrations")?,
        wake_p50_ns: n.get("wake_p50_ns")?,
        wake_p99_ns: n.get("wake_p99_ns")?,
        work_oncpu_ns: n.get("work_oncpu_ns")?,
        work_switches: n.get("work_switches")?,
        unusable_reason: n.get("unusable_reason")?,
        work_unattributed_ns: n.get("work_unattributed_ns")?,
        work_missing_switches: n.get("work_missing_switches")?,
    }))
}

/// The resource usage columns of an export row, or None in a row without a
/// process (its CPU times are NOT NULL; its peak memory NULL where the
/// kernel did not give it).
fn export_usage(n: &Named<'_, '_, '_>) -> rusqlite::Result<Option<ProcessUsage>> {
    let Some(utime_us) = n.get::<Option<i64>>("utime_us")? else {
        return Ok(None);
    };
    Ok(Some(ProcessUsage {
        utime_us: utime_us.max(0) as u64,
        stime_us: n.u64("stime_us")?,
        maxrss_kb: n.opt_u64("maxrss_kb")?,
    }))
}

impl Store {
    /// The names of the workload figures of the processes of one campaign
    /// or all (the union over their rows), sorted. Streams the rows.
    pub fn export_figure_names(&self, campaign: Option<i64>) -> Result<Vec<String>> {
        self.check_campaign(campaign)?;
        let mut stmt = self.conn.prepare(
            "SELECT p.figures_json FROM processes p JOIN runs r ON r.id = p.run_id
             WHERE ?1 IS NULL OR r.campaign_id = ?1",
        )?;
        let mut rows = stmt.query([campaign])?;
        let mut names = BTreeSet::new();
        while let Some(r) = rows.next()? {
            let text = r.get_ref(0)?.as_str()?;
            names.extend(parse_figures(text).into_keys());
        }
        Ok(names.into_iter().collect())
    }

    /// Hand each export row to `f` as it is read: one per process of every
    /// run (one per run without processes), of one campaign or all, in
    /// campaign then run order. Memory stays bounded whatever the size of
    /// the database. Returns the number of rows.
    pub fn for_each_export_row(
        &self,
        campaign: Option<i64>,
        mut f: impl FnMut(&ExportRow) -> Result<()>,
    ) -> Result<u64> {
        self.check_campaign(campaign)?;
        let mut stmt = self.conn.prepare(&export_sql())?;
        let cols = Columns::of(&stmt)?;
        let mut rows = stmt.query([campaign])?;
        let mut n = 0;
        while let Some(r) = rows.next()? {
            let row = export_row(&cols.row(r))?;
            f(&row)?;
            n += 1;
        }
        Ok(n)
    }

    /// Every export row of one campaign or all, collected (for small
    /// campaigns; exports stream with [`Store::for_each_export_row`]).
    pub fn export_rows(&self, campaign: Option<i64>) -> Result<Vec<ExportRow>> {
        let mut rows = Vec::new();
        self.for_each_export_row(campaign, |r| {
            rows.push(r.clone());
            Ok(())
        })?;
        Ok(rows)
    }
}

/// A process's stored figures (`figures_json`): the numeric ones; nothing
/// when the text is not a JSON object.
fn parse_figures(text: &str) -> BTreeMap<String, f64> {
    serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(text)
        .map(|m| {
            m.into_iter()
                .filter_map(|(k, v)| v.as_f64().map(|v| (k, v)))
                .collect()
        })
        .unwrap_or_default()
}
