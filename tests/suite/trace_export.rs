//! Tests of the trace exports: the Perfetto file decodes with Perfetto's own
//! schema (the compiled perfetto_trace.proto of the `perfetto` Python
//! package, through tests/py/decode_perfetto.py) with no field the schema
//! does not know, and every captured event comes back on its CPU with its
//! fields; `schedlab trace export` writes it (and the Chrome JSON) from a
//! stored trace and refuses bad input naming the flag or path.

use crate::common;

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use schedlab::trace::{Capture, Event, EventKind, Task, perfetto};

/// Decodes a Perfetto trace with Perfetto's schema: None (after reporting the
/// skip, or failing under CI / SCHEDLAB_REQUIRE_ROOT=1) when python3 or its
/// perfetto package is missing.
fn decode_with_perfetto_schema(trace: &Path) -> Option<Value> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/py/decode_perfetto.py");
    let o = Command::new("python3").arg(&script).arg(trace).output();
    let missing = match &o {
        Err(e) => Some(format!("cannot run python3: {e}")),
        Ok(o) if o.status.code() == Some(3) => {
            Some(String::from_utf8_lossy(&o.stderr).trim().to_string())
        }
        Ok(_) => None,
    };
    if !common::require_tool(
        missing.is_none(),
        format!(
            "needs python3 with the perfetto package (pip install perfetto): {}",
            missing.unwrap_or_default()
        ),
    ) {
        return None;
    }
    let o = o.unwrap();
    assert!(
        o.status.success(),
        "decoding failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    Some(serde_json::from_slice(&o.stdout).expect("the decoder prints JSON"))
}

/// The kernel release written into the synthetic traces.
const KERNEL: &str = "6.18.0-schedlab-test";

fn task(tid: i32, tgid: i32, comm: &str) -> Task {
    Task {
        tid,
        tgid,
        comm: comm.into(),
    }
}

/// A run on two CPUs: a dispatcher (pid 100) waking three workers (two
/// threads of process 101 and process 103), which run, are preempted by each
/// other or by a task outside the run (777), block, migrate and exit. More
/// events than fit in one bundle per CPU.
fn synthetic_capture(lost_events: u64) -> Capture {
    let mut events = Vec::new();
    let mut ts_ns = 1_000_000_000_u64;
    let mut push = |cpu: u32, common_pid: i32, kind: EventKind, events: &mut Vec<Event>| {
        ts_ns += 1_000 + u64::from(cpu) * 7;
        events.push(Event {
            ts_ns,
            cpu,
            common_pid,
            kind,
        });
    };
    let workers = [101, 102, 103];
    // schedlab forks the processes 101 and 103; 101 forks its thread 102.
    for (parent_pid, child_pid) in [(100, 101), (101, 102), (100, 103)] {
        push(
            0,
            parent_pid,
            EventKind::Fork {
                parent_pid,
                child_pid,
            },
            &mut events,
        );
    }
    for (i, &w) in workers.iter().enumerate() {
        let cpu = i as u32 % 2;
        push(
            cpu,
            100,
            EventKind::Wakeup {
                pid: w,
                prio: 120,
                target_cpu: cpu,
                new: true,
            },
            &mut events,
        );
    }
    let mut on = [0_i32, 0];
    for round in 0..700_u32 {
        let cpu = round % 2;
        let w = workers[(round as usize / 2) % 3];
        push(
            cpu,
            100,
            EventKind::Waking {
                pid: w,
                prio: 120,
                target_cpu: cpu,
            },
            &mut events,
        );
        push(
            cpu,
            100,
            EventKind::Wakeup {
                pid: w,
                prio: 120,
                target_cpu: cpu,
                new: false,
            },
            &mut events,
        );
        let prev = on[cpu as usize];
        // Preempted (R+), blocked (S) or yielded (R) in turn.
        let prev_state = [0x100, 0x1, 0][round as usize % 3];
        let next = if round % 5 == 0 { 777 } else { w };
        push(
            cpu,
            prev,
            EventKind::Switch {
                prev_pid: prev,
                prev_prio: if prev == 0 { 120 } else { 98 },
                prev_state,
                next_pid: next,
                next_prio: 98,
            },
            &mut events,
        );
        on[cpu as usize] = next;
        if round % 50 == 0 {
            push(
                cpu,
                w,
                EventKind::Migrate {
                    pid: w,
                    prio: 98,
                    orig_cpu: cpu,
                    dest_cpu: 1 - cpu,
                },
                &mut events,
            );
        }
    }
    for (cpu, &w) in [0_u32, 1].iter().zip(&workers) {
        push(*cpu, w, EventKind::Exit { pid: w, prio: 98 }, &mut events);
    }
    let start_ns = events[0].ts_ns - 500;
    let end_ns = ts_ns + 500;
    Capture {
        events,
        tasks: vec![
            task(100, 100, "schedlab"),
            task(101, 101, "hash-0"),
            task(102, 101, "hash-0-t1"),
            task(103, 103, "hash-1"),
        ],
        cpus: vec![0, 1],
        start_ns,
        end_ns,
        lost_events,
        release_ns: None,
    }
}

