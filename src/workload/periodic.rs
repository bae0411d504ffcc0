//! The periodic workload (cyclictest / rt-app style): each process wakes
//! every `period_us` on an absolute CLOCK_MONOTONIC timer, runs `run_us`
//! of CPU work, and sleeps until its next release.
//!
//! This file owns the accounting of one activation as a pure function of
//! its intended release and the measured times ([`account`]), the CPU burn
//! measured in the thread's own CPU time that the request workload shares
//! ([`burn_cpu_ns`]), and the loop a periodic worker runs.
//!
//! Releases are fixed in advance: the first is one period after the run's
//! barrier release (after the worker's own start without one), then one
//! every period, never drifting with lateness. Per activation:
//!
//! - wake-up latency = actual wake − intended release (histogram `wakeup`,
//!   the primary latency);
//! - completion time = end of the work − intended release (histogram
//!   `completion`);
//! - slack = next release − end of the work (negative when late);
//! - a deadline miss when the work ends after the next release.
//!
//! A worker that first gets the CPU late (behind RT tasks, under WRR)
//! wakes at once for its first release, late, and skips the releases that
//! passed meanwhile, as any overrun.
//!
//! Overruns: like cyclictest, which steps its next release past "now"
//! when it wakes late, an activation that ends after one or more later
//! releases have passed does not run those releases late: they are
//! skipped, each counted as a miss too, and the worker continues at the
//! first release not yet passed. So one activation that ends 1.5 periods
//! after its release adds two misses (its own deadline, and the release it
//! overran, which never ran). `misses` = late activations + `skipped`.
//!
//! In duration mode every release before the end of the window (barrier
//! release + `duration_s`) runs: 1 s at 1 ms is 999 activations (the
//! first period is the start-up). With a fixed count, `activations` is the
//! number of activations run; skipped releases do not count toward it.
//!
//! Figures: `activations`, `misses`, `skipped`, `min_slack_us` (absent
//! without activations), `wakeup_p50_us`, `wakeup_p99_us`. Work unit:
//! activations. The result is verified: both histograms hold exactly one
//! value per activation run, a fixed count ran exactly that many, and the
//! thread's CPU time burnt covers `activations × run_us`.

use super::kind::{Entry, Kind, scale_amount};
use super::latency::Latency;
use super::modelled::ModelTask;
use super::{Rates, Stop, WorkContext, WorkOutput, Workload, elapsed_ns};
use crate::sys::clock::{sleep_until_ns, thread_cpu_ns};
use crate::sys::proc::monotonic_ns;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::Instant;

/// Periodic activations. Work unit: activations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PeriodicParams {
    pub stop: Stop,
    pub period_us: u64,
    /// CPU time of work per activation (0: wake up and go back to sleep).
    pub run_us: u64,
}

/// Shortest and longest period a spec may ask for, in µs.
pub const MIN_PERIOD_US: i64 = 50;
pub const MAX_PERIOD_US: i64 = 10_000_000;

/// What one activation's times say about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Activation {
    /// Actual wake − intended release (0 if it woke early, which an
    /// absolute sleep never does).
    pub wakeup_ns: u64,
    /// End of the work − intended release.
    pub completion_ns: u64,
    /// Next release − end of the work; negative when it ended late.
    pub slack_ns: i64,
    /// Whether the work ended after the next release.
    pub missed: bool,
    /// Later releases, before the window's end, that passed before the
    /// work ended: they never run, and each is a miss too.
    pub skipped: u64,
    /// The release to sleep until next: the first at or after the end of
    /// the work.
    pub next_release_ns: u64,
}

impl Activation {
    /// Misses this activation adds: its own, and the releases it skipped.
    pub fn misses(&self) -> u64 {
        u64::from(self.missed) + self.skipped
    }
}

/// Account for the activation released at `release_ns` that woke at
/// `woke_ns` and ended its work at `done_ns`, with releases every
/// `period_ns`; releases at or after `end_ns` (the end of a duration
/// window; `u64::MAX` for a fixed count) are not counted as skipped.
/// Pure.
pub fn account(
    release_ns: u64,
    period_ns: u64,
    woke_ns: u64,
    done_ns: u64,
    end_ns: u64,
) -> Activation {
    let period = period_ns.max(1);
    let deadline = release_ns.saturating_add(period);
    // The first later release at or after the end of the work: release + j·period.
    let late_by = done_ns.saturating_sub(release_ns);
    let j_next = late_by.div_ceil(period).max(1);
    // Releases j = 1 .. j_next - 1 had passed; those before end_ns count.
    let in_window = end_ns.saturating_sub(release_ns).div_ceil(period);
    let skipped = (j_next - 1).min(in_window.saturating_sub(1));
    Activation {
        wakeup_ns: woke_ns.saturating_sub(release_ns),
        completion_ns: late_by,
        slack_ns: deadline as i64 - done_ns as i64,
        missed: done_ns > deadline,
        skipped,
        next_release_ns: release_ns.saturating_add(j_next.saturating_mul(period)),
    }
}

