//! The copy workload: read the shared `input.dat` in chunks and write each
//! chunk to this process's `out-<index>.dat`, through the page cache, with
//! fsync at the end, with fdatasync after each write, or with O_DIRECT.
//!
//! This file owns the input file format (non-zero pseudo-random bytes,
//! `write_input`), the chunked copier the copy and mixed workloads share
//! (`Copier`), its end-of-run verification, the worker loop, and the copy
//! rate probe used by `calibrate`. Figures: `mb_per_s` (1e6 bytes/s),
//! `writes`.
//!
//! Reads and writes are positioned (`pread`/`pwrite`), with the output
//! offset always equal to the input offset, so the output is a copy of the
//! input prefix however many passes a duration-mode run makes, and its size
//! stays bounded by the input's.

use super::keys::{KeyError, Keys};
use super::kind::{Entry, Kind, scale_stop, stop_cost_s};
use super::modelled::ModelTask;
use super::{
    Deadline, INPUT_FILE, Rates, Stop, SyncMode, WorkContext, WorkOutput, Workload, elapsed_ns,
    figures, output_path, per_second,
};
use anyhow::{Context, bail, ensure};
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// File copy. `Stop::Work(bytes to copy)`; work unit: bytes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CopyParams {
    pub stop: Stop,
    pub chunk_bytes: u64,
    pub sync: SyncMode,
}

/// O_DIRECT needs buffers, offsets and lengths aligned to the logical block
/// size; 4096 covers every common device.
pub const DIRECT_ALIGN: u64 = 4096;

/// Size of the input file for duration-mode copies, which loop over it.
/// Big enough that a pass is not a handful of chunks, small enough to
/// prepare quickly.
pub const DURATION_INPUT_BYTES: u64 = 16 << 20;

/// Largest chunk accepted: one buffer of this size is allocated per process.
pub const MAX_CHUNK_BYTES: u64 = 1 << 30;

/// Size of the input file a copy workload reads.
pub fn input_bytes(p: &CopyParams) -> u64 {
    match p.stop {
        Stop::Work(bytes) => bytes,
        // At least one chunk, so that a pass is never shorter than a chunk.
        Stop::DurationNs(_) => DURATION_INPUT_BYTES.max(p.chunk_bytes),
    }
}

/// Preparing a run's input took longer than the run's time limit.
#[derive(Debug, thiserror::Error)]
#[error("writing {bytes} bytes of input to {path} did not finish within the run's timeout_s")]
pub struct PrepareTimedOut {
    pub path: String,
    pub bytes: u64,
}

/// Create `path` holding `len` non-zero pseudo-random bytes (a fixed seed,
/// so every run reads the same data); fsync it when `fsync` is set so that
/// it is on disk before any measurement starts.
pub fn write_input(path: &Path, len: u64, fsync: bool) -> anyhow::Result<()> {
    write_input_until(path, len, fsync, None)
}

/// `write_input`, giving up with [`PrepareTimedOut`] (the partial file
/// removed) when `until` passes before it is written.
pub fn write_input_until(
    path: &Path,
    len: u64,
    fsync: bool,
    until: Option<std::time::Instant>,
) -> anyhow::Result<()> {
    let written = write_input_inner(path, len, fsync, until);
    if written.is_err() {
        let _ = std::fs::remove_file(path);
    }
    written
}

fn write_input_inner(
    path: &Path,
    len: u64,
    fsync: bool,
    until: Option<std::time::Instant>,
) -> anyhow::Result<()> {
    let file = File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut w = BufWriter::with_capacity(1 << 20, file);
    let mut state = 0x5EED_5C4E_D1AB_0001_u64;
    let mut block = vec![0u8; 1 << 16];
    let mut left = len;
    while left > 0 {
        if until.is_some_and(|u| std::time::Instant::now() >= u) {
            return Err(PrepareTimedOut {
                path: path.display().to_string(),
                bytes: len,
            }
            .into());
        }
        fill_nonzero(&mut block, &mut state);
        let n = usize::try_from(left.min(block.len() as u64)).unwrap_or(block.len());
        w.write_all(&block[..n])
            .with_context(|| format!("writing {}", path.display()))?;
        left -= n as u64;
    }
    let file = w
        .into_inner()
        .map_err(|e| e.into_error())
        .with_context(|| format!("writing {}", path.display()))?;
    if fsync {
        file.sync_all()
            .with_context(|| format!("fsync of {}", path.display()))?;
    }
    Ok(())
}

