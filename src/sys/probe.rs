//! What this process may do: capabilities, scheduling rlimits, and which
//! policies `sched_setattr` actually accepts (for `schedlab env` and for the
//! reasons given when a run is skipped).

use std::io;

use serde::{Deserialize, Serialize};

use crate::sys::sched::{
    SCHED_BATCH, SCHED_FIFO, SCHED_IDLE, SCHED_OTHER, SCHED_RR, SchedAttr, gettid, set_attr_raw,
};

/// `CAP_SYS_NICE` from `include/uapi/linux/capability.h`.
pub const CAP_SYS_NICE: u32 = 23;

/// The policies probed, in display order.
pub const POLICIES: [&str; 6] = ["other", "batch", "idle", "fifo", "rr", "deadline"];

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicyPermission {
    /// "other", "batch", "idle", "fifo", "rr" or "deadline".
    pub policy: String,
    pub allowed: bool,
    /// "ok", or what went wrong and how to get the right.
    pub detail: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Privileges {
    pub euid: u32,
    pub cap_sys_nice: bool,
    /// (soft, hard); `u64::MAX` is unlimited.
    pub rlimit_rtprio: (u64, u64),
    /// (soft, hard); `u64::MAX` is unlimited. Nice n is allowed when
    /// `20 - n <= soft`.
    pub rlimit_nice: (u64, u64),
    pub policies: Vec<PolicyPermission>,
    pub negative_nice_allowed: bool,
}

impl Privileges {
    /// The probe result for one policy name.
    pub fn policy(&self, policy: &str) -> Option<&PolicyPermission> {
        self.policies.iter().find(|p| p.policy == policy)
    }
}

/// The attributes `probe` tries for a policy name; `None` for unknown names.
pub fn probe_attr(policy: &str) -> Option<SchedAttr> {
    Some(match policy {
        "other" => SchedAttr::fair(SCHED_OTHER, 0),
        "batch" => SchedAttr::fair(SCHED_BATCH, 0),
        "idle" => SchedAttr::fair(SCHED_IDLE, 0),
        "fifo" => SchedAttr::realtime(SCHED_FIFO, 1),
        "rr" => SchedAttr::realtime(SCHED_RR, 1),
        // 1 ms every 10 ms: 10% of one CPU, well inside the default 95%.
        "deadline" => SchedAttr::deadline(1_000_000, 10_000_000, 10_000_000),
        _ => return None,
    })
}

/// Tries `attr` on a fresh, short-lived thread and puts that thread back to
/// SCHED_OTHER nice 0 on success.
///
/// Each attempt gets its own thread (rather than one thread trying all
/// policies in turn) because a reset can itself be refused: an unprivileged
/// thread with RLIMIT_NICE 0 may enter SCHED_IDLE but never leave it, and a
/// thread stuck there would make every later attempt fail with EPERM. New
/// threads inherit the creating thread's policy, which is the caller's.
fn try_attr(attr: SchedAttr) -> io::Result<()> {
    let handle = std::thread::Builder::new()
        .name("schedlab-probe".into())
        .spawn(move || {
            let tid = gettid();
            let res = set_attr_raw(tid, &attr);
            if res.is_ok() {
                // The thread is about to exit; failure to reset is harmless.
                let _ = set_attr_raw(tid, &SchedAttr::fair(SCHED_OTHER, 0));
            }
            res
        })?;
    match handle.join() {
        Ok(res) => res.map_err(io::Error::from_raw_os_error),
        Err(_) => Err(io::Error::other("probe thread panicked")),
    }
}

fn permission(policy: &str) -> PolicyPermission {
    let result = match probe_attr(policy) {
        Some(attr) => try_attr(attr),
        None => Err(io::Error::from_raw_os_error(libc::EINVAL)),
    };
    let (allowed, detail) = match result {
        Ok(()) => (true, "ok".to_string()),
        Err(e) => match e.raw_os_error() {
            Some(errno) => (false, errno_explanation(policy, errno)),
            None => (false, e.to_string()),
        },
    };
    PolicyPermission {
        policy: policy.to_string(),
        allowed,
        detail,
    }
}

/// Probes the real permissions of this process by trying every policy.
/// Never fails: whatever cannot be determined reads as "not allowed".
pub fn probe() -> Privileges {
    let cap_eff = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| parse_cap_eff(&s));
    Privileges {
        // SAFETY: geteuid has no arguments and cannot fail.
        euid: unsafe { libc::geteuid() },
        cap_sys_nice: cap_eff.is_some_and(|c| has_cap(c, CAP_SYS_NICE)),
        rlimit_rtprio: rlimit(libc::RLIMIT_RTPRIO),
        rlimit_nice: rlimit(libc::RLIMIT_NICE),
        policies: POLICIES.iter().map(|p| permission(p)).collect(),
        negative_nice_allowed: try_attr(SchedAttr::fair(SCHED_OTHER, -1)).is_ok(),
    }
}

