//! A comparison as the report's format-neutral blocks, built once and
//! rendered to one self-contained HTML page (with charts), Markdown, or
//! JSON (every number).

use serde_json::{Value, json};
use std::fmt::Write as _;

use super::analyse::{Comparison, MarginVerdict, MetricSummary, Row, Verdict, margin_label};
use super::charts::{forest, ratio_chart};
use crate::report::blocks::Table;
use crate::report::blocks::{self, Block, Figure};
use crate::report::fmt;
use crate::report::html;

/// A part of the page: anchor, heading, body.
pub struct Part {
    pub id: &'static str,
    pub title: &'static str,
    pub blocks: Vec<Block>,
}

/// "“quick” (campaign 3 of base.db)".
fn side_name(s: &super::analyse::Side) -> String {
    format!(
        "“{}” (campaign {} of {}{})",
        s.campaign.name,
        s.campaign.id,
        s.db,
        s.level()
    )
}

pub fn title(c: &Comparison) -> String {
    format!(
        "schedlab compare: campaign {} of {}{} → campaign {} of {}{}",
        c.baseline.campaign.id,
        c.baseline.db,
        c.baseline.level(),
        c.candidate.campaign.id,
        c.candidate.db,
        c.candidate.level()
    )
}

fn opt_p(p: Option<f64>) -> String {
    p.map_or_else(|| "–".into(), fmt::p)
}

fn cv(v: Option<f64>) -> String {
    v.map_or_else(|| "–".into(), |v| format!("{}%", fmt::sig(100.0 * v, 2)))
}

fn mean(v: Option<f64>, unit: &str) -> String {
    v.map_or_else(|| "–".into(), |m| fmt::with_unit(m, unit))
}

/// The finding of one row in words.
pub fn sentence(r: &Row) -> String {
    let verb = if r.metric.plural() { "are" } else { "is" };
    let p = r.p_adjusted.map_or_else(|| "p –".into(), fmt::p_eq);
    format!(
        "{}: {} {verb} {} the baseline's ({}, {p}, n = {} vs {}){}",
        r.condition,
        r.metric.label(),
        match r.ratio {
            Some(x) => format!("{}×", fmt::ratio(x)),
            None => format!("{} against", mean(r.candidate_mean, &r.unit)),
        },
        match (r.ci_low, r.ci_high) {
            (Some(l), Some(h)) => format!("95% CI {}–{}", fmt::ratio(l), fmt::ratio(h)),
            _ => "no interval".into(),
        },
        r.n_baseline,
        r.n_candidate,
        verdict_words(r)
    )
}

/// " — worse; different (±2 % margin)", " — not separated; a change smaller
/// than …", " — equivalent within ±2 %".
fn verdict_words(r: &Row) -> String {
    let mut parts: Vec<String> = Vec::new();
    match r.verdict {
        Verdict::Better => parts.push("better".into()),
        Verdict::Worse => parts.push("worse".into()),
        Verdict::NotSeparated if r.p.is_some() => parts.push(match &r.detectable {
            Some(d) => format!("not separated; {}", d.sentence()),
            None => "not separated".into(),
        }),
        Verdict::NotSeparated => {}
    }
    if let (Some(v), Some(m)) = (r.margin_verdict, r.margin_pct) {
        match v {
            MarginVerdict::Equivalent => parts.push(v.text(m)),
            _ => parts.push(format!("{} at the {} margin", v.text(m), margin_label(m))),
        }
    }
    if r.regression && r.margin_verdict.is_some() {
        parts.push("a regression beyond the margin".into());
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!(" — {}", parts.join("; "))
    }
}

