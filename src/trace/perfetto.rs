//! Perfetto export: a [`Capture`] as a Perfetto protobuf trace (`Trace`, a
//! stream of `TracePacket`s), the format ui.perfetto.dev and trace_processor
//! open and turn into their `sched_slice`, `thread_state`, `thread` and
//! `process` tables. Pure: a capture in, bytes out.
//!
//! The trace holds, on one packet sequence:
//! - one `SystemInfo` packet with the traced kernel's release: trace_processor
//!   decodes `prev_state` by kernel version (the preempted bit moved in 4.8
//!   and 4.14) and, without one, assumes 4.4, which would read a 6.x
//!   preemption (`R+`, 0x100) as "waking";
//! - one `ProcessTree` packet naming every task of the capture (thread id,
//!   process id, name);
//! - `FtraceEventBundle` packets, one CPU each and at most
//!   [`EVENTS_PER_BUNDLE`] events, with the raw tracepoints as plain
//!   `FtraceEvent`s (not Perfetto's optional compact_sched encoding):
//!   sched_switch, sched_waking, sched_wakeup_new, sched_migrate_task,
//!   sched_process_fork, sched_process_exit (and sched_wakeup, in captures
//!   that have it). A process forked while recorded (a program's child) gets
//!   its parent in the process tree (`ppid`), so Perfetto nests a program's
//!   tree as `ps` would, and a short-lived child is not a process of its own.
//!
//! Timestamps are the capture's own (CLOCK_MONOTONIC ns), written as they
//! are. Perfetto takes an ftrace bundle without `ftrace_clock` to be on its
//! default clock (boot time); the trace has no other clock, so no clock
//! snapshot is written (one would have to invent the boot–monotonic offset,
//! which the capture does not record), and the times Perfetto shows are the
//! capture's. A task outside the capture's task list has no known name: it is
//! written `<...>`, as the kernel's own text output does for a comm it has
//! not saved; the idle task (pid 0) is `swapper/CPU`, as in the kernel.
//!
//! The messages below are the subset of Perfetto's protos schedlab writes,
//! with the field numbers and types of google/perfetto's
//! `protos/perfetto/trace/trace.proto`, `trace_packet.proto`,
//! `protos/perfetto/common/system_info.proto`,
//! `ps/process_tree.proto`, `ftrace/ftrace_event_bundle.proto`,
//! `ftrace/ftrace_event.proto` and `ftrace/sched.proto` (all proto2; checked
//! against the perfetto 0.59.1 Python package's compiled descriptors by
//! tests/suite/trace_export.rs).

use std::collections::{BTreeMap, HashMap};

use prost::Message;

use super::{Capture, Event, EventKind, Task};

/// Most events in one `FtraceEventBundle`: Perfetto's own traces carry a
/// bundle per ring-buffer read (a few pages); small bundles keep every packet
/// far below trace_processor's packet size limits.
pub const EVENTS_PER_BUNDLE: usize = 1024;

/// The packet sequence every packet is written on (0 means "invalid").
const SEQUENCE_ID: u32 = 1;

/// The capture as a Perfetto protobuf trace; `kernel_release` is the traced
/// kernel's (`uname -r`, as stored with the run).
pub fn encode(capture: &Capture, kernel_release: &str) -> Vec<u8> {
    trace(capture, kernel_release).encode_to_vec()
}

