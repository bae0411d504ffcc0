//! Applying a [`WrrPolicy`] to real worker processes from user space.
//!
//! One dispatcher thread per CPU, pinned to it, walks that CPU's run queue.
//! For the task whose turn it is it either raises its SCHED_FIFO priority
//! above the other workers ([`Mechanism::Fifo`]) or lets it continue while
//! the others stay stopped ([`Mechanism::Signals`]). A `command` worker's
//! task is its whole process tree: every action covers every task of its
//! cgroup, its CPU time is the cgroup's and its turns end when the group
//! is empty ([`super::tree`]).
//!
//! Slices are accounted in CPU time, not wall-clock time: RT throttling, the
//! fair-class deadline server (Linux ≥ 6.12), interrupts and late timers all
//! take time from a worker at moments the dispatcher does not choose. The
//! thread reads the worker's `/proc/PID/schedstat` run time when its slice
//! starts, sleeps until the slice's wall-clock end, and then keeps sleeping
//! for whatever CPU time is still owed (re-checking each time) until the
//! worker has received its slice, blocks, exits, or a cap is reached. What
//! a completed slice got beyond (or short of) its slice is taken off (added
//! to) the task's next one, so per-slice errors — a late timer, a stop
//! signal acted on late — do not accumulate over a run.
//!
//! Sleeps are on an absolute CLOCK_MONOTONIC timerfd polled together with
//! the worker's pidfd and a stop event, so a worker that exits mid-slice or
//! a [`Dispatcher::stop`] ends the wait at once instead of at the timer.

use std::collections::BTreeMap;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, mpsc};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use serde::{Deserialize, Serialize};

use super::policy::WrrPolicy;
use super::tree::{self, TreeState};
use crate::sys::cgroup::TreeControl;
use crate::sys::events::{self as os, AbsTimer, Event, PidFd, Wake};
use crate::sys::probe::errno_explanation;
use crate::sys::proc::monotonic_ns;
use crate::sys::procfs::{read_schedstat, read_schedstat_at};
use crate::sys::sched::{self, SCHED_FIFO, SCHED_OTHER, SchedAttr};

/// The workers' SCHED_FIFO priority outside their turn, unless told
/// otherwise. The running task is raised to `base + 1`, the dispatcher
/// threads run at `base + 2`.
pub const DEFAULT_BASE_PRIO: u32 = 1;

/// Shortest slice the dispatcher accepts: below this its own wake-ups
/// (a few µs each) become a visible part of every slice.
pub const MIN_SLICE_NS: u64 = 100_000;

/// A slice is complete when the task is owed less than this much CPU time
/// (what it still lacks is carried over to its next slice): one more
/// wake-up of the dispatcher (timer interrupt, context switch, a /proc
/// read: ~20–30 µs on a VM) would cost about as much as it makes up.
const CPU_TOLERANCE_NS: u64 = 30_000;

/// A runnable task that made no progress since the previous check (others
/// ran: RT throttling, the fair server, or — Signals — other fair tasks)
/// and is owed no more than this has its slice ended at once, the shortfall
/// carried over to its next slice. The dispatcher never sleeps longer than
/// the CPU time owed (sleeping longer lets the task overshoot as soon as it
/// runs again), so this also keeps it from re-checking faster than every
/// 200 µs while nothing happens.
const STALLED_FINISH_NS: u64 = 200_000;

/// A slice never lasts longer than `CAP_FACTOR × slice + CAP_EXTRA_NS` of
/// wall-clock time, however little CPU the task got — not counting time the
/// dispatcher itself could not run (its timer wake-ups were late): the
/// worker, below it on the same CPU, could not run then either, so RT
/// throttling or a deadline server stalling the whole RT class on that CPU
/// (with the default 950 ms per 1 s, 50 ms at a time; with a lowered
/// `sched_rt_runtime_us`, much longer) only delays a slice, never cuts it.
/// The cap only ends slices of tasks that cannot run while the dispatcher
/// can (a higher-priority RT task between them, a task stopped elsewhere).
const CAP_FACTOR: u64 = 4;
const CAP_EXTRA_NS: u64 = 200_000_000;

/// How long [`Dispatcher::start`] waits for SIGSTOPped workers to stop.
const STOP_WAIT: Duration = Duration::from_millis(200);

/// How the dispatcher makes one task per CPU run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mechanism {
    /// Workers at SCHED_FIFO `base`; the task whose turn it is at `base + 1`.
    /// Needs CAP_SYS_NICE or RLIMIT_RTPRIO ≥ base + 2. Work-conserving: when
    /// the raised task blocks, the other workers of its CPU run.
    Fifo,
    /// Workers stopped with SIGSTOP; the task whose turn it is SIGCONTed.
    /// Unprivileged; not work-conserving (a blocked task idles its CPU until
    /// the dispatcher notices at the end of the slice).
    Signals,
    /// schedlab's sched_ext scheduler in the kernel ([`crate::wrr::ext`]);
    /// not a mechanism of this dispatcher.
    Ext,
}

impl Mechanism {
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Fifo => "fifo",
            Mechanism::Signals => "signals",
            Mechanism::Ext => "ext",
        }
    }
}

