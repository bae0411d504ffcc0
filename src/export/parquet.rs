//! The Parquet export: the rows and columns of the CSV export, typed
//! ([`super::COLUMNS`]: INT64, DOUBLE, UTF-8 strings; nullable where a
//! cell can be empty), `fig_*` columns DOUBLE. Rows are buffered a row group
//! at a time ([`ROW_GROUP_ROWS`]) and written as they come, so an export of
//! any size runs in bounded memory. Snappy-compressed, as DuckDB, Polars,
//! pandas and Spark read by default. The file's key-value metadata names
//! the schedlab version and [`SCHEMA_VERSION`].

use anyhow::{Context, Result, bail};
use parquet::basic::{Compression, LogicalType, Repetition, Type as PhysicalType};
use parquet::data_type::{ByteArray, ByteArrayType, DoubleType, Int64Type};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::Type;
use serde_json::Value;
use std::io::Write;
use std::sync::Arc;

use super::{COLUMNS, Exporter, FIGURE_PREFIX, Kind, NULLABLE, values};
use crate::store::ExportRow;

/// Rows per row group.
pub const ROW_GROUP_ROWS: usize = 64 * 1024;
/// The version of the export's columns, in the file's metadata
/// (`schedlab_export_schema`); raised when a column changes meaning.
pub const SCHEMA_VERSION: u32 = 1;

/// One column's buffered values of the row group being filled.
enum Buffer {
    Int(Vec<i64>),
    Real(Vec<f64>),
    Text(Vec<ByteArray>),
}

struct Column {
    name: String,
    kind: Kind,
    nullable: bool,
    values: Buffer,
    /// Definition levels (1 present, 0 null) of a nullable column.
    defined: Vec<i16>,
}

impl Column {
    fn push(&mut self, v: &Value) -> Result<()> {
        if v.is_null() {
            if !self.nullable {
                bail!(
                    "column {} is empty in a row, but is declared required",
                    self.name
                );
            }
            self.defined.push(0);
            return Ok(());
        }
        match (&mut self.values, v) {
            (Buffer::Int(b), Value::Number(n)) if n.is_i64() => b.push(n.as_i64().unwrap_or(0)),
            (Buffer::Real(b), Value::Number(n)) => b.push(n.as_f64().unwrap_or(f64::NAN)),
            (Buffer::Text(b), Value::String(s)) => b.push(ByteArray::from(s.as_str())),
            _ => bail!(
                "column {} holds {v} where a {:?} was expected",
                self.name,
                self.kind
            ),
        }
        if self.nullable {
            self.defined.push(1);
        }
        Ok(())
    }

    fn clear(&mut self) {
        match &mut self.values {
            Buffer::Int(b) => b.clear(),
            Buffer::Real(b) => b.clear(),
            Buffer::Text(b) => b.clear(),
        }
        self.defined.clear();
    }

    fn parquet_type(&self) -> Result<Type> {
        let physical = match self.kind {
            Kind::Int => PhysicalType::INT64,
            Kind::Real => PhysicalType::DOUBLE,
            Kind::Text => PhysicalType::BYTE_ARRAY,
        };
        let repetition = if self.nullable {
            Repetition::OPTIONAL
        } else {
            Repetition::REQUIRED
        };
        let mut b = Type::primitive_type_builder(&self.name, physical).with_repetition(repetition);
        if self.kind == Kind::Text {
            b = b.with_logical_type(Some(LogicalType::String));
        }
        Ok(b.build()?)
    }
}

/// Writes a Parquet export row by row: [`ParquetExporter::begin`],
/// [`ParquetExporter::row`] for each row, [`ParquetExporter::finish`].
pub struct ParquetExporter<W: Write + Send> {
    writer: SerializedFileWriter<W>,
    columns: Vec<Column>,
    figure_names: Vec<String>,
    buffered: usize,
    rows: u64,
}

impl<W: Write + Send> ParquetExporter<W> {
    /// Start an export whose rows carry these figures (the union over the
    /// rows to come).
    pub fn begin(out: W, figure_names: Vec<String>) -> Result<ParquetExporter<W>> {
        let columns: Vec<Column> = COLUMNS
            .iter()
            .map(|c| (c.name.to_string(), c.kind, c.nullable))
            .chain(
                figure_names
                    .iter()
                    .map(|f| (format!("{FIGURE_PREFIX}{f}"), Kind::Real, NULLABLE)),
            )
            .map(|(name, kind, nullable)| Column {
                name,
                kind,
                nullable,
                values: match kind {
                    Kind::Int => Buffer::Int(Vec::new()),
                    Kind::Real => Buffer::Real(Vec::new()),
                    Kind::Text => Buffer::Text(Vec::new()),
                },
                defined: Vec::new(),
            })
            .collect();
        let fields = columns
            .iter()
            .map(|c| c.parquet_type().map(Arc::new))
            .collect::<Result<Vec<_>>>()?;
        let schema = Type::group_type_builder("schedlab_export")
            .with_fields(fields)
            .build()?;
        let props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_created_by(format!("schedlab {}", env!("CARGO_PKG_VERSION")))
            .set_key_value_metadata(Some(vec![
                KeyValue::new(
                    "schedlab_version".to_string(),
                    env!("CARGO_PKG_VERSION").to_string(),
                ),
                KeyValue::new(
                    "schedlab_export_schema".to_string(),
                    SCHEMA_VERSION.to_string(),
                ),
            ]))
            .build();
        let writer = SerializedFileWriter::new(out, Arc::new(schema), Arc::new(props))
            .context("starting the Parquet file")?;
        Ok(ParquetExporter {
            writer,
            columns,
            figure_names,
            buffered: 0,
            rows: 0,
        })
    }

