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

use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io::{self, Write as _};
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow, bail};
use serde::{Deserialize, Serialize};

use crate::sys::envinfo::{self, EnvSnapshot};
use crate::sys::fsinfo::writable;
use crate::sys::procfs::read_i64_file;

/// The RT runtime sysctl.
pub const SYSCTL_RUNTIME: &str = "/proc/sys/kernel/sched_rt_runtime_us";
/// The RT period sysctl (never changed by this module).
pub const SYSCTL_PERIOD: &str = "/proc/sys/kernel/sched_rt_period_us";
/// Environment variable overriding [`journal_path`].
pub const JOURNAL_ENV: &str = "SCHEDLAB_JOURNAL";

const CGROUP_ROOT: &str = "/sys/fs/cgroup";
const JOURNAL_DIR: &str = "/var/lib/schedlab";
const JOURNAL_DIR_FALLBACK: &str = "/run/schedlab";
const JOURNAL_NAME: &str = "rt-journal.json";
const JOURNAL_FORMAT: u32 = 1;
const GROUP_RUNTIME: &str = "cpu.rt_runtime_us";
const GROUP_PERIOD: &str = "cpu.rt_period_us";

/// The kernel's fixed-point bandwidth unit (`BW_SHIFT` = 20).
const BW_SHIFT: u32 = 20;
const BW_UNIT: u64 = 1 << BW_SHIFT;

/// A runtime out of a period, in microseconds; runtime -1 is unlimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RtBandwidth {
    pub runtime_us: i64,
    pub period_us: i64,
}

impl std::fmt::Display for RtBandwidth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} / {} µs ({})",
            self.runtime_us,
            self.period_us,
            percent(self.runtime_us, self.period_us)
        )
    }
}

/// `sched_rt_runtime_us` and `sched_rt_period_us`.
pub fn read_rt_bandwidth() -> Result<RtBandwidth> {
    read_pair(Path::new(SYSCTL_RUNTIME), Path::new(SYSCTL_PERIOD))
}

/// Whether `runtime_us` is a valid `sched_rt_runtime_us` for `period_us`:
/// -1 (unlimited, RT throttling disabled) or `0..=period_us`.
pub fn validate_runtime(runtime_us: i64, period_us: i64) -> Result<(), String> {
    if period_us <= 0 {
        return Err(format!(
            "sched_rt_period_us {period_us} is invalid: the period must be at least 1 µs"
        ));
    }
    if runtime_us == -1 || (0..=period_us).contains(&runtime_us) {
        return Ok(());
    }
    if runtime_us < 0 {
        Err(format!(
            "sched_rt_runtime_us {runtime_us} is invalid: it must be -1 (unlimited) or at \
             least 0"
        ))
    } else {
        Err(format!(
            "sched_rt_runtime_us {runtime_us} is invalid: it must not exceed \
             sched_rt_period_us {period_us} (or be -1 for unlimited)"
        ))
    }
}

/// One RT runtime knob.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Knob {
    /// `cpu.rt_runtime_us` of the root cpu cgroup (RT group scheduling).
    RootGroup,
    /// `kernel.sched_rt_runtime_us`.
    Sysctl,
}

impl Knob {
    pub fn name(self) -> &'static str {
        match self {
            Knob::RootGroup => "root cpu cgroup cpu.rt_runtime_us",
            Knob::Sysctl => "sched_rt_runtime_us",
        }
    }
}

/// Orders a runtime for comparisons: -1 (unlimited) is above everything.
fn rank(runtime_us: i64) -> i64 {
    if runtime_us < 0 { i64::MAX } else { runtime_us }
}

/// The writes that take the sysctl (and the root group, when there is one)
/// from their current values to `target`, in an order the kernel accepts at
/// every step: lowering writes the group first, raising writes the sysctl
/// first. Knobs already at `target` are not written.
pub fn plan_writes(
    current_group: Option<i64>,
    current_sysctl: i64,
    target: i64,
) -> Vec<(Knob, i64)> {
    plan_transition(current_group.map(|g| (g, target)), (current_sysctl, target))
}

/// Like [`plan_writes`] with separate targets, as `(current, target)` pairs:
/// used to put back originals where the group and the sysctl differed.
/// Valid for targets with group ≤ sysctl (which every original state is).
fn plan_transition(group: Option<(i64, i64)>, sysctl: (i64, i64)) -> Vec<(Knob, i64)> {
    let (cur_sysctl, new_sysctl) = sysctl;
    let sysctl_write = (cur_sysctl != new_sysctl).then_some((Knob::Sysctl, new_sysctl));
    let group_write = group.and_then(|(cur, new)| (cur != new).then_some((Knob::RootGroup, new)));
    let ordered = if rank(new_sysctl) >= rank(cur_sysctl) {
        [sysctl_write, group_write]
    } else {
        [group_write, sysctl_write]
    };
    ordered.into_iter().flatten().collect()
}

/// The kernel's `to_ratio`: runtime/period in units of 2^-20.
fn to_ratio(period_us: i64, runtime_us: i64) -> u64 {
    if runtime_us < 0 {
        return BW_UNIT;
    }
    if period_us <= 0 {
        return 0;
    }
    (((runtime_us as u128) << BW_SHIFT) / period_us as u128) as u64
}

fn percent(runtime_us: i64, period_us: i64) -> String {
    if runtime_us < 0 {
        "unlimited".to_string()
    } else if period_us > 0 {
        format!("{:.1}%", runtime_us as f64 * 100.0 / period_us as f64)
    } else {
        "?%".to_string()
    }
}

fn percent_of_ratio(ratio: u64) -> String {
    format!("{:.1}%", ratio as f64 * 100.0 / BW_UNIT as f64)
}

/// A child of the root cpu cgroup that reserves RT time of its own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChildGroup {
    pub path: PathBuf,
    pub runtime_us: i64,
    pub period_us: i64,
}

/// Direct children of `group_dir` with a non-zero `cpu.rt_runtime_us`
/// (deeper groups are bounded by these, so only they constrain the root).
fn rt_children(group_dir: &Path) -> Vec<ChildGroup> {
    let Ok(entries) = std::fs::read_dir(group_dir) else {
        return Vec::new();
    };
    let mut children: Vec<ChildGroup> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| {
            let dir = e.path();
            let runtime_us = read_i64_file(&dir.join(GROUP_RUNTIME))?;
            let period_us = read_i64_file(&dir.join(GROUP_PERIOD))?;
            (runtime_us != 0).then_some(ChildGroup {
                path: dir,
                runtime_us,
                period_us,
            })
        })
        .collect();
    children.sort_by(|a, b| a.path.cmp(&b.path));
    children
}

fn children_ratio(children: &[ChildGroup]) -> u64 {
    children
        .iter()
        .map(|c| to_ratio(c.period_us, c.runtime_us))
        .sum()
}

