//! `schedlab env`: what this machine allows (kernel, CPUs, HZ, preemption,
//! RT limits, cgroups, sched_ext, which policies this user may set, which
//! per-run noise sources exist and why not), as text or JSON.

use anyhow::Result;
use clap::Args;
use std::io::Write;

use crate::out;
use crate::sys::{envinfo, knobs, noise, probe, scx};

#[derive(Args)]
pub(super) struct EnvArgs {
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

pub(super) fn run(a: EnvArgs) -> Result<i32> {
    let env = envinfo::capture();
    let privs = probe::probe();
    let scx = scx::status();
    let noise_sources = noise::Roots::default().availability();
    if a.json {
        let mut value: serde_json::Value =
            serde_json::from_str(&envinfo::render_json(&env, &privs))?;
        value["sched_ext"] = serde_json::json!({
            "state": scx.state,
            "ops": scx.ops,
            "may_load_bpf": scx.may_load_bpf.is_ok(),
            "ext_mechanism": scx.unavailable().map_or_else(
                || "available".to_string(),
                |why| format!("absent: {why}")
            ),
            "installed": scx.installed,
        });
        value["noise_sources"] = noise_sources
            .iter()
            .map(|(name, why)| {
                let state = why
                    .as_ref()
                    .map_or_else(|| "recorded".to_string(), |w| format!("empty: {w}"));
                (name.to_string(), serde_json::Value::from(state))
            })
            .collect();
        outln!("{}", serde_json::to_string_pretty(&value)?)?;
    } else {
        write!(out::stdout(), "{}", envinfo::render_text(&env, &privs))?;
        outln!("rt bandwidth")?;
        for line in knobs::capability_from(&env).explain().lines() {
            outln!("  {line}")?;
        }
        outln!("sched_ext")?;
        for line in scx.render_text().lines() {
            outln!("  {line}")?;
        }
        outln!("noise per run")?;
        for (name, why) in &noise_sources {
            match why {
                None => outln!("  {name}: recorded")?,
                Some(why) => outln!("  {name}: empty: {why}")?,
            }
        }
    }
    Ok(0)
}
