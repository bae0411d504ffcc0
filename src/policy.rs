//! Scheduling policies and how priorities are assigned to the processes of a
//! run. Pure data: nothing here makes a system call.

use serde::{Deserialize, Serialize};

use crate::sys::sched;

/// A Linux scheduling policy schedlab can put a worker under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Policy {
    Other,
    Batch,
    Idle,
    Fifo,
    Rr,
    Deadline,
    /// schedlab's own weighted round robin, dispatched from user space.
    Wrr,
}

/// The kinds of priority a policy understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Completely fair / EEVDF: nice -20..19.
    Fair,
    /// Static real-time priority 1..99.
    Realtime,
    /// Runtime/deadline/period reservation.
    Deadline,
    /// schedlab's weighted round robin: a weight per process.
    Wrr,
}

impl Policy {
    pub const ALL: [Policy; 7] = [
        Policy::Other,
        Policy::Batch,
        Policy::Idle,
        Policy::Fifo,
        Policy::Rr,
        Policy::Deadline,
        Policy::Wrr,
    ];

    /// The policies of the Linux kernel (all but schedlab's own).
    pub const KERNEL: [Policy; 6] = [
        Policy::Other,
        Policy::Batch,
        Policy::Idle,
        Policy::Fifo,
        Policy::Rr,
        Policy::Deadline,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Policy::Other => "other",
            Policy::Batch => "batch",
            Policy::Idle => "idle",
            Policy::Fifo => "fifo",
            Policy::Rr => "rr",
            Policy::Deadline => "deadline",
            Policy::Wrr => "wrr",
        }
    }

    /// Parse a policy name; `normal` is accepted for `other` as the kernel
    /// calls it SCHED_NORMAL.
    pub fn parse(s: &str) -> Option<Policy> {
        let s = s.trim().to_ascii_lowercase();
        let s = s.strip_prefix("sched_").unwrap_or(&s);
        match s {
            "other" | "normal" => Some(Policy::Other),
            "batch" => Some(Policy::Batch),
            "idle" => Some(Policy::Idle),
            "fifo" => Some(Policy::Fifo),
            "rr" => Some(Policy::Rr),
            "deadline" => Some(Policy::Deadline),
            "wrr" => Some(Policy::Wrr),
            _ => None,
        }
    }

    pub fn names() -> String {
        Policy::ALL.map(|p| p.name()).join(", ")
    }

    pub fn class(self) -> Class {
        match self {
            Policy::Other | Policy::Batch | Policy::Idle => Class::Fair,
            Policy::Fifo | Policy::Rr => Class::Realtime,
            Policy::Deadline => Class::Deadline,
            Policy::Wrr => Class::Wrr,
        }
    }

    /// The kernel's policy number. WRR workers are ordinary SCHED_OTHER
    /// processes until the dispatcher takes them over.
    pub fn kernel_id(self) -> u32 {
        match self {
            Policy::Wrr => sched::SCHED_OTHER,
            Policy::Other => sched::SCHED_OTHER,
            Policy::Batch => sched::SCHED_BATCH,
            Policy::Idle => sched::SCHED_IDLE,
            Policy::Fifo => sched::SCHED_FIFO,
            Policy::Rr => sched::SCHED_RR,
            Policy::Deadline => sched::SCHED_DEADLINE,
        }
    }

    pub fn from_kernel_id(id: u32) -> Option<Policy> {
        Policy::KERNEL.into_iter().find(|p| p.kernel_id() == id)
    }
}

pub const NICE_MIN: i32 = -20;
pub const NICE_MAX: i32 = 19;
pub const RT_MIN: i32 = 1;
pub const RT_MAX: i32 = 99;

