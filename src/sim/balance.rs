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
//! - Groups are classified (`group_classify`): has spare (fewer tasks
//!   than CPUs), fully busy, overloaded (more tasks than CPUs). The
//!   busiest group is the other group of the highest class, then the
//!   highest average load, or for spare groups the fewest idle CPUs
//!   (`update_sd_pick_busiest`). Load is the sum of the queued fair
//!   tasks' weights (the kernel averages it with PELT; the model uses the
//!   instant value).
//! - `sched_balance_find_src_group`'s early exits: a local group of a
//!   higher class; an overloaded local group whose load is within
//!   `imbalance_pct` of the busiest's; a busy CPU facing a group that is
//!   not overloaded; a busiest group with one task.
//! - `calculate_imbalance`: a local group with spare CPUs takes tasks
//!   (`migrate_task`: half the difference in tasks when the groups are
//!   single CPUs or SMT siblings are preferred, else half the difference
//!   in idle CPUs; on NUMA domains none while the busiest group runs at
//!   most `imb_numa_nr` = a quarter of its CPUs, `adjust_numa_imbalance`);
//!   otherwise load (`migrate_load`): min((busiest − average) × its
//!   capacity, (average − local) × its capacity), the average being the
//!   whole domain's load over its capacity (`sds->avg_load`).
//! - The source CPU in the busiest group (`sched_balance_find_src_rq`):
//!   the most tasks for `migrate_task`, the highest load for
//!   `migrate_load` (a CPU with one task heavier than the imbalance is
//!   skipped).
//!
//! The engine then detaches tasks (`detach_tasks`, see
//! [`super::engine`]) and updates the domain's state with
//! [`LbState::after`].
//!
//! Left out: PELT averaging, utilisation and misfit migration, capacity
//! lost to RT/IRQ, asymmetric CPU capacities, nohz idle balancing (idle
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
    /// Σ weights of the queued fair tasks.
    pub load: u64,
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
    cap: u64,
    weight: usize,
    kind: GroupType,
    avg_load: u64,
}

fn group_stats(g: &[usize], cpus: &[CpuLoad]) -> GroupStats {
    let nr: usize = g.iter().map(|&c| cpus[c].nr_running).sum();
    let load: u64 = g.iter().map(|&c| cpus[c].load).sum();
    let cap = g.len() as u64 * CAPACITY;
    GroupStats {
        nr,
        nr_fair: g.iter().map(|&c| cpus[c].nr_fair).sum(),
        idle_cpus: g.iter().filter(|&&c| cpus[c].idle()).count(),
        load,
        cap,
        weight: g.len(),
        kind: match nr.cmp(&g.len()) {
            std::cmp::Ordering::Less => GroupType::HasSpare,
            std::cmp::Ordering::Equal => GroupType::FullyBusy,
            std::cmp::Ordering::Greater => GroupType::Overloaded,
        },
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
    let local = group_stats(&d.groups[0], cpus);
    let (bi, busiest) = d
        .groups
        .iter()
        .enumerate()
        .skip(1)
        .map(|(i, g)| (i, group_stats(g, cpus)))
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
    let all = d.groups.iter().map(|g| group_stats(g, cpus));
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
    let imbalance = if local.kind == GroupType::HasSpare {
        let n = if busiest.weight == 1 || d.level != Level::Numa && d.groups[0].len() > 1 {
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
        let imb = ((busiest.avg_load - avg) * busiest.cap).min((avg - local.avg_load) * local.cap)
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

    /// `get_sd_balance_interval` in ns for a machine of `hz` and `cpus`.
    pub fn interval_ns(&self, d: &Domain, busy: bool, hz: u32, cpus: usize) -> u64 {
        let ms = self.interval_ms * if busy { d.busy_factor } else { 1 };
        let hz = u64::from(hz.max(1));
        let jiffies = (ms * hz).div_ceil(1000);
        let max = (hz * cpus as u64 / 10).max(1);
        jiffies.clamp(1, max) * (1_000_000_000 / hz)
    }

    pub fn due(&self, d: &Domain, busy: bool, hz: u32, cpus: usize, now: u64) -> bool {
        now >= self.last_ns + self.interval_ns(d, busy, hz, cpus)
    }

    /// The end of `sched_balance_rq`: failures counted, the interval
    /// reset when unbalanced, doubled (to the max) when balanced.
    /// `active`: whether the caller should move a running task now
    /// (`need_active_balance`: failed more than cache_nice_tries + 2).
    pub fn after(&mut self, d: &Domain, r: LbResult, now: u64) -> bool {
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
                if self.failed > d.cache_nice_tries + 2 {
                    self.failed = d.cache_nice_tries + 1;
                    return true;
                }
                false
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

    fn load(nr: usize) -> CpuLoad {
        CpuLoad {
            nr_running: nr,
            nr_fair: nr,
            load: 1024 * nr as u64,
        }
    }

    #[test]
    fn an_idle_cpu_takes_a_task_off_an_overloaded_one() {
        let t = SimTopology::flat(2);
        let cpus = [load(0), load(3)];
        let d = &t.domains[0][0];
        assert!(should_we_balance(d, &cpus, 0));
        // Spare local, overloaded busiest of one CPU: half of 3 − 0 = 1.
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
    fn the_interval_grows_when_balanced_and_resets_when_not() {
        let t = SimTopology::flat(2);
        let d = &t.domains[0][0];
        let mut s = LbState::new(d);
        // 2 ms × busy factor 16 = 32 ms = 8 ticks at HZ 250.
        assert_eq!(s.interval_ns(d, true, 250, 2), 32_000_000);
        // Idle: 2 ms → 1 jiffy (4 ms).
        assert_eq!(s.interval_ns(d, false, 250, 2), 4_000_000);
        assert!(!s.after(d, LbResult::Balanced, 0));
        assert_eq!(s.interval_ms, 4);
        assert!(!s.after(d, LbResult::Balanced, 0));
        assert_eq!(s.interval_ms, 4, "at most max_interval");
        s.after(d, LbResult::Moved(1), 0);
        assert_eq!((s.interval_ms, s.failed), (2, 0));
        // cache_nice_tries 1: the 4th failure asks for active balancing.
        let active: Vec<bool> = (0..4).map(|_| s.after(d, LbResult::Moved(0), 0)).collect();
        assert_eq!(active, vec![false, false, false, true]);
        assert_eq!(s.failed, 2);
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
