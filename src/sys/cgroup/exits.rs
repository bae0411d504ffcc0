//! Which exit records belong to a tree: the attribution of taskstats
//! records (which carry no cgroup) to one worker's process tree. Pure.
//!
//! A record belongs to the tree when its task, its thread group or its
//! parent is already known to be of the tree, repeated until nothing
//! changes (a child's record usually arrives before its parent's). Known
//! at the start: the top process, and every task seen in the group's
//! `cgroup.threads`/`tasks` (read when the tree is attached, each time its
//! emptiness is checked, and while it is frozen to be killed).
//!
//! Limits: a task that was never seen in the group and whose parent had
//! already exited when it exited (so the kernel reports its reaper as its
//! parent: init, or a child subreaper outside the tree) cannot be told
//! apart and is left out; and a pid of the tree reused, within the same
//! run, by an unrelated process would bring in that process's children.
//! Only records that arrived after the group was made are considered.

use std::collections::BTreeSet;

use super::taskstats::ExitRecord;

/// The records of `records` that belong to the tree whose known tasks are
/// `known` (the top process and every task seen in the group).
pub fn attribute<'a>(records: &'a [ExitRecord], known: &BTreeSet<i32>) -> Vec<&'a ExitRecord> {
    let mut tree = known.clone();
    let mut taken = vec![false; records.len()];
    loop {
        let mut grew = false;
        for (i, r) in records.iter().enumerate() {
            if taken[i] {
                continue;
            }
            let ours = tree.contains(&r.tid)
                || r.tgid.is_some_and(|t| tree.contains(&t))
                || tree.contains(&r.ppid);
            if ours {
                taken[i] = true;
                grew = true;
                tree.insert(r.tid);
                if let Some(t) = r.tgid {
                    tree.insert(t);
                }
            }
        }
        if !grew {
            break;
        }
    }
    records
        .iter()
        .zip(taken)
        .filter_map(|(r, t)| t.then_some(r))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(tid: i32, tgid: i32, ppid: i32) -> ExitRecord {
        ExitRecord {
            tid,
            tgid: Some(tgid),
            ppid,
            ..ExitRecord::default()
        }
    }

    #[test]
    fn children_grandchildren_threads_and_strangers() {
        // Top 100; its child 101 and grandchild 102 (the grandchild's
        // record first, as it exits first); a thread 103 of 101; a
        // daemon 104 whose parent 105 exited before it (reparented to
        // 1) but which was seen in the group; a stranger 200 (parent 1)
        // and its child 201.
        let records = vec![
            rec(102, 102, 101),
            rec(103, 101, 101),
            rec(101, 101, 100),
            rec(105, 105, 100),
            rec(104, 104, 1),
            rec(200, 200, 1),
            rec(201, 201, 200),
            rec(100, 100, 50),
        ];
        let known: BTreeSet<i32> = [100, 104].into();
        let ours: Vec<i32> = attribute(&records, &known).iter().map(|r| r.tid).collect();
        assert_eq!(ours, vec![102, 103, 101, 105, 104, 100]);
        // Without having seen the daemon, it is left out (the documented
        // limit), and nothing else changes.
        let ours: Vec<i32> = attribute(&records, &[100].into())
            .iter()
            .map(|r| r.tid)
            .collect();
        assert_eq!(ours, vec![102, 103, 101, 105, 100]);
    }
}
