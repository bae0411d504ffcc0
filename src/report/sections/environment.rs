//! Where the campaign ran: kernel, CPU, scheduler settings, load, and what
//! other programs did during the runs.

use serde_json::{Value, json};

use super::{Section, Table};
use crate::report::analyse::{Analysis, OTHERS_RUNNABLE_NOTE};
use crate::report::blocks::Block;
use crate::report::fmt;

/// Where the campaign ran.
pub struct EnvironmentSection;

/// How to show one field of an environment.
type EnvField = Box<dyn Fn(&crate::store::ReportEnvironment) -> String>;

fn env_table(a: &Analysis) -> (Vec<String>, Vec<Vec<String>>) {
    let o = |v: Option<i64>| v.map_or_else(|| "unknown".into(), |x| x.to_string());
    let fields: [(&str, EnvField); 13] = [
        ("runs", Box::new(|e| e.runs.to_string())),
        ("kernel", Box::new(|e| e.kernel_release.clone())),
        ("CPU", Box::new(|e| e.cpu_model.clone())),
        ("CPUs online", Box::new(|e| e.cpus_online.to_string())),
        ("HZ", Box::new(move |e| o(e.hz))),
        ("preemption", Box::new(|e| e.preempt_model.clone())),
        (
            "RT limit (sched_rt_runtime_us / period)",
            Box::new(move |e| {
                format!("{} / {}", o(e.sched_rt_runtime_us), o(e.sched_rt_period_us))
            }),
        ),
        (
            "RR time slice (ms)",
            Box::new(move |e| o(e.sched_rr_timeslice_ms)),
        ),
        ("cgroup", Box::new(|e| e.cgroup_version.clone())),
        ("virtualisation", Box::new(|e| e.virtualization.clone())),
        ("schedlab", Box::new(|e| e.schedlab_version.clone())),
        (
            "CPU topology",
            Box::new(|e| e.topology.clone().unwrap_or_else(|| "not recorded".into())),
        ),
        ("machine level", Box::new(machine_cell)),
    ];
    let mut headers = vec!["".to_string()];
    for (i, _) in a.environments.iter().enumerate() {
        headers.push(if a.environments.len() == 1 {
            "value".into()
        } else {
            format!("environment {}", i + 1)
        });
    }
    let mut rows: Vec<Vec<String>> = fields
        .iter()
        .map(|(name, f)| {
            let mut r = vec![name.to_string()];
            r.extend(a.environments.iter().map(f));
            r
        })
        .collect();
    // A report of many machines (`--by`) says which environment is whose,
    // by the host's level when the hosts are the factor (machines sharing
    // a hostname are told apart there).
    if let Some(by) = &a.factors.by {
        let mut r = vec!["host".to_string()];
        r.extend(a.environments.iter().map(|e| {
            let level = a
                .runs
                .iter()
                .find(|r| r.environment_id == e.id)
                .and_then(|r| r.by.clone())
                .filter(|_| by.factor == crate::store::RunFactor::Host);
            level
                .or_else(|| e.hostname.clone())
                .unwrap_or_else(|| "unknown".into())
        }));
        rows.insert(1, r);
    }
    (headers, rows)
}

/// A guest's level and what its timings are worth; "this machine" for a
/// host.
fn machine_cell(e: &crate::store::ReportEnvironment) -> String {
    match (&e.guest_machine, e.guest_accel.as_deref()) {
        (Some(m), Some("tcg")) => format!(
            "{m}, a guest under TCG: times, latencies and CPU times are emulation timings (its clock \
             runs while its vCPUs wait for the host); shares, orders, counts and placements are its kernel's"
        ),
        (Some(m), Some("tcg-icount")) => format!(
            "{m}, a guest under TCG with icount: time is virtual (counted in instructions), \
             deterministic run to run"
        ),
        (Some(m), Some(a)) => format!("{m}, a guest under {a}: as a host"),
        (Some(m), None) => format!("{m}, a guest"),
        (None, _) => "this machine (host)".into(),
    }
}

fn load_line(a: &Analysis) -> Option<String> {
    a.load.as_ref().map(|l| {
        format!(
            "1-minute load average at run start: min {}, median {}, max {}.",
            fmt::sig(l.min, 3),
            fmt::sig(l.median, 3),
            fmt::sig(l.max, 3)
        )
    })
}

/// Other programs' activity over the ok runs, as plain facts (the summary
/// names the runs over its thresholds). None when nothing was measured.
fn interference_line(a: &Analysis) -> Option<String> {
    let s = &a.interference;
    if !s.measured() {
        return None;
    }
    let pct = |v: Option<f64>| {
        v.map_or_else(|| "not measured".into(), |p| format!("{}%", fmt::sig(p, 2)))
    };
    Some(format!(
        "Other programs during the ok runs (schedlab's own processes not counted): runnable tasks at run start \
         max {} ({} of {} measured runs with {}+); steal time max {}; CPU time of a run's CPUs used by other \
         programs max {}.",
        s.max_others_runnable
            .map_or_else(|| "–".into(), |n| n.to_string()),
        s.busy_runs.len(),
        s.measured_runs,
        OTHERS_RUNNABLE_NOTE,
        pct(s.max_steal_pct),
        pct(s.max_other_cpu_pct),
    ))
}

impl Section for EnvironmentSection {
    fn id(&self) -> &'static str {
        "environment"
    }

    fn title(&self) -> &'static str {
        "Environment"
    }

    fn applies(&self, a: &Analysis) -> bool {
        !a.environments.is_empty()
    }

    fn blocks(&self, a: &Analysis) -> Vec<Block> {
        let (headers, rows) = env_table(a);
        let mut b = vec![Block::table(Table {
            title: String::new(),
            headers,
            numeric: Vec::new(),
            rows,
        })];
        b.extend(
            [load_line(a), interference_line(a)]
                .into_iter()
                .flatten()
                .map(Block::p),
        );
        b
    }

    fn json(&self, a: &Analysis) -> Option<Value> {
        Some(json!({
            "environments": a.environments,
            "load_avg_1m": a.load,
            "interference": a.interference,
        }))
    }
}
