//! Writing for people: command output on standard output that returns
//! errors instead of panicking, notes on standard error that never fail, and
//! escaping of user-supplied text before it reaches a terminal.
//!
//! Rust ignores SIGPIPE, so writing to a closed pipe (`schedlab campaigns |
//! head -1`) is an EPIPE error: `println!` panics on it. Commands write their
//! output through [`stdout`] (or the [`outln!`] macro) and pass the error up;
//! the writer records that standard output is gone, and `cli::main` then
//! exits 0 without a word, like `cat` or ripgrep. Progress and notes go to
//! standard error through [`note!`], which ignores write errors: a closed
//! standard error (`schedlab run … 2>&1 | head -3`) must never stop a
//! campaign.

use std::borrow::Cow;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};

static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);

/// Whether a write to standard output met a closed pipe (EPIPE).
pub fn stdout_closed() -> bool {
    STDOUT_CLOSED.load(Ordering::Relaxed)
}

fn watch<T>(r: io::Result<T>) -> io::Result<T> {
    r.map_err(|e| {
        if e.kind() == io::ErrorKind::BrokenPipe {
            STDOUT_CLOSED.store(true, Ordering::Relaxed);
        }
        // Say where: "No space left on device" alone could be the database.
        io::Error::new(e.kind(), format!("cannot write to standard output: {e}"))
    })
}

/// Locked standard output that reports errors (and remembers a closed pipe).
pub struct Stdout(io::StdoutLock<'static>);

/// Standard output for a command's results.
pub fn stdout() -> Stdout {
    Stdout(io::stdout().lock())
}

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        watch(self.0.write(buf))
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        watch(self.0.write_all(buf))
    }

    fn flush(&mut self) -> io::Result<()> {
        watch(self.0.flush())
    }
}

/// `writeln!` to standard output, returning `io::Result<()>` (use with `?`).
#[macro_export]
macro_rules! outln {
    ($($arg:tt)*) => {{
        use ::std::io::Write as _;
        writeln!($crate::out::stdout(), $($arg)*)
    }};
}

/// `eprintln!` that never panics and never fails: a closed or broken
/// standard error is ignored.
#[macro_export]
macro_rules! note {
    ($($arg:tt)*) => {
        $crate::out::note_fmt(format_args!($($arg)*))
    };
}

/// One line on standard error; write errors are ignored.
pub fn note_fmt(args: std::fmt::Arguments) {
    let mut err = io::stderr().lock();
    let _ = err.write_fmt(args).and_then(|()| err.write_all(b"\n"));
}

/// Characters that must not reach a terminal raw: control characters (C0,
/// DEL, C1: escape sequences, bell, carriage return) and the bidirectional
/// overrides that reorder what is shown.
fn unsafe_char(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// User-supplied text (names, keys, paths) made safe to print on one line:
/// every control character is shown escaped, e.g. ESC as `\u{1b}`.
pub fn esc(s: &str) -> Cow<'_, str> {
    escape(s, false)
}

/// [`esc`] for text of several lines (messages, Markdown): line breaks and
/// tabs stay, every other control character is escaped.
pub fn esc_lines(s: &str) -> Cow<'_, str> {
    escape(s, true)
}

fn escape(s: &str, keep_lines: bool) -> Cow<'_, str> {
    let keep = |c: char| keep_lines && (c == '\n' || c == '\t');
    if !s.chars().any(|c| unsafe_char(c) && !keep(c)) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if unsafe_char(c) && !keep(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Markdown made inert as HTML: a `<` that could open a tag, a comment,
/// a processing instruction or an autolink (followed by a letter, `/`,
/// `!` or `?`) is backslash-escaped, so a name such as
/// `<img src=x onerror=…>` reaches a Markdown viewer as text. Apply once,
/// to a whole document (a second pass would escape the backslashes'
/// targets again). Comparisons such as `p < 0.05` stay as they are.
pub fn md_inert(s: &str) -> Cow<'_, str> {
    let opens = |rest: &str| {
        rest.chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || matches!(c, '/' | '!' | '?'))
    };
    if !s.match_indices('<').any(|(i, _)| opens(&s[i + 1..])) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for (i, c) in s.char_indices() {
        if c == '<' && opens(&s[i + 1..]) {
            out.push('\\');
        }
        out.push(c);
    }
    Cow::Owned(out)
}

/// A path for messages, escaped like [`esc`] (lossy for non-UTF-8 names).
pub fn path(p: &std::path::Path) -> String {
    esc(&p.display().to_string()).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_cannot_carry_html_tags_but_keeps_comparisons() {
        assert_eq!(
            md_inert("campaign <img src=x onerror=alert(1)>"),
            "campaign \\<img src=x onerror=alert(1)>"
        );
        assert_eq!(
            md_inert("a</b><!-- c --><?x?>"),
            "a\\</b>\\<!-- c -->\\<?x?>"
        );
        assert_eq!(md_inert("a<b, a <= b"), "a\\<b, a <= b");
        assert_eq!(md_inert("p < 0.05 and 3<4"), "p < 0.05 and 3<4");
        assert!(matches!(md_inert("p < 0.05"), Cow::Borrowed(_)));
        assert_eq!(md_inert("ünï<ß"), "ünï<ß");
        assert_eq!(md_inert("end<"), "end<");
    }

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(esc("plain ünï"), "plain ünï");
        assert!(matches!(esc("plain"), Cow::Borrowed(_)));
        assert_eq!(esc("a\x1b[31mred"), "a\\u{1b}[31mred");
        assert_eq!(esc("bell\x07\r\n"), "bell\\u{7}\\r\\n");
        assert_eq!(esc("c1\u{9b}2J"), "c1\\u{9b}2J");
        assert_eq!(esc("del\x7f"), "del\\u{7f}");
        assert_eq!(esc("bidi\u{202e}txt"), "bidi\\u{202e}txt");
        assert_eq!(
            esc_lines("l1\n\tl2\x1b]0;x\x07"),
            "l1\n\tl2\\u{1b}]0;x\\u{7}"
        );
    }

    #[test]
    fn paths_are_escaped() {
        assert_eq!(path(std::path::Path::new("a\x1bb.db")), "a\\u{1b}b.db");
    }
}
