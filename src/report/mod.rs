//! `schedlab report`: which differences between policies are real, how
//! large, with what confidence — as one self-contained HTML file with
//! charts, as Markdown for the terminal and lab reports, or as JSON.
//!
//! Data flow: [`analyse`] reads a campaign from the [`Store`] (streaming its
//! process rows) and computes every statistic with [`crate::stats`]; a list
//! of [`Section`]s, given the stored details of the runs they ask for,
//! renders the [`Analysis`] to each format.

pub mod analyse;
pub mod blocks;
pub mod charts;
pub mod compare;
pub mod detectable;
pub mod fmt;
pub mod html;
pub mod metric;
pub mod rounds;
pub mod sections;
pub mod svg;
pub mod synth;
pub mod window;

use anyhow::{Context, Result};
use serde_json::{Value, json};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::store::Store;

pub use analyse::{Analysis, Options, analyse};
pub use metric::Metric;
pub use sections::{Section, default_sections, sections_for};

/// Output format of a report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// One self-contained HTML file with charts (no network, no scripts).
    Html,
    /// Markdown: findings and tables, for the terminal or a lab report.
    Md,
    /// JSON: every statistic, for scripts.
    Json,
}

impl Format {
    pub const ALL: [Format; 3] = [Format::Html, Format::Md, Format::Json];

    /// The name on the command line (`--format md`).
    pub fn name(self) -> &'static str {
        match self {
            Format::Html => "html",
            Format::Md => "md",
            Format::Json => "json",
        }
    }

    /// The format to write: `format` when given, else from the extension of
    /// `output` (.md or .markdown, .json), else HTML.
    pub fn resolve(format: Option<Format>, output: Option<&Path>) -> Format {
        if let Some(f) = format {
            return f;
        }
        let ext = output
            .and_then(Path::extension)
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase);
        match ext.as_deref() {
            Some("md" | "markdown") => Format::Md,
            Some("json") => Format::Json,
            _ => Format::Html,
        }
    }
}

/// What `schedlab report` does, from the command line's arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct RunOptions {
    /// The SQLite database.
    pub db: PathBuf,
    pub format: Format,
    /// Output file, or None for standard output.
    pub destination: Option<PathBuf>,
    pub analysis: Options,
}

/// Where to write a report in `format` given the -o argument: a file, or
/// None for standard output ("-", or no -o for Markdown and JSON; HTML goes
/// to report.html).
pub fn destination(output: Option<&Path>, format: Format) -> Option<PathBuf> {
    match output {
        Some(p) if p.as_os_str() == "-" => None,
        Some(p) => Some(p.to_path_buf()),
        None if format == Format::Html => Some(PathBuf::from("report.html")),
        None => None,
    }
}

/// An analysed campaign and the sections that render it.
pub struct Report {
    pub analysis: Analysis,
    sections: Vec<Box<dyn Section>>,
}

impl Report {
    /// Analyse a campaign and prepare the default sections.
    pub fn build(store: &Store, opts: &Options) -> Result<Report> {
        Report::with_sections(store, opts, sections_for(opts))
    }

    /// Analyse a campaign and prepare the given sections.
    pub fn with_sections(
        store: &Store,
        opts: &Options,
        mut sections: Vec<Box<dyn Section>>,
    ) -> Result<Report> {
        let analysis = analyse(store, opts)?;
        for s in &mut sections {
            sections::RunDetails::load(store, &s.needs(&analysis))
                .and_then(|details| s.prepare(&analysis, details))
                .with_context(|| format!("preparing report section {}", s.id()))?;
        }
        Ok(Report { analysis, sections })
    }

    fn active(&self) -> impl Iterator<Item = &dyn Section> {
        self.sections
            .iter()
            .map(|s| s.as_ref())
            .filter(|s| s.applies(&self.analysis))
    }