/// Whether a thread of this process may enter SCHED_FIFO at `priority`:
/// tried on a fresh, short-lived thread (which is put back to SCHED_OTHER),
/// as `crate::sys::probe` does. The error explains how to get the right.
pub fn fifo_check(priority: u32) -> Result<(), String> {
    let handle = std::thread::Builder::new()
        .name("wrr-probe".into())
        .spawn(move || {
            let tid = sched::gettid();
            let res = sched::set_attr_raw(tid, &SchedAttr::realtime(SCHED_FIFO, priority));
            if res.is_ok() {
                let _ = sched::set_attr_raw(tid, &SchedAttr::fair(SCHED_OTHER, 0));
            }
            res
        })
        .map_err(|e| format!("cannot start a probe thread: {e}"))?;
    match handle.join() {
        Ok(Ok(())) => Ok(()),
        Ok(Err(errno)) => Err(errno_explanation("fifo", errno)),
        Err(_) => Err("the probe thread panicked".to_string()),
    }
}

/// [`Mechanism::Fifo`] if this process may use SCHED_FIFO at the priorities
/// the default base priority needs (up to `DEFAULT_BASE_PRIO + 2`), else
/// [`Mechanism::Signals`]. Call it from a thread that is not
/// SCHED_DEADLINE (it probes on a new thread, which such a thread cannot
/// create; the answer would be Signals).
pub fn available_mechanism() -> Mechanism {
    match fifo_check(DEFAULT_BASE_PRIO + 2) {
        Ok(()) => Mechanism::Fifo,
        Err(_) => Mechanism::Signals,
    }
}

/// Why a slice ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SliceEnd {
    /// The task received its slice's CPU time.
    Completed,
    /// The task was found sleeping (blocked) before it had its CPU time.
    Blocked,
    /// The task exited.
    Exited,
    /// The wall-clock cap passed before the task had its CPU time.
    Capped,
    /// The dispatcher was stopped.
    Stopped,
}

/// One slice as planned and as delivered. Times are CLOCK_MONOTONIC ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SliceRecord {
    /// Task id (`Task::id`).
    pub task: usize,
    pub pid: i32,
    pub cpu: usize,
    /// When the task was made to run (after the previous task was put back).
    pub planned_start_ns: u64,
    /// `planned_start_ns + target_ns`: the end a wall-clock WRR would use.
    pub planned_end_ns: u64,
    /// When the dispatcher put the task back (lowered it or stopped it).
    pub actual_end_ns: u64,
    /// CPU time the task received during the slice (schedstat run_ns delta).
    pub cpu_ns: u64,
    /// The slice the policy gives the task.
    pub slice_ns: u64,
    /// The CPU time aimed at: `slice_ns` minus what the task's previous
    /// completed slice overshot (plus what it fell short), within ±½ slice,
    /// so that per-slice errors do not add up over a run.
    pub target_ns: u64,
    pub end: SliceEnd,
}

/// Everything a dispatch delivered.
#[derive(Debug, Clone, Serialize)]
pub struct DispatchReport {
    pub mechanism: Mechanism,
    /// All slices of all CPUs, by start time.
    pub slices: Vec<SliceRecord>,
    /// CPU time of the dispatcher threads (their own schedstat run_ns),
    /// from the first dispatch to the end of their restoration work.
    pub dispatcher_cpu_ns: u64,
    /// For every slice that ended on a timer (Completed, Blocked, Capped),
    /// in `slices` order: how long after that timer's deadline the
    /// dispatcher had put the task back and started the next one — timer
    /// latency, RT throttling, the fair server and the dispatcher's own
    /// reads and system calls. The deliberate extension of a slice to make
    /// up for CPU time lost is not lateness; it is `actual_end_ns −
    /// planned_end_ns` of the record.
    pub lateness_ns: Vec<u64>,
    /// Wall-clock time from the first dispatch to the end of `stop`.
    pub wall_ns: u64,
    /// The CPUs dispatched (one thread each).
    pub cpus: Vec<usize>,
    /// Whether the dispatcher threads ran at SCHED_FIFO `base + 2` (always
    /// for Fifo; for Signals when the process was allowed to).
    pub dispatcher_rt: bool,
    /// CPU time spent before the first slice to load the scheduler (ext:
    /// libbpf and the BPF verifier); 0 for the user-space mechanisms.
    pub load_cpu_ns: u64,
    /// Unexpected failures (system calls refused); empty normally.
    pub errors: Vec<String>,
}

impl DispatchReport {
    /// Total CPU time each task received in its slices, by task id.
    pub fn cpu_ns_by_task(&self) -> BTreeMap<usize, u64> {
        let mut out = BTreeMap::new();
        for s in &self.slices {
            *out.entry(s.task).or_default() += s.cpu_ns;
        }
        out
    }

    /// Each task's share of the slice CPU time of its CPU, by task id;
    /// compare with [`WrrPolicy::ideal_shares`].
    pub fn cpu_shares(&self) -> BTreeMap<usize, f64> {
        let mut per_cpu: BTreeMap<usize, u64> = BTreeMap::new();
        let mut per_task: BTreeMap<usize, (usize, u64)> = BTreeMap::new();
        for s in &self.slices {
            *per_cpu.entry(s.cpu).or_default() += s.cpu_ns;
            per_task.entry(s.task).or_insert((s.cpu, 0)).1 += s.cpu_ns;
        }
        per_task
            .into_iter()
            .map(|(task, (cpu, ns))| {
                let total = per_cpu[&cpu];
                (
                    task,
                    if total == 0 {
                        0.0
                    } else {
                        ns as f64 / total as f64
                    },
                )
            })
            .collect()
    }

