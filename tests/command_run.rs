//! Any program as a workload, end to end with real processes (issue 19):
//! the tree's CPU time against `perf stat`, a double-forked daemon and a
//! program that ignores SIGTERM stopped at `duration_s` (nothing of them
//! left), a failing exit code and a missing figure named, 100 MiB of
//! output kept to its tail, and a schedlab killed mid-run whose program's
//! tree the next start kills.

mod common;
use common::{bin, root_for_commands, schedlab_isolated, serial, text};

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A spec of one OTHER worker running `argv` (TOML array text), `extra`
/// workload keys, `reps` repetitions.
fn spec(dir: &Path, argv: &str, extra: &str, reps: u32) {
    std::fs::write(
        dir.join("s.toml"),
        format!(
            "name = \"cmd\"\nrepetitions = {reps}\ncooldown_s = 0\ntimeout_s = 30\n[matrix]\n\
             policy = [\"other\"]\nworkload = [\"w\"]\nprocesses = [1]\ncpus = [\"0\"]\n\
             [workloads.w]\nkind = \"command\"\nargv = {argv}\n{extra}\n"
        ),
    )
    .unwrap();
}

fn rows(dir: &Path) -> Vec<serde_json::Value> {
    let o = schedlab_isolated(&["export", "--db", "t.db", "--format", "json"], dir);
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    match v {
        serde_json::Value::Array(a) => a,
        other => other["rows"].as_array().cloned().unwrap_or_default(),
    }
}

fn extra(dir: &Path) -> serde_json::Value {
    let c = rusqlite::Connection::open(dir.join("t.db")).unwrap();
    let s: String = c
        .query_row("SELECT extra_json FROM runs ORDER BY id LIMIT 1", [], |r| {
            r.get(0)
        })
        .unwrap();
    serde_json::from_str(&s).unwrap()
}

/// Processes whose command line contains `marker`.
fn survivors(marker: &str) -> Vec<i32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmd).contains(marker) {
            out.push(pid);
        }
    }
    out
}

const FORK3: &str = r#"["sh", "-c", "for i in 1 2 3; do (i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done) & done; wait"]"#;

