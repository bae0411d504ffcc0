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
use crate::units::count;

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
    crate::output::check_database_target("-o", &opts.output)?;
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
    // A new destination that a failure (a full disk) leaves holding no
    // merged source is removed, with the files made beside it: it must not
    // stay behind as a 0-byte file that is "not a schedlab database".
    let made = NewDestination::before(&opts.output, &lock);
    let what = format!("schedlab merge into {}", opts.output.display());
    let held = locks::try_take(&lock, &locks::holder_note(&what))
        .with_context(|| format!("cannot lock {}", lock.display()))?
        .ok_or_else(|| {
            anyhow::anyhow!(
                "{} is being written by {}; wait for it to finish, or merge into another file",
                out::path(&opts.output),
                locks::holder(&lock)
            )
        })?;
    let mut merged_sources = 0;
    let merged = Store::open(&opts.output)
        .and_then(|mut dest| merge_all(opts, &mut dest, &mut merged_sources));
    drop(held);
    if merged.is_err()
        && merged_sources == 0
        && let Some(made) = made
    {
        made.remove();
    }
    merged
}

/// A destination that did not exist before the merge: the database, its
/// SQLite side files and its runner lock, none of which existed.
struct NewDestination(Vec<PathBuf>);

impl NewDestination {
    /// `None` when the database (or any of its files) exists already.
    fn before(db: &Path, lock: &Path) -> Option<NewDestination> {
        let side = |suffix: &str| PathBuf::from(format!("{}{suffix}", db.display()));
        let paths = vec![
            db.to_path_buf(),
            side("-wal"),
            side("-shm"),
            side("-journal"),
            lock.to_path_buf(),
        ];
        paths
            .iter()
            .all(|p| std::fs::symlink_metadata(p).is_err())
            .then_some(NewDestination(paths))
    }

    /// Remove what the failed merge made (the database closed, the lock
    /// released), saying so.
    fn remove(self) {
        for p in self.0 {
            if std::fs::remove_file(&p).is_ok() {
                note!("removed {}, which the failed merge had made", out::path(&p));
            }
        }
    }
}

/// Merge each source into `dest` in turn, one transaction each, counting
/// the sources merged.
fn merge_all(opts: &MergeOptions, dest: &mut Store, merged_sources: &mut usize) -> Result<i32> {
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
        *merged_sources += 1;
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
                "{}: {} ({} new), {} runs added, {} already there{differing}, {} added",
                out::path(path),
                count(counts.campaigns, "campaign", "campaigns"),
                counts.campaigns_added,
                counts.runs_added,
                counts.runs_present,
                count(counts.environments_added, "environment", "environments"),
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
