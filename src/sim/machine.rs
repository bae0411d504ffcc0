//! The machine the model runs on and the parameters it is given: CPUs, HZ,
//! the kernel's scheduling knobs ([`Machine`]), the calibrated speeds of
//! the workloads and the calibrated wake-up costs ([`ModelParams`]), and
//! where each parameter came from, so a report can say which condition the
//! model was calibrated on and which it predicts.

use serde::{Deserialize, Serialize};

use super::topology::{Place, SimTopology};
use crate::record::RunRecord;
use crate::sys::envinfo::{self, EnvSnapshot};
use crate::sys::topology::CpuTopology;
use crate::workload::Rates;
use crate::workload::latency::Latency;

/// The kernel and CPUs the model schedules on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// CPUs 0..cpus (the model numbers them from 0: a run's CPU list
    /// names CPUs of that range).
    pub cpus: usize,
    /// CONFIG_HZ: the scheduler tick (`scheduler_tick()` → each class's
    /// `task_tick`) comes every 1 s / HZ.
    pub hz: u32,
    /// EEVDF's `sysctl_sched_base_slice` as the kernel reports it (the
    /// figure `schedlab env` shows).
    pub base_slice_ns: u64,
    /// `sched_rr_timeslice_ms` (Documentation/scheduler/sched-rt-group.rst,
    /// `RR_TIMESLICE` in include/linux/sched/rt.h).
    pub rr_timeslice_ms: u64,
    /// `sched_rt_runtime_us`; -1 disables RT throttling.
    pub rt_runtime_us: i64,
    /// `sched_rt_period_us`.
    pub rt_period_us: u64,
    /// Linux 6.12+: the fair class's deadline server (`rq->fair_server`,
    /// kernel/sched/deadline.c `dl_server_*`, commit "sched/fair: Fair
    /// server interface"), 50 ms every 1 s per CPU by default.
    pub fair_server: bool,
    pub fair_server_runtime_ns: u64,
    pub fair_server_period_ns: u64,
    /// Linux 6.12+: EEVDF's delayed dequeue of sleeping tasks with negative
    /// lag (`DELAY_DEQUEUE`, `DELAY_ZERO` in kernel/sched/features.h).
    pub delay_dequeue: bool,
    /// CPU time a context switch costs the CPU (charged to the incoming
    /// task's run time, not to its work).
    pub context_switch_ns: u64,
    /// The timer slack of a fair task's sleeps ([`TIMER_SLACK_NS`]; RT and
    /// DEADLINE tasks sleep with none, see [`Machine::timer_slack_ns_for`]).
    #[serde(default = "default_timer_slack_ns")]
    pub timer_slack_ns: u64,
    /// Where each model CPU sits (SMT core, LLC, package, node), from the
    /// environment's topology; None: a flat machine (see
    /// [`super::topology`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub places: Option<Vec<Place>>,
    /// CPU time a task loses on its first run after moving to another CPU
    /// (cache refill), charged like a context switch; 0 unless calibrated.
    #[serde(default)]
    pub migration_ns: u64,
}

/// The default timer slack every task inherits: `init_task.timer_slack_ns
/// = 50000` (init/init_task.c), copied on fork. An absolute
/// `clock_nanosleep` arms its hrtimer with the range [t, t + slack]
/// (`hrtimer_nanosleep` → `hrtimer_set_expires_range_ns(…,
/// current->timer_slack_ns)`, kernel/time/hrtimer.c). RT and DEADLINE
/// tasks get slack 0: `__setscheduler_params` sets `p->timer_slack_ns =
/// 0` for them since Linux 6.7 (commit "hrtimer: Use and report correct
/// timerslack values for realtime tasks"; before, `hrtimer_nanosleep`
/// itself used 0 for `rt_task(current)`). Seen here:
/// `/proc/self/timerslack_ns` reads 50000 under OTHER and BATCH, 0 under
/// `chrt -f 1`.
pub const TIMER_SLACK_NS: u64 = 50_000;

fn default_timer_slack_ns() -> u64 {
    TIMER_SLACK_NS
}

