//! End-to-end tests of the schedlab binary on tiny specs with real worker
//! processes under real policies. Real-time work is kept short, pinned to
//! CPU 0 and under a timeout.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{bin, schedlab, text};

/// Tests whose figures depend on having CPU 0 to themselves (kernel facts,
/// WRR shares) take this lock so they do not run at the same time.
static CPU0: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn cpu0() -> std::sync::MutexGuard<'static, ()> {
    CPU0.lock().unwrap_or_else(|e| e.into_inner())
}

fn write_spec(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    p
}

fn db(dir: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open(dir.join("t.db")).unwrap()
}

fn count(conn: &rusqlite::Connection, sql: &str) -> i64 {
    conn.query_row(sql, [], |r| r.get(0)).unwrap()
}

#[test]
fn campaign_of_three_policies_lands_in_the_database() {
    if !common::may_use_rt() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    write_spec(
        dir.path(),
        "s.toml",
        r#"
name = "e2e"
repetitions = 1
cooldown_s = 0
timeout_s = 30
[matrix]
policy = ["other", "fifo", "rr"]
workload = ["pi", "copy"]
processes = [2]
cpus = ["0"]
[workloads.pi]
iterations = 2_000_000
[workloads.copy]
bytes = 65_536
"#,
    );
    let o = schedlab(&["run", "s.toml", "--db", "t.db"], dir.path());
    assert!(o.status.success(), "{}", text(&o));
    let conn = db(dir.path());
    assert_eq!(
        count(&conn, "SELECT COUNT(*) FROM runs WHERE status = 'ok'"),
        6
    );
    assert_eq!(
        count(&conn, "SELECT COUNT(*) FROM processes WHERE ok = 1"),
        12
    );
    assert_eq!(
        count(&conn, "SELECT COUNT(DISTINCT policy) FROM processes"),
        3
    );
    // Every process reported its work and its scheduler statistics.
    assert_eq!(
        count(
            &conn,
            "SELECT COUNT(*) FROM processes WHERE work IS NULL OR run_ns IS NULL"
        ),
        0
    );
    assert_eq!(
        count(
            &conn,
            "SELECT COUNT(*) FROM processes WHERE policy = 'fifo' AND rt_priority = 50"
        ),
        4
    );

    let o = schedlab(&["export", "--db", "t.db", "--format", "csv"], dir.path());
    assert!(o.status.success(), "{}", text(&o));
    let csv = String::from_utf8(o.stdout).unwrap();
    assert_eq!(csv.lines().count(), 13, "header + 12 process rows");
    let header = csv.lines().next().unwrap();
    for col in [
        "campaign",
        "run",
        "policy",
        "workload",
        "processes",
        "priority_mode",
        "cpus",
        "rep",
        "process_index",
        "nice",
        "rt_priority",
        "wall_ns",
        "utime_us",
        "stime_us",
        "nvcsw",
        "nivcsw",
        "run_ns",
        "wait_ns",
        "timeslices",
        "work",
        "status",
    ] {
        assert!(header.split(',').any(|c| c == col), "missing column {col}");
    }
    let o = schedlab(&["export", "--db", "t.db", "--format", "json"], dir.path());
    let rows: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(rows.as_array().unwrap().len(), 12);

    // Running the same spec again finds nothing left to do.
    let o = schedlab(&["run", "s.toml", "--db", "t.db"], dir.path());
    assert!(o.status.success());
    assert!(text(&o).contains("0 to run"), "{}", text(&o));
    assert_eq!(count(&db(dir.path()), "SELECT COUNT(*) FROM runs"), 6);
}

