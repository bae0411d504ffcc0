//! End-to-end tests of `--trace` / `trace = true`: a traced run records the
//! kernel's scheduling events of exactly its processes, as many switches
//! per worker as rusage counts; and tracefs is left exactly as found (the
//! top-level tracing files, the instances, the mounts) after a campaign,
//! after Ctrl-C in the middle of one, and after SIGKILL once schedlab
//! starts again.
//!
//! Tracing needs root (tracefs); these tests fail instead of skipping under
//! `SCHEDLAB_REQUIRE_ROOT=1`. They run one at a time (a lock): each looks
//! at the machine-wide tracing state.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

mod common;
use common::{bin, text};
use schedlab::sys::tracefs;
use schedlab::trace::EventKind;

static LOCK: Mutex<()> = Mutex::new(());

/// The top-level files compared before and after.
const FILES: [&str; 7] = [
    "tracing_on",
    "set_event",
    "current_tracer",
    "buffer_size_kb",
    "set_event_pid",
    "tracing_cpumask",
    "trace_clock",
];

fn may_trace() -> bool {
    let euid = schedlab::sys::proc::euid();
    common::require(
        euid == 0,
        format!("tracing needs root (tracefs; euid is {euid})"),
    )
}

/// The test's own view of tracefs: a mount of its own in a temporary
/// directory (tracefs is one file system however often it is mounted), so
/// that looking never changes what schedlab finds at /sys/kernel/tracing.
struct View {
    dir: tempfile::TempDir,
}

