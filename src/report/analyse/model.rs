//! The model beside the measurement: a measured campaign's own plan run
//! through the discrete-event model ([`crate::sim`]) and each predicted
//! figure set against the measured runs, with the relative error, whether
//! the 95 % CI of the measured mean covers the prediction, and the
//! run-to-run spread. Pure: the caller hands in the spec, the machine and
//! the measured processes.
//!
//! Calibration is never fitted to what it is judged against in silence:
//! each workload's speed (pi, hash, matmul, page-cache copy: Σ work / Σ
//! CPU time of its workers) or wake-up cost (periodic: the median of the
//! workers' p50 wake-up; pingpong: half the median time per round trip) is
//! taken from ONE condition, the first of that workload in the report's
//! order, whose rows are marked; every other condition is a prediction.
//! The periodic wake-up cost is the exception in which condition: it is
//! taken from the first FIFO or RR condition when the campaign has one,
//! since under a fair policy beside other tasks the measured wake-up
//! includes queueing behind them, which the model simulates itself and
//! which would otherwise be counted twice (once as timer cost).

use serde::Serialize;
use std::collections::BTreeMap;

use super::{OTHER_CPU_NOTE_PCT, OTHERS_RUNNABLE_NOTE, Settings, mean_interval};
use crate::fields::Field;
use crate::plan::Run;
use crate::policy::{Policy, ProcSched};
use crate::record::{ProcessRecord, RunStatus};
use crate::sim::{self, Machine, ModelParams};
use crate::spec::Spec;
use crate::workload::modelled::ModelTask;
use crate::workload::{Rates, Stop, SyncMode, Workload};

/// Most measured runs of one condition the check reads (the first ones).
pub const MAX_RUNS_PER_CONDITION: usize = 50;

/// A deviation is a finding when the CI misses the prediction and the
/// relative error is beyond both the run-to-run CV and this floor.
pub const FINDING_MIN_REL_ERROR: f64 = 0.02;

/// One measured run of a condition.
#[derive(Debug, Clone, PartialEq)]
pub struct MeasuredRun {
    pub run_id: i64,
    /// Every process row (workers and hogs).
    pub processes: Vec<ProcessRecord>,
    /// Other programs' activity during the run, as it was measured.
    pub others: Others,
}

/// Other programs' activity during a run (`record::Interference`): the
/// model simulates schedlab's processes alone, so a run whose CPUs others
/// took a share of misses its prediction for that reason, which a row must
/// show beside its error. None where it was not measured.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct Others {
    /// % of the run's CPUs other programs kept busy over the run (at most,
    /// over a condition's runs).
    pub cpu_pct: Option<f64>,
    /// Other programs' runnable tasks at release (at most, likewise).
    pub runnable: Option<i64>,
}

impl Others {
    /// The most of each over `runs`.
    pub fn most(runs: impl IntoIterator<Item = Others>) -> Others {
        runs.into_iter().fold(Others::default(), |a, b| Others {
            cpu_pct: match (a.cpu_pct, b.cpu_pct) {
                (Some(x), Some(y)) => Some(x.max(y)),
                (x, y) => x.or(y),
            },
            runnable: a.runnable.max(b.runnable),
        })
    }

    /// Whether others took enough to move a prediction: the thresholds at
    /// which the report's summary names a run.
    pub fn disturbing(&self) -> bool {
        self.cpu_pct.is_some_and(|p| p >= OTHER_CPU_NOTE_PCT)
            || self.runnable.is_some_and(|n| n >= OTHERS_RUNNABLE_NOTE)
    }

    /// "other programs took up to 62 % of the run's CPUs, 3 runnable at
    /// release", or None when nothing disturbing was measured.
    pub fn cause(&self) -> Option<String> {
        if !self.disturbing() {
            return None;
        }
        let mut parts = Vec::new();
        if let Some(p) = self.cpu_pct {
            parts.push(format!("took up to {p:.0} % of the run's CPUs"));
        }
        if let Some(n) = self.runnable.filter(|&n| n > 0) {
            parts.push(format!("had up to {n} runnable at release"));
        }
        Some(format!("other programs {}", parts.join(" and ")))
    }
}

