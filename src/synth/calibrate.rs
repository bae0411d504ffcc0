//! The replayer's own CPU per step, measured from a traced replay: what
//! [`super::to_tasks_less`] takes off the recorded bursts, because a
//! recorded burst already holds the program's own system calls (the pipe
//! write before a wake-up, the read that blocks after, the fork, a
//! process's start and exit) which the replayer's own steps stand in for.
//!
//! The calibration replay ([`tasks`]) runs under the original's condition,
//! traced like the replay it calibrates, and is recorded by the same
//! [`super::record`]: two pipe ping-pong pairs (N and 2N empty rounds),
//! two futex ping-pong pairs of threads, two timer sleepers (M and 2M
//! empty 20 µs sleeps), two forkers of K and 2K empty processes and two
//! of K and 2K empty threads. Each cost is a difference of the two
//! variants' traced CPU over the difference of their steps ([`costs`]),
//! so the tasks' own start and exit cancel; an empty child's start and
//! exit is the median of the children's traced CPU.

use anyhow::{Context, Result};

use super::record::Recording;
use crate::workload::replay::desc::{Body, Op, ReplayTask, Waker};

/// Empty ping-pong rounds of the shorter pair.
pub const ROUNDS: u64 = 1500;
/// Empty timer sleeps of the shorter sleeper (20 µs each).
pub const SLEEPS: u64 = 200;
/// Empty children of the shorter forker.
pub const CHILDREN: u64 = 12;
/// A timer step's sleep.
const SLEEP_NS: u64 = 20_000;

/// The replayer's traced CPU per step, in ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StepCost {
    /// A round over a pipe (between processes): wake-up of the partner,
    /// the read that blocks, its return.
    pub pipe_ns: u64,
    /// The same over the futex doorbells (between threads).
    pub futex_ns: u64,
    /// A timer sleep (or one ended from outside): the call and its return.
    pub timer_ns: u64,
    /// The parent's CPU per process it forks (the fork, the reaping).
    pub fork_process_ns: u64,
    /// The parent's CPU per thread it starts (spawn, join).
    pub fork_thread_ns: u64,
    /// An empty forked process's own CPU (its start and exit).
    pub start_process_ns: u64,
    /// An empty thread's own CPU.
    pub start_thread_ns: u64,
}

impl StepCost {
    /// Every wait costing `ns` and forks costing nothing (the untraced
    /// fallback, [`super::step_overhead_ns`]).
    pub fn waits_only(ns: u64) -> StepCost {
        StepCost {
            pipe_ns: ns,
            futex_ns: ns,
            timer_ns: ns,
            ..StepCost::default()
        }
    }

    /// One line for the replay's header and the bench.
    pub fn describe(&self) -> String {
        let us = |ns: u64| format!("{:.2}", ns as f64 / 1e3);
        format!(
            "pipe round {} µs, futex round {} µs, timer sleep {} µs, fork of a process {} µs \
             (the child's start and exit {} µs), of a thread {} µs (the thread's own {} µs)",
            us(self.pipe_ns),
            us(self.futex_ns),
            us(self.timer_ns),
            us(self.fork_process_ns),
            us(self.start_process_ns),
            us(self.fork_thread_ns),
            us(self.start_thread_ns)
        )
    }
}

fn task(name: String, parent: Option<usize>, thread: bool, ops: Vec<Op>) -> ReplayTask {
    ReplayTask {
        name,
        comm: String::new(),
        parent,
        thread,
        body: Body::Sequence(ops),
    }
}

/// `rounds` of (wake `b`, wait for `b`) for the driver `a`, and of (wait
/// for `a`, wake `a`) for `b`.
fn ping_pong(a: usize, b: usize, rounds: u64) -> (Vec<Op>, Vec<Op>) {
    let by = |w| Op::Sleep {
        ns: 0,
        by: Waker::Task(w),
    };
    let mut x = Vec::new();
    let mut y = Vec::new();
    for _ in 0..rounds {
        x.extend([Op::Wake(b), by(b)]);
        y.extend([by(a), Op::Wake(a)]);
    }
    (x, y)
}

