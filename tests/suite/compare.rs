//! Tests of `schedlab compare` through the binary: a synthetic pair of
//! databases with planted effects, two campaigns of one database, spec
//! differences refused and forced, environment differences, argument
//! errors, and an end-to-end comparison of two tiny real campaigns whose
//! HTML renders in headless Chromium.

use std::path::{Path, PathBuf};

use schedlab::store::Store;
use schedlab::testing::planted::{self, Planted};

use crate::common;
use common::{chromium, dumped_dom, schedlab, screenshot, text};

/// One side of `cfg` as the only campaign of a new database `name`.
fn database(dir: &Path, name: &str, cfg: &Planted, candidate: bool) -> PathBuf {
    let path = dir.join(name);
    let mut store = Store::open(&path).unwrap();
    planted::create(&mut store, cfg, candidate).unwrap();
    path
}

fn json_of(o: &std::process::Output) -> serde_json::Value {
    assert!(o.status.success(), "{}", text(o));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(o)))
}

/// (metric, verdict) of every comparison.
fn verdicts(v: &serde_json::Value) -> Vec<(String, String)> {
    v["comparisons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["metric"].as_str().unwrap().to_string(),
                r["verdict"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn a_synthetic_pair_of_databases_shows_exactly_the_planted_effects() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cfg = Planted::new(10);
    database(d, "base.db", &cfg, false);
    database(d, "cand.db", &cfg, true);
    let o = schedlab(
        &[
            "compare",
            "--db",
            "base.db",
            "--vs",
            "cand.db",
            "--metric",
            "wall,utime,stime,nivcsw",
            "--format",
            "json",
        ],
        d,
    );
    let v = json_of(&o);
    let found = verdicts(&v);
    assert_eq!(found.len(), 16, "4 conditions × 4 metrics");
    for (metric, verdict) in &found {
        let want = if metric == "wall" {
            "worse"
        } else {
            "not separated"
        };
        assert_eq!(verdict, want, "{metric}");
    }
    for r in v["comparisons"].as_array().unwrap() {
        let noisy = r["noise_exceeds_change"].as_bool().unwrap();
        match r["metric"].as_str().unwrap() {
            "wall" => {
                assert!(!noisy);
                let ratio = r["ratio"].as_f64().unwrap();
                assert!((ratio - 1.2).abs() < 0.03, "{ratio}");
                assert!(r["ci_low"].as_f64().unwrap() > 1.1);
                assert!(r["p_adjusted"].as_f64().unwrap() < 0.05);
            }
            // 5 % better under 15 % noise: marked.
            "stime" => assert!(noisy, "{r}"),
            _ => {}
        }
    }
    let summary = v["summary"].as_array().unwrap();
    let wall = summary.iter().find(|s| s["metric"] == "wall").unwrap();
    assert_eq!(wall["verdict"], "worse");
    assert_eq!(wall["worse"], 4);
    // Same spec and environment: nothing flagged, nothing on stderr but
    // the output.
    assert_eq!(v["spec_differences"], serde_json::json!([]));
    assert_eq!(
        v["unexpected_environment_differences"],
        serde_json::json!([])
    );
    assert!(
        String::from_utf8_lossy(&o.stderr).is_empty(),
        "{}",
        text(&o)
    );

    // All metrics, Markdown: the geometric-mean rows and the verdicts.
    let o = schedlab(
        &[
            "compare", "--db", "base.db", "--vs", "cand.db", "--format", "md",
        ],
        d,
    );
    assert!(o.status.success(), "{}", text(&o));
    let md = String::from_utf8_lossy(&o.stdout);
    assert!(md.starts_with("# schedlab compare: campaign 1 of base.db → campaign 1 of cand.db"));
    assert!(md.contains("## What differs") && md.contains("## Summary"));
    assert!(md.contains("| geometric mean (4 conditions)"));
}

#[test]
fn two_campaigns_of_one_database_and_output_files() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cfg = Planted::new(5);
    let path = d.join("all.db");
    let mut store = Store::open(&path).unwrap();
    let b = planted::create(&mut store, &cfg, false).unwrap();
    let c = planted::create(&mut store, &cfg, true).unwrap();
    drop(store);
    let (bs, cs) = (b.to_string(), c.to_string());
    let o = schedlab(
        &[
            "compare",
            "--db",
            "all.db",
            "--campaign",
            &bs,
            "--vs-campaign",
            &cs,
            "-o",
            "cmp.html",
        ],
        d,
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("wrote cmp.html: 32 comparisons"),
        "{}",
        text(&o)
    );
    let html = std::fs::read_to_string(d.join("cmp.html")).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains("data-kind=\"compare-forest\""));
    // Reversed: the candidate is the baseline; wall time is now better.
    let o = schedlab(
        &[
            "compare",
            "--db",
            "all.db",
            "--campaign",
            &cs,
            "--vs-campaign",
            &bs,
            "--metric",
            "wall",
            "-o",
            "rev.json",
        ],
        d,
    );
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("rev.json")).unwrap()).unwrap();
    // 5 runs a side: the exact Mann–Whitney p of complete separation is
    // 2/252 per condition, under α after Holm over 4.
    for (_, verdict) in verdicts(&v) {
        assert_eq!(verdict, "better");
    }
    // The same campaign on both sides is refused; so is no candidate.
    let o = schedlab(
        &[
            "compare",
            "--db",
            "all.db",
            "--campaign",
            &bs,
            "--vs-campaign",
            &bs,
        ],
        d,
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("the same campaign"), "{}", text(&o));
    let o = schedlab(&["compare", "--db", "all.db"], d);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("--vs"), "{}", text(&o));
    let o = schedlab(&["compare", "--db", "all.db", "--vs", "missing.db"], d);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("missing.db does not exist"),
        "{}",
        text(&o)
    );
    let o = schedlab(&["compare", "--db", "all.db", "--vs-campaign", "99"], d);
    assert!(
        text(&o).contains("campaign 99 is not in this database"),
        "{}",
        text(&o)
    );
}

