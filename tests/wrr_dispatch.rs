//! The WRR dispatcher on real processes: CPU-hog children (`sh` busy
//! loops) dispatched on one CPU with each mechanism, checked for the
//! weighted shares delivered, for every worker given back (not stopped, not
//! left at an RT policy) however the dispatch ends, and for workers that
//! exit or sleep. Each test takes 0.5–3 s; they hold one lock, so they never
//! overlap, and a watchdog kills the children of a test still running after
//! 30 s.
//!
//! The Fifo mechanism needs SCHED_FIFO (root or CAP_SYS_NICE): without it
//! the Fifo tests say why they did not run (and fail under
//! `SCHEDLAB_REQUIRE_ROOT=1`, the rule of `common::require`); the Signals
//! ones run anywhere.

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard, mpsc};
use std::time::Duration;

mod common;

use schedlab::sys::events as os;
use schedlab::sys::proc::monotonic_ns;
use schedlab::sys::procfs::read_schedstat;
use schedlab::sys::sched::{self, SCHED_FIFO, SCHED_OTHER};
use schedlab::wrr::{
    DEFAULT_BASE_PRIO, DispatchReport, Dispatcher, Mechanism, SliceEnd, SliceRecord, SliceRule,
    Task, WrrPolicy, available_mechanism, fifo_check, ideal_shares,
};

/// Nearest-rank quantile of unsorted values (as `DispatchReport` computes
/// its lateness quantiles).
fn quantile(values: &[u64], q: f64) -> Option<u64> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_unstable();
    let rank = (q.clamp(0.0, 1.0) * v.len() as f64).ceil() as usize;
    Some(v[rank.clamp(1, v.len()) - 1])
}

const MS: u64 = 1_000_000;

/// The RT tests share one CPU and must not overlap.
static CPU_LOCK: Mutex<()> = Mutex::new(());

fn lock() -> MutexGuard<'static, ()> {
    CPU_LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// The first CPU this process may use.
fn test_cpu() -> usize {
    sched::get_affinity(0).unwrap()[0]
}

/// CPU-hog children (`sh` busy loops), killed and reaped on drop; a
/// watchdog kills them if the test is still running after 30 s.
struct Hogs {
    children: Vec<Child>,
    watchdog: Option<mpsc::Sender<()>>,
}

impl Hogs {
    fn spawn(n: usize) -> Hogs {
        let children: Vec<Child> = (0..n)
            .map(|_| {
                Command::new("sh")
                    .args(["-c", "while :; do :; done"])
                    .stdin(Stdio::null())
                    .spawn()
                    .expect("spawning sh")
            })
            .collect();
        let pids: Vec<i32> = children.iter().map(|c| c.id() as i32).collect();
        let (tx, rx) = mpsc::channel::<()>();
        std::thread::spawn(move || {
            if rx.recv_timeout(Duration::from_secs(30)) == Err(mpsc::RecvTimeoutError::Timeout) {
                eprintln!("watchdog: test over 30 s, killing hogs {pids:?}");
                for p in pids {
                    schedlab::sys::proc::kill(p, libc::SIGKILL);
                }
            }
        });
        Hogs {
            children,
            watchdog: Some(tx),
        }
    }

    fn pids(&self) -> Vec<i32> {
        self.children.iter().map(|c| c.id() as i32).collect()
    }
}

impl Drop for Hogs {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        self.watchdog.take();
    }
}

fn weighted_policy(weights: &[u32], cpu: usize, quantum_ns: u64) -> WrrPolicy {
    let tasks = weights
        .iter()
        .enumerate()
        .map(|(id, &weight)| Task { id, weight, cpu })
        .collect();
    WrrPolicy::new(tasks, SliceRule::Weighted { quantum_ns }).unwrap()
}

fn run_ns(pid: i32) -> u64 {
    read_schedstat(pid).unwrap().run_ns
}

