//! The database schema as an ordered list of migrations. The database's
//! `PRAGMA user_version` is the number of migrations applied; each migration
//! runs in its own transaction, so a crash leaves the schema at a version.

/// Migration `i` brings the schema from version `i` to `i + 1`. Append only:
/// never edit a migration that has shipped.
pub const MIGRATIONS: &[&str] = &[
    // 1: campaigns, runs, processes, environments.
    r#"
    CREATE TABLE campaigns (
        id               INTEGER PRIMARY KEY,
        name             TEXT NOT NULL,
        description      TEXT NOT NULL DEFAULT '',
        identity         TEXT NOT NULL UNIQUE,   -- sha256 of the resolved spec
        seed             INTEGER NOT NULL,       -- the shuffle seed used
        scale            REAL NOT NULL,
        planned_runs     INTEGER NOT NULL,
        spec_json        TEXT NOT NULL,          -- the validated spec
        spec_toml        TEXT NOT NULL,          -- the text it came from
        overrides        TEXT NOT NULL DEFAULT '[]',
        created_unix_ms  INTEGER NOT NULL,
        schedlab_version TEXT NOT NULL
    );

    CREATE TABLE environments (
        id                    INTEGER PRIMARY KEY,
        fingerprint           TEXT NOT NULL UNIQUE,
        kernel_release        TEXT NOT NULL,
        cpu_model             TEXT NOT NULL,
        cpus_online           INTEGER NOT NULL,
        hz                    INTEGER,
        preempt_model         TEXT NOT NULL,
        sched_rt_runtime_us   INTEGER,
        sched_rt_period_us    INTEGER,
        sched_rr_timeslice_ms INTEGER,
        cgroup_version        TEXT NOT NULL,
        virtualization        TEXT NOT NULL,
        schedlab_version      TEXT NOT NULL,
        json                  TEXT NOT NULL
    );

    CREATE TABLE runs (
        id              INTEGER PRIMARY KEY,
        campaign_id     INTEGER NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
        run_key         TEXT NOT NULL,
        seq             INTEGER NOT NULL,
        policy          TEXT NOT NULL,
        workload        TEXT NOT NULL,
        workload_kind   TEXT NOT NULL,
        processes       INTEGER NOT NULL,
        priority_mode   TEXT NOT NULL,
        cpus            TEXT NOT NULL,
        cpu_list        TEXT NOT NULL,
        rep             INTEGER NOT NULL,
        status          TEXT NOT NULL CHECK (status IN ('ok', 'failed', 'timed_out', 'skipped')),
        reason          TEXT NOT NULL DEFAULT '',
        makespan_ns     INTEGER,
        cpu_util        REAL,
        started_unix_ms INTEGER NOT NULL,
        load_avg_1m     REAL,
        environment_id  INTEGER NOT NULL REFERENCES environments(id),
        rt_runtime_us   INTEGER,                -- sched_rt_runtime_us during the run, when swept
        resolved_json   TEXT NOT NULL,
        extra_json      TEXT NOT NULL DEFAULT '{}',  -- policy-specific facts (e.g. the WRR dispatcher's)
        UNIQUE (campaign_id, run_key)
    );

    CREATE TABLE processes (
        run_id        INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        process_index INTEGER NOT NULL,
        role          TEXT NOT NULL DEFAULT 'worker',  -- 'worker', or 'hog' (an RT CPU hog beside them)
        pid           INTEGER NOT NULL,
        policy        TEXT NOT NULL,
        nice          INTEGER,
        rt_priority   INTEGER,
        dl_runtime_ns INTEGER,
        dl_deadline_ns INTEGER,
        dl_period_ns  INTEGER,
        start_ns      INTEGER,
        end_ns        INTEGER,
        wall_ns       INTEGER NOT NULL,
        utime_us      INTEGER NOT NULL,
        stime_us      INTEGER NOT NULL,
        nvcsw         INTEGER NOT NULL,
        nivcsw        INTEGER NOT NULL,
        minflt        INTEGER NOT NULL,
        majflt        INTEGER NOT NULL,
        maxrss_kb     INTEGER NOT NULL,
        run_ns        INTEGER,
        wait_ns       INTEGER,
        timeslices    INTEGER,
        work          INTEGER,
        work_unit     TEXT NOT NULL,
        figures_json  TEXT NOT NULL,
        exit          TEXT NOT NULL,
        ok            INTEGER NOT NULL,
        stderr_tail   TEXT NOT NULL DEFAULT '',
        PRIMARY KEY (run_id, process_index)
    );

    CREATE TABLE slices (
        run_id           INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        seq              INTEGER NOT NULL,
        process_index    INTEGER NOT NULL,
        cpu              INTEGER NOT NULL,
        planned_start_ns INTEGER NOT NULL,     -- after barrier release
        planned_end_ns   INTEGER NOT NULL,
        actual_end_ns    INTEGER NOT NULL,
        cpu_ns           INTEGER NOT NULL,     -- CPU time the task received in the slice
        PRIMARY KEY (run_id, seq)
    );

    CREATE INDEX runs_by_campaign ON runs (campaign_id, status);
    "#,
    // 2: the weight each process was given (WRR slices, or a `weights`
    // priority mode under CFS nice or DEADLINE), NULL in older rows; runs in
    // campaign order straight from an index, so that exports stream without
    // sorting a campaign's rows.
    r#"
    ALTER TABLE processes ADD COLUMN weight INTEGER;
    CREATE INDEX runs_by_campaign_seq ON runs (campaign_id, seq);
    "#,
    // 3: other programs' activity around each run (never schedlab's own
    // processes). NULL in older rows and where it was not measured.
    r#"
    ALTER TABLE runs ADD COLUMN others_runnable INTEGER;  -- runnable tasks of other programs at barrier release
    ALTER TABLE runs ADD COLUMN steal_pct REAL;           -- steal time of the run's CPUs, % of their time
    ALTER TABLE runs ADD COLUMN other_cpu_pct REAL;       -- their busy time beyond the run's and schedlab's, %
    "#,
    // 4: latency histograms per process (wake-up, round trip, request, …),
    // HdrHistogram V2 encoded in nanoseconds so a condition's percentiles
    // come from pooled histograms; the percentiles of each for export.
    r#"
    CREATE TABLE latency (
        run_id        INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        process_index INTEGER NOT NULL,
        name          TEXT NOT NULL,            -- 'wakeup', 'round_trip', 'request', 'completion', …
        is_primary    INTEGER NOT NULL,         -- 1: the workload's primary latency (export's lat_* columns)
        count         INTEGER NOT NULL,
        p50_ns        INTEGER NOT NULL,
        p90_ns        INTEGER NOT NULL,
        p99_ns        INTEGER NOT NULL,
        p999_ns       INTEGER NOT NULL,
        max_ns        INTEGER NOT NULL,
        histogram     BLOB NOT NULL,
        PRIMARY KEY (run_id, process_index, name)
    );
    -- The EEVDF slice factor (µs asked, NULL when not swept) and the slice
    -- the kernel reported for each fair process (ns, NULL where none).
    ALTER TABLE runs ADD COLUMN slice_us INTEGER;
    ALTER TABLE processes ADD COLUMN slice_ns INTEGER;
    "#,
    // 5 (many hosts; numbered 6 when the trace tables come first): every
    // campaign gets a UUID, stable across databases (`merge` keys campaigns
    // by it), and the host that created it; every environment the host it
    // was captured on. The spec identity stops being unique: one spec run on
    // two hosts is two campaigns of one store. SQLite cannot drop a UNIQUE
    // constraint, so `campaigns` is rebuilt (with foreign keys off, see
    // `Store::migrate`; every row and id kept).
    //
    // Existing campaigns get a UUID (version 8) derived from what they
    // already hold, the same every time the migration runs: a database
    // upgraded in memory for reading (`merge` of an older file) gives the
    // same UUIDs as the file upgraded in place, so merging it twice adds
    // nothing. It is the spec identity's first 48 bits, 24 bits of the
    // shuffle seed and the creation time in ms. Their host id is unknown
    // (NULL); their hostname is the one their first run recorded.
    r#"
    CREATE TABLE campaigns_new (
        id               INTEGER PRIMARY KEY,
        name             TEXT NOT NULL,
        description      TEXT NOT NULL DEFAULT '',
        identity         TEXT NOT NULL,          -- sha256 of the resolved spec
        seed             INTEGER NOT NULL,       -- the shuffle seed used
        scale            REAL NOT NULL,
        planned_runs     INTEGER NOT NULL,
        spec_json        TEXT NOT NULL,          -- the validated spec
        spec_toml        TEXT NOT NULL,          -- the text it came from
        overrides        TEXT NOT NULL DEFAULT '[]',
        created_unix_ms  INTEGER NOT NULL,
        schedlab_version TEXT NOT NULL,
        uuid             TEXT NOT NULL UNIQUE,   -- stable across databases
        host_id          TEXT,                   -- the machine that created it (sys::hostid); NULL: unknown
        hostname         TEXT                    -- its hostname then
    );
    INSERT INTO campaigns_new (id, name, description, identity, seed, scale, planned_runs, spec_json, spec_toml,
                               overrides, created_unix_ms, schedlab_version, uuid, host_id, hostname)
    SELECT c.id, c.name, c.description, c.identity, c.seed, c.scale, c.planned_runs, c.spec_json, c.spec_toml,
           c.overrides, c.created_unix_ms, c.schedlab_version,
           lower(substr(c.identity, 1, 8) || '-' || substr(c.identity, 9, 4) || '-8'
                 || substr(substr(printf('%016x', c.seed), -6), 1, 3) || '-'
                 || substr('89ab', 1 + (instr('0123456789abcdef', lower(substr(c.identity, 13, 1))) + 15) % 4, 1)
                 || substr(substr(printf('%016x', c.seed), -6), 4, 3) || '-'
                 || substr(printf('%012x', c.created_unix_ms), -12)),
           NULL,
           (SELECT json_extract(e.json, '$.hostname') FROM runs r JOIN environments e ON e.id = r.environment_id
            WHERE r.campaign_id = c.id ORDER BY r.seq, r.id LIMIT 1)
    FROM campaigns c;
    DROP TABLE campaigns;
    ALTER TABLE campaigns_new RENAME TO campaigns;
    CREATE INDEX campaigns_by_identity ON campaigns (identity, host_id);

    ALTER TABLE environments ADD COLUMN host_id TEXT;    -- NULL: captured before host ids
    ALTER TABLE environments ADD COLUMN hostname TEXT;
    UPDATE environments SET hostname = json_extract(json, '$.hostname');
    "#,
    // 6: kernel scheduling traces (`--trace`). One capture per traced run
    // with the raw events (trace::blob), the tasks' names, and what is
    // derived from them: slices, wake-ups, per-process and per-CPU figures.
    r#"
    CREATE TABLE trace_captures (
        run_id              INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
        start_ns            INTEGER NOT NULL,   -- the traced window, CLOCK_MONOTONIC
        end_ns              INTEGER NOT NULL,
        release_ns          INTEGER,            -- the workers' release, CLOCK_MONOTONIC
        cpus                TEXT NOT NULL,      -- JSON array of the CPUs traced
        lost_events         INTEGER NOT NULL,   -- events the kernel dropped
        mismatched_switches INTEGER NOT NULL,   -- switches whose prev was not on that CPU
        unusable            INTEGER NOT NULL,   -- 1: lost events or mismatches; never used silently
        event_count         INTEGER NOT NULL,
        events              BLOB NOT NULL       -- trace::blob encoding
    );
    CREATE TABLE trace_tasks (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        tid    INTEGER NOT NULL,
        tgid   INTEGER NOT NULL,
        comm   TEXT NOT NULL,
        PRIMARY KEY (run_id, tid)
    );
    CREATE TABLE trace_slices (
        run_id        INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        pid           INTEGER NOT NULL,         -- thread id
        cpu           INTEGER NOT NULL,
        start_ns      INTEGER NOT NULL,
        end_ns        INTEGER NOT NULL,
        end_reason    TEXT CHECK (end_reason IN ('preempted', 'yielded', 'blocked', 'exited')),
                                                -- NULL: still running at the window's end
        start_clipped INTEGER NOT NULL          -- 1: running when the window opened
    );
    CREATE INDEX trace_slices_by_run ON trace_slices (run_id, cpu, start_ns);
    CREATE TABLE trace_wakeups (
        run_id       INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        pid          INTEGER NOT NULL,
        waker_pid    INTEGER NOT NULL,
        waking_ns    INTEGER,                   -- NULL: new task, or woken before the window
        wakeup_ns    INTEGER,
        target_cpu   INTEGER NOT NULL,
        new          INTEGER NOT NULL,
        switch_in_ns INTEGER,                   -- NULL: not run before the window closed
        cpu          INTEGER
    );
    CREATE INDEX trace_wakeups_by_run ON trace_wakeups (run_id);
    CREATE TABLE trace_processes (
        run_id          INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        tgid            INTEGER NOT NULL,       -- processes.pid
        slices          INTEGER NOT NULL,
        slice_p50_ns    INTEGER,                -- of complete slices; NULL: none
        slice_p99_ns    INTEGER,
        slice_max_ns    INTEGER,
        slice_histogram BLOB NOT NULL,          -- HdrHistogram V2, ns
        oncpu_ns        INTEGER NOT NULL,
        work_oncpu_ns   INTEGER,                -- within the process's own work window (rusage's, schedstat's)
        work_switches   INTEGER,                -- switches out of the CPU within that window
        preempted       INTEGER NOT NULL,
        yielded         INTEGER NOT NULL,
        voluntary       INTEGER NOT NULL,       -- blocked or exited
        migrations      INTEGER NOT NULL,
        wakeups         INTEGER NOT NULL,       -- with a wake-up-to-run latency
        wake_p50_ns     INTEGER,
        wake_p99_ns     INTEGER,
        wake_max_ns     INTEGER,
        wake_histogram  BLOB NOT NULL,
        PRIMARY KEY (run_id, tgid)
    );
    CREATE TABLE trace_cpus (
        run_id        INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        cpu           INTEGER NOT NULL,
        window_ns     INTEGER NOT NULL,
        busy_ns       INTEGER NOT NULL,         -- the run's tasks on the CPU
        gaps          INTEGER NOT NULL,         -- stretches without them
        gap_p50_ns    INTEGER,
        gap_max_ns    INTEGER,
        gap_histogram BLOB NOT NULL,
        PRIMARY KEY (run_id, cpu)
    );
    "#,
    // 7: the sched_ext scheduler a run was under (`matrix.ext_scheduler`);
    // NULL when the spec does not sweep it.
    r#"
    ALTER TABLE runs ADD COLUMN ext_scheduler TEXT;
    "#,
    // 8: switches the kernel never emitted, repaired from the events around
    // them (trace::derive::Repair) or refused, and the judgement made of
    // them (trace::verdict). NULL in a capture stored before: its
    // mismatched switches were neither.
    r#"
    ALTER TABLE trace_captures ADD COLUMN repaired_switches INTEGER;
    ALTER TABLE trace_captures ADD COLUMN refused_switches INTEGER;
    ALTER TABLE trace_captures ADD COLUMN unattributed_ns INTEGER;  -- between the repaired gaps' events
    ALTER TABLE trace_captures ADD COLUMN oncpu_ns INTEGER;         -- the run's tasks on CPU in the trace
    ALTER TABLE trace_captures ADD COLUMN unusable_reason TEXT;     -- NULL: usable
    ALTER TABLE trace_slices ADD COLUMN start_repaired INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE trace_slices ADD COLUMN end_repaired INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE trace_processes ADD COLUMN unattributed_ns INTEGER;
    ALTER TABLE trace_processes ADD COLUMN missing_switches INTEGER;
    ALTER TABLE trace_processes ADD COLUMN work_unattributed_ns INTEGER;
    ALTER TABLE trace_processes ADD COLUMN work_missing_switches INTEGER;
    ALTER TABLE trace_cpus ADD COLUMN unattributed_ns INTEGER;
    CREATE TABLE trace_repairs (
        run_id     INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        cpu        INTEGER NOT NULL,
        before_pid INTEGER NOT NULL,   -- the task the trace had on the CPU, last seen at from_ns
        after_pid  INTEGER NOT NULL,   -- the next switch's prev, first seen at to_ns
        from_ns    INTEGER NOT NULL,
        to_ns      INTEGER NOT NULL
    );
    CREATE INDEX trace_repairs_by_run ON trace_repairs (run_id, cpu, from_ns);
    "#,
    // 9: the process's migrations between CPUs over its work
    // (`se.nr_migrations` of /proc/PID/sched, record::KernelCounts); NULL
    // in older rows, for hogs and for a program's process tree.
    r#"
    ALTER TABLE processes ADD COLUMN nr_migrations INTEGER;
    "#,
    // 10: the noise on a run's CPUs over the run (record::Interference,
    // sys::noise). NULL in older rows and where this machine lacks the
    // source (no cpufreq or thermal_throttle in a virtual machine).
    r#"
    ALTER TABLE runs ADD COLUMN interrupts INTEGER;      -- /proc/interrupts delta, the run's CPUs
    ALTER TABLE runs ADD COLUMN softirqs INTEGER;        -- /proc/softirqs delta, the run's CPUs
    ALTER TABLE runs ADD COLUMN cpu_freq_khz REAL;       -- scaling_cur_freq, mean of release and end
    ALTER TABLE runs ADD COLUMN throttle_count INTEGER;  -- thermal throttling events
    "#,
    // 11: a traced run's slices, wake-ups and repaired gaps as one blob
    // (trace::derived_blob) instead of a row each in trace_slices,
    // trace_wakeups and trace_repairs: inserting those rows was most of
    // what tracing added to a campaign's wall time. NULL in a capture
    // stored before: its rows stay in those tables and are read from there.
    r#"
    ALTER TABLE trace_captures ADD COLUMN derived BLOB;
    "#,
    // 12: who a capture is from: 'kernel' (a traced run's events) or
    // 'model' (a simulated run's predicted timeline, sim::timeline: slices
    // with no events, kept in the derivation blob of migration 11, where a
    // model's slice may end 'throttled'). Older captures are all the
    // kernel's.
    r#"
    ALTER TABLE trace_captures ADD COLUMN source TEXT NOT NULL DEFAULT 'kernel';
    "#,
    // 13: a command tree's switches, page faults and peak memory are
    // empty (NULL) where the kernel could not give them (no taskstats exit
    // records, no memory group), never 0; the run's
    // `extra.command[].missing` says why. SQLite cannot drop NOT NULL in
    // place, so `processes` is rebuilt (foreign keys off, see
    // `Store::migrate`): same columns in the same order, same primary key
    // and foreign key, every row with its rowid. The table has no index
    // or trigger of its own beyond its primary key's.
    r#"
    CREATE TABLE processes_new (
        run_id        INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        process_index INTEGER NOT NULL,
        role          TEXT NOT NULL DEFAULT 'worker',  -- 'worker', or 'hog' (an RT CPU hog beside them)
        pid           INTEGER NOT NULL,
        policy        TEXT NOT NULL,
        nice          INTEGER,
        rt_priority   INTEGER,
        dl_runtime_ns INTEGER,
        dl_deadline_ns INTEGER,
        dl_period_ns  INTEGER,
        start_ns      INTEGER,
        end_ns        INTEGER,
        wall_ns       INTEGER NOT NULL,
        utime_us      INTEGER NOT NULL,
        stime_us      INTEGER NOT NULL,
        nvcsw         INTEGER,                         -- NULL: not given by this kernel (a command tree)
        nivcsw        INTEGER,
        minflt        INTEGER,
        majflt        INTEGER,
        maxrss_kb     INTEGER,
        run_ns        INTEGER,
        wait_ns       INTEGER,
        timeslices    INTEGER,
        work          INTEGER,
        work_unit     TEXT NOT NULL,
        figures_json  TEXT NOT NULL,
        exit          TEXT NOT NULL,
        ok            INTEGER NOT NULL,
        stderr_tail   TEXT NOT NULL DEFAULT '',
        weight        INTEGER,
        slice_ns      INTEGER,
        nr_migrations INTEGER,
        PRIMARY KEY (run_id, process_index)
    );
    INSERT INTO processes_new (rowid, run_id, process_index, role, pid, policy, nice, rt_priority, dl_runtime_ns,
                               dl_deadline_ns, dl_period_ns, start_ns, end_ns, wall_ns, utime_us, stime_us, nvcsw,
                               nivcsw, minflt, majflt, maxrss_kb, run_ns, wait_ns, timeslices, work, work_unit,
                               figures_json, exit, ok, stderr_tail, weight, slice_ns, nr_migrations)
    SELECT rowid, run_id, process_index, role, pid, policy, nice, rt_priority, dl_runtime_ns,
           dl_deadline_ns, dl_period_ns, start_ns, end_ns, wall_ns, utime_us, stime_us, nvcsw,
           nivcsw, minflt, majflt, maxrss_kb, run_ns, wait_ns, timeslices, work, work_unit,
           figures_json, exit, ok, stderr_tail, weight, slice_ns, nr_migrations
    FROM processes;
    DROP TABLE processes;
    ALTER TABLE processes_new RENAME TO processes;
    "#,
    // 14: the machine level a run ran on (`matrix.machine`: "host" or a
    // guest schedlab booted); NULL when the spec does not sweep it.
    r#"
    ALTER TABLE runs ADD COLUMN machine TEXT;
    "#,
    // 15: placement fields of each process over its work (fields::FIELDS,
    // trace::placement): the distinct CPUs its tasks ran on, and its
    // migrations between CPUs of different last-level caches and NUMA
    // nodes. NULL in older rows and in runs neither traced nor simulated.
    r#"
    ALTER TABLE processes ADD COLUMN cpus_used INTEGER;
    ALTER TABLE processes ADD COLUMN llc_migrations INTEGER;
    ALTER TABLE processes ADD COLUMN node_migrations INTEGER;
    "#,
    // 16: block I/O of each process over its work (fields::FIELDS): its
    // filesystem input and output operations in 512-byte blocks (rusage
    // `ru_inblock`/`ru_oublock`; a program's tree: its tasks' taskstats
    // storage bytes). NULL in older rows, in simulated runs and on a
    // kernel without per-task I/O accounting.
    r#"
    ALTER TABLE processes ADD COLUMN inblock INTEGER;
    ALTER TABLE processes ADD COLUMN oublock INTEGER;
    "#,
];

