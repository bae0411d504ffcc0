//! The Gantt chart of one WRR run: which task held the CPU when, from its
//! slice records (planned start → actual end, and the CPU time received).

use anyhow::{Result, bail};
use serde::Serialize;

use super::model::WeightedRun;
use crate::record::SliceRow;
use crate::report::fmt;
use crate::report::svg::{GanttBar, GanttChart, GanttRow, Meta, PALETTE};

/// Runs longer than this (s) are shown from the start up to [`WINDOW_S`].
pub const SHOW_ALL_UP_TO_S: f64 = 2.5;
/// How much of a long run the chart shows, s.
pub const WINDOW_S: f64 = 2.0;

/// One task of the chart.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GanttTask {
    pub cpu: u32,
    pub process_index: u32,
    pub weight: u32,
}

/// The chosen run and the part of it that is drawn.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Gantt {
    pub run_id: i64,
    pub seq: i64,
    pub rep: i64,
    /// "hash-30s, 6 processes, WRR (fifo)".
    pub label: String,
    /// Whether the run was chosen with --gantt-run.
    pub chosen: bool,
    /// End of the last slice, s after release.
    pub run_end_s: f64,
    /// The chart shows 0..window_s.
    pub window_s: f64,
    pub truncated: bool,
    pub slices_total: usize,
    pub slices_shown: usize,
    pub tasks: Vec<GanttTask>,
    #[serde(skip)]
    pub slices: Vec<SliceRow>,
}

/// The run to draw: `chosen` if given (it must be a WRR run with slices
/// among `runs`), else the first (in campaign order) that has slices.
pub fn pick(
    runs: &[WeightedRun],
    chosen: Option<i64>,
    campaign: i64,
) -> Result<Option<&WeightedRun>> {
    let with_slices = || {
        runs.iter()
            .filter(|r| r.wrr.is_some() && !r.slices.is_empty())
    };
    match chosen {
        Some(id) => match with_slices().find(|r| r.run_id == id) {
            Some(r) => Ok(Some(r)),
            None => {
                let ids: Vec<String> = with_slices()
                    .take(12)
                    .map(|r| r.run_id.to_string())
                    .collect();
                bail!(
                    "--gantt-run {id}: run {id} is not an ok WRR run with slices in campaign {campaign} ({})",
                    if ids.is_empty() {
                        "the campaign has none".to_string()
                    } else {
                        format!("some that are: {}", ids.join(", "))
                    }
                )
            }
        },
        None => Ok(with_slices().min_by_key(|r| (r.seq, r.run_id))),
    }
}

/// The Gantt data of a run.
pub fn build(r: &WeightedRun, label: String, chosen: bool) -> Gantt {
    let run_end_s = r
        .slices
        .iter()
        .map(|s| s.actual_end_ns.max(s.planned_start_ns))
        .max()
        .unwrap_or(0) as f64
        / 1e9;
    let truncated = run_end_s > SHOW_ALL_UP_TO_S;
    let window_s = if truncated {
        WINDOW_S
    } else {
        run_end_s.max(1e-3)
    };
    let shown: Vec<SliceRow> = r
        .slices
        .iter()
        .filter(|s| (s.planned_start_ns as f64 / 1e9) < window_s)
        .cloned()
        .collect();
    let mut tasks: Vec<GanttTask> = r
        .slices
        .iter()
        .map(|s| GanttTask {
            cpu: s.cpu,
            process_index: s.process_index,
            weight: r
                .weights
                .get(s.process_index as usize)
                .copied()
                .unwrap_or(1),
        })
        .collect();
    tasks.sort_by_key(|t| (t.cpu, t.process_index));
    tasks.dedup();
    Gantt {
        run_id: r.run_id,
        seq: r.seq,
        rep: r.rep,
        label,
        chosen,
        run_end_s,
        window_s,
        truncated,
        slices_total: r.slices.len(),
        slices_shown: shown.len(),
        tasks,
        slices: shown,
    }
}

