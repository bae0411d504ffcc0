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
//! Wake-ups are matched pair by pair, in order: a task's wait for T ends
//! with T's next wake-up of it, not another partner's (which would let the
//! task run ahead of T). Each task woken over a pipe owns one (its read
//! end; every process holds the write end), and each wake-up writes the
//! waker's index (4 bytes, one atomic pipe write); a reader that finds
//! another partner's wake-up keeps it for its own later wait for that
//! partner ([`Pending`]). Between threads, each (waker, wakee) pair has a
//! doorbell of its own ([`futex_pairs`]). A pipe holds 64 KiB: more than
//! 16,384 wake-ups pending for one task would stall its waker until the
//! task catches up.

use std::collections::{BTreeSet, HashMap};
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

/// The (waker, wakee) pairs whose wake-ups go over the futex doorbells,
/// in order: doorbell `k` is pair `k`'s.
pub fn futex_pairs(tasks: &[ReplayTask]) -> Vec<(usize, usize)> {
    let process: Vec<usize> = (0..tasks.len()).map(|i| process_of(tasks, i)).collect();
    let piped = piped(tasks);
    let mut pairs = BTreeSet::new();
    for (t, task) in tasks.iter().enumerate() {
        if let Body::Sequence(ops) = &task.body {
            for op in ops {
                if let Op::Sleep {
                    by: Waker::Task(w), ..
                } = *op
                    && w < tasks.len()
                    && !over_pipe(&process, &piped, w, t)
                {
                    pairs.insert((w, t));
                }
            }
        }
    }
    pairs.into_iter().collect()
}

/// Each task's wake-up pipe (read end, write end), if it has one.
pub type Pipes = Vec<Option<(File, File)>>;

/// Wake-ups a task read from its pipe before it waited for them: waker →
/// how many (one per task, kept by the task itself).
pub type Pending = HashMap<usize, u32>;

/// The run's wake-up channels: the doorbells, and a pipe (read end, write
/// end) for each piped task.
pub struct Bells {
    doorbells: Doorbells,
    /// (waker, wakee) → its doorbell ([`futex_pairs`]).
    bell: HashMap<(usize, usize), usize>,
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
            bell: futex_pairs(tasks)
                .into_iter()
                .enumerate()
                .map(|(k, p)| (p, k))
                .collect(),
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

    /// The doorbell of wake-ups of `to` by `from`.
    fn doorbell(&self, from: usize, to: usize) -> std::io::Result<usize> {
        self.bell.get(&(from, to)).copied().ok_or_else(|| {
            std::io::Error::other(format!(
                "task {from} wakes task {to}, which never waits for it"
            ))
        })
    }

    /// `from` wakes `to`.
    pub fn post(&self, from: usize, to: usize) -> std::io::Result<()> {
        match self.pipe(from, to) {
            Some((_, w)) => (&*w).write_all(&(from as u32).to_le_bytes()),
            None => {
                self.doorbells.post(self.doorbell(from, to)?);
                Ok(())
            }
        }
    }

    /// `me` waits for its next wake-up by `by` (`pending`: `me`'s own
    /// wake-ups by others read before they were waited for).
    pub fn wait(&self, me: usize, by: usize, pending: &mut Pending) -> std::io::Result<()> {
        match self.pipe(by, me) {
            Some((r, _)) => {
                if let Some(n) = pending.get_mut(&by).filter(|n| **n > 0) {
                    *n -= 1;
                    return Ok(());
                }
                loop {
                    let mut b = [0u8; 4];
                    (&*r).read_exact(&mut b)?;
                    match u32::from_le_bytes(b) as usize {
                        w if w == by => return Ok(()),
                        w => *pending.entry(w).or_default() += 1,
                    }
                }
            }
            None => {
                self.doorbells.wait(self.doorbell(by, me)?);
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

    #[test]
    fn a_wait_for_one_partner_is_not_ended_by_another() {
        use std::os::fd::AsFd;
        let by = |w| Op::Sleep {
            ns: 1,
            by: Waker::Task(w),
        };
        // t0 waits for t0.1 then t0.2 (processes: over its pipe); its
        // thread t0.3 and t0 wake each other twice (futex doorbells).
        let tasks = vec![
            task(
                "t0",
                None,
                false,
                vec![
                    Op::Fork(1),
                    Op::Fork(2),
                    Op::Fork(3),
                    by(1),
                    by(2),
                    Op::Wake(3),
                    by(3),
                ],
            ),
            task("t0.1", Some(0), false, vec![Op::Wake(0)]),
            task("t0.2", Some(0), false, vec![Op::Wake(0)]),
            task("t0.3", Some(0), true, vec![by(0), Op::Wake(0)]),
        ];
        assert_eq!(futex_pairs(&tasks), [(0, 3), (3, 0)]);
        let mem = File::from(crate::sys::fds::memfd(c"bells").unwrap());
        mem.set_len(crate::sys::futex::doorbell_bytes(2) as u64)
            .unwrap();
        let doorbells = Doorbells::map(mem.as_fd(), 2).unwrap();
        let (r, w) = crate::sys::proc::pipe().unwrap();
        let bells = Bells::new(
            &tasks,
            doorbells,
            vec![Some((File::from(r), File::from(w))), None, None, None],
        );
        // t0.2's wake-up comes first: t0's wait for t0.1 keeps it, and
        // ends with t0.1's; the wait for t0.2 then takes the kept one
        // without reading (the pipe is empty: a read would block).
        bells.post(2, 0).unwrap();
        bells.post(1, 0).unwrap();
        let mut pending = Pending::new();
        bells.wait(0, 1, &mut pending).unwrap();
        assert_eq!(pending.get(&2), Some(&1));
        bells.wait(0, 2, &mut pending).unwrap();
        assert_eq!(pending.get(&2), Some(&0));
        // Each pair of threads its own doorbell.
        bells.post(0, 3).unwrap();
        bells.wait(3, 0, &mut Pending::new()).unwrap();
        bells.post(3, 0).unwrap();
        bells.wait(0, 3, &mut pending).unwrap();
        assert!(bells.post(1, 3).is_err());
    }
}
