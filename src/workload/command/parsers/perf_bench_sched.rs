//! `perf bench sched pipe` and `perf bench sched messaging`: two
//! processes passing a token through pipes, and hackbench's exchange
//! inside perf.
//!
//! Figures: `total_s` (s, lower is better; both benchmarks, also in
//! `perf bench -f simple`, which prints that number alone), and for pipe in
//! the default format `usecs_per_op` (µs, lower) and `ops_per_s` (ops/s,
//! higher).

use regex::Regex;
use std::sync::LazyLock;

use super::Parsed;
use crate::workload::command::figures::{find_regex, parse_number};
use crate::workload::command::params::Better;

static TOTAL: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?m)^\s*Total time:\s*(\S+)\s*\[sec\]").expect("constant regex"));
static USECS: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?m)^\s*(\S+)\s+usecs/op").expect("constant regex"));
static OPS: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?m)^\s*(\S+)\s+ops/sec").expect("constant regex"));

pub fn parse(text: &str) -> Result<Parsed, String> {
    let mut out = Parsed::default();
    if let Ok(total) = find_regex(&TOTAL, text) {
        out.figure("total_s", total, "s", Better::Lower);
        if let Ok(v) = find_regex(&USECS, text) {
            out.figure("usecs_per_op", v, "µs", Better::Lower);
        }
        if let Ok(v) = find_regex(&OPS, text) {
            out.figure("ops_per_s", v, "ops/s", Better::Higher);
        }
        return Ok(out);
    }
    // `-f simple`: the total seconds alone on the last line.
    let last = text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    match parse_number(last) {
        Some(total) if !text.contains("# Running") => {
            out.figure("total_s", total, "s", Better::Lower);
            Ok(out)
        }
        _ => Err(
            "no perf bench sched result: no \"Total time: … [sec]\" line, nor a \
                  `-f simple` number"
                .into(),
        ),
    }
}

pub fn claims(name: &str) -> bool {
    ["total_s", "usecs_per_op", "ops_per_s"].contains(&name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::command::parsers::test_fig as fig;

    #[test]
    fn pipe_in_the_default_format() {
        // `perf bench sched pipe -l 5000`.
        let p = parse(include_str!("samples/perf_bench_sched_pipe.txt")).unwrap();
        assert_eq!(fig(&p, "total_s"), 0.201);
        assert_eq!(fig(&p, "usecs_per_op"), 40.267);
        assert_eq!(fig(&p, "ops_per_s"), 24834.0);
        assert_eq!(p.figures["ops_per_s"].better, Better::Higher);
    }

    #[test]
    fn messaging_has_its_total_only() {
        // `perf bench sched messaging -g 2 -l 50`.
        let p = parse(include_str!("samples/perf_bench_sched_messaging.txt")).unwrap();
        assert_eq!(fig(&p, "total_s"), 0.074);
        assert_eq!(p.figures.len(), 1);
    }

    #[test]
    fn the_simple_format_is_the_total() {
        // `perf bench -f simple sched pipe -l 5000` and `… messaging -g 2 -l 50`.
        let p = parse(include_str!("samples/perf_bench_sched_pipe_simple.txt")).unwrap();
        assert_eq!(fig(&p, "total_s"), 0.142);
        let p = parse(include_str!(
            "samples/perf_bench_sched_messaging_simple.txt"
        ))
        .unwrap();
        assert_eq!(fig(&p, "total_s"), 0.094);
    }

    #[test]
    fn a_cut_or_foreign_output_is_an_error() {
        // The header without the result (perf killed before the end).
        let cut = "# Running 'sched/pipe' benchmark:\n# Executed 5000 pipe operations\n";
        assert!(
            parse(cut)
                .unwrap_err()
                .contains("no perf bench sched result")
        );
        assert!(parse("").is_err());
        assert!(parse("Segmentation fault\n").is_err());
        assert!(claims("usecs_per_op") && !claims("time_s"));
    }
}
