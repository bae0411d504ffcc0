//! Report sections. Each section renders itself to HTML, Markdown and JSON
//! from the analysed campaign; a report is a list of them, one file each.
//!
//! To add a section: implement [`Section`] in a file of its own — ask in
//! [`Section::needs`] for the stored details of runs it shows beyond the
//! [`Analysis`] and compute from them in [`Section::prepare`] (the report
//! reads them through the store: sections never do), say in
//! [`Section::applies`] whether the campaign has anything for it, return
//! its body as [`Block`]s — and add it to [`sections_for`]. Its `id` is the
//! HTML anchor and the JSON key.

use anyhow::Result;
use serde_json::Value;

use super::analyse::{Analysis, Options, Settings};
use super::blocks::Block;
pub use super::blocks::Table;

mod charts;
mod comparisons;
mod conditions;
pub mod details;
mod environment;
mod ext_schedulers;
mod failures;
mod fairness;
mod first_screen;
mod latency;
mod matmul;
mod method;
mod model;
mod outliers;
mod replay;
mod rt_bandwidth;
mod scaling;
mod summary;
mod trace;
pub mod weights;

pub use charts::ChartsSection;
pub use comparisons::ComparisonsSection;
pub use conditions::ConditionsSection;
pub use details::{Needs, RunDetails};
pub use environment::EnvironmentSection;
pub use ext_schedulers::ExtSchedulersSection;
pub use failures::FailuresSection;
pub use fairness::FairnessSection;
pub use first_screen::{FirstScreenSection, TRACE_HINT};
pub use latency::LatencySection;
pub use matmul::MatmulSection;
pub use method::MethodSection;
pub use model::{ModelSection, others_cell};
pub use outliers::OutliersSection;
pub use replay::ReplaySection;
pub use rt_bandwidth::RtBandwidthSection;
pub use scaling::ScalingSection;
pub use summary::{SummarySection, notes};
pub use trace::TraceSection;
pub use weights::WeightsSection;

/// One part of a report.
pub trait Section {
    /// Stable identifier: the HTML anchor and the JSON key.
    fn id(&self) -> &'static str;
    /// Heading.
    fn title(&self) -> &'static str;
    /// The runs whose stored details the section shows beyond the
    /// analysed campaign (none by default).
    fn needs(&self, _a: &Analysis) -> Needs {
        Needs::default()
    }
    /// Compute what the section shows beyond the analysed campaign from
    /// the details it asked for in [`Section::needs`].
    fn prepare(&mut self, _a: &Analysis, _details: RunDetails) -> Result<()> {
        Ok(())
    }
    /// Whether the section is the report's first screen: in HTML above the
    /// table of contents (and not listed in it).
    fn lead(&self) -> bool {
        false
    }
    /// Whether the campaign has anything for this section.
    fn applies(&self, _a: &Analysis) -> bool {
        true
    }
    /// The body (without the heading) as format-neutral blocks, which
    /// [`Section::html`] and [`Section::markdown`] render (a section
    /// overrides those two only to skip work, as charts for Markdown).
    fn blocks(&self, _a: &Analysis) -> Vec<Block> {
        Vec::new()
    }
    /// HTML body (without the heading); empty leaves the section out.
    fn html(&self, a: &Analysis) -> String {
        super::blocks::html(&self.blocks(a))
    }
    /// Markdown body (without the heading); empty leaves the section out.
    fn markdown(&self, a: &Analysis) -> String {
        super::blocks::markdown(&self.blocks(a))
    }
    /// JSON value under the key [`Section::id`]; None leaves it out.
    fn json(&self, a: &Analysis) -> Option<Value>;
}

/// The sections of a report with default options, in order.
pub fn default_sections() -> Vec<Box<dyn Section>> {
    sections_for(&Options::default())
}

/// The sections of a report, in order, configured by the options (e.g. the
/// run whose WRR slices are drawn).
pub fn sections_for(opts: &Options) -> Vec<Box<dyn Section>> {
    vec![
        Box::new(FirstScreenSection::default()),
        Box::new(SummarySection),
        Box::new(ChartsSection),
        Box::new(WeightsSection::new(opts.gantt_run)),
        Box::new(RtBandwidthSection::default()),
        Box::new(MatmulSection::default()),
        Box::new(LatencySection::default()),
        Box::new(TraceSection::with_model(
            opts.timeline_run,
            opts.timeline_window,
            opts.model_timeline.clone(),
        )),
        Box::new(ExtSchedulersSection::default()),
        Box::new(ModelSection::default()),
        Box::new(ReplaySection::default()),
        Box::new(ComparisonsSection),
        Box::new(ScalingSection),
        Box::new(FairnessSection),
        Box::new(OutliersSection),
        Box::new(FailuresSection),
        Box::new(EnvironmentSection),
        Box::new(ConditionsSection),
        Box::new(MethodSection),
    ]
}

