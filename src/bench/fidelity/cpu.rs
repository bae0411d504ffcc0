//! The CPU rows of the fidelity benchmark, both sides: schedlab's pi and
//! matmul workloads against the same loops in C (`cloops`), one process
//! pinned to the same CPU under SCHED_OTHER at nice 0, the same iteration
//! count or number of multiplies.
//!
//! Speed is work per second. Ours: the worker's `work` over its measured
//! window (`end_ns − start_ns`, which also holds the worker's own set-up
//! of a few µs: matrices, usage samples). C: its own clock around the loop.
//! The result of both (pi's error, matmul's checksum) must be the same
//! number; a difference means the loops are not alike, and fails the row.

use std::time::Duration;

use super::ours::{self, OursSpec};
use super::{CPU, Ctx, Problem, Side, cloops};

fn fail(m: impl Into<String>) -> Problem {
    Problem::Fail(m.into())
}

fn c_timeout(expected_s: f64) -> Duration {
    Duration::from_secs_f64(expected_s * 10.0 + 30.0)
}

pub fn pi_spec(ctx: &Ctx, trial: u32) -> OursSpec {
    OursSpec {
        name: format!("fidelity-pi-{trial}"),
        policy: "other",
        rt_priority: None,
        processes: 1,
        cpus: CPU.to_string(),
        workload: vec![
            "kind = \"pi\"".into(),
            format!("iterations = {}", ctx.sizes.pi_iterations),
        ],
        timeout_s: 60.0 + ctx.sizes.pi_iterations as f64 / 1e7,
    }
}

pub fn matmul_spec(ctx: &Ctx, trial: u32) -> OursSpec {
    let s = &ctx.sizes;
    OursSpec {
        name: format!("fidelity-matmul-{trial}"),
        policy: "other",
        rt_priority: None,
        processes: 1,
        cpus: CPU.to_string(),
        workload: vec![
            "kind = \"matmul\"".into(),
            format!("n = {}", s.matmul_n),
            format!("multiplies = {}", s.matmul_multiplies),
        ],
        timeout_s: 60.0
            + crate::workload::matmul::flops_per_multiply(s.matmul_n) * s.matmul_multiplies as f64
                / 1e8,
    }
}

/// Work per second of the one worker of `spec`, and the figure `result`.
fn ours_speed(ctx: &Ctx, spec: &OursSpec, result: &str) -> Result<(f64, f64), Problem> {
    let run = ours::run(&ctx.exe, &ctx.dir, spec)?;
    let work = run.run_value("work")?;
    let window_s = (run.run_value("end_ns")? - run.run_value("start_ns")?) / 1e9;
    if window_s <= 0.0 {
        return Err(fail(format!("the worker's window is {window_s} s")));
    }
    Ok((work / window_s, run.run_value(result)?))
}

/// Both results must be the same number (`tolerance`: relative).
fn same_result(what: &str, ours: f64, c: f64, tolerance: f64) -> Result<(), Problem> {
    if (ours - c).abs() <= tolerance * c.abs().max(f64::MIN_POSITIVE) {
        Ok(())
    } else {
        Err(fail(format!(
            "the loops differ: schedlab's {what} is {ours:e}, C's {c:e}"
        )))
    }
}

/// Keep a result of one side for the comparison with the other.
fn remember(ctx: &mut Ctx, key: &'static str, v: f64) {
    ctx.results.insert(key, v);
}

fn remembered(ctx: &Ctx, key: &str) -> Option<f64> {
    ctx.results.get(key).copied()
}

/// Our pi speed, iterations/s.
pub fn pi_ours(ctx: &mut Ctx, trial: u32) -> Result<Side, Problem> {
    let (speed, error) = ours_speed(ctx, &pi_spec(ctx, trial), "pi_error")?;
    remember(ctx, "pi-ours", error);
    if let Some(c) = remembered(ctx, "pi-c") {
        same_result("π error", error, c, 1e-12)?;
    }
    Ok(Side {
        values: vec![speed],
        note: None,
    })
}

