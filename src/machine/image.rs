//! The guest's root file system: an initramfs (a `newc` cpio archive, not
//! compressed) holding busybox, schedlab itself and the shared libraries it
//! links, the programs the level's command workloads and set-ups name
//! (with theirs), the campaign's spec, and an `/init` that mounts what
//! schedlab reads (proc, sys, devtmpfs, cgroup2, tracefs, debugfs), starts
//! schedlab's guest agent and powers the guest off when it ends.

use anyhow::{Context, Result, bail};
use std::collections::BTreeSet;
use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::spec::Spec;

/// Where the guest finds the campaign's spec.
pub const SPEC_PATH: &str = "/etc/schedlab/spec.json";
/// Present when the campaign was started with `--force`.
pub const FORCE_PATH: &str = "/etc/schedlab/force";
/// The statically linked busybox (Debian's busybox-static).
const BUSYBOX: &str = "/bin/busybox";

/// The guest's `/init`: mounts, the agent, power off.
const INIT: &str = r#"#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin:/sbin:/usr/bin:/usr/sbin:/usr/local/bin HOME=/root TMPDIR=/tmp
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mkdir -p /dev/pts /dev/shm
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run && mkdir -p /run/lock
mount -t tmpfs tmpfs /dev/shm
mkdir -p /sys/fs/cgroup && mount -t cgroup2 cgroup2 /sys/fs/cgroup 2>/dev/null
if read -r offered </sys/fs/cgroup/cgroup.controllers; then
    for c in $offered; do
        case $c in cpu|cpuset|memory|pids) echo "+$c" >/sys/fs/cgroup/cgroup.subtree_control ;; esac
    done
fi
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
hostname schedlab-guest
cd /tmp
echo "schedlab guest: Linux $(uname -r), $(nproc) CPUs"
/bin/schedlab __guest-agent
echo "schedlab guest: the agent ended with $?"
poweroff -f
"#;

/// The files of an image, by their path in the guest.
#[derive(Debug, Default)]
pub struct Contents {
    /// Guest path → host file (copied, following links).
    files: std::collections::BTreeMap<String, PathBuf>,
    /// Guest path → bytes.
    made: std::collections::BTreeMap<String, (Vec<u8>, u32)>,
}

impl Contents {
    /// What a guest of `spec` needs: busybox, `schedlab` (this executable),
    /// the programs of its command workloads, their libraries, the spec.
    pub fn for_spec(spec: &Spec, force: bool) -> Result<Contents> {
        let mut c = Contents::default();
        if !is_static_busybox(Path::new(BUSYBOX)) {
            bail!(
                "a guest needs a statically linked {BUSYBOX}: install Debian's busybox-static \
                 (apt-get install busybox-static)"
            );
        }
        c.files.insert(BUSYBOX.into(), BUSYBOX.into());
        let me = std::env::current_exe().context("finding schedlab's own executable")?;
        c.add_program("/bin/schedlab", &me)?;
        for prog in programs_of(spec) {
            if is_busybox_applet(&prog) {
                continue;
            }
            // Found as the worker finds it (execvp's rules), with the
            // Debian package to install when it is missing.
            let path = std::env::var_os("PATH");
            let host = crate::workload::command::params::resolve_program(&prog, path.as_deref(), None)
                .with_context(|| {
                    format!("a command workload runs \"{prog}\": the guest takes its programs from this machine")
                })?;
            let guest = host.to_string_lossy().into_owned();
            c.add_program(&guest, &host)?;
        }
        let spec_json = serde_json::to_vec_pretty(spec)?;
        c.made.insert(SPEC_PATH.into(), (spec_json, 0o644));
        if force {
            c.made.insert(FORCE_PATH.into(), (Vec::new(), 0o644));
        }
        c.made
            .insert("/init".into(), (INIT.as_bytes().to_vec(), 0o755));
        c.made.insert(
            "/etc/passwd".into(),
            (
                b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"
                    .to_vec(),
                0o644,
            ),
        );
        c.made.insert(
            "/etc/group".into(),
            (b"root:x:0:\nnogroup:x:65534:\n".to_vec(), 0o644),
        );
        Ok(c)
    }

