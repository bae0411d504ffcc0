//! Where the knobs are and how they are read and written: `Knobs` (the
//! real files, or plain files in tests), the child cgroups that reserve RT
//! time of their own, and [`apply`], which carries out a write plan with
//! read-back and rollback.

use std::fs::OpenOptions;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

use anyhow::{Result, anyhow, bail};
use serde::{Deserialize, Serialize};

use super::explain::explain_write_error;
use super::plan::{Knob, RtBandwidth, to_ratio};
use super::{SYSCTL_PERIOD, SYSCTL_RUNTIME};
use crate::sys::envinfo::{self, EnvSnapshot};
use crate::sys::procfs::read_i64_file;

const CGROUP_ROOT: &str = "/sys/fs/cgroup";
pub(super) const GROUP_RUNTIME: &str = "cpu.rt_runtime_us";
pub(super) const GROUP_PERIOD: &str = "cpu.rt_period_us";

/// `sched_rt_runtime_us` and `sched_rt_period_us`.
pub fn read_rt_bandwidth() -> Result<RtBandwidth> {
    read_pair(Path::new(SYSCTL_RUNTIME), Path::new(SYSCTL_PERIOD))
}

/// A child of the root cpu cgroup that reserves RT time of its own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChildGroup {
    pub path: PathBuf,
    pub runtime_us: i64,
    pub period_us: i64,
}

/// Direct children of `group_dir` with a non-zero `cpu.rt_runtime_us`
/// (deeper groups are bounded by these, so only they constrain the root).
pub(super) fn rt_children(group_dir: &Path) -> Vec<ChildGroup> {
    let Ok(entries) = std::fs::read_dir(group_dir) else {
        return Vec::new();
    };
    let mut children: Vec<ChildGroup> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| {
            let dir = e.path();
            let runtime_us = read_i64_file(&dir.join(GROUP_RUNTIME))?;
            let period_us = read_i64_file(&dir.join(GROUP_PERIOD))?;
            (runtime_us != 0).then_some(ChildGroup {
                path: dir,
                runtime_us,
                period_us,
            })
        })
        .collect();
    children.sort_by(|a, b| a.path.cmp(&b.path));
    children
}

pub(super) fn children_ratio(children: &[ChildGroup]) -> u64 {
    children
        .iter()
        .map(|c| to_ratio(c.period_us, c.runtime_us))
        .sum()
}

/// Where the knobs are. `system()` for the real machine; tests point it at
/// plain files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Knobs {
    pub(super) sysctl_runtime: PathBuf,
    pub(super) sysctl_period: PathBuf,
    /// The root cpu cgroup directory, when it has `cpu.rt_runtime_us`.
    pub(super) group_dir: Option<PathBuf>,
}

/// The directory holding the root group's `cpu.rt_runtime_us`, given
/// envinfo's finding that RT group scheduling is active. The candidates are
/// the ones `envinfo::capture` checks (v1/hybrid cpu hierarchy first).
fn root_group_dir(rt_group_sched: bool) -> Option<PathBuf> {
    if !rt_group_sched {
        return None;
    }
    let root = Path::new(CGROUP_ROOT);
    [root.join("cpu"), root.to_path_buf()]
        .into_iter()
        .find(|d| d.join(GROUP_RUNTIME).exists())
}

impl Knobs {
    pub(super) fn system() -> Knobs {
        Knobs::from_env(&envinfo::capture())
    }

    pub(super) fn from_env(env: &EnvSnapshot) -> Knobs {
        Knobs {
            sysctl_runtime: PathBuf::from(SYSCTL_RUNTIME),
            sysctl_period: PathBuf::from(SYSCTL_PERIOD),
            group_dir: root_group_dir(env.rt_group_sched),
        }
    }

    pub(super) fn path(&self, knob: Knob) -> PathBuf {
        match knob {
            Knob::Sysctl => self.sysctl_runtime.clone(),
            Knob::RootGroup => self
                .group_dir
                .as_ref()
                .map_or_else(PathBuf::new, |d| d.join(GROUP_RUNTIME)),
        }
    }

    pub(super) fn read_sysctl(&self) -> Result<RtBandwidth> {
        read_pair(&self.sysctl_runtime, &self.sysctl_period)
    }

    pub(super) fn read_group(&self) -> Result<Option<RtBandwidth>> {
        self.group_dir
            .as_ref()
            .map(|d| read_pair(&d.join(GROUP_RUNTIME), &d.join(GROUP_PERIOD)))
            .transpose()
    }

    pub(super) fn read(&self, knob: Knob) -> Result<i64> {
        let path = self.path(knob);
        read_i64_file(&path).ok_or_else(|| anyhow!("cannot read {}", path.display()))
    }

    /// One write of the decimal value, as `echo VALUE > PATH` does.
    pub(super) fn write(&self, knob: Knob, value: i64) -> io::Result<()> {
        let mut f = OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(self.path(knob))?;
        f.write_all(format!("{value}\n").as_bytes())
    }
}

fn read_pair(runtime: &Path, period: &Path) -> Result<RtBandwidth> {
    let read = |p: &Path| read_i64_file(p).ok_or_else(|| anyhow!("cannot read {}", p.display()));
    Ok(RtBandwidth {
        runtime_us: read(runtime)?,
        period_us: read(period)?,
    })
}

/// Applies `plan` in order, reading every value back. On a refusal the
/// error explains it; with `rollback`, the writes already made by this call
/// are undone (in reverse order, which the kernel accepts) so the knobs stay
/// consistent.
pub(super) fn apply(knobs: &Knobs, plan: &[(Knob, i64)], rollback: bool) -> Result<()> {
    let mut done: Vec<(Knob, i64)> = Vec::new();
    for &(knob, value) in plan {
        let previous = knobs.read(knob)?;
        let failure = match knobs.write(knob, value) {
            Ok(()) => match knobs.read(knob) {
                Ok(v) if v == value => None,
                Ok(v) => Some(format!(
                    "{} reads {v} after writing {value} ({})",
                    knob.name(),
                    knobs.path(knob).display()
                )),
                Err(e) => Some(format!("{e:#}")),
            },
            Err(e) => Some(explain_write_error(
                knob,
                value,
                e.raw_os_error(),
                &knobs.facts(knob),
            )),
        };
        let Some(mut message) = failure else {
            done.push((knob, previous));
            continue;
        };
        if rollback {
            done.push((knob, previous));
            for &(k, v) in done.iter().rev() {
                if knobs.read(k).ok() == Some(v) {
                    continue;
                }
                match knobs.write(k, v) {
                    Ok(()) => message += &format!("; {} put back to {v}", k.name()),
                    Err(e) => message += &format!("; could not put {} back to {v}: {e}", k.name()),
                }
            }
        }
        bail!(message);
    }
    Ok(())
}
