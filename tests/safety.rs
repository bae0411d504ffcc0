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

/// A command's `cwd` that is missing or a file: plan refuses it naming the
/// key and the path (not as a missing program, which the exec's failed
/// chdir reported before), run skips its runs saying the same, and
/// neither makes it.
#[test]
fn a_command_s_missing_cwd_is_refused_naming_it_and_never_made() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("file"), "x").unwrap();
    for (cwd, says) in [
        ("gone/deeper", "does not exist"),
        ("file", "is not a directory"),
    ] {
        let cwd = dir.path().join(cwd);
        let workload = format!(
            "kind = \"command\"\nargv = [\"true\"]\ncwd = \"{}\"",
            cwd.display()
        );
        write_spec(dir.path(), &tiny_spec(dir.path(), &workload));
        let out = schedlab(&["plan", "s.toml"], dir.path());
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        let shown = format!("workloads.w.cwd: {} {says}", cwd.display());
        assert!(text(&out).contains(&shown), "{}", text(&out));
        if schedlab::sys::proc::euid() == 0 {
            let out = schedlab(&["run", "s.toml", "--db", "t.db"], dir.path());
            assert!(text(&out).contains(&shown), "{}", text(&out));
            let _ = std::fs::remove_file(dir.path().join("t.db"));
        }
        assert!(
            !dir.path().join("gone").exists(),
            "schedlab made the directory"
        );
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

// ------------------------------------- outputs (issue 22): never destroy ---

/// A database with a synthetic campaign and one traced run (a few thousand
/// scheduling events), in `dir/name`: (database, traced run id).
fn output_db(dir: &Path, name: &str) -> (PathBuf, i64) {
    use schedlab::trace::{Capture, Event, EventKind, Task};
    let db = dir.join(name);
    let mut store = schedlab::store::Store::open(&db).unwrap();
    schedlab::testing::synth::create(&mut store, &schedlab::testing::synth::SynthConfig::small())
        .unwrap();
    let run: i64 = rusqlite::Connection::open(&db)
        .unwrap()
        .query_row("SELECT min(id) FROM runs WHERE status = 'ok'", [], |r| {
            r.get(0)
        })
        .unwrap();
    let events: Vec<Event> = (0..3000_u64)
        .map(|i| {
            let (prev, next) = if i % 2 == 0 { (101, 102) } else { (102, 101) };
            Event {
                ts_ns: 1_000_000 + i * 10_000,
                cpu: 0,
                common_pid: prev,
                kind: EventKind::Switch {
                    prev_pid: prev,
                    prev_prio: 120,
                    prev_state: 0x100,
                    next_pid: next,
                    next_prio: 120,
                },
            }
        })
        .collect();
    let task = |tid: i32| Task {
        tid,
        tgid: tid,
        comm: format!("pi-{tid}"),
    };
    let capture = Capture {
        start_ns: 999_000,
        end_ns: 1_000_000 + 3000 * 10_000,
        events,
        tasks: vec![task(101), task(102)],
        cpus: vec![0],
        release_ns: None,
        lost_events: 0,
    };
    store
        .save_trace(run, &schedlab::trace::Analysed::new(&capture, &[]))
        .unwrap();
    (db, run)
}

/// Every command that writes an `-o`, writing to `o`: (what, arguments).
/// `cand` is a second database with a campaign of the same spec.
fn output_commands(db: &Path, run: i64, cand: &Path, o: &Path) -> Vec<(String, Vec<String>)> {
    let (db, cand, o) = (
        db.display().to_string(),
        cand.display().to_string(),
        o.display().to_string(),
    );
    let run = run.to_string();
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let mut all = vec![
        (
            "trace export perfetto".to_string(),
            s(&["trace", "export", "--db", &db, "--run", &run, "-o", &o]),
        ),
        (
            "trace export json".to_string(),
            s(&[
                "trace", "export", "--db", &db, "--run", &run, "--format", "json", "-o", &o,
            ]),
        ),
    ];
    for f in ["csv", "json", "parquet"] {
        all.push((
            format!("export {f}"),
            s(&["export", "--db", &db, "--format", f, "-o", &o]),
        ));
    }
    for f in ["md", "html", "json"] {
        all.push((
            format!("report {f}"),
            s(&[
                "report",
                "--db",
                &db,
                "--format",
                f,
                "--resamples",
                "100",
                "-o",
                &o,
            ]),
        ));
    }
    all.push((
        "compare md".to_string(),
        s(&[
            "compare",
            "--db",
            &db,
            "--vs",
            &cand,
            "--format",
            "md",
            "--resamples",
            "100",
            "-o",
            &o,
        ]),
    ));
    all
}

fn run_in(dir: &Path, args: &[String]) -> std::process::Output {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    schedlab(&args, dir)
}

/// The names in `dir`, but for the files SQLite keeps beside a database
/// (a reader of a WAL database makes them).
fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.ends_with(".db-wal") && !n.ends_with(".db-shm"))
        .collect();
    v.sort();
    v
}

