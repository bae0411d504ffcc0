//! [`RtGuard`]: a change of RT bandwidth in force, journaled before the
//! first write and put back on [`RtGuard::restore`] or drop; and
//! [`ensure_signals_blocked`], the caller's duty while a guard lives.

use std::fs::File;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow, bail};

use super::access::{Knobs, apply, children_ratio, rt_children};
use super::capability::capability_from;
use super::explain::describe_children;
use super::journal::{
    self, Holder, Journal, holder_state, journal_candidates, journal_path, parent_dir,
    read_journal, remove_journal, restore_in_drop, try_lock, write_journal_exclusive,
};
use super::plan::{RtBandwidth, percent, plan_writes, rank, to_ratio, validate_runtime};
use super::procs::{boot_id, self_pid};
use super::recover::{recover_locked, recover_one};
use super::setting::{RtOriginals, Setting};
use crate::sys::envinfo;

/// Checks that SIGINT, SIGTERM and SIGHUP are blocked in the calling thread,
/// as they must be while an [`RtGuard`] lives (see the module docs).
pub fn ensure_signals_blocked() -> Result<()> {
    // SAFETY: an all-zero sigset_t is valid storage; pthread_sigmask with a
    // null new set only reports the current mask into it.
    let mut mask: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above: `mask` is valid, writable storage.
    let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut mask) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc)).context("reading the signal mask");
    }
    let missing: Vec<&str> = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP]
        .into_iter()
        // SAFETY: `mask` was filled in by pthread_sigmask.
        .filter(|&s| unsafe { libc::sigismember(&mask, s) } != 1)
        .map(crate::sys::proc::signal_name)
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        bail!(
            "{} not blocked in this thread: a Ctrl-C or kill would end schedlab without \
             putting the RT bandwidth settings back; block them (sys::proc::block) and take \
             them with sigtimedwait while an RtGuard lives",
            missing.join(", ")
        )
    }
}

/// A change of RT bandwidth in force; the originals come back on
/// [`restore`](RtGuard::restore) or drop.
#[derive(Debug)]
pub struct RtGuard {
    knobs: Knobs,
    journal_path: PathBuf,
    /// What is journaled: the RT originals below, as one setting.
    journal: Journal,
    original: RtOriginals,
    /// The exclusive lock on `<journal>.lock`, held while the guard lives.
    _lock: File,
    done: bool,
    recovered: Option<String>,
}

impl RtGuard {
    /// Journals the originals (sysctl runtime and period, the root group's
    /// `cpu.rt_runtime_us` when present) and takes the journal's lock; no
    /// knob is touched yet. Refuses when another live schedlab holds the
    /// journal, or when the knobs cannot be written here. A journal left by
    /// a dead schedlab is restored first (see [`RtGuard::recovered`]).
    pub fn acquire() -> Result<RtGuard> {
        let env = envinfo::capture();
        let knobs = Knobs::from_env(&env);
        let cap = capability_from(&env);
        if !cap.can_change() {
            bail!(
                "cannot change RT bandwidth on this machine:\n{}",
                cap.explain()
            );
        }
        let path = journal_path();
        let mut notes = Vec::new();
        for other in journal_candidates().into_iter().filter(|p| *p != path) {
            if other.exists()
                && let Some(note) = recover_one(&knobs, &other)?
            {
                notes.push(note);
            }
        }
        let mut guard = Self::acquire_at(knobs, path)?;
        notes.extend(guard.recovered.take());
        guard.recovered = (!notes.is_empty()).then(|| notes.join("\n"));
        Ok(guard)
    }

    pub(super) fn acquire_at(knobs: Knobs, path: PathBuf) -> Result<RtGuard> {
        let dir = parent_dir(&path);
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let lock = try_lock(&path)?.ok_or_else(|| refusal_held(&path))?;
        let mut recovered = None;
        if let Some(j) = read_journal(&path)? {
            if holder_state(&j, boot_id().as_deref(), self_pid()) == Holder::Alive {
                return Err(refusal_held(&path));
            }
            recovered = Some(recover_locked(&knobs, &path, &j).context(
                "refusing to change RT bandwidth before the leftover journal is restored",
            )?);
        }
        let original = RtOriginals::read(&knobs)?;
        let journal = Journal::of_this_process(vec![Setting::RtBandwidth(original)]);
        write_journal_exclusive(&path, &journal)?;
        Ok(RtGuard {
            knobs,
            journal_path: path,
            journal,
            original,
            _lock: lock,
            done: false,
            recovered,
        })
    }

