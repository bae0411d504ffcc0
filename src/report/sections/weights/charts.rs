//! The weights section's charts: work or completion time against weight
//! with the proportional ideal, and the share error of each mechanism.

use super::model::{Contender, WeightGroup};
use crate::report::analyse::{Analysis, policy_label};
use crate::report::fmt;
use crate::report::sections::{chart_id, policy_colour};
use crate::report::svg::{Bar, BarChart, Line, LineChart, LinePoint, Meta, PALETTE, Series};

/// A contender's colour: its policy's; a second WRR mechanism gets the next
/// palette colour.
fn colour(a: &Analysis, g: &WeightGroup, c: &Contender) -> String {
    let base = policy_colour(a, &c.policy);
    let same_policy_before = g
        .contenders
        .iter()
        .take_while(|x| !std::ptr::eq(*x, c))
        .filter(|x| x.policy == c.policy)
        .count();
    if same_policy_before == 0 {
        base
    } else {
        let i = PALETTE.iter().position(|p| *p == base).unwrap_or(0);
        PALETTE[(i + same_policy_before) % PALETTE.len()].to_string()
    }
}

fn meta(kind: &'static str, g: &WeightGroup, title: String, y: &str) -> Meta {
    Meta {
        kind,
        id: chart_id(&[kind, &g.workload, &g.group.to_string()]),
        data: vec![
            ("workload", g.workload.clone()),
            ("group", g.group.to_string()),
        ],
        title,
        y_label: y.to_string(),
        x_label: "weight".into(),
    }
}

/// A contender's measured line and, when it has two points or more, its
/// ideal as a dashed line of the same colour. Nothing without measurements.
fn measured_and_ideal(
    label: &str,
    colour: String,
    measured: Vec<LinePoint>,
    ideal: Vec<LinePoint>,
    ideal_name: &str,
) -> Vec<Line> {
    if measured.is_empty() {
        return Vec::new();
    }
    let mut lines = vec![Line {
        series: Series {
            name: label.to_string(),
            colour: colour.clone(),
        },
        points: measured,
        dashed: false,
    }];
    if ideal.len() >= 2 {
        lines.push(Line {
            series: Series {
                name: format!("{label} {ideal_name}"),
                colour,
            },
            points: ideal,
            dashed: true,
        });
    }
    lines
}

/// Work done per process against its weight, one line per contender with
/// its proportional ideal (dashed): total work × weight share.
pub fn work(a: &Analysis, g: &WeightGroup) -> Option<LineChart> {
    let unit = &g.work_unit;
    let mut lines = Vec::new();
    for c in &g.contenders {
        let col = colour(a, g, c);
        let points: Vec<LinePoint> = c
            .per_weight
            .iter()
            .filter_map(|p| {
                let e = p.work.as_ref()?;
                Some(LinePoint {
                    x: f64::from(p.weight),
                    y: e.mean,
                    lo: e.ci.map(|c| c.0),
                    hi: e.ci.map(|c| c.1),
                    tooltip: format!(
                        "{}, weight {} ({}): work per process {}{}",
                        c.label,
                        p.weight,
                        p.delivered,
                        e.tooltip(unit),
                        p.work_fold.as_ref().map_or_else(String::new, |f| format!(
                            "; {}× the lightest weight's",
                            fmt::sig(f.value, 4)
                        ))
                    ),
                })
            })
            .collect();
        let ideal: Vec<LinePoint> = c
            .per_weight
            .iter()
            .filter_map(|p| {
                Some(LinePoint {
                    x: f64::from(p.weight),
                    y: p.ideal_work?,
                    lo: None,
                    hi: None,
                    tooltip: format!(
                        "{} ideal for weight {}: its weight share of the mean total work = {}",
                        c.label,
                        p.weight,
                        fmt::with_unit(p.ideal_work?, unit)
                    ),
                })
            })
            .collect();
        lines.extend(measured_and_ideal(&c.label, col, points, ideal, "ideal"));
    }
    (!lines.is_empty()).then(|| LineChart {
        meta: meta(
            "weights-work",
            g,
            format!("{}: work done against weight", g.label),
            &if unit.is_empty() {
                "work per process".to_string()
            } else {
                format!("work per process ({unit})")
            },
        ),
        lines,
        x_log: false,
        y_log: false,
        x_ticks: g.weights.iter().map(|&w| f64::from(w)).collect(),
    })
}

