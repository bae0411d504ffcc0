//! `compare --machine A --vs-machine B`: two machine levels of one
//! campaign in a database compared as two campaigns are (the planted
//! effects found on the candidate level, nothing else), the sides named by
//! their level and their timings marked as emulated; a level the campaign lacks is refused naming its levels,
//! and the same level twice as the same campaign.

use super::analyse::{CompareOptions, Verdict};
use super::{RunOptions, build, render};
use crate::report::analyse::Options;
use crate::report::{Format, Metric};
use crate::store::Store;
use crate::testing::planted::{Planted, create_machines};

fn options(db: &std::path::Path, machine: &str, vs_machine: Option<&str>) -> RunOptions {
    RunOptions {
        db: db.to_path_buf(),
        campaign: None,
        vs: None,
        vs_campaign: None,
        format: Format::Md,
        destination: None,
        compare: CompareOptions {
            analysis: Options {
                metrics: vec![Metric::Wall, Metric::Utime, Metric::Stime],
                ..Options::default()
            },
            force: false,
            expect: Vec::new(),
            margin_pct: None,
        },
        fail_on_regression: false,
        machine: Some(machine.to_string()),
        vs_machine: vs_machine.map(str::to_string),
    }
}

#[test]
fn two_machine_levels_of_one_campaign_compare_like_two_campaigns() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("levels.db");
    let mut cfg = Planted::new(8);
    cfg.candidate_kernel = "6.12.0-synthetic".into();
    let id = create_machines(&mut Store::open(&db).unwrap(), &cfg).unwrap();

    let c = build(&options(&db, "cfs", Some("eevdf"))).unwrap();
    assert_eq!((c.baseline.campaign.id, c.candidate.campaign.id), (id, id));
    assert_eq!(c.baseline.machine.as_deref(), Some("cfs"));
    assert_eq!(c.candidate.machine.as_deref(), Some("eevdf"));
    // Each side holds its level's runs only: 4 conditions × 8 repetitions.
    assert_eq!((c.baseline.runs, c.candidate.runs), (32, 32));
    // The 4 conditions matched without the machine factor in their names.
    assert_eq!(c.comparisons.len(), 4 * 3, "{:?}", c.only_in_baseline);
    assert!(c.only_in_baseline.is_empty() && c.only_in_candidate.is_empty());
    for r in c.rows_of(Metric::Wall) {
        assert!(!r.condition.contains("machine"), "{}", r.condition);
        let ratio = r.ratio.unwrap();
        assert!((ratio - 1.2).abs() < 0.05, "{}: {ratio}", r.condition);
        assert_eq!(r.verdict, Verdict::Worse, "{}", r.condition);
    }
    // User time was not changed: no row of it separates.
    assert!(
        c.rows_of(Metric::Utime)
            .all(|r| r.verdict == Verdict::NotSeparated)
    );
    // The environments differ in the kernel (each level's guest).
    assert!(
        c.environment
            .iter()
            .any(|e| e.baseline.contains("6.1.0-synthetic")
                && e.candidate.contains("6.12.0-synthetic")),
        "{:?}",
        c.environment
    );
    let md = render::markdown(&c);
    assert!(
        md.contains(&format!("campaign {id} of"))
            && md.contains(", machine cfs")
            && md.contains(", machine eevdf"),
        "{md}"
    );
    // Both levels are TCG guests: their timings are marked as emulated.
    assert!(
        md.contains("The baseline (machine cfs) ran in a guest under TCG")
            && md.contains("The candidate (machine eevdf) ran in a guest under TCG"),
        "{md}"
    );

    // A level the campaign does not have: named, with its levels.
    let err = build(&options(&db, "cfs", Some("bfs"))).unwrap_err();
    let msg = format!("{err:#}");
    assert!(
        msg.contains("--vs-machine bfs") && msg.contains("its levels: cfs, eevdf"),
        "{msg}"
    );
    // The same level on both sides is the same campaign.
    let err = build(&options(&db, "cfs", Some("cfs"))).unwrap_err();
    assert!(format!("{err:#}").contains("the same campaign"), "{err:#}");
    // --machine alone does not name a candidate.
    let err = build(&options(&db, "cfs", None)).unwrap_err();
    assert!(format!("{err:#}").contains("--vs-machine"), "{err:#}");
}

#[test]
fn vs_machine_alone_asks_for_the_baseline_s_level() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("levels.db");
    create_machines(&mut Store::open(&db).unwrap(), &Planted::new(3)).unwrap();
    let mut o = options(&db, "cfs", Some("eevdf"));
    o.machine = None;
    let err = build(&o).unwrap_err();
    assert!(format!("{err:#}").contains("with --machine"), "{err:#}");
}
