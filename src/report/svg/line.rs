//! Lines through points, on linear or log axes.

use std::fmt::Write;

use super::frame::{open_with, x_axis_line, x_ticks_and_label, y_axis};
use super::scale::{axis, extent};
use super::{LEFT, Meta, RIGHT, Series, W, px};
use crate::report::fmt::esc;

/// A point of a line, with an optional interval.
#[derive(Debug, Clone, PartialEq)]
pub struct LinePoint {
    pub x: f64,
    pub y: f64,
    pub lo: Option<f64>,
    pub hi: Option<f64>,
    pub tooltip: String,
}

/// One line of a [`LineChart`].
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub series: Series,
    pub points: Vec<LinePoint>,
    pub dashed: bool,
}

/// Lines through points (e.g. mean against number of processes), on linear
/// or log axes. A log axis falls back to linear when a value is not positive.
#[derive(Debug, Clone, PartialEq)]
pub struct LineChart {
    pub meta: Meta,
    pub lines: Vec<Line>,
    pub x_log: bool,
    pub y_log: bool,
    /// Tick positions of the x axis (e.g. the process counts); nice ticks
    /// when empty.
    pub x_ticks: Vec<f64>,
}

impl LineChart {
    pub fn render(&self) -> String {
        let mut out = String::new();
        let height = 330.0;
        let legend: Vec<Series> = self.lines.iter().map(|l| l.series.clone()).collect();
        let dashed: Vec<bool> = self.lines.iter().map(|l| l.dashed).collect();
        let top = open_with(&mut out, &self.meta, height, &legend, &dashed);
        let bottom = height - 44.0;
        let pts = || self.lines.iter().flat_map(|l| l.points.iter());
        let xs = extent(pts().map(|p| p.x)).unwrap_or((1.0, 2.0));
        let ys =
            extent(pts().flat_map(|p| [Some(p.y), p.lo, p.hi]).flatten()).unwrap_or((0.0, 1.0));
        let x_log = self.x_log && xs.0 > 0.0;
        let y_log = self.y_log && ys.0 > 0.0;
        let (x, xt, xstep) = axis(
            xs.0,
            xs.1,
            x_log,
            LEFT + 12.0,
            W - RIGHT - 12.0,
            &self.x_ticks,
        );
        let (y, yt, ystep) = axis(ys.0, ys.1, y_log, bottom, top, &[]);
        y_axis(&mut out, &y, &yt, ystep, &self.meta.y_label);
        x_axis_line(&mut out, bottom);
        x_ticks_and_label(&mut out, &x, &xt, xstep, bottom, &self.meta.x_label);
        for line in &self.lines {
            let c = &line.series.colour;
            let path: Vec<String> = line
                .points
                .iter()
                .filter(|p| p.x.is_finite() && p.y.is_finite())
                .enumerate()
                .map(|(i, p)| {
                    format!(
                        "{}{} {}",
                        if i == 0 { "M" } else { "L" },
                        px(x.map(p.x)),
                        px(y.map(p.y))
                    )
                })
                .collect();
            if path.len() > 1 {
                let _ = write!(
                    out,
                    "<path d=\"{}\" stroke=\"{c}\" stroke-width=\"2\" fill=\"none\"{}/>",
                    path.join(""),
                    if line.dashed {
                        " stroke-dasharray=\"5 3\""
                    } else {
                        ""
                    }
                );
            }
            for p in &line.points {
                if !(p.x.is_finite() && p.y.is_finite()) {
                    continue;
                }
                let (xp, yp) = (x.map(p.x), y.map(p.y));
                let _ = write!(out, "<g class=\"mark\"><title>{}</title>", esc(&p.tooltip));
                if let (Some(l), Some(u)) = (p.lo, p.hi)
                    && u > l
                    && (!y_log || l > 0.0)
                {
                    let _ = write!(
                        out,
                        "<path d=\"M{a} {yl}H{b}M{xp} {yl}V{yu}M{a} {yu}H{b}\" stroke=\"{c}\" fill=\"none\"/>",
                        a = px(xp - 4.0),
                        b = px(xp + 4.0),
                        xp = px(xp),
                        yl = px(y.map(l)),
                        yu = px(y.map(u)),
                    );
                }
                let _ = write!(
                    out,
                    "<circle cx=\"{}\" cy=\"{}\" r=\"3.5\" fill=\"{c}\"/></g>",
                    px(xp),
                    px(yp)
                );
            }
        }
        out.push_str("</svg>");
        out
    }
}
