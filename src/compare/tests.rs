//! The comparison on plain data (no database): the planted pair's effects
//! are found and nothing else, spec differences refuse without --force and
//! are listed with it, the environment and the renderings; with a margin,
//! an A/A pair is equivalent and a planted slowdown a regression; the
//! latency percentiles as metrics.

use super::analyse::{
    CompareError, CompareOptions, Comparison, Input, MarginVerdict, Verdict, compare,
    parse_margin_pct,
};
use super::environment::EnvField;
use super::render;
use crate::report::analyse::{Analysis, Options, analyse_data};
use crate::report::{Format, Metric};
use crate::testing::planted::{Planted, latency, report_data};

const METRICS: [Metric; 4] = [Metric::Wall, Metric::Utime, Metric::Stime, Metric::Nivcsw];

fn options(force: bool, expect: Vec<EnvField>) -> CompareOptions {
    CompareOptions {
        analysis: Options {
            metrics: METRICS.to_vec(),
            ..Options::default()
        },
        force,
        expect,
        margin_pct: None,
    }
}

fn analyses(cfg: &Planted, opts: &CompareOptions) -> (Analysis, Analysis) {
    (
        analyse_data(report_data(cfg, false, 1).unwrap(), &opts.analysis),
        analyse_data(report_data(cfg, true, 2).unwrap(), &opts.analysis),
    )
}

fn run(cfg: &Planted, opts: &CompareOptions) -> Result<Comparison, CompareError> {
    let (b, c) = analyses(cfg, opts);
    let none = [None];
    compare(
        Input {
            db: "base.db",
            analysis: &b,
            sched_ext: &none,
            latency: None,
        },
        Input {
            db: "cand.db",
            analysis: &c,
            sched_ext: &none,
            latency: None,
        },
        opts,
    )
}

/// The verdicts of a metric's rows.
fn verdicts(c: &Comparison, m: Metric) -> Vec<Verdict> {
    c.rows_of(m).map(|r| r.verdict).collect()
}

#[test]
fn finds_exactly_the_planted_effects() {
    let c = run(&Planted::new(10), &options(false, Vec::new())).unwrap();
    // 2 policies × 2 process counts, 4 metrics.
    assert_eq!(c.comparisons.len(), 16);
    assert!(c.only_in_baseline.is_empty() && c.only_in_candidate.is_empty());
    // Wall time 20 % longer: worse in every condition, ratio near 1.2.
    assert_eq!(verdicts(&c, Metric::Wall), [Verdict::Worse; 4]);
    for r in c.rows_of(Metric::Wall) {
        let ratio = r.ratio.unwrap();
        assert!((ratio - 1.2).abs() < 0.03, "{}: {ratio}", r.condition);
        let (lo, hi) = (r.ci_low.unwrap(), r.ci_high.unwrap());
        assert!(
            lo < ratio && ratio < hi && lo > 1.1 && hi < 1.3,
            "{lo}..{hi}"
        );
        assert!(!r.noise_exceeds_change);
        assert!(r.p_adjusted.unwrap() < 0.05 && r.p_adjusted.unwrap() >= r.p.unwrap());
    }
    // Unchanged: never separated.
    assert_eq!(verdicts(&c, Metric::Nivcsw), [Verdict::NotSeparated; 4]);
    assert_eq!(verdicts(&c, Metric::Utime), [Verdict::NotSeparated; 4]);
    // 5 % better under 15 % noise with 10 runs: not separated, and marked as
    // noise larger than the change.
    assert_eq!(verdicts(&c, Metric::Stime), [Verdict::NotSeparated; 4]);
    for r in c.rows_of(Metric::Stime) {
        assert!(r.noise_exceeds_change, "{}: {:?}", r.condition, r);
        assert!(r.baseline_cv.unwrap() > 0.08, "{:?}", r.baseline_cv);
    }
    assert_eq!(c.count(Verdict::Worse), 4);
    assert_eq!(c.count(Verdict::Better), 0);
    assert_eq!(c.unreachable(), 0);
    // Without a margin a regression is a worse row; every row not separated
    // says what its runs could have seen.
    assert_eq!(c.regressions().len(), 4);
    for r in &c.comparisons {
        assert_eq!(r.detectable.is_some(), r.verdict == Verdict::NotSeparated);
    }
    // The geometric-mean row: wall worse overall, near 1.2.
    let wall = c.summary.iter().find(|s| s.metric == Metric::Wall).unwrap();
    assert_eq!((wall.conditions, wall.worse), (4, 4));
    assert_eq!(wall.verdict, Verdict::Worse);
    let g = wall.geomean_ratio.unwrap();
    assert!((g - 1.2).abs() < 0.02 && wall.ci_low.unwrap() > 1.1, "{g}");
    let ni = c
        .summary
        .iter()
        .find(|s| s.metric == Metric::Nivcsw)
        .unwrap();
    assert_eq!(ni.verdict, Verdict::NotSeparated);
    assert!(ni.ci_low.unwrap() < 1.0 && 1.0 < ni.ci_high.unwrap());
}

