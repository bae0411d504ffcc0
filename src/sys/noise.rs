//! Per-CPU noise sources a run's CPUs are exposed to: hardware interrupts
//! (`/proc/interrupts`), softirqs (`/proc/softirqs`), the current clock
//! frequency (cpufreq's `scaling_cur_freq`) and thermal throttling events
//! (`thermal_throttle/*_throttle_count`). Pure parsers over file contents,
//! thin readers, and why a source is absent on this machine.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Counts per CPU, keyed by CPU number.
pub type PerCpu = BTreeMap<usize, u64>;

/// Rows of `/proc/interrupts` that are not per-CPU counts: one machine-wide
/// number each (spurious and erroneous interrupts).
const MACHINE_WIDE_ROWS: [&str; 2] = ["ERR", "MIS"];

/// Sum of every row's per-CPU counts in `/proc/interrupts` or
/// `/proc/softirqs` text, per CPU. The header names the CPU columns
/// (`CPU0 CPU1 …`; offline CPUs are left out, so columns are mapped by
/// name, not position). Rows with fewer counts than CPU columns are
/// machine-wide figures and are skipped, as are `ERR` and `MIS`. None when
/// the header has no CPU column.
pub fn parse_per_cpu_table(text: &str) -> Option<PerCpu> {
    let mut lines = text.lines();
    let cpus: Vec<usize> = lines
        .next()?
        .split_whitespace()
        .map(|c| c.strip_prefix("CPU")?.parse().ok())
        .collect::<Option<_>>()?;
    if cpus.is_empty() {
        return None;
    }
    let mut sums: PerCpu = cpus.iter().map(|&c| (c, 0)).collect();
    for line in lines {
        let Some((name, rest)) = line.split_once(':') else {
            continue;
        };
        if MACHINE_WIDE_ROWS.contains(&name.trim()) {
            continue;
        }
        let counts: Vec<u64> = rest
            .split_whitespace()
            .take(cpus.len())
            .map_while(|t| t.parse().ok())
            .collect();
        if counts.len() != cpus.len() {
            continue;
        }
        for (cpu, n) in cpus.iter().zip(counts) {
            *sums.entry(*cpu).or_default() += n;
        }
    }
    Some(sums)
}

/// The increase of `end` over `start` summed over `cpus`; None when a CPU
/// is missing from either reading. A counter that went backwards (a CPU
/// taken offline and back) adds nothing.
pub fn delta_over(start: &PerCpu, end: &PerCpu, cpus: &[usize]) -> Option<u64> {
    cpus.iter().try_fold(0u64, |sum, c| {
        Some(sum + end.get(c)?.saturating_sub(*start.get(c)?))
    })
}

/// A sysfs file holding one unsigned number (`scaling_cur_freq` in kHz, a
/// throttle count).
pub fn parse_number(text: &str) -> Option<u64> {
    text.trim().parse().ok()
}

/// What is read at one moment of a run, from each source that exists.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reading {
    pub interrupts: Option<PerCpu>,
    pub softirqs: Option<PerCpu>,
    /// `scaling_cur_freq` per CPU, kHz (only CPUs that expose it).
    pub freq_khz: PerCpu,
    /// The sum of each CPU's `*_throttle_count` files (only CPUs that have
    /// them).
    pub throttle: PerCpu,
}

/// The noise figures of one run over `cpus` between two readings.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Noise {
    pub interrupts: Option<u64>,
    pub softirqs: Option<u64>,
    /// Mean of the readings at both ends over the run's CPUs, kHz; None
    /// unless every one of them exposed it both times.
    pub cpu_freq_khz: Option<f64>,
    /// Thermal throttling events; None unless every CPU has the counters.
    pub throttle_count: Option<u64>,
}

/// The noise between `start` and `end` on `cpus`.
pub fn between(start: &Reading, end: &Reading, cpus: &[usize]) -> Noise {
    let delta = |a: &Option<PerCpu>, b: &Option<PerCpu>| match (a, b) {
        (Some(a), Some(b)) => delta_over(a, b, cpus),
        _ => None,
    };
    let freqs: Option<Vec<u64>> = cpus
        .iter()
        .flat_map(|c| [start.freq_khz.get(c), end.freq_khz.get(c)])
        .map(|f| f.copied())
        .collect();
    let cpu_freq_khz = freqs
        .filter(|f| !f.is_empty())
        .map(|f| f.iter().sum::<u64>() as f64 / f.len() as f64);
    Noise {
        interrupts: delta(&start.interrupts, &end.interrupts),
        softirqs: delta(&start.softirqs, &end.softirqs),
        cpu_freq_khz,
        throttle_count: if cpus.is_empty() {
            None
        } else {
            delta_over(&start.throttle, &end.throttle, cpus)
        },
    }
}

