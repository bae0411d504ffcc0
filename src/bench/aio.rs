//! `schedlab bench aio`: our io_uring `aio` workload against fio with the
//! same settings on the same file.
//!
//! One file of `file_bytes` is created (non-zero bytes, fsynced) in a
//! temporary directory under `dir`; then each trial runs both sides for
//! `duration_s` on it, alternately and in swapped order from trial to trial
//! (ours first in odd trials, fio first in even ones) so that neither side
//! always runs on a device warmed by the other. Ours runs in-process through
//! `workload::aio::run_file` (one process, index 0); fio runs one job with
//! `ioengine=io_uring`, the same block size, queue depth, read/write mix and
//! O_DIRECT setting, pure random offsets (`norandommap`), time-based, and
//! without dropping the file's cached pages first (`invalidate=0`, as ours
//! does not either), writing a non-zero byte pattern (`buffer_pattern`, so
//! that the file keeps the property our reads check). Its
//! `--output-format=json` report gives the bytes/s and
//! IOPS of the read and write sides, which are summed.
//!
//! The summary is the median MB/s and IOPS of each side and the median of
//! the per-trial ratios ours/fio (MB/s) with their range; "within 10%" means
//! that median ratio lies in [0.9, 1.1].

use crate::workload::aio::{self, AIO_FILE};
use crate::workload::{AioParams, Stop};
use anyhow::{Context, bail, ensure};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Settings of one comparison.
#[derive(Debug, Clone, PartialEq)]
pub struct AioBenchOptions {
    /// Size of the shared file both sides work on.
    pub file_bytes: u64,
    /// Bytes per operation.
    pub block_bytes: u64,
    /// Operations in flight.
    pub queue_depth: u32,
    /// Percent of operations that are reads (100: randread, 0: randwrite,
    /// otherwise randrw with rwmixread).
    pub read_pct: u8,
    /// O_DIRECT on both sides.
    pub direct: bool,
    /// Length of one trial of one side, in seconds.
    pub duration_s: f64,
    /// Trials per side.
    pub trials: u32,
    /// Directory under which the temporary file is created (it must be on
    /// a filesystem that supports O_DIRECT when `direct` is set).
    pub dir: PathBuf,
}

impl Default for AioBenchOptions {
    /// The `[workloads.aio]` defaults, 5 trials of 5 s each, in `$TMPDIR`.
    fn default() -> Self {
        Self {
            file_bytes: 64 << 20,
            block_bytes: 4096,
            queue_depth: 32,
            read_pct: 100,
            direct: true,
            duration_s: 5.0,
            trials: 5,
            dir: std::env::temp_dir(),
        }
    }
}

/// One side's figures in one trial.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Side {
    pub mb_per_s: f64,
    pub iops: f64,
    /// Median and 99th percentile completion latency, µs (fio: clat of the
    /// read side, or of the write side when there are no reads).
    pub lat_p50_us: f64,
    pub lat_p99_us: f64,
}

/// Both sides of one trial.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Trial {
    pub ours: Side,
    pub fio: Side,
    /// Whether ours ran first in this trial.
    pub ours_first: bool,
}

impl Trial {
    /// ours/fio in MB/s.
    pub fn ratio(&self) -> f64 {
        self.ours.mb_per_s / self.fio.mb_per_s
    }
}

/// The outcome of a comparison.
#[derive(Debug, Clone, PartialEq)]
pub struct AioBenchReport {
    pub trials: Vec<Trial>,
    pub fio_version: String,
}

/// Median, min and max of a non-empty list.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    pub fn of(values: &[f64]) -> Spread {
        assert!(!values.is_empty(), "Spread of nothing");
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Spread {
            median,
            min: v[0],
            max: v[n - 1],
        }
    }
}

impl AioBenchReport {
    pub fn ours(&self, f: impl Fn(&Side) -> f64) -> Spread {
        Spread::of(&self.trials.iter().map(|t| f(&t.ours)).collect::<Vec<_>>())
    }

