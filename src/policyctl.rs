//! `schedlab policy`: show and change the scheduling of a process, or start a
//! command under a policy — what `chrt` and `taskset` do, with every value
//! checked before a system call and every kernel refusal explained.
//!
//! Arguments are parsed and validated into a [`Request`] by pure functions
//! (errors are [`SpecError`]s, exit code 2). The system calls come from
//! [`crate::sys::sched`]; a refusal is explained from its errno plus what can
//! be read about the target afterwards (owner, rlimits, affinity, admitted
//! DEADLINE bandwidth), again by a pure function ([`explain`]).

use std::io;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, anyhow};
use serde::{Deserialize, Serialize};

use crate::policy::{Class, NICE_MAX, NICE_MIN, Policy, RT_MAX, RT_MIN};
use crate::spec::{Cpus, SpecError};
use crate::sys::envinfo::format_cpu_list;
use crate::sys::probe::{self, errno_explanation, permission_hint};
use crate::sys::{proc, procfs, sched};

/// The `origin` of every argument error of this command.
const ORIGIN: &str = "schedlab policy";

/// The kernel's smallest SCHED_DEADLINE runtime (`1 << DL_SCALE` ns).
pub const DL_MIN_RUNTIME_NS: u64 = 1024;

const RR_TIMESLICE_SYSCTL: &str = "/proc/sys/kernel/sched_rr_timeslice_ms";

// ---------------------------------------------------------------------------
// Command line
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, clap::Subcommand)]
pub enum PolicyCommand {
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
        sched: SchedArgs,
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
        sched: SchedArgs,
        /// The command and its arguments, after `--`.
        #[arg(required = true, last = true, value_name = "COMMAND")]
        command: Vec<String>,
    },
}

/// What to change. Only the values the policy understands may be given.
#[derive(Debug, Clone, Default, PartialEq, Eq, clap::Args)]
pub struct SchedArgs {
    /// other (alias normal), batch (fair class, take --nice), idle (lowest weight); fifo, rr
    /// (real-time, take --priority); deadline (takes --runtime, --deadline, --period).
    #[arg(long, value_name = "POLICY")]
    pub policy: Option<String>,
    /// Real-time priority for fifo and rr, 1..99 (higher runs first).
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub priority: Option<i64>,
    /// Nice value for other and batch, -20..19 (lower gets more CPU); default: unchanged.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub nice: Option<i64>,
    /// DEADLINE CPU time per period, e.g. 1ms, 500us, 2000000ns (at least 1024 ns).
    #[arg(long, value_name = "DUR")]
    pub runtime: Option<String>,
    /// DEADLINE relative deadline, runtime <= deadline <= period (default: the period).
    #[arg(long, value_name = "DUR")]
    pub deadline: Option<String>,
    /// DEADLINE period, e.g. 10ms, 1s (default: the deadline).
    #[arg(long, value_name = "DUR")]
    pub period: Option<String>,
    /// Children forked later start as SCHED_OTHER (nice >= 0) instead of inheriting the policy.
    #[arg(long)]
    pub reset_on_fork: bool,
    /// CPU affinity: a CPU list such as 0, 0-1, 0,2-3, or "all" (every online CPU).
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,
}

// ---------------------------------------------------------------------------
// Durations
// ---------------------------------------------------------------------------

/// Parses a duration with a unit into nanoseconds: "5ms", "500us" (or
/// "500µs"), "1s", "2000000ns", "1.5s", "0.25 ms". Exact (no floating
/// point); a unit is required and fractions finer than 1 ns are refused.
pub fn parse_duration_ns(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = (&t[..split], t[split..].trim());
    let example = "write a number and a unit, e.g. 5ms, 500us, 1.5s or 2000000ns";
    if num.is_empty() {
        return Err(format!("\"{s}\" is not a duration: {example}"));
    }
    let mult: u64 = match unit {
        "ns" => 1,
        "us" | "µs" | "μs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "" => return Err(format!("\"{s}\" has no unit: {example}")),
        u => {
            return Err(format!(
                "\"{s}\": unknown unit \"{u}\" (allowed: ns, us, ms, s): {example}"
            ));
        }
    };
    let (int, frac) = match num.split_once('.') {
        Some((i, f)) => (i, f),
        None => (num, ""),
    };
    if int.is_empty() || frac.contains('.') || (num.contains('.') && frac.is_empty()) {
        return Err(format!("\"{s}\" is not a duration: {example}"));
    }
    let too_large = || format!("\"{s}\" is too large");
    let int: u64 = int.parse().map_err(|_| too_large())?;
    let mut total = int.checked_mul(mult).ok_or_else(too_large)?;
    let frac = frac.trim_end_matches('0');
    if !frac.is_empty() {
        let digits = mult.ilog10() as usize;
        if frac.len() > digits {
            return Err(format!("\"{s}\" is finer than 1 ns"));
        }
        let scaled: u64 =
            frac.parse::<u64>().map_err(|_| too_large())? * 10u64.pow((digits - frac.len()) as u32);
        total = total.checked_add(scaled).ok_or_else(too_large)?;
    }
    Ok(total)
}

/// A duration for people: "10 ms", "2.8 ms", "250 µs", "1.5 s", "900 ns".
pub fn format_ns(ns: u64) -> String {
    let (unit, name) = match ns {
        n if n >= 1_000_000_000 => (1_000_000_000, "s"),
        n if n >= 1_000_000 => (1_000_000, "ms"),
        n if n >= 1_000 => (1_000, "µs"),
        _ => return format!("{ns} ns"),
    };
    let (int, rem) = (ns / unit, ns % unit);
    if rem == 0 {
        return format!("{int} {name}");
    }
    let width = unit.ilog10() as usize;
    let frac = format!("{rem:0width$}");
    format!("{int}.{} {name}", frac.trim_end_matches('0'))
}

// ---------------------------------------------------------------------------
// Validation
// ---------------------------------------------------------------------------

/// SCHED_DEADLINE parameters in nanoseconds (runtime <= deadline <= period).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DlParams {
    pub runtime_ns: u64,
    pub deadline_ns: u64,
    pub period_ns: u64,
}

/// A validated change: every value fits its policy. `cpus` is still
/// unresolved ("all" or a list); see [`resolve_cpus`].
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

fn invalid(key: &str, message: impl Into<String>) -> SpecError {
    SpecError::Invalid {
        origin: ORIGIN.into(),
        key: key.into(),
        message: message.into(),
    }
}

fn duration_arg(key: &str, value: &Option<String>) -> Result<Option<u64>, SpecError> {
    value
        .as_deref()
        .map(|v| parse_duration_ns(v).map_err(|m| invalid(key, m)))
        .transpose()
}

/// Checks a process id given on the command line.
pub fn validate_pid(pid: i32) -> Result<i32, SpecError> {
    if pid <= 0 {
        return Err(invalid(
            "PID",
            format!("must be a positive process id, got {pid}"),
        ));
    }
    Ok(pid)
}

