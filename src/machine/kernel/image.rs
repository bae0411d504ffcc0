//! Reading an x86 bzImage: its boot protocol header (the "HdrS" magic at
//! 0x202, the version string, where the compressed kernel lies), the
//! decompression of that payload (gzip, xz, zstd, lz4 as the kernel makes
//! them), and the configuration the kernel carries with `CONFIG_IKCONFIG`
//! (a gzip stream between the `IKCFG_ST` and `IKCFG_ED` markers), as the
//! kernel's `scripts/extract-ikconfig` finds it.

use std::io::Read;

/// Where the boot protocol header's magic lies.
const HDRS_AT: usize = 0x202;
/// The largest decompressed kernel taken (a corrupt size must not exhaust memory).
const MAX_KERNEL_BYTES: usize = 1 << 30;
/// The largest chunk of the kernel's legacy LZ4 format, decompressed.
const LZ4_LEGACY_CHUNK: usize = 8 << 20;

/// What the header of a bzImage says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// The boot protocol version, e.g. 0x020f.
    pub protocol: u16,
    /// The kernel's version string ("6.12.117 (root@host) #1 SMP ..."), when
    /// the header points at one.
    pub version: Option<String>,
}

impl Header {
    /// The release: the first word of the version string.
    pub fn release(&self) -> Option<&str> {
        self.version.as_deref()?.split_whitespace().next()
    }
}

fn u16_at(data: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(data.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(data: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(data.get(at..at + 4)?.try_into().ok()?))
}

/// The boot protocol header, or why this is not a bzImage.
pub fn header(data: &[u8]) -> Result<Header, String> {
    if data.get(HDRS_AT..HDRS_AT + 4) != Some(b"HdrS") {
        return Err(
            "not an x86 bzImage: no boot protocol header (\"HdrS\" at offset 0x202)".to_string(),
        );
    }
    let protocol = u16_at(data, 0x206).unwrap_or(0);
    // kernel_version (0x20e): an offset from 0x200 of a NUL-terminated string.
    let version = u16_at(data, 0x20e)
        .filter(|&off| off != 0)
        .and_then(|off| data.get(0x200 + off as usize..))
        .and_then(|s| {
            let end = s.iter().position(|&b| b == 0)?;
            std::str::from_utf8(&s[..end]).ok().map(str::to_string)
        });
    Ok(Header { protocol, version })
}

/// The compressed kernel inside a bzImage (boot protocol 2.08 or later:
/// payload_offset at 0x248 and payload_length at 0x24c, from the start of
/// the protected-mode code after the setup sectors).
pub fn payload(data: &[u8]) -> Result<&[u8], String> {
    let h = header(data)?;
    if h.protocol < 0x0208 {
        return Err(format!(
            "boot protocol {}.{:02} is older than 2.08: it does not say where its kernel lies",
            h.protocol >> 8,
            h.protocol & 0xff
        ));
    }
    let setup_sects = match data.get(0x1f1).copied().unwrap_or(0) {
        0 => 4,
        n => n as usize,
    };
    let start = (setup_sects + 1) * 512;
    let offset = u32_at(data, 0x248).unwrap_or(0) as usize;
    let length = u32_at(data, 0x24c).unwrap_or(0) as usize;
    data.get(start + offset..start + offset + length)
        .filter(|p| !p.is_empty())
        .ok_or_else(|| {
            format!(
                "its header puts the kernel at {:#x}+{length} bytes, outside its {} bytes",
                start + offset,
                data.len()
            )
        })
}

/// The compressions the kernel makes a bzImage with, by magic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    Gzip,
    Xz,
    Zstd,
    Lz4,
    Bzip2,
    Lzma,
    Lzo,
}

pub fn compression(payload: &[u8]) -> Option<Compression> {
    let magics: [(&[u8], Compression); 7] = [
        (b"\x1f\x8b", Compression::Gzip),
        (b"\xfd7zXZ\x00", Compression::Xz),
        (b"\x28\xb5\x2f\xfd", Compression::Zstd),
        (b"\x02\x21\x4c\x18", Compression::Lz4),
        (b"BZh", Compression::Bzip2),
        (b"\x5d\x00\x00", Compression::Lzma),
        (b"\x89LZO", Compression::Lzo),
    ];
    magics
        .iter()
        .find(|(m, _)| payload.starts_with(m))
        .map(|&(_, c)| c)
}