/// Character devices of the test's own, `null` (1,3) and `full` (1,7) in
/// `dir`: the same devices as /dev/null and /dev/full, so that a schedlab
/// that replaced one would break nothing but the test (root).
fn own_devices(dir: &Path) -> Option<(PathBuf, PathBuf)> {
    let make = |name: &str, minor: &str| {
        let p = dir.join(name);
        let ok = schedlab::sys::proc::euid() == 0
            && Command::new("mknod")
                .arg(&p)
                .args(["c", "1", minor])
                .status()
                .is_ok_and(|s| s.success());
        ok.then_some(p)
    };
    Some((make("null", "3")?, make("full", "7")?))
}

#[test]
fn a_character_device_output_is_written_through_and_stays_a_device() {
    use std::os::unix::fs::FileTypeExt;
    let dir = tempfile::tempdir().unwrap();
    let devices = own_devices(dir.path());
    if !common::require(
        devices.is_some(),
        "cannot make character devices with mknod (needs root)",
    ) {
        return;
    }
    let (null, full) = devices.unwrap();
    let (db, run) = output_db(dir.path(), "a.db");
    let (cand, _) = output_db(dir.path(), "b.db");
    let is_device = |p: &Path| {
        std::fs::symlink_metadata(p)
            .unwrap()
            .file_type()
            .is_char_device()
    };
    for (what, args) in output_commands(&db, run, &cand, &null) {
        let out = run_in(dir.path(), &args);
        assert!(out.status.success(), "{what}: {}", text(&out));
        assert!(is_device(&null), "{what} replaced the device");
    }
    // A device every write to fails (ENOSPC): the error says where.
    for (what, args) in output_commands(&db, run, &cand, &full) {
        let out = run_in(dir.path(), &args);
        assert!(!out.status.success(), "{what}: {}", text(&out));
        assert!(
            text(&out).contains(&format!("cannot write -o {}", full.display()))
                && text(&out).contains("No space left"),
            "{what}: {}",
            text(&out)
        );
        assert!(is_device(&full), "{what} replaced the device");
    }
}

#[test]
fn a_fifo_output_is_written_through_to_its_reader() {
    use std::os::unix::fs::FileTypeExt;
    let dir = tempfile::tempdir().unwrap();
    let (db, run) = output_db(dir.path(), "a.db");
    let fifo = dir.path().join("pipe");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let args = &output_commands(&db, run, &db, &fifo)[1].1;
    // The reader, bounded: a FIFO replaced by a file never gets a writer.
    let reader = Command::new("timeout")
        .args(["20", "cat"])
        .arg(&fifo)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // Drained as it comes: a full pipe would stall the reader and the writer.
    let reader = std::thread::spawn(move || reader.wait_with_output().unwrap());
    let out = run_in(dir.path(), args);
    assert!(out.status.success(), "{}", text(&out));
    let read = reader.join().unwrap();
    assert!(read.status.success(), "the FIFO never had a writer");
    let v: serde_json::Value = serde_json::from_slice(&read.stdout).expect("the trace as JSON");
    assert!(v["traceEvents"].as_array().unwrap().len() > 1000);
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
}

