//! Schedules computed by hand, against the engine (tasks given directly)
//! and the whole mapping (a spec's run in, a record out). Every expected
//! number is derived in the test's comment.

use super::engine::{Engine, Outcome, SchedSpec, Segment, SegmentEnd, TaskSpec};
use super::machine::{Machine, ModelParams};
use super::task::{Burn, Program};
use super::{eevdf::FairKind, simulate};
use crate::fields::Field;
use crate::record::RunStatus;
use crate::workload::Rates;

const MS: u64 = 1_000_000;

/// One CPU, HZ 1000 (1 ms ticks), a 3 ms base slice, RR 100 ms, RT
/// throttling off, no fair server, no delayed dequeue, free switches.
pub(super) fn machine(cpus: usize) -> Machine {
    Machine {
        cpus,
        hz: 1000,
        base_slice_ns: 3 * MS,
        rr_timeslice_ms: 100,
        rt_runtime_us: -1,
        rt_period_us: 1_000_000,
        fair_server: false,
        fair_server_runtime_ns: 50 * MS,
        fair_server_period_ns: 1000 * MS,
        delay_dequeue: false,
        context_switch_ns: 0,
        timer_slack_ns: 0,
        places: None,
        migration_ns: 0,
    }
}

pub(super) fn fair(nice: i32) -> SchedSpec {
    SchedSpec::Fair {
        kind: FairKind::Normal,
        nice,
        slice_ns: 3 * MS,
    }
}

pub(super) fn task(sched: SchedSpec, program: Burn, start_ns: u64) -> TaskSpec {
    TaskSpec {
        sched,
        cpus: vec![0],
        program: Program::Burn(program),
        start_ns,
        worker: true,
    }
}

pub(super) fn run(m: &Machine, tasks: Vec<TaskSpec>, limit_ns: u64) -> Outcome {
    let out = Engine::new(m, tasks, None, 0).run(limit_ns);
    assert!(!out.timed_out && !out.stalled);
    out
}

/// The (task, start, end) of every segment, in ms.
fn segments_ms(out: &Outcome) -> Vec<(u32, u64, u64)> {
    out.timeline
        .iter()
        .map(|s: &Segment| (s.task, s.start_ns / MS, s.end_ns / MS))
        .collect()
}

/// Two nice-0 tasks of 30 ms each, 3 ms slices, ticks every 1 ms. Both
/// start at V = 0 with deadline 3 ms; A (index 0) wins the tie. At the
/// 3 ms tick A's vruntime reaches its deadline: new deadline 6 ms, V =
/// 1.5 ms, A is ineligible, B runs. At 6 ms B's new deadline is 6 ms too,
/// V = 3 ms, both eligible, A (queued, not running) wins the tie. So they
/// alternate 3 ms turns: A ends its 10th turn at 57 ms, B at 60 ms. Each
/// was preempted after 9 turns; A waited 9 × 3 = 27 ms, B 10 × 3 = 30 ms
/// (including [0, 3) and [54, 57)).
#[test]
fn two_nice0_tasks_take_3ms_turns() {
    let m = machine(1);
    let out = run(
        &m,
        vec![
            task(fair(0), Burn::amount(30 * MS), 0),
            task(fair(0), Burn::amount(30 * MS), 0),
        ],
        u64::MAX,
    );
    let mut want = Vec::new();
    for k in 0..10 {
        want.push((0, 6 * k, 6 * k + 3));
        if k < 9 {
            want.push((1, 6 * k + 3, 6 * k + 6));
        }
    }
    want.push((1, 57, 60));
    assert_eq!(segments_ms(&out), want);
    // Every turn but each task's last (18 of 20) ends preempted; the
    // last, exited.
    let ends: Vec<Option<SegmentEnd>> = out.timeline.iter().map(|s| s.end).collect();
    let mut want_ends = vec![Some(SegmentEnd::Preempted); 18];
    want_ends.extend([Some(SegmentEnd::Exited), Some(SegmentEnd::Exited)]);
    assert_eq!(ends, want_ends);
    let [a, b] = [&out.stats[0], &out.stats[1]];
    assert_eq!((a.exit_ns, b.exit_ns), (Some(57 * MS), Some(60 * MS)));
    assert_eq!((a.timeslices, b.timeslices), (10, 10));
    assert_eq!((a.nivcsw, b.nivcsw), (9, 9));
    assert_eq!((a.wait_ns, b.wait_ns), (27 * MS, 30 * MS));
    assert_eq!((a.run_ns, b.run_ns), (30 * MS, 30 * MS));
}

