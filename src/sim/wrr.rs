//! schedlab's weighted round robin in the model, driven by the same pure
//! policy the dispatchers use ([`crate::wrr::policy::WrrPolicy`]): per
//! CPU, the policy names the next task and its slice (quantum × weight);
//! the task keeps its turn until it has received that much CPU time (as
//! the dispatchers count slices in CPU time received, so RT throttling
//! or the fair server stretch a turn rather than shorten it), blocks or
//! exits. Every turn becomes a `slices` row.
//!
//! The model's WRR ranks as the FIFO mechanism puts it: above the fair
//! class, below real RT tasks, its CPU time counted as RT time (it is
//! throttled with them). The dispatcher's own CPU and lateness are not
//! modelled.

use std::collections::BTreeMap;

use crate::record::SliceRow;
use crate::wrr::policy::{SliceRule, Task, WrrError, WrrPolicy};

/// The turn running on a CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Turn {
    task: usize,
    slice_ns: u64,
    start_ns: u64,
    used_ns: u64,
}

/// The WRR state of a run.
#[derive(Debug, Clone)]
pub struct WrrSim {
    policy: WrrPolicy,
    /// Engine task index of each policy task id (the ids are the tasks'
    /// indices in the run, so this maps id → engine index).
    engine_of: BTreeMap<usize, usize>,
    turns: BTreeMap<usize, Turn>,
    pub rows: Vec<SliceRow>,
}

impl WrrSim {
    /// `tasks`: (engine index, weight, CPU) in run order; the policy's
    /// task ids are the positions in this list, as the launcher numbers
    /// its workers.
    pub fn new(tasks: &[(usize, u32, usize)], quantum_ns: u64) -> Result<WrrSim, WrrError> {
        let policy_tasks = tasks
            .iter()
            .enumerate()
            .map(|(id, &(_, weight, cpu))| Task { id, weight, cpu })
            .collect();
        let policy = WrrPolicy::new(policy_tasks, SliceRule::Weighted { quantum_ns })?;
        Ok(WrrSim {
            policy,
            engine_of: tasks
                .iter()
                .enumerate()
                .map(|(id, &(e, _, _))| (id, e))
                .collect(),
            turns: BTreeMap::new(),
            rows: Vec::new(),
        })
    }

    fn id_of(&self, engine: usize) -> Option<usize> {
        self.engine_of
            .iter()
            .find(|&(_, &e)| e == engine)
            .map(|(&id, _)| id)
    }

    /// The task to run on `cpu`: the current turn's, or the policy's next.
    pub fn pick(&mut self, cpu: usize, now: u64) -> Option<usize> {
        if let Some(t) = self.turns.get(&cpu) {
            return Some(t.task);
        }
        let (id, slice_ns) = self.policy.next(cpu)?;
        let task = self.engine_of[&id];
        self.turns.insert(
            cpu,
            Turn {
                task,
                slice_ns,
                start_ns: now,
                used_ns: 0,
            },
        );
        Some(task)
    }

    /// Whether `cpu` has a turn going or a runnable task waiting.
    pub fn has_work(&self, cpu: usize) -> bool {
        self.turns.contains_key(&cpu)
            || self
                .policy
                .tasks()
                .iter()
                .any(|t| t.cpu == cpu && self.policy.is_runnable(t.id))
    }

    /// The current turn's task ran `ns` on `cpu`. True: its slice is used.
    pub fn charge(&mut self, cpu: usize, ns: u64) -> bool {
        match self.turns.get_mut(&cpu) {
            Some(t) => {
                t.used_ns += ns;
                t.used_ns >= t.slice_ns
            }
            None => false,
        }
    }

    /// CPU time left in the turn on `cpu`.
    pub fn left_ns(&self, cpu: usize) -> Option<u64> {
        self.turns
            .get(&cpu)
            .map(|t| t.slice_ns.saturating_sub(t.used_ns))
    }

    /// End the turn on `cpu` at `now` (slice used, blocked or exited).
    pub fn end_turn(&mut self, cpu: usize, now: u64, release_ns: u64) {
        if let Some(t) = self.turns.remove(&cpu) {
            // A turn in which nothing ran (its task exited or blocked as
            // it was picked) is no slice.
            if t.used_ns == 0 && now == t.start_ns {
                return;
            }
            let since = |x: u64| x.saturating_sub(release_ns);
            self.rows.push(SliceRow {
                process_index: self.id_of(t.task).unwrap_or(0) as u32,
                cpu: cpu as u32,
                planned_start_ns: since(t.start_ns),
                planned_end_ns: since(t.start_ns + t.slice_ns),
                actual_end_ns: since(now),
                cpu_ns: t.used_ns,
            });
        }
    }

    /// The turn's task on `cpu`, if any.
    pub fn turn_task(&self, cpu: usize) -> Option<usize> {
        self.turns.get(&cpu).map(|t| t.task)
    }

    pub fn block(&mut self, engine: usize) {
        if let Some(id) = self.id_of(engine) {
            self.policy.block(id);
        }
    }

    pub fn wake(&mut self, engine: usize) {
        if let Some(id) = self.id_of(engine) {
            self.policy.wake(id);
        }
    }

    pub fn finish(&mut self, engine: usize) {
        if let Some(id) = self.id_of(engine) {
            self.policy.finish(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Weights 1 and 3 on CPU 0 at 10 ms: turns of 10 and 30 ms in order,
    /// each a row when it ends.
    #[test]
    fn turns_follow_the_policy() {
        let mut w = WrrSim::new(&[(5, 1, 0), (6, 3, 0)], 10_000_000).unwrap();
        assert_eq!(w.pick(0, 0), Some(5));
        assert_eq!(w.left_ns(0), Some(10_000_000));
        assert!(w.charge(0, 10_000_000));
        w.end_turn(0, 10_000_000, 0);
        assert_eq!(w.pick(0, 10_000_000), Some(6));
        assert_eq!(w.left_ns(0), Some(30_000_000));
        assert_eq!(w.rows.len(), 1);
        assert_eq!(w.rows[0].process_index, 0);
        assert_eq!(w.rows[0].cpu_ns, 10_000_000);
        w.block(6);
        w.end_turn(0, 12_000_000, 0);
        assert_eq!(w.pick(0, 12_000_000), Some(5));
        assert!(w.pick(1, 0).is_none());
    }
}