#[test]
fn specs_that_differ_are_refused_listing_the_keys_and_compared_with_force() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut cfg = Planted::new(5);
    cfg.candidate_spec_extra = "timeout_s = 30".into();
    database(d, "base.db", &cfg, false);
    database(d, "cand.db", &cfg, true);
    let args = [
        "compare", "--db", "base.db", "--vs", "cand.db", "--format", "md",
    ];
    let o = schedlab(&args, d);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("specs differ in 1 key:\n  timeout_ns: 600000000000 → 30000000000"),
        "{err}"
    );
    assert!(err.contains("--force"), "{err}");
    assert!(o.stdout.is_empty());

    let mut forced = args.to_vec();
    forced.push("--force");
    let o = schedlab(&forced, d);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("warning: the specs differ in 1 key"));
    let md = String::from_utf8_lossy(&o.stdout);
    let diff = md
        .find("| timeout_ns | 600000000000 | 30000000000 |")
        .unwrap();
    assert!(diff < md.find("## Summary").unwrap(), "listed first:\n{md}");
}

#[test]
fn environment_differences_are_flagged_unless_expected() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut cfg = Planted::new(5);
    cfg.candidate_kernel = "6.2.0-synthetic".into();
    database(d, "base.db", &cfg, false);
    database(d, "cand.db", &cfg, true);
    let o = schedlab(
        &[
            "compare", "--db", "base.db", "--vs", "cand.db", "--format", "json",
        ],
        d,
    );
    let v = json_of(&o);
    assert_eq!(
        v["unexpected_environment_differences"],
        serde_json::json!(["kernel"])
    );
    assert!(
        String::from_utf8_lossy(&o.stderr).contains(
            "warning: the environments differ in kernel (6.1.0-synthetic → 6.2.0-synthetic), which --expect \
             does not name"
        ),
        "{}",
        text(&o)
    );
    let o = schedlab(
        &[
            "compare", "--db", "base.db", "--vs", "cand.db", "--format", "json", "--expect",
            "kernel",
        ],
        d,
    );
    let v = json_of(&o);
    assert_eq!(
        v["unexpected_environment_differences"],
        serde_json::json!([])
    );
    let kernel = v["environment"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["field"] == "kernel")
        .unwrap();
    assert_eq!(kernel["differs"], true);
    assert_eq!(kernel["expected"], true);
    assert!(String::from_utf8_lossy(&o.stderr).is_empty());
    let o = schedlab(
        &[
            "compare", "--db", "base.db", "--vs", "cand.db", "--expect", "kernal",
        ],
        d,
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("kernel"), "{}", text(&o));
}

