//! Trace: for campaigns with runs traced by the kernel (`--trace`), per
//! condition the slice-length distribution (a histogram per group), how
//! slices ended, migrations, the trace's wake-up-to-run latency beside the
//! workload's own latency, the agreement of each traced process with the
//! kernel's counters, and a per-CPU timeline of one run. Runs whose trace
//! lost events are listed and left out. A simulated campaign's runs carry
//! the model's predicted timelines in the same tables: shown the same way,
//! each saying it is the model's, without the comparison with counters
//! (the model's both).

mod timeline;

use anyhow::Result;
use serde_json::{Value, json};

use super::details::{Needs, RunDetails, TimelineNeed};
use super::{MAX_LISTED, Section, Table, more_line, plural};
use crate::report::analyse::Analysis;
use crate::report::analyse::trace::{
    AGREEMENT_TOLERANCE, Agreement, ConditionTrace, Spread, TraceAnalysis, analyse,
};
use crate::report::blocks::{Block, Figure};
use crate::report::charts::policy_colour;
use crate::report::fmt;
use crate::report::svg::{Bar, BarChart, Meta, Series};
use timeline::TimelineSummary;

/// The trace section (empty unless a run of the campaign was traced).
#[derive(Default)]
pub struct TraceSection {
    timeline_need: TimelineNeed,
    data: TraceAnalysis,
    timeline: Option<(TimelineSummary, crate::report::svg::GanttChart)>,
    /// The timeline run's CPUs: utilisation of the traced window and gaps.
    cpus: Vec<CpuRow>,
    /// Of the traced runs, those whose timeline is the model's prediction.
    predicted_runs: usize,
    /// The model's prediction of the timeline's run (`--model-timeline`).
    model: Option<(TimelineSummary, crate::report::svg::GanttChart)>,
}

/// One CPU of the timeline's run.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
struct CpuRow {
    cpu: u32,
    /// Share of the traced window the run's tasks held the CPU, %.
    busy_pct: f64,
    gaps: u64,
    gap_p50_us: Option<f64>,
    gap_max_us: Option<f64>,
    /// Time of repaired gaps no task can be given (switches the kernel
    /// never emitted), µs: neither held nor a gap.
    unattributed_us: f64,
}

fn cpu_rows(c: &[crate::trace::summary::CpuTrace]) -> Vec<CpuRow> {
    c.iter()
        .map(|c| {
            let p = c.gap_ns.percentiles();
            let us = |ns: u64| (p.count > 0).then_some(ns as f64 / 1e3);
            CpuRow {
                cpu: c.cpu,
                busy_pct: c.utilisation() * 100.0,
                gaps: p.count,
                gap_p50_us: us(p.p50_ns),
                gap_max_us: us(p.max_ns),
                unattributed_us: c.unattributed_ns as f64 / 1e3,
            }
        })
        .collect()
}

impl TraceSection {
    /// The section, drawing the timeline of `run` (default: the first
    /// usable traced run) over `window` of its trace.
    pub fn new(
        run: Option<i64>,
        window: Option<crate::report::window::TimeWindow>,
    ) -> TraceSection {
        TraceSection::with_model(run, window, None)
    }

    /// The same, with the model's prediction of the timeline's run from
    /// the simulated database `model_db` drawn under it.
    pub fn with_model(
        run: Option<i64>,
        window: Option<crate::report::window::TimeWindow>,
        model_db: Option<std::path::PathBuf>,
    ) -> TraceSection {
        TraceSection {
            timeline_need: TimelineNeed {
                run,
                window,
                model_db,
            },
            ..TraceSection::default()
        }
    }
}

fn us(v: Option<f64>) -> String {
    v.map_or_else(|| "–".into(), |v| fmt::sig(v, 3))
}

fn ratio(v: Option<f64>) -> String {
    v.map_or_else(|| "–".into(), |v| fmt::sig(v, 4))
}

