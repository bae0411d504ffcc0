//! `schedlab policy get / set / exec` against real processes: round trips of
//! every policy on a sleeping child, commands started under a policy, and
//! the errors (missing process, invalid arguments, refused policies, the
//! SCHED_DEADLINE admission test).
//!
//! Real-time and DEADLINE processes in these tests only ever sleep. Tests
//! that need privileges go through the shared rule of `common::require`:
//! they say why they did not run, are listed below the test summary, and
//! fail under `SCHEDLAB_REQUIRE_ROOT=1`.

use std::process::{Child, Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use schedlab::sys::probe::{Privileges, probe};
use serde_json::Value;

use crate::common;
use common::{bin, text};

fn schedlab(args: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run schedlab")
}

fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

/// DEADLINE bandwidth is global: tests that reserve it run one at a time.
static DL_LOCK: Mutex<()> = Mutex::new(());

fn dl_lock() -> MutexGuard<'static, ()> {
    DL_LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// What this user may do, probed once (under the DEADLINE lock, as the probe
/// briefly reserves DEADLINE bandwidth itself). Call before taking the lock.
fn privs() -> &'static Privileges {
    static PRIVS: OnceLock<Privileges> = OnceLock::new();
    PRIVS.get_or_init(|| {
        let _g = dl_lock();
        probe()
    })
}

/// Whether `policy` may be set here (the shared rule of `common::require`).
#[must_use = "return from the test when this is false"]
fn allowed(policy: &str) -> bool {
    let p = privs().policy(policy).expect("probed policy");
    common::require(
        p.allowed,
        format!(
            "SCHED_{} is not permitted here ({}); needs root or CAP_SYS_NICE",
            policy.to_ascii_uppercase(),
            p.detail
        ),
    )
}

/// A `sleep 30` child, killed and reaped when dropped (also on panic).
struct Sleeper(Child);

impl Sleeper {
    fn new() -> Sleeper {
        let child = Command::new("sleep")
            .arg("30")
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn sleep");
        let s = Sleeper(child);
        // Wait until the child has exec'd `sleep`, so that `comm` is right.
        let comm = format!("/proc/{}/comm", s.pid());
        let t0 = Instant::now();
        while std::fs::read_to_string(&comm)
            .ok()
            .as_deref()
            .map(str::trim)
            != Some("sleep")
            && t0.elapsed() < Duration::from_secs(5)
        {
            std::thread::sleep(Duration::from_millis(5));
        }
        s
    }

    fn pid(&self) -> i32 {
        self.0.id() as i32
    }

    fn pid_arg(&self) -> String {
        self.pid().to_string()
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn get_json(pid: &str) -> Value {
    let o = schedlab(&["policy", "get", pid, "--json"]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&o)))
}

fn set(pid: &str, args: &[&str]) -> Output {
    let mut all = vec!["policy", "set", pid];
    all.extend_from_slice(args);
    schedlab(&all)
}

fn online_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[test]
fn fair_policies_round_trip_with_nice() {
    for policy in ["other", "batch", "idle"] {
        let s = Sleeper::new();
        // SCHED_IDLE takes no nice value (the kernel ignores it and keeps the
        // current one), so idle gets its nice 5 from an OTHER step first.
        let first: &[&str] = if policy == "idle" {
            &["--policy", "other", "--nice", "5"]
        } else {
            &["--policy", policy, "--nice", "5"]
        };
        let o = set(&s.pid_arg(), first);
        assert_eq!(code(&o), 0, "{policy}: {}", text(&o));
        let o = if policy == "idle" {
            set(&s.pid_arg(), &["--policy", "idle"])
        } else {
            o
        };
        assert_eq!(code(&o), 0, "{policy}: {}", text(&o));
        // set prints what the process is now.
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            out.contains(&format!("pid            {} (sleep)", s.pid())),
            "{out}"
        );
        assert!(
            out.contains(&format!("policy         {policy} (SCHED_")),
            "{out}"
        );
        let v = get_json(&s.pid_arg());
        assert_eq!(v["pid"], s.pid());
        assert_eq!(v["comm"], "sleep");
        assert_eq!(v["policy"], policy, "{v}");
        assert_eq!(v["nice"], 5, "{v}");
        assert_eq!(v["priority"], Value::Null, "{v}");
        assert_eq!(v["runtime_ns"], Value::Null, "{v}");
        assert_eq!(v["reset_on_fork"], false, "{v}");
        assert!(
            v["rr_interval_source"]
                .as_str()
                .unwrap()
                .contains("fair-class slice"),
            "{v}"
        );
        assert!(!v["affinity"].as_array().unwrap().is_empty(), "{v}");
    }
}

