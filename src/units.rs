//! Units and their formats, in one leaf module (it uses nothing of
//! schedlab): durations on the command line and in messages
//! ([`parse_duration_ns`] reads "5ms", "1.5s", "250us" exactly into
//! nanoseconds, [`format_ns`] writes nanoseconds for people: "2.8 ms"),
//! estimates in seconds ([`human_duration`]: "3 min 20 s"), sizes
//! ([`human_bytes`]: "1.5 GB") and counts of things ([`count`]: "1 run",
//! "3 runs").

/// `n` things, singular or plural: `count(1, "run", "runs")` is "1 run",
/// `count(3, "run", "runs")` "3 runs", `count(0, …)` "0 runs".
pub fn count(n: impl Into<u64>, one: &str, many: &str) -> String {
    let n = n.into();
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Parses a duration with a unit into nanoseconds: "5ms", "500us" (or
/// "500µs"), "1s", "2000000ns", "1.5s", "0.25 ms". Exact (no floating
/// point); a unit is required and fractions finer than 1 ns are refused.
pub fn parse_duration_ns(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = (&t[..split], t[split..].trim());
    let example = "write a number and a unit, e.g. 5ms, 500us, 1.5s or 2000000ns";
    if num.is_empty() {
        return Err(format!("\"{s}\" is not a duration: {example}"));
    }
    let mult: u64 = match unit {
        "ns" => 1,
        "us" | "µs" | "μs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "" => return Err(format!("\"{s}\" has no unit: {example}")),
        u => {
            return Err(format!(
                "\"{s}\": unknown unit \"{u}\" (allowed: ns, us, ms, s): {example}"
            ));
        }
    };
    let (int, frac) = match num.split_once('.') {
        Some((i, f)) => (i, f),
        None => (num, ""),
    };
    if int.is_empty() || frac.contains('.') || (num.contains('.') && frac.is_empty()) {
        return Err(format!("\"{s}\" is not a duration: {example}"));
    }
    let too_large = || format!("\"{s}\" is too large");
    let int: u64 = int.parse().map_err(|_| too_large())?;
    let mut total = int.checked_mul(mult).ok_or_else(too_large)?;
    let frac = frac.trim_end_matches('0');
    if !frac.is_empty() {
        let digits = mult.ilog10() as usize;
        if frac.len() > digits {
            return Err(format!("\"{s}\" is finer than 1 ns"));
        }
        let scaled: u64 =
            frac.parse::<u64>().map_err(|_| too_large())? * 10u64.pow((digits - frac.len()) as u32);
        total = total.checked_add(scaled).ok_or_else(too_large)?;
    }
    Ok(total)
}

/// A duration for people: "10 ms", "2.8 ms", "250 µs", "1.5 s", "900 ns".
pub fn format_ns(ns: u64) -> String {
    let (unit, name) = match ns {
        n if n >= 1_000_000_000 => (1_000_000_000, "s"),
        n if n >= 1_000_000 => (1_000_000, "ms"),
        n if n >= 1_000 => (1_000, "µs"),
        _ => return format!("{ns} ns"),
    };
    let (int, rem) = (ns / unit, ns % unit);
    if rem == 0 {
        return format!("{int} {name}");
    }
    let width = unit.ilog10() as usize;
    let frac = format!("{rem:0width$}");
    format!("{int}.{} {name}", frac.trim_end_matches('0'))
}

/// "1 h 02 min", "3 min 20 s", "4.2 s".
pub fn human_duration(s: f64) -> String {
    if !s.is_finite() {
        return "unknown".into();
    }
    if s < 0.05 {
        // Nothing (an empty sum of f64 is -0.0), or less than shows.
        return "0 s".into();
    }
    if s < 60.0 {
        format!("{s:.1} s")
    } else if s < 3600.0 {
        format!("{} min {:02} s", (s / 60.0) as u64, (s % 60.0) as u64)
    } else {
        format!(
            "{} h {:02} min",
            (s / 3600.0) as u64,
            ((s % 3600.0) / 60.0) as u64
        )
    }
}

