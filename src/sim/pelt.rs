//! Per-entity load tracking (PELT) as pure arithmetic: the geometric
//! series the kernel keeps for each fair task and each CPU's fair run
//! queue (Documentation/scheduler/sched-pelt.rst, kernel/sched/pelt.c).
//!
//! Time is cut into periods of 1024 µs (1024 × 1024 ns); a period `n`
//! periods ago counts `y^n`, with `y^32 = 1/2`. A signal's sum gains
//! 1024 per full period (less for a partial one) while its condition
//! holds, and its average is the sum over the sum's maximum
//! (`LOAD_AVG_MAX` − 1024 + the current period's part, `get_pelt_divider`):
//!
//! - `load_avg`: while on the run queue (runnable, running, or for a run
//!   queue its queued weight), times the weight;
//! - `runnable_avg`: while runnable, × 1024 (a run queue counts its
//!   runnable tasks, `h_nr_running`);
//! - `util_avg`: while running, × 1024.
//!
//! The decay uses `y^n` in 32-bit fixed point (the table
//! `runnable_avg_yN_inv`, computed here by its documented formula
//! `(2^32 − 1) · y^n`) and halves per 32 periods; sums are updated only
//! in whole 1024 ns steps and averages only when a period boundary
//! passes, as `___update_load_sum` / `___update_load_avg` do. A task's
//! averages join and leave a run queue's on migration
//! ([`SchedAvg::attach`], [`SchedAvg::detach`]); a new task starts at its
//! full weight and half the CPU's spare utilisation
//! ([`SchedAvg::new_task`]). The model has no frequency or capacity
//! scaling (all CPUs at 1024).

use std::sync::OnceLock;

/// The converged maximum of a sum (`LOAD_AVG_MAX`).
pub const LOAD_AVG_MAX: u64 = 47742;
/// Periods for a contribution to halve (`LOAD_AVG_PERIOD`).
pub const LOAD_AVG_PERIOD: u64 = 32;
/// `PELT_MIN_DIVIDER`.
pub const PELT_MIN_DIVIDER: u64 = LOAD_AVG_MAX - 1024;
/// `SCHED_CAPACITY_SHIFT`: runnable and util sums are × 1024.
const CAPACITY_SHIFT: u32 = 10;

/// `runnable_avg_yN_inv`: y^n × (2^32 − 1) for n < 32, by the generator
/// Documentation/scheduler/sched-pelt.c describes.
fn y_inv() -> &'static [u64; 32] {
    static T: OnceLock<[u64; 32]> = OnceLock::new();
    T.get_or_init(|| {
        let y = 0.5f64.powf(1.0 / LOAD_AVG_PERIOD as f64);
        let mut t = [0u64; 32];
        for (n, v) in t.iter_mut().enumerate() {
            *v = (((1u64 << 32) - 1) as f64 * y.powi(n as i32)) as u64;
        }
        t
    })
}

/// `decay_load`: `val` × y^n.
pub fn decay_load(val: u64, n: u64) -> u64 {
    if n > LOAD_AVG_PERIOD * 63 {
        return 0;
    }
    let (mut val, n) = (val >> (n / LOAD_AVG_PERIOD), n % LOAD_AVG_PERIOD);
    val = ((u128::from(val) * u128::from(y_inv()[n as usize])) >> 32) as u64;
    val
}

/// `__accumulate_pelt_segments`: the rest `d1` of the last period
/// decayed over `periods`, the full periods between, and `d3` of the
/// current one.
fn accumulate_segments(periods: u64, d1: u64, d3: u64) -> u64 {
    let c1 = decay_load(d1, periods);
    let c2 = LOAD_AVG_MAX - decay_load(LOAD_AVG_MAX, periods) - 1024;
    c1 + c2 + d3
}

/// `struct sched_avg`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SchedAvg {
    /// ns, a multiple of 1024 past the first update.
    pub last_update_ns: u64,
    pub load_sum: u64,
    pub runnable_sum: u64,
    pub util_sum: u64,
    /// The current period's part, 0..1024.
    pub period_contrib: u64,
    pub load_avg: u64,
    pub runnable_avg: u64,
    pub util_avg: u64,
}

