//! The matmul workload: dense n×n f64 matrix multiply C = A·B, the classic
//! FPU- and memory-bandwidth-bound kernel (its cache footprint, 24·n² bytes,
//! makes it sensitive to migrations and to sharing a core's caches).
//!
//! This file owns the deterministic inputs (`matrix_a`, `matrix_b`), the
//! i-k-j multiply (`multiply`), the checksum identity that verifies it
//! (`check_product`), and the worker loop. Figures: `mflops`
//! (2n³·multiplies / elapsed / 1e6), `checksum` (sum of C).

use super::kind::{Entry, Kind, scale_amount, stop_cost_s};
use super::modelled::{Compute, ModelTask, Rate, Scale};
use super::{Deadline, Stop, WorkOutput, elapsed_ns, figures};
use super::{Rates, WorkContext, Workload};
use anyhow::{Context, ensure};
use serde::{Deserialize, Serialize};
use std::hint::black_box;
use std::time::Instant;

/// Dense matrix multiply. `Stop::Work(number of n×n multiplies)`; work unit: multiplies.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MatmulParams {
    pub n: u64,
    pub stop: Stop,
}

/// Largest n accepted: three 16384² matrices already take 6 GiB.
pub const MAX_N: u64 = 16_384;

/// Floating-point operations of one n×n multiply (one multiply and one add
/// per inner step).
pub fn flops_per_multiply(n: u64) -> f64 {
    2.0 * (n as f64).powi(3)
}

/// A[i][j] = ((i·7 + j·3) mod 17) / 17 − 0.5, row-major.
pub fn matrix_a(n: usize) -> Vec<f64> {
    matrix(n, |i, j| ((i * 7 + j * 3) % 17) as f64 / 17.0 - 0.5)
}

/// B[i][j] = ((i·5 + j·11) mod 13) / 13 − 0.5, row-major. A different
/// pattern from A so that the product is not symmetric by accident.
pub fn matrix_b(n: usize) -> Vec<f64> {
    matrix(n, |i, j| ((i * 5 + j * 11) % 13) as f64 / 13.0 - 0.5)
}

fn matrix(n: usize, f: impl Fn(usize, usize) -> f64) -> Vec<f64> {
    (0..n * n).map(|x| f(x / n, x % n)).collect()
}

/// C = A·B for row-major n×n matrices, in i-k-j order: the inner loop
/// streams rows of B into a row of C, which is cache-friendly and
/// vectorises without reassociating any sum. Four rows of B are taken per
/// pass over the row of C (`K_BLOCK`), so C's row is loaded and stored a
/// quarter as often; each element still adds its products one at a time
/// in k order, so the result is bit-identical to the plain loop.
pub fn multiply(n: usize, a: &[f64], b: &[f64], c: &mut [f64]) {
    // A caller bug, not a user or OS condition: `run` builds all three.
    assert!(
        a.len() == n * n && b.len() == n * n && c.len() == n * n,
        "multiply: matrices must hold n² = {} elements",
        n * n
    );
    if n == 0 {
        return;
    }
    product(n, a, b, c);
}

/// [`multiply`]'s loops, compiled for each vector width below and run at
/// the widest this CPU has (detected once, at the first call): a portable
/// build of schedlab then multiplies as fast as C built with
/// `-march=native`. Each lane adds one element's products in k order and
/// nothing is fused into a multiply-add (Rust never contracts), so every
/// width gives the same bits.
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512vl+avx2+avx+fma",
    "x86_64+avx2+avx+fma",
    "x86_64+avx",
))]
fn product(n: usize, a: &[f64], b: &[f64], c: &mut [f64]) {
    for (a_row, c_row) in a.chunks_exact(n).zip(c.chunks_exact_mut(n)) {
        c_row.fill(0.0);
        let mut a_blocks = a_row.chunks_exact(K_BLOCK);
        for (a_k, b_rows) in (&mut a_blocks).zip(b.chunks_exact(K_BLOCK * n)) {
            let (b0, rest) = b_rows.split_at(n);
            let (b1, rest) = rest.split_at(n);
            let (b2, b3) = rest.split_at(n);
            let (a0, a1, a2, a3) = (a_k[0], a_k[1], a_k[2], a_k[3]);
            let rows = c_row.iter_mut().zip(b0).zip(b1).zip(b2).zip(b3);
            for ((((c_ij, &x0), &x1), &x2), &x3) in rows {
                *c_ij = (((*c_ij + a0 * x0) + a1 * x1) + a2 * x2) + a3 * x3;
            }
        }
        let rest = a_blocks.remainder();
        let b_rest = &b[(n - rest.len()) * n..];
        for (&a_ik, b_row) in rest.iter().zip(b_rest.chunks_exact(n)) {
            for (c_ij, &b_kj) in c_row.iter_mut().zip(b_row) {
                *c_ij += a_ik * b_kj;
            }
        }
    }
}

