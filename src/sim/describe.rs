//! How a simulated run describes itself: the environment snapshot of the
//! model (kernel release [`super::MODEL_RELEASE`], its parameters), the
//! parameters and their sources as the record's `extra.model`, what the
//! model leaves out, and each workload's work, figures and latency
//! histograms from what its program did.

use std::collections::BTreeMap;

use crate::sys::envinfo::EnvSnapshot;
use crate::workload::modelled::ModelTask;
use crate::workload::{Stop, Workload};

use super::engine::{Outcome, TaskStats};
use super::machine::{Machine, ModelParams};
use super::mapping::{MODEL_RELEASE, unit_s};
use super::task::Program;

/// What the model knowingly does not represent, stored with every run.
pub const NOT_MODELLED: &[&str] = &[
    "PELT's util_est, frequency and capacity invariance and group hierarchies (load averages are the kernel's for tasks in the root group; equal hogs keep whole-task loads in them, so detach_tasks' check after one failure still meets an imbalance of 512 with a task's 511 and moves one, where a 6.12 guest's imbalances scatter 242-804 and refuse a third of those moves: the scatter's cause is not in the model), nohz idle-balance delays, misfit balancing",
    "timer interrupts an emulator loses (a tcg-icount guest with 4 busy vCPUs took 64-70 % of its ticks: longer turns, fewer switches)",
    "cache and memory-bandwidth contention between CPUs (a migration costs Machine::migration_ns, 0 unless set)",
    "storage devices: blocking I/O is a fixed service time per request, without queueing",
    "interrupts, kernel threads, other programs (timer slack only as a periodic task's wake-up)",
    "the WRR dispatcher's own CPU and lateness",
    "SCHED_DEADLINE's GRUB reclaiming and global EDF across CPUs beyond push/pull",
];

/// The model as a host: one per set of machine parameters, so a simulated
/// campaign never resumes a measured one (or one simulated for another
/// machine) of the same spec.
pub fn model_host_id(m: &Machine) -> String {
    use sha2::{Digest, Sha256};
    let text = serde_json::to_string(m).unwrap_or_default();
    let digest = Sha256::digest(format!("{MODEL_RELEASE}\n{text}").as_bytes());
    let hex: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!("model-{hex}")
}

/// The environment a simulated run reports.
pub fn env(m: &Machine) -> EnvSnapshot {
    EnvSnapshot {
        kernel_release: MODEL_RELEASE.into(),
        kernel_version: format!(
            "EEVDF base slice {} ns, HZ {}, fair server {}, delayed dequeue {}, context switch {} ns, \
             fair timer slack {} ns",
            m.base_slice_ns,
            m.hz,
            if m.fair_server { "on" } else { "off" },
            if m.delay_dequeue { "on" } else { "off" },
            m.context_switch_ns,
            m.timer_slack_ns
        ),
        machine: "model".into(),
        hostname: "model".into(),
        host_id: Some(model_host_id(m)),
        cpu_model: "schedlab model".into(),
        cpus_online: m.cpus,
        cpus_allowed: (0..m.cpus).collect(),
        hz: Some(m.hz),
        preempt_model: "model".into(),
        sched_rt_runtime_us: Some(m.rt_runtime_us),
        sched_rt_period_us: Some(m.rt_period_us as i64),
        sched_rr_timeslice_ms: Some(m.rr_timeslice_ms as i64),
        sched_autogroup_enabled: None,
        fair_base_slice_ns: Some(m.base_slice_ns),
        cgroup_version: "none".into(),
        rt_group_sched: false,
        root_cgroup_rt_runtime_us: None,
        virtualization: "none".into(),
        sched_ext: None,
        schedlab_version: env!("CARGO_PKG_VERSION").into(),
        load_avg_1m: None,
        topology: None,
        guest: None,
    }
}

/// The parameters of a simulated run and where they came from.
pub fn params_json(p: &ModelParams, m: &Machine) -> serde_json::Value {
    serde_json::json!({
        "release": MODEL_RELEASE,
        "machine": m,
        "rates": p.rates,
        "rates_source": p.rates_source,
        "wake": p.wake,
        "io_bytes_per_s": p.io_bytes_per_s,
        "not_modelled": NOT_MODELLED,
    })
}

