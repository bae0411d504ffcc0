//! A small SVG chart toolkit for the HTML report: nice axis ticks, linear
//! and log scales, grouped bars with confidence whiskers, strip/box plots of
//! per-run values, lines, scatter plots and legends. Every mark carries a
//! `<title>` with its exact values (a tooltip in any browser) and every chart
//! a stable class and `data-*` attributes so tests and scripts can find it.
//!
//! Colours are the Okabe–Ito palette (distinguishable with the common forms
//! of colour blindness), without its yellow, which is unreadable on white.

use std::fmt::Write;

use super::fmt::{esc, tick};

/// Okabe–Ito colours, in the order used for unnamed series.
pub const PALETTE: [&str; 7] = [
    "#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000",
];
/// Marks that are flagged (outliers).
pub const FLAG: &str = "#C00000";
const AXIS: &str = "#444";
const GRID: &str = "#e3e3e3";
const WHISKER: &str = "#222";
const FONT: &str = "system-ui, -apple-system, 'Segoe UI', Roboto, 'DejaVu Sans', Arial, sans-serif";
/// Rough width of a character of the 11 px chart font, for layout.
const CHAR_W: f64 = 6.2;

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

/// Axis ticks: `values` are multiples of `step` covering [lo, hi].
#[derive(Debug, Clone, PartialEq)]
pub struct Ticks {
    pub lo: f64,
    pub hi: f64,
    pub step: f64,
    pub values: Vec<f64>,
}

/// The "nice" number (1, 2, 5 × 10^k) nearest to `x` (`round`) or not below
/// it (Heckbert, Graphics Gems 1990).
fn nice_num(x: f64, round: bool) -> f64 {
    let exp = x.log10().floor();
    let f = x / 10f64.powf(exp);
    let nf = if round {
        if f < 1.5 {
            1.0
        } else if f < 3.0 {
            2.0
        } else if f < 7.0 {
            5.0
        } else {
            10.0
        }
    } else if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    };
    nf * 10f64.powf(exp)
}

/// Nice ticks covering [lo, hi] with about `target` intervals. A degenerate
/// range (lo == hi) is widened around the value; non-finite input gives
/// [0, 1].
pub fn nice_ticks(lo: f64, hi: f64, target: usize) -> Ticks {
    let (mut lo, mut hi) = if lo.is_finite() && hi.is_finite() {
        (lo.min(hi), lo.max(hi))
    } else {
        (0.0, 1.0)
    };
    if lo == hi {
        let d = if lo == 0.0 { 1.0 } else { lo.abs() * 0.1 };
        if lo >= 0.0 && lo - d < 0.0 {
            lo = 0.0;
        } else {
            lo -= d;
        }
        hi += d;
    }
    let range = nice_num(hi - lo, false);
    let step = nice_num(range / target.max(1) as f64, true);
    let t_lo = (lo / step).floor() * step;
    let t_hi = (hi / step).ceil() * step;
    let count = ((t_hi - t_lo) / step).round() as usize;
    // Snap values like 0.6000000000000001 to the decimals of the step.
    let decimals = (1 - step.log10().floor() as i32).clamp(0, 15);
    let snap = 10f64.powi(decimals);
    let values = (0..=count)
        .map(|i| ((t_lo + i as f64 * step) * snap).round() / snap)
        .collect();
    Ticks {
        lo: t_lo,
        hi: t_hi,
        step,
        values,
    }
}

/// Ticks for a log axis over [lo, hi] (both > 0): 1-2-5 per decade when the
/// range spans a decade or more, else nice linear ticks inside the range.
pub fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    if !(lo > 0.0 && hi >= lo && hi.is_finite()) {
        return Vec::new();
    }
    if hi / lo < 10.0 {
        let t = nice_ticks(lo, hi, 4);
        let mut v: Vec<f64> = t
            .values
            .into_iter()
            .filter(|&x| x >= lo * 0.999 && x <= hi * 1.001 && x > 0.0)
            .collect();
        if v.len() < 2 {
            v = vec![lo, hi];
        }
        return v;
    }
    let mut out = Vec::new();
    let mut e = lo.log10().floor() as i32;
    let mults: &[f64] = if hi / lo > 1e4 {
        &[1.0]
    } else {
        &[1.0, 2.0, 5.0]
    };
    while 10f64.powi(e) <= hi * 1.001 {
        for m in mults {
            let v = m * 10f64.powi(e);
            if v >= lo * 0.999 && v <= hi * 1.001 {
                out.push(v);
            }
        }
        e += 1;
    }
    out
}

