//! Applying a [`WrrPolicy`] in the kernel ([`Mechanism::Ext`]): schedlab's
//! sched_ext scheduler (`ext/src/bpf/wrr.bpf.c`, loaded by the `schedlab-ext`
//! crate through [`super::ext_hook`]) is loaded for the run with
//! each worker's slice, the workers are put under SCHED_EXT, and the turns
//! the scheduler reports become the run's [`SliceRecord`]s, as the
//! user-space dispatcher's slices do. A worker's turn covers its whole tree
//! (a `command` worker's children inherit SCHED_EXT and the scheduler puts
//! each forked task in its worker's group): the slice is the CPU time of
//! all the tree's tasks over the turn, recorded under the worker's pid, as
//! the user-space mechanisms charge a tree's cgroup. No thread of schedlab's takes part in
//! scheduling: the ring buffer's reader is its only work, and its CPU time
//! is reported as the dispatcher's.
//!
//! A kernel without sched_ext, another BPF scheduler already loaded, no
//! right to load BPF, or a schedlab built without the `ext` feature: the
//! condition is skipped with [`unavailable`]'s reason. When sched_ext
//! unloads the scheduler on its own (the watchdog saw a task starved, or
//! the BPF program hit an error) the workers finish on the fair class and
//! the run is failed with the kernel's reason.

use std::collections::HashMap;

use anyhow::{Context, Result, ensure};

use super::dispatch::{DispatchReport, Mechanism, SliceEnd, SliceRecord};
use super::ext_hook::{LoadedScheduler, loader};
use super::ext_records::{TurnEnd, Unloaded, Worker};
use super::policy::WrrPolicy;
use crate::sys::proc::monotonic_ns;
use crate::sys::sched::{self, SchedAttr};
use crate::sys::scx::SCHED_EXT;

/// Why the ext mechanism cannot run on this machine now; None when it can.
pub fn unavailable() -> Option<String> {
    crate::sys::scx::status().unavailable()
}

/// The scheduler loaded over a run's workers.
pub struct ExtDispatcher {
    ext: Box<dyn LoadedScheduler>,
    /// pid → task id.
    tasks: HashMap<i32, usize>,
    started_ns: u64,
    cpus: Vec<usize>,
}

impl ExtDispatcher {
    /// Load the scheduler with the slice of every task (one pid per
    /// task, in the order of `policy.tasks()`), pin each worker to its
    /// task's CPU and put it under SCHED_EXT. On error the scheduler
    /// is unloaded again (the workers, if already SCHED_EXT, fall back
    /// to the fair class).
    pub fn start(policy: &WrrPolicy, pids: &[i32]) -> Result<ExtDispatcher> {
        ensure!(
            pids.len() == policy.tasks().len(),
            "{} worker pids for {} tasks",
            pids.len(),
            policy.tasks().len()
        );
        let mut workers = Vec::with_capacity(pids.len());
        let mut tasks = HashMap::with_capacity(pids.len());
        for (t, &pid) in policy.tasks().iter().zip(pids) {
            workers.push(Worker {
                pid,
                slice_ns: policy.slice_of(t.id).unwrap_or(0),
                cpu: u32::try_from(t.cpu)?,
            });
            tasks.insert(pid, t.id);
        }
        let loader = loader().context(crate::wrr::ext_hook::NOT_BUILT)?;
        let ext = (loader.load)(workers)?;
        for (t, &pid) in policy.tasks().iter().zip(pids) {
            sched::set_affinity_raw(pid, &sched::cpu_set(&[t.cpu])).map_err(|errno| {
                anyhow::anyhow!(
                    "cannot pin worker pid {pid} (task {}) to CPU {}: {}",
                    t.id,
                    t.cpu,
                    std::io::Error::from_raw_os_error(errno)
                )
            })?;
            sched::set_attr(pid, &SchedAttr::new(SCHED_EXT)).with_context(|| {
                format!(
                    "cannot put worker pid {pid} (task {}) under SCHED_EXT",
                    t.id
                )
            })?;
        }
        Ok(ExtDispatcher {
            ext,
            tasks,
            started_ns: monotonic_ns(),
            cpus: policy.cpus(),
        })
    }

    /// Unload the scheduler and return what it delivered.
    pub fn stop(mut self) -> DispatchReport {
        let unloaded = self.ext.unload();
        let wall_ns = monotonic_ns().saturating_sub(self.started_ns);
        report(&unloaded, &self.tasks, wall_ns, self.cpus.clone())
    }
}