/// Builds the `Trace` message (separate from [`encode`] for the tests).
fn trace(capture: &Capture, kernel_release: &str) -> Trace {
    let names = Names::new(&capture.tasks);
    let mut packets = Vec::new();
    packets.push(TracePacket {
        timestamp: None,
        trusted_packet_sequence_id: Some(SEQUENCE_ID),
        data: Some(packet::Data::SystemInfo(SystemInfo {
            utsname: Some(Utsname {
                sysname: Some("Linux".into()),
                release: Some(kernel_release.into()),
            }),
        })),
    });
    packets.push(TracePacket {
        timestamp: Some(
            capture
                .events
                .first()
                .map_or(capture.start_ns, |e| e.ts_ns.min(capture.start_ns)),
        ),
        trusted_packet_sequence_id: Some(SEQUENCE_ID),
        data: Some(packet::Data::ProcessTree(process_tree(
            &capture.tasks,
            &parents(capture),
        ))),
    });
    // Events go into per-CPU bundles, each flushed when full: the packets
    // come out roughly in time order, as a live Perfetto trace's do.
    let mut open: BTreeMap<u32, Vec<FtraceEvent>> = BTreeMap::new();
    let mut flagged: Vec<u32> = Vec::new();
    let mut flush = |cpu: u32, events: Vec<FtraceEvent>, packets: &mut Vec<TracePacket>| {
        // The capture counts lost events for the whole run, not per CPU:
        // the first bundle of every CPU says so, which trace_processor
        // records as data loss on that CPU (stat ftrace_cpu_has_data_loss,
        // src/trace_processor/importers/ftrace/ftrace_tokenizer.cc).
        let lost = capture.lost_events > 0 && !flagged.contains(&cpu);
        if lost {
            flagged.push(cpu);
        }
        packets.push(TracePacket {
            timestamp: None,
            trusted_packet_sequence_id: Some(SEQUENCE_ID),
            data: Some(packet::Data::FtraceEvents(FtraceEventBundle {
                cpu: Some(cpu),
                event: events,
                lost_events: lost.then_some(true),
            })),
        });
    };
    for e in &capture.events {
        let f = ftrace_event(e, &names);
        let bundle = open.entry(e.cpu).or_default();
        bundle.push(f);
        if bundle.len() >= EVENTS_PER_BUNDLE {
            let full = std::mem::take(bundle);
            flush(e.cpu, full, &mut packets);
        }
    }
    for (cpu, events) in open {
        if !events.is_empty() {
            flush(cpu, events, &mut packets);
        }
    }
    Trace { packet: packets }
}

/// Task names and process ids by thread id.
struct Names<'a> {
    by_tid: HashMap<i32, &'a Task>,
}

impl<'a> Names<'a> {
    fn new(tasks: &'a [Task]) -> Self {
        Names {
            by_tid: tasks.iter().map(|t| (t.tid, t)).collect(),
        }
    }

    /// The task's name, `swapper/CPU` for the idle task, `<...>` when the
    /// capture did not name it.
    fn comm(&self, tid: i32, cpu: u32) -> String {
        match self.by_tid.get(&tid) {
            Some(t) => t.comm.clone(),
            None if tid == 0 => format!("swapper/{cpu}"),
            None => "<...>".to_string(),
        }
    }

    fn tgid(&self, tid: i32) -> Option<i32> {
        self.by_tid.get(&tid).map(|t| t.tgid)
    }
}

/// The parent process of every process forked while recorded: a fork whose
/// child leads its own thread group made a process, whose parent process is
/// the forking thread's group (a fork of a new thread only adds a thread).
fn parents(capture: &Capture) -> HashMap<i32, i32> {
    let names = Names::new(&capture.tasks);
    capture
        .events
        .iter()
        .filter_map(|e| match e.kind {
            EventKind::Fork {
                parent_pid,
                child_pid,
            } if names.tgid(child_pid) == Some(child_pid) => {
                Some((child_pid, names.tgid(parent_pid).unwrap_or(parent_pid)))
            }
            _ => None,
        })
        .collect()
}

/// Every task as a thread, every thread-group leader (or, when the capture
/// has no leader, the first thread of the group) as a process, with its
/// parent process when the capture saw the fork that made it (`parents`).
fn process_tree(tasks: &[Task], parents: &HashMap<i32, i32>) -> ProcessTree {
    let mut processes: BTreeMap<i32, &Task> = BTreeMap::new();
    for t in tasks {
        let slot = processes.entry(t.tgid).or_insert(t);
        if t.tid == t.tgid {
            *slot = t;
        }
    }
    ProcessTree {
        processes: processes
            .into_iter()
            .map(|(pid, t)| process_tree::Process {
                pid: Some(pid),
                ppid: parents.get(&pid).copied(),
                cmdline: vec![t.comm.clone()],
                cmdline_is_comm: Some(true),
            })
            .collect(),
        threads: tasks
            .iter()
            .map(|t| process_tree::Thread {
                tid: Some(t.tid),
                name: Some(t.comm.clone()),
                tgid: Some(t.tgid),
            })
            .collect(),
    }
}

