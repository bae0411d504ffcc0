//! A figure the kernel cannot give for a program's tree is empty, never 0
//! (issue 19), forced on this host by real cases where it is absent, not
//! by a switch in schedlab: schedlab in a network namespace of its own (as
//! in a container), where taskstats delivers no exit records, so the
//! tree's switches and page faults are not given; and in a mount namespace
//! without the v1 memory hierarchy (as on a machine that does not mount
//! it), so its peak memory is not given. Each is empty in the database,
//! in the CSV (an empty cell) and JSON (null) exports, and the report
//! says why instead of averaging zeros.

mod common;
use std::path::Path;
use std::process::{Command, Output};

use common::{bin, require_tool, root_for_commands, serial, skip_unless, text};

/// Two runs of one worker on CPU 0 running a short shell loop.
const SPEC: &str = "name = \"notgiven\"\nrepetitions = 2\ncooldown_s = 0\ntimeout_s = 30\n\
    [matrix]\npolicy = [\"other\"]\nworkload = [\"w\"]\nprocesses = [1]\ncpus = [\"0\"]\n\
    [workloads.w]\nkind = \"command\"\n\
    argv = [\"sh\", \"-c\", \"i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done\"]\n";

/// Runs `schedlab run` of [`SPEC`] in `dir` under `unshare` with
/// `unshare_args`, `before` run first in the new namespaces (a shell
/// command, or empty).
fn run_unshared(dir: &Path, unshare_args: &[&str], before: &str) -> Output {
    std::fs::write(dir.join("s.toml"), SPEC).unwrap();
    let script = format!("{before} exec \"$0\" run s.toml --db t.db --quiet");
    Command::new("unshare")
        .args(unshare_args)
        .args(["--", "sh", "-c", &script, bin()])
        .current_dir(dir)
        .env("SCHEDLAB_JOURNAL", dir.join("journal.json"))
        .env("TMPDIR", dir)
        .env_remove("SCHEDLAB_DB")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run unshare")
}

fn schedlab(dir: &Path, args: &[&str]) -> String {
    let o = common::schedlab_isolated(args, dir);
    assert!(o.status.success(), "{args:?}: {}", text(&o));
    String::from_utf8(o.stdout).unwrap()
}

