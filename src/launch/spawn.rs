//! Starting workers: the schedlab binary re-executed in worker mode, with
//! policy, priority and affinity applied in the child before `exec`, and
//! blocked on the start barrier until every worker of the run exists.

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::policy::ProcSched;
use crate::sys::{proc, sched};
use crate::worker::{self, WorkerArgs};

/// Why a worker could not be started.
#[derive(Debug)]
pub struct SpawnError {
    pub index: usize,
    pub errno: Option<i32>,
    pub message: String,
}

/// Start worker `index`. The child is left waiting on the barrier whose read
/// end is `barrier`.
pub fn spawn_worker(
    args: &WorkerArgs,
    sched: &ProcSched,
    cpus: &[usize],
    barrier: &OwnedFd,
    dir: &Path,
) -> Result<i32, SpawnError> {
    let index = args.index;
    let fail = |errno: Option<i32>, message: String| SpawnError {
        index,
        errno,
        message,
    };
    let json = serde_json::to_string(args).map_err(|e| fail(None, e.to_string()))?;
    let stderr = std::fs::File::create(worker::stderr_path(dir, index)).map_err(|e| {
        fail(
            e.raw_os_error(),
            format!("creating stderr file in {}: {e}", dir.display()),
        )
    })?;
    let attr = sched.attr();
    let set = sched::cpu_set(cpus);
    let barrier_fd = barrier.as_raw_fd();
    let mut cmd = Command::new("/proc/self/exe");
    cmd.arg("__worker")
        .arg(json)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(stderr));
    // SAFETY: the closure runs in the forked child before exec and calls only
    // async-signal-safe functions (system calls, no allocation or locks).
    unsafe {
        cmd.pre_exec(move || {
            let os = std::io::Error::from_raw_os_error;
            proc::unblock_all_raw().map_err(os)?;
            proc::die_with_parent_raw().map_err(os)?;
            proc::own_process_group_raw().map_err(os)?;
            proc::dup2_raw(barrier_fd, worker::BARRIER_FD).map_err(os)?;
            sched::set_affinity_raw(0, &set).map_err(os)?;
            sched::set_attr_raw(0, &attr).map_err(os)?;
            Ok(())
        });
    }
    match cmd.spawn() {
        Ok(child) => Ok(child.id() as i32),
        Err(e) => Err(fail(e.raw_os_error(), e.to_string())),
    }
}
