//! Machines as campaign levels (`matrix.machine`): guests that schedlab
//! boots itself under QEMU with any kernel and CPU topology, their runs
//! carried out by schedlab inside them and stored on the host like any
//! other.
//!
//! `kernel`: the recipes, their cache and a user's bzImage; `image`: the
//! guest's initramfs; `qemu`: QEMU's command line and accelerator;
//! `estimate`: what its runs cost this host, for `plan` and progress;
//! `protocol`: what host and guest say over the channel; `guest`: one
//! booted guest seen from the host; `executor`: the guests of a campaign as
//! the executor of its guest runs; `agent`: schedlab inside the guest.

pub mod agent;
pub mod estimate;
pub mod executor;
pub mod guest;
pub mod image;
pub mod kernel;
pub mod protocol;
pub mod qemu;

use anyhow::{Context, Result, bail};
use std::path::PathBuf;

use crate::spec::machines::Guest;

pub use executor::GuestExecutor;

/// A kernel ready to boot, and where it came from.
pub struct KernelRef {
    pub bzimage: PathBuf,
    pub source: String,
}

/// Whether a guest of kernel `release` with `cpus` CPUs hangs at boot
/// under `accel`: before 6.5 (x86's CPU bring-up rewrite) a secondary CPU
/// waits in `wait_for_master_cpu` for a callout the boot CPU never gives
/// when QEMU counts instructions (Debian's 6.1, 2 CPUs: the vCPU loops on
/// `cpu_callout_mask`, read from QEMU's monitor; 6.12 boots). Checked with
/// the spec for a recipe, and again for a user's bzImage once its release
/// is read.
pub fn icount_smp_hangs(release: &str, accel: crate::spec::machines::Accel, cpus: u32) -> bool {
    let Some((major, minor, _)) = crate::sys::envinfo::release_version(release) else {
        return false;
    };
    accel == crate::spec::machines::Accel::TcgIcount && cpus > 1 && (major, minor) < (6, 5)
}

/// Why [`icount_smp_hangs`] refuses, and the ways out.
pub fn icount_smp_reason(release: &str, cpus: u32) -> String {
    format!(
        "Linux {release} with {cpus} CPUs does not boot under accel = \"tcg-icount\": its \
         secondary CPUs wait forever in the bring-up handshake of kernels before 6.5 (measured \
         with Debian's 6.1: the console stops at \"x86: Booting SMP configuration\"). Use one \
         CPU (topology = \"1x1x1\"), accel = \"tcg\", or a kernel of 6.5 or newer (debian-6.12)"
    )
}

/// The kernel of machine level `level`: found in a cache, built from its
/// recipe when none fits, or the user's bzImage; refused when its
/// `NR_CPUS` is below the topology's CPUs or it lacks what schedlab needs.
pub fn kernel_for(level: &str, guest: &Guest, quiet: bool) -> Result<KernelRef> {
    let k = kernel::resolve(&guest.kernel, true, quiet)
        .with_context(|| format!("machines.{level}.kernel = \"{}\"", guest.kernel))?;
    let cpus = guest.topology.cpus();
    if let Some(n) = k.config.nr_cpus()
        && cpus > n
    {
        bail!(
            "machines.{level}.topology: {} is {cpus} CPUs, more than the kernel's NR_CPUS ({n}) of {}",
            guest.topology.label(),
            k.bzimage.display()
        );
    }
    if icount_smp_hangs(&k.release, guest.accel, cpus) {
        bail!("machines.{level}: {}", icount_smp_reason(&k.release, cpus));
    }
    let missing = kernel::missing_options(&k.config);
    if !missing.is_empty() {
        bail!(
            "machines.{level}.kernel: {} lacks what schedlab needs in a guest: {}",
            k.bzimage.display(),
            kernel::describe_missing(&k.config)
        );
    }
    Ok(KernelRef {
        source: format!("{} ({}, {})", k.name, k.source, k.bzimage.display()),
        bzimage: k.bzimage,
    })
}

#[cfg(test)]
mod tests {
    use super::icount_smp_hangs;
    use crate::spec::machines::Accel;

    #[test]
    fn kernels_before_6_5_are_refused_under_icount_with_more_than_one_cpu() {
        assert!(icount_smp_hangs("6.1.158", Accel::TcgIcount, 2));
        assert!(icount_smp_hangs("5.15.0-rc1", Accel::TcgIcount, 4));
        assert!(!icount_smp_hangs("6.1.158", Accel::TcgIcount, 1));
        assert!(!icount_smp_hangs("6.1.158", Accel::Tcg, 2));
        assert!(!icount_smp_hangs("6.1.158", Accel::Auto, 2));
        assert!(!icount_smp_hangs("6.12.117", Accel::TcgIcount, 8));
        assert!(!icount_smp_hangs("6.5", Accel::TcgIcount, 2));
        // A release that does not parse is not refused on a guess.
        assert!(!icount_smp_hangs("", Accel::TcgIcount, 2));
    }
}