/// Runs `weights` on one CPU with `mechanism` for 2 s (up to 3 s while
/// the children have had less than 600 ms of CPU, on a machine busy
/// with other work), prints what was delivered and returns the report
/// with the shares measured from the children's whole run time (slices
/// and anything between).
fn dispatch_hogs(mechanism: Mechanism, weights: &[u32]) -> (DispatchReport, Vec<f64>) {
    let cpu = test_cpu();
    let hogs = Hogs::spawn(weights.len());
    let pids = hogs.pids();
    let policy = weighted_policy(weights, cpu, 10 * MS);
    let ideal = policy.ideal_shares();
    let d = Dispatcher::start(policy, pids.clone(), mechanism, DEFAULT_BASE_PRIO)
        .expect("starting the dispatcher");
    let before: Vec<u64> = pids.iter().map(|&p| run_ns(p)).collect();
    let t0 = monotonic_ns();
    std::thread::sleep(Duration::from_secs(2));
    let delivered = || -> u64 { pids.iter().zip(&before).map(|(&p, b)| run_ns(p) - b).sum() };
    while delivered() < 600 * MS && monotonic_ns() - t0 < 3_000 * MS {
        std::thread::sleep(Duration::from_millis(100));
    }
    let after: Vec<u64> = pids.iter().map(|&p| run_ns(p)).collect();
    let report = d.stop();

    // Everything is given back.
    for &p in &pids {
        let state = os::proc_state(p);
        assert_ne!(state, Some('T'), "pid {p} left stopped");
        assert_eq!(sched::get_attr(p).unwrap().sched_policy, SCHED_OTHER);
    }
    drop(hogs);

    let total_ns: Vec<u64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
    let sum: u64 = total_ns.iter().sum();
    let whole: Vec<f64> = total_ns.iter().map(|&t| t as f64 / sum as f64).collect();
    print_report(&report, weights, &ideal, &whole);
    (report, whole)
}

fn print_report(report: &DispatchReport, weights: &[u32], ideal: &[f64], whole: &[f64]) {
    let shares = report.cpu_shares();
    let by_task = report.cpu_ns_by_task();
    let name = report.mechanism.name();
    println!(
        "[wrr {name}] {} slices in {:.3} s on CPUs {:?}, dispatcher RT: {}",
        report.slices.len(),
        report.wall_ns as f64 / 1e9,
        report.cpus,
        report.dispatcher_rt
    );
    for (id, w) in weights.iter().enumerate() {
        println!(
            "[wrr {name}] task {id} weight {w}: slice share {:.2}% (ideal {:.2}%, {:+.2} pp), \
             whole-run share {:.2}%, slice CPU {:.1} ms",
            100.0 * shares.get(&id).copied().unwrap_or(0.0),
            100.0 * ideal[id],
            100.0 * (shares.get(&id).copied().unwrap_or(0.0) - ideal[id]),
            100.0 * whole[id],
            by_task.get(&id).copied().unwrap_or(0) as f64 / 1e6
        );
    }
    let q = |x: f64| report.lateness_quantile(x).unwrap_or(0) as f64 / 1e3;
    println!(
        "[wrr {name}] dispatcher CPU {:.3} ms = {:.3}% of the CPU; lateness p50 {:.1} µs, \
         p99 {:.1} µs, max {:.1} µs (n = {})",
        report.dispatcher_cpu_ns as f64 / 1e6,
        100.0 * report.overhead(),
        q(0.5),
        q(0.99),
        q(1.0),
        report.lateness_ns.len()
    );
    // How far each slice's CPU time is from what was asked, and how
    // much wall-clock extension that took.
    let err: Vec<u64> = report
        .slices
        .iter()
        .filter(|s| s.end == SliceEnd::Completed)
        .map(|s| s.cpu_ns.abs_diff(s.target_ns))
        .collect();
    let ext: Vec<u64> = report
        .slices
        .iter()
        .map(|s| s.actual_end_ns.saturating_sub(s.planned_end_ns))
        .collect();
    let mut ends: BTreeMap<String, usize> = BTreeMap::new();
    for s in &report.slices {
        *ends.entry(format!("{:?}", s.end)).or_default() += 1;
    }
    println!(
        "[wrr {name}] |slice CPU − target| p50 {:.1} µs p99 {:.1} µs max {:.1} µs; \
         extension past the planned end p50 {:.1} µs p99 {:.1} µs max {:.1} µs; ends {ends:?}",
        quantile(&err, 0.5).unwrap_or(0) as f64 / 1e3,
        quantile(&err, 0.99).unwrap_or(0) as f64 / 1e3,
        quantile(&err, 1.0).unwrap_or(0) as f64 / 1e3,
        quantile(&ext, 0.5).unwrap_or(0) as f64 / 1e3,
        quantile(&ext, 0.99).unwrap_or(0) as f64 / 1e3,
        quantile(&ext, 1.0).unwrap_or(0) as f64 / 1e3,
    );
    if !report.errors.is_empty() {
        println!("[wrr {name}] errors: {:?}", report.errors);
    }
}

