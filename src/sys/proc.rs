//! Process control for the launcher: pipes, signal masks, waiting with a
//! timeout, reaping with resource usage, and the monotonic clock.
//!
//! The parent blocks SIGCHLD/SIGINT/SIGTERM/SIGHUP for the whole campaign and
//! takes them synchronously with `sigtimedwait`, so it sleeps in the kernel
//! while workers run and never races a signal handler. Workers unblock them
//! in the child before `exec`.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// Resource usage of a reaped child (`struct rusage` from `wait4`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Usage {
    pub utime_us: u64,
    pub stime_us: u64,
    pub nvcsw: u64,
    pub nivcsw: u64,
    pub minflt: u64,
    pub majflt: u64,
    pub maxrss_kb: u64,
    /// Filesystem input and output operations in 512-byte blocks
    /// (`ru_inblock`, `ru_oublock`: the bytes read from storage, and the
    /// page-cache bytes dirtied less those truncated before writeback,
    /// over 512). None on a kernel without per-task I/O accounting
    /// ([`io_accounted`]), where the kernel gives 0 for both, and where
    /// the kernel's count wrapped ([`block_count`]).
    #[serde(default)]
    pub inblock: Option<u64>,
    #[serde(default)]
    pub oublock: Option<u64>,
}

/// Whether this kernel keeps per-task I/O accounting
/// (`CONFIG_TASK_IO_ACCOUNTING`, which `/proc/PID/io` exists with): without
/// it rusage's block counts and taskstats' storage bytes are always 0.
/// Looked up once per process.
pub fn io_accounted() -> bool {
    static ACCOUNTED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ACCOUNTED.get_or_init(|| std::path::Path::new("/proc/self/io").exists())
}

/// How a child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Code(i32),
    Signal(i32),
}

impl Exit {
    pub fn success(self) -> bool {
        self == Exit::Code(0)
    }

    pub fn describe(self) -> String {
        match self {
            Exit::Code(c) => format!("exit code {c}"),
            Exit::Signal(s) => format!("killed by signal {s} ({})", signal_name(s)),
        }
    }
}

pub fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGTERM => "SIGTERM",
        libc::SIGXCPU => "SIGXCPU",
        _ => "signal",
    }
}

/// The descriptor number a worker's start barrier (the read end of a pipe)
/// is moved to before exec.
pub const BARRIER_FD: i32 = 3;
/// The descriptor number of the write end of the pipe through which a
/// worker hands its result to the parent.
pub const RESULT_FD: i32 = 4;
/// The descriptor number of the run's release-time file (an anonymous file
/// in memory the parent writes the barrier's release time to).
pub const RELEASE_FD: i32 = 5;
/// The descriptor number of the read end of the pipe a worker that parks
/// once measured waits on: end of file (the parent closed the write end,
/// or died) means it may exit.
pub const LEAVE_FD: i32 = 6;
/// The highest of the numbers above: a workload's channels lie above it.
pub const LAST_FIXED_FD: i32 = LEAVE_FD;

static BARRIER_TAKEN: AtomicBool = AtomicBool::new(false);
static RESULT_TAKEN: AtomicBool = AtomicBool::new(false);
static RELEASE_TAKEN: AtomicBool = AtomicBool::new(false);
static LEAVE_TAKEN: AtomicBool = AtomicBool::new(false);

/// Own `fd`, one of the fixed numbers the parent moved a descriptor to
/// before exec, guarded by `taken`: once only, and only if it is open.
fn take_fixed(fd: i32, taken: &AtomicBool) -> Option<std::fs::File> {
    if taken.swap(true, Ordering::SeqCst) {
        return None;
    }
    // SAFETY: F_GETFD only reads the descriptor's flags.
    if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
        return None;
    }
    // SAFETY: the descriptor is open (checked above); the parent dup2'ed it
    // to this number before exec (launch/spawn.rs) and nothing in this
    // process opened or owns that number before; the flag above makes this
    // the only owner.
    Some(unsafe { std::fs::File::from_raw_fd(fd) })
}

