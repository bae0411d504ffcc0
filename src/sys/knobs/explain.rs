//! Why the kernel refused a write: the facts around it (the other knob,
//! child cgroups, SCHED_DEADLINE threads, who we are) and the explanation,
//! with the numbers and what to do about it.

use std::io;
use std::path::PathBuf;

use super::access::{ChildGroup, GROUP_RUNTIME, Knobs, children_ratio, rt_children};
use super::plan::{Knob, RtBandwidth, percent, percent_of_ratio, to_ratio, validate_runtime};
use super::procs::{deadline_tasks, euid};

pub(super) fn describe_children(children: &[ChildGroup]) -> String {
    let list: Vec<String> = children
        .iter()
        .map(|c| {
            format!(
                "{} {}/{} µs ({})",
                c.path.display(),
                c.runtime_us,
                c.period_us,
                percent(c.runtime_us, c.period_us)
            )
        })
        .collect();
    format!(
        "child cpu cgroups reserve RT time of their own: {} ({} in all); their sum may not \
         exceed the root group's share, so lower their cpu.rt_runtime_us first (for example \
         echo 0 > {}/{GROUP_RUNTIME}, which needs the group to have no RT tasks)",
        list.join(", "),
        percent_of_ratio(children_ratio(children)),
        children
            .first()
            .map_or_else(|| "CHILD".to_string(), |c| c.path.display().to_string())
    )
}

impl Knobs {
    /// Whatever helps explain a refused write.
    pub(super) fn facts(&self, knob: Knob) -> WriteFacts {
        WriteFacts {
            path: self.path(knob),
            sysctl: self.read_sysctl().ok(),
            group: self.read_group().ok().flatten(),
            children: self
                .group_dir
                .as_deref()
                .map(rt_children)
                .unwrap_or_default(),
            deadline_tasks: deadline_tasks(),
            euid: euid(),
        }
    }
}

/// The facts around a refused write, for [`explain_write_error`].
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct WriteFacts {
    pub(super) path: PathBuf,
    pub(super) sysctl: Option<RtBandwidth>,
    pub(super) group: Option<RtBandwidth>,
    pub(super) children: Vec<ChildGroup>,
    /// "pid 123 (name) 10000/100000 µs" for every SCHED_DEADLINE thread.
    pub(super) deadline_tasks: Vec<String>,
    pub(super) euid: u32,
}

/// Why the kernel refused `value` for `knob` with `errno`, with the numbers
/// and what to do about it.
pub(super) fn explain_write_error(
    knob: Knob,
    value: i64,
    errno: Option<i32>,
    f: &WriteFacts,
) -> String {
    let head = format!(
        "the kernel refused {} = {value} ({})",
        knob.name(),
        f.path.display()
    );
    match errno {
        Some(libc::EINVAL) => {
            let mut why = Vec::new();
            match knob {
                Knob::Sysctl => {
                    if let Some(s) = f.sysctl
                        && let Err(m) = validate_runtime(value, s.period_us)
                    {
                        why.push(m);
                    }
                    if let Some(g) = f.group
                        && to_ratio(s_period(f, g.period_us), value)
                            < to_ratio(g.period_us, g.runtime_us)
                    {
                        why.push(format!(
                            "with RT group scheduling the sysctl may not go below the root \
                             cpu cgroup's cpu.rt_runtime_us ({} / {} µs): lower the group first",
                            g.runtime_us, g.period_us
                        ));
                    }
                }
                Knob::RootGroup => {
                    if value == 0 {
                        why.push(
                            "the root cpu cgroup may not have an RT runtime of 0 (the kernel's \
                             own RT threads run there); the smallest is 1"
                                .to_string(),
                        );
                    }
                    if let Some(g) = f.group
                        && value > g.period_us
                    {
                        why.push(format!("it exceeds cpu.rt_period_us {}", g.period_us));
                    }
                    if let (Some(s), Some(g)) = (f.sysctl, f.group)
                        && to_ratio(g.period_us, value) > to_ratio(s.period_us, s.runtime_us)
                    {
                        why.push(format!(
                            "it may not exceed sched_rt_runtime_us ({} / {} µs): raise the \
                             sysctl first",
                            s.runtime_us, s.period_us
                        ));
                    }
                    if let Some(g) = f.group
                        && children_ratio(&f.children) > to_ratio(g.period_us, value)
                    {
                        why.push(describe_children(&f.children));
                    }
                }
            }
            if why.is_empty() {
                why.push(format!(
                    "the value is out of range or inconsistent with the other RT settings \
                     (sysctl {}, root group {})",
                    f.sysctl.map_or("unknown".to_string(), |s| s.to_string()),
                    f.group.map_or("none".to_string(), |g| g.to_string())
                ));
            }
            format!("{head}: EINVAL: {}", why.join("; "))
        }
        Some(libc::EBUSY) => match knob {
            Knob::Sysctl => {
                let share = f
                    .sysctl
                    .map(|s| format!(" ({} per CPU)", percent(value, s.period_us)))
                    .unwrap_or_default();
                let tasks = if f.deadline_tasks.is_empty() {
                    "no SCHED_DEADLINE task is running, so the bandwidth is the kernel's own"
                        .to_string()
                } else {
                    format!("SCHED_DEADLINE tasks: {}", f.deadline_tasks.join(", "))
                };
                format!(
                    "{head}: EBUSY: that RT runtime{share} is less than the SCHED_DEADLINE \
                     bandwidth already admitted; {tasks}. Since Linux 6.12 the fair-class \
                     server (dl_server) reserves 50000 / 1000000 µs (5%) on every CPU by \
                     default, so runtimes below about 5% of the period are always refused. \
                     Choose a larger runtime or stop the SCHED_DEADLINE tasks"
                )
            }
            Knob::RootGroup => {
                let children = if f.children.is_empty() {
                    "no child cgroup reserves RT time".to_string()
                } else {
                    describe_children(&f.children)
                };
                format!(
                    "{head}: EBUSY: the group's RT tasks or its children's reservations would \
                     not fit; {children}"
                )
            }
        },
        Some(libc::EACCES | libc::EPERM) => format!(
            "{head}: {}: permission denied: changing RT bandwidth needs root (CAP_SYS_ADMIN in \
             the initial user namespace); euid is {}{}",
            if errno == Some(libc::EACCES) {
                "EACCES"
            } else {
                "EPERM"
            },
            f.euid,
            if f.euid == 0 {
                " (root in a container or user namespace is not enough)"
            } else {
                ""
            }
        ),
        Some(libc::EROFS) => format!(
            "{head}: EROFS: {} is on a read-only mount (/proc/sys or /sys/fs/cgroup mounted \
             read-only, as in an unprivileged container); run on the host or in a privileged \
             container",
            f.path.display()
        ),
        _ => format!(
            "cannot write {value} to {}: {}",
            f.path.display(),
            errno.map_or_else(
                || "unknown error".to_string(),
                |e| io::Error::from_raw_os_error(e).to_string()
            )
        ),
    }
}

