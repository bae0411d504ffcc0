//! Loading schedlab's sched_ext WRR scheduler (`src/bpf/wrr.bpf.c`, built
//! by build.rs with the `ext` feature) with libbpf-rs, feeding it the
//! workers' slices, reading the turns it reports through its ring buffer,
//! and unloading it.
//!
//! One thread owns the BPF object for its whole life: it loads the
//! program, fills the `tasks` map (worker pid → slice, queue index, CPU:
//! the scheduler puts each task the worker's tree forks into its group,
//! and a turn is the group's), attaches the struct_ops
//! link (from then on the kernel schedules SCHED_EXT tasks with it), reads
//! the ring buffer until told to stop, then drops the link (the kernel
//! unloads the scheduler and every SCHED_EXT task goes back to the fair
//! class), drains what is left and reads why the scheduler ended.
//!
//! Nothing of this outlives schedlab: the link is not pinned, so if
//! schedlab dies in any way (a panic, SIGKILL) the kernel closes the link's
//! descriptor and unloads the scheduler itself; a dropped [`WrrExt`] stops
//! and unloads at once. There is nothing for a journal to restore.

use std::cell::{Cell, RefCell};
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{Result, bail};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, RingBufferBuilder};

use super::clock::thread_cpu_ns;

/// The skeleton libbpf-cargo generated (its unsafe blocks are libbpf's FFI).
mod skel {
    #![allow(
        clippy::all,
        clippy::pedantic,
        clippy::undocumented_unsafe_blocks,
        unsafe_op_in_unsafe_fn,
        non_camel_case_types
    )]
    include!(concat!(env!("OUT_DIR"), "/wrr.skel.rs"));
}
use skel::WrrSkelBuilder;

/// The scheduler's name as sched_ext shows it (`root/ops`).
pub const OPS_NAME: &str = "schedlab_wrr";

/// Set to 1, the scheduler never dispatches schedlab's tasks, so that
/// sched_ext's watchdog ejects it (fault injection for `scripts/vm-test`).
pub const TEST_STALL_ENV: &str = "SCHEDLAB_TEST_EXT_STALL";

/// How often the ring buffer is read, and so how soon a stop is seen: the
/// BPF side submits turns without waking the reader, so this is its only
/// wake-up (the ring holds 4 MiB, some 75,000 turns).
const POLL: Duration = Duration::from_millis(100);

/// Size of `struct wrr_turn` in wrr.bpf.c.
const TURN_BYTES: usize = 56;
/// Size of `struct wrr_group` in wrr.bpf.c.
const GROUP_BYTES: usize = 80;

/// sched_ext's `SCX_EXIT_ERROR` (`enum scx_exit_kind`): kinds from here on
/// are errors (the BPF scheduler's, or the watchdog's).
pub const SCX_EXIT_ERROR: i32 = 1024;

/// How a turn ended (`WRR_END_*` in wrr.bpf.c).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnEnd {
    /// The slice was used up.
    Expired,
    /// No task of the worker's tree was left runnable (the last one went
    /// to sleep, or a task other than the worker's process exited).
    Blocked,
    /// The worker's process exited, no other task of its tree runnable.
    Exited,
    /// A task of the tree left sched_ext (the scheduler was unloaded, or
    /// its policy changed).
    Left,
}

/// One turn of one worker, as the BPF scheduler reported it: the turn of
/// the worker's group (its process and every task its tree forked), under
/// the worker's pid. Times are CLOCK_MONOTONIC ns (`bpf_ktime_get_ns`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Turn {
    pub pid: i32,
    pub cpu: u32,
    /// When a task of the group started running with a fresh turn.
    pub start_ns: u64,
    /// When the turn was used up, the group had no runnable task left (it
    /// blocked or exited), or it left.
    pub end_ns: u64,
    /// The group's CPU time over the turn (its tasks' sum_exec_runtime
    /// over their runs in it).
    pub cpu_ns: u64,
    /// The worker's slice.
    pub slice_ns: u64,
    /// The CPU time this turn aimed at: the slice minus what the group's
    /// turns since it last forfeited one got beyond it (plus what they fell
    /// short), within ±½ slice.
    pub target_ns: u64,
    pub end: TurnEnd,
    /// Times a task of the group was put on the CPU in this turn: more
    /// than 1 when a higher class preempted it and it resumed its slice,
    /// or when the group's tasks took the turn in succession.
    pub runs: u32,
}

