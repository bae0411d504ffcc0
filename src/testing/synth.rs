//! Deterministic synthetic campaigns for the report's tests and benchmark:
//! a real spec expanded by [`crate::plan::expand`], with measurements drawn
//! from a simple scheduling model (weighted processor sharing for fair
//! policies and RR, run-to-completion for FIFO) plus seeded noise, written
//! as [`RunRecord`]s with [`Store::insert_runs`].

use anyhow::{Context, Result};

use crate::fields::Field;
use crate::plan::Run;
use crate::policy::{Class, Policy, ProcSched};
use crate::record::{ProcessRecord, ProcessUsage, RunRecord, RunStatus, Usage, rusage_fields};
use crate::rng::SplitMix64;
use crate::stats::fairness::nice_weight;
use crate::store::Store;
use crate::sys::envinfo::EnvSnapshot;

use crate::rng::fnv1a;

/// What happens to one run instead of the model's measurement.
#[derive(Debug, Clone, PartialEq)]
pub enum SpecialKind {
    Failed(String),
    TimedOut,
    Skipped(String),
    /// Every time measurement of the run multiplied by this (an outlier).
    Slow(f64),
}

/// A run singled out by its factors and repetition.
#[derive(Debug, Clone, PartialEq)]
pub struct Special {
    pub policy: String,
    pub workload: String,
    pub processes: u32,
    pub priorities: String,
    pub rep: u32,
    pub kind: SpecialKind,
}

/// A synthetic campaign.
#[derive(Debug, Clone, PartialEq)]
pub struct SynthConfig {
    pub name: String,
    pub policies: Vec<String>,
    /// Workload kinds with default parameters: "pi", "copy", "mixed".
    pub workloads: Vec<String>,
    pub processes: Vec<u32>,
    pub priorities: Vec<String>,
    /// "0" (pinned) or "all" (= `machine_cpus` CPUs).
    pub cpus: String,
    pub machine_cpus: usize,
    pub repetitions: u32,
    pub seed: u64,
    /// Relative run-to-run noise (sd of the log of a run's times).
    pub noise: f64,
    pub specials: Vec<Special>,
    pub created_unix_ms: i64,
    /// The machine the campaign was "made" on (hostname, host id); None:
    /// this machine creates the campaign, and its runs' environment has
    /// hostname "synthetic" and no host id.
    pub host: Option<(String, String)>,
}

impl SynthConfig {
    /// A small campaign: OTHER, BATCH and FIFO on pi and copy, 2 and 8
    /// processes pinned to CPU 0, uniform and spread priorities, 10 runs
    /// each; with one failed, one timed-out and three skipped runs and one
    /// very slow run.
    pub fn small() -> SynthConfig {
        let s = |p: &str, w: &str, n: u32, pr: &str, rep: u32, kind: SpecialKind| Special {
            policy: p.into(),
            workload: w.into(),
            processes: n,
            priorities: pr.into(),
            rep,
            kind,
        };
        let skip = || {
            SpecialKind::Skipped(
                "SCHED_FIFO is not permitted: needs root or CAP_SYS_NICE (or an RLIMIT_RTPRIO of at least 99)".into(),
            )
        };
        SynthConfig {
            name: "synthetic".into(),
            policies: vec!["other".into(), "batch".into(), "fifo".into()],
            workloads: vec!["pi".into(), "copy".into()],
            processes: vec![2, 8],
            priorities: vec!["uniform".into(), "spread".into()],
            cpus: "0".into(),
            machine_cpus: 2,
            repetitions: 10,
            seed: 7,
            noise: 0.03,
            specials: vec![
                s("other", "pi", 8, "uniform", 4, SpecialKind::Slow(17.6)),
                s(
                    "batch",
                    "copy",
                    2,
                    "uniform",
                    2,
                    SpecialKind::Failed(
                        "worker 1: exit code 1: No space left on device (os error 28)".into(),
                    ),
                ),
                s("fifo", "pi", 2, "uniform", 7, SpecialKind::TimedOut),
                s("fifo", "copy", 8, "spread", 1, skip()),
                s("fifo", "copy", 8, "spread", 2, skip()),
                s("fifo", "copy", 8, "spread", 3, skip()),
                s("fifo", "copy", 8, "spread", 4, skip()),
                s("fifo", "copy", 8, "spread", 5, skip()),
                s("fifo", "copy", 8, "spread", 6, skip()),
                s("fifo", "copy", 8, "spread", 7, skip()),
                s("fifo", "copy", 8, "spread", 8, skip()),
            ],
            created_unix_ms: 1_735_732_800_000,
            host: None,
        }
    }