#[test]
fn enough_runs_separate_the_small_noisy_improvement() {
    // 600 runs per side: the 5 % improvement under 15 % noise is found, in
    // the metric's direction (system time lower: better), and each row is
    // still marked noisier than the change.
    let c = run(&Planted::new(600), &options(false, Vec::new())).unwrap();
    assert_eq!(verdicts(&c, Metric::Stime), [Verdict::Better; 4]);
    assert!(c.rows_of(Metric::Stime).all(|r| r.noise_exceeds_change));
    assert_eq!(verdicts(&c, Metric::Wall), [Verdict::Worse; 4]);
    assert_eq!(verdicts(&c, Metric::Nivcsw), [Verdict::NotSeparated; 4]);
    let s = c
        .summary
        .iter()
        .find(|s| s.metric == Metric::Stime)
        .unwrap();
    assert_eq!(s.verdict, Verdict::Better);
    assert!(s.ci_high.unwrap() < 1.0);
}

#[test]
fn the_direction_decides_better_or_worse() {
    // The same 20 % rise of wall time is better when the metric is better
    // higher: CPU % falls, so it is worse; work done is unchanged.
    let mut opts = options(false, Vec::new());
    opts.analysis.metrics = vec![Metric::CpuPct, Metric::Work];
    let c = run(&Planted::new(10), &opts).unwrap();
    assert_eq!(verdicts(&c, Metric::CpuPct), [Verdict::Worse; 4]);
    for r in c.rows_of(Metric::CpuPct) {
        assert!(r.ratio.unwrap() < 0.9, "{:?}", r.ratio);
    }
    // Work is fixed (10M iterations): equal on both sides, never separated.
    assert_eq!(verdicts(&c, Metric::Work), [Verdict::NotSeparated; 4]);
    // Candidate faster instead: wall time better, CPU % better.
    let mut cfg = Planted::new(10);
    cfg.wall_factor = 0.8;
    let c = run(&cfg, &opts).unwrap();
    assert_eq!(verdicts(&c, Metric::CpuPct), [Verdict::Better; 4]);
    let c = run(&cfg, &options(false, Vec::new())).unwrap();
    assert_eq!(verdicts(&c, Metric::Wall), [Verdict::Better; 4]);
}

