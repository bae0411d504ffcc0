//! Copying the campaigns of one store into another (`schedlab merge`):
//! every table of the schema, ids remapped, nothing copied twice.
//!
//! Identity across databases: a campaign is its UUID, a run its campaign's
//! UUID and its run key, an environment its fingerprint (a hash of its
//! content). Rows of a run (processes, slices, latency histograms) come
//! with their run. Merging the same source twice therefore adds nothing,
//! and a campaign merged again after it ran further gets only its new runs.
//!
//! [`TABLES`] says how each table is merged; a test fails when the schema
//! has a table it does not name, or a reference between tables it does not
//! remap. Columns are copied by name, whatever they are: a column a later
//! migration adds is carried without touching this file.

use anyhow::{Context, Result, bail};
use rusqlite::types::Value;
use rusqlite::{OptionalExtension, Transaction, params};
use std::collections::HashMap;

use super::Store;

/// How the rows of a table are matched between databases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum How {
    /// `environments`: the same fingerprint is the same row.
    ByFingerprint,
    /// `campaigns`: the same UUID is the same campaign.
    ByUuid,
    /// `runs`: the same run key within the same campaign is the same run.
    ByRunKey,
    /// Rows belonging to one run (`run_id`): copied with a run that is new
    /// to the destination, never on their own.
    OfRun,
}

/// A table of the schema and how it is merged.
#[derive(Debug, Clone, Copy)]
pub struct Table {
    pub name: &'static str,
    pub how: How,
    /// The columns holding ids of other tables, remapped to the
    /// destination's ids: (column, table it refers to).
    pub refs: &'static [(&'static str, &'static str)],
}

/// Every table of the schema, in the order rows are copied (a table after
/// the tables it refers to).
pub const TABLES: &[Table] = &[
    Table {
        name: "environments",
        how: How::ByFingerprint,
        refs: &[],
    },
    Table {
        name: "campaigns",
        how: How::ByUuid,
        refs: &[],
    },
    Table {
        name: "runs",
        how: How::ByRunKey,
        refs: &[
            ("campaign_id", "campaigns"),
            ("environment_id", "environments"),
        ],
    },
    Table {
        name: "processes",
        how: How::OfRun,
        refs: &[("run_id", "runs")],
    },
    Table {
        name: "slices",
        how: How::OfRun,
        refs: &[("run_id", "runs")],
    },
    Table {
        name: "latency",
        how: How::OfRun,
        refs: &[("run_id", "runs")],
    },
    Table {
        name: "trace_captures",
        how: How::OfRun,
        refs: &[("run_id", "runs")],
    },
    Table {
        name: "trace_tasks",
        how: How::OfRun,
        refs: &[("run_id", "runs")],
    },
    Table {
        name: "trace_slices",
        how: How::OfRun,
        refs: &[("run_id", "runs")],
    },
    Table {
        name: "trace_wakeups",
        how: How::OfRun,
        refs: &[("run_id", "runs")],
    },
    Table {
        name: "trace_processes",
        how: How::OfRun,
        refs: &[("run_id", "runs")],
    },
    Table {
        name: "trace_cpus",
        how: How::OfRun,
        refs: &[("run_id", "runs")],
    },
    Table {
        name: "trace_repairs",
        how: How::OfRun,
        refs: &[("run_id", "runs")],
    },
];

/// What one source added to the destination.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MergeCounts {
    /// Campaigns in the source.
    pub campaigns: u64,
    /// Of which new to the destination.
    pub campaigns_added: u64,
    /// Runs in the source.
    pub runs: u64,
    pub runs_added: u64,
    /// Runs already in the destination (same campaign UUID and run key).
    pub runs_present: u64,
    /// Of those, runs whose stored copy differs (status or start time: the
    /// run was retried in one of the two databases); the destination's is
    /// kept.
    pub runs_differing: u64,
    pub environments_added: u64,
    /// Rows added per table, in [`TABLES`] order.
    pub rows_added: Vec<(&'static str, u64)>,
}