/// The sysctl period for ratio comparisons, defaulting to `fallback`.
fn s_period(f: &WriteFacts, fallback: i64) -> i64 {
    f.sysctl.map_or(fallback, |s| s.period_us)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts() -> WriteFacts {
        WriteFacts {
            path: PathBuf::from("/proc/sys/kernel/sched_rt_runtime_us"),
            sysctl: Some(RtBandwidth {
                runtime_us: 950_000,
                period_us: 1_000_000,
            }),
            group: Some(RtBandwidth {
                runtime_us: 950_000,
                period_us: 1_000_000,
            }),
            children: vec![],
            deadline_tasks: vec![],
            euid: 0,
        }
    }

    #[test]
    fn explains_sysctl_below_group() {
        let m = explain_write_error(Knob::Sysctl, 500_000, Some(libc::EINVAL), &facts());
        assert!(m.contains("EINVAL"), "{m}");
        assert!(m.contains("500000") && m.contains("950000"), "{m}");
        assert!(m.contains("lower the group first"), "{m}");
    }

    #[test]
    fn explains_group_problems() {
        let mut f = facts();
        f.path = PathBuf::from("/sys/fs/cgroup/cpu/cpu.rt_runtime_us");
        let m = explain_write_error(Knob::RootGroup, 960_000, Some(libc::EINVAL), &f);
        assert!(
            m.contains("raise the sysctl first") && m.contains("950000"),
            "{m}"
        );
        let m = explain_write_error(Knob::RootGroup, 0, Some(libc::EINVAL), &f);
        assert!(m.contains("may not have an RT runtime of 0"), "{m}");
        f.children = vec![ChildGroup {
            path: PathBuf::from("/sys/fs/cgroup/cpu/rtapp"),
            runtime_us: 900_000,
            period_us: 1_000_000,
        }];
        for errno in [libc::EINVAL, libc::EBUSY] {
            let m = explain_write_error(Knob::RootGroup, 500_000, Some(errno), &f);
            assert!(
                m.contains("/sys/fs/cgroup/cpu/rtapp 900000/1000000 µs (90.0%)"),
                "{m}"
            );
            assert!(m.contains("lower their cpu.rt_runtime_us first"), "{m}");
        }
    }

    #[test]
    fn explains_deadline_busy_and_permissions() {
        let mut f = facts();
        let m = explain_write_error(Knob::Sysctl, 30_000, Some(libc::EBUSY), &f);
        assert!(m.contains("EBUSY") && m.contains("3.0% per CPU"), "{m}");
        assert!(
            m.contains("no SCHED_DEADLINE task") && m.contains("fair"),
            "{m}"
        );
        f.deadline_tasks = vec!["pid 77 (dl) 10000/100000 µs".into()];
        let m = explain_write_error(Knob::Sysctl, 30_000, Some(libc::EBUSY), &f);
        assert!(m.contains("pid 77 (dl) 10000/100000 µs"), "{m}");
        let m = explain_write_error(Knob::Sysctl, 500_000, Some(libc::EROFS), &f);
        assert!(m.contains("EROFS") && m.contains("read-only"), "{m}");
        f.euid = 1000;
        let m = explain_write_error(Knob::Sysctl, 500_000, Some(libc::EACCES), &f);
        assert!(
            m.contains("EACCES") && m.contains("needs root") && m.contains("1000"),
            "{m}"
        );
    }
}
