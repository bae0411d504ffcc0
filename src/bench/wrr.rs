//! `schedlab bench wrr`: how exactly weighted shares of one CPU are
//! delivered, by schedlab's WRR (its sched_ext scheduler, and the
//! user-space dispatcher's two mechanisms) and by the kernel's own means
//! (CFS nice values, SCHED_DEADLINE reservations), all measured in one
//! campaign on real processes. For each WRR way it also shows, per weight,
//! the share over whole rounds and the CPU time its slices got.

use anyhow::{Context, Result, bail};
use std::collections::BTreeMap;

use crate::campaign::{self, Options};
use crate::record::SliceRow;
use crate::report::rounds::whole_round_cpu;
use crate::store::Store;

/// What to measure.
pub struct WrrBenchOptions {
    pub weights: Vec<u32>,
    pub seconds: f64,
    pub quantum_ms: f64,
    pub cpu: usize,
    /// Where the campaign's database goes (a temporary one if None).
    pub db: Option<std::path::PathBuf>,
    /// Only the contenders of these keys (all if empty).
    pub only: Vec<String>,
}

impl Default for WrrBenchOptions {
    fn default() -> Self {
        WrrBenchOptions {
            weights: vec![1, 4, 8, 12, 16, 20],
            seconds: 30.0,
            quantum_ms: 10.0,
            cpu: 0,
            db: None,
            only: Vec::new(),
        }
    }
}

/// One way of delivering the weights.
struct Contender {
    /// Its name for `--only`.
    key: &'static str,
    label: &'static str,
    policy: &'static str,
    mechanism: &'static str,
}

const CONTENDERS: [Contender; 5] = [
    Contender {
        key: "ext",
        label: "wrr (sched_ext, kernel)",
        policy: "wrr",
        mechanism: "ext",
    },
    Contender {
        key: "fifo",
        label: "wrr (fifo dispatcher)",
        policy: "wrr",
        mechanism: "fifo",
    },
    Contender {
        key: "signals",
        label: "wrr (SIGSTOP/SIGCONT)",
        policy: "wrr",
        mechanism: "signals",
    },
    Contender {
        key: "nice",
        label: "CFS nice (nearest weight)",
        policy: "other",
        mechanism: "auto",
    },
    Contender {
        key: "deadline",
        label: "SCHED_DEADLINE runtime ∝ w",
        policy: "deadline",
        mechanism: "auto",
    },
];

fn spec_text(o: &WrrBenchOptions, c: &Contender) -> String {
    let weights: Vec<String> = o.weights.iter().map(|w| w.to_string()).collect();
    format!(
        r#"name = "bench-wrr-{policy}-{mechanism}"
repetitions = 1
cooldown_s = 0
timeout_s = {timeout}
[matrix]
policy = ["{policy}"]
workload = ["hash"]
processes = [{n}]
priorities = ["w"]
cpus = ["{cpu}"]
[priorities.w]
mode = "weights"
weight = [{weights}]
[workloads.hash]
duration_s = {seconds}
[wrr]
quantum_ms = {quantum}
mechanism = "{mechanism}"
"#,
        policy = c.policy,
        mechanism = c.mechanism,
        timeout = o.seconds * 2.0 + 30.0,
        n = o.weights.len(),
        cpu = o.cpu,
        weights = weights.join(", "),
        seconds = o.seconds,
        quantum = o.quantum_ms,
    )
}

