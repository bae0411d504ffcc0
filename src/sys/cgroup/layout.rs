//! Which hierarchies a worker's groups go in, and where: the decision,
//! pure over the mounts and this process's memberships.
//!
//! * cgroup2 (the unified hierarchy of a hybrid machine, or the only one
//!   of a pure-v2 machine): always used when mounted. Its groups give
//!   `cgroup.kill`, `cgroup.freeze`, `cgroup.events` and `cpu.stat`
//!   without any controller, and `memory.peak`/`pids.current` where the
//!   memory and pids controllers can be enabled. The cpu, cpuset and io
//!   controllers are never enabled: a cpu group is a scheduling entity of
//!   its own and would change the experiment.
//! * cgroup v1: the `pids`, `memory`, `freezer` and `cpuacct` hierarchies,
//!   each only when its mount carries no `cpu` controller (a co-mounted
//!   `cpu,cpuacct` would put the worker in a cpu group too). v1 groups go
//!   under this process's own group of that hierarchy, so that limits set
//!   on it (a container's memory limit) still hold for the workers.

use std::path::PathBuf;

use super::mounts::{CgroupMount, Membership, MountKind, group_dir};

/// The v1 controllers schedlab makes groups in.
pub const V1_CONTROLLERS: [&str; 4] = ["pids", "memory", "freezer", "cpuacct"];

/// One hierarchy to make groups in, and the directory to make them under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hierarchy {
    /// "cgroup2", or the v1 controller ("pids", "memory", …).
    pub name: String,
    pub base: PathBuf,
}

impl Hierarchy {
    pub fn is_v2(&self) -> bool {
        self.name == "cgroup2"
    }
}

/// The hierarchies to use, and a note for each left out and why.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Layout {
    pub hierarchies: Vec<Hierarchy>,
    pub left_out: Vec<String>,
}

pub fn plan_layout(mounts: &[CgroupMount], membership: &[Membership]) -> Layout {
    let mut layout = Layout::default();
    if let Some(m) = mounts.iter().find(|m| m.kind == MountKind::V2) {
        layout.hierarchies.push(Hierarchy {
            name: "cgroup2".into(),
            base: m.mount_point.clone(),
        });
    } else {
        layout
            .left_out
            .push("no cgroup2 hierarchy is mounted".to_string());
    }
    for controller in V1_CONTROLLERS {
        let Some(mount) = mounts.iter().find(|m| m.has_controller(controller)) else {
            continue;
        };
        if mount.has_controller("cpu") {
            layout.left_out.push(format!(
                "v1 {controller} is mounted with cpu at {} (a group there would be a \
                 scheduling group)",
                mount.mount_point.display()
            ));
            continue;
        }
        let own = membership
            .iter()
            .find(|ms| ms.hierarchy_id != 0 && ms.controllers.iter().any(|c| c == controller));
        let base = own.and_then(|ms| group_dir(mount, &ms.path));
        match base {
            Some(base) => layout.hierarchies.push(Hierarchy {
                name: controller.to_string(),
                base,
            }),
            None => layout.left_out.push(format!(
                "v1 {controller}: this process's group is not visible under {}",
                mount.mount_point.display()
            )),
        }
    }
    layout
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::cgroup::mounts::{parse_mountinfo, parse_proc_cgroup};
    use std::path::Path;

    #[test]
    fn hybrid_machine_separate_cpuacct() {
        let mounts = parse_mountinfo(
            "32 31 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n\
             33 31 0:30 / /sys/fs/cgroup/cpuacct rw - cgroup cgroup rw,cpuacct\n\
             35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n\
             37 31 0:34 / /sys/fs/cgroup/freezer rw - cgroup cgroup rw,freezer\n\
             39 31 0:36 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n\
             41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n",
        );
        let ms = parse_proc_cgroup(
            "8:pids:/\n6:freezer:/\n4:memory:/box/1\n2:cpuacct:/\n1:cpu:/\n0::/\n",
        );
        let l = plan_layout(&mounts, &ms);
        let got: Vec<(&str, &Path)> = l
            .hierarchies
            .iter()
            .map(|h| (h.name.as_str(), h.base.as_path()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("cgroup2", Path::new("/sys/fs/cgroup/unified")),
                ("pids", Path::new("/sys/fs/cgroup/pids")),
                ("memory", Path::new("/sys/fs/cgroup/memory/box/1")),
                ("freezer", Path::new("/sys/fs/cgroup/freezer")),
                ("cpuacct", Path::new("/sys/fs/cgroup/cpuacct")),
            ]
        );
        assert!(l.left_out.is_empty(), "{:?}", l.left_out);
    }

    #[test]
    fn co_mounted_cpuacct_is_off_limits_and_pure_v2() {
        let mounts = parse_mountinfo(
            "33 31 0:30 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n\
             39 31 0:36 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n",
        );
        let ms = parse_proc_cgroup("8:pids:/a\n1:cpu,cpuacct:/\n");
        let l = plan_layout(&mounts, &ms);
        assert_eq!(l.hierarchies.len(), 1);
        assert_eq!(l.hierarchies[0].base, Path::new("/sys/fs/cgroup/pids/a"));
        assert!(l.left_out.iter().any(|n| n.contains("no cgroup2")));
        assert!(
            l.left_out
                .iter()
                .any(|n| n.contains("cpuacct is mounted with cpu"))
        );

        let v2 = parse_mountinfo("25 1 0:24 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
        let l = plan_layout(&v2, &parse_proc_cgroup("0::/user.slice/x.scope\n"));
        assert_eq!(
            l.hierarchies,
            vec![Hierarchy {
                name: "cgroup2".into(),
                base: "/sys/fs/cgroup".into()
            }]
        );
    }
}
