//! What the weights section computes, as pure functions of the runs it
//! loaded: work and completion time per weight, fold over the lightest and
//! the heaviest weight, CPU shares against weight shares (whole run and,
//! for WRR, whole rounds), the proportional-share ideal, and the WRR
//! dispatcher's own figures.

use serde::Serialize;

use crate::record::SliceRow;
use crate::report::analyse::{Settings, ratio_interval};
use crate::report::rounds::whole_round_cpu_by_cpu;
use crate::report::sections::Estimate;

/// One worker process of a run, as the section needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcFacts {
    pub index: usize,
    /// CPU time received (schedstat run time, else user + system), ns.
    pub cpu_ns: f64,
    pub work: Option<f64>,
    /// End of its work after barrier release, s.
    pub end_s: Option<f64>,
    pub nice: Option<i64>,
    pub dl_runtime_ns: Option<u64>,
    pub dl_period_ns: Option<u64>,
}

/// The WRR dispatcher's figures of one run (`runs.extra_json` → `wrr`).
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct WrrFacts {
    pub mechanism: String,
    pub overhead: Option<f64>,
    pub lateness_p50_ns: Option<f64>,
    pub lateness_p99_ns: Option<f64>,
    pub slices: Option<u64>,
    pub dispatcher_cpu_ns: Option<f64>,
    pub errors: usize,
}

impl WrrFacts {
    /// From a run's `extra_json`; None when it has no `wrr` object.
    pub fn from_extra(extra: &serde_json::Value) -> Option<WrrFacts> {
        let w = extra.get("wrr")?;
        let f = |k: &str| w.get(k).and_then(serde_json::Value::as_f64);
        Some(WrrFacts {
            mechanism: w
                .get("mechanism")
                .and_then(|m| m.as_str())
                .unwrap_or("unknown")
                .to_string(),
            overhead: f("dispatcher_overhead"),
            lateness_p50_ns: f("lateness_p50_ns"),
            lateness_p99_ns: f("lateness_p99_ns"),
            slices: w.get("slices").and_then(serde_json::Value::as_u64),
            dispatcher_cpu_ns: f("dispatcher_cpu_ns"),
            errors: w
                .get("errors")
                .and_then(|e| e.as_array())
                .map_or(0, Vec::len),
        })
    }
}

/// An ok run whose processes have weights (WRR, or a policy under a
/// `weights` priority mode).
#[derive(Debug, Clone, PartialEq)]
pub struct WeightedRun {
    pub run_id: i64,
    pub seq: i64,
    pub rep: i64,
    pub group: usize,
    pub policy: String,
    /// Weight of each process, by index.
    pub weights: Vec<u32>,
    /// Workers, by index.
    pub procs: Vec<ProcFacts>,
    /// WRR slices in the order they were handed out (empty otherwise).
    pub slices: Vec<SliceRow>,
    pub wrr: Option<WrrFacts>,
}

impl WeightedRun {
    /// Which contender the run belongs to: the policy, and for WRR the
    /// dispatch mechanism.
    pub fn contender_key(&self) -> (String, Option<String>) {
        (
            self.policy.clone(),
            self.wrr.as_ref().map(|w| w.mechanism.clone()),
        )
    }
}

/// A ratio with its 95 % bootstrap interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fold {
    pub value: f64,
    pub ci: Option<(f64, f64)>,
}

/// Figures of one weight for one contender.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PerWeight {
    pub weight: u32,
    /// Processes of this weight in a run.
    pub processes: usize,
    /// How the policy delivered the weight ("nice 9", "slice 40 ms", …).
    pub delivered: String,
    /// Work done per process of this weight (per-run mean over them).
    pub work: Option<Estimate>,
    /// mean work(w) / mean work(lightest weight).
    pub work_fold: Option<Fold>,
    /// Proportional share of the total work: total × weight share.
    pub ideal_work: Option<f64>,
    /// Time from release to the end of the work, s.
    pub completion: Option<Estimate>,
    /// mean time(w) / mean time(heaviest weight): seed 002's "time over the
    /// longest slice".
    pub time_fold: Option<Fold>,
    /// Completion under ideal proportional sharing (GPS) of the group's
    /// CPUs, with each process's measured CPU demand, s.
    pub ideal_completion: Option<f64>,
}

