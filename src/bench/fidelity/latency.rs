//! The latency rows of the fidelity benchmark, both sides: pingpong
//! against `perf bench sched pipe`, periodic against cyclictest, messaging
//! against hackbench. Each builds the one-run spec of schedlab's workload
//! with the same settings as the tool's command line, and reads the figures
//! the row compares.
//!
//! The workloads' spec keys and export columns: pingpong `round_trips`,
//! `transport` (lat_* = round trip per process, `round_trips_per_s`);
//! periodic `period_us`, `run_us`, `activations` (lat_* = wake-up latency);
//! messaging `senders`, `receivers`, `loops`, `message_bytes`, `transport`
//! (processes = groups × (senders + receivers); the run's `makespan_ns`).

use std::process::Command;
use std::time::Duration;

use super::ours::{self, OursSpec};
use super::{CPU, Ctx, Problem, Side, exec, reference};
use crate::sys::pmqos;

/// The tools' timeouts: generous multiples of what they should take.
fn timeout(expected_s: f64) -> Duration {
    Duration::from_secs_f64(expected_s * 5.0 + 30.0)
}

fn fail(m: impl Into<String>) -> Problem {
    Problem::Fail(m.into())
}

/// Run a reference tool, turning every way it can fail into a reason.
fn run_tool(cmd: &mut Command, what: &str, expected_s: f64) -> Result<exec::Ran, Problem> {
    let ran = exec::run(cmd, timeout(expected_s)).map_err(|e| fail(format!("{e:#}")))?;
    ran.check(what).map_err(fail)?;
    Ok(ran)
}

pub fn pingpong_spec(ctx: &Ctx, pinned: bool, trial: u32) -> OursSpec {
    let loops = ctx.sizes.pingpong_loops;
    OursSpec {
        name: format!(
            "fidelity-pingpong-{}-{trial}",
            if pinned { "pinned" } else { "unpinned" }
        ),
        policy: "other",
        rt_priority: None,
        processes: 2,
        cpus: if pinned {
            CPU.to_string()
        } else {
            "all".into()
        },
        workload: vec![
            "kind = \"pingpong\"".into(),
            format!("round_trips = {loops}"),
            "transport = \"pipe\"".into(),
        ],
        // 1 ms per round trip would already be 100 times too slow.
        timeout_s: 30.0 + loops as f64 * 1e-3,
    }
}

/// Mean round trip of ours, µs: 1 / round_trips_per_s, averaged over the
/// two ends of the pair.
pub fn pingpong_ours(ctx: &mut Ctx, pinned: bool, trial: u32) -> Result<Side, Problem> {
    let run = ours::run(&ctx.exe, &ctx.dir, &pingpong_spec(ctx, pinned, trial))?;
    let rates = run.per_worker("round_trips_per_s")?;
    if rates.iter().any(|&r| r <= 0.0 || !r.is_finite()) {
        return Err(fail(format!("round_trips_per_s {rates:?}")));
    }
    let mean_us = rates.iter().map(|r| 1e6 / r).sum::<f64>() / rates.len() as f64;
    let p50 = run.per_worker("lat_p50_us").ok();
    let p99 = run.per_worker("lat_p99_us").ok();
    Ok(Side {
        values: vec![mean_us],
        note: match (p50, p99) {
            (Some(a), Some(b)) => Some(format!(
                "round trip p50 {} µs, p99 {} µs per end",
                list(&a),
                list(&b)
            )),
            _ => None,
        },
    })
}

fn list(v: &[f64]) -> String {
    v.iter()
        .map(|x| format!("{x:.2}"))
        .collect::<Vec<_>>()
        .join("/")
}

/// perf's mean round trip, µs.
pub fn pingpong_perf(ctx: &mut Ctx, pinned: bool) -> Result<Side, Problem> {
    let loops = ctx.sizes.pingpong_loops;
    let mut cmd = if pinned {
        let mut c = Command::new("taskset");
        c.args(["-c", &CPU.to_string(), "perf"]);
        c
    } else {
        Command::new("perf")
    };
    cmd.args(reference::perf_pipe_args(loops));
    let ran = run_tool(&mut cmd, "perf bench sched pipe", loops as f64 * 50e-6)?;
    let p = reference::parse_perf_pipe(&ran.stdout).map_err(fail)?;
    if p.loops != loops {
        return Err(fail(format!(
            "perf ran {} round trips instead of {loops}",
            p.loops
        )));
    }
    Ok(Side {
        values: vec![p.usecs_per_op],
        note: None,
    })
}

