//! `schedlab synthesize`: from one traced run of any workload to a replay
//! of it. This module owns reading the run and its trace (streamed: the
//! events are decoded one at a time into a [`record::Recorder`]), the
//! conversion of what each task did into a replay's tasks (bursts in work
//! units of the calibrated pi loop), the spec that runs the replay under
//! the run's condition ([`spec_text`]), the rt-app form ([`rtapp`]) and the
//! replay-against-original figures ([`fidelity`]).

pub mod calibrate;
pub mod check;
pub mod fidelity;
pub mod order;
pub mod record;
pub mod rtapp;

use anyhow::{Result, bail};

use crate::store::{ReplaySource, Store};
use crate::workload::replay::desc::Waker;
use crate::workload::replay::desc::{self, Body, Dist, Op, QUANTILES, ReplayTask};
use calibrate::StepCost;
use record::{NsOp, Recorder, Recording, Reservoir, TaskRec};

/// A run read for synthesis.
pub struct Read {
    pub source: ReplaySource,
    pub recording: Recording,
    /// Facts to print beside the figures (lost events allowed, …).
    pub caveats: Vec<String>,
}

/// Read run `run_id` and record its tree; refuses a run that was not ok,
/// has no trace, or whose trace is unusable or lost events (unless
/// `allow_lost`: then a caveat).
pub fn read_run(store: &Store, run_id: i64, allow_lost: bool) -> Result<Read> {
    let source = store.replay_source(run_id)?;
    if source.status != "ok" {
        bail!(
            "run {run_id} ended {}: only a run that finished (ok) is synthesized",
            source.status
        );
    }
    let trace = store.encoded_trace(run_id)?;
    let mut caveats = Vec::new();
    if let Some(why) = &trace.unusable_reason {
        bail!("run {run_id}: its trace is unusable ({why}); run it again with --trace");
    }
    if trace.lost_events > 0 {
        let msg = format!(
            "run {run_id}: the kernel lost {} events of its trace, so bursts and wake-ups may be \
             missing",
            trace.lost_events
        );
        if !allow_lost {
            bail!("{msg}; run it again (a larger buffer, fewer CPUs), or pass --allow-lost");
        }
        caveats.push(msg);
    }
    let roots: Vec<i32> = source.workers.iter().map(|w| w.0).collect();
    if roots.is_empty() {
        bail!("run {run_id} has no worker processes stored");
    }
    let from_ns = trace
        .release_ns
        .unwrap_or(trace.start_ns)
        .max(trace.start_ns);
    let to_ns = match (
        trace.release_ns,
        source.workers.iter().filter_map(|w| w.2).max(),
    ) {
        (Some(r), Some(end)) => r.saturating_add(end).min(trace.end_ns),
        _ => trace.end_ns,
    };
    let mut rec = Recorder::new(&roots, &trace.tasks, from_ns, to_ns);
    crate::trace::blob::for_each(&trace.events, |e| {
        rec.event(&e);
        Ok(())
    })?;
    let recording = rec.finish();
    if recording.tasks.iter().all(|t| t.cpu_ns == 0) {
        bail!("run {run_id}: its trace holds no CPU time of its workers");
    }
    Ok(Read {
        source,
        recording,
        caveats,
    })
}

/// Pi iterations per CPU second of this machine (the calibrated loop),
/// measured on this thread's CPU time.
pub fn pi_rate() -> Result<f64> {
    use crate::workload::{PiParams, Stop};
    let before = crate::sys::clock::thread_cpu_ns()?;
    let out = crate::workload::pi::run(
        &PiParams {
            stop: Stop::DurationNs(100_000_000),
        },
        None,
    )?;
    let cpu = crate::sys::clock::thread_cpu_ns()?.saturating_sub(before);
    let rate = out.work as f64 / (cpu.max(1) as f64 / 1e9);
    anyhow::ensure!(
        rate.is_finite() && rate > 0.0,
        "pi calibration measured {rate}"
    );
    Ok(rate)
}