fn describe_children(children: &[ChildGroup]) -> String {
    let list: Vec<String> = children
        .iter()
        .map(|c| {
            format!(
                "{} {}/{} µs ({})",
                c.path.display(),
                c.runtime_us,
                c.period_us,
                percent(c.runtime_us, c.period_us)
            )
        })
        .collect();
    format!(
        "child cpu cgroups reserve RT time of their own: {} ({} in all); their sum may not \
         exceed the root group's share, so lower their cpu.rt_runtime_us first (for example \
         echo 0 > {}/{GROUP_RUNTIME}, which needs the group to have no RT tasks)",
        list.join(", "),
        percent_of_ratio(children_ratio(children)),
        children
            .first()
            .map_or_else(|| "CHILD".to_string(), |c| c.path.display().to_string())
    )
}

/// Where the knobs are. `system()` for the real machine; tests point it at
/// plain files.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Knobs {
    sysctl_runtime: PathBuf,
    sysctl_period: PathBuf,
    /// The root cpu cgroup directory, when it has `cpu.rt_runtime_us`.
    group_dir: Option<PathBuf>,
}

/// The directory holding the root group's `cpu.rt_runtime_us`, given
/// envinfo's finding that RT group scheduling is active. The candidates are
/// the ones `envinfo::capture` checks (v1/hybrid cpu hierarchy first).
fn root_group_dir(rt_group_sched: bool) -> Option<PathBuf> {
    if !rt_group_sched {
        return None;
    }
    let root = Path::new(CGROUP_ROOT);
    [root.join("cpu"), root.to_path_buf()]
        .into_iter()
        .find(|d| d.join(GROUP_RUNTIME).exists())
}

impl Knobs {
    fn system() -> Knobs {
        Knobs::from_env(&envinfo::capture())
    }

    fn from_env(env: &EnvSnapshot) -> Knobs {
        Knobs {
            sysctl_runtime: PathBuf::from(SYSCTL_RUNTIME),
            sysctl_period: PathBuf::from(SYSCTL_PERIOD),
            group_dir: root_group_dir(env.rt_group_sched),
        }
    }

    fn path(&self, knob: Knob) -> PathBuf {
        match knob {
            Knob::Sysctl => self.sysctl_runtime.clone(),
            Knob::RootGroup => self
                .group_dir
                .as_ref()
                .map_or_else(PathBuf::new, |d| d.join(GROUP_RUNTIME)),
        }
    }

    fn read_sysctl(&self) -> Result<RtBandwidth> {
        read_pair(&self.sysctl_runtime, &self.sysctl_period)
    }

    fn read_group(&self) -> Result<Option<RtBandwidth>> {
        self.group_dir
            .as_ref()
            .map(|d| read_pair(&d.join(GROUP_RUNTIME), &d.join(GROUP_PERIOD)))
            .transpose()
    }

    fn read(&self, knob: Knob) -> Result<i64> {
        let path = self.path(knob);
        read_i64_file(&path).ok_or_else(|| anyhow!("cannot read {}", path.display()))
    }

    /// One write of the decimal value, as `echo VALUE > PATH` does.
    fn write(&self, knob: Knob, value: i64) -> io::Result<()> {
        let mut f = OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(self.path(knob))?;
        f.write_all(format!("{value}\n").as_bytes())
    }

    /// Whatever helps explain a refused write.
    fn facts(&self, knob: Knob) -> WriteFacts {
        WriteFacts {
            path: self.path(knob),
            sysctl: self.read_sysctl().ok(),
            group: self.read_group().ok().flatten(),
            children: self
                .group_dir
                .as_deref()
                .map(rt_children)
                .unwrap_or_default(),
            deadline_tasks: deadline_tasks(),
            euid: euid(),
        }
    }
}

fn read_pair(runtime: &Path, period: &Path) -> Result<RtBandwidth> {
    let read = |p: &Path| read_i64_file(p).ok_or_else(|| anyhow!("cannot read {}", p.display()));
    Ok(RtBandwidth {
        runtime_us: read(runtime)?,
        period_us: read(period)?,
    })
}

fn euid() -> u32 {
    // SAFETY: geteuid has no arguments and cannot fail.
    unsafe { libc::geteuid() }
}

/// The facts around a refused write, for [`explain_write_error`].
#[derive(Debug, Clone, Default, PartialEq)]
struct WriteFacts {
    path: PathBuf,
    sysctl: Option<RtBandwidth>,
    group: Option<RtBandwidth>,
    children: Vec<ChildGroup>,
    /// "pid 123 (name) 10000/100000 µs" for every SCHED_DEADLINE thread.
    deadline_tasks: Vec<String>,
    euid: u32,
}