const TINY: &str = r#"
name = "compare-e2e"
repetitions = 3
cooldown_s = 0
timeout_s = 60
[matrix]
policy = ["other", "batch"]
workload = ["pi"]
processes = [2]
cpus = ["0"]
[workloads.pi]
iterations = 1_000_000
"#;

#[test]
fn end_to_end_two_real_campaigns_compared_in_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("tiny.toml"), TINY).unwrap();
    for db in ["a.db", "b.db"] {
        let o = schedlab(&["run", "tiny.toml", "--db", db, "--quiet"], d);
        assert!(o.status.success(), "{}", text(&o));
    }
    let o = schedlab(
        &[
            "compare", "--db", "a.db", "--vs", "b.db", "--format", "json",
        ],
        d,
    );
    let v = json_of(&o);
    let rows = v["comparisons"].as_array().unwrap();
    // 2 conditions; every metric the runs measured (schedstat may be
    // missing on some kernels, so at least the rusage ones and makespan).
    assert!(rows.len() >= 2 * 7, "{} rows", rows.len());
    let mut conditions: Vec<&str> = rows
        .iter()
        .map(|r| r["condition"].as_str().unwrap())
        .collect();
    conditions.dedup();
    assert_eq!(
        conditions,
        ["pi, 2 processes, OTHER", "pi, 2 processes, BATCH"]
    );
    for r in rows {
        for k in ["baseline_mean", "candidate_mean", "p", "p_adjusted"] {
            assert!(r.get(k).is_some(), "{k} in {r}");
        }
        let (b, c) = (r["baseline_mean"].as_f64(), r["candidate_mean"].as_f64());
        if let (Some(b), Some(c), Some(ratio)) = (b, c, r["ratio"].as_f64()) {
            assert!((ratio - c / b).abs() <= 1e-9 * ratio.abs().max(1.0), "{r}");
        }
        // 3 runs a side: tested, but nothing survives Holm over this many.
        let (p, adj) = (r["p"].as_f64().unwrap(), r["p_adjusted"].as_f64().unwrap());
        assert!((0.0..=1.0).contains(&p) && adj >= p && adj <= 1.0, "{r}");
        assert_eq!(r["verdict"], "not separated");
        let lo = r["ci_low"].as_f64();
        let hi = r["ci_high"].as_f64();
        if let (Some(lo), Some(hi)) = (lo, hi) {
            assert!(lo <= hi);
        }
    }
    let walls: Vec<&serde_json::Value> = rows.iter().filter(|r| r["metric"] == "wall").collect();
    assert_eq!(walls.len(), 2);
    for w in walls {
        assert!(w["baseline_mean"].as_f64().unwrap() > 0.0);
        assert!(w["ratio"].as_f64().unwrap() > 0.0);
    }
    // Same machine, same build: the same kernel, CPU, HZ and version (RT
    // limits could be moved by another program between the two runs).
    for r in v["environment"].as_array().unwrap() {
        if ["kernel", "cpu", "hz", "preemption", "schedlab"].contains(&r["field"].as_str().unwrap())
        {
            assert_eq!(r["differs"], false, "{r}");
        }
    }

    let o = schedlab(
        &["compare", "--db", "a.db", "--vs", "b.db", "--format", "md"],
        d,
    );
    assert!(o.status.success(), "{}", text(&o));
    let md = String::from_utf8_lossy(&o.stdout);
    assert!(md.contains("### wall (wall time; lower is better)"));
    // 3 runs a side: nothing can be significant, and the page says why.
    assert!(
        md.contains("have too few runs to ever reach significance"),
        "{md}"
    );
    let o = schedlab(&["compare", "--db", "a.db", "--vs", "b.db"], d);
    assert!(o.status.success(), "{}", text(&o));
    let html_path = d.join("compare.html");
    let html = std::fs::read_to_string(&html_path).unwrap();
    let ratio_charts = html.matches("data-kind=\"compare-ratio\"").count();
    assert!(ratio_charts >= 7, "{ratio_charts} ratio charts");
    assert_eq!(html.matches("data-kind=\"compare-forest\"").count(), 1);

    let Some(chrome) = chromium() else { return };
    let url = format!("file://{}", html_path.display());
    let dom_html = dumped_dom(&chrome, &url);
    assert_eq!(
        dom_html.matches("data-kind=\"compare-ratio\"").count(),
        ratio_charts,
        "every chart survives parsing"
    );
    assert!(dom_html.contains("<section id=\"differences\">"));
    let png_path = d.join("shot.png");
    let png = screenshot(&chrome, &url, "1280,2000", &png_path);
    assert!(png.starts_with(b"\x89PNG"), "not a PNG");
    // A blank 1280×2000 page compresses to a few kB; text, tables and
    // charts do not.
    assert!(png.len() > 40_000, "screenshot is only {} bytes", png.len());
    if let Ok(keep) = std::env::var("SCHEDLAB_KEEP_SCREENSHOT") {
        std::fs::copy(&png_path, &keep).unwrap();
        std::fs::copy(&html_path, format!("{keep}.html")).unwrap();
    }
}

