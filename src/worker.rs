//! The worker side: what a re-executed `schedlab __worker` process does. It
//! was put under its policy, priority and affinity before exec; here it waits
//! on the start barrier, reads the release time, runs its workload, and
//! hands its result to the parent through its result pipe; where the parent
//! asks, it then waits (parked, asleep) until every worker has reported
//! before it exits.
//!
//! Descriptors the parent set up: the barrier (`BARRIER_FD`), the result
//! pipe's write end (`RESULT_FD`), the run's release-time file
//! (`RELEASE_FD`), the leave pipe's read end (`LEAVE_FD`, only for a worker
//! that parks), and stderr, a pipe the parent drains (it keeps the last
//! lines, recorded when the worker fails). Nothing is written to the file
//! system unless the workload works on files.

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

use crate::sys::proc::{Usage, monotonic_ns, self_usage};
use crate::sys::procfs::{ProcFile, SchedStat};
use crate::workload::{WorkContext, WorkOutput, Workload};

pub use crate::sys::proc::{BARRIER_FD, LEAVE_FD, RELEASE_FD, RESULT_FD};

/// Environment variable for fault injection in tests, `FAULT:N` for
/// worker N:
/// - `abort-worker:N` aborts right after the barrier;
/// - `cut-result:N` writes half of its result, then aborts;
/// - `big-result:N` pads its result with 1 MiB of white space (a valid
///   result far beyond a pipe's capacity);
/// - `chatty:N` writes 1 MiB to stderr before its work (beyond a pipe's
///   capacity too), then works normally.
pub const FAULT_ENV: &str = "SCHEDLAB_FAULT";

/// Whether fault `name` is injected into worker `index`.
fn fault(name: &str, index: usize) -> bool {
    std::env::var(FAULT_ENV).is_ok_and(|f| f == format!("{name}:{index}"))
}

/// What the parent tells a worker (one JSON argument).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerArgs {
    pub workload: Workload,
    /// The run directory, when the workload works on files
    /// (`Workload::needs_dir`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dir: Option<PathBuf>,
    /// The campaign's work directory (where run directories go). Unused by
    /// the worker: it shows in its command line which campaign it belongs
    /// to, also when the run has no directory of its own.
    #[serde(default)]
    pub workdir: PathBuf,
    pub index: usize,
    /// The workload's channels (see `workload::Wiring`), kept open across
    /// exec for this worker.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fds: Vec<i32>,
    /// False for a companion that starts at once (an RT hog warming up to
    /// its steady state before the workers are released).
    #[serde(default = "yes")]
    pub wait_barrier: bool,
    /// Once its result is written, the worker sleeps on the leave pipe
    /// (`LEAVE_FD`) until the parent closes it, which it does when every
    /// worker of the run has reported (or failed), and only then exits. Its
    /// exit is schedlab's cost, not the workload's: the kernel's teardown
    /// of an exec'd schedlab takes about 0.2 ms of CPU here, against under
    /// 0.1 ms for a forked hackbench child, and an early finisher's would
    /// otherwise take CPU time from workers still measuring (or, on one CPU
    /// under FIFO, delay the next worker's start). Set by the parent only
    /// where nothing depends on when a worker exits (no CPU hog, whose
    /// window ends when every worker is reaped; no WRR dispatcher, which
    /// hands the CPU on as workers exit; no program).
    #[serde(default)]
    pub park_when_done: bool,
}

fn yes() -> bool {
    true
}

/// What a worker reports (JSON, through its result pipe).
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
    /// `se.nr_migrations` of `/proc/self/sched` just before the barrier
    /// (so the long read stays out of the run) and when the work ended.
    #[serde(default)]
    pub nr_migrations_start: Option<u64>,
    #[serde(default)]
    pub nr_migrations_end: Option<u64>,
    pub output: WorkOutput,
}

