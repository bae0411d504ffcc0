//! A `command` workload's `setup`: run once per run by the parent, in the
//! program's directory, before any worker is spawned (outside the measured
//! window), under the run's timeout. Its standard output and error go to
//! one pipe, of which the last 64 KiB are kept (as of a program's output)
//! and the last lines shown when it fails.
//!
//! It runs as the workload's `user` when one is given (with the user's
//! groups, as the program), in a session of its own (no controlling
//! terminal) with descriptors 0-2 alone, and its process group is killed
//! whole when it times out and after it exits. Under a launcher (root) it
//! also runs in a cgroup of the run's session, entered before its exec and
//! before the switch of user (a cgroup is root's to join), so
//! that what it started in a session of its own (`setsid`, a daemon that
//! double-forked away) is killed with it too, and after a SIGKILL of
//! schedlab the next start kills what is left of it, as it does a
//! program's tree: nothing it started outlives it into the measurement.

use anyhow::{Context, Result};
use std::io::Read;
use std::os::fd::AsFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use super::figures::{TAIL_LINES, tail_lines};
use super::params::{CommandParams, resolve_program};
use crate::launch::outputs::PROGRAM_KEPT;
use crate::sys::cgroup::TreeGroups;
use crate::sys::proc;

/// The setup did not finish within the run's timeout.
#[derive(Debug, thiserror::Error)]
#[error(
    "setup {argv:?} did not finish within the run's timeout_s (killed); its last lines:\n{tail}"
)]
pub struct SetupTimedOut {
    pub argv: Vec<String>,
    pub tail: String,
}

/// How often (ms) the parent looks whether the setup has ended.
const POLL_MS: i32 = 10;

/// Run `p.setup` (if any) in `dir`, giving up when `until` passes; inside
/// a cgroup of `trees` when given.
pub fn run(
    p: &CommandParams,
    dir: &Path,
    until: Option<Instant>,
    trees: Option<&TreeGroups>,
) -> Result<()> {
    let Some(program) = p.setup.first() else {
        return Ok(());
    };
    let path = p.path_var();
    let resolved = resolve_program(program, path.as_deref(), Some(dir))
        .with_context(|| format!("setup {:?}", p.setup))?;
    // Its stdout and stderr share one pipe, drained as it runs, of which
    // the last bytes alone are kept: no file grows, no memory either.
    let (log_r, log_w) = proc::pipe().context("creating the setup's output pipe")?;
    crate::sys::fds::set_nonblocking(&log_r).context("creating the setup's output pipe")?;
    let mut log = Tail::new(std::fs::File::from(log_r));
    let mut cmd = Command::new(&resolved);
    cmd.arg0(program)
        .args(&p.setup[1..])
        .envs(&p.env)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(
            log_w
                .try_clone()
                .context("sharing the setup's output pipe")?,
        )
        .stderr(log_w);
    let user = match &p.user {
        Some(name) => Some(
            crate::sys::user::lookup(name)
                .with_context(|| format!("looking up user {name}"))?
                .with_context(|| format!("no user \"{name}\" on this machine"))?,
        ),
        None => None,
    };
    // Dropped after the setup's end: kills whatever of it is left.
    let tree = trees
        .map(|t| t.create(&format!("setup{}", std::process::id()), 0))
        .transpose()
        .context("making the setup's cgroup")?;
    let procs: Vec<_> = tree
        .iter()
        .flat_map(|t| t.dirs().iter().map(|d| d.join("cgroup.procs")))
        .collect();
    let confinement = crate::sys::exec::Confinement {
        procs_files: &procs,
        user: user.as_ref(),
        dir,
    };
    let spawned = crate::sys::exec::spawn_confined(&mut cmd, &confinement);
    // The parent's copies of the pipe's write end go with `cmd`.
    drop(cmd);
    let mut child = spawned.with_context(|| format!("starting setup {}", resolved.display()))?;
    let pid = child.id() as i32;
    let timed_out = loop {
        log.drain();
        if proc::child_exited(pid).with_context(|| format!("waiting for setup pid {pid}"))? {
            break false;
        }
        if until.is_some_and(|u| Instant::now() >= u) {
            break true;
        }
        // Wakes as soon as it writes, else after POLL_MS (a pipe at its
        // end would wake at once: then sleep).
        if log.eof {
            std::thread::sleep(std::time::Duration::from_millis(POLL_MS as u64));
        } else {
            let _ = crate::sys::fds::wait_readable(log.pipe.as_fd(), POLL_MS);
        }
    };
    // The group is still reserved (its leader not reaped): kill what is
    // left of it, everything on a timeout.
    let _ = proc::kill_group(pid, libc::SIGKILL);
    let status = child
        .wait()
        .with_context(|| format!("reaping setup pid {pid}"))?;
    log.drain();
    let tail = tail_lines(&log.kept, TAIL_LINES);
    if timed_out {
        return Err(SetupTimedOut {
            argv: p.setup.clone(),
            tail,
        }
        .into());
    }
    if !status.success() {
        anyhow::bail!(
            "setup {:?} failed ({status}); its last lines:\n{}",
            p.setup,
            if tail.is_empty() {
                "  (no output)".into()
            } else {
                tail
            }
        );
    }
    Ok(())
}

/// The setup's output pipe (non-blocking) and its last
/// [`PROGRAM_KEPT`] bytes, as a program's output is kept.
struct Tail {
    pipe: std::fs::File,
    kept: Vec<u8>,
    /// Every write end is closed.
    eof: bool,
}

