//! The fair class as EEVDF, one run queue per CPU
//! (Documentation/scheduler/sched-eevdf.rst; kernel/sched/fair.c).
//!
//! Every queued entity (the running one included, as `avg_vruntime`
//! counts `cfs_rq->curr`) has a virtual runtime `v` that advances by
//! `delta × 1024 / weight` (`calc_delta_fair`), a virtual deadline
//! `v + slice × 1024 / weight` (`update_deadline`), and is eligible when
//! its lag `V − v` is not negative, V being the weighted average of the
//! queue's virtual runtimes (`avg_vruntime`, `vruntime_eligible`). The
//! next entity is the eligible one with the earliest deadline
//! (`pick_eevdf`). Slices end at the tick (`update_deadline` from
//! `update_curr` in `task_tick_fair`; HRTICK is off by default).
//! Weights come from `sched_prio_to_weight` (`stats::fairness`);
//! SCHED_IDLE tasks weigh `WEIGHT_IDLEPRIO` = 3 (kernel/sched/sched.h).

use crate::stats::fairness::{NICE_0_WEIGHT, SCHED_PRIO_TO_WEIGHT};

/// `WEIGHT_IDLEPRIO` (kernel/sched/sched.h).
pub const WEIGHT_IDLEPRIO: u64 = 3;

/// The fair policies: they differ in wake-up preemption and weight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FairKind {
    Normal,
    /// SCHED_BATCH: never preempts on wake-up (`check_preempt_wakeup_fair`
    /// returns early for `p->policy != SCHED_NORMAL`).
    Batch,
    /// SCHED_IDLE: weight 3; any non-idle task that wakes makes the CPU
    /// reschedule (`check_preempt_wakeup_fair`: `cse_is_idle &&
    /// !pse_is_idle`), and `pick_eevdf` then runs it if it is eligible.
    Idle,
}

/// The weight of a nice value (`sched_prio_to_weight`), nice clamped to
/// -20..19 as `setpriority(2)` does.
pub fn nice_weight(nice: i32) -> u64 {
    u64::from(SCHED_PRIO_TO_WEIGHT[(nice.clamp(-20, 19) + 20) as usize])
}

/// A task's scheduling entity in the fair class.
#[derive(Debug, Clone)]
pub struct FairEntity {
    pub weight: u64,
    pub slice_ns: u64,
    pub kind: FairKind,
    pub vruntime: i64,
    /// What `calc_delta_fair` dropped, so that virtual time stays exact.
    vrem: u64,
    pub deadline: i64,
    /// Lag kept over a sleep or a migration (`se->vlag`), virtual ns.
    pub vlag: i64,
    /// RUN_TO_PARITY: picked and still within the slice it was picked
    /// with (the kernel marks it with `se->vlag = se->deadline` in
    /// `set_next_entity`).
    pub protected: bool,
    /// DELAY_DEQUEUE: it went to sleep ineligible on this CPU at this
    /// virtual runtime (and deadline), and stays queued in the kernel
    /// until it would be picked.
    delayed: Option<(usize, i64, i64)>,
}

impl FairEntity {
    pub fn new(kind: FairKind, nice: i32, slice_ns: u64) -> FairEntity {
        FairEntity {
            weight: match kind {
                FairKind::Idle => WEIGHT_IDLEPRIO,
                _ => nice_weight(nice),
            },
            slice_ns,
            kind,
            vruntime: 0,
            vrem: 0,
            deadline: 0,
            vlag: 0,
            protected: false,
            delayed: None,
        }
    }

    /// `calc_delta_fair(delta, se)`: real ns to this entity's virtual ns.
    pub fn vdelta(&self, ns: u64) -> i64 {
        (u128::from(ns) * u128::from(NICE_0_WEIGHT) / u128::from(self.weight.max(1))) as i64
    }
}

/// One CPU's fair run queue: the queued tasks, the running one included.
#[derive(Debug, Clone, Default)]
pub struct FairRq {
    pub queued: Vec<usize>,
    /// V when the queue last emptied (`min_vruntime`).
    last_v: i64,
}

impl FairRq {
    pub fn len(&self) -> usize {
        self.queued.len()
    }

    pub fn is_empty(&self) -> bool {
        self.queued.is_empty()
    }

    /// Σ w·v and Σ w of the queue.
    fn sums(&self, e: &[FairEntity]) -> (i128, i128) {
        self.queued.iter().fold((0, 0), |(wv, w), &i| {
            (
                wv + i128::from(e[i].weight) * i128::from(e[i].vruntime),
                w + i128::from(e[i].weight),
            )
        })
    }

