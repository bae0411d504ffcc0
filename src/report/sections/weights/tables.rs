//! The weights section's tables (HTML and Markdown at once) and its
//! sentences.

use super::WeightsReport;
use super::model::{self, WeightGroup};
use crate::report::fmt;
use crate::report::sections::{Table, plural};

fn pct(v: f64) -> String {
    if v.is_finite() {
        format!("{:+.1}%", 100.0 * v)
    } else {
        "–".into()
    }
}

fn fold_text(f: &Option<model::Fold>) -> String {
    f.as_ref().map_or_else(
        || "–".into(),
        |f| match f.ci {
            Some((lo, hi)) => format!(
                "{} ({}–{})",
                fmt::dec2(f.value),
                fmt::dec2(lo),
                fmt::dec2(hi)
            ),
            None => fmt::dec2(f.value),
        },
    )
}

fn weight_headers(first: &str, g: &WeightGroup) -> (Vec<String>, Vec<bool>) {
    // Weights as column headers; the first column names the rows.
    let mut h = vec![first.to_string()];
    h.extend(g.weights.iter().map(|w| format!("w {w}")));
    let mut n = vec![false];
    n.extend(g.weights.iter().map(|_| true));
    (h, n)
}

/// How each contender delivered each weight.
pub fn delivered_table(g: &WeightGroup) -> Table {
    let (headers, numeric) = weight_headers("policy", g);
    let rows = g
        .contenders
        .iter()
        .map(|c| {
            let mut r = vec![c.label.clone()];
            r.extend(c.per_weight.iter().map(|p| p.delivered.clone()));
            r
        })
        .collect();
    Table {
        title: "How each policy delivered the weights".into(),
        headers,
        numeric: numeric.iter().map(|_| false).collect(),
        rows,
    }
}

/// Work per process of each weight (mean and 95 % CI).
pub fn work_table(g: &WeightGroup) -> Table {
    let (headers, numeric) = weight_headers("policy", g);
    let mut rows: Vec<Vec<String>> = g
        .contenders
        .iter()
        .map(|c| {
            let mut r = vec![format!("{} (n = {})", c.label, c.runs)];
            r.extend(c.per_weight.iter().map(|p| {
                p.work
                    .as_ref()
                    .map_or_else(|| "–".into(), |e| e.text(fmt::num))
            }));
            r
        })
        .collect();
    for c in &g.contenders {
        let mut r = vec![format!("{} ideal", c.label)];
        r.extend(
            c.per_weight
                .iter()
                .map(|p| p.ideal_work.map_or_else(|| "–".into(), fmt::num)),
        );
        rows.push(r);
    }
    Table {
        title: format!(
            "Work per process ({}): mean (95% CI); ideal: the mean total work shared in proportion to the weights",
            if g.work_unit.is_empty() {
                "units"
            } else {
                &g.work_unit
            }
        ),
        headers,
        numeric,
        rows,
    }
}

/// Seed 002's "Average Fold Iterations": mean work of weight w over mean
/// work of the lightest weight.
pub fn fold_table(g: &WeightGroup) -> Table {
    let (headers, numeric) = weight_headers("policy", g);
    let mut rows: Vec<Vec<String>> = g
        .contenders
        .iter()
        .map(|c| {
            let mut r = vec![c.label.clone()];
            r.extend(c.per_weight.iter().map(|p| fold_text(&p.work_fold)));
            r
        })
        .collect();
    let mut ideal = vec!["ideal (w / lightest w)".to_string()];
    ideal.extend(
        g.weights
            .iter()
            .map(|&w| fmt::dec2(f64::from(w) / f64::from(g.weights[0]))),
    );
    rows.push(ideal);
    Table {
        title: format!(
            "Fold over weight {}: mean work of weight w / mean work of weight {} (95% bootstrap CI)",
            g.weights[0], g.weights[0]
        ),
        headers,
        numeric,
        rows,
    }
}

/// Seed 002's "2 Million Command Time": completion time per weight, and
/// the fold over the heaviest weight.
pub fn completion_tables(g: &WeightGroup) -> (Table, Table) {
    let (headers, numeric) = weight_headers("policy", g);
    let mut rows: Vec<Vec<String>> = Vec::new();
    for c in &g.contenders {
        let mut r = vec![format!("{} (n = {})", c.label, c.runs)];
        r.extend(c.per_weight.iter().map(|p| {
            p.completion
                .as_ref()
                .map_or_else(|| "–".into(), |e| e.text(|v| fmt::sig(v, 4)))
        }));
        rows.push(r);
    }
    for c in &g.contenders {
        let mut r = vec![format!("{} ideal (GPS)", c.label)];
        r.extend(c.per_weight.iter().map(|p| {
            p.ideal_completion
                .filter(|v| v.is_finite())
                .map_or_else(|| "–".into(), |v| fmt::sig(v, 4))
        }));
        rows.push(r);
    }
    let times = Table {
        title: format!(
            "Completion time (s) from barrier release: mean (95% CI); ideal: generalised processor sharing of {}",
            plural(g.cpus, "CPU", "CPUs")
        ),
        headers,
        numeric: numeric.clone(),
        rows,
    };
    let heaviest = g.weights.last().copied().unwrap_or(1);
    let (headers, _) = weight_headers("policy", g);
    let mut rows: Vec<Vec<String>> = g
        .contenders
        .iter()
        .map(|c| {
            let mut r = vec![c.label.clone()];
            r.extend(c.per_weight.iter().map(|p| fold_text(&p.time_fold)));
            r
        })
        .collect();
    for c in &g.contenders {
        let last = c.per_weight.last().and_then(|p| p.ideal_completion);
        let mut r = vec![format!("{} ideal (GPS)", c.label)];
        r.extend(
            c.per_weight
                .iter()
                .map(|p| match (p.ideal_completion, last) {
                    (Some(v), Some(l)) if l > 0.0 && v.is_finite() => fmt::dec2(v / l),
                    _ => "–".into(),
                }),
        );
        rows.push(r);
    }
    (
        times,
        Table {
            title: format!(
                "Time over the longest slice's: mean completion time of weight w / that of weight {heaviest} (95% \
                 bootstrap CI)"
            ),
            headers,
            numeric,
            rows,
        },
    )
}

