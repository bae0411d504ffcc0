//! Where each condition of a `repetitions = "auto"` campaign stands: the
//! stopping rule ([`crate::stats::sequential::StopRule`]) replayed over its
//! stored runs, round by round. The campaign loop asks it after each round
//! which conditions may stop; a resumed campaign, `plan` and the report ask
//! it the same way, so every decision is recomputed from what is stored,
//! never remembered.

use anyhow::Result;
use std::collections::{BTreeMap, HashMap};

use crate::fields::metric::{self, Metric};
use crate::plan::condition_of_key;
use crate::spec::Spec;
use crate::stats::sequential::{Moments, StopRule};
use crate::store::{PrecisionInput, Store};

/// A stored run's repetition and primary value (None: not ok, or no value).
#[derive(Debug, Clone, PartialEq)]
pub struct RunValue {
    pub key: String,
    pub rep: u32,
    pub value: Option<f64>,
}

/// Where a condition stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// The rule was met after this round: no more runs.
    Reached { after_round: u32 },
    /// Every round up to the most ran without meeting the rule.
    AtMax,
    /// Rounds are left.
    Running,
}

/// One condition's precision over its stored runs.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ConditionPrecision {
    /// The condition's run key without the repetition.
    pub condition: String,
    /// Rounds stored in a row from the first (any status).
    pub rounds: u32,
    /// Values in the statistic (ok runs with a value) up to the stop, or
    /// over all those rounds.
    pub n: usize,
    pub mean: Option<f64>,
    /// Half-width of the 95 % interval of the mean, % of the mean.
    pub half_width_pct: Option<f64>,
    pub state: State,
}

/// The rule and bounds of an auto campaign, with each workload's primary
/// metric.
#[derive(Debug, Clone, PartialEq)]
pub struct Precision {
    pub rule: StopRule,
    pub max_rounds: u32,
    metrics: HashMap<String, Metric>,
}

impl Precision {
    /// The precision settings of `spec`, when it asks for
    /// `repetitions = "auto"`.
    pub fn of(spec: &Spec) -> Option<Precision> {
        let auto = spec.auto_repetitions?;
        Some(Precision {
            rule: auto.rule(),
            max_rounds: spec.repetitions,
            metrics: spec
                .workloads
                .iter()
                .map(|w| (w.name.clone(), metric::primary(&w.workload)))
                .collect(),
        })
    }

    /// The primary metric of a workload of the spec.
    pub fn metric_of(&self, workload: &str) -> Option<Metric> {
        self.metrics.get(workload).copied()
    }

    /// A stored run's primary value.
    pub fn value(&self, r: &PrecisionInput) -> RunValue {
        let value = match (r.ok, self.metric_of(&r.workload)) {
            (true, Some(Metric::Work)) => r.mean_work,
            (true, Some(_)) => r.makespan_ns.map(|ns| ns as f64 / 1e9),
            _ => None,
        };
        RunValue {
            key: r.key.clone(),
            rep: r.rep,
            value: value.filter(|v| v.is_finite()),
        }
    }

    /// Every condition of campaign `campaign_id`, from its stored runs.
    pub fn load(&self, store: &Store, campaign_id: i64) -> Result<Vec<ConditionPrecision>> {
        let runs: Vec<RunValue> = store
            .precision_inputs(campaign_id)?
            .iter()
            .map(|r| self.value(r))
            .collect();
        Ok(assess(&runs, self.rule, self.max_rounds))
    }
}

