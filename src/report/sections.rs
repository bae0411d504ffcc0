//! Report sections. Each section renders itself to HTML, Markdown and JSON
//! from the analysed campaign; a report is a list of them.
//!
//! To add a section (e.g. weighted round robin results, RT-bandwidth
//! sweeps): implement [`Section`] — load anything beyond the [`Analysis`]
//! in [`Section::prepare`] through the [`Store`], say in
//! [`Section::applies`] whether the campaign has anything for it — and add
//! it to [`default_sections`]. Its `id` is the HTML anchor and the JSON key.

use anyhow::Result;
use serde_json::{Value, json};
use std::fmt::Write;

use super::analyse::{
    Analysis, Cell, CiMethod, Comparison, ShareCheck, Verdict, mw_method, policy_label, unreachable,
};
use super::fmt::{self, Align, md_table};
use super::metric::Metric;
use super::{charts, html};
use crate::store::Store;

/// One part of a report.
pub trait Section {
    /// Stable identifier: the HTML anchor and the JSON key.
    fn id(&self) -> &'static str;
    /// Heading.
    fn title(&self) -> &'static str;
    /// Load what the section needs beyond the analysed campaign.
    fn prepare(&mut self, _store: &Store, _a: &Analysis) -> Result<()> {
        Ok(())
    }
    /// Whether the campaign has anything for this section.
    fn applies(&self, _a: &Analysis) -> bool {
        true
    }
    /// HTML body (without the heading); empty leaves the section out.
    fn html(&self, a: &Analysis) -> String;
    /// Markdown body (without the heading); empty leaves the section out.
    fn markdown(&self, a: &Analysis) -> String;
    /// JSON value under the key [`Section::id`]; None leaves it out.
    fn json(&self, a: &Analysis) -> Option<Value>;
}

/// The sections of a report, in order.
pub fn default_sections() -> Vec<Box<dyn Section>> {
    vec![
        Box::new(SummarySection),
        Box::new(ChartsSection),
        Box::new(ComparisonsSection),
        Box::new(ScalingSection),
        Box::new(FairnessSection),
        Box::new(OutliersSection),
        Box::new(FailuresSection),
        Box::new(EnvironmentSection),
        Box::new(ConditionsSection),
        Box::new(MethodSection),
    ]
}

/// Most rows of long listings (outliers, failed runs) in HTML and Markdown;
/// the JSON always has all of them.
pub const MAX_LISTED: usize = 200;

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn ci_text(cell: &Cell) -> String {
    cell.ci.as_ref().map_or_else(
        || "–".into(),
        |i| format!("{}–{}", fmt::num(i.lo), fmt::num(i.hi)),
    )
}

fn ci_method(cell: &Cell) -> String {
    match &cell.ci {
        None => "–".into(),
        Some(i) => match i.method {
            CiMethod::T => "t".into(),
            CiMethod::Bootstrap if cell.n < super::analyse::BOOTSTRAP_MIN_N => {
                "bootstrap (skewed)".into()
            }
            CiMethod::Bootstrap => "bootstrap".into(),
        },
    }
}

fn verdict_text(a: &Analysis, c: &Comparison) -> &'static str {
    match c.verdict {
        Verdict::Different => "different",
        Verdict::NotSeparated if unreachable(a, c) => "not separated (too few runs for p < 0.05)",
        Verdict::NotSeparated => "not separated",
        Verdict::TooFewRuns => "too few runs",
    }
}

/// Warnings and context for the summary.
pub fn notes(a: &Analysis) -> Vec<String> {
    let mut v = Vec::new();
    let stored = a.counts.total() as u64;
    if stored < a.campaign.planned_runs {
        v.push(format!(
            "The campaign is incomplete: {stored} of {} planned runs are stored (running the same spec again resumes it).",
            a.campaign.planned_runs
        ));
    }
    if a.counts.not_ok() > 0 {
        v.push(format!(
            "{} did not finish ok ({} failed, {} timed out, {} skipped) and {} not in the statistics: see “Failed, timed-out and skipped runs”.",
            plural(a.counts.not_ok(), "run", "runs"),
            a.counts.failed,
            a.counts.timed_out,
            a.counts.skipped,
            if a.counts.not_ok() == 1 { "is" } else { "are" }
        ));
    }
    if !a.outliers.is_empty() {
        let mut runs: Vec<i64> = a.outliers.iter().map(|o| o.run_id).collect();
        runs.sort_unstable();
        runs.dedup();
        v.push(format!(
            "Statistical outliers were detected: {} in {} (modified z-score above {}). They are kept in every statistic; \
             see “Outliers”, and consider re-running those conditions on a quiet machine.",
            plural(a.outliers.len(), "value", "values"),
            plural(runs.len(), "run", "runs"),
            a.settings.outlier_threshold
        ));
    }
    let tested = a
        .comparisons
        .iter()
        .filter(|c| c.p_adjusted.is_some())
        .count();
    let hopeless: Vec<&Comparison> = a.comparisons.iter().filter(|c| unreachable(a, c)).collect();
    if !hopeless.is_empty() {
        let c = hopeless[0];
        v.push(format!(
            "{} of {tested} comparisons have too few runs to ever reach significance: with n = {} vs {} the smallest \
             possible Mann–Whitney p is {}, before Holm's correction multiplies it by up to {tested}. Run more \
             repetitions (10 per condition allow p down to 1e-5).",
            hopeless.len(),
            c.n_a,
            c.n_b,
            fmt::sig(c.min_attainable_p.unwrap_or(1.0), 2)
        ));
    }
    let few = a.count_verdict(Verdict::TooFewRuns);
    if few > 0 {
        v.push(format!(
            "{} fewer than {} runs on a side and {} not tested.",
            plural(few, "comparison has", "comparisons have"),
            a.settings.min_runs_per_side,
            if few == 1 { "is" } else { "are" }
        ));
    }
    if a.environments.len() > 1 {
        v.push(format!(
            "The runs were made in {} different environments (kernel, CPU or scheduler settings): see “Environment”; \
             differences between policies may be confounded with them.",
            a.environments.len()
        ));
    }
    if let (Some(load), Some(env)) = (&a.load, a.environments.first())
        && load.max > 0.5 * env.cpus_online.max(1) as f64
    {
        v.push(format!(
            "The 1-minute load average at run start reached {} (median {}) on {}: other work on the machine may \
             have disturbed some runs.",
            fmt::sig(load.max, 3),
            fmt::sig(load.median, 3),
            plural(env.cpus_online as usize, "CPU", "CPUs")
        ));
    }
    if let Some(&first) = a.settings.metrics.first() {
        let noisy = a
            .conditions
            .iter()
            .filter(|c| {
                c.cells[0]
                    .summary
                    .as_ref()
                    .and_then(|s| s.cv)
                    .is_some_and(|cv| cv > 0.10)
            })
            .count();
        if noisy > 0 {
            v.push(format!(
                "In {} of {} conditions, {} varies by more than 10% between runs (coefficient of variation): \
                 there a single run does not represent the condition.",
                noisy,
                a.conditions.len(),
                first.label()
            ));
        }
    }
    v
}

