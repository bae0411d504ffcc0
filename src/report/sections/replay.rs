//! The replay section: each `replay` workload of the campaign beside the
//! workload it was synthesized from (its `original` key), condition by
//! condition (policy, priorities, CPUs, sweeps), with the figures, rules
//! and verdicts of [`crate::synth::fidelity`] (the same computation as
//! `schedlab synthesize --check` and `schedlab bench replay`). Each side
//! is its median-makespan ok run of the condition; the figures beyond the
//! makespan come from both runs' traces, recorded as `synthesize` records
//! them, and the section says so when a run is not traced or the original
//! is not in the campaign.

use std::collections::HashMap;

use anyhow::Result;
use serde_json::{Value, json};

use super::{Needs, RunDetails, Section, Table};
use crate::report::analyse::Analysis;
use crate::report::blocks::Block;
use crate::store::ReportRun;
use crate::synth::fidelity::{self, Row};
use crate::synth::record::Recording;
use crate::workload::Workload;

/// The replay against its original under one condition.
#[derive(Debug, Clone, PartialEq)]
pub struct Pairing {
    pub replay: String,
    pub original: String,
    pub condition: String,
    /// The condition the replay was captured in (its `captured` key).
    pub captured: bool,
    pub replay_run: Option<i64>,
    pub original_run: Option<i64>,
    /// Ok runs of each side under the condition.
    pub replay_runs: usize,
    pub original_runs: usize,
    pub rows: Vec<Row>,
    /// Why figures are missing.
    pub notes: Vec<String>,
}

/// A replay workload and what it names as its origin.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Link {
    pub replay: String,
    /// Empty: the replay names no original (`original` key).
    pub original: String,
    /// The condition it was captured in (`captured`; empty: not known).
    pub captured: String,
}

type Cond = (
    String,
    i64,
    String,
    String,
    Option<i64>,
    Option<i64>,
    Option<String>,
    Option<String>,
);

fn cond(r: &ReportRun) -> Cond {
    (
        r.policy.clone(),
        r.processes,
        r.priority_mode.clone(),
        r.cpus.clone(),
        r.rt_runtime_us,
        r.slice_us,
        r.ext_scheduler.clone(),
        r.machine.clone(),
    )
}

fn cond_label(c: &Cond) -> String {
    let mut s = format!("{}, cpus {}", c.0.to_uppercase(), c.3);
    if !matches!(c.2.as_str(), "none" | "uniform") {
        s.push_str(&format!(", priorities {}", c.2));
    }
    if let Some(v) = c.4 {
        s.push_str(&format!(", rt_runtime_us {v}"));
    }
    if let Some(v) = c.5 {
        s.push_str(&format!(", slice_us {v}"));
    }
    if let Some(v) = &c.6 {
        s.push_str(&format!(", ext {v}"));
    }
    if let Some(v) = &c.7 {
        s.push_str(&format!(", machine {v}"));
    }
    s
}

/// The ok run with the median makespan of `workload` under `c` (the lower
/// middle one), and how many ok runs there are.
fn median_run<'a>(
    runs: &'a [ReportRun],
    workload: &str,
    c: &Cond,
) -> (Option<&'a ReportRun>, usize) {
    let mut ok: Vec<&ReportRun> = runs
        .iter()
        .filter(|r| r.workload == workload && r.status == "ok" && r.makespan_ns.is_some())
        .filter(|r| &cond(r) == c)
        .collect();
    ok.sort_by_key(|r| (r.makespan_ns, r.id));
    let n = ok.len();
    (n.checked_sub(1).map(|i| ok[i / 2]), n)
}

fn replay_names(runs: &[ReportRun]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for r in runs.iter().filter(|r| r.workload_kind == "replay") {
        if !names.contains(&r.workload) {
            names.push(r.workload.clone());
        }
    }
    names
}

/// The conditions `workload` ran under, in campaign order.
fn conditions_of(runs: &[ReportRun], workload: &str) -> Vec<Cond> {
    let mut out: Vec<Cond> = Vec::new();
    for r in runs.iter().filter(|r| r.workload == workload) {
        let c = cond(r);
        if !out.contains(&c) {
            out.push(c);
        }
    }
    out
}

