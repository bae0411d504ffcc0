//! The raw per-condition tables (the seeds' appendices): every metric of
//! every condition.

use serde_json::{Value, json};

use super::{Section, Table};
use crate::report::analyse::{Analysis, Cell, CiMethod, policy_label};
use crate::report::blocks::Block;
use crate::report::fmt;
use crate::report::metric::Metric;

fn ci_text(cell: &Cell) -> String {
    cell.ci.as_ref().map_or_else(
        || "–".into(),
        |i| format!("{}–{}", fmt::num(i.lo), fmt::num(i.hi)),
    )
}

fn ci_method(cell: &Cell) -> String {
    match &cell.ci {
        None => "–".into(),
        Some(i) => match i.method {
            CiMethod::T => "t".into(),
            CiMethod::Bootstrap if cell.n < crate::report::analyse::BOOTSTRAP_MIN_N => {
                "bootstrap (skewed)".into()
            }
            CiMethod::Bootstrap => "bootstrap".into(),
        },
    }
}

/// The raw per-condition tables (the seeds' appendices): every metric.
pub struct ConditionsSection;

fn condition_table(a: &Analysis, slot: usize) -> (Vec<&'static str>, Vec<bool>, Vec<Vec<String>>) {
    let multi_mode = a.factors.priority_modes.len() > 1;
    let multi_cpus = a.factors.cpus.len() > 1;
    let rt = !a.factors.rt_runtime_us.is_empty();
    let failures = a.counts.not_ok() > 0;
    let metric = a.settings.metrics[slot];
    let mut h = vec!["workload", "processes"];
    if multi_mode {
        h.push("priorities");
    }
    if multi_cpus {
        h.push("cpus");
    }
    if rt {
        h.push("rt runtime (µs)");
    }
    h.push("policy");
    h.push("n");
    if failures {
        h.push("not ok");
    }
    h.extend([
        "mean",
        "95% CI",
        "CI method",
        "median",
        "sd",
        "CV",
        "min",
        "max",
    ]);
    if metric.per_process() {
        h.push("per process: mean (min–max)");
    }
    if metric == Metric::Work {
        h.push("unit");
    }
    let numeric: Vec<bool> = h
        .iter()
        .map(|c| {
            !matches!(
                *c,
                "workload" | "priorities" | "cpus" | "policy" | "CI method" | "unit"
            )
        })
        .collect();
    let rows = a
        .conditions
        .iter()
        .map(|c| {
            let g = &a.groups[c.group].key;
            let cell = &c.cells[slot];
            let s = cell.summary.as_ref();
            let f = |x: Option<f64>| x.map_or_else(|| "–".into(), fmt::num);
            let mut r = vec![g.workload.clone(), g.processes.to_string()];
            if multi_mode {
                r.push(g.priority_mode.clone());
            }
            if multi_cpus {
                r.push(g.cpus.clone());
            }
            if rt {
                r.push(
                    g.rt_runtime_us
                        .map_or_else(|| "–".into(), |v| v.to_string()),
                );
            }
            r.push(policy_label(&c.policy));
            r.push(cell.n.to_string());
            if failures {
                r.push(c.runs.not_ok().to_string());
            }
            r.push(f(s.map(|s| s.mean)));
            r.push(ci_text(cell));
            r.push(ci_method(cell));
            r.push(f(s.map(|s| s.median)));
            r.push(f(s.map(|s| s.sd)));
            r.push(
                s.and_then(|s| s.cv)
                    .map_or_else(|| "–".into(), |cv| format!("{}%", fmt::sig(100.0 * cv, 2))),
            );
            r.push(f(s.map(|s| s.min)));
            r.push(f(s.map(|s| s.max)));
            if metric.per_process() {
                r.push(cell.per_process.as_ref().map_or_else(
                    || "–".into(),
                    |p| {
                        format!(
                            "{} ({}–{})",
                            fmt::num(p.mean),
                            fmt::num(p.min),
                            fmt::num(p.max)
                        )
                    },
                ));
            }
            if metric == Metric::Work {
                r.push(a.unit(metric, &g.workload));
            }
            r
        })
        .collect();
    (h, numeric, rows)
}

fn metric_heading(a: &Analysis, m: Metric) -> String {
    let unit = if m == Metric::Work {
        String::new()
    } else if m.unit().is_empty() {
        " (count)".into()
    } else {
        format!(" ({})", m.unit())
    };
    let per = if m.per_process() {
        "per-run value = mean over the run's processes"
    } else {
        "one value per run"
    };
    let _ = a;
    format!("{} — {}{unit}; {per}", m.name(), m.label())
}

impl Section for ConditionsSection {
    fn id(&self) -> &'static str {
        "conditions"
    }

    fn title(&self) -> &'static str {
        "Per-condition tables"
    }

    fn applies(&self, a: &Analysis) -> bool {
        !a.conditions.is_empty()
    }

    fn blocks(&self, a: &Analysis) -> Vec<Block> {
        let mut b = vec![Block::html_only(vec![Block::p(
            "Every condition and metric: runs with a value (n), mean, 95% CI of the mean with its method, median, \
             standard deviation, coefficient of variation, range, and the per-process view (mean and range over \
             every process of every run).",
        )])];
        for (slot, &m) in a.settings.metrics.iter().enumerate() {
            let (h, n, rows) = condition_table(a, slot);
            b.push(Block::Heading {
                level: 3,
                text: metric_heading(a, m),
                id: Some(format!("table-{}", m.name())),
            });
            b.push(Block::table(Table {
                title: String::new(),
                headers: h.iter().map(|x| x.to_string()).collect(),
                numeric: n.to_vec(),
                rows,
            }));
            // Runs without a value are left out of n, and said so.
            for x in a.absent.iter().filter(|x| x.metric == m) {
                b.push(Block::p(format!(
                    "{}: {}.",
                    a.conditions[x.condition].label,
                    x.sentence()
                )));
            }
        }
        b
    }

    fn json(&self, a: &Analysis) -> Option<Value> {
        Some(json!({
            "factors": a.factors,
            "groups": a.groups,
            "conditions": a.conditions,
            "absent": a.absent,
        }))
    }
}
