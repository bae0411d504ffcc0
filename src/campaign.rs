//! Running a campaign: find or create it in the store, work out which runs
//! are left, launch them one by one in campaign order, store each as it
//! finishes, show progress, and stop cleanly on Ctrl-C.

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::launch::{Launcher, Outcome};
use crate::locks;
use crate::plan::{self, Run};
use crate::progress::Progress;
use crate::record::{RunRecord, RunStatus};
use crate::spec::{Spec, SpecError};
use crate::store::{Campaign, Store};
use crate::sys::{envinfo, fsinfo, knobs, limits, proc};

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
pub struct Summary {
    pub campaign: Campaign,
    pub ran: usize,
    pub already_done: usize,
    pub by_status: [usize; 4],
    /// The stop signal, when the user interrupted it.
    pub interrupted: Option<i32>,
}

/// Check the parts of a spec that depend on this machine: CPUs exist, RT
/// runtimes fit the period, the work directory can be written and holds
/// what the largest run writes, and nothing risks freezing the machine
/// unless `force` says so. `plan` and `run` apply the same checks.
pub fn check_machine(
    spec: &Spec,
    origin: &str,
    env: &envinfo::EnvSnapshot,
    force: bool,
) -> Result<(), SpecError> {
    let err = |key: &str, message: String| SpecError::Invalid {
        origin: origin.to_string(),
        key: key.into(),
        message,
    };
    let allowed = &env.cpus_allowed;
    for c in &spec.cpus {
        c.resolve(allowed).map_err(|m| err("matrix.cpus", m))?;
    }
    let period = env.sched_rt_period_us.unwrap_or(1_000_000);
    for &v in &spec.rt_runtime_us {
        if v > period {
            return Err(err(
                "matrix.rt_runtime_us",
                format!("{v} µs is longer than sched_rt_period_us = {period} µs"),
            ));
        }
    }
    if spec.rt_runtime_us.iter().any(|&v| v < 0) && !force {
        return Err(err(
            "matrix.rt_runtime_us",
            "-1 switches RT throttling off, which lets any real-time task freeze the machine; refused \
             without --force"
                .into(),
        ));
    }
    let unlimited = spec.rt_runtime_us.contains(&-1)
        || (spec.rt_runtime_us.is_empty() && env.sched_rt_runtime_us == Some(-1));
    let rt_work = spec.hog.as_ref().is_some_and(|h| h.is_rt())
        || spec
            .policies
            .iter()
            .any(|p| p.class() != crate::policy::Class::Fair);
    if unlimited && rt_work && !force {
        return Err(err(
            "matrix.rt_runtime_us",
            "real-time work with RT throttling disabled (sched_rt_runtime_us = -1) can freeze \
             the machine; refused without --force"
                .into(),
        ));
    }
    if let Some(hog) = spec.hog.as_ref().filter(|h| h.is_rt()) {
        let cpus = hog.cpus.resolve(allowed).map_err(|m| err("hog.cpus", m))?;
        if cpus.len() >= allowed.len() && !force {
            return Err(err(
                "hog.cpus",
                format!(
                    "an RT CPU hog on every CPU ({}) leaves the machine only what RT throttling \
                     spares; refused without --force",
                    hog.cpus.label()
                ),
            ));
        }
    }
    if spec.trace && crate::sys::proc::euid() != 0 {
        return Err(err(
            "trace",
            "tracing needs root: schedlab mounts tracefs and makes a tracing instance of its own \
             (run as root, or without trace = true / --trace)"
                .into(),
        ));
    }
    check_workdir(spec, &err)?;
    check_limits(spec, &limits::Limits::capture(), &err)
}

/// What one run needs of the machine's limits.
pub fn run_need(spec: &Spec, r: &Run) -> limits::Need {
    let p = u64::from(r.processes);
    let dispatchers = match r.policy {
        crate::policy::Policy::Wrr => 64,
        _ => 0,
    };
    limits::Need {
        // Workers, the hog, dispatcher threads, and room for the kernel's
        // io_uring workers and schedlab's own threads.
        tasks: p + spec.hog.as_ref().map_or(0, |h| u64::from(h.count)) + dispatchers + 16,
        // Two per process the campaign counts on (the launcher raises the
        // soft limit for the result and stderr pipes beyond them), and the
        // channels of cooperating workers: at most two per process (a
        // pingpong pair's two pipes, a messaging receiver's socketpair, a
        // request worker's pipe and its share of the group's reply pipe).
        fds: 64
            + 2 * p
            + if r.workload.workload.group_size() > 1 {
                2 * p
            } else {
                0
            },
        memory_bytes: r.workload.workload.memory_bytes().saturating_mul(p),
    }
}

