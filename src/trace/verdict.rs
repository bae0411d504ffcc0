//! Whether a traced run's figures may be used, and exactly why not: one
//! judgement from the counts a capture and its derivation leave (lost
//! events, switches repaired or refused, the CPU time no task can be given),
//! and the one sentence every place that shows the trace prints beside it.

use serde::Serialize;

use super::derive::Derived;
use super::event::Capture;
use crate::units::count;

/// Most unattributed CPU time a usable trace may hold, as a share of the
/// run's on-CPU time in it: the tolerance the report holds the trace to
/// against schedstat (`report::analyse::trace::AGREEMENT_TOLERANCE`).
pub const UNATTRIBUTED_MAX_SHARE: f64 = 0.01;

/// The counts a trace is judged by (stored in `trace_captures`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Verdict {
    /// Events the kernel dropped.
    pub lost_events: u64,
    /// Missing switches repaired from the events around them.
    pub repaired: u64,
    /// Missing switches the events contradict.
    pub refused: u64,
    /// Mismatched switches of a trace stored before repairs were made
    /// (neither repaired nor refused: its slices around them were dropped).
    pub unsettled: u64,
    /// CPU time between the repaired gaps' two events, ns.
    pub unattributed_ns: u64,
    /// The run's tasks' on-CPU time in the trace, ns.
    pub oncpu_ns: u64,
}

impl Verdict {
    pub fn of(cap: &Capture, d: &Derived) -> Verdict {
        Verdict {
            lost_events: cap.lost_events,
            repaired: d.repairs.len() as u64,
            refused: d.refusals.len() as u64,
            unsettled: 0,
            unattributed_ns: d.repairs.iter().map(|r| r.unattributed_ns()).sum(),
            oncpu_ns: d.slices.iter().map(|s| s.len_ns()).sum(),
        }
    }

    /// Unattributed time over the run's on-CPU time (0 when it had none).
    pub fn unattributed_share(&self) -> f64 {
        if self.oncpu_ns == 0 {
            if self.unattributed_ns == 0 {
                0.0
            } else {
                f64::INFINITY
            }
        } else {
            self.unattributed_ns as f64 / self.oncpu_ns as f64
        }
    }

    pub fn unusable(&self) -> bool {
        self.reason().is_some()
    }

    /// Why the trace's figures are not to be used; None when they may be.
    pub fn reason(&self) -> Option<String> {
        let mut why = Vec::new();
        if self.lost_events > 0 {
            why.push(format!(
                "the kernel dropped {} (ring-buffer overrun), so slices may be missing anywhere",
                count(self.lost_events, "event", "events")
            ));
        }
        if self.refused > 0 {
            why.push(format!(
                "{} missing from the trace cannot be repaired: the task switched out had already \
                 run on that CPU before the other's last event there",
                count(self.refused, "switch", "switches")
            ));
        }
        if self.unsettled > 0 {
            why.push(format!(
                "{} contradicted the trace (stored before schedlab repaired missing switches; \
                 their slices were dropped)",
                count(self.unsettled, "switch", "switches")
            ));
        }
        if self.unattributed_share() > UNATTRIBUTED_MAX_SHARE {
            why.push(format!(
                "{} the kernel never emitted {} {} of CPU time unattributed, {} % of the \
                 run's {} on CPU (more than {} %)",
                count(self.repaired, "sched_switch", "sched_switches"),
                if self.repaired == 1 {
                    "leaves"
                } else {
                    "leave"
                },
                ms(self.unattributed_ns),
                pct(self.unattributed_share()),
                ms(self.oncpu_ns),
                pct(UNATTRIBUTED_MAX_SHARE)
            ));
        }
        (!why.is_empty()).then(|| why.join("; "))
    }

    /// What a usable trace's repairs cost; None when it has none.
    pub fn repair_note(&self) -> Option<String> {
        (self.repaired > 0 && !self.unusable()).then(|| {
            format!(
                "{} the kernel never emitted (none lost) repaired from the events around them: \
                 {} of CPU time unattributed, {} % of the run's {} on CPU",
                count(self.repaired, "sched_switch", "sched_switches"),
                ms(self.unattributed_ns),
                pct(self.unattributed_share()),
                ms(self.oncpu_ns)
            )
        })
    }

    /// The sentence to print beside anything drawn from the trace of `run`:
    /// why it is unusable, or what its repairs cost; None when neither.
    pub fn caveat(&self, run: i64) -> Option<String> {
        match (self.reason(), self.repair_note()) {
            (Some(why), _) => Some(format!(
                "Run {run}'s trace is unusable: {why}. What is shown from it is not to be trusted."
            )),
            (None, Some(note)) => Some(format!("Run {run}'s trace: {note}.")),
            (None, None) => None,
        }
    }
}

fn ms(ns: u64) -> String {
    format!("{:.3} ms", ns as f64 / 1e6)
}

fn pct(share: f64) -> String {
    format!("{:.2}", share * 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(repaired: u64, unattributed_ns: u64, oncpu_ns: u64) -> Verdict {
        Verdict {
            repaired,
            unattributed_ns,
            oncpu_ns,
            ..Verdict::default()
        }
    }

    #[test]
    fn a_clean_trace_has_no_caveat() {
        assert_eq!(v(0, 0, 1_000).caveat(3), None);
    }

    #[test]
    fn repairs_within_one_percent_are_usable_and_say_what_they_cost() {
        let t = v(2, 10_000, 1_000_000);
        assert!(!t.unusable());
        assert_eq!(
            t.caveat(7).unwrap(),
            "Run 7's trace: 2 sched_switches the kernel never emitted (none lost) repaired from \
             the events around them: 0.010 ms of CPU time unattributed, 1.00 % of the run's \
             1.000 ms on CPU."
        );
    }

    #[test]
    fn repairs_beyond_one_percent_make_the_trace_unusable() {
        let t = v(1, 12_042_000, 1_000_000_000);
        assert!(t.unusable());
        let c = t.caveat(7).unwrap();
        assert!(
            c.starts_with("Run 7's trace is unusable: 1 sched_switch the kernel never emitted")
        );
        assert!(
            c.contains("12.042 ms of CPU time unattributed, 1.20 %"),
            "{c}"
        );
    }

    #[test]
    fn lost_refused_and_unsettled_each_make_it_unusable_and_say_so() {
        let lost = Verdict {
            lost_events: 3,
            ..Verdict::default()
        };
        assert!(lost.reason().unwrap().contains("dropped 3 events"));
        let refused = Verdict {
            refused: 1,
            ..Verdict::default()
        };
        assert!(refused.reason().unwrap().starts_with("1 switch missing"));
        let old = Verdict {
            unsettled: 74,
            ..Verdict::default()
        };
        assert!(
            old.reason()
                .unwrap()
                .starts_with("74 switches contradicted")
        );
        // Unattributed time with no on-CPU time at all is never usable.
        assert!(v(1, 5, 0).unusable());
    }
}
