//! Another program's sched_ext scheduler as a campaign factor
//! (`matrix.ext_scheduler`) end to end on this machine: the "none" level
//! runs as any run; a scheduler level that cannot load here is skipped (no
//! sched_ext in the kernel, another scheduler loaded, no right to load BPF,
//! the program not installed) or failed (the program ended, or never
//! enabled a scheduler) with the reason named, and the rest of the campaign
//! runs. Loading a real one (the kernel's scx_simple) is measured by
//! `scripts/vm-test` in a guest whose kernel has sched_ext, which also runs
//! this test's spec (`tests/fixtures/ext-scheduler-levels.toml`) there and
//! checks the rows as the `None` branch below does.

mod common;

use common::{schedlab, text};

/// Why no sched_ext scheduler can load on this machine (a fragment of the
/// reason schedlab gives); None when one can.
fn cannot_load_here() -> Option<&'static str> {
    match std::fs::read_to_string("/sys/kernel/sched_ext/state") {
        Err(_) => Some("this kernel has no sched_ext"),
        Ok(state) if state.trim() != "disabled" => Some("only one BPF scheduler"),
        Ok(_) if schedlab::sys::proc::euid() != 0 => Some("CAP_BPF"),
        Ok(_) => None,
    }
}

#[test]
fn scheduler_levels_run_or_say_why_not() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("x.toml"),
        include_str!("fixtures/ext-scheduler-levels.toml"),
    )
    .unwrap();
    let o = schedlab(&["run", "x.toml", "--db", "t.db", "--quiet"], dir.path());
    // Where a scheduler can load, "exits" and "never-loads" fail their runs:
    // the campaign ends with exit 3 (runs failed), as any campaign with
    // failed runs does; where none can, every scheduler level is skipped.
    let expected_exit = match cannot_load_here() {
        Some(_) => 0,
        None => 3,
    };
    assert_eq!(o.status.code(), Some(expected_exit), "{}", text(&o));
    let conn = rusqlite::Connection::open(dir.path().join("t.db")).unwrap();
    let mut st = conn
        .prepare("SELECT ext_scheduler, status, reason FROM runs ORDER BY seq")
        .unwrap();
    let rows: Vec<(String, String, String)> = st
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let names: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
    assert_eq!(
        names,
        [
            "none",
            "schedlab-no-such-scheduler --flag",
            "exits",
            "never-loads"
        ]
    );
    assert_eq!((rows[0].1.as_str(), rows[0].2.as_str()), ("ok", ""));
    let expect = |row: &(String, String, String), status: &str, says: &[&str]| {
        assert_eq!(row.1, status, "{row:?}");
        let key = format!("matrix.ext_scheduler = \"{}\"", row.0);
        assert!(row.2.contains(&key), "{row:?}");
        for s in says {
            assert!(row.2.contains(s), "{s:?} not in {row:?}");
        }
    };
    match cannot_load_here() {
        // Every scheduler level is skipped for the machine's reason, before
        // any program is started.
        Some(why) => {
            for row in &rows[1..] {
                expect(row, "skipped", &[why]);
            }
        }
        None => {
            expect(
                &rows[1],
                "skipped",
                &["\"schedlab-no-such-scheduler\" is not installed", "PATH="],
            );
            expect(
                &rows[2],
                "failed",
                &["ended (exit code 3)", "cannot attach: no scheduler here"],
            );
            expect(&rows[3], "failed", &["not enabled within 0.5 s"]);
            // Stopped: no program of these runs is left.
            let st = std::fs::read_to_string("/sys/kernel/sched_ext/state").unwrap();
            assert_eq!(st.trim(), "disabled");
        }
    }
    // The factor is in the export and in the report's groups.
    let csv = schedlab(&["export", "--db", "t.db"], dir.path());
    assert!(csv.status.success(), "{}", text(&csv));
    let body = String::from_utf8_lossy(&csv.stdout);
    let header: Vec<&str> = body.lines().next().unwrap().split(',').collect();
    let col = header.iter().position(|h| *h == "ext_scheduler").unwrap();
    let first: Vec<&str> = body.lines().nth(1).unwrap().split(',').collect();
    assert_eq!(first[col], "none");
    let md = schedlab(
        &["report", "--db", "t.db", "--format", "md", "-o", "r.md"],
        dir.path(),
    );
    assert!(md.status.success(), "{}", text(&md));
    let report = std::fs::read_to_string(dir.path().join("r.md")).unwrap();
    assert!(report.contains("sched_ext none"), "{report}");
    // The section of the scheduler levels: every run of each is counted.
    assert!(report.contains("sched_ext schedulers"), "{report}");
    let row = report
        .lines()
        .find(|l| l.starts_with("| never-loads "))
        .unwrap_or_else(|| panic!("no row of never-loads: {report}"));
    match cannot_load_here() {
        Some(_) => assert!(row.contains("0 / 0 / 1"), "{row}"),
        None => assert!(row.contains("0 / 1 / 0"), "{row}"),
    }
}

#[test]
fn plan_lists_the_scheduler_levels() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("p.toml"),
        r#"
[matrix]
policy = ["other", "wrr"]
workload = ["pi"]
ext_scheduler = ["none", "simple"]
[ext_schedulers.simple]
command = ["scx_simple", "-f"]
"#,
    )
    .unwrap();
    let o = schedlab(&["plan", "p.toml"], dir.path());
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("sched_ext    none, simple (scx_simple -f)"),
        "{out}"
    );
}

/// A `command`'s children run on sched_ext under a scheduler level: the
/// top shell's background child reads `ext.enabled` of its own
/// `/proc/self/sched` (1: on the ext class). Not its policy: `scx_simple`
/// switches every task to sched_ext and leaves its policy SCHED_NORMAL
/// (field 41 of `/proc/self/stat` stays 0; seen in `scripts/vm-test`'s
/// guest, whose scx campaign also checks that under `scx_qmap -p` a child
/// inherits SCHED_EXT, 7, from the worker schedlab moved to it). Runs only
/// where a sched_ext scheduler can load and `scx_simple` is installed (the
/// VM guest).
#[test]
fn a_command_s_children_inherit_sched_ext() {
    let why = cannot_load_here();
    if !schedlab::testing::skip_unless(
        why.is_none(),
        format!(
            "no sched_ext scheduler can load: {}",
            why.unwrap_or_default()
        ),
    ) {
        return;
    }
    let have = std::process::Command::new("sh")
        .args(["-c", "command -v scx_simple"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !common::require_tool(have, "scx_simple is not installed") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("c.toml"),
        r#"
name = "ext-tree"
repetitions = 1
cooldown_s = 0
timeout_s = 60
[matrix]
policy = ["other"]
workload = ["tree"]
processes = [1]
ext_scheduler = ["simple"]
[ext_schedulers.simple]
command = ["scx_simple"]
[workloads.tree]
kind = "command"
argv = ["sh", "-c", "(while read -r k c v; do [ \"$k\" = ext.enabled ] && echo childext $v; done </proc/self/sched) & wait"]
[workloads.tree.figures.childext]
regex = 'childext ([0-9]+)'
unit = "n"
better = "higher"
"#,
    )
    .unwrap();
    let o = schedlab(&["run", "c.toml", "--db", "t.db", "--quiet"], dir.path());
    assert!(o.status.success(), "{}", text(&o));
    let conn = rusqlite::Connection::open(dir.path().join("t.db")).unwrap();
    let figures: String = conn
        .query_row("SELECT figures_json FROM processes", [], |r| r.get(0))
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(&figures).unwrap();
    assert_eq!(v["childext"].as_f64(), Some(1.0), "{figures}");
}