/// A map from data values to pixels, linear or logarithmic.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scale {
    pub d0: f64,
    pub d1: f64,
    pub r0: f64,
    pub r1: f64,
    pub log: bool,
}

impl Scale {
    pub fn linear(d0: f64, d1: f64, r0: f64, r1: f64) -> Scale {
        Scale {
            d0,
            d1,
            r0,
            r1,
            log: false,
        }
    }

    pub fn log(d0: f64, d1: f64, r0: f64, r1: f64) -> Scale {
        Scale {
            d0,
            d1,
            r0,
            r1,
            log: true,
        }
    }

    /// Pixel position of `v` (a degenerate domain maps to the middle).
    pub fn map(&self, v: f64) -> f64 {
        let (a, b, x) = if self.log {
            (self.d0.ln(), self.d1.ln(), v.max(f64::MIN_POSITIVE).ln())
        } else {
            (self.d0, self.d1, v)
        };
        if b == a {
            return (self.r0 + self.r1) / 2.0;
        }
        self.r0 + (x - a) / (b - a) * (self.r1 - self.r0)
    }
}

/// What every chart has: where it is used and how it is labelled.
#[derive(Debug, Clone, PartialEq)]
pub struct Meta {
    /// The chart's kind, also its CSS class: "bars", "spread", "scaling",
    /// "fairness", "shares"; the special sections' "weights-work",
    /// "weights-time", "weights-error", "gantt", "rt-throughput", "rt-hog",
    /// "matmul-mflops", "matmul-average".
    pub kind: &'static str,
    pub id: String,
    /// `data-*` attributes (metric, workload, …), in order.
    pub data: Vec<(&'static str, String)>,
    pub title: String,
    pub y_label: String,
    pub x_label: String,
}

/// A named colour in a legend.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub name: String,
    pub colour: String,
}

const W: f64 = 600.0;
const LEFT: f64 = 66.0;
const RIGHT: f64 = 16.0;

/// Format a pixel coordinate compactly.
fn px(v: f64) -> String {
    let s = format!("{v:.1}");
    s.strip_suffix(".0").map(str::to_string).unwrap_or(s)
}

/// Text shortened to fit `width` pixels, with an ellipsis.
fn fit(text: &str, width: f64) -> String {
    let max = (width / CHAR_W).floor().max(1.0) as usize;
    if text.chars().count() <= max {
        text.to_string()
    } else {
        let mut s: String = text.chars().take(max.saturating_sub(1)).collect();
        s.push('…');
        s
    }
}

/// Rows of a legend laid out left to right, wrapping at the chart width.
fn legend_rows(series: &[Series]) -> Vec<Vec<(f64, &Series)>> {
    let mut rows: Vec<Vec<(f64, &Series)>> = vec![Vec::new()];
    let mut x = LEFT;
    for s in series {
        let w = 18.0 + s.name.chars().count() as f64 * CHAR_W + 16.0;
        if x + w > W - RIGHT && !rows.last().is_some_and(|r| r.is_empty()) {
            rows.push(Vec::new());
            x = LEFT;
        }
        rows.last_mut().expect("a row").push((x, s));
        x += w;
    }
    rows
}

/// The opening of a chart: root element, title, legend. Returns the y where
/// the plot area may start.
fn open(out: &mut String, meta: &Meta, height: f64, legend: &[Series]) -> f64 {
    open_with(out, meta, height, legend, &[])
}

