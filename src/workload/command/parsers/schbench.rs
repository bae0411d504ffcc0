//! schbench (github.com/masoncl/schbench): wake-up and request latency
//! percentiles and requests per second, from its text report (stderr) or
//! its `--json FILE` (`-j -`: stdout).
//!
//! The text report repeats its blocks every `--intervaltime` and once more
//! at the end, each covering the run so far: the last block of each kind
//! is the whole run's. Figures (µs, lower is better unless said):
//! `wakeup_p50_us`, `wakeup_p90_us`, `wakeup_p99_us`, `wakeup_p999_us`,
//! `wakeup_max_us`, the same for `request_`, `rps_p50` (requests/s, higher;
//! schbench's median of its per-second counts) and, in the text only,
//! `rps_avg` (its "average rps"), or for `--pipe` runs `transfer_ops_s`.
//! Percentiles: `wakeup` and `request` (schbench prints percentiles only:
//! no histogram).

use regex::Regex;
use std::sync::LazyLock;

use super::{Parsed, first_json, json_start};
use crate::workload::command::params::Better;

static HEADER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(Wakeup Latencies|Request Latencies|RPS) percentiles \(").expect("constant regex")
});
static ROW: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\s*\*?\s*([0-9.]+)th:\s+([0-9]+)").expect("constant regex"));
static MINMAX: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\s*min=([0-9]+), max=([0-9]+)").expect("constant regex"));
static AVG_RPS: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^average rps: ([0-9.]+)").expect("constant regex"));
static TRANSFER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^avg worker transfer: ([0-9.]+) ops/sec").expect("constant regex")
});

/// One block of the report: (percentile, value) rows and the max.
#[derive(Debug, Default, Clone)]
struct Block {
    rows: Vec<(f64, f64)>,
    max: Option<f64>,
}

/// "p50" for 50.0, "p999" for 99.9: a percentile in a figure's name.
pub fn pct_word(p: f64) -> String {
    format!("p{}", format!("{p}").replace('.', ""))
}

pub fn parse(text: &str) -> Result<Parsed, String> {
    if json_start(text).is_some() {
        return parse_json(text);
    }
    let mut blocks: [Option<Block>; 3] = Default::default();
    let mut current: Option<(usize, Block)> = None;
    let (mut avg_rps, mut transfer) = (None, None);
    for line in text.lines() {
        if let Some(c) = HEADER.captures(line) {
            finish(&mut blocks, current.take());
            let i = match &c[1] {
                "Wakeup Latencies" => 0,
                "Request Latencies" => 1,
                _ => 2,
            };
            current = Some((i, Block::default()));
        } else if let Some(c) = ROW.captures(line) {
            if let (Some((_, b)), Ok(p), Ok(v)) =
                (current.as_mut(), c[1].parse::<f64>(), c[2].parse::<f64>())
            {
                b.rows.push((p, v));
            }
        } else if let Some(c) = MINMAX.captures(line) {
            if let Some((_, b)) = current.as_mut() {
                b.max = c[2].parse().ok();
            }
            finish(&mut blocks, current.take());
        } else if let Some(c) = AVG_RPS.captures(line) {
            avg_rps = c[1].parse::<f64>().ok();
        } else if let Some(c) = TRANSFER.captures(line) {
            transfer = c[1].parse::<f64>().ok();
        }
    }
    finish(&mut blocks, current.take());
    let [wakeup, request, rps] = blocks;
    let Some(wakeup) = wakeup else {
        return Err(
            "no schbench report: no \"Wakeup Latencies percentiles\" block and no JSON".into(),
        );
    };
    let mut out = Parsed::default();
    latency(&mut out, "wakeup", &wakeup.rows, wakeup.max);
    if let Some(r) = request {
        latency(&mut out, "request", &r.rows, r.max);
    }
    if let Some(v) = rps.and_then(|r| r.rows.iter().find(|(p, _)| *p == 50.0).map(|r| r.1)) {
        out.figure("rps_p50", v, "requests/s", Better::Higher);
    }
    if let Some(v) = avg_rps {
        out.figure("rps_avg", v, "requests/s", Better::Higher);
    }
    if let Some(v) = transfer {
        out.figure("transfer_ops_s", v, "ops/s", Better::Higher);
    }
    Ok(out)
}

/// Keep a finished block as the latest of its kind.
fn finish(blocks: &mut [Option<Block>; 3], done: Option<(usize, Block)>) {
    if let Some((i, b)) = done.filter(|(_, b)| !b.rows.is_empty()) {
        blocks[i] = Some(b);
    }
}

/// The figures and percentiles of one latency (µs).
fn latency(out: &mut Parsed, name: &str, rows: &[(f64, f64)], max: Option<f64>) {
    for &(p, v) in rows {
        if [50.0, 90.0, 99.0, 99.9].contains(&p) {
            out.figure(
                &format!("{name}_{}_us", pct_word(p)),
                v,
                "µs",
                Better::Lower,
            );
        }
    }
    if let Some(m) = max {
        out.figure(&format!("{name}_max_us"), m, "µs", Better::Lower);
    }
    out.percentiles.insert(name.to_string(), rows.to_vec());
}

