//! Tests of the trace exports: the Perfetto file decodes with Perfetto's own
//! schema (the compiled perfetto_trace.proto of the `perfetto` Python
//! package, through tests/py/decode_perfetto.py) with no field the schema
//! does not know, and every captured event comes back on its CPU with its
//! fields; `schedlab trace export` writes it (and the Chrome JSON) from a
//! stored trace and refuses bad input naming the flag or path.

mod common;

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
            {"pid": 101, "cmdline": ["hash-0"], "cmdline_is_comm": true},
            {"pid": 103, "cmdline": ["hash-1"], "cmdline_is_comm": true},
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