#[test]
fn the_files_of_a_database_are_refused_as_outputs_and_the_database_survives() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let (db, run) = output_db(dir.path(), "a.db");
    let (cand, _) = output_db(dir.path(), "b.db");
    // As while a campaign writes it: a connection holds its WAL open.
    let writer = rusqlite::Connection::open(&db).unwrap();
    writer
        .execute_batch("PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0;")
        .unwrap();
    writer
        .execute("UPDATE campaigns SET name = name || ' (live)'", [])
        .unwrap();
    let wal = dir.path().join("a.db-wal");
    assert!(std::fs::metadata(&wal).unwrap().len() > 0);
    let runs_before: i64 = writer
        .query_row("SELECT count(*) FROM runs", [], |r| r.get(0))
        .unwrap();
    for suffix in ["-wal", "-shm", "-journal", "-runner.lock"] {
        let side = dir.path().join(format!("a.db{suffix}"));
        let existed = side.exists();
        let inode = || std::fs::metadata(&side).ok().map(|m| m.ino());
        let before = (inode(), std::fs::read(&side).ok());
        for (what, args) in output_commands(&db, run, &cand, &side) {
            let out = run_in(dir.path(), &args);
            assert!(!out.status.success(), "{what} -o a.db{suffix} was accepted");
            let t = text(&out);
            assert!(
                t.contains(&format!("cannot write -o {}", side.display()))
                    && t.contains("of database"),
                "{what}: {t}"
            );
            assert_eq!(side.exists(), existed, "{what} -o a.db{suffix}");
            assert!(inode() == before.0, "{what} replaced a.db{suffix}");
            // The shared-memory index changes under any reader; the others
            // only under a writer.
            if suffix != "-shm" {
                assert!(
                    std::fs::read(&side).ok() == before.1,
                    "{what} wrote a.db{suffix}"
                );
            }
        }
    }
    drop(writer);
    let conn = rusqlite::Connection::open(&db).unwrap();
    let ok: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(ok, "ok");
    let runs: i64 = conn
        .query_row("SELECT count(*) FROM runs", [], |r| r.get(0))
        .unwrap();
    assert_eq!(runs, runs_before);
    let name: String = conn
        .query_row("SELECT name FROM campaigns", [], |r| r.get(0))
        .unwrap();
    assert!(name.ends_with("(live)"), "{name}");
}

#[test]
fn dash_is_standard_output_for_every_output() {
    let dir = tempfile::tempdir().unwrap();
    let (db, run) = output_db(dir.path(), "a.db");
    let (cand, _) = output_db(dir.path(), "b.db");
    let before = listing(dir.path());
    for (what, args) in output_commands(&db, run, &cand, Path::new("-")) {
        let out = run_in(dir.path(), &args);
        assert!(out.status.success(), "{what}: {}", text(&out));
        assert!(
            out.stdout.len() > 1000,
            "{what}: {} bytes",
            out.stdout.len()
        );
        assert_eq!(listing(dir.path()), before, "{what} wrote a file");
        if what.ends_with("json") {
            let _: serde_json::Value = serde_json::from_slice(&out.stdout)
                .unwrap_or_else(|e| panic!("{what}: not JSON: {e}"));
        }
        if what == "export parquet" {
            assert_eq!(&out.stdout[..4], b"PAR1");
        }
    }
}

