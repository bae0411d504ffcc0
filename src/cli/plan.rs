//! `schedlab plan`: the runs a spec expands to, how many are stored, and a
//! time estimate, without running anything ([`crate::campaign::preview`]);
//! as text, or as JSON with `--json`.

use anyhow::Result;
use clap::Args;
use serde_json::{Value, json};
use std::path::Path;

use super::source::{DbArg, Loaded, SpecSource};
use crate::campaign::{self, Preview};
use crate::spec::{Order, Spec};
use crate::sys::probe;
use crate::{out, plan};

#[derive(Args)]
pub(super) struct PlanArgs {
    #[command(flatten)]
    source: SpecSource,
    #[command(flatten)]
    db: DbArg,
    /// List every run in campaign order.
    #[arg(long)]
    list: bool,
    /// Check the spec as `run --force` would (RT throttling off, an RT
    /// hog on every CPU); without it plan refuses what run refuses.
    #[arg(long)]
    force: bool,
    /// Print JSON instead of text (the runs under "list" with --list).
    #[arg(long)]
    json: bool,
    /// Print only what the spec's command workloads need installed: the
    /// Debian packages of their programs, one a line (with --json, the
    /// programs too). Checks nothing of this machine, so it answers before
    /// the programs are there.
    #[arg(long, conflicts_with_all = ["list", "force"])]
    packages: bool,
}

pub(super) fn run(a: PlanArgs) -> Result<i32> {
    let l = a.source.load_measured()?;
    if a.packages {
        let needs = plan::needs(&l.spec);
        if a.json {
            outln!("{}", serde_json::to_string_pretty(&needs)?)?;
        } else {
            for p in &needs.packages {
                outln!("{}", out::esc(p))?;
            }
        }
        return Ok(0);
    }
    let p = campaign::preview(&l.spec, &l.origin, &a.db.db, a.force)?;
    if a.json {
        let value = json(&l, &p, &a.db.db, a.list);
        outln!("{}", serde_json::to_string_pretty(&value)?)?;
        return Ok(0);
    }
    print_spec(&l)?;
    print_auto(&l.spec, &p)?;
    print_runs(&l.spec, &p, &a.db.db)?;
    if a.list {
        print_list(&l.spec, &p)?;
    }
    for w in warnings(&l.spec, &p) {
        outln!("warning      {}", out::esc(&w))?;
    }
    Ok(0)
}

/// The spec's factors, one line each.
fn print_spec(l: &Loaded) -> Result<()> {
    let s = &l.spec;
    let joined = |v: Vec<String>| v.join(", ");
    outln!("campaign     {} ({})", out::esc(&s.name), l.origin)?;
    if !s.description.is_empty() {
        outln!("             {}", out::esc(&s.description))?;
    }
    outln!(
        "policies     {}",
        joined(s.policies.iter().map(|p| p.name().to_string()).collect())
    )?;
    outln!(
        "workloads    {}",
        joined(
            s.workloads
                .iter()
                .map(|w| out::esc(&w.name).into_owned())
                .collect()
        )
    )?;
    outln!(
        "processes    {}",
        joined(s.processes.iter().map(|p| p.to_string()).collect())
    )?;
    outln!(
        "priorities   {}",
        joined(
            s.priorities
                .iter()
                .map(|p| out::esc(&p.name).into_owned())
                .collect()
        )
    )?;
    outln!(
        "cpus         {}",
        joined(s.cpus.iter().map(|c| c.label()).collect())
    )?;
    if !s.rt_runtime_us.is_empty() {
        outln!(
            "rt runtimes  {} µs",
            joined(s.rt_runtime_us.iter().map(|v| v.to_string()).collect())
        )?;
    }
    if !s.slice_us.is_empty() {
        outln!(
            "slices       {} µs (EEVDF, asked by the workers)",
            joined(s.slice_us.iter().map(|v| v.to_string()).collect())
        )?;
    }
    if !s.ext_schedulers.is_empty() {
        outln!(
            "sched_ext    {} (started before each run of its condition, stopped after)",
            joined(ext_levels(s))
        )?;
    }
    if !s.machines.is_empty() {
        outln!(
            "machines     {} (each guest boots once for its runs)",
            joined(machine_levels(s))
        )?;
    }
    for (i, e) in s.exclude.iter().enumerate() {
        let levels: Vec<String> = e.levels.iter().map(|(f, l)| format!("{f} {l}")).collect();
        let label = if i == 0 {
            "excluded    "
        } else {
            "            "
        };
        outln!(
            "{label} {} (matrix.exclude[{i}])",
            out::esc(&levels.join(", "))
        )?;
    }
    if let Some(hogs) = hogs(s) {
        outln!("hogs         {hogs}")?;
    }
    if s.trace {
        outln!(
            "trace        every run's sched_switch, wake-ups, migrations and exits (tracefs, \
             schedlab's own instance; stored with the run)"
        )?;
    }
    if let Some(n) = &l.trace_note {
        outln!("             {}", out::esc(n))?;
    }
    match s.auto_repetitions {
        Some(_) => outln!("repetitions  auto, at most {}", s.repetitions)?,
        None => outln!("repetitions  {}", s.repetitions)?,
    }
    outln!("scale        {}", s.scale)?;
    Ok(())
}

