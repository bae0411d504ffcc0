//! `schedlab trace export`: one stored run's kernel trace written to a file
//! as a Perfetto protobuf trace ([`super::perfetto`]) or Chrome trace-event
//! JSON ([`super::chrome_json`]). The file appears whole or not at all: it
//! is written to a temporary file in the target directory, flushed to disk
//! and renamed over the target.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use super::{Capture, chrome_json, perfetto};
use crate::out;
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
    if capture.lost_events > 0 {
        note!(
            "warning: run {} lost {} events while it was traced: the export has gaps (Perfetto flags the \
             trace as having lost data)",
            opts.run_id,
            capture.lost_events
        );
    }
    let format = Format::resolve(opts.format, &opts.output);
    let bytes = encode(&capture, &kernel_release, format);
    write_atomically(&opts.output, &bytes)?;
    note!(
        "wrote {}: run {}, {} events on {} over {:.3} s, {}{}",
        out::path(&opts.output),
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

/// Writes `bytes` to `path` whole or not at all: a temporary file beside it
/// (same directory, so the rename cannot cross file systems), fsync'ed, then
/// renamed over `path`. Errors name the path as given with `-o`.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let shown = out::path(path);
    if path.is_dir() {
        bail!("cannot write -o {shown}: it is a directory");
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .with_context(|| format!("cannot write -o {shown}: not a file name"))?;
    if !dir.is_dir() {
        bail!(
            "cannot write -o {shown}: directory {} does not exist",
            out::path(dir)
        );
    }
    // Mode 0666 before the umask, like any file a command creates (a
    // temporary file alone would be 0600).
    use std::os::unix::fs::PermissionsExt;
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{}.", name.to_string_lossy()))
        .suffix(".tmp")
        .permissions(std::fs::Permissions::from_mode(0o666))
        .tempfile_in(dir)
        .with_context(|| format!("cannot write -o {shown}"))?;
    tmp.write_all(bytes)
        .and_then(|()| tmp.as_file().sync_all())
        .with_context(|| format!("cannot write -o {shown}"))?;
    tmp.persist(path)
        .map_err(|e| e.error)
        .with_context(|| format!("cannot write -o {shown}"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

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

    #[test]
    fn a_written_file_replaces_the_old_one_whole_and_leaves_no_temporary() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("run.pftrace");
        std::fs::write(&p, b"old").unwrap();
        write_atomically(&p, b"new contents").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new contents");
        let names: Vec<_> = std::fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["run.pftrace"]);
        // Not the 0600 of a temporary file.
        let mode = std::fs::metadata(&p).unwrap().permissions().mode();
        assert_ne!(mode & 0o044, 0, "mode {mode:o}");
    }

    #[test]
    fn unwritable_destinations_are_named() {
        let d = tempfile::tempdir().unwrap();
        let err = format!("{:#}", write_atomically(d.path(), b"x").unwrap_err());
        assert!(
            err.contains("-o") && err.contains("is a directory"),
            "{err}"
        );
        let missing = d.path().join("no/such/dir/run.pftrace");
        let err = format!("{:#}", write_atomically(&missing, b"x").unwrap_err());
        assert!(
            err.contains("-o") && err.contains("no/such/dir") && err.contains("does not exist"),
            "{err}"
        );
    }
}
