//! The summary in plain sentences: counts, warnings about the data, how
//! many comparisons differ (each finding is stated under “What happened”,
//! the first screen) and which of the primary metric's are not separated.

use serde_json::{Value, json};

use super::{Section, plural};
use crate::report::analyse::noise::{NOISE_MAD_K, NoiseCheck};
use crate::report::analyse::{
    Analysis, Comparison, InterferenceSummary, OTHERS_RUNNABLE_NOTE, Verdict, unreachable,
};
use crate::report::blocks::Block;
use crate::report::fmt;

/// Warnings and context for the summary.
pub fn notes(a: &Analysis) -> Vec<String> {
    let mut v = Vec::new();
    let stored = a.counts.total() as u64;
    if let Some(p) = &a.precision {
        // Auto: fewer runs than planned (the most) is the rule at work.
        let (running, at_max) = (p.running().len(), p.at_max().len());
        if running > 0 {
            v.push(format!(
                "The campaign is incomplete: {running} conditions have rounds left before reaching ±{} % (running \
                 the same spec again resumes it).",
                p.target_ci_pct
            ));
        }
        if at_max > 0 {
            v.push(format!(
                "{at_max} of {} conditions did not reach the target precision of ±{} % within {} repetitions: see \
                 “How the statistics were computed”.",
                p.conditions.len(),
                p.target_ci_pct,
                p.max_repetitions
            ));
        }
    } else if stored < a.campaign.planned_runs {
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
    let environments = distinct_environments(a);
    if environments > 1 {
        v.push(format!(
            "The runs were made in {environments} different environments (kernel, CPU or scheduler settings): see \
             “Environment”; differences between policies may be confounded with them.",
        ));
    }
    // Never the load average: it counts schedlab's own workers.
    if let Some(note) = interference_note(&a.interference) {
        v.push(note);
    }
    if let Some(note) = noise_note(&a.noise) {
        v.push(note);
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

/// "run 12", "runs 12, 40", "runs 1, 2, …, 10 and 5 more".
fn run_list(ids: &[i64]) -> String {
    const SHOWN: usize = 10;
    let shown: Vec<String> = ids.iter().take(SHOWN).map(|i| i.to_string()).collect();
    let more = match ids.len().saturating_sub(SHOWN) {
        0 => String::new(),
        n => format!(" and {n} more"),
    };
    let word = if ids.len() == 1 { "run" } else { "runs" };
    format!("{word} {}{more}", shown.join(", "))
}

/// The runs whose interrupts and softirqs were beyond the campaign's
/// usual, and whether the significant findings hold without them; None
/// when no run was flagged.
pub fn noise_note(n: &NoiseCheck) -> Option<String> {
    let (Some(median), Some(threshold)) = (n.median_per_cpu_s, n.threshold_per_cpu_s) else {
        return None;
    };
    if n.noisy_runs.is_empty() {
        return None;
    }
    let ids: Vec<i64> = n.noisy_runs.iter().map(|r| r.0).collect();
    let max = n.noisy_runs.iter().map(|r| r.1).fold(f64::MIN, f64::max);
    let mut note = format!(
        "Noisy CPUs: {} had more interrupts and softirqs than the campaign's usual (up to {}/s per CPU; \
         median {}/s, flagged above median + {NOISE_MAD_K} MAD = {}/s). They are kept in every figure",
        run_list(&ids),
        fmt::sig(max, 3),
        fmt::sig(median, 3),
        fmt::sig(threshold, 3),
    );
    match &n.without {
        Some(w) if w.same() => {
            note.push_str("; without them the same findings are significant.");
        }
        Some(w) => {
            note.push_str("; without them the significant findings change:");
            for s in &w.lost {
                note.push_str(&format!(" no longer significant: {s};"));
            }
            for s in &w.gained {
                note.push_str(&format!(" significant only without them: {s};"));
            }
            note.pop();
            note.push('.');
        }
        None => note.push('.'),
    }
    Some(note)
}

/// Other programs' activity that may have disturbed runs, in a sentence;
/// None when no run crossed a threshold. schedlab's own processes are
/// never part of these figures.
pub fn interference_note(s: &InterferenceSummary) -> Option<String> {
    let mut parts = Vec::new();
    if !s.busy_runs.is_empty() {
        parts.push(format!(
            "{} had {OTHERS_RUNNABLE_NOTE}+ runnable tasks of other programs at start (up to {})",
            run_list(&s.busy_runs),
            s.max_others_runnable.unwrap_or(OTHERS_RUNNABLE_NOTE)
        ));
    }
    if let (false, Some(max)) = (s.steal_runs.is_empty(), s.max_steal_pct) {
        parts.push(format!(
            "steal time up to {}% ({})",
            fmt::sig(max, 2),
            run_list(&s.steal_runs)
        ));
    }
    if let (false, Some(max)) = (s.other_cpu_runs.is_empty(), s.max_other_cpu_pct) {
        parts.push(format!(
            "other programs took up to {}% of a run's CPU time ({})",
            fmt::sig(max, 2),
            run_list(&s.other_cpu_runs)
        ));
    }
    if parts.is_empty() {
        return None;
    }
    let text = capitalised(&parts.join("; "));
    Some(format!(
        "{text}. Other work on the machine may have disturbed these runs (schedlab's own processes are not \
         counted); see “Environment”."
    ))
}

/// Environments that differ in more than what the campaign varies on
/// purpose: a sweep of `sched_rt_runtime_us` records one environment per
/// value, which is the factor, not a confounder.
fn distinct_environments(a: &Analysis) -> usize {
    let swept = !a.factors.rt_runtime_us.is_empty();
    let mut seen: Vec<crate::store::ReportEnvironment> = Vec::new();
    for e in &a.environments {
        let mut k = e.clone();
        k.id = 0;
        k.runs = 0;
        if swept {
            k.sched_rt_runtime_us = None;
        }
        if !seen.contains(&k) {
            seen.push(k);
        }
    }
    seen.len()
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

    fn blocks(&self, a: &Analysis) -> Vec<Block> {
        let tested = a
            .comparisons
            .iter()
            .filter(|c| c.p_adjusted.is_some())
            .count();
        let mut b = vec![
            Block::p(campaign_line(a)),
            // The counts as tiles in HTML, in a sentence in Markdown.
            Block::Facts(vec![
                (a.counts.ok.to_string(), "ok runs".into()),
                (
                    a.counts.not_ok().to_string(),
                    "failed, timed out or skipped".into(),
                ),
                (a.conditions.len().to_string(), "conditions".into()),
                (a.process_rows.to_string(), "process records".into()),
                (
                    format!("{} / {tested}", a.count_verdict(Verdict::Different)),
                    "comparisons significant".into(),
                ),
                (
                    a.outliers.len().to_string(),
                    "outlier values flagged".into(),
                ),
            ]),
            Block::md_only(vec![Block::p(runs_line(a))]),
        ];
        let notes = notes(a);
        if !notes.is_empty() {
            b.push(Block::Notes(notes));
        }
        b.push(Block::heading(3, "Findings"));
        b.push(Block::p(comparisons_line(a)));
        // Each finding is stated once, by workload, on the first screen.
        if findings(a).is_empty() {
            b.push(Block::p(NO_FINDINGS));
        } else {
            b.push(Block::p(FINDINGS_ABOVE));
        }
        let ns = headline_not_separated(a);
        if !ns.is_empty() {
            b.push(Block::heading(
                3,
                format!("Not separated: {}", a.settings.metrics[0].label()),
            ));
            grouped(&mut b, a, &ns, "ns");
        }
        b
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

const FINDINGS_ABOVE: &str = "Each significant difference is stated, by workload, under “What happened” at the top of the report.";

const NO_FINDINGS: &str = "No difference between policies is significant: the data do not support ranking them on any metric.";

/// The text with its first letter in upper case.
pub(super) fn capitalised(s: &str) -> String {
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

/// Statements under a title per group, each item of the HTML class
/// `class`.
pub(super) fn grouped(
    b: &mut Vec<Block>,
    a: &Analysis,
    items: &[&Comparison],
    class: &'static str,
) {
    for (g, cs) in by_group(items) {
        b.push(Block::Title(a.groups[g].label.clone()));
        b.push(Block::List {
            class: Some("findings"),
            item_class: Some(class),
            items: cs
                .iter()
                .map(|c| format!("{}.", capitalised(&c.statement)))
                .collect(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Policy, ProcSched};
    use crate::record::Interference;
    use crate::report::{Options, analyse};
    use crate::store::Store;
    use crate::testing::synth::{synthetic_env, synthetic_process, synthetic_record};

    /// The notes of a campaign of three OTHER runs of two processes on a
    /// 2-CPU machine whose load average at start was `load` (the runs'
    /// own processes included), with these interference figures.
    fn notes_of(load: f64, interference: [Interference; 3]) -> Vec<String> {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("t.db")).unwrap();
        let toml = "name = \"t\"\nrepetitions = 3\n[matrix]\npolicy = [\"other\"]\nworkload = [\"pi\"]\n\
                    processes = [2]\n";
        let spec = crate::spec::load(toml, "t", &[]).unwrap();
        let plan = crate::plan::expand(&spec, 1);
        let c = store
            .create_campaign(&spec, toml, &[], 1, plan.len())
            .unwrap();
        let env = synthetic_env(2);
        let sched = ProcSched {
            policy: Policy::Other,
            nice: Some(0),
            rt_priority: None,
            dl_runtime_ns: None,
            dl_deadline_ns: None,
            dl_period_ns: None,
            weight: None,
            slice_ns: None,
        };
        for (run, i) in plan.iter().zip(interference) {
            let procs = (0..2)
                .map(|k| synthetic_process(k, sched, 1_000_000_000, 900_000))
                .collect();
            let mut rec = synthetic_record(run, &env, vec![0, 1], 0, Some(load), procs);
            rec.interference = i;
            store.insert_run(c.id, &rec).unwrap();
        }
        notes(&analyse(&store, &Options::default()).unwrap())
    }

    #[test]
    fn a_high_load_average_of_our_own_processes_is_not_blamed_on_others() {
        // 200 workers make a load average of 51.6 by themselves.
        let quiet = Interference {
            others_runnable: Some(0),
            steal_pct: Some(0.0),
            other_cpu_pct: Some(1.0),
            ..Interference::default()
        };
        let notes = notes_of(51.6, [quiet; 3]);
        assert!(
            notes
                .iter()
                .all(|n| !n.contains("load") && !n.contains("disturbed")),
            "{notes:?}"
        );
        // Nothing measured (a database from before): nothing said either.
        let notes = notes_of(51.6, [Interference::default(); 3]);
        assert!(notes.iter().all(|n| !n.contains("disturbed")), "{notes:?}");
    }

    #[test]
    fn runs_disturbed_by_other_programs_are_named() {
        let quiet = Interference {
            others_runnable: Some(1),
            steal_pct: Some(0.0),
            other_cpu_pct: Some(1.0),
            ..Interference::default()
        };
        let busy = Interference {
            others_runnable: Some(4),
            ..quiet
        };
        let stolen = Interference {
            steal_pct: Some(6.0),
            ..quiet
        };
        let notes = notes_of(0.1, [quiet, busy, stolen]);
        let note = notes
            .iter()
            .find(|n| n.contains("disturbed"))
            .expect("a note");
        // Run ids are 1, 2, 3 in a fresh database.
        assert!(
            note.starts_with(
                "Run 2 had 2+ runnable tasks of other programs at start (up to 4); steal time up to 6% (run 3)."
            ),
            "{note}"
        );
    }

    #[test]
    fn interference_note_names_the_runs_over_each_threshold() {
        let quiet = InterferenceSummary {
            measured_runs: 40,
            max_others_runnable: Some(1),
            max_steal_pct: Some(0.5),
            max_other_cpu_pct: Some(3.0),
            ..InterferenceSummary::default()
        };
        assert_eq!(interference_note(&quiet), None);
        assert_eq!(interference_note(&InterferenceSummary::default()), None);

        let busy = InterferenceSummary {
            busy_runs: vec![12, 40],
            max_others_runnable: Some(3),
            steal_runs: vec![7],
            max_steal_pct: Some(4.04),
            ..quiet.clone()
        };
        assert_eq!(
            interference_note(&busy).unwrap(),
            "Runs 12, 40 had 2+ runnable tasks of other programs at start (up to 3); steal time up to 4% \
             (run 7). Other work on the machine may have disturbed these runs (schedlab's own processes are \
             not counted); see “Environment”."
        );

        let hogged = InterferenceSummary {
            other_cpu_runs: (1..=12).collect(),
            max_other_cpu_pct: Some(23.4),
            ..quiet
        };
        let note = interference_note(&hogged).unwrap();
        assert!(
            note.starts_with(
                "Other programs took up to 23% of a run's CPU time (runs 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 \
                 and 2 more)."
            ),
            "{note}"
        );
        assert!(!note.contains("steal"), "{note}");
    }

    #[test]
    fn noise_note_names_the_runs_and_what_leaving_them_out_changes() {
        use crate::report::analyse::noise::FindingsWithout;
        let mut n = NoiseCheck {
            measured_runs: 12,
            median_per_cpu_s: Some(1000.0),
            threshold_per_cpu_s: Some(1100.0),
            noisy_runs: Vec::new(),
            without: None,
        };
        assert_eq!(noise_note(&n), None);
        n.noisy_runs = vec![(4, 52_000.0), (9, 3000.0)];
        n.without = Some(FindingsWithout::default());
        let note = noise_note(&n).unwrap();
        assert!(note.contains("runs 4, 9"), "{note}");
        assert!(note.contains("up to 52000/s"), "{note}");
        assert!(
            note.ends_with("the same findings are significant."),
            "{note}"
        );
        n.without = Some(FindingsWithout {
            lost: vec!["OTHER wall time is 0.5× FIFO's".into()],
            gained: Vec::new(),
        });
        let note = noise_note(&n).unwrap();
        assert!(
            note.ends_with("no longer significant: OTHER wall time is 0.5× FIFO's."),
            "{note}"
        );
    }
}
