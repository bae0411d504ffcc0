//! Tests of the analysis on stored campaigns.

use super::comparisons::min_exact_p;
use super::conditions::{cell, resamples_for};
use super::*;
use crate::fields::Field;
use crate::policy::ProcSched;
use crate::record::{KernelCounts, ProcessRecord, RunStatus};
use crate::report::sections::Section;
use crate::testing::synth::{synthetic_env, synthetic_process, synthetic_record};

/// A campaign of pi × 2 processes with the given per-run wall times
/// (s) per policy, analysed on wall time only.
fn analysed(samples: &[(&str, Vec<f64>)]) -> Analysis {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("t.db")).unwrap();
    let policies: Vec<String> = samples.iter().map(|(p, _)| format!("\"{p}\"")).collect();
    let toml = format!(
        "name = \"t\"\n[matrix]\npolicy = [{}]\nworkload = [\"pi\"]\nprocesses = [2]\n",
        policies.join(", ")
    );
    let spec = crate::spec::load(&toml, "t", &[]).unwrap();
    let c = store.create_campaign(&spec, &toml, &[], 1, 0).unwrap();
    let plan = crate::plan::expand(&spec, 1);
    let env = synthetic_env(2);
    let mut runs = Vec::new();
    for (policy, values) in samples {
        let mut run = plan
            .iter()
            .find(|r| r.policy.name() == *policy)
            .unwrap()
            .clone();
        for (k, &v) in values.iter().enumerate() {
            let proc_ = |index: u32| {
                let base = synthetic_process(
                    index,
                    ProcSched {
                        policy: run.policy,
                        nice: Some(0),
                        rt_priority: None,
                        dl_runtime_ns: None,
                        dl_deadline_ns: None,
                        dl_period_ns: None,
                        weight: None,
                        slice_ns: None,
                    },
                    (v * 1e9) as u64,
                    100_000,
                );
                ProcessRecord {
                    kernel: base
                        .kernel
                        .with(Field::Nvcsw, Some(1))
                        .with(Field::Nivcsw, Some(2))
                        .with(Field::RunNs, Some(100_000_000))
                        .with(Field::WaitNs, Some(0))
                        .with(Field::Timeslices, Some(3)),
                    work: Some(1000),
                    work_unit: "iterations".into(),
                    ..base
                }
            };
            run.key = format!("{policy}-{k}");
            run.seq = runs.len();
            run.rep = k as u32 + 1;
            let mut rec = synthetic_record(
                &run,
                &env,
                vec![0, 1],
                0,
                Some(0.1),
                vec![proc_(0), proc_(1)],
            );
            rec.cpu_util = Some(0.5);
            runs.push(rec);
        }
    }
    store.insert_runs(c.id, &runs).unwrap();
    let opts = Options {
        metrics: vec![Metric::Wall],
        ..Options::default()
    };
    analyse(&store, &opts).unwrap()
}

#[test]
fn campaigns_without_ok_runs_still_report() {
    use crate::report::{Format, Report};
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("t.db")).unwrap();
    let toml = "name = \"t\"\n[matrix]\npolicy = [\"fifo\"]\nworkload = [\"pi\"]\n";
    let spec = crate::spec::load(toml, "t", &[]).unwrap();
    let c = store.create_campaign(&spec, toml, &[], 1, 3).unwrap();
    // No run stored yet.
    let r = Report::build(&store, &Options::default()).unwrap();
    for f in [Format::Html, Format::Md, Format::Json] {
        assert!(!r.render(f).is_empty());
    }
    assert!(
        r.render(Format::Md)
            .contains("The campaign is incomplete: 0 of 3")
    );
    // Only skipped runs.
    let mut run = crate::plan::expand(&spec, 1).swap_remove(0);
    run.key = "k".into();
    run.seq = 0;
    run.processes = 1;
    run.rep = 1;
    let mut skipped = synthetic_record(&run, &synthetic_env(2), vec![0, 1], 0, None, Vec::new());
    skipped.status = RunStatus::Skipped;
    skipped.reason = "SCHED_FIFO needs CAP_SYS_NICE".into();
    skipped.makespan_ns = None;
    skipped.cpu_util = None;
    store.insert_runs(c.id, &[skipped]).unwrap();
    let r = Report::build(&store, &Options::default()).unwrap();
    let md = r.render(Format::Md);
    assert!(md.contains("SCHED_FIFO needs CAP_SYS_NICE"), "{md}");
    assert!(
        md.contains("0 ok, 0 failed, 0 timed out, 1 skipped"),
        "{md}"
    );
    let html = r.render(Format::Html);
    assert!(!html.contains("data-kind=\"bars\""));
    let v: serde_json::Value = serde_json::from_str(&r.render(Format::Json)).unwrap();
    assert_eq!(v["failures"]["runs"][0]["status"], "skipped");
}

