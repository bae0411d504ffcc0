//! How long the runs of guest levels take on this host, for `plan`'s
//! estimate and `run`'s progress: a boot per level with runs left, and each
//! run's host time. Pure: the caller reads what the campaign measured
//! ([`Measured::from_store`]).
//!
//! What the campaign measured comes first. Each guest run's record carries
//! its host time (`extra.guest_host_ms`: from asking the guest for the run
//! to its record) and the first run of each boot the boot's host time
//! (`extra.guest_boot_ms`: QEMU's start to the guest's hello). A level's
//! boot is the median of its measured boots; a run is the median host time
//! of its condition's measured runs, else the host estimate times the
//! level's measured factor (median of measured host time ÷ host estimate
//! over its runs).
//!
//! Without measurements, defaults measured by `schedlab bench machines` on
//! the 2-CPU VM schedlab was written on (loaded: other builds ran) stand in:
//! the boot per accelerator, and a factor on the host estimate that depends
//! on what bounds the run. A run bound by a duration (`duration_s`, a
//! periodic task's periods) takes that duration of guest time: under KVM
//! and TCG the guest's clock runs in host time (factor 1); under icount the
//! guest's clock counts instructions, and a guest second costs
//! [`ICOUNT_HOST_S_PER_GUEST_S`] of host time while the guest computes. A
//! run bound by work (iterations) is slower in the emulator: TCG's
//! slowdown; icount's virtual slowdown times its host cost. The cool-down
//! is counted as host time (an upper bound under icount, whose idle guest
//! skips ahead). `accel = "auto"` is estimated as TCG (the slower) until
//! the campaign has measured its own; KVM's defaults are TCG's boot and a
//! factor of 1 (this VM's KVM runs no guest: not measured here).

use std::collections::HashMap;

use crate::plan::{self, Run};
use crate::spec::Spec;
use crate::spec::machines::{Accel, Guest};
use crate::workload::{Rates, Stop};

/// `extra` key of a guest run's host time (ms).
pub const HOST_MS_KEY: &str = "guest_host_ms";
/// `extra` key of the boot's host time (ms), on the first run of a boot.
pub const BOOT_MS_KEY: &str = "guest_boot_ms";

/// Boot to hello under TCG (s): 5.8 and 5.9 s in `bench machines`.
pub const TCG_BOOT_S: f64 = 6.0;
/// Boot to hello under TCG with icount (s): 12.7 to 15.6 s.
pub const ICOUNT_BOOT_S: f64 = 15.0;
/// A pi worker's wall time in a TCG guest against this host's: 22.8×.
pub const TCG_WORK_SLOWDOWN: f64 = 23.0;
/// The same worker's virtual time under icount against this host's: 1.4×.
pub const ICOUNT_VIRTUAL_SLOWDOWN: f64 = 1.4;
/// Host seconds per guest second of a busy icount guest: a busybox loop of
/// 2.98 s of guest time took about 37 s of host time (issue 30).
pub const ICOUNT_HOST_S_PER_GUEST_S: f64 = 12.4;

/// What a campaign measured of its guests, per machine level.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Measured {
    /// Boots' host seconds, by level.
    pub boots_s: HashMap<String, Vec<f64>>,
    /// Runs' host seconds, by run key.
    pub runs_s: HashMap<String, f64>,
    /// Runs measured, by level.
    pub runs_by_level: HashMap<String, usize>,
}

impl Measured {
    /// What the runs of `campaign` in `store` measured (every status: a
    /// failed run cost its host time too).
    pub fn from_store(store: &crate::store::Store, campaign: i64) -> anyhow::Result<Measured> {
        let mut m = Measured::default();
        for (key, machine, extra) in store.run_keys_and_extras(campaign)? {
            let Some(machine) = machine else { continue };
            let ms = |k: &str| extra.get(k).and_then(|v| v.as_f64());
            if let Some(b) = ms(BOOT_MS_KEY) {
                m.boots_s.entry(machine.clone()).or_default().push(b / 1e3);
            }
            if let Some(h) = ms(HOST_MS_KEY) {
                m.runs_s.insert(key, h / 1e3);
                *m.runs_by_level.entry(machine).or_default() += 1;
            }
        }
        Ok(m)
    }
}

/// Whether a run's wall time is bound by a duration (the spec's, or a
/// periodic task's periods) rather than by its work.
fn time_bound(run: &Run, cpus: usize, rates: &Rates) -> bool {
    let w = &run.workload.workload;
    match w.stop() {
        Stop::DurationNs(_) => true,
        Stop::Work(_) => w.min_wall_s() >= plan::estimate_run_s(run, cpus, rates),
    }
}

/// The default factor on the host estimate of a guest run (see the
/// module's documentation).
pub fn default_factor(accel: Accel, time_bound: bool) -> f64 {
    match (accel, time_bound) {
        (Accel::Kvm, _) => 1.0,
        (Accel::Auto | Accel::Tcg, true) => 1.0,
        (Accel::Auto | Accel::Tcg, false) => TCG_WORK_SLOWDOWN,
        (Accel::TcgIcount, true) => ICOUNT_HOST_S_PER_GUEST_S,
        (Accel::TcgIcount, false) => ICOUNT_VIRTUAL_SLOWDOWN * ICOUNT_HOST_S_PER_GUEST_S,
    }
}