/// Validates the arguments without touching the system.
pub fn validate(args: &SchedArgs) -> Result<Request, SpecError> {
    let policy = args
        .policy
        .as_deref()
        .map(|p| match Policy::parse(p) {
            Some(policy) if Policy::KERNEL.contains(&policy) => Ok(policy),
            Some(policy) => Err(invalid(
                "--policy",
                format!(
                    "\"{p}\" is schedlab's own {} policy, dispatched from user space during \
                     runs, not a kernel policy; allowed: other (alias normal), batch, idle, \
                     fifo, rr, deadline",
                    policy.name()
                ),
            )),
            None => Err(invalid(
                "--policy",
                format!(
                    "unknown policy \"{p}\"; allowed: other (alias normal), batch, idle, \
                     fifo, rr, deadline"
                ),
            )),
        })
        .transpose()?;
    let runtime = duration_arg("--runtime", &args.runtime)?;
    let deadline = duration_arg("--deadline", &args.deadline)?;
    let period = duration_arg("--period", &args.period)?;
    let cpus = args
        .cpus
        .as_deref()
        .map(|c| Cpus::parse(c).map_err(|m| invalid("--cpus", m)))
        .transpose()?;
    let dl_flag = [
        ("--runtime", runtime.is_some()),
        ("--deadline", deadline.is_some()),
        ("--period", period.is_some()),
    ]
    .into_iter()
    .find(|(_, given)| *given)
    .map(|(flag, _)| flag);

    let mut req = Request {
        policy,
        nice: None,
        priority: None,
        dl: None,
        reset_on_fork: args.reset_on_fork,
        cpus,
    };
    let Some(policy) = policy else {
        if args.priority.is_some() {
            return Err(invalid("--priority", "needs --policy fifo or rr"));
        }
        if args.nice.is_some() {
            return Err(invalid("--nice", "needs --policy other, batch or idle"));
        }
        if let Some(flag) = dl_flag {
            return Err(invalid(flag, "needs --policy deadline"));
        }
        if args.reset_on_fork {
            return Err(invalid(
                "--reset-on-fork",
                "needs --policy (it is part of the policy the kernel sets)",
            ));
        }
        if req.cpus.is_none() {
            return Err(invalid(
                "--policy",
                "nothing to change: give --policy (other, batch, idle, fifo, rr or deadline) \
                 and/or --cpus LIST",
            ));
        }
        return Ok(req);
    };
    let name = policy.name();
    match policy.class() {
        Class::Fair | Class::Wrr => {
            if args.priority.is_some() {
                return Err(invalid(
                    "--priority",
                    format!(
                        "--priority is for --policy fifo or rr ({RT_MIN}..{RT_MAX}); \
                         --policy {name} takes --nice {NICE_MIN}..{NICE_MAX}"
                    ),
                ));
            }
            if let Some(flag) = dl_flag {
                return Err(invalid(
                    flag,
                    format!("{flag} is only for --policy deadline, not {name}"),
                ));
            }
            if policy == Policy::Idle && args.nice.is_some() {
                return Err(invalid(
                    "--nice",
                    "SCHED_IDLE ignores the nice value (its tasks get the lowest weight whatever \
                     their nice; the kernel keeps the current nice): leave --nice out, or use \
                     --policy other or batch with --nice",
                ));
            }
            if let Some(n) = args.nice {
                if !(NICE_MIN as i64..=NICE_MAX as i64).contains(&n) {
                    return Err(invalid(
                        "--nice",
                        format!("must be {NICE_MIN}..{NICE_MAX} (lower gets more CPU), got {n}"),
                    ));
                }
                req.nice = Some(n as i32);
            }
        }
        Class::Realtime => {
            if args.nice.is_some() {
                return Err(invalid(
                    "--nice",
                    format!(
                        "--nice is for --policy other, batch or idle ({NICE_MIN}..{NICE_MAX}); \
                         --policy {name} takes --priority {RT_MIN}..{RT_MAX}"
                    ),
                ));
            }
            if let Some(flag) = dl_flag {
                return Err(invalid(
                    flag,
                    format!("{flag} is only for --policy deadline, not {name}"),
                ));
            }
            let Some(p) = args.priority else {
                return Err(invalid(
                    "--priority",
                    format!(
                        "--policy {name} needs --priority {RT_MIN}..{RT_MAX} (higher runs first)"
                    ),
                ));
            };
            if !(RT_MIN as i64..=RT_MAX as i64).contains(&p) {
                return Err(invalid(
                    "--priority",
                    format!("must be {RT_MIN}..{RT_MAX} (higher runs first), got {p}"),
                ));
            }
            req.priority = Some(p as u32);
        }
        Class::Deadline => {
            for (flag, given) in [("--priority", args.priority), ("--nice", args.nice)] {
                if given.is_some() {
                    return Err(invalid(
                        flag,
                        "SCHED_DEADLINE takes no priority or nice value; give --runtime and \
                         --period (and optionally --deadline)",
                    ));
                }
            }
            let Some(runtime) = runtime else {
                return Err(invalid(
                    "--runtime",
                    "--policy deadline needs --runtime, e.g. --runtime 1ms --period 10ms",
                ));
            };
            let (deadline, period) = match (deadline, period) {
                (Some(d), Some(p)) => (d, p),
                (Some(d), None) => (d, d),
                (None, Some(p)) => (p, p),
                (None, None) => {
                    return Err(invalid(
                        "--period",
                        "--policy deadline needs --period (and optionally --deadline, which \
                         defaults to the period), e.g. --runtime 1ms --period 10ms",
                    ));
                }
            };
            if runtime < DL_MIN_RUNTIME_NS {
                return Err(invalid(
                    "--runtime",
                    format!(
                        "must be at least {DL_MIN_RUNTIME_NS} ns (the kernel's minimum), got {}",
                        format_ns(runtime)
                    ),
                ));
            }
            if runtime > deadline {
                return Err(invalid(
                    "--runtime",
                    format!(
                        "runtime {} exceeds the deadline {}: SCHED_DEADLINE needs \
                         runtime <= deadline <= period",
                        format_ns(runtime),
                        format_ns(deadline)
                    ),
                ));
            }
            if deadline > period {
                return Err(invalid(
                    "--deadline",
                    format!(
                        "deadline {} exceeds the period {}: SCHED_DEADLINE needs \
                         runtime <= deadline <= period",
                        format_ns(deadline),
                        format_ns(period)
                    ),
                ));
            }
            req.dl = Some(DlParams {
                runtime_ns: runtime,
                deadline_ns: deadline,
                period_ns: period,
            });
        }
    }
    Ok(req)
}

/// The CPUs of `--cpus` given the online CPUs: "all" is every online CPU, a
/// list must name online CPUs only, and SCHED_DEADLINE must keep every
/// online CPU (the kernel refuses it on a task with a narrower affinity).
pub fn resolve_cpus(req: &Request, online: &[usize]) -> Result<Option<Vec<usize>>, SpecError> {
    let Some(cpus) = &req.cpus else {
        return Ok(None);
    };
    let list = match cpus {
        Cpus::All => online.to_vec(),
        Cpus::List(list) => {
            let offline: Vec<String> = list
                .iter()
                .filter(|c| !online.contains(c))
                .map(|c| c.to_string())
                .collect();
            if !offline.is_empty() {
                return Err(invalid(
                    "--cpus",
                    format!(
                        "CPU {} {} not online (online CPUs: {})",
                        offline.join(", "),
                        if offline.len() == 1 { "is" } else { "are" },
                        format_cpu_list(online)
                    ),
                ));
            }
            list.clone()
        }
    };
    if req.policy == Some(Policy::Deadline) && online.iter().any(|c| !list.contains(c)) {
        return Err(invalid(
            "--cpus",
            format!(
                "SCHED_DEADLINE needs the task allowed on every CPU of its root domain \
                 (online CPUs {}); --cpus {} would restrict it: leave --cpus out or use --cpus all",
                format_cpu_list(online),
                format_cpu_list(&list)
            ),
        ));
    }
    Ok(Some(list))
}

