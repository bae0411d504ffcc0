//! schedlab: a Linux CPU-scheduler laboratory.
//!
//! Data flows one way: spec → plan → launch → collect → store → analyse → report.
//!
//! `sys` is the only module allowed `unsafe` (every other one forbids it),
//! and each `unsafe` block there says why it is sound (`// SAFETY:`).

#![warn(clippy::undocumented_unsafe_blocks)]

/// The repository's root (this library's package is `lib/` in it, its
/// source `src/`): where the unit tests' fixtures and `bench replay`'s C
/// project are.
pub const REPO_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

#[macro_use]
#[forbid(unsafe_code)]
pub mod out;

#[forbid(unsafe_code)]
pub mod bench;
#[forbid(unsafe_code)]
pub mod campaign;
#[forbid(unsafe_code)]
pub mod cli;
#[forbid(unsafe_code)]
pub mod compare;
#[forbid(unsafe_code)]
pub mod export;
#[forbid(unsafe_code)]
pub mod fields;
#[forbid(unsafe_code)]
pub mod launch;
#[forbid(unsafe_code)]
pub mod locks;
#[forbid(unsafe_code)]
pub mod machine;
#[forbid(unsafe_code)]
pub mod merge;
#[forbid(unsafe_code)]
pub mod output;
#[forbid(unsafe_code)]
pub mod plan;
#[forbid(unsafe_code)]
pub mod policy;
#[forbid(unsafe_code)]
pub mod policyctl;
#[forbid(unsafe_code)]
pub mod progress;
#[forbid(unsafe_code)]
pub mod record;
#[forbid(unsafe_code)]
pub mod report;
#[forbid(unsafe_code)]
pub mod rng;
#[forbid(unsafe_code)]
pub mod sim;
#[forbid(unsafe_code)]
pub mod spec;
#[forbid(unsafe_code)]
pub mod stats;
#[forbid(unsafe_code)]
pub mod store;
#[forbid(unsafe_code)]
pub mod synth;
pub mod sys;
#[doc(hidden)]
#[forbid(unsafe_code)]
pub mod testing;
#[forbid(unsafe_code)]
pub mod trace;
#[forbid(unsafe_code)]
pub mod units;
#[forbid(unsafe_code)]
pub mod worker;
#[forbid(unsafe_code)]
pub mod workload;
#[forbid(unsafe_code)]
pub mod wrr;
