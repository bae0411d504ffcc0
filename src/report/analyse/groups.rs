//! Factor levels in the campaign's order, and the groups of conditions
//! that differ only in policy.

use super::policy_label;
use crate::policy::Policy;
use crate::store::{ReportRun, RunFactor};
use serde::Serialize;
use std::collections::HashMap;

/// A workload of the campaign.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorkloadInfo {
    pub name: String,
    pub kind: String,
    pub work_unit: String,
    /// Stops after a duration (work done is the result) rather than after
    /// a fixed amount of work (time taken is the result).
    pub duration_based: bool,
}

/// The levels of each factor, in the campaign's order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Factors {
    pub policies: Vec<String>,
    pub workloads: Vec<WorkloadInfo>,
    pub processes: Vec<i64>,
    pub priority_modes: Vec<String>,
    pub cpus: Vec<String>,
    pub rt_runtime_us: Vec<i64>,
    /// EEVDF slices swept (µs), when the campaign sweeps them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub slice_us: Vec<i64>,
    /// sched_ext schedulers swept (`matrix.ext_scheduler`), by level name.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ext_schedulers: Vec<String>,
    /// Machine levels swept (`matrix.machine`), by name.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub machines: Vec<String>,
    /// In a report `--by` host or kernel: that factor and its levels, by
    /// name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub by: Option<ByLevels>,
}

/// The levels of the factor a report is made `--by`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ByLevels {
    pub factor: RunFactor,
    pub levels: Vec<String>,
}

/// Everything of a condition but the policy: policies are compared within
/// a group.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct GroupKey {
    pub workload: String,
    pub processes: i64,
    pub priority_mode: String,
    pub cpus: String,
    pub rt_runtime_us: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slice_us: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ext_scheduler: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub machine: Option<String>,
    /// The host or kernel, in a report `--by` one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
}

/// A group of conditions that differ only in policy.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Group {
    pub key: GroupKey,
    /// "pi, 2 processes" plus the factors that vary in the campaign.
    pub label: String,
    /// Indices into [`Analysis::conditions`], in policy order.
    pub conditions: Vec<usize>,
}

/// Order of factor levels from the campaign's spec (JSON), where present.
pub(super) struct SpecOrder {
    pub(super) policies: Vec<String>,
    pub(super) workloads: Vec<String>,
    pub(super) priorities: Vec<String>,
    pub(super) cpus: Vec<String>,
    pub(super) ext_schedulers: Vec<String>,
    pub(super) machines: Vec<String>,
    /// Workloads that stop after a duration rather than an amount of work.
    pub(super) timed: Vec<String>,
}

