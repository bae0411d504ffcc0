//! Request validation: turns [`PolicyArgs`] as given into a checked
//! [`Action`] by pure functions, before any system call. Every error is a
//! [`SpecError`] naming the flag (exit code 2): values that do not fit their
//! policy ([`validate`]), a bad pid ([`validate_pid`]), CPUs that are not
//! online ([`resolve_cpus`]), a DEADLINE period outside the kernel's limits
//! ([`check_period_limits`]).

use std::path::Path;

use super::args::{
    Action, Change, DlParams, ExecOptions, GetOptions, PolicyArgs, Request, SchedArgs, SetOptions,
};
use crate::policy::{Class, NICE_MAX, NICE_MIN, Policy, RT_MAX, RT_MIN};
use crate::spec::{Cpus, SpecError};
use crate::sys::envinfo::format_cpu_list;
use crate::sys::{procfs, sched};
use crate::units::{format_ns, parse_duration_ns};

/// The `origin` of every argument error of this command.
const ORIGIN: &str = "schedlab policy";

/// The kernel's smallest SCHED_DEADLINE runtime (`1 << DL_SCALE` ns).
pub const DL_MIN_RUNTIME_NS: u64 = 1024;

/// Checks a subcommand as given: the pid, then the change (its values, its
/// CPUs against the online ones, the DEADLINE period against the kernel's
/// limits).
pub fn validate_command(args: PolicyArgs) -> Result<Action, SpecError> {
    Ok(match args {
        PolicyArgs::Get {
            pid,
            json,
            all_threads,
        } => Action::Get(GetOptions {
            pid: validate_pid(pid)?,
            json,
            all_threads,
        }),
        PolicyArgs::Set {
            pid,
            sched,
            all_threads,
            json,
        } => {
            let pid = validate_pid(pid)?;
            Action::Set(SetOptions {
                pid,
                change: validate_change(&sched)?,
                all_threads,
                json,
            })
        }
        PolicyArgs::Exec { sched, command } => Action::Exec(ExecOptions {
            change: validate_change(&sched)?,
            command,
        }),
    })
}

/// Validates everything that can be checked before a system call: the
/// arguments, the CPUs against the online ones, the DEADLINE period limits.
pub fn validate_change(args: &SchedArgs) -> Result<Change, SpecError> {
    let req = validate(args)?;
    let cpus = resolve_cpus(&req, &online_cpus())?;
    let (min, max) = period_limits();
    check_period_limits(args, &req, min, max)?;
    Ok(Change { req, cpus })
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
    let policy = parse_policy(args)?;
    let dl = DlArgs::parse(args)?;
    let cpus = args
        .cpus
        .as_deref()
        .map(|c| Cpus::parse(c).map_err(|m| invalid("--cpus", m)))
        .transpose()?;
    let mut req = Request {
        policy,
        nice: None,
        priority: None,
        dl: None,
        reset_on_fork: args.reset_on_fork,
        cpus,
    };
    let Some(policy) = policy else {
        return without_policy(args, dl.flag, req);
    };
    match policy.class() {
        Class::Fair | Class::Wrr => req.nice = fair_nice(args, policy, dl.flag)?,
        Class::Realtime => req.priority = Some(rt_priority(args, policy, dl.flag)?),
        Class::Deadline => req.dl = Some(deadline_params(args, dl)?),
    }
    Ok(req)
}

/// `--policy`: a kernel policy (schedlab's own are refused).
fn parse_policy(args: &SchedArgs) -> Result<Option<Policy>, SpecError> {
    args.policy
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
        .transpose()
}

/// The DEADLINE flags as given, and the first of them given (for errors
/// when the policy is not deadline).
#[derive(Debug, Clone, Copy)]
struct DlArgs {
    runtime: Option<u64>,
    deadline: Option<u64>,
    period: Option<u64>,
    flag: Option<&'static str>,
}

impl DlArgs {
    fn parse(args: &SchedArgs) -> Result<DlArgs, SpecError> {
        let runtime = duration_arg("--runtime", &args.runtime)?;
        let deadline = duration_arg("--deadline", &args.deadline)?;
        let period = duration_arg("--period", &args.period)?;
        let flag = [
            ("--runtime", runtime.is_some()),
            ("--deadline", deadline.is_some()),
            ("--period", period.is_some()),
        ]
        .into_iter()
        .find(|(_, given)| *given)
        .map(|(flag, _)| flag);
        Ok(DlArgs {
            runtime,
            deadline,
            period,
            flag,
        })
    }
}

