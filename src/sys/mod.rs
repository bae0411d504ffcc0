//! The only home of `unsafe` and raw libc calls: scheduling system calls,
//! process reaping and signals, clocks and absolute sleeps, procfs
//! parsing, the machine's environment, per-CPU noise sources, a cgroup per worker, what else the
//! machine is doing, and sched_ext (its facts, and loading schedlab's BPF
//! scheduler), users by name and switching to one, a worker's `exec` of
//! another program, and opening a file beneath a directory without leaving it.

pub mod activity;
pub mod beneath;
pub mod cgroup;
pub mod child;
pub mod clock;
pub mod envinfo;
pub mod events;
pub mod exec;
pub mod fds;
pub mod fsinfo;
pub mod futex;
pub mod hostid;
pub mod knobs;
pub mod kvm;
pub mod limits;
pub mod noise;
pub mod pmqos;
pub mod probe;
pub mod proc;
pub mod procfs;
pub mod procstat;
pub mod sched;
pub mod scx;
pub mod topology;
pub mod tracefs;
pub mod uring;
pub mod user;
pub mod wholefile;