/// `getrlimit(resource)` as (soft, hard), `u64::MAX` for unlimited; (0, 0)
/// if the call fails.
pub fn rlimit(resource: libc::__rlimit_resource_t) -> (u64, u64) {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `rl` is a valid, writable rlimit the kernel fills in.
    let rc = unsafe { libc::getrlimit(resource, &mut rl) };
    if rc != 0 {
        return (0, 0);
    }
    // rlim_t is u64 on Linux and RLIM_INFINITY is u64::MAX (tested below).
    (rl.rlim_cur, rl.rlim_max)
}

/// The effective capability mask from `/proc/PID/status` text
/// (`"CapEff:\t000001fffeffffff"`).
pub fn parse_cap_eff(status: &str) -> Option<u64> {
    status.lines().find_map(|line| {
        let hex = line.strip_prefix("CapEff:")?.trim();
        u64::from_str_radix(hex, 16).ok()
    })
}

/// Whether capability number `cap` is set in a capability mask.
pub fn has_cap(mask: u64, cap: u32) -> bool {
    cap < 64 && mask & (1u64 << cap) != 0
}

/// `CAP_SYS_ADMIN`: mounting tracefs where it is not mounted.
pub const CAP_SYS_ADMIN: u32 = 21;
/// `CAP_PERFMON` (Linux 5.8+): perf events, not tracefs's files.
pub const CAP_PERFMON: u32 = 38;

/// What this process may do towards tracing, as [`trace_permission_of`]
/// judges it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceFacts {
    pub euid: u32,
    /// The effective capabilities (None: unreadable).
    pub cap_eff: Option<u64>,
    /// tracefs is mounted at /sys/kernel/tracing.
    pub tracefs_mounted: bool,
    /// Its `instances` directory is writable by this process (its
    /// effective ids and capabilities).
    pub instances_writable: bool,
}

/// Whether schedlab may trace here: it makes a tracing instance of its own
/// in tracefs, which only root may (the files are root's, whatever the
/// capabilities), in tracefs mounted at /sys/kernel/tracing and writable,
/// or else mounted by schedlab, which needs CAP_SYS_ADMIN. Root without
/// them (in a container) may not; CAP_PERFMON opens perf events, not
/// tracefs. Err says why not and how to get it.
pub fn trace_permission_of(f: &TraceFacts) -> Result<(), String> {
    let caps = f.cap_eff.unwrap_or(0);
    if f.euid != 0 {
        let perfmon = if has_cap(caps, CAP_PERFMON) {
            " (CAP_PERFMON, which this process has, opens perf events, not tracefs)"
        } else {
            ""
        };
        return Err(format!(
            "tracing needs root: schedlab makes a tracing instance of its own in tracefs, whose files only \
             root may write{perfmon}"
        ));
    }
    if f.tracefs_mounted {
        return if f.instances_writable {
            Ok(())
        } else {
            Err("tracing needs write access to /sys/kernel/tracing/instances, which this root process \
                 lacks (a container without the capabilities?)"
                .into())
        };
    }
    if has_cap(caps, CAP_SYS_ADMIN) {
        Ok(())
    } else {
        Err("tracefs is not mounted and mounting it needs CAP_SYS_ADMIN, which this root process lacks".into())
    }
}