#[cfg(test)]
mod tests {
    #[test]
    fn every_migration_applies_in_order() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        for m in super::MIGRATIONS {
            conn.execute_batch(m).unwrap();
        }
    }

    /// Migration 9 adds `processes.nr_migrations`, empty in rows stored
    /// before it.
    #[test]
    fn migration_9_adds_nr_migrations_empty_in_older_rows() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        // A process row without its run.
        conn.execute_batch("PRAGMA foreign_keys = OFF").unwrap();
        for m in &super::MIGRATIONS[..8] {
            conn.execute_batch(m).unwrap();
        }
        let has = |conn: &rusqlite::Connection| -> bool {
            conn.prepare(
                "SELECT 1 FROM pragma_table_info('processes') WHERE name = 'nr_migrations'",
            )
            .unwrap()
            .exists([])
            .unwrap()
        };
        assert!(!has(&conn));
        conn.execute_batch(
            "INSERT INTO processes (run_id, process_index, pid, policy, wall_ns, utime_us, stime_us, nvcsw,
                 nivcsw, minflt, majflt, maxrss_kb, work_unit, figures_json, exit, ok)
             VALUES (1, 0, 1, 'other', 1, 0, 0, 0, 0, 0, 0, 0, '', '{}', '', 1)",
        )
        .unwrap();
        conn.execute_batch(super::MIGRATIONS[8]).unwrap();
        assert!(has(&conn));
        let v: Option<i64> = conn
            .query_row("SELECT nr_migrations FROM processes", [], |r| r.get(0))
            .unwrap();
        assert_eq!(v, None);
    }

    /// Migration 10 adds the runs' noise columns, empty in rows stored
    /// before it.
    #[test]
    fn migration_10_adds_noise_columns_empty_in_older_rows() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        conn.execute_batch("PRAGMA foreign_keys = OFF").unwrap();
        for m in &super::MIGRATIONS[..9] {
            conn.execute_batch(m).unwrap();
        }
        let cols = |conn: &rusqlite::Connection| -> i64 {
            conn.query_row(
                "SELECT count(*) FROM pragma_table_info('runs')
                 WHERE name IN ('interrupts', 'softirqs', 'cpu_freq_khz', 'throttle_count')",
                [],
                |r| r.get(0),
            )
            .unwrap()
        };
        assert_eq!(cols(&conn), 0);
        conn.execute_batch(
            "INSERT INTO runs (campaign_id, run_key, seq, policy, workload, workload_kind, processes,
                 priority_mode, cpus, cpu_list, rep, status, reason, started_unix_ms, environment_id, resolved_json)
             VALUES (1, 'k', 0, 'other', 'w', 'cpu', 1, 'equal', 'all', '0', 0, 'ok', '', 0, 1, '{}')",
        )
        .unwrap();
        conn.execute_batch(super::MIGRATIONS[9]).unwrap();
        assert_eq!(cols(&conn), 4);
        let v: (Option<i64>, Option<i64>, Option<f64>, Option<i64>) = conn
            .query_row(
                "SELECT interrupts, softirqs, cpu_freq_khz, throttle_count FROM runs",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )
            .unwrap();
        assert_eq!(v, (None, None, None, None));
    }

    /// Migration 11 adds `trace_captures.derived`, empty in captures
    /// stored before it, whose slice rows stay where they were.
    #[test]
    fn migration_11_adds_the_derivation_blob_empty_in_older_captures() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        conn.execute_batch("PRAGMA foreign_keys = OFF").unwrap();
        for m in &super::MIGRATIONS[..10] {
            conn.execute_batch(m).unwrap();
        }
        let has = |conn: &rusqlite::Connection| -> bool {
            conn.prepare("SELECT 1 FROM pragma_table_info('trace_captures') WHERE name = 'derived'")
                .unwrap()
                .exists([])
                .unwrap()
        };
        assert!(!has(&conn));
        conn.execute_batch(
            "INSERT INTO trace_captures (run_id, start_ns, end_ns, cpus, lost_events, mismatched_switches,
                 unusable, event_count, events)
             VALUES (1, 0, 10, '[0]', 0, 0, 0, 0, x'01');
             INSERT INTO trace_slices (run_id, pid, cpu, start_ns, end_ns, end_reason, start_clipped)
             VALUES (1, 7, 0, 1, 2, 'blocked', 0);",
        )
        .unwrap();
        conn.execute_batch(super::MIGRATIONS[10]).unwrap();
        assert!(has(&conn));
        let v: Option<Vec<u8>> = conn
            .query_row("SELECT derived FROM trace_captures", [], |r| r.get(0))
            .unwrap();
        assert_eq!(v, None);
        let n: i64 = conn
            .query_row("SELECT count(*) FROM trace_slices", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 1);
    }

    /// Migration 12 adds `trace_captures.source`, 'kernel' in captures
    /// stored before it.
    #[test]
    fn migration_12_marks_older_captures_as_the_kernel_s() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        conn.execute_batch("PRAGMA foreign_keys = OFF").unwrap();
        let at = super::MIGRATIONS
            .iter()
            .position(|m| m.contains("ADD COLUMN source"))
            .unwrap();
        assert_eq!(at, 11);
        for m in &super::MIGRATIONS[..at] {
            conn.execute_batch(m).unwrap();
        }
        conn.execute_batch(
            "INSERT INTO trace_captures (run_id, start_ns, end_ns, cpus, lost_events, mismatched_switches,
                 unusable, event_count, events)
             VALUES (1, 0, 1, '[0]', 0, 0, 0, 0, x'')",
        )
        .unwrap();
        conn.execute_batch(super::MIGRATIONS[at]).unwrap();
        let v: String = conn
            .query_row("SELECT source FROM trace_captures", [], |r| r.get(0))
            .unwrap();
        assert_eq!(v, "kernel");
    }

    /// The migration that lets a process's switches, faults and peak
    /// memory be empty rebuilds `processes`: on a database of the schema
    /// before it, with rows in it, every row survives with its rowid and
    /// values, the primary key's index, the foreign key and its cascade
    /// stay, and the five columns then take NULL (the others stay NOT
    /// NULL).
    #[test]
    fn migration_nullable_usage_keeps_every_process_row_and_index() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        conn.execute_batch("PRAGMA foreign_keys = OFF").unwrap();
        let at = super::MIGRATIONS
            .iter()
            .position(|m| m.contains("CREATE TABLE processes_new"))
            .unwrap();
        for m in &super::MIGRATIONS[..at] {
            conn.execute_batch(m).unwrap();
        }
        conn.execute_batch(
            "INSERT INTO campaigns (id, name, identity, seed, scale, planned_runs, spec_json, spec_toml,
                 created_unix_ms, schedlab_version, uuid)
             VALUES (1, 'c', 'x', 1, 1.0, 2, '{}', '', 0, 'v', 'u');
             INSERT INTO environments (id, fingerprint, kernel_release, cpu_model, cpus_online, preempt_model,
                 cgroup_version, virtualization, schedlab_version, json)
             VALUES (1, 'f', 'k', 'm', 2, 'p', 'v1', 'none', 'v', '{}');
             INSERT INTO runs (id, campaign_id, run_key, seq, policy, workload, workload_kind, processes,
                 priority_mode, cpus, cpu_list, rep, status, reason, started_unix_ms, environment_id, resolved_json)
             VALUES (1, 1, 'a', 0, 'other', 'w', 'cpu', 2, 'equal', 'all', '0', 0, 'ok', '', 0, 1, '{}'),
                    (2, 1, 'b', 1, 'other', 'w', 'cpu', 1, 'equal', 'all', '0', 1, 'ok', '', 0, 1, '{}');
             INSERT INTO processes (rowid, run_id, process_index, role, pid, policy, nice, wall_ns, utime_us,
                 stime_us, nvcsw, nivcsw, minflt, majflt, maxrss_kb, run_ns, work_unit, figures_json, exit, ok,
                 weight, slice_ns, nr_migrations)
             VALUES (7, 1, 0, 'worker', 100, 'other', 0, 5, 4, 3, 2, 1, 9, 8, 700, 11, 'it', '{\"a\":1}',
                     'exit code 0', 1, 3, 2800000, 6),
                    (9, 1, 1, 'hog', 101, 'fifo', NULL, 6, 5, 4, 3, 2, 10, 0, 800, NULL, 'it', '{}',
                     'exit code 0', 1, NULL, NULL, NULL),
                    (12, 2, 0, 'worker', 102, 'other', 5, 7, 6, 5, 4, 3, 11, 1, 900, 13, 'it', '{}',
                     'killed by signal 9 (SIGKILL)', 0, NULL, NULL, 0);",
        )
        .unwrap();
        let rows = |conn: &rusqlite::Connection| -> Vec<Vec<rusqlite::types::Value>> {
            let mut stmt = conn
                .prepare("SELECT rowid, * FROM processes ORDER BY rowid")
                .unwrap();
            let n = stmt.column_count();
            stmt.query_map([], |r| (0..n).map(|i| r.get(i)).collect())
                .unwrap()
                .collect::<rusqlite::Result<_>>()
                .unwrap()
        };
        let schema = |conn: &rusqlite::Connection, sql: &str| -> Vec<String> {
            let mut stmt = conn.prepare(sql).unwrap();
            let n = stmt.column_count();
            stmt.query_map([], |r| {
                Ok((0..n)
                    .map(|i| format!("{:?}", r.get::<_, rusqlite::types::Value>(i).unwrap()))
                    .collect::<Vec<_>>()
                    .join("|"))
            })
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap()
        };
        const INDEXES: &str = "SELECT name, \"unique\", origin, partial FROM pragma_index_list('processes') \
                               ORDER BY name";
        const KEYS: &str = "SELECT \"table\", \"from\", \"to\", on_delete FROM pragma_foreign_key_list('processes')";
        const OTHERS: &str = "SELECT type, name FROM sqlite_master WHERE tbl_name = 'processes' \
                              AND type IN ('trigger', 'view') ORDER BY name";
        const COLUMNS: &str =
            "SELECT name, type, pk FROM pragma_table_info('processes') ORDER BY cid";
        let before = (
            rows(&conn),
            schema(&conn, INDEXES),
            schema(&conn, KEYS),
            schema(&conn, OTHERS),
            schema(&conn, COLUMNS),
        );
        assert_eq!(before.0.len(), 3);
        assert_eq!(before.1.len(), 1, "the primary key's index: {:?}", before.1);
        assert_eq!(before.2.len(), 1);
        conn.execute_batch(super::MIGRATIONS[at]).unwrap();
        let after = (
            rows(&conn),
            schema(&conn, INDEXES),
            schema(&conn, KEYS),
            schema(&conn, OTHERS),
            schema(&conn, COLUMNS),
        );
        assert_eq!(after, before);
        let nullable: Vec<String> = conn
            .prepare(
                "SELECT name FROM pragma_table_info('processes') WHERE \"notnull\" = 0 AND name IN \
                 ('nvcsw', 'nivcsw', 'minflt', 'majflt', 'maxrss_kb', 'wall_ns', 'utime_us', 'stime_us') \
                 ORDER BY cid",
            )
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        assert_eq!(
            nullable,
            ["nvcsw", "nivcsw", "minflt", "majflt", "maxrss_kb"]
        );
        conn.execute_batch(
            "INSERT INTO processes (run_id, process_index, pid, policy, wall_ns, utime_us, stime_us, nvcsw,
                 nivcsw, minflt, majflt, maxrss_kb, work_unit, figures_json, exit, ok)
             VALUES (2, 1, 103, 'other', 1, 0, 0, NULL, NULL, NULL, NULL, NULL, '', '{}', '', 1)",
        )
        .unwrap();
        let empty: (Option<i64>, Option<i64>) = conn
            .query_row(
                "SELECT nvcsw, maxrss_kb FROM processes WHERE pid = 103",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!(empty, (None, None));
        assert!(
            conn.execute_batch(
                "INSERT INTO processes (run_id, process_index, pid, policy, wall_ns, utime_us, stime_us,
                     work_unit, figures_json, exit, ok)
                 VALUES (2, 2, 104, 'other', NULL, 0, 0, '', '{}', '', 1)",
            )
            .is_err(),
            "wall_ns stays NOT NULL"
        );
        conn.execute_batch("PRAGMA foreign_keys = ON; DELETE FROM runs WHERE id = 1")
            .unwrap();
        let left: i64 = conn
            .query_row("SELECT count(*) FROM processes", [], |r| r.get(0))
            .unwrap();
        assert_eq!(left, 2, "deleting a run still deletes its processes");
        let check: String = conn
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(check, "ok");
    }
}