fn findings(a: &Analysis) -> Vec<&Comparison> {
    a.comparisons
        .iter()
        .filter(|c| c.verdict == Verdict::Different)
        .collect()
}

fn headline_not_separated(a: &Analysis) -> Vec<&Comparison> {
    let Some(&first) = a.settings.metrics.first() else {
        return Vec::new();
    };
    a.comparisons
        .iter()
        .filter(|c| c.metric == first && c.verdict == Verdict::NotSeparated)
        .collect()
}

fn campaign_line(a: &Analysis) -> String {
    let c = &a.campaign;
    let mut s = format!("Campaign {} “{}”", c.id, c.name);
    if !c.description.is_empty() {
        s.push_str(&format!(" ({})", c.description));
    }
    s.push_str(&format!(
        ", created {}, scale {}, run order seed {}; recorded by schedlab {}.",
        fmt::utc(c.created_unix_ms),
        c.scale,
        c.seed,
        c.schedlab_version
    ));
    s
}

fn runs_line(a: &Analysis) -> String {
    format!(
        "Runs: {} ok, {} failed, {} timed out, {} skipped ({} planned); {} conditions, {} process records. Metrics: {}.",
        a.counts.ok,
        a.counts.failed,
        a.counts.timed_out,
        a.counts.skipped,
        a.campaign.planned_runs,
        a.conditions.len(),
        a.process_rows,
        a.settings
            .metrics
            .iter()
            .map(|m| m.name())
            .collect::<Vec<_>>()
            .join(", ")
    )
}

fn comparisons_line(a: &Analysis) -> String {
    let tested = a
        .comparisons
        .iter()
        .filter(|c| c.p_adjusted.is_some())
        .count();
    format!(
        "{} of {tested} policy comparisons differ significantly after Holm's correction over all of them \
         (Mann–Whitney U, adjusted p < {}); {} not separated, {} with too few runs.",
        a.count_verdict(Verdict::Different),
        a.settings.alpha,
        a.count_verdict(Verdict::NotSeparated),
        a.count_verdict(Verdict::TooFewRuns)
    )
}

/// Summary and findings in plain sentences.
pub struct SummarySection;

impl Section for SummarySection {
    fn id(&self) -> &'static str {
        "summary"
    }

    fn title(&self) -> &'static str {
        "Summary and findings"
    }

    fn html(&self, a: &Analysis) -> String {
        let mut o = String::new();
        o.push_str(&html::p(&campaign_line(a)));
        let tested = a
            .comparisons
            .iter()
            .filter(|c| c.p_adjusted.is_some())
            .count();
        let _ = writeln!(
            o,
            "<ul class=\"facts\"><li><b>{}</b>ok runs</li><li><b>{}</b>failed, timed out or skipped</li>\
             <li><b>{}</b>conditions</li><li><b>{}</b>process records</li>\
             <li><b>{} / {}</b>comparisons significant</li><li><b>{}</b>outlier values flagged</li></ul>",
            a.counts.ok,
            a.counts.not_ok(),
            a.conditions.len(),
            a.process_rows,
            a.count_verdict(Verdict::Different),
            tested,
            a.outliers.len()
        );
        let notes = notes(a);
        if !notes.is_empty() {
            o.push_str("<div class=\"note\">");
            for n in &notes {
                o.push_str(&html::p(n));
            }
            o.push_str("</div>\n");
        }
        o.push_str("<h3>Findings</h3>\n");
        o.push_str(&html::p(&comparisons_line(a)));
        let f = findings(a);
        if f.is_empty() {
            o.push_str(&html::p(NO_FINDINGS));
        } else {
            grouped_html(&mut o, a, &f, "different");
        }
        let ns = headline_not_separated(a);
        if !ns.is_empty() {
            let _ = writeln!(
                o,
                "<h3>Not separated: {}</h3>",
                fmt::esc(a.settings.metrics[0].label())
            );
            grouped_html(&mut o, a, &ns, "ns");
        }
        o
    }

    fn markdown(&self, a: &Analysis) -> String {
        let mut o = String::new();
        let _ = writeln!(o, "{}\n", campaign_line(a));
        let _ = writeln!(o, "{}\n", runs_line(a));
        for n in notes(a) {
            let _ = writeln!(o, "> **Note:** {n}\n");
        }
        let _ = writeln!(o, "### Findings\n\n{}\n", comparisons_line(a));
        let f = findings(a);
        if f.is_empty() {
            let _ = writeln!(o, "{NO_FINDINGS}\n");
        } else {
            grouped_md(&mut o, a, &f);
        }
        let ns = headline_not_separated(a);
        if !ns.is_empty() {
            let _ = writeln!(o, "### Not separated: {}\n", a.settings.metrics[0].label());
            grouped_md(&mut o, a, &ns);
        }
        o
    }

    fn json(&self, a: &Analysis) -> Option<Value> {
        Some(json!({
            "counts": a.counts,
            "planned_runs": a.campaign.planned_runs,
            "conditions": a.conditions.len(),
            "process_rows": a.process_rows,
            "comparisons": {
                "tested": a.comparisons.iter().filter(|c| c.p_adjusted.is_some()).count(),
                "different": a.count_verdict(Verdict::Different),
                "not_separated": a.count_verdict(Verdict::NotSeparated),
                "too_few_runs": a.count_verdict(Verdict::TooFewRuns),
            },
            "findings": findings(a).iter().map(|c| &c.sentence).collect::<Vec<_>>(),
            "not_separated": headline_not_separated(a).iter().map(|c| &c.sentence).collect::<Vec<_>>(),
            "notes": notes(a),
        }))
    }
}

