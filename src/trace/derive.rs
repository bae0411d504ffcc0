//! The slices and wake-ups of a [`Capture`]: every stretch a task of the run
//! held a CPU (from its switch-in to its switch-out on that CPU) and every
//! wake-up of one of them from sleep to the moment it got a CPU.
//!
//! Nothing is invented at the window's edges: a slice under way when the
//! window opened starts at the window's start and is marked
//! (`start_clipped`); one still under way when it closed ends at the
//! window's end with no end reason (`end: None`).
//!
//! A `sched_switch` whose `prev` is not the task the trace put on that CPU
//! means a switch the trace does not hold. Lost events are one cause; the
//! other is the kernel itself: on the 2-CPU VM (a patched 6.18) some
//! switches are never emitted at all, by ftrace or by `perf sched record`
//! on the same load (README, "Kernel traces"). Such a gap is repaired from
//! the events around it ([`Repair`]): every event carries the task current
//! when it fired (`common_pid`), so the task the trace had on the CPU was
//! still there at its last event, and the switch's `prev` already ran at its
//! first. The slice of the one ends at the first, the slice of the other
//! starts at the second, both marked, and the stretch between is
//! unattributed, counted and stored, never given to anyone. When the events
//! contradict that (the `prev` was seen on the CPU before the other's last
//! event, with no switch between), the gap is refused ([`Refusal`]): its
//! slices are dropped and the trace is unusable. Switches between two tasks
//! outside the run are not in the capture by design, and a gap among them
//! contradicts nothing.

// foldhash, not std's SipHash: the walk looks up a pid on every event
// (about a third of analysing a traced pingpong run went to SipHash).
use foldhash::{HashMap, HashMapExt, HashSet};

use super::event::{Capture, Event, EventKind, SwitchEnd};

/// One stretch of CPU time of one task of the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slice {
    /// The task (thread id).
    pub pid: i32,
    pub cpu: u32,
    pub start_ns: u64,
    pub end_ns: u64,
    /// How the slice ended; None when the task still held the CPU at the
    /// window's end (`end_ns` is then the window's end).
    pub end: Option<SwitchEnd>,
    /// The task already held the CPU when the window opened (`start_ns` is
    /// then the window's start).
    pub start_clipped: bool,
    /// Its switch-in is missing: `start_ns` is the task's first event on the
    /// CPU after the gap ([`Repair`]); it may have started up to the
    /// repair's unattributed stretch earlier.
    pub start_repaired: bool,
    /// Its switch-out is missing: `end_ns` is the task's last event on the
    /// CPU before the gap (`end` is None); it may have run up to the
    /// repair's unattributed stretch longer.
    pub end_repaired: bool,
}

impl Slice {
    pub fn len_ns(&self) -> u64 {
        self.end_ns - self.start_ns
    }

    /// Seen from its switch-in to its switch-out, neither edge clipped or
    /// repaired.
    pub fn complete(&self) -> bool {
        !self.start_clipped && !self.start_repaired && !self.end_repaired && self.end.is_some()
    }
}

/// A switch the trace does not hold, repaired from the events around it: on
/// `cpu`, `before_pid` (the task the trace had there) was last seen at
/// `from_ns` and `after_pid` (the `prev` of the next switch) first seen at
/// `to_ns`; who held the CPU between is unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repair {
    pub cpu: u32,
    pub before_pid: i32,
    pub after_pid: i32,
    pub from_ns: u64,
    pub to_ns: u64,
}

impl Repair {
    /// The stretch no task of the trace can be given, ns.
    pub fn unattributed_ns(&self) -> u64 {
        self.to_ns - self.from_ns
    }
}

/// A switch the trace does not hold that its events cannot repair: on
/// `cpu`, at the switch at `ts_ns` out of `after_pid`, the trace had
/// `before_pid` there, and `after_pid` had already been seen on the CPU
/// before `before_pid`'s last event there, with no switch between.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal {
    pub cpu: u32,
    pub ts_ns: u64,
    pub before_pid: i32,
    pub after_pid: i32,
}

/// One wake-up of a sleeping task of the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WakeUp {
    /// The task woken (thread id).
    pub pid: i32,
    /// The task that woke it (`common_pid` of `sched_waking`, or of
    /// `sched_wakeup_new` for a new task; 0 is an interrupt on an idle CPU).
    pub waker_pid: i32,
    /// `sched_waking`; None for a new task (the kernel fires only
    /// `sched_wakeup_new`) or a waking before the trace began.
    pub waking_ns: Option<u64>,
    /// `sched_wakeup` / `sched_wakeup_new`: on a run queue (None for an
    /// ordinary wake-up in captures without `sched_wakeup`).
    pub wakeup_ns: Option<u64>,
    /// The CPU whose run queue it was put on: of `sched_wakeup` when seen
    /// (schedlab no longer records it), else the `sched_waking` target (the
    /// task's CPU as it was woken) or, when the waker moved it, the
    /// destination of the `sched_migrate_task` that followed.
    pub target_cpu: u32,
    /// `sched_wakeup_new`: the first wake-up of a new task.
    pub new: bool,
    /// Its next switch-in; None when the window closed first.
    pub switch_in_ns: Option<u64>,
    /// The CPU it then ran on.
    pub cpu: Option<u32>,
}