#[test]
fn a_forking_program_s_tree_cpu_matches_perf_stat() {
    let _one_at_a_time = serial();
    let perf = Command::new("perf")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !root_for_commands()
        || !schedlab::testing::require_tool(perf, "perf is missing (apt-get install linux-perf)")
    {
        return;
    }
    // perf observes the very execution schedlab measures: the workload is
    // `perf stat -e task-clock -- sh -c FORK3`, so both observers count one
    // tree. (Two separate executions of the same shell loop read 861 ms and
    // 1,401 ms in a row on this shared VM, and once left the least of five
    // 9 % apart.) schedlab's tree holds perf's own CPU too: about 10 ms.
    let dir = tempfile::tempdir().unwrap();
    let mut argv: Vec<String> = ["perf", "stat", "-x,", "-e", "task-clock", "-o"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    argv.push(dir.path().join("perf.csv").display().to_string());
    argv.push("--".into());
    argv.extend(serde_json::from_str::<Vec<String>>(FORK3).unwrap());
    spec(dir.path(), &serde_json::to_string(&argv).unwrap(), "", 1);
    let o = schedlab_isolated(&["run", "s.toml", "--db", "t.db", "--quiet"], dir.path());
    assert!(o.status.success(), "{}", text(&o));
    let r = &rows(dir.path())[0];
    // perf, sh and its three loops.
    assert_eq!(r["fig_tree_tasks"].as_f64(), Some(5.0), "{r}");
    let tree_ms = (r["utime_us"].as_f64().unwrap() + r["stime_us"].as_f64().unwrap()) / 1e3;
    let perf_ms = task_clock_ms(&std::fs::read_to_string(dir.path().join("perf.csv")).unwrap());
    let extra_ms = tree_ms - perf_ms;
    assert!(
        extra_ms > -0.02 * perf_ms && extra_ms < 0.03 * perf_ms + 30.0,
        "tree {tree_ms:.1} ms vs perf task-clock {perf_ms:.1} ms of the same execution"
    );
}

/// The task-clock of `perf stat -x,` output, ms.
fn task_clock_ms(out: &str) -> f64 {
    out.lines()
        .find(|l| l.contains("task-clock"))
        .and_then(|l| l.split(',').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no task-clock in {out}"))
}

#[test]
fn a_double_forked_daemon_is_stopped_at_the_duration_and_nothing_is_left() {
    let _one_at_a_time = serial();
    if !root_for_commands() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let marker = "31.4159";
    let argv = format!(r#"["sh", "-c", "(setsid sh -c 'sleep {marker}' &) ; sleep {marker}"]"#);
    spec(dir.path(), &argv, "duration_s = 0.5\ngrace_s = 1", 1);
    let o = schedlab_isolated(&["run", "s.toml", "--db", "t.db", "--quiet"], dir.path());
    assert!(o.status.success(), "{}", text(&o));
    let r = &rows(dir.path())[0];
    assert_eq!(r["status"], "ok", "{r}");
    let wall = r["wall_ns"].as_f64().unwrap() / 1e9;
    assert!((0.45..3.0).contains(&wall), "wall {wall} s");
    assert_eq!(extra(dir.path())["command"][0]["stopped_by_schedlab"], true);
    assert!(
        survivors(marker).is_empty(),
        "left: {:?}",
        survivors(marker)
    );
}

#[test]
fn a_program_ignoring_sigterm_is_killed_after_the_grace() {
    let _one_at_a_time = serial();
    if !root_for_commands() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let argv = r#"["sh", "-c", "trap '' TERM; sleep 27.18; sleep 27.18"]"#;
    spec(dir.path(), argv, "duration_s = 0.3\ngrace_s = 0.7", 1);
    let o = schedlab_isolated(&["run", "s.toml", "--db", "t.db", "--quiet"], dir.path());
    assert!(o.status.success(), "{}", text(&o));
    let r = &rows(dir.path())[0];
    let wall = r["wall_ns"].as_f64().unwrap() / 1e9;
    assert!(
        (0.95..5.0).contains(&wall),
        "killed after the grace: wall {wall} s"
    );
    assert!(survivors("27.18").is_empty());
}

#[test]
fn a_bad_exit_and_a_missing_figure_fail_the_run_naming_why() {
    let _one_at_a_time = serial();
    if !root_for_commands() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    spec(
        dir.path(),
        r#"["sh", "-c", "echo oops >&2; exit 3"]"#,
        "",
        1,
    );
    let o = schedlab_isolated(&["run", "s.toml", "--db", "t.db"], dir.path());
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(text(&o).contains("exit code 3"), "{}", text(&o));
    let dir = tempfile::tempdir().unwrap();
    let figure = "[workloads.w.figures.elapsed]\nregex = 'Time: ([0-9.]+)'\nunit = \"s\"\nbetter = \"lower\"";
    spec(
        dir.path(),
        r#"["sh", "-c", "echo no time here"]"#,
        figure,
        1,
    );
    let o = schedlab_isolated(&["run", "s.toml", "--db", "t.db"], dir.path());
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(text(&o).contains("figure `elapsed`"), "{}", text(&o));
    assert!(
        rows(dir.path())[0]
            .get("fig_elapsed")
            .is_none_or(|v| v.is_null())
    );
}

#[test]
fn a_hundred_mebibytes_of_output_keep_only_their_tail() {
    let _one_at_a_time = serial();
    if !root_for_commands() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let argv =
        r#"["sh", "-c", "head -c 104857600 /dev/zero | tr '\\000' x; echo; echo 'Time: 2.5'"]"#;
    let figure =
        "[workloads.w.figures.t]\nregex = 'Time: ([0-9.]+)'\nunit = \"s\"\nbetter = \"lower\"";
    spec(dir.path(), argv, figure, 1);
    let o = schedlab_isolated(&["run", "s.toml", "--db", "t.db", "--quiet"], dir.path());
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(rows(dir.path())[0]["fig_t"].as_f64(), Some(2.5));
    let dropped = extra(dir.path())["command"][0]["stdout_dropped_bytes"]
        .as_u64()
        .unwrap();
    assert!(dropped > (100 << 20) - (64 << 10) - 1, "{dropped}");
    let size = std::fs::metadata(dir.path().join("t.db")).unwrap().len();
    assert!(
        size < 20 << 20,
        "the database holds the output: {size} bytes"
    );
}

/// The pids of `schedlab __watchdog` processes whose parent is `parent`.
fn watchdogs_of(parent: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        let ppid = stat
            .rsplit(')')
            .next()
            .and_then(|rest| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        let is_watchdog = cmdline.split(|&b| b == 0).any(|a| a == b"__watchdog");
        if is_watchdog && ppid == Some(parent) {
            out.push(pid);
        }
    }
    out
}

#[test]
fn a_killed_schedlab_s_program_tree_is_killed_by_the_next_start() {
    let _one_at_a_time = serial();
    if !root_for_commands() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let marker = "41.42";
    let argv = format!(r#"["sh", "-c", "(setsid sh -c 'sleep {marker}' &) ; sleep {marker}"]"#);
    spec(dir.path(), &argv, "", 1);
    let mut child = Command::new(bin())
        .args(["run", "s.toml", "--db", "t.db", "--quiet"])
        .current_dir(dir.path())
        .env("SCHEDLAB_JOURNAL", dir.path().join("journal.json"))
        .env("TMPDIR", dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while survivors(marker).len() < 2 && t0.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(survivors(marker).len() >= 2, "the program never started");
    // The watchdog would release the tree as soon as schedlab dies
    // (tests/killsafe.rs): killed first, as a machine's crash or an OOM kill
    // of both would, it leaves the tree to the next start, tested here.
    let watchdogs = watchdogs_of(child.id());
    assert!(!watchdogs.is_empty(), "no watchdog beside schedlab");
    for pid in watchdogs {
        let _ = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(!survivors(marker).is_empty(), "nothing was left to recover");
    let o = schedlab_isolated(&["env"], dir.path());
    assert!(o.status.success(), "{}", text(&o));
    let t0 = Instant::now();
    while !survivors(marker).is_empty() && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        survivors(marker).is_empty(),
        "left: {:?}",
        survivors(marker)
    );
}
