//! Other programs' activity around one run, never counting the run's own
//! processes or schedlab: runnable tasks on the machine just before barrier
//! release, and over the run the steal time and the busy time of the run's
//! CPUs beyond what the run and schedlab used (`/proc/stat` deltas), and
//! the noise on the run's CPUs: interrupts, softirqs, clock frequency and
//! thermal throttling (`sys::noise`).

use std::collections::{BTreeMap, HashSet};

use crate::record::{Interference, ProcessRecord};
use crate::sys::activity::{self, CpuTicks};
use crate::sys::noise;
use crate::sys::proc::{self, Usage};

/// `/proc/stat` counts whole clock ticks (10 ms at USER_HZ 100), sampled:
/// below this many ticks per CPU (1 s) a share would be mostly rounding,
/// so none is given.
pub const MIN_TICKS_PER_CPU: u64 = 100;

/// What is read just before barrier release.
pub struct AtRelease {
    others_runnable: Option<u32>,
    ticks: Option<BTreeMap<usize, CpuTicks>>,
    own: Usage,
    /// The run's CPUs, whose noise is read.
    cpus: Vec<usize>,
    noise: noise::Reading,
}

/// What is read once every process of the run has ended.
pub struct AtEnd {
    ticks: Option<BTreeMap<usize, CpuTicks>>,
    own: Usage,
    noise: noise::Reading,
}

/// Read just before release: runnable tasks outside `run_pids` and
/// schedlab, the CPUs' counters, schedlab's own CPU time, the noise
/// sources of `run_cpus`.
pub fn at_release(run_pids: &[i32], run_cpus: &[usize]) -> AtRelease {
    let mut ours: HashSet<i32> = run_pids.iter().copied().collect();
    ours.insert(std::process::id() as i32);
    AtRelease {
        others_runnable: activity::count_runnable_tasks(&ours),
        ticks: activity::read_cpu_ticks(),
        own: proc::self_usage(),
        cpus: run_cpus.to_vec(),
        noise: noise::Roots::default().read(run_cpus),
    }
}

/// Read when the run's processes have ended, on the CPUs `start` read.
pub fn at_end(start: &AtRelease) -> AtEnd {
    AtEnd {
        ticks: activity::read_cpu_ticks(),
        own: proc::self_usage(),
        noise: noise::Roots::default().read(&start.cpus),
    }
}

/// CPU time of a run's processes over the run, ns: scheduler statistics
/// where there are some, else user + system time.
pub fn processes_cpu_ns(processes: &[ProcessRecord]) -> u64 {
    processes
        .iter()
        .map(|p| {
            p.kernel
                .get(crate::fields::Field::RunNs)
                .unwrap_or((p.usage.utime_us + p.usage.stime_us) * 1000)
        })
        .sum()
}

/// The interference of a run whose processes used `run_cpu_ns` of CPU on
/// `cpus` (every CPU any of them could use) between the two readings;
/// `tick_ns` is the length of `/proc/stat`'s clock tick.
pub fn measure(
    start: &AtRelease,
    end: &AtEnd,
    cpus: &[usize],
    run_cpu_ns: u64,
    tick_ns: u64,
) -> Interference {
    let own = end.own.since(&start.own);
    let ours_ns = run_cpu_ns + (own.utime_us + own.stime_us) * 1000;
    let delta = match (&start.ticks, &end.ticks) {
        (Some(a), Some(b)) => activity::ticks_between(a, b, cpus),
        _ => None,
    };
    let (steal_pct, other_cpu_pct) = delta
        .map(|d| shares(&d, cpus.len(), ours_ns, tick_ns))
        .unwrap_or((None, None));
    let n = noise::between(&start.noise, &end.noise, cpus);
    Interference {
        others_runnable: start.others_runnable,
        steal_pct,
        other_cpu_pct,
        interrupts: n.interrupts,
        softirqs: n.softirqs,
        cpu_freq_khz: n.cpu_freq_khz,
        throttle_count: n.throttle_count,
    }
}

/// Each CPU's busy time over the run, in % of its time (every program's,
/// the run's included), from `/proc/stat`'s ticks: CPU → %. Empty when
/// the run was shorter than [`MIN_TICKS_PER_CPU`] ticks.
pub fn cpu_busy_pct(start: &AtRelease, end: &AtEnd) -> BTreeMap<usize, f64> {
    let (Some(a), Some(b)) = (&start.ticks, &end.ticks) else {
        return BTreeMap::new();
    };
    let mut out = BTreeMap::new();
    for (&cpu, after) in b {
        let Some(before) = a.get(&cpu) else { continue };
        let d = after.since(before);
        if d.total() < MIN_TICKS_PER_CPU {
            return BTreeMap::new();
        }
        out.insert(cpu, 100.0 * d.busy as f64 / d.total() as f64);
    }
    out
}

