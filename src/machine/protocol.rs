//! What the host and a guest say to each other over the guest's channel
//! (a virtio serial port): one JSON object per line. The guest says hello
//! with its environment once it has booted; the host asks for runs one at
//! a time; the guest answers each with its record (and capture, when
//! traced) or with the stop that interrupted it; the host says bye and the
//! guest powers off.

use serde::{Deserialize, Serialize};
use std::io::{BufRead, Read, Write};

use crate::plan::Run;
use crate::record::RunRecord;
use crate::sys::envinfo::EnvSnapshot;
use crate::trace::Capture;

/// The name QEMU gives the port (`virtserialport,name=…`); the guest finds
/// its device under `/sys/class/virtio-ports/*/name`.
pub const PORT_NAME: &str = "org.schedlab.0";

/// The most one message may hold (a traced run's capture is the largest).
pub const MAX_LINE_BYTES: usize = 1 << 30;

/// Host → guest.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToGuest {
    /// Carry out this run.
    Run(Box<Run>),
    /// No more runs: power off.
    Bye,
}

/// Guest → host.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToHost {
    /// Booted and ready: the guest's environment.
    Hello(Box<EnvSnapshot>),
    /// A run finished (ok, failed, timed out or skipped).
    Record(Box<RunRecord>, Option<Box<Capture>>),
    /// A run could not be carried out at all (schedlab's own error in the
    /// guest): the message.
    Error(String),
}

/// Write one message as a line and flush it.
pub fn send<T: Serialize>(w: &mut impl Write, msg: &T) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(msg).map_err(std::io::Error::other)?;
    line.push(b'\n');
    w.write_all(&line)?;
    w.flush()
}

/// Read one message; None at end of file. A line that is not a message is
/// an error naming what it started with.
pub fn receive<T: for<'de> Deserialize<'de>>(r: &mut impl BufRead) -> std::io::Result<Option<T>> {
    let mut line = Vec::new();
    let n = r
        .by_ref()
        .take(MAX_LINE_BYTES as u64 + 1)
        .read_until(b'\n', &mut line)?;
    if n == 0 {
        return Ok(None);
    }
    if line.len() > MAX_LINE_BYTES {
        return Err(std::io::Error::other(format!(
            "a message of more than {MAX_LINE_BYTES} bytes"
        )));
    }
    serde_json::from_slice(&line).map(Some).map_err(|e| {
        let shown: String = String::from_utf8_lossy(&line[..line.len().min(80)]).into();
        std::io::Error::other(format!("not a message ({e}): {shown:?}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_survive_the_line() {
        let mut buf = Vec::new();
        send(&mut buf, &ToHost::Error("no such program".into())).unwrap();
        send(&mut buf, &ToGuest::Bye).unwrap();
        let mut r = std::io::Cursor::new(buf);
        let first: Option<ToHost> = receive(&mut r).unwrap();
        assert!(matches!(first, Some(ToHost::Error(m)) if m == "no such program"));
        let second: Option<ToGuest> = receive(&mut r).unwrap();
        assert!(matches!(second, Some(ToGuest::Bye)));
        let end: Option<ToGuest> = receive(&mut r).unwrap();
        assert!(end.is_none());
        let mut junk = std::io::Cursor::new(b"[    0.1] Linux version\n".to_vec());
        let e = receive::<ToHost>(&mut junk).unwrap_err();
        assert!(e.to_string().contains("not a message"), "{e}");
    }
}
