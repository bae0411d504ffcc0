//! Jain's fairness index within runs, and CPU shares against the kernel's
//! nice-to-weight prediction.

use serde_json::{Value, json};

use super::{Section, Table, plural};
use crate::report::analyse::{Analysis, ShareCheck};
use crate::report::blocks::{Block, Figure};
use crate::report::{charts, fmt};

/// Jain's index within runs, and CPU shares against the weight table.
pub struct FairnessSection;

fn shares_intro(a: &Analysis) -> String {
    let mut t = String::from(
        "Under non-uniform nice with a fair policy, each process's observed CPU share against the share the \
         kernel's nice-to-weight table predicts (its weight over the sum of the weights). Observed share: with a \
         duration, the process's CPU time over what all received in the run's common window (release to release \
         + duration); with fixed work, its CPU time over its own wall time, normalised over the run; averaged \
         over runs. The prediction \
         assumes every process is runnable the whole time on one shared CPU: it is only meaningful when the \
         processes compete on the same CPUs the whole time.",
    );
    if a.shares.iter().any(|s| s.fixed_work) {
        t.push_str(
            " With a fixed amount of work per process, heavier processes finish first and leave the CPU to the \
             others, so observed shares are pulled towards equal and a large deviation does not contradict the \
             weights; a workload with duration_s (every process runs for the same time) gives a faithful check.",
        );
    }
    t
}

/// Whether the premise of the prediction holds for one condition.
fn share_context(s: &ShareCheck) -> String {
    let work = if s.fixed_work {
        "fixed work per process (shares pulled towards equal)"
    } else {
        "every process ran for the same duration"
    };
    if !s.competing {
        format!(
            "{} on {}: they did not all compete for one CPU, so the prediction does not apply (illustration only); {work}.",
            plural(s.processes, "process", "processes"),
            plural(s.cpus_used, "CPU", "CPUs")
        )
    } else if s.cpus_used > 1 {
        format!(
            "{} spread over {} CPUs: load balancing, not only the weights, shapes the shares; {work}.",
            plural(s.processes, "process", "processes"),
            s.cpus_used
        )
    } else {
        format!(
            "{} pinned to one CPU, competing for it the whole time; {work}.",
            plural(s.processes, "process", "processes")
        )
    }
}

/// Whether the duration runs' windows were common, as shares and Jain's
/// index over them assume.
fn window_note(a: &Analysis) -> Option<String> {
    let w = &a.windows;
    if w.runs_checked == 0 {
        return None;
    }
    if w.differing.is_empty() {
        return Some(format!(
            "Common window: in all {} of duration workloads every worker's measured window ended within {} ms \
             (or 1% of the run) of the others, so shares and indices compare like with like.",
            plural(w.runs_checked, "run", "runs"),
            crate::report::analyse::WINDOW_TOLERANCE_MS
        ));
    }
    let worst = w
        .differing
        .iter()
        .max_by(|a, b| a.spread_ms.total_cmp(&b.spread_ms))
        .expect("non-empty");
    Some(format!(
        "Windows differ: in {} of {} of duration workloads the workers' measured windows ended more than {} ms \
         (and 1% of the run) apart, the largest {} ms in {}. Over those runs a process that ran longer has a \
         larger share than the scheduler gave it in the common window.",
        w.differing.len(),
        plural(w.runs_checked, "run", "runs"),
        crate::report::analyse::WINDOW_TOLERANCE_MS,
        fmt::sig(worst.spread_ms, 3),
        worst.label
    ))
}

fn jain_note(a: &Analysis) -> Option<&'static str> {
    a.factors.workloads.iter().all(|w| !w.duration_based).then_some(
        "Every workload here does a fixed amount of work per process, so each process needs the same CPU time and \
         does the same work: both indices are close to 1 by design. They become informative with duration-based \
         workloads (duration_s), where the scheduler decides how much each process gets.",
    )
}

