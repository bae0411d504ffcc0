//! SCHED_DEADLINE: EDF with the constant bandwidth server, admission
//! control, and the fair class's deadline server of Linux 6.12+
//! (Documentation/scheduler/sched-deadline.rst; kernel/sched/deadline.c).
//!
//! - EDF: the runnable, unthrottled task with the earliest absolute
//!   deadline runs (`pick_next_dl_entity`); a woken task with an earlier
//!   deadline preempts (`check_preempt_curr_dl`).
//! - CBS: running uses up the runtime; at zero the task is throttled until
//!   its next period (`update_curr_dl`, `start_dl_timer` at
//!   `dl_next_period`), then gets runtime and deadline one period on
//!   (`replenish_dl_entity`). Enforcement is exact (HRTICK_DL is on by
//!   default). A wake-up keeps the current runtime and deadline unless the
//!   deadline passed or the rest would overrun the reserved bandwidth
//!   (`update_dl_entity`, `dl_entity_overflow`); a task with a deadline
//!   shorter than its period then keeps its deadline with the runtime its
//!   density allows in the time left (the revised wake-up rule,
//!   `update_dl_revised_wakeup`).
//! - Admission: Σ runtime/period of the root domain's tasks, and of its
//!   fair servers on 6.12+, at most CPUs × `sched_rt_runtime_us` /
//!   `sched_rt_period_us`, in the kernel's 20-bit fixed point (`to_ratio`,
//!   `__dl_overflow`); each task needs 1024 ns ≤ runtime ≤ deadline ≤
//!   period (`__checkparam_dl`).

/// A task's deadline entity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DlEntity {
    pub runtime_ns: u64,
    pub deadline_ns: u64,
    pub period_ns: u64,
    /// Absolute deadline (0: never activated).
    pub abs_deadline: u64,
    pub remaining_ns: i64,
    pub throttled: bool,
}

impl DlEntity {
    pub fn new(runtime_ns: u64, deadline_ns: u64, period_ns: u64) -> DlEntity {
        DlEntity {
            runtime_ns,
            deadline_ns,
            period_ns: if period_ns == 0 {
                deadline_ns
            } else {
                period_ns
            },
            abs_deadline: 0,
            remaining_ns: 0,
            throttled: false,
        }
    }

    /// `update_dl_entity` at wake-up: when the deadline passed or the
    /// remaining runtime over the time left to it exceeds runtime /
    /// deadline (`dl_entity_overflow`), a new runtime and deadline; but a
    /// constrained task (deadline < period) whose deadline has not passed
    /// keeps it, with its density (runtime / deadline, `dl_density` in
    /// 20-bit fixed point) times the laxity left as runtime
    /// (`update_dl_revised_wakeup`): a fresh deadline would let it run
    /// more than its runtime in one period.
    pub fn wake(&mut self, now: u64) {
        if self.throttled {
            return;
        }
        let overflow = || {
            let left = u128::from(self.deadline_ns) * self.remaining_ns.max(0) as u128;
            let right = u128::from(self.abs_deadline - now) * u128::from(self.runtime_ns);
            right < left
        };
        // 0: never activated, a deadline that has passed.
        let passed = self.abs_deadline <= now;
        if !passed && !overflow() {
            return;
        }
        if !passed && self.deadline_ns != self.period_ns {
            let laxity_ns = self.abs_deadline - now;
            let density = to_ratio(self.deadline_ns, self.runtime_ns);
            self.remaining_ns = ((u128::from(density) * u128::from(laxity_ns)) >> 20) as i64;
            return;
        }
        self.abs_deadline = now + self.deadline_ns;
        self.remaining_ns = self.runtime_ns as i64;
    }

    /// Run for `ns`. True: the runtime is used up and the task throttled.
    pub fn charge(&mut self, ns: u64) -> bool {
        self.remaining_ns -= ns as i64;
        if self.remaining_ns <= 0 && !self.throttled {
            self.throttled = true;
            return true;
        }
        false
    }

    /// When a throttled task gets its runtime back (`dl_next_period`).
    pub fn next_period(&self) -> u64 {
        self.abs_deadline - self.deadline_ns + self.period_ns
    }

    /// `replenish_dl_entity`: whole periods on until the runtime is
    /// positive; a deadline already past restarts from `now`.
    pub fn replenish(&mut self, now: u64) {
        while self.remaining_ns <= 0 {
            self.abs_deadline += self.period_ns;
            self.remaining_ns += self.runtime_ns as i64;
        }
        if self.abs_deadline <= now {
            self.abs_deadline = now + self.deadline_ns;
            self.remaining_ns = self.runtime_ns as i64;
        }
        self.throttled = false;
    }
}

/// One CPU's deadline run queue (runnable tasks, throttled ones included).
#[derive(Debug, Clone, Default)]
pub struct DlRq {
    pub queued: Vec<usize>,
}

