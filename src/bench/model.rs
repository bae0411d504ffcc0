//! `schedlab bench model`: the model against the machine on scaled-down
//! presets (quick, a subset of policies and of priorities, wrr-weights,
//! rt-throttle, eevdf-slice and a periodic task under FIFO), each measured
//! as a campaign and then simulated from its own plan exactly as the
//! report's model section does it ([`crate::report::sections::ModelSection`]).
//! Every figure's prediction error is printed beside the run-to-run
//! spread and other programs' activity over its runs (the model simulates
//! schedlab's processes alone), with issue 20's target for it met or
//! missed: printed, never asserted.

use anyhow::{Context, Result, bail};
use std::path::PathBuf;

use crate::campaign::{self, Options};
use crate::report::analyse::model::{ModelCheck, ModelMetric, ModelRow, OrderCheck};
use crate::report::fmt::{self, Align};
use crate::report::sections::{ModelSection, RunDetails, Section, others_cell};
use crate::store::Store;

/// What to measure.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelBenchOptions {
    /// Multiplies every case's own scale (work and durations).
    pub scale: f64,
    pub repetitions: u32,
    /// Keep the campaigns in this database (default: a temporary one).
    pub db: Option<PathBuf>,
    /// Only these cases (all if empty).
    pub only: Vec<String>,
}

impl Default for ModelBenchOptions {
    fn default() -> Self {
        ModelBenchOptions {
            scale: 1.0,
            repetitions: 3,
            db: None,
            only: Vec::new(),
        }
    }
}

/// One scaled-down preset.
struct Case {
    key: &'static str,
    /// A preset's name, or None for `text`.
    preset: Option<&'static str>,
    text: &'static str,
    /// Its scale at `--scale 1`.
    scale: f64,
    overrides: &'static [&'static str],
}

/// A periodic task beside two fair hogs on CPU 0, under OTHER and FIFO:
/// the timer wake-up cost is calibrated on FIFO (where the task is not
/// queued behind the hogs) and OTHER's wake-up is predicted from it.
const PERIODIC_FIFO: &str = r#"name = "bench-model-periodic-fifo"
cooldown_s = 0.2
timeout_s = 30
[matrix]
policy = ["other", "fifo"]
workload = ["periodic"]
processes = [1]
cpus = ["0"]
[workloads.periodic]
period_us = 5000
run_us = 500
duration_s = 2
[hog]
policy = "other"
count = 2
cpus = "0"
"#;

/// Free CPU hogs on every CPU of the host: 2 and 4 pi workers with
/// `cpus = "all"` (issue 31: placement and load balancing), calibrated on
/// the 2-process condition.
const MULTI_HOGS: &str = r#"name = "bench-model-multi-hogs"
cooldown_s = 0.2
timeout_s = 60
[matrix]
policy = ["other"]
workload = ["pi"]
processes = [2, 3, 4]
cpus = ["all"]
[workloads.pi]
iterations = 400000000
"#;

/// A periodic task among two free hogs on every CPU, under FIFO (the
/// calibration: the task is never queued) and OTHER (predicted: where it
/// wakes, whom it waits behind).
const MULTI_PERIODIC: &str = r#"name = "bench-model-multi-periodic"
cooldown_s = 0.2
timeout_s = 30
[matrix]
policy = ["fifo", "other"]
workload = ["periodic"]
processes = [1]
cpus = ["all"]
[workloads.periodic]
period_us = 5000
run_us = 500
duration_s = 2
[hog]
policy = "other"
count = 2
cpus = "all"
"#;

