//! kill -9 at random moments: `schedlab run` is started on small specs and
//! sent SIGKILL after a seeded random delay, again and again, and after every
//! kill the database, the processes and the machine are checked:
//!
//! - `PRAGMA integrity_check` is ok, and no run is stored twice (one row per
//!   campaign and run key);
//! - no worker survives its schedlab (every process carrying this test's
//!   unique environment tag is gone within a few seconds);
//! - the next start removes the run directories the killed one left (marked
//!   `.schedlab-owned` in the spec's work directory);
//! - `sched_rt_runtime_us` is back to its value before the test once the
//!   next schedlab has started and finished;
//! - running the same command again completes the campaign.
//!
//! Scenarios: plain fair-class campaigns, the start-up of 1,000-process
//! runs, WRR runs (pinned to CPU 0) and RT bandwidth sweeps (an RT hog on
//! CPU 0, `sched_rt_runtime_us` 950000 and 900000, never -1). The seed is
//! printed; `STRESS_SEED=N` replays the same delays.
//!
//! Minutes long, so ignored by `cargo test`:
//!
//! ```sh
//! cargo test --release --test stress -- --ignored --nocapture
//! ```
//!
//! The quick test at the end (one kill of a small campaign, every check)
//! runs with `cargo test --release`.
//!
//! Only processes this test started are ever signalled: schedlab children
//! it spawned (through `Child::kill`), and, should one survive, a worker
//! carrying this test's unique tag in its environment.

mod common;
use common::bin;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use schedlab::rng::SplitMix64;

const IGNORE: &str = "minutes long: cargo test --release --test stress -- --ignored --nocapture";

/// One scenario at a time: they share CPU 0 and the measurement lock.
static SERIAL: Mutex<()> = Mutex::new(());
/// Every scenario's figures, for the summary table.
static ROWS: Mutex<Vec<Row>> = Mutex::new(Vec::new());

fn seed() -> u64 {
    static SEED: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *SEED.get_or_init(|| {
        let s = std::env::var("STRESS_SEED")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(schedlab::rng::fresh_seed);
        eprintln!("stress: seed {s} (STRESS_SEED={s} replays the same kill delays)");
        s
    })
}

fn rt_runtime_us() -> String {
    std::fs::read_to_string("/proc/sys/kernel/sched_rt_runtime_us")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// What a scenario saw.
#[derive(Debug, Default, Clone)]
struct Row {
    scenario: &'static str,
    kills: u32,
    /// Starts that ended on their own before the kill came (not counted as kills).
    finished_first: u32,
    /// Most tagged processes alive at the moment of a kill.
    max_alive_at_kill: usize,
    integrity_failures: u32,
    duplicates: i64,
    survivors: usize,
    leftovers: usize,
    /// Directories named like run directories without a marker (never removed).
    unmarked: usize,
    /// RT setting checks after a completed start (None: not an RT scenario).
    rt_restored: Option<(u32, u32)>,
    /// Completing runs: (processes of the largest run, seconds of the completing command).
    completed: Option<(u32, f64)>,
    incomplete: u32,
}

/// A scenario's files: spec, databases, work directory, logs.
struct Scene {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
    work: PathBuf,
    /// Unique per scenario: every process schedlab starts inherits it.
    tag: String,
    db: u32,
}

impl Scene {
    fn new(name: &str, spec_body: &str) -> Scene {
        let tmp = tempfile::Builder::new()
            .prefix(&format!("schedlab-stress-{name}-"))
            .tempdir()
            .unwrap();
        let dir = tmp.path().to_path_buf();
        let work = dir.join("work");
        std::fs::create_dir(&work).unwrap();
        let spec = format!(
            "name = \"stress-{name}\"\ncooldown_s = 0\nworkdir = \"{}\"\n{spec_body}",
            work.display()
        );
        std::fs::write(dir.join("s.toml"), spec).unwrap();
        let tag = format!("{}-{}-{}", std::process::id(), name, seed());
        Scene {
            _tmp: tmp,
            dir,
            work,
            tag,
            db: 0,
        }
    }

    fn db_path(&self) -> PathBuf {
        self.dir.join(format!("t{}.db", self.db))
    }

    fn command(&self, log: &str) -> Command {
        let mut c = Command::new(bin());
        c.args(["run", "s.toml", "--db"])
            .arg(self.db_path())
            .current_dir(&self.dir)
            .env("CI", "1")
            .env("SCHEDLAB_STRESS_TAG", &self.tag)
            .env_remove("SCHEDLAB_DB")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(self.dir.join(log)).unwrap());
        c
    }

    fn start(&self) -> Child {
        self.command("run.log").spawn().expect("start schedlab")
    }

    /// Processes (other than `except`) whose environment carries the tag.
    fn tagged(&self, except: Option<u32>) -> Vec<u32> {
        let needle = format!("SCHEDLAB_STRESS_TAG={}", self.tag).into_bytes();
        let me = std::process::id();
        let mut out = Vec::new();
        let Ok(rd) = std::fs::read_dir("/proc") else {
            return out;
        };
        for e in rd.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            if pid == me || Some(pid) == except {
                continue;
            }
            let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
                continue;
            };
            if env.split(|b| *b == 0).any(|v| v == needle.as_slice()) && !is_zombie(pid) {
                out.push(pid);
            }
        }
        out
    }

    /// Directories carrying schedlab's marker in the work directory.
    fn owned_dirs(&self) -> Vec<PathBuf> {
        std::fs::read_dir(&self.work)
            .map(|rd| {
                rd.flatten()
                    .map(|e| e.path())
                    .filter(|p| p.join(".schedlab-owned").is_file())
                    .collect()
            })
            .unwrap_or_default()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("run.log")).unwrap_or_default()
    }
}

fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(true)
}

/// integrity_check result and duplicate (campaign, run_key) rows of a database.
fn db_health(db: &Path) -> (String, i64) {
    if !db.exists() {
        return ("ok".into(), 0);
    }
    // Read-write, as the next schedlab opens it: a write-ahead log the
    // killed process left is recovered first (a read-only connection cannot).
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.busy_timeout(Duration::from_secs(10)).unwrap();
    let integrity: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap_or_else(|e| format!("error: {e}"));
    if integrity != "ok" {
        let keep = std::env::temp_dir().join(format!(
            "schedlab-stress-failed-{}-{}",
            std::process::id(),
            db.file_name().unwrap().to_string_lossy()
        ));
        let _ = std::fs::copy(db, &keep);
        eprintln!(
            "  INTEGRITY {}: {integrity} (copy in {})",
            db.display(),
            keep.display()
        );
    }
    let has_runs: bool = conn
        .query_row(
            "SELECT COUNT(*) FROM sqlite_master WHERE name = 'runs'",
            [],
            |r| r.get::<_, i64>(0),
        )
        .map(|n| n > 0)
        .unwrap_or(false);
    let dups = if has_runs {
        conn.query_row(
            "SELECT COUNT(*) - COUNT(DISTINCT CAST(campaign_id AS TEXT) || char(0) || run_key) FROM runs",
            [],
            |r| r.get(0),
        )
        .unwrap()
    } else {
        0
    };
    (integrity, dups)
}

/// Planned runs and runs stored ok of the campaign(s) of a database; (0, 0)
/// for a database a kill left before its tables were made.
fn progress(db: &Path) -> (i64, i64) {
    let Ok(conn) =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
    else {
        return (0, 0);
    };
    let _ = conn.busy_timeout(Duration::from_secs(10));
    let planned = conn
        .query_row(
            "SELECT COALESCE(SUM(planned_runs), 0) FROM campaigns",
            [],
            |r| r.get(0),
        )
        .unwrap_or(0);
    let ok = conn
        .query_row("SELECT COUNT(*) FROM runs WHERE status = 'ok'", [], |r| {
            r.get(0)
        })
        .unwrap_or(0);
    (planned, ok)
}

