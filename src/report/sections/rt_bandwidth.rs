//! Real-time bandwidth sweeps (seed 004): the measured workers' throughput
//! at each `sched_rt_runtime_us`, with its standard error and deviation,
//! and the CPU share of the RT hog beside them against runtime/period.

use anyhow::Result;
use serde::Serialize;
use serde_json::Value;
use std::collections::HashMap;

use super::{Estimate, Needs, RunDetails, Section, Table, chart_id, plural, policy_colour};
use crate::report::analyse::{Analysis, Settings, policy_label};
use crate::report::blocks::{Block, Figure};
use crate::report::fmt;
use crate::report::svg::{Line, LineChart, LinePoint, Meta, Series};
use crate::stats::{self, Fit};
use crate::store::ReportRun;

/// The default `sched_rt_period_us` when the environment does not say.
const DEFAULT_PERIOD_US: i64 = 1_000_000;

/// One ok run of a sweep.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SweepRun {
    pub run_id: i64,
    pub rep: i64,
    pub rt_runtime_us: i64,
    pub period_us: i64,
    /// The workers' throughput (Σ MB/s, or Σ work / wall time).
    pub throughput: Option<f64>,
    /// The hogs' CPU share over the workers' window (Σ over hogs).
    pub hog_share: Option<f64>,
}

/// The statistics of one `sched_rt_runtime_us` value.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SweepRow {
    pub rt_runtime_us: i64,
    pub period_us: i64,
    /// runtime / period (at most 1): the share the hog may take.
    pub expected_share: f64,
    pub runs: usize,
    pub throughput: Option<Estimate>,
    /// Standard deviation / mean.
    pub cv: Option<f64>,
    pub hog_share: Option<Estimate>,
    /// Mean hog share − runtime/period.
    pub hog_deviation: Option<f64>,
}

/// Runs that differ only in `sched_rt_runtime_us`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sweep {
    /// "aio, OTHER, 1 process".
    pub label: String,
    pub workload: String,
    pub policy: String,
    /// "MB/s", or "bytes/s" etc. when the workers report no MB/s.
    pub unit: String,
    /// Descending runtime.
    pub rows: Vec<SweepRow>,
    /// Least-squares line of per-run throughput against runtime (µs).
    pub fit: Option<Fit>,
    /// Mean over runtimes of |mean hog share − runtime/period|.
    pub hog_mean_abs_deviation: Option<f64>,
    /// The runtime where the hog share deviates most, and by how much.
    pub hog_max_deviation: Option<(i64, f64)>,
    pub finding: String,
    pub runs: Vec<SweepRun>,
}

/// The section.
#[derive(Debug, Default)]
pub struct RtBandwidthSection {
    sweeps: Vec<Sweep>,
}

/// Throughput of one run from its workers, over one common window (barrier
/// release to the last worker's end): Σ work / window, in MB/s when the
/// work is bytes. A sum of each worker's own rate would weigh windows of
/// different lengths alike. Σ of the workers' `mb_per_s` figures only when
/// the work done is unknown.
pub fn run_throughput(workers: &[&crate::record::ProcessRecord]) -> Option<(f64, String)> {
    if workers.is_empty() {
        return None;
    }
    let unit = &workers[0].work_unit;
    let work: Option<u64> = workers.iter().map(|p| p.work).sum();
    let window_ns = workers
        .iter()
        .map(|p| p.end_ns.unwrap_or(p.wall_ns).max(p.wall_ns))
        .max()?;
    if let Some(work) = work
        && window_ns > 0
    {
        let per_s = work as f64 / (window_ns as f64 / 1e9);
        return Some(match unit.as_str() {
            "bytes" => (per_s / 1e6, "MB/s".into()),
            "" => (per_s, "work/s".into()),
            u => (per_s, format!("{u}/s")),
        });
    }
    let mbs: Option<Vec<f64>> = workers
        .iter()
        .map(|p| p.figures.get("mb_per_s").copied())
        .collect();
    mbs.map(|v| (v.iter().sum(), "MB/s".into()))
}

