//! A planned run in the model: its processes as the launcher would make
//! them (policies through [`crate::policy::assign`], the RT or fair hogs,
//! WRR's CPU per worker, DEADLINE on every CPU with a subset's
//! bandwidth), each workload as a [`Program`] whose CPU demand comes from
//! the calibrated [`Rates`], and the engine's outcome back into the
//! [`RunRecord`] the launcher builds, field by field.

use std::collections::BTreeMap;

use crate::fields::Field;
use crate::plan::Run;
use crate::policy::{self, Class, Policy, ProcSched};
use crate::record::{ProcessRecord, RunRecord, RunStatus, Usage, rusage_fields};
use crate::spec::Spec;
use crate::workload::copy::CopyParams;
use crate::workload::mixed::MixedParams;
use crate::workload::modelled::ModelTask;
use crate::workload::{Rates, Stop, SyncMode, Workload};

use super::deadline;
use super::eevdf::FairKind;
use super::engine::{Engine, Outcome, SchedSpec, Segment, TaskSpec, Wake};
use super::machine::{Machine, ModelParams};
use super::task::{Burn, Cycle, Periodic, Ping, Program, Step};
use super::wrr::WrrSim;

/// A simulated run: the record the launcher would have stored, and the
/// predicted per-CPU timeline on the model's clock (from 0, before the
/// release when an RT hog warms up first; task = process index).
#[derive(Debug, Clone)]
pub struct SimRun {
    pub record: RunRecord,
    pub timeline: Vec<Segment>,
    /// When each task became runnable and its wait until it ran, on the
    /// same clock.
    pub wakes: Vec<Wake>,
    /// When the workers were released (the record's times count from it).
    pub release_ns: u64,
    /// When the model stopped: the last worker's exit, or the time limit.
    pub end_ns: u64,
    /// A stop signal ended it before it finished: not a result.
    pub interrupted: bool,
    /// The timeline and wake-ups are complete before this time only (see
    /// [`super::engine::TIMELINE_MAX`]); None: whole.
    pub timeline_cut_ns: Option<u64>,
}

/// The kernel release a simulated run's environment reports.
pub const MODEL_RELEASE: &str = "schedlab-model 1";

/// The custom slice range the kernel accepts for fair tasks
/// (`__setparam_fair` clamps `sched_runtime` to 0.1 ms ..= 100 ms).
const SLICE_MIN_NS: u64 = 100_000;
const SLICE_MAX_NS: u64 = 100_000_000;

/// One process of the run before it becomes an engine task.
struct Member {
    hog: bool,
    sched: ProcSched,
    cpus: Vec<usize>,
}

/// Simulate `run` of `spec` with `params`. Runs the model cannot represent
/// come back Skipped, with what is missing as the reason. The record's
/// `started_unix_ms` is 0: the model has no clock (the caller sets it).
pub fn simulate(run: &Run, spec: &Spec, params: &ModelParams) -> SimRun {
    simulate_until_stopped(run, spec, params, &mut || false)
}

