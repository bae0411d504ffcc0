//! The environment snapshot stored with every run, and its rendering for
//! `schedlab env`.
//!
//! Every fact is best effort: `capture` never fails, and whatever cannot be
//! read becomes `None` or `"unknown"`. Parsers are pure functions over text
//! so they can be tested on literal inputs.

use std::fmt::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::sys::probe::Privileges;
use crate::sys::procfs::{parse_loadavg_1m, read_i64_file, read_trimmed};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnvSnapshot {
    /// `uname -r`.
    pub kernel_release: String,
    /// `uname -v`.
    pub kernel_version: String,
    /// `uname -m`.
    pub machine: String,
    pub hostname: String,
    /// This machine's stable id ([`crate::sys::hostid`]); None when none
    /// could be read or kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_id: Option<String>,
    /// First "model name" of /proc/cpuinfo, or "unknown".
    pub cpu_model: String,
    /// `sysconf(_SC_NPROCESSORS_ONLN)`.
    pub cpus_online: usize,
    /// CPU affinity of this process.
    pub cpus_allowed: Vec<usize>,
    /// CONFIG_HZ.
    pub hz: Option<u32>,
    /// "none", "voluntary", "full", "lazy" or "rt", followed by " (dynamic)"
    /// on PREEMPT_DYNAMIC kernels; "unknown" when nothing tells.
    pub preempt_model: String,
    pub sched_rt_runtime_us: Option<i64>,
    pub sched_rt_period_us: Option<i64>,
    pub sched_rr_timeslice_ms: Option<i64>,
    pub sched_autogroup_enabled: Option<i64>,
    /// EEVDF's base slice as the kernel reports it (debugfs
    /// `sched/base_slice_ns`); None when it reports none (debugfs not
    /// mounted, an older kernel), where the documented default applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_base_slice_ns: Option<u64>,
    /// "v1", "v2", "hybrid" or "none".
    pub cgroup_version: String,
    /// Whether the root cpu cgroup has `cpu.rt_runtime_us`
    /// (CONFIG_RT_GROUP_SCHED active).
    pub rt_group_sched: bool,
    pub root_cgroup_rt_runtime_us: Option<i64>,
    /// "none", a hypervisor ("kvm", "qemu", "vmware", "hyperv", "xen", …,
    /// or "vm" when only the CPU's hypervisor flag tells), a container
    /// ("docker", "podman", "kubernetes", "lxc", "container", …), or both
    /// joined by '+', container first, e.g. "docker+kvm".
    pub virtualization: String,
    /// /sys/kernel/sched_ext/state, when the kernel has sched_ext.
    pub sched_ext: Option<String>,
    pub schedlab_version: String,
    /// One-minute load average at snapshot time.
    pub load_avg_1m: Option<f64>,
    /// The CPUs as the kernel places them (sockets, cores, SMT siblings,
    /// LLCs, nodes); None in snapshots from before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<crate::sys::topology::CpuTopology>,
    /// When the snapshot is a guest's that schedlab booted: what it asked
    /// QEMU for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guest: Option<GuestEnv>,
}

/// A guest machine's part of its environment, added by the host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GuestEnv {
    /// The level's name (`matrix.machine`).
    pub machine: String,
    /// "kvm", "tcg" or "tcg-icount": the accelerator it ran under.
    pub accel: String,
    /// QEMU's version.
    pub qemu_version: String,
    /// The topology asked for ("2x2x1") and its NUMA nodes.
    pub topology: String,
    pub numa_nodes: u32,
    pub memory_mib: u32,
    /// The kernel: its recipe or path, and where it came from.
    pub kernel: String,
    /// The host it ran on (its hostname).
    pub host: String,
}

const CGROUP_ROOT: &str = "/sys/fs/cgroup";
/// `CGROUP2_SUPER_MAGIC` from `include/uapi/linux/magic.h`.
const CGROUP2_SUPER_MAGIC: u64 = 0x6367_7270;

/// Captures the environment. Never fails.
pub fn capture() -> EnvSnapshot {
    let uts = uname();
    let kernel_release = uts.as_ref().map_or_else(String::new, |u| u.release.clone());
    let kernel_version = uts.as_ref().map_or_else(String::new, |u| u.version.clone());
    let config = load_kernel_config(&kernel_release);

    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let preempt_debugfs = read_trimmed(Path::new("/sys/kernel/debug/sched/preempt"));
    let cmdline = read_trimmed(Path::new("/proc/cmdline"));

    let sysctl = |name: &str| read_i64_file(&Path::new("/proc/sys/kernel").join(name));

    let root = Path::new(CGROUP_ROOT);
    let cgroup_version = classify_cgroup(
        fs_magic(root) == Some(CGROUP2_SUPER_MAGIC),
        fs_magic(&root.join("unified")) == Some(CGROUP2_SUPER_MAGIC),
        root.join("cpu").is_dir(),
    );
    let rt_file = [
        root.join("cpu/cpu.rt_runtime_us"),
        root.join("cpu.rt_runtime_us"),
    ]
    .into_iter()
    .find(|p| p.exists());

    EnvSnapshot {
        machine: uts.as_ref().map_or_else(String::new, |u| u.machine.clone()),
        hostname: hostname(),
        host_id: crate::sys::hostid::host_id(),
        cpu_model: parse_cpuinfo_model(&cpuinfo).unwrap_or_else(|| "unknown".to_string()),
        cpus_online: cpus_online(),
        cpus_allowed: crate::sys::sched::get_affinity(0).unwrap_or_default(),
        hz: config
            .as_deref()
            .and_then(|c| parse_kernel_config_value(c, "CONFIG_HZ"))
            .and_then(|v| v.parse().ok()),
        preempt_model: preempt_model(
            preempt_debugfs.as_deref(),
            config.as_deref(),
            cmdline.as_deref(),
            &kernel_version,
        ),
        sched_rt_runtime_us: sysctl("sched_rt_runtime_us"),
        sched_rt_period_us: sysctl("sched_rt_period_us"),
        sched_rr_timeslice_ms: sysctl("sched_rr_timeslice_ms"),
        sched_autogroup_enabled: sysctl("sched_autogroup_enabled"),
        fair_base_slice_ns: match fair_base_slice_ns(cpus_online()) {
            (ns, true) => Some(ns),
            (_, false) => None,
        },
        cgroup_version: cgroup_version.to_string(),
        rt_group_sched: rt_file.is_some(),
        root_cgroup_rt_runtime_us: rt_file.as_deref().and_then(read_i64_file),
        virtualization: classify_virtualization(&VirtFacts::gather(&cpuinfo)),
        sched_ext: read_trimmed(Path::new("/sys/kernel/sched_ext/state")),
        schedlab_version: env!("CARGO_PKG_VERSION").to_string(),
        load_avg_1m: std::fs::read_to_string("/proc/loadavg")
            .ok()
            .and_then(|t| parse_loadavg_1m(&t)),
        kernel_release,
        kernel_version,
        topology: crate::sys::topology::capture(),
        guest: None,
    }
}

