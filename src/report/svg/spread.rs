//! Strip and box plots of per-run values.

use std::fmt::Write;

use super::frame::{close_grouped, group_centre, group_width, open_grouped, y_axis};
use super::scale::{Scale, nice_ticks};
use super::{FLAG, Meta, PALETTE, Series, px};
use crate::report::fmt::esc;

/// One observation in a [`SpreadChart`].
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub value: f64,
    pub tooltip: String,
    /// Drawn as a flagged (outlier) mark.
    pub flagged: bool,
}

/// The per-run values of each (group, series) cell: every point (strip plot)
/// when a cell has at most `strip_max` points, else a box plot (quartiles,
/// whiskers to the most extreme values within Tukey's 1.5 IQR fences) with
/// the points beyond the whiskers and the flagged points drawn individually.
#[derive(Debug, Clone, PartialEq)]
pub struct SpreadChart {
    pub meta: Meta,
    pub groups: Vec<Vec<String>>,
    pub series: Vec<Series>,
    /// `cells[group][series]`.
    pub cells: Vec<Vec<Vec<Point>>>,
    pub strip_max: usize,
}

/// A deterministic jitter in [-0.5, 0.5) for point `i` of a cell.
pub(super) fn jitter(i: usize) -> f64 {
    let mut rng = crate::rng::SplitMix64::new(i as u64 ^ 0x5eed);
    rng.next_f64() - 0.5
}

impl SpreadChart {
    pub fn render(&self) -> String {
        let mut out = String::new();
        let (top, bottom) = open_grouped(&mut out, &self.meta, &self.groups, &self.series);
        let values = self
            .cells
            .iter()
            .flatten()
            .flatten()
            .map(|p| p.value)
            .filter(|v| v.is_finite());
        let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
            (a.min(v), b.max(v))
        });
        let ticks = if lo.is_finite() {
            let pad = (hi - lo) * 0.04;
            let lo2 = if lo >= 0.0 && lo - pad < 0.0 {
                0.0
            } else {
                lo - pad
            };
            nice_ticks(lo2, hi + pad, 5)
        } else {
            nice_ticks(0.0, 1.0, 5)
        };
        let y = Scale::linear(ticks.lo, ticks.hi, bottom, top);
        y_axis(&mut out, &y, &ticks.values, ticks.step, &self.meta.y_label);
        let gw = group_width(self.groups.len());
        let n_series = self.series.len().max(1);
        let cw = gw * 0.84 / n_series as f64;
        let mut centres = Vec::new();
        for (g, row) in self.cells.iter().enumerate() {
            let gx = group_centre(g, gw);
            centres.push(gx);
            let start = gx - cw * n_series as f64 / 2.0;
            for (s, points) in row.iter().enumerate() {
                let colour = self.series.get(s).map_or(PALETTE[0], |x| &x.colour);
                let cx = start + cw * (s as f64 + 0.5);
                if points.len() > self.strip_max {
                    self.render_box(&mut out, &y, cx, cw, colour, points);
                } else {
                    for (i, p) in points.iter().enumerate() {
                        if !p.value.is_finite() {
                            continue;
                        }
                        let x = cx + jitter(i) * cw * 0.55;
                        point(&mut out, x, y.map(p.value), colour, p);
                    }
                }
            }
        }
        close_grouped(out, &self.meta, &self.groups, &centres, gw, bottom, bottom)
    }

    fn render_box(
        &self,
        out: &mut String,
        y: &Scale,
        cx: f64,
        cw: f64,
        colour: &str,
        points: &[Point],
    ) {
        let mut sorted: Vec<f64> = points
            .iter()
            .map(|p| p.value)
            .filter(|v| v.is_finite())
            .collect();
        sorted.sort_by(f64::total_cmp);
        if sorted.is_empty() {
            return;
        }
        let q = |p: f64| crate::stats::percentile(&sorted, p);
        let (q1, med, q3) = (q(0.25), q(0.5), q(0.75));
        let (f_lo, f_hi) =
            crate::stats::iqr_fences(&sorted, crate::stats::outliers::TUKEY_K).unwrap_or((q1, q3));
        let w_lo = sorted.iter().copied().find(|&v| v >= f_lo).unwrap_or(q1);
        let w_hi = sorted
            .iter()
            .rev()
            .copied()
            .find(|&v| v <= f_hi)
            .unwrap_or(q3);
        let bw = (cw * 0.6).min(40.0);
        let tooltip = format!(
            "{} runs: min {}, Q1 {}, median {}, Q3 {}, max {}",
            sorted.len(),
            crate::report::fmt::num(sorted[0]),
            crate::report::fmt::num(q1),
            crate::report::fmt::num(med),
            crate::report::fmt::num(q3),
            crate::report::fmt::num(sorted[sorted.len() - 1])
        );
        let _ = write!(
            out,
            "<g class=\"mark box\"><title>{}</title>\
             <path d=\"M{cx} {wl}V{bq1}M{cx} {bq3}V{wh}M{a} {wl}H{b}M{a} {wh}H{b}\" stroke=\"{colour}\" fill=\"none\"/>\
             <rect x=\"{x}\" y=\"{bq3}\" width=\"{bw}\" height=\"{h}\" fill=\"{colour}\" fill-opacity=\"0.25\" \
             stroke=\"{colour}\"/>\
             <path d=\"M{x} {m}h{bw}\" stroke=\"{colour}\" stroke-width=\"2.5\"/></g>",
            esc(&tooltip),
            cx = px(cx),
            wl = px(y.map(w_lo)),
            wh = px(y.map(w_hi)),
            bq1 = px(y.map(q1)),
            bq3 = px(y.map(q3)),
            a = px(cx - bw / 4.0),
            b = px(cx + bw / 4.0),
            x = px(cx - bw / 2.0),
            bw = px(bw),
            h = px((y.map(q1) - y.map(q3)).max(0.5)),
            m = px(y.map(med)),
        );
        for (i, p) in points.iter().enumerate() {
            if p.value.is_finite() && (p.flagged || p.value < w_lo || p.value > w_hi) {
                point(out, cx + jitter(i) * bw * 0.5, y.map(p.value), colour, p);
            }
        }
    }
}

/// A dot with its tooltip; flagged dots get a red ring.
pub(super) fn point(out: &mut String, x: f64, y: f64, colour: &str, p: &Point) {
    if p.flagged {
        let _ = write!(
            out,
            "<g class=\"mark flagged\"><title>{}</title><circle cx=\"{x}\" cy=\"{y}\" r=\"4.5\" fill=\"{colour}\" \
             stroke=\"{FLAG}\" stroke-width=\"2\"/></g>",
            esc(&p.tooltip),
            x = px(x),
            y = px(y),
        );
    } else {
        let _ = write!(
            out,
            "<g class=\"mark\"><title>{}</title><circle cx=\"{x}\" cy=\"{y}\" r=\"3\" fill=\"{colour}\" \
             fill-opacity=\"0.7\"/></g>",
            esc(&p.tooltip),
            x = px(x),
            y = px(y),
        );
    }
}
