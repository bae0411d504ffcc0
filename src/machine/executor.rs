//! The guests of a campaign as an executor of its guest runs: the kernels
//! of the levels are found (or built) and the image made before the first
//! run; a level's guest boots at its first run and serves every run of
//! that level (the plan puts them together), then powers off when the
//! campaign moves to the next level or ends. A guest that dies fails its
//! run and the next run boots a new one. Each run holds the machine-wide
//! measurement lock, as a host run does: QEMU runs on the host's CPUs.

use anyhow::{Context, Result};
use std::path::PathBuf;
use std::time::Duration;

use super::guest::{BootPlan, Booted, Session};
use super::image::Contents;
use super::qemu;
use crate::launch::Outcome;
use crate::launch::rundir::OwnedDir;
use crate::plan::Run;
use crate::record::RunRecord;
use crate::spec::Spec;
use crate::spec::machines::{Accel, Guest, MachineLevel};

/// A level ready to boot.
struct Prepared {
    level: MachineLevel,
    guest: Guest,
    kernel: PathBuf,
    kernel_source: String,
}

/// Runs in guests.
pub struct GuestExecutor {
    levels: Vec<Prepared>,
    /// The image every guest boots (one per campaign: the spec is the same).
    image_dir: OwnedDir,
    workdir: PathBuf,
    qemu_version: String,
    signals: libc::sigset_t,
    timeout: Duration,
    quiet: bool,
    allow_concurrent: bool,
    what: String,
    current: Option<(String, Session)>,
    /// The host time of the guest booted last, until the first run it
    /// carries out stores it (`extra.guest_boot_ms`).
    boot_unstored: Option<Duration>,
    /// KVM failed to boot a guest once: later `auto` levels go to TCG.
    kvm_failed: bool,
}

/// The host time a guest may take to boot.
fn boot_limit(accel: Accel, cpus: u32) -> Duration {
    match accel {
        Accel::Kvm => Duration::from_secs(30 + u64::from(cpus)),
        _ => Duration::from_secs(90 + 10 * u64::from(cpus)),
    }
}

/// The host time a guest's run may take: the spec's timeout (guest time)
/// times what emulation may cost, and a margin.
fn run_limit(accel: Accel, timeout: Duration) -> Duration {
    let factor = match accel {
        Accel::Kvm => 2,
        _ => 60,
    };
    timeout * factor + Duration::from_secs(120)
}

/// What a guest run cost this host, in its record's extra: the host time
/// from asking for the run to its record (`guest_host_ms`), and on the
/// first run of a boot the boot's host time from QEMU's start to the
/// guest's hello (`guest_boot_ms`). `plan` and `run` estimate the runs left
/// of a level from them ([`super::estimate`]).
fn host_times(rec: &mut RunRecord, boot: Option<Duration>, run: Duration) {
    let ms = |d: Duration| serde_json::json!((d.as_secs_f64() * 1e6).round() / 1e3);
    if !rec.extra.is_object() {
        rec.extra = serde_json::json!({});
    }
    if let Some(map) = rec.extra.as_object_mut() {
        map.insert(super::estimate::HOST_MS_KEY.into(), ms(run));
        if let Some(b) = boot {
            map.insert(super::estimate::BOOT_MS_KEY.into(), ms(b));
        }
    }
}

impl GuestExecutor {
    /// Find the kernels of the guest levels the `pending` runs name and
    /// make the image.
    pub fn begin(
        spec: &Spec,
        pending: &[&Run],
        signals: libc::sigset_t,
        force: bool,
        quiet: bool,
        allow_concurrent: bool,
        what: &str,
    ) -> Result<GuestExecutor> {
        let qemu_version = qemu::version()?;
        let mut levels: Vec<Prepared> = Vec::new();
        for m in pending.iter().filter_map(|r| r.machine.as_ref()) {
            let Some(g) = &m.guest else { continue };
            if levels.iter().any(|p| p.level.name == m.name) {
                continue;
            }
            let k = super::kernel_for(&m.name, g, quiet)?;
            levels.push(Prepared {
                level: m.clone(),
                guest: g.clone(),
                kernel: k.bzimage,
                kernel_source: k.source,
            });
        }
        let workdir = crate::campaign::workdir_of(spec);
        let image_dir = OwnedDir::create_named(&workdir, "schedlab-image-")
            .with_context(|| format!("making the guests' image in {}", workdir.display()))?;
        let contents = Contents::for_spec(spec, force)?;
        let bytes = contents.write(&image_dir.path().join("initramfs.cpio"))?;
        if !quiet && !levels.is_empty() {
            note!(
                "guest image: {} files (busybox, schedlab, the spec's programs, their libraries), {:.1} MiB",
                contents.paths().len(),
                bytes as f64 / (1 << 20) as f64
            );
        }
        Ok(GuestExecutor {
            levels,
            image_dir,
            workdir,
            qemu_version,
            signals,
            timeout: Duration::from_nanos(spec.timeout_ns),
            quiet,
            allow_concurrent,
            what: what.to_string(),
            current: None,
            boot_unstored: None,
            kvm_failed: false,
        })
    }