impl WakeUp {
    /// Wake-up-to-run latency, switch-in − waking, when both were traced.
    pub fn latency_ns(&self) -> Option<u64> {
        Some(self.switch_in_ns?.saturating_sub(self.waking_ns?))
    }

    /// The first stamp of the wake-up.
    fn first_ns(&self) -> u64 {
        self.waking_ns.or(self.wakeup_ns).unwrap_or(0)
    }
}

/// One task moved between CPUs (`sched_migrate_task`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Migration {
    pub pid: i32,
    pub ts_ns: u64,
    pub orig_cpu: u32,
    pub dest_cpu: u32,
}

/// Everything derived from one capture, restricted to the window.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Derived {
    /// By CPU, then start.
    pub slices: Vec<Slice>,
    /// In order of their first stamp.
    pub wakeups: Vec<WakeUp>,
    pub migrations: Vec<Migration>,
    /// Switches whose `prev` was not the task the trace had on that CPU
    /// (repaired and refused).
    pub mismatched_switches: u64,
    /// The gaps repaired, in time order (inside the window).
    pub repairs: Vec<Repair>,
    /// The gaps refused, in time order (inside the window).
    pub refusals: Vec<Refusal>,
}

/// What the trace knows of a task between events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Running,
    Runnable,
    Blocked,
}

/// The run's tasks: the capture's named tasks, or, when it names none,
/// every task but the idle task (pid 0).
pub struct RunTasks(Option<HashSet<i32>>);

impl RunTasks {
    pub fn of(cap: &Capture) -> RunTasks {
        if cap.tasks.is_empty() {
            RunTasks(None)
        } else {
            RunTasks(Some(cap.tasks.iter().map(|t| t.tid).collect()))
        }
    }

    pub fn contains(&self, pid: i32) -> bool {
        match &self.0 {
            Some(set) => set.contains(&pid),
            None => pid != 0,
        }
    }
}

/// A slice as the events show it, before clipping to the window: None
/// stamps are before the first or after the last event.
struct Open {
    pid: i32,
    start_ns: Option<u64>,
    /// Since the switch that opened it, the stamp and `common_pid` of each
    /// other event on the CPU: the evidence a repair is made from.
    seen: Vec<(u64, i32)>,
}

/// How the events since the last switch on a CPU settle a switch whose
/// `prev` is not the task the trace had there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Settled {
    /// `open` was last seen at `from_ns`, `prev` first at `to_ns` after it.
    Repaired { from_ns: u64, to_ns: u64 },
    /// `prev` ran on the CPU before `open`'s last event there.
    Refused,
}

/// Settle a switch at `ts_ns` out of `prev` while the trace had `open` on
/// the CPU: `open` held it at least until its last event there (its
/// switch-in when it has none; the window's start, `w0`, when that is
/// before the trace), `prev` from its first event there after that (at
/// the latest, the switch itself).
fn settle(open: &Open, prev: i32, ts_ns: u64, w0: u64) -> Settled {
    let last_open = open
        .seen
        .iter()
        .filter(|(_, pid)| *pid == open.pid)
        .map(|(ts, _)| *ts)
        .max();
    let from_ns = last_open.or(open.start_ns).unwrap_or(w0).min(ts_ns);
    if open
        .seen
        .iter()
        .any(|&(ts, pid)| pid == prev && last_open.is_some_and(|l| ts < l))
    {
        return Settled::Refused;
    }
    let to_ns = open
        .seen
        .iter()
        .filter(|&&(ts, pid)| pid == prev && ts >= from_ns)
        .map(|(ts, _)| *ts)
        .min()
        .unwrap_or(ts_ns);
    Settled::Repaired { from_ns, to_ns }
}