/// The calibration replay: root `t0` forks the variants in this order
/// (`t0.1`… as the recorder names them): pipe pairs (t0.1 with t0.2, N
/// rounds; t0.3 with t0.4, 2N), futex pairs (t0.5 with its thread t0.5.1,
/// N; t0.6 with t0.6.1, 2N), timer sleepers (t0.7, M; t0.8, 2M), process
/// forkers (t0.9, K; t0.10, 2K) and thread forkers (t0.11, K; t0.12, 2K).
pub fn tasks(n: u64, m: u64, k: u64) -> Vec<ReplayTask> {
    let mut t = vec![task("t0".into(), None, false, Vec::new())];
    let child = |t: &mut Vec<ReplayTask>, parent: usize, thread: bool| {
        let i = t.len();
        let name = format!("{}.{}", t[parent].name, t[parent].forks().len() + 1);
        t.push(task(name, Some(parent), thread, Vec::new()));
        if let Body::Sequence(ops) = &mut t[parent].body {
            ops.push(Op::Fork(i));
        }
        i
    };
    for rounds in [n, 2 * n] {
        let (a, b) = (child(&mut t, 0, false), child(&mut t, 0, false));
        let (x, y) = ping_pong(a, b, rounds);
        t[a].body = Body::Sequence(x);
        t[b].body = Body::Sequence(y);
    }
    for rounds in [n, 2 * n] {
        let a = child(&mut t, 0, false);
        let b = child(&mut t, a, true);
        let (x, y) = ping_pong(a, b, rounds);
        if let Body::Sequence(ops) = &mut t[a].body {
            ops.extend(x);
        }
        t[b].body = Body::Sequence(y);
    }
    for sleeps in [m, 2 * m] {
        let a = child(&mut t, 0, false);
        let sleep = Op::Sleep {
            ns: SLEEP_NS,
            by: Waker::Timer,
        };
        t[a].body = Body::Sequence(vec![sleep; sleeps as usize]);
    }
    for thread in [false, true] {
        for kids in [k, 2 * k] {
            let a = child(&mut t, 0, false);
            for _ in 0..kids {
                child(&mut t, a, thread);
            }
        }
    }
    t
}

/// The costs from the recording of a run of [`tasks`]`(n, m, k)`.
pub fn costs(rec: &Recording, n: u64, m: u64, k: u64) -> Result<StepCost> {
    let cpu = |name: &str| -> Result<u64> {
        rec.tasks
            .iter()
            .find(|t| t.name == name)
            .map(|t| t.cpu_ns)
            .with_context(|| format!("the calibration replay's trace has no task {name}"))
    };
    let both = |a: &str, b: &str| -> Result<u64> { Ok(cpu(a)? + cpu(b)?) };
    // (longer − shorter) / extra steps, never below 0.
    let per = |long: u64, short: u64, steps: u64| long.saturating_sub(short) / steps.max(1);
    let median_child = |parent: &str| -> u64 {
        let prefix = format!("{parent}.");
        let mut v: Vec<u64> = rec
            .tasks
            .iter()
            .filter(|t| t.name.starts_with(&prefix))
            .map(|t| t.cpu_ns)
            .collect();
        v.sort_unstable();
        v.get(v.len() / 2).copied().unwrap_or(0)
    };
    Ok(StepCost {
        // Each task of the longer pair does n more rounds: 2n steps.
        pipe_ns: per(both("t0.3", "t0.4")?, both("t0.1", "t0.2")?, 2 * n),
        futex_ns: per(both("t0.6", "t0.6.1")?, both("t0.5", "t0.5.1")?, 2 * n),
        timer_ns: per(cpu("t0.8")?, cpu("t0.7")?, m),
        fork_process_ns: per(cpu("t0.10")?, cpu("t0.9")?, k),
        fork_thread_ns: per(cpu("t0.12")?, cpu("t0.11")?, k),
        start_process_ns: median_child("t0.10"),
        start_thread_ns: median_child("t0.12"),
    })
}

