//! Running one planned run on real processes, in phases a reader can name,
//! each a type that owns what it made and undoes it when dropped:
//!
//! 1. [`prepare`]: the trace instance, the run directory and the
//!    workload's input, the channels between cooperating workers, another
//!    program's sched_ext scheduler (before any worker exists);
//! 2. [`spawned`]: every process at the start barrier with its policy
//!    applied, handed to WRR or the sched_ext scheduler, followed by the
//!    trace;
//! 3. [`release`]: the parent raised above RT workers, the counters taken
//!    from release, the barrier opened;
//! 4. [`wait`]: reaped as they exit, pipes drained, timeout and Ctrl-C
//!    taken, what ran beside the workers stopped;
//! 5. [`record`]: the [`RunRecord`] built from what was observed.
//!
//! [`Launcher`] is the real machine's implementation of
//! [`crate::campaign::Executor`]'s one job: carrying out a run.

mod ext_scheduler;
mod guard;
mod interference;
mod leave;
mod members;
pub mod outputs;
mod prepare;
mod program;
mod ready;
mod record;
mod release;
pub mod rundir;
mod spawn;
mod spawned;
mod trace_slot;
mod trees;
mod wait;

use anyhow::Result;
use std::path::PathBuf;
use std::time::Duration;

use crate::plan::Run;
use crate::policy;
use crate::record::{RunRecord, RunStatus};
use crate::spec::{Spec, WrrSettings};
use crate::sys::envinfo::EnvSnapshot;
use crate::sys::probe;
use crate::trace::{Capture, Prediction};
use crate::wrr::Mechanism;

pub use guard::ParentPriority;

/// How a run ended from the launcher's point of view.
pub enum Outcome {
    /// Finished (ok, failed, timed out or skipped): store it, with its
    /// capture when the run was traced.
    Done(Box<RunRecord>, Option<Box<Capture>>),
    /// Carried out by the model: store it with its predicted timeline.
    Predicted(Box<RunRecord>, Box<Prediction>),
    /// The user stopped schedlab (signal number) while the run was going: its
    /// workers were killed and nothing is stored, so it runs again on resume.
    Interrupted(i32),
}

/// How a phase ends a run before its record could be built.
pub(crate) enum Early {
    /// The run ends with this status and reason (it is stored).
    Ends(RunStatus, String),
    /// The user stopped schedlab (the signal): nothing is stored.
    Interrupted(i32),
    /// The campaign cannot go on.
    Fatal(anyhow::Error),
}

impl Early {
    fn failed(reason: impl Into<String>) -> Early {
        Early::Ends(RunStatus::Failed, reason.into())
    }
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
    /// Say nothing on standard error during a run (`--quiet`).
    pub quiet: bool,
    /// Where runs are traced (tracefs root and instance name), when the
    /// campaign traces them ([`Launcher::trace_into`]).
    trace: Option<TraceTarget>,
    /// The tracing instance between traced runs (made ahead of the first,
    /// handed from each to the next, removed after the last).
    trace_slot: trace_slot::TraceSlot,
    /// The WRR mechanism this machine allows (`wrr.mechanism = "auto"`),
    /// probed on first use: ext, else fifo, else signals.
    wrr_mechanism: std::sync::OnceLock<Mechanism>,
    /// The soft RLIMIT_NOFILE the campaign was checked against; a run
    /// raises it by the descriptors of its workers' pipes.
    open_files_base: u64,
    /// The cgroup session that accounts and kills programs' process trees
    /// (`kind = "command"`), opened on the first run that needs it, or why
    /// it cannot be.
    trees: std::sync::OnceLock<Result<crate::sys::cgroup::TreeGroups, String>>,
}