/// Nice 0 against nice 5 for 1 s: weights 1024 and 335, so shares
/// 1024/1359 = 75.35 % and 335/1359 = 24.65 %. Turns are 3 ms of real
/// time each, so over 1 s the error is at most about one turn (0.3 pp).
#[test]
fn nice0_against_nice5_shares_by_weight() {
    let m = machine(1);
    let out = run(
        &m,
        vec![
            task(fair(0), Burn::until(1000 * MS), 0),
            task(fair(5), Burn::until(1000 * MS), 0),
        ],
        u64::MAX,
    );
    let share = out.stats[0].run_ns as f64 / 1e9;
    assert!((share - 1024.0 / 1359.0).abs() < 0.003, "share {share}");
    assert_eq!(out.stats[0].run_ns + out.stats[1].run_ns, 1000 * MS);
}

/// FIFO: A and B at priority 50 (10 ms each) from 0, C at 60 (10 ms)
/// from 5 ms. A runs [0, 5), C preempts and runs [5, 15), A resumes at
/// the head of its list [15, 20), then B [20, 30). Completion order C, A,
/// B; only A was preempted; waits: A 10 ms, B 20 ms, C 0.
#[test]
fn fifo_runs_in_priority_then_arrival_order() {
    let m = machine(1);
    let rt = |prio| SchedSpec::Rt { prio, rr: false };
    let out = run(
        &m,
        vec![
            task(rt(50), Burn::amount(10 * MS), 0),
            task(rt(50), Burn::amount(10 * MS), 0),
            task(rt(60), Burn::amount(10 * MS), 5 * MS),
        ],
        u64::MAX,
    );
    assert_eq!(
        segments_ms(&out),
        [(0, 0, 5), (2, 5, 15), (0, 15, 20), (1, 20, 30)]
    );
    let ends: Vec<u64> = out.stats.iter().map(|s| s.exit_ns.unwrap() / MS).collect();
    assert_eq!(ends, [20, 30, 15]);
    let preempted: Vec<u64> = out.stats.iter().map(|s| s.nivcsw).collect();
    assert_eq!(preempted, [1, 0, 0]);
    let waits: Vec<u64> = out.stats.iter().map(|s| s.wait_ns / MS).collect();
    assert_eq!(waits, [10, 20, 0]);
}

/// RR at 100 ms (100 ticks at HZ 1000): A and B need 250 ms each. A
/// [0, 100), B [100, 200), A [200, 300), B [300, 400), A [400, 450) and
/// done, B [450, 500) and done. Each was preempted twice, ran 3 turns.
#[test]
fn rr_takes_100ms_turns() {
    let m = machine(1);
    let rr = SchedSpec::Rt { prio: 50, rr: true };
    let out = run(
        &m,
        vec![
            task(rr, Burn::amount(250 * MS), 0),
            task(rr, Burn::amount(250 * MS), 0),
        ],
        u64::MAX,
    );
    assert_eq!(
        segments_ms(&out),
        [
            (0, 0, 100),
            (1, 100, 200),
            (0, 200, 300),
            (1, 300, 400),
            (0, 400, 450),
            (1, 450, 500)
        ]
    );
    for s in &out.stats {
        assert_eq!((s.nivcsw, s.timeslices), (2, 3));
    }
}

/// EDF with CBS on one CPU until 20 ms: A 2 ms every 10 ms, B 3 ms every
/// 5 ms. B's deadline (5) is earlier: B [0, 3), throttled until 5; A
/// [3, 5), throttled until 10; B (deadline 10) [5, 8); idle to 10; then
/// B (deadline 15) before A (deadline 20): B [10, 13), A [13, 15), B
/// [15, 18). A gets 4 ms, B 12 ms.
#[test]
fn deadline_tasks_run_earliest_deadline_first() {
    let m = machine(1);
    let dl = |r, p| SchedSpec::Deadline {
        runtime_ns: r * MS,
        deadline_ns: p * MS,
        period_ns: p * MS,
    };
    let out = run(
        &m,
        vec![
            task(dl(2, 10), Burn::until(20 * MS), 0),
            task(dl(3, 5), Burn::until(20 * MS), 0),
        ],
        u64::MAX,
    );
    assert_eq!(
        segments_ms(&out),
        [
            (1, 0, 3),
            (0, 3, 5),
            (1, 5, 8),
            (1, 10, 13),
            (0, 13, 15),
            (1, 15, 18)
        ]
    );
    assert_eq!(
        (out.stats[0].run_ns, out.stats[1].run_ns),
        (4 * MS, 12 * MS)
    );
}