fn seq(start: f64, step: f64, n: usize) -> Vec<f64> {
    (0..n).map(|i| start + step * i as f64).collect()
}

#[test]
fn clearly_different_policies_give_one_finding_in_the_right_direction() {
    let a = analysed(&[("fifo", seq(2.0, 0.01, 10)), ("other", seq(1.0, 0.01, 10))]);
    assert_eq!(a.comparisons.len(), 1);
    let c = &a.comparisons[0];
    assert_eq!(c.verdict, Verdict::Different);
    assert_eq!(
        (c.a.as_str(), c.b.as_str()),
        ("other", "fifo"),
        "lower mean first"
    );
    let r = c.ratio.unwrap();
    assert!((r - 1.045 / 2.045).abs() < 1e-9, "{r}");
    let (lo, hi) = c.ratio_ci.unwrap();
    assert!(lo < r && r < hi && hi < 1.0);
    assert!(c.p_adjusted.unwrap() < 0.001);
    assert!(
        c.sentence
            .starts_with("pi, 2 processes: OTHER wall time is 0.51× FIFO's (95% CI "),
        "{}",
        c.sentence
    );
    assert!(
        c.sentence.ends_with("p < 0.001, n = 10 vs 10)"),
        "{}",
        c.sentence
    );
    // Both conditions used the bootstrap (n ≥ 10) with a recorded seed.
    let ci = a.conditions[0].cells[0].ci.as_ref().unwrap();
    assert_eq!(ci.method, CiMethod::Bootstrap);
    assert!(ci.seed.is_some());
}

#[test]
fn identical_samples_are_not_separated() {
    let v = vec![3.1, 2.9, 3.0, 3.2, 2.8, 3.05];
    let a = analysed(&[("other", v.clone()), ("rr", v)]);
    let c = &a.comparisons[0];
    assert_eq!(c.verdict, Verdict::NotSeparated);
    assert_eq!(c.ratio, Some(1.0));
    assert!(c.p_adjusted.unwrap() > 0.9);
    assert!(
        c.sentence.starts_with(
            "pi, 2 processes: the data do not separate OTHER and RR on wall time (ratio 1.00, CI "
        ),
        "{}",
        c.sentence
    );
    assert_eq!(a.count_verdict(Verdict::Different), 0);
}

