//! The report's charts, built from an [`Analysis`] with the [`svg`] toolkit.
//! Each chart has a stable id and `data-kind`/`data-metric`/`data-workload`
//! attributes.

use super::analyse::{Analysis, Condition, Group, ShareCheck, policy_label};
use super::fmt;
use super::metric::Metric;
use super::svg::{
    Bar, BarChart, Line, LineChart, LinePoint, Meta, PALETTE, Point, ScatterChart, ScatterPoint,
    Series, SpreadChart,
};

/// A fixed colour per scheduling policy, so a policy keeps its colour in
/// every chart; unknown names get palette colours by position.
pub fn policy_colour(name: &str, position: usize) -> &'static str {
    match name {
        "other" => PALETTE[0],
        "batch" => PALETTE[1],
        "idle" => PALETTE[2],
        "fifo" => PALETTE[3],
        "rr" => PALETTE[4],
        "deadline" => PALETTE[5],
        _ => PALETTE[(position + 6) % PALETTE.len()],
    }
}

/// Cells with more runs than this are drawn as box plots.
pub const STRIP_MAX: usize = 40;

/// The groups (conditions differing only in policy) of a workload.
fn groups_of<'a>(a: &'a Analysis, workload: &str) -> Vec<(usize, &'a Group)> {
    a.groups
        .iter()
        .enumerate()
        .filter(|(_, g)| g.key.workload == workload)
        .collect()
}

/// The policies present in a workload, in campaign order, as legend series.
fn policies_of(a: &Analysis, workload: &str) -> Vec<(String, Series)> {
    a.factors
        .policies
        .iter()
        .enumerate()
        .filter(|(_, p)| {
            a.conditions
                .iter()
                .any(|c| &c.policy == *p && a.groups[c.group].key.workload == workload)
        })
        .map(|(i, p)| {
            (
                p.clone(),
                Series {
                    name: policy_label(p),
                    colour: policy_colour(p, i).to_string(),
                },
            )
        })
        .collect()
}

/// Axis label lines of a group: the process count, then the factors that
/// vary in the campaign.
fn group_lines(a: &Analysis, g: &Group) -> Vec<String> {
    let mut v = vec![g.key.processes.to_string()];
    if a.factors.priority_modes.len() > 1 {
        v.push(g.key.priority_mode.clone());
    }
    if a.factors.cpus.len() > 1 {
        v.push(format!("cpus {}", g.key.cpus));
    }
    if let Some(rt) = g.key.rt_runtime_us {
        v.push(format!("rt {rt} µs"));
    }
    v
}

fn x_label(a: &Analysis) -> String {
    let mut parts = vec!["processes"];
    if a.factors.priority_modes.len() > 1 {
        parts.push("priorities");
    }
    if a.factors.cpus.len() > 1 {
        parts.push("CPUs");
    }
    if !a.factors.rt_runtime_us.is_empty() {
        parts.push("RT runtime");
    }
    parts.join(" / ")
}

fn meta(
    kind: &'static str,
    metric: &str,
    workload: &str,
    title: String,
    y: String,
    x: String,
) -> Meta {
    Meta {
        kind,
        id: format!("{kind}-{metric}-{workload}")
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect(),
        data: vec![
            ("metric", metric.to_string()),
            ("workload", workload.to_string()),
        ],
        title,
        y_label: y,
        x_label: x,
    }
}

/// The grid of a grouped chart of a workload: the label lines of each
/// group, the policies as series, and `cell` of each group's condition of
/// each policy (its index and itself; the default where the group has no
/// condition of the policy).
type Grid<T> = (Vec<Vec<String>>, Vec<Series>, Vec<Vec<T>>);

fn grid<T: Default>(
    a: &Analysis,
    workload: &str,
    mut cell: impl FnMut(usize, &Condition) -> T,
) -> Grid<T> {
    let policies = policies_of(a, workload);
    let groups = groups_of(a, workload);
    let cells = groups
        .iter()
        .map(|(_, g)| {
            policies
                .iter()
                .map(|(p, _)| {
                    g.conditions
                        .iter()
                        .find(|&&ci| &a.conditions[ci].policy == p)
                        .map_or_else(T::default, |&ci| cell(ci, &a.conditions[ci]))
                })
                .collect()
        })
        .collect();
    (
        groups.iter().map(|(_, g)| group_lines(a, g)).collect(),
        policies.into_iter().map(|(_, s)| s).collect(),
        cells,
    )
}

