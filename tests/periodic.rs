//! End-to-end tests of the latency workloads, `periodic` and `request`:
//! real worker processes under real policies, results read back through
//! `schedlab export`. Real-time work is short, pinned to CPU 0 and under a
//! timeout.

use std::path::Path;

use serde_json::Value;

mod common;
use common::{schedlab, text};

/// The tests here put real-time work on CPU 0: one at a time.
static CPU0: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn cpu0() -> std::sync::MutexGuard<'static, ()> {
    CPU0.lock().unwrap_or_else(|e| e.into_inner())
}

/// Run `spec` in `dir` into t.db and return the exported rows.
fn run_and_export(dir: &Path, spec: &str) -> Vec<Value> {
    std::fs::write(dir.join("s.toml"), spec).unwrap();
    let o = schedlab(&["run", "s.toml", "--db", "t.db"], dir);
    assert!(o.status.success(), "{}", text(&o));
    let o = schedlab(&["export", "--db", "t.db", "--format", "json"], dir);
    assert!(o.status.success(), "{}", text(&o));
    let rows: Value = serde_json::from_slice(&o.stdout).unwrap();
    rows.as_array().unwrap().clone()
}

fn f(row: &Value, col: &str) -> f64 {
    row[col]
        .as_f64()
        .unwrap_or_else(|| panic!("{col} is not a number in {row}"))
}

fn rows_of<'a>(rows: &'a [Value], policy: &str) -> Vec<&'a Value> {
    rows.iter().filter(|r| r["policy"] == policy).collect()
}

#[test]
fn periodic_at_1ms_under_pinned_fifo_wakes_within_the_period() {
    let _cpu0 = cpu0();
    if !common::may_use_rt() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // One second at 1 ms: releases at 1 ms … 999 ms after release. OTHER
    // runs the same for comparison (noise on a shared machine: only its
    // accounting is checked).
    let rows = run_and_export(
        dir.path(),
        r#"
name = "periodic-e2e"
repetitions = 1
order = "sequential"
cooldown_s = 0
timeout_s = 10
[matrix]
policy = ["fifo", "other"]
workload = ["periodic"]
processes = [1]
cpus = ["0"]
[workloads.periodic]
period_us = 1000
run_us = 50
duration_s = 1
"#,
    );
    assert_eq!(rows.len(), 2, "{rows:?}");
    for r in &rows {
        assert_eq!(r["status"], "ok", "{r}");
        assert_eq!(r["work_unit"], "activations");
        let (ran, skipped, misses) = (
            f(r, "fig_activations"),
            f(r, "fig_skipped"),
            f(r, "fig_misses"),
        );
        // Every release of the window ran or was skipped, and each skip
        // is a miss.
        assert_eq!(ran + skipped, 999.0, "{r}");
        assert!(misses >= skipped, "{r}");
        assert_eq!(f(r, "work"), ran);
        // The primary latency is the wake-up histogram, one per activation.
        assert_eq!(f(r, "lat_count"), ran, "{r}");
        assert_eq!(f(r, "lat_p50_us"), f(r, "fig_wakeup_p50_us"));
        assert_eq!(f(r, "lat_p99_us"), f(r, "fig_wakeup_p99_us"));
        assert!(f(r, "lat_p50_us") <= f(r, "lat_p99_us"));
        eprintln!(
            "periodic 1 ms, 50 µs, pinned {}: {ran} activations, {misses} misses, wake-up p50 {} µs \
             p99 {} µs max {} µs, min slack {} µs",
            r["policy"],
            f(r, "lat_p50_us"),
            f(r, "lat_p99_us"),
            f(r, "lat_max_us"),
            f(r, "fig_min_slack_us"),
        );
    }
    let fifo = rows_of(&rows, "fifo")[0];
    let ran = f(fifo, "fig_activations");
    assert!((950.0..=1000.0).contains(&ran), "{fifo}");
    assert!(
        f(fifo, "lat_p99_us") < 1000.0,
        "FIFO p99 wake-up latency is a period or more: {fifo}"
    );
}