/// The runs whose traces the section compares: the median run of each
/// replay and of its original under each condition the replay ran.
fn wanted(runs: &[ReportRun], links: &[Link]) -> Vec<i64> {
    let mut ids = Vec::new();
    for l in links {
        for c in conditions_of(runs, &l.replay) {
            for w in [&l.replay, &l.original]
                .into_iter()
                .filter(|w| !w.is_empty())
            {
                if let (Some(r), _) = median_run(runs, w, &c)
                    && !ids.contains(&r.id)
                {
                    ids.push(r.id);
                }
            }
        }
    }
    ids
}

/// Each replay's pairings, condition by condition: pure, from the runs,
/// the links and the recordings read.
pub fn pairings(
    runs: &[ReportRun],
    links: &[Link],
    recordings: &HashMap<i64, Result<Recording, String>>,
) -> Vec<Pairing> {
    let mut out = Vec::new();
    for l in links {
        for c in conditions_of(runs, &l.replay) {
            out.push(pair(runs, l, &c, recordings));
        }
    }
    out
}

fn pair(
    runs: &[ReportRun],
    l: &Link,
    c: &Cond,
    recordings: &HashMap<i64, Result<Recording, String>>,
) -> Pairing {
    let (rep, nr) = median_run(runs, &l.replay, c);
    let (orig, no) = match l.original.is_empty() {
        true => (None, 0),
        false => median_run(runs, &l.original, c),
    };
    let captured = !l.captured.is_empty() && l.captured == crate::synth::captured_label(&c.0, &c.3);
    let mut p = Pairing {
        replay: l.replay.clone(),
        original: l.original.clone(),
        condition: cond_label(c),
        captured,
        replay_run: rep.map(|r| r.id),
        original_run: orig.map(|r| r.id),
        replay_runs: nr,
        original_runs: no,
        rows: Vec::new(),
        notes: Vec::new(),
    };
    if l.original.is_empty() {
        p.notes.push(format!(
            "cannot compare: replay {} names no original workload (synthesize it again, or add \
             `original = \"NAME\"` to its table)",
            l.replay
        ));
        return p;
    }
    let (Some(rep), Some(orig)) = (rep, orig) else {
        p.notes.push(match (rep, orig) {
            (None, _) => "cannot compare: the replay has no ok run under this condition".into(),
            _ => format!(
                "cannot compare: no ok run of the original ({}) under this condition in this \
                 campaign",
                l.original
            ),
        });
        return p;
    };
    let ns = |r: &ReportRun| r.makespan_ns.map(|v| v.max(0) as u64);
    let rec = |id: i64| match recordings.get(&id) {
        Some(Ok(r)) => Ok(r),
        Some(Err(e)) => Err(e.clone()),
        None => Err(format!("run {id}: its trace was not read")),
    };
    match (rec(orig.id), rec(rep.id)) {
        (Ok(o), Ok(r)) => p.rows = fidelity::compare(o, ns(orig), r, ns(rep)),
        (o, r) => {
            if let (Some(mo), Some(mr)) = (ns(orig), ns(rep)) {
                p.rows.push(fidelity::within(
                    "makespan",
                    mo as f64 / 1e6,
                    mr as f64 / 1e6,
                    0.10,
                    " ms",
                ));
            }
            for e in [o.err(), r.err()].into_iter().flatten() {
                p.notes.push(format!(
                    "CPU, switches, wake-up latency and KS distances need both runs traced: {e}"
                ));
            }
        }
    }
    p
}

/// The replay section.
#[derive(Default)]
pub struct ReplaySection {
    pairings: Vec<Pairing>,
}

/// Each replay workload of the campaign and what its table in the
/// campaign's stored spec names as its origin.
fn links(a: &Analysis) -> Vec<Link> {
    let spec: Option<crate::spec::Spec> = serde_json::from_str(&a.campaign.spec_json).ok();
    replay_names(&a.runs)
        .into_iter()
        .map(|name| {
            let params = spec
                .as_ref()
                .and_then(|s| s.workloads.iter().find(|w| w.name == name))
                .and_then(|w| match &w.workload {
                    Workload::Replay(p) => Some(p),
                    _ => None,
                });
            Link {
                original: params.map(|p| p.original.clone()).unwrap_or_default(),
                captured: params.map(|p| p.captured.clone()).unwrap_or_default(),
                replay: name,
            }
        })
        .collect()
}

