//! Many hosts in one store: campaign UUIDs and host ids, `schedlab merge`
//! (idempotent, hosts kept apart, unreadable sources refused, sources never
//! written), the migration of a database written before host ids, `report
//! --by host|kernel` on a merged store, and the Parquet export read back.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::{schedlab, text};
use schedlab::store::{Host, MIGRATIONS, Store};
use schedlab::testing::synth::{self, SynthConfig};

/// A small synthetic campaign "made" on `host` (hostname, host id).
fn host_db(dir: &Path, file: &str, host: (&str, &str)) -> PathBuf {
    let path = dir.join(file);
    let mut store = Store::open(&path).unwrap();
    let cfg = SynthConfig {
        repetitions: 3,
        specials: Vec::new(),
        host: Some((host.0.to_string(), host.1.to_string())),
        ..SynthConfig::small()
    };
    synth::create(&mut store, &cfg).unwrap();
    path
}

const HOST_A: (&str, &str) = ("alpha", "0a0a0a0a-0000-8000-8000-00000000000a");
const HOST_B: (&str, &str) = ("beta", "0b0b0b0b-0000-8000-8000-00000000000b");

fn counts(db: &Path) -> Vec<(&'static str, u64)> {
    Store::open_existing(db).unwrap().table_counts().unwrap()
}

fn count(db: &Path, table: &str) -> u64 {
    counts(db).into_iter().find(|(t, _)| *t == table).unwrap().1
}