/// In a worker: the start barrier the parent moved to `BARRIER_FD` before
/// exec, owned from here on. Taken once; `None` after that (or if it is not
/// open), so that no two owners of the descriptor can exist.
pub fn take_barrier() -> Option<std::fs::File> {
    take_fixed(BARRIER_FD, &BARRIER_TAKEN)
}

/// In a worker: the write end of its result pipe (`RESULT_FD`), once.
pub fn take_result_pipe() -> Option<std::fs::File> {
    take_fixed(RESULT_FD, &RESULT_TAKEN)
}

/// In a worker: the run's release-time file (`RELEASE_FD`), once.
pub fn take_release() -> Option<std::fs::File> {
    take_fixed(RELEASE_FD, &RELEASE_TAKEN)
}

/// In a worker that parks once measured: the read end of the leave pipe
/// (`LEAVE_FD`), once.
pub fn take_leave() -> Option<std::fs::File> {
    take_fixed(LEAVE_FD, &LEAVE_TAKEN)
}

/// Names the calling thread (`comm`, as /proc, ps and kernel traces show
/// it); the kernel keeps the first 15 bytes. A name with a NUL byte is
/// refused with `InvalidInput`.
pub fn set_thread_name(name: &str) -> io::Result<()> {
    let c =
        std::ffi::CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: PR_SET_NAME reads a NUL-terminated string (the kernel copies at
    // most 16 bytes) from a pointer valid for the duration of the call.
    let rc = unsafe { libc::prctl(libc::PR_SET_NAME, c.as_ptr() as libc::c_ulong, 0, 0, 0) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// CLOCK_MONOTONIC in nanoseconds: the one clock parent and workers share.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is valid and writable; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A pipe with both ends close-on-exec: (read, write).
pub fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0i32; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 succeeded, so both are fresh descriptors we now own.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// A set of no signals (nothing is ever pending in it).
pub fn empty_signal_set() -> libc::sigset_t {
    // SAFETY: sigemptyset initialises a local sigset_t.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        set
    }
}

/// The signals the launcher takes synchronously.
pub fn control_signals() -> libc::sigset_t {
    // SAFETY: sigemptyset/sigaddset initialise and fill a local sigset_t.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in [libc::SIGCHLD, libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            libc::sigaddset(&mut set, s);
        }
        set
    }
}

/// Bit `1 << sig` for each of SIGINT, SIGTERM and SIGHUP whose disposition
/// was "ignore" when [`block_control_signals`] ran: inherited from whoever
/// started schedlab (a background job of a non-interactive shell ignores
/// SIGINT, `nohup` ignores SIGHUP).
static INHERITED_IGNORED: AtomicU64 = AtomicU64::new(0);

/// Block the control signals (SIGCHLD, SIGINT, SIGTERM, SIGHUP) in the
/// calling thread, as the first thing `run` does, and note which of them
/// were inherited as ignored.
///
/// Blocked, a signal is neither lost nor fatal: it stays pending until
/// [`wait_signal`] takes it, however early it came. On Linux a blocked signal
/// is queued even when its disposition is "ignore", so `kill -INT PID` stops
/// a campaign started in the background too: whoever sends a signal to a
/// process by its pid means it. What an ignored disposition is for is the
/// signals the kernel sends a whole process group or session: Ctrl-C typed
/// for the foreground job, or the terminal hanging up under `nohup`. Those
/// (si_code SI_KERNEL) are dropped for signals inherited as ignored, as the
/// one who started schedlab asked.
pub fn block_control_signals() -> io::Result<libc::sigset_t> {
    let mut ignored = 0u64;
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: a zeroed sigaction is valid; a null new action only reads
        // the current one.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: as above: `old` is valid, writable storage.
        if unsafe { libc::sigaction(sig, std::ptr::null(), &mut old) } == 0
            && old.sa_sigaction == libc::SIG_IGN
        {
            ignored |= 1 << sig;
        }
    }
    INHERITED_IGNORED.fetch_or(ignored, Ordering::Relaxed);
    let set = control_signals();
    block(&set)?;
    Ok(set)
}

