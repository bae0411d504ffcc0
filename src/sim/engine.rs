//! The event loop: virtual time in ns, a run queue per CPU holding each
//! class, the tick at HZ, wake-ups, preemption and the choice of the next
//! task in the kernel's class order (`for_each_class` in
//! kernel/sched/sched.h: DEADLINE, RT, fair; the fair server on 6.12+ runs
//! fair tasks above RT when they starve). Time advances from one event to
//! the next: a running task's action ending, a timer, a tick, an RT
//! period, a deadline task's runtime or a WRR turn running out, the fair
//! server's zero-laxity time. Everything is deterministic: ties go to the
//! lower CPU or task index.
//!
//! Placement and balancing across CPUs live in `moves` (this module's
//! child): fair wake-ups by [`super::placement`], periodic balancing by
//! [`super::balance`] at the tick, pulls to idle CPUs, RT/DEADLINE push
//! and pull.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use serde::{Deserialize, Serialize};

use super::balance::LbState;
use super::deadline::{DlEntity, DlRq, FairServer};
use super::eevdf::{FairEntity, FairKind, FairRq};
use super::machine::Machine;
use super::rt::{RtEntity, RtRq};
use super::task::{Action, Ctx, Program};
use super::topology::SimTopology;
use super::wrr::WrrSim;

mod load;
mod moves;

/// How a task is scheduled in the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchedSpec {
    Fair {
        kind: FairKind,
        nice: i32,
        slice_ns: u64,
    },
    Rt {
        prio: u32,
        rr: bool,
    },
    Deadline {
        runtime_ns: u64,
        deadline_ns: u64,
        period_ns: u64,
    },
    /// Driven by [`WrrSim`]; pinned to one CPU.
    Wrr,
}

/// One task of a simulation.
#[derive(Debug, Clone)]
pub struct TaskSpec {
    pub sched: SchedSpec,
    /// CPUs it may run on (non-empty, within the machine).
    pub cpus: Vec<usize>,
    pub program: Program,
    /// When it becomes runnable (a worker's barrier release).
    pub start_ns: u64,
    /// A measured worker: the simulation ends when every worker exited.
    pub worker: bool,
}

/// What the model measured of one task (schedstat and rusage figures).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TaskStats {
    pub run_ns: u64,
    /// CPU spent in the program's own CPU actions (no switch costs).
    pub work_cpu_ns: u64,
    pub wait_ns: u64,
    pub timeslices: u64,
    pub nvcsw: u64,
    pub nivcsw: u64,
    pub first_run_ns: Option<u64>,
    /// The counters when the program started (the worker's own first
    /// reading: the real worker measures rusage and schedstat from the
    /// start of its work, so the turn it starts in is not counted):
    /// (run_ns, wait_ns, timeslices, nvcsw, nivcsw).
    pub at_start: (u64, u64, u64, u64, u64),
    pub exit_ns: Option<u64>,
    /// Run time at the release and at the last RT period boundary after
    /// it (time, run_ns), for shares over whole periods.
    pub run_at_release: u64,
    pub run_at_period: Option<(u64, u64)>,
    /// Times it moved to another CPU (`se.nr_migrations`: every
    /// `set_task_cpu` to a new CPU, at wake-up or by balancing), and at
    /// what count the program started.
    pub migrations: u64,
    pub migrations_at_start: u64,
    /// The CPUs it ran on, as a bit mask (bit c of word c / 64).
    pub ran_on: Vec<u64>,
}

impl TaskStats {
    /// The CPUs it ran on, ascending.
    pub fn cpus_used(&self) -> Vec<usize> {
        let mut out = Vec::new();
        for (w, bits) in self.ran_on.iter().enumerate() {
            for b in 0..64 {
                if bits >> b & 1 == 1 {
                    out.push(w * 64 + b);
                }
            }
        }
        out
    }

    fn mark_ran_on(&mut self, c: usize) {
        if self.ran_on.len() <= c / 64 {
            self.ran_on.resize(c / 64 + 1, 0);
        }
        self.ran_on[c / 64] |= 1 << (c % 64);
    }
}

/// How a stretch of a task on a CPU ended, as the model knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SegmentEnd {
    /// Still runnable, taken off by a more important or more deserving
    /// task (wake-up preemption, the slice or RR turn running out).
    Preempted,
    /// Still runnable, its class out of bandwidth: the RT run queue
    /// throttled by `sched_rt_runtime_us`, or a DEADLINE task's runtime
    /// spent until its replenishment (CBS).
    Throttled,
    /// Went to sleep (I/O, a timer, waiting for a peer).
    Blocked,
    Exited,
}

