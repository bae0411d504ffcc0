//! Raw spec → checked [`Spec`]: defaults, ranges and cross-key rules. Each
//! error names the key and the values it allows.

use std::path::PathBuf;

use super::raw::{IntOrList, RawMatrix, RawPriorities, RawSpec, RawWorkload};
use super::{
    AutoRepetitions, Cpus, ExtScheduler, Hog, NamedWorkload, Order, Spec, SpecError, WrrMechanism,
    WrrSettings,
};
use crate::policy::{
    Assignment, Deadline, NICE_MAX, NICE_MIN, Policy, PriorityMode, RT_MAX, RT_MIN,
};
use crate::workload::{Workload, registry};

pub const MAX_PROCESSES: i64 = 10_000;
/// The kernel's largest `sched_rt_period_us` is INT_MAX µs, but schedlab's
/// sweeps stay within one second periods or so; runtimes are checked against
/// the machine's period before anything is changed.
const MAX_RT_PERIOD_US: i64 = 1_000_000_000;
/// The kernel clamps a custom fair slice to 0.1..100 ms (Linux 6.12+).
const MIN_SLICE_US: i64 = 100;
const MAX_SLICE_US: i64 = 100_000;

struct Ctx<'a> {
    origin: &'a str,
}

impl Ctx<'_> {
    fn err(&self, key: impl Into<String>, message: impl Into<String>) -> SpecError {
        SpecError::Invalid {
            origin: self.origin.to_string(),
            key: key.into(),
            message: message.into(),
        }
    }

    fn positive(&self, key: &str, v: i64) -> Result<u64, SpecError> {
        if v <= 0 {
            return Err(self.err(key, format!("must be a positive integer, got {v}")));
        }
        Ok(v as u64)
    }

    fn seconds(&self, key: &str, v: f64, allow_zero: bool) -> Result<u64, SpecError> {
        if !v.is_finite() || v < 0.0 || (!allow_zero && v == 0.0) {
            let what = if allow_zero {
                "zero or more"
            } else {
                "more than zero"
            };
            return Err(self.err(key, format!("must be {what} seconds, got {v}")));
        }
        if v > 7.0 * 86400.0 {
            return Err(self.err(key, format!("{v} s is more than a week")));
        }
        Ok((v * 1e9).round() as u64)
    }
}

/// Validate a raw spec. `origin` is the file or preset name used in errors
/// and as the default campaign name.
pub fn validate(raw: RawSpec, origin: &str) -> Result<Spec, SpecError> {
    let cx = Ctx { origin };
    let name = raw.name.clone().unwrap_or_else(|| {
        std::path::Path::new(origin)
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "experiment".into())
    });
    if name.trim().is_empty() {
        return Err(cx.err("name", "must not be empty"));
    }
    let (repetitions, auto_repetitions) = repetitions(&cx, &raw)?;
    let order = match raw.order.as_deref() {
        None | Some("shuffled") => Order::Shuffled,
        Some("sequential") => Order::Sequential,
        Some(o) => {
            return Err(cx.err(
                "order",
                format!("unknown order \"{o}\"; allowed: shuffled, sequential"),
            ));
        }
    };
    let seed = match raw.seed {
        None => None,
        Some(s) if s >= 0 => Some(s as u64),
        Some(s) => return Err(cx.err("seed", format!("must be zero or positive, got {s}"))),
    };
    let timeout_ns = cx.seconds("timeout_s", raw.timeout_s.unwrap_or(600.0), false)?;
    let cooldown_ns = cx.seconds("cooldown_s", raw.cooldown_s.unwrap_or(0.5), true)?;
    let cpu_dma_latency_us = match raw.cpu_dma_latency_us {
        None => None,
        Some(v) if (0..=1_000_000).contains(&v) => Some(v as u32),
        Some(v) => {
            return Err(cx.err(
                "cpu_dma_latency_us",
                format!("must be between 0 and 1000000 µs (0: idle CPUs poll), got {v}"),
            ));
        }
    };
    let scale = raw.scale.unwrap_or(1.0);
    check_scale(scale).map_err(|m| cx.err("scale", m))?;
    let compare_margin_pct = match raw.compare_margin_pct {
        None => None,
        Some(v) if v > 0.0 && v < 100.0 => Some(v),
        Some(v) => {
            return Err(cx.err(
                "compare_margin_pct",
                format!("must be more than 0 and less than 100 (a percentage), got {v}"),
            ));
        }
    };
    let workdir = match raw.workdir.as_deref() {
        None => None,
        Some("") => return Err(cx.err("workdir", "must not be empty")),
        Some(w) => Some(PathBuf::from(w)),
    };

    let matrix = raw.matrix.clone().unwrap_or_default();
    let policies = policies(&cx, &matrix)?;
    let workloads = workloads(&cx, &raw, &matrix)?;
    let processes = processes(&cx, &matrix, &workloads)?;
    let priorities = priorities(&cx, &raw, &matrix)?;
    let cpus = cpus(&cx, &matrix)?;
    let deadline = build_deadline(&cx, &raw)?;
    let rt_runtime_us = rt_runtimes(&cx, &matrix)?;
    let slice_us = slices(&cx, &matrix, &policies)?;
    let ext_schedulers = ext_schedulers(&cx, &raw)?;
    let machines = super::machines::validate(
        cx.origin,
        raw.matrix.as_ref().and_then(|m| m.machine.as_ref()),
        &raw.machines,
    )?;
    check_run_count(
        &cx,
        &[
            ("repetitions", repetitions as usize),
            ("policies", policies.len()),
            ("workloads", workloads.len()),
            ("process counts", processes.len()),
            ("priority modes", priorities.len()),
            ("CPU sets", cpus.len()),
            ("RT runtimes", rt_runtime_us.len().max(1)),
            ("slices", slice_us.len().max(1)),
            ("sched_ext schedulers", ext_schedulers.len().max(1)),
            ("machines", machines.len().max(1)),
        ],
    )?;
    let hog = hog(&cx, &raw)?;
    let wrr = wrr(&cx, &raw)?;

    let mut spec = Spec {
        name,
        description: raw.description.clone().unwrap_or_default(),
        repetitions,
        auto_repetitions,
        order,
        seed,
        timeout_ns,
        cooldown_ns,
        cpu_dma_latency_us,
        trace: raw.trace.unwrap_or(false),
        workdir,
        scale,
        compare_margin_pct,
        policies,
        workloads,
        processes,
        priorities,
        cpus,
        rt_runtime_us,
        slice_us,
        ext_schedulers,
        machines,
        exclude: Vec::new(),
        deadline,
        hog,
        wrr,
    };
    if let Some(entries) = &matrix.exclude {
        spec.exclude = super::exclude::validate(cx.origin, entries, &spec)?;
    }
    Ok(spec)
}

