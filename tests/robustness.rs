//! End-to-end tests of how the schedlab binary behaves at the edges (issue
//! 8): closed pipes, read-only databases, hostile text, odd arguments and
//! files, and signals that come early. Every campaign here is tiny and
//! fair-class only (OTHER, a few million pi iterations, no cool-down).

use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{bin, text};

fn cmd(args: &[&str], dir: &Path) -> Command {
    let mut c = Command::new(bin());
    c.args(args)
        .current_dir(dir)
        .env("CI", "1")
        .env("TMPDIR", dir)
        .env("SCHEDLAB_JOURNAL", dir.join("journal.json"))
        .env_remove("SCHEDLAB_DB")
        .stdin(Stdio::null());
    c
}

fn schedlab(args: &[&str], dir: &Path) -> Output {
    cmd(args, dir).output().expect("run schedlab")
}

/// The write end of a pipe whose read end is already closed: every write
/// to it fails with EPIPE, as under `| head` once head has exited.
fn closed_pipe() -> std::os::fd::OwnedFd {
    let (read, write) = schedlab::sys::proc::pipe().unwrap();
    drop(read);
    write
}

/// A fair-class spec of `runs` runs of one OTHER process each.
fn tiny_spec(dir: &Path, name: &str, runs: u32, iterations: u64) -> PathBuf {
    let p = dir.join(format!("{name}.toml"));
    std::fs::write(
        &p,
        format!(
            "name = \"{name}\"\nrepetitions = {runs}\ncooldown_s = 0\ntimeout_s = 30\n[matrix]\n\
             policy = [\"other\"]\nworkload = [\"pi\"]\nprocesses = [1]\n[workloads.pi]\n\
             iterations = {iterations}\n"
        ),
    )
    .unwrap();
    p
}

fn count(db: &Path, sql: &str) -> i64 {
    rusqlite::Connection::open(db)
        .unwrap()
        .query_row(sql, [], |r| r.get(0))
        .unwrap()
}

/// A database with one finished campaign of two runs, in `dir/t.db`.
fn tiny_db(dir: &Path) {
    tiny_spec(dir, "tiny", 2, 1_000_000);
    let o = schedlab(&["run", "tiny.toml", "--db", "t.db"], dir);
    assert!(o.status.success(), "{}", text(&o));
}

// ---------------------------------------------------------------- 7: pipes

#[test]
fn a_closed_stdout_ends_every_command_quietly_with_success() {
    let dir = tempfile::tempdir().unwrap();
    tiny_db(dir.path());
    let pid = std::process::id().to_string();
    let cases: &[&[&str]] = &[
        &["campaigns", "--db", "t.db"],
        &["campaigns", "--db", "t.db", "--json"],
        &["preset", "list", "--json"],
        &["completions", "bash"],
        &["man"],
        &["env"],
        &["env", "--json"],
        &["preset", "list"],
        &["preset", "show", "policies"],
        &["plan", "--preset", "priorities", "--list", "--db", "t.db"],
        &["plan", "tiny.toml", "--db", "t.db"],
        &["export", "--db", "t.db"],
        &["export", "--db", "t.db", "--format", "json"],
        &["report", "--db", "t.db", "-o", "-", "--format", "md"],
        &["report", "--db", "t.db", "-o", "-", "--format", "json"],
        &["policy", "get", &pid],
        &["policy", "get", &pid, "--json"],
    ];
    for args in cases {
        let o = cmd(args, dir.path())
            .stdout(Stdio::from(closed_pipe()))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(!err.contains("error"), "{args:?}: {err}");
    }
}

#[test]
fn a_closed_stderr_does_not_stop_a_campaign() {
    let dir = tempfile::tempdir().unwrap();
    tiny_spec(dir.path(), "quiet", 4, 1_000_000);
    // `schedlab run … 2>&1 | head -3` after head has exited.
    let out = closed_pipe();
    let o = cmd(&["run", "quiet.toml", "--db", "t.db"], dir.path())
        .stdout(Stdio::from(out.try_clone().unwrap()))
        .stderr(Stdio::from(out))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{:?}", o.status);
    let db = dir.path().join("t.db");
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM runs WHERE status = 'ok'"),
        4,
        "every run was stored"
    );
}

// ------------------------------------------------------ 10: read-only dbs

/// The commands that only read a database, and what shows they worked.
fn read_commands() -> Vec<(Vec<&'static str>, &'static str)> {
    vec![
        (vec!["campaigns", "--db", "D/t.db"], "tiny"),
        (vec!["export", "--db", "D/t.db"], "campaign,run,policy"),
        (
            vec!["report", "--db", "D/t.db", "--format", "md"],
            "# schedlab report: tiny",
        ),
        (
            vec!["plan", "tiny.toml", "--db", "D/t.db"],
            "nothing left to run",
        ),
    ]
}