    /// `avg_vruntime`: the weighted mean virtual runtime V, rounded down.
    pub fn avg_vruntime(&self, e: &[FairEntity]) -> i64 {
        let (wv, w) = self.sums(e);
        if w == 0 {
            return self.last_v;
        }
        wv.div_euclid(w) as i64
    }

    /// `entity_eligible`: lag ≥ 0, i.e. Σ w·v ≥ v_i · Σ w (exact).
    pub fn eligible(&self, e: &[FairEntity], i: usize) -> bool {
        eligible_in(self.sums(e), &e[i])
    }

    /// `update_curr` for the running entity: virtual time advances by
    /// `calc_delta_fair` (kept exact across calls).
    pub fn charge(e: &mut FairEntity, ns: u64) {
        let num = u128::from(ns) * u128::from(NICE_0_WEIGHT) + u128::from(e.vrem);
        let w = u128::from(e.weight.max(1));
        e.vruntime += (num / w) as i64;
        e.vrem = (num % w) as u64;
    }

    /// `update_deadline` at the tick: once the entity's virtual runtime
    /// reaches its deadline it gets a new slice, and the CPU reschedules
    /// when another entity is queued. True: reschedule.
    pub fn tick(&self, e: &mut [FairEntity], curr: usize) -> bool {
        let se = &mut e[curr];
        if se.vruntime < se.deadline {
            return false;
        }
        se.deadline = se.vruntime + se.vdelta(se.slice_ns);
        se.protected = false;
        self.queued.len() > 1
    }

    /// `place_entity` + enqueue: a waking or migrating entity keeps its
    /// lag, scaled by `(W + w) / W` so that adding it does not move V
    /// (PLACE_LAG); its deadline is one slice after. `initial` (a new
    /// task, ENQUEUE_INITIAL) gets half a slice (PLACE_DEADLINE_INITIAL).
    pub fn enqueue(&mut self, e: &mut [FairEntity], i: usize, cpu: usize, initial: bool) {
        // DELAY_DEQUEUE: still queued in the kernel if V has not passed it
        // since it slept (it would not have been picked); requeued as it was.
        if let Some((on, v, d)) = e[i].delayed.take()
            && on == cpu
            && v > self.avg_vruntime(e)
        {
            e[i].vruntime = v;
            e[i].deadline = d;
            self.queued.push(i);
            return;
        }
        let v_avg = self.avg_vruntime(e);
        let (_, load) = self.sums(e);
        let mut lag = i128::from(e[i].vlag);
        if load > 0 && lag != 0 {
            lag = lag * (load + i128::from(e[i].weight)) / load;
        }
        let se = &mut e[i];
        se.vruntime = v_avg - lag as i64;
        se.vrem = 0;
        let mut vslice = se.vdelta(se.slice_ns);
        if initial {
            vslice /= 2;
        }
        se.deadline = se.vruntime + vslice;
        se.protected = false;
        self.queued.push(i);
    }

    /// Dequeue; the entity keeps its lag `V − v`, clamped to the virtual
    /// time of max(2 slices, a tick) (`update_entity_lag`). A sleeper with
    /// negative lag under DELAY_DEQUEUE keeps its place until V passes it
    /// (then DELAY_ZERO leaves it lag 0).
    pub fn dequeue(
        &mut self,
        e: &mut [FairEntity],
        i: usize,
        cpu: usize,
        tick_ns: u64,
        delay: bool,
    ) {
        let v_avg = self.avg_vruntime(e);
        let se = &mut e[i];
        let limit = se.vdelta((2 * se.slice_ns).max(tick_ns));
        se.vlag = (v_avg - se.vruntime).clamp(-limit, limit);
        se.protected = false;
        se.delayed = None;
        if delay && se.vlag < 0 {
            se.delayed = Some((cpu, se.vruntime, se.deadline));
            se.vlag = 0;
        }
        self.queued.retain(|&j| j != i);
        if self.queued.is_empty() {
            self.last_v = v_avg;
        }
    }

