//! Kernel scheduling traces in the store: a run's capture (window, CPUs,
//! lost events, the raw events as a [`crate::trace::blob`], the tasks'
//! names) and what was derived from it before ([`crate::trace::Analysed`]:
//! slices, wake-ups and repaired gaps as a [`crate::trace::derived_blob`],
//! per-process and per-CPU figures as rows), written in one transaction
//! that only persists; read back as the capture, or as the derived figures
//! for the report and the export. Captures stored before the derivation
//! blob (schema migration 11) keep their slices, wake-ups and repairs as
//! rows, read from there.
//! A simulated run's predicted timeline is stored the same way under a
//! capture marked `source = 'model'`, with no events: loading its capture
//! (the trace export) refuses, and the export's trace columns are the
//! kernel's only.

use anyhow::{Context, Result, bail};
use rusqlite::{OptionalExtension, Transaction, params};

use super::named::Columns;
use super::{RunRecord, Store, i, insert_sql};
use crate::trace::derive::{Repair, Slice, WakeUp};
use crate::trace::derived_blob::{self, StoredDerivation};
use crate::trace::summary::{CpuTrace, ProcessTrace, WithinWindow};
use crate::trace::verdict::Verdict;
use crate::trace::{Analysed, Capture, SwitchEnd, Task, blob};
use crate::workload::latency::Latency;
use std::sync::LazyLock;

/// The `trace_captures` columns a stored capture fills, in the order of
/// its values.
const CAPTURE_COLUMNS: &[&str] = &[
    "run_id",
    "start_ns",
    "end_ns",
    "cpus",
    "lost_events",
    "mismatched_switches",
    "unusable",
    "event_count",
    "events",
    "release_ns",
    "repaired_switches",
    "refused_switches",
    "unattributed_ns",
    "oncpu_ns",
    "unusable_reason",
    "derived",
    "source",
];

static CAPTURE_INSERT: LazyLock<String> =
    LazyLock::new(|| insert_sql("trace_captures", CAPTURE_COLUMNS));

/// The `trace_processes` columns a traced process fills, in the order of
/// its values.
const PROCESS_TRACE_COLUMNS: &[&str] = &[
    "run_id",
    "tgid",
    "slices",
    "slice_p50_ns",
    "slice_p99_ns",
    "slice_max_ns",
    "slice_histogram",
    "oncpu_ns",
    "preempted",
    "yielded",
    "voluntary",
    "migrations",
    "wakeups",
    "wake_p50_ns",
    "wake_p99_ns",
    "wake_max_ns",
    "wake_histogram",
    "work_oncpu_ns",
    "work_switches",
    "unattributed_ns",
    "missing_switches",
    "work_unattributed_ns",
    "work_missing_switches",
];

static PROCESS_TRACE_INSERT: LazyLock<String> =
    LazyLock::new(|| insert_sql("trace_processes", PROCESS_TRACE_COLUMNS));

/// The `trace_cpus` columns a traced CPU fills, in the order of its values.
const CPU_TRACE_COLUMNS: &[&str] = &[
    "run_id",
    "cpu",
    "window_ns",
    "busy_ns",
    "gaps",
    "gap_p50_ns",
    "gap_max_ns",
    "gap_histogram",
    "unattributed_ns",
];

static CPU_TRACE_INSERT: LazyLock<String> =
    LazyLock::new(|| insert_sql("trace_cpus", CPU_TRACE_COLUMNS));

/// A stored capture's facts, without its events.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TraceInfo {
    pub run_id: i64,
    pub start_ns: u64,
    pub end_ns: u64,
    pub cpus: Vec<u32>,
    pub lost_events: u64,
    pub mismatched_switches: u64,
    /// Its figures are not to be used ([`Verdict::unusable`]).
    pub unusable: bool,
    pub event_count: u64,
    /// What the trace is judged by (repairs, refusals, unattributed time).
    pub verdict: Verdict,
    /// The model's predicted timeline of a simulated run (`source =
    /// 'model'`): slices without kernel events.
    pub predicted: bool,
    /// When the workers were released, on the trace's clock (if known).
    pub release_ns: Option<u64>,
}