/// CPU ns the replayer itself spends on one step, untraced (a timer
/// sleep of 20 µs and an empty burst), the median of 5 rounds of 100 steps
/// on this thread: the fallback of `schedlab synthesize` when it cannot
/// trace a calibration replay ([`calibrate`]), which measures each kind of
/// step traced.
pub fn step_overhead_ns() -> Result<u64> {
    use crate::sys::clock::{sleep_until_ns, thread_cpu_ns};
    use crate::sys::proc::monotonic_ns;
    let mut per_step = Vec::with_capacity(5);
    for _ in 0..5 {
        let before = thread_cpu_ns()?;
        for _ in 0..100 {
            crate::workload::replay::run::burn(0);
            sleep_until_ns(monotonic_ns() + 20_000)?;
        }
        per_step.push(thread_cpu_ns()?.saturating_sub(before) / 100);
    }
    per_step.sort_unstable();
    Ok(per_step[2])
}

/// Work units of `ns` of CPU at `pi_iter_per_s`.
pub fn units(ns: u64, pi_iter_per_s: f64) -> u64 {
    (ns as f64 * pi_iter_per_s / 1e9).round() as u64
}

fn quantiles(r: &Reservoir, f: impl Fn(u64) -> u64) -> Vec<u64> {
    if r.values.is_empty() {
        return Vec::new();
    }
    let mut v = r.values.clone();
    v.sort_unstable();
    (0..QUANTILES)
        .map(|k| {
            let i = (k as f64 / (QUANTILES - 1) as f64 * (v.len() - 1) as f64).round() as usize;
            f(v[i])
        })
        .collect()
}

/// The replay's tasks: ops in work units (adjacent runs merged, empty
/// ones dropped), or distributions for overflowed tasks.
pub fn to_tasks(rec: &Recording, pi_iter_per_s: f64) -> Vec<ReplayTask> {
    to_tasks_less(rec, pi_iter_per_s, &StepCost::default())
}

/// The process task `i` of a recording runs in (itself, or its nearest
/// ancestor that is not a thread).
fn process_of(tasks: &[TaskRec], mut i: usize) -> usize {
    while tasks[i].thread {
        match tasks[i].parent {
            Some(p) => i = p,
            None => break,
        }
    }
    i
}

/// [`to_tasks`], each burst less the replayer's own cost of what it does
/// ([`less_step`] with `cost`, measured by [`calibrate`]).
pub fn to_tasks_less(rec: &Recording, pi_iter_per_s: f64, cost: &StepCost) -> Vec<ReplayTask> {
    let process: Vec<usize> = (0..rec.tasks.len())
        .map(|i| process_of(&rec.tasks, i))
        .collect();
    rec.tasks
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let body = if t.overflowed {
                Body::Distribution(Dist {
                    bursts: t.bursts_ns.seen.max(1),
                    burst_work: match quantiles(&t.bursts_ns, |ns| {
                        units(ns.saturating_sub(cost.timer_ns), pi_iter_per_s)
                    }) {
                        q if q.is_empty() => vec![0; QUANTILES],
                        q => q,
                    },
                    sleep_ns: quantiles(&t.sleeps_ns, |ns| ns),
                    forks: t.forks.clone(),
                })
            } else {
                let wait = |by: &Waker| match *by {
                    Waker::Task(w) if process.get(w) == Some(&process[i]) => cost.futex_ns,
                    Waker::Task(_) => cost.pipe_ns,
                    Waker::Timer | Waker::External => cost.timer_ns,
                };
                let fork = |c: usize| match rec.tasks.get(c).is_some_and(|c| c.thread) {
                    true => cost.fork_thread_ns,
                    false => cost.fork_process_ns,
                };
                let start = match (t.parent, t.thread) {
                    (None, _) => 0,
                    (Some(_), true) => cost.start_thread_ns,
                    (Some(_), false) => cost.start_process_ns,
                };
                let mut ops = merged(&t.ops);
                less_step(&mut ops, wait, fork, start);
                Body::Sequence(in_units(ops, pi_iter_per_s))
            };
            ReplayTask {
                name: t.name.clone(),
                comm: t.comm.clone(),
                parent: t.parent,
                thread: t.thread,
                body,
            }
        })
        .collect()
}

/// A task's ops with adjacent runs merged (runs still in ns).
fn merged(ns_ops: &[NsOp]) -> Vec<Op> {
    let mut ops: Vec<Op> = Vec::with_capacity(ns_ops.len());
    for op in ns_ops {
        let op = match *op {
            NsOp::Run(ns) => Op::Run(ns),
            NsOp::Sleep { ns, by } => Op::Sleep { ns, by },
            NsOp::Wake(x) => Op::Wake(x),
            NsOp::Fork(x) => Op::Fork(x),
        };
        match (ops.last_mut(), op) {
            (Some(Op::Run(a)), Op::Run(b)) => *a += b,
            _ => ops.push(op),
        }
    }
    ops
}

