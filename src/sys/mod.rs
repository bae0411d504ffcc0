//! The only home of `unsafe` and raw libc calls: scheduling system calls,
//! process reaping and signals, procfs parsing, and the machine's environment.

pub mod envinfo;
pub mod fsinfo;
pub mod knobs;
pub mod limits;
pub mod probe;
pub mod proc;
pub mod procfs;
pub mod sched;
