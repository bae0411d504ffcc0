//! From a traced run's events, one at a time (bounded memory), to what
//! each task of the run's tree did ([`Recording`]): its CPU bursts, its
//! sleeps and what ended each, the wake-ups it gave, its forks, its
//! switches and wake-up latencies.
//!
//! The tree: the run's workers (the roots, named `t0`, `t1`, … by process
//! index) and every task they fork, transitively, named by path (`t0.2`:
//! the second task `t0` forked), so a trace of the replay names its tasks
//! the same way.
//!
//! - A burst is the CPU time from a task's wake-up (or start) to its next
//!   block or exit, whatever preemptions split it; its ops are cut where
//!   it woke a partner or forked (the op sequence keeps those points).
//! - A sleep runs from a switch-out that blocked to the `sched_waking` that
//!   ended it. Its waker is the task current on the waking CPU
//!   (`common_pid`): a task of the tree that held the CPU (a wake-up by a
//!   partner: pipe, futex, a child's exit), the idle task (a timer, or
//!   another interrupt on an idle CPU), or anything else (external,
//!   counted, replayed as a timer). An interrupt that fires while a task
//!   of the tree runs is taken for a wake-up by that task: the sched
//!   tracepoints cannot tell them apart.
//! - Only what happens from the workers' release to the end of the last
//!   worker's work counts; a sleep that began before the release (the start
//!   barrier) or never ended is left out, and so is the wake-up that
//!   ended it, so wake-ups given and waited for balance per task.
//! - A task with more than [`MAX_OPS`] ops, or one that would take the
//!   tree past [`MAX_TOTAL_OPS`] (memory stays bounded), is kept as
//!   distributions ([`TaskRec::overflowed`]): its ops are dropped, and the
//!   wake-ups it gave and took become timer sleeps of its partners.

use std::collections::HashMap;

use crate::trace::{Event, EventKind, SwitchEnd, Task};
use crate::workload::latency::Latency;
use crate::workload::replay::desc::Waker;

/// Ops one task keeps as a sequence; beyond, it becomes distributions.
/// 131,072: `perf bench sched pipe -l 20000` (up to four ops a loop) stays
/// a sequence, its partner's wake-ups kept (at 4,096 it became timer sleeps
/// of 1-2 µs, replayed 6.7 times longer: `schedlab bench replay`).
pub const MAX_OPS: usize = 1 << 17;
/// Ops the whole tree keeps as sequences (about 24 MB).
pub const MAX_TOTAL_OPS: usize = 1 << 20;
/// Samples a task keeps of its bursts and of its sleeps (for its
/// distributions).
const TASK_SAMPLES: usize = 256;
/// Samples the whole run keeps (for the KS distances).
const RUN_SAMPLES: usize = 100_000;

/// One op, with times in ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NsOp {
    Run(u64),
    Sleep { ns: u64, by: Waker },
    Wake(usize),
    Fork(usize),
}

/// A uniform sample of at most `cap` values of a stream (reservoir
/// sampling with a fixed-seed generator: the same trace, the same sample).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reservoir {
    pub values: Vec<u64>,
    pub seen: u64,
    cap: usize,
    state: u64,
}

impl Reservoir {
    pub fn new(cap: usize) -> Reservoir {
        Reservoir {
            values: Vec::new(),
            seen: 0,
            cap,
            state: 0x9E37_79B9_7F4A_7C15,
        }
    }

