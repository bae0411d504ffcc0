//! Expand a spec into the runs of a campaign: the cartesian product of its
//! factors (less the combinations `[[matrix.exclude]]` names) ×
//! repetitions, in a seeded shuffled (or sequential) order, each with a
//! stable key so a campaign can resume where it stopped.

use serde::{Deserialize, Serialize};

use crate::policy::{Policy, PriorityMode};
use crate::rng::SplitMix64;
use crate::spec::machines::MachineLevel;
use crate::spec::{Cpus, ExtScheduler, NamedWorkload, Order, Spec};
use crate::workload::{Rates, Stop};

/// One run: one combination of factors, one repetition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Run {
    /// Stable identity within a campaign, independent of order.
    pub key: String,
    /// Position in the campaign's order (0-based).
    pub seq: usize,
    pub policy: Policy,
    /// The workload with the spec's scale already applied.
    pub workload: NamedWorkload,
    pub processes: u32,
    pub priorities: PriorityMode,
    pub cpus: Cpus,
    /// Repetition number, 1-based.
    pub rep: u32,
    /// `sched_rt_runtime_us` in force during the run, when the spec sweeps it.
    pub rt_runtime_us: Option<i64>,
    /// The EEVDF slice asked for the workers (`sched_attr.sched_runtime`
    /// of OTHER and BATCH), in µs, when the spec sweeps it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slice_us: Option<u32>,
    /// The sched_ext scheduler level of the run, when the spec sweeps it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ext_scheduler: Option<ExtScheduler>,
    /// The machine level of the run (`matrix.machine`), when the spec
    /// sweeps it; None: this machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<MachineLevel>,
}

impl Run {
    /// A short description for progress lines.
    pub fn label(&self) -> String {
        let mut rt = match self.rt_runtime_us {
            Some(v) => format!(" rt_runtime={v}µs"),
            None => String::new(),
        };
        if let Some(s) = self.slice_us {
            rt.push_str(&format!(" slice={s}µs"));
        }
        if let Some(x) = &self.ext_scheduler {
            rt.push_str(&format!(" ext={}", x.name));
        }
        if let Some(m) = &self.machine {
            rt.push_str(&format!(" machine={}", m.name));
        }
        format!(
            "{} {} ×{} {} cpus={}{rt} rep {}",
            self.policy.name(),
            self.workload.name,
            self.processes,
            self.priorities.name,
            self.cpus.label(),
            self.rep
        )
    }
}

impl Run {
    /// The condition of a run: its key without the repetition.
    pub fn condition_key(&self) -> &str {
        condition_of_key(&self.key)
    }

    /// The key of a run: its factor levels, joined (the `key` field holds
    /// it once computed).
    pub fn factor_key(&self) -> String {
        let mut rt = self
            .rt_runtime_us
            .map(|v| format!(";rt_runtime_us={v}"))
            .unwrap_or_default();
        if let Some(s) = self.slice_us {
            rt.push_str(&format!(";slice_us={s}"));
        }
        if let Some(x) = &self.ext_scheduler {
            rt.push_str(&format!(";ext_scheduler={}", x.name));
        }
        if let Some(m) = &self.machine {
            rt.push_str(&format!(";machine={}", m.name));
        }
        format!(
            "policy={};workload={};processes={};priorities={};cpus={}{rt};rep={}",
            self.policy.name(),
            self.workload.name,
            self.processes,
            self.priorities.name,
            self.cpus.label(),
            self.rep
        )
    }
}

/// The condition part of a run key (everything before `;rep=`).
pub fn condition_of_key(key: &str) -> &str {
    key.rsplit_once(";rep=").map_or(key, |(c, _)| c)
}

/// Every run of the spec, in campaign order. `seed` is used when the order is
/// shuffled. With `repetitions = "auto"` the runs go in rounds (all of
/// repetition 1, shuffled, then all of 2, …) up to `max_repetitions`; the
/// campaign skips the rounds a condition no longer needs.
pub fn expand(spec: &Spec, seed: u64) -> Vec<Run> {
    Plan::of(spec).in_order(seed)
}