    pub fn fio(&self, f: impl Fn(&Side) -> f64) -> Spread {
        Spread::of(&self.trials.iter().map(|t| f(&t.fio)).collect::<Vec<_>>())
    }

    pub fn ratio(&self) -> Spread {
        Spread::of(&self.trials.iter().map(Trial::ratio).collect::<Vec<_>>())
    }

    /// Whether the median ratio ours/fio is within 10% of 1.
    pub fn within_10_pct(&self) -> bool {
        (self.ratio().median - 1.0).abs() <= 0.10
    }
}

impl AioBenchOptions {
    /// The aio workload these options describe, for one trial.
    pub fn params(&self) -> AioParams {
        AioParams {
            stop: Stop::DurationNs((self.duration_s * 1e9).round() as u64),
            file_bytes: self.file_bytes,
            block_bytes: self.block_bytes,
            queue_depth: self.queue_depth,
            read_pct: self.read_pct,
            direct: self.direct,
            seed: None,
        }
    }

    fn check(&self) -> anyhow::Result<()> {
        ensure!(
            self.duration_s.is_finite() && self.duration_s >= 0.01 && self.duration_s <= 3600.0,
            "the duration of a trial must be between 0.01 and 3600 s, got {}",
            self.duration_s
        );
        ensure!(
            (1..=1000).contains(&self.trials),
            "trials must be between 1 and 1000, got {}",
            self.trials
        );
        aio::check_params(&self.params())
    }

    /// fio's command line for one trial on `file`.
    pub fn fio_args(&self, file: &Path) -> Vec<String> {
        let rw = match self.read_pct {
            100 => "randread".to_string(),
            0 => "randwrite".to_string(),
            pct => format!("randrw --rwmixread={pct}"),
        };
        let mut args = vec![
            "--name=schedlab-aio".to_string(),
            format!("--filename={}", file.display()),
            "--ioengine=io_uring".to_string(),
            format!("--direct={}", u8::from(self.direct)),
        ];
        args.extend(rw.split(' ').map(|s| {
            if s.starts_with("--") {
                s.to_string()
            } else {
                format!("--rw={s}")
            }
        }));
        args.extend([
            format!("--bs={}", self.block_bytes),
            format!("--iodepth={}", self.queue_depth),
            format!("--size={}", self.file_bytes),
            "--time_based".to_string(),
            format!(
                "--runtime={}ms",
                ((self.duration_s * 1e3).round() as u64).max(1)
            ),
            "--numjobs=1".to_string(),
            "--norandommap".to_string(),
            "--randrepeat=0".to_string(),
            "--invalidate=0".to_string(),
            "--allow_file_create=0".to_string(),
            "--output-format=json".to_string(),
        ]);
        if self.read_pct < 100 {
            // Our reads check that they got file data, which holds no zero
            // byte; fio's default write buffers would leave zeros behind.
            args.push("--buffer_pattern=0x5a".to_string());
        }
        args
    }
}

/// The installed fio's version, or the "fio not found" error.
pub fn fio_version() -> anyhow::Result<String> {
    match Command::new("fio").arg("--version").output() {
        Ok(out) if out.status.success() => {
            Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
        }
        Ok(out) => bail!(
            "fio --version failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            bail!("fio not found: apt-get install fio")
        }
        Err(e) => Err(anyhow::Error::new(e).context("running fio")),
    }
}