/// How the processes of a run get their priorities (seed 001: uniform versus
/// non-uniform). Values are nice for fair policies, RT priorities for
/// FIFO/RR and weights for WRR; DEADLINE takes its reservation from
/// [`Deadline`] (or from weights, in `Weights` mode).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "mode")]
pub enum Assignment {
    /// Every process gets the same value.
    Uniform {
        nice: i32,
        rt_priority: i32,
        weight: u32,
    },
    /// Values spread evenly over [first, last] from the first process to the
    /// last.
    Spread {
        nice: (i32, i32),
        rt_priority: (i32, i32),
        weight: (u32, u32),
    },
    /// An explicit list, cycled over the processes.
    List {
        nice: Vec<i32>,
        rt_priority: Vec<i32>,
        weight: Vec<u32>,
    },
    /// Weights (cycled), delivered by whichever policy runs them: WRR slices
    /// directly; under a fair policy the nice value whose kernel weight is
    /// nearest the requested ratio; under DEADLINE a runtime proportional to
    /// the weight. RT policies have no weights: they get `rt_priority`.
    Weights { weight: Vec<u32>, rt_priority: i32 },
}

/// A named priority mode from the spec (`[priorities.NAME]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PriorityMode {
    pub name: String,
    pub assignment: Assignment,
}

impl Assignment {
    pub fn mode_name(&self) -> &'static str {
        match self {
            Assignment::Uniform { .. } => "uniform",
            Assignment::Spread { .. } => "spread",
            Assignment::List { .. } => "list",
            Assignment::Weights { .. } => "weights",
        }
    }

    /// The priority value of process `index` of `count` for a class: nice
    /// (fair), RT priority (realtime), weight (WRR); None for DEADLINE.
    pub fn value(&self, class: Class, index: usize, count: usize) -> Option<i32> {
        let pick = |nice: i32, rt: i32, weight: u32| match class {
            Class::Fair => Some(nice),
            Class::Realtime => Some(rt),
            Class::Wrr => Some(weight as i32),
            Class::Deadline => None,
        };
        match self {
            Assignment::Uniform {
                nice,
                rt_priority,
                weight,
            } => pick(*nice, *rt_priority, *weight),
            Assignment::Spread {
                nice,
                rt_priority,
                weight,
            } => pick(
                spread(nice.0, nice.1, index, count),
                spread(rt_priority.0, rt_priority.1, index, count),
                spread(weight.0 as i32, weight.1 as i32, index, count) as u32,
            ),
            Assignment::List {
                nice,
                rt_priority,
                weight,
            } => pick(
                nice[index % nice.len()],
                rt_priority[index % rt_priority.len()],
                weight[index % weight.len()],
            ),
            Assignment::Weights {
                weight,
                rt_priority,
            } => {
                let weights: Vec<u32> = (0..count).map(|i| weight[i % weight.len()]).collect();
                pick(
                    nice_for_weights(&weights)[index],
                    *rt_priority,
                    weights[index],
                )
            }
        }
    }

    /// The weights of `count` processes, when this mode has weights.
    pub fn weights(&self, count: usize) -> Vec<u32> {
        (0..count)
            .map(|i| self.value(Class::Wrr, i, count).unwrap_or(1).max(1) as u32)
            .collect()
    }
}

/// Nice values whose kernel weights (sched_prio_to_weight) stand in the
/// ratios of `weights` as nearly as the table allows, centred so that the
/// geometric mean of the weights maps to nice 0.
pub fn nice_for_weights(weights: &[u32]) -> Vec<i32> {
    if weights.is_empty() {
        return Vec::new();
    }
    let log_mean =
        weights.iter().map(|&w| (w.max(1) as f64).ln()).sum::<f64>() / weights.len() as f64;
    let geometric_mean = log_mean.exp();
    weights
        .iter()
        .map(|&w| crate::stats::fairness::nearest_nice_for_ratio(w.max(1) as f64 / geometric_mean))
        .collect()
}

/// Value `index` of `count` values spread evenly from `lo` to `hi`
/// (inclusive, rounded to the nearest integer). A single process gets the
/// middle of the range.
pub fn spread(lo: i32, hi: i32, index: usize, count: usize) -> i32 {
    if count <= 1 {
        return ((lo as f64 + hi as f64) / 2.0).round() as i32;
    }
    let t = index as f64 / (count - 1) as f64;
    (lo as f64 + t * (hi as f64 - lo as f64)).round() as i32
}

