//! The second phase of a run: every process spawned and blocked on the
//! start barrier with its policy, priority and affinity applied, then
//! handed to the scheduler that is not the kernel's default (another
//! program's sched_ext scheduler, schedlab's WRR) and followed by the trace.
//! [`Spawned`] owns the processes: dropping it before they were waited for
//! kills and reaps every one (they are schedlab's own children, by pid).

use std::os::fd::OwnedFd;

use anyhow::Context;

use crate::policy::Class;
use crate::record::RunStatus;
use crate::sys::cgroup::TreeGroup;
use crate::sys::{fds, probe, proc, procfs};
use crate::trace::Task as TraceTask;
use crate::worker::WorkerArgs;
use crate::wrr::{self, Task, WrrRun};

use super::leave::Leave;
use super::members::{Cast, Member, Role, describe_sched};
use super::outputs::{self, Outputs};
use super::prepare::Prepared;
use super::{Early, Launcher, spawn};

/// A run's processes, killed and reaped when dropped: those not reaped yet
/// (a reaped pid may already belong to another process).
pub struct Workers {
    pub pids: Vec<i32>,
    reaped: std::collections::HashSet<i32>,
}

impl Workers {
    fn new(capacity: usize) -> Workers {
        Workers {
            pids: Vec::with_capacity(capacity),
            reaped: Default::default(),
        }
    }

    /// `pid` was reaped by the wait.
    pub fn reaped(&mut self, pid: i32) {
        self.reaped.insert(pid);
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        let live: Vec<i32> = self
            .pids
            .iter()
            .copied()
            .filter(|p| !self.reaped.contains(p))
            .collect();
        for &p in &live {
            proc::kill(p, libc::SIGKILL);
        }
        for &p in &live {
            let _ = proc::reap(p);
        }
    }
}

/// A run whose processes wait at the barrier. Fields drop in order: the
/// workers are killed before their trees (whatever a program started),
/// then the dispatcher, trace and scheduler go.
pub struct Spawned {
    pub workers: Workers,
    /// Per member: the cgroup of a program's process tree (`kind =
    /// "command"`), None for schedlab's own workers and hogs.
    pub trees: Vec<Option<TreeGroup>>,
    pub dispatcher: Option<WrrRun>,
    pub outputs: Outputs,
    /// The write end of the barrier: closing it releases every worker.
    pub barrier_w: Option<OwnedFd>,
    /// Holds workers that park once measured until the last has reported.
    pub leave: Option<Leave>,
    /// The run's release-time file (written just before release).
    pub release: Option<OwnedFd>,
    /// The EEVDF slice the kernel granted each fair process.
    pub granted: Vec<Option<u64>>,
    pub prepared: Prepared,
}

