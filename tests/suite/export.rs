//! Tests of `schedlab export` on databases written through the library (no
//! worker processes): every stored per-process column reaches the export,
//! per-process settings and workload figures are columns, and a database
//! written before a column existed still exports, with empty cells.

use std::path::Path;
use std::process::Command;

use schedlab::plan::Run;
use schedlab::policy::{Policy, ProcSched};
use schedlab::record::{ProcessRecord, RunRecord};
use schedlab::store::Store;
use schedlab::testing::synth;

/// `schedlab export --db DB --format FORMAT`: its standard output.
fn export(db: &Path, format: &str) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_schedlab"))
        .args(["export", "--db"])
        .arg(db)
        .args(["--format", format])
        .env_remove("SCHEDLAB_DB")
        .output()
        .expect("run schedlab export");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

/// A CSV export as its header and rows of cells (no quoted commas here).
fn csv(text: &str) -> (Vec<String>, Vec<Vec<String>>) {
    let mut lines = text.lines();
    let header = lines.next().unwrap().split(',').map(String::from).collect();
    let rows = lines
        .map(|l| l.split(',').map(String::from).collect())
        .collect();
    (header, rows)
}

fn cell<'a>(header: &[String], row: &'a [String], name: &str) -> &'a str {
    let i = header
        .iter()
        .position(|h| h == name)
        .unwrap_or_else(|| panic!("no column {name} in {header:?}"));
    &row[i]
}

/// Seed 002 in miniature: weights 1, 2, 4 under WRR and DEADLINE, hash
/// workloads with their figures; one process of one run lacks a figure.
fn weights_campaign(store: &mut Store) -> i64 {
    let toml = r#"
name = "weights"
repetitions = 1
[matrix]
policy = ["wrr", "deadline"]
workload = ["hash"]
processes = [3]
priorities = ["w"]
cpus = ["0"]
[priorities.w]
mode = "weights"
weight = [1, 2, 4]
[workloads.hash]
hashes = 1000
[deadline]
runtime_us = 2000
deadline_us = 10000
period_us = 10000
"#;
    let spec = schedlab::spec::load(toml, "synthetic", &[]).unwrap();
    let runs = schedlab::plan::expand(&spec, 7);
    let c = store
        .create_campaign(&spec, toml, &[], 7, runs.len())
        .unwrap();
    let env = synth::synthetic_env(2);
    for run in &runs {
        store.insert_run(c.id, &record(run, &env)).unwrap();
    }
    c.id
}

fn record(run: &Run, env: &schedlab::sys::envinfo::EnvSnapshot) -> RunRecord {
    let procs: Vec<ProcessRecord> = (0..3u32)
        .map(|i| {
            let weight = [1, 2, 4][i as usize];
            let sched = match run.policy {
                Policy::Deadline => ProcSched {
                    policy: Policy::Deadline,
                    nice: None,
                    rt_priority: None,
                    dl_runtime_ns: Some(2_000_000 * weight as u64),
                    dl_deadline_ns: Some(10_000_000),
                    dl_period_ns: Some(10_000_000),
                    weight: Some(weight),
                    slice_ns: None,
                },
                p => ProcSched {
                    policy: p,
                    nice: None,
                    rt_priority: None,
                    dl_runtime_ns: None,
                    dl_deadline_ns: None,
                    dl_period_ns: None,
                    weight: Some(weight),
                    slice_ns: None,
                },
            };
            let mut p = synth::synthetic_process(i, sched, 1_000_000_000, 300_000);
            p.work = Some(1000);
            p.work_unit = "hashes".into();
            p.figures
                .insert("hash_per_s".into(), 1000.0 * f64::from(weight));
            if i == 0 {
                p.figures.insert("digest_fold".into(), 42.0);
            }
            p
        })
        .collect();
    synth::synthetic_record(run, env, vec![0], 1_700_000_000_000, Some(0.5), procs)
}

/// Export column(s) a `processes` column becomes (README, "Using the
/// data"): the same name unless listed here.
fn exported_as(column: &str) -> &str {
    match column {
        "run_id" => "run",
        "policy" => "process_policy",
        "figures_json" => "fig_",
        c => c,
    }
}

/// Export column a `runs` column becomes: the same name unless listed
/// here; None for the one left out (the plan entry as JSON, whose fields
/// are the other columns).
fn run_exported_as(column: &str) -> Option<&str> {
    match column {
        "id" => Some("run"),
        "campaign_id" => Some("campaign"),
        "resolved_json" => None,
        c => Some(c),
    }
}

