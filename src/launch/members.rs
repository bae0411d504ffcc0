//! Who the processes of a run are, before any exists: each worker's policy
//! and priority (from the run's priority mode), its CPUs, its workload, and
//! the RT or fair CPU hogs the spec runs beside the workers. Pure given the
//! run, the spec's settings and the machine's RT fraction.

use std::time::Duration;

use crate::plan::Run;
use crate::policy::{self, Class, Policy, ProcSched};
use crate::spec::Hog;
use crate::sys::envinfo::EnvSnapshot;
use crate::workload::{PiParams, Stop, Workload};

/// Whether a process is measured or runs beside the measured ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Worker,
    Hog,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Worker => "worker",
            Role::Hog => "hog",
        }
    }
}

/// One process of a run: what it runs and how it is scheduled.
#[derive(Debug, Clone)]
pub struct Member {
    pub role: Role,
    pub sched: ProcSched,
    pub cpus: Vec<usize>,
    pub workload: Workload,
}

/// The processes of one run and the CPUs they were given.
#[derive(Debug, Clone)]
pub struct Cast {
    pub members: Vec<Member>,
    /// The CPUs the workers may use (recorded as the run's `cpu_list`).
    pub cpus: Vec<usize>,
    /// CPUs whose bandwidth SCHED_DEADLINE workers reserve: fewer than
    /// `cpus` when DEADLINE was asked for a subset (it cannot be pinned).
    pub bandwidth_cpus: usize,
    /// Every CPU a process of the run may use (an RT hog's may lie outside
    /// the workers').
    pub run_cpus: Vec<usize>,
}

/// What the cast depends on beyond the run.
pub struct Setting<'a> {
    pub allowed_cpus: &'a [usize],
    pub deadline: &'a policy::Deadline,
    pub hog: Option<&'a Hog>,
    pub timeout: Duration,
    pub rt_period_us: i64,
}

/// The run's processes, or the reason the run is skipped (CPUs it cannot
/// have).
pub fn cast(run: &Run, s: &Setting, env: &EnvSnapshot) -> Result<Cast, (Vec<usize>, String)> {
    let cpus = run
        .cpus
        .resolve(s.allowed_cpus)
        .map_err(|m| (Vec::new(), format!("cpus = \"{}\": {m}", run.cpus.label())))?;
    // SCHED_DEADLINE tasks cannot be pinned to part of their root domain:
    // on a CPU subset they run on every CPU, with the bandwidth of the
    // subset reserved (the same CPU time, spread in time).
    let bandwidth_cpus = cpus.len();
    let cpus = match run.policy {
        policy::Policy::Deadline if cpus.len() < s.allowed_cpus.len() => s.allowed_cpus.to_vec(),
        _ => cpus,
    };
    let mut members: Vec<Member> = policy::assign(
        run.policy,
        &run.priorities.assignment,
        s.deadline,
        run.processes as usize,
        bandwidth_cpus,
        rt_fraction(env),
    )
    .into_iter()
    .enumerate()
    .map(|(i, sched)| Member {
        role: Role::Worker,
        sched: ProcSched {
            slice_ns: run.slice_us.map(|us| u64::from(us) * 1000),
            ..sched
        },
        // WRR keeps a run queue per CPU: each worker lives on one.
        cpus: match run.policy {
            policy::Policy::Wrr => vec![cpus[i % cpus.len()]],
            _ => cpus.clone(),
        },
        workload: run.workload.workload.clone(),
    })
    .collect();
    if let Some(hog) = s.hog {
        members.extend(hogs(hog, s).map_err(|why| (cpus.clone(), why))?);
    }
    let mut run_cpus: Vec<usize> = members.iter().flat_map(|m| m.cpus.clone()).collect();
    run_cpus.sort_unstable();
    run_cpus.dedup();
    Ok(Cast {
        members,
        cpus,
        bandwidth_cpus,
        run_cpus,
    })
}

/// The spec's CPU hogs: they spin until the last worker ends, when they
/// are killed.
fn hogs(hog: &Hog, s: &Setting) -> Result<Vec<Member>, String> {
    let hog_cpus = hog
        .cpus
        .resolve(s.allowed_cpus)
        .map_err(|m| format!("hog.cpus = \"{}\": {m}", hog.cpus.label()))?;
    let sched = if hog.is_rt() {
        ProcSched::realtime(hog.policy, hog.rt_priority)
    } else {
        ProcSched::fair(hog.policy, hog.nice)
    };
    let spin_ns =
        s.timeout.as_nanos() as u64 + s.rt_period_us.max(0) as u64 * 1000 + 60_000_000_000;
    Ok((0..hog.count)
        .map(|_| Member {
            role: Role::Hog,
            sched,
            cpus: hog_cpus.clone(),
            workload: Workload::Pi(PiParams {
                stop: Stop::DurationNs(spin_ns),
            }),
        })
        .collect())
}

impl Cast {
    /// Whether any process runs outside the fair class (the parent then
    /// outranks them while it watches).
    pub fn any_beyond_fair(&self) -> bool {
        self.members
            .iter()
            .any(|m| m.sched.policy.class() != Class::Fair)
    }

