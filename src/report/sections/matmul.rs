//! Throughput of the matrix-multiply benchmark in Mflop/s (seed 003): per
//! policy, matrix size n and number of processes m, the time t (makespan)
//! and the aggregate rate 2·n³·m·multiplies / t, laid out as the seed's
//! tables, with the average over m per n and bar charts.

use super::{Estimate, Needs, RunDetails, Section, Table, chart_id, policy_colour};
use crate::report::analyse::{Analysis, Settings, policy_label};
use crate::report::blocks::{Block, Cell, Figure, Grid, HeaderCell};
use crate::report::fmt;
use crate::report::svg::{Bar, BarChart, Meta, Series};
use crate::store::ReportRun;
use crate::workload::{Stop, Workload};
use anyhow::Result;
use serde::Serialize;
use serde_json::Value;

/// Aggregate Mflop/s of m processes that each did `multiplies` n×n
/// multiplies in `t_s` seconds: 2·n³·m·multiplies / t / 10⁶.
pub fn mflops(n: u64, m: u64, multiplies: u64, t_s: f64) -> f64 {
    2.0 * (n as f64).powi(3) * m as f64 * multiplies as f64 / t_s / 1e6
}

/// One ok matmul run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MatmulRun {
    pub run_id: i64,
    /// The row of the tables: the policy, plus the factors that vary.
    pub row: String,
    pub policy: String,
    pub workload: String,
    pub n: u64,
    pub multiplies: u64,
    pub m: u64,
    pub t_s: f64,
    pub mflops: f64,
}

/// Time and Mflop/s over the runs of one policy × n × m.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MatmulCell {
    pub m: u64,
    pub t: Estimate,
    pub mflops: Estimate,
}

/// One row (policy) of a table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MatmulRow {
    pub row: String,
    pub policy: String,
    /// One per m of the table (None where there is no ok run).
    pub cells: Vec<Option<MatmulCell>>,
    /// Mean over m of the cells' mean Mflop/s (the seed's "Average
    /// Mflop/s").
    pub average_mflops: Option<f64>,
}

/// The table of one workload (one n).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MatmulTable {
    pub workload: String,
    pub n: u64,
    pub multiplies: u64,
    pub ms: Vec<u64>,
    pub rows: Vec<MatmulRow>,
}

/// The tables, in the campaign's workload order.
pub fn tables(settings: &Settings, runs: &[MatmulRun], row_order: &[String]) -> Vec<MatmulTable> {
    let mut workloads: Vec<(&str, u64, u64)> = Vec::new();
    for r in runs {
        if !workloads.iter().any(|w| w.0 == r.workload) {
            workloads.push((&r.workload, r.n, r.multiplies));
        }
    }
    workloads
        .into_iter()
        .map(|(w, n, multiplies)| {
            let mine: Vec<&MatmulRun> = runs.iter().filter(|r| r.workload == w).collect();
            let mut ms: Vec<u64> = mine.iter().map(|r| r.m).collect();
            ms.sort_unstable();
            ms.dedup();
            let mut row_keys: Vec<(&str, &str)> = mine
                .iter()
                .map(|r| (r.row.as_str(), r.policy.as_str()))
                .collect();
            row_keys.sort_by_key(|(row, _)| {
                (
                    row_order
                        .iter()
                        .position(|x| x == row)
                        .unwrap_or(usize::MAX),
                    row.to_string(),
                )
            });
            row_keys.dedup();
            let rows = row_keys
                .into_iter()
                .map(|(row, policy)| {
                    let cells: Vec<Option<MatmulCell>> = ms
                        .iter()
                        .map(|&m| {
                            let rs: Vec<&&MatmulRun> =
                                mine.iter().filter(|r| r.row == row && r.m == m).collect();
                            let t: Vec<f64> = rs.iter().map(|r| r.t_s).collect();
                            let f: Vec<f64> = rs.iter().map(|r| r.mflops).collect();
                            let label = format!("matmul|{w}|{row}|{m}");
                            Some(MatmulCell {
                                m,
                                t: Estimate::of(&t, &format!("{label}|t"), settings)?,
                                mflops: Estimate::of(&f, &format!("{label}|mflops"), settings)?,
                            })
                        })
                        .collect();
                    let means: Vec<f64> = cells.iter().flatten().map(|c| c.mflops.mean).collect();
                    MatmulRow {
                        row: row.to_string(),
                        policy: policy.to_string(),
                        average_mflops: (!means.is_empty())
                            .then(|| means.iter().sum::<f64>() / means.len() as f64),
                        cells,
                    }
                })
                .collect();
            MatmulTable {
                workload: w.to_string(),
                n,
                multiplies,
                ms,
                rows,
            }
        })
        .collect()
}