    /// The q-quantile (0..=1, nearest rank) of `lateness_ns`.
    pub fn lateness_quantile(&self, q: f64) -> Option<u64> {
        quantile(&self.lateness_ns, q)
    }

    /// Dispatcher CPU time as a fraction of the dispatched CPUs' time.
    pub fn overhead(&self) -> f64 {
        let capacity = self.wall_ns as f64 * self.cpus.len().max(1) as f64;
        if capacity == 0.0 {
            0.0
        } else {
            self.dispatcher_cpu_ns as f64 / capacity
        }
    }
}

/// Nearest-rank quantile of unsorted values.
fn quantile(values: &[u64], q: f64) -> Option<u64> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_unstable();
    let rank = (q.clamp(0.0, 1.0) * v.len() as f64).ceil() as usize;
    Some(v[rank.clamp(1, v.len()) - 1])
}

struct Worker {
    id: usize,
    pid: i32,
    cpu: usize,
    pidfd: PidFd,
    /// A `command` worker's cgroup: every action covers its whole tree
    /// ([`super::tree`]), its CPU time is the group's, and it is gone when
    /// the group is empty, not when `pid` (the tree's top) has exited.
    tree: Option<TreeControl>,
    /// No longer under the dispatcher's control (restored, or released by
    /// [`Dispatcher::task_exited`]), whether or not the process has exited.
    released: AtomicBool,
    /// Held across "is it still ours?" and the change made to it, so that a
    /// release from another thread cannot slip in between and be undone.
    ctl: Mutex<()>,
}

impl Worker {
    /// Exited (a tree: its group empty), or released: never touched
    /// again.
    fn gone(&self) -> bool {
        self.released.load(Ordering::Acquire)
            || match &self.tree {
                Some(t) => !t.populated(),
                None => self.pidfd.exited(),
            }
    }

    /// CPU time so far: the process's schedstat run time, or the tree's
    /// cgroup usage (exited tasks included).
    fn run_ns(&self) -> Option<u64> {
        match &self.tree {
            Some(t) => t.usage_ns(),
            None => read_schedstat(self.pid).ok().map(|s| s.run_ns),
        }
    }

    /// What a slice waits on besides its timer: the process's exit. A
    /// tree's top may exit long before the tree; once it has, the tree's
    /// end is looked for at each timer wake-up instead.
    fn exit_fd(&self) -> Option<&PidFd> {
        match &self.tree {
            Some(_) if self.pidfd.exited() => None,
            _ => Some(&self.pidfd),
        }
    }

    /// After its exit descriptor fired: whether the worker is done (a
    /// tree is done only when its group is empty).
    fn ended(&self) -> bool {
        self.tree.as_ref().is_none_or(|t| !t.populated())
    }

    /// Runnable ('R'), asleep, or gone (None) at the end of a slice.
    fn state(&self) -> Option<char> {
        match &self.tree {
            Some(t) => match tree::state(t) {
                TreeState::Empty => None,
                TreeState::Runnable => Some('R'),
                TreeState::Asleep => Some('S'),
            },
            None => os::proc_state(self.pid),
        }
    }

    /// Whether a SIGSTOPped (frozen) worker has stopped.
    fn stopped(&self) -> bool {
        match &self.tree {
            Some(t) => t.frozen() == Some(true) || !t.populated(),
            None => matches!(os::proc_state(self.pid), None | Some('T' | 'Z' | 'X')),
        }
    }

    fn lock(&self) -> MutexGuard<'_, ()> {
        self.ctl.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A change the dispatcher makes to a worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    /// Its turn: raised to `base + 1` (Fifo) or continued (Signals).
    Promote,
    /// Back among the waiting: `base` (Fifo) or stopped (Signals).
    Demote,
    /// Given back to the system: SCHED_OTHER nice 0 (Fifo) or continued
    /// (Signals); released from then on.
    Restore,
}

/// State shared by the caller and the per-CPU threads.
struct Shared {
    policy: Mutex<WrrPolicy>,
    /// In task order (same order as `WrrPolicy::tasks`).
    workers: Vec<Worker>,
    mechanism: Mechanism,
    base_prio: u32,
    stop: AtomicBool,
    stop_event: Event,
}

fn is_esrch(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::ESRCH)
}

impl Shared {
    fn policy(&self) -> MutexGuard<'_, WrrPolicy> {
        // A panicking thread cannot leave the policy half-updated in a way
        // that matters (every method keeps it consistent); keep going.
        self.policy.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn finish(&self, i: usize) {
        self.policy().finish(self.workers[i].id);
    }

    /// The next live task of `cpu` (index into `workers`) and its slice;
    /// tasks found exited are finished on the way.
    fn pick(&self, cpu: usize) -> Option<(usize, u64)> {
        let mut policy = self.policy();
        loop {
            let (id, slice) = policy.next(cpu)?;
            let i = policy.index_of(id)?;
            if self.workers[i].gone() {
                policy.finish(id);
                continue;
            }
            return Some((i, slice));
        }
    }

