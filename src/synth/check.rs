//! A replay run under its original's condition and compared with it: the
//! replay spec (traced) run as a campaign into a database, its one run
//! read and recorded like the original's, and the figures of
//! [`super::fidelity::compare`].

use std::path::Path;

use anyhow::{Context, Result};

use super::fidelity::{Row, compare};
use super::{Read, read_run};
use crate::store::Store;
use crate::{campaign, spec};

/// The replay's run and what it is against the original.
pub struct Checked {
    pub run_id: i64,
    pub replay: Read,
    pub rows: Vec<Row>,
}

/// Run the replay spec `text` (from `origin`) into `db` and compare it with
/// `original`.
pub fn run_and_compare(
    original: &Read,
    text: &str,
    origin: &str,
    db: &Path,
    allow_lost: bool,
) -> Result<Checked> {
    let (id, replay) = run_replay(text, origin, db, allow_lost)?;
    let rows = compare(
        &original.recording,
        original.source.makespan_ns,
        &replay.recording,
        replay.source.makespan_ns,
    );
    Ok(Checked {
        run_id: id,
        replay,
        rows,
    })
}

/// Run the replay spec `text` (from `origin`) into `db`: its one run, read
/// and recorded.
pub fn run_replay(text: &str, origin: &str, db: &Path, allow_lost: bool) -> Result<(i64, Read)> {
    let mut spec = spec::load(text, origin, &[])?;
    spec.resolve_workdir(&std::env::temp_dir());
    let opts = campaign::Options {
        db: db.to_path_buf(),
        quiet: true,
        retry_failed: false,
        force: false,
        allow_concurrent: false,
    };
    let s = campaign::run(&spec, origin, text, &[], &opts)?;
    if let Some(sig) = s.interrupted {
        anyhow::bail!("interrupted by signal {sig} while the replay ran");
    }
    let store = Store::open_existing(db)?;
    let id = *store
        .campaign_run_ids(s.campaign.id)?
        .last()
        .context("the replay's campaign has no run")?;
    let replay = read_run(&store, id, allow_lost)
        .with_context(|| format!("the replay's run {id} in {}", db.display()))?;
    Ok((id, replay))
}
