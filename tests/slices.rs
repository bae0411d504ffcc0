//! The EEVDF slice as a campaign factor (`matrix.slice_us`): what each
//! worker asked for is what the kernel reports back (`sched_getattr`), fair
//! hogs beside the workers keep the kernel's default, and the factor is
//! refused where it means nothing.

mod common;
use common::{schedlab, skip_unless, text};

#[test]
fn a_custom_slice_is_read_back_as_set() {
    if !skip_unless(
        schedlab::sys::sched::custom_slice_honoured(),
        "this kernel does not honour custom fair slices (Linux 6.12+ needed)",
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("slice.toml"),
        r#"
name = "slices"
repetitions = 1
cooldown_s = 0
timeout_s = 20
order = "sequential"
[matrix]
policy = ["other", "batch"]
workload = ["spin"]
processes = [2]
cpus = ["0"]
slice_us = [100, 3000, 100000]
[workloads.spin]
kind = "pi"
duration_s = 0.1
[hog]
policy = "other"
count = 2
cpus = "0"
"#,
    )
    .unwrap();
    let out = schedlab(&["run", "slice.toml", "--db", "t.db"], dir.path());
    assert!(out.status.success(), "{}", text(&out));
    let conn = rusqlite::Connection::open(dir.path().join("t.db")).unwrap();
    let mut stmt = conn
        .prepare(
            "SELECT r.policy, r.slice_us, p.role, p.slice_ns FROM processes p JOIN runs r ON r.id = p.run_id \
             WHERE r.status = 'ok' ORDER BY r.seq, p.process_index",
        )
        .unwrap();
    let rows: Vec<(String, i64, String, Option<i64>)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    // 2 policies × 3 slices, each with 2 workers and 2 hogs.
    assert_eq!(rows.len(), 24, "{rows:?}");
    for (policy, asked_us, role, got_ns) in &rows {
        match role.as_str() {
            "worker" => assert_eq!(
                *got_ns,
                Some(asked_us * 1000),
                "{policy} worker asked {asked_us} µs"
            ),
            "hog" => {
                // The hogs ask nothing: the kernel's base slice, the same
                // in every run, and never the extremes asked of workers.
                let got = got_ns.expect("a fair hog reports its slice");
                assert!((100_000..100_000_000).contains(&got), "hog slice {got} ns");
            }
            other => panic!("unexpected role {other}"),
        }
    }
    let hog_slices: std::collections::BTreeSet<i64> = rows
        .iter()
        .filter(|r| r.2 == "hog")
        .filter_map(|r| r.3)
        .collect();
    assert_eq!(hog_slices.len(), 1, "{hog_slices:?}");
    // The export carries the factor and the granted slice.
    let csv = schedlab(&["export", "--db", "t.db"], dir.path());
    let body = String::from_utf8_lossy(&csv.stdout);
    let header: Vec<&str> = body.lines().next().unwrap().split(',').collect();
    assert!(header.contains(&"slice_us") && header.contains(&"slice_ns"));
}

#[test]
fn slices_are_refused_where_they_mean_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "[matrix]\npolicy = [\"fifo\"]\nslice_us = [1000]\n",
            "matrix.slice_us",
            "fair policies other and batch only",
        ),
        (
            "[matrix]\nslice_us = [50]\n",
            "matrix.slice_us",
            "out of the kernel's range 100..=100000",
        ),
        (
            "[hog]\npolicy = \"fifo\"\ncount = 2\n",
            "hog.count",
            "one RT hog at most",
        ),
        (
            "[hog]\npolicy = \"other\"\nrt_priority = 5\n",
            "hog.rt_priority",
            "has no RT priority",
        ),
    ];
    for (body, key, message) in cases {
        std::fs::write(dir.path().join("bad.toml"), body).unwrap();
        let o = schedlab(&["plan", "bad.toml"], dir.path());
        let out = text(&o);
        assert_eq!(o.status.code(), Some(2), "{body}: {out}");
        assert!(
            out.contains(key) && out.contains(message),
            "{body}: expected {key} / {message} in: {out}"
        );
    }
}
