//! procfs parsing: pure parsers over file contents, plus thin readers that
//! fetch the text and hand it to them.

use std::io;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// `/proc/PID/schedstat`: CPU time, time spent runnable but waiting for a
/// CPU, and the number of times the task was scheduled in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct SchedStat {
    /// `sum_exec_runtime`, nanoseconds on a CPU.
    pub run_ns: u64,
    /// `run_delay`, nanoseconds waiting on a run queue.
    pub wait_ns: u64,
    /// `pcount`, number of timeslices run on a CPU.
    pub timeslices: u64,
}

impl SchedStat {
    /// The counters accumulated since `earlier` (saturating, so a reading
    /// from another process never underflows).
    pub fn since(&self, earlier: &SchedStat) -> SchedStat {
        SchedStat {
            run_ns: self.run_ns.saturating_sub(earlier.run_ns),
            wait_ns: self.wait_ns.saturating_sub(earlier.wait_ns),
            timeslices: self.timeslices.saturating_sub(earlier.timeslices),
        }
    }
}

/// Parses `"<sum_exec_runtime ns> <run_delay ns> <pcount>\n"`.
///
/// The first three whitespace-separated fields must be unsigned integers;
/// fields after them (none today) are ignored so a future kernel that
/// appends one still parses.
pub fn parse_schedstat(text: &str) -> Option<SchedStat> {
    let mut fields = text.split_ascii_whitespace();
    let run_ns = fields.next()?.parse().ok()?;
    let wait_ns = fields.next()?.parse().ok()?;
    let timeslices = fields.next()?.parse().ok()?;
    Some(SchedStat {
        run_ns,
        wait_ns,
        timeslices,
    })
}

/// Reads and parses a schedstat file (`/proc/PID/schedstat` or
/// `/proc/PID/task/TID/schedstat`).
pub fn read_schedstat_at(path: &Path) -> io::Result<SchedStat> {
    let text = std::fs::read_to_string(path)?;
    parse_schedstat(&text).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("unexpected content in {}: {:?}", path.display(), text),
        )
    })
}

/// `/proc/PID/schedstat`. Still readable for a zombie (exited, not yet
/// reaped) child, which is how totals of a finished process are collected.
pub fn read_schedstat(pid: i32) -> io::Result<SchedStat> {
    read_schedstat_at(Path::new(&format!("/proc/{pid}/schedstat")))
}

/// `se.nr_migrations` of a `/proc/PID/sched` text: how many times the
/// scheduler moved the task (the process's main thread) to another CPU.
pub fn parse_nr_migrations(text: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        (key.trim() == "se.nr_migrations").then(|| value.trim().parse().ok())?
    })
}

/// `se.nr_migrations` of `/proc/PID/sched` (kernels with CONFIG_SCHED_DEBUG
/// or 5.13+, where the file is always there).
pub fn read_nr_migrations(pid: i32) -> io::Result<u64> {
    let path = format!("/proc/{pid}/sched");
    let text = std::fs::read_to_string(&path)?;
    parse_nr_migrations(&text).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("no se.nr_migrations in {path}"),
        )
    })
}

/// A procfs file opened once and read again whole, by offset, as often as
/// wanted: `/proc/PID/schedstat` and `/proc/PID/sched` are seq_files, which
/// make their text anew on a read from offset 0. A worker opens both before
/// its barrier so that its end-of-work readings cost no path walk: on the
/// 2-CPU VM the open of `/proc/PID/schedstat` took 20-30 µs, and a
/// `read_to_string` of `/proc/PID/sched` eight reads of growing size, all
/// while the worker still held the CPU the next FIFO worker waited for.
pub struct ProcFile {
    file: std::fs::File,
    path: String,
    /// Kept between readings, so a reading allocates nothing.
    buf: Vec<u8>,
}

impl ProcFile {
    /// Room for `/proc/PID/sched` (about 2 KB) in one read.
    const START_BYTES: usize = 8192;