/// [`simulate`], asking `stop` every few thousand events whether to give
/// up (a stop signal): the run then comes back `interrupted`.
pub fn simulate_until_stopped(
    run: &Run,
    spec: &Spec,
    params: &ModelParams,
    stop: &mut dyn FnMut() -> bool,
) -> SimRun {
    let mut m = params.machine.clone();
    if let Some(rt) = run.rt_runtime_us {
        m.rt_runtime_us = rt;
    }
    let allowed: Vec<usize> = (0..m.cpus.max(1)).collect();
    let skipped = |cpu_list: Vec<usize>, reason: String| SimRun {
        record: empty_record(run, &m, params, cpu_list, RunStatus::Skipped, reason),
        timeline: Vec::new(),
        wakes: Vec::new(),
        release_ns: 0,
        end_ns: 0,
        interrupted: false,
        timeline_cut_ns: None,
    };
    let cpus = match run.cpus.resolve(&allowed) {
        Ok(c) => c,
        Err(e) => return skipped(Vec::new(), format!("cpus = \"{}\": {e}", run.cpus.label())),
    };
    if let Some(x) = run.ext_scheduler.as_ref().filter(|x| x.loads()) {
        let reason = format!(
            "the model does not represent sched_ext schedulers (ext_scheduler = \"{}\")",
            x.name
        );
        return skipped(cpus, reason);
    }
    let members = match members(run, spec, &m, &cpus, &allowed) {
        Ok(ms) => ms,
        Err(reason) => return skipped(cpus, reason),
    };
    // A real-time hog spins one RT period before release, as the
    // launcher's warm-up; the model starts it at 0 and releases after.
    let release_ns = match &spec.hog {
        Some(h) if h.is_rt() => m.rt_period_ns(),
        _ => 0,
    };
    let mut replay = match replay_tree(&run.workload.workload, &members, params) {
        Ok(t) => t,
        Err(reason) => return skipped(cpus, reason),
    };
    let mut tasks = Vec::with_capacity(members.len());
    for (i, mem) in members.iter().enumerate() {
        let program = if mem.hog {
            Program::Burn(Burn::until(u64::MAX))
        } else if let Some(t) = replay.as_mut() {
            std::mem::replace(&mut t.roots[i], Program::Burn(Burn::amount(0)))
        } else {
            match program(&run.workload.workload, i, release_ns, params) {
                // A fair task's timed sleeps carry its timer slack.
                Ok(Program::Periodic(p)) => {
                    let fair = mem.sched.policy.class() == Class::Fair;
                    let slack = m.timer_slack_ns_for(fair);
                    Program::Periodic(p.with_timer_slack(slack, m.tick_ns()))
                }
                Ok(p) => p,
                Err(reason) => return skipped(cpus, reason),
            }
        };
        tasks.push(TaskSpec {
            sched: sched_spec(&mem.sched, &m),
            cpus: mem.cpus.clone(),
            program,
            start_ns: if mem.hog { 0 } else { release_ns },
            worker: !mem.hog,
        });
    }
    // A replay's other tasks, after the members, as their worker is.
    let extra: Vec<usize> = replay.map_or_else(Vec::new, |t| {
        t.extra
            .into_iter()
            .map(|(w, program)| {
                tasks.push(TaskSpec {
                    sched: sched_spec(&members[w].sched, &m),
                    cpus: members[w].cpus.clone(),
                    program,
                    start_ns: release_ns,
                    worker: true,
                });
                w
            })
            .collect()
    });
    let wrr = if run.policy == Policy::Wrr {
        let list: Vec<(usize, u32, usize)> = members
            .iter()
            .enumerate()
            .filter(|(_, mem)| !mem.hog)
            .map(|(i, mem)| (i, mem.sched.weight.unwrap_or(1), mem.cpus[0]))
            .collect();
        match WrrSim::new(&list, spec.wrr.quantum_ns) {
            Ok(w) => Some(w),
            Err(e) => {
                let mut r = empty_record(run, &m, params, cpus, RunStatus::Failed, String::new());
                r.reason = format!("WRR: {e}");
                return SimRun {
                    record: r,
                    timeline: Vec::new(),
                    wakes: Vec::new(),
                    release_ns: 0,
                    end_ns: 0,
                    interrupted: false,
                    timeline_cut_ns: None,
                };
            }
        }
    } else {
        None
    };
    let outcome = Engine::new(&m, tasks, wrr, release_ns)
        .run_until_stopped(release_ns + spec.timeout_ns, stop);
    let ctx = BuildCtx {
        run,
        spec,
        params,
        m: &m,
        members: &members,
        extra: &extra,
        release_ns,
    };
    ctx.build(cpus, outcome)
}

/// A replay's engine tasks (a `replay` workload, or a command carrying its
/// replay), None for any other workload. Its bursts are costed at the
/// replay's own pi rate (the machine it was synthesized on) when it
/// records one, else at the model's.
fn replay_tree(
    w: &Workload,
    members: &[Member],
    params: &ModelParams,
) -> Result<Option<super::replay::Tree>, String> {
    let ModelTask::Replay(p) = w.model() else {
        return Ok(None);
    };
    let workers = members.iter().filter(|m| !m.hog).count();
    let rate = match p.pi_iter_per_s {
        r if r > 0.0 => r,
        _ => params.rates.pi_iter_per_s,
    };
    super::replay::tree(p, workers, members.len(), rate).map(Some)
}

/// What turning an outcome into a record needs besides the outcome.
struct BuildCtx<'a> {
    run: &'a Run,
    spec: &'a Spec,
    params: &'a ModelParams,
    m: &'a Machine,
    members: &'a [Member],
    /// The worker of each replay task after the members.
    extra: &'a [usize],
    release_ns: u64,
}

