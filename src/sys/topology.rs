//! The CPU topology the kernel reports in sysfs: for each online CPU its
//! package (socket), core, SMT siblings, last-level cache and NUMA node,
//! and the counts a reader wants (sockets, cores, threads per core, LLCs,
//! nodes). The model's placement and the placement figures read it; the
//! environment of every run (host or guest) stores it.

use serde::{Deserialize, Serialize};
use std::path::Path;

/// Where one CPU sits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuPlace {
    pub cpu: u32,
    /// `topology/physical_package_id`.
    pub package: i64,
    /// `topology/core_id` (unique within its package).
    pub core: i64,
    /// The first CPU of the CPUs sharing its last-level cache (the highest
    /// cache index's `shared_cpu_list`); its own number when none is
    /// reported.
    pub llc: u32,
    /// Its NUMA node (0 when the kernel has no nodes).
    pub node: u32,
}

/// The machine's CPUs as the kernel places them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuTopology {
    pub cpus: Vec<CpuPlace>,
    pub sockets: u32,
    /// Physical cores over all sockets.
    pub cores: u32,
    /// The most SMT threads of one core.
    pub threads_per_core: u32,
    pub llcs: u32,
    pub nodes: u32,
}

impl CpuTopology {
    /// "2 sockets × 2 cores × 2 threads, 2 LLCs, 2 nodes".
    pub fn summary(&self) -> String {
        use crate::units::count;
        format!(
            "{} × {} × {} ({} CPUs), {}, {}",
            count(self.sockets, "socket", "sockets"),
            count(self.cores / self.sockets.max(1), "core", "cores"),
            count(self.threads_per_core, "thread", "threads"),
            self.cpus.len(),
            count(self.llcs, "LLC", "LLCs"),
            count(self.nodes, "node", "nodes")
        )
    }

    /// The place of `cpu`.
    pub fn place(&self, cpu: u32) -> Option<&CpuPlace> {
        self.cpus.iter().find(|p| p.cpu == cpu)
    }

    /// Build from the places of the CPUs: the counts follow.
    pub fn from_places(mut cpus: Vec<CpuPlace>) -> CpuTopology {
        cpus.sort_by_key(|p| p.cpu);
        let distinct = |f: &dyn Fn(&CpuPlace) -> (i64, i64)| {
            let mut v: Vec<(i64, i64)> = cpus.iter().map(f).collect();
            v.sort_unstable();
            v.dedup();
            v
        };
        let cores = distinct(&|p| (p.package, p.core));
        let threads = cores
            .iter()
            .map(|c| cpus.iter().filter(|p| (p.package, p.core) == *c).count())
            .max()
            .unwrap_or(1) as u32;
        CpuTopology {
            sockets: distinct(&|p| (p.package, 0)).len() as u32,
            cores: cores.len() as u32,
            threads_per_core: threads,
            llcs: distinct(&|p| (i64::from(p.llc), 0)).len() as u32,
            nodes: distinct(&|p| (i64::from(p.node), 0)).len() as u32,
            cpus,
        }
    }
}

/// The topology of this machine's online CPUs; None when sysfs tells
/// nothing.
pub fn capture() -> Option<CpuTopology> {
    read_from(Path::new("/sys/devices/system/cpu"))
}

/// The topology under `root` (`/sys/devices/system/cpu` or a copy).
pub fn read_from(root: &Path) -> Option<CpuTopology> {
    let online = std::fs::read_to_string(root.join("online")).ok()?;
    let cpus = parse_cpu_list(online.trim())?;
    let places: Vec<CpuPlace> = cpus.into_iter().map(|c| place_of(root, c)).collect();
    (!places.is_empty()).then(|| CpuTopology::from_places(places))
}

