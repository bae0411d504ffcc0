//! Parsers for the standard scheduler benchmarks (`parser = "NAME"`), so a
//! `command` workload running one needs no regular expression: the
//! registry of tools ([`Tool`]), where each reads by default, and what a
//! parser gives ([`Parsed`]): named figures with unit and direction, the
//! tool's latency percentiles, and a latency histogram where the tool
//! prints one. One file per tool; each is tested on output the tool wrote
//! on a real machine (`samples/`).
//!
//! Percentiles and histograms are kept apart on purpose: percentiles a
//! tool printed cannot be pooled across processes or runs (the p99 of two
//! runs is not the mean of their p99s), a histogram's buckets can.
//!
//! Every number a parser gives is bounded ([`Parsed::check_bounds`], run
//! by [`Tool::parse`]): a figure or percentile value is finite and within
//! 0..=2^53, a percentile within 0..=100, a histogram's buckets, counts and
//! total within 2^53. Output beyond that (a forged count of 2^63 events,
//! a negative latency, `.nan` in YAML) fails the run naming the value,
//! rather than be stored, summed into an overflow, or crash the encoding
//! of the histogram.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use super::figures::Figure;
use super::params::{Better, Source};
use crate::workload::latency::Latency;

pub mod cyclictest;
pub mod fio;
pub mod hackbench;
pub mod perf_bench_sched;
pub mod schbench;
pub mod stress_ng;

/// The largest number schedlab takes from a tool's output, as a count or
/// a value: 2^53, the largest integer a figure (an f64) holds exactly, far
/// below what a histogram's encoding (signed 64-bit counts) or a sum over
/// thousands of runs can carry. No real run comes near it: 2^53 events,
/// one a microsecond, take 285 years.
pub const MAX_COUNT: u64 = 1 << 53;

/// [`MAX_COUNT`] as a figure's value.
const MAX_VALUE: f64 = MAX_COUNT as f64;

/// A number for an error message: whole numbers in full (up to 10^21, as
/// a tool printed them: 9223372036854775808), others as Rust prints them,
/// huge ones in scientific notation.
pub fn show_number(v: f64) -> String {
    if v.is_finite() && v.fract() == 0.0 && v.abs() < 1e21 {
        format!("{v:.0}")
    } else if v.is_finite() && v.abs() < 1e17 {
        format!("{v}")
    } else {
        format!("{v:e}")
    }
}

/// A benchmark whose output schedlab reads without help.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Tool {
    #[serde(rename = "schbench")]
    Schbench,
    #[serde(rename = "cyclictest")]
    Cyclictest,
    #[serde(rename = "hackbench")]
    Hackbench,
    #[serde(rename = "perf-bench-sched")]
    PerfBenchSched,
    #[serde(rename = "fio")]
    Fio,
    #[serde(rename = "stress-ng")]
    StressNg,
}

/// What a parser read from a tool's output.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Parsed {
    pub figures: BTreeMap<String, Figure>,
    /// Name → [(percentile, value µs)], in the tool's order.
    pub percentiles: BTreeMap<String, Vec<(f64, f64)>>,
    pub histograms: BTreeMap<String, Histogram>,
}

impl Parsed {
    /// Add figure `name`.
    pub fn figure(&mut self, name: &str, value: f64, unit: &str, better: Better) {
        self.figures.insert(
            name.to_string(),
            Figure {
                value,
                unit: unit.to_string(),
                better,
            },
        );
    }

    /// Whether every number is within bounds (see the module's notes); an
    /// error names the figure, percentile or bucket and its value.
    pub fn check_bounds(&self) -> Result<(), String> {
        let limit = show_number(MAX_VALUE);
        let value_ok = |v: f64| v.is_finite() && (0.0..=MAX_VALUE).contains(&v);
        for (name, f) in &self.figures {
            if !value_ok(f.value) {
                return Err(format!(
                    "figure `{name}` is {}, outside 0..={limit} (the numbers schedlab takes \
                     from a tool's output)",
                    show_number(f.value)
                ));
            }
        }
        for (name, rows) in &self.percentiles {
            for &(p, v) in rows {
                if !(p.is_finite() && (0.0..=100.0).contains(&p)) {
                    return Err(format!(
                        "percentile {} of `{name}` is outside 0..=100",
                        show_number(p)
                    ));
                }
                if !value_ok(v) {
                    return Err(format!(
                        "percentile {} of `{name}` is {}, outside 0..={limit}",
                        show_number(p),
                        show_number(v)
                    ));
                }
            }
        }
        for (name, h) in &self.histograms {
            h.check_bounds()
                .map_err(|e| format!("histogram `{name}`: {e}"))?;
        }
        Ok(())
    }
}

/// A latency histogram as a tool counts it: events per whole-microsecond
/// bucket, and the events beyond its last bucket.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Histogram {
    /// Bucket (µs) → events.
    pub counts: BTreeMap<u64, u64>,
    /// Events above the largest bucket (their values are unknown).
    pub overflows: u64,
}

