//! The model beside the measurement: the campaign's own plan simulated at
//! report time ([`crate::report::analyse::model`]) and each predicted
//! figure against the measured runs, with the calibration condition
//! marked, the parameters used, what the model does not predict, and the
//! deviations beyond the noise as findings. A simulated campaign, or a
//! report `--by` host or kernel, gets one line saying why it has none.

use anyhow::Result;
use serde_json::{Value, json};
use std::collections::HashMap;

use super::{MAX_LISTED, Needs, RunDetails, Section, Table, group_of, more_line};
use crate::report::analyse::Analysis;
use crate::report::analyse::model::{
    self, ConditionRuns, MAX_RUNS_PER_CONDITION, MeasuredRun, ModelCheck, ModelInput, ModelRow,
    Others,
};
use crate::report::blocks::Block;
use crate::report::fmt;
use crate::sim::{Knobs, Machine};
use crate::store::ReportEnvironment;

/// Why a report has no model check, or the check.
#[derive(Debug, Clone, PartialEq)]
enum State {
    Skipped(String),
    Checked(Box<ModelCheck>),
}

/// The model section.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelSection {
    state: State,
}

impl Default for ModelSection {
    fn default() -> Self {
        ModelSection {
            state: State::Skipped("not prepared".into()),
        }
    }
}

/// Why a campaign gets no model check (None: it gets one).
fn skip_reason(a: &Analysis) -> Option<String> {
    if a.environments
        .iter()
        .any(|e| e.kernel_release == crate::sim::MODEL_RELEASE)
    {
        return Some(
            "This campaign was simulated (schedlab simulate): it is the model, so there is no \
             model to set beside it; compare it with a measured one (schedlab compare --db \
             measured.db --vs simulated.db)."
                .into(),
        );
    }
    if a.factors.by.is_some() {
        return Some(
            "A report --by host or kernel holds runs of several machines; report each campaign \
             alone for the model beside it."
                .into(),
        );
    }
    if a.counts.ok == 0 {
        return Some("No run is ok: nothing measured to set the model beside.".into());
    }
    None
}

/// The ok run ids of each condition, in campaign order (at most
/// [`MAX_RUNS_PER_CONDITION`] each).
fn runs_by_condition(a: &Analysis) -> Vec<(usize, Vec<i64>)> {
    let mut out: HashMap<usize, Vec<i64>> = HashMap::new();
    for r in a.runs.iter().filter(|r| r.status == "ok") {
        let Some(g) = group_of(a, r) else { continue };
        let Some(&c) = a.groups[g]
            .conditions
            .iter()
            .find(|&&c| a.conditions[c].policy == r.policy)
        else {
            continue;
        };
        let ids = out.entry(c).or_default();
        if ids.len() < MAX_RUNS_PER_CONDITION {
            ids.push(r.id);
        }
    }
    let mut v: Vec<(usize, Vec<i64>)> = out.into_iter().collect();
    v.sort_unstable_by_key(|(c, _)| *c);
    v
}

/// The machine of the environment most runs were made in, and what it is.
pub fn machine_of(envs: &[ReportEnvironment]) -> Option<(Machine, String)> {
    let e = envs.iter().max_by_key(|e| e.runs)?;
    let cpus = e.cpus_online.max(1) as usize;
    let (base, base_source) = match e.fair_base_slice_ns {
        Some(ns) => (ns, "as the kernel reported it".to_string()),
        None => (
            crate::sys::envinfo::default_base_slice_ns(cpus, &e.kernel_release),
            format!(
                "the kernel's default for {cpus} CPUs ({} ms × (1 + log2 CPUs)): the kernel \
                 reported none (debugfs sched/base_slice_ns)",
                crate::sys::envinfo::normalized_base_slice_ns(&e.kernel_release) as f64 / 1e6
            ),
        ),
    };
    let knobs = Knobs {
        hz: e.hz.map(|h| h.max(1) as u32),
        rr_timeslice_ms: e.sched_rr_timeslice_ms,
        rt_runtime_us: e.sched_rt_runtime_us,
        rt_period_us: e.sched_rt_period_us,
    };
    let m = Machine::from_knobs(&e.kernel_release, cpus, knobs, base)
        .with_topology(e.cpu_topology.as_ref(), &[]);
    let source = format!(
        "environment {} ({} of the runs): kernel {}, {cpus} CPUs, HZ {}, sched_rr_timeslice_ms {}, \
         sched_rt_runtime_us {} per {} µs; EEVDF base slice {} ms, {base_source}",
        e.id,
        e.runs,
        e.kernel_release,
        m.hz,
        m.rr_timeslice_ms,
        m.rt_runtime_us,
        m.rt_period_us,
        fmt::num(base as f64 / 1e6),
    );
    Some((m, source))
}

