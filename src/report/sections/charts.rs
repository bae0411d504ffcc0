//! Charts per workload: bars with confidence intervals beside every run's
//! value, for every metric.

use serde_json::Value;

use super::Section;
use crate::report::analyse::Analysis;
use crate::report::blocks::{Block, Figure};
use crate::report::charts;

/// Charts per workload: bars with CIs and every run, for every metric.
pub struct ChartsSection;

impl Section for ChartsSection {
    fn id(&self) -> &'static str {
        "charts"
    }

    fn title(&self) -> &'static str {
        "Charts by workload"
    }

    fn applies(&self, a: &Analysis) -> bool {
        a.counts.ok > 0
    }

    fn blocks(&self, a: &Analysis) -> Vec<Block> {
        let mut b = vec![Block::p(
            "Left: mean of the per-run values (each run's value is the mean over its processes; makespan is per run) \
             with 95% confidence-interval whiskers. Right: every run, so the spread is visible (box plots when a \
             condition has more than 40 runs; red rings mark flagged outliers). Hover over any mark for its exact \
             values.",
        )];
        for w in &a.factors.workloads {
            b.push(Block::Heading {
                level: 3,
                text: w.name.clone(),
                id: Some(format!("charts-{}", w.name)),
            });
            let mut sub = format!("Workload kind {}", w.kind);
            if !w.work_unit.is_empty() {
                sub.push_str(&format!("; work is counted in {}", w.work_unit));
            }
            b.push(Block::p(sub + "."));
            let mut figures = Vec::new();
            for &m in &a.settings.metrics {
                if let Some(c) = charts::bars(a, &w.name, m) {
                    figures.push(Figure {
                        svg: c.render(),
                        caption: format!(
                            "{}: mean ± 95% CI per policy and process count.",
                            m.label()
                        ),
                    });
                }
                if let Some(s) = charts::spread(a, &w.name, m) {
                    figures.push(Figure {
                        svg: s.render(),
                        caption: format!("{}: every run.", m.label()),
                    });
                }
            }
            b.push(Block::Figures(figures));
        }
        // Charts only: nothing in Markdown.
        vec![Block::html_only(b)]
    }

    /// Nothing, without drawing the charts the blocks hold for HTML.
    fn markdown(&self, _a: &Analysis) -> String {
        String::new()
    }

    fn json(&self, _a: &Analysis) -> Option<Value> {
        None
    }
}
