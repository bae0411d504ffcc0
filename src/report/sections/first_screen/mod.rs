//! What happened: the report's first screen, above its table of contents.
//! Per workload one picture of what the scheduler did, then each of the
//! workload's findings as one sentence with its effect size; the detail
//! follows in the other sections.
//!
//! The picture of a traced campaign is the per-CPU timelines of one run of
//! each policy (of the first process count with the most policies traced)
//! on one time axis; otherwise the chart of the workload's largest
//! significant effect ([`picture::effect_size`]: |ln ratio| of the means),
//! or of its primary metric when nothing is significant. Conditions whose
//! workers could use more than one CPU get a lane per CPU with its
//! utilisation ([`lanes`]); a campaign of many machine levels first says
//! each level's environment in a line.

mod lanes;
mod picture;

use anyhow::Result;
use serde_json::{Value, json};
use std::collections::HashMap;

use super::details::{Needs, RunDetails, TimelineSet, TimelineSetNeed};
use super::summary::{capitalised, grouped};
use super::{Section, group_of};
use crate::record::ProcessRecord;
use crate::report::analyse::{Analysis, Comparison, Verdict, policy_label};
use crate::report::blocks::{Block, Figure};
use crate::report::charts;

/// The longest stretch of each trace the timelines draw.
pub const MAX_SPAN_NS: u64 = 4_000_000_000;

/// How to get the timelines, for a campaign that was not traced.
pub const TRACE_HINT: &str = "Pictures of who held each CPU need a traced campaign: run the spec again as root \
     with --trace (sudo schedlab run SPEC --trace), which records the kernel's scheduling events of every run.";

/// The first screen (see the module's documentation).
#[derive(Default)]
pub struct FirstScreenSection {
    /// Per workload of the analysis: the drawn timelines and the policies
    /// of the chosen set's panels.
    sets: Vec<Option<(TimelineSet, Vec<String>)>>,
    processes: HashMap<i64, Vec<ProcessRecord>>,
    traced: bool,
}

/// The panels of a workload's timeline set: per group of the workload, its
/// conditions' policies and ok runs in campaign order.
fn set_need(a: &Analysis, workload: &str) -> (TimelineSetNeed, Vec<Vec<String>>) {
    let mut choices = Vec::new();
    let mut policies = Vec::new();
    for (g, group) in a.groups.iter().enumerate() {
        if group.key.workload != workload {
            continue;
        }
        let conds: Vec<&str> = group
            .conditions
            .iter()
            .map(|&c| a.conditions[c].policy.as_str())
            .collect();
        choices.push(
            conds
                .iter()
                .map(|&p| {
                    a.runs
                        .iter()
                        .filter(|r| r.status == "ok" && r.policy == p && group_of(a, r) == Some(g))
                        .map(|r| r.id)
                        .collect()
                })
                .collect(),
        );
        policies.push(conds.iter().map(|p| p.to_string()).collect());
    }
    (
        TimelineSetNeed {
            choices,
            max_span_ns: MAX_SPAN_NS,
        },
        policies,
    )
}

/// The workload's significant comparisons, in report order.
fn findings<'a>(a: &'a Analysis, workload: &str) -> Vec<&'a Comparison> {
    a.comparisons
        .iter()
        .filter(|c| c.verdict == Verdict::Different && a.groups[c.group].key.workload == workload)
        .collect()
}

/// What the picture of a workload is, for JSON and Markdown.
enum Picture<'a> {
    Timelines {
        set: &'a TimelineSet,
        policies: &'a [String],
    },
    Chart {
        metric: crate::report::Metric,
        largest: Option<&'a Comparison>,
    },
}