/// A SCHED_DEADLINE reservation per process. `runtime_ns` None means "auto":
/// share 90% of the RT bandwidth limit of the run's CPUs equally among its
/// processes, so that the kernel's admission test passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deadline {
    pub runtime_ns: Option<u64>,
    pub deadline_ns: u64,
    pub period_ns: u64,
}

impl Deadline {
    /// The runtime a process gets: the fixed value, or the automatic share.
    pub fn runtime_for(&self, processes: usize, cpus: usize, rt_fraction: f64) -> u64 {
        match self.runtime_ns {
            Some(r) => r,
            None => self.auto_runtime(1.0 / processes.max(1) as f64, cpus, rt_fraction),
        }
    }

    /// The runtime of a process entitled to `fraction` of the bandwidth
    /// schedlab may reserve (90% of the RT limit of the run's CPUs).
    pub fn auto_runtime(&self, fraction: f64, cpus: usize, rt_fraction: f64) -> u64 {
        let share = 0.9 * rt_fraction * cpus as f64 * fraction;
        // One process can use at most one CPU, and the kernel refuses
        // runtimes under 1024 ns; keep whole µs.
        let r_us = self.deadline_ns as f64 * share.min(1.0) / 1000.0;
        // Floor to whole µs (never above the share), tolerating the last bit
        // of floating-point error so 3,420,000.0 does not become 3,419,000.
        ((r_us + 1e-6).floor() as u64 * 1000).max(1024)
    }
}

/// What one worker process is put under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcSched {
    pub policy: Policy,
    pub nice: Option<i32>,
    pub rt_priority: Option<i32>,
    pub dl_runtime_ns: Option<u64>,
    pub dl_deadline_ns: Option<u64>,
    pub dl_period_ns: Option<u64>,
    /// The weight the process was given: its WRR slice weight, or under a
    /// `weights` priority mode the weight its nice value (OTHER, BATCH,
    /// IDLE) or DEADLINE runtime delivers. None under FIFO and RR.
    pub weight: Option<u32>,
    /// A custom EEVDF slice asked for (OTHER, BATCH; `sched_runtime`), ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slice_ns: Option<u64>,
}

impl ProcSched {
    /// OTHER or BATCH at a nice value.
    pub fn fair(policy: Policy, nice: i32) -> ProcSched {
        ProcSched {
            nice: Some(nice),
            rt_priority: None,
            ..ProcSched::realtime(policy, 0)
        }
    }

    /// FIFO or RR at a static priority.
    pub fn realtime(policy: Policy, rt_priority: i32) -> ProcSched {
        ProcSched {
            policy,
            nice: None,
            rt_priority: Some(rt_priority),
            dl_runtime_ns: None,
            dl_deadline_ns: None,
            dl_period_ns: None,
            weight: None,
            slice_ns: None,
        }
    }

    pub fn attr(&self) -> sched::SchedAttr {
        match self.policy.class() {
            Class::Fair => sched::SchedAttr {
                sched_runtime: self.slice_ns.unwrap_or(0),
                ..sched::SchedAttr::fair(self.policy.kernel_id(), self.nice.unwrap_or(0))
            },
            // Started as an ordinary process; the WRR dispatcher takes it over.
            Class::Wrr => sched::SchedAttr::fair(sched::SCHED_OTHER, 0),
            Class::Realtime => sched::SchedAttr::realtime(
                self.policy.kernel_id(),
                self.rt_priority.unwrap_or(1) as u32,
            ),
            Class::Deadline => sched::SchedAttr::deadline(
                self.dl_runtime_ns.unwrap_or(0),
                self.dl_deadline_ns.unwrap_or(0),
                self.dl_period_ns.unwrap_or(0),
            ),
        }
    }
}