/// [`trace_permission_of`] this process.
pub fn trace_permission() -> Result<(), String> {
    let dir = std::path::Path::new(super::tracefs::STANDARD_MOUNT);
    let tracefs_mounted = super::tracefs::mounted_at(dir);
    let instances_writable = tracefs_mounted
        && std::ffi::CString::new(dir.join("instances").as_os_str().as_encoded_bytes()).is_ok_and(
            |c| {
                // SAFETY: a NUL-terminated path that outlives the call; no
                // other memory is touched.
                unsafe {
                    libc::faccessat(libc::AT_FDCWD, c.as_ptr(), libc::W_OK, libc::AT_EACCESS) == 0
                }
            },
        );
    trace_permission_of(&TraceFacts {
        // SAFETY: geteuid has no arguments and cannot fail.
        euid: unsafe { libc::geteuid() },
        cap_eff: std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| parse_cap_eff(&s)),
        tracefs_mounted,
        instances_writable,
    })
}

/// How to obtain the right to use `policy` ("other", "batch", "idle",
/// "fifo", "rr", "deadline", or "nice" for negative nice values).
pub fn permission_hint(policy: &str) -> String {
    const SETCAP: &str = "setcap cap_sys_nice+ep $(which schedlab)";
    match policy {
        "fifo" | "rr" => format!(
            "run as root, or grant CAP_SYS_NICE ({SETCAP}), or raise RLIMIT_RTPRIO \
             (ulimit -r 99, /etc/security/limits.conf rtprio)"
        ),
        "deadline" => format!(
            "needs CAP_SYS_NICE (RLIMIT_RTPRIO does not suffice for SCHED_DEADLINE): \
             run as root or {SETCAP}"
        ),
        "idle" => format!(
            "entering SCHED_IDLE needs no privilege, but leaving it needs CAP_SYS_NICE \
             ({SETCAP}) or RLIMIT_NICE >= 20 (ulimit -e 20, /etc/security/limits.conf nice)"
        ),
        "nice" | "negative-nice" | "other" | "batch" => format!(
            "a negative nice value n needs CAP_SYS_NICE (run as root or {SETCAP}) or \
             RLIMIT_NICE >= 20 - n (ulimit -e 40 allows nice -20, /etc/security/limits.conf nice)"
        ),
        _ => format!("run as root or grant CAP_SYS_NICE ({SETCAP})"),
    }
}

fn policy_label(policy: &str) -> String {
    match policy {
        "nice" | "negative-nice" => "a negative nice value".to_string(),
        p => format!("SCHED_{}", p.to_ascii_uppercase()),
    }
}