impl DlRq {
    /// EDF among the unthrottled (ties: lower task index).
    pub fn pick(&self, e: &[Option<DlEntity>]) -> Option<usize> {
        self.queued
            .iter()
            .copied()
            .filter_map(|i| e[i].filter(|d| !d.throttled).map(|d| (d.abs_deadline, i)))
            .min()
            .map(|(_, i)| i)
    }
}

/// `to_ratio(period, runtime)`: bandwidth in 20-bit fixed point.
pub fn to_ratio(period_ns: u64, runtime_ns: u64) -> u64 {
    if period_ns == 0 {
        return 0;
    }
    ((u128::from(runtime_ns) << 20) / u128::from(period_ns)) as u64
}

/// Admission of a set of reservations (runtime, deadline, period) on
/// `cpus` CPUs; Err says which rule refuses them, as sched_setattr's
/// EINVAL or EBUSY would.
pub fn admit(
    tasks: &[(u64, u64, u64)],
    cpus: usize,
    rt_runtime_us: i64,
    rt_period_us: u64,
    fair_server: Option<(u64, u64)>,
) -> Result<(), String> {
    for (i, &(r, d, p)) in tasks.iter().enumerate() {
        let p = if p == 0 { d } else { p };
        if r < 1024 || r > d || d > p {
            return Err(format!(
                "worker {i}: runtime {r} ns, deadline {d} ns, period {p} ns: the kernel needs \
                 1024 ns ≤ runtime ≤ deadline ≤ period (EINVAL)"
            ));
        }
    }
    if rt_runtime_us < 0 {
        return Ok(());
    }
    let cap = to_ratio(rt_period_us * 1000, rt_runtime_us as u64 * 1000) * cpus as u64;
    let servers = fair_server.map_or(0, |(r, p)| to_ratio(p, r) * cpus as u64);
    let total: u64 = tasks
        .iter()
        .map(|&(r, d, p)| to_ratio(if p == 0 { d } else { p }, r))
        .sum::<u64>()
        + servers;
    if total > cap {
        return Err(format!(
            "admission control: the reservations ask {:.4} CPUs{} but {cpus} CPU(s) × \
             {rt_runtime_us}/{rt_period_us} allow {:.4} (EBUSY)",
            total as f64 / f64::from(1u32 << 20),
            if servers > 0 {
                " (with the fair servers' 5% per CPU)"
            } else {
                ""
            },
            cap as f64 / f64::from(1u32 << 20)
        ));
    }
    Ok(())
}

/// The fair class's deadline server on one CPU (Linux 6.12+,
/// kernel/sched/deadline.c `dl_server_*`, deferred mode: commit
/// "sched/deadline: Deferrable dl server"). Fair tasks that run use up
/// its runtime wherever they run from; when they have been starved by RT
/// tasks until the zero-laxity time (period end − runtime left), the
/// server runs them above RT for what is left, and is replenished every
/// period.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FairServer {
    pub runtime_ns: u64,
    pub period_ns: u64,
    pub remaining_ns: u64,
    pub period_end: u64,
    pub boosted: bool,
}

impl FairServer {
    pub fn new(runtime_ns: u64, period_ns: u64, start: u64) -> FairServer {
        FairServer {
            runtime_ns,
            period_ns: period_ns.max(1),
            remaining_ns: runtime_ns,
            period_end: start + period_ns.max(1),
            boosted: false,
        }
    }

    /// Fair tasks ran `ns`. True: a boost just ended.
    pub fn charge(&mut self, ns: u64) -> bool {
        self.remaining_ns = self.remaining_ns.saturating_sub(ns);
        if self.boosted && self.remaining_ns == 0 {
            self.boosted = false;
            return true;
        }
        false
    }

    /// The zero-laxity time: boosting later would miss the reservation.
    pub fn zero_laxity(&self) -> u64 {
        self.period_end.saturating_sub(self.remaining_ns)
    }