/// Derive slices, wake-ups and migrations of the run's tasks, repairing
/// or refusing the switches the trace does not hold (see the module docs).
pub fn derive(cap: &Capture) -> Derived {
    let mut d = Deriver {
        run: RunTasks::of(cap),
        w0: cap.start_ns,
        w1: cap.end_ns.max(cap.start_ns),
        out: Derived::default(),
        on_cpu: HashMap::new(),
        state: HashMap::new(),
        pending: HashMap::new(),
    };
    for ev in &cap.events {
        match ev.kind {
            EventKind::Switch {
                prev_pid,
                prev_state,
                next_pid,
                ..
            } => d.switch(
                ev,
                prev_pid,
                SwitchEnd::from_prev_state(prev_state),
                next_pid,
            ),
            _ => {
                d.witness(ev);
                d.other(ev);
            }
        }
    }
    d.finish()
}

/// The walk of [`derive`] through a capture's events: what it has found so
/// far and what it knows of each CPU and task.
struct Deriver {
    run: RunTasks,
    /// The window.
    w0: u64,
    w1: u64,
    out: Derived,
    /// The slice the trace has open on each CPU.
    on_cpu: HashMap<u32, Open>,
    state: HashMap<i32, State>,
    /// Wake-ups waiting for their task's switch-in.
    pending: HashMap<i32, WakeUp>,
}

impl Deriver {
    /// Keep a slice of a run's task, clipped to the window. `end`: the
    /// stamp and how it ended (None: a repaired end); None for a slice
    /// still running after the last event.
    fn push_slice(
        &mut self,
        pid: i32,
        cpu: u32,
        start: Option<u64>,
        end: Option<(u64, Option<SwitchEnd>)>,
        (start_repaired, end_repaired): (bool, bool),
    ) {
        let (w0, w1) = (self.w0, self.w1);
        if !self.run.contains(pid) {
            return;
        }
        if start.is_some_and(|s| s > w1) || end.is_some_and(|(e, _)| e < w0) {
            return;
        }
        let start_clipped = start.is_none_or(|s| s < w0);
        let start_ns = start.map_or(w0, |s| s.max(w0));
        let (end_ns, end, end_repaired) = match end {
            Some((e, how)) if e <= w1 => (e, how, end_repaired),
            _ => (w1, None, false),
        };
        if end_ns == start_ns && (start_clipped || end.is_none()) {
            return;
        }
        self.out.slices.push(Slice {
            pid,
            cpu,
            start_ns,
            end_ns,
            end,
            start_clipped,
            start_repaired: start_repaired && !start_clipped,
            end_repaired,
        });
    }

    /// A `sched_switch` on `ev.cpu` out of `prev_pid` (leaving `how`) into
    /// `next_pid`: close the slice the trace had open there, open the
    /// next, and end the next task's pending wake-up.
    fn switch(&mut self, ev: &Event, prev_pid: i32, how: SwitchEnd, next_pid: i32) {
        let (ts, cpu) = (ev.ts_ns, ev.cpu);
        match self.on_cpu.remove(&cpu) {
            Some(open) if open.pid == prev_pid => self.push_slice(
                prev_pid,
                cpu,
                open.start_ns,
                Some((ts, Some(how))),
                (false, false),
            ),
            // The capture keeps only events about the run's tasks,
            // so a switch between two others is not in it: a gap
            // among other tasks contradicts nothing of the run's.
            Some(open) if !self.run.contains(open.pid) && !self.run.contains(prev_pid) => {}
            Some(open) => self.mismatched(&open, cpu, ts, prev_pid, how),
            // The first switch seen on this CPU: prev held it since
            // before the trace began.
            None => self.push_slice(prev_pid, cpu, None, Some((ts, Some(how))), (false, false)),
        }
        self.state.insert(
            prev_pid,
            match how {
                SwitchEnd::Preempted | SwitchEnd::Yielded | SwitchEnd::Throttled => State::Runnable,
                SwitchEnd::Blocked | SwitchEnd::Exited => State::Blocked,
            },
        );
        // A waking seen while the task still ran woke nothing.
        self.pending.remove(&prev_pid);
        self.on_cpu.insert(
            cpu,
            Open {
                pid: next_pid,
                start_ns: Some(ts),
                seen: Vec::new(),
            },
        );
        self.state.insert(next_pid, State::Running);
        if let Some(mut w) = self.pending.remove(&next_pid) {
            w.switch_in_ns = Some(ts);
            w.cpu = Some(cpu);
            self.out.wakeups.push(w);
        }
    }

