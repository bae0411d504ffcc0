//! The aio workload: random, block-aligned reads and writes on one shared
//! file through io_uring, keeping `queue_depth` operations in flight — the
//! shape of an fio `ioengine=io_uring` random-I/O job.
//!
//! The parent creates the file (`aio.dat`, `file_bytes` of non-zero
//! pseudo-random bytes, fsynced) in the run directory; every process of the
//! run opens it, with O_DIRECT when `direct` is set (reads and writes reach
//! the device) or through the page cache otherwise. Offsets are uniform over
//! the file's whole blocks, from a generator seeded by (`seed`, process
//! index), so each process repeats its own offset sequence run after run.
//! Each operation is a read with probability `read_pct`/100, else a write of
//! the slot's buffer back to the file (the buffers only ever hold file data
//! or the non-zero initial fill, so the file stays non-zero).
//!
//! The submission loop is fio's io_uring engine at its defaults: one
//! `io_uring_enter` per operation issued, and when the queue is full, reap
//! every completion available, sleeping only when there is none. The ring
//! is set up as fio sets it up (cooperative task running, single issuer,
//! deferred task work, where the kernel has them). How often the worker
//! sleeps and wakes is what the scheduler sees, so this follows the
//! reference tool rather than the fewest system calls: a loop that batched
//! submissions and always slept until the next completion measured 15–25%
//! below fio on the same virtual disk.
//!
//! Work unit: bytes transferred. Figures: `mb_per_s` (1e6 bytes/s), `iops`,
//! `ops`, `reads`, `writes`, and `lat_p50_us` / `lat_p99_us`, the completion
//! latency of one operation (from just before the `io_uring_enter` that
//! submitted it to the reap that found it complete) taken from a log-linear
//! histogram (≤ 1/64 relative error), so memory stays bounded however long
//! a run is.
//!
//! Checks: every completion must transfer exactly the bytes asked for, and
//! every read must have overwritten the zeroed first and last bytes of its
//! buffer with file data (which holds no zero byte).

use super::copy::{DIRECT_ALIGN, direct_unsupported, fill_nonzero, is_einval};
use super::kind::{Entry, Kind, scale_stop, stop_cost_s};
use super::{Deadline, Rates, Stop, WorkContext, WorkOutput, Workload, elapsed_ns, figures};
use crate::rng::SplitMix64;
use crate::sys::uring::SlotRing;
use anyhow::{Context, bail, ensure};
use io_uring::IoUring;
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::io::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Asynchronous random I/O through io_uring on one shared file. Work unit:
/// bytes transferred (`Stop::Work(bytes)` or a duration).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AioParams {
    pub stop: Stop,
    /// Size of the shared file `aio.dat` the parent creates.
    pub file_bytes: u64,
    /// Bytes per operation; offsets are multiples of it.
    pub block_bytes: u64,
    /// Operations kept in flight.
    pub queue_depth: u32,
    /// Share of operations that are reads, in percent (0..=100).
    pub read_pct: u8,
    /// O_DIRECT (block_bytes a multiple of 4096) rather than the page cache.
    pub direct: bool,
    /// Seed of the random offsets (mixed with the process index);
    /// `aio::DEFAULT_SEED` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
}

/// Name of the shared file the aio workload works on, inside the run directory.
pub const AIO_FILE: &str = "aio.dat";

/// Largest queue depth accepted (io_uring itself allows 32768 entries).
pub const MAX_QUEUE_DEPTH: u32 = 4096;

/// Largest block accepted.
pub const MAX_BLOCK_BYTES: u64 = 64 << 20;

/// Largest total of in-flight buffers, `queue_depth × block_bytes`, which
/// each process allocates.
pub const MAX_BUFFER_BYTES: u64 = 1 << 30;

/// Offset seed when `AioParams::seed` is not given.
pub const DEFAULT_SEED: u64 = 0xA10_5EED_0000_0001;

/// The sysctl that switches io_uring off (named in setup errors).
pub const IO_URING_DISABLED: &str = "/proc/sys/kernel/io_uring_disabled";

/// Path of the shared file inside a run directory.
pub fn file_path(dir: &Path) -> PathBuf {
    dir.join(AIO_FILE)
}