/// `matrix.policy`: the scheduling policies compared (OTHER by default).
fn policies(cx: &Ctx, matrix: &RawMatrix) -> Result<Vec<Policy>, SpecError> {
    let policies = match &matrix.policy {
        None => vec![Policy::Other],
        Some(list) => {
            non_empty(cx, "matrix.policy", list.len())?;
            let mut out = Vec::new();
            for p in list {
                let policy = Policy::parse(p).ok_or_else(|| {
                    cx.err(
                        "matrix.policy",
                        format!("unknown policy \"{p}\"; allowed: {}", Policy::names()),
                    )
                })?;
                push_unique(cx, "matrix.policy", &mut out, policy, p)?;
            }
            out
        }
    };
    Ok(policies)
}

/// `matrix.workload` with `[workloads.NAME]`: every defined workload is
/// checked, used or not, so typos surface.
fn workloads(cx: &Ctx, raw: &RawSpec, matrix: &RawMatrix) -> Result<Vec<NamedWorkload>, SpecError> {
    for (name, w) in &raw.workloads {
        // Check every defined workload, used or not, so typos surface.
        build_workload(cx, name, w)?;
    }
    let workload_names = matrix.workload.clone().unwrap_or_else(|| vec!["pi".into()]);
    non_empty(cx, "matrix.workload", workload_names.len())?;
    let mut workloads: Vec<NamedWorkload> = Vec::new();
    for n in &workload_names {
        check_level_name(cx, "matrix.workload", n)?;
        let workload = match raw.workloads.get(n) {
            Some(w) => build_workload(cx, n, w)?,
            None if registry::find(n).is_some() => build_workload(cx, n, &RawWorkload::new())?,
            None => {
                let defined: Vec<&str> = raw.workloads.keys().map(|s| s.as_str()).collect();
                return Err(cx.err(
                    "matrix.workload",
                    format!(
                        "unknown workload \"{n}\"; allowed: {}{}",
                        registry::names().join(", "),
                        if defined.is_empty() {
                            String::new()
                        } else {
                            format!(", or one defined under [workloads]: {}", defined.join(", "))
                        }
                    ),
                ));
            }
        };
        if workloads.iter().any(|w| &w.name == n) {
            return Err(cx.err("matrix.workload", format!("\"{n}\" is listed twice")));
        }
        workloads.push(NamedWorkload {
            name: n.clone(),
            workload,
        });
    }
    Ok(workloads)
}