fn place_of(root: &Path, cpu: u32) -> CpuPlace {
    let dir = root.join(format!("cpu{cpu}"));
    let num = |rel: &str| -> Option<i64> {
        std::fs::read_to_string(dir.join(rel))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    CpuPlace {
        cpu,
        package: num("topology/physical_package_id").unwrap_or(0),
        core: num("topology/core_id").unwrap_or(i64::from(cpu)),
        llc: llc_of(&dir).unwrap_or(cpu),
        node: node_of(&dir).unwrap_or(0),
    }
}

/// The first CPU sharing the highest-level cache of the CPU in `dir`.
fn llc_of(dir: &Path) -> Option<u32> {
    let caches = std::fs::read_dir(dir.join("cache")).ok()?;
    let mut best: Option<(u32, u32)> = None;
    for e in caches.flatten() {
        let p = e.path();
        let level: Option<u32> = std::fs::read_to_string(p.join("level"))
            .ok()
            .and_then(|s| s.trim().parse().ok());
        let first = std::fs::read_to_string(p.join("shared_cpu_list"))
            .ok()
            .and_then(|s| parse_cpu_list(s.trim()))
            .and_then(|v| v.first().copied());
        if let (Some(level), Some(first)) = (level, first)
            && best.is_none_or(|(l, _)| level > l)
        {
            best = Some((level, first));
        }
    }
    best.map(|(_, first)| first)
}

/// The node of the CPU in `dir` (its `nodeN` link).
fn node_of(dir: &Path) -> Option<u32> {
    std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.strip_prefix("node")?.parse().ok())
        .next()
}

/// "0-3,8,10-11" → [0, 1, 2, 3, 8, 10, 11]; None when malformed.
pub fn parse_cpu_list(s: &str) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    if s.is_empty() {
        return Some(out);
    }
    for part in s.split(',') {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
                if b < a || b - a > 65_536 {
                    return None;
                }
                out.extend(a..=b);
            }
            None => out.push(part.trim().parse().ok()?),
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_sysfs(dir: &Path, cpus: &[(u32, i64, i64, u32, &str)]) {
        std::fs::write(dir.join("online"), format!("0-{}\n", cpus.len() - 1)).unwrap();
        for &(cpu, pkg, core, node, llc_list) in cpus {
            let d = dir.join(format!("cpu{cpu}"));
            std::fs::create_dir_all(d.join("topology")).unwrap();
            std::fs::write(d.join("topology/physical_package_id"), format!("{pkg}\n")).unwrap();
            std::fs::write(d.join("topology/core_id"), format!("{core}\n")).unwrap();
            std::fs::create_dir_all(d.join(format!("node{node}"))).unwrap();
            for (index, level, list) in [
                ("index0", 1, format!("{cpu}")),
                ("index3", 3, llc_list.to_string()),
            ] {
                let c = d.join("cache").join(index);
                std::fs::create_dir_all(&c).unwrap();
                std::fs::write(c.join("level"), format!("{level}\n")).unwrap();
                std::fs::write(c.join("shared_cpu_list"), format!("{list}\n")).unwrap();
            }
        }
    }

    #[test]
    fn two_sockets_of_two_smt_cores_on_two_nodes() {
        let dir = tempfile::tempdir().unwrap();
        // cpu, package, core, node, LLC's CPUs: 2x2x2 as QEMU numbers them.
        fake_sysfs(
            dir.path(),
            &[
                (0, 0, 0, 0, "0-3"),
                (1, 0, 0, 0, "0-3"),
                (2, 0, 1, 0, "0-3"),
                (3, 0, 1, 0, "0-3"),
                (4, 1, 0, 1, "4-7"),
                (5, 1, 0, 1, "4-7"),
                (6, 1, 1, 1, "4-7"),
                (7, 1, 1, 1, "4-7"),
            ],
        );
        let t = read_from(dir.path()).unwrap();
        assert_eq!(
            (t.sockets, t.cores, t.threads_per_core, t.llcs, t.nodes),
            (2, 4, 2, 2, 2)
        );
        assert_eq!(t.place(5).unwrap().llc, 4);
        assert_eq!(t.place(5).unwrap().node, 1);
        assert_eq!(
            t.summary(),
            "2 sockets × 2 cores × 2 threads (8 CPUs), 2 LLCs, 2 nodes"
        );
    }

    #[test]
    fn cpu_lists_parse() {
        assert_eq!(
            parse_cpu_list("0-3,8,10-11"),
            Some(vec![0, 1, 2, 3, 8, 10, 11])
        );
        assert_eq!(parse_cpu_list("1"), Some(vec![1]));
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("x"), None);
    }

    #[test]
    fn this_machine_has_a_topology() {
        let t = capture().expect("sysfs tells the CPUs");
        assert_eq!(t.cpus.len(), crate::sys::envinfo::capture().cpus_online);
        assert!(t.sockets >= 1 && t.cores >= 1 && t.threads_per_core >= 1);
    }
}
