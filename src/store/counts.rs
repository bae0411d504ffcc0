//! The per-process kernel counters ([`KernelCounts`]), one `processes`
//! column each, listed once in [`COUNT_COLUMNS`]: storing a process, the
//! report's process rows and the export's rows all iterate that list, and
//! read each column by its name.

use rusqlite::Row;
use rusqlite::types::ToSql;

use super::named::{Columns, Named};
use crate::record::KernelCounts;

/// One counter: its `processes` column and its field.
pub(super) struct CountColumn {
    pub name: &'static str,
    pub get: fn(&KernelCounts) -> Option<u64>,
    pub set: fn(&mut KernelCounts, Option<u64>),
}

/// Every counter of [`KernelCounts`] (schema migration 9 on).
pub(super) const COUNT_COLUMNS: &[CountColumn] = &[CountColumn {
    name: "nr_migrations",
    get: |k| k.nr_migrations,
    set: |k, v| k.nr_migrations = v,
}];

/// The counters' columns for a SELECT list: `, p.a, p.b` with `prefix`
/// "p.".
pub(super) fn select_list(prefix: &str) -> String {
    COUNT_COLUMNS
        .iter()
        .map(|c| format!(", {prefix}{}", c.name))
        .collect()
}

/// The counters' column names for an INSERT, and their placeholders
/// numbered from `first`: (", a, b", ", ?31, ?32").
pub(super) fn insert_list(first: usize) -> (String, String) {
    let names = COUNT_COLUMNS.iter().map(|c| format!(", {}", c.name));
    let marks = (first..)
        .take(COUNT_COLUMNS.len())
        .map(|n| format!(", ?{n}"));
    (names.collect(), marks.collect())
}

/// The values to insert, in [`COUNT_COLUMNS`] order.
pub(super) fn values(k: &KernelCounts) -> Vec<Option<i64>> {
    COUNT_COLUMNS
        .iter()
        .map(|c| (c.get)(k).map(super::i))
        .collect()
}

/// The counters of a row read by name (negative values, never stored,
/// read as None).
pub(super) fn read(n: &Named<'_, '_, '_>) -> rusqlite::Result<KernelCounts> {
    let mut k = KernelCounts::default();
    for c in COUNT_COLUMNS {
        let v: Option<i64> = n.get(c.name)?;
        (c.set)(&mut k, v.and_then(|v| u64::try_from(v).ok()));
    }
    Ok(k)
}

/// The positions of the counters' columns in a statement's result, in
/// [`COUNT_COLUMNS`] order (for [`read_at`]).
pub(super) fn positions(cols: &Columns) -> rusqlite::Result<Vec<usize>> {
    COUNT_COLUMNS
        .iter()
        .map(|c| cols.position(c.name))
        .collect()
}

/// The counters of a row whose columns are at `positions` ([`positions`]),
/// as [`read`] reads them.
pub(super) fn read_at(r: &Row<'_>, positions: &[usize]) -> rusqlite::Result<KernelCounts> {
    let mut k = KernelCounts::default();
    for (c, &at) in COUNT_COLUMNS.iter().zip(positions) {
        let v: Option<i64> = r.get(at)?;
        (c.set)(&mut k, v.and_then(|v| u64::try_from(v).ok()));
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
        let cols: String = COUNT_COLUMNS
            .iter()
            .map(|c| format!(", {} INTEGER", c.name))
            .collect();
        conn.execute_batch(&format!("CREATE TABLE t (id INTEGER{cols})"))
            .unwrap();
        let k = KernelCounts {
            nr_migrations: Some(7),
        };
        let (names, marks) = insert_list(2);
        let counts = values(&k);
        let id: &dyn ToSql = &1;
        conn.execute(
            &format!("INSERT INTO t (id{names}) VALUES (?1{marks})"),
            rusqlite::params_from_iter(with_values(&[id], &counts)),
        )
        .unwrap();
        conn.execute("INSERT INTO t (id) VALUES (2)", []).unwrap();
        let mut stmt = conn
            .prepare(&format!(
                "SELECT t.id{} FROM t ORDER BY id",
                select_list("t.")
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
