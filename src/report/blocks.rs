//! Format-neutral building blocks of report sections: a section says what
//! it shows once (paragraphs, headings, tables, figures, notes, collapsible
//! parts) and each format renders the blocks, as hyperfine's
//! `MarkupExporter` builds a table once for every markup language.
//!
//! HTML concatenates the rendered blocks; Markdown separates them by a blank
//! line. Figures are drawn in HTML only (Markdown has no charts), and
//! [`Block::Only`] holds what one format says and the other does not.

use super::Format;
use super::fmt::esc;
use super::html;
use super::sections::Table;

/// A chart with its caption.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    pub svg: String,
    pub caption: String,
}

/// One block of a section's body.
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    /// Plain text (escaped in HTML).
    Paragraph(String),
    /// A heading of `level` (3 for the parts of a section), with an HTML
    /// anchor when `id` is given.
    Heading {
        level: u8,
        text: String,
        id: Option<String>,
    },
    /// A table; `row_class` gives HTML rows an optional class (e.g. "flag").
    Table {
        table: Table,
        row_class: Vec<Option<&'static str>>,
    },
    /// Charts side by side (HTML only).
    Figures(Vec<Figure>),
    /// One chart across the page (HTML only).
    Figure(Figure),
    /// A highlighted note around some blocks (a block quote in Markdown).
    Note(Vec<Block>),
    /// Collapsible blocks under a summary line (HTML), open or not; the
    /// blocks alone in Markdown.
    Details {
        summary: String,
        open: bool,
        blocks: Vec<Block>,
    },
    /// Blocks that only one format shows.
    Only(Format, Vec<Block>),
}

impl Block {
    pub fn p(text: impl Into<String>) -> Block {
        Block::Paragraph(text.into())
    }

    pub fn heading(level: u8, text: impl Into<String>) -> Block {
        Block::Heading {
            level,
            text: text.into(),
            id: None,
        }
    }

    pub fn table(table: Table) -> Block {
        Block::Table {
            table,
            row_class: Vec::new(),
        }
    }

    pub fn html_only(blocks: Vec<Block>) -> Block {
        Block::Only(Format::Html, blocks)
    }
}

/// The HTML of some blocks.
pub fn html(blocks: &[Block]) -> String {
    let mut o = String::new();
    for b in blocks {
        html_block(&mut o, b);
    }
    o
}

fn html_block(o: &mut String, b: &Block) {
    match b {
        Block::Paragraph(t) => o.push_str(&html::p(t)),
        Block::Heading { level, text, id } => {
            let id = id
                .as_ref()
                .map_or_else(String::new, |i| format!(" id=\"{}\"", esc(i)));
            o.push_str(&format!("<h{level}{id}>{}</h{level}>\n", esc(text)));
        }
        Block::Table { table, row_class } => {
            if row_class.is_empty() {
                o.push_str(&table.html());
            } else {
                let h: Vec<&str> = table.headers.iter().map(String::as_str).collect();
                if !table.title.is_empty() {
                    o.push_str(&format!("<h4>{}</h4>\n", esc(&table.title)));
                }
                o.push_str(&html::table(&h, &table.numeric, &table.rows, row_class));
            }
        }
        Block::Figures(figures) => {
            o.push_str("<div class=\"charts\">\n");
            for f in figures {
                o.push_str(&html::figure(&f.svg, &f.caption));
            }
            o.push_str("</div>\n");
        }
        Block::Figure(f) => o.push_str(&html::figure(&f.svg, &f.caption)),
        Block::Note(blocks) => {
            o.push_str("<div class=\"note\">");
            o.push_str(&html(blocks));
            o.push_str("</div>\n");
        }
        Block::Details {
            summary,
            open,
            blocks,
        } => {
            o.push_str(if *open { "<details open>" } else { "<details>" });
            o.push_str(&format!("<summary>{}</summary>", esc(summary)));
            o.push_str(&html(blocks));
            o.push_str("</details>\n");
        }
        Block::Only(Format::Html, blocks) => o.push_str(&html(blocks)),
        Block::Only(_, _) => {}
    }
}

/// The Markdown of some blocks: each ends with a line break, a blank line
/// between two.
pub fn markdown(blocks: &[Block]) -> String {
    let parts: Vec<String> = blocks
        .iter()
        .map(markdown_block)
        .filter(|s| !s.is_empty())
        .collect();
    parts.join("\n")
}

fn markdown_block(b: &Block) -> String {
    match b {
        Block::Paragraph(t) => format!("{t}\n"),
        Block::Heading { level, text, .. } => {
            format!("{} {text}\n", "#".repeat(usize::from(*level)))
        }
        Block::Table { table, .. } => table.markdown(),
        Block::Figures(_) | Block::Figure(_) => String::new(),
        Block::Note(blocks) => markdown(blocks)
            .lines()
            .map(|l| {
                if l.is_empty() {
                    ">\n".to_string()
                } else {
                    format!("> {l}\n")
                }
            })
            .collect(),
        Block::Details { blocks, .. } => markdown(blocks),
        Block::Only(Format::Md, blocks) => markdown(blocks),
        Block::Only(_, _) => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<Block> {
        vec![
            Block::p("Intro <1>."),
            Block::Heading {
                level: 3,
                text: "wall".into(),
                id: Some("table-wall".into()),
            },
            Block::Table {
                table: Table {
                    title: String::new(),
                    headers: vec!["a".into(), "n".into()],
                    numeric: vec![false, true],
                    rows: vec![vec!["x".into(), "3".into()]],
                },
                row_class: vec![Some("flag")],
            },
            Block::html_only(vec![Block::Figures(vec![Figure {
                svg: "<svg></svg>".into(),
                caption: "c".into(),
            }])]),
            Block::Details {
                summary: "More".into(),
                open: false,
                blocks: vec![Block::p("inside")],
            },
            Block::Only(Format::Md, vec![Block::p("md only")]),
            Block::Note(vec![Block::p("a"), Block::p("b")]),
        ]
    }

    #[test]
    fn html_concatenates_the_blocks() {
        assert_eq!(
            html(&sample()),
            "<p>Intro &lt;1&gt;.</p>\n<h3 id=\"table-wall\">wall</h3>\n<div class=\"scroll\"><table><thead><tr>\
             <th>a</th><th class=\"num\">n</th></tr></thead><tbody><tr class=\"flag\"><td>x</td>\
             <td class=\"num\">3</td></tr></tbody></table></div>\n<div class=\"charts\">\n<figure><svg></svg>\
             <figcaption>c</figcaption></figure>\n</div>\n<details><summary>More</summary><p>inside</p>\n\
             </details>\n<div class=\"note\"><p>a</p>\n<p>b</p>\n</div>\n"
        );
    }

    #[test]
    fn markdown_separates_the_blocks_by_a_blank_line() {
        assert_eq!(
            markdown(&sample()),
            "Intro <1>.\n\n### wall\n\n| a   |   n |\n| --- | --: |\n| x   |   3 |\n\ninside\n\nmd only\n\n> a\n>\n> b\n"
        );
    }
}
