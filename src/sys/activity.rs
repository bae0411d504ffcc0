//! What the whole machine is doing, for telling a run's own load from other
//! programs': the runnable tasks of every process (`/proc/PID/task/TID/stat`)
//! and each CPU's time counters (`/proc/stat`). Pure parsers over file
//! contents, plus thin readers.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use crate::sys::procstat::read_stat_at;

/// Runnable tasks (threads in state 'R') of every process under `proc_root`
/// (normally `/proc`) except the processes in `exclude` (thread-group ids:
/// all their threads are left out). Kernel threads count. None when
/// `proc_root` cannot be listed; a process or thread that vanishes while it
/// is read is skipped.
pub fn count_runnable_tasks_in(proc_root: &Path, exclude: &HashSet<i32>) -> Option<u32> {
    let mut n = 0;
    for entry in std::fs::read_dir(proc_root).ok()?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        if exclude.contains(&pid) {
            continue;
        }
        let Ok(tasks) = std::fs::read_dir(entry.path().join("task")) else {
            continue;
        };
        for task in tasks.flatten() {
            let state = read_stat_at(&task.path().join("stat")).map(|s| s.state);
            if state == Some('R') {
                n += 1;
            }
        }
    }
    Some(n)
}

/// Runnable tasks on the machine outside the processes in `exclude`.
pub fn count_runnable_tasks(exclude: &HashSet<i32>) -> Option<u32> {
    count_runnable_tasks_in(Path::new("/proc"), exclude)
}

/// One CPU's time counters from `/proc/stat`, in clock ticks (USER_HZ).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuTicks {
    /// user + nice + system + irq + softirq (guest time is inside user and
    /// nice already).
    pub busy: u64,
    /// idle + iowait.
    pub idle: u64,
    /// Time a hypervisor ran something else while this virtual CPU wanted
    /// to run.
    pub steal: u64,
}

impl CpuTicks {
    /// All the time the CPU existed.
    pub fn total(&self) -> u64 {
        self.busy + self.idle + self.steal
    }

    /// The counters accumulated since `earlier` (saturating: a CPU taken
    /// offline and back may restart its counters).
    pub fn since(&self, earlier: &CpuTicks) -> CpuTicks {
        CpuTicks {
            busy: self.busy.saturating_sub(earlier.busy),
            idle: self.idle.saturating_sub(earlier.idle),
            steal: self.steal.saturating_sub(earlier.steal),
        }
    }

    fn add(&self, other: &CpuTicks) -> CpuTicks {
        CpuTicks {
            busy: self.busy + other.busy,
            idle: self.idle + other.idle,
            steal: self.steal + other.steal,
        }
    }
}

/// The per-CPU lines of `/proc/stat` (`cpuN user nice system idle iowait
/// irq softirq steal guest guest_nice`), by CPU number; the aggregate `cpu`
/// line and other lines are skipped. Fields missing on old kernels (iowait
/// and after) count as 0; a line whose fields are not numbers is skipped.
pub fn parse_proc_stat_cpus(text: &str) -> BTreeMap<usize, CpuTicks> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let mut fields = line.split_ascii_whitespace();
        let Some(cpu) = fields
            .next()
            .and_then(|f| f.strip_prefix("cpu"))
            .and_then(|n| n.parse::<usize>().ok())
        else {
            continue;
        };
        let Ok(v) = fields
            .map(str::parse::<u64>)
            .collect::<Result<Vec<u64>, _>>()
        else {
            continue;
        };
        if v.len() < 4 {
            continue;
        }
        let at = |i: usize| v.get(i).copied().unwrap_or(0);
        out.insert(
            cpu,
            CpuTicks {
                busy: at(0) + at(1) + at(2) + at(5) + at(6),
                idle: at(3) + at(4),
                steal: at(7),
            },
        );
    }
    out
}

/// The per-CPU counters now; None when `/proc/stat` cannot be read.
pub fn read_cpu_ticks() -> Option<BTreeMap<usize, CpuTicks>> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    Some(parse_proc_stat_cpus(&text))
}

/// What `cpus` accumulated between two readings, summed; None when a CPU is
/// missing from either.
pub fn ticks_between(
    start: &BTreeMap<usize, CpuTicks>,
    end: &BTreeMap<usize, CpuTicks>,
    cpus: &[usize],
) -> Option<CpuTicks> {
    cpus.iter().try_fold(CpuTicks::default(), |sum, c| {
        Some(sum.add(&end.get(c)?.since(start.get(c)?)))
    })
}

