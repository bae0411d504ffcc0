//! The TOML spec as written: serde structs that mirror the file, with every
//! field optional and unknown keys refused. `super::validate` turns them into
//! the checked [`super::Spec`].

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawSpec {
    pub name: Option<String>,
    pub description: Option<String>,
    /// An integer, or "auto" (with `target_ci_pct`, `min_repetitions`,
    /// `max_repetitions`).
    pub repetitions: Option<toml::Value>,
    pub target_ci_pct: Option<f64>,
    pub min_repetitions: Option<i64>,
    pub max_repetitions: Option<i64>,
    pub order: Option<String>,
    pub seed: Option<i64>,
    pub timeout_s: Option<f64>,
    pub cooldown_s: Option<f64>,
    pub cpu_dma_latency_us: Option<i64>,
    pub trace: Option<bool>,
    pub workdir: Option<String>,
    pub scale: Option<f64>,
    pub compare_margin_pct: Option<f64>,
    pub matrix: Option<RawMatrix>,
    #[serde(default)]
    pub workloads: BTreeMap<String, RawWorkload>,
    #[serde(default)]
    pub priorities: BTreeMap<String, RawPriorities>,
    pub deadline: Option<RawDeadline>,
    pub hog: Option<RawHog>,
    pub wrr: Option<RawWrr>,
    /// `[ext_schedulers.NAME]`: sched_ext schedulers the matrix may name.
    #[serde(default)]
    pub ext_schedulers: BTreeMap<String, RawExtScheduler>,
    /// `[machines.NAME]`: guest machines the matrix may name.
    #[serde(default)]
    pub machines: BTreeMap<String, super::machines::RawMachine>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawMatrix {
    pub policy: Option<Vec<String>>,
    pub workload: Option<Vec<String>>,
    pub processes: Option<Vec<i64>>,
    pub priorities: Option<Vec<String>>,
    pub cpus: Option<Vec<String>>,
    pub rt_runtime_us: Option<Vec<i64>>,
    pub slice_us: Option<Vec<i64>>,
    pub ext_scheduler: Option<Vec<String>>,
    pub machine: Option<Vec<String>>,
    /// `[[matrix.exclude]]`: combinations of levels left out
    /// ([`super::exclude`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclude: Option<Vec<toml::Table>>,
}

/// One `[workloads.NAME]` table as written: `kind` (defaults to NAME) and
/// the kind's own keys, which its module in `workload/` parses.
pub type RawWorkload = toml::Table;

/// An integer or a list of integers (`nice = 0` or `nice = [-10, 10]`).
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum IntOrList {
    Int(i64),
    List(Vec<i64>),
}

impl<'de> Deserialize<'de> for IntOrList {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = IntOrList;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an integer or a list of integers, such as 5 or [1, 4, 8]")
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<IntOrList, E> {
                Ok(IntOrList::Int(v))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<IntOrList, E> {
                i64::try_from(v)
                    .map(IntOrList::Int)
                    .map_err(|_| E::custom(format!("{v} is too large")))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<IntOrList, A::Error> {
                let mut out = Vec::new();
                while let Some(v) = seq.next_element::<i64>()? {
                    out.push(v);
                }
                Ok(IntOrList::List(out))
            }
        }
        d.deserialize_any(V)
    }
}

/// One `[priorities.NAME]` table.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawPriorities {
    pub mode: Option<String>,
    pub nice: Option<IntOrList>,
    pub rt_priority: Option<IntOrList>,
    pub weight: Option<IntOrList>,
}

/// `[deadline]`: the SCHED_DEADLINE reservation of every process.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawDeadline {
    /// Microseconds, or the string "auto".
    pub runtime_us: Option<toml::Value>,
    pub deadline_us: Option<i64>,
    pub period_us: Option<i64>,
}

/// `[hog]`: a real-time CPU hog run beside the measured workers (seed 004).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawHog {
    pub policy: Option<String>,
    pub rt_priority: Option<i64>,
    pub nice: Option<i64>,
    pub count: Option<i64>,
    pub cpus: Option<String>,
}

/// `[ext_schedulers.NAME]`: a sched_ext scheduler program to run.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawExtScheduler {
    pub command: Option<Vec<String>>,
    pub ready_timeout_s: Option<f64>,
}

/// `[wrr]`: schedlab's weighted round robin.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawWrr {
    pub quantum_ms: Option<f64>,
    pub mechanism: Option<String>,
}
