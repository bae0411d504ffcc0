//! Runs that are not in the statistics (failed, timed out, skipped), with
//! their reasons.

use serde_json::{Value, json};

use super::{MAX_LISTED, Section, Table, more_line};
use crate::report::analyse::Analysis;
use crate::report::blocks::Block;

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

    fn blocks(&self, a: &Analysis) -> Vec<Block> {
        let mut b = vec![Block::p(failures_intro(a))];
        if !a.problems.is_empty() {
            b.push(Block::table(Table {
                title: String::new(),
                headers: FAIL_HEADERS.map(String::from).to_vec(),
                numeric: FAIL_NUMERIC.to_vec(),
                rows: failure_rows(a),
            }));
            b.extend(more_line(a.problems.len()).map(Block::p));
        }
        b
    }

    fn json(&self, a: &Analysis) -> Option<Value> {
        Some(json!({ "counts": a.counts, "runs": a.problems }))
    }
}
