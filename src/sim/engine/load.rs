//! The fair class's PELT signals as the engine keeps them
//! ([`crate::sim::pelt`] does the arithmetic): one per fair task and one
//! per CPU's fair run queue, each brought up to date just before one of
//! its inputs changes, where the kernel calls `update_load_avg`:
//!
//! - a task joins or leaves a run queue (`enqueue_entity`,
//!   `dequeue_entity`): its queued weight, `h_nr_running`;
//! - a CPU switches tasks or its running task leaves (`put_prev_entity`,
//!   `set_next_entity`): `cfs_rq->curr`;
//! - the tick (`entity_tick`), when every run queue is brought up to date
//!   (busy ones by the tick, idle ones' blocked load as
//!   `update_blocked_averages` decays it) before balancing reads them.
//!
//! A task's averages stay in the run queue it last ran on while it sleeps
//! (decaying there), and move with it when it is placed on another CPU
//! (`detach_entity_load_avg` / `attach_entity_load_avg`; the kernel defers
//! a sleeper's removal to the old run queue's next update, the model does
//! it at once). An exiting task's are removed (`remove_entity_load_avg`).
//! A new task starts as `post_init_entity_util_avg` starts it.
//!
//! Left out: delayed-dequeue entities' load (the model dequeues them; 6.12
//! keeps their load but not their runnable), util_est, and group
//! scheduling (every task in the root group, so a task's `task_h_load`
//! is its `load_avg` × the run queue's over the run queue's + 1).

use super::Engine;
use crate::sim::pelt::SchedAvg;

/// The engine's PELT state.
#[derive(Debug, Default)]
pub(super) struct Pelt {
    /// Per task: its averages (`se->avg`).
    se: Vec<SchedAvg>,
    /// Per task: the run queue its averages are part of, if any.
    attached: Vec<Option<usize>>,
    /// Per task: on a run queue (`se->on_rq`).
    on_rq: Vec<bool>,
    /// Per CPU: the fair run queue's averages (`cfs_rq->avg`).
    pub(super) rq: Vec<SchedAvg>,
}

impl Pelt {
    pub(super) fn new(tasks: usize, cpus: usize) -> Pelt {
        Pelt {
            se: vec![SchedAvg::default(); tasks],
            attached: vec![None; tasks],
            on_rq: vec![false; tasks],
            rq: vec![SchedAvg::default(); cpus],
        }
    }
}

impl Engine<'_> {
    /// Bring CPU `c`'s fair run queue to now (`update_cfs_rq_load_avg`):
    /// its queued weight, runnable tasks and whether a fair task runs.
    pub(super) fn pelt_rq(&mut self, c: usize) {
        let cpu = &self.cpus[c];
        let weight: u64 = cpu.fair.queued.iter().map(|&i| self.fair[i].weight).sum();
        let nr = cpu.fair.len() as u64;
        let running = cpu.curr.is_some_and(|i| self.is_fair(i));
        self.pelt.rq[c].update(self.now, weight, nr, running, 1);
    }

    /// Bring fair task `i`'s averages to now (`__update_load_avg_se`).
    fn pelt_se(&mut self, i: usize) {
        let on = u64::from(self.pelt.on_rq[i]);
        let running = self.cpus[self.tasks[i].cpu].curr == Some(i);
        let w = self.fair[i].weight;
        self.pelt.se[i].update(self.now, on, on, running, w);
    }

    /// Fair task `i` joins CPU `c`'s run queue: both brought to now, its
    /// averages attached there if they are elsewhere (or new).
    pub(super) fn pelt_enqueue(&mut self, c: usize, i: usize) {
        self.pelt_rq(c);
        self.pelt_se(i);
        let w = self.fair[i].weight;
        match self.pelt.attached[i] {
            Some(o) if o == c => {}
            Some(o) => {
                self.pelt_rq(o);
                self.pelt.rq[o].detach(&self.pelt.se[i], w);
                self.pelt.rq[c].attach(&mut self.pelt.se[i], w);
            }
            None => {
                self.pelt.se[i] = SchedAvg::new_task(w, &self.pelt.rq[c]);
                self.pelt.rq[c].attach(&mut self.pelt.se[i], w);
            }
        }
        self.pelt.attached[i] = Some(c);
        self.pelt.on_rq[i] = true;
    }

    /// Fair task `i` leaves CPU `c`'s run queue (its averages stay).
    pub(super) fn pelt_dequeue(&mut self, c: usize, i: usize) {
        self.pelt_rq(c);
        self.pelt_se(i);
        self.pelt.on_rq[i] = false;
    }

    /// CPU `c`'s running task is about to change: the run queue and the
    /// tasks leaving and taking the CPU brought to now.
    pub(super) fn pelt_switch(&mut self, c: usize, next: Option<usize>) {
        self.pelt_rq(c);
        for i in [self.cpus[c].curr, next].into_iter().flatten() {
            if self.is_fair(i) {
                self.pelt_se(i);
            }
        }
    }

    /// An exited fair task's averages leave its run queue.
    pub(super) fn pelt_exit(&mut self, i: usize) {
        if let Some(o) = self.pelt.attached[i].take() {
            self.pelt_rq(o);
            self.pelt_se(i);
            let w = self.fair[i].weight;
            self.pelt.rq[o].detach(&self.pelt.se[i], w);
        }
    }

    /// At the tick: every run queue, and each running fair task, to now.
    pub(super) fn pelt_tick(&mut self) {
        for c in 0..self.cpus.len() {
            self.pelt_rq(c);
            if let Some(i) = self.cpus[c].curr.filter(|&i| self.is_fair(i)) {
                self.pelt_se(i);
            }
        }
    }

    /// `task_h_load` of fair task `i` on CPU `c` for a flat hierarchy:
    /// its `load_avg` as last updated, × the run queue's load over it + 1
    /// (`cfs_rq->h_load` is the root's own `load_avg`).
    pub(super) fn task_h_load(&self, c: usize, i: usize) -> u64 {
        let rq = self.pelt.rq[c].load_avg;
        self.pelt.se[i].load_avg * rq / (rq + 1)
    }

    /// Fair task `i`'s `util_avg` as last updated.
    pub(super) fn task_util(&self, i: usize) -> u64 {
        self.pelt.se[i].util_avg
    }

    /// Task `i`'s averages (tests).
    #[cfg(test)]
    pub(crate) fn task_avg(&self, i: usize) -> SchedAvg {
        self.pelt.se[i]
    }

    /// CPU `c`'s fair run queue's averages (tests).
    #[cfg(test)]
    pub(crate) fn rq_avg(&self, c: usize) -> SchedAvg {
        self.pelt.rq[c]
    }

    /// Task `i`'s CPU (tests).
    #[cfg(test)]
    pub(crate) fn task_cpu(&self, i: usize) -> usize {
        self.tasks[i].cpu
    }

    /// Run the model to `t_ns` and stop there, the engine kept (tests).
    #[cfg(test)]
    pub(crate) fn run_to(&mut self, t_ns: u64) {
        while self.now < t_ns {
            let t = self.next_event().min(t_ns);
            self.advance(t);
            self.handle_events();
            self.settle();
        }
    }
}