/// How long the tagged processes take to go after their schedlab died.
const GRACE: Duration = Duration::from_secs(5);

/// Wait for tagged processes to go; those still there after the grace
/// period are survivors: counted, then killed (they are this test's own).
fn reap_survivors(scene: &Scene) -> usize {
    let t0 = Instant::now();
    loop {
        let left = scene.tagged(None);
        if left.is_empty() {
            return 0;
        }
        if t0.elapsed() > GRACE {
            for pid in &left {
                eprintln!(
                    "  SURVIVOR pid {pid}: {}",
                    std::fs::read_to_string(format!("/proc/{pid}/status"))
                        .unwrap_or_default()
                        .lines()
                        .filter(|l| l.starts_with("State") || l.starts_with("PPid"))
                        .collect::<Vec<_>>()
                        .join(", ")
                );
                let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
            }
            return left.len();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A scenario: `kills` SIGKILLs of `schedlab run` after random delays in
/// `delay_ms`, each followed by the checks, then one start left to finish.
struct Plan {
    name: &'static str,
    spec: String,
    kills: u32,
    delay_ms: (u64, u64),
    largest_processes: u32,
    rt: bool,
    /// Time limit of the completing start.
    finish_within: Duration,
}

fn run_scenario(p: Plan) -> Row {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut rng = SplitMix64::new(seed() ^ fnv(p.name));
    let rt_before = rt_runtime_us();
    let mut scene = Scene::new(p.name, &p.spec);
    let mut row = Row {
        scenario: p.name,
        rt_restored: p.rt.then_some((0, 0)),
        ..Row::default()
    };
    eprintln!(
        "stress: {} — {} kills after {}..{} ms, work in {}",
        p.name,
        p.kills,
        p.delay_ms.0,
        p.delay_ms.1,
        scene.dir.display()
    );
    kill_until_done(&p, &mut scene, &mut row, &mut rng);
    let Finished {
        status,
        secs,
        log: finish_log,
        integrity,
    } = finish(&p, &mut scene, &mut row);
    let (planned, ok) = progress(&scene.db_path());
    match status {
        Some(s) if s.success() && planned > 0 && ok == planned => {
            row.completed = Some((p.largest_processes, secs));
        }
        _ => {
            row.incomplete += 1;
            eprintln!(
                "  the completing start did not complete the campaign ({status:?}, {ok}/{planned} ok): {finish_log}"
            );
        }
    }
    check_rt_restored(&mut row, rt_before);
    eprintln!(
        "  completing start: {:.1} s, runs {ok}/{planned} ok, {} leftover dirs, integrity {integrity}{}",
        secs,
        row.leftovers,
        if finish_log.contains("left by a schedlab that was killed") {
            ", removed the killed runs' directories"
        } else {
            ""
        }
    );
    ROWS.lock().unwrap().push(row.clone());
    print_summary();
    row
}

/// Start schedlab on the scenario's campaign and kill -9 it at a random
/// delay, `p.kills` times, checking after each kill what it left.
fn kill_until_done(p: &Plan, scene: &mut Scene, row: &mut Row, rng: &mut SplitMix64) {
    let mut attempts = 0;
    // Kills land within a campaign's length: a start that ends by itself
    // before its kill shortens the range of the delays that follow.
    let mut upper = p.delay_ms.1;
    while row.kills < p.kills {
        attempts += 1;
        assert!(
            attempts < p.kills * 8,
            "{}: too many starts ended before their kill",
            p.name
        );
        let delay = p.delay_ms.0 + rng.below(upper.saturating_sub(p.delay_ms.0) + 1);
        let mut child = scene.start();
        let pid = child.id();
        let started = Instant::now();
        let mut ended = None;
        while started.elapsed() < Duration::from_millis(delay) {
            if let Some(status) = child.try_wait().unwrap() {
                ended = Some(status);
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        if let Some(status) = ended.or_else(|| child.try_wait().unwrap()) {
            // Finished (or failed) before the kill: a new database, so that
            // the next start has a campaign to be killed in.
            let took = started.elapsed().as_millis() as u64;
            upper = upper.min((took * 9 / 10).max(p.delay_ms.0 + 10));
            row.finished_first += 1;
            eprintln!(
                "  start {attempts}: ended by itself after {took} ms, before its kill at {delay} ms ({status}); \
                 next on a new database, delays now up to {upper} ms"
            );
            assert!(
                status.success(),
                "{}: schedlab failed: {}",
                p.name,
                scene.log()
            );
            scene.db += 1;
            continue;
        }
        let alive = scene.tagged(Some(pid)).len();
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        row.kills += 1;
        row.max_alive_at_kill = row.max_alive_at_kill.max(alive);
        let survivors = reap_survivors(scene);
        row.survivors += survivors;
        let (integrity, dups) = db_health(&scene.db_path());
        if integrity != "ok" {
            row.integrity_failures += 1;
        }
        row.duplicates += dups;
        let (planned, ok) = if scene.db_path().exists() {
            progress(&scene.db_path())
        } else {
            (0, 0)
        };
        eprintln!(
            "  kill {:>2} after {delay:>5} ms: {alive:>4} processes of its own alive, {} run dirs left, \
             runs {ok}/{planned}, integrity {integrity}, duplicates {dups}, survivors {survivors}, rt {}",
            row.kills,
            scene.owned_dirs().len(),
            rt_runtime_us()
        );
    }
}

/// How the completing start ended.
struct Finished {
    /// None: killed at the plan's `finish_within`.
    status: Option<std::process::ExitStatus>,
    secs: f64,
    log: String,
    /// The database's integrity check after it.
    integrity: String,
}

/// The next start finishes the campaign and clears what the kills left;
/// leftovers and unmarked directories are counted in `row`.
fn finish(p: &Plan, scene: &mut Scene, row: &mut Row) -> Finished {
    let t0 = Instant::now();
    let mut child = scene.command("finish.log").spawn().unwrap();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if t0.elapsed() > p.finish_within {
            child.kill().unwrap();
            child.wait().unwrap();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let secs = t0.elapsed().as_secs_f64();
    let finish_log = std::fs::read_to_string(scene.dir.join("finish.log")).unwrap_or_default();
    row.survivors += reap_survivors(scene);
    let (integrity, dups) = db_health(&scene.db_path());
    if integrity != "ok" {
        row.integrity_failures += 1;
    }
    row.duplicates += dups;
    row.leftovers = scene.owned_dirs().len();
    for d in scene.owned_dirs() {
        let marker = std::fs::read(d.join(".schedlab-owned")).unwrap_or_default();
        eprintln!(
            "  LEFTOVER {}: marker of {} bytes {:?}, entries {:?}",
            d.display(),
            marker.len(),
            String::from_utf8_lossy(&marker),
            std::fs::read_dir(&d)
                .map(|rd| rd.flatten().map(|e| e.file_name()).collect::<Vec<_>>())
                .unwrap_or_default()
        );
    }
    // Directories named like run directories but without a marker, and
    // intents to make one: what a kill between making a directory and
    // putting its marker in would leave if the next start did not settle it.
    let unmarked: Vec<PathBuf> = std::fs::read_dir(&scene.work)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| {
                    let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
                    let name = name.unwrap_or_default();
                    // An intent left by a kill that no later start settled.
                    name.starts_with(".schedlab-intent-")
                        || (name.starts_with("schedlab-") && !p.join(".schedlab-owned").exists())
                })
                .collect()
        })
        .unwrap_or_default();
    for d in &unmarked {
        eprintln!(
            "  UNMARKED {}: entries {:?}",
            d.display(),
            std::fs::read_dir(d)
                .map(|rd| rd.flatten().map(|e| e.file_name()).collect::<Vec<_>>())
                .unwrap_or_default()
        );
    }
    row.unmarked = unmarked.len();
    Finished {
        status,
        secs,
        log: finish_log,
        integrity,
    }
}

/// sched_rt_runtime_us is back to `rt_before` after the completing start
/// (counted in the row when the scenario sweeps it).
fn check_rt_restored(row: &mut Row, rt_before: String) {
    if let Some((checked, restored)) = row.rt_restored.as_mut() {
        *checked += 1;
        // Another schedlab on the machine may be sweeping right now: wait
        // for the value to settle before calling it not restored.
        let t0 = Instant::now();
        while rt_runtime_us() != rt_before && t0.elapsed() < Duration::from_secs(30) {
            std::thread::sleep(Duration::from_millis(200));
        }
        if rt_runtime_us() == rt_before {
            *restored += 1;
        } else {
            eprintln!(
                "  sched_rt_runtime_us is {} after the completing start, was {rt_before}",
                rt_runtime_us()
            );
        }
    }
}

fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf29ce484222325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100000001b3)
    })
}

