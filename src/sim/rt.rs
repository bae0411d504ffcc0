//! FIFO and RR, one run queue per CPU, and RT throttling
//! (Documentation/scheduler/sched-rt-group.rst; kernel/sched/rt.c).
//!
//! - A list per priority; the highest non-empty list's head runs
//!   (`pick_next_rt_entity`). A woken task joins the tail of its list
//!   (`enqueue_task_rt`); a task preempted by a higher priority keeps its
//!   place at the head (it is never dequeued), so FIFO order holds.
//! - RR: the running task's slice counts down in ticks (`task_tick_rt`);
//!   at zero it gets `sched_rr_timeslice_ms` again and, when its list holds
//!   another task, goes to the tail (`requeue_task_rt`) and the CPU
//!   reschedules.
//! - Throttling: each CPU's RT time accumulates while an RT task runs
//!   (`update_curr_rt`); at the tick, once it exceeds `sched_rt_runtime_us`
//!   the run queue is throttled (`sched_rt_runtime_exceeded`); every
//!   `sched_rt_period_us` it is paid back by one runtime and unthrottled
//!   below it (`do_sched_rt_period_timer`). RT_RUNTIME_SHARE is off
//!   (its default since Linux 5.10), so CPUs do not borrow runtime.

use std::collections::{BTreeMap, VecDeque};

/// A task's entity in the RT class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RtEntity {
    /// User priority 1..99, higher runs first.
    pub prio: u32,
    pub rr: bool,
    /// RR: ticks left of the current slice.
    pub ticks_left: u64,
}

/// One CPU's RT run queue and its bandwidth state.
#[derive(Debug, Clone, Default)]
pub struct RtRq {
    lists: BTreeMap<u32, VecDeque<usize>>,
    /// RT time used in the current period (`rt_rq->rt_time`), ns.
    pub rt_time_ns: u64,
    pub throttled: bool,
}

impl RtRq {
    pub fn is_empty(&self) -> bool {
        self.lists.values().all(VecDeque::is_empty)
    }

    /// Waiting and running tasks, highest priority first.
    pub fn tasks(&self) -> impl Iterator<Item = usize> + '_ {
        self.lists.values().rev().flat_map(|l| l.iter().copied())
    }

    /// A waking or migrating task joins the tail of its priority's list.
    pub fn enqueue(&mut self, i: usize, e: &RtEntity) {
        self.lists.entry(e.prio).or_default().push_back(i);
    }

    pub fn dequeue(&mut self, i: usize, e: &RtEntity) {
        if let Some(l) = self.lists.get_mut(&e.prio) {
            l.retain(|&j| j != i);
        }
    }

    /// The head of the highest priority's list; None when throttled.
    pub fn pick(&self) -> Option<usize> {
        if self.throttled {
            return None;
        }
        self.lists.values().rev().find_map(|l| l.front().copied())
    }

    /// `task_tick_rt` for RR: count the tick; at the end of the slice,
    /// refill it and move the task behind its peers. True: reschedule.
    pub fn tick(&mut self, i: usize, e: &mut RtEntity, rr_ticks: u64) -> bool {
        if !e.rr {
            return false;
        }
        e.ticks_left = e.ticks_left.saturating_sub(1);
        if e.ticks_left > 0 {
            return false;
        }
        e.ticks_left = rr_ticks;
        match self.lists.get_mut(&e.prio) {
            Some(l) if l.len() > 1 => {
                l.retain(|&j| j != i);
                l.push_back(i);
                true
            }
            _ => false,
        }
    }

    /// `sched_rt_runtime_exceeded`, checked at the tick: throttle once the
    /// period's RT time exceeds the runtime. True: newly throttled.
    pub fn check_throttle(&mut self, runtime_ns: Option<u64>) -> bool {
        match runtime_ns {
            Some(r) if !self.throttled && self.rt_time_ns > r => {
                self.throttled = true;
                true
            }
            _ => false,
        }
    }

    /// `do_sched_rt_period_timer`: pay back one period's runtime and
    /// unthrottle below it. True: newly unthrottled.
    pub fn period(&mut self, runtime_ns: Option<u64>) -> bool {
        let Some(r) = runtime_ns else {
            self.rt_time_ns = 0;
            return std::mem::take(&mut self.throttled);
        };
        self.rt_time_ns -= self.rt_time_ns.min(r);
        if self.throttled && self.rt_time_ns < r {
            self.throttled = false;
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(prio: u32, rr: bool) -> RtEntity {
        RtEntity {
            prio,
            rr,
            ticks_left: 2,
        }
    }

    #[test]
    fn highest_priority_head_runs_and_fifo_keeps_order() {
        let mut rq = RtRq::default();
        let es = [e(10, false), e(10, false), e(50, false)];
        for (i, x) in es.iter().enumerate() {
            rq.enqueue(i, x);
        }
        assert_eq!(rq.pick(), Some(2));
        rq.dequeue(2, &es[2]);
        assert_eq!(rq.pick(), Some(0));
        assert_eq!(rq.tasks().collect::<Vec<_>>(), [0, 1]);
    }

    #[test]
    fn rr_rotates_after_its_ticks() {
        let mut rq = RtRq::default();
        let mut es = [e(10, true), e(10, true)];
        rq.enqueue(0, &es[0]);
        rq.enqueue(1, &es[1]);
        assert!(!rq.tick(0, &mut es[0], 2));
        assert!(rq.tick(0, &mut es[0], 2));
        assert_eq!(es[0].ticks_left, 2);
        assert_eq!(rq.pick(), Some(1));
    }

    /// 950 ms of 1 s: throttled once past 950 ms, paid back at the period.
    #[test]
    fn throttling_by_runtime_per_period() {
        let mut rq = RtRq::default();
        let r = Some(950_000_000);
        rq.rt_time_ns = 950_000_000;
        assert!(!rq.check_throttle(r));
        rq.rt_time_ns = 951_000_000;
        assert!(rq.check_throttle(r));
        assert_eq!(rq.pick(), None);
        assert!(rq.period(r));
        assert_eq!(rq.rt_time_ns, 1_000_000);
    }
}
