//! Format-neutral building blocks of report sections: a section says what
//! it shows once (paragraphs, headings, lists, tables, figures, notes,
//! collapsible parts) and each format renders the blocks, as hyperfine's
//! `MarkupExporter` builds a table once for every markup language.
//!
//! HTML concatenates the rendered blocks; Markdown separates them by a blank
//! line. Figures and key-figure tiles are drawn in HTML only (Markdown has
//! no charts), and [`Block::Only`] holds what one format says and the other
//! does not. The base types live here too: [`Format`] and [`Table`].
//! Every text a block carries is plain text: HTML escapes it, Markdown
//! makes it inert ([`md_text`]: no line break, link or image of its own).

use std::fmt::Write;
use std::path::Path;

use super::fmt::{Align, esc, md_table, md_text};
use super::html;

/// Output format of a report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// One self-contained HTML file with charts (no network, no scripts).
    Html,
    /// Markdown: findings and tables, for the terminal or a lab report.
    Md,
    /// JSON: every statistic, for scripts.
    Json,
}

impl Format {
    pub const ALL: [Format; 3] = [Format::Html, Format::Md, Format::Json];

    /// The name on the command line (`--format md`).
    pub fn name(self) -> &'static str {
        match self {
            Format::Html => "html",
            Format::Md => "md",
            Format::Json => "json",
        }
    }

    /// The format to write: `format` when given, else from the extension of
    /// `output` (.md or .markdown, .json), else HTML.
    pub fn resolve(format: Option<Format>, output: Option<&Path>) -> Format {
        if let Some(f) = format {
            return f;
        }
        let ext = output
            .and_then(Path::extension)
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase);
        match ext.as_deref() {
            Some("md" | "markdown") => Format::Md,
            Some("json") => Format::Json,
            _ => Format::Html,
        }
    }
}

/// Markdown column alignment from "is numeric" flags.
fn aligns(numeric: &[bool]) -> Vec<Align> {
    numeric
        .iter()
        .map(|&n| if n { Align::Right } else { Align::Left })
        .collect()
}

/// A table in HTML and Markdown at once: a title (may be empty), headers,
/// which columns are numeric, rows.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Table {
    pub title: String,
    pub headers: Vec<String>,
    pub numeric: Vec<bool>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    pub fn html(&self) -> String {
        let h: Vec<&str> = self.headers.iter().map(String::as_str).collect();
        let mut o = String::new();
        if !self.title.is_empty() {
            o.push_str(&format!("<h4>{}</h4>\n", esc(&self.title)));
        }
        o.push_str(&html::table(&h, &self.numeric, &self.rows, &[]));
        o
    }

    pub fn markdown(&self) -> String {
        let h: Vec<&str> = self.headers.iter().map(String::as_str).collect();
        let mut o = String::new();
        if !self.title.is_empty() {
            o.push_str(&format!("**{}**\n\n", md_text(&self.title)));
        }
        o.push_str(&md_table(&h, &aligns(&self.numeric), &self.rows));
        o
    }
}

/// A chart with its caption.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    pub svg: String,
    pub caption: String,
}

/// A header cell of a [`Grid`], spanning `cols` columns and `rows` header
/// rows.
#[derive(Debug, Clone, PartialEq)]
pub struct HeaderCell {
    pub text: String,
    pub cols: usize,
    pub rows: usize,
    /// Right-aligned (a numeric column's header).
    pub numeric: bool,
}

impl HeaderCell {
    /// A cell of one column and one row.
    pub fn new(text: impl Into<String>, numeric: bool) -> HeaderCell {
        HeaderCell {
            text: text.into(),
            cols: 1,
            rows: 1,
            numeric,
        }
    }

    /// The cell spanning `cols` columns and `rows` header rows.
    pub fn span(self, cols: usize, rows: usize) -> HeaderCell {
        HeaderCell { cols, rows, ..self }
    }
}

/// A body cell of a [`Grid`] with an optional tooltip (HTML only).
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    pub text: String,
    pub tooltip: Option<String>,
}

impl Cell {
    pub fn new(text: impl Into<String>) -> Cell {
        Cell {
            text: text.into(),
            tooltip: None,
        }
    }
}