/// The columns of a table, from `PRAGMA table_info`.
fn table_columns(db: &Path, table: &str) -> Vec<String> {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.prepare("SELECT name FROM pragma_table_info(?1)")
        .unwrap()
        .query_map([table], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap()
}

#[test]
fn every_processes_column_reaches_the_export() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    let mut store = Store::open(&db).unwrap();
    weights_campaign(&mut store);
    drop(store);

    let (header, rows) = csv(&export(&db, "csv"));
    let columns = table_columns(&db, "processes");
    assert!(columns.len() > 20, "{columns:?}");
    let missing: Vec<&String> = columns
        .iter()
        .filter(|c| {
            let want = exported_as(c);
            !header
                .iter()
                .any(|h| h == want || (want == "fig_" && h.starts_with("fig_")))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "processes columns missing from the export: {missing:?}\nheader: {header:?}"
    );
    let columns = table_columns(&db, "runs");
    let missing: Vec<&String> = columns
        .iter()
        .filter(|c| run_exported_as(c).is_some_and(|want| !header.iter().any(|h| h == want)))
        .collect();
    assert!(
        missing.is_empty(),
        "runs columns missing from the export: {missing:?}\nheader: {header:?}"
    );

    // The settings and figures of each process, as cells.
    assert_eq!(rows.len(), 6, "two runs × three processes");
    for row in &rows {
        let weight: u32 = cell(&header, row, "weight").parse().unwrap();
        let index: usize = cell(&header, row, "process_index").parse().unwrap();
        assert_eq!(weight, [1, 2, 4][index]);
        let figure: f64 = cell(&header, row, "fig_hash_per_s").parse().unwrap();
        assert_eq!(figure, 1000.0 * f64::from(weight));
        // A figure only the first process has: empty elsewhere.
        let fold = cell(&header, row, "fig_digest_fold");
        assert_eq!(fold.is_empty(), index != 0, "{fold:?}");
        match cell(&header, row, "policy") {
            "deadline" => {
                let runtime: u64 = cell(&header, row, "dl_runtime_ns").parse().unwrap();
                assert_eq!(runtime, 2_000_000 * u64::from(weight));
                assert_eq!(cell(&header, row, "dl_period_ns"), "10000000");
            }
            "wrr" => assert_eq!(cell(&header, row, "dl_runtime_ns"), ""),
            p => panic!("unexpected policy {p}"),
        }
        assert_eq!(cell(&header, row, "load_avg_1m"), "0.5");
    }

    // JSON: the same columns, with nulls where CSV has empty cells.
    let json: serde_json::Value = serde_json::from_str(&export(&db, "json")).unwrap();
    let objects = json.as_array().unwrap();
    assert_eq!(objects.len(), 6);
    for o in objects {
        let keys: Vec<&String> = o.as_object().unwrap().keys().collect();
        for h in &header {
            assert!(keys.contains(&h), "JSON lacks {h}");
        }
        let index = o["process_index"].as_i64().unwrap() as usize;
        assert_eq!(o["weight"].as_i64(), Some([1, 2, 4][index]));
        assert_eq!(o["fig_digest_fold"].is_null(), index != 0);
    }
}

/// A process row as schema version 1 stored it (no weight column).
const V1_PROCESS: &str = "INSERT INTO processes (run_id, process_index, role, pid, policy, nice, rt_priority,
        start_ns, end_ns, wall_ns, utime_us, stime_us, nvcsw, nivcsw, minflt, majflt, maxrss_kb, run_ns,
        wait_ns, timeslices, work, work_unit, figures_json, exit, ok)
    VALUES (1, 0, 'worker', 100, 'wrr', NULL, NULL, 0, 5, 5, 3, 0, 1, 0, 0, 0, 10, 3000, 1, 1, 7,
        'hashes', '{\"hash_per_s\": 7.5}', 'exit code 0', 1)";

#[test]
fn a_database_of_schema_version_1_opens_and_exports_with_empty_cells() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("old.db");
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute_batch(schedlab::store::MIGRATIONS[0]).unwrap();
        conn.execute_batch(
            "PRAGMA user_version = 1;
             INSERT INTO campaigns (id, name, identity, seed, scale, planned_runs, spec_json, spec_toml,
                 created_unix_ms, schedlab_version)
             VALUES (1, 'old', 'x', 1, 1.0, 1, '{}', '', 0, '0.1.0');
             INSERT INTO environments (id, fingerprint, kernel_release, cpu_model, cpus_online, preempt_model,
                 cgroup_version, virtualization, schedlab_version, json)
             VALUES (1, 'f', '6.1', 'cpu', 2, 'none', 'v2', 'none', '0.1.0', '{}');
             INSERT INTO runs (id, campaign_id, run_key, seq, policy, workload, workload_kind, processes,
                 priority_mode, cpus, cpu_list, rep, status, started_unix_ms, environment_id, resolved_json)
             VALUES (1, 1, 'k', 0, 'wrr', 'hash', 'hash', 1, 'w', '0', '0', 1, 'ok', 0, 1, '{}');",
        )
        .unwrap();
        conn.execute_batch(V1_PROCESS).unwrap();
    }
    let (header, rows) = csv(&export(&db, "csv"));
    assert_eq!(rows.len(), 1);
    let row = &rows[0];
    assert_eq!(cell(&header, row, "weight"), "");
    assert_eq!(cell(&header, row, "work"), "7");
    assert_eq!(cell(&header, row, "fig_hash_per_s"), "7.5");
}
