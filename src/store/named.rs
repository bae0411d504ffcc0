//! Reading a query's result columns by name ([`Columns`]): the store's
//! wide rows are read through it, so adding or moving a column in a SELECT
//! list never shifts another read.
//!
//! The names are looked up once per statement; reading a row then costs
//! one string comparison per column when the reads follow the SELECT list's
//! order (the position after the last read is tried first), and a hash
//! lookup otherwise. Export and report stream millions of rows, which is
//! why a read does not scan the names.

use std::cell::Cell;
use std::collections::HashMap;

use rusqlite::types::FromSql;
use rusqlite::{Row, Statement};

/// The result columns of one prepared statement, by name.
pub(super) struct Columns {
    names: Vec<String>,
    index: HashMap<String, usize>,
    /// Where the next read is expected (after the last one read).
    next: Cell<usize>,
}

impl Columns {
    /// The columns of `stmt`. Two result columns of the same name are
    /// refused: a query read by name gives each column its own (`AS`).
    pub(super) fn of(stmt: &Statement<'_>) -> rusqlite::Result<Columns> {
        let names: Vec<String> = stmt.column_names().map(str::to_string).collect();
        let mut index = HashMap::with_capacity(names.len());
        for (at, name) in names.iter().enumerate() {
            if index.insert(name.clone(), at).is_some() {
                return Err(rusqlite::Error::InvalidColumnName(format!(
                    "{name} (two result columns have this name; give one an AS)"
                )));
            }
        }
        Ok(Columns {
            names,
            index,
            next: Cell::new(0),
        })
    }

    /// The position of column `name`.
    pub(super) fn at(&self, name: &str) -> rusqlite::Result<usize> {
        let guess = self.next.get();
        let at = if self.names.get(guess).is_some_and(|n| n == name) {
            guess
        } else {
            *self
                .index
                .get(name)
                .ok_or_else(|| rusqlite::Error::InvalidColumnName(name.to_string()))?
        };
        self.next.set(at + 1);
        Ok(at)
    }

    /// Row `r` of this statement, read by column name.
    pub(super) fn row<'c, 'r, 's>(&'c self, r: &'r Row<'s>) -> Named<'c, 'r, 's> {
        Named { cols: self, row: r }
    }
}

/// One row with its statement's [`Columns`].
pub(super) struct Named<'c, 'r, 's> {
    cols: &'c Columns,
    row: &'r Row<'s>,
}

impl Named<'_, '_, '_> {
    /// Column `name`'s value.
    pub(super) fn get<T: FromSql>(&self, name: &str) -> rusqlite::Result<T> {
        self.row.get(self.cols.at(name)?)
    }

    /// Column `name` as a count or duration that is never negative when
    /// stored (a negative one reads as 0).
    pub(super) fn u64(&self, name: &str) -> rusqlite::Result<u64> {
        Ok(self.get::<i64>(name)?.max(0) as u64)
    }

    /// As [`Named::u64`], NULL read as None.
    pub(super) fn opt_u64(&self, name: &str) -> rusqlite::Result<Option<u64>> {
        Ok(self.get::<Option<i64>>(name)?.map(|v| v.max(0) as u64))
    }

    /// Column `name` borrowed (text and blobs without a copy).
    pub(super) fn get_ref(&self, name: &str) -> rusqlite::Result<rusqlite::types::ValueRef<'_>> {
        self.row.get_ref(self.cols.at(name)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn() -> rusqlite::Connection {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE TABLE t (a INTEGER, b TEXT, c INTEGER);
             INSERT INTO t VALUES (1, 'x', -5), (2, 'y', NULL);",
        )
        .unwrap();
        conn
    }

    #[test]
    fn reads_find_columns_by_name_in_any_order() {
        let conn = conn();
        let mut stmt = conn
            .prepare("SELECT t.c, b AS label, a FROM t ORDER BY a")
            .unwrap();
        let cols = Columns::of(&stmt).unwrap();
        let mut rows = stmt.query([]).unwrap();
        let mut got = Vec::new();
        while let Some(r) = rows.next().unwrap() {
            let n = cols.row(r);
            // Out of the SELECT order on purpose: the guess misses.
            let a: i64 = n.get("a").unwrap();
            let c = n.opt_u64("c").unwrap();
            let label: String = n.get("label").unwrap();
            got.push((a, label, c));
        }
        assert_eq!(
            got,
            [(1, "x".to_string(), Some(0)), (2, "y".to_string(), None)]
        );
    }

    #[test]
    fn an_unknown_or_ambiguous_name_is_an_error_naming_it() {
        let conn = conn();
        let stmt = conn.prepare("SELECT a, b FROM t").unwrap();
        let cols = Columns::of(&stmt).unwrap();
        let e = conn
            .query_row("SELECT a, b FROM t", [], |r| cols.row(r).get::<i64>("nope"))
            .unwrap_err();
        assert!(e.to_string().contains("nope"), "{e}");
        let twice = conn.prepare("SELECT t.a, u.a FROM t, t AS u").unwrap();
        let e = Columns::of(&twice).err().expect("two columns named a");
        assert!(e.to_string().contains("a (two result columns"), "{e}");
    }
}