/// The event as Perfetto's message.
fn ftrace_event(e: &Event, names: &Names) -> FtraceEvent {
    // Perfetto's fields are int32 where the kernel's CPU numbers are
    // unsigned; no machine has 2^31 CPUs.
    let cpu_i32 = |c: u32| i32::try_from(c).unwrap_or(i32::MAX);
    let event = match e.kind {
        EventKind::Switch {
            prev_pid,
            prev_prio,
            prev_state,
            next_pid,
            next_prio,
        } => ftrace_event::Event::SchedSwitch(SchedSwitchFtraceEvent {
            prev_comm: Some(names.comm(prev_pid, e.cpu)),
            prev_pid: Some(prev_pid),
            prev_prio: Some(prev_prio),
            // The kernel field is a long; the proto's int64 holds it bit for bit.
            prev_state: Some(prev_state as i64),
            next_comm: Some(names.comm(next_pid, e.cpu)),
            next_pid: Some(next_pid),
            next_prio: Some(next_prio),
        }),
        EventKind::Waking {
            pid,
            prio,
            target_cpu,
        } => ftrace_event::Event::SchedWaking(SchedWakingFtraceEvent {
            comm: Some(names.comm(pid, target_cpu)),
            pid: Some(pid),
            prio: Some(prio),
            success: Some(1),
            target_cpu: Some(cpu_i32(target_cpu)),
        }),
        EventKind::Wakeup {
            pid,
            prio,
            target_cpu,
            new,
        } => {
            let w = SchedWakeupFtraceEvent {
                comm: Some(names.comm(pid, target_cpu)),
                pid: Some(pid),
                prio: Some(prio),
                success: Some(1),
                target_cpu: Some(cpu_i32(target_cpu)),
            };
            if new {
                ftrace_event::Event::SchedWakeupNew(w)
            } else {
                ftrace_event::Event::SchedWakeup(w)
            }
        }
        EventKind::Migrate {
            pid,
            prio,
            orig_cpu,
            dest_cpu,
        } => ftrace_event::Event::SchedMigrateTask(SchedMigrateTaskFtraceEvent {
            comm: Some(names.comm(pid, orig_cpu)),
            pid: Some(pid),
            prio: Some(prio),
            orig_cpu: Some(cpu_i32(orig_cpu)),
            dest_cpu: Some(cpu_i32(dest_cpu)),
        }),
        EventKind::Exit { pid, prio } => {
            ftrace_event::Event::SchedProcessExit(SchedProcessExitFtraceEvent {
                comm: Some(names.comm(pid, e.cpu)),
                pid: Some(pid),
                tgid: names.tgid(pid),
                prio: Some(prio),
            })
        }
        EventKind::Fork {
            parent_pid,
            child_pid,
        } => ftrace_event::Event::SchedProcessFork(SchedProcessForkFtraceEvent {
            parent_comm: Some(names.comm(parent_pid, e.cpu)),
            parent_pid: Some(parent_pid),
            child_comm: Some(names.comm(child_pid, e.cpu)),
            child_pid: Some(child_pid),
        }),
    };
    FtraceEvent {
        timestamp: Some(e.ts_ns),
        // `common_pid` is never negative in the kernel (a pid_t of a task).
        pid: Some(e.common_pid.max(0) as u32),
        event: Some(event),
    }
}

// ------------------------------------------- Perfetto's messages (subset) ---

/// `protos/perfetto/trace/trace.proto`: `message Trace`.
#[derive(Clone, PartialEq, Message)]
pub struct Trace {
    #[prost(message, repeated, tag = "1")]
    pub packet: Vec<TracePacket>,
}