/// "1.5 GB": bytes with a decimal prefix, for messages.
pub fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 7] = ["B", "kB", "MB", "GB", "TB", "PB", "EB"];
    let mut v = b as f64;
    let mut i = 0;
    while v >= 1000.0 && i + 1 < UNITS.len() {
        v /= 1000.0;
        i += 1;
    }
    if i == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", UNITS[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_singular_only_for_one() {
        assert_eq!(count(1u32, "run", "runs"), "1 run");
        assert_eq!(count(0u64, "run", "runs"), "0 runs");
        assert_eq!(count(3u32, "switch", "switches"), "3 switches");
    }

    #[test]
    fn durations_parse_exactly() {
        assert_eq!(parse_duration_ns("5ms"), Ok(5_000_000));
        assert_eq!(parse_duration_ns("1.5s"), Ok(1_500_000_000));
        assert_eq!(parse_duration_ns("250us"), Ok(250_000));
        assert_eq!(parse_duration_ns("250µs"), Ok(250_000));
        assert_eq!(parse_duration_ns("2000000ns"), Ok(2_000_000));
        assert_eq!(parse_duration_ns("1s"), Ok(1_000_000_000));
        assert_eq!(parse_duration_ns(" 0.25 ms "), Ok(250_000));
        assert_eq!(parse_duration_ns("0.000000001s"), Ok(1));
        assert_eq!(parse_duration_ns("1.50ms"), Ok(1_500_000));
        assert_eq!(parse_duration_ns("0ms"), Ok(0));
        for bad in [
            "",
            "5",
            "ms",
            "5 m",
            "5min",
            "-5ms",
            "1.2.3ms",
            ".5ms",
            "5.ms",
            "1.5ns",
            "0.0000000001s",
            "99999999999999999999ns",
            "20000000000s",
            "5 ms x",
        ] {
            assert!(parse_duration_ns(bad).is_err(), "{bad:?} accepted");
        }
        assert!(parse_duration_ns("5").unwrap_err().contains("no unit"));
        assert!(
            parse_duration_ns("5min")
                .unwrap_err()
                .contains("unknown unit")
        );
        assert!(
            parse_duration_ns("1.5ns")
                .unwrap_err()
                .contains("finer than 1 ns")
        );
    }

    #[test]
    fn durations_format_for_people() {
        assert_eq!(format_ns(0), "0 ns");
        assert_eq!(format_ns(900), "900 ns");
        assert_eq!(format_ns(1_024), "1.024 µs");
        assert_eq!(format_ns(250_000), "250 µs");
        assert_eq!(format_ns(2_800_000), "2.8 ms");
        assert_eq!(format_ns(10_000_000), "10 ms");
        assert_eq!(format_ns(1_500_000_000), "1.5 s");
        assert_eq!(format_ns(1_000_001), "1.000001 ms");
        for ns in [
            1,
            1024,
            999_999,
            2_800_000,
            1_500_000_000,
            4_194_304_000_000,
        ] {
            let s = format_ns(ns).replace(' ', "").replace('µ', "u");
            assert_eq!(parse_duration_ns(&s), Ok(ns), "{s}");
        }
    }

    #[test]
    fn durations_read_naturally() {
        assert_eq!(human_duration(4.24), "4.2 s");
        assert_eq!(human_duration(200.0), "3 min 20 s");
        assert_eq!(human_duration(3720.0), "1 h 02 min");
        // A finished campaign has nothing left: the sum of no estimates is -0.0.
        assert_eq!(human_duration([].iter().sum()), "0 s");
        assert_eq!(human_duration(0.0), "0 s");
        assert_eq!(human_duration(f64::NAN), "unknown");
    }

    #[test]
    fn sizes_take_a_decimal_prefix() {
        assert_eq!(human_bytes(999), "999 B");
        assert_eq!(human_bytes(1_500_000_000), "1.5 GB");
        assert_eq!(human_bytes(u64::MAX), "18.4 EB");
    }
}