impl View {
    fn new() -> View {
        let dir = tempfile::tempdir().unwrap();
        tracefs::mount(dir.path()).expect("mounting tracefs for the test");
        View { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Everything that must be as found: the top-level files, the
    /// instances, and where tracefs is mounted (the test's own mount aside).
    fn state(&self) -> BTreeMap<String, String> {
        let mut s = BTreeMap::new();
        for f in FILES {
            let v = tracefs::read_whole(&self.path().join(f)).unwrap_or_else(|e| format!("{e}"));
            s.insert(f.to_string(), v);
        }
        let mut instances: Vec<String> = std::fs::read_dir(self.path().join("instances"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        instances.sort();
        s.insert("instances/".into(), instances.join(" "));
        let mounts: Vec<String> = tracefs::tracefs_mounts()
            .into_iter()
            .filter(|m| m != self.path())
            .map(|m| m.display().to_string())
            .collect();
        s.insert("mounts".into(), mounts.join(" "));
        s
    }

    /// schedlab's instance, once it exists with tracing on.
    fn wait_for_recording(&self) -> PathBuf {
        let start = Instant::now();
        loop {
            let found = std::fs::read_dir(self.path().join("instances"))
                .unwrap()
                .map(|e| e.unwrap().path())
                .find(|p| {
                    p.file_name()
                        .unwrap()
                        .to_string_lossy()
                        .starts_with("schedlab-")
                        && tracefs::read_whole(&p.join("tracing_on")).is_ok_and(|v| v.trim() == "1")
                });
            if let Some(p) = found {
                return p;
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "schedlab never started recording"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for View {
    fn drop(&mut self) {
        let _ = tracefs::unmount(self.dir.path());
    }
}

fn command(dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(bin());
    // The default journals: their locks keep two schedlabs from tracing
    // (or changing RT settings) at once.
    c.args(args)
        .current_dir(dir)
        .env("CI", "1")
        .env_remove("SCHEDLAB_DB")
        .env_remove("SCHEDLAB_JOURNAL");
    c
}

const TINY: &str = r#"
name = "trace-tiny"
repetitions = 1
cooldown_s = 0
[matrix]
policy = ["other"]
workload = ["pingpong", "pi"]
processes = [2]
cpus = ["0"]
[workloads.pi]
iterations = 30_000_000
[workloads.pingpong]
round_trips = 3000
"#;

/// A traced campaign: per run, events about exactly its processes, no
/// loss, the window and CPUs as run; each worker's switches out of the CPU
/// as counted by the trace over its work (rusage's window: from the start
/// to the end of its work) equal its rusage context switches (voluntary +
/// involuntary) within 2 + 1 %; and tracefs as found.
#[test]
fn a_traced_run_records_its_processes_and_leaves_tracefs_as_found() {
    let _lock = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if !may_trace() {
        return;
    }
    let view = View::new();
    let before = view.state();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("tiny.toml"), TINY).unwrap();
    let o = command(dir.path(), &["run", "tiny.toml", "--db", "t.db", "--trace"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(view.state(), before, "tracefs changed by a traced campaign");

    let store = schedlab::store::Store::open(&dir.path().join("t.db")).unwrap();
    let conn = rusqlite::Connection::open(dir.path().join("t.db")).unwrap();
    let runs: Vec<(i64, String)> = conn
        .prepare("SELECT id, status FROM runs ORDER BY id")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(runs.len(), 2);
    // Of the pingpong run (pi's workers never sleep).
    let mut wakeups = 0;
    for (run_id, status) in runs {
        assert_eq!(status, "ok");
        #[allow(clippy::type_complexity)]
        let procs: Vec<(i32, i64, i64, u64, u64)> = conn
            .prepare("SELECT pid, nvcsw, nivcsw, start_ns, end_ns FROM processes WHERE run_id = ?1")
            .unwrap()
            .query_map([run_id], |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get::<_, i64>(3)? as u64,
                    r.get::<_, i64>(4)? as u64,
                ))
            })
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let pids: HashSet<i32> = procs.iter().map(|p| p.0).collect();
        let cap = store.load_trace(run_id).unwrap();
        assert_eq!(cap.lost_events, 0, "run {run_id}");
        assert_eq!(cap.cpus, vec![0]);
        let tids: HashSet<i32> = cap.tasks.iter().map(|t| t.tid).collect();
        assert_eq!(tids, pids, "run {run_id}: the traced tasks");
        assert!(
            cap.tasks
                .iter()
                .all(|t| !t.comm.is_empty() && t.tgid == t.tid)
        );
        assert!(!cap.events.is_empty());
        let mut seen = HashSet::new();
        for e in &cap.events {
            assert!(schedlab::trace::capture::concerns(e, &pids), "{e:?}");
            assert!(cap.start_ns <= e.ts_ns && e.ts_ns <= cap.end_ns, "{e:?}");
            assert_eq!(e.cpu, 0);
            match e.kind {
                EventKind::Switch {
                    prev_pid, next_pid, ..
                } => {
                    seen.insert(prev_pid);
                    seen.insert(next_pid);
                }
                EventKind::Waking { pid, .. }
                | EventKind::Wakeup { pid, .. }
                | EventKind::Migrate { pid, .. }
                | EventKind::Exit { pid, .. } => {
                    seen.insert(pid);
                }
                EventKind::Fork { .. } => {}
            }
        }
        assert!(cap.events.windows(2).all(|w| w[0].ts_ns <= w[1].ts_ns));
        // The store keeps the slices, wake-ups and repairs as one blob per
        // run (no rows), and its readers give back what the capture derives.
        let d = schedlab::trace::derive::derive(&cap);
        assert!(!d.slices.is_empty(), "run {run_id}");
        wakeups += d.wakeups.len();
        assert_eq!(store.trace_slices(run_id, None).unwrap(), d.slices);
        assert_eq!(store.trace_wakeups(run_id).unwrap(), d.wakeups);
        assert_eq!(store.trace_repairs(run_id, None).unwrap(), d.repairs);
        let (derived, rows): (Option<Vec<u8>>, i64) = conn
            .query_row(
                "SELECT derived, (SELECT count(*) FROM trace_slices WHERE run_id = ?1)
                 FROM trace_captures WHERE run_id = ?1",
                [run_id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert!(
            derived.is_some() && rows == 0,
            "run {run_id}: {rows} slice rows"
        );
        // The last worker's end (the capture starts a few µs before
        // release, so this is at or before it).
        let last_end_ns = cap.start_ns + procs.iter().map(|p| p.4).max().unwrap();
        for &(pid, nvcsw, nivcsw, start_ns, end_ns) in &procs {
            assert!(seen.contains(&pid), "run {run_id}: no event of pid {pid}");
            // Each worker exits at its own priority (nice 0: kernel prio
            // 120), and only once every worker of the run has reported: a
            // run of schedlab's workers alone parks each once measured
            // (`WorkerArgs::park_when_done`).
            let exit = cap
                .events
                .iter()
                .find(|e| matches!(e.kind, EventKind::Exit { pid: p, .. } if p == pid))
                .unwrap_or_else(|| panic!("run {run_id}: pid {pid} has no exit"));
            assert_eq!(
                exit.kind,
                EventKind::Exit { pid, prio: 120 },
                "run {run_id}"
            );
            assert!(
                exit.ts_ns >= last_end_ns,
                "run {run_id}: pid {pid} exited at {} ns, before the last worker's end at {last_end_ns} ns",
                exit.ts_ns
            );
            // rusage counts over the worker's own window (start to end
            // of its work, after release); the capture starts a few µs
            // before release.
            let (from, to) = (cap.start_ns + start_ns, cap.start_ns + end_ns);
            let outs = cap
                .events
                .iter()
                .filter(|e| (from..=to).contains(&e.ts_ns))
                .filter(|e| matches!(e.kind, EventKind::Switch { prev_pid, .. } if prev_pid == pid))
                .count() as i64;
            let rusage = nvcsw + nivcsw;
            assert!(
                (outs - rusage).abs() <= 2 + rusage / 100,
                "run {run_id} pid {pid}: {outs} switches traced, rusage {nvcsw} + {nivcsw}"
            );
        }
    }
    assert!(wakeups > 0, "no wake-ups in the pingpong run");
}

const LONG: &str = r#"
name = "trace-long"
repetitions = 3
cooldown_s = 0
trace = true
[matrix]
policy = ["other"]
workload = ["pi"]
processes = [1]
cpus = ["0"]
[workloads.pi]
duration_s = 2.0
"#;

/// Start a traced campaign, wait until it records, send `sig`.
fn interrupt(dir: &Path, view: &View, sig: i32) -> std::process::ExitStatus {
    std::fs::write(dir.join("long.toml"), LONG).unwrap();
    let mut child = command(dir, &["run", "long.toml", "--db", "t.db"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    view.wait_for_recording();
    schedlab::sys::proc::kill(child.id() as i32, sig);
    child.wait().unwrap()
}

#[test]
fn ctrl_c_during_a_traced_run_leaves_tracefs_as_found() {
    let _lock = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if !may_trace() {
        return;
    }
    let view = View::new();
    let before = view.state();
    let dir = tempfile::tempdir().unwrap();
    let status = interrupt(dir.path(), &view, libc::SIGINT);
    assert_eq!(status.code(), Some(130));
    assert_eq!(view.state(), before, "tracefs changed after Ctrl-C");
}

#[test]
fn after_sigkill_the_next_start_leaves_tracefs_as_found() {
    let _lock = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if !may_trace() {
        return;
    }
    let view = View::new();
    let before = view.state();
    let dir = tempfile::tempdir().unwrap();
    interrupt(dir.path(), &view, libc::SIGKILL);
    // Killed: its instance is left, and the journal that names it.
    assert_ne!(view.state(), before, "expected the instance to be left");
    assert!(schedlab::sys::knobs::trace_journal_path().exists());
    // Any next start removes it, and only it.
    let o = command(dir.path(), &["campaigns", "--db", "t.db"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("tracefs instance schedlab-"),
        "{}",
        text(&o)
    );
    assert_eq!(
        view.state(),
        before,
        "tracefs changed after SIGKILL + restart"
    );
    assert!(!schedlab::sys::knobs::trace_journal_path().exists());
}

/// A campaign makes its instance once and keeps it for every run (making
/// and removing one, with its buffers, cost tens of ms a run): the three
/// runs of `LONG` record in one instance (one inode; a new `mkdir` gets a
/// new one), which is gone, with everything else, once the campaign ends.
#[test]
fn a_campaign_records_its_runs_in_one_instance() {
    use std::os::unix::fs::MetadataExt;
    let _lock = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if !may_trace() {
        return;
    }
    let view = View::new();
    let before = view.state();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("long.toml"), LONG).unwrap();
    let mut child = command(dir.path(), &["run", "long.toml", "--db", "t.db"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (mut inodes, mut recordings, mut was_on) = (HashSet::new(), 0, false);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        let ours = std::fs::read_dir(view.path().join("instances"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| {
                p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with("schedlab-")
            });
        if let Some(p) = ours
            && let Ok(m) = std::fs::metadata(&p)
        {
            inodes.insert(m.ino());
            let on = tracefs::read_whole(&p.join("tracing_on")).is_ok_and(|v| v.trim() == "1");
            recordings += usize::from(on && !was_on);
            was_on = on;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    assert!(status.success());
    // Each run records for 2 s: every start is seen (and a new instance's
    // own `tracing_on = 1` before schedlab turns it off may be too).
    assert!(recordings >= 3, "recordings seen: {recordings}");
    assert_eq!(inodes.len(), 1, "instances made: {inodes:?}");
    assert_eq!(view.state(), before, "tracefs changed by a traced campaign");
}

const RT: &str = r#"
name = "trace-rt"
repetitions = 1
cooldown_s = 0
trace = true
order = "sequential"
[matrix]
policy = ["fifo", "rr"]
workload = ["hash"]
processes = [2]
cpus = ["0"]
[workloads.hash]
duration_s = 0.45
"#;

/// Two FIFO and then two RR workers of one priority on one CPU: the
/// trace shows no FIFO worker taking the CPU from the other while it was
/// still runnable, and RR turns of `sched_rr_timeslice_ms` (within 10 %).
#[test]
fn fifo_runs_to_completion_and_rr_takes_timeslice_turns() {
    let _lock = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if !may_trace() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("rt.toml"), RT).unwrap();
    let o = command(dir.path(), &["run", "rt.toml", "--db", "t.db"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let timeslice_ms: f64 = std::fs::read_to_string("/proc/sys/kernel/sched_rr_timeslice_ms")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let store = schedlab::store::Store::open(&dir.path().join("t.db")).unwrap();
    let conn = rusqlite::Connection::open(dir.path().join("t.db")).unwrap();
    for (run_id, policy) in [(1i64, "fifo"), (2, "rr")] {
        let p: String = conn
            .query_row("SELECT policy FROM runs WHERE id = ?1", [run_id], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(p, policy);
        let cap = store.load_trace(run_id).unwrap();
        assert_eq!(cap.lost_events, 0);
        let pids: HashSet<i32> = cap.tasks.iter().map(|t| t.tid).collect();
        // Hand-overs between the two workers while the one leaving was
        // still runnable (R or R+), with the CPU time it had since its turn
        // began. A turn is CPU time, not wall-clock time: the kernel counts
        // an RR time slice down only while the task runs, and a task taken
        // off by something else (RT throttling once the RT class has used
        // sched_rt_runtime_us of the period: the FIFO run just before
        // takes 0.45 s of it) resumes its slice where it left it. Timed
        // from its switch-in, such a turn showed as 46 ms.
        let mut on_since = std::collections::HashMap::new();
        let mut turn_ns: std::collections::HashMap<i32, u64> = Default::default();
        let mut interrupted = 0;
        let mut turns_ms = Vec::new();
        for e in &cap.events {
            if let EventKind::Switch {
                prev_pid,
                prev_state,
                next_pid,
                ..
            } = e.kind
            {
                let runnable = prev_state == 0 || prev_state == 0x100;
                if pids.contains(&prev_pid) {
                    let since = on_since.get(&prev_pid).copied().unwrap_or(cap.start_ns);
                    let had = turn_ns.entry(prev_pid).or_default();
                    *had += e.ts_ns - since;
                    if runnable && pids.contains(&next_pid) {
                        turns_ms.push(*had as f64 / 1e6);
                        *had = 0;
                    } else if runnable {
                        interrupted += 1;
                    } else {
                        *had = 0;
                    }
                }
                on_since.insert(next_pid, e.ts_ns);
            }
        }
        match policy {
            "fifo" => assert!(turns_ms.is_empty(), "FIFO hand-overs: {turns_ms:?}"),
            _ => {
                // The first turn starts before release; the others are
                // whole time slices.
                let whole = &turns_ms[1.min(turns_ms.len())..];
                assert!(whole.len() >= 2, "RR turns: {turns_ms:?}");
                for t in whole {
                    assert!(
                        (t / timeslice_ms - 1.0).abs() <= 0.1,
                        "RR turn of {t:.1} ms of CPU, sched_rr_timeslice_ms {timeslice_ms} \
                         ({interrupted} turns interrupted by other tasks): {turns_ms:?}"
                    );
                }
            }
        }
    }
}
