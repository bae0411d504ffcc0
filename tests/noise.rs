//! The noise recorded per run: a run beside an interrupt-heavy neighbour
//! pinned to its CPU (stress-ng's timer stressor) records more interrupts
//! and softirqs than a quiet run on the same CPU, and the figures are
//! exported; `env` says which sources this machine has.

mod common;

use common::*;
use std::path::Path;
use std::process::{Command, Stdio};

const SPEC: &str = r#"
name = "noise"
repetitions = 1
cooldown_s = 0
timeout_s = 30
[matrix]
policy = ["other"]
workload = ["pi"]
processes = [1]
cpus = ["0"]
[workloads.pi]
duration_s = 1.0
"#;

/// Interrupts + softirqs per second of the one run stored in `dir`.
fn events_per_s(dir: &Path) -> f64 {
    let conn = rusqlite::Connection::open(dir.join("t.db")).unwrap();
    let (irq, softirq, makespan_ns): (Option<i64>, Option<i64>, i64) = conn
        .query_row(
            "SELECT interrupts, softirqs, makespan_ns FROM runs WHERE status = 'ok'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    let (irq, softirq) = (irq.expect("interrupts"), softirq.expect("softirqs"));
    (irq + softirq) as f64 / (makespan_ns as f64 / 1e9)
}

fn run_campaign(dir: &Path) {
    std::fs::write(dir.join("s.toml"), SPEC).unwrap();
    let o = schedlab(&["run", "s.toml", "--db", "t.db"], dir);
    assert!(o.status.success(), "{}", text(&o));
}

/// Kills the neighbour it holds when dropped, so a failed assertion
/// leaves nothing running.
struct Neighbour(std::process::Child);

impl Drop for Neighbour {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn an_interrupt_heavy_neighbour_shows_in_the_runs_noise() {
    let have = Command::new("stress-ng")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !require_tool(have, "stress-ng is not installed") {
        return;
    }
    let quiet = tempfile::tempdir().unwrap();
    run_campaign(quiet.path());
    let quiet_per_s = events_per_s(quiet.path());

    // 100 000 timer expiries a second on CPU 0, for longer than the run.
    let noisy = tempfile::tempdir().unwrap();
    let neighbour = Neighbour(
        Command::new("stress-ng")
            .args(["--timer", "1", "--timer-freq", "100000", "--taskset", "0"])
            .args(["--timeout", "20s", "--quiet"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    // Let it reach its rate before the run starts.
    std::thread::sleep(std::time::Duration::from_millis(500));
    run_campaign(noisy.path());
    drop(neighbour);
    let noisy_per_s = events_per_s(noisy.path());
    let ratio = noisy_per_s / quiet_per_s;
    eprintln!(
        "interrupts + softirqs on CPU 0: quiet {quiet_per_s:.0}/s, beside the timer load {noisy_per_s:.0}/s, ratio {ratio:.1}"
    );
    assert!(
        ratio > 2.0,
        "quiet {quiet_per_s:.0}/s, noisy {noisy_per_s:.0}/s"
    );

    // Exported as stored.
    let o = schedlab(&["export", "--db", "t.db", "--format", "csv"], noisy.path());
    assert!(o.status.success(), "{}", text(&o));
    let csv = String::from_utf8(o.stdout).unwrap();
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    for name in ["interrupts", "softirqs", "cpu_freq_khz", "throttle_count"] {
        assert!(header.contains(&name), "no {name} column");
    }
    let at = header.iter().position(|&h| h == "interrupts").unwrap();
    let cells: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert!(cells[at].parse::<u64>().unwrap() > 0, "{csv}");
}

#[test]
fn env_says_which_noise_sources_this_machine_has() {
    let dir = tempfile::tempdir().unwrap();
    let o = schedlab(&["env"], dir.path());
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8(o.stdout).unwrap();
    let section = out
        .split("noise per run\n")
        .nth(1)
        .expect("a noise section");
    // Every source is named, either recorded or empty with a reason.
    for name in ["interrupts", "softirqs", "cpu_freq", "thermal_throttle"] {
        let line = section
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{name}:")))
            .unwrap_or_else(|| panic!("no {name} line in {section}"));
        assert!(
            line.ends_with(": recorded") || line.contains(": empty: "),
            "{line}"
        );
    }
    // cpufreq is reported as recorded exactly where it exists.
    let freq_here = Path::new("/sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq").exists();
    assert_eq!(
        section.contains("cpu_freq: recorded"),
        freq_here,
        "{section}"
    );
    let o = schedlab(&["env", "--json"], dir.path());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["noise_sources"]["softirqs"].is_string(), "{v}");
}
