//! Two schedlabs at once: on one database the second is refused naming the
//! first; on two databases their measured runs take turns on the machine,
//! and two traced campaigns take turns tracing.

mod common;
use common::{bin, text};

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn spec(dir: &Path, name: &str, reps: u32) {
    spec_of(dir, name, reps, 1.0, false);
}

fn spec_of(dir: &Path, name: &str, reps: u32, duration_s: f64, trace: bool) {
    std::fs::write(
        dir.join(format!("{name}.toml")),
        format!(
            r#"
name = "{name}"
repetitions = {reps}
cooldown_s = 0
timeout_s = 30
trace = {trace}
[matrix]
policy = ["other"]
workload = ["spin"]
processes = [2]
cpus = ["0"]
[workloads.spin]
kind = "pi"
duration_s = {duration_s}
"#
        ),
    )
    .unwrap();
}

fn start(dir: &Path, name: &str, db: &str) -> Child {
    Command::new(bin())
        .args(["run", &format!("{name}.toml"), "--db", db])
        .current_dir(dir)
        .env("CI", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Wait until `db` holds a run in progress's campaign (the runner has it).
fn wait_for_db(db: &Path) {
    let t0 = Instant::now();
    while !db.exists() {
        assert!(t0.elapsed() < Duration::from_secs(20), "no database");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
}

/// (start, end) in unix ms of the ok runs of a database.
fn windows(db: &Path) -> Vec<(f64, f64)> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut st = conn
        .prepare("SELECT started_unix_ms, makespan_ns FROM runs WHERE status = 'ok'")
        .unwrap();
    st.query_map([], |r| {
        let s: i64 = r.get(0)?;
        let m: i64 = r.get(1)?;
        Ok((s as f64, s as f64 + m as f64 / 1e6))
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

/// Runs campaign a (into a.db), then b (b.db) once a has its database;
/// both succeed and one of them said every one of `waited`.
fn both_succeed_one_waiting(dir: &Path, waited: &[&str]) {
    let a = start(dir, "a", "a.db");
    wait_for_db(&dir.join("a.db"));
    let b = start(dir, "b", "b.db");
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    assert!(a.status.success(), "{}", text(&a));
    assert!(b.status.success(), "{}", text(&b));
    let said = |o: &std::process::Output| waited.iter().all(|w| text(o).contains(w));
    assert!(
        said(&a) || said(&b),
        "neither said {waited:?}:\n{}\n{}",
        text(&a),
        text(&b)
    );
}

#[test]
fn a_second_run_of_one_database_is_refused_naming_the_first() {
    let dir = tempfile::tempdir().unwrap();
    spec(dir.path(), "a", 2);
    let first = start(dir.path(), "a", "t.db");
    wait_for_db(&dir.path().join("t.db"));
    let second = Command::new(bin())
        .args(["run", "a.toml", "--db", "t.db"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let first_out = first.wait_with_output().unwrap();
    assert!(first_out.status.success(), "{}", text(&first_out));
    assert_eq!(second.status.code(), Some(1), "{}", text(&second));
    let msg = text(&second);
    assert!(
        msg.contains("is being written by pid") && !msg.contains("UNIQUE"),
        "{msg}"
    );
    assert_eq!(windows(&dir.path().join("t.db")).len(), 2);
}

#[test]
fn campaigns_on_two_databases_take_turns_measuring() {
    let dir = tempfile::tempdir().unwrap();
    spec(dir.path(), "a", 2);
    spec(dir.path(), "b", 2);
    // One of them waited for the other: b, or a when b took the machine
    // first (a's database exists before a takes the machine).
    both_succeed_one_waiting(dir.path(), &["waiting for the machine"]);
    let wa = windows(&dir.path().join("a.db"));
    let wb = windows(&dir.path().join("b.db"));
    assert_eq!((wa.len(), wb.len()), (2, 2));
    // Measured windows never overlap (10 ms for the clocks' granularity).
    for &(s1, e1) in &wa {
        for &(s2, e2) in &wb {
            let overlap = e1.min(e2) - s1.max(s2);
            assert!(overlap < 10.0, "a {s1}..{e1} and b {s2}..{e2} overlap");
        }
    }
}

#[test]
fn two_traced_campaigns_take_turns_tracing() {
    let euid = schedlab::sys::proc::euid();
    if !common::require(euid == 0, format!("tracing needs root (euid is {euid})")) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    spec_of(dir.path(), "a", 2, 0.3, true);
    spec_of(dir.path(), "b", 2, 0.3, true);
    // Neither is refused: one schedlab traces at a time, and the other
    // waits for it, saying so.
    both_succeed_one_waiting(dir.path(), &["is tracing right now", "(waiting)"]);
    for db in ["a.db", "b.db"] {
        let conn = rusqlite::Connection::open(dir.path().join(db)).unwrap();
        let traced: i64 = conn
            .query_row("SELECT count(*) FROM trace_captures", [], |r| r.get(0))
            .unwrap();
        assert_eq!(traced, 2, "{db}");
    }
}
