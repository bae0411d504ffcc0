//! The command line of `schedlab trace export` (clap), turned into the
//! plain [`ExportOptions`] that [`crate::trace::export`] runs.

use std::path::PathBuf;

use anyhow::Result;

use crate::trace::export::{self, ExportOptions, Format};

#[derive(clap::Subcommand)]
pub(super) enum TraceCommand {
    /// Write a traced run's kernel scheduling events (sched_switch, sched_waking,
    /// sched_wakeup_new, sched_migrate_task, sched_process_exit) as a Perfetto trace or Chrome
    /// trace-event JSON.
    #[command(
        after_help = "Open the file at https://ui.perfetto.dev (Open trace file): \
                            one track per CPU with every slice the scheduler gave, and each \
                            thread's states. The JSON also opens in chrome://tracing.\n\n\
                            Examples:\n  \
                            schedlab trace export --db traced.db --run 1 -o run1.pftrace\n  \
                            schedlab trace export --db traced.db --run 1 -o run1.json"
    )]
    Export(ExportArgs),
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
    format: Option<FormatArg>,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum FormatArg {
    /// Perfetto's protobuf trace.
    Perfetto,
    /// Chrome trace-event JSON.
    Json,
}

pub(super) fn run(command: TraceCommand) -> Result<i32> {
    match command {
        TraceCommand::Export(a) => export::run(&ExportOptions {
            db: a.db,
            run_id: a.run,
            output: a.output,
            format: a.format.map(|f| match f {
                FormatArg::Perfetto => Format::Perfetto,
                FormatArg::Json => Format::Json,
            }),
        }),
    }
}
