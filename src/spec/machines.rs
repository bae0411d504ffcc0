//! `matrix.machine` with `[machines.NAME]`: the machine levels of a
//! campaign. "host" is this machine; every other level is a guest that
//! schedlab boots under QEMU with a kernel (a recipe or a bzImage), a CPU
//! topology, memory and an accelerator. Pure data and its validation: the
//! guest itself is `crate::machine`'s.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use super::SpecError;

/// The level that is this machine.
pub const HOST: &str = "host";
/// The most CPUs a guest may have (the recipes' `CONFIG_NR_CPUS`).
pub const MAX_GUEST_CPUS: u32 = 64;
const MIN_MEMORY_MIB: i64 = 256;
const MAX_MEMORY_MIB: i64 = 1 << 20;
const DEFAULT_MEMORY_MIB: u32 = 1024;
const DEFAULT_TOPOLOGY: Topology = Topology {
    sockets: 1,
    cores: 2,
    threads: 1,
};

/// `[machines.NAME]` as written.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawMachine {
    pub kernel: Option<String>,
    pub topology: Option<String>,
    pub numa_nodes: Option<i64>,
    pub memory_mib: Option<i64>,
    pub accel: Option<String>,
}

/// A level of `matrix.machine`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MachineLevel {
    /// The level's name, as the matrix lists it.
    pub name: String,
    /// The guest schedlab boots for it; None for the host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guest: Option<Guest>,
}

impl MachineLevel {
    pub fn host() -> MachineLevel {
        MachineLevel {
            name: HOST.to_string(),
            guest: None,
        }
    }

    /// The guest's CPUs, or None for the host (whose CPUs are the
    /// environment's).
    pub fn guest_cpus(&self) -> Option<u32> {
        self.guest.as_ref().map(|g| g.topology.cpus())
    }
}

/// A guest machine: what QEMU is asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Guest {
    /// A kernel recipe's name ("debian-6.12") or the path of a bzImage.
    pub kernel: String,
    pub topology: Topology,
    /// NUMA nodes the sockets are spread over (1: none declared).
    pub numa_nodes: u32,
    pub memory_mib: u32,
    pub accel: Accel,
}

/// Sockets × cores per socket × threads per core.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Topology {
    pub sockets: u32,
    pub cores: u32,
    pub threads: u32,
}

impl Topology {
    pub fn cpus(&self) -> u32 {
        self.sockets * self.cores * self.threads
    }

    /// "SxCxT".
    pub fn label(&self) -> String {
        format!("{}x{}x{}", self.sockets, self.cores, self.threads)
    }

    /// Parse "SxCxT" (each at least 1).
    pub fn parse(s: &str) -> Result<Topology, String> {
        let parts: Vec<&str> = s.trim().split(['x', 'X']).collect();
        let bad = || {
            format!(
                "\"{s}\" is not sockets x cores x threads, such as \"2x2x1\" (2 sockets of 2 \
                 cores, no SMT) or \"1x2x2\" (one socket, 2 cores of 2 SMT threads)"
            )
        };
        let [a, b, c] = parts.as_slice() else {
            return Err(bad());
        };
        let n = |v: &str| v.trim().parse::<u32>().ok().filter(|&n| n >= 1);
        let (Some(sockets), Some(cores), Some(threads)) = (n(a), n(b), n(c)) else {
            return Err(bad());
        };
        let t = Topology {
            sockets,
            cores,
            threads,
        };
        let cpus = u64::from(sockets) * u64::from(cores) * u64::from(threads);
        if cpus > u64::from(MAX_GUEST_CPUS) {
            return Err(format!(
                "\"{s}\" is {cpus} CPUs; a guest has at most {MAX_GUEST_CPUS} (the kernel recipes' NR_CPUS)"
            ));
        }
        Ok(t)
    }
}

/// How QEMU runs the guest's CPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Accel {
    /// KVM where /dev/kvm answers, else TCG (said so when the campaign starts).
    Auto,
    /// Hardware virtualisation: times are as on a host.
    Kvm,
    /// QEMU's emulator: shares, counts, orders and placements are valid,
    /// wall times and latencies are emulation timings.
    Tcg,
    /// The emulator with guest time counted in instructions
    /// (`-icount shift=0,sleep=off`): a deterministic machine.
    TcgIcount,
}

