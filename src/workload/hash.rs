//! The hash workload: crypt-like chained SHA-256, integer CPU work with a
//! tiny working set, the shape of password hashing on a login server.
//!
//! This file owns the definition of one "hash" (`crypt_hash`), how results
//! are folded so the work cannot be optimised away (`fold`), and the worker
//! loop. Figures: `hash_per_s`, `digest_fold` (low 32 bits of the fold, as
//! f64, which is exact).

use super::kind::{Entry, Kind, scale_stop, stop_cost_s};
use super::modelled::{Compute, ModelTask, Rate, Scale};
use super::{Deadline, Stop, WorkOutput, elapsed_ns, figures, per_second};
use super::{Rates, WorkContext, Workload};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::time::Instant;

/// Crypt-like hashing. Work unit: hashes; one hash = `rounds` chained SHA-256.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HashParams {
    pub stop: Stop,
    pub rounds: u32,
}

/// The password every hash chains in.
pub const PASSWORD: &[u8] = b"schedlab";

/// Rounds at which `calibrate` measures `Rates::hash_per_s`.
pub const CALIBRATION_ROUNDS: u32 = 16;

/// Hashes between clock reads in duration mode.
pub const CLOCK_EVERY: u64 = 256;

/// One hash: the state starts as SHA-256(password ‖ salt ‖ counter), with
/// salt and counter as little-endian u64, then `rounds` times
/// state = SHA-256(state ‖ password).
pub fn crypt_hash(salt: u64, counter: u64, rounds: u32) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(PASSWORD);
    h.update(salt.to_le_bytes());
    h.update(counter.to_le_bytes());
    let mut state: [u8; 32] = h.finalize().into();
    for _ in 0..rounds {
        let mut h = Sha256::new();
        h.update(state);
        h.update(PASSWORD);
        state = h.finalize().into();
    }
    state
}

/// Fold a final state into the running accumulator (order-dependent, so
/// every hash and its position matter).
pub fn fold(acc: u64, state: &[u8; 32]) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&state[..8]);
    acc.rotate_left(5) ^ u64::from_le_bytes(word)
}

/// Worker loop for the hash workload; `salt` is the process index; a
/// duration counts from `release_ns` (see `Deadline`).
pub fn run(p: &HashParams, salt: u64, release_ns: Option<u64>) -> anyhow::Result<WorkOutput> {
    let mut acc = 0u64;
    let mut done = 0u64;
    let start = Instant::now();
    match p.stop {
        Stop::Work(count) => {
            for counter in 0..count {
                acc = fold(acc, &crypt_hash(salt, counter, p.rounds));
            }
            done = count;
        }
        Stop::DurationNs(ns) => {
            let end = Deadline::after(release_ns, ns);
            while !end.past() {
                for _ in 0..CLOCK_EVERY {
                    acc = fold(acc, &crypt_hash(salt, done, p.rounds));
                    done += 1;
                }
            }
        }
    }
    let elapsed = elapsed_ns(start);
    Ok(WorkOutput {
        work: done,
        elapsed_ns: elapsed,
        figures: figures([
            ("hash_per_s", per_second(done as f64, elapsed)),
            ("digest_fold", f64::from(acc as u32)),
        ]),
        latency: Default::default(),
    })
}

impl Kind for HashParams {
    fn name(&self) -> &'static str {
        "hash"
    }
    fn work_unit(&self) -> &'static str {
        "hashes"
    }
    fn stop(&self) -> Stop {
        self.stop
    }
    fn set_stop(&mut self, stop: Stop) {
        self.stop = stop;
    }
    fn scaled(&self, f: f64) -> Workload {
        Workload::Hash(HashParams {
            stop: scale_stop(self.stop, f),
            ..self.clone()
        })
    }
    fn run(&self, ctx: &WorkContext) -> anyhow::Result<WorkOutput> {
        run(self, ctx.index as u64, ctx.release_ns)
    }
    /// The rate was measured at 16 rounds; one hash costs rounds + 1
    /// SHA-256 calls (the seed derivation plus the chain).
    fn estimate_cpu_s(&self, rates: &Rates) -> f64 {
        let per_hash = (f64::from(self.rounds) + 1.0)
            / (f64::from(CALIBRATION_ROUNDS) + 1.0)
            / rates.hash_per_s;
        stop_cost_s(self.stop, per_hash)
    }
    /// CPU at the calibrated hash rate, which is kept at the calibration's
    /// 16 rounds.
    fn model(&self) -> ModelTask<'_> {
        ModelTask::Compute(Compute {
            rate: Rate::Hash,
            calibrate: Scale {
                num: f64::from(self.rounds) + 1.0,
                den: f64::from(CALIBRATION_ROUNDS) + 1.0,
            },
            figure: ("hash_per_s", Scale::ONE),
        })
    }
}