const NO_FINDINGS: &str = "No difference between policies is significant: the data do not support ranking them on any metric.";

/// The text with its first letter in upper case.
fn capitalised(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

/// Comparisons by group, in order.
fn by_group<'a>(items: &[&'a Comparison]) -> Vec<(usize, Vec<&'a Comparison>)> {
    let mut out: Vec<(usize, Vec<&Comparison>)> = Vec::new();
    for &c in items {
        match out.last_mut() {
            Some((g, v)) if *g == c.group => v.push(c),
            _ => out.push((c.group, vec![c])),
        }
    }
    out
}

/// Statements under a heading per group.
fn grouped_html(o: &mut String, a: &Analysis, items: &[&Comparison], class: &str) {
    for (g, cs) in by_group(items) {
        let _ = write!(
            o,
            "<h4>{}</h4>\n<ul class=\"findings\">",
            fmt::esc(&a.groups[g].label)
        );
        for c in cs {
            let _ = write!(
                o,
                "<li class=\"{class}\">{}.</li>",
                fmt::esc(&capitalised(&c.statement))
            );
        }
        o.push_str("</ul>\n");
    }
}

fn grouped_md(o: &mut String, a: &Analysis, items: &[&Comparison]) {
    for (g, cs) in by_group(items) {
        let _ = writeln!(o, "**{}**\n", a.groups[g].label);
        for c in cs {
            let _ = writeln!(o, "- {}.", capitalised(&c.statement));
        }
        o.push('\n');
    }
}

/// Charts per workload: bars with CIs and every run, for every metric.
pub struct ChartsSection;

impl Section for ChartsSection {
    fn id(&self) -> &'static str {
        "charts"
    }

    fn title(&self) -> &'static str {
        "Charts by workload"
    }

    fn applies(&self, a: &Analysis) -> bool {
        a.counts.ok > 0
    }

    fn html(&self, a: &Analysis) -> String {
        let mut o = html::p(
            "Left: mean of the per-run values (each run's value is the mean over its processes; makespan is per run) \
             with 95% confidence-interval whiskers. Right: every run, so the spread is visible (box plots when a \
             condition has more than 40 runs; red rings mark flagged outliers). Hover over any mark for its exact \
             values.",
        );
        for w in &a.factors.workloads {
            let _ = writeln!(
                o,
                "<h3 id=\"charts-{}\">{}</h3>",
                fmt::esc(&w.name),
                fmt::esc(&w.name)
            );
            let mut sub = format!("Workload kind {}", w.kind);
            if !w.work_unit.is_empty() {
                sub.push_str(&format!("; work is counted in {}", w.work_unit));
            }
            o.push_str(&html::p(&(sub + ".")));
            o.push_str("<div class=\"charts\">\n");
            for &m in &a.settings.metrics {
                if let Some(b) = charts::bars(a, &w.name, m) {
                    o.push_str(&html::figure(
                        &b.render(),
                        &format!("{}: mean ± 95% CI per policy and process count.", m.label()),
                    ));
                }
                if let Some(s) = charts::spread(a, &w.name, m) {
                    o.push_str(&html::figure(
                        &s.render(),
                        &format!("{}: every run.", m.label()),
                    ));
                }
            }
            o.push_str("</div>\n");
        }
        o
    }

    fn markdown(&self, _a: &Analysis) -> String {
        String::new()
    }

    fn json(&self, _a: &Analysis) -> Option<Value> {
        None
    }
}

/// Every pair of policies within each group, every metric.
pub struct ComparisonsSection;

const CMP_HEADERS: [&str; 11] = [
    "metric", "A vs B", "n", "mean A", "mean B", "A/B", "95% CI", "MW p", "Welch p", "Holm p",
    "verdict",
];
const CMP_NUMERIC: [bool; 11] = [
    false, false, true, true, true, true, true, true, true, true, false,
];

fn comparison_row(a: &Analysis, c: &Comparison) -> Vec<String> {
    let g = &a.groups[c.group];
    let unit = a.unit(c.metric, &g.key.workload);
    vec![
        c.metric.name().to_string(),
        format!("{} vs {}", policy_label(&c.a), policy_label(&c.b)),
        format!("{}/{}", c.n_a, c.n_b),
        c.mean_a
            .map_or_else(|| "–".into(), |m| fmt::with_unit(m, &unit)),
        c.mean_b
            .map_or_else(|| "–".into(), |m| fmt::with_unit(m, &unit)),
        c.ratio.map_or_else(|| "–".into(), fmt::ratio),
        c.ratio_ci.map_or_else(
            || "–".into(),
            |(l, h)| format!("{}–{}", fmt::ratio(l), fmt::ratio(h)),
        ),
        c.mann_whitney.as_ref().map_or_else(
            || "–".into(),
            |m| format!("{} ({})", fmt::p(m.p), mw_method(c)),
        ),
        c.welch.as_ref().map_or_else(|| "–".into(), |w| fmt::p(w.p)),
        c.p_adjusted.map_or_else(|| "–".into(), fmt::p),
        verdict_text(a, c).to_string(),
    ]
}

