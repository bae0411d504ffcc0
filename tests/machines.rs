//! Machines as a campaign factor, end to end: one campaign on this
//! machine, a Debian 6.1 guest (CFS) and a Debian 6.12 guest (EEVDF) in
//! deterministic mode (`tcg-icount`), both of 2 sockets × 2 cores. Checked:
//! the topology each guest reports, the CPU shares of nice 0 and nice 5
//! against the kernel's weight table in each guest, a lone pi worker's
//! wall time nearly constant in the deterministic guest, and a `kill -9`
//! of schedlab during a guest's run: no QEMU is left, and the campaign
//! resumes to its end with nothing stored twice.
//!
//! The kernels come from `SCHEDLAB_KERNEL_CACHE` (CI points it at the
//! shared cache beside the repository) or are built by schedlab (about 10
//! minutes each on two CPUs).

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The kernel's weights of nice 0 and nice 5 (kernel/sched/core.c,
/// sched_prio_to_weight).
const WEIGHT_NICE0: f64 = 1024.0;
const WEIGHT_NICE5: f64 = 335.0;

/// Repetitions of each condition: the issue's 5 for the deterministic
/// guest's CV. The matrix leaves out the two conditions no check reads
/// (`matrix.exclude`), so 5 repetitions cost fewer runs than 3 of the
/// whole product did (the icount guest runs at about 12 s of host time per
/// guest second).
const REPS: usize = 5;

const SPEC: &str = r#"
name = "machines"
repetitions = 5
cooldown_s = 0
timeout_s = 60
[matrix]
policy = ["other"]
workload = ["solo", "share"]
processes = [1, 2]
cpus = ["0"]
priorities = ["nices"]
machine = ["host", "cfs", "eevdf"]
[[matrix.exclude]]
workload = "solo"
processes = 2
[[matrix.exclude]]
workload = "share"
processes = 1
[priorities.nices]
mode = "list"
nice = [0, 5]
[workloads.solo]
kind = "pi"
iterations = 3000000
[workloads.share]
kind = "pi"
duration_s = 0.4
[machines.cfs]
kernel = "debian-6.1"
topology = "2x2x1"
accel = "tcg"
[machines.eevdf]
kernel = "debian-6.12"
topology = "2x2x1"
accel = "tcg-icount"
"#;

/// The kernel cache to read: the environment's, or the shared one beside
/// the repository when it is there.
fn kernel_cache() -> Option<PathBuf> {
    if let Some(c) = std::env::var_os("SCHEDLAB_KERNEL_CACHE") {
        return Some(PathBuf::from(c));
    }
    let shared = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/kernels");
    shared.is_dir().then_some(shared)
}

fn run_cmd(dir: &Path, db: &Path) -> Command {
    let mut c = Command::new(bin());
    c.args(["run", "spec.toml", "--db"])
        .arg(db)
        .current_dir(dir)
        .env("CI", "1")
        .env("TMPDIR", dir)
        .env_remove("SCHEDLAB_DB")
        .stdin(Stdio::null());
    if let Some(cache) = kernel_cache() {
        c.env("SCHEDLAB_KERNEL_CACHE", cache);
    }
    c
}

/// QEMU processes whose command line names `dir` (this test's guests).
fn qemus_of(dir: &Path) -> Vec<i32> {
    let needle = dir.to_string_lossy().into_owned();
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains("qemu-system") && cmdline.contains(&needle) {
            found.push(pid);
        }
    }
    found
}

fn stored(db: &Path, sql: &str) -> i64 {
    let c = rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY);
    c.ok()
        .and_then(|c| c.query_row(sql, [], |r| r.get(0)).ok())
        .unwrap_or(0)
}