fn with_dir(args: &[&str], d: &str) -> Vec<String> {
    args.iter().map(|a| a.replace("D/", d)).collect()
}

fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    files.sort();
    files
}

#[test]
fn commands_that_only_read_never_write_the_database() {
    // As root permissions do not stop a write: a database in rollback
    // (DELETE) journal mode shows any, since opening it for writing switches
    // it to WAL.
    let dir = tempfile::tempdir().unwrap();
    tiny_db(dir.path());
    let ro = dir.path().join("ro");
    std::fs::create_dir(&ro).unwrap();
    std::fs::copy(dir.path().join("t.db"), ro.join("t.db")).unwrap();
    let mode: String = rusqlite::Connection::open(ro.join("t.db"))
        .unwrap()
        .query_row("PRAGMA journal_mode = DELETE", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "delete");
    let before = snapshot(&ro);
    for (args, expect) in read_commands() {
        let args = with_dir(&args, "ro/");
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = schedlab(&args, dir.path());
        assert!(o.status.success(), "{args:?}: {}", text(&o));
        assert!(text(&o).contains(expect), "{args:?}: {}", text(&o));
        assert!(snapshot(&ro) == before, "{args:?} changed the database");
    }
    // An empty file is not a database to create tables in.
    std::fs::write(ro.join("empty.db"), b"").unwrap();
    let o = schedlab(&["campaigns", "--db", "ro/empty.db"], dir.path());
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("not a schedlab database"), "{}", text(&o));
    assert_eq!(std::fs::metadata(ro.join("empty.db")).unwrap().len(), 0);
}

#[test]
fn a_database_on_a_read_only_mount_can_be_read() {
    let dir = tempfile::tempdir().unwrap();
    tiny_db(dir.path());
    let ro = dir.path().join("ro");
    std::fs::create_dir(&ro).unwrap();
    std::fs::copy(dir.path().join("t.db"), ro.join("t.db")).unwrap();
    let usable = Command::new("unshare")
        .args(["-m", "sh", "-c"])
        .arg("mount --bind \"$0\" \"$0\" && mount -o remount,bind,ro \"$0\" && ! touch \"$0/x\" 2>/dev/null")
        .arg(&ro)
        .output()
        .is_ok_and(|o| o.status.success());
    if !common::require(
        usable,
        "cannot make a read-only bind mount here (needs root or CAP_SYS_ADMIN for unshare -m \
         and mount)",
    ) {
        return;
    }
    let before = snapshot(&ro);
    for (args, expect) in read_commands() {
        let args = with_dir(&args, "ro/");
        let o = Command::new("unshare")
            .args(["-m", "sh", "-c"])
            .arg("mount --bind ro ro && mount -o remount,bind,ro ro && exec \"$@\"")
            .arg("sh")
            .arg(bin())
            .args(&args)
            .current_dir(dir.path())
            .env("CI", "1")
            .env("TMPDIR", dir.path())
            .env("SCHEDLAB_JOURNAL", dir.path().join("journal.json"))
            .output()
            .unwrap();
        assert!(o.status.success(), "{args:?}: {}", text(&o));
        assert!(text(&o).contains(expect), "{args:?}: {}", text(&o));
    }
    assert!(snapshot(&ro) == before);
}

#[test]
fn a_database_the_user_may_only_read_can_be_read() {
    if !common::root_with_setpriv() || !common::nobody_can_run(bin()) {
        return;
    }
    let nobody = |args: &[&str], dir: &Path| {
        Command::new(common::setpriv().unwrap())
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(bin())
            .args(args)
            .current_dir(dir)
            .env("CI", "1")
            .env("TMPDIR", dir.join("tmp"))
            .env("SCHEDLAB_JOURNAL", dir.join("journal.json"))
            .output()
            .unwrap()
    };
    let dir = tempfile::tempdir().unwrap();
    tiny_db(dir.path());
    use std::os::unix::fs::PermissionsExt;
    let perm = |p: &Path, mode| std::fs::set_permissions(p, PermissionsExt::from_mode(mode));
    perm(dir.path(), 0o755).unwrap();
    std::fs::create_dir(dir.path().join("tmp")).unwrap();
    perm(&dir.path().join("tmp"), 0o777).unwrap();
    perm(&dir.path().join("tiny.toml"), 0o644).unwrap();
    let ro = dir.path().join("ro");
    std::fs::create_dir(&ro).unwrap();
    std::fs::copy(dir.path().join("t.db"), ro.join("t.db")).unwrap();
    perm(&ro.join("t.db"), 0o444).unwrap();
    perm(&ro, 0o555).unwrap();
    let before = snapshot(&ro);
    for (args, expect) in read_commands() {
        let args = with_dir(&args, "ro/");
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = nobody(&args, dir.path());
        assert!(o.status.success(), "{args:?}: {}", text(&o));
        assert!(text(&o).contains(expect), "{args:?}: {}", text(&o));
    }
    assert!(snapshot(&ro) == before);
}