#[test]
fn not_separated_says_the_smallest_change_that_could_have_been_seen() {
    // 6 runs a side with a CV of about 4 %, one test (wall time only):
    // d = mann_whitney_detectable_d(6, 6, 0.05, 0.8) pooled sds of the mean.
    let v = vec![3.1, 2.9, 3.0, 3.2, 2.8, 3.05];
    let w: Vec<f64> = v.iter().map(|x| x * 1.01).collect();
    let a = analysed(&[("other", v.clone()), ("rr", w.clone())]);
    let c = &a.comparisons[0];
    assert_eq!(c.verdict, Verdict::NotSeparated);
    let d = c.detectable.as_ref().unwrap();
    let (sv, sw) = (
        crate::stats::summarize(&v).unwrap(),
        crate::stats::summarize(&w).unwrap(),
    );
    let pooled = ((sv.sd * sv.sd + sw.sd * sw.sd) / 2.0).sqrt();
    let want = crate::stats::mann_whitney_detectable_d(6, 6, 0.05, 0.8).unwrap() * pooled
        / c.mean_b.unwrap();
    assert!((d.relative.unwrap() - want).abs() < 1e-9, "{d:?} vs {want}");
    assert!(want > 0.05 && want < 0.2, "{want}");
    let pct = format!("{} %", crate::report::fmt::sig(100.0 * want, 2));
    assert!(
        c.sentence.ends_with(&format!(
            "; a change smaller than {pct} could not be seen with 6 runs a side"
        )),
        "{}",
        c.sentence
    );
    // The table says it too.
    let md = crate::report::sections::ComparisonsSection.blocks(&a);
    let text = crate::report::blocks::markdown(&md);
    assert!(
        text.contains(&format!("not separated (changes < {pct} unseen)")),
        "{text}"
    );
    // Separated comparisons carry none.
    let far: Vec<f64> = v.iter().map(|x| x * 2.0).collect();
    let a = analysed(&[("other", v), ("rr", far)]);
    assert_eq!(a.comparisons[0].verdict, Verdict::Different);
    assert!(a.comparisons[0].detectable.is_none());
}

#[test]
fn one_run_per_side_is_too_few_to_compare() {
    let a = analysed(&[("other", vec![1.0]), ("fifo", vec![2.0])]);
    let c = &a.comparisons[0];
    assert_eq!(c.verdict, Verdict::TooFewRuns);
    assert!(c.mann_whitney.is_none() && c.p_adjusted.is_none());
    assert!(
        c.sentence
            .contains("too few runs to compare OTHER and FIFO"),
        "{}",
        c.sentence
    );
    let cell = &a.conditions[0].cells[0];
    assert_eq!(cell.n, 1);
    assert!(cell.ci.is_none());
    assert_eq!(cell.summary.as_ref().unwrap().sd, 0.0);
}

#[test]
fn all_equal_values_give_no_nan_and_no_difference() {
    let a = analysed(&[("other", vec![5.0; 4]), ("batch", vec![5.0; 4])]);
    let c = &a.comparisons[0];
    assert_eq!(c.verdict, Verdict::NotSeparated);
    assert_eq!(c.mann_whitney.as_ref().unwrap().p, 1.0);
    assert_eq!(c.ratio_ci, Some((1.0, 1.0)));
    assert!(a.outliers.is_empty());
    let json = serde_json::to_string(&a).unwrap();
    assert!(!json.contains("NaN"));
}

#[test]
fn an_outlier_is_flagged_and_named_but_kept() {
    let v = vec![35.1, 34.8, 35.6, 618.0, 35.3, 34.9, 36.0, 35.2, 35.4, 34.7];
    let a = analysed(&[("other", v.clone()), ("fifo", seq(35.0, 0.1, 10))]);
    assert_eq!(a.outliers.len(), 1);
    let o = &a.outliers[0];
    assert_eq!(o.value, 618.0);
    assert_eq!(o.rep, 4);
    assert!(o.z > 1000.0);
    assert!((o.times_median.unwrap() - 618.0 / 35.25).abs() < 1e-9);
    let cell = &a
        .conditions
        .iter()
        .find(|c| c.policy == "other")
        .unwrap()
        .cells[0];
    assert_eq!(cell.n, 10, "the outlier stays in the statistics");
    assert!(cell.summary.as_ref().unwrap().max == 618.0);
    assert!(cell.skewed);
    let r = crate::report::Report::with_sections(
        &Store::open(std::path::Path::new(":memory:")).unwrap(),
        &Options::default(),
        Vec::new(),
    );
    assert!(r.is_err(), "an empty database has no campaign");
    let md = crate::report::sections::OutliersSection.markdown(&a);
    let id = o.run_id.to_string();
    assert!(
        md.lines()
            .any(|l| l.split('|').nth(1).map(str::trim) == Some(id.as_str())),
        "{md}"
    );
    assert!(md.contains("618 s"), "{md}");
}

