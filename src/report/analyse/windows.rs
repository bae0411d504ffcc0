//! Duration workloads: whether the workers' windows of each run ended
//! together.

use super::groups::{Factors, run_label};
use super::runs::RunValues;
use crate::store::ReportRun;
use serde::Serialize;

/// Duration workloads: whether every worker's window ended at release +
/// duration, as the workers are built to (all shares, fairness and work per
/// second assume one common window).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct WindowCheck {
    /// Ok runs of duration workloads with end times for their workers.
    pub runs_checked: usize,
    /// Runs whose workers' windows ended further apart than
    /// `max(WINDOW_TOLERANCE_MS, 1 % of the makespan)`.
    pub differing: Vec<WindowDiff>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WindowDiff {
    pub run_id: i64,
    pub label: String,
    /// Last worker's end minus first worker's end.
    pub spread_ms: f64,
}

/// Windows of one run may end this far apart before the report says so (a
/// worker notices the deadline between two steps of its loop, and a noisy
/// machine delays that by milliseconds).
pub const WINDOW_TOLERANCE_MS: f64 = 20.0;

/// Last end minus first end over a run's workers (None when any is unknown).
pub(super) fn window_spread(ends: impl Iterator<Item = Option<i64>>) -> Option<i64> {
    let ends: Option<Vec<i64>> = ends.collect();
    let ends = ends.filter(|e| !e.is_empty())?;
    Some(ends.iter().max()? - ends.iter().min()?)
}

/// The duration workloads' runs whose windows ended too far apart.
pub(super) fn check_windows(
    runs: &[ReportRun],
    run_values: &[Option<RunValues>],
    factors: &Factors,
) -> WindowCheck {
    let mut windows = WindowCheck::default();
    for (r, v) in runs.iter().zip(run_values) {
        let Some(spread_ns) = v.as_ref().and_then(|v| v.window_spread_ns) else {
            continue;
        };
        windows.runs_checked += 1;
        let spread_ms = spread_ns as f64 / 1e6;
        let makespan_ms = r.makespan_ns.unwrap_or(0) as f64 / 1e6;
        if spread_ms > WINDOW_TOLERANCE_MS.max(0.01 * makespan_ms) {
            windows.differing.push(WindowDiff {
                run_id: r.id,
                label: run_label(r, factors),
                spread_ms,
            });
        }
    }
    windows
}

#[cfg(test)]
mod window_tests {
    use super::window_spread;

    #[test]
    fn spread_is_last_end_minus_first_end() {
        let ends = [
            Some(2_000_000_000),
            Some(2_000_400_000),
            Some(2_163_000_000),
        ];
        assert_eq!(window_spread(ends.into_iter()), Some(163_000_000));
        assert_eq!(window_spread([Some(5)].into_iter()), Some(0));
    }

    #[test]
    fn unknown_ends_give_no_spread() {
        assert_eq!(window_spread([Some(1), None].into_iter()), None);
        assert_eq!(window_spread(std::iter::empty()), None);
    }
}
