//! Running one planned run on real processes: prepare its directory (for
//! workloads that work on files), start its workers behind a barrier,
//! release them together, sleep while they run (draining the pipes their
//! results and stderr come through), reap each with its resource usage and
//! scheduler statistics, and build the [`RunRecord`].

mod ext_scheduler;
mod guard;
mod interference;
pub mod outputs;
pub mod rundir;
mod spawn;

use anyhow::{Context, Result};
use std::collections::HashMap;
use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::time::Duration;

use crate::plan::Run;
use crate::policy::{self, Class, ProcSched};
use crate::record::{ProcessRecord, RunRecord, RunStatus, SliceRow};
use crate::spec::Spec;
use crate::spec::{WrrMechanism, WrrSettings};
use crate::sys::envinfo::{self, EnvSnapshot};
use crate::sys::events::AbsTimer;
use crate::sys::proc::{self, Exit, Usage};
use crate::sys::{fds, fsinfo, limits, probe, procfs};
use crate::trace::capture::{self as trace_capture, Recorder};
use crate::trace::{Capture, Task as TraceTask};
use crate::worker::{WorkerArgs, WorkerResult};
use crate::workload::{PiParams, Stop, Workload};
use crate::wrr::{self, DispatchReport, Dispatcher, Mechanism, SliceRule, Task, WrrPolicy};
use outputs::Outputs;

pub use guard::ParentPriority;

/// How a run ended from the launcher's point of view.
pub enum Outcome {
    /// Finished (ok, failed, timed out or skipped): store it, with its
    /// capture when the run was traced.
    Done(Box<RunRecord>, Option<Box<Capture>>),
    /// The user stopped schedlab (signal number) while the run was going: its
    /// workers were killed and nothing is stored, so it runs again on resume.
    Interrupted(i32),
}

/// What the launcher needs besides the run itself.
pub struct Launcher {
    /// CPUs schedlab itself may use.
    pub allowed_cpus: Vec<usize>,
    /// Where per-run directories go.
    pub workdir: PathBuf,
    pub timeout: Duration,
    /// The signals taken synchronously (blocked for the whole campaign).
    pub signals: libc::sigset_t,
    pub deadline: policy::Deadline,
    pub hog: Option<crate::spec::Hog>,
    /// Held at `/dev/cpu_dma_latency` during each run (spec key).
    pub cpu_dma_latency_us: Option<u32>,
    pub wrr: WrrSettings,
    /// `sched_rt_period_us`: how long an RT hog warms up before release.
    pub rt_period_us: i64,
    /// Where runs are traced (tracefs root and instance name), when the
    /// campaign traces them ([`Launcher::trace_into`]).
    trace: Option<TraceTarget>,
    /// The WRR mechanism this machine allows (`wrr.mechanism = "auto"`),
    /// probed on first use: ext, else fifo, else signals.
    wrr_mechanism: std::sync::OnceLock<Mechanism>,
    /// The soft RLIMIT_NOFILE the campaign was checked against; a run
    /// raises it by the descriptors of its workers' pipes.
    open_files_base: u64,
}

/// Where a traced run records: the instance `name` under tracefs `root`
/// (held by the campaign's `knobs::TraceGuard`).
#[derive(Debug, Clone)]
pub struct TraceTarget {
    pub root: PathBuf,
    pub name: String,
}

/// Why a run directory could not be made ready.
enum PrepareError {
    /// The campaign cannot go on (no work directory).
    Fatal(anyhow::Error),
    /// This run fails, with its status and reason.
    Run(RunStatus, String),
}

/// The run's release-time file: in memory, or else an unnamed temporary
/// file; numbered above the numbers workers' descriptors are moved to.
fn release_file() -> std::io::Result<std::os::fd::OwnedFd> {
    let fd = match fds::memfd(c"schedlab-release") {
        Ok(fd) => fd,
        Err(_) => tempfile::tempfile()?.into(),
    };
    fds::at_least(fd, outputs::HIGH_FD)
}

impl Launcher {
    pub fn new(spec: &Spec, env: &EnvSnapshot, signals: libc::sigset_t) -> Launcher {
        Launcher {
            allowed_cpus: env.cpus_allowed.clone(),
            workdir: spec.workdir.clone().unwrap_or_else(std::env::temp_dir),
            timeout: Duration::from_nanos(spec.timeout_ns),
            signals,
            deadline: spec.deadline,
            hog: spec.hog.clone(),
            wrr: spec.wrr,
            rt_period_us: env.sched_rt_period_us.unwrap_or(1_000_000),
            trace: None,
            wrr_mechanism: std::sync::OnceLock::new(),
            cpu_dma_latency_us: spec.cpu_dma_latency_us,
            open_files_base: probe::rlimit(libc::RLIMIT_NOFILE).0,
        }
    }

    /// Record every run's scheduling events in tracefs instance `name`
    /// under `root` from now on.
    pub fn trace_into(&mut self, target: TraceTarget) {
        self.trace = Some(target);
    }