/// A FIFO hog beside a fair task on one CPU with 950 ms per 1 s. The
/// throttle is checked at the tick and trips once RT time exceeds the
/// runtime: the hog runs [0, 951) (951 ms > 950 ms at the 951 ms tick),
/// the fair task the rest of the period; at 1 s 950 ms are paid back,
/// leaving 1 ms, so from then on the hog runs 950 ms of each period.
#[test]
fn a_throttled_hog_gets_95_percent() {
    let mut m = machine(1);
    m.rt_runtime_us = 950_000;
    let out = run(
        &m,
        vec![
            TaskSpec {
                worker: false,
                ..task(
                    SchedSpec::Rt {
                        prio: 50,
                        rr: false,
                    },
                    Burn::until(u64::MAX),
                    0,
                )
            },
            task(fair(0), Burn::until(3000 * MS), 0),
        ],
        u64::MAX,
    );
    let hog: Vec<(u64, u64)> = out
        .timeline
        .iter()
        .filter(|s| s.task == 0)
        .map(|s| (s.start_ns / MS, s.end_ns / MS))
        .collect();
    assert_eq!(hog, [(0, 951), (1000, 1950), (2000, 2950)]);
    // The hog's turns all end throttled (the last at 2950 ms, before the
    // worker exits at 3 s). The worker's turns end preempted by the
    // unthrottled hog at 1 s and 2 s, its last exited.
    let ends = |task: u32| -> Vec<Option<SegmentEnd>> {
        out.timeline
            .iter()
            .filter(|s| s.task == task)
            .map(|s| s.end)
            .collect()
    };
    assert_eq!(
        ends(0),
        [
            Some(SegmentEnd::Throttled),
            Some(SegmentEnd::Throttled),
            Some(SegmentEnd::Throttled)
        ]
    );
    assert_eq!(
        ends(1),
        [
            Some(SegmentEnd::Preempted),
            Some(SegmentEnd::Preempted),
            Some(SegmentEnd::Exited)
        ]
    );
    assert_eq!(out.stats[0].run_ns, 2851 * MS);
    assert_eq!(out.stats[1].run_ns, 149 * MS);
}

/// The same through a spec: release after the hog's one-period warm-up
/// (at 1 s), 3 s of pi on CPU 0 with the hog; over the whole periods
/// [1 s, 4 s) the hog gets 3 × 950 ms = 95 % and the worker the rest.
/// The fair server (6.12+) with throttling off gives the same 95 %: the
/// starved fair task is boosted at the zero-laxity time, 950 ms into each
/// period, for 50 ms.
#[test]
fn hog_share_through_the_mapping() {
    let spec = crate::spec::load(
        "timeout_s = 60\n[matrix]\npolicy = [\"other\"]\nworkload = [\"pi\"]\ncpus = [\"0\"]\n\
         [workloads.pi]\nduration_s = 3.0\n[hog]\npolicy = \"fifo\"\nrt_priority = 50\ncpus = \"0\"\n",
        "t.toml",
        &[],
    )
    .unwrap();
    let planned = crate::plan::expand(&spec, 1);
    for (throttle_us, server) in [(950_000, false), (-1, true)] {
        let mut m = machine(2);
        m.rt_runtime_us = throttle_us;
        m.fair_server = server;
        let sim = simulate(&planned[0], &spec, &params(m));
        let r = &sim.record;
        assert_eq!(r.status, RunStatus::Ok, "{}", r.reason);
        let hog = r.processes.iter().find(|p| p.role == "hog").unwrap();
        let share = hog.figures["cpu_share"];
        assert!((share - 0.95).abs() < 1e-9, "{throttle_us}: {share}");
        let worker = &r.processes[0];
        assert_eq!(
            worker.kernel.get(Field::RunNs),
            Some(150 * MS),
            "{throttle_us}"
        );
        assert_eq!(worker.wall_ns, 3000 * MS);
        assert_eq!(r.env.kernel_release, super::MODEL_RELEASE);
    }
}