/// A condition of the campaign as the check takes it.
#[derive(Debug, Clone, PartialEq)]
pub struct ConditionRuns {
    /// Index into [`super::Analysis::conditions`].
    pub condition: usize,
    pub label: String,
    pub policy: String,
    pub workload: String,
    /// The resolved plan entry of one of its ok runs (None when the store
    /// has none).
    pub run: Option<Run>,
    /// Its ok runs, at most [`MAX_RUNS_PER_CONDITION`].
    pub runs: Vec<MeasuredRun>,
    /// The machine its runs were made in when it is not
    /// [`ModelInput::machine`] (a guest level of a campaign that also runs
    /// on the host, say): the condition is simulated on it.
    pub machine: Option<Machine>,
}

/// Everything the check is given.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelInput {
    pub spec: Spec,
    pub machine: Machine,
    /// Where the machine's parameters came from.
    pub machine_source: String,
    pub conditions: Vec<ConditionRuns>,
}

/// A figure the model predicts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ModelMetric {
    /// CPU time over the process's own wall time, %.
    Share,
    /// CPU time over all the run's workers' CPU time, % (runs of fixed
    /// duration with several workers: what the weights divide).
    WorkerShare,
    /// End of the process's work after release, s.
    Completion,
    /// Release to the last worker's end, s.
    Makespan,
    /// Involuntary context switches per process.
    InvolSwitches,
    /// Time slices (schedstat) per process.
    Slices,
    /// Periodic wake-up latency p50, µs.
    WakeupP50,
    /// Pingpong round trips per second.
    RoundTrips,
    /// Moves to another CPU per process (`se.nr_migrations`), on
    /// conditions of several CPUs.
    Migrations,
}

impl ModelMetric {
    pub fn name(self) -> &'static str {
        match self {
            ModelMetric::Share => "CPU share",
            ModelMetric::WorkerShare => "share among workers",
            ModelMetric::Completion => "completion",
            ModelMetric::Makespan => "makespan",
            ModelMetric::InvolSwitches => "involuntary switches",
            ModelMetric::Slices => "slices",
            ModelMetric::WakeupP50 => "wake-up p50",
            ModelMetric::RoundTrips => "round trips",
            ModelMetric::Migrations => "migrations",
        }
    }

    pub fn unit(self) -> &'static str {
        match self {
            ModelMetric::Share | ModelMetric::WorkerShare => "%",
            ModelMetric::Completion | ModelMetric::Makespan => "s",
            ModelMetric::InvolSwitches | ModelMetric::Slices | ModelMetric::Migrations => "",
            ModelMetric::WakeupP50 => "µs",
            ModelMetric::RoundTrips => "/s",
        }
    }

    /// The metrics compared for a workload.
    fn of(w: &Workload) -> &'static [ModelMetric] {
        use ModelMetric::*;
        match (w.model(), w.stop()) {
            (ModelTask::Compute(_) | ModelTask::Copy(_), Stop::Work(_)) => &[
                Share,
                Completion,
                Makespan,
                InvolSwitches,
                Slices,
                Migrations,
            ],
            (ModelTask::Compute(_) | ModelTask::Copy(_), _) => {
                &[Share, WorkerShare, InvolSwitches, Slices, Migrations]
            }
            (ModelTask::Periodic { .. }, _) => &[WakeupP50, Slices, InvolSwitches, Migrations],
            (ModelTask::Pingpong, _) => &[RoundTrips],
            (ModelTask::Replay(_), _) => &[Makespan, InvolSwitches],
            (ModelTask::Mixed(_) | ModelTask::Unmodelled(_), _) => &[],
        }
    }

    /// The value of one process (None when it lacks the figure).
    fn of_process(self, p: &ProcessRecord) -> Option<f64> {
        match self {
            ModelMetric::Share => {
                let run = p.kernel.get(Field::RunNs)? as f64;
                (p.wall_ns > 0).then(|| 100.0 * run / p.wall_ns as f64)
            }
            ModelMetric::Completion => p.end_ns.map(|ns| ns as f64 / 1e9),
            ModelMetric::Makespan | ModelMetric::WorkerShare => None,
            ModelMetric::InvolSwitches => p.kernel.get(Field::Nivcsw).map(|v| v as f64),
            ModelMetric::Slices => p.kernel.get(Field::Timeslices).map(|n| n as f64),
            ModelMetric::WakeupP50 => p.figures.get("wakeup_p50_us").copied(),
            ModelMetric::RoundTrips => p.figures.get("round_trips_per_s").copied(),
            ModelMetric::Migrations => p
                .kernel
                .get(crate::fields::Field::NrMigrations)
                .map(|v| v as f64),
        }
    }
}

