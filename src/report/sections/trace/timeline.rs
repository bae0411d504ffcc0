//! The per-CPU timeline of one traced run: which process held each CPU
//! when, in a window of its trace, one colour per process; or of one
//! simulated run, the model's prediction, drawn the same way and saying so.

use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

use crate::report::fmt;
use crate::report::sections::details::{Timeline, window_text};
use crate::report::svg::{GanttBar, GanttChart, GanttRow, Meta, PALETTE, Series};
use crate::report::window::TimeWindow;
use crate::trace::SwitchEnd;
use crate::trace::derive::{Repair, Slice};

/// What the JSON report says of the timeline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TimelineSummary {
    pub run_id: i64,
    pub chosen: bool,
    /// Relative to the trace's start.
    pub window: TimeWindow,
    pub trace_ns: u64,
    pub slices_total: usize,
    pub slices_shown: usize,
    pub unusable: bool,
    /// Why the trace is unusable, or what its repairs cost (None: neither).
    pub caveat: Option<String>,
    /// Repaired gaps overlapping the window.
    pub repairs_shown: usize,
    /// The model's predicted timeline of a simulated run, not a kernel
    /// trace.
    pub predicted: bool,
}

pub fn summary(t: &Timeline) -> TimelineSummary {
    TimelineSummary {
        run_id: t.info.run_id,
        chosen: t.chosen,
        window: t.window,
        trace_ns: t.info.end_ns.saturating_sub(t.info.start_ns),
        slices_total: t.slices_total,
        slices_shown: t.slices.len(),
        unusable: t.info.unusable,
        caveat: t.info.caveat(),
        repairs_shown: t.repairs.len(),
        predicted: t.info.predicted,
    }
}

/// The colour of an unattributed stretch: a grey no process is given.
const UNATTRIBUTED_COLOUR: &str = "#b0b0b0";

fn end_text(end: Option<SwitchEnd>) -> &'static str {
    match end {
        Some(SwitchEnd::Preempted) => "preempted",
        Some(SwitchEnd::Yielded) => "yielded",
        Some(SwitchEnd::Blocked) => "blocked",
        Some(SwitchEnd::Exited) => "exited",
        Some(SwitchEnd::Throttled) => "throttled (its class out of bandwidth)",
        None => "still running at the trace's end",
    }
}

/// The chart: a row per CPU, a bar per slice coloured by process, times in
/// ms from the window's start.
pub fn chart(t: &Timeline) -> GanttChart {
    let origin = t.info.start_ns + t.window.from_ns;
    let len_ms = t.window.len_ns() as f64 / 1e6;
    let cpus: BTreeSet<u32> = t
        .info
        .cpus
        .iter()
        .copied()
        .chain(t.slices.iter().map(|s| s.cpu))
        .collect();
    let cpus: Vec<u32> = cpus.into_iter().collect();
    let who = Who::of(t);
    let procs: BTreeSet<i32> = t.slices.iter().map(|s| who.process(s.pid).0).collect();
    let colour: BTreeMap<i32, &str> = procs
        .iter()
        .enumerate()
        .map(|(k, &p)| (p, PALETTE[k % PALETTE.len()]))
        .collect();
    let bars = t
        .slices
        .iter()
        .filter_map(|s| {
            let row = cpus.iter().position(|&c| c == s.cpu)?;
            let tgid = who.process(s.pid).0;
            let mut bar = slice_bar(s, &who, origin);
            bar.row = row;
            bar.colour = colour.get(&tgid).map(|c| c.to_string());
            Some(bar)
        })
        .chain(t.repairs.iter().filter_map(|r| {
            let row = cpus.iter().position(|&c| c == r.cpu)?;
            Some(repair_bar(r, row, origin))
        }))
        .collect();
    GanttChart {
        meta: chart_meta(t),
        rows: cpus
            .iter()
            .map(|c| GanttRow {
                label: format!("CPU {c}"),
                colour: PALETTE[0].to_string(),
            })
            .collect(),
        bars,
        x_max: len_ms,
        note: chart_note(t),
        legend: procs
            .iter()
            .map(|&p| Series {
                name: who.name(p),
                colour: colour[&p].to_string(),
            })
            .chain((!t.repairs.is_empty()).then(|| Series {
                name: "unattributed (switch never emitted)".to_string(),
                colour: UNATTRIBUTED_COLOUR.to_string(),
            }))
            .collect(),
    }
}

/// Who a slice's task is: its process and how the chart names them.
struct Who<'a> {
    t: &'a Timeline,
    /// Each task's process id and command.
    tgid_of: BTreeMap<i32, (i32, &'a str)>,
    predicted: bool,
}