/// Runs in ns to work units, empty runs dropped.
fn in_units(ops: Vec<Op>, pi_iter_per_s: f64) -> Vec<Op> {
    ops.into_iter()
        .filter_map(|op| match op {
            Op::Run(ns) => Some(Op::Run(units(ns, pi_iter_per_s))).filter(|o| *o != Op::Run(0)),
            o => Some(o),
        })
        .collect()
}

/// Take `ns` off the runs of `ops[..k]` back to the sleep before (runs in
/// ns), the last piece first.
fn take_before(ops: &mut [Op], k: usize, ns: u64) {
    take_off(ops[..k].iter_mut().rev(), ns);
}

/// Take `ns` off the runs `ops` gives, in its order, up to the first sleep.
fn take_off<'a>(ops: impl Iterator<Item = &'a mut Op>, ns: u64) {
    let mut left = ns;
    for op in ops {
        if left == 0 {
            break;
        }
        match op {
            Op::Sleep { .. } => break,
            Op::Run(r) => {
                let take = left.min(*r);
                *r -= take;
                left -= take;
            }
            _ => {}
        }
    }
}

/// Take off the bursts (runs in ns) the replayer's own cost of each step:
/// `wait(by)` off each burst that ends in a sleep (off the whole burst, its
/// last piece first, then the pieces before the wake-ups and forks it
/// gave), `fork(c)` off the burst that starts task `c`, and `start` off
/// the task's first burst (its own start, first piece first). The recorded
/// pieces hold the program's own system calls (a pipe write before its
/// wake-up, the read that blocks after, a fork), which the replayer's own
/// step stands in for; a burst shorter than the step is left empty, and
/// the replay's step alone is its burst (taking the step off the last
/// piece alone left a short burst's first piece burnt on top of the
/// replayer's own step: `perf bench sched pipe` under FIFO, +52 % CPU).
fn less_step(
    ops: &mut [Op],
    wait: impl Fn(&Waker) -> u64,
    fork: impl Fn(usize) -> u64,
    start: u64,
) {
    take_off(ops.iter_mut(), start);
    for k in 0..ops.len() {
        match ops[k] {
            Op::Sleep { by, .. } => take_before(ops, k, wait(&by)),
            Op::Fork(c) => take_before(ops, k, fork(c)),
            _ => {}
        }
    }
}

/// How a replay names the condition it was captured in (its `captured`
/// key; the report's replay section matches it).
pub fn captured_label(policy: &str, cpus: &str) -> String {
    format!("policy {policy}, cpus {cpus}")
}

