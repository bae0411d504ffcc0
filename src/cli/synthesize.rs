//! `schedlab synthesize`: a replay spec from one traced run (and its rt-app
//! form), and with `--check` the replay run under the same condition and
//! compared with the original, figure by figure.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;

use super::source::DbArg;
use crate::output::Target;
use crate::store::Store;
use crate::synth::{self, calibrate::StepCost, fidelity, record::Recording, rtapp};
use crate::workload::replay::desc::Body;
use crate::{out, spec};

#[derive(Args)]
pub(super) struct SynthesizeArgs {
    #[command(flatten)]
    db: DbArg,
    /// The traced run (`schedlab trace list` lists them).
    #[arg(long)]
    run: i64,
    /// Where the replay spec goes (`-` for standard output).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: PathBuf,
    /// Also write the replay as rt-app JSON.
    #[arg(long = "rt-app", value_name = "FILE")]
    rt_app: Option<PathBuf>,
    /// Synthesize from a trace that lost events (each figure then carries
    /// that caveat).
    #[arg(long)]
    allow_lost: bool,
    /// Run the replay under the run's condition (traced; root) and print
    /// replay against original with each figure's rule and verdict.
    #[arg(long)]
    check: bool,
    /// With --check: keep the replay's run in this database (default: a
    /// temporary one, removed after).
    #[arg(long, value_name = "DB", requires = "check")]
    check_db: Option<PathBuf>,
}

impl SynthesizeArgs {
    /// Whether it runs a campaign (`--check`): then, as `run`, it blocks
    /// the stop signals from the start for the campaign loop to take.
    pub(super) fn runs_campaign(&self) -> bool {
        self.check
    }
}

fn summary(rec: &Recording, tasks: &[crate::workload::replay::desc::ReplayTask]) -> String {
    let threads = tasks.iter().filter(|t| t.thread).count();
    let dists: Vec<&str> = tasks
        .iter()
        .filter(|t| matches!(t.body, Body::Distribution(_)))
        .map(|t| t.name.as_str())
        .collect();
    let mut s = format!(
        "{} tasks ({} processes, {threads} threads) from {} events over {:.1} ms; {} CPU bursts \
         ({:.1} ms of CPU), sleeps ended by: a timer {}, a task of the tree {}, outside the tree \
         {} (replayed as timer sleeps)",
        tasks.len(),
        tasks.len() - threads,
        rec.events,
        (rec.to_ns.saturating_sub(rec.from_ns)) as f64 / 1e6,
        rec.bursts_ns.seen,
        rec.tasks.iter().map(|t| t.cpu_ns).sum::<u64>() as f64 / 1e6,
        rec.timer_wakeups,
        rec.task_wakeups,
        rec.external_wakeups
    );
    if !dists.is_empty() {
        s.push_str(&format!(
            "; {} task(s) with more than {} steps described by distributions (their wake-ups \
             replayed as timers): {}",
            dists.len(),
            synth::record::MAX_OPS,
            dists.join(", ")
        ));
    }
    s
}

/// Write `text` to the output `flag` names (`-o`, `--rt-app`).
fn write(flag: &'static str, path: &std::path::Path, text: &str) -> Result<()> {
    let target = Target::parse(flag, path)?;
    let mut o = target.open()?;
    o.write_all(text.as_bytes())?;
    o.commit()
}

