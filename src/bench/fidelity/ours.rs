//! schedlab's side of the fidelity benchmark, through the real product
//! path: a tiny TOML spec of one run is written into the benchmark's
//! temporary directory, the running executable is started as `schedlab run
//! SPEC --db DB -q --allow-concurrent` (the benchmark holds the measurement
//! lock itself, for both sides of a row), and the figures are read back
//! with `schedlab export --db DB --format json`.
//!
//! Anything that goes wrong becomes a reason, never a panic: a spec error
//! (a workload kind this build does not know yet), a run stored as failed
//! or timed out (its reason and the workers' stderr), or a run skipped
//! because this machine or user may not use its policy (a skip, not a
//! failure).

use serde_json::{Map, Value};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use super::exec;
use super::{Problem, skip};

/// One run of one workload, as a spec.
#[derive(Debug, Clone, PartialEq)]
pub struct OursSpec {
    /// Campaign name (also the file names).
    pub name: String,
    /// `other` or `fifo`.
    pub policy: &'static str,
    /// RT priority under FIFO, nice 0 otherwise.
    pub rt_priority: Option<u32>,
    pub processes: u32,
    /// "all" or a CPU list.
    pub cpus: String,
    /// The `[workloads.w]` keys, one `key = value` per line.
    pub workload: Vec<String>,
    /// schedlab's own timeout of the run, s.
    pub timeout_s: f64,
}

impl OursSpec {
    pub fn toml(&self) -> String {
        let priorities = match self.rt_priority {
            Some(p) => format!("rt_priority = {p}"),
            None => "nice = 0".to_string(),
        };
        format!(
            "name = \"{name}\"\n\
             repetitions = 1\n\
             order = \"sequential\"\n\
             cooldown_s = 0\n\
             timeout_s = {timeout:?}\n\
             \n\
             [matrix]\n\
             policy = [\"{policy}\"]\n\
             workload = [\"w\"]\n\
             processes = [{processes}]\n\
             priorities = [\"p\"]\n\
             cpus = [\"{cpus}\"]\n\
             \n\
             [workloads.w]\n\
             {workload}\n\
             \n\
             [priorities.p]\n\
             mode = \"uniform\"\n\
             {priorities}\n",
            name = self.name,
            timeout = self.timeout_s.ceil(),
            policy = self.policy,
            processes = self.processes,
            cpus = self.cpus,
            workload = self.workload.join("\n"),
        )
    }
}

/// What one run gave: its export rows and the wall time of `schedlab run`.
#[derive(Debug, Clone)]
pub struct OursRun {
    /// The run's row of every worker (role "worker"), by process index.
    pub workers: Vec<Map<String, Value>>,
    /// Spawn to exit of the whole `schedlab run` command.
    pub command_wall: Duration,
}

impl OursRun {
    /// A number of the run (from its first worker's row).
    pub fn run_value(&self, column: &str) -> Result<f64, Problem> {
        self.workers
            .first()
            .and_then(|w| number(w, column))
            .ok_or_else(|| Problem::Fail(format!("schedlab's export has no {column}")))
    }

    /// The value of `column` for every worker, failing when one lacks it.
    pub fn per_worker(&self, column: &str) -> Result<Vec<f64>, Problem> {
        self.workers
            .iter()
            .map(|w| {
                number(w, column).ok_or_else(|| {
                    Problem::Fail(format!(
                        "schedlab's export has no {column} for process {}",
                        w.get("process_index").unwrap_or(&Value::Null)
                    ))
                })
            })
            .collect()
    }
}

/// A number of an export row: the column itself, else the workload figure
/// of that name (`fig_` + name), so that a figure that becomes a column of
/// its own (or the other way round) is still found.
pub fn number(row: &Map<String, Value>, column: &str) -> Option<f64> {
    let v = row
        .get(column)
        .filter(|v| !v.is_null())
        .or_else(|| row.get(&format!("fig_{column}")))?;
    v.as_f64()
        .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
}

/// The rows of `schedlab export --format json` (a JSON array of objects).
pub fn parse_export(text: &str) -> Result<Vec<Map<String, Value>>, String> {
    let v: Value =
        serde_json::from_str(text).map_err(|e| format!("schedlab export's JSON: {e}"))?;
    let Value::Array(rows) = v else {
        return Err("schedlab export's JSON is not an array".into());
    };
    rows.into_iter()
        .map(|r| match r {
            Value::Object(m) => Ok(m),
            _ => Err("schedlab export's JSON has a row that is not an object".into()),
        })
        .collect()
}

