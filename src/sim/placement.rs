//! Where a waking fair task goes (kernel/sched/fair.c
//! `select_task_rq_fair` on the wake-up path), as pure functions of the
//! topology and which CPUs are idle:
//!
//! - `wake_affine` when the waker runs on another CPU of a domain that
//!   also spans the wakee's previous CPU: `wake_affine_idle` (the waker's
//!   CPU if it is idle and shares the LLC with the previous one; the
//!   waker's CPU on a sync wake-up where the waker is alone; the previous
//!   CPU if idle), else `wake_affine_weight` (the waker's CPU when its
//!   PELT load, less the waker's own on a sync wake-up, plus the wakee's
//!   is below the previous CPU's load less the wakee's, scaled by half
//!   the domain's imbalance_pct; a tie on a sync wake-up keeps prev);
//! - then `select_idle_sibling` around that target: the target if idle,
//!   the previous CPU if idle and sharing its LLC, with SMT an idle
//!   sibling of the previous CPU when no core is wholly idle
//!   (`select_idle_smt`), then a scan of the target's LLC from target + 1
//!   (`select_idle_cpu`) for a wholly idle core (`select_idle_core`) when
//!   one exists, else for any idle CPU; else the target.
//!
//! Left out: SIS_UTIL's scan limit, `recent_used_cpu`, wake_wide's flip
//! counting, asymmetric capacities, energy-aware placement.

use super::topology::SimTopology;

/// What placement asks of the engine about each CPU.
pub trait CpuState {
    /// Nothing runs or waits there (`available_idle_cpu`), or only
    /// SCHED_IDLE tasks do (`sched_idle_cpu`).
    fn idle(&self, c: usize) -> bool;
    /// The fair run queue's PELT `load_avg` (`cpu_load`): a sleeping
    /// task's load stays on the CPU it last ran on.
    fn load(&self, c: usize) -> u64;
    /// Tasks queued there, the running one included (`nr_running`).
    fn nr_running(&self, c: usize) -> usize;
}

/// The wake-up's inputs.
#[derive(Debug, Clone, Copy)]
pub struct Wakee<'a> {
    /// CPUs it may run on, ascending.
    pub allowed: &'a [usize],
    pub prev: usize,
    /// The waker's CPU (the CPU a timer fired on is its previous one).
    pub waker_cpu: usize,
    /// The waker goes to sleep right after (WF_SYNC: a pipe write).
    pub sync: bool,
    /// The wakee's `task_h_load` (its PELT load, still on prev).
    pub load: u64,
    /// The waker's `task_h_load` (a sync wake-up takes it off its CPU's).
    pub waker_load: u64,
}

/// `select_task_rq_fair` for a wake-up.
pub fn select_fair(t: &SimTopology, s: &dyn CpuState, w: &Wakee) -> usize {
    let mut target = w.prev;
    let this = w.waker_cpu;
    if this != w.prev && w.allowed.contains(&this) {
        // The lowest domain of the waker's CPU spanning prev (SD_WAKE_AFFINE
        // is set on every level but NUMA ones beyond the reclaim distance;
        // the model keeps it on all).
        let pct = t.domains[this]
            .iter()
            .find(|d| d.span.contains(&w.prev))
            .map(|d| d.imbalance_pct);
        if let Some(pct) = pct {
            target = wake_affine(t, s, w, pct);
        }
    }
    select_idle_sibling(t, s, w, target)
}

/// `wake_affine`: the waker's CPU or the previous one.
fn wake_affine(t: &SimTopology, s: &dyn CpuState, w: &Wakee, imbalance_pct: u64) -> usize {
    let (this, prev) = (w.waker_cpu, w.prev);
    // wake_affine_idle.
    if s.idle(this) && t.share_llc(this, prev) {
        return if s.idle(prev) { prev } else { this };
    }
    if w.sync && s.nr_running(this) == 1 {
        return this;
    }
    if s.idle(prev) {
        return prev;
    }
    wake_affine_weight(s, w, imbalance_pct)
}

