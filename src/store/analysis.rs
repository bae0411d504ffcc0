//! The queries behind `schedlab report`.
//!
//! Every column the schema defines is read directly: `open` has applied
//! every migration, so older databases have them too (NULL in older rows).
//! [`Store::load_report_data`] reads what the analysis needs as plain data
//! ([`ReportData`]), or folds each run's process rows as it reads them
//! ([`Store::load_report_data_with`]); the detailed queries of the report's
//! special sections take the runs they need.

use std::collections::BTreeMap;

use anyhow::{Context, Result, bail};
use rusqlite::{OptionalExtension, params};
use serde::Serialize;

use super::Store;
use super::counts::{self, Which};
use super::named::{Columns, Named};
use crate::plan::Run;
use crate::policy::{Policy, ProcSched};
use crate::record::{ProcessRecord, ProcessUsage};

/// A campaign as the report describes it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReportCampaign {
    pub id: i64,
    pub name: String,
    pub description: String,
    pub seed: u64,
    pub scale: f64,
    pub planned_runs: u64,
    pub created_unix_ms: i64,
    pub schedlab_version: String,
    /// The validated spec (JSON), for the order of factor levels.
    #[serde(skip)]
    pub spec_json: String,
    /// In a report `--by` host or kernel: every campaign of the same spec
    /// whose runs it holds (this one among them), by id; `planned_runs` is
    /// then their sum.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub campaigns: Vec<i64>,
    /// The factor such a report adds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub by: Option<RunFactor>,
}

/// A stored run as the stopping rule of `repetitions = "auto"` sees it
/// ([`Store::precision_inputs`]).
#[derive(Debug, Clone, PartialEq)]
pub struct PrecisionInput {
    pub key: String,
    pub rep: u32,
    pub workload: String,
    pub ok: bool,
    pub makespan_ns: Option<i64>,
    pub mean_work: Option<f64>,
}

/// One stored run of a campaign (any status).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReportRun {
    pub id: i64,
    pub seq: i64,
    pub policy: String,
    pub workload: String,
    pub workload_kind: String,
    pub processes: i64,
    pub priority_mode: String,
    pub cpus: String,
    /// The CPUs the workers were allowed on, e.g. "0" or "0-1".
    pub cpu_list: String,
    /// `sched_rt_runtime_us` during the run when the campaign swept it.
    pub rt_runtime_us: Option<i64>,
    pub rep: i64,
    pub status: String,
    pub reason: String,
    pub makespan_ns: Option<i64>,
    pub cpu_util: Option<f64>,
    pub load_avg_1m: Option<f64>,
    pub environment_id: i64,
    /// Other programs' activity around the run (`record::Interference`).
    pub others_runnable: Option<i64>,
    pub steal_pct: Option<f64>,
    pub other_cpu_pct: Option<f64>,
    /// Interrupts and softirqs on the run's CPUs over the run.
    pub interrupts: Option<i64>,
    pub softirqs: Option<i64>,
    /// The EEVDF slice factor (µs) when the campaign swept it.
    pub slice_us: Option<i64>,
    /// The sched_ext scheduler level when the campaign swept it.
    pub ext_scheduler: Option<String>,
    /// The machine level when the campaign swept it.
    pub machine: Option<String>,
    /// The run's level of the factor a report is made `--by` (its host or
    /// kernel release); None in a report of one campaign.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// A `command` run's figures the kernel could not give for its
    /// workers' trees, by `TreeStats` name ("voluntary_switches", …), with
    /// why (the first worker's reason; `extra.command[].missing`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub not_given: BTreeMap<String, String>,
    /// Each CPU's utilisation over the run (%), by CPU number
    /// (`extra.cpu_busy_pct`; empty where not measured).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cpu_busy_pct: Vec<(usize, f64)>,
}

/// The "CPU:% CPU:%" of `extra.cpu_busy_pct`, as (CPU, %); what does not
/// parse is left out.
pub fn parse_cpu_busy_pct(s: Option<&str>) -> Vec<(usize, f64)> {
    s.unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| {
            let (c, v) = p.split_once(':')?;
            Some((
                c.parse().ok()?,
                v.parse::<f64>().ok().filter(|v| v.is_finite())?,
            ))
        })
        .collect()
}

/// The figures a `command` run's `extra.command` (one object per worker,
/// each with `missing`: name → why) says the kernel did not give.
fn not_given(command_extra: Option<&str>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Some(v) = command_extra.and_then(|t| serde_json::from_str::<serde_json::Value>(t).ok())
    else {
        return out;
    };
    for worker in v.as_array().into_iter().flatten() {
        for (name, why) in worker["missing"].as_object().into_iter().flatten() {
            if let Some(why) = why.as_str() {
                out.entry(name.clone()).or_insert_with(|| why.to_string());
            }
        }
    }
    out
}

/// A property of a run's environment that a report can treat as a factor
/// of one spec run in several places (`schedlab report --by`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunFactor {
    /// The machine: its hostname, with the start of its host id when two
    /// machines share a hostname.
    Host,
    /// The kernel release (`uname -r`).
    Kernel,
}

