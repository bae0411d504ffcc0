//! The channels between cooperating workers of one run (the pipes of a
//! ping-pong pair, the sockets of a messaging group): created by the parent
//! before any worker is spawned, each descriptor handed to the workers that
//! use it (kept open across their `exec`), and closed in the parent once
//! all are spawned, so that a worker whose peer died sees end-of-file
//! instead of waiting for ever.

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;

use crate::sys::{fds, proc};

/// Channel descriptors are numbered at least this, above the numbers a
/// worker's set-up moves descriptors to (the start barrier).
const FIRST_CHANNEL_FD: i32 = 10;

/// The run's channels and which worker gets which.
#[derive(Debug, Default)]
pub struct Wiring {
    held: Vec<OwnedFd>,
    per_process: Vec<Vec<i32>>,
}

impl Wiring {
    /// Keep `fd` open in the parent until the workers are spawned; its
    /// number as workers will see it.
    fn hold(&mut self, fd: OwnedFd) -> anyhow::Result<i32> {
        let fd = fds::at_least(fd, FIRST_CHANNEL_FD)?;
        let raw = fd.as_raw_fd();
        self.held.push(fd);
        Ok(raw)
    }

    /// Hand descriptor `fd` (a number from this wiring) to worker `process`,
    /// as its next channel.
    pub fn give(&mut self, process: usize, fd: i32) {
        if self.per_process.len() <= process {
            self.per_process.resize(process + 1, Vec::new());
        }
        self.per_process[process].push(fd);
    }

    /// A pipe: (read end, write end).
    pub fn pipe(&mut self) -> anyhow::Result<(i32, i32)> {
        let (r, w) = proc::pipe()?;
        Ok((self.hold(r)?, self.hold(w)?))
    }

    /// A connected pair of Unix stream sockets.
    pub fn socketpair(&mut self) -> anyhow::Result<(i32, i32)> {
        let (a, b) = UnixStream::pair()?;
        Ok((self.hold(a.into())?, self.hold(b.into())?))
    }

    /// An eventfd counter (semaphore mode: a read takes one).
    pub fn eventfd(&mut self) -> anyhow::Result<i32> {
        self.hold(fds::eventfd(true)?)
    }

    /// An eventfd counter in plain mode: a read takes the whole count, so
    /// a writer can tell the reader a value (one at a time).
    pub fn counter(&mut self) -> anyhow::Result<i32> {
        self.hold(fds::eventfd(false)?)
    }

    /// A memory file (`memfd`) holding `bytes`, which every worker given
    /// it can read or map (a replay's description and doorbells).
    pub fn memory(&mut self, bytes: &[u8]) -> anyhow::Result<i32> {
        use std::io::Write;
        let fd = fds::memfd(c"schedlab-wiring")?;
        let mut f = std::fs::File::from(fd);
        f.write_all(bytes)?;
        self.hold(f.into())
    }

    /// The channels worker `process` gets, in the order they were given.
    pub fn fds_of(&self, process: usize) -> &[i32] {
        self.per_process.get(process).map_or(&[], Vec::as_slice)
    }

    /// Descriptors held open in the parent.
    pub fn held(&self) -> usize {
        self.held.len()
    }
}

/// In a worker: own the channels the parent handed it, in order.
pub fn take(fds: &[i32]) -> anyhow::Result<Vec<OwnedFd>> {
    fds.iter()
        .map(|&fd| fds::inherited(fd).map_err(|e| anyhow::anyhow!("channel descriptor {fd}: {e}")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channels_are_numbered_above_the_barrier_and_handed_out_in_order() {
        let mut w = Wiring::default();
        let (r, wr) = w.pipe().unwrap();
        let (a, b) = w.socketpair().unwrap();
        let e = w.eventfd().unwrap();
        for fd in [r, wr, a, b, e] {
            assert!(fd >= FIRST_CHANNEL_FD, "{fd}");
        }
        w.give(1, r);
        w.give(1, b);
        w.give(0, wr);
        assert_eq!(w.fds_of(0), &[wr]);
        assert_eq!(w.fds_of(1), &[r, b]);
        assert!(w.fds_of(7).is_empty());
        assert_eq!(w.held(), 5);
    }
}
