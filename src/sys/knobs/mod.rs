//! Real-time bandwidth knobs: reading them, changing them safely, and always
//! putting them back.
//!
//! Two knobs limit how much CPU time real-time (FIFO/RR) tasks may take:
//!
//! * the sysctl `kernel.sched_rt_runtime_us` out of `kernel.sched_rt_period_us`
//!   (`/proc/sys/kernel/…`; -1 disables RT throttling), and
//! * with RT group scheduling (`CONFIG_RT_GROUP_SCHED`, visible as
//!   `cpu.rt_runtime_us` in the root cpu cgroup of a v1 hierarchy), the root
//!   group's own `cpu.rt_runtime_us`, which is what actually throttles RT tasks
//!   of the root group. On cgroup v2, or on kernels without RT group
//!   scheduling, there is no group knob and only the sysctl is changed.
//!
//! The kernel keeps the group at or below the sysctl (EINVAL otherwise), so
//! [`plan_writes`] orders the writes: to lower, the root group first and then
//! the sysctl; to raise, the sysctl first and then the group. Child cgroups
//! that reserve RT time of their own (their sum may not exceed the root
//! group's) and admitted SCHED_DEADLINE bandwidth (including the kernel's
//! fair server, 5% per CPU by default since Linux 6.12) can make lowering
//! fail; those refusals are explained with the numbers.
//!
//! # Never leaving the machine changed
//!
//! [`RtGuard::acquire`] writes a journal of the original values (to a
//! temporary file, fsync'ed, renamed into place without replacing anything,
//! directory fsync'ed) *before* any knob is touched, and holds an exclusive
//! `flock` on `<journal>.lock` for as long as the guard lives; the kernel
//! drops that lock when the process dies, however it dies. The guard puts the
//! originals back in [`RtGuard::restore`] or, failing that, in `Drop` (error
//! returns, panics that unwind). What neither can cover (SIGKILL, a crash, an
//! abort) is covered by [`recover_leftover`], which every start of schedlab
//! must call: a journal whose holder is gone is restored and removed.
//!
//! # Signals: the caller's duty
//!
//! This module installs no signal handlers. SIGINT, SIGTERM and SIGHUP must be
//! **blocked** (and taken synchronously with `sigtimedwait`, as
//! [`crate::sys::proc`] does for the launcher) in every thread of the process
//! for as long as an [`RtGuard`] lives; otherwise a Ctrl-C kills schedlab with
//! the settings changed, and they are only put back at the next start.
//! [`ensure_signals_blocked`] checks the calling thread's mask. With the
//! signals blocked, a Ctrl-C makes the campaign loop return normally and the
//! guard's `restore`/`Drop` runs.
//!
//! # Where the journal lives
//!
//! [`journal_path`]: `$SCHEDLAB_JOURNAL` when set (tests), else
//! `/var/lib/schedlab/rt-journal.json`, falling back to
//! `/run/schedlab/rt-journal.json` when `/var/lib` is not writable (read-only
//! root filesystem). `/var/lib` survives a reboot, so a journal left by a
//! power loss is still found; the kernel's settings do *not* survive a reboot,
//! so such a journal (recognised by its boot id) is removed without writing
//! anything: the boot configuration is what the machine should have.

//!
//! # Files
//!
//! One job each:
//!
//! * `plan.rs`: the pure arithmetic: [`RtBandwidth`], [`validate_runtime`],
//!   the kernel's bandwidth ratios, and [`plan_writes`], the order in which
//!   the root group's `cpu.rt_runtime_us` and the sysctl are written.
//! * `access.rs`: where the knobs are (`Knobs`: the real files, or plain
//!   files in tests), reading and writing them, the child cgroups that
//!   reserve RT time, and applying a plan with read-back and rollback.
//! * `explain.rs`: why the kernel refused a write, with the numbers and what
//!   to do about it.
//! * `procs.rs`: what `/proc` says about processes: a `/proc/PID/stat`
//!   parser, process start times and liveness, the SCHED_DEADLINE threads.
//! * `journal.rs`: the crash-safe journal of settings changed by schedlab,
//!   whatever they are: where it lives, its on-disk format (today's and the
//!   older ones it still reads), writing it (fsync, rename without
//!   replacing, directory fsync), the `flock` that tells a live holder from
//!   a dead one, and removing it.
//! * `setting.rs`: the kinds of setting the journal records ([`Setting`];
//!   the RT bandwidth pair is the first) and how each is put back.
//! * `recover.rs`: restoring journals left by a schedlab that died
//!   ([`recover_leftover`]).
//! * `capability.rs`: what this machine allows ([`KnobCapability`]).
//! * `guard.rs`: [`RtGuard`], a change of RT bandwidth in force, and
//!   [`ensure_signals_blocked`].
//! * `trace.rs`: [`TraceGuard`], a tracing session in force (schedlab's
//!   tracefs instance and, when it made one, its tracefs mount), journaled
//!   in `trace-journal.json` beside the RT journal.

mod access;
mod capability;
mod explain;
#[cfg(test)]
mod fake;
mod guard;
mod journal;
mod plan;
mod procs;
mod recover;
mod setting;
mod trace;

pub use access::{ChildGroup, read_rt_bandwidth};
pub use capability::{KnobCapability, capability, capability_from};
pub use guard::{RtGuard, ensure_signals_blocked};
pub use journal::{
    HeldByAnother, JOURNAL_FORMAT, Journal, journal_path, read_journal, trace_journal_path,
};
pub use plan::{Knob, RtBandwidth, plan_writes, validate_runtime};
pub use recover::recover_leftover;
pub use setting::{RtOriginals, Setting};
pub use trace::TraceGuard;

/// The journal's mechanism, for the other guards of `sys` (the workers'
/// cgroups, `sys::cgroup`): writing, locking, holders, removal.
pub(crate) use journal::{
    Holder, holder_state, journal_candidates, journal_location, lock_path, remove_journal,
    restore_in_drop, try_lock, write_journal_exclusive,
};
pub(crate) use procs::{boot_id, process_start_ticks, self_pid};

/// Puts back every setting of `j` (the last journaled first) on this
/// machine; returns what changed.
pub(crate) fn restore_journal(j: &Journal) -> anyhow::Result<Vec<String>> {
    j.restore(&access::Knobs::system())
}

/// The RT runtime sysctl.
pub const SYSCTL_RUNTIME: &str = "/proc/sys/kernel/sched_rt_runtime_us";
/// The RT period sysctl (never changed by this module).
pub const SYSCTL_PERIOD: &str = "/proc/sys/kernel/sched_rt_period_us";
/// Environment variable overriding [`journal_path`].
pub const JOURNAL_ENV: &str = "SCHEDLAB_JOURNAL";