/// `repetitions = "auto"`: the rule, and how many runs it will likely take.
fn print_auto(s: &Spec, p: &Preview) -> Result<()> {
    let (Some(auto), Some(e)) = (s.auto_repetitions, &p.auto_estimate) else {
        return Ok(());
    };
    outln!(
        "precision    auto: rounds until each condition's 95 % interval of its primary metric is within ±{} % \
         (makespan; work for a duration workload), {} to {} runs per condition",
        auto.target_ci_pct,
        auto.min_repetitions,
        s.repetitions
    )?;
    match e.from_campaign {
        Some(id) => outln!(
            "             about {} runs, from the per-condition CV of campaign {id} ({} of {} conditions; a pilot of \
             {} for the others)",
            e.runs,
            e.conditions_known,
            e.conditions,
            auto.min_repetitions
        )?,
        None => outln!(
            "             no earlier campaign of this spec in the database: a pilot of min_repetitions ({}) per \
             condition ({} runs) first, then rounds until precise (at most {} runs)",
            auto.min_repetitions,
            e.runs,
            p.runs.len()
        )?,
    }
    Ok(())
}

/// The sched_ext levels: a name, with the command it loads when that
/// differs from the name.
fn ext_levels(s: &Spec) -> Vec<String> {
    s.ext_schedulers
        .iter()
        .map(|x| match x.loads() {
            false => x.name.clone(),
            true if x.command.join(" ") == x.name => x.name.clone(),
            true => format!("{} ({})", x.name, x.command.join(" ")),
        })
        .collect()
}

/// The machine levels: "host", or a guest's name with its kernel,
/// topology, nodes and accelerator.
fn machine_levels(s: &Spec) -> Vec<String> {
    s.machines
        .iter()
        .map(|m| match &m.guest {
            None => m.name.clone(),
            Some(g) => format!(
                "{} ({}, {}{}, {} MiB, {})",
                m.name,
                g.kernel,
                g.topology.label(),
                match g.numa_nodes {
                    1 => String::new(),
                    n => format!(" on {n} nodes"),
                },
                g.memory_mib,
                g.accel.name()
            ),
        })
        .collect()
}

/// The hogs beside the workers, when the spec has them.
fn hogs(s: &Spec) -> Option<String> {
    let h = s.hog.as_ref()?;
    let who = if h.is_rt() {
        format!("1 {} at RT priority {}", h.policy.name(), h.rt_priority)
    } else {
        format!("{} {} at nice {}", h.count, h.policy.name(), h.nice)
    };
    Some(format!("{who} on cpus {}", h.cpus.label()))
}

/// The run order in words.
fn order(s: &Spec, p: &Preview) -> String {
    match (s.order, p.seed) {
        (Order::Sequential, _) => "sequential".to_string(),
        (Order::Shuffled, Some(seed)) => format!("shuffled, seed {seed}"),
        (Order::Shuffled, None) => "shuffled, seed drawn when the campaign starts".to_string(),
    }
}

/// Runs not stored yet.
fn pending(p: &Preview) -> usize {
    p.runs.iter().filter(|r| !p.done.contains(&r.key)).count()
}

/// The order, the runs stored and left, and the estimate.
fn print_runs(s: &Spec, p: &Preview, db: &Path) -> Result<()> {
    let pending = pending(p);
    outln!("order        {}", order(s, p))?;
    outln!(
        "runs         {} ({} stored in {}, {} to run)",
        p.runs.len(),
        p.runs.len() - pending,
        out::path(db),
        pending
    )?;
    if pending == 0 {
        outln!("estimate     nothing left to run")?;
    } else {
        outln!(
            "estimate     {} for the runs left{} (from a {:.0} M iterations/s pi calibration on this machine; \
             I/O and contention make real runs longer)",
            crate::units::human_duration(p.estimate_s),
            match s.auto_repetitions {
                Some(_) => " if every condition runs max_repetitions",
                None => "",
            },
            p.rates.pi_iter_per_s / 1e6
        )?;
        for g in &p.guest_estimate {
            outln!("             {}", out::esc(g))?;
        }
    }
    Ok(())
}

