//! The seam between schedlab and the loader of its sched_ext WRR scheduler.
//!
//! The loader (libbpf-rs and the BPF program `ext/src/bpf/wrr.bpf.c`) lives
//! in the `schedlab-ext` crate, which the binary links with the `ext`
//! feature and registers here before anything runs. The library itself is
//! the same with or without the feature, so building the feature compiles
//! only that crate and the binary again. Without a registered loader,
//! `schedlab env` and every ext condition say that the feature is absent.

use std::sync::OnceLock;

use super::ext_records::{Unloaded, Worker};

/// The scheduler, loaded and attached: SCHED_EXT tasks are scheduled by it
/// until [`LoadedScheduler::unload`].
pub trait LoadedScheduler: Send {
    /// Detach the scheduler (the kernel unloads it) and return what it
    /// reported. Idempotent: a second call returns nothing.
    fn unload(&mut self) -> Unloaded;
}

/// Loads the scheduler with every worker's slice and CPU, and attaches it.
pub type LoadFn = fn(Vec<Worker>) -> anyhow::Result<Box<dyn LoadedScheduler>>;

/// A registered loader and how its BPF program was built ("built with
/// clang-19").
#[derive(Clone, Copy)]
pub struct Loader {
    pub load: LoadFn,
    pub built_with: &'static str,
}

static LOADER: OnceLock<Loader> = OnceLock::new();

/// Register the loader (the binary does, once, with the `ext` feature); a
/// second registration is ignored.
pub fn register(loader: Loader) {
    let _ = LOADER.set(loader);
}

/// Why there is no loader: what `schedlab env`, `plan` and a run say.
pub const NOT_BUILT: &str = "this schedlab was built without the `ext` feature (cargo build \
     --release --features ext; it needs clang 16+, libelf-dev, zlib1g-dev and pkg-config)";

/// The registered loader, if this binary has one.
pub fn loader() -> Option<Loader> {
    LOADER.get().copied()
}