impl<'a> Who<'a> {
    fn of(t: &'a Timeline) -> Who<'a> {
        Who {
            t,
            tgid_of: t
                .tasks
                .iter()
                .map(|k| (k.tid, (k.tgid, k.comm.as_str())))
                .collect(),
            predicted: t.info.predicted,
        }
    }

    /// The process (id and command) of task `pid`.
    fn process(&self, pid: i32) -> (i32, &'a str) {
        self.tgid_of.get(&pid).copied().unwrap_or((pid, ""))
    }

    /// The name of process `tgid` in the legend.
    fn name(&self, tgid: i32) -> String {
        let comm = self
            .t
            .tasks
            .iter()
            .find(|k| k.tid == tgid)
            .map_or("", |k| k.comm.as_str());
        // The model's processes have no pid: their role and index name them.
        if self.predicted && !comm.is_empty() {
            comm.to_string()
        } else if comm.is_empty() {
            format!("pid {tgid}")
        } else {
            format!("pid {tgid} ({comm})")
        }
    }
}

/// The bar of slice `s` (its row and colour are the caller's), with a
/// tooltip saying whose it is and how it began and ended.
fn slice_bar(s: &Slice, who: &Who, origin: u64) -> GanttBar {
    let predicted = who.predicted;
    let (tgid, comm) = who.process(s.pid);
    let name = |tgid| who.name(tgid);
    let start = s.start_ns.saturating_sub(origin) as f64 / 1e6;
    let end = s.end_ns.saturating_sub(origin) as f64 / 1e6;
    GanttBar {
        row: 0,
        start,
        end,
        inner_end: None,
        tooltip: format!(
            "{}{} on CPU {}: {}–{} ms ({} µs), {}{}",
            if predicted {
                name(tgid)
            } else if s.pid == tgid {
                format!("pid {tgid}")
            } else {
                format!("thread {} of pid {tgid}", s.pid)
            },
            if comm.is_empty() || predicted {
                String::new()
            } else {
                format!(" ({comm})")
            },
            s.cpu,
            fmt::sig(start, 6),
            fmt::sig(end, 6),
            fmt::sig(s.len_ns() as f64 / 1e3, 4),
            if s.end_repaired {
                "switch-out never emitted by the kernel: ends at its last event"
            } else if predicted && s.end.is_none() {
                "still running when the model stopped"
            } else {
                end_text(s.end)
            },
            if s.start_clipped {
                "; running when the trace began"
            } else if s.start_repaired {
                "; switch-in never emitted by the kernel: starts at its first event"
            } else {
                ""
            }
        ),
        colour: None,
    }
}

/// The grey bar of a repaired gap no task is given.
fn repair_bar(r: &Repair, row: usize, origin: u64) -> GanttBar {
    let start = r.from_ns.saturating_sub(origin) as f64 / 1e6;
    let end = r.to_ns.saturating_sub(origin) as f64 / 1e6;
    GanttBar {
        row,
        start,
        end,
        inner_end: None,
        tooltip: format!(
            "unattributed on CPU {}: {}–{} ms ({} µs): the kernel never emitted the switch \
             from pid {} (last seen) to pid {} (first seen)",
            r.cpu,
            fmt::sig(start, 6),
            fmt::sig(end, 6),
            fmt::sig(r.unattributed_ns() as f64 / 1e3, 4),
            r.before_pid,
            r.after_pid
        ),
        colour: Some(UNATTRIBUTED_COLOUR.to_string()),
    }
}

/// The chart's id and titles: a trace's, or the model's prediction's.
fn chart_meta(t: &Timeline) -> Meta {
    let predicted = t.info.predicted;
    Meta {
        kind: "trace-timeline",
        // A prediction may be drawn beside a traced run of the same id
        // (another database): ids apart.
        id: if predicted {
            format!("trace-timeline-model-run-{}", t.info.run_id)
        } else {
            format!("trace-timeline-run-{}", t.info.run_id)
        },
        data: vec![("run", t.info.run_id.to_string())],
        title: if predicted {
            format!(
                "Run {}: who holds each CPU in the model's prediction (not a kernel trace), {} into the \
                 simulated run",
                t.info.run_id,
                window_text(&t.window)
            )
        } else {
            format!(
                "Run {}: who held each CPU, {} into its trace",
                t.info.run_id,
                window_text(&t.window)
            )
        },
        y_label: String::new(),
        x_label: format!(
            "ms after {} into the {}",
            crate::units::format_ns(t.window.from_ns),
            if predicted { "simulated run" } else { "trace" }
        ),
    }
}

/// What the chart's bars, gaps and greys are, and whether slices were cut.
fn chart_note(t: &Timeline) -> String {
    let predicted = t.info.predicted;
    let cut = t.slices.len() < t.slices_total;
    format!(
        "{}{}{}",
        if predicted {
            "The model's prediction (schedlab simulate), not a kernel trace: one bar per slice the model \
             gives a process, from its switch-in to its switch-out; gaps: the CPU idle in the model."
                .to_string()
        } else {
            format!(
                "{}One bar per slice from sched_switch in to sched_switch out; gaps: the CPU idle or \
                 running other programs.",
                t.info.caveat().map_or(String::new(), |c| format!("{c} "))
            )
        },
        if t.repairs.is_empty() {
            ""
        } else {
            " Grey: unattributed, between the last event of one task and the first of the next where the \
             kernel never emitted the switch."
        },
        if cut {
            format!(
                " Only the first {} of the window's {} slices are drawn: narrow --window.",
                t.slices.len(),
                t.slices_total
            )
        } else {
            String::new()
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::TraceInfo;
    use crate::trace::Task;
    use crate::trace::derive::{Repair, Slice};
    use crate::trace::verdict::Verdict;

    fn timeline() -> Timeline {
        let slice = |pid, cpu, start_ns, end_ns, end| Slice {
            pid,
            cpu,
            start_ns,
            end_ns,
            end,
            start_clipped: false,
            start_repaired: false,
            end_repaired: false,
        };
        Timeline {
            info: TraceInfo {
                run_id: 7,
                start_ns: 1_000_000_000,
                end_ns: 3_000_000_000,
                cpus: vec![0, 1],
                lost_events: 0,
                mismatched_switches: 0,
                unusable: false,
                event_count: 10,
                verdict: Verdict::default(),
                predicted: false,
                release_ns: None,
            },
            chosen: true,
            window: TimeWindow {
                from_ns: 500_000_000,
                to_ns: 600_000_000,
            },
            slices: vec![
                slice(
                    10,
                    0,
                    1_510_000_000,
                    1_520_000_000,
                    Some(SwitchEnd::Preempted),
                ),
                slice(
                    11,
                    0,
                    1_520_000_000,
                    1_530_000_000,
                    Some(SwitchEnd::Blocked),
                ),
                slice(12, 1, 1_590_000_000, 1_700_000_000, None),
            ],
            slices_total: 3,
            repairs: Vec::new(),
            tasks: vec![
                Task {
                    tid: 10,
                    tgid: 10,
                    comm: "a".into(),
                },
                Task {
                    tid: 11,
                    tgid: 11,
                    comm: "b".into(),
                },
                Task {
                    tid: 12,
                    tgid: 10,
                    comm: "a-thread".into(),
                },
            ],
        }
    }

    #[test]
    fn rows_are_cpus_and_colours_are_processes() {
        let g = chart(&timeline());
        assert_eq!(g.rows.len(), 2);
        assert_eq!(g.bars.len(), 3);
        assert!((g.bars[0].start - 10.0).abs() < 1e-9 && (g.bars[0].end - 20.0).abs() < 1e-9);
        // A thread takes its process's colour; two processes, two entries.
        assert_eq!(g.bars[0].colour, g.bars[2].colour);
        assert_ne!(g.bars[0].colour, g.bars[1].colour);
        assert_eq!(g.legend.len(), 2);
        assert_eq!(g.legend[0].name, "pid 10 (a)");
        assert!(g.bars[2].tooltip.contains("thread 12 of pid 10"));
        assert!((g.x_max - 100.0).abs() < 1e-9);
        let svg = g.render();
        assert_eq!(svg.matches("<g class=\"mark\">").count(), 3);
        assert!(svg.contains(">CPU 1</text>"));
    }

    #[test]
    fn an_unusable_trace_says_why_in_the_note_and_repairs_are_drawn_grey() {
        let mut t = timeline();
        t.info.verdict = Verdict {
            repaired: 1,
            unattributed_ns: 12_042_000,
            oncpu_ns: 200_000_000,
            ..Verdict::default()
        };
        t.info.unusable = true;
        t.repairs = vec![Repair {
            cpu: 1,
            before_pid: 68,
            after_pid: 12,
            from_ns: 1_560_000_000,
            to_ns: 1_572_042_000,
        }];
        let g = chart(&t);
        assert!(
            g.note
                .starts_with("Run 7's trace is unusable: 1 sched_switch the kernel never emitted"),
            "{}",
            g.note
        );
        assert_eq!(g.bars.len(), 4);
        assert_eq!(g.bars[3].row, 1);
        assert_eq!(g.bars[3].colour.as_deref(), Some(UNATTRIBUTED_COLOUR));
        let len = format!("({} µs)", fmt::sig(12_042.0, 4));
        assert!(g.bars[3].tooltip.contains(&len), "{}", g.bars[3].tooltip);
        assert!(
            g.bars[3]
                .tooltip
                .contains("from pid 68 (last seen) to pid 12")
        );
        assert_eq!(
            g.legend.last().unwrap().name,
            "unattributed (switch never emitted)"
        );
        let s = summary(&t);
        assert!(s.unusable && s.caveat.is_some() && s.repairs_shown == 1);
        // A clean trace says nothing of the kind.
        assert!(!chart(&timeline()).note.contains("Run 7"));
    }

    #[test]
    fn a_cut_window_says_so() {
        let mut t = timeline();
        t.slices_total = 50_000;
        assert!(
            chart(&t)
                .note
                .contains("first 3 of the window's 50000 slices")
        );
    }
}
