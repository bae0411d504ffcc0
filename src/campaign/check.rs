//! The checks of a spec that depend on this machine: CPUs exist, RT
//! runtimes fit the period, nothing risks freezing the machine without
//! `--force`, the work directory can be written and holds what the largest
//! run writes, and the process, file and memory limits allow the largest
//! run. `plan` and `run` apply the same checks.

use crate::plan::{Plan, Run};
use crate::spec::{Spec, SpecError};
use crate::sys::{envinfo, fsinfo, limits};

use super::workdir_of;

/// Check the parts of a spec that depend on this machine: CPUs exist, RT
/// runtimes fit the period, the work directory can be written and holds
/// what the largest run writes, and nothing risks freezing the machine
/// unless `force` says so. `plan` and `run` apply the same checks, to the
/// campaign's one expansion of `spec` (`plan`).
pub fn check_machine(
    spec: &Spec,
    plan: &Plan,
    origin: &str,
    env: &envinfo::EnvSnapshot,
    force: bool,
) -> Result<(), SpecError> {
    let err = |key: &str, message: String| SpecError::Invalid {
        origin: origin.to_string(),
        key: key.into(),
        message,
    };
    let allowed = &env.cpus_allowed;
    check_model(spec, origin, env)?;
    check_guests(spec, &limits::Limits::capture(), &err)?;
    if spec.rt_runtime_us.iter().any(|&v| v < 0) && !force {
        return Err(err(
            "matrix.rt_runtime_us",
            "-1 switches RT throttling off, which lets any real-time task freeze the machine; refused \
             without --force"
                .into(),
        ));
    }
    let unlimited = spec.rt_runtime_us.contains(&-1)
        || (spec.rt_runtime_us.is_empty() && env.sched_rt_runtime_us == Some(-1));
    let rt_work = spec.hog.as_ref().is_some_and(|h| h.is_rt())
        || spec
            .policies
            .iter()
            .any(|p| p.class() != crate::policy::Class::Fair);
    if unlimited && rt_work && !force {
        return Err(err(
            "matrix.rt_runtime_us",
            "real-time work with RT throttling disabled (sched_rt_runtime_us = -1) can freeze \
             the machine; refused without --force"
                .into(),
        ));
    }
    if let Some(hog) = spec.hog.as_ref().filter(|h| h.is_rt()) {
        let cpus = hog.cpus.resolve(allowed).map_err(|m| err("hog.cpus", m))?;
        if cpus.len() >= allowed.len() && !force {
            return Err(err(
                "hog.cpus",
                format!(
                    "an RT CPU hog on every CPU ({}) leaves the machine only what RT throttling \
                     spares; refused without --force",
                    hog.cpus.label()
                ),
            ));
        }
    }
    if spec.trace && crate::sys::proc::euid() != 0 {
        return Err(err(
            "trace",
            "tracing needs root: schedlab mounts tracefs and makes a tracing instance of its own \
             (run as root, or without trace = true / --trace)"
                .into(),
        ));
    }
    check_workdir(spec, plan, &err)?;
    check_limits(spec, plan, &limits::Limits::capture(), &err)
}

/// The checks that hold for the model as for the machine (`simulate`
/// applies them, and `plan` and `run` through [`check_machine`]): the CPUs
/// each level names exist, and RT runtimes fit the period.
pub fn check_model(spec: &Spec, origin: &str, env: &envinfo::EnvSnapshot) -> Result<(), SpecError> {
    let err = |key: &str, message: String| SpecError::Invalid {
        origin: origin.to_string(),
        key: key.into(),
        message,
    };
    for (level, cpus) in level_cpus(spec, &env.cpus_allowed) {
        for c in &spec.cpus {
            c.resolve(&cpus).map_err(|m| match &level {
                Some(name) => err("matrix.cpus", format!("on machine \"{name}\": {m}")),
                None => err("matrix.cpus", m),
            })?;
        }
    }
    let period = env.sched_rt_period_us.unwrap_or(1_000_000);
    for &v in &spec.rt_runtime_us {
        if v > period {
            return Err(err(
                "matrix.rt_runtime_us",
                format!("{v} µs is longer than sched_rt_period_us = {period} µs"),
            ));
        }
    }
    Ok(())
}

/// The CPUs of each machine level the spec names (None: this machine,
/// whose CPUs are those schedlab may use; a guest's are all of its own).
fn level_cpus(spec: &Spec, allowed: &[usize]) -> Vec<(Option<String>, Vec<usize>)> {
    if spec.machines.is_empty() {
        return vec![(None, allowed.to_vec())];
    }
    spec.machines
        .iter()
        .map(|m| match m.guest_cpus() {
            Some(n) => (Some(m.name.clone()), (0..n as usize).collect()),
            None => (None, allowed.to_vec()),
        })
        .collect()
}

