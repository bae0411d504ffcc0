//! A program's tree figures against second observers (issue 19): its
//! run-queue wait, time slices and page faults against what each of its
//! tasks read of itself (`/proc/self/schedstat` and `/proc/self/stat`)
//! just before it exited, its peak memory against the peak RSS of a
//! program that allocates and touches 64 MiB, and its block I/O against
//! the bytes its children write.

mod common;
use common::{root_for_commands, schedlab_isolated, serial, text};

/// Runs one worker of `policy` on CPU 0 executing `argv` (TOML array
/// text) with the figures `figures` (TOML), and returns its exported row.
fn run_one(policy: &str, argv: &str, figures: &str) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("s.toml"),
        format!(
            "name = \"tree\"\nrepetitions = 1\ncooldown_s = 0\ntimeout_s = 30\n[matrix]\n\
             policy = [\"{policy}\"]\nworkload = [\"w\"]\nprocesses = [1]\ncpus = [\"0\"]\n\
             [workloads.w]\nkind = \"command\"\nargv = {argv}\n{figures}\n"
        ),
    )
    .unwrap();
    let o = schedlab_isolated(&["run", "s.toml", "--db", "t.db", "--quiet"], dir.path());
    assert!(o.status.success(), "{}", text(&o));
    let o = schedlab_isolated(&["export", "--db", "t.db", "--format", "json"], dir.path());
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = match v {
        serde_json::Value::Array(a) => a,
        other => other["rows"].as_array().cloned().unwrap_or_default(),
    };
    rows.into_iter().next().expect("one row")
}

fn figure(name: &str) -> String {
    format!(
        "[workloads.w.figures.{name}]\nregex = '{name} ([0-9]+)'\nunit = \"n\"\n\
         better = \"lower\"\n"
    )
}

/// Three CPU-bound children forked at once; each, and then the top shell
/// after `wait`, reads its own run-queue wait and run count
/// (`/proc/self/schedstat` fields 2 and 3) and minor faults
/// (`/proc/self/stat` field 10) through the shell's `read` (no new
/// process), the children into files the top sums.
const FORK3_SELF_OBSERVED: &str = r#"["sh", "-c", "for i in 1 2 3; do (n=0; while [ $n -lt 150000 ]; do n=$((n+1)); done; read a w s < /proc/self/schedstat; read p c st pp pg se tt tp fl mf rest < /proc/self/stat; echo $w $s $mf > c.$i) & done; wait; read a w s < /proc/self/schedstat; read p c st pp pg se tt tp fl mf rest < /proc/self/stat; tw=$w; ts=$s; tf=$mf; for f in c.1 c.2 c.3; do read w s mf < $f; tw=$((tw+w)); ts=$((ts+s)); tf=$((tf+mf)); done; echo topwait $w; echo wait $tw; echo slices $ts; echo faults $tf"]"#;

/// Under FIFO on one CPU the children run one after another, so the
/// second waits one child's time and the third two; the top shell, woken
/// by the first child's exit, waits behind the other two: five child
/// times in all, of which the top's two are its own, not counted twice.
#[test]
fn run_queue_wait_slices_and_faults_match_each_task_s_own_counters() {
    let _one_at_a_time = serial();
    if !root_for_commands() || !common::may_use_rt() {
        return;
    }
    let figures = ["topwait", "wait", "slices", "faults"].map(figure).concat();
    let r = run_one("fifo", FORK3_SELF_OBSERVED, &figures);
    assert_eq!(r["fig_tree_tasks"].as_f64(), Some(4.0), "{r}");
    let tree_wait = r["wait_ns"].as_f64().expect("wait_ns");
    let self_wait = r["fig_wait"].as_f64().unwrap();
    // After its reading a task only writes a line and exits: at most a
    // preemption's worth each (an interrupt, a higher RT task).
    let gap_ns = tree_wait - self_wait;
    assert!(
        (0.0..=4e6 + 0.02 * self_wait).contains(&gap_ns),
        "tree wait {tree_wait} ns, the tasks' own sum {self_wait} ns ({r})"
    );
    // The top shell's own wait is a real part of the sum (about two of the
    // five child times), not a second count of the children's.
    let top_wait = r["fig_topwait"].as_f64().unwrap();
    let top_share = top_wait / self_wait;
    assert!((0.2..0.6).contains(&top_share), "top's share {top_share}");
    let tree_slices = r["timeslices"].as_f64().expect("timeslices");
    let self_slices = r["fig_slices"].as_f64().unwrap();
    assert!(
        (0.0..=8.0 + 0.02 * self_slices).contains(&(tree_slices - self_slices)),
        "tree slices {tree_slices}, the tasks' own sum {self_slices}"
    );
    let tree_faults = r["minflt"].as_f64().unwrap();
    let self_faults = r["fig_faults"].as_f64().unwrap();
    assert!(self_faults > 100.0, "{self_faults}");
    assert!(
        (0.0..=200.0 + 0.02 * self_faults).contains(&(tree_faults - self_faults)),
        "tree minor faults {tree_faults}, the tasks' own sum {self_faults}"
    );
}

