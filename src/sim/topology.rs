//! The model's CPU topology and the scheduling domains the kernel builds
//! on it (kernel/sched/topology.c `build_sched_domains`, the default
//! `default_topology[]`: SMT, MC, PKG, then NUMA levels from the node
//! distances). Each model CPU has an SMT core, a last-level cache (LLC), a
//! package and a node, taken from the environment's
//! [`CpuTopology`](crate::sys::topology::CpuTopology) (host or guest);
//! without one the machine is flat: every CPU its own core, all in one
//! LLC, package and node.
//!
//! A domain of CPU `c` at a level spans the CPUs sharing its unit at that
//! level; its groups are the units of the level below (SMT: single CPUs;
//! MC: cores; PKG: LLCs; NUMA: packages of the node set). Levels whose
//! span equals the level below are dropped as the kernel's
//! `sd_degenerate` does. Balance intervals follow `sd_init`: min interval
//! = span weight ms, max = 2 × that, busy factor 16, imbalance_pct 110
//! (SMT), else 117; cache_nice_tries 0 (SMT), 1 (MC, PKG), 2 (NUMA).

use serde::{Deserialize, Serialize};

use crate::sys::topology::CpuTopology;

/// Where one model CPU sits (dense ids, 0-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Place {
    pub core: usize,
    pub llc: usize,
    pub package: usize,
    pub node: usize,
}

/// A scheduling domain level (`sd->name`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Level {
    Smt,
    Mc,
    Pkg,
    Numa,
}

impl Level {
    pub fn name(self) -> &'static str {
        match self {
            Level::Smt => "SMT",
            Level::Mc => "MC",
            Level::Pkg => "PKG",
            Level::Numa => "NUMA",
        }
    }
}

/// One CPU's domain at one level.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Domain {
    pub level: Level,
    /// Every CPU of the domain, ascending.
    pub span: Vec<usize>,
    /// The groups balancing compares, each ascending; the group holding
    /// the domain's own CPU first, the others in circular order after it.
    pub groups: Vec<Vec<usize>>,
    /// `sd->min_interval` and `sd->max_interval`, ms.
    pub min_interval_ms: u64,
    pub max_interval_ms: u64,
    /// `sd->busy_factor`: the interval is this many times longer while
    /// the CPU is busy.
    pub busy_factor: u64,
    /// `sd->imbalance_pct`.
    pub imbalance_pct: u64,
    /// `sd->cache_nice_tries`.
    pub cache_nice_tries: u32,
}

/// The model machine's CPUs and their domains.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimTopology {
    pub places: Vec<Place>,
    /// Per CPU, its domains from the lowest level up.
    pub domains: Vec<Vec<Domain>>,
}

/// Dense ids for arbitrary keys, in order of first appearance.
fn dense<K: PartialEq + Copy>(keys: &[K]) -> Vec<usize> {
    let mut seen: Vec<K> = Vec::new();
    keys.iter()
        .map(|k| match seen.iter().position(|s| s == k) {
            Some(p) => p,
            None => {
                seen.push(*k);
                seen.len() - 1
            }
        })
        .collect()
}

impl SimTopology {
    /// `cpus` CPUs, each its own core, one LLC, package and node.
    pub fn flat(cpus: usize) -> SimTopology {
        let places = (0..cpus.max(1))
            .map(|c| Place {
                core: c,
                llc: 0,
                package: 0,
                node: 0,
            })
            .collect();
        SimTopology::from_places(places)
    }