/// A `struct wrr_turn` record from the ring buffer; None if malformed.
pub fn parse_turn(data: &[u8]) -> Option<Turn> {
    if data.len() < TURN_BYTES {
        return None;
    }
    let u32_at = |o: usize| u32::from_ne_bytes(data[o..o + 4].try_into().unwrap_or([0; 4]));
    let u64_at = |o: usize| u64::from_ne_bytes(data[o..o + 8].try_into().unwrap_or([0; 8]));
    let end = match u32_at(48) {
        0 => TurnEnd::Expired,
        1 => TurnEnd::Blocked,
        2 => TurnEnd::Exited,
        3 => TurnEnd::Left,
        _ => return None,
    };
    Some(Turn {
        pid: u32_at(0) as i32,
        cpu: u32_at(4),
        start_ns: u64_at(8),
        end_ns: u64_at(16),
        cpu_ns: u64_at(24),
        slice_ns: u64_at(32),
        target_ns: u64_at(40),
        end,
        runs: u32_at(52),
    })
}

/// One worker the scheduler is loaded for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Worker {
    pub pid: i32,
    pub slice_ns: u64,
    /// The CPU it is pinned to (its tree's turns are taken there).
    pub cpu: u32,
}

/// A `struct wrr_group` value: the worker's slice, pid, queue index and
/// CPU, and an empty turn.
fn group_value(w: &Worker, index: u32) -> [u8; GROUP_BYTES] {
    let mut v = [0u8; GROUP_BYTES];
    v[..8].copy_from_slice(&w.slice_ns.to_ne_bytes());
    v[8..12].copy_from_slice(&w.pid.to_ne_bytes());
    v[12..16].copy_from_slice(&index.to_ne_bytes());
    v[16..20].copy_from_slice(&w.cpu.to_ne_bytes());
    v
}

/// Why sched_ext ended the scheduler (`struct scx_exit_info`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExitInfo {
    /// `enum scx_exit_kind`: 64 (SCX_EXIT_UNREG) when schedlab unloaded it.
    pub kind: i32,
    pub code: i64,
    pub reason: String,
    pub msg: String,
}

impl ExitInfo {
    /// Whether the kernel ended the scheduler for an error (a BPF error,
    /// the watchdog's stall detection) rather than at schedlab's request.
    pub fn is_error(&self) -> bool {
        self.kind >= SCX_EXIT_ERROR
    }

    /// "reason: message", as the kernel put them.
    pub fn describe(&self) -> String {
        match (self.reason.is_empty(), self.msg.is_empty()) {
            (false, false) => format!("{} ({})", self.reason, self.msg),
            (false, true) => self.reason.clone(),
            (true, false) => self.msg.clone(),
            (true, true) => format!("exit kind {}", self.kind),
        }
    }
}

/// Everything the scheduler reported, after it was unloaded.
#[derive(Debug, Default)]
pub struct Unloaded {
    pub turns: Vec<Turn>,
    /// None if the scheduler never ran its exit callback.
    pub exit: Option<ExitInfo>,
    /// Turns the BPF side could not report (ring buffer full).
    pub lost_turns: u64,
    /// Tasks forked in a worker's tree that the BPF side could not put in
    /// its group (no memory for their task storage): they ran first come,
    /// first served.
    pub lost_members: u64,
    /// Records that could not be read.
    pub bad_records: u64,
    /// CPU time of the thread that read the ring buffer while the
    /// scheduler was attached (schedlab's only user-space work for this
    /// mechanism while it runs).
    pub reader_cpu_ns: u64,
    /// CPU time spent loading the scheduler (libbpf reading the kernel's
    /// BTF, the verifier) and attaching it, before the run.
    pub load_cpu_ns: u64,
    pub errors: Vec<String>,
}

/// schedlab's sched_ext scheduler, loaded and attached.
pub struct WrrExt {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Unloaded>>,
}

