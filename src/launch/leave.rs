//! Holding parked workers until the run's last result. A worker that parks
//! once measured (`worker::WorkerArgs::park_when_done`) sleeps on the read
//! end of the leave pipe after writing its result; the parent holds the
//! write end and closes it once every process's result pipe has closed
//! (each has reported, or died), so the workers exit together after every
//! measurement of the run was taken. If schedlab dies, the kernel closes
//! the write end and they leave too.

use std::io;
use std::os::fd::OwnedFd;

use crate::sys::{fds, proc};

use super::outputs::{self, Outputs};

/// The parent's end of the leave pipe.
pub struct Leave {
    write: Option<OwnedFd>,
}

impl Leave {
    /// A new leave pipe: the parent's end, and the read end for the
    /// workers (numbered at least `outputs::HIGH_FD`, close-on-exec until a
    /// worker's set-up moves it to `proc::LEAVE_FD`).
    pub fn open() -> io::Result<(Leave, OwnedFd)> {
        let (read, write) = proc::pipe()?;
        let read = fds::at_least(read, outputs::HIGH_FD)?;
        Ok((Leave { write: Some(write) }, read))
    }

    /// Let the workers go once every result pipe has closed. Returns
    /// whether they have been let go.
    pub fn release_when_reported(&mut self, outputs: &Outputs) -> bool {
        if self.write.is_some() && outputs.results_closed() {
            self.release();
        }
        self.write.is_none()
    }

    /// Let the workers go now.
    pub fn release(&mut self) {
        self.write = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn the_read_end_sees_end_of_file_only_once_released() {
        let (mut leave, read) = Leave::open().unwrap();
        fds::set_nonblocking(&read).unwrap();
        let mut read = std::fs::File::from(read);
        let mut buf = [0u8; 1];
        let err = read.read(&mut buf).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
        // No process: nothing to wait for.
        let outputs = Outputs::new().unwrap();
        assert!(leave.release_when_reported(&outputs));
        assert_eq!(read.read(&mut buf).unwrap(), 0);
    }

    #[test]
    fn a_result_pipe_still_open_holds_the_workers() {
        let (mut leave, read) = Leave::open().unwrap();
        fds::set_nonblocking(&read).unwrap();
        let mut read = std::fs::File::from(read);
        let mut outputs = Outputs::new().unwrap();
        let ends = outputs.open().unwrap();
        assert!(!leave.release_when_reported(&outputs));
        let mut buf = [0u8; 1];
        assert!(read.read(&mut buf).is_err());
        // The worker's end closes (it reported or died); the parent sees
        // end of file when it next drains the pipe.
        drop(ends);
        outputs.drain_all();
        assert!(leave.release_when_reported(&outputs));
        assert_eq!(read.read(&mut buf).unwrap(), 0);
    }
}
