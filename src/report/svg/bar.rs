//! Grouped bars with confidence whiskers.

use std::fmt::Write;

use super::frame::{close_grouped, group_centre, group_width, open_grouped, y_axis};
use super::scale::{Scale, nice_ticks};
use super::{Meta, PALETTE, Series, WHISKER, px};
use crate::report::fmt::esc;

/// One bar: its height and, when known, the ends of its interval.
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    pub value: f64,
    pub lo: Option<f64>,
    pub hi: Option<f64>,
    pub tooltip: String,
}

/// Grouped bars: one group per category (e.g. a process count), one bar per
/// series (e.g. a policy) in each, with whiskers for confidence intervals.
/// The value axis starts at zero.
#[derive(Debug, Clone, PartialEq)]
pub struct BarChart {
    pub meta: Meta,
    /// Label lines of each group.
    pub groups: Vec<Vec<String>>,
    pub series: Vec<Series>,
    /// `bars[group][series]`; None where there is no data.
    pub bars: Vec<Vec<Option<Bar>>>,
    /// Fix the top of the value axis (e.g. 1 for Jain's index).
    pub y_max: Option<f64>,
}

impl BarChart {
    pub fn render(&self) -> String {
        let mut out = String::new();
        let (top, bottom) = open_grouped(&mut out, &self.meta, &self.groups, &self.series);
        // The axis starts at 0 unless a bar itself is negative; whiskers of
        // non-negative quantities are clipped at 0 (the tooltip keeps the
        // exact interval).
        let mut hi = 0.0_f64;
        let mut lo = 0.0_f64;
        for b in self.bars.iter().flatten().flatten() {
            if b.value.is_finite() {
                lo = lo.min(b.value);
            }
            for v in [Some(b.value), b.hi].into_iter().flatten() {
                if v.is_finite() {
                    hi = hi.max(v);
                }
            }
        }
        if let Some(m) = self.y_max {
            hi = hi.max(m);
        }
        let ticks = nice_ticks(lo, hi, 5);
        let y = Scale::linear(ticks.lo, ticks.hi, bottom, top);
        y_axis(&mut out, &y, &ticks.values, ticks.step, &self.meta.y_label);
        let gw = group_width(self.groups.len());
        let n_series = self.series.len().max(1);
        let bw = (gw * 0.8 / n_series as f64).min(60.0);
        let zero = y.map(0.0);
        let mut centres = Vec::new();
        for (g, row) in self.bars.iter().enumerate() {
            let gx = group_centre(g, gw);
            centres.push(gx);
            let start = gx - bw * n_series as f64 / 2.0;
            for (s, bar) in row.iter().enumerate() {
                let Some(b) = bar else { continue };
                if !b.value.is_finite() {
                    continue;
                }
                let colour = self.series.get(s).map_or(PALETTE[0], |x| &x.colour);
                let x = start + bw * s as f64;
                let yv = y.map(b.value);
                let (y0, h) = if yv <= zero {
                    (yv, zero - yv)
                } else {
                    (zero, yv - zero)
                };
                let _ = write!(
                    out,
                    "<g class=\"mark\"><title>{}</title><rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" \
                     fill=\"{colour}\"/>",
                    esc(&b.tooltip),
                    px(x + 1.0),
                    px(y0),
                    px((bw - 2.0).max(1.0)),
                    px(h.max(0.5)),
                );
                if let (Some(l), Some(u)) = (b.lo, b.hi)
                    && l.is_finite()
                    && u.is_finite()
                    && u > l
                {
                    let cx = x + bw / 2.0;
                    let cap = (bw / 4.0).clamp(2.0, 8.0);
                    let (yl, yu) = (y.map(l.max(ticks.lo)), y.map(u));
                    let _ = write!(
                        out,
                        "<path d=\"M{a} {yl}H{b}M{cx} {yl}V{yu}M{a} {yu}H{b}\" stroke=\"{WHISKER}\" \
                         stroke-width=\"1.3\" fill=\"none\"/>",
                        a = px(cx - cap),
                        b = px(cx + cap),
                        cx = px(cx),
                        yl = px(yl),
                        yu = px(yu),
                    );
                }
                out.push_str("</g>");
            }
        }
        close_grouped(
            out,
            &self.meta,
            &self.groups,
            &centres,
            gw,
            zero.min(bottom),
            bottom,
        )
    }
}