fn condition_rows(c: &[ConditionTrace]) -> Vec<Vec<String>> {
    c.iter()
        .map(|c| {
            let own = |f: fn(&Spread) -> Option<f64>| {
                c.workload_latency
                    .as_ref()
                    .map_or_else(|| "–".into(), |(_, s)| us(f(s)))
            };
            vec![
                c.label.clone(),
                c.runs.to_string(),
                c.slices.to_string(),
                us(c.slice.p50_us),
                us(c.slice.p99_us),
                us(c.slice.max_us),
                c.preempted.to_string(),
                c.yielded.to_string(),
                c.voluntary.to_string(),
                c.migrations.to_string(),
                us(c.trace_wake.p50_us),
                us(c.trace_wake.p99_us),
                own(|s| s.p50_us),
                own(|s| s.p99_us),
                format!("{} of {}", c.flagged, c.compared),
            ]
        })
        .collect()
}

const HEADERS: [&str; 15] = [
    "condition",
    "runs",
    "slices",
    "slice p50 µs",
    "slice p99 µs",
    "slice max µs",
    "preempted",
    "yielded",
    "blocked or exited",
    "migrations",
    "trace wake→run p50 µs",
    "trace wake→run p99 µs",
    "workload latency p50 µs",
    "workload latency p99 µs",
    "processes off the kernel counters",
];

fn agreement_row(a: &Analysis, g: &Agreement) -> Vec<String> {
    vec![
        g.run_id.to_string(),
        a.conditions[g.condition].label.clone(),
        format!("{} (pid {})", g.process_index, g.pid),
        fmt::sig(g.trace_oncpu_ns as f64 / 1e6, 4),
        g.schedstat_run_ns
            .map_or_else(|| "–".into(), |v| fmt::sig(v as f64 / 1e6, 4)),
        ratio(g.oncpu_ratio),
        g.trace_switches.to_string(),
        match (g.rusage_switches, g.tree_tasks) {
            (None, _) => "–".into(),
            // The exit records' count and each task's last switch.
            (Some(n), Some(tasks)) => format!("{n} + {tasks}"),
            (Some(n), None) => n.to_string(),
        },
        ratio(g.switch_ratio),
        g.explanation.clone().unwrap_or_default(),
    ]
}

/// Share of slices per bin, one chart per group, a bar per condition.
fn histogram(a: &Analysis, group: usize, conds: &[&ConditionTrace]) -> Option<BarChart> {
    let edges = &conds.iter().find(|c| !c.bins.is_empty())?.bins;
    let label = |ns: u64| crate::units::format_ns(ns);
    Some(BarChart {
        meta: Meta {
            kind: "trace-slices",
            id: super::chart_id(&["trace-slices", &group.to_string()]),
            data: vec![("group", a.groups[group].label.clone())],
            title: format!("{}: slice lengths (trace)", a.groups[group].label),
            y_label: "% of complete slices".into(),
            x_label: "slice length".into(),
        },
        groups: edges
            .iter()
            .map(|b| vec![format!("{}–", label(b.lo_ns)), label(b.hi_ns)])
            .collect(),
        series: conds
            .iter()
            .enumerate()
            .map(|(k, c)| Series {
                name: c.policy.to_uppercase(),
                colour: policy_colour(&c.policy, k).to_string(),
            })
            .collect(),
        bars: (0..edges.len())
            .map(|i| {
                conds
                    .iter()
                    .map(|c| {
                        let b = c.bins.get(i)?;
                        let total: u64 = c.bins.iter().map(|b| b.count).sum();
                        let pct = if total == 0 {
                            0.0
                        } else {
                            100.0 * b.count as f64 / total as f64
                        };
                        Some(Bar {
                            value: pct,
                            lo: None,
                            hi: None,
                            tooltip: format!(
                                "{}: {} of {} slices ({} %) from {} to {}",
                                c.label,
                                b.count,
                                total,
                                fmt::sig(pct, 3),
                                label(b.lo_ns),
                                label(b.hi_ns)
                            ),
                        })
                    })
                    .collect()
            })
            .collect(),
        y_max: None,
    })
}

/// What a predicted timeline's wake-up-to-run latency is.
const MODEL_WAKE: &str = "A predicted timeline's wake-up-to-run latency is the model's: from each time the \
     model makes a process runnable (its release, the end of a sleep, a peer's signal, its RT run queue \
     unthrottled, its DEADLINE runtime replenished; the last two are no sched_waking in a kernel trace) to \
     the process's next switch-in.";