/// The runs in the order they will run; in sequential order when the
/// shuffle's seed is not drawn yet.
fn listed_runs(s: &Spec, p: &Preview) -> Vec<plan::Run> {
    if p.seed.is_none() {
        let sequential = Spec {
            order: Order::Sequential,
            ..s.clone()
        };
        plan::expand(&sequential, 0)
    } else {
        p.runs.clone()
    }
}

/// Every run, marked when stored.
fn print_list(s: &Spec, p: &Preview) -> Result<()> {
    if p.seed.is_none() && s.order == Order::Shuffled {
        outln!(
            "(listing in sequential order: the shuffle seed is drawn when the campaign starts)"
        )?;
    }
    for r in &listed_runs(s, p) {
        let mark = if p.done.contains(&r.key) {
            "stored"
        } else {
            ""
        };
        outln!("{:>5}  {:<70} {mark}", r.seq, out::esc(&r.label()))?;
    }
    Ok(())
}

/// Policies this user may not set, and work too short for the machine's
/// slices.
fn warnings(s: &Spec, p: &Preview) -> Vec<String> {
    let mut warnings: Vec<String> = probe::probe()
        .policies
        .iter()
        .filter(|pp| !pp.allowed && s.policies.iter().any(|sp| sp.name() == pp.policy))
        .map(|pp| format!("{} runs will be skipped: {}", pp.policy, pp.detail))
        .collect();
    let all: Vec<&plan::Run> = p.runs.iter().collect();
    warnings.extend(plan::short_work_warnings(
        &all,
        &p.rates,
        campaign::slices_of(&p.env),
    ));
    warnings.extend(plan::model_cost_warning(
        &all,
        p.env.cpus_allowed.len(),
        &p.rates,
        p.env.hz.unwrap_or(250),
    ));
    warnings
}

/// What the text says, as one JSON object: the spec's factors as lists,
/// the run counts, the estimate and the calibration it comes from, the
/// warnings, and with `list` every run in campaign order.
fn json(l: &Loaded, p: &Preview, db: &Path, list: bool) -> Value {
    let s = &l.spec;
    let pending = pending(p);
    let mut v = json!({
        "campaign": s.name,
        "origin": l.origin,
        "description": s.description,
        "policies": s.policies.iter().map(|p| p.name()).collect::<Vec<_>>(),
        "workloads": s.workloads.iter().map(|w| &w.name).collect::<Vec<_>>(),
        "processes": s.processes,
        "priorities": s.priorities.iter().map(|p| &p.name).collect::<Vec<_>>(),
        "cpus": s.cpus.iter().map(|c| c.label()).collect::<Vec<_>>(),
        "machines": s.machines.iter().map(|m| &m.name).collect::<Vec<_>>(),
        "rt_runtime_us": s.rt_runtime_us,
        "slice_us": s.slice_us,
        "sched_ext": ext_levels(s),
        "exclude": s.exclude.iter().map(|e| {
            e.levels
                .iter()
                .map(|(f, l)| (f.clone(), Value::String(l.clone())))
                .collect::<serde_json::Map<_, _>>()
        }).collect::<Vec<_>>(),
        "hogs": hogs(s),
        "trace": s.trace,
        "trace_note": l.trace_note,
        "repetitions": s.repetitions,
        "scale": s.scale,
        "order": order(s, p),
        "seed": p.seed,
        "db": db,
        "runs": p.runs.len(),
        "stored": p.runs.len() - pending,
        "to_run": pending,
        "estimate_s": p.estimate_s,
        "estimate_guests": p.guest_estimate,
        "pi_iter_per_s": p.rates.pi_iter_per_s,
        "warnings": warnings(s, p),
        "packages": plan::needs(s).packages,
    });
    if let (Some(a), Some(e)) = (s.auto_repetitions, &p.auto_estimate) {
        v["auto_repetitions"] = json!({
            "target_ci_pct": a.target_ci_pct,
            "min_repetitions": a.min_repetitions,
            "max_repetitions": s.repetitions,
            "estimate": e,
        });
    }
    if list {
        v["list"] = listed_runs(s, p)
            .iter()
            .map(|r| {
                json!({
                    "seq": r.seq,
                    "key": r.key,
                    "label": r.label(),
                    "stored": p.done.contains(&r.key),
                })
            })
            .collect();
    }
    v
}