/// The scheduling knobs an environment recorded (None: the kernel's
/// default).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Knobs {
    pub hz: Option<u32>,
    pub rr_timeslice_ms: Option<i64>,
    pub rt_runtime_us: Option<i64>,
    pub rt_period_us: Option<i64>,
}

/// The fair server's defaults (kernel/sched/deadline.c
/// `dl_server_apply_params` via `fair_server_init`: 50 ms / 1000 ms).
pub const FAIR_SERVER_RUNTIME_NS: u64 = 50_000_000;
pub const FAIR_SERVER_PERIOD_NS: u64 = 1_000_000_000;

impl Machine {
    /// The machine an environment snapshot describes; `base_slice_ns` is
    /// the fair class's base slice as the kernel reported it
    /// (`envinfo::fair_base_slice_ns`), since the snapshot does not carry
    /// it. Knobs the snapshot lacks take the kernel's defaults.
    pub fn from_env(env: &EnvSnapshot, base_slice_ns: u64) -> Machine {
        let m = Machine::from_knobs(
            &env.kernel_release,
            env.cpus_allowed.len(),
            Knobs {
                hz: env.hz,
                rr_timeslice_ms: env.sched_rr_timeslice_ms,
                rt_runtime_us: env.sched_rt_runtime_us,
                rt_period_us: env.sched_rt_period_us,
            },
            base_slice_ns,
        );
        m.with_topology(env.topology.as_ref(), &env.cpus_allowed)
    }

    /// The machine with the topology `t` of the CPUs `cpus` (model CPU
    /// `i` is `cpus[i]`); flat when `t` is None or lacks one of them.
    pub fn with_topology(mut self, t: Option<&CpuTopology>, cpus: &[usize]) -> Machine {
        let cpus: Vec<usize> = if cpus.len() == self.cpus {
            cpus.to_vec()
        } else {
            (0..self.cpus).collect()
        };
        self.places = t.map(|_| SimTopology::from_env(t, &cpus).places);
        if self
            .places
            .as_ref()
            .is_some_and(|p| *p == SimTopology::flat(self.cpus).places)
        {
            self.places = None;
        }
        self
    }

    /// The machine of a guest level (`[machines.NAME]`) of this machine
    /// when its environment is not known: the guest's CPUs and topology
    /// ([`SimTopology::guest`]), its kernel's release and HZ when known
    /// (a recipe's; None keeps this machine's), the kernel's default
    /// knobs (a fresh boot: RT 950000/1000000 µs, RR 100 ms) and the
    /// default base slice for its CPU count (`sched_update_scaling`: the
    /// release's normalized slice, 0.75 or 0.70 ms, × (1 + log2 min(CPUs,
    /// 8)); without a release, this machine's slice rescaled to the
    /// guest's CPUs). The calibrated costs stay this machine's.
    pub fn for_guest(
        &self,
        topology: (usize, usize, usize),
        nodes: usize,
        release: Option<&str>,
        hz: Option<u32>,
    ) -> Machine {
        let (s, c, t) = topology;
        let places = SimTopology::guest(s, c, t, nodes).places;
        let cpus = places.len();
        let new_kernel = release.map_or(self.fair_server, |r| kernel_at_least(r, 6, 12));
        let flat = places == SimTopology::flat(cpus).places;
        Machine {
            cpus,
            hz: hz.unwrap_or(self.hz).max(1),
            base_slice_ns: match release {
                Some(r) => crate::sys::envinfo::default_base_slice_ns(cpus, r),
                None => {
                    self.base_slice_ns / envinfo::base_slice_factor(self.cpus)
                        * envinfo::base_slice_factor(cpus)
                }
            },
            rr_timeslice_ms: 100,
            rt_runtime_us: 950_000,
            rt_period_us: 1_000_000,
            fair_server: new_kernel,
            delay_dequeue: new_kernel,
            places: (!flat).then_some(places),
            ..self.clone()
        }
    }

    /// The CPUs and scheduling domains the model balances over.
    pub fn topology(&self) -> SimTopology {
        match &self.places {
            Some(p) if p.len() == self.cpus.max(1) => SimTopology::from_places(p.clone()),
            _ => SimTopology::flat(self.cpus),
        }
    }

