//! Loading schedlab's sched_ext WRR scheduler (`src/bpf/wrr.bpf.c`, built
//! by this crate's build.rs) with libbpf-rs, feeding it the
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

use schedlab::sys::clock::thread_cpu_ns;
use schedlab::wrr::ext_hook::LoadedScheduler;
use schedlab::wrr::ext_records::{ExitInfo, Unloaded, Worker, c_text, group_value, parse_turn};

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

impl LoadedScheduler for WrrExt {
    fn unload(&mut self) -> Unloaded {
        WrrExt::unload(self)
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
