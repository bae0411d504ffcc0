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

impl Section for MethodSection {
    fn id(&self) -> &'static str {
        "method"
    }

    fn title(&self) -> &'static str {
        "How the statistics were computed"
    }

    fn blocks(&self, a: &Analysis) -> Vec<Block> {
        method_text(a).into_iter().map(Block::p).collect()
    }

    fn json(&self, a: &Analysis) -> Option<Value> {
        serde_json::to_value(&a.settings).ok()
    }
}
