//! The argument types of `schedlab policy`, plain Rust with no command-line
//! parser (clap lives in `crate::cli`): what was given ([`PolicyArgs`],
//! [`SchedArgs`], values as typed) and what it means once checked
//! ([`Action`] with its option structs, [`Request`], [`DlParams`]).
//! [`validate_command`](super::validate_command) turns the first into the
//! second.

use serde::{Deserialize, Serialize};

use crate::policy::{Class, Policy};
use crate::spec::Cpus;
use crate::sys::sched;
use crate::units::format_ns;

// ---------------------------------------------------------------------------
// As given on the command line
// ---------------------------------------------------------------------------

/// A `schedlab policy` subcommand as given, not yet checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicyArgs {
    /// `policy get PID [--json] [--all-threads]`.
    Get {
        pid: i32,
        json: bool,
        all_threads: bool,
    },
    /// `policy set PID [what to change] [--all-threads] [--json]`.
    Set {
        pid: i32,
        sched: SchedArgs,
        all_threads: bool,
        json: bool,
    },
    /// `policy exec [what to change] -- COMMAND...`.
    Exec {
        sched: SchedArgs,
        command: Vec<String>,
    },
}

/// What to change, as given: `--policy`, `--priority`, `--nice`,
/// `--runtime`, `--deadline`, `--period`, `--reset-on-fork`, `--cpus`. Only
/// the values the policy understands may be given (see
/// [`validate`](super::validate)).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SchedArgs {
    pub policy: Option<String>,
    pub priority: Option<i64>,
    pub nice: Option<i64>,
    /// Durations with a unit, e.g. "1ms" (see
    /// [`parse_duration_ns`](super::parse_duration_ns)).
    pub runtime: Option<String>,
    pub deadline: Option<String>,
    pub period: Option<String>,
    pub reset_on_fork: bool,
    /// A CPU list such as "0-1,3", or "all".
    pub cpus: Option<String>,
}

// ---------------------------------------------------------------------------
// Checked
// ---------------------------------------------------------------------------

/// A checked `schedlab policy` subcommand, ready to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Get(GetOptions),
    Set(SetOptions),
    Exec(ExecOptions),
}

/// `policy get`: whose scheduling to show, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GetOptions {
    /// A positive process (or thread) id.
    pub pid: i32,
    pub json: bool,
    pub all_threads: bool,
}

/// `policy set`: the change to make to a running process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetOptions {
    /// A positive process (or thread) id.
    pub pid: i32,
    pub change: Change,
    pub all_threads: bool,
    pub json: bool,
}

/// `policy exec`: the command to start under a change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecOptions {
    pub change: Change,
    /// The program and its arguments (at least the program).
    pub command: Vec<String>,
}

/// A change checked against this machine: the request, and its CPUs
/// resolved against the online ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub req: Request,
    /// The CPUs of `--cpus`, all online; None leaves the affinity alone.
    pub cpus: Option<Vec<usize>>,
}

/// SCHED_DEADLINE parameters in nanoseconds (runtime <= deadline <= period).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DlParams {
    pub runtime_ns: u64,
    pub deadline_ns: u64,
    pub period_ns: u64,
}

/// A validated change: every value fits its policy. `cpus` is still
/// unresolved ("all" or a list); see [`resolve_cpus`](super::resolve_cpus).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub policy: Option<Policy>,
    /// Fair policies: the nice value; None keeps the current one.
    pub nice: Option<i32>,
    /// FIFO / RR: the static priority.
    pub priority: Option<u32>,
    pub dl: Option<DlParams>,
    pub reset_on_fork: bool,
    pub cpus: Option<Cpus>,
}

impl Request {
    /// The `sched_attr` to pass to the kernel, `current_nice` filling an
    /// unspecified nice of a fair policy. None when only the affinity changes.
    pub fn attr(&self, current_nice: i32) -> Option<sched::SchedAttr> {
        let policy = self.policy?;
        let mut attr = match policy.class() {
            Class::Fair | Class::Wrr => {
                sched::SchedAttr::fair(policy.kernel_id(), self.nice.unwrap_or(current_nice))
            }
            Class::Realtime => {
                sched::SchedAttr::realtime(policy.kernel_id(), self.priority.unwrap_or(1))
            }
            Class::Deadline => {
                let dl = self.dl.unwrap_or(DlParams {
                    runtime_ns: 0,
                    deadline_ns: 0,
                    period_ns: 0,
                });
                sched::SchedAttr::deadline(dl.runtime_ns, dl.deadline_ns, dl.period_ns)
            }
        };
        if self.reset_on_fork {
            attr.sched_flags |= sched::SCHED_FLAG_RESET_ON_FORK;
        }
        Some(attr)
    }

    /// The policy part in words: "fifo priority 10", "batch nice 5",
    /// "deadline runtime 1 ms, deadline 10 ms, period 10 ms".
    pub fn describe_policy(&self) -> String {
        let Some(policy) = self.policy else {
            return "no policy change".into();
        };
        let mut s = policy.name().to_string();
        match policy.class() {
            Class::Fair | Class::Wrr => {
                if let Some(n) = self.nice {
                    s += &format!(" nice {n}");
                }
            }
            Class::Realtime => {
                if let Some(p) = self.priority {
                    s += &format!(" priority {p}");
                }
            }
            Class::Deadline => {
                if let Some(dl) = self.dl {
                    s += &format!(
                        " runtime {}, deadline {}, period {}",
                        format_ns(dl.runtime_ns),
                        format_ns(dl.deadline_ns),
                        format_ns(dl.period_ns)
                    );
                }
            }
        }
        if self.reset_on_fork {
            s += " with reset-on-fork";
        }
        s
    }
}