fn print_summary() {
    let rows = ROWS.lock().unwrap();
    eprintln!(
        "\n{:<12} {:>5} {:>9} {:>9} {:>10} {:>10} {:>9} {:>8} {:>9} {:>11} {:>22}",
        "scenario",
        "kills",
        "max alive",
        "integrity",
        "duplicates",
        "survivors",
        "leftovers",
        "unmarked",
        "incomplete",
        "RT restored",
        "largest run completed"
    );
    for r in rows.iter() {
        eprintln!(
            "{:<12} {:>5} {:>9} {:>9} {:>10} {:>10} {:>9} {:>8} {:>9} {:>11} {:>22}",
            r.scenario,
            r.kills,
            r.max_alive_at_kill,
            r.integrity_failures,
            r.duplicates,
            r.survivors,
            r.leftovers,
            r.unmarked,
            r.incomplete,
            match r.rt_restored {
                Some((c, ok)) => format!("{ok}/{c}"),
                None => "-".into(),
            },
            match r.completed {
                Some((p, s)) => format!("{p} processes, {s:.1} s"),
                None => "no".into(),
            }
        );
    }
    let kills: u32 = rows.iter().map(|r| r.kills).sum();
    let largest = rows
        .iter()
        .filter_map(|r| r.completed)
        .max_by(|a, b| a.0.cmp(&b.0));
    eprintln!(
        "total: {kills} kills, {} integrity failures, {} duplicates, {} survivors, {} leftovers; largest run completed: {}\n",
        rows.iter().map(|r| r.integrity_failures).sum::<u32>(),
        rows.iter().map(|r| r.duplicates).sum::<i64>(),
        rows.iter().map(|r| r.survivors).sum::<usize>(),
        rows.iter().map(|r| r.leftovers).sum::<usize>(),
        match largest {
            Some((p, s)) => format!("{p} processes ({s:.1} s for the completing start)"),
            None => "none".into(),
        }
    );
}