/// The parameter rules `run` enforces (the spec validator reports the same
/// rules against its keys).
pub fn check_params(p: &AioParams) -> anyhow::Result<()> {
    ensure!(
        (1..=MAX_BLOCK_BYTES).contains(&p.block_bytes),
        "block_bytes must be between 1 and {MAX_BLOCK_BYTES}, got {}",
        p.block_bytes
    );
    if p.direct && !p.block_bytes.is_multiple_of(DIRECT_ALIGN) {
        bail!(
            "block_bytes = {} is not a multiple of {DIRECT_ALIGN}, which O_DIRECT (direct = true) requires",
            p.block_bytes
        );
    }
    ensure!(
        (1..=MAX_QUEUE_DEPTH).contains(&p.queue_depth),
        "queue_depth must be between 1 and {MAX_QUEUE_DEPTH}, got {}",
        p.queue_depth
    );
    ensure!(
        p.read_pct <= 100,
        "read_pct must be between 0 and 100, got {}",
        p.read_pct
    );
    ensure!(
        u64::from(p.queue_depth) * p.block_bytes <= MAX_BUFFER_BYTES,
        "queue_depth × block_bytes = {} × {} exceeds {MAX_BUFFER_BYTES} bytes of buffers",
        p.queue_depth,
        p.block_bytes
    );
    ensure!(
        p.file_bytes >= p.block_bytes,
        "file_bytes = {} is smaller than one block (block_bytes = {})",
        p.file_bytes,
        p.block_bytes
    );
    Ok(())
}

/// Worker side: run on `aio.dat` in the run directory.
pub fn run(p: &AioParams, ctx: &WorkContext) -> anyhow::Result<WorkOutput> {
    run_file(p, &file_path(&ctx.dir), ctx.index, ctx.release_ns)
}

/// Run on an existing file at `path` as process `index` (the offsets
/// depend on it). Also used in-process by `schedlab bench aio`.
pub fn run_file(
    p: &AioParams,
    path: &Path,
    index: usize,
    release_ns: Option<u64>,
) -> anyhow::Result<WorkOutput> {
    let stats = run_stats(p, path, index, release_ns)?;
    Ok(stats.output())
}

/// Totals of one run, before they become figures.
#[derive(Debug, Clone)]
struct AioStats {
    bytes: u64,
    reads: u64,
    writes: u64,
    elapsed_ns: u64,
    latency: LatencyHistogram,
}

impl AioStats {
    fn ops(&self) -> u64 {
        self.reads + self.writes
    }

    fn output(&self) -> WorkOutput {
        let secs = self.elapsed_ns.max(1) as f64 / 1e9;
        WorkOutput {
            work: self.bytes,
            elapsed_ns: self.elapsed_ns,
            figures: figures([
                ("mb_per_s", self.bytes as f64 / secs / 1e6),
                ("iops", self.ops() as f64 / secs),
                ("ops", self.ops() as f64),
                ("reads", self.reads as f64),
                ("writes", self.writes as f64),
                ("lat_p50_us", self.latency.quantile(0.50) / 1e3),
                ("lat_p99_us", self.latency.quantile(0.99) / 1e3),
            ]),
            latency: Default::default(),
        }
    }
}

/// The offset generator of process `index`: the index is hashed into the
/// seed, so the processes' sequences are unrelated rather than shifted
/// copies of one SplitMix64 stream.
fn offset_rng(seed: Option<u64>, index: usize) -> SplitMix64 {
    let mix = SplitMix64::new(index as u64 ^ 0x6A09_E667_F3BC_C908).next_u64();
    SplitMix64::new(seed.unwrap_or(DEFAULT_SEED) ^ mix)
}

/// Open the shared file for the operations `p` does.
fn open_file(p: &AioParams, path: &Path) -> anyhow::Result<File> {
    let flags = if p.direct { libc::O_DIRECT } else { 0 };
    OpenOptions::new()
        .read(true)
        .write(p.read_pct < 100)
        .custom_flags(flags)
        .open(path)
        .map_err(|e| {
            if p.direct && is_einval(&e) {
                anyhow::Error::new(e).context(direct_unsupported(path))
            } else {
                anyhow::Error::new(e).context(format!(
                    "opening {}; was prepare() run for this workload?",
                    path.display()
                ))
            }
        })
}

/// The error for a failed `io_uring_setup`, naming the sysctl that may
/// have refused it; `disabled` is the sysctl's content, if readable.
fn setup_error(e: std::io::Error, entries: u32, disabled: Option<&str>) -> anyhow::Error {
    let sysctl = match disabled {
        Some(v) => format!("{IO_URING_DISABLED} = {}", v.trim()),
        None => format!("{IO_URING_DISABLED} is not readable"),
    };
    let why = match e.raw_os_error() {
        Some(libc::ENOSYS) => "io_uring is unavailable: this kernel has no io_uring (ENOSYS)",
        Some(libc::EPERM) | Some(libc::EACCES) => {
            "io_uring is unavailable: io_uring_setup was refused (EPERM)"
        }
        Some(libc::ENOMEM) => {
            "io_uring_setup failed for lack of memory (ENOMEM; on kernels before 5.12, raise RLIMIT_MEMLOCK)"
        }
        _ => "io_uring_setup failed",
    };
    anyhow::Error::new(e).context(format!(
        "{why} with {entries} entries; {sysctl} (0: allowed, 1: only for CAP_SYS_ADMIN or \
         the group in /proc/sys/kernel/io_uring_group, 2: disabled for everyone), and a \
         seccomp filter (e.g. a container's) can also forbid io_uring"
    ))
}