/// Parse fio's `--output-format=json` report of one job: bytes/s and IOPS
/// summed over reads and writes, clat percentiles of the read side (or the
/// write side when nothing was read). Text before the JSON (fio warnings)
/// is skipped.
pub fn parse_fio_json(text: &str) -> anyhow::Result<Side> {
    let start = text.find('{').context("fio printed no JSON report")?;
    let v: serde_json::Value =
        serde_json::from_str(&text[start..]).context("parsing fio's JSON report")?;
    let job = v["jobs"].get(0).context("fio's JSON report has no job")?;
    let error = job["error"].as_i64().unwrap_or(0);
    ensure!(error == 0, "fio's job failed with error {error}");
    let num = |side: &str, field: &str| -> anyhow::Result<f64> {
        job[side][field]
            .as_f64()
            .with_context(|| format!("fio's JSON report lacks jobs[0].{side}.{field}"))
    };
    let bw = num("read", "bw_bytes")? + num("write", "bw_bytes")?;
    let iops = num("read", "iops")? + num("write", "iops")?;
    let lat_side = if num("read", "iops")? > 0.0 {
        "read"
    } else {
        "write"
    };
    let pct = |p: &str| -> f64 {
        job[lat_side]["clat_ns"]["percentile"][p]
            .as_f64()
            .map_or(f64::NAN, |ns| ns / 1e3)
    };
    Ok(Side {
        mb_per_s: bw / 1e6,
        iops,
        lat_p50_us: pct("50.000000"),
        lat_p99_us: pct("99.000000"),
    })
}

fn run_fio(opts: &AioBenchOptions, file: &Path) -> anyhow::Result<Side> {
    let args = opts.fio_args(file);
    let out = Command::new("fio")
        .args(&args)
        .output()
        .context("running fio")?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!(
            "fio {} failed ({}): {}{}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim(),
            stdout.trim()
        );
    }
    let side = parse_fio_json(&stdout).with_context(|| format!("fio {}", args.join(" ")))?;
    ensure!(
        side.mb_per_s > 0.0,
        "fio transferred nothing: fio {}",
        args.join(" ")
    );
    Ok(side)
}

fn run_ours(opts: &AioBenchOptions, file: &Path) -> anyhow::Result<Side> {
    let out = aio::run_file(&opts.params(), file, 0, None)?;
    let f = |k: &str| out.figures.get(k).copied().unwrap_or(f64::NAN);
    Ok(Side {
        mb_per_s: f("mb_per_s"),
        iops: f("iops"),
        lat_p50_us: f("lat_p50_us"),
        lat_p99_us: f("lat_p99_us"),
    })
}

/// Run the comparison, calling `on_trial` after each trial (trial number
/// from 1). The temporary file is removed afterwards.
pub fn measure(
    opts: &AioBenchOptions,
    mut on_trial: impl FnMut(usize, &Trial),
) -> anyhow::Result<AioBenchReport> {
    opts.check()?;
    let fio_version = fio_version()?;
    std::fs::create_dir_all(&opts.dir)
        .with_context(|| format!("creating {}", opts.dir.display()))?;
    let tmp = tempfile::Builder::new()
        .prefix("schedlab-bench-aio-")
        .tempdir_in(&opts.dir)
        .with_context(|| format!("creating a directory in {}", opts.dir.display()))?;
    crate::workload::Workload::Aio(opts.params()).prepare(tmp.path(), None)?;
    let file = tmp.path().join(AIO_FILE);
    let mut trials = Vec::with_capacity(opts.trials as usize);
    for t in 1..=opts.trials as usize {
        let ours_first = t % 2 == 1;
        let (ours, fio) = if ours_first {
            let ours = run_ours(opts, &file)?;
            (ours, run_fio(opts, &file)?)
        } else {
            let fio = run_fio(opts, &file)?;
            (run_ours(opts, &file)?, fio)
        };
        let trial = Trial {
            ours,
            fio,
            ours_first,
        };
        on_trial(t, &trial);
        trials.push(trial);
    }
    tmp.close()
        .with_context(|| format!("removing {}", opts.dir.display()))?;
    Ok(AioBenchReport {
        trials,
        fio_version,
    })
}

/// Describe the settings, e.g. "file 64 MiB, block 4096 B, queue depth 32,
/// 100% reads, O_DIRECT, 5 trials × 5 s per side".
pub fn describe(opts: &AioBenchOptions) -> String {
    format!(
        "file {} MiB in {}, block {} B, queue depth {}, {}% reads, {}, {} trials × {} s per side",
        opts.file_bytes as f64 / (1 << 20) as f64,
        opts.dir.display(),
        opts.block_bytes,
        opts.queue_depth,
        opts.read_pct,
        if opts.direct {
            "O_DIRECT"
        } else {
            "page cache"
        },
        opts.trials,
        opts.duration_s
    )
}