/// What Perfetto's schema must show for one event: (cpu, timestamp, pid,
/// event field name, its fields), written from the kernel's event and the
/// naming rule (run tasks by name, the idle task `swapper/CPU`, others `<...>`).
fn expected(c: &Capture, e: &Event) -> Value {
    let comm = |pid: i32, cpu: u32| -> String {
        match c.tasks.iter().find(|t| t.tid == pid) {
            Some(t) => t.comm.clone(),
            None if pid == 0 => format!("swapper/{cpu}"),
            None => "<...>".into(),
        }
    };
    let (name, fields) = match e.kind {
        EventKind::Switch {
            prev_pid,
            prev_prio,
            prev_state,
            next_pid,
            next_prio,
        } => (
            "sched_switch",
            json!({"prev_comm": comm(prev_pid, e.cpu), "prev_pid": prev_pid, "prev_prio": prev_prio,
                   "prev_state": prev_state, "next_comm": comm(next_pid, e.cpu), "next_pid": next_pid,
                   "next_prio": next_prio}),
        ),
        EventKind::Waking {
            pid,
            prio,
            target_cpu,
        } => (
            "sched_waking",
            json!({"comm": comm(pid, 0), "pid": pid, "prio": prio, "success": 1, "target_cpu": target_cpu}),
        ),
        EventKind::Wakeup {
            pid,
            prio,
            target_cpu,
            new,
        } => (
            if new {
                "sched_wakeup_new"
            } else {
                "sched_wakeup"
            },
            json!({"comm": comm(pid, 0), "pid": pid, "prio": prio, "success": 1, "target_cpu": target_cpu}),
        ),
        EventKind::Migrate {
            pid,
            prio,
            orig_cpu,
            dest_cpu,
        } => (
            "sched_migrate_task",
            json!({"comm": comm(pid, 0), "pid": pid, "prio": prio, "orig_cpu": orig_cpu, "dest_cpu": dest_cpu}),
        ),
        EventKind::Exit { pid, prio } => (
            "sched_process_exit",
            json!({"comm": comm(pid, 0), "pid": pid,
                   "tgid": c.tasks.iter().find(|t| t.tid == pid).unwrap().tgid, "prio": prio}),
        ),
        EventKind::Fork {
            parent_pid,
            child_pid,
        } => (
            "sched_process_fork",
            json!({"parent_comm": comm(parent_pid, 0), "parent_pid": parent_pid,
                   "child_comm": comm(child_pid, 0), "child_pid": child_pid}),
        ),
    };
    json!([e.cpu, e.ts_ns, e.common_pid, name, fields])
}

