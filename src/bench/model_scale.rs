//! `schedlab bench model`'s scale case: the model on a 2-socket, 64-CPU
//! machine (2 × 16 cores × 2 threads, one LLC and node per socket) with
//! 1,000 processes for 10 s of virtual time, timed here, with the events
//! handled per second. Issue 31's figure: under 10 s of wall time.
//! The second observer of the simulated result is arithmetic: the fair
//! hogs' mean CPU share against the CPUs the periodic tasks leave them.

use anyhow::Result;
use std::time::Instant;

use crate::sim::engine::{Engine, SchedSpec, TaskSpec};
use crate::sim::task::{Burn, Cycle, Program, Step};
use crate::sim::topology::SimTopology;
use crate::sim::{Knobs, Machine};

const MS: u64 = 1_000_000;
const HOGS: usize = 800;
const PERIODIC: usize = 200;
const VIRTUAL_NS: u64 = 10_000 * MS;

/// What the scale case measured.
pub struct ScaleFigures {
    pub wall_s: f64,
    pub events: u64,
    pub hog_share: f64,
    pub expected_share: f64,
    pub migrations: u64,
}

/// Simulate the scale case once.
pub fn measure() -> ScaleFigures {
    let topo = SimTopology::grid(2, 16, 2);
    let cpus = topo.cpus();
    let m = Machine {
        places: Some(topo.places),
        ..Machine::from_knobs(
            "6.12",
            cpus,
            Knobs::default(),
            crate::sys::envinfo::default_base_slice_ns(cpus, "6.12"),
        )
    };
    let fair = SchedSpec::Fair {
        kind: crate::sim::eevdf::FairKind::Normal,
        nice: 0,
        slice_ns: m.base_slice_ns,
    };
    let all: Vec<usize> = (0..cpus).collect();
    let mut tasks = Vec::with_capacity(HOGS + PERIODIC);
    for i in 0..HOGS + PERIODIC {
        let program = if i < HOGS {
            Program::Burn(Burn::until(VIRTUAL_NS))
        } else {
            // 1 ms of CPU then a 9 ms sleep.
            Program::Cycle(Cycle::new(
                vec![Step::Cpu(MS), Step::Io(9 * MS)],
                None,
                Some(VIRTUAL_NS),
            ))
        };
        tasks.push(TaskSpec {
            sched: fair,
            cpus: all.clone(),
            program,
            start_ns: 0,
            worker: true,
        });
    }
    let t0 = Instant::now();
    let out = Engine::new(&m, tasks, None, 0).run(VIRTUAL_NS + 1000 * MS);
    let wall_s = t0.elapsed().as_secs_f64();
    let end = out.end_ns.max(1) as f64;
    let hog_share = out.stats[..HOGS]
        .iter()
        .map(|s| s.run_ns as f64 / end)
        .sum::<f64>()
        / HOGS as f64;
    let periodic_cpu: f64 = out.stats[HOGS..]
        .iter()
        .map(|s| s.run_ns as f64)
        .sum::<f64>()
        / end;
    ScaleFigures {
        wall_s,
        events: out.events,
        hog_share,
        expected_share: (cpus as f64 - periodic_cpu) / HOGS as f64,
        migrations: out.stats.iter().map(|s| s.migrations).sum(),
    }
}

/// Run and print the scale case; true when the figure is met.
pub fn run() -> Result<bool> {
    let f = measure();
    let met = f.wall_s < 10.0;
    outln!(
        "\n## scale\n\n64 CPUs (2 sockets × 16 cores × 2 threads), {} processes ({HOGS} fair hogs, \
         {PERIODIC} fair tasks of 1 ms per 10 ms), {} s of virtual time: {:.2} s of wall time, \
         {} event instants (the engine's steps, each handling every event due then), {:.3e} instants/s, {} migrations. Hogs' mean share {:.4} of a CPU against \
         {:.4} that the CPUs left by the periodic tasks allow. Target: under 10 s — {}.",
        HOGS + PERIODIC,
        VIRTUAL_NS / 1_000_000_000,
        f.wall_s,
        f.events,
        f.events as f64 / f.wall_s.max(1e-9),
        f.migrations,
        f.hog_share,
        f.expected_share,
        if met { "met" } else { "missed" }
    )?;
    Ok(met)
}
