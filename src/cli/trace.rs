//! `schedlab trace list`: the traced runs of a database; `schedlab trace
//! export`: its arguments, and the command itself: one
//! stored run's kernel trace read from the store, encoded by
//! [`crate::trace::export`] and written through [`crate::output`] (a file
//! appears whole or not at all, a device or FIFO is written through, `-`
//! is standard output).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use super::source::DbArg;
use crate::out;
use crate::output::{self, Target};
use crate::store::Store;
use crate::trace::export::{Format, encode};

#[derive(clap::Subcommand)]
pub(super) enum TraceCommand {
    /// Write a traced run's kernel scheduling events (sched_switch, sched_waking,
    /// sched_wakeup_new, sched_migrate_task, sched_process_exit, sched_process_fork) as a
    /// Perfetto trace or Chrome trace-event JSON.
    #[command(
        after_help = "Open the file at https://ui.perfetto.dev (Open trace file): \
                            one track per CPU with every slice the scheduler gave, and each \
                            thread's states. The JSON also opens in chrome://tracing.\n\n\
                            Examples:\n  \
                            schedlab trace export --db traced.db --run 1 -o run1.pftrace\n  \
                            schedlab trace export --db traced.db --run 1 -o run1.json"
    )]
    Export(ExportArgs),
    /// List the traced runs: run id, campaign, condition, events, CPUs, window, and
    /// whether the trace is usable (else why not).
    #[command(after_help = "Examples:\n  \
                            schedlab trace list --db traced.db\n  \
                            schedlab trace list --db traced.db --campaign 2 --json")]
    List(ListArgs),
}

#[derive(clap::Args)]
pub(super) struct ListArgs {
    #[command(flatten)]
    db: DbArg,
    /// Only this campaign's runs (`schedlab campaigns` lists them).
    #[arg(long)]
    campaign: Option<i64>,
    /// Print JSON instead of a table: one object per traced run.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
pub(super) struct ExportArgs {
    /// The SQLite database.
    #[arg(long, default_value = "schedlab.db", env = "SCHEDLAB_DB")]
    db: PathBuf,
    /// The run whose trace to write (a run stored with --trace).
    #[arg(long, value_name = "RUN_ID")]
    run: i64,
    /// The file to write (replaced whole if it exists; a device or FIFO is
    /// written through), or "-" for standard output.
    #[arg(long, short, value_name = "FILE")]
    output: PathBuf,
    /// File format (default: json for a .json file, else perfetto).
    #[arg(long, value_enum)]
    format: Option<Format>,
}

pub(super) fn run(command: TraceCommand) -> Result<i32> {
    match command {
        TraceCommand::Export(a) => export(&a),
        TraceCommand::List(a) => list(&a),
    }
}

/// The traced runs, as a table or JSON.
fn list(a: &ListArgs) -> Result<i32> {
    let store = Store::open_existing(&a.db.db)?;
    if let Some(c) = a.campaign
        && !store.campaigns()?.iter().any(|s| s.campaign.id == c)
    {
        bail!(
            "--campaign {c}: no such campaign in {} (`schedlab campaigns` lists them)",
            out::path(&a.db.db)
        );
    }
    let runs = store.traced_runs(a.campaign)?;
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&runs)?)?;
        return Ok(0);
    }
    if runs.is_empty() {
        note!(
            "no traced run in {} (runs are traced with `schedlab run --trace`, as root)",
            out::path(&a.db.db)
        );
        return Ok(0);
    }
    outln!(
        "{:>5} {:>8}  {:<7} {:>9} {:>6} {:<8} {:>10}  {}",
        "run",
        "campaign",
        "status",
        "events",
        "lost",
        "CPUs",
        "window ms",
        "condition / trace"
    )?;
    for r in &runs {
        let i = &r.info;
        let cpus: Vec<String> = i.cpus.iter().map(u32::to_string).collect();
        let usable = match (i.predicted, i.caveat()) {
            (true, _) => "the model's predicted timeline".to_string(),
            (false, Some(c)) => c,
            (false, None) => "usable".to_string(),
        };
        outln!(
            "{:>5} {:>8}  {:<7} {:>9} {:>6} {:<8} {:>10.1}  {}: {}",
            i.run_id,
            r.campaign_id,
            r.status,
            i.event_count,
            i.lost_events,
            cpus.join(","),
            i.end_ns.saturating_sub(i.start_ns) as f64 / 1e6,
            out::esc(&r.run_key),
            out::esc(&usable)
        )?;
    }
    Ok(0)
}

/// Load the run's trace, write it, say what was written.
fn export(a: &ExportArgs) -> Result<i32> {
    let store = Store::open_existing(&a.db)?;
    if same_file(&a.db, &a.output) {
        bail!(
            "-o {} is the database (--db): choose another file",
            out::path(&a.output)
        );
    }
    let target = Target::parse("-o", &a.output)?;
    let Some(kernel_release) = store.run_kernel_release(a.run)? else {
        bail!(
            "--run {}: no such run in {} (the `run` column of `schedlab export` lists them)",
            a.run,
            out::path(&a.db)
        );
    };
    let capture = store
        .load_trace(a.run)
        .with_context(|| format!("--run {}", a.run))?;
    let format = Format::resolve(a.format, &a.output);
    if let Some(caveat) = store.trace_info(a.run)?.and_then(|i| i.caveat()) {
        note!("warning: {caveat}");
        if capture.lost_events > 0 {
            note!("  Perfetto flags the trace as having lost data.");
        }
        note!(
            "  {}",
            match format {
                Format::Perfetto => {
                    "The file holds the events as recorded: where the kernel never emitted a \
                     switch, Perfetto's slice runs on to the next switch it did emit."
                }
                Format::Json => {
                    "A slice cut by a switch never emitted ends at its task's last event or starts \
                     at its first (args.end / args.start \"switch never emitted\")."
                }
            }
        );
    }
    let bytes = encode(&capture, &kernel_release, format);
    output::write_all(&target, &bytes)?;
    note!(
        "wrote {}: run {}, {} events on {} over {:.3} s, {}{}",
        target.shown(),
        a.run,
        capture.events.len(),
        cpu_label(&capture.cpus),
        capture.end_ns.saturating_sub(capture.start_ns) as f64 / 1e9,
        format.name(),
        match format {
            Format::Perfetto => " (open it at https://ui.perfetto.dev: Open trace file)",
            Format::Json => "",
        }
    );
    Ok(0)
}

/// Whether two paths name one existing file (the rename would replace it).
fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// "CPU 0", "CPUs 0,1".
fn cpu_label(cpus: &[u32]) -> String {
    let list: Vec<String> = cpus.iter().map(u32::to_string).collect();
    match cpus.len() {
        1 => format!("CPU {}", list[0]),
        _ => format!("CPUs {}", list.join(",")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpus_are_listed_in_the_note() {
        assert_eq!(cpu_label(&[0]), "CPU 0");
        assert_eq!(cpu_label(&[0, 1]), "CPUs 0,1");
        assert_eq!(cpu_label(&[]), "CPUs ");
    }

    #[test]
    fn a_path_is_the_same_file_as_itself_only() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.db");
        let b = dir.path().join("b.db");
        std::fs::write(&a, "a").unwrap();
        std::fs::write(&b, "b").unwrap();
        assert!(same_file(&a, &dir.path().join(".").join("a.db")));
        assert!(!same_file(&a, &b));
        assert!(!same_file(&a, &dir.path().join("missing")));
    }
}
