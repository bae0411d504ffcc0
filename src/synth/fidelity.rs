//! How close a replay came to the run it was synthesized from: both runs'
//! recordings (the same [`super::record`] of each trace, tasks matched by
//! their path names) and makespans, compared figure by figure, each with
//! its rule and verdict: makespan within 10 %, each task's CPU within 5 %,
//! voluntary and involuntary switches within 15 %, the KS distance of the
//! CPU-burst and sleep distributions at most 0.1; wake-up latency p50 and
//! p99 are shown without a rule (the scheduler's, not the program's).

use super::record::Recording;
use crate::stats::ks::ks_distance;
use crate::units::count;

/// One figure of the comparison.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub figure: String,
    pub original: String,
    pub replay: String,
    pub rule: String,
    /// None: shown, no rule.
    pub pass: Option<bool>,
}

/// Tasks with less CPU than this in the original are not held to the
/// per-task rule (a few ms of exec and start-up are noise at 5 %); they
/// are counted in the total.
pub const MIN_TASK_CPU_NS: u64 = 5_000_000;

/// |replay / original − 1|, None for a zero original.
pub fn rel_diff(original: f64, replay: f64) -> Option<f64> {
    (original > 0.0).then(|| (replay / original - 1.0).abs())
}

fn pct(original: f64, replay: f64) -> String {
    match original > 0.0 {
        true => format!("{:+.1} %", (replay / original - 1.0) * 100.0),
        false => "n/a".into(),
    }
}

/// A figure against its rule: `r` within `limit` (a fraction) of `o`.
pub fn within(name: &str, o: f64, r: f64, limit: f64, unit: &str) -> Row {
    let d = rel_diff(o, r);
    Row {
        figure: name.into(),
        original: format!("{o:.3}{unit}"),
        replay: format!("{r:.3}{unit} ({})", pct(o, r)),
        rule: format!("within {:.0} %", limit * 100.0),
        pass: Some(match d {
            Some(d) => d <= limit,
            None => r == 0.0,
        }),
    }
}

fn sum(rec: &Recording, f: impl Fn(&super::record::TaskRec) -> u64) -> u64 {
    rec.tasks.iter().map(f).sum()
}

/// Replay against original.
pub fn compare(
    orig: &Recording,
    orig_makespan_ns: Option<u64>,
    rep: &Recording,
    rep_makespan_ns: Option<u64>,
) -> Vec<Row> {
    let mut rows = vec![Row {
        figure: "tasks".into(),
        original: orig.tasks.len().to_string(),
        replay: rep.tasks.len().to_string(),
        rule: "the same".into(),
        pass: Some(orig.tasks.len() == rep.tasks.len()),
    }];
    if let (Some(o), Some(r)) = (orig_makespan_ns, rep_makespan_ns) {
        rows.push(within(
            "makespan",
            o as f64 / 1e6,
            r as f64 / 1e6,
            0.10,
            " ms",
        ));
    }
    rows.push(within(
        "CPU, whole tree",
        sum(orig, |t| t.cpu_ns) as f64 / 1e6,
        sum(rep, |t| t.cpu_ns) as f64 / 1e6,
        0.05,
        " ms",
    ));
    rows.push(per_task_cpu(orig, rep));
    rows.push(within(
        "voluntary switches",
        sum(orig, |t| t.voluntary) as f64,
        sum(rep, |t| t.voluntary) as f64,
        0.15,
        "",
    ));
    rows.push(within(
        "involuntary switches",
        sum(orig, |t| t.involuntary) as f64,
        sum(rep, |t| t.involuntary) as f64,
        0.15,
        "",
    ));
    for (name, q) in [("wake-up latency p50", 0.5), ("wake-up latency p99", 0.99)] {
        let f = |r: &Recording| match r.wake_latency.count() {
            0 => "n/a".to_string(),
            _ => format!("{:.1} µs", r.wake_latency.quantile_ns(q) as f64 / 1e3),
        };
        rows.push(Row {
            figure: name.into(),
            original: f(orig),
            replay: f(rep),
            rule: "shown".into(),
            pass: None,
        });
    }
    for (name, o, r) in [
        ("KS distance, CPU bursts", &orig.bursts_ns, &rep.bursts_ns),
        ("KS distance, sleeps", &orig.sleeps_ns, &rep.sleeps_ns),
    ] {
        let d = ks_distance(&o.values, &r.values);
        rows.push(Row {
            figure: name.into(),
            original: count(o.seen, "sample", "samples"),
            replay: match d {
                Some(d) => format!("D = {d:.3} ({})", count(r.seen, "sample", "samples")),
                None => format!("n/a ({})", count(r.seen, "sample", "samples")),
            },
            rule: "D ≤ 0.1".into(),
            pass: Some(match d {
                Some(d) => d <= 0.1,
                None => o.seen == r.seen,
            }),
        });
    }
    rows
}

