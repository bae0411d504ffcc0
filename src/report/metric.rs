//! The metrics a report can analyse, with their names, units, which way is
//! better (for `schedlab compare`) and how each is obtained from a process
//! row.

use serde::Serialize;

use crate::store::ReportProcess;

/// A measured quantity. Per-process metrics are averaged over the processes
/// of a run to give the run's value; `makespan` is a property of the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Wall time of a process, s.
    Wall,
    /// User CPU time, s.
    Utime,
    /// System CPU time, s.
    Stime,
    /// (user + system CPU) / wall time, %.
    CpuPct,
    /// Voluntary context switches.
    Nvcsw,
    /// Involuntary context switches (preemptions).
    Nivcsw,
    /// Run-queue wait (schedstat), ms.
    Wait,
    /// On-CPU time (schedstat), s.
    Run,
    /// Time slices (schedstat).
    Timeslices,
    /// Work done, in the workload's unit.
    Work,
    /// Run makespan: barrier release to the last worker's end, s.
    Makespan,
    /// Median latency of a run (its workers' primary histograms pooled),
    /// µs. A metric of `compare` only, for campaigns that store latency;
    /// the report shows latency in its own section.
    LatencyP50,
    /// 99th-percentile latency of a run, µs (as [`Metric::LatencyP50`]).
    LatencyP99,
}

/// Which way a metric improves: what `schedlab compare` calls better.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Times, latencies, switches, waits: less is better.
    LowerIsBetter,
    /// Throughput and work rates: more is better.
    HigherIsBetter,
}

impl Direction {
    /// "lower is better".
    pub fn words(self) -> &'static str {
        match self {
            Direction::LowerIsBetter => "lower is better",
            Direction::HigherIsBetter => "higher is better",
        }
    }

    /// Whether going from `from` to `to` is an improvement (None when
    /// equal or not finite).
    pub fn improved(self, from: f64, to: f64) -> Option<bool> {
        if !from.is_finite() || !to.is_finite() || from == to {
            return None;
        }
        Some(match self {
            Direction::LowerIsBetter => to < from,
            Direction::HigherIsBetter => to > from,
        })
    }
}

/// Number of per-process metrics (every metric but makespan).
pub const PER_PROCESS: usize = 10;

impl Metric {
    pub const ALL: [Metric; 11] = [
        Metric::Wall,
        Metric::Utime,
        Metric::Stime,
        Metric::CpuPct,
        Metric::Nvcsw,
        Metric::Nivcsw,
        Metric::Wait,
        Metric::Run,
        Metric::Timeslices,
        Metric::Work,
        Metric::Makespan,
    ];