#[test]
fn fifo_runs_pinned_workers_one_after_the_other_while_other_shares_the_cpu() {
    let _cpu0 = cpu0();
    if !common::may_use_rt() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // A common window of 0.4 s from release (a duration ends at release +
    // duration for every worker): long enough for many fair slices (HZ=250),
    // short enough to be safe under FIFO, and the same in debug and release
    // builds. How much of it each OTHER worker gets depends on what else is
    // runnable on CPU 0 (the figures below are taken relative to that).
    write_spec(
        dir.path(),
        "k.toml",
        r#"
name = "kernel-fact"
repetitions = 1
order = "sequential"
cooldown_s = 0
timeout_s = 20
[matrix]
policy = ["fifo", "other"]
workload = ["pi"]
processes = [2]
cpus = ["0"]
[workloads.pi]
duration_s = 0.4
"#,
    );
    let o = schedlab(&["run", "k.toml", "--db", "t.db"], dir.path());
    assert!(o.status.success(), "{}", text(&o));
    let conn = db(dir.path());
    let rows = |policy: &str| -> Vec<Worker> {
        let mut st = conn
            .prepare(
                "SELECT p.nivcsw, p.nvcsw, p.start_ns, p.end_ns, p.run_ns, p.slice_ns
                 FROM processes p JOIN runs r ON r.id = p.run_id
                 WHERE r.policy = ?1 ORDER BY p.start_ns",
            )
            .unwrap();
        st.query_map([policy], |r| {
            Ok(Worker {
                nivcsw: r.get(0)?,
                nvcsw: r.get(1)?,
                start_ns: r.get(2)?,
                end_ns: r.get(3)?,
                run_ns: r.get(4)?,
                slice_ns: r.get(5)?,
            })
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
    };
    let fifo = rows("fifo");
    let other = rows("other");
    assert_eq!(fifo.len(), 2);
    assert_eq!(other.len(), 2);
    // FIFO: no involuntary switches (a noisy VM may preempt once or twice
    // for kernel threads of higher priority), and the second worker starts
    // its work only when the first has finished.
    for w in &fifo {
        assert!(
            w.nivcsw <= 5,
            "FIFO worker was preempted {} times: {fifo:?}",
            w.nivcsw
        );
    }
    let (first_end, second_start) = (fifo[0].end_ns, fifo[1].start_ns);
    assert!(
        second_start >= first_end - 5_000_000,
        "FIFO workers overlapped: first ended at {first_end} ns, second started at {second_start} ns"
    );

    // OTHER. start_ns and end_ns are offsets from the release, and both
    // windows end at release + 0.4 s whatever happens: they do not say how
    // much CPU a worker had. That is whatever the other runnable tasks on
    // CPU 0 leave (beside four CPU hogs, about 65 ms each: 17 switches), so
    // the figures below are taken relative to the CPU each worker got.
    let hz: Option<i64> = conn
        .query_row("SELECT hz FROM environments", [], |r| r.get(0))
        .unwrap();
    // HZ from the kernel's configuration; the coarsest common HZ when it is
    // unreadable (a longer tick only loosens the bounds below).
    let tick_ns = 1_000_000_000 / hz.unwrap_or(100);
    // A fair task's turn while another is runnable: it is preempted at the
    // first tick after its slice is used, so a turn lasts at most its slice
    // + a tick; rounding the slice up to a whole tick leaves room for a late
    // tick on this VM (the trace of a loaded run shows turns of 4.0 ms at
    // HZ=250 and a 1.4 ms slice; the bound is 8 ms). The slice is the one
    // the kernel granted (before Linux 6.12: its base slice, 0.75 ms ×
    // (1 + log2 CPUs), at most 3 ms).
    let turn_ns = |w: &Worker| {
        let slice_ns = w.slice_ns.unwrap_or(3_000_000);
        (slice_ns + tick_ns - 1) / tick_ns * tick_ns + tick_ns
    };
    let (a, b) = (&other[0], &other[1]);
    // The second started before the first ended (FIFO's contrast above).
    assert!(
        b.start_ns < a.end_ns,
        "OTHER workers ran one after the other: {other:?}"
    );
    // One close of the barrier wakes both: equal weights, both runnable
    // from the release until the first of them ends. EEVDF keeps each
    // task's lag (CPU owed or ahead) within about a turn, so over that time
    // their CPU times differ by at most two turns; after it, the one left
    // may have had the CPU alone (at most the gap between their ends). Run
    // one after the other, they would differ by the first one's whole time.
    let tail_ns = (a.end_ns - b.end_ns).abs();
    let lag_ns = turn_ns(a) + turn_ns(b);
    assert!(
        (a.run_ns - b.run_ns).abs() <= lag_ns + tail_ns,
        "OTHER workers did not share the CPU equally: their CPU times differ by {:.1} ms, \
         more than two turns ({:.1} ms) + the gap between their ends ({:.1} ms): {other:?}",
        (a.run_ns - b.run_ns).abs() as f64 / 1e6,
        lag_ns as f64 / 1e6,
        tail_ns as f64 / 1e6,
    );
    // Each was switched out after every turn it had while its sibling was
    // runnable (other programs' tasks only add switches): at least one
    // switch per turn of CPU but the last, leaving out what it may have had
    // alone after the other ended. Not interleaved, one of them would run
    // its whole time without a switch.
    for w in &other {
        let shared_ns = (w.run_ns - tail_ns).max(0);
        let at_least = (shared_ns + turn_ns(w) - 1) / turn_ns(w) - 1;
        assert!(
            w.nivcsw + w.nvcsw >= at_least,
            "OTHER worker was switched only {} times in {:.1} ms of CPU: at least {at_least} \
             expected (one per {:.1} ms turn): {other:?}",
            w.nivcsw + w.nvcsw,
            w.run_ns as f64 / 1e6,
            turn_ns(w) as f64 / 1e6,
        );
    }
}

/// One worker's figures, as the kernel-fact test reads them.
#[derive(Debug)]
struct Worker {
    nivcsw: i64,
    nvcsw: i64,
    start_ns: i64,
    end_ns: i64,
    run_ns: i64,
    slice_ns: Option<i64>,
}

fn tiny_pinned_spec(dir: &Path, runs_iterations: u64) -> PathBuf {
    write_spec(
        dir,
        "r.toml",
        &format!(
            r#"
name = "resume"
repetitions = 4
seed = 7
cooldown_s = 0.05
timeout_s = 30
[matrix]
policy = ["other", "batch"]
workload = ["pi"]
processes = [2]
cpus = ["0"]
[workloads.pi]
iterations = {runs_iterations}
"#
        ),
    )
}

/// Start a campaign, wait until `at_least` runs are stored, then send `sig`.
fn interrupt_after(dir: &Path, at_least: i64, sig: i32) -> std::process::ExitStatus {
    let mut child = Command::new(bin())
        .args(["run", "r.toml", "--db", "t.db"])
        .current_dir(dir)
        .env("CI", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    loop {
        std::thread::sleep(Duration::from_millis(20));
        let stored = if dir.join("t.db").exists() {
            rusqlite::Connection::open(dir.join("t.db"))
                .and_then(|c| c.query_row("SELECT COUNT(*) FROM runs", [], |r| r.get::<_, i64>(0)))
                .unwrap_or(0)
        } else {
            0
        };
        if stored >= at_least {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "campaign made no progress"
        );
    }
    schedlab::sys::proc::kill(child.id() as i32, sig);
    child.wait().unwrap()
}

fn stored_runs(dir: &Path) -> Vec<(i64, String, i64)> {
    let conn = db(dir);
    let mut st = conn
        .prepare("SELECT id, run_key, started_unix_ms FROM runs ORDER BY id")
        .unwrap();
    st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

#[test]
fn killed_campaign_resumes_without_losing_or_repeating_runs() {
    let dir = tempfile::tempdir().unwrap();
    tiny_pinned_spec(dir.path(), 60_000_000);
    let status = interrupt_after(dir.path(), 2, libc::SIGKILL);
    assert!(!status.success());
    let before = stored_runs(dir.path());
    assert!(
        before.len() >= 2 && before.len() < 8,
        "stored {} runs before the kill",
        before.len()
    );
    // No worker outlives a killed schedlab (PR_SET_PDEATHSIG).
    std::thread::sleep(Duration::from_millis(200));
    let o = schedlab(&["run", "r.toml", "--db", "t.db"], dir.path());
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("resuming campaign 1"), "{}", text(&o));
    let after = stored_runs(dir.path());
    assert_eq!(after.len(), 8, "every run exactly once");
    // What was stored before the kill is still there, unchanged.
    for row in &before {
        assert!(after.contains(row), "run {row:?} was lost or repeated");
    }
    let mut keys: Vec<_> = after.iter().map(|r| r.1.clone()).collect();
    keys.dedup();
    assert_eq!(keys.len(), 8);
}

#[test]
fn ctrl_c_stops_cleanly_and_the_campaign_resumes() {
    let dir = tempfile::tempdir().unwrap();
    tiny_pinned_spec(dir.path(), 60_000_000);
    let status = interrupt_after(dir.path(), 1, libc::SIGINT);
    assert_eq!(status.code(), Some(130), "exit code after SIGINT");
    let before = stored_runs(dir.path());
    assert!(!before.is_empty() && before.len() < 8);
    // The run directory of the interrupted run was removed.
    let o = schedlab(&["run", "r.toml", "--db", "t.db"], dir.path());
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(stored_runs(dir.path()).len(), 8);
}

#[test]
fn invalid_specs_name_the_key_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "[matrix]\npolicy = [\"fifo\", \"wfq\"]\n",
            "matrix.policy",
            "allowed: other, batch, idle, fifo, rr, deadline, wrr",
        ),
        (
            "[matrix]\nprocesses = [0]\n",
            "matrix.processes",
            "between 1 and",
        ),
        (
            "[matrix]\nworkload = [\"spin\"]\n",
            "matrix.workload",
            "unknown workload \"spin\"",
        ),
        (
            "[priorities.u]\nmode = \"uniform\"\nnice = 25\n",
            "priorities.u.nice",
            "out of range -20..19",
        ),
        (
            "[priorities.s]\nmode = \"spread\"\nrt_priority = [0, 99]\n",
            "priorities.s.rt_priority",
            "out of range 1..99",
        ),
        (
            "[deadline]\nruntime_us = 20000\ndeadline_us = 10000\nperiod_us = 10000\n",
            "deadline.runtime_us",
            "runtime ≤ deadline ≤ period",
        ),
        (
            "[workloads.pi]\nbytes = 5\n",
            "workloads.pi.bytes",
            "not a parameter of a pi workload",
        ),
        ("repetitons = 3\n", "repetitons", "unknown field"),
        ("[matrix]\ncpus = [\"0-x\"]\n", "matrix.cpus", "CPU list"),
        (
            "[matrix]\ncpus = [\"63\"]\n",
            "matrix.cpus",
            "CPU 63 is not available",
        ),
        (
            "[priorities.w]\nmode = \"weights\"\nweight = [0, 2]\n",
            "priorities.w.weight",
            "0 is out of range 1..1000",
        ),
        (
            "[priorities.w]\nmode = \"weights\"\nweight = [-3]\n",
            "priorities.w.weight",
            "-3 is out of range 1..1000",
        ),
        (
            "[priorities.w]\nmode = \"weights\"\nweight = [\"heavy\"]\n",
            "weight = [\"heavy\"]",
            "invalid type: string \"heavy\"",
        ),
        (
            "[wrr]\nquantum_ms = 0\n",
            "wrr.quantum_ms",
            "between 0.1 and 10000 ms",
        ),
        (
            "[hog]\ncpus = \"0-1\"\n",
            "hog.cpus",
            "refused without --force",
        ),
    ];
    for (body, key, message) in cases {
        write_spec(dir.path(), "bad.toml", body);
        let o = schedlab(&["run", "bad.toml", "--db", "t.db"], dir.path());
        let out = text(&o);
        assert_eq!(o.status.code(), Some(2), "{body}: {out}");
        assert!(
            out.contains(key) && out.contains(message),
            "{body}: expected {key} / {message} in: {out}"
        );
        assert!(!out.contains("panicked"), "{out}");
    }
    // Overrides are validated like the file.
    let o = schedlab(
        &[
            "plan",
            "--preset",
            "policies",
            "--set",
            "matrix.processes=[2,-1]",
        ],
        dir.path(),
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("matrix.processes"), "{}", text(&o));
    let o = schedlab(&["run", "--preset", "nope"], dir.path());
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o).contains("available: quick, policies, priorities"),
        "{}",
        text(&o)
    );
    let o = schedlab(&["run", "missing.toml"], dir.path());
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o).contains("cannot read spec missing.toml"),
        "{}",
        text(&o)
    );
    assert!(
        !dir.path().join("t.db").exists(),
        "nothing is created for an invalid spec"
    );
}