/// The hogs' CPU share of one run: Σ of their `cpu_share` figures (or run
/// time / wall time).
pub fn run_hog_share(hogs: &[&crate::record::ProcessRecord]) -> Option<f64> {
    if hogs.is_empty() {
        return None;
    }
    hogs.iter()
        .map(|p| {
            p.figures.get("cpu_share").copied().or_else(|| {
                p.kernel
                    .get(crate::fields::Field::RunNs)
                    .filter(|_| p.wall_ns > 0)
                    .map(|r| r as f64 / p.wall_ns as f64)
            })
        })
        .sum()
}

/// Statistics per runtime (descending), the fit and the hog's tracking.
pub fn sweep(
    settings: &Settings,
    label: String,
    workload: &str,
    policy: &str,
    unit: String,
    runs: Vec<SweepRun>,
) -> Sweep {
    let mut values: Vec<(i64, i64)> = runs
        .iter()
        .map(|r| (r.rt_runtime_us, r.period_us))
        .collect();
    values.sort_unstable_by(|x, y| y.cmp(x));
    values.dedup_by_key(|v| v.0);
    let rows: Vec<SweepRow> = values
        .iter()
        .map(|&(rt, period)| {
            let mine: Vec<&SweepRun> = runs.iter().filter(|r| r.rt_runtime_us == rt).collect();
            let tp: Vec<f64> = mine.iter().filter_map(|r| r.throughput).collect();
            let hog: Vec<f64> = mine.iter().filter_map(|r| r.hog_share).collect();
            let expected = (rt as f64 / period.max(1) as f64).clamp(0.0, 1.0);
            let throughput = Estimate::of(&tp, &format!("rt|{label}|{rt}|throughput"), settings);
            let hog_share = Estimate::of(&hog, &format!("rt|{label}|{rt}|hog"), settings);
            SweepRow {
                rt_runtime_us: rt,
                period_us: period,
                expected_share: expected,
                runs: mine.len(),
                cv: throughput
                    .as_ref()
                    .and_then(|e| (e.mean != 0.0 && e.n >= 2).then(|| e.sd / e.mean)),
                hog_deviation: hog_share.as_ref().map(|e| e.mean - expected),
                throughput,
                hog_share,
            }
        })
        .collect();
    let (xs, ys): (Vec<f64>, Vec<f64>) = runs
        .iter()
        .filter_map(|r| r.throughput.map(|t| (r.rt_runtime_us as f64, t)))
        .unzip();
    let fit = stats::ols(&xs, &ys);
    let devs: Vec<(i64, f64)> = rows
        .iter()
        .filter_map(|r| r.hog_deviation.map(|d| (r.rt_runtime_us, d)))
        .collect();
    let hog_mean_abs_deviation =
        (!devs.is_empty()).then(|| devs.iter().map(|d| d.1.abs()).sum::<f64>() / devs.len() as f64);
    let hog_max_deviation = devs
        .iter()
        .copied()
        .max_by(|x, y| x.1.abs().total_cmp(&y.1.abs()));
    let mut s = Sweep {
        label,
        workload: workload.to_string(),
        policy: policy.to_string(),
        unit,
        rows,
        fit,
        hog_mean_abs_deviation,
        hog_max_deviation,
        finding: String::new(),
        runs,
    };
    s.finding = finding(&s);
    s
}

/// The sweep in one or two sentences.
fn finding(s: &Sweep) -> String {
    let mut out = Vec::new();
    let (first, last) = (s.rows.first(), s.rows.last());
    if let (Some(f), Some(hi), Some(lo)) = (
        &s.fit,
        first.and_then(|r| r.throughput.as_ref().map(|e| (r.rt_runtime_us, e.mean))),
        last.and_then(|r| r.throughput.as_ref().map(|e| (r.rt_runtime_us, e.mean))),
    ) {
        let per = f.slope * 100_000.0;
        out.push(format!(
            "{} throughput {} by {} {} per 100,000 µs less RT runtime (least-squares slope over {}, r² = {}): {} {} \
             at {} µs, {} {} at {} µs.",
            s.workload,
            if per > 0.0 { "falls" } else { "rises" },
            fmt::sig(per.abs(), 3),
            s.unit,
            plural(f.n, "run", "runs"),
            fmt::dec2(f.r2),
            fmt::sig(hi.1, 4),
            s.unit,
            hi.0,
            fmt::sig(lo.1, 4),
            s.unit,
            lo.0
        ));
    }
    if let (Some(mad), Some((at, dev))) = (s.hog_mean_abs_deviation, s.hog_max_deviation) {
        out.push(format!(
            "The RT hog's CPU share {} runtime/period: mean absolute deviation {} percentage points, largest {:+.1} \
             at {} µs.",
            if mad <= 0.02 {
                "tracks"
            } else if mad <= 0.05 {
                "roughly tracks"
            } else {
                "does not track"
            },
            fmt::sig(100.0 * mad, 2),
            100.0 * dev,
            at
        ));
    }
    out.join(" ")
}

