//! Number, date and table formatting shared by the HTML, Markdown and chart
//! renderers.

/// A value with about `sig` significant digits, without exponent notation for
/// everyday magnitudes: 35.21, 0.0123, 1234, 1234567. NaN/inf give "–".
pub fn sig(v: f64, sig: usize) -> String {
    if !v.is_finite() {
        return "–".into();
    }
    if v == 0.0 {
        return "0".into();
    }
    let mag = v.abs().log10().floor() as i32;
    if mag >= sig as i32 - 1 {
        // Integer part already has enough digits.
        return format!("{:.0}", v);
    }
    if mag < -6 {
        return format!("{:.*e}", sig.saturating_sub(1), v);
    }
    let decimals = (sig as i32 - 1 - mag).max(0) as usize;
    let s = format!("{:.*}", decimals, v);
    trim_zeros(&s)
}

/// A value with 4 significant digits; M and G suffixes from a million on
/// (10M iterations, 1.024M bytes).
pub fn num(v: f64) -> String {
    if v.is_finite() && v.abs() >= 1e9 {
        format!("{}G", sig(v / 1e9, 4))
    } else if v.is_finite() && v.abs() >= 1e6 {
        format!("{}M", sig(v / 1e6, 4))
    } else {
        sig(v, 4)
    }
}

/// An optional value, "–" when absent.
pub fn opt(v: Option<f64>) -> String {
    v.map_or_else(|| "–".into(), num)
}

/// Drop trailing zeros after a decimal point ("1.2300" → "1.23", "2.0" → "2").
fn trim_zeros(s: &str) -> String {
    if s.contains('.') && !s.contains('e') {
        let t = s.trim_end_matches('0');
        t.trim_end_matches('.').to_string()
    } else {
        s.to_string()
    }
}

/// A ratio with two decimals ("0.62"), three when close to 1 would round to
/// "1.00" while differing from 1, two significant digits below 0.1
/// ("0.0015").
pub fn ratio(r: f64) -> String {
    if !r.is_finite() {
        return "–".into();
    }
    if r != 0.0 && r.abs() < 0.1 {
        return sig(r, 2);
    }
    let two = format!("{r:.2}");
    if two == "1.00" && r != 1.0 {
        format!("{r:.3}")
    } else {
        two
    }
}

/// Two decimals, without a negative zero (slopes, r²).
pub fn dec2(v: f64) -> String {
    if !v.is_finite() {
        return "–".into();
    }
    let s = format!("{v:.2}");
    if s == "-0.00" { "0.00".into() } else { s }
}

/// A p-value: "< 0.001", "0.002", "0.41".
pub fn p(p: f64) -> String {
    if !p.is_finite() {
        "–".into()
    } else if p < 0.001 {
        "< 0.001".into()
    } else if p < 0.1 {
        format!("{p:.3}")
    } else {
        format!("{p:.2}")
    }
}

/// "p = 0.002" or "p < 0.001".
pub fn p_eq(v: f64) -> String {
    let s = p(v);
    if s.starts_with('<') {
        format!("p {s}")
    } else {
        format!("p = {s}")
    }
}

/// A value with its unit ("35.2 s", "12 %", "1034").
pub fn with_unit(v: f64, unit: &str) -> String {
    if unit.is_empty() {
        num(v)
    } else if unit == "%" {
        format!("{}%", num(v))
    } else {
        format!("{} {unit}", num(v))
    }
}

/// Tick label for a value on an axis whose ticks are `step` apart: enough
/// decimals to tell ticks apart, k/M/G suffixes for large values.
pub fn tick(v: f64, step: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let a = v.abs().max(step.abs());
    let (div, suffix) = if a >= 1e9 {
        (1e9, "G")
    } else if a >= 1e6 {
        (1e6, "M")
    } else if a >= 1e4 {
        (1e3, "k")
    } else {
        (1.0, "")
    };
    let (v, step) = (v / div, step / div);
    let decimals = if step > 0.0 && step.is_finite() {
        (-(step.log10().floor()) as i32).clamp(0, 9) as usize
    } else {
        2
    };
    format!("{}{suffix}", trim_zeros(&format!("{v:.decimals$}")))
}

/// UTC date and time of a Unix time in ms: "2025-03-01 14:05 UTC".
pub fn utc(unix_ms: i64) -> String {
    let secs = unix_ms.div_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60
    )
}