fn params(m: Machine) -> ModelParams {
    let rates = Rates {
        pi_iter_per_s: 1e8,
        hash_per_s: 1e5,
        flops_per_s: 1e9,
        copy_bytes_per_s: 1e9,
        wake_round_trip_s: 10e-6,
    };
    ModelParams::new(m, rates, "test rates")
}

/// DEADLINE admission through a spec: 3 workers of 9 ms every 10 ms ask
/// 2.7 CPUs of 2 × 0.95: refused, the run Skipped with the reason. Two
/// workers at 9 ms run: they ask 1.8 of 1.9.
#[test]
fn deadline_admission_through_the_mapping() {
    let text = |n| {
        format!(
            "[matrix]\npolicy = [\"deadline\"]\nworkload = [\"pi\"]\nprocesses = [{n}]\n\
             [workloads.pi]\niterations = 1000000\n[deadline]\nruntime_us = 9000\nperiod_us = 10000\n"
        )
    };
    let mut m = machine(2);
    m.rt_runtime_us = 950_000;
    for (n, ok) in [(3, false), (2, true)] {
        let spec = crate::spec::load(&text(n), "t.toml", &[]).unwrap();
        let planned = crate::plan::expand(&spec, 1);
        let r = simulate(&planned[0], &spec, &params(m.clone())).record;
        if ok {
            assert_eq!(r.status, RunStatus::Ok, "{}", r.reason);
            // 10 ms of pi at 1e8/s: 9 ms in the first period, 1 ms in
            // the second, each on its own CPU.
            for p in &r.processes {
                assert_eq!(p.wall_ns, 11 * MS);
                assert_eq!(p.work, Some(1_000_000));
            }
        } else {
            assert_eq!(r.status, RunStatus::Skipped);
            assert!(
                r.reason.contains("admission") && r.reason.contains("2.7"),
                "{}",
                r.reason
            );
        }
    }
}

/// WRR weights 1 and 4 on CPU 0 with a 10 ms quantum, 1 s of hashing:
/// turns of 10 and 40 ms alternate, 20 rounds of 50 ms, so the shares are
/// exactly 20 % and 80 %, with a `slices` row per turn (40 rows).
#[test]
fn wrr_delivers_its_weights() {
    let spec = crate::spec::load(
        "[matrix]\npolicy = [\"wrr\"]\nworkload = [\"hash\"]\nprocesses = [2]\npriorities = [\"w\"]\n\
         cpus = [\"0\"]\n[priorities.w]\nmode = \"weights\"\nweight = [1, 4]\n\
         [workloads.hash]\nduration_s = 1.0\n[wrr]\nquantum_ms = 10.0\n",
        "t.toml",
        &[],
    )
    .unwrap();
    let planned = crate::plan::expand(&spec, 1);
    let r = simulate(&planned[0], &spec, &params(machine(2))).record;
    assert_eq!(r.status, RunStatus::Ok, "{}", r.reason);
    let runs: Vec<u64> = r
        .processes
        .iter()
        .map(|p| p.kernel.get(Field::RunNs).unwrap())
        .collect();
    assert_eq!(runs, [200 * MS, 800 * MS]);
    assert_eq!(r.slices.len(), 40);
    assert_eq!(r.slices[1].process_index, 1);
    assert_eq!(r.slices[1].cpu_ns, 40 * MS);
    // 200 ms of hashing at 1e5/s (16 rounds): 20,000 hashes.
    assert_eq!(r.processes[0].work, Some(20_000));
}

/// A workload the model does not represent is Skipped, saying what is
/// missing.
#[test]
fn unmodelled_workloads_are_skipped_with_the_reason() {
    let spec = crate::spec::load(
        "[matrix]\npolicy = [\"other\"]\nworkload = [\"request\"]\nprocesses = [3]\n\
         [workloads.request]\nworkers = 2\n",
        "t.toml",
        &[],
    )
    .unwrap();
    let planned = crate::plan::expand(&spec, 1);
    let r = simulate(&planned[0], &spec, &params(machine(2))).record;
    assert_eq!(r.status, RunStatus::Skipped);
    assert!(r.reason.contains("request"), "{}", r.reason);
    assert!(r.extra["model"]["not_modelled"].is_array());
}