/// Mean of each policy × group with its 95 % CI.
pub fn bars(a: &Analysis, workload: &str, metric: Metric) -> Option<BarChart> {
    let slot = a.metric_index(metric)?;
    let unit = a.unit(metric, workload);
    let (groups, series, bars) = grid(a, workload, |_, c| {
        let cell = &c.cells[slot];
        let s = cell.summary.as_ref()?;
        let ci = cell.ci.as_ref();
        let tooltip = format!(
            "{}: mean {}{}, n = {}; median {}, sd {}, min {}, max {}",
            c.label,
            fmt::with_unit(s.mean, &unit),
            ci.map_or_else(String::new, |i| format!(
                " (95% CI {}–{}, {})",
                fmt::num(i.lo),
                fmt::num(i.hi),
                i.method.name()
            )),
            s.n,
            fmt::num(s.median),
            fmt::num(s.sd),
            fmt::num(s.min),
            fmt::num(s.max),
        );
        Some(Bar {
            value: s.mean,
            lo: ci.map(|i| i.lo),
            hi: ci.map(|i| i.hi),
            tooltip,
        })
    });
    Some(BarChart {
        meta: meta(
            "bars",
            metric.name(),
            workload,
            format!("{workload}: {} — mean and 95% CI", metric.label()),
            a.axis_label(metric, workload),
            x_label(a),
        ),
        groups,
        series,
        bars,
        y_max: None,
    })
}

/// Every run's value (strip plot, or box plot for many runs).
pub fn spread(a: &Analysis, workload: &str, metric: Metric) -> Option<SpreadChart> {
    let slot = a.metric_index(metric)?;
    let unit = a.unit(metric, workload);
    let (groups, series, cells) = grid(a, workload, |_, c| {
        let cell = &c.cells[slot];
        let median = cell.summary.as_ref().map_or(f64::NAN, |s| s.median);
        (0..cell.values.len())
            .map(|k| {
                let id = cell.run_ids[k];
                let rep = a.run_info.get(&id).map_or(0, |x| x.1);
                let v = cell.values[k];
                let mut tooltip = format!(
                    "{}: run {id} (rep {rep}): {}",
                    c.label,
                    fmt::with_unit(v, &unit)
                );
                if cell.flagged[k] {
                    tooltip.push_str(&format!(
                        " — outlier ({}× the median {})",
                        if median != 0.0 {
                            fmt::sig(v / median, 3)
                        } else {
                            "–".into()
                        },
                        fmt::num(median)
                    ));
                }
                Point {
                    value: v,
                    tooltip,
                    flagged: cell.flagged[k],
                }
            })
            .collect()
    });
    Some(SpreadChart {
        meta: meta(
            "spread",
            metric.name(),
            workload,
            format!("{workload}: {} — every run", metric.label()),
            a.axis_label(metric, workload),
            x_label(a),
        ),
        groups,
        series,
        cells,
        strip_max: STRIP_MAX,
    })
}