    /// Apply `action` to `w` unless it has exited or was released (ESRCH
    /// then: a pid that may already be reaped is never addressed).
    fn apply(&self, w: &Worker, action: Action) -> io::Result<()> {
        let _ctl = w.lock();
        if w.gone() {
            return Err(io::Error::from_raw_os_error(libc::ESRCH));
        }
        self.apply_locked(w, action)
    }

    fn apply_locked(&self, w: &Worker, action: Action) -> io::Result<()> {
        if let Some(t) = &w.tree {
            return self.apply_tree(t, action).inspect(|()| {
                if action == Action::Restore {
                    w.released.store(true, Ordering::Release);
                }
            });
        }
        let fifo = |priority| sched::set_attr(w.pid, &SchedAttr::realtime(SCHED_FIFO, priority));
        match (self.mechanism, action) {
            (Mechanism::Fifo, Action::Promote) => fifo(self.base_prio + 1),
            (Mechanism::Fifo, Action::Demote) => fifo(self.base_prio),
            (Mechanism::Signals, Action::Promote | Action::Restore) => {
                w.pidfd.signal(libc::SIGCONT)
            }
            (Mechanism::Signals, Action::Demote) => w.pidfd.signal(libc::SIGSTOP),
            (Mechanism::Fifo, Action::Restore) => {
                sched::set_attr(w.pid, &SchedAttr::fair(SCHED_OTHER, 0))
            }
            // Refused by `Dispatcher::start`.
            (Mechanism::Ext, _) => Err(io::Error::from_raw_os_error(libc::EINVAL)),
        }
        .inspect(|()| {
            if action == Action::Restore {
                w.released.store(true, Ordering::Release);
            }
        })
    }

    /// `action` on every task of a tree (see [`super::tree`]).
    fn apply_tree(&self, t: &TreeControl, action: Action) -> io::Result<()> {
        match (self.mechanism, action) {
            (Mechanism::Fifo, Action::Promote) => tree::fifo(t, Some(self.base_prio + 1)),
            (Mechanism::Fifo, Action::Demote) => tree::fifo(t, Some(self.base_prio)),
            (Mechanism::Fifo, Action::Restore) => tree::fifo(t, None),
            (Mechanism::Signals, Action::Demote) => t.stop(true),
            (Mechanism::Signals, Action::Promote | Action::Restore) => t.stop(false),
            (Mechanism::Ext, _) => Err(io::Error::from_raw_os_error(libc::EINVAL)),
        }
    }

    /// Put `w` under the dispatcher's control: pinned to its CPU (a tree:
    /// each of its tasks), and at the base priority (Fifo) or stopped
    /// (Signals).
    fn take_over(&self, w: &Worker) -> Result<()> {
        if let Some(t) = &w.tree {
            tree::pin_each(t, w.cpu).map_err(|e| {
                anyhow::anyhow!(
                    "cannot pin the tasks of worker pid {} (task {}, cgroup {}) to CPU {}: {e}",
                    w.pid,
                    w.id,
                    t.dir().display(),
                    w.cpu
                )
            })?;
        }
        sched::set_affinity_raw(w.pid, &sched::cpu_set(&[w.cpu])).map_err(|errno| {
            anyhow::anyhow!(
                "cannot pin worker pid {} (task {}) to CPU {}: {}",
                w.pid,
                w.id,
                w.cpu,
                io::Error::from_raw_os_error(errno)
            )
        })?;
        self.apply(w, Action::Demote)
            .map_err(|e| match self.mechanism {
                Mechanism::Fifo => anyhow::anyhow!(
                    "cannot put worker pid {} (task {}) under SCHED_FIFO priority {}: {}",
                    w.pid,
                    w.id,
                    self.base_prio,
                    errno_explanation("fifo", e.raw_os_error().unwrap_or(0))
                ),
                Mechanism::Signals | Mechanism::Ext => {
                    anyhow::anyhow!("cannot stop worker pid {} (task {}): {e}", w.pid, w.id)
                }
            })
    }

    /// Give `w` back to the system unless it has exited or was already
    /// given back; a message if that failed.
    fn restore(&self, w: &Worker) -> Option<String> {
        match self.apply(w, Action::Restore) {
            Err(e) if !is_esrch(&e) => Some(format!(
                "could not restore worker pid {} (task {}): {e}",
                w.pid, w.id
            )),
            _ => None,
        }
    }
}

/// What one CPU's thread hands back.
#[derive(Default)]
struct CpuLog {
    /// Each slice with the timer deadline that ended it, if a timer did.
    slices: Vec<(SliceRecord, Option<u64>)>,
    cpu_ns: u64,
    errors: Vec<String>,
}

/// A running WRR dispatch over worker processes.
pub struct Dispatcher {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<CpuLog>>,
    /// Dropping these without sending tells threads still waiting to start
    /// that the start was abandoned.
    go: Vec<mpsc::Sender<()>>,
    cpus: Vec<usize>,
    started_ns: u64,
    dispatcher_rt: bool,
    shut_down: bool,
}