/// The report of an unloaded scheduler: its turns of the run's tasks
/// as slices, by start time. (Pure: tested without a loaded scheduler.)
fn report(
    u: &Unloaded,
    tasks: &HashMap<i32, usize>,
    wall_ns: u64,
    cpus: Vec<usize>,
) -> DispatchReport {
    let mut slices: Vec<SliceRecord> = u
        .turns
        .iter()
        .filter_map(|t| {
            let task = *tasks.get(&t.pid)?;
            Some(SliceRecord {
                task,
                pid: t.pid,
                cpu: t.cpu as usize,
                planned_start_ns: t.start_ns,
                planned_end_ns: t.start_ns + t.target_ns,
                actual_end_ns: t.end_ns,
                cpu_ns: t.cpu_ns,
                slice_ns: t.slice_ns,
                target_ns: t.target_ns,
                end: slice_end(t.end),
            })
        })
        .collect();
    slices.sort_by_key(|s| (s.planned_start_ns, s.cpu));
    let mut errors = u.errors.clone();
    if let Some(exit) = &u.exit
        && exit.is_error()
    {
        errors.push(format!(
            "sched_ext unloaded the scheduler during the run: {}",
            exit.describe()
        ));
    }
    if u.lost_members > 0 {
        errors.push(format!(
            "{} tasks forked by the workers could not join their worker's turns (no memory \
             for their BPF task storage)",
            u.lost_members
        ));
    }
    if u.lost_turns > 0 {
        errors.push(format!(
            "{} turns were lost (the BPF ring buffer was full)",
            u.lost_turns
        ));
    }
    if u.bad_records > 0 {
        errors.push(format!(
            "{} ring-buffer records could not be read",
            u.bad_records
        ));
    }
    DispatchReport {
        mechanism: Mechanism::Ext,
        lateness_ns: lateness_ns(&slices),
        slices,
        dispatcher_cpu_ns: u.reader_cpu_ns,
        wall_ns,
        cpus,
        dispatcher_rt: false,
        load_cpu_ns: u.load_cpu_ns,
        errors,
    }
}

/// A turn's end as a slice's.
fn slice_end(end: TurnEnd) -> SliceEnd {
    match end {
        TurnEnd::Expired => SliceEnd::Completed,
        TurnEnd::Blocked => SliceEnd::Blocked,
        TurnEnd::Exited => SliceEnd::Exited,
        TurnEnd::Left => SliceEnd::Stopped,
    }
}

/// For each slice that used up its slice, how long after its nominal end
/// (start + target) the kernel switched away from it: the tick granularity
/// of slice enforcement, plus any time a higher class took in between.
pub fn lateness_ns(slices: &[SliceRecord]) -> Vec<u64> {
    slices
        .iter()
        .filter(|s| s.end == SliceEnd::Completed)
        .map(|s| s.actual_end_ns.saturating_sub(s.planned_end_ns))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(start: u64, slice: u64, end: u64, how: SliceEnd) -> SliceRecord {
        SliceRecord {
            task: 0,
            pid: 1,
            cpu: 0,
            planned_start_ns: start,
            planned_end_ns: start + slice,
            actual_end_ns: end,
            cpu_ns: end - start,
            slice_ns: slice,
            target_ns: slice,
            end: how,
        }
    }

    #[test]
    fn lateness_counts_completed_slices_only() {
        let slices = [
            rec(0, 10, 11, SliceEnd::Completed),
            rec(11, 10, 15, SliceEnd::Blocked),
            rec(15, 10, 24, SliceEnd::Completed),
            rec(24, 10, 40, SliceEnd::Completed),
        ];
        assert_eq!(lateness_ns(&slices), vec![1, 0, 6]);
    }

    #[test]
    fn report_turns_become_slices() {
        use crate::wrr::ext_records::{ExitInfo, Turn};
        let turn = |pid, start_ns, e| Turn {
            pid,
            cpu: 0,
            start_ns,
            end_ns: start_ns + 11,
            cpu_ns: 10,
            slice_ns: 10,
            target_ns: 10,
            end: e,
            runs: 1,
        };
        let u = Unloaded {
            turns: vec![
                turn(20, 50, TurnEnd::Expired),
                turn(10, 0, TurnEnd::Expired),
                turn(99, 20, TurnEnd::Blocked), // not a worker
                turn(10, 100, TurnEnd::Left),
            ],
            exit: Some(ExitInfo {
                kind: 1026,
                code: 0,
                reason: "runnable task stall".into(),
                msg: String::new(),
            }),
            lost_turns: 2,
            lost_members: 3,
            bad_records: 0,
            reader_cpu_ns: 7,
            load_cpu_ns: 70,
            errors: vec![],
        };
        let tasks: HashMap<i32, usize> = [(10, 0), (20, 1)].into();
        let r = report(&u, &tasks, 1000, vec![0]);
        assert_eq!(
            r.slices.iter().map(|s| s.task).collect::<Vec<_>>(),
            vec![0, 1, 0]
        );
        assert_eq!(r.slices[2].end, SliceEnd::Stopped);
        assert_eq!(r.lateness_ns, vec![1, 1]);
        assert_eq!(r.dispatcher_cpu_ns, 7);
        assert_eq!(r.mechanism, Mechanism::Ext);
        assert!(
            r.errors[0].contains("runnable task stall"),
            "{:?}",
            r.errors
        );
        assert!(
            r.errors[1].contains("3 tasks forked by the workers could not join"),
            "{:?}",
            r.errors
        );
        assert!(r.errors[2].contains("2 turns were lost"), "{:?}", r.errors);
    }
}