impl Section for ComparisonsSection {
    fn id(&self) -> &'static str {
        "comparisons"
    }

    fn title(&self) -> &'static str {
        "Policy comparisons"
    }

    fn applies(&self, a: &Analysis) -> bool {
        !a.comparisons.is_empty()
    }

    fn html(&self, a: &Analysis) -> String {
        let mut o = html::p(
            "Within each workload, process count and setting, every pair of policies on every metric. A is the \
             policy with the lower mean; A/B is the ratio of means with its 95% percentile-bootstrap interval. MW p: \
             two-sided Mann–Whitney U (exact or normal approximation); Welch p: Welch's t-test as a second opinion; \
             Holm p: Mann–Whitney p adjusted over every comparison of this report. Highlighted rows are significant. \
             The ratio intervals are not adjusted for the number of comparisons: one that excludes 1 without a \
             significant Holm p is a hint, not a finding.",
        );
        for (gi, g) in a.groups.iter().enumerate() {
            let rows: Vec<&Comparison> = a.comparisons.iter().filter(|c| c.group == gi).collect();
            if rows.is_empty() {
                continue;
            }
            let sig = rows
                .iter()
                .filter(|c| c.verdict == Verdict::Different)
                .count();
            let _ = writeln!(
                o,
                "<details open><summary>{} — {} of {} significant</summary>",
                fmt::esc(&g.label),
                sig,
                rows.len()
            );
            let cells: Vec<Vec<String>> = rows.iter().map(|c| comparison_row(a, c)).collect();
            let classes: Vec<Option<&str>> = rows
                .iter()
                .map(|c| (c.verdict == Verdict::Different).then_some("different"))
                .collect();
            o.push_str(&html::table(&CMP_HEADERS, &CMP_NUMERIC, &cells, &classes));
            o.push_str("</details>\n");
        }
        o
    }

    fn markdown(&self, a: &Analysis) -> String {
        let mut o = String::from(
            "A: the policy with the lower mean. A/B: ratio of means, 95% CI by bootstrap. MW p: Mann–Whitney U; \
             Welch p: Welch's t-test; Holm p: Mann–Whitney p adjusted over every comparison of the report. Ratio \
             intervals are not adjusted for the number of comparisons.\n\n",
        );
        let align: Vec<Align> = CMP_NUMERIC
            .iter()
            .map(|&n| if n { Align::Right } else { Align::Left })
            .collect();
        for (gi, g) in a.groups.iter().enumerate() {
            let rows: Vec<Vec<String>> = a
                .comparisons
                .iter()
                .filter(|c| c.group == gi)
                .map(|c| comparison_row(a, c))
                .collect();
            if rows.is_empty() {
                continue;
            }
            let _ = writeln!(o, "### {}\n", g.label);
            o.push_str(&md_table(&CMP_HEADERS, &align, &rows));
            o.push('\n');
        }
        o
    }

    fn json(&self, a: &Analysis) -> Option<Value> {
        let items: Vec<Value> = a
            .comparisons
            .iter()
            .map(|c| {
                let mut v = serde_json::to_value(c).unwrap_or_default();
                v["group_label"] = json!(a.groups[c.group].label);
                v
            })
            .collect();
        Some(Value::Array(items))
    }
}

/// Log–log slopes against the number of processes.
pub struct ScalingSection;

impl Section for ScalingSection {
    fn id(&self) -> &'static str {
        "scaling"
    }

    fn title(&self) -> &'static str {
        "Scaling with the number of processes"
    }

    fn applies(&self, a: &Analysis) -> bool {
        !a.scaling.is_empty()
    }

    fn html(&self, a: &Analysis) -> String {
        let mut o = html::p(&scaling_intro());
        for w in &a.factors.workloads {
            let charts: Vec<String> = a
                .settings
                .metrics
                .iter()
                .filter_map(|&m| charts::scaling(a, &w.name, m))
                .map(|c| {
                    html::figure(
                        &c.render(),
                        "Means with 95% CIs; slope of the log–log fit over every run.",
                    )
                })
                .collect();
            if charts.is_empty() {
                continue;
            }
            let _ = writeln!(o, "<h3>{}</h3>\n<div class=\"charts\">", fmt::esc(&w.name));
            for c in charts {
                o.push_str(&c);
            }
            o.push_str("</div>\n");
        }
        let (h, n, rows) = scaling_table(a);
        o.push_str("<details><summary>All slopes</summary>");
        o.push_str(&html::table(&h, &n, &rows, &[]));
        o.push_str("</details>\n");
        o
    }

    fn markdown(&self, a: &Analysis) -> String {
        let mut o = scaling_intro();
        o.push_str("\n\n");
        let (h, n, rows) = scaling_table(a);
        let align: Vec<Align> = n
            .iter()
            .map(|&x| if x { Align::Right } else { Align::Left })
            .collect();
        o.push_str(&md_table(&h, &align, &rows));
        o
    }

    fn json(&self, a: &Analysis) -> Option<Value> {
        serde_json::to_value(&a.scaling).ok()
    }
}

fn scaling_intro() -> String {
    "Exponent k of metric ≈ c·processesᵏ, from a least-squares fit of ln(value) on ln(processes) over every run \
     (so r² also reflects run-to-run noise): k = 1 grows in proportion to the number of processes, k = 0 does not \
     depend on it, k = 2 grows quadratically."
        .to_string()
}

