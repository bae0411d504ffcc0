//! What a group's files say: pure parsers for `cpu.stat`,
//! `cgroup.events`, `cpu.pressure`, `cpuacct.usage*`, `cgroup.procs`, and
//! small readers and writers that name the file when they fail.

use std::io::Write as _;
use std::path::Path;

use anyhow::{Context, Result};

/// v2 `cpu.stat`: CPU time of every task that ever ran in the group,
/// exited ones included (the kernel keeps it in the group, not the task).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuStat {
    pub usage_ns: u64,
    pub user_ns: u64,
    pub system_ns: u64,
}

impl CpuStat {
    /// What was used since `base` was read (a counter that went back, as
    /// none should, counts as nothing used).
    pub fn since(self, base: CpuStat) -> CpuStat {
        CpuStat {
            usage_ns: self.usage_ns.saturating_sub(base.usage_ns),
            user_ns: self.user_ns.saturating_sub(base.user_ns),
            system_ns: self.system_ns.saturating_sub(base.system_ns),
        }
    }
}

/// Parses `cpu.stat` (`usage_usec N`, `user_usec N`, `system_usec N`, and
/// more keys the kernel may add); None when one of the three is missing.
pub fn parse_cpu_stat(text: &str) -> Option<CpuStat> {
    let key = |name: &str| -> Option<u64> { keyed_u64(text, name) };
    Some(CpuStat {
        usage_ns: key("usage_usec")?.checked_mul(1000)?,
        user_ns: key("user_usec")?.checked_mul(1000)?,
        system_ns: key("system_usec")?.checked_mul(1000)?,
    })
}

/// The value of `name` in a flat keyed file (`name value` per line).
pub fn keyed_u64(text: &str, name: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let mut f = line.split_ascii_whitespace();
        (f.next()? == name).then_some(())?;
        f.next()?.parse().ok()
    })
}

/// v2 `cgroup.events`: `populated 0|1`, `frozen 0|1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Events {
    pub populated: bool,
    /// None on kernels before 5.2 (no freezer in v2).
    pub frozen: Option<bool>,
}

pub fn parse_events(text: &str) -> Option<Events> {
    let flag = |name: &str| keyed_u64(text, name).map(|v| v != 0);
    Some(Events {
        populated: flag("populated")?,
        frozen: flag("frozen"),
    })
}

/// The `total=` of the `some` line of a pressure file (`cpu.pressure`):
/// microseconds during which at least one task of the group waited for a
/// CPU.
pub fn parse_pressure_some_total_us(text: &str) -> Option<u64> {
    text.lines()
        .find(|l| l.starts_with("some "))?
        .split_ascii_whitespace()
        .find_map(|f| f.strip_prefix("total="))?
        .parse()
        .ok()
}

/// v1 `cpuacct.stat` (`user N`, `system N` in USER_HZ ticks).
pub fn parse_cpuacct_stat_ticks(text: &str) -> Option<(u64, u64)> {
    Some((keyed_u64(text, "user")?, keyed_u64(text, "system")?))
}

/// The pids in `cgroup.procs` (one per line).
pub fn parse_pids(text: &str) -> Vec<i32> {
    text.lines().filter_map(|l| l.trim().parse().ok()).collect()
}

/// Reads `dir/name`, naming the file on failure.
pub fn read(dir: &Path, name: &str) -> Result<String> {
    let path = dir.join(name);
    std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))
}

/// Writes `value` to `dir/name` in one write(2), as cgroup files want.
pub fn write(dir: &Path, name: &str, value: &str) -> Result<()> {
    let path = dir.join(name);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .with_context(|| format!("opening {}", path.display()))?;
    f.write_all(value.as_bytes())
        .with_context(|| format!("writing {value:?} to {}", path.display()))
}

/// The processes in the group at `dir` (`cgroup.procs`); empty when the
/// group is gone.
pub fn procs(dir: &Path) -> Vec<i32> {
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .map(|t| parse_pids(&t))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_used_since_a_reading() {
        let base = CpuStat {
            usage_ns: 40_000_000,
            user_ns: 30_000_000,
            system_ns: 10_000_000,
        };
        let now = CpuStat {
            usage_ns: 1_040_000_000,
            user_ns: 930_000_000,
            system_ns: 9_000_000,
        };
        assert_eq!(
            now.since(base),
            CpuStat {
                usage_ns: 1_000_000_000,
                user_ns: 900_000_000,
                // user/system are a split the kernel adjusts: one may lag.
                system_ns: 0,
            }
        );
        assert_eq!(now.since(CpuStat::default()), now);
    }

    #[test]
    fn cpu_stat() {
        // As 6.18 writes it in a group without controllers.
        let text = "usage_usec 1523\nuser_usec 1000\nsystem_usec 523\nnice_usec 0\n\
                    core_sched.force_idle_usec 0\n";
        assert_eq!(
            parse_cpu_stat(text),
            Some(CpuStat {
                usage_ns: 1_523_000,
                user_ns: 1_000_000,
                system_ns: 523_000
            })
        );
        assert_eq!(parse_cpu_stat("usage_usec 1\nuser_usec 1\n"), None);
        assert_eq!(
            parse_cpu_stat("usage_usec x\nuser_usec 1\nsystem_usec 1"),
            None
        );
        // A key that merely starts like another is not taken for it.
        assert_eq!(
            keyed_u64("usage_usec_x 5\nusage_usec 7\n", "usage_usec"),
            Some(7)
        );
    }

    #[test]
    fn events() {
        assert_eq!(
            parse_events("populated 1\nfrozen 0\n"),
            Some(Events {
                populated: true,
                frozen: Some(false)
            })
        );
        assert_eq!(
            parse_events("populated 0\n"),
            Some(Events {
                populated: false,
                frozen: None
            })
        );
        assert_eq!(parse_events("frozen 1\n"), None);
    }

    #[test]
    fn pressure_and_cpuacct() {
        let p = "some avg10=0.00 avg60=0.00 avg300=0.00 total=123456\n\
                 full avg10=0.00 avg60=0.00 avg300=0.00 total=99\n";
        assert_eq!(parse_pressure_some_total_us(p), Some(123_456));
        assert_eq!(parse_pressure_some_total_us("full total=1\n"), None);
        assert_eq!(
            parse_cpuacct_stat_ticks("user 12\nsystem 3\n"),
            Some((12, 3))
        );
        assert_eq!(parse_pids("12\n345\n\n"), vec![12, 345]);
    }
}