impl WrrExt {
    /// Load the scheduler with every worker's slice and CPU, and attach
    /// it: SCHED_EXT tasks are scheduled by it from when this returns.
    pub fn load(tasks: Vec<Worker>) -> Result<WrrExt> {
        // One run queue (DSQ) per possible CPU.
        let nr_cpus = libbpf_rs::num_possible_cpus()? as u32;
        let (ready_tx, ready_rx) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("wrr-ext".into())
            .spawn(move || run(nr_cpus, tasks, ready_tx, flag))?;
        let mut ext = WrrExt {
            stop,
            thread: Some(thread),
        };
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(ext),
            Ok(Err(message)) => {
                ext.unload();
                bail!(message)
            }
            Err(_) => {
                ext.unload();
                bail!("the sched_ext thread ended while loading the scheduler")
            }
        }
    }

    /// Detach the scheduler (the kernel unloads it) and return what it
    /// reported. Idempotent: a second call returns nothing.
    pub fn unload(&mut self) -> Unloaded {
        self.stop.store(true, Ordering::Release);
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(u)) => u,
            Some(Err(_)) => Unloaded {
                errors: vec!["the sched_ext thread panicked".to_string()],
                ..Unloaded::default()
            },
            None => Unloaded::default(),
        }
    }
}

impl Drop for WrrExt {
    fn drop(&mut self) {
        self.unload();
    }
}

fn run(
    nr_cpus: u32,
    tasks: Vec<Worker>,
    ready: mpsc::Sender<Result<(), String>>,
    stop: Arc<AtomicBool>,
) -> Unloaded {
    match serve(nr_cpus, &tasks, &ready, &stop) {
        Ok(u) => u,
        Err(message) => {
            let _ = ready.send(Err(message));
            Unloaded::default()
        }
    }
}

/// Load, attach, read until stopped, detach. Err only before the scheduler
/// is attached (then nothing is left loaded).
fn serve(
    nr_cpus: u32,
    tasks: &[Worker],
    ready: &mpsc::Sender<Result<(), String>>,
    stop: &AtomicBool,
) -> Result<Unloaded, String> {
    let load_start = thread_cpu_ns().unwrap_or(0);
    let mut object = MaybeUninit::uninit();
    let mut open = WrrSkelBuilder::default()
        .open(&mut object)
        .map_err(|e| format!("opening the sched_ext scheduler's BPF object: {e}"))?;
    if let Some(ro) = open.maps.rodata_data.as_mut() {
        ro.nr_cpus = nr_cpus.max(1);
        ro.nr_groups = u32::try_from(tasks.len())
            .map_err(|_| format!("{} workers are too many for one run", tasks.len()))?;
        ro.test_stall = std::env::var(TEST_STALL_ENV).is_ok_and(|v| v == "1");
    }
    let mut skel = open.load().map_err(|e| {
        format!("loading the sched_ext scheduler (libbpf's log is on standard error): {e}")
    })?;
    for (index, w) in (0u32..).zip(tasks) {
        skel.maps
            .tasks
            .update(&w.pid.to_ne_bytes(), &group_value(w, index), MapFlags::ANY)
            .map_err(|e| format!("giving worker pid {} its slice: {e}", w.pid))?;
    }
    let link = skel
        .maps
        .wrr_ops
        .attach_struct_ops()
        .map_err(|e| format!("attaching the scheduler to sched_ext: {e}"))?;

    let turns = RefCell::new(Vec::new());
    let bad = Cell::new(0u64);
    let mut builder = RingBufferBuilder::new();
    builder
        .add(&skel.maps.turns, |data: &[u8]| {
            match parse_turn(data) {
                Some(t) => turns.borrow_mut().push(t),
                None => bad.set(bad.get() + 1),
            }
            0
        })
        .map_err(|e| format!("reading the scheduler's ring buffer: {e}"))?;
    let ring = builder
        .build()
        .map_err(|e| format!("reading the scheduler's ring buffer: {e}"))?;
    let attached = thread_cpu_ns().unwrap_or(0);
    let _ = ready.send(Ok(()));

    let mut errors = Vec::new();
    while !stop.load(Ordering::Acquire) {
        // poll() sleeps (turns are submitted without a wake-up) and
        // consumes only on a wake-up: consume after it.
        if let Err(e) = ring.poll(POLL).and_then(|()| ring.consume()) {
            errors.push(format!("reading the scheduler's ring buffer: {e}"));
            break;
        }
    }
    // Unload: the kernel runs the exit callback and moves every SCHED_EXT
    // task back to the fair class, ending their turns.
    let reader_cpu_ns = thread_cpu_ns().unwrap_or(0).saturating_sub(attached);
    drop(link);
    if let Err(e) = ring.consume() {
        errors.push(format!("reading the scheduler's last turns: {e}"));
    }
    drop(ring);
    let (exit, lost_turns, lost_members) = match skel.maps.bss_data.as_ref() {
        Some(bss) => {
            let e = &bss.exit_info;
            let exit = (e.kind != 0).then(|| ExitInfo {
                kind: e.kind,
                code: e.exit_code,
                reason: c_text(&e.reason),
                msg: c_text(&e.msg),
            });
            (exit, bss.lost_turns, bss.lost_members)
        }
        None => (None, 0, 0),
    };
    Ok(Unloaded {
        turns: turns.into_inner(),
        exit,
        lost_turns,
        lost_members,
        bad_records: bad.get(),
        reader_cpu_ns,
        load_cpu_ns: attached.saturating_sub(load_start),
        errors,
    })
}