    /// A switch at `ts` out of `prev_pid` while the trace had `open` on
    /// `cpu`: repair the gap or refuse it (see the module docs).
    fn mismatched(&mut self, open: &Open, cpu: u32, ts: u64, prev_pid: i32, how: SwitchEnd) {
        let (w0, w1) = (self.w0, self.w1);
        // How `open` left the CPU is unknown: whether a
        // waking of it wakes it is not to be judged.
        self.state.remove(&open.pid);
        match settle(open, prev_pid, ts, w0) {
            Settled::Repaired { from_ns, to_ns } => {
                self.push_slice(
                    open.pid,
                    cpu,
                    open.start_ns,
                    Some((from_ns, None)),
                    (false, true),
                );
                self.push_slice(
                    prev_pid,
                    cpu,
                    Some(to_ns),
                    Some((ts, Some(how))),
                    (true, false),
                );
                if to_ns >= w0 && from_ns <= w1 {
                    self.out.mismatched_switches += 1;
                    self.out.repairs.push(Repair {
                        cpu,
                        before_pid: open.pid,
                        after_pid: prev_pid,
                        from_ns: from_ns.max(w0),
                        to_ns: to_ns.min(w1),
                    });
                }
            }
            Settled::Refused => {
                if (w0..=w1).contains(&ts) {
                    self.out.mismatched_switches += 1;
                    self.out.refusals.push(Refusal {
                        cpu,
                        ts_ns: ts,
                        before_pid: open.pid,
                        after_pid: prev_pid,
                    });
                }
            }
        }
    }

    /// Any event but a switch: evidence of who held the CPU when it fired.
    fn witness(&mut self, ev: &Event) {
        if let Some(open) = self.on_cpu.get_mut(&ev.cpu) {
            open.seen.push((ev.ts_ns, ev.common_pid));
        }
    }

    /// The events other than switches: wake-ups and migrations.
    fn other(&mut self, ev: &Event) {
        match ev.kind {
            EventKind::Switch { .. } => {}
            EventKind::Waking {
                pid, target_cpu, ..
            } => self.waking(ev, pid, target_cpu),
            EventKind::Wakeup {
                pid,
                target_cpu,
                new,
                ..
            } => self.wakeup(ev, pid, target_cpu, new),
            EventKind::Migrate {
                pid,
                orig_cpu,
                dest_cpu,
                ..
            } => self.migrate(ev.ts_ns, pid, orig_cpu, dest_cpu),
            // The slice that ends the task's life ends with the switch whose
            // prev_state is X or Z.
            // Forks only widen the set of traced tasks (capture) and group
            // a tree's tasks under its root (summary).
            EventKind::Exit { .. } | EventKind::Fork { .. } => {}
        }
    }

    /// Whether the trace has `pid` on a CPU or a run queue.
    fn awake(&self, pid: i32) -> bool {
        matches!(self.state.get(&pid), Some(State::Running | State::Runnable))
    }

    /// `sched_waking` of a sleeping run's task opens its wake-up.
    fn waking(&mut self, ev: &Event, pid: i32, target_cpu: u32) {
        if !self.run.contains(pid) || self.awake(pid) {
            return;
        }
        self.pending.entry(pid).or_insert(WakeUp {
            pid,
            waker_pid: ev.common_pid,
            waking_ns: Some(ev.ts_ns),
            wakeup_ns: None,
            target_cpu,
            new: false,
            switch_in_ns: None,
            cpu: None,
        });
    }

    /// `sched_wakeup` / `sched_wakeup_new`: the pending wake-up's run
    /// queue, or a wake-up whose waking the trace lacks.
    fn wakeup(&mut self, ev: &Event, pid: i32, target_cpu: u32, new: bool) {
        if !self.run.contains(pid) {
            return;
        }
        if let Some(w) = self.pending.get_mut(&pid) {
            if w.wakeup_ns.is_none() {
                w.wakeup_ns = Some(ev.ts_ns);
                w.target_cpu = target_cpu;
            }
        } else if !self.awake(pid) {
            // A new task, or a waking before the trace began.
            self.pending.insert(
                pid,
                WakeUp {
                    pid,
                    waker_pid: ev.common_pid,
                    waking_ns: None,
                    wakeup_ns: Some(ev.ts_ns),
                    target_cpu,
                    new,
                    switch_in_ns: None,
                    cpu: None,
                },
            );
        }
    }

    /// `sched_migrate_task`: a migration of a run's task, and the run
    /// queue of a pending wake-up.
    fn migrate(&mut self, ts: u64, pid: i32, orig_cpu: u32, dest_cpu: u32) {
        // A waking task moved to the CPU its waker chose (ttwu fires
        // this after sched_waking, whose target is the task's old
        // CPU): that is the run queue it is put on, when no
        // sched_wakeup says so.
        if let Some(w) = self.pending.get_mut(&pid)
            && w.wakeup_ns.is_none()
        {
            w.target_cpu = dest_cpu;
        }
        if self.run.contains(pid) && (self.w0..=self.w1).contains(&ts) {
            self.out.migrations.push(Migration {
                pid,
                ts_ns: ts,
                orig_cpu,
                dest_cpu,
            });
        }
    }

