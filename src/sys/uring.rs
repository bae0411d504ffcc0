//! An io_uring whose operations each read into or write from one slot of a
//! buffer it owns. The kernel reads and writes that memory while an
//! operation is in flight, so the type tracks which slots are busy and
//! hands out a slot's bytes only while it is not: no code can touch memory
//! the kernel is using, and the buffer is never freed under an operation.

use std::io;
use std::os::fd::RawFd;

use io_uring::{IoUring, opcode, types};

/// `IORING_ENTER_GETEVENTS`: also run deferred completion work and, with
/// `min_complete` > 0, wait for that many completions.
const ENTER_GETEVENTS: u32 = 1;

/// Alignment of every slot (O_DIRECT needs the logical block size; 4096
/// covers every device).
pub const SLOT_ALIGN: usize = 4096;

pub struct SlotRing {
    ring: IoUring,
    /// Backing store; reached only through `base` once built (never moved
    /// or borrowed as a whole while operations may be in flight).
    storage: Vec<u8>,
    base: *mut u8,
    block: usize,
    busy: Vec<bool>,
    in_flight: usize,
}

impl SlotRing {
    /// `slots` slots of `block` bytes (`block` a multiple of `SLOT_ALIGN`
    /// keeps every slot aligned), over `ring`.
    pub fn new(ring: IoUring, slots: usize, block: usize) -> io::Result<SlotRing> {
        let len = slots
            .checked_mul(block)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "buffer too large"))?;
        let mut storage = vec![0u8; len + SLOT_ALIGN];
        let offset = storage.as_ptr().align_offset(SLOT_ALIGN);
        if offset >= SLOT_ALIGN {
            return Err(io::Error::other("cannot align the buffer"));
        }
        // SAFETY: offset < SLOT_ALIGN, so base..base+len lies in `storage`.
        let base = unsafe { storage.as_mut_ptr().add(offset) };
        Ok(SlotRing {
            ring,
            storage,
            base,
            block,
            busy: vec![false; slots],
            in_flight: 0,
        })
    }

    pub fn slots(&self) -> usize {
        self.busy.len()
    }

    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Slot `i`'s bytes. Panics when an operation on it is in flight.
    pub fn slot_mut(&mut self, i: usize) -> &mut [u8] {
        assert!(!self.busy[i], "slot {i} is in flight");
        // SAFETY: slot i is [i·block, (i+1)·block) inside the buffer, no
        // operation uses it (checked above), and `&mut self` keeps anyone
        // else from reaching it while the slice lives.
        unsafe { std::slice::from_raw_parts_mut(self.base.add(i * self.block), self.block) }
    }

    /// Queue an operation on slot `i`'s first `len` bytes (a read from, or
    /// a write to, `fd` at `offset`), tagged with the slot. Not yet
    /// submitted: `enter` does that.
    pub fn push(
        &mut self,
        i: usize,
        fd: RawFd,
        read: bool,
        len: u32,
        offset: u64,
    ) -> io::Result<()> {
        assert!(!self.busy[i], "slot {i} is in flight");
        assert!(len as usize <= self.block, "{len} bytes exceed a slot");
        // SAFETY: as in slot_mut; the pointer is used by the kernel only.
        let ptr = unsafe { self.base.add(i * self.block) };
        let fd = types::Fd(fd);
        let entry = if read {
            opcode::Read::new(fd, ptr, len).offset(offset).build()
        } else {
            opcode::Write::new(fd, ptr, len).offset(offset).build()
        }
        .user_data(i as u64);
        // SAFETY: the entry points into slot i of the buffer, which stays
        // allocated until the operation completes (it is marked busy now,
        // and Drop never frees the buffer while anything is in flight); the
        // descriptor is the caller's open file (the kernel takes its own
        // reference at submission).
        unsafe { self.ring.submission().push(&entry) }
            .map_err(|_| io::Error::other("io_uring submission queue full"))?;
        self.busy[i] = true;
        self.in_flight += 1;
        Ok(())
    }

    /// `io_uring_enter(GETEVENTS)`: submit everything queued and wait for
    /// `min_complete` completions; retried on EINTR. EAGAIN/EBUSY (the
    /// kernel wants completions reaped first) return Ok: entries it did not
    /// take stay queued for the next call.
    pub fn enter(&mut self, min_complete: u32) -> io::Result<()> {
        loop {
            let to_submit = self.ring.submission().len() as u32;
            // SAFETY: no argument structure is passed (`None`), so the
            // kernel reads nothing but the ring, which `self` owns.
            let r = unsafe {
                self.ring.submitter().enter::<libc::sigset_t>(
                    to_submit,
                    min_complete,
                    ENTER_GETEVENTS,
                    None,
                )
            };
            match r {
                Ok(_) => return Ok(()),
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(e) if matches!(e.raw_os_error(), Some(libc::EAGAIN | libc::EBUSY)) => {
                    return Ok(());
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Every completion in the queue, as (slot, result), its slot free
    /// again; returns how many.
    pub fn reap(&mut self, mut each: impl FnMut(&mut SlotRing, usize, i32)) -> usize {
        let done: Vec<(usize, i32)> = self
            .ring
            .completion()
            .map(|c| (c.user_data() as usize, c.result()))
            .collect();
        for &(i, res) in &done {
            if self.busy[i] {
                self.busy[i] = false;
                self.in_flight -= 1;
            }
            each(self, i, res);
        }
        done.len()
    }
}

impl Drop for SlotRing {
    fn drop(&mut self) {
        // Wait for what is still in flight; if the ring fails, leak the
        // buffer rather than free memory the kernel may still write.
        while self.in_flight > 0 {
            if self.enter(1).is_err() {
                std::mem::forget(std::mem::take(&mut self.storage));
                return;
            }
            self.reap(|_, _, _| {});
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsRawFd;

    #[test]
    fn a_read_lands_in_its_slot_and_frees_it() {
        let Ok(ring) = IoUring::new(4) else {
            panic!("io_uring is unavailable on this machine");
        };
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(&[7u8; 8192]).unwrap();
        let mut r = SlotRing::new(ring, 2, 4096).unwrap();
        r.slot_mut(1).fill(0);
        r.push(1, f.as_raw_fd(), true, 4096, 4096).unwrap();
        assert_eq!(r.in_flight(), 1);
        let mut got = Vec::new();
        while r.in_flight() > 0 {
            r.enter(1).unwrap();
            r.reap(|_, i, res| got.push((i, res)));
        }
        assert_eq!(got, vec![(1, 4096)]);
        assert!(r.slot_mut(1).iter().all(|&b| b == 7));
    }

    #[test]
    #[should_panic(expected = "in flight")]
    fn a_busy_slot_cannot_be_touched() {
        let ring = IoUring::new(4).unwrap();
        let f = tempfile::tempfile().unwrap();
        let mut r = SlotRing::new(ring, 1, 4096).unwrap();
        r.push(0, f.as_raw_fd(), true, 4096, 0).unwrap();
        let _ = r.slot_mut(0);
    }
}