/// Decompress the kernel of a bzImage's payload. The kernel's build appends
/// the decompressed size (4 bytes, little endian) after the stream.
pub fn decompress(payload: &[u8]) -> Result<Vec<u8>, String> {
    let kind = compression(payload).ok_or("its kernel is compressed in no format known")?;
    let (stream, size) = match payload.len().checked_sub(4) {
        Some(n) => (&payload[..n], u32_at(payload, n).unwrap_or(0) as usize),
        None => return Err("its compressed kernel is too short".to_string()),
    };
    let capacity = size.min(MAX_KERNEL_BYTES);
    let mut out = Vec::with_capacity(capacity);
    let limit = MAX_KERNEL_BYTES as u64 + 1;
    let result = match kind {
        Compression::Gzip => flate2::read::GzDecoder::new(stream)
            .take(limit)
            .read_to_end(&mut out)
            .map_err(|e| e.to_string()),
        Compression::Xz => liblzma::read::XzDecoder::new(stream)
            .take(limit)
            .read_to_end(&mut out)
            .map_err(|e| e.to_string()),
        Compression::Zstd => {
            ruzstd::decoding::StreamingDecoder::new_with_max_window_size(stream, 1 << 31)
                .map_err(|e| e.to_string())
                .and_then(|d| {
                    d.take(limit)
                        .read_to_end(&mut out)
                        .map_err(|e| e.to_string())
                })
        }
        Compression::Lz4 => lz4_legacy(stream, &mut out),
        other => {
            return Err(format!(
                "its kernel is compressed with {other:?}: schedlab reads gzip, xz, zstd and lz4"
            ));
        }
    };
    result.map_err(|e| format!("cannot decompress its kernel ({kind:?}): {e}"))?;
    if out.len() > MAX_KERNEL_BYTES {
        return Err(format!(
            "its kernel decompresses to more than {MAX_KERNEL_BYTES} bytes"
        ));
    }
    Ok(out)
}

/// The kernel's legacy LZ4 format (`lz4 -l`): the magic, then chunks each
/// a 4-byte compressed size and an LZ4 block of up to 8 MiB decompressed;
/// a repeated magic starts another stream.
fn lz4_legacy(mut data: &[u8], out: &mut Vec<u8>) -> Result<usize, String> {
    const MAGIC: u32 = 0x184c_2102;
    let mut chunk = vec![0u8; LZ4_LEGACY_CHUNK];
    while let Some(word) = u32_at(data, 0) {
        data = &data[4..];
        if word == MAGIC {
            continue;
        }
        let len = word as usize;
        let block = data
            .get(..len)
            .ok_or_else(|| format!("an LZ4 chunk of {len} bytes runs past the end"))?;
        let n = lz4_flex::block::decompress_into(block, &mut chunk).map_err(|e| e.to_string())?;
        out.extend_from_slice(&chunk[..n]);
        if out.len() > MAX_KERNEL_BYTES {
            break;
        }
        data = &data[len..];
    }
    Ok(out.len())
}