    pub fn push(&mut self, v: u64) {
        self.seen += 1;
        if self.values.len() < self.cap {
            self.values.push(v);
            return;
        }
        // xorshift64*
        self.state ^= self.state >> 12;
        self.state ^= self.state << 25;
        self.state ^= self.state >> 27;
        let r = self.state.wrapping_mul(0x2545_F491_4F6C_DD1D) % self.seen;
        if (r as usize) < self.cap {
            self.values[r as usize] = v;
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum St {
    Unknown,
    Running,
    Runnable,
    Blocked,
    Dead,
}

/// One task of the tree.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskRec {
    pub tid: i32,
    pub name: String,
    pub comm: String,
    pub parent: Option<usize>,
    pub thread: bool,
    pub ops: Vec<NsOp>,
    /// More than [`MAX_OPS`] ops: described by distributions.
    pub overflowed: bool,
    pub forks: Vec<usize>,
    pub cpu_ns: u64,
    pub voluntary: u64,
    pub involuntary: u64,
    pub bursts_ns: Reservoir,
    pub sleeps_ns: Reservoir,
    state: St,
    run_since: u64,
    burst_ns: u64,
    piece_ns: u64,
    block_ns: Option<u64>,
    waking_ns: Option<u64>,
}

/// What the tree did over the recorded window.
#[derive(Debug, Clone, PartialEq)]
pub struct Recording {
    pub tasks: Vec<TaskRec>,
    pub wake_latency: Latency,
    pub bursts_ns: Reservoir,
    pub sleeps_ns: Reservoir,
    pub timer_wakeups: u64,
    pub external_wakeups: u64,
    pub task_wakeups: u64,
    pub events: u64,
    pub from_ns: u64,
    pub to_ns: u64,
}

/// The streaming recorder.
pub struct Recorder {
    rec: Recording,
    by_tid: HashMap<i32, usize>,
    tgid: HashMap<i32, i32>,
    comm: HashMap<i32, String>,
    /// Ops kept as sequences, every task's.
    total_ops: usize,
}

impl Recorder {
    /// `roots`: the workers' pids by process index; `tasks`: the capture's
    /// named tasks (thread group ids, names); the window counted is
    /// `from_ns..to_ns`.
    pub fn new(roots: &[i32], tasks: &[Task], from_ns: u64, to_ns: u64) -> Recorder {
        let mut r = Recorder {
            rec: Recording {
                tasks: Vec::new(),
                wake_latency: Latency::new(),
                bursts_ns: Reservoir::new(RUN_SAMPLES),
                sleeps_ns: Reservoir::new(RUN_SAMPLES),
                timer_wakeups: 0,
                external_wakeups: 0,
                task_wakeups: 0,
                events: 0,
                from_ns,
                to_ns,
            },
            by_tid: HashMap::new(),
            tgid: tasks.iter().map(|t| (t.tid, t.tgid)).collect(),
            comm: tasks.iter().map(|t| (t.tid, t.comm.clone())).collect(),
            total_ops: 0,
        };
        for (i, &pid) in roots.iter().enumerate() {
            r.add(pid, format!("t{i}"), None, false);
        }
        r
    }

    fn add(&mut self, tid: i32, name: String, parent: Option<usize>, thread: bool) -> usize {
        let i = self.rec.tasks.len();
        self.rec.tasks.push(TaskRec {
            tid,
            name,
            comm: self.comm.get(&tid).cloned().unwrap_or_default(),
            parent,
            thread,
            ops: Vec::new(),
            overflowed: false,
            forks: Vec::new(),
            cpu_ns: 0,
            voluntary: 0,
            involuntary: 0,
            bursts_ns: Reservoir::new(TASK_SAMPLES),
            sleeps_ns: Reservoir::new(TASK_SAMPLES),
            state: St::Unknown,
            run_since: 0,
            burst_ns: 0,
            piece_ns: 0,
            block_ns: None,
            waking_ns: None,
        });
        self.by_tid.insert(tid, i);
        i
    }

    fn push(&mut self, i: usize, op: NsOp) {
        let t = &mut self.rec.tasks[i];
        if t.overflowed {
            return;
        }
        if t.ops.len() >= MAX_OPS || self.total_ops >= MAX_TOTAL_OPS {
            t.overflowed = true;
            self.total_ops -= t.ops.len();
            t.ops = Vec::new();
            return;
        }
        t.ops.push(op);
        self.total_ops += 1;
    }

    /// CPU of task `i` up to `ts` since it last got the CPU (or since the
    /// window opened), added to its burst and its current piece.
    fn account(&mut self, i: usize, ts: u64) {
        let from = self.rec.from_ns;
        let t = &mut self.rec.tasks[i];
        if t.state == St::Running {
            let d = ts.saturating_sub(t.run_since.max(from));
            if ts > from {
                t.cpu_ns += d;
                t.burst_ns += d;
                t.piece_ns += d;
            }
            t.run_since = ts;
        }
    }

    /// End task `i`'s current piece (before a wake-up it gives or a fork).
    fn cut(&mut self, i: usize) {
        let p = std::mem::take(&mut self.rec.tasks[i].piece_ns);
        if p > 0 {
            self.push(i, NsOp::Run(p));
        }
    }

    /// End task `i`'s burst (it blocked or exited).
    fn end_burst(&mut self, i: usize) {
        self.cut(i);
        let b = std::mem::take(&mut self.rec.tasks[i].burst_ns);
        if b > 0 {
            self.rec.tasks[i].bursts_ns.push(b);
            self.rec.bursts_ns.push(b);
        }
    }

    /// Take one event (in time order).
    pub fn event(&mut self, e: &Event) {
        if e.ts_ns > self.rec.to_ns {
            return;
        }
        self.rec.events += 1;
        let ts = e.ts_ns;
        let counting = ts >= self.rec.from_ns;
        match e.kind {
            EventKind::Fork {
                parent_pid,
                child_pid,
            } => {
                let Some(&p) = self.by_tid.get(&parent_pid) else {
                    return;
                };
                if self.by_tid.contains_key(&child_pid) {
                    return;
                }
                let ptgid = self.tgid.get(&parent_pid).copied().unwrap_or(parent_pid);
                let ctgid = self.tgid.get(&child_pid).copied().unwrap_or(child_pid);
                let thread = ctgid == ptgid && ctgid != child_pid;
                let name = format!(
                    "{}.{}",
                    self.rec.tasks[p].name,
                    self.rec.tasks[p].forks.len() + 1
                );
                let c = self.add(child_pid, name, Some(p), thread);
                self.rec.tasks[c].state = St::Runnable;
                self.rec.tasks[p].forks.push(c);
                self.account(p, ts);
                self.cut(p);
                self.push(p, NsOp::Fork(c));
            }
            EventKind::Switch {
                prev_pid,
                prev_state,
                next_pid,
                ..
            } => {
                if let Some(&i) = self.by_tid.get(&prev_pid) {
                    self.switch_out(i, ts, SwitchEnd::from_prev_state(prev_state), counting);
                }
                if let Some(&i) = self.by_tid.get(&next_pid) {
                    let t = &mut self.rec.tasks[i];
                    t.state = St::Running;
                    t.run_since = ts;
                    if let Some(w) = t.waking_ns.take()
                        && w >= self.rec.from_ns
                    {
                        self.rec.wake_latency.record_ns(ts.saturating_sub(w));
                    }
                }
            }
            EventKind::Waking { pid, .. } => self.waking(pid, e.common_pid, ts),
            _ => {}
        }
    }

    fn switch_out(&mut self, i: usize, ts: u64, end: SwitchEnd, counting: bool) {
        self.account(i, ts);
        if counting {
            let t = &mut self.rec.tasks[i];
            match end.voluntary() {
                true => t.voluntary += 1,
                false => t.involuntary += 1,
            }
        }
        match end {
            SwitchEnd::Blocked => {
                self.end_burst(i);
                let t = &mut self.rec.tasks[i];
                t.state = St::Blocked;
                t.block_ns = Some(ts);
            }
            SwitchEnd::Exited => {
                self.end_burst(i);
                self.rec.tasks[i].state = St::Dead;
            }
            _ => self.rec.tasks[i].state = St::Runnable,
        }
    }

    fn waking(&mut self, pid: i32, waker_pid: i32, ts: u64) {
        let Some(&t) = self.by_tid.get(&pid) else {
            return;
        };
        let (state, block) = (self.rec.tasks[t].state, self.rec.tasks[t].block_ns);
        if state != St::Running {
            self.rec.tasks[t].waking_ns = Some(ts);
        }
        if state != St::Blocked {
            return;
        }
        self.rec.tasks[t].state = St::Runnable;
        self.rec.tasks[t].block_ns = None;
        // A sleep begun before the window (the start barrier) is not the
        // program's.
        let Some(block) = block.filter(|&b| b >= self.rec.from_ns) else {
            return;
        };
        let ns = ts.saturating_sub(block);
        let waker = self
            .by_tid
            .get(&waker_pid)
            .copied()
            .filter(|&w| w != t && self.rec.tasks[w].state == St::Running);
        let by = match (waker, waker_pid) {
            (Some(w), _) => Waker::Task(w),
            (None, 0) => Waker::Timer,
            (None, _) => Waker::External,
        };
        match by {
            Waker::Task(w) => {
                self.rec.task_wakeups += 1;
                self.account(w, ts);
                self.cut(w);
                self.push(w, NsOp::Wake(t));
            }
            Waker::Timer => self.rec.timer_wakeups += 1,
            Waker::External => self.rec.external_wakeups += 1,
        }
        self.push(t, NsOp::Sleep { ns, by });
        self.rec.tasks[t].sleeps_ns.push(ns);
        self.rec.sleeps_ns.push(ns);
    }

    /// The recording: tasks still running at the window's end have their
    /// last burst counted to it; wake-ups to or from a task kept as
    /// distributions become timer sleeps; the order of wake-ups the trace
    /// implies is kept ([`super::order`]).
    pub fn finish(mut self) -> Recording {
        let end = self.rec.to_ns;
        for i in 0..self.rec.tasks.len() {
            if self.rec.tasks[i].state == St::Running {
                self.account(i, end);
                self.end_burst(i);
            }
        }
        let over: Vec<bool> = self.rec.tasks.iter().map(|t| t.overflowed).collect();
        for t in &mut self.rec.tasks {
            t.ops.retain(|op| !matches!(op, NsOp::Wake(x) if over[*x]));
            for op in &mut t.ops {
                if let NsOp::Sleep { by, .. } = op
                    && matches!(*by, Waker::Task(w) if over[w])
                {
                    *by = Waker::Timer;
                }
            }
        }
        let mut ops: Vec<Vec<NsOp>> = self
            .rec
            .tasks
            .iter_mut()
            .map(|t| std::mem::take(&mut t.ops))
            .collect();
        super::order::keep_wake_order(&mut ops);
        for (t, o) in self.rec.tasks.iter_mut().zip(ops) {
            t.ops = o;
        }
        self.rec
    }
}

#[cfg(test)]
pub mod tests {
    use super::*;
    use crate::trace::derive::tests::{sw, waking};

    const S: u64 = 0x1; // blocked (S)
    const R: u64 = 0x100; // preempted (R+)
    const X: u64 = 0x10; // exited

    fn fork(ts: u64, cpu: u32, parent: i32, child: i32) -> Event {
        Event {
            ts_ns: ts,
            cpu,
            common_pid: parent,
            kind: EventKind::Fork {
                parent_pid: parent,
                child_pid: child,
            },
        }
    }

    fn task(tid: i32, tgid: i32, comm: &str) -> Task {
        Task {
            tid,
            tgid,
            comm: comm.into(),
        }
    }

    /// A shell (100) that forks a reader (101) and a thread (102); 101
    /// blocks until 100 wakes it, 100 sleeps on a timer, 101 is woken once
    /// by an outsider (999), and 102 by an interrupt on an idle CPU.
    pub fn two_tasks() -> (Vec<Event>, Vec<Task>) {
        let events = vec![
            // Before the window (1000): 100 at the barrier, woken by the parent.
            sw(500, 0, 100, S, 0),
            waking(900, 1, 7, 100, 0),
            sw(1000, 0, 0, 0, 100),
            fork(1100, 0, 100, 101),
            fork(1150, 0, 100, 102),
            sw(1200, 0, 100, R, 101),     // 100 preempted by 101
            sw(1500, 0, 101, S, 100),     // 101 ran 300 and blocks
            waking(1700, 0, 100, 101, 0), // 100 wakes 101 (ran 200 more)
            sw(1800, 0, 100, S, 101),     // 100 blocks after 300 since 1500
            sw(1900, 0, 101, S, 102),     // 101: 100 on CPU, blocks
            sw(2000, 0, 102, S, 0),       // 102 ran 100, blocks
            waking(2500, 0, 999, 101, 0), // external wakes 101
            waking(2600, 0, 0, 100, 0),   // timer wakes 100 (slept 800)
            sw(2650, 0, 0, 0, 101),
            waking(2700, 0, 0, 102, 0), // idle: timer-ish for 102
            sw(2750, 0, 101, X, 100),   // 101 ran 100, exits
            sw(2800, 0, 100, X, 102),   // 100 ran 50, exits
            sw(2900, 0, 102, X, 0),
        ];
        let tasks = vec![
            task(100, 100, "sh"),
            task(101, 101, "cat"),
            task(102, 100, "sh"),
        ];
        (events, tasks)
    }

    #[test]
    fn bursts_sleeps_and_wakers_are_attributed() {
        let (events, tasks) = two_tasks();
        let mut r = Recorder::new(&[100], &tasks, 1000, 10_000);
        for e in &events {
            r.event(e);
        }
        let rec = r.finish();
        let names: Vec<&str> = rec.tasks.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["t0", "t0.1", "t0.2"]);
        assert!(!rec.tasks[1].thread && rec.tasks[2].thread);
        assert_eq!(
            rec.tasks[0].ops,
            vec![
                NsOp::Run(100),
                NsOp::Fork(1),
                NsOp::Run(50),
                NsOp::Fork(2),
                // 50 before the preemption, 200 after: one piece.
                NsOp::Run(250),
                NsOp::Wake(1),
                NsOp::Run(100),
                NsOp::Sleep {
                    ns: 800,
                    by: Waker::Timer
                },
                NsOp::Run(50),
            ]
        );
        assert_eq!(
            rec.tasks[1].ops,
            vec![
                NsOp::Run(300),
                NsOp::Sleep {
                    ns: 200,
                    by: Waker::Task(0)
                },
                NsOp::Run(100),
                NsOp::Sleep {
                    ns: 600,
                    by: Waker::External
                },
                NsOp::Run(100),
            ]
        );
        assert_eq!(
            rec.tasks[2].ops,
            vec![
                NsOp::Run(100),
                NsOp::Sleep {
                    ns: 700,
                    by: Waker::Timer
                },
                NsOp::Run(100),
            ]
        );
        // The barrier's sleep and wake-up are outside the window.
        assert_eq!(
            (rec.timer_wakeups, rec.external_wakeups, rec.task_wakeups),
            (2, 1, 1)
        );
        // Bursts whole across the preemption: 100's 100+50+250+100, then 50.
        let mut b0 = rec.tasks[0].bursts_ns.values.clone();
        b0.sort_unstable();
        assert_eq!(b0, vec![50, 500]);
        assert_eq!(rec.tasks[0].cpu_ns, 550);
        assert_eq!((rec.tasks[0].voluntary, rec.tasks[0].involuntary), (2, 1));
        // Latency: 101 woken at 1700, on at 1800; 100 at 2600, on at 2750;
        // 101 at 2500 on at 2650; 102 at 2700 on at 2800.
        assert_eq!(rec.wake_latency.count(), 4);
    }

    #[test]
    fn a_task_with_too_many_ops_becomes_distributions_and_its_partners_timers() {
        let mut events = vec![sw(1000, 0, 0, 0, 1), fork(1001, 0, 1, 2)];
        let mut ts = 1002;
        events.push(sw(ts, 0, 1, S, 2));
        // Per round 2 gives 4 ops (run, wake, run, timer sleep) and 1 two
        // (sleep, run): 2 overflows, 1 does not.
        for _ in 0..MAX_OPS / 4 + 1 {
            for e in [
                waking(ts + 10, 0, 2, 1, 0),
                sw(ts + 20, 0, 2, S, 1),
                sw(ts + 30, 0, 1, S, 0),
                waking(ts + 40, 0, 0, 2, 0),
                sw(ts + 50, 0, 0, 0, 2),
            ] {
                events.push(e);
            }
            ts += 50;
        }
        let tasks = [task(1, 1, "a"), task(2, 2, "b")];
        let mut r = Recorder::new(&[1], &tasks, 1000, u64::MAX);
        for e in &events {
            r.event(e);
        }
        let rec = r.finish();
        assert!(rec.tasks[1].overflowed && rec.tasks[1].ops.is_empty());
        assert!(rec.tasks[1].bursts_ns.seen > 0);
        assert!(rec.tasks[0].ops.iter().all(|o| !matches!(
            o,
            NsOp::Sleep {
                by: Waker::Task(_),
                ..
            }
        )));
        assert!(!rec.tasks[0].overflowed && rec.tasks[0].ops.len() > MAX_OPS / 2);
        assert!(rec.tasks[0].ops.iter().any(|o| matches!(
            o,
            NsOp::Sleep {
                by: Waker::Timer,
                ..
            }
        )));
    }
}
