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
mod load;
pub mod model;
mod tables;

use anyhow::Result;
use serde::Serialize;
use serde_json::Value;
use std::fmt::Write;

use super::Section;
use crate::report::analyse::Analysis;
use crate::report::{fmt, html};
use crate::store::Store;
use load::{groups, load, weight_modes};
use model::WeightGroup;
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

    fn prepare(&mut self, store: &Store, a: &Analysis) -> Result<()> {
        let has_candidates = a.factors.policies.iter().any(|p| p == "wrr")
            || !weight_modes(&a.campaign.spec_json).is_empty();
        let runs = if has_candidates {
            load(store, a)?
        } else {
            Vec::new()
        };
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

    fn html(&self, a: &Analysis) -> String {
        let Some(d) = &self.data else {
            return String::new();
        };
        let mut o = html::p(INTRO);
        if !d.groups.iter().any(WeightGroup::weighted) {
            o.push_str(&html::p(UNWEIGHTED));
        }
        for g in d.groups.iter().filter(|g| g.weighted()) {
            let _ = writeln!(
                o,
                "<h3 id=\"weights-{}\">{}</h3>",
                g.group,
                fmt::esc(&g.label)
            );
            let summary = group_summary(g);
            if !summary.is_empty() {
                o.push_str(&html::p(&summary));
            }
            if !g.duration_based {
                let _ = writeln!(o, "<div class=\"note\">{}</div>", html::p(FIXED_NOTE));
            }
            o.push_str("<div class=\"charts\">\n");
            let main = if g.duration_based {
                charts::work(a, g).map(|c| {
                    html::figure(
                        &c.render(),
                        "Mean work per process of each weight with 95% CIs; dashed: the same total shared in \
                         proportion to the weights.",
                    )
                })
            } else {
                charts::completion(a, g).map(|c| {
                    html::figure(
                        &c.render(),
                        "Mean completion time of each weight with 95% CIs; dashed: ideal proportional sharing.",
                    )
                })
            };
            o.push_str(&main.unwrap_or_default());
            if let Some(c) = charts::errors(a, g) {
                o.push_str(&html::figure(
                    &c.render(),
                    "CPU share over weight share − 1, averaged over runs: 0 is exactly proportional (a bar too \
                     short to see is within a fraction of a percent; hover for its value).",
                ));
            }
            o.push_str("</div>\n");
            o.push_str(&delivered_table(g).html());
            if g.duration_based {
                o.push_str(&work_table(g).html());
                o.push_str(&fold_table(g).html());
            } else {
                let (t, f) = completion_tables(g);
                o.push_str(&t.html());
                o.push_str(&f.html());
            }
            let e = error_table(g);
            if !e.rows.is_empty() {
                o.push_str(&e.html());
            }
        }
        let disp = dispatcher_table(d);
        if !disp.rows.is_empty() {
            o.push_str("<h3 id=\"weights-dispatcher\">WRR dispatcher</h3>\n");
            o.push_str(&html::p(DISPATCHER_NOTE));
            o.push_str(&disp.html());
        }
        if let Some(gt) = &d.gantt {
            o.push_str("<h3 id=\"weights-gantt\">Slices of one WRR run</h3>\n");
            o.push_str(&html::p(&gantt_line(gt)));
            o.push_str(&html::figure(
                &gantt::chart(gt).render(),
                "Hover over a slice for its planned and actual times and the CPU time received.",
            ));
        }
        o
    }

    fn markdown(&self, _a: &Analysis) -> String {
        let Some(d) = &self.data else {
            return String::new();
        };
        let mut o = format!("{INTRO}\n\n");
        if !d.groups.iter().any(WeightGroup::weighted) {
            let _ = writeln!(o, "{UNWEIGHTED}\n");
        }
        for g in d.groups.iter().filter(|g| g.weighted()) {
            let _ = writeln!(o, "### {}\n", g.label);
            let summary = group_summary(g);
            if !summary.is_empty() {
                let _ = writeln!(o, "{summary}\n");
            }
            if !g.duration_based {
                let _ = writeln!(o, "> {FIXED_NOTE}\n");
            }
            o.push_str(&delivered_table(g).markdown());
            o.push('\n');
            if g.duration_based {
                o.push_str(&work_table(g).markdown());
                o.push('\n');
                o.push_str(&fold_table(g).markdown());
            } else {
                let (t, f) = completion_tables(g);
                o.push_str(&t.markdown());
                o.push('\n');
                o.push_str(&f.markdown());
            }
            let e = error_table(g);
            if !e.rows.is_empty() {
                o.push('\n');
                o.push_str(&e.markdown());
            }
            o.push('\n');
        }
        let disp = dispatcher_table(d);
        if !disp.rows.is_empty() {
            let _ = writeln!(o, "### WRR dispatcher\n\n{DISPATCHER_NOTE}\n");
            o.push_str(&disp.markdown());
            o.push('\n');
        }
        if let Some(gt) = &d.gantt {
            let _ = writeln!(o, "{}\n", gantt_line(gt));
        }
        o
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