    /// The model's CPUs 0..n as `cpus[i]` of the environment's topology
    /// (the CPUs a run may use, in order); flat when the topology does not
    /// name every one of them.
    pub fn from_env(t: Option<&CpuTopology>, cpus: &[usize]) -> SimTopology {
        let Some(t) = t else {
            return SimTopology::flat(cpus.len());
        };
        let found: Option<Vec<_>> = cpus.iter().map(|&c| t.place(c as u32)).collect();
        let Some(found) = found.filter(|f| !f.is_empty()) else {
            return SimTopology::flat(cpus.len());
        };
        let core = dense(
            &found
                .iter()
                .map(|p| (p.package, p.core))
                .collect::<Vec<_>>(),
        );
        let llc = dense(&found.iter().map(|p| p.llc).collect::<Vec<_>>());
        let package = dense(&found.iter().map(|p| p.package).collect::<Vec<_>>());
        let node = dense(&found.iter().map(|p| p.node).collect::<Vec<_>>());
        let places = (0..found.len())
            .map(|i| Place {
                core: core[i],
                llc: llc[i],
                package: package[i],
                node: node[i],
            })
            .collect();
        SimTopology::from_places(places)
    }

    /// A synthetic machine: `sockets` × `cores` × `threads`, one LLC and
    /// one node per socket (CPU numbering: socket, core, thread).
    pub fn grid(sockets: usize, cores: usize, threads: usize) -> SimTopology {
        let mut places = Vec::new();
        for s in 0..sockets.max(1) {
            for c in 0..cores.max(1) {
                for _ in 0..threads.max(1) {
                    places.push(Place {
                        core: s * cores.max(1) + c,
                        llc: s,
                        package: s,
                        node: s,
                    });
                }
            }
        }
        SimTopology::from_places(places)
    }

    /// A guest machine as QEMU builds it from `-smp sockets=S,cores=C,
    /// threads=T` and `numa_nodes` (`crate::machine::qemu`): CPU `i` is
    /// thread `i % T` of core `i / T`, socket `i / (C × T)`; node `n`
    /// holds CPUs `n × cpus/nodes ..` (QEMU's `-numa node,cpus=`, the
    /// sockets spread over the nodes); the LLC is the socket's L3, split
    /// where a node boundary crosses a socket (x86 `match_llc` refuses LLC
    /// siblings on different nodes, `topology_sane`).
    pub fn guest(sockets: usize, cores: usize, threads: usize, nodes: usize) -> SimTopology {
        let (s, c, t) = (sockets.max(1), cores.max(1), threads.max(1));
        let cpus = s * c * t;
        let nodes = nodes.clamp(1, cpus);
        let per_node = (cpus / nodes).max(1);
        let node_of = |i: usize| (i / per_node).min(nodes - 1);
        let llc_keys: Vec<(usize, usize)> = (0..cpus).map(|i| (i / (c * t), node_of(i))).collect();
        let llc = dense(&llc_keys);
        let places = (0..cpus)
            .map(|i| Place {
                core: i / t,
                llc: llc[i],
                package: i / (c * t),
                node: node_of(i),
            })
            .collect();
        SimTopology::from_places(places)
    }

    pub fn from_places(places: Vec<Place>) -> SimTopology {
        let n = places.len();
        let domains = (0..n).map(|c| domains_of(&places, c)).collect();
        SimTopology { places, domains }
    }

    pub fn cpus(&self) -> usize {
        self.places.len()
    }

    /// Whether two CPUs share a last-level cache (`cpus_share_cache`).
    pub fn share_llc(&self, a: usize, b: usize) -> bool {
        self.places[a].llc == self.places[b].llc
    }

    /// The SMT siblings of `c` (itself included).
    pub fn smt_siblings(&self, c: usize) -> impl Iterator<Item = usize> + '_ {
        let core = self.places[c].core;
        (0..self.places.len()).filter(move |&x| self.places[x].core == core)
    }

    /// The CPUs of `c`'s LLC, ascending.
    pub fn llc_cpus(&self, c: usize) -> impl Iterator<Item = usize> + '_ {
        let llc = self.places[c].llc;
        (0..self.places.len()).filter(move |&x| self.places[x].llc == llc)
    }

    /// Whether any core has more than one thread (`sched_smt_active`).
    pub fn smt_active(&self) -> bool {
        (0..self.places.len()).any(|c| self.smt_siblings(c).nth(1).is_some())
    }
}

