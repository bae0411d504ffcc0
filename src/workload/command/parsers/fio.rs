//! fio with `--output-format=json`: bandwidth, IOPS and completion latency
//! of each direction (read, write, trim) that did any I/O.
//!
//! Figures per direction `D`, over every job: `D_bw_mib_s` (MiB/s,
//! higher is better) and `D_iops` (ops/s, higher), the jobs' sums;
//! `D_clat_mean_us` (µs, lower), the mean over every completion of every
//! job (exact: each job's mean weighted by its count). Percentiles of one
//! job cannot be pooled with another's, so `D_clat_p50_us`, `D_clat_p99_us`
//! and `D_clat_p999_us` are given only when there is one job (or
//! `group_reporting`, which makes one); the percentile lists are `D_clat`
//! for one job, `D_clat_jobN` for job N of several. A job that reports an
//! error fails the parse.

use serde_json::Value;

use super::{Parsed, first_json};
use crate::workload::command::params::Better;

const DIRECTIONS: [&str; 3] = ["read", "write", "trim"];

/// fio's percentile keys ("99.900000") for the figures given.
const FIGURE_PCTS: [(f64, &str); 3] = [(50.0, "p50"), (99.0, "p99"), (99.9, "p999")];

pub fn parse(text: &str) -> Result<Parsed, String> {
    let doc = first_json(text)?;
    let jobs = doc
        .get("jobs")
        .and_then(Value::as_array)
        .filter(|j| !j.is_empty())
        .ok_or("fio JSON without jobs (was --output-format=json given?)")?;
    for (i, job) in jobs.iter().enumerate() {
        let err = job.get("error").and_then(Value::as_i64).unwrap_or(0);
        if err != 0 {
            let name = job.get("jobname").and_then(Value::as_str).unwrap_or("?");
            return Err(format!("fio job {i} ({name}) reported error {err}"));
        }
    }
    let mut out = Parsed::default();
    for dir in DIRECTIONS {
        direction(&mut out, jobs, dir)?;
    }
    if out.figures.is_empty() {
        return Err("fio did no I/O in any job".into());
    }
    Ok(out)
}

/// The figures of one direction, if any job did I/O in it.
fn direction(out: &mut Parsed, jobs: &[Value], dir: &str) -> Result<(), String> {
    let stats: Vec<&Value> = jobs.iter().filter_map(|j| j.get(dir)).collect();
    let num = |v: &Value, path: &str| v.pointer(path).and_then(Value::as_f64).unwrap_or(0.0);
    let io_bytes: f64 = stats.iter().map(|s| num(s, "/io_bytes")).sum();
    if io_bytes <= 0.0 {
        return Ok(());
    }
    let bw: f64 = stats.iter().map(|s| num(s, "/bw_bytes")).sum();
    let iops: f64 = stats.iter().map(|s| num(s, "/iops")).sum();
    out.figure(
        &format!("{dir}_bw_mib_s"),
        bw / (1u64 << 20) as f64,
        "MiB/s",
        Better::Higher,
    );
    out.figure(&format!("{dir}_iops"), iops, "ops/s", Better::Higher);
    let n: f64 = stats.iter().map(|s| num(s, "/clat_ns/N")).sum();
    if n > 0.0 {
        let sum_ns: f64 = stats
            .iter()
            .map(|s| num(s, "/clat_ns/mean") * num(s, "/clat_ns/N"))
            .sum();
        out.figure(
            &format!("{dir}_clat_mean_us"),
            sum_ns / n / 1e3,
            "µs",
            Better::Lower,
        );
    }
    let one = stats.len() == 1;
    for (i, s) in stats.iter().enumerate() {
        let Some(pcts) = s.pointer("/clat_ns/percentile").and_then(Value::as_object) else {
            continue;
        };
        let mut rows = Vec::with_capacity(pcts.len());
        for (k, v) in pcts {
            let p: f64 = k
                .parse()
                .map_err(|_| format!("fio JSON: {dir} percentile key \"{k}\""))?;
            let ns = v
                .as_f64()
                .ok_or_else(|| format!("fio JSON: {dir} percentile {k} is {v}"))?;
            rows.push((p, ns / 1e3));
        }
        rows.sort_by(|a, b| a.0.total_cmp(&b.0));
        if one {
            for (p, word) in FIGURE_PCTS {
                if let Some(&(_, us)) = rows.iter().find(|r| r.0 == p) {
                    out.figure(&format!("{dir}_clat_{word}_us"), us, "µs", Better::Lower);
                }
            }
            out.percentiles.insert(format!("{dir}_clat"), rows);
        } else {
            out.percentiles.insert(format!("{dir}_clat_job{i}"), rows);
        }
    }
    Ok(())
}

