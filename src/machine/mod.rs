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