impl Spawned {
    /// Spawn the cast behind a new barrier and hand it over.
    pub fn spawn(l: &Launcher, cast: &Cast, prepared: Prepared) -> Result<Spawned, Early> {
        let (barrier_r, barrier_w) = proc::pipe()
            .context("creating the start barrier")
            .map_err(Early::Fatal)?;
        let barrier_r = fds::at_least(barrier_r, outputs::HIGH_FD)
            .context("creating the start barrier")
            .map_err(Early::Fatal)?;
        // Fixed durations run from release: the parent writes it here just
        // before opening the barrier, the workers read it just after.
        let release = release_file()
            .context("creating the release-time file")
            .map_err(Early::Fatal)?;
        let mut outputs = Outputs::new()
            .context("watching the workers' pipes")
            .map_err(Early::Fatal)?;
        let mut workers = Workers::new(cast.members.len());
        let mut trees: Vec<Option<TreeGroup>> = Vec::with_capacity(cast.members.len());
        // Workers park once measured where nothing depends on when they
        // exit (`WorkerArgs::park_when_done`): they leave together once
        // every one has reported.
        let (leave, leave_r) = match cast.workers_park_when_done() {
            true => {
                let (leave, read) = Leave::open()
                    .context("creating the leave pipe")
                    .map_err(Early::Fatal)?;
                (Some(leave), Some(read))
            }
            false => (None, None),
        };
        // Every worker's start-up (exec, loading, setup: a few ms here,
        // hundreds of ms in a TCG guest) is over before a hog starts
        // spinning beside it and before release (see `ready`).
        let mut workers_ready = false;
        for (index, m) in cast.members.iter().enumerate() {
            if m.role == Role::Hog && !workers_ready {
                wait_for_workers(l, cast, &workers.pids)?;
                workers_ready = true;
            }
            let args = WorkerArgs {
                fds: match m.role {
                    Role::Worker => prepared.wiring.fds_of(index).to_vec(),
                    Role::Hog => Vec::new(),
                },
                workload: m.workload.clone(),
                dir: prepared.dir.as_ref().map(|d| d.path().to_path_buf()),
                workdir: l.workdir.clone(),
                index,
                wait_barrier: m.role == Role::Worker,
                park_when_done: leave.is_some(),
            };
            let shared = spawn::Shared {
                barrier: &barrier_r,
                release: &release,
                leave: leave_r.as_ref(),
            };
            let program = m.role == Role::Worker && m.workload.is_command();
            let spawned = match outputs.open_for(program) {
                Ok(ends) => spawn::spawn_worker(&args, &m.sched, &m.cpus, &shared, ends),
                Err(e) => Err(spawn::SpawnError {
                    index,
                    errno: e.raw_os_error(),
                    message: match &prepared.open_files {
                        Ok(n) => format!("cannot make its pipes ({n} open files allowed): {e}"),
                        Err(_) => format!("cannot make its pipes: {e}"),
                    },
                }),
            };
            match spawned {
                Ok(pid) => workers.pids.push(pid),
                Err(e) => return Err(spawn_failure(m, &e)),
            }
            // Into its own cgroup while it still waits at the barrier:
            // nothing of the program can have forked yet.
            trees.push(match program {
                true => Some(tree_of(l, index, *workers.pids.last().unwrap_or(&0))?),
                false => None,
            });
        }
        // Before the hand-over, which may stop workers.
        if !workers_ready {
            wait_for_workers(l, cast, &workers.pids)?;
        }
        // The granted slice is read while they wait (what the kernel
        // reports back, clamped to its range).
        let granted = cast
            .members
            .iter()
            .zip(&workers.pids)
            .map(|(m, &pid)| match m.sched.policy.class() {
                Class::Fair => crate::sys::sched::fair_slice_ns(pid),
                _ => None,
            })
            .collect();
        let mut spawned = Spawned {
            workers,
            trees,
            dispatcher: None,
            outputs,
            barrier_w: Some(barrier_w),
            leave,
            release: Some(release),
            granted,
            prepared,
        };
        // The wiring's parent copies close now: every worker has its own.
        spawned.prepared.wiring = Default::default();
        spawned.hand_over(l, cast)?;
        Ok(spawned)
    }

