//! A forest plot: one labelled row per estimate, its point and interval
//! on a shared horizontal axis against a reference line (a ratio of 1),
//! summary rows drawn as diamonds.

use std::fmt::Write;

use super::frame::{legend_rows, open, x_ticks_and_label};
use super::scale::{Scale, extent, log_ticks, nice_ticks};
use super::{AXIS, GRID, Meta, RIGHT, Series, W, WHISKER, fit, px};
use crate::report::fmt::esc;

/// A row of a [`ForestChart`].
#[derive(Debug, Clone, PartialEq)]
pub struct ForestRow {
    pub label: String,
    /// The estimate (None: the row is drawn as "no estimate").
    pub value: Option<f64>,
    pub lo: Option<f64>,
    pub hi: Option<f64>,
    pub colour: String,
    pub tooltip: String,
    /// A summary row (bold label, diamond mark).
    pub summary: bool,
}

/// Estimates with intervals, one row each, against a reference value.
#[derive(Debug, Clone, PartialEq)]
pub struct ForestChart {
    pub meta: Meta,
    pub legend: Vec<Series>,
    pub rows: Vec<ForestRow>,
    /// Drawn as a dashed vertical line (1 for ratios).
    pub reference: f64,
}

/// Ticks of a log axis of ratios.
const RATIO_TICKS: [f64; 17] = [
    0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 0.8, 1.0, 1.25, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0,
    500.0,
];

/// Room for the row labels, left of the plot.
const LABEL_W: f64 = 230.0;
const ROW_H: f64 = 20.0;