/// `wake_affine_weight` (WA_BIAS on, equal capacities): the waker's CPU
/// or the previous one.
fn wake_affine_weight(s: &dyn CpuState, w: &Wakee, imbalance_pct: u64) -> usize {
    let (this, prev) = (w.waker_cpu, w.prev);
    let mut this_load = s.load(this);
    if w.sync {
        if w.waker_load > this_load {
            return this;
        }
        this_load -= w.waker_load;
    }
    let this_eff = (this_load + w.load) * 100;
    let prev_eff =
        s.load(prev).saturating_sub(w.load) * (100 + (imbalance_pct - 100) / 2) + u64::from(w.sync);
    if this_eff < prev_eff { this } else { prev }
}

/// `select_idle_sibling(p, prev, target)`.
pub fn select_idle_sibling(t: &SimTopology, s: &dyn CpuState, w: &Wakee, target: usize) -> usize {
    let ok = |c: usize| w.allowed.contains(&c);
    if s.idle(target) && ok(target) {
        return target;
    }
    if w.prev != target && t.share_llc(w.prev, target) && s.idle(w.prev) && ok(w.prev) {
        return w.prev;
    }
    let llc: Vec<usize> = t.llc_cpus(target).filter(|&c| ok(c)).collect();
    let core_idle = |c: usize| t.smt_siblings(c).all(|x| s.idle(x));
    let has_idle_core = t.smt_active() && llc.iter().any(|&c| core_idle(c));
    if t.smt_active() && !has_idle_core && t.share_llc(w.prev, target) {
        // select_idle_smt: a sibling of prev.
        if let Some(c) = t
            .smt_siblings(w.prev)
            .find(|&c| c != w.prev && ok(c) && s.idle(c))
        {
            return c;
        }
    }
    // select_idle_cpu: for_each_cpu_wrap(cpu, llc, target + 1).
    let start = llc.iter().position(|&c| c > target).unwrap_or(0);
    let order = llc[start..].iter().chain(llc[..start].iter()).copied();
    let mut fallback = None;
    for c in order {
        if has_idle_core {
            if core_idle(c) {
                return c;
            }
            if fallback.is_none() && s.idle(c) {
                fallback = Some(c);
            }
        } else if s.idle(c) {
            return c;
        }
    }
    match fallback {
        Some(c) => c,
        None if ok(target) => target,
        None => w.allowed.first().copied().unwrap_or(target),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct State {
        busy: Vec<usize>,
    }

    impl CpuState for State {
        fn idle(&self, c: usize) -> bool {
            !self.busy.contains(&c)
        }
        fn load(&self, c: usize) -> u64 {
            if self.idle(c) { 0 } else { 1024 }
        }
        fn nr_running(&self, c: usize) -> usize {
            usize::from(!self.idle(c))
        }
    }

    fn wakee(allowed: &[usize], prev: usize) -> Wakee<'_> {
        Wakee {
            allowed,
            prev,
            waker_cpu: prev,
            sync: false,
            load: 1024,
            waker_load: 1024,
        }
    }

    struct Loads(Vec<u64>);

    impl CpuState for Loads {
        fn idle(&self, _: usize) -> bool {
            false
        }
        fn load(&self, c: usize) -> u64 {
            self.0[c]
        }
        fn nr_running(&self, _: usize) -> usize {
            2
        }
    }

    #[test]
    fn wake_affine_weighs_pelt_loads_with_the_wakee_taken_off_prev() {
        // Waker's CPU 0 at 1500, prev 1 at 2000 with the wakee's 600 still
        // there: this 1500 + 600 = 2100 × 100 = 210,000 against
        // (2000 − 600) × 108 (MC's 117: 100 + 17 / 2) = 151,200: prev.
        let w = Wakee {
            waker_cpu: 0,
            load: 600,
            ..wakee(&[0, 1], 1)
        };
        assert_eq!(wake_affine_weight(&Loads(vec![1500, 2000]), &w, 117), 1);
        // Prev at 3000: (3000 − 600) × 108 = 259,200 > 210,000: the waker's.
        assert_eq!(wake_affine_weight(&Loads(vec![1500, 3000]), &w, 117), 0);
        // Sync: the waker's own 1024 off its CPU: (476 + 600) × 100 =
        // 107,600 < 151,201.
        let w = Wakee { sync: true, ..w };
        assert_eq!(wake_affine_weight(&Loads(vec![1500, 2000]), &w, 117), 0);
        // A waker heavier than its CPU's load: its CPU at once.
        let w = Wakee {
            waker_load: 2000,
            ..w
        };
        assert_eq!(wake_affine_weight(&Loads(vec![1500, 9000]), &w, 117), 0);
    }

    #[test]
    fn an_idle_previous_cpu_keeps_the_task() {
        let t = SimTopology::flat(4);
        let all = [0, 1, 2, 3];
        let s = State { busy: vec![0, 1] };
        assert_eq!(select_fair(&t, &s, &wakee(&all, 2)), 2);
    }

    #[test]
    fn a_busy_previous_cpu_sends_the_task_to_an_idle_one_in_its_llc() {
        let t = SimTopology::flat(4);
        let all = [0, 1, 2, 3];
        // Prev 1 busy, scan from 2: 2 busy, 3 idle.
        let s = State { busy: vec![1, 2] };
        assert_eq!(select_fair(&t, &s, &wakee(&all, 1)), 3);
        // Nothing idle: stays on prev.
        let s = State {
            busy: vec![0, 1, 2, 3],
        };
        assert_eq!(select_fair(&t, &s, &wakee(&all, 1)), 1);
        // The idle CPU it may not use is not chosen.
        let s = State { busy: vec![1, 2] };
        assert_eq!(select_fair(&t, &s, &wakee(&[1, 2], 1)), 1);
    }

    #[test]
    fn a_wholly_idle_core_wins_over_an_idle_sibling_of_a_busy_core() {
        // 1 socket × 2 cores × 2 threads: cores {0,1} and {2,3}.
        let t = SimTopology::grid(1, 2, 2);
        let all = [0, 1, 2, 3];
        // Prev 0 busy; its sibling 1 is idle, core {2,3} wholly idle.
        let s = State { busy: vec![0] };
        assert_eq!(select_fair(&t, &s, &wakee(&all, 0)), 2);
        // No idle core: the idle sibling of prev (select_idle_smt).
        let s = State { busy: vec![0, 2] };
        assert_eq!(select_fair(&t, &s, &wakee(&all, 0)), 1);
    }

    #[test]
    fn the_search_stays_in_the_target_llc() {
        // 2 sockets × 2 cores, one LLC each: prev 0 busy, its LLC {0,1}
        // busy; socket 1 idle is not searched at wake-up.
        let t = SimTopology::grid(2, 2, 1);
        let all = [0, 1, 2, 3];
        let s = State { busy: vec![0, 1] };
        assert_eq!(select_fair(&t, &s, &wakee(&all, 0)), 0);
    }

    #[test]
    fn a_sync_wake_up_from_a_lone_waker_goes_to_its_cpu_if_prev_is_busy() {
        let t = SimTopology::flat(4);
        let all = [0, 1, 2, 3];
        let s = State {
            busy: vec![0, 1, 2, 3],
        };
        let w = Wakee {
            waker_cpu: 3,
            sync: true,
            ..wakee(&all, 1)
        };
        assert_eq!(select_fair(&t, &s, &w), 3);
        // The waker's CPU idle and sharing the LLC, prev busy: the waker's.
        let s = State { busy: vec![1] };
        let w = Wakee {
            waker_cpu: 2,
            ..wakee(&all, 1)
        };
        assert_eq!(select_fair(&t, &s, &w), 2);
    }
}