pub(super) fn run(a: SynthesizeArgs) -> Result<i32> {
    // An output that cannot be written is refused before the work (a
    // calibration replay and the synthesis), not after it.
    Target::parse("-o", &a.output)?;
    if let Some(p) = &a.rt_app {
        Target::parse("--rt-app", p)?;
    }
    let store = Store::open_existing(&a.db.db)?;
    let read = synth::read_run(&store, a.run, a.allow_lost)?;
    for c in &read.caveats {
        note!("caveat: {c}");
    }
    let rate = synth::pi_rate()?;
    let (cost, how) = step_cost(&read)?;
    let tasks = synth::to_tasks_less(&read.recording, rate, &cost);
    let text = format!(
        "# Each burst is the recorded one less the replayer's own CPU for its steps ({how}): {}.\n{}",
        cost.describe(),
        synth::spec_text(&read.source, &tasks, &read.recording, rate)?
    );
    // What is written must load: checked before anything is written.
    let origin = out::path(&a.output);
    spec::load(&text, &origin, &[]).context("the synthesized spec does not load (a bug)")?;
    anyhow::ensure!(
        text.len() as u64 <= spec::MAX_SPEC_BYTES,
        "the replay of run {} is {} MiB, more than the {} MiB a spec file may be: synthesize a \
         shorter run of the program",
        a.run,
        text.len() >> 20,
        spec::MAX_SPEC_BYTES >> 20
    );
    write("-o", &a.output, &text)?;
    note!(
        "run {}: {}; each burst less the replayer's own CPU for its steps ({how}: {}); wrote \
         {origin}",
        a.run,
        summary(&read.recording, &tasks),
        cost.describe()
    );
    if let Some(p) = &a.rt_app {
        let policy = match read.source.run.policy.name() {
            "other" => "SCHED_OTHER",
            "fifo" => "SCHED_FIFO",
            "rr" => "SCHED_RR",
            "batch" => "SCHED_BATCH",
            "idle" => "SCHED_IDLE",
            "deadline" => "SCHED_DEADLINE",
            _ => "SCHED_OTHER",
        };
        write("--rt-app", p, &rtapp::to_json(&tasks, rate, policy))?;
        note!(
            "wrote {} (rt-app: processes become threads; run µs at this machine's pi rate)",
            out::path(p)
        );
    }
    if !a.check {
        return Ok(0);
    }
    check(&a, &text, &origin, &read)
}

/// The replayer's own CPU per step: measured by a traced calibration
/// replay under the run's condition when this process may trace, else the
/// untraced timer step for every wait; and how it was measured.
fn step_cost(read: &synth::Read) -> Result<(StepCost, String)> {
    if let Err(why) = crate::sys::probe::trace_permission() {
        let ns = synth::step_overhead_ns()?;
        return Ok((
            StepCost::waits_only(ns),
            format!("an untraced timer step for every wait, since no trace can be taken: {why}"),
        ));
    }
    note!(
        "measuring the replayer's own steps (a traced calibration replay under the run's condition)"
    );
    let dir = tempfile::tempdir().context("a temporary directory for the step calibration")?;
    let (cost, _) = synth::calibrate::measure(read, &dir.path().join("calibration.db"))?;
    Ok((
        cost,
        "a traced calibration replay under the run's condition".into(),
    ))
}

/// Run the replay and compare it with the original.
fn check(a: &SynthesizeArgs, text: &str, origin: &str, read: &synth::Read) -> Result<i32> {
    let temp = match &a.check_db {
        Some(_) => None,
        None => Some(tempfile::tempdir().context("a temporary directory for --check")?),
    };
    let db = match (&a.check_db, &temp) {
        (Some(p), _) => p.clone(),
        (None, Some(t)) => t.path().join("replay-check.db"),
        (None, None) => unreachable!("one of them is set"),
    };
    note!(
        "running the replay under the run's condition into {}",
        out::path(&db)
    );
    let c = synth::check::run_and_compare(read, text, origin, &db, a.allow_lost)?;
    let (id, rows, replay) = (c.run_id, c.rows, c.replay);
    outln!(
        "replay (run {id}) against run {} under {}:",
        a.run,
        read.source.run.label()
    )?;
    write!(out::stdout(), "{}", fidelity::render(&rows))?;
    for c in read.caveats.iter().chain(&replay.caveats) {
        outln!("caveat: {c}")?;
    }
    // The replay's file says how close it came (the model quotes it).
    if a.output.as_os_str() != "-" {
        let line = format!(
            "{} (replay run {id} against run {} under {})",
            fidelity::summary(&rows),
            a.run,
            read.source.run.label()
        );
        write("-o", &a.output, &synth::with_fidelity(text, &line)?)?;
        note!("fidelity written to {origin}");
    }
    Ok(0)
}
