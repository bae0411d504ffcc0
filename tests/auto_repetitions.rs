//! End to end, `repetitions = "auto"` on a tiny spec (seconds): a loose
//! target stops every condition before the most repetitions; a tight one
//! runs them to the most, and run, the report and plan say so.

use std::path::Path;

mod common;
use common::{schedlab, text};

fn spec(target_pct: &str, min: u32, max: u32) -> String {
    format!(
        r#"
name = "auto"
repetitions = "auto"
target_ci_pct = {target_pct}
min_repetitions = {min}
max_repetitions = {max}
cooldown_s = 0
timeout_s = 30
[matrix]
policy = ["other", "batch"]
workload = ["pi"]
processes = [1]
cpus = ["0"]
[workloads.pi]
iterations = 20_000_000
"#
    )
}

/// Stored runs of each condition (by policy), in campaign `id`.
fn runs_per_policy(dir: &Path, id: i64) -> Vec<(String, i64)> {
    let conn = rusqlite::Connection::open(dir.join("t.db")).unwrap();
    let mut stmt = conn
        .prepare(
            "SELECT policy, COUNT(*) FROM runs WHERE campaign_id = ?1 AND status = 'ok' \
             GROUP BY policy ORDER BY policy",
        )
        .unwrap();
    stmt.query_map([id], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

fn report_html(dir: &Path, id: &str) -> String {
    let o = schedlab(
        &["report", "--db", "t.db", "--campaign", id, "-o", "r.html"],
        dir,
    );
    assert!(o.status.success(), "{}", text(&o));
    std::fs::read_to_string(dir.join("r.html")).unwrap()
}

#[test]
fn a_loose_target_stops_early_and_a_tight_one_runs_to_the_most_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // ±90 %: every condition stops as soon as the rule may (10 runs), 4
    // rounds before the most.
    std::fs::write(d.join("loose.toml"), spec("90", 5, 14)).unwrap();
    let o = schedlab(&["run", "loose.toml", "--db", "t.db"], d);
    assert!(o.status.success(), "{}", text(&o));
    let out = text(&o);
    assert!(out.contains("precision before round 2:"), "{out}");
    assert!(out.contains("8 runs were not needed"), "{out}");
    assert_eq!(
        runs_per_policy(d, 1),
        [("batch".to_string(), 10), ("other".to_string(), 10)]
    );
    let html = report_html(d, "1");
    assert!(html.contains("Repetitions until precise"), "method section");
    assert_eq!(
        html.matches("reached the target after 10 rounds").count(),
        2
    );
    assert!(!html.contains("incomplete"));

    // plan of a tighter spec of the same name estimates from campaign 1.
    std::fs::write(d.join("tight.toml"), spec("0.001", 2, 4)).unwrap();
    let o = schedlab(&["plan", "tight.toml", "--db", "t.db"], d);
    assert!(o.status.success(), "{}", text(&o));
    let out = text(&o);
    assert!(
        out.contains("about 8 runs, from the per-condition CV of campaign 1 (2 of 2 conditions"),
        "{out}"
    );

    // ±0.001 %: out of reach; both conditions run all 4 rounds.
    let o = schedlab(&["run", "tight.toml", "--db", "t.db"], d);
    assert!(o.status.success(), "{}", text(&o));
    assert!(!text(&o).contains("not needed"), "{}", text(&o));
    assert_eq!(
        runs_per_policy(d, 2),
        [("batch".to_string(), 4), ("other".to_string(), 4)]
    );
    let html = report_html(d, "2");
    assert_eq!(
        html.matches("did NOT reach the target of ±0.001 % in the most rounds (4)")
            .count(),
        2,
        "each condition at the most is named"
    );
    assert!(html.contains("2 of 2 conditions did not reach the target precision"));

    // Without the database the plan says it will begin with a pilot.
    let o = schedlab(&["plan", "tight.toml", "--db", "none.db"], d);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("a pilot of min_repetitions (2)"),
        "{}",
        text(&o)
    );
}
