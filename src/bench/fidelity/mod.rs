//! `schedlab bench fidelity`: does schedlab measure what the standard tools
//! measure? Each row runs one of schedlab's workloads through the real
//! product path (`schedlab run` of a one-run spec, then `schedlab export`)
//! and its reference (perf, cyclictest, hackbench, or the same loop in C)
//! side by side in one invocation, with the same pinning, policy and
//! priority, and checks the row's rule:
//!
//! | row | reference | rule |
//! |---|---|---|
//! | pingpong, one pair, on CPU 0 / unpinned | `perf bench sched pipe` (under `taskset -c 0` / not) | mean round trip within 10% |
//! | periodic 1 ms, FIFO 90, CPU 0 | `cyclictest -m -p 90 -i 1000 -a 0` | p50 and p99 each within 10% or 10 µs |
//! | messaging, sockets | `hackbench -P` (same groups, fds, loops, bytes) | time within 10% |
//! | pi, matmul on CPU 0 | the same loops in C (pi `cc -O2`; matmul `cc -O3 -march=native -ffp-contract=off`, the portable `-O3` build in a note) | ours ≥ 0.95× the C speed (matmul: ≥ 1.0×) |
//! | launch of 200 workers | C fork + exec + wait of schedlab, 200× | per worker ≤ 1.5× |
//! | hackbench / `perf bench sched pipe` as a command workload | the same tool run bare | the tool's own figure within 5% |
//! | a command forking 3 CPU-bound children, CPU 0 | `perf stat -e task-clock` of it | tree CPU time within 5% |
//!
//! This file owns the rows, their rules, the trials (alternating which side
//! goes first; medians of each side and of the per-trial ratios) and the
//! table. `exec` runs one outside program under a timeout, `ours` runs
//! schedlab's side, `reference` knows the reference tools and parses what
//! they print, `cloops` compiles and runs the C loops, and the rows' own
//! measurements are in `latency` (pingpong, periodic, messaging), `cpu` (pi,
//! matmul), `launch` and `command` (programs as command workloads).
//!
//! Nothing is installed: a row whose tool is missing is skipped, naming the
//! package. Every number printed is measured in this invocation. The
//! measurement lock (`locks`) is held for both sides of one row, and the
//! `schedlab run`s it starts measure without taking it again.

mod cloops;
mod command;
mod cpu;
mod exec;
mod latency;
mod launch;
mod ours;
mod reference;

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::bench::aio::Spread;
use reference::Tool;

/// The CPU every pinned row uses (the tests keep RT work on CPU 0).
pub const CPU: usize = 0;

/// What to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FidelityOptions {
    /// Fewer loops and one trial per row: well under a minute.
    pub quick: bool,
}

/// Sizes of every row.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sizes {
    /// Trials per row, each running both sides once (the periodic row has
    /// its own count: its trials take the longest).
    pub trials: u32,
    pub periodic_trials: u32,
    /// Trials of the command tree's CPU row: a shell loop's CPU time
    /// moves ±5 % from run to run on the 2-CPU VM (bare `perf stat` of it:
    /// 573–694 ms), as much as the row's rule allows, so its median needs
    /// more trials than the others' to say something about schedlab.
    pub tree_trials: u32,
    /// Round trips of pingpong and of `perf bench sched pipe`.
    pub pingpong_loops: u64,
    /// Wake-ups of periodic and cyclictest.
    pub periodic_loops: u64,
    /// hackbench groups, fds (senders = receivers per group) and loops.
    pub messaging_groups: u32,
    pub messaging_fds: u32,
    pub messaging_loops: u64,
    pub pi_iterations: u64,
    pub matmul_n: u64,
    pub matmul_multiplies: u64,
    /// Workers started by the launch row.
    pub launch_workers: u32,
}

impl Sizes {
    /// Trials of a row.
    pub fn trials_of(&self, w: Which) -> u32 {
        match w {
            Which::Periodic => self.periodic_trials,
            Which::CommandTreeCpu => self.tree_trials,
            _ => self.trials,
        }
    }

