//! The worker side: what a re-executed `schedlab __worker` process does. It
//! was put under its policy, priority and affinity before exec; here it waits
//! on the start barrier, runs its workload, and leaves its result in a file
//! for the parent.

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::io::Read;
use std::path::PathBuf;

use crate::sys::proc::{Usage, monotonic_ns, self_usage};
use crate::sys::procfs::{SchedStat, read_schedstat};
use crate::workload::{WorkContext, WorkOutput, Workload};

pub use crate::sys::proc::BARRIER_FD;

/// Environment variable for fault injection in tests:
/// `abort-worker:N` makes worker N abort right after the barrier.
pub const FAULT_ENV: &str = "SCHEDLAB_FAULT";

/// What the parent tells a worker (one JSON argument).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerArgs {
    pub workload: Workload,
    pub dir: PathBuf,
    pub index: usize,
    /// The workload's channels (see `workload::Wiring`), kept open across
    /// exec for this worker.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fds: Vec<i32>,
    /// False for a companion that starts at once (an RT hog warming up to
    /// its steady state before the workers are released).
    #[serde(default = "yes")]
    pub wait_barrier: bool,
}

fn yes() -> bool {
    true
}

/// What a worker reports (the file `result-<index>.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerResult {
    /// CLOCK_MONOTONIC when the barrier opened for this worker and when its
    /// work ended.
    pub start_ns: u64,
    pub end_ns: u64,
    /// The worker's own counters at those two moments, so that process
    /// start-up (exec, loading, waiting on the barrier) and exit stay out of
    /// the measurement.
    pub usage_start: Usage,
    pub usage_end: Usage,
    pub schedstat_start: Option<SchedStat>,
    pub schedstat_end: Option<SchedStat>,
    pub output: WorkOutput,
}

/// The file in which the parent leaves the barrier's release time.
pub fn release_path(dir: &std::path::Path) -> PathBuf {
    dir.join("release")
}

fn read_release_ns(dir: &std::path::Path) -> Option<u64> {
    std::fs::read_to_string(release_path(dir))
        .ok()?
        .trim()
        .parse()
        .ok()
}

pub fn result_path(dir: &std::path::Path, index: usize) -> PathBuf {
    dir.join(format!("result-{index}.json"))
}

pub fn stderr_path(dir: &std::path::Path, index: usize) -> PathBuf {
    dir.join(format!("stderr-{index}.txt"))
}

/// Entry point of worker mode. Returns the process exit code.
pub fn main(json: &str) -> i32 {
    match run(json) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("worker error: {e:#}");
            1
        }
    }
}

fn run(json: &str) -> Result<()> {
    let args: WorkerArgs =
        serde_json::from_str(json).context("bad worker arguments (this mode is internal)")?;
    if args.wait_barrier {
        wait_for_barrier()?;
    }
    let start_ns = monotonic_ns();
    let usage_start = self_usage();
    let schedstat_start = read_schedstat(std::process::id() as i32).ok();
    if let Ok(fault) = std::env::var(FAULT_ENV)
        && fault == format!("abort-worker:{}", args.index)
    {
        eprintln!("fault injection: worker {} aborts", args.index);
        std::process::abort();
    }
    // A fixed duration runs from barrier release to release + duration for
    // every worker, as "work done by each in 30 s" means: a worker that gets
    // the CPU late has less of it left, and none runs on past the others.
    let ctx = WorkContext {
        fds: args.fds.clone(),
        dir: args.dir.clone(),
        index: args.index,
        release_ns: read_release_ns(&args.dir),
    };
    let output = args.workload.run(&ctx)?;
    let end_ns = monotonic_ns();
    let usage_end = self_usage();
    let schedstat_end = read_schedstat(std::process::id() as i32).ok();
    let result = WorkerResult {
        start_ns,
        end_ns,
        usage_start,
        usage_end,
        schedstat_start,
        schedstat_end,
        output,
    };
    let path = result_path(&args.dir, args.index);
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, serde_json::to_vec(&result)?)
        .with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, &path).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// Block until the parent closes the barrier's write end (EOF).
fn wait_for_barrier() -> Result<()> {
    let mut barrier = crate::sys::proc::take_barrier()
        .context("the start barrier was taken already (this mode is internal)")?;
    let mut buf = [0u8; 16];
    loop {
        match barrier.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e).context("reading the start barrier"),
        }
    }
}