/// The unit of `p` at a level: CPUs with equal units share the domain.
fn unit(p: &Place, level: Level) -> usize {
    match level {
        Level::Smt => p.core,
        Level::Mc => p.llc,
        Level::Pkg => p.package,
        Level::Numa => 0,
    }
}

/// The group of `x` in a domain at `level`: the unit one level down.
fn group_unit(p: &Place, x: usize, level: Level) -> usize {
    match level {
        Level::Smt => x,
        Level::Mc => p.core,
        Level::Pkg => p.llc,
        Level::Numa => p.node,
    }
}

fn domains_of(places: &[Place], c: usize) -> Vec<Domain> {
    let mut out: Vec<Domain> = Vec::new();
    for level in [Level::Smt, Level::Mc, Level::Pkg, Level::Numa] {
        let me = unit(&places[c], level);
        let span: Vec<usize> = (0..places.len())
            .filter(|&x| unit(&places[x], level) == me)
            .collect();
        // sd_degenerate: a level no wider than the one below adds nothing
        // (and a single CPU has no domain).
        let below = out.last().map_or(1, |d| d.span.len());
        if span.len() <= below {
            continue;
        }
        let mut keys: Vec<usize> = Vec::new();
        let mut groups: Vec<Vec<usize>> = Vec::new();
        for &x in &span {
            let k = group_unit(&places[x], x, level);
            match keys.iter().position(|&y| y == k) {
                Some(g) => groups[g].push(x),
                None => {
                    keys.push(k);
                    groups.push(vec![x]);
                }
            }
        }
        if groups.len() < 2 {
            continue;
        }
        // `build_sched_groups` walks the span with `for_each_cpu_wrap`
        // from the domain's CPU: its own group first, then the others in
        // circular order. `update_sd_pick_busiest` keeps the first of
        // equally loaded groups, so each CPU breaks ties differently.
        let own = groups.iter().position(|g| g.contains(&c)).unwrap_or(0);
        groups.rotate_left(own);
        let weight = span.len() as u64;
        out.push(Domain {
            level,
            span,
            groups,
            min_interval_ms: weight,
            max_interval_ms: 2 * weight,
            busy_factor: 16,
            imbalance_pct: sd_imbalance_pct(level),
            cache_nice_tries: sd_cache_nice_tries(level),
        });
    }
    out
}

/// `sd_init` (kernel/sched/topology.c, 6.12): `imbalance_pct` is 117 by
/// default and 110 on SMT (`SD_SHARE_CPUCAPACITY`); MC (`SD_SHARE_LLC`)
/// sets 117 again, PKG and NUMA keep the default.
fn sd_imbalance_pct(level: Level) -> u64 {
    match level {
        Level::Smt => 110,
        Level::Mc | Level::Pkg | Level::Numa => 117,
    }
}

