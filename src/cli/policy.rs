//! The command line of `schedlab policy get / set / exec` (clap), turned
//! into the plain [`PolicyArgs`] that [`crate::policyctl`] checks and runs.

use anyhow::Result;

use crate::policyctl::{self, PolicyArgs, SchedArgs};

#[derive(Debug, Clone, clap::Subcommand)]
pub(super) enum PolicyCommand {
    /// Show a process's policy, nice or RT priority, DEADLINE runtime/deadline/period, RR interval,
    /// affinity and reset-on-fork.
    #[command(after_help = "Examples:\n  schedlab policy get 1234\n  \
                            schedlab policy get 1234 --json --all-threads")]
    Get {
        /// The process (or thread) id.
        pid: i32,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Also show every thread of the process (/proc/PID/task/*).
        #[arg(long)]
        all_threads: bool,
    },
    /// Change a running process's policy, priority and/or CPU affinity, then show what it is now.
    #[command(
        after_help = "Like chrt, this changes the main thread (the thread whose id is PID) \
                            unless --all-threads is given; threads created later inherit from \
                            the thread that creates them.\n\nExamples:\n  \
                            schedlab policy set 1234 --policy fifo --priority 10\n  \
                            schedlab policy set 1234 --policy batch --nice 5 --all-threads\n  \
                            schedlab policy set 1234 --policy deadline --runtime 1ms --period 10ms\n  \
                            schedlab policy set 1234 --cpus 0-1"
    )]
    Set {
        /// The process (or thread) id.
        pid: i32,
        #[command(flatten)]
        sched: SchedFlags,
        /// Apply to every thread of the process (/proc/PID/task/*), not only the main thread.
        #[arg(long)]
        all_threads: bool,
        /// Print the result as JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Start a command under a policy, like chrt, wait for it, and exit with its exit code.
    #[command(
        after_help = "The policy and affinity are applied in the child before exec: if the \
                            kernel refuses them the command does not run (exit code 1). Exit code: \
                            the command's, 128+N if signal N killed it, 127 if it cannot be found.\n\
                            A SCHED_DEADLINE process cannot fork unless --reset-on-fork is given.\n\n\
                            Examples:\n  \
                            schedlab policy exec --policy fifo --priority 10 -- ./rt-app --flag\n  \
                            schedlab policy exec --policy idle --cpus 1 -- make -j1\n  \
                            schedlab policy exec --policy deadline --runtime 2ms --period 10ms -- ./loop"
    )]
    Exec {
        #[command(flatten)]
        sched: SchedFlags,
        /// The command and its arguments, after `--`.
        #[arg(required = true, last = true, value_name = "COMMAND")]
        command: Vec<String>,
    },
}

/// What to change. Only the values the policy understands may be given.
#[derive(Debug, Clone, Default, PartialEq, Eq, clap::Args)]
pub(super) struct SchedFlags {
    /// other (alias normal), batch (fair class, take --nice), idle (lowest weight); fifo, rr
    /// (real-time, take --priority); deadline (takes --runtime, --deadline, --period).
    #[arg(long, value_name = "POLICY")]
    policy: Option<String>,
    /// Real-time priority for fifo and rr, 1..99 (higher runs first).
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    priority: Option<i64>,
    /// Nice value for other and batch, -20..19 (lower gets more CPU); default: unchanged.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    nice: Option<i64>,
    /// DEADLINE CPU time per period, e.g. 1ms, 500us, 2000000ns (at least 1024 ns).
    #[arg(long, value_name = "DUR")]
    runtime: Option<String>,
    /// DEADLINE relative deadline, runtime <= deadline <= period (default: the period).
    #[arg(long, value_name = "DUR")]
    deadline: Option<String>,
    /// DEADLINE period, e.g. 10ms, 1s (default: the deadline).
    #[arg(long, value_name = "DUR")]
    period: Option<String>,
    /// Children forked later start as SCHED_OTHER (nice >= 0) instead of inheriting the policy.
    #[arg(long)]
    reset_on_fork: bool,
    /// CPU affinity: a CPU list such as 0, 0-1, 0,2-3, or "all" (every online CPU).
    #[arg(long, value_name = "LIST")]
    cpus: Option<String>,
}

impl From<SchedFlags> for SchedArgs {
    fn from(f: SchedFlags) -> SchedArgs {
        SchedArgs {
            policy: f.policy,
            priority: f.priority,
            nice: f.nice,
            runtime: f.runtime,
            deadline: f.deadline,
            period: f.period,
            reset_on_fork: f.reset_on_fork,
            cpus: f.cpus,
        }
    }
}

impl From<PolicyCommand> for PolicyArgs {
    fn from(cmd: PolicyCommand) -> PolicyArgs {
        match cmd {
            PolicyCommand::Get {
                pid,
                json,
                all_threads,
            } => PolicyArgs::Get {
                pid,
                json,
                all_threads,
            },
            PolicyCommand::Set {
                pid,
                sched,
                all_threads,
                json,
            } => PolicyArgs::Set {
                pid,
                sched: sched.into(),
                all_threads,
                json,
            },
            PolicyCommand::Exec { sched, command } => PolicyArgs::Exec {
                sched: sched.into(),
                command,
            },
        }
    }
}

/// `schedlab policy …`: checks the arguments (errors are `SpecError`s, exit
/// code 2), then runs the subcommand.
pub(super) fn run(cmd: PolicyCommand) -> Result<i32> {
    let action = policyctl::validate_command(cmd.into())?;
    policyctl::run(action)
}
