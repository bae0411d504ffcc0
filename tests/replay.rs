//! `schedlab synthesize` and `kind = "replay"` (issue 32): a traced shell
//! pipeline (a producer and a consumer process over a pipe, under one
//! shell) is synthesized into a replay spec and rt-app JSON; `--check`
//! replays it under the same condition (traced), and the replay's trace
//! has the same tasks, and the tree's CPU within a generous tolerance of
//! the original's; `--check` writes the fidelity into the replay, and the
//! pipeline run again carrying its replay (`replay` table) is predicted by
//! the model from it ("predicted from its replay, fidelity …" in the
//! report). The report's replay section sets a replay beside its original
//! under each policy. A run without a trace is refused, naming it.
//!
//! The traced test needs root (tracefs, a cgroup per worker): it fails
//! instead of skipping under `SCHEDLAB_REQUIRE_ROOT=1`.

use std::path::Path;

mod common;
use common::text;

/// The traced pipeline: a producer of `lines` lines and a consumer.
fn pipeline_spec(lines: u32) -> String {
    format!(
        r#"
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
argv = ["sh", "-c", "i=0; while [ $i -lt {lines} ]; do echo $i; i=$((i+1)); done | while read l; do :; done"]
"#
    )
}

/// The pipeline of the synthesize test.
const LINES: u32 = 4000;

const UNTRACED: &str = r#"
name = "untraced"
repetitions = 1
cooldown_s = 0
[matrix]
policy = ["other"]
workload = ["pi"]
processes = [1]
[workloads.pi]
iterations = 1000
"#;

fn run(dir: &Path, args: &[&str]) -> std::process::Output {
    common::schedlab_default_journals(args, dir)
}

