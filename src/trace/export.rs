//! A stored run's kernel trace encoded for other tools: a Perfetto
//! protobuf trace ([`super::perfetto`]) or Chrome trace-event JSON
//! ([`super::chrome_json`]), the format from the flag or the file's
//! extension. Pure: `cli/trace.rs` reads the store and writes the file.

use std::path::Path;

use super::{Capture, chrome_json, perfetto};

/// The file format of an export.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Perfetto's protobuf trace (ui.perfetto.dev, trace_processor).
    Perfetto,
    /// Chrome trace-event JSON (chrome://tracing, ui.perfetto.dev).
    Json,
}

impl Format {
    pub const ALL: [Format; 2] = [Format::Perfetto, Format::Json];

    /// The format asked for, else the output's extension's (`.json` is
    /// JSON), else Perfetto.
    pub fn resolve(asked: Option<Format>, output: &Path) -> Format {
        asked.unwrap_or_else(|| {
            let json = output
                .extension()
                .is_some_and(|e| e.eq_ignore_ascii_case("json"));
            if json { Format::Json } else { Format::Perfetto }
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Format::Perfetto => "Perfetto protobuf",
            Format::Json => "Chrome JSON",
        }
    }
}

/// The capture in a format (`kernel_release`: the traced kernel's, which
/// Perfetto needs to read `prev_state`).
pub fn encode(capture: &Capture, kernel_release: &str, format: Format) -> Vec<u8> {
    match format {
        Format::Perfetto => perfetto::encode(capture, kernel_release),
        Format::Json => chrome_json::encode(capture),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_format_follows_the_flag_then_the_extension() {
        let p = Path::new("x/run.JSON");
        assert_eq!(Format::resolve(None, p), Format::Json);
        assert_eq!(Format::resolve(Some(Format::Perfetto), p), Format::Perfetto);
        assert_eq!(
            Format::resolve(None, Path::new("run.pftrace")),
            Format::Perfetto
        );
        assert_eq!(Format::resolve(None, Path::new("run")), Format::Perfetto);
        assert_eq!(
            Format::resolve(Some(Format::Json), Path::new("run.pftrace")),
            Format::Json
        );
    }
}