/// The run's processes: workers under the assigned policy, then the hogs.
fn members(
    run: &Run,
    spec: &Spec,
    m: &Machine,
    cpus: &[usize],
    allowed: &[usize],
) -> Result<Vec<Member>, String> {
    let bandwidth_cpus = cpus.len();
    // SCHED_DEADLINE spans its root domain (see the launcher).
    let worker_cpus = match run.policy {
        Policy::Deadline => allowed.to_vec(),
        _ => cpus.to_vec(),
    };
    let scheds = policy::assign(
        run.policy,
        &run.priorities.assignment,
        &spec.deadline,
        run.processes as usize,
        bandwidth_cpus,
        m.rt_fraction(),
    );
    let mut out: Vec<Member> = scheds
        .into_iter()
        .enumerate()
        .map(|(i, sched)| Member {
            hog: false,
            sched: ProcSched {
                slice_ns: run.slice_us.map(|us| u64::from(us) * 1000),
                ..sched
            },
            cpus: match run.policy {
                Policy::Wrr => vec![worker_cpus[i % worker_cpus.len()]],
                _ => worker_cpus.clone(),
            },
        })
        .collect();
    if run.policy == Policy::Deadline {
        let reservations: Vec<(u64, u64, u64)> = out
            .iter()
            .map(|mem| {
                let s = &mem.sched;
                (
                    s.dl_runtime_ns.unwrap_or(0),
                    s.dl_deadline_ns.unwrap_or(0),
                    s.dl_period_ns.unwrap_or(0),
                )
            })
            .collect();
        let servers = m
            .fair_server
            .then_some((m.fair_server_runtime_ns, m.fair_server_period_ns));
        deadline::admit(
            &reservations,
            m.cpus,
            m.rt_runtime_us,
            m.rt_period_us,
            servers,
        )
        .map_err(|e| format!("SCHED_DEADLINE refused by the model's {e}"))?;
    }
    if let Some(hog) = &spec.hog {
        let hog_cpus = hog
            .cpus
            .resolve(allowed)
            .map_err(|e| format!("hog.cpus = \"{}\": {e}", hog.cpus.label()))?;
        let sched = if hog.is_rt() {
            ProcSched::realtime(hog.policy, hog.rt_priority)
        } else {
            ProcSched::fair(hog.policy, hog.nice)
        };
        for _ in 0..hog.count {
            out.push(Member {
                hog: true,
                sched,
                cpus: hog_cpus.clone(),
            });
        }
    }
    Ok(out)
}

fn sched_spec(s: &ProcSched, m: &Machine) -> SchedSpec {
    match s.policy.class() {
        Class::Fair => SchedSpec::Fair {
            kind: match s.policy {
                Policy::Batch => FairKind::Batch,
                Policy::Idle => FairKind::Idle,
                _ => FairKind::Normal,
            },
            nice: s.nice.unwrap_or(0),
            slice_ns: fair_slice_ns(s, m),
        },
        Class::Realtime => SchedSpec::Rt {
            prio: s.rt_priority.unwrap_or(1).clamp(1, 99) as u32,
            rr: s.policy == Policy::Rr,
        },
        Class::Deadline => SchedSpec::Deadline {
            runtime_ns: s.dl_runtime_ns.unwrap_or(0),
            deadline_ns: s.dl_deadline_ns.unwrap_or(0),
            period_ns: s.dl_period_ns.unwrap_or(0),
        },
        Class::Wrr => SchedSpec::Wrr,
    }
}

/// The slice a fair task gets: its own (clamped as the kernel does) or
/// the base slice.
fn fair_slice_ns(s: &ProcSched, m: &Machine) -> u64 {
    match s.slice_ns {
        Some(ns) if ns > 0 => ns.clamp(SLICE_MIN_NS, SLICE_MAX_NS),
        _ => m.base_slice_ns,
    }
}

/// Seconds of CPU one unit of work costs (the plan's cost model).
pub(super) fn unit_s(w: &Workload, rates: &Rates) -> f64 {
    w.with_stop(Stop::Work(1)).estimate_cpu_s(rates)
}

pub(super) fn ns(s: f64) -> u64 {
    (s * 1e9).round().max(0.0) as u64
}

