//! The weighted runs of a campaign: which runs' stored details they need,
//! the runs built from those details, and their grouping by the analysis's
//! groups and contenders.

use serde_json::Value;

use super::charts;
use super::model::{self, Contender, ProcFacts, WeightGroup, WeightedRun, WrrFacts};
use crate::policy::Assignment;
use crate::report::analyse::Analysis;
use crate::report::sections::{Needs, RunDetails, group_of};
use crate::store::ReportRun;

/// Names of the campaign's priority modes of mode "weights".
pub fn weight_modes(spec_json: &str) -> Vec<String> {
    let v: Value = serde_json::from_str(spec_json).unwrap_or_default();
    v.get("priorities")
        .and_then(|p| p.as_array())
        .map(|p| {
            p.iter()
                .filter(|m| {
                    m.pointer("/assignment/mode").and_then(|x| x.as_str()) == Some("weights")
                })
                .filter_map(|m| m.get("name").and_then(|n| n.as_str()).map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// CPUs a group's processes were meant to share: its CPU list, or every
/// online CPU for "all".
fn group_cpus(a: &Analysis, cpus: &str) -> usize {
    match crate::spec::Cpus::parse(cpus) {
        Ok(crate::spec::Cpus::List(l)) if !l.is_empty() => l.len(),
        _ => a
            .environments
            .first()
            .map_or(1, |e| e.cpus_online.max(1) as usize),
    }
}

/// The ok runs of a campaign that may have weights: WRR runs and runs of a
/// priority mode of mode "weights" (none when the campaign has neither).
pub fn candidates(a: &Analysis) -> impl Iterator<Item = &ReportRun> {
    let modes = weight_modes(&a.campaign.spec_json);
    let any = a.factors.policies.iter().any(|p| p == "wrr") || !modes.is_empty();
    a.runs.iter().filter(move |r| {
        any && r.status == "ok" && (r.policy == "wrr" || modes.contains(&r.priority_mode))
    })
}

/// The stored details the weighted runs need: documents and processes of
/// every candidate, slices of the WRR ones.
pub fn needs(a: &Analysis) -> Needs {
    let runs: Vec<&ReportRun> = candidates(a).collect();
    let ids: Vec<i64> = runs.iter().map(|r| r.id).collect();
    Needs {
        documents: ids.clone(),
        processes: ids,
        slices: runs
            .iter()
            .filter(|r| r.policy == "wrr")
            .map(|r| r.id)
            .collect(),
        ..Needs::default()
    }
}

/// The weighted runs of the campaign, from the details of [`needs`].
pub fn weighted_runs(a: &Analysis, mut details: RunDetails) -> Vec<WeightedRun> {
    let mut out = Vec::new();
    for r in candidates(a) {
        let Some(group) = group_of(a, r) else {
            continue;
        };
        let Some((Some(plan), extra)) = details.documents.get(&r.id) else {
            continue;
        };
        let weights = match &plan.priorities.assignment {
            a @ Assignment::Weights { .. } => a.weights(plan.processes as usize),
            a if r.policy == "wrr" => a.weights(plan.processes as usize),
            _ => continue,
        };
        let wrr = WrrFacts::from_extra(extra);
        let procs = details
            .processes
            .remove(&r.id)
            .unwrap_or_default()
            .into_iter()
            .filter(|p| p.role == "worker")
            .map(|p| ProcFacts {
                index: p.index as usize,
                cpu_ns: p
                    .kernel
                    .get(crate::fields::Field::RunNs)
                    .map_or((p.usage.utime_us + p.usage.stime_us) as f64 * 1e3, |ns| {
                        ns as f64
                    }),
                work: p.work.map(|w| w as f64),
                end_s: p.end_ns.or(Some(p.wall_ns)).map(|ns| ns as f64 / 1e9),
                nice: p.sched.nice.map(i64::from),
                dl_runtime_ns: p.sched.dl_runtime_ns,
                dl_period_ns: p.sched.dl_period_ns,
            })
            .collect();
        out.push(WeightedRun {
            run_id: r.id,
            seq: r.seq,
            rep: r.rep,
            group,
            policy: r.policy.clone(),
            weights,
            procs,
            slices: details.slices.remove(&r.id).unwrap_or_default(),
            wrr,
        });
    }
    out
}

/// The groups of the analysis with weighted runs, each with its
/// contenders in the campaign's policy order.
pub fn groups(a: &Analysis, runs: &[WeightedRun], quantum_ns: Option<f64>) -> Vec<WeightGroup> {
    let mut out = Vec::new();
    for (gi, g) in a.groups.iter().enumerate() {
        let mine: Vec<&WeightedRun> = runs.iter().filter(|r| r.group == gi).collect();
        if mine.is_empty() {
            continue;
        }
        let mut keys: Vec<(String, Option<String>)> =
            mine.iter().map(|r| r.contender_key()).collect();
        keys.sort_by_key(|(p, m)| {
            (
                a.factors
                    .policies
                    .iter()
                    .position(|x| x == p)
                    .unwrap_or(usize::MAX),
                m.clone(),
            )
        });
        keys.dedup();
        let weights = model::distinct(&mine[0].weights);
        let info = a
            .factors
            .workloads
            .iter()
            .find(|w| w.name == g.key.workload);
        let duration_based = info.is_some_and(|w| w.duration_based);
        let cpus = group_cpus(a, &g.key.cpus);
        let ctx = model::GroupContext {
            settings: &a.settings,
            group_label: &g.label,
            weights: &weights,
            duration_based,
            cpus,
            quantum_ns,
        };
        let contenders: Vec<Contender> = keys
            .iter()
            .filter_map(|k| {
                let runs: Vec<&WeightedRun> = mine
                    .iter()
                    .copied()
                    .filter(|r| &r.contender_key() == k && model::distinct(&r.weights) == weights)
                    .collect();
                (!runs.is_empty()).then(|| {
                    model::contender(&ctx, charts::contender_label(&k.0, k.1.as_deref()), &runs)
                })
            })
            .collect();
        out.push(WeightGroup {
            group: gi,
            label: g.label.clone(),
            workload: g.key.workload.clone(),
            duration_based,
            work_unit: info.map_or_else(String::new, |w| w.work_unit.clone()),
            weights,
            cpus,
            contenders,
        });
    }
    out
}
