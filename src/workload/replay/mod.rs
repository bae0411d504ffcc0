//! The replay workload (`kind = "replay"`): the scheduling behaviour of a
//! traced run of any workload, synthesized by `schedlab synthesize`
//! (`crate::synth`), carried out for real: the same tree of processes and
//! threads, each doing its recorded CPU bursts (in work units of the
//! calibrated pi loop, so that it runs on any machine), sleeps, and
//! wake-ups of its partners in the recorded order (`desc` says what a
//! description holds, `run` how it runs).
//!
//! Worker `i` of a run is root task `i`: a run has as many processes as the
//! description has roots ([`Kind::group_size`]). The description reaches the
//! workers through a memory file of the run's wiring (a command line holds
//! at most 128 KiB; a build's description is more), with the doorbells and
//! pipes the tasks wake each other with (`channel`). Work unit: passes over the recording
//! (`passes`, default 1). Figures: `tasks` (of the worker's tree),
//! `work_units` (burnt by the worker's own process and threads),
//! `passes`.

pub mod channel;
pub mod desc;
pub mod run;

use std::fs::File;
use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::kind::{Entry, Kind};
use super::{Rates, Stop, Wiring, WorkContext, WorkOutput, Workload, elapsed_ns, figures};
use crate::sys::futex::{Doorbells, doorbell_bytes};
use desc::{Body, Op, ReplayTask};

/// A replay. Work unit: passes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplayParams {
    /// Passes over the recording (only `Stop::Work`: a replay stopped at a
    /// time would leave partners waiting).
    pub stop: Stop,
    /// Empty in a worker's arguments: the worker reads them from its
    /// wiring.
    pub tasks: Vec<ReplayTask>,
    /// Pi iterations per CPU second on the machine that synthesized the
    /// replay (how its bursts were converted; information only).
    pub pi_iter_per_s: f64,
    /// Bursts and sleeps are scaled by this (the spec's `scale`).
    #[serde(default = "one")]
    pub scale: f64,
    /// The run it was synthesized from (`source`; information only).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub source: String,
    /// The name of the workload it was synthesized from (`original`): the
    /// report's replay section sets this replay beside that workload's
    /// runs of the same condition. Empty: not known.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub original: String,
    /// The condition it was captured in (`captured`, "policy P, cpus C"):
    /// the report marks that condition. Empty: not known.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub captured: String,
    /// How close it came to that run (`fidelity`, written by `schedlab
    /// synthesize --check`); None: not checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fidelity: Option<String>,
}

fn one() -> f64 {
    1.0
}

/// Σ work units of every burst.
pub fn total_work_units(tasks: &[ReplayTask]) -> u64 {
    tasks
        .iter()
        .map(|t| match &t.body {
            Body::Sequence(ops) => ops
                .iter()
                .map(|o| match o {
                    Op::Run(n) => *n,
                    _ => 0,
                })
                .sum(),
            Body::Distribution(d) => {
                let q = &d.burst_work;
                let mean = (0..d.bursts.min(10_000))
                    .map(|k| run::quantile_at(q, (k as f64 + 0.5) / d.bursts.min(10_000) as f64))
                    .sum::<u64>() as f64
                    / d.bursts.clamp(1, 10_000) as f64;
                (mean * d.bursts as f64) as u64
            }
        })
        .sum()
}

/// The tasks of root `root`'s tree (itself included).
pub fn tree_size(tasks: &[ReplayTask], root: usize) -> u64 {
    1 + tasks[root]
        .forks()
        .into_iter()
        .map(|c| tree_size(tasks, c))
        .sum::<u64>()
}

/// Doorbells a replay's run maps: one a pair of threads that wake each
/// other ([`channel::futex_pairs`]), at least one.
fn doorbells_of(tasks: &[ReplayTask]) -> usize {
    channel::futex_pairs(tasks).len().max(1)
}

