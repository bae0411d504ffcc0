//! A `command` workload's `setup`: run once per run by the parent, in the
//! program's directory, before any worker is spawned (outside the measured
//! window), under the run's timeout. Its standard output and error go to
//! one file, shown (the last lines) when it fails.
//!
//! It runs as the workload's `user` when one is given (user and primary
//! group: the standard library's switch drops supplementary groups, where
//! the worker keeps them), in a process group of its own, which is killed
//! whole when it times out and after it exits. Under a launcher (root) it
//! also runs in a cgroup of the run's session, entered before its exec, so
//! that what it started in a session of its own (`setsid`, a daemon that
//! double-forked away) is killed with it too, and after a SIGKILL of
//! schedlab the next start kills what is left of it, as it does a
//! program's tree: nothing it started outlives it into the measurement.

use anyhow::{Context, Result};
use std::io::{Read, Seek};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::figures::{TAIL_LINES, tail_lines};
use super::params::{CommandParams, resolve_program};
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

/// How often the parent looks whether the setup has ended.
const POLL: Duration = Duration::from_millis(10);

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
    let mut log = tempfile::tempfile().context("creating the setup's output file")?;
    let mut cmd = Command::new(&resolved);
    cmd.arg0(program)
        .args(&p.setup[1..])
        .envs(&p.env)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(log.try_clone().context("sharing the setup's output file")?)
        .stderr(log.try_clone().context("sharing the setup's output file")?)
        .process_group(0);
    if let Some(name) = &p.user {
        let ids = crate::sys::user::lookup(name)
            .with_context(|| format!("looking up user {name}"))?
            .with_context(|| format!("no user \"{name}\" on this machine"))?;
        cmd.uid(ids.uid).gid(ids.gid);
    }
    // Dropped after the setup's end: kills whatever of it is left.
    let tree = trees
        .map(|t| t.create(&format!("setup{}", std::process::id()), 0))
        .transpose()
        .context("making the setup's cgroup")?;
    let mut child = match &tree {
        Some(tree) => {
            let procs: Vec<_> = tree.dirs().iter().map(|d| d.join("cgroup.procs")).collect();
            crate::sys::exec::spawn_in_cgroups(&mut cmd, &procs)
        }
        None => cmd.spawn(),
    }
    .with_context(|| format!("starting setup {}", resolved.display()))?;
    let pid = child.id() as i32;
    let timed_out = loop {
        if proc::child_exited(pid).with_context(|| format!("waiting for setup pid {pid}"))? {
            break false;
        }
        if until.is_some_and(|u| Instant::now() >= u) {
            break true;
        }
        std::thread::sleep(POLL);
    };
    // The group is still reserved (its leader not reaped): kill what is
    // left of it, everything on a timeout.
    let _ = proc::kill_group(pid, libc::SIGKILL);
    let status = child
        .wait()
        .with_context(|| format!("reaping setup pid {pid}"))?;
    let tail = read_tail(&mut log);
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

/// The last lines of the setup's output file.
fn read_tail(log: &mut std::fs::File) -> String {
    let mut bytes = Vec::new();
    if log.rewind().is_err() || log.read_to_end(&mut bytes).is_err() {
        return String::new();
    }
    tail_lines(&bytes, TAIL_LINES)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::keys::Keys;

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