/// Set up a ring of `entries` (the kernel rounds up to a power of two).
///
/// Like fio's io_uring engine, it asks for cooperative task running (no
/// inter-processor interrupt per completion; Linux 5.19) and for a single
/// issuer whose completions run only when it waits for them (Linux 6.1),
/// falling back flag by flag on kernels that refuse them (EINVAL). These
/// settle how completions reach the worker, which is part of what the
/// scheduler sees, so they are fixed here rather than left to chance.
fn new_ring(entries: u32) -> anyhow::Result<IoUring> {
    let tiers: [fn(&mut io_uring::Builder); 3] = [
        |b| {
            b.setup_coop_taskrun()
                .setup_single_issuer()
                .setup_defer_taskrun();
        },
        |b| {
            b.setup_coop_taskrun();
        },
        |_| {},
    ];
    let mut failure = None;
    for tier in tiers {
        let mut builder = IoUring::builder();
        tier(&mut builder);
        match builder.build(entries) {
            Ok(ring) => return Ok(ring),
            // An older kernel refusing a flag: try with fewer.
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => failure = Some(e),
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    let e = failure.expect("at least one tier was tried");
    let disabled = std::fs::read_to_string(IO_URING_DISABLED).ok();
    Err(setup_error(e, entries, disabled.as_deref()))
}

/// How the issuing side of the loop ends.
enum Budget {
    /// Bytes still to issue.
    Bytes(u64),
    /// Issue until this deadline.
    Until(Deadline),
}

/// What one buffer slot has in flight.
#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    read: bool,
    offset: u64,
    /// Bytes asked of the kernel.
    len: u32,
    /// Bytes counted as work (less than `len` only for a final, rounded-up
    /// direct operation).
    counted: u64,
    submitted: Option<Instant>,
}

/// Bytes of each end of a read buffer that are zeroed before the read and
/// must hold file data (non-zero) after it.
fn marker_len(block: usize) -> usize {
    block.min(8)
}

/// The timed loop and its checks.
fn run_stats(
    p: &AioParams,
    path: &Path,
    index: usize,
    release_ns: Option<u64>,
) -> anyhow::Result<AioStats> {
    check_params(p)?;
    let file = open_file(p, path)?;
    let file_len = file
        .metadata()
        .with_context(|| format!("reading the size of {}", path.display()))?
        .len();
    let blocks = file_len / p.block_bytes;
    ensure!(
        blocks > 0,
        "{} holds {file_len} bytes, smaller than one block of {} bytes; \
         was prepare() run for this workload?",
        path.display(),
        p.block_bytes
    );
    let depth = p.queue_depth as usize;
    // Checked in check_params: block ≤ 64 MiB, depth × block ≤ 1 GiB.
    let block = p.block_bytes as usize;
    // The ring owns the buffers: it never frees one under an operation.
    let mut ring = SlotRing::new(new_ring(p.queue_depth)?, depth, block)
        .context("allocating the aio buffers")?;
    let mut fill_state = 0xB10C_F111_0000_0001_u64 ^ index as u64;
    for i in 0..depth {
        fill_nonzero(ring.slot_mut(i), &mut fill_state);
    }

    let mut rng = offset_rng(p.seed, index);
    let start = Instant::now();
    let budget = match p.stop {
        Stop::Work(bytes) => Budget::Bytes(bytes),
        Stop::DurationNs(ns) => Budget::Until(Deadline::after(release_ns, ns)),
    };
    let mut looper = Looper {
        p,
        path,
        fd: file.as_raw_fd(),
        block,
        blocks,
        slots: vec![Slot::default(); depth],
        free: (0..depth).rev().collect(),
        budget,
        stats: AioStats {
            bytes: 0,
            reads: 0,
            writes: 0,
            elapsed_ns: 0,
            latency: LatencyHistogram::new(),
        },
        bad_reads: 0,
        error: None,
    };
    let drained = looper.run(&mut ring, &mut rng);
    looper.stats.elapsed_ns = elapsed_ns(start);
    // Operations may still be in flight after a ring failure: dropping the
    // ring waits for them, or leaks the buffers if it cannot.
    drop(ring);
    drained?;
    if let Some(e) = looper.error.take() {
        return Err(e);
    }
    ensure!(
        looper.bad_reads == 0,
        "aio check failed: {} of {} reads from {} did not fill their buffer with file data",
        looper.bad_reads,
        looper.stats.reads,
        path.display()
    );
    if let Stop::Work(bytes) = p.stop {
        ensure!(
            looper.stats.bytes == bytes,
            "aio check failed: transferred {} bytes, expected {bytes}",
            looper.stats.bytes
        );
    }
    Ok(looper.stats)
}

/// `SlotRing::enter` with the failure in words.
fn enter(ring: &mut SlotRing, min_complete: u32) -> anyhow::Result<()> {
    ring.enter(min_complete)
        .map_err(|e| anyhow::Error::new(e).context("io_uring_enter failed"))
}

/// State of the submission/completion loop.
struct Looper<'a> {
    p: &'a AioParams,
    path: &'a Path,
    fd: RawFd,
    block: usize,
    blocks: u64,
    slots: Vec<Slot>,
    /// Indices of slots with nothing in flight.
    free: Vec<usize>,
    budget: Budget,
    stats: AioStats,
    bad_reads: u64,
    /// The first failed operation; issuing stops once it is set.
    error: Option<anyhow::Error>,
}