#[test]
fn request_groups_record_request_latency_per_worker() {
    let dir = tempfile::tempdir().unwrap();
    let rows = run_and_export(
        dir.path(),
        r#"
name = "request-e2e"
repetitions = 1
cooldown_s = 0
timeout_s = 20
[matrix]
policy = ["other"]
workload = ["request"]
cpus = ["0"]
[workloads.request]
workers = 2
requests = 200
request_us = 50
"#,
    );
    // The process count defaults to one group: a messenger and 2 workers.
    assert_eq!(rows.len(), 3, "{rows:?}");
    let mut rows = rows;
    rows.sort_by_key(|r| r["process_index"].as_i64());
    for r in &rows {
        assert_eq!(r["status"], "ok", "{r}");
        assert_eq!(r["work_unit"], "requests");
        assert!(f(r, "fig_requests_per_s") > 0.0, "{r}");
    }
    let messenger = &rows[0];
    assert_eq!(f(messenger, "fig_requests"), 400.0);
    assert!(messenger["lat_count"].is_null(), "{messenger}");
    for w in &rows[1..] {
        assert_eq!(f(w, "fig_requests"), 200.0);
        assert_eq!(f(w, "work"), 200.0);
        assert_eq!(f(w, "lat_count"), 200.0, "{w}");
        // A request takes at least its 50 µs of CPU.
        assert!(f(w, "lat_p50_us") >= 49.9, "{w}");
        assert!(f(w, "lat_p50_us") <= f(w, "lat_p99_us"));
        eprintln!(
            "request 2 workers, 50 µs, OTHER pinned: process {} request p50 {} µs p99 {} µs, {} requests/s",
            w["process_index"],
            f(w, "lat_p50_us"),
            f(w, "lat_p99_us"),
            f(w, "fig_requests_per_s"),
        );
    }
    // Both histograms of each worker are stored, none of the messenger.
    let conn = rusqlite::Connection::open(dir.path().join("t.db")).unwrap();
    let stored: Vec<(i64, String, i64, bool)> = conn
        .prepare("SELECT process_index, name, count, is_primary FROM latency ORDER BY 1, 2")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    let want: Vec<(i64, String, i64, bool)> = [1, 2]
        .into_iter()
        .flat_map(|p| {
            [
                (p, "request".to_string(), 200, true),
                (p, "wakeup".to_string(), 200, false),
            ]
        })
        .collect();
    assert_eq!(stored, want);
}

#[test]
fn both_workloads_finish_under_wrr() {
    let _cpu0 = cpu0();
    let dir = tempfile::tempdir().unwrap();
    // WRR lets one worker per CPU run at a time: sleeping and blocked
    // workers must not hold their turn for ever.
    let rows = run_and_export(
        dir.path(),
        r#"
name = "latency-wrr"
repetitions = 1
cooldown_s = 0
timeout_s = 15
[matrix]
policy = ["wrr"]
workload = ["periodic", "request"]
processes = [3]
cpus = ["0"]
[workloads.periodic]
period_us = 1000
run_us = 100
activations = 100
[workloads.request]
workers = 2
requests = 50
request_us = 20
"#,
    );
    assert_eq!(rows.len(), 6, "{rows:?}");
    for r in &rows {
        assert_eq!(r["status"], "ok", "{r}");
        let want = match (r["workload"].as_str(), r["process_index"].as_i64()) {
            (Some("periodic"), _) => 100.0,
            (Some("request"), Some(0)) => 100.0,
            _ => 50.0,
        };
        assert_eq!(f(r, "work"), want, "{r}");
    }
}

#[test]
fn invalid_latency_workload_keys_are_named() {
    let dir = tempfile::tempdir().unwrap();
    for (body, key, msg) in [
        (
            "[matrix]\nworkload = [\"periodic\"]\n[workloads.periodic]\nperiod_us = 10\n",
            "workloads.periodic.period_us",
            "between 50 and 10000000",
        ),
        (
            "[matrix]\nworkload = [\"periodic\"]\n[workloads.periodic]\nperiod_us = 100\nrun_us = 100\n",
            "workloads.periodic.run_us",
            "less than period_us",
        ),
        (
            "[matrix]\nworkload = [\"request\"]\n[workloads.request]\nworkers = 0\n",
            "workloads.request.workers",
            "between 1 and 1000",
        ),
        (
            "[matrix]\nworkload = [\"request\"]\nprocesses = [4]\n[workloads.request]\nworkers = 2\n",
            "matrix.processes",
            "multiple of 3",
        ),
    ] {
        std::fs::write(dir.path().join("bad.toml"), body).unwrap();
        let o = schedlab(&["plan", "bad.toml"], dir.path());
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        let t = text(&o);
        assert!(t.contains(key) && t.contains(msg), "{body}: {t}");
    }
}