fn differences(c: &Comparison) -> Part {
    let mut b = Vec::new();
    b.push(Block::p(format!(
        "Baseline: {}, {} ok runs of {}. Candidate: {}, {} ok runs of {}. Every ratio is candidate / baseline \
         (the baseline is 1.00).",
        side_name(&c.baseline),
        c.baseline.ok_runs,
        c.baseline.runs,
        side_name(&c.candidate),
        c.candidate.ok_runs,
        c.candidate.runs
    )));
    if !c.spec_differences.is_empty() {
        b.push(Block::Notes(vec![format!(
            "The specs differ in {} key{}: compared because of --force, condition by condition where the factor \
             values match.",
            c.spec_differences.len(),
            if c.spec_differences.len() == 1 { "" } else { "s" }
        )]));
        b.push(Block::table(Table {
            title: "Spec differences".into(),
            headers: vec!["key".into(), "baseline".into(), "candidate".into()],
            numeric: Vec::new(),
            rows: c
                .spec_differences
                .iter()
                .map(|d| {
                    let s = |v: &Option<String>| v.clone().unwrap_or_else(|| "(absent)".into());
                    vec![d.path.clone(), s(&d.baseline), s(&d.candidate)]
                })
                .collect(),
        }));
    }
    let unexpected = c.unexpected_environment();
    if !unexpected.is_empty() {
        b.push(Block::Notes(
            unexpected
                .iter()
                .map(|r| {
                    format!(
                        "The environments differ in {} ({} → {}), which --expect does not name: any difference \
                         below may come from it too.",
                        r.field.label(),
                        r.baseline,
                        r.candidate
                    )
                })
                .collect(),
        ));
    }
    let rows: Vec<&super::environment::EnvRow> = c.environment.iter().collect();
    b.push(Block::Table {
        table: Table {
            title: "Environment".into(),
            headers: vec![
                "".into(),
                "baseline".into(),
                "candidate".into(),
                "difference".into(),
            ],
            numeric: Vec::new(),
            rows: rows
                .iter()
                .map(|r| {
                    vec![
                        r.field.label().to_string(),
                        r.baseline.clone(),
                        r.candidate.clone(),
                        match (r.differs, r.expected) {
                            (false, _) => String::new(),
                            (true, true) => "differs (expected)".into(),
                            (true, false) => "differs, not expected".into(),
                        },
                    ]
                })
                .collect(),
        },
        row_class: rows
            .iter()
            .map(|r| r.unexpected().then_some("flag"))
            .collect(),
    });
    if !c.absent.is_empty() {
        b.push(Block::RunIn {
            title: "Figures not given (those runs are not in n)".into(),
            text: c.absent.join("; "),
        });
    }
    for (which, list) in [
        ("baseline", &c.only_in_baseline),
        ("candidate", &c.only_in_candidate),
    ] {
        if !list.is_empty() {
            b.push(Block::RunIn {
                title: format!("Only in the {which} (not compared)"),
                text: list.join("; "),
            });
        }
    }
    Part {
        id: "differences",
        title: "What differs",
        blocks: b,
    }
}

fn summary_table(c: &Comparison) -> Table {
    Table {
        title: String::new(),
        headers: [
            "metric",
            "better when",
            "conditions",
            "geometric mean",
            "95% CI",
            "overall",
            "better",
            "worse",
            "not separated",
        ]
        .map(String::from)
        .to_vec(),
        numeric: vec![false, false, true, true, true, false, true, true, true],
        rows: c
            .summary
            .iter()
            .map(|s: &MetricSummary| {
                vec![
                    s.metric.name().to_string(),
                    s.direction
                        .words()
                        .trim_end_matches(" is better")
                        .to_string(),
                    s.conditions.to_string(),
                    s.geomean_ratio.map_or_else(|| "–".into(), fmt::ratio),
                    match (s.ci_low, s.ci_high) {
                        (Some(l), Some(h)) => format!("{}–{}", fmt::ratio(l), fmt::ratio(h)),
                        _ => "–".into(),
                    },
                    s.verdict.name().to_string(),
                    s.better.to_string(),
                    s.worse.to_string(),
                    s.not_separated.to_string(),
                ]
            })
            .collect(),
    }
}