/// A table whose header has several rows of cells spanning columns and rows
/// (as "m = 2" over "t (s)" and "Mflop/s"), with tooltips on body cells. In
/// Markdown, which has one header row, each column's header joins the
/// header cells above it with ": " and the tooltips are left out.
#[derive(Debug, Clone, PartialEq)]
pub struct Grid {
    /// HTML class of the table.
    pub class: Option<&'static str>,
    pub header: Vec<Vec<HeaderCell>>,
    /// Which body columns are numeric (right-aligned).
    pub numeric: Vec<bool>,
    pub rows: Vec<Vec<Cell>>,
}

impl Grid {
    /// Each column's header cells, top to bottom (a cell spanning several
    /// header rows once).
    fn column_headers(&self) -> Vec<Vec<&str>> {
        let mut columns: Vec<Vec<&str>> = Vec::new();
        // Per column, the header row below the cells placed so far.
        let mut filled: Vec<usize> = Vec::new();
        for (r, row) in self.header.iter().enumerate() {
            let mut col = 0;
            for cell in row {
                // Skip the columns a cell from a row above still covers.
                while filled.get(col).is_some_and(|&f| f > r) {
                    col += 1;
                }
                for c in col..col + cell.cols.max(1) {
                    if columns.len() <= c {
                        columns.resize(c + 1, Vec::new());
                        filled.resize(c + 1, 0);
                    }
                    columns[c].push(&cell.text);
                    filled[c] = r + cell.rows.max(1);
                }
                col += cell.cols.max(1);
            }
        }
        columns
    }

    fn html(&self) -> String {
        let num = |n: bool| if n { " class=\"num\"" } else { "" };
        let mut o = String::from("<div class=\"scroll\"><table");
        if let Some(c) = self.class {
            let _ = write!(o, " class=\"{c}\"");
        }
        o.push_str("><thead>");
        for row in &self.header {
            o.push_str("<tr>");
            for h in row {
                o.push_str("<th");
                if h.rows > 1 {
                    let _ = write!(o, " rowspan=\"{}\"", h.rows);
                }
                if h.cols > 1 {
                    let _ = write!(o, " colspan=\"{}\"", h.cols);
                }
                let _ = write!(o, "{}>{}</th>", num(h.numeric), esc(&h.text));
            }
            o.push_str("</tr>");
        }
        o.push_str("</thead><tbody>");
        for row in &self.rows {
            o.push_str("<tr>");
            for (i, c) in row.iter().enumerate() {
                let _ = write!(
                    o,
                    "<td{}",
                    num(self.numeric.get(i).copied().unwrap_or(false))
                );
                if let Some(t) = &c.tooltip {
                    let _ = write!(o, " title=\"{}\"", esc(t));
                }
                let _ = write!(o, ">{}</td>", esc(&c.text));
            }
            o.push_str("</tr>");
        }
        o.push_str("</tbody></table></div>\n");
        o
    }

