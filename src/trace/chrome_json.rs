//! Chrome trace-event JSON export: a [`Capture`]'s on-CPU slices as complete
//! events (`"ph": "X"`), the format chrome://tracing, ui.perfetto.dev and
//! speedscope-style viewers open. Pure: a capture in, JSON bytes out.
//!
//! Each slice appears twice: on its CPU's track (a pseudo-process "CPUs"
//! with one thread per CPU, the slice named after the task) and on its
//! thread's track (in its process, the slice named after the CPU), with
//! process and thread name metadata events (`"ph": "M"`). Times are
//! microseconds of CLOCK_MONOTONIC, as the trace-event format wants; the
//! capture's window and lost-event count are in `otherData`.
//!
//! A slice is the time between a sched_switch that puts a task on a CPU and
//! the next sched_switch on that CPU, which must take that same task off
//! (its `prev_state` says how the slice ended). The capture records the
//! switches of the run's tasks only: a switch between two other tasks is
//! missing, so a slice whose next switch names another task as leaving is
//! dropped (its end is unknown). A task of the run on a CPU when the window
//! opens or closes gets a slice cut at the window's edge (every switch of
//! its own is recorded, so it ran until then). The idle task has no slices.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Serialize;
use serde_json::{Value, json};

use super::{Capture, EventKind, SwitchEnd, Task};

/// The pseudo-process holding the per-CPU tracks: above the kernel's
/// largest possible pid (`PID_MAX_LIMIT`, 2^22), so no task shares it.
pub const CPUS_PID: i64 = (1 << 22) + 1;

/// How a slice ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SliceEnd {
    /// A sched_switch took the task off the CPU.
    Switch(SwitchEnd),
    /// The task was still on the CPU when the window closed.
    WindowEnd,
}

impl SliceEnd {
    fn name(self) -> &'static str {
        match self {
            SliceEnd::Switch(SwitchEnd::Preempted) => "preempted",
            SliceEnd::Switch(SwitchEnd::Yielded) => "yielded",
            SliceEnd::Switch(SwitchEnd::Blocked) => "blocked",
            SliceEnd::Switch(SwitchEnd::Exited) => "exited",
            SliceEnd::WindowEnd => "window end",
        }
    }
}

/// One stretch of a task on a CPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slice {
    pub tid: i32,
    pub cpu: u32,
    pub start_ns: u64,
    pub end_ns: u64,
    /// The slice began before the window and is cut at its start.
    pub cut_at_start: bool,
    pub end: SliceEnd,
}

/// The on-CPU slices of a capture, by CPU then time (see the module doc for
/// which are kept).
pub fn slices(capture: &Capture) -> Vec<Slice> {
    let ours: BTreeSet<i32> = capture.tasks.iter().map(|t| t.tid).collect();
    // Per CPU: the task on it since when, once a switch has said so.
    let mut on_cpu: BTreeMap<u32, (i32, u64, bool)> = BTreeMap::new();
    let mut out = Vec::new();
    for e in &capture.events {
        let EventKind::Switch {
            prev_pid,
            prev_state,
            next_pid,
            ..
        } = e.kind
        else {
            continue;
        };
        let began = match on_cpu.get(&e.cpu) {
            Some(&(tid, start_ns, cut)) => (tid == prev_pid).then_some((start_ns, cut)),
            // The first switch seen on this CPU: a task of ours was on it
            // since the window opened.
            None => (ours.contains(&prev_pid) && capture.start_ns <= e.ts_ns)
                .then_some((capture.start_ns, true)),
        };
        if let Some((start_ns, cut_at_start)) = began
            && prev_pid != 0
        {
            out.push(Slice {
                tid: prev_pid,
                cpu: e.cpu,
                start_ns,
                end_ns: e.ts_ns,
                cut_at_start,
                end: SliceEnd::Switch(SwitchEnd::from_prev_state(prev_state)),
            });
        }
        on_cpu.insert(e.cpu, (next_pid, e.ts_ns, false));
    }
    for (cpu, (tid, start_ns, cut_at_start)) in on_cpu {
        if tid != 0 && ours.contains(&tid) && start_ns <= capture.end_ns {
            out.push(Slice {
                tid,
                cpu,
                start_ns,
                end_ns: capture.end_ns,
                cut_at_start,
                end: SliceEnd::WindowEnd,
            });
        }
    }
    out.sort_by_key(|s| (s.cpu, s.start_ns));
    out
}

/// The whole JSON document.
#[derive(Serialize)]
struct Document {
    #[serde(rename = "traceEvents")]
    trace_events: Vec<Value>,
    #[serde(rename = "displayTimeUnit")]
    display_time_unit: &'static str,
    #[serde(rename = "otherData")]
    other_data: Value,
}

