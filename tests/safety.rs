//! What schedlab must never do, tried end to end with the real binary: delete
//! what it did not make, switch RT throttling off, let `plan` accept what
//! `run` refuses, or let one run's input preparation escape its time limit
//! or take the campaign down.

mod common;
use common::{bin, schedlab, text};

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn write_spec(dir: &Path, body: &str) -> PathBuf {
    let p = dir.join("s.toml");
    std::fs::write(&p, body).unwrap();
    p
}

fn tiny_spec(workdir: &Path, workload: &str) -> String {
    format!(
        r#"
name = "safety"
repetitions = 1
cooldown_s = 0
timeout_s = 30
workdir = "{}"
[matrix]
policy = ["other"]
workload = ["w"]
processes = [2]
[workloads.w]
{workload}
"#,
        workdir.display()
    )
}

fn rt_runtime_us() -> String {
    std::fs::read_to_string("/proc/sys/kernel/sched_rt_runtime_us")
        .unwrap()
        .trim()
        .to_string()
}

#[test]
fn directories_named_like_schedlab_s_but_not_made_by_it_survive_a_run() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("x");
    std::fs::create_dir(&work).unwrap();
    let precious = work.join("schedlab-2024-results");
    std::fs::create_dir(&precious).unwrap();
    std::fs::write(precious.join("important.txt"), "keep me").unwrap();
    // Named exactly like a run directory of a dead process.
    let lookalike = work.join("schedlab-4000000-abcdef");
    std::fs::create_dir(&lookalike).unwrap();
    write_spec(
        dir.path(),
        &tiny_spec(&work, "kind = \"copy\"\nbytes = 65536"),
    );
    let out = schedlab(&["run", "s.toml", "--db", "t.db"], dir.path());
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        std::fs::read_to_string(precious.join("important.txt")).unwrap(),
        "keep me"
    );
    assert!(lookalike.is_dir());
}

/// Directories in `work` that carry schedlab's marker.
fn owned_dirs(work: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(work)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.join(".schedlab-owned").is_file())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_killed_schedlab_s_run_directory_is_removed_by_the_next_start() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("w");
    std::fs::create_dir(&work).unwrap();
    write_spec(
        dir.path(),
        &tiny_spec(&work, "kind = \"copy\"\nduration_s = 20"),
    );
    let mut child = Command::new(bin())
        .args(["run", "s.toml", "--db", "t.db", "--quiet"])
        .current_dir(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    let leftover = loop {
        if let Some(d) = owned_dirs(&work).into_iter().next() {
            break d;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "no run directory appeared"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert!(leftover.is_dir(), "SIGKILL leaves the directory behind");
    // Its workers die with schedlab (PR_SET_PDEATHSIG); give them a moment.
    std::thread::sleep(Duration::from_millis(300));
    write_spec(
        dir.path(),
        &tiny_spec(&work, "kind = \"pi\"\niterations = 1000"),
    );
    let out = schedlab(&["run", "s.toml", "--db", "t2.db"], dir.path());
    assert!(out.status.success(), "{}", text(&out));
    assert!(!leftover.exists(), "{} is still there", leftover.display());
    assert!(text(&out).contains("left by a schedlab that was killed"));
}

#[test]
fn rt_throttling_off_is_refused_by_plan_and_run_for_any_spec() {
    let dir = tempfile::tempdir().unwrap();
    let before = rt_runtime_us();
    write_spec(
        dir.path(),
        r#"
repetitions = 1
[matrix]
policy = ["other"]
workload = ["pi"]
processes = [1]
rt_runtime_us = [-1]
[workloads.pi]
iterations = 1000
"#,
    );
    for cmd in ["plan", "run"] {
        let out = schedlab(&[cmd, "s.toml", "--db", "t.db"], dir.path());
        assert_eq!(out.status.code(), Some(2), "{cmd}: {}", text(&out));
        assert!(
            text(&out).contains("matrix.rt_runtime_us") && text(&out).contains("--force"),
            "{cmd}: {}",
            text(&out)
        );
    }
    assert_eq!(rt_runtime_us(), before);
    assert!(!dir.path().join("t.db").exists());
}

#[test]
fn plan_refuses_an_rt_hog_on_every_cpu_as_run_does() {
    let dir = tempfile::tempdir().unwrap();
    write_spec(
        dir.path(),
        r#"
repetitions = 1
[matrix]
policy = ["other"]
workload = ["pi"]
processes = [1]
[workloads.pi]
iterations = 1000
[hog]
cpus = "all"
"#,
    );
    let out = schedlab(&["plan", "s.toml"], dir.path());
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("hog.cpus"), "{}", text(&out));
    let forced = schedlab(&["plan", "s.toml", "--force"], dir.path());
    assert!(forced.status.success(), "{}", text(&forced));
}

#[test]
fn a_work_directory_that_is_a_file_is_refused_at_plan_and_run() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("not-a-dir");
    std::fs::write(&file, "x").unwrap();
    write_spec(
        dir.path(),
        &tiny_spec(&file, "kind = \"pi\"\niterations = 1000"),
    );
    for cmd in ["plan", "run"] {
        let out = schedlab(&[cmd, "s.toml", "--db", "t.db"], dir.path());
        assert_eq!(out.status.code(), Some(2), "{cmd}: {}", text(&out));
        assert!(
            text(&out).contains("workdir") && text(&out).contains("not a directory"),
            "{cmd}: {}",
            text(&out)
        );
    }
}