/// Each task of the original with at least [`MIN_TASK_CPU_NS`], against
/// the replay's task of the same name.
fn per_task_cpu(orig: &Recording, rep: &Recording) -> Row {
    let by_name: std::collections::HashMap<&str, u64> = rep
        .tasks
        .iter()
        .map(|t| (t.name.as_str(), t.cpu_ns))
        .collect();
    let (mut held, mut ok) = (0, 0);
    let mut worst: Option<(String, f64)> = None;
    for t in orig.tasks.iter().filter(|t| t.cpu_ns >= MIN_TASK_CPU_NS) {
        held += 1;
        let r = by_name.get(t.name.as_str()).copied().unwrap_or(0);
        let d = r as f64 / t.cpu_ns as f64 - 1.0;
        if d.abs() <= 0.05 {
            ok += 1;
        }
        if worst.as_ref().is_none_or(|w| d.abs() > w.1.abs()) {
            worst = Some((t.name.clone(), d));
        }
    }
    Row {
        figure: format!("CPU per task (≥ {} ms)", MIN_TASK_CPU_NS / 1_000_000),
        original: format!("{held} tasks"),
        replay: match &worst {
            Some((n, d)) => format!("{ok} of {held} within; worst {n} {:+.1} %", d * 100.0),
            None => "no task held".into(),
        },
        rule: "each within 5 %".into(),
        pass: Some(ok == held),
    }
}

/// One line: how many figures with a rule are within it, and which are
/// not ("8 of 8 figures within their rules", "5 of 8 within; outside:
/// makespan, …").
pub fn summary(rows: &[Row]) -> String {
    let held = rows.iter().filter(|r| r.pass.is_some()).count();
    let outside: Vec<&str> = rows
        .iter()
        .filter(|r| r.pass == Some(false))
        .map(|r| r.figure.as_str())
        .collect();
    match outside.is_empty() {
        true => format!("{held} of {held} figures within their rules"),
        false => format!(
            "{} of {held} within; outside: {}",
            held - outside.len(),
            outside.join("; ")
        ),
    }
}

/// The rows as an aligned text table.
pub fn render(rows: &[Row]) -> String {
    let verdict = |p: Option<bool>| match p {
        Some(true) => "ok",
        Some(false) => "OUTSIDE",
        None => "-",
    };
    let head = ["figure", "original", "replay", "rule", "verdict"];
    let cells: Vec<[String; 5]> = rows
        .iter()
        .map(|r| {
            [
                r.figure.clone(),
                r.original.clone(),
                r.replay.clone(),
                r.rule.clone(),
                verdict(r.pass).to_string(),
            ]
        })
        .collect();
    let mut w = head.map(|h| h.chars().count());
    for c in &cells {
        for k in 0..5 {
            w[k] = w[k].max(c[k].chars().count());
        }
    }
    let line = |c: [&str; 5]| {
        let mut s = String::new();
        for k in 0..5 {
            s.push_str(c[k]);
            if k < 4 {
                s.push_str(&" ".repeat(w[k] - c[k].chars().count() + 2));
            }
        }
        s.trim_end().to_string() + "\n"
    };
    let mut out = line(head);
    for c in &cells {
        out.push_str(&line([&c[0], &c[1], &c[2], &c[3], &c[4]]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::record::{Recorder, tests::two_tasks};
    use super::*;

    #[test]
    fn a_recording_against_itself_passes_every_rule() {
        let (events, tasks) = two_tasks();
        let mut r = Recorder::new(&[100], &tasks, 1000, 10_000);
        for e in &events {
            r.event(e);
        }
        let rec = r.finish();
        let rows = compare(&rec, Some(1000), &rec, Some(1050));
        assert!(rows.iter().all(|r| r.pass != Some(false)), "{rows:?}");
        let rows = compare(&rec, Some(1000), &rec, Some(1200));
        let m = rows.iter().find(|r| r.figure == "makespan").unwrap();
        assert_eq!(m.pass, Some(false));
        assert!(render(&rows).contains("OUTSIDE"));
        assert!(
            summary(&rows).contains("within; outside: makespan"),
            "{}",
            summary(&rows)
        );
        assert_eq!(rel_diff(0.0, 1.0), None);
    }
}
