//! A small SVG chart toolkit for the HTML report: nice axis ticks, linear
//! and log scales, grouped bars with confidence whiskers, strip/box plots of
//! per-run values, lines, scatter plots and legends. Every mark carries a
//! `<title>` with its exact values (a tooltip in any browser) and every chart
//! a stable class and `data-*` attributes so tests and scripts can find it.
//!
//! The toolkit knows nothing of schedulers (the report's colours per policy
//! are in `report::charts`). Layout: `scale` (ticks, linear and log maps),
//! `frame` (root element, title, legend, axes) and one file per chart kind:
//! `bar`, `spread`, `line`, `scatter`, `gantt`, `forest`.
//!
//! Colours are the Okabe–Ito palette (distinguishable with the common forms
//! of colour blindness), without its yellow, which is unreadable on white.

mod bar;
mod forest;
mod frame;
mod gantt;
mod line;
pub mod scale;
mod scatter;
mod spread;
#[cfg(test)]
mod tests;

pub use bar::{Bar, BarChart};
pub use forest::{ForestChart, ForestRow};
pub use gantt::{GanttBar, GanttChart, GanttRow};
pub use line::{Line, LineChart, LinePoint};
pub use scale::{Scale, Ticks, log_ticks, nice_ticks};
pub use scatter::{ScatterChart, ScatterPoint};
pub use spread::{Point, SpreadChart};

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

/// What every chart has: where it is used and how it is labelled.
#[derive(Debug, Clone, PartialEq)]
pub struct Meta {
    /// The chart's kind, also its CSS class: "bars", "spread", "scaling",
    /// "fairness", "shares"; the special sections' "weights-work",
    /// "weights-time", "weights-error", "gantt", "rt-throughput", "rt-hog",
    /// "matmul-mflops", "matmul-average"; `compare`'s "compare-ratio" and
    /// "compare-forest".
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