const CASES: &[Case] = &[
    Case {
        key: "quick",
        preset: Some("quick"),
        text: "",
        scale: 0.25,
        overrides: &[],
    },
    Case {
        key: "policies",
        preset: Some("policies"),
        text: "",
        scale: 0.25,
        overrides: &[
            "matrix.workload=[\"pi\"]",
            "matrix.processes=[5]",
            "matrix.cpus=[\"0\"]",
            "cooldown_s=0.2",
        ],
    },
    Case {
        key: "priorities",
        preset: Some("priorities"),
        text: "",
        scale: 0.1,
        overrides: &[
            "matrix.workload=[\"pi\"]",
            "matrix.processes=[10]",
            "matrix.cpus=[\"0\"]",
            "cooldown_s=0.2",
        ],
    },
    Case {
        key: "wrr-weights",
        preset: Some("wrr-weights"),
        text: "",
        scale: 0.1,
        overrides: &["matrix.policy=[\"other\", \"wrr\"]", "cooldown_s=0.2"],
    },
    Case {
        key: "rt-throttle",
        preset: Some("rt-throttle"),
        text: "",
        scale: 0.25,
        overrides: &[
            "matrix.workload=[\"pi\"]",
            "workloads.pi.duration_s=8.0",
            "matrix.rt_runtime_us=[950000, 800000, 500000]",
            "cooldown_s=0.2",
        ],
    },
    Case {
        key: "eevdf-slice",
        preset: Some("eevdf-slice"),
        text: "",
        scale: 0.5,
        overrides: &["matrix.slice_us=[100, 1000, 10000]"],
    },
    Case {
        key: "periodic-fifo",
        preset: None,
        text: PERIODIC_FIFO,
        scale: 0.5,
        overrides: &[],
    },
    Case {
        key: "multi-hogs",
        preset: None,
        text: MULTI_HOGS,
        scale: 0.5,
        overrides: &[],
    },
    Case {
        key: "multi-periodic",
        preset: None,
        text: MULTI_PERIODIC,
        scale: 0.5,
        overrides: &[],
    },
];

/// The model's scale figure (no measurement; `--only scale` alone).
const SCALE: &str = "scale";

/// Issue 20's target for a figure, and whether the row meets it.
pub fn target(case: &str, r: &ModelRow) -> Option<(&'static str, bool)> {
    let err = r.predicted - r.measured.mean;
    let rel = r.rel_error.map_or(f64::INFINITY, f64::abs);
    let fair = matches!(r.policy.as_str(), "other" | "batch" | "idle");
    Some(match r.metric {
        ModelMetric::WorkerShare if r.policy == "wrr" => ("within 0.5 %", rel <= 0.005),
        ModelMetric::Share if case == "rt-throttle" => ("within 0.5 pp", err.abs() <= 0.5),
        ModelMetric::Share | ModelMetric::WorkerShare if r.policy != "wrr" => {
            ("within 1 pp", err.abs() <= 1.0)
        }
        ModelMetric::Completion | ModelMetric::Makespan => ("within 3 %", rel <= 0.03),
        ModelMetric::InvolSwitches if r.policy == "rr" => ("within 1/process", err.abs() <= 1.0),
        ModelMetric::Slices if fair && r.workload != "periodic" => ("within 20 %", rel <= 0.2),
        ModelMetric::WakeupP50 if r.policy == "fifo" => ("within 10 µs", err.abs() <= 10.0),
        ModelMetric::WakeupP50 if case.starts_with("multi") => {
            ("within 10 µs or 10 %", err.abs() <= 10.0 || rel <= 0.1)
        }
        ModelMetric::Migrations => ("within 25 % or 2", err.abs() <= 2.0 || rel <= 0.25),
        _ => return None,
    })
}

fn spec_of(case: &Case, o: &ModelBenchOptions) -> Result<(crate::spec::Spec, String, Vec<String>)> {
    let text = match case.preset {
        Some(name) => crate::spec::presets::find(name)
            .with_context(|| format!("preset {name}"))?
            .toml
            .to_string(),
        None => case.text.to_string(),
    };
    let mut overrides: Vec<String> = case.overrides.iter().map(|s| s.to_string()).collect();
    overrides.push(format!("scale={:?}", case.scale * o.scale));
    overrides.push(format!("repetitions={}", o.repetitions));
    overrides.push(format!("name=\"bench-model-{}\"", case.key));
    let spec = crate::spec::load(&text, case.key, &overrides)?;
    Ok((spec, text, overrides))
}

