//! Signalling and emptying groups: freezing (through [`Freezer`]: v2
//! `cgroup.freeze`, v1 `freezer.state`) so that a forking program cannot
//! escape between reading the list of members and signalling them, v2 `cgroup.kill`,
//! waiting for a group to empty (v2 `cgroup.events` watched with
//! inotify; v1 by reading `cgroup.procs`), and removing groups.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::files::{self, parse_events, procs};
use super::freezer::Freezer;

/// How long a freeze may take before signalling goes on without it (a
/// task in uninterruptible sleep can hold it up).
const FREEZE_WAIT: Duration = Duration::from_millis(500);

/// One worker's groups, by role.
#[derive(Debug, Clone, Default)]
pub struct GroupDirs {
    /// The v2 group, when there is a cgroup2 hierarchy.
    pub v2: Option<PathBuf>,
    /// The v1 freezer group.
    pub freezer: Option<PathBuf>,
    /// Every group of the worker (v2 first), each in its own hierarchy.
    pub all: Vec<PathBuf>,
}

impl GroupDirs {
    /// The group whose member list is read: v2's, else the first v1 one.
    fn members_dir(&self) -> Option<&Path> {
        self.v2
            .as_deref()
            .or(self.all.first().map(PathBuf::as_path))
    }

    /// The processes of the tree now.
    pub fn procs(&self) -> Vec<i32> {
        self.members_dir().map(procs).unwrap_or_default()
    }

    /// Every thread of the tree now (v2 `cgroup.threads`, v1 `tasks`).
    pub fn threads(&self) -> Vec<i32> {
        let Some(dir) = self.members_dir() else {
            return Vec::new();
        };
        let name = if self.v2.is_some() {
            "cgroup.threads"
        } else {
            "tasks"
        };
        std::fs::read_to_string(dir.join(name))
            .map(|t| files::parse_pids(&t))
            .unwrap_or_default()
    }

    /// Whether any process of the tree is left.
    pub fn populated(&self) -> bool {
        if let Some(v2) = &self.v2
            && let Some(e) = std::fs::read_to_string(v2.join("cgroup.events"))
                .ok()
                .and_then(|t| parse_events(&t))
        {
            return e.populated;
        }
        !self.procs().is_empty()
    }

    /// The tree's freezer (see [`Freezer::of`]).
    fn freezer(&self) -> Option<Freezer> {
        Freezer::of(self.v2.as_deref(), self.freezer.as_deref())
    }

    /// Sends `sig` to every process of the tree, frozen while its members
    /// are read and signalled, so none forks a child that is missed; a tree
    /// that was already frozen (stopped between its WRR turns) stays frozen
    /// and handles the signal at its next turn, so the signal never gives it
    /// CPU out of turn (the dispatcher thaws every tree when it stops).
    /// SIGKILL always thaws: a task frozen by the v1 freezer cannot die
    /// until thawed. Returns the threads seen while frozen (for attributing
    /// exits).
    pub fn signal_all(&self, sig: i32) -> Vec<i32> {
        let freezer = self.freezer();
        // Asked by the WRR dispatcher, whose turns stop a command's tree so.
        let was_frozen = sig != libc::SIGKILL && freezer.as_ref().is_some_and(Freezer::asked);
        if let Some(f) = &freezer {
            f.set_and_wait(true, FREEZE_WAIT);
        }
        let seen = self.threads();
        for pid in self.procs() {
            crate::sys::proc::kill(pid, sig);
        }
        if let Some(f) = freezer.filter(|_| !was_frozen) {
            f.set_and_wait(false, FREEZE_WAIT);
        }
        seen
    }

    /// SIGKILL to the whole tree: v2 `cgroup.kill` (atomic in the kernel)
    /// where there is one, else [`signal_all`](Self::signal_all).
    pub fn kill_all(&self) -> Vec<i32> {
        let seen = self.threads();
        if let Some(v2) = &self.v2
            && v2.join("cgroup.kill").exists()
            && files::write(v2, "cgroup.kill", "1").is_ok()
        {
            return seen;
        }
        let mut more = self.signal_all(libc::SIGKILL);
        more.extend(seen);
        more
    }

    /// Waits until the tree is empty or `timeout` passes, calling `tick`
    /// (to note its members) at least every 20 ms. Returns the monotonic
    /// time (ns) at which it was seen empty, or None on timeout.
    pub fn wait_empty(&self, timeout: Duration, mut tick: impl FnMut()) -> Option<u64> {
        let deadline = Instant::now() + timeout;
        let watch = self
            .v2
            .as_deref()
            .and_then(|d| Inotify::watch(&d.join("cgroup.events")).ok());
        loop {
            if !self.populated() {
                return Some(crate::sys::proc::monotonic_ns());
            }
            tick();
            let now = Instant::now();
            if now >= deadline {
                return None;
            }
            let step = (deadline - now).min(Duration::from_millis(20));
            match &watch {
                Some(w) => w.wait(step),
                None => std::thread::sleep(step.min(Duration::from_millis(5))),
            }
        }
    }
}