    /// Run `run` to the end.
    pub fn launch(&self, run: &Run) -> Result<Outcome> {
        let started_unix_ms = crate::store::unix_ms();
        let env = envinfo::capture();
        let finished = |status: RunStatus, cpu_list: Vec<usize>, reason: String| {
            Ok(Outcome::Done(
                Box::new(RunRecord {
                    run: run.clone(),
                    status,
                    reason,
                    makespan_ns: None,
                    cpu_util: None,
                    cpu_list,
                    started_unix_ms,
                    env: env.clone(),
                    processes: Vec::new(),
                    slices: Vec::new(),
                    extra: serde_json::json!({}),
                    interference: Default::default(),
                }),
                None,
            ))
        };
        let cpus = match run.cpus.resolve(&self.allowed_cpus) {
            Ok(c) => c,
            Err(m) => {
                let reason = format!("cpus = \"{}\": {m}", run.cpus.label());
                return finished(RunStatus::Skipped, Vec::new(), reason);
            }
        };
        // SCHED_DEADLINE tasks cannot be pinned to part of their root
        // domain: on a CPU subset they run on every CPU, with the bandwidth
        // of the subset reserved (the same CPU time, spread in time).
        let bandwidth_cpus = cpus.len();
        let cpus = match run.policy {
            policy::Policy::Deadline if cpus.len() < self.allowed_cpus.len() => {
                self.allowed_cpus.clone()
            }
            _ => cpus,
        };
        let mut members: Vec<Member> = policy::assign(
            run.policy,
            &run.priorities.assignment,
            &self.deadline,
            run.processes as usize,
            bandwidth_cpus,
            rt_fraction(&env),
        )
        .into_iter()
        .enumerate()
        .map(|(i, sched)| Member {
            role: Role::Worker,
            sched: ProcSched {
                slice_ns: run.slice_us.map(|us| u64::from(us) * 1000),
                ..sched
            },
            // WRR keeps a run queue per CPU: each worker lives on one.
            cpus: match run.policy {
                policy::Policy::Wrr => vec![cpus[i % cpus.len()]],
                _ => cpus.clone(),
            },
            workload: run.workload.workload.clone(),
        })
        .collect();
        if let Some(hog) = &self.hog {
            let hog_cpus = match hog.cpus.resolve(&self.allowed_cpus) {
                Ok(c) => c,
                Err(m) => {
                    let reason = format!("hog.cpus = \"{}\": {m}", hog.cpus.label());
                    return finished(RunStatus::Skipped, cpus, reason);
                }
            };
            let sched = if hog.is_rt() {
                ProcSched::realtime(hog.policy, hog.rt_priority)
            } else {
                ProcSched::fair(hog.policy, hog.nice)
            };
            for _ in 0..hog.count {
                members.push(Member {
                    role: Role::Hog,
                    sched,
                    cpus: hog_cpus.clone(),
                    // Spins until the last worker ends, when it is killed.
                    workload: Workload::Pi(PiParams {
                        stop: Stop::DurationNs(
                            self.timeout.as_nanos() as u64
                                + self.rt_period_us.max(0) as u64 * 1000
                                + 60_000_000_000,
                        ),
                    }),
                });
            }
        }

        // Every CPU a process of the run could use (an RT hog's may lie
        // outside the workers').
        let mut run_cpus: Vec<usize> = members.iter().flat_map(|m| m.cpus.clone()).collect();
        run_cpus.sort_unstable();
        run_cpus.dedup();
        // The trace instance is made and configured before any worker
        // exists; it records nothing until just before release.
        let mut recorder = match &self.trace {
            None => None,
            Some(t) => {
                let traced: Vec<u32> = run_cpus.iter().map(|&c| c as u32).collect();
                let rate = trace_capture::expected_events_per_s(
                    run.workload.workload.cpu_bound(),
                    members.len() as f64 / run_cpus.len().max(1) as f64,
                );
                let kb = trace_capture::buffer_kb(rate, env.cpus_online.max(1));
                match Recorder::prepare(&t.root, &t.name, &traced, kb) {
                    Ok(r) => Some(r),
                    Err(e) => {
                        let reason = format!("tracing could not be set up: {e:#}");
                        return finished(RunStatus::Failed, cpus, reason);
                    }
                }
            }
        };

        // A run directory only for workloads that work on files: making one
        // (and its marker) costs the file system, and every run pays it.
        let dir = if run.workload.workload.needs_dir() {
            match self.prepare_dir(run) {
                Ok(dir) => Some(dir),
                Err(PrepareError::Fatal(e)) => return Err(e),
                Err(PrepareError::Run(status, reason)) => return finished(status, cpus, reason),
            }
        } else {
            None
        };

        // The channels between cooperating workers (pairs, groups), open in
        // the parent only until every worker has its copies.
        let wiring = match run.workload.workload.wire(run.processes as usize) {
            Ok(w) => w,
            Err(e) => {
                let reason = format!("connecting the {} workers: {e:#}", run.workload.name);
                return finished(RunStatus::Failed, cpus, reason);
            }
        };
        // Each process's result and stderr pipes: two descriptors each in
        // schedlab while the run goes on, beyond what the campaign's check
        // counted on.
        let open_files = limits::raise_open_files(self.open_files_base + 2 * members.len() as u64);
        // The idle-state bound, held from before the first worker exists
        // until the run is recorded (dropped with this function's scope).
        let _latency_hold = match self.cpu_dma_latency_us {
            None => None,
            Some(us) => match crate::sys::pmqos::CpuLatencyHold::hold(us) {
                Ok(h) => Some(h),
                Err(e) => {
                    let reason = format!(
                        "cpu_dma_latency_us = {us}: cannot hold {}: {e}",
                        crate::sys::pmqos::PATH
                    );
                    return finished(RunStatus::Skipped, cpus, reason);
                }
            },
        };
        // A sched_ext scheduler of another program, loaded before the
        // workers exist and stopped (Drop) whenever the run ends early.
        let mut ext_sched = match run.ext_scheduler.as_ref().filter(|x| x.loads()) {
            None => None,
            Some(level) => match ext_scheduler::Running::start(level, &self.signals) {
                Ok(r) => Some(r),
                Err(ext_scheduler::StartError::Run(status, reason)) => {
                    return finished(status, cpus, reason);
                }
                Err(ext_scheduler::StartError::Interrupted(sig)) => {
                    return Ok(Outcome::Interrupted(sig));
                }
            },
        };
        let (barrier_r, barrier_w) = proc::pipe().context("creating the start barrier")?;
        let barrier_r = fds::at_least(barrier_r, outputs::HIGH_FD)?;
        // Fixed durations run from release: the parent writes it here just
        // before opening the barrier, the workers read it just after.
        let release = release_file().context("creating the release-time file")?;
        let mut outputs = Outputs::new().context("watching the workers' pipes")?;
        let mut pids: Vec<i32> = Vec::with_capacity(members.len());
        for (index, m) in members.iter().enumerate() {
            let args = WorkerArgs {
                fds: match m.role {
                    Role::Worker => wiring.fds_of(index).to_vec(),
                    Role::Hog => Vec::new(),
                },
                workload: m.workload.clone(),
                dir: dir.as_ref().map(|d| d.path().to_path_buf()),
                workdir: self.workdir.clone(),
                index,
                wait_barrier: m.role == Role::Worker,
            };
            let shared = spawn::Shared {
                barrier: &barrier_r,
                release: &release,
            };
            let spawned = match outputs.open() {
                Ok(ends) => spawn::spawn_worker(&args, &m.sched, &m.cpus, &shared, ends),
                Err(e) => Err(spawn::SpawnError {
                    index,
                    errno: e.raw_os_error(),
                    message: match &open_files {
                        Ok(n) => format!("cannot make its pipes ({n} open files allowed): {e}"),
                        Err(_) => format!("cannot make its pipes: {e}"),
                    },
                }),
            };
            match spawned {
                Ok(pid) => pids.push(pid),
                Err(e) => {
                    kill_and_reap(&pids);
                    let who = match m.role {
                        Role::Worker => format!("worker {}", e.index),
                        Role::Hog => "a CPU hog".to_string(),
                    };
                    let reason = match e.errno {
                        Some(errno @ (libc::EPERM | libc::EBUSY | libc::EINVAL)) => format!(
                            "{who} could not be put under {}: {}",
                            describe_sched(&m.sched),
                            probe::errno_explanation(m.sched.policy.name(), errno)
                        ),
                        Some(libc::EAGAIN) => format!(
                            "{who} could not be started: {} (a task limit was reached: this user's \
                             RLIMIT_NPROC, `ulimit -u`, the cgroup's pids.max, or kernel.threads-max)",
                            e.message
                        ),
                        _ => format!("{who} could not be started: {}", e.message),
                    };
                    let status = match e.errno {
                        Some(libc::EPERM | libc::EBUSY) => RunStatus::Skipped,
                        _ => RunStatus::Failed,
                    };
                    return finished(status, cpus, reason);
                }
            }
        }
        drop(barrier_r);
        drop(wiring);
        // The EEVDF slice the kernel granted each fair process (what it
        // reports back, clamped to its range), read while they wait.
        let granted: Vec<Option<u64>> = members
            .iter()
            .zip(&pids)
            .map(|(m, &pid)| match m.sched.policy.class() {
                Class::Fair => crate::sys::sched::fair_slice_ns(pid),
                _ => None,
            })
            .collect();

        // schedlab's own scheduler takes the workers over before they are
        // released (they are still blocked on the barrier).
        if let Some(x) = ext_sched.as_mut() {
            let classes: Vec<Class> = members.iter().map(|m| m.sched.policy.class()).collect();
            let nices: Vec<i32> = members.iter().map(|m| m.sched.nice.unwrap_or(0)).collect();
            if let Err(reason) = x.take_over(&pids, &classes, &nices) {
                kill_and_reap(&pids);
                return finished(RunStatus::Failed, cpus, reason);
            }
        }
        let beside = ext_sched.as_ref().map(|x| x.ops().to_string());
        let dispatcher = match run.policy {
            policy::Policy::Wrr => match self.start_wrr(&members, &pids, beside.as_deref()) {
                Ok(d) => Some(d),
                Err((status, reason)) => {
                    kill_and_reap(&pids);
                    return finished(status, cpus, reason);
                }
            },
            _ => None,
        };

        // The trace follows the run's processes and the dispatcher's threads.
        if let Some(r) = recorder.as_mut() {
            let mut tasks: Vec<TraceTask> = pids
                .iter()
                .map(|&pid| TraceTask {
                    tid: pid,
                    tgid: pid,
                    comm: procfs::comm(pid).unwrap_or_default(),
                })
                .collect();
            if dispatcher.is_some() {
                let me = std::process::id() as i32;
                tasks.extend(
                    procfs::own_threads()
                        .into_iter()
                        .filter(|(_, comm)| comm.starts_with("wrr-cpu"))
                        .map(|(tid, comm)| TraceTask {
                            tid,
                            tgid: me,
                            comm,
                        }),
                );
            }
            let away: Vec<usize> = self
                .allowed_cpus
                .iter()
                .copied()
                .filter(|c| !run_cpus.contains(c))
                .collect();
            if let Err(e) = r.follow(tasks, &away) {
                kill_and_reap(&pids);
                drop(dispatcher);
                let reason = format!("tracing could not follow the workers: {e:#}");
                return finished(RunStatus::Failed, cpus, reason);
            }
        }

        // Stay in control of RT workers: the parent outranks them while it
        // sleeps, so it can reap, enforce the timeout and take Ctrl-C.
        let raised = if members
            .iter()
            .any(|m| m.sched.policy.class() != Class::Fair)
        {
            ParentPriority::raise(
                members
                    .iter()
                    .any(|m| m.sched.policy.class() == Class::Deadline),
            )
        } else {
            ParentPriority::unchanged()
        };
        let hogs: Vec<(usize, i32)> = members
            .iter()
            .zip(&pids)
            .enumerate()
            .filter(|(_, (m, _))| m.role == Role::Hog)
            .map(|(i, (_, &pid))| (i, pid))
            .collect();
        // The hog has been spinning since it was spawned; give it one RT
        // period to reach its steady state (a fresh hog starts with a full
        // runtime budget, which would inflate its share of a short window).
        if self.hog.as_ref().is_some_and(|h| h.is_rt()) {
            let warm_up = Duration::from_micros(self.rt_period_us.max(1) as u64);
            if let Some(sig) = proc::pending_stop_signal_within(&self.signals, warm_up) {
                kill_and_reap(&pids);
                return Ok(Outcome::Interrupted(sig));
            }
        }
        let hog_start: HashMap<i32, procfs::SchedStat> = hogs
            .iter()
            .filter_map(|&(_, pid)| procfs::read_schedstat(pid).ok().map(|s| (pid, s)))
            .collect();
        // Other programs' runnable tasks and the CPUs' counters, last thing
        // before release (the workers are blocked on the barrier).
        let before = interference::at_release(&pids);
        if let Some(r) = recorder.as_mut()
            && let Err(e) = r.start()
        {
            kill_and_reap(&pids);
            let reason = format!("tracing could not start: {e:#}");
            return finished(RunStatus::Failed, cpus, reason);
        }
        // Fixed durations run from release: workers read it after the barrier.
        let release_ns = proc::monotonic_ns();
        if let Err(e) = std::fs::File::from(release).write_all_at(&release_ns.to_le_bytes(), 0) {
            kill_and_reap(&pids);
            return Err(e).context("writing the release time");
        }
        drop(barrier_w); // EOF on every worker's barrier: go.
        let waited = self.wait_all(&pids, &hogs, release_ns, dispatcher.as_ref(), &mut outputs);
        let ext_report = ext_sched.take().map(|mut x| {
            if let Ok(w) = &waited
                && let Some((exit, usage)) = w.others.get(&x.pid())
            {
                x.ended_during_run(*exit, *usage);
            }
            x.stop()
        });
        // The capture ends once the last process has exited (or was killed).
        let traced = recorder.take().map(Recorder::finish);
        let after = interference::at_end();
        let dispatched = dispatcher.map(WrrRun::stop);
        let parent = raised.label;
        drop(raised);
        let waited = waited?;

        if let Some(sig) = waited.interrupted {
            return Ok(Outcome::Interrupted(sig));
        }
        let ctx = RecordContext {
            run,
            members: &members,
            pids: &pids,
            waited: &waited,
            hog_start: &hog_start,
            release_ns,
            outputs: &outputs,
            timeout: self.timeout,
        };
        let mut record = ctx.build(cpus, started_unix_ms, env);
        for (p, g) in record.processes.iter_mut().zip(granted) {
            p.slice_ns = g;
        }
        record.interference = interference::measure(
            &before,
            &after,
            &run_cpus,
            interference::processes_cpu_ns(&record.processes),
            crate::sys::activity::tick_ns(),
        );
        if let Some(us) = self.cpu_dma_latency_us {
            // No CPU slept deeper than this while the run went on.
            add_extra(&mut record, "cpu_dma_latency_us", serde_json::json!(us));
        }
        if parent != ParentPriority::unchanged().label {
            // What schedlab itself ran as while it watched RT workers.
            add_extra(&mut record, "parent", serde_json::json!(parent));
        }
        if bandwidth_cpus < record.cpu_list.len() {
            let note = format!(
                "SCHED_DEADLINE cannot be pinned to cpus = \"{}\": the workers ran on every CPU \
                 with the bandwidth of {bandwidth_cpus} CPU(s) reserved",
                run.cpus.label()
            );
            add_extra(&mut record, "deadline", serde_json::json!(note));
        }
        if let Some(report) = dispatched {
            attach_dispatch(&mut record, &report, release_ns);
        }
        if let Some(x) = ext_report {
            add_extra(&mut record, "ext_scheduler", x.json);
            if let Some(why) = x.failure
                && record.status == RunStatus::Ok
            {
                record.status = RunStatus::Failed;
                record.reason = why;
            }
        }
        let capture = match traced {
            None => None,
            Some(Ok(mut c)) => {
                c.release_ns = Some(release_ns);
                // Marked in the run itself too: a capture with lost events
                // is never used as if it were whole.
                add_extra(
                    &mut record,
                    "trace",
                    serde_json::json!({
                        "events": c.events.len(),
                        "lost_events": c.lost_events,
                    }),
                );
                Some(Box::new(c))
            }
            Some(Err(e)) => {
                add_extra(
                    &mut record,
                    "trace",
                    serde_json::json!({ "error": format!("{e:#}") }),
                );
                None
            }
        };
        drop(dir);
        Ok(Outcome::Done(Box::new(record), capture))
    }

