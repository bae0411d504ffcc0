//! The house rule that no function in `src/` runs over [`MAX_LINES`]
//! lines, counted from the line of its `fn` to the line of its closing
//! brace, checked over the source tree by a unit test (so it stays true).
//!
//! The scan is lexical, not a parser: comments, string, raw-string and
//! character literals are blanked first, so braces inside them do not
//! count; a `fn` without a body (a trait's declaration) is skipped.

/// The longest a function may be, in lines.
pub const MAX_LINES: usize = 150;

/// `src` with comments and the contents of literals replaced by spaces
/// (line breaks kept, so line numbers stay).
pub(super) fn blank(src: &str) -> String {
    blank_with(src, true)
}

/// `src` with its comments replaced by spaces, and the contents of its
/// literals too when `literals` (line breaks kept).
pub(super) fn blank_with(src: &str, literals: bool) -> String {
    let b: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let blank_to = |out: &mut String, from: usize, to: usize| {
        out.extend(
            b[from..to]
                .iter()
                .map(|&c| if c == '\n' { '\n' } else { ' ' }),
        );
    };
    let starts = |i: usize, p: &str| p.chars().enumerate().all(|(k, c)| b.get(i + k) == Some(&c));
    let mut i = 0;
    while i < b.len() {
        let after_ident = i > 0 && (b[i - 1].is_alphanumeric() || b[i - 1] == '_');
        let end = if starts(i, "//") {
            (i..b.len()).find(|&k| b[k] == '\n').unwrap_or(b.len())
        } else if starts(i, "/*") {
            let (mut depth, mut j) = (0usize, i);
            while j < b.len() {
                if starts(j, "/*") {
                    depth += 1;
                    j += 2;
                } else if starts(j, "*/") {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            j
        } else if let Some((open, hashes)) = raw_string_open(&b[i..]).filter(|_| !after_ident) {
            let close: String = std::iter::once('"')
                .chain(std::iter::repeat_n('#', hashes))
                .collect();
            (i + open..b.len())
                .find(|&k| starts(k, &close))
                .map_or(b.len(), |k| k + close.len())
        } else if b[i] == '"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != '"' {
                j += if b[j] == '\\' { 2 } else { 1 };
            }
            (j + 1).min(b.len())
        } else if let Some(n) = char_literal(&b[i..]) {
            i + n
        } else {
            out.push(b[i]);
            i += 1;
            continue;
        };
        let comment = starts(i, "//") || starts(i, "/*");
        if comment || literals {
            blank_to(&mut out, i, end);
        } else {
            out.extend(&b[i..end]);
        }
        i = end;
    }
    out
}

/// The opening of a raw string (`r"`, `r#"`, `br##"` …) at the start of
/// `s`, if one is there: its length and its number of `#`.
fn raw_string_open(s: &[char]) -> Option<(usize, usize)> {
    let b = usize::from(s.first() == Some(&'b'));
    if s.get(b) != Some(&'r') {
        return None;
    }
    let hashes = s[b + 1..].iter().take_while(|&&c| c == '#').count();
    (s.get(b + 1 + hashes) == Some(&'"')).then_some((b + 2 + hashes, hashes))
}

/// The length of a character literal at the start of `s` (`'a'`, `'\n'`,
/// `'\u{1F600}'`, `'{'`), or None (a lifetime, or not a quote).
fn char_literal(s: &[char]) -> Option<usize> {
    if s.first() != Some(&'\'') {
        return None;
    }
    if s.get(1) == Some(&'\\') {
        let close = s.iter().skip(3).position(|&c| c == '\'')?;
        return (close < 10).then_some(close + 4);
    }
    (s.get(2) == Some(&'\'')).then_some(3)
}

/// Whether `line` declares a function: its name if so.
fn fn_name(line: &str) -> Option<&str> {
    let mut words = line.trim_start();
    loop {
        let (word, rest) = words.split_once(char::is_whitespace)?;
        match word {
            "fn" => {
                let rest = rest.trim_start();
                let end = rest
                    .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .unwrap_or(rest.len());
                return (end > 0).then(|| &rest[..end]);
            }
            "pub" | "const" | "async" | "unsafe" | "default" | "extern" => {}
            w if w.starts_with("pub(") => {}
            w if w.starts_with('"') => {} // extern "C"
            _ => return None,
        }
        words = rest.trim_start();
    }
}

/// Every function with a body in `src`: (name, first line (1-based),
/// lines from its `fn` to its closing brace).
pub fn functions(src: &str) -> Vec<(String, usize, usize)> {
    let blanked = blank(src);
    let lines: Vec<&str> = blanked.lines().collect();
    let mut out = Vec::new();
    for (ln, line) in lines.iter().enumerate() {
        let Some(name) = fn_name(line) else { continue };
        let start = line.find("fn").map_or(0, |k| k + 2);
        let (mut depth, mut nest, mut body) = (0usize, 0i64, false);
        'scan: for (k, l) in lines.iter().enumerate().skip(ln) {
            let text = if k == ln { &l[start..] } else { l };
            for c in text.chars() {
                if !body {
                    match c {
                        '(' | '[' | '<' => nest += 1,
                        ')' | ']' | '>' => nest -= 1,
                        ';' if nest <= 0 => break 'scan,
                        '{' if nest <= 0 => {
                            body = true;
                            depth = 1;
                        }
                        _ => {}
                    }
                } else if c == '{' {
                    depth += 1;
                } else if c == '}' {
                    depth -= 1;
                    if depth == 0 {
                        out.push((name.to_string(), ln + 1, k - ln + 1));
                        break 'scan;
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use std::path::Path;

    pub(in crate::testing) fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).expect("reading src/") {
            let p = e.expect("a directory entry").path();
            if p.is_dir() {
                rust_files(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }

    #[test]
    fn the_scan_counts_from_fn_to_its_closing_brace() {
        let src = "fn a() {\n    let s = \"}\";\n    let c = '}';\n    // }\n}\n\
                   trait T {\n    fn decl(&self);\n    fn body(&self) -> Vec<u8> {\n        \
                   r#\"{\"#.into()\n    }\n}\npub(crate) fn b<'a>(x: &'a str) -> &'a str {\n    x\n}\n";
        assert_eq!(
            functions(src),
            vec![
                ("a".to_string(), 1, 5),
                ("body".to_string(), 8, 3),
                ("b".to_string(), 12, 3),
            ]
        );
    }

    /// No function of `src/` is over [`MAX_LINES`] lines.
    #[test]
    fn no_function_in_src_is_over_the_limit() {
        let repo = Path::new(crate::REPO_DIR);
        let mut files = Vec::new();
        rust_files(&repo.join("src"), &mut files);
        rust_files(&repo.join("ext/src"), &mut files);
        assert!(
            files.len() > 100,
            "found only {} files under src/",
            files.len()
        );
        let mut long = Vec::new();
        for f in &files {
            let src = std::fs::read_to_string(f).expect("reading a source file");
            for (name, line, n) in functions(&src) {
                if n > MAX_LINES {
                    let rel = f.strip_prefix(repo).unwrap_or(f).display().to_string();
                    long.push(format!("src/{rel}:{line} fn {name}: {n} lines"));
                }
            }
        }
        assert!(
            long.is_empty(),
            "functions over {MAX_LINES} lines (split them into named steps):\n{}",
            long.join("\n")
        );
    }
}