/// One stretch of a task on a CPU; `end` None: still running when the
/// model stopped (the last worker exited, or the time limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Segment {
    pub cpu: u32,
    pub task: u32,
    pub start_ns: u64,
    pub end_ns: u64,
    pub end: Option<SegmentEnd>,
}

/// Why a task became runnable in the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum WakeCause {
    /// Its start: a worker released from the barrier, a hog started.
    Released,
    /// The end of its sleep: a timer, or its I/O completing.
    Timer,
    /// A peer's signal or close (the peer's task index).
    Peer(u32),
    /// Its CPU's RT run queue unthrottled at an RT period
    /// (`do_sched_rt_period_timer`): an RT or WRR task waiting there.
    Unthrottled,
    /// A throttled DEADLINE task's runtime replenished at its next period
    /// (`dl_task_timer`).
    Replenished,
}

/// One time a task became runnable, and its wait until it next ran: what
/// a kernel trace's wake-up records (`sched_waking` to the next switch-in).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Wake {
    pub task: u32,
    pub cause: WakeCause,
    pub at_ns: u64,
    /// The CPU whose run queue it was put on.
    pub target_cpu: u32,
    /// Its next switch-in, and on which CPU; None: the model stopped
    /// first.
    pub run_ns: Option<u64>,
    pub run_cpu: Option<u32>,
}

impl Wake {
    /// Runnable to running, when it ran.
    pub fn wait_ns(&self) -> Option<u64> {
        Some(self.run_ns?.saturating_sub(self.at_ns))
    }
}

/// What a simulation produced.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub stats: Vec<TaskStats>,
    pub programs: Vec<Program>,
    pub timeline: Vec<Segment>,
    /// Every time a task became runnable, in time order.
    pub wakes: Vec<Wake>,
    /// WRR turns, times after `release_ns`.
    pub wrr_rows: Vec<crate::record::SliceRow>,
    /// Each CPU's busy time from the release to the end.
    pub cpu_busy_ns: Vec<u64>,
    /// Steps of the loop: instants at which at least one event was due
    /// (each step handles every event due then; the bench's rate).
    pub events: u64,
    /// When the last worker exited, or when the limit stopped it.
    pub end_ns: u64,
    pub timed_out: bool,
    /// The model stopped making progress (a bug in it, never a result).
    pub stalled: bool,
    /// The caller's stop check said stop (a stop signal): the run is not
    /// finished and nothing of it is a result.
    pub interrupted: bool,
    /// When the timeline and wake-ups stopped being kept (their bound,
    /// [`TIMELINE_MAX`], was reached): both are complete before it only.
    /// None: kept whole.
    pub timeline_cut_ns: Option<u64>,
    /// The periodic balancing passes of busy CPUs, as schedstat counts
    /// them.
    pub lb: crate::sim::balance::LbTally,
}

/// The most segments, and the most wake-ups, one run keeps for its
/// predicted timeline: each worker's figures are counted as the run goes
/// whatever its length, but the timeline is stored, so a long run with
/// many switches keeps the start of it (a few tens of MB at most) rather
/// than growing without bound.
pub const TIMELINE_MAX: usize = 250_000;

/// How many events between two calls of the caller's stop check.
const STOP_CHECK_EVERY: u32 = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    NotStarted,
    Runnable,
    Running,
    Blocked,
    Exited,
}

/// The unfinished part of the running task's current action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Work {
    Cpu(u64),
    Until(u64),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum TimerKind {
    Start,
    Wake,
    Replenish,
}

struct Task {
    sched: SchedSpec,
    cpus: Vec<usize>,
    cpu: usize,
    state: State,
    work: Work,
    program: Program,
    stats: TaskStats,
    tokens: u32,
    closed: bool,
    waiting: bool,
    last_closed: bool,
    runnable_since: u64,
    worker: bool,
    /// Its wake in [`Engine::wakes`] not yet followed by a switch-in.
    pending_wake: Option<usize>,
    /// When it last left a CPU (for `task_hot`).
    last_ran_ns: u64,
    /// Its place in its CPU's `cfs_tasks`, most recently used first: the
    /// [`Engine::listed`] count when it was last enqueued (`list_add` at
    /// the head, `account_entity_enqueue`) or picked to run (`list_move`
    /// to the head, `__set_next_task_fair`). Balancing detaches from the
    /// tail: the lowest first.
    listed: u64,
    /// Moved since it last ran: its next run pays the migration cost.
    moved: bool,
}

#[derive(Default)]
struct Cpu {
    curr: Option<usize>,
    seg_start: u64,
    switch_left: u64,
    fair: FairRq,
    rt: RtRq,
    dl: DlRq,
    server: Option<FairServer>,
    resched: bool,
}