impl Tail {
    fn new(pipe: std::fs::File) -> Tail {
        Tail {
            pipe,
            kept: Vec::new(),
            eof: false,
        }
    }

    /// Read what the pipe holds now (at most 1 MiB: a setup that never
    /// stops writing must not keep its timeout from being checked),
    /// keeping the last bytes.
    fn drain(&mut self) {
        let mut buf = [0u8; 16 << 10];
        for _ in 0..64 {
            match self.pipe.read(&mut buf) {
                Ok(0) => {
                    self.eof = true;
                    break;
                }
                Ok(n) => {
                    self.kept.extend_from_slice(&buf[..n]);
                    // Cut in halves of the kept size: a copy per 64 KiB read.
                    if self.kept.len() >= 2 * PROGRAM_KEPT {
                        let cut = self.kept.len() - PROGRAM_KEPT;
                        self.kept.drain(..cut);
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        if self.kept.len() > PROGRAM_KEPT {
            let cut = self.kept.len() - PROGRAM_KEPT;
            self.kept.drain(..cut);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::keys::Keys;
    use std::time::Duration;

    fn params(text: &str) -> CommandParams {
        let t: toml::Table = text.parse().unwrap();
        super::super::params::parse(&Keys::new("w", "command", &t)).unwrap()
    }

    #[test]
    fn setup_runs_in_the_directory_with_the_environment() {
        let dir = tempfile::tempdir().unwrap();
        let p = params(
            "argv = [\"true\"]\nsetup = [\"sh\", \"-c\", \"echo $GREETING > made.txt\"]\nenv = { GREETING = \"hi\" }",
        );
        run(&p, dir.path(), None, None).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("made.txt")).unwrap(),
            "hi\n"
        );
        // No setup: nothing happens.
        run(&params("argv = [\"true\"]"), dir.path(), None, None).unwrap();
    }

    #[test]
    fn a_failing_setup_shows_its_last_lines() {
        let dir = tempfile::tempdir().unwrap();
        let p = params(
            "argv = [\"true\"]\nsetup = [\"sh\", \"-c\", \"echo compiling; echo 'error: no rule' >&2; exit 2\"]",
        );
        let e = format!("{:#}", run(&p, dir.path(), None, None).unwrap_err());
        assert!(e.contains("failed (exit status: 2)"), "{e}");
        assert!(e.contains("  | compiling\n  | error: no rule"), "{e}");
        let p = params("argv = [\"true\"]\nsetup = [\"schedlab-no-such-setup\"]");
        let e = format!("{:#}", run(&p, dir.path(), None, None).unwrap_err());
        assert!(
            e.contains("\"schedlab-no-such-setup\" is not in PATH"),
            "{e}"
        );
    }

    /// Issue 34: a setup's output filled a file and then memory whole
    /// (400 MB printed, 402 MB peak). Of the pipe the last 64 KiB are kept.
    #[test]
    fn of_a_setup_s_output_the_last_64_kib_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let p = params(
            "argv = [\"true\"]\nsetup = [\"sh\", \"-c\", \"head -c 8000000 /dev/zero | tr '\\\\000' x; echo; echo the end; exit 4\"]",
        );
        let e = format!("{:#}", run(&p, dir.path(), None, None).unwrap_err());
        assert!(
            e.contains("exit status: 4") && e.contains("  | the end"),
            "{e}"
        );
        let (r, w) = proc::pipe().unwrap();
        crate::sys::fds::set_nonblocking(&r).unwrap();
        let mut tail = Tail::new(std::fs::File::from(r));
        let writer = std::thread::spawn(move || {
            use std::io::Write;
            let mut w = std::fs::File::from(w);
            for i in 0..200u32 {
                w.write_all(&[b'a' + (i % 26) as u8; 10_000]).unwrap();
            }
        });
        while !tail.eof {
            tail.drain();
            assert!(tail.kept.len() <= PROGRAM_KEPT, "{}", tail.kept.len());
            std::thread::sleep(Duration::from_millis(1));
        }
        writer.join().unwrap();
        assert_eq!(tail.kept.len(), PROGRAM_KEPT);
        // The last write was 10,000 bytes of b'a' + 199 % 26.
        assert!(tail.kept.ends_with(&[b'r'; 10_000]));
    }

    #[test]
    fn a_setup_past_the_deadline_is_killed_with_what_it_started() {
        let dir = tempfile::tempdir().unwrap();
        // The setup starts a child of its own that would outlive it.
        let p = params(
            "argv = [\"true\"]\nsetup = [\"sh\", \"-c\", \"sleep 30 & echo $! > child.pid; echo started; wait\"]",
        );
        let t = Instant::now();
        let e = run(
            &p,
            dir.path(),
            Some(Instant::now() + Duration::from_millis(300)),
            None,
        )
        .unwrap_err();
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        let timed_out = e.downcast_ref::<SetupTimedOut>().expect("a SetupTimedOut");
        assert!(timed_out.tail.contains("started"), "{}", timed_out.tail);
        let child: i32 = std::fs::read_to_string(dir.path().join("child.pid"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // The grandchild got SIGKILL with its group (a zombie at most until
        // init reaps it): its state is gone or Z.
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            let state = std::fs::read_to_string(format!("/proc/{child}/stat")).ok();
            let alive = state.as_deref().is_some_and(|s| {
                s.rsplit_once(") ")
                    .is_some_and(|(_, rest)| !rest.starts_with('Z'))
            });
            if !alive {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "setup's child {child} still runs"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}