/// This machine's hostname (`uname -n`, empty when unknown), or
/// `SCHEDLAB_HOSTNAME` (see [`crate::sys::hostid::hostname_or`]).
pub fn hostname() -> String {
    crate::sys::hostid::hostname_or(&uname().map_or_else(String::new, |u| u.nodename))
}

struct Uname {
    release: String,
    version: String,
    machine: String,
    nodename: String,
}

fn uname() -> Option<Uname> {
    // SAFETY: utsname consists of char arrays, for which all-zero is valid.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a valid, writable utsname the kernel fills in.
    if unsafe { libc::uname(&mut u) } != 0 {
        return None;
    }
    Some(Uname {
        release: c_chars(&u.release),
        version: c_chars(&u.version),
        machine: c_chars(&u.machine),
        nodename: c_chars(&u.nodename),
    })
}

/// A NUL-terminated (or full) C char array as a String.
fn c_chars(field: &[libc::c_char]) -> String {
    let bytes: Vec<u8> = field
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

fn cpus_online() -> usize {
    // SAFETY: sysconf only reads a configuration value.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    if n >= 1 {
        n as usize
    } else {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    }
}

/// `statfs(path).f_type`.
pub(crate) fn fs_magic(path: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: statfs is plain integers, for which all-zero is valid.
    let mut buf: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path and `buf` a valid, writable statfs.
    let rc = unsafe { libc::statfs(c.as_ptr(), &mut buf) };
    (rc == 0).then_some(buf.f_type as u64)
}

/// The kernel's build configuration: /boot/config-RELEASE if present, else
/// /proc/config.gz, decompressed in process (no `zcat` child: on Debian that
/// is a shell script running gzip, about 50 ms of a campaign's start).
fn load_kernel_config(release: &str) -> Option<String> {
    if !release.is_empty()
        && let Ok(text) = std::fs::read_to_string(format!("/boot/config-{release}"))
    {
        return Some(text);
    }
    let file = std::fs::File::open("/proc/config.gz").ok()?;
    let mut text = String::new();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(file), &mut text).ok()?;
    Some(text)
}

/// The first "model name" of /proc/cpuinfo text. Architectures without that
/// key fall back to "cpu model" (MIPS), "cpu" (POWER), "Hardware" (older ARM).
pub fn parse_cpuinfo_model(cpuinfo: &str) -> Option<String> {
    ["model name", "cpu model", "cpu", "Hardware"]
        .into_iter()
        .find_map(|key| cpuinfo_value(cpuinfo, key))
}

/// The first value of `key` in /proc/cpuinfo text, if non-empty.
fn cpuinfo_value(cpuinfo: &str, key: &str) -> Option<String> {
    cpuinfo.lines().find_map(|line| {
        let (k, v) = line.split_once(':')?;
        let v = v.trim();
        (k.trim() == key && !v.is_empty()).then(|| v.to_string())
    })
}

/// Whether the first processor's "flags" contain `flag`.
fn cpuinfo_has_flag(cpuinfo: &str, flag: &str) -> bool {
    cpuinfo_value(cpuinfo, "flags").is_some_and(|f| f.split_ascii_whitespace().any(|x| x == flag))
}

/// The value of `key` in kernel config text (`CONFIG_HZ=250` → "250"),
/// without surrounding quotes. `None` when unset (`# CONFIG_X is not set`)
/// or absent.
pub fn parse_kernel_config_value(config: &str, key: &str) -> Option<String> {
    config.lines().find_map(|line| {
        let (k, v) = line.trim().split_once('=')?;
        (k == key).then(|| v.trim().trim_matches('"').to_string())
    })
}

fn config_enabled(config: &str, key: &str) -> bool {
    parse_kernel_config_value(config, key).as_deref() == Some("y")
}

/// The current mode from /sys/kernel/debug/sched/preempt, which lists the
/// modes with the active one in parentheses: "none voluntary (full) lazy"
/// → "full".
pub fn parse_preempt_debugfs(text: &str) -> Option<String> {
    text.split_ascii_whitespace().find_map(|w| {
        let inner = w.strip_prefix('(')?.strip_suffix(')')?;
        (!inner.is_empty()).then(|| inner.to_string())
    })
}

