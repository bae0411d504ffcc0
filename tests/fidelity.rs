//! End-to-end test of `schedlab bench fidelity --quick`: every row of the
//! table is printed, with both sides' figures and a verdict, or with the
//! reason it was skipped or could not be measured. It is a benchmark, so
//! whether a row passes is not tested. Its RT row (periodic, FIFO 90) is
//! short (2 s), pinned to CPU 0, and everything runs under a timeout.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::bin;

/// The rows, by the start of their name in the table.
const ROWS: [&str; 10] = [
    "pingpong pipe, 1 pair, CPU 0",
    "pingpong pipe, 1 pair, unpinned",
    "periodic 1 ms, FIFO 90, CPU 0",
    "messaging socket,",
    "pi, CPU 0",
    "matmul n=",
    "launch 200 workers",
    "command: hackbench",
    "command: perf bench sched pipe",
    "command: sh + 3 children, CPU 0",
];

/// The tools the rows use (the package names are in the skip reasons).
const TOOLS: [&str; 5] = ["perf", "cyclictest", "hackbench", "cc", "taskset"];

fn in_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
}

/// Run to the end or kill after `limit`; (exit code, stdout, stderr).
fn run_with_limit(cmd: &mut Command, limit: Duration) -> (Option<i32>, String, String) {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start schedlab");
    // Read both pipes on threads so that neither fills up.
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out_t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err_t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait for schedlab") {
            break s;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "schedlab bench fidelity --quick ran over {limit:?}; so far:\n{}",
                err_t.join().unwrap()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    (status.code(), out_t.join().unwrap(), err_t.join().unwrap())
}

#[test]
fn quick_fidelity_prints_every_row() {
    let dir = tempfile::tempdir().unwrap();
    let (code, out, err) = run_with_limit(
        Command::new(bin())
            .args(["bench", "fidelity", "--quick"])
            .current_dir(dir.path())
            .env_remove("SCHEDLAB_DB"),
        Duration::from_secs(300),
    );
    let all = format!("{out}\n--- stderr ---\n{err}");
    // 0: no row failed, 1: some did; never an error of the command itself.
    assert!(matches!(code, Some(0 | 1)), "exit {code:?}:\n{all}");
    let lines: Vec<&str> = out.lines().collect();
    let header = lines
        .iter()
        .position(|l| l.starts_with("row ") && l.contains("ours/ref") && l.contains("verdict"))
        .unwrap_or_else(|| panic!("no table header:\n{all}"));
    // Cells by the header's column starts (header cells hold no spaces).
    let chars: Vec<char> = lines[header].chars().collect();
    let starts: Vec<usize> = (0..chars.len())
        .filter(|&i| chars[i] != ' ' && (i == 0 || chars[i - 1] == ' '))
        .collect();
    assert_eq!(starts.len(), 6, "{}", lines[header]);
    let cell = |line: &str, col: usize| -> String {
        let c: Vec<char> = line.chars().collect();
        let from = starts[col].min(c.len());
        let to = starts.get(col + 1).map_or(c.len(), |&t| t.min(c.len()));
        c[from..to].iter().collect::<String>().trim().to_string()
    };
    let table = &lines[header + 1..header + 1 + ROWS.len()];
    for (name, line) in ROWS.iter().zip(table) {
        assert!(
            line.starts_with(name),
            "expected row {name:?}, got {line:?}:\n{all}"
        );
        let (ours, reference, ratio, verdict) =
            (cell(line, 1), cell(line, 2), cell(line, 3), cell(line, 5));
        match verdict.as_str() {
            // Judged: both sides measured, with a ratio.
            "PASS" | "FAIL" => {
                for (what, c) in [("ours", &ours), ("reference", &reference)] {
                    assert!(
                        c.chars().any(|ch| ch.is_ascii_digit()) && !c.starts_with('-'),
                        "{what} of a judged row has no figure: {line:?}"
                    );
                }
                assert!(
                    ratio.parse::<f64>().is_ok() || ratio.contains(", "),
                    "{line:?}"
                );
            }
            v if v.starts_with("FAIL: ") || v.starts_with("SKIP: ") => {
                assert!(v.len() > 12, "a reason is missing: {line:?}");
            }
            v => panic!("unexpected verdict {v:?} in {line:?}"),
        }
        // Progress on standard error, one line as the row starts and one
        // as it ends.
        assert_eq!(
            err.lines().filter(|l| l.contains(name)).count(),
            2,
            "progress of {name}:\n{err}"
        );
    }
    // The closing count adds up to the rows.
    assert!(out.contains("10 rows: "), "{all}");
    // With every tool installed, no row may be skipped for a missing one;
    // CI installs them all.
    let missing: Vec<&str> = TOOLS.into_iter().filter(|t| !in_path(t)).collect();
    if missing.is_empty() {
        assert!(!out.contains("not found (apt-get"), "{all}");
    } else {
        assert!(
            std::env::var_os("CI").is_none() && std::env::var_os("SCHEDLAB_REQUIRE_ROOT").is_none(),
            "CI must have {missing:?} (.ci/run installs them)"
        );
        for t in missing {
            assert!(out.contains(&format!("{t} not found")), "{all}");
        }
    }
}
