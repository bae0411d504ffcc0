//! The fourth phase of a run: schedlab sleeps until every worker has
//! exited, the timeout passes or a stop signal arrives; it reaps each
//! worker as it exits (reading its schedstat while it is a zombie), drains
//! the workers' pipes whenever they hold something, lets parked workers
//! leave once every one has reported, samples RT hogs at
//! whole RT periods and stops them when the last worker is done. Then it
//! stops what ran beside the workers (another program's scheduler, the
//! trace, the WRR dispatcher) and takes the end-of-run counters.

use std::collections::HashMap;
use std::os::fd::AsFd;

use anyhow::{Context, Result};

use crate::sys::events::AbsTimer;
use crate::sys::proc::{self, Exit, Usage};
use crate::sys::procfs;
use crate::trace::Capture;
use crate::wrr::{DispatchReport, WrrRun};

use super::leave::Leave;
use super::members::Member;
use super::outputs::Outputs;
use super::release::Released;
use super::spawned::{Spawned, Workers};
use super::trees::TreeWatch;
use super::{Early, Launcher, ext_scheduler, interference};

/// A run whose processes are all gone, with what was observed.
pub struct Ended {
    pub spawned: Spawned,
    pub hog_start: HashMap<i32, procfs::SchedStat>,
    pub before: interference::AtRelease,
    pub after: interference::AtEnd,
    pub release_ns: u64,
    pub waited: Waited,
    pub ext_report: Option<ext_scheduler::Report>,
    pub traced: Option<Result<Capture>>,
    pub dispatched: Option<DispatchReport>,
    /// What schedlab ran as while it watched ("unchanged", "fifo 99", …).
    pub parent: &'static str,
}

impl Released {
    /// Wait for the run to end and stop what ran beside it.
    pub fn wait(self, l: &Launcher, members: &[Member]) -> Result<Ended, Early> {
        let Released {
            mut spawned,
            raised,
            hogs,
            hog_start,
            before,
            release_ns,
        } = self;
        let mut trees = TreeWatch::new(&spawned.trees, members, release_ns, l.quiet);
        let watched = Watched {
            workers: &mut spawned.workers,
            hogs: &hogs,
            dispatcher: spawned.dispatcher.as_ref(),
            outputs: &mut spawned.outputs,
            leave: spawned.leave.as_mut(),
        };
        let waited = wait_all(l, watched, release_ns, &mut trees).map(|mut w| {
            w.tree_end = std::mem::take(&mut trees.ended_ns);
            w.stopped = std::mem::take(&mut trees.stopped);
            w.left = std::mem::take(&mut trees.left);
            w.killed_at_exit = std::mem::take(&mut trees.killed_at_exit);
            w.escaped = std::mem::take(&mut trees.escaped);
            w
        });
        let ext_report = spawned.prepared.ext_sched.take().map(|mut x| {
            if let Ok(w) = &waited
                && let Some((exit, usage)) = w.others.get(&x.pid())
            {
                x.ended_during_run(*exit, *usage);
            }
            x.stop()
        });
        // The capture ends once the last process has exited (or was killed).
        let traced = spawned.prepared.recorder.take().map(|r| {
            r.finish().map(|(capture, kept)| {
                l.keep_trace(kept);
                capture
            })
        });
        let after = interference::at_end(&before);
        let dispatched = spawned.dispatcher.take().map(WrrRun::stop);
        let parent = raised.label;
        drop(raised);
        let waited = waited.map_err(Early::Fatal)?;
        if let Some(sig) = waited.interrupted {
            return Err(Early::Interrupted(sig));
        }
        Ok(Ended {
            spawned,
            hog_start,
            before,
            after,
            release_ns,
            waited,
            ext_report,
            traced,
            dispatched,
            parent,
        })
    }
}

/// What waiting for the workers observed.
pub struct Waited {
    /// Per pid: how it ended, its usage, its schedstat, and when it was seen
    /// to exit (monotonic ns).
    pub ended: HashMap<i32, (Exit, Usage, Option<procfs::SchedStat>, u64)>,
    /// Hogs: schedstat and time when the last worker had ended.
    pub hog_end: HashMap<i32, (procfs::SchedStat, u64)>,
    /// Hogs: schedstat and time at the last whole RT period after release.
    pub hog_periods: HashMap<i32, (procfs::SchedStat, u64)>,
    pub timed_out: bool,
    pub interrupted: Option<i32>,
    /// Other children of schedlab that ended during the run (a sched_ext
    /// scheduler's program), reaped by the wait.
    pub others: HashMap<i32, (Exit, Usage)>,
    /// Per member index: monotonic ns its program's tree was seen empty.
    pub tree_end: HashMap<usize, u64>,
    /// Members whose program's tree schedlab stopped (`duration_s`).
    pub stopped: std::collections::HashSet<usize>,
    /// Per member whose program exited before the rest of its tree: the
    /// processes left (pid, command).
    pub left: HashMap<usize, Vec<(i32, String)>>,
    /// Members whose tree's rest was killed at the program's exit
    /// (`end = "exit"`).
    pub killed_at_exit: std::collections::HashSet<usize>,
    /// Per member: processes of its tree found alive outside its groups
    /// (and killed).
    pub escaped: HashMap<usize, Vec<crate::sys::cgroup::Escaped>>,
}

/// Tokens of the wait's own descriptors in the poller (the pipes' are
/// from `outputs::FIRST_TOKEN` on).
const SIGNAL_TOKEN: u64 = 0;
const TIMER_TOKEN: u64 = 1;

/// What the wait watches and acts on: the run's processes, its hogs, the
/// WRR dispatcher, the pipes, and the leave pipe of parked workers.
struct Watched<'a> {
    workers: &'a mut Workers,
    hogs: &'a [(usize, i32)],
    dispatcher: Option<&'a WrrRun>,
    outputs: &'a mut Outputs,
    leave: Option<&'a mut Leave>,
}