/// An A/A pair and a planted 10 % slowdown, both with 2 % run-to-run noise
/// (system time's included).
fn margin_pair(wall_factor: f64) -> Planted {
    let mut cfg = Planted::new(10);
    cfg.wall_factor = wall_factor;
    cfg.stime_factor = 1.0;
    cfg.stime_noise = 0.02;
    cfg
}

#[test]
fn an_a_a_pair_is_equivalent_and_a_planted_slowdown_fails_on_regression() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let same = margin_pair(1.0);
    database(d, "a1.db", &same, false);
    database(d, "a2.db", &same, true);
    let args = |vs: &str, extra: &[&str]| -> Vec<String> {
        let mut a: Vec<String> = [
            "compare",
            "--db",
            "a1.db",
            "--vs",
            vs,
            "--metric",
            "wall,utime,stime,nivcsw",
        ]
        .map(String::from)
        .to_vec();
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    let run = |a: Vec<String>| {
        let refs: Vec<&str> = a.iter().map(String::as_str).collect();
        schedlab(&refs, d)
    };
    // A/A: every row equivalent within ±5 %, and --fail-on regression
    // passes.
    let o = run(args(
        "a2.db",
        &[
            "--margin",
            "5%",
            "--fail-on",
            "regression",
            "--format",
            "json",
        ],
    ));
    let v = json_of(&o);
    assert_eq!(v["margin_pct"], 5.0);
    assert_eq!(v["regressions"], 0);
    let rows = v["comparisons"].as_array().unwrap();
    assert_eq!(rows.len(), 16);
    for r in rows {
        assert_eq!(r["margin_verdict"], "equivalent", "{r}");
        assert_eq!(r["verdict"], "not separated");
        assert!(r["detectable"]["relative"].as_f64().unwrap() > 0.0, "{r}");
    }
    let o = run(args("a2.db", &["--margin", "5%", "--format", "md"]));
    assert!(o.status.success(), "{}", text(&o));
    let md = String::from_utf8_lossy(&o.stdout);
    assert!(
        md.contains("16 equivalent within ±5 %, 0 different, 0 neither shown"),
        "{md}"
    );
    assert!(
        md.contains(
            "for the 16 comparisons not separated, the smallest change these runs could have seen"
        ),
        "{md}"
    );
    assert_eq!(md.matches("% unseen").count(), 16, "{md}");

    // The candidate 10 % slower: different, a regression, exit code 4 with
    // --fail-on regression (the output still written), 0 without.
    database(d, "slow.db", &margin_pair(1.10), true);
    let o = run(args(
        "slow.db",
        &[
            "--margin",
            "2%",
            "--fail-on",
            "regression",
            "-o",
            "cmp.json",
        ],
    ));
    assert_eq!(o.status.code(), Some(4), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--fail-on regression: 4 of 16 comparisons worse beyond the ±2 % margin"),
        "{err}"
    );
    assert!(
        err.contains("regression: pi, 2 processes, OTHER: wall time is 1.1"),
        "{err}"
    );
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.join("cmp.json")).unwrap()).unwrap();
    for r in v["comparisons"].as_array().unwrap() {
        if r["metric"] == "wall" {
            assert_eq!(r["margin_verdict"], "different");
            assert_eq!(r["regression"], true);
        } else {
            assert_eq!(r["regression"], false);
        }
    }
    let o = run(args("slow.db", &["--margin", "2%", "--format", "json"]));
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // HTML says it too.
    let o = run(args("slow.db", &["--margin", "2%", "-o", "cmp.html"]));
    assert!(o.status.success(), "{}", text(&o));
    let html = std::fs::read_to_string(d.join("cmp.html")).unwrap();
    assert!(html.contains("different (regression)") && html.contains("equivalent within ±2 %"));

    // A margin that is no percentage is refused, naming the flag.
    let o = run(args("slow.db", &["--margin", "200%"]));
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--margin") && err.contains("less than 100 %"),
        "{err}"
    );
}