    pub fn open(path: String) -> io::Result<ProcFile> {
        let file = std::fs::File::open(&path)?;
        Ok(ProcFile {
            file,
            path,
            buf: vec![0; Self::START_BYTES],
        })
    }

    /// The file's whole text now.
    pub fn text(&mut self) -> io::Result<&str> {
        whole_text(&self.file, &mut self.buf, &self.path)
    }

    /// Its text as a schedstat file's counters.
    pub fn schedstat(&mut self) -> io::Result<SchedStat> {
        let path = &self.path;
        let text = whole_text(&self.file, &mut self.buf, path)?;
        parse_schedstat(text).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("unexpected content in {path}: {text:?}"),
            )
        })
    }

    /// Its text's `se.nr_migrations` (a `/proc/PID/sched` file).
    pub fn nr_migrations(&mut self) -> io::Result<u64> {
        parse_nr_migrations(self.text()?).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("no se.nr_migrations in {}", self.path),
            )
        })
    }
}

/// `file`'s whole text read from offset 0 into `buf`, grown as needed.
fn whole_text<'b>(file: &std::fs::File, buf: &'b mut Vec<u8>, path: &str) -> io::Result<&'b str> {
    use std::os::unix::fs::FileExt;
    let mut len = 0;
    loop {
        if len == buf.len() {
            buf.resize(2 * len, 0);
        }
        match file.read_at(&mut buf[len..], len as u64) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    std::str::from_utf8(&buf[..len])
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, format!("{path} is not UTF-8")))
}

/// Parses a file holding one (possibly negative) integer, such as a sysctl
/// (`sched_rt_runtime_us` is -1 when RT throttling is disabled).
pub fn parse_i64_text(text: &str) -> Option<i64> {
    text.trim().parse().ok()
}

/// Reads a file holding one integer; `None` when missing, unreadable or not
/// an integer.
pub fn read_i64_file(path: &Path) -> Option<i64> {
    parse_i64_text(&std::fs::read_to_string(path).ok()?)
}

/// Reads a file holding one non-negative integer; `None` when missing,
/// unreadable, negative or not an integer.
pub fn read_u64_file(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Reads a file's trimmed text; `None` when missing or unreadable.
pub fn read_trimmed(path: &Path) -> Option<String> {
    Some(std::fs::read_to_string(path).ok()?.trim().to_string())
}

/// First field of `/proc/loadavg` (`"0.14 0.12 0.05 1/86 4575"`): the
/// one-minute load average.
/// The threads of this process: (thread id, name), from /proc/self/task.
pub fn own_threads() -> Vec<(i32, String)> {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    let mut out: Vec<(i32, String)> = dir
        .filter_map(|e| {
            let e = e.ok()?;
            let tid: i32 = e.file_name().to_str()?.parse().ok()?;
            Some((
                tid,
                read_trimmed(&e.path().join("comm")).unwrap_or_default(),
            ))
        })
        .collect();
    out.sort_unstable();
    out
}

/// The state letter of a `/proc/PID/stat` text (`R`, `S`, `D`, `Z`, …):
/// the field after the name, which may itself hold spaces and `)`.
pub fn parse_stat_state(text: &str) -> Option<char> {
    let (_, rest) = text.rsplit_once(')')?;
    rest.trim_start().chars().next()
}

/// A `/proc/PID/stat` text's parent pid (field 4), process group (field
/// 5) and start time (field 22, clock ticks after boot): with the pid, the
/// start time names one process for good (a recycled pid starts later).
pub fn parse_stat_parent_start(text: &str) -> Option<(i32, i32, u64)> {
    let (_, rest) = text.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some((
        fields.get(1)?.parse().ok()?,
        fields.get(2)?.parse().ok()?,
        fields.get(19)?.parse().ok()?,
    ))
}

/// What [`state_parent_start`] reads of a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lineage {
    pub state: char,
    pub ppid: i32,
    pub pgrp: i32,
    pub start_ticks: u64,
}

