//! The `command` workload: any program as a workload. Each worker waits at
//! the barrier with the run's policy, priority, affinity, DEADLINE
//! parameters, WRR weight or sched_ext membership applied, then `exec`s the
//! program, which is the measured process (its children inherit the
//! policy, as under `chrt`). Figures come from the program's own output.
//!
//! This module owns what is pure or worker-side; starting, capturing and
//! stopping the program's process tree is the launcher's:
//!
//! - `params`: the spec's keys, checked and named ([`CommandParams`]), and
//!   the PATH look-up of the program;
//! - `figures`: figures taken from captured output and files by regular
//!   expression or JSON pointer;
//! - `parsers/`: one file per standard benchmark (schbench, cyclictest,
//!   hackbench, perf bench sched, fio, stress-ng);
//! - `setup`: the `setup` command, run by the parent before the barrier;
//! - `exec`: the worker becoming the program;
//! - `kind`: the [`crate::workload::Kind`] implementation and registration.

pub mod exec;
pub mod figures;
pub mod kind;
pub mod params;
pub mod parsers;
pub mod setup;

pub use kind::ENTRY;
pub use params::CommandParams;