/// The program of worker `i`.
fn program(
    w: &Workload,
    i: usize,
    release_ns: u64,
    params: &ModelParams,
) -> Result<Program, String> {
    let rates = &params.rates;
    let until = |d: u64| release_ns.saturating_add(d);
    let stop = w.stop();
    Ok(match w.model() {
        ModelTask::Compute(_) => match stop {
            Stop::Work(n) => Program::Burn(Burn::amount(ns(n as f64 * unit_s(w, rates)))),
            Stop::DurationNs(d) => Program::Burn(Burn::until(until(d))),
        },
        ModelTask::Copy(p) => copy_program(p, release_ns, params)?,
        ModelTask::Mixed(p) => mixed_program(p, release_ns, params)?,
        ModelTask::Periodic { period_us, run_us } => {
            let (quota, end) = match stop {
                Stop::Work(n) => (n, u64::MAX),
                Stop::DurationNs(d) => (u64::MAX, until(d)),
            };
            Program::Periodic(Periodic::new(
                release_ns,
                period_us * 1000,
                run_us * 1000,
                params.wake.timer_wakeup_ns,
                quota,
                end,
            ))
        }
        ModelTask::Pingpong => {
            let (quota, end) = match stop {
                Stop::Work(n) => (n, u64::MAX),
                Stop::DurationNs(d) => (u64::MAX, until(d)),
            };
            Program::Ping(Ping::new(
                i.is_multiple_of(2),
                i ^ 1,
                handoff_ns(params),
                quota,
                end,
            ))
        }
        ModelTask::Replay(_) => return Err("a replay is mapped as a tree (a bug)".into()),
        ModelTask::Unmodelled(why) => return Err(why),
    })
}

/// The pingpong hand-off: calibrated from a pingpong run, else half the
/// machine calibration's round trip less a switch.
fn handoff_ns(params: &ModelParams) -> u64 {
    if params.wake.handoff_ns > 0 {
        return params.wake.handoff_ns;
    }
    ns(params.rates.wake_round_trip_s / 2.0).saturating_sub(params.machine.context_switch_ns)
}

/// Blocking device time of `bytes`, or why it cannot be modelled.
fn io_ns(bytes: u64, sync: SyncMode, params: &ModelParams) -> Result<u64, String> {
    match params.io_bytes_per_s {
        Some(rate) if rate > 0.0 => Ok(ns(bytes as f64 / rate)),
        _ => Err(format!(
            "copy with sync = \"{}\" waits for the storage device, and the model has no measured \
             device rate (io_bytes_per_s)",
            sync_name(sync)
        )),
    }
}

fn sync_name(s: SyncMode) -> &'static str {
    match s {
        SyncMode::None => "none",
        SyncMode::FsyncEnd => "fsync_end",
        SyncMode::FsyncEach => "fsync_each",
        SyncMode::Direct => "direct",
    }
}

/// Copy: page-cache writes are CPU at the calibrated copy rate; fsync and
/// O_DIRECT add blocking device time per write or at the end.
fn copy_program(p: &CopyParams, release_ns: u64, params: &ModelParams) -> Result<Program, String> {
    let rate = params.rates.copy_bytes_per_s;
    match (p.stop, p.sync) {
        (Stop::Work(bytes), SyncMode::None) => {
            Ok(Program::Burn(Burn::amount(ns(bytes as f64 / rate))))
        }
        (Stop::DurationNs(d), SyncMode::None) => {
            Ok(Program::Burn(Burn::until(release_ns.saturating_add(d))))
        }
        (Stop::Work(bytes), SyncMode::FsyncEnd) => Ok(Program::Cycle(Cycle::new(
            vec![
                Step::Cpu(ns(bytes as f64 / rate)),
                Step::Io(io_ns(bytes, p.sync, params)?),
            ],
            Some(1),
            None,
        ))),
        (Stop::Work(bytes), SyncMode::FsyncEach | SyncMode::Direct) => {
            let chunk = p.chunk_bytes.max(1);
            Ok(Program::Cycle(Cycle::new(
                vec![
                    Step::Cpu(ns(chunk as f64 / rate)),
                    Step::Io(io_ns(chunk, p.sync, params)?),
                ],
                Some(bytes.div_ceil(chunk)),
                None,
            )))
        }
        (Stop::DurationNs(_), sync) => Err(format!(
            "the model does not represent a copy of fixed duration with sync = \"{}\"",
            sync_name(sync)
        )),
    }
}

