//! Latency: for campaigns whose workloads measure it (periodic, pingpong,
//! request), each condition's percentiles from the pooled histograms with
//! bootstrap intervals over runs, a percentile plot per group on a log
//! latency axis, deadline misses, the kernel's run-queue wait beside the
//! workload's own latency, and p99 compared between policies.

use anyhow::Result;
use serde_json::Value;

use super::details::{Needs, RunDetails};
use super::{Section, Table};
use crate::report::analyse::Analysis;
use crate::report::analyse::latency::{self, ConditionLatency, LatencyAnalysis, Pct};
use crate::report::blocks::{Block, Figure};
use crate::report::charts::policy_colour;
use crate::report::fmt;
use crate::report::svg::{Line, LineChart, LinePoint, Meta, Series};

/// The latency section (empty unless the campaign stored histograms).
#[derive(Default)]
pub struct LatencySection {
    data: LatencyAnalysis,
}

fn what(name: &str) -> &str {
    match name {
        "wakeup" => "wake-up latency (actual wake − intended release)",
        "round_trip" => "round trip",
        "request" => "request latency (sent → done)",
        other => other,
    }
}

fn pct(p: &Pct) -> String {
    match p.ci_us {
        Some((lo, hi)) => format!(
            "{} [{}, {}]",
            fmt::sig(p.us, 3),
            fmt::sig(lo, 3),
            fmt::sig(hi, 3)
        ),
        None => fmt::sig(p.us, 3),
    }
}

fn rows(c: &[ConditionLatency]) -> Vec<Vec<String>> {
    c.iter()
        .map(|c| {
            vec![
                c.label.clone(),
                c.name.clone(),
                c.runs.to_string(),
                c.events.to_string(),
                pct(&c.p50),
                pct(&c.p90),
                pct(&c.p99),
                pct(&c.p999),
                fmt::sig(c.max_us, 3),
                match (c.misses, c.activations) {
                    (Some(m), Some(n)) => format!("{m} of {n}"),
                    _ => "–".into(),
                },
                c.rq_wait_per_slice_us
                    .map_or_else(|| "–".into(), |w| fmt::sig(w, 3)),
            ]
        })
        .collect()
}

const HEADERS: [&str; 11] = [
    "condition",
    "latency",
    "runs",
    "events",
    "p50 µs [95% CI]",
    "p90 µs",
    "p99 µs",
    "p99.9 µs",
    "max µs",
    "deadline misses",
    "kernel rq wait per slice µs",
];

/// Percentiles (x: 50, 90, 99, 99.9 as a log "nines" position) of each
/// condition of a group, log latency axis.
fn chart(a: &Analysis, group: usize, conds: &[&ConditionLatency]) -> LineChart {
    let nines = |q: f64| -(1.0 - q).log10();
    let lines = conds
        .iter()
        .enumerate()
        .map(|(k, c)| {
            let points = [
                (0.5, &c.p50),
                (0.9, &c.p90),
                (0.99, &c.p99),
                (0.999, &c.p999),
            ]
            .into_iter()
            .map(|(q, p)| LinePoint {
                x: nines(q),
                y: p.us,
                lo: p.ci_us.map(|c| c.0),
                hi: p.ci_us.map(|c| c.1),
                tooltip: format!("{}: p{} = {} µs", c.label, q * 100.0, fmt::sig(p.us, 3)),
            })
            .collect();
            Line {
                series: Series {
                    name: c.policy.to_uppercase(),
                    colour: policy_colour(&c.policy, k).to_string(),
                },
                points,
                dashed: false,
            }
        })
        .collect();
    LineChart {
        meta: Meta {
            kind: "latency",
            id: format!("latency-{group}"),
            data: vec![("group", a.groups[group].label.clone())],
            title: format!("{}: latency percentiles", a.groups[group].label),
            y_label: "latency (µs, log)".into(),
            x_label: "percentile: 50, 90, 99, 99.9".into(),
        },
        lines,
        x_log: false,
        y_log: true,
        x_ticks: [0.5, 0.9, 0.99, 0.999].map(nines).to_vec(),
    }
}

