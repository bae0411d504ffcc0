//! The compact binary form of what the store keeps of a run's derivation
//! ([`super::derive`]): its slices, wake-ups and repaired gaps, one blob per
//! run instead of a row each (a traced pingpong run has about 40,000 slices
//! and 30,000 wake-ups; inserting them as rows cost more than the rest of
//! storing the run). A postcard record: varint fields, each timestamp as a
//! zigzag delta from the one before it, a slice's end as a delta from its
//! start and its end reason and marks in one byte, about 10 bytes a slice;
//! in the LZ4 envelope of [`super::packed`] (about 3 bytes a slice).

use anyhow::{Result, bail};
use serde::{Deserialize, Serialize};

use super::derive::{Repair, Slice, WakeUp};
use super::event::SwitchEnd;

/// What the store keeps of a derivation, in the derivation's order: slices
/// by CPU then start, wake-ups by their first stamp, repairs in time order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoredDerivation {
    pub slices: Vec<Slice>,
    pub wakeups: Vec<WakeUp>,
    pub repairs: Vec<Repair>,
}

#[derive(Serialize, Deserialize)]
struct RawSlice {
    pid: i32,
    cpu: u32,
    /// start_ns minus the previous slice's start_ns.
    dstart_ns: i64,
    /// end_ns minus start_ns.
    len_ns: i64,
    /// [`pack_flags`].
    flags: u8,
}

#[derive(Serialize, Deserialize)]
struct RawWakeUp {
    pid: i32,
    waker_pid: i32,
    target_cpu: u32,
    new: bool,
    /// Each stamp minus the previous present stamp (of this wake-up or an
    /// earlier one).
    waking_ns: Option<i64>,
    wakeup_ns: Option<i64>,
    switch_in_ns: Option<i64>,
    cpu: Option<u32>,
}

#[derive(Serialize, Deserialize)]
struct RawRepair {
    cpu: u32,
    before_pid: i32,
    after_pid: i32,
    /// from_ns minus the previous repair's from_ns.
    dfrom_ns: i64,
    /// to_ns minus from_ns.
    len_ns: i64,
}

#[derive(Serialize, Deserialize)]
struct Raw {
    slices: Vec<RawSlice>,
    wakeups: Vec<RawWakeUp>,
    repairs: Vec<RawRepair>,
}

const START_CLIPPED: u8 = 1 << 3;
const START_REPAIRED: u8 = 1 << 4;
const END_REPAIRED: u8 = 1 << 5;

/// The end reason in the low three bits (0: none), the marks above.
fn pack_flags(s: &Slice) -> u8 {
    let end = match s.end {
        None => 0,
        Some(SwitchEnd::Preempted) => 1,
        Some(SwitchEnd::Yielded) => 2,
        Some(SwitchEnd::Blocked) => 3,
        Some(SwitchEnd::Exited) => 4,
        // Only the model's predicted timelines end a slice so.
        Some(SwitchEnd::Throttled) => 5,
    };
    let mark = |on: bool, bit: u8| if on { bit } else { 0 };
    end | mark(s.start_clipped, START_CLIPPED)
        | mark(s.start_repaired, START_REPAIRED)
        | mark(s.end_repaired, END_REPAIRED)
}

fn unpack_end(flags: u8) -> Result<Option<SwitchEnd>> {
    Ok(match flags & 0b111 {
        0 => None,
        1 => Some(SwitchEnd::Preempted),
        2 => Some(SwitchEnd::Yielded),
        3 => Some(SwitchEnd::Blocked),
        4 => Some(SwitchEnd::Exited),
        5 => Some(SwitchEnd::Throttled),
        n => bail!("corrupt trace derivation blob: slice end reason {n}"),
    })
}

/// `ts - *prev` (wrapping), moving `*prev` to `ts`.
fn delta(prev: &mut u64, ts: u64) -> i64 {
    let d = ts.wrapping_sub(*prev) as i64;
    *prev = ts;
    d
}

/// The inverse of [`delta`].
fn undelta(prev: &mut u64, d: i64) -> u64 {
    *prev = prev.wrapping_add(d as u64);
    *prev
}

