//! hackbench (rt-tests): groups of senders and receivers passing messages
//! over sockets or pipes; it prints the seconds the whole exchange took.
//!
//! Figure: `time_s` (s, lower is better), from its `Time: 0.014` line (the
//! last one, should several runs share the output).

use regex::Regex;
use std::sync::LazyLock;

use super::Parsed;
use crate::workload::command::figures::find_regex;
use crate::workload::command::params::Better;

static TIME: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?m)^Time:\s*(\S+)").expect("constant regex"));

pub fn parse(text: &str) -> Result<Parsed, String> {
    let time_s = find_regex(&TIME, text)
        .map_err(|_| "no hackbench result: no \"Time: SECONDS\" line".to_string())?;
    let mut out = Parsed::default();
    out.figure("time_s", time_s, "s", Better::Lower);
    Ok(out)
}

pub fn claims(name: &str) -> bool {
    name == "time_s"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_and_thread_modes() {
        // `hackbench -g 2 -f 5 -l 200`.
        let p = parse(include_str!("samples/hackbench.txt")).unwrap();
        assert_eq!(p.figures["time_s"].value, 0.014);
        assert_eq!(p.figures["time_s"].unit, "s");
        assert_eq!(p.figures["time_s"].better, Better::Lower);
        // `hackbench -p -T -g 1 -f 4 -l 100`.
        let p = parse(include_str!("samples/hackbench_pipe_threads.txt")).unwrap();
        assert_eq!(p.figures["time_s"].value, 0.001);
        assert!(p.percentiles.is_empty() && p.histograms.is_empty());
    }

    #[test]
    fn no_time_line_is_an_error() {
        let e = parse("Running in process mode with 2 groups\n").unwrap_err();
        assert!(e.contains("no hackbench result"), "{e}");
        assert!(parse("Time: soon\n").is_err());
        assert!(claims("time_s") && !claims("time"));
    }
}