/// Checks the DEADLINE period against `kernel.sched_deadline_period_min_us`
/// and `max_us` (None: unknown, not checked).
pub fn check_period_limits(
    args: &SchedArgs,
    req: &Request,
    min_us: Option<u64>,
    max_us: Option<u64>,
) -> Result<(), SpecError> {
    let Some(dl) = req.dl else { return Ok(()) };
    let key = if args.period.is_some() {
        "--period"
    } else {
        "--deadline"
    };
    let range = || {
        format!(
            "kernel.sched_deadline_period_min_us..max_us allow {}..{}",
            min_us.map_or("?".into(), |m| format_ns(m.saturating_mul(1000))),
            max_us.map_or("?".into(), |m| format_ns(m.saturating_mul(1000)))
        )
    };
    if let Some(min) = min_us
        && dl.period_ns < min.saturating_mul(1000)
    {
        return Err(invalid(
            key,
            format!(
                "period {} is too short: {}",
                format_ns(dl.period_ns),
                range()
            ),
        ));
    }
    if let Some(max) = max_us
        && dl.period_ns > max.saturating_mul(1000)
    {
        return Err(invalid(
            key,
            format!(
                "period {} is too long: {}",
                format_ns(dl.period_ns),
                range()
            ),
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Reading the current state
// ---------------------------------------------------------------------------

/// A process's (or thread's) scheduling as the kernel reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SchedInfo {
    /// The process id (for entries of `threads`: the thread id).
    pub pid: i32,
    /// `/proc/PID/comm`.
    pub comm: String,
    /// "other", "batch", "idle", "fifo", "rr", "deadline" ("ext" for
    /// sched_ext, "unknown" otherwise).
    pub policy: String,
    /// The kernel's name: "SCHED_FIFO", …
    pub kernel_policy: String,
    /// Fair policies only.
    pub nice: Option<i32>,
    /// FIFO / RR only: 1..99.
    pub priority: Option<u32>,
    /// Fair policies on kernels that report it (6.12+): the EEVDF slice
    /// (`sched_attr.sched_runtime`).
    pub slice_ns: Option<u64>,
    /// DEADLINE only.
    pub runtime_ns: Option<u64>,
    pub deadline_ns: Option<u64>,
    pub period_ns: Option<u64>,
    /// `sched_rr_get_interval`; None if the call failed.
    pub rr_interval_ns: Option<u64>,
    /// What the interval is and where it comes from.
    pub rr_interval_source: String,
    /// The CPUs the task may run on.
    pub affinity: Vec<usize>,
    /// The same as a compact list: "0-3,6".
    pub affinity_list: String,
    pub reset_on_fork: bool,
    /// The raw `sched_flags`.
    pub sched_flags: u64,
    /// With --all-threads: every thread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<Vec<SchedInfo>>,
}

/// Short and kernel names of a kernel policy number.
pub fn policy_names(id: u32) -> (String, String) {
    match Policy::from_kernel_id(id) {
        Some(p) => {
            let kernel = match p {
                Policy::Other => "SCHED_OTHER".to_string(),
                p => format!("SCHED_{}", p.name().to_ascii_uppercase()),
            };
            (p.name().to_string(), kernel)
        }
        None if id == 7 => ("ext".into(), "SCHED_EXT".into()),
        None => ("unknown".into(), format!("policy {id}")),
    }
}

impl SchedInfo {
    /// Builds the report from what the system calls returned.
    pub fn new(
        pid: i32,
        comm: String,
        attr: &sched::SchedAttr,
        rr_interval_ns: Option<u64>,
        rr_timeslice_ms: Option<i64>,
        affinity: Vec<usize>,
    ) -> SchedInfo {
        let (policy, kernel_policy) = policy_names(attr.sched_policy);
        let class = Policy::from_kernel_id(attr.sched_policy).map(Policy::class);
        let dl = class == Some(Class::Deadline);
        let rr_interval_source = match Policy::from_kernel_id(attr.sched_policy) {
            Some(Policy::Rr) => match rr_timeslice_ms {
                Some(ms) => format!("kernel.sched_rr_timeslice_ms = {ms}, {RR_TIMESLICE_SYSCTL}"),
                None => format!("kernel.sched_rr_timeslice_ms, {RR_TIMESLICE_SYSCTL}"),
            },
            Some(Policy::Fifo) => "SCHED_FIFO has no time slice: it runs until it blocks, yields \
                                   or a higher priority preempts it"
                .into(),
            Some(Policy::Deadline) => {
                "SCHED_DEADLINE has no time slice: it runs for its runtime in every period".into()
            }
            Some(_) => "the fair-class slice as the kernel reports it: the EEVDF slice rounded \
                        down to whole jiffies, 0 if shorter than a jiffy or while the task's \
                        run queue is empty"
                .into(),
            None => "what sched_rr_get_interval reports for this policy".into(),
        };
        SchedInfo {
            pid,
            comm,
            policy,
            kernel_policy,
            nice: (class == Some(Class::Fair)).then_some(attr.sched_nice),
            priority: (class == Some(Class::Realtime)).then_some(attr.sched_priority),
            slice_ns: (class == Some(Class::Fair) && attr.sched_runtime > 0)
                .then_some(attr.sched_runtime),
            runtime_ns: dl.then_some(attr.sched_runtime),
            deadline_ns: dl.then_some(attr.sched_deadline),
            period_ns: dl.then_some(attr.sched_period),
            rr_interval_ns,
            rr_interval_source,
            affinity_list: format_cpu_list(&affinity),
            affinity,
            reset_on_fork: attr.sched_flags & sched::SCHED_FLAG_RESET_ON_FORK != 0,
            sched_flags: attr.sched_flags,
            threads: None,
        }
    }

    /// "nice 5", "priority 10", "1 ms / 10 ms / 10 ms".
    fn params(&self) -> String {
        if let Some(n) = self.nice {
            format!("nice {n}")
        } else if let Some(p) = self.priority {
            format!("priority {p}")
        } else if let (Some(r), Some(d), Some(p)) =
            (self.runtime_ns, self.deadline_ns, self.period_ns)
        {
            format!("{} / {} / {}", format_ns(r), format_ns(d), format_ns(p))
        } else {
            "-".into()
        }
    }
}

/// The aligned key/value text of `policy get`.
pub fn render_text(info: &SchedInfo) -> String {
    let mut rows: Vec<(&str, String)> = vec![("pid", format!("{} ({})", info.pid, info.comm))];
    let class = Policy::parse(&info.policy)
        .filter(|_| info.policy != "unknown")
        .map(Policy::class);
    let class_label = match class {
        Some(Class::Fair) => ", fair",
        Some(Class::Realtime) => ", real-time",
        Some(Class::Deadline | Class::Wrr) | None => "",
    };
    rows.push((
        "policy",
        format!("{} ({}{class_label})", info.policy, info.kernel_policy),
    ));
    if let Some(n) = info.nice {
        rows.push((
            "nice",
            if info.policy == "idle" {
                format!("{n} (kept, but SCHED_IDLE ignores it: the lowest weight)")
            } else {
                format!("{n} ({NICE_MIN}..{NICE_MAX}, lower gets more CPU)")
            },
        ));
    }
    if let Some(s) = info.slice_ns {
        rows.push(("slice", format!("{} (EEVDF request size)", format_ns(s))));
    }
    if let Some(p) = info.priority {
        rows.push((
            "priority",
            format!("{p} ({RT_MIN}..{RT_MAX}, higher runs first)"),
        ));
    }
    if let (Some(r), Some(d), Some(p)) = (info.runtime_ns, info.deadline_ns, info.period_ns) {
        rows.push(("runtime", format_ns(r)));
        rows.push(("deadline", format_ns(d)));
        rows.push(("period", format_ns(p)));
        if p > 0 {
            rows.push((
                "bandwidth",
                format!(
                    "{:.1}% of one CPU (runtime / period)",
                    r as f64 * 100.0 / p as f64
                ),
            ));
        }
    }
    rows.push((
        "rr interval",
        match info.rr_interval_ns {
            Some(ns) => format!("{} ({})", format_ns(ns), info.rr_interval_source),
            None => format!("unknown ({})", info.rr_interval_source),
        },
    ));
    rows.push(("affinity", format!("CPUs {}", info.affinity_list)));
    rows.push((
        "reset-on-fork",
        if info.reset_on_fork { "yes" } else { "no" }.to_string(),
    ));
    let mut out = String::new();
    for (k, v) in rows {
        out += &format!("{k:<15}{v}\n");
    }
    if let Some(threads) = &info.threads {
        out += &format!("{:<15}{}\n", "threads", threads.len());
        out += &format!(
            "  {:<8} {:<16} {:<9} {:<28} {:<10} {}\n",
            "TID", "COMM", "POLICY", "PARAMETERS", "AFFINITY", "RESET-ON-FORK"
        );
        for t in threads {
            out += &format!(
                "  {:<8} {:<16} {:<9} {:<28} {:<10} {}\n",
                t.pid,
                t.comm,
                t.policy,
                t.params(),
                t.affinity_list,
                if t.reset_on_fork { "yes" } else { "no" }
            );
        }
    }
    out
}

fn no_process(pid: i32) -> anyhow::Error {
    anyhow!("no process with pid {pid}")
}

fn is_esrch(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::ESRCH)
}

/// Reads the scheduling of thread `tid` (a pid is its main thread), with the
/// command name from `comm_path`.
fn read_task(tid: i32, comm_path: &Path) -> io::Result<SchedInfo> {
    let attr = sched::get_attr(tid)?;
    let rr = sched::rr_interval_ns(tid).ok();
    let affinity = sched::get_affinity(tid)?;
    let comm = procfs::read_trimmed(comm_path).unwrap_or_else(|| "?".into());
    let timeslice = procfs::read_i64_file(Path::new(RR_TIMESLICE_SYSCTL));
    Ok(SchedInfo::new(tid, comm, &attr, rr, timeslice, affinity))
}

/// The thread ids of a process, ascending.
fn list_threads(pid: i32) -> io::Result<Vec<i32>> {
    let mut tids: Vec<i32> = std::fs::read_dir(format!("/proc/{pid}/task"))?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    tids.sort_unstable();
    Ok(tids)
}

/// The scheduling of `pid`, and of each of its threads with `all_threads`.
pub fn read_info(pid: i32, all_threads: bool) -> Result<SchedInfo> {
    let mut info =
        read_task(pid, &Path::new("/proc").join(pid.to_string()).join("comm")).map_err(|e| {
            if is_esrch(&e) {
                no_process(pid)
            } else {
                anyhow!("cannot read the scheduling of pid {pid}: {}", strerror(&e))
            }
        })?;
    if all_threads {
        let mut threads = Vec::new();
        for tid in list_threads(pid).map_err(|_| no_process(pid))? {
            let comm = format!("/proc/{pid}/task/{tid}/comm");
            match read_task(tid, Path::new(&comm)) {
                Ok(t) => threads.push(t),
                Err(e) if is_esrch(&e) => {} // the thread exited meanwhile
                Err(e) => return Err(anyhow!("cannot read thread {tid} of pid {pid}: {e}")),
            }
        }
        info.threads = Some(threads);
    }
    Ok(info)
}

/// An errno's text without Rust's " (os error N)" suffix.
fn strerror(e: &io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error ") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// Field 19 (nice) of a `/proc/PID/stat` line; the command name in field 2
/// may contain spaces and parentheses, so fields are counted after the last ')'.
pub fn parse_stat_nice(stat: &str) -> Option<i32> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_ascii_whitespace().nth(16)?.parse().ok()
}

/// (real, effective) uid from `/proc/PID/status`.
pub fn parse_status_uids(status: &str) -> Option<(u32, u32)> {
    let line = status.lines().find_map(|l| l.strip_prefix("Uid:"))?;
    let mut f = line.split_ascii_whitespace().map(|v| v.parse::<u32>().ok());
    Some((f.next()??, f.next()??))
}

/// (soft, hard) of a `/proc/PID/limits` line such as "Max realtime
/// priority"; `u64::MAX` for unlimited.
pub fn parse_limit(limits: &str, name: &str) -> Option<(u64, u64)> {
    let line = limits.lines().find_map(|l| l.strip_prefix(name))?;
    let mut f = line.split_ascii_whitespace().map(|v| match v {
        "unlimited" => Some(u64::MAX),
        v => v.parse().ok(),
    });
    Some((f.next()??, f.next()??))
}

/// The online CPUs (`/sys/devices/system/cpu/online`), or this thread's
/// affinity if that cannot be read.
fn online_cpus() -> Vec<usize> {
    procfs::read_trimmed(Path::new("/sys/devices/system/cpu/online"))
        .and_then(|s| match Cpus::parse(&s) {
            Ok(Cpus::List(l)) if !l.is_empty() => Some(l),
            _ => None,
        })
        .or_else(|| sched::get_affinity(0).ok())
        .unwrap_or_else(|| vec![0])
}

// ---------------------------------------------------------------------------
// Applying, and explaining refusals
// ---------------------------------------------------------------------------

pub use crate::sys::child::Step;
use crate::sys::child::{apply_sched_raw as apply_raw, decode_step};

/// The SCHED_DEADLINE admission test in numbers: the kernel admits a task
/// while Σ runtime/period of the root domain's DEADLINE tasks stays within
/// `sched_rt_runtime_us / sched_rt_period_us × CPUs`.
#[derive(Debug, Clone, PartialEq)]
pub struct Admission {
    pub runtime_ns: u64,
    pub period_ns: u64,
    pub rt_runtime_us: Option<i64>,
    pub rt_period_us: Option<i64>,
    pub cpus: usize,
    /// Other DEADLINE tasks found in /proc: (count, Σ runtime/period).
    pub others: Option<(usize, f64)>,
    /// Bandwidth the kernel reserves for the fair-class servers (6.12+),
    /// with where the figure comes from.
    pub servers: Option<(f64, String)>,
}

/// The numbers of an EBUSY admission failure.
pub fn admission_text(a: &Admission) -> String {
    let requested = if a.period_ns > 0 {
        a.runtime_ns as f64 / a.period_ns as f64
    } else {
        0.0
    };
    let mut s = format!(
        "requested {} every {} = {requested:.3} CPU",
        format_ns(a.runtime_ns),
        format_ns(a.period_ns)
    );
    let limit = match (a.rt_runtime_us, a.rt_period_us) {
        (Some(-1), _) => {
            s += "; limit: none (sched_rt_runtime_us = -1), so the refusal comes from \
                  somewhere else (a cpuset root domain, or a kernel without bandwidth control)";
            return s;
        }
        (Some(r), Some(p)) if p > 0 => {
            let limit = r as f64 / p as f64 * a.cpus as f64;
            s += &format!(
                "; limit sched_rt_runtime_us/sched_rt_period_us = {r}/{p} × {} CPU{} = {limit:.3} CPUs",
                a.cpus,
                if a.cpus == 1 { "" } else { "s" }
            );
            limit
        }
        _ => {
            s += "; limit unknown (sched_rt_runtime_us/sched_rt_period_us unreadable)";
            return s;
        }
    };
    let mut sum = requested;
    let mut terms = vec![format!("{requested:.3}")];
    if let Some((n, bw)) = a.others {
        s += &format!(
            "; already admitted: {n} other DEADLINE task{} with {bw:.3} CPU",
            if n == 1 { "" } else { "s" }
        );
        sum += bw;
        terms.push(format!("{bw:.3}"));
    }
    if let Some((bw, source)) = &a.servers {
        s += &format!("; reserved for the fair-class servers: {bw:.3} CPU ({source})");
        sum += bw;
        terms.push(format!("{bw:.3}"));
    }
    if terms.len() > 1 {
        s += &format!(
            "; {} = {sum:.3} {} {limit:.3}",
            terms.join(" + "),
            if sum > limit { ">" } else { "<=" }
        );
    }
    s
}

/// What is known about the target of a refused change, read after the
/// refusal to explain it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RefusalContext {
    /// "pid 123 (sleep)" or "the command".
    pub who: String,
    /// The target's policy and nice before the change.
    pub before_policy: Option<u32>,
    pub before_nice: Option<i32>,
    /// The target's `sched_flags` before the change.
    pub before_flags: Option<u64>,
    /// (target uid, our euid) when they differ and we lack CAP_SYS_NICE.
    pub other_owner: Option<(u32, u32)>,
    /// schedlab has CAP_SYS_NICE.
    pub privileged: bool,
    /// The target's (soft, hard) RLIMIT_RTPRIO and RLIMIT_NICE.
    pub rlimit_rtprio: Option<(u64, u64)>,
    pub rlimit_nice: Option<(u64, u64)>,
    /// The target's affinity before the change.
    pub affinity: Option<Vec<usize>>,
    pub online: Vec<usize>,
    pub admission: Option<Admission>,
    /// kernel.sched_deadline_period_min_us, max_us.
    pub period_limits_us: (Option<u64>, Option<u64>),
}

fn fmt_limit(v: u64) -> String {
    if v == u64::MAX {
        "unlimited".into()
    } else {
        v.to_string()
    }
}

/// Explains a refusal of `step` with `errno` in words: which capability or
/// rlimit is missing, which parameter is wrong, the admission numbers.
pub fn explain(
    step: Step,
    errno: i32,
    req: &Request,
    cpus: Option<&[usize]>,
    ctx: &RefusalContext,
) -> String {
    let who = &ctx.who;
    let owner = ctx.other_owner.map(|(uid, me)| {
        format!(
            "{who} belongs to uid {uid} and you are uid {me}: changing another user's process \
             needs CAP_SYS_NICE (run as root or setcap cap_sys_nice+ep $(which schedlab))"
        )
    });
    let cpu_list = cpus.map(format_cpu_list).unwrap_or_default();
    if errno == libc::ESRCH {
        return format!("ESRCH: {who} no longer exists");
    }
    match step {
        Step::Affinity => match errno {
            libc::EPERM => format!(
                "EPERM: {}",
                owner.unwrap_or_else(|| format!(
                    "not permitted to change the affinity of {who}: {}",
                    permission_hint("")
                ))
            ),
            libc::EINVAL => format!(
                "EINVAL: none of CPUs {cpu_list} is both online and allowed by the cpuset of {who}"
            ),
            libc::EBUSY => format!(
                "EBUSY: {who} is SCHED_DEADLINE, which must stay allowed on every CPU of its \
                 root domain (online CPUs {}): change the policy first or leave --cpus out",
                format_cpu_list(&ctx.online)
            ),
            e => strerror(&io::Error::from_raw_os_error(e)),
        },
        Step::Attr => {
            let Some(policy) = req.policy else {
                return strerror(&io::Error::from_raw_os_error(errno));
            };
            let name = policy.name();
            match errno {
                libc::EPERM => {
                    if let Some(owner) = owner {
                        return format!("EPERM: {owner}");
                    }
                    let leaving_idle =
                        ctx.before_policy == Some(sched::SCHED_IDLE) && policy != Policy::Idle;
                    let lower_nice = match (req.nice, ctx.before_nice) {
                        (Some(new), Some(old)) if policy.class() == Class::Fair => {
                            (new < old).then_some((old, new))
                        }
                        _ => None,
                    };
                    let clears_reset_on_fork = !req.reset_on_fork
                        && ctx
                            .before_flags
                            .is_some_and(|f| f & sched::SCHED_FLAG_RESET_ON_FORK != 0);
                    if clears_reset_on_fork && !ctx.privileged {
                        return format!(
                            "EPERM: {who} has reset-on-fork set, and clearing it needs \
                             CAP_SYS_NICE: add --reset-on-fork to keep it, or {}",
                            permission_hint("")
                        );
                    }
                    let narrow = cpus
                        .or(ctx.affinity.as_deref())
                        .filter(|aff| ctx.online.iter().any(|c| !aff.contains(c)));
                    if policy == Policy::Deadline
                        && ctx.privileged
                        && let Some(aff) = narrow
                    {
                        return format!(
                            "EPERM: SCHED_DEADLINE needs the task allowed on every CPU of its \
                             root domain, but {who} may only run on CPUs {} of {}: add --cpus all",
                            format_cpu_list(aff),
                            format_cpu_list(&ctx.online)
                        );
                    }
                    let mut s = if policy.class() == Class::Fair && leaving_idle {
                        errno_explanation("idle", libc::EPERM)
                    } else if let Some((old, new)) = lower_nice {
                        let term = if new < 0 {
                            format!("({new})")
                        } else {
                            new.to_string()
                        };
                        format!(
                            "EPERM: lowering the nice value of {who} from {old} to {new} needs \
                             CAP_SYS_NICE or RLIMIT_NICE >= 20 - {term} = {}: {}",
                            20 - new,
                            permission_hint("nice")
                        )
                    } else {
                        errno_explanation(name, libc::EPERM)
                    };
                    match policy.class() {
                        Class::Realtime => {
                            if let Some((soft, hard)) = ctx.rlimit_rtprio {
                                s += &format!(
                                    "; {who} has RLIMIT_RTPRIO {} (soft) / {} (hard), priority {} \
                                     needs at least {}",
                                    fmt_limit(soft),
                                    fmt_limit(hard),
                                    req.priority.unwrap_or(0),
                                    req.priority.unwrap_or(0)
                                );
                            }
                        }
                        Class::Fair if lower_nice.is_some() || leaving_idle => {
                            if let Some((soft, hard)) = ctx.rlimit_nice {
                                s += &format!(
                                    "; {who} has RLIMIT_NICE {} (soft) / {} (hard)",
                                    fmt_limit(soft),
                                    fmt_limit(hard)
                                );
                            }
                        }
                        Class::Deadline => {
                            if let Some(aff) = narrow {
                                s += &format!(
                                    "; here {who} may only run on CPUs {} of {}: add --cpus all",
                                    format_cpu_list(aff),
                                    format_cpu_list(&ctx.online)
                                );
                            }
                        }
                        _ => {}
                    }
                    s
                }
                libc::EINVAL => {
                    let mut s = errno_explanation(name, libc::EINVAL);
                    if let Some(dl) = req.dl {
                        let lim = |v: Option<u64>| v.map_or("?".into(), |us| format_ns(us * 1000));
                        s += &format!(
                            "; requested runtime {}, deadline {}, period {}; the period limits \
                             are {}..{}",
                            format_ns(dl.runtime_ns),
                            format_ns(dl.deadline_ns),
                            format_ns(dl.period_ns),
                            lim(ctx.period_limits_us.0),
                            lim(ctx.period_limits_us.1)
                        );
                    }
                    s
                }
                libc::EBUSY if policy == Policy::Deadline => {
                    let mut s = errno_explanation("deadline", libc::EBUSY);
                    if let Some(a) = &ctx.admission {
                        s += &format!(": {}", admission_text(a));
                    }
                    s
                }
                e => errno_explanation(name, e),
            }
        }
    }
}

/// Σ runtime/period of the DEADLINE threads in /proc, except those of
/// `exclude` (the target, whose old reservation the kernel replaces).
fn admitted_deadline(exclude: Option<i32>) -> (usize, f64) {
    let mut n = 0;
    let mut bw = 0.0;
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return (0, 0.0);
    };
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if Some(pid) == exclude {
            continue;
        }
        for tid in list_threads(pid).unwrap_or_default() {
            if let Ok(a) = sched::get_attr(tid)
                && a.sched_policy == sched::SCHED_DEADLINE
            {
                let period = if a.sched_period > 0 {
                    a.sched_period
                } else {
                    a.sched_deadline
                };
                if period > 0 {
                    n += 1;
                    bw += a.sched_runtime as f64 / period as f64;
                }
            }
        }
    }
    (n, bw)
}