/// The section.
#[derive(Debug, Default)]
pub struct MatmulSection {
    runs: Vec<MatmulRun>,
    tables: Vec<MatmulTable>,
    rows: Vec<String>,
}

fn num_cell(e: &Estimate, digits: usize) -> String {
    fmt::sig(e.mean, digits)
}

/// Seed 003's layout: rows policy, column groups m with t and Mflop/s;
/// each cell the mean, its CI and spread in the tooltip.
fn seed_table(t: &MatmulTable) -> Grid {
    let mut top = vec![HeaderCell::new(format!("n = {}", t.n), false).span(1, 2)];
    let mut below = Vec::new();
    for m in &t.ms {
        top.push(HeaderCell::new(format!("m = {m}"), true).span(2, 1));
        below.push(HeaderCell::new("t (s)", true));
        below.push(HeaderCell::new("Mflop/s", true));
    }
    top.push(HeaderCell::new("average Mflop/s", true).span(1, 2));
    let mut numeric = vec![true; 2 + 2 * t.ms.len()];
    numeric[0] = false;
    let rows = t
        .rows
        .iter()
        .map(|r| {
            let mut v = vec![Cell::new(&r.row)];
            for c in &r.cells {
                match c {
                    Some(c) => {
                        v.push(Cell {
                            text: num_cell(&c.t, 4),
                            tooltip: Some(c.t.tooltip("s")),
                        });
                        v.push(Cell {
                            text: num_cell(&c.mflops, 4),
                            tooltip: Some(c.mflops.tooltip("Mflop/s")),
                        });
                    }
                    None => v.extend([Cell::new("–"), Cell::new("–")]),
                }
            }
            v.push(Cell::new(
                r.average_mflops
                    .map_or_else(|| "–".into(), |v| fmt::sig(v, 4)),
            ));
            v
        })
        .collect();
    Grid {
        class: Some("matmul"),
        header: vec![top, below],
        numeric,
        rows,
    }
}

/// The same with the 95 % CIs, one column per m (Markdown and the detail
/// table of the HTML).
fn table_ci(t: &MatmulTable) -> Table {
    let mut headers = vec![format!("n = {}", t.n)];
    for m in &t.ms {
        headers.push(format!("m = {m}: t (s)"));
        headers.push(format!("m = {m}: Mflop/s"));
    }
    headers.push("average Mflop/s".into());
    let rows = t
        .rows
        .iter()
        .map(|r| {
            let mut v = vec![r.row.clone()];
            for c in &r.cells {
                match c {
                    Some(c) => {
                        v.push(c.t.text(|x| fmt::sig(x, 4)));
                        v.push(c.mflops.text(|x| fmt::sig(x, 4)));
                    }
                    None => v.extend(["–".to_string(), "–".to_string()]),
                }
            }
            v.push(
                r.average_mflops
                    .map_or_else(|| "–".into(), |x| fmt::sig(x, 4)),
            );
            v
        })
        .collect();
    let mut numeric = vec![true; headers.len()];
    numeric[0] = false;
    Table {
        title: format!(
            "n = {} ({}, {} multiplies per process): mean (95% CI) over the runs",
            t.n, t.workload, t.multiplies
        ),
        headers,
        numeric,
        rows,
    }
}

