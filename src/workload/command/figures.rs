//! Taking a `command` workload's figures from what its program wrote: its
//! captured standard output and error (byte buffers that may hold only
//! their tail) and files under its directory, by regular expression or
//! JSON pointer, and through a standard benchmark's parser.
//!
//! Rules, the same for every figure:
//!
//! - A regular expression's **last** match wins: tools that report as they
//!   go (schbench's intervals, a build's progress, iostat-like loops) print
//!   their final, whole-run figure last, and a captured output cut to its
//!   tail keeps the end.
//! - The capture is read as a number the way such tools print one: an
//!   optional sign, digits with an optional fraction and exponent, commas
//!   between groups of three digits (`1,234,567.5`) and surrounding white
//!   space allowed; anything else (a unit glued to it, `nan`, `inf`) is an
//!   error, never a guess.
//! - A JSON pointer reads a number, or a string holding one (fio writes
//!   some numbers as strings). The source is parsed as one JSON document;
//!   if text precedes it (a tool's warnings before its JSON) the first line
//!   that starts with `{` or `[` starts the document.
//! - A figure missing from its source fails the run, naming the figure and
//!   showing the last lines of the source: it never becomes a silent zero.

use std::collections::BTreeMap;
use std::path::Path;

use super::params::{Better, CommandParams, FigureSpec, Pattern, Source};
use super::parsers::{Histogram, Parsed};

/// One captured stream: its last bytes, and how many came before them and
/// were dropped (the launcher keeps the last 64 KiB).
#[derive(Debug, Clone, Copy, Default)]
pub struct Captured<'a> {
    pub bytes: &'a [u8],
    pub dropped_bytes: u64,
}

/// Everything a program left to read figures from.
#[derive(Debug, Clone, Copy)]
pub struct Outputs<'a> {
    pub stdout: Captured<'a>,
    pub stderr: Captured<'a>,
    /// The program's directory, where file sources are.
    pub cwd: &'a Path,
}

/// A figure's value with what it means.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    pub value: f64,
    pub unit: String,
    pub better: Better,
}

/// A run's figures, its benchmark's latency percentiles, and its latency
/// histograms (only where the tool gives one).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Extracted {
    pub figures: BTreeMap<String, Figure>,
    /// Name → [(percentile, value µs)], as the tool printed them. Never
    /// pooled across runs or processes as if they were histograms.
    pub percentiles: BTreeMap<String, Vec<(f64, f64)>>,
    pub histograms: BTreeMap<String, Histogram>,
}

impl Extracted {
    /// The values alone, as `WorkOutput::figures` holds them.
    pub fn values(&self) -> BTreeMap<String, f64> {
        self.figures
            .iter()
            .map(|(k, f)| (k.clone(), f.value))
            .collect()
    }

    /// The histograms as `WorkOutput::latency` holds them (schedlab's own
    /// encoding, pooled and reported like a built-in workload's).
    pub fn latency_encoded(&self) -> BTreeMap<String, Vec<u8>> {
        self.histograms
            .iter()
            .map(|(k, h)| (k.clone(), h.to_latency().encode()))
            .collect()
    }
}

/// A figure that could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("figure `{figure}`: {reason} in {source_name}{}", tail_block(.tail))]
pub struct FigureError {
    /// The figure's name (`parser schbench` for a parser's failure).
    pub figure: String,
    /// stdout, stderr or the file's path.
    pub source_name: String,
    pub reason: String,
    /// The last lines of the source (of stderr when a file is missing).
    pub tail: String,
}

fn tail_block(tail: &str) -> String {
    if tail.is_empty() {
        " (which is empty)".into()
    } else {
        format!("; its last lines:\n{tail}")
    }
}

/// Lines of a source shown with an error.
pub const TAIL_LINES: usize = 10;
/// Characters of one such line shown at most.
const TAIL_LINE_CHARS: usize = 200;
/// Bytes of a file source read at most (a figure is in a report, not in
/// gigabytes of trace).
const MAX_FILE_BYTES: u64 = 64 << 20;

