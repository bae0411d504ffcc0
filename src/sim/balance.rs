//! Periodic load balancing of the fair class, per scheduling domain, as
//! pure decisions (kernel/sched/fair.c `sched_balance_rq`, formerly
//! `load_balance`, and the functions named below), simplified:
//!
//! - Each CPU balances each of its domains when the domain's interval has
//!   passed (`rebalance_domains`, `get_sd_balance_interval`): the
//!   domain's `balance_interval` ms, × `busy_factor` while the CPU is
//!   busy, in jiffies, at least 1 and at most HZ × CPUs / 10
//!   (`max_load_balance_interval`). Only the first idle CPU of the local
//!   group, else its first CPU, balances for it (`should_we_balance`).
//! - Groups are classified (`group_classify`) from their tasks and PELT
//!   averages ([`super::pelt`]): overloaded when more tasks than CPUs and
//!   the utilisation or the runnable average exceeds the capacity by
//!   `imbalance_pct` (`group_is_overloaded`); has spare when fewer tasks
//!   than CPUs, or when neither is over it and utilisation leaves room
//!   (`group_has_capacity`); else fully busy. The busiest group is the
//!   other group of the highest class, then the highest average load, or
//!   for spare groups the fewest idle CPUs (`update_sd_pick_busiest`).
//!   A CPU's load is its fair run queue's `load_avg` (`cpu_load`).
//! - `sched_balance_find_src_group`'s early exits: a local group of a
//!   higher class; an overloaded local group whose load is within
//!   `imbalance_pct` of the busiest's; a busy CPU facing a group that is
//!   not overloaded; a busiest group with one task.
//! - `calculate_imbalance`: a local group with spare capacity facing an
//!   overloaded group above the LLC (PKG, NUMA: no SD_SHARE_LLC) takes
//!   utilisation (`migrate_util`: its spare capacity, each task's
//!   `util_avg` weighed against it; an idle CPU facing none takes one
//!   task); otherwise it takes tasks (`migrate_task`: half the difference
//!   in tasks when the groups are single CPUs or SMT siblings are
//!   preferred, `sibling_imbalance`, which is none for a busy CPU, else
//!   half the difference in idle CPUs; on NUMA domains none while the busiest group
//!   runs at most `imb_numa_nr` = a quarter of its CPUs,
//!   `adjust_numa_imbalance`); otherwise load (`migrate_load`):
//!   min((busiest − average) × its capacity, (average − local) × its
//!   capacity), the average being the whole domain's load over its
//!   capacity (`sds->avg_load`).
//! - The source CPU in the busiest group (`sched_balance_find_src_rq`):
//!   the most tasks for `migrate_task`, the highest load for
//!   `migrate_load` (a CPU with one task heavier than the imbalance is
//!   skipped), the highest utilisation (raised to runnable) among CPUs
//!   with two fair tasks or more for `migrate_util`.
//!
//! The engine then detaches tasks (`detach_tasks`, see
//! [`super::engine`]) and updates the domain's state with
//! [`LbState::after`].
//!
//! Left out: util_est, misfit migration, capacity lost to RT/IRQ, asymmetric CPU capacities, nohz idle balancing (idle
//! CPUs pull at once in the engine instead), NUMA balancing of memory.

use super::topology::{Domain, Level};

/// `SCHED_CAPACITY_SCALE`.
pub const CAPACITY: u64 = 1024;

/// `sysctl_sched_migration_cost`: a task that ran this recently is cache
/// hot and not moved by balancing (`task_hot`) until the domain failed
/// more than `cache_nice_tries` times.
pub const MIGRATION_COST_NS: u64 = 500_000;

/// One CPU as balancing sees it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuLoad {
    /// Tasks queued of every class, the running one included.
    pub nr_running: usize,
    /// Fair tasks queued, the running one included (`h_nr_running`).
    pub nr_fair: usize,
    /// The fair run queue's PELT `load_avg` (`cpu_load`).
    pub load: u64,
    /// Its `runnable_avg` (`cpu_runnable`).
    pub runnable: u64,
    /// Its `util_avg`, at most the capacity (`cpu_util_cfs`).
    pub util: u64,
}

