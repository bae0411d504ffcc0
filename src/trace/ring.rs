//! Decoding the kernel's ring-buffer pages (`per_cpu/cpuN/trace_pipe_raw`)
//! into [`Event`]s, driven by the formats the kernel publishes
//! ([`super::format`]). Pure: bytes in, events out.
//!
//! A page is a timestamp, a commit word (bytes of records; bit 31 set when
//! events were lost before this page, bit 30 when their count is stored
//! right after the records) and the records. Each record starts with a
//! 32-bit word: a 5-bit `type_len` and a 27-bit time delta. `type_len` 1..=28
//! is a data record of `type_len × 4` bytes; 0 a data record whose length
//! (plus 4) is in the next word; then padding (skipped, no time), a time
//! extend (a delta too large for 27 bits) and an absolute time stamp
//! (kernel/trace/ring_buffer.c, `rb_update_read_stamp`, `rb_fix_abs_ts`).
//! No crate on crates.io reads this format (checked: `tracepoint_decode`
//! parses format files but leaves buffers to the caller), so it is here,
//! small, and tested on pages recorded on a real kernel
//! (`tests/fixtures/trace`).

use std::collections::HashMap;

use anyhow::{Context, Result, bail};

use super::event::{Event, EventKind};
use super::format::{EventFormat, Field, PageLayout, RecordHeader};

const MISSED_EVENTS: u32 = 1 << 31;
const MISSED_STORED: u32 = 1 << 30;
/// The top bits of a timestamp that an absolute time-stamp record omits.
const TS_MSB: u64 = 0xf8 << 56;

/// The fields of one tracepoint the decoder reads.
#[derive(Debug, Clone, Copy)]
enum Layout {
    Switch {
        prev_comm: Field,
        prev_pid: Field,
        prev_prio: Field,
        prev_state: Field,
        next_comm: Field,
        next_pid: Field,
        next_prio: Field,
    },
    Wake {
        comm: Field,
        pid: Field,
        prio: Field,
        target_cpu: Field,
        /// 0 waking, 1 wakeup, 2 wakeup_new.
        which: u8,
    },
    Migrate {
        pid: Field,
        prio: Field,
        orig_cpu: Field,
        dest_cpu: Field,
    },
    Exit {
        comm: Field,
        pid: Field,
        prio: Field,
    },
    /// Its names are `__data_loc` strings on current kernels: not read (a
    /// child that runs is named by its switches).
    Fork { parent_pid: Field, child_pid: Field },
}

/// What one page held besides its events.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PageStats {
    /// Data records decoded (of the tracepoints known to the decoder).
    pub events: usize,
    /// Events the kernel lost before this page: the stored count, or 1
    /// when the page says only that some were lost.
    pub lost: u64,
}

/// Decodes pages of one tracefs instance.
#[derive(Debug, Clone)]
pub struct Decoder {
    page: PageLayout,
    header: RecordHeader,
    common_type: Field,
    common_pid: Field,
    layouts: HashMap<u16, Layout>,
}

fn read_uint(rec: &[u8], f: Field) -> Result<u64> {
    let bytes = rec
        .get(f.offset..f.offset + f.size)
        .with_context(|| format!("a record of {} bytes has no field at {f:?}", rec.len()))?;
    let mut buf = [0u8; 8];
    match f.size {
        1 | 2 | 4 | 8 => buf[..f.size].copy_from_slice(bytes),
        n => bail!("a numeric field of {n} bytes"),
    }
    let raw = u64::from_le_bytes(buf);
    if f.signed && f.size < 8 {
        let shift = 64 - 8 * f.size as u32;
        Ok((((raw << shift) as i64) >> shift) as u64)
    } else {
        Ok(raw)
    }
}

fn read_i32(rec: &[u8], f: Field) -> Result<i32> {
    Ok(read_uint(rec, f)? as i64 as i32)
}

