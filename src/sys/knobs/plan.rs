//! The pure part: RT bandwidth values, their validity, the kernel's
//! fixed-point ratios, and the order of writes that keeps the root group at
//! or below the sysctl at every step.

use serde::{Deserialize, Serialize};

/// The kernel's fixed-point bandwidth unit (`BW_SHIFT` = 20).
const BW_SHIFT: u32 = 20;
pub(super) const BW_UNIT: u64 = 1 << BW_SHIFT;

/// A runtime out of a period, in microseconds; runtime -1 is unlimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RtBandwidth {
    pub runtime_us: i64,
    pub period_us: i64,
}

impl std::fmt::Display for RtBandwidth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} / {} µs ({})",
            self.runtime_us,
            self.period_us,
            percent(self.runtime_us, self.period_us)
        )
    }
}

/// Whether `runtime_us` is a valid `sched_rt_runtime_us` for `period_us`:
/// -1 (unlimited, RT throttling disabled) or `0..=period_us`.
pub fn validate_runtime(runtime_us: i64, period_us: i64) -> Result<(), String> {
    if period_us <= 0 {
        return Err(format!(
            "sched_rt_period_us {period_us} is invalid: the period must be at least 1 µs"
        ));
    }
    if runtime_us == -1 || (0..=period_us).contains(&runtime_us) {
        return Ok(());
    }
    if runtime_us < 0 {
        Err(format!(
            "sched_rt_runtime_us {runtime_us} is invalid: it must be -1 (unlimited) or at \
             least 0"
        ))
    } else {
        Err(format!(
            "sched_rt_runtime_us {runtime_us} is invalid: it must not exceed \
             sched_rt_period_us {period_us} (or be -1 for unlimited)"
        ))
    }
}

/// One RT runtime knob.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Knob {
    /// `cpu.rt_runtime_us` of the root cpu cgroup (RT group scheduling).
    RootGroup,
    /// `kernel.sched_rt_runtime_us`.
    Sysctl,
}

impl Knob {
    pub fn name(self) -> &'static str {
        match self {
            Knob::RootGroup => "root cpu cgroup cpu.rt_runtime_us",
            Knob::Sysctl => "sched_rt_runtime_us",
        }
    }
}

/// Orders a runtime for comparisons: -1 (unlimited) is above everything.
pub(super) fn rank(runtime_us: i64) -> i64 {
    if runtime_us < 0 { i64::MAX } else { runtime_us }
}

/// The writes that take the sysctl (and the root group, when there is one)
/// from their current values to `target`, in an order the kernel accepts at
/// every step: lowering writes the group first, raising writes the sysctl
/// first. Knobs already at `target` are not written.
pub fn plan_writes(
    current_group: Option<i64>,
    current_sysctl: i64,
    target: i64,
) -> Vec<(Knob, i64)> {
    plan_transition(current_group.map(|g| (g, target)), (current_sysctl, target))
}

/// Like [`plan_writes`] with separate targets, as `(current, target)` pairs:
/// used to put back originals where the group and the sysctl differed.
/// Valid for targets with group ≤ sysctl (which every original state is).
pub(super) fn plan_transition(group: Option<(i64, i64)>, sysctl: (i64, i64)) -> Vec<(Knob, i64)> {
    let (cur_sysctl, new_sysctl) = sysctl;
    let sysctl_write = (cur_sysctl != new_sysctl).then_some((Knob::Sysctl, new_sysctl));
    let group_write = group.and_then(|(cur, new)| (cur != new).then_some((Knob::RootGroup, new)));
    let ordered = if rank(new_sysctl) >= rank(cur_sysctl) {
        [sysctl_write, group_write]
    } else {
        [group_write, sysctl_write]
    };
    ordered.into_iter().flatten().collect()
}

/// The kernel's `to_ratio`: runtime/period in units of 2^-20.
pub(super) fn to_ratio(period_us: i64, runtime_us: i64) -> u64 {
    if runtime_us < 0 {
        return BW_UNIT;
    }
    if period_us <= 0 {
        return 0;
    }
    (((runtime_us as u128) << BW_SHIFT) / period_us as u128) as u64
}

pub(super) fn percent(runtime_us: i64, period_us: i64) -> String {
    if runtime_us < 0 {
        "unlimited".to_string()
    } else if period_us > 0 {
        format!("{:.1}%", runtime_us as f64 * 100.0 / period_us as f64)
    } else {
        "?%".to_string()
    }
}

