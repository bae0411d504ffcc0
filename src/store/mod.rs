//! The SQLite store: the only module that speaks SQL. One file holds every
//! campaign; every finished run is committed in its own transaction the
//! moment it ends, so a crash or Ctrl-C loses at most the run in progress.

mod analysis;
mod counts;
mod export;
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
pub use trace::{RunTrace, TraceInfo, TracedRun};

use anyhow::{Context, Result, bail};
use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use sha2::{Digest, Sha256};
use std::collections::HashSet;
use std::path::Path;
use std::sync::LazyLock;

use crate::record::{RunRecord, RunStatus};
use crate::spec::Spec;
use crate::sys::envinfo::EnvSnapshot;
use crate::workload::latency::Latency;
use named::{Columns, Named};

pub use analysis::{
    PrecisionInput, ReportCampaign, ReportData, ReportEnvironment, ReportProcess, ReportRun,
    ReportUsage, RunFactor,
};
pub use export::{ExportLatency, ExportRow, ExportTrace};
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

/// The `runs` columns a stored run fills, in the order of its values.
const RUN_COLUMNS: &[&str] = &[
    "campaign_id",
    "run_key",
    "seq",
    "policy",
    "workload",
    "workload_kind",
    "processes",
    "priority_mode",
    "cpus",
    "cpu_list",
    "rep",
    "status",
    "reason",
    "makespan_ns",
    "cpu_util",
    "started_unix_ms",
    "load_avg_1m",
    "environment_id",
    "resolved_json",
    "rt_runtime_us",
    "extra_json",
    "others_runnable",
    "steal_pct",
    "other_cpu_pct",
    "slice_us",
    "ext_scheduler",
    "interrupts",
    "softirqs",
    "cpu_freq_khz",
    "throttle_count",
    "machine",
];

/// The fixed `processes` columns a stored process fills, in the order of
/// its values; the registry's fields follow ([`counts::names`]).
const PROCESS_COLUMNS: &[&str] = &[
    "run_id",
    "process_index",
    "role",
    "pid",
    "policy",
    "nice",
    "rt_priority",
    "dl_runtime_ns",
    "dl_deadline_ns",
    "dl_period_ns",
    "start_ns",
    "end_ns",
    "wall_ns",
    "utime_us",
    "stime_us",
    "maxrss_kb",
    "work",
    "work_unit",
    "figures_json",
    "exit",
    "ok",
    "stderr_tail",
    "weight",
    "slice_ns",
];

static RUN_INSERT: LazyLock<String> = LazyLock::new(|| insert_sql("runs", RUN_COLUMNS));

static PROCESS_INSERT: LazyLock<String> = LazyLock::new(|| {
    let columns: Vec<&str> = PROCESS_COLUMNS
        .iter()
        .copied()
        .chain(counts::names())
        .collect();
    insert_sql("processes", &columns)
});

/// The `campaigns` columns a new campaign fills, in the order of its values.
const CAMPAIGN_INSERT_COLUMNS: &[&str] = &[
    "name",
    "description",
    "identity",
    "seed",
    "scale",
    "planned_runs",
    "spec_json",
    "spec_toml",
    "overrides",
    "created_unix_ms",
    "schedlab_version",
    "uuid",
    "host_id",
    "hostname",
];

static CAMPAIGN_INSERT: LazyLock<String> =
    LazyLock::new(|| insert_sql("campaigns", CAMPAIGN_INSERT_COLUMNS));

/// The `environments` columns a new environment fills, in the order of its
/// values.
const ENVIRONMENT_COLUMNS: &[&str] = &[
    "fingerprint",
    "kernel_release",
    "cpu_model",
    "cpus_online",
    "hz",
    "preempt_model",
    "sched_rt_runtime_us",
    "sched_rt_period_us",
    "sched_rr_timeslice_ms",
    "cgroup_version",
    "virtualization",
    "schedlab_version",
    "json",
    "host_id",
    "hostname",
];

static ENVIRONMENT_INSERT: LazyLock<String> =
    LazyLock::new(|| insert_sql("environments", ENVIRONMENT_COLUMNS));

/// The `latency` columns a stored histogram fills, in the order of its
/// values.
const LATENCY_COLUMNS: &[&str] = &[
    "run_id",
    "process_index",
    "name",
    "is_primary",
    "count",
    "p50_ns",
    "p90_ns",
    "p99_ns",
    "p999_ns",
    "max_ns",
    "histogram",
];

static LATENCY_INSERT: LazyLock<String> = LazyLock::new(|| insert_sql("latency", LATENCY_COLUMNS));

/// The `slices` columns a stored WRR slice fills, in the order of its
/// values.
const SLICE_COLUMNS: &[&str] = &[
    "run_id",
    "seq",
    "process_index",
    "cpu",
    "planned_start_ns",
    "planned_end_ns",
    "actual_end_ns",
    "cpu_ns",
];

static SLICE_INSERT: LazyLock<String> = LazyLock::new(|| insert_sql("slices", SLICE_COLUMNS));

/// `INSERT INTO table (a, b, …) VALUES (?1, ?2, …)`: one placeholder per
/// column, numbered in order, so a list of values in the columns' order
/// binds each to its column.
fn insert_sql(table: &str, columns: &[&str]) -> String {
    let marks: Vec<String> = (1..=columns.len()).map(|n| format!("?{n}")).collect();
    format!(
        "INSERT INTO {table} ({}) VALUES ({})",
        columns.join(", "),
        marks.join(", ")
    )
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
            &CAMPAIGN_INSERT,
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
            &ENVIRONMENT_INSERT,
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
        tx.prepare_cached(&RUN_INSERT)?
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
            let mut stmt = tx.prepare_cached(&PROCESS_INSERT)?;
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
                    p.usage.maxrss_kb.map(i),
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
            let mut stmt = tx.prepare_cached(&LATENCY_INSERT)?;
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
            let mut stmt = tx.prepare_cached(&SLICE_INSERT)?;
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
mod tests;