/// Fill `buf` with pseudo-random bytes in 1..=255 (xorshift64*). Non-zero
/// so that no filesystem can store the input as a sparse or compressed hole.
pub(crate) fn fill_nonzero(buf: &mut [u8], state: &mut u64) {
    for chunk in buf.chunks_mut(8) {
        *state ^= *state >> 12;
        *state ^= *state << 25;
        *state ^= *state >> 27;
        let r = state.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes();
        for (b, r) in chunk.iter_mut().zip(r) {
            *b = r | ((r == 0) as u8);
        }
    }
}

/// A buffer whose usable part starts at a `DIRECT_ALIGN` boundary, obtained
/// by over-allocating and offsetting, which needs no unsafe code.
pub(crate) struct AlignedBuf {
    storage: Vec<u8>,
    offset: usize,
    len: usize,
}

impl AlignedBuf {
    pub(crate) fn new(len: usize) -> anyhow::Result<Self> {
        let align = DIRECT_ALIGN as usize;
        let storage = vec![0u8; len + align];
        let offset = storage.as_ptr().align_offset(align);
        ensure!(
            offset < align,
            "cannot align a copy buffer to {align} bytes"
        );
        Ok(Self {
            storage,
            offset,
            len,
        })
    }

    pub(crate) fn as_mut(&mut self) -> &mut [u8] {
        &mut self.storage[self.offset..self.offset + self.len]
    }
}

/// Totals of a copier once it is finished and verified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyStats {
    pub bytes: u64,
    pub writes: u64,
}

/// Chunked copy from an input file to an output file at equal offsets,
/// with one of the `SyncMode`s. Shared by the copy and mixed workloads.
pub struct Copier {
    input: File,
    output: File,
    input_path: PathBuf,
    output_path: PathBuf,
    input_len: u64,
    chunk: u64,
    sync: SyncMode,
    buf: AlignedBuf,
    /// Offset of the next chunk, in both files.
    pos: u64,
    bytes: u64,
    writes: u64,
    /// Highest offset written, i.e. the output's logical size.
    high_water: u64,
}

/// Whether an error is the kernel refusing O_DIRECT (EINVAL).
pub(crate) fn is_einval(e: &std::io::Error) -> bool {
    e.raw_os_error() == Some(libc::EINVAL)
}

/// Context for an I/O error on `path`; EINVAL under O_DIRECT means the
/// filesystem refused direct I/O, which deserves a message of its own.
fn io_error(e: std::io::Error, what: &str, path: &Path, direct: bool) -> anyhow::Error {
    if direct && is_einval(&e) {
        anyhow::Error::new(e).context(direct_unsupported(path))
    } else {
        anyhow::Error::new(e).context(format!("{what} {}", path.display()))
    }
}

pub(crate) fn direct_unsupported(path: &Path) -> String {
    let dir = path.parent().unwrap_or(path);
    format!(
        "O_DIRECT is not supported by the filesystem holding {} (EINVAL on {})",
        dir.display(),
        path.display()
    )
}

impl Copier {
    /// Open `input` for reading and create (truncate) `output`.
    pub fn open(
        input: &Path,
        output: &Path,
        chunk_bytes: u64,
        sync: SyncMode,
    ) -> anyhow::Result<Self> {
        ensure!(
            (1..=MAX_CHUNK_BYTES).contains(&chunk_bytes),
            "chunk_bytes must be between 1 and {MAX_CHUNK_BYTES}, got {chunk_bytes}"
        );
        let direct = sync == SyncMode::Direct;
        if direct && !chunk_bytes.is_multiple_of(DIRECT_ALIGN) {
            bail!(
                "chunk_bytes = {chunk_bytes} is not a multiple of {DIRECT_ALIGN}, \
                 which O_DIRECT (sync = direct) requires"
            );
        }
        let flags = if direct { libc::O_DIRECT } else { 0 };
        let in_file = OpenOptions::new()
            .read(true)
            .custom_flags(flags)
            .open(input)
            .map_err(|e| io_error(e, "opening", input, direct))?;
        let input_len = in_file
            .metadata()
            .with_context(|| format!("reading the size of {}", input.display()))?
            .len();
        let out_file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .custom_flags(flags)
            .open(output)
            .map_err(|e| io_error(e, "creating", output, direct))?;
        let len = usize::try_from(chunk_bytes).context("chunk_bytes does not fit in memory")?;
        Ok(Self {
            input: in_file,
            output: out_file,
            input_path: input.to_path_buf(),
            output_path: output.to_path_buf(),
            input_len,
            chunk: chunk_bytes,
            sync,
            buf: AlignedBuf::new(len)?,
            pos: 0,
            bytes: 0,
            writes: 0,
            high_water: 0,
        })
    }

