//! Recording one run's scheduling events into a [`Capture`]: schedlab's
//! own tracefs instance is configured for the run (clock `mono`, the run's
//! CPUs, a buffer sized from the expected event rate, the sched
//! tracepoints), a reader thread drains the per-CPU raw buffers while the
//! run goes on (so they do not overflow) and decodes them, keeping the
//! events about the run's tasks ([`concerns`]), and the capture is closed
//! when the last worker has exited. The run's tasks are its workers and
//! everything they fork while recorded (`sched_process_fork`,
//! [`Following`]): a program's whole process tree (`kind = "command"`).
//!
//! The instance is made once per campaign and kept between its runs
//! ([`Kept`]): making one and giving it its buffers, and removing it, cost
//! tens of ms a run. A run that reuses it clears its buffers first and
//! changes only the settings that differ; the instance's name is the one
//! the campaign journaled (`knobs::TraceGuard`), which removes it at the
//! end, on Ctrl-C or a panic, and after a SIGKILL at the next start. A run
//! that fails drops its instance (removing it) and the next makes a new one.
//! Making and removing wait on RCU grace periods, not the CPU, so the
//! campaign makes the instance on a thread while it calibrates
//! ([`Kept::make`]) and removes it on a thread while it stores its last
//! run (`launch::trace_slot`).
//!
//! What it costs, and why it is set up this way (measured on the 2-CPU VM:
//! a pipe ping-pong pinned to one CPU, traced / untraced makespan, medians
//! of alternated trials): the cost is the kernel writing each event, about
//! 0.3 µs an event there whatever the buffer size or the trace clock; a
//! bare instance recording the same events with nobody reading costs the
//! same as this whole recorder (1.23 both). The reader thread, on
//! a CPU the run does not use and reading without blocking (so the kernel
//! never wakes it from the traced CPUs), costs nothing measurable. So:
//! - no `set_event_pid` filter: it adds its own probes to every switch and
//!   wake-up on the traced CPUs, which cost more than the few events of
//!   other tasks it saves there (1.43 → 1.33 without it). The run's tasks
//!   are picked out here instead, which also keeps the migrations the load
//!   balancer makes from the idle task (the pid filter dropped those).
//! - no `sched_wakeup`: `sched_waking` (in the waker's context) and the
//!   switch-in give the wake-up latency, and are what Perfetto builds its
//!   thread states from; `sched_wakeup` only added the moment of the
//!   enqueue (1.43 → 1.37 without it). Both changes: 1.43 → 1.23.
//!
//! The decoder still reads `sched_wakeup` records (older captures, the
//! fixtures).

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{Context, Result, anyhow};

use super::event::{Capture, Event, EventKind, Task};
use super::format::{EventFormat, parse_event_format, parse_header_event, parse_header_page};
use super::ring::Decoder;
use crate::sys::proc::monotonic_ns;
use crate::sys::sched;
use crate::sys::tracefs::{Instance, RawBuffer, cpumask_hex};

/// The tracepoints recorded (all in the `sched` system).
pub const TRACEPOINTS: [&str; 6] = [
    "sched_switch",
    "sched_waking",
    "sched_wakeup_new",
    "sched_migrate_task",
    "sched_process_exit",
    "sched_process_fork",
];

/// How long the reader sleeps when every buffer is empty.
pub const DRAIN_INTERVAL: Duration = Duration::from_millis(20);

/// Bytes a buffer holds per event, roughly: a switch record is 68 bytes
/// with its header, a wake-up 40.
const BYTES_PER_EVENT: f64 = 64.0;

/// Events per second per CPU to size the buffer for: a workload that
/// blocks and wakes (pipes, sockets, timers, I/O) can switch every few µs
/// (this machine's pinned pipe ping-pong: 5 to 8 µs per round trip, two
/// switches and two wakings each); a CPU-bound one switches at most at
/// each tick or slice end of each of its processes.
pub fn expected_events_per_s(cpu_bound: bool, processes_per_cpu: f64) -> f64 {
    if cpu_bound {
        // Up to a switch and a waking per ms per process, and room for
        // other tasks' events on the run's CPUs (there is no pid filter).
        3_000.0 * processes_per_cpu.max(1.0)
    } else {
        250_000.0
    }
}

