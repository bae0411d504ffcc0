//! The model as a campaign's [`Executor`]: each run is simulated
//! ([`crate::sim::simulate`]) instead of carried out on processes, and
//! stored like a measured one, with the model as its machine (its release,
//! parameters and host id) and its predicted per-CPU timeline stored as
//! a model capture ([`crate::sim::timeline`]). Nothing on the machine
//! changes: no lock, no kernel setting, no process. A stop signal is
//! looked for during a run too (a long simulation can take minutes): the
//! run is then interrupted and not stored, as a measured one.

use anyhow::Result;

use crate::launch::Outcome;
use crate::plan::Run;
use crate::sim::{self, ModelParams};
use crate::spec::Spec;
use crate::spec::machines::Guest;

use super::execute::Executor;

/// The discrete-event model of this machine's scheduler.
pub struct ModelExecutor<'a> {
    pub spec: &'a Spec,
    pub params: ModelParams,
    /// The stop signals (blocked) looked for during a run.
    pub signals: libc::sigset_t,
}

impl Executor for ModelExecutor<'_> {
    fn execute(&mut self, run: &Run) -> Result<Outcome> {
        let mut stopped = None;
        let signals = self.signals;
        let mut stop = || {
            stopped = crate::sys::proc::pending_stop_signal(&signals);
            stopped.is_some()
        };
        let guest = run.machine.as_ref().and_then(|m| m.guest.as_ref());
        let level_params = guest.map(|g| guest_params(&self.params, g));
        let params = level_params.as_ref().unwrap_or(&self.params);
        let mut sim = sim::simulate_until_stopped(run, self.spec, params, &mut stop);
        if let (true, Some(sig)) = (sim.interrupted, stopped) {
            return Ok(Outcome::Interrupted(sig));
        }
        // The model has no clock: when it was asked is the run's start.
        sim.record.started_unix_ms = crate::store::unix_ms();
        let cpus = params.machine.cpus;
        Ok(match sim::timeline::prediction(&sim, cpus) {
            Some(p) => Outcome::Predicted(Box::new(sim.record), Box::new(p)),
            None => Outcome::Done(Box::new(sim.record), None),
        })
    }
}

