//! Issue 34's hostile findings about programs (`kind = "command"`), end
//! to end: a program run as another user gets neither schedlab's
//! descriptors (a shell's `exec 9</etc/shadow`, its own pipes) nor its
//! controlling terminal; `user` with `setup` works as root; a setup's
//! output is bounded in memory; a campaign whose every run was skipped
//! exits non-zero; a parser fed a forged count fails the run (it used to
//! panic, on every resume again).

mod common;
use common::{bin, root_for_commands, schedlab_isolated, serial, text};

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

/// A spec of one OTHER worker on CPU 0 running `workload` (its keys).
fn spec(dir: &Path, workload: &str) {
    std::fs::write(
        dir.join("s.toml"),
        format!(
            "name = \"hostile\"\nrepetitions = 1\ncooldown_s = 0\ntimeout_s = 60\n[matrix]\n\
             policy = [\"other\"]\nworkload = [\"w\"]\nprocesses = [1]\ncpus = [\"0\"]\n\
             [workloads.w]\nkind = \"command\"\n{workload}\n"
        ),
    )
    .unwrap();
}

/// A directory user nobody may enter (a run directory is made in it).
fn open_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

fn db(dir: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open(dir.join("t.db")).unwrap()
}

/// Status and reason of the one run, and its process's stderr tail.
fn the_run(dir: &Path) -> (String, String, String) {
    db(dir)
        .query_row(
            "SELECT r.status, r.reason, COALESCE(p.stderr_tail, '') FROM runs r \
             LEFT JOIN processes p ON p.run_id = r.id",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap()
}

/// Issue 34 (high): started from a terminal by a shell that holds
/// /etc/shadow at descriptor 9, a `user = "nobody"` program saw the file
/// at 9 and schedlab's own pipe ends, and could open the terminal (and,
/// with `dev.tty.legacy_tiocsti = 1`, type into root's shell). It gets
/// descriptors 0-2 alone, and a session of its own without a terminal.
#[test]
fn a_nobody_program_gets_no_descriptor_and_no_terminal_of_ours() {
    let _one_at_a_time = serial();
    if !root_for_commands()
        || !common::require_tool(
            Path::new("/usr/bin/script").exists(),
            "script (util-linux) gives schedlab a terminal",
        )
    {
        return;
    }
    let dir = open_dir();
    // The shell's descriptors, listed from outside it (ls's own are not
    // the shell's; `exec >&2` first, as a redirection of one command has
    // dash save the descriptor at 10); whether /dev/tty opens; its session
    // and pid.
    spec(
        dir.path(),
        r#"user = "nobody"
argv = ["sh", "-c", "exec >&2; ls /proc/$$/fd; if (: </dev/tty) 2>/dev/null; then echo tty=yes; else echo tty=no; fi; ps -o sid= -p $$; echo pid=$$; exit 1"]"#,
    );
    let inner = format!("exec 9</etc/shadow; exec {} run s.toml --db t.db", bin());
    let o = Command::new("script")
        .args(["-qec", &format!("bash -c '{inner}'"), "/dev/null"])
        .current_dir(dir.path())
        .env("SCHEDLAB_JOURNAL", dir.path().join("journal.json"))
        .env("TMPDIR", dir.path())
        .env_remove("SCHEDLAB_DB")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let (status, reason, tail) = the_run(dir.path());
    assert_eq!(status, "failed", "{reason}\n{}", text(&o));
    let lines: Vec<&str> = tail
        .lines()
        .map(|l| l.trim_start().trim_start_matches('|').trim())
        .collect();
    let fds: Vec<&str> = lines
        .iter()
        .copied()
        .take_while(|l| l.chars().all(|c| c.is_ascii_digit()))
        .collect();
    assert_eq!(fds, ["0", "1", "2"], "{tail}");
    assert!(lines.contains(&"tty=no"), "{tail}");
    // Its session is its own: the session id is its pid.
    let pid = lines
        .iter()
        .find_map(|l| l.strip_prefix("pid="))
        .expect("pid line");
    assert_eq!(lines.get(fds.len() + 1), Some(&pid), "{tail}");
}

/// Issue 34 (medium): `user` with `setup` failed as root ("starting setup
/// /usr/bin/true: Permission denied": the cgroup was joined after the
/// switch of user). The setup runs, as the user, before the program.
#[test]
fn user_with_setup_works() {
    let _one_at_a_time = serial();
    if !root_for_commands() {
        return;
    }
    let dir = open_dir();
    spec(
        dir.path(),
        r#"user = "nobody"
setup = ["sh", "-c", "id -u > setup_uid.txt"]
argv = ["cat", "setup_uid.txt"]
[workloads.w.figures.uid]
regex = '([0-9]+)'
unit = ""
better = "lower""#,
    );
    let o = schedlab_isolated(&["run", "s.toml", "--db", "t.db"], dir.path());
    assert!(o.status.success(), "{}", text(&o));
    let uid: f64 = db(dir.path())
        .query_row(
            "SELECT json_extract(figures_json, '$.uid') FROM processes",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(uid, 65534.0);
}

/// Issue 34 (medium): 400 MB printed by a setup took schedlab's peak
/// memory to 402 MB (and left a file of that size). Its last 64 KiB are
/// kept, as of a program's output.
#[test]
fn a_setup_s_output_does_not_fill_memory() {
    let _one_at_a_time = serial();
    if !root_for_commands()
        || !common::require_tool(
            Path::new("/usr/bin/time").exists(),
            "/usr/bin/time (GNU time) measures schedlab's peak memory",
        )
    {
        return;
    }
    let dir = open_dir();
    spec(
        dir.path(),
        r#"setup = ["sh", "-c", "head -c 209715200 /dev/zero; echo; echo setup done; exit 5"]
argv = ["true"]"#,
    );
    let o = Command::new("/usr/bin/time")
        .args(["-f", "maxrss_kb=%M", bin(), "run", "s.toml", "--db", "t.db"])
        .current_dir(dir.path())
        .env("SCHEDLAB_JOURNAL", dir.path().join("journal.json"))
        .env("TMPDIR", dir.path())
        .env_remove("SCHEDLAB_DB")
        .output()
        .unwrap();
    let shown = text(&o);
    assert_eq!(o.status.code(), Some(3), "{shown}");
    let (_, reason, _) = the_run(dir.path());
    assert!(
        reason.contains("exit status: 5") && reason.contains("setup done"),
        "{reason}"
    );
    let kb: u64 = shown
        .lines()
        .find_map(|l| l.strip_prefix("maxrss_kb="))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no maxrss in {shown}"));
    assert!(
        kb < 100 << 10,
        "schedlab's peak memory was {kb} KiB for 200 MiB of setup output"
    );
}

/// Issue 34 (low): a campaign whose every run was skipped (a program not
/// in PATH) exited 0. It exits 3, as when runs failed.
#[test]
fn a_campaign_whose_every_run_was_skipped_exits_3() {
    let _one_at_a_time = serial();
    if !root_for_commands() {
        return;
    }
    let dir = open_dir();
    spec(dir.path(), r#"argv = ["schedlab-no-such-program"]"#);
    let o = schedlab_isolated(&["run", "s.toml", "--db", "t.db"], dir.path());
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(text(&o).contains("every run was skipped"), "{}", text(&o));
    let (status, reason, _) = the_run(dir.path());
    assert_eq!(status, "skipped");
    assert!(reason.contains("is not in PATH"), "{reason}");
}

/// Issue 34 (high): cyclictest's parser fed a count of 2^63 events
/// panicked schedlab (exit 101) in the histogram's encoding, and again on
/// every resume. The run fails naming the value; a resume has nothing left
/// to do.
#[test]
fn a_forged_benchmark_count_fails_the_run_naming_it() {
    let _one_at_a_time = serial();
    if !root_for_commands() {
        return;
    }
    let dir = open_dir();
    std::fs::write(
        dir.path().join("forged.json"),
        r#"{"thread":{"0":{"histogram":{"13":9223372036854775808},"cycles":9223372036854775808,"min":13,"max":13,"avg":13}}}"#,
    )
    .unwrap();
    let forged = dir.path().join("forged.json");
    spec(
        dir.path(),
        &format!(
            "argv = [\"cat\", \"{}\"]\nparser = \"cyclictest\"",
            forged.display()
        ),
    );
    for _ in 0..2 {
        let o = schedlab_isolated(&["run", "s.toml", "--db", "t.db"], dir.path());
        assert_ne!(o.status.code(), Some(101), "{}", text(&o));
        assert!(matches!(o.status.code(), Some(0 | 3)), "{}", text(&o));
    }
    let (status, reason, _) = the_run(dir.path());
    assert_eq!(status, "failed");
    assert!(reason.contains("9223372036854775808"), "{reason}");
}

/// Issue 34 (low): a program that raised itself to SCHED_FIFO with `chrt`
/// was stored as OTHER with nothing said. The policy its tasks exited
/// under is kept, and a caveat names those that left the run's policy.
/// (RT work kept to one `true`, pinned to CPU 0.)
#[test]
fn a_program_that_changes_its_own_policy_is_caveated() {
    let _one_at_a_time = serial();
    if !root_for_commands() || !common::may_use_rt() {
        return;
    }
    let dir = open_dir();
    spec(dir.path(), r#"argv = ["chrt", "-f", "10", "true"]"#);
    let o = schedlab_isolated(&["run", "s.toml", "--db", "t.db"], dir.path());
    assert!(o.status.success(), "{}", text(&o));
    let extra: String = db(dir.path())
        .query_row("SELECT extra_json FROM runs", [], |r| r.get(0))
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(&extra).unwrap();
    let c = &v["command"][0];
    if !common::require(
        c["missing"].get("tasks").is_none(),
        "no taskstats exit records here (a network namespace?): nothing tells the policies",
    ) {
        return;
    }
    assert_eq!(c["exit_policies"]["fifo"], 1, "{c}");
    let caveat = c["caveat"].as_str().unwrap_or_default();
    assert!(
        caveat.contains("1 under fifo") && caveat.contains("not other"),
        "{c}"
    );
}