#[test]
fn specs_that_differ_are_refused_without_force_and_listed_with_it() {
    let cfg2 = Planted::new(10);
    // A spec whose processes differ: [2, 4] against [2, 8].
    let (b, _) = analyses(&cfg2, &options(false, Vec::new()));
    let mut c_data = report_data(&cfg2, true, 2).unwrap();
    c_data.campaign.spec_json = c_data
        .campaign
        .spec_json
        .replace("\"processes\":[2,4]", "\"processes\":[2,8]");
    for r in &mut c_data.runs {
        if r.processes == 4 {
            r.processes = 8;
        }
    }
    let opts = options(false, Vec::new());
    let c = analyse_data(c_data, &opts.analysis);
    let none = [None];
    let base = Input {
        db: "base.db",
        analysis: &b,
        sched_ext: &none,
        latency: None,
    };
    let cand = Input {
        db: "cand.db",
        analysis: &c,
        sched_ext: &none,
        latency: None,
    };
    let err = compare(base, cand, &opts).unwrap_err();
    let CompareError::SpecsDiffer(d) = &err else {
        panic!("{err}")
    };
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0].line(), "processes: [2,4] → [2,8]");
    let msg = err.to_string();
    assert!(
        msg.contains("processes: [2,4] → [2,8]") && msg.contains("--force"),
        "{msg}"
    );

    // With --force: the differences first, conditions matched by factor
    // values (the 2-process ones), the others listed as unmatched.
    let c = compare(base, cand, &options(true, Vec::new())).unwrap();
    assert_eq!(c.spec_differences.len(), 1);
    assert_eq!(c.comparisons.len(), 2 * METRICS.len());
    assert_eq!(
        c.only_in_baseline,
        ["pi, 4 processes, OTHER", "pi, 4 processes, BATCH"]
    );
    assert_eq!(
        c.only_in_candidate,
        ["pi, 8 processes, OTHER", "pi, 8 processes, BATCH"]
    );
    let md = render::markdown(&c);
    let first_diff = md.find("processes").unwrap();
    assert!(
        first_diff < md.find("## Summary").unwrap(),
        "spec differences come first"
    );
    // (brackets escaped: the Markdown is inert)
    assert!(md.contains("| processes | \\[2,4\\]  | \\[2,8\\]"), "{md}");

    // Nothing in common at all.
    let mut other = report_data(&cfg2, true, 2).unwrap();
    for r in &mut other.runs {
        r.workload = "copy".into();
    }
    let o = analyse_data(other, &opts.analysis);
    let err = compare(
        base,
        Input {
            db: "cand.db",
            analysis: &o,
            sched_ext: &none,
            latency: None,
        },
        &options(true, Vec::new()),
    )
    .unwrap_err();
    assert!(matches!(err, CompareError::NothingInCommon { .. }), "{err}");
    // The same campaign twice.
    let err = compare(base, base, &opts).unwrap_err();
    assert_eq!(err, CompareError::SameCampaign("base.db campaign 1".into()));
}

#[test]
fn environment_differences_are_flagged_unless_expected() {
    let mut cfg = Planted::new(5);
    cfg.candidate_kernel = "6.2.0-synthetic".into();
    let c = run(&cfg, &options(false, Vec::new())).unwrap();
    let unexpected: Vec<&str> = c
        .unexpected_environment()
        .iter()
        .map(|r| r.field.name())
        .collect();
    assert_eq!(unexpected, ["kernel"]);
    let md = render::markdown(&c);
    assert!(
        md.contains(
            "differ in kernel (6.1.0-synthetic → 6.2.0-synthetic), which --expect does not name"
        ),
        "{md}"
    );
    let c = run(&cfg, &options(false, vec![EnvField::Kernel])).unwrap();
    assert!(c.unexpected_environment().is_empty());
    assert!(c.environment.iter().any(|r| r.differs && r.expected));
    let j = render::json(&c);
    assert_eq!(
        j["unexpected_environment_differences"],
        serde_json::json!([])
    );
}

#[test]
fn json_has_the_documented_fields() {
    let c = run(&Planted::new(10), &options(false, Vec::new())).unwrap();
    let text = render::render(&c, Format::Json);
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let rows = v["comparisons"].as_array().unwrap();
    assert_eq!(rows.len(), 16);
    for r in rows {
        for k in [
            "condition",
            "metric",
            "baseline_mean",
            "candidate_mean",
            "ratio",
            "ci_low",
            "ci_high",
            "p",
            "p_adjusted",
            "verdict",
        ] {
            assert!(r.get(k).is_some(), "{k} missing in {r}");
        }
        let verdict = r["verdict"].as_str().unwrap();
        assert!(["better", "worse", "not separated"].contains(&verdict));
        let ratio = r["ratio"].as_f64().unwrap();
        let want = r["candidate_mean"].as_f64().unwrap() / r["baseline_mean"].as_f64().unwrap();
        assert!((ratio - want).abs() < 1e-12);
    }
    assert_eq!(rows[0]["metric"], "wall");
    assert_eq!(rows[0]["condition"], "pi, 2 processes, OTHER");
    assert_eq!(rows[0]["direction"], "lower_is_better");
    assert_eq!(rows[0]["factors"]["policy"], "other");
    assert_eq!(rows[0]["factors"]["processes"], 2);
    assert_eq!(v["summary"].as_array().unwrap().len(), 4);
    assert_eq!(v["baseline"]["campaign"]["id"], 1);
    assert_eq!(v["candidate"]["db"], "cand.db");
}