    pub fn of(o: FidelityOptions) -> Sizes {
        if o.quick {
            Sizes {
                trials: 3,
                periodic_trials: 1,
                tree_trials: 3,
                pingpong_loops: 20_000,
                periodic_loops: 2_000,
                messaging_groups: 4,
                messaging_fds: 20,
                messaging_loops: 100,
                pi_iterations: 300_000_000,
                matmul_n: 150,
                matmul_multiplies: 60,
                launch_workers: 200,
            }
        } else {
            Sizes {
                trials: 5,
                periodic_trials: 3,
                tree_trials: 11,
                pingpong_loops: 100_000,
                periodic_loops: 5_000,
                messaging_groups: 10,
                messaging_fds: 20,
                messaging_loops: 300,
                pi_iterations: 1_000_000_000,
                matmul_n: 150,
                matmul_multiplies: 400,
                launch_workers: 200,
            }
        }
    }
}

/// Why a side has no figure: a skip (a tool or privilege this machine
/// lacks) or a failure (it ran and went wrong).
#[derive(Debug, Clone, PartialEq)]
pub enum Problem {
    Skip(String),
    Fail(String),
}

pub fn skip(why: impl Into<String>) -> Problem {
    Problem::Skip(why.into())
}

/// What a row's figures must satisfy.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rule {
    /// |ours / reference − 1| ≤ the fraction.
    Within(f64),
    /// |ours − reference| ≤ the fraction of the reference, or ≤ the
    /// absolute amount (in the figure's unit).
    WithinOrAbs(f64, f64),
    /// ours / reference ≥ the factor (a speed).
    AtLeast(f64),
    /// ours / reference ≤ the factor (a cost).
    AtMost(f64),
}

impl Rule {
    /// Whether the medians `ours` and `reference` with the median per-trial
    /// ratio `ratio` meet the rule.
    pub fn holds(self, ours: f64, reference: f64, ratio: f64) -> bool {
        match self {
            Rule::Within(f) => (ratio - 1.0).abs() <= f,
            Rule::WithinOrAbs(f, abs) => {
                (ours - reference).abs() <= abs || (ratio - 1.0).abs() <= f
            }
            Rule::AtLeast(x) => ratio >= x,
            Rule::AtMost(x) => ratio <= x,
        }
    }
}

/// How a figure is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Micros,
    Seconds,
    /// Millions per second (speeds).
    MegaPerSec(&'static str),
    Millis,
}

impl Unit {
    pub fn format(self, v: f64) -> String {
        match self {
            Unit::Micros if v < 100.0 => format!("{v:.2} µs"),
            Unit::Micros => format!("{v:.0} µs"),
            Unit::Seconds => format!("{v:.3} s"),
            Unit::MegaPerSec(what) => format!("{:.0} M {what}/s", v / 1e6),
            Unit::Millis => format!("{v:.2} ms"),
        }
    }
}

/// One compared figure of a row (a row has one, periodic two).
#[derive(Debug, Clone, PartialEq)]
pub struct Metric {
    /// "round trip", "p50", … (empty when the row has only this one).
    pub label: &'static str,
    pub unit: Unit,
    pub rule: Rule,
}

/// One side of one trial: a value per metric, and what else is worth
/// saying about it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Side {
    pub values: Vec<f64>,
    pub note: Option<String>,
}

/// The rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Which {
    PingPongPinned,
    PingPongUnpinned,
    Periodic,
    Messaging,
    Pi,
    Matmul,
    Launch,
    CommandHackbench,
    CommandPipe,
    CommandTreeCpu,
}

impl Which {
    pub const ALL: [Which; 10] = [
        Which::PingPongPinned,
        Which::PingPongUnpinned,
        Which::Periodic,
        Which::Messaging,
        Which::Pi,
        Which::Matmul,
        Which::Launch,
        Which::CommandHackbench,
        Which::CommandPipe,
        Which::CommandTreeCpu,
    ];