/// The schedule of every process of a run.
pub fn assign(
    policy: Policy,
    mode: &Assignment,
    deadline: &Deadline,
    processes: usize,
    cpus: usize,
    rt_fraction: f64,
) -> Vec<ProcSched> {
    let weights = mode.weights(processes);
    let weight_sum: u64 = weights.iter().map(|&w| w as u64).sum();
    (0..processes)
        .map(|i| {
            let value = mode.value(policy.class(), i, processes);
            let mut p = ProcSched {
                policy,
                nice: None,
                rt_priority: None,
                dl_runtime_ns: None,
                dl_deadline_ns: None,
                dl_period_ns: None,
                weight: None,
                slice_ns: None,
            };
            match policy.class() {
                Class::Fair => {
                    p.nice = value;
                    // The weight the nice value stands for.
                    p.weight = matches!(mode, Assignment::Weights { .. }).then_some(weights[i]);
                }
                Class::Realtime => p.rt_priority = value,
                Class::Wrr => p.weight = value.map(|w| w.max(1) as u32),
                Class::Deadline => {
                    let runtime = match (mode, deadline.runtime_ns) {
                        // Reservations proportional to the weights.
                        (Assignment::Weights { .. }, None) => deadline.auto_runtime(
                            weights[i] as f64 / weight_sum.max(1) as f64,
                            cpus,
                            rt_fraction,
                        ),
                        _ => deadline.runtime_for(processes, cpus, rt_fraction),
                    };
                    p.dl_runtime_ns = Some(runtime);
                    p.dl_deadline_ns = Some(deadline.deadline_ns);
                    p.dl_period_ns = Some(deadline.period_ns);
                    p.weight = matches!(mode, Assignment::Weights { .. }).then_some(weights[i]);
                }
            }
            p
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_names_round_trip() {
        for p in Policy::ALL {
            assert_eq!(Policy::parse(p.name()), Some(p));
        }
        for p in Policy::KERNEL {
            assert_eq!(Policy::from_kernel_id(p.kernel_id()), Some(p));
        }
        assert_eq!(Policy::parse("SCHED_NORMAL"), Some(Policy::Other));
        assert_eq!(Policy::parse("wfq"), None);
    }

    #[test]
    fn spread_covers_the_range_evenly() {
        let v: Vec<i32> = (0..5).map(|i| spread(-10, 10, i, 5)).collect();
        assert_eq!(v, vec![-10, -5, 0, 5, 10]);
        let v: Vec<i32> = (0..3).map(|i| spread(1, 99, i, 3)).collect();
        assert_eq!(v, vec![1, 50, 99]);
        assert_eq!(spread(-10, 10, 0, 1), 0);
        // Ten processes over nice -10..10 (seed 001's non-uniform case).
        let v: Vec<i32> = (0..10).map(|i| spread(-10, 10, i, 10)).collect();
        assert_eq!(v, vec![-10, -8, -6, -3, -1, 1, 3, 6, 8, 10]);
    }

    #[test]
    fn list_cycles_and_classes_pick_their_value() {
        let m = Assignment::List {
            nice: vec![0, 5],
            rt_priority: vec![10, 20, 30],
            weight: vec![1],
        };
        let nice: Vec<_> = (0..4)
            .map(|i| m.value(Class::Fair, i, 4).unwrap())
            .collect();
        assert_eq!(nice, vec![0, 5, 0, 5]);
        let rt: Vec<_> = (0..4)
            .map(|i| m.value(Class::Realtime, i, 4).unwrap())
            .collect();
        assert_eq!(rt, vec![10, 20, 30, 10]);
        assert_eq!(m.value(Class::Deadline, 0, 4), None);
    }

    #[test]
    fn weights_map_to_wrr_nice_and_deadline() {
        let m = Assignment::Weights {
            weight: vec![1, 4, 8, 12, 16, 20],
            rt_priority: 50,
        };
        assert_eq!(m.weights(6), vec![1, 4, 8, 12, 16, 20]);
        let d = Deadline {
            runtime_ns: None,
            deadline_ns: 10_000_000,
            period_ns: 10_000_000,
        };
        let wrr = assign(Policy::Wrr, &m, &d, 6, 1, 0.95);
        assert_eq!(wrr[5].weight, Some(20));
        // Nice: weight ratios follow the requested ones (1.25 per nice step),
        // heavier weights get lower nice values.
        let other = assign(Policy::Other, &m, &d, 6, 1, 0.95);
        let nices: Vec<i32> = other.iter().map(|p| p.nice.unwrap()).collect();
        assert!(nices.windows(2).all(|w| w[0] > w[1]), "{nices:?}");
        let ratio = crate::stats::fairness::nice_weight(nices[5]).unwrap() as f64
            / crate::stats::fairness::nice_weight(nices[0]).unwrap() as f64;
        assert!((ratio / 20.0 - 1.0).abs() < 0.25, "ratio {ratio} for 20");
        // The weight each nice value stands for is kept (for the record).
        assert_eq!(other[5].weight, Some(20));
        // Deadline: runtimes proportional to the weights, inside 90% of the
        // RT bandwidth of one CPU in total.
        let dl = assign(Policy::Deadline, &m, &d, 6, 1, 0.95);
        let rts: Vec<u64> = dl.iter().map(|p| p.dl_runtime_ns.unwrap()).collect();
        assert!(
            (rts[5] as f64 / rts[0] as f64 - 20.0).abs() < 0.1,
            "{rts:?}"
        );
        assert!(rts.iter().sum::<u64>() as f64 <= 0.9 * 0.95 * 10e6 + 6000.0);
        // RT policies have no weights.
        let fifo = assign(Policy::Fifo, &m, &d, 6, 1, 0.95);
        assert_eq!(fifo[0].rt_priority, Some(50));
        assert_eq!(fifo[0].weight, None);
    }

    #[test]
    fn auto_deadline_runtime_fits_admission() {
        let d = Deadline {
            runtime_ns: None,
            deadline_ns: 10_000_000,
            period_ns: 10_000_000,
        };
        let r = d.runtime_for(5, 2, 0.95);
        // 5 × r / period must stay under 2 CPUs × 0.95.
        assert!(5.0 * r as f64 / 10e6 <= 2.0 * 0.95);
        assert_eq!(r, 3_420_000);
        // Many processes never go below the kernel's 1024 ns minimum.
        assert!(d.runtime_for(100_000, 1, 0.95) >= 1024);
        let fixed = Deadline {
            runtime_ns: Some(5_000),
            ..d
        };
        assert_eq!(fixed.runtime_for(5, 2, 0.95), 5_000);
    }

    #[test]
    fn assign_builds_kernel_attrs() {
        let mode = Assignment::Spread {
            nice: (-10, 10),
            rt_priority: (1, 99),
            weight: (1, 20),
        };
        let d = Deadline {
            runtime_ns: None,
            deadline_ns: 10_000_000,
            period_ns: 10_000_000,
        };
        let fifo = assign(Policy::Fifo, &mode, &d, 3, 2, 0.95);
        assert_eq!(
            fifo.iter()
                .map(|p| p.rt_priority.unwrap())
                .collect::<Vec<_>>(),
            vec![1, 50, 99]
        );
        assert_eq!(fifo[2].attr().sched_priority, 99);
        assert_eq!(fifo[2].attr().sched_policy, sched::SCHED_FIFO);
        let other = assign(Policy::Other, &mode, &d, 3, 2, 0.95);
        assert_eq!(other[0].attr().sched_nice, -10);
        let dl = assign(Policy::Deadline, &mode, &d, 2, 2, 0.95);
        assert_eq!(dl[0].attr().sched_runtime, 8_550_000);
        assert_eq!(dl[0].attr().sched_period, 10_000_000);
    }
}
