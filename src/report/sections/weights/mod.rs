//! Weighted round robin and weights (seeds 002 and 003): how the same
//! weights are delivered by schedlab's WRR (slices of quantum × weight), by
//! CFS nice values and by SCHED_DEADLINE runtimes ∝ weight. Per group of
//! the campaign: work done against weight with the proportional ideal and
//! the fold over the lightest weight (duration workloads), completion times
//! and the fold over the heaviest (fixed work), each mechanism's CPU share
//! error, the WRR dispatcher's overhead and lateness, and a Gantt chart of
//! one WRR run's slices.

pub mod charts;
pub mod gantt;
pub mod model;
mod runs;
mod tables;

use anyhow::Result;
use serde::Serialize;
use serde_json::Value;

use super::{Needs, RunDetails, Section};
use crate::report::analyse::Analysis;
use crate::report::blocks::{Block, Figure};
use crate::report::fmt;
use model::WeightGroup;
use runs::{groups, weighted_runs};
use tables::{
    completion_tables, delivered_table, dispatcher_table, error_table, fold_table, group_summary,
    work_table,
};

/// Everything the section shows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WeightsReport {
    pub groups: Vec<WeightGroup>,
    /// WRR quantum from the campaign's spec, ns.
    pub quantum_ns: Option<f64>,
    pub gantt: Option<gantt::Gantt>,
}

/// The section; `gantt_run` picks the run of the Gantt chart.
#[derive(Debug, Default)]
pub struct WeightsSection {
    gantt_run: Option<i64>,
    data: Option<WeightsReport>,
}

impl WeightsSection {
    pub fn new(gantt_run: Option<i64>) -> WeightsSection {
        WeightsSection {
            gantt_run,
            data: None,
        }
    }
}

const INTRO: &str = "The same weights delivered by different means: schedlab's WRR gives each process a slice of \
     quantum × weight in turn; CFS/EEVDF gets the nice values whose kernel weights are nearest; SCHED_DEADLINE gets \
     runtimes proportional to the weights. With a duration (every process runs for the same time) work should be \
     proportional to weight; with a fixed amount of work the heavier processes should finish first. The CPU share \
     error is each process's share of the CPU time its run queue delivered over its weight's share, minus 1; for WRR \
     also over whole rounds only (every task had its turn, before the first slice cut short), which a window ending \
     inside a round cannot be.";

const UNWEIGHTED: &str = "Every process of this campaign has the same weight: there is nothing to compare with \
     the weights, only the WRR dispatcher's figures and slices below.";

const FIXED_NOTE: &str = "Every process does the same work here, so over the whole run each needs the same CPU time \
     and whole-run shares are equal by design: completion times (and, for WRR, whole rounds) show the weights. The \
     ideal is generalised processor sharing of the group's CPUs with each process's measured CPU demand: \
     the heaviest finishes first, and the lightest finishes last when everything is done.";

