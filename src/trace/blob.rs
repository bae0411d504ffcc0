//! The compact binary form of a capture's events, as the store keeps them so
//! that exporters can re-emit exactly what the kernel recorded: the events
//! as a postcard sequence (varint fields, timestamps as zigzag deltas from
//! the previous event), about 12 bytes a switch (a text trace line takes
//! over 100), in the LZ4 envelope of [`super::packed`] (about 2.5 bytes).

use anyhow::Result;
use serde::{Deserialize, Serialize};

use super::event::{Event, EventKind};

#[derive(Serialize, Deserialize)]
enum Kind {
    Switch {
        prev_pid: i32,
        prev_prio: i32,
        prev_state: u64,
        next_pid: i32,
        next_prio: i32,
    },
    Waking {
        pid: i32,
        prio: i32,
        target_cpu: u32,
    },
    Wakeup {
        pid: i32,
        prio: i32,
        target_cpu: u32,
        new: bool,
    },
    Migrate {
        pid: i32,
        prio: i32,
        orig_cpu: u32,
        dest_cpu: u32,
    },
    Exit {
        pid: i32,
        prio: i32,
    },
    // Last: postcard numbers variants in order, so blobs written before
    // forks were recorded still decode.
    Fork {
        parent_pid: i32,
        child_pid: i32,
    },
}

#[derive(Serialize, Deserialize)]
struct Raw {
    /// ts_ns minus the previous event's (the first: minus 0).
    dts_ns: i64,
    cpu: u32,
    common_pid: i32,
    kind: Kind,
}

fn to_raw(k: &EventKind) -> Kind {
    match *k {
        EventKind::Switch {
            prev_pid,
            prev_prio,
            prev_state,
            next_pid,
            next_prio,
        } => Kind::Switch {
            prev_pid,
            prev_prio,
            prev_state,
            next_pid,
            next_prio,
        },
        EventKind::Waking {
            pid,
            prio,
            target_cpu,
        } => Kind::Waking {
            pid,
            prio,
            target_cpu,
        },
        EventKind::Wakeup {
            pid,
            prio,
            target_cpu,
            new,
        } => Kind::Wakeup {
            pid,
            prio,
            target_cpu,
            new,
        },
        EventKind::Migrate {
            pid,
            prio,
            orig_cpu,
            dest_cpu,
        } => Kind::Migrate {
            pid,
            prio,
            orig_cpu,
            dest_cpu,
        },
        EventKind::Exit { pid, prio } => Kind::Exit { pid, prio },
        EventKind::Fork {
            parent_pid,
            child_pid,
        } => Kind::Fork {
            parent_pid,
            child_pid,
        },
    }
}

fn from_raw(k: Kind) -> EventKind {
    match k {
        Kind::Switch {
            prev_pid,
            prev_prio,
            prev_state,
            next_pid,
            next_prio,
        } => EventKind::Switch {
            prev_pid,
            prev_prio,
            prev_state,
            next_pid,
            next_prio,
        },
        Kind::Waking {
            pid,
            prio,
            target_cpu,
        } => EventKind::Waking {
            pid,
            prio,
            target_cpu,
        },
        Kind::Wakeup {
            pid,
            prio,
            target_cpu,
            new,
        } => EventKind::Wakeup {
            pid,
            prio,
            target_cpu,
            new,
        },
        Kind::Migrate {
            pid,
            prio,
            orig_cpu,
            dest_cpu,
        } => EventKind::Migrate {
            pid,
            prio,
            orig_cpu,
            dest_cpu,
        },
        Kind::Exit { pid, prio } => EventKind::Exit { pid, prio },
        Kind::Fork {
            parent_pid,
            child_pid,
        } => EventKind::Fork {
            parent_pid,
            child_pid,
        },
    }
}

/// The events as a blob.
pub fn encode(events: &[Event]) -> Vec<u8> {
    let mut prev = 0u64;
    let raw: Vec<Raw> = events
        .iter()
        .map(|e| {
            let dts_ns = e.ts_ns.wrapping_sub(prev) as i64;
            prev = e.ts_ns;
            Raw {
                dts_ns,
                cpu: e.cpu,
                common_pid: e.common_pid,
                kind: to_raw(&e.kind),
            }
        })
        .collect();
    // An event takes about 12 bytes, at most ~30.
    super::packed::encode(&raw, 16 * events.len())
}