/// Run the calibration replay under `original`'s condition (traced) into
/// `db` and measure the costs; also the calibration's run id.
pub fn measure(original: &super::Read, db: &std::path::Path) -> Result<(StepCost, i64)> {
    let (n, m, k) = (ROUNDS, SLEEPS, CHILDREN);
    let t = tasks(n, m, k);
    let empty = super::record::Recorder::new(&[], &[], 0, 0).finish();
    let text = super::spec_text(&original.source, &t, &empty, 0.0)?;
    // Not a replay of the original: the report's replay section must not
    // take it for one.
    let mut spec: toml::Table = text.parse().context("the calibration spec")?;
    spec.insert(
        "name".into(),
        format!(
            "calibration of the replayer's steps under run {}'s condition",
            original.source.run_id
        )
        .into(),
    );
    if let Some(w) = spec
        .get_mut("workloads")
        .and_then(|w| w.get_mut("replay"))
        .and_then(|r| r.as_table_mut())
    {
        w.remove("original");
        w.remove("captured");
        w.insert(
            "source".into(),
            "calibration of the replayer's steps".into(),
        );
    }
    let text = toml::to_string(&spec)?;
    let (id, read) = super::check::run_replay(&text, "step calibration", db, false)
        .context("the replayer's step calibration (a traced replay)")?;
    Ok((costs(&read.recording, n, m, k)?, id))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::replay::desc;

    #[test]
    fn the_calibration_tree_is_named_as_the_recorder_names_it_and_balances() {
        let t = tasks(3, 2, 2);
        desc::check_tree(&t).unwrap();
        let names: Vec<&str> = t.iter().map(|t| t.name.as_str()).collect();
        for n in [
            "t0.1", "t0.4", "t0.5.1", "t0.6.1", "t0.8", "t0.10.4", "t0.12.4",
        ] {
            assert!(names.contains(&n), "{n} in {names:?}");
        }
        assert_eq!(t.len(), 1 + 4 + 4 + 2 + 2 + 6 + 2 + 6);
        let i = names.iter().position(|n| *n == "t0.12.1").unwrap();
        assert!(t[i].thread && !t[names.iter().position(|n| *n == "t0.10.1").unwrap()].thread);
        // The longer pipe driver does twice the rounds.
        let ops = |n: &str| match &t[names.iter().position(|x| *x == n).unwrap()].body {
            Body::Sequence(o) => o.len(),
            _ => 0,
        };
        assert_eq!((ops("t0.1"), ops("t0.3")), (6, 12));
        assert_eq!((ops("t0.7"), ops("t0.8")), (2, 4));
        // It runs as a spec: the tasks table loads.
        let text = format!(
            "[workloads.c]\nkind = \"replay\"\ntasks = {}\n",
            desc::to_table(&t)
        );
        let table: toml::Table = text.parse().unwrap();
        let w = table["workloads"]["c"].as_table().unwrap();
        let k = crate::workload::keys::Keys::new("c", "replay", w);
        assert_eq!(desc::parse(&k).unwrap(), t);
    }

    #[test]
    fn costs_are_differences_of_the_variants_over_their_extra_steps() {
        use super::super::record::Recorder;
        let t = tasks(10, 4, 2);
        let mut rec = Recorder::new(&[1], &[], 0, 1).finish();
        // The recorder's tasks, by name, with CPU chosen: a pipe step of
        // 2 µs on top of 50 µs of start, a futex step 1 µs, a timer 3 µs,
        // a process fork 40 µs, a thread 10 µs.
        let cpu = |name: &str| -> u64 {
            match name {
                "t0.1" | "t0.2" => 50_000 + 10 * 2_000,
                "t0.3" | "t0.4" => 50_000 + 20 * 2_000,
                "t0.5" | "t0.5.1" => 9_000 + 10 * 1_000,
                "t0.6" | "t0.6.1" => 9_000 + 20 * 1_000,
                "t0.7" => 7_000 + 4 * 3_000,
                "t0.8" => 7_000 + 8 * 3_000,
                "t0.9" => 5_000 + 2 * 40_000,
                "t0.10" => 5_000 + 4 * 40_000,
                "t0.11" => 5_000 + 2 * 10_000,
                "t0.12" => 5_000 + 4 * 10_000,
                n if n.starts_with("t0.10.") => 30_000,
                n if n.starts_with("t0.12.") => 4_000,
                _ => 1,
            }
        };
        let template = rec.tasks[0].clone();
        rec.tasks = t
            .iter()
            .map(|x| {
                let mut r = template.clone();
                r.name = x.name.clone();
                r.cpu_ns = cpu(&x.name);
                r
            })
            .collect();
        let c = costs(&rec, 10, 4, 2).unwrap();
        assert_eq!(
            c,
            StepCost {
                pipe_ns: 2_000,
                futex_ns: 1_000,
                timer_ns: 3_000,
                fork_process_ns: 40_000,
                fork_thread_ns: 10_000,
                start_process_ns: 30_000,
                start_thread_ns: 4_000,
            }
        );
        rec.tasks.retain(|t| t.name != "t0.8");
        assert!(
            costs(&rec, 10, 4, 2)
                .unwrap_err()
                .to_string()
                .contains("t0.8")
        );
    }
}
