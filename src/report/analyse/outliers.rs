//! Flagged outlier values, most extreme first.

use super::conditions::Condition;
use crate::report::metric::Metric;
use crate::stats;
use serde::Serialize;
use std::collections::HashMap;

/// A flagged run of a condition and metric (kept in every statistic).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Outlier {
    pub condition: usize,
    pub label: String,
    pub metric: Metric,
    pub run_id: i64,
    pub seq: i64,
    pub rep: i64,
    pub value: f64,
    pub median: f64,
    /// Modified z-score.
    pub z: f64,
    /// value / median (None when the median is 0).
    pub times_median: Option<f64>,
}

/// Every flagged value, most extreme first.
pub(super) fn find_outliers(
    conditions: &[Condition],
    run_info: &HashMap<i64, (i64, i64)>,
) -> Vec<Outlier> {
    let mut outliers = Vec::new();
    for (ci, c) in conditions.iter().enumerate() {
        for cell in &c.cells {
            if !cell.flagged.iter().any(|&f| f) {
                continue;
            }
            let z = stats::modified_z_scores(&cell.values);
            let median = cell.summary.as_ref().map_or(f64::NAN, |s| s.median);
            for (k, &f) in cell.flagged.iter().enumerate() {
                if f {
                    let (seq, rep) = run_info.get(&cell.run_ids[k]).copied().unwrap_or((0, 0));
                    outliers.push(Outlier {
                        condition: ci,
                        label: c.label.clone(),
                        metric: cell.metric,
                        run_id: cell.run_ids[k],
                        seq,
                        rep,
                        value: cell.values[k],
                        median,
                        z: z[k],
                        times_median: (median != 0.0).then(|| cell.values[k] / median),
                    });
                }
            }
        }
    }

    outliers.sort_by(|a, b| b.z.abs().total_cmp(&a.z.abs()));
    outliers
}
