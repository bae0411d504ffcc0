//! Whether this machine's `/dev/kvm` can be used: it opens, answers the
//! KVM API version QEMU needs, and makes a VM. Asked on a thread of its own
//! under a time limit, since a device that hangs must not hang schedlab.
//! (A kernel whose KVM makes VMs but whose vCPUs never run is only found
//! by booting: `crate::machine::guest` falls back to TCG then.)

use std::time::Duration;

/// `KVM_GET_API_VERSION` and `KVM_CREATE_VM` (`_IO(KVMIO, 0x00)`,
/// `_IO(KVMIO, 0x01)`, KVMIO = 0xAE) and the API version every KVM has
/// had since Linux 2.6.22.
const KVM_GET_API_VERSION: libc::c_ulong = 0xAE00;
const KVM_CREATE_VM: libc::c_ulong = 0xAE01;
const KVM_API_VERSION: i32 = 12;

/// Ok when KVM answers within `limit`; else why not.
pub fn probe(limit: Duration) -> Result<(), String> {
    let (tx, rx) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("kvm-probe".into())
        .spawn(move || {
            let _ = tx.send(ask());
        });
    if let Err(e) = spawned {
        return Err(format!("cannot start the probe of /dev/kvm: {e}"));
    }
    match rx.recv_timeout(limit) {
        Ok(r) => r,
        Err(_) => Err(format!(
            "/dev/kvm did not answer within {:.0} s",
            limit.as_secs_f64()
        )),
    }
}

fn ask() -> Result<(), String> {
    use std::os::fd::AsRawFd;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .map_err(|e| format!("/dev/kvm cannot be opened: {e}"))?;
    // SAFETY: an ioctl without argument on a descriptor we own.
    let v = unsafe { libc::ioctl(f.as_raw_fd(), KVM_GET_API_VERSION, 0) };
    if v != KVM_API_VERSION {
        return Err(format!(
            "/dev/kvm answered API version {v}, not {KVM_API_VERSION}"
        ));
    }
    // SAFETY: as above; the VM's descriptor is closed at once.
    let vm = unsafe { libc::ioctl(f.as_raw_fd(), KVM_CREATE_VM, 0) };
    if vm < 0 {
        return Err(format!(
            "/dev/kvm cannot make a VM: {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: `vm` is a descriptor the kernel just gave us and nothing else holds.
    unsafe { libc::close(vm) };
    Ok(())
}