/// `protos/perfetto/trace/trace_packet.proto`: `message TracePacket`.
#[derive(Clone, PartialEq, Message)]
pub struct TracePacket {
    /// `optional uint64 timestamp = 8`.
    #[prost(uint64, optional, tag = "8")]
    pub timestamp: Option<u64>,
    /// `oneof optional_trusted_packet_sequence_id { uint32
    /// trusted_packet_sequence_id = 10; }` (a one-member oneof encodes as a
    /// plain optional field).
    #[prost(uint32, optional, tag = "10")]
    pub trusted_packet_sequence_id: Option<u32>,
    /// `oneof data`: the members schedlab writes.
    #[prost(oneof = "packet::Data", tags = "1, 2, 45")]
    pub data: Option<packet::Data>,
}

pub mod packet {
    /// `TracePacket.data`.
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Data {
        /// `FtraceEventBundle ftrace_events = 1`.
        #[prost(message, tag = "1")]
        FtraceEvents(super::FtraceEventBundle),
        /// `ProcessTree process_tree = 2`.
        #[prost(message, tag = "2")]
        ProcessTree(super::ProcessTree),
        /// `SystemInfo system_info = 45`.
        #[prost(message, tag = "45")]
        SystemInfo(super::SystemInfo),
    }
}

/// `protos/perfetto/common/system_info.proto`: `message SystemInfo` (the
/// kernel's name and release only).
#[derive(Clone, PartialEq, Message)]
pub struct SystemInfo {
    #[prost(message, optional, tag = "1")]
    pub utsname: Option<Utsname>,
}

/// `protos/perfetto/common/system_info.proto`: `message Utsname`.
#[derive(Clone, PartialEq, Message)]
pub struct Utsname {
    #[prost(string, optional, tag = "1")]
    pub sysname: Option<String>,
    #[prost(string, optional, tag = "3")]
    pub release: Option<String>,
}

/// `protos/perfetto/trace/ps/process_tree.proto`: `message ProcessTree`.
#[derive(Clone, PartialEq, Message)]
pub struct ProcessTree {
    #[prost(message, repeated, tag = "1")]
    pub processes: Vec<process_tree::Process>,
    #[prost(message, repeated, tag = "2")]
    pub threads: Vec<process_tree::Thread>,
}

pub mod process_tree {
    /// `ProcessTree.Thread`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Thread {
        #[prost(int32, optional, tag = "1")]
        pub tid: Option<i32>,
        #[prost(string, optional, tag = "2")]
        pub name: Option<String>,
        #[prost(int32, optional, tag = "3")]
        pub tgid: Option<i32>,
    }

    /// `ProcessTree.Process` (`ppid` only for processes forked while
    /// recorded: the capture knows no other parent).
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Process {
        #[prost(int32, optional, tag = "1")]
        pub pid: Option<i32>,
        #[prost(int32, optional, tag = "2")]
        pub ppid: Option<i32>,
        #[prost(string, repeated, tag = "3")]
        pub cmdline: Vec<String>,
        #[prost(bool, optional, tag = "9")]
        pub cmdline_is_comm: Option<bool>,
    }
}

/// `protos/perfetto/trace/ftrace/ftrace_event_bundle.proto`:
/// `message FtraceEventBundle`.
#[derive(Clone, PartialEq, Message)]
pub struct FtraceEventBundle {
    #[prost(uint32, optional, tag = "1")]
    pub cpu: Option<u32>,
    #[prost(message, repeated, tag = "2")]
    pub event: Vec<FtraceEvent>,
    #[prost(bool, optional, tag = "3")]
    pub lost_events: Option<bool>,
}

/// `protos/perfetto/trace/ftrace/ftrace_event.proto`: `message FtraceEvent`.
#[derive(Clone, PartialEq, Message)]
pub struct FtraceEvent {
    /// Nanoseconds on the ftrace clock.
    #[prost(uint64, optional, tag = "1")]
    pub timestamp: Option<u64>,
    /// The kernel pid (thread id) current when the event fired.
    #[prost(uint32, optional, tag = "2")]
    pub pid: Option<u32>,
    #[prost(oneof = "ftrace_event::Event", tags = "4, 17, 20, 114, 238, 239, 491")]
    pub event: Option<ftrace_event::Event>,
}

