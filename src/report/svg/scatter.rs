//! Points against two axes, optionally with the diagonal.

use std::fmt::Write;

use super::frame::{open, x_axis_line, x_ticks_and_label, y_axis};
use super::scale::{axis, extent};
use super::{LEFT, Meta, RIGHT, Series, W, px};
use crate::report::fmt::esc;

/// A point of a [`ScatterChart`].
#[derive(Debug, Clone, PartialEq)]
pub struct ScatterPoint {
    pub x: f64,
    pub y: f64,
    pub colour: String,
    pub tooltip: String,
}

/// Points against two axes, optionally with the y = x diagonal (e.g.
/// observed against predicted share).
#[derive(Debug, Clone, PartialEq)]
pub struct ScatterChart {
    pub meta: Meta,
    pub legend: Vec<Series>,
    pub points: Vec<ScatterPoint>,
    pub log: bool,
    pub diagonal: bool,
}

impl ScatterChart {
    pub fn render(&self) -> String {
        let mut out = String::new();
        let height = 360.0;
        let top = open(&mut out, &self.meta, height, &self.legend);
        let bottom = height - 44.0;
        let all = self.points.iter().flat_map(|p| [p.x, p.y]);
        let (lo, hi) = extent(all).unwrap_or((0.0, 1.0));
        let log = self.log && lo > 0.0;
        // Same domain on both axes so the diagonal is y = x.
        let (x, xt, xstep) = axis(lo, hi, log, LEFT + 10.0, W - RIGHT - 10.0, &[]);
        let (y, yt, ystep) = axis(lo, hi, log, bottom, top, &[]);
        y_axis(&mut out, &y, &yt, ystep, &self.meta.y_label);
        x_axis_line(&mut out, bottom);
        x_ticks_and_label(&mut out, &x, &xt, xstep, bottom, &self.meta.x_label);
        if self.diagonal {
            let (a, b) = (x.d0.max(y.d0), x.d1.min(y.d1));
            let _ = write!(
                out,
                "<g class=\"mark\"><title>y = x: observed equals predicted</title>\
                 <path d=\"M{} {}L{} {}\" stroke=\"#888\" stroke-dasharray=\"4 3\" fill=\"none\"/></g>",
                px(x.map(a)),
                px(y.map(a)),
                px(x.map(b)),
                px(y.map(b))
            );
        }
        for p in &self.points {
            if p.x.is_finite() && p.y.is_finite() {
                let _ = write!(
                    out,
                    "<g class=\"mark\"><title>{}</title><circle cx=\"{}\" cy=\"{}\" r=\"3.5\" fill=\"{}\" \
                     fill-opacity=\"0.8\"/></g>",
                    esc(&p.tooltip),
                    px(x.map(p.x)),
                    px(y.map(p.y)),
                    p.colour
                );
            }
        }
        out.push_str("</svg>");
        out
    }
}