/// Class rank for preemption and placement: higher runs first.
fn rank(s: &SchedSpec) -> u8 {
    match s {
        SchedSpec::Deadline { .. } => 4,
        SchedSpec::Rt { .. } => 3,
        SchedSpec::Wrr => 2,
        SchedSpec::Fair { .. } => 1,
    }
}

/// The simulation.
pub struct Engine<'m> {
    m: &'m Machine,
    now: u64,
    tasks: Vec<Task>,
    cpus: Vec<Cpu>,
    fair: Vec<FairEntity>,
    rt: Vec<RtEntity>,
    dl: Vec<Option<DlEntity>>,
    wrr: Option<WrrSim>,
    timers: BinaryHeap<Reverse<(u64, TimerKind, usize)>>,
    timeline: Vec<Segment>,
    wakes: Vec<Wake>,
    release_ns: u64,
    /// The last tick and RT period handled (two events at one instant
    /// must not tick twice).
    ticked_at: Option<u64>,
    period_at: Option<u64>,
    /// Workers not exited yet (the run ends at 0).
    workers_left: usize,
    /// See [`Outcome::timeline_cut_ns`].
    timeline_cut_ns: Option<u64>,
    topo: SimTopology,
    /// Per CPU, the balancing state of each of its domains.
    lb: Vec<Vec<LbState>>,
    lb_tally: crate::sim::balance::LbTally,
    cpu_busy_ns: Vec<u64>,
    events: u64,
    /// The fair class's load averages (`load`).
    pelt: load::Pelt,
    /// Moves to the head of a `cfs_tasks` list so far (see `Task::listed`).
    listed: u64,
}

impl<'m> Engine<'m> {
    /// A simulation of `specs` on `m`; `release_ns` is when the measured
    /// window starts (WRR rows and period shares count from there).
    pub fn new(m: &'m Machine, specs: Vec<TaskSpec>, wrr: Option<WrrSim>, release_ns: u64) -> Self {
        let mut cpus: Vec<Cpu> = (0..m.cpus.max(1)).map(|_| Cpu::default()).collect();
        if m.fair_server {
            for c in &mut cpus {
                c.server = Some(FairServer::new(
                    m.fair_server_runtime_ns,
                    m.fair_server_period_ns,
                    0,
                ));
            }
        }
        let topo = m.topology();
        let lb = topo
            .domains
            .iter()
            .map(|ds| ds.iter().map(LbState::new).collect())
            .collect();
        let mut e = Engine {
            pelt: load::Pelt::new(specs.len(), cpus.len()),
            cpu_busy_ns: vec![0; cpus.len()],
            events: 0,
            topo,
            lb,
            lb_tally: Default::default(),
            listed: 0,
            m,
            now: 0,
            tasks: Vec::with_capacity(specs.len()),
            cpus,
            fair: Vec::new(),
            rt: Vec::new(),
            dl: Vec::new(),
            wrr,
            timers: BinaryHeap::new(),
            timeline: Vec::new(),
            wakes: Vec::new(),
            release_ns,
            ticked_at: None,
            period_at: None,
            workers_left: 0,
            timeline_cut_ns: None,
        };
        for (i, s) in specs.into_iter().enumerate() {
            let (kind, nice, slice) = match s.sched {
                SchedSpec::Fair {
                    kind,
                    nice,
                    slice_ns,
                } => (kind, nice, slice_ns),
                _ => (FairKind::Normal, 0, m.base_slice_ns),
            };
            e.fair.push(FairEntity::new(kind, nice, slice));
            let (prio, rr) = match s.sched {
                SchedSpec::Rt { prio, rr } => (prio, rr),
                _ => (0, false),
            };
            e.rt.push(RtEntity {
                prio,
                rr,
                ticks_left: m.rr_ticks(),
            });
            e.dl.push(match s.sched {
                SchedSpec::Deadline {
                    runtime_ns,
                    deadline_ns,
                    period_ns,
                } => Some(DlEntity::new(runtime_ns, deadline_ns, period_ns)),
                _ => None,
            });
            let cpus: Vec<usize> = s.cpus.into_iter().filter(|&c| c < m.cpus.max(1)).collect();
            let cpus = if cpus.is_empty() { vec![0] } else { cpus };
            e.timers.push(Reverse((s.start_ns, TimerKind::Start, i)));
            e.workers_left += usize::from(s.worker);
            e.tasks.push(Task {
                sched: s.sched,
                cpu: cpus[i % cpus.len()],
                cpus,
                state: State::NotStarted,
                // The first run after release: the worker returns from the
                // barrier before its program starts.
                work: Work::Cpu(0),
                program: s.program,
                stats: TaskStats::default(),
                tokens: 0,
                closed: false,
                waiting: false,
                last_closed: false,
                runnable_since: s.start_ns,
                worker: s.worker,
                pending_wake: None,
                last_ran_ns: 0,
                listed: 0,
                moved: false,
            });
        }
        e
    }

