//! The layers of `src/`, as imports that must not come back: each rule
//! names a module and the modules it may not name (`crate::X` paths,
//! grouped `use crate::{X, …}` too), checked over the source tree by a unit
//! test. Comments and literals are blanked first (the lexical scan of
//! [`super::function_length`]), so a doc link does not count; unit tests
//! inside a module count like the rest of it (the fixtures they use sit in
//! `testing`, which every layer may name).

use super::function_length::blank;

/// (module, the modules it may not import), bottom layers first.
pub const FORBIDDEN: &[(&str, &[&str])] = &[
    // The field registry and the metrics sit below everything that stores,
    // runs or reports them.
    (
        "fields",
        &[
            "store", "report", "compare", "campaign", "launch", "sim", "export", "trace",
        ],
    ),
    ("stats", &["store", "report", "compare", "campaign"]),
    (
        "record",
        &["store", "report", "compare", "campaign", "launch", "sim"],
    ),
    (
        "trace",
        &["sim", "launch", "store", "report", "compare", "campaign"],
    ),
    // The launcher runs real processes and knows nothing of the model.
    ("launch", &["sim", "report", "compare", "campaign"]),
    ("sim", &["launch", "store", "report", "compare", "campaign"]),
    ("store", &["report", "compare", "campaign", "launch", "sim"]),
    ("campaign", &["report", "compare"]),
    ("export", &["report", "compare"]),
    // compare sits beside the report and uses it, not the other way round.
    ("report", &["compare"]),
    // The synthetic fixtures make stores; they do not borrow the report's
    // code, so a report bug cannot hide in its own fixtures.
    ("testing", &["report", "compare"]),
];

/// The top-level modules `src` names as `crate::X` (and `crate::{X, …}`).
pub fn crate_modules(src: &str) -> Vec<String> {
    let text = blank(src);
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let mut out = Vec::new();
    for (k, _) in text.match_indices("crate::") {
        // Not `$crate::` of a macro, nor the tail of a longer name.
        if text[..k].ends_with(|c: char| c == '$' || c == '_' || c.is_alphanumeric()) {
            continue;
        }
        let rest = &text[k + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let (mut depth, mut item_start) = (0usize, true);
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => item_start = true,
                    c if c.is_whitespace() => {}
                    _ if item_start => {
                        item_start = false;
                        out.push(ident(&group[i..]));
                    }
                    _ => {}
                }
            }
        } else {
            out.push(ident(rest));
        }
    }
    out.retain(|m| !m.is_empty());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::function_length::tests::rust_files;
    use std::path::Path;

    #[test]
    fn the_scan_finds_paths_and_groups_but_not_comments_or_strings() {
        let src = "//! [`crate::sim`]\nuse crate::store::Store;\nuse crate::{out, \
                   spec::{self, Spec}};\nfn f() { let _ = \"crate::report\"; crate::sim::run(); }\n";
        assert_eq!(crate_modules(src), ["store", "out", "spec", "sim"]);
    }

    /// No module of `src/` imports a module its rule forbids.
    #[test]
    fn no_forbidden_import_in_src() {
        let root = Path::new(crate::REPO_DIR).join("src");
        let mut bad = Vec::new();
        for (module, forbidden) in FORBIDDEN {
            let mut files = Vec::new();
            let dir = root.join(module);
            if dir.is_dir() {
                rust_files(&dir, &mut files);
            }
            let file = root.join(format!("{module}.rs"));
            if file.is_file() {
                files.push(file);
            }
            assert!(!files.is_empty(), "src/{module} is gone: update FORBIDDEN");
            for f in &files {
                let src = std::fs::read_to_string(f).expect("reading a source file");
                for m in crate_modules(&src) {
                    if forbidden.contains(&m.as_str()) {
                        let rel = f.strip_prefix(&root).unwrap_or(f).display();
                        bad.push(format!("src/{rel} imports crate::{m} ({module} ↛ {m})"));
                    }
                }
            }
        }
        bad.dedup();
        assert!(
            bad.is_empty(),
            "imports that run against the layers (move the type down a layer, or \
             the fixture to testing/):\n{}",
            bad.join("\n")
        );
    }
}