/// Most rows of long listings (outliers, failed runs) in HTML and Markdown;
/// the JSON always has all of them.
pub const MAX_LISTED: usize = 200;

/// "1 run", "3 runs" ([`crate::units::count`]).
pub(crate) fn plural(n: usize, one: &str, many: &str) -> String {
    crate::units::count(n as u64, one, many)
}

/// The line under a listing cut at [`MAX_LISTED`] rows.
fn more_line(total: usize) -> Option<String> {
    (total > MAX_LISTED).then(|| {
        format!(
            "{} more are not listed here; the JSON report (--format json) has all of them.",
            total - MAX_LISTED
        )
    })
}

/// A mean over runs with its spread and 95 % CI, for the special sections'
/// tables and charts.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Estimate {
    pub n: usize,
    pub mean: f64,
    /// Sample standard deviation (0 for one value).
    pub sd: f64,
    /// Standard error of the mean.
    pub se: f64,
    pub min: f64,
    pub max: f64,
    /// 95 % CI of the mean (None below 2 values).
    pub ci: Option<(f64, f64)>,
    /// "t" or "bootstrap".
    pub ci_method: Option<&'static str>,
}

impl Estimate {
    /// Mean and CI of `values` (see [`super::analyse::mean_interval`]);
    /// None when there is no finite value.
    pub fn of(values: &[f64], label: &str, settings: &Settings) -> Option<Estimate> {
        let s = crate::stats::summarize(values)?;
        let ci = super::analyse::mean_interval(values, label, settings);
        Some(Estimate {
            n: s.n,
            mean: s.mean,
            sd: s.sd,
            se: s.se,
            min: s.min,
            max: s.max,
            ci: ci.as_ref().map(|i| (i.lo, i.hi)),
            ci_method: ci.map(|i| i.method.name()),
        })
    }

    /// "35.2 (34.1–36.3)" with `f` formatting each number.
    pub fn text(&self, f: impl Fn(f64) -> String) -> String {
        match self.ci {
            Some((lo, hi)) => format!("{} ({}–{})", f(self.mean), f(lo), f(hi)),
            None => f(self.mean),
        }
    }

    /// "mean 35.2 (95% CI 34.1–36.3, t), n = 4, sd 0.8, min 34.4, max 36.1",
    /// for tooltips.
    pub fn tooltip(&self, unit: &str) -> String {
        let u = |v: f64| super::fmt::with_unit(v, unit);
        format!(
            "mean {}{}, n = {}, sd {}, min {}, max {}",
            u(self.mean),
            self.ci.map_or_else(String::new, |(lo, hi)| format!(
                " (95% CI {}–{}, {})",
                super::fmt::num(lo),
                super::fmt::num(hi),
                self.ci_method.unwrap_or("")
            )),
            self.n,
            super::fmt::num(self.sd),
            super::fmt::num(self.min),
            super::fmt::num(self.max)
        )
    }
}

/// The index of the analysis group a run belongs to.
fn group_of(a: &Analysis, r: &crate::store::ReportRun) -> Option<usize> {
    a.groups.iter().position(|g| {
        g.key.workload == r.workload
            && g.key.processes == r.processes
            && g.key.priority_mode == r.priority_mode
            && g.key.cpus == r.cpus
            && g.key.rt_runtime_us == r.rt_runtime_us
            && g.key.slice_us == r.slice_us
            && g.key.ext_scheduler == r.ext_scheduler
            && g.key.machine == r.machine
            && g.key.by == r.by
    })
}

/// The colour of a policy as every chart of the report uses it.
fn policy_colour(a: &Analysis, policy: &str) -> String {
    let i = a
        .factors
        .policies
        .iter()
        .position(|p| p == policy)
        .unwrap_or(0);
    super::charts::policy_colour(policy, i).to_string()
}

/// A chart id from parts: letters, digits, '-' and '_' only.
fn chart_id(parts: &[&str]) -> String {
    parts
        .join("-")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}