    /// Run until every worker has exited, or `limit_ns`.
    pub fn run(self, limit_ns: u64) -> Outcome {
        self.run_until_stopped(limit_ns, &mut || false)
    }

    /// [`Engine::run`], asking `stop` every few thousand events whether to
    /// give up (a stop signal): the outcome is then `interrupted`.
    pub fn run_until_stopped(mut self, limit_ns: u64, stop: &mut dyn FnMut() -> bool) -> Outcome {
        let mut timed_out = false;
        let mut stalled = false;
        let mut interrupted = false;
        let mut still = 0u32;
        let mut events = 0u32;
        loop {
            if self.workers_left == 0 {
                break;
            }
            events = events.wrapping_add(1);
            self.events += 1;
            if events.is_multiple_of(STOP_CHECK_EVERY) && stop() {
                interrupted = true;
                break;
            }
            let t = self.next_event().min(limit_ns);
            if t >= limit_ns && self.now >= limit_ns {
                timed_out = true;
                break;
            }
            // Events at one instant settle in a few rounds; a model that
            // makes no progress for this many is a bug, reported as such.
            still = if t == self.now { still + 1 } else { 0 };
            if still > 100_000 {
                stalled = true;
                break;
            }
            self.advance(t);
            self.handle_events();
            self.settle();
        }
        let mut out = self.finish(timed_out, stalled);
        out.interrupted = interrupted;
        out
    }

    fn finish(mut self, timed_out: bool, stalled: bool) -> Outcome {
        for c in 0..self.cpus.len() {
            self.close_segment(c, None);
        }
        if let Some(w) = self.wrr.as_mut() {
            for c in 0..self.cpus.len() {
                w.end_turn(c, self.now, self.release_ns);
            }
        }
        let (stats, programs) = self.tasks.into_iter().map(|t| (t.stats, t.program)).unzip();
        Outcome {
            stats,
            programs,
            timeline: self.timeline,
            wakes: self.wakes,
            wrr_rows: self.wrr.map(|w| w.rows).unwrap_or_default(),
            cpu_busy_ns: self.cpu_busy_ns,
            events: self.events,
            end_ns: self.now,
            timed_out,
            stalled,
            interrupted: false,
            timeline_cut_ns: self.timeline_cut_ns,
            lb: self.lb_tally,
        }
    }

    fn tick_ns(&self) -> u64 {
        self.m.tick_ns().max(1)
    }

    /// The earliest time something happens after now.
    fn next_event(&self) -> u64 {
        let now = self.now;
        let tick = self.tick_ns();
        let mut t = (now / tick + 1) * tick;
        let p = self.m.rt_period_ns();
        t = t.min((now / p + 1) * p);
        if self.release_ns > now {
            t = t.min(self.release_ns);
        }
        if let Some(Reverse((at, _, _))) = self.timers.peek() {
            t = t.min((*at).max(now));
        }
        for (c, cpu) in self.cpus.iter().enumerate() {
            if let Some(s) = &cpu.server {
                t = t.min(s.period_end);
                let fair_running = cpu.curr.is_some_and(|i| self.is_fair(i));
                if s.boosted && fair_running {
                    t = t.min(now + cpu.switch_left.max(s.remaining_ns));
                } else if !s.boosted && !cpu.fair.is_empty() && !fair_running {
                    t = t.min(s.zero_laxity().max(now));
                }
            }
            let Some(i) = cpu.curr else { continue };
            let busy = now + cpu.switch_left;
            t = t.min(match self.tasks[i].work {
                Work::Cpu(left) => busy + left,
                Work::Until(until) => busy.max(until),
            });
            if let Some(d) = self.dl[i] {
                t = t.min(now + d.remaining_ns.max(0) as u64);
            }
            if let (SchedSpec::Wrr, Some(w)) = (self.tasks[i].sched, &self.wrr)
                && let Some(left) = w.left_ns(c)
            {
                t = t.min(now + left);
            }
        }
        t.max(now)
    }

    fn is_fair(&self, i: usize) -> bool {
        matches!(self.tasks[i].sched, SchedSpec::Fair { .. })
    }

    /// Let time pass to `t`: running tasks use the CPU.
    fn advance(&mut self, t: u64) {
        let delta = t.saturating_sub(self.now);
        if delta > 0 {
            let measured = t.saturating_sub(self.now.max(self.release_ns));
            for c in 0..self.cpus.len() {
                if let Some(i) = self.cpus[c].curr {
                    self.charge(c, i, delta);
                    self.cpu_busy_ns[c] += measured;
                }
            }
        }
        self.now = t;
    }

