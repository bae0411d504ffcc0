//! Tests of the SVG toolkit.

use super::frame::y_axis;
use super::scale::*;
use super::*;

fn meta() -> Meta {
    Meta {
        kind: "bars",
        id: "bars-wall-pi".into(),
        data: vec![("metric", "wall".into()), ("workload", "pi".into())],
        title: "pi: wall time".into(),
        y_label: "wall time (s)".into(),
        x_label: "processes".into(),
    }
}

#[test]
fn nice_ticks_cover_the_range_with_round_steps() {
    let t = nice_ticks(0.0, 37.2, 5);
    assert_eq!(t.step, 10.0);
    assert_eq!(t.values, vec![0.0, 10.0, 20.0, 30.0, 40.0]);
    let t = nice_ticks(0.0, 0.93, 5);
    assert_eq!(t.step, 0.2);
    assert_eq!(t.values.last(), Some(&1.0));
    assert_eq!(t.values[3], 0.6); // snapped, not 0.6000000000000001
    let t = nice_ticks(34.1, 36.3, 5);
    assert_eq!((t.lo, t.hi, t.step), (34.0, 37.0, 1.0));
    let t = nice_ticks(-3.0, 12.0, 5);
    assert!(t.lo <= -3.0 && t.hi >= 12.0);
    assert!(t.values.contains(&0.0));
    // Degenerate and invalid ranges still give an axis.
    let t = nice_ticks(5.0, 5.0, 5);
    assert!(t.lo < 5.0 && t.hi > 5.0);
    let t = nice_ticks(0.0, 0.0, 5);
    assert_eq!((t.lo, t.hi), (0.0, 1.0));
    let t = nice_ticks(f64::NAN, 1.0, 5);
    assert_eq!((t.lo, t.hi), (0.0, 1.0));
    let t = nice_ticks(0.0, 1234567.0, 5);
    assert_eq!(t.step, 500_000.0);
    assert_eq!(t.values, vec![0.0, 500_000.0, 1_000_000.0, 1_500_000.0]);
}

#[test]
fn log_ticks_per_decade() {
    assert_eq!(
        log_ticks(1.0, 100.0),
        vec![1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0]
    );
    assert_eq!(log_ticks(3.0, 9.0), vec![4.0, 6.0, 8.0]);
    assert_eq!(
        log_ticks(1.0, 1e6),
        vec![1.0, 10.0, 100.0, 1e3, 1e4, 1e5, 1e6]
    );
    assert!(log_ticks(0.0, 1.0).is_empty());
}

#[test]
fn log_axis_labels_tell_close_ticks_apart() {
    let s = Scale::log(0.394, 0.4, 300.0, 100.0);
    let ticks = log_ticks(0.394, 0.4);
    let mut out = String::new();
    y_axis(&mut out, &s, &ticks, 0.0, "y");
    let labels: Vec<&str> = out
        .split("text-anchor=\"end\" fill=\"#444\">")
        .skip(1)
        .map(|t| &t[..t.find('<').unwrap()])
        .collect();
    let mut dedup = labels.clone();
    dedup.dedup();
    assert_eq!(labels, dedup, "{labels:?}");
    assert!(labels.len() >= 2, "{labels:?}");
}

#[test]
fn scales_map_domains_to_pixels() {
    let s = Scale::linear(0.0, 10.0, 300.0, 100.0);
    assert_eq!(s.map(0.0), 300.0);
    assert_eq!(s.map(10.0), 100.0);
    assert_eq!(s.map(5.0), 200.0);
    let l = Scale::log(1.0, 100.0, 0.0, 200.0);
    assert!((l.map(10.0) - 100.0).abs() < 1e-9);
    let d = Scale::linear(3.0, 3.0, 0.0, 10.0);
    assert_eq!(d.map(3.0), 5.0);
}

#[test]
fn bar_chart_has_a_mark_with_a_tooltip_per_bar() {
    let bar = |v: f64| {
        Some(Bar {
            value: v,
            lo: Some(v * 0.9),
            hi: Some(v * 1.1),
            tooltip: format!("mean {v} <s>"),
        })
    };
    let c = BarChart {
        meta: meta(),
        groups: vec![vec!["2".into()], vec!["8".into()]],
        series: vec![
            Series {
                name: "OTHER".into(),
                colour: PALETTE[0].into(),
            },
            Series {
                name: "FIFO".into(),
                colour: PALETTE[3].into(),
            },
        ],
        bars: vec![vec![bar(1.0), bar(2.0)], vec![bar(4.0), None]],
        y_max: None,
    };
    let svg = c.render();
    assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart bars\""));
    assert!(svg.contains("data-metric=\"wall\" data-workload=\"pi\""));
    assert_eq!(svg.matches("<g class=\"mark\">").count(), 3);
    assert_eq!(svg.matches("<title>").count(), 3);
    assert!(svg.contains("mean 4 &lt;s&gt;"), "tooltips are escaped");
    assert!(svg.ends_with("</svg>"));
    assert!(svg.contains(">OTHER</text>") && svg.contains(">FIFO</text>"));
}

