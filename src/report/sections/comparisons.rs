//! Every pair of policies within each group, on every metric: ratios with
//! intervals, p-values and verdicts.

use serde_json::{Value, json};
use std::fmt::Write;

use super::Section;
use crate::report::analyse::{Analysis, Comparison, Verdict, mw_method, policy_label, unreachable};
use crate::report::fmt::{self, Align, md_table};
use crate::report::html;

fn verdict_text(a: &Analysis, c: &Comparison) -> &'static str {
    match c.verdict {
        Verdict::Different => "different",
        Verdict::NotSeparated if unreachable(a, c) => "not separated (too few runs for p < 0.05)",
        Verdict::NotSeparated => "not separated",
        Verdict::TooFewRuns => "too few runs",
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

    // Not converted to blocks (see `report::blocks`): the HTML shows each
    // group as an open <details> whose summary (label and count of
    // significant comparisons) is followed by a line break, where the other
    // collapsible parts have none, and Markdown has a `###` heading with the
    // label alone under a shorter introduction. Blocks would change bytes.
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