    fn charge(&mut self, c: usize, i: usize, delta: u64) {
        let switching = self.cpus[c].switch_left.min(delta);
        self.cpus[c].switch_left -= switching;
        let worked = delta - switching;
        let task = &mut self.tasks[i];
        task.stats.run_ns += delta;
        task.stats.work_cpu_ns += worked;
        if let Work::Cpu(left) = &mut task.work {
            *left = left.saturating_sub(worked);
        }
        match task.sched {
            SchedSpec::Fair { .. } => {
                FairRq::charge(&mut self.fair[i], delta);
                if let Some(s) = self.cpus[c].server.as_mut()
                    && s.charge(delta)
                {
                    self.cpus[c].resched = true;
                }
            }
            SchedSpec::Rt { .. } => self.cpus[c].rt.rt_time_ns += delta,
            SchedSpec::Wrr => {
                self.cpus[c].rt.rt_time_ns += delta;
                if let Some(w) = self.wrr.as_mut()
                    && w.charge(c, delta)
                {
                    w.end_turn(c, self.now + delta, self.release_ns);
                    self.cpus[c].resched = true;
                }
            }
            SchedSpec::Deadline { .. } => {
                if let Some(d) = self.dl[i].as_mut()
                    && d.charge(delta)
                {
                    let at = d.next_period();
                    self.timers.push(Reverse((at, TimerKind::Replenish, i)));
                    self.cpus[c].resched = true;
                }
            }
        }
    }

    fn handle_events(&mut self) {
        let now = self.now;
        // Actions that ended.
        for c in 0..self.cpus.len() {
            self.drive_if_done(c);
        }
        while let Some(Reverse((at, kind, i))) = self.timers.peek().copied() {
            if at > now {
                break;
            }
            self.timers.pop();
            match kind {
                TimerKind::Start => {
                    self.tasks[i].state = State::Blocked;
                    self.wake(i, WakeCause::Released);
                }
                TimerKind::Wake => self.wake(i, WakeCause::Timer),
                TimerKind::Replenish => self.replenish(i),
            }
        }
        if now.is_multiple_of(self.tick_ns()) && self.ticked_at != Some(now) {
            self.ticked_at = Some(now);
            for c in 0..self.cpus.len() {
                self.tick(c);
            }
            self.pelt_tick();
            self.periodic_balance();
        }
        let period = self.m.rt_period_ns();
        if now.is_multiple_of(period) && self.period_at != Some(now) {
            self.period_at = Some(now);
            let runtime = self.m.rt_runtime_ns();
            for c in 0..self.cpus.len() {
                if self.cpus[c].rt.period(runtime) {
                    self.cpus[c].resched = true;
                    self.unthrottled(c);
                }
            }
            if now > self.release_ns {
                for t in &mut self.tasks {
                    t.stats.run_at_period = Some((now, t.stats.run_ns));
                }
            }
        }
        if now == self.release_ns {
            for t in &mut self.tasks {
                t.stats.run_at_release = t.stats.run_ns;
            }
        }
        for c in 0..self.cpus.len() {
            let starved = !self.cpus[c].fair.is_empty()
                && !self.cpus[c].curr.is_some_and(|i| self.is_fair(i));
            if let Some(s) = self.cpus[c].server.as_mut()
                && s.update(now, starved)
            {
                self.cpus[c].resched = true;
            }
        }
    }

    /// The tick on one CPU: the running task's class accounts it.
    fn tick(&mut self, c: usize) {
        let Some(i) = self.cpus[c].curr else { return };
        match self.tasks[i].sched {
            SchedSpec::Fair { .. } => {
                if self.cpus[c].fair.tick(&mut self.fair, i) {
                    self.cpus[c].resched = true;
                }
            }
            SchedSpec::Rt { .. } => {
                let ticks = self.m.rr_ticks();
                if self.cpus[c].rt.tick(i, &mut self.rt[i], ticks) {
                    self.cpus[c].resched = true;
                }
                if self.cpus[c].rt.check_throttle(self.m.rt_runtime_ns()) {
                    self.cpus[c].resched = true;
                }
            }
            SchedSpec::Wrr => {
                if self.cpus[c].rt.check_throttle(self.m.rt_runtime_ns()) {
                    self.cpus[c].resched = true;
                }
            }
            SchedSpec::Deadline { .. } => {}
        }
    }

    fn replenish(&mut self, i: usize) {
        let now = self.now;
        if let Some(d) = self.dl[i].as_mut() {
            d.replenish(now);
        }
        if matches!(self.tasks[i].state, State::Runnable | State::Running) {
            let c = self.tasks[i].cpu;
            if self.tasks[i].state == State::Runnable {
                self.note_wake(i, WakeCause::Replenished);
            }
            self.check_preempt(c, i);
        }
    }