// ---------------------------------------------------------- 11: the rest

#[test]
fn user_text_reaches_the_terminal_escaped() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("e.toml"),
        "name = \"evil\\u001b[2J\\u001b]0;title\\u0007\"\nrepetitions = 1\ncooldown_s = 0\n\
         [matrix]\npolicy = [\"other\"]\nworkload = [\"w\\u001b[31m\"]\nprocesses = [1]\n\
         [workloads.\"w\\u001b[31m\"]\nkind = \"pi\"\niterations = 100_000\n",
    )
    .unwrap();
    let raw = |o: &Output| o.stdout.contains(&0x1b) || o.stderr.contains(&0x1b);
    let outputs = [
        schedlab(&["run", "e.toml", "--db", "t.db"], dir.path()),
        schedlab(&["campaigns", "--db", "t.db"], dir.path()),
        schedlab(&["plan", "e.toml", "--db", "t.db", "--list"], dir.path()),
        schedlab(&["report", "--db", "t.db", "--format", "md"], dir.path()),
        // Echoed in an error.
        schedlab(
            &["plan", "e.toml", "--set", "matrix.policy=[\"x\\u001b[2J\"]"],
            dir.path(),
        ),
    ];
    for o in &outputs {
        assert!(!raw(o), "a raw ESC reached the terminal: {:?}", text(o));
        assert!(text(o).contains("\\u{1b}"), "{}", text(o));
    }
    assert!(outputs[0].status.success());
    assert!(text(&outputs[1]).contains("evil\\u{1b}[2J\\u{1b}]0;title\\u{7}"));
    assert_eq!(outputs[4].status.code(), Some(2));
}

#[test]
fn a_binary_spec_is_a_spec_error_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("bin.toml"),
        b"name = \"x\"\n\xff\xfe\x00\x01",
    )
    .unwrap();
    let o = schedlab(&["plan", "bin.toml"], dir.path());
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("bin.toml") && text(&o).contains("UTF-8"),
        "{}",
        text(&o)
    );
}

#[test]
fn a_bad_scale_is_reported_as_the_scale_flag() {
    let dir = tempfile::tempdir().unwrap();
    tiny_spec(dir.path(), "s", 1, 1000);
    for v in ["--scale=nan", "--scale=inf", "--scale=0", "--scale=-1"] {
        let o = schedlab(&["plan", "s.toml", v], dir.path());
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{v}: {err}");
        assert!(err.starts_with("error: --scale: "), "{v}: {err}");
        assert!(!err.contains("--set"), "{v}: {err}");
    }
}

#[test]
fn unavailable_cpus_are_named_in_a_few_words() {
    let dir = tempfile::tempdir().unwrap();
    tiny_spec(dir.path(), "s", 1, 1000);
    let o = schedlab(
        &["plan", "s.toml", "--set", "matrix.cpus=[\"0-1000\"]"],
        dir.path(),
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("-1000 are not available"), "{err}");
    assert!(err.len() < 200, "{err}");
}

#[test]
fn plan_of_a_finished_campaign_has_nothing_left_to_estimate() {
    let dir = tempfile::tempdir().unwrap();
    tiny_db(dir.path());
    let o = schedlab(&["plan", "tiny.toml", "--db", "t.db"], dir.path());
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("nothing left to run"), "{}", text(&o));
    assert!(!text(&o).contains("-0"), "{}", text(&o));
}

#[test]
fn a_spec_too_large_to_be_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let start = Instant::now();
    let o = schedlab(&["plan", "/dev/zero"], dir.path());
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("/dev/zero") && err.contains("64 MiB"), "{err}");
    assert!(start.elapsed() < Duration::from_secs(20));
    let big = format!("# {}\n", "x".repeat(64 << 20));
    std::fs::write(dir.path().join("big.toml"), big).unwrap();
    let o = schedlab(&["plan", "big.toml"], dir.path());
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("big.toml") && err.contains("64 MiB"), "{err}");
}

// ------------------------------------------------------- 11g: early signals

/// Whether `pid` blocks SIGINT (from /proc/PID/status).
fn blocks_sigint(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("SigBlk:"))
                .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
        })
        .is_some_and(|m| m & (1 << (libc::SIGINT - 1)) != 0)
}

