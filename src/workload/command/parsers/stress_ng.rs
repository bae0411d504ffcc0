//! stress-ng with `--metrics` (or `--metrics-brief`): bogo operations per
//! stressor, from its YAML (`--yaml FILE`) or from the metrics table it
//! logs on stderr.
//!
//! Figures per stressor `S` (its name made fit for a figure, `sock-fd` →
//! `sock_fd`): `S_bogo_ops` (count, higher is better), `S_bogo_ops_s`
//! (bogo-ops per second of real time, higher) and `S_bogo_ops_s_cpu` (per
//! second of user + system CPU time, higher). No latencies.

use yaml_rust2::{Yaml, YamlLoader};

use super::{Parsed, figure_word};
use crate::workload::command::figures::parse_number;
use crate::workload::command::params::Better;

/// One stressor's row.
#[derive(Debug, Clone, PartialEq)]
struct Row {
    stressor: String,
    bogo_ops: f64,
    per_s_real: f64,
    per_s_cpu: f64,
}

pub fn parse(text: &str) -> Result<Parsed, String> {
    let rows = if text.lines().any(|l| l.starts_with("metrics:")) {
        from_yaml(text)?
    } else {
        from_log(text)?
    };
    let mut out = Parsed::default();
    for r in rows {
        let s = figure_word(&r.stressor);
        out.figure(&format!("{s}_bogo_ops"), r.bogo_ops, "", Better::Higher);
        out.figure(
            &format!("{s}_bogo_ops_s"),
            r.per_s_real,
            "bogo-ops/s",
            Better::Higher,
        );
        out.figure(
            &format!("{s}_bogo_ops_s_cpu"),
            r.per_s_cpu,
            "bogo-ops/s",
            Better::Higher,
        );
    }
    Ok(out)
}

fn number(y: &Yaml) -> Option<f64> {
    y.as_f64().or_else(|| y.as_i64().map(|i| i as f64))
}

/// `--yaml FILE`: `metrics:` is a list of {stressor, bogo-ops,
/// bogo-ops-per-second-real-time, bogo-ops-per-second-usr-sys-time, …}.
fn from_yaml(text: &str) -> Result<Vec<Row>, String> {
    let docs =
        YamlLoader::load_from_str(text).map_err(|e| format!("its YAML does not parse: {e}"))?;
    let metrics = docs
        .iter()
        .find_map(|d| d["metrics"].as_vec())
        .filter(|m| !m.is_empty())
        .ok_or("stress-ng YAML without metrics (was --metrics given?)")?;
    metrics
        .iter()
        .map(|m| {
            let stressor = m["stressor"]
                .as_str()
                .ok_or("stress-ng YAML: a metrics entry without its stressor")?
                .to_string();
            let get = |k: &str| {
                number(&m[k]).ok_or_else(|| format!("stress-ng YAML: {stressor} has no number {k}"))
            };
            Ok(Row {
                bogo_ops: get("bogo-ops")?,
                per_s_real: get("bogo-ops-per-second-real-time")?,
                per_s_cpu: get("bogo-ops-per-second-usr-sys-time")?,
                stressor,
            })
        })
        .collect()
}

/// The `metrc:` lines of its log: a header naming the columns, then one
/// row per stressor (`cpu 1658 1.00 0.97 0.00 1657.80 1706.22 …`: bogo ops,
/// real, user and system seconds, bogo ops/s real, bogo ops/s usr+sys).
fn from_log(text: &str) -> Result<Vec<Row>, String> {
    let mut rows = Vec::new();
    let mut in_table = false;
    for line in text.lines() {
        let Some(rest) = line.split_once("metrc:").map(|(_, r)| r) else {
            continue;
        };
        // "[pid] stressor …": drop the pid.
        let body = rest
            .trim_start()
            .split_once(']')
            .map_or(rest, |(_, b)| b)
            .trim();
        if body.starts_with("stressor") {
            in_table = true;
            continue;
        }
        if !in_table {
            continue;
        }
        let words: Vec<&str> = body.split_whitespace().collect();
        let nums: Option<Vec<f64>> = words
            .iter()
            .skip(1)
            .take(6)
            .map(|w| parse_number(w))
            .collect();
        match nums {
            Some(n) if n.len() == 6 => rows.push(Row {
                stressor: words[0].to_string(),
                bogo_ops: n[0],
                per_s_real: n[4],
                per_s_cpu: n[5],
            }),
            // The units line under the header, then what follows the table.
            _ if body.starts_with('(') => {}
            _ => in_table = false,
        }
    }
    if rows.is_empty() {
        return Err(
            "no stress-ng metrics: no YAML `metrics:` and no \"metrc:\" table (was \
                    --metrics given?)"
                .into(),
        );
    }
    Ok(rows)
}

pub fn claims(name: &str) -> bool {
    name.ends_with("_bogo_ops")
        || name.ends_with("_bogo_ops_s")
        || name.ends_with("_bogo_ops_s_cpu")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::command::parsers::test_fig as fig;

    #[test]
    fn yaml_metrics_per_stressor() {
        // `stress-ng --cpu 1 --switch 1 --timeout 1 --metrics --yaml FILE`.
        let p = parse(include_str!("samples/stress_ng.yaml")).unwrap();
        assert_eq!(fig(&p, "cpu_bogo_ops"), 1658.0);
        assert_eq!(fig(&p, "cpu_bogo_ops_s"), 1657.796447);
        assert_eq!(fig(&p, "cpu_bogo_ops_s_cpu"), 1706.215957);
        assert_eq!(fig(&p, "switch_bogo_ops"), 235275.0);
        assert_eq!(fig(&p, "switch_bogo_ops_s"), 235173.177507);
        assert_eq!(p.figures.len(), 6);
        assert_eq!(p.figures["cpu_bogo_ops_s"].unit, "bogo-ops/s");
        assert_eq!(p.figures["cpu_bogo_ops_s"].better, Better::Higher);
    }

    #[test]
    fn the_log_table_of_the_same_run() {
        // Its stderr: the same run, rounded to two decimals.
        let p = parse(include_str!("samples/stress_ng.txt")).unwrap();
        assert_eq!(fig(&p, "cpu_bogo_ops"), 1658.0);
        assert_eq!(fig(&p, "cpu_bogo_ops_s"), 1657.80);
        assert_eq!(fig(&p, "cpu_bogo_ops_s_cpu"), 1706.22);
        assert_eq!(fig(&p, "switch_bogo_ops_s"), 235173.18);
        // "miscellaneous metrics:" ends the table: no figure from it.
        assert_eq!(p.figures.len(), 6);
    }

    #[test]
    fn without_metrics_it_is_an_error() {
        let log = "stress-ng: info:  [1] dispatching hogs: 1 cpu\n\
                   stress-ng: info:  [1] successful run completed in 1.00s\n";
        assert!(parse(log).unwrap_err().contains("no stress-ng metrics"));
        assert!(
            parse("---\nmetrics:\n")
                .unwrap_err()
                .contains("without metrics")
        );
        assert!(
            parse("metrics:\n  - stressor: cpu\n")
                .unwrap_err()
                .contains("no number bogo-ops")
        );
        assert!(
            parse("metrics: [unclosed\n")
                .unwrap_err()
                .contains("does not parse")
        );
        assert!(claims("cpu_bogo_ops_s") && !claims("bogo"));
    }
}
