//! [`Freezer`]: the kernel's freezer of one worker's groups, the one place
//! that knows its files. cgroup2's `cgroup.freeze` (asked: `0`/`1`) with
//! the actual state in `cgroup.events` (`frozen 0|1`), present in every
//! non-root cgroup2 group since Linux 5.2 with no controller enabled, so
//! in the unified hierarchy of a hybrid machine too; else the v1 freezer's
//! `freezer.state` (`THAWED`, `FREEZING`, `FROZEN`: one file for both the
//! asked and the actual state).
//!
//! Two callers with different needs: `kill.rs` freezes and waits (a tree
//! frozen while its members are read and signalled cannot fork a child
//! that is missed), the WRR dispatcher (`control.rs`) asks and later reads
//! whether the tree has stopped, turn after turn, without waiting.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Result;

use super::files::{self, parse_events};

/// Which freezer a group has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FreezerKind {
    /// cgroup2 `cgroup.freeze` and `cgroup.events`.
    V2,
    /// v1 `freezer.state`.
    V1,
}

/// A v1 `freezer.state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum V1State {
    Thawed,
    /// Asked to freeze, some task not yet frozen.
    Freezing,
    Frozen,
}

/// Parses a v1 `freezer.state`; None for anything else.
pub fn parse_v1_state(text: &str) -> Option<V1State> {
    match text.trim() {
        "THAWED" => Some(V1State::Thawed),
        "FREEZING" => Some(V1State::Freezing),
        "FROZEN" => Some(V1State::Frozen),
        _ => None,
    }
}

/// Whether a cgroup2 `cgroup.freeze` asks the group frozen; None for
/// anything but `0` or `1`.
pub fn parse_v2_asked(text: &str) -> Option<bool> {
    match text.trim() {
        "1" => Some(true),
        "0" => Some(false),
        _ => None,
    }
}

/// Whether a cgroup2 `cgroup.events` says the group is frozen (None: no
/// `frozen` key, as before Linux 5.2, or not an events file).
pub fn parse_v2_frozen(events: &str) -> Option<bool> {
    parse_events(events).and_then(|e| e.frozen)
}

/// Which freezer a worker's groups use: cgroup2's when its group has the
/// freeze file, else the v1 freezer group when there is one.
pub fn choose(v2_freeze_file: bool, v1_group: bool) -> Option<FreezerKind> {
    match (v2_freeze_file, v1_group) {
        (true, _) => Some(FreezerKind::V2),
        (false, true) => Some(FreezerKind::V1),
        (false, false) => None,
    }
}

/// The freezer of one group (paths only; whoever made the group owns it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Freezer {
    kind: FreezerKind,
    dir: PathBuf,
}

impl Freezer {
    /// The freezer of a worker's groups (see [`choose`]); None when it has
    /// neither.
    pub fn of(v2: Option<&Path>, v1: Option<&Path>) -> Option<Freezer> {
        let v2_file = v2.is_some_and(|d| d.join("cgroup.freeze").exists());
        let (kind, dir) = match choose(v2_file, v1.is_some())? {
            FreezerKind::V2 => (FreezerKind::V2, v2?),
            FreezerKind::V1 => (FreezerKind::V1, v1?),
        };
        Some(Freezer {
            kind,
            dir: dir.to_path_buf(),
        })
    }

    pub fn kind(&self) -> FreezerKind {
        self.kind
    }

    /// Asks the group frozen (`on`) or thawed, and returns at once: the
    /// tasks stop as they next leave the kernel (a child forked meanwhile is
    /// born frozen); [`frozen`](Self::frozen) says when all have.
    pub fn set(&self, on: bool) -> Result<()> {
        match self.kind {
            FreezerKind::V2 => files::write(&self.dir, "cgroup.freeze", if on { "1" } else { "0" }),
            FreezerKind::V1 => files::write(
                &self.dir,
                "freezer.state",
                if on { "FROZEN" } else { "THAWED" },
            ),
        }
    }

    /// Whether the group was asked frozen (v2 `cgroup.freeze` is 1, v1
    /// `freezer.state` FREEZING or FROZEN); false when it cannot be read.
    pub fn asked(&self) -> bool {
        match self.kind {
            FreezerKind::V2 => files::read(&self.dir, "cgroup.freeze")
                .is_ok_and(|t| parse_v2_asked(&t) == Some(true)),
            FreezerKind::V1 => files::read(&self.dir, "freezer.state").is_ok_and(|t| {
                matches!(
                    parse_v1_state(&t),
                    Some(V1State::Freezing | V1State::Frozen)
                )
            }),
        }
    }