#[test]
fn smallest_exact_p() {
    // 2 / C(6, 3) = 0.1: three runs per side can never reach p < 0.05.
    assert!((min_exact_p(3, 3) - 0.1).abs() < 1e-12);
    assert!((min_exact_p(5, 5) - 2.0 / 252.0).abs() < 1e-12);
    assert!((min_exact_p(10, 10) - 2.0 / 184_756.0).abs() < 1e-15);
    assert_eq!(min_exact_p(1, 1), 1.0);
}

#[test]
fn resample_budget() {
    assert_eq!(resamples_for(2000, 20), 2000);
    assert_eq!(resamples_for(2000, 500), 500);
    assert_eq!(resamples_for(2000, 100_000), MIN_RESAMPLES);
    assert_eq!(resamples_for(100, 100_000), 100);
}

#[test]
fn cells_choose_their_interval() {
    let o = Options::default();
    let one = cell(Metric::Wall, vec![1], vec![3.0], "x", &o);
    assert_eq!(one.n, 1);
    assert!(one.ci.is_none());
    let few = cell(Metric::Wall, vec![1, 2, 3], vec![1.0, 1.1, 1.2], "x", &o);
    assert_eq!(few.ci.as_ref().unwrap().method, CiMethod::T);
    let many: Vec<f64> = (0..12).map(|i| 10.0 + f64::from(i) * 0.1).collect();
    let c = cell(Metric::Wall, (0..12).collect(), many, "x", &o);
    let ci = c.ci.as_ref().unwrap();
    assert_eq!(ci.method, CiMethod::Bootstrap);
    assert!(ci.seed.is_some() && ci.resamples == Some(2000));
    // Skewed by an outlier: bootstrap even with few runs, and flagged.
    let s = cell(
        Metric::Wall,
        (0..6).collect(),
        vec![35.1, 34.8, 35.6, 618.0, 35.3, 34.9],
        "x",
        &o,
    );
    assert!(s.skewed);
    assert_eq!(s.ci.as_ref().unwrap().method, CiMethod::Bootstrap);
    assert_eq!(s.flagged, vec![false, false, false, true, false, false]);
    // All equal: no NaN anywhere, nothing flagged.
    let e = cell(Metric::Wall, (0..4).collect(), vec![2.0; 4], "x", &o);
    assert_eq!(e.summary.as_ref().unwrap().sd, 0.0);
    assert!(!e.skewed && e.flagged.iter().all(|f| !f));
    let ci = e.ci.unwrap();
    assert_eq!((ci.lo, ci.hi), (2.0, 2.0));
}

// ------------------------------------------ without a database ---

use crate::store::{ReportProcess, ReportRun};