/// `matrix.processes`: process counts, each a multiple of every
/// workload's group of cooperating processes (one group of the largest by
/// default).
fn processes(
    cx: &Ctx,
    matrix: &RawMatrix,
    workloads: &[NamedWorkload],
) -> Result<Vec<u32>, SpecError> {
    // Pairs and groups of cooperating processes: one of the largest by default.
    let group = workloads
        .iter()
        .map(|w| w.workload.group_size())
        .max()
        .unwrap_or(1);
    let processes = match &matrix.processes {
        None => vec![group],
        Some(list) => {
            non_empty(cx, "matrix.processes", list.len())?;
            let mut out = Vec::new();
            for &p in list {
                if !(1..=MAX_PROCESSES).contains(&p) {
                    return Err(cx.err(
                        "matrix.processes",
                        format!("each count must be between 1 and {MAX_PROCESSES}, got {p}"),
                    ));
                }
                push_unique(cx, "matrix.processes", &mut out, p as u32, &p.to_string())?;
            }
            out
        }
    };

    for w in workloads {
        let g = w.workload.group_size();
        if let Some(p) = processes.iter().find(|&&p| p % g != 0) {
            let key = if matrix.processes.is_some() {
                "matrix.processes"
            } else {
                "matrix.workload"
            };
            return Err(cx.err(
                key,
                format!(
                    "the {} workload \"{}\" runs in groups of {g} processes, so every process count must be a multiple of {g}; got {p}",
                    w.workload.kind(),
                    w.name
                ),
            ));
        }
    }
    Ok(processes)
}

/// `matrix.priorities` with `[priorities.NAME]` (uniform by default).
fn priorities(cx: &Ctx, raw: &RawSpec, matrix: &RawMatrix) -> Result<Vec<PriorityMode>, SpecError> {
    for (name, p) in &raw.priorities {
        build_priorities(cx, name, p)?;
    }
    let priority_names = matrix
        .priorities
        .clone()
        .unwrap_or_else(|| vec!["uniform".into()]);
    non_empty(cx, "matrix.priorities", priority_names.len())?;
    let mut priorities: Vec<PriorityMode> = Vec::new();
    for n in &priority_names {
        check_level_name(cx, "matrix.priorities", n)?;
        let assignment = match raw.priorities.get(n) {
            Some(p) => build_priorities(cx, n, p)?,
            None => builtin_priorities(n).ok_or_else(|| {
                let defined: Vec<&str> = raw.priorities.keys().map(|s| s.as_str()).collect();
                cx.err(
                    "matrix.priorities",
                    format!(
                        "unknown priority mode \"{n}\"; allowed: uniform, spread, nonuniform{}",
                        if defined.is_empty() {
                            String::new()
                        } else {
                            format!(
                                ", or one defined under [priorities]: {}",
                                defined.join(", ")
                            )
                        }
                    ),
                )
            })?,
        };
        if priorities.iter().any(|p| &p.name == n) {
            return Err(cx.err("matrix.priorities", format!("\"{n}\" is listed twice")));
        }
        priorities.push(PriorityMode {
            name: n.clone(),
            assignment,
        });
    }
    Ok(priorities)
}

/// `matrix.cpus`: the CPU sets (all CPUs by default).
fn cpus(cx: &Ctx, matrix: &RawMatrix) -> Result<Vec<Cpus>, SpecError> {
    let cpus = match &matrix.cpus {
        None => vec![Cpus::All],
        Some(list) => {
            non_empty(cx, "matrix.cpus", list.len())?;
            let mut out = Vec::new();
            for c in list {
                let parsed = Cpus::parse(c).map_err(|m| cx.err("matrix.cpus", m))?;
                if out.contains(&parsed) {
                    return Err(cx.err("matrix.cpus", format!("\"{c}\" is listed twice")));
                }
                out.push(parsed);
            }
            out
        }
    };
    Ok(cpus)
}

/// `matrix.rt_runtime_us`: RT throttling levels (none by default).
fn rt_runtimes(cx: &Ctx, matrix: &RawMatrix) -> Result<Vec<i64>, SpecError> {
    let rt_runtime_us = match &matrix.rt_runtime_us {
        None => Vec::new(),
        Some(list) => {
            non_empty(cx, "matrix.rt_runtime_us", list.len())?;
            let mut out = Vec::new();
            for &v in list {
                if !(-1..=MAX_RT_PERIOD_US).contains(&v) {
                    return Err(cx.err(
                        "matrix.rt_runtime_us",
                        format!("{v} is not -1 (unlimited) or 0..={MAX_RT_PERIOD_US} µs"),
                    ));
                }
                push_unique(cx, "matrix.rt_runtime_us", &mut out, v, &v.to_string())?;
            }
            out
        }
    };
    Ok(rt_runtime_us)
}