/// No `--policy`: only `--cpus` may be changed, and no policy's values
/// may be given.
fn without_policy(
    args: &SchedArgs,
    dl_flag: Option<&'static str>,
    req: Request,
) -> Result<Request, SpecError> {
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
    Ok(req)
}

/// A fair (or WRR) policy's `--nice`, if given.
fn fair_nice(
    args: &SchedArgs,
    policy: Policy,
    dl_flag: Option<&'static str>,
) -> Result<Option<i32>, SpecError> {
    let name = policy.name();
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
    let Some(n) = args.nice else {
        return Ok(None);
    };
    if !(NICE_MIN as i64..=NICE_MAX as i64).contains(&n) {
        return Err(invalid(
            "--nice",
            format!("must be {NICE_MIN}..{NICE_MAX} (lower gets more CPU), got {n}"),
        ));
    }
    Ok(Some(n as i32))
}

/// A real-time policy's `--priority`.
fn rt_priority(
    args: &SchedArgs,
    policy: Policy,
    dl_flag: Option<&'static str>,
) -> Result<u32, SpecError> {
    let name = policy.name();
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
            format!("--policy {name} needs --priority {RT_MIN}..{RT_MAX} (higher runs first)"),
        ));
    };
    if !(RT_MIN as i64..=RT_MAX as i64).contains(&p) {
        return Err(invalid(
            "--priority",
            format!("must be {RT_MIN}..{RT_MAX} (higher runs first), got {p}"),
        ));
    }
    Ok(p as u32)
}

/// SCHED_DEADLINE's runtime, deadline and period.
fn deadline_params(args: &SchedArgs, dl: DlArgs) -> Result<DlParams, SpecError> {
    let DlArgs {
        runtime,
        deadline,
        period,
        ..
    } = dl;
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
    Ok(DlParams {
        runtime_ns: runtime,
        deadline_ns: deadline,
        period_ns: period,
    })
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

/// The online CPUs (`/sys/devices/system/cpu/online`), or this thread's
/// affinity if that cannot be read.
pub(super) fn online_cpus() -> Vec<usize> {
    procfs::read_trimmed(Path::new("/sys/devices/system/cpu/online"))
        .and_then(|s| match Cpus::parse(&s) {
            Ok(Cpus::List(l)) if !l.is_empty() => Some(l),
            _ => None,
        })
        .or_else(|| sched::get_affinity(0).ok())
        .unwrap_or_else(|| vec![0])
}

/// kernel.sched_deadline_period_min_us and max_us (None: unreadable).
pub(super) fn period_limits() -> (Option<u64>, Option<u64>) {
    (
        procfs::read_u64_file(Path::new("/proc/sys/kernel/sched_deadline_period_min_us")),
        procfs::read_u64_file(Path::new("/proc/sys/kernel/sched_deadline_period_max_us")),
    )
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    pub(in crate::policyctl) fn args(policy: &str) -> SchedArgs {
        SchedArgs {
            policy: Some(policy.into()),
            ..Default::default()
        }
    }

    pub(in crate::policyctl) fn key_of(e: SpecError) -> (String, String) {
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

    #[test]
    fn commands_are_checked_in_order() {
        // The pid is checked before the change.
        let set = PolicyArgs::Set {
            pid: 0,
            sched: args("wfq"),
            all_threads: false,
            json: false,
        };
        assert_eq!(
            validate_command(set).map_err(|e| key_of(e).0),
            Err("PID".into())
        );
        let get = PolicyArgs::Get {
            pid: 7,
            json: true,
            all_threads: false,
        };
        assert_eq!(
            validate_command(get),
            Ok(Action::Get(GetOptions {
                pid: 7,
                json: true,
                all_threads: false
            }))
        );
        let exec = PolicyArgs::Exec {
            sched: SchedArgs {
                priority: Some(10),
                ..args("fifo")
            },
            command: vec!["true".into()],
        };
        let Ok(Action::Exec(e)) = validate_command(exec) else {
            panic!("exec refused");
        };
        assert_eq!(e.change.req.priority, Some(10));
        assert_eq!(e.change.cpus, None);
    }
}
