//! `schedlab campaigns`: the campaigns in a database with their progress,
//! as a table or, with `--json`, as an array of
//! [`crate::store::CampaignSummary`].

use anyhow::Result;
use clap::Args;

use super::source::DbArg;
use crate::out;
use crate::store::Store;

#[derive(Args)]
pub(super) struct CampaignsArgs {
    #[command(flatten)]
    db: DbArg,
    /// Print JSON instead of a table: one object per campaign with its
    /// stored row and its runs by status.
    #[arg(long)]
    json: bool,
}

pub(super) fn run(a: CampaignsArgs) -> Result<i32> {
    let store = Store::open_existing(&a.db.db)?;
    let campaigns = store.campaigns()?;
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&campaigns)?)?;
        return Ok(0);
    }
    outln!(
        "{:>4}  {:<20} {:<16} {:>8} {:>6} {:>6} {:>7} {:>9} {:>8}",
        "id",
        "name",
        "host",
        "planned",
        "ok",
        "failed",
        "timeout",
        "skipped",
        "scale"
    )?;
    for c in campaigns {
        outln!(
            "{:>4}  {:<20} {:<16} {:>8} {:>6} {:>6} {:>7} {:>9} {:>8}",
            c.campaign.id,
            out::esc(&c.campaign.name),
            out::esc(c.campaign.hostname.as_deref().unwrap_or("?")),
            c.campaign.planned_runs,
            c.ok,
            c.failed,
            c.timed_out,
            c.skipped,
            c.campaign.scale
        )?;
    }
    Ok(0)
}
