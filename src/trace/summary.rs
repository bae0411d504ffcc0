//! Per-process and per-CPU figures of a traced run, from its derived slices,
//! wake-ups and migrations: slice lengths, on-CPU time, how switches ended,
//! migrations and wake-up-to-run latency per process; utilisation and gaps
//! per CPU. A task forked from one of the run's is counted under its
//! parent's process ([`process_of`]): a program's tree as one.

use std::collections::BTreeMap;

// foldhash: `within` looks up every slice's pid.
use foldhash::HashMap;

use super::derive::Derived;
use super::event::{Capture, EventKind, SwitchEnd};
use crate::workload::latency::Latency;

/// What the trace saw of one process (all its threads).
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessTrace {
    /// The process id (thread group).
    pub tgid: i32,
    /// Slices in the window, clipped ones included.
    pub slices: u64,
    /// Lengths of the complete slices (switch-in to switch-out inside the
    /// window), ns.
    pub slice_ns: Latency,
    /// CPU time in the window (clipped slices included), ns.
    pub oncpu_ns: u64,
    /// Slices ended by preemption (`R+`).
    pub preempted: u64,
    /// Slices ended by the task still runnable (`R`: sched_yield). The
    /// kernel counts these in rusage's involuntary switches (`nivcsw`).
    pub yielded: u64,
    /// Slices ended by sleeping or exiting: rusage's `nvcsw`.
    pub voluntary: u64,
    pub migrations: u64,
    /// Wake-up-to-run latency (switch-in − sched_waking), ns.
    pub wake_ns: Latency,
    /// The same process inside its own work window, when that window is
    /// known (stored runs; see [`within`]).
    pub work: Option<WithinWindow>,
    /// CPU time of repaired gaps next to one of its threads (see
    /// [`super::derive::Repair`]): its on-CPU time may be this much more.
    pub unattributed_ns: u64,
    /// Its threads' switches out the kernel never emitted (repaired gaps
    /// after one of them): its switch count may be this much more.
    pub missing_switches: u64,
}

impl ProcessTrace {
    fn new(tgid: i32) -> ProcessTrace {
        ProcessTrace {
            tgid,
            slices: 0,
            slice_ns: Latency::new(),
            oncpu_ns: 0,
            preempted: 0,
            yielded: 0,
            voluntary: 0,
            migrations: 0,
            wake_ns: Latency::new(),
            work: None,
            unattributed_ns: 0,
            missing_switches: 0,
        }
    }

    /// Switches as rusage counts them: (voluntary, involuntary).
    pub fn rusage_switches(&self) -> (u64, u64) {
        (self.voluntary, self.preempted + self.yielded)
    }
}

/// What the trace saw of one CPU.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuTrace {
    pub cpu: u32,
    /// The traced window, ns.
    pub window_ns: u64,
    /// Time the run's tasks held the CPU, ns.
    pub busy_ns: u64,
    /// Stretches in the window when none of the run's tasks held the CPU
    /// (idle, or other programs), ns; the unattributed stretches of
    /// repaired gaps are not among them.
    pub gap_ns: Latency,
    /// Time of repaired gaps no task can be given, ns.
    pub unattributed_ns: u64,
}

impl CpuTrace {
    /// Share of the window the run's tasks held the CPU (0..=1).
    pub fn utilisation(&self) -> f64 {
        if self.window_ns == 0 {
            0.0
        } else {
            self.busy_ns as f64 / self.window_ns as f64
        }
    }
}

/// The process each traced task is counted under: its own (`tgid`), or,
/// for a task forked while traced from one of the run's, the process its
/// parent is counted under. So a program's whole tree (`kind = "command"`)
/// is counted under its top process, as its record's kernel figures (the
/// tree's cgroup and exit records) are.
pub fn process_of(cap: &Capture) -> HashMap<i32, i32> {
    let mut of: HashMap<i32, i32> = cap.tasks.iter().map(|t| (t.tid, t.tgid)).collect();
    for e in &cap.events {
        if let EventKind::Fork {
            parent_pid,
            child_pid,
        } = e.kind
            && let Some(&root) = of.get(&parent_pid)
        {
            of.insert(child_pid, root);
        }
    }
    of
}