    /// At `now`: replenish at the period's end; boost when fair tasks are
    /// starved at the zero-laxity time. True: the CPU must reschedule.
    pub fn update(&mut self, now: u64, fair_starved: bool) -> bool {
        let mut changed = false;
        while now >= self.period_end {
            self.period_end += self.period_ns;
            self.remaining_ns = self.runtime_ns;
            changed |= std::mem::take(&mut self.boosted);
        }
        if !self.boosted && fair_starved && self.remaining_ns > 0 && now >= self.zero_laxity() {
            self.boosted = true;
            changed = true;
        }
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// 30 ms every 100 ms: runs 30, throttled until 100, then deadline 200.
    #[test]
    fn cbs_throttles_and_replenishes() {
        let mut d = DlEntity::new(30 * MS, 100 * MS, 100 * MS);
        d.wake(0);
        assert_eq!((d.abs_deadline, d.remaining_ns), (100 * MS, 30 * MS as i64));
        assert!(!d.charge(29 * MS));
        assert!(d.charge(MS));
        assert_eq!(d.next_period(), 100 * MS);
        d.replenish(100 * MS);
        assert_eq!((d.abs_deadline, d.remaining_ns), (200 * MS, 30 * MS as i64));
        assert!(!d.throttled);
    }

    /// Waking with 20 ms left and 10 ms to the deadline would overrun
    /// 30/100: new deadline. With 90 ms to go it keeps both.
    #[test]
    fn cbs_wakeup_rule() {
        let mut d = DlEntity::new(30 * MS, 100 * MS, 100 * MS);
        d.wake(0);
        d.charge(10 * MS);
        let mut late = d;
        late.wake(90 * MS);
        assert_eq!(late.abs_deadline, 190 * MS);
        let mut early = d;
        early.wake(10 * MS);
        assert_eq!(early.abs_deadline, 100 * MS);
        assert_eq!(early.remaining_ns, 20 * MS as i64);
    }

    /// Constrained, 2 ms every 10 ms within 5 ms: ran 1 ms from 0, wakes
    /// at 4 ms with 1 ms left and 1 ms to its deadline: (5 − 4) × 2 <
    /// 5 × 1 overflows. An implicit task would get deadline 9 ms and 2 ms;
    /// this one keeps deadline 5 ms with density × laxity: to_ratio(5 ms,
    /// 2 ms) = ⌊2 × 2²⁰ / 5⌋ = 419430, × 1 ms >> 20 = 399999 ns. Woken
    /// after its deadline it gets a new period as any task.
    #[test]
    fn a_constrained_task_waking_before_its_deadline_keeps_it() {
        let mut d = DlEntity::new(2 * MS, 5 * MS, 10 * MS);
        d.wake(0);
        assert!(!d.charge(MS));
        let mut early = d;
        early.wake(4 * MS);
        assert_eq!((early.abs_deadline, early.remaining_ns), (5 * MS, 399_999));
        // No overflow (left 5 × 1, right (5 − 2) × 2): kept as it was.
        let mut kept = d;
        kept.wake(2 * MS);
        assert_eq!((kept.abs_deadline, kept.remaining_ns), (5 * MS, MS as i64));
        let mut late = d;
        late.wake(6 * MS);
        assert_eq!(
            (late.abs_deadline, late.remaining_ns),
            (11 * MS, 2 * MS as i64)
        );
        // Implicit (deadline = period): the rule is not applied.
        let mut implicit = DlEntity::new(2 * MS, 5 * MS, 5 * MS);
        implicit.wake(0);
        implicit.charge(MS);
        implicit.wake(4 * MS);
        assert_eq!(
            (implicit.abs_deadline, implicit.remaining_ns),
            (9 * MS, 2 * MS as i64)
        );
    }

    /// Two CPUs at 95%: 1.9 CPUs. Three tasks of 60% fit (1.8), four do
    /// not (2.4); with the fair servers (0.1) 1.8 + 0.1 = 1.9 still fits,
    /// 1.85 + 0.1 does not. Parameters out of order are refused.
    #[test]
    fn admission_control() {
        let t = |r| (r, 10 * MS, 10 * MS);
        assert!(admit(&[t(6 * MS); 3], 2, 950_000, 1_000_000, None).is_ok());
        let e = admit(&[t(6 * MS); 4], 2, 950_000, 1_000_000, None).unwrap_err();
        assert!(e.contains("EBUSY") && e.contains("2.4"), "{e}");
        let fs = Some((50 * MS, 1000 * MS));
        assert!(admit(&[t(6 * MS); 3], 2, 950_000, 1_000_000, fs).is_ok());
        let tight = [t(6 * MS), t(6 * MS), t(6_500_000)];
        assert!(admit(&tight, 2, 950_000, 1_000_000, fs).is_err());
        assert!(admit(&[(20 * MS, 10 * MS, 10 * MS)], 2, 950_000, 1_000_000, None).is_err());
        assert!(admit(&[(1000, 10 * MS, 10 * MS)], 2, 950_000, 1_000_000, None).is_err());
    }

    #[test]
    fn edf_picks_the_earliest_unthrottled() {
        let mut a = DlEntity::new(MS, 10 * MS, 10 * MS);
        let mut b = DlEntity::new(MS, 5 * MS, 5 * MS);
        a.wake(0);
        b.wake(0);
        let rq = DlRq { queued: vec![0, 1] };
        assert_eq!(rq.pick(&[Some(a), Some(b)]), Some(1));
        b.throttled = true;
        assert_eq!(rq.pick(&[Some(a), Some(b)]), Some(0));
    }

    /// Starved from 0: boosts at 950 ms for 50 ms, replenished at 1 s.
    #[test]
    fn fair_server_boosts_at_zero_laxity() {
        let mut s = FairServer::new(50 * MS, 1000 * MS, 0);
        assert!(!s.update(949 * MS, true));
        assert!(s.update(950 * MS, true));
        assert!(!s.charge(49 * MS));
        assert!(s.charge(MS));
        assert!(!s.update(999 * MS, true));
        s.update(1000 * MS, true);
        assert_eq!((s.remaining_ns, s.period_end), (50 * MS, 2000 * MS));
    }
}
