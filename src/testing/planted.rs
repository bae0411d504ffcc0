//! A synthetic baseline and candidate with planted effects, for the tests
//! of `schedlab compare`: the same spec (OTHER and BATCH, pi, 2 and 4
//! processes on CPU 0), where the candidate's wall time is 20 % longer, its
//! involuntary context switches and user time unchanged, and its system
//! time 5 % shorter under noise three times larger than that (a run-to-run
//! CV of 15 %). The runs are [`RunRecord`]s: written to a store with
//! [`create`], or handed to the analysis as plain data with
//! [`report_data`]; [`latency`] adds per-process latency histograms (a
//! 60–90 µs body, a 3 % tail near 400 µs whose scale the candidate
//! multiplies by `latency_p99_factor`), as the store would give them.

use anyhow::{Context, Result};

use super::synth::{synthetic_env, synthetic_process, synthetic_record};
use crate::fields::Field;
use crate::plan::Run;
use crate::policy::ProcSched;
use crate::record::{ProcessRecord, ProcessUsage, RunRecord};
use crate::rng::SplitMix64;
use crate::spec::{Cpus, Spec};
use crate::store::{
    ProcessLatency, ReportCampaign, ReportData, ReportEnvironment, ReportProcess, ReportRun,
    ReportUsage, Store,
};
use crate::sys::envinfo::EnvSnapshot;
use crate::workload::latency::Latency;

use crate::rng::fnv1a;

/// The planted pair.
#[derive(Debug, Clone, PartialEq)]
pub struct Planted {
    pub repetitions: u32,
    pub seed: u64,
    /// Candidate / baseline of each quantity's true mean.
    pub wall_factor: f64,
    pub stime_factor: f64,
    pub nivcsw_factor: f64,
    /// Candidate / baseline of the latency tail (p99; the median is
    /// unchanged).
    pub latency_p99_factor: f64,
    /// Run-to-run noise: sd of the log of a run's value.
    pub wall_noise: f64,
    pub utime_noise: f64,
    pub stime_noise: f64,
    pub nivcsw_noise: f64,
    /// The candidate's kernel release (the baseline's is the synthetic
    /// environment's, 6.1.0-synthetic).
    pub candidate_kernel: String,
    /// Top-level TOML keys added to the candidate's spec (a spec
    /// difference, e.g. "timeout_s = 30").
    pub candidate_spec_extra: String,
    /// Top-level TOML keys added to both specs (e.g.
    /// "compare_margin_pct = 5").
    pub spec_extra: String,
}

impl Planted {
    /// 10 runs per condition and side; the effects of the module's
    /// documentation.
    pub fn new(repetitions: u32) -> Planted {
        Planted {
            repetitions,
            seed: 5,
            wall_factor: 1.20,
            stime_factor: 0.95,
            nivcsw_factor: 1.0,
            latency_p99_factor: 1.0,
            wall_noise: 0.02,
            utime_noise: 0.02,
            stime_noise: 0.15,
            nivcsw_noise: 0.03,
            candidate_kernel: "6.1.0-synthetic".into(),
            candidate_spec_extra: String::new(),
            spec_extra: String::new(),
        }
    }

    fn toml(&self, candidate: bool) -> String {
        format!(
            "name = \"planted-{}\"\n{}repetitions = {}\nseed = {}\ncooldown_s = 0\n\n[matrix]\n\
             policy = [\"other\", \"batch\"]\nworkload = [\"pi\"]\nprocesses = [2, 4]\ncpus = [\"0\"]\n\n\
             [workloads.pi]\niterations = 10_000_000\n",
            if candidate { "candidate" } else { "baseline" },
            {
                let mut extra = String::new();
                let own = if candidate {
                    self.candidate_spec_extra.as_str()
                } else {
                    ""
                };
                for e in [self.spec_extra.as_str(), own] {
                    if !e.trim().is_empty() {
                        extra.push_str(e.trim_end());
                        extra.push('\n');
                    }
                }
                extra
            },
            self.repetitions,
            self.seed
        )
    }

    fn env(&self, candidate: bool) -> EnvSnapshot {
        let mut e = synthetic_env(2);
        if candidate {
            e.kernel_release = self.candidate_kernel.clone();
        }
        e
    }
}