    /// Give the workers to the scheduler the run asks for (still blocked
    /// on the barrier), and make the trace follow them.
    fn hand_over(&mut self, l: &Launcher, cast: &Cast) -> Result<(), Early> {
        let pids = &self.workers.pids;
        if let Some(x) = self.prepared.ext_sched.as_mut() {
            let classes: Vec<Class> = cast
                .members
                .iter()
                .map(|m| m.sched.policy.class())
                .collect();
            let nices: Vec<i32> = cast
                .members
                .iter()
                .map(|m| m.sched.nice.unwrap_or(0))
                .collect();
            x.take_over(pids, &classes, &nices).map_err(Early::failed)?;
        }
        if cast
            .members
            .iter()
            .any(|m| m.sched.policy.class() == Class::Wrr)
        {
            let beside = self
                .prepared
                .ext_sched
                .as_ref()
                .map(|x| x.ops().to_string());
            let tasks = wrr_tasks(&cast.members);
            // A program's worker is its whole tree: WRR acts on its cgroup.
            let trees: Vec<_> = self
                .trees
                .iter()
                .map(|t| t.as_ref().and_then(TreeGroup::control))
                .collect();
            let run = wrr::start::start(
                tasks,
                pids,
                &trees,
                &l.wrr,
                &l.wrr_mechanism,
                beside.as_deref(),
            )
            .map_err(|e| match e {
                wrr::StartError::Skipped(why) => Early::Ends(RunStatus::Skipped, why),
                wrr::StartError::Failed(why) => Early::failed(why),
            })?;
            self.dispatcher = Some(run);
        }
        if let Some(r) = self.prepared.recorder.as_mut() {
            let mut tasks: Vec<TraceTask> = pids
                .iter()
                .map(|&pid| TraceTask {
                    tid: pid,
                    tgid: pid,
                    comm: procfs::comm(pid).unwrap_or_default(),
                })
                .collect();
            if self.dispatcher.is_some() {
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
            let away: Vec<usize> = l
                .allowed_cpus
                .iter()
                .copied()
                .filter(|c| !cast.run_cpus.contains(c))
                .collect();
            r.follow(tasks, &away).map_err(|e| {
                Early::failed(format!("tracing could not follow the workers: {e:#}"))
            })?;
        }
        Ok(())
    }
}

/// Waits until every worker among the first `pids` of `cast` waits at the
/// barrier (`ready::wait_at_barrier`).
fn wait_for_workers(l: &Launcher, cast: &Cast, pids: &[i32]) -> Result<(), Early> {
    let waited: Vec<(usize, i32)> = cast
        .members
        .iter()
        .zip(pids)
        .enumerate()
        .filter(|(_, (m, _))| super::ready::waited_for(m.role))
        .map(|(index, (_, &pid))| (index, pid))
        .collect();
    super::ready::wait_at_barrier(&waited, &l.signals)
}

/// Worker `index`'s cgroup, with its process `pid` in it.
fn tree_of(l: &Launcher, index: usize, pid: i32) -> Result<TreeGroup, Early> {
    let session = l
        .trees()
        .map_err(|why| Early::Ends(RunStatus::Skipped, why))?;
    let tag = format!("run{}", std::process::id());
    let mut tree = session
        .create(&tag, index)
        .map_err(|e| Early::failed(format!("worker {index}'s cgroup: {e:#}")))?;
    tree.attach_pid(pid)
        .map_err(|e| Early::failed(format!("worker {index}'s cgroup: {e:#}")))?;
    Ok(tree)
}

/// The WRR tasks of a run: a run queue per CPU, slice = quantum × weight.
fn wrr_tasks(members: &[Member]) -> Vec<Task> {
    members
        .iter()
        .enumerate()
        .map(|(i, m)| Task {
            id: i,
            weight: m.sched.weight.unwrap_or(1),
            cpu: m.cpus[0],
        })
        .collect()
}

/// Why a process could not be started, as the run's status and reason.
fn spawn_failure(m: &Member, e: &spawn::SpawnError) -> Early {
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
    Early::Ends(status, reason)
}

/// The run's release-time file: in memory, or else an unnamed temporary
/// file; numbered above the numbers workers' descriptors are moved to.
fn release_file() -> std::io::Result<OwnedFd> {
    let fd = match fds::memfd(c"schedlab-release") {
        Ok(fd) => fd,
        Err(_) => tempfile::tempfile()?.into(),
    };
    fds::at_least(fd, outputs::HIGH_FD)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Policy, ProcSched};

    #[test]
    fn a_refused_policy_skips_and_names_the_worker_and_schedule() {
        let m = Member {
            role: Role::Worker,
            sched: ProcSched::realtime(Policy::Fifo, 50),
            cpus: vec![0],
            workload: crate::workload::Workload::Pi(crate::workload::PiParams {
                stop: crate::workload::Stop::Work(1),
            }),
        };
        let e = spawn::SpawnError {
            index: 3,
            errno: Some(libc::EPERM),
            message: "denied".into(),
        };
        let Early::Ends(status, reason) = spawn_failure(&m, &e) else {
            panic!("not a run's end")
        };
        assert_eq!(status, RunStatus::Skipped);
        assert!(
            reason.starts_with("worker 3 could not be put under SCHED_FIFO priority 50"),
            "{reason}"
        );
    }

    #[test]
    fn wrr_tasks_take_weight_and_first_cpu() {
        let mut s = ProcSched::fair(Policy::Other, 0);
        s.weight = Some(4);
        let m = Member {
            role: Role::Worker,
            sched: s,
            cpus: vec![1],
            workload: crate::workload::Workload::Pi(crate::workload::PiParams {
                stop: crate::workload::Stop::Work(1),
            }),
        };
        let t = wrr_tasks(&[m]);
        assert_eq!((t[0].id, t[0].weight, t[0].cpu), (0, 4, 1));
    }
}
