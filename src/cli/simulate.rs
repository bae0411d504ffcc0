//! `schedlab simulate`: a campaign carried out in the model of this
//! machine's scheduler instead of on it, stored like a measured one.

use anyhow::Result;
use clap::Args;

use super::run::summarise;
use super::source::{DbArg, SpecSource};
use crate::campaign;

#[derive(Args)]
pub(super) struct SimulateArgs {
    #[command(flatten)]
    source: SpecSource,
    #[command(flatten)]
    db: DbArg,
    /// No progress output.
    #[arg(long, short)]
    quiet: bool,
}

pub(super) fn run(a: SimulateArgs) -> Result<i32> {
    let l = a.source.load()?;
    let opts = campaign::Options {
        db: a.db.db.clone(),
        quiet: a.quiet,
        retry_failed: false,
        force: false,
        allow_concurrent: true,
    };
    let s = campaign::simulate(&l.spec, &l.origin, &l.text, &l.overrides, &opts)?;
    summarise(&s, &a.db.db, a.quiet)
}