/// Column alignment of a Markdown table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

/// Text made inert as Markdown inline content, for every string a block
/// carries (names, reasons, labels come from specs and databases): a line
/// break becomes a space (it cannot start a heading, a list or a quote),
/// and outside code spans `\\`, `[` and `]` are backslash-escaped (no
/// link, image or link reference definition can form). Code spans, found
/// as CommonMark finds them (a run of backticks up to the next run of the
/// same length), are kept as they are: nothing in one is live. Tags are
/// made inert once per document by [`crate::out::md_inert`].
pub fn md_text(s: &str) -> String {
    let flat: Vec<char> = s
        .replace("\r\n", " ")
        .chars()
        .map(|c| if matches!(c, '\n' | '\r') { ' ' } else { c })
        .collect();
    let run_at = |i: usize| flat[i..].iter().take_while(|&&c| c == '`').count();
    let mut out = String::with_capacity(flat.len() + 8);
    let mut i = 0;
    while i < flat.len() {
        let c = flat[i];
        if c == '`' {
            let n = run_at(i);
            // The closing run: the next run of exactly n backticks.
            let mut j = i + n;
            let mut close = None;
            while j < flat.len() {
                if flat[j] == '`' {
                    let m = run_at(j);
                    if m == n {
                        close = Some(j);
                        break;
                    }
                    j += m;
                } else {
                    j += 1;
                }
            }
            let end = close.map_or(i + n, |j| j + n);
            out.extend(&flat[i..end]);
            i = end;
            continue;
        }
        if matches!(c, '\\' | '[' | ']') {
            out.push('\\');
        }
        out.push(c);
        i += 1;
    }
    out
}

/// A table cell's text: [`md_text`], and every `|` escaped (preceded by
/// an odd number of backslashes), code spans included, since GitHub splits
/// a row into cells before it reads the cells' inlines.
pub fn md_cell(s: &str) -> String {
    let t = md_text(s);
    let mut out = String::with_capacity(t.len() + 4);
    let mut backslashes = 0;
    for c in t.chars() {
        if c == '|' && backslashes % 2 == 0 {
            out.push('\\');
        }
        backslashes = if c == '\\' { backslashes + 1 } else { 0 };
        out.push(c);
    }
    out
}

/// A Markdown table with columns padded to equal width (readable on a
/// terminal as it is). Cells are made inert ([`md_cell`]): `|` escaped,
/// line breaks spaces, no links.
pub fn md_table(headers: &[&str], align: &[Align], rows: &[Vec<String>]) -> String {
    let clean = |s: &str| md_cell(s);
    let headers: Vec<String> = headers.iter().map(|h| clean(h)).collect();
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| r.iter().map(|c| clean(c)).collect())
        .collect();
    let ncol = headers.len();
    let width = |s: &str| s.chars().count();
    let mut widths: Vec<usize> = headers.iter().map(|h| width(h).max(3)).collect();
    for r in &rows {
        for (i, c) in r.iter().enumerate().take(ncol) {
            widths[i] = widths[i].max(width(c));
        }
    }
    let al = |i: usize| align.get(i).copied().unwrap_or(Align::Left);
    let pad = |s: &str, i: usize| {
        let fill = " ".repeat(widths[i] - width(s));
        match al(i) {
            Align::Left => format!("{s}{fill}"),
            Align::Right => format!("{fill}{s}"),
        }
    };
    let mut out = String::new();
    let line = |cells: Vec<String>| format!("| {} |\n", cells.join(" | "));
    out.push_str(&line(
        headers.iter().enumerate().map(|(i, h)| pad(h, i)).collect(),
    ));
    out.push_str(&line(
        (0..ncol)
            .map(|i| match al(i) {
                Align::Left => "-".repeat(widths[i]),
                Align::Right => format!("{}:", "-".repeat(widths[i] - 1)),
            })
            .collect(),
    ));
    for r in &rows {
        out.push_str(&line(
            (0..ncol)
                .map(|i| pad(r.get(i).map_or("", String::as_str), i))
                .collect(),
        ));
    }
    out
}