pub fn claims(name: &str) -> bool {
    DIRECTIONS.iter().any(|d| {
        name.strip_prefix(d)
            .is_some_and(|rest| rest.starts_with('_'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::command::parsers::test_fig as fig;

    #[test]
    fn one_job_gives_its_percentiles() {
        // `fio --name=one --size=4M --bs=4k --rw=randread --ioengine=psync
        //  --runtime=300ms --time_based --output-format=json`.
        let p = parse(include_str!("samples/fio_one_job.json")).unwrap();
        assert_eq!(fig(&p, "read_bw_mib_s"), 49886830.0 / 1048576.0);
        assert_eq!(fig(&p, "read_iops"), 12179.401993);
        assert!((fig(&p, "read_clat_mean_us") - 80.989870431).abs() < 1e-9);
        assert_eq!(fig(&p, "read_clat_p50_us"), 50.432);
        assert_eq!(fig(&p, "read_clat_p99_us"), 218.112);
        assert_eq!(fig(&p, "read_clat_p999_us"), 5013.504);
        // No writes: no write figures.
        assert!(!p.figures.keys().any(|k| k.starts_with("write")));
        let rows = &p.percentiles["read_clat"];
        assert_eq!(rows.len(), 17);
        assert_eq!(rows[0].0, 1.0);
        assert!(rows.windows(2).all(|w| w[0].0 < w[1].0));
        assert!(p.histograms.is_empty());
    }

    #[test]
    fn two_jobs_sum_rates_and_keep_percentiles_apart() {
        // `fio --name=mixed --rw=randrw --numjobs=2 … --output-format=json`.
        let p = parse(include_str!("samples/fio.json")).unwrap();
        assert!((fig(&p, "read_iops") - (13974.051896 + 13874.251497)).abs() < 1e-6);
        assert!((fig(&p, "write_iops") - (14039.92016 + 14185.628743)).abs() < 1e-6);
        assert!((fig(&p, "write_bw_mib_s") - (57507512.0 + 58104335.0) / 1048576.0).abs() < 1e-9);
        let mean = (52373.984145 * 7001.0 + 52569.841606 * 6951.0) / (7001.0 + 6951.0) / 1e3;
        assert!((fig(&p, "read_clat_mean_us") - mean).abs() < 1e-9);
        assert!(!p.figures.contains_key("read_clat_p99_us"));
        assert!(p.percentiles.contains_key("read_clat_job0"));
        assert!(p.percentiles.contains_key("write_clat_job1"));
        assert!(!p.figures.keys().any(|k| k.starts_with("trim")));
    }

    #[test]
    fn errors_and_foreign_output() {
        assert!(
            parse("fio-3.33\nrandread: (g=0): rw=randread\n")
                .unwrap_err()
                .contains("no JSON")
        );
        assert!(
            parse("{\"jobs\": []}")
                .unwrap_err()
                .contains("without jobs")
        );
        let failed = r#"{"jobs": [{"jobname": "x", "error": 5, "read": {"io_bytes": 1}}]}"#;
        assert_eq!(parse(failed).unwrap_err(), "fio job 0 (x) reported error 5");
        let idle = r#"{"jobs": [{"jobname": "x", "error": 0, "read": {"io_bytes": 0}}]}"#;
        assert!(parse(idle).unwrap_err().contains("no I/O"));
        assert!(claims("read_iops") && claims("trim_bw_mib_s") && !claims("readme"));
    }
}
