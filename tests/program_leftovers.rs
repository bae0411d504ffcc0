//! Issue 34: what a program leaves behind. A program whose top process
//! exited while its tree lives on (a daemon) is named at once, pid and
//! command, on standard error and in the run's reason; `end = "exit"`
//! ends the run with the program and kills the rest, recording it; and a
//! program whose processes moved themselves out of the run's cgroups (all
//! of them, or cgroup2 alone) fails its run naming them, and they are
//! killed (they used to outlive the campaign with the run stored "ok", or
//! with a makespan of half a second for 8 s of life).

mod common;
use common::{root_for_commands, schedlab_isolated, serial, text};

use std::path::Path;

/// A spec of one OTHER worker on CPU 0 per workload of `workloads`
/// (`[workloads.NAME]` tables' text), each a command.
fn spec(dir: &Path, timeout_s: u32, names: &[&str], workloads: &str) {
    let names: Vec<String> = names.iter().map(|n| format!("\"{n}\"")).collect();
    std::fs::write(
        dir.join("s.toml"),
        format!(
            "name = \"leftovers\"\nrepetitions = 1\ncooldown_s = 0\ntimeout_s = {timeout_s}\n\
             [matrix]\npolicy = [\"other\"]\nworkload = [{}]\nprocesses = [1]\ncpus = [\"0\"]\n\
             {workloads}\n",
            names.join(", ")
        ),
    )
    .unwrap();
}

/// Status, reason and `extra_json` of each run, in order.
fn runs(dir: &Path) -> Vec<(String, String, serde_json::Value)> {
    let db = rusqlite::Connection::open(dir.join("t.db")).unwrap();
    let mut st = db
        .prepare("SELECT status, COALESCE(reason, ''), extra_json FROM runs ORDER BY id")
        .unwrap();
    st.query_map([], |r| {
        let extra: String = r.get(2)?;
        Ok((
            r.get(0)?,
            r.get(1)?,
            serde_json::from_str(&extra).unwrap_or_default(),
        ))
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

/// The pids `pid N (` named in `text`.
fn pids_named(text: &str) -> Vec<i32> {
    text.split("pid ")
        .skip(1)
        .filter_map(|t| t.split(' ').next()?.parse().ok())
        .collect()
}

/// Whether process `pid` is alive (not a zombie).
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|t| {
        t.rsplit_once(')')
            .is_some_and(|(_, r)| !r.trim_start().starts_with('Z'))
    })
}

/// The daemon's `sleep` outlives its program: the timeout ends the run,
/// and both the line printed when the program exited and the run's
/// reason name it.
#[test]
fn a_tree_that_outlives_its_program_is_named_at_once_and_in_the_reason() {
    let _one_at_a_time = serial();
    if !root_for_commands() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    spec(
        dir.path(),
        3,
        &["w"],
        "[workloads.w]\nkind = \"command\"\nargv = [\"sh\", \"-c\", \"sleep 31 & echo started\"]",
    );
    let o = schedlab_isolated(&["run", "s.toml", "--db", "t.db"], dir.path());
    let stderr = String::from_utf8_lossy(&o.stderr);
    let line = stderr
        .lines()
        .find(|l| l.contains("its process tree lives on"))
        .unwrap_or_else(|| panic!("no line naming the tree: {}", text(&o)));
    // The child is named by its command line at that moment: `sleep 31`,
    // or its shell's line if it had not reached its exec yet.
    assert!(line.contains("sleep 31"), "{line}");
    let r = runs(dir.path());
    assert_eq!(r[0].0, "timed_out", "{}", text(&o));
    assert!(
        r[0].1.contains("its tree lived on: pid ") && r[0].1.contains("(sleep 31)"),
        "{}",
        r[0].1
    );
    // The pid named is the sleep's, and the timeout killed it.
    let pids = pids_named(&r[0].1);
    assert_eq!(pids.len(), 1, "{}", r[0].1);
    assert!(!alive(pids[0]), "pid {} outlived the run", pids[0]);
}

/// `end = "exit"`: the run ends with the program itself (well before the
/// sleep's 31 s), the sleep is killed, and `extra.command` records it.
#[test]
fn end_exit_ends_the_run_with_the_program_and_kills_the_rest() {
    let _one_at_a_time = serial();
    if !root_for_commands() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    spec(
        dir.path(),
        20,
        &["w"],
        "[workloads.w]\nkind = \"command\"\nend = \"exit\"\n\
         argv = [\"sh\", \"-c\", \"sleep 31 & echo started\"]",
    );
    let started = std::time::Instant::now();
    let o = schedlab_isolated(&["run", "s.toml", "--db", "t.db"], dir.path());
    assert!(o.status.success(), "{}", text(&o));
    assert!(started.elapsed().as_secs() < 15, "{}", text(&o));
    let r = runs(dir.path());
    assert_eq!(r[0].0, "ok", "{}", r[0].1);
    let c = &r[0].2["command"][0];
    assert_eq!(c["killed_at_exit"], true, "{c}");
    let left = c["left_at_exit"].as_array().expect("left_at_exit");
    assert_eq!(left.len(), 1, "{c}");
    assert!(
        left[0]["command"].as_str().unwrap().contains("sleep 31"),
        "{c}"
    );
    let pid = left[0]["pid"].as_i64().unwrap() as i32;
    assert!(!alive(pid), "the sleep (pid {pid}) outlived the run");
}

/// A program whose child moves itself out of every hierarchy, and one
/// whose child leaves cgroup2 alone: each run fails naming the child,
/// which is killed (it would have slept 31 s).
#[test]
fn processes_that_leave_their_cgroups_fail_the_run_and_are_killed() {
    let _one_at_a_time = serial();
    if !root_for_commands() {
        return;
    }
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap();
    if !common::require(
        mounts
            .lines()
            .any(|l| l.split(' ').nth(2) == Some("cgroup2")),
        "no cgroup2 hierarchy to leave",
    ) {
        return;
    }
    let leave = |filter: &str| {
        format!(
            "argv = [\"sh\", \"-c\", \"sleep 31 & p=$!; for d in $(awk '{filter} {{print $2}}' \
             /proc/mounts); do echo $p > $d/cgroup.procs; done; echo moved\"]"
        )
    };
    let dir = tempfile::tempdir().unwrap();
    spec(
        dir.path(),
        20,
        &["all", "v2"],
        &format!(
            "[workloads.all]\nkind = \"command\"\n{}\n[workloads.v2]\nkind = \"command\"\n{}",
            leave("$3 ~ /^cgroup/"),
            leave("$3 == \\\"cgroup2\\\"")
        ),
    );
    let started = std::time::Instant::now();
    let o = schedlab_isolated(&["run", "s.toml", "--db", "t.db"], dir.path());
    assert!(started.elapsed().as_secs() < 15, "{}", text(&o));
    let r = runs(dir.path());
    assert_eq!(r.len(), 2, "{}", text(&o));
    for (status, reason, extra) in &r {
        assert_eq!(status, "failed", "{reason}\n{}", text(&o));
        assert!(
            reason.contains("moved themselves out of its cgroups"),
            "{reason}"
        );
        let escaped = extra["command"][0]["escaped_cgroups"]
            .as_array()
            .unwrap_or_else(|| panic!("{extra}"));
        assert_eq!(escaped.len(), 1, "{extra}");
        let pid = escaped[0]["pid"].as_i64().unwrap() as i32;
        assert_eq!(pids_named(reason), [pid], "{reason}");
        assert!(!alive(pid), "pid {pid} outlived its run");
    }
}
