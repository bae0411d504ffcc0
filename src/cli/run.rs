//! `schedlab run`: a campaign (a spec file or a preset) run and stored, run
//! by run; resumes a campaign that was interrupted.

use anyhow::Result;
use clap::Args;

use super::source::{DbArg, SpecSource};
use crate::{campaign, out};

/// Exit code of `run` when the campaign ended but runs failed or timed out.
pub const EXIT_RUNS_FAILED: i32 = 3;

#[derive(Args)]
pub(super) struct RunArgs {
    #[command(flatten)]
    source: SpecSource,
    #[command(flatten)]
    db: DbArg,
    /// No progress output.
    #[arg(long, short)]
    quiet: bool,
    /// Run again the runs stored as failed, timed out or skipped.
    #[arg(long)]
    retry_failed: bool,
    /// Allow RT work with RT throttling disabled, or an RT hog on every CPU
    /// (both can freeze the machine).
    #[arg(long)]
    force: bool,
    /// Measure even while another schedlab measures on this machine
    /// (by default each run waits for the machine-wide measurement lock).
    #[arg(long)]
    allow_concurrent: bool,
}

pub(super) fn run(a: RunArgs) -> Result<i32> {
    let l = a.source.load_measured()?;
    if let (Some(n), false) = (&l.trace_note, a.quiet) {
        note!("{n}");
    }
    let opts = campaign::Options {
        db: a.db.db.clone(),
        quiet: a.quiet,
        retry_failed: a.retry_failed,
        force: a.force,
        allow_concurrent: a.allow_concurrent,
    };
    let s = campaign::run(&l.spec, &l.origin, &l.text, &l.overrides, &opts)?;
    summarise(&s, &a.db.db, a.quiet)
}

/// What a campaign invocation did, and its exit code.
pub(super) fn summarise(s: &campaign::Summary, db: &std::path::Path, quiet: bool) -> Result<i32> {
    let [ok, failed, timed_out, skipped] = s.by_status;
    if !quiet {
        note!(
            "campaign {}: {} runs this time (ok {ok}, failed {failed}, timed out {timed_out}, skipped {skipped}); \
             {} were stored before",
            s.campaign.id,
            s.ran,
            s.already_done
        );
        if s.not_needed > 0 {
            note!(
                "{} runs were not needed: their conditions reached target_ci_pct (repetitions = \"auto\")",
                s.not_needed
            );
        }
    }
    if let Some(sig) = s.interrupted {
        note!(
            "interrupted by {}: finished runs are stored in {}; run the same command again to resume",
            crate::sys::proc::signal_name(sig),
            out::path(db)
        );
        return Ok(128 + sig);
    }
    // Runs that failed or timed out are stored with their reasons, but a
    // script must not take the campaign for a success.
    if failed + timed_out > 0 {
        return Ok(EXIT_RUNS_FAILED);
    }
    // Nor a campaign of which nothing was measured this time: every run it
    // ran was skipped (a program not in PATH, a policy not permitted).
    if skipped > 0 && ok == 0 {
        note!("every run was skipped (their reasons are above and stored): nothing was measured");
        return Ok(EXIT_RUNS_FAILED);
    }
    Ok(0)
}
