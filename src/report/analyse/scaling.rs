//! How each metric grows with the number of processes: log–log fits.

use super::conditions::Condition;
use super::groups::{Factors, Group};
use super::policy_label;
use crate::report::metric::Metric;
use crate::stats::{self, Fit};
use serde::Serialize;

/// Mean of a condition at one process count, for scaling plots.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScalingPoint {
    pub processes: i64,
    pub n: usize,
    pub mean: f64,
    pub ci: Option<(f64, f64)>,
}

/// How a metric grows with the number of processes for one policy and
/// workload: log–log slope over every run (1 = linear).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Scaling {
    pub policy: String,
    pub workload: String,
    pub priority_mode: String,
    pub cpus: String,
    pub rt_runtime_us: Option<i64>,
    pub label: String,
    pub metric: Metric,
    pub fit: Option<Fit>,
    pub points: Vec<ScalingPoint>,
}

/// A scaling line: policy, workload, priority mode, CPUs, RT runtime.
pub(super) type LineKey = (String, String, String, String, Option<i64>);

/// Log–log fits against the number of processes, per policy, workload,
/// priority mode, CPUs and RT runtime, for every metric that varies.
pub(super) fn scaling_fits(
    conditions: &[Condition],
    groups: &[Group],
    factors: &Factors,
    metrics: &[Metric],
) -> Vec<Scaling> {
    let mut scaling = Vec::new();
    if factors.processes.len() >= 2 {
        let mut lines: Vec<(LineKey, Vec<usize>)> = Vec::new();
        for (ci, c) in conditions.iter().enumerate() {
            let g = &groups[c.group].key;
            let k = (
                c.policy.clone(),
                g.workload.clone(),
                g.priority_mode.clone(),
                g.cpus.clone(),
                g.rt_runtime_us,
            );
            match lines.iter_mut().find(|(lk, _)| lk == &k) {
                Some((_, v)) => v.push(ci),
                None => lines.push((k, vec![ci])),
            }
        }
        for ((policy, workload, mode, cpu, rt), conds) in lines {
            let distinct = conds
                .iter()
                .map(|&ci| groups[conditions[ci].group].key.processes)
                .collect::<std::collections::BTreeSet<_>>();
            if distinct.len() < 2 {
                continue;
            }
            let mut label = format!("{workload}, {}", policy_label(&policy));
            if factors.priority_modes.len() > 1 {
                label.push_str(&format!(", priorities {mode}"));
            }
            if factors.cpus.len() > 1 {
                label.push_str(&format!(", cpus {cpu}"));
            }
            if let Some(rt) = rt {
                label.push_str(&format!(", rt_runtime {rt} µs"));
            }
            for (slot, &metric) in metrics.iter().enumerate() {
                let mut xs = Vec::new();
                let mut ys = Vec::new();
                let mut points = Vec::new();
                for &ci in &conds {
                    let p = groups[conditions[ci].group].key.processes;
                    let cell = &conditions[ci].cells[slot];
                    for &v in &cell.values {
                        xs.push(p as f64);
                        ys.push(v);
                    }
                    if let Some(s) = &cell.summary {
                        points.push(ScalingPoint {
                            processes: p,
                            n: cell.n,
                            mean: s.mean,
                            ci: cell.ci.as_ref().map(|i| (i.lo, i.hi)),
                        });
                    }
                }
                if ys.iter().all(|&y| y == ys[0]) {
                    // Constant (e.g. fixed work): nothing scales.
                    continue;
                }
                scaling.push(Scaling {
                    policy: policy.clone(),
                    workload: workload.clone(),
                    priority_mode: mode.clone(),
                    cpus: cpu.clone(),
                    rt_runtime_us: rt,
                    label: label.clone(),
                    metric,
                    fit: stats::loglog_slope(&xs, &ys),
                    points,
                });
            }
        }
    }

    scaling
}