    /// The tools the row needs.
    pub fn tools(self) -> &'static [Tool] {
        match self {
            Which::PingPongPinned => &[Tool::Perf, Tool::Taskset],
            Which::PingPongUnpinned => &[Tool::Perf],
            Which::Periodic => &[Tool::Cyclictest],
            Which::Messaging => &[Tool::Hackbench],
            Which::Pi | Which::Matmul | Which::Launch => &[Tool::Cc],
            Which::CommandHackbench => &[Tool::Hackbench],
            Which::CommandPipe => &[Tool::Perf],
            Which::CommandTreeCpu => &[Tool::Perf, Tool::Taskset],
        }
    }

    pub fn metrics(self) -> Vec<Metric> {
        let one = |unit, rule| {
            vec![Metric {
                label: "",
                unit,
                rule,
            }]
        };
        match self {
            Which::PingPongPinned | Which::PingPongUnpinned => {
                one(Unit::Micros, Rule::Within(0.10))
            }
            Which::Periodic => vec![
                Metric {
                    label: "p50",
                    unit: Unit::Micros,
                    rule: Rule::WithinOrAbs(0.10, 10.0),
                },
                Metric {
                    label: "p99",
                    unit: Unit::Micros,
                    rule: Rule::WithinOrAbs(0.10, 10.0),
                },
            ],
            Which::Messaging => one(Unit::Seconds, Rule::Within(0.10)),
            Which::Pi => one(Unit::MegaPerSec("iter"), Rule::AtLeast(0.95)),
            Which::Matmul => one(Unit::MegaPerSec("flop"), Rule::AtLeast(1.0)),
            Which::Launch => one(Unit::Millis, Rule::AtMost(1.5)),
            Which::CommandHackbench => one(Unit::Seconds, Rule::Within(0.05)),
            Which::CommandPipe => one(Unit::Micros, Rule::Within(0.05)),
            Which::CommandTreeCpu => one(Unit::Millis, Rule::Within(0.05)),
        }
    }

    /// The rule in words, for the table.
    pub fn rule_text(self) -> &'static str {
        match self {
            Which::PingPongPinned | Which::PingPongUnpinned => "round trip within 10%",
            Which::Periodic => "p50, p99 within 10% or 10 µs",
            Which::Messaging => "time within 10%",
            Which::Pi => "ours ≥ 0.95× C speed",
            Which::Matmul => "ours ≥ 1.0× C speed",
            Which::Launch => "per worker ≤ 1.5× C",
            Which::CommandHackbench | Which::CommandPipe => "its own figure within 5%",
            Which::CommandTreeCpu => "CPU time within 5%",
        }
    }

    pub fn name(self, s: &Sizes) -> String {
        match self {
            Which::PingPongPinned => format!("pingpong pipe, 1 pair, CPU {CPU}"),
            Which::PingPongUnpinned => "pingpong pipe, 1 pair, unpinned".into(),
            Which::Periodic => format!("periodic 1 ms, FIFO 90, CPU {CPU}"),
            Which::Messaging => format!(
                "messaging socket, {}×({}+{})",
                s.messaging_groups, s.messaging_fds, s.messaging_fds
            ),
            Which::Pi => format!("pi, CPU {CPU}"),
            Which::Matmul => format!("matmul n={}, CPU {CPU}", s.matmul_n),
            Which::Launch => format!("launch {} workers", s.launch_workers),
            Which::CommandHackbench => "command: hackbench".into(),
            Which::CommandPipe => format!("command: perf bench sched pipe, CPU {CPU}"),
            Which::CommandTreeCpu => format!("command: sh + 3 children, CPU {CPU}"),
        }
    }

    pub fn reference_name(self, s: &Sizes) -> String {
        match self {
            Which::PingPongPinned => format!("taskset -c {CPU} perf bench sched pipe"),
            Which::PingPongUnpinned => "perf bench sched pipe".into(),
            Which::Periodic => format!("cyclictest -m -p 90 -i 1000 -a {CPU}"),
            Which::Messaging => format!(
                "hackbench -P -g {} -f {}",
                s.messaging_groups, s.messaging_fds
            ),
            Which::Pi => "the loop in C, cc -O2".into(),
            Which::Matmul => "the loop in C, cc -O3 -march=native -ffp-contract=off".into(),
            Which::Launch => format!("C fork+exec+wait ×{}", s.launch_workers),
            Which::CommandHackbench => format!(
                "hackbench -P -g {} -f {}, bare",
                s.messaging_groups, s.messaging_fds
            ),
            Which::CommandPipe => format!("taskset -c {CPU} perf bench sched pipe, bare"),
            Which::CommandTreeCpu => format!("taskset -c {CPU} perf stat -e task-clock"),
        }
    }

    /// What the figures are, for the lines under the table.
    pub fn explain(self, s: &Sizes) -> String {
        match self {
            Which::PingPongPinned | Which::PingPongUnpinned => format!(
                "pingpong: mean round trip over {} round trips; ours 1/round_trips_per_s averaged over both \
                 ends, perf usecs/op",
                s.pingpong_loops
            ),
            Which::Periodic => format!(
                "periodic: wake-up latency over {} wake-ups; ours lat_p50_us/lat_p99_us, cyclictest from its \
                 1 µs histogram (bucket middles)",
                s.periodic_loops
            ),
            Which::Messaging => format!(
                "messaging: {} messages of 100 B per sender and receiver; ours the run's makespan (barrier \
                 release to the last worker's end), hackbench its Time (start signal to the last child \
                 reaped); both start once every process is ready, so process creation is in neither",
                s.messaging_loops
            ),
            Which::Pi | Which::Matmul => format!(
                "pi, matmul: work per second; ours work / (end_ns − start_ns) of the worker, C its own clock \
                 around the same {} iterations / {} multiplies; the results (π error, checksum) must agree to 1e-12",
                s.pi_iterations, s.matmul_multiplies
            ),
            Which::Launch => format!(
                "launch: ours (wall time of `schedlab run` with {n} workers − with 1) / {m}: spawning, \
                 barrier, reaping and storing one worker; C the wall time of {n} fork+exec+wait of \
                 `schedlab --version` / {n}",
                n = s.launch_workers,
                m = s.launch_workers.saturating_sub(1).max(1)
            ),
            Which::CommandHackbench | Which::CommandPipe => format!(
                "command: the tool run as a `kind = \"command\"` workload (its figure from its parser: \
                 hackbench's Time, perf's usecs/op over {} round trips) against the same command line \
                 run bare",
                s.pingpong_loops
            ),
            Which::CommandTreeCpu => format!(
                "command tree: a shell forking 3 children that each count to {} in a shell loop; ours \
                 utime + stime of its cgroup (every task of the tree), perf the task-clock of all \
                 tasks it inherited into",
                command::TREE_LOOPS
            ),
        }
    }
}

