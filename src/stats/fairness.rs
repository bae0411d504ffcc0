//! CPU-share fairness: Jain's fairness index, the kernel's nice-to-weight
//! table (`sched_prio_to_weight` in kernel/sched/core.c), the CPU shares
//! that table predicts for a set of nice values, and how far observed shares
//! deviate from the prediction.
//!
//! Predictions assume every task is always runnable and all compete for the
//! same CPU (one run queue). With fewer runnable tasks than CPUs, or with
//! tasks spread over the 2 CPUs of the lab VM, each task can get up to a
//! whole CPU and the weight ratio no longer bounds its share; compare
//! against [`predicted_shares`] only for CPU-bound tasks pinned together.

/// `sched_prio_to_weight` from kernel/sched/core.c: the load weight of each
/// nice level, index 0 = nice −20 (88761), index 20 = nice 0 (1024), index
/// 39 = nice 19 (15). Each step is a factor of about 1.25, i.e. ~10 % CPU.
pub const SCHED_PRIO_TO_WEIGHT: [u32; 40] = [
    /* -20 */ 88761, 71755, 56483, 46273, 36291, //
    /* -15 */ 29154, 23254, 18705, 14949, 11916, //
    /* -10 */ 9548, 7620, 6100, 4904, 3906, //
    /*  -5 */ 3121, 2501, 1991, 1586, 1277, //
    /*   0 */ 1024, 820, 655, 526, 423, //
    /*   5 */ 335, 272, 215, 172, 137, //
    /*  10 */ 110, 87, 70, 56, 45, //
    /*  15 */ 36, 29, 23, 18, 15, //
];

/// Lowest and highest nice values.
pub const MIN_NICE: i32 = -20;
pub const MAX_NICE: i32 = 19;
/// Weight of nice 0 (`NICE_0_LOAD` at its unscaled resolution).
pub const NICE_0_WEIGHT: u32 = 1024;

/// Jain's fairness index (Σx)² / (n·Σx²) of per-task allocations (CPU time,
/// throughput, …): 1.0 when all are equal, 1/n when one task gets
/// everything, and k/n when k tasks share equally and the rest get nothing.
///
/// Edge cases: `None` for an empty slice, when all values are 0, or when any
/// value is negative, NaN or infinite (the index is defined for
/// non-negative allocations only).
pub fn jain_index(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() || xs.iter().any(|x| !x.is_finite() || *x < 0.0) {
        return None;
    }
    // Scale by the maximum so that huge or tiny values cannot overflow or
    // underflow in the squares; the index is scale-invariant.
    let max = xs.iter().copied().fold(0.0_f64, f64::max);
    if max == 0.0 {
        return None;
    }
    let sum: f64 = xs.iter().map(|x| x / max).sum();
    let sum_sq: f64 = xs.iter().map(|x| (x / max) * (x / max)).sum();
    Some((sum * sum / (xs.len() as f64 * sum_sq)).min(1.0))
}

/// Load weight of a nice value from [`SCHED_PRIO_TO_WEIGHT`].
///
/// Edge cases: `None` outside −20..=19.
pub fn nice_weight(nice: i32) -> Option<u32> {
    if (MIN_NICE..=MAX_NICE).contains(&nice) {
        Some(SCHED_PRIO_TO_WEIGHT[(nice - MIN_NICE) as usize])
    } else {
        None
    }
}

/// CPU shares CFS/EEVDF predicts for always-runnable tasks with these nice
/// values sharing one CPU: each task's weight divided by the total (the
/// result sums to 1).
///
/// Edge cases: empty input gives an empty vector; nice values outside
/// −20..=19 are clamped into range, as `setpriority(2)` does.
pub fn predicted_shares(nices: &[i32]) -> Vec<f64> {
    let weights: Vec<f64> = nices
        .iter()
        .map(|&n| {
            let w = nice_weight(n.clamp(MIN_NICE, MAX_NICE)).unwrap_or(NICE_0_WEIGHT);
            f64::from(w)
        })
        .collect();
    let total: f64 = weights.iter().sum();
    weights.iter().map(|w| w / total).collect()
}

