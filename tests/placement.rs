//! End-to-end tests of the placement fields (`fields::FIELDS`: cpus_used,
//! llc_migrations, node_migrations), read from a traced run's events, each
//! against what the test itself did to the worker and against the
//! kernel's own count (`se.nr_migrations` of /proc/PID/sched, schedstat's
//! reader of the same registry):
//!
//! * a worker pinned to CPU 1 used one CPU and never migrated;
//! * a worker whose affinity the test flips between CPU 0 and CPU 1 used
//!   both, migrated once per flip inside its work window (within 2), the
//!   trace's count agrees with the kernel's `nr_migrations` (within 1),
//!   and none of the moves crossed an LLC or node the machine does not
//!   have (their counts match the recorded topology's).
//!
//! Tracing needs root (tracefs); the tests fail instead of skipping under
//! `SCHEDLAB_REQUIRE_ROOT=1`, and run one at a time (a lock).

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

mod common;
use common::{bin, text};
use schedlab::fields::{FIELDS, Field};
use schedlab::sys::proc::monotonic_ns;
use schedlab::sys::sched::{cpu_set, set_affinity_raw};

static LOCK: Mutex<()> = Mutex::new(());

fn may_trace() -> bool {
    let euid = schedlab::sys::proc::euid();
    let two = std::thread::available_parallelism().map_or(1, |n| n.get());
    common::require(
        euid == 0,
        format!("tracing needs root (tracefs; euid is {euid})"),
    ) && common::require(two >= 2, format!("needs 2 CPUs ({two} here)"))
}

fn command(dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(bin());
    c.args(args)
        .current_dir(dir)
        .env("CI", "1")
        .env_remove("SCHEDLAB_DB")
        .env_remove("SCHEDLAB_JOURNAL");
    c
}

fn spec(cpus: &str, duration_s: f64) -> String {
    format!(
        "name = \"placement\"\nrepetitions = 1\ncooldown_s = 0\n[matrix]\npolicy = [\"other\"]\n\
         workload = [\"pi\"]\nprocesses = [1]\ncpus = [\"{cpus}\"]\n[workloads.pi]\nduration_s = {duration_s}\n"
    )
}

/// One stored worker: pid, work window (ns after release), and every
/// registry field by name.
struct Stored {
    run_id: i64,
    pid: i32,
    start_ns: u64,
    end_ns: u64,
    fields: Vec<(Field, Option<i64>)>,
}

impl Stored {
    fn get(&self, f: Field) -> Option<i64> {
        self.fields.iter().find(|(g, _)| *g == f).and_then(|x| x.1)
    }
}

fn stored(db: &Path) -> Stored {
    let conn = rusqlite::Connection::open(db).unwrap();
    let cols: String = FIELDS.iter().map(|d| format!(", p.{}", d.name)).collect();
    conn.query_row(
        &format!(
            "SELECT r.id, r.status, p.pid, p.start_ns, p.end_ns{cols} FROM runs r \
             JOIN processes p ON p.run_id = r.id WHERE p.role = 'worker'"
        ),
        [],
        |r| {
            assert_eq!(r.get::<_, String>(1)?, "ok");
            Ok(Stored {
                run_id: r.get(0)?,
                pid: r.get(2)?,
                start_ns: r.get::<_, i64>(3)? as u64,
                end_ns: r.get::<_, i64>(4)? as u64,
                fields: FIELDS
                    .iter()
                    .enumerate()
                    .map(|(i, d)| Ok((d.field, r.get(5 + i)?)))
                    .collect::<rusqlite::Result<_>>()?,
            })
        },
    )
    .unwrap()
}

/// The migrations of `pid` the trace saw inside its work window, with
/// the window on the trace's clock.
fn traced_migrations(db: &Path, s: &Stored) -> (u64, (u64, u64)) {
    let store = schedlab::store::Store::open(db).unwrap();
    let cap = store.load_trace(s.run_id).unwrap();
    assert_eq!(cap.lost_events, 0);
    let release = cap.release_ns.expect("the trace knows the release");
    let window = (release + s.start_ns, release + s.end_ns);
    let a = schedlab::trace::Analysed::new(&cap, &[]);
    let of = schedlab::trace::summary::process_of(&cap);
    let p = schedlab::trace::placement::of_process(&a, &of, s.pid, window, None);
    (p.migrations, window)
}