impl ModelSection {
    /// The check, once prepared for a measured campaign.
    pub fn check(&self) -> Option<&ModelCheck> {
        match &self.state {
            State::Checked(c) => Some(c),
            State::Skipped(_) => None,
        }
    }

    /// The one line of a report without a check.
    pub fn skipped(&self) -> Option<&str> {
        match &self.state {
            State::Skipped(s) => Some(s),
            State::Checked(_) => None,
        }
    }

    fn input(a: &Analysis, mut details: RunDetails) -> Result<ModelInput, String> {
        let spec: crate::spec::Spec = serde_json::from_str(&a.campaign.spec_json).map_err(|e| {
            format!("the campaign's stored spec cannot be read by this schedlab: {e}")
        })?;
        let (machine, machine_source) =
            machine_of(&a.environments).ok_or("the campaign records no environment")?;
        // Each condition on the machine its runs were made in, when that
        // is not the campaign's main one (a guest level beside the host).
        let main_env = a.environments.iter().max_by_key(|e| e.runs).map(|e| e.id);
        let env_of_run: HashMap<i64, i64> =
            a.runs.iter().map(|r| (r.id, r.environment_id)).collect();
        let machine_of_runs = |ids: &[i64]| -> Option<Machine> {
            let env = ids.iter().find_map(|id| env_of_run.get(id))?;
            if Some(*env) == main_env {
                return None;
            }
            let e = a.environments.iter().find(|e| e.id == *env)?;
            machine_of(std::slice::from_ref(e)).map(|(m, _)| m)
        };
        let others: HashMap<i64, Others> = a
            .runs
            .iter()
            .map(|r| {
                let o = Others {
                    cpu_pct: r.other_cpu_pct,
                    runnable: r.others_runnable,
                };
                (r.id, o)
            })
            .collect();
        let conditions = runs_by_condition(a)
            .into_iter()
            .map(|(c, ids)| {
                let cond = &a.conditions[c];
                ConditionRuns {
                    machine: machine_of_runs(&ids),
                    condition: c,
                    label: cond.label.clone(),
                    policy: cond.policy.clone(),
                    workload: a.groups[cond.group].key.workload.clone(),
                    run: ids
                        .iter()
                        .find_map(|id| details.documents.get(id).and_then(|(r, _)| r.clone())),
                    runs: ids
                        .iter()
                        .filter_map(|id| {
                            // Taken, not copied: every process of every run.
                            details.processes.remove(id).map(|processes| MeasuredRun {
                                run_id: *id,
                                processes,
                                others: others.get(id).copied().unwrap_or_default(),
                            })
                        })
                        .collect(),
                }
            })
            .collect();
        Ok(ModelInput {
            spec,
            machine,
            machine_source,
            conditions,
        })
    }
}

/// "1.23 (1.20–1.26)".
fn measured_text(r: &ModelRow) -> String {
    let f = |v: f64| fmt::sig(v, 4);
    match r.measured.ci {
        Some((lo, hi)) => format!("{} ({}–{})", f(r.measured.mean), f(lo), f(hi)),
        None => f(r.measured.mean),
    }
}

fn pct(v: Option<f64>) -> String {
    v.map_or_else(|| "–".into(), |x| format!("{:+.1} %", 100.0 * x))
}

const HEADERS: [&str; 11] = [
    "condition",
    "figure",
    "processes",
    "unit",
    "predicted",
    "measured mean (95 % CI)",
    "error",
    "CI covers",
    "spread (CV)",
    "others: CPU / runnable (most)",
    "runs",
];
const NUMERIC: [bool; 11] = [
    false, false, false, false, true, true, true, false, true, true, true,
];

