//! The first phase of a run, before any worker exists: the trace instance
//! (configured, not yet recording), the run directory and the workload's
//! input in it, the channels between cooperating workers, the open-file
//! limit for the workers' pipes, the idle-state bound, and another
//! program's sched_ext scheduler. [`Prepared`] owns all of it: dropping it
//! (a later phase failed) removes the directory, stops the scheduler and
//! releases the bound.

use crate::plan::Run;
use crate::record::RunStatus;
use crate::sys::envinfo::EnvSnapshot;
use crate::sys::{fsinfo, limits};
use crate::trace::capture::{self as trace_capture, Recorder};
use crate::workload::Wiring;

use super::members::Cast;
use super::{Early, Launcher, ext_scheduler, rundir};

/// What a run has before its workers are spawned.
pub struct Prepared {
    pub recorder: Option<Recorder>,
    pub dir: Option<rundir::OwnedDir>,
    pub wiring: Wiring,
    /// The open-file limit raised for the workers' pipes (or why not).
    pub open_files: std::io::Result<u64>,
    /// Held at `/dev/cpu_dma_latency` until the run is recorded (only its
    /// Drop matters).
    _latency_hold: Option<crate::sys::pmqos::CpuLatencyHold>,
    /// Another program's sched_ext scheduler, loaded for the run.
    pub ext_sched: Option<ext_scheduler::Running>,
}

impl Prepared {
    pub fn make(
        l: &Launcher,
        run: &Run,
        cast: &Cast,
        env: &EnvSnapshot,
    ) -> Result<Prepared, Early> {
        // What the workload needs of the machine (a command's program in
        // PATH): a run without it is skipped, saying why.
        if let Err(lack) = run.workload.workload.check_machine() {
            return Err(Early::Ends(
                RunStatus::Skipped,
                format!(
                    "workloads.{}.{}: {}",
                    run.workload.name, lack.key, lack.message
                ),
            ));
        }
        if run.workload.workload.is_command() {
            l.trees()
                .map_err(|why| Early::Ends(RunStatus::Skipped, why))?;
        }
        // The trace instance is made and configured before any worker
        // exists; it records nothing until just before release.
        let recorder = match &l.trace {
            None => None,
            Some(t) => {
                let (traced, kb) = traced_shape(run, cast, env);
                let r = Recorder::prepare(&t.root, &t.name, &traced, kb, l.take_kept_trace())
                    .map_err(|e| Early::failed(format!("tracing could not be set up: {e:#}")))?;
                Some(r)
            }
        };
        // A run directory only for workloads that work on files: making one
        // (and its marker) costs the file system, and every run pays it.
        let dir = match run.workload.workload.needs_dir() {
            true => Some(prepare_dir(l, run)?),
            false => None,
        };
        // The channels between cooperating workers (pairs, groups), open in
        // the parent only until every worker has its copies.
        let wiring = run
            .workload
            .workload
            .wire(run.processes as usize)
            .map_err(|e| {
                Early::failed(format!(
                    "connecting the {} workers: {e:#}",
                    run.workload.name
                ))
            })?;
        // Each process's result and stderr pipes: two descriptors each in
        // schedlab while the run goes on, beyond what the campaign's check
        // counted on.
        let open_files =
            limits::raise_open_files(l.open_files_base + 2 * cast.members.len() as u64);
        let latency_hold = match l.cpu_dma_latency_us {
            None => None,
            Some(us) => Some(crate::sys::pmqos::CpuLatencyHold::hold(us).map_err(|e| {
                Early::Ends(
                    RunStatus::Skipped,
                    format!(
                        "cpu_dma_latency_us = {us}: cannot hold {}: {e}",
                        crate::sys::pmqos::PATH
                    ),
                )
            })?),
        };
        // Loaded before the workers exist and stopped (Drop) whenever the
        // run ends early.
        let ext_sched = match run.ext_scheduler.as_ref().filter(|x| x.loads()) {
            None => None,
            Some(level) => Some(
                ext_scheduler::Running::start(level, &l.signals).map_err(|e| match e {
                    ext_scheduler::StartError::Run(status, reason) => Early::Ends(status, reason),
                    ext_scheduler::StartError::Interrupted(sig) => Early::Interrupted(sig),
                })?,
            ),
        };
        Ok(Prepared {
            recorder,
            dir,
            wiring,
            open_files,
            _latency_hold: latency_hold,
            ext_sched,
        })
    }
}

/// Make the run directory in the work directory and the workload's input
/// in it. An error of the run itself (no room, preparation failed or timed
/// out) is that run's status and reason; no work directory is the
/// campaign's.
fn prepare_dir(l: &Launcher, run: &Run) -> Result<rundir::OwnedDir, Early> {
    use anyhow::Context;
    // The campaign checked that the work directory exists; schedlab never
    // makes it (a run directory inside it is ours).
    let dir = rundir::OwnedDir::create_in(&l.workdir)
        .with_context(|| format!("cannot create a run directory in {}", l.workdir.display()))
        .map_err(Early::Fatal)?;
    // What the run writes must fit (the space may have gone since the
    // campaign's check), and writing it counts against timeout_s: a run
    // that cannot prepare its input is that run's failure, not the
    // campaign's.
    let need = run.workload.workload.disk_bytes(run.processes);
    if let Ok(free) = fsinfo::free_bytes(dir.path())
        && need > free
    {
        return Err(Early::failed(format!(
            "the run writes up to {} in {} (the input and one copy per process), which has {} free",
            crate::units::human_bytes(need),
            l.workdir.display(),
            crate::units::human_bytes(free)
        )));
    }
    let until = std::time::Instant::now().checked_add(l.timeout);
    // A program's setup runs in a cgroup of the session, as its tree will:
    // nothing it starts may outlive it, nor a SIGKILL of schedlab.
    let prepared = match run.workload.workload.command() {
        Some(c) if !c.setup.is_empty() => {
            let trees = l
                .trees()
                .map_err(|why| Early::Ends(RunStatus::Skipped, why))?;
            c.prepare_in(dir.path(), until, Some(trees))
        }
        _ => run.workload.workload.prepare(dir.path(), until),
    };
    if let Err(e) = prepared {
        let status = if e.is::<crate::workload::copy::PrepareTimedOut>()
            || e.is::<crate::workload::command::setup::SetupTimedOut>()
        {
            RunStatus::TimedOut
        } else {
            RunStatus::Failed
        };
        let reason = format!("preparing the {} workload: {e:#}", run.workload.name);
        return Err(Early::Ends(status, reason));
    }
    Ok(dir)
}

/// The CPUs a run's trace records and its buffer size per CPU (KiB),
/// from the run's expected event rate.
pub fn traced_shape(run: &Run, cast: &Cast, env: &EnvSnapshot) -> (Vec<u32>, u64) {
    let traced: Vec<u32> = cast.run_cpus.iter().map(|&c| c as u32).collect();
    let rate = trace_capture::expected_events_per_s(
        run.workload.workload.cpu_bound(),
        cast.members.len() as f64 / cast.run_cpus.len().max(1) as f64,
    );
    (
        traced,
        trace_capture::buffer_kb(rate, env.cpus_online.max(1)),
    )
}
