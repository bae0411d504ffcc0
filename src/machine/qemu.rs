//! QEMU for a guest level: its command line (CPU topology, NUMA nodes,
//! memory, accelerator, the kernel and the image, a serial console into a
//! log file, schedlab's channel on standard input and output), which
//! accelerator `auto` comes to, and QEMU's version.

use anyhow::{Result, bail};
use std::path::Path;
use std::time::Duration;

use crate::spec::machines::{Accel, Guest};

/// QEMU's x86-64 system emulator.
pub const QEMU: &str = "qemu-system-x86_64";

/// The arguments of QEMU for `guest` (with `accel` resolved: never Auto).
pub fn args(
    guest: &Guest,
    accel: Accel,
    kernel: &Path,
    initrd: &Path,
    console_log: &Path,
) -> Vec<String> {
    let t = guest.topology;
    let mut a: Vec<String> = vec![
        "-nodefaults".into(),
        "-no-reboot".into(),
        "-display".into(),
        "none".into(),
        "-monitor".into(),
        "none".into(),
        "-machine".into(),
        "q35".into(),
    ];
    match accel {
        Accel::Kvm => a.extend(["-accel", "kvm", "-cpu", "host"].map(String::from)),
        Accel::Tcg | Accel::Auto => a.extend(["-accel", "tcg", "-cpu", "max"].map(String::from)),
        Accel::TcgIcount => a.extend(
            [
                "-accel",
                "tcg,thread=single",
                "-icount",
                "shift=0,sleep=off",
                "-cpu",
                "max",
            ]
            .map(String::from),
        ),
    }
    a.push("-m".into());
    a.push(format!("{}M", guest.memory_mib));
    a.push("-smp".into());
    a.push(format!(
        "{},sockets={},cores={},threads={}",
        t.cpus(),
        t.sockets,
        t.cores,
        t.threads
    ));
    a.extend(numa_args(guest));
    a.extend([
        "-kernel".into(),
        kernel.display().to_string(),
        "-initrd".into(),
        initrd.display().to_string(),
        "-append".into(),
        "console=ttyS0 loglevel=4 panic=-1 rdinit=/init".into(),
        "-serial".into(),
        format!("file:{}", console_log.display()),
        "-device".into(),
        "virtio-serial-pci".into(),
        "-chardev".into(),
        "stdio,id=schedlab,signal=off".into(),
        "-device".into(),
        format!(
            "virtserialport,chardev=schedlab,name={}",
            super::protocol::PORT_NAME
        ),
    ]);
    a
}

/// One NUMA node per `numa_nodes`, each with an equal share of the
/// sockets (whole sockets, in QEMU's CPU numbering) and of the memory.
fn numa_args(guest: &Guest) -> Vec<String> {
    if guest.numa_nodes <= 1 {
        return Vec::new();
    }
    let per_node_cpus = guest.topology.cpus() / guest.numa_nodes;
    let per_node_mib = guest.memory_mib / guest.numa_nodes;
    let mut a = Vec::new();
    for n in 0..guest.numa_nodes {
        let first = n * per_node_cpus;
        a.push("-object".into());
        a.push(format!("memory-backend-ram,id=mem{n},size={per_node_mib}M"));
        a.push("-numa".into());
        a.push(format!(
            "node,nodeid={n},cpus={first}-{},memdev=mem{n}",
            first + per_node_cpus - 1
        ));
    }
    a
}

/// QEMU's version ("QEMU emulator version 7.2.19 (Debian …)" → "7.2.19
/// (Debian …)"); an error naming the package when QEMU is missing.
pub fn version() -> Result<String> {
    let out = std::process::Command::new(QEMU)
        .arg("--version")
        .output()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => anyhow::anyhow!(
                "{QEMU} is not installed: guests need QEMU (Debian: apt-get install qemu-system-x86)"
            ),
            _ => anyhow::Error::new(e).context(format!("running {QEMU} --version")),
        })?;
    let text = String::from_utf8_lossy(&out.stdout);
    let first = text.lines().next().unwrap_or_default();
    match first.strip_prefix("QEMU emulator version ") {
        Some(v) => Ok(v.trim().to_string()),
        None => bail!("{QEMU} --version said {first:?}, not a QEMU version"),
    }
}

/// What `accel` comes to on this machine, and why when it is not what was
/// asked for. `auto` is KVM when /dev/kvm opens and answers its API
/// version within `probe` (a device that hangs is left behind), else TCG.
pub fn resolve_accel(accel: Accel, probe: Duration) -> Result<(Accel, Option<String>)> {
    match accel {
        Accel::Auto => match crate::sys::kvm::probe(probe) {
            Ok(()) => Ok((Accel::Kvm, None)),
            Err(why) => Ok((
                Accel::Tcg,
                Some(format!("accel = \"auto\" runs under TCG: {why}")),
            )),
        },
        Accel::Kvm => match crate::sys::kvm::probe(probe) {
            Ok(()) => Ok((Accel::Kvm, None)),
            Err(why) => {
                bail!("accel = \"kvm\" cannot be had here: {why} (use \"tcg\" or \"auto\")")
            }
        },
        a => Ok((a, None)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::machines::Topology;

    fn guest(t: &str, nodes: u32, accel: Accel) -> Guest {
        Guest {
            kernel: "debian-6.12".into(),
            topology: Topology::parse(t).unwrap(),
            numa_nodes: nodes,
            memory_mib: 1024,
            accel,
        }
    }

    fn joined(g: &Guest, accel: Accel) -> String {
        args(
            g,
            accel,
            Path::new("/k/bzImage"),
            Path::new("/d/img"),
            Path::new("/d/console.log"),
        )
        .join(" ")
    }

    #[test]
    fn topology_and_nodes_become_smp_and_numa() {
        let a = joined(&guest("2x2x2", 2, Accel::Tcg), Accel::Tcg);
        assert!(a.contains("-smp 8,sockets=2,cores=2,threads=2"), "{a}");
        assert!(a.contains("memory-backend-ram,id=mem0,size=512M"), "{a}");
        assert!(
            a.contains("-numa node,nodeid=0,cpus=0-3,memdev=mem0"),
            "{a}"
        );
        assert!(
            a.contains("-numa node,nodeid=1,cpus=4-7,memdev=mem1"),
            "{a}"
        );
        assert!(a.contains("-m 1024M"), "{a}");
        let plain = joined(&guest("1x2x1", 1, Accel::Tcg), Accel::Tcg);
        assert!(!plain.contains("-numa"), "{plain}");
    }

    #[test]
    fn accelerators_become_their_options() {
        let g = guest("1x2x1", 1, Accel::TcgIcount);
        let a = joined(&g, Accel::TcgIcount);
        assert!(
            a.contains("-accel tcg,thread=single -icount shift=0,sleep=off"),
            "{a}"
        );
        assert!(joined(&g, Accel::Kvm).contains("-accel kvm -cpu host"));
        assert!(joined(&g, Accel::Tcg).contains("-accel tcg -cpu max"));
        assert!(a.contains("-serial file:/d/console.log"), "{a}");
        assert!(a.contains("name=org.schedlab.0"), "{a}");
    }
}