/// The preemption model a kernel config selects ("none", "voluntary",
/// "full", "lazy", "rt"), with " (dynamic)" appended under
/// CONFIG_PREEMPT_DYNAMIC, where the config's choice is only the boot
/// default.
pub fn preempt_model_from_config(config: &str) -> Option<String> {
    let mode = [
        ("CONFIG_PREEMPT_RT", "rt"),
        ("CONFIG_PREEMPT_LAZY", "lazy"),
        ("CONFIG_PREEMPT", "full"),
        ("CONFIG_PREEMPT_VOLUNTARY", "voluntary"),
        ("CONFIG_PREEMPT_NONE", "none"),
    ]
    .into_iter()
    .find(|(key, _)| config_enabled(config, key))
    .map(|(_, mode)| mode)?;
    Some(with_dynamic(
        mode,
        config_enabled(config, "CONFIG_PREEMPT_DYNAMIC"),
    ))
}

fn with_dynamic(mode: &str, dynamic: bool) -> String {
    if dynamic {
        format!("{mode} (dynamic)")
    } else {
        mode.to_string()
    }
}

/// The `preempt=` boot parameter, if it names a mode.
fn preempt_from_cmdline(cmdline: &str) -> Option<&str> {
    cmdline
        .split_ascii_whitespace()
        .take_while(|w| *w != "--") // the rest belongs to init
        .filter_map(|w| w.strip_prefix("preempt="))
        .filter(|m| matches!(*m, "none" | "voluntary" | "full" | "lazy"))
        .last()
}

/// The preemption model, from the best source available:
/// 1. debugfs `sched/preempt` (the live mode; only exists with
///    PREEMPT_DYNAMIC, so " (dynamic)" is appended);
/// 2. on a PREEMPT_DYNAMIC kernel, a `preempt=` boot parameter, which
///    overrides the config default;
/// 3. the kernel config;
/// 4. the `uname -v` banner ("PREEMPT_RT", "PREEMPT_DYNAMIC", "PREEMPT");
///
/// else "unknown".
pub fn preempt_model(
    debugfs: Option<&str>,
    config: Option<&str>,
    cmdline: Option<&str>,
    uname_version: &str,
) -> String {
    let banner: Vec<&str> = uname_version.split_ascii_whitespace().collect();
    let dynamic = config.is_some_and(|c| config_enabled(c, "CONFIG_PREEMPT_DYNAMIC"))
        || banner.contains(&"PREEMPT_DYNAMIC");
    if let Some(mode) = debugfs.and_then(parse_preempt_debugfs) {
        return with_dynamic(&mode, true);
    }
    if dynamic && let Some(mode) = cmdline.and_then(preempt_from_cmdline) {
        return with_dynamic(mode, true);
    }
    if let Some(model) = config.and_then(preempt_model_from_config) {
        return model;
    }
    if banner.contains(&"PREEMPT_RT") {
        "rt".to_string()
    } else if dynamic {
        "unknown (dynamic)".to_string()
    } else if banner.contains(&"PREEMPT") {
        "full".to_string()
    } else {
        "unknown".to_string()
    }
}

/// Which cgroup layout is mounted at /sys/fs/cgroup:
/// "v2" when it is itself cgroup2; "hybrid" (systemd's name) when it holds
/// v1 controllers plus a cgroup2 hierarchy at /sys/fs/cgroup/unified; "v1"
/// with v1 controllers only; else "none".
pub fn classify_cgroup(
    root_is_cgroup2: bool,
    unified_is_cgroup2: bool,
    v1_cpu: bool,
) -> &'static str {
    match (root_is_cgroup2, unified_is_cgroup2, v1_cpu) {
        (true, _, _) => "v2",
        (false, true, true) => "hybrid",
        (false, false, true) => "v1",
        (false, _, false) => "none",
    }
}

/// The evidence for `classify_virtualization`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct VirtFacts {
    /// /sys/class/dmi/id/sys_vendor.
    pub dmi_sys_vendor: Option<String>,
    /// /sys/class/dmi/id/product_name.
    pub dmi_product_name: Option<String>,
    /// The CPUID leaf 0x40000000 vendor signature, e.g. "KVMKVMKVM".
    pub cpuid_hypervisor: Option<String>,
    /// The "hypervisor" flag in /proc/cpuinfo.
    pub hypervisor_flag: bool,
    /// /sys/hypervisor/type (Xen).
    pub sys_hypervisor_type: Option<String>,
    /// /.dockerenv exists.
    pub dockerenv: bool,
    /// /run/.containerenv exists (podman).
    pub containerenv: bool,
    /// The `container=` variable in PID 1's environment (systemd's
    /// convention, set by most container managers).
    pub container_env: Option<String>,
    /// /proc/1/cgroup.
    pub proc1_cgroup: Option<String>,
}

impl VirtFacts {
    fn gather(cpuinfo: &str) -> VirtFacts {
        let dmi = |f: &str| read_trimmed(&Path::new("/sys/class/dmi/id").join(f));
        VirtFacts {
            dmi_sys_vendor: dmi("sys_vendor"),
            dmi_product_name: dmi("product_name"),
            cpuid_hypervisor: cpuid_hypervisor_vendor(),
            hypervisor_flag: cpuinfo_has_flag(cpuinfo, "hypervisor"),
            sys_hypervisor_type: read_trimmed(Path::new("/sys/hypervisor/type")),
            dockerenv: Path::new("/.dockerenv").exists(),
            containerenv: Path::new("/run/.containerenv").exists(),
            container_env: std::fs::read("/proc/1/environ").ok().and_then(|env| {
                env.split(|&b| b == 0)
                    .find_map(|kv| kv.strip_prefix(b"container="))
                    .map(|v| String::from_utf8_lossy(v).into_owned())
            }),
            proc1_cgroup: std::fs::read_to_string("/proc/1/cgroup").ok(),
        }
    }
}