/// The nice value whose weight relative to nice 0 (`weight / 1024`) is
/// nearest to `ratio`, measured in log space (so 2× and ½× are equally far
/// from 1×). E.g. 2.0 → −3 (weight 1991), 0.5 → 3 (526), 1.0 → 0.
///
/// Edge cases: ratios beyond the table give the extreme nice (above ~77.9,
/// the log-midpoint of the two largest weights, → −20, +inf included; below
/// ~0.016 → 19, 0 and negative ratios included); NaN gives 0. An exact tie in log distance picks the nice closer to 0.
pub fn nearest_nice_for_ratio(ratio: f64) -> i32 {
    if ratio.is_nan() {
        return 0;
    }
    if ratio <= 0.0 {
        return MAX_NICE;
    }
    if ratio.is_infinite() {
        return MIN_NICE;
    }
    let target = ratio.ln();
    let mut best = 0;
    let mut best_dist = f64::INFINITY;
    // Visit nice values in order of |nice| so that ties keep the one nearer 0.
    let mut candidates: Vec<i32> = (MIN_NICE..=MAX_NICE).collect();
    candidates.sort_by_key(|n| n.abs());
    for nice in candidates {
        let w = f64::from(SCHED_PRIO_TO_WEIGHT[(nice - MIN_NICE) as usize]);
        let dist = ((w / f64::from(NICE_0_WEIGHT)).ln() - target).abs();
        if dist < best_dist {
            best_dist = dist;
            best = nice;
        }
    }
    best
}

/// Normalise per-task allocations to shares summing to 1 (e.g. CPU seconds
/// to fractions) before comparing them with [`predicted_shares`].
///
/// Edge cases: `None` for an empty slice, a zero total, or any negative,
/// NaN or infinite value.
pub fn normalize_shares(xs: &[f64]) -> Option<Vec<f64>> {
    if xs.is_empty() || xs.iter().any(|x| !x.is_finite() || *x < 0.0) {
        return None;
    }
    let total: f64 = xs.iter().sum();
    if total == 0.0 {
        return None;
    }
    Some(xs.iter().map(|x| x / total).collect())
}

