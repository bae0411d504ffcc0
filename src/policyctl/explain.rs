//! Explaining the kernel's refusals: a refused change is explained from its
//! errno plus what can be read about the target afterwards (owner,
//! rlimits, affinity, admitted DEADLINE bandwidth, period limits), gathered
//! into a [`RefusalContext`] and put into words by a pure function
//! ([`explain`]).

use std::io;
use std::path::Path;

use super::args::Request;
use super::validate::{online_cpus, period_limits};
use crate::policy::{Class, Policy};
use crate::sys::envinfo::format_cpu_list;
use crate::sys::probe::{self, errno_explanation, permission_hint};
use crate::sys::procstat::{self, parse_limit, parse_status_uids};
use crate::sys::{procfs, sched};
use crate::units::format_ns;

pub use crate::sys::child::Step;

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
    if errno == libc::ESRCH {
        return format!("ESRCH: {who} no longer exists");
    }
    match step {
        Step::Affinity => affinity_refusal(errno, cpus, ctx, owner),
        Step::Attr => {
            let Some(policy) = req.policy else {
                return strerror(&io::Error::from_raw_os_error(errno));
            };
            let name = policy.name();
            match errno {
                libc::EPERM => match owner {
                    Some(owner) => format!("EPERM: {owner}"),
                    None => attr_eperm(policy, req, cpus, ctx),
                },
                libc::EINVAL => attr_einval(name, req, ctx),
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

/// A refused change of affinity to `cpus`.
fn affinity_refusal(
    errno: i32,
    cpus: Option<&[usize]>,
    ctx: &RefusalContext,
    owner: Option<String>,
) -> String {
    let who = &ctx.who;
    let cpu_list = cpus.map(format_cpu_list).unwrap_or_default();
    match errno {
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
    }
}

/// EPERM of a change of policy by a process allowed to change the
/// target's: reset-on-fork, DEADLINE's affinity, leaving SCHED_IDLE, a
/// lower nice, and the rlimits that would allow it.
fn attr_eperm(
    policy: Policy,
    req: &Request,
    cpus: Option<&[usize]>,
    ctx: &RefusalContext,
) -> String {
    let who = &ctx.who;
    let name = policy.name();
    let leaving_idle = ctx.before_policy == Some(sched::SCHED_IDLE) && policy != Policy::Idle;
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

/// EINVAL of a change of policy: with DEADLINE, the values against the
/// period limits.
fn attr_einval(name: &str, req: &Request, ctx: &RefusalContext) -> String {
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

/// Σ runtime/period of the DEADLINE threads in /proc, except those of
/// `exclude` (the target, whose old reservation the kernel replaces).
fn admitted_deadline(exclude: Option<i32>) -> (usize, f64) {
    let mut n = 0;
    let mut bw = 0.0;
    for t in procstat::deadline_tasks() {
        if Some(t.pid) == exclude {
            continue;
        }
        if let Some(a) = t.attr
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
    let (major, minor, _) = crate::sys::envinfo::release_version(&release)?;
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
pub(super) fn refusal_context(
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

/// What could not be done, for error messages: "cannot switch pid 7 (sleep)
/// to fifo priority 10", "cannot start make on CPUs 0".
pub(super) fn cannot(
    step: Step,
    req: &Request,
    cpus: Option<&[usize]>,
    target: &str,
    exec: bool,
) -> String {
    let list = cpus.map(format_cpu_list).unwrap_or_default();
    match (step, exec) {
        (Step::Attr, false) => format!("cannot switch {target} to {}", req.describe_policy()),
        (Step::Affinity, false) => format!("cannot set the affinity of {target} to CPUs {list}"),
        (Step::Attr, true) => format!("cannot start {target} under {}", req.describe_policy()),
        (Step::Affinity, true) => format!("cannot start {target} on CPUs {list}"),
    }
}

/// An errno's text without Rust's " (os error N)" suffix.
pub(super) fn strerror(e: &io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error ") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policyctl::args::SchedArgs;
    use crate::policyctl::validate::tests::args;
    use crate::policyctl::validate::validate;

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
}