impl Dispatcher {
    /// Take control of already-started worker pids (one per task, in the
    /// order of `policy.tasks()`) and start dispatching.
    ///
    /// Every worker is pinned to its task's CPU and, for Fifo, set to
    /// SCHED_FIFO `base_prio` (harmless if the launcher already started it
    /// so); for Signals it is SIGSTOPped. One thread per CPU, SCHED_FIFO
    /// `base_prio + 2` (required for Fifo, tried for Signals) and pinned to
    /// that CPU, then runs the policy. Workers may still be waiting on a
    /// start barrier: a Fifo slice whose task is asleep simply lasts its
    /// wall-clock length, and a stopped worker stays stopped until its turn.
    ///
    /// The calling thread must not be SCHED_DEADLINE (such a thread cannot
    /// create threads). On error every worker is restored as by
    /// [`stop`](Dispatcher::stop) (continued; SCHED_OTHER nice 0 for Fifo),
    /// except when the arguments are refused before anything was touched.
    pub fn start(
        policy: WrrPolicy,
        pids: Vec<i32>,
        mechanism: Mechanism,
        base_prio: u32,
    ) -> Result<Dispatcher> {
        let trees = vec![None; pids.len()];
        Dispatcher::start_trees(policy, pids, trees, mechanism, base_prio)
    }

    /// [`start`](Dispatcher::start) where a worker may be a whole process
    /// tree: `trees[i]`, when given, is task `i`'s cgroup (`pids[i]` its
    /// top process), and every action, CPU reading and exit covers every
    /// task in it ([`super::tree`]).
    pub fn start_trees(
        policy: WrrPolicy,
        pids: Vec<i32>,
        trees: Vec<Option<TreeControl>>,
        mechanism: Mechanism,
        base_prio: u32,
    ) -> Result<Dispatcher> {
        ensure!(
            pids.len() == trees.len(),
            "{} worker pids for {} trees",
            pids.len(),
            trees.len()
        );
        ensure!(
            pids.len() == policy.tasks().len(),
            "{} worker pids for {} tasks",
            pids.len(),
            policy.tasks().len()
        );
        ensure!(
            mechanism != Mechanism::Ext,
            "the ext mechanism is the kernel's: it is started by wrr::ext, not by this dispatcher"
        );
        ensure!(
            (1..=97).contains(&base_prio),
            "base priority {base_prio} is out of range: the dispatcher needs base..=base+2 within 1..=99"
        );
        for t in policy.tasks() {
            let slice = policy.slice_of(t.id).unwrap_or(0);
            ensure!(
                slice >= MIN_SLICE_NS,
                "task {} has a slice of {slice} ns; the dispatcher needs at least {MIN_SLICE_NS} ns",
                t.id
            );
        }
        let mut workers = Vec::with_capacity(pids.len());
        for ((t, &pid), tree) in policy.tasks().iter().zip(&pids).zip(trees) {
            let pidfd = PidFd::open(pid)
                .with_context(|| format!("worker pid {pid} (task {}) is not running", t.id))?;
            ensure!(
                !pidfd.exited(),
                "worker pid {pid} (task {}) has already exited",
                t.id
            );
            workers.push(Worker {
                id: t.id,
                pid,
                cpu: t.cpu,
                pidfd,
                tree,
                released: AtomicBool::new(false),
                ctl: Mutex::new(()),
            });
        }
        let cpus = policy.cpus();
        let shared = Arc::new(Shared {
            policy: Mutex::new(policy),
            workers,
            mechanism,
            base_prio,
            stop: AtomicBool::new(false),
            stop_event: Event::new().context("creating the dispatcher's stop event")?,
        });
        // From here on, dropping `d` (on any error) restores every worker.
        let mut d = Dispatcher {
            shared,
            threads: Vec::new(),
            go: Vec::new(),
            cpus,
            started_ns: 0,
            dispatcher_rt: true,
            shut_down: false,
        };

        // Threads first: at base + 2 and pinned, waiting for the go, so that
        // RT workers taken over next cannot starve them.
        let (ready_tx, ready_rx) = mpsc::channel();
        for &cpu in &d.cpus {
            let (go_tx, go_rx) = mpsc::channel();
            let shared = Arc::clone(&d.shared);
            let ready = ready_tx.clone();
            let handle = std::thread::Builder::new()
                .name(format!("wrr-cpu{cpu}"))
                .spawn(move || cpu_thread(shared, cpu, ready, go_rx))
                .context(
                    "cannot create a dispatcher thread (a SCHED_DEADLINE caller cannot create \
                     threads: start the dispatcher before raising the caller's priority)",
                )?;
            d.threads.push(handle);
            d.go.push(go_tx);
        }
        drop(ready_tx);
        for _ in 0..d.cpus.len() {
            match ready_rx.recv() {
                Ok(Ok(rt)) => d.dispatcher_rt &= rt,
                Ok(Err(message)) => bail!(message),
                Err(_) => bail!("a dispatcher thread ended during set-up"),
            }
        }

        for w in &d.shared.workers {
            d.shared.take_over(w)?;
        }
        if mechanism == Mechanism::Signals {
            // SIGSTOP lands when the worker next leaves the kernel; wait for
            // it so that only the chosen task runs from the first slice on.
            let until = monotonic_ns() + STOP_WAIT.as_nanos() as u64;
            while monotonic_ns() < until && d.shared.workers.iter().any(|w| !w.stopped()) {
                std::thread::sleep(Duration::from_micros(200));
            }
        }

        d.started_ns = monotonic_ns();
        for go in &d.go {
            let _ = go.send(());
        }
        Ok(d)
    }

    /// The mechanism in use.
    pub fn mechanism(&self) -> Mechanism {
        self.shared.mechanism
    }

