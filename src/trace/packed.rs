//! The envelope of the trace blobs the store keeps ([`super::blob`], the
//! events; [`super::derived_blob`], the derivation): a format byte, then
//! the postcard body, LZ4-compressed (block format, its length first) from
//! format 2 on. Format 1, uncompressed, is still read.
//!
//! LZ4 because storing is on a campaign's path between runs: a traced
//! pingpong run's events shrink about 5× (997 → 200 KB) and its derivation
//! 3× (721 → 240 KB) for about 2 ms of compression, and SQLite writes each
//! byte twice (its log, then the database) and syncs both.

use std::borrow::Cow;

use anyhow::{Result, anyhow, bail};
use serde::{Serialize, de::DeserializeOwned};

/// The uncompressed layout.
const PLAIN: u8 = 1;
/// LZ4-compressed: what [`pack`] writes.
pub const LZ4: u8 = 2;

/// The blob of `value`: postcard into a buffer sized once for about
/// `bytes_hint` bytes (so that a busy run's megabytes are written once, not
/// regrown and copied), then compressed.
pub fn encode<T: Serialize>(value: &T, bytes_hint: usize) -> Vec<u8> {
    let body = postcard::to_extend(value, Vec::with_capacity(bytes_hint))
        .expect("serialising into memory cannot fail");
    pack(&body)
}

/// The value [`encode`] wrote, from a blob of either format; `what` names
/// the blob in errors.
pub fn decode<T: DeserializeOwned>(blob: &[u8], what: &str) -> Result<T> {
    postcard::from_bytes(&unpack(blob, what)?).map_err(|e| anyhow!("corrupt {what}: {e}"))
}

/// The blob of postcard `body`, compressed (LZ4's size-prepended block:
/// its length as 4 bytes little-endian, then the block).
pub fn pack(body: &[u8]) -> Vec<u8> {
    let mut out = vec![LZ4];
    out.extend(lz4_flex::compress_prepend_size(body));
    out
}

/// The postcard body of a blob of either format; `what` names the blob in
/// errors.
pub fn unpack<'a>(blob: &'a [u8], what: &str) -> Result<Cow<'a, [u8]>> {
    let Some((&format, rest)) = blob.split_first() else {
        bail!("empty {what}");
    };
    match format {
        PLAIN => Ok(Cow::Borrowed(rest)),
        LZ4 => {
            let corrupt = |why: String| anyhow!("corrupt {what}: {why}");
            let (len, compressed) = rest
                .split_first_chunk::<4>()
                .ok_or_else(|| corrupt("no length".into()))?;
            let len = u32::from_le_bytes(*len) as usize;
            // LZ4 expands at most 255×: a larger length is damage, and is
            // not allocated.
            if len > compressed.len().saturating_mul(255) + 16 {
                return Err(corrupt(format!(
                    "{len} bytes claimed from {}",
                    compressed.len()
                )));
            }
            let mut body = vec![0; len];
            let n = lz4_flex::block::decompress_into(compressed, &mut body)
                .map_err(|e| corrupt(e.to_string()))?;
            if n != len {
                return Err(corrupt(format!("{n} bytes, not the {len} claimed")));
            }
            Ok(Cow::Owned(body))
        }
        n => bail!("{what} of format {n}, this schedlab reads formats {PLAIN} and {LZ4}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_round_trip_and_both_formats_are_read() {
        let body: Vec<u8> = (0..10_000u32).flat_map(|k| (k % 7).to_le_bytes()).collect();
        let blob = pack(&body);
        assert_eq!(blob[0], LZ4);
        assert!(blob.len() < body.len() / 4, "{} bytes", blob.len());
        assert_eq!(unpack(&blob, "x").unwrap().as_ref(), &body[..]);
        assert_eq!(unpack(&pack(&[]), "x").unwrap().as_ref(), &[] as &[u8]);
        let plain: Vec<u8> = [PLAIN].into_iter().chain(body.iter().copied()).collect();
        assert_eq!(unpack(&plain, "x").unwrap().as_ref(), &body[..]);
    }

    #[test]
    fn damage_is_an_error_naming_the_blob() {
        let blob = pack(&[7u8; 1000]);
        let err = |b: &[u8]| format!("{:#}", unpack(b, "trace event blob").unwrap_err());
        assert!(err(&[]).contains("empty trace event blob"));
        assert!(err(&[9, 0]).contains("trace event blob of format 9"));
        assert!(err(&blob[..3]).contains("corrupt trace event blob"));
        assert!(err(&blob[..blob.len() - 2]).contains("corrupt trace event blob"));
        // A length no LZ4 block could expand to is refused before any
        // allocation.
        let mut huge = blob.clone();
        huge[1..5].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(err(&huge).contains("claimed"));
    }
}
