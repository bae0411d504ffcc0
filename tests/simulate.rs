//! `schedlab simulate`: a campaign carried out in the model through the
//! same seam, plan, store and report as a measured one, stored as a
//! campaign of the model (never resuming a measured campaign of the same
//! spec), with the schedule the documented policies give.

mod common;
use common::{schedlab, text};

const SPEC: &str = r#"
name = "sim"
repetitions = 2
cooldown_s = 0
[matrix]
policy = ["fifo", "rr", "other"]
workload = ["pi"]
processes = [2]
cpus = ["0"]
[workloads.pi]
kind = "pi"
iterations = 20000000
"#;

fn rows(dir: &std::path::Path, sql: &str) -> Vec<(String, String, i64)> {
    let c = rusqlite::Connection::open(dir.join("t.db")).unwrap();
    let mut st = c.prepare(sql).unwrap();
    st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn a_simulated_campaign_is_stored_and_reported_as_the_model_s() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("s.toml"), SPEC).unwrap();
    let o = schedlab(
        &["simulate", "s.toml", "--db", "t.db", "--quiet"],
        dir.path(),
    );
    assert!(o.status.success(), "{}", text(&o));
    let runs = rows(
        dir.path(),
        "SELECT r.policy, r.status, r.id FROM runs r ORDER BY r.id",
    );
    assert_eq!(runs.len(), 6);
    assert!(runs.iter().all(|r| r.1 == "ok"), "{runs:?}");
    let o = schedlab(&["campaigns", "--db", "t.db"], dir.path());
    assert!(text(&o).contains("model"), "{}", text(&o));
    // FIFO: the second process starts when the first has finished, so it
    // ends at twice the first's time; RR takes 100 ms turns of the same
    // work; OTHER shares: both end near the same time.
    let ends = |policy: &str| -> Vec<i64> {
        let c = rusqlite::Connection::open(dir.path().join("t.db")).unwrap();
        let mut st = c
            .prepare(
                "SELECT p.end_ns FROM processes p JOIN runs r ON r.id = p.run_id \
                 WHERE r.policy = ?1 AND r.rep = 1 ORDER BY p.end_ns",
            )
            .unwrap();
        st.query_map([policy], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    let fifo = ends("fifo");
    let ratio = fifo[1] as f64 / fifo[0] as f64;
    assert!((ratio - 2.0).abs() < 0.02, "FIFO ends {fifo:?}");
    let other = ends("other");
    assert!(
        other[1] as f64 / (other[0] as f64) < 1.2,
        "OTHER ends {other:?}"
    );
    let o = schedlab(&["report", "--db", "t.db", "--format", "md"], dir.path());
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("schedlab report: sim"), "{}", text(&o));
    // The same spec measured into the same database is another campaign.
    let o = schedlab(&["plan", "s.toml", "--db", "t.db"], dir.path());
    assert!(o.status.success(), "{}", text(&o));
    assert!(!text(&o).contains("nothing left to run"), "{}", text(&o));
}