#[test]
fn a_crashing_worker_is_recorded_as_failed_and_the_campaign_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    write_spec(
        dir.path(),
        "c.toml",
        "name = \"crash\"\nrepetitions = 2\ncooldown_s = 0\n[matrix]\nprocesses = [3]\ncpus = [\"0\"]\n\
         [workloads.pi]\niterations = 1_000_000\n",
    );
    let o = Command::new(bin())
        .args(["run", "c.toml", "--db", "t.db"])
        .current_dir(dir.path())
        .env("CI", "1")
        .env(schedlab::worker::FAULT_ENV, "abort-worker:1")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3), "failed runs: {}", text(&o));
    let conn = db(dir.path());
    assert_eq!(
        count(&conn, "SELECT COUNT(*) FROM runs WHERE status = 'failed'"),
        2,
        "both runs ran"
    );
    let reason: String = conn
        .query_row("SELECT reason FROM runs LIMIT 1", [], |r| r.get(0))
        .unwrap();
    assert!(
        reason.contains("worker 1") && reason.contains("SIGABRT"),
        "{reason}"
    );
    let (ok, tail): (i64, String) = conn
        .query_row(
            "SELECT ok, stderr_tail FROM processes WHERE process_index = 1 LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(ok, 0);
    assert!(tail.contains("fault injection"), "{tail}");
    assert_eq!(
        count(&conn, "SELECT COUNT(*) FROM processes WHERE ok = 1"),
        4,
        "the other workers finished"
    );
}