/// Checks a decoded trace against its capture: no unknown field, the
/// process tree, every event on its CPU in order with its fields, and the
/// lost-events flag on each CPU's first bundle.
fn check_decoded(decoded: &Value, c: &Capture, kernel_release: &str) {
    assert_eq!(
        decoded["unknown_fields"],
        json!([]),
        "fields Perfetto's schema does not know"
    );
    let packets = decoded["packets"].as_array().unwrap();
    assert_eq!(
        packets[0]["system_info"],
        json!({"utsname": {"sysname": "Linux", "release": kernel_release}})
    );
    let tree = &packets[1]["process_tree"];
    let threads: Vec<Value> = c
        .tasks
        .iter()
        .map(|t| json!({"tid": t.tid, "name": t.comm, "tgid": t.tgid}))
        .collect();
    assert_eq!(tree["threads"], json!(threads));
    assert_eq!(
        tree["processes"],
        json!([
            {"pid": 100, "cmdline": ["schedlab"], "cmdline_is_comm": true},
            {"pid": 101, "ppid": 100, "cmdline": ["hash-0"], "cmdline_is_comm": true},
            {"pid": 103, "ppid": 100, "cmdline": ["hash-1"], "cmdline_is_comm": true},
        ])
    );
    let mut got = Vec::new();
    let mut first_bundle_lost = std::collections::BTreeMap::new();
    for p in packets {
        assert_eq!(p["trusted_packet_sequence_id"], 1);
        let Some(bundle) = p.get("ftrace_events") else {
            continue;
        };
        let cpu = bundle["cpu"].as_u64().unwrap();
        first_bundle_lost
            .entry(cpu)
            .or_insert_with(|| bundle.get("lost_events").cloned());
        for e in bundle["event"].as_array().unwrap() {
            let obj = e.as_object().unwrap();
            let (name, fields) = obj
                .iter()
                .find(|(k, _)| *k != "timestamp" && *k != "pid")
                .expect("an event with a payload");
            got.push(json!([cpu, e["timestamp"], e["pid"], name, fields]));
        }
    }
    // Per CPU, in packet order (the bundles of the CPUs interleave).
    got.sort_by_key(|e| e[0].as_u64());
    let mut want: Vec<(u32, usize, Value)> = c
        .events
        .iter()
        .enumerate()
        .map(|(i, e)| (e.cpu, i, expected(c, e)))
        .collect();
    want.sort_by_key(|(cpu, i, _)| (*cpu, *i));
    let want: Vec<Value> = want.into_iter().map(|(_, _, v)| v).collect();
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g, w);
    }
    let lost = (c.lost_events > 0).then_some(json!(true));
    for cpu in [0, 1] {
        assert_eq!(first_bundle_lost[&cpu], lost, "cpu {cpu}");
    }
}

#[test]
fn the_perfetto_trace_decodes_with_perfettos_own_schema_event_for_event() {
    let c = synthetic_capture(0);
    assert!(c.events.len() > 2 * perfetto::EVENTS_PER_BUNDLE);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.pftrace");
    std::fs::write(&path, perfetto::encode(&c, KERNEL)).unwrap();
    let Some(decoded) = decode_with_perfetto_schema(&path) else {
        return;
    };
    check_decoded(&decoded, &c, KERNEL);
    // Several bundles per CPU.
    let bundles = decoded["packets"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p.get("ftrace_events").is_some())
        .count();
    assert!(bundles >= 4, "{bundles} bundles");
}

#[test]
fn lost_events_are_flagged_in_the_decoded_trace() {
    let c = synthetic_capture(42);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.pftrace");
    std::fs::write(&path, perfetto::encode(&c, KERNEL)).unwrap();
    let Some(decoded) = decode_with_perfetto_schema(&path) else {
        return;
    };
    check_decoded(&decoded, &c, KERNEL);
}

// ------------------------------------------------ schedlab trace export ---

