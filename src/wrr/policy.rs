//! Weighted round robin as a pure policy: per-CPU run queues in round-robin
//! order and the slice each task gets per turn. No system calls; the
//! dispatcher ([`crate::wrr::dispatch`]) applies it to real processes.
//!
//! Two slice rules reproduce the kernel schedulers of seeds 002 and 003:
//! `Weighted` gives a task of weight w a slice of quantum × w per round,
//! `Classes` gives every task the slice of its class (e.g. foreground
//! 100 ms, background 10 ms).

use std::collections::{BTreeMap, HashMap, VecDeque};

use thiserror::Error;

/// One schedulable entity: a worker process, identified by `id`, with a
/// weight (≥ 1) and the CPU whose run queue it joins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Task {
    pub id: usize,
    pub weight: u32,
    pub cpu: usize,
}

/// How long a task's turn lasts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SliceRule {
    /// Slice = `quantum_ns` × weight (seed 002: quantum 10 ms, weights 1..20).
    Weighted { quantum_ns: u64 },
    /// Slice = the slice of the task's class (seed 003: foreground 100 ms,
    /// background 10 ms). `class_of[i]` indexes `slices_ns` for task `i`
    /// (tasks in the order given to [`WrrPolicy::new`]).
    Classes {
        slices_ns: Vec<(String, u64)>,
        class_of: Vec<usize>,
    },
}

/// Why a policy could not be built.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum WrrError {
    #[error("no tasks to schedule")]
    Empty,
    #[error("task {id} has weight {weight}; weights must be at least 1")]
    ZeroWeight { id: usize, weight: u32 },
    #[error("task id {id} is used twice (tasks {first} and {second})")]
    DuplicateId {
        id: usize,
        first: usize,
        second: usize,
    },
    #[error("the quantum is {quantum_ns} ns; it must be positive")]
    ZeroQuantum { quantum_ns: u64 },
    #[error("task {id}: quantum {quantum_ns} ns × weight {weight} overflows 64 bits")]
    SliceOverflow {
        id: usize,
        quantum_ns: u64,
        weight: u32,
    },
    #[error("class {class:?} has a slice of {slice_ns} ns; slices must be positive")]
    ZeroClassSlice { class: String, slice_ns: u64 },
    #[error("class_of has {got} entries for {tasks} tasks")]
    ClassCountMismatch { got: usize, tasks: usize },
    #[error("task {id} has class index {class}, but only {classes} classes are defined")]
    ClassOutOfRange {
        id: usize,
        class: usize,
        classes: usize,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Runnable,
    Blocked,
    Finished,
}

/// Weighted round robin over per-CPU run queues.
#[derive(Debug, Clone)]
pub struct WrrPolicy {
    tasks: Vec<Task>,
    /// Slice of task `i`, nanoseconds.
    slices: Vec<u64>,
    state: Vec<State>,
    index: HashMap<usize, usize>,
    /// Per CPU: runnable task indices; the front runs next.
    queues: BTreeMap<usize, VecDeque<usize>>,
}

impl WrrPolicy {
    /// All tasks start runnable, queued on their CPU in the order given.
    pub fn new(tasks: Vec<Task>, rule: SliceRule) -> Result<Self, WrrError> {
        if tasks.is_empty() {
            return Err(WrrError::Empty);
        }
        let mut index = HashMap::with_capacity(tasks.len());
        for (i, t) in tasks.iter().enumerate() {
            if t.weight == 0 {
                return Err(WrrError::ZeroWeight {
                    id: t.id,
                    weight: t.weight,
                });
            }
            if let Some(first) = index.insert(t.id, i) {
                return Err(WrrError::DuplicateId {
                    id: t.id,
                    first,
                    second: i,
                });
            }
        }
        let slices = match &rule {
            SliceRule::Weighted { quantum_ns } => {
                if *quantum_ns == 0 {
                    return Err(WrrError::ZeroQuantum { quantum_ns: 0 });
                }
                tasks
                    .iter()
                    .map(|t| {
                        quantum_ns
                            .checked_mul(u64::from(t.weight))
                            .ok_or(WrrError::SliceOverflow {
                                id: t.id,
                                quantum_ns: *quantum_ns,
                                weight: t.weight,
                            })
                    })
                    .collect::<Result<Vec<u64>, WrrError>>()?
            }
            SliceRule::Classes {
                slices_ns,
                class_of,
            } => {
                if let Some((class, slice_ns)) = slices_ns.iter().find(|(_, s)| *s == 0) {
                    return Err(WrrError::ZeroClassSlice {
                        class: class.clone(),
                        slice_ns: *slice_ns,
                    });
                }
                if class_of.len() != tasks.len() {
                    return Err(WrrError::ClassCountMismatch {
                        got: class_of.len(),
                        tasks: tasks.len(),
                    });
                }
                tasks
                    .iter()
                    .zip(class_of)
                    .map(|(t, &class)| {
                        slices_ns
                            .get(class)
                            .map(|(_, s)| *s)
                            .ok_or(WrrError::ClassOutOfRange {
                                id: t.id,
                                class,
                                classes: slices_ns.len(),
                            })
                    })
                    .collect::<Result<Vec<u64>, WrrError>>()?
            }
        };
        let mut queues: BTreeMap<usize, VecDeque<usize>> = BTreeMap::new();
        for (i, t) in tasks.iter().enumerate() {
            queues.entry(t.cpu).or_default().push_back(i);
        }
        Ok(WrrPolicy {
            state: vec![State::Runnable; tasks.len()],
            tasks,
            slices,
            index,
            queues,
        })
    }

