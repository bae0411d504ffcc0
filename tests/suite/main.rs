//! The end-to-end tests that measure nothing, in one test binary: what the
//! command line says about itself, `compare`, `export`, `report` and the
//! trace exports on synthetic databases, merges of many hosts, the model
//! (`simulate`), the guest kernel recipes, and `policy` round trips on
//! real processes. Each measuring test file stays a binary of its own, so
//! that cargo runs it alone; these share one link (each test binary
//! links the whole library: about 3.6 CPU-seconds apiece in CI).
//!
//! Run one file's tests with its module's name as a filter, e.g.
//! `cargo test --release --test suite report::`.

#[path = "../common/mod.rs"]
mod common;

mod cli_docs;
mod compare;
mod export;
mod fleet;
mod kernel_recipes;
mod policyctl;
mod report;
mod report_chromium;
mod simulate;
mod trace_caveats;
mod trace_export;
