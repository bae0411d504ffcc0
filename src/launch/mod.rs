//! Running one planned run on real processes: prepare its directory, start
//! its workers behind a barrier, release them together, sleep while they
//! run, reap each with its resource usage and scheduler statistics, and
//! build the [`RunRecord`].

mod guard;
mod spawn;

use anyhow::{Context, Result};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::plan::Run;
use crate::policy::{self, Class, ProcSched};
use crate::record::{ProcessRecord, RunRecord, RunStatus};
use crate::spec::Spec;
use crate::sys::envinfo::{self, EnvSnapshot};
use crate::sys::proc::{self, Exit, Usage};
use crate::sys::{probe, procfs};
use crate::worker::{self, WorkerArgs, WorkerResult};

pub use guard::ParentPriority;

/// How a run ended from the launcher's point of view.
pub enum Outcome {
    /// Finished (ok, failed, timed out or skipped): store it.
    Done(Box<RunRecord>),
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
    /// Fraction of each period the kernel grants RT/DEADLINE tasks
    /// (sched_rt_runtime_us / sched_rt_period_us).
    pub rt_fraction: f64,
    /// The signals taken synchronously (blocked for the whole campaign).
    pub signals: libc::sigset_t,
    pub deadline: policy::Deadline,
}

impl Launcher {
    pub fn new(spec: &Spec, env: &EnvSnapshot, signals: libc::sigset_t) -> Launcher {
        let rt_fraction = match (env.sched_rt_runtime_us, env.sched_rt_period_us) {
            (Some(r), Some(p)) if r >= 0 && p > 0 => r as f64 / p as f64,
            (Some(-1), _) => 1.0,
            _ => 0.95,
        };
        Launcher {
            allowed_cpus: env.cpus_allowed.clone(),
            workdir: spec.workdir.clone().unwrap_or_else(std::env::temp_dir),
            timeout: Duration::from_nanos(spec.timeout_ns),
            rt_fraction,
            signals,
            deadline: spec.deadline,
        }
    }

    /// Run `run` to the end.
    pub fn launch(&self, run: &Run) -> Result<Outcome> {
        let started_unix_ms = crate::store::unix_ms();
        let env = envinfo::capture();
        let skipped = |cpu_list: Vec<usize>, reason: String| {
            Ok(Outcome::Done(Box::new(RunRecord {
                run: run.clone(),
                status: RunStatus::Skipped,
                reason,
                makespan_ns: None,
                cpu_util: None,
                cpu_list,
                started_unix_ms,
                env: env.clone(),
                processes: Vec::new(),
            })))
        };
        let cpus = match run.cpus.resolve(&self.allowed_cpus) {
            Ok(c) => c,
            Err(m) => return skipped(Vec::new(), format!("cpus = \"{}\": {m}", run.cpus.label())),
        };
        if run.policy == policy::Policy::Deadline && cpus.len() < self.allowed_cpus.len() {
            return skipped(
                cpus,
                format!(
                    "SCHED_DEADLINE tasks must be allowed on every CPU of their root domain; cpus = \"{}\" \
                     restricts them (use cpus = \"all\", or an exclusive cpuset)",
                    run.cpus.label()
                ),
            );
        }
        let scheds = policy::assign(
            run.policy,
            &run.priorities.assignment,
            &self.deadline,
            run.processes as usize,
            cpus.len(),
            self.rt_fraction,
        );

        std::fs::create_dir_all(&self.workdir)
            .with_context(|| format!("cannot create work directory {}", self.workdir.display()))?;
        let dir = tempfile::Builder::new()
            .prefix(&format!("schedlab-{}-", std::process::id()))
            .tempdir_in(&self.workdir)
            .with_context(|| {
                format!(
                    "cannot create a run directory in {}",
                    self.workdir.display()
                )
            })?;
        run.workload.workload.prepare(dir.path()).with_context(|| {
            format!(
                "preparing the {} workload in {}",
                run.workload.name,
                dir.path().display()
            )
        })?;

        let (barrier_r, barrier_w) = proc::pipe().context("creating the start barrier")?;
        let mut pids: Vec<i32> = Vec::with_capacity(scheds.len());
        for (index, sched) in scheds.iter().enumerate() {
            let args = WorkerArgs {
                workload: run.workload.workload.clone(),
                dir: dir.path().to_path_buf(),
                index,
            };
            match spawn::spawn_worker(&args, sched, &cpus, &barrier_r, dir.path()) {
                Ok(pid) => pids.push(pid),
                Err(e) => {
                    kill_and_reap(&pids);
                    let reason = match e.errno {
                        Some(errno @ (libc::EPERM | libc::EBUSY | libc::EINVAL)) => format!(
                            "worker {} could not be put under {}: {}",
                            e.index,
                            describe_sched(sched),
                            probe::errno_explanation(run.policy.name(), errno)
                        ),
                        _ => format!("worker {} could not be started: {}", e.index, e.message),
                    };
                    let status = match e.errno {
                        Some(libc::EPERM | libc::EBUSY) => RunStatus::Skipped,
                        _ => RunStatus::Failed,
                    };
                    return Ok(Outcome::Done(Box::new(RunRecord {
                        run: run.clone(),
                        status,
                        reason,
                        makespan_ns: None,
                        cpu_util: None,
                        cpu_list: cpus,
                        started_unix_ms,
                        env,
                        processes: Vec::new(),
                    })));
                }
            }
        }
        drop(barrier_r);

        // Stay in control of RT workers: the parent outranks them while it
        // sleeps, so it can reap, enforce the timeout and take Ctrl-C.
        let raised = if scheds.iter().any(|s| s.policy.class() != Class::Fair) {
            ParentPriority::raise()
        } else {
            ParentPriority::unchanged()
        };
        let release_ns = proc::monotonic_ns();
        drop(barrier_w); // EOF on every worker's barrier: go.
        let waited = self.wait_all(&pids, release_ns);
        drop(raised);
        let waited = waited?;

        if let Some(sig) = waited.interrupted {
            return Ok(Outcome::Interrupted(sig));
        }
        Ok(Outcome::Done(Box::new(build_record(
            run,
            &scheds,
            &pids,
            &waited,
            release_ns,
            dir.path(),
            cpus,
            started_unix_ms,
            env,
            self.timeout,
        ))))
    }
}

