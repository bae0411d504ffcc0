//! End-to-end tests of the workloads whose processes talk to each other
//! (pingpong pairs, messaging groups): real workers, the channels schedlab
//! wires between them, and what the export shows of each end.

use std::path::Path;

use serde_json::Value;

mod common;
use common::{schedlab, text};

/// Run `spec` (a campaign body) in `dir` and return the exported rows,
/// ordered by workload, cpus and process index.
fn run_and_export(dir: &Path, spec: &str) -> Vec<Value> {
    std::fs::write(dir.join("s.toml"), spec).unwrap();
    let o = schedlab(&["run", "s.toml", "--db", "t.db"], dir);
    assert!(o.status.success(), "{}", text(&o));
    let o = schedlab(&["export", "--db", "t.db", "--format", "json"], dir);
    assert!(o.status.success(), "{}", text(&o));
    let mut rows: Vec<Value> = serde_json::from_slice(&o.stdout).unwrap();
    rows.sort_by_key(|r| {
        (
            r["workload"].as_str().unwrap().to_string(),
            r["cpus"].as_str().unwrap().to_string(),
            r["process_index"].as_i64().unwrap(),
        )
    });
    rows
}

fn num(row: &Value, col: &str) -> f64 {
    row[col]
        .as_f64()
        .unwrap_or_else(|| panic!("{col} is not a number in {row}"))
}

fn header(name: &str, workloads: &str, processes: u32, cpus: &str) -> String {
    format!(
        r#"
name = "{name}"
repetitions = 1
cooldown_s = 0
timeout_s = 60
[matrix]
policy = ["other"]
workload = [{workloads}]
processes = [{processes}]
cpus = [{cpus}]
"#
    )
}

/// Both ends of every pair report the round trips, a histogram of about
/// as many round trips, and perf's figure.
fn check_pairs(rows: &[Value], round_trips: u64) {
    for r in rows {
        assert_eq!(r["status"], "ok", "{r}");
        let index = r["process_index"].as_i64().unwrap();
        assert_eq!(num(r, "work"), round_trips as f64, "{r}");
        assert_eq!(num(r, "fig_round_trips"), round_trips as f64, "{r}");
        assert_eq!(r["work_unit"], "round_trips");
        // The initiator times every round trip, the echo all but its first.
        let want = if index % 2 == 0 {
            round_trips
        } else {
            round_trips - 1
        };
        assert_eq!(num(r, "lat_count"), want as f64, "{r}");
        let p50 = num(r, "lat_p50_us");
        assert!(p50 > 0.0 && p50 <= num(r, "lat_max_us"), "{r}");
        let per_op = num(r, "fig_usecs_per_op");
        assert!(per_op > 0.0, "{r}");
        // usecs_per_op is elapsed / round trips, and the mean round trip
        // is at least about its median.
        assert!(per_op > p50 * 0.5, "{r}");
        assert!(num(r, "fig_round_trips_per_s") > 0.0, "{r}");
    }
}

#[test]
fn pingpong_pairs_pinned_and_unpinned_report_both_ends() {
    let dir = tempfile::tempdir().unwrap();
    let spec = header("pp", "\"pingpong\"", 2, "\"0\", \"all\"")
        + "[workloads.pingpong]\nround_trips = 2000\n";
    let rows = run_and_export(dir.path(), &spec);
    assert_eq!(rows.len(), 4, "two runs of one pair");
    check_pairs(&rows, 2000);
}

#[test]
fn pingpong_over_eventfds_and_several_pairs() {
    let dir = tempfile::tempdir().unwrap();
    let spec = header("pe", "\"pe\"", 4, "\"all\"")
        + "[workloads.pe]\nkind = \"pingpong\"\ntransport = \"eventfd\"\nround_trips = 2000\n";
    let rows = run_and_export(dir.path(), &spec);
    assert_eq!(rows.len(), 4, "one run of two pairs");
    check_pairs(&rows, 2000);
}

#[test]
fn pingpong_for_a_duration_stops_both_ends_together() {
    let dir = tempfile::tempdir().unwrap();
    let spec =
        header("pd", "\"pingpong\"", 2, "\"0\"") + "[workloads.pingpong]\nduration_s = 0.3\n";
    let rows = run_and_export(dir.path(), &spec);
    let (a, b) = (&rows[0], &rows[1]);
    assert!(num(a, "work") > 0.0);
    assert_eq!(num(a, "work"), num(b, "work"), "{a}\n{b}");
    assert!(
        num(a, "wall_ns") >= 0.29e9 && num(b, "wall_ns") < 5e9,
        "{a}"
    );
}

#[test]
fn messaging_groups_deliver_every_message() {
    let dir = tempfile::tempdir().unwrap();
    // One hackbench group of 2 receivers then 2 senders over sockets; two
    // groups of 2 receivers then 3 senders over pipes.
    let spec = header("m", "\"ms\", \"mp\"", 10, "\"all\"")
        + r#"
[workloads.ms]
kind = "messaging"
senders = 2
receivers = 2
loops = 50
[workloads.mp]
kind = "messaging"
senders = 3
receivers = 2
loops = 50
message_bytes = 4096
transport = "pipe"
"#;
    // 10 processes are two groups of 5 but not whole groups of 4: refused.
    std::fs::write(dir.path().join("s.toml"), &spec).unwrap();
    let o = schedlab(&["run", "s.toml", "--db", "t.db"], dir.path());
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let msg = text(&o);
    assert!(msg.contains("matrix.processes"), "{msg}");
    assert!(msg.contains("multiple of 4"), "{msg}");

    let spec = spec.replace("processes = [10]", "processes = [20]");
    let rows = run_and_export(dir.path(), &spec);
    assert_eq!(rows.len(), 40, "two runs of 20 processes");
    for r in &rows {
        assert_eq!(r["status"], "ok", "{r}");
        assert_eq!(r["work_unit"], "messages");
        let i = r["process_index"].as_i64().unwrap();
        let want = if r["workload"] == "ms" {
            // Receivers get 2 senders × 50, senders send 50 × 2 receivers.
            100.0
        } else if i % 5 < 2 {
            // Receivers get 3 senders × 50 loops.
            150.0
        } else {
            // Senders send 50 loops × 2 receivers.
            100.0
        };
        assert_eq!(num(r, "work"), want, "{r}");
        assert_eq!(num(r, "fig_messages"), want, "{r}");
        assert!(num(r, "fig_messages_per_s") > 0.0, "{r}");
        assert!(r["lat_count"].is_null(), "{r}");
    }
}

#[test]
fn odd_pairs_and_durations_of_messaging_are_refused_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    for (spec, key) in [
        (
            header("odd", "\"pingpong\"", 3, "\"all\""),
            "matrix.processes",
        ),
        (
            header("dur", "\"messaging\"", 40, "\"all\"")
                + "[workloads.messaging]\nduration_s = 2\n",
            "workloads.messaging.duration_s",
        ),
    ] {
        std::fs::write(dir.path().join("s.toml"), &spec).unwrap();
        let o = schedlab(&["run", "s.toml", "--db", "t.db"], dir.path());
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        assert!(text(&o).contains(key), "{key}: {}", text(&o));
    }
    assert!(!dir.path().join("t.db").exists());
}