fn spec_run(text: &str) -> (crate::spec::Spec, crate::plan::Run) {
    let spec = crate::spec::load(text, "t.toml", &[]).unwrap();
    let run = crate::plan::expand(&spec, 1).remove(0);
    (spec, run)
}

const PERIODIC_FIFO: &str = "[matrix]\npolicy = [\"fifo\"]\nworkload = [\"periodic\"]\nprocesses = [2]\n\
    cpus = [\"0\"]\n[workloads.periodic]\nperiod_us = 1000\nrun_us = 100\nactivations = 10\n";

/// Two FIFO periodic tasks of equal priority on CPU 0, 100 µs every 1 ms,
/// a 5 µs timer wake-up cost. Both wake 5 µs after each release; worker 0
/// (first in timer order) runs at once, worker 1 after its 100 µs: wake-up
/// latencies 5 µs and 105 µs, completions 105 and 205 µs, no misses. The
/// last release is at 10 ms: walls 10.105 and 10.205 ms.
#[test]
fn periodic_under_fifo_wakes_after_the_timer_cost() {
    let (spec, run) = spec_run(PERIODIC_FIFO);
    let mut p = params(machine(2));
    p.wake.timer_wakeup_ns = 5_000;
    let r = simulate(&run, &spec, &p).record;
    assert_eq!(r.status, RunStatus::Ok, "{}", r.reason);
    let near = |got: f64, want: f64| (got / want - 1.0).abs() < 0.002;
    let w: Vec<_> = r.processes.iter().map(|p| &p.figures).collect();
    assert!(near(w[0]["wakeup_p50_us"], 5.0), "{:?}", w[0]);
    assert!(near(w[1]["wakeup_p50_us"], 105.0), "{:?}", w[1]);
    assert_eq!((w[0]["activations"], w[1]["misses"]), (10.0, 0.0));
    let walls: Vec<u64> = r.processes.iter().map(|p| p.wall_ns).collect();
    assert_eq!(walls, [10_105_000, 10_205_000]);
    assert_eq!(r.processes[1].work, Some(10));
    assert!(r.processes[0].latency.contains_key("completion"));
}

/// The same task alone under OTHER and under FIFO with the kernel's 50 µs
/// timer slack and ticks every 1 ms: releases at 1, 2, … ms fall on ticks
/// (woken at the release + 5 µs), so the period is moved to 1.5 ms,
/// whose releases at 1.5, 3, 4.5 … ms fall on a tick every other time.
/// OTHER wakes 50 + 5 µs late between ticks and 5 µs on them; FIFO
/// (slack 0) always 5 µs late.
#[test]
fn a_fair_periodic_task_wakes_after_its_timer_slack() {
    let text = PERIODIC_FIFO
        .replace("processes = [2]", "processes = [1]")
        .replace("period_us = 1000", "period_us = 1500")
        .replace("activations = 10", "activations = 9");
    let mut p = params(machine(1));
    p.machine.timer_slack_ns = super::machine::TIMER_SLACK_NS;
    p.wake.timer_wakeup_ns = 5_000;
    let wakes = |text: &str| {
        let (spec, run) = spec_run(text);
        let r = simulate(&run, &spec, &p).record;
        assert_eq!(r.status, RunStatus::Ok, "{}", r.reason);
        let h =
            crate::workload::latency::Latency::decode(&r.processes[0].latency["wakeup"]).unwrap();
        (h.count(), h.percentiles().max_ns, h.quantile_ns(0.0))
    };
    let (n, max, min) = wakes(&text.replace("fifo", "other"));
    assert_eq!(n, 9);
    // 5 of 9 releases (1.5, 4.5, 7.5, 10.5, 13.5 ms) between ticks.
    assert!((55_000..55_100).contains(&max), "{max}");
    // The histogram's lowest quantile reads its bucket's lower edge.
    let near5 = |ns: u64| (4_950..5_050).contains(&ns);
    assert!(near5(min), "{min}");
    let (spec, run) = spec_run(&text.replace("fifo", "other"));
    let r = simulate(&run, &spec, &p).record;
    let p50 = r.processes[0].figures["wakeup_p50_us"];
    assert!((p50 - 55.0).abs() < 0.1, "{p50}");
    let (_, max, min) = wakes(&text);
    assert!(near5(max) && near5(min), "{max} {min}");
}