impl Looper<'_> {
    fn in_flight(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// Bytes (asked, counted) of the next operation, or None when the
    /// budget is spent or an operation failed.
    fn next_len(&mut self) -> Option<(u32, u64)> {
        if self.error.is_some() {
            return None;
        }
        let block = self.block as u64;
        match &mut self.budget {
            Budget::Bytes(left) => {
                if *left == 0 {
                    return None;
                }
                let counted = (*left).min(block);
                *left -= counted;
                // O_DIRECT lengths must stay aligned: a short final
                // operation moves whole aligned blocks (never past `block`,
                // hence never past the file) but counts only what was asked.
                let asked = if self.p.direct {
                    (counted.div_ceil(DIRECT_ALIGN) * DIRECT_ALIGN).min(block)
                } else {
                    counted
                };
                Some((asked as u32, counted))
            }
            Budget::Until(end) => (!end.past()).then_some((block as u32, block)),
        }
    }

    /// The loop of fio's io_uring engine at its defaults (iodepth_batch
    /// = 1, iodepth_batch_complete_min = 1, iodepth_low = iodepth): while a
    /// slot is free and budget is left, issue one operation with its own
    /// `io_uring_enter`; once the queue is full (or the budget is spent),
    /// reap every completion available, waiting for one only if there is
    /// none. Each enter also runs the ring's deferred completion work, so a
    /// busy queue is mostly reaped without sleeping, as in fio.
    ///
    /// Returns Ok once nothing is in flight and nothing is left to issue
    /// (or an operation failed: see `error`). Err means the ring itself
    /// failed with operations possibly still in flight.
    fn run(&mut self, ring: &mut SlotRing, rng: &mut SplitMix64) -> anyhow::Result<()> {
        loop {
            while let Some(&i) = self.free.last() {
                let Some((len, counted)) = self.next_len() else {
                    break;
                };
                self.free.pop();
                let (read, offset) = self.prepare_slot(ring, i, len, counted, rng);
                // The ring holds at least queue_depth entries and at most
                // queue_depth are in flight, so this cannot fail.
                ring.push(i, self.fd, read, len, offset)
                    .context("io_uring submission queue unexpectedly full")?;
                self.slots[i].submitted = Some(Instant::now());
                enter(ring, 0)?;
            }
            if self.in_flight() == 0 {
                return Ok(());
            }
            if self.reap(ring) == 0 {
                enter(ring, 1)?;
                self.reap(ring);
            }
        }
    }

    /// Fill in slot `i` for its next operation: (read, offset). A read's
    /// buffer ends are zeroed, to be checked for file data afterwards.
    fn prepare_slot(
        &mut self,
        ring: &mut SlotRing,
        i: usize,
        len: u32,
        counted: u64,
        rng: &mut SplitMix64,
    ) -> (bool, u64) {
        let read = rng.below(100) < u64::from(self.p.read_pct);
        let offset = rng.below(self.blocks) * self.block as u64;
        if read {
            let len = len as usize;
            let m = marker_len(len);
            let buf = ring.slot_mut(i);
            buf[..m].fill(0);
            buf[len - m..len].fill(0);
        }
        self.slots[i] = Slot {
            read,
            offset,
            len,
            counted,
            submitted: None,
        };
        (read, offset)
    }

    /// Account for every completion in the queue; returns how many.
    fn reap(&mut self, ring: &mut SlotRing) -> usize {
        let done = Instant::now();
        ring.reap(|ring, i, res| self.complete(ring, i, res, done))
    }

    /// Account for the completion of slot `i` with result `res`.
    fn complete(&mut self, ring: &mut SlotRing, i: usize, res: i32, done: Instant) {
        let slot = self.slots[i];
        self.free.push(i);
        if let Some(t) = slot.submitted {
            let ns =
                u64::try_from(done.saturating_duration_since(t).as_nanos()).unwrap_or(u64::MAX);
            self.stats.latency.record(ns);
        }
        let what = if slot.read { "reading" } else { "writing" };
        if res < 0 {
            let e = std::io::Error::from_raw_os_error(-res);
            let err = if self.p.direct && is_einval(&e) {
                anyhow::Error::new(e).context(direct_unsupported(self.path))
            } else {
                anyhow::Error::new(e).context(format!(
                    "{what} {} bytes at offset {} of {}",
                    slot.len,
                    slot.offset,
                    self.path.display()
                ))
            };
            self.error.get_or_insert(err);
            return;
        }
        if res as u32 != slot.len {
            self.error.get_or_insert(anyhow::anyhow!(
                "short {} at offset {} of {}: {res} of {} bytes",
                if slot.read { "read" } else { "write" },
                slot.offset,
                self.path.display(),
                slot.len
            ));
            return;
        }
        if slot.read {
            let len = slot.len as usize;
            let m = marker_len(len);
            // The read into slot i has completed: its bytes are ours again.
            let buf = ring.slot_mut(i);
            if buf[..m].contains(&0) || buf[len - m..len].contains(&0) {
                self.bad_reads += 1;
            }
            self.stats.reads += 1;
        } else {
            self.stats.writes += 1;
        }
        self.stats.bytes += slot.counted;
    }
}