#[test]
fn html_and_markdown_are_built_from_the_same_blocks() {
    let c = run(&Planted::new(10), &options(false, Vec::new())).unwrap();
    let html = render::html(&c);
    assert!(html.starts_with("<!DOCTYPE html>") && !html.contains("<script"));
    // A ratio chart per metric and one forest plot.
    assert_eq!(html.matches("data-kind=\"compare-ratio\"").count(), 4);
    assert_eq!(html.matches("data-kind=\"compare-forest\"").count(), 1);
    for m in METRICS {
        assert!(html.contains(&format!("id=\"compare-ratio-{}\"", m.name())));
    }
    // Worse rows highlighted; 4 wall rows.
    assert_eq!(html.matches("<tr class=\"flag\">").count(), 4);
    let md = render::markdown(&c);
    assert!(!md.contains("<svg"));
    assert!(md.contains("## Per metric and condition"));
    assert!(md.contains("### wall (wall time; lower is better)"));
    assert!(
        md.contains("pi, 2 processes, OTHER: wall time is 1.2"),
        "{md}"
    );
    assert!(md.contains("| geometric mean (4 conditions)"));
    // Both show the same numbers: each ratio of the JSON appears in both.
    for r in &c.comparisons {
        let s = crate::report::fmt::ratio(r.ratio.unwrap());
        assert!(md.contains(&s) && html.contains(&s), "{s}");
    }
}

#[test]
fn the_geometric_mean_decides_only_from_ten_runs_a_side() {
    // 5 runs a side: the interval is shown, clearly above 1, but too few
    // runs for a percentile bootstrap to decide on.
    let c = run(&Planted::new(5), &options(false, Vec::new())).unwrap();
    let wall = c.summary.iter().find(|s| s.metric == Metric::Wall).unwrap();
    assert!(wall.ci_low.unwrap() > 1.1, "{wall:?}");
    assert_eq!(wall.verdict, Verdict::NotSeparated);
    // 5 runs a side: 2/252 at best, times 16 tests: never below 0.05.
    assert_eq!(c.unreachable(), 16);
    assert!(render::markdown(&c).contains("All of the 16 tested comparisons have too few runs"));
    let c = run(&Planted::new(10), &options(false, Vec::new())).unwrap();
    let wall = c.summary.iter().find(|s| s.metric == Metric::Wall).unwrap();
    assert_eq!(wall.verdict, Verdict::Worse);
}

/// The pair compared with a margin (%) and each side's planted latency.
fn run_margin(cfg: &Planted, margin_pct: Option<f64>) -> Comparison {
    let mut opts = options(false, Vec::new());
    opts.margin_pct = margin_pct;
    let (bd, cd) = (
        report_data(cfg, false, 1).unwrap(),
        report_data(cfg, true, 2).unwrap(),
    );
    let (bl, cl) = (latency(cfg, &bd, false), latency(cfg, &cd, true));
    let (b, c) = (
        analyse_data(bd, &opts.analysis),
        analyse_data(cd, &opts.analysis),
    );
    let (bla, cla) = (
        crate::report::analyse::latency::analyse(&b, &bl, 1),
        crate::report::analyse::latency::analyse(&c, &cl, 1),
    );
    let none = [None];
    compare(
        Input {
            db: "base.db",
            analysis: &b,
            sched_ext: &none,
            latency: Some(&bla),
        },
        Input {
            db: "cand.db",
            analysis: &c,
            sched_ext: &none,
            latency: Some(&cla),
        },
        &opts,
    )
    .unwrap()
}

fn margin_verdicts(c: &Comparison, m: Metric) -> Vec<Option<MarginVerdict>> {
    c.rows_of(m).map(|r| r.margin_verdict).collect()
}

