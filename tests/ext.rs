//! `wrr.mechanism = "ext"` end to end on this machine: where schedlab's
//! sched_ext scheduler cannot run (a kernel without sched_ext, a build
//! without the `ext` feature, another BPF scheduler loaded, no right to
//! load BPF) its condition is skipped with that reason and the rest of the
//! campaign runs; where it can run, the run's slices come from the kernel.
//! `schedlab env` says which. The measurement itself is `scripts/vm-test`,
//! in a guest whose kernel has sched_ext.

mod common;

use std::path::Path;

use common::{schedlab, text};

/// What this machine lacks for ext, as a fragment of the expected reason;
/// None when ext can run here.
fn expected_absence() -> Option<&'static str> {
    if !cfg!(feature = "ext") {
        return Some("built without the `ext` feature");
    }
    match std::fs::read_to_string("/sys/kernel/sched_ext/state") {
        Err(_) => Some("this kernel has no sched_ext"),
        Ok(state) if state.trim() != "disabled" => Some("only one BPF scheduler"),
        Ok(_) if !is_root() => Some("CAP_BPF"),
        Ok(_) => None,
    }
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|e| e == "0"))
        })
        .unwrap_or(false)
}

#[test]
fn ext_runs_or_is_skipped_with_the_machines_reason() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("x.toml"),
        r#"
name = "ext-e2e"
repetitions = 1
cooldown_s = 0
timeout_s = 60
order = "sequential"
[matrix]
policy = ["wrr", "other"]
workload = ["hash"]
processes = [2]
priorities = ["w"]
cpus = ["0"]
[priorities.w]
mode = "weights"
weight = [1, 3]
[workloads.hash]
duration_s = 0.5
[wrr]
quantum_ms = 10
mechanism = "ext"
"#,
    )
    .unwrap();
    let o = schedlab(&["run", "x.toml", "--db", "t.db"], dir.path());
    assert!(o.status.success(), "{}", text(&o));
    let conn = rusqlite::Connection::open(dir.path().join("t.db")).unwrap();
    let (status, reason, extra): (String, String, Option<String>) = conn
        .query_row(
            "SELECT status, reason, extra_json FROM runs WHERE policy = 'wrr'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    match expected_absence() {
        Some(why) => {
            assert_eq!(status, "skipped", "{reason}");
            assert!(reason.contains("wrr.mechanism = \"ext\""), "{reason}");
            assert!(reason.contains(why), "expected {why:?} in: {reason}");
        }
        None => {
            assert_eq!(status, "ok", "{reason}");
            let extra = extra.unwrap_or_default();
            assert!(extra.contains("\"mechanism\":\"ext\""), "{extra}");
            let slices: i64 = conn
                .query_row("SELECT COUNT(*) FROM slices", [], |r| r.get(0))
                .unwrap();
            assert!(slices > 10, "only {slices} slices from the kernel");
        }
    }
    let other: String = conn
        .query_row("SELECT status FROM runs WHERE policy = 'other'", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(other, "ok", "the rest of the campaign runs");
}

#[test]
fn env_says_whether_ext_can_run() {
    let dir = tempfile::tempdir().unwrap();
    let o = schedlab(&["env"], dir.path());
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let ext_line = out
        .lines()
        .find(|l| l.trim_start().starts_with("ext "))
        .unwrap_or_else(|| panic!("no ext line in:\n{out}"));
    match expected_absence() {
        Some(why) => assert!(
            ext_line.contains("absent") && ext_line.contains(why),
            "{ext_line}"
        ),
        None => assert!(ext_line.contains("available"), "{ext_line}"),
    }
    let kernel_line = out
        .lines()
        .find(|l| l.trim_start().starts_with("kernel ") && !l.starts_with("kernel"))
        .unwrap_or_else(|| panic!("no sched_ext kernel line in:\n{out}"));
    let has_scx = Path::new("/sys/kernel/sched_ext/state").exists();
    assert_eq!(
        kernel_line.contains("not in this kernel"),
        !has_scx,
        "{kernel_line}"
    );
    let o = schedlab(&["env", "--json"], dir.path());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["sched_ext"]["state"].is_null(), !has_scx, "{v}");
}