/// What the comparisons not separated could have seen: the smallest and
/// largest of their smallest detectable changes, in a sentence.
fn detectable_range(c: &Comparison) -> Option<String> {
    let ns: Vec<&Row> = c
        .comparisons
        .iter()
        .filter(|r| r.verdict == Verdict::NotSeparated && r.p.is_some())
        .collect();
    if ns.is_empty() {
        return None;
    }
    let with: Vec<(&Row, f64)> = ns
        .iter()
        .filter_map(|r| r.detectable.as_ref()?.relative.map(|x| (*r, x)))
        .collect();
    let blind = ns.len() - with.len();
    let blind_note = if blind > 0 {
        format!(
            " {blind} of them could not have seen any change (too few runs for the test to reach p < {} over the \
             comparison's tests).",
            c.alpha
        )
    } else {
        String::new()
    };
    let lo = with.iter().min_by(|a, b| a.1.total_cmp(&b.1));
    let hi = with.iter().max_by(|a, b| a.1.total_cmp(&b.1));
    let pct = |x: f64| format!("{} %", fmt::sig(100.0 * x, 2));
    Some(match (lo, hi) {
        (Some(lo), Some(hi)) if with.len() > 1 => format!(
            "Not separated is not the same as unchanged: for the {} comparisons not separated, the smallest change \
             these runs could have seen (80% power) ranges from {} ({} on {}) to {} ({} on {}).{blind_note}",
            ns.len(),
            pct(lo.1),
            lo.0.condition,
            lo.0.metric.name(),
            pct(hi.1),
            hi.0.condition,
            hi.0.metric.name()
        ),
        (Some(one), _) => format!(
            "Not separated is not the same as unchanged: {} on {}: {}.{blind_note}",
            one.0.condition,
            one.0.metric.name(),
            one.0
                .detectable
                .as_ref()
                .map(|d| d.sentence())
                .unwrap_or_default()
        ),
        _ => format!("Not separated is not the same as unchanged.{blind_note}"),
    })
}

