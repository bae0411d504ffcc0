use super::*;
use crate::synth::record::{Recorder, tests::two_tasks};

fn run(id: i64, workload: &str, kind: &str, policy: &str, makespan_ms: i64) -> ReportRun {
    ReportRun {
        id,
        seq: id,
        policy: policy.into(),
        workload: workload.into(),
        workload_kind: kind.into(),
        processes: 1,
        priority_mode: "none".into(),
        cpus: "0".into(),
        cpu_list: "0".into(),
        rt_runtime_us: None,
        rep: id,
        status: "ok".into(),
        reason: String::new(),
        makespan_ns: Some(makespan_ms * 1_000_000),
        cpu_util: None,
        load_avg_1m: None,
        environment_id: 1,
        others_runnable: None,
        steal_pct: None,
        other_cpu_pct: None,
        interrupts: None,
        softirqs: None,
        slice_us: None,
        ext_scheduler: None,
        machine: None,
        by: None,
        not_given: Default::default(),
        cpu_busy_pct: Vec::new(),
    }
}

fn recording() -> Recording {
    let (events, tasks) = two_tasks();
    let mut r = Recorder::new(&[100], &tasks, 1000, 10_000);
    for e in &events {
        r.event(e);
    }
    r.finish()
}

/// `pipe` (command) and its replay under OTHER and FIFO; three OTHER
/// repetitions of each, one FIFO original (untraced), no FIFO replay
/// trace.
fn campaign() -> Vec<ReportRun> {
    vec![
        run(1, "pipe", "command", "other", 100),
        run(2, "pipe", "command", "other", 120),
        run(3, "pipe", "command", "other", 90),
        run(4, "replay", "replay", "other", 300),
        run(5, "replay", "replay", "other", 104),
        run(6, "replay", "replay", "other", 101),
        run(7, "pipe", "command", "fifo", 50),
        run(8, "replay", "replay", "fifo", 80),
    ]
}

fn link() -> Link {
    Link {
        replay: "replay".into(),
        original: "pipe".into(),
        captured: "policy other, cpus 0".into(),
    }
}

#[test]
fn the_median_runs_are_asked_for_and_compared_figure_by_figure() {
    let runs = campaign();
    // OTHER: pipe's median is run 1 (100 ms), the replay's run 5 (104 ms).
    let mut want = wanted(&runs, &[link()]);
    want.sort_unstable();
    assert_eq!(want, [1, 5, 7, 8]);
    let mut recs = HashMap::new();
    recs.insert(1, Ok(recording()));
    recs.insert(5, Ok(recording()));
    recs.insert(7, Err("run 7 has no trace".to_string()));
    recs.insert(8, Ok(recording()));
    let p = pairings(&runs, &[link()], &recs);
    assert_eq!(p.len(), 2);
    let other = &p[0];
    assert_eq!(other.condition, "OTHER, cpus 0");
    assert!(other.captured);
    assert_eq!((other.original_run, other.replay_run), (Some(1), Some(5)));
    assert_eq!((other.original_runs, other.replay_runs), (3, 3));
    let fig = |p: &Pairing, f: &str| p.rows.iter().find(|r| r.figure == f).cloned();
    let m = fig(other, "makespan").unwrap();
    assert_eq!(m.pass, Some(true), "{m:?}");
    assert!(m.replay.contains("+4.0 %"), "{m:?}");
    for f in [
        "voluntary switches",
        "involuntary switches",
        "wake-up latency p50",
        "wake-up latency p99",
        "KS distance, CPU bursts",
    ] {
        assert!(fig(other, f).is_some(), "{f}: {:?}", other.rows);
    }
    assert!(
        fig(other, "KS distance, CPU bursts").unwrap().pass == Some(true),
        "the same recording on both sides"
    );
    assert!(other.notes.is_empty());
    // FIFO: the original is untraced: only the makespan, and why.
    let fifo = &p[1];
    assert!(!fifo.captured);
    assert_eq!(fifo.rows.len(), 1);
    let m = fig(fifo, "makespan").unwrap();
    assert_eq!(m.pass, Some(false), "80 against 50 ms: {m:?}");
    assert!(
        fifo.notes[0].contains("run 7 has no trace"),
        "{:?}",
        fifo.notes
    );
    assert!(fig(fifo, "KS distance, CPU bursts").is_none());
}

#[test]
fn without_an_original_it_says_it_cannot_compare() {
    let runs: Vec<ReportRun> = campaign()
        .into_iter()
        .filter(|r| r.workload != "pipe")
        .collect();
    let p = pairings(&runs, &[link()], &HashMap::new());
    assert_eq!(p.len(), 2);
    for x in &p {
        assert!(x.rows.is_empty());
        assert!(
            x.notes[0].contains("no ok run of the original (pipe)"),
            "{:?}",
            x.notes
        );
    }
    let unnamed = Link {
        original: String::new(),
        ..link()
    };
    let p = pairings(&campaign(), &[unnamed], &HashMap::new());
    assert!(p[0].rows.is_empty());
    assert!(
        p[0].notes[0].contains("names no original"),
        "{:?}",
        p[0].notes
    );
}
