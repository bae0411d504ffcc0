//! Reading a campaign's latency histograms back: each worker process's
//! primary histogram with the kernel's view of the same process (the
//! registry's fields: run-queue wait and the times it was put on a CPU,
//! from schedstat) and its deadline-miss counts, for the report's latency
//! section.

use anyhow::{Context, Result};
use std::collections::BTreeMap;

use super::Store;
use super::counts::{self, Which};
use super::named::Columns;
use crate::fields::Field;
use crate::record::KernelCounts;
use crate::workload::latency::Latency;

/// One worker process's primary latency and what the kernel saw of it.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessLatency {
    pub run_id: i64,
    pub process_index: i64,
    /// The histogram's name ("wakeup", "round_trip", "request").
    pub name: String,
    pub histogram: Latency,
    /// The process's fields of the registry (among them schedstat's
    /// run-queue wait and the times it was put on a CPU, over its
    /// measured window).
    pub kernel: KernelCounts,
    /// The workload's `activations` and `misses` figures, where it has them.
    pub activations: Option<f64>,
    pub misses: Option<f64>,
}

/// The kernel's view beside a workload's own latency: run-queue wait per
/// time the process was put on a CPU (schedstat's fields
/// [`Field::WaitNs`] and [`Field::Timeslices`]), in microseconds.
pub fn rq_wait_per_slice_us(k: &KernelCounts) -> Option<f64> {
    match (k.get(Field::WaitNs), k.get(Field::Timeslices)) {
        (Some(w), Some(n)) if n > 0 => Some(w as f64 / n as f64 / 1e3),
        _ => None,
    }
}

impl Store {
    /// The primary latency of every worker of the campaigns' ok runs.
    pub fn campaign_latency(&self, campaign_ids: &[i64]) -> Result<Vec<ProcessLatency>> {
        let ids: Vec<String> = campaign_ids.iter().map(|i| i.to_string()).collect();
        let mut stmt = self.conn.prepare(&format!(
            "SELECT l.run_id, l.process_index, l.name, l.histogram, p.figures_json{}
             FROM latency l
             JOIN runs r ON r.id = l.run_id
             JOIN processes p ON p.run_id = l.run_id AND p.process_index = l.process_index
             WHERE r.campaign_id IN ({}) AND r.status = 'ok' AND l.is_primary = 1 AND p.role = 'worker'
             ORDER BY l.run_id, l.process_index",
            counts::select_list("p.", Which::All),
            ids.join(", ")
        ))?;
        let cols = Columns::of(&stmt)?;
        let mut rows = stmt.query([])?;
        let mut out = Vec::new();
        while let Some(r) = rows.next()? {
            let n = cols.row(r);
            let run_id: i64 = n.get("run_id")?;
            let process_index: i64 = n.get("process_index")?;
            let bytes: Vec<u8> = n.get("histogram")?;
            let histogram = Latency::decode(&bytes)
                .with_context(|| format!("run {run_id} process {process_index}: latency"))?;
            let figures: String = n.get("figures_json")?;
            let figures: BTreeMap<String, serde_json::Value> =
                serde_json::from_str(&figures).unwrap_or_default();
            let fig = |k: &str| figures.get(k).and_then(serde_json::Value::as_f64);
            out.push(ProcessLatency {
                run_id,
                process_index,
                name: n.get("name")?,
                histogram,
                kernel: counts::read(&n)?,
                activations: fig("activations"),
                misses: fig("misses"),
            });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_per_slice_comes_from_the_registry_s_schedstat_fields() {
        let k = KernelCounts::default().with(Field::WaitNs, Some(3_000));
        assert_eq!(rq_wait_per_slice_us(&k), None, "no slices");
        assert_eq!(
            rq_wait_per_slice_us(&k.with(Field::Timeslices, Some(0))),
            None
        );
        assert_eq!(
            rq_wait_per_slice_us(&k.with(Field::Timeslices, Some(2))),
            Some(1.5)
        );
    }
}