/// Refuse a spec of which a run would hit a limit of this machine, naming
/// the limit (rather than failing every run at fork time).
fn check_limits(
    spec: &Spec,
    limits: &limits::Limits,
    err: &dyn Fn(&str, String) -> SpecError,
) -> Result<(), SpecError> {
    let mut seen = std::collections::HashSet::new();
    for r in plan::expand(spec, 0) {
        let need = run_need(spec, &r);
        if !seen.insert(need) {
            continue;
        }
        if let Some(why) = limits.refusal(need) {
            return Err(err(
                "matrix.processes",
                format!(
                    "a run of {} processes of {} cannot start here: {why}",
                    r.processes, r.workload.name
                ),
            ));
        }
    }
    Ok(())
}

/// The work directory is (or can be made as) a writable directory, and its
/// filesystem has room for what the largest run writes.
fn check_workdir(spec: &Spec, err: &dyn Fn(&str, String) -> SpecError) -> Result<(), SpecError> {
    let workdir = workdir_of(spec);
    let shown = workdir.display();
    let Some(base) = fsinfo::nearest_existing(&workdir) else {
        return Ok(());
    };
    match std::fs::metadata(&base) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            let what = if base == workdir {
                format!("{shown} is not a directory")
            } else {
                format!(
                    "{shown} cannot be made: {} is not a directory",
                    base.display()
                )
            };
            return Err(err("workdir", what));
        }
        Err(e) => return Err(err("workdir", format!("{shown}: {e}"))),
    }
    if let Err(e) = fsinfo::writable(&base) {
        return Err(err(
            "workdir",
            format!(
                "{} is not writable ({e}); set workdir to a writable directory",
                base.display()
            ),
        ));
    }
    let Ok(free) = fsinfo::free_bytes(&base) else {
        return Ok(());
    };
    let largest = plan::expand(spec, 0)
        .into_iter()
        .map(|r| (r.workload.workload.disk_bytes(r.processes), r))
        .max_by_key(|(b, _)| *b);
    if let Some((need, r)) = largest
        && need > free
    {
        return Err(err(
            &format!(
                "workloads.{}.{}",
                r.workload.name,
                r.workload.workload.disk_key()
            ),
            format!(
                "a run of {} processes writes up to {} in {shown} (the input and one copy per process), \
                 which has {} free",
                r.processes,
                crate::progress::human_bytes(need),
                crate::progress::human_bytes(free)
            ),
        ));
    }
    Ok(())
}

/// Where a spec's runs make their directories.
pub fn workdir_of(spec: &Spec) -> PathBuf {
    spec.workdir.clone().unwrap_or_else(std::env::temp_dir)
}

/// What `plan` shows of a spec: where its campaign stands in `db` and how
/// long the rest will take. Nothing is run, created or written.
pub struct Preview {
    pub env: envinfo::EnvSnapshot,
    /// The spec's campaign in `db`, when it exists already.
    pub existing: Option<Campaign>,
    /// Keys of its finished runs.
    pub done: std::collections::HashSet<String>,
    /// The run order's seed: the stored campaign's, else the spec's.
    pub seed: Option<u64>,
    /// Every run, in campaign order (sequential order 0 when no seed).
    pub runs: Vec<Run>,
    pub rates: crate::workload::Rates,
    /// Estimated seconds for the runs not yet finished.
    pub estimate_s: f64,
}

/// Check a spec against this machine as `run` would (`force` as for run),
/// look up its campaign in `db` read-only, and estimate the runs left from
/// a calibration, which waits for the measurement lock like a run.
pub fn preview(spec: &Spec, origin: &str, db: &Path, force: bool) -> Result<Preview> {
    let env = envinfo::capture();
    check_machine(spec, origin, &env, force)?;
    // What a workload needs of this machine (a command's program): refused
    // by plan; run records each such run as skipped, with the reason.
    for w in &spec.workloads {
        w.workload.check_machine().map_err(|l| SpecError::Invalid {
            origin: origin.to_string(),
            key: format!("workloads.{}.{}", w.name, l.key),
            message: l.message,
        })?;
    }
    let (existing, done) = if db.exists() {
        // Only looks: never creates, upgrades or writes the database.
        let store = Store::open_existing(db)?;
        match store.find_campaign(spec, &crate::store::Host::of(&env))? {
            Some(c) => {
                let keys = store.finished_keys(c.id)?;
                (Some(c), keys)
            }
            None => (None, Default::default()),
        }
    } else {
        (None, Default::default())
    };
    let seed = existing.as_ref().map(|c| c.seed).or(spec.seed);
    let runs = plan::expand(spec, seed.unwrap_or(0));
    let dir = tempfile::tempdir().context("creating a calibration directory")?;
    let rates = {
        // The calibration measures the machine: not while a run measures.
        let _measuring = locks::wait_quietly_for_machine("schedlab plan")?;
        crate::workload::calibrate(dir.path())?
    };
    let pending: Vec<&Run> = runs.iter().filter(|r| !done.contains(&r.key)).collect();
    let period = env.sched_rt_period_us.unwrap_or(1_000_000);
    let estimate_s = plan::estimates(spec, &pending, env.cpus_allowed.len(), &rates, period)
        .iter()
        .sum();
    Ok(Preview {
        env,
        existing,
        done,
        seed,
        runs,
        rates,
        estimate_s,
    })
}

