//! Starting workers: the schedlab binary re-executed in worker mode, with
//! policy, priority and affinity applied in the child before `exec`, and
//! blocked on the start barrier until every worker of the run exists.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;
use std::process::{Command, Stdio};

use crate::policy::ProcSched;
use crate::sys::{child, sched};
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
    child::configure(
        &mut cmd,
        child::ChildSetup {
            unblock_signals: true,
            die_with_parent: true,
            own_process_group: true,
            move_fds: vec![(barrier_fd, worker::BARRIER_FD)],
            keep_fds: args.fds.clone(),
            attr: Some(attr),
            affinity: Some(set),
        },
    );
    match cmd.spawn() {
        Ok(child) => Ok(child.id() as i32),
        Err(e) => {
            let (_, errno) = child::spawn_failure(&e);
            let message = match errno {
                Some(n) => std::io::Error::from_raw_os_error(n).to_string(),
                None => e.to_string(),
            };
            Err(fail(errno, message))
        }
    }
}