pub mod ftrace_event {
    /// `FtraceEvent.event`: the members schedlab writes.
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Event {
        /// `SchedSwitchFtraceEvent sched_switch = 4`.
        #[prost(message, tag = "4")]
        SchedSwitch(super::SchedSwitchFtraceEvent),
        /// `SchedWakeupFtraceEvent sched_wakeup = 17`.
        #[prost(message, tag = "17")]
        SchedWakeup(super::SchedWakeupFtraceEvent),
        /// `SchedWakingFtraceEvent sched_waking = 20`.
        #[prost(message, tag = "20")]
        SchedWaking(super::SchedWakingFtraceEvent),
        /// `SchedWakeupNewFtraceEvent sched_wakeup_new = 114` (the same
        /// fields as sched_wakeup).
        #[prost(message, tag = "114")]
        SchedWakeupNew(super::SchedWakeupFtraceEvent),
        /// `SchedProcessExitFtraceEvent sched_process_exit = 238`.
        #[prost(message, tag = "238")]
        SchedProcessExit(super::SchedProcessExitFtraceEvent),
        /// `SchedProcessForkFtraceEvent sched_process_fork = 239`.
        #[prost(message, tag = "239")]
        SchedProcessFork(super::SchedProcessForkFtraceEvent),
        /// `SchedMigrateTaskFtraceEvent sched_migrate_task = 491`.
        #[prost(message, tag = "491")]
        SchedMigrateTask(super::SchedMigrateTaskFtraceEvent),
    }
}

/// `protos/perfetto/trace/ftrace/sched.proto`: `SchedSwitchFtraceEvent`.
#[derive(Clone, PartialEq, Message)]
pub struct SchedSwitchFtraceEvent {
    #[prost(string, optional, tag = "1")]
    pub prev_comm: Option<String>,
    #[prost(int32, optional, tag = "2")]
    pub prev_pid: Option<i32>,
    #[prost(int32, optional, tag = "3")]
    pub prev_prio: Option<i32>,
    #[prost(int64, optional, tag = "4")]
    pub prev_state: Option<i64>,
    #[prost(string, optional, tag = "5")]
    pub next_comm: Option<String>,
    #[prost(int32, optional, tag = "6")]
    pub next_pid: Option<i32>,
    #[prost(int32, optional, tag = "7")]
    pub next_prio: Option<i32>,
}

/// `sched.proto`: `SchedWakeupFtraceEvent` and `SchedWakeupNewFtraceEvent`
/// (field for field the same).
#[derive(Clone, PartialEq, Message)]
pub struct SchedWakeupFtraceEvent {
    #[prost(string, optional, tag = "1")]
    pub comm: Option<String>,
    #[prost(int32, optional, tag = "2")]
    pub pid: Option<i32>,
    #[prost(int32, optional, tag = "3")]
    pub prio: Option<i32>,
    #[prost(int32, optional, tag = "4")]
    pub success: Option<i32>,
    #[prost(int32, optional, tag = "5")]
    pub target_cpu: Option<i32>,
}

/// `sched.proto`: `SchedWakingFtraceEvent` (the fields of sched_wakeup).
pub type SchedWakingFtraceEvent = SchedWakeupFtraceEvent;

/// `sched.proto`: `SchedMigrateTaskFtraceEvent` (without `running` and
/// `load`, which the kernel's tracepoint does not have).
#[derive(Clone, PartialEq, Message)]
pub struct SchedMigrateTaskFtraceEvent {
    #[prost(string, optional, tag = "1")]
    pub comm: Option<String>,
    #[prost(int32, optional, tag = "2")]
    pub pid: Option<i32>,
    #[prost(int32, optional, tag = "3")]
    pub prio: Option<i32>,
    #[prost(int32, optional, tag = "4")]
    pub orig_cpu: Option<i32>,
    #[prost(int32, optional, tag = "5")]
    pub dest_cpu: Option<i32>,
}