/// Log-linear latency histogram: exact below 64 ns, then 64 buckets per
/// power of two (relative error ≤ 1/64). Values are nanoseconds.
#[derive(Debug, Clone)]
struct LatencyHistogram {
    counts: Vec<u64>,
    total: u64,
}

const SUB_BITS: u32 = 6;
const SUB: u64 = 1 << SUB_BITS;

impl LatencyHistogram {
    fn new() -> Self {
        Self {
            counts: vec![0; Self::bucket(u64::MAX) + 1],
            total: 0,
        }
    }

    fn bucket(v: u64) -> usize {
        if v < SUB {
            return v as usize;
        }
        let shift = 63 - v.leading_zeros() - SUB_BITS;
        // (v >> shift) is in SUB..2·SUB.
        ((shift as usize + 1) << SUB_BITS) + ((v >> shift) - SUB) as usize
    }

    /// Midpoint of bucket `b`'s value range.
    fn value(b: usize) -> f64 {
        let b = b as u64;
        if b < SUB {
            return b as f64;
        }
        let shift = (b >> SUB_BITS) - 1;
        let low = (SUB + (b & (SUB - 1))) << shift;
        low as f64 + ((1u64 << shift) as f64 - 1.0) / 2.0
    }

    fn record(&mut self, ns: u64) {
        self.counts[Self::bucket(ns)] += 1;
        self.total += 1;
    }

    /// The q-quantile (nearest rank), 0 when empty.
    fn quantile(&self, q: f64) -> f64 {
        if self.total == 0 {
            return 0.0;
        }
        let rank = ((q * self.total as f64).ceil() as u64).clamp(1, self.total);
        let mut seen = 0;
        for (b, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Self::value(b);
            }
        }
        unreachable!("rank ≤ total")
    }
}

impl Kind for AioParams {
    fn name(&self) -> &'static str {
        "aio"
    }
    fn work_unit(&self) -> &'static str {
        "bytes"
    }
    fn stop(&self) -> Stop {
        self.stop
    }
    fn set_stop(&mut self, stop: Stop) {
        self.stop = stop;
    }
    /// Scales the bytes or the duration, never the file it works on.
    fn scaled(&self, f: f64) -> Workload {
        Workload::Aio(AioParams {
            stop: scale_stop(self.stop, f),
            ..self.clone()
        })
    }
    fn needs_dir(&self) -> bool {
        true
    }
    fn disk_bytes(&self, _processes: u32) -> u64 {
        self.file_bytes
    }
    fn disk_key(&self) -> &'static str {
        "file_bytes"
    }
    fn buffer_bytes(&self) -> u64 {
        u64::from(self.queue_depth).saturating_mul(self.block_bytes)
    }
    fn prepare(&self, dir: &Path, until: Option<Instant>) -> anyhow::Result<()> {
        super::copy::write_input_until(&file_path(dir), self.file_bytes, true, until)
    }
    fn run(&self, ctx: &WorkContext) -> anyhow::Result<WorkOutput> {
        run(self, ctx)
    }
    /// The copy rate as a proxy (a device-bound direct run takes longer).
    fn estimate_cpu_s(&self, rates: &Rates) -> f64 {
        stop_cost_s(self.stop, 1.0 / rates.copy_bytes_per_s)
    }
}

