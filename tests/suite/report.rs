//! Tests of `schedlab report`: a golden Markdown report of a fixed synthetic
//! campaign, the structure of the HTML and JSON reports, and an end-to-end
//! run (real campaign → HTML → headless Chromium screenshot).

use std::path::{Path, PathBuf};

use schedlab::report::{Format, Metric, Options, Report};
use schedlab::store::Store;
use schedlab::testing::synth::{self, SynthConfig};

use crate::common;
use common::{schedlab, text};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("fixtures")
        .join(name)
}

/// The small synthetic campaign in a fresh database.
pub(crate) fn small_campaign(dir: &Path) -> (Store, i64) {
    let mut store = Store::open(&dir.join("synthetic.db")).unwrap();
    let (id, rows) = synth::create(&mut store, &SynthConfig::small()).unwrap();
    assert!(rows > 0);
    (store, id)
}

/// A readable line diff: the differing region of each hunk with context.
fn diff(want: &str, got: &str) -> String {
    let w: Vec<&str> = want.lines().collect();
    let g: Vec<&str> = got.lines().collect();
    let mut out = String::new();
    let mut shown = 0;
    let n = w.len().max(g.len());
    let mut i = 0;
    while i < n && shown < 60 {
        if w.get(i) != g.get(i) {
            let from = i.saturating_sub(2);
            out.push_str(&format!("@@ line {} @@\n", i + 1));
            for k in from..i {
                out.push_str(&format!("  {}\n", w.get(k).unwrap_or(&"")));
            }
            let mut j = i;
            while j < n && w.get(j) != g.get(j) && j < i + 12 {
                if let Some(l) = w.get(j) {
                    out.push_str(&format!("- {l}\n"));
                }
                if let Some(l) = g.get(j) {
                    out.push_str(&format!("+ {l}\n"));
                }
                j += 1;
                shown += 1;
            }
            i = j;
        } else {
            i += 1;
        }
    }
    if w.len() != g.len() {
        out.push_str(&format!("(expected {} lines, got {})\n", w.len(), g.len()));
    }
    out
}

#[test]
fn markdown_report_of_a_synthetic_campaign_matches_the_golden_file() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = small_campaign(dir.path());
    let got = Report::build(&store, &Options::default())
        .unwrap()
        .render(Format::Md);
    let golden = fixture("report.golden.md");
    if std::env::var_os("SCHEDLAB_BLESS").is_some_and(|v| v == "1") {
        // Blessing compares nothing: never in CI, and listed as not run.
        assert!(
            std::env::var_os("CI").is_none(),
            "SCHEDLAB_BLESS=1 under CI would pass without comparing"
        );
        std::fs::create_dir_all(golden.parent().unwrap()).unwrap();
        std::fs::write(&golden, &got).unwrap();
        let _ = common::skip_unless(
            false,
            format!(
                "SCHEDLAB_BLESS=1: wrote {} instead of comparing",
                golden.display()
            ),
        );
        return;
    }
    let want = std::fs::read_to_string(&golden).unwrap_or_else(|e| {
        panic!(
            "cannot read {}: {e}; create it with SCHEDLAB_BLESS=1 cargo test --test report",
            golden.display()
        )
    });
    if want != got {
        panic!(
            "the Markdown report differs from {} (regenerate with SCHEDLAB_BLESS=1 after checking the change):\n{}",
            golden.display(),
            diff(&want, &got)
        );
    }
}

#[test]
fn a_campaign_named_like_html_reaches_markdown_as_text() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("synthetic.db")).unwrap();
    let config = SynthConfig {
        name: "<img src=x onerror=alert(1)>".into(),
        ..SynthConfig::small()
    };
    let (id, _) = synth::create(&mut store, &config).unwrap();
    let md = report_of(&store, id, None).render(Format::Md);
    assert!(md.contains("\\<img src=x"), "{}", &md[..md.len().min(400)]);
    assert!(
        !md.replace("\\<", "").contains("<img"),
        "a raw tag is left: {}",
        &md[..md.len().min(400)]
    );
}

