use super::*;
use crate::report::sections::details::choose_set;
use crate::store::{RunTrace, Store, TraceInfo};
use crate::testing::synth;
use crate::trace::derive::tests::*;

fn info(run_id: i64, unusable: bool) -> RunTrace {
    RunTrace {
        info: TraceInfo {
            run_id,
            start_ns: 0,
            end_ns: 1,
            cpus: vec![0],
            lost_events: 0,
            mismatched_switches: 0,
            unusable,
            event_count: 1,
            verdict: Default::default(),
            predicted: false,
            release_ns: None,
        },
        processes: Vec::new(),
        cpus: Vec::new(),
    }
}

#[test]
fn the_set_drawn_has_the_most_policies_traced_and_skips_unusable_traces() {
    let traces = [
        info(3, false),
        info(4, true),
        info(8, false),
        info(9, false),
    ];
    // Group 0: run 3 for one policy, only the unusable 4 for the other;
    // group 1: 8 and 9 (after 7, untraced).
    let choices = vec![vec![vec![1, 3], vec![4]], vec![vec![7, 8], vec![9]]];
    let (k, picked) = choose_set(&choices, &traces).unwrap();
    assert_eq!(k, 1);
    let ids: Vec<Option<i64>> = picked.iter().map(|i| i.map(|i| i.run_id)).collect();
    assert_eq!(ids, vec![Some(8), Some(9)]);
    // Ties go to the first choice; a panel without a usable trace is None.
    let choices = vec![vec![vec![3], vec![4]], vec![vec![8], vec![5]]];
    let (k, picked) = choose_set(&choices, &traces).unwrap();
    assert_eq!(k, 0);
    assert!(picked[1].is_none());
    assert!(choose_set(&[vec![vec![4], vec![5]]], &traces).is_none());
    assert!(choose_set(&[], &traces).is_none());
}

#[test]
fn spans_are_rounded_up_to_two_digits() {
    use crate::report::sections::details::round_up;
    assert_eq!(round_up(1_497_009_594), 1_500_000_000);
    assert_eq!(round_up(243_000_001), 250_000_000);
    assert_eq!(round_up(4_000_000_000), 4_000_000_000);
    assert_eq!(round_up(7), 7);
    assert_eq!(round_up(0), 0);
}

/// The small synthetic campaign; with `traced`, one OTHER run and one FIFO
/// run of "pi, 2 processes, uniform" get a trace: OTHER's two processes
/// take 4 ms turns on CPU 0 for 300 ms, FIFO's run one after the other
/// for 150 ms each (its trace 320 ms long).
fn report(traced: bool) -> (crate::report::Report, Vec<i64>) {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("t.db")).unwrap();
    synth::create(&mut store, &synth::SynthConfig::small()).unwrap();
    let rows = store.export_rows(Some(1)).unwrap();
    let first_run = |policy: &str| {
        rows.iter()
            .find(|r| {
                r.status == "ok"
                    && r.processes == 2
                    && r.policy == policy
                    && r.workload == "pi"
                    && r.priority_mode == "uniform"
            })
            .map(|r| r.run)
            .unwrap()
    };
    let runs = vec![first_run("other"), first_run("fifo")];
    if traced {
        for (k, &run) in runs.iter().enumerate() {
            let pids: Vec<i32> = rows
                .iter()
                .filter(|r| r.run == run)
                .filter_map(|r| r.pid.map(|p| p as i32))
                .collect();
            let (a, b) = (pids[0], pids[1]);
            let start = 1_000_000_000;
            let mut events = Vec::new();
            let end = if k == 0 {
                for i in 0..75u64 {
                    let t = start + i * 4_000_000;
                    let (prev, next) = if i % 2 == 0 { (b, a) } else { (a, b) };
                    events.push(sw(t, 0, prev, PREEMPTED, next));
                }
                start + 300_000_000
            } else {
                events.push(sw(start, 0, b, SLEEPING, a));
                events.push(sw(start + 150_000_000, 0, a, DEAD, b));
                events.push(sw(start + 300_000_000, 0, b, DEAD, 0));
                start + 320_000_000
            };
            let cap = capture(start, end, &[a, b], events);
            store
                .save_trace(run, &crate::trace::Analysed::new(&cap, &[]))
                .unwrap();
        }
    }
    let opts = crate::report::Options {
        campaign: Some(1),
        ..crate::report::Options::default()
    };
    let r = crate::report::Report::with_sections(
        &store,
        &opts,
        vec![
            Box::new(FirstScreenSection::default()),
            Box::new(crate::report::sections::SummarySection),
        ],
    )
    .unwrap();
    (r, runs)
}