    /// Make the run directory in the work directory and the workload's
    /// input in it. An error of the run itself (no room, preparation failed
    /// or timed out) is that run's status and reason.
    fn prepare_dir(&self, run: &Run) -> Result<rundir::OwnedDir, PrepareError> {
        std::fs::create_dir_all(&self.workdir)
            .with_context(|| format!("cannot create work directory {}", self.workdir.display()))
            .map_err(PrepareError::Fatal)?;
        let dir = rundir::OwnedDir::create_in(&self.workdir)
            .with_context(|| {
                format!(
                    "cannot create a run directory in {}",
                    self.workdir.display()
                )
            })
            .map_err(PrepareError::Fatal)?;
        // What the run writes must fit (the space may have gone since the
        // campaign's check), and writing it counts against timeout_s: a run
        // that cannot prepare its input is that run's failure, not the
        // campaign's.
        let need = run.workload.workload.disk_bytes(run.processes);
        if let Ok(free) = fsinfo::free_bytes(dir.path())
            && need > free
        {
            let reason = format!(
                "the run writes up to {} in {} (the input and one copy per process), which has {} free",
                crate::progress::human_bytes(need),
                self.workdir.display(),
                crate::progress::human_bytes(free)
            );
            return Err(PrepareError::Run(RunStatus::Failed, reason));
        }
        let until = std::time::Instant::now().checked_add(self.timeout);
        if let Err(e) = run.workload.workload.prepare(dir.path(), until) {
            let status = if e.is::<crate::workload::copy::PrepareTimedOut>() {
                RunStatus::TimedOut
            } else {
                RunStatus::Failed
            };
            let reason = format!("preparing the {} workload: {e:#}", run.workload.name);
            return Err(PrepareError::Run(status, reason));
        }
        Ok(dir)
    }

