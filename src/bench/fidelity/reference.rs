//! The reference tools of the fidelity benchmark: whether each is
//! installed (and which package brings it), their command lines, and the
//! parsers of what they print.
//!
//! - `perf bench sched pipe -l LOOPS` (linux-perf): two processes pass a
//!   token through two pipes; each loop is one round trip, and perf prints
//!   the total time and `usecs/op` = total / loops, the mean round trip.
//! - `cyclictest -m -p PRIO -i PERIOD -a CPU -l LOOPS -q -h MAX
//!   --histfile=FILE` (rt-tests): one SCHED_FIFO thread sleeps to absolute
//!   wake-up times; the histogram counts wake-up latencies in 1 µs buckets
//!   (a latency is truncated to whole µs, so bucket i holds [i, i+1) µs),
//!   those of MAX µs or more as overflows. cyclictest also holds
//!   `/dev/cpu_dma_latency` at 0 while it runs (idle CPUs poll instead of
//!   halting); the benchmark holds it too while schedlab's side runs
//!   (`latency::periodic_ours`), since that alone decides much of the
//!   latency (10 µs of p50 on a haltpoll VM).
//! - `hackbench -P -g GROUPS -f FDS -l LOOPS -s BYTES` (rt-tests): per group
//!   FDS senders and FDS receivers on sockets; every sender writes LOOPS
//!   messages to every receiver of its group; it prints `Time: S` from the
//!   start signal to the last receiver's end, in ms resolution.

use std::path::Path;

use super::exec;

/// An outside program a row needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    Perf,
    Cyclictest,
    Hackbench,
    Cc,
    Taskset,
}

impl Tool {
    pub fn program(self) -> &'static str {
        match self {
            Tool::Perf => "perf",
            Tool::Cyclictest => "cyclictest",
            Tool::Hackbench => "hackbench",
            Tool::Cc => "cc",
            Tool::Taskset => "taskset",
        }
    }

    /// The Debian package that installs it.
    pub fn package(self) -> &'static str {
        match self {
            Tool::Perf => "linux-perf",
            Tool::Cyclictest | Tool::Hackbench => "rt-tests",
            Tool::Cc => "gcc",
            Tool::Taskset => "util-linux",
        }
    }

    /// Ok when the tool can be used, else why not (naming the package).
    /// perf is also run once (`perf --version`): Debian's `perf` is a
    /// wrapper that refuses to run when no perf matches the kernel.
    pub fn available(self) -> Result<(), String> {
        let program = self.program();
        if !exec::in_path(program) {
            return Err(format!(
                "{program} not found (apt-get install {})",
                self.package()
            ));
        }
        if self == Tool::Perf {
            let ran = exec::run(
                std::process::Command::new(program).arg("--version"),
                std::time::Duration::from_secs(30),
            )
            .map_err(|e| format!("{e:#}"))?;
            ran.check("perf --version")?;
        }
        Ok(())
    }
}

/// `perf bench sched pipe` with `loops` round trips.
pub fn perf_pipe_args(loops: u64) -> Vec<String> {
    ["bench", "sched", "pipe", "-l"]
        .iter()
        .map(|s| s.to_string())
        .chain([loops.to_string()])
        .collect()
}

/// What `perf bench sched pipe` printed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PerfPipe {
    pub loops: u64,
    pub total_s: f64,
    /// Mean round trip, µs.
    pub usecs_per_op: f64,
}

/// The number after `key` on the first line that contains it.
fn number_after(text: &str, key: &str) -> Option<f64> {
    text.lines().find_map(|l| {
        let rest = &l[l.find(key)? + key.len()..];
        rest.split_whitespace().next()?.parse().ok()
    })
}

/// Parse `perf bench sched pipe`'s default output.
pub fn parse_perf_pipe(text: &str) -> Result<PerfPipe, String> {
    let loops = text
        .lines()
        .find_map(|l| {
            let rest = l.split("# Executed ").nth(1)?;
            rest.split_whitespace().next()?.parse().ok()
        })
        .ok_or("perf printed no \"# Executed N pipe operations\" line")?;
    let total_s = number_after(text, "Total time:").ok_or("perf printed no \"Total time:\"")?;
    let usecs_per_op = text
        .lines()
        .find_map(|l| {
            let l = l.trim();
            l.strip_suffix("usecs/op")?.trim().parse().ok()
        })
        .ok_or("perf printed no \"usecs/op\" line")?;
    Ok(PerfPipe {
        loops,
        total_s,
        usecs_per_op,
    })
}