#[test]
fn guests_boot_measure_and_resume_after_kill() {
    if !require(
        schedlab::sys::proc::euid() == 0,
        "guests need root here (the campaign's cgroups and tracefs in the guest are root's; QEMU's files)",
    ) || !require_tool(
        Command::new("qemu-system-x86_64")
            .arg("--version")
            .output()
            .is_ok(),
        "QEMU is not installed (Debian: qemu-system-x86)",
    ) {
        return;
    }
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("spec.toml"), SPEC).unwrap();
    let db = dir.path().join("m.db");

    // Start, and kill -9 once a guest's run is under way.
    let mut child = run_cmd(dir.path(), &db)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let limit = Duration::from_secs(3600);
    loop {
        let guest_runs = stored(&db, "SELECT count(*) FROM runs WHERE machine = 'cfs'");
        if guest_runs >= 2 && !qemus_of(dir.path()).is_empty() {
            break;
        }
        if let Ok(Some(status)) = child.try_wait() {
            let mut err = String::new();
            use std::io::Read;
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            panic!("the campaign ended ({status}) before a guest ran twice:\n{err}");
        }
        assert!(started.elapsed() < limit, "no guest run within an hour");
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_millis(700));
    child.kill().unwrap();
    child.wait().unwrap();
    let killed_at = Instant::now();
    while !qemus_of(dir.path()).is_empty() && killed_at.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        qemus_of(dir.path()),
        Vec::<i32>::new(),
        "QEMU outlived a kill -9 of schedlab by 5 s"
    );
    let before = stored(&db, "SELECT count(*) FROM runs");
    let last_id = stored(&db, "SELECT max(id) FROM runs");
    check_plan_uses_measured(dir.path(), &db);

    // Resume to the end.
    let resumed_at = Instant::now();
    let out = run_cmd(dir.path(), &db).output().unwrap();
    let resume_s = resumed_at.elapsed().as_secs_f64();
    assert!(
        out.status.success(),
        "the resumed campaign failed:\n{}",
        text(&out)
    );
    let runs = stored(&db, "SELECT count(*) FROM runs");
    let keys = stored(&db, "SELECT count(DISTINCT run_key) FROM runs");
    assert_eq!(
        runs,
        3 * 2 * REPS as i64,
        "every run stored: {}",
        text(&out)
    );
    assert_eq!(keys, runs, "a run stored twice");
    assert!(before < runs, "the kill came before the end");
    assert_eq!(
        stored(&db, "SELECT count(*) FROM runs WHERE status <> 'ok'"),
        0,
        "{}",
        text(&out)
    );

    check_topologies(&db);
    check_shares(&db);
    check_deterministic_wall(&db);
    check_host_times(&db, last_id, resume_s);
    check_compare_and_report(dir.path(), &db);
}

