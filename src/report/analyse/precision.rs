//! A `repetitions = "auto"` campaign's precision as the report states it:
//! the rule and target, each workload's primary metric, and per condition
//! the rounds run, the values used, the half-width reached and whether the
//! target was met ([`crate::campaign::precision`], recomputed from the
//! stored runs exactly as the campaign decided).

use anyhow::Result;
use serde::Serialize;

use crate::campaign::precision::{ConditionPrecision, Precision, State};
use crate::spec::Spec;
use crate::store::{ReportCampaign, Store};

/// The precision of an auto campaign.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AutoPrecision {
    pub target_ci_pct: f64,
    pub min_repetitions: u32,
    pub max_repetitions: u32,
    /// Each workload and the name of its primary metric.
    pub primary_metrics: Vec<(String, String)>,
    pub conditions: Vec<ConditionPrecision>,
}

impl AutoPrecision {
    /// Conditions that ran every round without reaching the target.
    pub fn at_max(&self) -> Vec<&ConditionPrecision> {
        self.conditions
            .iter()
            .filter(|c| c.state == State::AtMax)
            .collect()
    }

    /// Conditions with rounds left (an interrupted campaign).
    pub fn running(&self) -> Vec<&ConditionPrecision> {
        self.conditions
            .iter()
            .filter(|c| c.state == State::Running)
            .collect()
    }
}

/// The precision of `campaign` when its spec asked for
/// `repetitions = "auto"` (None otherwise, or for a spec this schedlab
/// cannot read back).
pub fn of_campaign(store: &Store, campaign: &ReportCampaign) -> Result<Option<AutoPrecision>> {
    let Ok(spec) = serde_json::from_str::<Spec>(&campaign.spec_json) else {
        return Ok(None);
    };
    let (Some(auto), Some(p)) = (spec.auto_repetitions, Precision::of(&spec)) else {
        return Ok(None);
    };
    Ok(Some(AutoPrecision {
        target_ci_pct: auto.target_ci_pct,
        min_repetitions: auto.min_repetitions,
        max_repetitions: spec.repetitions,
        primary_metrics: spec
            .workloads
            .iter()
            .map(|w| {
                let m = p.metric_of(&w.name).map_or("?", |m| m.name());
                (w.name.clone(), m.to_string())
            })
            .collect(),
        conditions: p.load(store, campaign.id)?,
    }))
}
