//! Where tasks go: wake-up placement, RT/DEADLINE push and pull, pulls
//! to idle CPUs, and the fair class's periodic load balancing per
//! scheduling domain, as the engine carries them out (the policies
//! themselves are [`crate::sim::placement`] and [`crate::sim::balance`]).

use std::cmp::Reverse;

use super::{Engine, SchedSpec, State, rank};
use crate::sim::balance::{self, CpuLoad, Decision, Imbalance, LbResult, MIGRATION_COST_NS};
use crate::sim::eevdf::FairKind;
use crate::sim::placement::{self, CpuState};
use crate::sim::topology::Level;

impl Engine<'_> {
    /// A waking task's CPU: WRR stays; a fair task by
    /// [`placement::select_fair`] (the waker's CPU for wake-affine: a
    /// peer's, else its own previous CPU, where its timer fired); RT and
    /// DEADLINE the previous CPU if idle, else an idle allowed CPU, else
    /// the one running the least important task if less important than
    /// it (`find_lowest_rq`), else the previous CPU.
    pub(super) fn select_cpu(&self, i: usize, waker: Option<usize>) -> usize {
        let t = &self.tasks[i];
        if matches!(t.sched, SchedSpec::Wrr) {
            return t.cpu;
        }
        if self.is_fair(i) {
            let w = placement::Wakee {
                allowed: &t.cpus,
                prev: t.cpu,
                waker_cpu: waker.map_or(t.cpu, |j| self.tasks[j].cpu),
                sync: waker.is_some(),
                load: self.task_h_load(t.cpu, i),
                waker_load: waker.map_or(0, |j| self.task_h_load(self.tasks[j].cpu, j)),
            };
            return placement::select_fair(&self.topo, self, &w);
        }
        let idle = |c: usize| self.cpu_idle(c);
        if idle(t.cpu) {
            return t.cpu;
        }
        if let Some(&c) = t.cpus.iter().find(|&&c| idle(c)) {
            return c;
        }
        if rank(&t.sched) >= 3
            && let Some(c) = self.lowest_cpu_for(i)
        {
            return c;
        }
        t.cpu
    }

    /// Nothing runs or waits on CPU `c`.
    fn cpu_idle(&self, c: usize) -> bool {
        self.cpus[c].curr.is_none() && !self.has_waiting(c)
    }

    /// Task `i` is now on CPU `c`; a change counts as a migration.
    pub(super) fn set_cpu(&mut self, i: usize, c: usize) {
        let t = &mut self.tasks[i];
        if t.cpu != c && t.state != State::NotStarted {
            t.stats.migrations += 1;
            t.moved = true;
        }
        t.cpu = c;
    }

    /// Tasks queued on CPU `c`, the running one included.
    fn nr_running(&self, c: usize) -> usize {
        let cpu = &self.cpus[c];
        let fair_or_running = cpu.fair.len().max(usize::from(cpu.curr.is_some()));
        fair_or_running
            + cpu.rt.tasks().filter(|&i| Some(i) != cpu.curr).count()
            + cpu
                .dl
                .queued
                .iter()
                .filter(|&&i| Some(i) != cpu.curr)
                .count()
    }

    /// Each CPU as balancing reads it: its fair run queue's PELT
    /// averages as last updated (`cpu_load`, `cpu_runnable`,
    /// `cpu_util_cfs` without util_est, at most the capacity).
    fn cpu_loads(&self) -> Vec<CpuLoad> {
        (0..self.cpus.len())
            .map(|c| {
                let avg = &self.pelt.rq[c];
                CpuLoad {
                    nr_running: self.nr_running(c),
                    nr_fair: self.cpus[c].fair.len(),
                    load: avg.load_avg,
                    runnable: avg.runnable_avg,
                    util: avg.util_avg.min(balance::CAPACITY),
                }
            })
            .collect()
    }

    /// At the tick: each busy CPU balances each domain whose interval has
    /// passed, lowest level first (`rebalance_domains`); idle CPUs pull at
    /// once in [`Engine::balance`] instead (newidle and nohz balancing).
    ///
    /// Every CPU's first pass falls on the same tick, so the passes stay
    /// in lock step. That decides how many moves N hogs on M CPUs make: a
    /// CPU left with one hog of two has that hog's util near 512 and spare
    /// capacity until it passes 1024 / 1.17 (about 57 ms), and a busy CPU
    /// with spare capacity in an LLC takes nothing (balanced, its interval
    /// doubled). In lock step its next pass comes 63 ms after it lost the
    /// task, just past that, and every move takes two passes: 6 hogs on a
    /// 4-CPU HZ 1000 machine for 2 s, 5.00 migrations per process. A
    /// 1x4x1 debian-6.12 tcg-icount guest (scripts/guest-lb-probe) made
    /// 3.50: its first busy passes were 7 ms apart and its intervals run
    /// 63-72 ms where 63 are due (the ticks it loses), so that pass comes
    /// anywhere in 12-126 ms and is often balanced. With CPU c's first
    /// pass c × 4 ms (or 8, 16) later the model gives 3.33 (passes 83-84,
    /// balanced 42, failed 21-22, gained 20; the guest's schedstat: 82,
    /// 37, 26, 19), with c × 2 ms 4.00; before the LLC rule it gave 5.00
    /// at any offset. Which offset a machine has is its history (its idle
    /// passes before the work), not in the model.
    pub(super) fn periodic_balance(&mut self) {
        if self.topo.cpus() < 2 {
            return;
        }
        let (hz, n) = (self.m.hz, self.cpus.len());
        for c in 0..n {
            if self.cpus[c].curr.is_none() {
                continue;
            }
            for level in 0..self.topo.domains[c].len() {
                let d = &self.topo.domains[c][level];
                if !self.lb[c][level].due(d, true, hz, n, self.now) {
                    continue;
                }
                let loads = self.cpu_loads();
                let d = d.clone();
                let dec = if balance::should_we_balance(&d, &loads, c) {
                    balance::find_imbalance(&d, &loads, c)
                } else {
                    None
                };
                let result = match dec {
                    None => LbResult::Balanced,
                    Some(dec) => {
                        let failed = self.lb[c][level].failed;
                        // `task_hot`: SMT siblings share cache, never hot.
                        let hot_ok = failed > d.cache_nice_tries || d.level == Level::Smt;
                        LbResult::Moved(self.detach_fair(dec, c, failed, hot_ok))
                    }
                };
                self.lb_tally.add(result);
                let tasks = dec.is_some_and(|d| matches!(d.imbalance, Imbalance::Tasks(_)));
                if self.lb[c][level].after(&d, result, tasks, self.now)
                    && let Some(dec) = dec
                    && self.active_balance(dec.src, c)
                {
                    self.lb[c][level].pushed();
                }
            }
        }
    }

    /// Fair tasks on CPU `c` that may go to `to`, least recently used
    /// first (from the tail of `cfs_tasks`, as `detach_tasks` and
    /// `detach_one_task` walk it).
    fn movable_lru(&self, c: usize, to: usize) -> Vec<usize> {
        let mut cands: Vec<usize> = self.cpus[c]
            .fair
            .queued
            .iter()
            .copied()
            .filter(|&i| matches!(self.tasks[i].state, State::Runnable | State::Running))
            .filter(|&i| self.tasks[i].cpus.contains(&to))
            .collect();
        cands.sort_by_key(|&i| self.tasks[i].listed);
        cands
    }

    /// `detach_tasks` + `attach_tasks`: move fair tasks from `dec.src` to
    /// `to` (the one with the most CPU first, see below), skipping those
    /// pinned elsewhere, cache hot (ran within
    /// [`balance::MIGRATION_COST_NS`], unless `hot_ok`) or, for a load or
    /// utilisation imbalance, whose PELT load (`task_h_load`) or
    /// utilisation (`util_avg`) halved `failed` times exceeds what is left
    /// of it. Returns how many moved.
    fn detach_fair(&mut self, dec: Decision, to: usize, failed: u32, hot_ok: bool) -> usize {
        let from = dec.src;
        let curr = self.cpus[from].curr;
        let mut cands: Vec<usize> = self
            .movable_lru(from, to)
            .into_iter()
            .filter(|&i| {
                Some(i) == curr
                    || hot_ok
                    || self.now.saturating_sub(self.tasks[i].last_ran_ns) >= MIGRATION_COST_NS
            })
            .collect();
        // The kernel walks `cfs_tasks` from its tail, least recently used
        // first, and never takes the running task (`can_migrate_task`
        // refuses `task_on_cpu`; a 6.12 guest's hogs counted 27
        // `nr_failed_migrations_running` over 2 s). Which task waits at a
        // balance instant depends on the phase of slices against passes;
        // the model's ticks, slices and passes fall in lock step, so taking
        // the waiting task as the kernel does moves the same one each time
        // (3 hogs on 2 CPUs for 4 s: one never moves and gets 0.746 of a
        // CPU). The model moves the task that has had the most CPU first,
        // least recently run among equals, the running one included (as
        // the stopper of an active balance would move it): over many
        // passes, as the jitter does, every task takes its turn on the less
        // loaded CPU. How many move, and when, is the kernel's either way.
        cands.sort_by_key(|&i| {
            (
                Reverse(self.tasks[i].stats.run_ns),
                self.tasks[i].last_ran_ns,
                i,
            )
        });
        let mut moved = 0;
        let (mut tasks_left, mut left) = match dec.imbalance {
            Imbalance::Tasks(n) => (n, u64::MAX),
            Imbalance::Load(l) | Imbalance::Util(l) => (usize::MAX, l),
        };
        for i in cands {
            if tasks_left == 0 || left == 0 {
                break;
            }
            let amount = match dec.imbalance {
                Imbalance::Tasks(_) => None,
                // `max(task_h_load(p), 1)`.
                Imbalance::Load(_) => Some(self.task_h_load(from, i).max(1)),
                // `task_util_est` without util_est.
                Imbalance::Util(_) => Some(self.task_util(i)),
            };
            if let Some(a) = amount {
                if !balance::fits_load(a, failed, left) {
                    continue;
                }
                left = left.saturating_sub(a);
            }
            tasks_left -= 1;
            if Some(i) == curr {
                self.preempt_running(from, i);
            }
            self.migrate(i, from, to);
            moved += 1;
        }
        moved
    }

    /// `active_load_balance_cpu_stop` kicked by `to` on `from` (the pass's
    /// busiest CPU), if `from`'s running task may run on `to`: the
    /// stopper preempts that task and, if more than it is there,
    /// `detach_one_task` moves the least recently used fair task that may
    /// go (hot or not): the one that waited longest, or the preempted one
    /// if alone. True: a task moved.
    fn active_balance(&mut self, from: usize, to: usize) -> bool {
        let Some(curr) = self.cpus[from].curr else {
            return false;
        };
        if !self.tasks[curr].cpus.contains(&to) {
            return false;
        }
        if self.is_fair(curr) {
            self.preempt_running(from, curr);
        }
        let Some(&i) = self.movable_lru(from, to).first() else {
            return false;
        };
        self.migrate(i, from, to);
        true
    }

    /// Take running task `i` off CPU `c`, still runnable (the stopper
    /// preempting it for an active balance).
    fn preempt_running(&mut self, c: usize, i: usize) {
        self.close_segment(c, Some(super::SegmentEnd::Preempted));
        self.pelt_switch(c, None);
        self.cpus[c].curr = None;
        self.cpus[c].switch_left = 0;
        self.cpus[c].resched = true;
        let t = &mut self.tasks[i];
        t.state = State::Runnable;
        t.runnable_since = self.now;
        t.last_ran_ns = self.now;
        t.stats.nivcsw += 1;
    }

    fn has_waiting(&self, c: usize) -> bool {
        let cpu = &self.cpus[c];
        cpu.fair.len() > usize::from(cpu.curr.is_some_and(|i| self.is_fair(i)))
            || cpu.rt.tasks().any(|i| Some(i) != cpu.curr)
            || cpu.dl.queued.iter().any(|&i| Some(i) != cpu.curr)
    }

    /// How important task `i` is against others, for pushing: (rank,
    /// RT priority or the negated deadline).
    fn importance(&self, i: usize) -> (u8, i64) {
        let s = &self.tasks[i].sched;
        let within = match s {
            SchedSpec::Rt { prio, .. } => i64::from(*prio),
            SchedSpec::Deadline { .. } => -(self.dl[i].map_or(0, |d| d.abs_deadline) as i64),
            _ => 0,
        };
        (rank(s), within)
    }

    /// `find_lowest_rq`: the allowed CPU running the least important task,
    /// if that is less important than `i` (and not throttled for it).
    fn lowest_cpu_for(&self, i: usize) -> Option<usize> {
        let me = self.importance(i);
        let rt_like = matches!(self.tasks[i].sched, SchedSpec::Rt { .. });
        self.tasks[i]
            .cpus
            .iter()
            .copied()
            .filter(|&c| !(rt_like && self.cpus[c].rt.throttled))
            .filter_map(|c| {
                let theirs = self.cpus[c].curr.map_or((0, 0), |j| self.importance(j));
                (theirs < me).then_some((theirs, c))
            })
            .min()
            .map(|(_, c)| c)
    }

    /// Pull waiting tasks to idle CPUs and push waiting RT/DEADLINE tasks
    /// to CPUs running less important work. True: a task moved.
    pub(super) fn balance(&mut self) -> bool {
        let mut moved = false;
        // Push.
        for c in 0..self.cpus.len() {
            if self.cpus[c].rt.throttled {
                // A throttled run queue's RT tasks are off the CPU lists
                // push and pull look at.
                continue;
            }
            let waiting: Vec<usize> = self.cpus[c]
                .dl
                .queued
                .iter()
                .chain(self.cpus[c].rt.tasks().collect::<Vec<_>>().iter())
                .copied()
                .filter(|&i| self.tasks[i].state == State::Runnable)
                .filter(|&i| self.dl[i].is_none_or(|d| !d.throttled))
                .collect();
            for i in waiting {
                if let Some(to) = self.lowest_cpu_for(i)
                    && to != c
                {
                    self.migrate(i, c, to);
                    moved = true;
                }
            }
        }
        // Pull to idle CPUs.
        for to in 0..self.cpus.len() {
            if self.cpus[to].curr.is_some() {
                continue;
            }
            let waiting: Vec<usize> = (0..self.cpus.len()).map(|c| self.waiting_on(c)).collect();
            let candidate = (0..self.tasks.len())
                .filter(|&i| {
                    let t = &self.tasks[i];
                    t.state == State::Runnable
                        && t.cpu != to
                        && t.cpus.contains(&to)
                        && !matches!(t.sched, SchedSpec::Wrr)
                        && self.dl[i].is_none_or(|d| !d.throttled)
                        && !(matches!(t.sched, SchedSpec::Rt { .. })
                            && (self.cpus[to].rt.throttled || self.cpus[t.cpu].rt.throttled))
                })
                .max_by_key(|&i| (self.importance(i), waiting[self.tasks[i].cpu], Reverse(i)));
            if let Some(i) = candidate {
                let from = self.tasks[i].cpu;
                self.migrate(i, from, to);
                self.schedule(to);
                moved = true;
            }
        }
        moved
    }

    fn waiting_on(&self, c: usize) -> usize {
        self.tasks
            .iter()
            .filter(|t| t.state == State::Runnable && t.cpu == c)
            .count()
    }

    pub(super) fn migrate(&mut self, i: usize, from: usize, to: usize) {
        self.dequeue(from, i, false);
        self.set_cpu(i, to);
        self.enqueue(to, i, false);
        self.check_preempt(to, i);
    }
}

impl CpuState for Engine<'_> {
    fn idle(&self, c: usize) -> bool {
        if self.cpu_idle(c) {
            return true;
        }
        // sched_idle_cpu: only SCHED_IDLE tasks there.
        let cpu = &self.cpus[c];
        cpu.rt.is_empty()
            && cpu.dl.queued.is_empty()
            && cpu.curr.is_none_or(|i| self.is_fair(i))
            && !cpu.fair.is_empty()
            && cpu
                .fair
                .queued
                .iter()
                .all(|&i| self.fair[i].kind == FairKind::Idle)
    }

    fn load(&self, c: usize) -> u64 {
        self.pelt.rq[c].load_avg
    }

    fn nr_running(&self, c: usize) -> usize {
        Engine::nr_running(self, c)
    }
}