/// A standard normal draw.
fn normal(rng: &mut SplitMix64) -> f64 {
    let u1 = 1.0 - rng.next_f64();
    let u2 = rng.next_f64();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

fn record(cfg: &Planted, run: &Run, env: &EnvSnapshot, candidate: bool) -> RunRecord {
    let side = if candidate { "candidate" } else { "baseline" };
    let mut rng = SplitMix64::new(cfg.seed ^ fnv1a(&format!("{side}|{}", run.key)));
    let n = run.processes as usize;
    let f = |factor: f64| if candidate { factor } else { 1.0 };
    // One draw per quantity and run: the run-to-run noise.
    let mut draw = |sd: f64| (sd * normal(&mut rng)).exp();
    let wall_s = 0.4 * n as f64 * f(cfg.wall_factor) * draw(cfg.wall_noise);
    let utime_s = 0.4 * draw(cfg.utime_noise);
    let stime_s = 0.02 * f(cfg.stime_factor) * draw(cfg.stime_noise);
    let nivcsw = 100.0 * n as f64 * f(cfg.nivcsw_factor) * draw(cfg.nivcsw_noise);
    let procs: Vec<ProcessRecord> = (0..n)
        .map(|i| {
            let base = synthetic_process(
                i as u32,
                ProcSched {
                    policy: run.policy,
                    nice: Some(0),
                    rt_priority: None,
                    dl_runtime_ns: None,
                    dl_deadline_ns: None,
                    dl_period_ns: None,
                    weight: None,
                    slice_ns: None,
                },
                (wall_s * 1e9) as u64,
                (utime_s * 1e6) as u64,
            );
            ProcessRecord {
                usage: ProcessUsage {
                    stime_us: (stime_s * 1e6) as u64,
                    ..base.usage
                },
                kernel: base
                    .kernel
                    .with(Field::Nivcsw, Some(nivcsw.round() as u64))
                    .with(Field::Nvcsw, Some(2)),
                work: Some(10_000_000),
                work_unit: "iterations".into(),
                ..base
            }
        })
        .collect();
    synthetic_record(
        run,
        env,
        vec![0],
        1_735_732_800_000 + 1000 * run.seq as i64,
        Some(0.1),
        procs,
    )
}

/// One side's spec, its TOML and its runs.
pub fn records(cfg: &Planted, candidate: bool) -> Result<(Spec, String, Vec<RunRecord>)> {
    let toml = cfg.toml(candidate);
    let spec = crate::spec::load(&toml, "planted", &[]).context("planted spec")?;
    let env = cfg.env(candidate);
    let runs = crate::plan::expand(&spec, cfg.seed);
    let recs = runs
        .iter()
        .map(|r| record(cfg, r, &env, candidate))
        .collect();
    Ok((spec, toml, recs))
}

/// Write one side as a campaign of `store`; returns its id.
pub fn create(store: &mut Store, cfg: &Planted, candidate: bool) -> Result<i64> {
    let (spec, toml, recs) = records(cfg, candidate)?;
    let c = store.create_campaign(&spec, &toml, &[], cfg.seed, recs.len())?;
    store.set_campaign_meta(c.id, 1_735_732_800_000, "0.0.0-synthetic")?;
    store.insert_runs(c.id, &recs)?;
    Ok(c.id)
}

/// One side as the report's analysis reads it, without a database: the
/// runs as the store would give them back (campaign `id`).
pub fn report_data(cfg: &Planted, candidate: bool, id: i64) -> Result<ReportData> {
    let (spec, _, recs) = records(cfg, candidate)?;
    let env = cfg.env(candidate);
    let campaign = ReportCampaign {
        id,
        name: spec.name.clone(),
        description: spec.description.clone(),
        seed: cfg.seed,
        scale: spec.scale,
        planned_runs: recs.len() as u64,
        created_unix_ms: 1_735_732_800_000,
        schedlab_version: "0.0.0-synthetic".into(),
        spec_json: serde_json::to_string(&spec)?,
        campaigns: Vec::new(),
        by: None,
    };
    let runs: Vec<ReportRun> = recs
        .iter()
        .enumerate()
        .map(|(i, r)| ReportRun {
            id: i as i64 + 1,
            seq: r.run.seq as i64,
            policy: r.run.policy.name().to_string(),
            workload: r.run.workload.name.clone(),
            workload_kind: r.run.workload.workload.kind().to_string(),
            processes: i64::from(r.run.processes),
            priority_mode: r.run.priorities.name.clone(),
            cpus: r.run.cpus.label(),
            cpu_list: Cpus::List(r.cpu_list.clone()).label(),
            rt_runtime_us: r.run.rt_runtime_us,
            rep: i64::from(r.run.rep),
            status: r.status.as_str().to_string(),
            reason: r.reason.clone(),
            makespan_ns: r.makespan_ns.map(|v| v as i64),
            cpu_util: r.cpu_util,
            load_avg_1m: r.env.load_avg_1m,
            environment_id: 1,
            others_runnable: None,
            steal_pct: None,
            other_cpu_pct: None,
            interrupts: None,
            softirqs: None,
            slice_us: r.run.slice_us.map(i64::from),
            ext_scheduler: r.run.ext_scheduler.as_ref().map(|x| x.name.clone()),
            machine: r.run.machine.as_ref().map(|m| m.name.clone()),
            by: None,
            not_given: Default::default(),
            cpu_busy_pct: Vec::new(),
        })
        .collect();
    let processes: Vec<Vec<ReportProcess>> = recs
        .iter()
        .zip(&runs)
        .map(|(r, run)| {
            r.processes
                .iter()
                .map(|p| ReportProcess {
                    kernel: p.kernel.of_metrics(),
                    run_id: run.id,
                    process_index: i64::from(p.index),
                    nice: p.sched.nice.map(i64::from),
                    rt_priority: p.sched.rt_priority.map(i64::from),
                    wall_ns: p.wall_ns as i64,
                    usage: ReportUsage {
                        utime_us: p.usage.utime_us,
                        stime_us: p.usage.stime_us,
                    },
                    work: p.work.map(|v| v as i64),
                    end_ns: p.end_ns.map(|v| v as i64),
                })
                .collect()
        })
        .collect();
    let process_rows = processes.iter().map(|p| p.len() as u64).sum();
    let environments = vec![ReportEnvironment {
        id: 1,
        runs: runs.len() as i64,
        kernel_release: env.kernel_release.clone(),
        cpu_model: env.cpu_model.clone(),
        cpus_online: env.cpus_online as i64,
        hz: env.hz.map(i64::from),
        preempt_model: env.preempt_model.clone(),
        sched_rt_runtime_us: env.sched_rt_runtime_us,
        sched_rt_period_us: env.sched_rt_period_us,
        sched_rr_timeslice_ms: env.sched_rr_timeslice_ms,
        cgroup_version: env.cgroup_version.clone(),
        virtualization: env.virtualization.clone(),
        schedlab_version: env.schedlab_version.clone(),
        hostname: Some(env.hostname.clone()),
        fair_base_slice_ns: env.fair_base_slice_ns,
        guest_machine: None,
        guest_accel: None,
        topology: None,
        cpu_topology: None,
    }];
    Ok(ReportData {
        campaign,
        runs,
        processes,
        process_rows,
        environments,
        work_units: vec![("pi".into(), "iterations".into())],
    })
}

/// Per-process latency histograms of one side's runs, as
/// [`Store::campaign_latency`] gives them for `data` (that side's
/// [`report_data`]): 1000 samples from 60 to 90 µs and a 3 % tail from
/// 400 µs up (times `latency_p99_factor` on the candidate's side), each run
/// scaled by a run-to-run noise of 1.5 %.
pub fn latency(cfg: &Planted, data: &ReportData, candidate: bool) -> Vec<ProcessLatency> {
    let side = if candidate { "candidate" } else { "baseline" };
    let tail = if candidate {
        cfg.latency_p99_factor
    } else {
        1.0
    };
    let mut out = Vec::new();
    for (run, procs) in data.runs.iter().zip(&data.processes) {
        let mut rng = SplitMix64::new(cfg.seed ^ fnv1a(&format!("latency|{side}|{}", run.seq)));
        let noise = (0.015 * normal(&mut rng)).exp();
        for p in procs {
            let mut h = Latency::new();
            for k in 0..1000u64 {
                h.record_ns(((60_000.0 + 30.0 * k as f64) * noise) as u64);
            }
            for k in 0..31u64 {
                h.record_ns(((400_000.0 + 2_000.0 * k as f64) * tail * noise) as u64);
            }
            out.push(ProcessLatency {
                run_id: run.id,
                process_index: p.process_index,
                name: "wakeup".into(),
                histogram: h,
                kernel: Default::default(),
                activations: None,
                misses: None,
            });
        }
    }
    out
}

/// One campaign of two machine levels, guests "cfs" (Debian 6.1 under TCG)
/// and "eevdf" (Debian 6.12), in `store`; the "eevdf" runs carry the
/// candidate's planted effects and kernel, each level its own guest
/// environment. Returns the campaign's id (`compare --machine cfs
/// --vs-machine eevdf`).
pub fn create_machines(store: &mut Store, cfg: &Planted) -> Result<i64> {
    let toml = cfg.toml(false).replace(
        "cpus = [\"0\"]\n",
        "cpus = [\"0\"]\nmachine = [\"cfs\", \"eevdf\"]\n",
    ) + "\n[machines.cfs]\nkernel = \"debian-6.1\"\naccel = \"tcg\"\n\
         [machines.eevdf]\nkernel = \"debian-6.12\"\naccel = \"tcg\"\n";
    let spec = crate::spec::load(&toml, "planted", &[]).context("planted spec")?;
    let runs = crate::plan::expand(&spec, cfg.seed);
    let recs: Vec<RunRecord> = runs
        .iter()
        .map(|r| {
            let level = r.machine.as_ref().map_or("", |m| m.name.as_str());
            let candidate = level == "eevdf";
            let mut env = cfg.env(candidate);
            env.guest = Some(crate::sys::envinfo::GuestEnv {
                machine: level.into(),
                accel: "tcg".into(),
                qemu_version: "QEMU emulator version 0.0.0-synthetic".into(),
                topology: "1x2x1".into(),
                numa_nodes: 1,
                memory_mib: 1024,
                kernel: level.into(),
                host: "synthetic".into(),
            });
            record(cfg, r, &env, candidate)
        })
        .collect();
    let c = store.create_campaign(&spec, &toml, &[], cfg.seed, recs.len())?;
    store.set_campaign_meta(c.id, 1_735_732_800_000, "0.0.0-synthetic")?;
    store.insert_runs(c.id, &recs)?;
    Ok(c.id)
}