/// An inotify watch on one file, for waking when the kernel changes it
/// (`cgroup.events` is modified when the group empties).
struct Inotify {
    fd: OwnedFd,
}

impl Inotify {
    fn watch(path: &Path) -> std::io::Result<Inotify> {
        // SAFETY: inotify_init1 takes flags only; the descriptor is owned below.
        let raw = unsafe { libc::inotify_init1(libc::IN_CLOEXEC | libc::IN_NONBLOCK) };
        if raw < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: raw is a new descriptor no one else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let c = std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(path.as_os_str()))
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        // SAFETY: a NUL-terminated path and our inotify descriptor.
        if unsafe { libc::inotify_add_watch(fd.as_raw_fd(), c.as_ptr(), libc::IN_MODIFY) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Inotify { fd })
    }

    /// Waits up to `d` for a change, then empties the event queue.
    fn wait(&self, d: Duration) {
        let mut pfd = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = i32::try_from(d.as_millis()).unwrap_or(i32::MAX).max(1);
        // SAFETY: one pollfd we own.
        unsafe { libc::poll(&mut pfd, 1, ms) };
        let mut buf = [0u8; 1024];
        // SAFETY: reading into a buffer we own, of its length; non-blocking.
        while unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) } > 0 {}
    }
}

/// Kills whatever is in the group at `dir` (of any hierarchy), waits for
/// it to empty, and removes it.
pub fn empty_and_remove(dir: &Path) -> Result<()> {
    if !dir.exists() {
        return Ok(());
    }
    let is_v2 = dir.join("cgroup.events").exists();
    let dirs = GroupDirs {
        v2: is_v2.then(|| dir.to_path_buf()),
        freezer: dir
            .join("freezer.state")
            .exists()
            .then(|| dir.to_path_buf()),
        all: vec![dir.to_path_buf()],
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while dirs.populated() {
        dirs.kill_all();
        if dirs.wait_empty(Duration::from_millis(200), || {}).is_some() {
            break;
        }
        if Instant::now() >= deadline {
            bail!(
                "{} still holds processes {:?} after SIGKILL",
                dir.display(),
                dirs.procs()
            );
        }
    }
    remove_dir_retrying(dir)
}

/// rmdir, retried briefly: a group whose last task has just exited can
/// answer EBUSY for a moment.
pub fn remove_dir_retrying(dir: &Path) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        match std::fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) if Instant::now() < deadline && e.raw_os_error() == Some(libc::EBUSY) => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => return Err(e).with_context(|| format!("removing {}", dir.display())),
        }
    }
}

/// Empties and removes every group under `parent`, then `parent` itself.
pub fn clear_parent(parent: &Path) -> Result<()> {
    if !parent.exists() {
        return Ok(());
    }
    let entries =
        std::fs::read_dir(parent).with_context(|| format!("listing {}", parent.display()))?;
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            clear_parent(&entry.path())?;
        }
    }
    empty_and_remove(parent)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A v2 group of plain files, empty of processes, whose `cgroup.freeze`
    /// says `freeze`: what `signal_all` leaves it at.
    fn freeze_after(freeze: &str, sig: i32) -> String {
        let dir = tempfile::tempdir().unwrap();
        let v2 = dir.path().to_path_buf();
        std::fs::write(v2.join("cgroup.freeze"), freeze).unwrap();
        std::fs::write(v2.join("cgroup.procs"), "").unwrap();
        std::fs::write(v2.join("cgroup.threads"), "").unwrap();
        let dirs = GroupDirs {
            v2: Some(v2.clone()),
            freezer: None,
            all: vec![v2.clone()],
        };
        dirs.signal_all(sig);
        std::fs::read_to_string(v2.join("cgroup.freeze"))
            .unwrap()
            .trim()
            .to_string()
    }

    #[test]
    fn a_tree_stopped_between_turns_stays_frozen_unless_killed() {
        // Frozen by the WRR dispatcher: SIGTERM leaves it for its turn.
        assert_eq!(freeze_after("1", libc::SIGTERM), "1");
        // SIGKILL thaws (a v1-frozen task cannot die frozen).
        assert_eq!(freeze_after("1", libc::SIGKILL), "0");
        // A running tree is frozen only while signalled.
        assert_eq!(freeze_after("0", libc::SIGTERM), "0");
    }
}