/// The aio workload's registration.
pub const ENTRY: Entry = Entry {
    name: "aio",
    parse: |k| {
        k.only(&[
            "bytes",
            "file_bytes",
            "block_bytes",
            "queue_depth",
            "read_pct",
            "direct",
            "duration_s",
        ])?;
        let file_bytes = k.positive_or("file_bytes", 64 << 20)?;
        if file_bytes > 1 << 40 {
            return Err(k.err(
                "file_bytes",
                format!("at most 1099511627776 (1 TiB), got {file_bytes}"),
            ));
        }
        let direct = k.bool("direct")?.unwrap_or(true);
        let block_bytes = k.positive_or("block_bytes", 4096)?;
        if block_bytes > MAX_BLOCK_BYTES {
            return Err(k.err(
                "block_bytes",
                format!("at most 67108864 (64 MiB), got {block_bytes}"),
            ));
        }
        if direct && !block_bytes.is_multiple_of(4096) {
            return Err(k.err(
                "block_bytes",
                format!("direct = true (O_DIRECT) needs a multiple of 4096, got {block_bytes}"),
            ));
        }
        if block_bytes > file_bytes {
            return Err(k.err(
                "block_bytes",
                format!("{block_bytes} is larger than file_bytes = {file_bytes}"),
            ));
        }
        let queue_depth = k.int("queue_depth")?.unwrap_or(32);
        if !(1..=i64::from(MAX_QUEUE_DEPTH)).contains(&queue_depth) {
            return Err(k.err(
                "queue_depth",
                format!("must be between 1 and 4096, got {queue_depth}"),
            ));
        }
        if queue_depth as u64 * block_bytes > MAX_BUFFER_BYTES {
            return Err(k.err(
                "queue_depth",
                format!(
                    "queue_depth × block_bytes = {queue_depth} × {block_bytes} is more than 1 GiB of buffers per process"
                ),
            ));
        }
        let read_pct = k.int("read_pct")?.unwrap_or(100);
        if !(0..=100).contains(&read_pct) {
            return Err(k.err(
                "read_pct",
                format!(
                    "must be between 0 and 100 (percent of operations that are reads), got {read_pct}"
                ),
            ));
        }
        Ok(Workload::Aio(AioParams {
            stop: k.stop("bytes", 256 << 20)?,
            file_bytes,
            block_bytes,
            queue_depth: queue_depth as u32,
            read_pct: read_pct as u8,
            direct,
            seed: None,
        }))
    },
};

#[cfg(test)]
mod tests {
    use super::*;

    fn params(stop: Stop, file_bytes: u64, block: u64, read_pct: u8, direct: bool) -> AioParams {
        AioParams {
            stop,
            file_bytes,
            block_bytes: block,
            queue_depth: 8,
            read_pct,
            direct,
            seed: None,
        }
    }

    /// Prepare in a fresh temporary directory and run as process `index`.
    fn prepare_and_run(p: &AioParams, index: usize) -> anyhow::Result<WorkOutput> {
        let dir = tempfile::tempdir()?;
        crate::workload::Workload::Aio(p.clone()).prepare(dir.path(), None)?;
        let out = run(
            p,
            &WorkContext {
                fds: Vec::new(),
                dir: dir.path().to_path_buf(),
                index,
                release_ns: None,
            },
        )?;
        assert_eq!(
            std::fs::metadata(file_path(dir.path()))?.len(),
            p.file_bytes,
            "the file keeps its size"
        );
        Ok(out)
    }

    #[test]
    fn work_mode_counts_bytes_exactly() {
        for (bytes, block, direct) in [
            (1 << 20, 4096, false),
            (1 << 20, 4096, true),
            // Not a multiple of the block: the last operation is short.
            (100_000, 4096, false),
            (100_000, 8192, true),
            (1000, 512, false),
        ] {
            let p = params(Stop::Work(bytes), 256 << 10, block, 70, direct);
            let out = prepare_and_run(&p, 1).unwrap();
            assert_eq!(out.work, bytes, "{p:?}");
            let ops = bytes.div_ceil(block) as f64;
            assert_eq!(out.figures["ops"], ops, "{p:?}");
            assert_eq!(out.figures["reads"] + out.figures["writes"], ops);
            for k in ["mb_per_s", "iops", "lat_p50_us", "lat_p99_us"] {
                assert!(out.figures[k] > 0.0, "{k}: {:?}", out.figures);
            }
            assert!(out.figures["lat_p99_us"] >= out.figures["lat_p50_us"]);
        }
    }

    #[test]
    fn any_queue_depth_works() {
        for depth in [1, 3, 512] {
            let mut p = params(Stop::Work(300 * 4096), 1 << 20, 4096, 50, true);
            p.queue_depth = depth;
            let out = prepare_and_run(&p, 0).unwrap();
            assert_eq!(out.work, 300 * 4096, "depth {depth}");
            assert_eq!(out.figures["ops"], 300.0, "depth {depth}");
        }
    }

    #[test]
    fn duration_mode_stops() {
        let p = params(Stop::DurationNs(50_000_000), 1 << 20, 4096, 100, false);
        let t = Instant::now();
        let out = prepare_and_run(&p, 0).unwrap();
        assert!(out.elapsed_ns >= 50_000_000, "{}", out.elapsed_ns);
        assert!(t.elapsed().as_secs_f64() < 5.0);
        assert!(
            out.work > 0 && out.work.is_multiple_of(4096),
            "{}",
            out.work
        );
        assert_eq!(out.figures["ops"] * 4096.0, out.work as f64);
    }