/// Everything a row's measurement needs.
pub struct Ctx {
    /// The schedlab binary (the running one).
    pub exe: PathBuf,
    /// The benchmark's temporary directory.
    pub dir: PathBuf,
    pub sizes: Sizes,
    /// The compiled C loops, or why there are none.
    pub cloops: Option<Result<cloops::CLoops, String>>,
    /// Results one side keeps for the other to compare with (pi's error,
    /// matmul's checksum).
    pub results: std::collections::BTreeMap<&'static str, f64>,
}

impl Ctx {
    fn cloops(&mut self) -> Result<&cloops::CLoops, Problem> {
        if self.cloops.is_none() {
            let dir = self.dir.join("c");
            self.cloops = Some(
                std::fs::create_dir_all(&dir)
                    .map_err(|e| format!("creating {}: {e}", dir.display()))
                    .and_then(|()| cloops::compile(&dir)),
            );
        }
        match self.cloops.as_ref() {
            Some(Ok(c)) => Ok(c),
            Some(Err(e)) => Err(Problem::Fail(format!("compiling the C loops: {e}"))),
            None => unreachable!("set above"),
        }
    }
}

/// Measure schedlab's side of one trial.
fn measure_ours(w: Which, ctx: &mut Ctx, trial: u32) -> Result<Side, Problem> {
    match w {
        Which::PingPongPinned => latency::pingpong_ours(ctx, true, trial),
        Which::PingPongUnpinned => latency::pingpong_ours(ctx, false, trial),
        Which::Periodic => latency::periodic_ours(ctx, trial),
        Which::Messaging => latency::messaging_ours(ctx, trial),
        Which::Pi => cpu::pi_ours(ctx, trial),
        Which::Matmul => cpu::matmul_ours(ctx, trial),
        Which::Launch => launch::ours(ctx, trial),
        Which::CommandHackbench => command::hackbench_ours(ctx, trial),
        Which::CommandPipe => command::pipe_ours(ctx, trial),
        Which::CommandTreeCpu => command::tree_cpu_ours(ctx, trial),
    }
}