/// A derivation's slices, wake-ups and repairs as a blob.
pub fn encode(slices: &[Slice], wakeups: &[WakeUp], repairs: &[Repair]) -> Vec<u8> {
    let mut prev = 0u64;
    let slices = slices
        .iter()
        .map(|s| RawSlice {
            pid: s.pid,
            cpu: s.cpu,
            dstart_ns: delta(&mut prev, s.start_ns),
            len_ns: s.end_ns.wrapping_sub(s.start_ns) as i64,
            flags: pack_flags(s),
        })
        .collect();
    let mut prev = 0u64;
    let wakeups = wakeups
        .iter()
        .map(|w| RawWakeUp {
            pid: w.pid,
            waker_pid: w.waker_pid,
            target_cpu: w.target_cpu,
            new: w.new,
            waking_ns: w.waking_ns.map(|t| delta(&mut prev, t)),
            wakeup_ns: w.wakeup_ns.map(|t| delta(&mut prev, t)),
            switch_in_ns: w.switch_in_ns.map(|t| delta(&mut prev, t)),
            cpu: w.cpu,
        })
        .collect();
    let mut prev = 0u64;
    let repairs = repairs
        .iter()
        .map(|r| RawRepair {
            cpu: r.cpu,
            before_pid: r.before_pid,
            after_pid: r.after_pid,
            dfrom_ns: delta(&mut prev, r.from_ns),
            len_ns: r.to_ns.wrapping_sub(r.from_ns) as i64,
        })
        .collect();
    let raw = Raw {
        slices,
        wakeups,
        repairs,
    };
    // About 10 bytes a slice, 14 a wake-up.
    let records = raw.slices.len() + raw.wakeups.len() + raw.repairs.len();
    super::packed::encode(&raw, 16 * records)
}