impl FirstScreenSection {
    fn picture<'a>(&'a self, a: &'a Analysis, k: usize, workload: &str) -> Option<Picture<'a>> {
        if let Some(Some((set, policies))) = self.sets.get(k) {
            return Some(Picture::Timelines { set, policies });
        }
        let largest = picture::largest_effect(a, workload);
        let metric =
            largest.map_or_else(|| a.settings.metrics.first().copied(), |c| Some(c.metric))?;
        Some(Picture::Chart { metric, largest })
    }

    /// The picture as a figure (HTML) and the sentence saying what it is
    /// (Markdown, JSON).
    fn figure(&self, a: &Analysis, workload: &str, p: &Picture) -> (Option<Figure>, String) {
        match p {
            Picture::Timelines { set, policies } => {
                let panels = picture::panels(set, policies, &self.processes);
                let runs = panels
                    .iter()
                    .map(|p| {
                        format!(
                            "{} (run {})",
                            policy_label(p.policy),
                            p.timeline.info.run_id
                        )
                    })
                    .collect::<Vec<_>>()
                    .join(", ");
                let group = a
                    .groups
                    .iter()
                    .filter(|g| g.key.workload == workload)
                    .nth(set.choice);
                let group = group.map_or(workload, |g| g.label.as_str());
                let span = crate::units::format_ns(set.span_ns);
                let text = if panels.iter().all(|p| p.timeline.info.predicted) {
                    format!(
                        "who holds each CPU in the model's prediction (not a kernel trace) for {group}: {runs}, \
                         over the first {span} of each simulated run (the Predicted timeline section has the \
                         figures; `schedlab report --timeline-run N --window FROM..TO` draws any run in detail)."
                    )
                } else {
                    format!(
                        "who held each CPU in {group}: {runs}, over the first {span} of each run's trace (the \
                         Kernel trace section has the figures; `schedlab report --timeline-run N --window \
                         FROM..TO` draws any traced run in detail)."
                    )
                };
                let chart = picture::timelines(workload, &panels, set.span_ns);
                (
                    Some(Figure {
                        svg: chart.render(),
                        caption: capitalised(&text),
                    }),
                    text,
                )
            }
            Picture::Chart { metric, largest } => {
                let text = match largest {
                    Some(c) => format!(
                        "{} per policy, the chart of {workload}'s largest significant effect ({}).",
                        metric.label(),
                        c.sentence
                    ),
                    None => format!(
                        "{} per policy; no difference between policies is significant in {workload}.",
                        metric.label()
                    ),
                };
                let figure = charts::bars(a, workload, *metric).map(|mut c| {
                    // The Charts section draws this chart too: its own
                    // kind and id here.
                    c.meta.kind = "first-bars";
                    c.meta.id = format!("first-{}", c.meta.id);
                    Figure {
                        svg: c.render(),
                        caption: capitalised(&text),
                    }
                });
                (figure, text)
            }
        }
    }
}

