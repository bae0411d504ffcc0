//! The order of wake-ups that the trace implies but does not show: a
//! write into a pipe (or a futex wake) whose reader is not waiting wakes
//! nobody, so the sched tracepoints never see it. `perf bench sched pipe`
//! under OTHER on one CPU: the parent's write preempts its child, which
//! then writes back to the runnable child (no `sched_waking`) and blocks;
//! the child resumes, its read finds the data, and it writes to the parent
//! again. Recorded, the child only wakes the parent, again and again, and
//! never waits: replayed, it ran ahead, its wake-ups were all posted before
//! the parent waited, and the parent blocked on a third of its recorded
//! sleeps (`schedlab bench replay --case pipe`: -66 % voluntary and -68 %
//! involuntary switches).
//!
//! What the trace does show: when task X wakes T twice, T blocked again
//! between the two wake-ups, before the second. So T's next sleep began
//! before X's next wake-up of it, and a replay that keeps that order makes
//! T block where it blocked. [`keep_wake_order`] adds the pair that keeps
//! it: T wakes X just before that sleep, and X waits for it just before
//! its wake-up of T (`sleep 0ns by T`: a wait the original found already
//! satisfied, as the child's read found the parent's data). Unless X
//! already waited for T in between (the ping-pong where both block). Each
//! added wait follows, in the original's time, the wake-up it waits for,
//! so the replay cannot deadlock on them.

use super::record::NsOp;
use crate::workload::replay::desc::Waker;

/// Add to the tasks' ops (`ops[i]`: task i's) the wake-ups and already
/// satisfied waits that keep every task's recorded sleeps ahead of the
/// wake-ups that end them (see the module doc).
pub fn keep_wake_order(ops: &mut [Vec<NsOp>]) {
    let n = ops.len();
    // (task, index before which to insert, op).
    let mut inserts: Vec<(usize, usize, NsOp)> = Vec::new();
    for x in 0..n {
        for t in 0..n {
            if t == x {
                continue;
            }
            let wakes: Vec<usize> = positions(&ops[x], |o| *o == NsOp::Wake(t));
            if wakes.len() < 2 {
                continue;
            }
            let sleeps: Vec<usize> = positions(&ops[t], |o| sleeps_by(o, x));
            for k in 1..wakes.len().min(sleeps.len()) {
                let between = &ops[x][wakes[k - 1] + 1..wakes[k]];
                if between.iter().any(|o| sleeps_by(o, t)) {
                    continue;
                }
                inserts.push((t, sleeps[k], NsOp::Wake(x)));
                inserts.push((
                    x,
                    wakes[k],
                    NsOp::Sleep {
                        ns: 0,
                        by: Waker::Task(t),
                    },
                ));
            }
        }
    }
    if inserts.is_empty() {
        return;
    }
    inserts.sort_by_key(|&(task, at, _)| (task, at));
    let mut it = inserts.into_iter().peekable();
    for (i, task_ops) in ops.iter_mut().enumerate() {
        if it.peek().is_none_or(|&(task, _, _)| task != i) {
            continue;
        }
        let old = std::mem::take(task_ops);
        task_ops.reserve(old.len());
        for (k, op) in old.into_iter().enumerate() {
            while let Some(&(_, _, add)) = it.peek().filter(|&&(task, at, _)| task == i && at == k)
            {
                task_ops.push(add);
                it.next();
            }
            task_ops.push(op);
        }
    }
}

fn positions(ops: &[NsOp], f: impl Fn(&NsOp) -> bool) -> Vec<usize> {
    ops.iter()
        .enumerate()
        .filter(|(_, o)| f(o))
        .map(|(i, _)| i)
        .collect()
}

fn sleeps_by(op: &NsOp, w: usize) -> bool {
    matches!(*op, NsOp::Sleep { by: Waker::Task(b), .. } if b == w)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn by(w: usize, ns: u64) -> NsOp {
        NsOp::Sleep {
            ns,
            by: Waker::Task(w),
        }
    }

    #[test]
    fn a_waker_that_never_waits_waits_for_the_sleep_it_ends() {
        // `perf bench sched pipe` under OTHER on one CPU: 1 wakes 0 three
        // times and never blocks; 0 blocks before each.
        let mut ops = vec![
            vec![NsOp::Fork(1), by(1, 9), NsOp::Run(3), by(1, 8), by(1, 7)],
            vec![
                NsOp::Wake(0),
                NsOp::Run(2),
                NsOp::Wake(0),
                NsOp::Run(2),
                NsOp::Wake(0),
            ],
        ];
        keep_wake_order(&mut ops);
        assert_eq!(
            ops[0],
            [
                NsOp::Fork(1),
                by(1, 9),
                NsOp::Run(3),
                NsOp::Wake(1),
                by(1, 8),
                NsOp::Wake(1),
                by(1, 7)
            ]
        );
        assert_eq!(
            ops[1],
            [
                NsOp::Wake(0),
                NsOp::Run(2),
                by(0, 0),
                NsOp::Wake(0),
                NsOp::Run(2),
                by(0, 0),
                NsOp::Wake(0)
            ]
        );
        // Wake-ups and waits still balance per pair.
        for (x, t) in [(0, 1), (1, 0)] {
            let given = ops[x].iter().filter(|o| **o == NsOp::Wake(t)).count();
            let taken = ops[t].iter().filter(|o| sleeps_by(o, x)).count();
            assert_eq!(given, taken);
        }
    }

    #[test]
    fn a_ping_pong_where_both_block_is_kept_as_it_is() {
        let mut ops = vec![
            vec![NsOp::Wake(1), by(1, 5), NsOp::Wake(1), by(1, 5)],
            vec![by(0, 5), NsOp::Wake(0), by(0, 5), NsOp::Wake(0)],
        ];
        let before = ops.clone();
        keep_wake_order(&mut ops);
        assert_eq!(ops, before);
    }
}