/// Other programs' most CPU over the row's runs and most runnable tasks at
/// their release: "62 % / 3"; "–" for what was not measured (the CPU share
/// is not given for runs under a second, see
/// `launch::interference::MIN_TICKS_PER_CPU`).
pub fn others_cell(o: &Others) -> String {
    let cpu = o
        .cpu_pct
        .map_or_else(|| "–".into(), |p| format!("{p:.0} %"));
    let runnable = o.runnable.map_or_else(|| "–".into(), |n| n.to_string());
    format!("{cpu} / {runnable}")
}

fn row_cells(r: &ModelRow) -> Vec<String> {
    vec![
        format!(
            "{}{}",
            r.label,
            if r.calibration { " [calibration]" } else { "" }
        ),
        r.metric.name().to_string(),
        r.class.clone(),
        r.unit.to_string(),
        fmt::sig(r.predicted, 4),
        measured_text(r),
        pct(r.rel_error),
        match r.covered {
            Some(true) => "yes".into(),
            Some(false) => "no".into(),
            None => "–".into(),
        },
        r.measured
            .cv
            .map_or_else(|| "–".into(), |c| format!("{:.1} %", 100.0 * c)),
        others_cell(&r.others),
        r.measured.n.to_string(),
    ]
}

fn check_blocks(c: &ModelCheck) -> Vec<Block> {
    let mut b = vec![Block::p(format!(
        "The campaign's own plan run through the model ({}) at report time, each figure against \
         the measured runs: predicted, measured mean with its 95 % CI, the relative error \
         (predicted − measured) / measured, whether the CI covers the prediction, and the \
         run-to-run spread (coefficient of variation) for scale, and beside them other \
         programs' activity over the condition's runs: the most CPU they took on a run's CPUs \
         (measured over runs of a second or more) and the most of their tasks runnable at a \
         run's release. The model simulates schedlab's processes alone, so from {:.0} % of \
         the CPUs or {} runnable tasks on, a miss may be theirs, and a finding then says so. \
         Each workload's parameters are calibrated on one condition, marked [calibration]; \
         every other row is a prediction.",
        c.model_release,
        crate::report::analyse::OTHER_CPU_NOTE_PCT,
        crate::report::analyse::OTHERS_RUNNABLE_NOTE
    ))];
    let cal: Vec<String> = c
        .calibrations
        .iter()
        .map(|k| {
            format!(
                "{}: {} on {} ({} runs; {}){}",
                k.workload,
                k.parameter,
                k.condition,
                k.runs,
                k.basis,
                if k.ok { "" } else { " — not calibrated" }
            )
        })
        .collect();
    b.push(Block::Title("Parameters".into()));
    let mut params = vec![format!("machine: {}", c.machine_source)];
    params.push(format!(
        "fair server {}, delayed dequeue {}, context switch {} ns, fair timer slack {} ns",
        if c.machine.fair_server { "on" } else { "off" },
        if c.machine.delay_dequeue { "on" } else { "off" },
        c.machine.context_switch_ns,
        c.machine.timer_slack_ns
    ));
    params.extend(cal);
    b.push(Block::List {
        class: None,
        item_class: None,
        items: params,
    });
    if c.findings.is_empty() {
        b.push(Block::p(
            "No deviation beyond the noise: every prediction lies within the measured CI, the \
             run-to-run spread or 2 %.",
        ));
    } else {
        b.push(Block::Title("Findings: deviations beyond the noise".into()));
        b.push(Block::List {
            class: None,
            item_class: Some("flag"),
            items: c.findings.iter().take(MAX_LISTED).cloned().collect(),
        });
        b.extend(more_line(c.findings.len()).map(Block::p));
    }
    if !c.rows.is_empty() {
        let rows: Vec<&ModelRow> = c.rows.iter().take(MAX_LISTED).collect();
        b.push(Block::Table {
            row_class: rows
                .iter()
                .map(|r| (r.covered == Some(false)).then_some("flag"))
                .collect(),
            table: Table {
                title: "Predicted and measured".into(),
                headers: HEADERS.map(String::from).to_vec(),
                numeric: NUMERIC.to_vec(),
                rows: rows.into_iter().map(row_cells).collect(),
            },
        });
        b.extend(more_line(c.rows.len()).map(Block::p));
    }
    if !c.orders.is_empty() {
        b.push(Block::table(Table {
            title: "Completion order (FIFO and RR)".into(),
            headers: ["condition", "predicted order", "runs in that order"]
                .map(String::from)
                .to_vec(),
            numeric: vec![false, false, true],
            rows: c
                .orders
                .iter()
                .map(|o| {
                    vec![
                        o.label.clone(),
                        o.predicted
                            .iter()
                            .map(|i| format!("p{i}"))
                            .collect::<Vec<_>>()
                            .join(" "),
                        format!("{} of {}", o.runs_matching, o.runs),
                    ]
                })
                .collect(),
        }));
    }
    if !c.shortfalls.is_empty() {
        b.push(Block::table(Table {
            title: "Not predicted".into(),
            headers: ["condition", "why the model gives no number"]
                .map(String::from)
                .to_vec(),
            numeric: vec![false, false],
            rows: c
                .shortfalls
                .iter()
                .take(MAX_LISTED)
                .map(|s| vec![s.label.clone(), s.reason.clone()])
                .collect(),
        }));
    }
    b.push(Block::RunIn {
        title: "Not modelled".into(),
        text: format!("{}.", c.not_modelled.join("; ")),
    });
    b
}