    #[test]
    fn read_write_mix_is_respected() {
        for pct in [0u8, 30, 100] {
            let p = params(Stop::Work(4000 * 4096), 1 << 20, 4096, pct, false);
            let out = prepare_and_run(&p, 2).unwrap();
            let share = out.figures["reads"] / out.figures["ops"];
            assert!(
                (share - f64::from(pct) / 100.0).abs() < 0.03,
                "read_pct {pct}: read share {share}"
            );
        }
    }

    #[test]
    fn direct_works_on_ext4_and_file_stays_nonzero() {
        let dir = tempfile::tempdir().unwrap();
        let p = params(Stop::Work(2 << 20), 1 << 20, 16384, 50, true);
        crate::workload::Workload::Aio(p.clone())
            .prepare(dir.path(), None)
            .unwrap();
        let ctx = WorkContext {
            fds: Vec::new(),
            dir: dir.path().to_path_buf(),
            index: 0,
            release_ns: None,
        };
        let out = run(&p, &ctx).unwrap();
        assert_eq!(out.work, 2 << 20);
        assert!(out.figures["writes"] > 0.0 && out.figures["reads"] > 0.0);
        let data = std::fs::read(file_path(dir.path())).unwrap();
        assert_eq!(data.len(), 1 << 20);
        assert!(data.iter().all(|&b| b != 0));
    }

    #[test]
    fn offsets_are_deterministic_per_process() {
        let a: Vec<u64> = (0..8).map(|_| offset_rng(None, 3).next_u64()).collect();
        assert!(a.windows(2).all(|w| w[0] == w[1]));
        let mut r3 = offset_rng(None, 3);
        let mut r3b = offset_rng(None, 3);
        let mut r4 = offset_rng(None, 4);
        let s3: Vec<u64> = (0..16).map(|_| r3.below(1000)).collect();
        let s3b: Vec<u64> = (0..16).map(|_| r3b.below(1000)).collect();
        let s4: Vec<u64> = (0..16).map(|_| r4.below(1000)).collect();
        assert_eq!(s3, s3b);
        assert_ne!(s3, s4);
        let mut seeded = offset_rng(Some(7), 3);
        assert_ne!(s3, (0..16).map(|_| seeded.below(1000)).collect::<Vec<_>>());
    }

