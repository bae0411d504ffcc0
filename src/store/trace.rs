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
use super::{RunRecord, Store, i};
use crate::trace::derive::{Repair, Slice, WakeUp};
use crate::trace::derived_blob::{self, StoredDerivation};
use crate::trace::summary::{CpuTrace, ProcessTrace, WithinWindow};
use crate::trace::verdict::Verdict;
use crate::trace::{Analysed, Capture, SwitchEnd, Task, blob};
use crate::workload::latency::Latency;

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
            "INSERT INTO trace_captures (run_id, start_ns, end_ns, cpus, lost_events, mismatched_switches,
                 unusable, event_count, events, release_ns, repaired_switches, refused_switches,
                 unattributed_ns, oncpu_ns, unusable_reason, derived, source)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)",
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
            let mut stmt = tx.prepare_cached(
                "INSERT INTO trace_processes (run_id, tgid, slices, slice_p50_ns, slice_p99_ns, slice_max_ns,
                     slice_histogram, oncpu_ns, preempted, yielded, voluntary, migrations, wakeups,
                     wake_p50_ns, wake_p99_ns, wake_max_ns, wake_histogram, work_oncpu_ns, work_switches,
                     unattributed_ns, missing_switches, work_unattributed_ns, work_missing_switches)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17,
                     ?18, ?19, ?20, ?21, ?22, ?23)",
            )?;
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
            let mut stmt = tx.prepare_cached(
                "INSERT INTO trace_cpus (run_id, cpu, window_ns, busy_ns, gaps, gap_p50_ns, gap_max_ns,
                     gap_histogram, unattributed_ns)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            )?;
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
mod tests {
    use super::*;
    use crate::testing::synth;
    use crate::trace::derive::derive;
    use crate::trace::derive::tests::*;
    use crate::trace::summary;

