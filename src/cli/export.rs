//! `schedlab export`: stored runs, one row per process per run, in one of
//! the formats of [`crate::export`], streamed from the store to a file or
//! standard output through [`crate::output`].

use anyhow::{Context, Result};
use clap::Args;
use std::io::{BufWriter, IsTerminal};
use std::path::PathBuf;

use super::source::DbArg;
use crate::export::Format;
use crate::output::Target;
use crate::spec::SpecError;
use crate::store::Store;

#[derive(Args)]
pub(super) struct ExportArgs {
    #[command(flatten)]
    db: DbArg,
    #[arg(long, value_enum, default_value = "csv")]
    format: Format,
    /// Only this campaign (see `schedlab campaigns`).
    #[arg(long)]
    campaign: Option<i64>,
    /// Write to this file instead of standard output (replaced whole; a
    /// device or FIFO is written through; "-" is standard output).
    #[arg(long, short)]
    output: Option<PathBuf>,
}

pub(super) fn run(a: ExportArgs) -> Result<i32> {
    let store = Store::open_existing(&a.db.db)?;
    let target = match &a.output {
        Some(path) => Target::parse("-o", path)?,
        None => Target::Stdout,
    };
    if a.format.binary()
        && (a.output.is_none() || (target.is_stdout() && std::io::stdout().is_terminal()))
    {
        return Err(SpecError::Parse {
            origin: format!("--format {}", a.format.name()),
            message: "Parquet is a binary file: name it with -o, e.g. -o runs.parquet (-o - \
                      writes it to standard output, not to a terminal)"
                .into(),
        }
        .into());
    }
    // Two streamed passes: the figure names make the header, then the rows
    // go out as they are read.
    let figures = store.export_figure_names(a.campaign)?;
    let mut w = BufWriter::new(target.open()?);
    let mut exporter = a.format.begin(&mut w, figures)?;
    store.for_each_export_row(a.campaign, |r| exporter.row(r))?;
    exporter
        .finish()
        .with_context(|| format!("cannot write -o {}", target.shown()))?;
    w.into_inner().map_err(|e| e.into_error())?.commit()?;
    Ok(0)
}
