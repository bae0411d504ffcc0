//! What this machine allows: who we are, which knobs exist and whether they
//! can be written, the child cgroups that bound the root group, and where
//! the journal would go. For `schedlab env` and for clear refusals.

use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::access::{ChildGroup, GROUP_RUNTIME, Knobs, children_ratio, rt_children};
use super::explain::describe_children;
use super::journal::journal_location;
use super::plan::{RtBandwidth, percent_of_ratio};
use super::procs::euid;
use crate::sys::envinfo::{self, EnvSnapshot};
use crate::sys::fsinfo::writable;

/// What the machine allows: for `schedlab env` and for clear refusals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KnobCapability {
    pub euid: u32,
    /// envinfo's cgroup layout: "v1", "v2", "hybrid" or "none".
    pub cgroup_layout: String,
    /// The sysctls, when readable.
    pub sysctl: Option<RtBandwidth>,
    /// Why the sysctl cannot be written; `None` when it can.
    pub sysctl_refusal: Option<String>,
    /// The root group's `cpu.rt_runtime_us` (RT group scheduling), if any.
    pub root_group_knob: Option<PathBuf>,
    pub root_group: Option<RtBandwidth>,
    /// Why the root group knob cannot be written; `None` when it can or
    /// there is none.
    pub root_group_refusal: Option<String>,
    /// Child cgroups reserving RT time (they bound how low the root group
    /// can go).
    pub rt_child_groups: Vec<ChildGroup>,
    /// Where the journal would be kept.
    pub journal: PathBuf,
}

/// What this machine allows (see [`KnobCapability`]).
pub fn capability() -> KnobCapability {
    capability_from(&envinfo::capture())
}

/// [`capability`] from an environment snapshot already captured.
pub fn capability_from(env: &EnvSnapshot) -> KnobCapability {
    let knobs = Knobs::from_env(env);
    let euid = euid();
    let sysctl = match (env.sched_rt_runtime_us, env.sched_rt_period_us) {
        (Some(runtime_us), Some(period_us)) => Some(RtBandwidth {
            runtime_us,
            period_us,
        }),
        _ => None,
    };
    let refusal = |path: &Path| writable(path).err().map(|e| explain_access(path, &e, euid));
    KnobCapability {
        euid,
        cgroup_layout: env.cgroup_version.clone(),
        sysctl,
        sysctl_refusal: refusal(&knobs.sysctl_runtime),
        root_group_knob: knobs.group_dir.as_ref().map(|d| d.join(GROUP_RUNTIME)),
        root_group: knobs.read_group().ok().flatten(),
        root_group_refusal: knobs
            .group_dir
            .as_ref()
            .and_then(|d| refusal(&d.join(GROUP_RUNTIME))),
        rt_child_groups: knobs
            .group_dir
            .as_deref()
            .map(rt_children)
            .unwrap_or_default(),
        journal: journal_location(false),
    }
}

fn explain_access(path: &Path, err: &io::Error, euid: u32) -> String {
    match err.raw_os_error() {
        Some(libc::ENOENT) => format!("{} does not exist", path.display()),
        Some(libc::EROFS) => format!(
            "{} is on a read-only mount (as in an unprivileged container)",
            path.display()
        ),
        Some(libc::EACCES | libc::EPERM) if euid == 0 => format!(
            "{} is not writable although euid is 0 (a user namespace or container without \
             the right to change kernel settings)",
            path.display()
        ),
        Some(libc::EACCES | libc::EPERM) => format!(
            "{} is writable by root only (euid is {euid}): run schedlab as root",
            path.display()
        ),
        _ => format!("{}: {err}", path.display()),
    }
}

impl KnobCapability {
    /// Whether RT bandwidth can be changed here.
    pub fn can_change(&self) -> bool {
        self.sysctl.is_some() && self.sysctl_refusal.is_none() && self.root_group_refusal.is_none()
    }

    /// A few lines for `schedlab env` and for refusals.
    pub fn explain(&self) -> String {
        let mut lines = Vec::new();
        lines.push(match self.sysctl {
            Some(s) => format!("sched_rt_runtime_us / sched_rt_period_us: {s}"),
            None => "sched_rt_runtime_us / sched_rt_period_us: unreadable".to_string(),
        });
        match (&self.root_group_knob, self.root_group) {
            (Some(path), Some(g)) => lines.push(format!(
                "cgroup {} with RT group scheduling: root group {} = {g}; changed together \
                 with the sysctl (group first when lowering, sysctl first when raising)",
                self.cgroup_layout,
                path.display()
            )),
            (Some(path), None) => lines.push(format!(
                "cgroup {} with RT group scheduling: root group {} unreadable",
                self.cgroup_layout,
                path.display()
            )),
            (None, _) => lines.push(format!(
                "cgroup {}, no RT group scheduling knob: only the sysctl is changed",
                self.cgroup_layout
            )),
        }
        if !self.rt_child_groups.is_empty() {
            lines.push(format!(
                "the root group cannot go below {}: {}",
                percent_of_ratio(children_ratio(&self.rt_child_groups)),
                describe_children(&self.rt_child_groups)
            ));
        }
        if self.can_change() {
            lines.push(format!(
                "can change RT bandwidth (euid {}); originals are journaled in {}",
                self.euid,
                self.journal.display()
            ));
        } else {
            let reasons: Vec<&str> = [&self.sysctl_refusal, &self.root_group_refusal]
                .into_iter()
                .flatten()
                .map(String::as_str)
                .collect();
            lines.push(format!(
                "cannot change RT bandwidth: {}",
                if reasons.is_empty() {
                    "the sysctls are unreadable"
                } else {
                    "see below"
                }
            ));
            lines.extend(reasons.into_iter().map(|r| format!("  {r}")));
        }
        lines.join("\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capability_on_this_machine() {
        let cap = capability();
        let text = cap.explain();
        assert!(text.contains("sched_rt_runtime_us"), "{text}");
        println!("{text}");
    }
}