fn assert_clean(r: &Row) {
    assert_eq!(r.integrity_failures, 0, "{r:?}");
    assert_eq!(r.duplicates, 0, "{r:?}");
    assert_eq!(r.survivors, 0, "{r:?}");
    assert_eq!(r.leftovers, 0, "{r:?}");
    assert_eq!(r.unmarked, 0, "{r:?}");
    assert_eq!(r.incomplete, 0, "{r:?}");
    if let Some((c, ok)) = r.rt_restored {
        assert_eq!(c, ok, "{r:?}");
    }
}

fn may_use_rt(test: &str) -> bool {
    let ok = schedlab::sys::probe::probe()
        .policies
        .iter()
        .any(|p| p.policy == "fifo" && p.allowed);
    if !ok {
        eprintln!("skipping {test}: SCHEDLAB_FIFO is not permitted (needs root or CAP_SYS_NICE)");
    }
    ok
}

#[test]
#[ignore = "minutes long: cargo test --release --test stress -- --ignored --nocapture"]
fn kill9_fair_class_campaigns() {
    let _ = IGNORE;
    let r = run_scenario(Plan {
        name: "fair",
        spec: r#"
repetitions = 3
timeout_s = 30
[matrix]
policy = ["other", "batch"]
workload = ["pi", "copy"]
processes = [2, 8]
[workloads.pi]
iterations = 3_000_000
[workloads.copy]
bytes = 262_144
"#
        .into(),
        kills: 20,
        delay_ms: (0, 2500),
        largest_processes: 8,
        rt: false,
        finish_within: Duration::from_secs(300),
    });
    assert_clean(&r);
}