/// [`open`] with the legend entries of lines: entry i is drawn as a line
/// sample, dashed when `dashed[i]` (swatches when `dashed` is empty).
fn open_with(
    out: &mut String,
    meta: &Meta,
    height: f64,
    legend: &[Series],
    dashed: &[bool],
) -> f64 {
    let data: String = meta
        .data
        .iter()
        .map(|(k, v)| format!(" data-{k}=\"{}\"", esc(v)))
        .collect();
    let _ = write!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart {kind}\" id=\"{id}\" data-kind=\"{kind}\"{data} \
         viewBox=\"0 0 {w} {h}\" width=\"{w}\" height=\"{h}\" role=\"img\" aria-label=\"{title}\" \
         font-family=\"{FONT}\" font-size=\"11\">",
        kind = meta.kind,
        id = esc(&meta.id),
        w = px(W),
        h = px(height),
        title = esc(&meta.title),
    );
    let _ = write!(
        out,
        "<rect x=\"0\" y=\"0\" width=\"{}\" height=\"{}\" fill=\"#fff\"/>",
        px(W),
        px(height)
    );
    let _ = write!(
        out,
        "<text x=\"{}\" y=\"18\" font-size=\"13\" font-weight=\"600\" fill=\"#111\">{}</text>",
        px(LEFT - 50.0),
        esc(&fit(&meta.title, W - 20.0))
    );
    let mut y = 30.0;
    if !legend.is_empty() {
        let mut k = 0;
        for row in legend_rows(legend) {
            for (x, s) in row {
                let line = dashed.get(k).copied();
                k += 1;
                if let Some(d) = line {
                    let _ = write!(
                        out,
                        "<g class=\"legend\"><path d=\"M{} {}h14\" stroke=\"{}\" stroke-width=\"2\"{}/>\
                         <text x=\"{}\" y=\"{}\" fill=\"#222\">{}</text></g>",
                        px(x - 1.0),
                        px(y + 6.0),
                        s.colour,
                        if d { " stroke-dasharray=\"4 2\"" } else { "" },
                        px(x + 17.0),
                        px(y + 10.0),
                        esc(&s.name)
                    );
                    continue;
                }
                let _ = write!(
                    out,
                    "<g class=\"legend\"><rect x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" rx=\"2\" fill=\"{}\"/>\
                     <text x=\"{}\" y=\"{}\" fill=\"#222\">{}</text></g>",
                    px(x),
                    px(y),
                    s.colour,
                    px(x + 17.0),
                    px(y + 10.0),
                    esc(&s.name)
                );
            }
            y += 17.0;
        }
    }
    // Room for the y-axis label, written above the axis.
    y + 26.0
}

/// The step that tick labels need to tell `ticks` apart: `step` on a
/// linear axis, the smallest gap between ticks on a log axis.
fn label_step(scale: &Scale, ticks: &[f64], step: f64) -> f64 {
    if !scale.log && step > 0.0 {
        return step;
    }
    ticks
        .windows(2)
        .map(|w| (w[1] - w[0]).abs())
        .filter(|d| *d > 0.0)
        .fold(f64::INFINITY, f64::min)
}

/// Horizontal grid lines, y tick labels and the rotated y-axis label.
fn y_axis(out: &mut String, scale: &Scale, ticks: &[f64], step: f64, label: &str) {
    let ls = label_step(scale, ticks, step);
    for &t in ticks {
        let y = scale.map(t);
        let _ = write!(
            out,
            "<line x1=\"{}\" x2=\"{}\" y1=\"{y}\" y2=\"{y}\" stroke=\"{GRID}\"/>\
             <text x=\"{}\" y=\"{}\" text-anchor=\"end\" fill=\"{AXIS}\">{}</text>",
            px(LEFT),
            px(W - RIGHT),
            px(LEFT - 6.0),
            px(y + 3.5),
            esc(&tick(
                t,
                if ls.is_finite() {
                    ls.min(t.abs().max(ls * 1e-3))
                } else {
                    t
                }
            )),
            y = px(y),
        );
    }
    let (top, bottom) = (scale.r1.min(scale.r0), scale.r1.max(scale.r0));
    // The axis label sits above the axis, horizontal, so long tick labels
    // never run into it.
    let _ = write!(
        out,
        "<text x=\"8\" y=\"{}\" fill=\"#222\" class=\"axis-label\">{}</text>\
         <line x1=\"{l}\" x2=\"{l}\" y1=\"{}\" y2=\"{}\" stroke=\"{AXIS}\"/>",
        px(top - 12.0),
        esc(&fit(label, W - 20.0)),
        px(top),
        px(bottom),
        l = px(LEFT),
    );
}

