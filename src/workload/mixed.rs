//! The mixed workload: rounds of CPU work (`pi_iterations` of the Leibniz
//! series) followed by I/O (`copy_bytes` of copy with the given chunk size
//! and sync mode), the classic shape of a process that alternates CPU
//! bursts with blocking I/O, which schedulers treat differently from pure
//! CPU hogs.
//!
//! This file owns only the alternation; the pi series and the copier come
//! from `pi` and `copy`. The series continues across rounds, so the final
//! estimate is checked like a pi run of rounds × pi_iterations. Every round
//! copies the input prefix from offset 0 over the same output file.
//! Figures: `pi_error`, `mb_per_s` (1e6 bytes/s over the copy phases only,
//! so it is comparable with the copy workload's figure).

use super::copy::Copier;
use super::kind::{Entry, Kind, scale_amount};
use super::modelled::ModelTask;
use super::pi::PiSeries;
use super::{
    Deadline, INPUT_FILE, Rates, Stop, SyncMode, WorkContext, WorkOutput, Workload, elapsed_ns,
    figures, output_path, per_second,
};
use anyhow::ensure;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::Instant;

/// Alternating pi and copy. `Stop::Work(rounds)`; one round = `pi_iterations`
/// of pi then `copy_bytes` of copy; work unit: rounds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MixedParams {
    pub stop: Stop,
    pub pi_iterations: u64,
    pub copy_bytes: u64,
    pub chunk_bytes: u64,
    pub sync: SyncMode,
}

/// One round: pi, then one copy pass from offset 0. Returns the
/// nanoseconds spent in the copy phase.
pub fn round(series: &mut PiSeries, copier: &mut Copier, p: &MixedParams) -> anyhow::Result<u64> {
    series.advance(p.pi_iterations);
    let copy_start = Instant::now();
    copier.rewind();
    copier.copy_pass(p.copy_bytes)?;
    Ok(elapsed_ns(copy_start))
}

/// Worker loop for the mixed workload.
pub fn run(p: &MixedParams, ctx: &WorkContext) -> anyhow::Result<WorkOutput> {
    let input = ctx.dir.join(INPUT_FILE);
    let output = output_path(&ctx.dir, ctx.index);
    let mut copier = Copier::open(&input, &output, p.chunk_bytes, p.sync)?;
    let mut series = PiSeries::new();
    let timed = (|| {
        ensure!(
            copier.input_len() >= p.copy_bytes,
            "{} holds {} bytes but each round copies {}; was prepare() run for this workload?",
            input.display(),
            copier.input_len(),
            p.copy_bytes
        );
        let mut rounds = 0u64;
        let mut copy_ns = 0u64;
        let start = Instant::now();
        match p.stop {
            Stop::Work(n) => {
                for _ in 0..n {
                    copy_ns += round(&mut series, &mut copier, p)?;
                    rounds += 1;
                }
            }
            Stop::DurationNs(ns) => {
                let end = Deadline::after(ctx.release_ns, ns);
                while !end.past() {
                    copy_ns += round(&mut series, &mut copier, p)?;
                    rounds += 1;
                }
            }
        }
        Ok((rounds, elapsed_ns(start), copy_ns))
    })();
    let (rounds, elapsed, copy_ns) = match timed {
        Ok(t) => t,
        Err(e) => {
            // Best effort: do not leave a partial output behind.
            let _ = std::fs::remove_file(&output);
            return Err(e);
        }
    };
    let stats = copier.finish()?;
    series.check()?;
    Ok(WorkOutput {
        work: rounds,
        elapsed_ns: elapsed,
        figures: figures([
            ("pi_error", series.error()),
            ("mb_per_s", per_second(stats.bytes as f64, copy_ns) / 1e6),
        ]),
        latency: Default::default(),
    })
}

