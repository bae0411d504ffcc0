//! A replay in the model (`kind = "replay"`, or a `command` workload that
//! carries its synthesized replay): every task of each worker's tree is an
//! engine task running a [`Script`] of the replay's own steps. A burst of
//! `n` work units is `n / pi_iter_per_s` s of CPU (the calibrated pi
//! loop the replay is counted in); a timer (or outside) sleep blocks for
//! its recorded time; a wake-up or a fork gives the partner's engine task
//! a token, and a sleep ended by a task of the tree, or a forked task's
//! start, waits for one (the doorbells of `workload::replay::run`). A
//! worker is its tree's root; the other tasks come after the run's other
//! members, and their figures are folded into their root's record as the
//! launcher's tree accounting does.

use super::engine::TaskStats;
use super::task::{Action, Program, Script};
use crate::fields::Field;
use crate::record::ProcessRecord;
use crate::workload::replay::ReplayParams;
use crate::workload::replay::desc::{self, Body, Dist, Op, Waker};
use crate::workload::replay::run::{draw, quantile_at};

/// The most actions one replay may hand the model (passes × steps).
pub const MAX_ACTIONS: usize = 4_000_000;

/// The engine tasks of a replay run with `workers` worker processes whose
/// first engine index after the run's members is `extra_base`.
#[derive(Debug, Clone)]
pub struct Tree {
    /// Worker i's program (its root's script).
    pub roots: Vec<Program>,
    /// The other tasks: (their worker, their program), at engine indices
    /// `extra_base..`.
    pub extra: Vec<(usize, Program)>,
}

/// Map replay `p` onto engine tasks at `pi_iter_per_s` (work units per CPU
/// second).
pub fn tree(
    p: &ReplayParams,
    workers: usize,
    extra_base: usize,
    pi_iter_per_s: f64,
) -> Result<Tree, String> {
    if !(pi_iter_per_s.is_finite() && pi_iter_per_s > 0.0) {
        return Err("the replay's bursts need a pi rate (pi_iter_per_s) and there is none".into());
    }
    let passes = match p.stop {
        crate::workload::Stop::Work(n) => n.max(1) as usize,
        crate::workload::Stop::DurationNs(_) => {
            return Err("a replay runs whole passes, not for a duration".into());
        }
    };
    let roots = desc::roots(&p.tasks);
    if roots.is_empty() {
        return Err("the replay has no root task".into());
    }
    let others: Vec<usize> = (0..p.tasks.len()).filter(|x| !roots.contains(x)).collect();
    let groups = workers.div_ceil(roots.len());
    let total = extra_base + groups * others.len();
    // The engine index of task x of group g (None: a root beyond the run's
    // workers).
    let engine = |g: usize, x: usize| -> Option<usize> {
        match roots.iter().position(|&r| r == x) {
            Some(r) => Some(g * roots.len() + r).filter(|&i| i < workers),
            None => {
                let k = others.iter().position(|&o| o == x)?;
                Some(extra_base + g * others.len() + k).filter(|&i| i < total)
            }
        }
    };
    let cost = Cost {
        ns_per_unit: 1e9 / pi_iter_per_s,
        scale: p.scale,
    };
    let mut actions = 0usize;
    let mut script = |g: usize, x: usize| -> Result<Program, String> {
        let one = task_actions(p, x, &|y| engine(g, y), cost);
        let child = !roots.contains(&x);
        let mut all = Vec::with_capacity((one.len() + 1) * passes);
        for _ in 0..passes {
            if child {
                all.push(Action::Wait);
            }
            all.extend_from_slice(&one);
        }
        actions += all.len();
        if actions > MAX_ACTIONS {
            return Err(format!(
                "the replay is too long for the model (more than {MAX_ACTIONS} steps)"
            ));
        }
        Ok(Program::Script(Script::new(all)))
    };
    let mut out = Tree {
        roots: Vec::with_capacity(workers),
        extra: Vec::new(),
    };
    for i in 0..workers {
        out.roots
            .push(script(i / roots.len(), roots[i % roots.len()])?);
    }
    for g in 0..groups {
        for &x in &others {
            // The worker that forks it: its group's root of its tree.
            let mut r = x;
            while let Some(parent) = p.tasks[r].parent {
                r = parent;
            }
            let worker = engine(g, r).unwrap_or(g * roots.len());
            out.extra.push((worker, script(g, x)?));
        }
    }
    Ok(out)
}

#[derive(Debug, Clone, Copy)]
struct Cost {
    ns_per_unit: f64,
    scale: f64,
}

