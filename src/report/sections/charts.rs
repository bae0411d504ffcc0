//! Charts per workload: bars with confidence intervals beside every run's
//! value, for every metric.

use serde_json::Value;
use std::fmt::Write;

use super::Section;
use crate::report::analyse::Analysis;
use crate::report::{charts, fmt, html};

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

    fn html(&self, a: &Analysis) -> String {
        let mut o = html::p(
            "Left: mean of the per-run values (each run's value is the mean over its processes; makespan is per run) \
             with 95% confidence-interval whiskers. Right: every run, so the spread is visible (box plots when a \
             condition has more than 40 runs; red rings mark flagged outliers). Hover over any mark for its exact \
             values.",
        );
        for w in &a.factors.workloads {
            let _ = writeln!(
                o,
                "<h3 id=\"charts-{}\">{}</h3>",
                fmt::esc(&w.name),
                fmt::esc(&w.name)
            );
            let mut sub = format!("Workload kind {}", w.kind);
            if !w.work_unit.is_empty() {
                sub.push_str(&format!("; work is counted in {}", w.work_unit));
            }
            o.push_str(&html::p(&(sub + ".")));
            o.push_str("<div class=\"charts\">\n");
            for &m in &a.settings.metrics {
                if let Some(b) = charts::bars(a, &w.name, m) {
                    o.push_str(&html::figure(
                        &b.render(),
                        &format!("{}: mean ± 95% CI per policy and process count.", m.label()),
                    ));
                }
                if let Some(s) = charts::spread(a, &w.name, m) {
                    o.push_str(&html::figure(
                        &s.render(),
                        &format!("{}: every run.", m.label()),
                    ));
                }
            }
            o.push_str("</div>\n");
        }
        o
    }

    fn markdown(&self, _a: &Analysis) -> String {
        String::new()
    }

    fn json(&self, _a: &Analysis) -> Option<Value> {
        None
    }
}
