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
    /// The first of the runs left, for the tracing instance made ahead.
    first: Option<Run>,
    /// Runs left to carry out: after the last, the tracing instance goes.
    left: usize,
}

impl MachineExecutor {
    /// Take the guards the runs left need (an RT sweep, tracing), waiting
    /// while another schedlab holds one, and make the launcher: `Err(sig)`
    /// when a stop signal came while waiting.
    pub fn begin(
        spec: &Spec,
        env: &envinfo::EnvSnapshot,
        signals: libc::sigset_t,
        pending: &[&Run],
        opts: &Options,
        what: &str,
    ) -> Result<Result<MachineExecutor, i32>> {
        // Kernel settings the campaign sweeps are journaled before the
        // first change and put back when the guard is restored or dropped
        // (also on error and Ctrl-C, since the signals are taken
        // synchronously here).
        let rt_guard = match pending.iter().any(|r| r.rt_runtime_us.is_some()) {
            true => {
                knobs::ensure_signals_blocked()?;
                match acquire_waiting(&signals, opts.quiet, knobs::RtGuard::acquire)
                    .context("cannot change sched_rt_runtime_us")?
                {
                    Ok(g) => Some(g),
                    Err(sig) => return Ok(Err(sig)),
                }
            }
            false => None,
        };
        // Tracing: schedlab's own tracefs instance (and mount when needed),
        // journaled like the RT settings and removed however the campaign
        // ends.
        let trace_guard = match spec.trace && !pending.is_empty() {
            true => {
                knobs::ensure_signals_blocked()?;
                let g = match acquire_waiting(&signals, opts.quiet, knobs::TraceGuard::acquire)
                    .context("cannot trace (trace = true, --trace)")?
                {
                    Ok(g) => g,
                    Err(sig) => return Ok(Err(sig)),
                };
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
        Ok(Ok(MachineExecutor {
            launcher,
            rt_guard,
            trace_guard,
            signals,
            what: what.to_string(),
            quiet: opts.quiet,
            allow_concurrent: opts.allow_concurrent,
            cooldown: Duration::from_nanos(spec.cooldown_ns),
            first: pending.first().map(|r| (*r).clone()),
            left: pending.len(),
        }))
    }

    /// Starts what the first run needs and can be made before it, on a
    /// thread while the caller goes on (the campaign calibrates): its
    /// tracing instance, whose set-up waits on RCU grace periods.
    pub fn make_ready(&self, env: &envinfo::EnvSnapshot) {
        if let Some(run) = &self.first {
            self.launcher.trace_ahead(run, env);
        }
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
        let outcome = self.launcher.launch(run);
        self.left = self.left.saturating_sub(1);
        if self.left == 0 {
            // Removed while the campaign stores this last run.
            self.launcher.trace_done();
        }
        outcome
    }

    fn between_runs(&mut self) -> Option<i32> {
        match self.cooldown.is_zero() {
            true => None,
            false => proc::pending_stop_signal_within(&self.signals, self.cooldown),
        }
    }
}

/// A guard from `acquire`, waiting while another live schedlab holds what
/// it guards (saying so once, unless `quiet`) and taking Ctrl-C meanwhile:
/// `Err(sig)` when a stop signal came first. Two campaigns that trace or
/// sweep RT bandwidth take turns, as they take turns measuring.
fn acquire_waiting<G>(
    signals: &libc::sigset_t,
    quiet: bool,
    acquire: impl Fn() -> Result<G>,
) -> Result<Result<G, i32>> {
    let mut told = false;
    loop {
        match acquire() {
            Ok(g) => return Ok(Ok(g)),
            Err(e) if knobs::HeldByAnother::is(&e) => {
                if !told && !quiet {
                    // "…; one schedlab traces at a time: wait for it to
                    // finish" — which this does.
                    note!("{} (waiting)", crate::out::esc_lines(&format!("{e:#}")));
                }
                told = true;
                let poll = Duration::from_millis(100);
                if let Some(sig) = proc::pending_stop_signal_within(signals, poll) {
                    return Ok(Err(sig));
                }
            }
            Err(e) => return Err(e),
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// The stop signals, none of which comes during the test.
    fn no_signals() -> libc::sigset_t {
        proc::control_signals()
    }

    #[test]
    fn a_guard_another_schedlab_holds_is_waited_for_and_other_errors_are_not() {
        let calls = Cell::new(0);
        let got = acquire_waiting(&no_signals(), true, || {
            calls.set(calls.get() + 1);
            match calls.get() {
                1 | 2 => Err(knobs::HeldByAnother("schedlab pid 1 is tracing".into()).into()),
                n => Ok(n),
            }
        });
        assert_eq!(got.unwrap().unwrap(), 3);
        let calls = Cell::new(0);
        let got: Result<Result<(), i32>> = acquire_waiting(&no_signals(), true, || {
            calls.set(calls.get() + 1);
            anyhow::bail!("needs root")
        });
        assert!(format!("{:#}", got.unwrap_err()).contains("needs root"));
        assert_eq!(calls.get(), 1);
    }
}