impl Cost {
    fn cpu(self, units: u64) -> u64 {
        (units as f64 * self.scale * self.ns_per_unit).round() as u64
    }
    fn sleep(self, ns: u64) -> u64 {
        (ns as f64 * self.scale).round() as u64
    }
}

/// One pass of task `x` (without its start).
fn task_actions(
    p: &ReplayParams,
    x: usize,
    engine: &dyn Fn(usize) -> Option<usize>,
    cost: Cost,
) -> Vec<Action> {
    let mut out = Vec::new();
    match &p.tasks[x].body {
        Body::Sequence(ops) => {
            for op in ops {
                match *op {
                    Op::Run(n) => push_cpu(&mut out, cost.cpu(n)),
                    Op::Sleep {
                        ns,
                        by: Waker::Timer | Waker::External,
                    } => out.push(Action::Io(cost.sleep(ns))),
                    Op::Sleep {
                        by: Waker::Task(_), ..
                    } => out.push(Action::Wait),
                    Op::Wake(t) | Op::Fork(t) => {
                        if let Some(e) = engine(t) {
                            out.push(Action::Signal(e));
                        }
                    }
                }
            }
        }
        Body::Distribution(d) => dist_actions(d, x, engine, cost, &mut out),
    }
    out
}

fn push_cpu(out: &mut Vec<Action>, ns: u64) {
    if ns == 0 {
        return;
    }
    match out.last_mut() {
        Some(Action::Cpu(a)) => *a += ns,
        _ => out.push(Action::Cpu(ns)),
    }
}

/// A task described by distributions, drawn as the real replayer draws
/// it (`workload::replay::run`): its forks spread over its bursts.
fn dist_actions(
    d: &Dist,
    x: usize,
    engine: &dyn Fn(usize) -> Option<usize>,
    cost: Cost,
    out: &mut Vec<Action>,
) {
    let n_forks = d.forks.len() as u64;
    let mut next_fork = 0usize;
    let fork = |out: &mut Vec<Action>, c: usize| {
        if let Some(e) = engine(c) {
            out.push(Action::Signal(e));
        }
    };
    for k in 0..d.bursts {
        while next_fork < d.forks.len() && (next_fork as u64) * d.bursts / n_forks.max(1) <= k {
            fork(out, d.forks[next_fork]);
            next_fork += 1;
        }
        push_cpu(out, cost.cpu(quantile_at(&d.burst_work, draw(k, x))));
        if k + 1 < d.bursts && !d.sleep_ns.is_empty() {
            out.push(Action::Io(
                cost.sleep(quantile_at(&d.sleep_ns, draw(k, x + 1))),
            ));
        }
    }
    for &c in &d.forks[next_fork..] {
        fork(out, c);
    }
}