/// Seed 003's "Average Mflop/s": rows n, columns policies.
fn average_table(tables: &[MatmulTable], rows: &[String]) -> Table {
    let mut headers = vec!["n".to_string()];
    headers.extend(rows.iter().cloned());
    let body = tables
        .iter()
        .map(|t| {
            let mut v = vec![t.n.to_string()];
            for row in rows {
                v.push(
                    t.rows
                        .iter()
                        .find(|r| &r.row == row)
                        .and_then(|r| r.average_mflops)
                        .map_or_else(|| "–".into(), |x| fmt::sig(x, 4)),
                );
            }
            v
        })
        .collect();
    let mut numeric = vec![true; headers.len()];
    numeric[0] = false;
    Table {
        title: "Average Mflop/s: per n, the mean over m of each policy's mean Mflop/s".into(),
        headers,
        numeric,
        rows: body,
    }
}

fn series(a: &Analysis, rows: &[String], policies: &[String]) -> Vec<Series> {
    rows.iter()
        .zip(policies)
        .map(|(r, p)| Series {
            name: r.clone(),
            colour: policy_colour(a, p),
        })
        .collect()
}

/// Mflop/s per m and policy for one n.
fn per_n_chart(a: &Analysis, t: &MatmulTable, rows: &[String], policies: &[String]) -> BarChart {
    let bars =
        t.ms.iter()
            .enumerate()
            .map(|(k, m)| {
                rows.iter()
                    .map(|row| {
                        let r = t.rows.iter().find(|r| &r.row == row)?;
                        let c = r.cells.get(k)?.as_ref()?;
                        Some(Bar {
                            value: c.mflops.mean,
                            lo: c.mflops.ci.map(|x| x.0),
                            hi: c.mflops.ci.map(|x| x.1),
                            tooltip: format!(
                                "{row}, n = {}, m = {m}: {}; t {}",
                                t.n,
                                c.mflops.tooltip("Mflop/s"),
                                c.t.tooltip("s")
                            ),
                        })
                    })
                    .collect()
            })
            .collect();
    BarChart {
        meta: Meta {
            kind: "matmul-mflops",
            id: chart_id(&["matmul-mflops", &t.workload]),
            data: vec![("workload", t.workload.clone()), ("n", t.n.to_string())],
            title: format!("n = {}: aggregate Mflop/s by number of processes", t.n),
            y_label: "Mflop/s (2n³·m·multiplies / t)".into(),
            x_label: "processes (m)".into(),
        },
        groups: t.ms.iter().map(|m| vec![m.to_string()]).collect(),
        series: series(a, rows, policies),
        bars,
        y_max: None,
    }
}

/// The average over m per n and policy.
fn average_chart(
    a: &Analysis,
    tables: &[MatmulTable],
    rows: &[String],
    policies: &[String],
) -> BarChart {
    let bars = tables
        .iter()
        .map(|t| {
            rows.iter()
                .map(|row| {
                    let r = t.rows.iter().find(|r| &r.row == row)?;
                    let v = r.average_mflops?;
                    Some(Bar {
                        value: v,
                        lo: None,
                        hi: None,
                        tooltip: format!(
                            "{row}, n = {}: average over m = {} of the mean Mflop/s: {}",
                            t.n,
                            t.ms.iter()
                                .map(u64::to_string)
                                .collect::<Vec<_>>()
                                .join(", "),
                            fmt::sig(v, 5)
                        ),
                    })
                })
                .collect()
        })
        .collect();
    BarChart {
        meta: Meta {
            kind: "matmul-average",
            id: "matmul-average".into(),
            data: vec![("workload", "all".into())],
            title: "Average Mflop/s per matrix size".into(),
            y_label: "Mflop/s (mean over m)".into(),
            x_label: "n".into(),
        },
        groups: tables
            .iter()
            .map(|t| vec![format!("n = {}", t.n)])
            .collect(),
        series: series(a, rows, policies),
        bars,
        y_max: None,
    }
}