/// The chart.
pub fn chart(g: &Gantt) -> GanttChart {
    let multi_cpu = g
        .tasks
        .first()
        .is_some_and(|f| g.tasks.iter().any(|t| t.cpu != f.cpu));
    let rows: Vec<GanttRow> = g
        .tasks
        .iter()
        .map(|t| GanttRow {
            label: if multi_cpu {
                format!("cpu {} · task {} (w {})", t.cpu, t.process_index, t.weight)
            } else {
                format!("task {} (w {})", t.process_index, t.weight)
            },
            colour: PALETTE[t.process_index as usize % PALETTE.len()].to_string(),
        })
        .collect();
    let mut nth = vec![0usize; g.tasks.len()];
    let bars = g
        .slices
        .iter()
        .filter_map(|s| {
            let row = g
                .tasks
                .iter()
                .position(|t| t.cpu == s.cpu && t.process_index == s.process_index)?;
            nth[row] += 1;
            let t = &g.tasks[row];
            let start = s.planned_start_ns as f64 / 1e9;
            let end = (s.actual_end_ns.max(s.planned_start_ns)) as f64 / 1e9;
            let late_ms = (s.actual_end_ns as f64 - s.planned_end_ns as f64) / 1e6;
            Some(GanttBar {
                row,
                start,
                end,
                inner_end: Some(start + s.cpu_ns as f64 / 1e9),
                tooltip: format!(
                    "task {} (weight {}), its slice {} on CPU {}: started {} s, planned end {} s, ended {} s \
                     ({} ms {}); held {} ms, CPU received {} ms",
                    t.process_index,
                    t.weight,
                    nth[row],
                    s.cpu,
                    fmt::sig(start, 6),
                    fmt::sig(s.planned_end_ns as f64 / 1e9, 6),
                    fmt::sig(end, 6),
                    fmt::sig(late_ms.abs(), 3),
                    if late_ms >= 0.0 { "after the plan" } else { "before the plan" },
                    fmt::sig((end - start) * 1e3, 4),
                    fmt::sig(s.cpu_ns as f64 / 1e6, 4)
                ),
                colour: None,
            })
        })
        .collect();
    GanttChart {
        meta: Meta {
            kind: "gantt",
            id: format!("gantt-run-{}", g.run_id),
            data: vec![("run", g.run_id.to_string())],
            title: format!(
                "WRR slices of run {} ({}, rep {})",
                g.run_id, g.label, g.rep
            ),
            y_label: String::new(),
            x_label: "seconds after barrier release".into(),
        },
        rows,
        bars,
        x_max: g.window_s,
        note: format!(
            "Bars: from a slice's start to its actual end; dark line inside: the CPU time the task received in it.{}",
            if g.truncated {
                format!(
                    " First {} s of {} s shown ({} of {} slices).",
                    fmt::sig(g.window_s, 3),
                    fmt::sig(g.run_end_s, 3),
                    g.slices_shown,
                    g.slices_total
                )
            } else {
                String::new()
            }
        ),
        legend: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wrr_run(id: i64, seq: i64, end_ms: u64) -> WeightedRun {
        let ms = 1_000_000;
        WeightedRun {
            run_id: id,
            seq,
            rep: 1,
            group: 0,
            policy: "wrr".into(),
            weights: vec![1, 2],
            procs: Vec::new(),
            slices: (0..end_ms / 30)
                .flat_map(|k| {
                    let t0 = k * 30 * ms;
                    [
                        SliceRow {
                            process_index: 0,
                            cpu: 0,
                            planned_start_ns: t0,
                            planned_end_ns: t0 + 10 * ms,
                            actual_end_ns: t0 + 10 * ms,
                            cpu_ns: 9 * ms,
                        },
                        SliceRow {
                            process_index: 1,
                            cpu: 0,
                            planned_start_ns: t0 + 10 * ms,
                            planned_end_ns: t0 + 30 * ms,
                            actual_end_ns: t0 + 30 * ms,
                            cpu_ns: 20 * ms,
                        },
                    ]
                })
                .collect(),
            wrr: Some(Default::default()),
        }
    }

    #[test]
    fn the_first_wrr_run_by_default_or_the_chosen_one() {
        let runs = vec![wrr_run(7, 3, 300), wrr_run(5, 1, 300), wrr_run(9, 2, 300)];
        assert_eq!(pick(&runs, None, 1).unwrap().unwrap().run_id, 5);
        assert_eq!(pick(&runs, Some(9), 1).unwrap().unwrap().run_id, 9);
        let e = pick(&runs, Some(4), 1).unwrap_err().to_string();
        assert!(
            e.contains("run 4 is not an ok WRR run") && e.contains("7, 5, 9"),
            "{e}"
        );
        assert!(pick(&[], None, 1).unwrap().is_none());
    }

    #[test]
    fn long_runs_show_their_first_two_seconds() {
        let g = build(&wrr_run(1, 1, 6000), "x".into(), false);
        assert!(g.truncated);
        assert_eq!(g.window_s, WINDOW_S);
        assert_eq!(g.slices_total, 400);
        assert_eq!(g.slices_shown, 134);
        assert_eq!(g.tasks.len(), 2);
        let svg = chart(&g).render();
        assert!(
            svg.contains("First 2 s of 6 s shown (134 of 400 slices)"),
            "{svg}"
        );
        assert_eq!(svg.matches("<g class=\"mark\">").count(), 134);
        assert!(svg.contains("task 1 (w 2)"));
        let short = build(&wrr_run(1, 1, 600), "x".into(), false);
        assert!(!short.truncated && short.slices_shown == short.slices_total);
        assert!((short.window_s - 0.6).abs() < 1e-9);
    }
}
