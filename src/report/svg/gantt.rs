//! Spans on a time axis, one row per task: a timeline of slices.

use std::fmt::Write;

use super::scale::{Scale, nice_ticks};
use super::{AXIS, CHAR_W, FONT, GRID, Meta, PALETTE, Series, fit, px};
use crate::report::fmt::{esc, tick};

/// A row of a [`GanttChart`] (e.g. one task).
#[derive(Debug, Clone, PartialEq)]
pub struct GanttRow {
    pub label: String,
    pub colour: String,
}

/// A bar of a [`GanttChart`]: a span of its row from `start` to `end`, and
/// optionally a thin inner mark from `start` to `inner_end` (e.g. the CPU
/// time the task actually received in its slice).
#[derive(Debug, Clone, PartialEq)]
pub struct GanttBar {
    pub row: usize,
    pub start: f64,
    pub end: f64,
    pub inner_end: Option<f64>,
    pub tooltip: String,
    /// The bar's own colour (default: its row's), e.g. per process when
    /// rows are CPUs.
    pub colour: Option<String>,
}

/// Spans on a time axis, one row per task: a timeline of slices. Drawn at
/// twice the width of the other charts, for a full-width figure.
#[derive(Debug, Clone, PartialEq)]
pub struct GanttChart {
    pub meta: Meta,
    pub rows: Vec<GanttRow>,
    pub bars: Vec<GanttBar>,
    /// The time axis runs from 0 to `x_max`; bars beyond it are clipped.
    pub x_max: f64,
    /// A line of explanation under the title.
    pub note: String,
    /// What the bars' own colours mean, drawn under the axis (none: the
    /// rows' labels say it).
    pub legend: Vec<Series>,
}

/// Width of a [`GanttChart`].
pub(super) const GANTT_W: f64 = 1200.0;

impl GanttChart {
    pub fn render(&self) -> String {
        let mut out = String::new();
        let l = self.layout();
        let legend = legend_lines(&self.legend, GANTT_W - 32.0);
        let height = l.bottom + 46.0 + 18.0 * legend.len() as f64;
        self.header(&mut out, height);
        self.grid(&mut out, &l);
        self.row_labels(&mut out, &l);
        self.bars_svg(&mut out, &l);
        legend_svg(&mut out, &legend, l.bottom);
        out.push_str("</svg>");
        out
    }

    /// Where the plot lies: rows sized to fit, labels to the left.
    fn layout(&self) -> Layout {
        let n = self.rows.len().max(1);
        let row_h = (420.0 / n as f64).clamp(6.0, 24.0);
        let label_w = self
            .rows
            .iter()
            .map(|r| r.label.chars().count())
            .max()
            .unwrap_or(4) as f64
            * CHAR_W
            + 16.0;
        let left = label_w.clamp(60.0, 260.0);
        let right = 20.0;
        let top = 54.0;
        let plot_h = row_h * n as f64;
        let x_max = if self.x_max > 0.0 && self.x_max.is_finite() {
            self.x_max
        } else {
            1.0
        };
        Layout {
            n,
            row_h,
            left,
            right,
            top,
            bottom: top + plot_h,
            x_max,
            x: Scale::linear(0.0, x_max, left, GANTT_W - right),
        }
    }

    /// The `<svg>` element, its background, title and note.
    fn header(&self, out: &mut String, height: f64) {
        let data: String = self
            .meta
            .data
            .iter()
            .map(|(k, v)| format!(" data-{k}=\"{}\"", esc(v)))
            .collect();
        let _ = write!(
            out,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart {kind}\" id=\"{id}\" data-kind=\"{kind}\"{data} \
         viewBox=\"0 0 {w} {h}\" width=\"{w}\" height=\"{h}\" role=\"img\" aria-label=\"{title}\" \
         font-family=\"{FONT}\" font-size=\"11\"><rect x=\"0\" y=\"0\" width=\"{w}\" height=\"{h}\" fill=\"#fff\"/>\
         <text x=\"16\" y=\"18\" font-size=\"13\" font-weight=\"600\" fill=\"#111\">{t}</text>\
         <text x=\"16\" y=\"36\" fill=\"#444\">{note}</text>",
            kind = self.meta.kind,
            id = esc(&self.meta.id),
            w = px(GANTT_W),
            h = px(height),
            title = esc(&self.meta.title),
            t = esc(&fit(&self.meta.title, GANTT_W - 32.0)),
            note = esc(&fit(&self.note, GANTT_W - 32.0)),
        );
    }