/// Measure the reference side of one trial.
fn measure_reference(w: Which, ctx: &mut Ctx, trial: u32) -> Result<Side, Problem> {
    match w {
        Which::PingPongPinned => latency::pingpong_perf(ctx, true),
        Which::PingPongUnpinned => latency::pingpong_perf(ctx, false),
        Which::Periodic => latency::periodic_cyclictest(ctx, trial),
        Which::Messaging => latency::messaging_hackbench(ctx),
        Which::Pi => cpu::pi_c(ctx),
        Which::Matmul => cpu::matmul_c(ctx),
        Which::Launch => launch::reference(ctx),
        Which::CommandHackbench => latency::messaging_hackbench(ctx),
        Which::CommandPipe => command::pipe_bare(ctx),
        Which::CommandTreeCpu => command::tree_cpu_perf(ctx),
    }
}

/// A row's outcome.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Pass,
    /// The rule is not met (empty reason) or a side failed (the reason).
    Fail(String),
    Skip(String),
}

/// One measured row.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub which: Which,
    pub metrics: Vec<Metric>,
    /// Per trial, the values of each side that was measured.
    pub ours: Vec<Vec<f64>>,
    pub reference: Vec<Vec<f64>>,
    pub notes: Vec<String>,
    pub verdict: Verdict,
}

/// Median of each side and of the per-trial ratios, per metric: None for
/// a side without values.
pub struct Summary {
    pub ours: Option<f64>,
    pub reference: Option<f64>,
    pub ratio: Option<f64>,
}

impl Row {
    pub fn summary(&self, metric: usize) -> Summary {
        let col = |trials: &[Vec<f64>]| -> Vec<f64> {
            trials
                .iter()
                .filter_map(|t| t.get(metric).copied())
                .collect()
        };
        let med = |v: Vec<f64>| (!v.is_empty()).then(|| Spread::of(&v).median);
        let (o, r) = (col(&self.ours), col(&self.reference));
        let ratios: Vec<f64> = o.iter().zip(&r).map(|(a, b)| a / b).collect();
        Summary {
            ours: med(o),
            reference: med(r),
            ratio: med(ratios),
        }
    }

    /// The verdict from the figures, when both sides were measured.
    fn judge(&self) -> Verdict {
        let met = self.metrics.iter().enumerate().all(|(i, m)| {
            let s = self.summary(i);
            match (s.ours, s.reference, s.ratio) {
                (Some(o), Some(r), Some(q)) => m.rule.holds(o, r, q),
                _ => false,
            }
        });
        if met {
            Verdict::Pass
        } else {
            Verdict::Fail(String::new())
        }
    }
}

/// Measure one row: check its tools, then `trials` trials, ours first in
/// odd ones. A problem on either side ends the row (after that trial's
/// other side, so that its figure still shows).
pub fn measure_row(w: Which, ctx: &mut Ctx) -> Row {
    let mut row = Row {
        which: w,
        metrics: w.metrics(),
        ours: Vec::new(),
        reference: Vec::new(),
        notes: Vec::new(),
        verdict: Verdict::Pass,
    };
    let missing: Vec<String> = w
        .tools()
        .iter()
        .filter_map(|t| t.available().err())
        .collect();
    if !missing.is_empty() {
        row.verdict = Verdict::Skip(missing.join("; "));
        return row;
    }
    let mut ours_problem = None;
    let mut reference_problem = None;
    for trial in 1..=ctx.sizes.trials_of(w) {
        let ours_first = trial % 2 == 1;
        let (o, r) = if ours_first {
            let o = measure_ours(w, ctx, trial);
            (o, measure_reference(w, ctx, trial))
        } else {
            let r = measure_reference(w, ctx, trial);
            (measure_ours(w, ctx, trial), r)
        };
        let mut notes = Vec::new();
        match o {
            Ok(side) => {
                notes.extend(side.note.map(|n| format!("ours: {n}")));
                row.ours.push(side.values);
            }
            Err(p) => ours_problem = Some(p),
        }
        match r {
            Ok(side) => {
                notes.extend(side.note.map(|n| format!("reference: {n}")));
                row.reference.push(side.values);
            }
            Err(p) => reference_problem = Some(p),
        }
        // The last trial's notes stand for the row.
        row.notes = notes;
        if ours_problem.is_some() || reference_problem.is_some() {
            break;
        }
    }
    row.verdict = match (ours_problem, reference_problem) {
        (Some(Problem::Skip(s)), _) => Verdict::Skip(s),
        (_, Some(Problem::Skip(s))) => Verdict::Skip(format!("reference: {s}")),
        (Some(Problem::Fail(o)), Some(Problem::Fail(r))) => {
            Verdict::Fail(format!("ours: {o}; reference: {r}"))
        }
        (Some(Problem::Fail(o)), None) => Verdict::Fail(format!("ours: {o}")),
        (None, Some(Problem::Fail(r))) => Verdict::Fail(format!("reference: {r}")),
        (None, None) => row.judge(),
    };
    row
}