    /// A database with a synthetic campaign, and the id of one of its runs.
    fn store_with_run() -> (tempfile::TempDir, Store, i64) {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("t.db")).unwrap();
        synth::create(&mut store, &synth::SynthConfig::small()).unwrap();
        let run: i64 = store
            .conn
            .query_row("SELECT MIN(id) FROM runs WHERE status = 'ok'", [], |r| {
                r.get(0)
            })
            .unwrap();
        (dir, store, run)
    }

    fn sample() -> Capture {
        let mut cap = capture(
            1_000_000,
            2_000_000,
            &[10, 11],
            vec![
                sw(1_100_000, 0, 0, 0, 10),
                sw(1_200_000, 0, 10, PREEMPTED, 11),
                sw(1_300_000, 0, 11, SLEEPING, 10),
                waking(1_400_000, 1, 10, 11, 1),
                wakeup(1_400_500, 1, 10, 11, 1),
                sw(1_450_000, 1, 0, 0, 11),
                migrate(1_500_000, 0, 10, 0, 1),
                sw(1_600_000, 1, 11, YIELDED, 0),
            ],
        );
        cap.tasks[1].comm = "wörker \"b\"".into();
        cap
    }

    #[test]
    fn a_saved_trace_loads_back_equal() {
        let (_dir, mut store, run) = store_with_run();
        let cap = sample();
        store.save_trace(run, &Analysed::new(&cap, &[])).unwrap();
        assert_eq!(store.load_trace(run).unwrap(), cap);
        // Saving again replaces it.
        store.save_trace(run, &Analysed::new(&cap, &[])).unwrap();
        assert_eq!(store.load_trace(run).unwrap(), cap);
        let d = derive(&cap);
        assert_eq!(store.trace_slices(run, None).unwrap(), d.slices);
        assert_eq!(store.trace_wakeups(run).unwrap(), d.wakeups);
        let t = store.run_trace(run).unwrap().unwrap();
        assert_eq!(t.processes, summary::processes(&cap, &d));
        assert_eq!(t.cpus, summary::cpus(&cap, &d));
        assert!(!t.info.unusable);
        assert_eq!(t.info.event_count, 8);
        assert_eq!(store.campaign_traces(1).unwrap(), vec![t]);
    }

    #[test]
    fn a_window_selects_the_slices_overlapping_it() {
        let (_dir, mut store, run) = store_with_run();
        store
            .save_trace(run, &Analysed::new(&sample(), &[]))
            .unwrap();
        let s = store
            .trace_slices(run, Some((1_250_000, 1_420_000)))
            .unwrap();
        // 11 on CPU 0 (1.2–1.3 ms) and 10 on CPU 0 from 1.3 ms.
        assert_eq!(s.len(), 2, "{s:?}");
        assert!(s.iter().all(|s| s.cpu == 0));
    }

    #[test]
    fn lost_events_mark_the_trace_unusable() {
        let (_dir, mut store, run) = store_with_run();
        let mut cap = sample();
        cap.lost_events = 3;
        store.save_trace(run, &Analysed::new(&cap, &[])).unwrap();
        let info = store.trace_info(run).unwrap().unwrap();
        assert!(info.unusable);
        assert_eq!(info.lost_events, 3);
    }

    #[test]
    fn repairs_are_stored_with_the_slices_they_cut_and_judge_the_trace() {
        let (_dir, mut store, run) = store_with_run();
        // 10 runs on CPU 0 from 1.1 ms; the switch 10 → 11 was never
        // emitted: 10 last seen at 1.15 ms, 11 first at 1.25 ms.
        let mut cap = capture(
            1_000_000,
            2_000_000,
            &[10, 11],
            vec![
                sw(1_100_000, 0, 0, 0, 10),
                waking(1_150_000, 0, 10, 99, 0),
                waking(1_250_000, 0, 11, 99, 0),
                sw(1_300_000, 0, 11, SLEEPING, 0),
            ],
        );
        store
            .save_trace(run, &crate::trace::Analysed::new(&cap, &[]))
            .unwrap();
        let d = derive(&cap);
        assert_eq!(store.trace_repairs(run, None).unwrap(), d.repairs);
        assert_eq!(d.repairs.len(), 1);
        assert_eq!(store.trace_slices(run, None).unwrap(), d.slices);
        assert!(
            d.slices.iter().any(|s| s.end_repaired) && d.slices.iter().any(|s| s.start_repaired)
        );
        // 100 µs unattributed against 100 µs on CPU: unusable, and says so.
        let info = store.trace_info(run).unwrap().unwrap();
        assert_eq!(info.verdict, Verdict::of(&cap, &d));
        assert!(info.unusable);
        assert!(info.caveat().unwrap().contains("never emitted"));
        let reason: Option<String> = store
            .conn
            .query_row(
                "SELECT unusable_reason FROM trace_captures WHERE run_id = ?1",
                [run],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(reason, info.verdict.reason());
        assert_eq!(
            store
                .trace_repairs(run, Some((1_400_000, 1_500_000)))
                .unwrap(),
            vec![]
        );
        // Within 1 % it is usable: a long stretch of 10 after the gap.
        cap.events.push(sw(1_400_000, 0, 0, 0, 10));
        cap.events.push(sw(1_990_000, 0, 10, SLEEPING, 0));
        cap.end_ns = 20_000_000;
        cap.events.push(sw(2_000_000, 1, 0, 0, 11));
        cap.events.push(sw(19_000_000, 1, 11, SLEEPING, 0));
        store
            .save_trace(run, &crate::trace::Analysed::new(&cap, &[]))
            .unwrap();
        let info = store.trace_info(run).unwrap().unwrap();
        assert!(!info.unusable, "{:?}", info.verdict);
        assert!(
            info.caveat()
                .unwrap()
                .starts_with(&format!("Run {run}'s trace: 1 sched_switch"))
        );
    }

    /// The rows a capture stored before the derivation blob (schema
    /// migration 11) had in trace_slices, trace_wakeups and trace_repairs.
    fn write_legacy_rows(store: &Store, run: i64, d: &crate::trace::derive::Derived) {
        let c = &store.conn;
        c.execute(
            "UPDATE trace_captures SET derived = NULL WHERE run_id = ?1",
            [run],
        )
        .unwrap();
        for s in &d.slices {
            let end = s.end.map(|e| match e {
                SwitchEnd::Preempted => "preempted",
                SwitchEnd::Yielded => "yielded",
                SwitchEnd::Blocked => "blocked",
                SwitchEnd::Exited => "exited",
                // Not in the rows' CHECK: the model's slices came with the blob.
                SwitchEnd::Throttled => unreachable!("no kernel trace ends a slice throttled"),
            });
            c.execute(
                "INSERT INTO trace_slices (run_id, pid, cpu, start_ns, end_ns, end_reason, start_clipped,
                     start_repaired, end_repaired) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                params![
                    run,
                    s.pid,
                    s.cpu,
                    i(s.start_ns),
                    i(s.end_ns),
                    end,
                    s.start_clipped,
                    s.start_repaired,
                    s.end_repaired
                ],
            )
            .unwrap();
        }
        for w in &d.wakeups {
            c.execute(
                "INSERT INTO trace_wakeups (run_id, pid, waker_pid, waking_ns, wakeup_ns, target_cpu, new,
                     switch_in_ns, cpu) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                params![
                    run,
                    w.pid,
                    w.waker_pid,
                    w.waking_ns.map(i),
                    w.wakeup_ns.map(i),
                    w.target_cpu,
                    w.new,
                    w.switch_in_ns.map(i),
                    w.cpu
                ],
            )
            .unwrap();
        }
        for r in &d.repairs {
            c.execute(
                "INSERT INTO trace_repairs (run_id, cpu, before_pid, after_pid, from_ns, to_ns)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    run,
                    r.cpu,
                    r.before_pid,
                    r.after_pid,
                    i(r.from_ns),
                    i(r.to_ns)
                ],
            )
            .unwrap();
        }
    }

    #[test]
    fn slices_wakeups_and_repairs_are_one_blob_not_rows() {
        let (_dir, mut store, run) = store_with_run();
        store
            .save_trace(run, &Analysed::new(&sample(), &[]))
            .unwrap();
        for t in ["trace_slices", "trace_wakeups", "trace_repairs"] {
            let n: i64 = store
                .conn
                .query_row(&format!("SELECT COUNT(*) FROM {t}"), [], |r| r.get(0))
                .unwrap();
            assert_eq!(n, 0, "{t}");
        }
        assert!(store.stored_derivation(run).unwrap().is_some());
    }

    #[test]
    fn a_capture_stored_before_the_blob_reads_the_same_from_its_rows() {
        let (_dir, mut store, run) = store_with_run();
        // A repaired gap on CPU 0 (10 → 11 never emitted), a wake-up and a
        // slice on CPU 1.
        let cap = capture(
            1_000_000,
            2_000_000,
            &[10, 11],
            vec![
                sw(1_100_000, 0, 0, 0, 10),
                waking(1_150_000, 0, 10, 99, 0),
                waking(1_250_000, 0, 11, 99, 0),
                sw(1_300_000, 0, 11, SLEEPING, 0),
                waking(1_400_000, 1, 0, 10, 1),
                sw(1_450_000, 1, 0, 0, 10),
                sw(1_600_000, 1, 10, YIELDED, 0),
            ],
        );
        store.save_trace(run, &Analysed::new(&cap, &[])).unwrap();
        let windows = [
            None,
            Some((1_200_000, 1_420_000)),
            Some((1_250_000, 1_250_000)),
            Some((1_700_000, 1_800_000)),
        ];
        let read = |store: &Store| {
            windows
                .iter()
                .map(|w| {
                    (
                        store.trace_slices(run, *w).unwrap(),
                        store.trace_repairs(run, *w).unwrap(),
                    )
                })
                .collect::<Vec<_>>()
        };
        let from_blob = (read(&store), store.trace_wakeups(run).unwrap());
        let d = derive(&cap);
        assert!(!d.repairs.is_empty() && !d.wakeups.is_empty());
        assert_eq!(from_blob.0[0], (d.slices.clone(), d.repairs.clone()));
        assert_eq!(from_blob.1, d.wakeups);
        write_legacy_rows(&store, run, &d);
        assert!(store.stored_derivation(run).unwrap().is_none());
        assert_eq!((read(&store), store.trace_wakeups(run).unwrap()), from_blob);
        // Saving again replaces the rows with a blob.
        store.save_trace(run, &Analysed::new(&cap, &[])).unwrap();
        assert!(store.stored_derivation(run).unwrap().is_some());
        assert_eq!((read(&store), store.trace_wakeups(run).unwrap()), from_blob);
    }

    #[test]
    fn a_predicted_timeline_is_stored_as_the_model_s_and_has_no_events_to_load() {
        let (_dir, mut store, run) = store_with_run();
        let pid: i32 = store
            .conn
            .query_row(
                "SELECT pid FROM processes WHERE run_id = ?1 ORDER BY process_index LIMIT 1",
                [run],
                |r| r.get(0),
            )
            .unwrap();
        // No events: the model's slices are given, not derived.
        let mut cap = capture(0, 10_000_000, &[pid], Vec::new());
        cap.release_ns = Some(0);
        let slice = |start_ns, end_ns, end| Slice {
            pid,
            cpu: 0,
            start_ns,
            end_ns,
            end,
            start_clipped: false,
            start_repaired: false,
            end_repaired: false,
        };
        let derived = crate::trace::derive::Derived {
            slices: vec![
                slice(0, 4_000_000, Some(SwitchEnd::Throttled)),
                slice(6_000_000, 9_000_000, Some(SwitchEnd::Exited)),
            ],
            ..Default::default()
        };
        let a = Analysed::predicted(&cap, derived.clone(), &[]);
        store.save_trace(run, &a).unwrap();
        assert_eq!(store.trace_slices(run, None).unwrap(), derived.slices);
        let info = store.trace_info(run).unwrap().unwrap();
        assert!(info.predicted && !info.unusable && info.caveat().is_none());
        assert_eq!(info.event_count, 0);
        let t = store.run_trace(run).unwrap().unwrap();
        assert_eq!(t.processes[0].oncpu_ns, 7_000_000);
        assert_eq!((t.processes[0].preempted, t.processes[0].voluntary), (1, 1));
        // Its capture has no kernel events: loading it (the trace export) refuses.
        let e = format!("{:#}", store.load_trace(run).unwrap_err());
        assert!(
            e.contains("simulated") && e.contains("--timeline-run"),
            "{e}"
        );
        // The export's trace columns are the kernel's only.
        let rows = store.export_rows(None).unwrap();
        assert!(
            rows.iter()
                .filter(|r| r.run == run)
                .all(|r| r.trace.is_none())
        );
        // A kernel capture stored over it is the kernel's again.
        store
            .save_trace(run, &Analysed::new(&sample(), &[]))
            .unwrap();
        assert!(!store.trace_info(run).unwrap().unwrap().predicted);
    }

    #[test]
    fn an_untraced_run_has_no_trace() {
        let (_dir, store, run) = store_with_run();
        assert!(store.trace_info(run).unwrap().is_none());
        assert!(store.run_trace(run).unwrap().is_none());
        let e = store.load_trace(run).unwrap_err();
        assert!(format!("{e:#}").contains("has no trace"), "{e:#}");
    }

    #[test]
    fn the_export_carries_each_process_trace_figures() {
        let (_dir, mut store, run) = store_with_run();
        let pid: i32 = store
            .conn
            .query_row(
                "SELECT pid FROM processes WHERE run_id = ?1 ORDER BY process_index LIMIT 1",
                [run],
                |r| r.get(0),
            )
            .unwrap();
        let cap = capture(
            0,
            10_000_000,
            &[pid],
            vec![
                sw(1_000_000, 0, 0, 0, pid),
                sw(3_000_000, 0, pid, PREEMPTED, 0),
                sw(4_000_000, 0, 0, 0, pid),
                sw(5_000_000, 0, pid, SLEEPING, 0),
            ],
        );
        store.save_trace(run, &Analysed::new(&cap, &[])).unwrap();
        let rows = store.export_rows(None).unwrap();
        let traced: Vec<_> = rows.iter().filter(|r| r.run == run).collect();
        let mine = traced
            .iter()
            .find(|r| r.pid == Some(i64::from(pid)))
            .unwrap();
        let t = mine.trace.as_ref().unwrap();
        assert_eq!(
            (t.slices, t.preempted, t.voluntary),
            (Some(2), Some(1), Some(1))
        );
        assert_eq!(t.oncpu_ns, Some(3_000_000));
        assert!(t.slice_max_ns.unwrap().abs_diff(2_000_000) < 2_000);
        assert!(!t.unusable && t.lost_events == 0);
        // The run's other processes: the run is traced, they were not seen.
        for r in traced.iter().filter(|r| r.pid != Some(i64::from(pid))) {
            assert_eq!(r.trace.as_ref().unwrap().slices, None);
        }
        assert!(
            rows.iter()
                .filter(|r| r.run != run)
                .all(|r| r.trace.is_none())
        );
    }

    #[test]
    fn a_run_and_its_trace_are_stored_together_or_not_at_all() {
        let (_dir, mut store, run) = store_with_run();
        let (_, plan, _) = store.report_run_documents(&[run]).unwrap().pop().unwrap();
        let mut plan = plan.expect("synthetic runs keep their plan entry");
        // A key of its own, once; storing it a second time must fail.
        let processes: Vec<crate::record::ProcessRecord> = store
            .report_process_records(&[run])
            .unwrap()
            .into_iter()
            .map(|(_, p)| p)
            .collect();
        plan.key = "traced-run".into();
        let rec = || {
            synth::synthetic_record(
                &plan,
                &synth::synthetic_env(2),
                vec![0],
                0,
                None,
                processes.clone(),
            )
        };
        let cap = sample();
        let traced = Analysed::of_run(&cap, &rec());
        let id = store.insert_run_traced(1, &rec(), Some(&traced)).unwrap();
        assert_eq!(store.load_trace(id).unwrap(), cap);
        // The same key again fails: neither the run nor its trace is kept.
        let before: i64 = store
            .conn
            .query_row("SELECT COUNT(*) FROM trace_captures", [], |r| r.get(0))
            .unwrap();
        assert!(store.insert_run_traced(1, &rec(), Some(&traced)).is_err());
        let after: i64 = store
            .conn
            .query_row("SELECT COUNT(*) FROM trace_captures", [], |r| r.get(0))
            .unwrap();
        assert_eq!(before, after);
    }

    #[test]
    fn a_merged_store_carries_the_trace_with_its_run() {
        let (_dir, mut src, run) = store_with_run();
        let cap = sample();
        src.save_trace(run, &Analysed::new(&cap, &[])).unwrap();
        let key: String = src
            .conn
            .query_row("SELECT run_key FROM runs WHERE id = ?1", [run], |r| {
                r.get(0)
            })
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let mut dst = Store::open(&dir.path().join("d.db")).unwrap();
        dst.merge_from(&src, |_, _| {}).unwrap();
        let id: i64 = dst
            .conn
            .query_row("SELECT id FROM runs WHERE run_key = ?1", [&key], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(dst.load_trace(id).unwrap(), cap);
        assert_eq!(
            dst.trace_slices(id, None).unwrap(),
            src.trace_slices(run, None).unwrap()
        );
        assert_eq!(dst.run_trace(id).unwrap().unwrap().processes.len(), 2);
    }

    #[test]
    fn forgetting_a_run_forgets_its_trace() {
        let (_dir, mut store, run) = store_with_run();
        store
            .save_trace(run, &Analysed::new(&sample(), &[]))
            .unwrap();
        store
            .forget_runs(1, &[crate::record::RunStatus::Ok])
            .unwrap();
        for t in [
            "trace_captures",
            "trace_tasks",
            "trace_slices",
            "trace_processes",
        ] {
            let n: i64 = store
                .conn
                .query_row(&format!("SELECT COUNT(*) FROM {t}"), [], |r| r.get(0))
                .unwrap();
            assert_eq!(n, 0, "{t}");
        }
    }
}