/// The configuration a kernel carries (`CONFIG_IKCONFIG`), as text; `None`
/// when the decompressed kernel holds no `IKCFG_ST` marker.
pub fn ikconfig(kernel: &[u8]) -> Result<Option<String>, String> {
    let Some(start) = find(kernel, b"IKCFG_ST") else {
        return Ok(None);
    };
    let data = &kernel[start + 8..];
    let end = find(data, b"IKCFG_ED").unwrap_or(data.len());
    let mut text = String::new();
    flate2::read::GzDecoder::new(&data[..end])
        .take(64 << 20)
        .read_to_string(&mut text)
        .map_err(|e| format!("its IKCONFIG data (after IKCFG_ST) does not decompress: {e}"))?;
    Ok(Some(text))
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The configuration inside a bzImage's bytes: its header checked, its
/// kernel decompressed, its IKCONFIG read (`None` without one).
pub fn config_of_bzimage(data: &[u8]) -> Result<Option<String>, String> {
    let kernel = decompress(payload(data)?)?;
    ikconfig(&kernel)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::io::Write;

    /// A minimal bzImage: 4 setup sectors of header, then `payload`.
    pub(crate) fn fake_bzimage(payload: &[u8], version: &str) -> Vec<u8> {
        let mut data = vec![0u8; 5 * 512];
        data[0x1f1] = 4;
        data[0x202..0x206].copy_from_slice(b"HdrS");
        data[0x206..0x208].copy_from_slice(&0x020fu16.to_le_bytes());
        data[0x20e..0x210].copy_from_slice(&0x300u16.to_le_bytes());
        data[0x500..0x500 + version.len()].copy_from_slice(version.as_bytes());
        let offset = 0x40u32;
        data[0x248..0x24c].copy_from_slice(&offset.to_le_bytes());
        data[0x24c..0x250].copy_from_slice(&(payload.len() as u32).to_le_bytes());
        data.extend_from_slice(&[0u8; 0x40]);
        data.extend_from_slice(payload);
        data.extend_from_slice(&[0u8; 100]);
        data
    }

    pub(crate) fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    /// A "kernel" that carries `config` as IKCONFIG does, among other bytes.
    pub(crate) fn fake_kernel(config: &str) -> Vec<u8> {
        let mut k: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 251) as u8).collect();
        k.extend_from_slice(b"IKCFG_ST");
        k.extend_from_slice(&gzip(config.as_bytes()));
        k.extend_from_slice(b"IKCFG_ED");
        k.extend((0..50_000u32).map(|i| (i % 13) as u8));
        k
    }

    fn with_size(mut stream: Vec<u8>, kernel: &[u8]) -> Vec<u8> {
        stream.extend_from_slice(&(kernel.len() as u32).to_le_bytes());
        stream
    }

    fn lz4_legacy_of(kernel: &[u8]) -> Vec<u8> {
        let mut s = 0x184c_2102u32.to_le_bytes().to_vec();
        for chunk in kernel.chunks(100_000) {
            let block = lz4_flex::block::compress(chunk);
            s.extend_from_slice(&(block.len() as u32).to_le_bytes());
            s.extend_from_slice(&block);
        }
        s
    }

    #[test]
    fn the_config_is_found_under_each_compression() {
        let config = "# Linux/x86 6.12.1 Kernel Configuration\nCONFIG_64BIT=y\n";
        let kernel = fake_kernel(config);
        let mut xz = liblzma::write::XzEncoder::new(Vec::new(), 6);
        xz.write_all(&kernel).unwrap();
        let streams = [
            ("gzip", gzip(&kernel)),
            ("xz", xz.finish().unwrap()),
            (
                "zstd",
                ruzstd::encoding::compress_to_vec(
                    &kernel[..],
                    ruzstd::encoding::CompressionLevel::Fastest,
                ),
            ),
            ("lz4", lz4_legacy_of(&kernel)),
        ];
        for (name, stream) in streams {
            let image = fake_bzimage(&with_size(stream, &kernel), "6.12.1 (a@b) #1 SMP");
            assert_eq!(header(&image).unwrap().release(), Some("6.12.1"), "{name}");
            assert_eq!(
                config_of_bzimage(&image).unwrap().as_deref(),
                Some(config),
                "{name}"
            );
        }
    }

    #[test]
    fn a_kernel_without_ikconfig_has_no_config_and_bad_input_is_named() {
        let kernel = vec![7u8; 10_000];
        let image = fake_bzimage(&with_size(gzip(&kernel), &kernel), "6.1.0");
        assert_eq!(config_of_bzimage(&image).unwrap(), None);
        let e = header(b"#!/bin/sh\necho not a kernel\n").unwrap_err();
        assert!(e.contains("HdrS") && e.contains("0x202"), "{e}");
        let bzip2 = fake_bzimage(b"BZh91AY&SY....", "6.1.0");
        let e = config_of_bzimage(&bzip2).unwrap_err();
        assert!(
            e.contains("Bzip2") && e.contains("gzip, xz, zstd and lz4"),
            "{e}"
        );
        let mut truncated = fake_bzimage(&with_size(gzip(&kernel), &kernel), "6.1.0");
        truncated.truncate(5 * 512 + 0x40 + 10);
        let e = config_of_bzimage(&truncated).unwrap_err();
        assert!(e.contains("outside its"), "{e}");
    }
}