/// Start-up of 1,000-process runs: the kills land while the workers are
/// being created, wait at the barrier, or run.
#[test]
#[ignore = "minutes long: cargo test --release --test stress -- --ignored --nocapture"]
fn kill9_during_start_up_of_1000_process_runs() {
    // Limits first: 1,000 workers need RLIMIT_NPROC, pid_max and
    // threads-max well above 1,000 (schedlab also refuses what cannot run).
    let read = |p: &str| -> u64 {
        std::fs::read_to_string(p)
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0)
    };
    let nproc_limit: u64 = std::fs::read_to_string("/proc/self/limits")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("Max processes"))
        .and_then(|l| l.split_whitespace().nth(2).map(str::to_string))
        .map(|v| v.parse().unwrap_or(u64::MAX))
        .unwrap_or(0);
    let (pid_max, threads_max) = (
        read("/proc/sys/kernel/pid_max"),
        read("/proc/sys/kernel/threads-max"),
    );
    eprintln!("limits: RLIMIT_NPROC {nproc_limit}, pid_max {pid_max}, threads-max {threads_max}");
    if nproc_limit < 2000 || pid_max < 4096 || threads_max < 4096 {
        eprintln!("skipping: these limits are too small for 1,000-process runs");
        return;
    }
    let r = run_scenario(Plan {
        name: "start1000",
        spec: r#"
repetitions = 2
timeout_s = 120
[matrix]
policy = ["other"]
workload = ["pi"]
processes = [1000]
[workloads.pi]
iterations = 1000
"#
        .into(),
        kills: 10,
        delay_ms: (100, 5000),
        largest_processes: 1000,
        rt: false,
        finish_within: Duration::from_secs(600),
    });
    assert_clean(&r);
    assert!(
        r.max_alive_at_kill > 0,
        "no kill landed while workers existed: {r:?}"
    );
}

#[test]
#[ignore = "minutes long: cargo test --release --test stress -- --ignored --nocapture"]
fn kill9_wrr_runs() {
    let r = run_scenario(Plan {
        name: "wrr",
        spec: r#"
repetitions = 4
timeout_s = 30
[matrix]
policy = ["wrr"]
workload = ["pi"]
processes = [4]
priorities = ["w"]
cpus = ["0"]
[workloads.pi]
iterations = 20_000_000
[priorities.w]
mode = "list"
weight = [1, 2, 4, 8]
[wrr]
quantum_ms = 5
"#
        .into(),
        kills: 10,
        delay_ms: (100, 3000),
        largest_processes: 4,
        rt: false,
        finish_within: Duration::from_secs(300),
    });
    assert_clean(&r);
}

#[test]
#[ignore = "minutes long: cargo test --release --test stress -- --ignored --nocapture"]
fn kill9_rt_sweeps() {
    if !may_use_rt("kill9_rt_sweeps") {
        return;
    }
    let r = run_scenario(Plan {
        name: "rt-sweep",
        spec: r#"
repetitions = 2
timeout_s = 20
[matrix]
policy = ["other"]
workload = ["pi"]
processes = [2]
cpus = ["0"]
rt_runtime_us = [950000, 900000]
[workloads.pi]
iterations = 3_000_000
[hog]
policy = "fifo"
rt_priority = 50
cpus = "0"
"#
        .into(),
        kills: 10,
        delay_ms: (0, 3000),
        largest_processes: 2,
        rt: true,
        finish_within: Duration::from_secs(300),
    });
    assert_clean(&r);
}