    pub fn input_len(&self) -> u64 {
        self.input_len
    }

    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Start the next copy at offset 0 of both files.
    pub fn rewind(&mut self) {
        self.pos = 0;
    }

    /// Copy one chunk of at most `limit` bytes at the current offset,
    /// wrapping to offset 0 at the end of the input. Returns the bytes copied
    /// (0 only for an empty input or a zero limit).
    pub fn copy_chunk(&mut self, limit: u64) -> anyhow::Result<u64> {
        if self.pos >= self.input_len {
            self.pos = 0;
        }
        let want = self.chunk.min(limit).min(self.input_len - self.pos);
        if want == 0 {
            return Ok(0);
        }
        // `want` ≤ chunk, which fits in usize (checked in `open`).
        let want_us = want as usize;
        let direct = self.sync == SyncMode::Direct;
        let (inp, outp) = (&self.input_path, &self.output_path);
        let buf = self.buf.as_mut();
        if direct {
            // One aligned read of a whole chunk; only the end of the file
            // may make it short, and never shorter than `want`.
            let got = self
                .input
                .read_at(buf, self.pos)
                .map_err(|e| io_error(e, "reading", inp, direct))?;
            ensure!(
                got >= want_us,
                "short read from {} at offset {}: {got} of {want} bytes",
                self.input_path.display(),
                self.pos
            );
            // A partial final chunk is written as whole blocks (zero padded)
            // and the output is cut to its true size in `finish`.
            let padded = want.div_ceil(DIRECT_ALIGN) * DIRECT_ALIGN;
            let padded = padded.min(self.chunk) as usize;
            buf[want_us..padded].fill(0);
            self.output
                .write_all_at(&buf[..padded], self.pos)
                .map_err(|e| io_error(e, "writing", outp, direct))?;
        } else {
            self.input
                .read_exact_at(&mut buf[..want_us], self.pos)
                .map_err(|e| io_error(e, "reading", inp, direct))?;
            self.output
                .write_all_at(&buf[..want_us], self.pos)
                .map_err(|e| io_error(e, "writing", outp, direct))?;
        }
        self.writes += 1;
        if self.sync == SyncMode::FsyncEach {
            self.output
                .sync_data()
                .with_context(|| format!("fdatasync of {}", self.output_path.display()))?;
        }
        self.pos += want;
        self.bytes += want;
        self.high_water = self.high_water.max(self.pos);
        Ok(want)
    }

    /// Copy exactly `bytes` starting at the current offset (wrapping at the
    /// end of the input), then fsync if the mode asks for it at the end.
    pub fn copy_pass(&mut self, bytes: u64) -> anyhow::Result<()> {
        ensure!(
            bytes == 0 || self.input_len > 0,
            "{} is empty but {bytes} bytes must be copied",
            self.input_path.display()
        );
        let mut left = bytes;
        while left > 0 {
            left -= self.copy_chunk(left)?;
        }
        self.end_pass()
    }

    /// End of a pass: the one fsync of `SyncMode::FsyncEnd`.
    pub fn end_pass(&mut self) -> anyhow::Result<()> {
        if self.sync == SyncMode::FsyncEnd {
            self.output
                .sync_all()
                .with_context(|| format!("fsync of {}", self.output_path.display()))?;
        }
        Ok(())
    }

    /// Outside the timed loop: cut the output to its logical size, verify it
    /// against the input (size, first and last block), and remove it.
    pub fn finish(self) -> anyhow::Result<CopyStats> {
        let stats = CopyStats {
            bytes: self.bytes,
            writes: self.writes,
        };
        let verified = self.verify();
        let removed = std::fs::remove_file(&self.output_path)
            .with_context(|| format!("removing {}", self.output_path.display()));
        verified?;
        removed?;
        Ok(stats)
    }

