//! Where the cgroup hierarchies are: `/proc/self/mountinfo` (which cgroup
//! and cgroup2 filesystems are mounted, with which v1 controllers) and
//! `/proc/self/cgroup` (this process's group in each hierarchy). Pure
//! parsers over the files' text, plus the readers.

use std::path::{Path, PathBuf};

/// One mounted cgroup hierarchy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupMount {
    /// Where it is mounted.
    pub mount_point: PathBuf,
    /// The group the mount shows at its top (`/` unless a bind mount or a
    /// cgroup namespace shows a subtree).
    pub root: String,
    /// cgroup2, or a v1 hierarchy with its controllers.
    pub kind: MountKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MountKind {
    V2,
    /// The controllers bound to this v1 hierarchy (`cpu`, `cpuacct`,
    /// `pids`, …); a named hierarchy without controllers (`name=systemd`)
    /// has none.
    V1 {
        controllers: Vec<String>,
    },
}

impl CgroupMount {
    pub fn has_controller(&self, name: &str) -> bool {
        matches!(&self.kind, MountKind::V1 { controllers } if controllers.iter().any(|c| c == name))
    }
}

/// Undoes mountinfo's octal escapes (`\040` for a space, `\011`, `\012`,
/// `\134`).
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && bytes[i + 1..i + 4]
                .iter()
                .all(|b| (b'0'..=b'7').contains(b))
        {
            let v = bytes[i + 1..i + 4]
                .iter()
                .fold(0u32, |acc, b| acc * 8 + u32::from(b - b'0'));
            if let Ok(b) = u8::try_from(v) {
                out.push(b);
                i += 4;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The cgroup and cgroup2 mounts in a mountinfo text, in its order; other
/// mounts and malformed lines are left out.
pub fn parse_mountinfo(text: &str) -> Vec<CgroupMount> {
    text.lines().filter_map(parse_mountinfo_line).collect()
}

fn parse_mountinfo_line(line: &str) -> Option<CgroupMount> {
    // id parent major:minor root mount-point options [optional…] - fstype source super-options
    let (head, tail) = line.split_once(" - ")?;
    let head: Vec<&str> = head.split(' ').collect();
    if head.len() < 6 {
        return None;
    }
    let mut tail = tail.split(' ');
    let fstype = tail.next()?;
    let _source = tail.next()?;
    let super_options = tail.next().unwrap_or("");
    let kind = match fstype {
        "cgroup2" => MountKind::V2,
        "cgroup" => MountKind::V1 {
            controllers: super_options
                .split(',')
                .filter(|o| !o.is_empty() && !o.contains('=') && !is_mount_option(o))
                .map(str::to_string)
                .collect(),
        },
        _ => return None,
    };
    Some(CgroupMount {
        mount_point: PathBuf::from(unescape(head[4])),
        root: unescape(head[3]),
        kind,
    })
}

/// Super-options of a v1 cgroup mount that are not controllers.
fn is_mount_option(o: &str) -> bool {
    matches!(
        o,
        "rw" | "ro" | "noprefix" | "clone_children" | "xattr" | "cpuset_v2_mode" | "none"
    )
}

/// This process's group in each hierarchy, from `/proc/PID/cgroup`:
/// (hierarchy id, controllers, path). The v2 line is `0::/path`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Membership {
    pub hierarchy_id: u32,
    pub controllers: Vec<String>,
    pub path: String,
}

pub fn parse_proc_cgroup(text: &str) -> Vec<Membership> {
    text.lines()
        .filter_map(|line| {
            let mut parts = line.splitn(3, ':');
            let hierarchy_id = parts.next()?.parse().ok()?;
            let controllers = parts
                .next()?
                .split(',')
                .filter(|c| !c.is_empty() && !c.starts_with("name="))
                .map(str::to_string)
                .collect();
            let path = parts.next()?.to_string();
            Some(Membership {
                hierarchy_id,
                controllers,
                path,
            })
        })
        .collect()
}

/// The directory of the group at `member_path` (as `/proc/PID/cgroup`
/// names it) under `mount`, or None when the mount does not show that
/// group (a bind mount of another subtree).
pub fn group_dir(mount: &CgroupMount, member_path: &str) -> Option<PathBuf> {
    let root = mount.root.trim_end_matches('/');
    let rel = member_path.strip_prefix(root)?;
    if !(rel.is_empty() || rel.starts_with('/')) {
        return None;
    }
    let rel = rel.trim_start_matches('/');
    Some(match rel.is_empty() {
        true => mount.mount_point.clone(),
        false => mount.mount_point.join(rel),
    })
}

/// The cgroup mounts of this process's mount namespace.
pub fn read_mounts() -> Vec<CgroupMount> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .map(|t| parse_mountinfo(&t))
        .unwrap_or_default()
}