#[test]
fn synthetic_report_states_the_model_effects() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = small_campaign(dir.path());
    let r = Report::build(&store, &Options::default()).unwrap();
    let md = r.markdown();
    let a = &r.analysis;
    let sentences: Vec<&str> = a.comparisons.iter().map(|c| c.sentence.as_str()).collect();
    let has = |s: &str| sentences.iter().any(|x| x.starts_with(s));
    // Copy is I/O-bound in the model and OTHER waits less for I/O than FIFO.
    assert!(
        has("copy, 2 processes, priorities spread: OTHER wall time is 0.7"),
        "{sentences:#?}"
    );
    // FIFO runs to completion: no preemptions.
    assert!(has(
        "pi, 8 processes, priorities uniform: FIFO has no involuntary context switches (mean 0) against OTHER's"
    ));
    // pi is the same work under OTHER and BATCH.
    assert!(has(
        "pi, 2 processes, priorities uniform: the data do not separate OTHER and BATCH on wall time"
    ));
    // Two FIFO runs left: too few to compare.
    assert!(has(
        "copy, 8 processes, priorities spread: too few runs to compare OTHER and FIFO on wall time (n = 10 vs 2;"
    ));
    // The slow run is named, failures are listed with their reasons.
    assert_eq!(
        a.outliers
            .iter()
            .filter(|o| o.metric == Metric::Wall)
            .count(),
        1
    );
    assert!(md.contains("16.5×"), "{md}");
    assert!(md.contains("No space left on device"));
    assert!(md.contains("timed out"));
    assert!(md.contains("SCHED_FIFO is not permitted"));
    // Nice-weight shares are checked for OTHER/BATCH under spread priorities.
    assert!(md.contains("CPU share against the nice-weight prediction"));
}

/// Count occurrences of `data-kind="K" data-metric="M" data-workload="W"`.
pub(crate) fn charts(html: &str, kind: &str, metric: &str, workload: &str) -> usize {
    html.matches(&format!(
        "data-kind=\"{kind}\" data-metric=\"{metric}\" data-workload=\"{workload}\""
    ))
    .count()
}

#[test]
fn html_report_is_self_contained_with_one_chart_per_metric_and_workload() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = small_campaign(dir.path());
    let html = Report::build(&store, &Options::default())
        .unwrap()
        .render(Format::Html);
    assert!(html.starts_with("<!DOCTYPE html>"));
    for banned in ["<script", "<link", "https://", "src=\"", "@import", "url("] {
        assert!(!html.contains(banned), "the page must not contain {banned}");
    }
    for w in ["pi", "copy"] {
        for m in Metric::ALL {
            assert_eq!(
                charts(&html, "bars", m.name(), w),
                1,
                "bars {} {w}",
                m.name()
            );
            assert_eq!(
                charts(&html, "spread", m.name(), w),
                1,
                "spread {} {w}",
                m.name()
            );
            // Scaling lines for every metric that varies (work is fixed).
            let scaling = charts(&html, "scaling", m.name(), w);
            match m {
                Metric::Work => assert_eq!(scaling, 0),
                Metric::Wall | Metric::CpuPct | Metric::Wait | Metric::Makespan => {
                    assert_eq!(scaling, 1, "scaling {} {w}", m.name())
                }
                _ => assert!(scaling <= 1),
            }
        }
        assert_eq!(charts(&html, "fairness", "jain_cpu", w), 1);
    }
    // Share charts for OTHER and BATCH under spread nice, both workloads and
    // both process counts.
    assert_eq!(html.matches("data-kind=\"shares\"").count(), 8);
    // Every mark has a tooltip.
    let marks = html.matches("<g class=\"mark").count();
    assert!(marks > 1000, "{marks}");
    assert_eq!(
        html.matches("<g class=\"mark").count(),
        html.matches("<g class=\"mark")
            .count()
            .min(html.matches("<title>").count())
    );
    for id in [
        "summary",
        "charts",
        "comparisons",
        "scaling",
        "fairness",
        "outliers",
        "failures",
        "environment",
        "conditions",
        "method",
    ] {
        assert!(
            html.contains(&format!("<section id=\"{id}\">")),
            "section {id}"
        );
    }
}

