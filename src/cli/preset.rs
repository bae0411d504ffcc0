//! `schedlab preset list / show`: the built-in experiment specs (the list
//! as text or, with `--json`, as JSON).

use anyhow::Result;
use std::io::Write;

use crate::out;
use crate::spec::{SpecError, presets};

#[derive(clap::Subcommand)]
pub(super) enum PresetCommand {
    /// List the built-in presets.
    List {
        /// Print JSON instead of text: an array of {name, summary}.
        #[arg(long)]
        json: bool,
    },
    /// Print a preset as TOML, to start a spec from.
    Show { name: String },
}

pub(super) fn run(command: PresetCommand) -> Result<i32> {
    match command {
        PresetCommand::List { json: true } => {
            let list: Vec<_> = presets::PRESETS
                .iter()
                .map(|p| serde_json::json!({ "name": p.name, "summary": p.summary }))
                .collect();
            outln!("{}", serde_json::to_string_pretty(&list)?)?;
        }
        PresetCommand::List { json: false } => {
            for p in presets::PRESETS {
                outln!("{:<12} {}", p.name, p.summary)?;
            }
        }
        PresetCommand::Show { name } => {
            let p = presets::find(&name).ok_or_else(|| SpecError::Invalid {
                origin: "preset show".into(),
                key: name.clone(),
                message: format!("no such preset; available: {}", presets::names()),
            })?;
            write!(out::stdout(), "{}", p.toml)?;
        }
    }
    Ok(0)
}