/// Why the kernel refused `value` for `knob` with `errno`, with the numbers
/// and what to do about it.
fn explain_write_error(knob: Knob, value: i64, errno: Option<i32>, f: &WriteFacts) -> String {
    let head = format!(
        "the kernel refused {} = {value} ({})",
        knob.name(),
        f.path.display()
    );
    match errno {
        Some(libc::EINVAL) => {
            let mut why = Vec::new();
            match knob {
                Knob::Sysctl => {
                    if let Some(s) = f.sysctl
                        && let Err(m) = validate_runtime(value, s.period_us)
                    {
                        why.push(m);
                    }
                    if let Some(g) = f.group
                        && to_ratio(s_period(f, g.period_us), value)
                            < to_ratio(g.period_us, g.runtime_us)
                    {
                        why.push(format!(
                            "with RT group scheduling the sysctl may not go below the root \
                             cpu cgroup's cpu.rt_runtime_us ({} / {} µs): lower the group first",
                            g.runtime_us, g.period_us
                        ));
                    }
                }
                Knob::RootGroup => {
                    if value == 0 {
                        why.push(
                            "the root cpu cgroup may not have an RT runtime of 0 (the kernel's \
                             own RT threads run there); the smallest is 1"
                                .to_string(),
                        );
                    }
                    if let Some(g) = f.group
                        && value > g.period_us
                    {
                        why.push(format!("it exceeds cpu.rt_period_us {}", g.period_us));
                    }
                    if let (Some(s), Some(g)) = (f.sysctl, f.group)
                        && to_ratio(g.period_us, value) > to_ratio(s.period_us, s.runtime_us)
                    {
                        why.push(format!(
                            "it may not exceed sched_rt_runtime_us ({} / {} µs): raise the \
                             sysctl first",
                            s.runtime_us, s.period_us
                        ));
                    }
                    if let Some(g) = f.group
                        && children_ratio(&f.children) > to_ratio(g.period_us, value)
                    {
                        why.push(describe_children(&f.children));
                    }
                }
            }
            if why.is_empty() {
                why.push(format!(
                    "the value is out of range or inconsistent with the other RT settings \
                     (sysctl {}, root group {})",
                    f.sysctl.map_or("unknown".to_string(), |s| s.to_string()),
                    f.group.map_or("none".to_string(), |g| g.to_string())
                ));
            }
            format!("{head}: EINVAL: {}", why.join("; "))
        }
        Some(libc::EBUSY) => match knob {
            Knob::Sysctl => {
                let share = f
                    .sysctl
                    .map(|s| format!(" ({} per CPU)", percent(value, s.period_us)))
                    .unwrap_or_default();
                let tasks = if f.deadline_tasks.is_empty() {
                    "no SCHED_DEADLINE task is running, so the bandwidth is the kernel's own"
                        .to_string()
                } else {
                    format!("SCHED_DEADLINE tasks: {}", f.deadline_tasks.join(", "))
                };
                format!(
                    "{head}: EBUSY: that RT runtime{share} is less than the SCHED_DEADLINE \
                     bandwidth already admitted; {tasks}. Since Linux 6.12 the fair-class \
                     server (dl_server) reserves 50000 / 1000000 µs (5%) on every CPU by \
                     default, so runtimes below about 5% of the period are always refused. \
                     Choose a larger runtime or stop the SCHED_DEADLINE tasks"
                )
            }
            Knob::RootGroup => {
                let children = if f.children.is_empty() {
                    "no child cgroup reserves RT time".to_string()
                } else {
                    describe_children(&f.children)
                };
                format!(
                    "{head}: EBUSY: the group's RT tasks or its children's reservations would \
                     not fit; {children}"
                )
            }
        },
        Some(libc::EACCES | libc::EPERM) => format!(
            "{head}: {}: permission denied: changing RT bandwidth needs root (CAP_SYS_ADMIN in \
             the initial user namespace); euid is {}{}",
            if errno == Some(libc::EACCES) {
                "EACCES"
            } else {
                "EPERM"
            },
            f.euid,
            if f.euid == 0 {
                " (root in a container or user namespace is not enough)"
            } else {
                ""
            }
        ),
        Some(libc::EROFS) => format!(
            "{head}: EROFS: {} is on a read-only mount (/proc/sys or /sys/fs/cgroup mounted \
             read-only, as in an unprivileged container); run on the host or in a privileged \
             container",
            f.path.display()
        ),
        _ => format!(
            "cannot write {value} to {}: {}",
            f.path.display(),
            errno.map_or_else(
                || "unknown error".to_string(),
                |e| io::Error::from_raw_os_error(e).to_string()
            )
        ),
    }
}

/// The sysctl period for ratio comparisons, defaulting to `fallback`.
fn s_period(f: &WriteFacts, fallback: i64) -> i64 {
    f.sysctl.map_or(fallback, |s| s.period_us)
}

/// Every SCHED_DEADLINE thread, as "pid 123 (name) 10000/100000 µs".
fn deadline_tasks() -> Vec<String> {
    crate::sys::procstat::deadline_tasks()
        .into_iter()
        .map(|t| {
            let bw = t
                .attr
                .map(|a| {
                    format!(
                        " {}/{} µs",
                        a.sched_runtime / 1000,
                        a.sched_period.max(a.sched_deadline) / 1000
                    )
                })
                .unwrap_or_default();
            format!("pid {} ({}){bw}", t.tid, t.comm)
        })
        .collect()
}

/// Field 22 of `/proc/PID/stat`: when the process started, in clock ticks
/// after boot. Tells a live process from a later one that reuses its pid.
fn process_start_ticks(pid: i32) -> Option<u64> {
    crate::sys::procstat::read_stat(pid)?.start_ticks
}

fn boot_id() -> Option<String> {
    crate::sys::procfs::read_trimmed(Path::new("/proc/sys/kernel/random/boot_id"))
}

/// Whether `pid` is a live process that is the one that started at
/// `start_ticks` (when known).
fn pid_alive(pid: i32, start_ticks: Option<u64>) -> bool {
    if pid <= 0 {
        return false;
    }
    // SAFETY: kill with signal 0 only checks for existence.
    let rc = unsafe { libc::kill(pid, 0) };
    let exists = rc == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
    if !exists {
        return false;
    }
    match (start_ticks, process_start_ticks(pid)) {
        (Some(recorded), Some(now)) => recorded == now,
        _ => true,
    }
}

/// The journal of original values, written before anything is changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Journal {
    /// Format version (1).
    pub format: u32,
    /// The schedlab process that made the change.
    pub pid: i32,
    /// Its start time (field 22 of /proc/PID/stat), to tell it from a later
    /// process that got the same pid.
    pub pid_start_ticks: Option<u64>,
    /// /proc/sys/kernel/random/boot_id at the time: the settings do not
    /// survive a reboot.
    pub boot_id: Option<String>,
    /// Seconds since the Unix epoch.
    pub created_unix_s: u64,
    /// Original `sched_rt_runtime_us`.
    pub sched_rt_runtime_us: i64,
    /// `sched_rt_period_us` (never changed; recorded for checks).
    pub sched_rt_period_us: i64,
    /// Original root cpu cgroup `cpu.rt_runtime_us`, when that knob exists.
    pub root_group_rt_runtime_us: Option<i64>,
    /// Root cpu cgroup `cpu.rt_period_us`, when that knob exists.
    pub root_group_rt_period_us: Option<i64>,
}

impl Journal {
    pub fn to_json(&self) -> String {
        // Plain fields only: serialisation cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_default() + "\n"
    }

    pub fn from_json(text: &str) -> Result<Journal> {
        let j: Journal = serde_json::from_str(text).context("parsing the RT journal")?;
        if j.format != JOURNAL_FORMAT {
            bail!(
                "RT journal format {} is not known to this schedlab (expects {JOURNAL_FORMAT})",
                j.format
            );
        }
        Ok(j)
    }

    fn originals(&self) -> String {
        let mut s = format!(
            "sched_rt_runtime_us {} (period {})",
            self.sched_rt_runtime_us, self.sched_rt_period_us
        );
        if let Some(g) = self.root_group_rt_runtime_us {
            s += &format!(", root cpu cgroup cpu.rt_runtime_us {g}");
        }
        s
    }
}