impl Accel {
    pub fn name(self) -> &'static str {
        match self {
            Accel::Auto => "auto",
            Accel::Kvm => "kvm",
            Accel::Tcg => "tcg",
            Accel::TcgIcount => "tcg-icount",
        }
    }

    fn parse(s: &str) -> Option<Accel> {
        [Accel::Auto, Accel::Kvm, Accel::Tcg, Accel::TcgIcount]
            .into_iter()
            .find(|a| a.name() == s.trim())
    }
}

/// `matrix.machine` with `[machines.NAME]`: empty when the matrix does not
/// list machines (every run on this machine, no factor).
pub fn validate(
    origin: &str,
    listed: Option<&Vec<String>>,
    tables: &BTreeMap<String, RawMachine>,
) -> Result<Vec<MachineLevel>, SpecError> {
    let err = |key: String, message: String| SpecError::Invalid {
        origin: origin.to_string(),
        key,
        message,
    };
    let Some(list) = listed else {
        if let Some(name) = tables.keys().next() {
            return Err(err(
                format!("machines.{name}"),
                "defined but matrix.machine is not set: list it there, with \"host\" for this \
                 machine (machine = [\"host\", \"NAME\"])"
                    .into(),
            ));
        }
        return Ok(Vec::new());
    };
    if list.is_empty() {
        return Err(err(
            "matrix.machine".into(),
            "must list at least one value".into(),
        ));
    }
    for name in tables.keys() {
        if name == HOST {
            return Err(err(
                format!("machines.{name}"),
                "\"host\" is this machine; name a guest otherwise".into(),
            ));
        }
        if !list.iter().any(|l| l.trim() == name) {
            return Err(err(
                format!("machines.{name}"),
                "defined but not listed in matrix.machine".into(),
            ));
        }
    }
    let mut out: Vec<MachineLevel> = Vec::new();
    for value in list {
        let name = value.trim();
        let level = match (name, tables.get(name)) {
            (HOST, _) => MachineLevel::host(),
            (_, Some(t)) => MachineLevel {
                name: name.to_string(),
                guest: Some(guest(&format!("machines.{name}"), t).map_err(|(k, m)| err(k, m))?),
            },
            _ => {
                return Err(err(
                    "matrix.machine".into(),
                    format!(
                        "\"{name}\" is neither \"host\" nor defined in [machines.{name}] (with \
                         kernel = \"debian-6.12\", topology = \"1x2x1\", …)"
                    ),
                ));
            }
        };
        if out.iter().any(|l| l.name == level.name) {
            return Err(err(
                "matrix.machine".into(),
                format!("\"{name}\" is listed twice"),
            ));
        }
        out.push(level);
    }
    Ok(out)
}