/// Rows of B added per pass over a row of C in [`multiply`].
const K_BLOCK: usize = 4;

/// Verify C = A·B cheaply (O(n²)) with the identity
/// sum(C) = Σ_k colsum_A(k) · rowsum_B(k), to a relative error of 1e-9 of
/// Σ_k colsum|A|(k) · rowsum|B|(k), the magnitude that bounds rounding
/// (sum(C) itself may be near zero). Returns sum(C).
pub fn check_product(n: usize, a: &[f64], b: &[f64], c: &[f64]) -> anyhow::Result<f64> {
    let mut col_a = vec![0.0; n];
    let mut col_abs_a = vec![0.0; n];
    for row in a.chunks_exact(n.max(1)) {
        for (k, &x) in row.iter().enumerate() {
            col_a[k] += x;
            col_abs_a[k] += x.abs();
        }
    }
    let mut expected = 0.0;
    let mut scale = 0.0;
    for (k, row) in b.chunks_exact(n.max(1)).enumerate() {
        expected += col_a[k] * row.iter().sum::<f64>();
        scale += col_abs_a[k] * row.iter().map(|x| x.abs()).sum::<f64>();
    }
    let sum: f64 = c.iter().sum();
    let tolerance = 1e-9 * scale.max(f64::MIN_POSITIVE);
    ensure!(
        (sum - expected).abs() <= tolerance,
        "matmul check failed: sum(C) = {sum}, expected {expected} (tolerance {tolerance})"
    );
    Ok(sum)
}

/// Worker loop for the matmul workload.
pub fn run(p: &MatmulParams, release_ns: Option<u64>) -> anyhow::Result<WorkOutput> {
    ensure!(
        (1..=MAX_N).contains(&p.n),
        "matmul n must be between 1 and {MAX_N}, got {}",
        p.n
    );
    let n = usize::try_from(p.n).context("matmul n does not fit in memory")?;
    let a = matrix_a(n);
    let b = matrix_b(n);
    let mut c = vec![0.0; n * n];
    let mut done = 0u64;
    let start = Instant::now();
    // black_box on the inputs and the output of every multiply: the
    // compiler must assume A and B may have changed and that C is read, so
    // no multiply can be hoisted or skipped.
    let step = |c: &mut Vec<f64>| {
        multiply(n, black_box(&a), black_box(&b), c);
        black_box(&mut *c);
    };
    match p.stop {
        Stop::Work(count) => {
            for _ in 0..count {
                step(&mut c);
                done += 1;
            }
        }
        Stop::DurationNs(ns) => {
            let end = Deadline::after(release_ns, ns);
            while !end.past() {
                step(&mut c);
                done += 1;
            }
        }
    }
    let elapsed = elapsed_ns(start);
    let checksum = if done > 0 {
        check_product(n, &a, &b, &c)?
    } else {
        0.0
    };
    let mflops = flops_per_multiply(p.n) * done as f64 / (elapsed.max(1) as f64 / 1e9) / 1e6;
    Ok(WorkOutput {
        work: done,
        elapsed_ns: elapsed,
        figures: figures([("mflops", mflops), ("checksum", checksum)]),
        latency: Default::default(),
    })
}

impl Kind for MatmulParams {
    fn name(&self) -> &'static str {
        "matmul"
    }
    fn work_unit(&self) -> &'static str {
        "multiplies"
    }
    fn stop(&self) -> Stop {
        self.stop
    }
    fn set_stop(&mut self, stop: Stop) {
        self.stop = stop;
    }
    fn scaled(&self, f: f64) -> Workload {
        Workload::Matmul(scaled(self, f))
    }
    fn buffer_bytes(&self) -> u64 {
        self.n.saturating_mul(self.n).saturating_mul(3 * 8)
    }
    fn run(&self, ctx: &WorkContext) -> anyhow::Result<WorkOutput> {
        run(self, ctx.release_ns)
    }
    fn estimate_cpu_s(&self, rates: &Rates) -> f64 {
        stop_cost_s(self.stop, flops_per_multiply(self.n) / rates.flops_per_s)
    }
    /// CPU at the calibrated flop rate.
    fn model(&self) -> ModelTask<'_> {
        let flops = flops_per_multiply(self.n);
        ModelTask::Compute(Compute {
            rate: Rate::Flops,
            calibrate: Scale {
                num: flops,
                den: 1.0,
            },
            figure: (
                "mflops",
                Scale {
                    num: flops,
                    den: 1e6,
                },
            ),
        })
    }
}