/// Explains an errno returned by `sched_setattr` for `policy`, including how
/// to fix it where that is known.
pub fn errno_explanation(policy: &str, errno: i32) -> String {
    let label = policy_label(policy);
    match (errno, policy) {
        (libc::EPERM, "fifo" | "rr") => format!(
            "EPERM: not permitted to use {label}: {}; if already privileged, the thread's cpu \
             cgroup may have cpu.rt_runtime_us = 0 (CONFIG_RT_GROUP_SCHED) or the thread is \
             stuck in SCHED_IDLE",
            permission_hint(policy)
        ),
        (libc::EPERM, "deadline") => format!(
            "EPERM: not permitted to use {label}: {}; also returned when the thread's CPU \
             affinity does not span all CPUs of its root domain",
            permission_hint(policy)
        ),
        (libc::EPERM, _) => format!(
            "EPERM: not permitted to use {label}: {}",
            permission_hint(policy)
        ),
        (libc::EINVAL, "fifo" | "rr") => format!(
            "EINVAL: invalid parameter for {label}: the priority must be in 1..=99 and nice is \
             not used"
        ),
        (libc::EINVAL, "deadline") => format!(
            "EINVAL: invalid parameter for {label}: needs 1024 ns <= runtime <= deadline <= \
             period, with the period within kernel.sched_deadline_period_min_us..max_us"
        ),
        (libc::EINVAL, "other" | "batch" | "idle" | "nice" | "negative-nice") => format!(
            "EINVAL: invalid parameter for {label}: the priority must be 0 and nice in -20..=19"
        ),
        (libc::EINVAL, _) => {
            format!("EINVAL: invalid parameter, or the kernel does not know {label}")
        }
        (libc::EBUSY, "deadline") => "EBUSY: SCHED_DEADLINE admission test failed: the total \
             bandwidth requested exceeds what sched_rt_runtime_us/sched_rt_period_us allow on \
             the CPUs of the root domain"
            .to_string(),
        _ => io::Error::from_raw_os_error(errno).to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracing_is_judged_by_capability_and_access_not_by_uid_alone() {
        let root = TraceFacts {
            euid: 0,
            cap_eff: Some(0x1ff_ffff_ffff),
            tracefs_mounted: true,
            instances_writable: true,
        };
        assert_eq!(trace_permission_of(&root), Ok(()));
        // Root where tracefs is not mounted: schedlab mounts its own.
        let unmounted = TraceFacts {
            tracefs_mounted: false,
            instances_writable: false,
            ..root
        };
        assert_eq!(trace_permission_of(&unmounted), Ok(()));
        // Root in a container without CAP_SYS_ADMIN: not mountable …
        let contained = TraceFacts {
            cap_eff: Some(1 << CAP_SYS_NICE),
            ..unmounted
        };
        let e = trace_permission_of(&contained).unwrap_err();
        assert!(e.contains("CAP_SYS_ADMIN"), "{e}");
        // … nor a mounted tracefs it cannot write.
        let e = trace_permission_of(&TraceFacts {
            tracefs_mounted: true,
            ..contained
        })
        .unwrap_err();
        assert!(e.contains("/sys/kernel/tracing/instances"), "{e}");
        // A user with CAP_PERFMON is told why that is not enough.
        let perfmon = TraceFacts {
            euid: 1000,
            cap_eff: Some(1 << CAP_PERFMON),
            ..root
        };
        let e = trace_permission_of(&perfmon).unwrap_err();
        assert!(e.contains("needs root") && e.contains("CAP_PERFMON"), "{e}");
        let user = TraceFacts {
            cap_eff: Some(0),
            ..perfmon
        };
        assert!(
            !trace_permission_of(&user)
                .unwrap_err()
                .contains("CAP_PERFMON")
        );
    }

    #[test]
    fn parses_cap_eff() {
        let status = "Name:\tschedlab\nCapInh:\t0000000000000000\nCapPrm:\t000001fffeffffff\n\
                      CapEff:\t000001fffeffffff\nCapBnd:\t000001fffeffffff\n";
        let eff = parse_cap_eff(status).unwrap();
        assert_eq!(eff, 0x1fffeffffff);
        assert!(has_cap(eff, CAP_SYS_NICE));
        assert!(!has_cap(eff, 24)); // CAP_SYS_RESOURCE is dropped in this mask
        assert!(!has_cap(eff, 64));

        let unprivileged = "CapEff:\t0000000000000000\n";
        assert!(!has_cap(parse_cap_eff(unprivileged).unwrap(), CAP_SYS_NICE));
        // Only CAP_SYS_NICE.
        assert!(has_cap(
            parse_cap_eff("CapEff:\t0000000000800000").unwrap(),
            CAP_SYS_NICE
        ));
        assert_eq!(parse_cap_eff("CapPrm:\t00\n"), None);
        assert_eq!(parse_cap_eff("CapEff:\tzz\n"), None);
    }

    #[test]
    fn rlimits_read_with_unlimited_as_max() {
        assert_eq!(libc::RLIM_INFINITY, u64::MAX);
        let mut rl = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: `rl` is a valid, writable rlimit.
        assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_RTPRIO, &mut rl) }, 0);
        assert_eq!(rlimit(libc::RLIMIT_RTPRIO), (rl.rlim_cur, rl.rlim_max));
        let (soft, hard) = rlimit(libc::RLIMIT_NICE);
        assert!(soft <= hard);
    }

    #[test]
    fn hints_name_the_remedy() {
        let rt = permission_hint("fifo");
        assert!(
            rt.contains("CAP_SYS_NICE") && rt.contains("RLIMIT_RTPRIO"),
            "{rt}"
        );
        assert!(rt.contains("ulimit -r 99"), "{rt}");
        let dl = permission_hint("deadline");
        assert!(dl.contains("RLIMIT_RTPRIO does not suffice"), "{dl}");
        let nice = permission_hint("nice");
        assert!(
            nice.contains("RLIMIT_NICE") && nice.contains("CAP_SYS_NICE"),
            "{nice}"
        );
    }

    #[test]
    fn errno_mapping() {
        let e = errno_explanation("rr", libc::EPERM);
        assert!(e.starts_with("EPERM") && e.contains("SCHED_RR"), "{e}");
        assert!(e.contains(&permission_hint("rr")), "{e}");

        let e = errno_explanation("deadline", libc::EPERM);
        assert!(e.contains(&permission_hint("deadline")), "{e}");
        assert!(e.contains("affinity"), "{e}");

        let e = errno_explanation("fifo", libc::EINVAL);
        assert!(e.contains("1..=99"), "{e}");
        let e = errno_explanation("deadline", libc::EINVAL);
        assert!(
            e.contains("runtime <= deadline <= period") && e.contains("1024"),
            "{e}"
        );

        let e = errno_explanation("deadline", libc::EBUSY);
        assert!(e.contains("admission test failed"), "{e}");
        assert!(e.contains("sched_rt_runtime_us/sched_rt_period_us"), "{e}");
        // EBUSY means nothing special outside SCHED_DEADLINE.
        let e = errno_explanation("fifo", libc::EBUSY);
        assert!(!e.contains("admission"), "{e}");
        assert_eq!(e, io::Error::from_raw_os_error(libc::EBUSY).to_string());

        let e = errno_explanation("other", libc::ESRCH);
        assert_eq!(e, io::Error::from_raw_os_error(libc::ESRCH).to_string());
    }

    #[test]
    fn probe_attrs_are_sane() {
        for p in POLICIES {
            assert!(probe_attr(p).is_some(), "{p}");
        }
        assert_eq!(probe_attr("fifo").unwrap().sched_priority, 1);
        let dl = probe_attr("deadline").unwrap();
        assert!(dl.sched_runtime <= dl.sched_deadline && dl.sched_deadline <= dl.sched_period);
        assert!(probe_attr("bogus").is_none());
    }

    #[test]
    fn probe_reports_every_policy_and_fair_ones_are_allowed() {
        let privs = probe();
        let names: Vec<&str> = privs.policies.iter().map(|p| p.policy.as_str()).collect();
        assert_eq!(names, POLICIES);
        // Anyone may switch to SCHED_OTHER/BATCH/IDLE at nice 0 from OTHER.
        for p in ["other", "batch", "idle"] {
            let perm = privs.policy(p).unwrap();
            assert!(perm.allowed, "{perm:?}");
            assert_eq!(perm.detail, "ok");
        }
        for perm in &privs.policies {
            assert_eq!(perm.allowed, perm.detail == "ok", "{perm:?}");
        }
        // Consistency with the credentials: with CAP_SYS_NICE, RT and
        // negative nice must work (the test process sits in a cgroup with RT
        // runtime on a normal setup); without it and with RLIMIT_RTPRIO 0,
        // they must not.
        if privs.cap_sys_nice {
            assert!(privs.negative_nice_allowed, "{privs:?}");
        } else {
            if privs.rlimit_rtprio.0 == 0 {
                assert!(!privs.policy("fifo").unwrap().allowed, "{privs:?}");
            }
            assert!(!privs.policy("deadline").unwrap().allowed, "{privs:?}");
        }
        // The probe must leave the calling thread alone.
        let me = crate::sys::sched::get_attr(0).unwrap();
        assert!(matches!(
            me.sched_policy,
            SCHED_OTHER | SCHED_BATCH | SCHED_IDLE
        ));
    }
}