/// Calibrate on one condition, predict another: the timer cost comes back
/// out of a run's own wake-up histograms (here a one-process run whose
/// wake-ups are all the 5 µs cost), and says which run it came from.
#[test]
fn wake_costs_calibrate_from_a_measured_run() {
    let (spec, run) = spec_run(&PERIODIC_FIFO.replace("processes = [2]", "processes = [1]"));
    let mut p = params(machine(2));
    p.wake.timer_wakeup_ns = 5_000;
    let measured = simulate(&run, &spec, &p).record;
    // With a 1 µs switch the model adds to each wake-up, 4 µs of timer.
    let wake = super::WakeCosts::default()
        .from_periodic_run(&measured, 1_000)
        .unwrap();
    assert!((4_000..4_010).contains(&wake.timer_wakeup_ns), "{wake:?}");
    assert!(wake.source.contains(&run.key), "{}", wake.source);
    let (spec, cpu_run) = spec_run("[matrix]\nworkload = [\"pi\"]\n");
    let pi = simulate(&cpu_run, &spec, &p).record;
    let e = super::WakeCosts::default()
        .from_periodic_run(&pi, 0)
        .unwrap_err();
    assert!(e.to_string().contains("wakeup"), "{e}");
}

/// A pingpong pair on CPU 0, 10 µs hand-off per end, 2 µs per switch:
/// each exchange is write (10) + switch (2) + echo (10) + switch (2) =
/// 24 µs between the initiator's reads; 100 round trips each.
#[test]
fn pingpong_round_trips_cost_two_handoffs_and_two_switches() {
    let (spec, run) = spec_run(
        "[matrix]\nworkload = [\"pingpong\"]\nprocesses = [2]\ncpus = [\"0\"]\n\
         [workloads.pingpong]\nround_trips = 100\n",
    );
    let mut m = machine(2);
    m.context_switch_ns = 2_000;
    let mut p = params(m);
    p.wake.handoff_ns = 10_000;
    let r = simulate(&run, &spec, &p).record;
    assert_eq!(r.status, RunStatus::Ok, "{}", r.reason);
    let init = &r.processes[0];
    assert_eq!((init.work, r.processes[1].work), (Some(100), Some(100)));
    let h = crate::workload::latency::Latency::decode(&init.latency["round_trip"]).unwrap();
    let p50 = h.quantile_ns(0.5);
    assert!((24_000..24_030).contains(&p50), "{p50}");
    assert!(
        (init.figures["usecs_per_op"] - 24.0).abs() < 0.1,
        "{:?}",
        init.figures
    );
    // Every hand-off blocks the one end and wakes the other.
    assert_eq!(init.kernel.get(crate::fields::Field::Nvcsw), Some(100));
}

/// Two pi workers of 10 ms (1e6 iterations at 1e8/s) free on CPUs 0-1
/// start on a CPU each and run in parallel: makespan 10 ms, CPU use
/// 20 ms of 2 × 10 ms.
#[test]
fn free_tasks_spread_over_idle_cpus() {
    let (spec, run) = spec_run(
        "[matrix]\nworkload = [\"pi\"]\nprocesses = [2]\n[workloads.pi]\niterations = 1000000\n",
    );
    let r = simulate(&run, &spec, &params(machine(2))).record;
    assert_eq!(r.makespan_ns, Some(10 * MS));
    assert!((r.cpu_util.unwrap() - 1.0).abs() < 1e-9);
    assert_eq!(r.cpu_list, [0, 1]);
}

/// An RT hog with throttling and the fair server both off starves a fair
/// worker on its CPU: the run times out (never a made-up result), the
/// worker is reported killed.
#[test]
fn a_starved_run_times_out() {
    let (spec, run) = spec_run(
        "timeout_s = 1\n[matrix]\nworkload = [\"pi\"]\ncpus = [\"0\"]\n\
         [hog]\npolicy = \"fifo\"\nrt_priority = 50\ncpus = \"0\"\n",
    );
    let r = simulate(&run, &spec, &params(machine(1))).record;
    assert_eq!(r.status, RunStatus::TimedOut, "{}", r.reason);
    assert!(!r.processes[0].ok);
    assert_eq!(r.processes[0].kernel.get(Field::RunNs), Some(0));
}

