//! `schedlab trace export`: one stored run's kernel trace written to a file
//! as a Perfetto protobuf trace ([`super::perfetto`]) or Chrome trace-event
//! JSON ([`super::chrome_json`]), through [`crate::output`]: a file
//! appears whole or not at all, a device or FIFO is written through, `-` is
//! standard output.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use super::{Capture, chrome_json, perfetto};
use crate::out;
use crate::output::{self, Target};
use crate::store::Store;

/// The file format of an export.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Perfetto's protobuf trace (ui.perfetto.dev, trace_processor).
    Perfetto,
    /// Chrome trace-event JSON (chrome://tracing, ui.perfetto.dev).
    Json,
}

impl Format {
    /// The format asked for, else the output's extension's (`.json` is
    /// JSON), else Perfetto.
    pub fn resolve(asked: Option<Format>, output: &Path) -> Format {
        asked.unwrap_or_else(|| {
            let json = output
                .extension()
                .is_some_and(|e| e.eq_ignore_ascii_case("json"));
            if json { Format::Json } else { Format::Perfetto }
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Format::Perfetto => "Perfetto protobuf",
            Format::Json => "Chrome JSON",
        }
    }
}

/// What `schedlab trace export` was asked.
#[derive(Debug, Clone)]
pub struct ExportOptions {
    pub db: PathBuf,
    pub run_id: i64,
    pub output: PathBuf,
    /// None: from the output's extension ([`Format::resolve`]).
    pub format: Option<Format>,
}

/// `schedlab trace export`: load the run's trace, write it, say what was
/// written. Returns the exit code.
pub fn run(opts: &ExportOptions) -> Result<i32> {
    let store = Store::open_existing(&opts.db)?;
    if same_file(&opts.db, &opts.output) {
        bail!(
            "-o {} is the database (--db): choose another file",
            out::path(&opts.output)
        );
    }
    let target = Target::parse(&opts.output)?;
    let Some(kernel_release) = store.run_kernel_release(opts.run_id)? else {
        bail!(
            "--run {}: no such run in {} (the `run` column of `schedlab export` lists them)",
            opts.run_id,
            out::path(&opts.db)
        );
    };
    let capture = store
        .load_trace(opts.run_id)
        .with_context(|| format!("--run {}", opts.run_id))?;
    let format = Format::resolve(opts.format, &opts.output);
    if let Some(caveat) = store.trace_info(opts.run_id)?.and_then(|i| i.caveat()) {
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
        opts.run_id,
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

/// The capture in a format (`kernel_release`: the traced kernel's, which
/// Perfetto needs to read `prev_state`).
pub fn encode(capture: &Capture, kernel_release: &str, format: Format) -> Vec<u8> {
    match format {
        Format::Perfetto => perfetto::encode(capture, kernel_release),
        Format::Json => chrome_json::encode(capture),
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
    fn the_format_follows_the_flag_then_the_extension() {
        let p = Path::new("x/run.JSON");
        assert_eq!(Format::resolve(None, p), Format::Json);
        assert_eq!(Format::resolve(Some(Format::Perfetto), p), Format::Perfetto);
        assert_eq!(
            Format::resolve(None, Path::new("run.pftrace")),
            Format::Perfetto
        );
        assert_eq!(Format::resolve(None, Path::new("run")), Format::Perfetto);
        assert_eq!(
            Format::resolve(Some(Format::Json), Path::new("run.pftrace")),
            Format::Json
        );
    }
}
