//! The JSON export: an array of objects, one per row and one per line,
//! keys the column names in column order; null for an empty cell.

use anyhow::Result;
use serde_json::Value;
use std::io::Write;

use super::{Exporter, header, values};
use crate::store::ExportRow;

/// Writes JSON as the rows come.
pub(super) struct JsonExporter<'a> {
    out: &'a mut (dyn Write + Send),
    columns: Vec<String>,
    figure_names: Vec<String>,
    rows: u64,
}

impl<'a> JsonExporter<'a> {
    /// Writes the opening bracket.
    pub(super) fn begin(
        out: &'a mut (dyn Write + Send),
        figure_names: Vec<String>,
    ) -> Result<JsonExporter<'a>> {
        write!(out, "[")?;
        Ok(JsonExporter {
            out,
            columns: header(&figure_names),
            figure_names,
            rows: 0,
        })
    }
}

impl Exporter for JsonExporter<'_> {
    fn row(&mut self, r: &ExportRow) -> Result<()> {
        let values = values(r, &self.figure_names);
        // One object per line, keys in column order.
        let sep = if self.rows == 0 { "\n" } else { ",\n" };
        write!(self.out, "{sep}{{")?;
        for (i, (k, v)) in self.columns.iter().zip(&values).enumerate() {
            let comma = if i == 0 { "" } else { "," };
            write!(self.out, "{comma}{}:{v}", Value::from(k.as_str()))?;
        }
        write!(self.out, "}}")?;
        self.rows += 1;
        Ok(())
    }

    fn finish(self: Box<Self>) -> Result<u64> {
        if self.rows > 0 {
            writeln!(self.out)?;
        }
        writeln!(self.out, "]")?;
        Ok(self.rows)
    }
}
