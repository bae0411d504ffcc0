//! The kernel's own descriptions of its binary trace records, parsed: the
//! ring-buffer page header (`events/header_page`), the record header
//! (`events/header_event`) and each tracepoint's fields
//! (`events/<system>/<event>/format`). Pure: text in, layouts out; the
//! decoder (`ring`) reads pages with nothing but these.

use std::collections::HashMap;

use anyhow::{Context, Result, bail};

/// Where one field lies in a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    pub offset: usize,
    pub size: usize,
    pub signed: bool,
}

/// One tracepoint's format: its numeric id (the record's `common_type`)
/// and its fields by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventFormat {
    pub name: String,
    pub id: u16,
    pub fields: HashMap<String, Field>,
}

impl EventFormat {
    /// The field `name`, or an error naming the event.
    pub fn field(&self, name: &str) -> Result<Field> {
        self.fields
            .get(name)
            .copied()
            .with_context(|| format!("tracepoint {} has no field {name}", self.name))
    }
}

/// The lines `field:TYPE NAME; offset:N; size:N; signed:N;`, keyed by NAME
/// (an array's `[N]` and a `__data_loc` prefix dropped).
fn parse_fields(text: &str) -> Result<HashMap<String, Field>> {
    let mut fields = HashMap::new();
    for line in text.lines() {
        let line = line.trim();
        let Some(rest) = line.strip_prefix("field:") else {
            continue;
        };
        let mut decl = None;
        let (mut offset, mut size, mut signed) = (None, None, false);
        for part in rest.split(';').map(str::trim).filter(|p| !p.is_empty()) {
            if let Some(v) = part.strip_prefix("offset:") {
                offset = Some(
                    v.trim()
                        .parse::<usize>()
                        .with_context(|| format!("{line:?}"))?,
                );
            } else if let Some(v) = part.strip_prefix("size:") {
                size = Some(
                    v.trim()
                        .parse::<usize>()
                        .with_context(|| format!("{line:?}"))?,
                );
            } else if let Some(v) = part.strip_prefix("signed:") {
                signed = v.trim() == "1";
            } else if decl.is_none() {
                decl = Some(part);
            }
        }
        let (Some(decl), Some(offset), Some(size)) = (decl, offset, size) else {
            bail!("unreadable format line {line:?}");
        };
        let name = decl
            .split_whitespace()
            .last()
            .unwrap_or_default()
            .split('[')
            .next()
            .unwrap_or_default();
        if name.is_empty() {
            bail!("format line without a field name: {line:?}");
        }
        fields.insert(
            name.to_string(),
            Field {
                offset,
                size,
                signed,
            },
        );
    }
    Ok(fields)
}

/// Parses `events/<system>/<event>/format`.
pub fn parse_event_format(text: &str) -> Result<EventFormat> {
    let mut name = None;
    let mut id = None;
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("name:") {
            name = Some(v.trim().to_string());
        } else if let Some(v) = line.strip_prefix("ID:") {
            id = Some(
                v.trim()
                    .parse::<u16>()
                    .with_context(|| format!("event ID {:?}", v.trim()))?,
            );
        }
    }
    let (Some(name), Some(id)) = (name, id) else {
        bail!("an event format without name or ID");
    };
    let fields = parse_fields(text).with_context(|| format!("the format of {name}"))?;
    Ok(EventFormat { name, id, fields })
}

/// The layout of a ring-buffer page (`events/header_page`): a timestamp,
/// the commit word (bytes of data, and the lost-events flags in its high
/// bits), then the records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageLayout {
    pub timestamp: Field,
    pub commit: Field,
    pub data: Field,
}

impl PageLayout {
    /// Bytes per page, as `trace_pipe_raw` hands them out.
    pub fn page_bytes(&self) -> usize {
        self.data.offset + self.data.size
    }
}

/// Parses `events/header_page`.
pub fn parse_header_page(text: &str) -> Result<PageLayout> {
    let fields = parse_fields(text).context("events/header_page")?;
    let get = |n: &str| {
        fields
            .get(n)
            .copied()
            .with_context(|| format!("events/header_page has no field {n}"))
    };
    let layout = PageLayout {
        timestamp: get("timestamp")?,
        commit: get("commit")?,
        data: get("data")?,
    };
    if layout.timestamp.size != 8 || !matches!(layout.commit.size, 4 | 8) {
        bail!("events/header_page: unexpected sizes {layout:?}");
    }
    Ok(layout)
}

