//! `schedlab compare`: did the candidate (another kernel, sysctl,
//! scheduler, machine) make things better or worse than the baseline, and
//! is the difference real?
//!
//! Data flow: each side's campaign is loaded and analysed through the
//! report ([`crate::report::analyse`], from [`Store`]); [`analyse`] matches
//! their conditions by factor values and computes every statistic (pure,
//! unit-tested without a database); [`render`] builds the page once as the
//! report's blocks and renders it to HTML, Markdown or JSON.
//! With `--machine A --vs-machine B` the two sides are two machine levels
//! of one campaign, each analysed as if it were a campaign of its own
//! ([`crate::report::analyse::level`]).
//! `environment` and `spec_diff` say what differs besides the thing under
//! test; [`crate::testing::planted`] makes synthetic pairs with known
//! effects for the tests. The module sits beside the report, above it: it
//! analyses each side through the report, and the report knows nothing of
//! it.
//! [`run`] returns [`EXIT_REGRESSION`] for `--fail-on regression` when a
//! metric is worse beyond the margin with significance, and when nothing
//! was tested (a gate that compared nothing fails).

pub mod analyse;
pub mod charts;
pub mod environment;
#[cfg(test)]
mod levels_tests;
pub mod render;
pub mod spec_diff;
#[cfg(test)]
mod tests;

use anyhow::{Context, Result};
use std::path::PathBuf;

use crate::report::{Analysis, Format};
use crate::store::Store;

pub use analyse::{
    CompareError, CompareOptions, Comparison, Input, MarginVerdict, Row, Verdict, compare,
    parse_margin_pct,
};
pub use environment::EnvField;

/// What `schedlab compare` does, from the command line's arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct RunOptions {
    /// The baseline's database.
    pub db: PathBuf,
    /// The baseline campaign (default: the latest of `db`).
    pub campaign: Option<i64>,
    /// The candidate's database (default: `db`).
    pub vs: Option<PathBuf>,
    /// The candidate campaign (default: the latest of its database).
    pub vs_campaign: Option<i64>,
    pub format: Format,
    /// Output file, or None for standard output.
    pub destination: Option<PathBuf>,
    pub compare: CompareOptions,
    /// `--fail-on regression`: exit with [`EXIT_REGRESSION`] when a metric
    /// is worse beyond the margin with significance.
    pub fail_on_regression: bool,
    /// `--machine`: only the baseline's runs of this machine level.
    pub machine: Option<String>,
    /// `--vs-machine`: only the candidate's runs of this machine level; the
    /// candidate is then the baseline's campaign unless `vs` or
    /// `vs_campaign` name another (two levels of one campaign).
    pub vs_machine: Option<String>,
}

/// Exit code of `compare --fail-on regression` when it found a regression
/// (the comparison is still written).
pub const EXIT_REGRESSION: i32 = 4;

/// Why a comparison cannot back a `--fail-on regression` gate, or None when
/// at least one row was tested: a regression needs significance, so a gate
/// whose rows were all untested (no condition in both campaigns, or fewer
/// than 3 runs on a side) would pass whatever the candidate did.
pub fn nothing_compared(c: &Comparison) -> Option<String> {
    let n = c.comparisons.len();
    let tested = c.comparisons.iter().filter(|r| r.p.is_some()).count();
    if n == 0 {
        Some("0 comparisons: no condition has successful runs in both campaigns".to_string())
    } else if tested == 0 {
        Some(format!(
            "none of the {n} comparisons was tested (each has fewer than 3 successful runs on a side)"
        ))
    } else {
        None
    }
}

/// One side loaded and analysed.
struct Loaded {
    db: String,
    analysis: Analysis,
    sched_ext: Vec<Option<String>>,
    /// None when the campaign stored no latency histograms.
    latency: Option<crate::report::analyse::latency::LatencyAnalysis>,
}

fn load(
    store: &Store,
    db: String,
    campaign: Option<i64>,
    machine: (&str, Option<&String>),
    opts: &CompareOptions,
) -> Result<Loaded> {
    let analysis = crate::report::analyse(
        store,
        &crate::report::Options {
            campaign,
            machine: machine.1.cloned(),
            ..opts.analysis.clone()
        },
    )
    .with_context(|| match machine.1 {
        Some(level) => format!("{} {level}: analysing {db}", machine.0),
        None => format!("analysing {db}"),
    })?;
    let states = store.report_sched_ext(analysis.campaign.id)?;
    let sched_ext = analysis
        .environments
        .iter()
        .map(|e| {
            states
                .iter()
                .find(|(id, _)| *id == e.id)
                .and_then(|(_, s)| s.clone())
        })
        .collect();
    let histograms = store
        .campaign_latency(&analysis.campaign_ids())
        .with_context(|| format!("reading the latency histograms of {db}"))?;
    let latency = (!histograms.is_empty()).then(|| {
        crate::report::analyse::latency::analyse(
            &analysis,
            &histograms,
            opts.analysis.bootstrap_seed,
        )
    });
    Ok(Loaded {
        db,
        analysis,
        sched_ext,
        latency,
    })
}

fn input(l: &Loaded) -> Input<'_> {
    Input {
        db: &l.db,
        analysis: &l.analysis,
        sched_ext: &l.sched_ext,
        latency: l.latency.as_ref(),
    }
}

