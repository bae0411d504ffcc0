//! A stretch of a traced run to draw, as `--window 0.5s..1.5s` gives it:
//! offsets from the start of the run's trace.

use crate::units::parse_duration_ns;

/// From `from_ns` to `to_ns` after the start of a trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct TimeWindow {
    pub from_ns: u64,
    pub to_ns: u64,
}

impl TimeWindow {
    pub fn len_ns(&self) -> u64 {
        self.to_ns - self.from_ns
    }
}

/// Parses "FROM..TO", each a duration with its unit ("0.5s..1.5s",
/// "200ms..450ms", "0s..2ms"); TO must be after FROM.
pub fn parse_window(s: &str) -> Result<TimeWindow, String> {
    let example = "write FROM..TO, two durations with units, e.g. 0.5s..1.5s or 200ms..300ms";
    let Some((from, to)) = s.split_once("..") else {
        return Err(format!("\"{s}\" is not a window: {example}"));
    };
    let from_ns = parse_duration_ns(from).map_err(|e| format!("{e} ({example})"))?;
    let to_ns = parse_duration_ns(to).map_err(|e| format!("{e} ({example})"))?;
    if to_ns <= from_ns {
        return Err(format!(
            "\"{s}\" ends before it starts: the end must come after the start"
        ));
    }
    Ok(TimeWindow { from_ns, to_ns })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_parse_with_any_units() {
        assert_eq!(
            parse_window("0.5s..1.5s"),
            Ok(TimeWindow {
                from_ns: 500_000_000,
                to_ns: 1_500_000_000
            })
        );
        assert_eq!(
            parse_window("0s..250ms").unwrap(),
            TimeWindow {
                from_ns: 0,
                to_ns: 250_000_000
            }
        );
        assert_eq!(parse_window(" 10us .. 1ms ").unwrap().len_ns(), 990_000);
    }

    #[test]
    fn bad_windows_say_why() {
        for (text, why) in [
            ("1s", "not a window"),
            ("1s..", "not a duration"),
            ("..1s", "not a duration"),
            ("1..2", "no unit"),
            ("2s..1s", "ends before it starts"),
            ("1s..1s", "ends before it starts"),
            ("1s..2h", "unknown unit"),
        ] {
            let e = parse_window(text).unwrap_err();
            assert!(e.contains(why), "{text}: {e}");
        }
    }
}
