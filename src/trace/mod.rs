//! Kernel scheduling traces: capture of the kernel's own scheduling events
//! (sched_switch, sched_waking, sched_wakeup_new, sched_migrate_task,
//! sched_process_exit, sched_process_fork; sched_wakeup is decoded but no
//! longer recorded) for a run and the process trees it forks, and what is
//! derived from them.
//!
//! The contract between capture and everything downstream is [`Capture`]:
//! capture produces it (events in time order, clock CLOCK_MONOTONIC), the
//! store, the derived figures, the report and the exporters consume it.

pub mod analysed;
pub mod blob;
pub mod chrome_json;
pub mod derive;
pub mod derived_blob;
pub mod event;
pub mod export;
mod packed;
pub mod perfetto;
pub mod placement;
pub mod prediction;
pub mod summary;
pub mod verdict;

pub use analysed::Analysed;
pub use event::{Capture, Event, EventKind, SwitchEnd, Task};
pub use prediction::Prediction;
pub mod capture;
pub mod format;
pub mod ring;