    /// The original sysctl values.
    pub fn original(&self) -> RtBandwidth {
        RtBandwidth {
            runtime_us: self.original.sched_rt_runtime_us,
            period_us: self.original.sched_rt_period_us,
        }
    }

    /// The original root group `cpu.rt_runtime_us`, when there is that knob.
    pub fn original_group_runtime_us(&self) -> Option<i64> {
        self.original.root_group_rt_runtime_us
    }

    pub fn journal_path(&self) -> &Path {
        &self.journal_path
    }

    /// The warning text when `acquire` restored a journal left by a
    /// schedlab that died (normally [`recover_leftover`](super::recover_leftover) has done it first).
    pub fn recovered(&self) -> Option<&str> {
        self.recovered.as_deref()
    }

    /// Sets `sched_rt_runtime_us` (and the root group's
    /// `cpu.rt_runtime_us`, when present) to `runtime_us`, in the order the
    /// kernel accepts. Validated first; refusals are explained. When the
    /// second of two writes is refused, the first is undone, so the knobs
    /// are as before the call.
    pub fn set_runtime(&mut self, runtime_us: i64) -> Result<()> {
        let sysctl = self.knobs.read_sysctl()?;
        if sysctl.period_us != self.original.sched_rt_period_us {
            bail!(
                "sched_rt_period_us changed from {} to {} since schedlab journaled it: \
                 something else is changing RT settings",
                self.original.sched_rt_period_us,
                sysctl.period_us
            );
        }
        validate_runtime(runtime_us, sysctl.period_us)
            .map_err(|m| anyhow!("refusing to set RT runtime: {m}"))?;
        let group = self.knobs.read_group()?;
        if group.is_some() != self.original.root_group_rt_runtime_us.is_some() {
            bail!("the root cpu cgroup RT knob appeared or vanished since schedlab journaled it");
        }
        if let (Some(g), Some(dir)) = (group, self.knobs.group_dir.as_deref()) {
            if g.period_us != sysctl.period_us {
                bail!(
                    "refusing to set RT runtime: the root cpu cgroup's cpu.rt_period_us ({}) \
                     differs from sched_rt_period_us ({}); schedlab changes runtimes only when \
                     both periods are equal",
                    g.period_us,
                    sysctl.period_us
                );
            }
            if runtime_us == 0 {
                bail!(
                    "refusing to set RT runtime 0: with RT group scheduling the root cpu \
                     cgroup ({}) may not have an RT runtime of 0 (the kernel refuses with \
                     EINVAL); the smallest is 1",
                    dir.display()
                );
            }
            if rank(runtime_us) < rank(g.runtime_us) {
                let children = rt_children(dir);
                if children_ratio(&children) > to_ratio(g.period_us, runtime_us) {
                    bail!(
                        "refusing to lower the root cpu cgroup's cpu.rt_runtime_us to \
                         {runtime_us} / {} µs ({}): {} (the kernel would refuse with EINVAL)",
                        g.period_us,
                        percent(runtime_us, g.period_us),
                        describe_children(&children)
                    );
                }
            }
        }
        let plan = plan_writes(group.map(|g| g.runtime_us), sysctl.runtime_us, runtime_us);
        apply(&self.knobs, &plan, true)
            .with_context(|| format!("setting RT runtime to {runtime_us} µs"))
    }

    /// Puts the originals back (in the right order), checks them by reading
    /// back, and removes the journal. On failure the journal is kept so
    /// that the next start of schedlab ([`recover_leftover`](super::recover_leftover)) tries again.
    pub fn restore(mut self) -> Result<()> {
        self.done = true;
        self.restore_inner()
    }

    fn restore_inner(&mut self) -> Result<()> {
        self.journal.restore(&self.knobs).with_context(|| {
            format!(
                "the journal {} is kept; the next start of schedlab tries again",
                self.journal_path.display()
            )
        })?;
        remove_journal(&self.journal_path)
    }
}

impl Drop for RtGuard {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        self.done = true;
        let Some(problem) = restore_in_drop(|| self.restore_inner()) else {
            return;
        };
        let _ = writeln!(
            io::stderr(),
            "schedlab: could not put RT bandwidth back ({}): {problem}",
            self.journal.originals()
        );
    }
}

