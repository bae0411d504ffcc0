//! A cgroup per worker: accounting and killing a worker's whole process
//! tree (children, grandchildren, a daemon that double-forked away).
//!
//! [`TreeGroups::open`] starts a session: a parent group
//! `schedlab.<pid>.<start ticks>.<token>` in every hierarchy schedlab may
//! use (`layout.rs`: cgroup2, unified or pure; v1 pids, memory, freezer,
//! and cpuacct when it is not co-mounted with cpu — never a cpu group,
//! which would change scheduling), journaled before it is made, so that
//! the next start after a SIGKILL kills what is left in it and removes it
//! ([`recover_leftover`], called from `sys::knobs::recover_leftover`,
//! which every start runs). [`TreeGroups::create`] makes one worker's
//! groups; [`TreeGroup::attach_pid`] moves the just-spawned worker in,
//! from the parent, while it is still blocked before its barrier;
//! [`TreeGroup::wait_empty`] waits for the last process of the tree to
//! exit; [`TreeGroup::kill_tree`] sends SIGTERM to all, frozen so none
//! escapes by forking, then SIGKILL after the grace (v2 `cgroup.kill`);
//! [`TreeGroup::stats`] reads the tree's figures ([`TreeStats`]);
//! [`TreeGroup::control`] hands the WRR dispatcher what it needs to stop,
//! continue and re-prioritise the whole tree turn after turn
//! ([`TreeControl`], `control.rs`).
//!
//! Run-queue wait, context switches and the number of tasks come from
//! taskstats exit records (`taskstats.rs`), which carry no cgroup: how
//! they are attributed to a tree, and the limits of that, is in
//! `exits.rs`. Run-queue wait (`cpu_delay_total`) does not need
//! `kernel.task_delayacct`: since Linux 5.14 every task has its delay
//! record and the CPU delay is copied from the scheduler's own
//! `sched_info` whatever the sysctl says (the sysctl switches the timing
//! of block I/O, swap-in and the like); `tests/cgroup_tree.rs` checks it
//! on this 6.18 kernel with the sysctl off. So nothing is changed for it;
//! a kernel without delay records (booted `nodelayacct` before 5.14, or
//! built without `CONFIG_TASK_DELAY_ACCT`) gives records without a run
//! count, and the figure is None.
//!
//! Files, one job each: `mounts.rs` (mountinfo and /proc/PID/cgroup),
//! `layout.rs` (which hierarchies), `files.rs` (parsing the groups'
//! files), `freezer.rs` (the one freezer type both `kill.rs` and
//! `control.rs` use: freeze, thaw, asked and actual state, wait),
//! `kill.rs` (freeze, signal, cgroup.kill, wait for empty, remove),
//! `journal.rs` (the session journals and their recovery),
//! `owned.rs` (proving a journaled group is schedlab's: no symbolic link,
//! its marker), `watchdog.rs` (the process outside schedlab that thaws,
//! lowers and kills the trees when schedlab dies), `taskstats.rs`,
//! `exits.rs`, `escapes.rs` (processes that left their tree's groups
//! while alive: found, named and killed), `control.rs`, `session.rs`
//! ([`TreeGroups`]), `group.rs` ([`TreeGroup`]), `stats.rs`.

mod control;
mod escapes;
mod exits;
mod files;
mod freezer;
mod group;
mod journal;
mod kill;
mod layout;
mod mounts;
mod owned;
mod session;
mod stats;
mod taskstats;
mod watchdog;

use std::path::Path;

use anyhow::Result;

pub use control::{Stopper, TreeControl};
pub use escapes::{Escaped, kill_escaped};
pub use files::{CpuStat, parse_cpu_stat};
pub use group::TreeGroup;
pub use layout::{Hierarchy, Layout, plan_layout};
pub use session::{TreeGroups, Versions};
pub use stats::TreeStats;
pub use taskstats::{ExitListener, ExitRecord};
pub use watchdog::{enable_watchdog, watchdog_main};

/// For every start of schedlab: kills and removes the worker groups left
/// by a schedlab that died; a note per session recovered.
pub fn recover_leftover() -> Result<Vec<String>> {
    journal::recover_leftover_sessions()
}

/// The hierarchies a session would use here, and what it would leave out
/// (for `schedlab env` and tests).
pub fn layout() -> Layout {
    plan_layout(&mounts::read_mounts(), &mounts::read_membership())
}

/// The journal's restore of [`crate::sys::knobs::Setting::CgroupParent`]:
/// kills what is left in the parent's groups and removes them, after
/// checking that the path is a cgroup schedlab named as its own.
pub(crate) fn remove_leftover_parent(path: &Path) -> Result<Vec<String>> {
    if !owned::check_parent(path)? {
        return Ok(Vec::new());
    }
    kill::clear_parent(path)?;
    Ok(vec![format!(
        "cgroup {} emptied and removed",
        path.display()
    )])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Recovery never removes what schedlab did not provably make: a
    /// journaled path whose name is not schedlab's, or that is not on a
    /// cgroup filesystem, is refused and left as it is.
    #[test]
    fn leftover_parents_not_provably_ours_are_left_alone() {
        let tmp = tempfile::tempdir().unwrap();
        for name in ["user.slice", "schedlab", "schedlab.1.2", "schedlab.1.2.3.4"] {
            let dir = tmp.path().join(name);
            std::fs::create_dir(&dir).unwrap();
            let err = remove_leftover_parent(&dir).unwrap_err();
            assert!(
                format!("{err:#}").contains("not a group schedlab makes"),
                "{err:#}"
            );
            assert!(dir.exists());
        }
        let ours_by_name = tmp.path().join("schedlab.1.2.abcd1234");
        std::fs::create_dir(&ours_by_name).unwrap();
        std::fs::create_dir(ours_by_name.join("run.w0")).unwrap();
        let err = remove_leftover_parent(&ours_by_name).unwrap_err();
        assert!(
            format!("{err:#}").contains("not on a cgroup filesystem"),
            "{err:#}"
        );
        assert!(ours_by_name.join("run.w0").exists());
        // One already gone is nothing to do.
        assert!(
            remove_leftover_parent(&tmp.path().join("schedlab.9.9.gone"))
                .unwrap()
                .is_empty()
        );
    }
}