/// The row's cells: name, ours, reference, ratio, rule, verdict.
pub fn cells(row: &Row, s: &Sizes) -> [String; 6] {
    let w = row.which;
    let side = |pick: fn(&Summary) -> Option<f64>| -> String {
        let parts: Vec<String> = row
            .metrics
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let v = pick(&row.summary(i)).map_or_else(|| "-".to_string(), |v| m.unit.format(v));
                match m.label {
                    "" => v,
                    l => format!("{l} {v}"),
                }
            })
            .collect();
        parts.join(", ")
    };
    let ratio: Vec<String> = (0..row.metrics.len())
        .map(|i| {
            row.summary(i)
                .ratio
                .map_or_else(|| "-".to_string(), |r| format!("{r:.2}"))
        })
        .collect();
    let verdict = match &row.verdict {
        Verdict::Pass => "PASS".to_string(),
        Verdict::Fail(why) if why.is_empty() => "FAIL".to_string(),
        Verdict::Fail(why) => format!("FAIL: {why}"),
        Verdict::Skip(why) => format!("SKIP: {why}"),
    };
    [
        w.name(s),
        side(|x| x.ours),
        format!("{} ({})", side(|x| x.reference), w.reference_name(s)),
        ratio.join(", "),
        w.rule_text().to_string(),
        crate::out::esc(&verdict).into_owned(),
    ]
}

/// The table: a header and a line per row, columns padded to their widest
/// cell (the verdict, last, is not padded).
pub fn table(rows: &[Row], s: &Sizes) -> Vec<String> {
    let header = [
        "row".to_string(),
        "ours".to_string(),
        "reference".to_string(),
        "ours/ref".to_string(),
        "must".to_string(),
        "verdict".to_string(),
    ];
    let body: Vec<[String; 6]> = rows.iter().map(|r| cells(r, s)).collect();
    let mut widths = [0usize; 6];
    for line in std::iter::once(&header).chain(&body) {
        for (w, c) in widths.iter_mut().zip(line) {
            *w = (*w).max(c.chars().count());
        }
    }
    std::iter::once(&header)
        .chain(&body)
        .map(|line| {
            let mut out = String::new();
            for (i, (c, w)) in line.iter().zip(widths).enumerate() {
                if i + 1 == line.len() {
                    out.push_str(c);
                } else {
                    out.push_str(c);
                    out.push_str(&" ".repeat(w - c.chars().count() + 2));
                }
            }
            out
        })
        .collect()
}

fn tool_versions(ctx: &Ctx) -> Vec<String> {
    let first_line = |program: &str, args: &[&str]| -> Option<String> {
        if !exec::in_path(program) {
            return None;
        }
        let ran = exec::run(
            std::process::Command::new(program).args(args),
            Duration::from_secs(30),
        )
        .ok()?;
        let text = format!("{}{}", ran.stdout, ran.stderr);
        text.lines()
            .map(str::trim)
            .find(|l| !l.is_empty() && !l.starts_with('#'))
            .map(str::to_string)
    };
    let mut out = Vec::new();
    out.extend(first_line("perf", &["--version"]));
    out.extend(first_line("cyclictest", &["--help"]));
    out.extend(first_line("hackbench", &["--help"]));
    if let Some(Ok(c)) = &ctx.cloops {
        out.push(c.compiler.clone());
    }
    out
}