impl TraceInfo {
    /// The sentence to print beside anything shown from this trace: why it
    /// is unusable, or what its repairs cost (see [`Verdict::caveat`]).
    pub fn caveat(&self) -> Option<String> {
        self.verdict.caveat(self.run_id)
    }
}

/// A traced run as `schedlab trace list` shows it: its trace's facts and
/// where the run belongs.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TracedRun {
    pub campaign_id: i64,
    /// The run's condition and repetition.
    pub run_key: String,
    /// ok, failed, timeout.
    pub status: String,
    #[serde(flatten)]
    pub info: TraceInfo,
}

/// A traced run's derived figures, for the report.
#[derive(Debug, Clone, PartialEq)]
pub struct RunTrace {
    pub info: TraceInfo,
    /// By process id.
    pub processes: Vec<ProcessTrace>,
    /// By CPU.
    pub cpus: Vec<CpuTrace>,
}

/// A slice's end as stored in `trace_slices.end_reason` (before the
/// derivation blob).
fn end_from_name(name: &str) -> Option<SwitchEnd> {
    Some(match name {
        "preempted" => SwitchEnd::Preempted,
        "yielded" => SwitchEnd::Yielded,
        "blocked" => SwitchEnd::Blocked,
        "exited" => SwitchEnd::Exited,
        "throttled" => SwitchEnd::Throttled,
        _ => return None,
    })
}

/// `trace_captures.source` of the model's predicted timelines (else
/// 'kernel').
const MODEL: &str = "model";

fn source_name(predicted: bool) -> &'static str {
    if predicted { MODEL } else { "kernel" }
}

fn u(v: i64) -> u64 {
    v.max(0) as u64
}

/// (count, p50, p99, max) of a histogram; None percentiles when empty.
fn quantiles(h: &Latency) -> (i64, Option<i64>, Option<i64>, Option<i64>) {
    if h.count() == 0 {
        return (0, None, None, None);
    }
    let q = h.percentiles();
    (
        i(q.count),
        Some(i(q.p50_ns)),
        Some(i(q.p99_ns)),
        Some(i(q.max_ns)),
    )
}

fn decode_hist(bytes: &[u8], what: &str) -> Result<Latency> {
    Latency::decode(bytes).with_context(|| format!("stored trace histogram {what}"))
}

/// The slices overlapping `from..to`, as the rows' query selected and
/// ordered them (a stable sort: ties keep the derivation's order, as they
/// kept the rows').
fn slices_in(slices: Vec<Slice>, from: i64, to: i64) -> Vec<Slice> {
    let mut v: Vec<Slice> = slices
        .into_iter()
        .filter(|s| i(s.start_ns) < to && i(s.end_ns) > from)
        .collect();
    v.sort_by_key(|s| (s.cpu, s.start_ns, s.end_ns));
    v
}

/// The repaired gaps touching `from..=to`, by CPU then start.
fn repairs_in(repairs: Vec<Repair>, from: i64, to: i64) -> Vec<Repair> {
    let mut v: Vec<Repair> = repairs
        .into_iter()
        .filter(|r| i(r.from_ns) <= to && i(r.to_ns) >= from)
        .collect();
    v.sort_by_key(|r| (r.cpu, r.from_ns));
    v
}

impl Store {
    /// Store a run's capture and what was derived from it in one
    /// transaction, replacing any trace stored for the run before.
    pub fn save_trace(&mut self, run_id: i64, trace: &Analysed) -> Result<()> {
        let tx = self.conn.transaction()?;
        Self::save_trace_in(&tx, run_id, trace)?;
        tx.commit()
            .with_context(|| format!("committing the trace of run {run_id}"))?;
        Ok(())
    }

    /// Store a finished run and, when it was traced, its trace, in one
    /// transaction: a crash never leaves a traced run without its trace.
    pub fn insert_run_traced(
        &mut self,
        campaign_id: i64,
        rec: &RunRecord,
        trace: Option<&Analysed>,
    ) -> Result<i64> {
        let tx = self.conn.transaction()?;
        let run_id = Self::insert_run_in(&tx, campaign_id, rec)?;
        if let Some(trace) = trace {
            Self::save_trace_in(&tx, run_id, trace)?;
        }
        tx.commit()
            .with_context(|| format!("committing run {}", rec.run.key))?;
        Ok(run_id)
    }