impl Section for LatencySection {
    fn id(&self) -> &'static str {
        "latency"
    }

    fn title(&self) -> &'static str {
        "Latency"
    }

    fn needs(&self, a: &Analysis) -> Needs {
        Needs {
            latency_of: a.campaign_ids(),
            ..Needs::default()
        }
    }

    fn prepare(&mut self, a: &Analysis, details: RunDetails) -> Result<()> {
        self.data = latency::analyse(a, &details.latency, a.settings.bootstrap_seed);
        Ok(())
    }

    fn applies(&self, _a: &Analysis) -> bool {
        !self.data.conditions.is_empty()
    }

    fn blocks(&self, a: &Analysis) -> Vec<Block> {
        let d = &self.data;
        let names: Vec<&str> = {
            // Each histogram named once, in the order conditions show them.
            let mut v: Vec<&str> = Vec::new();
            for c in &d.conditions {
                if !v.contains(&c.name.as_str()) {
                    v.push(c.name.as_str());
                }
            }
            v
        };
        let mut b = vec![Block::p(format!(
            "Each worker records every event's {} in a histogram of fixed buckets (HdrHistogram, 3 significant \
             digits); a condition's percentiles are those of the histograms of all its runs' workers pooled, never \
             averages of percentiles, with 95 % bootstrap intervals over runs. Beside them, the kernel's view of the \
             same processes: run-queue wait per time put on a CPU (schedstat); a latency far above it came from \
             somewhere other than waiting for a CPU.",
            names.iter().map(|n| what(n)).collect::<Vec<_>>().join("; ")
        ))];
        b.push(Block::Table {
            row_class: vec![None; d.conditions.len()],
            table: Table {
                title: String::new(),
                headers: HEADERS.map(String::from).to_vec(),
                numeric: vec![
                    false, false, true, true, true, true, true, true, true, true, true,
                ],
                rows: rows(&d.conditions),
            },
        });
        let mut figures = Vec::new();
        let mut groups: Vec<usize> = d.conditions.iter().map(|c| c.group).collect();
        groups.dedup();
        for g in groups {
            let conds: Vec<&ConditionLatency> =
                d.conditions.iter().filter(|c| c.group == g).collect();
            figures.push(Figure {
                svg: chart(a, g, &conds).render(),
                caption: format!(
                    "{}: latency percentiles per policy (log axis; whiskers: 95 % bootstrap interval over runs).",
                    a.groups[g].label
                ),
            });
        }
        b.push(Block::Figures(figures));
        if !d.comparisons.is_empty() {
            let rows: Vec<Vec<String>> = d
                .comparisons
                .iter()
                .map(|c| {
                    let x = &d.conditions[c.a];
                    let y = &d.conditions[c.b];
                    vec![
                        a.groups[c.group].label.clone(),
                        format!("{} vs {}", y.policy.to_uppercase(), x.policy.to_uppercase()),
                        format!("{}×", fmt::sig(c.ratio, 3)),
                        fmt::sig(c.p, 3),
                        fmt::sig(c.p_adjusted, 3),
                        match (&c.separated, &c.detectable) {
                            (true, _) => "separated".into(),
                            (false, Some(d)) => format!("not separated ({})", d.cell()),
                            (false, None) => "not separated".into(),
                        },
                    ]
                })
                .collect();
            b.push(Block::p(format!(
                "p99 compared between the policies of each group: per-run p99 (each run's pooled histogram), \
                 Mann–Whitney U, Holm-corrected over the {} comparisons of this section; separated where the \
                 adjusted p is below {}. Not separated gives the smallest change of the second policy's mean \
                 per-run p99 these runs could have seen (80% power at α over the comparisons; Mann–Whitney's \
                 power as the t-test's with 3/π of the runs).",
                d.comparisons.len(),
                a.settings.alpha
            )));
            b.push(Block::Table {
                row_class: d
                    .comparisons
                    .iter()
                    .map(|c| c.separated.then_some("flag"))
                    .collect(),
                table: Table {
                    title: String::new(),
                    headers: [
                        "group",
                        "policies",
                        "p99 ratio (median of runs)",
                        "p",
                        "p (Holm)",
                        "verdict",
                    ]
                    .map(String::from)
                    .to_vec(),
                    numeric: vec![false, false, true, true, true, false],
                    rows,
                },
            });
        }
        b
    }

    fn json(&self, _a: &Analysis) -> Option<Value> {
        (!self.data.conditions.is_empty()).then(|| serde_json::to_value(&self.data).ok())?
    }
}