/// What the model's timeline drawn under the traced one shows.
fn twin_caption(traced: &TimelineSummary, model: &TimelineSummary) -> String {
    format!(
        "Under run {}: the model's predicted timeline of the same condition and repetition (simulated run {} \
         of the --model-timeline database; schedlab simulate, not a kernel trace), {} of its {} simulated run, \
         counted from the workers' release as run {}'s {} of its {} trace (each as far as it goes).",
        traced.run_id,
        model.run_id,
        super::details::window_text(&model.window),
        crate::units::format_ns(model.trace_ns),
        traced.run_id,
        super::details::window_text(&traced.window),
        crate::units::format_ns(traced.trace_ns),
    )
}

/// What the timeline figure shows, and how to draw another.
fn timeline_caption(s: &TimelineSummary) -> String {
    let which = match (s.chosen, s.predicted) {
        (true, _) => " (chosen)",
        (false, false) => ", the first traced run",
        (false, true) => ", the first simulated run",
    };
    if s.predicted {
        format!(
            "Run {}{}: the model's predicted timeline (schedlab simulate), not a kernel trace: {} of its {} \
             simulated run. `schedlab report --timeline-run N --window FROM..TO` draws another run or stretch.",
            s.run_id,
            which,
            super::details::window_text(&s.window),
            crate::units::format_ns(s.trace_ns),
        )
    } else {
        format!(
            "Run {}{}: {} of its {} trace. `schedlab report --timeline-run N --window FROM..TO` draws another \
             run or stretch.{}",
            s.run_id,
            which,
            super::details::window_text(&s.window),
            crate::units::format_ns(s.trace_ns),
            s.caveat.as_ref().map_or(String::new(), |c| format!(" {c}"))
        )
    }
}

impl TraceSection {
    /// What the traced (or predicted) runs are and how they are read.
    fn intro(&self, all_predicted: bool) -> Vec<Block> {
        let d = &self.data;
        let mut b = vec![if all_predicted {
            Block::p(format!(
                "{} of the campaign {} simulated (schedlab simulate): each has the model's predicted \
                 timeline, not a kernel trace. The model's slices are summarised as a trace's: a slice runs from \
                 a process's switch-in to its switch-out on that CPU as the model schedules it (ended preempted, \
                 throttled, blocked or exited). {MODEL_WAKE} The model's counters are its own, so there is no \
                 comparison with them.",
                plural(d.traced_runs, "ok run", "ok runs"),
                if d.traced_runs == 1 { "was" } else { "were" },
            ))
        } else {
            Block::p(format!(
                "{} of the campaign {} traced by the kernel (sched_switch, sched_waking, sched_wakeup_new, \
             sched_migrate_task, sched_process_exit, sched_process_fork over the measured window; a task forked \
             by a worker is counted under it, so a program's figures are its whole tree's). A slice runs from a task's switch-in \
             to its switch-out on that CPU; slices cut by the window's edges count towards time and number but not \
             towards the lengths. Wake-up-to-run latency is from sched_waking to the task's next switch-in: the \
             kernel's share of the workload's own latency beside it.",
                plural(d.traced_runs, "ok run", "ok runs"),
                if d.traced_runs == 1 { "was" } else { "were" },
            ))
        }];
        if self.predicted_runs > 0 && !all_predicted {
            b.push(Block::p(format!(
                "{} of these {} the model's predicted timelines (schedlab simulate), not kernel traces: \
                 counted the same way, and not compared with the counters. {MODEL_WAKE}",
                self.predicted_runs,
                if self.predicted_runs == 1 { "is" } else { "are" },
            )));
        }
        b
    }

    /// The timeline's chart (and the model's beside it), with what
    /// Markdown says in their place.
    fn timeline_blocks(&self, b: &mut Vec<Block>) {
        if let Some((s, chart)) = &self.timeline {
            b.push(Block::html_only(vec![Block::Figure(Figure {
                svg: chart.render(),
                caption: timeline_caption(s),
            })]));
            if let Some((m, model_chart)) = &self.model {
                b.push(Block::html_only(vec![Block::Figure(Figure {
                    svg: model_chart.render(),
                    caption: twin_caption(s, m),
                })]));
                b.push(Block::md_only(vec![Block::p(format!(
                    "{} The HTML report draws both timelines.",
                    twin_caption(s, m)
                ))]));
            }
            if s.predicted {
                // Markdown has no charts: say what the HTML report draws.
                b.push(Block::md_only(vec![Block::p(format!(
                    "{} The HTML report draws it (`-o report.html`).",
                    timeline_caption(s)
                ))]));
            }
        }
    }