fn merge(dir: &Path, sources: &[&Path], output: &Path) -> Output {
    let mut args = vec!["merge".to_string()];
    args.extend(sources.iter().map(|s| s.display().to_string()));
    args.extend(["-o".to_string(), output.display().to_string()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    schedlab(&args, dir)
}

/// The bytes of a database and its WAL, to show it was not written.
fn snapshot(db: &Path) -> Vec<Vec<u8>> {
    ["", "-wal"]
        .iter()
        .map(|s| std::fs::read(format!("{}{s}", db.display())).unwrap_or_default())
        .collect()
}

#[test]
fn merging_twice_adds_nothing_and_two_hosts_of_one_spec_stay_two() {
    let dir = tempfile::tempdir().unwrap();
    let a = host_db(dir.path(), "a.db", HOST_A);
    let b = host_db(dir.path(), "b.db", HOST_B);
    let fleet = dir.path().join("fleet.db");
    let (before_a, before_b) = (snapshot(&a), snapshot(&b));
    let one = counts(&a);

    let o = merge(dir.path(), &[&a, &b], &fleet);
    assert!(o.status.success(), "{}", text(&o));
    let merged = counts(&fleet);
    for ((t, n1), (t2, n2)) in one.iter().zip(&merged) {
        assert_eq!(t, t2);
        assert_eq!(
            *n2,
            2 * n1,
            "{t}: two hosts' rows (the environments differ by host)"
        );
    }
    // Untraced pi runs have no WRR slices, latency or trace rows.
    assert!(
        one.iter()
            .all(|(t, n)| *n > 0 || *t == "slices" || *t == "latency" || t.starts_with("trace_"))
    );

    // The same spec from two hosts: two campaigns, each its source's UUID
    // and host.
    let store = Store::open_existing(&fleet).unwrap();
    let cs = store.campaigns().unwrap();
    assert_eq!(cs.len(), 2);
    let ua = &Store::open_existing(&a).unwrap().campaigns().unwrap()[0];
    let ub = &Store::open_existing(&b).unwrap().campaigns().unwrap()[0];
    assert_ne!(ua.campaign.uuid, ub.campaign.uuid);
    assert_eq!(cs[0].campaign.uuid, ua.campaign.uuid);
    assert_eq!(cs[1].campaign.uuid, ub.campaign.uuid);
    assert_eq!(cs[0].campaign.host_id.as_deref(), Some(HOST_A.1));
    assert_eq!(cs[1].campaign.hostname.as_deref(), Some(HOST_B.0));
    assert_eq!(cs[0].total_runs(), ua.total_runs());
    assert_eq!(cs[1].total_runs(), ub.total_runs());
    // Ids are remapped: every run's processes came along with it.
    let rows = store.export_rows(Some(cs[1].campaign.id)).unwrap();
    assert!(rows.iter().all(|r| r.hostname.as_deref() == Some("beta")));
    assert_eq!(
        rows.len() as u64,
        count(&b, "processes"),
        "one export row per process"
    );
    drop(store);

    // Again, each alone and both: nothing added.
    for sources in [vec![a.as_path()], vec![&b, &a], vec![&a, &a]] {
        let o = merge(dir.path(), &sources, &fleet);
        assert!(o.status.success(), "{}", text(&o));
        assert!(text(&o).contains(" 0 runs added"), "{}", text(&o));
        assert_eq!(counts(&fleet), merged);
    }
    assert!(
        snapshot(&a) == before_a && snapshot(&b) == before_b,
        "sources unchanged"
    );
    let err = merge(dir.path(), &[&a, &fleet], &fleet);
    assert!(!err.status.success());
    assert!(
        text(&err).contains("both a source and the destination"),
        "{}",
        text(&err)
    );

    // Resuming on each host finds that host's campaign, never the other's.
    let spec = schedlab::spec::load(&spec_toml(&fleet), "synthetic", &[]).unwrap();
    let store = Store::open_existing(&fleet).unwrap();
    let host = |h: (&str, &str)| Host {
        id: Some(h.1.to_string()),
        name: h.0.to_string(),
    };
    assert_eq!(
        store
            .find_campaign(&spec, &host(HOST_A))
            .unwrap()
            .unwrap()
            .id,
        1
    );
    assert_eq!(
        store
            .find_campaign(&spec, &host(HOST_B))
            .unwrap()
            .unwrap()
            .id,
        2
    );
    let other = ("gamma", "0c0c0c0c-0000-8000-8000-00000000000c");
    assert_eq!(store.find_campaign(&spec, &host(other)).unwrap(), None);
}

/// The spec text of campaign 1.
fn spec_toml(db: &Path) -> String {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.query_row("SELECT spec_toml FROM campaigns WHERE id = 1", [], |r| {
        r.get(0)
    })
    .unwrap()
}

#[test]
fn a_campaign_merged_again_after_it_ran_further_gets_only_its_new_runs() {
    let dir = tempfile::tempdir().unwrap();
    let full = host_db(dir.path(), "full.db", HOST_A);
    let partial = dir.path().join("partial.db");
    std::fs::copy(&full, &partial).unwrap();
    {
        let conn = rusqlite::Connection::open(&partial).unwrap();
        conn.execute_batch(
            "PRAGMA foreign_keys = ON; DELETE FROM runs WHERE seq % 2 = 1;
             UPDATE runs SET started_unix_ms = started_unix_ms + 1 WHERE seq = 0;",
        )
        .unwrap();
    }
    let fleet = dir.path().join("fleet.db");
    let o = merge(dir.path(), &[&partial], &fleet);
    assert!(o.status.success(), "{}", text(&o));
    let half = count(&fleet, "runs");
    assert!(half > 0 && half < count(&full, "runs"));
    let o = merge(dir.path(), &[&full], &fleet);
    assert!(o.status.success(), "{}", text(&o));
    let added = count(&full, "runs") - half;
    assert!(
        text(&o).contains(&format!(
            "{added} runs added, {half} already there (1 of them differ"
        )),
        "{}",
        text(&o)
    );

    // A UUID held by campaigns of different specs: refused, nothing merged.
    let forged = dir.path().join("forged.db");
    std::fs::copy(&full, &forged).unwrap();
    {
        let conn = rusqlite::Connection::open(&forged).unwrap();
        conn.execute_batch(
            "UPDATE campaigns SET identity = 'another spec'; DELETE FROM runs WHERE seq > 3;",
        )
        .unwrap();
    }
    let before = counts(&fleet);
    let o = merge(dir.path(), &[&forged], &fleet);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("different specs") && text(&o).contains("forged.db"),
        "{}",
        text(&o)
    );
    assert_eq!(counts(&fleet), before);
    assert_eq!(counts(&fleet), counts(&full));
}

#[test]
fn merge_refuses_what_it_cannot_read_naming_the_file_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let good = host_db(dir.path(), "good.db", HOST_A);
    let future = dir.path().join("future.db");
    {
        let store = Store::open(&future).unwrap();
        drop(store);
        let conn = rusqlite::Connection::open(&future).unwrap();
        conn.pragma_update(None, "user_version", 999).unwrap();
    }
    let notes = dir.path().join("notes.db");
    std::fs::write(
        &notes,
        "not a database at all, just some text\n".repeat(200),
    )
    .unwrap();
    let fleet = dir.path().join("fleet.db");
    for (bad, why) in [(&future, "newer than this schedlab"), (&notes, "notes.db")] {
        let o = merge(dir.path(), &[&good, bad], &fleet);
        assert!(!o.status.success());
        let t = text(&o);
        assert!(t.contains("cannot merge") && t.contains(why), "{t}");
        assert!(
            t.contains(&bad.file_name().unwrap().to_string_lossy().to_string()),
            "{t}"
        );
        assert!(
            !fleet.exists(),
            "nothing written when a source is unreadable"
        );
    }
}