/// The C pi speed, iterations/s.
pub fn pi_c(ctx: &mut Ctx) -> Result<Side, Problem> {
    let n = ctx.sizes.pi_iterations;
    let c = ctx.cloops()?.clone();
    let f = cloops::run(
        &c.pi,
        &[n.to_string(), CPU.to_string()],
        &["iterations", "elapsed_ns", "error"],
        c_timeout(n as f64 / 1e8),
    )
    .map_err(fail)?;
    remember(ctx, "pi-c", f["error"]);
    if let Some(o) = remembered(ctx, "pi-ours") {
        same_result("π error", o, f["error"], 1e-12)?;
    }
    Ok(Side {
        values: vec![f["iterations"] / (f["elapsed_ns"].max(1.0) / 1e9)],
        note: None,
    })
}

/// Our matmul speed, flop/s (2n³ per multiply).
pub fn matmul_ours(ctx: &mut Ctx, trial: u32) -> Result<Side, Problem> {
    let (speed, checksum) = ours_speed(ctx, &matmul_spec(ctx, trial), "checksum")?;
    remember(ctx, "matmul-ours", checksum);
    if let Some(c) = remembered(ctx, "matmul-c") {
        same_result("checksum", checksum, c, 1e-12)?;
    }
    Ok(Side {
        values: vec![speed * crate::workload::matmul::flops_per_multiply(ctx.sizes.matmul_n)],
        note: None,
    })
}

/// The C matmul speed, flop/s, built for this CPU (`-march=native`: its
/// widest vectors, which schedlab's multiply picks at run time); the note
/// gives the portable `-O3` build's speed beside it.
pub fn matmul_c(ctx: &mut Ctx) -> Result<Side, Problem> {
    let (n, m) = (ctx.sizes.matmul_n, ctx.sizes.matmul_multiplies);
    let flops = crate::workload::matmul::flops_per_multiply(n);
    let c = ctx.cloops()?.clone();
    let speed = |bin: &std::path::Path| -> Result<(f64, f64), Problem> {
        let f = cloops::run(
            bin,
            &[n.to_string(), m.to_string(), CPU.to_string()],
            &["multiplies", "elapsed_ns", "checksum"],
            c_timeout(flops * m as f64 / 1e9),
        )
        .map_err(fail)?;
        Ok((
            f["multiplies"] * flops / (f["elapsed_ns"].max(1.0) / 1e9),
            f["checksum"],
        ))
    };
    let (base, checksum) = speed(&c.matmul)?;
    let (native, native_checksum) = speed(&c.matmul_native)?;
    same_result("checksum (-march=native)", checksum, native_checksum, 1e-12)?;
    remember(ctx, "matmul-c", checksum);
    if let Some(o) = remembered(ctx, "matmul-ours") {
        same_result("checksum", o, checksum, 1e-12)?;
    }
    Ok(Side {
        values: vec![native],
        note: Some(format!(
            "cc {} (the instruction set of a portable build, without this CPU's wider vectors): {:.0} Mflop/s, {:.2}× the -march=native build",
            cloops::MATMUL_FLAGS.join(" "),
            base / 1e6,
            base / native.max(f64::MIN_POSITIVE)
        )),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::fidelity::{FidelityOptions, Sizes};

    #[test]
    fn specs_are_valid_and_pinned() {
        let ctx = Ctx {
            exe: "schedlab".into(),
            dir: "/tmp".into(),
            sizes: Sizes::of(FidelityOptions { quick: true }),
            cloops: None,
            results: Default::default(),
        };
        for s in [pi_spec(&ctx, 1), matmul_spec(&ctx, 2)] {
            let spec = crate::spec::load(&s.toml(), "test", &[]).unwrap();
            assert_eq!(spec.cpus[0].label(), "0");
            assert_eq!(crate::plan::expand(&spec, 0).len(), 1);
        }
    }

    #[test]
    fn results_must_agree() {
        assert!(same_result("x", 1.0, 1.0, 1e-12).is_ok());
        assert!(same_result("x", 0.0, 0.0, 1e-12).is_ok());
        let Err(Problem::Fail(e)) = same_result("checksum", 1.0, 1.1, 1e-12) else {
            panic!("no failure")
        };
        assert!(e.contains("loops differ"), "{e}");
    }
}