/// Measure every row (progress on standard error) and return them.
pub fn measure(o: FidelityOptions, dir: &Path) -> Result<(Vec<Row>, Ctx)> {
    let exe = std::env::current_exe().context("finding the schedlab executable")?;
    let mut ctx = Ctx {
        exe,
        dir: dir.to_path_buf(),
        sizes: Sizes::of(o),
        cloops: None,
        results: Default::default(),
    };
    let n = Which::ALL.len();
    let mut rows = Vec::with_capacity(n);
    for (i, w) in Which::ALL.into_iter().enumerate() {
        crate::note!("fidelity [{}/{n}] {} ...", i + 1, w.name(&ctx.sizes));
        // Both sides of a row measure with the machine to themselves.
        let held = crate::locks::wait_quietly_for_machine("schedlab bench fidelity")
            .context("taking the measurement lock")?;
        let row = measure_row(w, &mut ctx);
        drop(held);
        let [_, ours, _, ratio, _, _] = cells(&row, &ctx.sizes);
        let verdict = match &row.verdict {
            Verdict::Pass => "PASS",
            Verdict::Fail(_) => "FAIL",
            Verdict::Skip(_) => "SKIP",
        };
        crate::note!(
            "fidelity [{}/{n}] {}: ours {ours}, ours/ref {ratio}: {verdict}",
            i + 1,
            w.name(&ctx.sizes)
        );
        rows.push(row);
    }
    Ok((rows, ctx))
}

