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
    /// Events in the buckets (overflows not included).
    pub fn total(&self) -> u64 {
        self.counts.values().sum()
    }

    /// Add `other`'s events (same buckets: exact).
    pub fn add(&mut self, other: &Histogram) {
        for (&us, &n) in &other.counts {
            *self.counts.entry(us).or_default() += n;
        }
        self.overflows += other.overflows;
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

    /// Read the tool's output; an error says what was missing.
    pub fn parse(self, text: &str) -> Result<Parsed, String> {
        match self {
            Tool::Schbench => schbench::parse(text),
            Tool::Cyclictest => cyclictest::parse(text),
            Tool::Hackbench => hackbench::parse(text),
            Tool::PerfBenchSched => perf_bench_sched::parse(text),
            Tool::Fio => fio::parse(text),
            Tool::StressNg => stress_ng::parse(text),
        }
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
}