/// Where a traced run records: the instance `name` under tracefs `root`
/// (held by the campaign's `knobs::TraceGuard`).
#[derive(Debug, Clone)]
pub struct TraceTarget {
    pub root: PathBuf,
    pub name: String,
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
            quiet: false,
            trace: None,
            trace_slot: trace_slot::TraceSlot::default(),
            wrr_mechanism: std::sync::OnceLock::new(),
            cpu_dma_latency_us: spec.cpu_dma_latency_us,
            open_files_base: probe::rlimit(libc::RLIMIT_NOFILE).0,
            trees: std::sync::OnceLock::new(),
        }
    }

    /// The cgroup session for programs' trees, opened once.
    fn trees(&self) -> Result<&crate::sys::cgroup::TreeGroups, String> {
        self.trees
            .get_or_init(|| {
                crate::sys::cgroup::TreeGroups::open().map_err(|e| {
                    format!(
                        "a command's process tree is measured through a cgroup per worker, \
                         which cannot be made here: {e:#}"
                    )
                })
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// Record every run's scheduling events in tracefs instance `name`
    /// under `root` from now on.
    pub fn trace_into(&mut self, target: TraceTarget) {
        self.trace = Some(target);
    }

    /// The instance a finished run handed back, or the one made ahead,
    /// if any (taken: a run owns it until it hands it back).
    fn take_kept_trace(&self) -> Option<crate::trace::capture::Kept> {
        self.trace_slot.take()
    }

    /// Keeps a finished run's instance for the next run.
    fn keep_trace(&self, kept: crate::trace::capture::Kept) {
        self.trace_slot.keep(kept);
    }

    /// Starts making the tracing instance on a thread, configured for
    /// `run` (the campaign's first traced run), while the caller goes on
    /// (see [`trace_slot`]). Nothing when runs are not traced, or `run`
    /// cannot have its CPUs (it is skipped when it comes).
    pub fn trace_ahead(&self, run: &Run, env: &EnvSnapshot) {
        let Some(t) = &self.trace else { return };
        let Ok(cast) = members::cast(run, &self.setting(), env) else {
            return;
        };
        let (cpus, buffer_kb) = prepare::traced_shape(run, &cast, env);
        let (root, name) = (t.root.clone(), t.name.clone());
        self.trace_slot
            .make_ahead(move || crate::trace::capture::Kept::make(&root, &name, &cpus, buffer_kb));
    }

    /// No run of this launcher will be traced again: its instance is
    /// removed on a thread while the caller stores the last run; dropping
    /// the launcher waits for it.
    pub fn trace_done(&self) {
        self.trace_slot.remove_in_background();
    }

    fn setting(&self) -> members::Setting<'_> {
        members::Setting {
            allowed_cpus: &self.allowed_cpus,
            deadline: &self.deadline,
            hog: self.hog.as_ref(),
            timeout: self.timeout,
            rt_period_us: self.rt_period_us,
        }
    }

    /// Run `run` to the end, phase by phase.
    pub fn launch(&self, run: &Run) -> Result<Outcome> {
        let start = record::Start::now();
        let cast = match members::cast(run, &self.setting(), &start.env) {
            Ok(c) => c,
            Err((cpus, reason)) => {
                let rec = start.ended_early(run, RunStatus::Skipped, cpus, reason);
                return Ok(Outcome::Done(Box::new(rec), None));
            }
        };
        let ended = prepare::Prepared::make(self, run, &cast, &start.env)
            .and_then(|p| spawned::Spawned::spawn(self, &cast, p))
            .and_then(|s| release::Released::release(self, &cast, s))
            .and_then(|r| r.wait(self, &cast.members));
        match ended {
            Ok(ended) => {
                let (rec, capture) = record::record(
                    run,
                    &cast,
                    ended,
                    start,
                    self.timeout,
                    self.cpu_dma_latency_us,
                );
                Ok(Outcome::Done(Box::new(rec), capture))
            }
            Err(Early::Ends(status, reason)) => {
                let rec = start.ended_early(run, status, cast.cpus, reason);
                Ok(Outcome::Done(Box::new(rec), None))
            }
            Err(Early::Interrupted(sig)) => Ok(Outcome::Interrupted(sig)),
            Err(Early::Fatal(e)) => Err(e),
        }
    }
}
