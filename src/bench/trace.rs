//! `schedlab bench trace`: what tracing costs and how well the trace agrees
//! with schedlab's other counters. A CPU-bound campaign and a pingpong
//! campaign are run with and without `trace = true`, alternating, several
//! trials each; printed: the median campaign wall time and median run
//! makespan of each side and their ratio (traced / untraced), then, over
//! the traced runs' workers, how the trace's on-CPU time compares with
//! schedstat's run time and its switch count with rusage's nvcsw + nivcsw.

use std::time::Instant;

use anyhow::{Context, Result, bail};

use crate::campaign::{self, Options};
use crate::stats::summary::percentile;
use crate::store::{ExportRow, Store};

pub struct TraceBenchOptions {
    /// Trials per side and workload.
    pub trials: u32,
    /// The CPU the workers share.
    pub cpu: usize,
}

/// The two workloads: (label, kind, its table's keys).
const LOADS: [(&str, &str, &str); 2] = [
    ("cpu (pi ×2)", "pi", "iterations = 100_000_000"),
    ("pingpong ×2", "pingpong", "round_trips = 20_000"),
];

fn spec_text(kind: &str, keys: &str, cpu: usize, trace: bool, trial: u32) -> String {
    format!(
        "name = \"bench-trace-{kind}-{trial}-{trace}\"\nrepetitions = 3\ncooldown_s = 0\n\
         trace = {trace}\norder = \"sequential\"\n[matrix]\npolicy = [\"other\"]\n\
         cpus = [\"{cpu}\"]\nworkload = [\"{kind}\"]\nprocesses = [2]\n[workloads.{kind}]\n{keys}\n"
    )
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    percentile(&v, 0.5)
}

/// One campaign: its wall time (s), its runs' makespans (s), its rows.
fn one(db: &std::path::Path, text: &str) -> Result<(f64, Vec<f64>, Vec<ExportRow>)> {
    let spec = crate::spec::load(text, "bench trace", &[])?;
    let opts = Options {
        db: db.to_path_buf(),
        quiet: true,
        retry_failed: false,
        force: false,
        allow_concurrent: false,
    };
    let t0 = Instant::now();
    let summary = campaign::run(&spec, "bench trace", text, &[], &opts)?;
    let wall_s = t0.elapsed().as_secs_f64();
    if let Some(sig) = summary.interrupted {
        bail!("interrupted by signal {sig}");
    }
    let rows = Store::open(db)?.export_rows(Some(summary.campaign.id))?;
    if let Some(r) = rows.iter().find(|r| r.status != "ok") {
        bail!("a run was {}: {}", r.status, r.reason);
    }
    let mut makespans: Vec<f64> = rows
        .iter()
        .filter(|r| r.process_index == Some(0))
        .filter_map(|r| r.makespan_ns.map(|m| m as f64 / 1e9))
        .collect();
    makespans.sort_by(f64::total_cmp);
    Ok((wall_s, makespans, rows))
}

pub fn run(o: TraceBenchOptions) -> Result<()> {
    if o.trials == 0 {
        bail!("--trials must be at least 1");
    }
    let tmp = tempfile::tempdir().context("creating a temporary directory")?;
    let db = tmp.path().join("bench-trace.db");
    outln!(
        "{} trials per side, 3 runs per campaign, 2 processes on CPU {}, traced and untraced \
         alternating; medians",
        o.trials,
        o.cpu
    )?;
    outln!(
        "{:<14} {:>12} {:>12} {:>7}   {:>13} {:>13} {:>7}",
        "workload",
        "wall plain",
        "wall traced",
        "ratio",
        "makespan pl.",
        "makespan tr.",
        "ratio"
    )?;
    let mut traced_rows: Vec<ExportRow> = Vec::new();
    for (label, kind, keys) in LOADS {
        let (mut wall, mut span) = ([Vec::new(), Vec::new()], [Vec::new(), Vec::new()]);
        for trial in 0..o.trials {
            // Alternate which side goes first, so drift hits both alike.
            let order = if trial % 2 == 0 {
                [false, true]
            } else {
                [true, false]
            };
            for trace in order {
                let (w, m, rows) = one(&db, &spec_text(kind, keys, o.cpu, trace, trial))
                    .with_context(|| format!("{label}, trace = {trace}"))?;
                wall[usize::from(trace)].push(w);
                span[usize::from(trace)].push(median(m));
                if trace {
                    traced_rows.extend(rows);
                }
            }
        }
        let w = [median(wall[0].clone()), median(wall[1].clone())];
        let m = [median(span[0].clone()), median(span[1].clone())];
        outln!(
            "{label:<14} {:>10.3} s {:>10.3} s {:>7.3}   {:>11.4} s {:>11.4} s {:>7.3}",
            w[0],
            w[1],
            w[1] / w[0],
            m[0],
            m[1],
            m[1] / m[0]
        )?;
    }
    outln!(
        "\nagreement over the traced runs' workers, each over its own work window (the window \
         of its schedstat and rusage figures):"
    )?;
    let workers: Vec<&ExportRow> = traced_rows
        .iter()
        .filter(|r| r.role.as_deref() == Some("worker"))
        .collect();
    let mut cpu_err = Vec::new();
    let mut sw_err = Vec::new();
    let mut lost = 0;
    for r in &workers {
        let (Some(t), Some(run_ns), Some(u)) = (&r.trace, r.run_ns, &r.usage) else {
            continue;
        };
        lost += t.lost_events;
        if let Some(on) = t.work_oncpu_ns.filter(|_| run_ns > 0) {
            cpu_err.push(on as f64 / run_ns as f64 - 1.0);
        }
        let rusage = (u.nvcsw + u.nivcsw) as f64;
        if let Some(switches) = t.work_switches
            && rusage > 0.0
        {
            sw_err.push(switches as f64 / rusage - 1.0);
        }
    }
    let show = |name: &str, v: &mut Vec<f64>| -> Result<()> {
        v.sort_by(f64::total_cmp);
        let within = v.iter().filter(|e| e.abs() <= 0.01).count();
        outln!(
            "  {name:<44} n={:<3} p50 {:+.2}%  p90 {:+.2}%  max |{:.2}|%  within 1%: {}/{}",
            v.len(),
            100.0 * percentile(v, 0.5),
            100.0 * percentile(v, 0.9),
            100.0 * v.iter().map(|e| e.abs()).fold(0.0, f64::max),
            within,
            v.len()
        )?;
        Ok(())
    };
    show("trace on-CPU time / schedstat run time − 1", &mut cpu_err)?;
    show("trace switches / rusage (nvcsw + nivcsw) − 1", &mut sw_err)?;
    outln!("  events lost over all traced runs: {lost}")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bench_specs_are_valid_and_differ_only_in_trace() {
        for (_, kind, keys) in LOADS {
            let on = crate::spec::load(&spec_text(kind, keys, 0, true, 1), "b", &[]).unwrap();
            let off = crate::spec::load(&spec_text(kind, keys, 0, false, 1), "b", &[]).unwrap();
            assert!(on.trace && !off.trace);
            assert_eq!(on.workloads, off.workloads);
            assert_eq!(on.processes, vec![2]);
            assert_eq!(on.repetitions, 3);
        }
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
    }
}
