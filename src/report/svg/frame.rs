//! What every chart has around its marks: the root element, title and
//! legend, the axes with their ticks and labels, and the layout of groups
//! of categories.

use std::fmt::Write;

use super::scale::Scale;
use super::{AXIS, CHAR_W, FONT, GRID, LEFT, Meta, RIGHT, Series, W, fit, px};
use crate::report::fmt::{esc, tick};

/// Rows of a legend laid out left to right, wrapping at the chart width.
pub(super) fn legend_rows(series: &[Series]) -> Vec<Vec<(f64, &Series)>> {
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
pub(super) fn open(out: &mut String, meta: &Meta, height: f64, legend: &[Series]) -> f64 {
    open_with(out, meta, height, legend, &[])
}

/// [`open`] with the legend entries of lines: entry i is drawn as a line
/// sample, dashed when `dashed[i]` (swatches when `dashed` is empty).
pub(super) fn open_with(
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
pub(super) fn label_step(scale: &Scale, ticks: &[f64], step: f64) -> f64 {
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
pub(super) fn y_axis(out: &mut String, scale: &Scale, ticks: &[f64], step: f64, label: &str) {
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
pub(super) fn x_axis_line(out: &mut String, y: f64) {
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
pub(super) fn category_labels(
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
pub(super) fn bottom_room(lines: usize, x_label: &str) -> f64 {
    15.0 + 13.0 * lines as f64 + if x_label.is_empty() { 4.0 } else { 20.0 }
}

/// Open a chart whose x axis holds groups of categories, tall enough for
/// their label lines; returns the top and the bottom of the plot.
pub(super) fn open_grouped(
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
pub(super) fn group_width(groups: usize) -> f64 {
    (W - RIGHT - LEFT) / groups.max(1) as f64
}

/// The centre of group `g` of width `gw`.
pub(super) fn group_centre(g: usize, gw: f64) -> f64 {
    LEFT + gw * (g as f64 + 0.5)
}

/// Close a chart opened with [`open_grouped`]: the x axis line at
/// `axis_y`, the group labels under `bottom`, the end of the SVG.
pub(super) fn close_grouped(
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

/// x tick labels and the axis label under a plot.
pub(super) fn x_ticks_and_label(
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