    /// The timeline run's CPUs: held, gaps and unattributed time.
    fn cpu_table(&self, b: &mut Vec<Block>) {
        if let Some((s, _)) = &self.timeline
            && !self.cpus.is_empty()
        {
            if let Some(c) = &s.caveat {
                b.push(Block::Notes(vec![c.clone()]));
            }
            b.push(Block::Table {
                row_class: Vec::new(),
                table: Table {
                    title: if s.predicted {
                        format!(
                            "Run {}'s CPUs over its whole predicted timeline ({}; the model's, not a kernel \
                             trace)",
                            s.run_id,
                            crate::units::format_ns(s.trace_ns)
                        )
                    } else {
                        format!(
                            "Run {}'s CPUs over its whole trace ({})",
                            s.run_id,
                            crate::units::format_ns(s.trace_ns)
                        )
                    },
                    headers: [
                        "CPU",
                        "held by the run's tasks %",
                        "gaps (idle or other programs)",
                        "gap p50 µs",
                        "gap max µs",
                        "unattributed µs",
                    ]
                    .map(String::from)
                    .to_vec(),
                    numeric: vec![true; 6],
                    rows: self
                        .cpus
                        .iter()
                        .map(|c| {
                            vec![
                                c.cpu.to_string(),
                                fmt::sig(c.busy_pct, 3),
                                c.gaps.to_string(),
                                us(c.gap_p50_us),
                                us(c.gap_max_us),
                                fmt::sig(c.unattributed_us, 3),
                            ]
                        })
                        .collect(),
                },
            });
        }
    }
}

/// The traced runs left out, each with its reason.
fn excluded_notes(d: &TraceAnalysis, b: &mut Vec<Block>) {
    if !d.excluded.is_empty() {
        let mut notes = vec![format!(
            "{} left out, each for the reason given. A larger buffer helps only where events were lost: \
             a sched_switch the kernel never emitted (0 lost; see README, \"Kernel traces\") is repaired \
             from the events around it when they allow, and the run is left out only when they contradict \
             it or the time it leaves unattributed is over 1 % of the run's on-CPU time.",
            plural(d.excluded.len(), "traced run is", "traced runs are"),
        )];
        notes.extend(
            d.excluded
                .iter()
                .take(MAX_LISTED)
                .map(|e| format!("Run {}: {}.", e.run_id, e.reason)),
        );
        if let Some(line) = more_line(d.excluded.len()) {
            notes.push(line);
        }
        b.push(Block::Notes(notes));
    }
}

/// One row per condition: slices, how they ended, migrations, latency.
fn condition_table(d: &TraceAnalysis, b: &mut Vec<Block>) {
    b.push(Block::Table {
        row_class: d
            .conditions
            .iter()
            .map(|c| (c.flagged > 0).then_some("flag"))
            .collect(),
        table: Table {
            title: String::new(),
            headers: HEADERS.map(String::from).to_vec(),
            numeric: vec![
                false, true, true, true, true, true, true, true, true, true, true, true, true,
                true, true,
            ],
            rows: condition_rows(&d.conditions),
        },
    });
}

/// A slice-length histogram per group of conditions.
fn histograms(a: &Analysis, d: &TraceAnalysis, b: &mut Vec<Block>) {
    let mut figures = Vec::new();
    let mut groups: Vec<usize> = d.conditions.iter().map(|c| c.group).collect();
    groups.dedup();
    for g in groups {
        let conds: Vec<&ConditionTrace> = d.conditions.iter().filter(|c| c.group == g).collect();
        if let Some(chart) = histogram(a, g, &conds) {
            figures.push(Figure {
                svg: chart.render(),
                caption: format!(
                    "{}: share of complete slices per length bin, pooled over each condition's traced runs.",
                    a.groups[g].label
                ),
            });
        }
    }
    if !figures.is_empty() {
        b.push(Block::Figures(figures));
    }
}

