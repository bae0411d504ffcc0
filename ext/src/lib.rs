//! schedlab's WRR as a sched_ext BPF scheduler: the BPF program
//! (`src/bpf/wrr.bpf.c`, compiled by build.rs with clang 16+) and its
//! loader (libbpf-rs). The schedlab binary links this crate with its `ext`
//! feature and calls [`register`] first; the library reaches the loader
//! only through `schedlab::wrr::ext_hook`, so it is compiled once for
//! both builds.
//!
//! `sys` holds the only `unsafe` code (the skeleton libbpf-cargo
//! generates).

#![warn(clippy::undocumented_unsafe_blocks)]

pub mod sys;

use schedlab::wrr::ext_hook::{self, LoadedScheduler, Loader};
use schedlab::wrr::ext_records::Worker;

/// Register the loader with the library: from then on `schedlab env`
/// shows ext as built in and `wrr.mechanism = "ext"` loads it.
pub fn register() {
    ext_hook::register(Loader {
        load,
        built_with: concat!("built with ", env!("SCHEDLAB_BPF_CLANG_USED")),
    });
}

fn load(workers: Vec<Worker>) -> anyhow::Result<Box<dyn LoadedScheduler>> {
    Ok(Box::new(sys::scx_wrr::WrrExt::load(workers)?))
}