/// The column names of a table, in order.
fn columns(conn: &rusqlite::Connection, table: &str) -> Result<Vec<String>> {
    let mut stmt = conn.prepare(&format!("SELECT name FROM pragma_table_info('{table}')"))?;
    let names = stmt
        .query_map([], |r| r.get::<_, String>(0))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(names)
}

/// The tables of a database's schema (not SQLite's own), sorted.
pub fn schema_tables(conn: &rusqlite::Connection) -> Result<Vec<String>> {
    let mut stmt = conn.prepare(
        "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name",
    )?;
    let names = stmt
        .query_map([], |r| r.get::<_, String>(0))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(names)
}

/// Copies rows of one table: `SELECT *` in the source, an INSERT of the
/// same columns (all but the table's own `id`, which the destination
/// assigns) with references remapped.
struct Copier<'a> {
    table: &'static Table,
    /// Source column names, in `SELECT *` order.
    cols: Vec<String>,
    /// Index of the table's own `id` column (left out of the insert).
    id_col: Option<usize>,
    /// (column index, referred table) of the remapped columns.
    refs: Vec<(usize, &'static str)>,
    insert: rusqlite::CachedStatement<'a>,
}

impl<'a> Copier<'a> {
    fn new(src: &Store, tx: &'a Transaction, table: &'static Table) -> Result<Copier<'a>> {
        let cols = columns(&src.conn, table.name)?;
        let dest_cols = columns(tx, table.name)?;
        if cols != dest_cols {
            bail!(
                "table {} has columns {} in the source but {} in the destination",
                table.name,
                cols.join(", "),
                dest_cols.join(", ")
            );
        }
        let id_col = cols.iter().position(|c| c == "id");
        let refs = table
            .refs
            .iter()
            .map(|(c, t)| {
                cols.iter()
                    .position(|x| x == c)
                    .map(|i| (i, *t))
                    .with_context(|| format!("table {} has no column {c}", table.name))
            })
            .collect::<Result<Vec<_>>>()?;
        let kept: Vec<&String> = cols
            .iter()
            .enumerate()
            .filter(|(i, _)| Some(*i) != id_col)
            .map(|(_, c)| c)
            .collect();
        let sql = format!(
            "INSERT INTO {} ({}) VALUES ({})",
            table.name,
            kept.iter()
                .map(|c| format!("\"{c}\""))
                .collect::<Vec<_>>()
                .join(", "),
            vec!["?"; kept.len()].join(", ")
        );
        let insert = tx.prepare_cached(&sql)?;
        Ok(Copier {
            table,
            cols,
            id_col,
            refs,
            insert,
        })
    }

    /// The value of a column of a source row, by name.
    fn get<'v>(&self, row: &'v [Value], name: &str) -> &'v Value {
        let i = self
            .cols
            .iter()
            .position(|c| c == name)
            .expect("known column");
        &row[i]
    }

    /// Insert a source row with its references mapped by `map` (referred
    /// table, source id → destination id); returns the new rowid.
    fn insert(
        &mut self,
        tx: &Transaction,
        row: &[Value],
        map: impl Fn(&str, i64) -> Option<i64>,
    ) -> Result<i64> {
        let mut values: Vec<Value> = row.to_vec();
        for &(i, table) in &self.refs {
            if let Value::Integer(old) = values[i] {
                let new = map(table, old).with_context(|| {
                    format!(
                        "{} row refers to {table} id {old}, which the source lacks",
                        self.table.name
                    )
                })?;
                values[i] = Value::Integer(new);
            }
        }
        if let Some(i) = self.id_col {
            values.remove(i);
        }
        self.insert
            .execute(rusqlite::params_from_iter(values.iter()))
            .with_context(|| format!("copying a row of {}", self.table.name))?;
        Ok(tx.last_insert_rowid())
    }
}