    pub fn row(&mut self, r: &ExportRow) -> Result<()> {
        let vals = values(r, &self.figure_names);
        for (c, v) in self.columns.iter_mut().zip(&vals) {
            c.push(v).with_context(|| format!("run {}", r.run))?;
        }
        self.buffered += 1;
        self.rows += 1;
        if self.buffered >= ROW_GROUP_ROWS {
            self.flush()?;
        }
        Ok(())
    }

    /// Write the buffered rows as one row group.
    fn flush(&mut self) -> Result<()> {
        if self.buffered == 0 {
            return Ok(());
        }
        let mut group = self.writer.next_row_group()?;
        for c in &mut self.columns {
            let mut w = group
                .next_column()?
                .with_context(|| format!("the Parquet schema lacks column {}", c.name))?;
            let levels = c.nullable.then_some(c.defined.as_slice());
            match &c.values {
                Buffer::Int(v) => {
                    w.typed::<Int64Type>().write_batch(v, levels, None)?;
                }
                Buffer::Real(v) => {
                    w.typed::<DoubleType>().write_batch(v, levels, None)?;
                }
                Buffer::Text(v) => {
                    w.typed::<ByteArrayType>().write_batch(v, levels, None)?;
                }
            }
            w.close()?;
            c.clear();
        }
        group.close()?;
        self.buffered = 0;
        Ok(())
    }

    /// Write the last row group and the footer; returns the rows written.
    pub fn finish(mut self) -> Result<u64> {
        self.flush()?;
        let mut out = self
            .writer
            .into_inner()
            .context("finishing the Parquet file")?;
        out.flush()?;
        Ok(self.rows)
    }
}

impl<W: Write + Send> Exporter for ParquetExporter<W> {
    fn row(&mut self, r: &ExportRow) -> Result<()> {
        ParquetExporter::row(self, r)
    }

    fn finish(self: Box<Self>) -> Result<u64> {
        ParquetExporter::finish(*self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::record::Field;

    #[test]
    fn a_written_file_reads_back_with_its_types_and_nulls() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.parquet");
        let mut rows = Vec::new();
        for i in 0..3 {
            let mut r = super::super::tests::row();
            r.run = i;
            r.nice = (i == 1).then_some(-5);
            rows.push(r);
        }
        rows[2].figures.clear();
        let file = std::fs::File::create(&path).unwrap();
        let mut e = ParquetExporter::begin(file, vec!["pi_error".into()]).unwrap();
        for r in &rows {
            e.row(r).unwrap();
        }
        assert_eq!(e.finish().unwrap(), 3);

        let reader = SerializedFileReader::new(std::fs::File::open(&path).unwrap()).unwrap();
        let meta = reader.metadata().file_metadata();
        assert_eq!(meta.num_rows(), 3);
        let kv = meta.key_value_metadata().unwrap();
        assert!(kv.iter().any(|k| k.key == "schedlab_export_schema"));
        let fields = meta.schema_descr().columns().len();
        assert_eq!(fields, COLUMNS.len() + 1);
        let read: Vec<_> = reader
            .get_row_iter(None)
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        let get = |i: usize, name: &str| {
            read[i]
                .get_column_iter()
                .find(|(n, _)| n.as_str() == name)
                .map(|(_, f)| f.clone())
                .unwrap()
        };
        for (i, r) in rows.iter().enumerate() {
            assert_eq!(get(i, "run"), Field::Long(r.run));
            assert_eq!(get(i, "policy"), Field::Str("fifo".into()));
            assert_eq!(get(i, "cpu_util"), Field::Double(0.5));
            assert_eq!(get(i, "hostname"), Field::Str("host-a".into()));
            assert_eq!(get(i, "host_id"), Field::Null);
        }
        assert_eq!(get(0, "nice"), Field::Null);
        assert_eq!(get(1, "nice"), Field::Long(-5));
        assert_eq!(get(0, "fig_pi_error"), Field::Double(1e-9));
        assert_eq!(get(2, "fig_pi_error"), Field::Null);
    }
}