impl RunFactor {
    pub const ALL: [RunFactor; 2] = [RunFactor::Host, RunFactor::Kernel];

    pub fn name(self) -> &'static str {
        match self {
            RunFactor::Host => "host",
            RunFactor::Kernel => "kernel",
        }
    }
}

/// An environment the runs of a campaign were made in, with how many runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReportEnvironment {
    pub id: i64,
    pub runs: i64,
    pub kernel_release: String,
    pub cpu_model: String,
    pub cpus_online: i64,
    pub hz: Option<i64>,
    pub preempt_model: String,
    pub sched_rt_runtime_us: Option<i64>,
    pub sched_rt_period_us: Option<i64>,
    pub sched_rr_timeslice_ms: Option<i64>,
    pub cgroup_version: String,
    pub virtualization: String,
    pub schedlab_version: String,
    /// The machine's hostname (None where an older schedlab recorded none).
    pub hostname: Option<String>,
    /// EEVDF's base slice as the kernel reported it (None: it reported
    /// none, or an older schedlab did not record it).
    pub fair_base_slice_ns: Option<u64>,
    /// A guest's machine level and accelerator (None: a host).
    pub guest_machine: Option<String>,
    pub guest_accel: Option<String>,
    /// The CPU topology the kernel reported ("2 sockets × 2 cores × 1
    /// thread (4 CPUs), 1 LLC, 2 nodes"), where recorded.
    pub topology: Option<String>,
    /// The same topology as the kernel placed each CPU (the model's
    /// machine takes it).
    pub cpu_topology: Option<crate::sys::topology::CpuTopology>,
}

pub use crate::fields::process::{ReportProcess, ReportUsage};

/// A campaign as the report's analysis takes it: plain data, no database.
/// `P` is what became of each run's worker processes: the rows themselves,
/// or what [`Store::load_report_data_with`] folded them into.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportData<P = Vec<ReportProcess>> {
    pub campaign: ReportCampaign,
    /// Every stored run, any status, in campaign order.
    pub runs: Vec<ReportRun>,
    /// The worker processes of each run, indexed like `runs` (none for
    /// runs that are not ok; RT hogs left out), by process index.
    pub processes: Vec<P>,
    /// Process rows read.
    pub process_rows: u64,
    /// The environments of the runs, with the number of runs in each.
    pub environments: Vec<ReportEnvironment>,
    /// (workload, unit of its work), see [`Store::report_work_units`].
    pub work_units: Vec<(String, String)>,
}

/// Why a report query on a fixed set of columns cannot be prepared.
const SCHEMA_MISMATCH: &str = "the database's tables lack columns this schedlab reads (a database written by a \
     development build of schedlab, before runs.rt_runtime_us and processes.role existed, has schema version 1 \
     without them); re-run the campaign into a new database";

impl Store {
    /// Everything the report's analysis reads of a campaign (`id`, or the
    /// latest one), every process row held.
    pub fn load_report_data(&self, id: Option<i64>) -> Result<ReportData> {
        self.load_report_data_with(id, |_| {
            |_: &ReportRun, rows: &[ReportProcess]| rows.to_vec()
        })
    }

    /// Everything the report's analysis reads of a campaign, each run's
    /// worker processes folded as they are read so that a million rows are
    /// never held at once: `make` makes the fold for the campaign, which is
    /// called once per run with the run's rows by process index (no rows for
    /// runs that are not ok).
    pub fn load_report_data_with<P, F>(
        &self,
        id: Option<i64>,
        make: impl FnOnce(&ReportCampaign) -> F,
    ) -> Result<ReportData<P>>
    where
        F: FnMut(&ReportRun, &[ReportProcess]) -> P,
    {
        self.load_report_data_by(id, None, make)
    }

    /// As [`Store::load_report_data_with`]; with `by`, the runs of every
    /// campaign of the same spec as campaign `id` (or the latest) are read,
    /// each labelled with its level of the factor (its host or kernel):
    /// one spec run on many machines (`schedlab merge`) in one report.
    pub fn load_report_data_by<P, F>(
        &self,
        id: Option<i64>,
        by: Option<RunFactor>,
        make: impl FnOnce(&ReportCampaign) -> F,
    ) -> Result<ReportData<P>>
    where
        F: FnMut(&ReportRun, &[ReportProcess]) -> P,
    {
        let ReportData {
            campaign,
            runs,
            environments,
            work_units,
            ..
        } = self.load_report_frame(id, by)?;
        let ids = if campaign.campaigns.is_empty() {
            vec![campaign.id]
        } else {
            campaign.campaigns.clone()
        };
        let run_index: std::collections::HashMap<i64, usize> =
            runs.iter().enumerate().map(|(i, r)| (r.id, i)).collect();
        let mut fold = make(&campaign);
        let mut folded: Vec<Option<P>> = runs.iter().map(|_| None).collect();
        // The rows of the run being read: the query gives them run by run.
        let mut rows: Vec<ReportProcess> = Vec::new();
        let mut current: Option<usize> = None;
        let mut apart: Option<i64> = None;
        let process_rows = self.for_each_report_process(&ids, |p| {
            let Some(&i) = run_index.get(&p.run_id) else {
                return;
            };
            if current != Some(i) {
                if let Some(c) = current {
                    folded[c] = Some(fold(&runs[c], &rows));
                    rows.clear();
                }
                if folded[i].is_some() {
                    apart.get_or_insert(p.run_id);
                }
                current = Some(i);
            }
            rows.push(*p);
        })?;
        if let Some(c) = current {
            folded[c] = Some(fold(&runs[c], &rows));
        }
        if let Some(run) = apart {
            bail!("the process rows of run {run} were not read together");
        }
        let processes = folded
            .into_iter()
            .zip(&runs)
            .map(|(p, r)| p.unwrap_or_else(|| fold(r, &[])))
            .collect();
        Ok(ReportData {
            campaign,
            runs,
            processes,
            process_rows,
            environments,
            work_units,
        })
    }