/// The events [`encode`] wrote.
pub fn decode(blob: &[u8]) -> Result<Vec<Event>> {
    let raw: Vec<Raw> = super::packed::decode(blob, "trace event blob")?;
    let mut ts = 0u64;
    Ok(raw
        .into_iter()
        .map(|r| {
            ts = ts.wrapping_add(r.dts_ns as u64);
            Event {
                ts_ns: ts,
                cpu: r.cpu,
                common_pid: r.common_pid,
                kind: from_raw(r.kind),
            }
        })
        .collect())
}

/// The events [`encode`] wrote, one at a time, without decoding them all
/// into memory: `f` sees each in order. The number of events.
pub fn for_each(blob: &[u8], mut f: impl FnMut(Event) -> Result<()>) -> Result<u64> {
    let body = super::packed::unpack(blob, "trace event blob")?;
    let corrupt = |e: postcard::Error| anyhow::anyhow!("corrupt trace event blob: {e}");
    let (n, mut rest) = postcard::take_from_bytes::<usize>(&body).map_err(corrupt)?;
    let mut ts = 0u64;
    for _ in 0..n {
        let (r, more) = postcard::take_from_bytes::<Raw>(rest).map_err(corrupt)?;
        rest = more;
        ts = ts.wrapping_add(r.dts_ns as u64);
        f(Event {
            ts_ns: ts,
            cpu: r.cpu,
            common_pid: r.common_pid,
            kind: from_raw(r.kind),
        })?;
    }
    Ok(n as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::derive::tests::*;

    fn every_kind() -> Vec<Event> {
        vec![
            sw(1_000_000_000_123, 0, 0, 0, 10),
            waking(1_000_000_000_200, 1, 11, 12, 0),
            wakeup(1_000_000_000_201, 1, 11, 12, 0),
            Event {
                kind: EventKind::Wakeup {
                    pid: 13,
                    prio: 100,
                    target_cpu: 3,
                    new: true,
                },
                ..wakeup(1_000_000_000_202, 1, 11, 13, 3)
            },
            migrate(1_000_000_000_300, 2, 12, 1, 2),
            // Out of order and far apart: deltas may be negative.
            sw(999_999_999_000, 1, 12, u64::MAX, -1),
            Event {
                ts_ns: u64::MAX,
                cpu: u32::MAX,
                common_pid: i32::MIN,
                kind: EventKind::Exit {
                    pid: i32::MAX,
                    prio: -1,
                },
            },
            Event {
                ts_ns: 1_000_000_000_400,
                cpu: 0,
                common_pid: 10,
                kind: EventKind::Fork {
                    parent_pid: 10,
                    child_pid: 14,
                },
            },
        ]
    }

    #[test]
    fn events_round_trip_exactly() {
        let events = every_kind();
        let blob = encode(&events);
        assert_eq!(decode(&blob).unwrap(), events);
        assert_eq!(decode(&encode(&[])).unwrap(), Vec::<Event>::new());
        // One at a time, the same events.
        let mut streamed = Vec::new();
        let n = for_each(&blob, |e| {
            streamed.push(e);
            Ok(())
        })
        .unwrap();
        assert_eq!((n, streamed), (events.len() as u64, events));
        let mut cut = blob.clone();
        cut.truncate(cut.len() - 3);
        assert!(for_each(&cut, |_| Ok(())).is_err());
    }

    #[test]
    fn dense_switches_take_few_bytes() {
        let events: Vec<Event> = (0..10_000u64)
            .map(|k| {
                sw(
                    5_000_000_000_000 + k * 4_000,
                    (k % 2) as u32,
                    1000,
                    0x100,
                    1001,
                )
            })
            .collect();
        let blob = encode(&events);
        assert!(blob.len() < 17 * events.len(), "{} bytes", blob.len());
    }

    #[test]
    fn bad_blobs_are_errors() {
        assert!(decode(&[]).is_err());
        assert!(format!("{:#}", decode(&[9, 0]).unwrap_err()).contains("format 9"));
        let mut blob = encode(&every_kind());
        blob.truncate(blob.len() - 3);
        assert!(decode(&blob).is_err());
    }
}