    /// Start the WRR dispatcher over the workers: a run queue per CPU,
    /// slice = quantum × weight. Err is the status and reason to record.
    fn start_wrr(
        &self,
        members: &[Member],
        pids: &[i32],
        beside_ext: Option<&str>,
    ) -> Result<WrrRun, (RunStatus, String)> {
        let tasks: Vec<Task> = members
            .iter()
            .enumerate()
            .map(|(i, m)| Task {
                id: i,
                weight: m.sched.weight.unwrap_or(1),
                cpu: m.cpus[0],
            })
            .collect();
        let rule = SliceRule::Weighted {
            quantum_ns: self.wrr.quantum_ns,
        };
        let policy =
            WrrPolicy::new(tasks, rule).map_err(|e| (RunStatus::Failed, format!("WRR: {e}")))?;
        let mechanism = match self.wrr.mechanism {
            Some(WrrMechanism::Fifo) => {
                wrr::fifo_check(wrr::DEFAULT_BASE_PRIO + 2).map_err(|why| {
                    (
                        RunStatus::Skipped,
                        format!("wrr.mechanism = \"fifo\" is not permitted: {why}"),
                    )
                })?;
                Mechanism::Fifo
            }
            Some(WrrMechanism::Signals) => Mechanism::Signals,
            Some(WrrMechanism::Ext) => {
                if let Some(other) = beside_ext {
                    return Err((
                        RunStatus::Skipped,
                        format!(
                            "wrr.mechanism = \"ext\" loads schedlab's own sched_ext scheduler, \
                             which cannot run beside \"{other}\" of matrix.ext_scheduler (one BPF \
                             scheduler at a time)"
                        ),
                    ));
                }
                if let Some(why) = wrr::ext::unavailable() {
                    return Err((
                        RunStatus::Skipped,
                        format!("wrr.mechanism = \"ext\" cannot run here: {why}"),
                    ));
                }
                Mechanism::Ext
            }
            // Another program's sched_ext scheduler is loaded: a user-space
            // mechanism, without settling "auto" for the other runs.
            None if beside_ext.is_some() => wrr::available_mechanism(),
            None => *self.wrr_mechanism.get_or_init(|| {
                if wrr::ext::unavailable().is_none() {
                    Mechanism::Ext
                } else {
                    wrr::available_mechanism()
                }
            }),
        };
        if mechanism == Mechanism::Ext {
            return start_ext(&policy, pids);
        }
        Dispatcher::start(policy, pids.to_vec(), mechanism, wrr::DEFAULT_BASE_PRIO)
            .map(WrrRun::User)
            .map_err(|e| {
                (
                    RunStatus::Failed,
                    format!("the WRR dispatcher could not start: {e:#}"),
                )
            })
    }
}