    /// The next task to run on `cpu` and its slice in nanoseconds; the task
    /// moves to the tail of the queue. None when no task of that CPU is
    /// runnable (all blocked or finished, or none was ever placed there).
    pub fn next(&mut self, cpu: usize) -> Option<(usize, u64)> {
        let queue = self.queues.get_mut(&cpu)?;
        let i = queue.pop_front()?;
        queue.push_back(i);
        Some((self.tasks[i].id, self.slices[i]))
    }

    /// Take a runnable task out of its queue until [`wake`](Self::wake).
    /// Unknown, blocked or finished tasks are left as they are.
    pub fn block(&mut self, id: usize) {
        if let Some(i) = self.index_of(id)
            && self.state[i] == State::Runnable
        {
            self.state[i] = State::Blocked;
            self.dequeue(i);
        }
    }

    /// A blocked task rejoins its queue at the tail. Runnable, finished or
    /// unknown tasks are left as they are.
    pub fn wake(&mut self, id: usize) {
        if let Some(i) = self.index_of(id)
            && self.state[i] == State::Blocked
        {
            self.state[i] = State::Runnable;
            self.queues
                .entry(self.tasks[i].cpu)
                .or_default()
                .push_back(i);
        }
    }

    /// The task leaves for good (it exited). Idempotent.
    pub fn finish(&mut self, id: usize) {
        if let Some(i) = self.index_of(id)
            && self.state[i] != State::Finished
        {
            if self.state[i] == State::Runnable {
                self.dequeue(i);
            }
            self.state[i] = State::Finished;
        }
    }

    /// The slice of task `id` in nanoseconds.
    pub fn slice_of(&self, id: usize) -> Option<u64> {
        self.index_of(id).map(|i| self.slices[i])
    }

    /// Position of task `id` in the task list given to [`new`](Self::new).
    pub fn index_of(&self, id: usize) -> Option<usize> {
        self.index.get(&id).copied()
    }

    /// The tasks, in the order given to [`new`](Self::new).
    pub fn tasks(&self) -> &[Task] {
        &self.tasks
    }

    /// The CPUs that have (or had) tasks, ascending.
    pub fn cpus(&self) -> Vec<usize> {
        self.queues.keys().copied().collect()
    }

    pub fn is_runnable(&self, id: usize) -> bool {
        self.index_of(id)
            .is_some_and(|i| self.state[i] == State::Runnable)
    }

    pub fn is_finished(&self, id: usize) -> bool {
        self.index_of(id)
            .is_some_and(|i| self.state[i] == State::Finished)
    }

    /// Tasks of `cpu` that are not finished (runnable or blocked).
    pub fn live_on(&self, cpu: usize) -> usize {
        self.tasks
            .iter()
            .zip(&self.state)
            .filter(|(t, s)| t.cpu == cpu && **s != State::Finished)
            .count()
    }

    /// The share of its CPU each task should get when every task of that
    /// CPU stays runnable: its slice over the sum of the slices on that CPU,
    /// in task order. With the `Weighted` rule this is
    /// [`ideal_shares`] of the weights, per CPU.
    pub fn ideal_shares(&self) -> Vec<f64> {
        let mut per_cpu: BTreeMap<usize, u64> = BTreeMap::new();
        for (t, s) in self.tasks.iter().zip(&self.slices) {
            *per_cpu.entry(t.cpu).or_default() += s;
        }
        self.tasks
            .iter()
            .zip(&self.slices)
            .map(|(t, &s)| s as f64 / per_cpu[&t.cpu] as f64)
            .collect()
    }

    fn dequeue(&mut self, i: usize) {
        if let Some(q) = self.queues.get_mut(&self.tasks[i].cpu) {
            q.retain(|&j| j != i);
        }
    }
}