/// Count scales while it stays at least one multiply; below that, one
/// multiply of a matrix shrunk by the cube root (never below 8, never above
/// the original n), so that total flops still shrink by about f.
fn scaled(p: &MatmulParams, f: f64) -> MatmulParams {
    match p.stop {
        Stop::DurationNs(ns) => MatmulParams {
            n: p.n,
            stop: Stop::DurationNs(scale_amount(ns, f)),
        },
        Stop::Work(count) => {
            let wanted = count as f64 * f;
            // NaN (from a NaN f) counts as "below one multiply".
            if wanted < 1.0 || wanted.is_nan() {
                // One multiply of a smaller matrix: flops go as n³, so n
                // shrinks by the cube root of the remaining factor.
                let shrink = wanted.max(0.0).cbrt();
                let floor = p.n.min(8);
                let n = ((p.n as f64 * shrink).round() as u64).clamp(floor, p.n);
                MatmulParams {
                    n,
                    stop: Stop::Work(1),
                }
            } else {
                MatmulParams {
                    n: p.n,
                    stop: Stop::Work(scale_amount(count, f)),
                }
            }
        }
    }
}

/// The matmul workload's registration.
pub const ENTRY: Entry = Entry {
    name: "matmul",
    parse: |k| {
        k.only(&["n", "multiplies", "duration_s"])?;
        let n = k.positive_or("n", 100)?;
        if n > 8192 {
            return Err(k.err(
                "n",
                format!("at most 8192 (three n×n matrices of f64), got {n}"),
            ));
        }
        Ok(Workload::Matmul(MatmulParams {
            n,
            stop: k.stop("multiplies", 1)?,
        }))
    },
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_by_two_by_hand() {
        let a = [1.0, 2.0, 3.0, 4.0];
        let b = [5.0, 6.0, 7.0, 8.0];
        let mut c = [f64::NAN; 4];
        multiply(2, &a, &b, &mut c);
        assert_eq!(c, [19.0, 22.0, 43.0, 50.0]);
        assert_eq!(check_product(2, &a, &b, &c).unwrap(), 134.0);
    }

    #[test]
    fn the_blocked_product_is_bit_identical_to_the_plain_i_k_j_loop() {
        // n below, at and around the block, and odd sizes with remainders.
        for n in [1, 2, 3, 4, 5, 7, 8, 9, 31, 75] {
            let (a, b) = (matrix_a(n), matrix_b(n));
            let mut c = vec![f64::NAN; n * n];
            multiply(n, &a, &b, &mut c);
            let mut plain = vec![0.0; n * n];
            for i in 0..n {
                for k in 0..n {
                    for j in 0..n {
                        plain[i * n + j] += a[i * n + k] * b[k * n + j];
                    }
                }
            }
            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&c), bits(&plain), "n = {n}");
        }
    }

    #[test]
    fn matrices_follow_the_formula() {
        let a = matrix_a(20);
        assert_eq!(a[0], -0.5);
        assert_eq!(a[3 * 20 + 4], ((3 * 7 + 4 * 3) % 17) as f64 / 17.0 - 0.5);
        let b = matrix_b(20);
        assert_eq!(b[2 * 20 + 1], ((2 * 5 + 11) % 13) as f64 / 13.0 - 0.5);
    }

    #[test]
    fn checksum_identity_holds_and_detects_errors() {
        let n = 37;
        let (a, b) = (matrix_a(n), matrix_b(n));
        let mut c = vec![0.0; n * n];
        multiply(n, &a, &b, &mut c);
        // Against a naive i-j-k product.
        for i in [0, 5, 36] {
            for j in [0, 17, 36] {
                let dot: f64 = (0..n).map(|k| a[i * n + k] * b[k * n + j]).sum();
                assert!((c[i * n + j] - dot).abs() < 1e-12);
            }
        }
        check_product(n, &a, &b, &c).unwrap();
        c[n + 3] += 1e-3;
        let e = check_product(n, &a, &b, &c).unwrap_err().to_string();
        assert!(e.contains("matmul check failed"), "{e}");
    }

    #[test]
    fn run_reports_mflops() {
        let out = run(
            &MatmulParams {
                n: 32,
                stop: Stop::Work(3),
            },
            None,
        )
        .unwrap();
        assert_eq!(out.work, 3);
        assert!(out.figures["mflops"] > 0.0);
        let (a, b) = (matrix_a(32), matrix_b(32));
        let mut c = vec![0.0; 32 * 32];
        multiply(32, &a, &b, &mut c);
        assert_eq!(out.figures["checksum"], c.iter().sum::<f64>());

        let d = run(
            &MatmulParams {
                n: 16,
                stop: Stop::DurationNs(5_000_000),
            },
            None,
        )
        .unwrap();
        assert!(d.work >= 1 && d.elapsed_ns >= 5_000_000);
    }

    #[test]
    fn rejects_bad_n() {
        for n in [0, MAX_N + 1] {
            let e = run(
                &MatmulParams {
                    n,
                    stop: Stop::Work(1),
                },
                None,
            )
            .unwrap_err()
            .to_string();
            assert!(e.contains("matmul n"), "{e}");
        }
    }
}