/// Mean against number of processes, log–log, one line per policy (and
/// priority mode / CPUs when they vary), labelled with the fitted slope.
pub fn scaling(a: &Analysis, workload: &str, metric: Metric) -> Option<LineChart> {
    let fits: Vec<_> = a
        .scaling
        .iter()
        .filter(|s| s.workload == workload && s.metric == metric && s.points.len() >= 2)
        .collect();
    if fits.is_empty() {
        return None;
    }
    let unit = a.unit(metric, workload);
    let dashes: Vec<&String> = a.factors.priority_modes.iter().collect();
    let lines = fits
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let pi = a
                .factors
                .policies
                .iter()
                .position(|p| p == &s.policy)
                .unwrap_or(i);
            let mut name = policy_label(&s.policy);
            if a.factors.priority_modes.len() > 1 {
                name.push_str(&format!(" {}", s.priority_mode));
            }
            if a.factors.cpus.len() > 1 {
                name.push_str(&format!(" cpus {}", s.cpus));
            }
            if let Some(rt) = s.rt_runtime_us {
                name.push_str(&format!(" rt {rt}"));
            }
            if let Some(f) = &s.fit {
                name.push_str(&format!(
                    " (slope {}, r² {})",
                    fmt::dec2(f.slope),
                    fmt::dec2(f.r2)
                ));
            }
            Line {
                series: Series {
                    name,
                    colour: policy_colour(&s.policy, pi).to_string(),
                },
                points: s
                    .points
                    .iter()
                    .map(|p| LinePoint {
                        x: p.processes as f64,
                        y: p.mean,
                        lo: p.ci.map(|c| c.0),
                        hi: p.ci.map(|c| c.1),
                        tooltip: format!(
                            "{}, {} processes: mean {}{}, n = {}",
                            s.label,
                            p.processes,
                            fmt::with_unit(p.mean, &unit),
                            p.ci.map_or_else(String::new, |c| format!(
                                " (95% CI {}–{})",
                                fmt::num(c.0),
                                fmt::num(c.1)
                            )),
                            p.n
                        ),
                    })
                    .collect(),
                dashed: dashes
                    .iter()
                    .position(|m| **m == s.priority_mode)
                    .unwrap_or(0)
                    % 2
                    == 1,
            }
        })
        .collect();
    Some(LineChart {
        meta: meta(
            "scaling",
            metric.name(),
            workload,
            format!("{workload}: {} against processes (log–log)", metric.label()),
            a.axis_label(metric, workload),
            "processes".into(),
        ),
        lines,
        x_log: true,
        y_log: true,
        x_ticks: a.factors.processes.iter().map(|&p| p as f64).collect(),
    })
}

/// Jain's index of per-process CPU time, mean and 95 % CI per condition.
pub fn jain(a: &Analysis, workload: &str) -> Option<BarChart> {
    let mut any = false;
    let (groups, series, bars) = grid(a, workload, |ci, _| {
        let f = a.fairness.iter().find(|f| f.condition == ci)?;
        let s = f.jain_cpu.as_ref()?;
        any = true;
        let (lo, hi) = if s.n >= 2 {
            (Some(s.ci95_lo.max(0.0)), Some(s.ci95_hi.min(1.0)))
        } else {
            (None, None)
        };
        Some(Bar {
            value: s.mean,
            lo,
            hi,
            tooltip: format!(
                "{}: Jain's index of CPU time {} (min {}, max {}), n = {} runs",
                f.label,
                fmt::sig(s.mean, 4),
                fmt::sig(s.min, 4),
                fmt::sig(s.max, 4),
                s.n
            ),
        })
    });
    any.then(|| BarChart {
        meta: meta(
            "fairness",
            "jain_cpu",
            workload,
            format!("{workload}: Jain's fairness index of CPU time per run"),
            "Jain's index (1 = equal)".into(),
            x_label(a),
        ),
        groups,
        series,
        bars,
        y_max: Some(1.0),
    })
}

/// Observed against predicted CPU share of each process.
pub fn shares(a: &Analysis, s: &ShareCheck) -> ScatterChart {
    let c = &a.conditions[s.condition];
    let g = &a.groups[c.group];
    let pi = a
        .factors
        .policies
        .iter()
        .position(|p| p == &c.policy)
        .unwrap_or(0);
    let colour = policy_colour(&c.policy, pi).to_string();
    ScatterChart {
        meta: meta(
            "shares",
            "share",
            &g.key.workload,
            format!("{}: CPU share vs nice-weight prediction", s.label),
            "observed share".into(),
            "predicted share (kernel weight table)".into(),
        )
        .with_id_suffix(s.condition),
        legend: Vec::new(),
        points: s
            .rows
            .iter()
            .map(|r| ScatterPoint {
                x: r.predicted,
                y: r.observed,
                colour: colour.clone(),
                tooltip: format!(
                    "process {} (nice {}): predicted {}%, observed {}% ({:+.0}%)",
                    r.index,
                    r.nice,
                    fmt::sig(100.0 * r.predicted, 3),
                    fmt::sig(100.0 * r.observed, 3),
                    100.0 * r.error
                ),
            })
            .collect(),
        log: true,
        diagonal: true,
    }
}

trait WithId {
    fn with_id_suffix(self, n: usize) -> Self;
}

impl WithId for Meta {
    fn with_id_suffix(mut self, n: usize) -> Meta {
        self.id = format!("{}-{n}", self.id);
        self.data.push(("condition", n.to_string()));
        self
    }
}