fn trial_line(t: usize, trial: &Trial) -> String {
    format!(
        "{t:>5}  {:>10.1} {:>10.0} {:>9.1} {:>9.1}   {:>10.1} {:>10.0} {:>9.1} {:>9.1}   {:>8.3}  {}",
        trial.ours.mb_per_s,
        trial.ours.iops,
        trial.ours.lat_p50_us,
        trial.ours.lat_p99_us,
        trial.fio.mb_per_s,
        trial.fio.iops,
        trial.fio.lat_p50_us,
        trial.fio.lat_p99_us,
        trial.ratio(),
        if trial.ours_first {
            "ours first"
        } else {
            "fio first"
        }
    )
}

/// The summary lines printed after the trials.
pub fn summary(report: &AioBenchReport) -> String {
    let (om, oi) = (report.ours(|s| s.mb_per_s), report.ours(|s| s.iops));
    let (fm, fi) = (report.fio(|s| s.mb_per_s), report.fio(|s| s.iops));
    let r = report.ratio();
    format!(
        "median  ours: {:.1} MB/s ({:.1}–{:.1}), {:.0} IOPS ({:.0}–{:.0})\n\
         median  fio:  {:.1} MB/s ({:.1}–{:.1}), {:.0} IOPS ({:.0}–{:.0})\n\
         ratio ours/fio (MB/s): median {:.3}, min {:.3}, max {:.3} → {}",
        om.median,
        om.min,
        om.max,
        oi.median,
        oi.min,
        oi.max,
        fm.median,
        fm.min,
        fm.max,
        fi.median,
        fi.min,
        fi.max,
        r.median,
        r.min,
        r.max,
        if report.within_10_pct() {
            "within 10% of fio"
        } else {
            "NOT within 10% of fio"
        }
    )
}

