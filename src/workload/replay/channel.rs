//! How a replayed task wakes a partner: through a real pipe when the two
//! are in different processes (a wake-up between processes is mostly a
//! pipe's or a socket's: `perf bench sched pipe`, hackbench, a shell
//! pipeline), through the run's futex doorbells between threads of one
//! process (a futex's, as schbench's). A pipe write wakes its reader with
//! the kernel's synchronous wake-up (`WF_SYNC`), which a futex wake does
//! not give, and costs what the program's own pipe write costs: under one
//! CPU the choice decides whether the woken task preempts its waker, and
//! the replay's own cost of a step (`schedlab bench replay`).
//!
//! Each task woken over a pipe owns one (its read end; every process holds
//! the write end), a byte a wake-up. The channel is a function of the
//! (waker, wakee) pair, so the wake-ups a task waits for and those it is
//! given balance per channel as they do in total. A pipe holds 64 KiB:
//! more wake-ups than that pending for one task would stall its waker
//! until the task catches up.

use std::fs::File;
use std::io::{Read, Write};

use super::desc::{Body, Op, ReplayTask, Waker};
use crate::sys::futex::Doorbells;

/// The process task `i` runs in (itself, or the process of the nearest
/// ancestor that is not a thread).
pub fn process_of(tasks: &[ReplayTask], mut i: usize) -> usize {
    while tasks[i].thread {
        match tasks[i].parent {
            Some(p) => i = p,
            None => break,
        }
    }
    i
}

/// Which tasks are woken over a pipe: those a task of another process
/// wakes (by their recorded sleeps).
pub fn piped(tasks: &[ReplayTask]) -> Vec<bool> {
    (0..tasks.len())
        .map(|t| match &tasks[t].body {
            Body::Sequence(ops) => ops.iter().any(|op| {
                matches!(*op, Op::Sleep { by: Waker::Task(w), .. }
                    if w < tasks.len() && process_of(tasks, w) != process_of(tasks, t))
            }),
            Body::Distribution(_) => false,
        })
        .collect()
}

/// Whether a wake-up of `to` by `from` goes over `to`'s pipe, given the
/// process of every task ([`process_of`]) and which tasks are [`piped`].
pub fn over_pipe(process: &[usize], piped: &[bool], from: usize, to: usize) -> bool {
    piped.get(to).copied().unwrap_or(false) && process[from] != process[to]
}

/// Each task's wake-up pipe (read end, write end), if it has one.
pub type Pipes = Vec<Option<(File, File)>>;

/// The run's wake-up channels: the doorbells, and a pipe (read end, write
/// end) for each piped task.
pub struct Bells {
    doorbells: Doorbells,
    /// The process each task runs in, found once (a wake-up asks it).
    process: Vec<usize>,
    piped: Vec<bool>,
    pipes: Pipes,
}

impl Bells {
    /// The channels of `tasks`: `pipes[t]` is task `t`'s pipe when
    /// [`piped`] gives it one.
    pub fn new(tasks: &[ReplayTask], doorbells: Doorbells, pipes: Pipes) -> Bells {
        Bells {
            doorbells,
            process: (0..tasks.len()).map(|i| process_of(tasks, i)).collect(),
            piped: pipes.iter().map(Option::is_some).collect(),
            pipes,
        }
    }

    /// `to`'s pipe, when a wake-up of `to` by `from` goes over it.
    fn pipe(&self, from: usize, to: usize) -> Option<&(File, File)> {
        self.pipes[to]
            .as_ref()
            .filter(|_| over_pipe(&self.process, &self.piped, from, to))
    }

    /// `from` wakes `to`.
    pub fn post(&self, from: usize, to: usize) -> std::io::Result<()> {
        match self.pipe(from, to) {
            Some((_, w)) => (&*w).write_all(&[1]),
            None => {
                self.doorbells.post(to);
                Ok(())
            }
        }
    }

    /// `me` waits for its wake-up by `by`.
    pub fn wait(&self, me: usize, by: usize) -> std::io::Result<()> {
        match self.pipe(by, me) {
            Some((r, _)) => {
                let mut b = [0u8; 1];
                (&*r).read_exact(&mut b)
            }
            None => {
                self.doorbells.wait(me);
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(name: &str, parent: Option<usize>, thread: bool, ops: Vec<Op>) -> ReplayTask {
        ReplayTask {
            name: name.into(),
            comm: String::new(),
            parent,
            thread,
            body: Body::Sequence(ops),
        }
    }

    #[test]
    fn wake_ups_between_processes_go_over_pipes_and_between_threads_over_futexes() {
        let by = |w| Op::Sleep {
            ns: 1,
            by: Waker::Task(w),
        };
        let tasks = vec![
            // t0: woken by its thread (futex) and by its child process (pipe).
            task(
                "t0",
                None,
                false,
                vec![Op::Fork(1), Op::Fork(2), by(1), by(2)],
            ),
            task("t0.1", Some(0), true, vec![Op::Wake(0), by(3)]),
            task("t0.2", Some(0), false, vec![Op::Wake(0), Op::Fork(3)]),
            // A thread of t0.2: another process than t0.1's.
            task("t0.2.1", Some(2), true, vec![Op::Wake(1)]),
        ];
        assert_eq!(
            (0..4).map(|i| process_of(&tasks, i)).collect::<Vec<_>>(),
            [0, 0, 2, 2]
        );
        let p = piped(&tasks);
        assert_eq!(p, [true, true, false, false]);
        let process: Vec<usize> = (0..4).map(|i| process_of(&tasks, i)).collect();
        assert!(!over_pipe(&process, &p, 1, 0));
        assert!(over_pipe(&process, &p, 2, 0));
        assert!(over_pipe(&process, &p, 3, 1));
        assert!(!over_pipe(&process, &p, 0, 2));
    }
}