/// The workers of the one run in `rows`, or why that run is not usable:
/// skipped (a skip), failed or timed out (a failure, with the reason and
/// the first worker's stderr).
pub fn workers_of(rows: Vec<Map<String, Value>>) -> Result<Vec<Map<String, Value>>, Problem> {
    let first = rows
        .first()
        .ok_or_else(|| Problem::Fail("schedlab stored no run".into()))?;
    let text = |r: &Map<String, Value>, k: &str| {
        r.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let status = text(first, "status");
    let reason = text(first, "reason");
    match status.as_str() {
        "ok" => {}
        "skipped" => return Err(skip(format!("schedlab skipped the run: {reason}"))),
        _ => {
            let stderr = rows
                .iter()
                .map(|r| text(r, "stderr_tail"))
                .find(|s| !s.trim().is_empty())
                .map(|s| format!(" (worker: {})", s.trim().replace('\n', " | ")))
                .unwrap_or_default();
            return Err(Problem::Fail(format!(
                "schedlab's run {status}: {reason}{stderr}"
            )));
        }
    }
    let mut workers: Vec<_> = rows
        .into_iter()
        .filter(|r| r.get("role").and_then(Value::as_str) == Some("worker"))
        .collect();
    workers.sort_by_key(|r| r.get("process_index").and_then(Value::as_u64));
    if workers.is_empty() {
        return Err(Problem::Fail("schedlab's run has no worker rows".into()));
    }
    Ok(workers)
}

/// What `schedlab run` said went wrong: its `error:` message, on one line
/// (without the excerpt of the spec a TOML error shows).
fn error_message(ran: &exec::Ran) -> String {
    let Some(start) = ran.stderr.find("error:") else {
        return ran.tail(2);
    };
    ran.stderr[start..]
        .lines()
        .map(str::trim)
        .filter(|l| {
            let excerpt = l.starts_with('|')
                || l.split_once(" |")
                    .is_some_and(|(n, _)| n.chars().all(|c| c.is_ascii_digit()));
            !l.is_empty() && !excerpt
        })
        .collect::<Vec<_>>()
        .join(": ")
}

/// Run `spec` with `exe` (the schedlab binary) in `dir` and read its
/// figures back.
pub fn run(exe: &Path, dir: &Path, spec: &OursSpec) -> Result<OursRun, Problem> {
    let fail = |m: String| Problem::Fail(m);
    let spec_path = dir.join(format!("{}.toml", spec.name));
    let db = dir.join(format!("{}.db", spec.name));
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
    }
    std::fs::write(&spec_path, spec.toml())
        .map_err(|e| fail(format!("writing {}: {e}", spec_path.display())))?;
    let mut cmd = Command::new(exe);
    cmd.arg("run")
        .arg(&spec_path)
        .arg("--db")
        .arg(&db)
        .args(["-q", "--allow-concurrent"])
        .current_dir(dir);
    // schedlab's own timeout ends the run; ours only guards against a
    // schedlab that hangs outside it (calibration, database).
    let timeout = Duration::from_secs_f64(spec.timeout_s + 120.0);
    let ran = exec::run(&mut cmd, timeout).map_err(|e| fail(format!("{e:#}")))?;
    if ran.timed_out {
        return Err(fail(format!(
            "schedlab run timed out after {:.0} s and was killed",
            ran.wall.as_secs_f64()
        )));
    }
    // 0: ok; 3: runs failed (stored, with their reasons: read below);
    // anything else (2: the spec was refused) stored nothing useful.
    match ran.status.code() {
        Some(0 | 3) => {}
        _ => {
            // The spec's name says enough; its temporary directory does not.
            let message = error_message(&ran).replace(&format!("{}/", dir.display()), "");
            return Err(fail(format!(
                "schedlab run failed ({}): {message}",
                ran.status
            )));
        }
    }
    let export = exec::run(
        Command::new(exe)
            .arg("export")
            .arg("--db")
            .arg(&db)
            .args(["--format", "json"]),
        Duration::from_secs(120),
    )
    .map_err(|e| fail(format!("{e:#}")))?;
    export.check("schedlab export").map_err(fail)?;
    let rows = parse_export(&export.stdout).map_err(fail)?;
    Ok(OursRun {
        workers: workers_of(rows)?,
        command_wall: ran.wall,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> OursSpec {
        OursSpec {
            name: "fidelity-periodic-1".into(),
            policy: "fifo",
            rt_priority: Some(90),
            processes: 1,
            cpus: "0".into(),
            workload: vec![
                "kind = \"periodic\"".into(),
                "period_us = 1000".into(),
                "activations = 500".into(),
            ],
            timeout_s: 10.5,
        }
    }

    #[test]
    fn spec_text_is_one_run() {
        let t = spec().toml();
        let v: toml::Value = toml::from_str(&t).unwrap();
        assert_eq!(v["repetitions"].as_integer(), Some(1));
        assert_eq!(v["timeout_s"].as_float(), Some(11.0));
        assert_eq!(v["matrix"]["policy"][0].as_str(), Some("fifo"));
        assert_eq!(v["matrix"]["cpus"][0].as_str(), Some("0"));
        assert_eq!(v["workloads"]["w"]["kind"].as_str(), Some("periodic"));
        assert_eq!(v["workloads"]["w"]["activations"].as_integer(), Some(500));
        assert_eq!(v["priorities"]["p"]["rt_priority"].as_integer(), Some(90));
        // A spec of a workload schedlab has today loads and plans one run.
        let pi = OursSpec {
            policy: "other",
            rt_priority: None,
            workload: vec!["kind = \"pi\"".into(), "iterations = 1000".into()],
            ..spec()
        };
        let s = crate::spec::load(&pi.toml(), "test", &[]).unwrap();
        assert_eq!(crate::plan::expand(&s, 0).len(), 1);
    }

    #[test]
    fn export_rows_are_read_by_column_or_figure() {
        let rows = parse_export(
            r#"[
{"status":"ok","reason":"","role":"worker","process_index":1,"lat_p50_us":3.5,"fig_round_trips_per_s":1000.0,"makespan_ns":5000000},
{"status":"ok","reason":"","role":"hog","process_index":2},
{"status":"ok","reason":"","role":"worker","process_index":0,"lat_p50_us":null,"fig_lat_p50_us":4.0,"fig_round_trips_per_s":"2000"}
]"#,
        )
        .unwrap();
        let run = OursRun {
            workers: workers_of(rows).unwrap(),
            command_wall: Duration::ZERO,
        };
        assert_eq!(run.workers.len(), 2);
        assert_eq!(run.per_worker("lat_p50_us").unwrap(), [4.0, 3.5]);
        assert_eq!(
            run.per_worker("round_trips_per_s").unwrap(),
            [2000.0, 1000.0]
        );
        assert_eq!(run.run_value("makespan_ns").ok(), None);
        assert!(matches!(
            run.per_worker("lat_p99_us"),
            Err(Problem::Fail(_))
        ));
        assert!(parse_export("{}").is_err());
    }

    #[test]
    fn spec_errors_are_one_line() {
        let stderr = "note\nerror: pp.toml: TOML parse error at line 8, column 1
  |
8 | round_trips = 100
  | ^^^^^^^^^^^
unknown field `round_trips`, expected one of `kind`, `duration_s`
";
        let ran = exec::run(
            Command::new("sh").args(["-c", &format!("printf '%s' '{stderr}' >&2; exit 2")]),
            Duration::from_secs(10),
        )
        .unwrap();
        assert_eq!(
            error_message(&ran),
            "error: pp.toml: TOML parse error at line 8, column 1: \
             unknown field `round_trips`, expected one of `kind`, `duration_s`"
        );
    }

    #[test]
    fn unusable_runs_give_reasons() {
        let rows = |status: &str| {
            parse_export(&format!(
                r#"[{{"status":"{status}","reason":"needs CAP_SYS_NICE","role":"worker","stderr_tail":"boom\n"}}]"#
            ))
            .unwrap()
        };
        let Err(Problem::Skip(s)) = workers_of(rows("skipped")) else {
            panic!("not a skip")
        };
        assert!(s.contains("CAP_SYS_NICE"), "{s}");
        let Err(Problem::Fail(f)) = workers_of(rows("failed")) else {
            panic!("not a failure")
        };
        assert!(f.contains("failed") && f.contains("boom"), "{f}");
        assert!(workers_of(Vec::new()).is_err());
    }
}