/// Nanoseconds per clock tick of `/proc/stat` (USER_HZ, nearly always 100).
pub fn tick_ns() -> u64 {
    // SAFETY: sysconf only reads a configuration value.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 {
        1_000_000_000 / hz as u64
    } else {
        10_000_000
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "cpu  106692 140 5477 17517 318 0 36 36 0 0
cpu0 52284 140 2261 10370 29 0 6 14 0 0
cpu1 54408 0 3215 7146 289 3 29 21 7 0
intr 531997 0 0 0
ctxt 123
";

    #[test]
    fn parses_per_cpu_lines_of_proc_stat() {
        let cpus = parse_proc_stat_cpus(STAT);
        assert_eq!(cpus.len(), 2, "the aggregate line is skipped");
        assert_eq!(
            cpus[&0],
            CpuTicks {
                busy: 52284 + 140 + 2261 + 6,
                idle: 10370 + 29,
                steal: 14
            }
        );
        // Guest time (7) is inside user time already.
        assert_eq!(cpus[&1].busy, 54408 + 3215 + 3 + 29);
        assert_eq!(cpus[&1].steal, 21);
        // An old kernel's four fields; garbage is skipped.
        let old = parse_proc_stat_cpus("cpu3 1 2 3 4\ncpu4 x y z w\ncpu5 1 2\n");
        assert_eq!(
            old.get(&3),
            Some(&CpuTicks {
                busy: 6,
                idle: 4,
                steal: 0
            })
        );
        assert_eq!(old.len(), 1);
    }

    #[test]
    fn deltas_over_a_set_of_cpus() {
        let start = parse_proc_stat_cpus(STAT);
        let mut end = start.clone();
        end.insert(
            0,
            CpuTicks {
                busy: start[&0].busy + 90,
                idle: start[&0].idle + 6,
                steal: start[&0].steal + 4,
            },
        );
        end.insert(
            1,
            CpuTicks {
                busy: start[&1].busy + 10,
                idle: start[&1].idle + 90,
                steal: start[&1].steal,
            },
        );
        let d0 = ticks_between(&start, &end, &[0]).unwrap();
        assert_eq!(
            d0,
            CpuTicks {
                busy: 90,
                idle: 6,
                steal: 4
            }
        );
        assert_eq!(d0.total(), 100);
        let both = ticks_between(&start, &end, &[0, 1]).unwrap();
        assert_eq!(both.total(), 200);
        assert_eq!(both.busy, 100);
        assert_eq!(ticks_between(&start, &end, &[7]), None);
        // A counter that went backwards counts as nothing.
        assert_eq!(
            end[&0]
                .since(&CpuTicks {
                    busy: u64::MAX,
                    ..end[&0]
                })
                .busy,
            0
        );
    }

    #[test]
    fn reads_this_machine() {
        let cpus = read_cpu_ticks().unwrap();
        assert!(!cpus.is_empty());
        assert!(cpus.values().all(|c| c.total() > 0));
        assert!((1_000_000..=100_000_000).contains(&tick_ns()));
    }

    /// A fake /proc: process 10 (two threads, one runnable), 20 (runnable,
    /// excluded), 30 (sleeping), a non-process entry and a process whose
    /// task directory is gone.
    #[test]
    fn runnable_tasks_leave_out_the_excluded_processes() {
        let root = tempfile::tempdir().unwrap();
        let task = |pid: i32, tid: i32, state: char| {
            let dir = root.path().join(format!("{pid}/task/{tid}"));
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("stat"), format!("{tid} (w (x)) {state} 1 2 3")).unwrap();
        };
        task(10, 10, 'S');
        task(10, 11, 'R');
        task(20, 20, 'R');
        task(20, 21, 'R');
        task(30, 30, 'S');
        std::fs::create_dir_all(root.path().join("self")).unwrap();
        std::fs::create_dir_all(root.path().join("40")).unwrap();
        let none = HashSet::new();
        assert_eq!(count_runnable_tasks_in(root.path(), &none), Some(3));
        let ours: HashSet<i32> = [20].into();
        assert_eq!(count_runnable_tasks_in(root.path(), &ours), Some(1));
        let all: HashSet<i32> = [10, 20].into();
        assert_eq!(count_runnable_tasks_in(root.path(), &all), Some(0));
        assert_eq!(
            count_runnable_tasks_in(&root.path().join("missing"), &none),
            None
        );
    }

    #[test]
    fn this_thread_is_runnable_and_excluding_this_process_hides_it() {
        let me = std::process::id() as i32;
        let text = std::fs::read_to_string(format!(
            "/proc/{me}/task/{}/stat",
            crate::sys::sched::gettid()
        ))
        .unwrap();
        assert_eq!(
            crate::sys::procstat::parse_stat(&text).map(|s| s.state),
            Some('R')
        );
        assert!(count_runnable_tasks(&HashSet::new()).unwrap() >= 1);
    }
}