/// The hash workload's registration.
pub const ENTRY: Entry = Entry {
    name: "hash",
    parse: |k| {
        k.only(&["hashes", "rounds", "duration_s"])?;
        let rounds = k.positive_or("rounds", 16)?;
        if rounds > 1_000_000 {
            return Err(k.err(
                "rounds",
                format!("at most 1000000 SHA-256 rounds per hash, got {rounds}"),
            ));
        }
        Ok(Workload::Hash(HashParams {
            stop: k.stop("hashes", 2_000_000)?,
            rounds: rounds as u32,
        }))
    },
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_sha256_definition() {
        // Zero rounds is the seed alone: SHA-256 of "schedlab" ‖ 0u64 ‖ 0u64.
        let mut seed_input = PASSWORD.to_vec();
        seed_input.extend_from_slice(&[0u8; 16]);
        let seed: [u8; 32] = Sha256::digest(&seed_input).into();
        assert_eq!(crypt_hash(0, 0, 0), seed);
        let mut next_input = seed.to_vec();
        next_input.extend_from_slice(PASSWORD);
        let next: [u8; 32] = Sha256::digest(&next_input).into();
        assert_eq!(crypt_hash(0, 0, 1), next);
        // Known SHA-256 vector, to pin the library's behaviour.
        let abc: [u8; 32] = Sha256::digest(b"abc").into();
        assert_eq!(abc[..4], [0xba, 0x78, 0x16, 0xbf]);
    }

    #[test]
    fn deterministic_and_salted() {
        let p = HashParams {
            stop: Stop::Work(50),
            rounds: 4,
        };
        let a = run(&p, 1, None).unwrap();
        let b = run(&p, 1, None).unwrap();
        let c = run(&p, 2, None).unwrap();
        assert_eq!(a.figures["digest_fold"], b.figures["digest_fold"]);
        assert_ne!(a.figures["digest_fold"], c.figures["digest_fold"]);
        assert_ne!(crypt_hash(1, 0, 4), crypt_hash(1, 1, 4));
        assert_ne!(crypt_hash(1, 0, 4), crypt_hash(1, 0, 5));
    }

    #[test]
    fn work_count_is_exact() {
        for count in [0, 1, 257] {
            let out = run(
                &HashParams {
                    stop: Stop::Work(count),
                    rounds: 2,
                },
                0,
                None,
            )
            .unwrap();
            assert_eq!(out.work, count);
        }
        // The fold covers exactly `count` hashes.
        let expected = (0..3).fold(0, |acc, i| fold(acc, &crypt_hash(7, i, 2)));
        let out = run(
            &HashParams {
                stop: Stop::Work(3),
                rounds: 2,
            },
            7,
            None,
        )
        .unwrap();
        assert_eq!(out.figures["digest_fold"], f64::from(expected as u32));
    }

    #[test]
    fn duration_mode_checks_clock_in_batches() {
        let out = run(
            &HashParams {
                stop: Stop::DurationNs(5_000_000),
                rounds: 1,
            },
            0,
            None,
        )
        .unwrap();
        assert!(out.work >= CLOCK_EVERY && out.work.is_multiple_of(CLOCK_EVERY));
        assert!(out.elapsed_ns >= 5_000_000);
        assert!(out.figures["hash_per_s"] > 0.0);
    }
}