#[test]
fn metric_selection_and_json_summary() {
    let dir = tempfile::tempdir().unwrap();
    let (store, id) = small_campaign(dir.path());
    let opts = Options {
        campaign: Some(id),
        metrics: vec![Metric::Nivcsw, Metric::Wall],
        ..Options::default()
    };
    let r = Report::build(&store, &opts).unwrap();
    assert_eq!(
        r.analysis.settings.metrics,
        vec![Metric::Wall, Metric::Nivcsw]
    );
    let html = r.render(Format::Html);
    assert_eq!(html.matches("data-kind=\"bars\"").count(), 4);
    assert_eq!(charts(&html, "bars", "utime", "pi"), 0);
    let v: serde_json::Value = serde_json::from_str(&r.render(Format::Json)).unwrap();
    assert_eq!(v["schedlab_report"], 1);
    assert_eq!(v["campaign"]["id"], id);
    assert_eq!(
        v["settings"]["metrics"],
        serde_json::json!(["wall", "nivcsw"])
    );
    let findings = v["summary"]["findings"].as_array().unwrap();
    assert!(!findings.is_empty());
    assert_eq!(v["failures"]["runs"].as_array().unwrap().len(), 10);
    assert!(v["conditions"]["conditions"].as_array().unwrap().len() == 24);
    assert!(v["comparisons"][0]["p_adjusted"].is_number());
    // An unknown campaign is a clear error.
    let err = Report::build(
        &store,
        &Options {
            campaign: Some(99),
            ..Options::default()
        },
    )
    .err()
    .unwrap()
    .to_string();
    assert!(err.contains("campaign 99 is not in this database"), "{err}");
}

// ------------------------------------------- WRR, RT sweep, matmul ---

use schedlab::fields::Field;
use schedlab::plan::Run;
use schedlab::policy::{Policy, ProcSched};
use schedlab::record::{KernelCounts, ProcessRecord, RunRecord, RunStatus, SliceRow, Usage};
use schedlab::sys::envinfo::EnvSnapshot;

fn snapshot(rt_runtime_us: i64) -> EnvSnapshot {
    EnvSnapshot {
        kernel_release: "6.18.44".into(),
        kernel_version: "#1 SMP PREEMPT_DYNAMIC".into(),
        machine: "x86_64".into(),
        hostname: "synthetic".into(),
        host_id: None,
        cpu_model: "Synthetic CPU".into(),
        cpus_online: 2,
        cpus_allowed: vec![0, 1],
        hz: Some(250),
        preempt_model: "none (dynamic)".into(),
        sched_rt_runtime_us: Some(rt_runtime_us),
        sched_rt_period_us: Some(1_000_000),
        sched_rr_timeslice_ms: Some(100),
        sched_autogroup_enabled: Some(1),
        fair_base_slice_ns: None,
        cgroup_version: "v2".into(),
        rt_group_sched: false,
        root_cgroup_rt_runtime_us: None,
        virtualization: "none".into(),
        sched_ext: None,
        schedlab_version: "0.1.0".into(),
        load_avg_1m: Some(0.1),
        topology: None,
        guest: None,
    }
}

/// A measured process: `cpu_ms` of CPU time, `work` done, ended at `end_ms`.
fn process(
    index: u32,
    role: &str,
    sched: ProcSched,
    cpu_ms: f64,
    work: Option<u64>,
    end_ms: f64,
) -> ProcessRecord {
    ProcessRecord {
        index,
        role: role.into(),
        pid: 1000 + index as i32,
        sched,
        start_ns: Some(0),
        end_ns: Some((end_ms * 1e6) as u64),
        wall_ns: (end_ms * 1e6) as u64,
        usage: Usage {
            utime_us: (cpu_ms * 1e3) as u64,
            maxrss_kb: 1000,
            ..Usage::default()
        }
        .into(),
        kernel: KernelCounts::default()
            .with(Field::RunNs, Some((cpu_ms * 1e6) as u64))
            .with(Field::WaitNs, Some(0))
            .with(Field::Timeslices, Some(10)),
        work,
        work_unit: "hashes".into(),
        slice_ns: None,
        latency: Default::default(),
        figures: Default::default(),
        exit: "exit code 0".into(),
        ok: true,
        stderr_tail: String::new(),
    }
}

