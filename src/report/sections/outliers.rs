//! Flagged outlier runs, named with their values and distance from the
//! median.

use serde_json::Value;
use std::fmt::Write;

use super::{MAX_LISTED, Section, more_line};
use crate::report::analyse::Analysis;
use crate::report::fmt::{self, Align, md_table};
use crate::report::html;

/// Flagged outliers, named.
pub struct OutliersSection;

fn outlier_rows(a: &Analysis) -> Vec<Vec<String>> {
    a.outliers
        .iter()
        .take(MAX_LISTED)
        .map(|o| {
            let w = &a.groups[a.conditions[o.condition].group].key.workload;
            let unit = a.unit(o.metric, w);
            vec![
                o.run_id.to_string(),
                o.rep.to_string(),
                o.label.clone(),
                o.metric.name().to_string(),
                fmt::with_unit(o.value, &unit),
                fmt::with_unit(o.median, &unit),
                o.times_median
                    .map_or_else(|| "–".into(), |t| format!("{}×", fmt::sig(t, 3))),
                fmt::sig(o.z, 3),
            ]
        })
        .collect()
}

const OUT_HEADERS: [&str; 8] = [
    "run",
    "rep",
    "condition",
    "metric",
    "value",
    "median",
    "× median",
    "modified z",
];
const OUT_NUMERIC: [bool; 8] = [true, true, false, false, true, true, true, true];

fn outliers_intro(a: &Analysis) -> String {
    format!(
        "Per-run values whose modified z-score 0.6745·(x − median)/MAD exceeds {} within their condition, as \
         hyperfine flags them (ten robust standard deviations; the mean absolute deviation stands in when MAD is \
         0; conditions of fewer than {} runs are not screened). They are flagged, never removed: decide for each \
         whether it is a measurement accident or real behaviour of the policy.",
        a.settings.outlier_threshold, a.settings.outlier_min_runs
    )
}

impl Section for OutliersSection {
    fn id(&self) -> &'static str {
        "outliers"
    }

    fn title(&self) -> &'static str {
        "Outliers"
    }

    fn html(&self, a: &Analysis) -> String {
        let mut o = html::p(&outliers_intro(a));
        if a.outliers.is_empty() {
            o.push_str(&html::p("No value is flagged."));
            return o;
        }
        let rows = outlier_rows(a);
        let cls = vec![Some("flag"); rows.len()];
        o.push_str(&html::table(&OUT_HEADERS, &OUT_NUMERIC, &rows, &cls));
        if let Some(m) = more_line(a.outliers.len()) {
            o.push_str(&html::p(&m));
        }
        o
    }

    fn markdown(&self, a: &Analysis) -> String {
        let mut o = outliers_intro(a);
        o.push_str("\n\n");
        if a.outliers.is_empty() {
            o.push_str("No value is flagged.\n");
            return o;
        }
        let align: Vec<Align> = OUT_NUMERIC
            .iter()
            .map(|&n| if n { Align::Right } else { Align::Left })
            .collect();
        o.push_str(&md_table(&OUT_HEADERS, &align, &outlier_rows(a)));
        if let Some(m) = more_line(a.outliers.len()) {
            let _ = writeln!(o, "\n{m}");
        }
        o
    }

    fn json(&self, a: &Analysis) -> Option<Value> {
        serde_json::to_value(&a.outliers).ok()
    }
}