fn scaling_table(a: &Analysis) -> ([&'static str; 6], [bool; 6], Vec<Vec<String>>) {
    let rows = a
        .scaling
        .iter()
        .map(|s| {
            vec![
                s.label.clone(),
                s.metric.name().to_string(),
                s.fit
                    .as_ref()
                    .map_or_else(|| "–".into(), |f| fmt::dec2(f.slope)),
                s.fit
                    .as_ref()
                    .map_or_else(|| "–".into(), |f| fmt::dec2(f.r2)),
                s.fit
                    .as_ref()
                    .map_or_else(|| "0".into(), |f| f.n.to_string()),
                s.points
                    .iter()
                    .map(|p| p.processes.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
            ]
        })
        .collect();
    (
        [
            "workload, policy",
            "metric",
            "slope",
            "r²",
            "runs",
            "process counts",
        ],
        [false, false, true, true, true, false],
        rows,
    )
}

/// Jain's index within runs, and CPU shares against the weight table.
pub struct FairnessSection;

fn shares_intro(a: &Analysis) -> String {
    let mut t = String::from(
        "Under non-uniform nice with a fair policy, each process's observed CPU share against the share the \
         kernel's nice-to-weight table predicts (its weight over the sum of the weights). Observed share: the \
         process's CPU time over its wall time, normalised over the run and averaged over runs. The prediction \
         assumes every process is runnable the whole time on one shared CPU: it is only meaningful when the \
         processes compete on the same CPUs the whole time.",
    );
    if a.shares.iter().any(|s| s.fixed_work) {
        t.push_str(
            " With a fixed amount of work per process, heavier processes finish first and leave the CPU to the \
             others, so observed shares are pulled towards equal and a large deviation does not contradict the \
             weights; a workload with duration_s (every process runs for the same time) gives a faithful check.",
        );
    }
    t
}

/// Whether the premise of the prediction holds for one condition.
fn share_context(s: &ShareCheck) -> String {
    let work = if s.fixed_work {
        "fixed work per process (shares pulled towards equal)"
    } else {
        "every process ran for the same duration"
    };
    if !s.competing {
        format!(
            "{} on {}: they did not all compete for one CPU, so the prediction does not apply (illustration only); {work}.",
            plural(s.processes, "process", "processes"),
            plural(s.cpus_used, "CPU", "CPUs")
        )
    } else if s.cpus_used > 1 {
        format!(
            "{} spread over {} CPUs: load balancing, not only the weights, shapes the shares; {work}.",
            plural(s.processes, "process", "processes"),
            s.cpus_used
        )
    } else {
        format!(
            "{} pinned to one CPU, competing for it the whole time; {work}.",
            plural(s.processes, "process", "processes")
        )
    }
}

fn jain_note(a: &Analysis) -> Option<&'static str> {
    a.factors.workloads.iter().all(|w| !w.duration_based).then_some(
        "Every workload here does a fixed amount of work per process, so each process needs the same CPU time and \
         does the same work: both indices are close to 1 by design. They become informative with duration-based \
         workloads (duration_s), where the scheduler decides how much each process gets.",
    )
}

fn jain_rows(a: &Analysis) -> Vec<Vec<String>> {
    a.fairness
        .iter()
        .map(|f| {
            let s = |x: &Option<crate::stats::Summary>, what: fn(&crate::stats::Summary) -> f64| {
                x.as_ref()
                    .map_or_else(|| "–".into(), |s| format!("{:.4}", what(s)))
            };
            vec![
                f.label.clone(),
                f.jain_cpu.as_ref().map_or(0, |s| s.n).to_string(),
                s(&f.jain_cpu, |s| s.mean),
                s(&f.jain_cpu, |s| s.min),
                s(&f.jain_work, |s| s.mean),
                s(&f.jain_work, |s| s.min),
            ]
        })
        .collect()
}

const JAIN_HEADERS: [&str; 6] = [
    "condition",
    "runs",
    "Jain CPU mean",
    "Jain CPU min",
    "Jain work mean",
    "Jain work min",
];
const JAIN_NUMERIC: [bool; 6] = [false, true, true, true, true, true];

fn share_rows(s: &ShareCheck) -> Vec<Vec<String>> {
    s.rows
        .iter()
        .map(|r| {
            vec![
                r.index.to_string(),
                r.nice.to_string(),
                format!("{}%", fmt::sig(100.0 * r.predicted, 3)),
                format!("{}%", fmt::sig(100.0 * r.observed, 3)),
                format!("{:+.1}%", 100.0 * r.error),
            ]
        })
        .collect()
}

const SHARE_HEADERS: [&str; 5] = ["process", "nice", "predicted", "observed", "error"];
const SHARE_NUMERIC: [bool; 5] = [true, true, true, true, true];

impl Section for FairnessSection {
    fn id(&self) -> &'static str {
        "fairness"
    }

    fn title(&self) -> &'static str {
        "Fairness within runs"
    }

    fn applies(&self, a: &Analysis) -> bool {
        !a.fairness.is_empty()
    }

    fn html(&self, a: &Analysis) -> String {
        let mut o = html::p(
            "Jain's fairness index (Σx)²/(n·Σx²) of the processes of each run: 1 when every process got the same, \
             1/n when one got everything. Computed on CPU time (user + system) and on work done, then summarised \
             over the runs of each condition.",
        );
        let charts: Vec<String> = a
            .factors
            .workloads
            .iter()
            .filter_map(|w| charts::jain(a, &w.name))
            .map(|c| {
                html::figure(
                    &c.render(),
                    "Mean Jain's index of CPU time over runs, with 95% CI.",
                )
            })
            .collect();
        if !charts.is_empty() {
            o.push_str("<div class=\"charts\">\n");
            for c in charts {
                o.push_str(&c);
            }
            o.push_str("</div>\n");
        }
        if let Some(n) = jain_note(a) {
            o.push_str(&html::p(n));
        }
        o.push_str(&html::table(
            &JAIN_HEADERS,
            &JAIN_NUMERIC,
            &jain_rows(a),
            &[],
        ));
        if !a.shares.is_empty() {
            o.push_str("<h3>CPU share against the nice-weight prediction</h3>\n");
            let _ = writeln!(o, "<div class=\"note\">{}</div>", html::p(&shares_intro(a)));
            for s in &a.shares {
                let _ = writeln!(o, "<h4>{}</h4>", fmt::esc(&s.label));
                o.push_str(&html::p(&share_context(s)));
                let _ = write!(
                    o,
                    "<div class=\"charts\">{}<div>",
                    html::figure(
                        &charts::shares(a, s).render(),
                        &format!(
                            "{} over {}; dashed: observed = predicted; largest relative error {:.0}%.",
                            plural(s.processes, "process", "processes"),
                            plural(s.runs, "run", "runs"),
                            100.0 * s.max_abs_error
                        )
                    )
                );
                let rows = share_rows(s);
                if rows.len() > 12 {
                    o.push_str("<details><summary>Per process</summary>");
                    o.push_str(&html::table(&SHARE_HEADERS, &SHARE_NUMERIC, &rows, &[]));
                    o.push_str("</details>");
                } else {
                    o.push_str(&html::table(&SHARE_HEADERS, &SHARE_NUMERIC, &rows, &[]));
                }
                o.push_str("</div></div>\n");
            }
        }
        o
    }

    fn markdown(&self, a: &Analysis) -> String {
        let mut o = String::from(
            "Jain's index (Σx)²/(n·Σx²) of the processes of each run: 1 = all equal, 1/n = one process got everything.\n\n",
        );
        let align = [
            Align::Left,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Right,
        ];
        if let Some(n) = jain_note(a) {
            let _ = writeln!(o, "{n}\n");
        }
        o.push_str(&md_table(&JAIN_HEADERS, &align, &jain_rows(a)));
        if !a.shares.is_empty() {
            let _ = writeln!(
                o,
                "\n### CPU share against the nice-weight prediction\n\n{}",
                shares_intro(a)
            );
        }
        for s in &a.shares {
            let _ = writeln!(o, "\n**{}**: {}\n", s.label, share_context(s));
            o.push_str(&md_table(
                &SHARE_HEADERS,
                &[Align::Right; 5],
                &share_rows(s),
            ));
        }
        o
    }

    fn json(&self, a: &Analysis) -> Option<Value> {
        Some(json!({ "jain": a.fairness, "shares": a.shares }))
    }
}

