//! The report's replay section (issue 32) end to end: a traced shell
//! pipeline is synthesized into a replay; one campaign then runs the
//! pipeline and its replay (pasted in as `replay`) traced under OTHER and
//! BATCH on CPU 0; `schedlab report` sets the replay beside the pipeline
//! under each policy, with each figure's rule and verdict, marks the
//! policy it was captured in, and says it cannot compare where the
//! original did not run.
//!
//! Needs root (tracefs, a cgroup per worker): it fails instead of
//! skipping under `SCHEDLAB_REQUIRE_ROOT=1`.

use std::path::Path;

mod common;
use common::text;

const SPEC: &str = r#"
name = "pipeline"
repetitions = 1
cooldown_s = 0
timeout_s = 60
[matrix]
policy = ["other"]
workload = ["pipe"]
processes = [1]
cpus = ["0"]
[workloads.pipe]
kind = "command"
argv = ["sh", "-c", "i=0; while [ $i -lt 1500 ]; do echo $i; i=$((i+1)); done | while read l; do :; done"]
"#;

fn run(dir: &Path, args: &[&str]) -> std::process::Output {
    common::schedlab_default_journals(args, dir)
}

#[test]
fn the_report_sets_a_replay_beside_its_original_under_each_policy() {
    let euid = schedlab::sys::proc::euid();
    if !schedlab::testing::require(
        euid == 0,
        format!("tracing a command needs root (tracefs, cgroups; euid is {euid})"),
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("s.toml"), SPEC).unwrap();
    let o = run(d, &["run", "s.toml", "--db", "t.db", "--trace", "--quiet"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = run(
        d,
        &[
            "synthesize",
            "--db",
            "t.db",
            "--run",
            "1",
            "-o",
            "replay.toml",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let replay: toml::Table = std::fs::read_to_string(d.join("replay.toml"))
        .unwrap()
        .parse()
        .unwrap();
    let table = replay["workloads"]["replay"].clone();
    assert_eq!(table["original"].as_str(), Some("pipe"), "{table}");
    assert_eq!(
        table["captured"].as_str(),
        Some("policy other, cpus 0"),
        "{table}"
    );
    // One campaign with both, under OTHER (captured) and BATCH.
    let mut spec: toml::Table = SPEC.parse().unwrap();
    spec["workloads"]
        .as_table_mut()
        .unwrap()
        .insert("replay".into(), table);
    let m = spec["matrix"].as_table_mut().unwrap();
    m.insert(
        "policy".into(),
        toml::Value::Array(vec!["other".into(), "batch".into()]),
    );
    m.insert(
        "workload".into(),
        toml::Value::Array(vec!["pipe".into(), "replay".into()]),
    );
    std::fs::write(d.join("both.toml"), toml::to_string(&spec).unwrap()).unwrap();
    let o = run(
        d,
        &["run", "both.toml", "--db", "both.db", "--trace", "--quiet"],
    );
    assert!(o.status.success(), "{}", text(&o));
    let o = run(
        d,
        &["report", "--db", "both.db", "--format", "md", "-o", "-"],
    );
    let md = text(&o);
    assert!(o.status.success(), "{md}");
    let at = md
        .find("Replay against original")
        .expect("the replay section");
    // Up to the next section's heading.
    let section = &md[at..];
    let section = &section[..section[1..].find("\n## ").map_or(section.len(), |e| e + 1)];
    eprintln!("{}", &section[..section.len().min(4000)]);
    assert!(
        section.contains("replay against pipe under OTHER, cpus 0 (captured here)"),
        "{section}"
    );
    assert!(
        section.contains("replay against pipe under BATCH, cpus 0:"),
        "{section}"
    );
    // Each figure a row of each table (cells are padded), with its rule.
    let rows = |prefix: &str| {
        section
            .lines()
            .filter(|l| l.starts_with(&format!("| {prefix}")))
            .count()
    };
    for figure in [
        "makespan",
        "CPU, whole tree",
        "CPU per task",
        "voluntary switches",
        "involuntary switches",
        "wake-up latency p50",
        "wake-up latency p99",
        "KS distance, CPU bursts",
    ] {
        assert_eq!(rows(figure), 2, "{figure} under both policies: {section}");
    }
    for rule in ["| within 10 %", "| D ≤ 0.1", "| within 15 %"] {
        assert!(section.contains(rule), "{rule}: {section}");
    }
    // The JSON holds the same figures, two conditions.
    let o = run(
        d,
        &["report", "--db", "both.db", "--format", "json", "-o", "-"],
    );
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let pairs = v["replay"].as_array().unwrap_or_else(|| panic!("{v}"));
    assert_eq!(pairs.len(), 2, "{pairs:?}");
    assert!(
        pairs
            .iter()
            .all(|p| p["figures"].as_array().unwrap().len() >= 9)
    );
    let o = run(
        d,
        &[
            "report",
            "--db",
            "both.db",
            "--format",
            "html",
            "-o",
            "both.html",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let html = std::fs::read_to_string(d.join("both.html")).unwrap();
    assert!(
        html.contains("<section id=\"replay\">"),
        "no replay section"
    );
    assert!(html.contains("KS distance, CPU bursts"));
    // The replay's database alone has no original: said, no figure.
    let o = run(
        d,
        &[
            "run",
            "replay.toml",
            "--db",
            "alone.db",
            "--trace",
            "--quiet",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let o = run(
        d,
        &["report", "--db", "alone.db", "--format", "md", "-o", "-"],
    );
    let md = text(&o);
    assert!(
        md.contains("cannot compare: no ok run of the original (pipe)"),
        "{md}"
    );
}