/// The report's latency section: percentiles of the pooled histograms of a
/// condition equal those recomputed here from the stored histograms, and
/// p99 is compared between the policies.
#[test]
fn the_report_pools_histograms_per_condition() {
    let _cpu = cpu0();
    let dir = tempfile::tempdir().unwrap();
    let rows = run_and_export(
        dir.path(),
        r#"
name = "latency-report"
repetitions = 3
cooldown_s = 0
timeout_s = 20
order = "sequential"
[matrix]
policy = ["other", "batch"]
workload = ["periodic"]
processes = [2]
cpus = ["0"]
[workloads.periodic]
period_us = 2000
run_us = 100
activations = 100
"#,
    );
    assert_eq!(rows.len(), 12, "2 policies × 3 runs × 2 processes");
    let o = schedlab(
        &["report", "--db", "t.db", "--format", "json", "-o", "r.json"],
        dir.path(),
    );
    assert!(o.status.success(), "{}", text(&o));
    let report: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("r.json")).unwrap()).unwrap();
    let lat = &report["latency"];
    let conds = lat["conditions"].as_array().expect("a latency section");
    assert_eq!(conds.len(), 2, "{lat}");
    // Recompute the OTHER condition's p50 from the stored histograms.
    let conn = rusqlite::Connection::open(dir.path().join("t.db")).unwrap();
    let mut stmt = conn
        .prepare(
            "SELECT l.histogram FROM latency l JOIN runs r ON r.id = l.run_id \
             WHERE r.policy = 'other' AND l.is_primary = 1",
        )
        .unwrap();
    let mut pooled = schedlab::workload::latency::Latency::new();
    let mut n = 0;
    for h in stmt.query_map([], |r| r.get::<_, Vec<u8>>(0)).unwrap() {
        pooled.add(&schedlab::workload::latency::Latency::decode(&h.unwrap()).unwrap());
        n += 1;
    }
    assert_eq!(n, 6);
    let other = conds.iter().find(|c| c["policy"] == "other").unwrap();
    assert_eq!(other["events"].as_u64(), Some(600));
    let p50_us = other["p50"]["us"].as_f64().unwrap();
    assert_eq!(p50_us, pooled.quantile_ns(0.5) as f64 / 1e3);
    let (lo, hi) = (
        other["p50"]["ci_us"][0].as_f64().unwrap(),
        other["p50"]["ci_us"][1].as_f64().unwrap(),
    );
    assert!(lo <= p50_us && p50_us <= hi, "{lo} {p50_us} {hi}");
    assert!(other["rq_wait_per_slice_us"].as_f64().is_some());
    assert_eq!(lat["comparisons"].as_array().map(Vec::len), Some(1));
    // The Markdown report shows the section.
    let md = schedlab(&["report", "--db", "t.db", "--format", "md"], dir.path());
    assert!(String::from_utf8_lossy(&md.stdout).contains("## Latency"));
}

/// `cpu_dma_latency_us` holds the idle-state bound while each run goes on,
/// records it with the run, and leaves the machine's bound as it was.
#[test]
fn the_idle_bound_is_held_per_run_and_released() {
    if !common::require(
        std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/cpu_dma_latency")
            .is_ok(),
        "writing /dev/cpu_dma_latency needs root",
    ) {
        return;
    }
    let read_bound = || {
        let b = std::fs::read("/dev/cpu_dma_latency").unwrap();
        i32::from_ne_bytes(b[..4].try_into().unwrap())
    };
    let _cpu = cpu0();
    let before = read_bound();
    let dir = tempfile::tempdir().unwrap();
    let rows = run_and_export(
        dir.path(),
        r#"
name = "idle-bound"
repetitions = 1
cooldown_s = 0
timeout_s = 20
cpu_dma_latency_us = 0
[matrix]
policy = ["other"]
workload = ["periodic"]
processes = [1]
cpus = ["0"]
[workloads.periodic]
period_us = 1000
activations = 200
"#,
    );
    assert_eq!(rows.len(), 1);
    let extra: Value = serde_json::from_str(rows[0]["extra_json"].as_str().unwrap()).unwrap();
    assert_eq!(extra["cpu_dma_latency_us"], 0, "{extra}");
    assert_eq!(read_bound(), before, "the bound was not released");
}