/// Completion time against weight, one line per contender with the
/// completion under ideal proportional sharing (dashed).
pub fn completion(a: &Analysis, g: &WeightGroup) -> Option<LineChart> {
    // A log axis when the times span more than a factor 5 (DEADLINE, which
    // is not work-conserving, leaves the lightest weight its small
    // reservation to the end); lower whiskers are kept above 0 (the
    // tooltips give the exact intervals).
    let means: Vec<f64> = g
        .contenders
        .iter()
        .flat_map(|c| c.per_weight.iter())
        .flat_map(|p| [p.completion.as_ref().map(|e| e.mean), p.ideal_completion])
        .flatten()
        .filter(|v| v.is_finite() && *v > 0.0)
        .collect();
    let (lo, hi) = means
        .iter()
        .fold((f64::INFINITY, 0.0_f64), |(l, h), &v| (l.min(v), h.max(v)));
    let y_log = lo.is_finite() && hi / lo > 5.0;
    let floor = |mean: f64, l: f64| if y_log { l.max(mean / 4.0) } else { l.max(0.0) };
    let mut lines = Vec::new();
    for c in &g.contenders {
        let col = colour(a, g, c);
        let points: Vec<LinePoint> = c
            .per_weight
            .iter()
            .filter_map(|p| {
                let e = p.completion.as_ref()?;
                Some(LinePoint {
                    x: f64::from(p.weight),
                    y: e.mean,
                    lo: e.ci.map(|c| floor(e.mean, c.0)),
                    hi: e.ci.map(|c| c.1),
                    tooltip: format!(
                        "{}, weight {} ({}): completion time {}{}",
                        c.label,
                        p.weight,
                        p.delivered,
                        e.tooltip("s"),
                        p.time_fold.as_ref().map_or_else(String::new, |f| format!(
                            "; {}× the heaviest weight's",
                            fmt::sig(f.value, 4)
                        ))
                    ),
                })
            })
            .collect();
        let ideal: Vec<LinePoint> = c
            .per_weight
            .iter()
            .filter_map(|p| {
                let v = p.ideal_completion.filter(|v| v.is_finite())?;
                Some(LinePoint {
                    x: f64::from(p.weight),
                    y: v,
                    lo: None,
                    hi: None,
                    tooltip: format!(
                        "{} under ideal proportional sharing, weight {}: {} s",
                        c.label,
                        p.weight,
                        fmt::sig(v, 4)
                    ),
                })
            })
            .collect();
        lines.extend(measured_and_ideal(
            &c.label,
            col,
            points,
            ideal,
            "ideal (GPS)",
        ));
    }
    (!lines.is_empty()).then(|| LineChart {
        meta: meta(
            "weights-time",
            g,
            format!("{}: completion time against weight", g.label),
            if y_log {
                "completion time (s, log scale)"
            } else {
                "completion time (s)"
            },
        ),
        lines,
        x_log: false,
        y_log,
        x_ticks: g.weights.iter().map(|&w| f64::from(w)).collect(),
    })
}

/// CPU share over weight share − 1 per weight (%), for every contender over
/// the whole run and, for WRR, over whole rounds.
pub fn errors(a: &Analysis, g: &WeightGroup) -> Option<BarChart> {
    let mut series = Vec::new();
    let mut columns: Vec<Vec<f64>> = Vec::new();
    let mut tips: Vec<String> = Vec::new();
    for c in &g.contenders {
        let col = colour(a, g, c);
        if let Some(e) = &c.whole_run {
            series.push(Series {
                name: format!("{} whole run", c.label),
                colour: col.clone(),
            });
            columns.push(e.per_weight.clone());
            tips.push(format!("{} over the whole run ({} runs)", c.label, e.runs));
        }
        if let Some(e) = &c.whole_rounds {
            series.push(Series {
                name: format!("{} whole rounds", c.label),
                colour: if c.whole_run.is_some() {
                    format!("{col}99")
                } else {
                    col
                },
            });
            columns.push(e.per_weight.clone());
            tips.push(format!(
                "{} over whole rounds only ({} rounds in {} runs)",
                c.label,
                e.rounds.unwrap_or(0),
                e.runs
            ));
        }
    }
    if series.is_empty() {
        return None;
    }
    let bars = g
        .weights
        .iter()
        .enumerate()
        .map(|(k, w)| {
            columns
                .iter()
                .zip(&tips)
                .map(|(col, tip)| {
                    let v = *col.get(k)?;
                    v.is_finite().then(|| Bar {
                        value: 100.0 * v,
                        lo: None,
                        hi: None,
                        tooltip: format!(
                            "{tip}, weight {w}: CPU share / weight share − 1 = {:+.2}%",
                            100.0 * v
                        ),
                    })
                })
                .collect()
        })
        .collect();
    Some(BarChart {
        meta: meta(
            "weights-error",
            g,
            format!("{}: CPU share error per weight", g.label),
            "CPU share / weight share − 1 (%)",
        ),
        groups: g.weights.iter().map(|w| vec![format!("w {w}")]).collect(),
        series,
        bars,
        y_max: None,
    })
}

/// The label of a contender: "WRR (fifo)", "OTHER".
pub fn contender_label(policy: &str, mechanism: Option<&str>) -> String {
    match mechanism {
        Some(m) => format!("{} ({m})", policy_label(policy)),
        None => policy_label(policy),
    }
}