/// `matrix.slice_us`: custom EEVDF slices, for the fair policies only.
fn slices(cx: &Ctx, matrix: &RawMatrix, policies: &[Policy]) -> Result<Vec<u32>, SpecError> {
    let slice_us = match &matrix.slice_us {
        None => Vec::new(),
        Some(list) => {
            non_empty(cx, "matrix.slice_us", list.len())?;
            if let Some(p) = policies
                .iter()
                .find(|p| !matches!(p, Policy::Other | Policy::Batch))
            {
                return Err(cx.err(
                    "matrix.slice_us",
                    format!(
                        "a custom EEVDF slice applies to the fair policies other and batch only, \
                         but matrix.policy has {}",
                        p.name()
                    ),
                ));
            }
            let mut out = Vec::new();
            for &v in list {
                if !(MIN_SLICE_US..=MAX_SLICE_US).contains(&v) {
                    return Err(cx.err(
                        "matrix.slice_us",
                        format!(
                            "{v} is out of the kernel's range {MIN_SLICE_US}..={MAX_SLICE_US} µs (0.1 to 100 ms)"
                        ),
                    ));
                }
                push_unique(cx, "matrix.slice_us", &mut out, v as u32, &v.to_string())?;
            }
            out
        }
    };
    Ok(slice_us)
}

/// `[hog]`: a CPU hog beside the workers.
fn hog(cx: &Ctx, raw: &RawSpec) -> Result<Option<Hog>, SpecError> {
    let hog = match &raw.hog {
        None => None,
        Some(h) => {
            let policy = match h.policy.as_deref() {
                None => Policy::Fifo,
                Some(p) => match Policy::parse(p) {
                    Some(p @ (Policy::Fifo | Policy::Rr | Policy::Other | Policy::Batch)) => p,
                    _ => {
                        return Err(cx.err(
                            "hog.policy",
                            format!(
                                "\"{p}\" cannot run a CPU hog; allowed: fifo, rr, other, batch"
                            ),
                        ));
                    }
                },
            };
            let rt_priority = match h.rt_priority {
                None => 50,
                Some(v) if (RT_MIN as i64..=RT_MAX as i64).contains(&v) => v as i32,
                Some(v) => {
                    return Err(cx.err(
                        "hog.rt_priority",
                        format!("{v} is out of range {RT_MIN}..{RT_MAX}"),
                    ));
                }
            };
            let cpus =
                Cpus::parse(h.cpus.as_deref().unwrap_or("0")).map_err(|m| cx.err("hog.cpus", m))?;
            let fair = matches!(policy, Policy::Other | Policy::Batch);
            if fair && h.rt_priority.is_some() {
                return Err(cx.err(
                    "hog.rt_priority",
                    format!("a {} hog has no RT priority; use nice", policy.name()),
                ));
            }
            let nice = match h.nice {
                None => 0,
                Some(_) if !fair => {
                    return Err(cx.err(
                        "hog.nice",
                        format!("a {} hog has no nice value; use rt_priority", policy.name()),
                    ));
                }
                Some(v) if (NICE_MIN as i64..=NICE_MAX as i64).contains(&v) => v as i32,
                Some(v) => {
                    return Err(cx.err(
                        "hog.nice",
                        format!("{v} is out of range {NICE_MIN}..{NICE_MAX}"),
                    ));
                }
            };
            let count = match h.count {
                None => 1,
                Some(_) if !fair => {
                    return Err(cx.err(
                        "hog.count",
                        "one RT hog at most: an RT hog takes its CPU whole; fair hogs (policy \"other\" or \"batch\") may be many",
                    ));
                }
                Some(v) if (1..=64).contains(&v) => v as u32,
                Some(v) => {
                    return Err(cx.err("hog.count", format!("must be between 1 and 64, got {v}")));
                }
            };
            Some(Hog {
                policy,
                rt_priority,
                cpus,
                nice,
                count,
            })
        }
    };
    Ok(hog)
}

