//! The first screen's lanes, pure: for each condition of a workload whose
//! workers could use more than one CPU, one lane per CPU with that CPU's
//! utilisation over the run (`extra.cpu_busy_pct`, from /proc/stat: every
//! CPU's busy share of the run's wall time, the run's own work and
//! anything else), the median over the condition's ok runs; and each
//! machine level's environment in one line (kernel, CPUs and topology,
//! accelerator and what its timings are worth).

use crate::report::analyse::Analysis;
use crate::report::fmt;
use crate::report::svg::{GanttBar, GanttChart, GanttRow, Meta, PALETTE, Series};
use crate::store::ReportEnvironment;

/// One CPU's utilisation over a condition's runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Lane {
    pub cpu: usize,
    /// Median, least and most over the runs that measured it (%).
    pub median_pct: f64,
    pub min_pct: f64,
    pub max_pct: f64,
    pub runs: usize,
}

/// The lanes of one condition.
#[derive(Debug, Clone, PartialEq)]
pub struct ConditionLanes {
    /// Index into [`Analysis::conditions`].
    pub condition: usize,
    pub label: String,
    pub lanes: Vec<Lane>,
}

/// The lanes of `workload`'s conditions that ran on more than one CPU and
/// measured each CPU's utilisation, in the analysis's order.
pub fn lanes(a: &Analysis, workload: &str) -> Vec<ConditionLanes> {
    let mut out = Vec::new();
    for (ci, c) in a.conditions.iter().enumerate() {
        let g = &a.groups[c.group];
        if g.key.workload != workload || c.cpus_used < 2 {
            continue;
        }
        let mut by_cpu: std::collections::BTreeMap<usize, Vec<f64>> = Default::default();
        for r in a.runs.iter().filter(|r| {
            r.status == "ok"
                && r.policy == c.policy
                && super::super::group_of(a, r) == Some(c.group)
        }) {
            for &(cpu, pct) in &r.cpu_busy_pct {
                by_cpu.entry(cpu).or_default().push(pct);
            }
        }
        if by_cpu.len() < 2 {
            continue;
        }
        let lanes = by_cpu
            .into_iter()
            .filter_map(|(cpu, v)| {
                let s = crate::stats::summary::summarize(&v)?;
                Some(Lane {
                    cpu,
                    median_pct: s.median,
                    min_pct: s.min,
                    max_pct: s.max,
                    runs: v.len(),
                })
            })
            .collect();
        out.push(ConditionLanes {
            condition: ci,
            label: c.label.clone(),
            lanes,
        });
    }
    out
}

