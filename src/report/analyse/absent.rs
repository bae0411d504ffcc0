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

/// Why `run` has no value of `metric`: the run's own words for its
/// program's tree (`extra.command[].missing`, by the `TreeStats` figure
/// the field comes from), else the field's.
fn reason(metric: Metric, run: &ReportRun) -> String {
    use crate::fields::{NOT_RECORDED, TREE_NOT_SAID};
    let Metric::Field(f) = metric else {
        let why = match run.workload_kind.as_str() {
            "command" => TREE_NOT_SAID,
            _ => NOT_RECORDED,
        };
        return why.into();
    };
    let d = f.def();
    match run.not_given.get(d.tree_missing) {
        Some(why) => format!("not given by this kernel: {why}"),
        None => match d.tree_absent {
            Some(why) if run.workload_kind == "command" => why.into(),
            _ => d.absent.into(),
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
