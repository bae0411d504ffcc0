//! The comparison's charts, drawn with the report's SVG toolkit: per
//! metric, every condition's ratio candidate / baseline with its interval
//! and the geometric mean below them; over all metrics, a forest plot of
//! the geometric means.

use super::analyse::{Comparison, MetricSummary, Row, Verdict};
use crate::report::fmt;
use crate::report::metric::Metric;
use crate::report::svg::{ForestChart, ForestRow, Meta, PALETTE, Series};

/// The colour of a verdict: bluish green, vermilion, grey.
pub fn verdict_colour(v: Verdict) -> &'static str {
    match v {
        Verdict::Better => PALETTE[2],
        Verdict::Worse => PALETTE[3],
        Verdict::NotSeparated => "#888888",
    }
}

fn legend() -> Vec<Series> {
    [Verdict::Better, Verdict::Worse, Verdict::NotSeparated]
        .map(|v| Series {
            name: v.name().to_string(),
            colour: verdict_colour(v).to_string(),
        })
        .to_vec()
}

/// "1.20× (95% CI 1.18–1.22)".
pub fn ratio_with_ci(ratio: Option<f64>, lo: Option<f64>, hi: Option<f64>) -> String {
    let r = ratio.map_or_else(|| "no ratio".into(), |r| format!("{}×", fmt::ratio(r)));
    match (lo, hi) {
        (Some(l), Some(h)) => format!("{r} (95% CI {}–{})", fmt::ratio(l), fmt::ratio(h)),
        _ => r,
    }
}

fn row_tooltip(r: &Row) -> String {
    format!(
        "{}: {} → {} ({}), n = {} vs {}, p {} (Holm {}): {}{}",
        r.condition,
        fmt::opt(r.baseline_mean),
        fmt::opt(r.candidate_mean),
        ratio_with_ci(r.ratio, r.ci_low, r.ci_high),
        r.n_baseline,
        r.n_candidate,
        r.p.map_or_else(|| "–".into(), fmt::p),
        r.p_adjusted.map_or_else(|| "–".into(), fmt::p),
        r.verdict.name(),
        if r.noise_exceeds_change {
            "; run-to-run noise larger than the change"
        } else {
            ""
        }
    )
}

fn summary_row(s: &MetricSummary, label: String) -> ForestRow {
    ForestRow {
        tooltip: format!(
            "{}: geometric mean over {} conditions {} — {} ({} better, {} worse, {} not separated)",
            s.metric.label(),
            s.conditions,
            ratio_with_ci(s.geomean_ratio, s.ci_low, s.ci_high),
            s.verdict.name(),
            s.better,
            s.worse,
            s.not_separated
        ),
        label,
        value: s.geomean_ratio,
        lo: s.ci_low,
        hi: s.ci_high,
        colour: verdict_colour(s.verdict).to_string(),
        summary: true,
    }
}

/// Every condition's ratio of one metric with its interval, and the
/// geometric mean.
pub fn ratio_chart(c: &Comparison, m: Metric) -> Option<ForestChart> {
    let mut rows: Vec<ForestRow> = c
        .rows_of(m)
        .map(|r| ForestRow {
            label: r.condition.clone(),
            value: r.ratio,
            lo: r.ci_low,
            hi: r.ci_high,
            colour: verdict_colour(r.verdict).to_string(),
            tooltip: row_tooltip(r),
            summary: false,
        })
        .collect();
    if rows.is_empty() {
        return None;
    }
    if let Some(s) = c.summary.iter().find(|s| s.metric == m) {
        rows.push(summary_row(s, "geometric mean".into()));
    }
    Some(ForestChart {
        meta: Meta {
            kind: "compare-ratio",
            id: format!("compare-ratio-{}", m.name()),
            data: vec![("metric", m.name().to_string())],
            title: format!("{}: candidate / baseline, 95% CI", m.label()),
            y_label: String::new(),
            x_label: format!("candidate / baseline ({})", m.direction().words()),
        },
        legend: legend(),
        rows,
        reference: 1.0,
    })
}

/// The geometric mean of every metric's ratios with its interval.
pub fn forest(c: &Comparison) -> Option<ForestChart> {
    if c.summary.is_empty() {
        return None;
    }
    Some(ForestChart {
        meta: Meta {
            kind: "compare-forest",
            id: "compare-forest".into(),
            data: Vec::new(),
            title: "Every metric: geometric mean of candidate / baseline, 95% CI".into(),
            y_label: String::new(),
            x_label: "candidate / baseline".into(),
        },
        legend: legend(),
        rows: c
            .summary
            .iter()
            .map(|s| {
                summary_row(
                    s,
                    format!(
                        "{} ({})",
                        s.metric.name(),
                        match s.direction {
                            crate::report::metric::Direction::LowerIsBetter => "lower better",
                            crate::report::metric::Direction::HigherIsBetter => "higher better",
                        }
                    ),
                )
            })
            .collect(),
        reference: 1.0,
    })
}