/// Whether a signal taken by [`wait_signal`] is dropped: one the kernel
/// generated (a terminal's Ctrl-C or hang-up: si_code > 0) for a signal
/// inherited as ignored. Sent by a process (kill, sigqueue: si_code <= 0),
/// it always counts.
fn dropped(sig: i32, si_code: i32, inherited_ignored: u64) -> bool {
    sig != libc::SIGCHLD
        && (0..64).contains(&sig)
        && inherited_ignored & (1 << sig) != 0
        && si_code > 0
}

/// Block `set` in the calling thread (and so in threads it spawns later).
pub fn block(set: &libc::sigset_t) -> io::Result<()> {
    // SAFETY: valid sigset pointer; old mask not requested.
    let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, set, std::ptr::null_mut()) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(rc))
    }
}

/// Unblock every signal. Async-signal-safe: used in the child before exec.
pub fn unblock_all_raw() -> Result<(), i32> {
    // SAFETY: local sigset initialised by sigemptyset; sigprocmask is
    // async-signal-safe.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        if libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut()) != 0 {
            return Err(*libc::__errno_location());
        }
    }
    Ok(())
}

/// Wait up to `timeout` for one of the blocked signals in `set`.
/// Returns the signal number, or None on timeout.
/// Signals dropped by [`dropped`] are not returned.
pub fn wait_signal(set: &libc::sigset_t, timeout: Duration) -> Option<i32> {
    let start = std::time::Instant::now();
    loop {
        let left = timeout.saturating_sub(start.elapsed());
        let ts = libc::timespec {
            tv_sec: left.as_secs() as libc::time_t,
            tv_nsec: left.subsec_nanos() as libc::c_long,
        };
        // SAFETY: a zeroed siginfo is valid; sigtimedwait fills it.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: valid sigset, siginfo and timespec pointers.
        let sig = unsafe { libc::sigtimedwait(set, &mut info, &ts) };
        if sig > 0 {
            if dropped(sig, info.si_code, INHERITED_IGNORED.load(Ordering::Relaxed)) {
                continue;
            }
            return Some(sig);
        }
        match io::Error::last_os_error().raw_os_error() {
            Some(libc::EINTR) => continue,
            _ => return None, // EAGAIN: timed out
        }
    }
}

/// The control signals as a descriptor (`signalfd`), readable while one is
/// pending, so that a wait can watch them beside other descriptors. The
/// signals must stay blocked (they are, for the whole campaign); taking one
/// here or from [`wait_signal`] is the same.
#[derive(Debug)]
pub struct SignalFd {
    fd: OwnedFd,
}