/// A run of the in-memory campaign.
pub(super) fn mem_run(id: i64, policy: &str, rep: i64, status: &str, makespan_s: f64) -> ReportRun {
    ReportRun {
        id,
        seq: id,
        policy: policy.into(),
        workload: "pi".into(),
        workload_kind: "pi".into(),
        processes: 2,
        priority_mode: "none".into(),
        cpus: "all".into(),
        cpu_list: "0-1".into(),
        rt_runtime_us: None,
        rep,
        status: status.into(),
        reason: if status == "ok" { "" } else { "exit code 1" }.into(),
        makespan_ns: Some((makespan_s * 1e9) as i64),
        cpu_util: Some(0.9),
        load_avg_1m: Some(0.5 + id as f64 / 100.0),
        environment_id: 1,
        others_runnable: Some(0),
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

/// A worker of an in-memory run: `wall_s` of wall time, all of it on a CPU.
fn mem_process(run_id: i64, index: i64, wall_s: f64) -> ReportProcess {
    let ns = (wall_s * 1e9) as i64;
    ReportProcess {
        kernel: KernelCounts::default()
            .with(Field::Nvcsw, Some(1))
            .with(Field::Nivcsw, Some(10 * (index as u64 + 1)))
            .with(Field::RunNs, Some(ns as u64))
            .with(Field::WaitNs, Some(0))
            .with(Field::Timeslices, Some(5))
            .of_metrics(),
        run_id,
        process_index: index,
        nice: Some(0),
        rt_priority: None,
        wall_ns: ns,
        usage: crate::store::ReportUsage {
            utime_us: ns as u64 / 1000,
            stime_us: 0,
        },
        work: Some(1000),
        end_ns: Some(ns),
    }
}

/// OTHER and FIFO, 6 repetitions each (FIFO twice as slow), and a failed
/// FIFO run: analysed from plain data, no SQLite.
fn mem_campaign() -> ReportData {
    let mut runs = Vec::new();
    let mut processes = Vec::new();
    let mut id = 0;
    for (policy, base) in [("fifo", 2.0), ("other", 1.0)] {
        for rep in 1..=6 {
            id += 1;
            let wall = base + 0.01 * rep as f64;
            runs.push(mem_run(id, policy, rep, "ok", wall));
            // Rows in no particular order, as the database gives them.
            processes.push(vec![mem_process(id, 1, wall), mem_process(id, 0, wall)]);
        }
    }
    id += 1;
    runs.push(mem_run(id, "fifo", 7, "failed", 0.0));
    processes.push(Vec::new());
    ReportData {
        campaign: ReportCampaign {
            id: 3,
            name: "in memory".into(),
            description: String::new(),
            seed: 1,
            scale: 1.0,
            planned_runs: 13,
            created_unix_ms: 0,
            schedlab_version: "0.1.0".into(),
            spec_json: r#"{"policies": ["other", "fifo"]}"#.into(),
            campaigns: Vec::new(),
            by: None,
        },
        runs,
        process_rows: 24,
        processes,
        environments: Vec::new(),
        work_units: vec![("pi".into(), "iterations".into())],
    }
}

#[test]
fn an_in_memory_campaign_is_analysed_without_a_database() {
    let a = analyse_data(mem_campaign(), &Options::default());
    assert_eq!(a.campaign.id, 3);
    assert_eq!((a.counts.ok, a.counts.failed), (12, 1));
    assert_eq!(a.process_rows, 24);
    // Levels in the spec's order; one group, OTHER first.
    assert_eq!(a.factors.policies, ["other", "fifo"]);
    assert_eq!(a.factors.workloads[0].work_unit, "iterations");
    assert_eq!(a.groups.len(), 1);
    assert_eq!(a.groups[0].label, "pi, 2 processes");
    let labels: Vec<&str> = a.conditions.iter().map(|c| c.label.as_str()).collect();
    assert_eq!(labels, ["pi, 2 processes, OTHER", "pi, 2 processes, FIFO"]);
    assert_eq!(a.conditions[1].runs.failed, 1);
    assert_eq!(a.problems.len(), 1);
    assert_eq!(a.problems[0].label, "pi, 2 processes, FIFO");
    // Wall time: OTHER 1.01..1.06 s against FIFO 2.01..2.06 s.
    let wall = a.metric_index(Metric::Wall).unwrap();
    let other = &a.conditions[0].cells[wall];
    assert_eq!(other.n, 6);
    assert!((other.summary.as_ref().unwrap().mean - 1.035).abs() < 1e-9);
    let c = a
        .comparisons
        .iter()
        .find(|c| c.metric == Metric::Wall)
        .unwrap();
    assert_eq!((c.a.as_str(), c.b.as_str()), ("other", "fifo"));
    assert_eq!(c.verdict, Verdict::Different);
    assert!(
        c.sentence
            .starts_with("pi, 2 processes: OTHER wall time is 0."),
        "{}",
        c.sentence
    );
    // Involuntary switches per process are 10 and 20 in every run: the
    // processes were sorted by index, and the per-process summary has both.
    let niv = a.metric_index(Metric::Nivcsw).unwrap();
    let pp = a.conditions[0].cells[niv].per_process.as_ref().unwrap();
    assert_eq!((pp.n, pp.min, pp.max), (12, 10.0, 20.0));
    assert_eq!(a.fairness.len(), 2);
    assert!(a.outliers.is_empty() && a.scaling.is_empty() && a.shares.is_empty());
    let load = a.load.as_ref().unwrap();
    assert!((load.min - 0.51).abs() < 1e-12 && (load.max - 0.63).abs() < 1e-12);
}

/// A program's tree whose switches this kernel did not give: in the
/// OTHER runs (a `command` workload) no process has voluntary switches,
/// and two of six have no involuntary ones. Those metrics are absent for
/// the runs without them (not averaged as 0), the report says why in the
/// runs' own words, and FIFO's runs, which have them, are untouched.
#[test]
fn a_condition_whose_runs_lack_a_figure_has_it_absent_with_why() {
    let mut data = mem_campaign();
    let why = "no taskstats exit record of the tree's top process (pid 9) arrived";
    for (run, rows) in data.runs.iter_mut().zip(&mut data.processes) {
        if run.policy != "other" {
            continue;
        }
        run.workload_kind = "command".into();
        run.not_given
            .insert("voluntary_switches".into(), why.to_string());
        for p in rows.iter_mut() {
            p.kernel.set(Field::Nvcsw, None);
            if run.rep <= 2 {
                p.kernel.set(Field::Nivcsw, None);
            }
        }
        if run.rep <= 2 {
            run.not_given
                .insert("involuntary_switches".into(), why.to_string());
        }
    }
    let a = analyse_data(data, &Options::default());
    let (nv, niv) = (
        a.metric_index(Metric::Nvcsw).unwrap(),
        a.metric_index(Metric::Nivcsw).unwrap(),
    );
    let other = &a.conditions[0];
    assert_eq!(other.label, "pi, 2 processes, OTHER");
    assert_eq!(other.cells[nv].n, 0);
    assert!(other.cells[nv].summary.is_none() && other.cells[nv].per_process.is_none());
    // Involuntary switches: the four runs that have them, 10 and 20 each
    // (mean 15), not 6 runs with two at 0 (mean 10).
    assert_eq!(other.cells[niv].n, 4);
    assert_eq!(other.cells[niv].summary.as_ref().unwrap().mean, 15.0);
    let fifo = &a.conditions[1];
    assert_eq!((fifo.cells[nv].n, fifo.cells[niv].n), (6, 6));
    let absent: Vec<(usize, Metric, usize, usize)> = a
        .absent
        .iter()
        .map(|x| (x.condition, x.metric, x.runs_without, x.runs))
        .collect();
    assert_eq!(
        absent,
        [(0, Metric::Nvcsw, 6, 6), (0, Metric::Nivcsw, 2, 6)]
    );
    assert_eq!(
        a.absent[0].sentence(),
        format!(
            "voluntary context switches: not given for any of its 6 ok runs (not given by this kernel: {why})"
        )
    );
    assert_eq!(
        a.absent[1].why,
        [format!("not given by this kernel: {why}")]
    );
    // No comparison claims a difference on a metric one side lacks.
    assert!(
        a.comparisons
            .iter()
            .filter(|c| c.metric == Metric::Nvcsw)
            .all(|c| c.verdict != Verdict::Different)
    );
}

/// A run in which only some workers have a figure lacks it: its mean is
/// not taken over the workers that have it. Here one of the two workers
/// of two OTHER runs has no voluntary switches (its other figures are
/// whole): those runs are left out of that metric and said to lack it.
#[test]
fn a_run_whose_figure_only_some_workers_have_lacks_it() {
    let mut data = mem_campaign();
    for (run, rows) in data.runs.iter_mut().zip(&mut data.processes) {
        if run.policy == "other" && run.rep <= 2 {
            rows[0].kernel.set(Field::Nvcsw, None);
        }
    }
    let a = analyse_data(data, &Options::default());
    let (nv, wall) = (
        a.metric_index(Metric::Nvcsw).unwrap(),
        a.metric_index(Metric::Wall).unwrap(),
    );
    let other = &a.conditions[0];
    assert_eq!(other.label, "pi, 2 processes, OTHER");
    assert_eq!((other.cells[nv].n, other.cells[wall].n), (4, 6));
    let absent: Vec<(usize, Metric, usize, usize)> = a
        .absent
        .iter()
        .map(|x| (x.condition, x.metric, x.runs_without, x.runs))
        .collect();
    assert_eq!(absent, [(0, Metric::Nvcsw, 2, 6)]);
    assert_eq!(a.absent[0].why, ["not recorded for this run"]);
}

#[test]
fn the_same_data_give_the_same_analysis_as_the_store() {
    // The store's loaded data, analysed without it, give what `analyse`
    // gives.
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("t.db")).unwrap();
    crate::testing::synth::create(&mut store, &crate::testing::synth::SynthConfig::small())
        .unwrap();
    let opts = Options::default();
    let data = store.load_report_data(None).unwrap();
    assert_eq!(data.processes.len(), data.runs.len());
    assert_eq!(
        data.processes.iter().map(Vec::len).sum::<usize>() as u64,
        data.process_rows
    );
    let from_data = analyse_data(data, &opts);
    let from_store = analyse(&store, &opts).unwrap();
    assert_eq!(from_data, from_store);
}

#[test]
fn the_store_folds_each_run_once_by_process_index() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("t.db")).unwrap();
    crate::testing::synth::create(&mut store, &crate::testing::synth::SynthConfig::small())
        .unwrap();
    let mut made = 0;
    let data = store
        .load_report_data_with(None, |c| {
            made += 1;
            assert_eq!(c.name, "synthetic");
            |run: &ReportRun, rows: &[ReportProcess]| {
                assert!(rows.iter().all(|p| p.run_id == run.id));
                let index: Vec<i64> = rows.iter().map(|p| p.process_index).collect();
                (run.id, run.status.clone(), index)
            }
        })
        .unwrap();
    assert_eq!(made, 1);
    assert_eq!(data.processes.len(), data.runs.len());
    let mut rows = 0;
    for (r, (id, status, index)) in data.runs.iter().zip(&data.processes) {
        assert_eq!(r.id, *id);
        if status == "ok" {
            assert_eq!(*index, (0..r.processes).collect::<Vec<_>>());
        } else {
            assert!(index.is_empty());
        }
        rows += index.len() as u64;
    }
    assert_eq!(rows, data.process_rows);
}