    /// The benchmark's campaign: 5 policies × pi/copy × 50/150 processes ×
    /// uniform/spread, 250 runs each: 10,000 runs, 1,000,000 process rows.
    pub fn bench() -> SynthConfig {
        SynthConfig {
            name: "bench".into(),
            policies: ["other", "batch", "idle", "fifo", "rr"]
                .map(String::from)
                .to_vec(),
            workloads: vec!["pi".into(), "copy".into()],
            processes: vec![50, 150],
            priorities: vec!["uniform".into(), "spread".into()],
            cpus: "all".into(),
            machine_cpus: 2,
            repetitions: 250,
            seed: 11,
            noise: 0.04,
            specials: Vec::new(),
            created_unix_ms: 1_735_732_800_000,
            host: None,
        }
    }

    fn toml(&self) -> String {
        let list = |v: &[String]| {
            v.iter()
                .map(|s| format!("\"{s}\""))
                .collect::<Vec<_>>()
                .join(", ")
        };
        format!(
            "name = \"{}\"\nrepetitions = {}\nseed = {}\ncooldown_s = 0\n\n[matrix]\npolicy = [{}]\nworkload = [{}]\n\
             processes = [{}]\npriorities = [{}]\ncpus = [\"{}\"]\n\n[workloads.pi]\niterations = 10_000_000\n\n\
             [workloads.copy]\nbytes = 1_024_000\n\n[workloads.mixed]\nrounds = 4\niterations = 1_000_000\nbytes = 65_536\n",
            self.name,
            self.repetitions,
            self.seed,
            list(&self.policies),
            list(&self.workloads),
            self.processes
                .iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join(", "),
            list(&self.priorities),
            self.cpus
        )
    }
}

/// The environment of synthetic runs.
pub fn synthetic_env(cpus: usize) -> EnvSnapshot {
    EnvSnapshot {
        kernel_release: "6.1.0-synthetic".into(),
        kernel_version: "#1 SMP PREEMPT_DYNAMIC".into(),
        machine: "x86_64".into(),
        hostname: "synthetic".into(),
        host_id: None,
        cpu_model: "Synthetic CPU @ 2.0GHz".into(),
        cpus_online: cpus,
        cpus_allowed: (0..cpus).collect(),
        hz: Some(250),
        preempt_model: "voluntary (dynamic)".into(),
        sched_rt_runtime_us: Some(950_000),
        sched_rt_period_us: Some(1_000_000),
        sched_rr_timeslice_ms: Some(100),
        sched_autogroup_enabled: None,
        fair_base_slice_ns: None,
        cgroup_version: "v2".into(),
        rt_group_sched: false,
        root_cgroup_rt_runtime_us: None,
        virtualization: "kvm".into(),
        sched_ext: None,
        schedlab_version: "0.0.0-synthetic".into(),
        load_avg_1m: None,
        topology: None,
        guest: None,
    }
}

/// A synthetic record of `run`: ok, with these processes, measured in
/// `env` (the load average is the run's), without slices or extra facts.
/// Makespan and CPU utilisation follow from the processes.
pub fn synthetic_record(
    run: &Run,
    env: &EnvSnapshot,
    cpu_list: Vec<usize>,
    started_unix_ms: i64,
    load_avg_1m: Option<f64>,
    processes: Vec<ProcessRecord>,
) -> RunRecord {
    let makespan = processes.iter().map(|p| p.wall_ns).max().unwrap_or(0);
    let cpu_total: f64 = processes
        .iter()
        .map(|p| (p.usage.utime_us + p.usage.stime_us) as f64 / 1e6)
        .sum();
    let cpu_util = cpu_total / (makespan as f64 / 1e9 * cpu_list.len() as f64);
    RunRecord {
        run: run.clone(),
        status: RunStatus::Ok,
        reason: String::new(),
        makespan_ns: Some(makespan),
        cpu_util: Some(cpu_util),
        cpu_list,
        started_unix_ms,
        env: EnvSnapshot {
            load_avg_1m,
            ..env.clone()
        },
        processes,
        slices: Vec::new(),
        extra: serde_json::json!({}),
        interference: Default::default(),
    }
}

