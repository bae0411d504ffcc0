//! Starting workers: the schedlab binary re-executed in worker mode, with
//! policy, priority and affinity applied in the child before `exec`, and
//! blocked on the start barrier until every worker of the run exists.

use std::os::fd::{AsRawFd, OwnedFd};
use std::process::{Command, Stdio};

use crate::launch::outputs::ChildEnds;
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

/// The descriptors every process of a run shares, numbered at least
/// `outputs::HIGH_FD`.
pub struct Shared<'a> {
    /// The read end of the start barrier.
    pub barrier: &'a OwnedFd,
    /// The run's release-time file.
    pub release: &'a OwnedFd,
    /// The read end of the leave pipe, for workers that park once measured.
    pub leave: Option<&'a OwnedFd>,
}

/// Start worker `index`. The child is left waiting on the barrier; its
/// result and stderr go to the write ends in `ends` (closed here).
pub fn spawn_worker(
    args: &WorkerArgs,
    sched: &ProcSched,
    cpus: &[usize],
    shared: &Shared,
    ends: ChildEnds,
) -> Result<i32, SpawnError> {
    let index = args.index;
    let fail = |errno: Option<i32>, message: String| SpawnError {
        index,
        errno,
        message,
    };
    // A workload too large for a command line reaches the worker another
    // way (a replay's tasks, through its wiring).
    let lean = args.workload.imp().lean().map(|workload| WorkerArgs {
        workload,
        ..args.clone()
    });
    let json = serde_json::to_string(lean.as_ref().unwrap_or(args))
        .map_err(|e| fail(None, e.to_string()))?;
    let attr = sched.attr();
    let set = sched::cpu_set(cpus);
    // A worker that becomes another program writes that program's stdout
    // into its result pipe (it has no result of its own).
    let stdout = match args.workload.is_command() {
        true => ends
            .result
            .try_clone()
            .map(Stdio::from)
            .map_err(|e| fail(e.raw_os_error(), format!("cannot pass its stdout: {e}")))?,
        false => Stdio::null(),
    };
    let mut move_fds = vec![
        (shared.barrier.as_raw_fd(), worker::BARRIER_FD),
        (ends.result.as_raw_fd(), worker::RESULT_FD),
        (shared.release.as_raw_fd(), worker::RELEASE_FD),
    ];
    if args.park_when_done {
        let leave = shared
            .leave
            .ok_or_else(|| fail(None, "parks once measured but has no leave pipe".into()))?;
        move_fds.push((leave.as_raw_fd(), worker::LEAVE_FD));
    }
    let mut cmd = Command::new("/proc/self/exe");
    cmd.arg("__worker")
        .arg(json)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(Stdio::from(ends.stderr));
    child::configure(
        &mut cmd,
        child::ChildSetup {
            unblock_signals: true,
            die_with_parent: true,
            // A program (which may run as another user) leaves schedlab's
            // session and controlling terminal: no TIOCSTI into it.
            own_process_group: true,
            own_session: args.workload.is_command(),
            move_fds,
            keep_fds: args.fds.clone(),
            attr: Some(attr),
            affinity: Some(set),
        },
    );
    let spawned = cmd.spawn();
    // The parent's copies of the child's ends close here (the stderr end
    // with `cmd`): only the child holds them, so the parent's reads see
    // end of file once it is gone.
    drop(ends.result);
    drop(cmd);
    match spawned {
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
