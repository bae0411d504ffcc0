//! The model: a discrete-event simulation of the kernel's scheduling
//! classes that carries out a planned run in virtual time and returns the
//! same [`RunRecord`](crate::record::RunRecord) the launcher builds from
//! real processes, plus the predicted per-CPU timeline. Pure: no I/O, no
//! clock, no libc; deterministic for its inputs.
//!
//! Files: [`machine`] (the CPUs, HZ and knobs; the calibrated parameters
//! and where they came from), [`task`] (what a task does: CPU bursts,
//! blocking I/O, periodic activations, wake-ups by a peer), [`eevdf`],
//! [`rt`], [`deadline`] (with the fair server and admission) and [`wrr`]
//! (driving `crate::wrr::policy` itself), one class each, [`engine`] (the
//! event loop), [`mapping`] (run → tasks → record), [`describe`] (the
//! model's environment, parameters and each workload's figures) and
//! [`timeline`] (the predicted per-CPU timeline as the store keeps a
//! trace's slices), and for several CPUs [`topology`], [`placement`],
//! [`balance`] and [`pelt`] (load averages).
//!
//! # What is modelled
//!
//! - EEVDF (Documentation/scheduler/sched-eevdf.rst, kernel/sched/fair.c):
//!   weights from `sched_prio_to_weight`, eligibility by lag, virtual
//!   deadline = vruntime + slice / weight, the base slice the kernel
//!   reports, custom slices (clamped to 0.1–100 ms), slices ending at the
//!   tick, RUN_TO_PARITY, PLACE_LAG, wake-up preemption (with
//!   PREEMPT_SHORT), BATCH (no wake-up preemption) and IDLE (weight 3,
//!   preempted by any other waker), DELAY_DEQUEUE/DELAY_ZERO on 6.12+.
//! - FIFO and RR (sched-rt-group.rst, kernel/sched/rt.c): priorities, RR's
//!   `sched_rr_timeslice_ms` in ticks, throttling by `sched_rt_runtime_us`
//!   / `sched_rt_period_us` per CPU checked at the tick, and on 6.12+ the
//!   fair server's deferred 50 ms / 1 s reservation.
//! - DEADLINE (sched-deadline.rst, kernel/sched/deadline.c): EDF with CBS,
//!   exact runtime enforcement, admission control in the kernel's fixed
//!   point (a refused run is Skipped, as EBUSY skips it).
//! - schedlab's WRR through the same `WrrPolicy` the dispatchers use,
//!   ranked as its FIFO mechanism runs it.
//! - Several CPUs ([`topology`], [`placement`], [`balance`], the engine's
//!   `moves`): the machine's SMT cores, LLCs, packages and nodes from the
//!   environment's topology (host or guest; flat without one) and the
//!   kernel's domains on them (SMT, MC, PKG, NUMA). A waking fair task is
//!   placed as `select_task_rq_fair` does (wake-affine, then
//!   `select_idle_sibling`: previous CPU, idle core, idle SMT sibling, idle
//!   CPU of the LLC); busy CPUs balance each domain at its interval in
//!   ticks with the kernel's group classes and imbalance
//!   (`sched_balance_rq`, `calculate_imbalance`, `detach_tasks` with
//!   `task_hot` and `nr_balance_failed`, active balancing after repeated
//!   failures) on PELT load, runnable and utilisation averages kept per
//!   task and per run queue ([`pelt`], the engine's `load`; wake-affine
//!   weighs the same loads); idle CPUs pull at once (newidle); EEVDF lag
//!   travels with a migrating task; a migration may cost CPU
//!   (`Machine::migration_ns`).
//!   Pinned tasks and a run's `cpus` are respected. RT tasks are pushed
//!   and pulled so the most important run (`find_lowest_rq`,
//!   `push_rt_task`, `pull_rt_task`); DEADLINE is global EDF by the same
//!   push/pull on the latest deadline, admitted per root domain (Σ
//!   bandwidth ≤ CPUs × RT ratio); WRR keeps one CPU per worker. Each
//!   process's migrations (`se.nr_migrations`) and CPUs, and each CPU's
//!   utilisation, are recorded.
//! - Workloads: CPU demand from the calibrated rates (pi, hash, matmul,
//!   page-cache copy, mixed), blocking device I/O as a service time at a
//!   given rate (`ModelParams::io_bytes_per_s`), periodic wake-ups after a
//!   calibrated timer cost, pingpong hand-offs of a calibrated cost.
//! - Timer slack: a fair task's absolute sleep fires at its release plus
//!   the kernel's 50 µs slack, or at a scheduler tick inside that range;
//!   RT and DEADLINE tasks sleep with none
//!   ([`machine::TIMER_SLACK_NS`], [`task::hrtimer_expiry_ns`]). The
//!   calibrated timer cost excludes the calibration condition's slack.
//!
//! # What is not
//!
//! PELT's util_est, frequency/capacity invariance and task groups, nohz
//! idle balancing's delay, misfit balancing and capacity lost to RT or
//! interrupts, cache and memory-bandwidth
//! contention, device queueing, interrupts and other programs, the WRR
//! dispatcher's own cost, sched_ext schedulers, and the request, aio and
//! messaging workloads (their runs come back Skipped saying so). The list
//! travels with every simulated run in `extra.model.not_modelled`.

pub mod balance;
pub mod deadline;
pub mod describe;
pub mod eevdf;
pub mod engine;
pub mod machine;
pub mod mapping;
pub mod pelt;
pub mod placement;
pub mod replay;
pub mod rt;
pub mod task;
pub mod timeline;
pub mod topology;
pub mod wrr;

pub use engine::{Segment, SegmentEnd, Wake, WakeCause};
pub use machine::{CalibrationError, Knobs, Machine, ModelParams, WakeCosts};
pub use mapping::{MODEL_RELEASE, SimRun, simulate, simulate_until_stopped};
pub use timeline::Prediction;

#[cfg(test)]
mod multi_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod wake_tests;