    /// `pick_eevdf`: the running entity while RUN_TO_PARITY protects it
    /// and it is eligible; else the eligible entity with the earliest
    /// deadline (ties: the queued one before the running one, then the
    /// lower task index, as the rb-tree keeps insertion order).
    pub fn pick(&self, e: &[FairEntity], curr: Option<usize>) -> Option<usize> {
        let sums = self.sums(e);
        let curr = curr.filter(|c| self.queued.contains(c) && eligible_in(sums, &e[*c]));
        if let Some(c) = curr
            && e[c].protected
        {
            return Some(c);
        }
        let best = self
            .queued
            .iter()
            .copied()
            .filter(|&i| eligible_in(sums, &e[i]))
            .min_by_key(|&i| (e[i].deadline, Some(i) == curr, i));
        // Some entity is always eligible; fall back to the least virtual
        // runtime should rounding ever say otherwise.
        best.or_else(|| {
            self.queued
                .iter()
                .copied()
                .min_by_key(|&i| (e[i].vruntime, i))
        })
    }

    /// `check_preempt_wakeup_fair`: whether the woken entity preempts the
    /// running one. BATCH and IDLE wakers never do; an IDLE runner always
    /// yields to a non-IDLE waker; a waker with a shorter slice cancels
    /// the runner's protection (PREEMPT_SHORT, 6.12+); then it preempts
    /// when `pick_eevdf` would choose it.
    pub fn wakeup_preempt(&self, e: &mut [FairEntity], curr: usize, woken: usize) -> bool {
        if e[curr].kind == FairKind::Idle && e[woken].kind != FairKind::Idle {
            return true;
        }
        if e[woken].kind != FairKind::Normal {
            return false;
        }
        if e[woken].slice_ns < e[curr].slice_ns {
            e[curr].protected = false;
        }
        self.pick(e, Some(curr)) == Some(woken)
    }
}

/// Eligibility against the queue's (Σ w·v, Σ w).
fn eligible_in((wv, w): (i128, i128), se: &FairEntity) -> bool {
    wv >= i128::from(se.vruntime) * w
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two(nice_b: i32) -> (FairRq, Vec<FairEntity>) {
        let mut e = vec![
            FairEntity::new(FairKind::Normal, 0, 3_000_000),
            FairEntity::new(FairKind::Normal, nice_b, 3_000_000),
        ];
        let mut rq = FairRq::default();
        rq.enqueue(&mut e, 0, 0, false);
        rq.enqueue(&mut e, 1, 0, false);
        (rq, e)
    }

    #[test]
    fn weights_follow_the_kernel_table() {
        assert_eq!(nice_weight(0), 1024);
        assert_eq!(nice_weight(5), 335);
        assert_eq!(nice_weight(-20), 88761);
        assert_eq!(nice_weight(40), 15);
        assert_eq!(FairEntity::new(FairKind::Idle, 0, 1).weight, 3);
    }

    /// Both placed at V = 0 with deadline 3 ms; A (lower index) first.
    /// After A ran 3 ms: V = 1.5 ms, A (v 3 ms) is not eligible: B runs.
    #[test]
    fn eligibility_and_earliest_deadline() {
        let (rq, mut e) = two(0);
        assert_eq!(rq.pick(&e, None), Some(0));
        FairRq::charge(&mut e[0], 3_000_000);
        assert!(rq.tick(&mut e, 0));
        assert_eq!(e[0].deadline, 6_000_000);
        assert_eq!(rq.avg_vruntime(&e), 1_500_000);
        assert!(!rq.eligible(&e, 0));
        assert_eq!(rq.pick(&e, Some(0)), Some(1));
    }

    /// Nice 5 (weight 335): 1 ms of CPU is 1024/335 ms of virtual time.
    #[test]
    fn virtual_time_scales_by_weight_exactly() {
        let (_, mut e) = two(5);
        for _ in 0..335 {
            FairRq::charge(&mut e[1], 1_000_000);
        }
        assert_eq!(e[1].vruntime, 1_024_000_000);
    }

    /// A task that sleeps 2 ms ahead (positive lag) comes back placed 2 ms
    /// × (W + w)/W behind V, and preempts the runner once its
    /// protection is gone.
    #[test]
    fn lag_is_kept_over_a_sleep() {
        let (mut rq, mut e) = two(0);
        rq.dequeue(&mut e, 1, 0, 1_000_000, false);
        // A alone: runs 4 ms; V = 4 ms.
        FairRq::charge(&mut e[0], 4_000_000);
        e[1].vlag = 2_000_000;
        rq.enqueue(&mut e, 1, 0, false);
        // lag 2 ms × (1024 + 1024) / 1024 = 4 ms behind V = 4 ms.
        assert_eq!(e[1].vruntime, 0);
        // V = 2 ms: A (v 4 ms) is no longer eligible, so its protection
        // does not hold and B preempts.
        e[0].protected = true;
        assert!(!rq.eligible(&e, 0));
        assert!(rq.wakeup_preempt(&mut e, 0, 1));
    }
}
