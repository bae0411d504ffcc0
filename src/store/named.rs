//! Reading a query's result columns by name ([`Columns`]): the store's
//! wide rows are read through it, so adding or moving a column in a SELECT
//! list never shifts another read.
//!
//! Export and report stream millions of rows, so a read must not look its
//! name up each time: every row of a statement is read by the same code,
//! asking for the same names in the same order, so [`Columns`] remembers
//! the position the k-th read of the last row found, keyed by the name's
//! address. A read is then one comparison of two addresses; the first row,
//! or a read that differs from the last row's, looks its name up in a hash
//! map. The names are `&'static str`: one address never names two texts.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;

use rusqlite::types::FromSql;
use rusqlite::{Row, Statement};

/// The result columns of one prepared statement, by name.
pub(super) struct Columns {
    index: HashMap<String, usize>,
    /// The k-th read of the last row: its name's (address, length) and
    /// the position found.
    seen: RefCell<Vec<((usize, usize), usize)>>,
    /// The number of reads of the current row so far.
    reads: Cell<usize>,
}

impl Columns {
    /// The columns of `stmt`. Two result columns of the same name are
    /// refused: a query read by name gives each column its own (`AS`).
    pub(super) fn of(stmt: &Statement<'_>) -> rusqlite::Result<Columns> {
        let mut index = HashMap::with_capacity(stmt.column_count());
        for (at, name) in stmt.column_names().enumerate() {
            if index.insert(name.to_string(), at).is_some() {
                return Err(rusqlite::Error::InvalidColumnName(format!(
                    "{name} (two result columns have this name; give one an AS)"
                )));
            }
        }
        Ok(Columns {
            index,
            seen: RefCell::new(Vec::new()),
            reads: Cell::new(0),
        })
    }

    /// The position of column `name`, read as the current row's next read.
    pub(super) fn at(&self, name: &'static str) -> rusqlite::Result<usize> {
        let k = self.reads.get();
        self.reads.set(k + 1);
        let key = (name.as_ptr() as usize, name.len());
        let mut seen = self.seen.borrow_mut();
        if let Some(&(was, at)) = seen.get(k)
            && was == key
        {
            return Ok(at);
        }
        let at = *self
            .index
            .get(name)
            .ok_or_else(|| rusqlite::Error::InvalidColumnName(name.to_string()))?;
        // Reads are counted from 0 in each row: k is at most seen's length.
        match seen.get_mut(k) {
            Some(slot) => *slot = (key, at),
            None => seen.push((key, at)),
        }
        Ok(at)
    }

    /// The position of column `name`, looked up once: a reader of many
    /// rows that resolves its columns before the first row
    /// ([`super::analysis`]'s process rows) reads each value by position.
    pub(super) fn position(&self, name: &str) -> rusqlite::Result<usize> {
        self.index
            .get(name)
            .copied()
            .ok_or_else(|| rusqlite::Error::InvalidColumnName(name.to_string()))
    }

    /// Row `r` of this statement, read by column name.
    pub(super) fn row<'c, 'r, 's>(&'c self, r: &'r Row<'s>) -> Named<'c, 'r, 's> {
        self.reads.set(0);
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
    pub(super) fn get<T: FromSql>(&self, name: &'static str) -> rusqlite::Result<T> {
        self.row.get(self.cols.at(name)?)
    }

    /// Column `name` as a count or duration that is never negative when
    /// stored (a negative one reads as 0).
    pub(super) fn u64(&self, name: &'static str) -> rusqlite::Result<u64> {
        Ok(self.get::<i64>(name)?.max(0) as u64)
    }

    /// As [`Named::u64`], NULL read as None.
    pub(super) fn opt_u64(&self, name: &'static str) -> rusqlite::Result<Option<u64>> {
        Ok(self.get::<Option<i64>>(name)?.map(|v| v.max(0) as u64))
    }

    /// Column `name` borrowed (text and blobs without a copy).
    pub(super) fn get_ref(
        &self,
        name: &'static str,
    ) -> rusqlite::Result<rusqlite::types::ValueRef<'_>> {
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
            // Out of the SELECT order, and in another order in the
            // second row: the remembered positions miss there.
            let a: i64 = n.get("a").unwrap();
            let (c, label) = if a == 1 {
                let c = n.opt_u64("c").unwrap();
                (c, n.get::<String>("label").unwrap())
            } else {
                let label = n.get::<String>("label").unwrap();
                (n.opt_u64("c").unwrap(), label)
            };
            got.push((a, label, c));
        }
        assert_eq!(
            got,
            [(1, "x".to_string(), Some(0)), (2, "y".to_string(), None)]
        );
    }

    #[test]
    fn rows_read_alike_find_the_same_positions() {
        let conn = conn();
        conn.execute_batch("INSERT INTO t SELECT a + 2, b, c FROM t")
            .unwrap();
        let mut stmt = conn.prepare("SELECT b, c, a FROM t ORDER BY a").unwrap();
        let cols = Columns::of(&stmt).unwrap();
        let rows: Vec<(i64, String)> = stmt
            .query_map([], |r| {
                let n = cols.row(r);
                Ok((n.get("a")?, n.get("b")?))
            })
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        let a: Vec<i64> = rows.iter().map(|r| r.0).collect();
        assert_eq!(a, [1, 2, 3, 4]);
        assert_eq!(rows[3].1, "y");
        assert_eq!(cols.seen.borrow().len(), 2, "two reads a row remembered");
    }

    #[test]
    fn positions_are_found_by_name_once() {
        let conn = conn();
        let stmt = conn.prepare("SELECT c, a AS first, b FROM t").unwrap();
        let cols = Columns::of(&stmt).unwrap();
        assert_eq!(cols.position("first").unwrap(), 1);
        assert_eq!(cols.position("b").unwrap(), 2);
        let e = cols.position("a").unwrap_err();
        assert!(e.to_string().contains('a'), "{e}");
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