/// `schedlab bench aio`: run the comparison and print it.
pub fn run(opts: AioBenchOptions) -> anyhow::Result<()> {
    outln!("aio bench: {}", describe(&opts))?;
    // Lines as trials finish; a closed standard output shows in the lines
    // after the measurement.
    let report = measure(&opts, |t, trial| {
        if t == 1 {
            let _ = outln!(
                "trial  {:>10} {:>10} {:>9} {:>9}   {:>10} {:>10} {:>9} {:>9}   {:>8}",
                "ours MB/s",
                "ours IOPS",
                "p50 µs",
                "p99 µs",
                "fio MB/s",
                "fio IOPS",
                "p50 µs",
                "p99 µs",
                "ours/fio"
            );
        }
        let _ = outln!("{}", trial_line(t, trial));
    })?;
    outln!("{} (ioengine=io_uring, one job)", report.fio_version)?;
    outln!("{}", summary(&report))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIO_JSON: &str = r#"fio: some warning
{
  "fio version" : "fio-3.33",
  "jobs" : [
    {
      "jobname" : "schedlab-aio",
      "error" : 0,
      "read" : {
        "io_bytes" : 64237568, "bw_bytes" : 213413847, "iops" : 52102.99,
        "clat_ns" : { "percentile" : { "50.000000" : 87552, "99.000000" : 250880 } }
      },
      "write" : {
        "io_bytes" : 27467776, "bw_bytes" : 91255069, "iops" : 22279.07,
        "clat_ns" : { "percentile" : { "50.000000" : 94720, "99.000000" : 301056 } }
      }
    }
  ]
}"#;

    #[test]
    fn parses_fio_json() {
        let s = parse_fio_json(FIO_JSON).unwrap();
        assert!((s.mb_per_s - 304.668916).abs() < 1e-6, "{s:?}");
        assert!((s.iops - 74382.06).abs() < 1e-6);
        assert_eq!((s.lat_p50_us, s.lat_p99_us), (87.552, 250.88));
        // Only writes: the latency comes from the write side.
        let w = FIO_JSON
            .replace("\"bw_bytes\" : 213413847", "\"bw_bytes\" : 0")
            .replace("\"iops\" : 52102.99", "\"iops\" : 0");
        let s = parse_fio_json(&w).unwrap();
        assert_eq!(s.lat_p50_us, 94.72);
        assert!(parse_fio_json("no json here").is_err());
        assert!(parse_fio_json(r#"{"jobs": []}"#).is_err());
        let failed = FIO_JSON.replace("\"error\" : 0", "\"error\" : 5");
        assert!(format!("{:#}", parse_fio_json(&failed).unwrap_err()).contains("error 5"));
    }

    #[test]
    fn fio_args_match_the_options() {
        let mut o = AioBenchOptions::default();
        let a = o.fio_args(Path::new("/x/aio.dat"));
        for want in [
            "--filename=/x/aio.dat",
            "--ioengine=io_uring",
            "--direct=1",
            "--rw=randread",
            "--bs=4096",
            "--iodepth=32",
            "--size=67108864",
            "--time_based",
            "--runtime=5000ms",
            "--numjobs=1",
            "--output-format=json",
        ] {
            assert!(a.iter().any(|x| x == want), "{want} missing from {a:?}");
        }
        o.read_pct = 70;
        o.direct = false;
        o.duration_s = 0.25;
        let a = o.fio_args(Path::new("/x/aio.dat"));
        for want in [
            "--rw=randrw",
            "--rwmixread=70",
            "--direct=0",
            "--runtime=250ms",
            "--buffer_pattern=0x5a",
        ] {
            assert!(a.iter().any(|x| x == want), "{want} missing from {a:?}");
        }
        o.read_pct = 0;
        assert!(
            o.fio_args(Path::new("f"))
                .contains(&"--rw=randwrite".to_string())
        );
    }

    #[test]
    fn spread_and_verdict() {
        let s = Spread::of(&[3.0, 1.0, 2.0]);
        assert_eq!((s.median, s.min, s.max), (2.0, 1.0, 3.0));
        assert_eq!(Spread::of(&[1.0, 4.0]).median, 2.5);
        let side = |mb| Side {
            mb_per_s: mb,
            iops: mb,
            lat_p50_us: 1.0,
            lat_p99_us: 2.0,
        };
        let report = |ours: f64| AioBenchReport {
            trials: vec![Trial {
                ours: side(ours),
                fio: side(100.0),
                ours_first: true,
            }],
            fio_version: "fio".into(),
        };
        assert!(report(95.0).within_10_pct());
        assert!(!report(85.0).within_10_pct());
        assert!(summary(&report(85.0)).contains("NOT within 10%"));
    }

    #[test]
    fn invalid_options_are_refused_before_anything_runs() {
        let o = AioBenchOptions {
            block_bytes: 1000,
            ..Default::default()
        };
        let e = format!("{:#}", measure(&o, |_, _| {}).unwrap_err());
        assert!(e.contains("block_bytes"), "{e}");
        let o = AioBenchOptions {
            trials: 0,
            ..Default::default()
        };
        assert!(measure(&o, |_, _| {}).is_err());
    }

    #[test]
    fn short_comparison_when_fio_is_installed() {
        let fio = fio_version();
        let why = fio.as_ref().err().map(|e| format!("{e:#}"));
        if !crate::testing::require_tool(
            fio.is_ok(),
            format!(
                "fio, the reference, is not usable: {}",
                why.unwrap_or_default()
            ),
        ) {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let o = AioBenchOptions {
            file_bytes: 4 << 20,
            duration_s: 0.1,
            trials: 2,
            dir: dir.path().to_path_buf(),
            ..Default::default()
        };
        let mut seen = 0;
        let r = measure(&o, |_, _| seen += 1).unwrap();
        assert_eq!((seen, r.trials.len()), (2, 2));
        assert!(r.trials[0].ours_first && !r.trials[1].ours_first);
        for t in &r.trials {
            assert!(t.ours.mb_per_s > 0.0 && t.fio.mb_per_s > 0.0, "{t:?}");
        }
        // The temporary directory is gone.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