/// The spec that runs the replay under the run's condition: the
/// campaign's spec with its matrix narrowed to the run's levels, one
/// repetition, traced, and one workload, `replay`.
pub fn spec_text(
    src: &ReplaySource,
    tasks: &[ReplayTask],
    rec: &Recording,
    pi_iter_per_s: f64,
) -> Result<String> {
    let mut spec: toml::Table = src
        .spec_toml
        .parse()
        .map_err(|e| anyhow::anyhow!("the stored spec of run {}: {e}", src.run_id))?;
    let run = &src.run;
    spec.insert(
        "name".into(),
        format!("replay of run {} ({})", src.run_id, run.workload.name).into(),
    );
    spec.insert(
        "description".into(),
        format!(
            "Synthesized by schedlab synthesize from run {} of campaign {} ({}).",
            src.run_id,
            src.campaign_id,
            run.label()
        )
        .into(),
    );
    spec.insert("repetitions".into(), toml::Value::Integer(1));
    spec.insert("trace".into(), true.into());
    spec.remove("scale");
    for k in ["target_ci_pct", "min_repetitions", "max_repetitions"] {
        spec.remove(k);
    }
    let list = |s: &str| toml::Value::Array(vec![s.into()]);
    let mut m = toml::Table::new();
    m.insert("policy".into(), list(run.policy.name()));
    m.insert("workload".into(), list("replay"));
    m.insert(
        "processes".into(),
        toml::Value::Array(vec![toml::Value::Integer(desc::roots(tasks).len() as i64)]),
    );
    m.insert("priorities".into(), list(&run.priorities.name));
    m.insert("cpus".into(), list(&run.cpus.label()));
    if let Some(v) = run.rt_runtime_us {
        m.insert("rt_runtime_us".into(), toml::Value::Array(vec![v.into()]));
    }
    if let Some(v) = run.slice_us {
        m.insert(
            "slice_us".into(),
            toml::Value::Array(vec![i64::from(v).into()]),
        );
    }
    if let Some(x) = &run.ext_scheduler {
        m.insert("ext_scheduler".into(), list(&x.name));
    }
    if let Some(x) = &run.machine {
        m.insert("machine".into(), list(&x.name));
    }
    spec.insert("matrix".into(), toml::Value::Table(m));
    let mut w = toml::Table::new();
    w.insert("kind".into(), "replay".into());
    w.insert(
        "source".into(),
        format!("run {} of campaign {}", src.run_id, src.campaign_id).into(),
    );
    w.insert("original".into(), run.workload.name.clone().into());
    w.insert(
        "captured".into(),
        captured_label(run.policy.name(), &run.cpus.label()).into(),
    );
    w.insert("pi_iter_per_s".into(), pi_iter_per_s.round().into());
    w.insert(
        "external_wakeups".into(),
        toml::Value::Integer(rec.external_wakeups as i64),
    );
    w.insert("tasks".into(), desc::to_table(tasks));
    let mut ws = toml::Table::new();
    ws.insert("replay".into(), toml::Value::Table(w));
    spec.insert("workloads".into(), toml::Value::Table(ws));
    let header = format!(
        "# A replay of run {} synthesized by `schedlab synthesize`: {} tasks; CPU bursts in work \
         units of the calibrated pi loop ({:.4e} iterations per CPU second here).\n\
         # {} wake-ups came from outside the tree: they are replayed as timer sleeps.\n",
        src.run_id,
        tasks.len(),
        pi_iter_per_s,
        rec.external_wakeups
    );
    Ok(header + &toml::to_string(&spec)?)
}