    /// Everything the report's analysis reads of a campaign but its process
    /// rows (`processes` one `()` per run, `process_rows` 0): the runs, to
    /// be grouped before their rows are read condition by condition
    /// ([`Store::for_each_report_run`]). `id` and `by` as in
    /// [`Store::load_report_data_by`].
    pub fn load_report_frame(
        &self,
        id: Option<i64>,
        by: Option<RunFactor>,
    ) -> Result<ReportData<()>> {
        let mut campaign = self.report_campaign(id)?;
        let ids = match by {
            None => vec![campaign.id],
            Some(_) => self.campaigns_of_same_spec(campaign.id)?,
        };
        if by.is_some() {
            // The runs planned are those of every campaign reported.
            let planned: i64 = self.conn.query_row(
                &format!(
                    "SELECT COALESCE(SUM(planned_runs), 0) FROM campaigns WHERE id IN ({})",
                    id_list(&ids)
                ),
                [],
                |r| r.get(0),
            )?;
            campaign.planned_runs = planned.max(0) as u64;
        }
        campaign.campaigns = if by.is_some() {
            ids.clone()
        } else {
            Vec::new()
        };
        campaign.by = by;
        let mut runs = self.report_runs(&ids)?;
        if let Some(f) = by {
            let levels = self.run_levels(&ids, f)?;
            for r in &mut runs {
                r.by = levels.get(&r.id).cloned();
            }
        }
        let environments = self.report_environments(&ids)?;
        let work_units = self.report_work_units(&ids)?;
        Ok(ReportData {
            campaign,
            processes: vec![(); runs.len()],
            runs,
            process_rows: 0,
            environments,
            work_units,
        })
    }

    /// The campaign a report is about: `id`, or the latest one.
    pub fn report_campaign(&self, id: Option<i64>) -> Result<ReportCampaign> {
        let sql = "SELECT id, name, description, seed, scale, planned_runs, created_unix_ms, schedlab_version,
                          spec_json
                   FROM campaigns WHERE (?1 IS NULL OR id = ?1) ORDER BY id DESC LIMIT 1";
        let mut stmt = self.conn.prepare(sql).context("reading campaigns")?;
        let cols = Columns::of(&stmt)?;
        let found = stmt
            .query_row([id], |r| {
                let n = cols.row(r);
                Ok(ReportCampaign {
                    id: n.get("id")?,
                    name: n.get("name")?,
                    description: n.get("description")?,
                    seed: n.get::<i64>("seed")? as u64,
                    scale: n.get("scale")?,
                    planned_runs: n.get::<i64>("planned_runs")? as u64,
                    created_unix_ms: n.get("created_unix_ms")?,
                    schedlab_version: n.get("schedlab_version")?,
                    spec_json: n.get("spec_json")?,
                    campaigns: Vec::new(),
                    by: None,
                })
            })
            .optional()
            .context("reading campaigns")?;
        match (found, id) {
            (Some(c), _) => Ok(c),
            (None, None) => bail!("the database has no campaign yet (run `schedlab run` first)"),
            (None, Some(id)) => {
                let ids: Vec<String> = self
                    .conn
                    .prepare("SELECT id FROM campaigns ORDER BY id")?
                    .query_map([], |r| r.get::<_, i64>(0))?
                    .map(|r| r.map(|v| v.to_string()))
                    .collect::<rusqlite::Result<_>>()?;
                bail!(
                    "campaign {id} is not in this database (it has campaign{} {}; `schedlab campaigns` lists them)",
                    if ids.len() == 1 { "" } else { "s" },
                    if ids.is_empty() {
                        "none".to_string()
                    } else {
                        ids.join(", ")
                    }
                )
            }
        }
    }

    /// The campaigns of the same spec (identity) as campaign `id`, made on
    /// any host, by id.
    pub fn campaigns_of_same_spec(&self, id: i64) -> Result<Vec<i64>> {
        let mut stmt = self.conn.prepare(
            "SELECT c.id FROM campaigns c JOIN campaigns me ON me.identity = c.identity
             WHERE me.id = ?1 ORDER BY c.id",
        )?;
        let ids = stmt
            .query_map([id], |r| r.get::<_, i64>(0))?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        if ids.is_empty() {
            bail!("campaign {id} is not in this database (`schedlab campaigns` lists them)");
        }
        Ok(ids)
    }