    /// CPU `c`'s RT run queue is back: the RT and WRR tasks waiting on it
    /// (off the CPU while it was throttled) are runnable again. The one
    /// still running, throttled and unthrottled at one instant, never
    /// stopped.
    fn unthrottled(&mut self, c: usize) {
        for i in 0..self.tasks.len() {
            let t = &self.tasks[i];
            if t.cpu == c
                && t.state == State::Runnable
                && matches!(t.sched, SchedSpec::Rt { .. } | SchedSpec::Wrr)
            {
                self.note_wake(i, WakeCause::Unthrottled);
            }
        }
    }

    /// Task `i`, now on its CPU's run queue, became runnable; a wake not
    /// yet followed by a switch-in stays the one (a task woken while its
    /// class is throttled waits from its wake-up, as a kernel trace's
    /// `sched_waking` counts).
    fn note_wake(&mut self, i: usize, cause: WakeCause) {
        if self.tasks[i].pending_wake.is_some() {
            return;
        }
        if self.wakes.len() >= TIMELINE_MAX {
            // Still pending (one wake until the switch-in), not kept.
            self.tasks[i].pending_wake = Some(usize::MAX);
            self.cut_timeline(self.now);
            return;
        }
        self.tasks[i].pending_wake = Some(self.wakes.len());
        self.wakes.push(Wake {
            task: i as u32,
            cause,
            at_ns: self.now,
            target_cpu: self.tasks[i].cpu as u32,
            run_ns: None,
            run_cpu: None,
        });
    }

    /// Schedule every CPU that must, balance, and drive tasks whose
    /// actions end at once, until nothing changes.
    fn settle(&mut self) {
        for _ in 0..10_000 {
            for c in 0..self.cpus.len() {
                if self.cpus[c].resched || self.cpus[c].curr.is_none() {
                    self.schedule(c);
                }
            }
            let moved = self.balance();
            let mut drove = false;
            for c in 0..self.cpus.len() {
                drove |= self.drive_if_done(c);
            }
            if !moved && !drove && self.cpus.iter().all(|c| !c.resched) {
                return;
            }
        }
    }

    /// Ask the running task's program for its next actions if the current
    /// one is done. True: something changed.
    fn drive_if_done(&mut self, c: usize) -> bool {
        let Some(i) = self.cpus[c].curr else {
            return false;
        };
        if self.cpus[c].switch_left > 0 {
            return false;
        }
        let done = match self.tasks[i].work {
            Work::Cpu(left) => left == 0,
            Work::Until(until) => self.now >= until,
        };
        if !done {
            return false;
        }
        self.drive(c, i);
        true
    }

    /// Run the program of running task `i` until it asks for CPU, blocks
    /// or exits.
    fn drive(&mut self, c: usize, i: usize) {
        let now = self.now;
        let st = &mut self.tasks[i].stats;
        if st.first_run_ns.is_none() {
            st.first_run_ns = Some(now);
            st.at_start = (st.run_ns, st.wait_ns, st.timeslices, st.nvcsw, st.nivcsw);
            st.migrations_at_start = st.migrations;
        }
        for _ in 0..1_000_000 {
            let ctx = Ctx {
                now: self.now,
                work_cpu_ns: self.tasks[i].stats.work_cpu_ns,
                closed: std::mem::take(&mut self.tasks[i].last_closed),
            };
            match self.tasks[i].program.next(ctx) {
                Action::Cpu(0) => continue,
                Action::Cpu(ns) => {
                    self.tasks[i].work = Work::Cpu(ns);
                    return;
                }
                Action::CpuUntil(t) if t <= self.now => continue,
                Action::CpuUntil(t) => {
                    self.tasks[i].work = Work::Until(t);
                    return;
                }
                Action::Sleep(t) => {
                    self.timers
                        .push(Reverse((t.max(self.now), TimerKind::Wake, i)));
                    self.block(c, i);
                    return;
                }
                Action::Io(ns) => {
                    self.timers
                        .push(Reverse((self.now + ns, TimerKind::Wake, i)));
                    self.block(c, i);
                    return;
                }
                Action::Signal(p) => self.post(i, p, false),
                Action::Close(p) => self.post(i, p, true),
                Action::Wait => {
                    let t = &mut self.tasks[i];
                    if t.tokens > 0 {
                        t.tokens -= 1;
                    } else if t.closed {
                        t.last_closed = true;
                    } else {
                        t.waiting = true;
                        self.block(c, i);
                        return;
                    }
                }
                Action::Exit => {
                    self.exit(c, i);
                    return;
                }
            }
        }
        // A program that never yields: end it rather than loop forever.
        self.exit(c, i);
    }