/// "CPU 0 98 %, CPU 1 3 %".
pub fn line(l: &ConditionLanes) -> String {
    l.lanes
        .iter()
        .map(|x| format!("CPU {} {} %", x.cpu, fmt::sig(x.median_pct, 2)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The lanes as one chart: a row per condition and CPU, its bar the CPU's
/// median utilisation (0–100 %), coloured by condition.
pub fn chart(workload: &str, all: &[ConditionLanes]) -> GanttChart {
    let mut rows = Vec::new();
    let mut bars = Vec::new();
    let mut legend = Vec::new();
    for (k, c) in all.iter().enumerate() {
        let colour = PALETTE[k % PALETTE.len()].to_string();
        legend.push(Series {
            name: c.label.clone(),
            colour: colour.clone(),
        });
        for l in &c.lanes {
            bars.push(GanttBar {
                row: rows.len(),
                start: 0.0,
                end: l.median_pct.clamp(0.0, 100.0),
                inner_end: None,
                tooltip: format!(
                    "{}: CPU {} busy {} % (median; {}–{} % over {} runs)",
                    c.label,
                    l.cpu,
                    fmt::sig(l.median_pct, 3),
                    fmt::sig(l.min_pct, 3),
                    fmt::sig(l.max_pct, 3),
                    l.runs
                ),
                colour: None,
            });
            rows.push(GanttRow {
                label: format!("{} · CPU {}", short(&c.label), l.cpu),
                colour: colour.clone(),
            });
        }
    }
    GanttChart {
        meta: Meta {
            kind: "first-lanes",
            id: format!("first-lanes-{workload}"),
            data: vec![("workload", workload.to_string())],
            title: format!("{workload}: each CPU's utilisation, a lane per CPU"),
            y_label: String::new(),
            x_label:
                "% of the run's wall time busy (median over the condition's ok runs; /proc/stat)"
                    .into(),
        },
        rows,
        bars,
        x_max: 100.0,
        note: "Every program's use of the CPU counts, the run's workers and anything else".into(),
        legend,
    }
}

/// A condition's label without its workload (the chart is of one).
fn short(label: &str) -> &str {
    label.split_once(", ").map_or(label, |(_, rest)| rest)
}

/// Each machine level's environment in one line, in the order of the
/// analysis's environments: "cfs: Linux 6.1.0 (HZ 250, voluntary), 4 CPUs:
/// 2 sockets × 2 cores × 1 thread, under TCG (emulation timings)". Empty
/// when the campaign does not sweep `matrix.machine`.
pub fn machine_environments(a: &Analysis) -> Vec<String> {
    if a.factors.machines.is_empty() {
        return Vec::new();
    }
    a.environments.iter().map(environment_line).collect()
}

fn environment_line(e: &ReportEnvironment) -> String {
    let level = e.guest_machine.clone().unwrap_or_else(|| "host".into());
    let hz = e.hz.map_or_else(String::new, |h| format!("HZ {h}, "));
    let cpus = match &e.topology {
        Some(t) => t.to_string(),
        None => format!("{} CPUs", e.cpus_online),
    };
    let accel = match e.guest_accel.as_deref() {
        None => "this machine".to_string(),
        Some("tcg") => {
            "a guest under TCG (times are emulation timings; orders, counts and placements hold)"
                .into()
        }
        Some("tcg-icount") => "a guest under TCG with icount (virtual time, deterministic)".into(),
        Some(x) => format!("a guest under {x}"),
    };
    format!(
        "{level}: Linux {} ({hz}{}), {cpus}; {accel}; {} runs",
        e.kernel_release, e.preempt_model, e.runs
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lane_per_cpu_with_the_median_over_ok_runs() {
        use crate::testing::planted::{Planted, report_data};
        let data = report_data(&Planted::new(4), false, 1).unwrap();
        let mut a = crate::report::analyse::analyse_data(data, &Default::default());
        // The planted runs are pinned to CPU 0: one CPU, no lanes.
        let wl = a.factors.workloads[0].name.clone();
        for r in a.runs.iter_mut() {
            r.cpu_busy_pct = vec![(0, 99.0), (1, 1.0)];
        }
        assert!(lanes(&a, &wl).is_empty());
        // As if their workers could use two.
        for c in a.conditions.iter_mut() {
            c.cpus_used = 2;
        }
        // The ok runs of each condition measured CPU 0 and CPU 1.
        let mut k = 0.0;
        for r in a.runs.iter_mut().filter(|r| r.status == "ok") {
            k += 1.0;
            r.cpu_busy_pct = vec![(0, 90.0 + k), (1, 10.0 * k)];
        }
        let l = lanes(&a, &wl);
        assert_eq!(l.len(), a.conditions.len());
        for c in &l {
            assert_eq!(c.lanes.len(), 2, "{c:?}");
            assert_eq!(c.lanes[0].cpu, 0);
            assert!(c.lanes[0].min_pct <= c.lanes[0].median_pct);
            assert!(c.lanes[0].median_pct <= c.lanes[0].max_pct);
            assert!(c.lanes[0].median_pct > 90.0 && c.lanes[1].median_pct >= 10.0);
        }
        let svg = chart(&wl, &l).render();
        assert!(
            svg.contains("first-lanes") && svg.contains("CPU 1"),
            "{svg}"
        );
        assert!(line(&l[0]).starts_with("CPU 0 9"), "{}", line(&l[0]));
        // Without the measurement, no lanes.
        for r in a.runs.iter_mut() {
            r.cpu_busy_pct.clear();
        }
        assert!(lanes(&a, &wl).is_empty());
    }
}