/// `[wrr]`: the WRR quantum and mechanism.
fn wrr(cx: &Ctx, raw: &RawSpec) -> Result<WrrSettings, SpecError> {
    let wrr = {
        let w = raw.wrr.clone().unwrap_or_default();
        let quantum_ms = w.quantum_ms.unwrap_or(10.0);
        if !(quantum_ms.is_finite() && (0.1..=10_000.0).contains(&quantum_ms)) {
            return Err(cx.err(
                "wrr.quantum_ms",
                format!("must be between 0.1 and 10000 ms, got {quantum_ms}"),
            ));
        }
        let mechanism = match w.mechanism.as_deref() {
            None | Some("auto") => None,
            Some("fifo") => Some(WrrMechanism::Fifo),
            Some("signals") => Some(WrrMechanism::Signals),
            Some("ext") => Some(WrrMechanism::Ext),
            Some(m) => {
                return Err(cx.err(
                    "wrr.mechanism",
                    format!("unknown mechanism \"{m}\"; allowed: auto, ext, fifo, signals"),
                ));
            }
        };
        WrrSettings {
            quantum_ns: (quantum_ms * 1e6).round() as u64,
            mechanism,
        }
    };
    Ok(wrr)
}

/// Default and bounds of `repetitions = "auto"`: at least 10 runs (the
/// stopping rule cannot stop before about 10 anyway, see
/// [`crate::stats::sequential`]), at most 50 unless `max_repetitions` says.
pub const AUTO_MIN_REPETITIONS: u32 = 10;
pub const AUTO_MAX_REPETITIONS: u32 = 50;
const MAX_REPETITIONS: i64 = 100_000;

/// `repetitions`: a count, or "auto" with its keys (the count is then
/// `max_repetitions`).
fn repetitions(cx: &Ctx, raw: &RawSpec) -> Result<(u32, Option<AutoRepetitions>), SpecError> {
    let auto = match &raw.repetitions {
        None => false,
        Some(toml::Value::Integer(r)) if (1..=MAX_REPETITIONS).contains(r) => false,
        Some(toml::Value::Integer(r)) => {
            return Err(cx.err(
                "repetitions",
                format!("must be between 1 and {MAX_REPETITIONS}, got {r}"),
            ));
        }
        Some(toml::Value::String(s)) if s == "auto" => true,
        Some(v) => {
            return Err(cx.err(
                "repetitions",
                format!("must be a number of runs or \"auto\", got {v}"),
            ));
        }
    };
    if !auto {
        for (key, given) in [
            ("target_ci_pct", raw.target_ci_pct.is_some()),
            ("min_repetitions", raw.min_repetitions.is_some()),
            ("max_repetitions", raw.max_repetitions.is_some()),
        ] {
            if given {
                return Err(cx.err(key, "applies only with repetitions = \"auto\""));
            }
        }
        let n = match &raw.repetitions {
            Some(toml::Value::Integer(r)) => *r as u32,
            _ => 3,
        };
        return Ok((n, None));
    }
    let target_ci_pct = match raw.target_ci_pct {
        None => {
            return Err(cx.err(
                "target_ci_pct",
                "is required with repetitions = \"auto\": the half-width of the 95 % interval of \
                 each condition's mean to reach, in % of the mean (e.g. 2)",
            ));
        }
        Some(v) if v.is_finite() && v > 0.0 && v < 100.0 => v,
        Some(v) => {
            return Err(cx.err(
                "target_ci_pct",
                format!("must be more than 0 and less than 100 (a percentage), got {v}"),
            ));
        }
    };
    let min = match raw.min_repetitions {
        None => AUTO_MIN_REPETITIONS as i64,
        Some(v) if (2..=MAX_REPETITIONS).contains(&v) => v,
        Some(v) => {
            return Err(cx.err(
                "min_repetitions",
                format!("must be between 2 and {MAX_REPETITIONS}, got {v}"),
            ));
        }
    };
    let max = match raw.max_repetitions {
        None => (AUTO_MAX_REPETITIONS as i64).max(min),
        Some(v) if (2..=MAX_REPETITIONS).contains(&v) && v >= min => v,
        Some(v) => {
            return Err(cx.err(
                "max_repetitions",
                format!(
                    "must be at least min_repetitions ({min}) and at most {MAX_REPETITIONS}, got {v}"
                ),
            ));
        }
    };
    Ok((
        max as u32,
        Some(AutoRepetitions {
            target_ci_pct,
            min_repetitions: min as u32,
        }),
    ))
}

/// The longest a sched_ext scheduler program may take to load (and the
/// default: generous, since a VM without KVM loads one in seconds).
const MAX_EXT_READY_S: f64 = 600.0;
const DEFAULT_EXT_READY_S: f64 = 30.0;

