//! The HTML page around the sections: one self-contained file with inline
//! CSS, no scripts, nothing fetched from the network.

use std::fmt::Write;

use super::fmt::esc;

/// The page's style sheet.
pub const CSS: &str = r#"
:root { --fg: #1b1b1b; --muted: #5a5f66; --line: #dcdfe3; --soft: #f5f6f8; --accent: #0072B2; }
* { box-sizing: border-box; }
html { background: #eef0f3; }
body { margin: 0; color: var(--fg);
  font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", Arial, sans-serif; }
main { max-width: 1260px; margin: 0 auto; padding: 28px 32px 64px; background: #fff; min-height: 100vh; }
header h1 { font-size: 26px; margin: 0 0 2px; letter-spacing: -0.01em; }
header p.sub { margin: 0 0 14px; color: var(--muted); }
h2 { font-size: 21px; margin: 40px 0 12px; padding-bottom: 5px; border-bottom: 2px solid var(--line); }
h3 { font-size: 17px; margin: 26px 0 8px; }
h4 { font-size: 15px; margin: 18px 0 6px; }
p { margin: 6px 0 10px; max-width: 980px; }
a { color: var(--accent); }
code { font: 13px ui-monospace, "DejaVu Sans Mono", monospace; background: var(--soft); padding: 1px 4px; border-radius: 3px; }
nav.toc { background: var(--soft); border: 1px solid var(--line); border-radius: 6px; padding: 8px 16px; margin: 12px 0 8px; }
nav.toc ol { margin: 4px 0; padding-left: 20px; columns: 2; column-gap: 40px; }
nav.toc li { margin: 1px 0; }
.facts { display: flex; flex-wrap: wrap; gap: 10px; margin: 12px 0; padding: 0; list-style: none; }
.facts li { background: var(--soft); border: 1px solid var(--line); border-radius: 6px; padding: 6px 12px; }
.facts b { font-size: 18px; display: block; }
ul.findings { padding-left: 20px; }
ul.findings li { margin: 5px 0; max-width: 1000px; }
ul.findings li.different { list-style: "▲ "; }
ul.findings li.ns { color: var(--muted); }
.note { background: #fff7e0; border-left: 4px solid #E69F00; padding: 8px 14px; margin: 10px 0; max-width: 1000px; }
.note p { margin: 3px 0; }
.ok { background: #e9f6ef; border-left-color: #009E73; }
table { border-collapse: collapse; font-size: 13px; margin: 8px 0 18px; font-variant-numeric: tabular-nums; }
th, td { padding: 4px 9px; border-bottom: 1px solid var(--line); text-align: left; vertical-align: top; }
th { background: var(--soft); font-weight: 600; position: sticky; top: 0; }
td.num, th.num { text-align: right; white-space: nowrap; }
tbody tr:nth-child(even) { background: #fafbfc; }
tr.different td { background: #eaf5ee; }
tr.flag td { background: #fdeeee; }
.scroll { overflow-x: auto; max-width: 100%; }
.charts { display: grid; grid-template-columns: repeat(2, minmax(0, 1fr)); gap: 14px; margin: 8px 0 18px; }
@media (max-width: 900px) { .charts { grid-template-columns: 1fr; } }
figure { margin: 0; border: 1px solid var(--line); border-radius: 6px; padding: 6px; background: #fff; }
figure svg { width: 100%; height: auto; display: block; }
figure:has(> svg.first-bars) { max-width: 720px; }
figcaption { font-size: 12.5px; color: var(--muted); padding: 2px 6px 4px; }
details { margin: 6px 0 12px; }
details > summary { cursor: pointer; font-weight: 600; padding: 4px 0; }
footer { margin-top: 48px; color: var(--muted); font-size: 12.5px; border-top: 1px solid var(--line); padding-top: 10px; }
"#;

/// The whole page: head, title block, the first screen (`lead`, may be
/// empty), table of contents, section bodies.
pub fn page(
    title: &str,
    subtitle: &str,
    lead: &str,
    toc: &[(String, String)],
    body: &str,
    footer: &str,
) -> String {
    let mut out = String::with_capacity(body.len() + 8192);
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta name=\"generator\" content=\"schedlab {}\">\n<title>{}</title>\n<style>{CSS}</style>\n</head>\n\
         <body>\n<main>\n<header><h1>{}</h1><p class=\"sub\">{}</p></header>\n",
        env!("CARGO_PKG_VERSION"),
        esc(title),
        esc(title),
        esc(subtitle)
    );
    out.push_str(lead);
    out.push_str("<nav class=\"toc\"><b>Contents</b><ol>");
    for (id, t) in toc {
        let _ = write!(out, "<li><a href=\"#{}\">{}</a></li>", esc(id), esc(t));
    }
    out.push_str("</ol></nav>\n");
    out.push_str(body);
    let _ = write!(
        out,
        "<footer>{}</footer>\n</main>\n</body>\n</html>\n",
        esc(footer)
    );
    out
}

/// A table of plain-text cells (escaped here). `numeric` right-aligns a
/// column; `row_class` gives each row an optional class.
pub fn table(
    headers: &[&str],
    numeric: &[bool],
    rows: &[Vec<String>],
    row_class: &[Option<&str>],
) -> String {
    let mut out = String::from("<div class=\"scroll\"><table><thead><tr>");
    for (i, h) in headers.iter().enumerate() {
        let cls = if numeric.get(i).copied().unwrap_or(false) {
            " class=\"num\""
        } else {
            ""
        };
        let _ = write!(out, "<th{cls}>{}</th>", esc(h));
    }
    out.push_str("</tr></thead><tbody>");
    for (r, row) in rows.iter().enumerate() {
        match row_class.get(r).copied().flatten() {
            Some(c) => {
                let _ = write!(out, "<tr class=\"{c}\">");
            }
            None => out.push_str("<tr>"),
        }
        for (i, cell) in row.iter().enumerate() {
            let cls = if numeric.get(i).copied().unwrap_or(false) {
                " class=\"num\""
            } else {
                ""
            };
            let _ = write!(out, "<td{cls}>{}</td>", esc(cell));
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table></div>\n");
    out
}

/// A paragraph of plain text.
pub fn p(text: &str) -> String {
    format!("<p>{}</p>\n", esc(text))
}

/// A figure around an SVG chart with a caption.
pub fn figure(svg: &str, caption: &str) -> String {
    format!(
        "<figure>{svg}<figcaption>{}</figcaption></figure>\n",
        esc(caption)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_is_self_contained() {
        let html = page(
            "t <1>",
            "s",
            "<section id=\"lead\"></section>",
            &[("a".into(), "A".into())],
            "<section id=\"a\"></section>",
            "f",
        );
        assert!(html.starts_with("<!DOCTYPE html>"));
        assert!(html.contains("<title>t &lt;1&gt;</title>"));
        assert!(!html.contains("<script"));
        assert!(!html.contains("<link") && !html.contains("https://") && !html.contains("src="));
        assert!(html.contains("<a href=\"#a\">A</a>"));
        // The first screen comes before the table of contents.
        assert!(html.find("id=\"lead\"").unwrap() < html.find("<nav").unwrap());
    }

    #[test]
    fn tables_escape_and_align() {
        let t = table(
            &["a", "n"],
            &[false, true],
            &[vec!["<x>".into(), "3".into()]],
            &[Some("flag")],
        );
        assert!(t.contains("<td>&lt;x&gt;</td><td class=\"num\">3</td>"));
        assert!(t.contains("<tr class=\"flag\">"));
    }
}
