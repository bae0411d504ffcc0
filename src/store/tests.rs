//! The unit tests of the store (`super`), in their own file.

use super::export::export_sql;
use super::*;
use crate::fields::Field;
use crate::record::ProcessUsage;

fn file_bytes(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap()
}

/// A process whose switches, faults and peak memory the kernel did
/// not give is stored with them NULL and read back as None by every
/// reader (export rows, process records, the report's rows) and
/// copied as NULL by `merge`; a process that has them keeps them, 0
/// included.
#[test]
fn figures_not_given_round_trip_as_null() {
    use crate::testing::synth::{synthetic_env, synthetic_process, synthetic_record};
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("t.db")).unwrap();
    let toml = "name = \"t\"\n[matrix]\npolicy = [\"other\"]\nworkload = [\"pi\"]\n";
    let spec = crate::spec::load(toml, "t", &[]).unwrap();
    let c = store.create_campaign(&spec, toml, &[], 1, 1).unwrap();
    let mut run = crate::plan::expand(&spec, 1).swap_remove(0);
    run.processes = 2;
    let sched = crate::policy::ProcSched::fair(crate::policy::Policy::Other, 0);
    let mut given = synthetic_process(0, sched, 2_000_000, 1000);
    given.kernel.set(Field::Nvcsw, Some(0));
    let mut not_given = synthetic_process(1, sched, 2_000_000, 1000);
    not_given.usage = ProcessUsage {
        utime_us: 1000,
        stime_us: 20,
        maxrss_kb: None,
    };
    for f in [Field::Nvcsw, Field::Nivcsw, Field::Minflt, Field::Majflt] {
        not_given.kernel.set(f, None);
    }
    let rec = synthetic_record(
        &run,
        &synthetic_env(2),
        vec![0, 1],
        0,
        None,
        vec![given.clone(), not_given.clone()],
    );
    let id = store.insert_run(c.id, &rec).unwrap();
    let nulls: i64 = store
            .conn
            .query_row(
                "SELECT count(*) FROM processes WHERE process_index = 1 AND nvcsw IS NULL
                     AND nivcsw IS NULL AND minflt IS NULL AND majflt IS NULL AND maxrss_kb IS NULL",
                [],
                |r| r.get(0),
            )
            .unwrap();
    assert_eq!(nulls, 1);
    let rows = store.export_rows(None).unwrap();
    assert_eq!(rows[0].usage, Some(given.usage));
    assert_eq!(rows[1].usage, Some(not_given.usage));
    assert_eq!(
        (rows[0].kernel, rows[1].kernel),
        (given.kernel, not_given.kernel)
    );
    let recs = store.report_process_records(&[id]).unwrap();
    assert_eq!(recs[0].1.usage, given.usage);
    assert_eq!(recs[1].1.usage, not_given.usage);
    assert_eq!(
        (recs[0].1.kernel, recs[1].1.kernel),
        (given.kernel, not_given.kernel)
    );
    let mut seen = Vec::new();
    let switches = |k: &crate::fields::MetricFields| (k.get(Field::Nvcsw), k.get(Field::Nivcsw));
    store
        .for_each_report_process(&[c.id], |p| seen.push(switches(&p.kernel)))
        .unwrap();
    assert_eq!(seen, [(Some(0), Some(0)), (None, None)]);
    // `merge` copies the NULLs.
    let mut merged = Store::open(&dir.path().join("m.db")).unwrap();
    merged.merge_from(&store, |_, _| {}).unwrap();
    let rows = merged.export_rows(None).unwrap();
    assert_eq!(rows[1].usage, Some(not_given.usage));
    assert_eq!(rows[1].kernel, not_given.kernel);
}

#[test]
fn opening_read_only_never_writes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let mut store = Store::open(&path).unwrap();
    crate::testing::synth::create(&mut store, &crate::testing::synth::SynthConfig::small())
        .unwrap();
    // Rollback journal mode: opening for writing would switch it to WAL.
    let mode: String = store
        .conn
        .query_row("PRAGMA journal_mode = DELETE", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "delete");
    drop(store);
    let before = file_bytes(&path);
    let mut ro = Store::open_existing(&path).unwrap();
    assert!(!ro.campaigns().unwrap().is_empty());
    assert!(ro.forget_runs(1, &[RunStatus::Ok]).is_err(), "writes fail");
    drop(ro);
    assert!(file_bytes(&path) == before, "the file is unchanged");
}