/// schedlab's WRR over a run's workers: the user-space dispatcher, or the
/// sched_ext scheduler in the kernel.
enum WrrRun {
    User(Dispatcher),
    #[cfg(feature = "ext")]
    Kernel(wrr::ext::ExtDispatcher),
}

impl WrrRun {
    /// Worker `id` exited (the kernel scheduler sees exits itself).
    fn task_exited(&self, id: usize) {
        match self {
            WrrRun::User(d) => d.task_exited(id),
            #[cfg(feature = "ext")]
            WrrRun::Kernel(_) => {}
        }
    }

    fn stop(self) -> DispatchReport {
        match self {
            WrrRun::User(d) => d.stop(),
            #[cfg(feature = "ext")]
            WrrRun::Kernel(k) => k.stop(),
        }
    }
}

/// Load the sched_ext scheduler over the workers.
#[cfg(feature = "ext")]
fn start_ext(policy: &WrrPolicy, pids: &[i32]) -> Result<WrrRun, (RunStatus, String)> {
    wrr::ext::ExtDispatcher::start(policy, pids)
        .map(WrrRun::Kernel)
        .map_err(|e| {
            (
                RunStatus::Failed,
                format!("the sched_ext WRR scheduler could not start: {e:#}"),
            )
        })
}

/// Without the `ext` feature [`wrr::ext::unavailable`] says so first.
#[cfg(not(feature = "ext"))]
fn start_ext(_: &WrrPolicy, _: &[i32]) -> Result<WrrRun, (RunStatus, String)> {
    Err((
        RunStatus::Skipped,
        wrr::ext::unavailable().unwrap_or_else(|| "the ext mechanism is not built in".into()),
    ))
}