/// Two children that write 4 MiB each, through the page cache, to files
/// of their own.
const WRITE_2X4_MIB: &str =
    r#"["sh", "-c", "for i in 1 2; do head -c 4194304 /dev/zero > w.$i & done; wait"]"#;

/// A tree's `oublock` is the 512-byte blocks its tasks dirtied, from their
/// exit records: 2 × 4 MiB is 16,384 blocks, as each task's rusage would
/// count them.
#[test]
fn a_tree_that_writes_8_mib_has_its_16384_blocks_in_oublock() {
    let _one_at_a_time = serial();
    if !root_for_commands()
        || !schedlab::testing::skip_unless(
            schedlab::sys::proc::io_accounted(),
            "this kernel keeps no per-task I/O accounting (no /proc/self/io)",
        )
    {
        return;
    }
    // A tmpfs file has no writeback, so no block is counted there.
    let fs = std::process::Command::new("stat")
        .args(["-f", "-c", "%T"])
        .arg(std::env::temp_dir())
        .output()
        .unwrap();
    let fs = String::from_utf8_lossy(&fs.stdout).trim().to_string();
    if !schedlab::testing::skip_unless(fs != "tmpfs", "the temporary directory is a tmpfs") {
        return;
    }
    let r = run_one("other", WRITE_2X4_MIB, "");
    let blocks = r["oublock"].as_u64().expect("oublock");
    assert!(
        (16_384..=16_384 + 256).contains(&blocks),
        "{blocks} blocks for 8 MiB written ({r})"
    );
    assert!(r["inblock"].as_u64().is_some(), "{r}");
}

/// A program that allocates and touches 64 MiB, then prints its own peak
/// RSS (`getrusage`, KiB).
const TOUCH_64_MIB: &str = r#"["python3", "-c", "import resource; b = bytearray(b'x') * (64 << 20); print('maxrss', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"]"#;

#[test]
fn peak_memory_of_the_tree_matches_the_program_s_own_peak_rss() {
    let _one_at_a_time = serial();
    if !root_for_commands() {
        return;
    }
    let memory = schedlab::sys::cgroup::layout().hierarchies.iter().any(|h| {
        h.name == "memory"
            || (h.is_v2()
                && std::fs::read_to_string(h.base.join("cgroup.controllers"))
                    .is_ok_and(|c| c.split_whitespace().any(|c| c == "memory")))
    });
    if !schedlab::testing::skip_unless(
        memory,
        "neither a v1 memory hierarchy nor a cgroup2 one offering the memory controller",
    ) {
        return;
    }
    let r = run_one("other", TOUCH_64_MIB, &figure("maxrss"));
    let tree_kb = r["maxrss_kb"].as_f64().unwrap();
    let own_kb = r["fig_maxrss"].as_f64().unwrap();
    assert!(own_kb >= 64.0 * 1024.0, "{own_kb}");
    // The group also holds the page cache and kernel memory the program
    // charged (its libraries read for the first time), and the RSS counts
    // shared pages another group paid for: near, not equal.
    let ratio = tree_kb / own_kb;
    assert!(
        (0.85..1.25).contains(&ratio),
        "tree peak {tree_kb} KiB, the program's own {own_kb} KiB"
    );
}