fn sched(policy: Policy) -> ProcSched {
    ProcSched {
        policy,
        nice: None,
        rt_priority: None,
        dl_runtime_ns: None,
        dl_deadline_ns: None,
        dl_period_ns: None,
        weight: None,
        slice_ns: None,
    }
}

fn record(
    run: Run,
    env: EnvSnapshot,
    makespan_ms: f64,
    processes: Vec<ProcessRecord>,
) -> RunRecord {
    RunRecord {
        run,
        status: RunStatus::Ok,
        reason: String::new(),
        makespan_ns: Some((makespan_ms * 1e6) as u64),
        cpu_util: Some(0.95),
        cpu_list: vec![0],
        started_unix_ms: 1_700_000_000_000,
        env,
        processes,
        slices: Vec::new(),
        extra: serde_json::json!({}),
        interference: Default::default(),
    }
}

/// A campaign of `toml` in the store, every run recorded by `make`.
fn campaign(store: &mut Store, toml: &str, make: impl Fn(&Run, usize) -> RunRecord) -> i64 {
    let spec = schedlab::spec::load(toml, "synthetic", &[]).unwrap();
    let runs = schedlab::plan::expand(&spec, 7);
    let c = store
        .create_campaign(&spec, toml, &[], 7, runs.len())
        .unwrap();
    for (k, run) in runs.iter().enumerate() {
        store.insert_run(c.id, &make(run, k)).unwrap();
    }
    store
        .set_campaign_meta(c.id, 1_700_000_000_000, "0.1.0")
        .unwrap();
    c.id
}

const WEIGHTS: [u32; 3] = [1, 2, 4];

/// Seed 002 in small: weights 1, 2, 4 under WRR (with slices), OTHER and
/// DEADLINE; a duration workload and a fixed-work one.
fn weights_campaign(store: &mut Store) -> i64 {
    let toml = r#"
name = "weights"
repetitions = 3
[matrix]
policy = ["wrr", "other", "deadline"]
workload = ["hash-1s", "hash-1k"]
processes = [3]
priorities = ["w"]
cpus = ["0"]
[priorities.w]
mode = "weights"
weight = [1, 2, 4]
[workloads.hash-1s]
kind = "hash"
duration_s = 1.0
[workloads.hash-1k]
kind = "hash"
hashes = 1000
[wrr]
quantum_ms = 10
"#;
    campaign(store, toml, |run, k| {
        let timed = run.workload.name == "hash-1s";
        let noise = 1.0 + 0.01 * (k % 3) as f64;
        let procs = WEIGHTS
            .iter()
            .enumerate()
            .map(|(i, &w)| {
                let mut s = sched(run.policy);
                match run.policy {
                    Policy::Other => s.nice = Some([5, 2, -1][i]),
                    Policy::Deadline => {
                        s.dl_runtime_ns = Some(1_285_000 * u64::from(w));
                        s.dl_deadline_ns = Some(10_000_000);
                        s.dl_period_ns = Some(10_000_000);
                    }
                    _ => s.weight = Some(w),
                }
                if timed {
                    // Work ∝ weight: 1000 hashes per weight, ±1%.
                    let cpu = 1000.0 * f64::from(w) / 7.0 * noise;
                    process(
                        i as u32,
                        "worker",
                        s,
                        cpu,
                        Some((1000.0 * f64::from(w) * noise) as u64),
                        1000.0,
                    )
                } else {
                    // The heavier first: weight 4 at 3/7 × 3 s, …
                    let end = [3000.0, 2570.0, 1710.0][i] * noise;
                    process(i as u32, "worker", s, 1000.0, Some(1000), end)
                }
            })
            .collect();
        let mut rec = record(run.clone(), snapshot(950_000), 1000.0, procs);
        if run.policy == Policy::Wrr {
            let ms = 1_000_000u64;
            let mut t = 0;
            for round in 0..14 {
                for (i, &w) in WEIGHTS.iter().enumerate() {
                    let len = 10 * ms * u64::from(w);
                    // The last round is cut short by the end of the run.
                    let got = if round == 13 && i == 2 { len / 4 } else { len };
                    rec.slices.push(SliceRow {
                        process_index: i as u32,
                        cpu: 0,
                        planned_start_ns: t,
                        planned_end_ns: t + len,
                        actual_end_ns: t + got + 50_000,
                        cpu_ns: got,
                    });
                    t += got + 50_000;
                }
            }
            rec.extra = serde_json::json!({"wrr": {"mechanism": "fifo", "slices": rec.slices.len(),
                "dispatcher_cpu_ns": 1_000_000, "dispatcher_overhead": 0.001, "dispatcher_rt": true,
                "lateness_p50_ns": 40_000, "lateness_p99_ns": 150_000, "errors": []}});
        }
        rec
    })
}