fn verdict(p: Option<bool>) -> &'static str {
    match p {
        Some(true) => "ok",
        Some(false) => "OUTSIDE",
        None => "shown",
    }
}

fn heading(p: &Pairing) -> String {
    let run = |id: Option<i64>, n: usize| match id {
        Some(id) => format!("run {id} (median of {n})"),
        None => "none".into(),
    };
    format!(
        "{} against {} under {}{}: replay {}, original {}",
        p.replay,
        if p.original.is_empty() {
            "?"
        } else {
            &p.original
        },
        p.condition,
        if p.captured { " (captured here)" } else { "" },
        run(p.replay_run, p.replay_runs),
        run(p.original_run, p.original_runs)
    )
}

impl Section for ReplaySection {
    fn id(&self) -> &'static str {
        "replay"
    }

    fn title(&self) -> &'static str {
        "Replay against original"
    }

    fn needs(&self, a: &Analysis) -> Needs {
        Needs {
            recordings: wanted(&a.runs, &links(a)),
            ..Needs::default()
        }
    }

    fn prepare(&mut self, a: &Analysis, details: RunDetails) -> Result<()> {
        self.pairings = pairings(&a.runs, &links(a), &details.recordings);
        Ok(())
    }

    fn applies(&self, a: &Analysis) -> bool {
        !replay_names(&a.runs).is_empty()
    }

    fn blocks(&self, _a: &Analysis) -> Vec<Block> {
        let mut b = vec![Block::p(
            "Each replay workload beside the workload it was synthesized from, under each \
             condition it ran: each side's ok run with the median makespan. Rules: makespan \
             within 10 %, the tree's and each task's CPU (tasks of 5 ms or more) within 5 %, \
             voluntary and involuntary switches within 15 %, the Kolmogorov–Smirnov distance of \
             the CPU-burst and sleep distributions at most 0.1; wake-up latency p50 and p99 are \
             shown without a rule. All but the makespan come from both runs' traces, recorded \
             as `schedlab synthesize` records them.",
        )];
        for p in &self.pairings {
            b.push(Block::Title(heading(p)));
            for n in &p.notes {
                b.push(Block::p(n.clone()));
            }
            if p.rows.is_empty() {
                continue;
            }
            b.push(Block::p(format!("{}.", fidelity::summary(&p.rows))));
            let rows: Vec<Vec<String>> = p
                .rows
                .iter()
                .map(|r| {
                    vec![
                        r.figure.clone(),
                        r.original.clone(),
                        r.replay.clone(),
                        r.rule.clone(),
                        verdict(r.pass).into(),
                    ]
                })
                .collect();
            b.push(Block::Table {
                row_class: p
                    .rows
                    .iter()
                    .map(|r| (r.pass == Some(false)).then_some("flag"))
                    .collect(),
                table: Table {
                    title: String::new(),
                    headers: ["figure", "original", "replay", "rule", "verdict"]
                        .map(String::from)
                        .to_vec(),
                    numeric: vec![false; 5],
                    rows,
                },
            });
        }
        b
    }

    fn json(&self, a: &Analysis) -> Option<Value> {
        if !self.applies(a) {
            return None;
        }
        Some(Value::Array(
            self.pairings
                .iter()
                .map(|p| {
                    json!({
                        "replay": p.replay, "original": p.original, "condition": p.condition,
                        "captured": p.captured, "replay_run": p.replay_run,
                        "original_run": p.original_run, "replay_runs": p.replay_runs,
                        "original_runs": p.original_runs, "notes": p.notes,
                        "figures": p.rows.iter().map(|r| json!({
                            "figure": r.figure, "original": r.original, "replay": r.replay,
                            "rule": r.rule, "pass": r.pass,
                        })).collect::<Vec<_>>(),
                    })
                })
                .collect(),
        ))
    }
}

#[cfg(test)]
mod tests;