    fn verify(&self) -> anyhow::Result<()> {
        let out = &self.output_path;
        if self.sync == SyncMode::Direct {
            self.output
                .set_len(self.high_water)
                .with_context(|| format!("truncating {}", out.display()))?;
        }
        // Re-read through fresh, buffered descriptors: O_DIRECT writes have
        // already invalidated any cached pages, so this sees what reached
        // the file.
        let input = File::open(&self.input_path)
            .with_context(|| format!("opening {}", self.input_path.display()))?;
        let output = File::open(out).with_context(|| format!("opening {}", out.display()))?;
        let out_len = output
            .metadata()
            .with_context(|| format!("reading the size of {}", out.display()))?
            .len();
        ensure!(
            out_len == self.high_water,
            "copy check failed: {} holds {out_len} bytes, expected {}",
            out.display(),
            self.high_water
        );
        let sample = DIRECT_ALIGN.min(self.high_water);
        for at in [0, self.high_water - sample] {
            let mut a = vec![0u8; sample as usize];
            let mut b = vec![0u8; sample as usize];
            input
                .read_exact_at(&mut a, at)
                .with_context(|| format!("re-reading {}", self.input_path.display()))?;
            output
                .read_exact_at(&mut b, at)
                .with_context(|| format!("re-reading {}", out.display()))?;
            ensure!(
                a == b,
                "copy check failed: {} differs from {} in the {sample} bytes at offset {at}",
                out.display(),
                self.input_path.display()
            );
        }
        Ok(())
    }
}

/// Worker loop for the copy workload.
pub fn run(p: &CopyParams, ctx: &WorkContext) -> anyhow::Result<WorkOutput> {
    let input = ctx.dir.join(INPUT_FILE);
    let output = output_path(&ctx.dir, ctx.index);
    let mut copier = Copier::open(&input, &output, p.chunk_bytes, p.sync)?;
    let (elapsed, stats) = match copy_loop(&mut copier, p.stop, ctx.release_ns) {
        Ok(elapsed) => (elapsed, copier.finish()?),
        Err(e) => {
            // Best effort: do not leave a partial output behind; the copy
            // error is the one worth reporting.
            let _ = std::fs::remove_file(&output);
            return Err(e);
        }
    };
    Ok(WorkOutput {
        work: stats.bytes,
        elapsed_ns: elapsed,
        figures: figures([
            ("mb_per_s", per_second(stats.bytes as f64, elapsed) / 1e6),
            ("writes", stats.writes as f64),
        ]),
        latency: Default::default(),
    })
}

/// The timed part of a copy run; returns the elapsed nanoseconds.
fn copy_loop(copier: &mut Copier, stop: Stop, release_ns: Option<u64>) -> anyhow::Result<u64> {
    if let Stop::Work(bytes) = stop {
        ensure!(
            copier.input_len() >= bytes,
            "{} holds {} bytes but the workload copies {bytes}; \
             was prepare() run for this workload?",
            copier.input_path.display(),
            copier.input_len()
        );
    } else {
        ensure!(
            copier.input_len() > 0,
            "{} is empty; was prepare() run for this workload?",
            copier.input_path.display()
        );
    }
    let start = Instant::now();
    match stop {
        Stop::Work(bytes) => copier.copy_pass(bytes)?,
        Stop::DurationNs(ns) => {
            let end = Deadline::after(release_ns, ns);
            while !end.past() {
                copier.copy_chunk(u64::MAX)?;
            }
            copier.end_pass()?;
        }
    }
    Ok(elapsed_ns(start))
}

/// Page-cache copy rate for `calibrate`: copy a small scratch file in 64 KiB
/// chunks for `duration_ns`, then remove the scratch files.
pub fn calibrate(dir: &Path, duration_ns: u64) -> anyhow::Result<f64> {
    let input = dir.join("calibrate-input.dat");
    let output = dir.join("calibrate-out.dat");
    let result = (|| -> anyhow::Result<f64> {
        // Not fsynced: the probe measures page-cache copying, like
        // `SyncMode::None`, and should not wait for the disk.
        write_input(&input, 4 << 20, false)?;
        let mut copier = Copier::open(&input, &output, 64 << 10, SyncMode::None)?;
        let elapsed = copy_loop(&mut copier, Stop::DurationNs(duration_ns), None)?;
        let stats = copier.finish()?;
        Ok(per_second(stats.bytes as f64, elapsed))
    })();
    let _ = std::fs::remove_file(&output);
    let removed =
        std::fs::remove_file(&input).with_context(|| format!("removing {}", input.display()));
    let rate = result?;
    removed?;
    Ok(rate)
}