/// Each worker row's `columns`, from the database, the CSV export and the
/// JSON export: (NULL in the database, empty in CSV, null in JSON) for
/// every row, and the CSV's rows.
fn assert_empty_everywhere(dir: &Path, columns: &[&str]) {
    let db = rusqlite::Connection::open(dir.join("t.db")).unwrap();
    for c in columns {
        let (rows, nulls): (i64, i64) = db
            .query_row(
                &format!("SELECT count(*), count(*) - count({c}) FROM processes"),
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!((rows, nulls), (2, 2), "{c} NULL in every row");
    }
    // Split at commas: the usage columns come before the first column
    // that may hold a quoted comma (`extra`).
    let csv = schedlab(dir, &["export", "--db", "t.db", "--format", "csv"]);
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 2, "{csv}");
    for c in columns {
        let at = header.iter().position(|h| h == c).unwrap();
        assert!(rows.iter().all(|r| r[at].is_empty()), "{c} empty: {csv}");
    }
    let json: serde_json::Value = serde_json::from_str(&schedlab(
        dir,
        &["export", "--db", "t.db", "--format", "json"],
    ))
    .unwrap();
    let rows = match json {
        serde_json::Value::Array(a) => a,
        other => other["rows"].as_array().cloned().unwrap_or_default(),
    };
    for c in columns {
        assert!(rows.iter().all(|r| r[c].is_null()), "{c} null: {rows:?}");
    }
    // Figures the kernel did give are there.
    let cpu: i64 = db
        .query_row("SELECT min(utime_us + stime_us) FROM processes", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert!(cpu > 0, "the tree's CPU time is still given");
}

/// In a network namespace of its own schedlab receives no taskstats exit
/// records: the tree's switches and page faults are empty, and the
/// report's switches say why.
#[test]
fn switches_and_faults_are_empty_without_exit_records() {
    let _one_at_a_time = serial();
    if !root_for_commands() || !require_tool(which("unshare"), "unshare (util-linux) not found") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let o = run_unshared(dir.path(), &["--net"], "");
    assert!(o.status.success(), "{}", text(&o));
    assert_empty_everywhere(dir.path(), &["nvcsw", "nivcsw", "minflt", "majflt"]);
    let db = rusqlite::Connection::open(dir.path().join("t.db")).unwrap();
    let why: String = db
        .query_row(
            "SELECT json_extract(extra_json, '$.command[0].missing.voluntary_switches') FROM runs LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(why.contains("network namespace"), "{why}");
    // The tree's block I/O comes from the same exit records: empty (not
    // 0) in every row, with the same why. (Checked in the database: its
    // columns sit after `extra_json`, which a CSV split at commas cannot
    // pass.)
    let empty: i64 = db
        .query_row(
            "SELECT count(*) FROM processes WHERE inblock IS NULL AND oublock IS NULL",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(empty, 2, "inblock and oublock NULL in every row");
    for key in ["read_blocks", "write_blocks"] {
        let why: String = db
            .query_row(
                &format!(
                    "SELECT json_extract(extra_json, '$.command[0].missing.{key}') FROM runs LIMIT 1"
                ),
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert!(why.contains("network namespace"), "{key}: {why}");
    }
    schedlab(
        dir.path(),
        &["report", "--db", "t.db", "--format", "md", "-o", "r.md"],
    );
    let md = std::fs::read_to_string(dir.path().join("r.md")).unwrap();
    for label in ["voluntary context switches", "involuntary context switches"] {
        let line = format!(
            "{label}: not given for any of its 2 ok runs (not given by this kernel: no taskstats \
             exit record of the tree's top process"
        );
        assert!(md.contains(&line), "{line}\n{md}");
    }
}

/// Without a memory group (the v1 memory hierarchy not mounted in
/// schedlab's mount namespace, and no v2 memory controller) the tree's
/// peak memory is empty.
#[test]
fn peak_memory_is_empty_without_a_memory_group() {
    let _one_at_a_time = serial();
    if !root_for_commands() || !require_tool(which("unshare"), "unshare (util-linux) not found") {
        return;
    }
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    let v1_memory: Vec<&str> = mounts
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() > 3 && f[2] == "cgroup" && f[3].split(',').any(|o| o == "memory"))
                .then_some(f[1])
        })
        .collect();
    let v2_memory = mounts
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() > 2 && f[2] == "cgroup2").then(|| f[1].to_string())
        })
        .any(|m| {
            std::fs::read_to_string(Path::new(&m).join("cgroup.subtree_control"))
                .is_ok_and(|c| c.split_whitespace().any(|x| x == "memory"))
        });
    if !skip_unless(
        !v1_memory.is_empty() && !v2_memory,
        "the memory controller is on cgroup2 here: hiding it would hide every hierarchy",
    ) {
        return;
    }
    let umounts: String = v1_memory.iter().map(|m| format!("umount {m} &&")).collect();
    let dir = tempfile::tempdir().unwrap();
    let o = run_unshared(
        dir.path(),
        &["--mount", "--propagation", "private"],
        &umounts,
    );
    assert!(o.status.success(), "{}", text(&o));
    assert_empty_everywhere(dir.path(), &["maxrss_kb"]);
    let db = rusqlite::Connection::open(dir.path().join("t.db")).unwrap();
    let why: String = db
        .query_row(
            "SELECT json_extract(extra_json, '$.command[0].missing.peak_memory_bytes') FROM runs LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(why.contains("memory group"), "{why}");
    // The host's own mounts were not touched.
    assert_eq!(
        std::fs::read_to_string("/proc/self/mounts").unwrap(),
        mounts
    );
}

fn which(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
}
