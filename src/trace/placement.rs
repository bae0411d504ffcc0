//! The placement fields of a traced (or simulated) run's processes, read
//! from the trace: the CPUs each process's tasks ran on, and its
//! migrations (`sched_migrate_task`, which the kernel fires in
//! `set_task_cpu` exactly where it counts `se.nr_migrations`) between CPUs
//! of different last-level caches and NUMA nodes, by the CPU topology of
//! the run's environment ([`CpuTopology`]). Each inside the process's own
//! work window when known (that of its schedstat and rusage figures), else
//! over the whole trace. A program's tree is counted under its top process
//! ([`summary::process_of`]).

use std::collections::BTreeSet;

use foldhash::HashMap;

use super::Analysed;
use super::summary;
use crate::fields::{Field, ProcessFields};
use crate::record::RunRecord;
use crate::sys::topology::CpuTopology;

/// What the trace says of one process's placement.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Placement {
    /// The CPUs its tasks held inside the window.
    pub cpus: BTreeSet<u32>,
    /// Its tasks' migrations inside the window.
    pub migrations: u64,
    /// Those between CPUs of different LLCs / nodes; None without a
    /// topology that places both CPUs.
    pub llc_migrations: Option<u64>,
    pub node_migrations: Option<u64>,
}

impl Placement {
    /// As the registry's fields.
    pub fn fill(&self, into: &mut ProcessFields, with_topology: bool) {
        into.set(Field::CpusUsed, Some(self.cpus.len() as u64));
        if with_topology {
            into.set(Field::LlcMigrations, self.llc_migrations);
            into.set(Field::NodeMigrations, self.node_migrations);
        }
    }
}

/// The placement of process `tgid` inside `from_ns..to_ns` (the trace's
/// clock).
pub fn of_process(
    a: &Analysed<'_>,
    of: &HashMap<i32, i32>,
    tgid: i32,
    (from_ns, to_ns): (u64, u64),
    topology: Option<&CpuTopology>,
) -> Placement {
    let mine = |pid: i32| of.get(&pid).copied().unwrap_or(pid) == tgid;
    let cpus = a
        .derived
        .slices
        .iter()
        .filter(|s| mine(s.pid) && s.end_ns > from_ns && s.start_ns < to_ns)
        .map(|s| s.cpu)
        .collect();
    let moves: Vec<(u32, u32)> = a
        .derived
        .migrations
        .iter()
        .filter(|m| mine(m.pid) && m.ts_ns >= from_ns && m.ts_ns < to_ns)
        .map(|m| (m.orig_cpu, m.dest_cpu))
        .collect();
    let across = |key: fn(&crate::sys::topology::CpuPlace) -> u32| -> Option<u64> {
        let t = topology?;
        moves.iter().try_fold(0, |n, &(a, b)| {
            Some(n + u64::from(key(t.place(a)?) != key(t.place(b)?)))
        })
    };
    Placement {
        cpus,
        migrations: moves.len() as u64,
        llc_migrations: across(|p| p.llc),
        node_migrations: across(|p| p.node),
    }
}

/// Fill the placement fields of `rec`'s processes from its trace `a`.
/// The LLC and node fields need the run's CPU topology, and are left
/// empty for the model's prediction (its CPUs are the model's, not the
/// recorded machine's).
pub fn fill(rec: &mut RunRecord, a: &Analysed<'_>) {
    let of = summary::process_of(a.capture);
    let topology = rec.env.topology.clone();
    let topology = topology.as_ref().filter(|_| !a.predicted);
    let whole = (a.capture.start_ns, a.capture.end_ns.max(a.capture.start_ns));
    for p in &mut rec.processes {
        let window = match (a.capture.release_ns, p.start_ns, p.end_ns) {
            (Some(r), Some(s), Some(e)) => (r + s, r + e),
            _ => whole,
        };
        let placement = of_process(a, &of, p.pid, window, topology);
        placement.fill(&mut p.kernel, topology.is_some());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::topology::CpuPlace;
    use crate::trace::derive::tests::*;

    /// Four CPUs: 0-1 one LLC on node 0, 2-3 another on node 1.
    fn two_by_two() -> CpuTopology {
        CpuTopology::from_places(
            (0..4)
                .map(|cpu| CpuPlace {
                    cpu,
                    package: i64::from(cpu / 2),
                    core: i64::from(cpu % 2),
                    llc: cpu / 2 * 2,
                    node: cpu / 2,
                })
                .collect(),
        )
    }

    #[test]
    fn cpus_and_migrations_across_llc_and_node_inside_the_window() {
        // Task 10 runs on 0, moves to 1 (same LLC), then to 2 (another LLC
        // and node), then back to 0 after the window closed.
        let mut cap = capture(
            0,
            1_000,
            &[10],
            vec![
                sw(100, 0, 0, YIELDED, 10),
                sw(140, 0, 10, PREEMPTED, 0),
                migrate(150, 1, 10, 0, 1),
                sw(160, 1, 0, YIELDED, 10),
                sw(290, 1, 10, PREEMPTED, 0),
                migrate(300, 2, 10, 1, 2),
                sw(310, 2, 0, YIELDED, 10),
                sw(890, 2, 10, PREEMPTED, 0),
                migrate(900, 0, 10, 2, 0),
                sw(910, 0, 0, YIELDED, 10),
            ],
        );
        cap.cpus = vec![0, 1, 2, 3];
        let a = Analysed::new(&cap, &[]);
        let of = summary::process_of(&cap);
        let t = two_by_two();
        let p = of_process(&a, &of, 10, (0, 800), Some(&t));
        assert_eq!(p.cpus, BTreeSet::from([0, 1, 2]));
        assert_eq!(p.migrations, 2);
        assert_eq!(p.llc_migrations, Some(1));
        assert_eq!(p.node_migrations, Some(1));
        let all = of_process(&a, &of, 10, (0, 1_000), Some(&t));
        assert_eq!((all.migrations, all.llc_migrations), (3, Some(2)));
        // Without a topology: CPUs, but no LLC or node figure.
        let none = of_process(&a, &of, 10, (0, 800), None);
        assert_eq!((none.cpus.len(), none.llc_migrations), (3, None));
        let mut f = ProcessFields::default();
        p.fill(&mut f, true);
        assert_eq!(f.get(Field::CpusUsed), Some(3));
        assert_eq!(f.get(Field::LlcMigrations), Some(1));
        assert_eq!(f.get(Field::NodeMigrations), Some(1));
    }

    #[test]
    fn a_task_pinned_to_one_cpu_used_one() {
        let cap = capture(
            0,
            1_000,
            &[10],
            vec![
                sw(100, 1, 0, YIELDED, 10),
                sw(200, 1, 10, SLEEPING, 0),
                sw(300, 1, 0, YIELDED, 10),
            ],
        );
        let a = Analysed::new(&cap, &[]);
        let p = of_process(
            &a,
            &summary::process_of(&cap),
            10,
            (0, 1_000),
            Some(&two_by_two()),
        );
        assert_eq!(p.cpus, BTreeSet::from([1]));
        assert_eq!(
            (p.migrations, p.llc_migrations, p.node_migrations),
            (0, Some(0), Some(0))
        );
    }
}