    /// A program and the shared libraries `ldd` names for it.
    fn add_program(&mut self, guest: &str, host: &Path) -> Result<()> {
        self.files.insert(guest.to_string(), host.to_path_buf());
        for lib in shared_libraries(host)? {
            self.files
                .insert(lib.to_string_lossy().into_owned(), lib.clone());
        }
        Ok(())
    }

    /// The guest paths, sorted.
    pub fn paths(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self
            .files
            .keys()
            .chain(self.made.keys())
            .map(String::as_str)
            .collect();
        v.sort_unstable();
        v
    }

    /// Write the archive to `out`.
    pub fn write(&self, out: &Path) -> Result<u64> {
        let f = File::create(out).with_context(|| format!("creating {}", out.display()))?;
        let mut w = BufWriter::new(f);
        let mut dirs: BTreeSet<String> = [
            "bin",
            "sbin",
            "usr",
            "usr/bin",
            "usr/sbin",
            "etc",
            "etc/schedlab",
            "proc",
            "sys",
            "dev",
            "tmp",
            "run",
            "root",
        ]
        .into_iter()
        .map(str::to_string)
        .collect();
        for p in self.paths() {
            let mut at = Path::new(p.trim_start_matches('/')).parent();
            while let Some(d) = at.filter(|d| !d.as_os_str().is_empty()) {
                dirs.insert(d.to_string_lossy().into_owned());
                at = d.parent();
            }
        }
        let mut ino = 1u32;
        for d in &dirs {
            entry(&mut w, d, 0o040755, &[], &mut ino)?;
        }
        for (guest, host) in &self.files {
            let mut bytes = Vec::new();
            File::open(host)
                .and_then(|mut f| f.read_to_end(&mut bytes))
                .with_context(|| format!("reading {} for the guest", host.display()))?;
            let mode = std::fs::metadata(host)?.permissions().mode() & 0o7777;
            entry(
                &mut w,
                guest.trim_start_matches('/'),
                0o100000 | mode,
                &bytes,
                &mut ino,
            )?;
        }
        for (guest, (bytes, mode)) in &self.made {
            entry(
                &mut w,
                guest.trim_start_matches('/'),
                0o100000 | mode,
                bytes,
                &mut ino,
            )?;
        }
        let w = cpio::newc::trailer(w)?;
        let f = w.into_inner().map_err(|e| e.into_error())?;
        f.sync_all()?;
        Ok(f.metadata()?.len())
    }
}

fn entry(w: &mut impl Write, name: &str, mode: u32, data: &[u8], ino: &mut u32) -> Result<()> {
    let size = u32::try_from(data.len()).with_context(|| format!("{name} is over 4 GiB"))?;
    let mut e = cpio::newc::Builder::new(name)
        .ino(*ino)
        .mode(mode)
        .nlink(1)
        .write(w, size);
    *ino += 1;
    e.write_all(data)?;
    e.finish()?;
    Ok(())
}

/// The programs a spec's command workloads and their set-ups start.
fn programs_of(spec: &Spec) -> BTreeSet<String> {
    spec.workloads
        .iter()
        .filter_map(|w| w.workload.command())
        .flat_map(|c| [c.argv.first(), c.setup.first()])
        .flatten()
        .cloned()
        .collect()
}

/// Names busybox provides itself (the guest's shell and tools).
fn is_busybox_applet(prog: &str) -> bool {
    !prog.contains('/')
        && matches!(
            prog,
            "sh" | "ash"
                | "cat"
                | "echo"
                | "true"
                | "false"
                | "sleep"
                | "dd"
                | "yes"
                | "head"
                | "tail"
                | "seq"
                | "timeout"
                | "taskset"
                | "chrt"
                | "nice"
                | "env"
                | "printf"
                | "test"
        )
}

