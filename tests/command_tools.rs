//! The command workload's parsers against the benchmarks installed on this
//! machine, run live for well under a few seconds each at small sizes (the
//! unit tests read output saved once in `src/workload/command/parsers/
//! samples/`; these catch a newer tool whose output moved). schbench is
//! not packaged: only its saved output is tested. cyclictest runs under
//! SCHED_OTHER, pinned to CPU 0, for one second.

mod common;

use common::require_tool;
use schedlab::workload::command::parsers::{Parsed, Tool};
use std::process::Command;

/// Run `argv`, returning (stdout, stderr), or None when the tool is absent.
fn run(argv: &[&str], dir: &std::path::Path) -> Option<(String, String)> {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {}", argv[0])])
        .output()
        .is_ok_and(|o| o.status.success());
    if !require_tool(found, format!("{} is not installed", argv[0])) {
        return None;
    }
    let o = Command::new(argv[0])
        .args(&argv[1..])
        .current_dir(dir)
        .output()
        .unwrap();
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    );
    assert!(o.status.success(), "{argv:?} failed: {out}\n{err}");
    Some((out, err))
}

fn fig(p: &Parsed, name: &str) -> f64 {
    let v = p
        .figures
        .get(name)
        .unwrap_or_else(|| panic!("{name}: {p:?}"))
        .value;
    assert!(v.is_finite(), "{name} = {v}");
    v
}

#[test]
fn hackbench_live() {
    let dir = tempfile::tempdir().unwrap();
    let Some((out, _)) = run(&["hackbench", "-g", "1", "-f", "4", "-l", "50"], dir.path()) else {
        return;
    };
    let p = Tool::Hackbench.parse(&out).unwrap();
    assert!(fig(&p, "time_s") > 0.0, "{out}");
}

#[test]
fn perf_bench_sched_live() {
    let dir = tempfile::tempdir().unwrap();
    let Some((out, _)) = run(
        &["perf", "bench", "sched", "pipe", "-l", "20000"],
        dir.path(),
    ) else {
        return;
    };
    let p = Tool::PerfBenchSched.parse(&out).unwrap();
    let (total, per_op) = (fig(&p, "total_s"), fig(&p, "usecs_per_op"));
    // 20000 round trips: total ≈ 20000 × µs/op (perf prints the total to
    // the millisecond: enough round trips that the rounding stays small).
    assert!(
        (total * 1e6 / 20000.0 - per_op).abs() / per_op < 0.05,
        "{out}"
    );
    let Some((out, _)) = run(
        &["perf", "bench", "sched", "messaging", "-g", "1", "-l", "20"],
        dir.path(),
    ) else {
        return;
    };
    assert!(fig(&Tool::PerfBenchSched.parse(&out).unwrap(), "total_s") > 0.0);
}

#[test]
fn fio_live() {
    let dir = tempfile::tempdir().unwrap();
    let Some((out, _)) = run(
        &[
            "fio",
            "--name=t",
            "--filename=t.dat",
            "--size=2M",
            "--bs=4k",
            "--rw=randread",
            "--ioengine=psync",
            "--runtime=200ms",
            "--time_based",
            "--output-format=json",
        ],
        dir.path(),
    ) else {
        return;
    };
    let p = Tool::Fio.parse(&out).unwrap();
    assert!(fig(&p, "read_iops") > 0.0);
    assert!(fig(&p, "read_bw_mib_s") > 0.0);
    assert!(fig(&p, "read_clat_p99_us") >= fig(&p, "read_clat_p50_us"));
    assert!(!p.percentiles["read_clat"].is_empty());
}

#[test]
fn stress_ng_live_yaml_and_log() {
    let dir = tempfile::tempdir().unwrap();
    let Some((_, err)) = run(
        &[
            "stress-ng",
            "--cpu",
            "1",
            "--timeout",
            "1",
            "--metrics",
            "--yaml",
            "m.yaml",
        ],
        dir.path(),
    ) else {
        return;
    };
    let yaml = std::fs::read_to_string(dir.path().join("m.yaml")).unwrap();
    let from_yaml = Tool::StressNg.parse(&yaml).unwrap();
    let from_log = Tool::StressNg.parse(&err).unwrap();
    assert!(fig(&from_yaml, "cpu_bogo_ops") > 0.0);
    // The log rounds to two decimals: the same run either way.
    assert_eq!(
        fig(&from_yaml, "cpu_bogo_ops"),
        fig(&from_log, "cpu_bogo_ops")
    );
    assert!((fig(&from_yaml, "cpu_bogo_ops_s") - fig(&from_log, "cpu_bogo_ops_s")).abs() < 0.01);
}

#[test]
fn cyclictest_live_json_with_a_histogram() {
    let dir = tempfile::tempdir().unwrap();
    // SCHED_OTHER (no -p), pinned to CPU 0, one second at 1 ms.
    let Some((out, _)) = run(
        &[
            "cyclictest",
            "-a",
            "0",
            "-t",
            "1",
            "-i",
            "1000",
            "-D",
            "1",
            "-q",
            "-h",
            "2000",
            "--json=c.json",
        ],
        dir.path(),
    ) else {
        return;
    };
    let json = std::fs::read_to_string(dir.path().join("c.json")).unwrap();
    let p = Tool::Cyclictest.parse(&json).unwrap();
    let cycles = fig(&p, "cycles");
    assert!(cycles > 100.0, "{json}");
    let h = &p.histograms["wakeup"];
    assert_eq!((h.total() + h.overflows) as f64, cycles);
    assert!(fig(&p, "max_us") >= fig(&p, "min_us"));
    // Its stdout (the histogram text) gives the same buckets.
    let text = Tool::Cyclictest.parse(&out).unwrap();
    assert_eq!(&text.histograms["wakeup"], h);
}