/// cyclictest's command line: one thread, SCHED_FIFO `priority`, period
/// `period_us`, on `cpu`, `loops` wake-ups, memory locked, quiet, with a
/// histogram up to `hist_max_us` written to `histfile`.
pub fn cyclictest_args(
    priority: u32,
    period_us: u64,
    cpu: usize,
    loops: u64,
    hist_max_us: u64,
    histfile: &Path,
) -> Vec<String> {
    vec![
        "-m".into(),
        "-p".into(),
        priority.to_string(),
        "-i".into(),
        period_us.to_string(),
        "-a".into(),
        cpu.to_string(),
        "-l".into(),
        loops.to_string(),
        "-q".into(),
        "-h".into(),
        hist_max_us.to_string(),
        format!("--histfile={}", histfile.display()),
    ]
}

/// cyclictest's histogram of one thread.
#[derive(Debug, Clone, PartialEq)]
pub struct CyclicHist {
    /// `buckets[i]`: wake-ups of latency in [i, i+1) µs.
    pub buckets: Vec<u64>,
    /// Wake-ups of `buckets.len()` µs or more.
    pub overflows: u64,
    pub min_us: Option<f64>,
    pub avg_us: Option<f64>,
    pub max_us: Option<f64>,
}

impl CyclicHist {
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum::<u64>() + self.overflows
    }

    /// The `q` quantile (0 < q ≤ 1) in µs: the smallest latency below which
    /// at least q of the wake-ups lie, taken as the middle of its 1 µs
    /// bucket. None when it lies among the overflows (beyond the histogram)
    /// or there is nothing.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let total = self.count();
        if total == 0 {
            return None;
        }
        let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
        let mut seen = 0;
        for (i, &c) in self.buckets.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Some(i as f64 + 0.5);
            }
        }
        None
    }
}

/// Parse cyclictest's histogram file (`-h N --histfile=F`) of one thread:
/// `NNNNNN CCCCCC` lines, then `# Min Latencies:`, `# Avg Latencies:`,
/// `# Max Latencies:` and `# Histogram Overflows:` lines.
pub fn parse_cyclictest_hist(text: &str) -> Result<CyclicHist, String> {
    let mut buckets = Vec::new();
    let mut overflows = None;
    let (mut min_us, mut avg_us, mut max_us) = (None, None, None);
    for line in text.lines() {
        let line = line.trim();
        if let Some(comment) = line.strip_prefix('#') {
            let field = |key: &str| -> Option<f64> {
                comment
                    .trim()
                    .strip_prefix(key)?
                    .split_whitespace()
                    .next()?
                    .parse()
                    .ok()
            };
            min_us = min_us.or(field("Min Latencies:"));
            avg_us = avg_us.or(field("Avg Latencies:"));
            max_us = max_us.or(field("Max Latencies:"));
            overflows = overflows.or(field("Histogram Overflows:").map(|v| v as u64));
            continue;
        }
        let mut cols = line.split_whitespace();
        let (Some(bucket), Some(count)) = (cols.next(), cols.next()) else {
            continue;
        };
        let (Ok(bucket), Ok(count)) = (bucket.parse::<usize>(), count.parse::<u64>()) else {
            return Err(format!(
                "unexpected line in cyclictest's histogram: {line:?}"
            ));
        };
        if bucket != buckets.len() {
            return Err(format!(
                "cyclictest's histogram skips from bucket {} to {bucket}",
                buckets.len()
            ));
        }
        buckets.push(count);
    }
    if buckets.is_empty() {
        return Err("cyclictest wrote no histogram".into());
    }
    Ok(CyclicHist {
        buckets,
        overflows: overflows
            .ok_or("cyclictest's histogram has no \"# Histogram Overflows\" line")?,
        min_us,
        avg_us,
        max_us,
    })
}

/// hackbench's command line: process mode, sockets, `groups` groups of
/// `fds` senders and `fds` receivers, `loops` messages of `bytes`.
pub fn hackbench_args(groups: u32, fds: u32, loops: u64, bytes: u64) -> Vec<String> {
    vec![
        "-P".into(),
        "-g".into(),
        groups.to_string(),
        "-f".into(),
        fds.to_string(),
        "-l".into(),
        loops.to_string(),
        "-s".into(),
        bytes.to_string(),
    ]
}

/// What hackbench printed: its time in seconds and the task count.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hackbench {
    pub time_s: f64,
    pub tasks: u64,
}

