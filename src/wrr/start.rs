//! Putting schedlab's WRR over a run's workers: choosing the mechanism the
//! spec asks for (or the best this machine allows), starting it while the
//! workers still wait at the barrier, and the running mechanism as one type
//! ([`WrrRun`]) the launcher tells of exits and stops at the end.

use std::sync::OnceLock;

use super::{DispatchReport, Dispatcher, Mechanism, SliceRule, Task, WrrPolicy};
use crate::spec::{WrrMechanism, WrrSettings};
use crate::sys::cgroup::TreeControl;

/// Why WRR could not be put over a run: the run is skipped (the machine
/// cannot do what was asked) or failed (it tried and could not).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartError {
    Skipped(String),
    Failed(String),
}

/// schedlab's WRR over a run's workers: the user-space dispatcher, or the
/// sched_ext scheduler in the kernel.
pub enum WrrRun {
    User(Dispatcher),
    Kernel(super::ext::ExtDispatcher),
}

impl WrrRun {
    /// Worker `id` exited (the kernel scheduler sees exits itself).
    pub fn task_exited(&self, id: usize) {
        match self {
            WrrRun::User(d) => d.task_exited(id),
            WrrRun::Kernel(_) => {}
        }
    }

    /// Stop dispatching and say what was dispatched.
    pub fn stop(self) -> DispatchReport {
        match self {
            WrrRun::User(d) => d.stop(),
            WrrRun::Kernel(k) => k.stop(),
        }
    }
}

/// Start WRR over `pids` (task `i` is `pids[i]`, and when `trees[i]` is
/// given, every task of that cgroup: a `command` worker's tree): a run
/// queue per CPU, slice = quantum × weight. Under ext the trees need no
/// cgroup: the BPF scheduler puts every task a worker forks in its group. `auto` settles `mechanism =
/// "auto"` once per campaign; `beside_ext` names another program's
/// sched_ext scheduler loaded for the run, which rules out schedlab's own.
pub fn start(
    tasks: Vec<Task>,
    pids: &[i32],
    trees: &[Option<TreeControl>],
    settings: &WrrSettings,
    auto: &OnceLock<Mechanism>,
    beside_ext: Option<&str>,
) -> Result<WrrRun, StartError> {
    let rule = SliceRule::Weighted {
        quantum_ns: settings.quantum_ns,
    };
    let policy =
        WrrPolicy::new(tasks, rule).map_err(|e| StartError::Failed(format!("WRR: {e}")))?;
    match mechanism(settings.mechanism, auto, beside_ext)? {
        Mechanism::Ext => start_ext(&policy, pids),
        mechanism => Dispatcher::start_trees(
            policy,
            pids.to_vec(),
            trees.to_vec(),
            mechanism,
            super::DEFAULT_BASE_PRIO,
        )
        .map(WrrRun::User)
        .map_err(|e| StartError::Failed(format!("the WRR dispatcher could not start: {e:#}"))),
    }
}

/// The mechanism to use: the one asked for when the machine allows it,
/// else (auto) ext, else FIFO, else signals. Every mechanism covers a
/// `command` worker's whole tree (ext: `ext/src/bpf/wrr.bpf.c` puts each task a
/// worker's tree forks in the worker's group), so trees choose as any run.
fn mechanism(
    asked: Option<WrrMechanism>,
    auto: &OnceLock<Mechanism>,
    beside_ext: Option<&str>,
) -> Result<Mechanism, StartError> {
    Ok(match asked {
        Some(WrrMechanism::Fifo) => {
            super::fifo_check(super::DEFAULT_BASE_PRIO + 2).map_err(|why| {
                StartError::Skipped(format!("wrr.mechanism = \"fifo\" is not permitted: {why}"))
            })?;
            Mechanism::Fifo
        }
        Some(WrrMechanism::Signals) => Mechanism::Signals,
        Some(WrrMechanism::Ext) => {
            if let Some(other) = beside_ext {
                return Err(StartError::Skipped(format!(
                    "wrr.mechanism = \"ext\" loads schedlab's own sched_ext scheduler, which cannot \
                     run beside \"{other}\" of matrix.ext_scheduler (one BPF scheduler at a time)"
                )));
            }
            if let Some(why) = super::ext::unavailable() {
                return Err(StartError::Skipped(format!(
                    "wrr.mechanism = \"ext\" cannot run here: {why}"
                )));
            }
            Mechanism::Ext
        }
        // Another program's sched_ext scheduler is loaded: a user-space
        // mechanism, without settling "auto" for the other runs.
        None if beside_ext.is_some() => super::available_mechanism(),
        None => *auto.get_or_init(|| {
            if super::ext::unavailable().is_none() {
                Mechanism::Ext
            } else {
                super::available_mechanism()
            }
        }),
    })
}

/// Load the sched_ext scheduler over the workers (the mechanism was
/// checked available: [`super::ext::unavailable`]).
fn start_ext(policy: &WrrPolicy, pids: &[i32]) -> Result<WrrRun, StartError> {
    super::ext::ExtDispatcher::start(policy, pids)
        .map(WrrRun::Kernel)
        .map_err(|e| {
            StartError::Failed(format!(
                "the sched_ext WRR scheduler could not start: {e:#}"
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ext_beside_another_programs_scheduler_is_skipped_naming_it() {
        let auto = OnceLock::new();
        let err = mechanism(Some(WrrMechanism::Ext), &auto, Some("simple")).unwrap_err();
        let StartError::Skipped(why) = err else {
            panic!("{err:?}")
        };
        assert!(why.contains("\"simple\""), "{why}");
        assert!(auto.get().is_none());
    }

    #[test]
    fn auto_beside_another_scheduler_leaves_auto_unsettled() {
        let auto = OnceLock::new();
        let m = mechanism(None, &auto, Some("simple")).unwrap();
        assert_ne!(m, Mechanism::Ext);
        assert!(auto.get().is_none(), "auto must stay open for other runs");
    }

    #[test]
    fn signals_is_always_allowed_and_auto_is_settled_once() {
        let auto = OnceLock::new();
        assert_eq!(
            mechanism(Some(WrrMechanism::Signals), &auto, None).unwrap(),
            Mechanism::Signals
        );
        let first = mechanism(None, &auto, None).unwrap();
        assert_eq!(auto.get(), Some(&first));
        assert_eq!(mechanism(None, &auto, None).unwrap(), first);
    }
}