/// A database as schedlab wrote it at schema version 4 (before campaign
/// UUIDs and host ids): one campaign of `spec` with two runs, their
/// processes, a slice and a latency histogram, in one environment of host
/// "oldhost".
fn schema_4_db(path: &Path, spec: &schedlab::spec::Spec, toml: &str) {
    let conn = rusqlite::Connection::open(path).unwrap();
    for m in &MIGRATIONS[..4] {
        conn.execute_batch(m).unwrap();
    }
    conn.pragma_update(None, "user_version", 4).unwrap();
    let identity = schedlab::store::identity(spec);
    conn.execute(
        "INSERT INTO campaigns (id, name, identity, seed, scale, planned_runs, spec_json, spec_toml,
             created_unix_ms, schedlab_version)
         VALUES (1, 'old', ?1, 12345, 1.0, 2, ?2, ?3, 1700000000000, '0.1.0')",
        rusqlite::params![identity, serde_json::to_string(spec).unwrap(), toml],
    )
    .unwrap();
    conn.execute_batch(
        r#"
        INSERT INTO environments (id, fingerprint, kernel_release, cpu_model, cpus_online, preempt_model,
            cgroup_version, virtualization, schedlab_version, json)
        VALUES (1, 'f1', '6.1.0', 'cpu', 2, 'none', 'v2', 'none', '0.1.0', '{"hostname": "oldhost"}');
        INSERT INTO runs (id, campaign_id, run_key, seq, policy, workload, workload_kind, processes,
            priority_mode, cpus, cpu_list, rep, status, started_unix_ms, environment_id, resolved_json)
        VALUES (1, 1, 'k1', 0, 'other', 'pi', 'pi', 1, 'uniform', '0', '0', 1, 'ok', 1700000001000, 1, '{}'),
               (2, 1, 'k2', 1, 'other', 'pi', 'pi', 1, 'uniform', '0', '0', 2, 'ok', 1700000002000, 1, '{}');
        INSERT INTO processes (run_id, process_index, pid, policy, wall_ns, utime_us, stime_us, nvcsw,
            nivcsw, minflt, majflt, maxrss_kb, work_unit, figures_json, exit, ok, weight, slice_ns)
        VALUES (1, 0, 100, 'other', 5, 3, 0, 1, 0, 0, 0, 10, 'iterations', '{}', 'exit code 0', 1, NULL, NULL),
               (2, 0, 101, 'other', 6, 4, 0, 1, 0, 0, 0, 10, 'iterations', '{}', 'exit code 0', 1, NULL, NULL);
        INSERT INTO slices (run_id, seq, process_index, cpu, planned_start_ns, planned_end_ns, actual_end_ns,
            cpu_ns)
        VALUES (1, 0, 0, 0, 0, 10, 11, 9);
        INSERT INTO latency (run_id, process_index, name, is_primary, count, p50_ns, p90_ns, p99_ns, p999_ns,
            max_ns, histogram)
        VALUES (2, 0, 'wakeup', 1, 1, 5, 5, 5, 5, 5, x'00');
        "#,
    )
    .unwrap();
}