/// Seed 004 in small: aio beside an RT hog at two runtimes.
fn rt_campaign(store: &mut Store) -> i64 {
    let toml = r#"
name = "rt"
repetitions = 3
[matrix]
policy = ["other"]
workload = ["aio"]
processes = [1]
cpus = ["0"]
rt_runtime_us = [900000, 500000]
[workloads.aio]
duration_s = 1.0
file_bytes = 1_048_576
block_bytes = 4096
queue_depth = 4
[hog]
policy = "fifo"
rt_priority = 50
cpus = "0"
"#;
    campaign(store, toml, |run, _| {
        let rt = run.rt_runtime_us.unwrap();
        let k = run.rep as usize - 1;
        let share = rt as f64 / 1e6;
        let mb = if rt == 900_000 {
            [100.0, 102.0, 98.0]
        } else {
            [110.0, 114.0, 112.0]
        }[k];
        let mut worker = process(
            0,
            "worker",
            sched(Policy::Other),
            100.0,
            Some(1_000_000),
            1000.0,
        );
        // mb MB in the 1 s window from release to the worker's end.
        worker.work = Some((mb * 1e6) as u64);
        worker.work_unit = "bytes".into();
        worker.figures.insert("mb_per_s".into(), mb);
        let mut hog = process(
            1,
            "hog",
            ProcSched::realtime(Policy::Fifo, 50),
            1000.0 * share,
            None,
            1000.0,
        );
        hog.figures.insert("cpu_share".into(), share + 0.01);
        record(run.clone(), snapshot(rt), 1000.0, vec![worker, hog])
    })
}

/// Seed 003's benchmark in small.
fn matmul_campaign(store: &mut Store) -> i64 {
    let toml = r#"
name = "matmul"
repetitions = 2
[matrix]
policy = ["other", "fifo"]
workload = ["mm"]
processes = [2, 4]
cpus = ["0"]
[workloads.mm]
kind = "matmul"
n = 100
multiplies = 50
"#;
    campaign(store, toml, |run, _| {
        // 2·100³·50 flop per process; OTHER at 200 Mflop/s, FIFO at 100.
        let m = run.processes as f64;
        let t_ms = m
            * 1e3
            * if run.policy == Policy::Other {
                0.5
            } else {
                1.0
            };
        let procs = (0..run.processes)
            .map(|i| process(i, "worker", sched(run.policy), t_ms / m, Some(50), t_ms))
            .collect();
        record(run.clone(), snapshot(950_000), t_ms, procs)
    })
}

fn report_of(store: &Store, campaign: i64, gantt_run: Option<i64>) -> Report {
    Report::build(
        store,
        &Options {
            campaign: Some(campaign),
            gantt_run,
            ..Options::default()
        },
    )
    .unwrap()
}

