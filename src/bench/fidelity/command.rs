//! The command workload's rows of the fidelity benchmark: a standard tool
//! run as `kind = "command"` against the same tool run bare (hackbench's
//! `Time:`, `perf bench sched pipe`'s µs per round trip: schedlab around a
//! program should cost it nothing measurable), and a forking command's
//! tree CPU time (its cgroup) against `perf stat -e task-clock` of the
//! same command (which counts every task it inherits into). The bare
//! sides of the first two are the latency rows' own (`latency.rs`).

use std::process::Command;
use std::time::Duration;

use super::ours::{self, OursSpec};
use super::{CPU, Ctx, Problem, Side, exec, reference};

fn fail(m: impl Into<String>) -> Problem {
    Problem::Fail(m.into())
}

/// A TOML array of strings (each quoted as JSON, which TOML reads alike).
fn toml_array(args: &[String]) -> String {
    serde_json::to_string(args).unwrap_or_else(|_| "[]".into())
}

fn command_spec(name: String, cpus: String, argv: &[String], parser: Option<&str>) -> OursSpec {
    let mut workload = vec![
        "kind = \"command\"".to_string(),
        format!("argv = {}", toml_array(argv)),
    ];
    if let Some(p) = parser {
        workload.push(format!("parser = \"{p}\""));
    }
    OursSpec {
        name,
        policy: "other",
        rt_priority: None,
        processes: 1,
        cpus,
        workload,
        timeout_s: 120.0,
    }
}

/// The hackbench command line of the messaging row.
fn hackbench_argv(ctx: &Ctx) -> Vec<String> {
    let s = &ctx.sizes;
    let mut argv = vec!["hackbench".to_string()];
    argv.extend(reference::hackbench_args(
        s.messaging_groups,
        s.messaging_fds,
        s.messaging_loops,
        super::latency::MESSAGE_BYTES,
    ));
    argv
}

/// hackbench as a command workload: its own `Time:`, s.
pub fn hackbench_ours(ctx: &mut Ctx, trial: u32) -> Result<Side, Problem> {
    let spec = command_spec(
        format!("fidelity-cmd-hackbench-{trial}"),
        "all".into(),
        &hackbench_argv(ctx),
        Some("hackbench"),
    );
    let run = ours::run(&ctx.exe, &ctx.dir, &spec)?;
    Ok(Side {
        values: vec![run.run_value("time_s")?],
        note: None,
    })
}

/// `perf bench sched pipe` as a command workload on CPU 0 (both its
/// processes inherit the affinity): its own µs per round trip. Pinned, as
/// its bare side (`taskset -c 0`): unpinned, a round trip takes 5 or 40 µs
/// here depending on whether the two ends share a CPU, and that placement,
/// not schedlab, decided the row (0.69× in one quick trial).
pub fn pipe_ours(ctx: &mut Ctx, trial: u32) -> Result<Side, Problem> {
    let mut argv = vec!["perf".to_string()];
    argv.extend(reference::perf_pipe_args(ctx.sizes.pingpong_loops));
    let spec = command_spec(
        format!("fidelity-cmd-pipe-{trial}"),
        CPU.to_string(),
        &argv,
        Some("perf-bench-sched"),
    );
    let run = ours::run(&ctx.exe, &ctx.dir, &spec)?;
    Ok(Side {
        values: vec![run.run_value("usecs_per_op")?],
        note: None,
    })
}

/// The pipe command row's reference: `taskset -c 0 perf bench sched pipe`
/// bare (the pinned pingpong row's own side), and, as root, the same
/// command once more inside cgroups made as a worker's (one per hierarchy
/// a campaign uses, at a worker's depth): its note gives what the groups
/// alone cost a round trip, named by hierarchy. Had they the v1 `cpu`
/// controller, the fair class would keep a scheduling entity per group
/// level (`CONFIG_FAIR_GROUP_SCHED`) and walk them on every enqueue,
/// dequeue and `update_curr()`, four times a round trip; a worker's groups
/// account and do not schedule (0.99× bare measured here).
pub fn pipe_bare(ctx: &mut Ctx) -> Result<Side, Problem> {
    let mut side = super::latency::pingpong_perf(ctx, true)?;
    let bare = side.values[0];
    side.note = Some(match pipe_in_groups(ctx) {
        Ok((us, hierarchies)) => format!(
            "the same command inside cgroups made as a worker's ({hierarchies}): {us:.2} µs, \
             {:.2}× bare",
            us / bare
        ),
        Err(e) => format!("not measured inside cgroups: {e}"),
    });
    Ok(side)
}