/// The journal at `path`, if there is one.
pub fn read_journal(path: &Path) -> Result<Option<Journal>> {
    match std::fs::read_to_string(path) {
        Ok(text) => Journal::from_json(&text)
            .map(Some)
            .with_context(|| format!("RT journal {} is unreadable: {text:?}", path.display())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

/// Where the journal of original values is kept: `$SCHEDLAB_JOURNAL` if
/// set, else `/var/lib/schedlab/rt-journal.json`, or
/// `/run/schedlab/rt-journal.json` when `/var/lib` is not writable. Creates
/// the chosen directory. See the module documentation for why.
pub fn journal_path() -> PathBuf {
    journal_location(true)
}

fn journal_location(create: bool) -> PathBuf {
    if let Some(p) = std::env::var_os(JOURNAL_ENV).filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    journal_location_in(
        &[Path::new(JOURNAL_DIR), Path::new(JOURNAL_DIR_FALLBACK)],
        create,
    )
}

/// The journal in the first of `dirs` that is (or, when `create`, can be
/// made) writable, else in the first; creates that directory only when
/// `create`.
fn journal_location_in(dirs: &[&Path], create: bool) -> PathBuf {
    for &dir in dirs {
        let usable = if create {
            std::fs::create_dir_all(dir).is_ok() && writable(dir).is_ok()
        } else if dir.exists() {
            writable(dir).is_ok()
        } else {
            dir.parent().is_some_and(|p| writable(p).is_ok())
        };
        if usable {
            return dir.join(JOURNAL_NAME);
        }
    }
    dirs[0].join(JOURNAL_NAME)
}

/// Every place a journal may have been left: the override alone, or both
/// default locations (which one is used depends on what was writable).
fn journal_candidates() -> Vec<PathBuf> {
    match std::env::var_os(JOURNAL_ENV).filter(|p| !p.is_empty()) {
        Some(p) => vec![PathBuf::from(p)],
        None => [JOURNAL_DIR, JOURNAL_DIR_FALLBACK]
            .into_iter()
            .map(|d| Path::new(d).join(JOURNAL_NAME))
            .collect(),
    }
}

fn lock_path(journal: &Path) -> PathBuf {
    let mut name = journal.file_name().unwrap_or_default().to_os_string();
    name.push(".lock");
    journal.with_file_name(name)
}

/// An exclusive `flock` on `<journal>.lock`, or `None` when a live process
/// holds it. The lock file is never removed (removing it would race).
fn try_lock(journal: &Path) -> Result<Option<File>> {
    let path = lock_path(journal);
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&path)
        .with_context(|| format!("opening the RT journal lock {}", path.display()))?;
    // SAFETY: flock on a descriptor we own; no memory arguments.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(Some(f));
    }
    let err = io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(None)
    } else {
        Err(err).with_context(|| format!("locking {}", path.display()))
    }
}

fn fsync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Writes the journal to a temporary file, fsyncs it, renames it to `path`
/// without replacing an existing file (`RENAME_NOREPLACE`, or `link` where
/// the filesystem lacks it), and fsyncs the directory.
fn write_journal_exclusive(path: &Path, journal: &Journal) -> Result<()> {
    let dir = parent_dir(path);
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        path.file_name().unwrap_or_default().to_string_lossy(),
        std::process::id()
    ));
    let written = (|| -> io::Result<()> {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(journal.to_json().as_bytes())?;
        f.sync_all()?;
        rename_noreplace(&tmp, path)?;
        fsync_dir(dir)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e).with_context(|| format!("writing the RT journal {}", path.display()));
    }
    Ok(())
}

fn rename_noreplace(from: &Path, to: &Path) -> io::Result<()> {
    let c = |p: &Path| {
        CString::new(p.as_os_str().as_bytes())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
    };
    let (cf, ct) = (c(from)?, c(to)?);
    // SAFETY: two NUL-terminated paths relative to the working directory.
    let rc = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            cf.as_ptr(),
            libc::AT_FDCWD,
            ct.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if rc == 0 {
        return Ok(());
    }
    let err = io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::EINVAL | libc::ENOSYS) => {
            std::fs::hard_link(from, to)?;
            std::fs::remove_file(from)
        }
        _ => Err(err),
    }
}

fn remove_journal(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("removing {}", path.display())),
    }
    fsync_dir(parent_dir(path)).with_context(|| format!("syncing {}", parent_dir(path).display()))
}

/// Applies `plan` in order, reading every value back. On a refusal the
/// error explains it; with `rollback`, the writes already made by this call
/// are undone (in reverse order, which the kernel accepts) so the knobs stay
/// consistent.
fn apply(knobs: &Knobs, plan: &[(Knob, i64)], rollback: bool) -> Result<()> {
    let mut done: Vec<(Knob, i64)> = Vec::new();
    for &(knob, value) in plan {
        let previous = knobs.read(knob)?;
        let failure = match knobs.write(knob, value) {
            Ok(()) => match knobs.read(knob) {
                Ok(v) if v == value => None,
                Ok(v) => Some(format!(
                    "{} reads {v} after writing {value} ({})",
                    knob.name(),
                    knobs.path(knob).display()
                )),
                Err(e) => Some(format!("{e:#}")),
            },
            Err(e) => Some(explain_write_error(
                knob,
                value,
                e.raw_os_error(),
                &knobs.facts(knob),
            )),
        };
        let Some(mut message) = failure else {
            done.push((knob, previous));
            continue;
        };
        if rollback {
            done.push((knob, previous));
            for &(k, v) in done.iter().rev() {
                if knobs.read(k).ok() == Some(v) {
                    continue;
                }
                match knobs.write(k, v) {
                    Ok(()) => message += &format!("; {} put back to {v}", k.name()),
                    Err(e) => message += &format!("; could not put {} back to {v}: {e}", k.name()),
                }
            }
        }
        bail!(message);
    }
    Ok(())
}

/// One knob put back: (name, original value, value found).
type Restored = (Knob, i64, i64);

/// Puts the originals recorded in `j` back and checks them by reading back.
fn restore_values(knobs: &Knobs, j: &Journal) -> Result<Vec<Restored>> {
    let sysctl = knobs.read_sysctl()?;
    let group = match (knobs.read_group()?, j.root_group_rt_runtime_us) {
        (Some(g), Some(orig)) => Some((g.runtime_us, orig)),
        _ => None,
    };
    let plan = plan_transition(group, (sysctl.runtime_us, j.sched_rt_runtime_us));
    apply(knobs, &plan, false)
        .with_context(|| format!("restoring the original {}", j.originals()))?;
    let mut restored = Vec::new();
    let now = knobs.read(Knob::Sysctl)?;
    if now != j.sched_rt_runtime_us {
        bail!(
            "sched_rt_runtime_us reads {now} after restoring {}",
            j.sched_rt_runtime_us
        );
    }
    if sysctl.runtime_us != now {
        restored.push((Knob::Sysctl, now, sysctl.runtime_us));
    }
    if let Some((was, orig)) = group {
        let now = knobs.read(Knob::RootGroup)?;
        if now != orig {
            bail!("root cpu cgroup cpu.rt_runtime_us reads {now} after restoring {orig}");
        }
        if was != now {
            restored.push((Knob::RootGroup, now, was));
        }
    }
    Ok(restored)
}

