//! The only home of `unsafe` and raw libc calls: scheduling system calls,
//! process reaping and signals, clocks and absolute sleeps, procfs
//! parsing, the machine's environment, and what else the machine is doing.

pub mod activity;
pub mod child;
pub mod clock;
pub mod envinfo;
pub mod events;
pub mod fds;
pub mod fsinfo;
pub mod knobs;
pub mod limits;
pub mod pmqos;
pub mod probe;
pub mod proc;
pub mod procfs;
pub mod procstat;
pub mod sched;
pub mod tracefs;
pub mod uring;