/// Nanoseconds as the format's microseconds (fractional: nothing is lost
/// below 2^53 ns, 104 days of uptime).
fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

/// The capture as Chrome trace-event JSON.
pub fn encode(capture: &Capture) -> Vec<u8> {
    let by_tid: HashMap<i32, &Task> = capture.tasks.iter().map(|t| (t.tid, t)).collect();
    let slices = slices(capture);
    let mut events = Vec::new();
    let meta = |name: &str, pid: i64, tid: i64, args: Value| json!({"ph": "M", "name": name, "pid": pid, "tid": tid, "args": args});
    events.push(meta("process_name", CPUS_PID, 0, json!({"name": "CPUs"})));
    events.push(meta(
        "process_sort_index",
        CPUS_PID,
        0,
        json!({"sort_index": -1}),
    ));
    let cpus: BTreeSet<u32> = capture
        .cpus
        .iter()
        .copied()
        .chain(slices.iter().map(|s| s.cpu))
        .collect();
    for &cpu in &cpus {
        let tid = cpu_track(cpu);
        events.push(meta(
            "thread_name",
            CPUS_PID,
            tid,
            json!({"name": format!("CPU {cpu}")}),
        ));
        events.push(meta(
            "thread_sort_index",
            CPUS_PID,
            tid,
            json!({"sort_index": cpu}),
        ));
    }
    // Processes named by their leader, else their first thread.
    let mut processes: BTreeMap<i32, &Task> = BTreeMap::new();
    for t in &capture.tasks {
        let slot = processes.entry(t.tgid).or_insert(t);
        if t.tid == t.tgid {
            *slot = t;
        }
    }
    for (pid, t) in &processes {
        events.push(meta(
            "process_name",
            i64::from(*pid),
            0,
            json!({"name": t.comm}),
        ));
    }
    for t in &capture.tasks {
        events.push(meta(
            "thread_name",
            i64::from(t.tgid),
            i64::from(t.tid),
            json!({"name": t.comm}),
        ));
    }
    for s in &slices {
        let task = by_tid.get(&s.tid);
        // A task outside the capture's list: its process is unknown, the
        // viewer shows it as a process of its own.
        let pid = task.map_or(s.tid, |t| t.tgid);
        let name = task.map_or_else(|| format!("<...> {}", s.tid), |t| t.comm.clone());
        let mut args = json!({
            "tid": s.tid,
            "pid": pid,
            "cpu": s.cpu,
            "end": s.end.name(),
        });
        if s.cut_at_start {
            args["start"] = json!("window start");
        }
        let ts = us(s.start_ns);
        let dur = us(s.end_ns) - ts;
        events.push(json!({
            "ph": "X", "cat": "sched", "name": name,
            "pid": CPUS_PID, "tid": cpu_track(s.cpu),
            "ts": ts, "dur": dur, "args": args,
        }));
        events.push(json!({
            "ph": "X", "cat": "sched", "name": format!("CPU {}", s.cpu),
            "pid": pid, "tid": s.tid,
            "ts": ts, "dur": dur, "args": args,
        }));
    }
    let doc = Document {
        trace_events: events,
        display_time_unit: "ns",
        other_data: json!({
            "source": "schedlab",
            "clock": "CLOCK_MONOTONIC",
            "window_start_ns": capture.start_ns,
            "window_end_ns": capture.end_ns,
            "lost_events": capture.lost_events,
            "slices": slices.len(),
        }),
    };
    let mut bytes = serde_json::to_vec(&doc).expect("a JSON value serialises");
    bytes.push(b'\n');
    bytes
}