/// The hypervisor's CPUID vendor signature (leaf 0x40000000), when CPUID
/// leaf 1 says a hypervisor is present.
#[cfg(target_arch = "x86_64")]
fn cpuid_hypervisor_vendor() -> Option<String> {
    use std::arch::x86_64::__cpuid;
    // CPUID is available on every x86_64 CPU; leaf 1 ECX bit 31 is the
    // "hypervisor present" bit, and only then is leaf 0x40000000 defined.
    let leaf1 = __cpuid(1);
    if leaf1.ecx & (1 << 31) == 0 {
        return None;
    }
    let r = __cpuid(0x4000_0000);
    let mut sig = Vec::with_capacity(12);
    for reg in [r.ebx, r.ecx, r.edx] {
        sig.extend_from_slice(&reg.to_le_bytes());
    }
    let sig: String = String::from_utf8_lossy(&sig)
        .trim_end_matches('\0')
        .trim()
        .to_string();
    (!sig.is_empty()).then_some(sig)
}

#[cfg(not(target_arch = "x86_64"))]
fn cpuid_hypervisor_vendor() -> Option<String> {
    None
}

/// Decides the virtualization string from the evidence.
///
/// Container: /.dockerenv → "docker"; /run/.containerenv → "podman"; PID 1's
/// `container=` variable (its value); PID 1's cgroup paths mentioning
/// docker/libpod/kubepods/lxc; else none. (With cgroup namespaces PID 1's
/// cgroup reads "/" inside a container, hence the marker files first.)
///
/// Hypervisor: DMI vendor/product strings first (most specific, e.g. an EC2
/// instance whose CPUID says KVM), then the CPUID vendor signature, then
/// /sys/hypervisor/type, then the bare "hypervisor" CPU flag → "vm".
/// (Firecracker has no DMI; its CPUID signature is KVM's, so → "kvm".) A
/// container runs on the host kernel, so a VM seen from a container is the
/// container's host.
///
/// Both → "container+hypervisor"; neither → "none".
pub fn classify_virtualization(f: &VirtFacts) -> String {
    let container = if f.dockerenv {
        Some("docker".to_string())
    } else if f.containerenv {
        Some("podman".to_string())
    } else if let Some(c) = f.container_env.as_deref().filter(|c| !c.is_empty()) {
        Some(c.to_string())
    } else {
        f.proc1_cgroup.as_deref().and_then(|cg| {
            [
                ("docker", "docker"),
                ("libpod", "podman"),
                ("kubepods", "kubernetes"),
                ("lxc", "lxc"),
            ]
            .into_iter()
            .find(|(needle, _)| cg.contains(needle))
            .map(|(_, name)| name.to_string())
        })
    };

    let vendor = f.dmi_sys_vendor.as_deref().unwrap_or("");
    let product = f.dmi_product_name.as_deref().unwrap_or("");
    let dmi = if vendor.starts_with("QEMU") || product.contains("KVM") {
        Some(if product.contains("KVM") {
            "kvm"
        } else {
            "qemu"
        })
    } else if vendor.contains("VMware") || product.contains("VMware") {
        Some("vmware")
    } else if vendor.contains("Microsoft") && product.contains("Virtual Machine") {
        Some("hyperv")
    } else if vendor.contains("innotek") || product.contains("VirtualBox") {
        Some("virtualbox")
    } else if vendor.contains("Xen") || product.contains("HVM domU") {
        Some("xen")
    } else if vendor.contains("Amazon EC2") {
        Some("amazon")
    } else if vendor.contains("Google") && product.contains("Google Compute Engine") {
        Some("google")
    } else if vendor.contains("Parallels") {
        Some("parallels")
    } else {
        None
    };
    let cpuid = f.cpuid_hypervisor.as_deref().map(|sig| match sig {
        "KVMKVMKVM" => "kvm",
        "TCGTCGTCGTCG" => "qemu",
        "VMwareVMware" => "vmware",
        "Microsoft Hv" => "hyperv",
        "XenVMMXenVMM" => "xen",
        "VBoxVBoxVBox" => "virtualbox",
        "bhyve bhyve" => "bhyve",
        "ACRNACRNACRN" => "acrn",
        _ => "vm",
    });
    let hypervisor = dmi
        .or(cpuid)
        .map(str::to_string)
        .or_else(|| f.sys_hypervisor_type.clone().filter(|t| !t.is_empty()))
        .or_else(|| f.hypervisor_flag.then(|| "vm".to_string()));

    match (container, hypervisor) {
        (Some(c), Some(h)) => format!("{c}+{h}"),
        (Some(c), None) => c,
        (None, Some(h)) => h,
        (None, None) => "none".to_string(),
    }
}

/// A CPU list in the kernel's range syntax: [0, 1, 2, 5] → "0-2,5".
pub fn format_cpu_list(cpus: &[usize]) -> String {
    let mut sorted = cpus.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i];
        let mut end = start;
        while i + 1 < sorted.len() && sorted[i + 1] == end + 1 {
            i += 1;
            end = sorted[i];
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    parts.join(",")
}

