//! The first screen's picture of a workload, pure: the per-CPU timelines of
//! one run per policy drawn as one chart over one time span (a traced
//! campaign), or else the comparison whose significant effect is the
//! largest, whose chart is drawn.

use std::collections::{BTreeSet, HashMap};

use crate::record::ProcessRecord;
use crate::report::analyse::{Analysis, Comparison, Verdict, policy_label};
use crate::report::fmt;
use crate::report::sections::details::{Timeline, TimelineSet};
use crate::report::svg::{GanttBar, GanttChart, GanttRow, Meta, PALETTE, Series};

/// The colour of what is not one of the run's workers (an RT hog) and of
/// unattributed stretches.
const OTHER_COLOUR: &str = "#b0b0b0";

/// The size of an effect, for ranking: |ln ratio| of the lower mean to the
/// higher (a mean of 0 against a positive one is the largest there is);
/// None when it has no ratio.
pub fn effect_size(c: &Comparison) -> Option<f64> {
    match (c.mean_a, c.ratio) {
        (Some(0.0), _) => Some(f64::INFINITY),
        (_, Some(r)) if r > 0.0 && r.is_finite() => Some(r.ln().abs()),
        _ => None,
    }
}

/// The significant comparison of a workload with the largest effect
/// ([`effect_size`]; the first on ties), None when none is significant.
pub fn largest_effect<'a>(a: &'a Analysis, workload: &str) -> Option<&'a Comparison> {
    let mut best: Option<(&Comparison, f64)> = None;
    for c in a
        .comparisons
        .iter()
        .filter(|c| c.verdict == Verdict::Different && a.groups[c.group].key.workload == workload)
    {
        let e = effect_size(c).unwrap_or(0.0);
        if best.is_none_or(|(_, b)| e > b) {
            best = Some((c, e));
        }
    }
    best.map(|(c, _)| c)
}

/// One panel of a timeline picture: the policy it shows and its timeline.
pub struct Panel<'a> {
    pub policy: &'a str,
    pub timeline: &'a Timeline,
    /// The run's process rows (workers and hogs), to name and colour them.
    pub processes: &'a [ProcessRecord],
}

/// The panels of a drawn set, with the policies of its choice's panels in
/// order (a panel without a usable traced run is left out).
pub fn panels<'a>(
    set: &'a TimelineSet,
    policies: &'a [String],
    processes: &'a HashMap<i64, Vec<ProcessRecord>>,
) -> Vec<Panel<'a>> {
    set.panels
        .iter()
        .zip(policies)
        .filter_map(|(t, p)| {
            let t = t.as_ref()?;
            Some(Panel {
                policy: p,
                timeline: t,
                processes: processes.get(&t.info.run_id).map_or(&[], Vec::as_slice),
            })
        })
        .collect()
}

/// Who held each CPU in each panel's run, one row per policy and CPU the
/// run's tasks used, on one time axis from each trace's start to `span_ns`:
/// a bar per slice, coloured by the process's index in its run.
pub fn timelines(workload: &str, panels: &[Panel], span_ns: u64) -> GanttChart {
    let mut d = Drawing::default();
    // A simulated campaign's timelines are the model's (their processes
    // have no pid: the timeline names them by index).
    let predicted = !panels.is_empty() && panels.iter().all(|p| p.timeline.info.predicted);
    for p in panels {
        d.panel(p);
    }
    GanttChart {
        meta: timelines_meta(workload, panels, span_ns, predicted),
        rows: d.rows,
        bars: d.bars,
        x_max: span_ns as f64 / 1e6,
        note: std::iter::once(if predicted {
            "The model's prediction (schedlab simulate), not a kernel trace: one bar per slice the model gives \
             a process, coloured by process; gaps: the CPU idle in the model."
                .to_string()
        } else {
            "One bar per slice, from sched_switch in to sched_switch out, coloured by process; gaps: the CPU \
             idle or running other programs."
                .to_string()
        })
        .chain(d.notes)
        .collect::<Vec<_>>()
        .join(" "),
        legend: legend(d.workers, d.others),
    }
}

/// The timelines' rows, bars and notes as the panels are drawn.
#[derive(Default)]
struct Drawing {
    rows: Vec<GanttRow>,
    bars: Vec<GanttBar>,
    /// Workers drawn (the highest index + 1), for the legend.
    workers: usize,
    /// Whether something not a worker (a hog, an unattributed stretch)
    /// was drawn.
    others: bool,
    notes: Vec<String>,
}