/// Bandwidth reserved for the fair-class DEADLINE servers: from debugfs when
/// readable, else the default 50 ms per 1 s on each CPU on kernels >= 6.12.
fn server_bandwidth(cpus: &[usize]) -> Option<(f64, String)> {
    let dir = Path::new("/sys/kernel/debug/sched/fair_server");
    let mut total = 0.0;
    let mut read = 0;
    for c in cpus {
        let d = dir.join(format!("cpu{c}"));
        if let (Some(r), Some(p)) = (
            procfs::read_u64_file(&d.join("runtime")),
            procfs::read_u64_file(&d.join("period")),
        ) && p > 0
        {
            total += r as f64 / p as f64;
            read += 1;
        }
    }
    if read == cpus.len() && read > 0 {
        return Some((total, format!("{}", dir.display())));
    }
    let release = procfs::read_trimmed(Path::new("/proc/sys/kernel/osrelease"))?;
    let mut parts = release.split(['.', '-']).map(|p| p.parse::<u32>().ok());
    let (major, minor) = (parts.next()??, parts.next()??);
    ((major, minor) >= (6, 12)).then(|| {
        (
            0.05 * cpus.len() as f64,
            format!(
                "kernel {major}.{minor}: the default 50 ms per 1 s on each CPU, assumed; see {}",
                dir.display()
            ),
        )
    })
}

