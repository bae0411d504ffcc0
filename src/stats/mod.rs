//! Pure statistics for schedlab's report: which differences between
//! scheduling policies are real, how large they are, and with what
//! confidence.
//!
//! Every function is a pure function of slices (bootstraps take an explicit
//! seed), returns `Option`/NaN instead of panicking on degenerate input, and
//! never produces NaN from zero variance. Nothing here removes data: outlier
//! functions only flag.
//!
//! - [`summary`]: mean, median, sd, CV, t-interval; type-7 percentiles.
//! - [`dist`]: normal and Student-t distributions and their special
//!   functions.
//! - [`bootstrap`]: seeded percentile-bootstrap CIs of a mean, a ratio and a
//!   geometric mean of ratios.
//! - [`outliers`]: modified z-score and Tukey IQR flags.
//! - [`hypothesis`]: Welch's t-test, Mann–Whitney U, Holm–Bonferroni.
//! - [`equivalence`]: two one-sided tests (TOST), on differences or ratios.
//! - [`power`]: the noncentral t, the t-test's power, the smallest effect
//!   the t and Mann–Whitney tests detect.
//! - [`fairness`]: Jain's index, the kernel nice-to-weight table, predicted
//!   vs observed CPU shares.
//! - [`regression`]: OLS and log–log slope.
//! - [`ks`]: the two-sample Kolmogorov–Smirnov distance.
//! - [`sequential`]: the Chow–Robbins stopping rule of `repetitions =
//!   "auto"` (repeat until the mean's 95 % interval is narrow enough).

pub mod bootstrap;
pub mod dist;
pub mod equivalence;
pub mod fairness;
pub mod hypothesis;
pub mod ks;
pub mod outliers;
pub mod power;
pub mod regression;
pub mod sequential;
pub mod summary;

pub use bootstrap::{
    bootstrap_geomean_ratio_ci, bootstrap_mean_ci, bootstrap_ratio_ci, geometric_mean,
};
pub use dist::{normal_cdf, normal_quantile, normal_sf, t_cdf, t_quantile, t_sf, t_two_sided_p};
pub use equivalence::{Tost, tost_log_ratio, tost_welch};
pub use fairness::{
    SCHED_PRIO_TO_WEIGHT, jain_index, nearest_nice_for_ratio, nice_weight, normalize_shares,
    predicted_shares, share_error,
};
pub use hypothesis::{
    MannWhitney, MannWhitneyMethod, WelchTest, holm, mann_whitney_u, welch_t_test,
};
pub use outliers::{iqr_fences, iqr_outliers, modified_z_outliers, modified_z_scores};
pub use power::{
    POWER, mann_whitney_detectable_d, nct_cdf, ttest_ind_detectable_d, ttest_ind_power,
};
pub use regression::{Fit, loglog_slope, ols};
pub use summary::{Summary, percentile, summarize};
