//! The third phase of a run: the moment of release. schedlab raises itself
//! above RT workers (so it keeps control while it sleeps), lets an RT hog
//! reach its steady state, takes the counters that are measured from
//! release (hogs' schedstat, other programs' activity, the CPU of the
//! command workers' trees), starts the trace,
//! writes the release time and opens the barrier. [`Released`] owns the
//! running processes and the parent's raised priority (restored when
//! dropped).

use std::collections::HashMap;
use std::os::unix::fs::FileExt;
use std::time::Duration;

use anyhow::Context;

use crate::sys::{proc, procfs};

use super::guard::ParentPriority;
use super::interference;
use super::members::{Cast, Role};
use super::spawned::Spawned;
use super::{Early, Launcher};

/// A run whose processes were released.
pub struct Released {
    pub spawned: Spawned,
    /// What schedlab runs as while it watches (restored on drop).
    pub raised: ParentPriority,
    /// (member index, pid) of the CPU hogs.
    pub hogs: Vec<(usize, i32)>,
    /// The hogs' schedstat at release.
    pub hog_start: HashMap<i32, procfs::SchedStat>,
    /// Other programs' activity just before release.
    pub before: interference::AtRelease,
    /// Monotonic ns of release.
    pub release_ns: u64,
}

impl Released {
    pub fn release(l: &Launcher, cast: &Cast, mut spawned: Spawned) -> Result<Released, Early> {
        let raised = match cast.any_beyond_fair() {
            true => ParentPriority::raise(cast.any_deadline()),
            false => ParentPriority::unchanged(),
        };
        let hogs: Vec<(usize, i32)> = cast
            .members
            .iter()
            .zip(&spawned.workers.pids)
            .enumerate()
            .filter(|(_, (m, _))| m.role == Role::Hog)
            .map(|(i, (_, &pid))| (i, pid))
            .collect();
        // The hog has been spinning since it was spawned; give it one RT
        // period to reach its steady state (a fresh hog starts with a full
        // runtime budget, which would inflate its share of a short window).
        if l.hog.as_ref().is_some_and(|h| h.is_rt()) {
            let warm_up = Duration::from_micros(l.rt_period_us.max(1) as u64);
            if let Some(sig) = proc::pending_stop_signal_within(&l.signals, warm_up) {
                return Err(Early::Interrupted(sig));
            }
        }
        let hog_start: HashMap<i32, procfs::SchedStat> = hogs
            .iter()
            .filter_map(|&(_, pid)| procfs::read_schedstat(pid).ok().map(|s| (pid, s)))
            .collect();
        // Other programs' runnable tasks and the CPUs' counters, last thing
        // before release (the workers are blocked on the barrier).
        let before = interference::at_release(&spawned.workers.pids, &cast.run_cpus);
        if let Some(r) = spawned.prepared.recorder.as_mut() {
            r.start()
                .map_err(|e| Early::failed(format!("tracing could not start: {e:#}")))?;
        }
        // Programs' trees are measured from release, as their wall time.
        for tree in spawned.trees.iter_mut().flatten() {
            tree.mark_release();
        }
        // Fixed durations run from release: workers read it after the barrier.
        let release_ns = proc::monotonic_ns();
        let release = spawned.release.take().map(std::fs::File::from);
        if let Some(f) = release {
            f.write_all_at(&release_ns.to_le_bytes(), 0)
                .context("writing the release time")
                .map_err(Early::Fatal)?;
        }
        // EOF on every worker's barrier: go.
        drop(spawned.barrier_w.take());
        Ok(Released {
            spawned,
            raised,
            hogs,
            hog_start,
            before,
            release_ns,
        })
    }
}
