//! Every pair of policies within each group, on every metric: ratios with
//! intervals, p-values and verdicts.

use serde_json::{Value, json};

use super::{Section, Table};
use crate::report::analyse::{Analysis, Comparison, Verdict, mw_method, policy_label, unreachable};
use crate::report::blocks::Block;
use crate::report::fmt;

fn verdict_text(a: &Analysis, c: &Comparison) -> String {
    match c.verdict {
        Verdict::Different => "different".into(),
        Verdict::NotSeparated if unreachable(a, c) => {
            "not separated (too few runs for p < 0.05)".into()
        }
        Verdict::NotSeparated => match &c.detectable {
            Some(d) => format!("not separated ({})", d.cell()),
            None => "not separated".into(),
        },
        Verdict::TooFewRuns => "too few runs".into(),
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
        verdict_text(a, c),
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

    fn blocks(&self, a: &Analysis) -> Vec<Block> {
        let mut b = vec![
            Block::html_only(vec![Block::p(
                "Within each workload, process count and setting, every pair of policies on every metric. A is \
                 the policy with the lower mean; A/B is the ratio of means with its 95% percentile-bootstrap \
                 interval. MW p: two-sided Mann–Whitney U (exact or normal approximation); Welch p: Welch's t-test \
                 as a second opinion; Holm p: Mann–Whitney p adjusted over every comparison of this report. \
                 Highlighted rows are significant. The ratio intervals are not adjusted for the number of \
                 comparisons: one that excludes 1 without a significant Holm p is a hint, not a finding. A \
                 verdict of not separated gives the smallest change (as a share of B's mean) these runs could \
                 have seen with 80% power, for Mann–Whitney at α over the number of tests (its power taken as \
                 the t-test's with 3/π of the runs).",
            )]),
            Block::md_only(vec![Block::p(
                "A: the policy with the lower mean. A/B: ratio of means, 95% CI by bootstrap. MW p: Mann–Whitney \
                 U; Welch p: Welch's t-test; Holm p: Mann–Whitney p adjusted over every comparison of the report. \
                 Ratio intervals are not adjusted for the number of comparisons. Not separated: changes smaller \
                 than the share of B's mean given could not be seen (80% power, α over the number of tests).",
            )]),
        ];
        for (gi, g) in a.groups.iter().enumerate() {
            let rows: Vec<&Comparison> = a.comparisons.iter().filter(|c| c.group == gi).collect();
            if rows.is_empty() {
                continue;
            }
            let sig = rows
                .iter()
                .filter(|c| c.verdict == Verdict::Different)
                .count();
            // A collapsible part in HTML, a heading in Markdown.
            b.push(Block::md_only(vec![Block::heading(3, &g.label)]));
            b.push(Block::Details {
                summary: format!("{} — {} of {} significant", g.label, sig, rows.len()),
                open: true,
                blocks: vec![Block::Table {
                    table: Table {
                        title: String::new(),
                        headers: CMP_HEADERS.map(String::from).to_vec(),
                        numeric: CMP_NUMERIC.to_vec(),
                        rows: rows.iter().map(|c| comparison_row(a, c)).collect(),
                    },
                    row_class: rows
                        .iter()
                        .map(|c| (c.verdict == Verdict::Different).then_some("different"))
                        .collect(),
                }],
            });
        }
        b
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