fn summary(c: &Comparison) -> Part {
    let n = c.comparisons.len();
    let (better, worse) = (c.count(Verdict::Better), c.count(Verdict::Worse));
    let tested = c.comparisons.iter().filter(|r| r.p.is_some()).count();
    let mut facts = vec![
        (better.to_string(), "better".into()),
        (worse.to_string(), "worse".into()),
        ((n - better - worse).to_string(), "not separated".into()),
        (n.to_string(), "condition × metric".into()),
    ];
    let mut line = format!(
        "{better} better, {worse} worse, {} not separated of {n} comparisons (condition × metric).",
        n - better - worse
    );
    if let Some(m) = c.margin_pct {
        let counts = [
            MarginVerdict::Equivalent,
            MarginVerdict::Different,
            MarginVerdict::NeitherShown,
        ]
        .map(|v| (c.count_margin(v), v.text(m)));
        for (k, t) in &counts {
            facts.push((k.to_string(), t.clone()));
        }
        let _ = write!(
            line,
            " Against the {} margin: {}.",
            margin_label(m),
            counts
                .iter()
                .map(|(k, t)| format!("{k} {t}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let mut b = vec![Block::Facts(facts), Block::md_only(vec![Block::p(line)])];
    let regressions = c.regressions();
    if let (Some(m), false) = (c.margin_pct, regressions.is_empty()) {
        b.push(Block::Notes(vec![format!(
            "{} comparison{} worse beyond the {} margin with significance (what --fail-on regression fails \
             on): {}.",
            regressions.len(),
            if regressions.len() == 1 { " is" } else { "s are" },
            margin_label(m),
            regressions
                .iter()
                .map(|r| format!("{} on {}", r.condition, r.metric.name()))
                .collect::<Vec<_>>()
                .join("; ")
        )]));
    }
    let unreachable = c.unreachable();
    if unreachable > 0 {
        b.push(Block::Notes(vec![format!(
            "{} of the {tested} tested comparisons have too few runs to ever reach significance: the smallest \
             p an exact Mann–Whitney test of so few runs can give, times the {tested} comparisons of Holm's \
             correction, is not below {}. Run more repetitions (10 a side or more), or compare fewer metrics \
             (--metric).",
            if unreachable == tested {
                "All".to_string()
            } else {
                unreachable.to_string()
            },
            c.alpha
        )]));
    }
    if tested < n {
        b.push(Block::Notes(vec![format!(
            "{} of the {n} comparisons have fewer than 3 runs on a side: not tested, so never separated.",
            n - tested
        )]));
    }
    let found: Vec<String> = c
        .comparisons
        .iter()
        .filter(|r| r.verdict != Verdict::NotSeparated)
        .map(sentence)
        .collect();
    if let Some(range) = detectable_range(c) {
        b.push(Block::p(range));
    }
    if found.is_empty() {
        b.push(Block::p(
            "No difference survives Holm's correction: the data do not separate the candidate from the baseline \
             on any condition and metric.",
        ));
    } else {
        b.push(Block::List {
            class: Some("findings"),
            item_class: None,
            items: found,
        });
    }
    b.push(Block::Title("Geometric mean per metric".into()));
    b.push(Block::table(summary_table(c)));
    if let Some(f) = forest(c) {
        b.push(Block::html_only(vec![Block::Figures(vec![Figure {
            svg: f.render(),
            caption: "Geometric mean over the matched conditions of each metric's ratio, with its 95% bootstrap \
                      interval (every condition's runs resampled). Right of the dashed line the candidate's \
                      values are higher."
                .into(),
        }])]));
    }
    // What emulated sides' timings are worth, first.
    let trust: Vec<Block> = [c.baseline.trust("baseline"), c.candidate.trust("candidate")]
        .into_iter()
        .flatten()
        .map(Block::p)
        .collect();
    b.splice(0..0, trust);
    Part {
        id: "summary",
        title: "Summary",
        blocks: b,
    }
}

const ROW_HEADERS: [&str; 13] = [
    "condition",
    "n",
    "baseline",
    "candidate",
    "ratio",
    "95% CI",
    "CV base",
    "CV cand",
    "MW p",
    "Holm p",
    "verdict",
    "noise > change",
    "smallest change seen",
];

fn metric_rows(c: &Comparison, m: crate::report::Metric) -> (Table, Vec<Option<&'static str>>) {
    let rows: Vec<&Row> = c.rows_of(m).collect();
    let mut table_rows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.condition.clone(),
                format!("{}/{}", r.n_baseline, r.n_candidate),
                mean(r.baseline_mean, &r.unit),
                mean(r.candidate_mean, &r.unit),
                r.ratio.map_or_else(|| "–".into(), fmt::ratio),
                match (r.ci_low, r.ci_high) {
                    (Some(l), Some(h)) => format!("{}–{}", fmt::ratio(l), fmt::ratio(h)),
                    _ => "–".into(),
                },
                cv(r.baseline_cv),
                cv(r.candidate_cv),
                opt_p(r.p),
                opt_p(r.p_adjusted),
                r.verdict.name().to_string(),
                if r.noise_exceeds_change {
                    "yes".into()
                } else {
                    String::new()
                },
                match (&r.detectable, r.verdict) {
                    (Some(d), Verdict::NotSeparated) => d.cell(),
                    _ => String::new(),
                },
            ]
            .into_iter()
            .chain(c.margin_pct.map(|m| {
                let v = r.margin_verdict.map_or_else(|| "–".into(), |v| v.text(m));
                if r.regression {
                    format!("{v} (regression)")
                } else {
                    v
                }
            }))
            .collect()
        })
        .collect();
    let mut classes: Vec<Option<&'static str>> = rows
        .iter()
        .map(|r| match r.verdict {
            Verdict::Better => Some("different"),
            Verdict::Worse => Some("flag"),
            Verdict::NotSeparated => None,
        })
        .collect();
    if let Some(s) = c.summary.iter().find(|s| s.metric == m) {
        let mut row = vec![
            format!("geometric mean ({} conditions)", s.conditions),
            String::new(),
            String::new(),
            String::new(),
            s.geomean_ratio.map_or_else(|| "–".into(), fmt::ratio),
            match (s.ci_low, s.ci_high) {
                (Some(l), Some(h)) => format!("{}–{}", fmt::ratio(l), fmt::ratio(h)),
                _ => "–".into(),
            },
        ];
        row.extend(["", "", "", ""].map(String::from));
        row.push(s.verdict.name().to_string());
        row.push(String::new());
        row.push(String::new());
        if c.margin_pct.is_some() {
            row.push(String::new());
        }
        table_rows.push(row);
        classes.push(None);
    }
    let mut headers = ROW_HEADERS.map(String::from).to_vec();
    let mut numeric = vec![
        false, true, true, true, true, true, true, true, true, true, false, false, false,
    ];
    if let Some(m) = c.margin_pct {
        headers.push(format!("{} verdict", margin_label(m)));
        numeric.push(false);
    }
    (
        Table {
            title: String::new(),
            headers,
            numeric,
            rows: table_rows,
        },
        classes,
    )
}

fn per_metric(c: &Comparison) -> Part {
    let mut b = vec![Block::p(
        "Per condition: the means of the ok runs of each side (a run's value is the mean over its processes), \
         the ratio candidate / baseline with its 95% percentile-bootstrap interval, each side's coefficient of \
         variation over runs, the two-sided Mann–Whitney U p and the p adjusted by Holm over every comparison \
         of this page. “noise > change”: the larger CV exceeds |ratio − 1|, so single runs cannot show the \
         change. “smallest change seen”: for a row not separated, the smallest change (share of the baseline's \
         mean) its runs could have seen with 80% power.",
    )];
    for &m in &c.metrics {
        if c.rows_of(m).next().is_none() {
            continue;
        }
        b.push(Block::Heading {
            level: 3,
            text: format!("{} ({}; {})", m.name(), m.label(), m.direction().words()),
            id: Some(format!("metric-{}", m.name())),
        });
        if let Some(chart) = ratio_chart(c, m) {
            b.push(Block::html_only(vec![Block::Figures(vec![Figure {
                svg: chart.render(),
                caption: format!(
                    "{}: each condition's ratio candidate / baseline with its 95% bootstrap interval, the \
                     geometric mean as a diamond; coloured by verdict ({}).",
                    m.label(),
                    m.direction().words()
                ),
            }])]));
        }
        let (table, row_class) = metric_rows(c, m);
        b.push(Block::Table { table, row_class });
    }
    Part {
        id: "metrics",
        title: "Per metric and condition",
        blocks: b,
    }
}

fn method(c: &Comparison) -> Part {
    Part {
        id: "method",
        title: "Method",
        blocks: vec![
            Block::p(format!(
                "Conditions are matched by their factor values (workload, processes, priorities, CPUs, RT runtime, \
             slice, policy). A verdict is better or worse only when the Mann–Whitney p, Holm-adjusted over all \
             {} tested comparisons, is below {}; better means lower for times, switches and waits and higher for \
             CPU % and work done. With fewer than 3 runs a side nothing is tested. The geometric mean's interval \
             comes from a bootstrap that resamples every condition's runs; its verdict (not Holm-adjusted) says \
             on which side of 1 the interval lies, and is given only when every condition has at least 10 runs \
             a side. \
             Bootstrap seed {}, at most {} resamples per interval.",
                c.comparisons.iter().filter(|r| r.p.is_some()).count(),
                c.alpha,
                c.bootstrap_seed,
                c.max_resamples
            )),
            Block::p(format!(
                "Smallest change seen: for a comparison not separated, the smallest change of the mean the \
             Mann–Whitney test of these runs detects with 80% power at α = {} divided by the {} tests of Holm's \
             correction (what a single real change must reach), as a share of the baseline's mean. Mann–Whitney's \
             power is taken as the t-test's with 3/π of the runs on each side (its efficiency for normal data), \
             the runs as normal with the sides' pooled standard deviation; where the exact test's smallest \
             attainable p is above that level, no change could have been seen.",
                c.alpha,
                c.comparisons.iter().filter(|r| r.p.is_some()).count()
            )),
            Block::p(match c.margin_pct {
                Some(m) => format!(
                    "Margin {} (from {}): two one-sided Welch t-tests (TOST) on the logs of the runs' values test \
                 whether the ratio of geometric means lies within {}–{}; their p, Holm-adjusted over every row \
                 with one, below {} makes a row “{}”. Otherwise a row is “different” when the difference test \
                 separates it (better or worse) and “neither shown” when not. A row is a regression \
                 (--fail-on regression, exit code {}) when it is worse and the one-sided Welch test on logs that \
                 the change is worse than the margin, Holm-adjusted, is below {} (where a value is not positive, \
                 when its ratio interval lies wholly beyond the margin).",
                    margin_label(m),
                    c.margin_from.as_deref().unwrap_or("--margin"),
                    fmt::ratio(1.0 - m / 100.0),
                    fmt::ratio(1.0 + m / 100.0),
                    c.alpha,
                    MarginVerdict::Equivalent.text(m),
                    super::EXIT_REGRESSION,
                    c.alpha
                ),
                None => format!(
                    "No equivalence margin (--margin, or compare_margin_pct in the baseline's spec): no row is \
                 called equivalent. With --fail-on regression, any row worse with significance fails (exit code \
                 {}).",
                    super::EXIT_REGRESSION
                ),
            }),
        ],
    }
}

/// The parts of the page, in order: what differs first.
pub fn parts(c: &Comparison) -> Vec<Part> {
    vec![differences(c), summary(c), per_metric(c), method(c)]
}

pub fn html(c: &Comparison) -> String {
    let mut body = String::new();
    let mut toc = Vec::new();
    for p in parts(c) {
        toc.push((p.id.to_string(), p.title.to_string()));
        let _ = write!(
            body,
            "<section id=\"{}\">\n<h2>{}</h2>\n{}</section>\n",
            p.id,
            fmt::esc(p.title),
            blocks::html(&p.blocks)
        );
    }
    html::page(
        &title(c),
        &format!(
            "{} vs {} · {} comparisons: {} better, {} worse",
            side_name(&c.baseline),
            side_name(&c.candidate),
            c.comparisons.len(),
            c.count(Verdict::Better),
            c.count(Verdict::Worse)
        ),
        "",
        &toc,
        &body,
        &format!(
            "Generated by schedlab {}. Open offline; hover over chart marks for exact values. `schedlab compare \
             --format json` gives every number.",
            env!("CARGO_PKG_VERSION")
        ),
    )
}

pub fn markdown(c: &Comparison) -> String {
    let mut out = format!("# {}\n\n", crate::report::fmt::md_text(&title(c)));
    for p in parts(c) {
        let inner = blocks::markdown(&p.blocks);
        let _ = write!(out, "## {}\n\n{}\n\n", p.title, inner.trim_end());
    }
    let trimmed = out.trim_end().len();
    out.truncate(trimmed);
    out.push('\n');
    // Names come from specs: no escape sequence reaches a terminal, and
    // no tag reaches a Markdown viewer as HTML.
    let out = crate::out::md_inert(&out).into_owned();
    match crate::out::esc_lines(&out) {
        std::borrow::Cow::Borrowed(_) => out,
        std::borrow::Cow::Owned(escaped) => escaped,
    }
}

pub fn json(c: &Comparison) -> Value {
    let mut v = serde_json::to_value(c).expect("a comparison serialises");
    v["schedlab_compare"] = json!(1);
    v["schedlab_version"] = json!(env!("CARGO_PKG_VERSION"));
    v["regressions"] = json!(c.regressions().len());
    v["unexpected_environment_differences"] = json!(
        c.unexpected_environment()
            .iter()
            .map(|r| r.field.name())
            .collect::<Vec<_>>()
    );
    v
}

/// The comparison in one format.
pub fn render(c: &Comparison, format: crate::report::Format) -> String {
    match format {
        crate::report::Format::Html => html(c),
        crate::report::Format::Md => markdown(c),
        crate::report::Format::Json => {
            let mut s = serde_json::to_string_pretty(&json(c)).expect("a comparison serialises");
            s.push('\n');
            s
        }
    }
}