impl SignalFd {
    pub fn new(set: &libc::sigset_t) -> io::Result<SignalFd> {
        // SAFETY: -1 asks for a new descriptor; `set` is a valid sigset.
        let fd = unsafe { libc::signalfd(-1, set, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(SignalFd {
            // SAFETY: signalfd succeeded: a fresh descriptor we own.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    /// A pending signal of the set, without waiting; None when there is
    /// none. Signals dropped by [`dropped`] are passed over, as by
    /// [`wait_signal`].
    pub fn take(&self) -> Option<i32> {
        loop {
            // SAFETY: a zeroed signalfd_siginfo is valid.
            let mut info: libc::signalfd_siginfo = unsafe { std::mem::zeroed() };
            let size = std::mem::size_of::<libc::signalfd_siginfo>();
            // SAFETY: reads at most `size` bytes into `info`, which has them.
            let n = unsafe {
                libc::read(
                    self.fd.as_raw_fd(),
                    (&mut info as *mut libc::signalfd_siginfo).cast(),
                    size,
                )
            };
            if n != size as isize {
                if n < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                    continue;
                }
                return None; // EAGAIN: none pending
            }
            let sig = info.ssi_signo as i32;
            if dropped(
                sig,
                info.ssi_code,
                INHERITED_IGNORED.load(Ordering::Relaxed),
            ) {
                continue;
            }
            return Some(sig);
        }
    }
}

impl AsFd for SignalFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// Sleep up to `d`, returning early with a control signal other than
/// SIGCHLD (Ctrl-C, TERM, HUP) if one arrives.
pub fn pending_stop_signal_within(set: &libc::sigset_t, d: Duration) -> Option<i32> {
    let end = std::time::Instant::now() + d;
    loop {
        let now = std::time::Instant::now();
        if now >= end {
            return None;
        }
        match wait_signal(set, end - now) {
            Some(libc::SIGCHLD) => continue,
            Some(sig) => return Some(sig),
            None => return None,
        }
    }
}

/// A pending control signal other than SIGCHLD (Ctrl-C, TERM, HUP), taken
/// without waiting; SIGCHLDs found on the way are discarded.
pub fn pending_stop_signal(set: &libc::sigset_t) -> Option<i32> {
    while let Some(sig) = wait_signal(set, Duration::ZERO) {
        if sig != libc::SIGCHLD {
            return Some(sig);
        }
    }
    None
}

/// A child that has exited but is not reaped yet (WNOWAIT), so that its
/// /proc/PID files can still be read. None if no child has exited.
pub fn exited_child() -> io::Result<Option<i32>> {
    // SAFETY: zeroed siginfo is valid; waitid fills it.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: `info` is valid, writable storage for waitid to fill.
    let rc = unsafe {
        libc::waitid(
            libc::P_ALL,
            0,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    if rc != 0 {
        let err = io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::ECHILD) {
            return Ok(None);
        }
        return Err(err);
    }
    // SAFETY: waitid succeeded; si_pid is valid for SIGCHLD siginfo (0 if none).
    let pid = unsafe { info.si_pid() };
    Ok(if pid == 0 { None } else { Some(pid) })
}

/// A block count of rusage: None without I/O accounting, and where the
/// kernel's count wrapped (`ru_oublock` is each task's written bytes less
/// its cancelled ones, subtracted unsigned: a task that truncated more of
/// others' dirty pages than it dirtied counts about 2^55 blocks, 16 EiB).
fn block_count(blocks: libc::c_long) -> Option<u64> {
    const WRAPPED: u64 = 1 << 54;
    u64::try_from(blocks)
        .ok()
        .filter(|&b| io_accounted() && b < WRAPPED)
}

fn usage_from(ru: &libc::rusage) -> Usage {
    let tv_us = |tv: libc::timeval| tv.tv_sec as u64 * 1_000_000 + tv.tv_usec as u64;
    Usage {
        utime_us: tv_us(ru.ru_utime),
        stime_us: tv_us(ru.ru_stime),
        nvcsw: ru.ru_nvcsw as u64,
        nivcsw: ru.ru_nivcsw as u64,
        minflt: ru.ru_minflt as u64,
        majflt: ru.ru_majflt as u64,
        maxrss_kb: ru.ru_maxrss as u64,
        inblock: block_count(ru.ru_inblock),
        oublock: block_count(ru.ru_oublock),
    }
}

/// Resource usage of the calling process so far (`getrusage(RUSAGE_SELF)`).
pub fn self_usage() -> Usage {
    // SAFETY: zeroed rusage is valid; getrusage fills it and cannot fail for
    // RUSAGE_SELF with a valid pointer.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is valid, writable storage for getrusage to fill.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    usage_from(&ru)
}

impl Usage {
    /// What happened between `earlier` and `self` (max RSS is kept as is:
    /// it is a high-water mark, not a counter).
    pub fn since(&self, earlier: &Usage) -> Usage {
        let delta = |now: Option<u64>, then: Option<u64>| Some(now?.saturating_sub(then?));
        Usage {
            utime_us: self.utime_us.saturating_sub(earlier.utime_us),
            stime_us: self.stime_us.saturating_sub(earlier.stime_us),
            nvcsw: self.nvcsw.saturating_sub(earlier.nvcsw),
            nivcsw: self.nivcsw.saturating_sub(earlier.nivcsw),
            minflt: self.minflt.saturating_sub(earlier.minflt),
            majflt: self.majflt.saturating_sub(earlier.majflt),
            maxrss_kb: self.maxrss_kb,
            inblock: delta(self.inblock, earlier.inblock),
            oublock: delta(self.oublock, earlier.oublock),
        }
    }
}

/// Reap `pid` with `wait4`, returning how it ended and its resource usage.
pub fn reap(pid: i32) -> io::Result<(Exit, Usage)> {
    wait_for(pid, 0)?.ok_or_else(|| io::Error::other(format!("wait4 on pid {pid} returned early")))
}

/// Reap `pid` if it has exited (`wait4` with WNOHANG); None while it runs.
pub fn try_reap(pid: i32) -> io::Result<Option<(Exit, Usage)>> {
    wait_for(pid, libc::WNOHANG)
}

/// `wait4(pid, flags)`, retried on EINTR; None when WNOHANG found it running.
fn wait_for(pid: i32, flags: i32) -> io::Result<Option<(Exit, Usage)>> {
    let mut status = 0;
    // SAFETY: zeroed rusage is valid; wait4 fills it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: `status` and `ru` are valid, writable storage for wait4.
        let rc = unsafe { libc::wait4(pid, &mut status, flags, &mut ru) };
        if rc == 0 {
            return Ok(None);
        }
        if rc == pid {
            break;
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EINTR) {
            return Err(err);
        }
    }
    let exit = if libc::WIFEXITED(status) {
        Exit::Code(libc::WEXITSTATUS(status))
    } else {
        Exit::Signal(libc::WTERMSIG(status))
    };
    Ok(Some((exit, usage_from(&ru))))
}

/// Send `sig` to `pid`; a process that is already gone is not an error.
pub fn kill(pid: i32, sig: i32) {
    // SAFETY: kill has no memory arguments.
    unsafe { libc::kill(pid, sig) };
}

/// Send `sig` to every process of the process group `pgid`. Refuses
/// (`InvalidInput`) a `pgid` below 2: `kill(0)` and `kill(-1)` would reach
/// schedlab's own group or every process.
pub fn kill_group(pgid: i32, sig: i32) -> io::Result<()> {
    if pgid < 2 {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    // SAFETY: kill has no memory arguments.
    if unsafe { libc::kill(-pgid, sig) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Whether the child `pid` has exited, without reaping it: until it is
/// reaped its pid, and so the id of the process group it leads, stays
/// reserved.
pub fn child_exited(pid: i32) -> io::Result<bool> {
    // SAFETY: zeroed siginfo is valid; waitid fills it.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: `info` is valid, writable storage for waitid to fill.
    let rc = unsafe {
        libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: waitid succeeded; si_pid is 0 when the child has not exited.
    Ok(unsafe { info.si_pid() } != 0)
}

/// Set the calling thread's timer slack (`PR_SET_TIMERSLACK`; threads and
/// processes it starts inherit it). The kernel gives RT and DEADLINE tasks
/// none whatever this says.
pub fn set_timer_slack_ns(ns: u64) -> io::Result<()> {
    // SAFETY: prctl with integer arguments only.
    let rc = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong, 0, 0, 0) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Ask the kernel to SIGKILL the calling process when its parent dies, so no
/// worker outlives a schedlab that was killed. Async-signal-safe.
pub fn die_with_parent_raw() -> Result<(), i32> {
    // SAFETY: prctl with integer arguments only.
    let rc = unsafe {
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        // SAFETY: reading errno of this thread.
        Err(unsafe { *libc::__errno_location() })
    }
}

/// Put the calling process in a process group of its own, so a Ctrl-C typed
/// at the terminal reaches schedlab (which stops the run cleanly) and not the
/// workers directly. Async-signal-safe.
pub fn own_process_group_raw() -> Result<(), i32> {
    // SAFETY: setpgid with integer arguments only.
    if unsafe { libc::setpgid(0, 0) } == 0 {
        Ok(())
    } else {
        // SAFETY: reading errno of this thread.
        Err(unsafe { *libc::__errno_location() })
    }
}

/// `setsid()`: a session and process group of the caller's own (its pid),
/// and no controlling terminal: opening `/dev/tty` fails, so nothing it
/// runs can type into the terminal of the session it left (TIOCSTI).
/// Fails with EPERM for a process group leader. Async-signal-safe.
pub fn own_session_raw() -> Result<(), i32> {
    // SAFETY: setsid takes no arguments.
    if unsafe { libc::setsid() } >= 0 {
        Ok(())
    } else {
        // SAFETY: reading errno of this thread.
        Err(unsafe { *libc::__errno_location() })
    }
}

/// `dup2(fd, target)`; the copy is not close-on-exec (also when `fd` is
/// `target` already, which dup2 leaves as it is). Async-signal-safe.
pub fn dup2_raw(fd: i32, target: i32) -> Result<(), i32> {
    if fd == target {
        return crate::sys::fds::keep_across_exec_raw(fd);
    }
    // SAFETY: dup2 with integer arguments only.
    if unsafe { libc::dup2(fd, target) } == target {
        Ok(())
    } else {
        // SAFETY: reading errno of this thread.
        Err(unsafe { *libc::__errno_location() })
    }
}

/// The effective user id of this process.
pub fn euid() -> u32 {
    // SAFETY: geteuid has no arguments and cannot fail.
    unsafe { libc::geteuid() }
}

/// Runs `f` when the process exits through `exit` or a return from `main`
/// (not on `_exit` or a fatal signal), after whatever ran before it: used by
/// the tests to print what did not run below the test summary.
pub fn at_exit(f: extern "C" fn()) -> io::Result<()> {
    // SAFETY: atexit only stores the function pointer, which stays valid for
    // the whole life of the program.
    if unsafe { libc::atexit(f) } == 0 {
        Ok(())
    } else {
        Err(io::Error::other("atexit: no room for another handler"))
    }
}

/// Whether standard error is a terminal.
pub fn stderr_is_tty() -> bool {
    // SAFETY: isatty has no memory arguments.
    unsafe { libc::isatty(2) == 1 }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A block count the kernel wrapped (more cancelled than written) is
    /// not given, never 2^55 blocks; a negative one neither.
    #[test]
    fn a_wrapped_block_count_is_not_given() {
        let wrapped = ((u64::MAX - 4096) >> 9) as libc::c_long;
        assert_eq!(block_count(wrapped), None);
        assert_eq!(block_count(-1), None);
        let expect = io_accounted().then_some(16_384);
        assert_eq!(block_count(16_384), expect);
    }

    #[test]
    fn set_thread_name_is_what_the_kernel_reports() {
        std::thread::spawn(|| {
            set_thread_name("schedlab-w12345678").unwrap();
            let comm = std::fs::read_to_string("/proc/thread-self/comm").unwrap();
            assert_eq!(comm.trim_end(), "schedlab-w12345");
            assert!(set_thread_name("a\0b").is_err());
        })
        .join()
        .unwrap();
    }

    #[test]
    fn monotonic_clock_advances() {
        let a = monotonic_ns();
        std::thread::sleep(Duration::from_millis(2));
        assert!(monotonic_ns() >= a + 2_000_000);
    }

    #[test]
    fn only_terminal_signals_inherited_as_ignored_are_dropped() {
        let int = 1u64 << libc::SIGINT;
        const SI_KERNEL: i32 = 0x80;
        // kill(2) (SI_USER = 0) and sigqueue (SI_QUEUE < 0) always count.
        assert!(!dropped(libc::SIGINT, libc::SI_USER, int));
        assert!(!dropped(libc::SIGINT, libc::SI_QUEUE, int));
        // Ctrl-C at the terminal, for a job that inherited SIGINT ignored.
        assert!(dropped(libc::SIGINT, SI_KERNEL, int));
        // Not inherited as ignored: the terminal's Ctrl-C stops the campaign.
        assert!(!dropped(libc::SIGINT, SI_KERNEL, 0));
        assert!(!dropped(libc::SIGHUP, SI_KERNEL, int));
    }

    #[test]
    fn a_signalfd_takes_a_blocked_pending_signal() {
        // SIGCHLD: harmless if it stayed pending. Blocked in this thread
        // only; a signal sent to this thread stays with it.
        // SAFETY: a zeroed sigset_t is valid storage for sigemptyset.
        let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: a local sigset initialised by sigemptyset.
        unsafe {
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGCHLD);
        }
        block(&set).unwrap();
        let sfd = SignalFd::new(&set).unwrap();
        assert_eq!(sfd.take(), None);
        // SAFETY: tgkill with integers only, to this very thread.
        unsafe {
            libc::syscall(
                libc::SYS_tgkill,
                std::process::id() as libc::c_long,
                crate::sys::sched::gettid() as libc::c_long,
                libc::SIGCHLD as libc::c_long,
            )
        };
        assert_eq!(sfd.take(), Some(libc::SIGCHLD));
        assert_eq!(sfd.take(), None);
    }

    #[test]
    fn kill_group_refuses_what_would_reach_beyond_one_group() {
        for pgid in [-5, 0, 1] {
            let e = kill_group(pgid, 0).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{pgid}");
        }
    }

    #[test]
    fn kill_group_reaches_what_a_child_started_and_child_exited_does_not_reap() {
        use std::io::BufRead;
        // A wrapper in a process group of its own that forks a sleep.
        let mut cmd = std::process::Command::new("sh");
        cmd.args(["-c", "sleep 30 & echo $!; wait"])
            .stdout(std::process::Stdio::piped());
        crate::sys::child::configure(
            &mut cmd,
            crate::sys::child::ChildSetup {
                own_process_group: true,
                ..Default::default()
            },
        );
        // Reaped below by `reap`, as schedlab reaps its children.
        let (pid, stdout) = cmd
            .spawn()
            .map(|mut c| (c.id() as i32, c.stdout.take().unwrap()))
            .unwrap();
        let mut first = String::new();
        std::io::BufReader::new(stdout)
            .read_line(&mut first)
            .unwrap();
        let forked: i32 = first.trim().parse().unwrap();
        assert!(!child_exited(pid).unwrap());
        kill_group(pid, libc::SIGKILL).unwrap();
        let gone = |p: i32| {
            // Gone, or a zombie its new parent has not reaped yet.
            std::fs::read_to_string(format!("/proc/{p}/stat"))
                .map(|s| s.rsplit_once(") ").is_some_and(|(_, r)| r.starts_with('Z')))
                .unwrap_or(true)
        };
        let until = std::time::Instant::now() + Duration::from_secs(5);
        while !(child_exited(pid).unwrap() && gone(forked)) {
            assert!(
                std::time::Instant::now() < until,
                "the group survived SIGKILL"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        // Still there to reap: child_exited left it.
        assert!(child_exited(pid).unwrap());
        assert_eq!(reap(pid).unwrap().0, Exit::Signal(libc::SIGKILL));
    }

    #[test]
    fn exit_descriptions() {
        assert!(Exit::Code(0).success());
        assert_eq!(Exit::Signal(9).describe(), "killed by signal 9 (SIGKILL)");
        assert_eq!(Exit::Code(3).describe(), "exit code 3");
    }
}