/// Mixed: rounds of pi then copy (and the copy's device time).
fn mixed_program(
    p: &MixedParams,
    release_ns: u64,
    params: &ModelParams,
) -> Result<Program, String> {
    let rates = &params.rates;
    let mut steps = vec![
        Step::Cpu(ns(p.pi_iterations as f64 / rates.pi_iter_per_s)),
        Step::Cpu(ns(p.copy_bytes as f64 / rates.copy_bytes_per_s)),
    ];
    match p.sync {
        SyncMode::None => {}
        SyncMode::FsyncEnd => steps.push(Step::Io(io_ns(p.copy_bytes, p.sync, params)?)),
        SyncMode::FsyncEach | SyncMode::Direct => {
            let chunks = p.copy_bytes.div_ceil(p.chunk_bytes.max(1));
            let each = io_ns(p.chunk_bytes.max(1), p.sync, params)?;
            steps.push(Step::Io(each.saturating_mul(chunks)));
        }
    }
    let (rounds, until) = match p.stop {
        Stop::Work(n) => (Some(n), None),
        Stop::DurationNs(d) => (None, Some(release_ns.saturating_add(d))),
    };
    Ok(Program::Cycle(Cycle::new(steps, rounds, until)))
}

/// The record of a run the model did not carry out.
fn empty_record(
    run: &Run,
    m: &Machine,
    params: &ModelParams,
    cpu_list: Vec<usize>,
    status: RunStatus,
    reason: String,
) -> RunRecord {
    RunRecord {
        run: run.clone(),
        status,
        reason,
        makespan_ns: None,
        cpu_util: None,
        cpu_list,
        started_unix_ms: 0,
        env: super::describe::env(m),
        processes: Vec::new(),
        slices: Vec::new(),
        extra: serde_json::json!({ "model": super::describe::params_json(params, m) }),
        interference: Default::default(),
    }
}

impl BuildCtx<'_> {
    /// The engine's outcome as the launcher's record.
    fn build(&self, cpus: Vec<usize>, out: Outcome) -> SimRun {
        let BuildCtx {
            run,
            spec,
            params,
            m,
            members,
            extra,
            release_ns,
        } = *self;
        let mut record = empty_record(run, m, params, cpus, RunStatus::Ok, String::new());
        let end = out.end_ns.saturating_sub(release_ns);
        for (i, mem) in members.iter().enumerate() {
            let p = if mem.hog {
                hog_record(i, mem, &out, release_ns, end)
            } else {
                worker_record(i, mem, &run.workload.workload, &out, release_ns, params, m)
            };
            record.processes.push(p);
        }
        for (k, &w) in extra.iter().enumerate() {
            let s = &out.stats[members.len() + k];
            super::replay::fold(&mut record.processes[w], s, release_ns);
        }
        let workers = || record.processes.iter().filter(|p| p.role == "worker");
        record.makespan_ns = workers().map(|p| p.wall_ns).max();
        let cpu_us: u64 = workers().map(|p| p.usage.utime_us + p.usage.stime_us).sum();
        record.cpu_util = record
            .makespan_ns
            .filter(|&ms| ms > 0)
            .map(|ms| cpu_us as f64 * 1000.0 / (ms as f64 * record.cpu_list.len().max(1) as f64));
        if out.stalled {
            record.status = RunStatus::Failed;
            record.reason = format!("the model stopped making progress at {} ns", end);
        } else if out.timed_out {
            let unfinished = workers().filter(|p| !p.ok).count();
            record.status = RunStatus::TimedOut;
            record.reason = crate::record::timeout_reason(
                spec.timeout_ns as f64 / 1e9,
                unfinished,
                workers().count(),
            );
        }
        super::describe::add_placement(&mut record, &out, release_ns);
        record.slices = out.wrr_rows.clone();
        if run.policy == Policy::Wrr
            && let Some(map) = record.extra.as_object_mut()
        {
            map.insert(
                "wrr".into(),
                serde_json::json!({ "mechanism": "model", "slices": out.wrr_rows.len() }),
            );
        }
        if let Some(cut) = out.timeline_cut_ns
            && let Some(model) = record
                .extra
                .get_mut("model")
                .and_then(|v| v.as_object_mut())
        {
            model.insert(
                "timeline_kept_until_ns".into(),
                serde_json::json!(cut.saturating_sub(release_ns)),
            );
        }
        SimRun {
            record,
            timeline: out.timeline,
            wakes: out.wakes,
            release_ns,
            end_ns: out.end_ns,
            interrupted: out.interrupted,
            timeline_cut_ns: out.timeline_cut_ns,
        }
    }
}