/// `buffer_size_kb` (per CPU) for `events_per_s` per CPU: one second of
/// events, 50 of the reader's drain intervals, so a reader held off the
/// CPU for a while loses nothing; at least 1 MiB, at most 64 MiB, and at
/// most 1 GiB over all `cpus` (the kernel gives every CPU a buffer).
pub fn buffer_kb(events_per_s: f64, cpus: usize) -> u64 {
    let want = (events_per_s * BYTES_PER_EVENT / 1024.0).ceil() as u64;
    let cap = (1u64 << 20) / cpus.max(1) as u64;
    want.clamp(1024, 65_536).min(cap.max(256))
}

/// Whether `e` is about one of `tids`: a switch from or to one, a wake-up,
/// migration or exit of one, or any event fired while one held the CPU
/// (`common_pid`): that one is the evidence a switch the kernel never
/// emitted is repaired from (see [`super::derive::Repair`]).
pub fn concerns(e: &Event, tids: &HashSet<i32>) -> bool {
    if tids.contains(&e.common_pid) {
        return true;
    }
    match e.kind {
        EventKind::Switch {
            prev_pid, next_pid, ..
        } => tids.contains(&prev_pid) || tids.contains(&next_pid),
        EventKind::Waking { pid, .. }
        | EventKind::Wakeup { pid, .. }
        | EventKind::Migrate { pid, .. }
        | EventKind::Exit { pid, .. } => tids.contains(&pid),
        EventKind::Fork {
            parent_pid,
            child_pid,
        } => tids.contains(&parent_pid) || tids.contains(&child_pid),
    }
}

/// The tasks whose events are kept, and what one pass over the buffers
/// kept: the run's tasks, and every task one of them forks while recorded.
///
/// The buffers are read one CPU after another, so a child's first events on
/// one CPU can be read before the fork that made it, still unread in its
/// parent CPU's buffer. The kernel writes the fork before the child can
/// run, so the fork is in the buffer by the next pass: events about no
/// followed task are held for one pass and looked at again then.
#[derive(Debug, Default)]
pub struct Following {
    tids: HashSet<i32>,
    /// The last pass's events about no followed task (yet).
    held: Vec<Event>,
    /// Tasks forked by followed ones, in the order seen: (child, parent).
    pub forked: Vec<(i32, i32)>,
}

impl Following {
    pub fn new(tids: HashSet<i32>) -> Following {
        Following {
            tids,
            ..Following::default()
        }
    }

    /// Takes one pass's `events` (and the held ones of the pass before):
    /// forks from followed tasks, in time order, make their children
    /// followed; then the events about followed tasks go to `kept`, this
    /// pass's others are held, the earlier pass's others dropped.
    pub fn pass(&mut self, events: impl Iterator<Item = Event>, kept: &mut Vec<Event>) {
        let mut all: Vec<(Event, bool)> = std::mem::take(&mut self.held)
            .into_iter()
            .map(|e| (e, false))
            .chain(events.map(|e| (e, true)))
            .collect();
        if all
            .iter()
            .any(|(e, _)| matches!(e.kind, EventKind::Fork { .. }))
        {
            // Stable: equal stamps keep each CPU buffer's order.
            all.sort_by_key(|(e, _)| e.ts_ns);
            for (e, _) in &all {
                if let EventKind::Fork {
                    parent_pid,
                    child_pid,
                } = e.kind
                    && self.tids.contains(&parent_pid)
                    && self.tids.insert(child_pid)
                {
                    self.forked.push((child_pid, parent_pid));
                }
            }
        }
        for (e, new) in all {
            if concerns(&e, &self.tids) {
                kept.push(e);
            } else if new {
                self.held.push(e);
            }
        }
    }
}

/// What the reader thread gathered.
#[derive(Default)]
struct Gathered {
    events: Vec<Event>,
    names: HashMap<i32, String>,
    /// Per CPU: events the pages said were lost.
    lost_marked: HashMap<u32, u64>,
    /// Tasks forked by the run's (named at the end).
    forked: Vec<Task>,
}

