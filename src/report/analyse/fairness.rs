//! Jain's fairness indices, and CPU shares against the kernel's weight
//! table where nice varies under a fair policy.

use super::conditions::Condition;
use super::groups::Group;
use super::runs::RunValues;
use crate::policy::{Class, Policy};
use crate::stats::{self, Summary};
use serde::Serialize;

/// Jain's fairness index within the runs of a condition.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fairness {
    pub condition: usize,
    pub label: String,
    /// Of per-process CPU time (user + system), one value per run.
    pub jain_cpu: Option<Summary>,
    /// Of per-process work done.
    pub jain_work: Option<Summary>,
    pub run_ids: Vec<i64>,
    pub jain_cpu_values: Vec<f64>,
}

/// Observed against predicted CPU share of one process position.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ShareRow {
    pub index: i64,
    pub nice: i64,
    pub predicted: f64,
    /// Mean over runs of the process's share: of the CPU time the run's
    /// processes received over their common window (duration workloads), or
    /// of the summed CPU rates, CPU time / own wall time (fixed work).
    pub observed: f64,
    /// observed / predicted − 1.
    pub error: f64,
}

/// Non-uniform nice under a fair policy: the shares the kernel's weight
/// table predicts against what the processes got.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ShareCheck {
    pub condition: usize,
    pub label: String,
    pub runs: usize,
    pub processes: usize,
    pub cpus_used: usize,
    /// More processes than CPUs and all on the same CPUs: the prediction's
    /// premise (one shared run queue) roughly holds.
    pub competing: bool,
    /// The workload stops after a fixed amount of work (not a duration).
    pub fixed_work: bool,
    pub rows: Vec<ShareRow>,
    pub max_abs_error: f64,
}

/// Jain's indices of each condition, and shares against the weight table
/// where nice varies under a fair policy.
pub(super) fn fairness_and_shares(
    conditions: &[Condition],
    groups: &[Group],
    per_condition: &[Vec<(i64, &RunValues)>],
    timed: &[String],
) -> (Vec<Fairness>, Vec<ShareCheck>) {
    let mut fairness = Vec::new();
    let mut shares = Vec::new();
    for (ci, c) in conditions.iter().enumerate() {
        let rv = &per_condition[ci];
        let mut ids = Vec::new();
        let mut jc = Vec::new();
        for (id, v) in rv {
            if let Some(j) = v.jain_cpu {
                ids.push(*id);
                jc.push(j);
            }
        }
        let jw: Vec<f64> = rv.iter().filter_map(|(_, v)| v.jain_work).collect();
        if !jc.is_empty() || !jw.is_empty() {
            fairness.push(Fairness {
                condition: ci,
                label: c.label.clone(),
                jain_cpu: stats::summarize(&jc),
                jain_work: stats::summarize(&jw),
                run_ids: ids,
                jain_cpu_values: jc,
            });
        }
        let fair =
            Policy::parse(&c.policy).is_some_and(|p| p.class() == Class::Fair && p != Policy::Idle);
        let Some((_, first)) = rv.first() else {
            continue;
        };
        let nices: Option<Vec<i64>> = first.nices.iter().copied().collect();
        let Some(nices) = nices else { continue };
        if !fair || nices.len() < 2 || nices.iter().all(|&n| n == nices[0]) {
            continue;
        }
        let same: Vec<&Vec<f64>> = rv
            .iter()
            .filter(|(_, v)| {
                v.nices
                    .iter()
                    .copied()
                    .collect::<Option<Vec<i64>>>()
                    .as_ref()
                    == Some(&nices)
            })
            .filter_map(|(_, v)| v.rate_shares.as_ref())
            .collect();
        if same.is_empty() {
            continue;
        }
        let nice32: Vec<i32> = nices.iter().map(|&n| n.clamp(-20, 19) as i32).collect();
        let predicted = stats::predicted_shares(&nice32);
        let observed: Vec<f64> = (0..nices.len())
            .map(|k| same.iter().map(|s| s[k]).sum::<f64>() / same.len() as f64)
            .collect();
        let err = stats::share_error(&observed, &predicted);
        let rows: Vec<ShareRow> = (0..nices.len())
            .map(|k| ShareRow {
                index: k as i64,
                nice: nices[k],
                predicted: predicted[k],
                observed: observed[k],
                error: err[k],
            })
            .collect();
        let max_abs_error = err
            .iter()
            .filter(|e| e.is_finite())
            .fold(0.0_f64, |m, e| m.max(e.abs()));
        let g = &groups[c.group].key;
        shares.push(ShareCheck {
            condition: ci,
            label: c.label.clone(),
            runs: same.len(),
            processes: nices.len(),
            cpus_used: c.cpus_used,
            competing: c.cpus_used >= 1 && (g.processes as usize) > c.cpus_used,
            fixed_work: !timed.contains(&g.workload),
            rows,
            max_abs_error,
        });
    }

    (fairness, shares)
}
