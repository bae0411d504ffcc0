//! A replay carried out: worker `i` becomes root task `i` of the
//! description, forks the same tree (processes with `fork`, threads with
//! threads of its process), and every task does its ops in order: CPU
//! bursts of the calibrated loop, timer sleeps, and waits for and
//! wake-ups of its partners through the run's channels
//! ([`super::channel::Bells`]: real pipes between processes, shared futex
//! doorbells between threads of one process). Each process reaps its children before it exits, so the
//! worker's rusage (from `wait4`) covers its whole tree.
//!
//! Wake-ups balance per (waker, wakee) pair (checked when the spec is
//! read) and are matched pair by pair in order; each doorbell or pipe has
//! one consumer, its task. A recorded task's ops follow the original's
//! timeline, and each wait's wake-up came before the wait ended there, so
//! the original's own order satisfies every wait: a synthesized replay
//! cannot hang on its own wake-ups.

use anyhow::{Result, bail};

use super::channel::{Bells, Pending};
use super::desc::{Body, Dist, Op, QUANTILES, ReplayTask, Waker};
use crate::sys::clock::sleep_until_ns;
use crate::sys::futex::{exit_now, fork, reap_children};
use crate::sys::proc::monotonic_ns;
use crate::workload::pi::leibniz;

/// What one task's tree (within its process) did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Done {
    /// Work units burnt by the tasks of this process.
    pub work_units: u64,
    /// Tasks run in this process (itself and its threads).
    pub tasks: u64,
}

/// The tasks of a replay and the run's doorbells.
pub struct Replayer<'a> {
    pub tasks: &'a [ReplayTask],
    pub bells: &'a Bells,
    /// Scale of bursts and sleeps (1 as recorded).
    pub scale: f64,
}

/// A CPU burst of `units` of the calibrated loop.
pub fn burn(units: u64) {
    std::hint::black_box(leibniz(0, units));
}

fn sleep_ns(ns: u64) -> Result<()> {
    sleep_until_ns(monotonic_ns().saturating_add(ns))?;
    Ok(())
}

/// The value at `u` (0..1) of a quantile table, interpolated.
pub fn quantile_at(table: &[u64], u: f64) -> u64 {
    if table.len() != QUANTILES {
        return 0;
    }
    let x = u.clamp(0.0, 1.0) * (QUANTILES - 1) as f64;
    let lo = x.floor() as usize;
    let hi = (lo + 1).min(QUANTILES - 1);
    let f = x - lo as f64;
    (table[lo] as f64 * (1.0 - f) + table[hi] as f64 * f).round() as u64
}

/// The k-th draw of a low-discrepancy sequence in 0..1 (deterministic, no
/// RNG state: the golden-ratio sequence).
pub fn draw(k: u64, salt: usize) -> f64 {
    const PHI: f64 = 0.618_033_988_749_894_9;
    ((k as f64 + 0.5 + salt as f64 * 0.371) * PHI).fract()
}

impl Replayer<'_> {
    fn scaled(&self, x: u64) -> u64 {
        (x as f64 * self.scale).round() as u64
    }

    /// Run task `i` and the tasks it starts, in this process; the tasks of
    /// processes it forks report through their exit status.
    pub fn run_process(&self, i: usize) -> Result<Done> {
        let done = std::thread::scope(|s| self.run_task(s, i));
        let failed = reap_children();
        let done = done?;
        if failed > 0 {
            bail!(
                "{failed} replayed process(es) of {} failed",
                self.tasks[i].name
            );
        }
        Ok(done)
    }

    fn run_task<'s, 'e>(&'s self, s: &'s std::thread::Scope<'s, 'e>, i: usize) -> Result<Done> {
        let mut threads = Vec::new();
        let mut done = Done {
            work_units: 0,
            tasks: 1,
        };
        let task = &self.tasks[i];
        let mut pending = Pending::new();
        match &task.body {
            Body::Sequence(ops) => {
                for op in ops {
                    match *op {
                        Op::Run(n) => {
                            let n = self.scaled(n);
                            burn(n);
                            done.work_units += n;
                        }
                        Op::Sleep {
                            ns,
                            by: Waker::Timer | Waker::External,
                        } => sleep_ns(self.scaled(ns))?,
                        Op::Sleep {
                            by: Waker::Task(w), ..
                        } => self.bells.wait(i, w, &mut pending)?,
                        Op::Wake(t) => self.bells.post(i, t)?,
                        Op::Fork(c) => self.start(s, c, &mut threads)?,
                    }
                }
            }
            Body::Distribution(d) => self.run_dist(s, i, d, &mut done, &mut threads)?,
        }
        for t in threads {
            let d = t
                .join()
                .map_err(|_| anyhow::anyhow!("a replayed thread of {} panicked", task.name))??;
            done.work_units += d.work_units;
            done.tasks += d.tasks;
        }
        Ok(done)
    }

    fn run_dist<'s, 'e>(
        &'s self,
        s: &'s std::thread::Scope<'s, 'e>,
        i: usize,
        d: &Dist,
        done: &mut Done,
        threads: &mut Vec<std::thread::ScopedJoinHandle<'s, Result<Done>>>,
    ) -> Result<()> {
        let mut forks = d.forks.iter().peekable();
        let n_forks = d.forks.len() as u64;
        for k in 0..d.bursts {
            // Fork j goes before burst floor(j·bursts / forks).
            while let Some(&&c) = forks.peek() {
                let j = n_forks - forks.len() as u64;
                if j * d.bursts / n_forks.max(1) > k {
                    break;
                }
                forks.next();
                self.start(s, c, threads)?;
            }
            let n = self.scaled(quantile_at(&d.burst_work, draw(k, i)));
            burn(n);
            done.work_units += n;
            if k + 1 < d.bursts && !d.sleep_ns.is_empty() {
                sleep_ns(self.scaled(quantile_at(&d.sleep_ns, draw(k, i + 1))))?;
            }
        }
        for &c in forks {
            self.start(s, c, threads)?;
        }
        Ok(())
    }

    /// Start task `c`: a thread of this process, or a forked process.
    fn start<'s, 'e>(
        &'s self,
        s: &'s std::thread::Scope<'s, 'e>,
        c: usize,
        threads: &mut Vec<std::thread::ScopedJoinHandle<'s, Result<Done>>>,
    ) -> Result<()> {
        if self.tasks[c].thread {
            let h = std::thread::Builder::new()
                .name(self.tasks[c].name.clone())
                .spawn_scoped(s, move || self.run_task(s, c))?;
            threads.push(h);
            return Ok(());
        }
        match fork()? {
            Some(_) => Ok(()),
            None => {
                let code = match self.run_process(c) {
                    Ok(_) => 0,
                    Err(e) => {
                        eprintln!("replay task {}: {e:#}", self.tasks[c].name);
                        1
                    }
                };
                exit_now(code)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_interpolate_between_points() {
        let t: Vec<u64> = (0..21).map(|i| i * 10).collect();
        assert_eq!(quantile_at(&t, 0.0), 0);
        assert_eq!(quantile_at(&t, 1.0), 200);
        assert_eq!(quantile_at(&t, 0.5), 100);
        assert_eq!(quantile_at(&t, 0.525), 105);
        assert_eq!(quantile_at(&[], 0.5), 0);
        // The draws cover 0..1 evenly.
        let mut below_half = 0;
        for k in 0..1000 {
            let u = draw(k, 3);
            assert!((0.0..1.0).contains(&u));
            below_half += (u < 0.5) as u32;
        }
        assert!((480..=520).contains(&below_half), "{below_half}");
    }
}