/// The record-header encoding (`events/header_event`), checked to be the
/// one the decoder implements: a 32-bit word of a 5-bit `type_len` and a
/// 27-bit `time_delta`, an `array` word, and the three special types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordHeader {
    pub padding: u32,
    pub time_extend: u32,
    pub time_stamp: u32,
    pub data_max_type_len: u32,
}

pub fn parse_header_event(text: &str) -> Result<RecordHeader> {
    let bits = |name: &str| -> Option<u32> {
        text.lines()
            .map(str::trim)
            .find(|l| l.starts_with(name) && l.ends_with("bits"))
            .and_then(|l| l.split(':').nth(1))
            .and_then(|v| v.trim().trim_end_matches("bits").trim().parse().ok())
    };
    let ty = |name: &str| -> Option<u32> {
        text.lines()
            .map(str::trim)
            .find(|l| l.starts_with(name))
            .and_then(|l| l.rsplit("==").next())
            .and_then(|v| v.trim().parse().ok())
    };
    if bits("type_len") != Some(5) || bits("time_delta") != Some(27) || bits("array") != Some(32) {
        bail!(
            "events/header_event describes a record header other than the 5-bit type_len / \
             27-bit time_delta this schedlab reads: {text:?}"
        );
    }
    match (
        ty("padding"),
        ty("time_extend"),
        ty("time_stamp"),
        ty("data max type_len"),
    ) {
        (Some(padding), Some(time_extend), Some(time_stamp), Some(data_max_type_len)) => {
            Ok(RecordHeader {
                padding,
                time_extend,
                time_stamp,
                data_max_type_len,
            })
        }
        _ => bail!("events/header_event lacks the special record types: {text:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIX: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/trace");

    fn fixture(name: &str) -> String {
        std::fs::read_to_string(format!("{FIX}/{name}")).unwrap()
    }

    #[test]
    fn header_page_of_this_kernel() {
        let p = parse_header_page(&fixture("header_page")).unwrap();
        assert_eq!(p.timestamp.offset, 0);
        assert_eq!((p.commit.offset, p.commit.size), (8, 8));
        assert_eq!((p.data.offset, p.data.size), (16, 4080));
        assert_eq!(p.page_bytes(), 4096);
        assert!(parse_header_page("field: u64 timestamp;\toffset:0;\tsize:8;").is_err());
    }

    #[test]
    fn header_event_of_this_kernel() {
        let h = parse_header_event(&fixture("header_event")).unwrap();
        assert_eq!(
            h,
            RecordHeader {
                padding: 29,
                time_extend: 30,
                time_stamp: 31,
                data_max_type_len: 28
            }
        );
        let other = fixture("header_event").replace("5 bits", "6 bits");
        assert!(parse_header_event(&other).is_err());
    }

    #[test]
    fn sched_formats_of_this_kernel() {
        let s = parse_event_format(&fixture("sched_switch.format")).unwrap();
        assert_eq!(s.name, "sched_switch");
        assert_eq!(s.id, 372);
        assert_eq!(
            s.field("prev_state").unwrap(),
            Field {
                offset: 32,
                size: 8,
                signed: true
            }
        );
        assert_eq!(s.field("next_pid").unwrap().offset, 56);
        assert_eq!(s.field("prev_comm").unwrap().size, 16);
        assert_eq!(s.field("common_type").unwrap().size, 2);
        // __data_loc fields are named without the prefix.
        let m = parse_event_format(&fixture("sched_migrate_task.format")).unwrap();
        assert_eq!(m.field("comm").unwrap().size, 4);
        assert_eq!(m.field("dest_cpu").unwrap().offset, 24);
        assert!(
            m.field("nope")
                .unwrap_err()
                .to_string()
                .contains("sched_migrate_task")
        );
        assert!(parse_event_format("format:\n\tfield:int x;\toffset:0;\tsize:4;\n").is_err());
        assert!(
            parse_event_format("name: x\nID: 1\n\tfield:int x;\toffset:z;\tsize:4;\n").is_err()
        );
    }
}