/// `matrix.ext_scheduler` with `[ext_schedulers.NAME]`: each level is
/// "none", a name defined there, or a command line (split at whitespace)
/// whose program is found in PATH when the run starts.
fn ext_schedulers(cx: &Ctx, raw: &RawSpec) -> Result<Vec<ExtScheduler>, SpecError> {
    let listed = raw.matrix.as_ref().and_then(|m| m.ext_scheduler.as_ref());
    let Some(list) = listed else {
        if let Some(name) = raw.ext_schedulers.keys().next() {
            return Err(cx.err(
                format!("ext_schedulers.{name}"),
                "defined but matrix.ext_scheduler is not set: list it there (with \"none\" for \
                 the kernel's own scheduling)",
            ));
        }
        return Ok(Vec::new());
    };
    non_empty(cx, "matrix.ext_scheduler", list.len())?;
    for (name, table) in &raw.ext_schedulers {
        let key = format!("ext_schedulers.{name}");
        if name == ExtScheduler::NONE {
            return Err(cx.err(
                key,
                "\"none\" is the level without a scheduler; name it otherwise",
            ));
        }
        if !list.iter().any(|l| l.trim() == name) {
            return Err(cx.err(key, "defined but not listed in matrix.ext_scheduler"));
        }
        let command = table.command.as_deref().unwrap_or_default();
        if command.first().is_none_or(|p| p.trim().is_empty()) {
            return Err(cx.err(
                format!("{key}.command"),
                "must name the program first, e.g. command = [\"scx_simple\", \"-f\"]",
            ));
        }
        if let Some(t) = table.ready_timeout_s
            && !(t.is_finite() && t > 0.0 && t <= MAX_EXT_READY_S)
        {
            return Err(cx.err(
                format!("{key}.ready_timeout_s"),
                format!("must be more than 0 and at most {MAX_EXT_READY_S} s, got {t}"),
            ));
        }
    }
    let mut out = Vec::new();
    for value in list {
        let name = value.trim();
        if name.is_empty() {
            return Err(cx.err(
                "matrix.ext_scheduler",
                "an empty value; use \"none\", a program such as \"scx_simple\", or a name \
                 defined in [ext_schedulers.NAME]",
            ));
        }
        let level = if name == ExtScheduler::NONE {
            ExtScheduler {
                name: name.to_string(),
                command: Vec::new(),
                ready_timeout_ns: 0,
            }
        } else {
            let table = raw.ext_schedulers.get(name);
            let command = match table.and_then(|t| t.command.clone()) {
                Some(c) => c,
                None => name.split_whitespace().map(str::to_string).collect(),
            };
            let ready_s = table
                .and_then(|t| t.ready_timeout_s)
                .unwrap_or(DEFAULT_EXT_READY_S);
            ExtScheduler {
                name: name.to_string(),
                command,
                ready_timeout_ns: (ready_s * 1e9).round() as u64,
            }
        };
        push_unique(cx, "matrix.ext_scheduler", &mut out, level, name)?;
    }
    Ok(out)
}

/// The most runs a campaign may have: 100,000 runs of one second each are
/// already more than a day, and the plan of every run is held in memory.
pub const MAX_RUNS: u64 = 100_000;

/// Refuse a matrix whose product × repetitions is more than [`MAX_RUNS`]
/// runs (counted without overflow, before any run is listed).
fn check_run_count(cx: &Ctx, factors: &[(&str, usize)]) -> Result<(), SpecError> {
    let runs = factors
        .iter()
        .fold(1u64, |n, &(_, len)| n.saturating_mul(len as u64));
    if runs > MAX_RUNS {
        let product: Vec<String> = factors
            .iter()
            .filter(|(_, len)| *len > 1)
            .map(|(what, len)| format!("{len} {what}"))
            .collect();
        let runs = if runs == u64::MAX {
            "more than 18446744073709551614".to_string()
        } else {
            runs.to_string()
        };
        return Err(cx.err(
            "matrix",
            format!(
                "the campaign would have {runs} runs ({}), more than the {MAX_RUNS} a campaign may have; \
                 list fewer values or lower repetitions",
                product.join(" × ")
            ),
        ));
    }
    Ok(())
}

/// Workload and priority-mode names are parts of run keys
/// (`…;workload=NAME;…;priorities=NAME;…`): `;` or `=` in one could make two
/// different runs share a key. (Other characters are fine: names reach the
/// terminal escaped.)
fn check_level_name(cx: &Ctx, key: &str, name: &str) -> Result<(), SpecError> {
    if name.trim().is_empty() {
        return Err(cx.err(key, "a name must not be empty"));
    }
    if let Some(c) = name.chars().find(|c| *c == ';' || *c == '=') {
        return Err(cx.err(
            key,
            format!(
                "\"{}\" contains \"{c}\", which a name may not (names are parts of run keys)",
                name.escape_debug()
            ),
        ));
    }
    Ok(())
}

