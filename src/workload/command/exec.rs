//! The worker side of a `command` workload: after the barrier, with the
//! run's policy, priority, affinity (and cgroup) already applied, the
//! worker becomes the program. It switches to the workload's `user`, opens
//! `stdin`, keeps every descriptor above standard error from the program
//! (its own barrier, result pipe, release time and channels, and whatever
//! schedlab inherited), and `exec`s `argv` in `cwd` (default: the
//! run directory) with `env` added: the program is the measured process,
//! and its children inherit the policy, as under `chrt`.
//!
//! After the exec the worker's own result never comes: the launcher learns
//! the program's end from its exit status (`ok_exit`) and the tree's end
//! from its cgroup becoming empty. The program's standard output and error
//! are the worker's.

use anyhow::{Context, Result, anyhow};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use super::params::{CommandParams, check_cwd, resolve_program};
use crate::sys::{exec, user};
use crate::workload::WorkContext;

/// The program's directory: `cwd`, else the run directory.
pub fn program_dir(p: &CommandParams, ctx: &WorkContext) -> PathBuf {
    p.cwd.clone().unwrap_or_else(|| ctx.dir.clone())
}

/// Become the program. Returns only when that failed, with why.
pub fn become_program(p: &CommandParams, ctx: &WorkContext) -> anyhow::Error {
    match prepare(p, ctx) {
        Ok(mut cmd) => {
            let e = exec::exec(&mut cmd);
            anyhow!(e).context(format!("exec of {:?}", p.argv))
        }
        Err(e) => e,
    }
}

/// Everything before the exec: the command, with the process switched to
/// `user` and its own descriptors closed on exec.
fn prepare(p: &CommandParams, ctx: &WorkContext) -> Result<Command> {
    let dir = program_dir(p, ctx);
    let path = p.path_var();
    let (argv0, args) = p
        .argv
        .split_first()
        .context("no program given (argv is empty)")?;
    // Else the exec's chdir fails as if the program were missing.
    check_cwd(&dir).with_context(|| format!("the program's directory (cwd) {}", dir.display()))?;
    let program = resolve_program(argv0, path.as_deref(), Some(&dir))?;
    if let Some(name) = &p.user {
        let ids = user::lookup(name)
            .with_context(|| format!("looking up user {name}"))?
            .with_context(|| format!("no user \"{name}\" on this machine"))?;
        user::become_user(&ids)?;
        // The change of user cleared it: the program still dies with schedlab.
        exec::die_with_parent().context("setting the parent-death signal again")?;
    }
    // Opened after the switch: the program reads only what its user may.
    let stdin = match &p.stdin {
        None => Stdio::null(),
        Some(f) => {
            let path = dir.join(f);
            std::fs::File::open(&path)
                .with_context(|| format!("opening stdin {}", path.display()))?
                .into()
        }
    };
    // The program gets 0-2 alone: not the worker's own descriptors
    // (barrier, result pipe, release time, channels), nor any schedlab
    // inherited from whoever started it (a shell's `exec 9</etc/shadow`),
    // nor other workers' pipe ends.
    crate::sys::fds::close_on_exec_from_raw(3)
        .map_err(std::io::Error::from_raw_os_error)
        .context("closing the worker's descriptors on exec")?;
    let mut cmd = Command::new(&program);
    std::os::unix::process::CommandExt::arg0(&mut cmd, argv0);
    cmd.args(args).envs(&p.env).current_dir(&dir).stdin(stdin);
    Ok(cmd)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::keys::Keys;

    /// Set in the child the test below starts: become the program.
    const CHILD_ENV: &str = "SCHEDLAB_TEST_BECOME_PROGRAM";

    fn params(text: &str) -> CommandParams {
        let t: toml::Table = text.parse().unwrap();
        super::super::params::parse(&Keys::new("w", "command", &t)).unwrap()
    }

    #[test]
    fn the_worker_becomes_the_program_with_its_settings() {
        if let Some(dir) = std::env::var_os(CHILD_ENV) {
            // In the child (a copy of this test program): an open
            // descriptor at RESULT_FD, as a worker has, must not reach the
            // program.
            let (r, _w) = crate::sys::proc::pipe().unwrap();
            let r = std::os::fd::AsRawFd::as_raw_fd(&r);
            crate::sys::proc::dup2_raw(r, crate::sys::proc::RESULT_FD).unwrap();
            // Nor one schedlab inherited open across exec (a shell's
            // `exec 9</etc/shadow`, issue 34).
            crate::sys::proc::dup2_raw(r, 9).unwrap();
            let p = params(
                "argv = [\"sh\", \"-c\", \"echo arg0=$0 greeting=$GREETING; pwd; cat; ls /proc/self/fd\"]\n\
                 env = { GREETING = \"hello\" }\nstdin = \"in.txt\"",
            );
            let ctx = WorkContext {
                fds: Vec::new(),
                dir: PathBuf::from(dir),
                index: 0,
                release_ns: None,
            };
            let e = become_program(&p, &ctx);
            panic!("exec failed: {e:#}");
        }
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("in.txt"), "from stdin\n").unwrap();
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "workload::command::exec::tests::the_worker_becomes_the_program_with_its_settings",
                "--test-threads=1",
                "--nocapture",
            ])
            .env(CHILD_ENV, dir.path())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stdout}\n{stderr}");
        let canonical = dir.path().canonicalize().unwrap();
        assert!(stdout.contains("arg0=sh greeting=hello\n"), "{stdout}");
        assert!(
            stdout.contains(&format!("{}\n", canonical.display())),
            "{stdout}"
        );
        assert!(stdout.contains("from stdin\n"), "{stdout}");
        // Neither the worker's result pipe at 4, nor the descriptor at 9,
        // nor anything the test harness inherited (cargo's jobserver)
        // reached the program: 0-2 and ls's own directory at 3.
        let fds: Vec<&str> = stdout
            .lines()
            .skip_while(|l| *l != "from stdin")
            .skip(1)
            .take_while(|l| l.chars().all(|c| c.is_ascii_digit()))
            .collect();
        assert_eq!(fds, ["0", "1", "2", "3"], "{stdout}");
        // The test harness of the child never printed its summary: the
        // process was replaced.
        assert!(!stdout.contains("test result"), "{stdout}");
    }

    #[test]
    fn a_missing_program_or_stdin_is_an_error_before_any_exec() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = WorkContext {
            fds: Vec::new(),
            dir: dir.path().to_path_buf(),
            index: 0,
            release_ns: None,
        };
        let e = become_program(&params("argv = [\"schedlab-no-such-program\"]"), &ctx);
        assert!(
            format!("{e:#}").contains("\"schedlab-no-such-program\" is not in PATH"),
            "{e:#}"
        );
        let mut empty = params("argv = [\"true\"]");
        empty.argv.clear();
        let e = become_program(&empty, &ctx);
        assert!(format!("{e:#}").contains("argv is empty"), "{e:#}");
        let e = become_program(&params("argv = [\"true\"]\nstdin = \"absent.txt\""), &ctx);
        assert!(format!("{e:#}").contains("opening stdin"), "{e:#}");
        assert_eq!(
            program_dir(&params("argv = [\"true\"]\ncwd = \"/tmp\""), &ctx),
            PathBuf::from("/tmp")
        );
    }
}