    /// Each run's level of `factor`, by run id: its environment's kernel
    /// release, or its host's name (with the first 8 characters of the host
    /// id when machines with different ids share that name; "unknown host"
    /// where an older schedlab recorded none).
    pub fn run_levels(
        &self,
        campaign_ids: &[i64],
        factor: RunFactor,
    ) -> Result<std::collections::HashMap<i64, String>> {
        let mut stmt = self.conn.prepare(&format!(
            "SELECT r.id, e.hostname, e.host_id, e.kernel_release
             FROM runs r JOIN environments e ON e.id = r.environment_id
             WHERE r.campaign_id IN ({})",
            id_list(campaign_ids)
        ))?;
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, Option<String>>(1)?,
                    r.get::<_, Option<String>>(2)?,
                    r.get::<_, String>(3)?,
                ))
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(match factor {
            RunFactor::Kernel => rows.into_iter().map(|(id, _, _, k)| (id, k)).collect(),
            RunFactor::Host => {
                let hosts: Vec<(Option<String>, Option<String>)> = rows
                    .iter()
                    .map(|(_, n, h, _)| (n.clone(), h.clone()))
                    .collect();
                rows.into_iter()
                    .map(|(id, name, host_id, _)| (id, host_label(&hosts, name, host_id)))
                    .collect()
            }
        })
    }

    /// Every stored run of some campaigns, any status, in campaign order.
    pub fn report_runs(&self, campaign_ids: &[i64]) -> Result<Vec<ReportRun>> {
        let mut stmt = self
            .conn
            .prepare(&format!(
                "SELECT id, seq, policy, workload, workload_kind, processes, priority_mode, cpus, cpu_list,
                    rt_runtime_us, rep, status, reason, makespan_ns, cpu_util, load_avg_1m, environment_id,
                    others_runnable, steal_pct, other_cpu_pct, slice_us,
                    ext_scheduler, machine, interrupts, softirqs,
                    CASE WHEN workload_kind = 'command' THEN json_extract(extra_json, '$.command') END
                        AS command_extra,
                    json_extract(extra_json, '$.cpu_busy_pct') AS cpu_busy_pct
             FROM runs WHERE campaign_id IN ({}) ORDER BY seq, id",
                id_list(campaign_ids)
            ))
            .context(SCHEMA_MISMATCH)?;
        let cols = Columns::of(&stmt)?;
        let rows = stmt
            .query_map([], |r| {
                let n = cols.row(r);
                Ok(ReportRun {
                    id: n.get("id")?,
                    seq: n.get("seq")?,
                    policy: n.get("policy")?,
                    workload: n.get("workload")?,
                    workload_kind: n.get("workload_kind")?,
                    processes: n.get("processes")?,
                    priority_mode: n.get("priority_mode")?,
                    cpus: n.get("cpus")?,
                    cpu_list: n.get("cpu_list")?,
                    rt_runtime_us: n.get("rt_runtime_us")?,
                    rep: n.get("rep")?,
                    status: n.get("status")?,
                    reason: n.get("reason")?,
                    makespan_ns: n.get("makespan_ns")?,
                    cpu_util: n.get("cpu_util")?,
                    load_avg_1m: n.get("load_avg_1m")?,
                    environment_id: n.get("environment_id")?,
                    others_runnable: n.get("others_runnable")?,
                    steal_pct: n.get("steal_pct")?,
                    other_cpu_pct: n.get("other_cpu_pct")?,
                    slice_us: n.get("slice_us")?,
                    ext_scheduler: n.get("ext_scheduler")?,
                    machine: n.get("machine")?,
                    interrupts: n.get("interrupts")?,
                    softirqs: n.get("softirqs")?,
                    by: None,
                    not_given: not_given(n.get::<Option<String>>("command_extra")?.as_deref()),
                    cpu_busy_pct: parse_cpu_busy_pct(
                        n.get::<Option<String>>("cpu_busy_pct")?.as_deref(),
                    ),
                })
            })?
            .collect::<rusqlite::Result<Vec<_>>>()
            .context("reading runs")?;
        Ok(rows)
    }

    /// The environments of some campaigns' runs, with the number of runs in
    /// each.
    pub fn report_environments(&self, campaign_ids: &[i64]) -> Result<Vec<ReportEnvironment>> {
        let mut stmt = self.conn.prepare(&format!(
            "SELECT e.id, COUNT(r.id) AS runs, e.kernel_release, e.cpu_model, e.cpus_online, e.hz, e.preempt_model,
                    e.sched_rt_runtime_us, e.sched_rt_period_us, e.sched_rr_timeslice_ms, e.cgroup_version,
                    e.virtualization, e.schedlab_version, e.hostname,
                    json_extract(e.json, '$.fair_base_slice_ns') AS fair_base_slice_ns,
                    json_extract(e.json, '$.guest.machine') AS guest_machine,
                    json_extract(e.json, '$.guest.accel') AS guest_accel,
                    json_extract(e.json, '$.topology') AS topology_json
             FROM environments e JOIN runs r ON r.environment_id = e.id
             WHERE r.campaign_id IN ({}) GROUP BY e.id ORDER BY MIN(r.seq), e.id",
            id_list(campaign_ids)
        ))?;
        let cols = Columns::of(&stmt)?;
        let rows = stmt
            .query_map([], |r| {
                let n = cols.row(r);
                let cpu_topology = n.get::<Option<String>>("topology_json")?.and_then(|j| {
                    serde_json::from_str::<crate::sys::topology::CpuTopology>(&j).ok()
                });
                Ok(ReportEnvironment {
                    id: n.get("id")?,
                    runs: n.get("runs")?,
                    kernel_release: n.get("kernel_release")?,
                    cpu_model: n.get("cpu_model")?,
                    cpus_online: n.get("cpus_online")?,
                    hz: n.get("hz")?,
                    preempt_model: n.get("preempt_model")?,
                    sched_rt_runtime_us: n.get("sched_rt_runtime_us")?,
                    sched_rt_period_us: n.get("sched_rt_period_us")?,
                    sched_rr_timeslice_ms: n.get("sched_rr_timeslice_ms")?,
                    cgroup_version: n.get("cgroup_version")?,
                    virtualization: n.get("virtualization")?,
                    schedlab_version: n.get("schedlab_version")?,
                    hostname: n.get("hostname")?,
                    fair_base_slice_ns: n.opt_u64("fair_base_slice_ns")?,
                    guest_machine: n.get("guest_machine")?,
                    guest_accel: n.get("guest_accel")?,
                    topology: cpu_topology.as_ref().map(|t| t.summary()),
                    cpu_topology,
                })
            })?
            .collect::<rusqlite::Result<Vec<_>>>()
            .context("reading environments")?;
        Ok(rows)
    }

    /// The sched_ext state recorded with each environment of a campaign's
    /// runs (`/sys/kernel/sched_ext/state`; None where the kernel had no
    /// sched_ext), by environment id.
    pub fn report_sched_ext(&self, campaign_id: i64) -> Result<Vec<(i64, Option<String>)>> {
        let mut stmt = self.conn.prepare(
            "SELECT e.id, e.json FROM environments e
             WHERE e.id IN (SELECT DISTINCT environment_id FROM runs WHERE campaign_id = ?1) ORDER BY e.id",
        )?;
        let rows = stmt
            .query_map([campaign_id], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
            })?
            .collect::<rusqlite::Result<Vec<_>>>()
            .context("reading environments")?;
        Ok(rows
            .into_iter()
            .map(|(id, text)| {
                let state = serde_json::from_str::<serde_json::Value>(&text)
                    .ok()
                    .and_then(|v| {
                        v.get("sched_ext")
                            .and_then(|s| s.as_str())
                            .map(String::from)
                    });
                (id, state)
            })
            .collect())
    }

    /// The unit of `work` of each workload of a campaign ("iterations",
    /// "bytes", …), from one process of one run of it.
    pub fn report_work_units(&self, campaign_ids: &[i64]) -> Result<Vec<(String, String)>> {
        let mut stmt = self.conn.prepare(&format!(
            "SELECT w.workload, (SELECT p.work_unit FROM processes p WHERE p.run_id = w.run LIMIT 1)
             FROM (SELECT workload, MIN(id) AS run FROM runs WHERE campaign_id IN ({}) AND status = 'ok'
                   GROUP BY workload) w",
            id_list(campaign_ids)
        ))?;
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, Option<String>>(1)?.unwrap_or_default(),
                ))
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(rows)
    }

    /// Stream the worker processes of the ok runs of a campaign to `f`, run
    /// by run in id order and by process index, the order the indexes give
    /// (no sort); RT hogs run beside the workers are left out. Returns the
    /// number of rows.
    pub fn for_each_report_process(
        &self,
        campaign_ids: &[i64],
        mut f: impl FnMut(&ReportProcess),
    ) -> Result<u64> {
        let mut stmt = self
            .conn
            .prepare(&format!(
                "SELECT p.run_id, p.process_index, p.nice, p.rt_priority, p.wall_ns, p.utime_us, p.stime_us,
                    p.work, p.end_ns{}
             FROM runs r JOIN processes p ON p.run_id = r.id
             WHERE r.campaign_id IN ({}) AND r.status = 'ok' AND p.role = 'worker'
             ORDER BY r.id, p.process_index",
                counts::select_list("p.", Which::Metrics),
                id_list(campaign_ids)
            ))
            .context(SCHEMA_MISMATCH)?;
        let cols = ProcessColumns::of(&stmt)?;
        let mut rows = stmt.query([])?;
        let mut n = 0u64;
        while let Some(r) = rows.next()? {
            f(&cols.read(r)?);
            n += 1;
        }
        Ok(n)
    }

    /// The worker processes of some runs (`run_ids`, any order), as
    /// [`Store::for_each_report_process`] reads them (RT hogs run beside
    /// the workers left out), handed to `f` run by run in run id order, each
    /// run's rows by process index (runs without rows are not handed). The
    /// report reads a condition's ok runs with this: one query per
    /// condition, not one per run (a query per run cost more than reading
    /// the rows at ten million rows). Returns the number of rows.
    pub fn for_each_report_run(
        &self,
        run_ids: &[i64],
        mut f: impl FnMut(i64, &[ReportProcess]),
    ) -> Result<u64> {
        if run_ids.is_empty() {
            return Ok(0);
        }
        let mut ids = run_ids.to_vec();
        ids.sort_unstable();
        ids.dedup();
        // The ids in the text: SQLite walks the primary key once per id, in
        // order, so the rows come by run and process index without a sort.
        let mut stmt = self
            .conn
            .prepare(&format!(
                "SELECT run_id, process_index, nice, rt_priority, wall_ns, utime_us, stime_us, work,
                    end_ns{}
             FROM processes WHERE run_id IN ({}) AND role = 'worker' ORDER BY run_id, process_index",
                counts::select_list("", Which::Metrics),
                id_list(&ids)
            ))
            .context(SCHEMA_MISMATCH)?;
        let cols = ProcessColumns::of(&stmt)?;
        let mut rows = stmt.query([])?;
        let mut run: Vec<ReportProcess> = Vec::new();
        let mut n = 0u64;
        while let Some(r) = rows.next()? {
            let p = cols.read(r)?;
            if run.first().is_some_and(|q| q.run_id != p.run_id) {
                f(run[0].run_id, &run);
                run.clear();
            }
            run.push(p);
            n += 1;
        }
        if let Some(q) = run.first() {
            f(q.run_id, &run);
        }
        Ok(n)
    }

    /// The stored documents of some runs, in the order asked: the resolved
    /// plan entry (`runs.resolved_json`, None when it is not a [`Run`], as
    /// in synthetic databases) and the policy-specific facts
    /// (`runs.extra_json`). Unknown ids are left out.
    pub fn report_run_documents(
        &self,
        run_ids: &[i64],
    ) -> Result<Vec<(i64, Option<Run>, serde_json::Value)>> {
        let mut stmt = self
            .conn
            .prepare("SELECT resolved_json, extra_json FROM runs WHERE id = ?1")?;
        let mut out = Vec::with_capacity(run_ids.len());
        for &id in run_ids {
            let row = stmt
                .query_row([id], |r| {
                    Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
                })
                .optional()
                .with_context(|| format!("reading run {id}"))?;
            if let Some((resolved, extra)) = row {
                let run = serde_json::from_str::<Run>(&resolved).ok();
                let extra = serde_json::from_str(&extra).unwrap_or(serde_json::Value::Null);
                out.push((id, run, extra));
            }
        }
        Ok(out)
    }

    /// Every process row (workers and RT hogs) of some runs, as
    /// [`ProcessRecord`]s, in the order of the runs asked and then by process
    /// index. `sched.weight` is None in rows stored before the weight was
    /// (schema version 1): the report takes weights from the run's priority
    /// mode.
    pub fn report_process_records(&self, run_ids: &[i64]) -> Result<Vec<(i64, ProcessRecord)>> {
        Ok(self
            .report_process_records_by_run(run_ids)?
            .into_iter()
            .flat_map(|(id, records)| records.into_iter().map(move |p| (id, p)))
            .collect())
    }

    /// [`Store::report_process_records`] run by run: each run asked (with
    /// rows) and its records by process index, without moving a campaign's
    /// worth of records into one list (the model section reads the
    /// processes of up to 50 runs of every condition).
    pub fn report_process_records_by_run(
        &self,
        run_ids: &[i64],
    ) -> Result<Vec<(i64, Vec<ProcessRecord>)>> {
        let mut stmt = self.conn.prepare(&format!(
            "SELECT process_index, role, pid, policy, nice, rt_priority, dl_runtime_ns, dl_deadline_ns,
                    dl_period_ns, start_ns, end_ns, wall_ns, utime_us, stime_us, maxrss_kb, work, work_unit,
                    figures_json, exit, ok, stderr_tail, weight{}
             FROM processes WHERE run_id = ?1 ORDER BY process_index",
            counts::select_list("", Which::All)
        ))?;
        let cols = Columns::of(&stmt)?;
        let mut out = Vec::with_capacity(run_ids.len());
        // The size of the last run's list: a campaign's runs have the same
        // processes, mostly.
        let mut last = 0;
        for &id in run_ids {
            let mut records = Vec::with_capacity(last);
            let mut rows = stmt.query([id])?;
            while let Some(r) = rows.next()? {
                records.push(process_record(id, &cols.row(r))?);
            }
            if !records.is_empty() {
                last = records.len();
                out.push((id, records));
            }
        }
        Ok(out)
    }

    /// What a precision rule needs of each stored run of a campaign, in
    /// campaign order: its key, repetition, workload, whether it is ok,
    /// its makespan, and the mean work of its workers (NULL works left out,
    /// as the report's per-run `work`).
    pub fn precision_inputs(&self, campaign_id: i64) -> Result<Vec<PrecisionInput>> {
        let mut stmt = self.conn.prepare(
            "SELECT r.run_key, r.rep, r.workload, r.status = 'ok' AS ok, r.makespan_ns,
                    (SELECT AVG(p.work) FROM processes p WHERE p.run_id = r.id AND p.role = 'worker')
                        AS mean_work
             FROM runs r WHERE r.campaign_id = ?1 ORDER BY r.seq",
        )?;
        let cols = Columns::of(&stmt)?;
        let rows = stmt
            .query_map([campaign_id], |r| {
                let n = cols.row(r);
                Ok(PrecisionInput {
                    key: n.get("run_key")?,
                    rep: n.get::<i64>("rep")?.clamp(0, u32::MAX as i64) as u32,
                    workload: n.get("workload")?,
                    ok: n.get("ok")?,
                    makespan_ns: n.get("makespan_ns")?,
                    mean_work: n.get("mean_work")?,
                })
            })?
            .collect::<rusqlite::Result<Vec<_>>>()
            .context("reading runs")?;
        Ok(rows)
    }

    /// The campaigns named `name`, newest first (earlier campaigns of a
    /// spec, whatever changed since).
    pub fn campaigns_named(&self, name: &str) -> Result<Vec<i64>> {
        let mut stmt = self
            .conn
            .prepare("SELECT id FROM campaigns WHERE name = ?1 ORDER BY id DESC")?;
        let ids = stmt
            .query_map([name], |r| r.get::<_, i64>(0))?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(ids)
    }

    /// Set a campaign's creation time and recorded schedlab version
    /// (synthetic databases whose reports must not change with the clock or
    /// the crate version).
    pub fn set_campaign_meta(
        &mut self,
        campaign_id: i64,
        created_unix_ms: i64,
        schedlab_version: &str,
    ) -> Result<()> {
        self.conn.execute(
            "UPDATE campaigns SET created_unix_ms = ?2, schedlab_version = ?3 WHERE id = ?1",
            params![campaign_id, created_unix_ms, schedlab_version],
        )?;
        Ok(())
    }
}