/// Collects what explains a refusal of `req` on thread `tid` of `pid`
/// (None: the calling thread, for exec).
fn refusal_context(
    who: String,
    pid: Option<i32>,
    tid: i32,
    before: Option<&sched::SchedAttr>,
    before_nice: Option<i32>,
    req: &Request,
) -> RefusalContext {
    let proc_dir = match pid {
        Some(p) => format!("/proc/{p}"),
        None => "/proc/self".into(),
    };
    let status = std::fs::read_to_string(format!("{proc_dir}/status")).ok();
    let me = std::fs::read_to_string("/proc/self/status").ok();
    let my_euid = me.as_deref().and_then(parse_status_uids).map(|u| u.1);
    let my_cap = me
        .as_deref()
        .and_then(probe::parse_cap_eff)
        .is_some_and(|c| probe::has_cap(c, probe::CAP_SYS_NICE));
    let other_owner = match (pid, status.as_deref().and_then(parse_status_uids), my_euid) {
        (Some(_), Some((ruid, euid)), Some(me)) if me != ruid && me != euid && !my_cap => {
            Some((ruid, me))
        }
        _ => None,
    };
    let limits = std::fs::read_to_string(format!("{proc_dir}/limits")).ok();
    let online = online_cpus();
    let admission = match (req.policy, req.dl) {
        (Some(Policy::Deadline), Some(dl)) => Some(Admission {
            runtime_ns: dl.runtime_ns,
            period_ns: dl.period_ns,
            rt_runtime_us: procfs::read_i64_file(Path::new("/proc/sys/kernel/sched_rt_runtime_us")),
            rt_period_us: procfs::read_i64_file(Path::new("/proc/sys/kernel/sched_rt_period_us")),
            cpus: online.len(),
            others: Some(admitted_deadline(pid)),
            servers: server_bandwidth(&online),
        }),
        _ => None,
    };
    RefusalContext {
        who,
        before_policy: before.map(|a| a.sched_policy),
        before_flags: before.map(|a| a.sched_flags),
        before_nice,
        other_owner,
        privileged: my_cap,
        rlimit_rtprio: limits
            .as_deref()
            .and_then(|l| parse_limit(l, "Max realtime priority")),
        rlimit_nice: limits
            .as_deref()
            .and_then(|l| parse_limit(l, "Max nice priority")),
        affinity: sched::get_affinity(tid).ok(),
        online,
        admission,
        period_limits_us: period_limits(),
    }
}

fn period_limits() -> (Option<u64>, Option<u64>) {
    (
        procfs::read_u64_file(Path::new("/proc/sys/kernel/sched_deadline_period_min_us")),
        procfs::read_u64_file(Path::new("/proc/sys/kernel/sched_deadline_period_max_us")),
    )
}

/// What could not be done, for error messages: "cannot switch pid 7 (sleep)
/// to fifo priority 10", "cannot start make on CPUs 0".
fn cannot(step: Step, req: &Request, cpus: Option<&[usize]>, target: &str, exec: bool) -> String {
    let list = cpus.map(format_cpu_list).unwrap_or_default();
    match (step, exec) {
        (Step::Attr, false) => format!("cannot switch {target} to {}", req.describe_policy()),
        (Step::Affinity, false) => format!("cannot set the affinity of {target} to CPUs {list}"),
        (Step::Attr, true) => format!("cannot start {target} under {}", req.describe_policy()),
        (Step::Affinity, true) => format!("cannot start {target} on CPUs {list}"),
    }
}

/// Validates everything that can be checked before a system call: the
/// arguments, the CPUs against the online ones, the DEADLINE period limits.
fn prepare(args: &SchedArgs) -> Result<(Request, Option<Vec<usize>>), SpecError> {
    let req = validate(args)?;
    let cpus = resolve_cpus(&req, &online_cpus())?;
    let (min, max) = period_limits();
    check_period_limits(args, &req, min, max)?;
    Ok((req, cpus))
}

// ---------------------------------------------------------------------------
// The subcommands
// ---------------------------------------------------------------------------

/// Runs a `policy` subcommand; returns the process exit code. Argument
/// errors are [`SpecError`]s (exit 2), refusals and missing processes other
/// errors (exit 1).
pub fn run(cmd: PolicyCommand) -> Result<i32> {
    match cmd {
        PolicyCommand::Get {
            pid,
            json,
            all_threads,
        } => {
            let pid = validate_pid(pid)?;
            let info = read_info(pid, all_threads)?;
            print_info(&info, json)?;
            Ok(0)
        }
        PolicyCommand::Set {
            pid,
            sched,
            all_threads,
            json,
        } => {
            let pid = validate_pid(pid)?;
            let (req, cpus) = prepare(&sched)?;
            set(pid, &req, cpus.as_deref(), all_threads)?;
            let info = read_info(pid, all_threads)?;
            print_info(&info, json)?;
            Ok(0)
        }
        PolicyCommand::Exec { sched, command } => {
            let (req, cpus) = prepare(&sched)?;
            exec(&req, cpus.as_deref(), &command)
        }
    }
}

fn print_info(info: &SchedInfo, json: bool) -> Result<()> {
    use std::io::Write as _;
    if json {
        outln!("{}", serde_json::to_string_pretty(info)?)?;
    } else {
        // Thread names are chosen by the process: escaped for the terminal.
        write!(
            crate::out::stdout(),
            "{}",
            crate::out::esc_lines(&render_text(info))
        )?;
    }
    Ok(())
}

/// `policy set`: the main thread, or every thread with `all_threads`.
fn set(pid: i32, req: &Request, cpus: Option<&[usize]>, all_threads: bool) -> Result<()> {
    let tids = if all_threads {
        list_threads(pid).map_err(|_| no_process(pid))?
    } else {
        vec![pid]
    };
    let comm =
        procfs::read_trimmed(Path::new(&format!("/proc/{pid}/comm"))).unwrap_or_else(|| "?".into());
    let set = cpus.map(sched::cpu_set);
    let mut failures = Vec::new();
    let mut changed = 0;
    for &tid in &tids {
        let before = match sched::get_attr(tid) {
            Ok(a) => a,
            Err(e) if is_esrch(&e) && tid != pid => continue, // the thread exited
            Err(e) if is_esrch(&e) => return Err(no_process(pid)),
            Err(e) => return Err(anyhow!("cannot read the scheduling of pid {pid}: {e}")),
        };
        let before_nice = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat"))
            .ok()
            .and_then(|s| parse_stat_nice(&s));
        let attr = req.attr(before_nice.unwrap_or(before.sched_nice));
        match apply_raw(tid, attr.as_ref(), set.as_ref()) {
            Ok(()) => changed += 1,
            Err((_, libc::ESRCH)) if tid != pid => {}
            Err((_, libc::ESRCH)) => return Err(no_process(pid)),
            Err((step, errno)) => {
                let who = if tid == pid {
                    format!("pid {pid} ({comm})")
                } else {
                    format!("thread {tid} of pid {pid} ({comm})")
                };
                let ctx =
                    refusal_context(who.clone(), Some(pid), tid, Some(&before), before_nice, req);
                let mut msg = format!(
                    "{}: {}",
                    cannot(step, req, cpus, &who, false),
                    explain(step, errno, req, cpus, &ctx)
                );
                if step == Step::Affinity && attr.is_some() {
                    msg += " (the policy was changed, the affinity was not)";
                }
                if step == Step::Attr
                    && set.is_some()
                    && attr.is_some_and(|a| a.sched_policy == sched::SCHED_DEADLINE)
                {
                    msg += " (the affinity was changed, the policy was not)";
                }
                failures.push(msg);
            }
        }
    }
    if failures.is_empty() {
        return Ok(());
    }
    let mut msg = failures.join("\n");
    if tids.len() > 1 {
        msg += &format!(
            "\n{} of {} threads of pid {pid} refused; {changed} changed",
            failures.len(),
            tids.len()
        );
    }
    Err(anyhow!(msg))
}