/// Every row of a query, as values.
fn rows(stmt: &mut rusqlite::Statement, params: impl rusqlite::Params) -> Result<Vec<Vec<Value>>> {
    let n = stmt.column_count();
    let mut rows = stmt.query(params)?;
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        out.push(
            (0..n)
                .map(|i| r.get::<_, Value>(i))
                .collect::<rusqlite::Result<Vec<_>>>()?,
        );
    }
    Ok(out)
}

fn table(name: &str) -> &'static Table {
    TABLES
        .iter()
        .find(|t| t.name == name)
        .expect("a table of TABLES")
}

/// One merge under way: the copiers and statements of both databases, the
/// environments mapped so far, and what was counted and added.
struct Merger<'a> {
    tx: &'a Transaction<'a>,
    env_copier: Copier<'a>,
    campaign_copier: Copier<'a>,
    run_copier: Copier<'a>,
    /// The tables of a run's rows, with the source's SELECT of a run's.
    children: Vec<(Copier<'a>, rusqlite::Statement<'a>)>,
    src_env: rusqlite::Statement<'a>,
    dest_env: rusqlite::Statement<'a>,
    dest_campaign: rusqlite::Statement<'a>,
    dest_run: rusqlite::Statement<'a>,
    /// Source environment id → destination id.
    env_map: HashMap<i64, i64>,
    counts: MergeCounts,
    added: HashMap<&'static str, u64>,
}

