//! The watchdog: a guard outside schedlab's process for its workers'
//! trees. A `command` worker's children do not die with schedlab
//! (`PR_SET_PDEATHSIG` reaches the worker alone), and under WRR they may be
//! frozen (`signals`) or at SCHED_FIFO (`fifo`) at the moment schedlab is
//! killed. So every cgroup session starts `schedlab __watchdog PARENT…`
//! (schedlab's own binary re-executed, in a process group of its own,
//! SCHED_OTHER on every CPU), which holds the read end of a pipe whose
//! write end only schedlab has (close-on-exec, so no worker inherits it).
//! At end of file — schedlab exited, however it ended, SIGKILL included —
//! it [releases](release_parents) every group under the session's parents:
//! thaws them, lowers every real-time or deadline task to SCHED_OTHER and
//! kills them all (the tasks are thawed first: a task frozen by the v1
//! freezer cannot die). It touches only the parents it was given, each
//! checked as schedlab's own (`owned.rs`). Removing the groups and the
//! journal is left to the next start, as before.
//!
//! The next start's recovery releases the same way before it removes
//! anything, so a tree left frozen in one hierarchy never keeps another
//! hierarchy's group from emptying.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::files;
use crate::sys::sched::{self, SCHED_DEADLINE, SCHED_FIFO, SCHED_OTHER, SCHED_RR, SchedAttr};

/// Set by the command line's `main`: this process is the schedlab binary,
/// so `/proc/self/exe __watchdog` is schedlab's watchdog (in a test
/// harness it would be the harness).
static ENABLED: AtomicBool = AtomicBool::new(false);

/// Called by the schedlab binary before anything else.
pub fn enable_watchdog() {
    ENABLED.store(true, Ordering::Release);
}

/// How long dropping a [`Watchdog`] waits for it to exit.
const EXIT_WAIT: Duration = Duration::from_secs(2);

/// schedlab's side of a watchdog: the pipe's write end and the process.
pub(super) struct Watchdog {
    pipe: Option<ChildStdin>,
    child: Child,
}

impl Watchdog {
    /// Starts a watchdog over `parents`.
    pub(super) fn start<H>(parents: &[(H, PathBuf)]) -> Result<Option<Watchdog>> {
        if !ENABLED.load(Ordering::Acquire) {
            bail!("not started outside the schedlab binary (a test harness)");
        }
        let mut cmd = Command::new("/proc/self/exe");
        cmd.arg("__watchdog")
            .args(parents.iter().map(|(_, p)| p))
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        let all_cpus: Vec<usize> = (0..libc::CPU_SETSIZE as usize).collect();
        crate::sys::child::configure(
            &mut cmd,
            crate::sys::child::ChildSetup {
                unblock_signals: true,
                die_with_parent: false,
                own_process_group: true,
                own_session: false,
                move_fds: Vec::new(),
                keep_fds: Vec::new(),
                attr: Some(SchedAttr::fair(SCHED_OTHER, 0)),
                affinity: Some(sched::cpu_set(&all_cpus)),
            },
        );
        let mut child = cmd.spawn().context("starting schedlab's watchdog")?;
        let pipe = child.stdin.take();
        Ok(Some(Watchdog { pipe, child }))
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        drop(self.pipe.take());
        let deadline = Instant::now() + EXIT_WAIT;
        while Instant::now() < deadline {
            match self.child.try_wait() {
                Ok(None) => std::thread::sleep(Duration::from_millis(2)),
                _ => return,
            }
        }
    }
}

/// The watchdog process (`schedlab __watchdog PARENT…`): waits for end of
/// file on standard input, then releases the parents' groups.
pub fn watchdog_main(parents: &[PathBuf]) -> i32 {
    let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
    let owned: Vec<PathBuf> = parents
        .iter()
        .filter(|p| super::owned::check_parent(p).unwrap_or(false))
        .cloned()
        .collect();
    let r = release_parents(&owned);
    if r.tasks_lowered + r.groups_killed > 0 {
        // Standard error may be gone with schedlab: nothing to do about it.
        let _ = writeln!(
            std::io::stderr(),
            "schedlab watchdog: schedlab ended with its workers' trees alive: {} group(s) \
             thawed, {} real-time task(s) lowered, {} group(s) killed; the next start removes \
             them",
            r.groups_thawed,
            r.tasks_lowered,
            r.groups_killed
        );
    }
    0
}

/// What [`release_parents`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Released {
    pub groups_thawed: usize,
    pub tasks_lowered: usize,
    pub groups_killed: usize,
}

/// Every group at or under each of `parents` (checked as schedlab's by the
/// caller): thawed, its real-time and deadline tasks lowered to
/// SCHED_OTHER, its processes killed — in three passes over all the
/// hierarchies, so that no kill waits on a freezer not yet thawed.
pub(super) fn release_parents(parents: &[PathBuf]) -> Released {
    let mut groups = Vec::new();
    for p in parents {
        collect_groups(p, &mut groups);
    }
    let mut r = Released::default();
    for g in &groups {
        r.groups_thawed += usize::from(thaw(g));
    }
    for g in &groups {
        r.tasks_lowered += lower(g);
    }
    for g in &groups {
        r.groups_killed += usize::from(kill(g));
    }
    r
}

/// `dir` and every group below it (never through a symbolic link).
fn collect_groups(dir: &Path, out: &mut Vec<PathBuf>) {
    out.push(dir.to_path_buf());
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            collect_groups(&e.path(), out);
        }
    }
}

/// Thaws the group's freezer (v2 `cgroup.freeze`, v1 `freezer.state`)
/// where it is asked frozen; whether it was.
fn thaw(dir: &Path) -> bool {
    if let Ok(t) = files::read(dir, "cgroup.freeze")
        && t.trim() == "1"
    {
        return files::write(dir, "cgroup.freeze", "0").is_ok();
    }
    if let Ok(t) = files::read(dir, "freezer.state")
        && t.trim() != "THAWED"
    {
        return files::write(dir, "freezer.state", "THAWED").is_ok();
    }
    false
}

/// Lowers every task of the group at a real-time or deadline policy to
/// SCHED_OTHER nice 0; how many.
fn lower(dir: &Path) -> usize {
    let list = match dir.join("cgroup.threads").exists() {
        true => "cgroup.threads",
        false => "tasks",
    };
    let tids = files::read(dir, list)
        .map(|t| files::parse_pids(&t))
        .unwrap_or_default();
    tids.into_iter()
        .filter(|&tid| {
            sched::get_attr(tid)
                .is_ok_and(|a| matches!(a.sched_policy, SCHED_FIFO | SCHED_RR | SCHED_DEADLINE))
        })
        .filter(|&tid| sched::set_attr(tid, &SchedAttr::fair(SCHED_OTHER, 0)).is_ok())
        .count()
}

/// Kills every process of the group (v2 `cgroup.kill`, else SIGKILL to
/// each of `cgroup.procs`); whether it had any.
fn kill(dir: &Path) -> bool {
    let procs = super::files::procs(dir);
    if procs.is_empty() {
        return false;
    }
    if dir.join("cgroup.kill").exists() && files::write(dir, "cgroup.kill", "1").is_ok() {
        return true;
    }
    for pid in procs {
        crate::sys::proc::kill(pid, libc::SIGKILL);
    }
    true
}
