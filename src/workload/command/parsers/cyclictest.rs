//! cyclictest (rt-tests): wake-up latency of periodic threads, from its
//! `--json=FILE`, its histogram on stdout (`-h US` / `-H US`), or its
//! summary lines (`T: 0 (…) … Min: … Avg: … Max: …`, the last per thread).
//!
//! Figures over all threads (µs, lower is better): `min_us`, `avg_us`
//! (weighted by each thread's cycles), `max_us`, and `cycles` (count,
//! higher: activations measured). With a histogram (asked for with `-h`):
//! the histogram `wakeup`, all threads' buckets added (exact: they share
//! 1-µs buckets), and `overflows` (events beyond its last bucket, whose
//! values it does not keep). cyclictest prints no percentiles.

use regex::Regex;
use std::collections::BTreeMap;
use std::sync::LazyLock;

use super::{Histogram, Parsed, first_json, json_start};
use crate::workload::command::params::Better;

static SUMMARY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"T:\s*(\d+)\s*\(\s*\d+\).*?C:\s*(\d+)\s+Min:\s*(\d+)\s+Act:\s*\d+\s+Avg:\s*(\d+)\s+Max:\s*(\d+)")
        .expect("constant regex")
});

/// One thread's results.
#[derive(Debug, Clone, Default, PartialEq)]
struct Thread {
    cycles: u64,
    min_us: f64,
    avg_us: f64,
    max_us: f64,
    histogram: Histogram,
}

pub fn parse(text: &str) -> Result<Parsed, String> {
    let threads = if json_start(text).is_some() {
        from_json(text)?
    } else if text.lines().any(|l| l.starts_with("# Min Latencies:")) {
        from_histogram_text(text)?
    } else {
        from_summary_lines(text)?
    };
    Ok(figures(&threads))
}

fn figures(threads: &[Thread]) -> Parsed {
    let mut out = Parsed::default();
    // Saturating: a sum beyond MAX_COUNT fails the parse's bounds check.
    let cycles = threads.iter().fold(0u64, |a, t| a.saturating_add(t.cycles));
    let weighted: f64 = threads.iter().map(|t| t.avg_us * t.cycles as f64).sum();
    out.figure("cycles", cycles as f64, "", Better::Higher);
    let min = threads
        .iter()
        .map(|t| t.min_us)
        .fold(f64::INFINITY, f64::min);
    let max = threads.iter().map(|t| t.max_us).fold(0.0, f64::max);
    if cycles > 0 {
        out.figure("min_us", min, "µs", Better::Lower);
        out.figure("avg_us", weighted / cycles as f64, "µs", Better::Lower);
        out.figure("max_us", max, "µs", Better::Lower);
    }
    let mut pooled = Histogram::default();
    for t in threads {
        pooled.add(&t.histogram);
    }
    if pooled.total() + pooled.overflows > 0 {
        out.figure("overflows", pooled.overflows as f64, "", Better::Lower);
        out.histograms.insert("wakeup".into(), pooled);
    }
    out
}