impl Section for ModelSection {
    fn id(&self) -> &'static str {
        "model"
    }

    fn title(&self) -> &'static str {
        "Model"
    }

    fn needs(&self, a: &Analysis) -> Needs {
        if skip_reason(a).is_some() {
            return Needs::default();
        }
        let by_condition = runs_by_condition(a);
        Needs {
            documents: by_condition
                .iter()
                .filter_map(|(_, ids)| ids.first().copied())
                .collect(),
            processes: by_condition.into_iter().flat_map(|(_, ids)| ids).collect(),
            ..Needs::default()
        }
    }

    fn prepare(&mut self, a: &Analysis, details: RunDetails) -> Result<()> {
        self.state = match skip_reason(a) {
            Some(why) => State::Skipped(why),
            None => match Self::input(a, details) {
                Ok(input) => State::Checked(Box::new(model::check(&input, &a.settings))),
                Err(why) => State::Skipped(format!("No model check: {why}.")),
            },
        };
        Ok(())
    }

    fn blocks(&self, _a: &Analysis) -> Vec<Block> {
        match &self.state {
            State::Skipped(why) => vec![Block::p(why.clone())],
            State::Checked(c) => check_blocks(c),
        }
    }

    fn json(&self, _a: &Analysis) -> Option<Value> {
        Some(match &self.state {
            State::Skipped(why) => json!({ "skipped": why }),
            State::Checked(c) => serde_json::to_value(c).ok()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(fair_base_slice_ns: Option<u64>) -> ReportEnvironment {
        ReportEnvironment {
            id: 1,
            runs: 4,
            kernel_release: "6.18.0".into(),
            cpu_model: "test".into(),
            cpus_online: 2,
            hz: Some(250),
            preempt_model: "none".into(),
            sched_rt_runtime_us: Some(950_000),
            sched_rt_period_us: Some(1_000_000),
            sched_rr_timeslice_ms: Some(100),
            cgroup_version: "v2".into(),
            virtualization: "none".into(),
            schedlab_version: "0.1.0".into(),
            hostname: None,
            fair_base_slice_ns,
            guest_machine: None,
            guest_accel: None,
            topology: None,
            cpu_topology: None,
        }
    }

    #[test]
    fn the_model_takes_the_base_slice_the_kernel_reported_else_the_default() {
        let (m, source) = machine_of(&[env(Some(3_000_000))]).unwrap();
        assert_eq!(m.base_slice_ns, 3_000_000);
        assert!(
            source.contains("base slice 3 ms, as the kernel reported it"),
            "{source}"
        );
        // 6.18 on 2 CPUs: 0.70 ms × 2 (0.70 ms since 6.15).
        let (m, source) = machine_of(&[env(None)]).unwrap();
        assert_eq!(m.base_slice_ns, 1_400_000);
        assert!(source.contains("the kernel reported none"), "{source}");
    }

    #[test]
    fn the_others_cell_shows_what_was_measured_and_dashes_the_rest() {
        let cell = |cpu_pct, runnable| others_cell(&Others { cpu_pct, runnable });
        assert_eq!(cell(Some(61.6), Some(3)), "62 % / 3");
        assert_eq!(cell(None, Some(4)), "– / 4");
        assert_eq!(cell(Some(0.2), None), "0 % / –");
        assert_eq!(cell(None, None), "– / –");
    }
}