fn read_all(
    decoder: &Decoder,
    buffers: &mut [RawBuffer],
    following: &mut Following,
    page: &mut [u8],
    scratch: &mut Vec<Event>,
    g: &mut Gathered,
) -> Result<bool> {
    let mut any = false;
    let mut pass = Vec::new();
    for b in buffers.iter_mut() {
        loop {
            let n = b
                .read_page(page)
                .with_context(|| format!("reading the trace buffer of CPU {}", b.cpu()))?;
            if n == 0 {
                break;
            }
            any = true;
            scratch.clear();
            let stats = decoder
                .decode_page(b.cpu(), &page[..n], scratch, &mut g.names)
                .with_context(|| format!("decoding a trace page of CPU {}", b.cpu()))?;
            *g.lost_marked.entry(b.cpu()).or_default() += stats.lost;
            pass.append(scratch);
        }
    }
    following.pass(pass.into_iter(), &mut g.events);
    Ok(any)
}

fn reader(
    decoder: Decoder,
    mut buffers: Vec<RawBuffer>,
    tids: HashSet<i32>,
    stop: Arc<AtomicBool>,
) -> Result<Gathered> {
    let mut page = vec![0u8; decoder.page_bytes()];
    let mut scratch = Vec::new();
    let mut g = Gathered::default();
    let mut following = Following::new(tids);
    loop {
        let stopping = stop.load(Ordering::Acquire);
        let any = read_all(
            &decoder,
            &mut buffers,
            &mut following,
            &mut page,
            &mut scratch,
            &mut g,
        )?;
        // Each new child's process, read while it is most likely alive
        // (a task gone by then is taken for a process of its own: the
        // fork tracepoint does not tell a thread from a process).
        for &(child, _) in &following.forked[g.forked.len()..] {
            g.forked.push(Task {
                tid: child,
                tgid: crate::sys::procfs::tgid(child).unwrap_or(child),
                comm: String::new(),
            });
        }
        if stopping && !any {
            return Ok(g);
        }
        if !any {
            // Parked rather than slept: `Reader::finish` unparks it, so the
            // end of a run does not wait out an interval.
            std::thread::park_timeout(DRAIN_INTERVAL);
        }
    }
}

struct Reader {
    handle: JoinHandle<Result<Gathered>>,
    stop: Arc<AtomicBool>,
}

impl Reader {
    fn finish(self) -> Result<Gathered> {
        self.stop.store(true, Ordering::Release);
        self.handle.thread().unpark();
        self.handle
            .join()
            .map_err(|_| anyhow!("the trace reader thread panicked"))?
    }
}

/// A configured instance a finished run hands to the next one (see the
/// module's doc): not recording, no file of it open. Dropped, it removes
/// the instance.
#[derive(Debug)]
pub struct Kept {
    instance: Instance,
    decoder: Decoder,
    buffer_kb: u64,
    cpumask: String,
    /// The CPUs the last run recorded on.
    cpus: Vec<u32>,
    /// Whether the sched tracepoints are enabled in it: not yet in one
    /// made ahead of the campaign's first run ([`Kept::make`]).
    events_on: bool,
}

impl Kept {
    /// Makes the instance `name` under tracefs `root` and configures it as
    /// [`Recorder::prepare`] would for `cpus` and `buffer_kb` (an earlier
    /// instance of that name, the campaign's own, is removed first), but
    /// leaves its tracepoints off: their probes run on every switch of the
    /// machine, recording or not, so they are enabled by the run that
    /// records. Setting the clock and sizing the buffers each wait for an
    /// RCU grace period (tens of ms here), so a campaign makes its instance
    /// this way on a thread of its own while it calibrates.
    pub fn make(root: &Path, name: &str, cpus: &[u32], buffer_kb: u64) -> Result<Kept> {
        crate::sys::tracefs::remove_instance(root, name)?;
        let instance = Instance::create(root, name)?;
        instance.write("tracing_on", "0")?;
        instance.write("trace_clock", "mono")?;
        instance.write("buffer_size_kb", &buffer_kb.to_string())?;
        let cpumask = cpumask_hex(cpus);
        instance.write("tracing_cpumask", &cpumask)?;
        let formats: Vec<EventFormat> = TRACEPOINTS
            .iter()
            .map(|t| {
                parse_event_format(&instance.read(&format!("events/sched/{t}/format"))?)
                    .with_context(|| format!("the format of sched:{t}"))
            })
            .collect::<Result<_>>()?;
        let decoder = Decoder::new(
            parse_header_page(&instance.read("events/header_page")?)?,
            parse_header_event(&instance.read("events/header_event")?)?,
            &formats,
        )?;
        Ok(Kept {
            instance,
            decoder,
            buffer_kb,
            cpumask,
            cpus: cpus.to_vec(),
            events_on: false,
        })
    }
}

