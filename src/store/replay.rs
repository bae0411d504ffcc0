//! What `schedlab synthesize` reads of one traced run: its condition (the
//! resolved run and the campaign's spec text), its workers, and its
//! capture's facts and raw event blob (decoded one event at a time by the
//! caller: [`crate::trace::blob::for_each`]).

use anyhow::{Context, Result, bail};
use rusqlite::{OptionalExtension, params};

use super::Store;
use crate::plan::Run;
use crate::trace::Task;

/// One run as a replay is synthesized from it.
#[derive(Debug, Clone)]
pub struct ReplaySource {
    pub run_id: i64,
    pub campaign_id: i64,
    pub status: String,
    pub run: Run,
    pub spec_toml: String,
    pub makespan_ns: Option<u64>,
    /// Worker pids by process index, with each worker's window (ns from
    /// release: start, end).
    pub workers: Vec<(i32, Option<u64>, Option<u64>)>,
}

/// A stored capture, with its events still encoded.
#[derive(Debug, Clone)]
pub struct EncodedTrace {
    pub start_ns: u64,
    pub end_ns: u64,
    pub release_ns: Option<u64>,
    pub lost_events: u64,
    pub unusable_reason: Option<String>,
    pub events: Vec<u8>,
    pub tasks: Vec<Task>,
}

fn u(v: i64) -> u64 {
    v.max(0) as u64
}

impl Store {
    /// The run `run_id` as `schedlab synthesize` needs it.
    pub fn replay_source(&self, run_id: i64) -> Result<ReplaySource> {
        let row = self
            .conn
            .query_row(
                "SELECT r.campaign_id, r.status, r.resolved_json, c.spec_toml, r.makespan_ns
                 FROM runs r JOIN campaigns c ON c.id = r.campaign_id WHERE r.id = ?1",
                [run_id],
                |r| {
                    Ok((
                        r.get::<_, i64>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, String>(3)?,
                        r.get::<_, Option<i64>>(4)?,
                    ))
                },
            )
            .optional()
            .with_context(|| format!("reading run {run_id}"))?;
        let Some((campaign_id, status, resolved, spec_toml, makespan)) = row else {
            bail!("no run {run_id} in this database (`schedlab campaigns` lists them)");
        };
        let run: Run = serde_json::from_str(&resolved)
            .with_context(|| format!("run {run_id}: its stored condition (resolved_json)"))?;
        let mut stmt = self.conn.prepare(
            "SELECT pid, start_ns, end_ns FROM processes
             WHERE run_id = ?1 AND role = 'worker' ORDER BY process_index",
        )?;
        let workers = stmt
            .query_map(params![run_id], |r| {
                Ok((
                    r.get::<_, i32>(0)?,
                    r.get::<_, Option<i64>>(1)?.map(u),
                    r.get::<_, Option<i64>>(2)?.map(u),
                ))
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(ReplaySource {
            run_id,
            campaign_id,
            status,
            run,
            spec_toml,
            makespan_ns: makespan.map(u),
            workers,
        })
    }

    /// The capture of run `run_id` with its events encoded; an error for a
    /// run without one, or with the model's timeline.
    pub fn encoded_trace(&self, run_id: i64) -> Result<EncodedTrace> {
        let row = self
            .conn
            .query_row(
                "SELECT start_ns, end_ns, release_ns, lost_events, unusable_reason, events, source
                 FROM trace_captures WHERE run_id = ?1",
                [run_id],
                |r| {
                    Ok((
                        r.get::<_, i64>(0)?,
                        r.get::<_, i64>(1)?,
                        r.get::<_, Option<i64>>(2)?,
                        r.get::<_, i64>(3)?,
                        r.get::<_, Option<String>>(4)?,
                        r.get::<_, Vec<u8>>(5)?,
                        r.get::<_, String>(6)?,
                    ))
                },
            )
            .optional()
            .with_context(|| format!("reading the trace of run {run_id}"))?;
        let Some((start, end, release, lost, unusable, events, source)) = row else {
            bail!(
                "run {run_id} has no trace: it was not run with --trace (run its spec again with \
                 `schedlab run SPEC --trace`)"
            );
        };
        if source != "kernel" {
            bail!("run {run_id} was simulated: its timeline is the model's, not a kernel trace");
        }
        Ok(EncodedTrace {
            start_ns: u(start),
            end_ns: u(end),
            release_ns: release.map(u),
            lost_events: u(lost),
            unusable_reason: unusable,
            events,
            tasks: self.trace_tasks(run_id)?,
        })
    }
}

impl Store {
    /// The runs of campaign `campaign_id`, in the order they ran.
    pub fn campaign_run_ids(&self, campaign_id: i64) -> Result<Vec<i64>> {
        let mut stmt = self
            .conn
            .prepare("SELECT id FROM runs WHERE campaign_id = ?1 ORDER BY seq")?;
        let ids = stmt
            .query_map([campaign_id], |r| r.get(0))?
            .collect::<rusqlite::Result<Vec<i64>>>()?;
        Ok(ids)
    }
}
