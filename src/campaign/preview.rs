//! What `schedlab plan` shows of a spec before anything runs: where its
//! campaign stands in a database (read-only) and how long the runs left
//! will take on this machine.

use anyhow::Result;
use std::path::Path;

use crate::plan::{self, Run};
use crate::spec::{Spec, SpecError};
use crate::store::{Campaign, Store};
use crate::sys::envinfo;

use super::check_machine;

/// What `plan` shows of a spec: where its campaign stands in `db` and how
/// long the rest will take. Nothing is run, created or written.
pub struct Preview {
    pub env: envinfo::EnvSnapshot,
    /// The spec's campaign in `db`, when it exists already.
    pub existing: Option<Campaign>,
    /// Keys of its finished runs.
    pub done: std::collections::HashSet<String>,
    /// The run order's seed: the stored campaign's, else the spec's.
    pub seed: Option<u64>,
    /// Every run, in campaign order (sequential order 0 when no seed).
    pub runs: Vec<Run>,
    pub rates: crate::workload::Rates,
    /// Estimated seconds for the runs not yet finished.
    pub estimate_s: f64,
}

/// Check a spec against this machine as `run` would (`force` as for run),
/// look up its campaign in `db` read-only, and estimate the runs left from
/// a calibration, which waits for the measurement lock like a run.
pub fn preview(spec: &Spec, origin: &str, db: &Path, force: bool) -> Result<Preview> {
    let env = envinfo::capture();
    check_machine(spec, origin, &env, force)?;
    // What a workload needs of this machine (a command's program): refused
    // by plan; run records each such run as skipped, with the reason.
    for w in &spec.workloads {
        w.workload.check_machine().map_err(|l| SpecError::Invalid {
            origin: origin.to_string(),
            key: format!("workloads.{}.{}", w.name, l.key),
            message: l.message,
        })?;
    }
    let (existing, done) = if db.exists() {
        // Only looks: never creates, upgrades or writes the database.
        let store = Store::open_existing(db)?;
        match store.find_campaign(spec, &crate::store::Host::of(&env))? {
            Some(c) => {
                let keys = store.finished_keys(c.id)?;
                (Some(c), keys)
            }
            None => (None, Default::default()),
        }
    } else {
        (None, Default::default())
    };
    let seed = existing.as_ref().map(|c| c.seed).or(spec.seed);
    let runs = plan::expand(spec, seed.unwrap_or(0));
    let rates = super::machine::calibrate_locked("schedlab plan")?;
    let pending: Vec<&Run> = runs.iter().filter(|r| !done.contains(&r.key)).collect();
    let period = env.sched_rt_period_us.unwrap_or(1_000_000);
    let estimate_s = plan::estimates(spec, &pending, env.cpus_allowed.len(), &rates, period)
        .iter()
        .sum();
    Ok(Preview {
        env,
        existing,
        done,
        seed,
        runs,
        rates,
        estimate_s,
    })
}