impl CpuLoad {
    pub fn idle(&self) -> bool {
        self.nr_running == 0
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum GroupType {
    HasSpare,
    FullyBusy,
    Overloaded,
}

#[derive(Debug, Clone, Copy)]
struct GroupStats {
    nr: usize,
    nr_fair: usize,
    idle_cpus: usize,
    load: u64,
    util: u64,
    cap: u64,
    weight: usize,
    kind: GroupType,
    avg_load: u64,
}

/// `group_classify` for a group of `weight` CPUs with `nr` tasks: by
/// `group_is_overloaded` and `group_has_capacity`.
fn classify(nr: usize, weight: usize, cap: u64, util: u64, runnable: u64, pct: u64) -> GroupType {
    let over_runnable = cap * pct < runnable * 100;
    if nr > weight && (cap * 100 < util * pct || over_runnable) {
        return GroupType::Overloaded;
    }
    let has_capacity = nr < weight || !over_runnable && cap * 100 > util * pct;
    if has_capacity {
        GroupType::HasSpare
    } else {
        GroupType::FullyBusy
    }
}

fn group_stats(g: &[usize], cpus: &[CpuLoad], pct: u64) -> GroupStats {
    let nr: usize = g.iter().map(|&c| cpus[c].nr_running).sum();
    let load: u64 = g.iter().map(|&c| cpus[c].load).sum();
    let util: u64 = g.iter().map(|&c| cpus[c].util).sum();
    let runnable: u64 = g.iter().map(|&c| cpus[c].runnable).sum();
    let cap = g.len() as u64 * CAPACITY;
    GroupStats {
        nr,
        nr_fair: g.iter().map(|&c| cpus[c].nr_fair).sum(),
        idle_cpus: g.iter().filter(|&&c| cpus[c].idle()).count(),
        load,
        util,
        cap,
        weight: g.len(),
        kind: classify(nr, g.len(), cap, util, runnable, pct),
        avg_load: load * CAPACITY / cap.max(1),
    }
}

/// What to move.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Imbalance {
    /// This many tasks (`migrate_task`).
    Tasks(usize),
    /// This much load (`migrate_load`).
    Load(u64),
    /// This much utilisation (`migrate_util`).
    Util(u64),
}

/// The decision of one balancing pass: take from `src`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    pub src: usize,
    pub imbalance: Imbalance,
}

/// `should_we_balance`: whether `this` balances for its group.
pub fn should_we_balance(d: &Domain, cpus: &[CpuLoad], this: usize) -> bool {
    let local = &d.groups[0];
    match local.iter().find(|&&c| cpus[c].idle()) {
        Some(&c) => c == this,
        None => local.first() == Some(&this),
    }
}

/// `sched_balance_find_src_group` + `calculate_imbalance` +
/// `sched_balance_find_src_rq` for `this` on domain `d`; None: balanced.
pub fn find_imbalance(d: &Domain, cpus: &[CpuLoad], this: usize) -> Option<Decision> {
    let this_idle = cpus[this].idle();
    let pct = d.imbalance_pct;
    let local = group_stats(&d.groups[0], cpus, pct);
    let (bi, busiest) = d
        .groups
        .iter()
        .enumerate()
        .skip(1)
        .map(|(i, g)| (i, group_stats(g, cpus, pct)))
        .filter(|(_, s)| s.nr_fair > 0)
        .max_by(|(ia, a), (ib, b)| {
            let key = |s: &GroupStats| match s.kind {
                GroupType::HasSpare => (s.kind, u64::MAX - s.idle_cpus as u64, s.nr as u64),
                _ => (s.kind, s.avg_load, 0),
            };
            key(a).cmp(&key(b)).then(ib.cmp(ia))
        })?;
    if local.kind > busiest.kind {
        return None;
    }
    // `sds->avg_load`: over every group of the domain, not only the two
    // compared (`update_sd_lb_stats` sums `total_load` and
    // `total_capacity` over all of them).
    let all = d.groups.iter().map(|g| group_stats(g, cpus, pct));
    let (total_load, total_cap) = all.fold((0, 0), |(l, c), s| (l + s.load, c + s.cap));
    let avg = total_load * CAPACITY / total_cap.max(1);
    if busiest.kind == GroupType::Overloaded && local.kind >= GroupType::FullyBusy {
        if local.avg_load >= busiest.avg_load || local.avg_load >= avg {
            return None;
        }
        if local.kind == GroupType::Overloaded
            && 100 * busiest.avg_load <= d.imbalance_pct * local.avg_load
        {
            return None;
        }
    }
    if local.kind == GroupType::HasSpare
        && busiest.kind != GroupType::Overloaded
        && (!this_idle
            || (busiest.weight > 1 && local.idle_cpus <= busiest.idle_cpus + 1)
            || busiest.nr_fair <= 1)
    {
        return None;
    }
    if local.kind == GroupType::FullyBusy && busiest.kind == GroupType::FullyBusy {
        return None;
    }
    // SD_SHARE_LLC: SMT and MC domains (`cpu_smt_flags`,
    // `cpu_core_flags`).
    let shares_llc = matches!(d.level, Level::Smt | Level::Mc);
    let imbalance = if local.kind == GroupType::HasSpare
        && busiest.kind == GroupType::Overloaded
        && !shares_llc
    {
        // `migrate_util`: fill the local group's spare capacity; an idle
        // CPU facing none (utilisation at capacity) takes one task.
        match local.cap.max(local.util) - local.util {
            0 if this_idle => Imbalance::Tasks(1),
            0 => return None,
            u => Imbalance::Util(u),
        }
    } else if local.kind == GroupType::HasSpare {
        let n = if busiest.weight == 1 || d.level != Level::Numa && d.groups[0].len() > 1 {
            // `sibling_imbalance`: none for a busy CPU (`!env->idle`),
            // so a busy CPU with spare capacity in an LLC takes nothing.
            if !this_idle {
                return None;
            }
            busiest.nr.saturating_sub(local.nr) / 2
        } else {
            local.idle_cpus.saturating_sub(busiest.idle_cpus) / 2
        };
        let n = n.max(usize::from(busiest.nr > local.nr + 1));
        if d.level == Level::Numa {
            let imb_numa_nr = (busiest.weight / 4).max(1);
            if busiest.nr <= imb_numa_nr {
                return None;
            }
        }
        if n == 0 {
            return None;
        }
        Imbalance::Tasks(n)
    } else {
        let imb = (busiest.avg_load.saturating_sub(avg) * busiest.cap)
            .min(avg.saturating_sub(local.avg_load) * local.cap)
            / CAPACITY;
        if imb == 0 {
            return None;
        }
        Imbalance::Load(imb)
    };
    let src = find_src_rq(&d.groups[bi], cpus, imbalance)?;
    Some(Decision { src, imbalance })
}