    /// The machine of a kernel release with `cpus` CPUs and the knobs a
    /// stored environment recorded (a report has these, not the snapshot).
    pub fn from_knobs(release: &str, cpus: usize, k: Knobs, base_slice_ns: u64) -> Machine {
        let new_kernel = kernel_at_least(release, 6, 12);
        Machine {
            cpus: cpus.max(1),
            hz: k.hz.unwrap_or(250).max(1),
            base_slice_ns,
            rr_timeslice_ms: k.rr_timeslice_ms.unwrap_or(100).max(1) as u64,
            rt_runtime_us: k.rt_runtime_us.unwrap_or(950_000),
            rt_period_us: k.rt_period_us.unwrap_or(1_000_000).max(1) as u64,
            fair_server: new_kernel,
            fair_server_runtime_ns: FAIR_SERVER_RUNTIME_NS,
            fair_server_period_ns: FAIR_SERVER_PERIOD_NS,
            delay_dequeue: new_kernel,
            context_switch_ns: 0,
            timer_slack_ns: TIMER_SLACK_NS,
            places: None,
            migration_ns: 0,
        }
    }

    /// The timer slack of a task's sleeps: none for RT and DEADLINE
    /// (schedlab's WRR runs its workers as FIFO), the machine's for the
    /// fair policies ([`TIMER_SLACK_NS`]).
    pub fn timer_slack_ns_for(&self, fair: bool) -> u64 {
        if fair { self.timer_slack_ns } else { 0 }
    }

    pub fn tick_ns(&self) -> u64 {
        1_000_000_000 / u64::from(self.hz.max(1))
    }

    /// RR's time slice in ticks: the kernel keeps it in jiffies
    /// (`sched_rr_timeslice = RR_TIMESLICE`, `msecs_to_jiffies` in
    /// kernel/sched/rt.c `sched_rr_handler`), at least one.
    pub fn rr_ticks(&self) -> u64 {
        (self.rr_timeslice_ms * u64::from(self.hz) / 1000).max(1)
    }

    /// The RT runtime per period in ns; None when throttling is off.
    pub fn rt_runtime_ns(&self) -> Option<u64> {
        (self.rt_runtime_us >= 0).then(|| self.rt_runtime_us as u64 * 1000)
    }

    pub fn rt_period_ns(&self) -> u64 {
        self.rt_period_us.max(1) * 1000
    }

    /// Fraction of each CPU RT and DEADLINE may use (sched-rt-group.rst:
    /// runtime / period; 1 with throttling off).
    pub fn rt_fraction(&self) -> f64 {
        match self.rt_runtime_ns() {
            Some(r) => r as f64 / self.rt_period_ns() as f64,
            None => 1.0,
        }
    }
}

/// Whether a `uname -r` release is at least major.minor.
pub fn kernel_at_least(release: &str, major: u32, minor: u32) -> bool {
    let mut parts = release
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<u32>().unwrap_or(0));
    match (parts.next(), parts.next()) {
        (Some(a), Some(b)) => (a, b) >= (major, minor),
        _ => false,
    }
}

/// The wake-up costs the model cannot derive from first principles,
/// calibrated from a measured run ([`WakeCosts::from_periodic_run`],
/// [`WakeCosts::from_pingpong_run`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WakeCosts {
    /// From a timer's expiry to the woken task running on an idle CPU
    /// (timer interrupt, idle exit, the switch): added to every timed
    /// wake-up of a periodic task.
    pub timer_wakeup_ns: u64,
    /// CPU one end of a pingpong pair spends per round trip (its write,
    /// its read, waking its peer).
    pub handoff_ns: u64,
    /// Where these came from ("run <key>: p50 wake-up", or "not
    /// calibrated").
    pub source: String,
}

impl Default for WakeCosts {
    fn default() -> Self {
        WakeCosts {
            timer_wakeup_ns: 0,
            handoff_ns: 0,
            source: "not calibrated (0 ns)".into(),
        }
    }
}