/// Escape text for HTML and SVG.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn significant_digits() {
        assert_eq!(sig(35.2149, 4), "35.21");
        assert_eq!(sig(0.012345, 3), "0.0123");
        assert_eq!(sig(1234.4, 4), "1234");
        assert_eq!(sig(1_234_567.0, 4), "1234567");
        assert_eq!(sig(2.0, 4), "2");
        assert_eq!(sig(-0.5, 2), "-0.5");
        assert_eq!(sig(0.0, 4), "0");
        assert_eq!(sig(f64::NAN, 4), "–");
        assert_eq!(sig(1.5e-9, 3), "1.50e-9");
        assert_eq!(num(10_000_000.0), "10M");
        assert_eq!(num(1_024_000.0), "1.024M");
        assert_eq!(num(999_999.0), "999999");
    }

    #[test]
    fn ratios_and_p_values() {
        assert_eq!(ratio(0.6213), "0.62");
        assert_eq!(ratio(1.0), "1.00");
        assert_eq!(ratio(1.004), "1.004");
        assert_eq!(ratio(0.00153), "0.0015");
        assert_eq!(ratio(0.0), "0.00");
        assert_eq!(p(0.0004), "< 0.001");
        assert_eq!(p(0.0021), "0.002");
        assert_eq!(p(0.414), "0.41");
        assert_eq!(p_eq(0.0021), "p = 0.002");
        assert_eq!(p_eq(1e-9), "p < 0.001");
        assert_eq!(dec2(-0.001), "0.00");
        assert_eq!(dec2(1.215), "1.22");
    }

    #[test]
    fn tick_labels() {
        assert_eq!(tick(0.0, 5.0), "0");
        assert_eq!(tick(15.0, 5.0), "15");
        assert_eq!(tick(0.25, 0.05), "0.25");
        assert_eq!(tick(20_000.0, 5_000.0), "20k");
        assert_eq!(tick(1_500_000.0, 500_000.0), "1.5M");
        assert_eq!(tick(2.5e9, 5e8), "2.5G");
    }

    #[test]
    fn dates() {
        assert_eq!(utc(0), "1970-01-01 00:00 UTC");
        assert_eq!(utc(1_700_000_000_000), "2023-11-14 22:13 UTC");
        assert_eq!(utc(951_782_400_000), "2000-02-29 00:00 UTC");
    }

    #[test]
    fn markdown_tables_are_padded_and_escaped() {
        let t = md_table(
            &["policy", "mean"],
            &[Align::Left, Align::Right],
            &[
                vec!["OTHER".into(), "35.2".into()],
                vec!["a|b".into(), "1".into()],
            ],
        );
        let want = "\
| policy | mean |
| ------ | ---: |
| OTHER  | 35.2 |
| a\\|b   |    1 |
";
        assert_eq!(t, want);
        // Multi-byte characters count as one column.
        let t = md_table(&["x"], &[Align::Left], &[vec!["0.55–0.70".into()]]);
        assert!(t.contains("| 0.55–0.70 |"), "{t}");
        assert!(t.contains("| x         |"), "{t}");
    }

    #[test]
    fn markdown_text_cannot_carry_headings_links_images_or_cells() {
        assert_eq!(md_text("a\n# b\r\n## c\rd"), "a # b ## c d");
        assert_eq!(
            md_text("[x](javascript:alert(1)) ![](http://e.example/p.png)"),
            "\\[x\\](javascript:alert(1)) !\\[\\](http://e.example/p.png)"
        );
        assert_eq!(md_text("a\\b"), "a\\\\b");
        // A code span is kept as it is; a lone backtick opens none.
        assert_eq!(
            md_text("see `--set a[0]=1` [x]"),
            "see `--set a[0]=1` \\[x\\]"
        );
        assert_eq!(md_text("a ` [x]"), "a ` \\[x\\]");
        assert_eq!(md_text("``a`b`` [x]"), "``a`b`` \\[x\\]");
        // Every pipe of a cell escaped, after a backslash of the name too.
        assert_eq!(md_cell("a|b"), "a\\|b");
        assert_eq!(md_cell("a\\|b"), "a\\\\\\|b");
        assert_eq!(md_cell("`a|b` `c\\|d`"), "`a\\|b` `c\\|d`");
        let t = md_table(
            &["x", "y"],
            &[Align::Left; 2],
            &[vec!["a\\|b|c".into(), "d".into()]],
        );
        let row = t.lines().nth(2).unwrap();
        let cells = row.split('|').count() - row.matches("\\|").count();
        assert_eq!(cells, 4, "{row}");
    }

    #[test]
    fn escaping() {
        assert_eq!(esc("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
    }
}