#[test]
fn a_run_over_its_timeout_is_killed_and_recorded() {
    let dir = tempfile::tempdir().unwrap();
    write_spec(
        dir.path(),
        "t.toml",
        "name = \"slow\"\nrepetitions = 1\ntimeout_s = 0.3\n[matrix]\nprocesses = [2]\ncpus = [\"0\"]\n\
         [workloads.pi]\nduration_s = 30\n",
    );
    let start = Instant::now();
    let o = schedlab(&["run", "t.toml", "--db", "t.db"], dir.path());
    assert_eq!(o.status.code(), Some(3), "a timed-out run: {}", text(&o));
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "the timeout was not enforced"
    );
    let conn = db(dir.path());
    let (status, reason): (String, String) = conn
        .query_row("SELECT status, reason FROM runs", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!(status, "timed_out");
    assert!(reason.contains("timeout_s = 0.3"), "{reason}");
    assert_eq!(
        count(
            &conn,
            "SELECT COUNT(*) FROM processes WHERE exit LIKE '%SIGKILL%'"
        ),
        2
    );
}

#[test]
fn plan_and_presets_describe_the_campaign_without_running_it() {
    let dir = tempfile::tempdir().unwrap();
    let o = schedlab(&["preset", "list"], dir.path());
    assert!(text(&o).contains("policies") && text(&o).contains("priorities"));
    let o = schedlab(&["preset", "show", "policies"], dir.path());
    let toml_text = String::from_utf8(o.stdout).unwrap();
    assert!(schedlab::spec::load(&toml_text, "shown", &[]).is_ok());
    let o = schedlab(
        &["plan", "--preset", "policies", "--scale", "0.01"],
        dir.path(),
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("runs         270"), "{}", text(&o));
    let o = schedlab(
        &[
            "plan",
            "--preset",
            "priorities",
            "--set",
            "repetitions=1",
            "--list",
        ],
        dir.path(),
    );
    assert!(text(&o).contains("runs         54"), "{}", text(&o));
    // The programs' presets: 3 policies × 4 workloads × 3 repetitions.
    for name in ["benchmarks", "homework"] {
        let o = schedlab(&["preset", "show", name], dir.path());
        let toml_text = String::from_utf8(o.stdout).unwrap();
        assert!(schedlab::spec::load(&toml_text, "shown", &[]).is_ok());
        let o = schedlab(&["plan", "--preset", name], dir.path());
        if o.status.success() {
            assert!(text(&o).contains("runs         36"), "{}", text(&o));
        } else {
            // Refused only for a missing tool, naming how to install it.
            assert!(text(&o).contains("apt-get install"), "{}", text(&o));
        }
    }
    assert!(
        !dir.path().join("schedlab.db").exists(),
        "plan does not create a database"
    );
}