/// A NUL-terminated C string in a fixed array.
fn c_text(chars: &[i8]) -> String {
    let bytes: Vec<u8> = chars
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(end: u32) -> Vec<u8> {
        let mut d = Vec::new();
        d.extend_from_slice(&4242u32.to_ne_bytes());
        d.extend_from_slice(&1u32.to_ne_bytes());
        for v in [100u64, 10_100, 9_990, 10_000, 9_500] {
            d.extend_from_slice(&v.to_ne_bytes());
        }
        d.extend_from_slice(&end.to_ne_bytes());
        d.extend_from_slice(&2u32.to_ne_bytes());
        d
    }

    #[test]
    fn parses_a_turn_record() {
        let t = parse_turn(&record(0)).unwrap();
        assert_eq!(
            t,
            Turn {
                pid: 4242,
                cpu: 1,
                start_ns: 100,
                end_ns: 10_100,
                cpu_ns: 9_990,
                slice_ns: 10_000,
                target_ns: 9_500,
                end: TurnEnd::Expired,
                runs: 2,
            }
        );
        assert_eq!(parse_turn(&record(1)).unwrap().end, TurnEnd::Blocked);
        assert_eq!(parse_turn(&record(3)).unwrap().end, TurnEnd::Left);
        assert_eq!(parse_turn(&record(9)), None);
        assert_eq!(parse_turn(&record(0)[..48]), None);
    }

    #[test]
    fn group_value_holds_slice_pid_index_and_cpu() {
        let w = Worker {
            pid: 4242,
            slice_ns: 30_000_000,
            cpu: 1,
        };
        let v = group_value(&w, 7);
        assert_eq!(u64::from_ne_bytes(v[..8].try_into().unwrap()), 30_000_000);
        assert_eq!(i32::from_ne_bytes(v[8..12].try_into().unwrap()), 4242);
        assert_eq!(u32::from_ne_bytes(v[12..16].try_into().unwrap()), 7);
        assert_eq!(u32::from_ne_bytes(v[16..20].try_into().unwrap()), 1);
        assert!(v[20..].iter().all(|&b| b == 0), "the turn starts empty");
    }

    #[test]
    fn exit_info_describes_itself() {
        let e = ExitInfo {
            kind: 1026,
            code: 0,
            reason: "runnable task stall".into(),
            msg: "pi[123] failed to run for 5.2s".into(),
        };
        assert!(e.is_error());
        assert_eq!(
            e.describe(),
            "runnable task stall (pi[123] failed to run for 5.2s)"
        );
        let unreg = ExitInfo {
            kind: 64,
            code: 0,
            reason: String::new(),
            msg: String::new(),
        };
        assert!(!unreg.is_error());
        assert_eq!(unreg.describe(), "exit kind 64");
        assert_eq!(c_text(&[104, 105, 0, 120]), "hi");
    }
}