pub fn run(o: WrrBenchOptions) -> Result<()> {
    if o.weights.is_empty() || o.weights.contains(&0) {
        bail!("--weights: give positive integers, e.g. 1,4,8,12,16,20");
    }
    let keys: Vec<&str> = CONTENDERS.iter().map(|c| c.key).collect();
    if let Some(bad) = o.only.iter().find(|k| !keys.contains(&k.as_str())) {
        bail!(
            "--only: unknown way \"{bad}\"; allowed: {}",
            keys.join(", ")
        );
    }
    let chosen = CONTENDERS
        .iter()
        .filter(|c| o.only.is_empty() || o.only.iter().any(|k| k == c.key));
    let tmp = tempfile::tempdir().context("creating a temporary directory")?;
    let db =
        o.db.clone()
            .unwrap_or_else(|| tmp.path().join("bench-wrr.db"));
    let total_w: u32 = o.weights.iter().sum();
    let ideal: Vec<f64> = o
        .weights
        .iter()
        .map(|&w| w as f64 / total_w as f64)
        .collect();
    outln!(
        "weights {:?} on CPU {}, {} s each, quantum {} ms; share = task's CPU time / all tasks' CPU time (schedstat)",
        o.weights,
        o.cpu,
        o.seconds,
        o.quantum_ms
    )?;
    outln!(
        "{:<28} {:>9} {:>9} {:>8} {:>12} {:>12} {:>12}  shares / ideal per weight",
        "delivered by",
        "max err",
        "within 2%",
        "CPU use",
        "overhead",
        "late p50",
        "late p99"
    )?;
    for c in chosen {
        let text = spec_text(&o, c);
        let spec = crate::spec::load(&text, c.label, &[])?;
        let opts = Options {
            db: db.clone(),
            quiet: true,
            retry_failed: false,
            force: false,
            allow_concurrent: false,
        };
        let summary = campaign::run(&spec, c.label, &text, &[], &opts)?;
        if let Some(sig) = summary.interrupted {
            bail!("interrupted by signal {sig}");
        }
        let store = Store::open(&db)?;
        let rows = store.export_rows(Some(summary.campaign.id))?;
        let run_status = rows.first().map(|r| (r.status.clone(), r.reason.clone()));
        if let Some((status, reason)) = &run_status
            && status != "ok"
        {
            outln!("{:<28} {status}: {reason}", c.label)?;
            continue;
        }
        let workers: Vec<_> = rows
            .iter()
            .filter(|r| r.role.as_deref() == Some("worker"))
            .collect();
        let cpu: Vec<f64> = workers
            .iter()
            .map(|r| r.kernel.get(crate::fields::Field::RunNs).unwrap_or(0) as f64)
            .collect();
        let total: f64 = cpu.iter().sum();
        let ratios: Vec<f64> = cpu.iter().zip(&ideal).map(|(c, i)| c / total / i).collect();
        let max_err = ratios.iter().map(|r| (r - 1.0).abs()).fold(0.0, f64::max);
        let makespan = workers.first().and_then(|r| r.makespan_ns).unwrap_or(1) as f64;
        let extras: BTreeMap<i64, serde_json::Value> =
            store.run_extras(summary.campaign.id)?.into_iter().collect();
        let wrr = extras.values().next().and_then(|e| e.get("wrr")).cloned();
        let fmt_ns = |v: Option<&serde_json::Value>| {
            v.and_then(|x| x.as_f64())
                .map(|ns| format!("{:.0} µs", ns / 1e3))
                .unwrap_or_else(|| "-".into())
        };
        let (overhead, p50, p99) = match &wrr {
            Some(w) => (
                w.get("dispatcher_overhead")
                    .and_then(|x| x.as_f64())
                    .map(|f| format!("{:.3}%", f * 100.0))
                    .unwrap_or_else(|| "-".into()),
                fmt_ns(w.get("lateness_p50_ns")),
                fmt_ns(w.get("lateness_p99_ns")),
            ),
            None => ("-".into(), "-".into(), "-".into()),
        };
        // WRR over whole rounds only: a window that ends inside a round
        // cannot be proportional whatever the mechanism.
        let slices = match (&wrr, workers.first()) {
            (Some(_), Some(r)) => store.slices(r.run)?,
            _ => Vec::new(),
        };
        let whole = whole_round_cpu(&slices, o.weights.len());
        let rounds_err = whole.as_ref().map(|(cpu, rounds)| {
            let total: f64 = cpu.iter().sum();
            let err = cpu
                .iter()
                .zip(&ideal)
                .map(|(c, i)| (c / total / i - 1.0).abs())
                .fold(0.0, f64::max);
            (err, *rounds)
        });
        let shown: Vec<String> = ratios.iter().map(|r| format!("{r:.3}")).collect();
        outln!(
            "{:<28} {:>8.2}% {:>9} {:>7.1}% {:>12} {:>12} {:>12}  {}",
            c.label,
            max_err * 100.0,
            if max_err <= 0.02 { "yes" } else { "no" },
            total / makespan * 100.0,
            overhead,
            p50,
            p99,
            shown.join(" ")
        )?;
        if let Some((err, rounds)) = rounds_err {
            outln!(
                "{:<28} {:>8.2}% {:>9}   over the {rounds} whole rounds only",
                "",
                err * 100.0,
                if err <= 0.02 { "yes" } else { "no" }
            )?;
        }
        if let Some((cpu, _)) = &whole {
            print_per_weight(&o, cpu, &ideal, &slices)?;
        }
    }
    outln!(
        "target: every share within 2% of its weight's share (seed 002's kernel module was off by up to 12%); \
         dispatcher overhead under 1% of one CPU; slice-boundary lateness p99 under 1 ms on an idle machine"
    )?;
    Ok(())
}