/// The mean of measured values over runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Measured {
    pub n: usize,
    pub mean: f64,
    pub sd: f64,
    /// 95 % CI of the mean (None below 2 runs).
    pub ci: Option<(f64, f64)>,
    /// sd / mean: the run-to-run spread.
    pub cv: Option<f64>,
}

/// One figure of one condition, predicted and measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelRow {
    pub condition: usize,
    pub label: String,
    pub policy: String,
    pub workload: String,
    pub metric: ModelMetric,
    pub unit: &'static str,
    /// The processes it is about: "all", "nice 5", "prio 50", "weight 4",
    /// or "run" for a whole-run figure.
    pub class: String,
    /// The condition the workload's parameters were calibrated on.
    pub calibration: bool,
    pub predicted: f64,
    pub measured: Measured,
    /// (predicted − measured mean) / measured mean.
    pub rel_error: Option<f64>,
    /// Whether the measured mean's 95 % CI covers the prediction.
    pub covered: Option<bool>,
    /// Runs whose value lies below and above the prediction.
    pub runs_below: usize,
    pub runs_above: usize,
    /// Other programs' activity over the condition's runs (the most).
    pub others: Others,
}

/// A condition (or a figure of it) the model does not predict, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Shortfall {
    pub condition: usize,
    pub label: String,
    pub policy: String,
    pub reason: String,
}

/// What one workload's parameters were taken from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Calibration {
    pub workload: String,
    /// The condition's label ("pi, 2 processes, OTHER").
    pub condition: String,
    pub runs: usize,
    /// "pi_iter_per_s = 7.5000e8/s" and the like, or why it could not be.
    pub parameter: String,
    pub ok: bool,
    /// Why this condition: "the workload's first condition" or "its first
    /// FIFO/RR condition …".
    pub basis: String,
}

/// The completion order of FIFO and RR processes, predicted and measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OrderCheck {
    pub condition: usize,
    pub label: String,
    /// Process indices by end of work in the model.
    pub predicted: Vec<u32>,
    pub runs: usize,
    /// Runs that finished in exactly that order.
    pub runs_matching: usize,
}

/// The model check of a campaign.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelCheck {
    pub model_release: &'static str,
    pub machine: Machine,
    pub machine_source: String,
    pub calibrations: Vec<Calibration>,
    pub rows: Vec<ModelRow>,
    pub orders: Vec<OrderCheck>,
    pub shortfalls: Vec<Shortfall>,
    /// Deviations beyond the noise, in words.
    pub findings: Vec<String>,
    /// What the model leaves out, as every simulated run stores it.
    pub not_modelled: Vec<&'static str>,
}

/// Rates before calibration: never used for a prediction, since a
/// workload whose rate is not calibrated is not predicted.
const UNCALIBRATED: Rates = Rates {
    pi_iter_per_s: f64::NAN,
    hash_per_s: f64::NAN,
    flops_per_s: f64::NAN,
    copy_bytes_per_s: f64::NAN,
    wake_round_trip_s: f64::NAN,
};