#[test]
fn fair_policy_keeps_the_nice_value_unless_given() {
    let s = Sleeper::new();
    let o = set(&s.pid_arg(), &["--policy", "other", "--nice", "7"]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    let o = set(&s.pid_arg(), &["--policy", "batch"]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    let v = get_json(&s.pid_arg());
    assert_eq!(
        (v["policy"].as_str(), v["nice"].as_i64()),
        (Some("batch"), Some(7))
    );
}

#[test]
fn realtime_policies_round_trip_with_priority() {
    if !allowed("fifo") {
        return;
    }
    for policy in ["fifo", "rr"] {
        let s = Sleeper::new();
        let o = set(&s.pid_arg(), &["--policy", policy, "--priority", "10"]);
        assert_eq!(code(&o), 0, "{policy}: {}", text(&o));
        let v = get_json(&s.pid_arg());
        assert_eq!(v["policy"], policy, "{v}");
        assert_eq!(
            v["kernel_policy"],
            format!("SCHED_{}", policy.to_uppercase())
        );
        assert_eq!(v["priority"], 10, "{v}");
        assert_eq!(v["nice"], Value::Null, "{v}");
        let source = v["rr_interval_source"].as_str().unwrap();
        if policy == "rr" {
            assert!(v["rr_interval_ns"].as_u64().unwrap() > 0, "{v}");
            assert!(source.contains("sched_rr_timeslice_ms"), "{v}");
            // The interval is the sysctl, in milliseconds.
            let ms = std::fs::read_to_string("/proc/sys/kernel/sched_rr_timeslice_ms")
                .expect("sched_rr_timeslice_ms (Linux 3.9+)")
                .trim()
                .parse::<u64>()
                .expect("sched_rr_timeslice_ms is a number");
            let ns = v["rr_interval_ns"].as_u64().unwrap();
            // The kernel keeps it in jiffies: allow one jiffy (≤ 10 ms) of rounding.
            assert!(ns.abs_diff(ms * 1_000_000) <= 10_000_000, "{ns} vs {ms} ms");
        } else {
            assert_eq!(v["rr_interval_ns"], 0, "{v}");
            assert!(source.contains("no time slice"), "{v}");
        }
    }
}

#[test]
fn reset_on_fork_and_affinity_round_trip() {
    if !allowed("rr") {
        return;
    }
    let s = Sleeper::new();
    let o = set(
        &s.pid_arg(),
        &[
            "--policy",
            "rr",
            "--priority",
            "3",
            "--reset-on-fork",
            "--cpus",
            "0",
        ],
    );
    assert_eq!(code(&o), 0, "{}", text(&o));
    let v = get_json(&s.pid_arg());
    assert_eq!(v["reset_on_fork"], true, "{v}");
    assert_eq!(v["affinity"], serde_json::json!([0]), "{v}");
    assert_eq!(v["affinity_list"], "0", "{v}");
    // Back to SCHED_OTHER: reset-on-fork is cleared unless given again.
    let o = set(&s.pid_arg(), &["--policy", "other", "--cpus", "all"]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    let v = get_json(&s.pid_arg());
    assert_eq!(v["reset_on_fork"], false, "{v}");
    assert_eq!(
        v["affinity"].as_array().unwrap().len(),
        online_cpus(),
        "{v}"
    );
}

#[test]
fn affinity_alone_changes_nothing_else() {
    let s = Sleeper::new();
    let o = set(&s.pid_arg(), &["--policy", "batch", "--nice", "4"]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    let o = set(&s.pid_arg(), &["--cpus", "0"]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    let v = get_json(&s.pid_arg());
    assert_eq!(v["affinity"], serde_json::json!([0]), "{v}");
    assert_eq!(
        (v["policy"].as_str(), v["nice"].as_i64()),
        (Some("batch"), Some(4))
    );
}

#[test]
fn all_threads_lists_and_changes_every_thread() {
    let s = Sleeper::new();
    let o = set(
        &s.pid_arg(),
        &["--policy", "idle", "--all-threads", "--json"],
    );
    assert_eq!(code(&o), 0, "{}", text(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let threads = v["threads"].as_array().expect("threads with --all-threads");
    assert_eq!(threads.len(), 1, "{v}");
    assert_eq!(threads[0]["pid"], s.pid());
    assert_eq!(threads[0]["policy"], "idle");
    let o = schedlab(&["policy", "get", &s.pid_arg(), "--all-threads"]);
    let out = text(&o);
    assert!(out.contains("threads        1\n"), "{out}");
    assert!(out.contains("TID"), "{out}");
    // This test process has several threads: all are listed.
    let me = std::process::id().to_string();
    let v = {
        let o = schedlab(&["policy", "get", &me, "--json", "--all-threads"]);
        assert_eq!(code(&o), 0, "{}", text(&o));
        serde_json::from_slice::<Value>(&o.stdout).unwrap()
    };
    let n = std::fs::read_dir(format!("/proc/{me}/task"))
        .unwrap()
        .count();
    assert!(v["threads"].as_array().unwrap().len() >= n.min(2), "{v}");
}

#[test]
fn deadline_round_trip() {
    if !allowed("deadline") {
        return;
    }
    let _g = dl_lock();
    let s = Sleeper::new();
    let o = set(
        &s.pid_arg(),
        &[
            "--policy",
            "deadline",
            "--runtime",
            "1ms",
            "--deadline",
            "10ms",
            "--period",
            "10ms",
        ],
    );
    assert_eq!(code(&o), 0, "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("bandwidth      10.0% of one CPU"), "{out}");
    let v = get_json(&s.pid_arg());
    assert_eq!(v["policy"], "deadline", "{v}");
    assert_eq!(v["runtime_ns"], 1_000_000, "{v}");
    assert_eq!(v["deadline_ns"], 10_000_000, "{v}");
    assert_eq!(v["period_ns"], 10_000_000, "{v}");
    assert_eq!(v["priority"], Value::Null, "{v}");
    // The deadline defaults to the period.
    let o = set(
        &s.pid_arg(),
        &[
            "--policy",
            "deadline",
            "--runtime",
            "500us",
            "--period",
            "20ms",
        ],
    );
    assert_eq!(code(&o), 0, "{}", text(&o));
    let v = get_json(&s.pid_arg());
    assert_eq!(
        (
            v["runtime_ns"].as_u64(),
            v["deadline_ns"].as_u64(),
            v["period_ns"].as_u64()
        ),
        (Some(500_000), Some(20_000_000), Some(20_000_000)),
        "{v}"
    );
}

#[test]
fn deadline_admission_test_refusal_names_the_numbers() {
    if !allowed("deadline") {
        return;
    }
    let rt_runtime = std::fs::read_to_string("/proc/sys/kernel/sched_rt_runtime_us")
        .ok()
        .and_then(|s| s.trim().parse::<i64>().ok());
    if !common::skip_unless(
        rt_runtime != Some(-1),
        "sched_rt_runtime_us is -1, so the kernel admits any DEADLINE bandwidth",
    ) {
        return;
    }
    let _g = dl_lock();
    // Each task asks for a whole CPU; the limit is at most 100% of every CPU,
    // so one task more than there are CPUs must be refused.
    let mut sleepers = Vec::new();
    let mut refusal = None;
    for _ in 0..=online_cpus() {
        let s = Sleeper::new();
        let o = set(
            &s.pid_arg(),
            &[
                "--policy",
                "deadline",
                "--runtime",
                "10ms",
                "--period",
                "10ms",
            ],
        );
        sleepers.push(s);
        if code(&o) != 0 {
            refusal = Some(o);
            break;
        }
    }
    let o = refusal.expect("the admission test refused none of the DEADLINE tasks");
    let msg = text(&o);
    assert_eq!(code(&o), 1, "{msg}");
    assert!(msg.contains("EBUSY"), "{msg}");
    assert!(msg.contains("admission test failed"), "{msg}");
    assert!(
        msg.contains("requested 10 ms every 10 ms = 1.000 CPU"),
        "{msg}"
    );
    assert!(
        msg.contains("limit sched_rt_runtime_us/sched_rt_period_us = "),
        "{msg}"
    );
    assert!(msg.contains(&format!("× {} CPU", online_cpus())), "{msg}");
    // The same refusal for exec: the command does not run.
    let o = schedlab(&[
        "policy",
        "exec",
        "--policy",
        "deadline",
        "--runtime",
        "10ms",
        "--period",
        "10ms",
        "--",
        "echo",
        "RAN",
    ]);
    let msg = text(&o);
    assert_eq!(code(&o), 1, "{msg}");
    assert!(msg.contains("admission test failed"), "{msg}");
    assert!(msg.contains("the command did not run"), "{msg}");
    assert!(!msg.contains("RAN"), "{msg}");
    drop(sleepers);
}

#[test]
fn exec_returns_the_exit_code() {
    let o = schedlab(&[
        "policy", "exec", "--policy", "batch", "--", "sh", "-c", "exit 7",
    ]);
    assert_eq!(code(&o), 7, "{}", text(&o));
    let o = schedlab(&["policy", "exec", "--cpus", "0", "--", "true"]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    // Killed by SIGTERM: 128 + 15.
    let o = schedlab(&[
        "policy",
        "exec",
        "--policy",
        "other",
        "--",
        "sh",
        "-c",
        "kill -TERM $$",
    ]);
    assert_eq!(code(&o), 143, "{}", text(&o));
    // Standard output is the command's.
    let o = schedlab(&["policy", "exec", "--policy", "idle", "--", "echo", "hello"]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "hello\n");
}

#[test]
fn exec_of_a_missing_command_is_127() {
    let o = schedlab(&[
        "policy",
        "exec",
        "--policy",
        "batch",
        "--",
        "schedlab-no-such-command",
        "x",
    ]);
    assert_eq!(code(&o), 127, "{}", text(&o));
    assert!(
        text(&o).contains("cannot run schedlab-no-such-command: No such file or directory"),
        "{}",
        text(&o)
    );
}

/// `sh -c 'exec schedlab policy get $$ --json'` under the given arguments:
/// the command reports on itself.
fn exec_self_report(args: &[&str]) -> Value {
    let script = format!("exec '{}' policy get $$ --json", bin());
    let mut all = vec!["policy", "exec"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--", "sh", "-c", &script]);
    let o = schedlab(&all);
    assert_eq!(code(&o), 0, "{}", text(&o));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&o)))
}

#[test]
fn exec_applies_policy_and_affinity_before_the_command_runs() {
    let v = exec_self_report(&["--policy", "batch", "--nice", "6", "--cpus", "0"]);
    assert_eq!(v["policy"], "batch", "{v}");
    assert_eq!(v["nice"], 6, "{v}");
    assert_eq!(v["affinity"], serde_json::json!([0]), "{v}");
    assert_eq!(v["comm"], "schedlab", "{v}");

    if !allowed("fifo") {
        return;
    }
    let v = exec_self_report(&["--policy", "fifo", "--priority", "10", "--cpus", "0"]);
    assert_eq!(v["policy"], "fifo", "{v}");
    assert_eq!(v["priority"], 10, "{v}");
    assert_eq!(v["affinity"], serde_json::json!([0]), "{v}");
    let v = exec_self_report(&["--policy", "rr", "--priority", "2", "--reset-on-fork"]);
    assert_eq!(v["policy"], "rr", "{v}");
    assert_eq!(v["reset_on_fork"], true, "{v}");
}

#[test]
fn exec_under_deadline() {
    if !allowed("deadline") {
        return;
    }
    let _g = dl_lock();
    let v = exec_self_report(&[
        "--policy",
        "deadline",
        "--runtime",
        "1ms",
        "--period",
        "10ms",
    ]);
    assert_eq!(v["policy"], "deadline", "{v}");
    assert_eq!(v["runtime_ns"], 1_000_000, "{v}");
    assert_eq!(v["period_ns"], 10_000_000, "{v}");
}

#[test]
fn missing_process_is_an_error() {
    // PIDs are below pid_max, so pid_max itself never exists.
    let pid_max = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .ok()
        .and_then(|s| s.trim().parse::<i32>().ok())
        .unwrap_or(4_194_304);
    let pid = pid_max.to_string();
    for o in [
        schedlab(&["policy", "get", &pid]),
        schedlab(&["policy", "get", &pid, "--json", "--all-threads"]),
        set(&pid, &["--policy", "other"]),
        set(&pid, &["--cpus", "0", "--all-threads"]),
    ] {
        assert_eq!(code(&o), 1, "{}", text(&o));
        assert!(
            text(&o).contains(&format!("error: no process with pid {pid_max}")),
            "{}",
            text(&o)
        );
    }
}

#[test]
fn invalid_arguments_exit_2_naming_the_flag() {
    let s = Sleeper::new();
    let pid = s.pid_arg();
    let cases: &[(&[&str], &str)] = &[
        (&["--policy", "other", "--priority", "5"], "--priority"),
        (&["--policy", "fifo", "--priority", "0"], "1..99"),
        (&["--policy", "rr", "--priority", "100"], "1..99"),
        (&["--policy", "fifo"], "needs --priority"),
        (
            &["--policy", "fifo", "--priority", "5", "--nice", "1"],
            "--nice",
        ),
        (&["--policy", "other", "--nice", "20"], "-20..19"),
        (
            &["--policy", "idle", "--nice", "5"],
            "SCHED_IDLE ignores the nice value",
        ),
        (&["--policy", "bogus"], "allowed: other"),
        (&["--policy", "deadline", "--period", "10ms"], "--runtime"),
        (&["--policy", "deadline", "--runtime", "1ms"], "--period"),
        (
            &[
                "--policy",
                "deadline",
                "--runtime",
                "20ms",
                "--period",
                "10ms",
            ],
            "exceeds the deadline",
        ),
        (
            &[
                "--policy",
                "deadline",
                "--runtime",
                "1ms",
                "--deadline",
                "20ms",
                "--period",
                "10ms",
            ],
            "exceeds the period",
        ),
        (
            &["--policy", "deadline", "--runtime", "1", "--period", "10ms"],
            "no unit",
        ),
        (
            &["--policy", "batch", "--runtime", "1ms"],
            "only for --policy deadline",
        ),
        (&["--cpus", "1000"], "not online"),
        (&[], "nothing to change"),
    ];
    for (args, needle) in cases {
        let o = set(&pid, args);
        let msg = text(&o);
        assert_eq!(code(&o), 2, "{args:?}: {msg}");
        assert!(msg.contains("error: schedlab policy: "), "{args:?}: {msg}");
        assert!(msg.contains(needle), "{args:?}: {msg} lacks {needle}");
    }
    // Nothing was changed by the refused calls.
    let v = get_json(&pid);
    assert_eq!(
        (v["policy"].as_str(), v["nice"].as_i64()),
        (Some("other"), Some(0))
    );
    // clap's own errors (not a number) are usage errors too.
    let o = set(&pid, &["--policy", "fifo", "--priority", "ten"]);
    assert_eq!(code(&o), 2, "{}", text(&o));
}

#[test]
fn exec_with_invalid_deadline_exits_2_and_does_not_run() {
    let dir = std::env::temp_dir().join(format!("schedlab-policyctl-{}", std::process::id()));
    let marker = dir.join("ran");
    std::fs::create_dir_all(&dir).unwrap();
    let o = schedlab(&[
        "policy",
        "exec",
        "--policy",
        "deadline",
        "--runtime",
        "20ms",
        "--period",
        "10ms",
        "--",
        "touch",
        marker.to_str().unwrap(),
    ]);
    let ran = marker.exists();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(text(&o).contains("--runtime"), "{}", text(&o));
    assert!(!ran, "the command ran");
}

/// A command line that runs schedlab without CAP_SYS_NICE: directly when
/// this user is unprivileged, or as `nobody` through setpriv when root.
fn unprivileged(args: &[&str]) -> Option<Command> {
    let p = privs();
    if !p.cap_sys_nice && p.euid != 0 {
        let mut c = Command::new(bin());
        c.args(args);
        return Some(c);
    }
    let setpriv = common::setpriv()?;
    let mut c = Command::new(setpriv);
    c.args([
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        "--inh-caps=-all",
        bin(),
    ])
    .args(args);
    // Only if `nobody` may execute the test binary at all.
    let probe = Command::new(setpriv)
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
            bin(),
            "--help",
        ])
        .output()
        .ok()?;
    probe.status.success().then_some(c)
}

#[test]
fn refused_policies_are_explained() {
    let rlimit_rtprio = privs().rlimit_rtprio.0;
    let Some(mut cmd) = unprivileged(&[
        "policy",
        "exec",
        "--policy",
        "fifo",
        "--priority",
        "10",
        "--",
        "echo",
        "RAN",
    ]) else {
        let _ = common::skip_unless(
            false,
            "cannot run schedlab without CAP_SYS_NICE here (root without setpriv, or \
             `nobody` cannot execute the test binary)",
        );
        return;
    };
    if !common::skip_unless(
        rlimit_rtprio < 10,
        format!("RLIMIT_RTPRIO {rlimit_rtprio} allows FIFO 10 without privileges"),
    ) {
        return;
    }
    let o = cmd.output().unwrap();
    let msg = text(&o);
    assert_eq!(code(&o), 1, "{msg}");
    assert!(msg.contains("EPERM"), "{msg}");
    assert!(
        msg.contains("CAP_SYS_NICE") && msg.contains("RLIMIT_RTPRIO"),
        "{msg}"
    );
    assert!(msg.contains("the command did not run"), "{msg}");
    assert!(!msg.contains("RAN"), "{msg}");

    // Another user's process (as nobody, on a child of this process).
    if privs().euid == 0 {
        let s = Sleeper::new();
        let pid = s.pid_arg();
        let mut cmd = unprivileged(&["policy", "set", &pid, "--policy", "batch"]).unwrap();
        let o = cmd.output().unwrap();
        let msg = text(&o);
        assert_eq!(code(&o), 1, "{msg}");
        assert!(msg.contains("EPERM"), "{msg}");
        assert!(msg.contains("belongs to uid 0"), "{msg}");
        let v = get_json(&pid);
        assert_eq!(v["policy"], "other", "{v}");
    }
}