impl Histogram {
    /// Events in the buckets (overflows not included), saturating at
    /// u64::MAX (beyond [`MAX_COUNT`], which [`Histogram::check_bounds`]
    /// refuses).
    pub fn total(&self) -> u64 {
        self.counts.values().fold(0, |a, &n| a.saturating_add(n))
    }

    /// Add `other`'s events (same buckets: exact), saturating as `total`.
    pub fn add(&mut self, other: &Histogram) {
        for (&us, &n) in &other.counts {
            let c = self.counts.entry(us).or_default();
            *c = c.saturating_add(n);
        }
        self.overflows = self.overflows.saturating_add(other.overflows);
    }

    /// Whether its buckets, their counts, the overflows and the total are
    /// all within [`MAX_COUNT`].
    pub fn check_bounds(&self) -> Result<(), String> {
        for (&us, &n) in &self.counts {
            if us > MAX_COUNT {
                return Err(format!("bucket {us} µs is beyond {MAX_COUNT} µs"));
            }
            if n > MAX_COUNT {
                return Err(format!(
                    "bucket {us} µs counts {n} events, beyond {MAX_COUNT}"
                ));
            }
        }
        let all = self.total().saturating_add(self.overflows);
        if all > MAX_COUNT {
            return Err(format!(
                "its events (buckets and overflows) add up to {}, beyond {MAX_COUNT}",
                if all == u64::MAX {
                    format!("{all} or more")
                } else {
                    all.to_string()
                }
            ));
        }
        Ok(())
    }

    /// The buckets as schedlab's own latency histogram (each event at its
    /// bucket's value), so they pool and report like a built-in
    /// workload's. Overflows have no value and are left out.
    pub fn to_latency(&self) -> Latency {
        let mut l = Latency::new();
        for (&us, &n) in &self.counts {
            l.record_n_ns(us.saturating_mul(1000), n);
        }
        l
    }
}

impl Tool {
    pub const ALL: [Tool; 6] = [
        Tool::Schbench,
        Tool::Cyclictest,
        Tool::Hackbench,
        Tool::PerfBenchSched,
        Tool::Fio,
        Tool::StressNg,
    ];

    /// The name `parser = "..."` takes.
    pub fn name(self) -> &'static str {
        match self {
            Tool::Schbench => "schbench",
            Tool::Cyclictest => "cyclictest",
            Tool::Hackbench => "hackbench",
            Tool::PerfBenchSched => "perf-bench-sched",
            Tool::Fio => "fio",
            Tool::StressNg => "stress-ng",
        }
    }

    pub fn from_name(name: &str) -> Option<Tool> {
        Tool::ALL.into_iter().find(|t| t.name() == name)
    }

    /// Where the tool writes what the parser reads unless `parser_from`
    /// says otherwise: schbench's report and stress-ng's metrics go to
    /// stderr, the others' to stdout (`-j FILE`, `--json=FILE` and
    /// `--yaml FILE` write files that `parser_from` names).
    pub fn default_from(self) -> Source {
        match self {
            Tool::Schbench | Tool::StressNg => Source::Stderr,
            _ => Source::Stdout,
        }
    }

    /// Read the tool's output; an error says what was missing, or which
    /// number was out of bounds.
    pub fn parse(self, text: &str) -> Result<Parsed, String> {
        let parsed = match self {
            Tool::Schbench => schbench::parse(text),
            Tool::Cyclictest => cyclictest::parse(text),
            Tool::Hackbench => hackbench::parse(text),
            Tool::PerfBenchSched => perf_bench_sched::parse(text),
            Tool::Fio => fio::parse(text),
            Tool::StressNg => stress_ng::parse(text),
        }?;
        parsed.check_bounds()?;
        Ok(parsed)
    }

    /// Whether the parser can give a figure called `name` (a user's own
    /// figure may not take such a name).
    pub fn claims(self, name: &str) -> bool {
        match self {
            Tool::Schbench => schbench::claims(name),
            Tool::Cyclictest => cyclictest::claims(name),
            Tool::Hackbench => hackbench::claims(name),
            Tool::PerfBenchSched => perf_bench_sched::claims(name),
            Tool::Fio => fio::claims(name),
            Tool::StressNg => stress_ng::claims(name),
        }
    }
}

/// A name of a stressor, job or thread made fit for a figure's name:
/// lowercase, anything but letters and digits an underscore.
pub fn figure_word(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect()
}

/// `text` from its first line that starts with `{` (tools print warnings
/// before their JSON), or None.
pub fn json_start(text: &str) -> Option<&str> {
    let start = std::iter::once(0)
        .chain(text.match_indices('\n').map(|(i, _)| i + 1))
        .find(|&i| text[i..].trim_start_matches([' ', '\t']).starts_with('{'))?;
    Some(&text[start..])
}

/// The first JSON value of `text` (after any text before it).
pub fn first_json(text: &str) -> Result<serde_json::Value, String> {
    let from = json_start(text).ok_or("no JSON document (no line starts with `{`)")?;
    serde_json::Deserializer::from_str(from)
        .into_iter::<serde_json::Value>()
        .next()
        .unwrap_or_else(|| Err(serde::de::Error::custom("empty")))
        .map_err(|e| format!("its JSON does not parse: {e}"))
}