/// One run's recording, from set-up to the finished [`Capture`]. Dropped
/// unfinished (an error, Ctrl-C), it stops its reader and removes its
/// instance.
pub struct Recorder {
    // Dropped after `reader` (see Drop): the instance can only be removed
    // once the reader's files are closed.
    instance: Option<Instance>,
    decoder: Decoder,
    buffer_kb: u64,
    cpumask: String,
    cpus: Vec<u32>,
    /// Per traced CPU, its loss counters when the run's recording began
    /// (a reused instance's count from earlier runs is not this run's).
    lost_before: Vec<u64>,
    tasks: Vec<Task>,
    reader: Option<Reader>,
    start_ns: u64,
}

impl Recorder {
    /// Makes and configures the instance `name` under tracefs `root`,
    /// recording nothing yet: clock `mono`, `cpus` only, `buffer_kb` per
    /// CPU, the sched tracepoints enabled (for every task on those CPUs:
    /// the run's are picked out in user space, see the module's doc).
    /// With `kept` (the previous run's instance of that name), reuses it:
    /// its buffers cleared, only what differs written; should that fail,
    /// it is removed and a new one made.
    pub fn prepare(
        root: &Path,
        name: &str,
        cpus: &[u32],
        buffer_kb: u64,
        kept: Option<Kept>,
    ) -> Result<Recorder> {
        let kept = kept.filter(|k| k.instance.dir() == root.join("instances").join(name));
        if let Some(k) = kept
            && let Ok(r) = Self::reuse(k, cpus, buffer_kb)
        {
            return Ok(r);
        }
        Self::create(root, name, cpus, buffer_kb)
    }

    /// The previous run's instance, cleared and set for this run.
    fn reuse(k: Kept, cpus: &[u32], buffer_kb: u64) -> Result<Recorder> {
        let Kept {
            instance,
            decoder,
            buffer_kb: had_kb,
            cpumask: had_mask,
            cpus: had_cpus,
            events_on,
        } = k;
        instance.write("tracing_on", "0")?;
        if !events_on {
            for t in TRACEPOINTS {
                instance.write(&format!("events/sched/{t}/enable"), "1")?;
            }
        }
        if had_kb != buffer_kb {
            instance.write("buffer_size_kb", &buffer_kb.to_string())?;
        }
        let cpumask = cpumask_hex(cpus);
        if had_mask != cpumask {
            instance.write("tracing_cpumask", &cpumask)?;
        }
        // The last run's reader drained its buffers after recording
        // stopped, so they are normally empty; if one is not, opening
        // `trace` for writing with truncation empties them all (it waits
        // for an RCU grace period, 10 to 20 ms here, so only then):
        // nothing of an earlier run is read as this one's.
        let mut left = 0;
        for &c in had_cpus.iter().chain(cpus) {
            left += instance.stats(c)?.entries;
        }
        if left > 0 {
            instance.write("trace", "")?;
        }
        Self::ready(instance, decoder, cpus, buffer_kb, cpumask)
    }

    /// A new instance (one an earlier run could not remove is removed
    /// first: the name is the campaign's own, journaled).
    fn create(root: &Path, name: &str, cpus: &[u32], buffer_kb: u64) -> Result<Recorder> {
        Self::reuse(Kept::make(root, name, cpus, buffer_kb)?, cpus, buffer_kb)
    }