/// Why a run cannot calibrate a cost.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CalibrationError {
    #[error("run {key} has no \"{histogram}\" latency histogram in its workers")]
    NoHistogram { key: String, histogram: String },
    #[error("{key}: {message}")]
    Bad { key: String, message: String },
}

/// The p50 of histogram `name` pooled over a run's workers.
fn pooled_p50(record: &RunRecord, name: &str) -> Result<u64, CalibrationError> {
    let mut pooled = Latency::new();
    for p in record.processes.iter().filter(|p| p.role == "worker") {
        if let Some(bytes) = p.latency.get(name) {
            let h = Latency::decode(bytes).map_err(|e| CalibrationError::Bad {
                key: format!("run {}", record.run.key),
                message: format!("{e:#}"),
            })?;
            pooled.add(&h);
        }
    }
    if pooled.count() == 0 {
        return Err(CalibrationError::NoHistogram {
            key: record.run.key.clone(),
            histogram: name.into(),
        });
    }
    Ok(pooled.quantile_ns(0.5))
}

impl WakeCosts {
    /// The timer wake-up cost from a measured periodic run: the p50 of its
    /// wake-up latency less the context switch the model adds to every
    /// wake-up. Calibrate on a run with one periodic process per CPU
    /// (FIFO, so nothing else delays it), then predict the others.
    pub fn from_periodic_run(
        mut self,
        record: &RunRecord,
        context_switch_ns: u64,
    ) -> Result<Self, CalibrationError> {
        self.timer_wakeup_ns = pooled_p50(record, "wakeup")?.saturating_sub(context_switch_ns);
        self.source = append_source(
            &self.source,
            &record.run.key,
            "timer wake-up = p50 wakeup - switch",
        );
        Ok(self)
    }

    /// The pingpong hand-off from a measured pingpong run: half the p50
    /// round trip less one context switch per end (both ends sharing one
    /// CPU do a round trip in 2 × (hand-off + switch)).
    pub fn from_pingpong_run(
        mut self,
        record: &RunRecord,
        context_switch_ns: u64,
    ) -> Result<Self, CalibrationError> {
        let p50 = pooled_p50(record, "round_trip")?;
        self.handoff_ns = (p50 / 2).saturating_sub(context_switch_ns);
        self.source = append_source(
            &self.source,
            &record.run.key,
            "hand-off = p50 round_trip / 2 - switch",
        );
        Ok(self)
    }
}

fn append_source(old: &str, key: &str, what: &str) -> String {
    let new = format!("{what} of run {key}");
    if old.starts_with("not calibrated") {
        new
    } else {
        format!("{old}; {new}")
    }
}

/// Everything the model is given besides the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelParams {
    pub machine: Machine,
    /// Workload speeds measured on the machine (`workload::calibrate`).
    pub rates: Rates,
    /// Where `rates` came from ("schedlab calibrate on host …").
    pub rates_source: String,
    pub wake: WakeCosts,
    /// Bytes per second the storage device serves blocking writes at
    /// (copy with fsync or O_DIRECT); None: those runs are not modelled.
    pub io_bytes_per_s: Option<f64>,
}

impl ModelParams {
    pub fn new(machine: Machine, rates: Rates, rates_source: &str) -> ModelParams {
        ModelParams {
            machine,
            rates,
            rates_source: rates_source.to_string(),
            wake: WakeCosts::default(),
            io_bytes_per_s: None,
        }
    }
}

impl ModelParams {
    /// Take the CPU speed of `record`'s workload from that measured run:
    /// its workers' work over the CPU time they received (schedstat run
    /// time), which is the rate the workload ran at on this machine under
    /// that condition. Calibrate on one condition (say one process alone,
    /// or FIFO), then predict the others; the source says which run.
    pub fn rates_from_run(self, record: &RunRecord) -> Result<Self, CalibrationError> {
        self.rates_from_processes(
            &record.run.workload.workload,
            &format!("run {}", record.run.key),
            &record.processes,
        )
    }