/// The thread id of a CPU's track in [`CPUS_PID`] (distinct from every
/// task's: the format's viewers key threads by tid alone).
fn cpu_track(cpu: u32) -> i64 {
    CPUS_PID + 1 + i64::from(cpu)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::Event;

    fn switch(ts_ns: u64, cpu: u32, prev_pid: i32, prev_state: u64, next_pid: i32) -> Event {
        Event {
            ts_ns,
            cpu,
            common_pid: prev_pid,
            kind: EventKind::Switch {
                prev_pid,
                prev_prio: 120,
                prev_state,
                next_pid,
                next_prio: 120,
            },
        }
    }

    fn capture(events: Vec<Event>) -> Capture {
        Capture {
            events,
            tasks: vec![
                Task {
                    tid: 10,
                    tgid: 10,
                    comm: "a".into(),
                },
                Task {
                    tid: 11,
                    tgid: 10,
                    comm: "a-1".into(),
                },
                Task {
                    tid: 20,
                    tgid: 20,
                    comm: "b".into(),
                },
            ],
            cpus: vec![0, 1],
            start_ns: 1_000,
            end_ns: 10_000,
            lost_events: 0,
        }
    }

    fn slice(tid: i32, cpu: u32, start_ns: u64, end_ns: u64, end: SliceEnd) -> Slice {
        Slice {
            tid,
            cpu,
            start_ns,
            end_ns,
            cut_at_start: false,
            end,
        }
    }

    #[test]
    fn slices_run_from_switch_in_to_switch_out_on_each_cpu() {
        let c = capture(vec![
            switch(2_000, 0, 0, 0, 10),
            switch(2_500, 1, 0, 0, 20),
            switch(3_000, 0, 10, 0x100, 11),
            switch(4_000, 0, 11, 0x1, 0),
            switch(5_000, 1, 20, 0x20, 0),
        ]);
        let end = |s| SliceEnd::Switch(s);
        assert_eq!(
            slices(&c),
            [
                slice(10, 0, 2_000, 3_000, end(SwitchEnd::Preempted)),
                slice(11, 0, 3_000, 4_000, end(SwitchEnd::Blocked)),
                slice(20, 1, 2_500, 5_000, end(SwitchEnd::Exited)),
            ]
        );
    }

    #[test]
    fn window_edges_cut_our_slices_and_unknown_ends_are_dropped() {
        let c = capture(vec![
            // Task 10 was on CPU 0 when the window opened.
            switch(2_000, 0, 10, 0, 999),
            // 999 (not ours) is followed by a switch naming 998 as leaving:
            // a switch between two other tasks was not recorded.
            switch(3_000, 0, 998, 0x1, 20),
            // 20 is still on CPU 0 when the window closes.
            // The first switch on CPU 1 has a foreign prev: unknown start.
            switch(4_000, 1, 997, 0x1, 0),
        ]);
        let s = slices(&c);
        assert_eq!(
            s,
            [
                Slice {
                    cut_at_start: true,
                    ..slice(10, 0, 1_000, 2_000, SliceEnd::Switch(SwitchEnd::Yielded))
                },
                slice(20, 0, 3_000, 10_000, SliceEnd::WindowEnd),
            ]
        );
    }

    #[test]
    fn the_json_has_a_complete_event_per_slice_on_both_tracks_and_names() {
        let c = capture(vec![
            switch(2_000, 0, 0, 0, 11),
            switch(3_500, 0, 11, 0x100, 0),
        ]);
        let v: Value = serde_json::from_slice(&encode(&c)).unwrap();
        let events = v["traceEvents"].as_array().unwrap();
        let complete: Vec<&Value> = events.iter().filter(|e| e["ph"] == "X").collect();
        assert_eq!(complete.len(), 2);
        let on_cpu = complete.iter().find(|e| e["pid"] == CPUS_PID).unwrap();
        assert_eq!(on_cpu["name"], "a-1");
        assert_eq!(on_cpu["tid"], cpu_track(0));
        assert_eq!(on_cpu["ts"], 2.0);
        assert_eq!(on_cpu["dur"], 1.5);
        assert_eq!(on_cpu["args"]["end"], "preempted");
        let on_thread = complete.iter().find(|e| e["pid"] == 10).unwrap();
        assert_eq!(
            (on_thread["tid"].as_i64(), on_thread["name"].as_str()),
            (Some(11), Some("CPU 0"))
        );
        let named = |kind: &str, pid: i64, tid: i64| {
            events
                .iter()
                .find(|e| e["ph"] == "M" && e["name"] == kind && e["pid"] == pid && e["tid"] == tid)
                .map(|e| e["args"]["name"].as_str().unwrap().to_string())
        };
        assert_eq!(named("process_name", 10, 0).as_deref(), Some("a"));
        assert_eq!(named("thread_name", 10, 11).as_deref(), Some("a-1"));
        assert_eq!(named("process_name", 20, 0).as_deref(), Some("b"));
        assert_eq!(
            named("thread_name", CPUS_PID, cpu_track(1)).as_deref(),
            Some("CPU 1")
        );
        assert_eq!(v["otherData"]["slices"], 1);
        assert_eq!(v["displayTimeUnit"], "ns");
    }

    #[test]
    fn the_idle_task_has_no_slices() {
        let c = capture(vec![
            switch(2_000, 0, 10, 0x1, 0),
            switch(3_000, 0, 0, 0, 10),
        ]);
        let s = slices(&c);
        assert!(s.iter().all(|s| s.tid != 0), "{s:?}");
        assert_eq!(s.len(), 2);
    }
}