/// SCHED_IDLE weighs 3 (WEIGHT_IDLEPRIO): against nice 0 for 1 s the
/// nice-0 task gets 1024/1027 = 99.71 % (within a tick, 0.1 pp).
#[test]
fn sched_idle_gets_weight_3() {
    let m = machine(1);
    let idle = SchedSpec::Fair {
        kind: FairKind::Idle,
        nice: 0,
        slice_ns: 3 * MS,
    };
    let out = run(
        &m,
        vec![
            task(fair(0), Burn::until(1000 * MS), 0),
            task(idle, Burn::until(1000 * MS), 0),
        ],
        u64::MAX,
    );
    let share = out.stats[0].run_ns as f64 / 1e9;
    assert!((share - 1024.0 / 1027.0).abs() < 0.001, "share {share}");
}

/// A nice-0 periodic task (1 ms every 10 ms, woken 0.5 ms after each
/// release, 4 activations) beside a CPU hog. Against a SCHED_IDLE hog the
/// CPU reschedules at every wake-up, and the waker runs at once whenever
/// it is eligible: it slept with a lag of about -3 µs (its 1 ms against
/// a weight-3 task) and comes back just ineligible once, at 20.5 ms,
/// where it waits for the hog's slice to end at the 22 ms tick; the other
/// three wake-ups take exactly the 0.5 ms timer cost (so the median
/// does). Against a nice-0 hog the waker has no precedence: most wake-ups
/// wait for the runner's slice to end at a tick.
#[test]
fn wakeup_preemption_of_idle_and_normal_runners() {
    use super::task::Periodic;
    let m = machine(1);
    let p50 = |hog: FairKind| {
        let hog = SchedSpec::Fair {
            kind: hog,
            nice: 0,
            slice_ns: 3 * MS,
        };
        let periodic = Periodic::new(0, 10 * MS, MS, MS / 2, 4, u64::MAX);
        let out = run(
            &m,
            vec![
                TaskSpec {
                    program: Program::Periodic(periodic),
                    ..task(fair(0), Burn::amount(0), 0)
                },
                TaskSpec {
                    worker: false,
                    ..task(hog, Burn::until(u64::MAX), 0)
                },
            ],
            u64::MAX,
        );
        let Program::Periodic(p) = &out.programs[0] else {
            unreachable!()
        };
        assert_eq!(p.done, 4);
        (p.wakeup.quantile_ns(0.5), p.wakeup.quantile_ns(0.0))
    };
    let (median, _) = p50(FairKind::Idle);
    assert!((499_000..501_000).contains(&median), "{median}");
    let (median, _) = p50(FairKind::Normal);
    assert!(median > 600_000, "{median}");
}

#[test]
fn a_long_run_keeps_a_bounded_timeline_and_whole_figures() {
    use super::engine::TIMELINE_MAX;
    let m = machine(1);
    let s = 1_000_000_000;
    // Two tasks taking 3 ms turns for 1,200 s: 400,000 segments made.
    let tasks = vec![
        task(fair(0), Burn::amount(600 * s), 0),
        task(fair(0), Burn::amount(600 * s), 0),
    ];
    let out = run(&m, tasks, 2000 * s);
    assert_eq!(out.timeline.len(), TIMELINE_MAX);
    let cut = out.timeline_cut_ns.expect("cut");
    assert!(cut > 600 * s && cut < 1200 * s, "{cut}");
    assert!(out.timeline.iter().all(|g| g.start_ns <= cut + 10 * MS));
    // The figures are counted to the end, whatever was kept.
    let run_ns: u64 = out.stats.iter().map(|t| t.run_ns).sum();
    assert_eq!(run_ns, 1200 * s);
    assert!(out.stats.iter().all(|t| t.timeslices > 150_000));
    assert!(!out.interrupted);
}

#[test]
fn a_stop_check_ends_a_run_as_interrupted() {
    let m = machine(1);
    let s = 1_000_000_000;
    let tasks = vec![
        task(fair(0), Burn::amount(200 * s), 0),
        task(fair(0), Burn::amount(200 * s), 0),
    ];
    let mut asked = 0;
    let out = Engine::new(&m, tasks, None, 0).run_until_stopped(1000 * s, &mut || {
        asked += 1;
        asked == 3
    });
    assert!(out.interrupted);
    assert_eq!(asked, 3);
    assert!(out.end_ns < 100 * s, "{}", out.end_ns);
}