/// The trace against the kernel's counters, and the processes off by more
/// than the tolerance.
fn agreement_blocks(a: &Analysis, d: &TraceAnalysis, b: &mut Vec<Block>) {
    let flagged: Vec<&Agreement> = d.agreement.iter().filter(|g| g.flagged).collect();
    b.push(Block::p(format!(
    "The trace against the kernel's own counters, per traced process, over the same window: the \
     process's own work (from its start to its end, the window its schedstat and rusage figures cover; \
     the whole trace for runs stored without it). On-CPU time against schedstat's run time, and switches \
     out of the CPU (preempted and yielded count as involuntary, as in the kernel) against rusage's \
     nvcsw + nivcsw. A program's tree is counted from its tasks' exit records, each taken before the \
     task's last switch: the trace is compared with that count plus one switch per task, from one fewer to two more per \
     task allowed. {} of {} off by more than {} %{}",
    flagged.len(),
    plural(d.agreement.len(), "process", "processes"),
    fmt::sig(AGREEMENT_TOLERANCE * 100.0, 2),
    if flagged.is_empty() { "." } else { ":" }
)));
    if !flagged.is_empty() {
        b.push(Block::Table {
            row_class: Vec::new(),
            table: Table {
                title: String::new(),
                headers: [
                    "run",
                    "condition",
                    "process",
                    "trace on-CPU ms",
                    "schedstat ms",
                    "ratio",
                    "trace switches",
                    "rusage switches",
                    "ratio",
                    "missing events",
                ]
                .map(String::from)
                .to_vec(),
                numeric: vec![
                    true, false, false, true, true, true, true, true, true, false,
                ],
                rows: flagged
                    .iter()
                    .take(MAX_LISTED)
                    .map(|g| agreement_row(a, g))
                    .collect(),
            },
        });
        if let Some(line) = more_line(flagged.len()) {
            b.push(Block::p(line));
        }
    }
}