/// A synthetic worker process: exited normally, no page faults, no
/// start and end times.
pub fn synthetic_process(
    index: u32,
    sched: ProcSched,
    wall_ns: u64,
    utime_us: u64,
) -> ProcessRecord {
    let usage = Usage {
        utime_us,
        ..Usage::default()
    };
    ProcessRecord {
        index,
        role: "worker".into(),
        pid: 10_000 + index as i32,
        sched,
        start_ns: None,
        end_ns: None,
        wall_ns,
        usage: usage.into(),
        kernel: rusage_fields(Default::default(), &usage),
        work: None,
        work_unit: String::new(),
        slice_ns: None,
        latency: Default::default(),
        figures: Default::default(),
        exit: "exit code 0".into(),
        ok: true,
        stderr_tail: String::new(),
    }
}

/// Finish times of jobs of `demand` CPU-seconds each under weighted
/// processor sharing on `cpus` CPUs (no job faster than one CPU).
fn gps_finish(weights: &[f64], demand: f64, cpus: usize) -> Vec<f64> {
    let n = weights.len();
    let mut left = vec![demand; n];
    let mut done = vec![f64::NAN; n];
    let mut active: Vec<usize> = (0..n).collect();
    let mut now = 0.0;
    while !active.is_empty() {
        // Water-filling: shares proportional to weight, capped at 1 CPU.
        let mut rate = vec![0.0; n];
        let mut free: Vec<usize> = active.clone();
        let mut capacity = cpus as f64;
        loop {
            let total: f64 = free.iter().map(|&i| weights[i]).sum();
            let capped: Vec<usize> = free
                .iter()
                .copied()
                .filter(|&i| capacity * weights[i] / total >= 1.0)
                .collect();
            if capped.is_empty() {
                for &i in &free {
                    rate[i] = capacity * weights[i] / total;
                }
                break;
            }
            for &i in &capped {
                rate[i] = 1.0;
                capacity -= 1.0;
            }
            free.retain(|i| !capped.contains(i));
            if free.is_empty() || capacity <= 0.0 {
                break;
            }
        }
        let dt = active
            .iter()
            .map(|&i| left[i] / rate[i])
            .fold(f64::INFINITY, f64::min);
        now += dt;
        for &i in &active {
            left[i] -= rate[i] * dt;
        }
        active.retain(|&i| {
            if left[i] <= demand * 1e-9 {
                done[i] = now;
                false
            } else {
                true
            }
        });
    }
    done
}

/// Finish times of jobs run to completion in priority order on `cpus` CPUs.
fn fifo_finish(priorities: &[i32], demand: f64, cpus: usize) -> Vec<f64> {
    let mut order: Vec<usize> = (0..priorities.len()).collect();
    order.sort_by_key(|&i| (-priorities[i], i));
    let mut free_at = vec![0.0_f64; cpus.max(1)];
    let mut done = vec![0.0_f64; priorities.len()];
    for i in order {
        let (k, t) = free_at
            .iter()
            .copied()
            .enumerate()
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .expect("a CPU");
        done[i] = t + demand;
        free_at[k] = t + demand;
    }
    done
}