/// A small tmpfs, unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: &Path, size: &str) -> Option<Tmpfs> {
        std::fs::create_dir_all(at).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "none"])
            .arg(at)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Tmpfs(at.to_path_buf()))
    }

    /// Fill it, then free `free_bytes`.
    fn fill_leaving(&self, free_bytes: u64) -> PathBuf {
        use std::io::Write;
        let filler = self.0.join("filler");
        let mut f = std::fs::File::create(&filler).unwrap();
        let chunk = vec![0xa5_u8; 4096];
        while f.write_all(&chunk).is_ok() {}
        let len = std::fs::metadata(&filler).unwrap().len();
        f.set_len(len.saturating_sub(free_bytes)).unwrap();
        filler
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

#[test]
fn a_full_disk_leaves_the_earlier_output_whole_and_nothing_beside_it() {
    let dir = tempfile::tempdir().unwrap();
    let (db, run) = output_db(dir.path(), "a.db");
    let (cand, _) = output_db(dir.path(), "b.db");
    let mounted = if schedlab::sys::proc::euid() == 0 {
        Tmpfs::mount(&dir.path().join("full"), "256k")
    } else {
        None
    };
    if !common::require(
        mounted.is_some(),
        "cannot mount a tmpfs to fill (needs root or CAP_SYS_ADMIN)",
    ) {
        return;
    }
    let fs = mounted.unwrap();
    let o = fs.0.join("out");
    let earlier = b"an earlier good output\n".repeat(40);
    std::fs::write(&o, &earlier).unwrap();
    let filler = fs.fill_leaving(8192);
    for (what, args) in output_commands(&db, run, &cand, &o) {
        let out = run_in(dir.path(), &args);
        assert!(!out.status.success(), "{what} fit in 8 KiB: {}", text(&out));
        let t = text(&out);
        assert!(
            t.contains(&format!("cannot write -o {}", o.display())) && t.contains("No space left"),
            "{what}: {t}"
        );
        assert_eq!(std::fs::read(&o).unwrap(), earlier, "{what}");
        assert_eq!(listing(&fs.0), ["filler", "out"], "{what}");
    }
    drop(filler);
}

/// `schedlab ARGS` under `ulimit -f 256` (KiB; more than the database's
/// index, less than the output): the kernel kills it with SIGXFSZ when the
/// file it writes passes the limit.
fn killed_while_writing(dir: &Path, args: &[String]) -> std::process::Output {
    Command::new("bash")
        .args(["-c", "ulimit -f 256 && exec \"$0\" \"$@\""])
        .arg(bin())
        .args(args)
        .current_dir(dir)
        .env("CI", "1")
        .env_remove("SCHEDLAB_DB")
        .output()
        .unwrap()
}

#[test]
fn the_temporary_output_of_a_killed_schedlab_is_removed_by_the_next_start() {
    use std::os::unix::process::ExitStatusExt;
    let dir = tempfile::tempdir().unwrap();
    let (db, run) = output_db(dir.path(), "a.db");
    let outs = dir.path().join("outs");
    std::fs::create_dir(&outs).unwrap();
    let o = outs.join("run.json");
    std::fs::write(&o, "earlier").unwrap();
    let args = &output_commands(&db, run, &db, &o)[1].1;
    let killed = killed_while_writing(dir.path(), args);
    assert_eq!(
        killed.status.signal(),
        Some(libc::SIGXFSZ),
        "{}",
        text(&killed)
    );
    assert_eq!(std::fs::read_to_string(&o).unwrap(), "earlier");
    let left = listing(&outs);
    assert_eq!(left.len(), 2, "nothing was left to clean up: {left:?}");
    // The next start of any schedlab there removes it.
    let out = schedlab(&["preset", "list"], &outs);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(listing(&outs), ["run.json"], "{}", text(&out));
    assert!(text(&out).contains("was killed"), "{}", text(&out));
    // So does the next output written into that directory, from elsewhere.
    let killed = killed_while_writing(dir.path(), args);
    assert_eq!(killed.status.signal(), Some(libc::SIGXFSZ));
    assert_eq!(listing(&outs).len(), 2);
    let out = run_in(dir.path(), args);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(listing(&outs), ["run.json"], "{}", text(&out));
    // A look-alike of someone else's is not schedlab's to remove.
    let theirs = outs.join(".schedlab-output-1-abcdef");
    std::fs::create_dir(&theirs).unwrap();
    std::fs::write(theirs.join("run.json"), "theirs").unwrap();
    let out = run_in(dir.path(), args);
    assert!(out.status.success(), "{}", text(&out));
    assert!(theirs.join("run.json").exists());
}

/// `run --db` and `simulate --db` refuse what cannot hold a database
/// (a directory, a FIFO, a character device) and every side file of
/// another database (its write-ahead log would otherwise become a database
/// of its own, which SQLite then takes for a broken log of the first),
/// naming the flag and the path, before anything is made beside it.
#[test]
fn run_and_simulate_refuse_a_db_that_cannot_hold_a_database() {
    let dir = tempfile::tempdir().unwrap();
    let (db, _) = output_db(dir.path(), "a.db");
    let dests = dir.path().join("dests");
    std::fs::create_dir(&dests).unwrap();
    std::fs::create_dir(dests.join("adir")).unwrap();
    assert!(
        Command::new("mkfifo")
            .arg(dests.join("pipe"))
            .status()
            .unwrap()
            .success()
    );
    let mut targets = vec![
        (dests.join("adir"), "it is a directory"),
        (dests.join("pipe"), "FIFO"),
    ];
    if schedlab::sys::proc::euid() == 0
        && Command::new("mknod")
            .arg(dests.join("full"))
            .args(["c", "1", "7"])
            .status()
            .is_ok_and(|s| s.success())
    {
        targets.push((dests.join("full"), "character device"));
    }
    for side in ["-wal", "-shm", "-journal", "-runner.lock"] {
        targets.push((
            PathBuf::from(format!("{}{side}", db.display())),
            "of database",
        ));
    }
    write_spec(
        dir.path(),
        &tiny_spec(dir.path(), "kind = \"pi\"\niterations = 1000"),
    );
    let before = (listing(&dests), listing(dir.path()));
    for (target, why) in &targets {
        for cmd in ["run", "simulate"] {
            let out = Command::new("timeout")
                .arg("60")
                .arg(bin())
                .arg(cmd)
                .arg("s.toml")
                .arg("--db")
                .arg(target)
                .current_dir(dir.path())
                .env_remove("SCHEDLAB_DB")
                .output()
                .unwrap();
            assert_eq!(
                out.status.code(),
                Some(1),
                "{cmd} {}: {}",
                target.display(),
                text(&out)
            );
            let head = format!("cannot use --db {}: ", target.display());
            assert!(
                text(&out).contains(&head) && text(&out).contains(why),
                "{cmd} {}: {}",
                target.display(),
                text(&out)
            );
            assert_eq!(
                (listing(&dests), listing(dir.path())),
                before,
                "{cmd} {}",
                target.display()
            );
        }
    }
}

#[test]
fn merge_into_a_directory_a_device_or_standard_output_is_refused_before_any_side_file() {
    let dir = tempfile::tempdir().unwrap();
    let (db, _) = output_db(dir.path(), "a.db");
    let dests = dir.path().join("dests");
    std::fs::create_dir(&dests).unwrap();
    std::fs::create_dir(dests.join("adir")).unwrap();
    assert!(
        Command::new("mkfifo")
            .arg(dests.join("pipe"))
            .status()
            .unwrap()
            .success()
    );
    let mut targets = vec![("adir", "is a directory"), ("pipe", "FIFO")];
    // A character device of our own (root): like /dev/null, in a directory
    // whose listing the test can check.
    let made = schedlab::sys::proc::euid() == 0
        && Command::new("mknod")
            .arg(dests.join("null"))
            .args(["c", "1", "3"])
            .status()
            .is_ok_and(|s| s.success());
    if made {
        targets.push(("null", "character device"));
    }
    let before = listing(&dests);
    for (name, why) in targets {
        let o = dests.join(name);
        let out = Command::new("timeout")
            .arg("60")
            .arg(bin())
            .args(["merge", "-o"])
            .arg(&o)
            .arg(&db)
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{name}: {}", text(&out));
        assert!(
            text(&out).contains(&o.display().to_string()) && text(&out).contains(why),
            "{name}: {}",
            text(&out)
        );
        assert_eq!(listing(&dests), before, "{name}");
    }
    let out = schedlab(&["merge", "-o", "-", "a.db"], dir.path());
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("standard output"), "{}", text(&out));
    assert!(!dir.path().join("-").exists());
    let wal = dir.path().join("a.db-wal");
    let out = schedlab(&["merge", "-o", "a.db-wal", "a.db"], dir.path());
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("write-ahead log"), "{}", text(&out));
    assert!(!wal.exists() || std::fs::metadata(&wal).unwrap().len() == 0);
}

