//! The decoded scheduling events of one traced run: the one type shared by
//! the capture (tracefs ring buffers) and every consumer (derived slices and
//! wake-ups, store, report, Perfetto export).

/// One task seen in the trace: its thread id, process id and name.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Task {
    pub tid: i32,
    pub tgid: i32,
    pub comm: String,
}

/// One decoded tracepoint hit.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Event {
    /// CLOCK_MONOTONIC, ns (the tracefs instance runs with `trace_clock`
    /// `mono`, so these compare with the workloads' own timestamps).
    pub ts_ns: u64,
    /// The CPU whose ring buffer held the event.
    pub cpu: u32,
    /// The task that was current when the event fired (`common_pid`): the
    /// waker for `Waking`/`Wakeup`.
    pub common_pid: i32,
    pub kind: EventKind,
}

/// The tracepoints schedlab records, with the fields it uses.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum EventKind {
    /// `sched:sched_switch`: `prev` leaves the CPU, `next` gets it.
    Switch {
        prev_pid: i32,
        prev_prio: i32,
        /// The raw `prev_state` field.
        prev_state: u64,
        next_pid: i32,
        next_prio: i32,
    },
    /// `sched:sched_waking`: `pid` is being woken (in the waker's context).
    Waking {
        pid: i32,
        prio: i32,
        target_cpu: u32,
    },
    /// `sched:sched_wakeup` / `sched:sched_wakeup_new` (`new`): `pid` is on
    /// the run queue of `target_cpu`.
    Wakeup {
        pid: i32,
        prio: i32,
        target_cpu: u32,
        new: bool,
    },
    /// `sched:sched_migrate_task`.
    Migrate {
        pid: i32,
        prio: i32,
        orig_cpu: u32,
        dest_cpu: u32,
    },
    /// `sched:sched_process_exit`.
    Exit { pid: i32, prio: i32 },
    /// `sched:sched_process_fork`: `parent_pid` made `child_pid` (a process
    /// or a thread: the tracepoint does not say which). How the capture
    /// follows a program's process tree.
    Fork { parent_pid: i32, child_pid: i32 },
}

/// How a slice ended, from the `prev_state` of the switch that ended it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum SwitchEnd {
    /// Still runnable, taken off the CPU by the scheduler (`R+`).
    Preempted,
    /// Still runnable, switched out by `schedule()` without the preemption
    /// flag (`R`): mostly a preemption on the way back to user space (how a
    /// CPU-bound task is usually preempted), or sched_yield; the tracepoint
    /// cannot tell the two apart. Stored as `yielded`; rusage counts it
    /// involuntary (`nivcsw`), as it counts `Preempted`.
    Yielded,
    /// Went to sleep (interruptible, uninterruptible, idle, stopped, parked).
    Blocked,
    /// The task died (`X` / `Z`).
    Exited,
    /// Still runnable, its class out of bandwidth (RT throttling, a
    /// DEADLINE task's spent runtime). Only the model says so: a kernel
    /// trace shows such a switch as `Preempted`. Involuntary in rusage.
    Throttled,
}

impl SwitchEnd {
    /// Classifies a raw `prev_state` as `sched_switch` records it
    /// (include/trace/events/sched.h, `__trace_sched_switch_state`): a
    /// preempted task is `TASK_REPORT_MAX` (0x100, printed `R+`); otherwise
    /// the state is `1 << (index - 1)` of its `TASK_REPORT` index (S 0x1,
    /// D 0x2, T 0x4, t 0x8, X 0x10, Z 0x20, P 0x40, I 0x80), or 0 for a task
    /// still runnable switched out without the preemption flag (see `Yielded`).
    pub fn from_prev_state(prev_state: u64) -> SwitchEnd {
        const TASK_REPORT_MAX: u64 = 0x100;
        const EXIT_DEAD: u64 = 0x10;
        const EXIT_ZOMBIE: u64 = 0x20;
        if prev_state & TASK_REPORT_MAX != 0 {
            SwitchEnd::Preempted
        } else if prev_state == 0 {
            SwitchEnd::Yielded
        } else if prev_state & (EXIT_DEAD | EXIT_ZOMBIE) != 0 {
            SwitchEnd::Exited
        } else {
            SwitchEnd::Blocked
        }
    }

    /// Whether the switch counts as voluntary in rusage (`nvcsw`): the
    /// kernel (`__schedule`) counts a switch voluntary only when it was not a
    /// preemption and the task was no longer runnable, so blocking and
    /// exiting; `R` and `R+` both go to `nivcsw`.
    pub fn voluntary(self) -> bool {
        matches!(self, SwitchEnd::Blocked | SwitchEnd::Exited)
    }
}

/// Everything captured for one run.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Capture {
    /// Every event, sorted by `ts_ns` (stable for equal stamps: per CPU, the
    /// ring buffer's order).
    pub events: Vec<Event>,
    /// The tasks named by the events that belong to the run (workers and,
    /// for WRR, the dispatcher), with their names.
    pub tasks: Vec<Task>,
    /// The CPUs traced.
    pub cpus: Vec<u32>,
    /// The traced window, CLOCK_MONOTONIC ns.
    pub start_ns: u64,
    pub end_ns: u64,
    /// When the run's workers were released (CLOCK_MONOTONIC ns), if known:
    /// the workers' own `start_ns`/`end_ns` count from it, so the window
    /// their rusage and schedstat cover is `release_ns + start_ns ..
    /// release_ns + end_ns` on the trace's clock.
    pub release_ns: Option<u64>,
    /// Events the kernel dropped (sum of the per-CPU `overrun` counters plus
    /// lost-event markers in the raw pages). A capture with lost events is
    /// stored marked and never used silently.
    pub lost_events: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prev_state_classification_follows_the_kernel_encoding() {
        assert_eq!(SwitchEnd::from_prev_state(0), SwitchEnd::Yielded);
        assert_eq!(SwitchEnd::from_prev_state(0x100), SwitchEnd::Preempted);
        assert_eq!(SwitchEnd::from_prev_state(0x80), SwitchEnd::Blocked);
        assert_eq!(SwitchEnd::from_prev_state(0x1), SwitchEnd::Blocked);
        assert_eq!(SwitchEnd::from_prev_state(0x2), SwitchEnd::Blocked);
        assert_eq!(SwitchEnd::from_prev_state(0x4), SwitchEnd::Blocked);
        assert_eq!(SwitchEnd::from_prev_state(0x10), SwitchEnd::Exited);
        assert_eq!(SwitchEnd::from_prev_state(0x20), SwitchEnd::Exited);
        assert!(!SwitchEnd::Preempted.voluntary());
        assert!(!SwitchEnd::Yielded.voluntary());
        assert!(SwitchEnd::Blocked.voluntary());
        assert!(SwitchEnd::Exited.voluntary());
    }
}