/// A worker allowed only CPU 1 ran on one CPU and never migrated: across
/// an LLC or node neither.
#[test]
fn a_pinned_worker_used_one_cpu_and_never_migrated() {
    let _lock = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if !may_trace() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("p.toml"), spec("1", 0.3)).unwrap();
    let o = command(dir.path(), &["run", "p.toml", "--db", "t.db", "--trace"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let db = dir.path().join("t.db");
    let s = stored(&db);
    assert_eq!(s.get(Field::CpusUsed), Some(1));
    assert_eq!(s.get(Field::NrMigrations), Some(0));
    assert_eq!(s.get(Field::LlcMigrations), Some(0));
    assert_eq!(s.get(Field::NodeMigrations), Some(0));
    assert_eq!(traced_migrations(&db, &s).0, 0);
    // The export carries them (the JSON rows hold the CSV's columns).
    let o = command(dir.path(), &["export", "--db", "t.db", "--format", "json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let rows: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let worker = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["role"] == "worker")
        .unwrap();
    assert_eq!(worker["cpus_used"], 1, "{worker}");
    assert_eq!(worker["llc_migrations"], 0, "{worker}");
}

/// The test flips the worker between CPU 0 and CPU 1 every 40 ms: it used
/// both CPUs, migrated once per flip made inside its work window, as the
/// trace and the kernel's `nr_migrations` both count; on this machine's
/// topology no move crosses an LLC or node unless the two CPUs' places
/// differ.
#[test]
fn flipped_affinity_is_counted_by_the_trace_and_the_kernel_alike() {
    let _lock = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if !may_trace() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("f.toml"), spec("0-1", 1.2)).unwrap();
    let child = command(dir.path(), &["run", "f.toml", "--db", "t.db", "--trace"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let schedlab_pid = child.id() as i32;
    // The worker: schedlab's forked child running the pi workload.
    let start = Instant::now();
    // A child counts once it is still not the watchdog 30 ms later: the
    // watchdog's cmdline is schedlab's own until it has exec'd.
    let worker = loop {
        if let Some(pid) = children(schedlab_pid).into_iter().next() {
            std::thread::sleep(Duration::from_millis(30));
            if children(schedlab_pid).contains(&pid) {
                break pid;
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no worker appeared"
        );
        std::thread::sleep(Duration::from_millis(5));
    };
    let mut flips: Vec<u64> = Vec::new();
    let mut to = 0usize;
    while std::fs::metadata(format!("/proc/{worker}/stat")).is_ok()
        && start.elapsed() < Duration::from_secs(30)
    {
        if set_affinity_raw(worker, &cpu_set(&[to])).is_ok() {
            flips.push(monotonic_ns());
        }
        to = 1 - to;
        std::thread::sleep(Duration::from_millis(40));
    }
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let db = dir.path().join("t.db");
    let s = stored(&db);
    assert_eq!(s.pid, worker);
    let (traced, (from, until)) = traced_migrations(&db, &s);
    let inside = flips.iter().filter(|&&t| t >= from && t < until).count() as i64;
    let kernel = s.get(Field::NrMigrations).expect("nr_migrations read");
    assert!(inside >= 10, "only {inside} flips inside the work window");
    assert!(
        (kernel - inside).abs() <= 2,
        "nr_migrations {kernel} against {inside} flips inside the window"
    );
    assert!(
        (traced as i64 - kernel).abs() <= 1,
        "the trace counted {traced} migrations, the kernel {kernel}"
    );
    assert_eq!(s.get(Field::CpusUsed), Some(2));
    // Across an LLC or node: as the recorded topology places CPUs 0 and 1.
    let topo = schedlab::sys::topology::capture().expect("a topology");
    let (p0, p1) = (topo.place(0).unwrap(), topo.place(1).unwrap());
    let expect = |differ: bool| if differ { Some(traced as i64) } else { Some(0) };
    assert_eq!(s.get(Field::LlcMigrations), expect(p0.llc != p1.llc));
    assert_eq!(s.get(Field::NodeMigrations), expect(p0.node != p1.node));
    eprintln!(
        "flips inside the window {inside}, nr_migrations {kernel}, traced {traced}, cpus_used {:?}",
        s.get(Field::CpusUsed)
    );
}

/// Processes whose parent is `pid`.
fn children(pid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(p) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        // The fields after the command's closing parenthesis: state, ppid.
        let after = &stat[stat.rfind(')').map_or(0, |i| i + 2)..];
        // schedlab's watchdog (`schedlab __watchdog …`) is its child too.
        let cmdline = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
        let watchdog = cmdline.split(|&b| b == 0).any(|a| a == b"__watchdog");
        if !watchdog && after.split(' ').nth(1).and_then(|s| s.parse().ok()) == Some(pid) {
            out.push(p);
        }
    }
    out
}