/// RT throttling limits: "950000 / 1000000 µs (95.0% for RT)".
pub fn format_rt_limits(runtime_us: Option<i64>, period_us: Option<i64>) -> String {
    match (runtime_us, period_us) {
        (Some(-1), Some(p)) => format!("unlimited (-1) / {p} µs (RT throttling disabled)"),
        (Some(r), Some(p)) if p > 0 => {
            format!("{r} / {p} µs ({:.1}% for RT)", r as f64 * 100.0 / p as f64)
        }
        (Some(r), Some(p)) => format!("{r} / {p} µs"),
        _ => "unknown".to_string(),
    }
}

fn opt<T: std::fmt::Display>(v: Option<T>, unit: &str) -> String {
    v.map_or_else(|| "unknown".to_string(), |v| format!("{v}{unit}"))
}

fn format_rlimit((soft, hard): (u64, u64)) -> String {
    let f = |v: u64| {
        if v == u64::MAX {
            "unlimited".to_string()
        } else {
            v.to_string()
        }
    };
    format!("{} / {} (soft / hard)", f(soft), f(hard))
}

/// The human-readable listing for `schedlab env`.
pub fn render_text(env: &EnvSnapshot, privs: &Privileges) -> String {
    let mut rows: Vec<(&str, String)> = vec![
        (
            "kernel",
            format!(
                "{} {} ({})",
                env.kernel_release, env.machine, env.kernel_version
            ),
        ),
        ("hostname", env.hostname.clone()),
        (
            "host id",
            env.host_id.clone().unwrap_or_else(|| {
                "unknown (no /etc/machine-id, no writable state directory)".into()
            }),
        ),
        ("cpu", format!("{} × {}", env.cpu_model, env.cpus_online)),
        (
            "allowed cpus",
            format!(
                "{} ({} of {})",
                format_cpu_list(&env.cpus_allowed),
                env.cpus_allowed.len(),
                env.cpus_online
            ),
        ),
        ("hz", opt(env.hz, "")),
        ("preemption", env.preempt_model.clone()),
        (
            "rt limits",
            format_rt_limits(env.sched_rt_runtime_us, env.sched_rt_period_us),
        ),
        ("rr timeslice", opt(env.sched_rr_timeslice_ms, " ms")),
        ("fair slice", {
            let (base, read) = fair_base_slice_ns(env.cpus_online);
            format!(
                "base {:.2} ms{}; custom slices (matrix.slice_us) {}",
                base as f64 / 1e6,
                if read {
                    " (as the kernel reports it)"
                } else {
                    " (the documented default: the kernel reports none)"
                },
                if crate::sys::sched::custom_slice_honoured() {
                    "honoured"
                } else {
                    "not honoured by this kernel (Linux 6.12+ needed)"
                }
            )
        }),
        (
            "autogroup",
            match env.sched_autogroup_enabled {
                Some(0) => "disabled".to_string(),
                Some(_) => "enabled".to_string(),
                None => "unavailable".to_string(),
            },
        ),
        (
            "cgroup",
            if env.rt_group_sched {
                format!(
                    "{}, RT group scheduling: root cpu.rt_runtime_us = {}",
                    env.cgroup_version,
                    opt(env.root_cgroup_rt_runtime_us, " µs")
                )
            } else {
                format!("{}, no RT group scheduling", env.cgroup_version)
            },
        ),
        ("virtualization", env.virtualization.clone()),
        (
            "sched_ext",
            env.sched_ext
                .clone()
                .unwrap_or_else(|| "unavailable".into()),
        ),
        ("load average", opt(env.load_avg_1m, " (1 min)")),
        ("schedlab", env.schedlab_version.clone()),
        (
            "euid",
            format!(
                "{}{}",
                privs.euid,
                if privs.euid == 0 { " (root)" } else { "" }
            ),
        ),
        (
            "CAP_SYS_NICE",
            if privs.cap_sys_nice { "yes" } else { "no" }.to_string(),
        ),
        ("RLIMIT_RTPRIO", format_rlimit(privs.rlimit_rtprio)),
        ("RLIMIT_NICE", format_rlimit(privs.rlimit_nice)),
        (
            "negative nice",
            if privs.negative_nice_allowed {
                "allowed".to_string()
            } else {
                format!(
                    "not allowed: {}",
                    crate::sys::probe::permission_hint("nice")
                )
            },
        ),
    ];
    rows.push(("policies", String::new()));

    let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0) + 2;
    let mut out = String::new();
    for (key, value) in rows {
        let line = format!("{key:<width$}{value}");
        let _ = writeln!(out, "{}", line.trim_end());
    }
    for p in &privs.policies {
        let status = if p.allowed {
            "allowed".to_string()
        } else {
            format!("not allowed: {}", p.detail)
        };
        let _ = writeln!(out, "  {:<10}{status}", p.policy);
    }
    out
}

/// The JSON rendering for `schedlab env --json`:
/// `{"env": EnvSnapshot, "privileges": Privileges}`.
pub fn render_json(env: &EnvSnapshot, privs: &Privileges) -> String {
    let value = serde_json::json!({ "env": env, "privileges": privs });
    serde_json::to_string_pretty(&value).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}

/// The fair class's base slice (EEVDF's `sysctl_sched_base_slice`): read
/// from debugfs where it is open, else as the kernel reports it for a
/// thread that asked for no slice of its own (`sched_getattr`, Linux
/// 6.12+), else this kernel's default for this many CPUs
/// ([`default_base_slice_ns`]). The flag says whether the kernel reported
/// it.
pub fn fair_base_slice_ns(cpus_online: usize) -> (u64, bool) {
    if let Some(ns) = std::fs::read_to_string("/sys/kernel/debug/sched/base_slice_ns")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
    {
        return (ns, true);
    }
    if let Some(ns) = crate::sys::sched::default_fair_slice_ns() {
        return (ns, true);
    }
    let release = uname().map_or_else(String::new, |u| u.release);
    (default_base_slice_ns(cpus_online, &release), false)
}

