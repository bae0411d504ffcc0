//! What workers send back, through pipes rather than files: each process
//! of a run gets a result pipe (its `WorkerResult` as JSON, written once at
//! the end) and a stderr pipe. The parent holds the read ends, non-blocking,
//! in one `epoll` set with whatever else its wait watches, and drains them
//! as they fill, so a worker never blocks for ever on a full pipe while the
//! parent waits for it to exit. Of stderr it keeps the last bytes only.
//!
//! A worker that becomes another program (`kind = "command"`) has no
//! result: its result pipe carries the program's standard output instead,
//! and of both streams the last [`PROGRAM_KEPT`] bytes are kept, the rest
//! counted and dropped, so a program that prints gigabytes fills neither
//! memory nor disk.
//!
//! Nothing here touches the file system: the run directory (and its
//! directory lock and inode allocation per file) is left to workloads that
//! work on files.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, OwnedFd};

use crate::sys::events::Poller;
use crate::sys::{fds, proc};
use crate::worker::WorkerResult;

/// Bytes of a worker's stderr kept (the record shows the last lines of
/// these).
pub const STDERR_KEPT: usize = 2048;
/// Bytes of a program's stdout and of its stderr kept (`kind = "command"`).
pub const PROGRAM_KEPT: usize = 64 << 10;
/// A result longer than this is not read further and counts as missing.
pub const RESULT_MAX: usize = 256 << 20;
/// Descriptor numbers of the child's ends are moved at least this high in
/// the parent, above the numbers the child's set-up moves them to (0 to
/// `proc::LAST_FIXED_FD`), so that no move overwrites a later one's source.
pub const HIGH_FD: i32 = 10;
/// Tokens below this are the wait's own (signals, timer); a process's
/// pipes are `FIRST_TOKEN + 2 * index` (result) and `+ 1` (stderr).
pub const FIRST_TOKEN: u64 = 16;

/// The write ends one child gets, numbered at least `HIGH_FD`.
pub struct ChildEnds {
    pub result: OwnedFd,
    pub stderr: OwnedFd,
}

/// What one process has sent so far.
#[derive(Default)]
struct Received {
    result_pipe: Option<File>,
    stderr_pipe: Option<File>,
    result: Vec<u8>,
    too_long: bool,
    stderr: Vec<u8>,
    /// A program's output: the result pipe is its stdout, and both streams
    /// keep their last [`PROGRAM_KEPT`] bytes.
    program: bool,
    /// Bytes dropped from the front of stdout and of stderr.
    dropped: [u64; 2],
}

/// A program's captured output: the last bytes of each stream and how many
/// came before them.
pub struct ProgramOutput<'a> {
    pub stdout: &'a [u8],
    pub stdout_dropped: u64,
    pub stderr: &'a [u8],
    pub stderr_dropped: u64,
}

/// Keep the last `kept` bytes of `buf` (trimming when it holds twice as
/// many, so that trimming stays rare); counts what was dropped.
fn keep_tail(buf: &mut Vec<u8>, kept: usize, dropped: &mut u64) {
    if buf.len() > 2 * kept {
        let cut = buf.len() - kept;
        buf.drain(..cut);
        *dropped += cut as u64;
    }
}

/// Every process's pipes and what came through them.
pub struct Outputs {
    poller: Poller,
    procs: Vec<Received>,
}

impl Outputs {
    pub fn new() -> io::Result<Outputs> {
        Ok(Outputs {
            poller: Poller::new()?,
            procs: Vec::new(),
        })
    }

    /// The set the pipes are in, for the wait to add its own descriptors
    /// (with tokens below [`FIRST_TOKEN`]).
    pub fn poller(&self) -> &Poller {
        &self.poller
    }

    /// Make the pipes of the next process (index = processes so far); the
    /// returned write ends go to the child and are closed here once it is
    /// spawned.
    pub fn open(&mut self) -> io::Result<ChildEnds> {
        self.open_for(false)
    }

    /// [`Outputs::open`]; `program`: the process becomes another program,
    /// whose stdout goes through the result pipe.
    pub fn open_for(&mut self, program: bool) -> io::Result<ChildEnds> {
        let token = FIRST_TOKEN + 2 * self.procs.len() as u64;
        let (result_r, result_w) = proc::pipe()?;
        let (stderr_r, stderr_w) = proc::pipe()?;
        for r in [&result_r, &stderr_r] {
            fds::set_nonblocking(r)?;
        }
        self.poller.add(result_r.as_fd(), token)?;
        self.poller.add(stderr_r.as_fd(), token + 1)?;
        self.procs.push(Received {
            result_pipe: Some(File::from(result_r)),
            stderr_pipe: Some(File::from(stderr_r)),
            program,
            ..Received::default()
        });
        Ok(ChildEnds {
            result: fds::at_least(result_w, HIGH_FD)?,
            stderr: fds::at_least(stderr_w, HIGH_FD)?,
        })
    }