/// This process's memberships.
pub fn read_membership() -> Vec<Membership> {
    std::fs::read_to_string("/proc/self/cgroup")
        .map(|t| parse_proc_cgroup(&t))
        .unwrap_or_default()
}

/// Whether `path` lies on a cgroup or cgroup2 filesystem (statfs magic):
/// what recovery checks before it removes anything.
pub fn on_cgroupfs(path: &Path) -> bool {
    crate::sys::envinfo::fs_magic(path).is_some_and(|m| {
        m == libc::CGROUP_SUPER_MAGIC as u64 || m == libc::CGROUP2_SUPER_MAGIC as u64
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This machine's mountinfo (hybrid: v1 controllers one per
    /// hierarchy, an empty cgroup2 at /sys/fs/cgroup/unified), and a
    /// co-mounted cpu,cpuacct as older distributions have it.
    const HYBRID: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
50 31 0:40 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:9 - cgroup cgroup rw,cpu,cpuacct
60 23 0:41 /sub /mnt/with\\040space rw - cgroup2 cgroup2 rw,nsdelegate
garbage line
";

    #[test]
    fn mountinfo_cgroup_mounts() {
        let m = parse_mountinfo(HYBRID);
        assert_eq!(m.len(), 9, "{m:?}");
        assert_eq!(m[0].mount_point, Path::new("/sys/fs/cgroup/cpu"));
        assert!(m[0].has_controller("cpu") && !m[0].has_controller("cpuacct"));
        assert!(m[1].has_controller("cpuacct") && !m[1].has_controller("cpu"));
        assert_eq!(
            m[5].kind,
            MountKind::V1 {
                controllers: vec![]
            }
        );
        assert_eq!(m[6].kind, MountKind::V2);
        assert!(m[7].has_controller("cpu") && m[7].has_controller("cpuacct"));
        assert_eq!(m[8].mount_point, Path::new("/mnt/with space"));
        assert_eq!(m[8].root, "/sub");
    }

    #[test]
    fn proc_cgroup_and_group_dirs() {
        let text = "9:name=systemd:/\n4:memory:/process_api/0e6b\n1:cpu,cpuacct:/\n0::/user.slice/a.scope\n";
        let ms = parse_proc_cgroup(text);
        assert_eq!(ms.len(), 4);
        assert!(ms[0].controllers.is_empty());
        assert_eq!(ms[1].controllers, ["memory"]);
        assert_eq!(ms[1].path, "/process_api/0e6b");
        assert_eq!(ms[2].controllers, ["cpu", "cpuacct"]);
        assert_eq!(ms[3].hierarchy_id, 0);
        let mounts = parse_mountinfo(HYBRID);
        assert_eq!(
            group_dir(&mounts[2], &ms[1].path).unwrap(),
            Path::new("/sys/fs/cgroup/memory/process_api/0e6b")
        );
        assert_eq!(
            group_dir(&mounts[6], "/").unwrap(),
            Path::new("/sys/fs/cgroup/unified")
        );
        // A mount of subtree /sub shows /sub/x, not /subway.
        assert_eq!(
            group_dir(&mounts[8], "/sub/x").unwrap(),
            Path::new("/mnt/with space/x")
        );
        assert_eq!(group_dir(&mounts[8], "/subway"), None);
        assert_eq!(group_dir(&mounts[8], "/other"), None);
    }
}