impl Drawing {
    /// One panel: a row per CPU its run's tasks used, a bar per slice and
    /// per unattributed stretch, and its caveats.
    fn panel(&mut self, p: &Panel) {
        let t = p.timeline;
        let origin = t.info.start_ns + t.window.from_ns;
        let tgid: HashMap<i32, i32> = t.tasks.iter().map(|k| (k.tid, k.tgid)).collect();
        let cpus: BTreeSet<u32> = t.slices.iter().map(|s| s.cpu).collect();
        let first_row = self.rows.len();
        for &cpu in &cpus {
            self.rows.push(GanttRow {
                label: format!("{} · CPU {cpu}", policy_label(p.policy)),
                colour: PALETTE[0].to_string(),
            });
        }
        if cpus.is_empty() {
            self.rows.push(GanttRow {
                label: format!("{} · no slices", policy_label(p.policy)),
                colour: PALETTE[0].to_string(),
            });
        }
        let row_of = |cpu: u32| cpus.iter().position(|&c| c == cpu).map(|k| first_row + k);
        let ms = |ns: u64| ns.saturating_sub(origin) as f64 / 1e6;
        for s in &t.slices {
            let Some(row) = row_of(s.cpu) else { continue };
            let pid = tgid.get(&s.pid).copied().unwrap_or(s.pid);
            let (who, colour) = self.who(p, pid);
            self.bars.push(GanttBar {
                row,
                start: ms(s.start_ns),
                end: ms(s.end_ns),
                inner_end: None,
                tooltip: format!(
                    "{} run {}: {who} on CPU {}, {}–{} ms ({} µs)",
                    policy_label(p.policy),
                    t.info.run_id,
                    s.cpu,
                    fmt::sig(ms(s.start_ns), 5),
                    fmt::sig(ms(s.end_ns), 5),
                    fmt::sig(s.len_ns() as f64 / 1e3, 4)
                ),
                colour: Some(colour.to_string()),
            });
        }
        for r in &t.repairs {
            if let Some(row) = row_of(r.cpu) {
                self.others = true;
                self.bars.push(GanttBar {
                    row,
                    start: ms(r.from_ns),
                    end: ms(r.to_ns),
                    inner_end: None,
                    tooltip: format!(
                        "{} run {}: unattributed on CPU {} (a switch the kernel never emitted)",
                        policy_label(p.policy),
                        t.info.run_id,
                        r.cpu
                    ),
                    colour: Some(OTHER_COLOUR.to_string()),
                });
            }
        }
        if let Some(c) = t.info.caveat() {
            self.notes.push(c);
        }
        if t.slices.len() < t.slices_total {
            self.notes.push(format!(
                "Run {}: only the first {} of {} slices are drawn.",
                t.info.run_id,
                t.slices.len(),
                t.slices_total
            ));
        }
    }

    /// The name and colour of process `pid` of panel `p`'s run.
    fn who(&mut self, p: &Panel, pid: i32) -> (String, &'static str) {
        let t = p.timeline;
        let proc = if t.info.predicted {
            p.processes
                .iter()
                .find(|r| crate::sim::timeline::task_id(r.index) == pid)
        } else {
            p.processes.iter().find(|r| r.pid == pid)
        };
        let pid_text = |r: &crate::record::ProcessRecord| {
            if t.info.predicted {
                "(simulated)".to_string()
            } else {
                format!("(pid {})", r.pid)
            }
        };
        match proc {
            Some(r) if r.role == "worker" => {
                self.workers = self.workers.max(r.index as usize + 1);
                (
                    format!("process {} {}", r.index + 1, pid_text(r)),
                    PALETTE[r.index as usize % PALETTE.len()],
                )
            }
            Some(r) => {
                self.others = true;
                (format!("{} {}", r.role, pid_text(r)), OTHER_COLOUR)
            }
            None => {
                self.others = true;
                (format!("pid {pid}"), OTHER_COLOUR)
            }
        }
    }
}

/// The timelines' id and titles: traces', or the model's predictions'.
fn timelines_meta(workload: &str, panels: &[Panel], span_ns: u64, predicted: bool) -> Meta {
    let runs: Vec<String> = panels
        .iter()
        .map(|p| p.timeline.info.run_id.to_string())
        .collect();
    Meta {
        kind: "first-timelines",
        id: super::super::chart_id(&["first-timelines", workload]),
        data: vec![("workload", workload.to_string()), ("runs", runs.join(" "))],
        title: if predicted {
            format!(
                "{workload}: who holds each CPU in the model's prediction, one run per policy, first {} \
                 of each simulated run",
                crate::units::format_ns(span_ns)
            )
        } else {
            format!(
                "{workload}: who held each CPU, one run per policy, first {} of each trace",
                crate::units::format_ns(span_ns)
            )
        },
        y_label: String::new(),
        x_label: if predicted {
            "ms after the simulated run began".into()
        } else {
            "ms after the run's trace began".into()
        },
    }
}

/// "process 1" … per colour; when there are more processes than colours,
/// each entry names the processes that share its colour.
fn legend(workers: usize, others: bool) -> Vec<Series> {
    let n = PALETTE.len();
    (0..workers.min(n))
        .map(|k| {
            let same: Vec<String> = (k..workers)
                .step_by(n)
                .map(|i| (i + 1).to_string())
                .collect();
            Series {
                name: match same.len() {
                    1 => format!("process {}", same[0]),
                    2 => format!("processes {} and {}", same[0], same[1]),
                    _ => format!("processes {}, {}, …", same[0], same[1]),
                },
                colour: PALETTE[k].to_string(),
            }
        })
        .chain(others.then(|| Series {
            name: "other task of the run, or unattributed".into(),
            colour: OTHER_COLOUR.to_string(),
        }))
        .collect()
}