/// Whether the schedlab that wrote `j` still runs. Called with the lock
/// held, so a journal of this very process is a leftover (a guard whose
/// restore failed), not a live holder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Holder {
    Alive,
    Dead,
    EarlierBoot,
}

fn holder_state(j: &Journal, current_boot: Option<&str>, self_pid: i32) -> Holder {
    if let (Some(then), Some(now)) = (j.boot_id.as_deref(), current_boot)
        && then != now
    {
        return Holder::EarlierBoot;
    }
    if j.pid == self_pid {
        return Holder::Dead;
    }
    if pid_alive(j.pid, j.pid_start_ticks) {
        Holder::Alive
    } else {
        Holder::Dead
    }
}

fn self_pid() -> i32 {
    std::process::id() as i32
}

/// Restores and removes the leftover journal `j` at `path` (lock held).
fn recover_locked(knobs: &Knobs, path: &Path, j: &Journal) -> Result<String> {
    if holder_state(j, boot_id().as_deref(), self_pid()) == Holder::EarlierBoot {
        remove_journal(path)?;
        let now = knobs
            .read_sysctl()
            .map_or_else(|_| "unknown".to_string(), |s| s.runtime_us.to_string());
        return Ok(format!(
            "removed {} left by schedlab pid {} in an earlier boot; kernel settings do not \
             survive a reboot, so nothing was written (sched_rt_runtime_us is {now}; the \
             journal recorded {})",
            path.display(),
            j.pid,
            j.originals()
        ));
    }
    let restored = restore_values(knobs, j).with_context(|| {
        format!(
            "{} was left by schedlab pid {} that did not exit cleanly and could not be \
             restored; the journal is kept",
            path.display(),
            j.pid
        )
    })?;
    remove_journal(path)?;
    let what = if restored.is_empty() {
        format!("found {} already in place", j.originals())
    } else {
        let parts: Vec<String> = restored
            .iter()
            .map(|(k, now, was)| format!("{} {now} (was {was})", k.name()))
            .collect();
        format!("restored {}", parts.join(", "))
    };
    Ok(format!(
        "{what} left by schedlab pid {} that did not exit cleanly (journal {})",
        j.pid,
        path.display()
    ))
}

/// What the machine allows: for `schedlab env` and for clear refusals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KnobCapability {
    pub euid: u32,
    /// envinfo's cgroup layout: "v1", "v2", "hybrid" or "none".
    pub cgroup_layout: String,
    /// The sysctls, when readable.
    pub sysctl: Option<RtBandwidth>,
    /// Why the sysctl cannot be written; `None` when it can.
    pub sysctl_refusal: Option<String>,
    /// The root group's `cpu.rt_runtime_us` (RT group scheduling), if any.
    pub root_group_knob: Option<PathBuf>,
    pub root_group: Option<RtBandwidth>,
    /// Why the root group knob cannot be written; `None` when it can or
    /// there is none.
    pub root_group_refusal: Option<String>,
    /// Child cgroups reserving RT time (they bound how low the root group
    /// can go).
    pub rt_child_groups: Vec<ChildGroup>,
    /// Where the journal would be kept.
    pub journal: PathBuf,
}

/// What this machine allows (see [`KnobCapability`]).
pub fn capability() -> KnobCapability {
    capability_from(&envinfo::capture())
}

/// [`capability`] from an environment snapshot already captured.
pub fn capability_from(env: &EnvSnapshot) -> KnobCapability {
    let knobs = Knobs::from_env(env);
    let euid = euid();
    let sysctl = match (env.sched_rt_runtime_us, env.sched_rt_period_us) {
        (Some(runtime_us), Some(period_us)) => Some(RtBandwidth {
            runtime_us,
            period_us,
        }),
        _ => None,
    };
    let refusal = |path: &Path| writable(path).err().map(|e| explain_access(path, &e, euid));
    KnobCapability {
        euid,
        cgroup_layout: env.cgroup_version.clone(),
        sysctl,
        sysctl_refusal: refusal(&knobs.sysctl_runtime),
        root_group_knob: knobs.group_dir.as_ref().map(|d| d.join(GROUP_RUNTIME)),
        root_group: knobs.read_group().ok().flatten(),
        root_group_refusal: knobs
            .group_dir
            .as_ref()
            .and_then(|d| refusal(&d.join(GROUP_RUNTIME))),
        rt_child_groups: knobs
            .group_dir
            .as_deref()
            .map(rt_children)
            .unwrap_or_default(),
        journal: journal_location(false),
    }
}

fn explain_access(path: &Path, err: &io::Error, euid: u32) -> String {
    match err.raw_os_error() {
        Some(libc::ENOENT) => format!("{} does not exist", path.display()),
        Some(libc::EROFS) => format!(
            "{} is on a read-only mount (as in an unprivileged container)",
            path.display()
        ),
        Some(libc::EACCES | libc::EPERM) if euid == 0 => format!(
            "{} is not writable although euid is 0 (a user namespace or container without \
             the right to change kernel settings)",
            path.display()
        ),
        Some(libc::EACCES | libc::EPERM) => format!(
            "{} is writable by root only (euid is {euid}): run schedlab as root",
            path.display()
        ),
        _ => format!("{}: {err}", path.display()),
    }
}

impl KnobCapability {
    /// Whether RT bandwidth can be changed here.
    pub fn can_change(&self) -> bool {
        self.sysctl.is_some() && self.sysctl_refusal.is_none() && self.root_group_refusal.is_none()
    }