/// Observed CPU shares against weight shares.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ShareErrors {
    /// Runs that contributed.
    pub runs: usize,
    /// Whole rounds counted (WRR whole-round errors only).
    pub rounds: Option<usize>,
    /// Per weight (ascending, as the contender's): observed share of the
    /// processes of that weight / their weight share − 1.
    pub per_weight: Vec<f64>,
    /// Largest |error| of any single process.
    pub max_abs: f64,
}

/// The WRR dispatcher's cost and precision over a contender's runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DispatcherStats {
    pub runs: usize,
    pub overhead_mean: Option<f64>,
    pub overhead_max: Option<f64>,
    pub lateness_p50_ns_mean: Option<f64>,
    pub lateness_p99_ns_mean: Option<f64>,
    pub lateness_p99_ns_max: Option<f64>,
    pub slices: u64,
    pub errors: usize,
}

/// One way of delivering the weights in one group: a policy (for WRR, with
/// its mechanism).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Contender {
    pub policy: String,
    pub mechanism: Option<String>,
    /// "WRR (fifo)", "OTHER".
    pub label: String,
    pub runs: usize,
    pub run_ids: Vec<i64>,
    pub per_weight: Vec<PerWeight>,
    /// Over the whole run (duration-based workloads only: with a fixed
    /// amount of work every process needs the same CPU time).
    pub whole_run: Option<ShareErrors>,
    /// WRR: over the whole rounds before the first slice cut short.
    pub whole_rounds: Option<ShareErrors>,
    pub dispatcher: Option<DispatcherStats>,
}

/// A group of the analysis (a workload, process count, priority mode, CPU
/// set) with weighted runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WeightGroup {
    pub group: usize,
    pub label: String,
    pub workload: String,
    pub duration_based: bool,
    pub work_unit: String,
    /// The distinct weights, ascending.
    pub weights: Vec<u32>,
    /// CPUs the processes were meant to share (for the ideal).
    pub cpus: usize,
    pub contenders: Vec<Contender>,
}

impl WeightGroup {
    /// Whether the weights differ (otherwise only the dispatcher figures
    /// mean anything).
    pub fn weighted(&self) -> bool {
        self.weights.len() >= 2
    }
}

/// The distinct values of `weights`, ascending.
pub fn distinct(weights: &[u32]) -> Vec<u32> {
    let mut w = weights.to_vec();
    w.sort_unstable();
    w.dedup();
    w
}

/// Per distinct weight (ascending), one value per run: the mean of `f`
/// over the run's processes of that weight (runs where one of them has no
/// value are left out for that weight).
pub fn per_weight_values(
    runs: &[&WeightedRun],
    weights: &[u32],
    f: impl Fn(&ProcFacts) -> Option<f64>,
) -> Vec<Vec<f64>> {
    weights
        .iter()
        .map(|&w| {
            runs.iter()
                .filter_map(|r| {
                    let vals: Option<Vec<f64>> = r
                        .procs
                        .iter()
                        .filter(|p| r.weights.get(p.index) == Some(&w))
                        .map(&f)
                        .collect();
                    let vals = vals?;
                    (!vals.is_empty()).then(|| vals.iter().sum::<f64>() / vals.len() as f64)
                })
                .filter(|v| v.is_finite())
                .collect()
        })
        .collect()
}

/// mean(a) / mean(b); None when either is empty or mean(b) is 0.
pub fn fold(a: &[f64], b: &[f64]) -> Option<f64> {
    if a.is_empty() || b.is_empty() {
        return None;
    }
    let mb = b.iter().sum::<f64>() / b.len() as f64;
    (mb != 0.0).then(|| a.iter().sum::<f64>() / a.len() as f64 / mb)
}

/// Each process's share of `cpu` over its weight's share of `weights`,
/// minus 1 (0 = exactly proportional). None when the CPU or the weights
/// sum to 0 or the lengths differ.
pub fn share_errors(cpu: &[f64], weights: &[u32]) -> Option<Vec<f64>> {
    if cpu.len() != weights.len() || cpu.is_empty() {
        return None;
    }
    let total: f64 = cpu.iter().sum();
    let wsum: f64 = weights.iter().map(|&w| f64::from(w)).sum();
    if total <= 0.0 || wsum <= 0.0 || !total.is_finite() {
        return None;
    }
    Some(
        cpu.iter()
            .zip(weights)
            .map(|(c, &w)| (c / total) / (f64::from(w) / wsum) - 1.0)
            .collect(),
    )
}

