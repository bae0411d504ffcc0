//! What `schedlab plan` shows of a spec before anything runs: where its
//! campaign stands in a database (read-only) and how long the runs left
//! will take on this machine.

use anyhow::Result;
use std::path::Path;

use crate::plan::{Plan, Run};
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
    /// Estimated seconds for the runs not yet finished (with
    /// `repetitions = "auto"`: all of them, up to the most).
    pub estimate_s: f64,
    /// `repetitions = "auto"`: the runs it will likely take.
    pub auto_estimate: Option<AutoEstimate>,
    /// How the estimate of each guest level with runs left was made.
    pub guest_estimate: Vec<String>,
}

/// How many runs a `repetitions = "auto"` campaign will likely take: from
/// the per-condition CV of the latest earlier campaign of the same name in
/// the database, or (for conditions it lacks) a pilot of min_repetitions.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct AutoEstimate {
    /// The earlier campaign the CVs come from.
    pub from_campaign: Option<i64>,
    /// Conditions whose CV it knew.
    pub conditions_known: usize,
    pub conditions: usize,
    /// The estimated runs: for each known condition the n at which its CV
    /// meets the rule (at most max), for the others min_repetitions.
    pub runs: usize,
}

/// [`AutoEstimate`] of `spec` against the campaigns in `store` (None
/// without `repetitions = "auto"`).
fn auto_estimate(spec: &Spec, runs: &[Run], store: Option<&Store>) -> Result<Option<AutoEstimate>> {
    let Some(p) = super::precision::Precision::of(spec) else {
        return Ok(None);
    };
    let mut conditions: Vec<&str> = runs.iter().map(|r| r.condition_key()).collect();
    conditions.sort_unstable();
    conditions.dedup();
    let mut from_campaign = None;
    let mut cvs: std::collections::HashMap<String, f64> = Default::default();
    if let Some(store) = store {
        for id in store.campaigns_named(&spec.name)? {
            let mut values: std::collections::HashMap<String, Vec<f64>> = Default::default();
            for r in store.precision_inputs(id)? {
                if let Some(v) = p.value(&r).value {
                    let c = crate::plan::condition_of_key(&r.key).to_string();
                    values.entry(c).or_default().push(v);
                }
            }
            for (c, xs) in values {
                let m = crate::stats::sequential::Moments::of(&xs);
                if let (Some(var), true) = (m.variance(), m.mean != 0.0) {
                    cvs.insert(c, var.sqrt() / m.mean.abs());
                }
            }
            if conditions.iter().any(|c| cvs.contains_key(*c)) {
                from_campaign = Some(id);
                break;
            }
            cvs.clear();
        }
    }
    let max = p.max_rounds as usize;
    let mut total = 0;
    let mut known = 0;
    for c in &conditions {
        total += match cvs.get(*c) {
            Some(&cv) => {
                known += 1;
                p.rule.expected_n(cv, max)
            }
            None => p.rule.min_n.min(max),
        };
    }
    Ok(Some(AutoEstimate {
        from_campaign,
        conditions_known: known,
        conditions: conditions.len(),
        runs: total,
    }))
}

/// Check a spec against this machine as `run` would (`force` as for run),
/// look up its campaign in `db` read-only, and estimate the runs left from
/// a calibration, which waits for the measurement lock like a run.
pub fn preview(spec: &Spec, origin: &str, db: &Path, force: bool) -> Result<Preview> {
    let env = envinfo::capture();
    let plan = Plan::of(spec);
    check_machine(spec, &plan, origin, &env, force)?;
    // What a workload needs of this machine (a command's program): refused
    // by plan; run records each such run as skipped, with the reason.
    for w in &spec.workloads {
        w.workload.check_machine().map_err(|l| SpecError::Invalid {
            origin: origin.to_string(),
            key: format!("workloads.{}.{}", w.name, l.key),
            message: l.message,
        })?;
    }
    let store = match db.exists() {
        // Only looks: never creates, upgrades or writes the database.
        true => Some(Store::open_existing(db)?),
        false => None,
    };
    let (existing, done) = if let Some(store) = &store {
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
    let runs = plan.in_order(seed.unwrap_or(0));
    let auto_estimate = auto_estimate(spec, &runs, store.as_ref())?;
    let rates = super::machine::calibrate_locked("schedlab plan")?;
    let pending: Vec<&Run> = runs.iter().filter(|r| !done.contains(&r.key)).collect();
    let period = env.sched_rt_period_us.unwrap_or(1_000_000);
    let has_guests = spec.machines.iter().any(|m| m.guest.is_some());
    let measured = match (&store, &existing) {
        (Some(s), Some(c)) if has_guests => {
            crate::machine::estimate::Measured::from_store(s, c.id)?
        }
        _ => Default::default(),
    };
    let cpus = env.cpus_allowed.len();
    let estimate_s =
        crate::machine::estimate::estimates(spec, &runs, &pending, cpus, &rates, period, &measured)
            .iter()
            .sum();
    let guest_estimate = crate::machine::estimate::describe(spec, &pending, &measured);
    Ok(Preview {
        env,
        existing,
        done,
        seed,
        runs,
        rates,
        estimate_s,
        auto_estimate,
        guest_estimate,
    })
}