    fn save_trace_in(tx: &Transaction, run_id: i64, trace: &Analysed) -> Result<()> {
        let (cap, d) = (trace.capture, &trace.derived);
        let ctx = || format!("storing the trace of run {run_id}");
        let verdict = &trace.verdict;
        for table in [
            "trace_captures",
            "trace_tasks",
            "trace_slices",
            "trace_wakeups",
            "trace_processes",
            "trace_cpus",
            "trace_repairs",
        ] {
            tx.execute(&format!("DELETE FROM {table} WHERE run_id = ?1"), [run_id])
                .with_context(ctx)?;
        }
        tx.execute(
            &CAPTURE_INSERT,
            params![
                run_id,
                i(cap.start_ns),
                i(cap.end_ns),
                serde_json::to_string(&cap.cpus)?,
                i(cap.lost_events),
                i(d.mismatched_switches),
                verdict.unusable(),
                cap.events.len() as i64,
                blob::encode(&cap.events),
                cap.release_ns.map(i),
                i(verdict.repaired),
                i(verdict.refused),
                i(verdict.unattributed_ns),
                i(verdict.oncpu_ns),
                verdict.reason(),
                derived_blob::encode(&d.slices, &d.wakeups, &d.repairs),
                source_name(trace.predicted),
            ],
        )
        .with_context(ctx)?;
        {
            let mut stmt = tx.prepare_cached(
                "INSERT INTO trace_tasks (run_id, tid, tgid, comm) VALUES (?1, ?2, ?3, ?4)",
            )?;
            for t in &cap.tasks {
                stmt.execute(params![run_id, t.tid, t.tgid, t.comm])
                    .with_context(|| format!("{}: task {}", ctx(), t.tid))?;
            }
        }
        {
            let mut stmt = tx.prepare_cached(&PROCESS_TRACE_INSERT)?;
            for (p, work) in &trace.processes {
                let (_, s50, s99, smax) = quantiles(&p.slice_ns);
                let (wn, w50, w99, wmax) = quantiles(&p.wake_ns);
                stmt.execute(params![
                    run_id,
                    p.tgid,
                    i(p.slices),
                    s50,
                    s99,
                    smax,
                    p.slice_ns.encode(),
                    i(p.oncpu_ns),
                    i(p.preempted),
                    i(p.yielded),
                    i(p.voluntary),
                    i(p.migrations),
                    wn,
                    w50,
                    w99,
                    wmax,
                    p.wake_ns.encode(),
                    work.map(|w| i(w.oncpu_ns)),
                    work.map(|w| i(w.switches)),
                    i(p.unattributed_ns),
                    i(p.missing_switches),
                    work.map(|w| i(w.unattributed_ns)),
                    work.map(|w| i(w.missing_switches)),
                ])?;
            }
        }
        {
            let mut stmt = tx.prepare_cached(&CPU_TRACE_INSERT)?;
            for c in &trace.cpus {
                let (n, g50, _, gmax) = quantiles(&c.gap_ns);
                stmt.execute(params![
                    run_id,
                    c.cpu,
                    i(c.window_ns),
                    i(c.busy_ns),
                    n,
                    g50,
                    gmax,
                    c.gap_ns.encode(),
                    i(c.unattributed_ns),
                ])?;
            }
        }
        Ok(())
    }

