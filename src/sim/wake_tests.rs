//! The model's wake-ups against schedules computed by hand: when each task
//! became runnable (released, woken by a timer or a peer, its RT run queue
//! unthrottled, its DEADLINE runtime replenished) and when it next ran;
//! and a constrained DEADLINE task under the revised wake-up rule.
//! Every expected time is derived in the test's comment.

use super::engine::{Outcome, SchedSpec, SegmentEnd, TaskSpec, WakeCause};
use super::task::{Burn, Cycle, Ping, Program, Step};
use super::tests::{fair, machine, run, task};

const MS: u64 = 1_000_000;
const US: u64 = 1_000;

/// (task, cause, at, ran at) of every wake, in the order recorded.
fn wakes(out: &Outcome) -> Vec<(u32, WakeCause, u64, Option<u64>)> {
    out.wakes
        .iter()
        .map(|w| (w.task, w.cause, w.at_ns, w.run_ns))
        .collect()
}

fn fifo() -> SchedSpec {
    SchedSpec::Rt {
        prio: 50,
        rr: false,
    }
}

/// Two FIFO tasks at priority 50 on CPU 0, both released at 0. A: two
/// rounds of 2 ms CPU then 3 ms I/O; B: 10 ms CPU. A (first in its list)
/// runs [0, 2) and sleeps until 5; B runs [2, 12) (A's wake at 5 does not
/// preempt an equal priority); A runs [12, 14), sleeps until 17, wakes on
/// an idle CPU and runs at once (its program then ends). Waits: A 0, B
/// 2 ms, A 7 ms, A 0.
#[test]
fn a_sleeping_fifo_task_waits_behind_its_equal_until_it_ends() {
    let m = machine(1);
    let a = TaskSpec {
        program: Program::Cycle(Cycle::new(
            vec![Step::Cpu(2 * MS), Step::Io(3 * MS)],
            Some(2),
            None,
        )),
        ..task(fifo(), Burn::amount(0), 0)
    };
    let out = run(
        &m,
        vec![a, task(fifo(), Burn::amount(10 * MS), 0)],
        u64::MAX,
    );
    assert_eq!(
        wakes(&out),
        [
            (0, WakeCause::Released, 0, Some(0)),
            (1, WakeCause::Released, 0, Some(2 * MS)),
            (0, WakeCause::Timer, 5 * MS, Some(12 * MS)),
            (0, WakeCause::Timer, 17 * MS, Some(17 * MS)),
        ]
    );
    let waits: Vec<Option<u64>> = out.wakes.iter().map(|w| w.wait_ns()).collect();
    assert_eq!(waits, [Some(0), Some(2 * MS), Some(7 * MS), Some(0)]);
    assert!(
        out.wakes
            .iter()
            .all(|w| w.target_cpu == 0 && w.run_cpu == Some(0))
    );
    // A's waits are what its run-queue wait counts: 7 ms.
    assert_eq!(out.stats[0].wait_ns, 7 * MS);
}

/// A pingpong pair under FIFO on one CPU, one round trip of 10 µs
/// hand-offs. The initiator runs [0, 10 µs), signals the echo (not yet
/// waiting: a token, no wake) and waits; the echo runs from 10 µs, takes
/// the token, hands off [10, 20 µs), signals the initiator (woken by the
/// echo at 20 µs) and waits; the initiator runs at 20 µs, closes the
/// echo's channel (woken by the initiator at 20 µs) and exits; the echo
/// runs at 20 µs and exits.
#[test]
fn a_peer_s_signal_wakes_the_waiting_end() {
    let m = machine(1);
    let ping = |initiator: bool, peer| TaskSpec {
        program: Program::Ping(Ping::new(initiator, peer, 10 * US, 1, u64::MAX)),
        ..task(fifo(), Burn::amount(0), 0)
    };
    let out = run(&m, vec![ping(true, 1), ping(false, 0)], u64::MAX);
    assert_eq!(
        wakes(&out),
        [
            (0, WakeCause::Released, 0, Some(0)),
            (1, WakeCause::Released, 0, Some(10 * US)),
            (0, WakeCause::Peer(1), 20 * US, Some(20 * US)),
            (1, WakeCause::Peer(0), 20 * US, Some(20 * US)),
        ]
    );
}