    /// As [`ModelParams::rates_from_run`] over the processes of several
    /// runs of one condition (`source` names them): Σ work / Σ run time of
    /// their ok workers.
    pub fn rates_from_processes(
        mut self,
        w: &crate::workload::Workload,
        source: &str,
        processes: &[crate::record::ProcessRecord],
    ) -> Result<Self, CalibrationError> {
        let key = source.to_string();
        let workers = processes.iter().filter(|p| p.role == "worker" && p.ok);
        let (work, run_ns) = workers.fold((0u64, 0u64), |(w, r), p| {
            (
                w + p.work.unwrap_or(0),
                r + p.kernel.get(crate::fields::Field::RunNs).unwrap_or(0),
            )
        });
        if work == 0 || run_ns == 0 {
            return Err(CalibrationError::Bad {
                key,
                message: "no worker reported work and run time".into(),
            });
        }
        let per_s = work as f64 / (run_ns as f64 / 1e9);
        let Some((rate, scale)) = w.model().calibrates() else {
            return Err(CalibrationError::Bad {
                key,
                message: format!("a {} run does not calibrate a CPU speed", w.kind()),
            });
        };
        rate.set(&mut self.rates, scale.of(per_s));
        let what = rate.name();
        self.rates_source = format!("{}; {what} = {per_s:.4e}/s from {key}", self.rates_source);
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2 × 3e8 iterations in 0.8 s of CPU: 7.5e8 iterations/s.
    #[test]
    fn cpu_speed_from_a_measured_run() {
        let spec = crate::spec::load(
            "[matrix]\nworkload = [\"pi\"]\nprocesses = [2]\n[workloads.pi]\niterations = 300000000\n",
            "t.toml",
            &[],
        )
        .unwrap();
        let run = crate::plan::expand(&spec, 1).remove(0);
        let sched = crate::policy::ProcSched::fair(crate::policy::Policy::Other, 0);
        let mut procs = vec![
            crate::testing::synth::synthetic_process(0, sched, 9, 3),
            crate::testing::synth::synthetic_process(1, sched, 9, 3),
        ];
        for p in &mut procs {
            p.work = Some(300_000_000);
            p.kernel.set(crate::fields::Field::RunNs, Some(400_000_000));
        }
        let env = crate::testing::synth::synthetic_env(2);
        let record =
            crate::testing::synth::synthetic_record(&run, &env, vec![0, 1], 0, None, procs);
        let rates = Rates {
            pi_iter_per_s: 1.0,
            hash_per_s: 1.0,
            flops_per_s: 1.0,
            copy_bytes_per_s: 1.0,
            wake_round_trip_s: 1e-5,
        };
        let p = ModelParams::new(Machine::from_env(&env, 1_000_000), rates, "test")
            .rates_from_run(&record)
            .unwrap();
        assert!((p.rates.pi_iter_per_s / 7.5e8 - 1.0).abs() < 1e-12);
        assert!(p.rates_source.contains(&run.key), "{}", p.rates_source);
    }

    #[test]
    fn kernel_versions_compare() {
        assert!(kernel_at_least("6.18.44-fc-v669", 6, 12));
        assert!(kernel_at_least("6.12.0", 6, 12));
        assert!(!kernel_at_least("6.6.30-generic", 6, 12));
        assert!(!kernel_at_least("schedlab-model 1", 6, 12));
        assert!(kernel_at_least("7.0", 6, 12));
    }

    #[test]
    fn machine_from_an_environment() {
        let env = crate::testing::synth::synthetic_env(2);
        let m = Machine::from_env(&env, 3_000_000);
        assert_eq!((m.cpus, m.hz, m.base_slice_ns), (2, 250, 3_000_000));
        assert_eq!(m.tick_ns(), 4_000_000);
        // 100 ms at HZ 250: 25 ticks.
        assert_eq!(m.rr_ticks(), 25);
        assert_eq!(m.rt_runtime_ns(), Some(950_000_000));
        assert!((m.rt_fraction() - 0.95).abs() < 1e-12);
        // 6.1: no fair server, no delayed dequeue.
        assert!(!m.fair_server && !m.delay_dequeue);
    }
}
