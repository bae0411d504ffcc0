//! The subcommands: `policy get` and `policy set` on a running process
//! (every thread with `--all-threads`), and `policy exec`, which forks,
//! applies the change in the child before exec, forwards SIGTERM and SIGHUP
//! to the command while it waits, and returns its exit code.

use std::io;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, anyhow};

use super::args::{Action, Change, ExecOptions, GetOptions, Request, SetOptions};
use super::explain::{Step, cannot, explain, refusal_context, strerror};
use super::info::{SchedInfo, is_esrch, no_process, read_info, render_text};
use crate::sys::child::{apply_sched_raw as apply_raw, decode_step};
use crate::sys::procstat::{self, list_threads};
use crate::sys::{proc, procfs, sched};

/// Runs a checked `policy` subcommand (see
/// [`validate_command`](super::validate_command)); returns the process exit
/// code. Refusals and missing processes are errors (exit 1).
pub fn run(action: Action) -> Result<i32> {
    match action {
        Action::Get(GetOptions {
            pid,
            json,
            all_threads,
        }) => {
            let info = read_info(pid, all_threads)?;
            print_info(&info, json)?;
            Ok(0)
        }
        Action::Set(SetOptions {
            pid,
            change: Change { req, cpus },
            all_threads,
            json,
        }) => {
            set(pid, &req, cpus.as_deref(), all_threads)?;
            let info = read_info(pid, all_threads)?;
            print_info(&info, json)?;
            Ok(0)
        }
        Action::Exec(ExecOptions {
            change: Change { req, cpus },
            command,
        }) => exec(&req, cpus.as_deref(), &command),
    }
}

fn print_info(info: &SchedInfo, json: bool) -> Result<()> {
    use std::io::Write as _;
    if json {
        outln!("{}", serde_json::to_string_pretty(info)?)?;
    } else {
        // Thread names are chosen by the process: escaped for the terminal.
        write!(
            crate::out::stdout(),
            "{}",
            crate::out::esc_lines(&render_text(info))
        )?;
    }
    Ok(())
}

/// `policy set`: the main thread, or every thread with `all_threads`.
fn set(pid: i32, req: &Request, cpus: Option<&[usize]>, all_threads: bool) -> Result<()> {
    let tids = if all_threads {
        list_threads(pid).map_err(|_| no_process(pid))?
    } else {
        vec![pid]
    };
    let comm =
        procfs::read_trimmed(Path::new(&format!("/proc/{pid}/comm"))).unwrap_or_else(|| "?".into());
    let set = cpus.map(sched::cpu_set);
    let mut failures = Vec::new();
    let mut changed = 0;
    for &tid in &tids {
        let before = match sched::get_attr(tid) {
            Ok(a) => a,
            Err(e) if is_esrch(&e) && tid != pid => continue, // the thread exited
            Err(e) if is_esrch(&e) => return Err(no_process(pid)),
            Err(e) => return Err(anyhow!("cannot read the scheduling of pid {pid}: {e}")),
        };
        let before_nice = procstat::read_task_stat(pid, tid).and_then(|s| s.nice);
        let attr = req.attr(before_nice.unwrap_or(before.sched_nice));
        match apply_raw(tid, attr.as_ref(), set.as_ref()) {
            Ok(()) => changed += 1,
            Err((_, libc::ESRCH)) if tid != pid => {}
            Err((_, libc::ESRCH)) => return Err(no_process(pid)),
            Err((step, errno)) => {
                let who = if tid == pid {
                    format!("pid {pid} ({comm})")
                } else {
                    format!("thread {tid} of pid {pid} ({comm})")
                };
                let ctx =
                    refusal_context(who.clone(), Some(pid), tid, Some(&before), before_nice, req);
                let mut msg = format!(
                    "{}: {}",
                    cannot(step, req, cpus, &who, false),
                    explain(step, errno, req, cpus, &ctx)
                );
                if step == Step::Affinity && attr.is_some() {
                    msg += " (the policy was changed, the affinity was not)";
                }
                if step == Step::Attr
                    && set.is_some()
                    && attr.is_some_and(|a| a.sched_policy == sched::SCHED_DEADLINE)
                {
                    msg += " (the affinity was changed, the policy was not)";
                }
                failures.push(msg);
            }
        }
    }
    if failures.is_empty() {
        return Ok(());
    }
    let mut msg = failures.join("\n");
    if tids.len() > 1 {
        msg += &format!(
            "\n{} of {} threads of pid {pid} refused; {changed} changed",
            failures.len(),
            tids.len()
        );
    }
    Err(anyhow!(msg))
}

/// `policy exec`: fork, apply the policy and affinity in the child, exec,
/// wait, and return the command's exit code (128+N for signal N).
fn exec(req: &Request, cpus: Option<&[usize]>, command: &[String]) -> Result<i32> {
    let program = command
        .first()
        .ok_or_else(|| anyhow!("no command given after --"))?;
    let before = sched::get_attr(0).context("cannot read this process's scheduling")?;
    let before_nice =
        procstat::read_stat_at(Path::new("/proc/thread-self/stat")).and_then(|s| s.nice);
    let attr = req.attr(before_nice.unwrap_or(before.sched_nice));
    let set = cpus.map(sched::cpu_set);

    // The parent takes SIGCHLD, SIGINT, SIGTERM and SIGHUP synchronously
    // while it waits: Ctrl-C reaches the command through the terminal's
    // process group and is ignored here, TERM and HUP are passed on.
    let signals = proc::control_signals();
    proc::block(&signals).context("cannot block signals")?;
    let restore = || {
        while proc::wait_signal(&signals, Duration::ZERO).is_some() {}
        let _ = proc::unblock_all_raw();
    };

    let mut cmd = Command::new(program);
    cmd.args(&command[1..]);
    crate::sys::child::configure(
        &mut cmd,
        crate::sys::child::ChildSetup {
            unblock_signals: true,
            attr,
            affinity: set,
            ..Default::default()
        },
    );
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            restore();
            let raw = e.raw_os_error().unwrap_or(0);
            if let Some((step, errno)) = decode_step(raw) {
                let ctx = refusal_context(
                    "the command".into(),
                    None,
                    0,
                    Some(&before),
                    before_nice,
                    req,
                );
                return Err(anyhow!(
                    "{}: {} (the command did not run)",
                    cannot(step, req, cpus, program, true),
                    explain(step, errno, req, cpus, &ctx)
                ));
            }
            note!(
                "error: cannot run {}: {}",
                crate::out::esc(program),
                strerror(&e)
            );
            return Ok(if e.kind() == io::ErrorKind::NotFound {
                127
            } else {
                126
            });
        }
    };
    let child_pid = child.id() as i32;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {}
            Err(e) => {
                restore();
                return Err(anyhow!("cannot wait for {program}: {e}"));
            }
        }
        if let Some(sig) = proc::wait_signal(&signals, Duration::from_secs(1))
            && (sig == libc::SIGTERM || sig == libc::SIGHUP)
        {
            proc::kill(child_pid, sig);
        }
    };
    restore();
    Ok(match (status.code(), status.signal()) {
        (Some(code), _) => code,
        (None, Some(sig)) => 128 + sig,
        (None, None) => 1,
    })
}