/// The kernel's default base slice for `cpus` CPUs on kernel `release`:
/// [`normalized_base_slice_ns`] × [`base_slice_factor`].
pub fn default_base_slice_ns(cpus: usize, release: &str) -> u64 {
    normalized_base_slice_ns(release) * base_slice_factor(cpus)
}

/// `get_update_sysctl_factor` under the default logarithmic tunable
/// scaling: 1 + log2(min(CPUs, 8)).
pub fn base_slice_factor(cpus: usize) -> u64 {
    1 + u64::from((cpus.clamp(1, 8) as u64).ilog2())
}

/// `normalized_sysctl_sched_base_slice` of kernel `release`: 0.70 ms from
/// commit 2ae891b82695 ("sched: Reduce the default slice to avoid tasks
/// getting an extra tick", mainline 6.15, backported to 6.12.31), 0.75 ms
/// before. A bare "6.12" is a recipe's Debian linux-source-6.12, past
/// 6.12.31 (the cached 6.12.117 guest reports base_slice_ns 2100000 on 4
/// CPUs). 6.13 and 6.14 are taken as 0.75 ms.
pub fn normalized_base_slice_ns(release: &str) -> u64 {
    let lowered = match release_version(release) {
        Some((a, b, _)) if (a, b) >= (6, 15) => true,
        Some((6, 12, None)) => true,
        Some((6, 12, Some(s))) => s >= 31,
        _ => false,
    };
    if lowered { 700_000 } else { 750_000 }
}