    /// A few lines for `schedlab env` and for refusals.
    pub fn explain(&self) -> String {
        let mut lines = Vec::new();
        lines.push(match self.sysctl {
            Some(s) => format!("sched_rt_runtime_us / sched_rt_period_us: {s}"),
            None => "sched_rt_runtime_us / sched_rt_period_us: unreadable".to_string(),
        });
        match (&self.root_group_knob, self.root_group) {
            (Some(path), Some(g)) => lines.push(format!(
                "cgroup {} with RT group scheduling: root group {} = {g}; changed together \
                 with the sysctl (group first when lowering, sysctl first when raising)",
                self.cgroup_layout,
                path.display()
            )),
            (Some(path), None) => lines.push(format!(
                "cgroup {} with RT group scheduling: root group {} unreadable",
                self.cgroup_layout,
                path.display()
            )),
            (None, _) => lines.push(format!(
                "cgroup {}, no RT group scheduling knob: only the sysctl is changed",
                self.cgroup_layout
            )),
        }
        if !self.rt_child_groups.is_empty() {
            lines.push(format!(
                "the root group cannot go below {}: {}",
                percent_of_ratio(children_ratio(&self.rt_child_groups)),
                describe_children(&self.rt_child_groups)
            ));
        }
        if self.can_change() {
            lines.push(format!(
                "can change RT bandwidth (euid {}); originals are journaled in {}",
                self.euid,
                self.journal.display()
            ));
        } else {
            let reasons: Vec<&str> = [&self.sysctl_refusal, &self.root_group_refusal]
                .into_iter()
                .flatten()
                .map(String::as_str)
                .collect();
            lines.push(format!(
                "cannot change RT bandwidth: {}",
                if reasons.is_empty() {
                    "the sysctls are unreadable"
                } else {
                    "see below"
                }
            ));
            lines.extend(reasons.into_iter().map(|r| format!("  {r}")));
        }
        lines.join("\n")
    }
}

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
    journal: Journal,
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

    fn acquire_at(knobs: Knobs, path: PathBuf) -> Result<RtGuard> {
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
        let sysctl = knobs.read_sysctl()?;
        let group = knobs.read_group()?;
        let journal = Journal {
            format: JOURNAL_FORMAT,
            pid: self_pid(),
            pid_start_ticks: process_start_ticks(self_pid()),
            boot_id: boot_id(),
            created_unix_s: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            sched_rt_runtime_us: sysctl.runtime_us,
            sched_rt_period_us: sysctl.period_us,
            root_group_rt_runtime_us: group.map(|g| g.runtime_us),
            root_group_rt_period_us: group.map(|g| g.period_us),
        };
        write_journal_exclusive(&path, &journal)?;
        Ok(RtGuard {
            knobs,
            journal_path: path,
            journal,
            _lock: lock,
            done: false,
            recovered,
        })
    }

    /// The original sysctl values.
    pub fn original(&self) -> RtBandwidth {
        RtBandwidth {
            runtime_us: self.journal.sched_rt_runtime_us,
            period_us: self.journal.sched_rt_period_us,
        }
    }

    /// The original root group `cpu.rt_runtime_us`, when there is that knob.
    pub fn original_group_runtime_us(&self) -> Option<i64> {
        self.journal.root_group_rt_runtime_us
    }

    pub fn journal_path(&self) -> &Path {
        &self.journal_path
    }

    /// The warning text when `acquire` restored a journal left by a
    /// schedlab that died (normally [`recover_leftover`] has done it first).
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
        if sysctl.period_us != self.journal.sched_rt_period_us {
            bail!(
                "sched_rt_period_us changed from {} to {} since schedlab journaled it: \
                 something else is changing RT settings",
                self.journal.sched_rt_period_us,
                sysctl.period_us
            );
        }
        validate_runtime(runtime_us, sysctl.period_us)
            .map_err(|m| anyhow!("refusing to set RT runtime: {m}"))?;
        let group = self.knobs.read_group()?;
        if group.is_some() != self.journal.root_group_rt_runtime_us.is_some() {
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
    /// that the next start of schedlab ([`recover_leftover`]) tries again.
    pub fn restore(mut self) -> Result<()> {
        self.done = true;
        self.restore_inner()
    }

    fn restore_inner(&mut self) -> Result<()> {
        restore_values(&self.knobs, &self.journal).with_context(|| {
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
        let outcome =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.restore_inner()));
        let problem = match outcome {
            Ok(Ok(())) => return,
            Ok(Err(e)) => format!("{e:#}"),
            Err(_) => "a panic while restoring".to_string(),
        };
        let _ = writeln!(
            io::stderr(),
            "schedlab: could not put RT bandwidth back ({}): {problem}",
            self.journal.originals()
        );
    }
}

fn refusal_held(path: &Path) -> anyhow::Error {
    let who = match read_journal(path) {
        Ok(Some(j)) => format!("schedlab pid {}", j.pid),
        _ => "another schedlab".to_string(),
    };
    anyhow!(
        "{who} is changing RT bandwidth right now (it holds {} and its lock); only one \
         schedlab may change sched_rt_runtime_us at a time: wait for it to finish",
        path.display()
    )
}

/// Restores and removes a journal at `path` left by a schedlab that is gone;
/// `None` when there is none or its holder is alive.
fn recover_one(knobs: &Knobs, path: &Path) -> Result<Option<String>> {
    let Some(_lock) = try_lock(path)? else {
        return Ok(None);
    };
    let Some(j) = read_journal(path)? else {
        return Ok(None);
    };
    if holder_state(&j, boot_id().as_deref(), self_pid()) == Holder::Alive {
        return Ok(None);
    }
    recover_locked(knobs, path, &j).map(Some)
}