const INTRO: &str = "Seed 003's benchmark: m processes each multiply n×n double matrices `multiplies` times; t is the \
     makespan (barrier release to the last process's end, so process creation is outside it, unlike the seed's \
     timer) and the aggregate rate is 2·n³·m·multiplies / t in Mflop/s. Each cell is the mean over the ok runs; hover \
     for the 95% CI, spread and number of runs.";

/// The ok matmul runs with a makespan (none when the campaign has no
/// matmul workload).
fn matmul_runs(a: &Analysis) -> impl Iterator<Item = &ReportRun> {
    let any = a.factors.workloads.iter().any(|w| w.kind == "matmul");
    a.runs.iter().filter(move |r| {
        any && r.status == "ok"
            && r.workload_kind == "matmul"
            && r.makespan_ns.is_some_and(|t| t > 0)
    })
}

impl MatmulSection {
    /// Row labels and their policies, in table order.
    fn row_policies(&self) -> Vec<String> {
        self.rows
            .iter()
            .map(|row| {
                self.runs
                    .iter()
                    .find(|r| &r.row == row)
                    .map_or_else(String::new, |r| r.policy.clone())
            })
            .collect()
    }
}

impl Section for MatmulSection {
    fn id(&self) -> &'static str {
        "matmul"
    }

    fn title(&self) -> &'static str {
        "Matrix-multiply throughput (Mflop/s)"
    }

    fn needs(&self, a: &Analysis) -> Needs {
        Needs {
            documents: matmul_runs(a).map(|r| r.id).collect(),
            ..Needs::default()
        }
    }

    fn prepare(&mut self, a: &Analysis, details: RunDetails) -> Result<()> {
        self.runs.clear();
        self.tables.clear();
        self.rows.clear();
        let multi_mode = a.factors.priority_modes.len() > 1;
        let multi_cpus = a.factors.cpus.len() > 1;
        for r in matmul_runs(a) {
            let Some(plan) = details.plan(r.id) else {
                continue;
            };
            let Workload::Matmul(p) = &plan.workload.workload else {
                continue;
            };
            let Stop::Work(multiplies) = p.stop else {
                // A duration: the multiplies done are not known per run.
                continue;
            };
            let mut row = policy_label(&r.policy);
            if multi_mode {
                row.push_str(&format!(", {}", r.priority_mode));
            }
            if multi_cpus {
                row.push_str(&format!(", cpus {}", r.cpus));
            }
            if let Some(rt) = r.rt_runtime_us {
                row.push_str(&format!(", rt {rt} µs"));
            }
            let t_s = r.makespan_ns.unwrap_or(0) as f64 / 1e9;
            let m = r.processes.max(0) as u64;
            self.runs.push(MatmulRun {
                run_id: r.id,
                row,
                policy: r.policy.clone(),
                workload: r.workload.clone(),
                n: p.n,
                multiplies,
                m,
                t_s,
                mflops: mflops(p.n, m, multiplies, t_s),
            });
        }
        // Rows in policy order, workloads in the campaign's order.
        let pos = |p: &str| {
            a.factors
                .policies
                .iter()
                .position(|x| x == p)
                .unwrap_or(usize::MAX)
        };
        let wpos = |w: &str| {
            a.factors
                .workloads
                .iter()
                .position(|x| x.name == w)
                .unwrap_or(usize::MAX)
        };
        self.runs.sort_by_key(|r| {
            (
                wpos(&r.workload),
                pos(&r.policy),
                r.row.clone(),
                r.m,
                r.run_id,
            )
        });
        for r in &self.runs {
            if !self.rows.contains(&r.row) {
                self.rows.push(r.row.clone());
            }
        }
        let mut rows = self.rows.clone();
        rows.sort_by_key(|row| {
            let p = self
                .runs
                .iter()
                .find(|r| &r.row == row)
                .map_or("", |r| r.policy.as_str());
            (pos(p), row.clone())
        });
        self.rows = rows;
        self.tables = tables(&a.settings, &self.runs, &self.rows);
        Ok(())
    }

    fn applies(&self, _a: &Analysis) -> bool {
        !self.tables.is_empty()
    }

    fn blocks(&self, a: &Analysis) -> Vec<Block> {
        let policies = self.row_policies();
        let mut figures: Vec<Figure> = self
            .tables
            .iter()
            .map(|t| Figure {
                svg: per_n_chart(a, t, &self.rows, &policies).render(),
                caption: format!("n = {}: mean aggregate Mflop/s with 95% CIs.", t.n),
            })
            .collect();
        if self.tables.len() > 1 {
            figures.push(Figure {
                svg: average_chart(a, &self.tables, &self.rows, &policies).render(),
                caption: "Mean over the process counts of each policy's mean Mflop/s.".into(),
            });
        }
        let mut b = vec![Block::p(INTRO), Block::Figures(figures)];
        for t in &self.tables {
            // HTML: the seed's table, the CIs collapsed under it;
            // Markdown: the table with the CIs alone.
            b.push(Block::html_only(vec![
                Block::Heading {
                    level: 3,
                    text: format!(
                        "n = {} ({}, {} multiplies per process)",
                        t.n, t.workload, t.multiplies
                    ),
                    id: Some(format!("matmul-{}", t.n)),
                },
                Block::Grid(seed_table(t)),
            ]));
            b.push(Block::Details {
                summary: "With 95% CIs".into(),
                open: false,
                blocks: vec![Block::table(table_ci(t))],
            });
        }
        b.push(Block::html_only(vec![Block::Heading {
            level: 3,
            text: "Average Mflop/s".into(),
            id: Some("matmul-average".into()),
        }]));
        b.push(Block::table(average_table(&self.tables, &self.rows)));
        b
    }

    fn json(&self, _a: &Analysis) -> Option<Value> {
        Some(serde_json::json!({ "tables": self.tables, "runs": self.runs }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mflops_formula() {
        // Seed 003: n = 150, m = 20, one multiply in 13.475 s: 10.018 Mflop/s.
        assert!((mflops(150, 20, 1, 13.475) - 10.018_552_875_695_733).abs() < 1e-9);
        // 2·100³·4·50 / 2 s = 2e8 flop/s = 200 Mflop/s.
        assert_eq!(mflops(100, 4, 50, 2.0), 200.0);
    }

    fn run(id: i64, policy: &str, m: u64, t: f64) -> MatmulRun {
        MatmulRun {
            run_id: id,
            row: policy_label(policy),
            policy: policy.into(),
            workload: "matmul-100".into(),
            n: 100,
            multiplies: 50,
            m,
            t_s: t,
            mflops: mflops(100, m, 50, t),
        }
    }

    /// A matmul campaign of two OTHER runs of 2 processes, 1 s each, as
    /// plain data: its analysis and the runs' resolved plan entries.
    fn campaign() -> (Analysis, RunDetails) {
        let toml = "name = \"mm\"\nrepetitions = 2\n[matrix]\npolicy = [\"other\"]\nworkload = [\"mm\"]\n\
                    processes = [2]\n[workloads.mm]\nkind = \"matmul\"\nn = 100\nmultiplies = 50\n";
        let plan = crate::plan::expand(&crate::spec::load(toml, "mm", &[]).unwrap(), 1);
        let runs: Vec<ReportRun> = plan
            .iter()
            .enumerate()
            .map(|(i, r)| ReportRun {
                id: i as i64 + 1,
                seq: i as i64,
                policy: "other".into(),
                workload: "mm".into(),
                workload_kind: "matmul".into(),
                processes: r.processes as i64,
                priority_mode: r.priorities.name.clone(),
                cpus: "all".into(),
                cpu_list: "0-1".into(),
                rt_runtime_us: None,
                rep: r.rep as i64,
                status: "ok".into(),
                reason: String::new(),
                makespan_ns: Some(1_000_000_000),
                cpu_util: None,
                load_avg_1m: None,
                environment_id: 1,
                others_runnable: None,
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
            })
            .collect();
        let details = RunDetails {
            documents: runs
                .iter()
                .zip(&plan)
                .map(|(r, p)| (r.id, (Some(p.clone()), Value::Null)))
                .collect(),
            ..RunDetails::default()
        };
        let data = crate::store::ReportData {
            campaign: crate::store::ReportCampaign {
                id: 1,
                name: "mm".into(),
                description: String::new(),
                seed: 1,
                scale: 1.0,
                planned_runs: 2,
                created_unix_ms: 0,
                schedlab_version: "0.1.0".into(),
                spec_json: "{}".into(),
                campaigns: Vec::new(),
                by: None,
            },
            processes: runs.iter().map(|_| Vec::new()).collect(),
            runs,
            process_rows: 0,
            environments: Vec::new(),
            work_units: Vec::new(),
        };
        let a = crate::report::analyse::analyse_data(data, &crate::report::Options::default());
        (a, details)
    }

    #[test]
    fn prepared_from_plain_data_without_a_database() {
        let (a, details) = campaign();
        let mut s = MatmulSection::default();
        assert_eq!(s.needs(&a).documents, vec![1, 2]);
        s.prepare(&a, details).unwrap();
        assert!(s.applies(&a));
        // 2·100³·2·50 flop in 1 s: 200 Mflop/s in both runs.
        let c = s.tables[0].rows[0].cells[0].as_ref().unwrap();
        assert_eq!((c.m, c.mflops.n, c.mflops.mean), (2, 2, 200.0));
        // Without the plan entries nothing is known of the runs' work.
        let mut s = MatmulSection::default();
        s.prepare(&a, RunDetails::default()).unwrap();
        assert!(!s.applies(&a));
    }

    #[test]
    fn tables_average_over_m_per_policy() {
        let runs = vec![
            run(1, "other", 2, 1.0),
            run(2, "other", 2, 1.0),
            run(3, "other", 4, 4.0),
            run(4, "fifo", 2, 2.0),
            run(5, "fifo", 4, 1.0),
            run(6, "fifo", 4, 1.0),
        ];
        let t = tables(
            &crate::report::analyse::tests_settings(),
            &runs,
            &["OTHER".into(), "FIFO".into()],
        );
        assert_eq!(t.len(), 1);
        let t = &t[0];
        assert_eq!(t.ms, vec![2, 4]);
        assert_eq!(t.rows[0].row, "OTHER");
        // OTHER: m = 2 → 200 Mflop/s (both runs), m = 4 → 100: average 150.
        let c = t.rows[0].cells[0].as_ref().unwrap();
        assert_eq!((c.t.mean, c.mflops.mean, c.mflops.n), (1.0, 200.0, 2));
        assert_eq!(t.rows[0].cells[1].as_ref().unwrap().mflops.mean, 100.0);
        assert_eq!(t.rows[0].average_mflops, Some(150.0));
        // FIFO: m = 2 in 2 s → 100, m = 4 in 1 s → 400: average 250.
        assert_eq!(t.rows[1].average_mflops, Some(250.0));
        let md = table_ci(t).markdown();
        assert!(md.contains("m = 2: Mflop/s"), "{md}");
        let avg = average_table(std::slice::from_ref(t), &["OTHER".into(), "FIFO".into()]);
        assert_eq!(
            avg.rows,
            vec![vec!["100".to_string(), "150".into(), "250".into()]]
        );
    }
}