    /// Task `from` gives task `p` a token (or closes its channel), waking
    /// it if it waits.
    fn post(&mut self, from: usize, p: usize, close: bool) {
        let Some(t) = self.tasks.get_mut(p) else {
            return;
        };
        if close {
            t.closed = true;
        } else {
            t.tokens += 1;
        }
        if t.waiting && t.state == State::Blocked {
            t.waiting = false;
            if t.tokens > 0 {
                t.tokens -= 1;
            } else {
                t.last_closed = true;
            }
            self.wake(p, WakeCause::Peer(from as u32));
        }
    }

    /// The running task `i` leaves the CPU without being runnable.
    fn leave(&mut self, c: usize, i: usize, end: SegmentEnd) {
        self.close_segment(c, Some(end));
        self.tasks[i].last_ran_ns = self.now;
        self.pelt_switch(c, None);
        self.cpus[c].curr = None;
        self.cpus[c].switch_left = 0;
        self.cpus[c].resched = true;
        self.dequeue(c, i, true);
        if let (SchedSpec::Wrr, Some(w)) = (self.tasks[i].sched, self.wrr.as_mut())
            && w.turn_task(c) == Some(i)
        {
            w.end_turn(c, self.now, self.release_ns);
        }
    }

    fn block(&mut self, c: usize, i: usize) {
        self.leave(c, i, SegmentEnd::Blocked);
        self.tasks[i].state = State::Blocked;
        self.tasks[i].stats.nvcsw += 1;
        if let (SchedSpec::Wrr, Some(w)) = (self.tasks[i].sched, self.wrr.as_mut()) {
            w.block(i);
        }
    }

    fn exit(&mut self, c: usize, i: usize) {
        self.leave(c, i, SegmentEnd::Exited);
        if self.is_fair(i) {
            self.pelt_exit(i);
        }
        self.tasks[i].state = State::Exited;
        self.tasks[i].stats.exit_ns = Some(self.now);
        self.workers_left = self
            .workers_left
            .saturating_sub(usize::from(self.tasks[i].worker));
        if let (SchedSpec::Wrr, Some(w)) = (self.tasks[i].sched, self.wrr.as_mut()) {
            w.finish(i);
        }
    }

    fn close_segment(&mut self, c: usize, end: Option<SegmentEnd>) {
        if let Some(i) = self.cpus[c].curr
            && self.now > self.cpus[c].seg_start
        {
            if self.timeline.len() >= TIMELINE_MAX {
                self.cut_timeline(self.cpus[c].seg_start);
                self.cpus[c].seg_start = self.now;
                return;
            }
            self.timeline.push(Segment {
                cpu: c as u32,
                task: i as u32,
                start_ns: self.cpus[c].seg_start,
                end_ns: self.now,
                end,
            });
        }
        self.cpus[c].seg_start = self.now;
    }

    /// A segment or wake-up from `at_ns` on was not kept.
    fn cut_timeline(&mut self, at_ns: u64) {
        self.timeline_cut_ns = Some(self.timeline_cut_ns.map_or(at_ns, |t| t.min(at_ns)));
    }

    /// A blocked task becomes runnable on the CPU chosen for it.
    fn wake(&mut self, i: usize, cause: WakeCause) {
        if self.tasks[i].state != State::Blocked {
            return;
        }
        let waker = match cause {
            WakeCause::Peer(from) => Some(from as usize),
            _ => None,
        };
        let c = self.select_cpu(i, waker);
        self.set_cpu(i, c);
        self.tasks[i].state = State::Runnable;
        self.tasks[i].runnable_since = self.now;
        if let (SchedSpec::Wrr, Some(w)) = (self.tasks[i].sched, self.wrr.as_mut()) {
            w.wake(i);
        }
        if let Some(d) = self.dl[i].as_mut() {
            d.wake(self.now);
        }
        self.enqueue(c, i, false);
        self.note_wake(i, cause);
        self.check_preempt(c, i);
    }

    fn enqueue(&mut self, c: usize, i: usize, initial: bool) {
        match self.tasks[i].sched {
            SchedSpec::Fair { .. } => {
                self.list_at_head(i);
                self.pelt_enqueue(c, i);
                self.cpus[c].fair.enqueue(&mut self.fair, i, c, initial);
            }
            SchedSpec::Rt { .. } => self.cpus[c].rt.enqueue(i, &self.rt[i]),
            SchedSpec::Deadline { .. } => self.cpus[c].dl.queued.push(i),
            SchedSpec::Wrr => {}
        }
    }

    /// Fair task `i` goes to the head of its CPU's `cfs_tasks`.
    fn list_at_head(&mut self, i: usize) {
        self.listed += 1;
        self.tasks[i].listed = self.listed;
    }