/// Replay the rule over each condition's stored runs: after round k (its
/// repetitions 1..=k all stored) it stops if the values of those rounds
/// meet the rule. Conditions by key.
pub fn assess(runs: &[RunValue], rule: StopRule, max_rounds: u32) -> Vec<ConditionPrecision> {
    let mut by_condition: BTreeMap<&str, BTreeMap<u32, Option<f64>>> = BTreeMap::new();
    for r in runs {
        by_condition
            .entry(condition_of_key(&r.key))
            .or_default()
            .insert(r.rep, r.value);
    }
    by_condition
        .into_iter()
        .map(|(condition, reps)| {
            let mut m = Moments::default();
            let mut rounds = 0;
            let mut state = State::Running;
            while let Some(v) = reps.get(&(rounds + 1)) {
                rounds += 1;
                if let Some(x) = v {
                    m.push(*x);
                }
                if rule.satisfied(&m) {
                    state = State::Reached {
                        after_round: rounds,
                    };
                    break;
                }
            }
            if state == State::Running && rounds >= max_rounds {
                state = State::AtMax;
            }
            ConditionPrecision {
                condition: condition.to_string(),
                rounds,
                n: m.n,
                mean: (m.n > 0).then_some(m.mean),
                half_width_pct: m.half_width_pct(),
                state,
            }
        })
        .collect()
}

/// The conditions that need no run of round `round` (they stopped before).
pub fn stopped_before(states: &[ConditionPrecision], round: u32) -> Vec<&str> {
    states
        .iter()
        .filter(|c| matches!(c.state, State::Reached { after_round } if after_round < round))
        .map(|c| c.condition.as_str())
        .collect()
}

/// "±3.1 % (n = 10)", "±3.1 % (n = 10, reached)", "no value yet".
pub fn describe(c: &ConditionPrecision) -> String {
    let hw = match c.half_width_pct {
        Some(h) => format!("±{h:.2} %"),
        None => "no interval yet".to_string(),
    };
    let state = match c.state {
        State::Reached { .. } => ", reached",
        State::AtMax => ", at the most repetitions without reaching the target",
        State::Running => "",
    };
    format!("{hw} (n = {}{state})", c.n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rv(cond: &str, rep: u32, value: Option<f64>) -> RunValue {
        RunValue {
            key: format!("{cond};rep={rep}"),
            rep,
            value,
        }
    }

    const RULE: StopRule = StopRule {
        target_ci_pct: 5.0,
        min_n: 3,
    };

    #[test]
    fn a_steady_condition_stops_a_noisy_one_runs_to_the_most_a_short_one_goes_on() {
        let mut runs = Vec::new();
        for rep in 1..=12 {
            runs.push(rv("a", rep, Some(1.0 + 0.001 * (rep % 2) as f64)));
            runs.push(rv("b", rep, Some(if rep % 2 == 0 { 1.0 } else { 2.0 })));
        }
        for rep in 1..=4 {
            runs.push(rv("c", rep, Some(1.0)));
        }
        let s = assess(&runs, RULE, 12);
        assert_eq!(s.len(), 3);
        assert_eq!(s[0].state, State::Reached { after_round: 10 });
        assert_eq!(s[0].n, 10, "the values up to the stop");
        assert!(s[0].half_width_pct.unwrap() < 5.0);
        assert_eq!((s[1].state, s[1].rounds, s[1].n), (State::AtMax, 12, 12));
        assert!(s[1].half_width_pct.unwrap() > 5.0);
        assert_eq!((s[2].state, s[2].rounds), (State::Running, 4));
        assert_eq!(stopped_before(&s, 11), vec!["a"]);
        assert!(stopped_before(&s, 10).is_empty(), "decided after round 10");
        assert!(describe(&s[1]).contains("without reaching"));
    }

    #[test]
    fn a_failed_run_counts_as_a_round_without_a_value_and_a_gap_ends_the_replay() {
        let mut runs: Vec<RunValue> = (1..=12).map(|r| rv("a", r, Some(1.0))).collect();
        runs[3].value = None;
        let s = assess(&runs, RULE, 12);
        assert_eq!(s[0].state, State::Reached { after_round: 11 });
        assert_eq!(s[0].n, 10);
        // Round 2 missing (forgotten for a retry): nothing after it counts.
        runs.remove(1);
        let s = assess(&runs, RULE, 12);
        assert_eq!((s[0].rounds, s[0].state), (1, State::Running));
    }
}
