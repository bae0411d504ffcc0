//! The report's model section on a campaign measured on this machine: a
//! tiny quick-like spec (two pi workers on CPU 0 under OTHER, and FIFO and
//! RR where RT is permitted), reported as JSON and Markdown; the section
//! names every figure it claims, its numbers are finite, the calibration
//! condition is marked, and each row carries other programs' activity over
//! its runs as the runs table has it. A simulated campaign's report says in
//! one line that it has no model section of its own.

mod common;
use common::{may_use_rt, schedlab, text};

fn spec(policies: &str) -> String {
    format!(
        "name = \"model-e2e\"\nrepetitions = 3\ncooldown_s = 0\ntimeout_s = 30\n[matrix]\n\
         policy = [{policies}]\nworkload = [\"pi\"]\nprocesses = [2]\ncpus = [\"0\"]\n\
         [workloads.pi]\niterations = 20000000\n"
    )
}

#[test]
fn a_measured_campaign_s_report_sets_the_model_beside_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // RT needs the privilege; OTHER alone still checks the section.
    let policies = if may_use_rt() {
        "\"other\", \"fifo\", \"rr\""
    } else {
        "\"other\""
    };
    std::fs::write(d.join("s.toml"), spec(policies)).unwrap();
    let o = schedlab(&["run", "s.toml", "--db", "t.db", "--quiet"], d);
    assert!(o.status.success(), "{}", text(&o));

    let o = schedlab(&["report", "--db", "t.db", "--format", "json"], d);
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let m = &v["model"];
    assert!(m.is_object(), "no model section: {v}");
    assert!(m.get("skipped").is_none(), "{m}");
    // Calibrated on the first condition (OTHER), by its pi speed.
    let cals = m["calibrations"].as_array().unwrap();
    assert_eq!(cals.len(), 1, "{m}");
    assert_eq!(cals[0]["ok"], true, "{m}");
    assert!(
        cals[0]["parameter"]
            .as_str()
            .unwrap()
            .starts_with("pi_iter_per_s"),
        "{m}"
    );
    let rows = m["rows"].as_array().unwrap();
    let db = rusqlite::Connection::open(d.join("t.db")).unwrap();
    let conditions = policies.split(',').count();
    let mut figures = std::collections::BTreeSet::new();
    for r in rows {
        let pred = r["predicted"].as_f64().unwrap();
        let mean = r["measured"]["mean"].as_f64().unwrap();
        assert!(pred.is_finite() && mean.is_finite(), "{r}");
        // The error is relative: none against a measured 0 (FIFO's
        // involuntary switches).
        match r["rel_error"].as_f64() {
            Some(e) => assert!(e.is_finite(), "{r}"),
            None => assert_eq!(mean, 0.0, "{r}"),
        }
        assert_eq!(r["measured"]["n"], 3, "{r}");
        figures.insert((
            r["condition"].as_i64().unwrap(),
            r["metric"].as_str().unwrap().to_string(),
        ));
        // Only the OTHER condition is the calibration condition.
        assert_eq!(r["calibration"], r["policy"] == "other", "{r}");
        // Beside the error, the most CPU other programs took over the
        // condition's runs, as the runs table has it (one condition per
        // policy here).
        let most: Option<f64> = db
            .query_row(
                "SELECT MAX(other_cpu_pct) FROM runs WHERE status = 'ok' AND policy = ?1",
                [r["policy"].as_str().unwrap()],
                |row| row.get(0),
            )
            .unwrap();
        assert_eq!(r["others"]["cpu_pct"].as_f64(), most, "{r}");
        let runnable: Option<i64> = db
            .query_row(
                "SELECT MAX(others_runnable) FROM runs WHERE status = 'ok' AND policy = ?1",
                [r["policy"].as_str().unwrap()],
                |row| row.get(0),
            )
            .unwrap();
        assert_eq!(r["others"]["runnable"].as_i64(), runnable, "{r}");
    }
    let metrics = [
        "share",
        "completion",
        "makespan",
        "invol_switches",
        "slices",
    ];
    assert_eq!(figures.len(), conditions * metrics.len(), "{figures:?}");
    assert!(m["shortfalls"].as_array().unwrap().is_empty(), "{m}");
    if conditions == 3 {
        assert_eq!(m["orders"].as_array().unwrap().len(), 2, "{m}");
    }

    let o = schedlab(&["report", "--db", "t.db", "--format", "md"], d);
    assert!(o.status.success(), "{}", text(&o));
    let md = String::from_utf8(o.stdout).unwrap();
    let section = md
        .split("\n## ")
        .find(|s| s.starts_with("Model\n"))
        .unwrap_or_else(|| panic!("no Model section in:\n{md}"));
    assert!(section.contains("\\[calibration\\]"), "{section}");
    assert!(section.contains("pi_iter_per_s"), "{section}");
    for name in [
        "CPU share",
        "completion",
        "makespan",
        "involuntary switches",
        "slices",
    ] {
        assert!(section.contains(name), "{name} missing:\n{section}");
    }
    assert!(section.contains("Not modelled"), "{section}");
    assert!(
        section.contains("others: CPU / runnable (most)"),
        "{section}"
    );
    // One table row per figure in the JSON.
    let table_rows = section.lines().filter(|l| l.starts_with("| pi, ")).count();
    assert!(table_rows >= rows.len(), "{table_rows} < {}", rows.len());

    // The same spec simulated: its report skips the section in one line.
    let o = schedlab(&["simulate", "s.toml", "--db", "sim.db", "--quiet"], d);
    assert!(o.status.success(), "{}", text(&o));
    let o = schedlab(&["report", "--db", "sim.db", "--format", "json"], d);
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let why = v["model"]["skipped"].as_str().unwrap_or_default();
    assert!(why.contains("simulated"), "{}", v["model"]);
}
