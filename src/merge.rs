//! `schedlab merge`: the databases of many machines (or many runs of one)
//! into one store, for `report --by host` and `export`. Sources are only
//! read; each is merged in one transaction, so a failure leaves the
//! destination as it was before that source. What is copied and how rows
//! are matched lives in [`crate::store::merge`].

use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};

use crate::locks;
use crate::out;
use crate::store::Store;

/// What `schedlab merge` does.
#[derive(Debug, Clone, PartialEq)]
pub struct MergeOptions {
    pub sources: Vec<PathBuf>,
    /// The destination, created when missing.
    pub output: PathBuf,
    pub quiet: bool,
}

/// Sources with at least this many runs get a progress bar (on a terminal).
const PROGRESS_MIN_RUNS: u64 = 2000;

/// The same file (device and inode), when both exist.
fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

/// Merge every source into the destination; returns the exit code.
pub fn run(opts: &MergeOptions) -> Result<i32> {
    if opts.sources.is_empty() {
        bail!("give the databases to merge, e.g. `schedlab merge a.db b.db -o fleet.db`");
    }
    // Before anything is made beside it (the runner lock, SQLite's
    // journal): a directory, a device or standard output cannot hold a
    // database, and another database's side file must not become one.
    crate::output::check_database_target(&opts.output)?;
    for s in &opts.sources {
        if same_file(s, &opts.output) {
            bail!(
                "{} is both a source and the destination (-o); merge into another file",
                out::path(s)
            );
        }
    }
    // Check every source before writing anything: a typo in the last one
    // should not leave the others merged and the command failed. Each is
    // opened, checked and closed, and opened again when its turn comes:
    // thousands of sources must not hold thousands of files open.
    for s in &opts.sources {
        open_source(s)?;
    }
    let lock = locks::database_lock_path(&opts.output);
    let what = format!("schedlab merge into {}", opts.output.display());
    let _held = locks::try_take(&lock, &locks::holder_note(&what))
        .with_context(|| format!("cannot lock {}", lock.display()))?
        .ok_or_else(|| {
            anyhow::anyhow!(
                "{} is being written by {}; wait for it to finish, or merge into another file",
                out::path(&opts.output),
                locks::holder(&lock)
            )
        })?;
    let mut dest = Store::open(&opts.output)?;
    for path in &opts.sources {
        let src = open_source(path)?;
        let bar = progress_bar(&src, opts.quiet)?;
        // Without a terminal (CI logs, ssh), a line every tenth instead.
        let lines = bar.as_ref().is_some_and(|b| b.is_hidden());
        let mut next_tenth = 1;
        let counts = dest
            .merge_from(&src, |done, total| {
                if let Some(b) = &bar
                    && done % 256 == 0
                {
                    b.set_position(done);
                }
                if lines && done * 10 >= total * next_tenth {
                    note!("{}: {done} of {total} runs", out::path(path));
                    next_tenth = done * 10 / total + 1;
                }
            })
            .with_context(|| {
                format!(
                    "cannot merge {} into {} (nothing of it was merged)",
                    out::path(path),
                    out::path(&opts.output)
                )
            })?;
        if let Some(b) = bar {
            b.finish_and_clear();
        }
        if !opts.quiet {
            let differing = if counts.runs_differing > 0 {
                format!(
                    " ({} of them differ in status or start time: retried in one of the two; kept the one in {})",
                    counts.runs_differing,
                    out::path(&opts.output)
                )
            } else {
                String::new()
            };
            note!(
                "{}: {} campaign{} ({} new), {} runs added, {} already there{differing}, {} environment{} added",
                out::path(path),
                counts.campaigns,
                plural(counts.campaigns),
                counts.campaigns_added,
                counts.runs_added,
                counts.runs_present,
                counts.environments_added,
                plural(counts.environments_added),
            );
        }
    }
    if !opts.quiet {
        let totals = dest.table_counts()?;
        let list: Vec<String> = totals.iter().map(|(t, n)| format!("{n} {t}")).collect();
        note!("{} holds {}", out::path(&opts.output), list.join(", "));
    }
    Ok(0)
}

/// A source, read only.
fn open_source(path: &Path) -> Result<Store> {
    Store::open_existing(path).with_context(|| format!("cannot merge {}", out::path(path)))
}

fn plural(n: u64) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// A bar over the source's runs when it is big (drawn only on a terminal).
fn progress_bar(src: &Store, quiet: bool) -> Result<Option<indicatif::ProgressBar>> {
    if quiet {
        return Ok(None);
    }
    let runs: u64 = src.campaigns()?.iter().map(|c| c.total_runs()).sum();
    if runs < PROGRESS_MIN_RUNS {
        return Ok(None);
    }
    let bar = indicatif::ProgressBar::with_draw_target(
        Some(runs),
        indicatif::ProgressDrawTarget::stderr(),
    );
    bar.set_style(
        indicatif::ProgressStyle::with_template("merging [{bar:30}] {pos}/{len} runs ETA {eta}")
            .expect("static template")
            .progress_chars("=> "),
    );
    Ok(Some(bar))
}