/// EDF with CBS on one CPU until 20 ms (the schedule of
/// `deadline_tasks_run_earliest_deadline_first`): A 2 ms every 10 ms, B
/// 3 ms every 5 ms. Released at 0, B runs [0, 3) and A [3, 5). B's
/// runtime is replenished at 5 and it runs at once [5, 8); at 10 both are
/// replenished, B (deadline 15) runs first [10, 13), A (deadline 20)
/// waits 3 ms and runs [13, 15); B is replenished at 15 and runs [15,
/// 18); at 20 both are replenished, B (deadline 25) runs and exits, then
/// A (deadline 30). Throttled, neither is woken: A's slice ending at 15
/// starts no wake-up until its replenishment at 20.
#[test]
fn a_deadline_task_is_woken_at_each_replenishment() {
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
    let r = WakeCause::Replenished;
    assert_eq!(
        wakes(&out),
        [
            (0, WakeCause::Released, 0, Some(3 * MS)),
            (1, WakeCause::Released, 0, Some(0)),
            (1, r, 5 * MS, Some(5 * MS)),
            (0, r, 10 * MS, Some(13 * MS)),
            (1, r, 10 * MS, Some(10 * MS)),
            (1, r, 15 * MS, Some(15 * MS)),
            (0, r, 20 * MS, Some(20 * MS)),
            (1, r, 20 * MS, Some(20 * MS)),
        ]
    );
    let a_waits: Vec<Option<u64>> = out
        .wakes
        .iter()
        .filter(|w| w.task == 0)
        .map(|w| w.wait_ns())
        .collect();
    assert_eq!(a_waits, [Some(3 * MS), Some(3 * MS), Some(0)]);
}

/// A FIFO hog beside a fair worker on one CPU, 950 ms of RT per 1 s (the
/// schedule of `a_throttled_hog_gets_95_percent`): the hog runs from 0,
/// the worker first at 951 ms when the hog is throttled; at each period
/// (1 s, 2 s, 3 s) the run queue is unthrottled and the hog runs at once
/// (at 3 s the worker has just exited). The worker is never woken again:
/// preempted, it stays runnable.
#[test]
fn a_throttled_rt_task_is_woken_when_its_run_queue_is_unthrottled() {
    let mut m = machine(1);
    m.rt_runtime_us = 950_000;
    let hog = TaskSpec {
        worker: false,
        ..task(fifo(), Burn::until(u64::MAX), 0)
    };
    let out = run(
        &m,
        vec![hog, task(fair(0), Burn::until(3000 * MS), 0)],
        u64::MAX,
    );
    let u = WakeCause::Unthrottled;
    assert_eq!(
        wakes(&out),
        [
            (0, WakeCause::Released, 0, Some(0)),
            (1, WakeCause::Released, 0, Some(951 * MS)),
            (0, u, 1000 * MS, Some(1000 * MS)),
            (0, u, 2000 * MS, Some(2000 * MS)),
            (0, u, 3000 * MS, Some(3000 * MS)),
        ]
    );
}

/// The revised wake-up rule on a whole schedule: A, 2 ms every 10 ms
/// within 5 ms, runs 1 ms, sleeps 3 ms, then needs 2 ms more. It runs [0,
/// 1 ms) and wakes at 4 ms with 1 ms left and 1 ms to its deadline, which
/// overflows: as a constrained task it keeps deadline 5 ms with 399999 ns
/// (see `deadline::tests`), runs [4 ms, 4.399999 ms) and is throttled
/// until its next period at 5 − 5 + 10 = 10 ms; replenished (deadline 15
/// ms, 2 ms), it runs the 1.600001 ms left and exits at 11.600001 ms. (A
/// new deadline at the wake-up would have let it run [4, 6) ms: 3 ms in
/// its first period of 2 ms.)
#[test]
fn a_constrained_deadline_task_waking_late_gets_what_its_density_allows() {
    let m = machine(1);
    let a = TaskSpec {
        program: Program::Cycle(Cycle::new(
            vec![Step::Cpu(MS), Step::Io(3 * MS), Step::Cpu(2 * MS)],
            Some(1),
            None,
        )),
        ..task(
            SchedSpec::Deadline {
                runtime_ns: 2 * MS,
                deadline_ns: 5 * MS,
                period_ns: 10 * MS,
            },
            Burn::amount(0),
            0,
        )
    };
    let out = run(&m, vec![a], u64::MAX);
    let segs: Vec<(u64, u64, Option<SegmentEnd>)> = out
        .timeline
        .iter()
        .map(|s| (s.start_ns, s.end_ns, s.end))
        .collect();
    assert_eq!(
        segs,
        [
            (0, MS, Some(SegmentEnd::Blocked)),
            (4 * MS, 4 * MS + 399_999, Some(SegmentEnd::Throttled)),
            (10 * MS, 11 * MS + 600_001, Some(SegmentEnd::Exited)),
        ]
    );
    assert_eq!(
        wakes(&out),
        [
            (0, WakeCause::Released, 0, Some(0)),
            (0, WakeCause::Timer, 4 * MS, Some(4 * MS)),
            (0, WakeCause::Replenished, 10 * MS, Some(10 * MS)),
        ]
    );
}