/// The positions of a process-row query's columns
/// ([`Store::for_each_report_run`], [`Store::for_each_report_process`]),
/// found by name once per statement: the report reads ten million rows by
/// position (reads by name were about 5 % of its CPU time there).
struct ProcessColumns {
    run_id: usize,
    process_index: usize,
    nice: usize,
    rt_priority: usize,
    wall_ns: usize,
    utime_us: usize,
    stime_us: usize,
    work: usize,
    end_ns: usize,
    counts: Vec<(crate::fields::Field, usize)>,
}

impl ProcessColumns {
    fn of(stmt: &rusqlite::Statement<'_>) -> rusqlite::Result<ProcessColumns> {
        let cols = Columns::of(stmt)?;
        let at = |name| cols.position(name);
        Ok(ProcessColumns {
            run_id: at("run_id")?,
            process_index: at("process_index")?,
            nice: at("nice")?,
            rt_priority: at("rt_priority")?,
            wall_ns: at("wall_ns")?,
            utime_us: at("utime_us")?,
            stime_us: at("stime_us")?,
            work: at("work")?,
            end_ns: at("end_ns")?,
            counts: counts::positions(&cols, Which::Metrics)?,
        })
    }

    /// A row of the query. Durations that are never negative when stored
    /// read a negative value as 0, as [`Named::u64`] does.
    fn read(&self, r: &rusqlite::Row<'_>) -> rusqlite::Result<ReportProcess> {
        let count = |at| r.get::<_, i64>(at).map(|v| v.max(0) as u64);
        Ok(ReportProcess {
            run_id: r.get(self.run_id)?,
            process_index: r.get(self.process_index)?,
            nice: r.get(self.nice)?,
            rt_priority: r.get(self.rt_priority)?,
            wall_ns: r.get(self.wall_ns)?,
            usage: ReportUsage {
                utime_us: count(self.utime_us)?,
                stime_us: count(self.stime_us)?,
            },
            work: r.get(self.work)?,
            end_ns: r.get(self.end_ns)?,
            kernel: counts::read_at(r, &self.counts)?,
        })
    }
}