#[test]
fn a_schema_4_database_migrates_keeping_every_row_and_resumes_on_its_host() {
    let dir = tempfile::tempdir().unwrap();
    let toml =
        "name = \"old\"\n[matrix]\npolicy = [\"other\"]\nworkload = [\"pi\"]\nprocesses = [1]\n";
    let spec = schedlab::spec::load(toml, "old", &[]).unwrap();
    let db = dir.path().join("old.db");
    schema_4_db(&db, &spec, toml);
    let copy = dir.path().join("copy.db");
    std::fs::copy(&db, &copy).unwrap();

    // Read-only: upgraded in memory, the file untouched.
    let before = std::fs::read(&copy).unwrap();
    let ro = Store::open_existing(&copy).unwrap();
    let ro_uuid = ro.campaigns().unwrap()[0].campaign.uuid.clone();
    assert_eq!(
        ro.table_counts().unwrap(),
        [
            ("environments", 1),
            ("campaigns", 1),
            ("runs", 2),
            ("processes", 2),
            ("slices", 1),
            ("latency", 1),
            ("trace_captures", 0),
            ("trace_tasks", 0),
            ("trace_slices", 0),
            ("trace_wakeups", 0),
            ("trace_processes", 0),
            ("trace_cpus", 0),
            ("trace_repairs", 0)
        ]
    );
    drop(ro);
    assert!(std::fs::read(&copy).unwrap() == before);

    // In place: every row kept, the same UUID, the hostname backfilled.
    let mut store = Store::open(&db).unwrap();
    assert_eq!(store.schema_version().unwrap(), MIGRATIONS.len() as i64);
    let c = store.campaigns().unwrap().remove(0);
    assert_eq!(c.total_runs(), 2);
    assert_eq!(
        c.campaign.uuid, ro_uuid,
        "the backfilled UUID is the same every time"
    );
    assert!(
        uuid::Uuid::parse_str(&c.campaign.uuid).is_ok(),
        "{}",
        c.campaign.uuid
    );
    assert_eq!(c.campaign.host_id, None);
    assert_eq!(c.campaign.hostname.as_deref(), Some("oldhost"));
    assert_eq!(
        store.table_counts().unwrap(),
        Store::open_existing(&copy).unwrap().table_counts().unwrap()
    );
    let rows = store.export_rows(None).unwrap();
    assert_eq!(rows.len(), 2);
    assert!(
        rows.iter()
            .all(|r| r.hostname.as_deref() == Some("oldhost") && r.host_id.is_none())
    );

    // Resumed on its host (same hostname), not on another; resuming claims
    // it for that host's id.
    let elsewhere = Host {
        id: Some("x".into()),
        name: "newhost".into(),
    };
    assert_eq!(store.find_campaign(&spec, &elsewhere).unwrap(), None);
    let here = Host {
        id: Some("0d0d0d0d-0000-8000-8000-00000000000d".into()),
        name: "oldhost".into(),
    };
    let found = store.find_campaign(&spec, &here).unwrap().unwrap();
    assert_eq!(found.id, 1);
    store.claim_campaign(found.id, &here).unwrap();
    let again = store.find_campaign(&spec, &here).unwrap().unwrap();
    assert_eq!(again.host_id, here.id);
    drop(store);

    // The rebuilt campaigns table is still what runs refer to: deleting the
    // campaign deletes its runs and their rows, nothing dangles.
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch("PRAGMA foreign_keys = ON; DELETE FROM campaigns WHERE id = 1;")
        .unwrap();
    let left: i64 = conn
        .query_row(
            "SELECT (SELECT COUNT(*) FROM runs) + (SELECT COUNT(*) FROM processes)
                  + (SELECT COUNT(*) FROM slices) + (SELECT COUNT(*) FROM latency)",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(left, 0);

    // An old database merges like a new one, and twice adds nothing.
    let fleet = dir.path().join("fleet.db");
    for _ in 0..2 {
        let o = merge(dir.path(), &[&copy], &fleet);
        assert!(o.status.success(), "{}", text(&o));
        assert_eq!(counts(&fleet), counts(&copy));
    }
}

fn report_json(dir: &Path, db: &Path, extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["report", "--db", db.to_str().unwrap(), "--format", "json"];
    args.extend(extra);
    let o = schedlab(&args, dir);
    assert!(o.status.success(), "{}", text(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

fn group_labels(v: &serde_json::Value) -> Vec<String> {
    let mut labels: Vec<String> = v["conditions"]
        .as_array()
        .or_else(|| v["comparisons"].as_array())
        .unwrap()
        .iter()
        .filter_map(|c| c["group_label"].as_str().map(String::from))
        .collect();
    labels.sort();
    labels.dedup();
    labels
}

#[test]
fn report_by_host_makes_the_host_a_factor_of_one_spec() {
    let dir = tempfile::tempdir().unwrap();
    let a = host_db(dir.path(), "a.db", HOST_A);
    let b = host_db(dir.path(), "b.db", HOST_B);
    let fleet = dir.path().join("fleet.db");
    assert!(merge(dir.path(), &[&a, &b], &fleet).status.success());

    let one = report_json(dir.path(), &fleet, &[]);
    let by = report_json(dir.path(), &fleet, &["--by", "host"]);
    let one_groups = group_labels(&one);
    let by_groups = group_labels(&by);
    assert!(!one_groups.is_empty());
    assert_eq!(by_groups.len(), 2 * one_groups.len(), "{by_groups:?}");
    for g in &one_groups {
        for h in ["alpha", "beta"] {
            assert!(
                by_groups.contains(&format!("{g}, host {h}")),
                "{g} {h}: {by_groups:?}"
            );
        }
    }
    assert_eq!(by["campaign"]["campaigns"], serde_json::json!([1, 2]));
    assert_eq!(by["campaign"]["by"], "host");
    // Every run of both campaigns is in it, and both campaigns' plans.
    for key in ["/summary/counts/ok", "/summary/planned_runs"] {
        let n = |v: &serde_json::Value| v.pointer(key).and_then(|x| x.as_u64()).unwrap();
        assert_eq!(n(&by), 2 * n(&one), "{key}");
    }

    // Both hosts ran the same kernel: one level, the groups of one campaign.
    let kernel = report_json(dir.path(), &fleet, &["--by", "kernel"]);
    let kernel_groups = group_labels(&kernel);
    assert_eq!(kernel_groups.len(), one_groups.len());
    assert!(
        kernel_groups
            .iter()
            .all(|g| g.ends_with(", kernel 6.1.0-synthetic"))
    );

    let md = schedlab(
        &[
            "report",
            "--db",
            fleet.to_str().unwrap(),
            "--by",
            "host",
            "--format",
            "md",
        ],
        dir.path(),
    );
    assert!(md.status.success(), "{}", text(&md));
    assert!(text(&md).contains("by host: alpha, beta"), "{}", text(&md));
    let md_text = text(&md);
    let host_row = md_text
        .lines()
        .find(|l| l.starts_with("| host "))
        .map(|l| l.split('|').map(str::trim).collect::<Vec<_>>())
        .unwrap_or_else(|| panic!("no host row: {md_text}"));
    assert_eq!(host_row, ["", "host", "alpha", "beta", ""]);

    // A store without campaigns: an error, not an empty report.
    let empty = dir.path().join("empty.db");
    drop(Store::open(&empty).unwrap());
    let o = schedlab(
        &[
            "report",
            "--db",
            empty.to_str().unwrap(),
            "--by",
            "host",
            "--format",
            "md",
        ],
        dir.path(),
    );
    assert!(!o.status.success());
    assert!(text(&o).contains("no campaign"), "{}", text(&o));
}

/// An export's CSV as header and rows (synthetic data: no quoted commas
/// except in extra_json, which is "{}").
fn csv_rows(dir: &Path, db: &Path) -> (Vec<String>, Vec<Vec<String>>) {
    let o = schedlab(
        &["export", "--db", db.to_str().unwrap(), "--format", "csv"],
        dir,
    );
    assert!(o.status.success(), "{}", text(&o));
    let s = String::from_utf8(o.stdout).unwrap();
    let mut lines = s.lines();
    let header = lines.next().unwrap().split(',').map(String::from).collect();
    (
        header,
        lines
            .map(|l| l.split(',').map(String::from).collect())
            .collect(),
    )
}

#[test]
fn parquet_export_reads_back_with_the_csv_rows_and_values() {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::record::Field;

    let dir = tempfile::tempdir().unwrap();
    let a = host_db(dir.path(), "a.db", HOST_A);
    let b = host_db(dir.path(), "b.db", HOST_B);
    let fleet = dir.path().join("fleet.db");
    assert!(merge(dir.path(), &[&a, &b], &fleet).status.success());
    let out = dir.path().join("runs.parquet");
    let o = schedlab(
        &[
            "export",
            "--db",
            fleet.to_str().unwrap(),
            "--format",
            "parquet",
            "-o",
            out.to_str().unwrap(),
        ],
        dir.path(),
    );
    assert!(o.status.success(), "{}", text(&o));
    let (header, csv) = csv_rows(dir.path(), &fleet);

    let reader = SerializedFileReader::new(std::fs::File::open(&out).unwrap()).unwrap();
    let schema = reader.metadata().file_metadata().schema_descr();
    let names: Vec<String> = schema
        .columns()
        .iter()
        .map(|c| c.name().to_string())
        .collect();
    assert_eq!(names, header, "the CSV's columns, in order");
    let rows: Vec<_> = reader
        .get_row_iter(None)
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(rows.len(), csv.len());
    assert!(rows.len() > 100);
    for (row, cells) in rows.iter().zip(&csv) {
        for ((name, field), cell) in row.get_column_iter().zip(cells) {
            let same = match field {
                Field::Null => cell.is_empty(),
                Field::Long(v) => cell == &v.to_string(),
                Field::Double(v) => cell.parse::<f64>().is_ok_and(|c| c == *v),
                Field::Str(s) => cell == s || (s.contains(',') && cell.starts_with('"')),
                other => panic!("{name}: unexpected type {other:?}"),
            };
            assert!(same, "{name}: parquet {field:?}, csv {cell:?}");
        }
    }
    // Typed: integers, floats and strings.
    let types: Vec<String> = schema
        .columns()
        .iter()
        .map(|c| format!("{}:{}", c.name(), c.physical_type()))
        .collect();
    for t in [
        "run:INT64",
        "wall_ns:INT64",
        "cpu_util:DOUBLE",
        "hostname:BYTE_ARRAY",
        "campaign_uuid:BYTE_ARRAY",
    ] {
        assert!(types.contains(&t.to_string()), "{t}: {types:?}");
    }

    // An independent reader: DuckDB (CI installs it; see .ci/run).
    let have_duckdb = std::process::Command::new("python3")
        .args(["-c", "import duckdb"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !common::require_tool(have_duckdb, "python3 with duckdb (pip install duckdb)") {
        return;
    }
    let query = format!(
        "import duckdb; print(duckdb.sql(\"SELECT hostname, count(*), sum(wall_ns) FROM '{}' \
         WHERE process_index IS NOT NULL GROUP BY ALL ORDER BY ALL\").fetchall())",
        out.display()
    );
    let o = std::process::Command::new("python3")
        .args(["-c", &query])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let got = String::from_utf8_lossy(&o.stdout).trim().to_string();
    let wall = |host: &str| -> (usize, i64) {
        let i = header.iter().position(|h| h == "hostname").unwrap();
        let w = header.iter().position(|h| h == "wall_ns").unwrap();
        let p = header.iter().position(|h| h == "process_index").unwrap();
        let rows: Vec<&Vec<String>> = csv
            .iter()
            .filter(|r| r[i] == host && !r[p].is_empty())
            .collect();
        (
            rows.len(),
            rows.iter().map(|r| r[w].parse::<i64>().unwrap()).sum(),
        )
    };
    let (na, wa) = wall("alpha");
    let (nb, wb) = wall("beta");
    assert_eq!(
        got,
        format!("[('alpha', {na}, {wa}), ('beta', {nb}, {wb})]")
    );
}

/// A tmpfs of `size` mounted on `dir` for the test's life, unmounted on
/// drop (failed or not).
struct SmallDisk(PathBuf);

impl SmallDisk {
    fn mount(dir: &Path, size: &str) -> Option<SmallDisk> {
        std::fs::create_dir_all(dir).unwrap();
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| SmallDisk(dir.to_path_buf()))
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn a_merge_into_a_new_database_on_a_full_disk_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let a = host_db(dir.path(), "a.db", HOST_A);
    let b = host_db(dir.path(), "b.db", HOST_B);
    if !schedlab::testing::require(
        schedlab::sys::proc::euid() == 0,
        "needs root to mount a small tmpfs",
    ) {
        return;
    }
    // 48 KiB: too small for the schema, so the database cannot even be made.
    let Some(disk) = SmallDisk::mount(&dir.path().join("small"), "48k") else {
        panic!("mount -t tmpfs failed as root");
    };
    let fleet = disk.0.join("fleet.db");
    let o = merge(dir.path(), &[&a, &b], &fleet);
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(t.contains("disk is full"), "{t}");
    assert!(t.contains("removed") && t.contains("fleet.db"), "{t}");
    let left: Vec<_> = std::fs::read_dir(&disk.0)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "the failed merge left {left:?}: {t}");
    // With room, the same merge works: nothing left was in its way.
    drop(disk);
    let roomy = dir.path().join("roomy.db");
    assert!(merge(dir.path(), &[&a, &b], &roomy).status.success());
}
