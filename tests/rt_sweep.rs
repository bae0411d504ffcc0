//! End-to-end tests of `sched_rt_runtime_us` sweeps through the binary: the
//! settings are back to their originals after a campaign, after Ctrl-C in
//! the middle of one, and after SIGKILL once schedlab starts again; and the
//! RT hog's measured CPU share follows runtime/period.
//!
//! These change a machine-wide setting, so they need root, run one at a
//! time (a lock), keep the RT hog pinned to CPU 0 and short, and check the
//! originals are back whatever happens.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

mod common;
use common::{bin, text};

static LOCK: Mutex<()> = Mutex::new(());

const SYSCTL: &str = "/proc/sys/kernel/sched_rt_runtime_us";
const GROUP: &str = "/sys/fs/cgroup/cpu/cpu.rt_runtime_us";

fn read(path: &str) -> Option<i64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The settings as they were before the test, put back by hand if a test
/// failed half way (so one failure does not leave the machine changed).
struct Originals {
    sysctl: i64,
    group: Option<i64>,
}

impl Originals {
    fn take() -> Originals {
        Originals {
            sysctl: read(SYSCTL).unwrap(),
            group: read(GROUP),
        }
    }

    fn assert_restored(&self) {
        assert_eq!(
            read(SYSCTL),
            Some(self.sysctl),
            "sched_rt_runtime_us not restored"
        );
        assert_eq!(
            read(GROUP),
            self.group,
            "root cpu.rt_runtime_us not restored"
        );
    }
}

impl Drop for Originals {
    fn drop(&mut self) {
        // Raise order: sysctl first, then the group.
        let _ = std::fs::write(SYSCTL, self.sysctl.to_string());
        if let Some(g) = self.group {
            let _ = std::fs::write(GROUP, g.to_string());
        }
    }
}

/// Root may change the setting (the shared rule of `require`); with RT
/// throttling disabled (-1) there is nothing to sweep, and the tests never
/// write -1 back.
fn may_change_knobs() -> bool {
    let euid = schedlab::sys::proc::euid();
    common::require(
        euid == 0,
        format!("changing sched_rt_runtime_us needs root (euid is {euid})"),
    ) && common::skip_unless(
        read(SYSCTL).is_some_and(|v| v > 0),
        format!(
            "RT throttling is disabled (sched_rt_runtime_us is {:?})",
            read(SYSCTL)
        ),
    )
}

fn spec(dir: &Path, values: &str, seconds: f64) {
    std::fs::write(
        dir.join("rt.toml"),
        format!(
            r#"
name = "rt-e2e"
repetitions = 1
order = "sequential"
cooldown_s = 0
timeout_s = 30
[matrix]
policy = ["other"]
workload = ["pi"]
processes = [1]
cpus = ["0"]
rt_runtime_us = {values}
[workloads.pi]
duration_s = {seconds}
[hog]
policy = "fifo"
rt_priority = 10
cpus = "0"
"#
        ),
    )
    .unwrap();
}

fn command(dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(bin());
    // The default journal: its lock is what keeps two schedlabs (this test
    // and a campaign someone runs) from changing the setting at once.
    c.args(args)
        .current_dir(dir)
        .env("CI", "1")
        .env_remove("SCHEDLAB_JOURNAL");
    c
}

#[test]
fn a_sweep_restores_the_settings_and_the_hog_share_follows_the_runtime() {
    let _lock = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if !may_change_knobs() {
        return;
    }
    let orig = Originals::take();
    let dir = tempfile::tempdir().unwrap();
    // Two whole RT periods per run: the hog's share over the window is then
    // runtime/period whatever the phase of the window.
    spec(dir.path(), "[900000, 500000]", 2.0);
    let o = command(dir.path(), &["run", "rt.toml", "--db", "t.db"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    orig.assert_restored();
    assert!(
        !schedlab::sys::knobs::journal_path().exists(),
        "journal removed"
    );
    let conn = rusqlite::Connection::open(dir.path().join("t.db")).unwrap();
    let mut st = conn
        .prepare(
            "SELECT r.rt_runtime_us, p.figures_json FROM runs r JOIN processes p ON p.run_id = r.id
             WHERE p.role = 'hog' ORDER BY r.rt_runtime_us",
        )
        .unwrap();
    let shares: Vec<(i64, f64)> = st
        .query_map([], |r| {
            let figures: serde_json::Value = serde_json::from_str(&r.get::<_, String>(1)?).unwrap();
            Ok((r.get::<_, i64>(0)?, figures["cpu_share"].as_f64().unwrap()))
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(shares.len(), 2);
    // The share is measured over whole RT periods after a one-period
    // warm-up. Tolerance 0.06: kernel threads and the fair-class server of
    // the noisy VM take a little from the hog.
    for (runtime, share) in &shares {
        let expect = *runtime as f64 / 1e6;
        assert!(
            (share - expect).abs() < 0.06,
            "runtime {runtime}: hog share {share:.3}, expected {expect}"
        );
    }
}

/// Start a sweep over `values` in `dir`, wait until one run is stored (the
/// setting is changed by then), send `sig`, and return the exit status.
fn interrupt_sweep(dir: &Path, values: &str, sig: i32) -> std::process::ExitStatus {
    spec(dir, values, 0.5);
    let mut child = command(dir, &["run", "rt.toml", "--db", "t.db"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_runs(dir, 1);
    schedlab::sys::proc::kill(child.id() as i32, sig);
    child.wait().unwrap()
}

fn wait_for_runs(dir: &Path, at_least: i64) {
    let start = Instant::now();
    loop {
        let n = rusqlite::Connection::open(dir.join("t.db"))
            .and_then(|c| c.query_row("SELECT COUNT(*) FROM runs", [], |r| r.get::<_, i64>(0)))
            .unwrap_or(0);
        if n >= at_least {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "campaign made no progress"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn ctrl_c_half_way_restores_the_settings() {
    let _lock = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if !may_change_knobs() {
        return;
    }
    let orig = Originals::take();
    let dir = tempfile::tempdir().unwrap();
    let status = interrupt_sweep(dir.path(), "[800000, 600000, 400000]", libc::SIGINT);
    assert_eq!(status.code(), Some(130));
    orig.assert_restored();
}

#[test]
fn after_sigkill_the_next_start_restores_the_settings() {
    let _lock = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if !may_change_knobs() {
        return;
    }
    let orig = Originals::take();
    let dir = tempfile::tempdir().unwrap();
    interrupt_sweep(dir.path(), "[700000, 600000, 500000]", libc::SIGKILL);
    // Killed: nothing could put the setting back, the journal is left.
    assert_ne!(
        read(SYSCTL),
        Some(orig.sysctl),
        "expected the setting to be left changed"
    );
    assert!(
        schedlab::sys::knobs::journal_path().exists(),
        "journal left behind"
    );
    // The next start of schedlab, whatever the command, restores it.
    let o = command(dir.path(), &["campaigns", "--db", "t.db"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("warning: restored sched_rt_runtime_us"),
        "{}",
        text(&o)
    );
    orig.assert_restored();
    assert!(!schedlab::sys::knobs::journal_path().exists());
}