/// A fixed `char[N]` field up to its first NUL.
fn read_comm(rec: &[u8], f: Field) -> Option<String> {
    let bytes = rec.get(f.offset..f.offset + f.size)?;
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    Some(String::from_utf8_lossy(&bytes[..end]).into_owned())
}

fn u32_at(page: &[u8], at: usize) -> Option<u32> {
    page.get(at..at + 4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

impl Decoder {
    /// A decoder from the instance's page and record headers and the
    /// formats of the tracepoints it records (any of sched_switch,
    /// sched_waking, sched_wakeup, sched_wakeup_new, sched_migrate_task,
    /// sched_process_exit, sched_process_fork; records of others are
    /// skipped).
    pub fn new(page: PageLayout, header: RecordHeader, formats: &[EventFormat]) -> Result<Decoder> {
        let Some(first) = formats.first() else {
            bail!("no tracepoint formats to decode with");
        };
        let common_type = first.field("common_type")?;
        let common_pid = first.field("common_pid")?;
        let mut layouts = HashMap::new();
        for f in formats {
            let wake = |which| -> Result<Layout> {
                Ok(Layout::Wake {
                    comm: f.field("comm")?,
                    pid: f.field("pid")?,
                    prio: f.field("prio")?,
                    target_cpu: f.field("target_cpu")?,
                    which,
                })
            };
            let layout = match f.name.as_str() {
                "sched_switch" => Layout::Switch {
                    prev_comm: f.field("prev_comm")?,
                    prev_pid: f.field("prev_pid")?,
                    prev_prio: f.field("prev_prio")?,
                    prev_state: f.field("prev_state")?,
                    next_comm: f.field("next_comm")?,
                    next_pid: f.field("next_pid")?,
                    next_prio: f.field("next_prio")?,
                },
                "sched_waking" => wake(0)?,
                "sched_wakeup" => wake(1)?,
                "sched_wakeup_new" => wake(2)?,
                "sched_migrate_task" => Layout::Migrate {
                    pid: f.field("pid")?,
                    prio: f.field("prio")?,
                    orig_cpu: f.field("orig_cpu")?,
                    dest_cpu: f.field("dest_cpu")?,
                },
                "sched_process_exit" => Layout::Exit {
                    comm: f.field("comm")?,
                    pid: f.field("pid")?,
                    prio: f.field("prio")?,
                },
                "sched_process_fork" => Layout::Fork {
                    parent_pid: f.field("parent_pid")?,
                    child_pid: f.field("child_pid")?,
                },
                other => bail!("schedlab does not decode tracepoint {other}"),
            };
            if f.field("common_type")? != common_type || f.field("common_pid")? != common_pid {
                bail!(
                    "tracepoint {} has other common fields than {}",
                    f.name,
                    first.name
                );
            }
            layouts.insert(f.id, layout);
        }
        Ok(Decoder {
            page,
            header,
            common_type,
            common_pid,
            layouts,
        })
    }

    /// Bytes per page.
    pub fn page_bytes(&self) -> usize {
        self.page.page_bytes()
    }

    /// Decodes one page read from CPU `cpu`'s buffer: its events are
    /// appended to `out` in the buffer's order, and the names the records
    /// carry (switch, wake and exit records name their tasks) are put in
    /// `names` for pids not named yet.
    pub fn decode_page(
        &self,
        cpu: u32,
        page: &[u8],
        out: &mut Vec<Event>,
        names: &mut HashMap<i32, String>,
    ) -> Result<PageStats> {
        let data_start = self.page.data.offset;
        let mut ts = read_uint(page, self.page.timestamp).context("the page's timestamp")?;
        let commit = read_uint(page, self.page.commit).context("the page's commit word")? as u32;
        let size = (commit & !(MISSED_EVENTS | MISSED_STORED)) as usize;
        if size > self.page.data.size || data_start + size > page.len() {
            bail!(
                "a page of {} bytes claims {size} bytes of records (room for {})",
                page.len(),
                self.page.data.size
            );
        }
        let mut stats = PageStats::default();
        if commit & MISSED_EVENTS != 0 {
            let stored = (commit & MISSED_STORED != 0)
                .then(|| page.get(data_start + size..data_start + size + 8))
                .flatten()
                .map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])));
            stats.lost = stored.filter(|&n| n > 0).unwrap_or(1);
        }
        let end = data_start + size;
        let mut pos = data_start;
        while pos + 4 <= end {
            let word = u32_at(page, pos).context("a record header")?;
            let type_len = word & 0x1f;
            let delta = u64::from(word >> 5);
            let array0 = u32_at(page, pos + 4);
            if type_len == self.header.padding {
                // A null record (delta 0) ends the page's data; other
                // padding is a discarded record of `array[0]` bytes.
                match array0 {
                    Some(len) if delta != 0 => pos += 4 + len as usize,
                    _ => break,
                }
                continue;
            }
            if type_len == self.header.time_extend {
                let high = u64::from(array0.context("a truncated time extend")?);
                ts += (high << 27) | delta;
                pos += 8;
                continue;
            }
            if type_len == self.header.time_stamp {
                let high = u64::from(array0.context("a truncated time stamp")?);
                let mut abs = (high << 27) | delta;
                if ts & TS_MSB != 0 {
                    abs |= ts & TS_MSB;
                    if abs < ts {
                        abs += 1 << 59;
                    }
                }
                ts = abs;
                pos += 8;
                continue;
            }
            let (payload, next) = if type_len == 0 {
                let len = array0.context("a truncated record length")? as usize;
                if len < 4 {
                    bail!("a record of length {len} at byte {pos}");
                }
                (pos + 8..pos + 4 + len, pos + 4 + ((len + 3) & !3))
            } else if type_len <= self.header.data_max_type_len {
                let len = 4 * type_len as usize;
                (pos + 4..pos + 4 + len, pos + 4 + len)
            } else {
                bail!("a record of unknown type {type_len} at byte {pos}");
            };
            ts += delta;
            let rec = page
                .get(payload)
                .with_context(|| format!("a record at byte {pos} runs past the page"))?;
            if let Some(e) = self.decode_record(cpu, ts, rec, names)? {
                out.push(e);
                stats.events += 1;
            }
            pos = next;
        }
        Ok(stats)
    }

    fn decode_record(
        &self,
        cpu: u32,
        ts_ns: u64,
        rec: &[u8],
        names: &mut HashMap<i32, String>,
    ) -> Result<Option<Event>> {
        let ty = read_uint(rec, self.common_type)? as u16;
        let Some(layout) = self.layouts.get(&ty) else {
            return Ok(None);
        };
        let mut name = |pid: i32, f: Field| {
            if pid > 0
                && !names.contains_key(&pid)
                && let Some(c) = read_comm(rec, f)
            {
                names.insert(pid, c);
            }
        };
        let kind = match *layout {
            Layout::Switch {
                prev_comm,
                prev_pid,
                prev_prio,
                prev_state,
                next_comm,
                next_pid,
                next_prio,
            } => {
                let (prev, next) = (read_i32(rec, prev_pid)?, read_i32(rec, next_pid)?);
                name(prev, prev_comm);
                name(next, next_comm);
                EventKind::Switch {
                    prev_pid: prev,
                    prev_prio: read_i32(rec, prev_prio)?,
                    prev_state: read_uint(rec, prev_state)?,
                    next_pid: next,
                    next_prio: read_i32(rec, next_prio)?,
                }
            }
            Layout::Wake {
                comm,
                pid,
                prio,
                target_cpu,
                which,
            } => {
                let pid = read_i32(rec, pid)?;
                name(pid, comm);
                let (prio, target_cpu) = (read_i32(rec, prio)?, read_i32(rec, target_cpu)? as u32);
                match which {
                    0 => EventKind::Waking {
                        pid,
                        prio,
                        target_cpu,
                    },
                    w => EventKind::Wakeup {
                        pid,
                        prio,
                        target_cpu,
                        new: w == 2,
                    },
                }
            }
            Layout::Migrate {
                pid,
                prio,
                orig_cpu,
                dest_cpu,
            } => EventKind::Migrate {
                pid: read_i32(rec, pid)?,
                prio: read_i32(rec, prio)?,
                orig_cpu: read_i32(rec, orig_cpu)? as u32,
                dest_cpu: read_i32(rec, dest_cpu)? as u32,
            },
            Layout::Exit { comm, pid, prio } => {
                let pid = read_i32(rec, pid)?;
                name(pid, comm);
                EventKind::Exit {
                    pid,
                    prio: read_i32(rec, prio)?,
                }
            }
            Layout::Fork {
                parent_pid,
                child_pid,
            } => EventKind::Fork {
                parent_pid: read_i32(rec, parent_pid)?,
                child_pid: read_i32(rec, child_pid)?,
            },
        };
        Ok(Some(Event {
            ts_ns,
            cpu,
            common_pid: read_i32(rec, self.common_pid)?,
            kind,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::format::{parse_event_format, parse_header_event, parse_header_page};

    const FIX: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/trace");
    const EVENTS: [&str; 6] = [
        "sched_switch",
        "sched_waking",
        "sched_wakeup",
        "sched_wakeup_new",
        "sched_migrate_task",
        "sched_process_exit",
    ];

    fn text(name: &str) -> String {
        std::fs::read_to_string(format!("{FIX}/{name}")).unwrap()
    }

    fn decoder() -> Decoder {
        let formats: Vec<EventFormat> = EVENTS
            .iter()
            .map(|e| parse_event_format(&text(&format!("{e}.format"))).unwrap())
            .collect();
        Decoder::new(
            parse_header_page(&text("header_page")).unwrap(),
            parse_header_event(&text("header_event")).unwrap(),
            &formats,
        )
        .unwrap()
    }

    fn decode_file(d: &Decoder, name: &str, cpu: u32) -> (Vec<Event>, u64, HashMap<i32, String>) {
        let raw = std::fs::read(format!("{FIX}/{name}")).unwrap();
        assert_eq!(raw.len() % d.page_bytes(), 0);
        let (mut events, mut names, mut lost) = (Vec::new(), HashMap::new(), 0);
        for page in raw.chunks(d.page_bytes()) {
            let s = d.decode_page(cpu, page, &mut events, &mut names).unwrap();
            lost += s.lost;
        }
        (events, lost, names)
    }

    /// One line of the kernel's own text rendering (`trace`) of the same
    /// buffer: (cpu, µs timestamp, common_pid, event name, the fields).
    type TextLine = (u32, u64, i32, String, HashMap<String, String>);

    fn text_lines() -> Vec<TextLine> {
        text("trace.txt")
            .lines()
            .map(|l| {
                let open = l.find("] ").unwrap();
                let cpu: u32 = l[l.find('[').unwrap() + 1..open].parse().unwrap();
                let task = l[..l.find('[').unwrap()].trim();
                let pid: i32 = task.rsplit('-').next().unwrap().parse().unwrap();
                let rest = &l[open + 2..];
                let mut parts = rest.splitn(3, ": ");
                let ts = parts.next().unwrap().split_whitespace().last().unwrap();
                let (s, us) = ts.split_once('.').unwrap();
                let ts_us = s.parse::<u64>().unwrap() * 1_000_000 + us.parse::<u64>().unwrap();
                let name = parts.next().unwrap().to_string();
                let fields = parts
                    .next()
                    .unwrap()
                    .split_whitespace()
                    .filter_map(|kv| kv.split_once('='))
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect();
                (cpu, ts_us, pid, name, fields)
            })
            .collect()
    }

    /// The pages recorded on this machine decode to exactly what the
    /// kernel itself printed for the same buffer: same events, CPUs,
    /// microsecond timestamps, pids and states, in the same order.
    #[test]
    fn recorded_pages_match_the_kernels_own_text() {
        let d = decoder();
        let lines = text_lines();
        let mut total = 0;
        for cpu in [0u32, 1] {
            let (events, lost, names) = decode_file(&d, &format!("cpu{cpu}.raw"), cpu);
            assert_eq!(lost, 0);
            let want: Vec<_> = lines.iter().filter(|l| l.0 == cpu).collect();
            assert_eq!(events.len(), want.len(), "cpu {cpu}");
            assert!(events.windows(2).all(|w| w[0].ts_ns <= w[1].ts_ns));
            for (e, (_, ts_us, pid, name, f)) in events.iter().zip(&want) {
                // The text rounds to the nearest microsecond.
                assert_eq!((e.ts_ns + 500) / 1000, *ts_us, "{e:?} vs {name} {f:?}");
                assert_eq!(e.common_pid, *pid, "{e:?}");
                let n = |k: &str| f[k].parse::<i64>().unwrap();
                match &e.kind {
                    EventKind::Switch {
                        prev_pid,
                        prev_prio,
                        prev_state,
                        next_pid,
                        next_prio,
                    } => {
                        assert_eq!(name, "sched_switch");
                        assert_eq!(i64::from(*prev_pid), n("prev_pid"));
                        assert_eq!(i64::from(*next_pid), n("next_pid"));
                        assert_eq!(i64::from(*prev_prio), n("prev_prio"));
                        assert_eq!(i64::from(*next_prio), n("next_prio"));
                        let letter = match *prev_state {
                            0 => "R",
                            0x100 => "R+",
                            0x1 => "S",
                            0x2 => "D",
                            0x80 => "I",
                            0x10 => "X",
                            0x20 => "Z",
                            other => panic!("state {other:#x}"),
                        };
                        assert_eq!(f["prev_state"], letter);
                        assert!(names.contains_key(prev_pid) || *prev_pid == 0);
                    }
                    EventKind::Waking {
                        pid,
                        prio,
                        target_cpu,
                    } => {
                        assert_eq!(name, "sched_waking");
                        assert_eq!(
                            (i64::from(*pid), i64::from(*prio), i64::from(*target_cpu)),
                            (n("pid"), n("prio"), n("target_cpu"))
                        );
                    }
                    EventKind::Wakeup {
                        pid,
                        prio,
                        target_cpu,
                        new,
                    } => {
                        let want = if *new {
                            "sched_wakeup_new"
                        } else {
                            "sched_wakeup"
                        };
                        assert_eq!(name, want);
                        assert_eq!(
                            (i64::from(*pid), i64::from(*prio), i64::from(*target_cpu)),
                            (n("pid"), n("prio"), n("target_cpu"))
                        );
                    }
                    EventKind::Migrate {
                        pid,
                        orig_cpu,
                        dest_cpu,
                        ..
                    } => {
                        assert_eq!(name, "sched_migrate_task");
                        assert_eq!(
                            (i64::from(*pid), i64::from(*orig_cpu), i64::from(*dest_cpu)),
                            (n("pid"), n("orig_cpu"), n("dest_cpu"))
                        );
                    }
                    EventKind::Exit { pid, .. } => {
                        assert_eq!(name, "sched_process_exit");
                        assert_eq!(i64::from(*pid), n("pid"));
                    }
                    EventKind::Fork {
                        parent_pid,
                        child_pid,
                    } => {
                        assert_eq!(name, "sched_process_fork");
                        assert_eq!(
                            (i64::from(*parent_pid), i64::from(*child_pid)),
                            (n("parent_pid"), n("child_pid"))
                        );
                    }
                }
            }
            if cpu == 0 {
                // The first name seen of the traced shell.
                assert_eq!(names[&21922], "bash");
            }
            total += events.len();
        }
        assert_eq!(total, lines.len());
        // Every kind of record is in the fixture.
        for e in EVENTS {
            assert!(lines.iter().any(|l| l.3 == e), "no {e} in the fixture");
        }
    }

    /// A buffer that overflowed (4 KiB, overwrite mode): the first page
    /// read carries the lost-events flag with the count stored, equal to
    /// the `overrun` the kernel's per-CPU stats showed (9535).
    #[test]
    fn lost_events_are_read_from_the_page() {
        let d = decoder();
        let (events, lost, _) = decode_file(&d, "lost-cpu0.raw", 0);
        assert_eq!(lost, 9535);
        assert!(!events.is_empty());
        assert!(events.windows(2).all(|w| w[0].ts_ns <= w[1].ts_ns));
    }

    /// Hand-made pages for the records a short recording rarely holds:
    /// time extends, absolute stamps, long records, padding, and a page
    /// flagged as lost without a count.
    #[test]
    fn special_records() {
        let d = decoder();
        let mut page = vec![0u8; 4096];
        page[0..8].copy_from_slice(&1_000u64.to_le_bytes());
        let mut at = 16;
        let mut put = |page: &mut Vec<u8>, w: u32| {
            page[at..at + 4].copy_from_slice(&w.to_le_bytes());
            at += 4;
        };
        // Time extend of (2 << 27) + 5 ns.
        put(&mut page, (5 << 5) | 30);
        put(&mut page, 2);
        // An exit record (36 bytes → type_len 9), delta 7.
        let mut exit = [0u8; 36];
        exit[0..2].copy_from_slice(&369u16.to_le_bytes());
        exit[4..8].copy_from_slice(&42i32.to_le_bytes());
        exit[8..12].copy_from_slice(b"wkr\0");
        exit[24..28].copy_from_slice(&42i32.to_le_bytes());
        exit[28..32].copy_from_slice(&120i32.to_le_bytes());
        put(&mut page, (7 << 5) | 9);
        for c in exit.chunks(4) {
            put(&mut page, u32::from_le_bytes(c.try_into().unwrap()));
        }
        // Padding of 16 bytes (a discarded record; array[0] is its length
        // less the header word): no time.
        put(&mut page, (3 << 5) | 29);
        put(&mut page, 12);
        put(&mut page, 0);
        put(&mut page, 0);
        // An absolute stamp, then the same exit as a long record (type 0).
        put(&mut page, (9 << 5) | 31);
        put(&mut page, 0);
        put(&mut page, 0);
        put(&mut page, 36 + 4);
        for c in exit.chunks(4) {
            put(&mut page, u32::from_le_bytes(c.try_into().unwrap()));
        }
        // An unknown tracepoint (type_len 1): skipped.
        put(&mut page, 1);
        put(&mut page, 999);
        let used = at - 16;
        page[8..16].copy_from_slice(&(used as u64 | u64::from(MISSED_EVENTS)).to_le_bytes());
        let (mut out, mut names) = (Vec::new(), HashMap::new());
        let s = d.decode_page(1, &page, &mut out, &mut names).unwrap();
        assert_eq!(s, PageStats { events: 2, lost: 1 });
        assert_eq!(out[0].ts_ns, 1_000 + (2 << 27) + 5 + 7);
        assert_eq!(out[0].kind, EventKind::Exit { pid: 42, prio: 120 });
        assert_eq!((out[0].cpu, out[0].common_pid), (1, 42));
        assert_eq!(out[1].ts_ns, 9);
        assert_eq!(names[&42], "wkr");
        // A commit larger than the page is refused.
        page[8..16].copy_from_slice(&5000u64.to_le_bytes());
        assert!(d.decode_page(0, &page, &mut out, &mut names).is_err());
    }
}
