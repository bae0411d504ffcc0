//! Log–log slopes of every metric against the number of processes.

use serde_json::Value;
use std::fmt::Write;

use super::Section;
use crate::report::analyse::Analysis;
use crate::report::fmt::{self, Align, md_table};
use crate::report::{charts, html};

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

    fn html(&self, a: &Analysis) -> String {
        let mut o = html::p(&scaling_intro());
        for w in &a.factors.workloads {
            let charts: Vec<String> = a
                .settings
                .metrics
                .iter()
                .filter_map(|&m| charts::scaling(a, &w.name, m))
                .map(|c| {
                    html::figure(
                        &c.render(),
                        "Means with 95% CIs; slope of the log–log fit over every run.",
                    )
                })
                .collect();
            if charts.is_empty() {
                continue;
            }
            let _ = writeln!(o, "<h3>{}</h3>\n<div class=\"charts\">", fmt::esc(&w.name));
            for c in charts {
                o.push_str(&c);
            }
            o.push_str("</div>\n");
        }
        let (h, n, rows) = scaling_table(a);
        o.push_str("<details><summary>All slopes</summary>");
        o.push_str(&html::table(&h, &n, &rows, &[]));
        o.push_str("</details>\n");
        o
    }

    fn markdown(&self, a: &Analysis) -> String {
        let mut o = scaling_intro();
        o.push_str("\n\n");
        let (h, n, rows) = scaling_table(a);
        let align: Vec<Align> = n
            .iter()
            .map(|&x| if x { Align::Right } else { Align::Left })
            .collect();
        o.push_str(&md_table(&h, &align, &rows));
        o
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