/// Sleep until every worker has exited, the timeout passes, or a stop
/// signal arrives; reap each worker as it exits, and drain the workers'
/// pipes whenever they hold something (a worker writing more than a pipe
/// holds waits for that). Hogs are stopped once the last worker has ended.
fn wait_all(
    l: &Launcher,
    watched: Watched,
    release_ns: u64,
    trees: &mut TreeWatch,
) -> Result<Waited> {
    let Watched {
        workers,
        hogs,
        dispatcher,
        outputs,
        mut leave,
    } = watched;
    let signals = proc::SignalFd::new(&l.signals).context("watching signals")?;
    let timer = AbsTimer::new().context("creating a timer")?;
    outputs.poller().add(signals.as_fd(), SIGNAL_TOKEN)?;
    outputs.poller().add(timer.as_fd(), TIMER_TOKEN)?;
    let mut ready: Vec<u64> = Vec::new();
    let pids = workers.pids.clone();
    let mut live: std::collections::HashSet<i32> = pids.iter().copied().collect();
    let hog_pids: Vec<i32> = hogs.iter().map(|h| h.1).collect();
    let mut w = Waited {
        ended: HashMap::new(),
        hog_end: HashMap::new(),
        hog_periods: HashMap::new(),
        timed_out: false,
        interrupted: None,
        others: HashMap::new(),
        tree_end: HashMap::new(),
        stopped: Default::default(),
        left: HashMap::new(),
        killed_at_exit: Default::default(),
        escaped: HashMap::new(),
    };
    let deadline_ns = release_ns + l.timeout.as_nanos() as u64;
    let mut killed = false;
    // Trees whose end the dispatcher was told of.
    let mut told: std::collections::HashSet<usize> = Default::default();
    // Hogs are sampled at every whole RT period after release, so that
    // their share is measured over whole periods: a window that ends
    // when a throttled worker next gets the CPU ends right after a hog
    // burst, and would overstate the hog.
    let period_ns = l.rt_period_us.max(1) as u64 * 1000;
    let mut next_sample_ns = release_ns + period_ns;
    loop {
        let now = proc::monotonic_ns();
        let tree_wake_ns = trees.tick(now);
        if !hog_pids.is_empty() && !killed && now >= next_sample_ns {
            for &p in &hog_pids {
                if let Ok(s) = procfs::read_schedstat(p) {
                    w.hog_periods.insert(p, (s, now));
                }
            }
            next_sample_ns += period_ns * (1 + (now - next_sample_ns) / period_ns);
        }
        while let Some(pid) = proc::exited_child().context("waiting for workers")? {
            // Still a zombie: its schedstat is readable until it is reaped.
            let stat = procfs::read_schedstat(pid).ok();
            let seen_ns = proc::monotonic_ns();
            // A program's worker stays under WRR until its whole tree has
            // ended (below), not only its top process.
            if let (Some(d), Some(index)) = (dispatcher, pids.iter().position(|&p| p == pid))
                && !trees.has_tree(index)
            {
                d.task_exited(index);
            }
            let (exit, usage) =
                proc::reap(pid).with_context(|| format!("reaping worker pid {pid}"))?;
            workers.reaped(pid);
            if live.remove(&pid) {
                w.ended.insert(pid, (exit, usage, stat, seen_ns));
                if let Some(index) = pids.iter().position(|&p| p == pid) {
                    trees.top_reaped(index, pid, seen_ns, release_ns);
                }
            } else {
                w.others.insert(pid, (exit, usage));
            }
        }
        if let Some(l) = leave.as_deref_mut() {
            l.release_when_reported(outputs);
        }
        if let Some(d) = dispatcher {
            for index in trees.ended_ns.keys() {
                if told.insert(*index) {
                    d.task_exited(*index);
                }
            }
        }
        if live.is_empty() && !trees.busy() {
            // Whatever the processes wrote before they exited is in
            // their pipes.
            outputs.drain_all();
            return Ok(w);
        }
        if !killed && live.iter().all(|p| hog_pids.contains(p)) && !trees.busy() {
            // Every worker is done: the hogs' window ends now.
            let now = proc::monotonic_ns();
            for &p in &live {
                if let Ok(s) = procfs::read_schedstat(p) {
                    w.hog_end.insert(p, (s, now));
                }
                proc::kill(p, libc::SIGKILL);
            }
            killed = true;
            continue;
        }
        let now = proc::monotonic_ns();
        if now >= deadline_ns && !killed {
            w.timed_out = true;
            killed = true;
            live.iter().for_each(|&p| proc::kill(p, libc::SIGKILL));
            trees.kill_all();
            continue;
        }
        let wake_ns = if killed {
            now + 100_000_000
        } else if !hog_pids.is_empty() {
            deadline_ns.min(next_sample_ns)
        } else {
            deadline_ns
        };
        let wake_ns = tree_wake_ns.map_or(wake_ns, |t| wake_ns.min(t));
        timer.arm_at(wake_ns).context("arming the timer")?;
        outputs
            .poller()
            .wait(&mut ready, None)
            .context("waiting for workers")?;
        for &token in &ready {
            match token {
                SIGNAL_TOKEN => {
                    while let Some(sig) = signals.take() {
                        if sig == libc::SIGCHLD {
                            continue;
                        }
                        w.interrupted.get_or_insert(sig);
                        if !killed {
                            killed = true;
                            live.iter().for_each(|&p| proc::kill(p, libc::SIGKILL));
                            trees.kill_all();
                        }
                    }
                }
                TIMER_TOKEN => {}
                pipe => outputs.on_ready(pipe),
            }
        }
    }
}
