//! How results and stderr travel from workers to schedlab (pipes, no
//! files): a result or a stderr beyond a pipe's capacity, a worker that dies
//! while writing its result, many workers at once, and no run directory for
//! a workload that works on no file.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{bin, text};

fn spec(dir: &Path, processes: u32, workload: &str) {
    std::fs::write(
        dir.join("s.toml"),
        format!(
            "name = \"launch\"\nrepetitions = 1\ncooldown_s = 0\ntimeout_s = 60\n\
             workdir = \"{}\"\n[matrix]\nprocesses = [{processes}]\ncpus = [\"0\"]\n\
             workload = [\"w\"]\n[workloads.w]\n{workload}\n",
            dir.join("work").display()
        ),
    )
    .unwrap();
    std::fs::create_dir_all(dir.join("work")).unwrap();
}

fn run_with_fault(dir: &Path, fault: Option<&str>) -> Output {
    let mut cmd = Command::new(bin());
    cmd.args(["run", "s.toml", "--db", "t.db"])
        .current_dir(dir)
        .env("CI", "1")
        .env_remove("SCHEDLAB_DB");
    match fault {
        Some(f) => cmd.env(schedlab::worker::FAULT_ENV, f),
        None => cmd.env_remove(schedlab::worker::FAULT_ENV),
    };
    cmd.output().unwrap()
}

fn db(dir: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open(dir.join("t.db")).unwrap()
}

fn count(dir: &Path, sql: &str) -> i64 {
    db(dir).query_row(sql, [], |r| r.get(0)).unwrap()
}

#[test]
fn a_result_and_a_stderr_beyond_a_pipe_s_capacity_arrive_whole() {
    for fault in ["big-result:1", "chatty:1"] {
        let dir = tempfile::tempdir().unwrap();
        spec(dir.path(), 3, "kind = \"pi\"\niterations = 100_000");
        let o = run_with_fault(dir.path(), Some(fault));
        assert!(o.status.success(), "{fault}: {}", text(&o));
        assert_eq!(
            count(
                dir.path(),
                "SELECT COUNT(*) FROM processes WHERE ok = 1 AND work = 100000"
            ),
            3,
            "{fault}"
        );
    }
}

#[test]
fn a_worker_dying_while_writing_its_result_is_failed_with_its_stderr() {
    let dir = tempfile::tempdir().unwrap();
    spec(dir.path(), 3, "kind = \"pi\"\niterations = 100_000");
    let o = run_with_fault(dir.path(), Some("cut-result:2"));
    assert_eq!(o.status.code(), Some(3), "a failed run: {}", text(&o));
    let (ok, exit, tail, work): (i64, String, String, Option<i64>) = db(dir.path())
        .query_row(
            "SELECT ok, exit, stderr_tail, work FROM processes WHERE process_index = 2",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .unwrap();
    assert_eq!(ok, 0);
    assert!(exit.contains("SIGABRT"), "{exit}");
    assert!(tail.contains("aborts while writing its result"), "{tail}");
    assert_eq!(work, None, "half a result is no result");
    let reason: String = db(dir.path())
        .query_row("SELECT reason FROM runs", [], |r| r.get(0))
        .unwrap();
    assert!(reason.contains("worker 2"), "{reason}");
    assert_eq!(
        count(dir.path(), "SELECT COUNT(*) FROM processes WHERE ok = 1"),
        2,
        "the other workers' results are theirs"
    );
}

#[test]
fn many_workers_each_report_their_own_result() {
    let dir = tempfile::tempdir().unwrap();
    // Every process index reports, once, a whole result of its own.
    spec(dir.path(), 150, "kind = \"pi\"\niterations = 1000");
    let o = run_with_fault(dir.path(), None);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        count(
            dir.path(),
            "SELECT COUNT(DISTINCT process_index) FROM processes WHERE ok = 1 AND work = 1000"
        ),
        150
    );
}

/// Entries of the work directory (run directories and anything else).
fn entries(work: &Path) -> Vec<String> {
    std::fs::read_dir(work)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

/// Whether a worker whose command line names `work` is running.
fn workers_running(work: &Path) -> bool {
    let needle = work.to_string_lossy().into_owned();
    std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        std::fs::read(e.path().join("cmdline")).is_ok_and(|c| {
            let c = String::from_utf8_lossy(&c);
            c.contains("__worker") && c.contains(&needle)
        })
    })
}

#[test]
fn a_workload_without_files_gets_no_run_directory() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    spec(dir.path(), 2, "kind = \"pi\"\nduration_s = 1.5");
    let mut child = Command::new(bin())
        .args(["run", "s.toml", "--db", "t.db", "--quiet"])
        .current_dir(dir.path())
        .env_remove("SCHEDLAB_DB")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while !workers_running(&work) {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "no worker appeared"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // The workers run (pi for 1.5 s): nothing in the work directory.
    assert_eq!(entries(&work), Vec::<String>::new());
    assert!(child.wait().unwrap().success());
    assert_eq!(
        count(dir.path(), "SELECT COUNT(*) FROM processes WHERE ok = 1"),
        2
    );
    // A workload on files still gets its directory (and its input).
    spec(dir.path(), 2, "kind = \"copy\"\nduration_s = 1.5");
    let mut child = Command::new(bin())
        .args(["run", "s.toml", "--db", "t2.db", "--quiet"])
        .current_dir(dir.path())
        .env_remove("SCHEDLAB_DB")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while !workers_running(&work) {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "no worker appeared"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let dirs = entries(&work);
    assert!(
        dirs.iter().any(|d| d.starts_with("schedlab-")),
        "no run directory: {dirs:?}"
    );
    assert!(child.wait().unwrap().success());
    assert_eq!(entries(&work), Vec::<String>::new(), "removed at the end");
}
