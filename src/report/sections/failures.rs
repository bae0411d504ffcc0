//! Runs that are not in the statistics (failed, timed out, skipped), with
//! their reasons.

use serde_json::{Value, json};
use std::fmt::Write;

use super::{MAX_LISTED, Section, more_line};
use crate::report::analyse::Analysis;
use crate::report::fmt::{Align, md_table};
use crate::report::html;

/// Runs that are not in the statistics.
pub struct FailuresSection;

fn failure_rows(a: &Analysis) -> Vec<Vec<String>> {
    a.problems
        .iter()
        .take(MAX_LISTED)
        .map(|p| {
            vec![
                p.run_id.to_string(),
                p.seq.to_string(),
                p.rep.to_string(),
                p.label.clone(),
                p.status.replace('_', " "),
                p.reason.clone(),
            ]
        })
        .collect()
}

const FAIL_HEADERS: [&str; 6] = ["run", "seq", "rep", "condition", "status", "reason"];
const FAIL_NUMERIC: [bool; 6] = [true, true, true, false, false, false];

fn failures_intro(a: &Analysis) -> String {
    if a.problems.is_empty() {
        return "Every stored run finished ok.".into();
    }
    format!(
        "{} failed, {} timed out, {} skipped. These runs are counted here and left out of the statistics; \
         `schedlab run --retry-failed` runs them again.",
        a.counts.failed, a.counts.timed_out, a.counts.skipped
    )
}

impl Section for FailuresSection {
    fn id(&self) -> &'static str {
        "failures"
    }

    fn title(&self) -> &'static str {
        "Failed, timed-out and skipped runs"
    }

    fn html(&self, a: &Analysis) -> String {
        let mut o = html::p(&failures_intro(a));
        if !a.problems.is_empty() {
            o.push_str(&html::table(
                &FAIL_HEADERS,
                &FAIL_NUMERIC,
                &failure_rows(a),
                &[],
            ));
            if let Some(m) = more_line(a.problems.len()) {
                o.push_str(&html::p(&m));
            }
        }
        o
    }

    fn markdown(&self, a: &Analysis) -> String {
        let mut o = failures_intro(a);
        o.push_str("\n\n");
        if !a.problems.is_empty() {
            let align: Vec<Align> = FAIL_NUMERIC
                .iter()
                .map(|&n| if n { Align::Right } else { Align::Left })
                .collect();
            o.push_str(&md_table(&FAIL_HEADERS, &align, &failure_rows(a)));
            if let Some(m) = more_line(a.problems.len()) {
                let _ = writeln!(o, "\n{m}");
            }
        }
        o
    }

    fn json(&self, a: &Analysis) -> Option<Value> {
        Some(json!({ "counts": a.counts, "runs": a.problems }))
    }
}