    #[test]
    fn invalid_block_size_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = WorkContext {
            fds: Vec::new(),
            dir: dir.path().to_path_buf(),
            index: 0,
            release_ns: None,
        };
        let p = params(Stop::Work(8192), 1 << 16, 1000, 100, true);
        super::super::copy::write_input(&file_path(dir.path()), 1 << 16, false).unwrap();
        let e = format!("{:#}", run(&p, &ctx).unwrap_err());
        assert!(e.contains("block_bytes") && e.contains("4096"), "{e}");
        let zero = params(Stop::Work(8192), 1 << 16, 0, 100, false);
        let e = format!("{:#}", run(&zero, &ctx).unwrap_err());
        assert!(e.contains("block_bytes"), "{e}");
        let mut deep = params(Stop::Work(8192), 1 << 16, 4096, 100, false);
        deep.queue_depth = 0;
        let e = format!("{:#}", run(&deep, &ctx).unwrap_err());
        assert!(e.contains("queue_depth"), "{e}");
    }

    #[test]
    fn file_smaller_than_a_block_is_an_error() {
        // Parameters that claim a big enough file, but the file on disk is short.
        let dir = tempfile::tempdir().unwrap();
        let ctx = WorkContext {
            fds: Vec::new(),
            dir: dir.path().to_path_buf(),
            index: 0,
            release_ns: None,
        };
        let p = params(Stop::Work(8192), 1 << 16, 8192, 100, false);
        super::super::copy::write_input(&file_path(dir.path()), 5000, false).unwrap();
        let e = format!("{:#}", run(&p, &ctx).unwrap_err());
        assert!(e.contains("smaller than one block"), "{e}");
        // And parameters that themselves ask for a file below one block.
        let small = params(Stop::Work(8192), 4096, 8192, 100, false);
        let e = format!("{:#}", check_params(&small).unwrap_err());
        assert!(e.contains("file_bytes"), "{e}");
        // A missing file points at prepare().
        std::fs::remove_file(file_path(dir.path())).unwrap();
        let e = format!("{:#}", run(&p, &ctx).unwrap_err());
        assert!(e.contains("prepare()"), "{e}");
    }

    #[test]
    fn setup_errors_name_the_sysctl() {
        let e = setup_error(
            std::io::Error::from_raw_os_error(libc::EPERM),
            32,
            Some("2\n"),
        );
        let m = format!("{e:#}");
        assert!(m.contains("io_uring is unavailable"), "{m}");
        assert!(m.contains("/proc/sys/kernel/io_uring_disabled = 2"), "{m}");
        let e = setup_error(std::io::Error::from_raw_os_error(libc::ENOSYS), 32, None);
        let m = format!("{e:#}");
        assert!(m.contains("ENOSYS") && m.contains(IO_URING_DISABLED), "{m}");
    }

    /// The aio workload a spec's `[workloads.NAME]` table defines.
    fn spec_aio(table: &str) -> Result<AioParams, String> {
        let text =
            format!("[matrix]\nworkload = [\"x\"]\n[workloads.x]\nkind = \"aio\"\n{table}\n");
        let spec = crate::spec::load(&text, "t.toml", &[]).map_err(|e| e.to_string())?;
        match &spec.workloads[0].workload {
            crate::workload::Workload::Aio(p) => Ok(p.clone()),
            w => panic!("not aio: {w:?}"),
        }
    }

    #[test]
    fn spec_defaults_and_keys() {
        let d = spec_aio("").unwrap();
        assert_eq!(
            d,
            AioParams {
                stop: Stop::Work(256 << 20),
                file_bytes: 64 << 20,
                block_bytes: 4096,
                queue_depth: 32,
                read_pct: 100,
                direct: true,
                seed: None,
            }
        );
        let p = spec_aio(
            "duration_s = 2.5\nfile_bytes = 1048576\nblock_bytes = 1000\nqueue_depth = 4096\nread_pct = 0\ndirect = false",
        )
        .unwrap();
        assert_eq!(p.stop, Stop::DurationNs(2_500_000_000));
        assert_eq!(
            (
                p.file_bytes,
                p.block_bytes,
                p.queue_depth,
                p.read_pct,
                p.direct
            ),
            (1 << 20, 1000, 4096, 0, false)
        );
        // The bare kind works in the matrix, like the other workloads.
        let spec =
            crate::spec::load("[matrix]\nworkload = [\"aio\", \"pi\"]\n", "t.toml", &[]).unwrap();
        assert_eq!(spec.workloads[0].workload.kind(), "aio");
    }

    #[test]
    fn spec_errors_name_the_key() {
        for (table, key, needle) in [
            (
                "block_bytes = 1000",
                "workloads.x.block_bytes",
                "direct = true (O_DIRECT) needs a multiple of 4096, got 1000",
            ),
            ("block_bytes = 0", "workloads.x.block_bytes", "positive"),
            (
                "file_bytes = 4096\nblock_bytes = 8192",
                "workloads.x.block_bytes",
                "larger than file_bytes",
            ),
            (
                "queue_depth = 0",
                "workloads.x.queue_depth",
                "between 1 and 4096",
            ),
            (
                "queue_depth = 4097",
                "workloads.x.queue_depth",
                "between 1 and 4096",
            ),
            (
                "queue_depth = 4096\nblock_bytes = 1048576",
                "workloads.x.queue_depth",
                "1 GiB",
            ),
            (
                "read_pct = 101",
                "workloads.x.read_pct",
                "between 0 and 100",
            ),
            ("read_pct = -1", "workloads.x.read_pct", "between 0 and 100"),
            (
                "bytes = 10\nduration_s = 1",
                "workloads.x.bytes",
                "not both",
            ),
            ("file_bytes = 0", "workloads.x.file_bytes", "positive"),
            (
                "chunk_bytes = 4096",
                "workloads.x.chunk_bytes",
                "not a parameter",
            ),
        ] {
            let e = spec_aio(table).unwrap_err();
            assert!(e.contains(key) && e.contains(needle), "{table}: {e}");
        }
        // The aio keys are refused by other kinds.
        let e = crate::spec::load("[workloads.copy]\nqueue_depth = 4\n", "t.toml", &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("workloads.copy.queue_depth"), "{e}");
    }

    #[test]
    fn histogram_quantiles() {
        let mut h = LatencyHistogram::new();
        assert_eq!(h.quantile(0.5), 0.0);
        for v in 1..=1000u64 {
            h.record(v * 1000);
        }
        let p50 = h.quantile(0.5);
        let p99 = h.quantile(0.99);
        assert!((p50 / 500_000.0 - 1.0).abs() < 1.0 / 64.0, "{p50}");
        assert!((p99 / 990_000.0 - 1.0).abs() < 1.0 / 64.0, "{p99}");
        // Small values are exact, huge ones do not overflow.
        let mut s = LatencyHistogram::new();
        s.record(7);
        assert_eq!(s.quantile(0.5), 7.0);
        s.record(u64::MAX);
        assert!(s.quantile(1.0) > 1e19);
        // Every value falls in a bucket whose range holds it.
        for v in [
            64u64,
            65,
            127,
            128,
            129,
            1 << 20,
            (1 << 20) + 12345,
            u64::MAX / 3,
        ] {
            let mid = LatencyHistogram::value(LatencyHistogram::bucket(v));
            assert!((mid - v as f64).abs() <= v as f64 / 64.0, "{v} → {mid}");
        }
    }
}