/// Relative error of each observed share against its predicted share:
/// `observed / predicted − 1` (0.1 = the task got 10 % more than predicted).
/// Both slices should hold shares (see [`normalize_shares`]).
///
/// Edge cases: the result has one entry per `observed` value; an entry is
/// NaN when the matching predicted share is missing (slices of different
/// lengths), 0, negative or not finite, or the observed share is NaN.
pub fn share_error(observed: &[f64], predicted: &[f64]) -> Vec<f64> {
    observed
        .iter()
        .enumerate()
        .map(|(i, &o)| match predicted.get(i) {
            Some(&p) if p.is_finite() && p > 0.0 => o / p - 1.0,
            _ => f64::NAN,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_rel(got: f64, want: f64, tol: f64) {
        let err = if want == 0.0 {
            got.abs()
        } else {
            ((got - want) / want).abs()
        };
        assert!(err <= tol, "got {got:e}, want {want:e}");
    }

    #[test]
    fn jain_matches_numpy() {
        // x = np.array([...]); x.sum()**2 / (len(x) * (x**2).sum())
        // [3.0, 2.9, 3.1, 2.5] -> 0.9937631499849714
        assert_rel(
            jain_index(&[3.0, 2.9, 3.1, 2.5]).unwrap(),
            0.9937631499849714,
            1e-12,
        );
        // [1, 1, 0] (one task starved) -> 0.6666666666666666
        assert_rel(jain_index(&[1.0, 1.0, 0.0]).unwrap(), 2.0 / 3.0, 1e-12);
        // [10, 0, 0, 0] (one takes all) -> 1/n = 0.25
        assert_rel(jain_index(&[10.0, 0.0, 0.0, 0.0]).unwrap(), 0.25, 1e-12);
        // [1e200, 2e200]: numpy overflows (nan); by hand (1+2)²/(2·(1+4)) = 0.9
        assert_rel(jain_index(&[1e200, 2e200]).unwrap(), 0.9, 1e-12);
    }

    #[test]
    fn jain_edge_cases() {
        assert_eq!(jain_index(&[5.0, 5.0, 5.0]), Some(1.0));
        assert_eq!(jain_index(&[0.1; 7]), Some(1.0));
        assert_eq!(jain_index(&[4.2]), Some(1.0));
        assert_eq!(jain_index(&[]), None);
        assert_eq!(jain_index(&[0.0, 0.0]), None);
        assert_eq!(jain_index(&[1.0, -1.0]), None);
        assert_eq!(jain_index(&[1.0, f64::NAN]), None);
    }

    #[test]
    fn weight_table_matches_kernel() {
        assert_eq!(nice_weight(-20), Some(88761));
        assert_eq!(nice_weight(0), Some(1024));
        assert_eq!(nice_weight(19), Some(15));
        assert_eq!(nice_weight(-21), None);
        assert_eq!(nice_weight(20), None);
        assert_eq!(SCHED_PRIO_TO_WEIGHT[20], NICE_0_WEIGHT);
        // Strictly decreasing, each step a factor within 1.2..1.3 of the next.
        for w in SCHED_PRIO_TO_WEIGHT.windows(2) {
            let r = f64::from(w[0]) / f64::from(w[1]);
            assert!((1.2..1.3).contains(&r), "{w:?}");
        }
    }

    #[test]
    fn predicted_shares_from_weights() {
        // nice 0 vs nice 5: 1024 / (1024 + 335) -> 0.753495217071376, 335 / 1359 -> 0.246504782928624
        let s = predicted_shares(&[0, 5]);
        assert_rel(s[0], 0.753495217071376, 1e-12);
        assert_rel(s[1], 0.246504782928624, 1e-12);
        // [-5, 0, 0, 10]: w = [3121, 1024, 1024, 110]; w / w.sum() ->
        //   [0.5912104565258571, 0.1939761318431521, 0.1939761318431521,
        //    0.020837279787838607]
        let s = predicted_shares(&[-5, 0, 0, 10]);
        let want = [
            0.5912104565258571,
            0.1939761318431521,
            0.1939761318431521,
            0.020837279787838607,
        ];
        for (g, w) in s.iter().zip(want) {
            assert_rel(*g, w, 1e-12);
        }
        assert_rel(s.iter().sum(), 1.0, 1e-15);
        assert!(predicted_shares(&[]).is_empty());
        // Out-of-range nice values are clamped like setpriority(2).
        assert_eq!(predicted_shares(&[-40, 50]), predicted_shares(&[-20, 19]));
        assert_eq!(predicted_shares(&[3, 3, 3]), vec![1.0 / 3.0; 3]);
    }

    #[test]
    fn nearest_nice_in_log_space() {
        // min(range(-20, 20), key=lambda n: abs(log(w[n+20]/1024) - log(r)))
        //   r = 2.0 -> -3, 0.5 -> 3, 1.0 -> 0, 10.0 -> -10, 1.1 -> 0,
        //   1.2 -> -1, 0.01 -> 19, 100.0 -> -20, 5.0 -> -7
        let cases = [
            (2.0, -3),
            (0.5, 3),
            (1.0, 0),
            (10.0, -10),
            (1.1, 0),
            (1.2, -1),
            (0.01, 19),
            (100.0, -20),
            (5.0, -7),
        ];
        for (r, n) in cases {
            assert_eq!(nearest_nice_for_ratio(r), n, "ratio {r}");
        }
        assert_eq!(nearest_nice_for_ratio(0.0), 19);
        assert_eq!(nearest_nice_for_ratio(-3.0), 19);
        assert_eq!(nearest_nice_for_ratio(f64::INFINITY), -20);
        assert_eq!(nearest_nice_for_ratio(f64::NAN), 0);
        // Every table ratio maps back to its own nice.
        for nice in MIN_NICE..=MAX_NICE {
            let r = f64::from(nice_weight(nice).unwrap()) / 1024.0;
            assert_eq!(nearest_nice_for_ratio(r), nice);
        }
    }

    #[test]
    fn share_errors() {
        // observed CPU seconds [70, 30] -> shares [0.7, 0.3]; predicted for
        // nice [0, 5]; o / (np.array([1024, 335]) / 1359) - 1
        //   -> [-0.07099609375000004, 0.21701492537313438]
        let obs = normalize_shares(&[70.0, 30.0]).unwrap();
        let err = share_error(&obs, &predicted_shares(&[0, 5]));
        assert_rel(err[0], -0.07099609375000004, 1e-12);
        assert_rel(err[1], 0.21701492537313438, 1e-12);
        let err = share_error(&[0.5, 0.5, 0.1], &[0.5, 0.0]);
        assert_eq!(err[0], 0.0);
        assert!(err[1].is_nan() && err[2].is_nan());
        assert!(share_error(&[], &[0.5]).is_empty());
        assert_eq!(normalize_shares(&[0.0, 0.0]), None);
        assert_eq!(normalize_shares(&[]), None);
        assert_eq!(normalize_shares(&[1.0, -1.0]), None);
    }
}