impl<'a> Merger<'a> {
    fn new(src: &'a Store, tx: &'a Transaction<'a>) -> Result<Merger<'a>> {
        let env_copier = Copier::new(src, tx, table("environments"))?;
        let campaign_copier = Copier::new(src, tx, table("campaigns"))?;
        let run_copier = Copier::new(src, tx, table("runs"))?;
        let children: Vec<(Copier, rusqlite::Statement)> = TABLES
            .iter()
            .filter(|t| t.how == How::OfRun)
            .map(|t| {
                let c = Copier::new(src, tx, t)?;
                let select = src
                    .conn
                    .prepare(&format!("SELECT * FROM {} WHERE run_id = ?1", t.name))?;
                Ok((c, select))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Merger {
            tx,
            env_copier,
            campaign_copier,
            run_copier,
            children,
            src_env: src
                .conn
                .prepare("SELECT * FROM environments WHERE id = ?1")?,
            dest_env: tx.prepare("SELECT id FROM environments WHERE fingerprint = ?1")?,
            dest_campaign: tx.prepare("SELECT id, identity FROM campaigns WHERE uuid = ?1")?,
            dest_run: tx.prepare(
                "SELECT id, status, started_unix_ms FROM runs WHERE campaign_id = ?1 AND run_key = ?2",
            )?,
            env_map: HashMap::new(),
            counts: MergeCounts::default(),
            added: HashMap::new(),
        })
    }

    /// A campaign of the source, found in the destination by UUID (with
    /// the same spec) or added: its UUID, source id and destination id.
    fn campaign(&mut self, c: &[Value]) -> Result<(String, i64, i64)> {
        let uuid = match self.campaign_copier.get(c, "uuid") {
            Value::Text(t) => t.clone(),
            other => bail!("a campaign of the source has no UUID ({other:?})"),
        };
        let identity = self.campaign_copier.get(c, "identity").clone();
        let src_id = match self.campaign_copier.get(c, "id") {
            Value::Integer(i) => *i,
            _ => bail!("campaign {uuid} has no id"),
        };
        let existing: Option<(i64, Value)> = self
            .dest_campaign
            .query_row([&uuid], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?;
        let dest_id = match existing {
            Some((id, dest_identity)) => {
                if dest_identity != identity {
                    bail!(
                        "campaign {uuid} is in both databases with different specs (source campaign \
                         {src_id}, destination campaign {id}); nothing of this source was merged"
                    );
                }
                id
            }
            None => {
                self.counts.campaigns_added += 1;
                *self.added.entry("campaigns").or_default() += 1;
                self.campaign_copier.insert(self.tx, c, |_, _| None)?
            }
        };
        Ok((uuid, src_id, dest_id))
    }

    /// A run of campaign `uuid` (destination id `dest_id`): counted when
    /// the destination has it, else copied with its environment and rows.
    fn run(&mut self, run: &[Value], uuid: &str, dest_id: i64) -> Result<()> {
        let key = self.run_copier.get(run, "run_key").clone();
        let present: Option<(i64, Value, Value)> = self
            .dest_run
            .query_row(params![dest_id, key], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
            .optional()?;
        if let Some((_, status, started)) = present {
            self.counts.runs_present += 1;
            if &status != self.run_copier.get(run, "status")
                || &started != self.run_copier.get(run, "started_unix_ms")
            {
                self.counts.runs_differing += 1;
            }
            return Ok(());
        }
        // The run's environment, found by fingerprint or added.
        let env_src = match self.run_copier.get(run, "environment_id") {
            Value::Integer(i) => *i,
            other => bail!("a run of campaign {uuid} has no environment ({other:?})"),
        };
        self.environment(env_src, uuid)?;
        let src_run_id = match self.run_copier.get(run, "id") {
            Value::Integer(i) => *i,
            _ => bail!("a run of campaign {uuid} has no id"),
        };
        let env_map = &self.env_map;
        let new_run = self.run_copier.insert(self.tx, run, |t, old| match t {
            "campaigns" => Some(dest_id),
            "environments" => env_map.get(&old).copied(),
            _ => None,
        })?;
        self.counts.runs_added += 1;
        *self.added.entry("runs").or_default() += 1;
        for (copier, select) in &mut self.children {
            for row in rows(select, [src_run_id])? {
                copier.insert(self.tx, &row, |t, _| (t == "runs").then_some(new_run))?;
                *self.added.entry(copier.table.name).or_default() += 1;
            }
        }
        Ok(())
    }

    /// Map source environment `env_src` (of a run of campaign `uuid`) to
    /// the destination's of the same fingerprint, adding it if none.
    fn environment(&mut self, env_src: i64, uuid: &str) -> Result<()> {
        let std::collections::hash_map::Entry::Vacant(e) = self.env_map.entry(env_src) else {
            return Ok(());
        };
        let env_row = rows(&mut self.src_env, [env_src])?.pop().with_context(|| {
            format!(
                "a run of campaign {uuid} refers to environment {env_src}, which the source lacks"
            )
        })?;
        let fingerprint = self.env_copier.get(&env_row, "fingerprint").clone();
        let id = match self
            .dest_env
            .query_row([fingerprint], |r| r.get::<_, i64>(0))
            .optional()?
        {
            Some(id) => id,
            None => {
                self.counts.environments_added += 1;
                *self.added.entry("environments").or_default() += 1;
                self.env_copier.insert(self.tx, &env_row, |_, _| None)?
            }
        };
        e.insert(id);
        Ok(())
    }
}

impl Store {
    /// Copy every campaign of `src` into this store in one transaction:
    /// all of it or, on any error, nothing. `progress(runs done, runs in
    /// the source)` is called as runs are copied.
    pub fn merge_from(
        &mut self,
        src: &Store,
        mut progress: impl FnMut(u64, u64),
    ) -> Result<MergeCounts> {
        let src_tables = schema_tables(&src.conn)?;
        if let Some(t) = src_tables
            .iter()
            .find(|t| !TABLES.iter().any(|x| x.name == t.as_str()))
        {
            bail!("the source has a table this schedlab cannot merge: {t}");
        }
        let tx = self.conn.transaction()?;
        let total_runs: i64 = src
            .conn
            .query_row("SELECT COUNT(*) FROM runs", [], |r| r.get(0))?;
        let (mut counts, added) = {
            let mut m = Merger::new(src, &tx)?;
            m.counts.runs = total_runs as u64;
            let mut src_runs = src
                .conn
                .prepare("SELECT * FROM runs WHERE campaign_id = ?1 ORDER BY id")?;
            let mut src_campaigns = src.conn.prepare("SELECT * FROM campaigns ORDER BY id")?;
            let campaigns = rows(&mut src_campaigns, [])?;
            m.counts.campaigns = campaigns.len() as u64;
            let mut done = 0u64;
            for c in &campaigns {
                let (uuid, src_id, dest_id) = m.campaign(c)?;
                // Streamed: a campaign's runs are never all held at once.
                let width = src_runs.column_count();
                let mut run_rows = src_runs.query([src_id])?;
                while let Some(r) = run_rows.next()? {
                    let run = (0..width)
                        .map(|i| r.get::<_, Value>(i))
                        .collect::<rusqlite::Result<Vec<_>>>()?;
                    done += 1;
                    progress(done, m.counts.runs);
                    m.run(&run, &uuid, dest_id)?;
                }
            }
            (m.counts, m.added)
        };
        let dangling: Option<String> = tx
            .query_row("PRAGMA foreign_key_check", [], |r| r.get(0))
            .optional()?;
        if let Some(t) = dangling {
            bail!("merging would leave rows of {t} referring to missing rows; nothing was merged");
        }
        tx.commit().context("committing the merge")?;
        counts.rows_added = TABLES
            .iter()
            .map(|t| (t.name, added.get(t.name).copied().unwrap_or(0)))
            .collect();
        Ok(counts)
    }

    /// Rows per table of [`TABLES`], in that order.
    pub fn table_counts(&self) -> Result<Vec<(&'static str, u64)>> {
        TABLES
            .iter()
            .map(|t| {
                let n: i64 =
                    self.conn
                        .query_row(&format!("SELECT COUNT(*) FROM {}", t.name), [], |r| {
                            r.get(0)
                        })?;
                Ok((t.name, n as u64))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every table of the schema is merged, and every reference between
    /// tables (a foreign key) is remapped: a migration that adds a table or
    /// a reference fails here until `TABLES` says how to merge it.
    #[test]
    fn every_table_and_reference_of_the_schema_is_handled() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("t.db")).unwrap();
        let tables = schema_tables(&store.conn).unwrap();
        let mut handled: Vec<String> = TABLES.iter().map(|t| t.name.to_string()).collect();
        handled.sort();
        assert_eq!(tables, handled, "tables of the schema vs merge::TABLES");
        for t in TABLES {
            let mut stmt = store
                .conn
                .prepare(&format!(
                    "SELECT \"from\", \"table\" FROM pragma_foreign_key_list('{}')",
                    t.name
                ))
                .unwrap();
            let fks: Vec<(String, String)> = stmt
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
                .unwrap()
                .collect::<rusqlite::Result<_>>()
                .unwrap();
            for (col, target) in &fks {
                assert!(
                    t.refs.iter().any(|(c, x)| c == col && x == target),
                    "{}.{col} refers to {target} but merge does not remap it",
                    t.name
                );
                let pos = TABLES.iter().position(|x| x.name == target).unwrap();
                let me = TABLES.iter().position(|x| x.name == t.name).unwrap();
                assert!(
                    pos < me,
                    "{} is merged before {target}, which it refers to",
                    t.name
                );
            }
            for (c, x) in t.refs {
                assert!(
                    fks.iter().any(|(col, target)| col == c && target == x),
                    "{}.{c} is remapped but is not a reference to {x}",
                    t.name
                );
            }
            // A table copied by run has a run_id; the others their own id.
            let cols = columns(&store.conn, t.name).unwrap();
            match t.how {
                How::OfRun => assert!(cols.contains(&"run_id".to_string()), "{}", t.name),
                _ => assert!(cols.contains(&"id".to_string()), "{}", t.name),
            }
        }
    }
}
