//! CPU time per WRR task over whole rounds only: the window in which every
//! task of a run queue has had its turn, so that shares can be compared
//! with the weights without the bias of a round cut short. Used by the
//! report's weights section and by `schedlab bench wrr`.

use crate::record::SliceRow;

/// CPU time per task over the slices of whole rounds (every task had its
/// turn), and the number of such rounds. `slices` are those of one run
/// queue, in the order they were handed out; `tasks` is the number of task
/// indices (0..tasks) that share it. None without a whole round.
pub fn whole_round_cpu(slices: &[SliceRow], tasks: usize) -> Option<(Vec<f64>, usize)> {
    let mut cpu = vec![0.0; tasks];
    let mut pending = vec![0.0; tasks];
    let mut seen = vec![false; tasks];
    let mut rounds = 0;
    for s in slices {
        let i = s.process_index as usize;
        if i >= tasks {
            continue;
        }
        // A slice cut short (the workers stopping at the end of the run)
        // ends the whole rounds.
        if (s.cpu_ns as f64) < 0.5 * s.planned_end_ns.saturating_sub(s.planned_start_ns) as f64 {
            break;
        }
        pending[i] += s.cpu_ns as f64;
        seen[i] = true;
        if seen.iter().all(|&x| x) {
            for (c, p) in cpu.iter_mut().zip(pending.iter_mut()) {
                *c += *p;
                *p = 0.0;
            }
            seen.iter_mut().for_each(|x| *x = false);
            rounds += 1;
        }
    }
    (rounds > 0).then_some((cpu, rounds))
}

/// Whole rounds of one CPU's run queue: its tasks (process indices, in
/// ascending order), their CPU time over the whole rounds, and the number
/// of rounds.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuRounds {
    pub cpu: u32,
    pub tasks: Vec<u32>,
    pub cpu_ns: Vec<f64>,
    pub rounds: usize,
}

/// [`whole_round_cpu`] for each CPU's run queue of a run whose tasks were
/// spread over several CPUs (a task belongs to the CPU of its slices).
/// CPUs without a whole round are left out.
pub fn whole_round_cpu_by_cpu(slices: &[SliceRow]) -> Vec<CpuRounds> {
    let mut cpus: Vec<u32> = slices.iter().map(|s| s.cpu).collect();
    cpus.sort_unstable();
    cpus.dedup();
    cpus.into_iter()
        .filter_map(|cpu| {
            let mine: Vec<&SliceRow> = slices.iter().filter(|s| s.cpu == cpu).collect();
            let mut tasks: Vec<u32> = mine.iter().map(|s| s.process_index).collect();
            tasks.sort_unstable();
            tasks.dedup();
            let local: Vec<SliceRow> = mine
                .iter()
                .map(|s| SliceRow {
                    process_index: tasks.binary_search(&s.process_index).unwrap_or(0) as u32,
                    ..(*s).clone()
                })
                .collect();
            whole_round_cpu(&local, tasks.len()).map(|(cpu_ns, rounds)| CpuRounds {
                cpu,
                tasks,
                cpu_ns,
                rounds,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice(task: u32, cpu_ns: u64) -> SliceRow {
        SliceRow {
            process_index: task,
            cpu: 0,
            planned_start_ns: 0,
            planned_end_ns: cpu_ns,
            actual_end_ns: 0,
            cpu_ns,
        }
    }

    #[test]
    fn only_whole_rounds_count() {
        let s = [
            slice(0, 10),
            slice(1, 20),
            slice(0, 10),
            slice(1, 20),
            slice(0, 99),
        ];
        let (cpu, rounds) = whole_round_cpu(&s, 2).unwrap();
        assert_eq!(rounds, 2);
        assert_eq!(cpu, vec![20.0, 40.0]);
        // A truncated slice closes the count even if it completes a round.
        let mut cut = s[..3].to_vec();
        cut.push(SliceRow {
            cpu_ns: 1,
            planned_end_ns: 20,
            ..slice(1, 20)
        });
        assert_eq!(whole_round_cpu(&cut, 2).unwrap().1, 1);
        assert!(whole_round_cpu(&s[..1], 2).is_none());
    }

    #[test]
    fn each_cpu_has_its_own_rounds() {
        let on = |cpu: u32, task: u32, ns: u64| SliceRow {
            cpu,
            ..slice(task, ns)
        };
        // CPU 0 runs tasks 0 and 2, CPU 1 runs task 1 and 3.
        let s = [
            on(0, 0, 10),
            on(1, 1, 30),
            on(0, 2, 20),
            on(1, 3, 10),
            on(0, 0, 10),
            on(0, 2, 20),
            on(1, 1, 30),
        ];
        let r = whole_round_cpu_by_cpu(&s);
        assert_eq!(r.len(), 2);
        assert_eq!(
            r[0],
            CpuRounds {
                cpu: 0,
                tasks: vec![0, 2],
                cpu_ns: vec![20.0, 40.0],
                rounds: 2
            }
        );
        assert_eq!((r[1].tasks.clone(), r[1].rounds), (vec![1, 3], 1));
        assert_eq!(r[1].cpu_ns, vec![30.0, 10.0]);
    }
}