impl SchedAvg {
    /// A signal that starts at `now_ns` at zero.
    pub fn at(now_ns: u64) -> SchedAvg {
        SchedAvg {
            last_update_ns: now_ns,
            ..Default::default()
        }
    }

    /// `get_pelt_divider`.
    pub fn divider(&self) -> u64 {
        PELT_MIN_DIVIDER + self.period_contrib
    }

    /// `accumulate_sum`: true when a period boundary passed.
    fn accumulate(&mut self, delta_us: u64, load: u64, runnable: u64, running: bool) -> bool {
        let mut contrib = delta_us;
        let delta = delta_us + self.period_contrib;
        let periods = delta / 1024;
        if periods > 0 {
            self.load_sum = decay_load(self.load_sum, periods);
            self.runnable_sum = decay_load(self.runnable_sum, periods);
            self.util_sum = decay_load(self.util_sum, periods);
            if load > 0 {
                contrib = accumulate_segments(periods, 1024 - self.period_contrib, delta % 1024);
            }
        }
        self.period_contrib = delta % 1024;
        if load > 0 {
            self.load_sum += load * contrib;
        }
        if runnable > 0 {
            self.runnable_sum += (runnable * contrib) << CAPACITY_SHIFT;
        }
        if running {
            self.util_sum += contrib << CAPACITY_SHIFT;
        }
        periods > 0
    }

    /// `___update_load_sum` then, when a period passed,
    /// `___update_load_avg`: bring the signal to `now_ns` with, since its
    /// last update, `load` (an entity: 1 while on the run queue; a run
    /// queue: its queued weight), `runnable` (an entity: 0 or 1; a run
    /// queue: its runnable tasks) and `running`. `weight` scales
    /// `load_avg` (an entity's weight; 1 for a run queue, whose `load`
    /// is already weighted).
    pub fn update(&mut self, now_ns: u64, load: u64, runnable: u64, running: bool, weight: u64) {
        let Some(delta) = now_ns.checked_sub(self.last_update_ns) else {
            self.last_update_ns = now_ns;
            return;
        };
        let delta_us = delta >> 10;
        if delta_us == 0 {
            return;
        }
        self.last_update_ns += delta_us << 10;
        let (runnable, running) = if load == 0 {
            (0, false)
        } else {
            (runnable, running)
        };
        if self.accumulate(delta_us, load, runnable, running) {
            let div = self.divider();
            self.load_avg = weight * self.load_sum / div;
            self.runnable_avg = self.runnable_sum / div;
            self.util_avg = self.util_sum / div;
        }
    }

    /// `init_entity_runnable_average` + `post_init_entity_util_avg` for a
    /// new fair task of `weight` joining run queue `rq`: load at its full
    /// weight, util (and runnable) the run queue's util shared by weight,
    /// at most half the CPU's spare capacity.
    pub fn new_task(weight: u64, rq: &SchedAvg) -> SchedAvg {
        let cap = 1024u64.saturating_sub(rq.util_avg) / 2;
        let util = if rq.util_avg > 0 {
            (rq.util_avg * weight / (rq.load_avg + 1)).min(cap)
        } else {
            cap
        };
        SchedAvg {
            last_update_ns: rq.last_update_ns,
            load_avg: weight,
            runnable_avg: util,
            util_avg: util,
            ..Default::default()
        }
    }

    /// `attach_entity_load_avg`: entity `se` (of `weight`) joins run
    /// queue `self`, aligned to its clock, its sums rebuilt from its
    /// averages.
    pub fn attach(&mut self, se: &mut SchedAvg, weight: u64) {
        se.last_update_ns = self.last_update_ns;
        se.period_contrib = self.period_contrib;
        let div = self.divider();
        se.util_sum = se.util_avg * div;
        se.runnable_sum = se.runnable_avg * div;
        se.load_sum = se.load_avg * div;
        let w = weight.max(1);
        se.load_sum = if w < se.load_sum { se.load_sum / w } else { 1 };
        self.util_avg += se.util_avg;
        self.util_sum += se.util_sum;
        self.runnable_avg += se.runnable_avg;
        self.runnable_sum += se.runnable_sum;
        self.load_avg += se.load_avg;
        self.load_sum += w * se.load_sum;
    }