impl Kind for MixedParams {
    fn name(&self) -> &'static str {
        "mixed"
    }
    fn work_unit(&self) -> &'static str {
        "rounds"
    }
    fn stop(&self) -> Stop {
        self.stop
    }
    fn set_stop(&mut self, stop: Stop) {
        self.stop = stop;
    }
    /// Scales `pi_iterations` and `copy_bytes` but keeps the rounds, which
    /// shape the CPU/I-O alternation being studied (a duration scales).
    fn scaled(&self, f: f64) -> Workload {
        Workload::Mixed(MixedParams {
            stop: match self.stop {
                Stop::Work(rounds) => Stop::Work(rounds),
                Stop::DurationNs(ns) => Stop::DurationNs(scale_amount(ns, f)),
            },
            pi_iterations: scale_amount(self.pi_iterations, f),
            copy_bytes: scale_amount(self.copy_bytes, f),
            ..self.clone()
        })
    }
    fn needs_dir(&self) -> bool {
        true
    }
    fn disk_bytes(&self, processes: u32) -> u64 {
        self.copy_bytes
            .saturating_mul(u64::from(processes).saturating_add(1))
    }
    fn buffer_bytes(&self) -> u64 {
        self.chunk_bytes
    }
    fn prepare(&self, dir: &Path, until: Option<Instant>) -> anyhow::Result<()> {
        super::copy::write_input_until(&dir.join(INPUT_FILE), self.copy_bytes, true, until)
    }
    fn run(&self, ctx: &WorkContext) -> anyhow::Result<WorkOutput> {
        run(self, ctx)
    }
    fn estimate_cpu_s(&self, rates: &Rates) -> f64 {
        let per_round = self.pi_iterations as f64 / rates.pi_iter_per_s
            + self.copy_bytes as f64 / rates.copy_bytes_per_s;
        super::kind::stop_cost_s(self.stop, per_round)
    }
    fn model(&self) -> ModelTask<'_> {
        ModelTask::Mixed(self)
    }
}

/// The mixed workload's registration.
pub const ENTRY: Entry = Entry {
    name: "mixed",
    parse: |k| {
        k.only(&[
            "rounds",
            "iterations",
            "bytes",
            "chunk_bytes",
            "sync",
            "duration_s",
        ])?;
        let copy_bytes = k.positive_or("bytes", 1_024_000)?;
        let sync = super::copy::sync_key(k)?;
        let chunk_bytes = super::copy::chunk_key(k, Some(copy_bytes), sync)?;
        Ok(Workload::Mixed(MixedParams {
            stop: k.stop("rounds", 10)?,
            pi_iterations: k.positive_or("iterations", 100_000_000)?,
            copy_bytes,
            chunk_bytes,
            sync,
        }))
    },
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{SyncMode, Workload};

    fn params(stop: Stop, sync: SyncMode) -> MixedParams {
        MixedParams {
            stop,
            pi_iterations: 10_000,
            copy_bytes: 16 << 10,
            chunk_bytes: 4096,
            sync,
        }
    }

    fn run_in_tempdir(p: MixedParams) -> WorkOutput {
        let dir = tempfile::tempdir().unwrap();
        let w = Workload::Mixed(p);
        w.prepare(dir.path(), None).unwrap();
        let ctx = WorkContext {
            fds: Vec::new(),
            dir: dir.path().to_path_buf(),
            index: 4,
            release_ns: None,
        };
        let out = w.run(&ctx).unwrap();
        assert!(!output_path(dir.path(), 4).exists(), "output not removed");
        out
    }

    #[test]
    fn work_mode_counts_rounds() {
        for sync in [SyncMode::None, SyncMode::FsyncEnd, SyncMode::Direct] {
            let out = run_in_tempdir(params(Stop::Work(5), sync));
            assert_eq!(out.work, 5, "{sync:?}");
            // 5 rounds × 10 000 iterations continue one series.
            assert!(out.figures["pi_error"] < 2.0 / 50_000.0, "{out:?}");
            assert!(out.figures["mb_per_s"] > 0.0);
        }
    }

    #[test]
    fn duration_mode_finishes_rounds() {
        let out = run_in_tempdir(params(Stop::DurationNs(10_000_000), SyncMode::None));
        assert!(out.work >= 1);
        assert!(out.elapsed_ns >= 10_000_000);
    }

    #[test]
    fn short_input_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        crate::workload::copy::write_input(&dir.path().join(INPUT_FILE), 100, false).unwrap();
        let ctx = WorkContext {
            fds: Vec::new(),
            dir: dir.path().to_path_buf(),
            index: 0,
            release_ns: None,
        };
        let e = format!(
            "{:#}",
            run(&params(Stop::Work(1), SyncMode::None), &ctx).unwrap_err()
        );
        assert!(e.contains("holds 100 bytes"), "{e}");
        assert!(!output_path(dir.path(), 0).exists());
    }
}