/// Add one policy-specific fact to a run's `extra` object.
fn add_extra(record: &mut RunRecord, key: &str, value: serde_json::Value) {
    if !record.extra.is_object() {
        record.extra = serde_json::json!({});
    }
    if let Some(map) = record.extra.as_object_mut() {
        map.insert(key.to_string(), value);
    }
}

/// Store what the WRR dispatcher did: every slice (times after barrier
/// release) and a summary of its precision and cost.
fn attach_dispatch(record: &mut RunRecord, report: &DispatchReport, release_ns: u64) {
    let since = |t: u64| t.saturating_sub(release_ns);
    record.slices = report
        .slices
        .iter()
        // The kernel scheduler also reports the turns of workers still
        // starting up (from SCHED_EXT to the barrier): not the run's.
        .filter(|s| report.mechanism != Mechanism::Ext || s.actual_end_ns > release_ns)
        .map(|s| SliceRow {
            process_index: s.task as u32,
            cpu: s.cpu as u32,
            planned_start_ns: since(s.planned_start_ns),
            planned_end_ns: since(s.planned_end_ns),
            actual_end_ns: since(s.actual_end_ns),
            cpu_ns: s.cpu_ns,
        })
        .collect();
    add_extra(
        record,
        "wrr",
        serde_json::json!({
            "mechanism": report.mechanism.name(),
            "slices": report.slices.len(),
            "dispatcher_cpu_ns": report.dispatcher_cpu_ns,
            "dispatcher_overhead": report.overhead(),
            "dispatcher_rt": report.dispatcher_rt,
            "load_cpu_ns": report.load_cpu_ns,
            "lateness_p50_ns": report.lateness_quantile(0.5),
            "lateness_p99_ns": report.lateness_quantile(0.99),
            "errors": report.errors,
        }),
    );
    if !report.errors.is_empty() && record.status == RunStatus::Ok {
        record.status = RunStatus::Failed;
        record.reason = format!("WRR dispatcher: {}", report.errors.join("; "));
    }
}

/// Whether a process is measured or runs beside the measured ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Worker,
    Hog,
}

impl Role {
    fn as_str(self) -> &'static str {
        match self {
            Role::Worker => "worker",
            Role::Hog => "hog",
        }
    }
}

/// One process of a run: what it runs and how it is scheduled.
struct Member {
    role: Role,
    sched: ProcSched,
    cpus: Vec<usize>,
    workload: Workload,
}

/// What waiting for the workers observed.
struct Waited {
    /// Per pid: how it ended, its usage, its schedstat, and when it was seen
    /// to exit (monotonic ns).
    ended: HashMap<i32, (Exit, Usage, Option<procfs::SchedStat>, u64)>,
    /// Hogs: schedstat and time when the last worker had ended.
    hog_end: HashMap<i32, (procfs::SchedStat, u64)>,
    /// Hogs: schedstat and time at the last whole RT period after release.
    hog_periods: HashMap<i32, (procfs::SchedStat, u64)>,
    timed_out: bool,
    interrupted: Option<i32>,
    /// Other children of schedlab that ended during the run (a sched_ext
    /// scheduler's program), reaped by the wait.
    others: HashMap<i32, (Exit, Usage)>,
}

/// Tokens of the wait's own descriptors in the poller (the pipes' are
/// from `outputs::FIRST_TOKEN` on).
const SIGNAL_TOKEN: u64 = 0;
const TIMER_TOKEN: u64 = 1;

