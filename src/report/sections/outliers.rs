//! Flagged outlier runs, named with their values and distance from the
//! median.

use serde_json::Value;

use super::{MAX_LISTED, Section, Table, more_line};
use crate::report::analyse::Analysis;
use crate::report::blocks::Block;
use crate::report::fmt;

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

    fn blocks(&self, a: &Analysis) -> Vec<Block> {
        let mut b = vec![Block::p(outliers_intro(a))];
        if a.outliers.is_empty() {
            b.push(Block::p("No value is flagged."));
            return b;
        }
        let rows = outlier_rows(a);
        b.push(Block::Table {
            row_class: vec![Some("flag"); rows.len()],
            table: Table {
                title: String::new(),
                headers: OUT_HEADERS.map(String::from).to_vec(),
                numeric: OUT_NUMERIC.to_vec(),
                rows,
            },
        });
        b.extend(more_line(a.outliers.len()).map(Block::p));
        b
    }

    fn json(&self, a: &Analysis) -> Option<Value> {
        serde_json::to_value(&a.outliers).ok()
    }
}