pub(super) fn percent_of_ratio(ratio: u64) -> String {
    format!("{:.1}%", ratio as f64 * 100.0 / BW_UNIT as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_bounds() {
        assert_eq!(validate_runtime(-1, 1_000_000), Ok(()));
        assert_eq!(validate_runtime(0, 1_000_000), Ok(()));
        assert_eq!(validate_runtime(950_000, 1_000_000), Ok(()));
        assert_eq!(validate_runtime(1_000_000, 1_000_000), Ok(()));
        let e = validate_runtime(1_000_001, 1_000_000).unwrap_err();
        assert!(e.contains("1000001") && e.contains("1000000"), "{e}");
        let e = validate_runtime(-2, 1_000_000).unwrap_err();
        assert!(
            e.contains("-2") && e.contains("-1") && e.contains("0"),
            "{e}"
        );
        let e = validate_runtime(5, 0).unwrap_err();
        assert!(e.contains("period"), "{e}");
    }

    #[test]
    fn plans_lowering_group_first() {
        assert_eq!(
            plan_writes(Some(950_000), 950_000, 500_000),
            vec![(Knob::RootGroup, 500_000), (Knob::Sysctl, 500_000)]
        );
        assert_eq!(
            plan_writes(None, 950_000, 500_000),
            vec![(Knob::Sysctl, 500_000)]
        );
        // From unlimited: -1 ranks above everything.
        assert_eq!(
            plan_writes(Some(-1), -1, 500_000),
            vec![(Knob::RootGroup, 500_000), (Knob::Sysctl, 500_000)]
        );
    }

    #[test]
    fn plans_raising_sysctl_first() {
        assert_eq!(
            plan_writes(Some(500_000), 500_000, 950_000),
            vec![(Knob::Sysctl, 950_000), (Knob::RootGroup, 950_000)]
        );
        assert_eq!(
            plan_writes(None, 500_000, 950_000),
            vec![(Knob::Sysctl, 950_000)]
        );
        assert_eq!(
            plan_writes(Some(500_000), 500_000, -1),
            vec![(Knob::Sysctl, -1), (Knob::RootGroup, -1)]
        );
    }

    #[test]
    fn plans_nothing_when_equal_and_only_what_differs() {
        assert_eq!(plan_writes(Some(950_000), 950_000, 950_000), vec![]);
        assert_eq!(plan_writes(None, 950_000, 950_000), vec![]);
        // Group below the sysctl: only the group moves, either way.
        assert_eq!(
            plan_writes(Some(900_000), 950_000, 950_000),
            vec![(Knob::RootGroup, 950_000)]
        );
        assert_eq!(
            plan_writes(Some(900_000), 950_000, 920_000),
            vec![(Knob::RootGroup, 920_000), (Knob::Sysctl, 920_000)]
        );
    }

    /// Every plan keeps group ≤ sysctl after each step.
    #[test]
    fn plans_stay_valid_at_every_step() {
        let values = [-1, 1, 100_000, 500_000, 900_000, 950_000, 1_000_000];
        for &g in &values {
            for &s in &values {
                if rank(g) > rank(s) {
                    continue; // not a state the kernel allows
                }
                for &t in &values {
                    let (mut cg, mut cs) = (g, s);
                    for (knob, v) in plan_writes(Some(g), s, t) {
                        match knob {
                            Knob::RootGroup => cg = v,
                            Knob::Sysctl => cs = v,
                        }
                        assert!(rank(cg) <= rank(cs), "{g} {s} → {t}: {cg} > {cs}");
                    }
                    assert_eq!((cg, cs), (t, t));
                }
                // Restoring a different (valid) pair of originals.
                for &og in &values {
                    for &os in &values {
                        if rank(og) > rank(os) {
                            continue;
                        }
                        let (mut cg, mut cs) = (g, s);
                        for (knob, v) in plan_transition(Some((g, og)), (s, os)) {
                            match knob {
                                Knob::RootGroup => cg = v,
                                Knob::Sysctl => cs = v,
                            }
                            assert!(rank(cg) <= rank(cs), "{g},{s} → {og},{os}");
                        }
                        assert_eq!((cg, cs), (og, os));
                    }
                }
            }
        }
    }

    #[test]
    fn ratios_match_the_kernel() {
        assert_eq!(to_ratio(1_000_000, 1_000_000), BW_UNIT);
        assert_eq!(to_ratio(1_000_000, -1), BW_UNIT);
        assert_eq!(to_ratio(1_000_000, 500_000), BW_UNIT / 2);
        assert_eq!(to_ratio(0, 5), 0);
    }
}
