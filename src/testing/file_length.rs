//! The house rule that no file of `src/` holds over [`MAX_CODE_LINES`]
//! lines of code, checked over the source tree by a unit test (so it stays
//! true). A line of code is one with something left once comments are
//! blanked (the lexical scan of [`super::function_length`]): blank lines,
//! `//` and doc comments and block comments do not count; a line inside a
//! multi-line string literal does, and so do a file's unit tests.

use super::function_length::blank_with;

/// The most lines of code a file of `src/` may hold.
pub const MAX_CODE_LINES: usize = 1000;

/// The lines of code of `src`.
pub fn code_lines(src: &str) -> usize {
    blank_with(src, false)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::function_length::tests::rust_files;
    use std::path::Path;

    #[test]
    fn comments_and_blank_lines_are_not_code() {
        let src = "//! doc\n\n/// item doc\nfn a() {\n    // note\n    let s = \"\n\n    // in a string\n\";\n    /* block\n       comment */ let x = 1;\n}\n";
        // `fn a() {`, `let s = "`, `// in a string`, `";`, `comment */
        // let x = 1;` (code after the block's end) and `}`.
        assert_eq!(code_lines(src), 6);
    }

    /// No file of `src/` holds over [`MAX_CODE_LINES`] lines of code.
    #[test]
    fn no_file_in_src_is_over_the_limit() {
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
            let n = code_lines(&src);
            if n > MAX_CODE_LINES {
                let rel = f.strip_prefix(repo).unwrap_or(f).display();
                long.push(format!("src/{rel}: {n} lines of code"));
            }
        }
        assert!(
            long.is_empty(),
            "files over {MAX_CODE_LINES} lines of code (split them by job):\n{}",
            long.join("\n")
        );
    }
}