    /// Tell the dispatcher that worker `id` exited, so that it is skipped.
    /// Exits are also detected on their own (a worker's pidfd becomes
    /// readable when it turns zombie), so this is a formality when called,
    /// as it should be, between seeing the zombie and reaping it.
    ///
    /// Called for a worker that is still alive (e.g. just sent SIGKILL: a
    /// SCHED_FIFO worker must still be scheduled to die), the worker is
    /// released rather than left behind: restored at once (SCHED_OTHER
    /// nice 0, or continued) and never dispatched again. Unknown ids are
    /// ignored.
    pub fn task_exited(&self, id: usize) {
        let i = {
            let mut policy = self.shared.policy();
            let Some(i) = policy.index_of(id) else {
                return;
            };
            policy.finish(id);
            i
        };
        let w = &self.shared.workers[i];
        let _ctl = w.lock();
        if !w.gone() {
            let _ = self.shared.apply_locked(w, Action::Restore);
        }
        w.released.store(true, Ordering::Release);
    }

    /// Stop dispatching, restore every still-living worker (SIGCONT for
    /// Signals; SCHED_OTHER nice 0 for Fifo), join the threads and return
    /// what was delivered.
    pub fn stop(mut self) -> DispatchReport {
        let logs = self.shutdown();
        let wall_ns = monotonic_ns().saturating_sub(self.started_ns);
        let mut slices: Vec<(SliceRecord, Option<u64>)> = Vec::new();
        let mut dispatcher_cpu_ns = 0;
        let mut errors = Vec::new();
        for log in logs {
            slices.extend(log.slices);
            dispatcher_cpu_ns += log.cpu_ns;
            errors.extend(log.errors);
        }
        slices.sort_by_key(|(s, _)| (s.planned_start_ns, s.cpu));
        let lateness_ns = slices
            .iter()
            .filter_map(|(s, deadline)| deadline.map(|d| s.actual_end_ns.saturating_sub(d)))
            .collect();
        DispatchReport {
            mechanism: self.shared.mechanism,
            slices: slices.into_iter().map(|(s, _)| s).collect(),
            dispatcher_cpu_ns,
            lateness_ns,
            wall_ns,
            cpus: self.cpus.clone(),
            dispatcher_rt: self.dispatcher_rt,
            load_cpu_ns: 0,
            errors,
        }
    }

    /// Stop the threads, join them, restore every worker. Idempotent.
    fn shutdown(&mut self) -> Vec<CpuLog> {
        if self.shut_down {
            return Vec::new();
        }
        self.shut_down = true;
        self.shared.stop.store(true, Ordering::Release);
        self.shared.stop_event.set();
        self.go.clear();
        let mut logs: Vec<CpuLog> = self
            .threads
            .drain(..)
            .map(|h| {
                h.join().unwrap_or_else(|_| CpuLog {
                    errors: vec!["a dispatcher thread panicked".to_string()],
                    ..CpuLog::default()
                })
            })
            .collect();
        // Each thread restored its own CPU's workers on the way out (it runs
        // above them, so it can); this pass covers threads that never
        // started or died.
        let errors: Vec<String> = self
            .shared
            .workers
            .iter()
            .filter_map(|w| self.shared.restore(w))
            .collect();
        if !errors.is_empty() {
            logs.push(CpuLog {
                errors,
                ..CpuLog::default()
            });
        }
        logs
    }
}