    fn ready(
        instance: Instance,
        decoder: Decoder,
        cpus: &[u32],
        buffer_kb: u64,
        cpumask: String,
    ) -> Result<Recorder> {
        // Not recording: the counters stay as they are until `start`.
        let lost_before = cpus
            .iter()
            .map(|&c| Ok(instance.stats(c)?.lost()))
            .collect::<Result<Vec<u64>>>()?;
        Ok(Recorder {
            instance: Some(instance),
            decoder,
            buffer_kb,
            cpumask,
            cpus: cpus.to_vec(),
            lost_before,
            tasks: Vec::new(),
            reader: None,
            start_ns: 0,
        })
    }

    fn instance(&self) -> Result<&Instance> {
        self.instance
            .as_ref()
            .ok_or_else(|| anyhow!("the tracing instance is gone"))
    }

    /// Keeps the events about `tasks` (the run's workers, and the WRR
    /// dispatcher's threads) and the tasks they fork, and starts draining the buffers, from a thread
    /// kept on `reader_cpus` when there are any (CPUs the run does not use,
    /// so that reading never takes the workers' CPU).
    pub fn follow(&mut self, tasks: Vec<Task>, reader_cpus: &[usize]) -> Result<()> {
        let tids: HashSet<i32> = tasks.iter().map(|t| t.tid).collect();
        let buffers = self
            .cpus
            .iter()
            .map(|&c| self.instance()?.raw_buffer(c))
            .collect::<Result<Vec<_>>>()?;
        let stop = Arc::new(AtomicBool::new(false));
        let decoder = self.decoder.clone();
        let flag = Arc::clone(&stop);
        let handle = std::thread::Builder::new()
            .name("trace-reader".into())
            .spawn({
                let cpus = reader_cpus.to_vec();
                move || {
                    if !cpus.is_empty() {
                        // Best effort: unpinned, the reader still works.
                        let _ = sched::set_affinity_raw(sched::gettid(), &sched::cpu_set(&cpus));
                    }
                    reader(decoder, buffers, tids, flag)
                }
            })
            .context("starting the trace reader thread")?;
        self.reader = Some(Reader { handle, stop });
        self.tasks = tasks;
        Ok(())
    }

    /// Starts recording (just before the workers are released).
    pub fn start(&mut self) -> Result<()> {
        self.start_ns = monotonic_ns();
        self.instance()?.write("tracing_on", "1")
    }