    pub fn any_deadline(&self) -> bool {
        self.members
            .iter()
            .any(|m| m.sched.policy.class() == Class::Deadline)
    }

    /// Whether the workers park once their result is written, until every
    /// worker has reported (`worker::WorkerArgs::park_when_done`): only
    /// when every process is one of schedlab's own workers, under any
    /// policy but WRR. A hog's window ends when the last worker is reaped,
    /// WRR's dispatcher hands the CPU on as workers exit, and a program
    /// (`kind = "command"`) is not schedlab's to hold.
    pub fn workers_park_when_done(&self) -> bool {
        self.members.iter().all(|m| {
            m.role == Role::Worker && m.sched.policy != Policy::Wrr && !m.workload.is_command()
        })
    }
}

/// Fraction of each period the kernel grants RT and DEADLINE tasks
/// (sched_rt_runtime_us / sched_rt_period_us) as it is for this run: a
/// campaign may sweep it.
pub fn rt_fraction(env: &EnvSnapshot) -> f64 {
    match (env.sched_rt_runtime_us, env.sched_rt_period_us) {
        (Some(r), Some(p)) if r >= 0 && p > 0 => r as f64 / p as f64,
        (Some(-1), _) => 1.0,
        _ => 0.95,
    }
}

/// "SCHED_FIFO priority 50", "WRR weight 4", … for messages.
pub fn describe_sched(s: &ProcSched) -> String {
    match s.policy.class() {
        Class::Fair => format!(
            "SCHED_{} nice {}",
            s.policy.name().to_uppercase(),
            s.nice.unwrap_or(0)
        ),
        Class::Realtime => format!(
            "SCHED_{} priority {}",
            s.policy.name().to_uppercase(),
            s.rt_priority.unwrap_or(0)
        ),
        Class::Wrr => format!("WRR weight {}", s.weight.unwrap_or(1)),
        Class::Deadline => format!(
            "SCHED_DEADLINE runtime {} µs / deadline {} µs / period {} µs",
            s.dl_runtime_ns.unwrap_or(0) / 1000,
            s.dl_deadline_ns.unwrap_or(0) / 1000,
            s.dl_period_ns.unwrap_or(0) / 1000
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rt_fraction_follows_the_knobs_and_unlimited_is_one() {
        let mut env = crate::testing::synth::synthetic_env(2);
        env.sched_rt_runtime_us = Some(500_000);
        env.sched_rt_period_us = Some(1_000_000);
        assert_eq!(rt_fraction(&env), 0.5);
        env.sched_rt_runtime_us = Some(-1);
        assert_eq!(rt_fraction(&env), 1.0);
        env.sched_rt_runtime_us = None;
        assert_eq!(rt_fraction(&env), 0.95);
    }

    fn member(role: Role, sched: ProcSched) -> Member {
        Member {
            role,
            sched,
            cpus: vec![0],
            workload: Workload::Pi(PiParams {
                stop: Stop::Work(1),
            }),
        }
    }

    fn cast_of(members: Vec<Member>) -> Cast {
        Cast {
            members,
            cpus: vec![0],
            bandwidth_cpus: 1,
            run_cpus: vec![0],
        }
    }

    #[test]
    fn only_runs_of_schedlab_s_own_workers_alone_park_them_when_done() {
        let fair = |p| member(Role::Worker, ProcSched::fair(p, 0));
        for p in [Policy::Other, Policy::Batch, Policy::Idle] {
            assert!(cast_of(vec![fair(p), fair(p)]).workers_park_when_done());
        }
        for p in [Policy::Fifo, Policy::Rr] {
            let rt = member(Role::Worker, ProcSched::realtime(p, 10));
            assert!(cast_of(vec![rt, fair(Policy::Other)]).workers_park_when_done());
        }
        // A hog beside them, fair or RT.
        let hog = member(Role::Hog, ProcSched::fair(Policy::Other, 0));
        assert!(!cast_of(vec![fair(Policy::Other), hog]).workers_park_when_done());
        let rt_hog = member(Role::Hog, ProcSched::realtime(Policy::Fifo, 50));
        assert!(!cast_of(vec![fair(Policy::Other), rt_hog]).workers_park_when_done());
        // WRR workers, and a program.
        let wrr = member(
            Role::Worker,
            ProcSched {
                policy: Policy::Wrr,
                ..ProcSched::fair(Policy::Other, 0)
            },
        );
        assert!(!cast_of(vec![wrr]).workers_park_when_done());
        let mut program = fair(Policy::Other);
        program.workload = crate::workload::Workload::Command(
            toml::from_str("argv = [\"true\"]\ngrace_ns = 1\nok_exit = [0]")
                .expect("a command's keys"),
        );
        assert!(!cast_of(vec![fair(Policy::Other), program]).workers_park_when_done());
    }

    #[test]
    fn schedules_are_described_for_messages() {
        let s = ProcSched::realtime(policy::Policy::Fifo, 50);
        assert_eq!(describe_sched(&s), "SCHED_FIFO priority 50");
        let s = ProcSched::fair(policy::Policy::Batch, 5);
        assert_eq!(describe_sched(&s), "SCHED_BATCH nice 5");
    }
}
