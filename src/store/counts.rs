//! The per-process fields of the registry ([`crate::fields::FIELDS`]), one
//! `processes` column each, named as the field: storing a process, the
//! report's process rows and the export's rows all iterate the registry,
//! and read each column by its name.

use rusqlite::Row;
use rusqlite::types::ToSql;

use super::named::{Columns, Named};
use crate::fields::{FIELDS, Field, MetricFields};
use crate::record::KernelCounts;

/// Every field's column, in registry order (each added by a migration).
fn columns() -> impl Iterator<Item = (Field, &'static str)> {
    columns_of(Which::All)
}

/// Which fields a query reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Which {
    All,
    /// Those with a report metric (the report's process rows: the page
    /// faults, which no metric reads, are left unread).
    Metrics,
}

/// The columns of the fields `which` names, in registry order.
fn columns_of(which: Which) -> impl Iterator<Item = (Field, &'static str)> {
    FIELDS
        .iter()
        .filter(move |d| which == Which::All || d.metric.is_some())
        .map(|d| (d.field, d.name))
}

/// The counters' columns for a SELECT list: `, p.a, p.b` with `prefix`
/// "p.".
pub(super) fn select_list(prefix: &str, which: Which) -> String {
    columns_of(which)
        .map(|(_, c)| format!(", {prefix}{c}"))
        .collect()
}

/// The counters' column names for an INSERT, in registry order (the
/// order of [`values`]).
pub(super) fn names() -> impl Iterator<Item = &'static str> {
    columns().map(|(_, c)| c)
}

/// The values to insert, in registry order.
pub(super) fn values(k: &KernelCounts) -> Vec<Option<i64>> {
    columns().map(|(f, _)| k.get(f).map(super::i)).collect()
}

/// The counters of a row read by name (negative values, never stored,
/// read as None).
pub(super) fn read(n: &Named<'_, '_, '_>) -> rusqlite::Result<KernelCounts> {
    let mut k = KernelCounts::default();
    for (f, c) in columns() {
        let v: Option<i64> = n.get(c)?;
        k.set(f, v.and_then(|v| u64::try_from(v).ok()));
    }
    Ok(k)
}

/// The positions of the columns of the fields `which` names in a
/// statement's result, in registry order (for [`read_at`]).
pub(super) fn positions(cols: &Columns, which: Which) -> rusqlite::Result<Vec<(Field, usize)>> {
    columns_of(which)
        .map(|(f, c)| Ok((f, cols.position(c)?)))
        .collect()
}

/// The fields with a metric of a row whose columns are at `positions`
/// ([`positions`] of [`Which::Metrics`]), as [`read`] reads them (the
/// fields not there None): a report's process row.
pub(super) fn read_at(r: &Row<'_>, positions: &[(Field, usize)]) -> rusqlite::Result<MetricFields> {
    let mut k = MetricFields::default();
    for &(f, at) in positions {
        let v: Option<i64> = r.get(at)?;
        k.set(f, v.and_then(|v| u64::try_from(v).ok()));
    }
    Ok(k)
}

/// `fixed` then the counters' values, as one parameter list.
pub(super) fn with_values<'a>(
    fixed: &'a [&'a dyn ToSql],
    counts: &'a [Option<i64>],
) -> impl Iterator<Item = &'a dyn ToSql> {
    fixed
        .iter()
        .copied()
        .chain(counts.iter().map(|c| c as &dyn ToSql))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_counter_is_stored_and_read_back_by_name() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        let cols: String = FIELDS
            .iter()
            .map(|d| format!(", {} {}", d.name, d.sql_type))
            .collect();
        conn.execute_batch(&format!("CREATE TABLE t (id INTEGER{cols})"))
            .unwrap();
        let k = KernelCounts::default()
            .with(Field::NrMigrations, Some(7))
            .with(Field::LlcMigrations, Some(0));
        let columns: Vec<&str> = ["id"].into_iter().chain(names()).collect();
        let counts = values(&k);
        let id: &dyn ToSql = &1;
        conn.execute(
            &super::super::insert_sql("t", &columns),
            rusqlite::params_from_iter(with_values(&[id], &counts)),
        )
        .unwrap();
        conn.execute("INSERT INTO t (id) VALUES (2)", []).unwrap();
        let mut stmt = conn
            .prepare(&format!(
                "SELECT t.id{} FROM t ORDER BY id",
                select_list("t.", Which::All)
            ))
            .unwrap();
        let cols = super::super::named::Columns::of(&stmt).unwrap();
        let got: Vec<KernelCounts> = stmt
            .query_map([], |r| read(&cols.row(r)))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        assert_eq!(got, [k, KernelCounts::default()]);
    }
}