pub fn periodic_spec(ctx: &Ctx, trial: u32) -> OursSpec {
    let loops = ctx.sizes.periodic_loops;
    OursSpec {
        name: format!("fidelity-periodic-{trial}"),
        policy: "fifo",
        rt_priority: Some(90),
        processes: 1,
        cpus: CPU.to_string(),
        workload: vec![
            "kind = \"periodic\"".into(),
            "period_us = 1000".into(),
            "run_us = 0".into(),
            format!("activations = {loops}"),
        ],
        timeout_s: 30.0 + loops as f64 * 2e-3,
    }
}

/// Our wake-up latency p50 and p99, µs, with `/dev/cpu_dma_latency` held
/// at 0 by the benchmark while schedlab runs, as cyclictest holds it while
/// it runs: both sides then wake from the same idle state (an idle CPU
/// polls). Without it the comparison measures the machine's idle policy,
/// not the loop: on the 2-CPU haltpoll VM this was written on, holding it
/// or not moved cyclictest's p50 from 13 to 23 µs and ours from 24 to 13.
pub fn periodic_ours(ctx: &mut Ctx, trial: u32) -> Result<Side, Problem> {
    let held = pmqos::CpuLatencyHold::hold(0);
    let run = ours::run(&ctx.exe, &ctx.dir, &periodic_spec(ctx, trial));
    let qos = match &held {
        Ok(_) => format!("{} held at 0 as cyclictest does", pmqos::PATH),
        Err(e) => format!("{} not held ({e}): cyclictest holds it", pmqos::PATH),
    };
    drop(held);
    let run = run?;
    let p50 = run.run_value("lat_p50_us")?;
    let p99 = run.run_value("lat_p99_us")?;
    let max = run.run_value("lat_max_us").ok();
    let misses = run.run_value("misses").ok();
    Ok(Side {
        values: vec![p50, p99],
        note: Some(format!(
            "max {}, misses {}; {qos}",
            max.map_or_else(|| "-".into(), |m| format!("{m:.0} µs")),
            misses.map_or_else(|| "-".into(), |m| format!("{m:.0}"))
        )),
    })
}

/// Largest latency cyclictest's histogram keeps, µs (beyond: overflows).
const HIST_MAX_US: u64 = 10_000;

/// cyclictest's wake-up latency p50 and p99, µs, from its histogram.
pub fn periodic_cyclictest(ctx: &mut Ctx, trial: u32) -> Result<Side, Problem> {
    let loops = ctx.sizes.periodic_loops;
    let hist = ctx.dir.join(format!("cyclictest-{trial}.hist"));
    let mut cmd = Command::new("cyclictest");
    cmd.args(reference::cyclictest_args(
        90,
        1000,
        CPU,
        loops,
        HIST_MAX_US,
        &hist,
    ));
    let ran =
        exec::run(&mut cmd, timeout(loops as f64 * 1e-3)).map_err(|e| fail(format!("{e:#}")))?;
    if let Err(why) = ran.check("cyclictest") {
        // Without the privilege for SCHED_FIFO 90 it is a skip, as for
        // schedlab's own run.
        let text = format!("{}{}", ran.stdout, ran.stderr).to_lowercase();
        if crate::sys::proc::euid() != 0 || text.contains("permission") {
            return Err(Problem::Skip(why));
        }
        return Err(fail(why));
    }
    let text = std::fs::read_to_string(&hist)
        .map_err(|e| fail(format!("reading cyclictest's histogram: {e}")))?;
    let h = reference::parse_cyclictest_hist(&text).map_err(fail)?;
    if h.count() != loops {
        return Err(fail(format!(
            "cyclictest's histogram holds {} wake-ups instead of {loops}",
            h.count()
        )));
    }
    let q = |p: f64| {
        h.quantile(p).ok_or_else(|| {
            fail(format!(
                "cyclictest's p{:.0} is beyond its {HIST_MAX_US} µs histogram",
                p * 100.0
            ))
        })
    };
    Ok(Side {
        values: vec![q(0.50)?, q(0.99)?],
        note: Some(format!(
            "max {}, overflows {}",
            h.max_us
                .map_or_else(|| "-".into(), |m| format!("{m:.0} µs")),
            h.overflows
        )),
    })
}