/// What waiting for the workers observed.
struct Waited {
    /// Per pid: how it ended, its usage, its schedstat, and when it was seen
    /// to exit (monotonic ns).
    ended: HashMap<i32, (Exit, Usage, Option<procfs::SchedStat>, u64)>,
    timed_out: bool,
    interrupted: Option<i32>,
}

impl Launcher {
    /// Sleep until every worker has exited, the timeout passes, or a stop
    /// signal arrives; reap each worker as it exits.
    fn wait_all(&self, pids: &[i32], release_ns: u64) -> Result<Waited> {
        let mut live: std::collections::HashSet<i32> = pids.iter().copied().collect();
        let mut w = Waited {
            ended: HashMap::new(),
            timed_out: false,
            interrupted: None,
        };
        let deadline_ns = release_ns + self.timeout.as_nanos() as u64;
        let mut killed = false;
        loop {
            while let Some(pid) = proc::exited_child().context("waiting for workers")? {
                // Still a zombie: its schedstat is readable until it is reaped.
                let stat = procfs::read_schedstat(pid).ok();
                let seen_ns = proc::monotonic_ns();
                let (exit, usage) =
                    proc::reap(pid).with_context(|| format!("reaping worker pid {pid}"))?;
                if live.remove(&pid) {
                    w.ended.insert(pid, (exit, usage, stat, seen_ns));
                }
            }
            if live.is_empty() {
                return Ok(w);
            }
            let now = proc::monotonic_ns();
            if now >= deadline_ns && !killed {
                w.timed_out = true;
                killed = true;
                live.iter().for_each(|&p| proc::kill(p, libc::SIGKILL));
                continue;
            }
            let wait = if killed {
                Duration::from_millis(100)
            } else {
                Duration::from_nanos(deadline_ns - now)
            };
            match proc::wait_signal(&self.signals, wait) {
                None | Some(libc::SIGCHLD) => {}
                Some(sig) => {
                    w.interrupted.get_or_insert(sig);
                    if !killed {
                        killed = true;
                        live.iter().for_each(|&p| proc::kill(p, libc::SIGKILL));
                    }
                }
            }
        }
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
        Class::Deadline => format!(
            "SCHED_DEADLINE runtime {} µs / deadline {} µs / period {} µs",
            s.dl_runtime_ns.unwrap_or(0) / 1000,
            s.dl_deadline_ns.unwrap_or(0) / 1000,
            s.dl_period_ns.unwrap_or(0) / 1000
        ),
    }
}