#[test]
fn merge_opens_its_sources_one_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let (db, _) = output_db(dir.path(), "a.db");
    let mut sources = Vec::new();
    for i in 0..60 {
        let copy = dir.path().join(format!("copy-{i}.db"));
        std::fs::copy(&db, &copy).unwrap();
        sources.push(copy);
    }
    let out = Command::new("bash")
        .args(["-c", "ulimit -n 40 && exec \"$0\" \"$@\""])
        .arg(bin())
        .args(["merge", "--quiet", "-o", "fleet.db"])
        .args(&sources)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let runs = |p: &Path| -> i64 {
        rusqlite::Connection::open(p)
            .unwrap()
            .query_row("SELECT count(*) FROM runs", [], |r| r.get(0))
            .unwrap()
    };
    assert_eq!(runs(&dir.path().join("fleet.db")), runs(&db));
}

#[test]
fn compare_refuses_a_copy_of_the_baseline_as_the_candidate() {
    let dir = tempfile::tempdir().unwrap();
    output_db(dir.path(), "a.db");
    std::fs::copy(dir.path().join("a.db"), dir.path().join("copy.db")).unwrap();
    let out = schedlab(
        &[
            "compare", "--db", "a.db", "--vs", "copy.db", "--format", "md",
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let t = text(&out);
    assert!(
        t.contains("same campaign") && t.contains("copy.db") && t.contains("a.db"),
        "{t}"
    );
    // A campaign of the same spec in another database is compared.
    output_db(dir.path(), "b.db");
    let out = schedlab(
        &[
            "compare",
            "--db",
            "a.db",
            "--vs",
            "b.db",
            "--format",
            "md",
            "--resamples",
            "100",
        ],
        dir.path(),
    );
    assert!(out.status.success(), "{}", text(&out));
}

/// A program (run as `user` or not) cannot have schedlab (root) read a
/// file outside its directory by naming it as a figure's source: a
/// symbolic link to a root-only file is refused (its text is neither
/// stored nor shown),
/// and a FIFO as a source fails the run at once instead of blocking it.
#[test]
fn a_figure_source_is_read_only_when_the_program_s_user_owns_it_and_it_is_a_file() {
    use std::os::unix::fs::PermissionsExt;
    if !common::root_for_commands() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "root-only 4242 SECRET-LINE\n").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let cases = [
        (
            format!(
                "user = \"nobody\"\nargv = [\"ln\", \"-s\", \"{}\", \"out.txt\"]",
                secret.display()
            ),
            "leads outside the program's directory",
        ),
        // Issue 34: without `user` too, a link out of cwd is not followed.
        (
            format!(
                "argv = [\"ln\", \"-s\", \"{}\", \"out.txt\"]",
                secret.display()
            ),
            "leads outside the program's directory",
        ),
        (
            "argv = [\"mkfifo\", \"out.txt\"]".to_string(),
            "is not a regular file",
        ),
    ];
    for (program, says) in cases {
        let workload = format!(
            "kind = \"command\"\n{program}\n[workloads.w.figures.x]\nregex = '([0-9]+)'\n\
             from = \"out.txt\"\nunit = \"\"\nbetter = \"lower\""
        );
        write_spec(dir.path(), &tiny_spec(dir.path(), &workload));
        let _ = std::fs::remove_file(dir.path().join("t.db"));
        let out = Command::new("timeout")
            .arg("60")
            .arg(bin())
            .args(["run", "s.toml", "--db", "t.db"])
            .current_dir(dir.path())
            .env_remove("SCHEDLAB_DB")
            .output()
            .unwrap();
        let shown = text(&out);
        assert_ne!(out.status.code(), Some(124), "the run blocked: {shown}");
        assert!(shown.contains(says), "{shown}");
        assert!(!shown.contains("SECRET-LINE"), "{shown}");
        let stored = Command::new(bin())
            .args(["export", "--db", "t.db", "--format", "csv", "-o", "-"])
            .current_dir(dir.path())
            .output()
            .unwrap();
        let csv = String::from_utf8_lossy(&stored.stdout);
        assert!(csv.contains(says) && !csv.contains("SECRET-LINE"), "{csv}");
    }
}
