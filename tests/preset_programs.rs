//! The presets of programs run end to end, each cut to one repetition:
//! `homework` (seed 000's C programs compiled by their setup, beside the
//! built-in pi and copy: both kinds of pi need about the same CPU time) and
//! `benchmarks` (each tool's parser gives its figures, under OTHER and, on
//! CPU 0 for a fraction of a second, FIFO).

mod common;
use common::{schedlab_isolated, serial, text};

use std::collections::BTreeMap;
use std::path::Path;

fn in_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
}

/// Runs `preset` with one repetition under OTHER and FIFO and returns the
/// exported rows.
fn run_preset(preset: &str, dir: &Path) -> Vec<serde_json::Value> {
    let o = schedlab_isolated(
        &[
            "run",
            "--preset",
            preset,
            "--set",
            "repetitions=1",
            "--set",
            "cooldown_s=0",
            "--set",
            r#"matrix.policy=["other","fifo"]"#,
            "--db",
            "t.db",
            "--quiet",
        ],
        dir,
    );
    assert!(o.status.success(), "{}", text(&o));
    let o = schedlab_isolated(&["export", "--db", "t.db", "--format", "json"], dir);
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    match v {
        serde_json::Value::Array(a) => a,
        other => other["rows"].as_array().cloned().unwrap_or_default(),
    }
}

fn field<'a>(r: &'a serde_json::Value, key: &str) -> &'a str {
    r[key].as_str().unwrap_or_default()
}

#[test]
fn homework_s_c_programs_agree_with_the_built_in_workloads() {
    let _one_at_a_time = serial();
    if !schedlab::testing::require(
        schedlab::sys::proc::euid() == 0,
        "command workloads need root (a cgroup per worker)",
    ) || !common::may_use_rt()
        || !schedlab::testing::require_tool(in_path("cc"), "cc is missing (apt-get install gcc)")
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let rows = run_preset("homework", dir.path());
    // 4 workloads × 2 policies × 2 processes.
    assert_eq!(rows.len(), 16, "{rows:?}");
    let mut cpu_ms: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for r in &rows {
        assert_eq!(field(r, "status"), "ok", "{r}");
        let cpu = r["utime_us"].as_f64().unwrap() + r["stime_us"].as_f64().unwrap();
        cpu_ms
            .entry(field(r, "workload").to_string())
            .or_default()
            .push(cpu / 1e3);
        if field(r, "workload").ends_with("copy") || field(r, "workload") == "rw-c" {
            assert!(r["fig_mb_per_s"].as_f64().unwrap() > 0.0, "{r}");
        }
    }
    let mean = |w: &str| cpu_ms[w].iter().sum::<f64>() / cpu_ms[w].len() as f64;
    // The same 1e8 terms of the series, in C and in schedlab: the same
    // order of CPU time (compilers differ; one tree also has its shell).
    let ratio = mean("pi-c") / mean("pi");
    assert!(
        (0.33..3.0).contains(&ratio),
        "pi in C / built in: {ratio} ({cpu_ms:?})"
    );
}

#[test]
fn benchmarks_give_each_tool_s_figures() {
    let _one_at_a_time = serial();
    let tools = ["hackbench", "perf", "cyclictest", "stress-ng", "chrt"];
    let missing: Vec<&str> = tools.into_iter().filter(|t| !in_path(t)).collect();
    if !schedlab::testing::require(
        schedlab::sys::proc::euid() == 0,
        "command workloads need root (a cgroup per worker)",
    ) || !common::may_use_rt()
        || !schedlab::testing::require_tool(
            missing.is_empty(),
            format!("missing: {missing:?} (apt-get install rt-tests linux-perf stress-ng)"),
        )
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let rows = run_preset("benchmarks", dir.path());
    assert_eq!(rows.len(), 8, "{rows:?}");
    for r in &rows {
        assert_eq!(field(r, "status"), "ok", "{r}");
        let figure = match field(r, "workload") {
            "hackbench" => "fig_time_s",
            "messaging" => "fig_total_s",
            "cyclictest" => "fig_max_us",
            "stress-ng" => "fig_cpu_bogo_ops_s",
            other => panic!("unexpected workload {other}"),
        };
        assert!(r[figure].as_f64().is_some_and(|v| v > 0.0), "{figure}: {r}");
    }
}