fn non_empty(cx: &Ctx, key: &str, len: usize) -> Result<(), SpecError> {
    if len == 0 {
        return Err(cx.err(key, "must list at least one value"));
    }
    Ok(())
}

fn push_unique<T: PartialEq>(
    cx: &Ctx,
    key: &str,
    out: &mut Vec<T>,
    v: T,
    shown: &str,
) -> Result<(), SpecError> {
    if out.contains(&v) {
        return Err(cx.err(key, format!("\"{shown}\" is listed twice")));
    }
    out.push(v);
    Ok(())
}

fn build_workload(cx: &Ctx, name: &str, w: &RawWorkload) -> Result<Workload, SpecError> {
    let base = format!("workloads.{name}");
    let kind = match w.get("kind") {
        None => name.to_string(),
        Some(toml::Value::String(k)) => k.clone(),
        Some(v) => {
            return Err(cx.err(
                format!("{base}.kind"),
                format!("must be a string, got {} `{v}`", v.type_str()),
            ));
        }
    };
    if registry::find(&kind).is_none() {
        let key = if w.contains_key("kind") {
            format!("{base}.kind")
        } else {
            base.clone()
        };
        return Err(cx.err(
            key,
            format!(
                "unknown workload kind \"{kind}\"; allowed: {} (set `kind` when the table's name is not a kind)",
                registry::names().join(", ")
            ),
        ));
    }
    registry::parse(name, &kind, w).map_err(|e| cx.err(e.key, e.message))
}

fn builtin_priorities(name: &str) -> Option<Assignment> {
    match name {
        "uniform" => Some(Assignment::Uniform {
            nice: 0,
            rt_priority: 50,
            weight: 1,
        }),
        "spread" | "nonuniform" => Some(Assignment::Spread {
            nice: (-10, 10),
            rt_priority: (1, 99),
            weight: (1, 20),
        }),
        _ => None,
    }
}

/// Valid range of each priority key.
fn range_of(key: &str) -> (i64, i64) {
    match key {
        "nice" => (NICE_MIN as i64, NICE_MAX as i64),
        "rt_priority" => (RT_MIN as i64, RT_MAX as i64),
        _ => (1, MAX_WEIGHT),
    }
}

/// Largest WRR weight: a slice of quantum × weight must stay reasonable.
pub const MAX_WEIGHT: i64 = 1000;