/// Where the work went: each CPU's utilisation from the release to the
/// end as `extra.cpu_busy_pct` ("CPU:% CPU:%", as the launcher stores the
/// measured one) and each process's CPUs as `extra.model.cpus_used`.
pub fn add_placement(record: &mut crate::record::RunRecord, out: &Outcome, release_ns: u64) {
    let window = out.end_ns.saturating_sub(release_ns);
    let Some(extra) = record.extra.as_object_mut() else {
        return;
    };
    if window > 0 {
        let by_cpu = out
            .cpu_busy_ns
            .iter()
            .enumerate()
            .map(|(c, &ns)| format!("{c}:{:.1}", 100.0 * ns as f64 / window as f64))
            .collect::<Vec<_>>()
            .join(" ");
        extra.insert("cpu_busy_pct".into(), serde_json::json!(by_cpu));
    }
    let used: Vec<Vec<usize>> = out.stats.iter().map(TaskStats::cpus_used).collect();
    if let Some(model) = extra.get_mut("model").and_then(|v| v.as_object_mut()) {
        model.insert("cpus_used".into(), serde_json::json!(used));
    }
}

type Figures = BTreeMap<String, f64>;
type Histograms = BTreeMap<String, Vec<u8>>;

fn per_s(x: f64, ns: u64) -> f64 {
    x / (ns.max(1) as f64 / 1e9)
}

/// A worker's work, figures and latency histograms, as its real loop
/// reports them, from its program and the CPU it received.
pub fn work_of(
    w: &Workload,
    program: &Program,
    s: &TaskStats,
    elapsed_ns: u64,
    params: &ModelParams,
) -> (u64, Figures, Histograms) {
    let mut figures = Figures::new();
    let mut latency = Histograms::new();
    let cpu_s = s.work_cpu_ns as f64 / 1e9;
    let work = match (w.model(), program) {
        (ModelTask::Compute(c), _) => {
            let work = match w.stop() {
                Stop::Work(n) => n,
                Stop::DurationNs(_) => (cpu_s / unit_s(w, &params.rates)).floor() as u64,
            };
            let (name, scale) = c.figure;
            figures.insert(name.into(), scale.of(per_s(work as f64, elapsed_ns)));
            work
        }
        (ModelTask::Copy(c), _) => {
            let bytes = match c.stop {
                Stop::Work(n) => n,
                Stop::DurationNs(_) => (cpu_s * params.rates.copy_bytes_per_s) as u64,
            };
            figures.insert("mb_per_s".into(), per_s(bytes as f64, elapsed_ns) / 1e6);
            figures.insert("writes".into(), bytes.div_ceil(c.chunk_bytes.max(1)) as f64);
            bytes
        }
        (ModelTask::Mixed(_), Program::Cycle(c)) => c.done_rounds,
        (ModelTask::Replay(_), _) => match w.stop() {
            Stop::Work(n) => n,
            Stop::DurationNs(_) => 0,
        },
        (ModelTask::Periodic { .. }, Program::Periodic(p)) => {
            figures.insert("activations".into(), p.done as f64);
            figures.insert("misses".into(), p.misses as f64);
            figures.insert("skipped".into(), p.skipped as f64);
            figures.insert(
                "wakeup_p50_us".into(),
                p.wakeup.quantile_ns(0.5) as f64 / 1e3,
            );
            figures.insert(
                "wakeup_p99_us".into(),
                p.wakeup.quantile_ns(0.99) as f64 / 1e3,
            );
            if let Some(slack) = p.min_slack_ns {
                figures.insert("min_slack_us".into(), slack as f64 / 1e3);
            }
            latency.insert("wakeup".into(), p.wakeup.encode());
            latency.insert("completion".into(), p.completion.encode());
            p.done
        }
        (ModelTask::Pingpong, Program::Ping(p)) => {
            let span = p.last_ns.saturating_sub(p.first_ns.unwrap_or(p.last_ns));
            let n = p.round_trips;
            figures.insert("round_trips".into(), n as f64);
            figures.insert("round_trips_per_s".into(), per_s(n as f64, span));
            figures.insert("usecs_per_op".into(), span as f64 / 1e3 / n.max(1) as f64);
            latency.insert("round_trip".into(), p.latency.encode());
            n
        }
        _ => 0,
    };
    (work, figures, latency)
}
