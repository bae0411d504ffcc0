//! Machines as a campaign factor: guests schedlab boots under QEMU.

pub mod kernel;