/// The share of the CPU each weight promises when all tasks share one CPU
/// and stay runnable: w_i / Σ w. Empty in, empty out; all-zero weights give
/// zeros.
pub fn ideal_shares(weights: &[u32]) -> Vec<f64> {
    let total: u64 = weights.iter().map(|&w| u64::from(w)).sum();
    weights
        .iter()
        .map(|&w| {
            if total == 0 {
                0.0
            } else {
                f64::from(w) / total as f64
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn tasks(weights: &[u32], cpu: usize) -> Vec<Task> {
        weights
            .iter()
            .enumerate()
            .map(|(id, &weight)| Task { id, weight, cpu })
            .collect()
    }

    fn weighted(weights: &[u32]) -> WrrPolicy {
        WrrPolicy::new(
            tasks(weights, 0),
            SliceRule::Weighted {
                quantum_ns: 10 * MS,
            },
        )
        .unwrap()
    }

    fn take(p: &mut WrrPolicy, cpu: usize, n: usize) -> Vec<(usize, u64)> {
        (0..n).map_while(|_| p.next(cpu)).collect()
    }

    #[test]
    fn weighted_order_and_slices() {
        let mut p = weighted(&[1, 4, 8]);
        assert_eq!(
            take(&mut p, 0, 7),
            vec![
                (0, 10 * MS),
                (1, 40 * MS),
                (2, 80 * MS),
                (0, 10 * MS),
                (1, 40 * MS),
                (2, 80 * MS),
                (0, 10 * MS),
            ]
        );
        assert_eq!(p.slice_of(2), Some(80 * MS));
        assert_eq!(p.slice_of(9), None);
        // Over whole rounds CPU time follows the weights exactly.
        let mut per_task = [0u64; 3];
        for (id, s) in take(&mut p, 0, 300) {
            per_task[id] += s;
        }
        let total: u64 = per_task.iter().sum();
        let shares: Vec<f64> = per_task.iter().map(|&c| c as f64 / total as f64).collect();
        assert_eq!(shares, ideal_shares(&[1, 4, 8]));
    }

    #[test]
    fn cpus_are_independent() {
        let ts = vec![
            Task {
                id: 10,
                weight: 1,
                cpu: 0,
            },
            Task {
                id: 11,
                weight: 2,
                cpu: 1,
            },
            Task {
                id: 12,
                weight: 3,
                cpu: 0,
            },
            Task {
                id: 13,
                weight: 1,
                cpu: 1,
            },
        ];
        let mut p = WrrPolicy::new(ts, SliceRule::Weighted { quantum_ns: MS }).unwrap();
        assert_eq!(p.cpus(), vec![0, 1]);
        assert_eq!(p.next(0), Some((10, MS)));
        assert_eq!(p.next(1), Some((11, 2 * MS)));
        assert_eq!(p.next(1), Some((13, MS)));
        assert_eq!(p.next(0), Some((12, 3 * MS)));
        assert_eq!(p.next(1), Some((11, 2 * MS)));
        // Finishing a task on CPU 1 does not disturb CPU 0's order.
        p.finish(13);
        assert_eq!(take(&mut p, 1, 3), vec![(11, 2 * MS); 3]);
        assert_eq!(take(&mut p, 0, 2), vec![(10, MS), (12, 3 * MS)]);
        assert_eq!(p.next(2), None, "no tasks were placed on CPU 2");
        assert_eq!(p.live_on(1), 1);
        assert_eq!(p.ideal_shares(), vec![0.25, 2.0 / 3.0, 0.75, 1.0 / 3.0]);
    }

    #[test]
    fn finished_tasks_leave() {
        let mut p = weighted(&[1, 2, 3]);
        assert_eq!(p.next(0), Some((0, 10 * MS)));
        p.finish(1);
        p.finish(1); // idempotent
        assert!(p.is_finished(1));
        assert_eq!(
            take(&mut p, 0, 4),
            vec![(2, 30 * MS), (0, 10 * MS), (2, 30 * MS), (0, 10 * MS)]
        );
        p.wake(1); // finished tasks never come back
        p.finish(0);
        p.finish(2);
        assert_eq!(p.next(0), None);
        assert_eq!(p.live_on(0), 0);
    }

    #[test]
    fn blocked_tasks_are_skipped_and_rejoin_at_the_tail() {
        let mut p = weighted(&[1, 1, 1]);
        assert_eq!(p.next(0).unwrap().0, 0);
        p.block(1);
        assert!(!p.is_runnable(1));
        assert_eq!(p.next(0).unwrap().0, 2);
        assert_eq!(p.next(0).unwrap().0, 0);
        p.wake(1);
        // Queue was [2, 0]; 1 joins at the tail.
        assert_eq!(
            take(&mut p, 0, 4).iter().map(|x| x.0).collect::<Vec<_>>(),
            vec![2, 0, 1, 2]
        );
        p.wake(1); // already runnable: no duplicate entry
        assert_eq!(
            take(&mut p, 0, 3).iter().map(|x| x.0).collect::<Vec<_>>(),
            vec![0, 1, 2]
        );
        // All blocked: nothing to run; a blocked task can still finish.
        for id in 0..3 {
            p.block(id);
        }
        assert_eq!(p.next(0), None);
        assert_eq!(p.live_on(0), 3);
        p.finish(0);
        p.wake(0);
        assert_eq!(p.live_on(0), 2);
        assert_eq!(p.next(0), None);
        p.wake(2);
        assert_eq!(p.next(0), Some((2, 10 * MS)));
    }

    #[test]
    fn classes_give_100_and_10_ms() {
        let rule = SliceRule::Classes {
            slices_ns: vec![
                ("foreground".to_string(), 100 * MS),
                ("background".to_string(), 10 * MS),
            ],
            class_of: vec![0, 1, 1],
        };
        let mut p = WrrPolicy::new(tasks(&[1, 1, 5], 0), rule).unwrap();
        assert_eq!(
            take(&mut p, 0, 4),
            vec![(0, 100 * MS), (1, 10 * MS), (2, 10 * MS), (0, 100 * MS)]
        );
        // Weights do not matter under classes.
        assert_eq!(p.slice_of(2), Some(10 * MS));
        let shares = p.ideal_shares();
        assert!((shares[0] - 100.0 / 120.0).abs() < 1e-12);
        assert!((shares[1] - 10.0 / 120.0).abs() < 1e-12);
    }

    #[test]
    fn invalid_input_is_an_error() {
        let q = SliceRule::Weighted { quantum_ns: MS };
        assert_eq!(
            WrrPolicy::new(vec![], q.clone()).unwrap_err(),
            WrrError::Empty
        );

        let err = WrrPolicy::new(tasks(&[1, 0, 3], 0), q.clone()).unwrap_err();
        assert_eq!(err, WrrError::ZeroWeight { id: 1, weight: 0 });
        assert_eq!(
            err.to_string(),
            "task 1 has weight 0; weights must be at least 1"
        );

        let mut dup = tasks(&[1, 1], 0);
        dup[1].id = 0;
        assert!(matches!(
            WrrPolicy::new(dup, q.clone()),
            Err(WrrError::DuplicateId { id: 0, .. })
        ));

        assert!(matches!(
            WrrPolicy::new(tasks(&[1], 0), SliceRule::Weighted { quantum_ns: 0 }),
            Err(WrrError::ZeroQuantum { .. })
        ));
        assert!(matches!(
            WrrPolicy::new(
                tasks(&[2], 0),
                SliceRule::Weighted {
                    quantum_ns: u64::MAX
                }
            ),
            Err(WrrError::SliceOverflow {
                id: 0,
                weight: 2,
                ..
            })
        ));

        let classes = |class_of: Vec<usize>| SliceRule::Classes {
            slices_ns: vec![("fg".to_string(), 100 * MS), ("bg".to_string(), 10 * MS)],
            class_of,
        };
        let err = WrrPolicy::new(tasks(&[1, 1], 0), classes(vec![0, 2])).unwrap_err();
        assert_eq!(
            err,
            WrrError::ClassOutOfRange {
                id: 1,
                class: 2,
                classes: 2
            }
        );
        assert!(
            err.to_string().contains("task 1 has class index 2"),
            "{err}"
        );
        assert!(matches!(
            WrrPolicy::new(tasks(&[1, 1], 0), classes(vec![0])),
            Err(WrrError::ClassCountMismatch { got: 1, tasks: 2 })
        ));
        let zero = SliceRule::Classes {
            slices_ns: vec![("fg".to_string(), 0)],
            class_of: vec![0],
        };
        assert!(
            WrrPolicy::new(tasks(&[1], 0), zero)
                .unwrap_err()
                .to_string()
                .contains("\"fg\"")
        );
    }

    #[test]
    fn ideal_shares_normalise_weights() {
        assert_eq!(ideal_shares(&[1, 3]), vec![0.25, 0.75]);
        let s = ideal_shares(&[1, 2, 4]);
        assert!((s.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        assert!((s[2] - 4.0 / 7.0).abs() < 1e-12);
        assert!(ideal_shares(&[]).is_empty());
        assert_eq!(ideal_shares(&[0, 0]), vec![0.0, 0.0]);
    }
}