    /// Whether every task of the group is frozen (Some(true)) or the group
    /// is thawed (Some(false)); None while v1 is FREEZING or when it cannot
    /// be told.
    pub fn frozen(&self) -> Option<bool> {
        match self.kind {
            FreezerKind::V2 => files::read(&self.dir, "cgroup.events")
                .ok()
                .and_then(|t| parse_v2_frozen(&t)),
            FreezerKind::V1 => {
                match parse_v1_state(&files::read(&self.dir, "freezer.state").ok()?)? {
                    V1State::Frozen => Some(true),
                    V1State::Thawed => Some(false),
                    V1State::Freezing => None,
                }
            }
        }
    }

    /// Waits until the group's actual state is `on` or `deadline` passes;
    /// whether it got there.
    pub fn wait(&self, on: bool, deadline: Instant) -> bool {
        loop {
            if self.frozen() == Some(on) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// [`set`](Self::set) then [`wait`](Self::wait) up to `timeout`:
    /// whether the group is known to be in the state asked.
    pub fn set_and_wait(&self, on: bool, timeout: Duration) -> bool {
        self.set(on).is_ok() && self.wait(on, Instant::now() + timeout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cgroup2_preferred_to_the_v1_freezer() {
        assert_eq!(choose(true, true), Some(FreezerKind::V2));
        assert_eq!(choose(true, false), Some(FreezerKind::V2));
        assert_eq!(choose(false, true), Some(FreezerKind::V1));
        assert_eq!(choose(false, false), None);
    }

    #[test]
    fn file_texts() {
        assert_eq!(parse_v2_frozen("populated 1\nfrozen 1\n"), Some(true));
        assert_eq!(parse_v2_frozen("populated 1\nfrozen 0\n"), Some(false));
        // Before Linux 5.2 there is no frozen key.
        assert_eq!(parse_v2_frozen("populated 1\n"), None);
        assert_eq!(parse_v2_frozen("FROZEN\n"), None);
        assert_eq!(parse_v2_asked("1\n"), Some(true));
        assert_eq!(parse_v2_asked("0"), Some(false));
        assert_eq!(parse_v2_asked("frozen 1"), None);
        assert_eq!(parse_v1_state("FROZEN\n"), Some(V1State::Frozen));
        assert_eq!(parse_v1_state("THAWED\n"), Some(V1State::Thawed));
        assert_eq!(parse_v1_state("FREEZING\n"), Some(V1State::Freezing));
        assert_eq!(parse_v1_state("frozen"), None);
    }

    /// Plain directories stand for the groups: the files are what the
    /// kernel would show, so asked and actual states are read without
    /// cgroupfs (which would also change them by itself).
    #[test]
    fn asked_and_actual_states_over_group_files() {
        let tmp = tempfile::tempdir().unwrap();
        let (v2, v1) = (tmp.path().join("v2"), tmp.path().join("v1"));
        std::fs::create_dir(&v2).unwrap();
        std::fs::create_dir(&v1).unwrap();
        // No freeze file in the v2 group (before 5.2): the v1 freezer.
        let f = Freezer::of(Some(&v2), Some(&v1)).unwrap();
        assert_eq!(f.kind(), FreezerKind::V1);
        assert!(Freezer::of(Some(&v2), None).is_none());
        std::fs::write(v1.join("freezer.state"), "FREEZING\n").unwrap();
        assert!(f.asked());
        assert_eq!(f.frozen(), None);
        std::fs::write(v1.join("freezer.state"), "FROZEN\n").unwrap();
        assert_eq!(f.frozen(), Some(true));
        f.set(false).unwrap();
        assert!(!f.asked());
        assert_eq!(f.frozen(), Some(false));
        assert!(f.wait(false, Instant::now()));

        std::fs::write(v2.join("cgroup.freeze"), "0").unwrap();
        std::fs::write(v2.join("cgroup.events"), "populated 1\nfrozen 0\n").unwrap();
        let f = Freezer::of(Some(&v2), Some(&v1)).unwrap();
        assert_eq!(f.kind(), FreezerKind::V2);
        assert!(!f.asked());
        f.set(true).unwrap();
        assert!(f.asked());
        // Asked, not yet frozen: the wait gives up at its deadline.
        let start = Instant::now();
        assert!(!f.wait(true, start + Duration::from_millis(20)));
        assert!(start.elapsed() >= Duration::from_millis(20));
        assert!(!f.set_and_wait(true, Duration::from_millis(5)));
        std::fs::write(v2.join("cgroup.events"), "populated 1\nfrozen 1\n").unwrap();
        assert_eq!(f.frozen(), Some(true));
        assert!(f.set_and_wait(true, Duration::from_millis(5)));
        // A group that is gone: nothing asked, nothing known.
        let gone = Freezer::of(Some(&v2), None).unwrap();
        std::fs::remove_dir_all(&v2).unwrap();
        assert!(!gone.asked());
        assert_eq!(gone.frozen(), None);
        assert!(gone.set(true).is_err());
    }
}
