//! A capture with everything the store keeps beside it: the slices and
//! wake-ups derived from its events ([`super::derive`]), each process's
//! figures (with those inside its worker's own window, when known) and
//! each CPU's ([`super::summary`]); or the model's prediction of a run
//! (a capture without events and the slices the model gives), summarised
//! the same way. Pure: computed before the store's write transaction
//! opens, so that the store only persists.

use super::derive::{Derived, derive};
use super::event::Capture;
use super::summary::{self, CpuTrace, ProcessTrace, WithinWindow, WorkWindow};
use super::verdict::Verdict;
use crate::record::RunRecord;

/// A capture and what is derived from it.
#[derive(Debug, Clone, PartialEq)]
pub struct Analysed<'a> {
    pub capture: &'a Capture,
    pub derived: Derived,
    /// Each process's figures, with what the trace saw inside its work
    /// window when the process has one.
    pub processes: Vec<(ProcessTrace, Option<WithinWindow>)>,
    pub cpus: Vec<CpuTrace>,
    /// Whether the trace can be used, and what its repairs cost.
    pub verdict: Verdict,
    /// The model's prediction (`schedlab simulate`), not a kernel trace.
    pub predicted: bool,
}

impl<'a> Analysed<'a> {
    /// Derive everything from `capture`; `windows` are the workers' own
    /// windows on the trace's clock (none: no process has one).
    pub fn new(capture: &'a Capture, windows: &[WorkWindow]) -> Analysed<'a> {
        Analysed::summarise(capture, derive(capture), windows, false)
    }

    /// The model's prediction of a run: its slices as the model gives
    /// them, summarised as a trace's; `windows` each worker's own.
    pub fn predicted(
        capture: &'a Capture,
        derived: Derived,
        windows: &[WorkWindow],
    ) -> Analysed<'a> {
        Analysed::summarise(capture, derived, windows, true)
    }

    fn summarise(
        capture: &'a Capture,
        derived: Derived,
        windows: &[WorkWindow],
        predicted: bool,
    ) -> Analysed<'a> {
        let processes = summary::processes(capture, &derived)
            .into_iter()
            .map(|p| {
                let work = windows
                    .iter()
                    .find(|w| w.tgid == p.tgid)
                    .map(|w| summary::within(capture, &derived, w));
                (p, work)
            })
            .collect();
        let cpus = summary::cpus(capture, &derived);
        let verdict = Verdict::of(capture, &derived);
        Analysed {
            capture,
            derived,
            processes,
            cpus,
            verdict,
            predicted,
        }
    }

    /// The capture of a finished run, each worker's window being its own
    /// (rusage's and schedstat's: from its start to its end after the
    /// barrier's release).
    pub fn of_run(capture: &'a Capture, rec: &RunRecord) -> Analysed<'a> {
        Analysed::new(capture, &work_windows(capture, rec))
    }
}

/// Each worker's own window on the trace's clock (none when the trace
/// lacks the release time).
fn work_windows(capture: &Capture, rec: &RunRecord) -> Vec<WorkWindow> {
    let Some(release) = capture.release_ns else {
        return Vec::new();
    };
    rec.processes
        .iter()
        .filter_map(|p| {
            Some(WorkWindow {
                tgid: p.pid,
                from_ns: release + p.start_ns?,
                to_ns: release + p.end_ns?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::derive::tests::*;

    /// Two processes taking turns on CPU 0 from 1.1 ms to 1.6 ms.
    fn turns() -> Capture {
        capture(
            1_000_000,
            2_000_000,
            &[10, 11],
            vec![
                sw(1_100_000, 0, 0, 0, 10),
                sw(1_200_000, 0, 10, PREEMPTED, 11),
                sw(1_300_000, 0, 11, PREEMPTED, 10),
                sw(1_600_000, 0, 10, SLEEPING, 0),
            ],
        )
    }

    #[test]
    fn the_figures_are_the_summaries_of_the_derivation() {
        let cap = turns();
        let a = Analysed::new(&cap, &[]);
        assert_eq!(a.derived, derive(&cap));
        let processes: Vec<ProcessTrace> = a.processes.iter().map(|(p, _)| p.clone()).collect();
        assert_eq!(processes, summary::processes(&cap, &a.derived));
        assert!(a.processes.iter().all(|(_, w)| w.is_none()));
        assert_eq!(a.cpus, summary::cpus(&cap, &a.derived));
    }

    #[test]
    fn a_window_gives_its_process_what_the_trace_saw_inside_it() {
        let cap = turns();
        let window = WorkWindow {
            tgid: 10,
            from_ns: 1_000_000,
            to_ns: 1_250_000,
        };
        let a = Analysed::new(&cap, &[window]);
        let work = |tgid: i32| {
            a.processes
                .iter()
                .find(|(p, _)| p.tgid == tgid)
                .map(|(_, w)| *w)
                .unwrap()
        };
        assert_eq!(work(10), Some(summary::within(&cap, &a.derived, &window)));
        // 10 ran 1.1–1.2 ms inside the window (and 1.3–1.6 ms outside).
        assert_eq!(work(10).unwrap().oncpu_ns, 100_000);
        assert_eq!(work(11), None);
    }
}
