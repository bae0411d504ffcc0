//! The kinds of setting the journal records, each with its original value,
//! and how each is read, described and put back.
//!
//! Adding a kind (a tracefs file, a sched_ext switch) means adding a
//! [`Setting`] variant and its three methods here; the journal, its
//! format, locking and recovery stay as they are. The variant's name, in
//! snake_case, is the `kind` tag in the journal's JSON.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use super::access::{Knobs, apply};
use super::journal::Journal;
use super::plan::{Knob, plan_transition};
use crate::sys::tracefs;

/// One setting changed by schedlab, with its original value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Setting {
    /// `kernel.sched_rt_runtime_us` and, with RT group scheduling, the root
    /// cpu cgroup's `cpu.rt_runtime_us`, changed together.
    RtBandwidth(RtOriginals),
    /// A tracefs mount schedlab made (tracefs was not mounted at
    /// /sys/kernel/tracing): unmounted, and its directory removed.
    TracefsMount { path: PathBuf },
    /// A tracing instance schedlab made, `instances/<name>` in tracefs:
    /// removed (its name holds schedlab's pid and a random token, and only
    /// this journal knows it, so nothing else is ever removed).
    TracefsInstance { name: String },
    /// A parent cgroup schedlab made for its workers' groups
    /// (`…/schedlab.<pid>.<start>.<token>`, named so that it proves
    /// whose it is): every process left in it or its groups is killed,
    /// and they are removed.
    CgroupParent { path: PathBuf },
}

impl Setting {
    /// The original value(s), for messages.
    pub fn describe(&self) -> String {
        match self {
            Setting::RtBandwidth(rt) => rt.describe(),
            Setting::TracefsMount { path } => format!("tracefs not mounted at {}", path.display()),
            Setting::TracefsInstance { name } => format!("no tracefs instance {name}"),
            Setting::CgroupParent { path } => format!("no cgroup {}", path.display()),
        }
    }

    /// What the setting is now, for messages.
    pub(super) fn current(&self, knobs: &Knobs) -> String {
        match self {
            Setting::RtBandwidth(_) => {
                let now = knobs
                    .read_sysctl()
                    .map_or_else(|_| "unknown".to_string(), |s| s.runtime_us.to_string());
                format!("sched_rt_runtime_us is {now}")
            }
            Setting::TracefsMount { path } => match tracefs::mounted_at(path) {
                true => format!("tracefs mounted at {}", path.display()),
                false => format!("tracefs not mounted at {}", path.display()),
            },
            Setting::TracefsInstance { name } => {
                let there = tracefs::tracefs_mounts()
                    .iter()
                    .any(|m| m.join("instances").join(name).exists());
                match there {
                    true => format!("tracefs instance {name} exists"),
                    false => format!("no tracefs instance {name}"),
                }
            }
            Setting::CgroupParent { path } => match path.exists() {
                true => format!("cgroup {} exists", path.display()),
                false => format!("no cgroup {}", path.display()),
            },
        }
    }

    /// Puts the original value back and checks it by reading back; returns
    /// what changed, as "NAME ORIGINAL (was FOUND)".
    pub(super) fn restore(&self, knobs: &Knobs) -> Result<Vec<String>> {
        match self {
            Setting::RtBandwidth(rt) => Ok(rt
                .restore(knobs)?
                .into_iter()
                .map(|(k, now, was)| format!("{} {now} (was {was})", k.name()))
                .collect()),
            Setting::TracefsMount { path } => restore_mount(path),
            Setting::TracefsInstance { name } => restore_instance(name),
            Setting::CgroupParent { path } => crate::sys::cgroup::remove_leftover_parent(path),
        }
    }
}

/// Unmounts schedlab's own tracefs mount at `path` (when it is still
/// mounted) and removes its empty directory.
fn restore_mount(path: &Path) -> Result<Vec<String>> {
    let mut done = Vec::new();
    if tracefs::mounted_at(path) {
        tracefs::unmount(path)
            .with_context(|| format!("unmounting schedlab's tracefs mount {}", path.display()))?;
        done.push(format!("tracefs unmounted from {}", path.display()));
    }
    match std::fs::remove_dir(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            return Err(e).with_context(|| format!("removing {}", path.display()));
        }
    }
    Ok(done)
}

/// Removes schedlab's tracing instance `name` through any tracefs mount,
/// or through a temporary one when tracefs is mounted nowhere.
fn restore_instance(name: &str) -> Result<Vec<String>> {
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        bail!("the journal names the tracefs instance {name:?}, which is no instance name");
    }
    let removed = match tracefs::tracefs_mounts().first() {
        Some(root) => tracefs::remove_instance(root, name)?,
        None => {
            let tmp = tempfile::Builder::new()
                .prefix("schedlab-tracefs-")
                .tempdir()
                .context("making a directory to mount tracefs on")?;
            tracefs::mount(tmp.path()).with_context(|| {
                format!(
                    "mounting tracefs on {} to remove instance {name}",
                    tmp.path().display()
                )
            })?;
            let removed = tracefs::remove_instance(tmp.path(), name);
            let unmounted = tracefs::unmount(tmp.path());
            let removed = removed?;
            unmounted.with_context(|| format!("unmounting {}", tmp.path().display()))?;
            removed
        }
    };
    Ok(match removed {
        true => vec![format!("tracefs instance {name} removed")],
        false => Vec::new(),
    })
}

