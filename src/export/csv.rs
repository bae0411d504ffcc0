//! The CSV export: a header line of the column names, then one line per
//! row, quoted as RFC 4180 says; an empty cell is a null.

use anyhow::Result;
use serde_json::Value;
use std::io::Write;

use super::{Exporter, header, values};
use crate::store::ExportRow;

/// Writes CSV as the rows come.
pub(super) struct CsvExporter<'a> {
    out: &'a mut (dyn Write + Send),
    figure_names: Vec<String>,
    rows: u64,
}

impl<'a> CsvExporter<'a> {
    /// Writes the header.
    pub(super) fn begin(
        out: &'a mut (dyn Write + Send),
        figure_names: Vec<String>,
    ) -> Result<CsvExporter<'a>> {
        let cells: Vec<String> = header(&figure_names).iter().map(|c| quote(c)).collect();
        writeln!(out, "{}", cells.join(","))?;
        Ok(CsvExporter {
            out,
            figure_names,
            rows: 0,
        })
    }
}

impl Exporter for CsvExporter<'_> {
    fn row(&mut self, r: &ExportRow) -> Result<()> {
        let cells: Vec<String> = values(r, &self.figure_names).iter().map(csv_cell).collect();
        writeln!(self.out, "{}", cells.join(","))?;
        self.rows += 1;
        Ok(())
    }

    fn finish(self: Box<Self>) -> Result<u64> {
        Ok(self.rows)
    }
}

/// RFC 4180 quoting: fields with a comma, quote or line break are quoted.
fn quote(field: &str) -> String {
    if field.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", field.replace('"', "\"\""))
    } else {
        field.to_string()
    }
}

/// A value as a CSV cell: empty for null, text quoted when needed.
fn csv_cell(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => quote(s),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_follows_rfc4180() {
        assert_eq!(quote("plain"), "plain");
        assert_eq!(quote("a,b"), "\"a,b\"");
        assert_eq!(quote("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(quote("two\nlines"), "\"two\nlines\"");
    }

    #[test]
    fn null_is_an_empty_cell_and_numbers_are_bare() {
        assert_eq!(csv_cell(&Value::Null), "");
        assert_eq!(csv_cell(&Value::from(42)), "42");
        assert_eq!(csv_cell(&Value::from("a,b")), "\"a,b\"");
    }
}
