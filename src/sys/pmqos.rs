//! Holding the CPUs' wake-up latency bound, `/dev/cpu_dma_latency` (PM
//! QoS), as cyclictest does while it runs: while a process holds the file
//! open with a value written to it, no CPU enters an idle state whose exit
//! latency exceeds that many microseconds; closing the file (also when the
//! process dies, however it dies) drops the request.
//!
//! At 0, an idle CPU polls instead of halting. On a virtual machine with
//! the `haltpoll` idle driver this decides wake-up latency: a halted vCPU
//! exits to the host, and a timer that fires then waits for the host to
//! run the vCPU again (about 10 µs more at the median on the 2-CPU
//! Firecracker VM this was measured on).

use std::fs::{File, OpenOptions};
use std::io::{self, Write};

/// The PM QoS file.
pub const PATH: &str = "/dev/cpu_dma_latency";

/// A held wake-up latency bound; dropping it releases the bound.
#[derive(Debug)]
pub struct CpuLatencyHold {
    _file: File,
    pub max_us: u32,
}

impl CpuLatencyHold {
    /// Ask that no CPU sleep deeper than `max_us` µs of exit latency for as
    /// long as the returned value lives. Needs write access to the file
    /// (root, as a rule).
    pub fn hold(max_us: u32) -> io::Result<CpuLatencyHold> {
        let mut file = OpenOptions::new().write(true).open(PATH)?;
        // The kernel takes a binary s32 (an ASCII hex string also works).
        let value = i32::try_from(max_us).unwrap_or(i32::MAX);
        file.write_all(&value.to_ne_bytes())?;
        Ok(CpuLatencyHold {
            _file: file,
            max_us,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holding_the_bound_works_or_says_why_not() {
        match CpuLatencyHold::hold(0) {
            Ok(h) => assert_eq!(h.max_us, 0),
            // Without root, or without the device (a container): a clear error.
            Err(e) => assert!(
                matches!(
                    e.kind(),
                    io::ErrorKind::PermissionDenied | io::ErrorKind::NotFound
                ),
                "{e}"
            ),
        }
    }
}