/// Run the campaign's plan in the model and set each figure against the
/// measured runs.
pub fn check(input: &ModelInput, settings: &Settings) -> ModelCheck {
    let base = ModelParams::new(
        input.machine.clone(),
        UNCALIBRATED,
        "calibrated on the campaign's own runs",
    );
    let (calibrations, params) = calibrate(input, &base);
    let mut out = ModelCheck {
        model_release: sim::MODEL_RELEASE,
        machine: input.machine.clone(),
        machine_source: input.machine_source.clone(),
        calibrations,
        rows: Vec::new(),
        orders: Vec::new(),
        shortfalls: Vec::new(),
        findings: Vec::new(),
        not_modelled: sim::describe::NOT_MODELLED.to_vec(),
    };
    // Each condition is simulated and compared on its own, on every CPU
    // (a campaign of 40 conditions of 250 runs spent most of its report
    // here), and the results are put together in condition order.
    let checked = super::par_map(&input.conditions, |c| {
        check_condition(c, input, &params, &out.calibrations, settings)
    });
    for one in checked {
        out.rows.extend(one.rows);
        out.orders.extend(one.orders);
        out.shortfalls.extend(one.shortfalls);
    }
    out.findings = findings(&out.rows);
    out
}

/// What one condition adds to the check.
#[derive(Default)]
struct ConditionCheck {
    rows: Vec<ModelRow>,
    orders: Vec<OrderCheck>,
    shortfalls: Vec<Shortfall>,
}

/// Simulate condition `c` with its workload's calibrated parameters and
/// compare the prediction with its runs.
fn check_condition(
    c: &ConditionRuns,
    input: &ModelInput,
    params: &BTreeMap<String, (ModelParams, usize)>,
    calibrations: &[Calibration],
    settings: &Settings,
) -> ConditionCheck {
    let mut one = ConditionCheck::default();
    let shortfall = |reason: String| Shortfall {
        condition: c.condition,
        label: c.label.clone(),
        policy: c.policy.clone(),
        reason,
    };
    let Some(run) = &c.run else {
        one.shortfalls.push(shortfall(
            "no resolved plan entry stored for its runs".into(),
        ));
        return one;
    };
    let Some((p, cal_condition)) = params.get(&c.workload) else {
        let why = calibrations
            .iter()
            .find(|k| k.workload == c.workload)
            .map_or("no measured run to calibrate on".to_string(), |k| {
                k.parameter.clone()
            });
        one.shortfalls
            .push(shortfall(format!("not calibrated: {why}")));
        return one;
    };
    let on_level;
    let p = match &c.machine {
        Some(m) => {
            on_level = ModelParams {
                machine: Machine {
                    context_switch_ns: p.machine.context_switch_ns,
                    timer_slack_ns: p.machine.timer_slack_ns,
                    migration_ns: p.machine.migration_ns,
                    ..m.clone()
                },
                ..p.clone()
            };
            &on_level
        }
        None => p,
    };
    let sim = sim::simulate(run, &input.spec, p);
    if sim.record.status != RunStatus::Ok {
        one.shortfalls
            .push(shortfall(format!("the model: {}", sim.record.reason)));
        return one;
    }
    let calibration = *cal_condition == c.condition;
    compare_condition(
        c,
        &sim.record.processes,
        sim.record.makespan_ns,
        calibration,
        sim.record.cpu_list.len() > 1 || run.policy == Policy::Deadline,
        settings,
        &mut one.rows,
    );
    if matches!(run.policy, Policy::Fifo | Policy::Rr)
        && matches!(run.workload.workload.stop(), Stop::Work(_))
    {
        one.orders.push(order_check(c, &sim.record.processes));
    }
    one
}

/// Each workload's parameters from its first condition with measured runs:
/// the parameters by workload with the calibration condition's index.
fn calibrate(
    input: &ModelInput,
    base: &ModelParams,
) -> (Vec<Calibration>, BTreeMap<String, (ModelParams, usize)>) {
    let mut cals = Vec::new();
    let mut params = BTreeMap::new();
    for (c, run, basis) in calibration_conditions(input) {
        let procs: Vec<ProcessRecord> = c
            .runs
            .iter()
            .flat_map(|r| r.processes.iter().cloned())
            .collect();
        let source = format!("{} ({} runs)", c.label, c.runs.len());
        let result = calibrate_workload(&run.workload.workload, run.policy, &source, &procs, base);
        cals.push(Calibration {
            workload: c.workload.clone(),
            condition: c.label.clone(),
            runs: c.runs.len(),
            parameter: match &result {
                Ok((_, what)) => what.clone(),
                Err(e) => e.clone(),
            },
            ok: result.is_ok(),
            basis: basis.to_string(),
        });
        if let Ok((p, _)) = result {
            params.insert(c.workload.clone(), (p, c.condition));
        }
    }
    (cals, params)
}