/// Flagged outliers, named.
pub struct OutliersSection;

fn outlier_rows(a: &Analysis) -> Vec<Vec<String>> {
    a.outliers
        .iter()
        .take(MAX_LISTED)
        .map(|o| {
            let w = &a.groups[a.conditions[o.condition].group].key.workload;
            let unit = a.unit(o.metric, w);
            vec![
                o.run_id.to_string(),
                o.rep.to_string(),
                o.label.clone(),
                o.metric.name().to_string(),
                fmt::with_unit(o.value, &unit),
                fmt::with_unit(o.median, &unit),
                o.times_median
                    .map_or_else(|| "–".into(), |t| format!("{}×", fmt::sig(t, 3))),
                fmt::sig(o.z, 3),
            ]
        })
        .collect()
}

const OUT_HEADERS: [&str; 8] = [
    "run",
    "rep",
    "condition",
    "metric",
    "value",
    "median",
    "× median",
    "modified z",
];
const OUT_NUMERIC: [bool; 8] = [true, true, false, false, true, true, true, true];

fn outliers_intro(a: &Analysis) -> String {
    format!(
        "Per-run values whose modified z-score 0.6745·(x − median)/MAD exceeds {} within their condition, as \
         hyperfine flags them (ten robust standard deviations; the mean absolute deviation stands in when MAD is \
         0; conditions of fewer than {} runs are not screened). They are flagged, never removed: decide for each \
         whether it is a measurement accident or real behaviour of the policy.",
        a.settings.outlier_threshold, a.settings.outlier_min_runs
    )
}

fn more_line(total: usize) -> Option<String> {
    (total > MAX_LISTED).then(|| {
        format!(
            "{} more are not listed here; the JSON report (--format json) has all of them.",
            total - MAX_LISTED
        )
    })
}

impl Section for OutliersSection {
    fn id(&self) -> &'static str {
        "outliers"
    }

    fn title(&self) -> &'static str {
        "Outliers"
    }

    fn html(&self, a: &Analysis) -> String {
        let mut o = html::p(&outliers_intro(a));
        if a.outliers.is_empty() {
            o.push_str(&html::p("No value is flagged."));
            return o;
        }
        let rows = outlier_rows(a);
        let cls = vec![Some("flag"); rows.len()];
        o.push_str(&html::table(&OUT_HEADERS, &OUT_NUMERIC, &rows, &cls));
        if let Some(m) = more_line(a.outliers.len()) {
            o.push_str(&html::p(&m));
        }
        o
    }

    fn markdown(&self, a: &Analysis) -> String {
        let mut o = outliers_intro(a);
        o.push_str("\n\n");
        if a.outliers.is_empty() {
            o.push_str("No value is flagged.\n");
            return o;
        }
        let align: Vec<Align> = OUT_NUMERIC
            .iter()
            .map(|&n| if n { Align::Right } else { Align::Left })
            .collect();
        o.push_str(&md_table(&OUT_HEADERS, &align, &outlier_rows(a)));
        if let Some(m) = more_line(a.outliers.len()) {
            let _ = writeln!(o, "\n{m}");
        }
        o
    }

    fn json(&self, a: &Analysis) -> Option<Value> {
        serde_json::to_value(&a.outliers).ok()
    }
}

/// Runs that are not in the statistics.
pub struct FailuresSection;

fn failure_rows(a: &Analysis) -> Vec<Vec<String>> {
    a.problems
        .iter()
        .take(MAX_LISTED)
        .map(|p| {
            vec![
                p.run_id.to_string(),
                p.seq.to_string(),
                p.rep.to_string(),
                p.label.clone(),
                p.status.replace('_', " "),
                p.reason.clone(),
            ]
        })
        .collect()
}

const FAIL_HEADERS: [&str; 6] = ["run", "seq", "rep", "condition", "status", "reason"];
const FAIL_NUMERIC: [bool; 6] = [true, true, true, false, false, false];

fn failures_intro(a: &Analysis) -> String {
    if a.problems.is_empty() {
        return "Every stored run finished ok.".into();
    }
    format!(
        "{} failed, {} timed out, {} skipped. These runs are counted here and left out of the statistics; \
         `schedlab run --retry-failed` runs them again.",
        a.counts.failed, a.counts.timed_out, a.counts.skipped
    )
}