/// `schedlab bench fidelity`: measure, print the table. Exit code 0 when
/// no row failed (skipped rows do not count), 1 otherwise.
pub fn run(o: FidelityOptions) -> Result<i32> {
    let tmp = tempfile::Builder::new()
        .prefix("schedlab-bench-fidelity-")
        .tempdir()
        .context("creating a temporary directory")?;
    let (rows, ctx) = measure(o, tmp.path())?;
    let s = &ctx.sizes;
    outln!(
        "fidelity of schedlab's measurements against the standard tools ({}, {} trials per row, {} of \
         periodic, {} of the command tree, alternating which side goes first; medians of each side \
         and of the trials' ratios)",
        if o.quick { "--quick" } else { "full" },
        s.trials,
        s.periodic_trials,
        s.tree_trials,
    )?;
    for line in table(&rows, s) {
        outln!("{line}")?;
    }
    outln!()?;
    for w in Which::ALL {
        // Rows sharing one explanation print it once.
        if !matches!(
            w,
            Which::PingPongUnpinned | Which::Matmul | Which::CommandPipe
        ) {
            outln!("{}", w.explain(s))?;
        }
    }
    for r in &rows {
        for n in &r.notes {
            outln!("{}: {}", r.which.name(s), crate::out::esc(n))?;
        }
    }
    let versions = tool_versions(&ctx);
    if !versions.is_empty() {
        outln!("tools: {}", versions.join("; "))?;
    }
    let failed = rows
        .iter()
        .filter(|r| matches!(r.verdict, Verdict::Fail(_)))
        .count();
    let skipped = rows
        .iter()
        .filter(|r| matches!(r.verdict, Verdict::Skip(_)))
        .count();
    outln!(
        "{} rows: {} pass, {failed} fail, {skipped} skipped",
        rows.len(),
        rows.len() - failed - skipped
    )?;
    tmp.close().context("removing the temporary directory")?;
    Ok(if failed > 0 { 1 } else { 0 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules() {
        assert!(Rule::Within(0.1).holds(1.09, 1.0, 1.09));
        assert!(!Rule::Within(0.1).holds(1.11, 1.0, 1.11));
        assert!(!Rule::Within(0.1).holds(0.89, 1.0, 0.89));
        // 10 µs absolute saves a small latency, 10% a large one.
        assert!(Rule::WithinOrAbs(0.1, 10.0).holds(14.0, 5.0, 2.8));
        assert!(Rule::WithinOrAbs(0.1, 10.0).holds(205.0, 190.0, 205.0 / 190.0));
        assert!(!Rule::WithinOrAbs(0.1, 10.0).holds(30.0, 15.0, 2.0));
        assert!(Rule::AtLeast(0.95).holds(0.0, 0.0, 0.95));
        assert!(!Rule::AtLeast(0.95).holds(0.0, 0.0, 0.94));
        assert!(Rule::AtMost(1.5).holds(0.0, 0.0, 1.5));
        assert!(!Rule::AtMost(1.5).holds(0.0, 0.0, 3.8));
    }

    fn row(w: Which, ours: &[&[f64]], reference: &[&[f64]]) -> Row {
        let mut r = Row {
            which: w,
            metrics: w.metrics(),
            ours: ours.iter().map(|v| v.to_vec()).collect(),
            reference: reference.iter().map(|v| v.to_vec()).collect(),
            notes: Vec::new(),
            verdict: Verdict::Pass,
        };
        r.verdict = r.judge();
        r
    }

    #[test]
    fn medians_and_verdicts() {
        let r = row(
            Which::PingPongPinned,
            &[&[5.0], &[5.4], &[9.0]],
            &[&[5.0], &[5.0], &[5.0]],
        );
        let s = r.summary(0);
        assert_eq!(
            (s.ours, s.reference, s.ratio),
            (Some(5.4), Some(5.0), Some(1.08))
        );
        assert_eq!(r.verdict, Verdict::Pass);
        // Periodic: both percentiles must hold.
        let r = row(Which::Periodic, &[&[15.0, 40.0]], &[&[14.5, 25.0]]);
        assert_eq!(r.verdict, Verdict::Fail(String::new()));
        let r = row(Which::Periodic, &[&[15.0, 34.0]], &[&[14.5, 25.0]]);
        assert_eq!(r.verdict, Verdict::Pass);
        // A side without values never passes.
        let r = row(Which::Pi, &[], &[&[1e9]]);
        assert_eq!(r.verdict, Verdict::Fail(String::new()));
        assert_eq!(r.summary(0).ratio, None);
        let r = row(Which::Launch, &[&[3.5]], &[&[0.93]]);
        assert_eq!(r.verdict, Verdict::Fail(String::new()));
    }

    #[test]
    fn table_lines_up_and_shows_every_row() {
        let s = Sizes::of(FidelityOptions { quick: true });
        let mut skipped = row(Which::Messaging, &[], &[]);
        skipped.verdict = Verdict::Skip("hackbench not found (apt-get install rt-tests)".into());
        let rows = [
            row(Which::Periodic, &[&[15.0, 34.0]], &[&[14.5, 25.0]]),
            skipped,
            row(Which::Launch, &[&[3.5]], &[&[0.93]]),
        ];
        let t = table(&rows, &s);
        assert_eq!(t.len(), 4);
        // Every line's ratio cell starts where the header's does.
        let column = |line: &str, at: usize| line.chars().skip(at).collect::<String>();
        let at = t[0].chars().position(|c| c == '/').unwrap() - "ours".len();
        assert!(column(&t[0], at).starts_with("ours/ref"));
        assert!(column(&t[1], at).starts_with("1.03, 1.36 "), "{}", t[1]);
        assert!(column(&t[2], at).starts_with("- "), "{}", t[2]);
        assert!(column(&t[3], at).starts_with("3.76 "), "{}", t[3]);
        assert!(t[1].contains("p50 15.00 µs, p99 34.00 µs"), "{}", t[1]);
        assert!(t[1].ends_with("PASS"), "{}", t[1]);
        assert!(t[2].contains("SKIP: hackbench not found"), "{}", t[2]);
        assert!(t[3].contains("3.76") && t[3].ends_with("FAIL"), "{}", t[3]);
    }

    #[test]
    fn quick_is_smaller() {
        let q = Sizes::of(FidelityOptions { quick: true });
        let f = Sizes::of(FidelityOptions::default());
        assert!(q.trials < f.trials && q.periodic_loops < f.periodic_loops);
        assert_eq!(q.trials_of(Which::Periodic), 1);
        assert_eq!(q.trials_of(Which::Launch), 3);
        assert_eq!(q.launch_workers, 200);
    }
}