/// A standard normal draw.
fn normal(rng: &mut SplitMix64) -> f64 {
    let u1 = 1.0 - rng.next_f64();
    let u2 = rng.next_f64();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

/// The model's measurement of one run.
fn measure(cfg: &SynthConfig, run: &Run, env: &EnvSnapshot, cpus: usize) -> RunRecord {
    let policy = run.policy.name();
    let kind = run.workload.workload.kind();
    let n = run.processes as usize;
    let class = run.policy.class();
    let prio: Vec<Option<i32>> = (0..n)
        .map(|i| run.priorities.assignment.value(class, i, n))
        .collect();
    // CPU demand per process (s) and its user fraction; I/O wait (s).
    let (demand, user, io, csw) = match kind {
        "pi" => (0.40, 0.995, 0.0, 2.0),
        "copy" => (0.08, 0.12, 0.06, 250.0),
        _ => (0.25, 0.70, 0.03, 80.0),
    };
    // What the policy does to I/O-bound work (the effect the report should find).
    let io_factor = match (kind, policy) {
        ("pi", _) => 1.0,
        (_, "other") => 0.62,
        (_, "batch") => 0.66,
        (_, "idle") => 1.4,
        _ => 1.0,
    };
    let finish = match class {
        Class::Realtime if run.policy == Policy::Fifo => {
            let p: Vec<i32> = prio.iter().map(|p| p.unwrap_or(50)).collect();
            fifo_finish(&p, demand, cpus)
        }
        _ => {
            let w: Vec<f64> = prio
                .iter()
                .map(|p| match (class, p) {
                    (Class::Fair, Some(nice)) if run.policy != Policy::Idle => {
                        f64::from(nice_weight((*nice).clamp(-20, 19)).unwrap_or(1024))
                    }
                    (Class::Fair, _) => 3.0,
                    _ => 1024.0,
                })
                .collect();
            gps_finish(&w, demand, cpus)
        }
    };
    let mut rng = SplitMix64::new(cfg.seed ^ fnv1a(&run.key));
    let run_noise = (cfg.noise * normal(&mut rng)).exp();
    let slow = cfg
        .specials
        .iter()
        .find(|s| matches(s, run))
        .and_then(|s| match s.kind {
            SpecialKind::Slow(f) => Some(f),
            _ => None,
        })
        .unwrap_or(1.0);
    let procs: Vec<ProcessRecord> = (0..n)
        .map(|i| {
            let noise = run_noise * (0.4 * cfg.noise * normal(&mut rng)).exp();
            let cpu = demand * (0.01 * normal(&mut rng)).exp();
            let io_s = io * io_factor * n as f64 / cpus as f64;
            let wall = (finish[i] + io_s) * noise * slow;
            let utime = cpu * user;
            let stime = cpu - utime;
            let nvcsw = (csw * io_factor * (1.0 + 0.05 * normal(&mut rng)))
                .max(0.0)
                .round();
            let nivcsw = match policy {
                "fifo" => 0.0,
                "rr" => (wall / 0.1).floor(),
                _ if n > cpus => (wall / 0.004 * (1.0 + 0.05 * normal(&mut rng))).round(),
                _ => (wall / 0.2).round(),
            };
            let wait = (wall - cpu - io_s).max(0.0);
            let (nice, rt) = match class {
                Class::Fair => (prio[i], None),
                Class::Realtime => (None, prio[i]),
                _ => (None, None),
            };
            let sched = ProcSched {
                policy: run.policy,
                nice,
                rt_priority: rt,
                dl_runtime_ns: None,
                dl_deadline_ns: None,
                dl_period_ns: None,
                weight: None,
                slice_ns: None,
            };
            let base =
                synthetic_process(i as u32, sched, (wall * 1e9) as u64, (utime * 1e6) as u64);
            ProcessRecord {
                usage: ProcessUsage {
                    stime_us: (stime * 1e6) as u64,
                    ..base.usage
                },
                kernel: base
                    .kernel
                    .with(Field::Nvcsw, Some(nvcsw as u64))
                    .with(Field::Nivcsw, Some(nivcsw as u64))
                    .with(Field::RunNs, Some((cpu * 1e9) as u64))
                    .with(Field::WaitNs, Some((wait * 1e9) as u64))
                    .with(Field::Timeslices, Some((nvcsw + nivcsw + 1.0) as u64)),
                work: Some(match kind {
                    "pi" => 10_000_000,
                    "copy" => 1_024_000,
                    _ => 4,
                }),
                work_unit: run.workload.workload.work_unit().to_string(),
                ..base
            }
        })
        .collect();
    let cpu_list: Vec<usize> = if cfg.cpus == "all" {
        (0..cpus).collect()
    } else {
        cfg.cpus
            .split(',')
            .map(|c| c.trim().parse().expect("a CPU number"))
            .collect()
    };
    synthetic_record(
        run,
        env,
        cpu_list,
        cfg.created_unix_ms + 1000 * run.seq as i64,
        Some(0.1 + 0.01 * (run.seq % 7) as f64),
        procs,
    )
}

fn matches(s: &Special, run: &Run) -> bool {
    s.policy == run.policy.name()
        && s.workload == run.workload.name
        && s.processes == run.processes
        && s.priorities == run.priorities.name
        && s.rep == run.rep
}

/// Runs generated and stored per transaction by [`create`].
const CHUNK_RUNS: usize = 500;

/// Create the campaign of `cfg` in `store` with every run; returns the
/// campaign id and the number of process rows.
pub fn create(store: &mut Store, cfg: &SynthConfig) -> Result<(i64, u64)> {
    let toml = cfg.toml();
    let spec = crate::spec::load(&toml, "synthetic", &[]).context("synthetic spec")?;
    let runs = crate::plan::expand(&spec, cfg.seed);
    let campaign = match &cfg.host {
        None => store.create_campaign(&spec, &toml, &[], cfg.seed, runs.len())?,
        Some((name, id)) => {
            let host = crate::store::Host {
                id: Some(id.clone()),
                name: name.clone(),
            };
            store.create_campaign_on(&host, &spec, &toml, &[], cfg.seed, runs.len())?
        }
    };
    store.set_campaign_meta(campaign.id, cfg.created_unix_ms, "0.0.0-synthetic")?;
    let cpus = if cfg.cpus == "all" {
        cfg.machine_cpus
    } else {
        cfg.cpus.split(',').count()
    };
    let mut env = synthetic_env(cfg.machine_cpus);
    if let Some((name, id)) = &cfg.host {
        env.hostname = name.clone();
        env.host_id = Some(id.clone());
    }
    let record = |run: &Run| {
        let mut r = measure(cfg, run, &env, cpus);
        if let Some(s) = cfg.specials.iter().find(|s| matches(s, run)) {
            let (status, reason) = match &s.kind {
                SpecialKind::Failed(why) => (RunStatus::Failed, why.clone()),
                SpecialKind::TimedOut => {
                    (RunStatus::TimedOut, format!("over the {} s timeout", 600))
                }
                SpecialKind::Skipped(why) => (RunStatus::Skipped, why.clone()),
                SpecialKind::Slow(_) => (RunStatus::Ok, String::new()),
            };
            if status != RunStatus::Ok {
                r.status = status;
                r.reason = reason;
                r.makespan_ns = None;
                r.cpu_util = None;
                r.processes.clear();
            }
        }
        r
    };
    // In chunks, so memory stays bounded however many runs there are.
    let mut rows = 0u64;
    for chunk in runs.chunks(CHUNK_RUNS) {
        let records: Vec<RunRecord> = chunk.iter().map(record).collect();
        rows += records
            .iter()
            .map(|r| r.processes.len() as u64)
            .sum::<u64>();
        store.insert_runs(campaign.id, &records)?;
    }
    Ok((campaign.id, rows))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn processor_sharing_follows_weights() {
        // Equal weights on one CPU: everyone finishes at n × demand.
        let f = gps_finish(&[1.0, 1.0, 1.0], 1.0, 1);
        for t in f {
            assert!((t - 3.0).abs() < 1e-9);
        }
        // Weight 3:1 on one CPU: the heavy job finishes at 4/3, the light at 2.
        let f = gps_finish(&[3.0, 1.0], 1.0, 1);
        assert!((f[0] - 4.0 / 3.0).abs() < 1e-9, "{f:?}");
        assert!((f[1] - 2.0).abs() < 1e-9, "{f:?}");
        // Two jobs on two CPUs: each gets a whole CPU whatever the weights.
        let f = gps_finish(&[3.0, 1.0], 1.0, 2);
        assert!((f[0] - 1.0).abs() < 1e-9 && (f[1] - 1.0).abs() < 1e-9);
    }

    #[test]
    fn fifo_runs_to_completion_by_priority() {
        assert_eq!(fifo_finish(&[50, 50, 50], 1.0, 1), vec![1.0, 2.0, 3.0]);
        assert_eq!(fifo_finish(&[1, 99], 1.0, 1), vec![2.0, 1.0]);
        assert_eq!(fifo_finish(&[50, 50, 50], 1.0, 2), vec![1.0, 1.0, 2.0]);
    }
}
