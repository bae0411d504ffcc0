//! Arguments several commands share: where a spec comes from (a file or a
//! preset, with `--scale`, `--set` and `--trace`) and which database.

use anyhow::Result;
use clap::Args;
use std::path::{Path, PathBuf};

use crate::out;
use crate::spec::{self, SpecError, presets};

#[derive(Args)]
pub(super) struct SpecSource {
    /// The experiment spec (TOML).
    spec: Option<PathBuf>,
    /// Use a built-in preset instead of a file (`schedlab preset list`).
    #[arg(long, conflicts_with = "spec")]
    preset: Option<String>,
    /// Multiply the work per process by F (e.g. 0.01 for a quick look).
    #[arg(long, value_name = "F")]
    scale: Option<f64>,
    /// Override a key of the spec, e.g. --set repetitions=3 --set 'matrix.processes=[2,4]'.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Record the kernel's scheduling events of every run (tracefs; root),
    /// stored with the run: the same as --set trace=true.
    #[arg(long)]
    trace: bool,
}

#[derive(Args)]
pub(super) struct DbArg {
    /// The SQLite database.
    #[arg(long, default_value = "schedlab.db", env = "SCHEDLAB_DB")]
    pub(super) db: PathBuf,
}

/// A loaded spec with where it came from.
pub(super) struct Loaded {
    pub(super) spec: spec::Spec,
    pub(super) origin: String,
    pub(super) text: String,
    pub(super) overrides: Vec<String>,
    /// What a preset traced where permitted did about tracing, to tell the
    /// user (see [`presets::auto_trace`]).
    pub(super) trace_note: Option<String>,
}

impl SpecSource {
    /// The spec as given, for the model (`simulate`), which never traces.
    pub(super) fn load(&self) -> Result<Loaded> {
        self.load_with(false)
    }

    /// The spec for this machine (`run`, `plan`): a preset traced where
    /// permitted is traced when this process may.
    pub(super) fn load_measured(&self) -> Result<Loaded> {
        self.load_with(true)
    }

    fn load_with(&self, measured: bool) -> Result<Loaded> {
        let mut preset = None;
        let (origin, text) = match (&self.spec, &self.preset) {
            (Some(path), None) => (out::path(path), spec::read_file(path)?),
            (None, Some(name)) => {
                let p = presets::find(name).ok_or_else(|| SpecError::Invalid {
                    origin: "--preset".into(),
                    key: name.clone(),
                    message: format!("no such preset; available: {}", presets::names()),
                })?;
                preset = Some(p);
                (format!("preset {name}"), p.toml.to_string())
            }
            _ => {
                return Err(SpecError::Parse {
                    origin: "schedlab".into(),
                    message: "give a spec file or --preset NAME (see `schedlab preset list`)"
                        .into(),
                }
                .into());
            }
        };
        let mut overrides = self.set.clone();
        if let Some(f) = self.scale {
            spec::check_scale(f).map_err(|message| SpecError::Parse {
                origin: "--scale".into(),
                message,
            })?;
            overrides.push(format!("scale={f:?}"));
        }
        if self.trace {
            overrides.push("trace=true".to_string());
        }
        let mut trace_note = None;
        if let Some(p) = preset.filter(|_| measured) {
            let (set, note) =
                presets::auto_trace(p, &overrides, crate::sys::probe::trace_permission());
            overrides.extend(set);
            trace_note = note;
        }
        let mut spec = spec::load(&text, &origin, &overrides)?;
        if let Some(path) = &self.spec {
            let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
            spec.resolve_workdir(dir.unwrap_or(Path::new(".")));
        }
        Ok(Loaded {
            spec,
            origin,
            text,
            overrides,
            trace_note,
        })
    }
}
