//! Machines as campaign levels (`matrix.machine`): guests that schedlab
//! boots itself under QEMU with any kernel and CPU topology, their runs
//! carried out by schedlab inside them and stored on the host like any
//! other.
//!
//! `image`: the guest's initramfs; `qemu`: QEMU's command line and
//! accelerator; `protocol`: what host and guest say over the channel;
//! `guest`: one booted guest seen from the host; `executor`: the guests of
//! a campaign as the executor of its guest runs; `agent`: schedlab inside
//! the guest.

pub mod agent;
pub mod executor;
pub mod guest;
pub mod image;
pub mod protocol;
pub mod qemu;

use anyhow::{Result, bail};
use std::path::PathBuf;

pub use executor::GuestExecutor;

/// A kernel ready to boot, and where it came from.
pub struct KernelRef {
    pub bzimage: PathBuf,
    pub source: String,
}

/// The kernel of machine level `level`: `kernel` is a recipe's name or the
/// path of a bzImage.
pub fn kernel_for(level: &str, kernel: &str, _quiet: bool) -> Result<KernelRef> {
    let key = format!("machines.{level}.kernel");
    if kernel.contains('/') {
        let p = PathBuf::from(kernel);
        if !p.is_file() {
            bail!("{key}: {kernel} does not exist");
        }
        return Ok(KernelRef {
            source: format!("bzImage {kernel}"),
            bzimage: p,
        });
    }
    let cache = std::env::var_os("SCHEDLAB_KERNEL_CACHE").map(PathBuf::from);
    match cache
        .map(|c| c.join(kernel).join("bzImage"))
        .filter(|p| p.is_file())
    {
        Some(p) => Ok(KernelRef {
            source: format!("recipe {kernel} ({})", p.display()),
            bzimage: p,
        }),
        None => bail!("{key}: no built kernel \"{kernel}\""),
    }
}
