//! `schedlab compare`: its arguments turned into the plain
//! [`crate::compare::RunOptions`] that
//! [`crate::compare::run`] carries out.

use anyhow::Result;
use clap::Args;
use std::path::PathBuf;

use super::report::metrics_or_all;
use crate::compare::{self, CompareOptions, EnvField, RunOptions};
use crate::report::{Format, Metric, Options};

/// Arguments of `schedlab compare`.
#[derive(Debug, Clone, Args)]
#[command(
    after_help = "The baseline is --db (its latest campaign, or --campaign N); the candidate is --vs (its latest \
                  campaign, or --vs-campaign N), or --vs-campaign N of --db, or with --vs-machine another machine \
                  level of the baseline's campaign. Campaigns whose specs differ are \
                  refused (the differences listed) unless --force. HTML is written to compare.html unless -o says \
                  otherwise; Markdown and JSON go to standard output unless -o names a file.\n\n\
                  Examples:\n  schedlab compare --db base.db --vs cand.db\n  \
                  schedlab compare --db all.db --campaign 3 --vs-campaign 7 -o cmp.html\n  \
                  schedlab compare --db base.db --vs cand.db --format md --expect kernel\n  \
                  schedlab compare --db base.db --vs cand.db --format json > cmp.json\n  \
                  schedlab compare --db base.db --vs cand.db --margin 2% --fail-on regression\n  \
                  schedlab compare --db kernels.db --machine cfs --vs-machine eevdf --expect kernel"
)]
pub(super) struct CompareArgs {
    /// The baseline's database.
    #[arg(long, default_value = "schedlab.db", env = "SCHEDLAB_DB")]
    db: PathBuf,
    /// The baseline campaign (default: the latest of --db).
    #[arg(long, value_name = "N")]
    campaign: Option<i64>,
    /// The candidate's database (default: --db).
    #[arg(long, value_name = "CANDIDATE_DB")]
    vs: Option<PathBuf>,
    /// The candidate campaign (default: the latest of --vs).
    #[arg(long, value_name = "N")]
    vs_campaign: Option<i64>,
    /// Output format (default: from the -o extension, else html).
    #[arg(long, value_enum)]
    format: Option<Format>,
    /// Output file, or "-" for standard output (default: compare.html for HTML, standard output otherwise).
    #[arg(long, short)]
    output: Option<PathBuf>,
    /// Only these metrics, comma-separated (default: all).
    #[arg(long, value_enum, value_delimiter = ',', value_name = "METRIC,...")]
    metric: Vec<Metric>,
    /// Compare campaigns whose specs differ (the differences are listed first).
    #[arg(long)]
    force: bool,
    /// Environment fields meant to differ (e.g. kernel); any other difference is flagged.
    #[arg(long, value_enum, value_delimiter = ',', value_name = "FIELD,...")]
    expect: Vec<EnvField>,
    /// Base seed of the bootstrap intervals (recorded in the output).
    #[arg(long, default_value_t = 1, value_name = "N")]
    bootstrap_seed: u64,
    /// Most bootstrap resamples per interval (recorded).
    #[arg(long, default_value_t = 2000, value_name = "N", value_parser = clap::value_parser!(u64).range(100..=1_000_000))]
    resamples: u64,
    /// Equivalence margin (e.g. 2%): each row is equivalent within it, different, or neither shown (default: the spec's compare_margin_pct).
    #[arg(long, value_name = "PCT", allow_hyphen_values = true, value_parser = crate::compare::parse_margin_pct)]
    margin: Option<f64>,
    /// Only the baseline's runs of this machine level (matrix.machine).
    #[arg(long, value_name = "LEVEL")]
    machine: Option<String>,
    /// Only the candidate's runs of this machine level; without --vs or --vs-campaign the candidate is the baseline's campaign (two levels of one campaign, e.g. --machine cfs --vs-machine eevdf).
    #[arg(long, value_name = "LEVEL")]
    vs_machine: Option<String>,
    /// Exit with code 4 when a metric is worse beyond the margin with significance (CI use).
    #[arg(long, value_name = "WHAT", value_parser = ["regression"])]
    fail_on: Option<String>,
}

impl CompareArgs {
    /// The library's options.
    fn options(&self) -> RunOptions {
        let format = Format::resolve(self.format, self.output.as_deref());
        let destination = match self.output.as_deref() {
            Some(p) if p.as_os_str() == "-" => None,
            Some(p) => Some(p.to_path_buf()),
            None if format == Format::Html => Some(PathBuf::from("compare.html")),
            None => None,
        };
        RunOptions {
            db: self.db.clone(),
            campaign: self.campaign,
            vs: self.vs.clone(),
            vs_campaign: self.vs_campaign,
            format,
            destination,
            compare: CompareOptions {
                analysis: Options {
                    campaign: None,
                    metrics: metrics_or_all(&self.metric),
                    bootstrap_seed: self.bootstrap_seed,
                    resamples: self.resamples as usize,
                    gantt_run: None,
                    by: None,
                    timeline_run: None,
                    timeline_window: None,
                    model_timeline: None,
                    machine: None,
                },
                force: self.force,
                expect: self.expect.clone(),
                margin_pct: self.margin,
            },
            fail_on_regression: self.fail_on.is_some(),
            machine: self.machine.clone(),
            vs_machine: self.vs_machine.clone(),
        }
    }
}

pub(super) fn run(a: CompareArgs) -> Result<i32> {
    compare::run(a.options())
}

#[cfg(test)]
mod tests {
    use super::super::{Cli, Command};
    use super::*;
    use clap::Parser;

    fn parse(args: &[&str]) -> RunOptions {
        let cli = Cli::try_parse_from(args).unwrap();
        let Command::Compare(a) = cli.command else {
            panic!("not compare")
        };
        a.options()
    }

    #[test]
    fn compare_arguments_become_plain_options() {
        let o = parse(&[
            "schedlab",
            "compare",
            "--db",
            "a.db",
            "--vs",
            "b.db",
            "--metric",
            "wall,nivcsw",
            "--expect",
            "kernel,hz",
            "--force",
        ]);
        assert_eq!(o.format, Format::Html);
        assert_eq!(o.destination, Some(PathBuf::from("compare.html")));
        assert_eq!(o.vs, Some(PathBuf::from("b.db")));
        assert_eq!((o.campaign, o.vs_campaign), (None, None));
        assert_eq!(o.compare.analysis.metrics, [Metric::Wall, Metric::Nivcsw]);
        assert!(o.compare.force);
        assert_eq!(o.compare.expect, [EnvField::Kernel, EnvField::Hz]);
        let o = parse(&[
            "schedlab",
            "compare",
            "--db",
            "all.db",
            "--campaign",
            "3",
            "--vs-campaign",
            "7",
            "-o",
            "c.json",
        ]);
        assert_eq!((o.campaign, o.vs_campaign, o.vs), (Some(3), Some(7), None));
        assert_eq!(o.format, Format::Json);
        assert_eq!(o.compare.analysis.metrics, Metric::ALL);
        assert!(!o.compare.force);
    }

    #[test]
    fn an_environment_field_is_parsed_by_its_domain_name() {
        let o = parse(&["schedlab", "compare", "--expect", "rt_limits,sched_ext"]);
        assert_eq!(o.compare.expect, [EnvField::RtLimits, EnvField::SchedExt]);
        assert!(Cli::try_parse_from(["schedlab", "compare", "--expect", "rt-limits"]).is_err());
    }
}