/// `--json=FILE`: {"thread": {"0": {"histogram": {"13": 624, …}, "cycles", "min", "avg", "max"}}}.
fn from_json(text: &str) -> Result<Vec<Thread>, String> {
    let doc = first_json(text)?;
    let threads = doc
        .get("thread")
        .and_then(|t| t.as_object())
        .filter(|t| !t.is_empty())
        .ok_or("cyclictest JSON without threads")?;
    let mut out = Vec::new();
    for (id, t) in threads {
        let num = |k: &str| {
            t.get(k)
                .and_then(|v| v.as_f64())
                .ok_or_else(|| format!("cyclictest JSON: thread {id} has no number \"{k}\""))
        };
        // A count is a whole number of events: anything else (negative,
        // fractional, beyond u64) is refused, never read as 0.
        let count = |v: &serde_json::Value, what: &str| {
            v.as_u64().ok_or_else(|| {
                format!("cyclictest JSON: {what} of thread {id} is {v}, not a count of events")
            })
        };
        let mut h = Histogram::default();
        if let Some(buckets) = t.get("histogram").and_then(|v| v.as_object()) {
            for (us, n) in buckets {
                let us: u64 = us
                    .parse()
                    .map_err(|_| format!("cyclictest JSON: bucket \"{us}\" of thread {id}"))?;
                h.counts.insert(us, count(n, &format!("bucket {us}"))?);
            }
        }
        let cycles = t
            .get("cycles")
            .ok_or_else(|| format!("cyclictest JSON: thread {id} has no number \"cycles\""))?;
        let cycles = count(cycles, "\"cycles\"")?;
        // The JSON keeps no overflow count: the cycles its buckets miss.
        if !h.counts.is_empty() {
            h.overflows = cycles.saturating_sub(h.total());
        }
        out.push(Thread {
            cycles,
            min_us: num("min")?,
            avg_us: num("avg")?,
            max_us: num("max")?,
            histogram: h,
        });
    }
    Ok(out)
}

/// The numbers after `key` on the `# key` line of the histogram's summary.
fn summary_row(text: &str, key: &str) -> Result<Vec<u64>, String> {
    let line = text
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix(key))
        .ok_or_else(|| format!("cyclictest histogram without its \"{key}\" line"))?;
    line.split_whitespace()
        .map(|w| {
            w.parse::<u64>()
                .map_err(|_| format!("cyclictest: \"{key}{line}\""))
        })
        .collect()
}

/// `-h US` / `-H US` on stdout: `BUCKET COUNT…` rows (one column per
/// thread, `-H` adds a total column, ignored), then `# Total:`,
/// `# Min Latencies:`, … lines.
fn from_histogram_text(text: &str) -> Result<Vec<Thread>, String> {
    let mins = summary_row(text, "# Min Latencies:")?;
    let n = mins.len();
    let avgs = summary_row(text, "# Avg Latencies:")?;
    let maxs = summary_row(text, "# Max Latencies:")?;
    let totals = summary_row(text, "# Total:")?;
    let overflows = summary_row(text, "# Histogram Overflows:")?;
    if [&avgs, &maxs, &totals, &overflows]
        .iter()
        .any(|r| r.len() < n)
    {
        return Err(format!(
            "cyclictest histogram summary does not cover its {n} threads"
        ));
    }
    let mut counts: Vec<BTreeMap<u64, u64>> = vec![BTreeMap::new(); n];
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let cols: Vec<u64> = match line.split_whitespace().map(str::parse).collect() {
            Ok(c) => c,
            Err(_) => continue,
        };
        if cols.len() > n {
            for (t, &c) in cols[1..=n].iter().enumerate() {
                if c > 0 {
                    counts[t].insert(cols[0], c);
                }
            }
        }
    }
    Ok((0..n)
        .map(|t| Thread {
            cycles: totals[t].saturating_add(overflows[t]),
            min_us: mins[t] as f64,
            avg_us: avgs[t] as f64,
            max_us: maxs[t] as f64,
            histogram: Histogram {
                counts: std::mem::take(&mut counts[t]),
                overflows: overflows[t],
            },
        })
        .collect())
}

/// The `T:` lines (quiet or live output: the last line of each thread).
fn from_summary_lines(text: &str) -> Result<Vec<Thread>, String> {
    let mut last: BTreeMap<u64, Thread> = BTreeMap::new();
    for c in SUMMARY.captures_iter(text) {
        // Digits beyond u64 are refused, never read as 0.
        let mut nums = [0u64; 5];
        for (i, n) in nums.iter_mut().enumerate() {
            let w = &c[i + 1];
            *n = w
                .parse()
                .map_err(|_| format!("cyclictest: {w} in \"{}\" is beyond a count", &c[0]))?;
        }
        let n = |i: usize| nums[i - 1];
        last.insert(
            n(1),
            Thread {
                cycles: n(2),
                min_us: n(3) as f64,
                avg_us: n(4) as f64,
                max_us: n(5) as f64,
                histogram: Histogram::default(),
            },
        );
    }
    if last.is_empty() {
        return Err("no cyclictest results: no JSON, histogram or \"T:\" line".into());
    }
    Ok(last.into_values().collect())
}

