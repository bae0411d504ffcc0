//! schedlab: a Linux CPU-scheduler laboratory.
//!
//! Data flows one way: spec → plan → launch → collect → store → analyse → report.

#[macro_use]
pub mod out;

pub mod bench;
pub mod campaign;
pub mod cli;
pub mod export;
pub mod launch;
pub mod locks;
pub mod plan;
pub mod policy;
pub mod policyctl;
pub mod progress;
pub mod record;
pub mod report;
pub mod rng;
pub mod spec;
pub mod stats;
pub mod store;
pub mod sys;
#[doc(hidden)]
pub mod testing;
pub mod worker;
pub mod workload;
pub mod wrr;