/// Each guest's memory fits in what this machine has available.
fn check_guests(
    spec: &Spec,
    limits: &limits::Limits,
    err: &dyn Fn(&str, String) -> SpecError,
) -> Result<(), SpecError> {
    let available = limits.mem_available_bytes.unwrap_or(u64::MAX);
    for m in &spec.machines {
        let Some(g) = &m.guest else { continue };
        // A recipe's name, or a file that is a bzImage.
        crate::machine::kernel::check_name(&g.kernel)
            .map_err(|e| err(&format!("machines.{}.kernel", m.name), e))?;
        if let Some(r) = crate::machine::kernel::recipe::find(&g.kernel)
            && crate::machine::icount_smp_hangs(r.release(), g.accel, g.topology.cpus())
        {
            return Err(err(
                &format!("machines.{}.accel", m.name),
                crate::machine::icount_smp_reason(r.release(), g.topology.cpus()),
            ));
        }
        let need = u64::from(g.memory_mib) << 20;
        if need > available {
            return Err(err(
                &format!("machines.{}.memory_mib", m.name),
                format!(
                    "the guest's {} MiB are more than this machine has available ({})",
                    g.memory_mib,
                    crate::units::human_bytes(available)
                ),
            ));
        }
    }
    Ok(())
}

/// What one run needs of the machine's limits.
pub fn run_need(spec: &Spec, r: &Run) -> limits::Need {
    let p = u64::from(r.processes);
    let dispatchers = match r.policy {
        crate::policy::Policy::Wrr => 64,
        _ => 0,
    };
    limits::Need {
        // Workers, the hog, dispatcher threads, and room for the kernel's
        // io_uring workers and schedlab's own threads.
        tasks: p + spec.hog.as_ref().map_or(0, |h| u64::from(h.count)) + dispatchers + 16,
        // Two per process the campaign counts on (the launcher raises the
        // soft limit for the result and stderr pipes beyond them), and the
        // channels of cooperating workers: at most two per process (a
        // pingpong pair's two pipes, a messaging receiver's socketpair, a
        // request worker's pipe and its share of the group's reply pipe).
        fds: 64
            + 2 * p
            + if r.workload.workload.group_size() > 1 {
                2 * p
            } else {
                0
            },
        memory_bytes: r.workload.workload.memory_bytes().saturating_mul(p),
    }
}

/// Refuse a spec of which a run would hit a limit of this machine, naming
/// the limit (rather than failing every run at fork time): the first such
/// run in the spec's order.
fn check_limits(
    spec: &Spec,
    plan: &Plan,
    limits: &limits::Limits,
    err: &dyn Fn(&str, String) -> SpecError,
) -> Result<(), SpecError> {
    let mut seen = std::collections::HashSet::new();
    for r in plan.runs() {
        let need = run_need(spec, r);
        if !seen.insert(need) {
            continue;
        }
        if let Some(why) = limits.refusal(need) {
            return Err(err(
                "matrix.processes",
                format!(
                    "a run of {} processes of {} cannot start here: {why}",
                    r.processes, r.workload.name
                ),
            ));
        }
    }
    Ok(())
}

/// The work directory is an existing, writable directory (schedlab never
/// makes a directory a spec names: a mistyped path would be created as
/// root and left behind), and its filesystem has room for what the
/// largest run writes (the last of the largest in the spec's order).
fn check_workdir(
    spec: &Spec,
    plan: &Plan,
    err: &dyn Fn(&str, String) -> SpecError,
) -> Result<(), SpecError> {
    let workdir = workdir_of(spec);
    let shown = workdir.display();
    let base = workdir.clone();
    match std::fs::metadata(&base) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return Err(err("workdir", format!("{shown} is not a directory"))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(err(
                "workdir",
                format!(
                    "{shown} does not exist; make it first (`mkdir -p {shown}`): schedlab does \
                     not create the directory a spec names"
                ),
            ));
        }
        Err(e) => return Err(err("workdir", format!("{shown}: {e}"))),
    }
    if let Err(e) = fsinfo::writable(&base) {
        return Err(err(
            "workdir",
            format!(
                "{} is not writable ({e}); set workdir to a writable directory",
                base.display()
            ),
        ));
    }
    let Ok(free) = fsinfo::free_bytes(&base) else {
        return Ok(());
    };
    let largest = plan
        .runs()
        .iter()
        .map(|r| (r.workload.workload.disk_bytes(r.processes), r))
        .max_by_key(|(b, _)| *b);
    if let Some((need, r)) = largest
        && need > free
    {
        return Err(err(
            &format!(
                "workloads.{}.{}",
                r.workload.name,
                r.workload.workload.disk_key()
            ),
            format!(
                "a run of {} processes writes up to {} in {shown} (the input and one copy per process), \
                 which has {} free",
                r.processes,
                crate::units::human_bytes(need),
                crate::units::human_bytes(free)
            ),
        ));
    }
    Ok(())
}