impl Section for FirstScreenSection {
    fn id(&self) -> &'static str {
        "what-happened"
    }

    fn title(&self) -> &'static str {
        "What happened"
    }

    fn lead(&self) -> bool {
        true
    }

    fn needs(&self, a: &Analysis) -> Needs {
        Needs {
            traces_of: a.campaign_ids(),
            timeline_sets: a
                .factors
                .workloads
                .iter()
                .map(|w| set_need(a, &w.name).0)
                .collect(),
            ..Needs::default()
        }
    }

    fn prepare(&mut self, a: &Analysis, details: RunDetails) -> Result<()> {
        self.traced = !details.traces.is_empty();
        self.sets = details
            .timeline_sets
            .into_iter()
            .zip(&a.factors.workloads)
            .map(|(set, w)| {
                let set = set?;
                let policies = set_need(a, &w.name).1.into_iter().nth(set.choice)?;
                Some((set, policies))
            })
            .collect();
        self.processes = details.processes;
        Ok(())
    }

    fn applies(&self, a: &Analysis) -> bool {
        a.counts.ok > 0
    }

    fn blocks(&self, a: &Analysis) -> Vec<Block> {
        let mut b = Vec::new();
        let machines = lanes::machine_environments(a);
        if !machines.is_empty() {
            b.push(Block::p("The machine levels:"));
            b.push(Block::List {
                class: None,
                item_class: None,
                items: machines,
            });
        }
        for (k, w) in a.factors.workloads.iter().enumerate() {
            b.push(Block::Heading {
                level: 3,
                text: w.name.clone(),
                id: Some(format!("what-happened-{}", w.name)),
            });
            if let Some(p) = self.picture(a, k, &w.name) {
                let (figure, text) = self.figure(a, &w.name, &p);
                if let Some(f) = figure {
                    b.push(Block::html_only(vec![Block::Figure(f)]));
                }
                b.push(Block::md_only(vec![Block::p(format!(
                    "Picture (in the HTML report): {text}"
                ))]));
            }
            lane_blocks(&mut b, a, &w.name);
            let f = findings(a, &w.name);
            if f.is_empty() {
                b.push(Block::p(format!(
                    "No difference between policies is significant in {}.",
                    w.name
                )));
            } else {
                grouped(&mut b, a, &f, "different");
            }
        }
        if !self.traced {
            b.push(Block::p(TRACE_HINT));
        }
        b
    }

    fn json(&self, a: &Analysis) -> Option<Value> {
        let workloads: Vec<Value> = a
            .factors
            .workloads
            .iter()
            .enumerate()
            .map(|(k, w)| {
                let picture = self.picture(a, k, &w.name).map(|p| {
                    let text = self.figure(a, &w.name, &p).1;
                    match p {
                        Picture::Timelines { set, policies } => json!({
                            "kind": "timelines",
                            "runs": policies.iter().zip(&set.panels).map(|(p, t)| json!({
                                "policy": p,
                                "run": t.as_ref().map(|t| t.info.run_id),
                            })).collect::<Vec<_>>(),
                            "span_ns": set.span_ns,
                            "text": text,
                        }),
                        Picture::Chart { metric, largest } => json!({
                            "kind": "chart",
                            "metric": metric.name(),
                            "largest_effect": largest.map(|c| &c.sentence),
                            "text": text,
                        }),
                    }
                });
                json!({
                    "workload": w.name,
                    "picture": picture,
                    "cpu_lanes": lanes::lanes(a, &w.name).iter().map(|c| json!({
                        "condition": c.label,
                        "cpus": c.lanes.iter().map(|l| json!({
                            "cpu": l.cpu,
                            "busy_pct_median": l.median_pct,
                            "busy_pct_min": l.min_pct,
                            "busy_pct_max": l.max_pct,
                            "runs": l.runs,
                        })).collect::<Vec<_>>(),
                    })).collect::<Vec<_>>(),
                    "findings": findings(a, &w.name)
                        .iter()
                        .map(|c| &c.sentence)
                        .collect::<Vec<_>>(),
                })
            })
            .collect();
        Some(json!({
            "workloads": workloads,
            "traced": self.traced,
            "machines": lanes::machine_environments(a),
        }))
    }
}

/// A workload's lanes per CPU: the chart (HTML) and a line per condition.
fn lane_blocks(b: &mut Vec<Block>, a: &Analysis, workload: &str) {
    let all = lanes::lanes(a, workload);
    if all.is_empty() {
        return;
    }
    let text = "Each CPU's utilisation over the run, a lane per CPU (median over the condition's ok runs; \
                /proc/stat, so every program's use counts)";
    b.push(Block::html_only(vec![Block::Figure(Figure {
        svg: lanes::chart(workload, &all).render(),
        caption: format!("{text}."),
    })]));
    b.push(Block::p(format!("{text}:")));
    b.push(Block::List {
        class: None,
        item_class: None,
        items: all
            .iter()
            .map(|c| format!("{}: {}", c.label, lanes::line(c)))
            .collect(),
    });
}

#[cfg(test)]
mod tests;