    /// The name used on the command line and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Metric::Wall => "wall",
            Metric::Utime => "utime",
            Metric::Stime => "stime",
            Metric::CpuPct => "cpu_pct",
            Metric::Nvcsw => "nvcsw",
            Metric::Nivcsw => "nivcsw",
            Metric::Wait => "wait",
            Metric::Run => "run",
            Metric::Timeslices => "timeslices",
            Metric::Work => "work",
            Metric::Makespan => "makespan",
            Metric::LatencyP50 => "latency_p50",
            Metric::LatencyP99 => "latency_p99",
        }
    }

    /// What the metric is, with its unit: for help texts (`--metric`).
    pub fn description(self) -> &'static str {
        match self {
            Metric::Wall => "Wall time of a process, s",
            Metric::Utime => "User CPU time, s",
            Metric::Stime => "System CPU time, s",
            Metric::CpuPct => "(user + system CPU) / wall time, %",
            Metric::Nvcsw => "Voluntary context switches",
            Metric::Nivcsw => "Involuntary context switches (preemptions)",
            Metric::Wait => "Run-queue wait (schedstat), ms",
            Metric::Run => "On-CPU time (schedstat), s",
            Metric::Timeslices => "Time slices (schedstat)",
            Metric::Work => "Work done, in the workload's unit",
            Metric::Makespan => "Run makespan: barrier release to the last worker's end, s",
            Metric::LatencyP50 => "Median latency of a run (its primary latency histogram), µs",
            Metric::LatencyP99 => "99th-percentile latency of a run, µs",
        }
    }

    /// Words for sentences and titles.
    pub fn label(self) -> &'static str {
        match self {
            Metric::Wall => "wall time",
            Metric::Utime => "user CPU time",
            Metric::Stime => "system CPU time",
            Metric::CpuPct => "CPU %",
            Metric::Nvcsw => "voluntary context switches",
            Metric::Nivcsw => "involuntary context switches",
            Metric::Wait => "run-queue wait",
            Metric::Run => "on-CPU time",
            Metric::Timeslices => "time slices",
            Metric::Work => "work done",
            Metric::Makespan => "makespan",
            Metric::LatencyP50 => "per-run p50 latency",
            Metric::LatencyP99 => "per-run p99 latency",
        }
    }

    /// Unit of the values ("" for counts; work's unit depends on the
    /// workload and is given separately).
    pub fn unit(self) -> &'static str {
        match self {
            Metric::Wall | Metric::Utime | Metric::Stime | Metric::Run | Metric::Makespan => "s",
            Metric::CpuPct => "%",
            Metric::Wait => "ms",
            Metric::LatencyP50 | Metric::LatencyP99 => "µs",
            Metric::Nvcsw | Metric::Nivcsw | Metric::Timeslices | Metric::Work => "",
        }
    }

    /// Which way the metric improves. Times (wall, CPU, on-CPU, makespan),
    /// run-queue wait and the counts of switches and slices (each one a
    /// scheduling event that costs the process time) are better lower; work
    /// done (in a fixed duration: a throughput) and CPU % (the share of its
    /// lifetime a process spent running rather than waiting) are better
    /// higher.
    pub fn direction(self) -> Direction {
        match self {
            Metric::Wall
            | Metric::Utime
            | Metric::Stime
            | Metric::Nvcsw
            | Metric::Nivcsw
            | Metric::Wait
            | Metric::Run
            | Metric::Timeslices
            | Metric::Makespan
            | Metric::LatencyP50
            | Metric::LatencyP99 => Direction::LowerIsBetter,
            Metric::CpuPct | Metric::Work => Direction::HigherIsBetter,
        }
    }

    /// Whether the label is a plural noun ("context switches are").
    pub fn plural(self) -> bool {
        matches!(self, Metric::Nvcsw | Metric::Nivcsw | Metric::Timeslices)
    }

    /// Whether the metric is measured per process (all but makespan and
    /// the latency percentiles).
    pub fn per_process(self) -> bool {
        self.process_slot().is_some()
    }

    /// Index among the per-process metrics (`None` for the run's own).
    pub fn process_slot(self) -> Option<usize> {
        match self {
            Metric::Makespan | Metric::LatencyP50 | Metric::LatencyP99 => None,
            m => Some(m as usize),
        }
    }

    /// The latency percentiles `compare` adds for campaigns that store
    /// latency histograms (not in [`Metric::ALL`], which a report analyses).
    pub const LATENCY: [Metric; 2] = [Metric::LatencyP50, Metric::LatencyP99];

    /// The comma-separated list of names, for messages.
    pub fn names() -> String {
        Metric::ALL.map(|m| m.name()).join(", ")
    }

    pub fn parse(s: &str) -> Option<Metric> {
        Metric::ALL.into_iter().find(|m| m.name() == s.trim())
    }
}

/// The primary metric of a workload: the one figure of a run that
/// `repetitions = "auto"` makes precise. Work stopped by an amount
/// (iterations, bytes, round trips, a command that runs to its end): the
/// run's makespan, release to the last worker's end (s, lower is better).
/// Work stopped by a duration: the work done, the mean over the run's
/// workers (higher is better), since the makespan is then the duration.
pub fn primary(w: &crate::workload::Workload) -> Metric {
    match w.stop() {
        crate::workload::Stop::DurationNs(_) => Metric::Work,
        crate::workload::Stop::Work(_) => Metric::Makespan,
    }
}