/// The slices of the whole rounds at the start of a one-CPU report:
/// up to the last point where every task has had the same number of
/// turns, and before the slice cut short by `stop`. Shares over whole
/// rounds do not depend on where in a round the dispatch was stopped
/// (that alone can tilt them by one 40 ms slice over the run).
fn whole_rounds(report: &DispatchReport, tasks: usize) -> (Vec<SliceRecord>, usize) {
    let mut turns = vec![0usize; tasks];
    let mut end = 0;
    for (i, s) in report.slices.iter().enumerate() {
        if s.end == SliceEnd::Stopped {
            break;
        }
        turns[s.task] += 1;
        if turns.iter().all(|&t| t == turns[0]) {
            end = i + 1;
        }
    }
    let rounds = report.slices[..end].iter().filter(|s| s.task == 0).count();
    (report.slices[..end].to_vec(), rounds)
}

/// Each task's share of the CPU time in `slices`.
fn shares_of(slices: &[SliceRecord], tasks: usize) -> Vec<f64> {
    let mut ns = vec![0u64; tasks];
    for s in slices {
        ns[s.task] += s.cpu_ns;
    }
    let total: u64 = ns.iter().sum();
    ns.iter().map(|&n| n as f64 / total.max(1) as f64).collect()
}

/// Checks the delivered shares, over whole rounds, against the weights.
///
/// Tolerance ±1 pp. Over whole rounds the only error left is that of
/// the slices' CPU time against their targets, and since each completed
/// slice's error is carried into the task's next target, errors do not
/// add up: what remains is the carry of each task's last slice. Measured
/// on this 2-CPU VM (each run prints it): per-slice |CPU − target| p99
/// 20–50 µs with an RT dispatcher (Fifo and Signals), up to ~6 ms p99
/// for Signals with an unprivileged SCHED_OTHER dispatcher on a busy
/// CPU; shares over whole rounds within 0.05 pp of ideal in every run,
/// busy or not. A 6 ms carry over the ≥ 2 whole rounds (≥ 140 ms of CPU)
/// the test requires is at most 4 pp in theory, but a 6 ms carry only
/// happens when the CPU is contended, and then it spreads over several
/// tasks; over the typical 20+ rounds it is ≤ 0.4 pp. ±1 pp is ~20× the
/// worst deviation measured and still catches any systematic bias (a
/// wall-clock slice under RT throttling shifts shares by whole pp).
const TOLERANCE_PP: f64 = 1.0;

fn assert_shares(report: &DispatchReport, weights: &[u32]) -> Vec<f64> {
    let ideal = ideal_shares(weights);
    let (slices, rounds) = whole_rounds(report, weights.len());
    assert!(rounds >= 2, "only {rounds} whole rounds");
    let shares = shares_of(&slices, weights.len());
    println!(
        "[wrr {}] over {rounds} whole rounds: shares {:?} vs ideal {:?} (pp off: {:?})",
        report.mechanism.name(),
        shares
            .iter()
            .map(|s| format!("{:.3}%", 100.0 * s))
            .collect::<Vec<_>>(),
        ideal
            .iter()
            .map(|s| format!("{:.3}%", 100.0 * s))
            .collect::<Vec<_>>(),
        shares
            .iter()
            .zip(&ideal)
            .map(|(s, i)| format!("{:+.3}", 100.0 * (s - i)))
            .collect::<Vec<_>>()
    );
    for (id, (got, want)) in shares.iter().zip(&ideal).enumerate() {
        assert!(
            (got - want).abs() * 100.0 <= TOLERANCE_PP,
            "task {id}: share {got:.4} vs ideal {want:.4} (±{TOLERANCE_PP} pp); {shares:?}"
        );
    }
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    shares
}

/// Whether the Fifo mechanism can be tested here: the shared rule of
/// `common::require` (fails under SCHEDLAB_REQUIRE_ROOT=1).
fn may_use_fifo() -> bool {
    let check = fifo_check(DEFAULT_BASE_PRIO + 2);
    common::require(
        check.is_ok(),
        format!(
            "the Fifo mechanism: this process may not use SCHED_FIFO: {}",
            check.err().unwrap_or_default()
        ),
    )
}