/// Steal time and other programs' busy time, in % of the time of `cpus`
/// CPUs whose counters advanced by `delta`, when `ours_ns` of their busy
/// time was the run's and schedlab's. None when the window is under
/// [`MIN_TICKS_PER_CPU`].
pub fn shares(
    delta: &CpuTicks,
    cpus: usize,
    ours_ns: u64,
    tick_ns: u64,
) -> (Option<f64>, Option<f64>) {
    let total = delta.total();
    if cpus == 0 || total < MIN_TICKS_PER_CPU * cpus as u64 {
        return (None, None);
    }
    let total_ns = total as f64 * tick_ns as f64;
    let steal = 100.0 * delta.steal as f64 / total as f64;
    let other_ns = (delta.busy as f64 * tick_ns as f64 - ours_ns as f64).max(0.0);
    (Some(steal), Some(100.0 * other_ns / total_ns))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TICK_NS: u64 = 10_000_000;

    #[test]
    fn shares_of_steal_and_other_busy_time() {
        // Two CPUs for 2 s: 400 ticks. The run used 3 s of CPU, the CPUs
        // were busy 3.4 s and stolen 0.2 s.
        let d = CpuTicks {
            busy: 340,
            idle: 40,
            steal: 20,
        };
        let (steal, other) = shares(&d, 2, 3_000_000_000, TICK_NS);
        assert!((steal.unwrap() - 5.0).abs() < 1e-9);
        assert!((other.unwrap() - 10.0).abs() < 1e-9);
        // More of our own time than the CPUs counted (rounding, or our time
        // on other CPUs): nothing is other programs'.
        assert_eq!(shares(&d, 2, 4_000_000_000, TICK_NS).1, Some(0.0));
    }

    #[test]
    fn no_shares_over_a_window_too_short_for_clock_ticks() {
        let d = CpuTicks {
            busy: 150,
            idle: 40,
            steal: 0,
        };
        // 190 ticks on two CPUs: under 100 each.
        assert_eq!(shares(&d, 2, 0, TICK_NS), (None, None));
        assert_eq!(shares(&d, 1, 0, TICK_NS).0, Some(0.0));
        assert_eq!(shares(&d, 0, 0, TICK_NS), (None, None));
    }

    #[test]
    fn each_cpus_busy_share_over_the_run() {
        let reading = |t: [(u64, u64); 2]| {
            Some(BTreeMap::from([
                (
                    0,
                    CpuTicks {
                        busy: t[0].0,
                        idle: t[0].1,
                        steal: 0,
                    },
                ),
                (
                    1,
                    CpuTicks {
                        busy: t[1].0,
                        idle: t[1].1,
                        steal: 0,
                    },
                ),
            ]))
        };
        let start = AtRelease {
            others_runnable: None,
            ticks: reading([(1000, 1000), (50, 5000)]),
            own: Usage::default(),
            cpus: vec![0, 1],
            noise: noise::Reading::default(),
        };
        let end = AtEnd {
            ticks: reading([(1150, 1050), (100, 5150)]),
            own: Usage::default(),
            noise: noise::Reading::default(),
        };
        let busy = cpu_busy_pct(&start, &end);
        assert!(
            (busy[&0] - 75.0).abs() < 1e-9 && (busy[&1] - 25.0).abs() < 1e-9,
            "{busy:?}"
        );
        // A run under a second of ticks gives none.
        let short = AtEnd {
            ticks: reading([(1010, 1010), (55, 5010)]),
            ..end
        };
        assert!(cpu_busy_pct(&start, &short).is_empty());
    }

    #[test]
    fn measure_combines_readings_and_counts_schedlab_as_ours() {
        let ticks = |busy, idle, steal| Some(BTreeMap::from([(0, CpuTicks { busy, idle, steal })]));
        let start = AtRelease {
            others_runnable: Some(3),
            ticks: ticks(1000, 1000, 0),
            own: Usage::default(),
            cpus: vec![0],
            noise: noise::Reading {
                interrupts: Some(noise::PerCpu::from([(0, 100), (1, 7)])),
                ..noise::Reading::default()
            },
        };
        let end = AtEnd {
            ticks: ticks(1180, 1010, 10),
            own: Usage {
                utime_us: 100_000,
                ..Usage::default()
            },
            noise: noise::Reading {
                interrupts: Some(noise::PerCpu::from([(0, 160), (1, 900)])),
                ..noise::Reading::default()
            },
        };
        // 200 ticks = 2 s; busy 1.8 s of which the run 1.5 s, schedlab 0.1 s.
        let i = measure(&start, &end, &[0], 1_500_000_000, TICK_NS);
        assert_eq!(i.others_runnable, Some(3));
        assert!((i.steal_pct.unwrap() - 5.0).abs() < 1e-9);
        assert!((i.other_cpu_pct.unwrap() - 10.0).abs() < 1e-6, "{i:?}");
        // Only the run's CPU's interrupts; sources not read stay empty.
        assert_eq!(i.interrupts, Some(60));
        assert_eq!(
            (i.softirqs, i.cpu_freq_khz, i.throttle_count),
            (None, None, None)
        );
        // A CPU missing from a reading: no shares, the count stays.
        let i = measure(&start, &end, &[0, 1], 0, TICK_NS);
        assert_eq!(
            (i.others_runnable, i.steal_pct, i.other_cpu_pct),
            (Some(3), None, None)
        );
    }
}
