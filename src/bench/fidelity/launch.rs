//! The launch row of the fidelity benchmark: what starting, releasing and
//! collecting one worker costs schedlab, against the plainest way to start
//! the same binary, a C loop of fork + exec + wait.
//!
//! Ours: the wall time of the whole `schedlab run` command (spawn to exit,
//! seen from here) of a run of N tiny pi workers (1,000 iterations each,
//! SCHED_OTHER, all CPUs), minus that of a run of 1 such worker, over N − 1.
//! The difference takes out what does not grow with the workers (loading the
//! spec, creating the database, calibrating, the environment snapshot),
//! and keeps everything each worker costs: fork and exec of the schedlab
//! binary in worker mode, setting its policy, the barrier, its result file,
//! reaping, `/proc` reads and its row in SQLite.
//!
//! Reference: the C `forkexec` loop (`cloops`) runs `schedlab --version` N
//! times, each forked, exec'd and waited for before the next, and times
//! itself; per worker = its time / N.

use super::ours::{self, OursSpec};
use super::{Ctx, Problem, Side, cloops};
use std::time::Duration;

fn spec(ctx: &Ctx, workers: u32, trial: u32) -> OursSpec {
    OursSpec {
        name: format!("fidelity-launch-{workers}-{trial}"),
        policy: "other",
        rt_priority: None,
        processes: workers,
        cpus: "all".into(),
        workload: vec!["kind = \"pi\"".into(), "iterations = 1000".into()],
        timeout_s: 60.0 + f64::from(ctx.sizes.launch_workers) * 0.1,
    }
}

/// Our cost per worker, ms.
pub fn ours(ctx: &mut Ctx, trial: u32) -> Result<Side, Problem> {
    let n = ctx.sizes.launch_workers;
    if n < 2 {
        return Err(Problem::Fail(format!(
            "the launch row needs at least 2 workers, got {n}"
        )));
    }
    let one = ours::run(&ctx.exe, &ctx.dir, &spec(ctx, 1, trial))?;
    let many = ours::run(&ctx.exe, &ctx.dir, &spec(ctx, n, trial))?;
    if many.workers.len() != n as usize {
        return Err(Problem::Fail(format!(
            "schedlab stored {} workers instead of {n}",
            many.workers.len()
        )));
    }
    let (t1, tn) = (
        one.command_wall.as_secs_f64(),
        many.command_wall.as_secs_f64(),
    );
    Ok(Side {
        values: vec![(tn - t1) / f64::from(n - 1) * 1e3],
        note: Some(format!(
            "`schedlab run` took {tn:.3} s with {n} workers, {t1:.3} s with 1 ({:.2} ms per worker without \
             the subtraction)",
            tn / f64::from(n) * 1e3
        )),
    })
}

/// The C loop's cost per fork + exec + wait of `schedlab --version`, ms.
pub fn reference(ctx: &mut Ctx) -> Result<Side, Problem> {
    let n = ctx.sizes.launch_workers;
    let exe = ctx.exe.to_string_lossy().into_owned();
    let c = ctx.cloops()?.clone();
    let f = cloops::run(
        &c.forkexec,
        &[n.to_string(), "-1".into(), exe, "--version".into()],
        &["count", "elapsed_ns"],
        Duration::from_secs(60 + u64::from(n) / 10),
    )
    .map_err(Problem::Fail)?;
    Ok(Side {
        values: vec![f["elapsed_ns"] / f["count"].max(1.0) / 1e6],
        note: None,
    })
}