/// Per weight: its share over whole rounds against the ideal, and the CPU
/// time of its slices (those not cut short) against quantum × weight.
fn print_per_weight(
    o: &WrrBenchOptions,
    whole_cpu: &[f64],
    ideal: &[f64],
    slices: &[SliceRow],
) -> Result<()> {
    let total: f64 = whole_cpu.iter().sum();
    outln!(
        "    {:>6} {:>12} {:>8} {:>7} {:>10} {:>19} {:>10}",
        "weight",
        "share/ideal",
        "error",
        "slices",
        "slice p50",
        "slice p10..p90",
        "q × w"
    )?;
    for (i, (&w, (&c, &ideal))) in o
        .weights
        .iter()
        .zip(whole_cpu.iter().zip(ideal))
        .enumerate()
    {
        let ratio = c / total / ideal;
        let ms = |ns: u64| ns as f64 / 1e6;
        let lengths = slice_lengths(slices, i as u32);
        let (n, p10, p50, p90) = match lengths {
            Some((n, p10, p50, p90)) => (
                n.to_string(),
                ms(p10),
                format!("{:.2} ms", ms(p50)),
                ms(p90),
            ),
            None => ("0".to_string(), 0.0, "-".to_string(), 0.0),
        };
        outln!(
            "    {:>6} {:>12.4} {:>7.2}% {:>7} {:>10} {:>19} {:>7.2} ms",
            w,
            ratio,
            (ratio - 1.0).abs() * 100.0,
            n,
            p50,
            format!("{p10:.2}..{p90:.2} ms"),
            o.quantum_ms * f64::from(w)
        )?;
    }
    Ok(())
}

/// The CPU time of task `task`'s slices that were not cut short (at least
/// half their target, as [`whole_round_cpu`] counts them): how many, and
/// the 10th, 50th and 90th percentiles (nearest rank), in ns.
fn slice_lengths(slices: &[SliceRow], task: u32) -> Option<(usize, u64, u64, u64)> {
    let mut v: Vec<u64> = slices
        .iter()
        .filter(|s| s.process_index == task)
        .filter(|s| {
            (s.cpu_ns as f64) >= 0.5 * s.planned_end_ns.saturating_sub(s.planned_start_ns) as f64
        })
        .map(|s| s.cpu_ns)
        .collect();
    if v.is_empty() {
        return None;
    }
    v.sort_unstable();
    let at = |q: f64| v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
    Some((v.len(), at(0.1), at(0.5), at(0.9)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(task: u32, target: u64, cpu_ns: u64) -> SliceRow {
        SliceRow {
            process_index: task,
            cpu: 0,
            planned_start_ns: 0,
            planned_end_ns: target,
            actual_end_ns: cpu_ns,
            cpu_ns,
        }
    }

    #[test]
    fn slice_lengths_skip_cut_short_slices() {
        let mut slices: Vec<SliceRow> = (1..=10).map(|k| row(0, 100, 95 + k)).collect();
        slices.push(row(0, 100, 10)); // cut short: not counted
        slices.push(row(1, 100, 100));
        assert_eq!(slice_lengths(&slices, 0), Some((10, 96, 100, 104)));
        assert_eq!(slice_lengths(&slices, 1), Some((1, 100, 100, 100)));
        assert_eq!(slice_lengths(&slices, 2), None);
    }
}