/// Loop iterations between two reads of the thread's CPU clock (a read
/// is a system call of about a microsecond; this keeps the overshoot
/// around a microsecond too).
const SPIN_STEP: u32 = 256;

/// Run on the CPU until the calling thread has used `ns` nanoseconds of
/// CPU time (not wall-clock time: time preempted does not count), and
/// return the CPU time it used, at least `ns`. Zero returns at once.
pub fn burn_cpu_ns(ns: u64) -> anyhow::Result<u64> {
    if ns == 0 {
        return Ok(0);
    }
    let start = thread_cpu_ns()?;
    let mut x = black_box(0x9E37_79B9_7F4A_7C15u64);
    loop {
        for _ in 0..SPIN_STEP {
            x = black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1));
        }
        let used = thread_cpu_ns()?.saturating_sub(start);
        if used >= ns {
            black_box(x);
            return Ok(used);
        }
    }
}

/// Worker loop of the periodic workload; a duration and the first release
/// count from `release_ns` (now without one).
pub fn run(p: &PeriodicParams, release_ns: Option<u64>) -> anyhow::Result<WorkOutput> {
    let period = p.period_us.max(1) * 1000;
    let run_ns = p.run_us * 1000;
    let anchor = release_ns.unwrap_or_else(monotonic_ns);
    let (quota, end) = match p.stop {
        Stop::Work(n) => (n, u64::MAX),
        Stop::DurationNs(d) => (u64::MAX, anchor.saturating_add(d)),
    };
    let mut wakeup = Latency::new();
    let mut completion = Latency::new();
    let (mut done, mut misses, mut skipped, mut cpu_ns) = (0u64, 0u64, 0u64, 0u64);
    let mut min_slack: Option<i64> = None;
    let mut next = anchor.saturating_add(period);
    let start = Instant::now();
    while done < quota && next < end {
        sleep_until_ns(next).map_err(|e| anyhow::anyhow!("sleeping until a release: {e}"))?;
        let woke = monotonic_ns();
        cpu_ns += burn_cpu_ns(run_ns)?;
        let finished = monotonic_ns();
        let a = account(next, period, woke, finished, end);
        wakeup.record_ns(a.wakeup_ns);
        completion.record_ns(a.completion_ns);
        min_slack = Some(min_slack.map_or(a.slack_ns, |m| m.min(a.slack_ns)));
        misses += a.misses();
        skipped += a.skipped;
        done += 1;
        next = a.next_release_ns;
    }
    let elapsed = elapsed_ns(start);
    verify(p, done, &wakeup, &completion, cpu_ns)?;
    let mut figures: BTreeMap<String, f64> = super::figures([
        ("activations", done as f64),
        ("misses", misses as f64),
        ("skipped", skipped as f64),
        ("wakeup_p50_us", wakeup.quantile_ns(0.5) as f64 / 1e3),
        ("wakeup_p99_us", wakeup.quantile_ns(0.99) as f64 / 1e3),
    ]);
    if let Some(s) = min_slack {
        figures.insert("min_slack_us".into(), s as f64 / 1e3);
    }
    let latency = [("wakeup", &wakeup), ("completion", &completion)]
        .into_iter()
        .map(|(k, h)| (k.to_string(), h.encode()))
        .collect();
    Ok(WorkOutput {
        work: done,
        elapsed_ns: elapsed,
        figures,
        latency,
    })
}

