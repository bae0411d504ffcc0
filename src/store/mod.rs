//! The SQLite store: the only module that speaks SQL. One file holds every
//! campaign; every finished run is committed in its own transaction the
//! moment it ends, so a crash or Ctrl-C loses at most the run in progress.

mod analysis;
mod counts;
mod floor;
mod latency;
pub mod merge;
mod named;
pub use floor::FloorRead;
pub use latency::{ProcessLatency, rq_wait_per_slice_us};
mod replay;
mod schema;
mod trace;
pub use replay::{EncodedTrace, ReplaySource};
pub use trace::{RunTrace, TraceInfo};

use anyhow::{Context, Result, bail};
use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::Path;

use crate::record::{KernelCounts, ProcessUsage, RunRecord, RunStatus};
use crate::spec::Spec;
use crate::sys::envinfo::EnvSnapshot;
use crate::workload::latency::Latency;
use named::{Columns, Named};

pub use analysis::{
    PrecisionInput, ReportCampaign, ReportData, ReportEnvironment, ReportProcess, ReportRun,
    ReportUsage, RunFactor,
};
pub use schema::MIGRATIONS;

pub struct Store {
    conn: Connection,
}

/// A campaign row.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Campaign {
    pub id: i64,
    /// Stable across databases (`schedlab merge` keys campaigns by it).
    pub uuid: String,
    pub name: String,
    pub seed: u64,
    pub scale: f64,
    pub planned_runs: u64,
    pub created_unix_ms: i64,
    /// The host that created it; None for campaigns stored before host ids.
    pub host_id: Option<String>,
    pub hostname: Option<String>,
}

/// A machine: its stable id ([`crate::sys::hostid`], None when it has
/// none) and its hostname. Campaigns are resumed on the host that created
/// them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    pub id: Option<String>,
    pub name: String,
}

impl Host {
    /// The host an environment snapshot was captured on.
    pub fn of(env: &EnvSnapshot) -> Host {
        Host {
            id: env.host_id.clone(),
            name: env.hostname.clone(),
        }
    }

    /// This machine.
    pub fn this() -> Host {
        Host {
            id: crate::sys::hostid::host_id(),
            name: crate::sys::envinfo::hostname(),
        }
    }
}

/// The columns [`campaign_from_row`] reads.
const CAMPAIGN_COLUMNS: &str = "c.id, c.uuid, c.name, c.seed, c.scale, c.planned_runs, c.created_unix_ms, c.host_id, c.hostname";

/// A campaign with its progress, for listings.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct CampaignSummary {
    pub campaign: Campaign,
    pub ok: u64,
    pub failed: u64,
    pub timed_out: u64,
    pub skipped: u64,
}