impl Section for WeightsSection {
    fn id(&self) -> &'static str {
        "weights"
    }

    fn title(&self) -> &'static str {
        "Weighted round robin and weights"
    }

    fn needs(&self, a: &Analysis) -> Needs {
        runs::needs(a)
    }

    fn prepare(&mut self, a: &Analysis, details: RunDetails) -> Result<()> {
        let runs = weighted_runs(a, details);
        let picked = gantt::pick(&runs, self.gantt_run, a.campaign.id)?;
        if runs.is_empty() {
            self.data = None;
            return Ok(());
        }
        let quantum_ns = serde_json::from_str::<Value>(&a.campaign.spec_json)
            .ok()
            .and_then(|v| v.pointer("/wrr/quantum_ns").and_then(Value::as_f64));
        let groups = groups(a, &runs, quantum_ns);
        let gantt = picked.map(|r| {
            let label = format!(
                "{}, {}",
                a.groups[r.group].label,
                charts::contender_label(&r.policy, r.wrr.as_ref().map(|w| w.mechanism.as_str()))
            );
            gantt::build(r, label, self.gantt_run.is_some())
        });
        self.data = Some(WeightsReport {
            groups,
            quantum_ns,
            gantt,
        });
        Ok(())
    }

    fn applies(&self, _a: &Analysis) -> bool {
        self.data.is_some()
    }

    fn blocks(&self, a: &Analysis) -> Vec<Block> {
        let Some(d) = &self.data else {
            return Vec::new();
        };
        let mut b = vec![Block::p(INTRO)];
        if !d.groups.iter().any(WeightGroup::weighted) {
            b.push(Block::p(UNWEIGHTED));
        }
        for g in d.groups.iter().filter(|g| g.weighted()) {
            b.push(Block::Heading {
                level: 3,
                text: g.label.clone(),
                id: Some(format!("weights-{}", g.group)),
            });
            let summary = group_summary(g);
            if !summary.is_empty() {
                b.push(Block::p(summary));
            }
            if !g.duration_based {
                b.push(Block::Note(vec![Block::p(FIXED_NOTE)]));
            }
            let main = if g.duration_based {
                charts::work(a, g).map(|c| Figure {
                    svg: c.render(),
                    caption: "Mean work per process of each weight with 95% CIs; dashed: the same total shared \
                              in proportion to the weights."
                        .into(),
                })
            } else {
                charts::completion(a, g).map(|c| Figure {
                    svg: c.render(),
                    caption: "Mean completion time of each weight with 95% CIs; dashed: ideal proportional \
                              sharing."
                        .into(),
                })
            };
            let errors = charts::errors(a, g).map(|c| Figure {
                svg: c.render(),
                caption: "CPU share over weight share − 1, averaged over runs: 0 is exactly proportional (a bar \
                          too short to see is within a fraction of a percent; hover for its value)."
                    .into(),
            });
            b.push(Block::Figures(main.into_iter().chain(errors).collect()));
            b.push(Block::table(delivered_table(g)));
            if g.duration_based {
                b.push(Block::table(work_table(g)));
                b.push(Block::table(fold_table(g)));
            } else {
                let (t, f) = completion_tables(g);
                b.push(Block::table(t));
                b.push(Block::table(f));
            }
            let e = error_table(g);
            if !e.rows.is_empty() {
                b.push(Block::table(e));
            }
        }
        let disp = dispatcher_table(d);
        if !disp.rows.is_empty() {
            b.push(Block::Heading {
                level: 3,
                text: "WRR dispatcher".into(),
                id: Some("weights-dispatcher".into()),
            });
            b.push(Block::p(DISPATCHER_NOTE));
            b.push(Block::table(disp));
        }
        if let Some(gt) = &d.gantt {
            // Markdown has the line about the run alone.
            b.push(Block::html_only(vec![Block::Heading {
                level: 3,
                text: "Slices of one WRR run".into(),
                id: Some("weights-gantt".into()),
            }]));
            b.push(Block::p(gantt_line(gt)));
            b.push(Block::Figure(Figure {
                svg: gantt::chart(gt).render(),
                caption:
                    "Hover over a slice for its planned and actual times and the CPU time received."
                        .into(),
            }));
        }
        b
    }

    fn json(&self, _a: &Analysis) -> Option<Value> {
        serde_json::to_value(self.data.as_ref()?).ok()
    }
}

const DISPATCHER_NOTE: &str = "Dispatcher CPU: the dispatcher threads' own CPU time as a share of the CPUs they \
     dispatched. Lateness: how long after a slice's timer the dispatcher had put the task back and started the next \
     (timer latency, RT throttling, the fair server); p50 and p99 per run. Share error over whole rounds: the largest \
     |CPU share / weight share − 1| of any process, slices of whole rounds only.";

fn gantt_line(g: &gantt::Gantt) -> String {
    format!(
        "Run {} ({}, rep {}){}: {} slices over {} s{}.",
        g.run_id,
        g.label,
        g.rep,
        if g.chosen {
            ", chosen with --gantt-run"
        } else {
            ", the first ok WRR run (choose another with --gantt-run RUN_ID)"
        },
        g.slices_total,
        fmt::sig(g.run_end_s, 3),
        if g.truncated {
            format!("; the chart shows the first {} s", fmt::sig(g.window_s, 3))
        } else {
            String::new()
        }
    )
}