/// A figure a parser's test expects, by name (panics naming it when absent).
#[cfg(test)]
pub(crate) fn test_fig(p: &Parsed, name: &str) -> f64 {
    p.figures
        .get(name)
        .unwrap_or_else(|| panic!("{name}: {p:?}"))
        .value
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_serialise_as_spelled() {
        for t in Tool::ALL {
            assert_eq!(Tool::from_name(t.name()), Some(t));
            assert_eq!(serde_json::to_value(t).unwrap(), t.name());
        }
        assert_eq!(Tool::from_name("perf"), None);
    }

    #[test]
    fn histograms_add_exactly_and_become_latencies() {
        let mut a = Histogram {
            counts: BTreeMap::from([(10, 2), (12, 1)]),
            overflows: 1,
        };
        let b = Histogram {
            counts: BTreeMap::from([(12, 3), (90, 1)]),
            overflows: 0,
        };
        a.add(&b);
        assert_eq!(a.counts, BTreeMap::from([(10, 2), (12, 4), (90, 1)]));
        assert_eq!((a.total(), a.overflows), (7, 1));
        let l = a.to_latency();
        assert_eq!(l.count(), 7);
        // HdrHistogram keeps three significant digits: 12 µs and 90 µs come
        // back within their bucket (0.2 %).
        assert!(
            l.quantile_ns(0.5).abs_diff(12_000) <= 24,
            "{}",
            l.quantile_ns(0.5)
        );
        assert!(
            l.quantile_ns(1.0).abs_diff(90_000) <= 180,
            "{}",
            l.quantile_ns(1.0)
        );
    }

    #[test]
    fn json_after_text_and_figure_words() {
        assert_eq!(first_json("warn\n  {\"a\": 1}\nrest").unwrap()["a"], 1);
        assert!(first_json("no json").unwrap_err().contains("no JSON"));
        assert!(
            first_json("{\"a\": ")
                .unwrap_err()
                .contains("does not parse")
        );
        assert_eq!(figure_word("Sock-FD 2"), "sock_fd_2");
    }

    /// Issue 34: no parser passes on a negative, infinite, NaN or huge
    /// number; each fails naming it (cyclictest's counts are tested in
    /// its own file).
    #[test]
    fn every_parser_refuses_numbers_out_of_bounds_naming_them() {
        let huge = "9".repeat(400);
        let schbench = include_str!("samples/schbench.txt")
            .replace("99.9th: 91 ", &format!("99.9th: {huge} "));
        let fio_neg = r#"{"jobs":[{"jobname":"x","error":0,"read":{"io_bytes":4096,"bw_bytes":-5,"iops":1}}]}"#;
        let fio_pct = r#"{"jobs":[{"jobname":"x","error":0,"read":{"io_bytes":4096,"bw_bytes":5,"iops":1,
            "clat_ns":{"N":1,"mean":10,"percentile":{"nan":1000}}}}]}"#;
        let fio_sum = r#"{"jobs":[{"jobname":"a","error":0,"read":{"io_bytes":1,"bw_bytes":1e308,"iops":1}},
            {"jobname":"b","error":0,"read":{"io_bytes":1,"bw_bytes":1e308,"iops":1}}]}"#;
        let stress = "metrics:\n  - stressor: cpu\n    bogo-ops: .nan\n    \
                      bogo-ops-per-second-real-time: 1\n    bogo-ops-per-second-usr-sys-time: 1\n";
        for (tool, text, says) in [
            (
                Tool::Hackbench,
                "Time: -0.014\n".to_string(),
                "figure `time_s` is -0.014",
            ),
            (
                Tool::PerfBenchSched,
                " Total time: -1 [sec]\n".into(),
                "is -1,",
            ),
            (Tool::PerfBenchSched, "1e300\n".into(), "is 1e300"),
            (Tool::Schbench, schbench, "wakeup_p999_us` is inf"),
            (Tool::Fio, fio_neg.into(), "read_bw_mib_s` is -0.0000047"),
            (Tool::Fio, fio_pct.into(), "percentile NaN of `read_clat`"),
            (Tool::Fio, fio_sum.into(), "read_bw_mib_s` is inf"),
            (Tool::StressNg, stress.into(), "cpu_bogo_ops` is NaN"),
        ] {
            let e = tool.parse(&text).unwrap_err();
            assert!(e.contains(says), "{}: {e}", tool.name());
        }
        // In bounds passes: the bound is 2^53 itself.
        assert!(Tool::Hackbench.parse("Time: 9007199254740992\n").is_ok());
        assert!(Tool::Hackbench.parse("Time: 9007199254740994\n").is_err());
        let h = Histogram {
            counts: BTreeMap::from([(u64::MAX, 1)]),
            overflows: 0,
        };
        assert!(
            h.check_bounds()
                .unwrap_err()
                .contains("bucket 18446744073709551615 µs")
        );
        let mut a = Histogram {
            counts: BTreeMap::from([(1, u64::MAX)]),
            overflows: u64::MAX,
        };
        a.add(&a.clone());
        assert_eq!((a.total(), a.overflows), (u64::MAX, u64::MAX));
    }
}
