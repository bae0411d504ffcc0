//! `schedlab synthesize` and `kind = "replay"` (issue 32): a traced shell
//! pipeline (a producer and a consumer process over a pipe, under one
//! shell) is synthesized into a replay spec and rt-app JSON; `--check`
//! replays it under the same condition (traced), and the replay's trace
//! has the same tasks, and the tree's CPU within a generous tolerance of
//! the original's; `--check` writes the fidelity into the replay, and the
//! pipeline run again carrying its replay (`replay` table) is predicted by
//! the model from it ("predicted from its replay, fidelity …" in the
//! report). A run without a trace is refused, naming it.
//!
//! The traced test needs root (tracefs, a cgroup per worker): it fails
//! instead of skipping under `SCHEDLAB_REQUIRE_ROOT=1`.

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
argv = ["sh", "-c", "i=0; while [ $i -lt 4000 ]; do echo $i; i=$((i+1)); done | while read l; do :; done"]
"#;

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
}

#[test]
fn a_traced_pipeline_is_synthesized_and_replayed_with_its_tasks_and_cpu() {
    let euid = schedlab::sys::proc::euid();
    if !schedlab::testing::require(
        euid == 0,
        format!("tracing a command needs root (tracefs, cgroups; euid is {euid})"),
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("s.toml"), SPEC).unwrap();
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
    let mut spec: toml::Table = SPEC.parse().unwrap();
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