impl ForestChart {
    pub fn render(&self) -> String {
        let mut out = String::new();
        let legend_h = if self.legend.is_empty() {
            0.0
        } else {
            17.0 * legend_rows(&self.legend).len() as f64
        };
        let height = 30.0 + legend_h + 26.0 + ROW_H * self.rows.len().max(1) as f64 + 50.0;
        let top = open(&mut out, &self.meta, height, &self.legend) - 12.0;
        let bottom = top + ROW_H * self.rows.len().max(1) as f64;
        let values = self
            .rows
            .iter()
            .flat_map(|r| [r.value, r.lo, r.hi])
            .flatten()
            .chain([self.reference]);
        let (lo, hi) = extent(values).unwrap_or((self.reference, self.reference));
        let (x0, x1) = (LABEL_W + 10.0, W - RIGHT - 10.0);
        let (x, ticks, step) = if lo > 0.0 && hi / lo > 3.0 {
            let (l, h) = (lo / 1.1, hi * 1.1);
            // Ratios read in pairs around 1 (½ and 2, 0.8 and 1.25).
            let ratio_ticks: Vec<f64> = RATIO_TICKS
                .iter()
                .copied()
                .filter(|&t| t >= l && t <= h)
                .collect();
            let ticks = if ratio_ticks.len() >= 3 {
                ratio_ticks
            } else {
                log_ticks(l, h)
            };
            (Scale::log(l, h, x0, x1), ticks, 0.0)
        } else {
            let pad = ((hi - lo) * 0.05).max(hi.abs().max(1e-9) * 0.02);
            // Never below 0 for values that are not.
            let from = if lo >= 0.0 {
                (lo - pad).max(0.0)
            } else {
                lo - pad
            };
            let t = nice_ticks(from, hi + pad, 6);
            (Scale::linear(t.lo, t.hi, x0, x1), t.values, t.step)
        };
        for &t in &ticks {
            let _ = write!(
                out,
                "<line x1=\"{xp}\" x2=\"{xp}\" y1=\"{}\" y2=\"{}\" stroke=\"{GRID}\"/>",
                px(top),
                px(bottom),
                xp = px(x.map(t))
            );
        }
        let _ = write!(
            out,
            "<line x1=\"{}\" x2=\"{}\" y1=\"{b}\" y2=\"{b}\" stroke=\"{AXIS}\"/>",
            px(x0),
            px(x1),
            b = px(bottom)
        );
        x_ticks_and_label(&mut out, &x, &ticks, step, bottom, &self.meta.x_label);
        let _ = write!(
            out,
            "<g class=\"reference\"><title>{r}: no change</title><line x1=\"{xp}\" x2=\"{xp}\" y1=\"{}\" \
             y2=\"{}\" stroke=\"#555\" stroke-dasharray=\"4 3\"/></g>",
            px(top - 4.0),
            px(bottom),
            r = crate::report::fmt::sig(self.reference, 3),
            xp = px(x.map(self.reference))
        );
        for (i, r) in self.rows.iter().enumerate() {
            let y = top + ROW_H * (i as f64 + 0.5);
            let weight = if r.summary {
                " font-weight=\"600\""
            } else {
                ""
            };
            let _ = write!(
                out,
                "<text x=\"8\" y=\"{}\" fill=\"#222\"{weight}>{}</text>",
                px(y + 4.0),
                esc(&fit(&r.label, LABEL_W - 10.0))
            );
            let _ = write!(out, "<g class=\"mark\"><title>{}</title>", esc(&r.tooltip));
            if let (Some(l), Some(h)) = (r.lo, r.hi)
                && l.is_finite()
                && h.is_finite()
            {
                let (xl, xh) = (x.map(l), x.map(h));
                let _ = write!(
                    out,
                    "<path d=\"M{a} {y}H{b}M{a} {y0}V{y1}M{b} {y0}V{y1}\" stroke=\"{WHISKER}\" fill=\"none\"/>",
                    a = px(xl),
                    b = px(xh),
                    y = px(y),
                    y0 = px(y - 4.0),
                    y1 = px(y + 4.0)
                );
            }
            match r.value.filter(|v| v.is_finite()) {
                Some(v) if r.summary => {
                    let xv = x.map(v);
                    let _ = write!(
                        out,
                        "<path d=\"M{} {y}L{xv} {}L{} {y}L{xv} {}Z\" fill=\"{}\"/>",
                        px(xv - 7.0),
                        px(y - 6.0),
                        px(xv + 7.0),
                        px(y + 6.0),
                        r.colour,
                        y = px(y),
                        xv = px(xv)
                    );
                }
                Some(v) => {
                    let _ = write!(
                        out,
                        "<circle cx=\"{}\" cy=\"{}\" r=\"4.5\" fill=\"{}\"/>",
                        px(x.map(v)),
                        px(y),
                        r.colour
                    );
                }
                None => {
                    let _ = write!(
                        out,
                        "<text x=\"{}\" y=\"{}\" fill=\"#888\">no ratio</text>",
                        px(x0 + 4.0),
                        px(y + 4.0)
                    );
                }
            }
            out.push_str("</g>");
        }
        out.push_str("</svg>");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chart(rows: Vec<ForestRow>) -> ForestChart {
        ForestChart {
            meta: Meta {
                kind: "compare-ratio",
                id: "compare-ratio-wall".into(),
                data: vec![("metric", "wall".into())],
                title: "wall".into(),
                y_label: String::new(),
                x_label: "candidate / baseline".into(),
            },
            legend: vec![Series {
                name: "worse".into(),
                colour: "#D55E00".into(),
            }],
            rows,
            reference: 1.0,
        }
    }

    fn row(label: &str, v: Option<f64>, summary: bool) -> ForestRow {
        ForestRow {
            label: label.into(),
            value: v,
            lo: v.map(|v| v * 0.95),
            hi: v.map(|v| v * 1.05),
            colour: "#D55E00".into(),
            tooltip: format!("{label} <tip>"),
            summary,
        }
    }

    #[test]
    fn one_mark_per_row_with_the_reference_line() {
        let svg = chart(vec![
            row("pi, 2 processes, OTHER", Some(1.2), false),
            row("pi & copy", None, false),
            row("geometric mean", Some(1.19), true),
        ])
        .render();
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        assert!(svg.contains("data-kind=\"compare-ratio\""));
        assert_eq!(svg.matches("<g class=\"mark\">").count(), 3);
        assert_eq!(svg.matches("<circle").count(), 1);
        assert!(
            svg.contains("Z\" fill=\"#D55E00\""),
            "a diamond for the summary row"
        );
        assert!(svg.contains("no ratio"));
        assert!(svg.contains("pi &amp; copy") && svg.contains("&lt;tip&gt;"));
        assert!(svg.contains("class=\"reference\""));
        // The reference (1) lies left of the 1.2 point.
        let cx: f64 = svg
            .split("<circle cx=\"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let rx: f64 = svg
            .split("class=\"reference\"")
            .nth(1)
            .unwrap()
            .split("x1=\"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert!(rx < cx, "reference at {rx}, point at {cx}");
    }

    #[test]
    fn wide_ranges_use_a_log_axis_and_empty_charts_render() {
        let svg = chart(vec![
            row("a", Some(0.05), false),
            row("b", Some(3.0), false),
        ])
        .render();
        for t in [">0.1<", ">0.5<", ">1<", ">2<"] {
            assert!(svg.contains(t), "{t} in {svg}");
        }
        // A ratio of 0 on a linear axis that starts at 0, not below.
        let svg = chart(vec![row("a", Some(0.0), false), row("b", Some(1.5), false)]).render();
        assert!(!svg.contains(">-0.5<") && svg.contains(">0<"), "{svg}");
        let empty = chart(Vec::new()).render();
        assert!(empty.ends_with("</svg>"));
    }
}