/// The UUID of campaign `id` in `store`.
fn campaign_uuid(store: &Store, id: i64) -> Result<Option<String>> {
    Ok(store
        .campaigns()?
        .into_iter()
        .find(|c| c.campaign.id == id)
        .map(|c| c.campaign.uuid))
}

/// Load both sides and compare them.
pub fn build(opts: &RunOptions) -> Result<Comparison> {
    if opts.vs.is_none() && opts.vs_campaign.is_none() && opts.vs_machine.is_none() {
        return Err(CompareError::NoCandidate.into());
    }
    if opts.vs_machine.is_some()
        && opts.machine.is_none()
        && opts.vs.is_none()
        && opts.vs_campaign.is_none()
    {
        anyhow::bail!(
            "--vs-machine compares two machine levels of one campaign: name the baseline's level with --machine"
        );
    }
    let base_store = Store::open_existing(&opts.db)?;
    let base_name = crate::out::path(&opts.db);
    let base_level = ("--machine", opts.machine.as_ref());
    let cand_level = ("--vs-machine", opts.vs_machine.as_ref());
    let base = load(
        &base_store,
        base_name.clone(),
        opts.campaign,
        base_level,
        &opts.compare,
    )?;
    let cand = match &opts.vs {
        Some(vs) => {
            let same_file = match (std::fs::canonicalize(&opts.db), std::fs::canonicalize(vs)) {
                (Ok(a), Ok(b)) => a == b,
                _ => false,
            };
            let store = Store::open_existing(vs)?;
            let name = if same_file {
                base_name
            } else {
                crate::out::path(vs)
            };
            let cand = load(&store, name, opts.vs_campaign, cand_level, &opts.compare)?;
            // A copy of the baseline's database (or a merge of it) holds the
            // same campaign under another file name: its runs are the
            // baseline's, not a second sample.
            let uuid = campaign_uuid(&base_store, base.analysis.campaign.id)?;
            if !same_file
                && uuid.is_some()
                && uuid == campaign_uuid(&store, cand.analysis.campaign.id)?
            {
                return Err(CompareError::CopiedCampaign {
                    baseline: format!("{} campaign {}", base.db, base.analysis.campaign.id),
                    candidate: format!("{} campaign {}", cand.db, cand.analysis.campaign.id),
                    uuid: uuid.unwrap_or_default(),
                }
                .into());
            }
            cand
        }
        // Without --vs-campaign: the baseline's own campaign (two of its
        // machine levels).
        None => {
            let campaign = opts.vs_campaign.or(Some(base.analysis.campaign.id));
            load(&base_store, base_name, campaign, cand_level, &opts.compare)?
        }
    };
    Ok(compare(input(&base), input(&cand), &opts.compare)?)
}

/// `schedlab compare`: compare two campaigns and write the result. Returns
/// the process exit code: 0, or [`EXIT_REGRESSION`] with
/// `--fail-on regression` when a row is a regression.
pub fn run(opts: RunOptions) -> Result<i32> {
    // Checked before both analyses: a refused -o costs nothing.
    let target = crate::output::target_of("-o", opts.destination.as_deref())?;
    let c = build(&opts)?;
    for r in c.unexpected_environment() {
        note!(
            "warning: the environments differ in {} ({} → {}), which --expect does not name",
            r.field.label(),
            crate::out::esc(&r.baseline),
            crate::out::esc(&r.candidate)
        );
    }
    if !c.spec_differences.is_empty() {
        note!(
            "warning: the specs differ in {} key{} (compared because of --force; listed first in the output)",
            c.spec_differences.len(),
            if c.spec_differences.len() == 1 {
                ""
            } else {
                "s"
            }
        );
    }
    let text = render::render(&c, opts.format);
    crate::output::write_all(&target, text.as_bytes())?;
    if !target.is_stdout() {
        note!(
            "wrote {}: {} comparisons (condition × metric): {} better, {} worse, {} not separated{}",
            target.shown(),
            c.comparisons.len(),
            c.count(Verdict::Better),
            c.count(Verdict::Worse),
            c.count(Verdict::NotSeparated),
            c.margin_pct.map_or_else(String::new, |m| format!(
                "; {} {}, {} different, {} neither shown",
                c.count_margin(MarginVerdict::Equivalent),
                MarginVerdict::Equivalent.text(m),
                c.count_margin(MarginVerdict::Different),
                c.count_margin(MarginVerdict::NeitherShown)
            ))
        );
    }
    if opts.fail_on_regression
        && let Some(why) = nothing_compared(&c)
    {
        note!(
            "--fail-on regression: the gate compared nothing, so it cannot pass: {why} (exit code {EXIT_REGRESSION})"
        );
        return Ok(EXIT_REGRESSION);
    }
    let regressions = c.regressions();
    if opts.fail_on_regression && !regressions.is_empty() {
        for r in &regressions {
            note!("regression: {}", crate::out::esc(&render::sentence(r)));
        }
        note!(
            "--fail-on regression: {} of {} comparisons worse {}with significance (exit code {EXIT_REGRESSION})",
            regressions.len(),
            c.comparisons.len(),
            c.margin_pct.map_or_else(String::new, |m| format!(
                "beyond the {} margin ",
                analyse::margin_label(m)
            ))
        );
        return Ok(EXIT_REGRESSION);
    }
    Ok(0)
}