/// The x-axis line at `y`.
fn x_axis_line(out: &mut String, y: f64) {
    let _ = write!(
        out,
        "<line x1=\"{}\" x2=\"{}\" y1=\"{y}\" y2=\"{y}\" stroke=\"{AXIS}\"/>",
        px(LEFT),
        px(W - RIGHT),
        y = px(y)
    );
}

/// Category labels under the x axis (one or more lines each) and the axis
/// label. `centres` are the x positions, `width` the room each label has.
fn category_labels(
    out: &mut String,
    labels: &[Vec<String>],
    centres: &[f64],
    width: f64,
    y0: f64,
    x_label: &str,
) -> f64 {
    let lines = labels.iter().map(Vec::len).max().unwrap_or(0);
    for (label, &x) in labels.iter().zip(centres) {
        for (i, line) in label.iter().enumerate() {
            let _ = write!(
                out,
                "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"{AXIS}\">{}</text>",
                px(x),
                px(y0 + 15.0 + 13.0 * i as f64),
                esc(&fit(line, width - 4.0))
            );
        }
    }
    let y = y0 + 15.0 + 13.0 * lines as f64 + 6.0;
    if !x_label.is_empty() {
        let _ = write!(
            out,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#222\">{}</text>",
            px((LEFT + W - RIGHT) / 2.0),
            px(y),
            esc(x_label)
        );
    }
    y
}

/// Height of the area under the plot for `lines` lines of category labels
/// and the axis label.
fn bottom_room(lines: usize, x_label: &str) -> f64 {
    15.0 + 13.0 * lines as f64 + if x_label.is_empty() { 4.0 } else { 20.0 }
}

/// Open a chart whose x axis holds groups of categories, tall enough for
/// their label lines; returns the top and the bottom of the plot.
fn open_grouped(
    out: &mut String,
    meta: &Meta,
    groups: &[Vec<String>],
    series: &[Series],
) -> (f64, f64) {
    let lines = groups.iter().map(Vec::len).max().unwrap_or(1);
    let height = 330.0 + 13.0 * lines.saturating_sub(1) as f64;
    let top = open(out, meta, height, series);
    (top, height - bottom_room(lines, &meta.x_label))
}

/// The width of each of `groups` groups across the plot.
fn group_width(groups: usize) -> f64 {
    (W - RIGHT - LEFT) / groups.max(1) as f64
}

/// The centre of group `g` of width `gw`.
fn group_centre(g: usize, gw: f64) -> f64 {
    LEFT + gw * (g as f64 + 0.5)
}

/// Close a chart opened with [`open_grouped`]: the x axis line at
/// `axis_y`, the group labels under `bottom`, the end of the SVG.
fn close_grouped(
    mut out: String,
    meta: &Meta,
    groups: &[Vec<String>],
    centres: &[f64],
    gw: f64,
    axis_y: f64,
    bottom: f64,
) -> String {
    x_axis_line(&mut out, axis_y);
    category_labels(&mut out, groups, centres, gw, bottom, &meta.x_label);
    out.push_str("</svg>");
    out
}

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
fn jitter(i: usize) -> f64 {
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
            super::fmt::num(sorted[0]),
            super::fmt::num(q1),
            super::fmt::num(med),
            super::fmt::num(q3),
            super::fmt::num(sorted[sorted.len() - 1])
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
fn point(out: &mut String, x: f64, y: f64, colour: &str, p: &Point) {
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

/// Domain of some values (finite ones), or None.
fn extent(vals: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    let (lo, hi) = vals
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
            (a.min(v), b.max(v))
        });
    lo.is_finite().then_some((lo, hi))
}