/// Why a periodic workload is calibrated on an RT condition.
const RT_BASIS: &str = "its first FIFO/RR condition, where the periodic task is not queued behind \
                        fair tasks (their queueing is simulated, not part of the timer cost)";
/// Why any other workload is calibrated where it is.
const FIRST_BASIS: &str = "the workload's first condition";

/// Each workload's calibration condition (with its plan entry and why it
/// was chosen), in report order: the first condition with measured runs,
/// except for a periodic workload, whose first FIFO or RR condition with
/// runs is taken when there is one.
fn calibration_conditions(input: &ModelInput) -> Vec<(&ConditionRuns, &Run, &'static str)> {
    let measured = |c: &'_ ConditionRuns| c.run.is_some() && !c.runs.is_empty();
    let mut out: Vec<(&ConditionRuns, &Run, &'static str)> = Vec::new();
    for c in input.conditions.iter().filter(|c| measured(c)) {
        if out.iter().any(|(k, _, _)| k.workload == c.workload) {
            continue;
        }
        let run = c.run.as_ref().expect("filtered on run");
        let rt = run
            .workload
            .workload
            .model()
            .is_periodic()
            .then(|| {
                input.conditions.iter().filter(|k| measured(k)).find(|k| {
                    k.workload == c.workload
                        && k.run
                            .as_ref()
                            .is_some_and(|r| matches!(r.policy, Policy::Fifo | Policy::Rr))
                })
            })
            .flatten();
        out.push(match rt {
            Some(k) => (k, k.run.as_ref().expect("filtered on run"), RT_BASIS),
            None => (c, run, FIRST_BASIS),
        });
    }
    out
}

/// One workload's parameters from the processes of its calibration runs
/// (of a condition under `policy`).
fn calibrate_workload(
    w: &Workload,
    policy: Policy,
    source: &str,
    procs: &[ProcessRecord],
    base: &ModelParams,
) -> Result<(ModelParams, String), String> {
    let workers = || procs.iter().filter(|p| p.role == "worker" && p.ok);
    let median_figure = |name: &str| {
        let v: Vec<f64> = workers()
            .filter_map(|p| p.figures.get(name).copied())
            .collect();
        crate::stats::summarize(&v).map(|s| s.median)
    };
    match w.model() {
        ModelTask::Compute(_) => {}
        ModelTask::Copy(c) if c.sync == SyncMode::None => {}
        ModelTask::Periodic { .. } => {
            let p50_us = median_figure("wakeup_p50_us")
                .ok_or("its workers report no wakeup_p50_us".to_string())?;
            let mut p = base.clone();
            // The p50 holds the condition's timer slack (0 under FIFO and
            // RR): the cost is what remains, the slack being simulated.
            let fair = policy.class() == crate::policy::Class::Fair;
            let slack_ns = base.machine.timer_slack_ns_for(fair);
            p.wake.timer_wakeup_ns =
                ((p50_us * 1e3).round().max(0.0) as u64).saturating_sub(slack_ns);
            p.wake.source = format!("timer wake-up = median p50 wake-up of {source}");
            let what = if slack_ns > 0 {
                format!(
                    "timer wake-up = {:.1} µs (median of the workers' p50 wake-up {p50_us:.1} µs \
                     less the timer slack {:.0} µs)",
                    p.wake.timer_wakeup_ns as f64 / 1e3,
                    slack_ns as f64 / 1e3
                )
            } else {
                format!("timer wake-up = {p50_us:.1} µs (median of the workers' p50 wake-up)")
            };
            return Ok((p, what));
        }
        ModelTask::Pingpong => {
            let us = median_figure("usecs_per_op")
                .ok_or("its workers report no usecs_per_op".to_string())?;
            let mut p = base.clone();
            p.wake.handoff_ns = (us * 1e3 / 2.0).round().max(0.0) as u64;
            p.wake.source = format!("hand-off = median round trip / 2 of {source}");
            let what = format!("hand-off = {:.2} µs (half the median round trip)", us / 2.0);
            return Ok((p, what));
        }
        ModelTask::Copy(_) | ModelTask::Mixed(_) => {
            return Err(format!(
                "the {} workload waits for the storage device or mixes CPU and I/O; its costs are not \
                 calibrated from the campaign",
                w.kind()
            ));
        }
        ModelTask::Replay(r) => {
            let what = match w {
                Workload::Command(_) => format!(
                    "predicted from its replay ({}), fidelity {}; its bursts costed at {:.4e} pi \
                     iterations per CPU second (the replay's own)",
                    r.source,
                    r.fidelity.as_deref().unwrap_or("not checked"),
                    r.pi_iter_per_s
                ),
                _ => format!(
                    "its bursts costed at {:.4e} pi iterations per CPU second (the replay's own)",
                    r.pi_iter_per_s
                ),
            };
            return Ok((base.clone(), what));
        }
        ModelTask::Unmodelled(why) => return Err(why),
    }
    let p = base
        .clone()
        .rates_from_processes(w, source, procs)
        .map_err(|e| e.to_string())?;
    let what = p
        .rates_source
        .rsplit("; ")
        .next()
        .and_then(|s| s.split(" from ").next())
        .unwrap_or_default()
        .to_string();
    Ok((p, format!("{what} (Σ work / Σ CPU time of its workers)")))
}

/// The class of a process in the model's rows: its weight, RT priority,
/// nice value or policy. Compared without text: the report classes every
/// measured process of every condition, a million of them at the bench's
/// size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    Weight(u32),
    Prio(i32),
    Nice(i32),
    Policy(Policy),
}

