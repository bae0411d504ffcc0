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
//! The slices are those of [`super::derive`]: the run's tasks' stretches
//! from switch-in to switch-out, cut at the window's edges (marked in the
//! event's `args`).

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Serialize;
use serde_json::{Value, json};

use super::derive::derive;
use super::{Capture, SwitchEnd, Task};

/// The pseudo-process holding the per-CPU tracks: above the kernel's
/// largest possible pid (`PID_MAX_LIMIT`, 2^22), so no task shares it.
pub const CPUS_PID: i64 = (1 << 22) + 1;

/// How a slice ended, as the JSON says it, by the kernel's `prev_state`:
/// `R+` preempted in the kernel, `R` still runnable (the kernel reports `R`
/// both for a task preempted on its way back to user space, the usual
/// preemption of a CPU-bound task, and for sched_yield: rusage counts both
/// as involuntary), a sleep, an exit.
fn end_name(end: Option<SwitchEnd>) -> &'static str {
    match end {
        Some(SwitchEnd::Preempted) => "preempted",
        Some(SwitchEnd::Yielded) => "runnable",
        Some(SwitchEnd::Blocked) => "blocked",
        Some(SwitchEnd::Exited) => "exited",
        // Never from a kernel capture (only the model's timelines say so).
        Some(SwitchEnd::Throttled) => "throttled",
        None => "window end",
    }
}

/// The whole JSON document.
#[derive(Serialize)]
struct Document<'a> {
    #[serde(rename = "traceEvents")]
    trace_events: Vec<TraceEvent<'a>>,
    #[serde(rename = "displayTimeUnit")]
    display_time_unit: &'static str,
    #[serde(rename = "otherData")]
    other_data: Value,
}

/// One trace event (typed, not `serde_json::Value`: a capture of a million
/// events becomes millions of these).
#[derive(Serialize)]
#[serde(untagged)]
enum TraceEvent<'a> {
    Meta(Meta<'a>),
    Complete(Complete<'a>),
}

/// `"ph": "M"`: a process or thread name, or a sort index.
#[derive(Serialize)]
struct Meta<'a> {
    ph: &'static str,
    name: &'static str,
    pid: i64,
    tid: i64,
    args: MetaArgs<'a>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum MetaArgs<'a> {
    Name { name: Cow<'a, str> },
    SortIndex { sort_index: i64 },
}

/// `"ph": "X"`: one slice on one track.
#[derive(Serialize)]
struct Complete<'a> {
    ph: &'static str,
    cat: &'static str,
    name: Cow<'a, str>,
    pid: i64,
    tid: i64,
    ts: f64,
    dur: f64,
    args: SliceArgs,
}

#[derive(Serialize, Clone, Copy)]
struct SliceArgs {
    tid: i32,
    pid: i32,
    cpu: u32,
    end: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    start: Option<&'static str>,
}

/// Nanoseconds as the format's microseconds (fractional: nothing is lost
/// below 2^53 ns, 104 days of uptime).
fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

fn meta<'a>(name: &'static str, pid: i64, tid: i64, args: MetaArgs<'a>) -> TraceEvent<'a> {
    TraceEvent::Meta(Meta {
        ph: "M",
        name,
        pid,
        tid,
        args,
    })
}

fn named<'a>(name: impl Into<Cow<'a, str>>) -> MetaArgs<'a> {
    MetaArgs::Name { name: name.into() }
}

