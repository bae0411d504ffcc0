//! Running a campaign: find or create it in the store, work out which runs
//! are left, carry them out one by one in campaign order through an
//! [`Executor`] (this machine's processes, or the model), store each as it
//! finishes, show progress, and stop cleanly on Ctrl-C.
//!
//! `check`: the spec against this machine; `preview`: what `plan` shows;
//! `precision`: where the conditions of a `repetitions = "auto"` campaign
//! stand;
//! `execute`: the seam and the campaign loop; `machine`: the real machine's
//! executor and its guards.

mod check;
mod execute;
mod levels;
mod machine;
mod model;
pub mod precision;
mod preview;

use anyhow::{Context, Result};
use std::path::PathBuf;

use crate::plan::{self, Plan, Run};
use crate::progress::Progress;
use crate::spec::Spec;
use crate::store::{Campaign, Store};
use crate::sys::{envinfo, proc};

pub use check::{check_machine, check_model, run_need};
pub use execute::{Executor, Opened};
pub use machine::{MachineExecutor, wait_for_machine};
pub use model::ModelExecutor;
pub use preview::{AutoEstimate, Preview, preview};

pub struct Options {
    pub db: PathBuf,
    pub quiet: bool,
    /// Run again the runs stored as failed, timed out or skipped.
    pub retry_failed: bool,
    /// Allow what is refused by default because it can freeze the machine:
    /// RT work with RT throttling disabled, an RT hog on every CPU.
    pub force: bool,
    /// Measure even while another schedlab measures on this machine.
    pub allow_concurrent: bool,
}

/// How a campaign invocation ended.
#[derive(Debug)]
pub struct Summary {
    pub campaign: Campaign,
    pub ran: usize,
    pub already_done: usize,
    pub by_status: [usize; 4],
    /// Runs of `repetitions = "auto"` left out because their condition had
    /// reached its precision.
    pub not_needed: usize,
    /// The stop signal, when the user interrupted it.
    pub interrupted: Option<i32>,
}

/// Where a spec's runs make their directories.
pub fn workdir_of(spec: &Spec) -> PathBuf {
    spec.workdir.clone().unwrap_or_else(std::env::temp_dir)
}

/// Find the campaign of `spec` made on `host` or create it; returns it with
/// its runs in campaign order (`plan`, the spec's expansion, in the order
/// of the campaign's seed). A campaign of the same spec from another host
/// (merged into this database) is never resumed here.
pub fn open_campaign(
    store: &mut Store,
    host: &crate::store::Host,
    spec: &Spec,
    plan: Plan,
    spec_toml: &str,
    overrides: &[String],
) -> Result<(Campaign, Vec<Run>, bool)> {
    if let Some(c) = store.find_campaign(spec, host)? {
        if c.host_id.is_none() {
            store.claim_campaign(c.id, host)?;
        }
        let runs = plan.in_order(c.seed);
        return Ok((c, runs, false));
    }
    let seed = spec.seed.unwrap_or_else(crate::rng::fresh_seed);
    let runs = plan.in_order(seed);
    let c = store.create_campaign_on(host, spec, spec_toml, overrides, seed, runs.len())?;
    Ok((c, runs, true))
}