fn jain_rows(a: &Analysis) -> Vec<Vec<String>> {
    a.fairness
        .iter()
        .map(|f| {
            let s = |x: &Option<crate::stats::Summary>, what: fn(&crate::stats::Summary) -> f64| {
                x.as_ref()
                    .map_or_else(|| "–".into(), |s| format!("{:.4}", what(s)))
            };
            vec![
                f.label.clone(),
                f.jain_cpu.as_ref().map_or(0, |s| s.n).to_string(),
                s(&f.jain_cpu, |s| s.mean),
                s(&f.jain_cpu, |s| s.min),
                s(&f.jain_work, |s| s.mean),
                s(&f.jain_work, |s| s.min),
            ]
        })
        .collect()
}

const JAIN_HEADERS: [&str; 6] = [
    "condition",
    "runs",
    "Jain CPU mean",
    "Jain CPU min",
    "Jain work mean",
    "Jain work min",
];
const JAIN_NUMERIC: [bool; 6] = [false, true, true, true, true, true];

fn share_rows(s: &ShareCheck) -> Vec<Vec<String>> {
    s.rows
        .iter()
        .map(|r| {
            vec![
                r.index.to_string(),
                r.nice.to_string(),
                format!("{}%", fmt::sig(100.0 * r.predicted, 3)),
                format!("{}%", fmt::sig(100.0 * r.observed, 3)),
                format!("{:+.1}%", 100.0 * r.error),
            ]
        })
        .collect()
}

const SHARE_HEADERS: [&str; 5] = ["process", "nice", "predicted", "observed", "error"];
const SHARE_NUMERIC: [bool; 5] = [true, true, true, true, true];

impl Section for FairnessSection {
    fn id(&self) -> &'static str {
        "fairness"
    }

    fn title(&self) -> &'static str {
        "Fairness within runs"
    }

    fn applies(&self, a: &Analysis) -> bool {
        !a.fairness.is_empty()
    }

    fn blocks(&self, a: &Analysis) -> Vec<Block> {
        let mut b = vec![
            Block::html_only(vec![Block::p(
                "Jain's fairness index (Σx)²/(n·Σx²) of the processes of each run: 1 when every process got the \
                 same, 1/n when one got everything. Computed on CPU time (user + system) and on work done, then \
                 summarised over the runs of each condition.",
            )]),
            Block::md_only(vec![Block::p(
                "Jain's index (Σx)²/(n·Σx²) of the processes of each run: 1 = all equal, 1/n = one process got \
                 everything.",
            )]),
        ];
        let charts: Vec<Figure> = a
            .factors
            .workloads
            .iter()
            .filter_map(|w| charts::jain(a, &w.name))
            .map(|c| Figure {
                svg: c.render(),
                caption: "Mean Jain's index of CPU time over runs, with 95% CI.".into(),
            })
            .collect();
        if !charts.is_empty() {
            b.push(Block::Figures(charts));
        }
        b.extend(jain_note(a).map(Block::p));
        b.extend(window_note(a).map(Block::p));
        b.push(Block::table(Table {
            title: String::new(),
            headers: JAIN_HEADERS.map(String::from).to_vec(),
            numeric: JAIN_NUMERIC.to_vec(),
            rows: jain_rows(a),
        }));
        if a.shares.is_empty() {
            return b;
        }
        b.push(Block::heading(
            3,
            "CPU share against the nice-weight prediction",
        ));
        let intro = shares_intro(a);
        b.push(Block::html_only(vec![Block::Note(vec![Block::p(&intro)])]));
        b.push(Block::md_only(vec![Block::p(intro)]));
        for s in &a.shares {
            b.push(Block::RunIn {
                title: s.label.clone(),
                text: share_context(s),
            });
            let rows = share_rows(s);
            b.push(Block::FigureTable {
                figure: Figure {
                    svg: charts::shares(a, s).render(),
                    caption: format!(
                        "{} over {}; dashed: observed = predicted; largest relative error {:.0}%.",
                        plural(s.processes, "process", "processes"),
                        plural(s.runs, "run", "runs"),
                        100.0 * s.max_abs_error
                    ),
                },
                collapsed: (rows.len() > 12).then(|| "Per process".to_string()),
                table: Table {
                    title: String::new(),
                    headers: SHARE_HEADERS.map(String::from).to_vec(),
                    numeric: SHARE_NUMERIC.to_vec(),
                    rows,
                },
            });
        }
        b
    }

    fn json(&self, a: &Analysis) -> Option<Value> {
        Some(json!({ "jain": a.fairness, "shares": a.shares, "windows": a.windows }))
    }
}