    /// Stops recording (after the last worker has exited), drains what is
    /// left and counts what was lost; the instance, its files closed, is
    /// handed back for the next run.
    pub fn finish(mut self) -> Result<(Capture, Kept)> {
        let instance = self
            .instance
            .take()
            .ok_or_else(|| anyhow!("finished twice"))?;
        instance.write("tracing_on", "0")?;
        let end_ns = monotonic_ns();
        let g = match self.reader.take() {
            Some(r) => r.finish()?,
            None => Gathered::default(),
        };
        let mut lost_events = 0;
        for (&cpu, &before) in self.cpus.iter().zip(&self.lost_before) {
            let counted = instance.stats(cpu)?.lost().saturating_sub(before);
            let marked = g.lost_marked.get(&cpu).copied().unwrap_or(0);
            // The page markers and the counters tell of the same losses:
            // the larger is the better count.
            lost_events += counted.max(marked);
        }
        let kept = Kept {
            instance,
            decoder: self.decoder.clone(),
            buffer_kb: self.buffer_kb,
            cpumask: std::mem::take(&mut self.cpumask),
            cpus: self.cpus.clone(),
            events_on: true,
        };
        let mut events = g.events;
        // Stable: equal stamps keep each CPU buffer's order.
        events.sort_by_key(|e| e.ts_ns);
        let tasks = std::mem::take(&mut self.tasks)
            .into_iter()
            .chain(g.forked)
            .map(|t| match (t.comm.is_empty(), g.names.get(&t.tid)) {
                (true, Some(n)) => Task {
                    comm: n.clone(),
                    ..t
                },
                _ => t,
            })
            .collect();
        let capture = Capture {
            events,
            tasks,
            cpus: self.cpus.clone(),
            start_ns: self.start_ns,
            end_ns,
            release_ns: None,
            lost_events,
        };
        Ok((capture, kept))
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        if let Some(r) = self.reader.take() {
            let _ = r.finish();
        }
        // `instance` drops after this, removing the instance.
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(kind: EventKind) -> Event {
        Event {
            ts_ns: 1,
            cpu: 0,
            common_pid: 7,
            kind,
        }
    }

    #[test]
    fn only_events_about_the_tasks_are_kept() {
        let tids: HashSet<i32> = [10, 11].into_iter().collect();
        let switch = |prev_pid, next_pid| {
            ev(EventKind::Switch {
                prev_pid,
                prev_prio: 120,
                prev_state: 0,
                next_pid,
                next_prio: 120,
            })
        };
        assert!(concerns(&switch(10, 0), &tids));
        assert!(concerns(&switch(0, 11), &tids));
        assert!(!concerns(&switch(0, 12), &tids));
        // Not ours, woken by another not ours (7): dropped.
        let waking = |pid| {
            ev(EventKind::Waking {
                pid,
                prio: 120,
                target_cpu: 0,
            })
        };
        assert!(!concerns(&waking(99), &tids));
        // Woken by one of ours: kept, as evidence that it held the CPU.
        assert!(concerns(
            &Event {
                common_pid: 10,
                ..waking(99)
            },
            &tids
        ));
        assert!(concerns(&waking(10), &tids));
        assert!(concerns(&ev(EventKind::Exit { pid: 11, prio: 120 }), &tids));
        assert!(!concerns(
            &ev(EventKind::Migrate {
                pid: 3,
                prio: 120,
                orig_cpu: 0,
                dest_cpu: 1
            }),
            &tids
        ));
    }

    #[test]
    fn forks_are_followed_even_when_read_after_the_childs_events() {
        let fork = |ts_ns, parent_pid, child_pid| Event {
            ts_ns,
            cpu: 0,
            common_pid: parent_pid,
            kind: EventKind::Fork {
                parent_pid,
                child_pid,
            },
        };
        let on = |ts_ns, cpu, pid| Event {
            ts_ns,
            cpu,
            common_pid: 0,
            kind: EventKind::Switch {
                prev_pid: 0,
                prev_prio: 120,
                prev_state: 0,
                next_pid: pid,
                next_prio: 120,
            },
        };
        let mut f = Following::new([10].into_iter().collect());
        let mut kept = Vec::new();
        // Pass 1: CPU 1's buffer already has the child 20 running (and 99,
        // nobody's); CPU 0's fork was not yet readable.
        f.pass([on(200, 1, 20), on(210, 1, 99)].into_iter(), &mut kept);
        assert!(kept.is_empty());
        // Pass 2: the fork (10 → 20), and 20 forks 21 in the same pass,
        // read in buffer order (21's fork on CPU 1 before 20's on CPU 0).
        f.pass(
            [fork(300, 20, 21), on(310, 1, 21), fork(100, 10, 20)].into_iter(),
            &mut kept,
        );
        assert_eq!(f.forked, vec![(20, 10), (21, 20)]);
        let mut ts: Vec<u64> = kept.iter().map(|e| e.ts_ns).collect();
        ts.sort_unstable();
        assert_eq!(ts, vec![100, 200, 300, 310]);
        // 99's event was held one pass, then dropped; a fork by nobody's
        // task is not followed.
        kept.clear();
        f.pass([fork(400, 99, 98), on(410, 0, 98)].into_iter(), &mut kept);
        f.pass(std::iter::empty(), &mut kept);
        assert!(kept.is_empty());
        assert_eq!(f.forked.len(), 2);
        // A fork from a followed task is itself kept.
        assert!(concerns(&fork(1, 10, 50), &[10].into_iter().collect()));
    }

    #[test]
    fn buffer_sizes() {
        // A CPU-bound run: the 1 MiB floor.
        assert_eq!(buffer_kb(expected_events_per_s(true, 4.0), 2), 1024);
        // Switch-heavy: a second of 250k events of 64 bytes.
        assert_eq!(buffer_kb(expected_events_per_s(false, 2.0), 2), 15_625);
        // Capped at 64 MiB per CPU, and 1 GiB in all.
        assert_eq!(buffer_kb(1e9, 2), 65_536);
        assert_eq!(buffer_kb(1e9, 256), 4096);
        assert_eq!(buffer_kb(1e9, 100_000), 256);
    }
}
