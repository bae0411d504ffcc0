//! Loading the weighted runs of a campaign from the store and grouping
//! them by the analysis's groups and contenders.

use anyhow::Result;
use serde_json::Value;
use std::collections::HashMap;

use super::charts;
use super::model::{self, Contender, ProcFacts, WeightGroup, WeightedRun, WrrFacts};
use crate::policy::Assignment;
use crate::report::analyse::Analysis;
use crate::report::sections::group_of;
use crate::store::Store;

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

/// Load the weighted runs of the campaign.
pub fn load(store: &Store, a: &Analysis) -> Result<Vec<WeightedRun>> {
    let modes = weight_modes(&a.campaign.spec_json);
    let runs: Vec<_> = store
        .report_runs(a.campaign.id)?
        .into_iter()
        .filter(|r| r.status == "ok" && (r.policy == "wrr" || modes.contains(&r.priority_mode)))
        .collect();
    if runs.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<i64> = runs.iter().map(|r| r.id).collect();
    let docs: HashMap<i64, (Option<crate::plan::Run>, Value)> = store
        .report_run_documents(&ids)?
        .into_iter()
        .map(|(id, run, extra)| (id, (run, extra)))
        .collect();
    let mut procs: HashMap<i64, Vec<ProcFacts>> = HashMap::new();
    for (id, p) in store.report_process_records(&ids)? {
        if p.role != "worker" {
            continue;
        }
        procs.entry(id).or_default().push(ProcFacts {
            index: p.index as usize,
            cpu_ns: p
                .run_ns
                .map_or((p.usage.utime_us + p.usage.stime_us) as f64 * 1e3, |ns| {
                    ns as f64
                }),
            work: p.work.map(|w| w as f64),
            end_s: p.end_ns.or(Some(p.wall_ns)).map(|ns| ns as f64 / 1e9),
            nice: p.sched.nice.map(i64::from),
            dl_runtime_ns: p.sched.dl_runtime_ns,
            dl_period_ns: p.sched.dl_period_ns,
        });
    }
    let mut out = Vec::new();
    for r in runs {
        let Some(group) = group_of(a, &r) else {
            continue;
        };
        let Some((Some(plan), extra)) = docs.get(&r.id) else {
            continue;
        };
        let weights = match &plan.priorities.assignment {
            a @ Assignment::Weights { .. } => a.weights(plan.processes as usize),
            a if r.policy == "wrr" => a.weights(plan.processes as usize),
            _ => continue,
        };
        let wrr = WrrFacts::from_extra(extra);
        let slices = if r.policy == "wrr" {
            store.slices(r.id)?
        } else {
            Vec::new()
        };
        out.push(WeightedRun {
            run_id: r.id,
            seq: r.seq,
            rep: r.rep,
            group,
            policy: r.policy.clone(),
            weights,
            procs: procs.remove(&r.id).unwrap_or_default(),
            slices,
            wrr,
        });
    }
    Ok(out)
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