#[test]
fn wrr_rt_sweep_and_matmul_sections_appear_in_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("special.db")).unwrap();
    let w = weights_campaign(&mut store);
    let rt = rt_campaign(&mut store);
    let mm = matmul_campaign(&mut store);

    // Weights: charts, tables, JSON.
    let r = report_of(&store, w, None);
    let html = r.render(Format::Html);
    assert!(html.contains("<section id=\"weights\">"));
    for kind in ["weights-work", "weights-time", "weights-error", "gantt"] {
        assert!(html.contains(&format!("data-kind=\"{kind}\"")), "{kind}");
    }
    assert!(html.contains("data-kind=\"weights-work\" data-workload=\"hash-1s\""));
    assert!(html.contains("data-kind=\"weights-time\" data-workload=\"hash-1k\""));
    assert!(
        !html.contains("<section id=\"rt-bandwidth\">")
            && !html.contains("<section id=\"matmul\">")
    );
    let md = r.render(Format::Md);
    assert!(md.contains("## Weighted round robin and weights"), "{md}");
    assert!(md.contains("**Fold over weight 1: mean work of weight w / mean work of weight 1"));
    assert!(md.contains("### WRR dispatcher"));
    assert!(md.contains("runtime 1285 µs / 10 ms"), "{md}");
    let v: serde_json::Value = serde_json::from_str(&r.render(Format::Json)).unwrap();
    let groups = v["weights"]["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 2);
    let timed = groups.iter().find(|g| g["workload"] == "hash-1s").unwrap();
    assert_eq!(timed["weights"], serde_json::json!([1, 2, 4]));
    let wrr = &timed["contenders"][0];
    assert_eq!(wrr["label"], "WRR (fifo)");
    // Work ∝ weight exactly: fold 4 for weight 4.
    let fold = wrr["per_weight"][2]["work_fold"]["value"].as_f64().unwrap();
    assert!((fold - 4.0).abs() < 1e-9, "{fold}");
    // 13 whole rounds of exact slices: no share error over whole rounds.
    assert_eq!(wrr["whole_rounds"]["rounds"], 3 * 13);
    assert!(wrr["whole_rounds"]["max_abs"].as_f64().unwrap() < 1e-12);
    assert_eq!(wrr["dispatcher"]["runs"], 3);
    let fixed = groups.iter().find(|g| g["workload"] == "hash-1k").unwrap();
    let other = fixed["contenders"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["policy"] == "other")
        .unwrap();
    let tf = other["per_weight"][0]["time_fold"]["value"]
        .as_f64()
        .unwrap();
    assert!((tf - 3000.0 / 1710.0).abs() < 1e-9, "{tf}");
    let gantt = &v["weights"]["gantt"];
    assert_eq!(gantt["slices_total"], 42);
    // Another run for the Gantt chart; an unknown one is an error.
    let ids: Vec<i64> = wrr["run_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_i64().unwrap())
        .collect();
    let chosen = *ids
        .iter()
        .find(|&&i| i != gantt["run_id"].as_i64().unwrap())
        .unwrap();
    let r2 = report_of(&store, w, Some(chosen));
    assert!(
        r2.render(Format::Html)
            .contains(&format!("data-kind=\"gantt\" data-run=\"{chosen}\""))
    );
    assert!(r2.render(Format::Md).contains("chosen with --gantt-run"));
    let err = Report::build(
        &store,
        &Options {
            campaign: Some(w),
            gantt_run: Some(99_999),
            ..Options::default()
        },
    )
    .err()
    .unwrap();
    assert!(format!("{err:#}").contains("--gantt-run 99999"), "{err:#}");

    // RT sweep.
    let r = report_of(&store, rt, None);
    let html = r.render(Format::Html);
    assert!(html.contains("<section id=\"rt-bandwidth\">"));
    assert!(
        html.contains("data-kind=\"rt-throughput\" data-workload=\"aio\" data-policy=\"other\"")
    );
    assert!(html.contains("data-kind=\"rt-hog\""));
    assert!(!html.contains("<section id=\"weights\">"));
    let md = r.render(Format::Md);
    assert!(md.contains("## Real-time bandwidth sweep"));
    assert!(
        md.contains("|              900000 |             0.90 |    3 |         100 |"),
        "{md}"
    );
    assert!(
        !md.contains("different environments"),
        "the swept setting is not a confounder"
    );
    let v: serde_json::Value = serde_json::from_str(&r.render(Format::Json)).unwrap();
    let rows = v["rt-bandwidth"][0]["rows"].as_array().unwrap();
    assert_eq!(rows[0]["rt_runtime_us"], 900_000);
    assert_eq!(rows[1]["throughput"]["mean"], 112.0);
    // 110, 114, 112: sd 2, se 2/√3.
    let se = rows[1]["throughput"]["se"].as_f64().unwrap();
    assert!((se - 2.0 / 3.0_f64.sqrt()).abs() < 1e-12, "{se}");
    assert!((rows[0]["hog_deviation"].as_f64().unwrap() - 0.01).abs() < 1e-9);

    // Matmul.
    let r = report_of(&store, mm, None);
    let html = r.render(Format::Html);
    assert!(html.contains("<section id=\"matmul\">"));
    assert!(html.contains("data-kind=\"matmul-mflops\" data-workload=\"mm\" data-n=\"100\""));
    let md = r.render(Format::Md);
    assert!(md.contains("## Matrix-multiply throughput (Mflop/s)"));
    assert!(md.contains("| 100 |   200 |  100 |"), "{md}");
    let v: serde_json::Value = serde_json::from_str(&r.render(Format::Json)).unwrap();
    let t = &v["matmul"]["tables"][0];
    assert_eq!(t["ms"], serde_json::json!([2, 4]));
    assert_eq!(t["rows"][0]["row"], "OTHER");
    assert_eq!(t["rows"][0]["cells"][1]["mflops"]["mean"], 200.0);
    assert!(v.get("weights").is_none() && v.get("rt-bandwidth").is_none());
}

// ---------------------------------------------------------------- CLI ---

#[test]
fn cli_formats_errors_and_defaults() {
    let dir = tempfile::tempdir().unwrap();
    // The store is closed before schedlab opens the database.
    drop(small_campaign(dir.path()));
    let d = dir.path();
    let md = schedlab(&["report", "--db", "synthetic.db", "--format", "md"], d);
    assert!(md.status.success(), "{}", text(&md));
    assert!(
        String::from_utf8_lossy(&md.stdout)
            .starts_with("# schedlab report: synthetic (campaign 1)")
    );
    let js = schedlab(
        &[
            "report",
            "--db",
            "synthetic.db",
            "--format",
            "json",
            "--metric",
            "wall,nivcsw",
        ],
        d,
    );
    assert!(js.status.success(), "{}", text(&js));
    let v: serde_json::Value = serde_json::from_slice(&js.stdout).unwrap();
    assert_eq!(
        v["settings"]["metrics"],
        serde_json::json!(["wall", "nivcsw"])
    );
    // No -o: HTML goes to report.html; -o x.md picks Markdown.
    let h = schedlab(&["report", "--db", "synthetic.db"], d);
    assert!(h.status.success(), "{}", text(&h));
    assert!(
        std::fs::read_to_string(d.join("report.html"))
            .unwrap()
            .starts_with("<!DOCTYPE html>")
    );
    let m = schedlab(&["report", "--db", "synthetic.db", "-o", "r.md"], d);
    assert!(m.status.success(), "{}", text(&m));
    assert!(
        std::fs::read_to_string(d.join("r.md"))
            .unwrap()
            .starts_with("# schedlab report")
    );
    // Errors: unknown campaign, unknown metric (listing the allowed ones), missing database.
    let e = schedlab(
        &[
            "report",
            "--db",
            "synthetic.db",
            "--campaign",
            "7",
            "--format",
            "md",
        ],
        d,
    );
    assert!(!e.status.success());
    assert!(
        text(&e).contains("campaign 7 is not in this database"),
        "{}",
        text(&e)
    );
    let e = schedlab(
        &["report", "--db", "synthetic.db", "--metric", "wall,bogus"],
        d,
    );
    assert!(!e.status.success());
    let t = text(&e);
    assert!(
        t.contains("bogus") && t.contains("cpu_pct") && t.contains("makespan"),
        "{t}"
    );
    let e = schedlab(&["report", "--db", "missing.db"], d);
    assert!(!e.status.success());
    assert!(text(&e).contains("does not exist"), "{}", text(&e));
}