/// `sched.proto`: `SchedProcessExitFtraceEvent`.
#[derive(Clone, PartialEq, Message)]
pub struct SchedProcessExitFtraceEvent {
    #[prost(string, optional, tag = "1")]
    pub comm: Option<String>,
    #[prost(int32, optional, tag = "2")]
    pub pid: Option<i32>,
    #[prost(int32, optional, tag = "3")]
    pub tgid: Option<i32>,
    #[prost(int32, optional, tag = "4")]
    pub prio: Option<i32>,
}

/// `sched.proto`: `SchedProcessForkFtraceEvent`.
#[derive(Clone, PartialEq, Message)]
pub struct SchedProcessForkFtraceEvent {
    #[prost(string, optional, tag = "1")]
    pub parent_comm: Option<String>,
    #[prost(int32, optional, tag = "2")]
    pub parent_pid: Option<i32>,
    #[prost(string, optional, tag = "3")]
    pub child_comm: Option<String>,
    #[prost(int32, optional, tag = "4")]
    pub child_pid: Option<i32>,
}

#[cfg(test)]
mod tests {
    use super::*;

    const KERNEL: &str = "6.18.0-test";

    fn task(tid: i32, tgid: i32, comm: &str) -> Task {
        Task {
            tid,
            tgid,
            comm: comm.into(),
        }
    }

    fn ev(ts_ns: u64, cpu: u32, common_pid: i32, kind: EventKind) -> Event {
        Event {
            ts_ns,
            cpu,
            common_pid,
            kind,
        }
    }

    fn switch(prev_pid: i32, prev_state: u64, next_pid: i32) -> EventKind {
        EventKind::Switch {
            prev_pid,
            prev_prio: 120,
            prev_state,
            next_pid,
            next_prio: 120,
        }
    }

    fn capture() -> Capture {
        Capture {
            events: vec![
                ev(
                    1_000,
                    0,
                    7,
                    EventKind::Waking {
                        pid: 101,
                        prio: 120,
                        target_cpu: 0,
                    },
                ),
                ev(
                    1_100,
                    0,
                    7,
                    EventKind::Wakeup {
                        pid: 101,
                        prio: 120,
                        target_cpu: 0,
                        new: false,
                    },
                ),
                ev(2_000, 0, 0, switch(0, 0, 101)),
                ev(
                    2_500,
                    1,
                    100,
                    EventKind::Wakeup {
                        pid: 102,
                        prio: 99,
                        target_cpu: 1,
                        new: true,
                    },
                ),
                ev(
                    3_000,
                    1,
                    100,
                    EventKind::Migrate {
                        pid: 102,
                        prio: 99,
                        orig_cpu: 1,
                        dest_cpu: 0,
                    },
                ),
                ev(4_000, 0, 101, switch(101, 0x100, 555)),
                ev(5_000, 0, 102, EventKind::Exit { pid: 102, prio: 99 }),
            ],
            tasks: vec![
                task(100, 100, "schedlab"),
                task(101, 101, "worker-0"),
                task(102, 101, "worker-0-t"),
            ],
            cpus: vec![0, 1],
            start_ns: 500,
            end_ns: 6_000,
            lost_events: 0,
            release_ns: None,
        }
    }