/// Per-process figures, by process id (a program's tree under its top
/// process, see [`process_of`]).
pub fn processes(cap: &Capture, d: &Derived) -> Vec<ProcessTrace> {
    let tgid = process_of(cap);
    let of = |pid: i32| tgid.get(&pid).copied().unwrap_or(pid);
    let mut by: BTreeMap<i32, ProcessTrace> = BTreeMap::new();
    for t in &cap.tasks {
        by.entry(of(t.tid))
            .or_insert_with(|| ProcessTrace::new(of(t.tid)));
    }
    for s in &d.slices {
        let p = by
            .entry(of(s.pid))
            .or_insert_with(|| ProcessTrace::new(of(s.pid)));
        p.slices += 1;
        p.oncpu_ns += s.len_ns();
        if s.complete() {
            p.slice_ns.record_ns(s.len_ns());
        }
        match s.end {
            // Throttling (only the model's) takes the CPU as a preemption.
            Some(SwitchEnd::Preempted | SwitchEnd::Throttled) => p.preempted += 1,
            Some(SwitchEnd::Yielded) => p.yielded += 1,
            Some(SwitchEnd::Blocked | SwitchEnd::Exited) => p.voluntary += 1,
            None => {}
        }
    }
    for m in &d.migrations {
        by.entry(of(m.pid))
            .or_insert_with(|| ProcessTrace::new(of(m.pid)))
            .migrations += 1;
    }
    for r in &d.repairs {
        let (before, after) = (of(r.before_pid), of(r.after_pid));
        for tgid in [before, after] {
            if let Some(p) = by.get_mut(&tgid) {
                p.unattributed_ns += r.unattributed_ns();
            }
            if before == after {
                break;
            }
        }
        if let Some(p) = by.get_mut(&before) {
            p.missing_switches += 1;
        }
    }
    for w in &d.wakeups {
        if let Some(ns) = w.latency_ns() {
            by.entry(of(w.pid))
                .or_insert_with(|| ProcessTrace::new(of(w.pid)))
                .wake_ns
                .record_ns(ns);
        }
    }
    by.into_values().collect()
}

/// A process's own measured window (its work, which its rusage and
/// schedstat figures cover), on the trace's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkWindow {
    pub tgid: i32,
    pub from_ns: u64,
    pub to_ns: u64,
}

/// What the trace saw of one process inside its work window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WithinWindow {
    /// On-CPU time of its threads inside the window, ns.
    pub oncpu_ns: u64,
    /// Its threads' switches out of a CPU inside the window (as rusage's
    /// nvcsw + nivcsw count them).
    pub switches: u64,
    /// Unattributed time of repaired gaps next to its threads inside the
    /// window, ns: its on-CPU time there may be this much more.
    pub unattributed_ns: u64,
    /// Switches out of its threads inside the window the kernel never
    /// emitted (repaired gaps).
    pub missing_switches: u64,
}

/// The process's on-CPU time and switches inside its work window: the same
/// window as its rusage and schedstat figures, so the two observers can be
/// compared without the start-up and exit around the work.
pub fn within(cap: &Capture, d: &Derived, w: &WorkWindow) -> WithinWindow {
    let tgid = process_of(cap);
    let mut out = WithinWindow {
        oncpu_ns: 0,
        switches: 0,
        unattributed_ns: 0,
        missing_switches: 0,
    };
    let of = |pid: i32| tgid.get(&pid).copied().unwrap_or(pid);
    for r in &d.repairs {
        let (a, b) = (r.from_ns.max(w.from_ns), r.to_ns.min(w.to_ns));
        if of(r.before_pid) == w.tgid || of(r.after_pid) == w.tgid {
            out.unattributed_ns += b.saturating_sub(a);
        }
        if of(r.before_pid) == w.tgid && r.from_ns >= w.from_ns && r.from_ns < w.to_ns {
            out.missing_switches += 1;
        }
    }
    for s in d
        .slices
        .iter()
        .filter(|s| tgid.get(&s.pid).copied().unwrap_or(s.pid) == w.tgid)
    {
        let (a, b) = (s.start_ns.max(w.from_ns), s.end_ns.min(w.to_ns));
        out.oncpu_ns += b.saturating_sub(a);
        if s.end.is_some() && s.end_ns > w.from_ns && s.end_ns <= w.to_ns {
            out.switches += 1;
        }
    }
    out
}

