//! Weighted round robin (the kernel schedulers of seeds 002 and 003) on a
//! stock kernel: a pure policy ([`policy`]) and a user-space dispatcher
//! that applies it to real worker processes from user space ([`dispatch`])
//! or in the kernel as a sched_ext scheduler ([`ext`]), and measures how
//! exactly the weights are delivered. A `command` worker is its whole
//! process tree: the user-space dispatcher acts on every task of the
//! worker's cgroup ([`tree`]).

pub mod dispatch;
pub mod ext;
pub mod ext_hook;
pub mod ext_records;
pub mod policy;
pub mod start;
pub mod tree;

pub use dispatch::{
    DEFAULT_BASE_PRIO, DispatchReport, Dispatcher, Mechanism, SliceEnd, SliceRecord,
    available_mechanism, fifo_check,
};
pub use policy::{SliceRule, Task, WrrError, WrrPolicy, ideal_shares};
pub use start::{StartError, WrrRun};