/// A kernel release's version: "6.12.117-amd64" is (6, 12, Some(117)),
/// "6.12" (6, 12, None); None when its major and minor are not numbers.
pub fn release_version(release: &str) -> Option<(u32, u32, Option<u32>)> {
    let mut parts = release.split(['-', '+', '_']).next()?.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor, parts.next().and_then(|p| p.parse().ok())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::probe::PolicyPermission;

    const CPUINFO: &str = "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\n\
        model\t\t: 85\nmodel name\t: Intel(R) Xeon(R) Processor\nflags\t\t: fpu vme hypervisor lahf_lm\n\n\
        processor\t: 1\nmodel name\t: Other CPU\n";

    const CONFIG: &str = "#\n# Automatically generated file; DO NOT EDIT.\n\
        CONFIG_PREEMPT_BUILD=y\nCONFIG_PREEMPT_NONE=y\n# CONFIG_PREEMPT_VOLUNTARY is not set\n\
        # CONFIG_PREEMPT is not set\n# CONFIG_PREEMPT_LAZY is not set\nCONFIG_PREEMPT_COUNT=y\n\
        CONFIG_PREEMPTION=y\nCONFIG_PREEMPT_DYNAMIC=y\n# CONFIG_HZ_100 is not set\n\
        CONFIG_HZ_250=y\nCONFIG_HZ=250\nCONFIG_LOCALVERSION=\"-fc\"\n";

    /// The slice the kernel itself reports: the cached debian-6.12 guest
    /// (6.12.117) read `base_slice_ns` 2100000 with 4 CPUs
    /// (scripts/guest-lb-probe): 0.70 ms × (1 + log2 4), the stable
    /// backport of 2ae891b82695 in 6.12.31; 6.6 and 6.12.30 keep 0.75 ms.
    #[test]
    fn the_default_base_slice_follows_the_release() {
        assert_eq!(default_base_slice_ns(4, "6.12.117"), 2_100_000);
        assert_eq!(default_base_slice_ns(4, "6.12"), 2_100_000);
        assert_eq!(default_base_slice_ns(4, "6.12.30"), 2_250_000);
        assert_eq!(default_base_slice_ns(8, "6.18.0-fc"), 2_800_000);
        assert_eq!(default_base_slice_ns(16, "6.15.2"), 2_800_000);
        assert_eq!(default_base_slice_ns(2, "6.6.58"), 1_500_000);
        assert_eq!(default_base_slice_ns(1, "6.14.1"), 750_000);
        assert_eq!(release_version("6.18.0-fc"), Some((6, 18, Some(0))));
        assert_eq!(release_version("5.15.0-rc1"), Some((5, 15, Some(0))));
        assert_eq!(release_version("6.12"), Some((6, 12, None)));
        assert_eq!(release_version("linux"), None);
    }

    #[test]
    fn cpuinfo_model_is_the_first() {
        assert_eq!(
            parse_cpuinfo_model(CPUINFO).as_deref(),
            Some("Intel(R) Xeon(R) Processor")
        );
        assert!(cpuinfo_has_flag(CPUINFO, "hypervisor"));
        assert!(!cpuinfo_has_flag(CPUINFO, "hyper"));
        let arm = "processor\t: 0\nBogoMIPS\t: 48.00\nHardware\t: BCM2835\n";
        assert_eq!(parse_cpuinfo_model(arm).as_deref(), Some("BCM2835"));
        assert_eq!(parse_cpuinfo_model("processor\t: 0\n"), None);
    }

    #[test]
    fn kernel_config_values() {
        assert_eq!(
            parse_kernel_config_value(CONFIG, "CONFIG_HZ").as_deref(),
            Some("250")
        );
        assert_eq!(
            parse_kernel_config_value(CONFIG, "CONFIG_LOCALVERSION").as_deref(),
            Some("-fc")
        );
        // Unset and prefix-sharing keys do not match.
        assert_eq!(parse_kernel_config_value(CONFIG, "CONFIG_PREEMPT"), None);
        assert_eq!(parse_kernel_config_value(CONFIG, "CONFIG_HZ_1000"), None);
        assert_eq!(parse_kernel_config_value(CONFIG, "CONFIG_H"), None);
    }

    #[test]
    fn preempt_debugfs() {
        assert_eq!(
            parse_preempt_debugfs("none voluntary (full) lazy\n").as_deref(),
            Some("full")
        );
        assert_eq!(
            parse_preempt_debugfs("(none) voluntary full").as_deref(),
            Some("none")
        );
        assert_eq!(parse_preempt_debugfs("none voluntary full"), None);
        assert_eq!(parse_preempt_debugfs("()"), None);
    }

    #[test]
    fn preempt_from_config() {
        assert_eq!(
            preempt_model_from_config(CONFIG).as_deref(),
            Some("none (dynamic)")
        );
        assert_eq!(
            preempt_model_from_config("CONFIG_PREEMPT=y\n").as_deref(),
            Some("full")
        );
        assert_eq!(
            preempt_model_from_config("CONFIG_PREEMPT_VOLUNTARY=y\n").as_deref(),
            Some("voluntary")
        );
        assert_eq!(
            preempt_model_from_config("CONFIG_PREEMPT_RT=y\nCONFIG_PREEMPTION=y\n").as_deref(),
            Some("rt")
        );
        assert_eq!(
            preempt_model_from_config("CONFIG_PREEMPT_LAZY=y\nCONFIG_PREEMPT_DYNAMIC=y\n")
                .as_deref(),
            Some("lazy (dynamic)")
        );
        assert_eq!(preempt_model_from_config("CONFIG_HZ=250\n"), None);
    }

    #[test]
    fn preempt_model_sources_in_order() {
        let v = "#1 SMP PREEMPT_DYNAMIC @0";
        // debugfs wins.
        assert_eq!(
            preempt_model(Some("none voluntary (full) lazy"), Some(CONFIG), None, v),
            "full (dynamic)"
        );
        // Then a preempt= boot parameter on a dynamic kernel (before "--").
        assert_eq!(
            preempt_model(None, Some(CONFIG), Some("quiet preempt=lazy ro"), v),
            "lazy (dynamic)"
        );
        assert_eq!(
            preempt_model(None, Some(CONFIG), Some("quiet -- preempt=full"), v),
            "none (dynamic)"
        );
        // ...but not on a static one.
        assert_eq!(
            preempt_model(
                None,
                Some("CONFIG_PREEMPT=y\n"),
                Some("preempt=none"),
                "#1 SMP PREEMPT"
            ),
            "full"
        );
        // Then the banner.
        assert_eq!(preempt_model(None, None, None, v), "unknown (dynamic)");
        assert_eq!(preempt_model(None, None, None, "#1 SMP PREEMPT_RT"), "rt");
        assert_eq!(
            preempt_model(None, None, None, "#1 SMP PREEMPT Tue"),
            "full"
        );
        assert_eq!(preempt_model(None, None, None, "#1 SMP"), "unknown");
    }

    #[test]
    fn cgroup_layouts() {
        assert_eq!(classify_cgroup(true, false, false), "v2");
        assert_eq!(classify_cgroup(false, true, true), "hybrid");
        assert_eq!(classify_cgroup(false, false, true), "v1");
        assert_eq!(classify_cgroup(false, false, false), "none");
    }

    #[test]
    fn virtualization_decisions() {
        assert_eq!(classify_virtualization(&VirtFacts::default()), "none");
        let docker_on_firecracker = VirtFacts {
            dockerenv: true,
            hypervisor_flag: true,
            proc1_cgroup: Some("0::/\n".into()),
            ..Default::default()
        };
        assert_eq!(classify_virtualization(&docker_on_firecracker), "docker+vm");
        let kvm = VirtFacts {
            cpuid_hypervisor: Some("KVMKVMKVM".into()),
            hypervisor_flag: true,
            ..Default::default()
        };
        assert_eq!(classify_virtualization(&kvm), "kvm");
        let ec2 = VirtFacts {
            dmi_sys_vendor: Some("Amazon EC2".into()),
            cpuid_hypervisor: Some("KVMKVMKVM".into()),
            ..Default::default()
        };
        assert_eq!(classify_virtualization(&ec2), "amazon");
        let vmware = VirtFacts {
            dmi_sys_vendor: Some("VMware, Inc.".into()),
            dmi_product_name: Some("VMware Virtual Platform".into()),
            ..Default::default()
        };
        assert_eq!(classify_virtualization(&vmware), "vmware");
        let k8s = VirtFacts {
            proc1_cgroup: Some("12:cpu:/kubepods/burstable/pod1234/abcd\n".into()),
            ..Default::default()
        };
        assert_eq!(classify_virtualization(&k8s), "kubernetes");
        let nspawn = VirtFacts {
            container_env: Some("systemd-nspawn".into()),
            ..Default::default()
        };
        assert_eq!(classify_virtualization(&nspawn), "systemd-nspawn");
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(format_cpu_list(&[0, 1]), "0-1");
        assert_eq!(format_cpu_list(&[5, 0, 2, 1]), "0-2,5");
        assert_eq!(format_cpu_list(&[3]), "3");
        assert_eq!(format_cpu_list(&[]), "");
    }

    #[test]
    fn rt_limits() {
        assert_eq!(
            format_rt_limits(Some(950_000), Some(1_000_000)),
            "950000 / 1000000 µs (95.0% for RT)"
        );
        assert!(format_rt_limits(Some(-1), Some(1_000_000)).contains("throttling disabled"));
        assert_eq!(format_rt_limits(None, Some(1_000_000)), "unknown");
    }

    fn sample() -> (EnvSnapshot, Privileges) {
        let env = EnvSnapshot {
            kernel_release: "6.18.44".into(),
            kernel_version: "#1 SMP PREEMPT_DYNAMIC".into(),
            machine: "x86_64".into(),
            hostname: "vm".into(),
            host_id: None,
            cpu_model: "Intel(R) Xeon(R) Processor".into(),
            cpus_online: 2,
            cpus_allowed: vec![0, 1],
            hz: Some(250),
            preempt_model: "none (dynamic)".into(),
            sched_rt_runtime_us: Some(950_000),
            sched_rt_period_us: Some(1_000_000),
            sched_rr_timeslice_ms: Some(100),
            sched_autogroup_enabled: Some(1),
            fair_base_slice_ns: None,
            cgroup_version: "v1".into(),
            rt_group_sched: true,
            root_cgroup_rt_runtime_us: Some(950_000),
            virtualization: "docker+vm".into(),
            sched_ext: None,
            schedlab_version: "0.1.0".into(),
            load_avg_1m: Some(0.25),
            topology: None,
            guest: None,
        };
        let perm = |policy: &str, allowed: bool, detail: &str| PolicyPermission {
            policy: policy.into(),
            allowed,
            detail: detail.into(),
        };
        let privs = Privileges {
            euid: 1000,
            cap_sys_nice: false,
            rlimit_rtprio: (0, 0),
            rlimit_nice: (0, u64::MAX),
            policies: vec![
                perm("other", true, "ok"),
                perm("fifo", true, "ok"),
                perm("deadline", false, "EPERM: needs CAP_SYS_NICE"),
            ],
            negative_nice_allowed: false,
        };
        (env, privs)
    }

    #[test]
    fn text_rendering() {
        let (env, privs) = sample();
        let text = render_text(&env, &privs);
        assert!(text.contains("Intel(R) Xeon(R) Processor × 2"), "{text}");
        assert!(
            text.contains("950000 / 1000000 µs (95.0% for RT)"),
            "{text}"
        );
        assert!(text.contains("100 ms"), "{text}");
        assert!(text.contains("0-1 (2 of 2)"), "{text}");
        assert!(text.contains("0 / unlimited (soft / hard)"), "{text}");
        assert!(text.contains("docker+vm"), "{text}");
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines.contains(&"  other     allowed"), "{text}");
        assert!(lines.contains(&"  fifo      allowed"), "{text}");
        assert!(
            lines.contains(&"  deadline  not allowed: EPERM: needs CAP_SYS_NICE"),
            "{text}"
        );
        // Values are aligned in one column.
        let col = |key: &str| {
            let line = lines.iter().find(|l| l.starts_with(key)).unwrap();
            line[key.len()..].find(|c: char| c != ' ').unwrap() + key.len()
        };
        assert_eq!(col("hz"), col("virtualization"));
        assert_eq!(col("kernel"), col("RLIMIT_RTPRIO"));
    }

    #[test]
    fn json_rendering_round_trips() {
        let (env, privs) = sample();
        let json = render_json(&env, &privs);
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        let back: EnvSnapshot = serde_json::from_value(v["env"].clone()).unwrap();
        assert_eq!(back, env);
        let back: Privileges = serde_json::from_value(v["privileges"].clone()).unwrap();
        assert_eq!(back, privs);
    }

    #[test]
    fn capture_on_this_machine() {
        let env = capture();
        assert!(env.cpus_online >= 1, "{env:?}");
        assert!(!env.kernel_release.is_empty(), "{env:?}");
        assert!(!env.cpus_allowed.is_empty(), "{env:?}");
        assert!(env.cpus_allowed.iter().all(|&c| c < 4096), "{env:?}");
        assert_eq!(env.schedlab_version, env!("CARGO_PKG_VERSION"));
        assert!(matches!(
            env.cgroup_version.as_str(),
            "v1" | "v2" | "hybrid" | "none"
        ));
        // RT limits are present on every Linux with the sysctls.
        if Path::new("/proc/sys/kernel/sched_rt_period_us").exists() {
            assert!(env.sched_rt_period_us.is_some_and(|p| p > 0), "{env:?}");
        }
        // The configuration is read, decompressed in process when it is
        // /proc/config.gz: every configuration sets CONFIG_HZ.
        if Path::new("/proc/config.gz").exists() {
            let text = load_kernel_config("").expect("/proc/config.gz decompresses");
            assert!(
                parse_kernel_config_value(&text, "CONFIG_HZ").is_some(),
                "{text:.200}"
            );
            assert!(env.hz.is_some(), "{env:?}");
        }
        let privs = crate::sys::probe::probe();
        let text = render_text(&env, &privs);
        for p in crate::sys::probe::POLICIES {
            assert!(text.contains(&format!("  {p:<10}")), "{text}");
        }
        println!("{text}");
        println!("{}", render_json(&env, &privs));
    }

    #[test]
    fn default_base_slice_follows_the_kernel_scaling() {
        assert_eq!(default_base_slice_ns(1, "6.6"), 750_000);
        assert_eq!(default_base_slice_ns(2, "6.6"), 1_500_000);
        assert_eq!(default_base_slice_ns(4, "6.6"), 2_250_000);
        assert_eq!(default_base_slice_ns(8, "6.6"), 3_000_000);
        assert_eq!(default_base_slice_ns(64, "6.6"), 3_000_000);
    }
}