/// Send SIGINT to a `schedlab run` very early: once it has blocked the
/// signal, and at the latest 20 ms after it started. Returns how it ended
/// and its stderr.
fn interrupt_early(mut child: std::process::Child) -> (std::process::ExitStatus, String) {
    let pid = child.id();
    let exe = std::fs::canonicalize(bin()).unwrap();
    // Started through sh: wait until sh has exec'd schedlab.
    let t0 = Instant::now();
    while std::fs::read_link(format!("/proc/{pid}/exe")).ok().as_ref() != Some(&exe) {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "schedlab never started"
        );
        std::thread::sleep(Duration::from_micros(200));
    }
    let t0 = Instant::now();
    while !blocks_sigint(pid) && t0.elapsed() < Duration::from_millis(20) {
        std::thread::sleep(Duration::from_micros(200));
    }
    schedlab::sys::proc::kill(pid as i32, libc::SIGINT);
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    (child.wait().unwrap(), err)
}

/// Every stored run is whole: ok, with its one process.
fn assert_nothing_half_stored(db: &Path, runs: i64) {
    if !db.exists() {
        return;
    }
    let stored = count(db, "SELECT COUNT(*) FROM runs");
    assert!(stored < runs, "the campaign was not stopped: {stored} runs");
    assert_eq!(
        count(
            db,
            "SELECT COUNT(*) FROM runs r WHERE r.status = 'ok' AND \
             (SELECT COUNT(*) FROM processes p WHERE p.run_id = r.id) = 1"
        ),
        stored
    );
}

#[test]
fn a_sigint_right_after_start_stops_the_campaign_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    tiny_spec(dir.path(), "early", 3, 20_000_000);
    let child = cmd(&["run", "early.toml", "--db", "t.db"], dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (status, err) = interrupt_early(child);
    // Not killed by the signal with nothing cleaned up: stopped, exit 130.
    assert_eq!(status.signal(), None, "killed by SIGINT: {err}");
    assert_eq!(status.code(), Some(130), "{err}");
    assert!(err.contains("interrupted by SIGINT"), "{err}");
    assert_nothing_half_stored(&dir.path().join("t.db"), 3);
}

/// A background job of a non-interactive shell (`schedlab run … &`) starts
/// with SIGINT ignored, so that a Ctrl-C typed for the foreground job does
/// not reach it. A SIGINT sent to its pid (`kill -INT`) is meant for it, and
/// stops it like Ctrl-C in the foreground: exit 130, nothing half-stored,
/// however early it comes. (A terminal-generated SIGINT for a job started
/// with it ignored stays ignored: see sys::proc::block_control_signals.)
#[test]
fn a_sigint_sent_to_a_background_run_stops_it_even_right_after_start() {
    let dir = tempfile::tempdir().unwrap();
    tiny_spec(dir.path(), "early", 3, 20_000_000);
    let child = Command::new("sh")
        .arg("-c")
        .arg("trap '' INT; exec \"$0\" \"$@\"")
        .arg(bin())
        .args(["run", "early.toml", "--db", "t.db"])
        .current_dir(dir.path())
        .env("CI", "1")
        .env("TMPDIR", dir.path())
        .env("SCHEDLAB_JOURNAL", dir.path().join("journal.json"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (status, err) = interrupt_early(child);
    assert_eq!(status.code(), Some(130), "the SIGINT was lost: {err}");
    assert!(err.contains("interrupted by SIGINT"), "{err}");
    assert_nothing_half_stored(&dir.path().join("t.db"), 3);
}

// ------------------------------------------------- journals that cannot be read

/// An unreadable tracing journal (issue 22, item 6): commands that only
/// read go on with a warning naming the tracing journal; a command that
/// would change kernel settings refuses, names the file and says how to
/// recover. Nothing is removed or written.
#[test]
fn a_corrupt_trace_journal_blocks_only_what_would_change_the_machine() {
    let dir = tempfile::tempdir().unwrap();
    tiny_db(dir.path());
    let journal = dir.path().join("trace-journal.json");
    let garbage = "{\"format\": 2, \"pid\": \"garbage";
    std::fs::write(&journal, garbage).unwrap();
    for args in [
        vec!["env"],
        vec!["campaigns", "--db", "t.db"],
        vec!["report", "--db", "t.db", "--format", "md"],
    ] {
        let o = schedlab(&args, dir.path());
        let t = text(&o);
        assert!(o.status.success(), "{args:?}: {t}");
        assert!(
            t.contains("warning:") && t.contains("tracing journal") && !t.contains("RT journal"),
            "{args:?}: {t}"
        );
        assert!(t.contains(&journal.display().to_string()), "{args:?}: {t}");
    }
    let o = schedlab(&["run", "tiny.toml", "--db", "t.db"], dir.path());
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains("error:") && t.contains("tracing journal"), "{t}");
    assert!(t.contains("rmdir") && t.contains("then remove"), "{t}");
    assert_eq!(std::fs::read_to_string(&journal).unwrap(), garbage);
}