/// The loop's own checks: one value per activation in each histogram, a
/// fixed count met exactly, and at least `run_us` of CPU per activation.
fn verify(
    p: &PeriodicParams,
    done: u64,
    wakeup: &Latency,
    completion: &Latency,
    cpu_ns: u64,
) -> anyhow::Result<()> {
    anyhow::ensure!(
        wakeup.count() == done && completion.count() == done,
        "periodic check failed: {done} activations but {} wake-ups and {} completions recorded",
        wakeup.count(),
        completion.count()
    );
    if let Stop::Work(n) = p.stop {
        anyhow::ensure!(
            done == n,
            "periodic check failed: {done} of {n} activations ran"
        );
    }
    let owed = done.saturating_mul(p.run_us * 1000);
    anyhow::ensure!(
        cpu_ns >= owed,
        "periodic check failed: {done} activations of {} µs used only {cpu_ns} ns of CPU",
        p.run_us
    );
    Ok(())
}

impl Kind for PeriodicParams {
    fn name(&self) -> &'static str {
        "periodic"
    }
    fn work_unit(&self) -> &'static str {
        "activations"
    }
    fn stop(&self) -> Stop {
        self.stop
    }
    fn set_stop(&mut self, stop: Stop) {
        self.stop = stop;
    }
    /// Scales the count of activations, or the duration, never the period
    /// or the work per activation; a scaled duration keeps at least two
    /// periods (one activation).
    fn scaled(&self, f: f64) -> Workload {
        let stop = match self.stop {
            Stop::Work(n) => Stop::Work(scale_amount(n, f)),
            Stop::DurationNs(d) => {
                Stop::DurationNs(scale_amount(d, f).max(2 * self.period_us * 1000))
            }
        };
        Workload::Periodic(PeriodicParams {
            stop,
            ..self.clone()
        })
    }
    fn primary_latency(&self) -> Option<&'static str> {
        Some("wakeup")
    }
    fn run(&self, ctx: &WorkContext) -> anyhow::Result<WorkOutput> {
        run(self, ctx.release_ns)
    }
    /// CPU seconds, not wall-clock time: `activations × run_us`, or for a
    /// duration `duration × run_us / period_us`; the rest of each period is
    /// sleep. (A fixed count takes at least `activations × period_us` of
    /// wall-clock time whatever this says.)
    fn estimate_cpu_s(&self, _rates: &Rates) -> f64 {
        estimate_cpu_s(self)
    }
    fn model(&self) -> ModelTask<'_> {
        ModelTask::Periodic {
            period_us: self.period_us,
            run_us: self.run_us,
        }
    }
    /// A fixed count of activations takes that many periods.
    fn min_wall_s(&self) -> f64 {
        match self.stop {
            Stop::Work(n) => n as f64 * self.period_us as f64 / 1e6,
            Stop::DurationNs(d) => d as f64 / 1e9,
        }
    }
    fn cpu_bound(&self) -> bool {
        false
    }
}

/// See [`Kind::estimate_cpu_s`] of [`PeriodicParams`]. Pure.
pub fn estimate_cpu_s(p: &PeriodicParams) -> f64 {
    let run_s = p.run_us as f64 / 1e6;
    match p.stop {
        Stop::Work(n) => n as f64 * run_s,
        Stop::DurationNs(d) => d as f64 / 1e9 * p.run_us as f64 / p.period_us.max(1) as f64,
    }
}

