//! The real machine as a campaign's [`Executor`]: each run is carried out
//! by the [`Launcher`] on real processes while schedlab holds the
//! machine-wide measurement lock, with the run's `sched_rt_runtime_us` in
//! force and a cooldown between runs. What the campaign changes on the
//! machine (the RT setting, schedlab's tracing instance) is journaled
//! before it changes and put back by [`MachineExecutor::finish`], or by
//! the guards' Drop on error and Ctrl-C.

use anyhow::{Context, Result};
use std::path::Path;
use std::time::Duration;

use crate::launch::{Launcher, Outcome, TraceTarget};
use crate::locks;
use crate::plan::Run;
use crate::spec::Spec;
use crate::sys::{envinfo, knobs, proc};

use super::Options;
use super::execute::Executor;

/// This machine's processes, under the campaign's guards.
pub struct MachineExecutor {
    launcher: Launcher,
    rt_guard: Option<knobs::RtGuard>,
    trace_guard: Option<knobs::TraceGuard>,
    signals: libc::sigset_t,
    /// Who holds the measurement lock, for the message of a waiting runner.
    what: String,
    quiet: bool,
    allow_concurrent: bool,
    cooldown: Duration,
}

impl MachineExecutor {
    /// Take the guards the runs left need (an RT sweep, tracing) and make
    /// the launcher.
    pub fn begin(
        spec: &Spec,
        env: &envinfo::EnvSnapshot,
        signals: libc::sigset_t,
        pending: &[&Run],
        opts: &Options,
        what: &str,
    ) -> Result<MachineExecutor> {
        // Kernel settings the campaign sweeps are journaled before the
        // first change and put back when the guard is restored or dropped
        // (also on error and Ctrl-C, since the signals are taken
        // synchronously here).
        let rt_guard = match pending.iter().any(|r| r.rt_runtime_us.is_some()) {
            true => {
                knobs::ensure_signals_blocked()?;
                Some(knobs::RtGuard::acquire().context("cannot change sched_rt_runtime_us")?)
            }
            false => None,
        };
        // Tracing: schedlab's own tracefs instance (and mount when needed),
        // journaled like the RT settings and removed however the campaign
        // ends.
        let trace_guard = match spec.trace && !pending.is_empty() {
            true => {
                knobs::ensure_signals_blocked()?;
                let g =
                    knobs::TraceGuard::acquire().context("cannot trace (trace = true, --trace)")?;
                if let (Some(w), false) = (g.recovered(), opts.quiet) {
                    note!("warning: {}", crate::out::esc_lines(w));
                }
                Some(g)
            }
            false => None,
        };
        let mut launcher = Launcher::new(spec, env, signals);
        launcher.quiet = opts.quiet;
        if let Some(g) = &trace_guard {
            launcher.trace_into(TraceTarget {
                root: g.root().to_path_buf(),
                name: g.instance_name().to_string(),
            });
        }
        Ok(MachineExecutor {
            launcher,
            rt_guard,
            trace_guard,
            signals,
            what: what.to_string(),
            quiet: opts.quiet,
            allow_concurrent: opts.allow_concurrent,
            cooldown: Duration::from_nanos(spec.cooldown_ns),
        })
    }

    /// Put back what the campaign changed on the machine.
    pub fn finish(self) -> Result<()> {
        // The kept tracing instance goes with the launcher, before the
        // guard removes whatever is left under its name.
        drop(self.launcher);
        if let Some(guard) = self.trace_guard {
            guard
                .restore()
                .context("removing schedlab's tracing instance")?;
        }
        if let Some(guard) = self.rt_guard {
            guard.restore().context("restoring sched_rt_runtime_us")?;
        }
        Ok(())
    }
}

impl Executor for MachineExecutor {
    fn execute(&mut self, run: &Run) -> Result<Outcome> {
        // The measured part of a run (with its RT setting) holds the
        // machine-wide lock: two measurements at once disturb each other.
        let _measuring = match self.allow_concurrent {
            true => None,
            false => match wait_for_machine(&self.signals, &self.what, self.quiet)? {
                Ok(held) => Some(held),
                Err(sig) => return Ok(Outcome::Interrupted(sig)),
            },
        };
        if let (Some(guard), Some(v)) = (self.rt_guard.as_mut(), run.rt_runtime_us) {
            guard.set_runtime(v).with_context(|| {
                format!("setting sched_rt_runtime_us = {v} for {}", run.label())
            })?;
        }
        self.launcher.launch(run)
    }

    fn between_runs(&mut self) -> Option<i32> {
        match self.cooldown.is_zero() {
            true => None,
            false => proc::pending_stop_signal_within(&self.signals, self.cooldown),
        }
    }
}

/// Take the machine-wide measurement lock, waiting while another schedlab
/// holds it (saying once who does) and taking Ctrl-C meanwhile: `Err(sig)`
/// when a stop signal came first.
pub fn wait_for_machine(
    signals: &libc::sigset_t,
    what: &str,
    quiet: bool,
) -> Result<Result<locks::Held, i32>> {
    let path = locks::machine_lock_path();
    let note = locks::holder_note(what);
    let mut told = String::new();
    loop {
        if let Some(held) = locks::try_take(&path, &note)
            .with_context(|| format!("cannot take the measurement lock {}", path.display()))?
        {
            return Ok(Ok(held));
        }
        let holder = locks::holder(&path);
        if !quiet && holder != told {
            crate::note!(
                "waiting for the machine: {holder} is measuring (two measurements at once disturb each \
                 other; --allow-concurrent measures anyway)"
            );
            told = holder;
        }
        if let Some(sig) = proc::pending_stop_signal_within(signals, Duration::from_millis(100)) {
            return Ok(Err(sig));
        }
    }
}

/// The machine's work rates, calibrated in a directory of their own while
/// holding the measurement lock (`who` is named to a waiting schedlab).
pub fn calibrate_locked(who: &str) -> Result<crate::workload::Rates> {
    let dir = tempfile::tempdir().context("creating a calibration directory")?;
    // The calibration measures the machine: not while a run measures.
    let _measuring = locks::wait_quietly_for_machine(who)?;
    crate::workload::calibrate(dir.path())
}

/// The machine's work rates for estimates, or rough defaults when the
/// calibration cannot run.
pub fn calibrate_quietly(workdir: &Path) -> crate::workload::Rates {
    let dir = crate::launch::rundir::OwnedDir::create_in(workdir).ok();
    dir.as_ref()
        .and_then(|d| crate::workload::calibrate(d.path()).ok())
        .unwrap_or(crate::workload::Rates {
            pi_iter_per_s: 5e8,
            hash_per_s: 2e5,
            flops_per_s: 1e9,
            copy_bytes_per_s: 5e8,
            wake_round_trip_s: 10e-6,
        })
}