/// The machine's noise sources, rooted at `proc_root` and `cpu_root`
/// (normally `/proc` and `/sys/devices/system/cpu`), for tests.
pub struct Roots {
    pub proc_root: PathBuf,
    pub cpu_root: PathBuf,
}

impl Default for Roots {
    fn default() -> Self {
        Roots {
            proc_root: PathBuf::from("/proc"),
            cpu_root: PathBuf::from("/sys/devices/system/cpu"),
        }
    }
}

impl Roots {
    /// Read every source for `cpus`.
    pub fn read(&self, cpus: &[usize]) -> Reading {
        let table = |name: &str| {
            std::fs::read_to_string(self.proc_root.join(name))
                .ok()
                .and_then(|t| parse_per_cpu_table(&t))
        };
        let mut reading = Reading {
            interrupts: table("interrupts"),
            softirqs: table("softirqs"),
            ..Reading::default()
        };
        for &cpu in cpus {
            let dir = self.cpu_root.join(format!("cpu{cpu}"));
            if let Some(f) = read_number(&dir.join("cpufreq/scaling_cur_freq")) {
                reading.freq_khz.insert(cpu, f);
            }
            if let Some(t) = throttle_count(&dir.join("thermal_throttle")) {
                reading.throttle.insert(cpu, t);
            }
        }
        reading
    }

    /// Why each source is or is not available here: (source, None when
    /// available or Some(why not)).
    pub fn availability(&self) -> Vec<(&'static str, Option<String>)> {
        let proc_source = |name: &str| {
            let path = self.proc_root.join(name);
            match std::fs::read_to_string(&path) {
                Err(e) => Some(format!("cannot read {}: {e}", path.display())),
                Ok(t) if parse_per_cpu_table(&t).is_none() => {
                    Some(format!("{} has no CPU columns", path.display()))
                }
                Ok(_) => None,
            }
        };
        let cpu0 = self.cpu_root.join("cpu0");
        let freq = cpu0.join("cpufreq/scaling_cur_freq");
        let freq_why = read_number(&freq).is_none().then(|| {
            format!(
                "no {} (no cpufreq driver: usual in a virtual machine, whose host sets the clock)",
                freq.display()
            )
        });
        let throttle = cpu0.join("thermal_throttle");
        let throttle_why = throttle_count(&throttle).is_none().then(|| {
            format!(
                "no {} (the kernel's x86 thermal driver exposes no throttle counters here: \
                 usual in a virtual machine or on a CPU without thermal interrupts)",
                throttle.display()
            )
        });
        vec![
            ("interrupts", proc_source("interrupts")),
            ("softirqs", proc_source("softirqs")),
            ("cpu_freq", freq_why),
            ("thermal_throttle", throttle_why),
        ]
    }
}

fn read_number(path: &Path) -> Option<u64> {
    parse_number(&std::fs::read_to_string(path).ok()?)
}