pub fn claims(name: &str) -> bool {
    ["cycles", "min_us", "avg_us", "max_us", "overflows"].contains(&name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::command::parsers::test_fig as fig;

    #[test]
    fn json_without_a_histogram() {
        // `cyclictest -a 0 -t 1 -p 10 -i 1000 -D 1 -q --json=FILE`.
        let p = parse(include_str!("samples/cyclictest.json")).unwrap();
        assert_eq!(fig(&p, "cycles"), 1000.0);
        assert_eq!(fig(&p, "min_us"), 11.0);
        assert_eq!(fig(&p, "avg_us"), 14.53);
        assert_eq!(fig(&p, "max_us"), 141.0);
        assert!(p.histograms.is_empty() && !p.figures.contains_key("overflows"));
        assert!(p.percentiles.is_empty());
    }

    #[test]
    fn json_with_histograms_of_two_threads_pools_them() {
        // `cyclictest -a 0 -t 2 -p 10 -i 1000 -D 1 -q -h 400 --json=FILE`.
        let p = parse(include_str!("samples/cyclictest_hist.json")).unwrap();
        assert_eq!(fig(&p, "cycles"), 2000.0);
        assert_eq!(fig(&p, "min_us"), 9.0);
        assert_eq!(fig(&p, "max_us"), 92.0);
        assert!((fig(&p, "avg_us") - (13.49 + 12.72) / 2.0).abs() < 1e-9);
        let h = &p.histograms["wakeup"];
        assert_eq!(h.total(), 2000);
        assert_eq!(h.counts[&13], 624 + 596);
        assert_eq!(h.counts[&92], 1);
        assert_eq!(fig(&p, "overflows"), 0.0);
        // Three significant digits: the median's bucket is 13 µs.
        assert!(
            h.to_latency().quantile_ns(0.5).abs_diff(13_000) <= 26,
            "{h:?}"
        );
    }

    #[test]
    fn the_same_run_as_histogram_text() {
        // The stdout of the run above: the same buckets.
        let text = parse(include_str!("samples/cyclictest_hist.txt")).unwrap();
        let json = parse(include_str!("samples/cyclictest_hist.json")).unwrap();
        assert_eq!(text.histograms, json.histograms);
        assert_eq!(fig(&text, "cycles"), 2000.0);
        assert_eq!(fig(&text, "max_us"), 92.0);
        // The text's averages are whole µs.
        assert_eq!(fig(&text, "avg_us"), 12.5);
    }

    #[test]
    fn histofall_ignores_the_total_column_and_counts_overflows() {
        // `cyclictest -a 0 -t 2 -p 10 -i 1000 -D 1 -q -H 100`: thread 0 had
        // two wake-ups beyond 100 µs, thread 1 one.
        let p = parse(include_str!("samples/cyclictest_histofall.txt")).unwrap();
        let h = &p.histograms["wakeup"];
        assert_eq!(h.overflows, 3);
        assert_eq!(h.total(), 997 + 999);
        assert_eq!(h.counts[&15], 4 + 194);
        assert_eq!(fig(&p, "overflows"), 3.0);
        assert_eq!(fig(&p, "cycles"), 1999.0);
        assert_eq!(fig(&p, "max_us"), 1015.0);
    }

    #[test]
    fn summary_lines_last_one_wins() {
        let p = parse(include_str!("samples/cyclictest.txt")).unwrap();
        assert_eq!(fig(&p, "cycles"), 1000.0);
        assert_eq!(fig(&p, "max_us"), 141.0);
        // Live output (no -q): the line is rewritten in place; the last counts.
        let p = parse(include_str!("samples/cyclictest_live.txt")).unwrap();
        assert_eq!(fig(&p, "cycles"), 999.0);
        assert_eq!(fig(&p, "min_us"), 15.0);
        assert_eq!(fig(&p, "avg_us"), 27.0);
        assert_eq!(fig(&p, "max_us"), 127.0);
    }

    #[test]
    fn nothing_to_read_is_an_error() {
        assert!(
            parse("# /dev/cpu_dma_latency set to 0us\n")
                .unwrap_err()
                .contains("no cyclictest results")
        );
        assert!(
            parse("{\"thread\": {}}")
                .unwrap_err()
                .contains("without threads")
        );
        assert!(
            parse("{\"thread\": {\"0\": {\"cycles\": 5}}}")
                .unwrap_err()
                .contains("\"min\"")
        );
        assert!(claims("max_us") && !claims("wakeup_p99_us"));
    }

    /// Issue 34: a forged count of 2^63 events panicked the histogram's
    /// encoding (exit 101, again on every resume). Every count, sum and
    /// value is bounded: the parse fails naming the value.
    #[test]
    fn counts_and_values_beyond_bounds_fail_naming_them() {
        use crate::workload::command::parsers::Tool;
        let parse = |t: &str| Tool::Cyclictest.parse(t);
        let forged = r#"{"thread":{"0":{"histogram":{"13":9223372036854775808},
            "cycles":9223372036854775808,"min":13,"max":13,"avg":13}}}"#;
        let e = parse(forged).unwrap_err();
        assert!(e.contains("9223372036854775808"), "{e}");
        // Two threads whose counts are each in bounds but not their sum.
        let half = 1u64 << 52;
        let two = format!(
            r#"{{"thread":{{"0":{{"histogram":{{"13":{half}}},"cycles":{half},"min":13,"max":13,"avg":13}},
            "1":{{"histogram":{{"13":{half}}},"cycles":{half},"min":13,"max":13,"avg":13}},
            "2":{{"histogram":{{"13":5}},"cycles":5,"min":13,"max":13,"avg":13}}}}}}"#
        );
        let e = parse(&two).unwrap_err();
        assert!(
            e.contains("`cycles` is 9007199254740996, outside 0..=9007199254740992"),
            "{e}"
        );
        for (bad, says) in [
            (
                r#""histogram":{"13":-1},"cycles":1,"min":13,"max":13,"avg":13"#,
                "-1",
            ),
            (
                r#""histogram":{"13":1.5},"cycles":1,"min":13,"max":13,"avg":13"#,
                "1.5",
            ),
            (r#""cycles":-4,"min":13,"max":13,"avg":13"#, "-4"),
            (
                r#""cycles":4,"min":-13,"max":13,"avg":13"#,
                "min_us` is -13",
            ),
            (
                r#""cycles":4,"min":13,"max":1e300,"avg":13"#,
                "max_us` is 1e300",
            ),
        ] {
            let e = parse(&format!(r#"{{"thread":{{"0":{{{bad}}}}}}}"#)).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
        // The `-h` text form: a total of 2^63 - 1 plus overflows.
        let text = include_str!("samples/cyclictest_hist.txt")
            .replace("# Total: 000001000", "# Total: 9223372036854775807");
        assert_ne!(text, include_str!("samples/cyclictest_hist.txt"));
        let e = parse(&text).unwrap_err();
        assert!(
            e.contains("`cycles` is 9223372036854775808, outside 0..=9007199254740992"),
            "{e}"
        );
        // A `T:` line with a count beyond u64 is refused, not read as 0.
        let line = "T: 0 ( 1) P:10 I:1000 C:99999999999999999999999 Min: 1 Act: 2 Avg: 3 Max: 4\n";
        let e = parse(line).unwrap_err();
        assert!(e.contains("99999999999999999999999"), "{e}");
    }
}