/// The replay spec `text` with `fidelity` set in its replay workload (its
/// header comments kept).
pub fn with_fidelity(text: &str, fidelity: &str) -> Result<String> {
    let header: String = text
        .lines()
        .take_while(|l| l.starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect();
    let mut spec: toml::Table = text
        .parse()
        .map_err(|e| anyhow::anyhow!("the replay spec: {e}"))?;
    let w = spec
        .get_mut("workloads")
        .and_then(|w| w.get_mut("replay"))
        .and_then(|r| r.as_table_mut())
        .ok_or_else(|| anyhow::anyhow!("the replay spec has no [workloads.replay]"))?;
    w.insert("fidelity".into(), fidelity.into());
    Ok(header + &toml::to_string(&spec)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::replay::desc::Waker;

    #[test]
    fn the_step_comes_off_the_whole_burst_last_piece_first() {
        let sleep = Op::Sleep {
            ns: 9,
            by: Waker::Task(1),
        };
        // A burst of 3 + 2 ns around a wake-up, a step of 4: 1 ns left, in
        // the first piece; a burst of 10 then 1 + 7: the second burst's
        // step does not reach past the sleep before it.
        let mut ops = vec![
            Op::Run(3),
            Op::Wake(1),
            Op::Run(2),
            sleep,
            Op::Run(10),
            sleep,
            Op::Run(1),
            Op::Fork(2),
            Op::Run(7),
            sleep,
            Op::Run(5),
        ];
        let runs = |ops: &[Op]| -> Vec<u64> {
            ops.iter()
                .filter_map(|o| match o {
                    Op::Run(n) => Some(*n),
                    _ => None,
                })
                .collect()
        };
        let mut plain = ops.clone();
        less_step(&mut plain, |_| 4, |_| 0, 0);
        // The last burst ends the task, not in a sleep: kept whole.
        assert_eq!(runs(&plain), [1, 0, 6, 1, 3, 5]);
        // A fork costing 2 comes off the piece before it (after the
        // sleep's 4, which took the 7 to 3: the 1 goes); a start of 2 off
        // the first burst, first piece first.
        less_step(&mut ops, |_| 4, |_| 2, 2);
        assert_eq!(runs(&ops), [0, 0, 6, 0, 3, 5]);
        // In work units, empty runs dropped.
        let ns = [
            NsOp::Run(3),
            NsOp::Wake(1),
            NsOp::Run(2),
            NsOp::Sleep {
                ns: 9,
                by: Waker::Task(1),
            },
        ];
        let mut o = merged(&ns);
        less_step(&mut o, |_| 4, |_| 0, 0);
        assert_eq!(
            in_units(o, 1e9),
            [
                Op::Run(1),
                Op::Wake(1),
                Op::Sleep {
                    ns: 9,
                    by: Waker::Task(1)
                }
            ]
        );
    }

    fn recording() -> Recording {
        let (events, tasks) = record::tests::two_tasks();
        let mut r = Recorder::new(&[100], &tasks, 1000, 10_000);
        for e in &events {
            r.event(e);
        }
        r.finish()
    }

    #[test]
    fn ns_become_work_units_and_runs_merge() {
        let rec = recording();
        // 1e9 iterations per second: one unit a ns.
        let tasks = to_tasks(&rec, 1e9);
        assert_eq!(tasks.len(), 3);
        assert_eq!(
            tasks[1].body,
            Body::Sequence(vec![
                Op::Run(300),
                Op::Sleep {
                    ns: 200,
                    by: Waker::Task(0)
                },
                Op::Run(100),
                Op::Sleep {
                    ns: 600,
                    by: Waker::External
                },
                Op::Run(100),
            ])
        );
        desc::check_tree(&tasks).unwrap();
        // Half the rate, half the units.
        let half = to_tasks(&rec, 5e8);
        assert!(matches!(&half[1].body, Body::Sequence(o) if o[0] == Op::Run(150)));
        // The replayer's step cost comes off the bursts that end in a
        // sleep (the last one ends the task).
        let cost = StepCost::waits_only(60);
        let less = to_tasks_less(&rec, 1e9, &cost);
        assert!(matches!(&less[1].body, Body::Sequence(o)
            if o[0] == Op::Run(240) && o[2] == Op::Run(40) && o[4] == Op::Run(100)));
        // Each kind of step its own cost: t0.1 (a process) was woken by
        // t0 over a pipe, then from outside (a timer's cost); its start
        // comes off its first burst.
        let cost = StepCost {
            pipe_ns: 50,
            timer_ns: 30,
            start_process_ns: 100,
            ..StepCost::default()
        };
        let less = to_tasks_less(&rec, 1e9, &cost);
        assert!(
            matches!(&less[1].body, Body::Sequence(o)
            if o[0] == Op::Run(150) && o[2] == Op::Run(70) && o[4] == Op::Run(100)),
            "{:?}",
            less[1].body
        );
    }

    #[test]
    fn the_spec_round_trips_through_the_spec_parser() {
        let rec = recording();
        let tasks = to_tasks(&rec, 1e9);
        let original = r#"
name = "orig"
repetitions = 3
[matrix]
policy = ["other", "fifo"]
workload = ["w"]
processes = [1]
cpus = ["0", "all"]
[workloads.w]
kind = "command"
argv = ["true"]
"#;
        let spec = crate::spec::load(original, "orig", &[]).unwrap();
        let runs = crate::plan::expand(&spec, 1);
        let src = ReplaySource {
            run_id: 7,
            campaign_id: 1,
            status: "ok".into(),
            run: runs[0].clone(),
            spec_toml: original.into(),
            makespan_ns: Some(1),
            workers: vec![(100, Some(0), Some(5))],
        };
        let text = spec_text(&src, &tasks, &rec, 1e9).unwrap();
        let text = with_fidelity(&text, "8 of 8 figures within their rules").unwrap();
        assert!(text.starts_with("# A replay"));
        let back = crate::spec::load(&text, "replay.toml", &[]).unwrap();
        assert!(back.trace);
        assert!(text.contains("original = \"w\""), "{text}");
        let captured = captured_label(runs[0].policy.name(), &runs[0].cpus.label());
        assert!(
            text.contains(&format!("captured = \"{captured}\"")),
            "{text}"
        );
        let runs2 = crate::plan::expand(&back, 1);
        assert_eq!(runs2.len(), 1, "{text}");
        assert_eq!(runs2[0].policy, runs[0].policy);
        assert_eq!(runs2[0].cpus, runs[0].cpus);
        match &runs2[0].workload.workload {
            crate::workload::Workload::Replay(p) => {
                assert_eq!(p.tasks, tasks);
                assert_eq!(
                    p.fidelity.as_deref(),
                    Some("8 of 8 figures within their rules")
                );
            }
            other => panic!("{other:?}"),
        }
    }
}
