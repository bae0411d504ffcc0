//! Other programs' sched_ext schedulers (`matrix.ext_scheduler`): per level,
//! the scheduler the kernel loaded (its `root/ops` name), how its runs
//! ended, how long it took to load, the CPU time of its program per run
//! (the user-space part of a BPF scheduler is overhead the workers do not
//! see in their own figures) and how the fair workers came under it.

use anyhow::Result;
use serde::Serialize;
use serde_json::Value;

use super::{Needs, RunDetails, Section, Table};
use crate::report::analyse::Analysis;
use crate::report::blocks::Block;
use crate::report::fmt;

/// One `matrix.ext_scheduler` level that loads a scheduler.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LevelRow {
    pub level: String,
    /// The kernel's names for it over the runs (one, unless it changed).
    pub ops: Vec<String>,
    pub ok: usize,
    pub failed: usize,
    pub skipped: usize,
    /// Medians over the runs that loaded it.
    pub load_ms_p50: Option<f64>,
    pub cpu_ms_p50: Option<f64>,
    /// The program's CPU time over the run's makespan, median, %.
    pub cpu_pct_of_makespan_p50: Option<f64>,
    /// Workers the scheduler took itself / moved to SCHED_EXT, summed.
    pub workers_taken: u64,
    pub workers_moved: u64,
}

/// The sched_ext schedulers of a campaign.
#[derive(Default)]
pub struct ExtSchedulersSection {
    rows: Vec<LevelRow>,
}

/// Runs of a level that loads a scheduler.
fn loading_runs(a: &Analysis) -> impl Iterator<Item = &crate::store::ReportRun> {
    a.runs.iter().filter(|r| {
        r.ext_scheduler
            .as_deref()
            .is_some_and(|l| l != crate::spec::ExtScheduler::NONE)
    })
}

/// The median of the finite values; None without one.
fn median(mut v: Vec<f64>) -> Option<f64> {
    v.retain(|x| x.is_finite());
    v.sort_by(f64::total_cmp);
    (!v.is_empty()).then(|| crate::stats::percentile(&v, 0.5))
}

impl Section for ExtSchedulersSection {
    fn id(&self) -> &'static str {
        "ext-schedulers"
    }

    fn title(&self) -> &'static str {
        "sched_ext schedulers"
    }

    fn needs(&self, a: &Analysis) -> Needs {
        Needs {
            documents: loading_runs(a).map(|r| r.id).collect(),
            ..Needs::default()
        }
    }

    fn prepare(&mut self, a: &Analysis, details: RunDetails) -> Result<()> {
        self.rows.clear();
        for level in &a.factors.ext_schedulers {
            if level == crate::spec::ExtScheduler::NONE {
                continue;
            }
            let runs: Vec<_> = loading_runs(a)
                .filter(|r| r.ext_scheduler.as_deref() == Some(level.as_str()))
                .collect();
            let mut row = LevelRow {
                level: level.clone(),
                ops: Vec::new(),
                ok: runs.iter().filter(|r| r.status == "ok").count(),
                failed: runs
                    .iter()
                    .filter(|r| r.status == "failed" || r.status == "timed_out")
                    .count(),
                skipped: runs.iter().filter(|r| r.status == "skipped").count(),
                load_ms_p50: None,
                cpu_ms_p50: None,
                cpu_pct_of_makespan_p50: None,
                workers_taken: 0,
                workers_moved: 0,
            };
            let (mut load, mut cpu, mut pct) = (Vec::new(), Vec::new(), Vec::new());
            for r in &runs {
                let Some((_, extra)) = details.documents.get(&r.id) else {
                    continue;
                };
                let Some(x) = extra.get("ext_scheduler") else {
                    continue;
                };
                if let Some(ops) = x.get("ops").and_then(Value::as_str)
                    && !row.ops.iter().any(|o| o == ops)
                {
                    row.ops.push(ops.to_string());
                }
                load.extend(x.get("load_ms").and_then(Value::as_f64));
                let cpu_ms = x.get("cpu_ms").and_then(Value::as_f64);
                cpu.extend(cpu_ms);
                if let (Some(c), Some(m)) = (cpu_ms, r.makespan_ns)
                    && m > 0
                {
                    pct.push(100.0 * c * 1e6 / m as f64);
                }
                row.workers_taken += x.get("workers_taken").and_then(Value::as_u64).unwrap_or(0);
                row.workers_moved += x
                    .get("workers_moved_to_sched_ext")
                    .and_then(Value::as_u64)
                    .unwrap_or(0);
            }
            row.load_ms_p50 = median(load);
            row.cpu_ms_p50 = median(cpu);
            row.cpu_pct_of_makespan_p50 = median(pct);
            self.rows.push(row);
        }
        Ok(())
    }

    fn applies(&self, a: &Analysis) -> bool {
        loading_runs(a).next().is_some()
    }

    fn blocks(&self, _a: &Analysis) -> Vec<Block> {
        let opt = |v: Option<f64>| v.map_or_else(|| "–".to_string(), fmt::num);
        let rows = self
            .rows
            .iter()
            .map(|r| {
                vec![
                    r.level.clone(),
                    if r.ops.is_empty() {
                        "–".into()
                    } else {
                        r.ops.join(", ")
                    },
                    format!("{} / {} / {}", r.ok, r.failed, r.skipped),
                    opt(r.load_ms_p50),
                    opt(r.cpu_ms_p50),
                    opt(r.cpu_pct_of_makespan_p50),
                    format!("{} / {}", r.workers_taken, r.workers_moved),
                ]
            })
            .collect();
        vec![
            Block::p(
                "Each run of these levels started the program before its workers, waited until \
                 the kernel reported its scheduler enabled, and stopped it after. The program's \
                 CPU time (its whole life: loading, the run, unloading) is work the machine did \
                 for scheduling that the workers' own figures do not show. Workers of the fair \
                 policies are taken by a scheduler in switch-all mode; one in partial mode gets \
                 them moved to SCHED_EXT. Failed and skipped runs are listed with their reasons \
                 under \"Failed, timed-out and skipped runs\".",
            ),
            Block::table(Table {
                title: String::new(),
                headers: [
                    "level",
                    "kernel's name",
                    "runs ok / failed / skipped",
                    "load, ms (median)",
                    "program CPU per run, ms (median)",
                    "program CPU, % of makespan (median)",
                    "workers taken / moved",
                ]
                .map(String::from)
                .to_vec(),
                numeric: vec![false, false, false, true, true, true, false],
                rows,
            }),
        ]
    }

    fn json(&self, _a: &Analysis) -> Option<Value> {
        serde_json::to_value(&self.rows).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(vec![f64::NAN]), None);
        assert_eq!(median(Vec::new()), None);
    }
}