    /// Read what a ready pipe holds (`token` from the poller; other tokens
    /// are ignored).
    pub fn on_ready(&mut self, token: u64) {
        let Some(i) = token.checked_sub(FIRST_TOKEN) else {
            return;
        };
        let (index, stderr) = ((i / 2) as usize, i % 2 == 1);
        if index < self.procs.len() {
            self.drain(index, stderr);
        }
    }

    /// Read every pipe until it is empty: once the processes have exited,
    /// all they wrote is in the pipes.
    pub fn drain_all(&mut self) {
        for index in 0..self.procs.len() {
            self.drain(index, false);
            self.drain(index, true);
        }
    }

    fn drain(&mut self, index: usize, stderr: bool) {
        let p = &mut self.procs[index];
        let pipe = if stderr {
            &mut p.stderr_pipe
        } else {
            &mut p.result_pipe
        };
        let Some(file) = pipe else {
            return;
        };
        let mut buf = [0u8; 65536];
        let closed = loop {
            match file.read(&mut buf) {
                Ok(0) => break true,
                Ok(n) if stderr => {
                    p.stderr.extend_from_slice(&buf[..n]);
                    let kept = if p.program { PROGRAM_KEPT } else { STDERR_KEPT };
                    keep_tail(&mut p.stderr, kept, &mut p.dropped[1]);
                }
                Ok(n) if p.program => {
                    p.result.extend_from_slice(&buf[..n]);
                    keep_tail(&mut p.result, PROGRAM_KEPT, &mut p.dropped[0]);
                }
                Ok(n) => {
                    if p.result.len() + n > RESULT_MAX {
                        p.too_long = true;
                        p.result = Vec::new();
                    }
                    if !p.too_long {
                        p.result.extend_from_slice(&buf[..n]);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // WouldBlock: empty for now. Anything else: nothing more
                // will come through it.
                Err(e) => break e.kind() != io::ErrorKind::WouldBlock,
            }
        };
        if closed {
            // End of file: the process (and whatever it started) is done
            // with it. Closing it frees the descriptor and leaves the set.
            if let Some(f) = pipe.take() {
                let _ = self.poller.remove(f.as_fd());
            }
        }
    }

    /// Whether every process's result pipe has closed: each has reported,
    /// or died (a program's: its standard output is closed).
    pub fn results_closed(&self) -> bool {
        self.procs.iter().all(|p| p.result_pipe.is_none())
    }

    /// The result process `index` sent, if it sent a whole one.
    pub fn result(&self, index: usize) -> Option<WorkerResult> {
        let p = self.procs.get(index)?;
        if p.too_long || p.result.is_empty() {
            return None;
        }
        serde_json::from_slice(&p.result).ok()
    }

    /// What program `index` printed (its last bytes); None for a process
    /// that did not become a program.
    pub fn program_output(&self, index: usize) -> Option<ProgramOutput<'_>> {
        let p = self.procs.get(index).filter(|p| p.program)?;
        let last = |b: &'_ [u8]| b.len().saturating_sub(PROGRAM_KEPT);
        Some(ProgramOutput {
            stdout: &p.result[last(&p.result)..],
            stdout_dropped: p.dropped[0] + last(&p.result) as u64,
            stderr: &p.stderr[last(&p.stderr)..],
            stderr_dropped: p.dropped[1] + last(&p.stderr) as u64,
        })
    }

    /// The last lines process `index` wrote to stderr (at most 10 lines of
    /// the last [`STDERR_KEPT`] bytes).
    pub fn stderr_tail(&self, index: usize) -> String {
        let Some(p) = self.procs.get(index) else {
            return String::new();
        };
        tail(&p.stderr)
    }
}

/// The last lines of `bytes`: at most 10 of its last [`STDERR_KEPT`] bytes.
fn tail(bytes: &[u8]) -> String {
    let start = bytes.len().saturating_sub(STDERR_KEPT);
    let text = String::from_utf8_lossy(&bytes[start..]);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(10)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn result_json() -> Vec<u8> {
        let r = WorkerResult {
            start_ns: 1,
            end_ns: 2,
            usage_start: Default::default(),
            usage_end: Default::default(),
            schedstat_start: None,
            schedstat_end: None,
            nr_migrations_start: None,
            nr_migrations_end: None,
            output: crate::workload::WorkOutput {
                work: 42,
                elapsed_ns: 1,
                figures: Default::default(),
                latency: Default::default(),
            },
        };
        serde_json::to_vec(&r).unwrap()
    }

    /// Drain whatever the poller reports until `done` holds.
    fn pump(o: &mut Outputs, done: impl Fn(&Outputs) -> bool) {
        let mut ready = Vec::new();
        while !done(o) {
            o.poller()
                .wait(&mut ready, Some(std::time::Duration::from_secs(10)))
                .unwrap();
            assert!(!ready.is_empty(), "nothing became ready");
            for &t in &ready {
                o.on_ready(t);
            }
        }
    }

    #[test]
    fn results_and_stderr_of_each_process_stay_apart() {
        let mut o = Outputs::new().unwrap();
        let a = o.open().unwrap();
        let b = o.open().unwrap();
        // Process 1 writes first; process 0 writes a result larger than a
        // pipe holds (4 MiB of padding), which only completes while read.
        let mut big = result_json();
        big.resize(big.len() + (4 << 20), b' ');
        File::from(b.result).write_all(&result_json()).unwrap();
        File::from(b.stderr).write_all(b"one\ntwo\n").unwrap();
        let writer = std::thread::spawn(move || {
            let mut e = File::from(a.stderr);
            for i in 0..20_000 {
                writeln!(e, "line {i}").unwrap();
            }
            File::from(a.result).write_all(&big).unwrap();
        });
        pump(&mut o, |o| o.procs.iter().all(|p| p.result_pipe.is_none()));
        writer.join().unwrap();
        o.drain_all();
        assert_eq!(o.result(0).unwrap().output.work, 42);
        assert_eq!(o.result(1).unwrap().output.work, 42);
        assert_eq!(o.stderr_tail(1), "one\ntwo");
        let t = o.stderr_tail(0);
        assert_eq!(t.lines().count(), 10, "{t}");
        assert!(t.ends_with("line 19999"), "{t}");
        assert!(o.procs[0].stderr.len() <= 2 * STDERR_KEPT);
        assert!(o.result(2).is_none());
    }

    #[test]
    fn a_program_s_output_keeps_its_tail_and_counts_the_rest() {
        let mut o = Outputs::new().unwrap();
        let ends = o.open_for(true).unwrap();
        let mut out = File::from(ends.result);
        let mut err = File::from(ends.stderr);
        let chunk = vec![b'x'; 40 << 10];
        for i in 0..10u8 {
            out.write_all(&chunk).unwrap();
            err.write_all(&[b'a' + i]).unwrap();
            o.drain_all();
        }
        out.write_all(b"\nTime: 1.5\n").unwrap();
        drop((out, err));
        o.drain_all();
        let p = o.program_output(0).unwrap();
        assert_eq!(p.stdout.len(), PROGRAM_KEPT);
        assert!(p.stdout.ends_with(b"Time: 1.5\n"));
        assert_eq!(
            p.stdout_dropped + p.stdout.len() as u64,
            10 * (40 << 10) + 11,
            "every byte is kept or counted"
        );
        assert_eq!((p.stderr, p.stderr_dropped), (&b"abcdefghij"[..], 0));
        let _plain = o.open().unwrap();
        assert!(
            o.program_output(1).is_none(),
            "a worker's pipes are no program's"
        );
    }

    #[test]
    fn a_cut_or_missing_result_is_no_result() {
        let mut o = Outputs::new().unwrap();
        let cut = o.open().unwrap();
        let none = o.open().unwrap();
        let json = result_json();
        File::from(cut.result)
            .write_all(&json[..json.len() / 2])
            .unwrap();
        drop(none);
        o.drain_all();
        assert!(o.result(0).is_none());
        assert!(o.result(1).is_none());
        assert_eq!(o.stderr_tail(1), "");
        // Closed pipes left the set: nothing is ready any more.
        let mut ready = vec![0];
        o.poller()
            .wait(&mut ready, Some(std::time::Duration::ZERO))
            .unwrap();
        assert!(ready.is_empty(), "{ready:?}");
    }

    #[test]
    fn the_tail_is_the_last_ten_lines_of_the_last_bytes() {
        assert_eq!(tail(b""), "");
        let many: String = (0..30).map(|i| format!("l{i}\n")).collect();
        assert_eq!(tail(many.as_bytes()).lines().next(), Some("l20"));
        let long = "x".repeat(5000);
        assert_eq!(tail(long.as_bytes()).len(), STDERR_KEPT);
    }
}