    /// Carry out a run of a guest level.
    pub fn execute(&mut self, run: &Run) -> Result<Outcome> {
        let name = run
            .machine
            .as_ref()
            .map(|m| m.name.clone())
            .unwrap_or_default();
        let _measuring = match self.allow_concurrent {
            true => None,
            false => {
                match crate::campaign::wait_for_machine(&self.signals, &self.what, self.quiet)? {
                    Ok(held) => Some(held),
                    Err(sig) => return Ok(Outcome::Interrupted(sig)),
                }
            }
        };
        if self.current.as_ref().is_some_and(|(n, _)| n != &name) {
            self.power_off();
        }
        if self.current.is_none() {
            match self.boot(&name)? {
                Booted::Up(s) => {
                    self.boot_unstored = Some(s.boot_time);
                    self.current = Some((name.clone(), *s));
                }
                Booted::Stopped(sig) => return Ok(Outcome::Interrupted(sig)),
            }
        }
        let (_, session) = self.current.as_mut().expect("booted above");
        let limit = run_limit(session.accel, self.timeout);
        let started = std::time::Instant::now();
        let (mut outcome, alive) = session.run(run, &self.signals, limit)?;
        if let Outcome::Done(rec, _) = &mut outcome {
            let boot = self.boot_unstored.take();
            host_times(rec, boot, started.elapsed());
        }
        if !alive {
            self.current = None;
        }
        Ok(outcome)
    }

    /// Boot level `name`'s guest, power it off again, and return how long
    /// it took to say hello (host time): `schedlab bench machines`.
    pub fn boot_time(&mut self, name: &str) -> Result<Duration> {
        self.power_off();
        match self.boot(name)? {
            Booted::Up(s) => {
                let t = s.boot_time;
                s.shut_down();
                Ok(t)
            }
            Booted::Stopped(sig) => {
                anyhow::bail!("stopped by {}", crate::sys::proc::signal_name(sig))
            }
        }
    }

    /// Power off the guest that runs (at the end, or before another level).
    pub fn power_off(&mut self) {
        if let Some((_, s)) = self.current.take() {
            s.shut_down();
        }
    }

    fn boot(&mut self, name: &str) -> Result<Booted> {
        let p = self
            .levels
            .iter()
            .find(|p| p.level.name == name)
            .with_context(|| format!("machine \"{name}\" was not prepared"))?;
        let (accel, why) = match (p.guest.accel, self.kvm_failed) {
            (Accel::Auto, true) => (
                Accel::Tcg,
                Some(
                    "accel = \"auto\" runs under TCG: KVM did not boot a guest before".to_string(),
                ),
            ),
            (a, _) => qemu::resolve_accel(a, Duration::from_secs(5))?,
        };
        if let (Some(why), false) = (&why, self.quiet) {
            note!("{why}");
        }
        let mut plan = BootPlan {
            level: &p.level,
            guest: &p.guest,
            kernel: &p.kernel,
            kernel_source: p.kernel_source.clone(),
            image: &self.image_dir.path().join("initramfs.cpio"),
            workdir: &self.workdir,
            qemu_version: self.qemu_version.clone(),
            accel,
            boot_limit: boot_limit(accel, p.guest.topology.cpus()),
        };
        if !self.quiet {
            note!(
                "booting machine \"{name}\": {} ({}), {} CPUs as {}{}, {} MiB, {}",
                p.guest.kernel,
                p.kernel.display(),
                p.guest.topology.cpus(),
                p.guest.topology.label(),
                match p.guest.numa_nodes {
                    1 => String::new(),
                    n => format!(" on {n} NUMA nodes"),
                },
                p.guest.memory_mib,
                accel.name()
            );
        }
        match Session::boot(&plan, &self.signals) {
            Ok(b) => Ok(b),
            // KVM that makes VMs but does not run them: TCG, said so.
            Err(e) if accel == Accel::Kvm && p.guest.accel == Accel::Auto => {
                self.kvm_failed = true;
                if !self.quiet {
                    note!(
                        "accel = \"auto\": KVM did not boot the guest ({e:#}); booting it under TCG"
                    );
                }
                plan.accel = Accel::Tcg;
                plan.boot_limit = boot_limit(Accel::Tcg, p.guest.topology.cpus());
                Session::boot(&plan, &self.signals)
            }
            Err(e) => Err(e),
        }
    }
}

impl Drop for GuestExecutor {
    fn drop(&mut self) {
        self.power_off();
    }
}