impl Launcher {
    /// Sleep until every worker has exited, the timeout passes, or a stop
    /// signal arrives; reap each worker as it exits, and drain the workers'
    /// pipes whenever they hold something (a worker writing more than a
    /// pipe holds waits for that). Hogs are stopped once the last worker
    /// has ended.
    fn wait_all(
        &self,
        pids: &[i32],
        hogs: &[(usize, i32)],
        release_ns: u64,
        dispatcher: Option<&WrrRun>,
        outputs: &mut Outputs,
    ) -> Result<Waited> {
        let signals = proc::SignalFd::new(&self.signals).context("watching signals")?;
        let timer = AbsTimer::new().context("creating a timer")?;
        outputs.poller().add(signals.as_fd(), SIGNAL_TOKEN)?;
        outputs.poller().add(timer.as_fd(), TIMER_TOKEN)?;
        let mut ready: Vec<u64> = Vec::new();
        let mut live: std::collections::HashSet<i32> = pids.iter().copied().collect();
        let hog_pids: Vec<i32> = hogs.iter().map(|h| h.1).collect();
        let mut w = Waited {
            ended: HashMap::new(),
            hog_end: HashMap::new(),
            hog_periods: HashMap::new(),
            timed_out: false,
            interrupted: None,
            others: HashMap::new(),
        };
        let deadline_ns = release_ns + self.timeout.as_nanos() as u64;
        let mut killed = false;
        // Hogs are sampled at every whole RT period after release, so that
        // their share is measured over whole periods: a window that ends
        // when a throttled worker next gets the CPU ends right after a hog
        // burst, and would overstate the hog.
        let period_ns = self.rt_period_us.max(1) as u64 * 1000;
        let mut next_sample_ns = release_ns + period_ns;
        loop {
            let now = proc::monotonic_ns();
            if !hog_pids.is_empty() && !killed && now >= next_sample_ns {
                for &p in &hog_pids {
                    if let Ok(s) = procfs::read_schedstat(p) {
                        w.hog_periods.insert(p, (s, now));
                    }
                }
                next_sample_ns += period_ns * (1 + (now - next_sample_ns) / period_ns);
            }
            while let Some(pid) = proc::exited_child().context("waiting for workers")? {
                // Still a zombie: its schedstat is readable until it is reaped.
                let stat = procfs::read_schedstat(pid).ok();
                let seen_ns = proc::monotonic_ns();
                if let (Some(d), Some(index)) = (dispatcher, pids.iter().position(|&p| p == pid)) {
                    d.task_exited(index);
                }
                let (exit, usage) =
                    proc::reap(pid).with_context(|| format!("reaping worker pid {pid}"))?;
                if live.remove(&pid) {
                    w.ended.insert(pid, (exit, usage, stat, seen_ns));
                } else {
                    w.others.insert(pid, (exit, usage));
                }
            }
            if live.is_empty() {
                // Whatever the processes wrote before they exited is in
                // their pipes.
                outputs.drain_all();
                return Ok(w);
            }
            if !killed && live.iter().all(|p| hog_pids.contains(p)) {
                // Every worker is done: the hogs' window ends now.
                let now = proc::monotonic_ns();
                for &p in &live {
                    if let Ok(s) = procfs::read_schedstat(p) {
                        w.hog_end.insert(p, (s, now));
                    }
                    proc::kill(p, libc::SIGKILL);
                }
                killed = true;
                continue;
            }
            let now = proc::monotonic_ns();
            if now >= deadline_ns && !killed {
                w.timed_out = true;
                killed = true;
                live.iter().for_each(|&p| proc::kill(p, libc::SIGKILL));
                continue;
            }
            let wake_ns = if killed {
                now + 100_000_000
            } else if !hog_pids.is_empty() {
                deadline_ns.min(next_sample_ns)
            } else {
                deadline_ns
            };
            timer.arm_at(wake_ns).context("arming the timer")?;
            outputs
                .poller()
                .wait(&mut ready, None)
                .context("waiting for workers")?;
            for &token in &ready {
                match token {
                    SIGNAL_TOKEN => {
                        while let Some(sig) = signals.take() {
                            if sig == libc::SIGCHLD {
                                continue;
                            }
                            w.interrupted.get_or_insert(sig);
                            if !killed {
                                killed = true;
                                live.iter().for_each(|&p| proc::kill(p, libc::SIGKILL));
                            }
                        }
                    }
                    TIMER_TOKEN => {}
                    pipe => outputs.on_ready(pipe),
                }
            }
        }
    }
}

/// Fraction of each period the kernel grants RT and DEADLINE tasks
/// (sched_rt_runtime_us / sched_rt_period_us) as it is for this run: a
/// campaign may sweep it.
fn rt_fraction(env: &EnvSnapshot) -> f64 {
    match (env.sched_rt_runtime_us, env.sched_rt_period_us) {
        (Some(r), Some(p)) if r >= 0 && p > 0 => r as f64 / p as f64,
        (Some(-1), _) => 1.0,
        _ => 0.95,
    }
}

/// Kill workers still waiting on the barrier and reap them.
fn kill_and_reap(pids: &[i32]) {
    for &p in pids {
        proc::kill(p, libc::SIGKILL);
    }
    for &p in pids {
        let _ = proc::reap(p);
    }
}

fn describe_sched(s: &ProcSched) -> String {
    match s.policy.class() {
        Class::Fair => format!(
            "SCHED_{} nice {}",
            s.policy.name().to_uppercase(),
            s.nice.unwrap_or(0)
        ),
        Class::Realtime => format!(
            "SCHED_{} priority {}",
            s.policy.name().to_uppercase(),
            s.rt_priority.unwrap_or(0)
        ),
        Class::Wrr => format!("WRR weight {}", s.weight.unwrap_or(1)),
        Class::Deadline => format!(
            "SCHED_DEADLINE runtime {} µs / deadline {} µs / period {} µs",
            s.dl_runtime_ns.unwrap_or(0) / 1000,
            s.dl_deadline_ns.unwrap_or(0) / 1000,
            s.dl_period_ns.unwrap_or(0) / 1000
        ),
    }
}

/// Everything needed to turn what was observed into a [`RunRecord`].
struct RecordContext<'a> {
    run: &'a Run,
    members: &'a [Member],
    pids: &'a [i32],
    waited: &'a Waited,
    hog_start: &'a HashMap<i32, procfs::SchedStat>,
    release_ns: u64,
    outputs: &'a Outputs,
    timeout: Duration,
}