fn table(s: &Sweep) -> Table {
    let f = |v: Option<f64>| v.map_or_else(|| "–".into(), |x| fmt::sig(x, 4));
    let headers = [
        "sched_rt_runtime_us".to_string(),
        "runtime / period".into(),
        "runs".into(),
        format!("mean ({})", s.unit),
        "standard error".into(),
        "standard deviation".into(),
        "CV".into(),
        "95% CI".into(),
        "hog CPU share (mean)".into(),
        "hog sd".into(),
        "hog min–max".into(),
        "hog − runtime/period".into(),
    ];
    let rows = s
        .rows
        .iter()
        .map(|r| {
            let t = r.throughput.as_ref();
            let h = r.hog_share.as_ref();
            vec![
                r.rt_runtime_us.to_string(),
                format!("{:.2}", r.expected_share),
                r.runs.to_string(),
                f(t.map(|e| e.mean)),
                f(t.map(|e| e.se)),
                f(t.map(|e| e.sd)),
                r.cv.map_or_else(|| "–".into(), |c| format!("{:.2}%", 100.0 * c)),
                t.and_then(|e| e.ci).map_or_else(
                    || "–".into(),
                    |(lo, hi)| format!("{}–{}", fmt::sig(lo, 4), fmt::sig(hi, 4)),
                ),
                h.map_or_else(|| "–".into(), |e| format!("{:.3}", e.mean)),
                h.map_or_else(|| "–".into(), |e| format!("{:.3}", e.sd)),
                h.map_or_else(|| "–".into(), |e| format!("{:.3}–{:.3}", e.min, e.max)),
                r.hog_deviation
                    .map_or_else(|| "–".into(), |d| format!("{:+.1} pp", 100.0 * d)),
            ]
        })
        .collect();
    Table {
        title: String::new(),
        numeric: headers.iter().map(|_| true).collect(),
        headers: headers.to_vec(),
        rows,
    }
}

fn meta(kind: &'static str, s: &Sweep, k: usize, title: String, y: String, x: &str) -> Meta {
    Meta {
        kind,
        id: chart_id(&[kind, &s.workload, &k.to_string()]),
        data: vec![
            ("workload", s.workload.clone()),
            ("policy", s.policy.clone()),
        ],
        title,
        y_label: y,
        x_label: x.into(),
    }
}

/// Throughput (mean ± 95 % CI) against the runtime.
pub fn throughput_chart(a: &Analysis, s: &Sweep, k: usize) -> Option<LineChart> {
    let points: Vec<LinePoint> = s
        .rows
        .iter()
        .filter_map(|r| {
            let e = r.throughput.as_ref()?;
            Some(LinePoint {
                x: r.rt_runtime_us as f64,
                y: e.mean,
                lo: e.ci.map(|c| c.0.max(0.0)),
                hi: e.ci.map(|c| c.1),
                tooltip: format!(
                    "{}, sched_rt_runtime_us = {}: {} (standard error {})",
                    s.label,
                    r.rt_runtime_us,
                    e.tooltip(&s.unit),
                    fmt::sig(e.se, 4)
                ),
            })
        })
        .collect();
    (!points.is_empty()).then(|| LineChart {
        meta: meta(
            "rt-throughput",
            s,
            k,
            format!("{}: throughput against RT runtime", s.label),
            format!("throughput ({})", s.unit),
            "sched_rt_runtime_us (µs)",
        ),
        lines: vec![Line {
            series: Series {
                name: format!("{} (mean, 95% CI)", policy_label(&s.policy)),
                colour: policy_colour(a, &s.policy),
            },
            points,
            dashed: false,
        }],
        x_log: false,
        y_log: false,
        x_ticks: Vec::new(),
    })
}