/// Fold an extra task's figures into its worker's record (the tree's
/// CPU, switches, waits and slices; the worker ends with its last task).
pub fn fold(p: &mut ProcessRecord, s: &TaskStats, release_ns: u64) {
    p.usage.utime_us += s.run_ns / 1000;
    for (f, v) in [
        (Field::Nvcsw, s.nvcsw),
        (Field::Nivcsw, s.nivcsw),
        (Field::RunNs, s.run_ns),
        (Field::WaitNs, s.wait_ns),
        (Field::Timeslices, s.timeslices),
    ] {
        p.kernel.set(f, Some(p.kernel.get(f).unwrap_or(0) + v));
    }
    match s.exit_ns {
        Some(end) => {
            let end = end.saturating_sub(release_ns);
            if p.end_ns.is_some_and(|e| e < end) {
                p.end_ns = Some(end);
                p.wall_ns = p.wall_ns.max(end);
            }
        }
        None => {
            p.ok = false;
            p.exit = "killed by signal 9 (SIGKILL)".into();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::Stop;
    use crate::workload::keys::Keys;

    fn params(passes: u64) -> ReplayParams {
        let t: toml::Table = format!(
            r#"
passes = {passes}
tasks = [
  {{ name = "t0", ops = ["run 1000", "fork t0.1", "fork t0.2", "sleep 10ns by t0.1", "wake t0.2", "run 500"] }},
  {{ name = "t0.1", parent = "t0", ops = ["run 2000", "wake t0", "sleep 3000ns timer"] }},
  {{ name = "t0.2", parent = "t0", thread = true, ops = ["sleep 5ns by t0", "run 7"] }},
]"#
        )
        .parse()
        .unwrap();
        match (crate::workload::replay::ENTRY.parse)(&Keys::new("r", "replay", &t)).unwrap() {
            crate::workload::Workload::Replay(p) => p,
            _ => unreachable!(),
        }
    }

    #[test]
    fn each_task_is_a_script_of_its_steps_at_the_pi_rate() {
        // 1e9 units per second: one unit a ns. Two workers of one root: two
        // groups, each with its two other tasks after 3 members (2 workers
        // and a hog).
        let t = tree(&params(1), 2, 3, 1e9).unwrap();
        assert_eq!(t.roots.len(), 2);
        assert_eq!(t.extra.len(), 4);
        let script = |p: &Program| match p {
            Program::Script(s) => s.clone(),
            _ => panic!("not a script"),
        };
        assert_eq!(
            script(&t.roots[1]),
            Script::new(vec![
                Action::Cpu(1000),
                Action::Signal(5),
                Action::Signal(6),
                Action::Wait,
                Action::Signal(6),
                Action::Cpu(500),
            ])
        );
        assert_eq!(t.extra[0].0, 0);
        assert_eq!(t.extra[3].0, 1);
        assert_eq!(
            script(&t.extra[0].1),
            Script::new(vec![
                Action::Wait,
                Action::Cpu(2000),
                Action::Signal(0),
                Action::Io(3000),
            ])
        );
    }

    #[test]
    fn passes_repeat_the_scripts_and_the_rate_scales_the_bursts() {
        let t = tree(&params(2), 1, 1, 5e8).unwrap();
        let Program::Script(s) = &t.extra[0].1 else {
            panic!()
        };
        assert_eq!(s.actions.len(), 8);
        assert_eq!(s.actions[1], Action::Cpu(4000));
        let mut p = params(1);
        p.stop = Stop::DurationNs(1);
        assert!(tree(&p, 1, 1, 1e9).unwrap_err().contains("passes"));
        assert!(tree(&params(1), 1, 1, 0.0).unwrap_err().contains("pi rate"));
    }

    /// Through the whole mapping, one CPU, free switches: t0 runs 1 ms,
    /// forks t0.1 and waits for it; t0.1 runs 2 ms and wakes t0, which
    /// runs 0.5 ms; t0.2 (a thread) needs t0's wake-up and runs 0.1 ms.
    /// The worker's tree used 3.6 ms of CPU in 3.6 ms, and a command
    /// carrying the same replay is predicted the same.
    #[test]
    fn a_replay_and_a_command_with_it_are_simulated_as_the_tree() {
        let replay = r#"pi_iter_per_s = 1e8
tasks = [
  { name = "t0", ops = ["run 100000", "fork t0.1", "fork t0.2", "sleep 10ns by t0.1", "wake t0.2", "run 50000"] },
  { name = "t0.1", parent = "t0", ops = ["run 200000", "wake t0", "sleep 3000ns timer"] },
  { name = "t0.2", parent = "t0", thread = true, ops = ["sleep 5ns by t0", "run 10000"] },
]"#;
        let head = "[matrix]\npolicy = [\"other\"]\nworkload = [\"w\"]\nprocesses = [1]\n\
                    cpus = [\"0\"]\n";
        let texts = [
            format!("{head}[workloads.w]\nkind = \"replay\"\n{replay}\n"),
            format!(
                "{head}[workloads.w]\nkind = \"command\"\nargv = [\"true\"]\n\
                 [workloads.w.replay]\nkind = \"replay\"\nfidelity = \"ok\"\n{replay}\n"
            ),
        ];
        for text in texts {
            let spec = crate::spec::load(&text, "t.toml", &[]).unwrap();
            let run = crate::plan::expand(&spec, 1).remove(0);
            let m = super::super::tests::machine(2);
            let params = super::super::machine::ModelParams::new(
                m,
                crate::workload::Rates {
                    pi_iter_per_s: 1e9,
                    hash_per_s: 1.0,
                    flops_per_s: 1.0,
                    copy_bytes_per_s: 1.0,
                    wake_round_trip_s: 1e-5,
                },
                "test",
            );
            let r = super::super::simulate(&run, &spec, &params).record;
            assert_eq!(r.status, crate::record::RunStatus::Ok, "{}", r.reason);
            assert_eq!(r.processes.len(), 1, "{text}");
            let w = &r.processes[0];
            // At the replay's own 1e8/s, not the model's 1e9/s.
            assert_eq!(w.kernel.get(Field::RunNs), Some(3_600_000), "{text}");
            assert_eq!(r.makespan_ns, Some(3_600_000), "{text}");
            assert!(w.ok);
        }
    }
}