pub fn messaging_spec(ctx: &Ctx, trial: u32) -> OursSpec {
    let s = &ctx.sizes;
    OursSpec {
        name: format!("fidelity-messaging-{trial}"),
        policy: "other",
        rt_priority: None,
        processes: s.messaging_groups * 2 * s.messaging_fds,
        cpus: "all".into(),
        workload: vec![
            "kind = \"messaging\"".into(),
            format!("senders = {}", s.messaging_fds),
            format!("receivers = {}", s.messaging_fds),
            format!("loops = {}", s.messaging_loops),
            format!("message_bytes = {MESSAGE_BYTES}"),
            "transport = \"socket\"".into(),
        ],
        timeout_s: 120.0,
    }
}

/// hackbench's default message size.
pub(super) const MESSAGE_BYTES: u64 = 100;

/// Our time: the run's makespan, s.
pub fn messaging_ours(ctx: &mut Ctx, trial: u32) -> Result<Side, Problem> {
    let run = ours::run(&ctx.exe, &ctx.dir, &messaging_spec(ctx, trial))?;
    let makespan_s = run.run_value("makespan_ns")? / 1e9;
    Ok(Side {
        values: vec![makespan_s],
        note: None,
    })
}

/// hackbench's time, s.
pub fn messaging_hackbench(ctx: &mut Ctx) -> Result<Side, Problem> {
    let s = &ctx.sizes;
    let mut cmd = Command::new("hackbench");
    cmd.args(reference::hackbench_args(
        s.messaging_groups,
        s.messaging_fds,
        s.messaging_loops,
        MESSAGE_BYTES,
    ));
    let ran = run_tool(&mut cmd, "hackbench", 10.0)?;
    let h = reference::parse_hackbench(&ran.stdout).map_err(fail)?;
    let tasks = u64::from(s.messaging_groups) * 2 * u64::from(s.messaging_fds);
    if h.tasks != tasks {
        return Err(fail(format!(
            "hackbench ran {} tasks instead of {tasks}",
            h.tasks
        )));
    }
    Ok(Side {
        values: vec![h.time_s],
        note: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::fidelity::{FidelityOptions, Sizes};

    fn ctx() -> Ctx {
        Ctx {
            exe: "schedlab".into(),
            dir: "/tmp".into(),
            sizes: Sizes::of(FidelityOptions { quick: true }),
            cloops: None,
            results: Default::default(),
        }
    }

    /// A stand-in for schedlab: `run` checks that the spec names the
    /// workload kind and stores nothing, `export` prints `export.json`
    /// from its own directory.
    fn fake_schedlab(dir: &std::path::Path, kind: &str, export: &str) -> Ctx {
        use std::os::unix::fs::PermissionsExt;
        let exe = dir.join("schedlab");
        std::fs::write(dir.join("export.json"), export).unwrap();
        std::fs::write(
            &exe,
            format!(
                "#!/bin/sh\nset -e\ncase \"$1\" in\n\
                 run) grep -q 'kind = \"{kind}\"' \"$2\" ;;\n\
                 export) cat \"$(dirname \"$0\")/export.json\" ;;\n\
                 *) exit 9 ;;\nesac\n"
            ),
        )
        .unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        Ctx {
            exe,
            dir: dir.to_path_buf(),
            ..ctx()
        }
    }

    #[test]
    fn our_latency_figures_come_from_the_export() {
        let d = tempfile::tempdir().unwrap();
        let mut c = fake_schedlab(
            d.path(),
            "pingpong",
            r#"[
{"status":"ok","reason":"","role":"worker","process_index":0,"lat_p50_us":4.5,"lat_p99_us":9.0,"fig_round_trips":20000,"fig_round_trips_per_s":200000.0},
{"status":"ok","reason":"","role":"worker","process_index":1,"lat_p50_us":4.6,"lat_p99_us":9.5,"fig_round_trips":20000,"fig_round_trips_per_s":250000.0}
]"#,
        );
        let side = pingpong_ours(&mut c, true, 1).unwrap();
        assert_eq!(side.values, [4.5]); // (5 + 4) / 2 µs
        assert_eq!(
            side.note.as_deref(),
            Some("round trip p50 4.50/4.60 µs, p99 9.00/9.50 µs per end")
        );

        let d = tempfile::tempdir().unwrap();
        let mut c = fake_schedlab(
            d.path(),
            "periodic",
            r#"[{"status":"ok","reason":"","role":"worker","process_index":0,"lat_p50_us":12.5,"lat_p90_us":14.0,"lat_p99_us":30.25,"lat_p999_us":60.0,"lat_max_us":80.0,"fig_activations":2000,"fig_misses":0}]"#,
        );
        let side = periodic_ours(&mut c, 1).unwrap();
        assert_eq!(side.values, [12.5, 30.25]);
        let note = side.note.unwrap();
        assert!(note.starts_with("max 80 µs, misses 0; "), "{note}");
        assert!(note.contains("/dev/cpu_dma_latency"), "{note}");

        let d = tempfile::tempdir().unwrap();
        let mut c = fake_schedlab(
            d.path(),
            "messaging",
            r#"[
{"status":"ok","reason":"","role":"worker","process_index":0,"makespan_ns":410000000,"fig_messages":2000,"fig_messages_per_s":5000.0},
{"status":"ok","reason":"","role":"worker","process_index":1,"makespan_ns":410000000,"fig_messages":2000,"fig_messages_per_s":5000.0}
]"#,
        );
        let side = messaging_ours(&mut c, 1).unwrap();
        assert_eq!(side.values, [0.41]);

        // A run that failed gives its reason.
        let d = tempfile::tempdir().unwrap();
        let mut c = fake_schedlab(
            d.path(),
            "periodic",
            r#"[{"status":"timed_out","reason":"over timeout_s = 34","role":"worker","process_index":0}]"#,
        );
        let Err(Problem::Fail(why)) = periodic_ours(&mut c, 1) else {
            panic!("no failure")
        };
        assert!(why.contains("timed_out: over timeout_s"), "{why}");
    }

    #[test]
    fn specs_match_the_reference_command_lines() {
        let c = ctx();
        let v = |s: &OursSpec| -> toml::Value { toml::from_str(&s.toml()).unwrap() };
        let p = v(&pingpong_spec(&c, true, 1));
        assert_eq!(p["matrix"]["cpus"][0].as_str(), Some("0"));
        assert_eq!(p["matrix"]["processes"][0].as_integer(), Some(2));
        assert_eq!(
            p["workloads"]["w"]["round_trips"].as_integer(),
            Some(c.sizes.pingpong_loops as i64)
        );
        let u = v(&pingpong_spec(&c, false, 1));
        assert_eq!(u["matrix"]["cpus"][0].as_str(), Some("all"));

        let r = v(&periodic_spec(&c, 1));
        assert_eq!(r["matrix"]["policy"][0].as_str(), Some("fifo"));
        assert_eq!(r["priorities"]["p"]["rt_priority"].as_integer(), Some(90));
        assert_eq!(r["workloads"]["w"]["period_us"].as_integer(), Some(1000));

        let m = v(&messaging_spec(&c, 1));
        let s = c.sizes;
        assert_eq!(
            m["matrix"]["processes"][0].as_integer(),
            Some(i64::from(s.messaging_groups * 2 * s.messaging_fds))
        );
        assert_eq!(
            m["workloads"]["w"]["senders"].as_integer(),
            Some(i64::from(s.messaging_fds))
        );
        assert_eq!(m["workloads"]["w"]["transport"].as_str(), Some("socket"));
    }
}