impl Section for FailuresSection {
    fn id(&self) -> &'static str {
        "failures"
    }

    fn title(&self) -> &'static str {
        "Failed, timed-out and skipped runs"
    }

    fn html(&self, a: &Analysis) -> String {
        let mut o = html::p(&failures_intro(a));
        if !a.problems.is_empty() {
            o.push_str(&html::table(
                &FAIL_HEADERS,
                &FAIL_NUMERIC,
                &failure_rows(a),
                &[],
            ));
            if let Some(m) = more_line(a.problems.len()) {
                o.push_str(&html::p(&m));
            }
        }
        o
    }

    fn markdown(&self, a: &Analysis) -> String {
        let mut o = failures_intro(a);
        o.push_str("\n\n");
        if !a.problems.is_empty() {
            let align: Vec<Align> = FAIL_NUMERIC
                .iter()
                .map(|&n| if n { Align::Right } else { Align::Left })
                .collect();
            o.push_str(&md_table(&FAIL_HEADERS, &align, &failure_rows(a)));
            if let Some(m) = more_line(a.problems.len()) {
                let _ = writeln!(o, "\n{m}");
            }
        }
        o
    }

    fn json(&self, a: &Analysis) -> Option<Value> {
        Some(json!({ "counts": a.counts, "runs": a.problems }))
    }
}

/// Where the campaign ran.
pub struct EnvironmentSection;

/// How to show one field of an environment.
type EnvField = Box<dyn Fn(&crate::store::ReportEnvironment) -> String>;

fn env_table(a: &Analysis) -> (Vec<String>, Vec<Vec<String>>) {
    let o = |v: Option<i64>| v.map_or_else(|| "unknown".into(), |x| x.to_string());
    let fields: [(&str, EnvField); 11] = [
        ("runs", Box::new(|e| e.runs.to_string())),
        ("kernel", Box::new(|e| e.kernel_release.clone())),
        ("CPU", Box::new(|e| e.cpu_model.clone())),
        ("CPUs online", Box::new(|e| e.cpus_online.to_string())),
        ("HZ", Box::new(move |e| o(e.hz))),
        ("preemption", Box::new(|e| e.preempt_model.clone())),
        (
            "RT limit (sched_rt_runtime_us / period)",
            Box::new(move |e| {
                format!("{} / {}", o(e.sched_rt_runtime_us), o(e.sched_rt_period_us))
            }),
        ),
        (
            "RR time slice (ms)",
            Box::new(move |e| o(e.sched_rr_timeslice_ms)),
        ),
        ("cgroup", Box::new(|e| e.cgroup_version.clone())),
        ("virtualisation", Box::new(|e| e.virtualization.clone())),
        ("schedlab", Box::new(|e| e.schedlab_version.clone())),
    ];
    let mut headers = vec!["".to_string()];
    for (i, _) in a.environments.iter().enumerate() {
        headers.push(if a.environments.len() == 1 {
            "value".into()
        } else {
            format!("environment {}", i + 1)
        });
    }
    let rows = fields
        .iter()
        .map(|(name, f)| {
            let mut r = vec![name.to_string()];
            r.extend(a.environments.iter().map(f));
            r
        })
        .collect();
    (headers, rows)
}

fn load_line(a: &Analysis) -> Option<String> {
    a.load.as_ref().map(|l| {
        format!(
            "1-minute load average at run start: min {}, median {}, max {}.",
            fmt::sig(l.min, 3),
            fmt::sig(l.median, 3),
            fmt::sig(l.max, 3)
        )
    })
}

impl Section for EnvironmentSection {
    fn id(&self) -> &'static str {
        "environment"
    }

    fn title(&self) -> &'static str {
        "Environment"
    }

    fn applies(&self, a: &Analysis) -> bool {
        !a.environments.is_empty()
    }

    fn html(&self, a: &Analysis) -> String {
        let (h, rows) = env_table(a);
        let h: Vec<&str> = h.iter().map(String::as_str).collect();
        let mut o = html::table(&h, &[], &rows, &[]);
        if let Some(l) = load_line(a) {
            o.push_str(&html::p(&l));
        }
        o
    }

    fn markdown(&self, a: &Analysis) -> String {
        let (h, rows) = env_table(a);
        let h: Vec<&str> = h.iter().map(String::as_str).collect();
        let mut o = md_table(&h, &[], &rows);
        if let Some(l) = load_line(a) {
            let _ = writeln!(o, "\n{l}");
        }
        o
    }

    fn json(&self, a: &Analysis) -> Option<Value> {
        Some(json!({ "environments": a.environments, "load_avg_1m": a.load }))
    }
}

/// The raw per-condition tables (the seeds' appendices): every metric.
pub struct ConditionsSection;

fn condition_table(a: &Analysis, slot: usize) -> (Vec<&'static str>, Vec<bool>, Vec<Vec<String>>) {
    let multi_mode = a.factors.priority_modes.len() > 1;
    let multi_cpus = a.factors.cpus.len() > 1;
    let rt = !a.factors.rt_runtime_us.is_empty();
    let failures = a.counts.not_ok() > 0;
    let metric = a.settings.metrics[slot];
    let mut h = vec!["workload", "processes"];
    if multi_mode {
        h.push("priorities");
    }
    if multi_cpus {
        h.push("cpus");
    }
    if rt {
        h.push("rt runtime (µs)");
    }
    h.push("policy");
    h.push("n");
    if failures {
        h.push("not ok");
    }
    h.extend([
        "mean",
        "95% CI",
        "CI method",
        "median",
        "sd",
        "CV",
        "min",
        "max",
    ]);
    if metric.per_process() {
        h.push("per process: mean (min–max)");
    }
    if metric == Metric::Work {
        h.push("unit");
    }
    let numeric: Vec<bool> = h
        .iter()
        .map(|c| {
            !matches!(
                *c,
                "workload" | "priorities" | "cpus" | "policy" | "CI method" | "unit"
            )
        })
        .collect();
    let rows = a
        .conditions
        .iter()
        .map(|c| {
            let g = &a.groups[c.group].key;
            let cell = &c.cells[slot];
            let s = cell.summary.as_ref();
            let f = |x: Option<f64>| x.map_or_else(|| "–".into(), fmt::num);
            let mut r = vec![g.workload.clone(), g.processes.to_string()];
            if multi_mode {
                r.push(g.priority_mode.clone());
            }
            if multi_cpus {
                r.push(g.cpus.clone());
            }
            if rt {
                r.push(
                    g.rt_runtime_us
                        .map_or_else(|| "–".into(), |v| v.to_string()),
                );
            }
            r.push(policy_label(&c.policy));
            r.push(cell.n.to_string());
            if failures {
                r.push(c.runs.not_ok().to_string());
            }
            r.push(f(s.map(|s| s.mean)));
            r.push(ci_text(cell));
            r.push(ci_method(cell));
            r.push(f(s.map(|s| s.median)));
            r.push(f(s.map(|s| s.sd)));
            r.push(
                s.and_then(|s| s.cv)
                    .map_or_else(|| "–".into(), |cv| format!("{}%", fmt::sig(100.0 * cv, 2))),
            );
            r.push(f(s.map(|s| s.min)));
            r.push(f(s.map(|s| s.max)));
            if metric.per_process() {
                r.push(cell.per_process.as_ref().map_or_else(
                    || "–".into(),
                    |p| {
                        format!(
                            "{} ({}–{})",
                            fmt::num(p.mean),
                            fmt::num(p.min),
                            fmt::num(p.max)
                        )
                    },
                ));
            }
            if metric == Metric::Work {
                r.push(a.unit(metric, &g.workload));
            }
            r
        })
        .collect();
    (h, numeric, rows)
}

