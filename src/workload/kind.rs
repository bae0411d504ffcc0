//! What every workload kind provides: the [`Kind`] trait each parameter
//! type implements (stop rule, scaling, resources, preparation, wiring of
//! cooperating processes, the worker's loop, cost estimate, the model's
//! view of it), and the
//! [`Entry`] that registers a kind's spec parser under its name.
//!
//! A new workload is one file implementing `Kind` (with its `ENTRY`), its
//! `pub mod` and one line in the list of kinds in `workload/mod.rs`, which
//! makes its [`super::Workload`] variant and registers it.

use std::path::Path;
use std::time::Instant;

use super::keys::{KeyError, Keys};
use super::modelled::ModelTask;
use super::wiring::Wiring;
use super::{Rates, Stop, WORKER_BASE_BYTES, WorkContext, WorkOutput, Workload};

/// One workload kind's behaviour, implemented by its parameter type.
pub trait Kind {
    /// The kind's name in specs and the store ("pi", "periodic", …).
    fn name(&self) -> &'static str;

    /// The unit of `WorkOutput::work` ("iterations", "activations", …).
    fn work_unit(&self) -> &'static str;

    /// How the workload stops.
    fn stop(&self) -> Stop;

    /// Replace how the workload stops.
    fn set_stop(&mut self, stop: Stop);

    /// The workload with its work per process shrunk by factor `f`
    /// (see [`Workload::scaled`]). Pure.
    fn scaled(&self, f: f64) -> Workload;

    /// Whether it touches files: the parent then creates a run directory.
    fn needs_dir(&self) -> bool {
        false
    }

    /// Bytes a run of `processes` writes to its run directory at most.
    fn disk_bytes(&self, _processes: u32) -> u64 {
        0
    }

    /// The spec key that sets `disk_bytes`.
    fn disk_key(&self) -> &'static str {
        "bytes"
    }

    /// Memory of one worker's buffers beyond the process itself.
    fn buffer_bytes(&self) -> u64 {
        0
    }

    /// Parent side, before any worker is spawned: create the run's input
    /// files in `dir`, giving up when `until` passes.
    fn prepare(&self, _dir: &Path, _until: Option<Instant>) -> anyhow::Result<()> {
        Ok(())
    }

    /// Processes that work together (a pair, a group): a run's process
    /// count must be a multiple of it.
    fn group_size(&self) -> u32 {
        1
    }

    /// Parent side: the channels (pipes, sockets, event counters) between
    /// the run's `processes` workers, created before they are spawned.
    fn wire(&self, _processes: usize) -> anyhow::Result<Wiring> {
        Ok(Wiring::default())
    }

    /// The workload as a worker's command line carries it, when that is
    /// less than the whole (a replay's tasks reach it through its wiring).
    fn lean(&self) -> Option<Workload> {
        None
    }

    /// The name of the latency histogram that is this workload's primary
    /// latency (exported as `lat_p50_us` …), if it measures one.
    fn primary_latency(&self) -> Option<&'static str> {
        None
    }

    /// Worker side: run the workload to completion and report.
    fn run(&self, ctx: &WorkContext) -> anyhow::Result<WorkOutput>;

    /// Rough seconds of one CPU for one process, given measured rates.
    fn estimate_cpu_s(&self, rates: &Rates) -> f64;

    /// The least wall-clock seconds one process takes even with a CPU of
    /// its own (the sleeps of a periodic task); 0 for work that never
    /// waits on a clock.
    fn min_wall_s(&self) -> f64 {
        0.0
    }

    /// Whether the workload runs on the CPU until done (so a slice longer
    /// than its work means it finishes within its first turn), as opposed
    /// to waking, running briefly and sleeping again.
    fn cpu_bound(&self) -> bool {
        true
    }

    /// Memory one worker uses at most.
    fn memory_bytes(&self) -> u64 {
        WORKER_BASE_BYTES.saturating_add(self.buffer_bytes())
    }

    /// What `plan` checks on this machine beyond the spec itself (a
    /// command workload's program in PATH): what is lacking, if anything.
    fn check_machine(&self) -> Result<(), Lacking> {
        Ok(())
    }

    /// How the scheduler model represents one worker of it; by default it
    /// does not (the model skips the run, saying so).
    fn model(&self) -> ModelTask<'_> {
        super::modelled::unmodelled(self.name())
    }
}

/// What a machine lacks to run a workload: the key (under
/// `workloads.NAME`) that asks for it, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lacking {
    pub key: &'static str,
    pub message: String,
}

/// A kind's registration: its name and the parser of its spec table.
pub struct Entry {
    pub name: &'static str,
    /// Parses a `[workloads.NAME]` table resolved to this kind.
    pub parse: fn(&Keys) -> Result<Workload, KeyError>,
}

/// Seconds a fixed amount of work or a fixed duration costs, given the
/// seconds one unit of work costs.
pub fn stop_cost_s(stop: Stop, per_unit_s: f64) -> f64 {
    match stop {
        Stop::Work(n) => n as f64 * per_unit_s,
        Stop::DurationNs(ns) => ns as f64 / 1e9,
    }
}

/// `x·f` rounded, at least 1 (`as` saturates, so huge or NaN products are safe).
pub fn scale_amount(x: u64, f: f64) -> u64 {
    ((x as f64 * f).round() as u64).max(1)
}

/// A stop condition scaled by `f` (work and durations alike).
pub fn scale_stop(stop: Stop, f: f64) -> Stop {
    match stop {
        Stop::Work(n) => Stop::Work(scale_amount(n, f)),
        Stop::DurationNs(ns) => Stop::DurationNs(scale_amount(ns, f)),
    }
}