#[test]
fn spread_chart_switches_to_boxes_for_many_points() {
    let pts = |n: usize| {
        (0..n)
            .map(|i| Point {
                value: i as f64,
                tooltip: format!("run {i}"),
                flagged: i == 0,
            })
            .collect::<Vec<_>>()
    };
    let mut c = SpreadChart {
        meta: Meta {
            kind: "spread",
            ..meta()
        },
        groups: vec![vec!["2".into()]],
        series: vec![Series {
            name: "OTHER".into(),
            colour: PALETTE[0].into(),
        }],
        cells: vec![vec![pts(5)]],
        strip_max: 10,
    };
    let svg = c.render();
    assert_eq!(svg.matches("<circle").count(), 5);
    assert_eq!(svg.matches("class=\"mark flagged\"").count(), 1);
    c.cells = vec![vec![pts(100)]];
    let svg = c.render();
    assert_eq!(svg.matches("class=\"mark box\"").count(), 1);
    assert!(svg.matches("<circle").count() < 10);
}

#[test]
fn line_and_scatter_charts_render() {
    let l = LineChart {
        meta: Meta {
            kind: "scaling",
            ..meta()
        },
        lines: vec![Line {
            series: Series {
                name: "OTHER (slope 1.0)".into(),
                colour: PALETTE[0].into(),
            },
            points: vec![
                LinePoint {
                    x: 2.0,
                    y: 1.0,
                    lo: Some(0.9),
                    hi: Some(1.1),
                    tooltip: "2 processes".into(),
                },
                LinePoint {
                    x: 8.0,
                    y: 4.0,
                    lo: None,
                    hi: None,
                    tooltip: "8 processes".into(),
                },
            ],
            dashed: false,
        }],
        x_log: true,
        y_log: true,
        x_ticks: vec![2.0, 8.0],
    };
    let svg = l.render();
    assert_eq!(svg.matches("<circle").count(), 2);
    assert!(svg.contains("<path d=\"M"));
    let s = ScatterChart {
        meta: Meta {
            kind: "shares",
            ..meta()
        },
        legend: vec![],
        points: vec![ScatterPoint {
            x: 0.2,
            y: 0.25,
            colour: PALETTE[0].into(),
            tooltip: "p0".into(),
        }],
        log: true,
        diagonal: true,
    };
    let svg = s.render();
    assert!(svg.contains("y = x"));
    assert_eq!(svg.matches("<circle").count(), 1);
}

#[test]
fn gantt_draws_a_bar_and_a_cpu_mark_per_slice_in_the_window() {
    let g = GanttChart {
        meta: Meta {
            kind: "gantt",
            id: "gantt-1".into(),
            data: vec![("run", "1".into())],
            title: "slices".into(),
            y_label: String::new(),
            x_label: "s".into(),
        },
        rows: vec![
            GanttRow {
                label: "task 0 (w 1)".into(),
                colour: PALETTE[0].into(),
            },
            GanttRow {
                label: "task 1 (w 4)".into(),
                colour: PALETTE[1].into(),
            },
        ],
        bars: vec![
            GanttBar {
                row: 0,
                start: 0.0,
                end: 0.01,
                inner_end: Some(0.009),
                tooltip: "slice 0".into(),
                colour: None,
            },
            GanttBar {
                row: 1,
                start: 0.01,
                end: 0.05,
                inner_end: Some(0.05),
                tooltip: "slice 1".into(),
                colour: Some("#123456".into()),
            },
            GanttBar {
                row: 0,
                start: 5.0,
                end: 5.01,
                inner_end: None,
                tooltip: "beyond the window".into(),
                colour: None,
            },
        ],
        x_max: 0.1,
        note: "bars: wall time; dark: CPU".into(),
        legend: vec![Series {
            name: "pid 7 (w)".into(),
            colour: "#123456".into(),
        }],
    };
    let svg = g.render();
    assert!(svg.contains("data-kind=\"gantt\" data-run=\"1\""));
    assert_eq!(svg.matches("<g class=\"mark\">").count(), 2);
    assert_eq!(svg.matches("class=\"inner\"").count(), 2);
    assert!(svg.contains(">task 1 (w 4)</text>"));
    assert!(!svg.contains("beyond the window"));
    // A bar's own colour wins over its row's, and the legend names it.
    assert_eq!(svg.matches("fill=\"#123456\"").count(), 2);
    assert!(svg.contains(">pid 7 (w)</text>"));
}

#[test]
fn long_labels_are_shortened() {
    assert_eq!(fit("abc", 100.0), "abc");
    let f = fit("a very long label that cannot fit", 60.0);
    assert!(f.ends_with('…') && f.chars().count() <= 10, "{f}");
}