impl CampaignSummary {
    /// Stored runs, any status.
    pub fn total_runs(&self) -> u64 {
        self.ok + self.failed + self.timed_out + self.skipped
    }
}

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
    pub run_ns: Option<i64>,
    pub wait_ns: Option<i64>,
    pub timeslices: Option<i64>,
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
    /// The process's kernel counters (all None in a row without a process).
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
/// this order; the kernel counters follow ([`export_sql`]).
const EXPORT_SQL: &str = "SELECT c.id AS campaign, c.name AS campaign_name, r.id AS run, r.run_key, r.seq, r.policy,
        r.workload, r.workload_kind, r.processes, r.priority_mode, r.cpus, r.cpu_list, r.rep, c.scale,
        r.rt_runtime_us, r.status, r.reason, r.makespan_ns, r.cpu_util, r.started_unix_ms, r.load_avg_1m,
        r.environment_id, r.extra_json, r.others_runnable, r.steal_pct, r.other_cpu_pct, r.interrupts,
        r.softirqs, r.cpu_freq_khz, r.throttle_count, p.process_index, p.role, p.pid,
        p.policy AS process_policy, p.nice, p.rt_priority, p.weight, p.dl_runtime_ns, p.dl_deadline_ns,
        p.dl_period_ns, p.start_ns, p.end_ns, p.wall_ns, p.utime_us, p.stime_us, p.nvcsw, p.nivcsw, p.minflt,
        p.majflt, p.maxrss_kb, p.run_ns, p.wait_ns, p.timeslices, p.work, p.work_unit, p.figures_json, p.exit,
        p.ok, p.stderr_tail, l.count AS latency_count, l.p50_ns, l.p90_ns, l.p99_ns, l.p999_ns, l.max_ns,
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
fn export_sql() -> String {
    EXPORT_SQL.replace("{counts}", &counts::select_list("p."))
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
        run_ns: n.get("run_ns")?,
        wait_ns: n.get("wait_ns")?,
        timeslices: n.get("timeslices")?,
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
/// process (its CPU times are NOT NULL; its switches, faults and peak
/// memory NULL where the kernel did not give them).
fn export_usage(n: &Named<'_, '_, '_>) -> rusqlite::Result<Option<ProcessUsage>> {
    let Some(utime_us) = n.get::<Option<i64>>("utime_us")? else {
        return Ok(None);
    };
    Ok(Some(ProcessUsage {
        utime_us: utime_us.max(0) as u64,
        stime_us: n.u64("stime_us")?,
        nvcsw: n.opt_u64("nvcsw")?,
        nivcsw: n.opt_u64("nivcsw")?,
        minflt: n.opt_u64("minflt")?,
        majflt: n.opt_u64("majflt")?,
        maxrss_kb: n.opt_u64("maxrss_kb")?,
    }))
}

/// The identity of a campaign: a hash of the validated spec. The same spec
/// (and scale, and seed if one was given) resumes the same campaign.
pub fn identity(spec: &Spec) -> String {
    let json = serde_json::to_string(spec).expect("a spec always serialises");
    let digest = Sha256::digest(json.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether neither the `-wal` nor the `-shm` of the database at `path` is
/// there.
fn sidecars_absent(path: &Path) -> bool {
    ["-wal", "-shm"].iter().all(|suffix| {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        std::fs::symlink_metadata(std::path::PathBuf::from(p)).is_err()
    })
}

fn i(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

impl Store {
    /// Open (creating if needed) the database at `path` and bring its schema
    /// up to date.
    pub fn open(path: &Path) -> Result<Store> {
        if let Some(dir) = path.parent()
            && !dir.as_os_str().is_empty()
            && !dir.exists()
        {
            bail!(
                "cannot create database {}: directory {} does not exist",
                path.display(),
                dir.display()
            );
        }
        let conn = Connection::open(path)
            .with_context(|| format!("cannot open database {}", path.display()))?;
        let mut store = Store { conn };
        store
            .configure()
            .with_context(|| format!("cannot use database {}", path.display()))?;
        Ok(store)
    }

    /// Open an existing database read-only, for commands that only look
    /// (`campaigns`, `export`, `report`, `plan`): it is never created,
    /// upgraded or written, so a database on a read-only mount, or one this
    /// user may only read, works.
    ///
    /// A WAL database needs its `-shm` index: SQLite creates it next to the
    /// database when it is missing, which a read-only directory forbids. The
    /// database is then opened as immutable (no locks, no WAL): nobody can be
    /// writing to it either, since a writer needs that directory too.
    pub fn open_existing(path: &Path) -> Result<Store> {
        let name = crate::out::path(path);
        match std::fs::metadata(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                bail!("database {name} does not exist (run `schedlab run` first, or pass --db)")
            }
            Err(e) => return Err(e).with_context(|| format!("cannot open database {name}")),
            Ok(m) if m.is_dir() => bail!("database {name} is a directory"),
            Ok(_) => {}
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        // A read-only connection to a WAL database makes its `-wal` and
        // `-shm` beside it and, never allowed to checkpoint, leaves them
        // there on close. When neither is there (nobody has the database
        // open), it is opened for writing but only queried (query_only):
        // the last connection to close then removes both, as it found it.
        // One of them there means another connection (or a crash) made
        // it: read-only, and what was found is left as it was.
        let first_flags = match sidecars_absent(path) {
            true => OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
            false => flags,
        };
        let first = Connection::open_with_flags(path, first_flags)
            .map_err(anyhow::Error::from)
            .and_then(|conn| {
                let store = Store { conn };
                store.check_readable()?;
                Ok(store)
            });
        let err = match first {
            Ok(store) => return store.upgraded_in_memory(),
            Err(e) => e,
        };
        // Only when SQLite could not open or read it, not for a database
        // that is not one, or newer than this schedlab.
        let retry = err
            .downcast_ref::<rusqlite::Error>()
            .and_then(|e| e.sqlite_error_code())
            .is_some_and(|c| {
                matches!(
                    c,
                    rusqlite::ErrorCode::CannotOpen | rusqlite::ErrorCode::ReadOnly
                )
            });
        if !retry {
            return Err(err).with_context(|| format!("cannot read database {name}"));
        }
        let uri = immutable_uri(path);
        let conn =
            Connection::open_with_flags(&uri, flags | OpenFlags::SQLITE_OPEN_URI).map_err(|e| {
                anyhow::Error::from(e).context(format!("cannot read database {name} ({err:#})"))
            })?;
        let store = Store { conn };
        store
            .check_readable()
            .with_context(|| format!("cannot read database {name} ({err:#})"))?;
        let wal = std::path::PathBuf::from(format!("{}-wal", path.display()));
        if std::fs::metadata(&wal).is_ok_and(|m| m.len() > 0) {
            crate::note!(
                "warning: {} holds changes not yet in the database, and SQLite cannot read it \
                 from this read-only directory; runs stored last may be missing",
                crate::out::path(&wal)
            );
        }
        store.upgraded_in_memory()
    }

    /// Another read-only connection to this store's database file, for a
    /// thread that reads beside this one (WAL lets readers run together).
    /// None when there is no such second view of the same data: an
    /// in-memory store (an older schema upgraded for reading), a database
    /// opened as immutable from a read-only directory, or one not at its
    /// latest schema.
    pub fn open_reader(&self) -> Option<Store> {
        let path = self.conn.path().filter(|p| !p.is_empty())?;
        // Opened as this one was (see [`Store::open_existing`]): whichever
        // of the two closes last then removes the `-wal` and `-shm` that
        // the pair made.
        let access = match self.conn.is_readonly(rusqlite::MAIN_DB).unwrap_or(true) {
            true => OpenFlags::SQLITE_OPEN_READ_ONLY,
            false => OpenFlags::SQLITE_OPEN_READ_WRITE,
        };
        let flags = access | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let store = Store {
            conn: Connection::open_with_flags(path, flags).ok()?,
        };
        store.check_readable().ok()?;
        (store.schema_version().ok()? == MIGRATIONS.len() as i64).then_some(store)
    }

    /// The checks of a read-only open: readable, and a schema this schedlab
    /// reads as it is (it is never upgraded here).
    fn check_readable(&self) -> Result<()> {
        self.conn.busy_timeout(std::time::Duration::from_secs(10))?;
        self.conn.execute_batch("PRAGMA query_only = ON;")?;
        let version: i64 = self
            .conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))?;
        let known = MIGRATIONS.len() as i64;
        if version > known {
            bail!(
                "the database has schema version {version}, newer than this schedlab understands ({known}); upgrade schedlab"
            );
        }
        if version == 0 {
            bail!("it is not a schedlab database (it has no schedlab tables)");
        }
        Ok(())
    }

    /// A database of an older schema, for reading: copied into memory and
    /// upgraded there, so that the file itself is never written.
    fn upgraded_in_memory(self) -> Result<Store> {
        let version = self.schema_version()?;
        if version >= MIGRATIONS.len() as i64 {
            return Ok(self);
        }
        let mut mem = Connection::open_in_memory()?;
        rusqlite::backup::Backup::new(&self.conn, &mut mem)?
            .run_to_completion(256, std::time::Duration::ZERO, None)
            .context("copying the database into memory to read its older schema")?;
        let mut store = Store { conn: mem };
        store.migrate()?;
        store.conn.execute_batch("PRAGMA query_only = ON;")?;
        Ok(store)
    }

    fn configure(&mut self) -> Result<()> {
        self.conn.busy_timeout(std::time::Duration::from_secs(10))?;
        let mode: String = self
            .conn
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
        if mode != "wal" && mode != "memory" {
            bail!("SQLite could not switch to WAL mode (journal_mode is {mode})");
        }
        // A traced run's transaction writes a few MiB (its slices and
        // wake-ups): with SQLite's default 2 MiB cache it spills to the WAL
        // half-way and writes pages twice. Up to 64 MiB, used as needed.
        self.conn.execute_batch(
            "PRAGMA foreign_keys = ON; PRAGMA synchronous = NORMAL; PRAGMA cache_size = -65536;",
        )?;
        let version: i64 = self
            .conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))?;
        let known = MIGRATIONS.len() as i64;
        if version > known {
            bail!(
                "the database has schema version {version}, newer than this schedlab understands ({known}); upgrade schedlab"
            );
        }
        self.migrate()
    }

    /// Apply the migrations the database lacks, each in its transaction.
    ///
    /// Foreign keys are off meanwhile, as SQLite's procedure for changing a
    /// table's constraints requires: a migration that rebuilds a table
    /// (create the new one, copy, drop the old, rename) would otherwise
    /// delete the rows referring to it (`ON DELETE CASCADE`) when it drops
    /// the old one. Each migration ends with a foreign key check, so none
    /// can leave a dangling reference behind.
    fn migrate(&mut self) -> Result<()> {
        let version = self.schema_version()?;
        if version >= MIGRATIONS.len() as i64 {
            return Ok(());
        }
        let fk: bool = self
            .conn
            .query_row("PRAGMA foreign_keys", [], |r| r.get(0))?;
        self.conn.execute_batch("PRAGMA foreign_keys = OFF;")?;
        let result = self.apply_migrations(version);
        if fk {
            self.conn.execute_batch("PRAGMA foreign_keys = ON;")?;
        }
        result
    }

    fn apply_migrations(&mut self, version: i64) -> Result<()> {
        for (n, sql) in MIGRATIONS.iter().enumerate().skip(version as usize) {
            let tx = self.conn.transaction()?;
            tx.execute_batch(sql)
                .with_context(|| format!("schema migration {}", n + 1))?;
            let dangling: Option<String> = tx
                .query_row("PRAGMA foreign_key_check", [], |r| r.get(0))
                .optional()?;
            if let Some(table) = dangling {
                bail!(
                    "schema migration {} left rows of table {table} referring to missing rows; nothing was changed",
                    n + 1
                );
            }
            tx.pragma_update(None, "user_version", (n + 1) as i64)?;
            tx.commit()?;
        }
        Ok(())
    }

    pub fn schema_version(&self) -> Result<i64> {
        Ok(self
            .conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))?)
    }

    /// The campaign of this spec made on `host`, if one exists already: the
    /// one to resume. A database holds one campaign per spec and host (more
    /// after `schedlab merge`); a campaign stored before host ids (no host
    /// id) is this host's unless it recorded another hostname.
    pub fn find_campaign(&self, spec: &Spec, host: &Host) -> Result<Option<Campaign>> {
        let id = identity(spec);
        let mut stmt = self.conn.prepare(&format!(
            "SELECT {CAMPAIGN_COLUMNS} FROM campaigns c
             WHERE c.identity = ?1
               AND (c.host_id = ?2 OR (c.host_id IS NULL AND (c.hostname IS NULL OR c.hostname = ?3)))
             ORDER BY c.host_id IS NULL, c.id DESC LIMIT 1"
        ))?;
        let cols = Columns::of(&stmt)?;
        stmt.query_row(params![id, host.id, host.name], |r| {
            campaign_from_row(&cols.row(r))
        })
        .optional()
        .context("reading campaigns")
    }

    /// Record `host` as the creator of a campaign stored before host ids
    /// (when resumed there), so that it stays this host's after a merge.
    pub fn claim_campaign(&mut self, campaign_id: i64, host: &Host) -> Result<()> {
        self.conn.execute(
            "UPDATE campaigns SET host_id = ?2, hostname = ?3 WHERE id = ?1 AND host_id IS NULL",
            params![campaign_id, host.id, host.name],
        )?;
        Ok(())
    }

    /// Create the campaign of this spec on this machine with its seed and
    /// run count.
    pub fn create_campaign(
        &mut self,
        spec: &Spec,
        spec_toml: &str,
        overrides: &[String],
        seed: u64,
        planned_runs: usize,
    ) -> Result<Campaign> {
        self.create_campaign_on(
            &Host::this(),
            spec,
            spec_toml,
            overrides,
            seed,
            planned_runs,
        )
    }

    /// Create the campaign of this spec made on `host`, with a fresh UUID.
    pub fn create_campaign_on(
        &mut self,
        host: &Host,
        spec: &Spec,
        spec_toml: &str,
        overrides: &[String],
        seed: u64,
        planned_runs: usize,
    ) -> Result<Campaign> {
        let now = unix_ms();
        let uuid = uuid::Uuid::new_v4().to_string();
        self.conn.execute(
            "INSERT INTO campaigns (name, description, identity, seed, scale, planned_runs, spec_json, spec_toml,
                                    overrides, created_unix_ms, schedlab_version, uuid, host_id, hostname)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
            params![
                spec.name,
                spec.description,
                identity(spec),
                i(seed),
                spec.scale,
                planned_runs as i64,
                serde_json::to_string(spec)?,
                spec_toml,
                serde_json::to_string(overrides)?,
                now,
                env!("CARGO_PKG_VERSION"),
                uuid,
                host.id,
                host.name,
            ],
        )?;
        Ok(Campaign {
            id: self.conn.last_insert_rowid(),
            uuid,
            name: spec.name.clone(),
            seed,
            scale: spec.scale,
            planned_runs: planned_runs as u64,
            created_unix_ms: now,
            host_id: host.id.clone(),
            hostname: Some(host.name.clone()),
        })
    }

    /// Keys of the runs of a campaign that are stored (finished).
    pub fn finished_keys(&self, campaign_id: i64) -> Result<HashSet<String>> {
        let mut stmt = self
            .conn
            .prepare("SELECT run_key FROM runs WHERE campaign_id = ?1")?;
        let keys = stmt
            .query_map([campaign_id], |r| r.get::<_, String>(0))?
            .collect::<rusqlite::Result<HashSet<_>>>()?;
        Ok(keys)
    }

    /// Forget the runs of a campaign with these statuses so they run again.
    pub fn forget_runs(&mut self, campaign_id: i64, statuses: &[RunStatus]) -> Result<usize> {
        let tx = self.conn.transaction()?;
        let mut n = 0;
        for s in statuses {
            n += tx.execute(
                "DELETE FROM runs WHERE campaign_id = ?1 AND status = ?2",
                params![campaign_id, s.as_str()],
            )?;
        }
        tx.commit()?;
        Ok(n)
    }

    fn environment_id(tx: &rusqlite::Transaction, env: &EnvSnapshot) -> Result<i64> {
        // The fingerprint leaves out what changes from run to run (load).
        let mut stable = env.clone();
        stable.load_avg_1m = None;
        let json = serde_json::to_string(&stable)?;
        let fingerprint: String = Sha256::digest(json.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        if let Some(id) = tx
            .prepare_cached("SELECT id FROM environments WHERE fingerprint = ?1")?
            .query_row([&fingerprint], |r| r.get(0))
            .optional()?
        {
            return Ok(id);
        }
        tx.execute(
            "INSERT INTO environments (fingerprint, kernel_release, cpu_model, cpus_online, hz, preempt_model,
                 sched_rt_runtime_us, sched_rt_period_us, sched_rr_timeslice_ms, cgroup_version, virtualization,
                 schedlab_version, json, host_id, hostname)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
            params![
                fingerprint,
                env.kernel_release,
                env.cpu_model,
                env.cpus_online as i64,
                env.hz,
                env.preempt_model,
                env.sched_rt_runtime_us,
                env.sched_rt_period_us,
                env.sched_rr_timeslice_ms,
                env.cgroup_version,
                env.virtualization,
                env.schedlab_version,
                json,
                env.host_id,
                env.hostname,
            ],
        )?;
        Ok(tx.last_insert_rowid())
    }

    /// Store a finished run and its processes in one transaction (a crash
    /// loses at most the run being stored).
    pub fn insert_run(&mut self, campaign_id: i64, rec: &RunRecord) -> Result<i64> {
        let tx = self.conn.transaction()?;
        let run_id = Self::insert_run_in(&tx, campaign_id, rec)?;
        tx.commit()
            .with_context(|| format!("committing run {}", rec.run.key))?;
        Ok(run_id)
    }

    /// Store many runs in one transaction (synthetic campaigns for the
    /// report's benchmark and tests). Returns their ids, in order.
    pub fn insert_runs(&mut self, campaign_id: i64, recs: &[RunRecord]) -> Result<Vec<i64>> {
        let tx = self.conn.transaction()?;
        let ids = recs
            .iter()
            .map(|rec| Self::insert_run_in(&tx, campaign_id, rec))
            .collect::<Result<Vec<_>>>()?;
        tx.commit().context("committing runs")?;
        Ok(ids)
    }

    /// Insert one run, its processes and its slices inside `tx`.
    fn insert_run_in(tx: &rusqlite::Transaction, campaign_id: i64, rec: &RunRecord) -> Result<i64> {
        let env_id = Self::environment_id(tx, &rec.env)?;
        let run = &rec.run;
        tx.prepare_cached(
            "INSERT INTO runs (campaign_id, run_key, seq, policy, workload, workload_kind, processes, priority_mode,
                 cpus, cpu_list, rep, status, reason, makespan_ns, cpu_util, started_unix_ms, load_avg_1m,
                 environment_id, resolved_json, rt_runtime_us, extra_json, others_runnable, steal_pct,
                 other_cpu_pct, slice_us, ext_scheduler, interrupts, softirqs, cpu_freq_khz, throttle_count,
                 machine)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19,
                     ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28, ?29, ?30, ?31)",
        )?
        .execute(params![
                campaign_id,
                run.key,
                run.seq as i64,
                run.policy.name(),
                run.workload.name,
                run.workload.workload.kind(),
                run.processes as i64,
                run.priorities.name,
                run.cpus.label(),
                crate::spec::Cpus::List(rec.cpu_list.clone()).label(),
                run.rep as i64,
                rec.status.as_str(),
                rec.reason,
                rec.makespan_ns.map(i),
                rec.cpu_util,
                rec.started_unix_ms,
                rec.env.load_avg_1m,
                env_id,
                serde_json::to_string(run)?,
                run.rt_runtime_us,
                serde_json::to_string(&rec.extra)?,
                rec.interference.others_runnable,
                rec.interference.steal_pct,
                rec.interference.other_cpu_pct,
                run.slice_us,
                run.ext_scheduler.as_ref().map(|x| x.name.as_str()),
                rec.interference.interrupts.map(i),
                rec.interference.softirqs.map(i),
                rec.interference.cpu_freq_khz,
                rec.interference.throttle_count.map(i),
                run.machine.as_ref().map(|m| m.name.as_str()),
            ])
        .with_context(|| format!("storing run {}", run.key))?;
        let run_id = tx.last_insert_rowid();
        {
            // The kernel counters follow the fixed columns.
            let (count_names, count_marks) = counts::insert_list(32);
            let mut stmt = tx.prepare_cached(&format!(
                "INSERT INTO processes (run_id, process_index, role, pid, policy, nice, rt_priority, dl_runtime_ns,
                     dl_deadline_ns, dl_period_ns, start_ns, end_ns, wall_ns, utime_us, stime_us, nvcsw, nivcsw,
                     minflt, majflt, maxrss_kb, run_ns, wait_ns, timeslices, work, work_unit, figures_json, exit,
                     ok, stderr_tail, weight, slice_ns{count_names})
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19,
                     ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28, ?29, ?30, ?31{count_marks})",
            ))?;
            for p in &rec.processes {
                let count_values = counts::values(&p.kernel);
                let fixed = params![
                    run_id,
                    p.index as i64,
                    p.role,
                    p.pid as i64,
                    p.sched.policy.name(),
                    p.sched.nice,
                    p.sched.rt_priority,
                    p.sched.dl_runtime_ns.map(i),
                    p.sched.dl_deadline_ns.map(i),
                    p.sched.dl_period_ns.map(i),
                    p.start_ns.map(i),
                    p.end_ns.map(i),
                    i(p.wall_ns),
                    i(p.usage.utime_us),
                    i(p.usage.stime_us),
                    p.usage.nvcsw.map(i),
                    p.usage.nivcsw.map(i),
                    p.usage.minflt.map(i),
                    p.usage.majflt.map(i),
                    p.usage.maxrss_kb.map(i),
                    p.run_ns.map(i),
                    p.wait_ns.map(i),
                    p.timeslices.map(i),
                    p.work.map(i),
                    p.work_unit,
                    serde_json::to_string(&p.figures)?,
                    p.exit,
                    p.ok,
                    p.stderr_tail,
                    p.sched.weight,
                    p.slice_ns.map(i),
                ];
                stmt.execute(rusqlite::params_from_iter(counts::with_values(
                    fixed,
                    &count_values,
                )))?;
            }
        }
        {
            let primary = rec.run.workload.workload.primary_latency();
            let mut stmt = tx.prepare_cached(
                "INSERT INTO latency (run_id, process_index, name, is_primary, count, p50_ns, p90_ns,
                     p99_ns, p999_ns, max_ns, histogram)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            )?;
            for p in &rec.processes {
                for (name, bytes) in &p.latency {
                    let h = Latency::decode(bytes)
                        .with_context(|| format!("process {} latency {name}", p.index))?;
                    let q = h.percentiles();
                    stmt.execute(params![
                        run_id,
                        p.index as i64,
                        name,
                        primary == Some(name.as_str()),
                        i(q.count),
                        i(q.p50_ns),
                        i(q.p90_ns),
                        i(q.p99_ns),
                        i(q.p999_ns),
                        i(q.max_ns),
                        bytes,
                    ])?;
                }
            }
        }
        {
            let mut stmt = tx.prepare_cached(
                "INSERT INTO slices (run_id, seq, process_index, cpu, planned_start_ns, planned_end_ns,
                     actual_end_ns, cpu_ns)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )?;
            for (seq, sl) in rec.slices.iter().enumerate() {
                stmt.execute(params![
                    run_id,
                    seq as i64,
                    sl.process_index as i64,
                    sl.cpu as i64,
                    i(sl.planned_start_ns),
                    i(sl.planned_end_ns),
                    i(sl.actual_end_ns),
                    i(sl.cpu_ns),
                ])?;
            }
        }
        Ok(run_id)
    }

    /// Every campaign with counts of its runs by status.
    pub fn campaigns(&self) -> Result<Vec<CampaignSummary>> {
        let mut stmt = self.conn.prepare(&format!(
            "SELECT {CAMPAIGN_COLUMNS},
                    COALESCE(SUM(r.status = 'ok'), 0) AS ok, COALESCE(SUM(r.status = 'failed'), 0) AS failed,
                    COALESCE(SUM(r.status = 'timed_out'), 0) AS timed_out,
                    COALESCE(SUM(r.status = 'skipped'), 0) AS skipped
             FROM campaigns c LEFT JOIN runs r ON r.campaign_id = c.id
             GROUP BY c.id ORDER BY c.id"
        ))?;
        let cols = Columns::of(&stmt)?;
        let rows = stmt
            .query_map([], |r| {
                let n = cols.row(r);
                Ok(CampaignSummary {
                    campaign: campaign_from_row(&n)?,
                    ok: n.get::<i64>("ok")? as u64,
                    failed: n.get::<i64>("failed")? as u64,
                    timed_out: n.get::<i64>("timed_out")? as u64,
                    skipped: n.get::<i64>("skipped")? as u64,
                })
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(rows)
    }

    /// Fail unless `campaign` (when given) is in the database.
    fn check_campaign(&self, campaign: Option<i64>) -> Result<()> {
        if let Some(id) = campaign {
            let exists: bool = self.conn.query_row(
                "SELECT EXISTS (SELECT 1 FROM campaigns WHERE id = ?1)",
                [id],
                |r| r.get(0),
            )?;
            if !exists {
                bail!("campaign {id} is not in this database (`schedlab campaigns` lists them)");
            }
        }
        Ok(())
    }

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

impl Store {
    /// The WRR slices of a run, in the order they were handed out.
    pub fn slices(&self, run_id: i64) -> Result<Vec<crate::record::SliceRow>> {
        let mut stmt = self.conn.prepare(
            "SELECT process_index, cpu, planned_start_ns, planned_end_ns, actual_end_ns, cpu_ns
             FROM slices WHERE run_id = ?1 ORDER BY seq",
        )?;
        let cols = Columns::of(&stmt)?;
        let rows = stmt
            .query_map([run_id], |r| {
                let n = cols.row(r);
                Ok(crate::record::SliceRow {
                    process_index: n.get::<i64>("process_index")? as u32,
                    cpu: n.get::<i64>("cpu")? as u32,
                    planned_start_ns: n.get::<i64>("planned_start_ns")? as u64,
                    planned_end_ns: n.get::<i64>("planned_end_ns")? as u64,
                    actual_end_ns: n.get::<i64>("actual_end_ns")? as u64,
                    cpu_ns: n.get::<i64>("cpu_ns")? as u64,
                })
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(rows)
    }

    /// The kernel release a run ran on (its environment's), or None when
    /// there is no such run.
    pub fn run_kernel_release(&self, run_id: i64) -> Result<Option<String>> {
        Ok(self
            .conn
            .query_row(
                "SELECT e.kernel_release FROM runs r JOIN environments e ON e.id = r.environment_id
                 WHERE r.id = ?1",
                [run_id],
                |r| r.get(0),
            )
            .optional()?)
    }

    /// Each run of a campaign with its machine level and `extra`: (run
    /// key, machine, JSON), for the estimate of guest runs.
    pub fn run_keys_and_extras(
        &self,
        campaign: i64,
    ) -> Result<Vec<(String, Option<String>, serde_json::Value)>> {
        let mut stmt = self.conn.prepare(
            "SELECT run_key, machine, extra_json FROM runs WHERE campaign_id = ?1 ORDER BY seq",
        )?;
        let rows = stmt
            .query_map([campaign], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, Option<String>>(1)?,
                    r.get::<_, String>(2)?,
                ))
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        rows.into_iter()
            .map(|(k, m, json)| Ok((k, m, serde_json::from_str(&json)?)))
            .collect()
    }

    /// The policy-specific facts of each run of a campaign: (run id, JSON).
    pub fn run_extras(&self, campaign: i64) -> Result<Vec<(i64, serde_json::Value)>> {
        let mut stmt = self
            .conn
            .prepare("SELECT id, extra_json FROM runs WHERE campaign_id = ?1 ORDER BY seq")?;
        let rows = stmt
            .query_map([campaign], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        rows.into_iter()
            .map(|(id, json)| Ok((id, serde_json::from_str(&json)?)))
            .collect()
    }
}

/// A `file:` URI that opens `path` as immutable, its bytes percent-encoded
/// where a URI needs it.
fn immutable_uri(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    // "file://" and an empty authority: the path starts with "/".
    let mut uri = String::from("file://");
    for &b in abs.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"/-_.~".contains(&b) {
            uri.push(b as char);
        } else {
            uri.push_str(&format!("%{b:02X}"));
        }
    }
    uri.push_str("?immutable=1");
    uri
}

/// A campaign from the columns [`CAMPAIGN_COLUMNS`].
fn campaign_from_row(n: &Named<'_, '_, '_>) -> rusqlite::Result<Campaign> {
    Ok(Campaign {
        id: n.get("id")?,
        uuid: n.get("uuid")?,
        name: n.get("name")?,
        seed: n.get::<i64>("seed")? as u64,
        scale: n.get("scale")?,
        planned_runs: n.get::<i64>("planned_runs")? as u64,
        created_unix_ms: n.get("created_unix_ms")?,
        host_id: n.get("host_id")?,
        hostname: n.get("hostname")?,
    })
}

pub fn unix_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file_bytes(p: &Path) -> Vec<u8> {
        std::fs::read(p).unwrap()
    }

    /// A process whose switches, faults and peak memory the kernel did
    /// not give is stored with them NULL and read back as None by every
    /// reader (export rows, process records, the report's rows) and
    /// copied as NULL by `merge`; a process that has them keeps them, 0
    /// included.
    #[test]
    fn figures_not_given_round_trip_as_null() {
        use crate::testing::synth::{synthetic_env, synthetic_process, synthetic_record};
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("t.db")).unwrap();
        let toml = "name = \"t\"\n[matrix]\npolicy = [\"other\"]\nworkload = [\"pi\"]\n";
        let spec = crate::spec::load(toml, "t", &[]).unwrap();
        let c = store.create_campaign(&spec, toml, &[], 1, 1).unwrap();
        let mut run = crate::plan::expand(&spec, 1).swap_remove(0);
        run.processes = 2;
        let sched = crate::policy::ProcSched::fair(crate::policy::Policy::Other, 0);
        let mut given = synthetic_process(0, sched, 2_000_000, 1000);
        given.usage.nvcsw = Some(0);
        let mut not_given = synthetic_process(1, sched, 2_000_000, 1000);
        not_given.usage = ProcessUsage {
            utime_us: 1000,
            stime_us: 20,
            nvcsw: None,
            nivcsw: None,
            minflt: None,
            majflt: None,
            maxrss_kb: None,
        };
        let rec = synthetic_record(
            &run,
            &synthetic_env(2),
            vec![0, 1],
            0,
            None,
            vec![given.clone(), not_given.clone()],
        );
        let id = store.insert_run(c.id, &rec).unwrap();
        let nulls: i64 = store
            .conn
            .query_row(
                "SELECT count(*) FROM processes WHERE process_index = 1 AND nvcsw IS NULL
                     AND nivcsw IS NULL AND minflt IS NULL AND majflt IS NULL AND maxrss_kb IS NULL",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(nulls, 1);
        let rows = store.export_rows(None).unwrap();
        assert_eq!(rows[0].usage, Some(given.usage));
        assert_eq!(rows[1].usage, Some(not_given.usage));
        let recs = store.report_process_records(&[id]).unwrap();
        assert_eq!(recs[0].1.usage, given.usage);
        assert_eq!(recs[1].1.usage, not_given.usage);
        let mut seen = Vec::new();
        store
            .for_each_report_process(&[c.id], |p| seen.push((p.usage.nvcsw, p.usage.nivcsw)))
            .unwrap();
        assert_eq!(seen, [(Some(0), given.usage.nivcsw), (None, None)]);
        // `merge` copies the NULLs.
        let mut merged = Store::open(&dir.path().join("m.db")).unwrap();
        merged.merge_from(&store, |_, _| {}).unwrap();
        let rows = merged.export_rows(None).unwrap();
        assert_eq!(rows[1].usage, Some(not_given.usage));
    }

    #[test]
    fn opening_read_only_never_writes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let mut store = Store::open(&path).unwrap();
        crate::testing::synth::create(&mut store, &crate::testing::synth::SynthConfig::small())
            .unwrap();
        // Rollback journal mode: opening for writing would switch it to WAL.
        let mode: String = store
            .conn
            .query_row("PRAGMA journal_mode = DELETE", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "delete");
        drop(store);
        let before = file_bytes(&path);
        let mut ro = Store::open_existing(&path).unwrap();
        assert!(!ro.campaigns().unwrap().is_empty());
        assert!(ro.forget_runs(1, &[RunStatus::Ok]).is_err(), "writes fail");
        drop(ro);
        assert!(file_bytes(&path) == before, "the file is unchanged");
    }

    #[test]
    fn reads_beside_a_writer_in_wal_mode() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let mut writer = Store::open(&path).unwrap();
        crate::testing::synth::create(&mut writer, &crate::testing::synth::SynthConfig::small())
            .unwrap();
        let ro = Store::open_existing(&path).unwrap();
        assert!(!ro.finished_keys(1).unwrap().is_empty());
        let all = [
            RunStatus::Ok,
            RunStatus::Failed,
            RunStatus::TimedOut,
            RunStatus::Skipped,
        ];
        writer.forget_runs(1, &all).unwrap();
        assert!(
            ro.finished_keys(1).unwrap().is_empty(),
            "sees later commits"
        );
    }

    #[test]
    fn read_only_open_upgrades_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.db");
        std::fs::write(&empty, b"").unwrap();
        let e = Store::open_existing(&empty).err().unwrap();
        assert!(
            format!("{e:#}").contains("not a schedlab database"),
            "{e:#}"
        );
        assert_eq!(std::fs::metadata(&empty).unwrap().len(), 0);
        let e = Store::open_existing(&dir.path().join("none.db"))
            .err()
            .unwrap();
        assert!(format!("{e:#}").contains("does not exist"), "{e:#}");
        let future = dir.path().join("future.db");
        Store::open(&future)
            .unwrap()
            .conn
            .pragma_update(None, "user_version", 99)
            .unwrap();
        let e = Store::open_existing(&future).err().unwrap();
        assert!(format!("{e:#}").contains("newer"), "{e:#}");
    }

    #[test]
    fn immutable_uris_encode_odd_names() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a b?c#d%e.db");
        let mut store = Store::open(&path).unwrap();
        crate::testing::synth::create(&mut store, &crate::testing::synth::SynthConfig::small())
            .unwrap();
        drop(store);
        let uri = immutable_uri(&path);
        assert!(uri.starts_with("file:///") && uri.ends_with("a%20b%3Fc%23d%25e.db?immutable=1"));
        let conn = Connection::open_with_flags(
            &uri,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI,
        )
        .unwrap();
        let n: i64 = conn
            .query_row("SELECT COUNT(*) FROM campaigns", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 1);
    }

    #[test]
    fn the_export_query_streams_without_sorting() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("t.db")).unwrap();
        let plan: Vec<String> = store
            .conn
            .prepare(&format!("EXPLAIN QUERY PLAN {}", export_sql()))
            .unwrap()
            .query_map([None::<i64>], |r| r.get::<_, String>(3))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        assert!(
            plan.iter().all(|step| !step.contains("TEMP B-TREE")),
            "{plan:?}"
        );
    }
}