/// Each contender's CPU share error per weight, whole run and whole rounds.
pub fn error_table(g: &WeightGroup) -> Table {
    let (mut headers, mut numeric) = weight_headers("policy", g);
    headers.insert(1, "over".into());
    numeric.insert(1, false);
    headers.push("max |error|".into());
    numeric.push(true);
    let mut rows = Vec::new();
    for c in &g.contenders {
        for (what, e) in [
            ("whole run", &c.whole_run),
            ("whole rounds", &c.whole_rounds),
        ] {
            let Some(e) = e else { continue };
            let mut r = vec![
                c.label.clone(),
                match e.rounds {
                    Some(k) => format!("{what} ({k} in {})", plural(e.runs, "run", "runs")),
                    None => format!("{what} ({})", plural(e.runs, "run", "runs")),
                },
            ];
            r.extend(e.per_weight.iter().map(|&v| pct(v)));
            r.push(format!("{:.1}%", 100.0 * e.max_abs));
            rows.push(r);
        }
    }
    Table {
        title: "CPU share error: each process's share of its run queue's CPU time / its weight share − 1, mean over \
                runs"
            .into(),
        headers,
        numeric,
        rows,
    }
}

/// The WRR dispatcher in every group: precision over whole rounds, cost,
/// lateness at slice boundaries.
pub fn dispatcher_table(d: &WeightsReport) -> Table {
    let headers = [
        "group",
        "mechanism",
        "runs",
        "slices",
        "whole rounds",
        "max |share error| over whole rounds",
        "dispatcher CPU (mean, max)",
        "lateness p50 (mean)",
        "lateness p99 (mean, max)",
        "errors",
    ];
    let us =
        |v: Option<f64>| v.map_or_else(|| "–".into(), |ns| format!("{} µs", fmt::sig(ns / 1e3, 3)));
    let mut rows = Vec::new();
    for g in &d.groups {
        for c in &g.contenders {
            let Some(s) = &c.dispatcher else { continue };
            rows.push(vec![
                g.label.clone(),
                c.mechanism.clone().unwrap_or_default(),
                s.runs.to_string(),
                s.slices.to_string(),
                c.whole_rounds
                    .as_ref()
                    .and_then(|e| e.rounds)
                    .map_or_else(|| "0".into(), |r| r.to_string()),
                c.whole_rounds
                    .as_ref()
                    .map_or_else(|| "–".into(), |e| format!("{:.2}%", 100.0 * e.max_abs)),
                match (s.overhead_mean, s.overhead_max) {
                    (Some(m), Some(x)) => format!("{:.3}%, {:.3}%", 100.0 * m, 100.0 * x),
                    _ => "–".into(),
                },
                us(s.lateness_p50_ns_mean),
                format!(
                    "{}, {}",
                    us(s.lateness_p99_ns_mean),
                    us(s.lateness_p99_ns_max)
                ),
                s.errors.to_string(),
            ]);
        }
    }
    Table {
        title: String::new(),
        headers: headers.iter().map(|h| h.to_string()).collect(),
        numeric: vec![false, false, true, true, true, true, true, true, true, true],
        rows,
    }
}

/// One sentence per weighted group: how close each contender came.
pub fn group_summary(g: &WeightGroup) -> String {
    let mut parts = Vec::new();
    for c in &g.contenders {
        let heavy = c.per_weight.last();
        if g.duration_based {
            if let Some(f) = heavy.and_then(|p| p.work_fold.as_ref()) {
                parts.push(format!(
                    "{} gave weight {} {}× the work of weight {} (ideal {})",
                    c.label,
                    g.weights.last().copied().unwrap_or(1),
                    fmt::dec2(f.value),
                    g.weights[0],
                    fmt::dec2(
                        f64::from(g.weights.last().copied().unwrap_or(1)) / f64::from(g.weights[0])
                    )
                ));
            }
        } else if let Some(f) = c.per_weight.first().and_then(|p| p.time_fold.as_ref()) {
            parts.push(format!(
                "under {} weight {} took {}× as long as weight {}",
                c.label,
                g.weights[0],
                fmt::dec2(f.value),
                g.weights.last().copied().unwrap_or(1)
            ));
        }
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!("{}.", capitalise(&parts.join("; ")))
    }
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}