/// The last `n` lines of `bytes` (lossy UTF-8), each cut to 200
/// characters and indented, for an error message.
pub fn tail_lines(bytes: &[u8], n: usize) -> String {
    let text = String::from_utf8_lossy(bytes);
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let start = lines.len().saturating_sub(n);
    lines[start..]
        .iter()
        .map(|l| {
            let cut: String = l.chars().take(TAIL_LINE_CHARS).collect();
            format!("  | {cut}")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Read `s` as the number a tool printed (see the module's rules).
pub fn parse_number(s: &str) -> Option<f64> {
    let t = s.trim();
    let t = t.strip_prefix('+').unwrap_or(t);
    let plain = if t.contains(',') {
        let (int, frac) = match t.find(['.', 'e', 'E']) {
            Some(i) => t.split_at(i),
            None => (t, ""),
        };
        let digits = int.strip_prefix('-').unwrap_or(int);
        let groups: Vec<&str> = digits.split(',').collect();
        let grouped = !groups[0].is_empty()
            && groups[0].len() <= 3
            && groups[1..].iter().all(|g| g.len() == 3);
        if !grouped || frac.contains(',') {
            return None;
        }
        format!("{}{frac}", int.replace(',', ""))
    } else {
        t.to_string()
    };
    // Rust's float grammar also takes "inf", "nan" and "infinity": a
    // number here starts with a digit, a dot or a minus sign.
    let first = plain.strip_prefix('-').unwrap_or(&plain).chars().next()?;
    if !(first.is_ascii_digit() || first == '.') {
        return None;
    }
    plain.parse::<f64>().ok().filter(|v| v.is_finite())
}

/// The figure `re` captures in `text`: its last match.
pub fn find_regex(re: &regex::Regex, text: &str) -> Result<f64, String> {
    let caps = re
        .captures_iter(text)
        .last()
        .ok_or_else(|| format!("no match of regex `{}`", re.as_str()))?;
    let m = caps
        .get(1)
        .ok_or_else(|| format!("the last match of regex `{}` captured nothing", re.as_str()))?;
    parse_number(m.as_str()).ok_or_else(|| {
        format!(
            "regex `{}` captured \"{}\", which is not a number",
            re.as_str(),
            m.as_str()
        )
    })
}

/// `text` as one JSON document (see the module's rules).
pub fn parse_json(text: &str) -> Result<serde_json::Value, String> {
    match serde_json::from_str(text) {
        Ok(v) => Ok(v),
        Err(whole) => {
            let start = text
                .match_indices('\n')
                .map(|(i, _)| i + 1)
                .chain(std::iter::once(0))
                .filter(|&i| text[i..].starts_with(['{', '[']))
                .min()
                .ok_or_else(|| format!("not JSON ({whole})"))?;
            let mut stream =
                serde_json::Deserializer::from_str(&text[start..]).into_iter::<serde_json::Value>();
            match stream.next() {
                Some(Ok(v)) => Ok(v),
                Some(Err(e)) => Err(format!("not JSON ({e})")),
                None => Err(format!("not JSON ({whole})")),
            }
        }
    }
}

/// The number at JSON pointer `pointer` in `doc`.
pub fn find_json(doc: &serde_json::Value, pointer: &str) -> Result<f64, String> {
    let v = doc
        .pointer(pointer)
        .ok_or_else(|| format!("nothing at JSON pointer {pointer}"))?;
    let n = match v {
        serde_json::Value::Number(n) => n.as_f64(),
        serde_json::Value::String(s) => parse_number(s),
        _ => None,
    };
    n.filter(|x| x.is_finite())
        .ok_or_else(|| format!("JSON pointer {pointer} holds {v}, which is not a number"))
}

/// A source's text, read once per source however many figures use it.
struct Sources<'a> {
    out: Outputs<'a>,
    files: BTreeMap<std::path::PathBuf, Result<Vec<u8>, String>>,
    /// The uid the program ran as (`user`), whose files alone are read.
    owner: Option<u32>,
}

impl<'a> Sources<'a> {
    fn new(out: Outputs<'a>, p: &CommandParams) -> Self {
        // An unknown user reads nothing: no uid is u32::MAX.
        let owner = p.user.as_ref().map(|name| {
            crate::sys::user::lookup(name)
                .ok()
                .flatten()
                .map_or(u32::MAX, |ids| ids.uid)
        });
        Sources {
            out,
            files: BTreeMap::new(),
            owner,
        }
    }

    /// The bytes of `source`, or why they cannot be had, and the bytes
    /// dropped before them.
    fn get(&mut self, source: &Source) -> (Result<&[u8], String>, u64) {
        match source {
            Source::Stdout => (Ok(self.out.stdout.bytes), self.out.stdout.dropped_bytes),
            Source::Stderr => (Ok(self.out.stderr.bytes), self.out.stderr.dropped_bytes),
            Source::File(rel) => {
                let cwd = self.out.cwd;
                let got = self
                    .files
                    .entry(rel.clone())
                    .or_insert_with(|| read_capped(cwd, rel, self.owner));
                (got.as_deref().map_err(String::clone), 0)
            }
        }
    }

    /// An error about a figure read from `source`, with its last lines
    /// (stderr's when the file could not be read).
    fn error(&mut self, figure: &str, source: &Source, reason: String) -> FigureError {
        let tail = match self.get(source) {
            (Ok(bytes), _) => tail_lines(bytes, TAIL_LINES),
            (Err(_), _) => tail_lines(self.out.stderr.bytes, TAIL_LINES),
        };
        let source_name = match (source, self.get(source).0) {
            (Source::File(_), Err(_)) => {
                format!("{} (the program's stderr follows)", source.label())
            }
            _ => source.label(),
        };
        FigureError {
            figure: figure.to_string(),
            source_name,
            reason,
            tail,
        }
    }
}

/// A file the program wrote, read by schedlab (root): only beneath `cwd`
/// (no symbolic link resolves outside it, whoever the program ran as: a
/// link to /etc/shadow is refused), only a regular file (a FIFO would
/// block the run for ever, a device never end), and with `owner` (the
/// program ran as `user`) only one that user owns, so that a program
/// cannot have schedlab read, store and show a file its user may not read
/// by naming it as a source.
fn read_capped(cwd: &Path, rel: &Path, owner: Option<u32>) -> Result<Vec<u8>, String> {
    use std::io::Read;
    use std::os::unix::fs::MetadataExt;
    let path = cwd.join(rel);
    let file = crate::sys::beneath::open_beneath(cwd, rel).map_err(|e| match e.raw_os_error() {
        Some(libc::EXDEV | libc::ELOOP) => format!(
            "{} leads outside the program's directory {} (through a symbolic link): a figure \
             source is never read outside cwd",
            path.display(),
            cwd.display()
        ),
        _ => format!("cannot open {}: {e}", path.display()),
    })?;
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!("{} is not a regular file", path.display()));
    }
    if let Some(uid) = owner
        && meta.uid() != uid
    {
        return Err(format!(
            "{} is not the program's: its owner (uid {}) is not the workload's user (uid {uid}); \
             only what the program wrote is read",
            path.display(),
            meta.uid()
        ));
    }
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    Ok(bytes)
}

/// Why a JSON or parser source failed, with a hint when the capture was cut.
fn cut_hint(reason: String, dropped: u64) -> String {
    if dropped == 0 {
        reason
    } else {
        format!(
            "{reason}; only the last part of the output was kept ({dropped} bytes before it were \
             dropped): have the program write it to a file and read it with from = \"FILE\""
        )
    }
}

/// Every figure of `p` from what its program left in `out`: the parser's
/// first (figures, percentiles, histograms), then the named figures.
pub fn extract(p: &CommandParams, out: Outputs) -> Result<Extracted, FigureError> {
    let mut sources = Sources::new(out, p);
    let mut result = Extracted::default();
    if let Some(parser) = &p.parser {
        let name = format!("parser {}", parser.tool.name());
        let parsed = match sources.get(&parser.from) {
            (Ok(bytes), dropped) => parser
                .tool
                .parse(&String::from_utf8_lossy(bytes))
                .map_err(|e| cut_hint(e, dropped)),
            (Err(e), _) => Err(e),
        };
        let Parsed {
            figures,
            percentiles,
            histograms,
        } = parsed.map_err(|reason| sources.error(&name, &parser.from, reason))?;
        result.figures = figures;
        result.percentiles = percentiles;
        result.histograms = histograms;
    }
    for (name, spec) in &p.figures {
        let value = one_figure(&mut sources, spec)
            .map_err(|reason| sources.error(name, &spec.from, reason))?;
        result.figures.insert(
            name.clone(),
            Figure {
                value,
                unit: spec.unit.clone(),
                better: spec.better,
            },
        );
    }
    Ok(result)
}

fn one_figure(sources: &mut Sources, spec: &FigureSpec) -> Result<f64, String> {
    let (bytes, dropped) = sources.get(&spec.from);
    let text = String::from_utf8_lossy(bytes?);
    match &spec.pattern {
        Pattern::Regex(r) => {
            // Checked when the spec was parsed; a failure here is a stored
            // spec from another regex version.
            let re = regex::Regex::new(r).map_err(|e| e.to_string())?;
            find_regex(&re, &text)
        }
        Pattern::Json(pointer) => {
            let doc = parse_json(&text).map_err(|e| cut_hint(e, dropped))?;
            find_json(&doc, pointer)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::keys::Keys;

    fn params(text: &str) -> CommandParams {
        let t: toml::Table = text.parse().unwrap();
        super::super::params::parse(&Keys::new("w", "command", &t)).unwrap()
    }

    fn outputs<'a>(stdout: &'a [u8], stderr: &'a [u8], cwd: &'a Path) -> Outputs<'a> {
        Outputs {
            stdout: Captured {
                bytes: stdout,
                dropped_bytes: 0,
            },
            stderr: Captured {
                bytes: stderr,
                dropped_bytes: 0,
            },
            cwd,
        }
    }

    #[test]
    fn numbers_as_tools_print_them() {
        for (s, v) in [
            ("12", 12.0),
            (" 0.014 ", 0.014),
            ("+3.5", 3.5),
            ("-2", -2.0),
            ("1e3", 1000.0),
            ("4.2E-2", 0.042),
            (".5", 0.5),
            ("1,234", 1234.0),
            ("1,234,567.25", 1_234_567.25),
            ("-12,000", -12000.0),
        ] {
            assert_eq!(parse_number(s), Some(v), "{s}");
        }
        for s in [
            "", "abc", "12ms", "nan", "inf", "-inf", "1,23", "12,3456", ",123", "1.2,5", "1e999",
        ] {
            assert_eq!(parse_number(s), None, "{s}");
        }
    }

    #[test]
    fn the_last_match_wins() {
        let re = regex::Regex::new(r"rps: ([0-9.]+)").unwrap();
        assert_eq!(find_regex(&re, "rps: 10\nrps: 20\nrps: 30.5\n"), Ok(30.5));
        let e = find_regex(&re, "nothing here").unwrap_err();
        assert_eq!(e, "no match of regex `rps: ([0-9.]+)`");
        let re = regex::Regex::new(r"Time: (\S+)").unwrap();
        let e = find_regex(&re, "Time: 12s").unwrap_err();
        assert!(e.contains("captured \"12s\", which is not a number"), "{e}");
        // An optional group that did not take part in the last match.
        let re = regex::Regex::new(r"x(?:=([0-9]+))?").unwrap();
        assert!(
            find_regex(&re, "x=1 x")
                .unwrap_err()
                .contains("captured nothing")
        );
    }

    #[test]
    fn json_after_warnings_and_numbers_in_strings() {
        let text = "fio: warning: something\nmore noise\n{\"jobs\": [{\"read\": {\"bw\": 52315, \"p\": \"44.5\", \"s\": \"x\", \"o\": {}}}]}\ntrailing\n";
        let doc = parse_json(text).unwrap();
        assert_eq!(find_json(&doc, "/jobs/0/read/bw"), Ok(52315.0));
        assert_eq!(find_json(&doc, "/jobs/0/read/p"), Ok(44.5));
        assert!(
            find_json(&doc, "/jobs/0/read/s")
                .unwrap_err()
                .contains("not a number")
        );
        assert!(
            find_json(&doc, "/jobs/0/read/o")
                .unwrap_err()
                .contains("not a number")
        );
        assert_eq!(
            find_json(&doc, "/jobs/1/read/bw").unwrap_err(),
            "nothing at JSON pointer /jobs/1/read/bw"
        );
        assert!(
            parse_json("no json at all")
                .unwrap_err()
                .starts_with("not JSON")
        );
        assert!(
            parse_json("x\n{\"cut\": [1, 2")
                .unwrap_err()
                .starts_with("not JSON")
        );
    }

    #[test]
    fn figures_from_every_source() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("out")).unwrap();
        std::fs::write(dir.path().join("out/r.json"), r#"{"a": {"b": [1, 2.5]}}"#).unwrap();
        let p = params(
            r#"
            argv = ["x"]
            [figures.elapsed]
            regex = 'Time: ([0-9.]+)'
            unit = "s"
            better = "lower"
            [figures.warns]
            regex = '([0-9]+) warnings'
            from = "stderr"
            unit = ""
            better = "lower"
            [figures.b]
            json = "/a/b/1"
            from = "out/r.json"
            unit = "MB/s"
            better = "higher"
            "#,
        );
        let got = extract(
            &p,
            outputs(b"Time: 1.5\nTime: 2.25\n", b"3 warnings\n", dir.path()),
        )
        .unwrap();
        assert_eq!(
            got.values(),
            BTreeMap::from([
                ("b".to_string(), 2.5),
                ("elapsed".to_string(), 2.25),
                ("warns".to_string(), 3.0)
            ])
        );
        assert_eq!(got.figures["b"].unit, "MB/s");
        assert_eq!(got.figures["b"].better, Better::Higher);
        assert!(got.percentiles.is_empty() && got.histograms.is_empty());
        assert!(got.latency_encoded().is_empty());
    }

    #[test]
    fn a_parser_and_named_figures_together() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("c.json"),
            include_str!("parsers/samples/cyclictest_hist.json"),
        )
        .unwrap();
        let p = params(
            "argv = [\"cyclictest\"]\nparser = \"cyclictest\"\nparser_from = \"c.json\"\n\
             [figures.threads]\njson = \"/num_threads\"\nfrom = \"c.json\"\nunit = \"\"\nbetter = \"higher\"",
        );
        let got = extract(&p, outputs(b"", b"", dir.path())).unwrap();
        assert_eq!(got.figures["threads"].value, 2.0);
        assert_eq!(got.figures["max_us"].value, 92.0);
        let encoded = got.latency_encoded();
        let wakeup = crate::workload::latency::Latency::decode(&encoded["wakeup"]).unwrap();
        assert_eq!(wakeup.count(), 2000);
        // The parser's own failure names it and shows its source.
        let p = params("argv = [\"hackbench\"]\nparser = \"hackbench\"");
        let e = extract(&p, outputs(b"Running in process mode\n", b"", dir.path())).unwrap_err();
        assert_eq!(e.figure, "parser hackbench");
        assert!(e.to_string().contains("  | Running in process mode"), "{e}");
    }

    #[test]
    fn a_missing_figure_names_itself_and_shows_the_last_lines() {
        let dir = tempfile::tempdir().unwrap();
        let p = params(
            "argv = [\"x\"]\n[figures.elapsed]\nregex = 'Time: ([0-9.]+)'\nunit = \"s\"\nbetter = \"lower\"",
        );
        let stdout: String = (1..=30).map(|i| format!("line {i}\n")).collect();
        let e = extract(&p, outputs(stdout.as_bytes(), b"", dir.path())).unwrap_err();
        assert_eq!(e.figure, "elapsed");
        assert_eq!(e.source_name, "stdout");
        let shown = e.to_string();
        assert!(
            shown.starts_with(
                "figure `elapsed`: no match of regex `Time: ([0-9.]+)` in stdout; its last lines:\n"
            ),
            "{shown}"
        );
        assert!(
            shown.contains("  | line 30") && shown.contains("  | line 21"),
            "{shown}"
        );
        assert!(!shown.contains("line 20\n"), "{shown}");
        // Empty output says so.
        let e = extract(&p, outputs(b"", b"", dir.path())).unwrap_err();
        assert!(e.to_string().ends_with("in stdout (which is empty)"), "{e}");
        // A file that was never written: the program's stderr is shown.
        let p = params(
            "argv = [\"x\"]\n[figures.bw]\njson = \"/bw\"\nfrom = \"r.json\"\nunit = \"\"\nbetter = \"higher\"",
        );
        let e = extract(&p, outputs(b"", b"fio: cannot open file\n", dir.path())).unwrap_err();
        let shown = e.to_string();
        assert!(shown.contains("cannot open"), "{shown}");
        assert!(
            shown.contains("r.json (the program's stderr follows)"),
            "{shown}"
        );
        assert!(shown.contains("  | fio: cannot open file"), "{shown}");
    }

    #[test]
    fn cut_json_says_how_to_keep_it_whole() {
        let dir = tempfile::tempdir().unwrap();
        let p = params(
            "argv = [\"x\"]\n[figures.bw]\njson = \"/bw\"\nunit = \"\"\nbetter = \"higher\"",
        );
        let mut out = outputs(b"  \"bw\": 3}\n", b"", dir.path());
        out.stdout.dropped_bytes = 70_000;
        let e = extract(&p, out).unwrap_err();
        assert!(
            e.reason.contains("70000 bytes before it were dropped"),
            "{}",
            e.reason
        );
    }

    #[test]
    fn tails_are_cut_and_skip_blank_lines() {
        let long = "x".repeat(500);
        let t = tail_lines(format!("a\n\n{long}\n   \nb\n").as_bytes(), 2);
        assert_eq!(t, format!("  | {}\n  | b", "x".repeat(200)));
        assert_eq!(tail_lines(b"", 5), "");
        assert_eq!(tail_lines(b"\xff\xfeok", 1), "  | \u{fffd}\u{fffd}ok");
    }
}