    /// After the last event: close the slices still open, keep the
    /// wake-ups of the window, and order everything.
    fn finish(mut self) -> Derived {
        let (w0, w1) = (self.w0, self.w1);
        let mut open: Vec<(u32, Open)> = std::mem::take(&mut self.on_cpu).into_iter().collect();
        open.sort_by_key(|(cpu, _)| *cpu);
        for (cpu, o) in open {
            self.push_slice(o.pid, cpu, o.start_ns, None, (false, false));
        }
        let mut out = self.out;
        out.wakeups.extend(self.pending.into_values());
        out.wakeups.retain(|w| (w0..=w1).contains(&w.first_ns()));
        out.wakeups.sort_by_key(|w| (w.first_ns(), w.pid));
        out.slices.sort_by_key(|s| (s.cpu, s.start_ns, s.end_ns));
        out
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::trace::event::{Event, Task};

    /// prev_state values as sched_switch records them.
    pub const PREEMPTED: u64 = 0x100;
    pub const YIELDED: u64 = 0;
    pub const SLEEPING: u64 = 0x1;
    pub const DEAD: u64 = 0x10;

    pub fn sw(ts_ns: u64, cpu: u32, prev: i32, prev_state: u64, next: i32) -> Event {
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

    pub fn waking(ts_ns: u64, cpu: u32, waker: i32, pid: i32, target_cpu: u32) -> Event {
        Event {
            ts_ns,
            cpu,
            common_pid: waker,
            kind: EventKind::Waking {
                pid,
                prio: 120,
                target_cpu,
            },
        }
    }

    pub fn wakeup(ts_ns: u64, cpu: u32, waker: i32, pid: i32, target_cpu: u32) -> Event {
        Event {
            ts_ns,
            cpu,
            common_pid: waker,
            kind: EventKind::Wakeup {
                pid,
                prio: 120,
                target_cpu,
                new: false,
            },
        }
    }

    pub fn migrate(ts_ns: u64, cpu: u32, pid: i32, orig_cpu: u32, dest_cpu: u32) -> Event {
        Event {
            ts_ns,
            cpu,
            common_pid: pid,
            kind: EventKind::Migrate {
                pid,
                prio: 120,
                orig_cpu,
                dest_cpu,
            },
        }
    }

    pub fn capture(start_ns: u64, end_ns: u64, pids: &[i32], events: Vec<Event>) -> Capture {
        Capture {
            events,
            tasks: pids
                .iter()
                .map(|&p| Task {
                    tid: p,
                    tgid: p,
                    comm: format!("w{p}"),
                })
                .collect(),
            cpus: vec![0, 1],
            start_ns,
            end_ns,
            lost_events: 0,
            release_ns: None,
        }
    }

    fn slice(pid: i32, cpu: u32, start_ns: u64, end_ns: u64, end: Option<SwitchEnd>) -> Slice {
        Slice {
            pid,
            cpu,
            start_ns,
            end_ns,
            end,
            start_clipped: false,
            start_repaired: false,
            end_repaired: false,
        }
    }

    #[test]
    fn preemption_between_two_tasks_on_one_cpu() {
        let cap = capture(
            0,
            100,
            &[10, 11],
            vec![
                sw(10, 0, 0, 0, 10),
                sw(20, 0, 10, PREEMPTED, 11),
                sw(30, 0, 11, PREEMPTED, 10),
                sw(40, 0, 10, SLEEPING, 0),
            ],
        );
        let d = derive(&cap);
        assert_eq!(
            d.slices,
            vec![
                slice(10, 0, 10, 20, Some(SwitchEnd::Preempted)),
                slice(11, 0, 20, 30, Some(SwitchEnd::Preempted)),
                slice(10, 0, 30, 40, Some(SwitchEnd::Blocked)),
            ]
        );
        assert_eq!(d.mismatched_switches, 0);
    }

    #[test]
    fn yield_is_its_own_end() {
        let cap = capture(
            0,
            100,
            &[10, 11],
            vec![sw(10, 0, 10, YIELDED, 11), sw(15, 0, 11, YIELDED, 10)],
        );
        let d = derive(&cap);
        assert_eq!(d.slices[1], slice(11, 0, 10, 15, Some(SwitchEnd::Yielded)));
        // The first slice began before the window's first event.
        assert!(d.slices[0].start_clipped && d.slices[0].start_ns == 0);
        // The last is still running when the window closes.
        assert_eq!(d.slices[2].end, None);
        assert_eq!(d.slices[2].end_ns, 100);
    }

    #[test]
    fn block_and_wake_gives_the_wakeup_latency_and_the_cpu() {
        let cap = capture(
            0,
            100,
            &[10, 11],
            vec![
                sw(10, 0, 0, 0, 10),
                sw(20, 0, 10, SLEEPING, 0),
                // 11 on CPU 1 wakes 10 onto CPU 0; it runs 7 ns later.
                waking(30, 1, 11, 10, 0),
                wakeup(32, 1, 11, 10, 0),
                sw(37, 0, 0, 0, 10),
            ],
        );
        let d = derive(&cap);
        assert_eq!(
            d.wakeups,
            vec![WakeUp {
                pid: 10,
                waker_pid: 11,
                waking_ns: Some(30),
                wakeup_ns: Some(32),
                target_cpu: 0,
                new: false,
                switch_in_ns: Some(37),
                cpu: Some(0),
            }]
        );
        assert_eq!(d.wakeups[0].latency_ns(), Some(7));
    }

    #[test]
    fn without_sched_wakeup_the_waker_s_migration_gives_the_target_cpu() {
        // 10 sleeps on CPU 0; 11 on CPU 1 wakes it (sched_waking names its
        // old CPU, 0) and moves it to CPU 1, where it runs; no sched_wakeup.
        let cap = capture(
            0,
            100,
            &[10, 11],
            vec![
                sw(10, 0, 0, 0, 10),
                sw(20, 0, 10, SLEEPING, 0),
                waking(30, 1, 11, 10, 0),
                migrate(31, 1, 10, 0, 1),
                sw(40, 1, 11, SLEEPING, 10),
                // A later move of a task not waking changes no wake-up.
                migrate(50, 1, 11, 1, 0),
            ],
        );
        let d = derive(&cap);
        assert_eq!(
            d.wakeups,
            vec![WakeUp {
                pid: 10,
                waker_pid: 11,
                waking_ns: Some(30),
                wakeup_ns: None,
                target_cpu: 1,
                new: false,
                switch_in_ns: Some(40),
                cpu: Some(1),
            }]
        );
        assert_eq!(d.wakeups[0].latency_ns(), Some(10));
        assert_eq!(d.migrations.len(), 2);
    }

    #[test]
    fn a_waking_while_the_task_still_runs_is_no_wakeup() {
        let cap = capture(
            0,
            100,
            &[10, 11],
            vec![
                sw(10, 0, 0, 0, 10),
                waking(12, 1, 11, 10, 0),
                sw(20, 0, 10, PREEMPTED, 0),
                sw(30, 0, 0, 0, 10),
            ],
        );
        assert!(derive(&cap).wakeups.is_empty());
    }

    #[test]
    fn a_wakeup_not_run_before_the_end_is_kept_without_a_switch_in() {
        let cap = capture(
            0,
            100,
            &[10],
            vec![sw(10, 0, 10, SLEEPING, 0), waking(90, 1, 0, 10, 0)],
        );
        let d = derive(&cap);
        assert_eq!(d.wakeups.len(), 1);
        assert_eq!(d.wakeups[0].switch_in_ns, None);
        assert_eq!(d.wakeups[0].latency_ns(), None);
    }

    #[test]
    fn exit_ends_the_last_slice() {
        let cap = capture(
            0,
            100,
            &[10],
            vec![
                sw(10, 0, 0, 0, 10),
                Event {
                    ts_ns: 49,
                    cpu: 0,
                    common_pid: 10,
                    kind: EventKind::Exit { pid: 10, prio: 120 },
                },
                sw(50, 0, 10, DEAD, 0),
            ],
        );
        assert_eq!(
            derive(&cap).slices,
            vec![slice(10, 0, 10, 50, Some(SwitchEnd::Exited))]
        );
    }

    #[test]
    fn migration_is_counted_and_the_next_slice_is_on_the_new_cpu() {
        let cap = capture(
            0,
            100,
            &[10],
            vec![
                sw(10, 0, 0, 0, 10),
                sw(20, 0, 10, PREEMPTED, 0),
                migrate(21, 1, 10, 0, 1),
                sw(25, 1, 0, 0, 10),
                sw(30, 1, 10, SLEEPING, 0),
            ],
        );
        let d = derive(&cap);
        assert_eq!(
            d.migrations,
            vec![Migration {
                pid: 10,
                ts_ns: 21,
                orig_cpu: 0,
                dest_cpu: 1
            }]
        );
        assert_eq!(d.slices[1], slice(10, 1, 25, 30, Some(SwitchEnd::Blocked)));
    }

    #[test]
    fn slices_across_the_window_edges_are_clipped_and_marked() {
        // Events before and after the window; one slice straddles each edge.
        let cap = capture(
            100,
            200,
            &[10, 11],
            vec![
                sw(50, 0, 0, 0, 10),
                sw(60, 0, 10, SLEEPING, 0),
                sw(90, 0, 0, 0, 11),
                sw(150, 0, 11, PREEMPTED, 10),
                sw(250, 0, 10, SLEEPING, 0),
            ],
        );
        let d = derive(&cap);
        assert_eq!(
            d.slices,
            vec![
                Slice {
                    start_clipped: true,
                    ..slice(11, 0, 100, 150, Some(SwitchEnd::Preempted))
                },
                slice(10, 0, 150, 200, None),
            ]
        );
    }

    #[test]
    fn tasks_outside_the_run_get_no_slices() {
        let cap = capture(
            0,
            100,
            &[10],
            vec![sw(10, 0, 0, 0, 99), sw(20, 0, 99, PREEMPTED, 10)],
        );
        let d = derive(&cap);
        assert_eq!(d.slices.len(), 1);
        assert_eq!(d.slices[0].pid, 10);
    }

    fn repaired(mut s: Slice, start: bool, end: bool) -> Slice {
        s.start_repaired = start;
        s.end_repaired = end;
        s
    }

    #[test]
    fn a_missing_switch_in_from_idle_is_repaired_from_the_wakers_and_the_tasks_events() {
        // 10 sleeps on CPU 0 (idle runs). An interrupt on the idle CPU wakes
        // 11 there at 20 (common_pid 0: idle still held it); 11 wakes 10 at
        // 25 (11 held it by then); the kernel never emitted idle → 11.
        let cap = capture(
            0,
            100,
            &[10, 11],
            vec![
                sw(5, 0, 0, 0, 10),
                sw(10, 0, 10, SLEEPING, 0),
                waking(20, 0, 0, 11, 0),
                waking(25, 0, 11, 10, 0),
                sw(40, 0, 11, PREEMPTED, 10),
            ],
        );
        let d = derive(&cap);
        assert_eq!(d.mismatched_switches, 1);
        assert_eq!(
            d.repairs,
            vec![Repair {
                cpu: 0,
                before_pid: 0,
                after_pid: 11,
                from_ns: 20,
                to_ns: 25
            }]
        );
        assert_eq!(d.repairs[0].unattributed_ns(), 5);
        assert!(d.refusals.is_empty());
        assert_eq!(
            d.slices,
            vec![
                slice(10, 0, 5, 10, Some(SwitchEnd::Blocked)),
                repaired(
                    slice(11, 0, 25, 40, Some(SwitchEnd::Preempted)),
                    true,
                    false
                ),
                slice(10, 0, 40, 100, None),
            ]
        );
        assert!(!d.slices[1].complete());
    }

    #[test]
    fn a_missing_switch_out_of_a_task_of_the_run_ends_its_slice_at_its_last_event() {
        // 10 runs from 10, wakes a task outside the run (99) at 15; the
        // switch 10 → 68 was never emitted; 68 → 11 at 50 was.
        let cap = capture(
            0,
            100,
            &[10, 11],
            vec![
                sw(10, 0, 0, 0, 10),
                waking(15, 0, 10, 99, 0),
                sw(50, 0, 68, SLEEPING, 11),
                sw(60, 0, 11, SLEEPING, 0),
            ],
        );
        let d = derive(&cap);
        assert_eq!(
            d.repairs,
            vec![Repair {
                cpu: 0,
                before_pid: 10,
                after_pid: 68,
                from_ns: 15,
                to_ns: 50
            }]
        );
        assert_eq!(
            d.slices,
            vec![
                repaired(slice(10, 0, 10, 15, None), false, true),
                slice(11, 0, 50, 60, Some(SwitchEnd::Blocked)),
            ]
        );
    }

    #[test]
    fn without_events_between_the_whole_stretch_is_unattributed_and_the_switch_still_counts() {
        // 68 (outside the run) gets CPU 0 at 10; 68 → 10 was never
        // emitted; 10 is switched out at 60. Nothing between says when 10
        // began: all 50 ns are unattributed, and 10's switch-out is kept as
        // a slice of no length (rusage counts that switch too).
        let cap = capture(
            0,
            100,
            &[10, 11],
            vec![sw(10, 0, 11, PREEMPTED, 68), sw(60, 0, 10, PREEMPTED, 0)],
        );
        let d = derive(&cap);
        assert_eq!(d.repairs.len(), 1);
        assert_eq!(d.repairs[0].unattributed_ns(), 50);
        let ten: Vec<&Slice> = d.slices.iter().filter(|s| s.pid == 10).collect();
        assert_eq!(
            ten,
            vec![&repaired(
                slice(10, 0, 60, 60, Some(SwitchEnd::Preempted)),
                true,
                false
            )]
        );
    }

    #[test]
    fn events_that_interleave_the_two_tasks_are_refused_and_drop_their_slices() {
        // The trace has 10 on CPU 0 from 10; 11 fires an event there at 20,
        // 10 again at 30, and 11 is switched out at 40: no single missing
        // switch explains that.
        let cap = capture(
            0,
            100,
            &[10, 11],
            vec![
                sw(10, 0, 0, 0, 10),
                waking(20, 0, 11, 99, 0),
                waking(30, 0, 10, 99, 0),
                sw(40, 0, 11, PREEMPTED, 0),
            ],
        );
        let d = derive(&cap);
        assert!(d.slices.is_empty(), "{:?}", d.slices);
        assert!(d.repairs.is_empty());
        assert_eq!(
            d.refusals,
            vec![Refusal {
                cpu: 0,
                ts_ns: 40,
                before_pid: 10,
                after_pid: 11
            }]
        );
        assert_eq!(d.mismatched_switches, 1);
    }

    #[test]
    fn a_repair_is_clipped_to_the_window_and_one_before_it_is_not_counted() {
        let cap = capture(
            100,
            200,
            &[10, 11],
            vec![
                // Before the window: 0 → 10 missing between 20 and 60.
                sw(20, 0, 11, SLEEPING, 0),
                sw(60, 0, 10, SLEEPING, 0),
                // Across its start: 0 → 11 missing between 90 and 150.
                sw(90, 0, 0, 0, 50),
                sw(150, 0, 11, SLEEPING, 0),
            ],
        );
        let d = derive(&cap);
        assert_eq!(d.mismatched_switches, 1);
        assert_eq!(
            d.repairs,
            vec![Repair {
                cpu: 0,
                before_pid: 50,
                after_pid: 11,
                from_ns: 100,
                to_ns: 150
            }]
        );
    }

    #[test]
    fn a_gap_among_other_tasks_is_no_mismatch() {
        // 10 is preempted by 50; 50 → 60 is not in the capture (neither is
        // the run's); 60 → 10 follows.
        let cap = capture(
            0,
            100,
            &[10],
            vec![
                sw(10, 0, 0, 0, 10),
                sw(20, 0, 10, PREEMPTED, 50),
                sw(40, 0, 60, PREEMPTED, 10),
                sw(60, 0, 10, SLEEPING, 0),
            ],
        );
        let d = derive(&cap);
        assert_eq!(d.mismatched_switches, 0);
        assert_eq!(
            d.slices,
            vec![
                slice(10, 0, 10, 20, Some(SwitchEnd::Preempted)),
                slice(10, 0, 40, 60, Some(SwitchEnd::Blocked)),
            ]
        );
        // A switch out of 10 while the trace has another task on the CPU
        // still is one.
        let cap = capture(
            0,
            100,
            &[10],
            vec![sw(10, 0, 10, PREEMPTED, 50), sw(20, 0, 10, SLEEPING, 0)],
        );
        assert_eq!(derive(&cap).mismatched_switches, 1);
    }

    #[test]
    fn fifo_pair_runs_to_completion_one_after_the_other() {
        // Two SCHED_FIFO tasks of equal priority on CPU 0: neither preempts
        // the other; each runs until it blocks.
        let cap = capture(
            0,
            1_000,
            &[10, 11],
            vec![
                sw(0, 0, 0, 0, 10),
                waking(5, 0, 10, 11, 0),
                wakeup(6, 0, 10, 11, 0),
                sw(400, 0, 10, SLEEPING, 11),
                sw(900, 0, 11, SLEEPING, 0),
            ],
        );
        let d = derive(&cap);
        assert!(d.slices.iter().all(|s| s.end == Some(SwitchEnd::Blocked)));
        assert_eq!(d.wakeups[0].latency_ns(), Some(395));
    }

    #[test]
    fn rr_turns_alternate_with_preemptions_of_the_timeslice() {
        // Two SCHED_RR tasks sharing CPU 0 with a 100 ns timeslice.
        let mut events = vec![sw(0, 0, 0, 0, 10)];
        for k in 1..=6u64 {
            let (prev, next) = if k % 2 == 1 { (10, 11) } else { (11, 10) };
            events.push(sw(k * 100, 0, prev, PREEMPTED, next));
        }
        let d = derive(&capture(0, 650, &[10, 11], events));
        assert_eq!(d.slices.len(), 7);
        assert!(
            d.slices[..6]
                .iter()
                .all(|s| s.len_ns() == 100 && s.end == Some(SwitchEnd::Preempted) && s.complete())
        );
        assert_eq!(d.slices[6].end, None);
        assert_eq!(d.slices[6].len_ns(), 50);
    }
}