/// An A/A pair: nothing planted.
fn a_a() -> Planted {
    let mut cfg = Planted::new(10);
    cfg.wall_factor = 1.0;
    cfg.stime_factor = 1.0;
    cfg
}

#[test]
fn an_a_a_pair_is_equivalent_within_five_percent() {
    // Every quantity with 2–3 % run-to-run noise: all equivalent.
    let mut cfg = a_a();
    cfg.stime_noise = 0.02;
    let c = run_margin(&cfg, Some(5.0));
    assert_eq!(c.margin_pct, Some(5.0));
    assert_eq!(c.margin_from.as_deref(), Some("--margin"));
    // 4 metrics and the 2 latency percentiles, 4 conditions each.
    assert_eq!(c.comparisons.len(), 24);
    let not: Vec<String> = c
        .comparisons
        .iter()
        .filter(|r| r.margin_verdict != Some(MarginVerdict::Equivalent))
        .map(|r| {
            format!(
                "{} {} {:?} {:?}",
                r.condition,
                r.metric.name(),
                r.equivalence_p_adjusted,
                r.baseline_cv
            )
        })
        .collect();
    assert!(not.is_empty(), "not equivalent: {not:#?}");
    assert_eq!(c.count_margin(MarginVerdict::Equivalent), 24);
    assert!(c.regressions().is_empty());
    assert_eq!(c.count(Verdict::NotSeparated), 24);
    for r in &c.comparisons {
        let t = r.equivalence.as_ref().unwrap();
        assert!(r.equivalence_p_adjusted.unwrap() >= t.p);
        assert!(r.equivalence_p_adjusted.unwrap() < 0.05);
        // Not separated, so it says what could have been seen.
        let d = r.detectable.as_ref().unwrap();
        assert!(
            d.relative.unwrap() > 0.0 && d.relative.unwrap() < 0.1,
            "{d:?}"
        );
    }
    let md = render::markdown(&c);
    assert!(
        md.contains("24 equivalent within ±5 %, 0 different, 0 neither shown"),
        "{md}"
    );
    assert!(md.contains("| ±5 % verdict"), "{md}");
    // The default 15 % noise of system time: equivalence within ±5 % is
    // not shown with 10 runs, nor a difference.
    let c = run_margin(&a_a(), Some(5.0));
    assert_eq!(
        margin_verdicts(&c, Metric::Stime),
        [Some(MarginVerdict::NeitherShown); 4]
    );
    assert_eq!(
        margin_verdicts(&c, Metric::Wall),
        [Some(MarginVerdict::Equivalent); 4]
    );
    let stime = c.rows_of(Metric::Stime).next().unwrap();
    let seen = stime.detectable.as_ref().unwrap();
    // A 15 % spread: only changes of well over 15 % could have been seen.
    assert!(seen.relative.unwrap() > 0.15, "{seen:?}");
    assert!(render::sentence(stime).contains(&format!(
        "not separated; a change smaller than {} could not be seen with 10 runs a side; neither shown at the ±5 % margin",
        seen.percent().unwrap()
    )));
}