impl Drop for Dispatcher {
    /// Dropped without [`stop`](Dispatcher::stop) (an error, a panic): the
    /// same restoration, so no worker is left stopped or at RT priority.
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// One CPU's dispatcher thread: set up, report, wait for the go, dispatch
/// until stopped or out of tasks, restore this CPU's workers.
fn cpu_thread(
    shared: Arc<Shared>,
    cpu: usize,
    ready: mpsc::Sender<Result<bool, String>>,
    go: mpsc::Receiver<()>,
) -> CpuLog {
    let tid = sched::gettid();
    // Priority first, then the CPU: pinned first, a SCHED_OTHER thread could
    // wait behind an RT worker already running there.
    let prio = shared.base_prio + 2;
    let rt = sched::set_attr(tid, &SchedAttr::realtime(SCHED_FIFO, prio));
    if let Err(e) = &rt
        && shared.mechanism == Mechanism::Fifo
    {
        let _ = ready.send(Err(format!(
            "the dispatcher thread for CPU {cpu} cannot run at SCHED_FIFO priority {prio}: {}",
            errno_explanation("fifo", e.raw_os_error().unwrap_or(0))
        )));
        return CpuLog::default();
    }
    if let Err(errno) = sched::set_affinity_raw(tid, &sched::cpu_set(&[cpu])) {
        let _ = ready.send(Err(format!(
            "cannot pin the dispatcher thread to CPU {cpu}: {}",
            io::Error::from_raw_os_error(errno)
        )));
        return CpuLog::default();
    }
    let timer = match AbsTimer::new() {
        Ok(t) => t,
        Err(e) => {
            let _ = ready.send(Err(format!("cannot create a timerfd: {e}")));
            return CpuLog::default();
        }
    };
    let _ = ready.send(Ok(rt.is_ok()));
    drop(ready);
    if go.recv().is_err() {
        return CpuLog::default();
    }

    let stat_path = format!("/proc/self/task/{tid}/schedstat");
    let own_run_ns = || {
        read_schedstat_at(Path::new(&stat_path))
            .map(|s| s.run_ns)
            .unwrap_or(0)
    };
    let run_before = own_run_ns();
    let mut log = CpuLog::default();
    dispatch_cpu(&shared, cpu, &timer, &mut log);
    for w in shared.workers.iter().filter(|w| w.cpu == cpu) {
        log.errors.extend(shared.restore(w));
    }
    log.cpu_ns = own_run_ns().saturating_sub(run_before);
    log
}

/// A slice that has ended but is not recorded yet: its CPU time is read
/// once its task has been put back, and its end is when the next one starts.
struct Pending {
    /// Index into `workers`.
    index: usize,
    rec: SliceRecord,
    run_start: u64,
    /// The task's run time when the dispatcher decided to end the slice.
    run_seen: u64,
    /// The deadline of the timer that ended the slice, if one did.
    deadline: Option<u64>,
}

/// The dispatch loop of one CPU.
fn dispatch_cpu(shared: &Shared, cpu: usize, timer: &AbsTimer, log: &mut CpuLog) {
    // The worker currently promoted (index into `workers`).
    let mut current: Option<usize> = None;
    let mut pending: Option<Pending> = None;
    // Per worker: CPU time received beyond (or, negative, short of) the
    // target of its last completed slice, taken off its next target.
    let mut carry = vec![0i64; shared.workers.len()];
    let run_of = |p: &Option<Pending>| p.as_ref().and_then(|p| shared.workers[p.index].run_ns());

    while !shared.stop.load(Ordering::Acquire) {
        let Some((i, slice_ns)) = shared.pick(cpu) else {
            break; // every task of this CPU has exited
        };
        let w = &shared.workers[i];
        let switch = current != Some(i);
        if switch
            && let Some(c) = current.take()
            && let Err(e) = shared.apply(&shared.workers[c], Action::Demote)
            && !is_esrch(&e)
        {
            log.errors.push(format!(
                "cannot put back worker pid {}: {e}",
                shared.workers[c].pid
            ));
        }
        // Both readings while neither task can run (this thread runs above
        // them on their CPU; a demoted or not yet promoted one is stopped or
        // at the base priority): the previous slice gets everything its
        // task ran until it was put back, the next one nothing from before.
        let prev_end = run_of(&pending);
        let run_start = w.run_ns();
        if switch {
            if let Err(e) = shared.apply(w, Action::Promote) {
                if !is_esrch(&e) {
                    log.errors.push(format!(
                        "cannot run worker pid {} (task {}); skipping it from now on: {e}",
                        w.pid, w.id
                    ));
                }
                shared.finish(i);
                flush(&mut pending, log, &mut carry, monotonic_ns(), prev_end);
                continue;
            }
            current = Some(i);
        }
        let start = monotonic_ns();
        flush(&mut pending, log, &mut carry, start, prev_end);
        let Some(run_start) = run_start else {
            shared.finish(i);
            current = None;
            continue;
        };

        let target = (slice_ns as i64 - carry[i]).max(1) as u64;
        let planned_end = start + target;
        let cap_len = target * CAP_FACTOR + CAP_EXTRA_NS;
        // Time the dispatcher's own wake-ups were late in this slice.
        let mut stalled = 0;
        let mut deadline = planned_end;
        let mut last_got = None;
        let (end, run_seen, timer_deadline) = loop {
            if let Err(e) = timer.arm_at(deadline) {
                log.errors.push(format!("cannot arm the slice timer: {e}"));
                shared.stop.store(true, Ordering::Release);
                break (SliceEnd::Stopped, w.run_ns().unwrap_or(run_start), None);
            }
            let wake = match os::wait(timer, w.exit_fd(), &shared.stop_event) {
                Ok(wake) => wake,
                Err(e) => {
                    log.errors
                        .push(format!("waiting for the slice's end failed: {e}"));
                    shared.stop.store(true, Ordering::Release);
                    Wake::Stop
                }
            };
            match wake {
                Wake::Stop => {
                    break (SliceEnd::Stopped, w.run_ns().unwrap_or(run_start), None);
                }
                // A tree's top exited, the rest of the tree goes on.
                Wake::Exited if !w.ended() => continue,
                Wake::Exited => {
                    break (SliceEnd::Exited, w.run_ns().unwrap_or(run_start), None);
                }
                Wake::Timer => {}
            }
            let now = monotonic_ns();
            stalled += now.saturating_sub(deadline);
            if w.released.load(Ordering::Acquire) {
                break (SliceEnd::Exited, w.run_ns().unwrap_or(run_start), None);
            }
            let cap_at = start + stalled + cap_len;
            let Some(run) = w.run_ns() else {
                break (SliceEnd::Exited, run_start, None);
            };
            let got = run.saturating_sub(run_start);
            if got + CPU_TOLERANCE_NS >= target {
                break (SliceEnd::Completed, run, Some(deadline));
            }
            if now >= cap_at {
                break (SliceEnd::Capped, run, Some(deadline));
            }
            match w.state() {
                None | Some('Z' | 'X' | 'x') => break (SliceEnd::Exited, run, None),
                Some('R') => {}
                Some(_) => break (SliceEnd::Blocked, run, Some(deadline)),
            }
            let owed = target - got;
            if last_got == Some(got) && owed <= STALLED_FINISH_NS {
                break (SliceEnd::Completed, run, Some(deadline));
            }
            // Runnable but short of its CPU time: sleep for what is owed
            // (the task runs meanwhile) and check again.
            last_got = Some(got);
            deadline = (now + owed).min(cap_at);
        };
        pending = Some(Pending {
            index: i,
            rec: SliceRecord {
                task: w.id,
                pid: w.pid,
                cpu,
                planned_start_ns: start,
                planned_end_ns: planned_end,
                actual_end_ns: 0,
                cpu_ns: 0,
                slice_ns,
                target_ns: target,
                end,
            },
            run_start,
            run_seen,
            deadline: timer_deadline,
        });
        if end == SliceEnd::Exited {
            shared.finish(i);
            current = None;
        }
    }
    let prev_end = run_of(&pending);
    flush(&mut pending, log, &mut carry, monotonic_ns(), prev_end);
}

/// Record the pending slice: it ended at `at`, and its task's run time
/// once put back was `run_end` (None if unreadable: exited and reaped).
fn flush(
    pending: &mut Option<Pending>,
    log: &mut CpuLog,
    carry: &mut [i64],
    at: u64,
    run_end: Option<u64>,
) {
    let Some(p) = pending.take() else {
        return;
    };
    let mut rec = p.rec;
    rec.actual_end_ns = at;
    rec.cpu_ns = run_end.unwrap_or(p.run_seen).max(p.run_seen) - p.run_start;
    // Only a completed slice carries its error over; a task that blocked or
    // could not run forfeits the rest of its turn, as in the kernel.
    let half = (rec.slice_ns / 2) as i64;
    carry[p.index] = match rec.end {
        SliceEnd::Completed => (rec.cpu_ns as i64 - rec.target_ns as i64).clamp(-half, half),
        _ => 0,
    };
    log.slices.push((rec, p.deadline));
}

#[cfg(test)]
mod tests {
    //! The tests that start real processes are in `tests/wrr_dispatch.rs`.