/// The default boot (host s) under `accel`.
pub fn default_boot_s(accel: Accel) -> f64 {
    match accel {
        Accel::TcgIcount => ICOUNT_BOOT_S,
        Accel::Auto | Accel::Kvm | Accel::Tcg => TCG_BOOT_S,
    }
}

fn median(v: &[f64]) -> Option<f64> {
    crate::stats::summary::summarize(v).map(|s| s.median)
}

/// The host estimate of a guest run: the host's rates on the guest's CPUs.
fn base_s(run: &Run, g: &Guest, rates: &Rates) -> f64 {
    plan::estimate_run_s(run, g.topology.cpus() as usize, rates)
}

/// Each level's measured factor: the median over its measured runs (of
/// `all`, the campaign's runs) of host time ÷ host estimate.
fn level_factors(all: &[Run], rates: &Rates, m: &Measured) -> HashMap<String, f64> {
    let mut ratios: HashMap<String, Vec<f64>> = HashMap::new();
    for r in all {
        let (Some(level), Some(&host_s)) = (&r.machine, m.runs_s.get(&r.key)) else {
            continue;
        };
        let Some(g) = &level.guest else { continue };
        let base = base_s(r, g, rates);
        if base > 0.0 {
            ratios
                .entry(level.name.clone())
                .or_default()
                .push(host_s / base);
        }
    }
    ratios
        .into_iter()
        .filter_map(|(l, v)| median(&v).map(|f| (l, f)))
        .collect()
}

/// Estimated host seconds of each of the `pending` runs, in their order: a
/// host run as [`plan::estimates`] says; a guest run from what the
/// campaign measured (`all` its runs, `m`) or the defaults, and the first
/// pending run of each guest level carries its level's boot.
pub fn estimates(
    spec: &Spec,
    all: &[Run],
    pending: &[&Run],
    cpus_available: usize,
    rates: &Rates,
    rt_period_us: i64,
    m: &Measured,
) -> Vec<f64> {
    let host = plan::estimates(spec, pending, cpus_available, rates, rt_period_us);
    let around = spec.cooldown_ns as f64 / 1e9;
    let factors = level_factors(all, rates, m);
    // The measured host time of each condition's runs, by level.
    let mut by_condition: HashMap<&str, Vec<f64>> = HashMap::new();
    for r in all {
        if let Some(&s) = m.runs_s.get(&r.key) {
            by_condition.entry(r.condition_key()).or_default().push(s);
        }
    }
    let mut booted: Vec<&str> = Vec::new();
    pending
        .iter()
        .zip(host)
        .map(|(r, host_s)| {
            let Some((level, g)) = r
                .machine
                .as_ref()
                .and_then(|l| Some((l, l.guest.as_ref()?)))
            else {
                return host_s;
            };
            let run_s = match (
                by_condition.get(r.condition_key()),
                factors.get(&level.name),
            ) {
                (Some(v), _) => median(v).unwrap_or(0.0),
                (None, Some(f)) => base_s(r, g, rates) * f,
                (None, None) => {
                    let cpus = g.topology.cpus() as usize;
                    base_s(r, g, rates) * default_factor(g.accel, time_bound(r, cpus, rates))
                }
            } + around;
            if booted.contains(&level.name.as_str()) {
                return run_s;
            }
            booted.push(&level.name);
            let boot_s = m
                .boots_s
                .get(&level.name)
                .and_then(|v| median(v))
                .unwrap_or_else(|| default_boot_s(g.accel));
            run_s + boot_s
        })
        .collect()
}

/// How the guest part of an estimate was made, for `plan`: per guest level
/// with runs left, its boot and whether the campaign measured it.
pub fn describe(spec: &Spec, pending: &[&Run], m: &Measured) -> Vec<String> {
    let mut out = Vec::new();
    for level in &spec.machines {
        let Some(g) = &level.guest else { continue };
        let left = pending
            .iter()
            .filter(|r| r.machine.as_ref().is_some_and(|l| l.name == level.name))
            .count();
        if left == 0 {
            continue;
        }
        let measured_runs = m.runs_by_level.get(&level.name).copied().unwrap_or(0);
        let boot = match m.boots_s.get(&level.name).and_then(|v| median(v)) {
            Some(b) => format!(
                "a boot of {b:.1} s (median of {} measured)",
                m.boots_s[&level.name].len()
            ),
            None => format!(
                "a boot of {:.0} s ({}'s default, not measured yet)",
                default_boot_s(g.accel),
                g.accel.name()
            ),
        };
        out.push(format!(
            "{}: {left} runs, {boot}; runs {}",
            level.name,
            if measured_runs > 0 {
                format!("from the host times of its {measured_runs} measured runs")
            } else {
                match g.accel {
                    Accel::Kvm => "as on this machine (KVM)".to_string(),
                    Accel::Auto | Accel::Tcg => format!(
                        "as on this machine when bound by a duration, ×{} when bound by work (TCG's default)",
                        TCG_WORK_SLOWDOWN
                    ),
                    Accel::TcgIcount => format!(
                        "×{} of their guest time (icount's default: a busy guest second costs that much host time; \
                         work ×{} more)",
                        ICOUNT_HOST_S_PER_GUEST_S, ICOUNT_VIRTUAL_SLOWDOWN
                    ),
                }
            }
        ));
    }
    out
}

#[cfg(test)]
mod tests;