/// `mem_campaign` with each ok run's interrupts + softirqs per second per
/// CPU (2 CPUs, `noisy` ids at 50 000, the others about 1 000).
fn noisy_campaign(noisy: &[i64]) -> ReportData {
    let mut data = mem_campaign();
    for r in data.runs.iter_mut().filter(|r| r.status == "ok") {
        let per_cpu_s = if noisy.contains(&r.id) {
            50_000.0
        } else {
            1_000.0 + r.id as f64
        };
        let events = per_cpu_s * 2.0 * r.makespan_ns.unwrap() as f64 / 1e9;
        r.interrupts = Some((events / 2.0).round() as i64);
        r.softirqs = Some((events / 2.0).round() as i64);
    }
    data
}

#[test]
fn noisy_runs_are_flagged_and_the_findings_checked_without_them() {
    // One noisy OTHER run: OTHER is still faster without it.
    let a = analyse_data(noisy_campaign(&[8]), &Options::default());
    let ids: Vec<i64> = a.noise.noisy_runs.iter().map(|r| r.0).collect();
    assert_eq!(ids, [8]);
    assert_eq!(a.noise.measured_runs, 12);
    assert!(a.noise.without.as_ref().unwrap().same(), "{:?}", a.noise);
    // Kept in the figures: nothing is dropped.
    assert_eq!(a.counts.ok, 12);
    // Four noisy FIFO runs: without them FIFO has too few runs to test, so
    // the wall-time finding is lost.
    let a = analyse_data(noisy_campaign(&[1, 2, 3, 4]), &Options::default());
    assert_eq!(a.noise.noisy_runs.len(), 4);
    let without = a.noise.without.as_ref().unwrap();
    assert!(!without.same());
    assert!(
        without.lost.iter().any(|s| s.contains("wall time")),
        "{without:?}"
    );
    assert!(without.gained.is_empty(), "{without:?}");
    // No noise recorded (an older database): nothing flagged, no re-test.
    let a = analyse_data(mem_campaign(), &Options::default());
    assert_eq!((a.noise.measured_runs, a.noise.without.clone()), (0, None));
}