/// Measure one case into `db` and check the model against it.
fn measure(case: &Case, o: &ModelBenchOptions, db: &std::path::Path) -> Result<ModelCheck> {
    let (spec, text, overrides) = spec_of(case, o)?;
    let opts = Options {
        db: db.to_path_buf(),
        quiet: true,
        retry_failed: false,
        force: false,
        allow_concurrent: false,
    };
    let summary = campaign::run(&spec, case.key, &text, &overrides, &opts)?;
    if let Some(sig) = summary.interrupted {
        bail!("interrupted by signal {sig}");
    }
    let store = Store::open(db)?;
    let aopts = crate::report::Options {
        campaign: Some(summary.campaign.id),
        ..crate::report::Options::default()
    };
    let a = crate::report::analyse(&store, &aopts)?;
    let mut section = ModelSection::default();
    let details = RunDetails::load(&store, &section.needs(&a))?;
    section.prepare(&a, details)?;
    match section.check() {
        Some(c) => Ok(c.clone()),
        None => bail!(
            "{}: {}",
            case.key,
            section.skipped().unwrap_or("no model check")
        ),
    }
}

fn row_cells(case: &str, r: &ModelRow) -> Vec<String> {
    let f = |v: f64| fmt::sig(v, 4);
    let unit = if r.unit.is_empty() {
        String::new()
    } else {
        format!(" {}", r.unit)
    };
    let (goal, verdict) = match target(case, r) {
        Some((g, true)) => (g, "met"),
        Some((g, false)) => (g, "missed"),
        None => ("–", "–"),
    };
    vec![
        format!(
            "{}{}",
            r.label,
            if r.calibration { " [calibration]" } else { "" }
        ),
        format!("{} ({})", r.metric.name(), r.class),
        format!("{}{unit}", f(r.predicted)),
        match r.measured.ci {
            Some((lo, hi)) => format!("{} ({}–{}){unit}", f(r.measured.mean), f(lo), f(hi)),
            None => format!("{}{unit}", f(r.measured.mean)),
        },
        r.rel_error
            .map_or_else(|| "–".into(), |e| format!("{:+.2} %", 100.0 * e)),
        format!("{}{unit}", f(r.predicted - r.measured.mean)),
        r.measured
            .cv
            .map_or_else(|| "–".into(), |c| format!("{:.2} %", 100.0 * c)),
        others_cell(&r.others),
        goal.to_string(),
        verdict.to_string(),
    ]
}

fn order_cells(o: &OrderCheck) -> Vec<String> {
    let exact = o.runs_matching == o.runs;
    vec![
        o.label.clone(),
        "completion order".into(),
        o.predicted
            .iter()
            .map(|i| format!("p{i}"))
            .collect::<Vec<_>>()
            .join(" "),
        format!("{} of {} runs in that order", o.runs_matching, o.runs),
        "–".into(),
        "–".into(),
        "–".into(),
        "–".into(),
        "exact".into(),
        if exact { "met" } else { "missed" }.into(),
    ]
}

const HEADERS: [&str; 10] = [
    "condition",
    "figure",
    "predicted",
    "measured mean (95 % CI)",
    "error",
    "predicted − measured",
    "spread (CV)",
    "others: CPU / runnable (most)",
    "target",
    "",
];
/// The verdict's column.
const VERDICT: usize = HEADERS.len() - 1;
const ALIGN: [Align; 10] = [
    Align::Left,
    Align::Left,
    Align::Right,
    Align::Right,
    Align::Right,
    Align::Right,
    Align::Right,
    Align::Right,
    Align::Left,
    Align::Left,
];