/// Parse hackbench's output: `... (== N tasks)` and `Time: S`.
pub fn parse_hackbench(text: &str) -> Result<Hackbench, String> {
    let time_s = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Time:")?.trim().parse().ok())
        .ok_or("hackbench printed no \"Time: S\" line")?;
    let tasks = number_after(text, "(==").ok_or("hackbench printed no \"(== N tasks)\"")? as u64;
    Ok(Hackbench { time_s, tasks })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `perf bench sched pipe -l 20000` (perf 6.1.187) on the 2-CPU VM.
    const PERF_PIPE: &str = "# Running 'sched/pipe' benchmark:
# Executed 20000 pipe operations between two processes

     Total time: 0.102 [sec]

       5.140100 usecs/op
         194548 ops/sec
";

    #[test]
    fn perf_pipe_output() {
        let p = parse_perf_pipe(PERF_PIPE).unwrap();
        assert_eq!(p.loops, 20000);
        assert_eq!(p.total_s, 0.102);
        assert_eq!(p.usecs_per_op, 5.1401);
        assert_eq!(
            perf_pipe_args(20000),
            ["bench", "sched", "pipe", "-l", "20000"]
        );
        let e = parse_perf_pipe("perf: 'bench' is not a perf-command").unwrap_err();
        assert!(e.contains("Executed"), "{e}");
    }

    /// `cyclictest -m -p 90 -i 1000 -a 0 -l 500 -q -h 60 --histfile=F`
    /// (rt-tests 2.40): the file, from the 2-CPU VM.
    const CYCLIC: &str = include_str!("samples/cyclictest-hist-h60.txt");

    /// The same with `-l 200 -h 20` on the VM while it was busy: one
    /// wake-up inside the histogram, 199 beyond 20 µs.
    const CYCLIC_OVERFLOWING: &str = include_str!("samples/cyclictest-hist-h20-overflowing.txt");

    #[test]
    fn cyclictest_histogram() {
        let h = parse_cyclictest_hist(CYCLIC).unwrap();
        assert_eq!(h.buckets.len(), 60);
        assert_eq!(h.count(), 500);
        assert_eq!(h.overflows, 0);
        assert_eq!(
            (h.min_us, h.avg_us, h.max_us),
            (Some(17.0), Some(30.0), Some(47.0))
        );
        // 227 wake-ups up to bucket 31, 279 up to 32: rank 250 is in 32.
        assert_eq!(h.quantile(0.5), Some(32.5));
        // 491 up to bucket 40, 495 up to 41: rank 495 is in 41.
        assert_eq!(h.quantile(0.99), Some(41.5));
        assert_eq!(h.quantile(1.0), Some(47.5));
        assert_eq!(h.quantile(0.001), Some(17.5));

        let o = parse_cyclictest_hist(CYCLIC_OVERFLOWING).unwrap();
        assert_eq!((o.count(), o.overflows), (200, 199));
        assert_eq!(o.quantile(0.005), Some(17.5));
        assert_eq!(o.quantile(0.5), None, "beyond the histogram");
    }

    #[test]
    fn cyclictest_histogram_refusals() {
        assert!(
            parse_cyclictest_hist("")
                .unwrap_err()
                .contains("no histogram")
        );
        let e = parse_cyclictest_hist("000000 000001\n000002 000001\n# Histogram Overflows: 0\n")
            .unwrap_err();
        assert!(e.contains("skips"), "{e}");
        let e = parse_cyclictest_hist("000000 000001\n").unwrap_err();
        assert!(e.contains("Overflows"), "{e}");
        let args = cyclictest_args(90, 1000, 0, 500, 2000, Path::new("/t/h"));
        assert_eq!(
            args.join(" "),
            "-m -p 90 -i 1000 -a 0 -l 500 -q -h 2000 --histfile=/t/h"
        );
    }

    /// `hackbench -g 2 -f 10 -l 50` (rt-tests 2.40).
    const HACKBENCH: &str =
        "Running in process mode with 2 groups using 20 file descriptors each (== 40 tasks)
Each sender will pass 50 messages of 100 bytes
Time: 0.014
";

    #[test]
    fn hackbench_output() {
        let h = parse_hackbench(HACKBENCH).unwrap();
        assert_eq!(h.time_s, 0.014);
        assert_eq!(h.tasks, 40);
        assert!(parse_hackbench("Running in process mode\n").is_err());
        assert_eq!(
            hackbench_args(2, 10, 50, 100).join(" "),
            "-P -g 2 -f 10 -l 50 -s 100"
        );
    }

    #[test]
    fn tools_name_their_package() {
        assert_eq!(Tool::Cyclictest.package(), "rt-tests");
        assert_eq!(Tool::Perf.package(), "linux-perf");
        let e = Tool::Cc.program();
        assert_eq!(e, "cc");
    }
}