/// One side of `cfg` whose every run failed (a campaign with 0 ok runs).
fn failed_database(dir: &Path, name: &str, cfg: &Planted, candidate: bool) -> PathBuf {
    let path = dir.join(name);
    let mut store = Store::open(&path).unwrap();
    let (spec, toml, mut recs) = planted::records(cfg, candidate).unwrap();
    for r in &mut recs {
        r.status = schedlab::record::RunStatus::Failed;
        r.reason = "worker 0 exited with status 1".into();
    }
    let c = store
        .create_campaign(&spec, &toml, &[], cfg.seed, recs.len())
        .unwrap();
    store.insert_runs(c.id, &recs).unwrap();
    path
}

#[test]
fn a_regression_gate_that_compared_nothing_fails_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cfg = margin_pair(1.0);
    failed_database(d, "f1.db", &cfg, false);
    failed_database(d, "f2.db", &cfg, true);
    let gate = [
        "compare",
        "--db",
        "f1.db",
        "--vs",
        "f2.db",
        "--fail-on",
        "regression",
        "--format",
        "json",
    ];
    let o = schedlab(&gate, d);
    assert_eq!(o.status.code(), Some(4), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--fail-on regression: the gate compared nothing")
            && err.contains("0 comparisons"),
        "{err}"
    );
    // Without the gate, the (empty) comparison is written and exits 0.
    let o = schedlab(
        &gate[..5]
            .iter()
            .chain(&["--format", "json"])
            .copied()
            .collect::<Vec<_>>(),
        d,
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // Too few runs on a side to test anything fails the gate too.
    database(d, "one1.db", &Planted::new(1), false);
    database(d, "one2.db", &Planted::new(1), true);
    let o = schedlab(
        &[
            "compare",
            "--db",
            "one1.db",
            "--vs",
            "one2.db",
            "--fail-on",
            "regression",
            "--format",
            "md",
        ],
        d,
    );
    assert_eq!(o.status.code(), Some(4), "{}", text(&o));
    assert!(text(&o).contains("none of the"), "{}", text(&o));
}

#[test]
fn a_negative_margin_is_refused_as_a_margin() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let o = schedlab(
        &["compare", "--db", "x.db", "--vs", "y.db", "--margin", "-5%"],
        d,
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--margin")
            && err.contains("more than 0 %")
            && !err.contains("unexpected argument"),
        "{err}"
    );
}

/// The names of the files in `dir`, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn read_only_commands_leave_nothing_beside_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cfg = Planted::new(3);
    database(d, "a.db", &cfg, false);
    database(d, "b.db", &cfg, true);
    let before = listing(d);
    assert_eq!(before, ["a.db", "b.db"]);
    let commands: [&[&str]; 5] = [
        &["campaigns", "--db", "a.db"],
        &["export", "--db", "a.db", "--format", "csv", "-o", "-"],
        &["report", "--db", "a.db", "--format", "md", "-o", "-"],
        &["report", "--db", "a.db", "--format", "json", "-o", "-"],
        &["compare", "--db", "a.db", "--vs", "b.db", "--format", "md"],
    ];
    for args in commands {
        let o = schedlab(args, d);
        assert!(o.status.success(), "{args:?}: {}", text(&o));
        assert_eq!(listing(d), before, "{args:?} left files behind");
    }
    // A -wal or -shm it found (another connection's) is left as it was.
    std::fs::write(d.join("a.db-shm"), b"").unwrap();
    let o = schedlab(&["campaigns", "--db", "a.db"], d);
    assert!(o.status.success(), "{}", text(&o));
    assert!(d.join("a.db-shm").exists());
}