/// Run a campaign on this machine: expand the spec once, check that plan
/// against the machine, open the campaign with it, take the machine's
/// guards ([`MachineExecutor::begin`], waiting for another schedlab that
/// holds one), calibrate (holding the measurement lock, while the first
/// run's tracing instance is made on a thread), announce the runs left, and
/// carry them out.
pub fn run(
    spec: &Spec,
    origin: &str,
    spec_toml: &str,
    overrides: &[String],
    opts: &Options,
) -> Result<Summary> {
    let env = envinfo::capture();
    let what = format!(
        "schedlab run of \"{}\" into {}",
        spec.name,
        opts.db.display()
    );
    let mut opened = open_checked(spec, origin, spec_toml, overrides, opts, &env, &what)?;
    let workdir = workdir_of(spec);
    for d in crate::launch::rundir::remove_leftovers(&workdir) {
        if !opts.quiet {
            crate::note!(
                "removed {}, left by a schedlab that was killed",
                d.display()
            );
        }
    }
    // `cli` blocked these at start-up already (so that none is lost before
    // this point); block them here too for other callers.
    let signals = proc::control_signals();
    proc::block(&signals).context("blocking signals")?;
    let pending = opened.pending_runs();
    let (guest_runs, host_runs): (Vec<&Run>, Vec<&Run>) = pending
        .iter()
        .partition(|r| r.machine.as_ref().is_some_and(|m| m.guest.is_some()));
    let host = match MachineExecutor::begin(spec, &env, signals, &host_runs, opts, &what)? {
        Ok(host) => host,
        Err(sig) => {
            let mut summary = opened.summary();
            summary.interrupted = Some(sig);
            return Ok(summary);
        }
    };
    // The calibration measures the machine too: it waits its turn like a run.
    let rates = {
        let _measuring = match opts.allow_concurrent {
            true => None,
            false => match machine::wait_for_machine(&signals, &what, opts.quiet)? {
                Ok(held) => Some(held),
                Err(sig) => {
                    let mut summary = opened.summary();
                    summary.interrupted = Some(sig);
                    return Ok(summary);
                }
            },
        };
        host.make_ready(&env);
        machine::calibrate_quietly(&workdir)
    };
    let mut progress = announce(spec, &opened, &env, &rates, opts, true);
    if guest_runs.is_empty() {
        let mut exec = host;
        let summary = opened.execute(&mut exec, &mut progress, &signals)?;
        // Closed first: SQLite's last checkpoint overlaps the tracing
        // instance's removal, which waits on RCU grace periods.
        drop(opened);
        exec.finish()?;
        return Ok(summary);
    }
    let guests = crate::machine::GuestExecutor::begin(
        spec,
        &guest_runs,
        signals,
        opts.force,
        opts.quiet,
        opts.allow_concurrent,
        &what,
    )?;
    let mut exec = levels::Levels::new(host, guests);
    let summary = opened.execute(&mut exec, &mut progress, &signals)?;
    drop(opened);
    exec.finish()?;
    Ok(summary)
}

/// Expand the spec once, check that plan against the machine `env`
/// describes (the database is not touched when it is refused), and open
/// the campaign with it.
fn open_checked(
    spec: &Spec,
    origin: &str,
    spec_toml: &str,
    overrides: &[String],
    opts: &Options,
    env: &envinfo::EnvSnapshot,
    what: &str,
) -> Result<Opened> {
    let plan = Plan::of(spec);
    check_machine(spec, &plan, origin, env, opts.force)?;
    Opened::open(spec, plan, spec_toml, overrides, opts, env, what)
}

/// Run a campaign in the model of this machine instead of on it: the
/// model's parameters come from this machine's settings (CPUs, HZ, base
/// slice, RT bandwidth, RR time slice) and a calibration of its work rates
/// (which waits for the measurement lock); the runs are stored as a
/// campaign of the model (`kernel_release` "schedlab-model N", its own
/// host id), so report, export, merge and compare take it as they take a
/// measured one.
pub fn simulate(
    spec: &Spec,
    origin: &str,
    spec_toml: &str,
    overrides: &[String],
    opts: &Options,
) -> Result<Summary> {
    // Refused before the calibration's wait and work, as `run` refuses it.
    crate::output::check_database_arg("--db", &opts.db)?;
    let here = envinfo::capture();
    // The model is of this machine: a CPU it lacks is refused as `plan`
    // and `run` refuse it, not stored as skipped runs.
    check_model(spec, origin, &here)?;
    let rates = machine::calibrate_locked("schedlab simulate")?;
    let base_slice_ns = envinfo::fair_base_slice_ns(here.cpus_online).0;
    let machine = crate::sim::Machine::from_env(&here, base_slice_ns);
    let source = format!(
        "schedlab calibration on {} at {} (Unix ms)",
        here.hostname,
        crate::store::unix_ms()
    );
    let params = crate::sim::ModelParams::new(machine, rates, &source);
    let model_env = crate::sim::describe::env(&params.machine);
    let what = format!(
        "schedlab simulate of \"{}\" into {}",
        spec.name,
        opts.db.display()
    );
    let plan = Plan::of(spec);
    let mut opened = Opened::open(spec, plan, spec_toml, overrides, opts, &model_env, &what)?;
    let signals = proc::control_signals();
    proc::block(&signals).context("blocking signals")?;
    let mut progress = announce(spec, &opened, &model_env, &params.rates, opts, false);
    let mut exec = ModelExecutor {
        spec,
        params,
        signals,
    };
    opened.execute(&mut exec, &mut progress, &signals)
}