#[test]
fn a_planted_ten_percent_slowdown_is_different_and_a_regression() {
    let mut cfg = a_a();
    cfg.wall_factor = 1.10;
    let c = run_margin(&cfg, Some(2.0));
    assert_eq!(verdicts(&c, Metric::Wall), [Verdict::Worse; 4]);
    assert_eq!(
        margin_verdicts(&c, Metric::Wall),
        [Some(MarginVerdict::Different); 4]
    );
    assert!(c.rows_of(Metric::Wall).all(|r| r.regression));
    assert_eq!(c.regressions().len(), 4);
    // CPU % falls with it (better higher: worse), beyond the margin too.
    // Unchanged quantities with 2–3 % noise are equivalent within ±2 %
    // only for the least noisy; none is a regression.
    assert!(c.rows_of(Metric::Utime).all(|r| !r.regression));
    let md = render::markdown(&c);
    assert!(
        md.contains("wall time is 1.1")
            && md.contains("— worse; different at the ±2 % margin; a regression beyond the margin"),
        "{md}"
    );
    assert!(
        md.contains("worse beyond the ±2 % margin with significance"),
        "{md}"
    );
    let html = render::html(&c);
    assert!(html.contains("different (regression)"));
    let j = render::json(&c);
    assert_eq!(j["margin_pct"], 2.0);
    assert_eq!(j["regressions"], 4);
    let wall = &j["comparisons"][0];
    assert_eq!(wall["metric"], "wall");
    assert_eq!(wall["margin_verdict"], "different");
    assert_eq!(wall["regression"], true);
    assert!(wall["equivalence"]["p_above_upp"].as_f64().unwrap() < 1e-6);

    // A 15 % margin: the same 10 % slowdown is worse, yet within the
    // margin: equivalent, no regression.
    let c = run_margin(&cfg, Some(15.0));
    assert_eq!(verdicts(&c, Metric::Wall), [Verdict::Worse; 4]);
    assert_eq!(
        margin_verdicts(&c, Metric::Wall),
        [Some(MarginVerdict::Equivalent); 4]
    );
    assert!(c.regressions().is_empty());
    // No margin: every worse row is a regression, and no margin verdicts.
    let c = run_margin(&cfg, None);
    assert_eq!(c.regressions().len(), 4);
    assert!(c.comparisons.iter().all(|r| r.margin_verdict.is_none()));
    assert!(!render::markdown(&c).contains("% verdict"));
}

#[test]
fn the_margin_comes_from_the_spec_unless_given() {
    let mut cfg = a_a();
    cfg.spec_extra = "compare_margin_pct = 5".into();
    let c = run_margin(&cfg, None);
    assert_eq!(c.margin_pct, Some(5.0));
    assert_eq!(c.margin_from.as_deref(), Some("compare_margin_pct"));
    assert!(c.spec_differences.is_empty());
    assert!(render::markdown(&c).contains("Margin ±5 % (from compare_margin_pct)"));
    let c = run_margin(&cfg, Some(2.0));
    assert_eq!(c.margin_pct, Some(2.0));
    assert_eq!(c.margin_from.as_deref(), Some("--margin"));
    // A margin only in the candidate's spec is no spec difference, and not
    // used (the baseline's spec decides).
    let mut cfg = a_a();
    cfg.candidate_spec_extra = "compare_margin_pct = 5".into();
    let c = run_margin(&cfg, None);
    assert!(c.spec_differences.is_empty());
    assert_eq!(c.margin_pct, None);
}

#[test]
fn margins_parse_as_percentages() {
    assert_eq!(parse_margin_pct("2%"), Ok(2.0));
    assert_eq!(parse_margin_pct(" 0.5 % "), Ok(0.5));
    assert_eq!(parse_margin_pct("5"), Ok(5.0));
    for bad in ["0%", "100", "-2%", "two", ""] {
        assert!(parse_margin_pct(bad).is_err(), "{bad}");
    }
}

#[test]
fn latency_percentiles_are_metrics() {
    // The tail 30 % longer, the median unchanged.
    let mut cfg = a_a();
    cfg.latency_p99_factor = 1.3;
    let c = run_margin(&cfg, Some(5.0));
    assert!(
        c.metrics
            .ends_with(&[Metric::LatencyP50, Metric::LatencyP99])
    );
    assert_eq!(verdicts(&c, Metric::LatencyP99), [Verdict::Worse; 4]);
    for r in c.rows_of(Metric::LatencyP99) {
        assert_eq!(r.unit, "µs");
        assert!((r.ratio.unwrap() - 1.3).abs() < 0.05, "{:?}", r.ratio);
        assert!(r.regression);
    }
    assert_eq!(
        margin_verdicts(&c, Metric::LatencyP50),
        [Some(MarginVerdict::Equivalent); 4]
    );
    let p50 = c.rows_of(Metric::LatencyP50).next().unwrap();
    assert!((p50.baseline_mean.unwrap() - 75.0).abs() < 5.0, "{p50:?}");
    let md = render::markdown(&c);
    assert!(
        md.contains("### latency_p99 (per-run p99 latency; lower is better)"),
        "{md}"
    );
    assert_eq!(
        c.summary
            .iter()
            .find(|s| s.metric == Metric::LatencyP99)
            .unwrap()
            .verdict,
        Verdict::Worse
    );
}