/// The periodic workload's registration.
pub const ENTRY: Entry = Entry {
    name: "periodic",
    parse: |k| {
        k.only(&["period_us", "run_us", "activations", "duration_s"])?;
        let period_us = k.int_in("period_us", MIN_PERIOD_US, MAX_PERIOD_US, 1000, " µs")?;
        let run_us = k.int_in("run_us", 0, period_us - 1, 0, " µs (less than period_us)")?;
        let stop = k.stop("activations", 1000)?;
        if let Stop::DurationNs(d) = stop {
            let least = 2 * period_us as u64 * 1000;
            if d < least {
                return Err(k.err(
                    "duration_s",
                    format!(
                        "must be at least two periods ({} s; the first release is one period \
                         after the start), got {} s",
                        least as f64 / 1e9,
                        d as f64 / 1e9
                    ),
                ));
            }
        }
        Ok(Workload::Periodic(PeriodicParams {
            stop,
            period_us: period_us as u64,
            run_us: run_us as u64,
        }))
    },
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::keys::Keys;

    fn parse(text: &str) -> Result<Workload, crate::workload::keys::KeyError> {
        let t: toml::Table = text.parse().unwrap();
        (ENTRY.parse)(&Keys::new("p", "periodic", &t))
    }

    fn params(stop: Stop, period_us: u64, run_us: u64) -> PeriodicParams {
        PeriodicParams {
            stop,
            period_us,
            run_us,
        }
    }

    #[test]
    fn keys_defaults_and_errors_name_the_key() {
        assert_eq!(
            parse("").unwrap(),
            Workload::Periodic(params(Stop::Work(1000), 1000, 0))
        );
        assert_eq!(
            parse("period_us = 50\nrun_us = 49\nduration_s = 0.5").unwrap(),
            Workload::Periodic(params(Stop::DurationNs(500_000_000), 50, 49))
        );
        let cases = [
            ("period_us = 49", "period_us", "between 50 and 10000000 µs"),
            ("period_us = 10_000_001", "period_us", "between 50"),
            ("run_us = 1000", "run_us", "less than period_us"),
            ("period_us = 100\nrun_us = -1", "run_us", "between 0 and 99"),
            ("activations = 0", "activations", "positive"),
            ("activations = 5\nduration_s = 1", "activations", "not both"),
            ("duration_s = 0.0015", "duration_s", "at least two periods"),
            ("iterations = 5", "iterations", "its parameters: period_us"),
            ("run_us = \"x\"", "run_us", "an integer"),
        ];
        for (text, key, msg) in cases {
            let e = parse(text).unwrap_err();
            assert_eq!(e.key, format!("workloads.p.{key}"), "{text}");
            assert!(e.message.contains(msg), "{text}: {}", e.message);
        }
    }

    #[test]
    fn on_time_activation() {
        // Released at 1000, period 100: woke 3 late, worked until 30.
        let a = account(1000, 100, 1003, 1030, u64::MAX);
        assert_eq!(
            a,
            Activation {
                wakeup_ns: 3,
                completion_ns: 30,
                slack_ns: 70,
                missed: false,
                skipped: 0,
                next_release_ns: 1100,
            }
        );
        assert_eq!(a.misses(), 0);
        // Ending exactly at the next release is on time, with no slack.
        let a = account(1000, 100, 1000, 1100, u64::MAX);
        assert_eq!((a.missed, a.slack_ns, a.skipped), (false, 0, 0));
        assert_eq!(a.next_release_ns, 1100);
    }

    #[test]
    fn a_late_wake_that_still_finishes_in_time_is_no_miss() {
        let a = account(1000, 100, 1090, 1095, u64::MAX);
        assert_eq!((a.wakeup_ns, a.missed, a.misses()), (90, false, 0));
        assert_eq!(a.next_release_ns, 1100);
    }

    #[test]
    fn an_overrun_skips_the_passed_releases_and_counts_them_as_misses() {
        // Ends at 1.5 periods: its own deadline (1100) is missed and the
        // release at 1100 had passed: skipped; continue at 1200.
        let a = account(1000, 100, 1010, 1150, u64::MAX);
        assert_eq!(
            (a.missed, a.skipped, a.misses(), a.slack_ns),
            (true, 1, 2, -50)
        );
        assert_eq!(a.next_release_ns, 1200);
        // Woke 3.2 periods late: releases 1100, 1200, 1300 passed.
        let a = account(1000, 100, 1320, 1330, u64::MAX);
        assert_eq!((a.wakeup_ns, a.skipped, a.misses()), (320, 3, 4));
        assert_eq!(a.next_release_ns, 1400);
        // Ending exactly on a later release: 1100 and 1200 passed, 1300
        // has not yet.
        let a = account(1000, 100, 1000, 1300, u64::MAX);
        assert_eq!((a.skipped, a.misses(), a.next_release_ns), (2, 3, 1300));
    }

    #[test]
    fn skipped_releases_beyond_the_window_do_not_count() {
        // Window ends at 1250: of the passed 1100, 1200, 1300 only the
        // first two lie in it.
        let a = account(1000, 100, 1000, 1350, 1250);
        assert_eq!((a.skipped, a.misses()), (2, 3));
        assert_eq!(a.next_release_ns, 1400);
        // The window ends at the next release: nothing in it was skipped.
        let a = account(1000, 100, 1000, 1350, 1100);
        assert_eq!((a.skipped, a.misses()), (0, 1));
    }

    #[test]
    fn scaling_and_estimates() {
        let w = params(Stop::Work(1000), 1000, 200);
        assert_eq!(
            w.scaled(0.1),
            Workload::Periodic(params(Stop::Work(100), 1000, 200))
        );
        let d = params(Stop::DurationNs(1_000_000_000), 1000, 200);
        assert_eq!(
            d.scaled(0.5),
            Workload::Periodic(params(Stop::DurationNs(500_000_000), 1000, 200))
        );
        // Never below two periods.
        assert_eq!(
            d.scaled(1e-6),
            Workload::Periodic(params(Stop::DurationNs(2_000_000), 1000, 200))
        );
        // CPU seconds: 1000 × 200 µs; 2 s × 200/1000.
        assert!((estimate_cpu_s(&w) - 0.2).abs() < 1e-12);
        let two_s = params(Stop::DurationNs(2_000_000_000), 1000, 200);
        assert!((estimate_cpu_s(&two_s) - 0.4).abs() < 1e-12);
        assert_eq!(estimate_cpu_s(&params(Stop::Work(10), 100, 0)), 0.0);
        let wl = Workload::Periodic(w);
        assert_eq!(
            (wl.kind(), wl.work_unit(), wl.primary_latency()),
            ("periodic", "activations", Some("wakeup"))
        );
    }

    #[test]
    fn burn_uses_at_least_the_cpu_time_asked() {
        assert_eq!(burn_cpu_ns(0).unwrap(), 0);
        let before = thread_cpu_ns().unwrap();
        let used = burn_cpu_ns(3_000_000).unwrap();
        let after = thread_cpu_ns().unwrap();
        assert!(used >= 3_000_000, "{used}");
        assert!(after - before >= used);
    }

    #[test]
    fn a_fixed_count_runs_every_activation_and_records_each() {
        let p = params(Stop::Work(5), 1000, 100);
        let t = monotonic_ns();
        let out = run(&p, None).unwrap();
        // Five releases, one period apart, the first one period in.
        assert!(monotonic_ns() - t >= 5_000_000);
        assert_eq!(out.work, 5);
        assert_eq!(out.figures["activations"], 5.0);
        assert!(out.figures["misses"] >= out.figures["skipped"]);
        assert!(out.figures["min_slack_us"] <= 900.0);
        for name in ["wakeup", "completion"] {
            let h = Latency::decode(&out.latency[name]).unwrap();
            assert_eq!(h.count(), 5, "{name}");
        }
        // Completion includes the 100 µs of work.
        let c = Latency::decode(&out.latency["completion"]).unwrap();
        assert!(c.quantile_ns(0.0) >= 100_000);
    }

    #[test]
    fn a_duration_runs_the_releases_of_its_window_from_the_release() {
        // Released 3 ms ago, 10 ms window at 1 ms: releases at 1..9 ms; the
        // first two (and the one at 3 ms, possibly) have passed already and
        // are run late or skipped.
        let release = monotonic_ns() - 3_000_000;
        let p = params(Stop::DurationNs(10_000_000), 1000, 0);
        let out = run(&p, Some(release)).unwrap();
        let ran = out.figures["activations"];
        let skipped = out.figures["skipped"];
        assert_eq!(ran + skipped, 9.0, "{:?}", out.figures);
        assert!(skipped >= 1.0, "{:?}", out.figures);
        assert!(monotonic_ns() >= release + 9_000_000);
        assert!(out.figures.contains_key("min_slack_us"));
        // A worker that first runs after its window ended runs its first
        // release, late, and misses all nine.
        let out = run(&p, Some(monotonic_ns() - 20_000_000)).unwrap();
        assert_eq!(out.work, 1);
        assert_eq!(out.figures["skipped"], 8.0);
        assert_eq!(out.figures["misses"], 9.0);
        assert!(out.figures["wakeup_p50_us"] >= 19_000.0);
        assert!(out.figures["min_slack_us"] < -18_000.0);
    }

    #[test]
    fn verification_refuses_a_broken_loop() {
        let p = params(Stop::Work(3), 1000, 10);
        let mut h = Latency::new();
        h.record_ns(5);
        let e = verify(&p, 2, &h, &h, 1_000_000).unwrap_err().to_string();
        assert!(e.contains("2 activations but 1 wake-ups"), "{e}");
        h.record_ns(5);
        let e = verify(&p, 2, &h, &h, 1_000_000).unwrap_err().to_string();
        assert!(e.contains("2 of 3 activations"), "{e}");
        let e = verify(&params(Stop::Work(2), 1000, 10), 2, &h, &h, 19_999)
            .unwrap_err()
            .to_string();
        assert!(e.contains("used only"), "{e}");
        verify(&params(Stop::Work(2), 1000, 10), 2, &h, &h, 20_000).unwrap();
    }
}
