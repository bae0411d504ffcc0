//! The model's predicted per-CPU timeline in the form the store keeps a
//! kernel trace's: each engine [`Segment`] a slice with how it ended,
//! by CPU then start, each engine [`Wake`] a wake-up with its wait until
//! the task ran, the migrations between a task's segments, under a
//! capture without events. The model emits no kernel events and none are
//! invented: the capture's events are empty, and what needs them (the
//! trace export) says so instead. Pure.

use super::engine::{Segment, SegmentEnd, Wake, WakeCause};
use super::mapping::SimRun;
use crate::trace::derive::{Derived, Migration, Slice, WakeUp};
use crate::trace::summary::WorkWindow;
use crate::trace::{Capture, SwitchEnd, Task};

/// The timeline's type sits in `trace` (the launcher carries it and knows
/// nothing of the model).
pub use crate::trace::Prediction;

/// The task id a process of a simulated run has in its timeline: its
/// index + 1 (0 is the idle task in a kernel trace; the model's processes
/// have no pid).
pub fn task_id(index: u32) -> i32 {
    i32::try_from(index).map_or(i32::MAX, |i| i.saturating_add(1))
}

fn end_of(end: Option<SegmentEnd>) -> Option<SwitchEnd> {
    end.map(|e| match e {
        SegmentEnd::Preempted => SwitchEnd::Preempted,
        SegmentEnd::Throttled => SwitchEnd::Throttled,
        SegmentEnd::Blocked => SwitchEnd::Blocked,
        SegmentEnd::Exited => SwitchEnd::Exited,
    })
}

/// The slices of `segments`, by CPU then start (the order a kernel
/// trace's slices are stored and drawn in).
pub fn slices(segments: &[Segment]) -> Vec<Slice> {
    let mut out: Vec<Slice> = segments
        .iter()
        .map(|s| Slice {
            pid: task_id(s.task),
            cpu: s.cpu,
            start_ns: s.start_ns,
            end_ns: s.end_ns,
            end: end_of(s.end),
            start_clipped: false,
            start_repaired: false,
            end_repaired: false,
        })
        .collect();
    out.sort_by_key(|s| (s.cpu, s.start_ns, s.end_ns));
    out
}

/// The model's wake-ups as a trace's, in time order: became runnable at
/// `waking_ns` (= `wakeup_ns`: the model puts a task on its run queue at
/// once), by a peer (its task id) or else by nobody (0, as an interrupt:
/// a timer, the RT period, the DEADLINE replenishment timer), the release
/// marked `new` (a task's first time runnable, as `sched_wakeup_new`).
pub fn wakeups(wakes: &[Wake]) -> Vec<WakeUp> {
    let mut out: Vec<WakeUp> = wakes
        .iter()
        .map(|w| WakeUp {
            pid: task_id(w.task),
            waker_pid: match w.cause {
                WakeCause::Peer(p) => task_id(p),
                _ => 0,
            },
            waking_ns: Some(w.at_ns),
            wakeup_ns: Some(w.at_ns),
            target_cpu: w.target_cpu,
            new: w.cause == WakeCause::Released,
            switch_in_ns: w.run_ns,
            cpu: w.run_cpu,
        })
        .collect();
    out.sort_by_key(|w| w.waking_ns);
    out
}

/// Each task's moves between CPUs: a segment on another CPU than the
/// task's previous one, at the later segment's start.
pub fn migrations(segments: &[Segment]) -> Vec<Migration> {
    let mut by_time: Vec<&Segment> = segments.iter().collect();
    by_time.sort_by_key(|s| (s.start_ns, s.cpu));
    let mut last_cpu: std::collections::HashMap<u32, u32> = std::collections::HashMap::new();
    let mut out = Vec::new();
    for s in by_time {
        if let Some(prev) = last_cpu.insert(s.task, s.cpu)
            && prev != s.cpu
        {
            out.push(Migration {
                pid: task_id(s.task),
                ts_ns: s.start_ns,
                orig_cpu: prev,
                dest_cpu: s.cpu,
            });
        }
    }
    out
}

