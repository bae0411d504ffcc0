//! A traced run whose trace is unusable because the kernel never emitted
//! some of its switches (no event lost) says so beside every use of it: the
//! report's timeline and CPU table (`--timeline-run`), and `trace export`'s
//! warning. A run whose missing switches were repaired within 1 % says what
//! the repairs cost. Synthetic traces stored in a synthetic campaign; the
//! report and the export are the real binary.

use std::process::Command;

use schedlab::store::Store;
use schedlab::testing::synth;
use schedlab::trace::{Capture, Event, EventKind, Task};

fn sw(ts_ns: u64, cpu: u32, prev: i32, prev_state: u64, next: i32) -> Event {
    Event {
        ts_ns,
        cpu,
        common_pid: prev,
        kind: EventKind::Switch {
            prev_pid: prev,
            prev_prio: 120,
            prev_state,
            next_pid: next,
            next_prio: 120,
        },
    }
}

fn waking(ts_ns: u64, cpu: u32, waker: i32, pid: i32) -> Event {
    Event {
        ts_ns,
        cpu,
        common_pid: waker,
        kind: EventKind::Waking {
            pid,
            prio: 120,
            target_cpu: cpu,
        },
    }
}

const MS: u64 = 1_000_000;
const PREEMPTED: u64 = 0x100;
const SLEEPING: u64 = 0x1;

/// 200 ms of two workers (10 on CPU 0, 11 on CPU 1), each preempted now
/// and then; on CPU 1 a task outside the run (68) gets the CPU at 100 ms
/// and the switch 68 → 11 is never emitted: 11 is next seen at `back_ms`.
fn capture(back_ms: u64) -> Capture {
    let start = 1_000 * MS;
    let mut events = vec![sw(start, 0, 0, 0, 10), sw(start, 1, 0, 0, 11)];
    events.push(sw(start + 100 * MS, 1, 11, PREEMPTED, 68));
    events.push(waking(start + back_ms * MS, 1, 11, 99));
    events.push(sw(start + 150 * MS, 1, 11, PREEMPTED, 0));
    events.push(sw(start + 150 * MS + 10_000, 1, 0, 0, 11));
    events.push(sw(start + 199 * MS, 0, 10, SLEEPING, 0));
    events.push(sw(start + 199 * MS, 1, 11, SLEEPING, 0));
    events.sort_by_key(|e| e.ts_ns);
    Capture {
        events,
        tasks: [10, 11]
            .map(|tid| Task {
                tid,
                tgid: tid,
                comm: format!("w{tid}"),
            })
            .to_vec(),
        cpus: vec![0, 1],
        start_ns: start,
        end_ns: start + 200 * MS,
        release_ns: None,
        lost_events: 0,
    }
}

/// A synthetic campaign whose first ok run's trace is unusable (12 ms
/// unattributed, over 1 % of ~386 ms on CPU) and second's repaired (1 ms):
/// (dir, db, [unusable run, repaired run]).
fn db() -> (tempfile::TempDir, std::path::PathBuf, [i64; 2]) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("traced.db");
    let mut store = Store::open(&db).unwrap();
    synth::create(&mut store, &synth::SynthConfig::small()).unwrap();
    let conn = rusqlite::Connection::open(&db).unwrap();
    let ids: Vec<i64> = conn
        .prepare("SELECT id FROM runs WHERE status = 'ok' ORDER BY id LIMIT 2")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    let c = capture(112);
    store
        .save_trace(ids[0], &schedlab::trace::Analysed::new(&c, &[]))
        .unwrap();
    let c = capture(101);
    store
        .save_trace(ids[1], &schedlab::trace::Analysed::new(&c, &[]))
        .unwrap();
    (dir, db, [ids[0], ids[1]])
}

fn schedlab(args: &[&str]) -> (bool, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_schedlab"))
        .args(args)
        .env_remove("SCHEDLAB_DB")
        .output()
        .expect("run schedlab");
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn a_report_of_an_unusable_run_prints_the_caveat_beside_its_timeline_and_cpu_table() {
    let (dir, db, [bad, good]) = db();
    let db_s = db.to_str().unwrap();
    let run = bad.to_string();
    let caveat = format!(
        "Run {bad}'s trace is unusable: 1 sched_switch the kernel never emitted leaves 12.000 ms \
         of CPU time unattributed"
    );
    // Markdown: the CPU table (the timeline is drawn in HTML only), with the
    // caveat right before it.
    let (ok, md, err) = schedlab(&[
        "report",
        "--db",
        db_s,
        "--timeline-run",
        &run,
        "--format",
        "md",
    ]);
    assert!(ok, "{err}");
    let table = md
        .find(&format!("Run {bad}'s CPUs over its whole trace"))
        .expect(&md);
    let note = md
        .find(&caveat)
        .unwrap_or_else(|| panic!("no caveat in:\n{md}"));
    assert!(note < table && md[note..table].lines().count() <= 4, "{md}");
    assert!(md.contains("unattributed µs"), "{md}");
    // The left-out list says exactly why, and no longer blames the buffer.
    assert!(
        md.contains(&format!(
            "Run {bad}: 1 sched_switch the kernel never emitted"
        )),
        "{md}"
    );
    assert!(!md.contains("Give the trace a larger buffer"), "{md}");
    // HTML: the timeline's caption and its note carry it too.
    let html = dir.path().join("r.html");
    let (ok, _, err) = schedlab(&[
        "report",
        "--db",
        db_s,
        "--timeline-run",
        &run,
        "-o",
        html.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    let html = std::fs::read_to_string(&html).unwrap();
    let fig = html
        .find(&format!("trace-timeline-run-{bad}"))
        .expect("the timeline is drawn");
    // (HTML escapes the apostrophe.)
    let escaped = caveat.replace('\'', "&#39;");
    let shown = html[fig..].matches(&escaped).count();
    assert!(
        shown >= 2,
        "the caveat is shown {shown} times after the timeline: note and caption"
    );
    // The repaired run: usable, and it says what the repair cost.
    let (ok, md, err) = schedlab(&[
        "report",
        "--db",
        db_s,
        "--timeline-run",
        &good.to_string(),
        "--format",
        "md",
    ]);
    assert!(ok, "{err}");
    assert!(
        md.contains(&format!(
            "Run {good}'s trace: 1 sched_switch the kernel never emitted (none lost) repaired"
        )),
        "{md}"
    );
}

#[test]
fn trace_export_of_an_unusable_run_warns_with_the_reason() {
    let (dir, db, [bad, _]) = db();
    let out = dir.path().join("bad.json");
    let (ok, _, err) = schedlab(&[
        "trace",
        "export",
        "--db",
        db.to_str().unwrap(),
        "--run",
        &bad.to_string(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    assert!(
        err.contains(&format!(
            "warning: Run {bad}'s trace is unusable: 1 sched_switch the kernel never emitted"
        )) && err.contains("\"switch never emitted\""),
        "{err}"
    );
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(json["otherData"]["repaired_switches"], 1);
}