/// The shared libraries of `exe` (with the dynamic loader), as `ldd`
/// resolves them on this machine; none for a static executable.
fn shared_libraries(exe: &Path) -> Result<Vec<PathBuf>> {
    let out = std::process::Command::new("ldd")
        .arg(exe)
        .output()
        .context("running ldd (glibc's libc-bin) to find the libraries a guest needs")?;
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(parse_ldd(&text))
}

/// Every absolute path in `ldd`'s output ("libc.so.6 => /lib/…/libc.so.6
/// (0x…)", "/lib64/ld-linux-x86-64.so.2 (0x…)").
fn parse_ldd(text: &str) -> Vec<PathBuf> {
    text.lines()
        .filter_map(|l| l.split_whitespace().find(|w| w.starts_with('/')))
        .map(PathBuf::from)
        .collect()
}

/// Whether `path` is a statically linked executable (`ldd` says "not a
/// dynamic executable").
fn is_static_busybox(path: &Path) -> bool {
    path.is_file()
        && std::process::Command::new("ldd")
            .arg(path)
            .output()
            .is_ok_and(|o| {
                !o.status.success() || parse_ldd(&String::from_utf8_lossy(&o.stdout)).is_empty()
            })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldd_output_gives_the_libraries() {
        let text = "\tlinux-vdso.so.1 (0x00007ffd)\n\
                    \tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x00007f)\n\
                    \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f)\n\
                    \t/lib64/ld-linux-x86-64.so.2 (0x00007f)\n";
        assert_eq!(
            parse_ldd(text),
            vec![
                PathBuf::from("/lib/x86_64-linux-gnu/libgcc_s.so.1"),
                PathBuf::from("/lib/x86_64-linux-gnu/libc.so.6"),
                PathBuf::from("/lib64/ld-linux-x86-64.so.2"),
            ]
        );
        assert!(parse_ldd("\tnot a dynamic executable\n").is_empty());
    }

    #[test]
    fn an_image_holds_schedlab_its_libraries_and_the_spec() {
        if !Path::new(BUSYBOX).is_file() {
            // The archive itself is still checked below without busybox.
            eprintln!("(no {BUSYBOX}: the image's busybox part is checked in tests/machines.rs)");
        }
        let spec = crate::spec::load(
            "name = \"img\"\n[matrix]\nworkload = [\"c\"]\n[workloads.c]\nkind = \"command\"\nargv = [\"sh\", \"-c\", \"true\"]\n",
            "img.toml",
            &[],
        )
        .unwrap();
        let mut c = Contents::default();
        let me = std::env::current_exe().unwrap();
        c.add_program("/bin/schedlab", &me).unwrap();
        c.made.insert(
            SPEC_PATH.into(),
            (serde_json::to_vec(&spec).unwrap(), 0o644),
        );
        let paths = c.paths();
        assert!(paths.contains(&"/bin/schedlab"));
        assert!(paths.iter().any(|p| p.contains("libc.so")), "{paths:?}");
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("img.cpio");
        let bytes = c.write(&out).unwrap();
        assert!(bytes > std::fs::metadata(&me).unwrap().len());
        // Read back: every file is there with its bytes.
        let mut f = File::open(&out).unwrap();
        let mut names = Vec::new();
        loop {
            let r = cpio::NewcReader::new(f).unwrap();
            if r.entry().is_trailer() {
                break;
            }
            names.push(r.entry().name().to_string());
            f = r.skip().unwrap();
        }
        assert!(names.contains(&"bin/schedlab".to_string()));
        assert!(names.contains(&"etc/schedlab/spec.json".to_string()));
        assert!(names.contains(&"etc".to_string()));
        assert!(programs_of(&spec).contains("sh") && is_busybox_applet("sh"));
    }
}