    /// The capture stored for a run, as it was saved.
    pub fn load_trace(&self, run_id: i64) -> Result<Capture> {
        let mut stmt = self.conn.prepare(
            "SELECT start_ns, end_ns, cpus, lost_events, events, release_ns, source
             FROM trace_captures WHERE run_id = ?1",
        )?;
        let cols = Columns::of(&stmt)?;
        let row = stmt
            .query_row([run_id], |r| {
                let n = cols.row(r);
                Ok((
                    n.get::<i64>("start_ns")?,
                    n.get::<i64>("end_ns")?,
                    n.get::<String>("cpus")?,
                    n.get::<i64>("lost_events")?,
                    n.get::<Vec<u8>>("events")?,
                    n.get::<Option<i64>>("release_ns")?,
                    n.get::<String>("source")?,
                ))
            })
            .optional()
            .with_context(|| format!("reading the trace of run {run_id}"))?;
        let Some((start_ns, end_ns, cpus, lost_events, events, release_ns, source)) = row else {
            bail!("run {run_id} has no trace (it was not run with --trace)");
        };
        if source == MODEL {
            bail!(
                "run {run_id} was simulated (schedlab simulate): its timeline is the model's prediction, \
                 not a kernel trace, and has no kernel events to load or export; `schedlab report \
                 --timeline-run {run_id}` draws it"
            );
        }
        let events =
            blob::decode(&events).with_context(|| format!("run {run_id}: trace events"))?;
        let cpus: Vec<u32> =
            serde_json::from_str(&cpus).with_context(|| format!("run {run_id}: traced CPUs"))?;
        let mut stmt = self
            .conn
            .prepare("SELECT tid, tgid, comm FROM trace_tasks WHERE run_id = ?1 ORDER BY rowid")?;
        let tasks = stmt
            .query_map([run_id], |r| {
                Ok(Task {
                    tid: r.get(0)?,
                    tgid: r.get(1)?,
                    comm: r.get(2)?,
                })
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(Capture {
            events,
            tasks,
            cpus,
            start_ns: u(start_ns),
            end_ns: u(end_ns),
            lost_events: u(lost_events),
            release_ns: release_ns.map(u),
        })
    }

    /// The facts of the traces of these runs (those traced), by run id.
    fn trace_infos(&self, sql_filter: &str, arg: i64) -> Result<Vec<TraceInfo>> {
        let mut stmt = self.conn.prepare(&format!(
            "SELECT t.run_id, t.start_ns, t.end_ns, t.cpus, t.lost_events, t.mismatched_switches, t.unusable,
                    t.event_count, t.repaired_switches, t.refused_switches, t.unattributed_ns, t.oncpu_ns,
                    t.source, t.release_ns
             FROM trace_captures t JOIN runs r ON r.id = t.run_id
             WHERE {sql_filter} ORDER BY r.seq, r.id"
        ))?;
        let cols = Columns::of(&stmt)?;
        let rows = stmt
            .query_map([arg], |r| {
                let n = cols.row(r);
                let lost_events = n.u64("lost_events")?;
                let mismatched_switches = n.u64("mismatched_switches")?;
                let repaired = n.opt_u64("repaired_switches")?;
                let verdict = Verdict {
                    lost_events,
                    repaired: repaired.unwrap_or(0),
                    refused: n.opt_u64("refused_switches")?.unwrap_or(0),
                    // Stored before repairs: its mismatches were neither.
                    unsettled: if repaired.is_none() {
                        mismatched_switches
                    } else {
                        0
                    },
                    unattributed_ns: n.opt_u64("unattributed_ns")?.unwrap_or(0),
                    oncpu_ns: n.opt_u64("oncpu_ns")?.unwrap_or(0),
                };
                Ok((
                    TraceInfo {
                        run_id: n.get("run_id")?,
                        start_ns: n.u64("start_ns")?,
                        end_ns: n.u64("end_ns")?,
                        cpus: Vec::new(),
                        lost_events,
                        mismatched_switches,
                        unusable: n.get::<bool>("unusable")? || verdict.unusable(),
                        event_count: n.u64("event_count")?,
                        verdict,
                        predicted: n.get::<String>("source")? == MODEL,
                        release_ns: n.opt_u64("release_ns")?,
                    },
                    n.get::<String>("cpus")?,
                ))
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        rows.into_iter()
            .map(|(mut info, cpus)| {
                info.cpus = serde_json::from_str(&cpus)
                    .with_context(|| format!("run {}: traced CPUs", info.run_id))?;
                Ok(info)
            })
            .collect()
    }

    /// The facts of a run's trace, None when it was not traced.
    pub fn trace_info(&self, run_id: i64) -> Result<Option<TraceInfo>> {
        Ok(self
            .trace_infos("t.run_id = ?1", run_id)?
            .into_iter()
            .next())
    }

    /// Every traced run (of campaign `campaign` only, when given), in run
    /// order.
    pub fn traced_runs(&self, campaign: Option<i64>) -> Result<Vec<TracedRun>> {
        let infos = self.trace_infos("(?1 < 0 OR r.campaign_id = ?1)", campaign.unwrap_or(-1))?;
        let mut stmt = self
            .conn
            .prepare("SELECT campaign_id, run_key, status FROM runs WHERE id = ?1")?;
        infos
            .into_iter()
            .map(|info| {
                let (campaign_id, run_key, status) = stmt
                    .query_row([info.run_id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                    .with_context(|| format!("reading run {}", info.run_id))?;
                Ok(TracedRun {
                    campaign_id,
                    run_key,
                    status,
                    info,
                })
            })
            .collect()
    }

    /// A run's slices, wake-ups and repaired gaps as stored in its
    /// derivation blob; None when the run has no trace or its capture was
    /// stored before the blob (its rows hold them).
    fn stored_derivation(&self, run_id: i64) -> Result<Option<StoredDerivation>> {
        let blob: Option<Vec<u8>> = self
            .conn
            .query_row(
                "SELECT derived FROM trace_captures WHERE run_id = ?1",
                [run_id],
                |r| r.get(0),
            )
            .optional()
            .with_context(|| format!("reading the trace of run {run_id}"))?
            .flatten();
        blob.map(|b| {
            derived_blob::decode(&b)
                .with_context(|| format!("run {run_id}: trace slices and wake-ups"))
        })
        .transpose()
    }

    /// The run key of a run (its condition and repetition), None when
    /// there is no such run.
    pub fn run_key(&self, run_id: i64) -> Result<Option<String>> {
        self.conn
            .query_row("SELECT run_key FROM runs WHERE id = ?1", [run_id], |r| {
                r.get(0)
            })
            .optional()
            .with_context(|| format!("reading run {run_id}"))
    }

    /// The latest ok run with this run key whose timeline is the model's
    /// prediction, None when there is none.
    pub fn predicted_run(&self, run_key: &str) -> Result<Option<i64>> {
        self.conn
            .query_row(
                "SELECT r.id FROM runs r JOIN trace_captures t ON t.run_id = r.id
                 WHERE r.run_key = ?1 AND r.status = 'ok' AND t.source = ?2
                 ORDER BY r.campaign_id DESC, r.id DESC LIMIT 1",
                params![run_key, MODEL],
                |r| r.get(0),
            )
            .optional()
            .with_context(|| format!("looking for the simulated run {run_key}"))
    }

    /// A run's slices, by CPU then start; with a window (ns, CLOCK_MONOTONIC),
    /// only those overlapping it.
    pub fn trace_slices(&self, run_id: i64, window: Option<(u64, u64)>) -> Result<Vec<Slice>> {
        let (from, to) = window.map_or((i64::MIN, i64::MAX), |(a, b)| (i(a), i(b)));
        if let Some(d) = self.stored_derivation(run_id)? {
            return Ok(slices_in(d.slices, from, to));
        }
        self.slice_rows(run_id, from, to)
    }

    /// A run's slices and repaired gaps in a window (as [`trace_slices`]
    /// and [`trace_repairs`] give them), its derivation decoded once: what
    /// a timeline draws.
    ///
    /// [`trace_slices`]: Self::trace_slices
    /// [`trace_repairs`]: Self::trace_repairs
    pub fn trace_window(
        &self,
        run_id: i64,
        window: (u64, u64),
    ) -> Result<(Vec<Slice>, Vec<Repair>)> {
        let (from, to) = (i(window.0), i(window.1));
        if let Some(d) = self.stored_derivation(run_id)? {
            return Ok((
                slices_in(d.slices, from, to),
                repairs_in(d.repairs, from, to),
            ));
        }
        Ok((
            self.slice_rows(run_id, from, to)?,
            self.repair_rows(run_id, from, to)?,
        ))
    }

    /// Slices of a capture stored before the derivation blob, from its rows.
    fn slice_rows(&self, run_id: i64, from: i64, to: i64) -> Result<Vec<Slice>> {
        let mut stmt = self.conn.prepare(
            "SELECT pid, cpu, start_ns, end_ns, end_reason, start_clipped, start_repaired, end_repaired
             FROM trace_slices
             WHERE run_id = ?1 AND start_ns < ?3 AND end_ns > ?2 ORDER BY cpu, start_ns, end_ns",
        )?;
        let cols = Columns::of(&stmt)?;
        let rows = stmt
            .query_map(params![run_id, from, to], |r| {
                let n = cols.row(r);
                Ok(Slice {
                    pid: n.get("pid")?,
                    cpu: n.get("cpu")?,
                    start_ns: n.u64("start_ns")?,
                    end_ns: n.u64("end_ns")?,
                    end: n
                        .get::<Option<String>>("end_reason")?
                        .as_deref()
                        .and_then(end_from_name),
                    start_clipped: n.get("start_clipped")?,
                    start_repaired: n.get("start_repaired")?,
                    end_repaired: n.get("end_repaired")?,
                })
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(rows)
    }

    /// A run's repaired gaps, by CPU then start; with a window (ns,
    /// CLOCK_MONOTONIC), only those overlapping it.
    pub fn trace_repairs(&self, run_id: i64, window: Option<(u64, u64)>) -> Result<Vec<Repair>> {
        let (from, to) = window.map_or((i64::MIN, i64::MAX), |(a, b)| (i(a), i(b)));
        if let Some(d) = self.stored_derivation(run_id)? {
            return Ok(repairs_in(d.repairs, from, to));
        }
        self.repair_rows(run_id, from, to)
    }

    /// Repaired gaps of a capture stored before the derivation blob.
    fn repair_rows(&self, run_id: i64, from: i64, to: i64) -> Result<Vec<Repair>> {
        let mut stmt = self.conn.prepare(
            "SELECT cpu, before_pid, after_pid, from_ns, to_ns FROM trace_repairs
             WHERE run_id = ?1 AND from_ns <= ?3 AND to_ns >= ?2 ORDER BY cpu, from_ns",
        )?;
        let rows = stmt
            .query_map(params![run_id, from, to], |r| {
                Ok(Repair {
                    cpu: r.get(0)?,
                    before_pid: r.get(1)?,
                    after_pid: r.get(2)?,
                    from_ns: u(r.get(3)?),
                    to_ns: u(r.get(4)?),
                })
            })
            .with_context(|| format!("reading the repaired gaps of run {run_id}"))?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(rows)
    }

    /// A run's wake-ups in order of their first stamp.
    pub fn trace_wakeups(&self, run_id: i64) -> Result<Vec<WakeUp>> {
        if let Some(d) = self.stored_derivation(run_id)? {
            return Ok(d.wakeups);
        }
        let mut stmt = self.conn.prepare(
            "SELECT pid, waker_pid, waking_ns, wakeup_ns, target_cpu, new, switch_in_ns, cpu
             FROM trace_wakeups WHERE run_id = ?1 ORDER BY rowid",
        )?;
        let cols = Columns::of(&stmt)?;
        let rows = stmt
            .query_map([run_id], |r| {
                let n = cols.row(r);
                Ok(WakeUp {
                    pid: n.get("pid")?,
                    waker_pid: n.get("waker_pid")?,
                    waking_ns: n.opt_u64("waking_ns")?,
                    wakeup_ns: n.opt_u64("wakeup_ns")?,
                    target_cpu: n.get("target_cpu")?,
                    new: n.get("new")?,
                    switch_in_ns: n.opt_u64("switch_in_ns")?,
                    cpu: n.get("cpu")?,
                })
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(rows)
    }

    /// The tasks named in a run's trace.
    pub fn trace_tasks(&self, run_id: i64) -> Result<Vec<Task>> {
        let mut stmt = self
            .conn
            .prepare("SELECT tid, tgid, comm FROM trace_tasks WHERE run_id = ?1 ORDER BY rowid")?;
        let rows = stmt
            .query_map([run_id], |r| {
                Ok(Task {
                    tid: r.get(0)?,
                    tgid: r.get(1)?,
                    comm: r.get(2)?,
                })
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(rows)
    }

    /// Per-process figures of a run's trace.
    fn trace_processes(&self, run_id: i64) -> Result<Vec<ProcessTrace>> {
        let mut stmt = self.conn.prepare(
            "SELECT tgid, slices, slice_histogram, oncpu_ns, preempted, yielded, voluntary, migrations,
                    wake_histogram, work_oncpu_ns, work_switches, unattributed_ns, missing_switches,
                    work_unattributed_ns, work_missing_switches
             FROM trace_processes WHERE run_id = ?1 ORDER BY tgid",
        )?;
        let cols = Columns::of(&stmt)?;
        let mut rows = stmt.query([run_id])?;
        let mut out = Vec::new();
        while let Some(r) = rows.next()? {
            let n = cols.row(r);
            let tgid: i32 = n.get("tgid")?;
            let what = |h: &str| format!("run {run_id} process {tgid}: {h}");
            out.push(ProcessTrace {
                tgid,
                slices: n.u64("slices")?,
                slice_ns: decode_hist(n.get_ref("slice_histogram")?.as_blob()?, &what("slices"))?,
                oncpu_ns: n.u64("oncpu_ns")?,
                preempted: n.u64("preempted")?,
                yielded: n.u64("yielded")?,
                voluntary: n.u64("voluntary")?,
                migrations: n.u64("migrations")?,
                wake_ns: decode_hist(n.get_ref("wake_histogram")?.as_blob()?, &what("wake-ups"))?,
                work: match (n.opt_u64("work_oncpu_ns")?, n.opt_u64("work_switches")?) {
                    (Some(oncpu_ns), Some(switches)) => Some(WithinWindow {
                        oncpu_ns,
                        switches,
                        unattributed_ns: n.opt_u64("work_unattributed_ns")?.unwrap_or(0),
                        missing_switches: n.opt_u64("work_missing_switches")?.unwrap_or(0),
                    }),
                    _ => None,
                },
                unattributed_ns: n.opt_u64("unattributed_ns")?.unwrap_or(0),
                missing_switches: n.opt_u64("missing_switches")?.unwrap_or(0),
            });
        }
        Ok(out)
    }

    /// Per-CPU figures of a run's trace.
    fn trace_cpus(&self, run_id: i64) -> Result<Vec<CpuTrace>> {
        let mut stmt = self.conn.prepare(
            "SELECT cpu, window_ns, busy_ns, gap_histogram, unattributed_ns FROM trace_cpus
             WHERE run_id = ?1 ORDER BY cpu",
        )?;
        let mut rows = stmt.query([run_id])?;
        let mut out = Vec::new();
        while let Some(r) = rows.next()? {
            let cpu: u32 = r.get(0)?;
            out.push(CpuTrace {
                cpu,
                window_ns: u(r.get(1)?),
                busy_ns: u(r.get(2)?),
                gap_ns: decode_hist(r.get_ref(3)?.as_blob()?, &format!("run {run_id} CPU {cpu}"))?,
                unattributed_ns: r.get::<_, Option<i64>>(4)?.map_or(0, u),
            });
        }
        Ok(out)
    }

    /// A run's derived trace figures, None when it was not traced.
    pub fn run_trace(&self, run_id: i64) -> Result<Option<RunTrace>> {
        let Some(info) = self.trace_info(run_id)? else {
            return Ok(None);
        };
        Ok(Some(RunTrace {
            processes: self.trace_processes(run_id)?,
            cpus: self.trace_cpus(run_id)?,
            info,
        }))
    }

    /// The derived trace figures of every traced ok run of a campaign, in
    /// run order (unusable ones included, marked).
    pub fn campaign_traces(&self, campaign_id: i64) -> Result<Vec<RunTrace>> {
        self.trace_infos("r.campaign_id = ?1 AND r.status = 'ok'", campaign_id)?
            .into_iter()
            .map(|info| {
                Ok(RunTrace {
                    processes: self.trace_processes(info.run_id)?,
                    cpus: self.trace_cpus(info.run_id)?,
                    info,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
