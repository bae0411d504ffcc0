//! Running one outside program for the fidelity benchmark (a reference
//! tool, a compiled C loop, or schedlab itself): under a timeout, with its
//! standard output and error captured, and its wall time measured from
//! just before the spawn to the moment it is reaped.
//!
//! Output goes to temporary files rather than pipes, so a program that
//! writes a lot can never block on a pipe nobody reads while we wait for
//! it. The timeout is a watchdog thread that sends SIGKILL to the program
//! if it has not ended in time (a program that ends at that very moment is
//! reaped a few µs before the kill: its pid would have to be reused within
//! them to hit another process). The program stays in our process group, so
//! a Ctrl-C at the terminal stops it with the benchmark.

use anyhow::{Context, Result};
use std::io::{Read, Seek};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

/// What a program did.
#[derive(Debug)]
pub struct Ran {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
    /// Spawn to reaping.
    pub wall: Duration,
    /// Whether the watchdog killed it.
    pub timed_out: bool,
}

impl Ran {
    /// The last non-empty lines of its standard error (then output), at
    /// most `n`, joined by " | ": the reason to show when it failed.
    pub fn tail(&self, n: usize) -> String {
        let text = if self.stderr.trim().is_empty() {
            &self.stdout
        } else {
            &self.stderr
        };
        let lines: Vec<&str> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        lines[lines.len().saturating_sub(n)..].join(" | ")
    }

    /// Ok when it exited with code 0 in time, else why not (with the tail
    /// of what it said).
    pub fn check(&self, what: &str) -> std::result::Result<(), String> {
        if self.timed_out {
            return Err(format!(
                "{what} timed out after {:.0} s and was killed",
                self.wall.as_secs_f64()
            ));
        }
        if self.status.success() {
            return Ok(());
        }
        let tail = self.tail(3);
        Err(if tail.is_empty() {
            format!("{what} failed ({})", self.status)
        } else {
            format!("{what} failed ({}): {tail}", self.status)
        })
    }
}

/// Run `cmd` to its end, killing it after `timeout`. An error only when it
/// could not be started or its output not read.
pub fn run(cmd: &mut Command, timeout: Duration) -> Result<Ran> {
    let mut out = tempfile::tempfile().context("creating a temporary file")?;
    let mut err = tempfile::tempfile().context("creating a temporary file")?;
    cmd.stdin(Stdio::null())
        .stdout(Stdio::from(out.try_clone()?))
        .stderr(Stdio::from(err.try_clone()?));
    let program = cmd.get_program().to_string_lossy().into_owned();
    let start = Instant::now();
    let mut child = cmd
        .spawn()
        .with_context(|| format!("cannot start {program}"))?;
    let pid = child.id() as i32;
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let killed = Arc::new(AtomicBool::new(false));
    let watchdog = {
        let killed = Arc::clone(&killed);
        std::thread::spawn(move || {
            if let Err(mpsc::RecvTimeoutError::Timeout) = done_rx.recv_timeout(timeout) {
                killed.store(true, Ordering::SeqCst);
                crate::sys::proc::kill(pid, libc::SIGKILL);
            }
        })
    };
    let status = child.wait();
    let wall = start.elapsed();
    let _ = done_tx.send(());
    let _ = watchdog.join();
    let status = status.with_context(|| format!("waiting for {program}"))?;
    let read = |f: &mut std::fs::File| -> Result<String> {
        let mut bytes = Vec::new();
        f.rewind()?;
        f.read_to_end(&mut bytes)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    };
    Ok(Ran {
        status,
        stdout: read(&mut out).with_context(|| format!("reading {program}'s output"))?,
        stderr: read(&mut err).with_context(|| format!("reading {program}'s errors"))?,
        wall,
        timed_out: killed.load(Ordering::SeqCst),
    })
}

/// Whether `program` is an executable file in `$PATH`.
pub fn in_path(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|dir| {
            std::fs::metadata(dir.join(program))
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn captures_output_and_status() {
        let r = run(
            Command::new("sh").args(["-c", "echo out; echo err >&2; exit 3"]),
            Duration::from_secs(10),
        )
        .unwrap();
        assert_eq!(r.stdout, "out\n");
        assert_eq!(r.stderr, "err\n");
        assert_eq!(r.status.code(), Some(3));
        assert!(!r.timed_out);
        let e = r.check("sh").unwrap_err();
        assert!(e.contains("sh failed") && e.contains("err"), "{e}");
    }

    #[test]
    fn kills_after_the_timeout() {
        let r = run(Command::new("sleep").arg("30"), Duration::from_millis(100)).unwrap();
        assert!(r.timed_out);
        assert!(r.wall < Duration::from_secs(10));
        assert!(r.check("sleep").unwrap_err().contains("timed out"));
    }

    #[test]
    fn finds_programs_in_the_path() {
        assert!(in_path("sh"));
        assert!(!in_path("no-such-program-schedlab-fidelity"));
    }
}