    fn markdown(&self) -> String {
        let headers: Vec<String> = self
            .column_headers()
            .iter()
            .map(|parts| parts.join(": "))
            .collect();
        let h: Vec<&str> = headers.iter().map(String::as_str).collect();
        let align: Vec<Align> = self
            .numeric
            .iter()
            .map(|&n| if n { Align::Right } else { Align::Left })
            .collect();
        let rows: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|r| r.iter().map(|c| c.text.clone()).collect())
            .collect();
        md_table(&h, &align, &rows)
    }
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
    /// A minor heading: `<h4>` in HTML, a bold line in Markdown (as a
    /// table's title).
    Title(String),
    /// A minor heading running into a paragraph: an `<h4>` and the
    /// paragraph in HTML, "**title**: text" in Markdown.
    RunIn { title: String, text: String },
    /// A bulleted list of plain-text items; `class` and `item_class` are
    /// the HTML classes of the list and of each item.
    List {
        class: Option<&'static str>,
        item_class: Option<&'static str>,
        items: Vec<String>,
    },
    /// Key figures as tiles, each a value over its label (HTML only:
    /// Markdown states them in a sentence).
    Facts(Vec<(String, String)>),
    /// A table; `row_class` gives HTML rows an optional class (e.g. "flag").
    Table {
        table: Table,
        row_class: Vec<Option<&'static str>>,
    },
    /// A table with a multi-row header and tooltips.
    Grid(Grid),
    /// Charts side by side (HTML only).
    Figures(Vec<Figure>),
    /// One chart across the page (HTML only).
    Figure(Figure),
    /// A chart with its table beside it, the table collapsed under the
    /// summary line `collapsed` when given (HTML); the table alone in
    /// Markdown.
    FigureTable {
        figure: Figure,
        table: Table,
        collapsed: Option<String>,
    },
    /// A highlighted note around some blocks (a block quote in Markdown).
    Note(Vec<Block>),
    /// Warnings: in HTML one highlighted note with a paragraph per
    /// warning; in Markdown a block quote per warning, starting
    /// "**Note:**".
    Notes(Vec<String>),
    /// Collapsible blocks under a summary line (HTML), open or not (an open
    /// one starts its blocks on a line of their own); the blocks alone in
    /// Markdown.
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

    pub fn md_only(blocks: Vec<Block>) -> Block {
        Block::Only(Format::Md, blocks)
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

fn html_table(o: &mut String, table: &Table, row_class: &[Option<&'static str>]) {
    if row_class.is_empty() {
        o.push_str(&table.html());
    } else {
        let h: Vec<&str> = table.headers.iter().map(String::as_str).collect();
        if !table.title.is_empty() {
            let _ = writeln!(o, "<h4>{}</h4>", esc(&table.title));
        }
        o.push_str(&html::table(&h, &table.numeric, &table.rows, row_class));
    }
}

fn html_block(o: &mut String, b: &Block) {
    match b {
        Block::Paragraph(t) => o.push_str(&html::p(t)),
        Block::Heading { level, text, id } => {
            let id = id
                .as_ref()
                .map_or_else(String::new, |i| format!(" id=\"{}\"", esc(i)));
            let _ = writeln!(o, "<h{level}{id}>{}</h{level}>", esc(text));
        }
        Block::Title(t) => {
            let _ = writeln!(o, "<h4>{}</h4>", esc(t));
        }
        Block::RunIn { title, text } => {
            let _ = writeln!(o, "<h4>{}</h4>", esc(title));
            o.push_str(&html::p(text));
        }
        Block::List {
            class,
            item_class,
            items,
        } => {
            o.push_str("<ul");
            if let Some(c) = class {
                let _ = write!(o, " class=\"{c}\"");
            }
            o.push('>');
            let li =
                item_class.map_or_else(|| "<li>".to_string(), |c| format!("<li class=\"{c}\">"));
            for i in items {
                let _ = write!(o, "{li}{}</li>", esc(i));
            }
            o.push_str("</ul>\n");
        }
        Block::Facts(facts) => {
            o.push_str("<ul class=\"facts\">");
            for (value, label) in facts {
                let _ = write!(o, "<li><b>{}</b>{}</li>", esc(value), esc(label));
            }
            o.push_str("</ul>\n");
        }
        Block::Table { table, row_class } => html_table(o, table, row_class),
        Block::Grid(g) => o.push_str(&g.html()),
        Block::Figures(figures) => {
            o.push_str("<div class=\"charts\">\n");
            for f in figures {
                o.push_str(&html::figure(&f.svg, &f.caption));
            }
            o.push_str("</div>\n");
        }
        Block::Figure(f) => o.push_str(&html::figure(&f.svg, &f.caption)),
        Block::FigureTable {
            figure,
            table,
            collapsed,
        } => {
            let _ = write!(
                o,
                "<div class=\"charts\">{}<div>",
                html::figure(&figure.svg, &figure.caption)
            );
            match collapsed {
                Some(s) => {
                    let _ = write!(o, "<details><summary>{}</summary>", esc(s));
                    html_table(o, table, &[]);
                    o.push_str("</details>");
                }
                None => html_table(o, table, &[]),
            }
            o.push_str("</div></div>\n");
        }
        Block::Note(blocks) => {
            o.push_str("<div class=\"note\">");
            o.push_str(&html(blocks));
            o.push_str("</div>\n");
        }
        Block::Notes(notes) => {
            o.push_str("<div class=\"note\">");
            for n in notes {
                o.push_str(&html::p(n));
            }
            o.push_str("</div>\n");
        }
        Block::Details {
            summary,
            open,
            blocks,
        } => {
            o.push_str(if *open { "<details open>" } else { "<details>" });
            let _ = write!(o, "<summary>{}</summary>", esc(summary));
            if *open {
                o.push('\n');
            }
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

/// Every line of `text` quoted ("> ", or ">" alone on an empty line).
fn quoted(text: &str) -> String {
    text.lines()
        .map(|l| {
            if l.is_empty() {
                ">\n".to_string()
            } else {
                format!("> {l}\n")
            }
        })
        .collect()
}

fn markdown_block(b: &Block) -> String {
    match b {
        Block::Paragraph(t) => format!("{}\n", md_text(t)),
        Block::Heading { level, text, .. } => {
            format!("{} {}\n", "#".repeat(usize::from(*level)), md_text(text))
        }
        Block::Title(t) => format!("**{}**\n", md_text(t)),
        Block::RunIn { title, text } => format!("**{}**: {}\n", md_text(title), md_text(text)),
        Block::List { items, .. } => items
            .iter()
            .map(|i| format!("- {}\n", md_text(i)))
            .collect(),
        Block::Table { table, .. } | Block::FigureTable { table, .. } => table.markdown(),
        Block::Grid(g) => g.markdown(),
        Block::Facts(_) | Block::Figures(_) | Block::Figure(_) => String::new(),
        Block::Note(blocks) => quoted(&markdown(blocks)),
        Block::Notes(notes) => notes
            .iter()
            .map(|n| quoted(&format!("**Note:** {}", md_text(n))))
            .collect::<Vec<_>>()
            .join("\n"),
        Block::Details { blocks, .. } => markdown(blocks),
        Block::Only(Format::Md, blocks) => markdown(blocks),
        Block::Only(_, _) => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small_table(title: &str) -> Table {
        Table {
            title: title.into(),
            headers: vec!["a".into(), "n".into()],
            numeric: vec![false, true],
            rows: vec![vec!["x".into(), "3".into()]],
        }
    }

    fn sample() -> Vec<Block> {
        vec![
            Block::p("Intro <1>."),
            Block::Heading {
                level: 3,
                text: "wall".into(),
                id: Some("table-wall".into()),
            },
            Block::Table {
                table: small_table(""),
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
            Block::md_only(vec![Block::p("md only")]),
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

    fn findings() -> Vec<Block> {
        vec![
            Block::Facts(vec![
                ("3".into(), "ok runs".into()),
                ("1 / 2".into(), "significant".into()),
            ]),
            Block::md_only(vec![Block::p("3 ok runs; 1 of 2 significant.")]),
            Block::Notes(vec!["One <failed>.".into(), "Few runs.".into()]),
            Block::Title("pi & copy".into()),
            Block::List {
                class: Some("findings"),
                item_class: Some("different"),
                items: vec!["A < B.".into(), "C.".into()],
            },
            Block::RunIn {
                title: "4 processes".into(),
                text: "pinned".into(),
            },
        ]
    }

    #[test]
    fn lists_facts_notes_and_titles_in_html() {
        assert_eq!(
            html(&findings()),
            "<ul class=\"facts\"><li><b>3</b>ok runs</li><li><b>1 / 2</b>significant</li></ul>\n\
             <div class=\"note\"><p>One &lt;failed&gt;.</p>\n<p>Few runs.</p>\n</div>\n\
             <h4>pi &amp; copy</h4>\n<ul class=\"findings\"><li class=\"different\">A &lt; B.</li>\
             <li class=\"different\">C.</li></ul>\n<h4>4 processes</h4>\n<p>pinned</p>\n"
        );
        let plain = Block::List {
            class: None,
            item_class: None,
            items: vec!["x".into()],
        };
        assert_eq!(html(&[plain]), "<ul><li>x</li></ul>\n");
    }

    #[test]
    fn lists_notes_and_titles_in_markdown_tiles_left_out() {
        assert_eq!(
            markdown(&findings()),
            "3 ok runs; 1 of 2 significant.\n\n> **Note:** One <failed>.\n\n> **Note:** Few runs.\n\n\
             **pi & copy**\n\n- A < B.\n- C.\n\n**4 processes**: pinned\n"
        );
    }

    #[test]
    fn an_open_part_starts_its_blocks_on_a_new_line() {
        let b = [Block::Details {
            summary: "g — 1 of 2".into(),
            open: true,
            blocks: vec![Block::p("t")],
        }];
        assert_eq!(
            html(&b),
            "<details open><summary>g — 1 of 2</summary>\n<p>t</p>\n</details>\n"
        );
        assert_eq!(markdown(&b), "t\n");
    }

    #[test]
    fn a_figure_with_its_table_beside_it() {
        let f = |collapsed: Option<&str>| Block::FigureTable {
            figure: Figure {
                svg: "<svg/>".into(),
                caption: "c".into(),
            },
            table: small_table(""),
            collapsed: collapsed.map(String::from),
        };
        let table = "<div class=\"scroll\"><table><thead><tr><th>a</th><th class=\"num\">n</th></tr></thead>\
                     <tbody><tr><td>x</td><td class=\"num\">3</td></tr></tbody></table></div>\n";
        let fig = "<div class=\"charts\"><figure><svg/><figcaption>c</figcaption></figure>\n<div>";
        assert_eq!(html(&[f(None)]), format!("{fig}{table}</div></div>\n"));
        assert_eq!(
            html(&[f(Some("Per process"))]),
            format!("{fig}<details><summary>Per process</summary>{table}</details></div></div>\n")
        );
        assert_eq!(
            markdown(&[f(Some("Per process"))]),
            small_table("").markdown()
        );
    }

    /// "n = 100" over two rows, "m = 2" over "t" and "rate", "avg" over
    /// two rows.
    fn grid() -> Grid {
        Grid {
            class: Some("matmul"),
            header: vec![
                vec![
                    HeaderCell::new("n = 100", false).span(1, 2),
                    HeaderCell::new("m = 2", true).span(2, 1),
                    HeaderCell::new("avg", true).span(1, 2),
                ],
                vec![HeaderCell::new("t", true), HeaderCell::new("rate", true)],
            ],
            numeric: vec![false, true, true, true],
            rows: vec![vec![
                Cell::new("OTHER"),
                Cell {
                    text: "1.5".into(),
                    tooltip: Some("mean \"1.5\"".into()),
                },
                Cell::new("–"),
                Cell::new("200"),
            ]],
        }
    }

    #[test]
    fn a_grid_spans_header_rows_and_columns_in_html() {
        assert_eq!(
            html(&[Block::Grid(grid())]),
            "<div class=\"scroll\"><table class=\"matmul\"><thead><tr><th rowspan=\"2\">n = 100</th>\
             <th colspan=\"2\" class=\"num\">m = 2</th><th rowspan=\"2\" class=\"num\">avg</th></tr><tr>\
             <th class=\"num\">t</th><th class=\"num\">rate</th></tr></thead><tbody><tr><td>OTHER</td>\
             <td class=\"num\" title=\"mean &quot;1.5&quot;\">1.5</td><td class=\"num\">–</td>\
             <td class=\"num\">200</td></tr></tbody></table></div>\n"
        );
    }

    #[test]
    fn a_grid_joins_its_header_rows_in_markdown() {
        assert_eq!(
            grid().column_headers(),
            vec![
                vec!["n = 100"],
                vec!["m = 2", "t"],
                vec!["m = 2", "rate"],
                vec!["avg"]
            ]
        );
        assert_eq!(
            markdown(&[Block::Grid(grid())]),
            "| n = 100 | m = 2: t | m = 2: rate | avg |\n| ------- | -------: | ----------: | --: |\n\
             | OTHER   |      1.5 |           – | 200 |\n"
        );
    }
}