/// The last lines of a worker's stderr (at most 2 KiB).
fn stderr_tail(path: &Path) -> String {
    let Ok(bytes) = std::fs::read(path) else {
        return String::new();
    };
    let start = bytes.len().saturating_sub(2048);
    let text = String::from_utf8_lossy(&bytes[start..]);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(10)..].join("\n")
}

#[allow(clippy::too_many_arguments)]
fn build_record(
    run: &Run,
    scheds: &[ProcSched],
    pids: &[i32],
    waited: &Waited,
    release_ns: u64,
    dir: &Path,
    cpu_list: Vec<usize>,
    started_unix_ms: i64,
    env: EnvSnapshot,
    timeout: Duration,
) -> RunRecord {
    let mut processes = Vec::with_capacity(pids.len());
    let mut failures = Vec::new();
    for (index, (&pid, sched)) in pids.iter().zip(scheds).enumerate() {
        let (exit, usage, stat, seen_ns) = waited.ended.get(&pid).copied().unwrap_or((
            Exit::Signal(libc::SIGKILL),
            Usage::default(),
            None,
            proc::monotonic_ns(),
        ));
        let result: Option<WorkerResult> = std::fs::read(worker::result_path(dir, index))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        let ok = exit.success() && result.is_some();
        let tail = if ok {
            String::new()
        } else {
            stderr_tail(&worker::stderr_path(dir, index))
        };
        if !ok && !waited.timed_out {
            let what = if exit.success() {
                "exited without a result".to_string()
            } else {
                exit.describe()
            };
            let last = tail.lines().last().unwrap_or("").to_string();
            failures.push(if last.is_empty() {
                format!("worker {index}: {what}")
            } else {
                format!("worker {index}: {what}: {last}")
            });
        }
        let since = |t: u64| t.saturating_sub(release_ns);
        let (start_ns, end_ns) = match &result {
            Some(r) => (Some(since(r.start_ns)), Some(since(r.end_ns))),
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
                    (Some(a), Some(b)) => Some(procfs::SchedStat {
                        run_ns: b.run_ns.saturating_sub(a.run_ns),
                        wait_ns: b.wait_ns.saturating_sub(a.wait_ns),
                        timeslices: b.timeslices.saturating_sub(a.timeslices),
                    }),
                    _ => stat,
                },
            ),
            None => (usage, stat),
        };
        processes.push(ProcessRecord {
            index: index as u32,
            pid,
            sched: *sched,
            start_ns,
            end_ns,
            wall_ns: end_ns.unwrap_or_else(|| since(seen_ns)),
            utime_us: usage.utime_us,
            stime_us: usage.stime_us,
            nvcsw: usage.nvcsw,
            nivcsw: usage.nivcsw,
            minflt: usage.minflt,
            majflt: usage.majflt,
            maxrss_kb: usage.maxrss_kb,
            run_ns: stat.map(|s| s.run_ns),
            wait_ns: stat.map(|s| s.wait_ns),
            timeslices: stat.map(|s| s.timeslices),
            work: result.as_ref().map(|r| r.output.work),
            work_unit: run.workload.workload.work_unit().to_string(),
            figures: result
                .as_ref()
                .map(|r| r.output.figures.clone())
                .unwrap_or_default(),
            exit: exit.describe(),
            ok,
            stderr_tail: tail,
        });
    }
    let makespan_ns = processes.iter().map(|p| p.wall_ns).max();
    let cpu_us: u64 = processes.iter().map(|p| p.utime_us + p.stime_us).sum();
    let cpu_util = makespan_ns
        .filter(|&m| m > 0)
        .map(|m| cpu_us as f64 * 1000.0 / (m as f64 * cpu_list.len().max(1) as f64));
    let (status, reason) = if waited.timed_out {
        let unfinished = processes.iter().filter(|p| !p.ok).count();
        (
            RunStatus::TimedOut,
            format!(
                "the run exceeded timeout_s = {} s; {unfinished} of {} workers were killed",
                timeout.as_secs_f64(),
                processes.len()
            ),
        )
    } else if !failures.is_empty() {
        let more = if failures.len() > 3 {
            format!(" (and {} more)", failures.len() - 3)
        } else {
            String::new()
        };
        (
            RunStatus::Failed,
            format!("{}{more}", failures[..failures.len().min(3)].join("; ")),
        )
    } else {
        (RunStatus::Ok, String::new())
    };
    RunRecord {
        run: run.clone(),
        status,
        reason,
        makespan_ns,
        cpu_util,
        cpu_list,
        started_unix_ms,
        env,
        processes,
    }
}