/// Axis from an extent: a scale and its ticks.
fn axis(lo: f64, hi: f64, log: bool, r0: f64, r1: f64, fixed: &[f64]) -> (Scale, Vec<f64>, f64) {
    if log && lo > 0.0 {
        let (lo, hi) = if hi / lo < 1.2 {
            (lo / 1.1, hi * 1.1)
        } else {
            (lo / 1.05, hi * 1.05)
        };
        let ticks = if fixed.is_empty() {
            log_ticks(lo, hi)
        } else {
            fixed.to_vec()
        };
        (Scale::log(lo, hi, r0, r1), ticks, 0.0)
    } else {
        let t = nice_ticks(lo.min(0.0), hi, 5);
        let ticks = if fixed.is_empty() {
            t.values.clone()
        } else {
            fixed.to_vec()
        };
        (Scale::linear(t.lo, t.hi, r0, r1), ticks, t.step)
    }
}

/// x tick labels and the axis label under a plot.
fn x_ticks_and_label(
    out: &mut String,
    x: &Scale,
    ticks: &[f64],
    step: f64,
    bottom: f64,
    label: &str,
) {
    let ls = label_step(x, ticks, step);
    for &t in ticks {
        let xp = x.map(t);
        let _ = write!(
            out,
            "<line x1=\"{xp}\" x2=\"{xp}\" y1=\"{b}\" y2=\"{b5}\" stroke=\"{AXIS}\"/>\
             <text x=\"{xp}\" y=\"{ty}\" text-anchor=\"middle\" fill=\"{AXIS}\">{}</text>",
            esc(&tick(
                t,
                if ls.is_finite() {
                    ls.min(t.abs().max(ls * 1e-3))
                } else {
                    t
                }
            )),
            xp = px(xp),
            b = px(bottom),
            b5 = px(bottom + 5.0),
            ty = px(bottom + 17.0),
        );
    }
    let _ = write!(
        out,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#222\">{}</text>",
        px((LEFT + W - RIGHT) / 2.0),
        px(bottom + 36.0),
        esc(label)
    );
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
}

/// Width of a [`GanttChart`].
const GANTT_W: f64 = 1200.0;