/// A row of [`Store::report_process_records`]'s query, of run `id`.
fn process_record(id: i64, n: &Named<'_, '_, '_>) -> Result<ProcessRecord> {
    let policy: String = n.get("policy")?;
    Ok(ProcessRecord {
        index: n.get::<i64>("process_index")?.max(0) as u32,
        role: n.get("role")?,
        pid: n.get::<i64>("pid")? as i32,
        sched: ProcSched {
            policy: Policy::parse(&policy)
                .with_context(|| format!("run {id}: unknown policy {policy:?} in a process row"))?,
            nice: n.get::<Option<i64>>("nice")?.map(|v| v as i32),
            rt_priority: n.get::<Option<i64>>("rt_priority")?.map(|v| v as i32),
            dl_runtime_ns: n.opt_u64("dl_runtime_ns")?,
            dl_deadline_ns: n.opt_u64("dl_deadline_ns")?,
            dl_period_ns: n.opt_u64("dl_period_ns")?,
            weight: n.get::<Option<i64>>("weight")?.map(|v| v.max(0) as u32),
            slice_ns: None,
        },
        start_ns: n.opt_u64("start_ns")?,
        end_ns: n.opt_u64("end_ns")?,
        wall_ns: n.u64("wall_ns")?,
        usage: ProcessUsage {
            utime_us: n.u64("utime_us")?,
            stime_us: n.u64("stime_us")?,
            maxrss_kb: n.opt_u64("maxrss_kb")?,
        },
        kernel: counts::read(n)?,
        work: n.opt_u64("work")?,
        work_unit: n.get("work_unit")?,
        slice_ns: None,
        latency: Default::default(),
        figures: serde_json::from_str(&n.get::<String>("figures_json")?).unwrap_or_default(),
        exit: n.get("exit")?,
        ok: n.get("ok")?,
        stderr_tail: n.get("stderr_tail")?,
    })
}