/// The model of a guest level when no environment of it is at hand: its
/// declared topology and nodes, and for a recipe's kernel that kernel's
/// release and the HZ of schedlab's fragments
/// ([`Machine::for_guest`](sim::Machine::for_guest)); a kernel given as a
/// bzImage path keeps this machine's release and HZ.
pub fn guest_params(host: &ModelParams, g: &Guest) -> ModelParams {
    let recipe = crate::machine::kernel::recipe::find(&g.kernel);
    let hz = recipe.and_then(|_| crate::machine::kernel::recipe::fragment_hz());
    let t = g.topology;
    let machine = host.machine.for_guest(
        (t.sockets as usize, t.cores as usize, t.threads as usize),
        g.numa_nodes as usize,
        recipe.map(|r| r.release()),
        hz,
    );
    ModelParams {
        machine,
        ..host.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::RunStatus;

    #[test]
    fn a_simulated_run_is_a_record_of_the_model_s_machine() {
        let text = "name = \"m\"\n[matrix]\npolicy = [\"fifo\"]\nworkload = [\"w\"]\nprocesses = [2]\n\
                    cpus = [\"0\"]\n[workloads.w]\nkind = \"pi\"\niterations = 1000000\n";
        let spec = crate::spec::load(text, "m.toml", &[]).unwrap();
        let env = crate::testing::synth::synthetic_env(2);
        let machine = sim::Machine::from_env(&env, 3_000_000);
        let mut rates = crate::workload::Rates {
            pi_iter_per_s: 1e9,
            hash_per_s: 1e5,
            flops_per_s: 1e9,
            copy_bytes_per_s: 1e9,
            wake_round_trip_s: 1e-5,
        };
        rates.pi_iter_per_s = 1e9;
        let params = ModelParams::new(machine, rates, "test");
        let mut exec = ModelExecutor {
            spec: &spec,
            params,
            signals: crate::sys::proc::empty_signal_set(),
        };
        let run = crate::plan::expand(&spec, 1).remove(0);
        let Outcome::Predicted(rec, p) = exec.execute(&run).unwrap() else {
            panic!("not a prediction")
        };
        // The timeline: one slice per process, one after the other on CPU 0.
        let s = &p.derived.slices;
        assert_eq!(s.len(), 2, "{s:?}");
        assert!(s.iter().all(|s| s.cpu == 0));
        assert!(s[0].end_ns <= s[1].start_ns);
        assert!(p.capture.events.is_empty());
        assert_eq!(rec.status, RunStatus::Ok, "{}", rec.reason);
        assert_eq!(rec.env.kernel_release, sim::MODEL_RELEASE);
        assert!(
            rec.env
                .host_id
                .as_deref()
                .is_some_and(|h| h.starts_with("model-"))
        );
        // FIFO on one CPU: one after the other, 1 ms of pi each.
        let mut ends: Vec<u64> = rec.processes.iter().filter_map(|p| p.end_ns).collect();
        ends.sort_unstable();
        assert_eq!(ends.len(), 2);
        assert!(
            (ends[1] as f64 / ends[0] as f64 - 2.0).abs() < 0.05,
            "{ends:?}"
        );
        assert!(rec.started_unix_ms > 0);
    }

    /// A run on a guest level `2x2x1` with 2 nodes (none booted) is
    /// simulated on the guest's 4 CPUs, not this machine's 2: 6 free hogs
    /// keep all 4 busy, and the level's machine has NUMA above its cores,
    /// the recipe's HZ 1000 and its kernel's 4-CPU default base slice:
    /// 2.1 ms, 0.70 ms × 3, as the cached 6.12.117 guest reports it
    /// (debugfs sched/base_slice_ns, read by scripts/guest-lb-probe).
    #[test]
    fn a_guest_level_is_simulated_on_the_guest_s_topology() {
        let text = "name = \"g\"\n[matrix]\npolicy = [\"other\"]\nworkload = [\"w\"]\n\
                    processes = [6]\ncpus = [\"all\"]\nmachine = [\"g\"]\n[workloads.w]\n\
                    kind = \"pi\"\niterations = 20000000\n[machines.g]\nkernel = \"debian-6.12\"\n\
                    topology = \"2x2x1\"\nnuma_nodes = 2\naccel = \"tcg-icount\"\n";
        let spec = crate::spec::load(text, "g.toml", &[]).unwrap();
        let env = crate::testing::synth::synthetic_env(2);
        let rates = crate::workload::Rates {
            pi_iter_per_s: 1e9,
            hash_per_s: 1e5,
            flops_per_s: 1e9,
            copy_bytes_per_s: 1e9,
            wake_round_trip_s: 1e-5,
        };
        let params = ModelParams::new(sim::Machine::from_env(&env, 3_000_000), rates, "test");
        let run = crate::plan::expand(&spec, 1).remove(0);
        let g = run.machine.as_ref().and_then(|m| m.guest.as_ref()).unwrap();
        let m = guest_params(&params, g).machine;
        assert_eq!((m.cpus, m.hz, m.base_slice_ns), (4, 1000, 2_100_000));
        let levels: Vec<_> = m.topology().domains[0].iter().map(|d| d.level).collect();
        assert_eq!(
            levels,
            [sim::topology::Level::Mc, sim::topology::Level::Numa]
        );
        let mut exec = ModelExecutor {
            spec: &spec,
            params,
            signals: crate::sys::proc::empty_signal_set(),
        };
        let Outcome::Predicted(rec, p) = exec.execute(&run).unwrap() else {
            panic!("not a prediction")
        };
        assert_eq!(rec.status, RunStatus::Ok, "{}", rec.reason);
        assert_eq!(rec.cpu_list, [0, 1, 2, 3]);
        let mut lanes: Vec<u32> = p.derived.slices.iter().map(|s| s.cpu).collect();
        lanes.sort_unstable();
        lanes.dedup();
        assert_eq!(lanes, [0, 1, 2, 3]);
        // 6 × 20 ms of pi on 4 CPUs: all 4 busy to the end, ~30 ms.
        let util = rec.cpu_util.unwrap();
        assert!(util > 0.9, "{util}");
    }
}