impl std::fmt::Display for Class {
    /// "nice 5", "prio 50", "weight 4" (or the policy).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Class::Weight(w) => write!(f, "weight {w}"),
            Class::Prio(p) => write!(f, "prio {p}"),
            Class::Nice(n) => write!(f, "nice {n}"),
            Class::Policy(p) => f.write_str(p.name()),
        }
    }
}

/// The class of a process of this scheduling.
pub fn class_of(s: &ProcSched) -> Class {
    if let Some(w) = s.weight {
        return Class::Weight(w);
    }
    match (s.nice, s.rt_priority) {
        (_, Some(p)) if s.policy.class() == crate::policy::Class::Realtime => Class::Prio(p),
        (Some(n), _) => Class::Nice(n),
        _ => Class::Policy(s.policy),
    }
}

fn workers(procs: &[ProcessRecord]) -> impl Iterator<Item = &ProcessRecord> {
    procs.iter().filter(|p| p.role == "worker" && p.ok)
}

/// A run's ok workers, all of them and by class (classes in the order of
/// their first worker), each list in process order: sorted out once per
/// run, where each figure and class of a condition's rows went through
/// every process of every run again.
struct Workers<'a> {
    all: Vec<&'a ProcessRecord>,
    by_class: Vec<(Class, Vec<&'a ProcessRecord>)>,
}