/// For every start of schedlab: if a journal was left by a schedlab that
/// died (kill -9, crash, power loss), put back the values it records,
/// remove it, and return a warning for the caller to print. `Ok(None)` when
/// there is nothing to do (no journal, or its schedlab is still running).
pub fn recover_leftover() -> Result<Option<String>> {
    let candidates: Vec<PathBuf> = journal_candidates()
        .into_iter()
        .filter(|p| p.exists())
        .collect();
    if candidates.is_empty() {
        return Ok(None);
    }
    let knobs = Knobs::system();
    let mut notes = Vec::new();
    for path in candidates {
        notes.extend(recover_one(&knobs, &path)?);
    }
    Ok((!notes.is_empty()).then(|| notes.join("\n")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_bounds() {
        assert_eq!(validate_runtime(-1, 1_000_000), Ok(()));
        assert_eq!(validate_runtime(0, 1_000_000), Ok(()));
        assert_eq!(validate_runtime(950_000, 1_000_000), Ok(()));
        assert_eq!(validate_runtime(1_000_000, 1_000_000), Ok(()));
        let e = validate_runtime(1_000_001, 1_000_000).unwrap_err();
        assert!(e.contains("1000001") && e.contains("1000000"), "{e}");
        let e = validate_runtime(-2, 1_000_000).unwrap_err();
        assert!(
            e.contains("-2") && e.contains("-1") && e.contains("0"),
            "{e}"
        );
        let e = validate_runtime(5, 0).unwrap_err();
        assert!(e.contains("period"), "{e}");
    }

    #[test]
    fn plans_lowering_group_first() {
        assert_eq!(
            plan_writes(Some(950_000), 950_000, 500_000),
            vec![(Knob::RootGroup, 500_000), (Knob::Sysctl, 500_000)]
        );
        assert_eq!(
            plan_writes(None, 950_000, 500_000),
            vec![(Knob::Sysctl, 500_000)]
        );
        // From unlimited: -1 ranks above everything.
        assert_eq!(
            plan_writes(Some(-1), -1, 500_000),
            vec![(Knob::RootGroup, 500_000), (Knob::Sysctl, 500_000)]
        );
    }

    #[test]
    fn plans_raising_sysctl_first() {
        assert_eq!(
            plan_writes(Some(500_000), 500_000, 950_000),
            vec![(Knob::Sysctl, 950_000), (Knob::RootGroup, 950_000)]
        );
        assert_eq!(
            plan_writes(None, 500_000, 950_000),
            vec![(Knob::Sysctl, 950_000)]
        );
        assert_eq!(
            plan_writes(Some(500_000), 500_000, -1),
            vec![(Knob::Sysctl, -1), (Knob::RootGroup, -1)]
        );
    }

    #[test]
    fn plans_nothing_when_equal_and_only_what_differs() {
        assert_eq!(plan_writes(Some(950_000), 950_000, 950_000), vec![]);
        assert_eq!(plan_writes(None, 950_000, 950_000), vec![]);
        // Group below the sysctl: only the group moves, either way.
        assert_eq!(
            plan_writes(Some(900_000), 950_000, 950_000),
            vec![(Knob::RootGroup, 950_000)]
        );
        assert_eq!(
            plan_writes(Some(900_000), 950_000, 920_000),
            vec![(Knob::RootGroup, 920_000), (Knob::Sysctl, 920_000)]
        );
    }

    /// Every plan keeps group ≤ sysctl after each step.
    #[test]
    fn plans_stay_valid_at_every_step() {
        let values = [-1, 1, 100_000, 500_000, 900_000, 950_000, 1_000_000];
        for &g in &values {
            for &s in &values {
                if rank(g) > rank(s) {
                    continue; // not a state the kernel allows
                }
                for &t in &values {
                    let (mut cg, mut cs) = (g, s);
                    for (knob, v) in plan_writes(Some(g), s, t) {
                        match knob {
                            Knob::RootGroup => cg = v,
                            Knob::Sysctl => cs = v,
                        }
                        assert!(rank(cg) <= rank(cs), "{g} {s} → {t}: {cg} > {cs}");
                    }
                    assert_eq!((cg, cs), (t, t));
                }
                // Restoring a different (valid) pair of originals.
                for &og in &values {
                    for &os in &values {
                        if rank(og) > rank(os) {
                            continue;
                        }
                        let (mut cg, mut cs) = (g, s);
                        for (knob, v) in plan_transition(Some((g, og)), (s, os)) {
                            match knob {
                                Knob::RootGroup => cg = v,
                                Knob::Sysctl => cs = v,
                            }
                            assert!(rank(cg) <= rank(cs), "{g},{s} → {og},{os}");
                        }
                        assert_eq!((cg, cs), (og, os));
                    }
                }
            }
        }
    }

    fn sample_journal() -> Journal {
        Journal {
            format: 1,
            pid: 4242,
            pid_start_ticks: Some(123_456),
            boot_id: Some("8c2d0f6e-0000-4000-8000-000000000000".into()),
            created_unix_s: 1_700_000_000,
            sched_rt_runtime_us: 950_000,
            sched_rt_period_us: 1_000_000,
            root_group_rt_runtime_us: Some(950_000),
            root_group_rt_period_us: Some(1_000_000),
        }
    }

    #[test]
    fn journal_round_trips() {
        let j = sample_journal();
        let text = j.to_json();
        assert!(text.contains("\"sched_rt_runtime_us\": 950000"), "{text}");
        assert!(text.contains("\"pid\": 4242"), "{text}");
        assert_eq!(Journal::from_json(&text).unwrap(), j);
        let no_group = Journal {
            root_group_rt_runtime_us: None,
            root_group_rt_period_us: None,
            ..j.clone()
        };
        assert_eq!(Journal::from_json(&no_group.to_json()).unwrap(), no_group);
        assert!(Journal::from_json("{\"pid\": 1}").is_err());
        assert!(Journal::from_json(&text.replace("\"format\": 1", "\"format\": 9")).is_err());
    }

    #[test]
    fn holder_states() {
        let mut j = sample_journal();
        j.pid = i32::MAX; // above pid_max: never a live process
        assert_eq!(holder_state(&j, j.boot_id.as_deref(), 1), Holder::Dead);
        assert_eq!(holder_state(&j, Some("other-boot"), 1), Holder::EarlierBoot);
        // This very process, with its real start time: alive to others.
        j.pid = self_pid();
        j.pid_start_ticks = process_start_ticks(self_pid());
        assert!(j.pid_start_ticks.is_some());
        assert_eq!(holder_state(&j, None, 1), Holder::Alive);
        // ... but a leftover to itself (it holds the lock, so no guard lives).
        assert_eq!(holder_state(&j, None, self_pid()), Holder::Dead);
        // Same pid, other start time: the pid was reused.
        j.pid_start_ticks = j.pid_start_ticks.map(|t| t + 1);
        assert_eq!(holder_state(&j, None, 1), Holder::Dead);
    }

    #[test]
    fn stat_parsing() {
        // The parsing itself is tested in sys::procstat.
        assert!(process_start_ticks(self_pid()).is_some());
    }

    #[test]
    fn ratios_match_the_kernel() {
        assert_eq!(to_ratio(1_000_000, 1_000_000), BW_UNIT);
        assert_eq!(to_ratio(1_000_000, -1), BW_UNIT);
        assert_eq!(to_ratio(1_000_000, 500_000), BW_UNIT / 2);
        assert_eq!(to_ratio(0, 5), 0);
    }

    fn facts() -> WriteFacts {
        WriteFacts {
            path: PathBuf::from("/proc/sys/kernel/sched_rt_runtime_us"),
            sysctl: Some(RtBandwidth {
                runtime_us: 950_000,
                period_us: 1_000_000,
            }),
            group: Some(RtBandwidth {
                runtime_us: 950_000,
                period_us: 1_000_000,
            }),
            children: vec![],
            deadline_tasks: vec![],
            euid: 0,
        }
    }

    #[test]
    fn explains_sysctl_below_group() {
        let m = explain_write_error(Knob::Sysctl, 500_000, Some(libc::EINVAL), &facts());
        assert!(m.contains("EINVAL"), "{m}");
        assert!(m.contains("500000") && m.contains("950000"), "{m}");
        assert!(m.contains("lower the group first"), "{m}");
    }

    #[test]
    fn explains_group_problems() {
        let mut f = facts();
        f.path = PathBuf::from("/sys/fs/cgroup/cpu/cpu.rt_runtime_us");
        let m = explain_write_error(Knob::RootGroup, 960_000, Some(libc::EINVAL), &f);
        assert!(
            m.contains("raise the sysctl first") && m.contains("950000"),
            "{m}"
        );
        let m = explain_write_error(Knob::RootGroup, 0, Some(libc::EINVAL), &f);
        assert!(m.contains("may not have an RT runtime of 0"), "{m}");
        f.children = vec![ChildGroup {
            path: PathBuf::from("/sys/fs/cgroup/cpu/rtapp"),
            runtime_us: 900_000,
            period_us: 1_000_000,
        }];
        for errno in [libc::EINVAL, libc::EBUSY] {
            let m = explain_write_error(Knob::RootGroup, 500_000, Some(errno), &f);
            assert!(
                m.contains("/sys/fs/cgroup/cpu/rtapp 900000/1000000 µs (90.0%)"),
                "{m}"
            );
            assert!(m.contains("lower their cpu.rt_runtime_us first"), "{m}");
        }
    }

    #[test]
    fn explains_deadline_busy_and_permissions() {
        let mut f = facts();
        let m = explain_write_error(Knob::Sysctl, 30_000, Some(libc::EBUSY), &f);
        assert!(m.contains("EBUSY") && m.contains("3.0% per CPU"), "{m}");
        assert!(
            m.contains("no SCHED_DEADLINE task") && m.contains("fair"),
            "{m}"
        );
        f.deadline_tasks = vec!["pid 77 (dl) 10000/100000 µs".into()];
        let m = explain_write_error(Knob::Sysctl, 30_000, Some(libc::EBUSY), &f);
        assert!(m.contains("pid 77 (dl) 10000/100000 µs"), "{m}");
        let m = explain_write_error(Knob::Sysctl, 500_000, Some(libc::EROFS), &f);
        assert!(m.contains("EROFS") && m.contains("read-only"), "{m}");
        f.euid = 1000;
        let m = explain_write_error(Knob::Sysctl, 500_000, Some(libc::EACCES), &f);
        assert!(
            m.contains("EACCES") && m.contains("needs root") && m.contains("1000"),
            "{m}"
        );
    }

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

    /// Plain files standing in for the knobs, for the journal and ordering
    /// machinery without root.
    struct Fake {
        dir: tempfile::TempDir,
        knobs: Knobs,
    }

    fn fake(group: Option<i64>) -> Fake {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("runtime"), "950000\n").unwrap();
        std::fs::write(d.join("period"), "1000000\n").unwrap();
        let group_dir = group.map(|g| {
            let gd = d.join("cpu");
            std::fs::create_dir(&gd).unwrap();
            std::fs::write(gd.join(GROUP_RUNTIME), format!("{g}\n")).unwrap();
            std::fs::write(gd.join(GROUP_PERIOD), "1000000\n").unwrap();
            gd
        });
        let knobs = Knobs {
            sysctl_runtime: d.join("runtime"),
            sysctl_period: d.join("period"),
            group_dir,
        };
        Fake { dir, knobs }
    }

    impl Fake {
        fn journal(&self) -> PathBuf {
            self.dir.path().join("state/rt-journal.json")
        }
        fn values(&self) -> (i64, Option<i64>) {
            (
                self.knobs.read(Knob::Sysctl).unwrap(),
                self.knobs.read_group().unwrap().map(|g| g.runtime_us),
            )
        }
    }

    #[test]
    fn fake_guard_journals_sets_and_restores() {
        let f = fake(Some(950_000));
        let mut g = RtGuard::acquire_at(f.knobs.clone(), f.journal()).unwrap();
        let j = read_journal(&f.journal()).unwrap().unwrap();
        assert_eq!(j.sched_rt_runtime_us, 950_000);
        assert_eq!(j.root_group_rt_runtime_us, Some(950_000));
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
    fn fake_leftover_is_recovered() {
        let f = fake(Some(950_000));
        std::fs::create_dir_all(f.journal().parent().unwrap()).unwrap();
        let mut j = sample_journal();
        j.pid = i32::MAX;
        j.boot_id = boot_id();
        std::fs::write(f.journal(), j.to_json()).unwrap();
        f.knobs.write(Knob::RootGroup, 300_000).unwrap();
        f.knobs.write(Knob::Sysctl, 300_000).unwrap();
        let note = recover_one(&f.knobs, &f.journal()).unwrap().unwrap();
        assert!(
            note.starts_with(
                "restored sched_rt_runtime_us 950000 (was 300000), root cpu cgroup \
                 cpu.rt_runtime_us 950000 (was 300000) left by schedlab pid 2147483647 \
                 that did not exit cleanly"
            ),
            "{note}"
        );
        assert_eq!(f.values(), (950_000, Some(950_000)));
        assert!(!f.journal().exists());
        assert_eq!(recover_one(&f.knobs, &f.journal()).unwrap(), None);

        // acquire() recovers a leftover before journaling, so the modified
        // values are never taken for originals.
        std::fs::write(f.journal(), j.to_json()).unwrap();
        f.knobs.write(Knob::RootGroup, 400_000).unwrap();
        f.knobs.write(Knob::Sysctl, 400_000).unwrap();
        let g = RtGuard::acquire_at(f.knobs.clone(), f.journal()).unwrap();
        assert!(g.recovered().unwrap().contains("(was 400000)"));
        assert_eq!(g.original().runtime_us, 950_000);
        drop(g);

        // A journal from an earlier boot: nothing is written.
        j.boot_id = Some("an-earlier-boot".into());
        std::fs::write(f.journal(), j.to_json()).unwrap();
        f.knobs.write(Knob::Sysctl, 800_000).unwrap();
        let note = recover_one(&f.knobs, &f.journal()).unwrap().unwrap();
        assert!(note.contains("earlier boot"), "{note}");
        assert_eq!(f.values(), (800_000, Some(950_000)));
        assert!(!f.journal().exists());
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

    #[test]
    fn capability_on_this_machine() {
        let cap = capability();
        let text = cap.explain();
        assert!(text.contains("sched_rt_runtime_us"), "{text}");
        println!("{text}");
    }

    /// What `capability` (and so `schedlab env`) asks: where the journal
    /// would go, which must not create the journal directory.
    #[test]
    fn asking_where_the_journal_goes_creates_no_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let var_lib = tmp.path().join("var/lib");
        std::fs::create_dir_all(&var_lib).unwrap();
        let dir = var_lib.join("schedlab");
        let fallback = tmp.path().join("run/schedlab");
        let dirs = [dir.as_path(), fallback.as_path()];

        // Neither exists, the first one's parent is writable: it is chosen,
        // and neither is created.
        assert_eq!(journal_location_in(&dirs, false), dir.join(JOURNAL_NAME));
        assert!(!dir.exists(), "{} was created", dir.display());
        assert!(!fallback.exists(), "{} was created", fallback.display());
        assert!(!fallback.parent().unwrap().exists());

        // Where the first could not be made (no parent), the next is
        // named; neither is made.
        let no_parent = tmp.path().join("missing/schedlab");
        assert_eq!(
            journal_location_in(&[no_parent.as_path(), dir.as_path()], false),
            dir.join(JOURNAL_NAME)
        );
        assert!(!tmp.path().join("missing").exists());
        assert!(!dir.exists(), "{} was created", dir.display());

        // The writing path does create it (the check above can fail).
        assert_eq!(journal_location_in(&dirs, true), dir.join(JOURNAL_NAME));
        assert!(dir.is_dir());
        assert!(!fallback.exists());
    }
}