pub(super) fn spec_order(spec_json: &str) -> SpecOrder {
    let v: serde_json::Value = serde_json::from_str(spec_json).unwrap_or_default();
    let strings = |key: &str, field: Option<&str>| -> Vec<String> {
        v.get(key)
            .and_then(|a| a.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|x| match field {
                        Some(f) => x.get(f).and_then(|n| n.as_str()).map(str::to_string),
                        None => x.as_str().map(str::to_string),
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let cpus = v
        .get("cpus")
        .and_then(|a| a.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|x| serde_json::from_value::<crate::spec::Cpus>(x.clone()).ok())
                .map(|c| c.label())
                .collect()
        })
        .unwrap_or_default();
    let timed = v
        .get("workloads")
        .and_then(|a| a.as_array())
        .map(|a| {
            a.iter()
                .filter(|w| w.pointer("/workload/stop/duration_ns").is_some())
                .filter_map(|w| w.get("name").and_then(|n| n.as_str()).map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    SpecOrder {
        timed,
        policies: strings("policies", None),
        workloads: strings("workloads", Some("name")),
        priorities: strings("priorities", Some("name")),
        ext_schedulers: strings("ext_schedulers", Some("name")),
        machines: strings("machines", Some("name")),
        cpus,
    }
}

/// Sort `levels` by their position in `order`, unknown ones after, by
/// `fallback` then name.
pub(super) fn sort_levels(
    levels: &mut [String],
    order: &[String],
    fallback: impl Fn(&str) -> usize,
) {
    levels.sort_by_key(|l| {
        (
            order.iter().position(|o| o == l).unwrap_or(usize::MAX),
            fallback(l),
            l.clone(),
        )
    });
}

/// The factor levels of a campaign's runs, in the spec's order.
pub(super) fn factors(
    runs: &[ReportRun],
    order: &SpecOrder,
    units: &HashMap<String, String>,
    by: Option<RunFactor>,
) -> Factors {
    let mut policies: Vec<String> = Vec::new();
    let mut workloads: Vec<String> = Vec::new();
    let mut processes: Vec<i64> = Vec::new();
    let mut modes: Vec<String> = Vec::new();
    let mut cpus: Vec<String> = Vec::new();
    let mut rts: Vec<i64> = Vec::new();
    let mut slices: Vec<i64> = Vec::new();
    let mut exts: Vec<String> = Vec::new();
    let mut machines: Vec<String> = Vec::new();
    for r in runs {
        if !policies.contains(&r.policy) {
            policies.push(r.policy.clone());
        }
        if !workloads.contains(&r.workload) {
            workloads.push(r.workload.clone());
        }
        if !processes.contains(&r.processes) {
            processes.push(r.processes);
        }
        if !modes.contains(&r.priority_mode) {
            modes.push(r.priority_mode.clone());
        }
        if !cpus.contains(&r.cpus) {
            cpus.push(r.cpus.clone());
        }
        if let Some(v) = r.rt_runtime_us
            && !rts.contains(&v)
        {
            rts.push(v);
        }
        if let Some(v) = r.slice_us
            && !slices.contains(&v)
        {
            slices.push(v);
        }
        if let Some(v) = &r.ext_scheduler
            && !exts.contains(v)
        {
            exts.push(v.clone());
        }
        if let Some(v) = &r.machine
            && !machines.contains(v)
        {
            machines.push(v.clone());
        }
    }
    sort_levels(&mut policies, &order.policies, |p| {
        Policy::parse(p)
            .and_then(|p| Policy::ALL.iter().position(|&x| x == p))
            .unwrap_or(usize::MAX)
    });
    sort_levels(&mut workloads, &order.workloads, |_| 0);
    sort_levels(&mut modes, &order.priorities, |_| 0);
    sort_levels(&mut cpus, &order.cpus, |c| usize::from(c != "all"));
    processes.sort_unstable();
    rts.sort_unstable();
    slices.sort_unstable();
    sort_levels(&mut exts, &order.ext_schedulers, |_| 0);
    sort_levels(&mut machines, &order.machines, |_| 0);
    let by = by.map(|factor| {
        let mut levels: Vec<String> = runs.iter().filter_map(|r| r.by.clone()).collect();
        levels.sort();
        levels.dedup();
        ByLevels { factor, levels }
    });
    Factors {
        by,
        policies,
        workloads: workloads
            .iter()
            .map(|w| WorkloadInfo {
                name: w.clone(),
                kind: runs
                    .iter()
                    .find(|r| &r.workload == w)
                    .map(|r| r.workload_kind.clone())
                    .unwrap_or_default(),
                work_unit: units.get(w).cloned().unwrap_or_default(),
                duration_based: order.timed.contains(w),
            })
            .collect(),
        processes,
        priority_modes: modes,
        cpus,
        rt_runtime_us: rts,
        slice_us: slices,
        ext_schedulers: exts,
        machines,
    }
}

/// "pi, 2 processes" plus the factors that vary in the campaign.
pub fn group_label(k: &GroupKey, factors: &Factors) -> String {
    let mut s = format!(
        "{}, {} process{}",
        k.workload,
        k.processes,
        if k.processes == 1 { "" } else { "es" }
    );
    if factors.priority_modes.len() > 1 {
        s.push_str(&format!(", priorities {}", k.priority_mode));
    }
    if factors.cpus.len() > 1 {
        s.push_str(&format!(", cpus {}", k.cpus));
    }
    if let Some(rt) = k.rt_runtime_us {
        s.push_str(&format!(", rt_runtime {rt} µs"));
    }
    if let Some(v) = k.slice_us {
        s.push_str(&format!(", slice {v} µs"));
    }
    if let Some(v) = &k.ext_scheduler {
        s.push_str(&format!(", sched_ext {v}"));
    }
    if let Some(v) = &k.machine {
        s.push_str(&format!(", machine {v}"));
    }
    if let (Some(level), Some(by)) = (&k.by, &factors.by) {
        s.push_str(&format!(", {} {level}", by.factor.name()));
    }
    s
}

/// The group of a run.
pub(super) fn group_key(r: &ReportRun) -> GroupKey {
    GroupKey {
        workload: r.workload.clone(),
        processes: r.processes,
        priority_mode: r.priority_mode.clone(),
        cpus: r.cpus.clone(),
        rt_runtime_us: r.rt_runtime_us,
        slice_us: r.slice_us,
        ext_scheduler: r.ext_scheduler.clone(),
        machine: r.machine.clone(),
        by: r.by.clone(),
    }
}

/// "pi, 2 processes, OTHER": a run's group and policy.
pub(super) fn run_label(r: &ReportRun, factors: &Factors) -> String {
    format!(
        "{}, {}",
        group_label(&group_key(r), factors),
        policy_label(&r.policy)
    )
}

/// The conditions of a campaign in factor order, the condition of each run
/// and the groups of conditions.
pub(super) struct Grouping {
    /// Each condition's group key and policy.
    pub(super) keyed: Vec<(GroupKey, String)>,
    /// Indexed like the runs.
    pub(super) cond_of_run: Vec<usize>,
    pub(super) groups: Vec<Group>,
    /// Indexed like `keyed`.
    pub(super) cond_group: Vec<usize>,
}

/// Group the runs into conditions and the conditions into groups, in
/// factor order.
pub(super) fn group(runs: &[ReportRun], factors: &Factors) -> Grouping {
    let pos = |v: &[String], x: &str| v.iter().position(|y| y == x).unwrap_or(usize::MAX);
    let workloads: Vec<String> = factors.workloads.iter().map(|w| w.name.clone()).collect();
    let by_levels: &[String] = factors.by.as_ref().map_or(&[], |b| &b.levels);
    let mut keyed: Vec<(GroupKey, String)> = Vec::new();
    let mut cond_of_run: Vec<usize> = Vec::with_capacity(runs.len());
    let mut cond_index: HashMap<(GroupKey, String), usize> = HashMap::new();
    for r in runs {
        let key = (group_key(r), r.policy.clone());
        let n = cond_index.len();
        let i = *cond_index.entry(key.clone()).or_insert_with(|| {
            keyed.push(key);
            n
        });
        cond_of_run.push(i);
    }
    let sort_key = |(g, p): &(GroupKey, String)| {
        (
            pos(&workloads, &g.workload),
            g.processes,
            pos(&factors.priority_modes, &g.priority_mode),
            pos(&factors.cpus, &g.cpus),
            g.rt_runtime_us,
            g.slice_us,
            g.ext_scheduler
                .as_deref()
                .map_or(0, |l| pos(&factors.ext_schedulers, l)),
            g.machine
                .as_deref()
                .map_or(0, |l| pos(&factors.machines, l)),
            g.by.as_deref().map_or(0, |l| pos(by_levels, l)),
            pos(&factors.policies, p),
        )
    };
    let mut sorted: Vec<usize> = (0..keyed.len()).collect();
    sorted.sort_by_key(|&i| sort_key(&keyed[i]));
    let mut new_pos = vec![0; keyed.len()];
    for (new, &old) in sorted.iter().enumerate() {
        new_pos[old] = new;
    }
    let cond_of_run: Vec<usize> = cond_of_run.iter().map(|&c| new_pos[c]).collect();
    let keyed: Vec<(GroupKey, String)> = sorted.iter().map(|&i| keyed[i].clone()).collect();
    let mut groups: Vec<Group> = Vec::new();
    let mut cond_group = Vec::with_capacity(keyed.len());
    for (ci, (g, _)) in keyed.iter().enumerate() {
        if groups.last().is_none_or(|last| &last.key != g) {
            groups.push(Group {
                key: g.clone(),
                label: group_label(g, factors),
                conditions: Vec::new(),
            });
        }
        let gi = groups.len() - 1;
        groups[gi].conditions.push(ci);
        cond_group.push(gi);
    }
    Grouping {
        keyed,
        cond_of_run,
        groups,
        cond_group,
    }
}