fn build_priorities(cx: &Ctx, name: &str, p: &RawPriorities) -> Result<Assignment, SpecError> {
    let base = format!("priorities.{name}");
    let mode = match p.mode.as_deref() {
        Some(m) => m.to_string(),
        None => match builtin_priorities(name) {
            Some(a) => a.mode_name().to_string(),
            None => {
                return Err(cx.err(
                    format!("{base}.mode"),
                    "missing; allowed: uniform, spread, list, weights",
                ));
            }
        },
    };
    let check = |key: &str, v: i64| -> Result<i64, SpecError> {
        let (lo, hi) = range_of(key);
        if v < lo || v > hi {
            return Err(cx.err(
                format!("{base}.{key}"),
                format!("{v} is out of range {lo}..{hi}"),
            ));
        }
        Ok(v)
    };
    let one = |key: &str, v: &Option<IntOrList>, d: i64| -> Result<i64, SpecError> {
        match v {
            None => Ok(d),
            Some(IntOrList::Int(x)) => check(key, *x),
            Some(IntOrList::List(_)) => Err(cx.err(
                format!("{base}.{key}"),
                format!("mode \"{mode}\" takes one integer here, not a list"),
            )),
        }
    };
    let pair = |key: &str, v: &Option<IntOrList>, d: (i64, i64)| -> Result<(i64, i64), SpecError> {
        match v {
            None => Ok(d),
            Some(IntOrList::List(l)) if l.len() == 2 => Ok((check(key, l[0])?, check(key, l[1])?)),
            _ => Err(cx.err(
                format!("{base}.{key}"),
                "mode \"spread\" takes a range [first, last], e.g. [-10, 10]",
            )),
        }
    };
    let list = |key: &str, v: &Option<IntOrList>, d: i64| -> Result<Vec<i64>, SpecError> {
        match v {
            None => Ok(vec![d]),
            Some(IntOrList::Int(x)) => Ok(vec![check(key, *x)?]),
            Some(IntOrList::List(l)) if !l.is_empty() => l.iter().map(|x| check(key, *x)).collect(),
            Some(IntOrList::List(_)) => {
                Err(cx.err(format!("{base}.{key}"), "the list must not be empty"))
            }
        }
    };
    let i32s = |v: Vec<i64>| v.into_iter().map(|x| x as i32).collect::<Vec<_>>();
    let u32s = |v: Vec<i64>| v.into_iter().map(|x| x as u32).collect::<Vec<_>>();
    match mode.as_str() {
        "uniform" => Ok(Assignment::Uniform {
            nice: one("nice", &p.nice, 0)? as i32,
            rt_priority: one("rt_priority", &p.rt_priority, 50)? as i32,
            weight: one("weight", &p.weight, 1)? as u32,
        }),
        "spread" => {
            let nice = pair("nice", &p.nice, (-10, 10))?;
            let rt = pair("rt_priority", &p.rt_priority, (1, 99))?;
            let weight = pair("weight", &p.weight, (1, 20))?;
            Ok(Assignment::Spread {
                nice: (nice.0 as i32, nice.1 as i32),
                rt_priority: (rt.0 as i32, rt.1 as i32),
                weight: (weight.0 as u32, weight.1 as u32),
            })
        }
        "list" => {
            if p.nice.is_none() && p.rt_priority.is_none() && p.weight.is_none() {
                return Err(cx.err(
                    &base,
                    "mode \"list\" needs nice = [...], rt_priority = [...] and/or weight = [...]",
                ));
            }
            Ok(Assignment::List {
                nice: i32s(list("nice", &p.nice, 0)?),
                rt_priority: i32s(list("rt_priority", &p.rt_priority, 50)?),
                weight: u32s(list("weight", &p.weight, 1)?),
            })
        }
        "weights" => {
            if p.nice.is_some() {
                return Err(cx.err(
                    format!("{base}.nice"),
                    "mode \"weights\" derives nice values from the weights; remove nice",
                ));
            }
            if p.weight.is_none() {
                return Err(cx.err(
                    format!("{base}.weight"),
                    "mode \"weights\" needs weight = [...]",
                ));
            }
            Ok(Assignment::Weights {
                weight: u32s(list("weight", &p.weight, 1)?),
                rt_priority: one("rt_priority", &p.rt_priority, 50)? as i32,
            })
        }
        m => Err(cx.err(
            format!("{base}.mode"),
            format!("unknown mode \"{m}\"; allowed: uniform, spread, list, weights"),
        )),
    }
}

fn build_deadline(cx: &Ctx, raw: &RawSpec) -> Result<Deadline, SpecError> {
    let d = raw.deadline.clone().unwrap_or_default();
    let period_us = match d.period_us {
        None => 10_000,
        Some(p) => cx.positive("deadline.period_us", p)?,
    };
    let deadline_us = match d.deadline_us {
        None => period_us,
        Some(x) => cx.positive("deadline.deadline_us", x)?,
    };
    let runtime_us = match &d.runtime_us {
        None => None,
        Some(toml::Value::String(s)) if s == "auto" => None,
        Some(toml::Value::Integer(r)) => Some(cx.positive("deadline.runtime_us", *r)?),
        Some(v) => {
            return Err(cx.err(
                "deadline.runtime_us",
                format!("must be \"auto\" or a positive integer of µs, got {v}"),
            ));
        }
    };
    if deadline_us > period_us {
        return Err(cx.err(
            "deadline.deadline_us",
            format!("SCHED_DEADLINE needs runtime ≤ deadline ≤ period; deadline {deadline_us} µs > period {period_us} µs"),
        ));
    }
    if let Some(r) = runtime_us
        && r > deadline_us
    {
        return Err(cx.err(
            "deadline.runtime_us",
            format!("SCHED_DEADLINE needs runtime ≤ deadline ≤ period; runtime {r} µs > deadline {deadline_us} µs"),
        ));
    }
    if period_us > 4_000_000 {
        return Err(cx.err("deadline.period_us", format!("at most 4000000 µs (the kernel's sched_deadline_period_max_us default), got {period_us}")));
    }
    Ok(Deadline {
        runtime_ns: runtime_us.map(|r| r * 1000),
        deadline_ns: deadline_us * 1000,
        period_ns: period_us * 1000,
    })
}

/// The work multiplier (`scale`, `--scale`): more than 0, at most 1000.
pub fn check_scale(scale: f64) -> Result<(), String> {
    if scale.is_finite() && scale > 0.0 && scale <= 1000.0 {
        Ok(())
    } else {
        Err(format!("must be more than 0 and at most 1000, got {scale}"))
    }
}