/// `sched_balance_find_src_rq`.
fn find_src_rq(g: &[usize], cpus: &[CpuLoad], imbalance: Imbalance) -> Option<usize> {
    let candidates = g.iter().copied().filter(|&c| cpus[c].nr_fair > 0);
    match imbalance {
        Imbalance::Tasks(_) => candidates
            .filter(|&c| cpus[c].nr_running > 1)
            .max_by_key(|&c| (cpus[c].nr_fair, std::cmp::Reverse(c))),
        Imbalance::Load(imb) => candidates
            .filter(|&c| !(cpus[c].nr_running == 1 && cpus[c].load > imb))
            .max_by_key(|&c| (cpus[c].load, std::cmp::Reverse(c))),
        // `cpu_util_cfs_boost`: util raised to runnable, at most capacity.
        Imbalance::Util(_) => candidates
            .filter(|&c| cpus[c].nr_fair > 1)
            .max_by_key(|&c| {
                let u = cpus[c].util.max(cpus[c].runnable).min(CAPACITY);
                (u, std::cmp::Reverse(c))
            }),
    }
}

/// The periodic passes of a run, counted as the kernel's schedstat counts
/// them per domain for a busy CPU (`/proc/schedstat` version 16,
/// `lb_count`, `lb_balanced`, `lb_failed`, `lb_gained` of
/// `__CPU_NOT_IDLE`), summed over CPUs and domains: the figures to set
/// beside a guest's own.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LbTally {
    pub count: u64,
    pub balanced: u64,
    pub failed: u64,
    pub gained: u64,
}

impl LbTally {
    /// Count one pass's result.
    pub fn add(&mut self, r: LbResult) {
        self.count += 1;
        match r {
            LbResult::Balanced => self.balanced += 1,
            LbResult::Moved(0) => self.failed += 1,
            LbResult::Moved(n) => self.gained += n as u64,
        }
    }
}

/// One CPU's balancing state for one of its domains.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LbState {
    /// `sd->last_balance` in ns.
    pub last_ns: u64,
    /// `sd->balance_interval`, ms.
    pub interval_ms: u64,
    /// `sd->nr_balance_failed`.
    pub failed: u32,
}

/// How a balancing pass ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LbResult {
    /// Nothing to do (`out_balanced`).
    Balanced,
    /// An imbalance, and this many tasks moved (0: all pinned, hot or too
    /// heavy).
    Moved(usize),
}