/// Find the campaign of `spec` made on `host` or create it; returns it with
/// its full plan. A campaign of the same spec from another host (merged
/// into this database) is never resumed here.
pub fn open_campaign(
    store: &mut Store,
    host: &crate::store::Host,
    spec: &Spec,
    spec_toml: &str,
    overrides: &[String],
) -> Result<(Campaign, Vec<Run>, bool)> {
    if let Some(c) = store.find_campaign(spec, host)? {
        if c.host_id.is_none() {
            store.claim_campaign(c.id, host)?;
        }
        let runs = plan::expand(spec, c.seed);
        return Ok((c, runs, false));
    }
    let seed = spec.seed.unwrap_or_else(crate::rng::fresh_seed);
    let runs = plan::expand(spec, seed);
    let c = store.create_campaign_on(host, spec, spec_toml, overrides, seed, runs.len())?;
    Ok((c, runs, true))
}

pub fn run(
    spec: &Spec,
    origin: &str,
    spec_toml: &str,
    overrides: &[String],
    opts: &Options,
) -> Result<Summary> {
    let env = envinfo::capture();
    check_machine(spec, origin, &env, opts.force)?;
    let what = format!(
        "schedlab run of \"{}\" into {}",
        spec.name,
        opts.db.display()
    );
    let db_lock = locks::database_lock_path(&opts.db);
    let _runner = locks::try_take(&db_lock, &locks::holder_note(&what))
        .with_context(|| format!("cannot lock {}", db_lock.display()))?
        .ok_or_else(|| {
            anyhow::anyhow!(
                "{} is being written by {}; wait for it to finish (or stop it), or use another --db",
                opts.db.display(),
                locks::holder(&db_lock)
            )
        })?;
    let mut store = Store::open(&opts.db)?;
    let host = crate::store::Host::of(&env);
    let (campaign, runs, created) = open_campaign(&mut store, &host, spec, spec_toml, overrides)?;
    if opts.retry_failed {
        let n = store.forget_runs(
            campaign.id,
            &[RunStatus::Failed, RunStatus::TimedOut, RunStatus::Skipped],
        )?;
        if n > 0 && !opts.quiet {
            note!("retrying {n} failed, timed-out or skipped runs");
        }
    }
    let done = store.finished_keys(campaign.id)?;
    let pending: Vec<&Run> = runs.iter().filter(|r| !done.contains(&r.key)).collect();
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
    // The calibration measures the machine too: it waits its turn like a run.
    let rates = {
        let _measuring = match opts.allow_concurrent {
            true => None,
            false => match wait_for_machine(&signals, &what, opts.quiet)? {
                Ok(held) => Some(held),
                Err(sig) => {
                    return Ok(Summary {
                        campaign: campaign.clone(),
                        ran: 0,
                        already_done: runs.len() - pending.len(),
                        by_status: [0; 4],
                        interrupted: Some(sig),
                    });
                }
            },
        };
        calibrate_quietly(&workdir)
    };
    let period = env.sched_rt_period_us.unwrap_or(1_000_000);
    let estimates = plan::estimates(spec, &pending, env.cpus_allowed.len(), &rates, period);
    if !opts.quiet {
        note!(
            "{} campaign {} \"{}\" in {} (seed {}, scale {}): {} runs, {} stored, {} to run, about {}",
            if created { "new" } else { "resuming" },
            campaign.id,
            crate::out::esc(&campaign.name),
            crate::out::path(&opts.db),
            campaign.seed,
            spec.scale,
            runs.len(),
            runs.len() - pending.len(),
            pending.len(),
            crate::progress::human_duration(estimates.iter().sum())
        );
        warn_rt_everywhere(spec, env.cpus_allowed.len());
        for w in plan::short_work_warnings(&pending, &rates, slices_of(&env)) {
            crate::note!("warning: {}", crate::out::esc(&w));
        }
    }

    // Kernel settings the campaign sweeps are journaled before the first
    // change and put back when the guard is restored or dropped (also on
    // error and Ctrl-C, since the signals are taken synchronously here).
    let mut rt_guard = match pending.iter().any(|r| r.rt_runtime_us.is_some()) {
        true => {
            knobs::ensure_signals_blocked()?;
            Some(knobs::RtGuard::acquire().context("cannot change sched_rt_runtime_us")?)
        }
        false => None,
    };
    // Tracing: schedlab's own tracefs instance (and mount when needed),
    // journaled like the RT settings and removed however the campaign ends.
    let trace_guard = match spec.trace && !pending.is_empty() {
        true => {
            knobs::ensure_signals_blocked()?;
            let g = knobs::TraceGuard::acquire().context("cannot trace (trace = true, --trace)")?;
            if let (Some(w), false) = (g.recovered(), opts.quiet) {
                note!("warning: {}", crate::out::esc_lines(w));
            }
            Some(g)
        }
        false => None,
    };
    let mut launcher = Launcher::new(spec, &env, signals);
    if let Some(g) = &trace_guard {
        launcher.trace_into(crate::launch::TraceTarget {
            root: g.root().to_path_buf(),
            name: g.instance_name().to_string(),
        });
    }
    let mut progress = Progress::new(&estimates, opts.quiet);
    let mut summary = Summary {
        campaign: campaign.clone(),
        ran: 0,
        already_done: runs.len() - pending.len(),
        by_status: [0; 4],
        interrupted: None,
    };
    if pending.is_empty() {
        // A stop signal that came during set-up still counts.
        summary.interrupted = proc::pending_stop_signal(&signals);
    }
    for (i, run) in pending.iter().enumerate() {
        if let Some(sig) = proc::pending_stop_signal(&signals) {
            summary.interrupted = Some(sig);
            break;
        }
        // The measured part of a run (with its RT setting) holds the
        // machine-wide lock: two measurements at once disturb each other.
        let _measuring = match opts.allow_concurrent {
            true => None,
            false => match wait_for_machine(&signals, &what, opts.quiet)? {
                Ok(held) => Some(held),
                Err(sig) => {
                    summary.interrupted = Some(sig);
                    break;
                }
            },
        };
        progress.start(i, run);
        if let (Some(guard), Some(v)) = (rt_guard.as_mut(), run.rt_runtime_us) {
            guard.set_runtime(v).with_context(|| {
                format!("setting sched_rt_runtime_us = {v} for {}", run.label())
            })?;
        }
        match launcher.launch(run)? {
            Outcome::Interrupted(sig) => {
                summary.interrupted = Some(sig);
                break;
            }
            Outcome::Done(rec, trace) => {
                store.insert_run_traced(campaign.id, &rec, trace.as_deref())?;
                summary.ran += 1;
                summary.by_status[status_index(rec.status)] += 1;
                progress.finish(i, run, &describe(&rec));
            }
        }
        drop(_measuring);
        if i + 1 < pending.len()
            && spec.cooldown_ns > 0
            && let Some(sig) =
                proc::pending_stop_signal_within(&signals, Duration::from_nanos(spec.cooldown_ns))
        {
            summary.interrupted = Some(sig);
            break;
        }
    }
    progress.done();
    if let Some(guard) = trace_guard {
        guard
            .restore()
            .context("removing schedlab's tracing instance")?;
    }
    if let Some(guard) = rt_guard {
        guard.restore().context("restoring sched_rt_runtime_us")?;
    }
    Ok(summary)
}

/// Take the machine-wide measurement lock, waiting while another schedlab
/// holds it (saying once who does) and taking Ctrl-C meanwhile: `Err(sig)`
/// when a stop signal came first.
fn wait_for_machine(
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

fn status_index(s: RunStatus) -> usize {
    match s {
        RunStatus::Ok => 0,
        RunStatus::Failed => 1,
        RunStatus::TimedOut => 2,
        RunStatus::Skipped => 3,
    }
}

/// One line on a finished run.
fn describe(rec: &RunRecord) -> String {
    match rec.status {
        RunStatus::Ok => format!(
            "ok, makespan {:.3} s, CPU {:.0}%",
            rec.makespan_ns.unwrap_or(0) as f64 / 1e9,
            rec.cpu_util.unwrap_or(0.0) * 100.0
        ),
        s => format!("{}: {}", s.as_str(), rec.reason),
    }
}

fn calibrate_quietly(workdir: &Path) -> crate::workload::Rates {
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
