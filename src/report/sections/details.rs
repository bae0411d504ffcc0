//! The stored details of runs that some sections show beyond the analysis
//! (resolved plan entries, every process row, WRR slices): which runs a
//! section asks for ([`Needs`]), and those details read once through the
//! store as plain data ([`RunDetails`]), so that preparing a section is a
//! pure function of loaded data.

use anyhow::Result;
use serde_json::Value;
use std::collections::HashMap;

use crate::plan::Run;
use crate::record::{ProcessRecord, SliceRow};
use crate::store::Store;

/// Runs whose stored details a section reads, by kind of detail.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Needs {
    /// Runs whose resolved plan entry and policy facts are read.
    pub documents: Vec<i64>,
    /// Runs whose every process row (workers and RT hogs) is read.
    pub processes: Vec<i64>,
    /// Runs whose WRR slices are read.
    pub slices: Vec<i64>,
    /// The campaigns whose latency histograms are read (none: not read).
    pub latency_of: Vec<i64>,
}

/// The stored details of some runs, by run id.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunDetails {
    /// The resolved plan entry (None when it is not a [`Run`], as in
    /// synthetic databases) and the policy-specific facts.
    pub documents: HashMap<i64, (Option<Run>, Value)>,
    /// Every process row, by process index.
    pub processes: HashMap<i64, Vec<ProcessRecord>>,
    /// WRR slices in the order they were handed out.
    pub slices: HashMap<i64, Vec<SliceRow>>,
    /// Every worker's primary latency histogram (ok runs).
    pub latency: Vec<crate::store::ProcessLatency>,
}

impl RunDetails {
    /// Read what `needs` asks for (nothing at all when it asks nothing).
    pub fn load(store: &Store, needs: &Needs) -> Result<RunDetails> {
        let mut d = RunDetails::default();
        if !needs.documents.is_empty() {
            d.documents = store
                .report_run_documents(&needs.documents)?
                .into_iter()
                .map(|(id, run, extra)| (id, (run, extra)))
                .collect();
        }
        if !needs.processes.is_empty() {
            for (id, p) in store.report_process_records(&needs.processes)? {
                d.processes.entry(id).or_default().push(p);
            }
        }
        for &id in &needs.slices {
            d.slices.insert(id, store.slices(id)?);
        }
        if !needs.latency_of.is_empty() {
            d.latency = store.campaign_latency(&needs.latency_of)?;
        }
        Ok(d)
    }

    /// The resolved plan entry of a run, if read and readable.
    pub fn plan(&self, run: i64) -> Option<&Run> {
        self.documents.get(&run).and_then(|(p, _)| p.as_ref())
    }

    /// The process rows of a run (none when not read).
    pub fn processes(&self, run: i64) -> &[ProcessRecord] {
        self.processes.get(&run).map_or(&[], Vec::as_slice)
    }
}