    fn bundles(t: &Trace) -> Vec<&FtraceEventBundle> {
        t.packet
            .iter()
            .filter_map(|p| match &p.data {
                Some(packet::Data::FtraceEvents(b)) => Some(b),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn every_event_is_encoded_once_on_its_cpu_with_its_fields() {
        let c = capture();
        let bytes = encode(&c, KERNEL);
        let t = Trace::decode(bytes.as_slice()).unwrap();
        assert_eq!(t, trace(&c, KERNEL), "decodes to what was encoded");
        assert!(
            t.packet
                .iter()
                .all(|p| p.trusted_packet_sequence_id == Some(SEQUENCE_ID))
        );
        let b = bundles(&t);
        assert_eq!(b.len(), 2);
        assert_eq!(b[0].cpu, Some(0));
        assert_eq!(b[1].cpu, Some(1));
        assert_eq!(b[0].event.len() + b[1].event.len(), c.events.len());
        assert_eq!(b[0].lost_events, None);
        let stamps: Vec<u64> = b[0].event.iter().map(|e| e.timestamp.unwrap()).collect();
        assert_eq!(stamps, [1_000, 1_100, 2_000, 4_000, 5_000]);
        let Some(ftrace_event::Event::SchedSwitch(s)) = &b[0].event[3].event else {
            panic!("not a switch: {:?}", b[0].event[3]);
        };
        assert_eq!(
            s,
            &SchedSwitchFtraceEvent {
                prev_comm: Some("worker-0".into()),
                prev_pid: Some(101),
                prev_prio: Some(120),
                prev_state: Some(0x100),
                next_comm: Some("<...>".into()),
                next_pid: Some(555),
                next_prio: Some(120),
            }
        );
        assert_eq!(b[0].event[3].pid, Some(101));
        let Some(ftrace_event::Event::SchedSwitch(s)) = &b[0].event[2].event else {
            panic!("not a switch");
        };
        assert_eq!(s.prev_comm.as_deref(), Some("swapper/0"));
        assert!(matches!(
            &b[0].event[0].event,
            Some(ftrace_event::Event::SchedWaking(w)) if w.pid == Some(101) && w.target_cpu == Some(0)
        ));
        assert!(matches!(
            &b[0].event[1].event,
            Some(ftrace_event::Event::SchedWakeup(w)) if w.comm.as_deref() == Some("worker-0")
        ));
        assert!(matches!(
            &b[1].event[0].event,
            Some(ftrace_event::Event::SchedWakeupNew(w)) if w.prio == Some(99)
        ));
        assert!(matches!(
            &b[1].event[1].event,
            Some(ftrace_event::Event::SchedMigrateTask(m))
                if m.orig_cpu == Some(1) && m.dest_cpu == Some(0)
        ));
        assert!(matches!(
            &b[0].event[4].event,
            Some(ftrace_event::Event::SchedProcessExit(x))
                if x.tgid == Some(101) && x.comm.as_deref() == Some("worker-0-t")
        ));
    }

    #[test]
    fn the_process_tree_names_every_task_and_each_process_by_its_leader() {
        let t = trace(&capture(), KERNEL);
        let Some(packet::Data::SystemInfo(info)) = &t.packet[0].data else {
            panic!("the first packet is not the system info");
        };
        let uts = info.utsname.as_ref().unwrap();
        assert_eq!(uts.sysname.as_deref(), Some("Linux"));
        assert_eq!(uts.release.as_deref(), Some(KERNEL));
        let Some(packet::Data::ProcessTree(tree)) = &t.packet[1].data else {
            panic!("the second packet is not the process tree");
        };
        assert_eq!(t.packet[1].timestamp, Some(500));
        assert_eq!(tree.threads.len(), 3);
        let pids: Vec<(i32, &str)> = tree
            .processes
            .iter()
            .map(|p| (p.pid.unwrap(), p.cmdline[0].as_str()))
            .collect();
        assert_eq!(pids, [(100, "schedlab"), (101, "worker-0")]);
        // A group whose leader was not captured is named by its first thread.
        let tree = process_tree(
            &[task(9, 8, "helper"), task(10, 8, "helper2")],
            &HashMap::new(),
        );
        assert_eq!(tree.processes[0].pid, Some(8));
        assert_eq!(tree.processes[0].cmdline, ["helper"]);
    }

    #[test]
    fn forks_are_encoded_and_a_forked_process_gets_its_parent() {
        let mut c = capture();
        // schedlab (100) forks the worker process 101; 101 forks thread 102.
        c.events = vec![
            ev(
                10,
                1,
                100,
                EventKind::Fork {
                    parent_pid: 100,
                    child_pid: 101,
                },
            ),
            ev(
                20,
                0,
                101,
                EventKind::Fork {
                    parent_pid: 101,
                    child_pid: 102,
                },
            ),
        ];
        let t = trace(&c, KERNEL);
        let Some(packet::Data::ProcessTree(tree)) = &t.packet[1].data else {
            panic!("the second packet is not the process tree");
        };
        let ppids: Vec<(i32, Option<i32>)> = tree
            .processes
            .iter()
            .map(|p| (p.pid.unwrap(), p.ppid))
            .collect();
        // The thread's fork makes no process; 100's own parent was not seen.
        assert_eq!(ppids, [(100, None), (101, Some(100))]);
        // Bundles come CPU by CPU: put the forks back in time order.
        let mut forks: Vec<(u64, u32, SchedProcessForkFtraceEvent)> = bundles(&t)
            .iter()
            .flat_map(|b| b.event.iter().map(move |e| (b.cpu.unwrap(), e)))
            .filter_map(|(cpu, e)| match &e.event {
                Some(ftrace_event::Event::SchedProcessFork(f)) => {
                    Some((e.timestamp.unwrap(), cpu, f.clone()))
                }
                _ => None,
            })
            .collect();
        forks.sort_by_key(|f| f.0);
        let forks: Vec<(u32, SchedProcessForkFtraceEvent)> =
            forks.into_iter().map(|(_, cpu, f)| (cpu, f)).collect();
        assert_eq!(forks.len(), 2);
        assert_eq!(forks[0].0, 1);
        assert_eq!(forks[0].1.parent_comm.as_deref(), Some("schedlab"));
        assert_eq!(forks[0].1.child_pid, Some(101));
        assert_eq!(forks[1].1.child_comm.as_deref(), Some("worker-0-t"));
        assert_eq!(forks[1].1.parent_pid, Some(101));
    }

    #[test]
    fn bundles_are_split_and_lost_events_flag_each_cpus_first_bundle() {
        let mut c = capture();
        c.events = (0..(2 * EVENTS_PER_BUNDLE + 5) as u64)
            .map(|i| ev(i * 10, (i % 2) as u32, 0, switch(0, 0, 0)))
            .collect();
        c.lost_events = 3;
        let t = trace(&c, KERNEL);
        let b = bundles(&t);
        let sizes: Vec<(u32, usize)> = b.iter().map(|b| (b.cpu.unwrap(), b.event.len())).collect();
        assert_eq!(
            sizes,
            [
                (0, EVENTS_PER_BUNDLE),
                (1, EVENTS_PER_BUNDLE),
                (0, 3),
                (1, 2)
            ]
        );
        let lost: Vec<Option<bool>> = b.iter().map(|b| b.lost_events).collect();
        assert_eq!(lost, [Some(true), Some(true), None, None]);
    }

    #[test]
    fn an_empty_capture_is_a_trace_with_only_its_system_info_and_process_tree() {
        let t = trace(&Capture::default(), KERNEL);
        assert_eq!(t.packet.len(), 2);
        assert!(bundles(&t).is_empty());
    }

    #[test]
    fn field_numbers_are_perfettos_on_the_wire() {
        // A switch event alone: FtraceEvent{timestamp=1 (tag 0x08), pid=2
        // (0x10), sched_switch=4 (0x22, length-delimited)} whose first field
        // is prev_comm=1 (0x0a).
        let names = Names::new(&[]);
        let bytes = ftrace_event(&ev(5, 0, 3, switch(0, 0, 0)), &names).encode_to_vec();
        assert_eq!(&bytes[..5], &[0x08, 5, 0x10, 3, 0x22]);
        assert_eq!(bytes[6], 0x0a);
        // sched_migrate_task = 491: tag (491 << 3 | 2) = 3930 as a varint.
        let m = ev(
            5,
            0,
            3,
            EventKind::Migrate {
                pid: 1,
                prio: 1,
                orig_cpu: 0,
                dest_cpu: 1,
            },
        );
        let bytes = ftrace_event(&m, &names).encode_to_vec();
        assert_eq!(&bytes[4..6], &[0xda, 0x1e]);
    }
}
