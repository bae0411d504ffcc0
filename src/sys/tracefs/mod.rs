//! tracefs, the kernel's tracing file system: where it is mounted,
//! mounting and unmounting a private mount of schedlab's own, schedlab's
//! tracing instances in it (`instances/<name>`: a ring buffer, event
//! switches and filters of their own, so the top-level tracing state and
//! every other tracing user are never touched), their per-CPU raw buffers
//! (`per_cpu/cpuN/trace_pipe_raw`, read without blocking) and counters
//! (`per_cpu/cpuN/stats`).
//!
//! What schedlab changes here is journaled by `sys::knobs` (the mount and
//! the instance, before either is made) so that a schedlab killed with
//! SIGKILL leaves nothing behind after the next start.

use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io::{self, Read as _, Write as _};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

/// Where tracefs is normally mounted.
pub const STANDARD_MOUNT: &str = "/sys/kernel/tracing";

/// The mount points of tracefs in `/proc/self/mountinfo` text, in order.
pub fn tracefs_mounts_in(mountinfo: &str) -> Vec<PathBuf> {
    mountinfo
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let dash = fields.iter().position(|&f| f == "-")?;
            (fields.get(dash + 1) == Some(&"tracefs"))
                .then(|| fields.get(4).map(|p| PathBuf::from(unescape_mount(p))))
                .flatten()
        })
        .collect()
}