impl<'a> Workers<'a> {
    fn of(procs: &'a [ProcessRecord]) -> Workers<'a> {
        let all: Vec<&ProcessRecord> = workers(procs).collect();
        let mut by_class: Vec<(Class, Vec<&ProcessRecord>)> = Vec::new();
        for &p in &all {
            let c = class_of(&p.sched);
            match by_class.iter_mut().find(|(k, _)| *k == c) {
                Some((_, ps)) => ps.push(p),
                None => by_class.push((c, vec![p])),
            }
        }
        Workers { all, by_class }
    }

    /// The classes of the workers; "all" when they share one.
    fn classes(&self) -> Vec<Class> {
        self.by_class.iter().map(|(c, _)| *c).collect()
    }

    /// The workers of `class` (all of them for None), in process order.
    fn of_class(&self, class: Option<Class>) -> &[&'a ProcessRecord] {
        match class {
            None => &self.all,
            Some(c) => self
                .by_class
                .iter()
                .find(|(k, _)| *k == c)
                .map_or(&[], |(_, ps)| ps.as_slice()),
        }
    }
}

/// The mean of some values, summed in order (None: no value).
fn mean_of(values: impl Iterator<Item = f64>) -> Option<f64> {
    let mut n = 0usize;
    let sum: f64 = values.inspect(|_| n += 1).sum();
    (n > 0).then(|| sum / n as f64)
}

/// The mean of a metric over the workers of one class (None: no value).
fn class_mean(w: &Workers<'_>, class: Option<Class>, m: ModelMetric) -> Option<f64> {
    mean_of(w.of_class(class).iter().filter_map(|p| m.of_process(p)))
}

/// The mean share of the workers of one class in all workers' CPU time,
/// % (None with fewer than two workers).
fn worker_share(w: &Workers<'_>, class: Option<Class>) -> Option<f64> {
    let total: u64 = w
        .all
        .iter()
        .filter_map(|p| p.kernel.get(Field::RunNs))
        .sum();
    if w.all.len() < 2 || total == 0 {
        return None;
    }
    mean_of(
        w.of_class(class)
            .iter()
            .filter_map(|p| p.kernel.get(Field::RunNs))
            .map(|ns| 100.0 * ns as f64 / total as f64),
    )
}

/// The run's makespan from its workers' ends.
fn makespan_s(w: &Workers<'_>) -> Option<f64> {
    w.all
        .iter()
        .filter_map(|p| p.end_ns)
        .max()
        .map(|ns| ns as f64 / 1e9)
}

fn compare_condition(
    c: &ConditionRuns,
    predicted: &[ProcessRecord],
    predicted_makespan_ns: Option<u64>,
    calibration: bool,
    multi_cpu: bool,
    settings: &Settings,
    rows: &mut Vec<ModelRow>,
) {
    let Some(run) = &c.run else { return };
    let predicted = Workers::of(predicted);
    let measured_runs: Vec<Workers<'_>> =
        c.runs.iter().map(|r| Workers::of(&r.processes)).collect();
    let cls = predicted.classes();
    let metrics = ModelMetric::of(&run.workload.workload).iter();
    for &metric in metrics.filter(|&&m| multi_cpu || m != ModelMetric::Migrations) {
        let targets: Vec<Option<Class>> = if metric == ModelMetric::Makespan || cls.len() <= 1 {
            vec![None]
        } else {
            cls.iter().copied().map(Some).collect()
        };
        for class in targets {
            let value = |w: &Workers<'_>| match metric {
                ModelMetric::Makespan => makespan_s(w),
                ModelMetric::WorkerShare => worker_share(w, class),
                _ => class_mean(w, class, metric),
            };
            let pred = match metric {
                ModelMetric::Makespan => predicted_makespan_ns.map(|ns| ns as f64 / 1e9),
                _ => value(&predicted),
            };
            let values: Vec<f64> = measured_runs.iter().filter_map(value).collect();
            let (Some(pred), Some(measured)) =
                (pred, measured(&values, &c.label, metric, settings))
            else {
                continue;
            };
            let rel_error = (measured.mean != 0.0).then(|| (pred - measured.mean) / measured.mean);
            rows.push(ModelRow {
                condition: c.condition,
                label: c.label.clone(),
                policy: c.policy.clone(),
                workload: c.workload.clone(),
                metric,
                unit: metric.unit(),
                class: match (metric, class) {
                    (ModelMetric::Makespan, _) => "run".into(),
                    (_, Some(k)) => k.to_string(),
                    (_, None) => "all".into(),
                },
                calibration,
                predicted: pred,
                covered: measured.ci.map(|(lo, hi)| lo <= pred && pred <= hi),
                rel_error,
                runs_below: values.iter().filter(|&&v| v < pred).count(),
                runs_above: values.iter().filter(|&&v| v > pred).count(),
                measured,
                others: Others::most(c.runs.iter().map(|r| r.others)),
            });
        }
    }
}

fn measured(values: &[f64], label: &str, m: ModelMetric, settings: &Settings) -> Option<Measured> {
    let s = crate::stats::summarize(values)?;
    let ci = mean_interval(values, &format!("model {label} {}", m.name()), settings);
    Some(Measured {
        n: s.n,
        mean: s.mean,
        sd: s.sd,
        ci: ci.map(|i| (i.lo, i.hi)),
        cv: s.cv,
    })
}