/// The sum of the `*_throttle_count` files in a CPU's `thermal_throttle`
/// directory (core and package), None when there are none.
fn throttle_count(dir: &Path) -> Option<u64> {
    let mut found = None;
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let name = entry.file_name();
        if name
            .to_str()
            .is_some_and(|n| n.ends_with("_throttle_count"))
            && let Some(n) = read_number(&entry.path())
        {
            found = Some(found.unwrap_or(0) + n);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Captured from a 2-CPU virtual machine (trimmed).
    const INTERRUPTS: &str = "           CPU0       CPU1       
 24:          1          0  IO-APIC   5-edge      ACPI:Ged
 25:          0          1  IO-APIC   6-edge      ACPI:Ged
 29:       1200        800   PCI-MSI 49152-edge      virtio0-input.0
NMI:          0          0   Non-maskable interrupts
LOC:     264877     392168   Local timer interrupts
RES:      10000      20000   Rescheduling interrupts
ERR:          5
MIS:          0
";

    const SOFTIRQS: &str = "                    CPU0       CPU1       
          HI:          0          0
       TIMER:     264877     392168
      NET_RX:         10         20
       SCHED:        100        200
";

    #[test]
    fn interrupts_are_summed_per_cpu_skipping_machine_wide_rows() {
        let t = parse_per_cpu_table(INTERRUPTS).unwrap();
        assert_eq!(t[&0], 1 + 1200 + 264877 + 10000);
        assert_eq!(t[&1], 1 + 800 + 392168 + 20000);
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn softirqs_are_summed_per_cpu() {
        let t = parse_per_cpu_table(SOFTIRQS).unwrap();
        assert_eq!(t, PerCpu::from([(0, 264987), (1, 392388)]));
    }

    #[test]
    fn columns_follow_the_header_when_a_cpu_is_offline() {
        // CPU1 offline: the columns are CPU0 and CPU2.
        let text = "     CPU0   CPU2\nLOC:  5  7  Local timer interrupts\n";
        assert_eq!(
            parse_per_cpu_table(text).unwrap(),
            PerCpu::from([(0, 5), (2, 7)])
        );
    }

    #[test]
    fn text_without_cpu_columns_is_refused() {
        assert_eq!(parse_per_cpu_table(""), None);
        assert_eq!(parse_per_cpu_table("hello world\n 1: 2\n"), None);
        assert_eq!(parse_per_cpu_table("\n"), None);
    }

    #[test]
    fn deltas_sum_only_the_runs_cpus() {
        let a = PerCpu::from([(0, 100), (1, 1000)]);
        let b = PerCpu::from([(0, 150), (1, 5000)]);
        assert_eq!(delta_over(&a, &b, &[0]), Some(50));
        assert_eq!(delta_over(&a, &b, &[0, 1]), Some(4050));
        assert_eq!(delta_over(&a, &b, &[2]), None);
        // Backwards (CPU hot-plugged): nothing, not a wrap-around.
        assert_eq!(delta_over(&b, &a, &[0]), Some(0));
    }

    #[test]
    fn noise_between_readings() {
        let start = Reading {
            interrupts: parse_per_cpu_table(INTERRUPTS),
            softirqs: parse_per_cpu_table(SOFTIRQS),
            freq_khz: PerCpu::from([(0, 2_000_000)]),
            throttle: PerCpu::from([(0, 3)]),
        };
        let mut end = start.clone();
        end.interrupts.as_mut().unwrap().insert(0, 300_000);
        end.freq_khz.insert(0, 3_000_000);
        end.throttle.insert(0, 5);
        let n = between(&start, &end, &[0]);
        assert_eq!(n.interrupts, Some(300_000 - 276_078));
        assert_eq!(n.softirqs, Some(0));
        assert_eq!(n.cpu_freq_khz, Some(2_500_000.0));
        assert_eq!(n.throttle_count, Some(2));
        // CPU1 exposes no frequency nor throttling: those stay empty.
        let n = between(&start, &end, &[0, 1]);
        assert_eq!((n.cpu_freq_khz, n.throttle_count), (None, None));
        assert!(n.interrupts.is_some());
        // No source at all.
        let n = between(&Reading::default(), &Reading::default(), &[0]);
        assert_eq!(n, Noise::default());
    }

    #[test]
    fn sysfs_numbers() {
        assert_eq!(parse_number("2400000\n"), Some(2_400_000));
        assert_eq!(parse_number("<unknown>\n"), None);
    }

    #[test]
    fn readers_on_a_fake_tree_and_why_sources_are_missing() {
        let dir = tempfile::tempdir().unwrap();
        let proc_root = dir.path().join("proc");
        let cpu_root = dir.path().join("cpu");
        std::fs::create_dir_all(&proc_root).unwrap();
        std::fs::create_dir_all(cpu_root.join("cpu0/thermal_throttle")).unwrap();
        std::fs::write(proc_root.join("interrupts"), INTERRUPTS).unwrap();
        let tt = cpu_root.join("cpu0/thermal_throttle");
        std::fs::write(tt.join("core_throttle_count"), "4\n").unwrap();
        std::fs::write(tt.join("package_throttle_count"), "1\n").unwrap();
        std::fs::write(tt.join("core_throttle_max_time_ms"), "99\n").unwrap();
        let roots = Roots {
            proc_root,
            cpu_root,
        };
        let r = roots.read(&[0]);
        assert!(r.interrupts.is_some());
        assert_eq!(r.softirqs, None);
        assert!(r.freq_khz.is_empty());
        assert_eq!(r.throttle, PerCpu::from([(0, 5)]));
        let why: BTreeMap<_, _> = roots.availability().into_iter().collect();
        assert_eq!(why["interrupts"], None);
        assert!(why["softirqs"].as_ref().unwrap().contains("softirqs"));
        assert!(why["cpu_freq"].as_ref().unwrap().contains("no cpufreq"));
        assert_eq!(why["thermal_throttle"], None);
    }
}