impl GanttChart {
    pub fn render(&self) -> String {
        let mut out = String::new();
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
        let bottom = top + plot_h;
        let height = bottom + 46.0;
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
        let x_max = if self.x_max > 0.0 && self.x_max.is_finite() {
            self.x_max
        } else {
            1.0
        };
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
        let x = Scale::linear(0.0, x_max, left, GANTT_W - right);
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
        // Row labels; every k-th when rows are too thin for all of them.
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
        let bar_h = (row_h * 0.72).max(3.0);
        let inner_h = (row_h * 0.22).clamp(1.5, 4.0);
        for b in &self.bars {
            if !(b.start.is_finite() && b.end.is_finite()) || b.start >= x_max || b.row >= n {
                continue;
            }
            let colour = self
                .rows
                .get(b.row)
                .map_or(PALETTE[0], |r| r.colour.as_str());
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
        out.push_str("</svg>");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> Meta {
        Meta {
            kind: "bars",
            id: "bars-wall-pi".into(),
            data: vec![("metric", "wall".into()), ("workload", "pi".into())],
            title: "pi: wall time".into(),
            y_label: "wall time (s)".into(),
            x_label: "processes".into(),
        }
    }

    #[test]
    fn nice_ticks_cover_the_range_with_round_steps() {
        let t = nice_ticks(0.0, 37.2, 5);
        assert_eq!(t.step, 10.0);
        assert_eq!(t.values, vec![0.0, 10.0, 20.0, 30.0, 40.0]);
        let t = nice_ticks(0.0, 0.93, 5);
        assert_eq!(t.step, 0.2);
        assert_eq!(t.values.last(), Some(&1.0));
        assert_eq!(t.values[3], 0.6); // snapped, not 0.6000000000000001
        let t = nice_ticks(34.1, 36.3, 5);
        assert_eq!((t.lo, t.hi, t.step), (34.0, 37.0, 1.0));
        let t = nice_ticks(-3.0, 12.0, 5);
        assert!(t.lo <= -3.0 && t.hi >= 12.0);
        assert!(t.values.contains(&0.0));
        // Degenerate and invalid ranges still give an axis.
        let t = nice_ticks(5.0, 5.0, 5);
        assert!(t.lo < 5.0 && t.hi > 5.0);
        let t = nice_ticks(0.0, 0.0, 5);
        assert_eq!((t.lo, t.hi), (0.0, 1.0));
        let t = nice_ticks(f64::NAN, 1.0, 5);
        assert_eq!((t.lo, t.hi), (0.0, 1.0));
        let t = nice_ticks(0.0, 1234567.0, 5);
        assert_eq!(t.step, 500_000.0);
        assert_eq!(t.values, vec![0.0, 500_000.0, 1_000_000.0, 1_500_000.0]);
    }

    #[test]
    fn log_ticks_per_decade() {
        assert_eq!(
            log_ticks(1.0, 100.0),
            vec![1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0]
        );
        assert_eq!(log_ticks(3.0, 9.0), vec![4.0, 6.0, 8.0]);
        assert_eq!(
            log_ticks(1.0, 1e6),
            vec![1.0, 10.0, 100.0, 1e3, 1e4, 1e5, 1e6]
        );
        assert!(log_ticks(0.0, 1.0).is_empty());
    }

    #[test]
    fn log_axis_labels_tell_close_ticks_apart() {
        let s = Scale::log(0.394, 0.4, 300.0, 100.0);
        let ticks = log_ticks(0.394, 0.4);
        let mut out = String::new();
        y_axis(&mut out, &s, &ticks, 0.0, "y");
        let labels: Vec<&str> = out
            .split("text-anchor=\"end\" fill=\"#444\">")
            .skip(1)
            .map(|t| &t[..t.find('<').unwrap()])
            .collect();
        let mut dedup = labels.clone();
        dedup.dedup();
        assert_eq!(labels, dedup, "{labels:?}");
        assert!(labels.len() >= 2, "{labels:?}");
    }

    #[test]
    fn scales_map_domains_to_pixels() {
        let s = Scale::linear(0.0, 10.0, 300.0, 100.0);
        assert_eq!(s.map(0.0), 300.0);
        assert_eq!(s.map(10.0), 100.0);
        assert_eq!(s.map(5.0), 200.0);
        let l = Scale::log(1.0, 100.0, 0.0, 200.0);
        assert!((l.map(10.0) - 100.0).abs() < 1e-9);
        let d = Scale::linear(3.0, 3.0, 0.0, 10.0);
        assert_eq!(d.map(3.0), 5.0);
    }

    #[test]
    fn bar_chart_has_a_mark_with_a_tooltip_per_bar() {
        let bar = |v: f64| {
            Some(Bar {
                value: v,
                lo: Some(v * 0.9),
                hi: Some(v * 1.1),
                tooltip: format!("mean {v} <s>"),
            })
        };
        let c = BarChart {
            meta: meta(),
            groups: vec![vec!["2".into()], vec!["8".into()]],
            series: vec![
                Series {
                    name: "OTHER".into(),
                    colour: PALETTE[0].into(),
                },
                Series {
                    name: "FIFO".into(),
                    colour: PALETTE[3].into(),
                },
            ],
            bars: vec![vec![bar(1.0), bar(2.0)], vec![bar(4.0), None]],
            y_max: None,
        };
        let svg = c.render();
        assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart bars\""));
        assert!(svg.contains("data-metric=\"wall\" data-workload=\"pi\""));
        assert_eq!(svg.matches("<g class=\"mark\">").count(), 3);
        assert_eq!(svg.matches("<title>").count(), 3);
        assert!(svg.contains("mean 4 &lt;s&gt;"), "tooltips are escaped");
        assert!(svg.ends_with("</svg>"));
        assert!(svg.contains(">OTHER</text>") && svg.contains(">FIFO</text>"));
    }