/// The hog's CPU share (mean, whiskers min–max) against runtime/period,
/// with the ideal share = runtime/period.
pub fn hog_chart(s: &Sweep, k: usize) -> Option<LineChart> {
    let points: Vec<LinePoint> = s
        .rows
        .iter()
        .filter_map(|r| {
            let e = r.hog_share.as_ref()?;
            Some(LinePoint {
                x: r.expected_share,
                y: e.mean,
                lo: Some(e.min),
                hi: Some(e.max),
                tooltip: format!(
                    "sched_rt_runtime_us = {} (runtime/period {:.3}): hog CPU share mean {:.4}, min {:.4}, max {:.4}, \
                     sd {:.4}, n = {}; {:+.2} percentage points from runtime/period",
                    r.rt_runtime_us,
                    r.expected_share,
                    e.mean,
                    e.min,
                    e.max,
                    e.sd,
                    e.n,
                    100.0 * (e.mean - r.expected_share)
                ),
            })
        })
        .collect();
    if points.is_empty() {
        return None;
    }
    let mut xs: Vec<f64> = s.rows.iter().map(|r| r.expected_share).collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    let ideal = xs
        .iter()
        .map(|&x| LinePoint {
            x,
            y: x,
            lo: None,
            hi: None,
            tooltip: format!("ideal: share = runtime/period = {x:.3}"),
        })
        .collect();
    Some(LineChart {
        meta: meta(
            "rt-hog",
            s,
            k,
            format!("{}: RT hog's CPU share against runtime/period", s.label),
            "hog CPU share".into(),
            "sched_rt_runtime_us / sched_rt_period_us",
        ),
        lines: vec![
            Line {
                series: Series {
                    name: "hog share (mean; whiskers min–max)".into(),
                    colour: crate::report::svg::PALETTE[3].into(),
                },
                points,
                dashed: false,
            },
            Line {
                series: Series {
                    name: "ideal: share = runtime/period".into(),
                    colour: "#888".into(),
                },
                points: ideal,
                dashed: true,
            },
        ],
        x_log: false,
        y_log: false,
        x_ticks: Vec::new(),
    })
}

/// The ok runs of a campaign that swept `sched_rt_runtime_us`.
fn sweep_runs(a: &Analysis) -> impl Iterator<Item = &ReportRun> {
    let swept = !a.factors.rt_runtime_us.is_empty();
    a.runs
        .iter()
        .filter(move |r| swept && r.status == "ok" && r.rt_runtime_us.is_some())
}

const INTRO: &str = "The campaign swept sched_rt_runtime_us, the CPU time per sched_rt_period_us that real-time \
     tasks may use. Per value: the measured workers' throughput (MB/s for aio, else work per second; summed over the \
     workers of a run) with its standard error, standard deviation and coefficient of variation over the runs, as \
     seed 004 tabled it; and the CPU share of the RT hog beside them, which should equal runtime/period while the hog \
     can use the CPU.";