#[test]
fn env_reports_the_machine() {
    let dir = tempfile::tempdir().unwrap();
    let o = schedlab(&["env", "--json"], dir.path());
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["env"]["cpus_online"].as_u64().unwrap() >= 1);
    assert_eq!(v["privileges"]["policies"].as_array().unwrap().len(), 6);
}

#[test]
fn a_policy_the_user_may_not_set_is_skipped_with_how_to_get_it() {
    // Needs root to drop to an unprivileged user (as a normal user the
    // skip path is what every RT run takes anyway), and `nobody` must be
    // able to run the binary (a checkout under a private directory would
    // prevent it).
    if !common::root_with_setpriv() || !common::nobody_can_run(bin()) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    write_spec(
        dir.path(),
        "u.toml",
        "name = \"unprivileged\"\nrepetitions = 1\ncooldown_s = 0\n[matrix]\npolicy = [\"other\", \"fifo\"]\n\
         processes = [2]\ncpus = [\"0\"]\n[workloads.pi]\niterations = 1_000_000\n",
    );
    let o = Command::new(common::setpriv().unwrap())
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
        ])
        .arg(bin())
        .args(["run", "u.toml", "--db", "t.db"])
        .current_dir(dir.path())
        .env("CI", "1")
        .env("TMPDIR", dir.path())
        .env("SCHEDLAB_JOURNAL", dir.path().join("journal.json"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let conn = db(dir.path());
    let (status, reason): (String, String) = conn
        .query_row(
            "SELECT status, reason FROM runs WHERE policy = 'fifo'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(status, "skipped");
    assert!(
        reason.contains("CAP_SYS_NICE") && reason.contains("RLIMIT_RTPRIO"),
        "{reason}"
    );
    let other: String = conn
        .query_row("SELECT status FROM runs WHERE policy = 'other'", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(other, "ok", "the rest of the campaign runs");
}

fn wrr_spec(dir: &Path, mechanism: &str, seconds: f64) -> PathBuf {
    write_spec(
        dir,
        "w.toml",
        &format!(
            r#"
name = "wrr-e2e"
repetitions = 1
cooldown_s = 0
timeout_s = 30
[matrix]
policy = ["wrr"]
workload = ["hash"]
processes = [3]
priorities = ["w"]
cpus = ["0"]
[priorities.w]
mode = "weights"
weight = [1, 2, 4]
[workloads.hash]
duration_s = {seconds}
[wrr]
quantum_ms = 10
mechanism = "{mechanism}"
"#
        ),
    )
}

/// Shares of work of the three workers of the single run in the database.
fn work_shares(dir: &Path) -> Vec<f64> {
    let conn = db(dir);
    let mut st = conn
        .prepare("SELECT work FROM processes WHERE role = 'worker' ORDER BY process_index")
        .unwrap();
    let work: Vec<f64> = st
        .query_map([], |r| r.get::<_, i64>(0))
        .unwrap()
        .map(|w| w.unwrap() as f64)
        .collect();
    let total: f64 = work.iter().sum();
    work.iter().map(|w| w / total).collect()
}

#[test]
fn wrr_delivers_cpu_in_proportion_to_the_weights() {
    let _cpu0 = cpu0();
    // The workers' slices are CPU time (10 ms × weight, a round of 70 ms),
    // and the 3 s are wall-clock time: under "signals" the workers are fair
    // tasks, so beside other programs on CPU 0 they get less than 3 s of CPU
    // and fewer rounds (two CPU hogs on the machine: about 1 s, 14 rounds).
    // What is checked is relative to the CPU they got.
    let weights = [1, 2, 4];
    let round_ns = 10_000_000 * weights.iter().sum::<i64>();
    for mechanism in ["fifo", "signals"] {
        if mechanism == "fifo" && !common::may_use_rt() {
            continue;
        }
        let dir = tempfile::tempdir().unwrap();
        wrr_spec(dir.path(), mechanism, 3.0);
        let o = schedlab(&["run", "w.toml", "--db", "t.db"], dir.path());
        assert!(o.status.success(), "{}", text(&o));
        let conn = db(dir.path());
        // Each worker's CPU time and the slices the dispatcher recorded.
        let got: Vec<(i64, i64)> = conn
            .prepare(
                "SELECT p.run_ns, (SELECT COUNT(*) FROM slices s
                                   WHERE s.run_id = p.run_id AND s.process_index = p.process_index)
                 FROM processes p WHERE p.role = 'worker' ORDER BY p.process_index",
            )
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(got.len(), 3);
        let cpu_ns: i64 = got.iter().map(|g| g.0).sum();
        // Tolerance: the last, partial round alone can shift a share by up
        // to a round over the CPU they had (70 ms / 3 s ≈ 2.3 points on a
        // free CPU), and the noisy VM adds timer lateness of well under a
        // millisecond per slice (0.7 points).
        let tolerance = round_ns as f64 / cpu_ns as f64 + 0.007;
        let shares = work_shares(dir.path());
        let ideal = [1.0 / 7.0, 2.0 / 7.0, 4.0 / 7.0];
        for (s, i) in shares.iter().zip(ideal) {
            assert!(
                (s - i).abs() < tolerance,
                "{mechanism}: shares {shares:?} vs ideal {ideal:?} (±{:.1} points over {:.0} ms of CPU)",
                tolerance * 100.0,
                cpu_ns as f64 / 1e6,
            );
        }
        // A slice gives its worker 10 ms × weight of CPU, what it got beyond
        // or short of that carried into its next one: the CPU each had came
        // in at least that many slices, but for the carry of the last one.
        for ((&(run_ns, slices), w), i) in got.iter().zip(weights).zip(0..) {
            let at_least = run_ns / (10_000_000 * w) - 1;
            assert!(
                slices >= at_least,
                "{mechanism}: worker {i} (weight {w}) had {:.0} ms of CPU in only {slices} \
                 slices recorded, at least {at_least} expected",
                run_ns as f64 / 1e6,
            );
        }
        let extra: String = conn
            .query_row("SELECT extra_json FROM runs", [], |r| r.get(0))
            .unwrap();
        assert!(
            extra.contains(&format!("\"mechanism\":\"{mechanism}\"")),
            "{extra}"
        );
    }
}

/// Worker processes of schedlab still alive (found by their command line),
/// with their state letter from /proc/PID/stat.
fn leftover_workers(dir: &Path) -> Vec<(i32, char)> {
    let needle = dir.to_string_lossy().into_owned();
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let cmd = String::from_utf8_lossy(&cmd);
        if cmd.contains("__worker") && cmd.contains(&needle) {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let state = stat
                .rsplit(") ")
                .next()
                .and_then(|r| r.chars().next())
                .unwrap_or('?');
            out.push((pid, state));
        }
    }
    out
}

#[test]
fn an_interrupted_wrr_run_leaves_no_worker_stopped_or_real_time() {
    let _cpu0 = cpu0();
    for (mechanism, sig) in [
        ("signals", libc::SIGKILL),
        ("signals", libc::SIGINT),
        ("fifo", libc::SIGKILL),
    ] {
        if mechanism == "fifo" && !common::may_use_rt() {
            continue;
        }
        let dir = tempfile::tempdir().unwrap();
        wrr_spec(dir.path(), mechanism, 20.0);
        let mut child = Command::new(bin())
            .args(["run", "w.toml", "--db", "t.db"])
            .current_dir(dir.path())
            .env("CI", "1")
            .env("TMPDIR", dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Wait until the workers are being dispatched.
        let start = Instant::now();
        while leftover_workers(dir.path()).len() < 3 {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "workers never appeared"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(300));
        schedlab::sys::proc::kill(child.id() as i32, sig);
        child.wait().unwrap();
        let start = Instant::now();
        loop {
            let left = leftover_workers(dir.path());
            if left.is_empty() {
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(5),
                "{mechanism}/{sig}: workers left behind (pid, state): {left:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        if sig == libc::SIGINT {
            assert_eq!(
                count(&db(dir.path()), "SELECT COUNT(*) FROM runs"),
                0,
                "the interrupted run is not stored"
            );
        }
    }
}

#[test]
fn a_run_stores_other_programs_activity_and_each_process_weight() {
    let dir = tempfile::tempdir().unwrap();
    // Two OTHER workers standing for weights 1 and 3 (through nice), 1.2 s
    // on CPU 0: long enough for /proc/stat's ticks to give shares.
    write_spec(
        dir.path(),
        "s.toml",
        r#"
name = "interference"
repetitions = 1
cooldown_s = 0
timeout_s = 30
[matrix]
policy = ["other"]
workload = ["pi"]
processes = [2]
priorities = ["w"]
cpus = ["0"]
[priorities.w]
mode = "weights"
weight = [1, 3]
[workloads.pi]
duration_s = 1.2
"#,
    );
    let o = schedlab(&["run", "s.toml", "--db", "t.db"], dir.path());
    assert!(o.status.success(), "{}", text(&o));
    let conn = db(dir.path());
    let (status, others, steal, other_cpu): (String, Option<i64>, Option<f64>, Option<f64>) = conn
        .query_row(
            "SELECT status, others_runnable, steal_pct, other_cpu_pct FROM runs",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .unwrap();
    assert_eq!(status, "ok");
    // Stored (a count, so never negative), and exported as stored below.
    let others = others.expect("runnable tasks of other programs at start");
    for (name, pct) in [("steal_pct", steal), ("other_cpu_pct", other_cpu)] {
        let pct = pct.unwrap_or_else(|| panic!("{name} not stored"));
        assert!((0.0..=100.0).contains(&pct), "{name} = {pct}");
    }
    let weights: Vec<(Option<i64>, Option<i64>)> = conn
        .prepare("SELECT weight, nice FROM processes ORDER BY process_index")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    assert_eq!(weights.len(), 2);
    assert_eq!((weights[0].0, weights[1].0), (Some(1), Some(3)));
    assert!(
        weights[0].1 > weights[1].1,
        "heavier weight, lower nice: {weights:?}"
    );

    let o = schedlab(&["export", "--db", "t.db", "--format", "csv"], dir.path());
    assert!(o.status.success(), "{}", text(&o));
    let csv = String::from_utf8(o.stdout).unwrap();
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let row: Vec<&str> = csv.lines().nth(1).unwrap().split(',').collect();
    let col = |name: &str| row[header.iter().position(|h| *h == name).unwrap()];
    assert_eq!(col("others_runnable"), others.to_string());
    assert_eq!(col("weight"), "1");
    assert!(col("fig_iter_per_s").parse::<f64>().unwrap() > 0.0);
}