/// Campaign ids for an SQL `IN (…)` list (integers: nothing to escape).
fn id_list(ids: &[i64]) -> String {
    ids.iter()
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// A host as a factor level: its name, with the first 8 characters of its
/// id when `hosts` (every run's (name, id)) has another id under that name.
fn host_label(
    hosts: &[(Option<String>, Option<String>)],
    name: Option<String>,
    id: Option<String>,
) -> String {
    let shown = name
        .clone()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "unknown host".to_string());
    let shared = hosts.iter().any(|(n, i)| *n == name && *i != id);
    match (shared, id) {
        (true, Some(id)) => format!("{shown} ({})", id.chars().take(8).collect::<String>()),
        (true, None) => format!("{shown} (no host id)"),
        (false, _) => shown,
    }
}

#[cfg(test)]
mod tests {
    use super::host_label;
    use crate::store::Store;

    #[test]
    fn process_rows_read_by_position_hold_what_the_records_hold() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("t.db")).unwrap();
        crate::testing::synth::create(&mut store, &crate::testing::synth::SynthConfig::small())
            .unwrap();
        let frame = store.load_report_frame(None, None).unwrap();
        let ids: Vec<i64> = frame.runs.iter().map(|r| r.id).collect();
        let mut seen = 0u64;
        let read = store
            .for_each_report_run(&ids, |id, ps| {
                // The same rows through the records' reader (by name).
                let records = store.report_process_records(&[id]).unwrap();
                let workers: Vec<_> = records.iter().filter(|(_, p)| p.role == "worker").collect();
                assert_eq!(ps.len(), workers.len(), "run {id}");
                for (p, (_, w)) in ps.iter().zip(workers) {
                    assert_eq!(p.run_id, id);
                    assert_eq!(p.process_index, i64::from(w.index));
                    assert_eq!(p.nice, w.sched.nice.map(i64::from));
                    assert_eq!(p.rt_priority, w.sched.rt_priority.map(i64::from));
                    assert_eq!(p.wall_ns as u64, w.wall_ns);
                    assert_eq!(p.usage.utime_us, w.usage.utime_us);
                    assert_eq!(p.usage.stime_us, w.usage.stime_us);
                    assert_eq!(p.work.map(|v| v as u64), w.work);
                    assert_eq!(p.end_ns.map(|v| v as u64), w.end_ns);
                    assert_eq!(p.kernel, w.kernel.of_metrics());
                    assert!(p.kernel.get(crate::fields::Field::RunNs).is_some());
                    seen += 1;
                }
            })
            .unwrap();
        assert_eq!(read, seen);
        assert!(seen > 100, "the campaign has process rows: {seen}");
        let mut streamed = 0u64;
        store
            .for_each_report_process(&[frame.campaign.id], |_| streamed += 1)
            .unwrap();
        assert_eq!(streamed, seen, "both readers read every worker row");
    }

    /// The figures a program's run did not get are read from each
    /// worker's `missing`, the first worker's reason kept; anything else
    /// gives none.
    #[test]
    fn not_given_figures_come_from_every_worker_s_missing() {
        let extra = r#"[{"worker": 0, "missing": {"voluntary_switches": "no taskstats"}},
            {"worker": 1, "missing": {"voluntary_switches": "other", "peak_memory_bytes": "no memory"}}]"#;
        let m = super::not_given(Some(extra));
        assert_eq!(m.len(), 2);
        assert_eq!(m["voluntary_switches"], "no taskstats");
        assert_eq!(m["peak_memory_bytes"], "no memory");
        assert!(super::not_given(None).is_empty());
        assert!(super::not_given(Some("not json")).is_empty());
    }

    #[test]
    fn hosts_sharing_a_name_are_told_apart_by_id() {
        let s = |v: &str| Some(v.to_string());
        let hosts = vec![
            (s("a"), s("11111111-aaaa")),
            (s("b"), s("22222222-bbbb")),
            (s("b"), s("33333333-cccc")),
            (s("c"), None),
        ];
        assert_eq!(host_label(&hosts, s("a"), s("11111111-aaaa")), "a");
        assert_eq!(
            host_label(&hosts, s("b"), s("22222222-bbbb")),
            "b (22222222)"
        );
        assert_eq!(
            host_label(&hosts, s("b"), s("33333333-cccc")),
            "b (33333333)"
        );
        assert_eq!(host_label(&hosts, s("c"), None), "c");
        assert_eq!(host_label(&hosts, None, None), "unknown host");
    }
}