    /// Row shading, the time axis's grid and ticks, and the axes.
    fn grid(&self, out: &mut String, l: &Layout) {
        let Layout {
            n,
            row_h,
            left,
            right,
            top,
            bottom,
            x_max,
            x,
        } = *l;
        // Alternate row shading first, so the grid lines stay visible.
        for i in (1..n).step_by(2) {
            let _ = write!(
                out,
                "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#f6f7f9\"/>",
                px(left),
                px(top + row_h * i as f64),
                px(GANTT_W - right - left),
                px(row_h)
            );
        }
        let ticks = nice_ticks(0.0, x_max, 10);
        for &t in ticks.values.iter().filter(|&&t| t <= x_max * 1.0001) {
            let xp = x.map(t);
            let _ = write!(
                out,
                "<line x1=\"{xp}\" x2=\"{xp}\" y1=\"{t0}\" y2=\"{b}\" stroke=\"{GRID}\"/>\
             <text x=\"{xp}\" y=\"{ty}\" text-anchor=\"middle\" fill=\"{AXIS}\">{}</text>",
                esc(&tick(t, ticks.step)),
                xp = px(xp),
                t0 = px(top),
                b = px(bottom + 5.0),
                ty = px(bottom + 17.0),
            );
        }
        let _ = write!(
            out,
            "<line x1=\"{l}\" x2=\"{r}\" y1=\"{b}\" y2=\"{b}\" stroke=\"{AXIS}\"/>\
         <line x1=\"{l}\" x2=\"{l}\" y1=\"{t0}\" y2=\"{b}\" stroke=\"{AXIS}\"/>\
         <text x=\"{mid}\" y=\"{ly}\" text-anchor=\"middle\" fill=\"#222\">{}</text>",
            esc(&self.meta.x_label),
            l = px(left),
            r = px(GANTT_W - right),
            t0 = px(top),
            b = px(bottom),
            mid = px((left + GANTT_W - right) / 2.0),
            ly = px(bottom + 36.0),
        );
    }

    /// Row labels; every k-th when rows are too thin for all of them.
    fn row_labels(&self, out: &mut String, l: &Layout) {
        let Layout {
            row_h, left, top, ..
        } = *l;
        let every = (12.0 / row_h).ceil().max(1.0) as usize;
        for (i, r) in self.rows.iter().enumerate() {
            let yc = top + row_h * (i as f64 + 0.5);
            if i % every == 0 {
                let _ = write!(
                    out,
                    "<text x=\"{}\" y=\"{}\" text-anchor=\"end\" fill=\"{AXIS}\">{}</text>",
                    px(left - 6.0),
                    px(yc + 3.5),
                    esc(&fit(&r.label, left - 10.0))
                );
            }
        }
    }

    /// A bar per span, clipped to the axis, with its inner mark.
    fn bars_svg(&self, out: &mut String, l: &Layout) {
        let Layout {
            n,
            row_h,
            top,
            x_max,
            x,
            ..
        } = *l;
        let bar_h = (row_h * 0.72).max(3.0);
        let inner_h = (row_h * 0.22).clamp(1.5, 4.0);
        for b in &self.bars {
            if !(b.start.is_finite() && b.end.is_finite()) || b.start >= x_max || b.row >= n {
                continue;
            }
            let colour = b.colour.as_deref().unwrap_or_else(|| {
                self.rows
                    .get(b.row)
                    .map_or(PALETTE[0], |r| r.colour.as_str())
            });
            let x0 = x.map(b.start.max(0.0));
            let x1 = x.map(b.end.min(x_max)).max(x0 + 0.8);
            let yc = top + row_h * (b.row as f64 + 0.5);
            let _ = write!(
                out,
                "<g class=\"mark\"><title>{}</title><rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" \
             fill=\"{colour}\" fill-opacity=\"0.55\" stroke=\"{colour}\" stroke-width=\"0.6\"/>",
                esc(&b.tooltip),
                px(x0),
                px(yc - bar_h / 2.0),
                px(x1 - x0),
                px(bar_h),
            );
            if let Some(ie) = b.inner_end
                && ie.is_finite()
            {
                let xi = x.map(ie.min(x_max)).max(x0 + 0.8);
                let _ = write!(
                    out,
                    "<rect class=\"inner\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#111\"/>",
                    px(x0),
                    px(yc - inner_h / 2.0),
                    px(xi - x0),
                    px(inner_h),
                );
            }
            out.push_str("</g>");
        }
    }
}

/// Where a [`GanttChart`]'s plot lies, in pixels, and its time scale.
#[derive(Debug, Clone, Copy)]
struct Layout {
    /// Rows (at least 1).
    n: usize,
    row_h: f64,
    left: f64,
    right: f64,
    top: f64,
    bottom: f64,
    /// The time axis's end.
    x_max: f64,
    x: Scale,
}

/// The legend's lines under the axis.
fn legend_svg(out: &mut String, legend: &[Vec<(f64, &Series)>], bottom: f64) {
    for (k, line) in legend.iter().enumerate() {
        let y = bottom + 58.0 + 18.0 * k as f64;
        for (x, s) in line {
            let _ = write!(
                out,
                "<g class=\"legend\"><rect x=\"{}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{c}\" \
                 fill-opacity=\"0.55\" stroke=\"{c}\"/><text x=\"{}\" y=\"{}\" fill=\"#222\">{}</text></g>",
                px(16.0 + x),
                px(y - 9.0),
                px(30.0 + x),
                px(y),
                esc(&s.name),
                c = esc(&s.colour),
            );
        }
    }
}

/// The legend's entries laid out in lines of at most `width` pixels: each
/// entry with its x offset.
fn legend_lines(series: &[Series], width: f64) -> Vec<Vec<(f64, &Series)>> {
    let mut lines: Vec<Vec<(f64, &Series)>> = Vec::new();
    let mut x = 0.0;
    for s in series {
        let w = 14.0 + s.name.chars().count() as f64 * CHAR_W + 16.0;
        if lines.is_empty() || (x + w > width && x > 0.0) {
            lines.push(Vec::new());
            x = 0.0;
        }
        lines.last_mut().expect("a line was pushed").push((x, s));
        x += w;
    }
    lines
}