/// Mount points escape space, tab, newline and backslash as `\ooo`.
fn unescape_mount(p: &str) -> String {
    let b = p.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && let Ok(v) = u8::from_str_radix(&p[i + 1..i + 4], 8)
        {
            out.push(v);
            i += 4;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Every tracefs mount point of this mount namespace.
pub fn tracefs_mounts() -> Vec<PathBuf> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .map(|t| tracefs_mounts_in(&t))
        .unwrap_or_default()
}

/// Whether tracefs is mounted at exactly `dir`.
pub fn mounted_at(dir: &Path) -> bool {
    tracefs_mounts().iter().any(|m| m == dir)
}

fn cpath(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
}

/// Mounts tracefs at `dir` (an existing directory).
pub fn mount(dir: &Path) -> io::Result<()> {
    let target = cpath(dir)?;
    // SAFETY: NUL-terminated strings that outlive the call; no data.
    let rc = unsafe {
        libc::mount(
            c"nodev".as_ptr(),
            target.as_ptr(),
            c"tracefs".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            std::ptr::null(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Unmounts the mount at `dir`; when it is busy (a file in it still open
/// somewhere), detaches it so that it goes when the last user closes.
pub fn unmount(dir: &Path) -> io::Result<()> {
    let target = cpath(dir)?;
    // SAFETY: a NUL-terminated path that outlives the call.
    if unsafe { libc::umount2(target.as_ptr(), 0) } == 0 {
        return Ok(());
    }
    let err = io::Error::last_os_error();
    if err.raw_os_error() != Some(libc::EBUSY) {
        return Err(err);
    }
    // SAFETY: as above.
    if unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Random hex digits from the kernel, for names no one else picks.
pub fn random_token() -> String {
    let mut b = [0u8; 6];
    if File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .is_err()
    {
        let t = crate::sys::proc::monotonic_ns().to_le_bytes();
        b.copy_from_slice(&t[..6]);
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Reads a tracefs file with reads of 64 KiB: some (`events/header_page`)
/// answer only a read at offset 0, so the small first read of
/// `read_to_string` would cut them short.
pub fn read_whole(path: &Path) -> io::Result<String> {
    let mut f = File::open(path)?;
    let mut out = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    String::from_utf8(out).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// Removes `<root>/instances/<name>` when it exists (it must have no file
/// open); true when it was there. The kernel refuses with EBUSY while a
/// file of the instance is open: retried for a second.
pub fn remove_instance(root: &Path, name: &str) -> Result<bool> {
    let dir = root.join("instances").join(name);
    if !dir.exists() {
        return Ok(false);
    }
    // Stop recording first: nothing more is written while it goes.
    let _ = std::fs::write(dir.join("tracing_on"), "0");
    let until = Instant::now() + Duration::from_secs(1);
    loop {
        match std::fs::remove_dir(&dir) {
            Ok(()) => return Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) && Instant::now() < until => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => {
                return Err(e)
                    .with_context(|| format!("removing tracefs instance {}", dir.display()));
            }
        }
    }
}

/// A tracing instance schedlab made; removed on [`Instance::remove`] or drop.
#[derive(Debug)]
pub struct Instance {
    root: PathBuf,
    name: String,
    dir: PathBuf,
    removed: bool,
}

impl Instance {
    /// Makes `<root>/instances/<name>` (refused when it exists).
    pub fn create(root: &Path, name: &str) -> Result<Instance> {
        let instances = root.join("instances");
        if !instances.is_dir() {
            bail!(
                "{} has no instances/ directory: this kernel cannot give schedlab a tracing \
                 instance of its own, and schedlab does not touch the top-level tracing state",
                root.display()
            );
        }
        let dir = instances.join(name);
        std::fs::create_dir(&dir)
            .with_context(|| format!("creating tracefs instance {}", dir.display()))?;
        Ok(Instance {
            root: root.to_path_buf(),
            name: name.to_string(),
            dir,
            removed: false,
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Writes `value` to the instance's file `rel` (as `echo VALUE > rel`).
    pub fn write(&self, rel: &str, value: &str) -> Result<()> {
        let path = self.dir.join(rel);
        let mut f = OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&path)
            .with_context(|| format!("opening {}", path.display()))?;
        f.write_all(value.as_bytes())
            .with_context(|| format!("writing {value:?} to {}", path.display()))
    }

    /// Reads the instance's file `rel` whole.
    pub fn read(&self, rel: &str) -> Result<String> {
        let path = self.dir.join(rel);
        read_whole(&path).with_context(|| format!("reading {}", path.display()))
    }

    /// CPU `cpu`'s raw buffer, opened for reads that never block.
    pub fn raw_buffer(&self, cpu: u32) -> Result<RawBuffer> {
        let path = self.dir.join(format!("per_cpu/cpu{cpu}/trace_pipe_raw"));
        let file = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&path)
            .with_context(|| format!("opening {}", path.display()))?;
        Ok(RawBuffer { file, cpu })
    }

    /// CPU `cpu`'s counters.
    pub fn stats(&self, cpu: u32) -> Result<CpuStats> {
        Ok(CpuStats::parse(
            &self.read(&format!("per_cpu/cpu{cpu}/stats"))?,
        ))
    }

    /// Stops recording and removes the instance.
    pub fn remove(mut self) -> Result<()> {
        self.removed = true;
        remove_instance(&self.root, &self.name).map(|_| ())
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        if !self.removed {
            self.removed = true;
            if let Err(e) = remove_instance(&self.root, &self.name) {
                let _ = writeln!(io::stderr(), "schedlab: {e:#}");
            }
        }
    }
}

/// One CPU's ring buffer, read page by page.
#[derive(Debug)]
pub struct RawBuffer {
    file: File,
    cpu: u32,
}

impl RawBuffer {
    pub fn cpu(&self) -> u32 {
        self.cpu
    }

    /// Reads the next page (or the part of the page being written that is
    /// committed) into `page`; `Ok(0)` when there is nothing to read now.
    pub fn read_page(&mut self, page: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.file.read(page) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(0),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

/// A CPU buffer's loss counters (`per_cpu/cpuN/stats`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuStats {
    /// Events overwritten before they were read (overwrite mode).
    pub overrun: u64,
    /// Events lost to nested writes filling a page.
    pub commit_overrun: u64,
    /// Events dropped because the buffer was full (no-overwrite mode).
    pub dropped: u64,
    /// Events in the buffer now, not yet read.
    pub entries: u64,
}

impl CpuStats {
    pub fn parse(text: &str) -> CpuStats {
        let get = |key: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0)
        };
        CpuStats {
            overrun: get("overrun:"),
            commit_overrun: get("commit overrun:"),
            dropped: get("dropped events:"),
            entries: get("entries:"),
        }
    }

    pub fn lost(&self) -> u64 {
        self.overrun + self.commit_overrun + self.dropped
    }
}

/// `tracing_cpumask` text for `cpus`: hex, in comma-separated 32-bit
/// groups, most significant first (as the kernel prints it).
pub fn cpumask_hex(cpus: &[u32]) -> String {
    let top = cpus.iter().copied().max().unwrap_or(0) as usize;
    let mut words = vec![0u32; top / 32 + 1];
    for &c in cpus {
        words[c as usize / 32] |= 1 << (c % 32);
    }
    let mut parts: Vec<String> = Vec::new();
    for (i, w) in words.iter().enumerate().rev() {
        if i == words.len() - 1 {
            parts.push(format!("{w:x}"));
        } else {
            parts.push(format!("{w:08x}"));
        }
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_tracefs_points() {
        let text = "22 27 0:21 / /proc rw,relatime - proc proc rw\n\
                    50 23 0:12 / /sys/kernel/tracing rw,relatime - tracefs nodev rw\n\
                    51 27 0:12 / /tmp/my\\040dir rw - tracefs nodev rw\n\
                    52 27 0:13 / /sys/kernel/debug rw - debugfs debugfs rw\n";
        assert_eq!(
            tracefs_mounts_in(text),
            vec![
                PathBuf::from("/sys/kernel/tracing"),
                PathBuf::from("/tmp/my dir")
            ]
        );
        assert!(tracefs_mounts_in("garbage\n").is_empty());
    }

    #[test]
    fn stats_and_masks() {
        let s = CpuStats::parse(
            "entries: 147\noverrun: 9535\ncommit overrun: 2\nbytes: 0\n\
             oldest event ts:     0.000000\nnow ts: 1.0\ndropped events: 3\nread events: 0\n",
        );
        assert_eq!(
            s,
            CpuStats {
                overrun: 9535,
                commit_overrun: 2,
                dropped: 3,
                entries: 147
            }
        );
        assert_eq!(s.lost(), 9540);
        assert_eq!(cpumask_hex(&[0]), "1");
        assert_eq!(cpumask_hex(&[0, 1]), "3");
        assert_eq!(cpumask_hex(&[1, 4]), "12");
        assert_eq!(cpumask_hex(&[0, 33]), "2,00000001");
        assert_eq!(random_token().len(), 12);
    }
}