#[test]
fn a_missing_work_directory_is_refused_and_never_made() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("x/y/z");
    write_spec(
        dir.path(),
        &tiny_spec(&missing, "kind = \"pi\"\niterations = 1000"),
    );
    for cmd in ["plan", "run"] {
        let out = schedlab(&[cmd, "s.toml", "--db", "t.db"], dir.path());
        assert_eq!(out.status.code(), Some(2), "{cmd}: {}", text(&out));
        assert!(
            text(&out).contains("workdir") && text(&out).contains("does not exist"),
            "{cmd}: {}",
            text(&out)
        );
        assert!(!dir.path().join("x").exists(), "{cmd} made the directory");
    }
}

#[test]
fn a_relative_work_directory_lies_beside_the_spec_not_the_current_directory() {
    let dir = tempfile::tempdir().unwrap();
    let specs = dir.path().join("specs");
    std::fs::create_dir_all(specs.join("work")).unwrap();
    let body = tiny_spec(Path::new("work"), "kind = \"copy\"\nbytes = 65536");
    std::fs::write(specs.join("s.toml"), body).unwrap();
    // From the parent directory, where no `work` exists: the spec's own
    // directory holds it, so the run goes ahead there.
    let out = schedlab(&["run", "specs/s.toml", "--db", "t.db"], dir.path());
    assert!(out.status.success(), "{}", text(&out));
    assert!(!dir.path().join("work").exists());
}

#[test]
fn a_copy_larger_than_the_disk_is_refused_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    write_spec(
        dir.path(),
        &tiny_spec(dir.path(), "kind = \"copy\"\nbytes = 9223372036854775807"),
    );
    for cmd in ["plan", "run"] {
        let out = schedlab(&[cmd, "s.toml", "--db", "t.db"], dir.path());
        assert_eq!(out.status.code(), Some(2), "{cmd}: {}", text(&out));
        assert!(
            text(&out).contains("workloads.w.bytes") && text(&out).contains("free"),
            "{cmd}: {}",
            text(&out)
        );
    }
}

#[test]
fn preparing_an_input_is_under_the_run_s_timeout_and_fails_only_that_run() {
    let dir = tempfile::tempdir().unwrap();
    // 4 GB to write before the run may start, with 0.5 s allowed.
    write_spec(
        dir.path(),
        &format!(
            r#"
name = "prep"
repetitions = 1
cooldown_s = 0
timeout_s = 0.5
order = "sequential"
workdir = "{}"
[matrix]
policy = ["other"]
workload = ["big", "small"]
processes = [1]
[workloads.big]
kind = "copy"
bytes = 4_000_000_000
[workloads.small]
kind = "pi"
iterations = 1000
"#,
            dir.path().display()
        ),
    );
    let t0 = Instant::now();
    let out = schedlab(&["run", "s.toml", "--db", "t.db"], dir.path());
    let took = t0.elapsed();
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(took < Duration::from_secs(15), "took {took:?}");
    let conn = rusqlite::Connection::open(dir.path().join("t.db")).unwrap();
    let rows: Vec<(String, String, String)> = conn
        .prepare("SELECT workload, status, reason FROM runs ORDER BY workload")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(rows[0].0, "big");
    assert_eq!(rows[0].1, "timed_out", "{rows:?}");
    assert!(rows[0].2.contains("preparing"), "{rows:?}");
    assert_eq!(rows[1], ("small".into(), "ok".into(), String::new()));
    // Nothing of the big input is left behind.
    assert!(owned_dirs(dir.path()).is_empty());
}