/// The per-process metric values of a process row, indexed by
/// [`Metric::process_slot`]; NaN where the row has no value (schedstat
/// missing, zero wall time for CPU %).
pub fn process_values(p: &ReportProcess) -> [f64; PER_PROCESS] {
    let opt = |v: Option<i64>, scale: f64| v.map_or(f64::NAN, |x| x as f64 * scale);
    let wall_s = p.wall_ns as f64 / 1e9;
    let cpu_s = (p.usage.utime_us + p.usage.stime_us) as f64 / 1e6;
    [
        wall_s,
        p.usage.utime_us as f64 / 1e6,
        p.usage.stime_us as f64 / 1e6,
        if p.wall_ns > 0 {
            100.0 * cpu_s / wall_s
        } else {
            f64::NAN
        },
        p.usage.nvcsw as f64,
        p.usage.nivcsw as f64,
        opt(p.wait_ns, 1e-6),
        opt(p.run_ns, 1e-9),
        opt(p.timeslices, 1.0),
        opt(p.work, 1.0),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_follow_the_enum_order() {
        for (i, m) in Metric::ALL.iter().enumerate().take(PER_PROCESS) {
            assert_eq!(m.process_slot(), Some(i));
            assert!(m.per_process());
        }
        assert_eq!(Metric::Makespan.process_slot(), None);
        for m in Metric::LATENCY {
            assert_eq!(m.process_slot(), None);
            assert!(!Metric::ALL.contains(&m), "a report never analyses {m:?}");
            assert_eq!(m.direction(), Direction::LowerIsBetter);
            assert_eq!(m.unit(), "µs");
            assert_eq!(serde_json::to_value(m).unwrap(), m.name());
        }
        assert_eq!(Metric::parse("cpu_pct"), Some(Metric::CpuPct));
        assert_eq!(Metric::parse("bogus"), None);
        assert!(Metric::names().starts_with("wall, utime"));
    }

    #[test]
    fn times_and_counts_are_better_lower_rates_higher() {
        use Direction::*;
        let want = [
            ("wall", LowerIsBetter),
            ("utime", LowerIsBetter),
            ("stime", LowerIsBetter),
            ("cpu_pct", HigherIsBetter),
            ("nvcsw", LowerIsBetter),
            ("nivcsw", LowerIsBetter),
            ("wait", LowerIsBetter),
            ("run", LowerIsBetter),
            ("timeslices", LowerIsBetter),
            ("work", HigherIsBetter),
            ("makespan", LowerIsBetter),
        ];
        assert_eq!(
            want.len(),
            Metric::ALL.len(),
            "every metric has a direction here"
        );
        for (name, d) in want {
            assert_eq!(Metric::parse(name).unwrap().direction(), d, "{name}");
        }
        assert_eq!(Metric::Wall.direction().improved(2.0, 1.0), Some(true));
        assert_eq!(Metric::Wall.direction().improved(1.0, 2.0), Some(false));
        assert_eq!(Metric::Work.direction().improved(1.0, 2.0), Some(true));
        assert_eq!(Metric::Work.direction().improved(2.0, 1.0), Some(false));
        assert_eq!(Metric::Work.direction().improved(2.0, 2.0), None);
        assert_eq!(Metric::Wall.direction().improved(f64::NAN, 2.0), None);
        assert_eq!(
            serde_json::to_value(Direction::LowerIsBetter).unwrap(),
            "lower_is_better"
        );
    }

    #[test]
    fn the_primary_metric_is_makespan_for_an_amount_and_work_for_a_duration() {
        let load = |t: &str| {
            crate::spec::load(t, "t.toml", &[]).unwrap().workloads[0]
                .workload
                .clone()
        };
        let amount = load("[matrix]\nworkload = [\"pi\"]\n[workloads.pi]\niterations = 1000\n");
        let timed = load("[matrix]\nworkload = [\"pi\"]\n[workloads.pi]\nduration_s = 1\n");
        assert_eq!(primary(&amount), Metric::Makespan);
        assert_eq!(primary(&timed), Metric::Work);
    }

    #[test]
    fn values_of_a_process() {
        let p = ReportProcess {
            run_id: 1,
            process_index: 0,
            nice: Some(0),
            rt_priority: None,
            wall_ns: 2_000_000_000,
            usage: crate::store::ReportUsage {
                utime_us: 1_500_000,
                stime_us: 500_000,
                nvcsw: 3,
                nivcsw: 40,
            },
            run_ns: Some(2_000_000_000),
            wait_ns: Some(5_000_000),
            timeslices: None,
            work: Some(1000),
            end_ns: Some(2_000_000_000),
        };
        let v = process_values(&p);
        assert_eq!(v[0], 2.0);
        assert_eq!(v[3], 100.0);
        assert_eq!(v[6], 5.0);
        assert!(v[8].is_nan());
        assert_eq!(v[9], 1000.0);
    }
}
