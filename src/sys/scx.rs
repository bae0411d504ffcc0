//! sched_ext on this machine: whether the kernel has it
//! (`/sys/kernel/sched_ext/state`), which BPF scheduler is loaded
//! (`root/ops`), whether this process may load one, and whether this
//! schedlab was built with its own (the cargo feature `ext`). For
//! `schedlab env` and for the reason an ext condition is skipped.

use std::path::Path;

use serde::Serialize;

use super::probe::{has_cap, parse_cap_eff};
use super::procfs::read_trimmed;

/// `SCHED_EXT` from `include/uapi/linux/sched.h` (Linux 6.12+).
pub const SCHED_EXT: u32 = 7;

const SYSFS: &str = "/sys/kernel/sched_ext";

/// Capabilities from `include/uapi/linux/capability.h`.
const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;

/// What `schedlab env` shows about sched_ext.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScxStatus {
    /// `/sys/kernel/sched_ext/state` ("disabled", "enabled", …); None when
    /// the kernel has no sched_ext.
    pub state: Option<String>,
    /// The loaded BPF scheduler's name (`root/ops`), if one is loaded.
    pub ops: Option<String>,
    /// Whether this process may load a BPF scheduler, and why (not).
    pub may_load_bpf: Result<String, String>,
    /// Whether this schedlab has its sched_ext WRR scheduler, and why (not).
    pub built: Result<String, String>,
    /// sched_ext scheduler programs in PATH (`scx_*`), for
    /// `matrix.ext_scheduler`.
    pub installed: Vec<String>,
}

impl ScxStatus {
    /// Why `wrr.mechanism = "ext"` cannot run here; None when it can.
    pub fn unavailable(&self) -> Option<String> {
        if let Err(why) = &self.built {
            return Some(why.clone());
        }
        self.cannot_load()
    }

    /// Why no sched_ext scheduler (schedlab's or another program's) can be
    /// loaded here now; None when one can.
    pub fn cannot_load(&self) -> Option<String> {
        match self.state.as_deref() {
            None => {
                return Some(format!(
                    "this kernel has no sched_ext ({SYSFS} is missing: it needs Linux 6.12+ built \
                     with CONFIG_SCHED_CLASS_EXT; scripts/vm-test runs ext in a VM)"
                ));
            }
            Some("disabled") => {}
            Some(state) => {
                return Some(format!(
                    "sched_ext is {state}{}: only one BPF scheduler can be loaded at a time",
                    match &self.ops {
                        Some(ops) => format!(" with the scheduler \"{ops}\""),
                        None => String::new(),
                    }
                ));
            }
        }
        self.may_load_bpf.as_ref().err().cloned()
    }

    /// One line per fact, for `schedlab env`.
    pub fn render_text(&self) -> String {
        let kernel = match (&self.state, &self.ops) {
            (None, _) => {
                format!("not in this kernel (no {SYSFS}: CONFIG_SCHED_CLASS_EXT, Linux 6.12+)")
            }
            (Some(state), Some(ops)) => format!("{state}, scheduler \"{ops}\""),
            (Some(state), None) => format!("{state}, no scheduler loaded"),
        };
        let bpf = match &self.may_load_bpf {
            Ok(why) => format!("allowed ({why})"),
            Err(why) => format!("not allowed: {why}"),
        };
        let ext = match self.unavailable() {
            None => "available (wrr.mechanism = \"ext\"; \"auto\" picks it)".to_string(),
            Some(why) => format!("absent: {why}"),
        };
        let installed = match self.installed.is_empty() {
            true => "no scx_* program in PATH (matrix.ext_scheduler takes any program)".to_string(),
            false => format!(
                "{} (in PATH; matrix.ext_scheduler)",
                self.installed.join(", ")
            ),
        };
        format!("kernel    {kernel}\nload BPF  {bpf}\next       {ext}\nothers    {installed}\n")
    }
}

/// Whether sched_ext schedules task `pid` now (`ext.enabled` in
/// `/proc/PID/sched`); None when the kernel does not say (no sched_ext, or
/// the task is gone).
pub fn task_on_ext(pid: i32) -> Option<bool> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/sched")).ok()?;
    parse_ext_enabled(&text)
}

/// `ext.enabled` of a `/proc/PID/sched` text.
fn parse_ext_enabled(text: &str) -> Option<bool> {
    text.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        (name.trim() == "ext.enabled").then(|| value.trim() == "1")
    })
}

/// `/sys/kernel/sched_ext/state` and `root/ops` now: (state, loaded
/// scheduler's name).
pub fn state_now() -> (Option<String>, Option<String>) {
    let root = Path::new(SYSFS);
    (
        read_trimmed(&root.join("state")),
        read_trimmed(&root.join("root/ops")).filter(|s| !s.is_empty()),
    )
}

/// The machine's sched_ext facts now.
pub fn status() -> ScxStatus {
    let (state, ops) = state_now();
    let cap_eff = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| parse_cap_eff(&s));
    ScxStatus {
        state,
        ops,
        may_load_bpf: bpf_permission(super::proc::euid(), cap_eff),
        built: built(),
        installed: installed_in(&std::env::var("PATH").unwrap_or_default()),
    }
}