/// The prediction of a simulated run on `cpus` CPUs, on the model's clock
/// (from 0; the record's times count from `release_ns`); None when the
/// model did not carry the run out (no timeline).
pub fn prediction(sim: &SimRun, cpus: usize) -> Option<Prediction> {
    if sim.timeline.is_empty() {
        return None;
    }
    let tasks = sim
        .record
        .processes
        .iter()
        .map(|p| Task {
            tid: task_id(p.index),
            tgid: task_id(p.index),
            comm: format!("{} {}", p.role, p.index),
        })
        .collect();
    let capture = Capture {
        events: Vec::new(),
        tasks,
        cpus: (0..cpus.max(1) as u32).collect(),
        start_ns: 0,
        // A timeline kept in part ends where it stops being whole.
        end_ns: match sim.timeline_cut_ns {
            Some(cut) => cut,
            None => sim
                .end_ns
                .max(sim.timeline.iter().map(|s| s.end_ns).max().unwrap_or(0)),
        },
        release_ns: Some(sim.release_ns),
        lost_events: 0,
    };
    let cut = sim.timeline_cut_ns.unwrap_or(u64::MAX);
    let kept: Vec<Segment> = sim
        .timeline
        .iter()
        .filter(|s| s.start_ns < cut)
        .copied()
        .collect();
    let woke: Vec<Wake> = sim
        .wakes
        .iter()
        .filter(|w| w.at_ns < cut)
        .copied()
        .collect();
    let derived = Derived {
        slices: slices(&kept),
        wakeups: wakeups(&woke),
        migrations: migrations(&kept),
        ..Derived::default()
    };
    let windows = sim
        .record
        .processes
        .iter()
        .filter_map(|p| {
            Some(WorkWindow {
                tgid: task_id(p.index),
                from_ns: sim.release_ns + p.start_ns?,
                to_ns: sim.release_ns + p.end_ns?,
            })
        })
        .collect();
    Some(Prediction {
        capture,
        derived,
        windows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(cpu: u32, task: u32, start_ns: u64, end_ns: u64, end: Option<SegmentEnd>) -> Segment {
        Segment {
            cpu,
            task,
            start_ns,
            end_ns,
            end,
        }
    }

    #[test]
    fn each_segment_is_a_slice_with_its_end_by_cpu_then_start() {
        let segs = [
            seg(1, 2, 50, 90, None),
            seg(0, 1, 30, 40, Some(SegmentEnd::Exited)),
            seg(0, 0, 0, 10, Some(SegmentEnd::Preempted)),
            seg(0, 1, 10, 20, Some(SegmentEnd::Throttled)),
            seg(0, 0, 20, 30, Some(SegmentEnd::Blocked)),
        ];
        let s = slices(&segs);
        let got: Vec<(u32, i32, u64, u64, Option<SwitchEnd>)> = s
            .iter()
            .map(|s| (s.cpu, s.pid, s.start_ns, s.end_ns, s.end))
            .collect();
        assert_eq!(
            got,
            [
                (0, 1, 0, 10, Some(SwitchEnd::Preempted)),
                (0, 2, 10, 20, Some(SwitchEnd::Throttled)),
                (0, 1, 20, 30, Some(SwitchEnd::Blocked)),
                (0, 2, 30, 40, Some(SwitchEnd::Exited)),
                (1, 3, 50, 90, None),
            ]
        );
        // Nothing is marked as a kernel trace's repair or clip.
        assert!(
            s.iter()
                .all(|s| !s.start_clipped && !s.start_repaired && !s.end_repaired)
        );
        // Only the last, still running when the model stopped, is not complete.
        assert_eq!(s.iter().filter(|s| s.complete()).count(), 4);
    }

    #[test]
    fn each_wake_is_a_wake_up_with_its_waker_and_switch_in() {
        let wake = |task, cause, at_ns, run: Option<(u64, u32)>| Wake {
            task,
            cause,
            at_ns,
            target_cpu: 1,
            run_ns: run.map(|r| r.0),
            run_cpu: run.map(|r| r.1),
        };
        let w = wakeups(&[
            wake(0, WakeCause::Released, 0, Some((0, 1))),
            wake(1, WakeCause::Peer(0), 10, Some((25, 0))),
            wake(2, WakeCause::Unthrottled, 30, Some((30, 1))),
            wake(0, WakeCause::Timer, 40, None),
        ]);
        // (pid, waker, new, waking, switch-in, CPU run on)
        type Row = (i32, i32, bool, Option<u64>, Option<u64>, Option<u32>);
        let got: Vec<Row> = w
            .iter()
            .map(|w| {
                (
                    w.pid,
                    w.waker_pid,
                    w.new,
                    w.waking_ns,
                    w.switch_in_ns,
                    w.cpu,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (1, 0, true, Some(0), Some(0), Some(1)),
                (2, 1, false, Some(10), Some(25), Some(0)),
                (3, 0, false, Some(30), Some(30), Some(1)),
                (1, 0, false, Some(40), None, None),
            ]
        );
        // Waking and on the run queue at once; the wait is the trace's
        // wake-up-to-run latency.
        assert!(
            w.iter()
                .all(|w| w.wakeup_ns == w.waking_ns && w.target_cpu == 1)
        );
        assert_eq!(w[1].latency_ns(), Some(15));
        assert_eq!(w[3].latency_ns(), None);
    }

    #[test]
    fn a_task_on_another_cpu_than_its_last_segment_migrated() {
        let segs = [
            seg(0, 0, 0, 10, Some(SegmentEnd::Preempted)),
            seg(1, 0, 15, 20, Some(SegmentEnd::Blocked)),
            seg(1, 0, 30, 40, Some(SegmentEnd::Preempted)),
            seg(0, 0, 40, 50, Some(SegmentEnd::Exited)),
            seg(1, 1, 0, 15, Some(SegmentEnd::Exited)),
        ];
        let m: Vec<(i32, u64, u32, u32)> = migrations(&segs)
            .iter()
            .map(|m| (m.pid, m.ts_ns, m.orig_cpu, m.dest_cpu))
            .collect();
        assert_eq!(m, [(1, 15, 0, 1), (1, 40, 1, 0)]);
    }
}