/// Run the chosen cases and print each one's table; returns (met, missed).
pub fn run(o: ModelBenchOptions) -> Result<(usize, usize)> {
    if !(o.scale > 0.0 && o.scale.is_finite()) {
        bail!("--scale: give a positive number, e.g. 0.5");
    }
    if o.repetitions < 2 {
        bail!("--repetitions: at least 2, for a confidence interval and a spread");
    }
    let mut keys: Vec<&str> = CASES.iter().map(|c| c.key).collect();
    keys.push(SCALE);
    if let Some(bad) = o.only.iter().find(|k| !keys.contains(&k.as_str())) {
        bail!(
            "--only: unknown case \"{bad}\"; allowed: {}",
            keys.join(", ")
        );
    }
    let tmp = tempfile::tempdir().context("creating a temporary directory")?;
    let db =
        o.db.clone()
            .unwrap_or_else(|| tmp.path().join("bench-model.db"));
    let (mut met, mut missed) = (0, 0);
    let chosen = |k: &str| o.only.is_empty() || o.only.iter().any(|x| x == k);
    for case in CASES.iter().filter(|c| chosen(c.key)) {
        let c = measure(case, &o, &db).with_context(|| format!("case {}", case.key))?;
        outln!("\n## {}\n", case.key)?;
        for k in &c.calibrations {
            outln!(
                "calibration: {} — {} on {}",
                k.workload,
                k.parameter,
                k.condition
            )?;
        }
        let mut rows: Vec<Vec<String>> = c.rows.iter().map(|r| row_cells(case.key, r)).collect();
        rows.extend(c.orders.iter().map(order_cells));
        for r in &rows {
            match r[VERDICT].as_str() {
                "met" => met += 1,
                "missed" => missed += 1,
                _ => {}
            }
        }
        outln!()?;
        outln!("{}", fmt::md_table(&HEADERS, &ALIGN, &rows))?;
        for s in &c.shortfalls {
            outln!("not predicted: {}: {}", s.label, s.reason)?;
        }
        for f in &c.findings {
            outln!("finding: {f}")?;
        }
    }
    if chosen(SCALE) {
        match super::model_scale::run()? {
            true => met += 1,
            false => missed += 1,
        }
    }
    outln!(
        "\ntargets (issues 20 and 31; printed, not asserted): {met} met, {missed} missed. Model parameters: \
         the machine from each campaign's environment, EEVDF base slice the kernel's default \
         formula; speeds and wake-up costs calibrated on each campaign's [calibration] condition."
    )?;
    Ok((met, missed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_case_makes_a_valid_spec() {
        let o = ModelBenchOptions::default();
        for c in CASES {
            let (spec, _, _) = spec_of(c, &o).unwrap_or_else(|e| panic!("{}: {e:#}", c.key));
            assert_eq!(spec.repetitions, 3, "{}", c.key);
            assert!(spec.name.ends_with(c.key));
        }
    }

    #[test]
    fn targets_follow_the_issue() {
        let row = |metric, policy: &str, predicted: f64, mean: f64| ModelRow {
            condition: 0,
            label: "x".into(),
            policy: policy.into(),
            workload: "pi".into(),
            metric,
            unit: metric.unit(),
            class: "all".into(),
            calibration: false,
            predicted,
            measured: crate::report::analyse::model::Measured {
                n: 3,
                mean,
                sd: 0.0,
                ci: None,
                cv: None,
            },
            rel_error: Some((predicted - mean) / mean),
            covered: None,
            runs_below: 0,
            runs_above: 0,
            others: Default::default(),
        };
        assert_eq!(
            target("quick", &row(ModelMetric::Share, "other", 50.0, 50.9)),
            Some(("within 1 pp", true))
        );
        assert_eq!(
            target("quick", &row(ModelMetric::Share, "other", 50.0, 51.1)),
            Some(("within 1 pp", false))
        );
        assert_eq!(
            target("rt-throttle", &row(ModelMetric::Share, "other", 5.0, 5.6)).map(|t| t.1),
            Some(false)
        );
        assert_eq!(
            target("w", &row(ModelMetric::WorkerShare, "wrr", 10.0, 10.04)).map(|t| t.1),
            Some(true)
        );
        assert_eq!(
            target("w", &row(ModelMetric::WorkerShare, "wrr", 10.0, 10.1)).map(|t| t.1),
            Some(false)
        );
        assert_eq!(
            target("w", &row(ModelMetric::Share, "wrr", 10.0, 10.1)),
            None
        );
        assert_eq!(
            target("q", &row(ModelMetric::Makespan, "fifo", 1.0, 1.04)).map(|t| t.1),
            Some(false)
        );
        assert_eq!(
            target("q", &row(ModelMetric::InvolSwitches, "rr", 4.0, 5.5)).map(|t| t.1),
            Some(false)
        );
        assert_eq!(
            target("q", &row(ModelMetric::InvolSwitches, "other", 4.0, 5.5)),
            None
        );
        assert_eq!(
            target("q", &row(ModelMetric::Slices, "other", 100.0, 85.0)).map(|t| t.1),
            Some(true)
        );
        assert_eq!(
            target("p", &row(ModelMetric::WakeupP50, "fifo", 60.0, 71.0)).map(|t| t.1),
            Some(false)
        );
    }
}
