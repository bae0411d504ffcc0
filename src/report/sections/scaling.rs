//! Log–log slopes of every metric against the number of processes.

use serde_json::Value;

use super::{Section, Table};
use crate::report::analyse::Analysis;
use crate::report::blocks::{Block, Figure};
use crate::report::charts;
use crate::report::fmt;

/// Log–log slopes against the number of processes.
pub struct ScalingSection;

impl Section for ScalingSection {
    fn id(&self) -> &'static str {
        "scaling"
    }

    fn title(&self) -> &'static str {
        "Scaling with the number of processes"
    }

    fn applies(&self, a: &Analysis) -> bool {
        !a.scaling.is_empty()
    }

    fn blocks(&self, a: &Analysis) -> Vec<Block> {
        let mut charts = Vec::new();
        for w in &a.factors.workloads {
            let figures: Vec<Figure> = a
                .settings
                .metrics
                .iter()
                .filter_map(|&m| charts::scaling(a, &w.name, m))
                .map(|c| Figure {
                    svg: c.render(),
                    caption: "Means with 95% CIs; slope of the log–log fit over every run.".into(),
                })
                .collect();
            if figures.is_empty() {
                continue;
            }
            charts.push(Block::heading(3, &w.name));
            charts.push(Block::Figures(figures));
        }
        let (h, n, rows) = scaling_table(a);
        vec![
            Block::p(scaling_intro()),
            // Markdown has the table alone, without charts.
            Block::html_only(charts),
            Block::Details {
                summary: "All slopes".into(),
                open: false,
                blocks: vec![Block::table(Table {
                    title: String::new(),
                    headers: h.map(String::from).to_vec(),
                    numeric: n.to_vec(),
                    rows,
                })],
            },
        ]
    }

    fn json(&self, a: &Analysis) -> Option<Value> {
        serde_json::to_value(&a.scaling).ok()
    }
}

fn scaling_intro() -> String {
    "Exponent k of metric ≈ c·processesᵏ, from a least-squares fit of ln(value) on ln(processes) over every run \
     (so r² also reflects run-to-run noise): k = 1 grows in proportion to the number of processes, k = 0 does not \
     depend on it, k = 2 grows quadratically."
        .to_string()
}

fn scaling_table(a: &Analysis) -> ([&'static str; 6], [bool; 6], Vec<Vec<String>>) {
    let rows = a
        .scaling
        .iter()
        .map(|s| {
            vec![
                s.label.clone(),
                s.metric.name().to_string(),
                s.fit
                    .as_ref()
                    .map_or_else(|| "–".into(), |f| fmt::dec2(f.slope)),
                s.fit
                    .as_ref()
                    .map_or_else(|| "–".into(), |f| fmt::dec2(f.r2)),
                s.fit
                    .as_ref()
                    .map_or_else(|| "0".into(), |f| f.n.to_string()),
                s.points
                    .iter()
                    .map(|p| p.processes.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
            ]
        })
        .collect();
    (
        [
            "workload, policy",
            "metric",
            "slope",
            "r²",
            "runs",
            "process counts",
        ],
        [false, false, true, true, true, false],
        rows,
    )
}