    #[test]
    fn spread_chart_switches_to_boxes_for_many_points() {
        let pts = |n: usize| {
            (0..n)
                .map(|i| Point {
                    value: i as f64,
                    tooltip: format!("run {i}"),
                    flagged: i == 0,
                })
                .collect::<Vec<_>>()
        };
        let mut c = SpreadChart {
            meta: Meta {
                kind: "spread",
                ..meta()
            },
            groups: vec![vec!["2".into()]],
            series: vec![Series {
                name: "OTHER".into(),
                colour: PALETTE[0].into(),
            }],
            cells: vec![vec![pts(5)]],
            strip_max: 10,
        };
        let svg = c.render();
        assert_eq!(svg.matches("<circle").count(), 5);
        assert_eq!(svg.matches("class=\"mark flagged\"").count(), 1);
        c.cells = vec![vec![pts(100)]];
        let svg = c.render();
        assert_eq!(svg.matches("class=\"mark box\"").count(), 1);
        assert!(svg.matches("<circle").count() < 10);
    }

    #[test]
    fn line_and_scatter_charts_render() {
        let l = LineChart {
            meta: Meta {
                kind: "scaling",
                ..meta()
            },
            lines: vec![Line {
                series: Series {
                    name: "OTHER (slope 1.0)".into(),
                    colour: PALETTE[0].into(),
                },
                points: vec![
                    LinePoint {
                        x: 2.0,
                        y: 1.0,
                        lo: Some(0.9),
                        hi: Some(1.1),
                        tooltip: "2 processes".into(),
                    },
                    LinePoint {
                        x: 8.0,
                        y: 4.0,
                        lo: None,
                        hi: None,
                        tooltip: "8 processes".into(),
                    },
                ],
                dashed: false,
            }],
            x_log: true,
            y_log: true,
            x_ticks: vec![2.0, 8.0],
        };
        let svg = l.render();
        assert_eq!(svg.matches("<circle").count(), 2);
        assert!(svg.contains("<path d=\"M"));
        let s = ScatterChart {
            meta: Meta {
                kind: "shares",
                ..meta()
            },
            legend: vec![],
            points: vec![ScatterPoint {
                x: 0.2,
                y: 0.25,
                colour: PALETTE[0].into(),
                tooltip: "p0".into(),
            }],
            log: true,
            diagonal: true,
        };
        let svg = s.render();
        assert!(svg.contains("y = x"));
        assert_eq!(svg.matches("<circle").count(), 1);
    }

    #[test]
    fn gantt_draws_a_bar_and_a_cpu_mark_per_slice_in_the_window() {
        let g = GanttChart {
            meta: Meta {
                kind: "gantt",
                id: "gantt-1".into(),
                data: vec![("run", "1".into())],
                title: "slices".into(),
                y_label: String::new(),
                x_label: "s".into(),
            },
            rows: vec![
                GanttRow {
                    label: "task 0 (w 1)".into(),
                    colour: PALETTE[0].into(),
                },
                GanttRow {
                    label: "task 1 (w 4)".into(),
                    colour: PALETTE[1].into(),
                },
            ],
            bars: vec![
                GanttBar {
                    row: 0,
                    start: 0.0,
                    end: 0.01,
                    inner_end: Some(0.009),
                    tooltip: "slice 0".into(),
                },
                GanttBar {
                    row: 1,
                    start: 0.01,
                    end: 0.05,
                    inner_end: Some(0.05),
                    tooltip: "slice 1".into(),
                },
                GanttBar {
                    row: 0,
                    start: 5.0,
                    end: 5.01,
                    inner_end: None,
                    tooltip: "beyond the window".into(),
                },
            ],
            x_max: 0.1,
            note: "bars: wall time; dark: CPU".into(),
        };
        let svg = g.render();
        assert!(svg.contains("data-kind=\"gantt\" data-run=\"1\""));
        assert_eq!(svg.matches("<g class=\"mark\">").count(), 2);
        assert_eq!(svg.matches("class=\"inner\"").count(), 2);
        assert!(svg.contains(">task 1 (w 4)</text>"));
        assert!(!svg.contains("beyond the window"));
    }

    #[test]
    fn long_labels_are_shortened() {
        assert_eq!(fit("abc", 100.0), "abc");
        let f = fit("a very long label that cannot fit", 60.0);
        assert!(f.ends_with('…') && f.chars().count() <= 10, "{f}");
    }
}
