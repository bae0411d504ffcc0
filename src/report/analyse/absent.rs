//! The figures a condition's ok runs lack: a metric some or all of them
//! have no value of (a `command` worker's tree whose switches this kernel
//! did not give: no taskstats exit records), with why, taken from the
//! runs' `extra.command[].missing`. Such runs are left out of that
//! metric's statistics, never counted as 0; this says so, so that a
//! metric over fewer runs, or none, is never read as if the runs were
//! fewer.

use std::collections::{BTreeSet, HashSet};

use serde::Serialize;

use super::conditions::Condition;
use crate::report::metric::Metric;
use crate::store::ReportRun;

/// One metric of one condition that some of its ok runs have no value of.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Absent {
    /// Index into the analysis's conditions.
    pub condition: usize,
    pub metric: Metric,
    /// Ok runs of the condition without a value of the metric.
    pub runs_without: usize,
    /// Ok runs of the condition.
    pub runs: usize,
    /// Why, one entry per distinct reason, sorted.
    pub why: Vec<String>,
}

impl Absent {
    /// "voluntary context switches: not given for any of its 3 ok runs
    /// (not given by this kernel: …)".
    pub fn sentence(&self) -> String {
        let what = match (self.runs_without, self.runs) {
            (_, 1) => "its one ok run".to_string(),
            (without, runs) if without == runs => format!("any of its {runs} ok runs"),
            (without, runs) => format!("{without} of its {runs} ok runs"),
        };
        format!(
            "{}: not given for {what} ({})",
            self.metric.label(),
            self.why.join("; ")
        )
    }
}

/// The `TreeStats` figure (`extra.command[].missing`'s key) a metric of a
/// program's tree comes from.
fn tree_figure(metric: Metric) -> Option<&'static str> {
    match metric {
        Metric::Nvcsw => Some("voluntary_switches"),
        Metric::Nivcsw => Some("involuntary_switches"),
        Metric::Field(f) => Some(f.def().tree_missing),
        _ => None,
    }
}

/// Why `run` has no value of `metric`.
fn reason(metric: Metric, run: &ReportRun) -> String {
    match tree_figure(metric).and_then(|k| run.not_given.get(k)) {
        Some(why) => format!("not given by this kernel: {why}"),
        // A field says why it can be absent.
        None => match metric {
            Metric::Field(f) => f.def().absent.into(),
            _ if run.workload_kind == "command" => {
                "not given for the program's tree (the run does not say why)".into()
            }
            _ => "not recorded for this run".into(),
        },
    }
}

/// Every (condition, metric) whose cell has fewer values than the
/// condition has ok runs; `cond_runs` are each condition's ok runs
/// (indices into `runs`).
pub(super) fn absent(
    conditions: &[Condition],
    cond_runs: &[Vec<usize>],
    runs: &[ReportRun],
) -> Vec<Absent> {
    let mut out = Vec::new();
    for (c, cond) in conditions.iter().enumerate() {
        let ok = &cond_runs[c];
        for cell in &cond.cells {
            if cell.n >= ok.len() {
                continue;
            }
            let with: HashSet<i64> = cell.run_ids.iter().copied().collect();
            let why: BTreeSet<String> = ok
                .iter()
                .map(|&ri| &runs[ri])
                .filter(|r| !with.contains(&r.id))
                .map(|r| reason(cell.metric, r))
                .collect();
            out.push(Absent {
                condition: c,
                metric: cell.metric,
                runs_without: ok.len() - cell.n,
                runs: ok.len(),
                why: why.into_iter().collect(),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sentence_counts_the_runs_without() {
        let x = |runs_without, runs| Absent {
            condition: 0,
            metric: Metric::Nvcsw,
            runs_without,
            runs,
            why: vec!["a".into(), "b".into()],
        };
        assert_eq!(
            x(1, 1).sentence(),
            "voluntary context switches: not given for its one ok run (a; b)"
        );
        assert_eq!(
            x(3, 3).sentence(),
            "voluntary context switches: not given for any of its 3 ok runs (a; b)"
        );
        assert_eq!(
            x(2, 5).sentence(),
            "voluntary context switches: not given for 2 of its 5 ok runs (a; b)"
        );
    }
}
