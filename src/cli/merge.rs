//! `schedlab merge`: the databases of many machines (or many runs) merged
//! into one by [`crate::merge`].

use anyhow::Result;
use clap::Args;
use std::path::PathBuf;

use crate::merge::{self, MergeOptions};

#[derive(Args)]
#[command(
    after_help = "Campaigns are matched by their UUID and runs by their key: merging the same file twice \
                  adds nothing, and a campaign merged again after it ran further gets only its new runs. \
                  Each source is merged in one transaction.\n\nExamples:\n  \
                  schedlab merge host-a.db host-b.db -o fleet.db\n  \
                  schedlab report --db fleet.db --by host --format md"
)]
pub(super) struct MergeArgs {
    /// The databases to merge (read only; an older schema is read as it is).
    #[arg(required = true, value_name = "DB")]
    sources: Vec<PathBuf>,
    /// The database to merge into (created when missing; its campaigns are kept).
    #[arg(long, short, value_name = "DB")]
    output: PathBuf,
    /// No summary or progress output.
    #[arg(long, short)]
    quiet: bool,
}

pub(super) fn run(a: MergeArgs) -> Result<i32> {
    merge::run(&MergeOptions {
        sources: a.sources,
        output: a.output,
        quiet: a.quiet,
    })
}