fn refusal_held(path: &Path) -> anyhow::Error {
    journal::refusal_held(
        path,
        "is changing RT bandwidth right now",
        "only one schedlab may change sched_rt_runtime_us at a time: wait for it to finish",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::knobs::access::{GROUP_PERIOD, GROUP_RUNTIME};
    use crate::sys::knobs::fake::fake;
    use crate::sys::knobs::recover::recover_one;

    #[test]
    fn signal_mask_check() {
        std::thread::spawn(|| {
            assert!(ensure_signals_blocked().is_err());
            crate::sys::proc::block(&crate::sys::proc::control_signals()).unwrap();
            ensure_signals_blocked().unwrap();
        })
        .join()
        .unwrap();
    }

    #[test]
    fn fake_guard_journals_sets_and_restores() {
        let f = fake(Some(950_000));
        let mut g = RtGuard::acquire_at(f.knobs.clone(), f.journal()).unwrap();
        let j = read_journal(&f.journal()).unwrap().unwrap();
        assert_eq!(j.rt_bandwidth().unwrap().sched_rt_runtime_us, 950_000);
        assert_eq!(
            j.rt_bandwidth().unwrap().root_group_rt_runtime_us,
            Some(950_000)
        );
        assert_eq!(j.pid, self_pid());
        g.set_runtime(500_000).unwrap();
        assert_eq!(f.values(), (500_000, Some(500_000)));
        g.set_runtime(100_000).unwrap();
        assert!(g.set_runtime(1_000_001).is_err());
        assert!(g.set_runtime(-2).is_err());
        assert!(
            format!("{:#}", g.set_runtime(0).unwrap_err())
                .contains("may not have an RT runtime of 0")
        );
        assert_eq!(f.values(), (100_000, Some(100_000)));
        g.restore().unwrap();
        assert_eq!(f.values(), (950_000, Some(950_000)));
        assert!(!f.journal().exists());
    }

    #[test]
    fn fake_guard_restores_on_drop_and_on_panic() {
        let f = fake(None);
        {
            let mut g = RtGuard::acquire_at(f.knobs.clone(), f.journal()).unwrap();
            g.set_runtime(300_000).unwrap();
            assert_eq!(f.values(), (300_000, None));
        }
        assert_eq!(f.values(), (950_000, None));
        assert!(!f.journal().exists());
        let knobs = f.knobs.clone();
        let journal = f.journal();
        let r = std::panic::catch_unwind(move || {
            let mut g = RtGuard::acquire_at(knobs, journal).unwrap();
            g.set_runtime(200_000).unwrap();
            panic!("campaign failed");
        });
        assert!(r.is_err());
        assert_eq!(f.values(), (950_000, None));
        assert!(!f.journal().exists());
    }

    #[test]
    fn fake_second_guard_is_refused_while_the_first_lives() {
        let f = fake(Some(950_000));
        let g = RtGuard::acquire_at(f.knobs.clone(), f.journal()).unwrap();
        let e = RtGuard::acquire_at(f.knobs.clone(), f.journal()).unwrap_err();
        let m = format!("{e:#}");
        assert!(m.contains(&format!("schedlab pid {}", self_pid())), "{m}");
        assert!(m.contains("wait for it to finish"), "{m}");
        // The holder is alive: nothing to recover.
        assert_eq!(recover_one(&f.knobs, &f.journal()).unwrap(), None);
        g.restore().unwrap();
        RtGuard::acquire_at(f.knobs.clone(), f.journal())
            .unwrap()
            .restore()
            .unwrap();
    }

    #[test]
    fn fake_corrupt_journal_is_not_overwritten() {
        let f = fake(None);
        std::fs::create_dir_all(f.journal().parent().unwrap()).unwrap();
        std::fs::write(f.journal(), "{ truncated").unwrap();
        let e = format!(
            "{:#}",
            RtGuard::acquire_at(f.knobs.clone(), f.journal()).unwrap_err()
        );
        assert!(e.contains("unreadable"), "{e}");
        assert_eq!(std::fs::read_to_string(f.journal()).unwrap(), "{ truncated");
    }

    #[test]
    fn fake_children_block_lowering_before_any_write() {
        let f = fake(Some(950_000));
        let child = f.knobs.group_dir.as_ref().unwrap().join("rtapp");
        std::fs::create_dir(&child).unwrap();
        std::fs::write(child.join(GROUP_RUNTIME), "600000\n").unwrap();
        std::fs::write(child.join(GROUP_PERIOD), "1000000\n").unwrap();
        let mut g = RtGuard::acquire_at(f.knobs.clone(), f.journal()).unwrap();
        let m = format!("{:#}", g.set_runtime(500_000).unwrap_err());
        assert!(m.contains("rtapp 600000/1000000 µs (60.0%)"), "{m}");
        assert_eq!(f.values(), (950_000, Some(950_000)));
        g.set_runtime(700_000).unwrap();
        g.restore().unwrap();
    }
}