impl RecordContext<'_> {
    fn build(&self, cpu_list: Vec<usize>, started_unix_ms: i64, env: EnvSnapshot) -> RunRecord {
        let mut processes = Vec::with_capacity(self.pids.len());
        let mut failures = Vec::new();
        for (index, (&pid, m)) in self.pids.iter().zip(self.members).enumerate() {
            let p = match m.role {
                Role::Worker => self.worker(index, pid, m),
                Role::Hog => self.hog(index, pid, m),
            };
            if !p.ok && m.role == Role::Worker && !self.waited.timed_out {
                let what = if p.exit == "exit code 0" {
                    "exited without a result".to_string()
                } else {
                    p.exit.clone()
                };
                failures.push(match p.stderr_tail.lines().last() {
                    Some(last) if !last.is_empty() => format!("worker {index}: {what}: {last}"),
                    _ => format!("worker {index}: {what}"),
                });
            }
            processes.push(p);
        }
        let workers = || processes.iter().filter(|p| p.role == "worker");
        let makespan_ns = workers().map(|p| p.wall_ns).max();
        let cpu_us: u64 = workers().map(|p| p.usage.utime_us + p.usage.stime_us).sum();
        let cpu_util = makespan_ns
            .filter(|&m| m > 0)
            .map(|m| cpu_us as f64 * 1000.0 / (m as f64 * cpu_list.len().max(1) as f64));
        let (status, reason) = if self.waited.timed_out {
            let unfinished = workers().filter(|p| !p.ok).count();
            let total = workers().count();
            let timeout_s = self.timeout.as_secs_f64();
            (
                RunStatus::TimedOut,
                format!(
                    "the run exceeded timeout_s = {timeout_s} s; {unfinished} of {total} workers were killed"
                ),
            )
        } else if !failures.is_empty() {
            let more = match failures.len() {
                n if n > 3 => format!(" (and {} more)", n - 3),
                _ => String::new(),
            };
            let shown = failures[..failures.len().min(3)].join("; ");
            (RunStatus::Failed, format!("{shown}{more}"))
        } else {
            (RunStatus::Ok, String::new())
        };
        RunRecord {
            run: self.run.clone(),
            status,
            reason,
            makespan_ns,
            cpu_util,
            cpu_list,
            started_unix_ms,
            env,
            processes,
            slices: Vec::new(),
            extra: serde_json::json!({}),
            interference: Default::default(),
        }
    }

    fn since(&self, t: u64) -> u64 {
        t.saturating_sub(self.release_ns)
    }

    fn ended(&self, pid: i32) -> (Exit, Usage, Option<procfs::SchedStat>, u64) {
        self.waited.ended.get(&pid).copied().unwrap_or((
            Exit::Signal(libc::SIGKILL),
            Usage::default(),
            None,
            proc::monotonic_ns(),
        ))
    }

    fn worker(&self, index: usize, pid: i32, m: &Member) -> ProcessRecord {
        let (exit, usage, stat, seen_ns) = self.ended(pid);
        let result: Option<WorkerResult> = self.outputs.result(index);
        let ok = exit.success() && result.is_some();
        let tail = if ok {
            String::new()
        } else {
            self.outputs.stderr_tail(index)
        };
        let (start_ns, end_ns) = match &result {
            Some(r) => (Some(self.since(r.start_ns)), Some(self.since(r.end_ns))),
            None => (None, None),
        };
        // The measured window is barrier → end of work when the worker
        // reported; the whole process life (from wait4) when it did not.
        let (usage, stat) = match &result {
            Some(r) => (
                Usage {
                    maxrss_kb: usage.maxrss_kb,
                    ..r.usage_end.since(&r.usage_start)
                },
                match (r.schedstat_start, r.schedstat_end) {
                    (Some(a), Some(b)) => Some(b.since(&a)),
                    _ => stat,
                },
            ),
            None => (usage, stat),
        };
        ProcessRecord {
            index: index as u32,
            role: m.role.as_str().to_string(),
            pid,
            sched: m.sched,
            start_ns,
            end_ns,
            wall_ns: end_ns.unwrap_or_else(|| self.since(seen_ns)),
            usage,
            run_ns: stat.map(|s| s.run_ns),
            wait_ns: stat.map(|s| s.wait_ns),
            timeslices: stat.map(|s| s.timeslices),
            work: result.as_ref().map(|r| r.output.work),
            work_unit: m.workload.work_unit().to_string(),
            figures: result
                .as_ref()
                .map(|r| r.output.figures.clone())
                .unwrap_or_default(),
            slice_ns: None,
            latency: result
                .as_ref()
                .map(|r| r.output.latency.clone())
                .unwrap_or_default(),
            exit: exit.describe(),
            ok,
            stderr_tail: tail,
        }
    }

    /// A hog is measured by the parent over the workers' window: from
    /// barrier release to the moment the last worker ended.
    fn hog(&self, index: usize, pid: i32, m: &Member) -> ProcessRecord {
        let (exit, usage, _, seen_ns) = self.ended(pid);
        let window = match (self.hog_start.get(&pid), self.waited.hog_end.get(&pid)) {
            (Some(a), Some((b, t))) => Some((b.since(a), self.since(*t))),
            _ => None,
        };
        let mut figures = std::collections::BTreeMap::new();
        // The share over whole RT periods (the hog's steady state), and over
        // the workers' whole window for reference.
        let periods = match (self.hog_start.get(&pid), self.waited.hog_periods.get(&pid)) {
            (Some(a), Some((b, t))) => Some((b.since(a), self.since(*t))),
            _ => None,
        };
        if let Some((stat, wall)) = periods
            && wall > 0
        {
            figures.insert("cpu_share".to_string(), stat.run_ns as f64 / wall as f64);
            figures.insert("share_window_s".to_string(), wall as f64 / 1e9);
        }
        if let Some((stat, wall)) = window
            && wall > 0
        {
            figures.insert(
                "cpu_share_run".to_string(),
                stat.run_ns as f64 / wall as f64,
            );
        }
        ProcessRecord {
            index: index as u32,
            role: m.role.as_str().to_string(),
            pid,
            sched: m.sched,
            start_ns: Some(0),
            end_ns: window.map(|w| w.1),
            wall_ns: window.map(|w| w.1).unwrap_or_else(|| self.since(seen_ns)),
            usage,
            run_ns: window.map(|w| w.0.run_ns),
            wait_ns: window.map(|w| w.0.wait_ns),
            timeslices: window.map(|w| w.0.timeslices),
            work: None,
            work_unit: "ns".to_string(),
            figures,
            slice_ns: None,
            latency: Default::default(),
            exit: exit.describe(),
            // Killed on purpose once the workers were done.
            ok: window.is_some(),
            stderr_tail: String::new(),
        }
    }
}
