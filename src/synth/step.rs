//! The replayer's own CPU cost of one step (a wake-up given and a wait, or
//! a timer sleep, with an empty burst), calibrated on the mechanism the
//! step uses: a timer sleep, a pipe round trip (a wait on a task of
//! another process), a futex doorbell round trip (a thread of the same
//! process). A recorded burst already holds the program's own system
//! calls, so the replay's burst is the recorded one less the step that
//! ends it ([`super::to_tasks_less`]). Calibrated on a timer sleep alone,
//! the step moved with the machine's load (5.2 to 8.7 µs from one
//! `schedlab bench replay` to the next) while a pipe step costs what a
//! pipe write and read cost.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::AsFd;

use anyhow::Result;

use crate::sys::clock::{sleep_until_ns, thread_cpu_ns};
use crate::sys::futex::{Doorbells, doorbell_bytes};
use crate::sys::proc::monotonic_ns;
use crate::workload::replay::desc::Waker;
use crate::workload::replay::run::burn;

/// Steps a round of calibration takes; rounds, of which the median counts.
const STEPS: u64 = 200;
const ROUNDS: usize = 5;

/// CPU ns of one step of the replayer, by the mechanism that ends it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StepCost {
    /// A timer sleep of 20 µs (also a sleep a task outside the tree ended).
    pub timer_ns: u64,
    /// A pipe write to a partner and a blocking read of its answer.
    pub pipe_ns: u64,
    /// A doorbell post to a partner thread and a wait for its answer.
    pub futex_ns: u64,
}

impl StepCost {
    /// The same cost for every mechanism.
    pub fn uniform(ns: u64) -> StepCost {
        StepCost {
            timer_ns: ns,
            pipe_ns: ns,
            futex_ns: ns,
        }
    }

    /// The step a sleep ended by `by` costs, `across` when its waker runs
    /// in another process than the sleeper (a pipe, else a futex).
    pub fn of(&self, by: Waker, across: bool) -> u64 {
        match by {
            Waker::Timer | Waker::External => self.timer_ns,
            Waker::Task(_) if across => self.pipe_ns,
            Waker::Task(_) => self.futex_ns,
        }
    }
}

/// The steps in words: "timer 5.3 µs, pipe 2.4 µs, futex 1.9 µs".
pub fn describe(c: &StepCost) -> String {
    let us = |ns: u64| ns as f64 / 1e3;
    format!(
        "timer {:.1} µs, pipe {:.1} µs, futex {:.1} µs",
        us(c.timer_ns),
        us(c.pipe_ns),
        us(c.futex_ns)
    )
}

/// Calibrate every mechanism on this machine (about 0.1 s).
pub fn calibrate() -> Result<StepCost> {
    Ok(StepCost {
        timer_ns: median_round(timer_round)?,
        pipe_ns: median_round(pipe_round)?,
        futex_ns: median_round(futex_round)?,
    })
}

fn median_round(round: fn() -> Result<u64>) -> Result<u64> {
    let mut per_step = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        per_step.push(round()?);
    }
    per_step.sort_unstable();
    Ok(per_step[ROUNDS / 2])
}

/// CPU ns per step of this thread over `STEPS` steps of `step`.
fn per_step(mut step: impl FnMut() -> Result<()>) -> Result<u64> {
    let before = thread_cpu_ns()?;
    for _ in 0..STEPS {
        burn(0);
        step()?;
    }
    Ok(thread_cpu_ns()?.saturating_sub(before) / STEPS)
}

fn timer_round() -> Result<u64> {
    per_step(|| {
        sleep_until_ns(monotonic_ns() + 20_000)?;
        Ok(())
    })
}

/// A partner thread answers each byte on one pipe with a byte on another;
/// this thread's CPU per write and blocking read.
fn pipe_round() -> Result<u64> {
    let (to_r, to_w) = crate::sys::proc::pipe()?;
    let (back_r, back_w) = crate::sys::proc::pipe()?;
    let (to_r, to_w, back_r, back_w) = (
        File::from(to_r),
        File::from(to_w),
        File::from(back_r),
        File::from(back_w),
    );
    std::thread::scope(|s| {
        let partner = s.spawn(move || -> std::io::Result<()> {
            let mut b = [0u8; 1];
            for _ in 0..STEPS {
                (&to_r).read_exact(&mut b)?;
                (&back_w).write_all(&b)?;
            }
            Ok(())
        });
        let ns = per_step(|| {
            (&to_w).write_all(&[1])?;
            let mut b = [0u8; 1];
            (&back_r).read_exact(&mut b)?;
            Ok(())
        });
        // A failed step leaves the partner blocked on a pipe whose writer
        // is still open here: close it so that the partner sees the end.
        drop(to_w);
        let joined = partner.join();
        let ns = ns?;
        joined.map_err(|_| anyhow::anyhow!("the pipe calibration's partner panicked"))??;
        Ok(ns)
    })
}

/// The same round trip over two futex doorbells between threads.
fn futex_round() -> Result<u64> {
    let f = File::from(crate::sys::fds::memfd(c"schedlab-step")?);
    f.set_len(doorbell_bytes(2) as u64)?;
    let bells = Doorbells::map(f.as_fd(), 2)?;
    std::thread::scope(|s| {
        let b = &bells;
        s.spawn(move || {
            for _ in 0..STEPS {
                b.wait(1);
                b.post(0);
            }
        });
        per_step(|| {
            bells.post(1);
            bells.wait(0);
            Ok(())
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_waker_takes_its_mechanism_step() {
        let c = StepCost {
            timer_ns: 1,
            pipe_ns: 2,
            futex_ns: 3,
        };
        assert_eq!(c.of(Waker::Timer, true), 1);
        assert_eq!(c.of(Waker::External, false), 1);
        assert_eq!(c.of(Waker::Task(4), true), 2);
        assert_eq!(c.of(Waker::Task(4), false), 3);
        assert_eq!(StepCost::uniform(7).of(Waker::Task(0), true), 7);
    }

    #[test]
    fn every_mechanism_is_calibrated_on_a_real_round_trip() {
        let c = calibrate().unwrap();
        // Each step is a system call at least, and far below a millisecond.
        for ns in [c.timer_ns, c.pipe_ns, c.futex_ns] {
            assert!((50..1_000_000).contains(&ns), "{c:?}");
        }
    }
}