/// The capture as Chrome trace-event JSON.
pub fn encode(capture: &Capture) -> Vec<u8> {
    let by_tid: HashMap<i32, &Task> = capture.tasks.iter().map(|t| (t.tid, t)).collect();
    let derived = derive(capture);
    let repaired = derived.repairs.len();
    let slices = derived.slices;
    let mut events = Vec::with_capacity(2 * slices.len() + 2 * capture.tasks.len() + 8);
    events.push(meta("process_name", CPUS_PID, 0, named("CPUs")));
    events.push(meta(
        "process_sort_index",
        CPUS_PID,
        0,
        MetaArgs::SortIndex { sort_index: -1 },
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
            named(format!("CPU {cpu}")),
        ));
        events.push(meta(
            "thread_sort_index",
            CPUS_PID,
            tid,
            MetaArgs::SortIndex {
                sort_index: i64::from(cpu),
            },
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
            named(t.comm.as_str()),
        ));
    }
    for t in &capture.tasks {
        events.push(meta(
            "thread_name",
            i64::from(t.tgid),
            i64::from(t.tid),
            named(t.comm.as_str()),
        ));
    }
    let cpu_names: BTreeMap<u32, String> = cpus.iter().map(|&c| (c, format!("CPU {c}"))).collect();
    for s in &slices {
        let task = by_tid.get(&s.pid);
        // A capture that names no task: each is its own process, unnamed.
        let pid = task.map_or(s.pid, |t| t.tgid);
        let name: Cow<str> = match task {
            Some(t) => Cow::Borrowed(t.comm.as_str()),
            None => Cow::Owned(format!("<...> {}", s.pid)),
        };
        let args = SliceArgs {
            tid: s.pid,
            pid,
            cpu: s.cpu,
            end: if s.end_repaired {
                "switch never emitted"
            } else {
                end_name(s.end)
            },
            start: if s.start_clipped {
                Some("window start")
            } else {
                s.start_repaired.then_some("switch never emitted")
            },
        };
        let ts = us(s.start_ns);
        let dur = us(s.end_ns) - ts;
        events.push(TraceEvent::Complete(Complete {
            ph: "X",
            cat: "sched",
            name,
            pid: CPUS_PID,
            tid: cpu_track(s.cpu),
            ts,
            dur,
            args,
        }));
        events.push(TraceEvent::Complete(Complete {
            ph: "X",
            cat: "sched",
            name: Cow::Borrowed(cpu_names[&s.cpu].as_str()),
            pid: i64::from(pid),
            tid: i64::from(s.pid),
            ts,
            dur,
            args,
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
            "repaired_switches": repaired,
        }),
    };
    let mut bytes = serde_json::to_vec(&doc).expect("plain structs serialise");
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
    use crate::trace::{Event, EventKind};

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
            release_ns: None,
        }
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
    fn slices_cut_by_the_window_say_so_and_foreign_tasks_have_none() {
        let c = capture(vec![
            // 10 held CPU 0 when the window opened; 20 holds it at the end.
            switch(2_000, 0, 10, 0, 20),
            // 999 is not of the run.
            switch(3_000, 1, 0, 0, 999),
            switch(4_000, 1, 999, 0x1, 0),
        ]);
        let v: Value = serde_json::from_slice(&encode(&c)).unwrap();
        let on_cpu: Vec<(String, f64, f64, Value)> = v["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["ph"] == "X" && e["pid"] == CPUS_PID)
            .map(|e| {
                (
                    e["name"].as_str().unwrap().to_string(),
                    e["ts"].as_f64().unwrap(),
                    e["dur"].as_f64().unwrap(),
                    e["args"].clone(),
                )
            })
            .collect();
        assert_eq!(on_cpu.len(), 2, "{on_cpu:?}");
        assert_eq!(
            (on_cpu[0].0.as_str(), on_cpu[0].1, on_cpu[0].2),
            ("a", 1.0, 1.0)
        );
        assert_eq!(on_cpu[0].3["start"], "window start");
        assert_eq!(on_cpu[0].3["end"], "runnable");
        assert_eq!(
            (on_cpu[1].0.as_str(), on_cpu[1].1, on_cpu[1].2),
            ("b", 2.0, 8.0)
        );
        assert_eq!(on_cpu[1].3["end"], "window end");
        assert!(on_cpu[1].3.get("start").is_none());
    }
}
