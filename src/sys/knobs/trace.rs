//! [`TraceGuard`]: a tracing session in force: schedlab's own tracefs
//! instance (and its own tracefs mount when tracefs was not mounted at
//! /sys/kernel/tracing), journaled before either is made, in a journal of
//! its own beside the RT journal (`trace-journal.json`), and removed on
//! [`TraceGuard::restore`], on drop, or by the next start of schedlab
//! after a SIGKILL ([`super::recover_leftover`]).
//!
//! The instance itself is made by the first traced run and kept for the
//! campaign's next ones (`trace::capture::Kept`), or made again after a
//! run that failed removed it, always under the one name journaled here;
//! the guard removes it at the end.

use std::fs::File;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use super::access::Knobs;
use super::journal::{
    self, Holder, Journal, holder_state, parent_dir, read_journal, remove_journal, restore_in_drop,
    trace_journal_path, try_lock, write_journal_exclusive,
};
use super::procs::{boot_id, self_pid};
use super::recover::recover_locked;
use super::setting::Setting;
use crate::sys::tracefs;

/// Where schedlab mounts tracefs for itself when it is not mounted at
/// /sys/kernel/tracing.
const PRIVATE_MOUNT_DIR: &str = "/run/schedlab";

/// A tracing session: the tracefs root to use and the instance name,
/// journaled; everything put back on restore or drop.
#[derive(Debug)]
pub struct TraceGuard {
    root: PathBuf,
    instance: String,
    /// The private mount schedlab made, if it made one.
    mounted: Option<PathBuf>,
    journal_path: PathBuf,
    journal: Journal,
    _lock: File,
    done: bool,
    recovered: Option<String>,
}

impl TraceGuard {
    /// Journals, then makes what a tracing session needs: tracefs mounted
    /// (at /sys/kernel/tracing when it already is; else a private mount
    /// under /run/schedlab) and the name of schedlab's instance. Refuses
    /// when another live schedlab is tracing, or without the privilege.
    pub fn acquire() -> Result<TraceGuard> {
        Self::acquire_at(trace_journal_path(), Path::new(PRIVATE_MOUNT_DIR))
    }

    pub(super) fn acquire_at(path: PathBuf, private_dir: &Path) -> Result<TraceGuard> {
        // SAFETY: geteuid has no arguments and cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            bail!(
                "tracing (trace = true, --trace) needs root: schedlab mounts tracefs and makes a \
                 tracing instance of its own"
            );
        }
        let dir = parent_dir(&path);
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let lock = try_lock(&path)?.ok_or_else(|| refusal_held(&path))?;
        let mut recovered = None;
        if let Some(j) = read_journal(&path)? {
            if holder_state(&j, boot_id().as_deref(), self_pid()) == Holder::Alive {
                return Err(refusal_held(&path));
            }
            recovered = Some(
                recover_locked(&Knobs::system(), &path, &j)
                    .context("refusing to trace before the leftover tracing journal is restored")?,
            );
        }
        let token = tracefs::random_token();
        let standard = Path::new(tracefs::STANDARD_MOUNT);
        let private = private_dir.join(format!("tracefs-{}-{token}", self_pid()));
        let (root, mounted) = match tracefs::mounted_at(standard) {
            true => (standard.to_path_buf(), None),
            false => (private.clone(), Some(private)),
        };
        let instance = format!("schedlab-{}-{token}", self_pid());
        let mut settings = Vec::new();
        if let Some(m) = &mounted {
            settings.push(Setting::TracefsMount { path: m.clone() });
        }
        settings.push(Setting::TracefsInstance {
            name: instance.clone(),
        });
        let journal = Journal::of_this_process(settings);
        write_journal_exclusive(&path, &journal)?;
        let mut guard = TraceGuard {
            root,
            instance,
            mounted: None,
            journal_path: path,
            journal,
            _lock: lock,
            done: false,
            recovered,
        };
        if let Some(m) = mounted {
            std::fs::create_dir_all(&m).with_context(|| format!("creating {}", m.display()))?;
            tracefs::mount(&m).with_context(|| format!("mounting tracefs on {}", m.display()))?;
            guard.mounted = Some(m);
        }
        if !guard.root.join("instances").is_dir() {
            bail!(
                "{} has no instances/ directory: this kernel cannot give schedlab a tracing \
                 instance of its own, and schedlab does not touch the top-level tracing state \
                 another tracing user may rely on",
                guard.root.display()
            );
        }
        Ok(guard)
    }

    /// The tracefs root the instance lives under.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The instance's name under `instances/`.
    pub fn instance_name(&self) -> &str {
        &self.instance
    }

    /// Whether schedlab mounted tracefs itself.
    pub fn mounted(&self) -> Option<&Path> {
        self.mounted.as_deref()
    }

    /// The warning text when a journal left by a schedlab that died was
    /// restored first.
    pub fn recovered(&self) -> Option<&str> {
        self.recovered.as_deref()
    }

    /// Removes the instance (if a run left it) and the private mount, and
    /// the journal; on failure the journal is kept for the next start.
    pub fn restore(mut self) -> Result<()> {
        self.done = true;
        self.restore_inner()
    }

    fn restore_inner(&mut self) -> Result<()> {
        self.journal.restore(&Knobs::system()).with_context(|| {
            format!(
                "the journal {} is kept; the next start of schedlab tries again",
                self.journal_path.display()
            )
        })?;
        remove_journal(&self.journal_path)
    }
}

impl Drop for TraceGuard {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        self.done = true;
        let Some(problem) = restore_in_drop(|| self.restore_inner()) else {
            return;
        };
        let _ = writeln!(
            io::stderr(),
            "schedlab: could not remove its tracing state ({}): {problem}",
            self.journal.originals()
        );
    }
}

fn refusal_held(path: &Path) -> anyhow::Error {
    journal::refusal_held(
        path,
        "is tracing right now",
        "one schedlab traces at a time: wait for it to finish",
    )
}