/// The original RT bandwidth knobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RtOriginals {
    /// Original `sched_rt_runtime_us`.
    pub sched_rt_runtime_us: i64,
    /// `sched_rt_period_us` (never changed; recorded for checks).
    pub sched_rt_period_us: i64,
    /// Original root cpu cgroup `cpu.rt_runtime_us`, when that knob exists.
    pub root_group_rt_runtime_us: Option<i64>,
    /// Root cpu cgroup `cpu.rt_period_us`, when that knob exists.
    pub root_group_rt_period_us: Option<i64>,
}

/// One knob put back: (name, original value, value found).
type Restored = (Knob, i64, i64);

impl RtOriginals {
    /// The knobs' values now.
    pub(super) fn read(knobs: &Knobs) -> Result<RtOriginals> {
        let sysctl = knobs.read_sysctl()?;
        let group = knobs.read_group()?;
        Ok(RtOriginals {
            sched_rt_runtime_us: sysctl.runtime_us,
            sched_rt_period_us: sysctl.period_us,
            root_group_rt_runtime_us: group.map(|g| g.runtime_us),
            root_group_rt_period_us: group.map(|g| g.period_us),
        })
    }

    fn describe(&self) -> String {
        let mut s = format!(
            "sched_rt_runtime_us {} (period {})",
            self.sched_rt_runtime_us, self.sched_rt_period_us
        );
        if let Some(g) = self.root_group_rt_runtime_us {
            s += &format!(", root cpu cgroup cpu.rt_runtime_us {g}");
        }
        s
    }

    /// Puts these originals back (in the order the kernel accepts) and
    /// checks them by reading back.
    fn restore(&self, knobs: &Knobs) -> Result<Vec<Restored>> {
        let sysctl = knobs.read_sysctl()?;
        let group = match (knobs.read_group()?, self.root_group_rt_runtime_us) {
            (Some(g), Some(orig)) => Some((g.runtime_us, orig)),
            _ => None,
        };
        let plan = plan_transition(group, (sysctl.runtime_us, self.sched_rt_runtime_us));
        apply(knobs, &plan, false)
            .with_context(|| format!("restoring the original {}", self.describe()))?;
        let mut restored = Vec::new();
        let now = knobs.read(Knob::Sysctl)?;
        if now != self.sched_rt_runtime_us {
            bail!(
                "sched_rt_runtime_us reads {now} after restoring {}",
                self.sched_rt_runtime_us
            );
        }
        if sysctl.runtime_us != now {
            restored.push((Knob::Sysctl, now, sysctl.runtime_us));
        }
        if let Some((was, orig)) = group {
            let now = knobs.read(Knob::RootGroup)?;
            if now != orig {
                bail!("root cpu cgroup cpu.rt_runtime_us reads {now} after restoring {orig}");
            }
            if was != now {
                restored.push((Knob::RootGroup, now, was));
            }
        }
        Ok(restored)
    }
}

impl Journal {
    /// The RT bandwidth originals recorded, if any.
    pub fn rt_bandwidth(&self) -> Option<&RtOriginals> {
        self.settings.iter().find_map(|s| match s {
            Setting::RtBandwidth(rt) => Some(rt),
            _ => None,
        })
    }

    /// What every recorded setting is now, for messages.
    pub(super) fn current(&self, knobs: &Knobs) -> String {
        let all: Vec<String> = self.settings.iter().map(|s| s.current(knobs)).collect();
        all.join("; ")
    }

    /// Puts every recorded setting back, the last journaled first; returns
    /// what changed. Every setting is tried even when one fails; the
    /// failures are reported together.
    pub(super) fn restore(&self, knobs: &Knobs) -> Result<Vec<String>> {
        let mut restored = Vec::new();
        let mut failures = Vec::new();
        for setting in self.settings.iter().rev() {
            match setting.restore(knobs) {
                Ok(parts) => restored.extend(parts),
                Err(e) => failures.push(e),
            }
        }
        match failures.len() {
            0 => Ok(restored),
            1 => Err(failures.remove(0)),
            _ => {
                let all: Vec<String> = failures.iter().map(|e| format!("{e:#}")).collect();
                bail!(all.join("; "))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::knobs::fake::sample_journal;

    /// Tracing settings round-trip through the journal, and a name that
    /// is no instance name is refused before anything is touched.
    #[test]
    fn tracefs_settings() {
        let mut j = sample_journal();
        j.settings = vec![
            Setting::TracefsMount {
                path: PathBuf::from("/run/schedlab/tracefs-1-ab"),
            },
            Setting::TracefsInstance {
                name: "schedlab-1-ab".into(),
            },
        ];
        let text = j.to_json();
        assert!(text.contains("\"kind\": \"tracefs_instance\""), "{text}");
        assert_eq!(Journal::from_json(&text).unwrap(), j);
        assert!(j.rt_bandwidth().is_none());
        assert!(j.originals().contains("no tracefs instance schedlab-1-ab"));
        for bad in ["", "..", "a/b", "."] {
            assert!(restore_instance(bad).is_err(), "{bad:?}");
        }
    }
}