fn base_process(i: usize, mem: &Member, role: &str) -> ProcessRecord {
    ProcessRecord {
        index: i as u32,
        role: role.into(),
        pid: 0,
        sched: mem.sched,
        start_ns: None,
        end_ns: None,
        wall_ns: 0,
        usage: Usage::default().into(),
        kernel: Default::default(),
        work: None,
        work_unit: String::new(),
        figures: BTreeMap::new(),
        latency: BTreeMap::new(),
        slice_ns: None,
        exit: "exit code 0".into(),
        ok: true,
        stderr_tail: String::new(),
    }
}

fn worker_record(
    i: usize,
    mem: &Member,
    w: &Workload,
    out: &Outcome,
    release_ns: u64,
    params: &ModelParams,
    m: &Machine,
) -> ProcessRecord {
    let s = &out.stats[i];
    let since = |t: u64| t.saturating_sub(release_ns);
    let mut p = base_process(i, mem, "worker");
    p.start_ns = s.first_run_ns.map(since);
    p.end_ns = s.exit_ns.map(since);
    p.wall_ns = p.end_ns.unwrap_or(out.end_ns.saturating_sub(release_ns));
    // Measured from the worker's own start, as the real worker does.
    let (run0, wait0, slices0, nvcsw0, nivcsw0) = s.at_start;
    let run_ns = s.run_ns - run0;
    let usage = Usage {
        utime_us: run_ns / 1000,
        nvcsw: s.nvcsw - nvcsw0,
        nivcsw: s.nivcsw - nivcsw0,
        ..Usage::default()
    };
    p.usage = usage.into();
    p.kernel = rusage_fields(p.kernel, &usage)
        .with(Field::RunNs, Some(run_ns))
        .with(Field::WaitNs, Some(s.wait_ns - wait0))
        .with(Field::Timeslices, Some(s.timeslices - slices0))
        .with(
            Field::NrMigrations,
            Some(s.migrations - s.migrations_at_start),
        );
    p.work_unit = w.work_unit().into();
    p.ok = s.exit_ns.is_some();
    if !p.ok {
        p.exit = "killed by signal 9 (SIGKILL)".into();
        return p;
    }
    if mem.sched.policy.class() == Class::Fair {
        p.slice_ns = Some(fair_slice_ns(&mem.sched, m));
    }
    let elapsed_ns = p
        .end_ns
        .unwrap_or(0)
        .saturating_sub(p.start_ns.unwrap_or(0));
    let (work, figures, latency) =
        super::describe::work_of(w, &out.programs[i], s, elapsed_ns, params);
    p.work = Some(work);
    p.figures = figures;
    p.latency = latency;
    p
}

/// A hog, measured over the workers' window (release to the last
/// worker's end) and over the whole RT periods in it, as the launcher does.
fn hog_record(i: usize, mem: &Member, out: &Outcome, release_ns: u64, end: u64) -> ProcessRecord {
    let s = &out.stats[i];
    let mut p = base_process(i, mem, "hog");
    let run = s.run_ns - s.run_at_release;
    p.start_ns = Some(0);
    p.end_ns = Some(end);
    p.wall_ns = end;
    let usage = Usage {
        utime_us: run / 1000,
        nvcsw: s.nvcsw,
        nivcsw: s.nivcsw,
        ..Usage::default()
    };
    p.usage = usage.into();
    p.kernel = rusage_fields(p.kernel, &usage)
        .with(Field::RunNs, Some(run))
        .with(Field::WaitNs, Some(s.wait_ns))
        .with(Field::Timeslices, Some(s.timeslices));
    p.work_unit = "ns".into();
    p.exit = "killed by signal 9 (SIGKILL)".into();
    if let Some((t, r)) = s.run_at_period
        && t > release_ns
    {
        let wall = t - release_ns;
        p.figures.insert(
            "cpu_share".into(),
            (r - s.run_at_release) as f64 / wall as f64,
        );
        p.figures.insert("share_window_s".into(), wall as f64 / 1e9);
    }
    if end > 0 {
        p.figures
            .insert("cpu_share_run".into(), run as f64 / end as f64);
    }
    p
}
