//! `schedlab report`: its arguments turned into the plain
//! [`crate::report::RunOptions`] that [`crate::report::run`] carries out.

use anyhow::Result;
use clap::Args;
use std::path::PathBuf;

use crate::report::window::{TimeWindow, parse_window};
use crate::report::{self, Format, Metric, Options, RunOptions, destination};
use crate::store::RunFactor;

/// Arguments of `schedlab report`.
#[derive(Debug, Clone, Args)]
#[command(
    after_help = "Output: HTML is written to report.html unless -o says otherwise; Markdown and JSON go to \
                        standard output unless -o names a file (\"-o -\" always means standard output). Without \
                        --format, the format follows the -o extension (.md, .json, else HTML).\n\n\
                        Examples:\n  schedlab report --db results.db -o report.html\n  \
                        schedlab report --db results.db --format md\n  \
                        schedlab report --db results.db --format json > summary.json\n  \
                        schedlab report --db results.db --campaign 3 --metric wall,nivcsw\n  \
                        schedlab report --db measured.db --timeline-run 4 --model-timeline simulated.db\n  \
                        schedlab report --db fleet.db --by host --format md"
)]
pub(super) struct ReportArgs {
    /// The SQLite database.
    #[arg(long, default_value = "schedlab.db", env = "SCHEDLAB_DB")]
    db: PathBuf,
    /// Campaign to report on (default: the latest; `schedlab campaigns` lists them).
    #[arg(long)]
    campaign: Option<i64>,
    /// Output format (default: from the -o extension, else html).
    #[arg(long, value_enum)]
    format: Option<Format>,
    /// Output file, or "-" for standard output (default: report.html for HTML, standard output otherwise).
    #[arg(long, short)]
    output: Option<PathBuf>,
    /// Only these metrics, comma-separated (default: all).
    #[arg(long, value_enum, value_delimiter = ',', value_name = "METRIC,...")]
    metric: Vec<Metric>,
    /// Base seed of the bootstrap intervals (recorded in the report).
    #[arg(long, default_value_t = 1, value_name = "N")]
    bootstrap_seed: u64,
    /// Most bootstrap resamples per interval (fewer for very large conditions; recorded).
    #[arg(long, default_value_t = 2000, value_name = "N", value_parser = clap::value_parser!(u64).range(100..=1_000_000))]
    resamples: u64,
    /// The WRR run whose slices the Gantt chart shows (default: the first ok WRR run).
    #[arg(long, value_name = "RUN_ID")]
    gantt_run: Option<i64>,
    /// The traced run whose per-CPU timeline the Trace section draws (default: the first usable traced run).
    #[arg(long, value_name = "RUN_ID")]
    timeline_run: Option<i64>,
    /// The part of that run's trace drawn, from its start: FROM..TO with units (default: 0s..250ms).
    #[arg(long, value_name = "FROM..TO", value_parser = parse_window)]
    window: Option<TimeWindow>,
    /// A database from `schedlab simulate` of the same spec: the model's predicted timeline of the timeline
    /// run's condition and repetition is drawn under it, aligned at the workers' release.
    #[arg(long, value_name = "SIMULATED_DB")]
    model_timeline: Option<PathBuf>,
    /// One spec run on many machines: report every campaign of the
    /// campaign's spec (from `schedlab merge`), with the host or the
    /// kernel release as a factor.
    #[arg(long, value_enum)]
    by: Option<RunFactor>,
}

/// Every metric when none is named.
pub(super) fn metrics_or_all(asked: &[Metric]) -> Vec<Metric> {
    if asked.is_empty() {
        Metric::ALL.to_vec()
    } else {
        asked.to_vec()
    }
}

impl ReportArgs {
    /// The library's options: format from --format or the -o extension,
    /// destination from -o, every metric when none is named.
    fn options(&self) -> RunOptions {
        let format = Format::resolve(self.format, self.output.as_deref());
        RunOptions {
            db: self.db.clone(),
            format,
            destination: destination(self.output.as_deref(), format),
            analysis: Options {
                campaign: self.campaign,
                metrics: metrics_or_all(&self.metric),
                bootstrap_seed: self.bootstrap_seed,
                resamples: self.resamples as usize,
                gantt_run: self.gantt_run,
                timeline_run: self.timeline_run,
                timeline_window: self.window,
                model_timeline: self.model_timeline.clone(),
                by: self.by,
                machine: None,
            },
        }
    }
}

pub(super) fn run(a: ReportArgs) -> Result<i32> {
    report::run(a.options())
}

#[cfg(test)]
mod tests {
    use super::super::{Cli, Command};
    use super::*;
    use clap::Parser;

    fn parse(args: &[&str]) -> RunOptions {
        let cli = Cli::try_parse_from(args).unwrap();
        let Command::Report(a) = cli.command else {
            panic!("not report")
        };
        a.options()
    }

    #[test]
    fn report_arguments_become_plain_options() {
        let o = parse(&[
            "schedlab",
            "report",
            "--db",
            "x.db",
            "-o",
            "r.MD",
            "--metric",
            "wall,makespan",
        ]);
        assert_eq!(o.format, Format::Md);
        assert_eq!(o.destination, Some(PathBuf::from("r.MD")));
        assert_eq!(o.analysis.metrics, [Metric::Wall, Metric::Makespan]);
        assert_eq!(o.analysis.resamples, 2000);
        assert_eq!(o.analysis.by, None);
        let o = parse(&["schedlab", "report", "--db", "x.db", "-o", "-"]);
        assert_eq!((o.format, o.destination), (Format::Html, None));
        assert_eq!(o.analysis.metrics, Metric::ALL);
        let o = parse(&["schedlab", "report", "--by", "kernel", "--format", "json"]);
        assert_eq!(
            (o.format, o.analysis.by),
            (Format::Json, Some(RunFactor::Kernel))
        );
        assert_eq!(o.analysis.model_timeline, None);
        let o = parse(&[
            "schedlab",
            "report",
            "--timeline-run",
            "4",
            "--model-timeline",
            "sim.db",
        ]);
        assert_eq!(o.analysis.timeline_run, Some(4));
        assert_eq!(o.analysis.model_timeline, Some(PathBuf::from("sim.db")));
    }

    #[test]
    fn an_unknown_metric_is_refused_with_the_names() {
        let err = Cli::try_parse_from(["schedlab", "report", "--metric", "wal"])
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("--metric"), "{err}");
        assert!(err.contains("nivcsw"), "{err}");
    }
}