/// The quick part: one kill of a small campaign mid-run, every check.
#[test]
fn one_kill_of_a_small_campaign_leaves_nothing_behind() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let scene = Scene::new(
        "quick",
        r#"
repetitions = 1
timeout_s = 30
[matrix]
policy = ["other"]
workload = ["copy"]
processes = [3]
[workloads.copy]
duration_s = 2
"#,
    );
    let mut child = scene.start();
    let pid = child.id();
    // Kill once the run's workers exist and its directory is made.
    let t0 = Instant::now();
    while (scene.tagged(Some(pid)).len() < 3 || scene.owned_dirs().is_empty())
        && t0.elapsed() < Duration::from_secs(60)
    {
        assert!(child.try_wait().unwrap().is_none(), "{}", scene.log());
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        !scene.owned_dirs().is_empty(),
        "no run directory: {}",
        scene.log()
    );
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(reap_survivors(&scene), 0, "workers outlived their schedlab");
    let (integrity, dups) = db_health(&scene.db_path());
    assert_eq!((integrity.as_str(), dups), ("ok", 0));
    assert_eq!(
        scene.owned_dirs().len(),
        1,
        "SIGKILL leaves the run directory"
    );
    // The same command again: resumes, completes, cleans up.
    let out = scene.command("finish.log").output().unwrap();
    let log = std::fs::read_to_string(scene.dir.join("finish.log")).unwrap_or_default();
    assert!(out.status.success(), "{log}");
    assert!(scene.owned_dirs().is_empty(), "{log}");
    assert!(log.contains("left by a schedlab that was killed"), "{log}");
    let (planned, ok) = progress(&scene.db_path());
    assert_eq!((planned, ok), (1, 1));
    assert_eq!(reap_survivors(&scene), 0);
}

/// A `command`'s setup that starts a session of its own (`setsid`, out of
/// its process group) and ignores SIGTERM and SIGHUP: what it started is
/// killed when the setup ends, and when schedlab is killed during the
/// setup, the setup dies with it and the next start of any schedlab
/// command kills the rest (its cgroup, as for a program's tree).
#[test]
fn a_setup_s_escaped_processes_outlive_neither_it_nor_a_sigkill() {
    if !common::root_for_commands() {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut scene = Scene::new(
        "setup",
        r#"
repetitions = 1
timeout_s = 30
[matrix]
policy = ["other"]
workload = ["c"]
processes = [1]
cpus = ["0"]
[workloads.c]
kind = "command"
setup = ["sh", "-c", "trap '' TERM HUP; (setsid sleep 60 &); if [ -e ../../hold ]; then sleep 60; fi"]
argv = ["true"]
"#,
    );
    // A setup that ends at once, leaving its session behind.
    let out = scene.command("first.log").output().unwrap();
    let log = std::fs::read_to_string(scene.dir.join("first.log")).unwrap_or_default();
    assert!(out.status.success(), "{log}");
    assert_eq!(
        reap_survivors(&scene),
        0,
        "a process the setup started in a session of its own outlived the run"
    );
    // Killed while its setup runs.
    std::fs::write(scene.dir.join("hold"), "").unwrap();
    scene.db = 1;
    let mut child = scene.start();
    let pid = child.id();
    let t0 = Instant::now();
    // schedlab's setup shell, its sleep and the setsid'd sleep.
    while scene.tagged(Some(pid)).len() < 3 && t0.elapsed() < Duration::from_secs(30) {
        assert!(child.try_wait().unwrap().is_none(), "{}", scene.log());
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(scene.tagged(Some(pid)).len() >= 3, "{}", scene.log());
    child.kill().unwrap();
    child.wait().unwrap();
    // The next start of any command (one that only reads) kills the rest.
    let out = Command::new(bin())
        .args(["campaigns", "--db"])
        .arg(scene.db_path())
        .env_remove("SCHEDLAB_DB")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        reap_survivors(&scene),
        0,
        "a killed schedlab's setup left processes the next start did not kill"
    );
}