#[test]
fn fifo_delivers_weighted_shares() {
    if !may_use_fifo() {
        return;
    }
    let _cpu = lock();
    let weights = [1, 2, 4];
    let (report, whole) = dispatch_hogs(Mechanism::Fifo, &weights);
    assert_eq!(report.mechanism, Mechanism::Fifo);
    assert!(report.dispatcher_rt);
    assert_shares(&report, &weights);
    // Fifo: only the raised worker runs, so the children's whole run
    // time splits exactly like the slices' CPU time.
    let slice_shares = report.cpu_shares();
    for (id, w) in whole.iter().enumerate() {
        assert!(
            (w - slice_shares[&id]).abs() * 100.0 <= 0.5,
            "{whole:?} {slice_shares:?}"
        );
    }
    assert!(report.overhead() < 0.02, "{}", report.overhead());
}

#[test]
fn signals_deliver_weighted_shares() {
    let _cpu = lock();
    let weights = [1, 2, 4];
    let (report, _) = dispatch_hogs(Mechanism::Signals, &weights);
    assert_eq!(report.mechanism, Mechanism::Signals);
    assert_shares(&report, &weights);
    assert!(report.overhead() < 0.02, "{}", report.overhead());
}

/// Dropping the dispatcher without `stop` (here mid-run, and once from a
/// panic) leaves no worker stopped or at an RT policy.
#[test]
fn drop_mid_run_restores_every_worker() {
    let _cpu = lock();
    let mut mechanisms = vec![Mechanism::Signals];
    if may_use_fifo() {
        mechanisms.push(Mechanism::Fifo);
    }
    let cpu = test_cpu();
    for mechanism in mechanisms {
        for panic in [false, true] {
            let hogs = Hogs::spawn(3);
            let pids = hogs.pids();
            let policy = weighted_policy(&[1, 2, 4], cpu, 10 * MS);
            let d = Dispatcher::start(policy, pids.clone(), mechanism, DEFAULT_BASE_PRIO).unwrap();
            // Mid-run: some worker is raised or continued, others
            // lowered or stopped.
            std::thread::sleep(Duration::from_millis(155));
            let states: Vec<Option<char>> = pids.iter().map(|&p| os::proc_state(p)).collect();
            if mechanism == Mechanism::Signals {
                assert!(states.contains(&Some('T')), "{states:?}");
            } else {
                assert!(
                    pids.iter()
                        .all(|&p| sched::get_attr(p).unwrap().sched_policy == SCHED_FIFO)
                );
            }
            if panic {
                let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
                    let _owned = d;
                    panic!("test panic while dispatching");
                }));
                assert!(res.is_err());
            } else {
                drop(d);
            }
            for &p in &pids {
                assert_ne!(
                    os::proc_state(p),
                    Some('T'),
                    "{mechanism:?}: pid {p} stopped"
                );
                let attr = sched::get_attr(p).unwrap();
                assert_eq!(attr.sched_policy, SCHED_OTHER, "{mechanism:?}: pid {p}");
            }
            // And they run again: each gets CPU time now.
            let before: Vec<u64> = pids.iter().map(|&p| run_ns(p)).collect();
            std::thread::sleep(Duration::from_millis(100));
            for (&p, b) in pids.iter().zip(before) {
                assert!(run_ns(p) > b, "{mechanism:?}: pid {p} does not run");
            }
            drop(hogs);
        }
    }
}