/// Completion times under generalised processor sharing: `capacity` CPUs
/// shared in proportion to `weights` among the unfinished processes, none
/// getting more than one CPU; process i needs `demand[i]` of CPU time.
pub fn gps_completion(demand: &[f64], weights: &[f64], capacity: f64) -> Vec<f64> {
    let n = demand.len().min(weights.len());
    let mut left: Vec<f64> = demand[..n].iter().map(|d| d.max(0.0)).collect();
    let mut done: Vec<Option<f64>> = left.iter().map(|&d| (d == 0.0).then_some(0.0)).collect();
    let mut t = 0.0;
    let capacity = capacity.max(f64::MIN_POSITIVE);
    while done.iter().any(Option::is_none) {
        // Water-filling: processes whose proportional rate exceeds one CPU
        // are capped at one; the rest share what remains.
        let active: Vec<usize> = (0..n).filter(|&i| done[i].is_none()).collect();
        let mut rate = vec![0.0; n];
        let mut capped = vec![false; n];
        loop {
            let free: Vec<usize> = active.iter().copied().filter(|&i| !capped[i]).collect();
            let cap_left = capacity - active.iter().filter(|&&i| capped[i]).count() as f64;
            let wsum: f64 = free.iter().map(|&i| weights[i].max(0.0)).sum();
            let mut changed = false;
            for &i in &free {
                rate[i] = if wsum > 0.0 {
                    cap_left.max(0.0) * weights[i].max(0.0) / wsum
                } else {
                    cap_left.max(0.0) / free.len() as f64
                };
                if rate[i] > 1.0 {
                    rate[i] = 1.0;
                    capped[i] = true;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        let step = active
            .iter()
            .filter(|&&i| rate[i] > 0.0)
            .map(|&i| left[i] / rate[i])
            .fold(f64::INFINITY, f64::min);
        if !step.is_finite() {
            // Nobody can progress (zero weights everywhere): leave them
            // unfinished.
            for &i in &active {
                done[i] = Some(f64::INFINITY);
            }
            break;
        }
        t += step;
        for &i in &active {
            left[i] -= rate[i] * step;
            if left[i] <= 1e-12 * demand[i].max(1.0) {
                done[i] = Some(t);
            }
        }
    }
    done.into_iter().map(|d| d.unwrap_or(f64::NAN)).collect()
}

/// (process index, observed CPU share, weight share) of some processes.
type Shares = Vec<(usize, f64, f64)>;

/// Shares of the processes of one run, per run queue when the run has
/// slices on several CPUs (each queue's tasks share that CPU), else over
/// all of them: (process index, observed share, weight share).
fn run_shares(r: &WeightedRun) -> Shares {
    let mut queues: Vec<Vec<usize>> = Vec::new();
    let mut cpus: Vec<u32> = r.slices.iter().map(|s| s.cpu).collect();
    cpus.sort_unstable();
    cpus.dedup();
    if cpus.len() > 1 {
        for c in cpus {
            let mut q: Vec<usize> = r
                .slices
                .iter()
                .filter(|s| s.cpu == c)
                .map(|s| s.process_index as usize)
                .collect();
            q.sort_unstable();
            q.dedup();
            queues.push(q);
        }
    } else {
        queues.push(r.procs.iter().map(|p| p.index).collect());
    }
    let mut out = Vec::new();
    for q in queues {
        let cpu: Vec<f64> = q
            .iter()
            .map(|&i| {
                r.procs
                    .iter()
                    .find(|p| p.index == i)
                    .map_or(0.0, |p| p.cpu_ns)
            })
            .collect();
        let w: Vec<u32> = q
            .iter()
            .map(|&i| r.weights.get(i).copied().unwrap_or(1))
            .collect();
        share_pairs(&q, &cpu, &w, &mut out);
    }
    out
}

/// (index, observed share, weight share) of the tasks of one queue.
fn share_pairs(idx: &[usize], cpu: &[f64], w: &[u32], out: &mut Shares) {
    let total: f64 = cpu.iter().sum();
    let wsum: f64 = w.iter().map(|&x| f64::from(x)).sum();
    if total > 0.0 && wsum > 0.0 {
        for k in 0..idx.len() {
            out.push((idx[k], cpu[k] / total, f64::from(w[k]) / wsum));
        }
    }
}

/// Shares over the whole rounds of a WRR run (per CPU queue), and the
/// number of rounds.
fn round_shares(r: &WeightedRun) -> Option<(Shares, usize)> {
    let queues = whole_round_cpu_by_cpu(&r.slices);
    if queues.is_empty() {
        return None;
    }
    let mut out = Vec::new();
    let mut rounds = 0;
    for q in queues {
        let idx: Vec<usize> = q.tasks.iter().map(|&t| t as usize).collect();
        let w: Vec<u32> = idx
            .iter()
            .map(|&i| r.weights.get(i).copied().unwrap_or(1))
            .collect();
        share_pairs(&idx, &q.cpu_ns, &w, &mut out);
        rounds += q.rounds;
    }
    Some((out, rounds))
}

/// Mean over runs of each process's (observed, ideal) share, then the
/// errors per weight and the largest per process.
fn aggregate_shares(
    per_run: &[Shares],
    weights_of: &[u32],
    weights: &[u32],
    rounds: Option<usize>,
) -> Option<ShareErrors> {
    if per_run.is_empty() {
        return None;
    }
    let n = weights_of.len();
    let mut obs = vec![0.0; n];
    let mut ideal = vec![0.0; n];
    let mut count = vec![0usize; n];
    for run in per_run {
        for &(i, o, id) in run {
            if i < n {
                obs[i] += o;
                ideal[i] += id;
                count[i] += 1;
            }
        }
    }
    let mut max_abs = 0.0_f64;
    for i in 0..n {
        if count[i] > 0 && ideal[i] > 0.0 {
            max_abs = max_abs.max((obs[i] / ideal[i] - 1.0).abs());
        }
    }
    let per_weight = weights
        .iter()
        .map(|&w| {
            let (o, id): (f64, f64) = (0..n)
                .filter(|&i| weights_of[i] == w && count[i] > 0)
                .fold((0.0, 0.0), |(a, b), i| (a + obs[i], b + ideal[i]));
            if id > 0.0 { o / id - 1.0 } else { f64::NAN }
        })
        .collect();
    Some(ShareErrors {
        runs: per_run.len(),
        rounds,
        per_weight,
        max_abs,
    })
}

fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

fn max(v: &[f64]) -> Option<f64> {
    v.iter().copied().filter(|x| x.is_finite()).reduce(f64::max)
}

/// The dispatcher's figures over some WRR runs.
pub fn dispatcher_stats(runs: &[&WeightedRun]) -> Option<DispatcherStats> {
    let facts: Vec<&WrrFacts> = runs.iter().filter_map(|r| r.wrr.as_ref()).collect();
    if facts.is_empty() {
        return None;
    }
    let pick =
        |f: fn(&WrrFacts) -> Option<f64>| facts.iter().filter_map(|w| f(w)).collect::<Vec<f64>>();
    let overhead = pick(|w| w.overhead);
    let p50 = pick(|w| w.lateness_p50_ns);
    let p99 = pick(|w| w.lateness_p99_ns);
    Some(DispatcherStats {
        runs: facts.len(),
        overhead_mean: mean(&overhead),
        overhead_max: max(&overhead),
        lateness_p50_ns_mean: mean(&p50),
        lateness_p99_ns_mean: mean(&p99),
        lateness_p99_ns_max: max(&p99),
        slices: facts.iter().filter_map(|w| w.slices).sum(),
        errors: facts.iter().map(|w| w.errors).sum(),
    })
}

/// How a contender delivered a weight, from its first run.
fn delivered(r: &WeightedRun, w: u32, quantum_ns: Option<f64>) -> String {
    let p = r.procs.iter().find(|p| r.weights.get(p.index) == Some(&w));
    match r.policy.as_str() {
        "wrr" => quantum_ns.map_or_else(
            || "its weight's slice".into(),
            |q| {
                format!(
                    "slice {} ms",
                    crate::report::fmt::sig(q * f64::from(w) / 1e6, 3)
                )
            },
        ),
        "deadline" => match p.and_then(|p| p.dl_runtime_ns.zip(p.dl_period_ns)) {
            Some((rt, per)) => format!(
                "runtime {} µs / {} ms",
                crate::report::fmt::sig(rt as f64 / 1e3, 4),
                crate::report::fmt::sig(per as f64 / 1e6, 3)
            ),
            None => "runtime ∝ weight".into(),
        },
        "fifo" | "rr" => "RT priority (no weights)".into(),
        _ => p
            .and_then(|p| p.nice)
            .map_or_else(|| "nice ?".into(), |n| format!("nice {n}")),
    }
}

/// What every contender of a group shares.
pub struct GroupContext<'a> {
    /// The report's bootstrap settings.
    pub settings: &'a Settings,
    pub group_label: &'a str,
    /// The distinct weights, ascending.
    pub weights: &'a [u32],
    pub duration_based: bool,
    /// CPUs the processes were meant to share (for the GPS ideal).
    pub cpus: usize,
    /// The WRR quantum, ns.
    pub quantum_ns: Option<f64>,
}

/// Everything about one contender of a group.
pub fn contender(ctx: &GroupContext, label: String, runs: &[&WeightedRun]) -> Contender {
    let GroupContext {
        settings,
        group_label,
        weights,
        duration_based,
        cpus,
        quantum_ns,
    } = *ctx;
    let first = runs[0];
    let key = |what: &str, w: u32| format!("weights|{group_label}|{label}|{what}|{w}");
    let works = per_weight_values(runs, weights, |p| p.work);
    let ends = per_weight_values(runs, weights, |p| p.end_s);
    let lightest = works.first().cloned().unwrap_or_default();
    let heaviest = ends.last().cloned().unwrap_or_default();
    // The proportional ideal of work: the mean total over runs, shared by
    // weight.
    let totals: Vec<f64> = runs
        .iter()
        .filter_map(|r| r.procs.iter().map(|p| p.work).sum::<Option<f64>>())
        .collect();
    let total = mean(&totals);
    let wsum: f64 = first.weights.iter().map(|&w| f64::from(w)).sum();
    // GPS completion with the mean CPU demand of each process.
    let demand: Vec<f64> = (0..first.weights.len())
        .map(|i| {
            let d: Vec<f64> = runs
                .iter()
                .filter_map(|r| r.procs.iter().find(|p| p.index == i))
                .map(|p| p.cpu_ns / 1e9)
                .collect();
            mean(&d).unwrap_or(0.0)
        })
        .collect();
    let gps = (!duration_based).then(|| {
        gps_completion(
            &demand,
            &first
                .weights
                .iter()
                .map(|&w| f64::from(w))
                .collect::<Vec<_>>(),
            cpus.max(1) as f64,
        )
    });
    let per_weight = weights
        .iter()
        .enumerate()
        .map(|(k, &w)| {
            let of_w = first.weights.iter().filter(|&&x| x == w).count();
            let work = Estimate::of(&works[k], &key("work", w), settings);
            let completion = Estimate::of(&ends[k], &key("time", w), settings);
            let work_fold = if k == 0 {
                fold(&works[k], &lightest).map(|v| Fold { value: v, ci: None })
            } else {
                fold(&works[k], &lightest).map(|v| Fold {
                    value: v,
                    ci: ratio_interval(&works[k], &lightest, &key("work-fold", w), settings),
                })
            };
            let time_fold = if k + 1 == weights.len() {
                fold(&ends[k], &heaviest).map(|v| Fold { value: v, ci: None })
            } else {
                fold(&ends[k], &heaviest).map(|v| Fold {
                    value: v,
                    ci: ratio_interval(&ends[k], &heaviest, &key("time-fold", w), settings),
                })
            };
            let ideal_completion = gps.as_ref().and_then(|g| {
                let v: Vec<f64> = first
                    .weights
                    .iter()
                    .enumerate()
                    .filter(|(_, x)| **x == w)
                    .filter_map(|(i, _)| g.get(i).copied())
                    .collect();
                mean(&v)
            });
            PerWeight {
                weight: w,
                processes: of_w,
                delivered: delivered(first, w, quantum_ns),
                work: if duration_based { work } else { None },
                work_fold: if duration_based { work_fold } else { None },
                ideal_work: if duration_based && wsum > 0.0 {
                    total.map(|t| t * f64::from(w) / wsum)
                } else {
                    None
                },
                completion: if duration_based { None } else { completion },
                time_fold: if duration_based { None } else { time_fold },
                ideal_completion,
            }
        })
        .collect();
    let whole_run = duration_based
        .then(|| {
            let per_run: Vec<Shares> = runs.iter().map(|r| run_shares(r)).collect();
            aggregate_shares(&per_run, &first.weights, weights, None)
        })
        .flatten();
    let rounds: Vec<(Shares, usize)> = runs.iter().filter_map(|r| round_shares(r)).collect();
    let whole_rounds = (!rounds.is_empty())
        .then(|| {
            let total_rounds = rounds.iter().map(|r| r.1).sum();
            let per_run: Vec<Shares> = rounds.into_iter().map(|r| r.0).collect();
            aggregate_shares(&per_run, &first.weights, weights, Some(total_rounds))
        })
        .flatten();
    Contender {
        policy: first.policy.clone(),
        mechanism: first.wrr.as_ref().map(|w| w.mechanism.clone()),
        label,
        runs: runs.len(),
        run_ids: runs.iter().map(|r| r.run_id).collect(),
        per_weight,
        whole_run,
        whole_rounds,
        dispatcher: dispatcher_stats(runs),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proc_(index: usize, cpu_ms: f64, work: f64, end_s: f64) -> ProcFacts {
        ProcFacts {
            index,
            cpu_ns: cpu_ms * 1e6,
            work: Some(work),
            end_s: Some(end_s),
            nice: Some(0),
            dl_runtime_ns: None,
            dl_period_ns: None,
        }
    }

    fn run(id: i64, weights: &[u32], procs: Vec<ProcFacts>) -> WeightedRun {
        WeightedRun {
            run_id: id,
            seq: id,
            rep: id,
            group: 0,
            policy: "other".into(),
            weights: weights.to_vec(),
            procs,
            slices: Vec::new(),
            wrr: None,
        }
    }

    #[test]
    fn fold_over_weight_one_with_known_values() {
        // Weight 1 does 100 and 110, weight 4 does 400 and 420: fold 820/210.
        let runs = [
            run(
                1,
                &[1, 4],
                vec![proc_(0, 1.0, 100.0, 1.0), proc_(1, 4.0, 400.0, 1.0)],
            ),
            run(
                2,
                &[1, 4],
                vec![proc_(0, 1.0, 110.0, 1.0), proc_(1, 4.0, 420.0, 1.0)],
            ),
        ];
        let refs: Vec<&WeightedRun> = runs.iter().collect();
        let v = per_weight_values(&refs, &[1, 4], |p| p.work);
        assert_eq!(v, vec![vec![100.0, 110.0], vec![400.0, 420.0]]);
        let f = fold(&v[1], &v[0]).unwrap();
        assert!((f - 410.0 / 105.0).abs() < 1e-12, "{f}");
        assert_eq!(fold(&v[0], &v[0]), Some(1.0));
        assert_eq!(fold(&[], &v[0]), None);
        assert_eq!(fold(&v[0], &[0.0]), None);
    }

    #[test]
    fn repeated_weights_are_averaged_within_a_run() {
        // Classes: weights 10, 1, 10, 1.
        let r = run(
            1,
            &[10, 1, 10, 1],
            vec![
                proc_(0, 1.0, 1000.0, 1.0),
                proc_(1, 1.0, 90.0, 1.0),
                proc_(2, 1.0, 980.0, 1.0),
                proc_(3, 1.0, 110.0, 1.0),
            ],
        );
        let v = per_weight_values(&[&r], &distinct(&r.weights), |p| p.work);
        assert_eq!(v, vec![vec![100.0], vec![990.0]]);
    }

    #[test]
    fn share_error_is_share_over_weight_share_minus_one() {
        assert_eq!(
            share_errors(&[10.0, 40.0, 50.0], &[1, 4, 5]).unwrap(),
            vec![0.0, 0.0, 0.0]
        );
        let e = share_errors(&[12.0, 38.0, 50.0], &[1, 4, 5]).unwrap();
        assert!((e[0] - 0.2).abs() < 1e-12);
        assert!((e[1] - (0.38 / 0.4 - 1.0)).abs() < 1e-12);
        assert!(e[2].abs() < 1e-12);
        assert!(share_errors(&[0.0, 0.0], &[1, 1]).is_none());
        assert!(share_errors(&[1.0], &[1, 2]).is_none());
    }

    #[test]
    fn aggregated_errors_per_weight_and_largest_per_process() {
        // Two runs of weights 1 and 3; the light task gets 30% then 20%
        // instead of 25%.
        let runs = vec![
            vec![(0, 0.3, 0.25), (1, 0.7, 0.75)],
            vec![(0, 0.2, 0.25), (1, 0.8, 0.75)],
        ];
        let e = aggregate_shares(&runs, &[1, 3], &[1, 3], None).unwrap();
        assert_eq!(e.runs, 2);
        assert!(e.per_weight[0].abs() < 1e-12 && e.per_weight[1].abs() < 1e-12);
        assert!(e.max_abs < 1e-12);
        let runs = vec![vec![(0, 0.3, 0.25), (1, 0.7, 0.75)]];
        let e = aggregate_shares(&runs, &[1, 3], &[1, 3], Some(5)).unwrap();
        assert!((e.per_weight[0] - 0.2).abs() < 1e-12);
        assert!((e.per_weight[1] - (0.7 / 0.75 - 1.0)).abs() < 1e-12);
        assert!((e.max_abs - 0.2).abs() < 1e-12);
        assert_eq!(e.rounds, Some(5));
    }

    #[test]
    fn whole_round_shares_come_from_the_slices() {
        let sl = |task: u32, ms: u64| SliceRow {
            process_index: task,
            cpu: 0,
            planned_start_ns: 0,
            planned_end_ns: ms * 1_000_000,
            actual_end_ns: ms * 1_000_000,
            cpu_ns: ms * 1_000_000,
        };
        let mut r = run(
            1,
            &[1, 2],
            vec![proc_(0, 100.0, 1.0, 1.0), proc_(1, 100.0, 1.0, 1.0)],
        );
        r.policy = "wrr".into();
        // Two whole rounds of 10 + 20 ms, then a round cut short.
        let cut = SliceRow {
            cpu_ns: 1_000_000,
            ..sl(1, 20)
        };
        r.slices = vec![sl(0, 10), sl(1, 20), sl(0, 11), sl(1, 19), sl(0, 10), cut];
        let (shares, rounds) = round_shares(&r).unwrap();
        assert_eq!(rounds, 2);
        assert_eq!(shares.len(), 2);
        assert!((shares[0].1 - 21.0 / 60.0).abs() < 1e-12);
        assert!((shares[0].2 - 1.0 / 3.0).abs() < 1e-12);
        // The whole run (processes' CPU) says 50/50.
        let whole = run_shares(&r);
        assert!((whole[0].1 - 0.5).abs() < 1e-12);
    }

    #[test]
    fn gps_completion_times() {
        // Weights 1 and 3 on one CPU, one second of work each: the heavy
        // one runs at 3/4 and ends at 4/3 s; the light one has done 1/3 s
        // by then and ends at 2 s.
        let t = gps_completion(&[1.0, 1.0], &[1.0, 3.0], 1.0);
        assert!(
            (t[1] - 4.0 / 3.0).abs() < 1e-9 && (t[0] - 2.0).abs() < 1e-9,
            "{t:?}"
        );
        // Two CPUs, two processes: nobody gets more than one CPU.
        let t = gps_completion(&[1.0, 1.0], &[1.0, 10.0], 2.0);
        assert!(
            (t[0] - 1.0).abs() < 1e-9 && (t[1] - 1.0).abs() < 1e-9,
            "{t:?}"
        );
        // Equal weights, unequal demands.
        let t = gps_completion(&[1.0, 2.0], &[1.0, 1.0], 1.0);
        assert!(
            (t[0] - 2.0).abs() < 1e-9 && (t[1] - 3.0).abs() < 1e-9,
            "{t:?}"
        );
    }

    #[test]
    fn dispatcher_figures_from_extra_json() {
        let extra = serde_json::json!({"wrr": {"mechanism": "fifo", "dispatcher_overhead": 0.001,
            "lateness_p50_ns": 40000, "lateness_p99_ns": 120000, "slices": 51, "errors": []}});
        let w = WrrFacts::from_extra(&extra).unwrap();
        assert_eq!(w.mechanism, "fifo");
        assert_eq!(w.lateness_p99_ns, Some(120000.0));
        assert!(WrrFacts::from_extra(&serde_json::json!({})).is_none());
        let mut r1 = run(1, &[1], vec![]);
        r1.wrr = Some(w.clone());
        let mut r2 = r1.clone();
        r2.wrr = Some(WrrFacts {
            overhead: Some(0.003),
            lateness_p99_ns: Some(80000.0),
            ..w
        });
        let d = dispatcher_stats(&[&r1, &r2]).unwrap();
        assert_eq!(d.runs, 2);
        assert!((d.overhead_mean.unwrap() - 0.002).abs() < 1e-12);
        assert_eq!(d.lateness_p99_ns_max, Some(120000.0));
        assert_eq!(d.slices, 102);
    }
}