/// A database with a synthetic campaign whose first ok run is traced, second
/// is not, and third is traced with lost events: (dir, db, run ids).
fn traced_db() -> (tempfile::TempDir, std::path::PathBuf, [i64; 3]) {
    use schedlab::store::Store;
    use schedlab::testing::synth;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("traced.db");
    let mut store = Store::open(&db).unwrap();
    synth::create(&mut store, &synth::SynthConfig::small()).unwrap();
    let conn = rusqlite::Connection::open(&db).unwrap();
    let ids: Vec<i64> = conn
        .prepare("SELECT id FROM runs WHERE status = 'ok' ORDER BY id LIMIT 3")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    let runs = [ids[0], ids[1], ids[2]];
    store
        .save_trace(
            runs[0],
            &schedlab::trace::Analysed::new(&synthetic_capture(0), &[]),
        )
        .unwrap();
    store
        .save_trace(
            runs[2],
            &schedlab::trace::Analysed::new(&synthetic_capture(42), &[]),
        )
        .unwrap();
    (dir, db, runs)
}

/// `schedlab trace export ARGS…`: (success, stderr).
fn trace_export(args: &[&std::ffi::OsStr]) -> (bool, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_schedlab"))
        .args(["trace", "export"])
        .args(args)
        .env_remove("SCHEDLAB_DB")
        .output()
        .expect("run schedlab trace export");
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn os(s: &str) -> &std::ffi::OsStr {
    s.as_ref()
}

/// The kernel release of the synthetic campaign's environment.
const SYNTHETIC_KERNEL: &str = "6.1.0-synthetic";

#[test]
fn trace_export_writes_a_stored_run_as_perfetto_and_as_chrome_json() {
    let (dir, db, runs) = traced_db();
    let run = runs[0].to_string();
    let out = dir.path().join("run.pftrace");
    let (ok, err) = trace_export(&[
        os("--db"),
        db.as_os_str(),
        os("--run"),
        os(&run),
        os("-o"),
        out.as_os_str(),
    ]);
    assert!(ok, "{err}");
    assert!(
        err.contains("wrote") && err.contains("ui.perfetto.dev"),
        "{err}"
    );
    assert!(!err.contains("warning"), "{err}");
    let json_out = dir.path().join("run.json");
    let (ok, err) = trace_export(&[
        os("--db"),
        db.as_os_str(),
        os("--run"),
        os(&run),
        os("-o"),
        json_out.as_os_str(),
    ]);
    assert!(ok, "{err}");
    // Only the database and the two exports: no temporary file left.
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with("traced.db"))
        .collect();
    names.sort();
    assert_eq!(names, ["run.json", "run.pftrace"]);

    // The Chrome JSON: a complete event per slice on its CPU track and one
    // on its thread track, the slices the trace derivation finds.
    let c = synthetic_capture(0);
    let slices = schedlab::trace::derive::derive(&c).slices;
    assert!(slices.len() > 100, "{} slices", slices.len());
    let v: Value = serde_json::from_slice(&std::fs::read(&json_out).unwrap()).unwrap();
    let complete: Vec<&Value> = v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X")
        .collect();
    assert_eq!(complete.len(), 2 * slices.len());
    let cpus_pid = schedlab::trace::chrome_json::CPUS_PID;
    let mut on_cpu: Vec<(u64, f64, f64, String)> = complete
        .iter()
        .filter(|e| e["pid"] == cpus_pid)
        .map(|e| {
            (
                e["args"]["cpu"].as_u64().unwrap(),
                e["ts"].as_f64().unwrap(),
                e["dur"].as_f64().unwrap(),
                e["name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    on_cpu.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let mut want: Vec<(u64, f64, f64, String)> = slices
        .iter()
        .map(|s| {
            let comm = &c.tasks.iter().find(|t| t.tid == s.pid).unwrap().comm;
            (
                u64::from(s.cpu),
                s.start_ns as f64 / 1e3,
                s.end_ns as f64 / 1e3 - s.start_ns as f64 / 1e3,
                comm.clone(),
            )
        })
        .collect();
    want.sort_by(|a, b| a.partial_cmp(b).unwrap());
    assert_eq!(on_cpu, want);

    // The Perfetto file, decoded with Perfetto's own schema.
    let Some(decoded) = decode_with_perfetto_schema(&out) else {
        return;
    };
    check_decoded(&decoded, &c, SYNTHETIC_KERNEL);
}

#[test]
fn trace_export_warns_of_lost_events_and_still_exports() {
    let (dir, db, runs) = traced_db();
    let run = runs[2].to_string();
    let out = dir.path().join("lossy.pftrace");
    let (ok, err) = trace_export(&[
        os("--db"),
        db.as_os_str(),
        os("--run"),
        os(&run),
        os("-o"),
        out.as_os_str(),
        os("--format"),
        os("perfetto"),
    ]);
    assert!(ok, "{err}");
    assert!(
        err.contains(&format!(
            "warning: Run {run}'s trace is unusable: the kernel dropped 42 events"
        )) && err.contains("Perfetto flags the trace as having lost data"),
        "{err}"
    );
    let Some(decoded) = decode_with_perfetto_schema(&out) else {
        return;
    };
    check_decoded(&decoded, &synthetic_capture(42), SYNTHETIC_KERNEL);
}

#[test]
fn trace_export_refuses_bad_input_naming_the_flag_or_path() {
    let (dir, db, runs) = traced_db();
    let out = dir.path().join("x.pftrace");
    let run = |id: i64, out: &Path| {
        trace_export(&[
            os("--db"),
            db.as_os_str(),
            os("--run"),
            os(&id.to_string()),
            os("-o"),
            out.as_os_str(),
        ])
    };
    let (ok, err) = run(999_999, &out);
    assert!(!ok);
    assert!(
        err.contains("--run 999999") && err.contains("no such run"),
        "{err}"
    );
    let (ok, err) = run(runs[1], &out);
    assert!(!ok);
    assert!(
        err.contains(&format!("--run {}", runs[1])) && err.contains("no trace"),
        "{err}"
    );
    let missing = dir.path().join("no-such-dir/x.pftrace");
    let (ok, err) = run(runs[0], &missing);
    assert!(!ok);
    assert!(
        err.contains("-o") && err.contains("no-such-dir") && err.contains("does not exist"),
        "{err}"
    );
    let (ok, err) = run(runs[0], dir.path());
    assert!(!ok);
    assert!(
        err.contains("-o") && err.contains("is a directory"),
        "{err}"
    );
    // The database itself is never overwritten.
    let before = std::fs::read(&db).unwrap();
    let (ok, err) = run(runs[0], &db);
    assert!(!ok);
    assert!(err.contains("is the database"), "{err}");
    assert_eq!(std::fs::read(&db).unwrap(), before);
    let (ok, err) = trace_export(&[
        os("--db"),
        dir.path().join("none.db").as_os_str(),
        os("--run"),
        os("1"),
        os("-o"),
        out.as_os_str(),
    ]);
    assert!(!ok);
    assert!(
        err.contains("none.db") && err.contains("does not exist"),
        "{err}"
    );
    // Nothing was written by the refusals.
    assert!(!out.exists());
    assert!(err.starts_with("error: "), "{err}");
}

#[test]
fn trace_list_names_every_traced_run_and_what_is_wrong_with_its_trace() {
    let (_dir, db, runs) = traced_db();
    let list = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_schedlab"))
            .args(["trace", "list", "--db"])
            .arg(&db)
            .args(extra)
            .env_remove("SCHEDLAB_DB")
            .output()
            .expect("run schedlab trace list")
    };
    let o = list(&["--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let listed: Value = serde_json::from_slice(&o.stdout).unwrap();
    let ids: Vec<i64> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["run_id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, [runs[0], runs[2]], "{listed}");
    assert_eq!(listed[1]["lost_events"], 42, "{listed}");
    let o = list(&[]);
    let table = String::from_utf8_lossy(&o.stdout);
    let line = |run: i64| {
        table
            .lines()
            .find(|l| l.split_whitespace().next() == Some(&run.to_string()))
            .unwrap_or_else(|| panic!("run {run} is not listed:\n{table}"))
            .to_string()
    };
    assert!(line(runs[0]).ends_with(": usable"), "{table}");
    assert!(line(runs[2]).contains("dropped 42 events"), "{table}");
    assert!(!table.contains(&format!("\n{:>5} ", runs[1])), "{table}");
    let o = list(&["--campaign", "999"]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--campaign 999: no such campaign"), "{err}");
}