/// `--json`: {"normal": {...}, "int": {"wakeup_latency_pct50.0": 3, …}}.
fn parse_json(text: &str) -> Result<Parsed, String> {
    let doc = first_json(text)?;
    let int = doc
        .get("int")
        .and_then(|v| v.as_object())
        .ok_or("schbench JSON without its \"int\" object")?;
    let series = |label: &str| -> Vec<(f64, f64)> {
        let prefix = format!("{label}_pct");
        let mut rows: Vec<(f64, f64)> = int
            .iter()
            .filter_map(|(k, v)| Some((k.strip_prefix(&prefix)?.parse().ok()?, v.as_f64()?)))
            .collect();
        rows.sort_by(|a, b| a.0.total_cmp(&b.0));
        rows
    };
    let max = |label: &str| int.get(&format!("{label}_max")).and_then(|v| v.as_f64());
    let wakeup = series("wakeup_latency");
    if wakeup.is_empty() {
        return Err("schbench JSON without wakeup_latency percentiles".into());
    }
    let mut out = Parsed::default();
    latency(&mut out, "wakeup", &wakeup, max("wakeup_latency"));
    let request = series("request_latency");
    if !request.is_empty() {
        latency(&mut out, "request", &request, max("request_latency"));
    }
    if let Some(v) = series("rps").iter().find(|(p, _)| *p == 50.0) {
        out.figure("rps_p50", v.1, "requests/s", Better::Higher);
    }
    Ok(out)
}

pub fn claims(name: &str) -> bool {
    name.starts_with("wakeup_")
        || name.starts_with("request_")
        || name.starts_with("rps_")
        || name == "transfer_ops_s"
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::command::parsers::test_fig as fig;

    const TEXT: &str = include_str!("samples/schbench.txt");
    const JSON: &str = include_str!("samples/schbench.json");
    const PIPE: &str = include_str!("samples/schbench_pipe.txt");

    #[test]
    fn the_text_reports_last_block_is_the_runs() {
        // samples/schbench.txt: `schbench -m 1 -t 2 -r 2 -i 1 -F 64 -n 2`,
        // stderr: two interval reports and the final one.
        let p = parse(TEXT).unwrap();
        assert_eq!(fig(&p, "wakeup_p50_us"), 3.0);
        assert_eq!(fig(&p, "wakeup_p90_us"), 29.0);
        assert_eq!(fig(&p, "wakeup_p99_us"), 39.0);
        assert_eq!(fig(&p, "wakeup_p999_us"), 91.0);
        assert_eq!(fig(&p, "wakeup_max_us"), 2774.0);
        assert_eq!(fig(&p, "request_p50_us"), 361.0);
        assert_eq!(fig(&p, "request_p99_us"), 603.0);
        assert_eq!(fig(&p, "request_max_us"), 2443.0);
        assert_eq!(fig(&p, "rps_p50"), 4680.0);
        assert_eq!(fig(&p, "rps_avg"), 4818.5);
        assert_eq!(p.figures["wakeup_p99_us"].unit, "µs");
        assert_eq!(p.figures["wakeup_p99_us"].better, Better::Lower);
        assert_eq!(p.figures["rps_avg"].better, Better::Higher);
        assert_eq!(
            p.percentiles["request"],
            [(50.0, 361.0), (90.0, 488.0), (99.0, 603.0), (99.9, 645.0)]
        );
        assert!(p.histograms.is_empty());
        assert!(!p.figures.contains_key("transfer_ops_s"));
    }

    #[test]
    fn json_gives_the_same_figures_but_no_average() {
        // samples/schbench.json: `schbench -m 1 -t 2 -r 1 -F 64 -n 2 -j out.json`.
        let p = parse(JSON).unwrap();
        assert_eq!(fig(&p, "wakeup_p50_us"), 3.0);
        assert_eq!(fig(&p, "wakeup_p99_us"), 50.0);
        assert_eq!(fig(&p, "wakeup_p999_us"), 208.0);
        assert_eq!(fig(&p, "wakeup_max_us"), 928.0);
        assert_eq!(fig(&p, "request_p90_us"), 510.0);
        assert_eq!(fig(&p, "request_max_us"), 2628.0);
        assert_eq!(fig(&p, "rps_p50"), 0.0);
        assert!(!p.figures.contains_key("rps_avg"));
        assert_eq!(p.percentiles["wakeup"][0], (20.0, 2.0));
        assert_eq!(p.percentiles["wakeup"].len(), 5);
    }

    #[test]
    fn pipe_mode_has_wakeups_and_a_transfer_rate() {
        // samples/schbench_pipe.txt: `schbench -m 1 -t 2 -r 1 -p 1024`.
        let p = parse(PIPE).unwrap();
        assert_eq!(fig(&p, "wakeup_p99_us"), 28.0);
        assert_eq!(fig(&p, "transfer_ops_s"), 39424.28);
        assert!(!p.figures.contains_key("request_p99_us"));
    }

    #[test]
    fn no_report_is_an_error() {
        assert!(
            parse("schbench: usage\n")
                .unwrap_err()
                .contains("no schbench report")
        );
        assert!(parse("{\"normal\": {}}").unwrap_err().contains("\"int\""));
        // A block cut before its rows is not a report.
        let cut = "Wakeup Latencies percentiles (usec) runtime 1 (s) (0 total samples)\n";
        assert!(parse(cut).is_err());
    }

    #[test]
    fn percentile_words_and_claims() {
        assert_eq!(pct_word(50.0), "p50");
        assert_eq!(pct_word(99.9), "p999");
        assert_eq!(pct_word(99.99), "p9999");
        assert!(claims("wakeup_p99_us") && claims("rps_avg") && !claims("elapsed"));
    }
}