/// What [`encode`] wrote.
pub fn decode(blob: &[u8]) -> Result<StoredDerivation> {
    let raw: Raw = super::packed::decode(blob, "trace derivation blob")?;
    let mut prev = 0u64;
    let slices = raw
        .slices
        .into_iter()
        .map(|r| {
            let start_ns = undelta(&mut prev, r.dstart_ns);
            Ok(Slice {
                pid: r.pid,
                cpu: r.cpu,
                start_ns,
                end_ns: start_ns.wrapping_add(r.len_ns as u64),
                end: unpack_end(r.flags)?,
                start_clipped: r.flags & START_CLIPPED != 0,
                start_repaired: r.flags & START_REPAIRED != 0,
                end_repaired: r.flags & END_REPAIRED != 0,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let mut prev = 0u64;
    let wakeups = raw
        .wakeups
        .into_iter()
        .map(|r| WakeUp {
            pid: r.pid,
            waker_pid: r.waker_pid,
            target_cpu: r.target_cpu,
            new: r.new,
            waking_ns: r.waking_ns.map(|d| undelta(&mut prev, d)),
            wakeup_ns: r.wakeup_ns.map(|d| undelta(&mut prev, d)),
            switch_in_ns: r.switch_in_ns.map(|d| undelta(&mut prev, d)),
            cpu: r.cpu,
        })
        .collect();
    let mut prev = 0u64;
    let repairs = raw
        .repairs
        .into_iter()
        .map(|r| {
            let from_ns = undelta(&mut prev, r.dfrom_ns);
            Repair {
                cpu: r.cpu,
                before_pid: r.before_pid,
                after_pid: r.after_pid,
                from_ns,
                to_ns: from_ns.wrapping_add(r.len_ns as u64),
            }
        })
        .collect();
    Ok(StoredDerivation {
        slices,
        wakeups,
        repairs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::derive::derive;
    use crate::trace::derive::tests::*;

    fn slice(pid: i32, cpu: u32, start_ns: u64, end_ns: u64) -> Slice {
        Slice {
            pid,
            cpu,
            start_ns,
            end_ns,
            end: Some(SwitchEnd::Preempted),
            start_clipped: false,
            start_repaired: false,
            end_repaired: false,
        }
    }

    /// Every end reason and mark, extreme values, and stamps out of order.
    fn every_case() -> StoredDerivation {
        let mut slices: Vec<Slice> = [
            None,
            Some(SwitchEnd::Preempted),
            Some(SwitchEnd::Yielded),
            Some(SwitchEnd::Blocked),
            Some(SwitchEnd::Exited),
            Some(SwitchEnd::Throttled),
        ]
        .into_iter()
        .enumerate()
        .map(|(k, end)| Slice {
            end,
            start_clipped: k % 2 == 0,
            start_repaired: k % 3 == 0,
            end_repaired: k == 4,
            ..slice(
                10 + k as i32,
                (k % 2) as u32,
                1_000_000 + k as u64 * 7,
                2_000_000,
            )
        })
        .collect();
        slices.push(slice(i32::MIN, u32::MAX, u64::MAX, 0));
        slices.push(slice(i32::MAX, 0, 0, u64::MAX));
        let wakeups = vec![
            WakeUp {
                pid: 11,
                waker_pid: 0,
                waking_ns: Some(1_000_500),
                wakeup_ns: None,
                target_cpu: 1,
                new: false,
                switch_in_ns: Some(1_000_900),
                cpu: Some(1),
            },
            WakeUp {
                pid: 12,
                waker_pid: 11,
                waking_ns: None,
                wakeup_ns: Some(999_000),
                target_cpu: 0,
                new: true,
                switch_in_ns: None,
                cpu: None,
            },
            WakeUp {
                pid: -1,
                waker_pid: i32::MAX,
                waking_ns: Some(u64::MAX),
                wakeup_ns: Some(0),
                target_cpu: u32::MAX,
                new: false,
                switch_in_ns: Some(5),
                cpu: Some(u32::MAX),
            },
        ];
        let repairs = vec![
            Repair {
                cpu: 0,
                before_pid: 10,
                after_pid: 11,
                from_ns: 1_150_000,
                to_ns: 1_250_000,
            },
            Repair {
                cpu: 3,
                before_pid: i32::MIN,
                after_pid: i32::MAX,
                from_ns: u64::MAX - 1,
                to_ns: u64::MAX,
            },
        ];
        StoredDerivation {
            slices,
            wakeups,
            repairs,
        }
    }

    #[test]
    fn a_derivation_round_trips_exactly() {
        let d = every_case();
        let blob = encode(&d.slices, &d.wakeups, &d.repairs);
        assert_eq!(decode(&blob).unwrap(), d);
        assert_eq!(
            decode(&encode(&[], &[], &[])).unwrap(),
            StoredDerivation::default()
        );
    }

    #[test]
    fn a_derived_capture_round_trips() {
        // 10 runs on CPU 0 from 1.1 ms; the switch 10 → 11 was never
        // emitted: a repaired gap, with slices marked at its edges.
        let cap = capture(
            1_000_000,
            2_000_000,
            &[10, 11],
            vec![
                sw(1_100_000, 0, 0, 0, 10),
                waking(1_150_000, 0, 10, 99, 0),
                waking(1_250_000, 0, 11, 99, 0),
                sw(1_300_000, 0, 11, SLEEPING, 0),
                waking(1_400_000, 1, 0, 10, 1),
                wakeup(1_400_500, 1, 0, 10, 1),
                sw(1_450_000, 1, 0, 0, 10),
                sw(1_600_000, 1, 10, YIELDED, 0),
            ],
        );
        let d = derive(&cap);
        assert!(!d.repairs.is_empty() && !d.wakeups.is_empty());
        let back = decode(&encode(&d.slices, &d.wakeups, &d.repairs)).unwrap();
        assert_eq!(
            back,
            StoredDerivation {
                slices: d.slices,
                wakeups: d.wakeups,
                repairs: d.repairs,
            }
        );
    }

    #[test]
    fn dense_slices_take_few_bytes() {
        let slices: Vec<Slice> = (0..10_000u64)
            .map(|k| {
                slice(
                    1000 + (k % 2) as i32,
                    0,
                    5_000_000_000_000 + k * 4_000,
                    5_000_000_000_000 + k * 4_000 + 3_500,
                )
            })
            .collect();
        let blob = encode(&slices, &[], &[]);
        assert!(blob.len() < 10 * slices.len(), "{} bytes", blob.len());
    }

    #[test]
    fn bad_blobs_are_errors() {
        assert!(decode(&[]).is_err());
        assert!(format!("{:#}", decode(&[9, 0, 0, 0]).unwrap_err()).contains("format 9"));
        let d = every_case();
        let mut blob = encode(&d.slices, &d.wakeups, &d.repairs);
        blob.truncate(blob.len() - 3);
        assert!(decode(&blob).is_err());
        // One slice whose end-reason bits name no reason.
        let mut one = encode(&[slice(1, 0, 0, 1)], &[], &[]);
        let flags_at = one.len() - 3;
        one[flags_at] = 7;
        assert!(
            format!("{:#}", decode(&one).unwrap_err()).contains("end reason 7"),
            "{one:?}"
        );
    }
}