fn read_description(
    ctx: &WorkContext,
) -> anyhow::Result<(Vec<ReplayTask>, Doorbells, channel::Pipes)> {
    let mut fds = super::wiring::take(&ctx.fds)?.into_iter();
    let (Some(desc_fd), Some(bells_fd)) = (fds.next(), fds.next()) else {
        anyhow::bail!("a replay worker needs its two channels");
    };

    // Read at offsets: every worker shares the file's one position.
    let f = File::from(desc_fd);
    let mut bytes = vec![0u8; usize::try_from(f.metadata()?.len())?];
    f.read_exact_at(&mut bytes, 0)?;
    let tasks: Vec<ReplayTask> = postcard::from_bytes(&bytes)
        .map_err(|e| anyhow::anyhow!("the replay's description in its wiring: {e}"))?;
    let bells = Doorbells::map(bells_fd.as_fd(), doorbells_of(&tasks))?;
    let mut pipes: channel::Pipes = Vec::with_capacity(tasks.len());
    for p in channel::piped(&tasks) {
        pipes.push(match p {
            true => match (fds.next(), fds.next()) {
                (Some(r), Some(w)) => Some((File::from(r), File::from(w))),
                _ => anyhow::bail!("a replay worker is missing a task's wake-up pipe"),
            },
            false => None,
        });
    }
    Ok((tasks, bells, pipes))
}

impl Kind for ReplayParams {
    fn name(&self) -> &'static str {
        "replay"
    }
    fn work_unit(&self) -> &'static str {
        "passes"
    }
    fn stop(&self) -> Stop {
        self.stop
    }
    fn set_stop(&mut self, stop: Stop) {
        self.stop = stop;
    }
    fn scaled(&self, f: f64) -> Workload {
        Workload::Replay(ReplayParams {
            scale: self.scale * f,
            ..self.clone()
        })
    }
    fn group_size(&self) -> u32 {
        desc::roots(&self.tasks).len().max(1) as u32
    }
    fn wire(&self, processes: usize) -> anyhow::Result<Wiring> {
        let mut w = Wiring::default();
        let text = postcard::to_allocvec(&self.tasks)?;
        let d = w.memory(&text)?;
        let b = w.memory(&vec![0u8; doorbell_bytes(doorbells_of(&self.tasks))])?;
        let mut pipes = Vec::new();
        for piped in channel::piped(&self.tasks) {
            if piped {
                pipes.push(w.pipe()?);
            }
        }
        for p in 0..processes {
            w.give(p, d);
            w.give(p, b);
            for &(r, wr) in &pipes {
                w.give(p, r);
                w.give(p, wr);
            }
        }
        Ok(w)
    }
    fn lean(&self) -> Option<Workload> {
        Some(Workload::Replay(ReplayParams {
            tasks: Vec::new(),
            ..self.clone()
        }))
    }
    fn run(&self, ctx: &WorkContext) -> anyhow::Result<WorkOutput> {
        let Stop::Work(passes) = self.stop else {
            anyhow::bail!("a replay runs whole passes (`passes`), not for a duration");
        };
        let (tasks, doorbells, pipes) = read_description(ctx)?;
        // A recorded sleep already holds the original's timer slack: the
        // replay sleeps it with none of its own (1 ns, the least the
        // kernel takes; 0 would restore the default 50 µs).
        crate::sys::proc::set_timer_slack_ns(1)?;
        let bells = channel::Bells::new(&tasks, doorbells, pipes);
        let roots = desc::roots(&tasks);
        anyhow::ensure!(!roots.is_empty(), "a replay without a root task");
        let root = roots[ctx.index % roots.len()];
        let r = run::Replayer {
            tasks: &tasks,
            bells: &bells,
            scale: self.scale,
        };
        let start = Instant::now();
        let mut units = 0;
        for _ in 0..passes {
            units += r.run_process(root)?.work_units;
        }
        let elapsed = elapsed_ns(start);
        Ok(WorkOutput {
            work: passes,
            elapsed_ns: elapsed,
            figures: figures([
                ("tasks", tree_size(&tasks, root) as f64),
                ("work_units", units as f64),
                ("passes", passes as f64),
            ]),
            latency: Default::default(),
        })
    }
    fn estimate_cpu_s(&self, rates: &Rates) -> f64 {
        let Stop::Work(passes) = self.stop else {
            return 0.0;
        };
        let roots = desc::roots(&self.tasks).len().max(1) as f64;
        total_work_units(&self.tasks) as f64 * self.scale * passes as f64
            / rates.pi_iter_per_s
            / roots
    }
    fn cpu_bound(&self) -> bool {
        false
    }
    fn model(&self) -> super::modelled::ModelTask<'_> {
        super::modelled::ModelTask::Replay(self)
    }
}