impl Section for TraceSection {
    fn id(&self) -> &'static str {
        "trace"
    }

    fn title(&self) -> &'static str {
        // Known once prepared (rendering comes after).
        if self.data.traced_runs > 0 && self.predicted_runs == self.data.traced_runs {
            "Predicted timeline (the model's, not a kernel trace)"
        } else {
            "Kernel trace"
        }
    }

    fn needs(&self, a: &Analysis) -> Needs {
        Needs {
            traces_of: a.campaign_ids(),
            timeline: Some(self.timeline_need.clone()),
            ..Needs::default()
        }
    }

    fn prepare(&mut self, a: &Analysis, details: RunDetails) -> Result<()> {
        self.data = analyse(a, &details.traces, &details.processes, &details.latency);
        self.predicted_runs = details.traces.iter().filter(|t| t.info.predicted).count();
        self.model = details
            .model_timeline
            .as_ref()
            .map(|t| (timeline::summary(t), timeline::chart(t)));
        self.timeline = details
            .timeline
            .as_ref()
            .map(|t| (timeline::summary(t), timeline::chart(t)));
        self.cpus = self
            .timeline
            .as_ref()
            .and_then(|(s, _)| details.traces.iter().find(|t| t.info.run_id == s.run_id))
            .map_or_else(Vec::new, |t| cpu_rows(&t.cpus));
        Ok(())
    }

    fn applies(&self, _a: &Analysis) -> bool {
        self.data.traced_runs > 0
    }

    fn blocks(&self, a: &Analysis) -> Vec<Block> {
        let d = &self.data;
        let all_predicted = self.predicted_runs == d.traced_runs;
        let mut b = self.intro(all_predicted);
        excluded_notes(d, &mut b);
        if d.conditions.is_empty() {
            return b;
        }
        condition_table(d, &mut b);
        histograms(a, d, &mut b);
        if !all_predicted {
            agreement_blocks(a, d, &mut b);
        }
        self.timeline_blocks(&mut b);
        self.cpu_table(&mut b);
        b
    }

    fn json(&self, _a: &Analysis) -> Option<Value> {
        if self.data.traced_runs == 0 {
            return None;
        }
        let mut v = serde_json::to_value(&self.data).ok()?;
        v["timeline"] = self.timeline.as_ref().map_or(Value::Null, |(s, _)| {
            json!({
                "run": s,
                "cpus": self.cpus,
                "model": self.model.as_ref().map(|(m, _)| m),
            })
        });
        Some(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;
    use crate::testing::synth;
    use crate::trace::derive::tests::*;

    /// A synthetic campaign with two runs traced (one lost events), and
    /// the report built from it with this section.
    fn report(
        timeline_run: Option<i64>,
        window: Option<crate::report::window::TimeWindow>,
    ) -> Result<(crate::report::Report, Vec<i64>)> {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("t.db")).unwrap();
        synth::create(&mut store, &synth::SynthConfig::small()).unwrap();
        let rows = store.export_rows(Some(1)).unwrap();
        let mut runs: Vec<i64> = rows
            .iter()
            .filter(|r| {
                r.status == "ok"
                    && r.processes == 2
                    && r.policy == "other"
                    && r.workload == "pi"
                    && r.priority_mode == "uniform"
            })
            .map(|r| r.run)
            .collect();
        runs.dedup();
        let traced = vec![runs[0], runs[1], runs[2]];
        for (k, &run) in traced.iter().enumerate() {
            let pids: Vec<i32> = rows
                .iter()
                .filter(|r| r.run == run)
                .filter_map(|r| r.pid.map(|p| p as i32))
                .collect();
            let (a, b) = (pids[0], pids[1]);
            let mut events = Vec::new();
            // Turns of 4 ms and 2 ms between the two processes on CPU 0.
            for i in 0..50u64 {
                let t = 1_000_000_000 + i * 6_000_000;
                events.push(sw(t, 0, b, PREEMPTED, a));
                events.push(sw(t + 4_000_000, 0, a, PREEMPTED, b));
            }
            let mut cap = capture(1_000_000_000, 1_300_000_000, &[a, b], events);
            cap.lost_events = if k == 2 { 5 } else { 0 };
            store
                .save_trace(run, &crate::trace::Analysed::new(&cap, &[]))
                .unwrap();
        }
        let opts = crate::report::Options {
            campaign: Some(1),
            ..crate::report::Options::default()
        };
        let r = crate::report::Report::with_sections(
            &store,
            &opts,
            vec![Box::new(TraceSection::new(timeline_run, window))],
        )?;
        Ok((r, traced))
    }

    #[test]
    fn the_section_shows_traced_conditions_and_leaves_out_lost_events() {
        let (r, traced) = report(None, None).unwrap();
        let j = r.json();
        let t = &j["trace"];
        assert_eq!(t["traced_runs"], 3);
        assert_eq!(t["excluded"][0]["run_id"], traced[2]);
        let conds = t["conditions"].as_array().unwrap();
        let runs: u64 = conds.iter().map(|c| c["runs"].as_u64().unwrap()).sum();
        assert_eq!(runs, 2, "the run with lost events is left out");
        let c = conds.iter().find(|c| c["runs"] == 2).unwrap();
        // Per run 99 complete slices of 4 ms and 2 ms, preempted; the last
        // is still running at the window's end.
        assert_eq!(c["preempted"], 2 * 99);
        assert_eq!(c["slices"], 2 * 100);
        let p50 = c["slice"]["p50_us"].as_f64().unwrap();
        assert!(
            (p50 - 2_000.0).abs() < 5.0 || (p50 - 4_000.0).abs() < 5.0,
            "{p50}"
        );
        let bins: u64 = c["bins"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["count"].as_u64().unwrap())
            .sum();
        assert_eq!(bins, c["slice"]["count"].as_u64().unwrap());
        assert!(
            c["bins"][0]["count"].as_u64().unwrap() > 0,
            "no empty bin first"
        );
        // The synthetic processes have no schedstat and no switches: every
        // traced process is off the counters, and says so.
        assert_eq!(c["flagged"], c["compared"]);
        assert_eq!(t["timeline"]["run"]["run_id"], traced[0]);
        assert_eq!(t["timeline"]["run"]["window"]["to_ns"], 250_000_000);
        // CPU 0 held by the two processes for all but the first zero-length
        // turn: the whole 300 ms window; CPU 1 never.
        let cpus = t["timeline"]["cpus"].as_array().unwrap();
        assert!((cpus[0]["busy_pct"].as_f64().unwrap() - 100.0).abs() < 1e-9);
        assert_eq!(cpus[1]["busy_pct"], 0.0);
        assert_eq!(cpus[1]["gaps"], 1);
        let html = r.html();
        assert!(html.contains("data-kind=\"trace-slices\""));
        assert!(html.contains("data-kind=\"trace-timeline\""));
        assert!(html.contains("left out"));
        let md = r.markdown();
        assert!(
            md.contains("## Kernel trace") && md.contains("slice p50 µs"),
            "{md}"
        );
    }

    /// A simulated run's predicted timeline is drawn as a trace's, saying
    /// everywhere that it is the model's, without the counters' check;
    /// its wake-ups are the model's wake-up-to-run latency (worker 0 runs
    /// at its release at 0, worker 1 10 ms after its own).
    #[test]
    fn a_predicted_timeline_says_it_is_the_model_s() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("t.db")).unwrap();
        synth::create(&mut store, &synth::SynthConfig::small()).unwrap();
        let run = store.export_rows(Some(1)).unwrap()[0].run;
        let mut cap = capture(0, 30_000_000, &[1, 2], Vec::new());
        cap.tasks[0].comm = "worker 0".into();
        cap.tasks[1].comm = "worker 1".into();
        let slice = |pid, start_ns, end_ns| crate::trace::derive::Slice {
            pid,
            cpu: 0,
            start_ns,
            end_ns,
            end: Some(crate::trace::SwitchEnd::Exited),
            start_clipped: false,
            start_repaired: false,
            end_repaired: false,
        };
        let released = |pid, switch_in_ns| crate::trace::derive::WakeUp {
            pid,
            waker_pid: 0,
            waking_ns: Some(0),
            wakeup_ns: Some(0),
            target_cpu: 0,
            new: true,
            switch_in_ns: Some(switch_in_ns),
            cpu: Some(0),
        };
        let derived = crate::trace::derive::Derived {
            slices: vec![slice(1, 0, 10_000_000), slice(2, 10_000_000, 20_000_000)],
            wakeups: vec![released(1, 0), released(2, 10_000_000)],
            ..Default::default()
        };
        store
            .save_trace(run, &crate::trace::Analysed::predicted(&cap, derived, &[]))
            .unwrap();
        let opts = crate::report::Options {
            campaign: Some(1),
            ..crate::report::Options::default()
        };
        let r = crate::report::Report::with_sections(
            &store,
            &opts,
            vec![Box::new(TraceSection::new(None, None))],
        )
        .unwrap();
        let j = r.json();
        assert_eq!(j["trace"]["timeline"]["run"]["predicted"], true);
        assert_eq!(j["trace"]["timeline"]["run"]["run_id"], run);
        assert_eq!(j["trace"]["agreement"].as_array().unwrap().len(), 0);
        // Waits of 0 and 10 ms (HdrHistogram: 10 ms within 0.1 %).
        let wake = &j["trace"]["conditions"][0]["trace_wake"];
        assert_eq!(wake["count"], 2, "{wake}");
        let max_us = wake["max_us"].as_f64().unwrap();
        assert!((max_us / 10_000.0 - 1.0).abs() < 1e-3, "{wake}");
        let md = r.markdown();
        assert!(md.contains(MODEL_WAKE), "{md}");
        assert!(!md.contains("no wake-up stamps"), "{md}");
        assert!(md.contains("## Predicted timeline (the model's"), "{md}");
        assert!(
            md.contains("the model's predicted timeline (schedlab simulate), not a kernel trace")
        );
        assert!(!md.contains("against the kernel's own counters"), "{md}");
        let html = r.html();
        assert!(html.contains("who holds each CPU in the model&#39;s prediction"));
        assert!(html.contains("worker 1 on CPU 0: 10–20 ms"), "{html}");
    }

    #[test]
    fn a_chosen_timeline_run_and_window_are_checked() {
        use crate::report::window::TimeWindow;
        let w = |from_ns, to_ns| Some(TimeWindow { from_ns, to_ns });
        let e = report(Some(0), None).err().unwrap();
        assert!(
            format!("{e:#}").contains("--timeline-run 0: run 0 is not a traced"),
            "{e:#}"
        );
        let (_, traced) = report(None, None).unwrap();
        let e = report(Some(traced[0]), w(400_000_000, 500_000_000))
            .err()
            .unwrap();
        assert!(format!("{e:#}").contains("only 300 ms long"), "{e:#}");
        let (r, _) = report(Some(traced[1]), w(100_000_000, 112_000_000)).unwrap();
        let j = r.json();
        let tl = &j["trace"]["timeline"]["run"];
        assert_eq!(tl["chosen"], true);
        assert_eq!(tl["run_id"], traced[1]);
        // 12 ms of 6 ms turns (4 + 2 ms): the slices overlapping it.
        let shown = tl["slices_shown"].as_u64().unwrap();
        assert!((4..=5).contains(&shown), "{shown}");
    }
}