impl Kind for CopyParams {
    fn name(&self) -> &'static str {
        "copy"
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
    fn scaled(&self, f: f64) -> Workload {
        Workload::Copy(CopyParams {
            stop: scale_stop(self.stop, f),
            ..self.clone()
        })
    }
    fn needs_dir(&self) -> bool {
        true
    }
    /// The shared input and one output of the input's size per process (a
    /// duration copy wraps around its input).
    fn disk_bytes(&self, processes: u32) -> u64 {
        input_bytes(self).saturating_mul(u64::from(processes).saturating_add(1))
    }
    fn buffer_bytes(&self) -> u64 {
        self.chunk_bytes
    }
    fn prepare(&self, dir: &Path, until: Option<Instant>) -> anyhow::Result<()> {
        write_input_until(&dir.join(INPUT_FILE), input_bytes(self), true, until)
    }
    fn run(&self, ctx: &WorkContext) -> anyhow::Result<WorkOutput> {
        run(self, ctx)
    }
    /// From page-cache throughput: fsync and O_DIRECT runs take longer.
    fn estimate_cpu_s(&self, rates: &Rates) -> f64 {
        stop_cost_s(self.stop, 1.0 / rates.copy_bytes_per_s)
    }
    fn model(&self) -> ModelTask<'_> {
        ModelTask::Copy(self)
    }
}

const SYNC_MODES: &str = "none, fsync_end, fsync_each, direct";

/// The `sync` key of copy and mixed.
pub(super) fn sync_key(k: &Keys) -> Result<SyncMode, KeyError> {
    Ok(match k.str("sync")? {
        None | Some("none") => SyncMode::None,
        Some("fsync_end") => SyncMode::FsyncEnd,
        Some("fsync_each") => SyncMode::FsyncEach,
        Some("direct") => SyncMode::Direct,
        Some(s) => {
            return Err(k.err(
                "sync",
                format!("unknown sync mode \"{s}\"; allowed: {SYNC_MODES}"),
            ));
        }
    })
}

/// The `chunk_bytes` key of copy and mixed: at most 64 MiB and at most
/// `bytes` when the amount is fixed; a multiple of 4096 for O_DIRECT.
pub(super) fn chunk_key(k: &Keys, bytes: Option<u64>, sync: SyncMode) -> Result<u64, KeyError> {
    let c = k.positive_or("chunk_bytes", 1024)?;
    if c > 64 << 20 {
        return Err(k.err("chunk_bytes", format!("at most 67108864 (64 MiB), got {c}")));
    }
    if let Some(b) = bytes
        && c > b
    {
        return Err(k.err("chunk_bytes", format!("{c} is larger than bytes = {b}")));
    }
    if sync == SyncMode::Direct && !c.is_multiple_of(DIRECT_ALIGN) {
        return Err(k.err(
            "chunk_bytes",
            format!("sync = \"direct\" (O_DIRECT) needs a multiple of 4096, got {c}"),
        ));
    }
    Ok(c)
}