    /// `detach_entity_load_avg`: entity `se` (of `weight`) leaves run
    /// queue `self`; sums kept at least their average × the minimum
    /// divider, as the kernel keeps them against rounding.
    pub fn detach(&mut self, se: &SchedAvg, weight: u64) {
        self.load_avg = self.load_avg.saturating_sub(se.load_avg);
        self.load_sum = self
            .load_sum
            .saturating_sub(weight.max(1) * se.load_sum)
            .max(self.load_avg * PELT_MIN_DIVIDER);
        self.runnable_avg = self.runnable_avg.saturating_sub(se.runnable_avg);
        self.runnable_sum = self
            .runnable_sum
            .saturating_sub(se.runnable_sum)
            .max(self.runnable_avg * PELT_MIN_DIVIDER);
        self.util_avg = self.util_avg.saturating_sub(se.util_avg);
        self.util_sum = self
            .util_sum
            .saturating_sub(se.util_sum)
            .max(self.util_avg * PELT_MIN_DIVIDER);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One PELT period in ns.
    const P: u64 = 1024 * 1024;

    #[test]
    fn the_decay_halves_every_32_periods() {
        // y^0 in the table is (2^32 − 1) / 2^32: a whole halving loses 1.
        assert_eq!(decay_load(1 << 20, 32), (1 << 19) - 1);
        assert_eq!(decay_load(1 << 20, 64), (1 << 18) - 1);
        // y^16 = 1/√2: 2^20 / √2 = 741455.2, less the table's rounding.
        let half = decay_load(1 << 20, 16);
        assert!((741_450..=741_455).contains(&half), "{half}");
        assert_eq!(decay_load(LOAD_AVG_MAX, 0), LOAD_AVG_MAX - 1);
        assert_eq!(decay_load(u64::MAX, 32 * 64), 0);
    }

    #[test]
    fn the_sum_of_full_periods_converges_to_load_avg_max() {
        // 1024 Σ y^n over the past periods: LOAD_AVG_MAX once the current
        // period is whole. On a period boundary the current period has
        // not begun, so the sum is LOAD_AVG_MAX − 1024 (the divider then:
        // the average of a signal always on is exactly 1).
        let mut s = SchedAvg::at(0);
        s.update(2000 * P, 1, 1, true, 1);
        assert!(s.load_sum.abs_diff(PELT_MIN_DIVIDER) <= 2, "{s:?}");
        assert_eq!((s.period_contrib, s.load_avg), (0, 1));
        assert_eq!(s.util_avg, 1024);
        // Half a period on: the divider and the sum both gain 512.
        s.update(2000 * P + 512 * 1024, 1, 1, true, 1);
        assert_eq!(s.period_contrib, 512);
        assert!(s.load_sum.abs_diff(PELT_MIN_DIVIDER + 512) <= 2, "{s:?}");
    }

    #[test]
    fn a_task_always_running_grows_as_one_minus_y_to_the_n() {
        // From zero, after n periods: weight × (1 − y^n), within the
        // fixed point's rounding. y^32 = 1/2: 512 of 1024 after 32
        // periods, 768 after 64, 896 after 96.
        let y = 0.5f64.powf(1.0 / 32.0);
        for n in [8u64, 32, 64, 96, 200] {
            let mut s = SchedAvg::at(0);
            s.update(n * P, 1, 1, true, 1024);
            let want = 1024.0 * (1.0 - y.powi(n as i32));
            for got in [s.load_avg, s.runnable_avg, s.util_avg] {
                assert!(
                    (got as f64 - want).abs() <= 0.01 * want + 2.0,
                    "{n} periods: {got} against {want:.1}"
                );
            }
        }
        // The weight scales load only: nice −5 (3121) converges to 3121.
        let mut s = SchedAvg::at(0);
        s.update(1000 * P, 1, 1, true, 3121);
        assert!((3110..=3121).contains(&s.load_avg), "{}", s.load_avg);
        assert!(s.util_avg <= 1024);
    }

    #[test]
    fn step_by_step_equals_one_step() {
        // Updating at every tick or once gives the same signal (within the
        // integer rounding), so lazy updates are exact enough.
        let mut a = SchedAvg::at(0);
        let mut b = SchedAvg::at(0);
        for k in 1..=250 {
            a.update(k * 1_000_000, 1, 1, true, 1024);
        }
        b.update(250_000_000, 1, 1, true, 1024);
        assert!(a.load_avg.abs_diff(b.load_avg) <= 2, "{a:?} {b:?}");
        assert!(a.util_avg.abs_diff(b.util_avg) <= 2);
    }

    #[test]
    fn a_half_duty_cycle_settles_about_half() {
        // Running 8 periods, sleeping 8: the average oscillates about 512,
        // between 1024 (1 − y^8)/(1 − y^16) ≈ 561 at the end of a run
        // and ≈ 463 at the end of a sleep.
        let mut s = SchedAvg::at(0);
        let mut t = 0;
        let (mut hi, mut lo) = (0, 0);
        for _ in 0..40 {
            t += 8 * P;
            s.update(t, 1, 1, true, 1024);
            hi = s.util_avg;
            t += 8 * P;
            s.update(t, 0, 0, false, 1024);
            lo = s.util_avg;
        }
        assert!((555..=565).contains(&hi), "{hi}");
        assert!((458..=468).contains(&lo), "{lo}");
        assert_eq!(s.load_avg, s.util_avg, "a task alone: load = util");
    }

    #[test]
    fn a_sleeping_task_decays_by_half_every_32_periods() {
        let mut s = SchedAvg::at(0);
        s.update(1000 * P, 1, 1, true, 1024);
        let full = s.load_avg;
        s.update(1032 * P, 0, 0, false, 1024);
        assert!(
            s.load_avg.abs_diff(full / 2) <= 2,
            "{} of {full}",
            s.load_avg
        );
        s.update(1064 * P, 0, 0, false, 1024);
        assert!(s.load_avg.abs_diff(full / 4) <= 2, "{}", s.load_avg);
    }

    #[test]
    fn runnable_counts_waiting_util_only_running() {
        // Two tasks sharing a CPU half each: both runnable all the time
        // (runnable and load near 1024), each running half (util ≈ 512);
        // the run queue: load 2048, runnable 2048, util 1024.
        let (mut a, mut b) = (SchedAvg::at(0), SchedAvg::at(0));
        let mut rq = SchedAvg::at(0);
        let mut t = 0;
        for k in 0..400 {
            t += 4_000_000;
            a.update(t, 1, 1, k % 2 == 0, 1024);
            b.update(t, 1, 1, k % 2 == 1, 1024);
            rq.update(t, 2048, 2, true, 1);
        }
        for x in [a, b] {
            assert!(x.load_avg >= 1015 && x.runnable_avg >= 1015, "{x:?}");
            assert!(x.util_avg.abs_diff(512) <= 40, "{x:?}");
        }
        assert!(rq.load_avg >= 2030 && rq.runnable_avg >= 2030, "{rq:?}");
        assert!(rq.util_avg >= 1015, "{rq:?}");
    }

    #[test]
    fn attach_and_detach_move_a_tasks_share() {
        let mut rq = SchedAvg::at(0);
        rq.update(500 * P, 1024, 1, true, 1);
        let mut se = SchedAvg::at(0);
        se.update(500 * P, 1, 1, true, 1024);
        let before = rq;
        let mut other = SchedAvg::at(500 * P);
        other.attach(&mut se, 1024);
        assert_eq!(other.load_avg, se.load_avg);
        assert_eq!(other.util_avg, se.util_avg);
        rq.detach(&se, 1024);
        assert!(rq.load_avg <= before.load_avg - se.load_avg + 1);
        // Its sum rebuilt: the next update keeps its average.
        let avg = se.load_avg;
        se.update(501 * P, 1, 1, true, 1024);
        assert!(se.load_avg.abs_diff(avg) <= 2, "{} vs {avg}", se.load_avg);
    }

    #[test]
    fn a_new_task_starts_at_its_weight_and_half_the_spare_capacity() {
        let idle = SchedAvg::at(0);
        let s = SchedAvg::new_task(1024, &idle);
        assert_eq!((s.load_avg, s.util_avg, s.runnable_avg), (1024, 512, 512));
        // On a CPU with util 600 and load 1024: min(600 × 1024 / 1025,
        // (1024 − 600) / 2) = 212.
        let rq = SchedAvg {
            util_avg: 600,
            load_avg: 1024,
            ..Default::default()
        };
        assert_eq!(SchedAvg::new_task(1024, &rq).util_avg, 212);
    }
}