/// Process indices by end of work (ties by index).
fn order_of(procs: &[ProcessRecord]) -> Vec<u32> {
    let mut v: Vec<(u64, u32)> = workers(procs)
        .map(|p| (p.end_ns.unwrap_or(u64::MAX), p.index))
        .collect();
    v.sort_unstable();
    v.into_iter().map(|(_, i)| i).collect()
}

fn order_check(c: &ConditionRuns, predicted: &[ProcessRecord]) -> OrderCheck {
    let order = order_of(predicted);
    OrderCheck {
        condition: c.condition,
        label: c.label.clone(),
        runs: c.runs.len(),
        runs_matching: c
            .runs
            .iter()
            .filter(|r| order_of(&r.processes) == order)
            .count(),
        predicted: order,
    }
}

/// Whether a row deviates beyond the noise: the CI misses the prediction
/// and the error exceeds the run-to-run CV and [`FINDING_MIN_REL_ERROR`].
pub fn beyond_noise(r: &ModelRow) -> bool {
    let floor = r.measured.cv.unwrap_or(0.0).max(FINDING_MIN_REL_ERROR);
    r.covered == Some(false) && r.rel_error.is_some_and(|e| e.abs() > floor)
}

/// The deviations beyond the noise in words, one per condition and
/// figure: "nice 6 got 0.88 of its predicted CPU share … in all 4 runs",
/// or for several process classes of one figure the range of the ratios.
pub fn findings(rows: &[ModelRow]) -> Vec<String> {
    let mut groups: Vec<Vec<&ModelRow>> = Vec::new();
    for r in rows.iter().filter(|r| beyond_noise(r)) {
        match groups
            .iter_mut()
            .find(|g| g[0].condition == r.condition && g[0].metric == r.metric)
        {
            Some(g) => g.push(r),
            None => groups.push(vec![r]),
        }
    }
    groups
        .into_iter()
        .map(|g| {
            let f = finding(&g, rows);
            // The miss stays, with what else was on the machine beside it.
            match g[0].others.cause() {
                Some(cause) => {
                    format!("{f}; {cause} during these runs, which the model does not simulate")
                }
                None => f,
            }
        })
        .collect()
}

fn finding(g: &[&ModelRow], rows: &[ModelRow]) -> String {
    let r = g[0];
    let head = format!(
        "{}{}",
        r.label,
        if r.calibration {
            " (calibration condition)"
        } else {
            ""
        }
    );
    let ratio = |r: &ModelRow| r.measured.mean / r.predicted;
    let u = |v: f64, r: &ModelRow| crate::report::fmt::with_unit(v, r.unit);
    if g.iter().any(|r| r.predicted == 0.0) {
        return format!(
            "{head}: {} measured {} where the model predicts 0 ({})",
            r.metric.name(),
            g.iter()
                .map(|r| u(r.measured.mean, r))
                .collect::<Vec<_>>()
                .join(", "),
            g.iter()
                .map(|r| r.class.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if let [r] = g {
        let x = ratio(r);
        let n = r.measured.n;
        let side = if x < 1.0 { r.runs_below } else { r.runs_above };
        let runs = if side == n {
            format!("in all {n} runs")
        } else {
            format!(
                "{} it in {side} of {n} runs",
                if x < 1.0 { "below" } else { "above" }
            )
        };
        let who = match r.class.as_str() {
            "all" => "each process".to_string(),
            "run" => "the run".to_string(),
            c => c.to_string(),
        };
        return format!(
            "{head}: {who} got {x:.2} of its predicted {} ({} measured against {} predicted) {runs}",
            r.metric.name(),
            u(r.measured.mean, r),
            u(r.predicted, r),
        );
    }
    let classes = rows
        .iter()
        .filter(|x| x.condition == r.condition && x.metric == r.metric)
        .count();
    let (lo, hi) = g
        .iter()
        .map(|r| ratio(r))
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| {
            (lo.min(x), hi.max(x))
        });
    format!(
        "{head}: {} of {classes} process classes got {lo:.2}–{hi:.2} of their predicted {} ({})",
        g.len(),
        r.metric.name(),
        g.iter()
            .map(|r| r.class.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    )
}

#[cfg(test)]
mod tests;