#[test]
fn a_run_without_a_trace_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("s.toml"), UNTRACED).unwrap();
    let o = run(
        dir.path(),
        &[
            "run",
            "s.toml",
            "--db",
            "t.db",
            "--quiet",
            "--allow-concurrent",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let o = run(
        dir.path(),
        &["synthesize", "--db", "t.db", "--run", "1", "-o", "r.toml"],
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("run 1 has no trace"), "{}", text(&o));
    assert!(!dir.path().join("r.toml").exists());
    let o = run(
        dir.path(),
        &["synthesize", "--db", "t.db", "--run", "9", "-o", "r.toml"],
    );
    assert!(text(&o).contains("no run 9"), "{}", text(&o));
    // An output that cannot be written is refused first (before the
    // database is even opened), naming the flag that gave it and its path.
    for (extra, names) in [
        (
            ["-o", "no/such/dir/r.toml", "--rt-app", "r.json"],
            "cannot write -o no/such/dir/r.toml: ",
        ),
        (
            ["-o", "r.toml", "--rt-app", "no/such/dir/r.json"],
            "cannot write --rt-app no/such/dir/r.json: ",
        ),
    ] {
        let mut args = vec!["synthesize", "--db", "missing.db", "--run", "1"];
        args.extend(extra);
        let o = run(dir.path(), &args);
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        assert!(
            text(&o).contains(names) && text(&o).contains("directory no/such/dir does not exist"),
            "{}",
            text(&o)
        );
        assert!(!text(&o).contains("missing.db"), "{}", text(&o));
    }
}

#[test]
fn a_traced_pipeline_is_synthesized_and_replayed_with_its_tasks_and_cpu() {
    // Traced campaigns one at a time: they share this CPU 0 and tracefs.
    let _one_at_a_time = common::serial();
    let euid = schedlab::sys::proc::euid();
    if !schedlab::testing::require(
        euid == 0,
        format!("tracing a command needs root (tracefs, cgroups; euid is {euid})"),
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("s.toml"), pipeline_spec(LINES)).unwrap();
    let o = run(
        dir.path(),
        &["run", "s.toml", "--db", "t.db", "--trace", "--quiet"],
    );
    assert!(o.status.success(), "{}", text(&o));
    let o = run(
        dir.path(),
        &[
            "synthesize",
            "--db",
            "t.db",
            "--run",
            "1",
            "-o",
            "replay.toml",
            "--rt-app",
            "replay.json",
            "--check",
            "--check-db",
            "check.db",
        ],
    );
    let out = text(&o);
    eprintln!("{out}");
    assert!(o.status.success(), "{out}");
    let spec = std::fs::read_to_string(dir.path().join("replay.toml")).unwrap();
    assert!(spec.contains("kind = \"replay\""), "{spec}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("replay.json")).unwrap())
            .unwrap();
    assert!(json["tasks"]["t0"].is_object(), "{json}");
    assert!(out.contains("KS distance, CPU bursts"), "{out}");

    let orig_store = schedlab::store::Store::open(&dir.path().join("t.db")).unwrap();
    let orig = schedlab::synth::read_run(&orig_store, 1, false).unwrap();
    let rstore = schedlab::store::Store::open(&dir.path().join("check.db")).unwrap();
    let ids = rstore.campaign_run_ids(1).unwrap();
    assert_eq!(ids.len(), 1);
    let replay = schedlab::synth::read_run(&rstore, ids[0], false).unwrap();
    // The shell and its two subshells (at least), and the same tree again.
    let names = |r: &schedlab::synth::Read| {
        let mut v: Vec<String> = r.recording.tasks.iter().map(|t| t.name.clone()).collect();
        v.sort();
        v
    };
    assert!(orig.recording.tasks.len() >= 3, "{:?}", names(&orig));
    assert_eq!(names(&replay), names(&orig));
    let cpu =
        |r: &schedlab::synth::Read| r.recording.tasks.iter().map(|t| t.cpu_ns).sum::<u64>() as f64;
    let ratio = cpu(&replay) / cpu(&orig);
    eprintln!(
        "tree CPU: original {:.1} ms, replay {:.1} ms, ratio {ratio:.3}",
        cpu(&orig) / 1e6,
        cpu(&replay) / 1e6
    );
    // Generous: a loaded shared machine, and the replay's own futex and
    // fork costs on top of the recorded bursts.
    assert!((0.6..=1.6).contains(&ratio), "ratio {ratio}");
    assert!(spec.contains("fidelity = "), "{spec}");
    the_model_predicts_the_command_from_its_replay(dir.path(), &spec);
}

/// The pipeline with its replay pasted in as `replay`, run once and
/// reported: the model section predicts it from the replay.
fn the_model_predicts_the_command_from_its_replay(dir: &Path, replay_spec: &str) {
    let replay: toml::Table = replay_spec.parse().unwrap();
    let table = replay["workloads"]["replay"].clone();
    let mut spec: toml::Table = pipeline_spec(LINES).parse().unwrap();
    spec["workloads"]["pipe"]
        .as_table_mut()
        .unwrap()
        .insert("replay".into(), table);
    std::fs::write(dir.join("with.toml"), toml::to_string(&spec).unwrap()).unwrap();
    let o = run(dir, &["run", "with.toml", "--db", "with.db", "--quiet"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = run(
        dir,
        &["report", "--db", "with.db", "--format", "md", "-o", "-"],
    );
    let md = text(&o);
    assert!(o.status.success(), "{md}");
    assert!(md.contains("predicted from its replay"), "{md}");
    assert!(
        md.contains("figures within") || md.contains("within; outside"),
        "{md}"
    );
}

/// The report's replay section end to end: the traced pipeline is
/// synthesized into a replay; one campaign then runs the pipeline and its
/// replay (pasted in as `replay`) traced under OTHER and BATCH on CPU 0;
/// `schedlab report` sets the replay beside the pipeline under each
/// policy, with each figure's rule and verdict, marks the policy it was
/// captured in, and says it cannot compare where the original did not run.
const REPORT_LINES: u32 = 1500;

#[test]
fn the_report_sets_a_replay_beside_its_original_under_each_policy() {
    // Traced campaigns one at a time: they share this CPU 0 and tracefs.
    let _one_at_a_time = common::serial();
    let euid = schedlab::sys::proc::euid();
    if !schedlab::testing::require(
        euid == 0,
        format!("tracing a command needs root (tracefs, cgroups; euid is {euid})"),
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("s.toml"), pipeline_spec(REPORT_LINES)).unwrap();
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
    let mut spec: toml::Table = pipeline_spec(REPORT_LINES).parse().unwrap();
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
    check_md_replay_section(&md);
    check_json_and_html(d);
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

/// The Markdown report's replay section: both policies' pairs, every
/// figure a row of each table with its rule.
fn check_md_replay_section(md: &str) {
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
}

/// The JSON report holds the same figures for two conditions, and the HTML
/// report a replay section.
fn check_json_and_html(d: &Path) {
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
}