#[test]
fn reads_beside_a_writer_in_wal_mode() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let mut writer = Store::open(&path).unwrap();
    crate::testing::synth::create(&mut writer, &crate::testing::synth::SynthConfig::small())
        .unwrap();
    let ro = Store::open_existing(&path).unwrap();
    assert!(!ro.finished_keys(1).unwrap().is_empty());
    let all = [
        RunStatus::Ok,
        RunStatus::Failed,
        RunStatus::TimedOut,
        RunStatus::Skipped,
    ];
    writer.forget_runs(1, &all).unwrap();
    assert!(
        ro.finished_keys(1).unwrap().is_empty(),
        "sees later commits"
    );
}

#[test]
fn read_only_open_upgrades_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.db");
    std::fs::write(&empty, b"").unwrap();
    let e = Store::open_existing(&empty).err().unwrap();
    assert!(
        format!("{e:#}").contains("not a schedlab database"),
        "{e:#}"
    );
    assert_eq!(std::fs::metadata(&empty).unwrap().len(), 0);
    let e = Store::open_existing(&dir.path().join("none.db"))
        .err()
        .unwrap();
    assert!(format!("{e:#}").contains("does not exist"), "{e:#}");
    let future = dir.path().join("future.db");
    Store::open(&future)
        .unwrap()
        .conn
        .pragma_update(None, "user_version", 99)
        .unwrap();
    let e = Store::open_existing(&future).err().unwrap();
    assert!(format!("{e:#}").contains("newer"), "{e:#}");
}

#[test]
fn immutable_uris_encode_odd_names() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a b?c#d%e.db");
    let mut store = Store::open(&path).unwrap();
    crate::testing::synth::create(&mut store, &crate::testing::synth::SynthConfig::small())
        .unwrap();
    drop(store);
    let uri = immutable_uri(&path);
    assert!(uri.starts_with("file:///") && uri.ends_with("a%20b%3Fc%23d%25e.db?immutable=1"));
    let conn = Connection::open_with_flags(
        &uri,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI,
    )
    .unwrap();
    let n: i64 = conn
        .query_row("SELECT COUNT(*) FROM campaigns", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 1);
}

#[test]
fn the_export_query_streams_without_sorting() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("t.db")).unwrap();
    let plan: Vec<String> = store
        .conn
        .prepare(&format!("EXPLAIN QUERY PLAN {}", export_sql()))
        .unwrap()
        .query_map([None::<i64>], |r| r.get::<_, String>(3))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    assert!(
        plan.iter().all(|step| !step.contains("TEMP B-TREE")),
        "{plan:?}"
    );
}

/// An insert's placeholders are numbered from its column list: the runs'
/// 31 columns, the processes' 24 fixed ones and the registry's fields.
#[test]
fn an_insert_numbers_one_placeholder_per_column() {
    assert_eq!(
        insert_sql("t", &["a", "b", "c"]),
        "INSERT INTO t (a, b, c) VALUES (?1, ?2, ?3)"
    );
    assert!(RUN_INSERT.ends_with(", machine) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28, ?29, ?30, ?31)"), "{}", *RUN_INSERT);
    let fields = crate::fields::FIELD_COUNT;
    let last = format!("?{})", PROCESS_COLUMNS.len() + fields);
    assert!(PROCESS_INSERT.ends_with(&last), "{}", *PROCESS_INSERT);
    assert!(
        PROCESS_INSERT.contains("slice_ns, nr_migrations,"),
        "{}",
        *PROCESS_INSERT
    );
    let conn = migrated();
    for (sql, columns) in [
        (&*CAMPAIGN_INSERT, CAMPAIGN_INSERT_COLUMNS),
        (&*ENVIRONMENT_INSERT, ENVIRONMENT_COLUMNS),
        (&*LATENCY_INSERT, LATENCY_COLUMNS),
        (&*SLICE_INSERT, SLICE_COLUMNS),
    ] {
        assert_prepares_with_a_placeholder_per_column(&conn, sql, columns);
    }
    assert!(
        ENVIRONMENT_INSERT.ends_with(", json, host_id, hostname) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)"),
        "{}",
        *ENVIRONMENT_INSERT
    );
}

/// A connection with every migration applied.
pub(super) fn migrated() -> rusqlite::Connection {
    let conn = rusqlite::Connection::open_in_memory().unwrap();
    for m in MIGRATIONS {
        conn.execute_batch(m).unwrap();
    }
    conn
}

/// `sql` prepares against the schema (each column exists) and has one
/// placeholder per column, the last numbered as their count.
pub(super) fn assert_prepares_with_a_placeholder_per_column(
    conn: &rusqlite::Connection,
    sql: &str,
    columns: &[&str],
) {
    let stmt = conn.prepare(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    assert_eq!(stmt.parameter_count(), columns.len(), "{sql}");
    assert!(sql.ends_with(&format!("?{})", columns.len())), "{sql}");
    assert!(sql.contains(&format!("({})", columns.join(", "))), "{sql}");
}