impl Section for RtBandwidthSection {
    fn id(&self) -> &'static str {
        "rt-bandwidth"
    }

    fn title(&self) -> &'static str {
        "Real-time bandwidth sweep"
    }

    fn needs(&self, a: &Analysis) -> Needs {
        Needs {
            processes: sweep_runs(a).map(|r| r.id).collect(),
            ..Needs::default()
        }
    }

    fn prepare(&mut self, a: &Analysis, details: RunDetails) -> Result<()> {
        self.sweeps.clear();
        let periods: HashMap<i64, i64> = a
            .environments
            .iter()
            .map(|e| (e.id, e.sched_rt_period_us.unwrap_or(DEFAULT_PERIOD_US)))
            .collect();
        type Key = (String, String, i64, String, String);
        let mut keys: Vec<Key> = Vec::new();
        let mut by_key: HashMap<Key, (String, Vec<SweepRun>)> = HashMap::new();
        for r in sweep_runs(a) {
            let ps = details.processes(r.id);
            let workers: Vec<&crate::record::ProcessRecord> =
                ps.iter().filter(|p| p.role == "worker").collect();
            let hogs: Vec<&crate::record::ProcessRecord> =
                ps.iter().filter(|p| p.role == "hog").collect();
            let tp = run_throughput(&workers);
            let key = (
                r.workload.clone(),
                r.policy.clone(),
                r.processes,
                r.priority_mode.clone(),
                r.cpus.clone(),
            );
            if !keys.contains(&key) {
                keys.push(key.clone());
            }
            let e = by_key
                .entry(key)
                .or_insert_with(|| (String::new(), Vec::new()));
            if let Some((_, unit)) = &tp
                && e.0.is_empty()
            {
                e.0 = unit.clone();
            }
            e.1.push(SweepRun {
                run_id: r.id,
                rep: r.rep,
                rt_runtime_us: r.rt_runtime_us.unwrap_or(0),
                period_us: periods
                    .get(&r.environment_id)
                    .copied()
                    .unwrap_or(DEFAULT_PERIOD_US),
                throughput: tp.map(|t| t.0),
                hog_share: run_hog_share(&hogs),
            });
        }
        let pos = |v: &[String], x: &str| v.iter().position(|y| y == x).unwrap_or(usize::MAX);
        keys.sort_by_key(|k| {
            (
                a.factors
                    .workloads
                    .iter()
                    .position(|w| w.name == k.0)
                    .unwrap_or(usize::MAX),
                pos(&a.factors.policies, &k.1),
                k.2,
                pos(&a.factors.priority_modes, &k.3),
                pos(&a.factors.cpus, &k.4),
            )
        });
        for k in keys {
            let (unit, runs) = by_key.remove(&k).unwrap_or_default();
            let mut label = format!(
                "{}, {}, {}",
                k.0,
                policy_label(&k.1),
                plural(k.2 as usize, "process", "processes")
            );
            if a.factors.priority_modes.len() > 1 {
                label.push_str(&format!(", priorities {}", k.3));
            }
            if a.factors.cpus.len() > 1 {
                label.push_str(&format!(", cpus {}", k.4));
            }
            self.sweeps
                .push(sweep(&a.settings, label, &k.0, &k.1, unit, runs));
        }
        Ok(())
    }

    fn applies(&self, _a: &Analysis) -> bool {
        !self.sweeps.is_empty()
    }

    fn blocks(&self, a: &Analysis) -> Vec<Block> {
        let mut b = vec![Block::p(INTRO)];
        for (k, s) in self.sweeps.iter().enumerate() {
            b.push(Block::Heading {
                level: 3,
                text: s.label.clone(),
                id: Some(format!("rt-bandwidth-{k}")),
            });
            if !s.finding.is_empty() {
                b.push(Block::p(&s.finding));
            }
            let mut figures = Vec::new();
            if let Some(c) = throughput_chart(a, s, k) {
                figures.push(Figure {
                    svg: c.render(),
                    caption: "Mean throughput of the runs at each runtime, with 95% CI whiskers."
                        .into(),
                });
            }
            if let Some(c) = hog_chart(s, k) {
                figures.push(Figure {
                    svg: c.render(),
                    caption: "The hog's CPU share over the workers' window: mean with the range of the runs; \
                              dashed: the share RT throttling allows."
                        .into(),
                });
            }
            b.push(Block::Figures(figures));
            b.push(Block::table(table(s)));
        }
        b
    }

    fn json(&self, _a: &Analysis) -> Option<Value> {
        serde_json::to_value(&self.sweeps).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn settings() -> Settings {
        crate::report::analyse::tests_settings()
    }

    fn run(id: i64, rt: i64, mb: f64, hog: f64) -> SweepRun {
        SweepRun {
            run_id: id,
            rep: id,
            rt_runtime_us: rt,
            period_us: 1_000_000,
            throughput: Some(mb),
            hog_share: Some(hog),
        }
    }

    #[test]
    fn throughput_mean_standard_error_and_deviation_by_hand() {
        // At 900,000 µs: 100, 102, 98, 104 MB/s: mean 101, sd √(20/3) =
        // 2.58199, se = sd/2 = 1.29099, CV 2.556%. At 500,000 µs: 110 and
        // 114: mean 112, sd √8, se 2.
        let runs = vec![
            run(1, 900_000, 100.0, 0.91),
            run(2, 900_000, 102.0, 0.89),
            run(3, 900_000, 98.0, 0.90),
            run(4, 900_000, 104.0, 0.90),
            run(5, 500_000, 110.0, 0.52),
            run(6, 500_000, 114.0, 0.54),
        ];
        let s = sweep(
            &settings(),
            "aio".into(),
            "aio",
            "other",
            "MB/s".into(),
            runs,
        );
        assert_eq!(s.rows.len(), 2);
        let r = &s.rows[0];
        assert_eq!((r.rt_runtime_us, r.runs), (900_000, 4));
        let t = r.throughput.as_ref().unwrap();
        assert!((t.mean - 101.0).abs() < 1e-12);
        assert!((t.sd - 2.581_988_897_471_611).abs() < 1e-12);
        assert!((t.se - 1.290_994_448_735_805_6).abs() < 1e-12);
        assert!((r.cv.unwrap() - 2.581_988_897_471_611 / 101.0).abs() < 1e-12);
        let (lo, hi) = t.ci.unwrap();
        assert!(lo < 101.0 && hi > 101.0);
        assert!((r.expected_share - 0.9).abs() < 1e-12);
        assert!(r.hog_deviation.unwrap().abs() < 1e-12);
        let r = &s.rows[1];
        let t = r.throughput.as_ref().unwrap();
        assert_eq!((t.mean, t.se), (112.0, 2.0));
        assert!((t.sd - 8.0_f64.sqrt()).abs() < 1e-12);
        assert!((r.hog_deviation.unwrap() - 0.03).abs() < 1e-12);
        // Throughput rises as the runtime falls: 11 MB/s per 400,000 µs.
        let f = s.fit.as_ref().unwrap();
        assert!(f.slope < 0.0);
        assert!((s.hog_mean_abs_deviation.unwrap() - 0.015).abs() < 1e-12);
        assert_eq!(s.hog_max_deviation.map(|d| d.0), Some(500_000));
        assert!(s.finding.contains("throughput rises by"), "{}", s.finding);
        assert!(s.finding.contains("tracks runtime/period"), "{}", s.finding);
    }

    fn rec(role: &str, figures: &[(&str, f64)]) -> crate::record::ProcessRecord {
        crate::record::ProcessRecord {
            index: 0,
            role: role.into(),
            pid: 1,
            sched: crate::policy::ProcSched::realtime(crate::policy::Policy::Fifo, 50),
            start_ns: Some(0),
            end_ns: Some(2_000_000_000),
            wall_ns: 2_000_000_000,
            usage: crate::record::ProcessUsage::default(),
            kernel: crate::record::KernelCounts::default()
                .with(crate::fields::Field::RunNs, Some(1_000_000_000)),
            work: Some(4_000),
            work_unit: "hashes".into(),
            slice_ns: None,
            latency: Default::default(),
            figures: figures.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            exit: "exit code 0".into(),
            ok: true,
            stderr_tail: String::new(),
        }
    }

    #[test]
    fn throughput_is_work_over_the_common_window() {
        // Two aio workers, 80 MB and 5 MB, the last ending 2 s after release.
        let mut a = rec("worker", &[("mb_per_s", 40.0)]);
        a.work_unit = "bytes".into();
        a.work = Some(80_000_000);
        let mut b = rec("worker", &[("mb_per_s", 50.0)]);
        b.work_unit = "bytes".into();
        b.work = Some(5_000_000);
        // b started late and ran 0.1 s: its own rate is high, the run's is not.
        b.start_ns = Some(1_900_000_000);
        assert_eq!(run_throughput(&[&a, &b]), Some((42.5, "MB/s".into())));
        // Without the work done: the workers' own figures.
        a.work = None;
        assert_eq!(run_throughput(&[&a, &b]), Some((90.0, "MB/s".into())));
        let c = rec("worker", &[]);
        assert_eq!(run_throughput(&[&c]), Some((2000.0, "hashes/s".into())));
        assert_eq!(run_throughput(&[]), None);
        let h = rec("hog", &[("cpu_share", 0.7)]);
        assert_eq!(run_hog_share(&[&h]), Some(0.7));
        // Without the figure: run time over wall time.
        let h2 = rec("hog", &[]);
        assert_eq!(run_hog_share(&[&h2]), Some(0.5));
        assert_eq!(run_hog_share(&[]), None);
    }
}