impl LbState {
    pub fn new(d: &Domain) -> LbState {
        LbState {
            last_ns: 0,
            interval_ms: d.min_interval_ms,
            failed: 0,
        }
    }

    /// `get_sd_balance_interval` in ns for a machine of `hz` and `cpus`:
    /// a busy CPU's is one jiffy short of `balance_interval` ×
    /// `busy_factor` ("preventing their balancing periods from being
    /// multiples of each other": 63 and 127 jiffies at HZ 1000 on 4 CPUs,
    /// as a 6.12 guest's passes come).
    pub fn interval_ns(&self, d: &Domain, busy: bool, hz: u32, cpus: usize) -> u64 {
        let ms = self.interval_ms * if busy { d.busy_factor } else { 1 };
        let hz = u64::from(hz.max(1));
        let jiffies = (ms * hz).div_ceil(1000).saturating_sub(u64::from(busy));
        let max = (hz * cpus as u64 / 10).max(1);
        jiffies.clamp(1, max) * (1_000_000_000 / hz)
    }

    pub fn due(&self, d: &Domain, busy: bool, hz: u32, cpus: usize, now: u64) -> bool {
        now >= self.last_ns + self.interval_ns(d, busy, hz, cpus)
    }

    /// `active_load_balance_cpu_stop` moved a task: "Active balancing
    /// done, reset the failure counter" (6.12; before 5.13 the kicking
    /// CPU set it to cache_nice_tries + 1 instead).
    pub fn pushed(&mut self) {
        self.failed = 0;
    }

    /// The end of `sched_balance_rq`: failures counted, the interval
    /// reset when unbalanced, doubled (to the max) when balanced.
    /// Returns whether the caller should kick an active balance now
    /// (`need_active_balance`, of which the model has
    /// `imbalanced_active_balance`: a `migrate_task` imbalance, `tasks`,
    /// that failed more than cache_nice_tries + 2 times; a load or
    /// utilisation imbalance never does, its halving in `detach_tasks`
    /// lets a waiting task go instead). The counter stays: the stopper
    /// resets it when it moves a task ([`LbState::pushed`]).
    pub fn after(&mut self, d: &Domain, r: LbResult, tasks: bool, now: u64) -> bool {
        self.last_ns = now;
        match r {
            LbResult::Balanced => {
                self.failed = 0;
                if self.interval_ms < d.max_interval_ms {
                    self.interval_ms *= 2;
                }
                false
            }
            LbResult::Moved(0) => {
                self.failed += 1;
                self.interval_ms = d.min_interval_ms;
                tasks && self.failed > d.cache_nice_tries + 2
            }
            LbResult::Moved(_) => {
                self.failed = 0;
                self.interval_ms = d.min_interval_ms;
                false
            }
        }
    }
}