    /// "schedlab report: NAME (campaign N)", or with `--by` host:
    /// "schedlab report: NAME (campaigns 1, 4 by host: a, b)".
    pub fn title(&self) -> String {
        let a = &self.analysis;
        let c = &a.campaign;
        match &a.factors.by {
            Some(by) => format!(
                "schedlab report: {} (campaign{} {} by {}: {})",
                c.name,
                if c.campaigns.len() == 1 { "" } else { "s" },
                a.campaign_ids()
                    .iter()
                    .map(|i| i.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                by.factor.name(),
                by.levels.join(", ")
            ),
            None => format!("schedlab report: {} (campaign {})", c.name, c.id),
        }
    }

    pub fn html(&self) -> String {
        let a = &self.analysis;
        let mut body = String::new();
        let mut toc = Vec::new();
        for s in self.active() {
            let inner = s.html(a);
            if inner.is_empty() {
                continue;
            }
            toc.push((s.id().to_string(), s.title().to_string()));
            let _ = write!(
                body,
                "<section id=\"{}\">\n<h2>{}</h2>\n{inner}</section>\n",
                fmt::esc(s.id()),
                fmt::esc(s.title())
            );
        }
        let c = &a.campaign;
        html::page(
            &self.title(),
            &format!(
                "{} ok runs of {} planned · created {} · scale {}",
                a.counts.ok,
                c.planned_runs,
                fmt::utc(c.created_unix_ms),
                c.scale
            ),
            &toc,
            &body,
            &format!(
                "Generated by schedlab {} from campaign {} of the database. Open offline; hover over chart marks for \
                 exact values. `schedlab report --format json` gives every number.",
                env!("CARGO_PKG_VERSION"),
                c.id
            ),
        )
    }

    pub fn markdown(&self) -> String {
        let a = &self.analysis;
        let mut out = format!("# {}\n\n", self.title());
        for s in self.active() {
            let inner = s.markdown(a);
            if inner.is_empty() {
                continue;
            }
            let _ = write!(out, "## {}\n\n{}", s.title(), inner.trim_end());
            out.push_str("\n\n");
        }
        let trimmed = out.trim_end().len();
        out.truncate(trimmed);
        out.push('\n');
        // Names come from specs: no escape sequence reaches a terminal,
        // and no tag reaches a Markdown viewer as HTML.
        let out = crate::out::md_inert(&out).into_owned();
        match crate::out::esc_lines(&out) {
            std::borrow::Cow::Borrowed(_) => out,
            std::borrow::Cow::Owned(escaped) => escaped,
        }
    }

    pub fn json(&self) -> Value {
        let a = &self.analysis;
        let mut v = json!({
            "schedlab_report": 1,
            "schedlab_version": env!("CARGO_PKG_VERSION"),
            "campaign": a.campaign,
            "settings": a.settings,
        });
        for s in self.active() {
            if let Some(x) = s.json(a) {
                v[s.id()] = x;
            }
        }
        v
    }

    pub fn render(&self, format: Format) -> String {
        match format {
            Format::Html => self.html(),
            Format::Md => self.markdown(),
            Format::Json => {
                let mut s =
                    serde_json::to_string_pretty(&self.json()).expect("a report serialises");
                s.push('\n');
                s
            }
        }
    }
}

/// `schedlab report`: analyse a campaign and write the report. Returns the
/// process exit code.
pub fn run(opts: RunOptions) -> Result<i32> {
    let store = Store::open_existing(&opts.db)?;
    // Checked before the analysis: a refused -o costs nothing.
    let target = crate::output::target_of(opts.destination.as_deref())?;
    let report = Report::build(&store, &opts.analysis)?;
    let text = report.render(opts.format);
    crate::output::write_all(&target, text.as_bytes())?;
    if !target.is_stdout() {
        let a = &report.analysis;
        note!(
            "wrote {}: campaign {} “{}”, {} ok runs in {} conditions, {} of {} comparisons significant",
            target.shown(),
            a.campaign.id,
            crate::out::esc(&a.campaign.name),
            a.counts.ok,
            a.conditions.len(),
            a.count_verdict(analyse::Verdict::Different),
            a.comparisons
                .iter()
                .filter(|c| c.p_adjusted.is_some())
                .count()
        );
    }
    Ok(0)
}