/// Process `pid`'s state letter, parent, process group and start time
/// (see [`parse_stat_parent_start`]); None once it is gone.
pub fn state_parent_start(pid: i32) -> Option<Lineage> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (ppid, pgrp, start_ticks) = parse_stat_parent_start(&text)?;
    Some(Lineage {
        state: parse_stat_state(&text)?,
        ppid,
        pgrp,
        start_ticks,
    })
}

/// The state letter of process `pid`, None when it is gone.
pub fn state(pid: i32) -> Option<char> {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|t| parse_stat_state(&t))
}

/// The name (`comm`) of process or thread `pid`.
pub fn comm(pid: i32) -> Option<String> {
    read_trimmed(Path::new(&format!("/proc/{pid}/comm")))
}

/// The longest command line [`command_line`] gives, in characters.
const COMMAND_LINE_CHARS: usize = 80;

/// A `/proc/PID/cmdline` text as one line: its arguments joined by spaces,
/// at most [`COMMAND_LINE_CHARS`] characters (`…` when cut); None when
/// empty (a kernel thread, a zombie).
pub fn parse_cmdline(bytes: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(bytes);
    let joined = text
        .split('\0')
        .filter(|a| !a.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    if joined.is_empty() {
        return None;
    }
    match joined.char_indices().nth(COMMAND_LINE_CHARS) {
        Some((cut, _)) => Some(format!("{}…", &joined[..cut])),
        None => Some(joined),
    }
}

/// What process `pid` runs, for messages: its command line, else its
/// name in brackets, else `?` (it is gone).
pub fn command_line(pid: i32) -> String {
    use std::io::Read;
    // A process in the middle of its exec reads as empty for a moment.
    for _ in 0..5 {
        let mut bytes = Vec::new();
        let read = std::fs::File::open(format!("/proc/{pid}/cmdline"))
            .and_then(|f| f.take(4096).read_to_end(&mut bytes));
        if let Some(line) = read.ok().and_then(|_| parse_cmdline(&bytes)) {
            return line;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    comm(pid)
        .map(|c| format!("[{c}]"))
        .unwrap_or_else(|| "?".into())
}

/// The `Tgid:` line of a `/proc/PID/status` text: the process a task
/// belongs to.
pub fn parse_status_tgid(text: &str) -> Option<i32> {
    text.lines()
        .find_map(|l| l.strip_prefix("Tgid:"))?
        .trim()
        .parse()
        .ok()
}

/// The process (thread group) task `tid` belongs to; None once it is gone.
pub fn tgid(tid: i32) -> Option<i32> {
    parse_status_tgid(&std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?)
}

pub fn parse_loadavg_1m(text: &str) -> Option<f64> {
    let v: f64 = text.split_ascii_whitespace().next()?.parse().ok()?;
    v.is_finite().then_some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parent_and_start_time_come_after_a_name_with_spaces_and_parens() {
        let text = "42 (a) b (c) S 7 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 98765 1000 10";
        assert_eq!(parse_stat_parent_start(text), Some((7, 42, 98765)));
        assert_eq!(parse_stat_parent_start("42 (x) S 7"), None);
        let me = state_parent_start(std::process::id() as i32).unwrap();
        assert_ne!(me.state, 'Z');
        assert!(me.start_ticks > 0);
    }

    #[test]
    fn a_command_line_is_one_bounded_line() {
        assert_eq!(
            parse_cmdline(b"sleep\x0030\x00").as_deref(),
            Some("sleep 30")
        );
        assert_eq!(parse_cmdline(b""), None);
        let long = parse_cmdline(&[b'x'; 200]).unwrap();
        assert_eq!(long.chars().count(), COMMAND_LINE_CHARS + 1);
        assert!(long.ends_with('…'));
        assert!(command_line(std::process::id() as i32).len() > 1);
    }

    #[test]
    fn stat_state_after_a_name_with_spaces_and_parens() {
        assert_eq!(
            parse_stat_state("42 (schedlab-w0) S 1 42 42 0 -1"),
            Some('S')
        );
        assert_eq!(parse_stat_state("7 (a) b) (c) R 1 7"), Some('R'));
        assert_eq!(parse_stat_state("7 (no end"), None);
        assert_eq!(parse_stat_state("7 (x)"), None);
        // This thread is running as it reads its own (the process's main
        // thread, /proc/self, sleeps while the tests run).
        let own = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
        assert_eq!(parse_stat_state(&own), Some('R'));
    }

    #[test]
    fn parses_the_tgid_of_a_status() {
        let status =
            "Name:\tsh\nUmask:\t0022\nState:\tR (running)\nTgid:\t4711\nNgid:\t0\nPid:\t4712\n";
        assert_eq!(parse_status_tgid(status), Some(4711));
        assert_eq!(parse_status_tgid("Name:\tsh\n"), None);
        assert_eq!(parse_status_tgid("Tgid:\tx\n"), None);
        assert_eq!(
            tgid(std::process::id() as i32),
            Some(std::process::id() as i32)
        );
    }

    #[test]
    fn parses_schedstat_line() {
        assert_eq!(
            parse_schedstat("123456789 4242 17\n"),
            Some(SchedStat {
                run_ns: 123_456_789,
                wait_ns: 4242,
                timeslices: 17
            })
        );
    }

    #[test]
    fn nr_migrations_is_read_from_its_line_only() {
        let text = "cat (3644, #threads: 1)\n---\nse.vruntime   :   65832.715456\n\
                    se.nr_migrations                             :                   17\n\
                    nr_switches  :  40\n";
        assert_eq!(parse_nr_migrations(text), Some(17));
        assert_eq!(parse_nr_migrations("nr_switches : 40\n"), None);
        assert_eq!(parse_nr_migrations("se.nr_migrations : x\n"), None);
        let own = read_nr_migrations(std::process::id() as i32);
        assert!(own.is_ok(), "{own:?}");
    }

    #[test]
    fn schedstat_tolerates_trailing_fields_but_not_garbage() {
        assert_eq!(parse_schedstat("1 2 3 4").map(|s| s.timeslices), Some(3));
        assert_eq!(parse_schedstat(""), None);
        assert_eq!(parse_schedstat("1 2\n"), None);
        assert_eq!(parse_schedstat("1 -2 3\n"), None);
        assert_eq!(parse_schedstat("a b c\n"), None);
    }

    #[test]
    fn reads_own_schedstat() {
        // Burn a little CPU so run time is certainly non-zero.
        let mut x = 0u64;
        for i in 0..1_000_000u64 {
            x = std::hint::black_box(x.wrapping_add(i * i));
        }
        std::hint::black_box(x);
        let s = read_schedstat(std::process::id() as i32).expect("read own schedstat");
        assert!(s.run_ns > 0, "{s:?}");
        assert!(s.timeslices > 0, "{s:?}");
    }

    /// Burns CPU until `read` gives a run time beyond `past_ns` (the kernel
    /// updates a running task's `sum_exec_runtime` at its ticks, not on
    /// the read); None if it does not within 2 s.
    fn burn_past(past_ns: u64, mut read: impl FnMut() -> SchedStat) -> Option<SchedStat> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        let mut x = 0u64;
        while std::time::Instant::now() < deadline {
            for i in 0..100_000u64 {
                x = std::hint::black_box(x.wrapping_add(i * i));
            }
            let s = read();
            if s.run_ns > past_ns {
                return Some(s);
            }
        }
        None
    }

    #[test]
    fn proc_file_reads_the_counters_anew_each_time() {
        // This test's own thread: the process's main thread only waits.
        let path = "/proc/thread-self/schedstat";
        let mut file = ProcFile::open(path.into()).unwrap();
        let first = file.schedstat().unwrap();
        let fresh = burn_past(first.run_ns, || read_schedstat_at(Path::new(path)).unwrap())
            .expect("a fresh read sees the run time grow");
        // A stale reading through the open file would never get past it.
        let second = burn_past(fresh.run_ns, || file.schedstat().unwrap())
            .expect("the open file's reading follows the fresh one");
        assert!(first.timeslices <= second.timeslices);

        let mut sched = ProcFile::open("/proc/thread-self/sched".into()).unwrap();
        let before = sched.nr_migrations().unwrap();
        let text = std::fs::read_to_string("/proc/thread-self/sched").unwrap();
        let between = parse_nr_migrations(&text).unwrap();
        let after = sched.nr_migrations().unwrap();
        assert!(
            before <= between && between <= after,
            "{before} {between} {after}"
        );
    }

    /// Why a worker calls getrusage just before reading its schedstat: the
    /// file shows a running task's CPU time as of its last tick or switch,
    /// and getrusage brings it up to date.
    #[test]
    fn getrusage_brings_the_running_task_s_schedstat_up_to_date() {
        let mut file = ProcFile::open("/proc/thread-self/schedstat".into()).unwrap();
        let mut refreshed = 0;
        for _ in 0..5 {
            let mut x = 0u64;
            for i in 0..200_000u64 {
                x = std::hint::black_box(x.wrapping_add(i * i));
            }
            std::hint::black_box(x);
            let before = file.schedstat().unwrap();
            crate::sys::proc::self_usage();
            let after = file.schedstat().unwrap();
            // Without the refresh both readings are equal, unless a tick
            // fell just between them.
            if after.run_ns > before.run_ns {
                refreshed += 1;
            }
        }
        assert!(refreshed >= 4, "refreshed in {refreshed} of 5 tries");
    }

    #[test]
    fn proc_file_reads_a_text_longer_than_its_buffer_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("long");
        let long = "x".repeat(3 * ProcFile::START_BYTES + 5);
        std::fs::write(&path, &long).unwrap();
        let mut file = ProcFile::open(path.display().to_string()).unwrap();
        assert_eq!(file.text().unwrap(), long);
        std::fs::write(&path, "1 2 3\n").unwrap();
        assert_eq!(
            file.schedstat().unwrap(),
            SchedStat {
                run_ns: 1,
                wait_ns: 2,
                timeslices: 3
            }
        );
        let err = file.nr_migrations().unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert!(err.to_string().contains("long"), "{err}");
    }

    #[test]
    fn schedstat_of_missing_pid_is_not_found() {
        // PIDs are capped by pid_max (at most 2^22), so this one never exists.
        let err = read_schedstat(i32::MAX).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn invalid_schedstat_content_is_invalid_data() {
        let dir = std::env::temp_dir().join(format!("schedlab-procfs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("schedstat");
        std::fs::write(&path, "not a schedstat\n").unwrap();
        let err = read_schedstat_at(&path).unwrap_err();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
    }

    #[test]
    fn integer_files() {
        assert_eq!(parse_i64_text("950000\n"), Some(950_000));
        assert_eq!(parse_i64_text(" -1 \n"), Some(-1));
        assert_eq!(parse_i64_text("max\n"), None);
        assert_eq!(parse_i64_text(""), None);
        assert_eq!(
            read_i64_file(Path::new("/proc/sys/kernel/sched_rt_period_us")).map(|v| v > 0),
            Some(true)
        );
        assert_eq!(read_i64_file(Path::new("/nonexistent/schedlab")), None);
        assert_eq!(read_u64_file(Path::new("/nonexistent/schedlab")), None);
    }

    #[test]
    fn loadavg() {
        assert_eq!(parse_loadavg_1m("0.14 0.12 0.05 1/86 4575\n"), Some(0.14));
        assert_eq!(parse_loadavg_1m(""), None);
        assert_eq!(parse_loadavg_1m("nan 1 1"), None);
    }
}