/// The executable files named `scx_*` in the directories of `path` (a
/// PATH value), by name, each once.
fn installed_in(path: &str) -> Vec<String> {
    use std::os::unix::fs::PermissionsExt;
    let mut found: Vec<String> = path
        .split(':')
        .filter(|d| !d.is_empty())
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("scx_"))
        .filter(|e| {
            std::fs::metadata(e.path())
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    found.sort();
    found.dedup();
    found
}

/// Whether a process with effective uid `euid` and effective capability
/// mask `cap_eff` may load and attach a sched_ext scheduler: root, or
/// CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN together.
pub fn bpf_permission(euid: u32, cap_eff: Option<u64>) -> Result<String, String> {
    let caps = cap_eff.unwrap_or(0);
    let needed = [
        (CAP_BPF, "CAP_BPF"),
        (CAP_PERFMON, "CAP_PERFMON"),
        (CAP_SYS_ADMIN, "CAP_SYS_ADMIN"),
    ];
    let missing: Vec<&str> = needed
        .iter()
        .filter(|(cap, _)| !has_cap(caps, *cap))
        .map(|(_, name)| *name)
        .collect();
    if euid == 0 && missing.is_empty() {
        Ok("root".to_string())
    } else if missing.is_empty() {
        Ok("CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN".to_string())
    } else {
        Err(format!(
            "loading a sched_ext scheduler needs root or CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN \
             (missing: {})",
            missing.join(", ")
        ))
    }
}

/// Whether this binary has the sched_ext WRR scheduler (the `ext`
/// feature registers its loader: [`crate::wrr::ext_hook`]).
fn built() -> Result<String, String> {
    match crate::wrr::ext_hook::loader() {
        Some(loader) => Ok(loader.built_with.to_string()),
        None => Err(crate::wrr::ext_hook::NOT_BUILT.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: u64 = u64::MAX >> 23; // capabilities 0..=40

    fn status(state: Option<&str>, ops: Option<&str>) -> ScxStatus {
        ScxStatus {
            state: state.map(str::to_string),
            ops: ops.map(str::to_string),
            may_load_bpf: Ok("root".to_string()),
            built: Ok("built in".to_string()),
            installed: Vec::new(),
        }
    }

    #[test]
    fn permission_needs_root_or_all_three_capabilities() {
        assert_eq!(bpf_permission(0, Some(ALL)), Ok("root".to_string()));
        assert!(bpf_permission(1000, Some(ALL)).is_ok());
        let only_admin = 1u64 << CAP_SYS_ADMIN;
        let err = bpf_permission(1000, Some(only_admin)).unwrap_err();
        assert!(err.contains("missing: CAP_BPF, CAP_PERFMON"), "{err}");
        // Root without the capabilities (a container dropping them) cannot.
        let err = bpf_permission(0, Some(0)).unwrap_err();
        assert!(err.contains("CAP_SYS_ADMIN"), "{err}");
        assert!(bpf_permission(0, None).is_err());
    }

    #[test]
    fn unavailable_names_the_reason() {
        assert_eq!(status(Some("disabled"), None).unavailable(), None);
        let why = status(None, None).unavailable().unwrap();
        assert!(why.contains("no sched_ext"), "{why}");
        let why = status(Some("enabled"), Some("scx_simple"))
            .unavailable()
            .unwrap();
        assert!(
            why.contains("enabled with the scheduler \"scx_simple\""),
            "{why}"
        );
        let mut s = status(Some("disabled"), None);
        s.may_load_bpf = Err("needs root".to_string());
        assert_eq!(s.unavailable(), Some("needs root".to_string()));
        // An absent build is named first: nothing else matters then.
        s.built = Err("built without ext".to_string());
        assert_eq!(s.unavailable(), Some("built without ext".to_string()));
    }

    #[test]
    fn ext_enabled_is_read_from_proc_sched() {
        let text = "schedlab-w0 (123, #threads: 1)\n\
                    -------------------------------------------------------------------\n\
                    se.exec_start                                :      12345.678901\n\
                    ext.enabled                                  :                    1\n\
                    policy                                       :                    7\n";
        assert_eq!(parse_ext_enabled(text), Some(true));
        let off = text.replace(":                    1\n", ":                    0\n");
        assert_eq!(parse_ext_enabled(&off), Some(false));
        // A kernel without sched_ext has no such line.
        assert_eq!(parse_ext_enabled("se.exec_start : 1.0\n"), None);
        // This machine: the line exists exactly when the kernel has sched_ext.
        let me = std::process::id() as i32;
        assert_eq!(task_on_ext(me).is_some(), state_now().0.is_some());
    }

    #[test]
    fn installed_schedulers_are_executables_named_scx() {
        use std::os::unix::fs::PermissionsExt;
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let make = |dir: &Path, name: &str, mode: u32| {
            let p = dir.join(name);
            std::fs::write(&p, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        make(a.path(), "scx_simple", 0o755);
        make(a.path(), "scx_notes.txt", 0o644);
        make(a.path(), "other", 0o755);
        make(b.path(), "scx_rusty", 0o755);
        make(b.path(), "scx_simple", 0o755);
        std::fs::create_dir(b.path().join("scx_dir")).unwrap();
        let path = format!(
            "{}::{}:/nonexistent",
            a.path().display(),
            b.path().display()
        );
        assert_eq!(installed_in(&path), ["scx_rusty", "scx_simple"]);
        assert!(installed_in("").is_empty());
    }

    #[test]
    fn render_text_has_four_lines() {
        let text = status(Some("disabled"), None).render_text();
        assert_eq!(text.lines().count(), 4);
        assert!(
            text.contains("others    no scx_* program in PATH"),
            "{text}"
        );
        let mut s = status(Some("disabled"), None);
        s.installed = vec!["scx_lavd".into(), "scx_simple".into()];
        assert!(
            s.render_text()
                .contains("others    scx_lavd, scx_simple (in PATH")
        );
        assert!(text.contains("disabled, no scheduler loaded"), "{text}");
        assert!(text.contains("allowed (root)"), "{text}");
        assert!(text.contains("ext       available"), "{text}");
        let text = status(None, None).render_text();
        assert!(text.contains("not in this kernel"), "{text}");
        assert!(
            text.contains("absent: this kernel has no sched_ext"),
            "{text}"
        );
    }
}