/// The release time the parent wrote to the release-time file just before
/// opening the barrier (8 bytes, little-endian); None before that (a
/// companion that does not wait for the barrier) or without the file.
fn read_release_ns() -> Option<u64> {
    let file = crate::sys::proc::take_release()?;
    let mut buf = [0u8; 8];
    file.read_exact_at(&mut buf, 0).ok()?;
    Some(u64::from_le_bytes(buf))
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
    // Read before the barrier: /proc/self/sched is a long text (16 µs a
    // read here), and with every worker reading it at once just after
    // release (160 of them in hackbench's default messaging) the reads
    // would delay the work inside the run's makespan. A sleeping task only
    // moves when it wakes, so the count gains at most the migrations of the
    // few steps to the barrier and of the wake-up at release. (Before the
    // naming, the last step before the barrier: see launch::ready.)
    //
    // Both counter files are opened here, before the barrier, and read by
    // offset at the start and end of the work: the end readings happen
    // while the worker still holds its CPU, which under FIFO the next
    // worker waits for, so they should cost no path walk (see ProcFile).
    let pid = std::process::id();
    let mut sched_file = ProcFile::open(format!("/proc/{pid}/sched")).ok();
    let mut schedstat_file = ProcFile::open(format!("/proc/{pid}/schedstat")).ok();
    let nr_migrations_start = sched_file.as_mut().and_then(|f| f.nr_migrations().ok());
    // Workers are re-executed through /proc/self/exe, so the kernel would
    // call every one `exe`: give each its own name for ps and traces.
    let _ = crate::sys::proc::set_thread_name(&format!("schedlab-w{}", args.index));
    // The process's first clock read faults in the vDSO's data page (a few
    // µs): take that fault here, not between the barrier and start_ns; and
    // the look-up of whether rusage's block counts are kept (a stat of
    // /proc/self/io) here, not in the first getrusage after the start.
    monotonic_ns();
    crate::sys::proc::io_accounted();
    // The barrier is closed after start_ns, not before: a close is a
    // system call between the CPU's hand-over and the start.
    let barrier = if args.wait_barrier {
        Some(wait_for_barrier()?)
    } else {
        None
    };
    let start_ns = monotonic_ns();
    let usage_start = self_usage();
    let schedstat_start = schedstat_file.as_mut().and_then(|f| f.schedstat().ok());
    drop(barrier);
    if fault("abort-worker", args.index) {
        eprintln!("fault injection: worker {} aborts", args.index);
        std::process::abort();
    }
    if fault("chatty", args.index) {
        let line = format!("fault injection: worker {} chatters\n", args.index);
        let mut err = std::io::stderr().lock();
        for _ in 0..(1 << 20) / line.len() {
            err.write_all(line.as_bytes())?;
        }
    }
    // A fixed duration runs from barrier release to release + duration for
    // every worker, as "work done by each in 30 s" means: a worker that gets
    // the CPU late has less of it left, and none runs on past the others.
    let ctx = WorkContext {
        fds: args.fds.clone(),
        dir: args.dir.clone().unwrap_or_default(),
        index: args.index,
        release_ns: read_release_ns(),
    };
    let output = args.workload.run(&ctx)?;
    let end_ns = monotonic_ns();
    // getrusage before the schedstat read, here and at the start: it brings
    // the running task's sum_exec_runtime up to date (the kernel's
    // task_sched_runtime), which /proc/PID/schedstat alone shows only as
    // of the last tick or switch (up to 4 ms old at HZ 250).
    let usage_end = self_usage();
    let schedstat_end = schedstat_file.as_mut().and_then(|f| f.schedstat().ok());
    let nr_migrations_end = sched_file.as_mut().and_then(|f| f.nr_migrations().ok());
    let result = WorkerResult {
        start_ns,
        end_ns,
        usage_start,
        usage_end,
        schedstat_start,
        schedstat_end,
        nr_migrations_start,
        nr_migrations_end,
        output,
    };
    send_result(&result, args.index)?;
    if args.park_when_done {
        wait_to_leave()?;
    }
    Ok(())
}

/// Write the result to the result pipe, whole, and close it. The parent
/// drains the pipe while it waits, so a result larger than the pipe's
/// capacity only makes this wait; a worker that dies before the end leaves
/// a cut JSON text, which the parent rejects.
fn send_result(result: &WorkerResult, index: usize) -> Result<()> {
    let mut json = serde_json::to_vec(result)?;
    if fault("big-result", index) {
        json.resize(json.len() + (1 << 20), b' ');
    }
    let mut pipe = crate::sys::proc::take_result_pipe()
        .context("the result pipe is missing (this mode is internal)")?;
    if fault("cut-result", index) {
        pipe.write_all(&json[..json.len() / 2])?;
        eprintln!("fault injection: worker {index} aborts while writing its result");
        std::process::abort();
    }
    pipe.write_all(&json).context("writing the result")?;
    Ok(())
}

/// Block until the parent closes the barrier's write end (EOF); returns the
/// barrier for the caller to close.
fn wait_for_barrier() -> Result<std::fs::File> {
    let mut barrier = crate::sys::proc::take_barrier()
        .context("the start barrier was taken already (this mode is internal)")?;
    // Reads until end of file (retrying interrupted reads).
    std::io::copy(&mut barrier, &mut std::io::sink()).context("reading the start barrier")?;
    Ok(barrier)
}

/// Sleep until the parent closes the leave pipe's write end (EOF): every
/// worker of the run has reported. The parent's death closes it too.
fn wait_to_leave() -> Result<()> {
    let mut leave = crate::sys::proc::take_leave()
        .context("the leave pipe is missing (this mode is internal)")?;
    std::io::copy(&mut leave, &mut std::io::sink()).context("waiting on the leave pipe")?;
    Ok(())
}