/// The copy workload's registration.
pub const ENTRY: Entry = Entry {
    name: "copy",
    parse: |k| {
        k.only(&["bytes", "chunk_bytes", "sync", "duration_s"])?;
        let stop = k.stop("bytes", 1_024_000)?;
        let fixed = match stop {
            Stop::Work(b) => Some(b),
            Stop::DurationNs(_) => None,
        };
        let sync = sync_key(k)?;
        let chunk_bytes = chunk_key(k, fixed, sync)?;
        Ok(Workload::Copy(CopyParams {
            stop,
            chunk_bytes,
            sync,
        }))
    },
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writing_an_input_gives_up_at_its_deadline_and_removes_the_part() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("in.dat");
        let past = std::time::Instant::now();
        let e = write_input_until(&path, 1 << 30, false, Some(past)).unwrap_err();
        assert!(e.is::<PrepareTimedOut>(), "{e:#}");
        assert!(!path.exists());
        write_input_until(&path, 1000, false, None).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 1000);
    }

    fn params(bytes: u64, chunk: u64, sync: SyncMode) -> CopyParams {
        CopyParams {
            stop: Stop::Work(bytes),
            chunk_bytes: chunk,
            sync,
        }
    }

    /// Prepare the input in a fresh temporary directory and run `p` there.
    fn prepare_and_run(p: &CopyParams, index: usize) -> anyhow::Result<WorkOutput> {
        let dir = tempfile::tempdir()?;
        write_input(&dir.path().join(INPUT_FILE), input_bytes(p), true)?;
        let ctx = WorkContext {
            fds: Vec::new(),
            dir: dir.path().to_path_buf(),
            index,
            release_ns: None,
        };
        let out = run(p, &ctx)?;
        assert!(
            !output_path(dir.path(), index).exists(),
            "output not removed"
        );
        assert!(dir.path().join(INPUT_FILE).exists(), "input must stay");
        Ok(out)
    }

    #[test]
    fn buffered_modes_copy_all_bytes() {
        for sync in [SyncMode::None, SyncMode::FsyncEnd, SyncMode::FsyncEach] {
            let out = prepare_and_run(&params(64 << 10, 1024, sync), 1).unwrap();
            assert_eq!(out.work, 64 << 10, "{sync:?}");
            assert_eq!(out.figures["writes"], 64.0, "{sync:?}");
            assert!(out.figures["mb_per_s"] > 0.0);
        }
    }

    #[test]
    fn partial_last_chunk() {
        let out = prepare_and_run(&params(10_000, 4096, SyncMode::None), 0).unwrap();
        assert_eq!(out.work, 10_000);
        assert_eq!(out.figures["writes"], 3.0);
    }

    #[test]
    fn direct_mode_works_on_ext4() {
        // Aligned size, and a size whose last chunk is not block-aligned.
        for bytes in [64 << 10, 10_000] {
            let out = prepare_and_run(&params(bytes, 8192, SyncMode::Direct), 2).unwrap();
            assert_eq!(out.work, bytes);
        }
    }

    #[test]
    fn direct_needs_aligned_chunks() {
        let dir = tempfile::tempdir().unwrap();
        let p = params(8192, 1000, SyncMode::Direct);
        write_input(&dir.path().join(INPUT_FILE), 8192, false).unwrap();
        let ctx = WorkContext {
            fds: Vec::new(),
            dir: dir.path().to_path_buf(),
            index: 0,
            release_ns: None,
        };
        let e = format!("{:#}", run(&p, &ctx).unwrap_err());
        assert!(e.contains("chunk_bytes"), "{e}");
        assert!(!output_path(dir.path(), 0).exists());
    }

    #[test]
    fn duration_mode_wraps_and_verifies() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("in.dat");
        let output = dir.path().join("out.dat");
        write_input(&input, 8192, false).unwrap();
        let mut c = Copier::open(&input, &output, 1024, SyncMode::None).unwrap();
        let elapsed = copy_loop(&mut c, Stop::DurationNs(5_000_000), None).unwrap();
        assert!(elapsed >= 5_000_000);
        let stats = c.finish().unwrap();
        assert!(stats.bytes > 8192, "should have wrapped: {stats:?}");
        assert_eq!(stats.bytes % 1024, 0);
        assert!(!output.exists());
    }

    #[test]
    fn missing_or_short_input_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = WorkContext {
            fds: Vec::new(),
            dir: dir.path().to_path_buf(),
            index: 0,
            release_ns: None,
        };
        let e = format!(
            "{:#}",
            run(&params(100, 10, SyncMode::None), &ctx).unwrap_err()
        );
        assert!(e.contains(INPUT_FILE), "{e}");
        write_input(&dir.path().join(INPUT_FILE), 50, false).unwrap();
        let e = format!(
            "{:#}",
            run(&params(100, 10, SyncMode::None), &ctx).unwrap_err()
        );
        assert!(e.contains("holds 50 bytes"), "{e}");
        assert!(!output_path(dir.path(), 0).exists());
    }

    #[test]
    fn input_is_nonzero_and_deterministic() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        write_input(&a, 100_000, false).unwrap();
        write_input(&b, 100_000, false).unwrap();
        let (a, b) = (std::fs::read(a).unwrap(), std::fs::read(b).unwrap());
        assert_eq!(a.len(), 100_000);
        assert_eq!(a, b);
        assert!(a.iter().all(|&x| x != 0));
        // Not a constant pattern.
        assert!(a.windows(2).filter(|w| w[0] != w[1]).count() > 90_000);
    }
}