    fn dequeue(&mut self, c: usize, i: usize, sleep: bool) {
        match self.tasks[i].sched {
            SchedSpec::Fair { .. } => {
                self.pelt_dequeue(c, i);
                let delay = sleep && self.m.delay_dequeue;
                let tick = self.tick_ns();
                self.cpus[c].fair.dequeue(&mut self.fair, i, c, tick, delay);
            }
            SchedSpec::Rt { .. } => self.cpus[c].rt.dequeue(i, &self.rt[i]),
            SchedSpec::Deadline { .. } => self.cpus[c].dl.queued.retain(|&j| j != i),
            SchedSpec::Wrr => {}
        }
    }

    /// Whether runnable task `i` should preempt what runs on CPU `c`.
    fn check_preempt(&mut self, c: usize, i: usize) {
        let Some(curr) = self.cpus[c].curr else {
            self.cpus[c].resched = true;
            return;
        };
        if curr == i {
            return;
        }
        let (a, b) = (rank(&self.tasks[i].sched), rank(&self.tasks[curr].sched));
        let preempt = if a != b {
            a > b
        } else {
            match self.tasks[i].sched {
                SchedSpec::Rt { .. } => self.rt[i].prio > self.rt[curr].prio,
                SchedSpec::Deadline { .. } => match (self.dl[i], self.dl[curr]) {
                    (Some(x), Some(y)) => !x.throttled && x.abs_deadline < y.abs_deadline,
                    _ => false,
                },
                SchedSpec::Fair { .. } => {
                    let fair = &self.cpus[c].fair;
                    fair.wakeup_preempt(&mut self.fair, curr, i)
                }
                SchedSpec::Wrr => false,
            }
        };
        if preempt {
            self.cpus[c].resched = true;
        }
    }

    /// The next task of CPU `c`, in class order.
    fn pick(&mut self, c: usize) -> Option<usize> {
        let curr = self.cpus[c].curr;
        if let Some(i) = self.cpus[c].dl.pick(&self.dl) {
            return Some(i);
        }
        let cpu = &self.cpus[c];
        let fair_curr = curr.filter(|&i| self.is_fair(i));
        if cpu.server.as_ref().is_some_and(|s| s.boosted)
            && let Some(i) = cpu.fair.pick(&self.fair, fair_curr)
        {
            return Some(i);
        }
        if let Some(i) = cpu.rt.pick() {
            return Some(i);
        }
        if !cpu.rt.throttled
            && let Some(w) = self.wrr.as_mut()
            && let Some(i) = w.pick(c, self.now)
        {
            return Some(i);
        }
        self.cpus[c].fair.pick(&self.fair, fair_curr)
    }

    /// Switch CPU `c` to its next task.
    fn schedule(&mut self, c: usize) {
        self.cpus[c].resched = false;
        let prev = self.cpus[c].curr;
        let next = self.pick(c);
        if let Some(n) = next
            && self.is_fair(n)
        {
            // set_next_entity: RUN_TO_PARITY protects its slice.
            self.fair[n].protected = true;
            self.list_at_head(n);
        }
        if next == prev {
            return;
        }
        self.pelt_switch(c, next);
        if let Some(p) = prev {
            let end = self.preempted_end(c, p);
            self.close_segment(c, Some(end));
            let t = &mut self.tasks[p];
            t.state = State::Runnable;
            t.runnable_since = self.now;
            t.last_ran_ns = self.now;
            t.stats.nivcsw += 1;
        }
        self.cpus[c].curr = next;
        self.cpus[c].seg_start = self.now;
        self.cpus[c].switch_left = 0;
        if let Some(n) = next {
            let t = &mut self.tasks[n];
            t.state = State::Running;
            t.stats.wait_ns += self.now - t.runnable_since;
            t.stats.timeslices += 1;
            if let Some(w) = t.pending_wake.take().and_then(|k| self.wakes.get_mut(k)) {
                w.run_ns = Some(self.now);
                w.run_cpu = Some(c as u32);
            }
            t.stats.mark_ran_on(c);
            let moved = std::mem::take(&mut t.moved);
            self.cpus[c].switch_left =
                self.m.context_switch_ns + if moved { self.m.migration_ns } else { 0 };
        }
    }

    /// Why running task `p` leaves CPU `c` still runnable: its class out of
    /// bandwidth (RT or WRR on a throttled run queue, a DEADLINE task
    /// whose runtime is spent), else preempted.
    fn preempted_end(&self, c: usize, p: usize) -> SegmentEnd {
        let throttled = match self.tasks[p].sched {
            SchedSpec::Rt { .. } | SchedSpec::Wrr => self.cpus[c].rt.throttled,
            SchedSpec::Deadline { .. } => self.dl[p].is_some_and(|d| d.throttled),
            SchedSpec::Fair { .. } => false,
        };
        if throttled {
            SegmentEnd::Throttled
        } else {
            SegmentEnd::Preempted
        }
    }
}