/// Whether a task of weight `w` may go under a load imbalance of
/// `left` after `failed` failures (`detach_tasks`: `shr_bound(load,
/// nr_balance_failed) > imbalance` skips it).
pub fn fits_load(w: u64, failed: u32, left: u64) -> bool {
    (w >> failed.min(63)) <= left
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::topology::SimTopology;

    /// `nr` hogs long on a CPU: load and runnable 1024 each, util full.
    fn load(nr: usize) -> CpuLoad {
        CpuLoad {
            nr_running: nr,
            nr_fair: nr,
            load: 1024 * nr as u64,
            runnable: 1024 * nr as u64,
            util: if nr > 0 { CAPACITY } else { 0 },
        }
    }

    /// Two CPUs of one package, each its own LLC: a PKG domain (no
    /// SD_SHARE_LLC).
    fn two_llcs() -> SimTopology {
        use crate::sim::topology::Place;
        let place = |c: usize| Place {
            core: c,
            llc: c,
            package: 0,
            node: 0,
        };
        SimTopology::from_places(vec![place(0), place(1)])
    }

    #[test]
    fn an_idle_cpu_takes_a_task_off_an_overloaded_one() {
        let cpus = [load(0), load(3)];
        // Across LLCs, spare local, overloaded busiest: `migrate_util`,
        // the idle CPU's whole capacity.
        let t = two_llcs();
        let d = &t.domains[0][0];
        assert_eq!(d.level, Level::Pkg);
        assert!(should_we_balance(d, &cpus, 0));
        assert_eq!(
            find_imbalance(d, &cpus, 0),
            Some(Decision {
                src: 1,
                imbalance: Imbalance::Util(1024)
            })
        );
        // Within an LLC (MC): `migrate_task`, `sibling_imbalance` (3 − 0)
        // halved: one task.
        let t = SimTopology::flat(2);
        let d = &t.domains[0][0];
        assert_eq!(d.level, Level::Mc);
        assert_eq!(
            find_imbalance(d, &cpus, 0),
            Some(Decision {
                src: 1,
                imbalance: Imbalance::Tasks(1)
            })
        );
        // The busy CPU sees nothing to take.
        assert_eq!(find_imbalance(&t.domains[1][0], &cpus, 1), None);
    }

    #[test]
    fn a_busy_cpu_with_spare_capacity_in_an_llc_takes_nothing() {
        // A hog that shared its CPU until its partner left has util about
        // 512: its CPU has spare capacity (512 × 1.17 < 1024) but is busy,
        // and `sibling_imbalance` is 0 when `!env->idle`: balanced, where
        // across LLCs it takes utilisation (`migrate_util`).
        let lone = CpuLoad {
            util: 512,
            ..load(1)
        };
        let cpus = [lone, load(2)];
        let t = SimTopology::flat(2);
        assert_eq!(find_imbalance(&t.domains[0][0], &cpus, 0), None);
        let t = two_llcs();
        assert_eq!(
            find_imbalance(&t.domains[0][0], &cpus, 0),
            Some(Decision {
                src: 1,
                imbalance: Imbalance::Util(512)
            })
        );
        // Once its util passes 1024 / 1.17 it is fully busy and takes load.
        let cpus = [CpuLoad { util: 880, ..lone }, load(2)];
        let t = SimTopology::flat(2);
        assert_eq!(
            find_imbalance(&t.domains[0][0], &cpus, 0).map(|d| d.imbalance),
            Some(Imbalance::Load(512))
        );
    }

    #[test]
    fn two_against_one_is_half_a_task_of_load() {
        // 3 hogs on 2 CPUs: local 1 (fully busy), busiest 2 (overloaded):
        // average 1.5 × 1024; imbalance min(0.5, 0.5) × 1024 = 512.
        let t = SimTopology::flat(2);
        let cpus = [load(1), load(2)];
        let d = &t.domains[0][0];
        assert_eq!(
            find_imbalance(d, &cpus, 0),
            Some(Decision {
                src: 1,
                imbalance: Imbalance::Load(512)
            })
        );
        // A 1024 task does not fit 512 until one failure halves it.
        assert!(!fits_load(1024, 0, 512) && fits_load(1024, 1, 512));
        // Equal CPUs are balanced.
        assert_eq!(find_imbalance(d, &[load(2), load(2)], 0), None);
    }

    #[test]
    fn the_average_is_the_whole_domains() {
        // 5 hogs on 4 CPUs: the domain's average is 5/4 of a task, so a
        // single CPU takes min(2 − 1.25, 1.25 − 1) × 1024 = 256 from the
        // doubled one (kernel: `sds->avg_load` over every group), and a
        // 1024 task fits only after 2 failures.
        let t = SimTopology::flat(4);
        let cpus = [load(1), load(2), load(1), load(1)];
        let d = &t.domains[0][0];
        assert_eq!(
            find_imbalance(d, &cpus, 0),
            Some(Decision {
                src: 1,
                imbalance: Imbalance::Load(256)
            })
        );
        assert!(!fits_load(1024, 1, 256) && fits_load(1024, 2, 256));
        // 6 on 4: average 1.5, half a task as on two CPUs.
        let cpus = [load(1), load(2), load(2), load(1)];
        assert_eq!(
            find_imbalance(d, &cpus, 0).map(|d| d.imbalance),
            Some(Imbalance::Load(512))
        );
    }

    #[test]
    fn groups_are_classified_by_their_averages() {
        // Two CPUs (MC, imbalance_pct 117): CPU 1 holds two tasks that
        // mostly sleep (runnable 600, util 500): not overloaded, and with
        // util × 1.17 below capacity it has spare; CPU 0 has one task of
        // util 300: spare too, and a busy CPU facing spare takes nothing.
        let t = SimTopology::flat(2);
        let d = &t.domains[0][0];
        let light = |nr: usize, util: u64| CpuLoad {
            nr_running: nr,
            nr_fair: nr,
            load: util,
            runnable: util + 100,
            util,
        };
        assert_eq!(find_imbalance(d, &[light(1, 300), light(2, 500)], 0), None);
        // The same two tasks always runnable (runnable 2048 > 1024 × 1.17):
        // overloaded; CPU 0 with spare capacity takes its utilisation
        // across LLCs, and nothing within one (busy: `sibling_imbalance`
        // is 0).
        let busy = CpuLoad {
            runnable: 2048,
            ..light(2, 1024)
        };
        assert_eq!(
            find_imbalance(&two_llcs().domains[0][0], &[light(1, 300), busy], 0),
            Some(Decision {
                src: 1,
                imbalance: Imbalance::Util(724)
            })
        );
        assert_eq!(find_imbalance(d, &[light(1, 300), busy], 0), None);
        // One task at full util leaves CPU 0 fully busy: load against the
        // domain's average, min(2048 − 1536, 1536 − 1024) = 512.
        let full = CpuLoad {
            load: 1024,
            runnable: 1024,
            ..light(1, 1024)
        };
        let busy = CpuLoad { load: 2048, ..busy };
        assert_eq!(
            find_imbalance(d, &[full, busy], 0).map(|d| d.imbalance),
            Some(Imbalance::Load(512))
        );
        // PELT loads off whole tasks move the imbalance with them: 1000
        // against 2048 and 2048, 1024 on 4 CPUs: average 6120 / 4 = 1530,
        // min(2048 − 1530, 1530 − 1000) = 518; a task's 1023 halved once
        // (511) fits, as it would not against 510.
        let t = SimTopology::flat(4);
        let d = &t.domains[0][0];
        let cpus = [CpuLoad { load: 1000, ..full }, busy, busy, full];
        assert_eq!(
            find_imbalance(d, &cpus, 0).map(|d| d.imbalance),
            Some(Imbalance::Load(518))
        );
        assert!(fits_load(1023, 1, 518) && !fits_load(1023, 1, 510));
    }

    #[test]
    fn the_interval_grows_when_balanced_and_resets_when_not() {
        let t = SimTopology::flat(2);
        let d = &t.domains[0][0];
        let mut s = LbState::new(d);
        // 2 ms × busy factor 16 = 32 ms = 8 ticks at HZ 250, one short
        // when busy: 7 ticks.
        assert_eq!(s.interval_ns(d, true, 250, 2), 28_000_000);
        // Idle: 2 ms → 1 jiffy (4 ms).
        assert_eq!(s.interval_ns(d, false, 250, 2), 4_000_000);
        assert!(!s.after(d, LbResult::Balanced, false, 0));
        assert_eq!(s.interval_ms, 4);
        assert!(!s.after(d, LbResult::Balanced, false, 0));
        assert_eq!(s.interval_ms, 4, "at most max_interval");
        // 4 ms × 16 = 64 ms = 16 ticks at HZ 250, 15 busy.
        assert_eq!(s.interval_ns(d, true, 250, 2), 60_000_000);
        s.after(d, LbResult::Moved(1), false, 0);
        assert_eq!((s.interval_ms, s.failed), (2, 0));
        // cache_nice_tries 1: a migrate_task imbalance's 4th failure asks
        // for active balancing, and so does each after it until the
        // stopper moves a task.
        let active: Vec<bool> = (0..5)
            .map(|_| s.after(d, LbResult::Moved(0), true, 0))
            .collect();
        assert_eq!(active, vec![false, false, false, true, true]);
        assert_eq!(s.failed, 5);
        s.pushed();
        assert_eq!(s.failed, 0);
        // A load imbalance never does: its failures halve the tasks'
        // loads in `detach_tasks` instead.
        let active: Vec<bool> = (0..6)
            .map(|_| s.after(d, LbResult::Moved(0), false, 0))
            .collect();
        assert!(active.iter().all(|&a| !a));
        assert_eq!(s.failed, 6);
    }

    #[test]
    fn a_numa_domain_tolerates_a_small_imbalance() {
        // 2 nodes × 4 CPUs: node 1 runs 1 task on 4 CPUs, node 0 idle.
        let t = SimTopology::grid(2, 4, 1);
        let d = t.domains[0]
            .iter()
            .find(|d| d.level == Level::Numa)
            .unwrap();
        let mut cpus = vec![load(0); 8];
        cpus[4] = load(1);
        assert_eq!(find_imbalance(d, &cpus, 0), None);
        // 4 tasks there leave node 1 fully busy: its MC level spreads them.
        cpus[4] = load(4);
        assert_eq!(find_imbalance(d, &cpus, 0), None);
        // 5 tasks overload it: node 0 takes one.
        cpus[4] = load(5);
        assert!(find_imbalance(d, &cpus, 0).is_some());
    }
}