/// `sd_init`: `cache_nice_tries` is 0 by default (SMT keeps it), 1 for
/// MC (`SD_SHARE_LLC`) and the plain `else` branch (PKG), 2 for NUMA.
fn sd_cache_nice_tries(level: Level) -> u32 {
    match level {
        Level::Smt => 0,
        Level::Mc | Level::Pkg => 1,
        Level::Numa => 2,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::topology::CpuPlace;

    #[test]
    fn a_flat_machine_has_one_mc_domain_of_single_cpus() {
        let t = SimTopology::flat(4);
        assert_eq!(t.domains[2].len(), 1);
        let d = &t.domains[2][0];
        assert_eq!(d.level, Level::Mc);
        // Circular from CPU 2 (for_each_cpu_wrap).
        assert_eq!(d.groups, vec![vec![2], vec![3], vec![0], vec![1]]);
        assert_eq!((d.min_interval_ms, d.max_interval_ms), (4, 8));
        assert!(SimTopology::flat(1).domains[0].is_empty());
    }

    #[test]
    fn two_sockets_of_smt_cores_give_smt_mc_and_numa() {
        // 2 sockets × 2 cores × 2 threads: CPU 5 is socket 1, core 2.
        let t = SimTopology::grid(2, 2, 2);
        let d = &t.domains[5];
        let levels: Vec<Level> = d.iter().map(|d| d.level).collect();
        // PKG equals MC (one LLC per socket) and is dropped.
        assert_eq!(levels, vec![Level::Smt, Level::Mc, Level::Numa]);
        assert_eq!(d[0].groups, vec![vec![5], vec![4]]);
        assert_eq!(d[1].groups, vec![vec![4, 5], vec![6, 7]]);
        assert_eq!(d[2].groups, vec![vec![4, 5, 6, 7], vec![0, 1, 2, 3]]);
        assert!(t.smt_active() && t.share_llc(4, 7) && !t.share_llc(3, 4));
    }

    /// 2x2x2 on 2 nodes: CPUs 0–3 socket 0 / node 0, cores {0,1}, {2,3};
    /// 1x4x1 on 2 nodes: one socket split, so two LLCs (and NUMA above).
    #[test]
    fn a_guest_topology_maps_as_qemu_numbers_its_cpus() {
        let g = SimTopology::guest(2, 2, 2, 2);
        assert_eq!(g.cpus(), 8);
        let p = &g.places;
        assert_eq!((p[1].core, p[2].core, p[7].core), (0, 1, 3));
        assert_eq!((p[3].package, p[4].package), (0, 1));
        assert_eq!((p[3].node, p[4].node), (0, 1));
        assert_eq!((p[3].llc, p[4].llc), (0, 1));
        let levels = |t: &SimTopology| t.domains[0].iter().map(|d| d.level).collect::<Vec<_>>();
        assert_eq!(levels(&g), [Level::Smt, Level::Mc, Level::Numa]);
        let flat = SimTopology::guest(1, 4, 1, 1);
        assert_eq!(flat, SimTopology::flat(4));
        let split = SimTopology::guest(1, 4, 1, 2);
        assert_eq!(
            split.places.iter().map(|p| p.llc).collect::<Vec<_>>(),
            [0, 0, 1, 1]
        );
        assert_eq!(
            split.places.iter().map(|p| p.node).collect::<Vec<_>>(),
            [0, 0, 1, 1]
        );
        assert_eq!(SimTopology::guest(1, 2, 2, 1).places[1].core, 0);
    }

    #[test]
    fn the_environment_topology_is_read_for_the_run_cpus() {
        let place = |cpu, package, core, llc, node| CpuPlace {
            cpu,
            package,
            core,
            llc,
            node,
        };
        let env = CpuTopology::from_places(vec![
            place(0, 0, 0, 0, 0),
            place(1, 0, 0, 0, 0),
            place(2, 1, 0, 2, 1),
            place(3, 1, 0, 2, 1),
        ]);
        let t = SimTopology::from_env(Some(&env), &[1, 2, 3]);
        assert_eq!(t.places[0].core, 0);
        assert_eq!(t.places[1].core, t.places[2].core);
        assert_ne!(t.places[0].node, t.places[1].node);
        // A CPU the topology lacks: flat.
        assert_eq!(
            SimTopology::from_env(Some(&env), &[0, 9]),
            SimTopology::flat(2)
        );
        assert_eq!(SimTopology::from_env(None, &[0, 1]), SimTopology::flat(2));
    }
}

#[cfg(test)]
mod sd_init_tests {
    use super::*;

    /// The values of 6.12's `sd_init` per level (topology.c: the default
    /// 117/0, SMT 110, LLC 117/1, NUMA 2, else 1).
    #[test]
    fn sd_init_values_per_level() {
        let got: Vec<(u64, u32)> = [Level::Smt, Level::Mc, Level::Pkg, Level::Numa]
            .into_iter()
            .map(|l| (sd_imbalance_pct(l), sd_cache_nice_tries(l)))
            .collect();
        assert_eq!(got, vec![(110, 0), (117, 1), (117, 1), (117, 2)]);
    }
}
