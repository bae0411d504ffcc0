//! The floor of reading a campaign: SQLite alone stepping through every
//! column of every run and process row of one campaign (in primary-key
//! order, as the report reads them: no sort), with no decoding into
//! schedlab's types. `schedlab bench report` times the report against
//! it, so its target is a ratio that does not depend on the machine that
//! measures it.

use anyhow::Result;
use rusqlite::params;

use super::Store;

/// What one pass over a campaign's rows touched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FloorRead {
    pub run_rows: u64,
    pub process_rows: u64,
    /// Bytes of text and blob values read (so the values are really read).
    pub bytes: u64,
}

impl Store {
    /// Steps through every column of campaign `campaign`'s runs and
    /// processes, as the report's queries would fetch them.
    pub fn read_floor(&self, campaign: i64) -> Result<FloorRead> {
        let mut out = FloorRead::default();
        let mut runs = self
            .conn
            .prepare("SELECT * FROM runs WHERE campaign_id = ?1 ORDER BY id")?;
        let columns = runs.column_count();
        let mut rows = runs.query(params![campaign])?;
        while let Some(row) = rows.next()? {
            out.run_rows += 1;
            out.bytes += touch(row, columns)?;
        }
        let mut processes = self.conn.prepare(
            "SELECT * FROM processes
             WHERE run_id IN (SELECT id FROM runs WHERE campaign_id = ?1)
             ORDER BY run_id, process_index",
        )?;
        let columns = processes.column_count();
        let mut rows = processes.query(params![campaign])?;
        while let Some(row) = rows.next()? {
            out.process_rows += 1;
            out.bytes += touch(row, columns)?;
        }
        Ok(out)
    }
}

/// Reads each of a row's `columns` values; returns the text and blob bytes.
fn touch(row: &rusqlite::Row<'_>, columns: usize) -> Result<u64> {
    use rusqlite::types::ValueRef;
    let mut bytes = 0;
    for i in 0..columns {
        bytes += match row.get_ref(i)? {
            ValueRef::Text(t) | ValueRef::Blob(t) => t.len() as u64,
            _ => 0,
        };
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::synth::{self, SynthConfig};

    #[test]
    fn the_floor_reads_every_row_the_synthetic_campaign_wrote() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("f.db")).unwrap();
        let cfg = SynthConfig {
            repetitions: 2,
            ..SynthConfig::bench()
        };
        let (campaign, rows) = synth::create(&mut store, &cfg).unwrap();
        let read = store.read_floor(campaign).unwrap();
        assert_eq!(read.process_rows, rows);
        let runs = cfg.policies.len()
            * cfg.workloads.len()
            * cfg.processes.len()
            * cfg.priorities.len()
            * cfg.repetitions as usize;
        assert_eq!(read.run_rows, runs as u64);
        assert!(read.bytes > 0);
        assert_eq!(
            store.read_floor(campaign + 1).unwrap(),
            FloorRead::default()
        );
    }
}