/// A worker that exits mid-run is noticed at once (its pidfd), recorded
/// as Exited and never dispatched again; the others go on. A worker the
/// caller declares exited while it is still alive is released, not left
/// stopped or at RT priority.
#[test]
fn exited_worker_is_skipped() {
    let _cpu = lock();
    let mechanism = available_mechanism();
    let cpu = test_cpu();
    let mut hogs = Hogs::spawn(3);
    let pids = hogs.pids();
    let policy = weighted_policy(&[1, 2, 4], cpu, 10 * MS);
    let d = Dispatcher::start(policy, pids.clone(), mechanism, DEFAULT_BASE_PRIO).unwrap();
    std::thread::sleep(Duration::from_millis(300));

    // Like the launcher: the worker dies (a stopped or low-priority one
    // only when its turn comes: dying takes CPU), is seen as a zombie,
    // the dispatcher is told, and then it is reaped.
    hogs.children[2].kill().unwrap();
    let killed_at = monotonic_ns();
    let until = killed_at + 2_000 * MS;
    while os::proc_state(pids[2]) != Some('Z') && monotonic_ns() < until {
        std::thread::sleep(Duration::from_millis(1));
    }
    let dead_at = monotonic_ns();
    assert_eq!(
        os::proc_state(pids[2]),
        Some('Z'),
        "killed worker did not die"
    );
    d.task_exited(2);
    hogs.children[2].wait().unwrap();
    std::thread::sleep(Duration::from_millis(200));

    // Released while alive: given back at once.
    let released_at = monotonic_ns();
    d.task_exited(1);
    assert_ne!(os::proc_state(pids[1]), Some('T'));
    assert_eq!(sched::get_attr(pids[1]).unwrap().sched_policy, SCHED_OTHER);
    std::thread::sleep(Duration::from_millis(200));
    let report = d.stop();
    drop(hogs);
    assert!(report.errors.is_empty(), "{:?}", report.errors);

    let last_of_2 = report.slices.iter().rfind(|s| s.task == 2).unwrap();
    assert!(last_of_2.planned_start_ns < dead_at);
    let between: Vec<&SliceRecord> = report
        .slices
        .iter()
        .filter(|s| s.planned_start_ns > dead_at && s.planned_start_ns < released_at)
        .collect();
    assert!(between.iter().all(|s| s.task != 2));
    assert!(between.iter().any(|s| s.task == 0) && between.iter().any(|s| s.task == 1));
    let after: Vec<&SliceRecord> = report
        .slices
        .iter()
        .filter(|s| s.planned_start_ns > released_at)
        .collect();
    assert!(
        !after.is_empty() && after.iter().all(|s| s.task == 0),
        "{after:?}"
    );
    println!(
        "[wrr {}] killed worker died {:.1} ms after SIGKILL; its last slice ended {:?} \
         {:.1} ms after the kill",
        mechanism.name(),
        (dead_at - killed_at) as f64 / 1e6,
        last_of_2.end,
        last_of_2.actual_end_ns.saturating_sub(killed_at) as f64 / 1e6
    );
}

/// A task that sleeps through its turn ends it as Blocked after its
/// wall-clock slice, with no CPU time and no carry-over; the dispatcher
/// does not spin meanwhile and the runnable tasks share as weighted.
#[test]
fn sleeping_task_forfeits_its_turns() {
    let _cpu = lock();
    let mechanism = available_mechanism();
    let cpu = test_cpu();
    let mut hogs = Hogs::spawn(2);
    let sleeper = Command::new("sleep")
        .arg("30")
        .stdin(Stdio::null())
        .spawn()
        .expect("spawning sleep");
    let sleeper_pid = sleeper.id() as i32;
    hogs.children.push(sleeper);
    let policy = weighted_policy(&[1, 2, 3], cpu, 10 * MS);
    let d = Dispatcher::start(policy, hogs.pids(), mechanism, DEFAULT_BASE_PRIO).unwrap();
    std::thread::sleep(Duration::from_millis(700));
    let report = d.stop();
    assert_ne!(os::proc_state(sleeper_pid), Some('T'));
    drop(hogs);
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    let sleeper_slices: Vec<&SliceRecord> = report
        .slices
        .iter()
        .filter(|s| s.task == 2 && s.end != SliceEnd::Stopped)
        .collect();
    assert!(sleeper_slices.len() >= 3, "{sleeper_slices:?}");
    for s in &sleeper_slices {
        assert_eq!(s.end, SliceEnd::Blocked, "{s:?}");
        // The sleeper forfeits its turn; its own start-up (exec of
        // `sleep`, about a millisecond, more on a loaded machine) can
        // fall in its first turn, but never a slice's worth.
        assert!(s.cpu_ns < 5_000_000, "{s:?}");
        // No carry from a blocked slice: the next one aims at the slice.
        assert_eq!(s.target_ns, s.slice_ns, "{s:?}");
        assert!(s.actual_end_ns >= s.planned_end_ns, "{s:?}");
    }
    let shares = report.cpu_shares();
    println!(
        "[wrr {}] with a sleeping task: shares {shares:?}, dispatcher {:.3}% of the CPU",
        mechanism.name(),
        100.0 * report.overhead()
    );
    assert!((shares[&0] - 1.0 / 3.0).abs() < 0.03, "{shares:?}");
    assert!(report.overhead() < 0.02, "{}", report.overhead());
}