/// `policy exec`: fork, apply the policy and affinity in the child, exec,
/// wait, and return the command's exit code (128+N for signal N).
fn exec(req: &Request, cpus: Option<&[usize]>, command: &[String]) -> Result<i32> {
    let program = command
        .first()
        .ok_or_else(|| anyhow!("no command given after --"))?;
    let before = sched::get_attr(0).context("cannot read this process's scheduling")?;
    let before_nice = std::fs::read_to_string("/proc/thread-self/stat")
        .ok()
        .and_then(|s| parse_stat_nice(&s));
    let attr = req.attr(before_nice.unwrap_or(before.sched_nice));
    let set = cpus.map(sched::cpu_set);

    // The parent takes SIGCHLD, SIGINT, SIGTERM and SIGHUP synchronously
    // while it waits: Ctrl-C reaches the command through the terminal's
    // process group and is ignored here, TERM and HUP are passed on.
    let signals = proc::control_signals();
    proc::block(&signals).context("cannot block signals")?;
    let restore = || {
        while proc::wait_signal(&signals, Duration::ZERO).is_some() {}
        let _ = proc::unblock_all_raw();
    };

    let mut cmd = Command::new(program);
    cmd.args(&command[1..]);
    crate::sys::child::configure(
        &mut cmd,
        crate::sys::child::ChildSetup {
            unblock_signals: true,
            attr,
            affinity: set,
            ..Default::default()
        },
    );
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            restore();
            let raw = e.raw_os_error().unwrap_or(0);
            if let Some((step, errno)) = decode_step(raw) {
                let ctx = refusal_context(
                    "the command".into(),
                    None,
                    0,
                    Some(&before),
                    before_nice,
                    req,
                );
                return Err(anyhow!(
                    "{}: {} (the command did not run)",
                    cannot(step, req, cpus, program, true),
                    explain(step, errno, req, cpus, &ctx)
                ));
            }
            note!(
                "error: cannot run {}: {}",
                crate::out::esc(program),
                strerror(&e)
            );
            return Ok(if e.kind() == io::ErrorKind::NotFound {
                127
            } else {
                126
            });
        }
    };
    let child_pid = child.id() as i32;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {}
            Err(e) => {
                restore();
                return Err(anyhow!("cannot wait for {program}: {e}"));
            }
        }
        if let Some(sig) = proc::wait_signal(&signals, Duration::from_secs(1))
            && (sig == libc::SIGTERM || sig == libc::SIGHUP)
        {
            proc::kill(child_pid, sig);
        }
    };
    restore();
    Ok(match (status.code(), status.signal()) {
        (Some(code), _) => code,
        (None, Some(sig)) => 128 + sig,
        (None, None) => 1,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(policy: &str) -> SchedArgs {
        SchedArgs {
            policy: Some(policy.into()),
            ..Default::default()
        }
    }

    fn key_of(e: SpecError) -> (String, String) {
        match e {
            SpecError::Invalid {
                origin,
                key,
                message,
            } => {
                assert_eq!(origin, "schedlab policy");
                (key, message)
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    fn err(a: &SchedArgs) -> (String, String) {
        key_of(validate(a).expect_err("should be refused"))
    }

    #[test]
    fn durations_parse_exactly() {
        assert_eq!(parse_duration_ns("5ms"), Ok(5_000_000));
        assert_eq!(parse_duration_ns("1.5s"), Ok(1_500_000_000));
        assert_eq!(parse_duration_ns("250us"), Ok(250_000));
        assert_eq!(parse_duration_ns("250µs"), Ok(250_000));
        assert_eq!(parse_duration_ns("2000000ns"), Ok(2_000_000));
        assert_eq!(parse_duration_ns("1s"), Ok(1_000_000_000));
        assert_eq!(parse_duration_ns(" 0.25 ms "), Ok(250_000));
        assert_eq!(parse_duration_ns("0.000000001s"), Ok(1));
        assert_eq!(parse_duration_ns("1.50ms"), Ok(1_500_000));
        assert_eq!(parse_duration_ns("0ms"), Ok(0));
        for bad in [
            "",
            "5",
            "ms",
            "5 m",
            "5min",
            "-5ms",
            "1.2.3ms",
            ".5ms",
            "5.ms",
            "1.5ns",
            "0.0000000001s",
            "99999999999999999999ns",
            "20000000000s",
            "5 ms x",
        ] {
            assert!(parse_duration_ns(bad).is_err(), "{bad:?} accepted");
        }
        assert!(parse_duration_ns("5").unwrap_err().contains("no unit"));
        assert!(
            parse_duration_ns("5min")
                .unwrap_err()
                .contains("unknown unit")
        );
        assert!(
            parse_duration_ns("1.5ns")
                .unwrap_err()
                .contains("finer than 1 ns")
        );
    }

    #[test]
    fn durations_format_for_people() {
        assert_eq!(format_ns(0), "0 ns");
        assert_eq!(format_ns(900), "900 ns");
        assert_eq!(format_ns(1_024), "1.024 µs");
        assert_eq!(format_ns(250_000), "250 µs");
        assert_eq!(format_ns(2_800_000), "2.8 ms");
        assert_eq!(format_ns(10_000_000), "10 ms");
        assert_eq!(format_ns(1_500_000_000), "1.5 s");
        assert_eq!(format_ns(1_000_001), "1.000001 ms");
        for ns in [
            1,
            1024,
            999_999,
            2_800_000,
            1_500_000_000,
            4_194_304_000_000,
        ] {
            let s = format_ns(ns).replace(' ', "").replace('µ', "u");
            assert_eq!(parse_duration_ns(&s), Ok(ns), "{s}");
        }
    }

    #[test]
    fn fair_policies_take_nice() {
        for p in ["other", "normal", "SCHED_BATCH"] {
            let r = validate(&SchedArgs {
                nice: Some(5),
                ..args(p)
            })
            .unwrap();
            assert_eq!(r.nice, Some(5));
            assert_eq!(r.attr(0).unwrap().sched_nice, 5);
        }
        let (k, m) = err(&SchedArgs {
            nice: Some(5),
            ..args("idle")
        });
        assert_eq!(k, "--nice");
        assert!(m.contains("SCHED_IDLE ignores the nice value"), "{m}");
        let r = validate(&args("idle")).unwrap();
        assert_eq!(r.attr(3).unwrap().sched_policy, sched::SCHED_IDLE);
        // Without --nice the current value is kept.
        let r = validate(&args("batch")).unwrap();
        assert_eq!(r.nice, None);
        let a = r.attr(7).unwrap();
        assert_eq!((a.sched_policy, a.sched_nice), (sched::SCHED_BATCH, 7));
        for n in [-21, 20, 100] {
            let (k, m) = err(&SchedArgs {
                nice: Some(n),
                ..args("other")
            });
            assert_eq!(k, "--nice");
            assert!(m.contains("-20..19") && m.contains(&n.to_string()), "{m}");
        }
        let (k, m) = err(&SchedArgs {
            priority: Some(5),
            ..args("other")
        });
        assert_eq!(k, "--priority");
        assert!(
            m.contains("fifo or rr") && m.contains("--nice -20..19"),
            "{m}"
        );
        for (flag, a) in [
            (
                "--runtime",
                SchedArgs {
                    runtime: Some("1ms".into()),
                    ..args("batch")
                },
            ),
            (
                "--period",
                SchedArgs {
                    period: Some("1ms".into()),
                    ..args("idle")
                },
            ),
            (
                "--deadline",
                SchedArgs {
                    deadline: Some("1ms".into()),
                    ..args("other")
                },
            ),
        ] {
            let (k, m) = err(&a);
            assert_eq!(k, flag);
            assert!(m.contains("only for --policy deadline"), "{m}");
        }
    }

    #[test]
    fn realtime_policies_take_a_priority() {
        for p in ["fifo", "rr"] {
            let r = validate(&SchedArgs {
                priority: Some(10),
                ..args(p)
            })
            .unwrap();
            let a = r.attr(0).unwrap();
            assert_eq!(a.sched_priority, 10);
            assert_eq!(Policy::from_kernel_id(a.sched_policy).unwrap().name(), p);
            let (k, m) = err(&args(p));
            assert_eq!(k, "--priority");
            assert!(m.contains("needs --priority 1..99"), "{m}");
            for bad in [0, 100, -1] {
                let (k, m) = err(&SchedArgs {
                    priority: Some(bad),
                    ..args(p)
                });
                assert_eq!(k, "--priority");
                assert!(m.contains("1..99") && m.contains(&bad.to_string()), "{m}");
            }
            let (k, m) = err(&SchedArgs {
                priority: Some(10),
                nice: Some(1),
                ..args(p)
            });
            assert_eq!(k, "--nice");
            assert!(m.contains("--priority 1..99"), "{m}");
            let (k, _) = err(&SchedArgs {
                priority: Some(10),
                runtime: Some("1ms".into()),
                ..args(p)
            });
            assert_eq!(k, "--runtime");
        }
    }

    #[test]
    fn deadline_needs_consistent_parameters() {
        let dl = |r: Option<&str>, d: Option<&str>, p: Option<&str>| SchedArgs {
            runtime: r.map(String::from),
            deadline: d.map(String::from),
            period: p.map(String::from),
            ..args("deadline")
        };
        let r = validate(&dl(Some("1ms"), Some("5ms"), Some("10ms"))).unwrap();
        let a = r.attr(0).unwrap();
        assert_eq!(
            (a.sched_runtime, a.sched_deadline, a.sched_period),
            (1_000_000, 5_000_000, 10_000_000)
        );
        assert_eq!(a.sched_policy, sched::SCHED_DEADLINE);
        // The deadline defaults to the period and the other way round.
        let r = validate(&dl(Some("1ms"), None, Some("10ms"))).unwrap();
        assert_eq!(r.dl.unwrap().deadline_ns, 10_000_000);
        let r = validate(&dl(Some("1ms"), Some("4ms"), None)).unwrap();
        assert_eq!(r.dl.unwrap().period_ns, 4_000_000);
        assert_eq!(
            r.describe_policy(),
            "deadline runtime 1 ms, deadline 4 ms, period 4 ms"
        );

        let cases = [
            (dl(None, None, Some("10ms")), "--runtime", "needs --runtime"),
            (dl(Some("1ms"), None, None), "--period", "needs --period"),
            (
                dl(Some("1000ns"), None, Some("10ms")),
                "--runtime",
                "1024 ns",
            ),
            (
                dl(Some("20ms"), None, Some("10ms")),
                "--runtime",
                "runtime 20 ms exceeds the deadline 10 ms",
            ),
            (
                dl(Some("1ms"), Some("20ms"), Some("10ms")),
                "--deadline",
                "deadline 20 ms exceeds the period 10 ms",
            ),
            (dl(Some("1"), None, Some("10ms")), "--runtime", "no unit"),
            (
                dl(Some("1ms"), None, Some("ten")),
                "--period",
                "not a duration",
            ),
            (
                SchedArgs {
                    priority: Some(1),
                    ..dl(Some("1ms"), None, Some("10ms"))
                },
                "--priority",
                "no priority or nice",
            ),
            (
                SchedArgs {
                    nice: Some(1),
                    ..dl(Some("1ms"), None, Some("10ms"))
                },
                "--nice",
                "no priority or nice",
            ),
        ];
        for (a, key, text) in cases {
            let (k, m) = err(&a);
            assert_eq!(k, key, "{m}");
            assert!(m.contains(text), "{m} lacks {text}");
        }

        let a = dl(Some("50us"), None, Some("50us"));
        let r = validate(&a).unwrap();
        let (k, m) = key_of(check_period_limits(&a, &r, Some(100), Some(4_194_304)).unwrap_err());
        assert_eq!(k, "--period");
        assert!(
            m.contains("too short") && m.contains("100 µs..4.194304 s"),
            "{m}"
        );
        let a = dl(Some("1ms"), Some("5s"), None);
        let r = validate(&a).unwrap();
        let (k, m) = key_of(check_period_limits(&a, &r, Some(100), Some(4_194_304)).unwrap_err());
        assert_eq!(k, "--deadline");
        assert!(m.contains("too long"), "{m}");
        assert!(check_period_limits(&a, &r, None, None).is_ok());
    }

    #[test]
    fn policy_names_and_missing_policy() {
        let (k, m) = err(&args("wrr"));
        assert_eq!(k, "--policy");
        assert!(m.contains("not a kernel policy"), "{m}");
        let (k, m) = err(&args("wfq"));
        assert_eq!(k, "--policy");
        assert!(
            m.contains("\"wfq\"")
                && m.contains("other (alias normal), batch, idle, fifo, rr, deadline")
        );
        let (k, m) = err(&SchedArgs::default());
        assert_eq!(k, "--policy");
        assert!(m.contains("nothing to change"), "{m}");
        for (a, key) in [
            (
                SchedArgs {
                    priority: Some(1),
                    ..Default::default()
                },
                "--priority",
            ),
            (
                SchedArgs {
                    nice: Some(1),
                    ..Default::default()
                },
                "--nice",
            ),
            (
                SchedArgs {
                    period: Some("1ms".into()),
                    ..Default::default()
                },
                "--period",
            ),
            (
                SchedArgs {
                    reset_on_fork: true,
                    ..Default::default()
                },
                "--reset-on-fork",
            ),
        ] {
            assert_eq!(err(&a).0, key);
        }
        // Affinity alone is a valid change.
        let r = validate(&SchedArgs {
            cpus: Some("0".into()),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(r.policy, None);
        assert_eq!(r.attr(0), None);
        assert_eq!(validate_pid(0).map_err(|e| key_of(e).0), Err("PID".into()));
        assert_eq!(validate_pid(42), Ok(42));
    }

    #[test]
    fn reset_on_fork_sets_the_flag() {
        let r = validate(&SchedArgs {
            reset_on_fork: true,
            priority: Some(3),
            ..args("rr")
        })
        .unwrap();
        assert_eq!(
            r.attr(0).unwrap().sched_flags,
            sched::SCHED_FLAG_RESET_ON_FORK
        );
        assert_eq!(r.describe_policy(), "rr priority 3 with reset-on-fork");
    }

    #[test]
    fn cpus_resolve_against_online_cpus() {
        let with = |policy: Option<&str>, cpus: &str| {
            let mut a = SchedArgs {
                cpus: Some(cpus.into()),
                policy: policy.map(String::from),
                ..Default::default()
            };
            if policy == Some("deadline") {
                a.runtime = Some("1ms".into());
                a.period = Some("10ms".into());
            }
            validate(&a)
        };
        let online = [0, 1, 2, 3];
        let r = with(None, "1,3").unwrap();
        assert_eq!(resolve_cpus(&r, &online), Ok(Some(vec![1, 3])));
        let r = with(None, "all").unwrap();
        assert_eq!(resolve_cpus(&r, &online), Ok(Some(vec![0, 1, 2, 3])));
        let r = with(None, "2-5").unwrap();
        let (k, m) = key_of(resolve_cpus(&r, &online).unwrap_err());
        assert_eq!(k, "--cpus");
        assert!(
            m.contains("CPU 4, 5 are not online (online CPUs: 0-3)"),
            "{m}"
        );
        let (k, _) = key_of(with(None, "x").unwrap_err());
        assert_eq!(k, "--cpus");
        // DEADLINE keeps every CPU.
        let r = with(Some("deadline"), "0").unwrap();
        let (k, m) = key_of(resolve_cpus(&r, &online).unwrap_err());
        assert_eq!(k, "--cpus");
        assert!(m.contains("every CPU") && m.contains("--cpus all"), "{m}");
        let r = with(Some("deadline"), "all").unwrap();
        assert_eq!(resolve_cpus(&r, &online), Ok(Some(vec![0, 1, 2, 3])));
        let r = validate(&args("batch")).unwrap();
        assert_eq!(resolve_cpus(&r, &online), Ok(None));
    }

    fn sample(policy: u32) -> sched::SchedAttr {
        match policy {
            sched::SCHED_FIFO | sched::SCHED_RR => sched::SchedAttr::realtime(policy, 10),
            sched::SCHED_DEADLINE => sched::SchedAttr::deadline(1_000_000, 10_000_000, 10_000_000),
            p => sched::SchedAttr::fair(p, 5),
        }
    }

    #[test]
    fn info_keeps_only_the_values_of_its_class() {
        let i = SchedInfo::new(
            7,
            "sleep".into(),
            &sample(sched::SCHED_FIFO),
            Some(0),
            Some(100),
            vec![0],
        );
        assert_eq!(
            (i.policy.as_str(), i.kernel_policy.as_str()),
            ("fifo", "SCHED_FIFO")
        );
        assert_eq!((i.priority, i.nice, i.runtime_ns), (Some(10), None, None));
        assert!(i.rr_interval_source.contains("no time slice"));
        let mut a = sample(sched::SCHED_BATCH);
        a.sched_runtime = 2_800_000;
        let i = SchedInfo::new(
            7,
            "sleep".into(),
            &a,
            Some(2_000_000),
            Some(100),
            vec![0, 1],
        );
        assert_eq!(
            (i.nice, i.priority, i.slice_ns),
            (Some(5), None, Some(2_800_000))
        );
        assert_eq!(i.runtime_ns, None);
        assert!(i.rr_interval_source.contains("fair-class slice"));
        let mut a = sample(sched::SCHED_RR);
        a.sched_flags = sched::SCHED_FLAG_RESET_ON_FORK;
        let i = SchedInfo::new(7, "x".into(), &a, Some(100_000_000), Some(100), vec![1]);
        assert!(i.reset_on_fork);
        assert!(
            i.rr_interval_source
                .contains("kernel.sched_rr_timeslice_ms = 100")
        );
        assert!(i.rr_interval_source.contains(RR_TIMESLICE_SYSCTL));
        let i = SchedInfo::new(
            7,
            "x".into(),
            &sample(sched::SCHED_DEADLINE),
            Some(0),
            None,
            vec![0, 1],
        );
        assert_eq!(
            (i.runtime_ns, i.deadline_ns, i.period_ns, i.priority, i.nice),
            (
                Some(1_000_000),
                Some(10_000_000),
                Some(10_000_000),
                None,
                None
            )
        );
        assert_eq!(policy_names(7), ("ext".into(), "SCHED_EXT".into()));
        assert_eq!(policy_names(0), ("other".into(), "SCHED_OTHER".into()));
        assert_eq!(policy_names(42).0, "unknown");
    }

    #[test]
    fn renders_aligned_text_and_json() {
        let mut info = SchedInfo::new(
            4242,
            "sleep".into(),
            &sample(sched::SCHED_DEADLINE),
            Some(0),
            Some(100),
            vec![0, 1, 2, 5],
        );
        let text = render_text(&info);
        let expected = "pid            4242 (sleep)\n\
                        policy         deadline (SCHED_DEADLINE)\n\
                        runtime        1 ms\n\
                        deadline       10 ms\n\
                        period         10 ms\n\
                        bandwidth      10.0% of one CPU (runtime / period)\n\
                        rr interval    0 ns (SCHED_DEADLINE has no time slice: it runs for its runtime in every period)\n\
                        affinity       CPUs 0-2,5\n\
                        reset-on-fork  no\n";
        assert_eq!(text, expected);

        let rr = SchedInfo::new(
            4242,
            "sleep".into(),
            &sample(sched::SCHED_RR),
            Some(100_000_000),
            Some(100),
            vec![0],
        );
        let text = render_text(&rr);
        assert!(
            text.contains("policy         rr (SCHED_RR, real-time)\n"),
            "{text}"
        );
        assert!(
            text.contains("priority       10 (1..99, higher runs first)\n"),
            "{text}"
        );
        assert!(
            text.contains("rr interval    100 ms (kernel.sched_rr_timeslice_ms = 100, "),
            "{text}"
        );
        let other = SchedInfo::new(
            1,
            "init".into(),
            &sample(sched::SCHED_OTHER),
            Some(3_000_000),
            Some(100),
            vec![0],
        );
        let text = render_text(&other);
        assert!(
            text.contains("policy         other (SCHED_OTHER, fair)\n"),
            "{text}"
        );
        assert!(text.contains("nice           5 (-20..19"), "{text}");
        assert!(!text.contains("priority"), "{text}");

        info.threads = Some(vec![rr.clone(), other.clone()]);
        let text = render_text(&info);
        assert!(text.contains("threads        2\n"), "{text}");
        assert!(text.contains("priority 10"), "{text}");
        assert!(text.contains("nice 5"), "{text}");

        let v: serde_json::Value = serde_json::to_value(&rr).unwrap();
        assert_eq!(v["policy"], "rr");
        assert_eq!(v["priority"], 10);
        assert_eq!(v["nice"], serde_json::Value::Null);
        assert_eq!(v["affinity"], serde_json::json!([0]));
        assert_eq!(v["affinity_list"], "0");
        assert_eq!(v["rr_interval_ns"], 100_000_000);
        assert_eq!(v["reset_on_fork"], false);
        assert!(v.get("threads").is_none());
        let back: SchedInfo = serde_json::from_value(serde_json::to_value(&info).unwrap()).unwrap();
        assert_eq!(back, info);
    }

    #[test]
    fn proc_parsers() {
        let stat = "123 (a) b (c)) S 1 123 123 0 -1 4194304 100 0 0 0 1 2 0 0 20 5 1 0 100 \
                    1000 50 18446744073709551615";
        assert_eq!(parse_stat_nice(stat), Some(5));
        let stat = "9 (kworker) S 2 0 0 0 -1 0 0 0 0 0 0 0 0 0 0 -20 1 0";
        assert_eq!(parse_stat_nice(stat), Some(-20));
        assert_eq!(parse_stat_nice("garbage"), None);
        let status = "Name:\tsleep\nUid:\t1000\t1001\t1000\t1000\nGid:\t0\t0\t0\t0\n";
        assert_eq!(parse_status_uids(status), Some((1000, 1001)));
        assert_eq!(parse_status_uids("Name:\tx\n"), None);
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \n\
                      Max nice priority         0                    0                    \n\
                      Max realtime priority     10                   unlimited            \n";
        assert_eq!(
            parse_limit(limits, "Max realtime priority"),
            Some((10, u64::MAX))
        );
        assert_eq!(parse_limit(limits, "Max nice priority"), Some((0, 0)));
        assert_eq!(parse_limit(limits, "Max open files"), None);
    }

    fn ctx() -> RefusalContext {
        RefusalContext {
            who: "pid 42 (sleep)".into(),
            online: vec![0, 1],
            ..Default::default()
        }
    }

    #[test]
    fn admission_numbers() {
        let a = Admission {
            runtime_ns: 10_000_000,
            period_ns: 10_000_000,
            rt_runtime_us: Some(950_000),
            rt_period_us: Some(1_000_000),
            cpus: 2,
            others: Some((1, 1.0)),
            servers: Some((0.1, "default".into())),
        };
        let t = admission_text(&a);
        assert!(t.contains("requested 10 ms every 10 ms = 1.000 CPU"), "{t}");
        assert!(t.contains("950000/1000000 × 2 CPUs = 1.900 CPUs"), "{t}");
        assert!(t.contains("1 other DEADLINE task with 1.000 CPU"), "{t}");
        assert!(t.contains("1.000 + 1.000 + 0.100 = 2.100 > 1.900"), "{t}");
        let t = admission_text(&Admission {
            rt_runtime_us: Some(-1),
            ..a.clone()
        });
        assert!(t.contains("limit: none"), "{t}");

        let req = validate(&SchedArgs {
            runtime: Some("10ms".into()),
            period: Some("10ms".into()),
            ..args("deadline")
        })
        .unwrap();
        let c = RefusalContext {
            admission: Some(a),
            ..ctx()
        };
        let e = explain(Step::Attr, libc::EBUSY, &req, None, &c);
        assert!(
            e.starts_with("EBUSY: SCHED_DEADLINE admission test failed"),
            "{e}"
        );
        assert!(e.contains("2.100 > 1.900"), "{e}");
    }

    #[test]
    fn refusals_are_explained() {
        let fifo = validate(&SchedArgs {
            priority: Some(10),
            ..args("fifo")
        })
        .unwrap();
        let c = RefusalContext {
            rlimit_rtprio: Some((0, 0)),
            ..ctx()
        };
        let e = explain(Step::Attr, libc::EPERM, &fifo, None, &c);
        assert!(e.starts_with("EPERM") && e.contains("CAP_SYS_NICE"), "{e}");
        assert!(
            e.contains("RLIMIT_RTPRIO 0 (soft) / 0 (hard), priority 10 needs at least 10"),
            "{e}"
        );

        let c = RefusalContext {
            other_owner: Some((1000, 1001)),
            ..ctx()
        };
        let e = explain(Step::Attr, libc::EPERM, &fifo, None, &c);
        assert!(
            e.contains("belongs to uid 1000 and you are uid 1001"),
            "{e}"
        );

        let nice = validate(&SchedArgs {
            nice: Some(-5),
            ..args("other")
        })
        .unwrap();
        let c = RefusalContext {
            before_nice: Some(0),
            before_policy: Some(sched::SCHED_OTHER),
            rlimit_nice: Some((0, 0)),
            ..ctx()
        };
        let e = explain(Step::Attr, libc::EPERM, &nice, None, &c);
        assert!(
            e.contains("from 0 to -5") && e.contains("RLIMIT_NICE >= 20 - (-5) = 25"),
            "{e}"
        );
        assert!(e.contains("RLIMIT_NICE 0 (soft)"), "{e}");

        let other = validate(&args("other")).unwrap();
        let c = RefusalContext {
            before_policy: Some(sched::SCHED_IDLE),
            ..ctx()
        };
        let e = explain(Step::Attr, libc::EPERM, &other, None, &c);
        assert!(e.contains("leaving it needs CAP_SYS_NICE"), "{e}");

        let dl = validate(&SchedArgs {
            runtime: Some("1ms".into()),
            period: Some("10ms".into()),
            ..args("deadline")
        })
        .unwrap();
        let c = RefusalContext {
            affinity: Some(vec![0]),
            ..ctx()
        };
        let e = explain(Step::Attr, libc::EPERM, &dl, None, &c);
        assert!(e.contains("CAP_SYS_NICE"), "{e}");
        assert!(
            e.contains("may only run on CPUs 0 of 0-1: add --cpus all"),
            "{e}"
        );
        let c = RefusalContext {
            privileged: true,
            ..c
        };
        let e = explain(Step::Attr, libc::EPERM, &dl, None, &c);
        assert!(!e.contains("CAP_SYS_NICE"), "{e}");
        assert!(
            e.starts_with("EPERM: SCHED_DEADLINE needs the task allowed on every CPU"),
            "{e}"
        );
        assert!(
            e.contains("may only run on CPUs 0 of 0-1: add --cpus all"),
            "{e}"
        );
        let c = RefusalContext {
            period_limits_us: (Some(100), Some(4_194_304)),
            ..ctx()
        };
        let e = explain(Step::Attr, libc::EINVAL, &dl, None, &c);
        assert!(
            e.contains("runtime 1 ms, deadline 10 ms, period 10 ms"),
            "{e}"
        );
        assert!(e.contains("100 µs..4.194304 s"), "{e}");

        let c = RefusalContext {
            before_flags: Some(sched::SCHED_FLAG_RESET_ON_FORK),
            ..ctx()
        };
        let e = explain(Step::Attr, libc::EPERM, &fifo, None, &c);
        assert!(
            e.contains("has reset-on-fork set") && e.contains("add --reset-on-fork"),
            "{e}"
        );

        let e = explain(Step::Attr, libc::ESRCH, &fifo, None, &ctx());
        assert_eq!(e, "ESRCH: pid 42 (sleep) no longer exists");
        let e = explain(Step::Affinity, libc::EBUSY, &other, Some(&[0]), &ctx());
        assert!(e.contains("SCHED_DEADLINE") && e.contains("0-1"), "{e}");
        let e = explain(Step::Affinity, libc::EINVAL, &other, Some(&[3]), &ctx());
        assert!(e.contains("none of CPUs 3"), "{e}");
    }

    #[test]
    fn reads_this_process() {
        let me = std::process::id() as i32;
        let info = read_info(me, true).unwrap();
        assert_eq!(info.pid, me);
        assert!(!info.affinity.is_empty());
        assert!(
            info.threads
                .as_ref()
                .is_some_and(|t| t.iter().any(|t| t.pid == me))
        );
        let nice = parse_stat_nice(&std::fs::read_to_string("/proc/self/stat").unwrap());
        assert!(nice.is_some());
    }

    #[test]
    fn missing_process_is_named() {
        let pid_max =
            procfs::read_i64_file(Path::new("/proc/sys/kernel/pid_max")).unwrap_or(4_194_304);
        let e = read_info(pid_max as i32, false).unwrap_err();
        assert_eq!(e.to_string(), format!("no process with pid {pid_max}"));
    }
}