    use super::*;
    use crate::wrr::policy::{SliceRule, Task};

    const MS: u64 = 1_000_000;

    fn weighted_policy(weights: &[u32], cpu: usize, quantum_ns: u64) -> WrrPolicy {
        let tasks = weights
            .iter()
            .enumerate()
            .map(|(id, &weight)| Task { id, weight, cpu })
            .collect();
        WrrPolicy::new(tasks, SliceRule::Weighted { quantum_ns }).unwrap()
    }

    #[test]
    fn start_rejects_bad_arguments() {
        let policy = weighted_policy(&[1, 2], 0, 10 * MS);
        let me = std::process::id() as i32;
        let err = Dispatcher::start(policy.clone(), vec![me], Mechanism::Signals, 1)
            .err()
            .unwrap();
        assert!(
            err.to_string().contains("1 worker pids for 2 tasks"),
            "{err}"
        );
        let err = Dispatcher::start(policy.clone(), vec![me, me], Mechanism::Signals, 98)
            .err()
            .unwrap();
        assert!(err.to_string().contains("base priority 98"), "{err}");
        let tiny = weighted_policy(&[1], 0, 1_000);
        let err = Dispatcher::start(tiny, vec![me], Mechanism::Signals, 1)
            .err()
            .unwrap();
        assert!(err.to_string().contains("at least"), "{err}");
        // A pid that does not exist (pid_max is at most 2^22).
        let err = Dispatcher::start(policy, vec![me, 1 << 23], Mechanism::Signals, 1)
            .err()
            .unwrap();
        assert!(err.to_string().contains("is not running"), "{err}");
    }

    #[test]
    fn report_helpers() {
        let rec = |task, cpu, cpu_ns| SliceRecord {
            task,
            pid: 1,
            cpu,
            planned_start_ns: 0,
            planned_end_ns: 10,
            actual_end_ns: 10,
            cpu_ns,
            slice_ns: 10,
            target_ns: 10,
            end: SliceEnd::Completed,
        };
        let report = DispatchReport {
            mechanism: Mechanism::Fifo,
            slices: vec![rec(0, 0, 10), rec(1, 0, 30), rec(2, 1, 5), rec(0, 0, 10)],
            dispatcher_cpu_ns: 20,
            lateness_ns: vec![5, 1, 3, 100],
            wall_ns: 1000,
            cpus: vec![0, 1],
            dispatcher_rt: true,
            load_cpu_ns: 0,
            errors: vec![],
        };
        assert_eq!(report.cpu_ns_by_task()[&0], 20);
        let shares = report.cpu_shares();
        assert_eq!(shares[&0], 0.4);
        assert_eq!(shares[&1], 0.6);
        assert_eq!(shares[&2], 1.0);
        assert_eq!(report.lateness_quantile(0.5), Some(3));
        assert_eq!(report.lateness_quantile(1.0), Some(100));
        assert_eq!(report.lateness_quantile(0.0), Some(1));
        assert_eq!(report.overhead(), 0.01);
        assert_eq!(Mechanism::Signals.name(), "signals");
        let json = serde_json::to_string(&report.slices[0]).unwrap();
        assert!(json.contains("\"end\":\"completed\""), "{json}");
        assert!(
            serde_json::to_string(&report)
                .unwrap()
                .contains("\"mechanism\":\"fifo\"")
        );
    }
}