/// Per-CPU figures for every traced CPU (and any other a slice was on).
pub fn cpus(cap: &Capture, d: &Derived) -> Vec<CpuTrace> {
    let (w0, w1) = (cap.start_ns, cap.end_ns.max(cap.start_ns));
    // (start, end, held by the run): unattributed stretches of repaired
    // gaps are neither busy nor gaps.
    let mut by: BTreeMap<u32, Vec<(u64, u64, bool)>> =
        cap.cpus.iter().map(|&c| (c, Vec::new())).collect();
    for s in &d.slices {
        by.entry(s.cpu)
            .or_default()
            .push((s.start_ns, s.end_ns, true));
    }
    for r in &d.repairs {
        by.entry(r.cpu)
            .or_default()
            .push((r.from_ns, r.to_ns, false));
    }
    by.into_iter()
        .map(|(cpu, mut spans)| {
            spans.sort_unstable();
            let mut busy_ns = 0;
            let mut unattributed_ns = 0;
            let mut gap_ns = Latency::new();
            let mut at = w0;
            for (s, e, held) in spans {
                if s > at {
                    gap_ns.record_ns(s - at);
                }
                let from = s.max(at);
                if e > from {
                    if held {
                        busy_ns += e - from;
                    } else {
                        unattributed_ns += e - from;
                    }
                    at = e;
                }
            }
            if w1 > at {
                gap_ns.record_ns(w1 - at);
            }
            CpuTrace {
                cpu,
                window_ns: w1 - w0,
                busy_ns,
                gap_ns,
                unattributed_ns,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::Event;
    use crate::trace::derive::derive;
    use crate::trace::derive::tests::*;

    #[test]
    fn within_a_work_window_counts_only_its_time_and_switches() {
        // 10 runs 100..200 (preempted), 300..350 (sleeps), 420..500 (dies).
        let cap = capture(
            0,
            1_000,
            &[10, 11],
            vec![
                sw(100, 0, 0, 0, 10),
                sw(200, 0, 10, PREEMPTED, 11),
                sw(300, 0, 11, YIELDED, 10),
                sw(350, 0, 10, SLEEPING, 11),
                sw(420, 1, 0, 0, 10),
                sw(500, 1, 10, DEAD, 0),
            ],
        );
        let d = derive(&cap);
        let w = |from_ns, to_ns| WorkWindow {
            tgid: 10,
            from_ns,
            to_ns,
        };
        // The work from 150 to 450: half of the first slice, the second,
        // the start of the third; the switches at 200 and 350, not the
        // exit's at 500.
        assert_eq!(
            within(&cap, &d, &w(150, 450)),
            WithinWindow {
                oncpu_ns: 50 + 50 + 30,
                switches: 2,
                unattributed_ns: 0,
                missing_switches: 0,
            }
        );
        assert_eq!(
            within(&cap, &d, &w(0, 1_000)),
            WithinWindow {
                oncpu_ns: 100 + 50 + 80,
                switches: 3,
                unattributed_ns: 0,
                missing_switches: 0,
            }
        );
        // A switch exactly at the window's start belongs before it.
        assert_eq!(within(&cap, &d, &w(200, 300)).switches, 0);
    }

    fn fork(ts_ns: u64, parent_pid: i32, child_pid: i32) -> Event {
        Event {
            ts_ns,
            cpu: 0,
            common_pid: parent_pid,
            kind: EventKind::Fork {
                parent_pid,
                child_pid,
            },
        }
    }

    #[test]
    fn a_forked_tree_is_counted_under_its_top_process() {
        // 10 forks 20, 20 forks 21 (both processes of their own), 11 is
        // another worker; 20 and 21 run 100 ns each, 10 and 11 50 each.
        let mut cap = capture(
            0,
            1_000,
            &[10, 11, 20, 21],
            vec![
                sw(100, 0, 0, 0, 10),
                fork(120, 10, 20),
                sw(150, 0, 10, SLEEPING, 20),
                fork(170, 20, 21),
                sw(250, 0, 20, DEAD, 21),
                sw(350, 0, 21, DEAD, 11),
                sw(400, 0, 11, DEAD, 0),
            ],
        );
        let groups = process_of(&cap);
        assert_eq!(
            [10, 11, 20, 21].map(|t| groups[&t]),
            [10, 11, 10, 10],
            "{groups:?}"
        );
        let d = derive(&cap);
        let p = processes(&cap, &d);
        assert_eq!(
            p.iter().map(|p| (p.tgid, p.oncpu_ns)).collect::<Vec<_>>(),
            vec![(10, 50 + 100 + 100), (11, 50)]
        );
        let w = WorkWindow {
            tgid: 10,
            from_ns: 0,
            to_ns: 1_000,
        };
        assert_eq!(within(&cap, &d, &w).oncpu_ns, 250);
        assert_eq!(within(&cap, &d, &w).switches, 3);
        // Without its fork a task stays the process it is.
        cap.events
            .retain(|e| !matches!(e.kind, EventKind::Fork { .. }));
        assert_eq!(process_of(&cap)[&21], 21);
    }

    #[test]
    fn process_figures_count_ends_time_and_wakeups() {
        let cap = capture(
            0,
            1_000,
            &[10, 11],
            vec![
                sw(100, 0, 0, 0, 10),
                sw(200, 0, 10, PREEMPTED, 11),
                sw(300, 0, 11, YIELDED, 10),
                sw(350, 0, 10, SLEEPING, 11),
                waking(400, 1, 0, 10, 1),
                migrate(401, 1, 10, 0, 1),
                wakeup(402, 1, 0, 10, 1),
                sw(420, 1, 0, 0, 10),
                sw(500, 1, 10, DEAD, 0),
            ],
        );
        let d = derive(&cap);
        let p = processes(&cap, &d);
        assert_eq!(p.len(), 2);
        let a = &p[0];
        assert_eq!(a.tgid, 10);
        assert_eq!(a.slices, 3);
        assert_eq!(a.oncpu_ns, 100 + 50 + 80);
        assert_eq!((a.preempted, a.yielded, a.voluntary), (1, 0, 2));
        assert_eq!(a.migrations, 1);
        assert_eq!(a.wake_ns.count(), 1);
        // HdrHistogram keeps 16 ns resolution at the bottom.
        assert!(a.wake_ns.quantile_ns(0.5).abs_diff(20) < 16);
        assert_eq!(a.slice_ns.count(), 3);
        assert_eq!(a.rusage_switches(), (2, 1));
        let b = &p[1];
        // 11's last slice (from 350) is still running at the end: counted,
        // timed to the window's end, not in the distribution.
        assert_eq!(b.slices, 2);
        assert_eq!(b.slice_ns.count(), 1);
        assert_eq!(b.oncpu_ns, 100 + 650);
        assert_eq!(b.rusage_switches(), (0, 1));
    }

    #[test]
    fn cpu_utilisation_and_gaps_cover_the_window() {
        let cap = capture(
            0,
            1_000,
            &[10],
            vec![
                sw(100, 0, 0, 0, 10),
                sw(300, 0, 10, SLEEPING, 0),
                sw(600, 0, 0, 0, 10),
                sw(700, 0, 10, SLEEPING, 0),
            ],
        );
        let c = cpus(&cap, &derive(&cap));
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].busy_ns, 300);
        assert!((c[0].utilisation() - 0.3).abs() < 1e-12);
        assert_eq!(c[0].gap_ns.count(), 3);
        assert!(c[0].gap_ns.percentiles().max_ns.abs_diff(300) < 16);
        // CPU 1 saw nothing of the run: one gap, the whole window.
        assert_eq!(c[1].busy_ns, 0);
        assert_eq!(c[1].gap_ns.count(), 1);
    }

    #[test]
    fn a_repaired_gap_is_neither_held_nor_a_gap_and_is_charged_to_both_sides() {
        // 10 runs 0..100 on CPU 0, last seen at 100 (a waking it fired);
        // the switch 10 → 11 was never emitted; 11 is first seen at 150
        // and switched out at 200; idle to the window's end at 1000.
        let cap = capture(
            0,
            1_000,
            &[10, 11],
            vec![
                sw(0, 0, 0, 0, 10),
                waking(100, 0, 10, 99, 0),
                waking(150, 0, 11, 99, 0),
                sw(200, 0, 11, SLEEPING, 0),
            ],
        );
        let d = derive(&cap);
        let c = cpus(&cap, &d);
        assert_eq!(c[0].busy_ns, 100 + 50);
        assert_eq!(c[0].unattributed_ns, 50);
        // One gap, 200..1000: the unattributed 100..150 is not one.
        assert_eq!(c[0].gap_ns.count(), 1);
        let p = processes(&cap, &d);
        assert_eq!(
            (p[0].tgid, p[0].unattributed_ns, p[0].missing_switches),
            (10, 50, 1)
        );
        assert_eq!(
            (p[1].tgid, p[1].unattributed_ns, p[1].missing_switches),
            (11, 50, 0)
        );
        let w = within(
            &cap,
            &d,
            &WorkWindow {
                tgid: 10,
                from_ns: 0,
                to_ns: 120,
            },
        );
        assert_eq!(
            (w.oncpu_ns, w.unattributed_ns, w.missing_switches),
            (100, 20, 1)
        );
    }
}
