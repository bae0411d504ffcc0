//! How the statistics were computed: the settings in words.

use serde_json::Value;

use super::Section;
use crate::report::analyse::Analysis;
use crate::report::blocks::Block;

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

/// `repetitions = "auto"`: the rule, the target, and per condition the
/// half-width and n reached (or that the most repetitions did not reach it).
fn precision_text(a: &Analysis) -> Vec<String> {
    use crate::campaign::precision::State;
    let Some(p) = &a.precision else {
        return Vec::new();
    };
    let metrics: Vec<String> = p
        .primary_metrics
        .iter()
        .map(|(w, m)| format!("{w}: {m}"))
        .collect();
    let mut out = vec![format!(
        "Repetitions until precise (repetitions = \"auto\"): the runs went in rounds across all conditions; a \
         condition stopped after the first round n ≥ {} at which t(n−1, 0.975)·√((s² + {}·(d·mean)²/n)/n) ≤ d·|mean| \
         for its primary metric, with d = target_ci_pct = {} % (Chow–Robbins' sequential fixed-width interval, its \
         small-sample term in units of the target, so it cannot stop before about 10 runs), and at most {} rounds. \
         Primary metric ({}). Its 95% interval, mean ± t·s/√n, then has a half-width of at most {} % of the mean; \
         a simulation over normal and lognormal campaigns holds its coverage at 95% ± 2%.",
        p.min_repetitions,
        crate::stats::sequential::SMALL_SAMPLE_K,
        p.target_ci_pct,
        p.max_repetitions,
        metrics.join("; "),
        p.target_ci_pct
    )];
    for c in &p.conditions {
        let hw = c
            .half_width_pct
            .map_or("no interval".to_string(), |h| format!("±{h:.2} %"));
        let what = match c.state {
            State::Reached { after_round } => {
                format!(
                    "reached the target after {after_round} rounds: {hw} with n = {}",
                    c.n
                )
            }
            State::AtMax => format!(
                "did NOT reach the target of ±{} % in the most rounds ({}): {hw} with n = {}",
                p.target_ci_pct, c.rounds, c.n
            ),
            State::Running => format!(
                "has rounds left (the campaign is incomplete): {hw} with n = {} after {} rounds",
                c.n, c.rounds
            ),
        };
        out.push(format!("{}: {what}.", c.condition));
    }
    out
}

impl Section for MethodSection {
    fn id(&self) -> &'static str {
        "method"
    }

    fn title(&self) -> &'static str {
        "How the statistics were computed"
    }

    fn blocks(&self, a: &Analysis) -> Vec<Block> {
        let mut text = method_text(a);
        text.extend(precision_text(a));
        text.into_iter().map(Block::p).collect()
    }

    fn json(&self, a: &Analysis) -> Option<Value> {
        let mut v = serde_json::to_value(&a.settings).ok()?;
        if let (Some(p), Some(obj)) = (&a.precision, v.as_object_mut()) {
            obj.insert("auto_repetitions".into(), serde_json::to_value(p).ok()?);
        }
        Some(v)
    }
}