#[test]
fn a_traced_campaign_opens_with_one_timeline_per_policy_over_one_span() {
    let (r, runs) = report(true);
    let j = r.json();
    let pi = &j["what-happened"]["workloads"][0];
    assert_eq!(pi["workload"], "pi");
    let p = &pi["picture"];
    assert_eq!(p["kind"], "timelines", "{p}");
    // OTHER, BATCH, FIFO: BATCH was not traced.
    assert_eq!(p["runs"][0]["run"], runs[0]);
    assert_eq!(p["runs"][1]["run"], serde_json::Value::Null);
    assert_eq!(p["runs"][2]["run"], runs[1]);
    // The longer trace (FIFO's 320 ms) sets the span, rounded to 2 digits.
    assert_eq!(p["span_ns"], 320_000_000);
    assert_eq!(j["what-happened"]["traced"], true);
    // The findings of pi, each a sentence with its ratio.
    let findings = pi["findings"].as_array().unwrap();
    assert!(!findings.is_empty());
    assert!(findings.iter().all(|f| {
        let f = f.as_str().unwrap();
        f.starts_with("Pi, ") || f.starts_with("pi, ")
    }));
    let html = r.html();
    // One timeline chart per workload traced (copy was not), before the
    // first finding and before the table of contents.
    assert_eq!(html.matches("data-kind=\"first-timelines\"").count(), 1);
    let chart = html.find("data-kind=\"first-timelines\"").unwrap();
    assert!(chart < html.find("<li class=\"different\">").unwrap());
    assert!(chart < html.find("<nav class=\"toc\">").unwrap());
    assert!(html.contains(">OTHER · CPU 0</text>") && html.contains(">FIFO · CPU 0</text>"));
    assert!(!html.contains(">BATCH · CPU 0</text>"));
    // No hint to trace in a traced campaign; copy's picture is its chart.
    assert!(!html.contains("need a traced campaign"));
    assert_eq!(
        j["what-happened"]["workloads"][1]["picture"]["kind"],
        "chart"
    );
}

#[test]
fn an_untraced_campaign_opens_with_the_chart_of_its_largest_effect() {
    let (r, _) = report(false);
    let j = r.json();
    let pi = &j["what-happened"]["workloads"][0];
    let p = &pi["picture"];
    assert_eq!(p["kind"], "chart");
    // FIFO's mean of 0 involuntary switches beside OTHER's is the largest
    // effect there is.
    assert_eq!(p["metric"], "nivcsw");
    let sentence = p["largest_effect"].as_str().unwrap();
    assert!(
        sentence.contains("FIFO has no involuntary context switches"),
        "{sentence}"
    );
    let html = r.html();
    let chart = html.find("data-kind=\"first-bars\"").unwrap();
    assert!(chart < html.find("<li class=\"different\">").unwrap());
    assert!(html.contains("id=\"first-bars-nivcsw-pi\""));
    assert!(html.contains("need a traced campaign"));
    // Markdown: the headline sentences first, then the summary, whose
    // findings are not repeated.
    let md = r.markdown();
    let what = md.find("## What happened").unwrap();
    let summary = md.find("## Summary and findings").unwrap();
    assert!(what < summary);
    let first = pi["findings"][0].as_str().unwrap();
    let statement = first.split_once(": ").unwrap().1;
    assert_eq!(md.matches(statement).count(), 1, "{md}");
    assert!(md[summary..].contains("under “What happened”"));
}

fn comparison(mean_a: f64, ratio: Option<f64>) -> Comparison {
    let (r, _) = report(false);
    let mut c = r.analysis.comparisons[0].clone();
    c.mean_a = Some(mean_a);
    c.ratio = ratio;
    c
}

#[test]
fn effect_sizes_rank_by_log_ratio() {
    assert_eq!(
        picture::effect_size(&comparison(0.0, Some(0.0))),
        Some(f64::INFINITY)
    );
    let half = picture::effect_size(&comparison(1.0, Some(0.5))).unwrap();
    let tenth = picture::effect_size(&comparison(1.0, Some(0.9))).unwrap();
    assert!((half - 2f64.ln()).abs() < 1e-12 && half > tenth);
    assert_eq!(picture::effect_size(&comparison(1.0, None)), None);
}