pub const ENTRY: Entry = Entry {
    name: "replay",
    parse: |k| {
        k.only(&[
            "tasks",
            "passes",
            "pi_iter_per_s",
            "source",
            "original",
            "captured",
            "external_wakeups",
            "fidelity",
        ])?;
        let tasks = desc::parse(k)?;
        let pi_iter_per_s = k.float("pi_iter_per_s")?.unwrap_or(0.0);
        if !(pi_iter_per_s.is_finite() && pi_iter_per_s >= 0.0) {
            return Err(k.err("pi_iter_per_s", "must be a non-negative rate"));
        }
        let source = k.str("source")?.unwrap_or_default().to_string();
        let original = k.str("original")?.unwrap_or_default().to_string();
        let captured = k.str("captured")?.unwrap_or_default().to_string();
        let fidelity = k.str("fidelity")?.map(str::to_string);
        let _ = k.int("external_wakeups")?;
        Ok(Workload::Replay(ReplayParams {
            stop: Stop::Work(k.positive_or("passes", 1)?),
            tasks,
            pi_iter_per_s,
            scale: 1.0,
            source,
            original,
            captured,
            fidelity,
        }))
    },
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::keys::Keys;

    #[test]
    fn a_tree_is_wired_and_replayed_in_this_process() {
        let t: toml::Table = r#"
passes = 2
tasks = [
  { name = "t0", ops = ["run 1000", "fork t0.1", "fork t0.2", "sleep 10ns by t0.1", "wake t0.2", "run 50"] },
  { name = "t0.1", parent = "t0", ops = ["run 20000", "wake t0", "sleep 100000ns timer"] },
  { name = "t0.2", parent = "t0", thread = true, ops = ["sleep 5ns by t0", "run 7"] },
]"#
        .parse()
        .unwrap();
        let w = (ENTRY.parse)(&Keys::new("r", "replay", &t)).unwrap();
        assert_eq!(w.imp().group_size(), 1);
        let wiring = w.imp().wire(1).unwrap();
        let ctx = WorkContext {
            fds: wiring.fds_of(0).to_vec(),
            dir: std::env::temp_dir(),
            index: 0,
            release_ns: None,
        };
        // The worker takes its channels as its own (and closes them): the
        // wiring must not close them again.
        std::mem::forget(wiring);
        let lean = w.imp().lean().unwrap();
        let out = lean.imp().run(&ctx).unwrap();
        assert_eq!(out.work, 2);
        assert_eq!(out.figures["tasks"], 3.0);
        // The root's process: its own bursts and its thread's, twice (the
        // forked process's are its own).
        assert_eq!(out.figures["work_units"], 2.0 * (1000.0 + 50.0 + 7.0));
        assert_eq!(total_work_units(&w.command_free_tasks()), 21057);
    }

    impl Workload {
        fn command_free_tasks(&self) -> Vec<ReplayTask> {
            match self {
                Workload::Replay(p) => p.tasks.clone(),
                _ => unreachable!(),
            }
        }
    }

    #[test]
    fn a_duration_is_refused() {
        let mut p = ReplayParams {
            stop: Stop::DurationNs(1),
            tasks: vec![],
            pi_iter_per_s: 1.0,
            scale: 1.0,
            source: String::new(),
            original: String::new(),
            captured: String::new(),
            fidelity: None,
        };
        let ctx = WorkContext {
            fds: vec![],
            dir: std::env::temp_dir(),
            index: 0,
            release_ns: None,
        };
        assert!(p.run(&ctx).unwrap_err().to_string().contains("passes"));
        p.stop = Stop::Work(1);
        assert_eq!(p.group_size(), 1);
    }
}
