//! `schedlab bench machines`: what a guest costs and what it is worth,
//! measured side by side in one run. Printed: each accelerator's boot time
//! (host time from QEMU's start to the guest's hello, over two boots;
//! KVM only where it answers), then one campaign of a lone pi worker
//! (repetitions on this machine, a TCG guest and a TCG-icount guest, both
//! of the same kernel and topology), with each level's median wall time,
//! its slowdown against this machine's, and its coefficient of variation
//! beside this machine's; and each guest level's host time per run
//! (`extra.guest_host_ms`), per second of the worker's guest time.

use anyhow::{Result, bail};
use std::time::Duration;

use crate::campaign::{self, Options};
use crate::stats::summary::summarize;
use crate::store::Store;

pub struct MachinesBenchOptions {
    /// The guests' kernel (a recipe or a bzImage).
    pub kernel: String,
    /// Repetitions of the pi worker per level.
    pub repetitions: u32,
    /// pi iterations of the worker.
    pub iterations: u64,
}

fn spec_text(o: &MachinesBenchOptions, kvm: bool) -> String {
    let kvm_level = if kvm { ", \"kvm\"" } else { "" };
    let kvm_table = if kvm {
        format!(
            "[machines.kvm]\nkernel = \"{}\"\naccel = \"kvm\"\n",
            o.kernel
        )
    } else {
        String::new()
    };
    format!(
        "name = \"bench-machines\"\nrepetitions = {}\ncooldown_s = 0\ntimeout_s = 120\n\
         [matrix]\npolicy = [\"other\"]\nworkload = [\"pi\"]\nprocesses = [1]\ncpus = [\"0\"]\n\
         machine = [\"host\", \"tcg\", \"icount\"{kvm_level}]\n\
         [workloads.pi]\niterations = {}\n\
         [machines.tcg]\nkernel = \"{k}\"\naccel = \"tcg\"\n\
         [machines.icount]\nkernel = \"{k}\"\naccel = \"tcg-icount\"\n{kvm_table}",
        o.repetitions,
        o.iterations,
        k = o.kernel
    )
}

/// The median and the coefficient of variation (%) of a sample.
fn median_cv(v: &[f64]) -> Option<(f64, f64)> {
    summarize(v).map(|s| (s.median, 100.0 * s.cv.unwrap_or(0.0)))
}

pub fn run(o: MachinesBenchOptions) -> Result<()> {
    if o.repetitions < 2 {
        bail!("--repetitions must be at least 2 (a spread needs two runs)");
    }
    let kvm = crate::sys::kvm::probe(Duration::from_secs(5)).is_ok();
    let text = spec_text(&o, kvm);
    let spec = crate::spec::load(&text, "bench machines", &[])?;
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("machines.db");
    let signals = crate::sys::proc::control_signals();
    crate::sys::proc::block(&signals)?;

    println!(
        "boot time (host s, QEMU's start to the guest's hello; kernel {}):",
        o.kernel
    );
    let plan = crate::plan::Plan::of(&spec);
    let runs: Vec<&crate::plan::Run> = plan.runs().iter().collect();
    let mut guests = crate::machine::GuestExecutor::begin(
        &spec,
        &runs,
        signals,
        false,
        true,
        false,
        "schedlab bench machines",
    )?;
    let mut levels = vec!["tcg", "icount"];
    if kvm {
        levels.push("kvm");
    }
    let mut booted = Vec::new();
    for level in &levels {
        let mut times = Vec::new();
        for _ in 0..2 {
            match guests.boot_time(level) {
                Ok(t) => times.push(t.as_secs_f64()),
                Err(e) => println!("  {level:<8} did not boot: {e:#}"),
            }
        }
        if times.len() == 2 {
            booted.push(*level);
        }
        if !times.is_empty() {
            println!(
                "  {level:<8} {}",
                times
                    .iter()
                    .map(|t| format!("{t:.2}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }
    if !kvm {
        println!("  kvm      not measured: /dev/kvm does not answer here");
    }
    drop(guests);
    // The campaign's levels are those that booted both times.
    let levels: Vec<&str> = levels.into_iter().filter(|l| booted.contains(l)).collect();
    if !levels.contains(&"tcg") || !levels.contains(&"icount") {
        bail!("the TCG guests did not boot: nothing to compare");
    }
    let text = spec_text(&o, levels.contains(&"kvm"));
    let spec = crate::spec::load(&text, "bench machines", &[])?;

    let opts = Options {
        db: db.clone(),
        quiet: true,
        retry_failed: false,
        force: false,
        allow_concurrent: false,
    };
    let summary = campaign::run(&spec, "bench machines", &text, &[], &opts)?;
    if let Some(sig) = summary.interrupted {
        bail!("interrupted by {}", crate::sys::proc::signal_name(sig));
    }
    let rows = Store::open(&db)?.export_rows(Some(summary.campaign.id))?;
    let walls = |level: &str| -> Vec<f64> {
        rows.iter()
            .filter(|r| r.status == "ok" && r.machine.as_deref() == Some(level))
            .filter_map(|r| r.wall_ns.map(|w| w as f64 / 1e6))
            .collect()
    };
    let Some((host_median, host_cv)) = median_cv(&walls("host")) else {
        bail!("no ok run on this machine");
    };
    println!(
        "\na lone pi worker ({} iterations), {} runs per level, wall time (guest's own clock):",
        o.iterations, o.repetitions
    );
    println!(
        "  {:<8} {:>12} {:>22} {:>8}",
        "level", "median ms", "slowdown vs host", "CV %"
    );
    let mut all = vec!["host"];
    all.extend(levels.iter().copied());
    for level in all {
        match median_cv(&walls(level)) {
            None => println!("  {level:<8} no ok run"),
            Some((m, cv)) => println!(
                "  {level:<8} {m:>12.3} {:>21.1}× {cv:>8.3}",
                m / host_median
            ),
        }
    }
    // What a guest run costs this machine: the host time of each run
    // (asking the guest for it to its record), against the guest's own
    // wall time of the worker: how much host time a guest second costs.
    println!("\nhost time per guest run (s), and per second of the worker's guest time:");
    for level in levels.iter().copied() {
        let mut seen = std::collections::HashSet::new();
        let pairs: Vec<(f64, f64)> = rows
            .iter()
            .filter(|r| r.status == "ok" && r.machine.as_deref() == Some(level))
            .filter(|r| seen.insert(r.run))
            .filter_map(|r| {
                let extra: serde_json::Value = serde_json::from_str(&r.extra_json).ok()?;
                let host_s = extra.get(crate::machine::estimate::HOST_MS_KEY)?.as_f64()? / 1e3;
                Some((host_s, r.wall_ns? as f64 / 1e9))
            })
            .collect();
        let host: Vec<f64> = pairs.iter().map(|p| p.0).collect();
        let per: Vec<f64> = pairs
            .iter()
            .filter(|p| p.1 > 0.0)
            .map(|p| p.0 / p.1)
            .collect();
        match (summarize(&host), summarize(&per)) {
            (Some(h), Some(p)) => println!(
                "  {level:<8} {:>8.2} s per run, {:>8.1} s of host time per guest second (medians; the run's \
                 cool-down and the channel included)",
                h.median, p.median
            ),
            _ => println!("  {level:<8} not measured"),
        }
    }
    println!(
        "\nCV of the icount guest against this machine's: {}",
        match median_cv(&walls("icount")) {
            Some((_, cv)) if host_cv > 0.0 =>
                format!("{:.2}× ({cv:.3} % against {host_cv:.3} %)", cv / host_cv),
            _ => "not measured".into(),
        }
    );
    Ok(())
}