/// `taskset -c 0 perf bench sched pipe` moved into a worker's cgroups (a
/// session of its own, removed after) by its own shell before it execs:
/// its µs per round trip, and the hierarchies' names.
fn pipe_in_groups(ctx: &Ctx) -> Result<(f64, String), String> {
    use crate::sys::cgroup::TreeGroups;
    let session = TreeGroups::open().map_err(|e| format!("{e:#}"))?;
    let group = session
        .create("fidelity-pipe-bare", 0)
        .map_err(|e| format!("{e:#}"))?;
    let join: Vec<String> = group
        .dirs()
        .iter()
        .map(|d| format!("echo $$ > '{}/cgroup.procs' && ", d.display()))
        .collect();
    let loops = ctx.sizes.pingpong_loops;
    let mut argv = vec![
        "taskset".to_string(),
        "-c".into(),
        CPU.to_string(),
        "perf".into(),
    ];
    argv.extend(reference::perf_pipe_args(loops));
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(format!("{}exec \"$@\"", join.concat()))
        .arg("sh")
        .args(&argv);
    let ran = exec::run(&mut cmd, Duration::from_secs(60)).map_err(|e| format!("{e:#}"))?;
    ran.check("perf bench sched pipe in cgroups")?;
    let p = reference::parse_perf_pipe(&ran.stdout)?;
    if p.loops != loops {
        return Err(format!(
            "perf ran {} round trips instead of {loops}",
            p.loops
        ));
    }
    Ok((p.usecs_per_op, session.hierarchies().join(", ")))
}

/// Iterations of each of the three children's shell loop (about 0.1 to
/// 0.2 s of CPU each here).
pub const TREE_LOOPS: u32 = 200_000;

/// A shell that forks three CPU-bound children and waits for them.
pub fn tree_argv() -> Vec<String> {
    vec![
        "sh".into(),
        "-c".into(),
        format!(
            "for i in 1 2 3; do (i=0; while [ $i -lt {TREE_LOOPS} ]; do i=$((i+1)); done) & done; \
             wait"
        ),
    ]
}

/// The forking command's tree CPU time as schedlab measures it (user +
/// system of its cgroup), ms, on CPU 0.
pub fn tree_cpu_ours(ctx: &mut Ctx, trial: u32) -> Result<Side, Problem> {
    let spec = command_spec(
        format!("fidelity-cmd-tree-{trial}"),
        CPU.to_string(),
        &tree_argv(),
        None,
    );
    let run = ours::run(&ctx.exe, &ctx.dir, &spec)?;
    let tasks = run.run_value("tree_tasks")?;
    if tasks != 4.0 {
        return Err(fail(format!(
            "the tree had {tasks} tasks, not the shell and its 3 children"
        )));
    }
    let cpu_us = run.run_value("utime_us")? + run.run_value("stime_us")?;
    Ok(Side {
        values: vec![cpu_us / 1e3],
        note: None,
    })
}

/// The same command under `taskset -c 0 perf stat -x, -e task-clock`, ms.
pub fn tree_cpu_perf(_ctx: &mut Ctx) -> Result<Side, Problem> {
    let mut cmd = Command::new("taskset");
    cmd.args([
        "-c",
        &CPU.to_string(),
        "perf",
        "stat",
        "-x,",
        "-e",
        "task-clock",
    ])
    .args(tree_argv());
    let ran = exec::run(&mut cmd, Duration::from_secs(60)).map_err(|e| fail(format!("{e:#}")))?;
    ran.check("perf stat").map_err(fail)?;
    let ms = parse_task_clock_ms(&ran.stderr).map_err(fail)?;
    Ok(Side {
        values: vec![ms],
        note: None,
    })
}

/// `perf stat -x,`'s task-clock line: its first field, ms.
pub fn parse_task_clock_ms(text: &str) -> Result<f64, String> {
    text.lines()
        .find(|l| l.contains(",task-clock"))
        .and_then(|l| l.split(',').next())
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| format!("perf stat printed no task-clock: {}", text.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `perf stat -x, -e task-clock` of Debian's linux-perf 6.x.
    #[test]
    fn task_clock_is_read_from_perf_stat_csv() {
        let text = "351.42,msec,task-clock,351420321,100.00,0.998,CPUs utilized\n";
        assert_eq!(parse_task_clock_ms(text), Ok(351.42));
        assert!(parse_task_clock_ms("<not counted>,,cycles\n").is_err());
    }

    #[test]
    fn specs_run_the_tools_command_lines() {
        let ctx = Ctx {
            exe: "schedlab".into(),
            dir: "/tmp".into(),
            sizes: super::super::Sizes::of(super::super::FidelityOptions { quick: true }),
            cloops: None,
            results: Default::default(),
        };
        let spec = command_spec(
            "x".into(),
            "0".into(),
            &hackbench_argv(&ctx),
            Some("hackbench"),
        );
        let toml = spec.toml();
        let parsed = crate::spec::load(&toml, "x", &[]).unwrap_or_else(|e| panic!("{e}\n{toml}"));
        assert_eq!(parsed.name, "x");
        assert!(
            toml.contains("argv = [\"hackbench\",\"-P\",\"-g\",\"4\""),
            "{toml}"
        );
        assert!(toml.contains("parser = \"hackbench\""));
        let tree = command_spec("t".into(), "0".into(), &tree_argv(), None).toml();
        crate::spec::load(&tree, "t", &[]).unwrap_or_else(|e| panic!("{e}\n{tree}"));
    }
}