/// A spec's runs, expanded once: every combination of its factors ×
/// repetitions in the spec's own (sequential) order, each with its key. A
/// campaign expands its spec into one plan, checks it against the machine
/// and then draws its order from it with the campaign's seed
/// ([`Plan::in_order`]): the seed is only known once the campaign is found
/// or created, which the checks come before.
#[derive(Debug, Clone)]
pub struct Plan {
    runs: Vec<Run>,
    order: Order,
    /// Runs per round when the campaign goes in rounds
    /// (`repetitions = "auto"`).
    round: Option<usize>,
    /// The machine levels' names in the matrix's order (empty when not
    /// swept).
    machines: Vec<String>,
}

#[cfg(test)]
thread_local! {
    /// Plans made on this thread (tests count the expansions of a campaign).
    pub static PLANS_MADE: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

impl Plan {
    /// Expand `spec`.
    pub fn of(spec: &Spec) -> Plan {
        #[cfg(test)]
        PLANS_MADE.with(|n| n.set(n.get() + 1));
        let mut runs = matrix(spec);
        for r in &mut runs {
            r.key = r.factor_key();
        }
        runs.retain(|r| !spec.exclude.iter().any(|e| e.matches(&r.key)));
        for (i, r) in runs.iter_mut().enumerate() {
            r.seq = i;
        }
        Plan {
            round: spec
                .auto_repetitions
                .map(|_| (runs.len() / spec.repetitions.max(1) as usize).max(1)),
            runs,
            order: spec.order,
            machines: spec.machines.iter().map(|m| m.name.clone()).collect(),
        }
    }

    /// The runs in the spec's own order (keys set; `seq` their position in
    /// that order, not the campaign's).
    pub fn runs(&self) -> &[Run] {
        &self.runs
    }

    /// The runs in campaign order: shuffled with `seed` when the spec says
    /// so (with `repetitions = "auto"` each round on its own, so that drift
    /// hits every condition alike and a condition can stop after any
    /// round), numbered in that order.
    pub fn in_order(self, seed: u64) -> Vec<Run> {
        let mut runs = self.runs;
        if self.order == Order::Shuffled {
            let mut rng = SplitMix64::new(seed);
            match self.round {
                None => rng.shuffle(&mut runs),
                Some(round) => {
                    for chunk in runs.chunks_mut(round) {
                        rng.shuffle(chunk);
                    }
                }
            }
        }
        // A guest boots once for all the runs of its level: the levels
        // go one after another, in the matrix's order, each in its own
        // shuffled (or sequential) order.
        if !self.machines.is_empty() {
            let levels = &self.machines;
            runs.sort_by_cached_key(|r| {
                r.machine
                    .as_ref()
                    .and_then(|m| levels.iter().position(|l| l == &m.name))
            });
        }
        for (i, r) in runs.iter_mut().enumerate() {
            r.seq = i;
        }
        runs
    }
}

/// Every combination of the spec's factors × repetitions, in the spec's
/// order (keys and positions not set).
fn matrix(spec: &Spec) -> Vec<Run> {
    let rt_levels: Vec<Option<i64>> = if spec.rt_runtime_us.is_empty() {
        vec![None]
    } else {
        spec.rt_runtime_us.iter().map(|&v| Some(v)).collect()
    };
    let slice_levels: Vec<Option<u32>> = if spec.slice_us.is_empty() {
        vec![None]
    } else {
        spec.slice_us.iter().map(|&v| Some(v)).collect()
    };
    let ext_levels: Vec<Option<&ExtScheduler>> = if spec.ext_schedulers.is_empty() {
        vec![None]
    } else {
        spec.ext_schedulers.iter().map(Some).collect()
    };
    let mut runs = Vec::new();
    for rep in 1..=spec.repetitions {
        for &policy in &spec.policies {
            for w in &spec.workloads {
                let workload = NamedWorkload {
                    name: w.name.clone(),
                    workload: if spec.scale == 1.0 {
                        w.workload.clone()
                    } else {
                        w.workload.scaled(spec.scale)
                    },
                };
                for &processes in &spec.processes {
                    for priorities in &spec.priorities {
                        for cpus in &spec.cpus {
                            for &rt in &rt_levels {
                                for &slice in &slice_levels {
                                    for &ext in &ext_levels {
                                        runs.push(Run {
                                            key: String::new(),
                                            seq: 0,
                                            policy,
                                            workload: workload.clone(),
                                            processes,
                                            priorities: priorities.clone(),
                                            cpus: cpus.clone(),
                                            rep,
                                            rt_runtime_us: rt,
                                            slice_us: slice,
                                            ext_scheduler: ext.cloned(),
                                            machine: None,
                                        });
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    match spec.machines.is_empty() {
        true => runs,
        false => runs
            .into_iter()
            .flat_map(|r| {
                spec.machines.iter().map(move |m| Run {
                    machine: Some(m.clone()),
                    ..r.clone()
                })
            })
            .collect(),
    }
}

/// What a spec's command workloads need installed: the programs they run
/// (`argv` and `setup`, by name or path) and the Debian packages of those
/// that are standard tools, each sorted and once.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Needs {
    pub programs: Vec<String>,
    pub packages: Vec<String>,
}

/// See [`Needs`]. Reads the spec only: nothing of this machine is checked,
/// so it answers before the programs are installed.
pub fn needs(spec: &Spec) -> Needs {
    let programs: std::collections::BTreeSet<&str> = spec
        .workloads
        .iter()
        .filter_map(|w| w.workload.command())
        .flat_map(|c| c.programs())
        .collect();
    let packages: std::collections::BTreeSet<&str> = programs
        .iter()
        .filter_map(|p| {
            // A path names its program by its last component.
            let name = p.rsplit('/').next().unwrap_or(p);
            crate::workload::command::params::debian_package(name)
        })
        .collect();
    Needs {
        programs: programs.into_iter().map(String::from).collect(),
        packages: packages.into_iter().map(String::from).collect(),
    }
}

/// Estimated wall time of one run in seconds: each process's CPU time,
/// times the processes sharing each CPU, and never less than one process
/// takes alone (a periodic task's periods).
pub fn estimate_run_s(run: &Run, cpus_available: usize, rates: &Rates) -> f64 {
    let cpus = match &run.cpus {
        Cpus::All => cpus_available,
        Cpus::List(l) => l.len(),
    }
    .max(1);
    let per_process = run.workload.workload.estimate_cpu_s(rates);
    let waves = (run.processes as f64 / cpus as f64).max(1.0);
    let cpu_s = match run.workload.workload.stop() {
        // A fixed duration does not stretch with more processes.
        Stop::DurationNs(ns) => ns as f64 / 1e9,
        Stop::Work(_) => per_process * waves,
    };
    cpu_s.max(run.workload.workload.min_wall_s())
}

/// Model events per second of simulated time measured for `simulate` on
/// this workplace (50 periodic tasks at 50 µs: about 2 million events in
/// a simulated second), for the cost warning; a rough figure.
pub const MODEL_EVENTS_PER_S: f64 = 2.0e6;

/// What simulating one run costs the model, roughly: events (a switch, a
/// wake-up, a timer, a tick) and bytes of memory at its peak (the tasks,
/// and the timeline, whose kept part is bounded by
/// [`crate::sim::engine::TIMELINE_MAX`]).
pub fn model_cost(run: &Run, cpus_available: usize, rates: &Rates, hz: u32) -> (f64, f64) {
    let cpus = match &run.cpus {
        Cpus::All => cpus_available,
        Cpus::List(l) => l.len(),
    }
    .max(1) as f64;
    let wall_s = estimate_run_s(run, cpus_available, rates);
    let processes = f64::from(run.processes);
    let mut events = wall_s * f64::from(hz.max(100)) * cpus + 4.0 * processes;
    if let crate::workload::Workload::Periodic(p) = &run.workload.workload {
        // A wake-up, a switch in and a switch out per activation.
        events += 3.0 * processes * wall_s * 1e6 / p.period_us.max(1) as f64;
    }
    let kept = events.min(2.0 * crate::sim::engine::TIMELINE_MAX as f64);
    let bytes = processes * 4096.0 + kept * 120.0;
    (events, bytes)
}

/// A warning when simulating `runs` (`schedlab simulate`) would take long:
/// its events, time and memory. None under a minute.
pub fn model_cost_warning(
    runs: &[&Run],
    cpus_available: usize,
    rates: &Rates,
    hz: u32,
) -> Option<String> {
    let costs: Vec<(f64, f64)> = runs
        .iter()
        .map(|r| model_cost(r, cpus_available, rates, hz))
        .collect();
    let events: f64 = costs.iter().map(|c| c.0).sum();
    let peak_bytes = costs.iter().map(|c| c.1).fold(0.0, f64::max);
    let seconds = events / MODEL_EVENTS_PER_S;
    (seconds >= 60.0).then(|| {
        format!(
            "simulating these runs (schedlab simulate) costs the model about {:.3e} events: about {} of \
             CPU, and up to {} of memory for the largest run",
            events,
            crate::units::human_duration(seconds),
            crate::units::human_bytes(peak_bytes as u64)
        )
    })
}

/// Estimated seconds of each run, with what surrounds it: the cool-down
/// after it and, with an RT hog, the hog's warm-up of one RT period.
pub fn estimates(
    spec: &Spec,
    runs: &[&Run],
    cpus_available: usize,
    rates: &Rates,
    rt_period_us: i64,
) -> Vec<f64> {
    let warm_up = match &spec.hog {
        Some(h) if h.is_rt() => rt_period_us.max(0) as f64 / 1e6,
        _ => 0.0,
    };
    let around = spec.cooldown_ns as f64 / 1e9 + warm_up;
    runs.iter()
        .map(|r| estimate_run_s(r, cpus_available, rates) + around)
        .collect()
}

/// The time slices that decide whether policies can differ: RR's
/// (`sched_rr_timeslice_ms`) and the fair class's base slice.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Slices {
    pub rr_ns: Option<u64>,
    pub fair_ns: u64,
}

/// Conditions whose work per process (estimated from the calibration) is
/// shorter than one slice of their policy: each process then finishes
/// within its first turn, and the policies cannot differ. One warning per
/// policy and workload, for the smallest such work.
pub fn short_work_warnings(runs: &[&Run], rates: &Rates, slices: Slices) -> Vec<String> {
    let mut seen: Vec<(Policy, String)> = Vec::new();
    let mut out = Vec::new();
    for r in runs {
        let key = (r.policy, r.workload.name.clone());
        if seen.contains(&key) || !r.workload.workload.cpu_bound() {
            continue;
        }
        let (slice_ns, what, consequence) = match r.policy {
            Policy::Rr => match slices.rr_ns {
                Some(ns) => (
                    ns,
                    "RR's time slice (sched_rr_timeslice_ms)",
                    "RR cannot differ from FIFO",
                ),
                None => continue,
            },
            Policy::Other | Policy::Batch | Policy::Idle => (
                slices.fair_ns,
                "the fair class's base slice",
                "the fair class never interleaves the processes",
            ),
            _ => continue,
        };
        let work_ns = r.workload.workload.estimate_cpu_s(rates) * 1e9;
        if work_ns < slice_ns as f64 {
            seen.push(key);
            out.push(format!(
                "{} under {}: each process needs about {} of CPU, less than {what} of {}: it finishes within its \
                 first turn, so {consequence} here; give it more work (a larger --scale)",
                r.workload.name,
                r.policy.name().to_uppercase(),
                short_time(work_ns),
                short_time(slice_ns as f64),
            ));
        }
    }
    out
}

/// "0.75 ms", "100 ms", "2.4 s": a time given in nanoseconds, for warnings.
fn short_time(ns: f64) -> String {
    let ms = ns / 1e6;
    if ms < 0.1 {
        format!("{:.0} µs", ns / 1e3)
    } else if ms < 10.0 {
        format!("{ms:.2} ms")
    } else if ms < 1000.0 {
        format!("{ms:.0} ms")
    } else {
        format!("{:.1} s", ms / 1000.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::Workload;

    fn spec(extra: &str) -> Spec {
        let text = format!(
            "name = \"t\"\nrepetitions = 2\n{extra}\n[matrix]\npolicy = [\"other\", \"fifo\"]\nworkload = [\"pi\", \"copy\"]\nprocesses = [1, 3]\n"
        );
        crate::spec::load(&text, "t.toml", &[]).unwrap()
    }

    #[test]
    fn expands_the_cartesian_product_times_repetitions() {
        let runs = expand(&spec(""), 1);
        assert_eq!(runs.len(), 2 * 2 * 2 * 2);
        let mut keys: Vec<_> = runs.iter().map(|r| r.key.clone()).collect();
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), runs.len(), "keys are unique");
        assert!(runs.iter().enumerate().all(|(i, r)| r.seq == i));
    }

    #[test]
    fn shuffle_is_deterministic_for_a_seed_and_sequential_is_not_shuffled() {
        let s = spec("");
        let a: Vec<_> = expand(&s, 42).into_iter().map(|r| r.key).collect();
        let b: Vec<_> = expand(&s, 42).into_iter().map(|r| r.key).collect();
        let c: Vec<_> = expand(&s, 43).into_iter().map(|r| r.key).collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
        let seq = spec("order = \"sequential\"");
        let keys: Vec<_> = expand(&seq, 42).into_iter().map(|r| r.key).collect();
        assert_eq!(
            keys[0],
            "policy=other;workload=pi;processes=1;priorities=uniform;cpus=all;rep=1"
        );
        assert_eq!(
            keys[1],
            "policy=other;workload=pi;processes=3;priorities=uniform;cpus=all;rep=1"
        );
    }

    /// With `repetitions = "auto"` the runs go in rounds up to the most
    /// repetitions, each round shuffled; a numeric count is shuffled whole.
    #[test]
    fn auto_repetitions_run_in_shuffled_rounds() {
        let s = spec("");
        let auto = crate::spec::load(
            "name = \"t\"\nrepetitions = \"auto\"\ntarget_ci_pct = 5\nmin_repetitions = 2\n\
             max_repetitions = 4\n[matrix]\npolicy = [\"other\", \"fifo\"]\nworkload = [\"pi\", \"copy\"]\n\
             processes = [1, 3]\n",
            "t.toml",
            &[],
        )
        .unwrap();
        let runs = expand(&auto, 42);
        assert_eq!(runs.len(), 8 * 4);
        let reps: Vec<u32> = runs.iter().map(|r| r.rep).collect();
        assert!(reps.windows(2).all(|w| w[0] <= w[1]), "{reps:?}");
        let first: Vec<&str> = runs[..8].iter().map(|r| r.key.as_str()).collect();
        let sequential = expand(&crate::spec::load("name = \"t\"\nrepetitions = 1\norder = \"sequential\"\n[matrix]\npolicy = [\"other\", \"fifo\"]\nworkload = [\"pi\", \"copy\"]\nprocesses = [1, 3]\n", "t.toml", &[]).unwrap(), 0);
        let in_order: Vec<&str> = sequential.iter().map(|r| r.key.as_str()).collect();
        assert_ne!(first, in_order, "a round is shuffled");
        let whole: Vec<u32> = expand(&s, 42).iter().map(|r| r.rep).collect();
        assert!(
            whole.windows(2).any(|w| w[0] > w[1]),
            "numeric: shuffled whole"
        );
    }

    /// A swept sched_ext scheduler is a factor: in the key and the label
    /// of each run, once per level.
    #[test]
    fn ext_scheduler_is_a_factor() {
        let text = "name = \"t\"\nrepetitions = 1\norder = \"sequential\"\n[matrix]\npolicy = [\"other\"]\n\
                    workload = [\"pi\"]\next_scheduler = [\"none\", \"scx_simple\"]\n";
        let runs = expand(&crate::spec::load(text, "t.toml", &[]).unwrap(), 1);
        let keys: Vec<&str> = runs.iter().map(|r| r.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "policy=other;workload=pi;processes=1;priorities=uniform;cpus=all;ext_scheduler=none;rep=1",
                "policy=other;workload=pi;processes=1;priorities=uniform;cpus=all;ext_scheduler=scx_simple;rep=1",
            ]
        );
        assert!(
            runs[1].label().contains(" ext=scx_simple "),
            "{}",
            runs[1].label()
        );
    }

    #[test]
    fn scale_shrinks_the_work_of_every_run() {
        let s = spec("scale = 0.01");
        for r in expand(&s, 1) {
            match &r.workload.workload {
                Workload::Pi(p) => assert_eq!(p.stop, Stop::Work(1_000_000)),
                Workload::Copy(p) => assert_eq!(p.stop, Stop::Work(10_240)),
                _ => unreachable!(),
            }
        }
    }

    #[test]
    fn estimate_counts_processes_per_cpu() {
        let rates = Rates {
            pi_iter_per_s: 1e8,
            hash_per_s: 1e5,
            flops_per_s: 1e9,
            copy_bytes_per_s: 1e9,
            wake_round_trip_s: 10e-6,
        };
        let s = spec("");
        let run = expand(&s, 1)
            .into_iter()
            .find(|r| r.processes == 3 && r.workload.name == "pi")
            .unwrap();
        // 1e8 iterations at 1e8/s = 1 s per process; 3 processes on 2 CPUs.
        assert!((estimate_run_s(&run, 2, &rates) - 1.5).abs() < 1e-9);
        assert!((estimate_run_s(&run, 4, &rates) - 1.0).abs() < 1e-9);
    }

    fn pi_runs(iterations: u64) -> Vec<Run> {
        let text = format!(
            "[matrix]\npolicy = [\"other\", \"fifo\", \"rr\"]\nprocesses = [2]\n[workloads.pi]\niterations = {iterations}\n"
        );
        expand(&crate::spec::load(&text, "t", &[]).unwrap(), 1)
    }

    const RATES: Rates = Rates {
        pi_iter_per_s: 1e9,
        hash_per_s: 1e5,
        flops_per_s: 1e9,
        copy_bytes_per_s: 1e9,
        wake_round_trip_s: 10e-6,
    };

    #[test]
    fn work_shorter_than_a_slice_is_named_per_policy() {
        let slices = Slices {
            rr_ns: Some(100_000_000),
            fair_ns: 1_500_000,
        };
        // 1 ms per process: shorter than both RR's 100 ms and fair's 1.5 ms.
        let runs = pi_runs(1_000_000);
        let refs: Vec<&Run> = runs.iter().collect();
        let w = short_work_warnings(&refs, &RATES, slices);
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(
            w.iter()
                .any(|m| m.contains("RR") && m.contains("100 ms") && m.contains("1.00 ms"))
        );
        assert!(
            w.iter()
                .any(|m| m.contains("OTHER") && m.contains("1.50 ms"))
        );
        // 50 ms: only RR's slice is longer.
        let runs = pi_runs(50_000_000);
        let refs: Vec<&Run> = runs.iter().collect();
        let w = short_work_warnings(&refs, &RATES, slices);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("RR cannot differ from FIFO"));
        // 400 ms: nothing to say; FIFO has no slice at all.
        let runs = pi_runs(400_000_000);
        let refs: Vec<&Run> = runs.iter().collect();
        assert!(short_work_warnings(&refs, &RATES, slices).is_empty());
    }

    #[test]
    fn a_periodic_task_takes_its_periods_and_is_never_called_short() {
        let text = "[matrix]\npolicy = [\"other\", \"rr\"]\nprocesses = [2]\nworkload = [\"periodic\"]\n\
                    [workloads.periodic]\nperiod_us = 1000\nrun_us = 10\nactivations = 500\n";
        let runs = expand(&crate::spec::load(text, "t", &[]).unwrap(), 1);
        let refs: Vec<&Run> = runs.iter().collect();
        // 10 µs of CPU per activation, but 500 periods of 1 ms.
        let est = estimate_run_s(&runs[0], 2, &RATES);
        assert!((est - 0.5).abs() < 1e-9, "{est}");
        let slices = Slices {
            rr_ns: Some(100_000_000),
            fair_ns: 1_500_000,
        };
        assert!(short_work_warnings(&refs, &RATES, slices).is_empty());
    }
}