/// One `[machines.NAME]` table; an error is (key, message).
fn guest(key: &str, t: &RawMachine) -> Result<Guest, (String, String)> {
    let at = |k: &str, m: String| (format!("{key}.{k}"), m);
    let kernel = match t.kernel.as_deref().map(str::trim) {
        None | Some("") => {
            return Err(at(
                "kernel",
                "must name a kernel: a recipe (\"debian-6.1\", \"debian-6.12\") or the path of a \
                 bzImage"
                    .into(),
            ));
        }
        Some(k) => k.to_string(),
    };
    let topology = match &t.topology {
        None => DEFAULT_TOPOLOGY,
        Some(s) => Topology::parse(s).map_err(|m| at("topology", m))?,
    };
    let numa_nodes = match t.numa_nodes {
        None => 1,
        Some(n)
            if n >= 1 && n <= i64::from(topology.sockets) && topology.sockets as i64 % n == 0 =>
        {
            n as u32
        }
        Some(n) => {
            return Err(at(
                "numa_nodes",
                format!(
                    "{n} nodes cannot hold {} sockets evenly: the sockets are the nodes' parts, \
                     so give 1 to {} nodes that divide the socket count",
                    topology.sockets, topology.sockets
                ),
            ));
        }
    };
    let memory_mib = match t.memory_mib {
        None => DEFAULT_MEMORY_MIB,
        Some(m) if (MIN_MEMORY_MIB..=MAX_MEMORY_MIB).contains(&m) => m as u32,
        Some(m) => {
            return Err(at(
                "memory_mib",
                format!("must be {MIN_MEMORY_MIB} to {MAX_MEMORY_MIB} MiB, got {m}"),
            ));
        }
    };
    if memory_mib % numa_nodes != 0 {
        return Err(at(
            "memory_mib",
            format!("{memory_mib} MiB cannot be split evenly over {numa_nodes} NUMA nodes"),
        ));
    }
    let accel = match t.accel.as_deref() {
        None => Accel::Auto,
        Some(a) => Accel::parse(a).ok_or_else(|| {
            at(
                "accel",
                format!("\"{a}\" is not one of \"auto\", \"kvm\", \"tcg\", \"tcg-icount\""),
            )
        })?,
    };
    Ok(Guest {
        kernel,
        topology,
        numa_nodes,
        memory_mib,
        accel,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(s: &str) -> BTreeMap<String, RawMachine> {
        toml::from_str(s).unwrap()
    }

    fn check(list: &[&str], tables: &str) -> Result<Vec<MachineLevel>, String> {
        let list: Vec<String> = list.iter().map(|s| s.to_string()).collect();
        validate("t.toml", Some(&list), &table(tables)).map_err(|e| e.to_string())
    }

    #[test]
    fn topologies_parse_and_count_cpus() {
        let t = Topology::parse("2x2x2").unwrap();
        assert_eq!((t.sockets, t.cores, t.threads, t.cpus()), (2, 2, 2, 8));
        assert_eq!(t.label(), "2x2x2");
        for bad in ["2x2", "0x2x1", "axbxc", "2x2x2x2", "", "4x4x8"] {
            assert!(Topology::parse(bad).is_err(), "{bad}");
        }
        assert!(Topology::parse("4x4x8").unwrap_err().contains("128 CPUs"));
    }

    #[test]
    fn levels_are_host_and_defined_guests() {
        let levels = check(
            &["host", "numa4"],
            "[numa4]\nkernel = \"debian-6.12\"\ntopology = \"2x2x1\"\nnuma_nodes = 2\naccel = \"tcg-icount\"\n",
        )
        .unwrap();
        assert_eq!(levels[0], MachineLevel::host());
        let g = levels[1].guest.as_ref().unwrap();
        assert_eq!(g.topology.cpus(), 4);
        assert_eq!(
            (g.numa_nodes, g.memory_mib, g.accel),
            (2, 1024, Accel::TcgIcount)
        );
        assert_eq!(levels[1].guest_cpus(), Some(4));
    }

    #[test]
    fn every_mistake_names_its_key() {
        let cases = [
            (vec!["host", "x"], "", "matrix.machine"),
            (vec!["host", "host"], "", "listed twice"),
            (
                vec!["x"],
                "[x]\ntopology = \"1x1x1\"\n",
                "machines.x.kernel",
            ),
            (
                vec!["x"],
                "[x]\nkernel = \"k\"\ntopology = \"1x2\"\n",
                "machines.x.topology",
            ),
            (
                vec!["x"],
                "[x]\nkernel = \"k\"\ntopology = \"2x1x1\"\nnuma_nodes = 3\n",
                "machines.x.numa_nodes",
            ),
            (
                vec!["x"],
                "[x]\nkernel = \"k\"\nmemory_mib = 16\n",
                "machines.x.memory_mib",
            ),
            (
                vec!["x"],
                "[x]\nkernel = \"k\"\naccel = \"hvf\"\n",
                "machines.x.accel",
            ),
            (
                vec!["x"],
                "[x]\nkernel = \"k\"\n[y]\nkernel = \"k\"\n",
                "machines.y",
            ),
            (vec!["host"], "[host]\nkernel = \"k\"\n", "machines.host"),
            (vec![], "", "matrix.machine"),
        ];
        for (list, tables, key) in cases {
            let e = check(&list, tables).unwrap_err();
            assert!(e.contains(key), "{list:?} {tables}: {e}");
        }
        let e = validate("t.toml", None, &table("[x]\nkernel = \"k\"\n")).unwrap_err();
        assert!(e.to_string().contains("matrix.machine is not set"), "{e}");
    }
}