fn metric_heading(a: &Analysis, m: Metric) -> String {
    let unit = if m == Metric::Work {
        String::new()
    } else if m.unit().is_empty() {
        " (count)".into()
    } else {
        format!(" ({})", m.unit())
    };
    let per = if m.per_process() {
        "per-run value = mean over the run's processes"
    } else {
        "one value per run"
    };
    let _ = a;
    format!("{} — {}{unit}; {per}", m.name(), m.label())
}

impl Section for ConditionsSection {
    fn id(&self) -> &'static str {
        "conditions"
    }

    fn title(&self) -> &'static str {
        "Per-condition tables"
    }

    fn applies(&self, a: &Analysis) -> bool {
        !a.conditions.is_empty()
    }

    fn html(&self, a: &Analysis) -> String {
        let mut o = html::p(
            "Every condition and metric: runs with a value (n), mean, 95% CI of the mean with its method, median, \
             standard deviation, coefficient of variation, range, and the per-process view (mean and range over \
             every process of every run).",
        );
        for (slot, &m) in a.settings.metrics.iter().enumerate() {
            let (h, n, rows) = condition_table(a, slot);
            let _ = writeln!(
                o,
                "<h3 id=\"table-{}\">{}</h3>",
                m.name(),
                fmt::esc(&metric_heading(a, m))
            );
            o.push_str(&html::table(&h, &n, &rows, &[]));
        }
        o
    }

    fn markdown(&self, a: &Analysis) -> String {
        let mut o = String::new();
        for (slot, &m) in a.settings.metrics.iter().enumerate() {
            let (h, n, rows) = condition_table(a, slot);
            let align: Vec<Align> = n
                .iter()
                .map(|&x| if x { Align::Right } else { Align::Left })
                .collect();
            let _ = writeln!(o, "### {}\n", metric_heading(a, m));
            o.push_str(&md_table(&h, &align, &rows));
            o.push('\n');
        }
        o
    }

    fn json(&self, a: &Analysis) -> Option<Value> {
        Some(json!({
            "factors": a.factors,
            "groups": a.groups,
            "conditions": a.conditions,
        }))
    }
}

/// How the statistics were computed.
pub struct MethodSection;

fn method_text(a: &Analysis) -> Vec<String> {
    let s = &a.settings;
    vec![
        "Observations are the runs that finished ok. A run's value of a per-process metric is the mean over its \
         processes; makespan and the per-process tables are the exceptions. CPU % = (user + system CPU) / wall time."
            .into(),
        format!(
            "95% confidence intervals of means: Student-t below {} runs; a percentile bootstrap from {} runs on, or \
             when the runs are skewed (a flagged outlier, or |3·(mean − median)/sd| > {} with at least 5 runs). \
             Bootstraps use at most {} resamples (fewer for very large conditions, recorded in the JSON) and the \
             seed {} XOR an FNV-1a hash of the interval's label (low 53 bits), so each interval can be reproduced alone \
             (--bootstrap-seed, --resamples).",
            s.bootstrap_min_n, s.bootstrap_min_n, s.skew_threshold, s.max_resamples, s.bootstrap_seed
        ),
        format!(
            "Comparisons: within each workload, process count and setting, every pair of policies on every metric \
             with at least {} runs per side. The p-value is the two-sided Mann–Whitney U test (exact without ties \
             up to 10 runs per side), adjusted with Holm's method over all comparisons of the report; a difference \
             is stated only when the adjusted p < {}. Welch's t-test is given as a second opinion. The ratio of \
             means has a 95% percentile-bootstrap interval, not adjusted for the number of comparisons.",
            s.min_runs_per_side, s.alpha
        ),
        format!(
            "Outliers: modified z-score 0.6745·(x − median)/MAD above {} within a condition of at least {} runs \
             (hyperfine's threshold: ten robust standard deviations); flagged and named, never removed.",
            s.outlier_threshold, s.outlier_min_runs
        ),
        "Fairness: Jain's index within each run; under non-uniform nice with a fair policy, observed CPU shares \
         against the kernel's nice-to-weight table. Scaling: log–log least-squares slope against the number of \
         processes."
            .into(),
    ]
}

impl Section for MethodSection {
    fn id(&self) -> &'static str {
        "method"
    }

    fn title(&self) -> &'static str {
        "How the statistics were computed"
    }

    fn html(&self, a: &Analysis) -> String {
        method_text(a).iter().map(|t| html::p(t)).collect()
    }

    fn markdown(&self, a: &Analysis) -> String {
        method_text(a).iter().map(|t| format!("{t}\n\n")).collect()
    }

    fn json(&self, a: &Analysis) -> Option<Value> {
        serde_json::to_value(&a.settings).ok()
    }
}