/// Say what the campaign holds and what is left, with warnings about the
/// runs left; the progress display of those runs. With `guests` (`run`,
/// not `simulate`) guest levels are estimated with their boots and
/// emulation's cost ([`crate::machine::estimate`]).
pub fn announce(
    spec: &Spec,
    opened: &Opened,
    env: &envinfo::EnvSnapshot,
    rates: &crate::workload::Rates,
    opts: &Options,
    guests: bool,
) -> Progress {
    let pending = opened.pending_runs();
    let period = env.sched_rt_period_us.unwrap_or(1_000_000);
    // Guests boot in `run` only; `simulate` models every level here.
    let guests = guests && spec.machines.iter().any(|m| m.guest.is_some());
    let measured = match guests {
        true => crate::machine::estimate::Measured::from_store(&opened.store, opened.campaign.id)
            .unwrap_or_default(),
        false => Default::default(),
    };
    let estimates = match guests {
        true => crate::machine::estimate::estimates(
            spec,
            &opened.runs,
            &pending,
            env.cpus_allowed.len(),
            rates,
            period,
            &measured,
        ),
        false => plan::estimates(spec, &pending, env.cpus_allowed.len(), rates, period),
    };
    if !opts.quiet {
        note!(
            "{} campaign {} \"{}\" in {} (seed {}, scale {}): {} runs{}, {} stored, {} to run, about {}",
            if opened.created { "new" } else { "resuming" },
            opened.campaign.id,
            crate::out::esc(&opened.campaign.name),
            crate::out::path(&opts.db),
            opened.campaign.seed,
            spec.scale,
            opened.runs.len(),
            match spec.auto_repetitions {
                Some(a) => format!(
                    " at most (repetitions = \"auto\": rounds until each condition's 95 % interval is within ±{} %, \
                     {} to {} runs each)",
                    a.target_ci_pct, a.min_repetitions, spec.repetitions
                ),
                None => String::new(),
            },
            opened.runs.len() - pending.len(),
            pending.len(),
            crate::units::human_duration(estimates.iter().sum())
        );
        warn_rt_everywhere(spec, env.cpus_allowed.len());
        for w in plan::short_work_warnings(&pending, rates, slices_of(env)) {
            crate::note!("warning: {}", crate::out::esc(&w));
        }
    }
    Progress::new(&estimates, opts.quiet)
}

/// The slices of this machine that decide whether policies can differ.
pub fn slices_of(env: &envinfo::EnvSnapshot) -> plan::Slices {
    plan::Slices {
        rr_ns: env
            .sched_rr_timeslice_ms
            .filter(|&ms| ms > 0)
            .map(|ms| ms as u64 * 1_000_000),
        fair_ns: envinfo::fair_base_slice_ns(env.cpus_online).0,
    }
}

/// Warn when RT workers will occupy every CPU: the machine then lives on the
/// 5% that RT throttling leaves for everything else.
fn warn_rt_everywhere(spec: &Spec, cpus: usize) {
    use crate::policy::Class;
    let rt = spec.policies.iter().any(|p| p.class() == Class::Realtime);
    let all = spec
        .cpus
        .iter()
        .any(|c| matches!(c, crate::spec::Cpus::All));
    let many = spec.processes.iter().any(|&p| p as usize >= cpus);
    if rt && all && many {
        note!(
            "note: real-time workers will occupy all {cpus} CPUs; the rest of the machine gets only what RT \
             throttling (sched_rt_runtime_us) leaves. schedlab keeps control and enforces timeout_s."
        );
    }
}