/// After the kill, `plan` estimates the guest levels from what the campaign
/// measured: the CFS guest's boot and runs.
fn check_plan_uses_measured(dir: &Path, db: &Path) {
    let mut c = Command::new(bin());
    c.args(["plan", "spec.toml", "--json", "--db"])
        .arg(db)
        .current_dir(dir)
        .env_remove("SCHEDLAB_DB");
    if let Some(cache) = kernel_cache() {
        c.env("SCHEDLAB_KERNEL_CACHE", cache);
    }
    let out = c.output().unwrap();
    assert!(out.status.success(), "plan: {}", text(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let lines: Vec<&str> = v["estimate_guests"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|l| l.as_str())
        .collect();
    let cfs = lines
        .iter()
        .find(|l| l.starts_with("cfs:"))
        .unwrap_or_else(|| panic!("{lines:?}"));
    assert!(
        cfs.contains("measured)") && cfs.contains("from the host times of its"),
        "{lines:?}"
    );
    let eevdf = lines.iter().find(|l| l.starts_with("eevdf:")).unwrap();
    assert!(eevdf.contains("not measured yet"), "{lines:?}");
    assert!(v["estimate_s"].as_f64().unwrap() > 0.0);
}

/// A guest run's id, machine level, makespan (ns), host time and boot (ms).
type GuestRunTimes = (i64, String, Option<i64>, Option<f64>, Option<f64>);

/// Every guest run stored its host time, each boot its own; under TCG the
/// guest's clock follows the host's, so a run's host time is at least its
/// makespan in the guest; and the host times and boots of the resumed
/// invocation's runs fit within its wall time measured here.
fn check_host_times(db: &Path, last_id: i64, resume_s: f64) {
    let c = rusqlite::Connection::open(db).unwrap();
    let mut stmt = c
        .prepare(
            "SELECT id, machine, makespan_ns, json_extract(extra_json, '$.guest_host_ms'),
                    json_extract(extra_json, '$.guest_boot_ms')
             FROM runs WHERE machine <> 'host'",
        )
        .unwrap();
    let rows: Vec<GuestRunTimes> = stmt
        .query_map([], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(rows.len(), 2 * 2 * REPS);
    let mut resumed_s = 0.0;
    for (id, machine, makespan, host_ms, boot_ms) in &rows {
        let host_ms = host_ms.unwrap_or_else(|| panic!("run {id} ({machine}): no guest_host_ms"));
        assert!(host_ms > 0.0, "run {id}: {host_ms}");
        if let (Some(m), "cfs") = (makespan, machine.as_str()) {
            assert!(
                host_ms >= *m as f64 / 1e6 * 0.99,
                "run {id}: {host_ms} ms of host time for a makespan of {m} ns under TCG"
            );
        }
        if *id > last_id {
            resumed_s += (host_ms + boot_ms.unwrap_or(0.0)) / 1e3;
        }
    }
    for machine in ["cfs", "eevdf"] {
        let boots = rows
            .iter()
            .filter(|r| r.1 == machine && r.4.is_some())
            .count();
        assert!(boots >= 1, "{machine}: no boot stored");
    }
    eprintln!("resumed: {resumed_s:.1} s of guest runs and boots in {resume_s:.1} s");
    assert!(
        resumed_s <= resume_s,
        "the resumed runs' host times and boots ({resumed_s:.1} s) exceed the invocation's {resume_s:.1} s"
    );
}

/// `compare` across the two guest levels of the campaign, and the report's
/// first screen with each level's environment.
fn check_compare_and_report(dir: &Path, db: &Path) {
    let db = db.to_str().unwrap();
    let out = schedlab(
        &[
            "compare",
            "--db",
            db,
            "--machine",
            "cfs",
            "--vs-machine",
            "eevdf",
            "--expect",
            "kernel",
            "--format",
            "json",
            "-o",
            "-",
        ],
        dir,
    );
    assert!(out.status.success(), "compare: {}", text(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["baseline"]["machine"], "cfs", "{v}");
    assert_eq!(v["candidate"]["machine"], "eevdf");
    let rows = v["comparisons"].as_array().unwrap();
    assert!(!rows.is_empty());
    for r in rows.iter().filter(|r| r["metric"] == "wall") {
        assert_eq!(
            (r["n_baseline"].as_u64(), r["n_candidate"].as_u64()),
            (Some(REPS as u64), Some(REPS as u64)),
            "{r}"
        );
    }
    let out = schedlab(&["report", "--db", db, "--format", "md", "-o", "-"], dir);
    assert!(out.status.success(), "report: {}", text(&out));
    let md = String::from_utf8_lossy(&out.stdout);
    for want in [
        "The machine levels",
        "cfs: Linux 6.1.",
        "eevdf: Linux 6.12.",
        "host: Linux",
    ] {
        assert!(md.contains(want), "{want}: {md}");
    }
}

/// Each guest sees 2 sockets of 2 cores, one thread each.
fn check_topologies(db: &Path) {
    let c = rusqlite::Connection::open(db).unwrap();
    let mut stmt = c
        .prepare(
            "SELECT DISTINCT r.machine, e.json FROM runs r JOIN environments e ON e.id = r.environment_id",
        )
        .unwrap();
    let rows: Vec<(String, String)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    for (machine, json) in rows {
        let env: serde_json::Value = serde_json::from_str(&json).unwrap();
        let topo = &env["topology"];
        if machine == "host" {
            assert!(env["guest"].is_null());
            continue;
        }
        assert_eq!(env["cpus_online"], 4, "{machine}: {env}");
        assert_eq!(topo["sockets"], 2, "{machine}: {topo}");
        assert_eq!(topo["cores"], 4, "{machine}: {topo}");
        assert_eq!(topo["threads_per_core"], 1, "{machine}: {topo}");
        assert_eq!(env["guest"]["machine"], machine.as_str());
        let release = env["kernel_release"].as_str().unwrap();
        let want = if machine == "cfs" { "6.1." } else { "6.12." };
        assert!(release.starts_with(want), "{machine}: {release}");
    }
}

/// Nice 0 beside nice 5 on one CPU: in each guest its weight's share of
/// their CPU time within 5 % (the table: 0.7535; measured here 0.7611 in
/// the TCG guest, 0.7520 in the deterministic one; 0.714–0.761 per run
/// under TCG). Under TCG it held only once every worker waited at the
/// barrier before release: nice 5 had loaded beside nice 0's work and
/// reached its own past the window (0.93–0.99; launch::ready).
fn check_shares(db: &Path) {
    let want = WEIGHT_NICE0 / (WEIGHT_NICE0 + WEIGHT_NICE5);
    let c = rusqlite::Connection::open(db).unwrap();
    for machine in ["cfs", "eevdf"] {
        let share: f64 = c
            .query_row(
                "SELECT sum(CASE WHEN p.nice = 0 THEN p.run_ns END) * 1.0 / sum(p.run_ns)
                 FROM processes p JOIN runs r ON r.id = p.run_id
                 WHERE r.machine = ?1 AND r.workload = 'share' AND r.processes = 2",
                [machine],
                |r| r.get(0),
            )
            .unwrap();
        eprintln!("{machine}: nice 0's share {share:.4}, the weight table's {want:.4}");
        assert!(
            (share / want - 1.0).abs() < 0.05,
            "{machine}: nice 0's share {share:.4} against the weight table's {want:.4}"
        );
    }
}

/// In the deterministic guest a lone pi worker's wall time, from its start
/// to its end, varies by less than 0.5 % over its runs. (Its start after
/// the barrier's release is left out: waking an idle vCPU waits for QEMU's
/// round robin of vCPUs on its one thread, 0.04 to 3.4 ms measured.)
fn check_deterministic_wall(db: &Path) {
    let c = rusqlite::Connection::open(db).unwrap();
    let mut stmt = c
        .prepare(
            "SELECT p.end_ns - p.start_ns FROM processes p JOIN runs r ON r.id = p.run_id
             WHERE r.machine = 'eevdf' AND r.workload = 'solo' AND r.processes = 1",
        )
        .unwrap();
    let walls: Vec<f64> = stmt
        .query_map([], |r| r.get::<_, i64>(0))
        .unwrap()
        .map(|v| v.unwrap() as f64)
        .collect();
    assert_eq!(walls.len(), REPS);
    let n = REPS as f64;
    let mean = walls.iter().sum::<f64>() / n;
    let sd = (walls.iter().map(|w| (w - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    eprintln!(
        "eevdf (tcg-icount): a lone pi worker's wall {:.2} ms, CV {:.4} % over {REPS} runs",
        mean / 1e6,
        100.0 * sd / mean
    );
    assert!(
        sd / mean < 0.005,
        "the deterministic guest's pi wall times {walls:?}: CV {:.3} %",
        100.0 * sd / mean
    );
}

/// A kernel that is not a bzImage, memory beyond this machine's and CPUs
/// a topology lacks are refused by `plan` and `run` (exit 2), naming the
/// key, before anything boots.
#[test]
fn bad_machine_levels_are_refused_naming_their_key() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "kernel = \"/etc/passwd\"",
            "cpus = [\"0\"]",
            "machines.g.kernel",
        ),
        (
            "kernel = \"debian-6.12\"\nmemory_mib = 1048576",
            "cpus = [\"0\"]",
            "machines.g.memory_mib",
        ),
        (
            "kernel = \"debian-6.12\"\ntopology = \"1x2x1\"",
            "cpus = [\"3\"]",
            "machine \"g\"",
        ),
        (
            "kernel = \"debian-9.9\"",
            "cpus = [\"0\"]",
            "machines.g.kernel",
        ),
        // Linux 6.1 hangs bringing up a second CPU under icount.
        (
            "kernel = \"debian-6.1\"\ntopology = \"1x2x1\"\naccel = \"tcg-icount\"",
            "cpus = [\"0\"]",
            "machines.g.accel",
        ),
    ];
    for (table, cpus, want) in cases {
        let spec = format!(
            "name = \"bad\"\n[matrix]\nworkload = [\"pi\"]\n{cpus}\nmachine = [\"g\"]\n\
             [workloads.pi]\niterations = 1000\n[machines.g]\n{table}\n"
        );
        std::fs::write(dir.path().join("bad.toml"), spec).unwrap();
        for cmd in ["plan", "run"] {
            let out = schedlab(&[cmd, "bad.toml", "--db", "bad.db"], dir.path());
            assert_eq!(out.status.code(), Some(2), "{cmd} {table}: {}", text(&out));
            assert!(text(&out).contains(want), "{cmd} {table}: {}", text(&out));
        }
        assert!(
            !dir.path().join("bad.db").exists(),
            "{table}: a refused spec made a database"
        );
    }
}
