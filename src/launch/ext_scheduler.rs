//! A sched_ext scheduler of another program (`matrix.ext_scheduler`, e.g.
//! the kernel's `scx_simple` or one of the scx project's) over one run: the
//! program is started before the workers, the run waits until the kernel
//! says the scheduler is enabled, the workers of the fair policies are
//! handed to it, and the program's process group is stopped (SIGINT, then
//! SIGKILL) when the run has ended, before the next run starts.
//!
//! The program is schedlab's child, in a process group of its own (so a
//! wrapper that forks the scheduler is stopped with it), and is SIGKILLed
//! by the kernel if schedlab dies (`PR_SET_PDEATHSIG`); the kernel unloads
//! a BPF scheduler whose program has died, so nothing of it outlives
//! schedlab, even after a `kill -9` (of a wrapper, only the wrapper: what
//! it forked has no such tie).
//!
//! Workers of the fair policies are scheduled by it: a scheduler in
//! switch-all mode (the scx default) takes them itself; one in partial mode
//! (`SCX_OPS_SWITCH_PARTIAL`) takes only SCHED_EXT tasks, so those workers
//! are moved to SCHED_EXT at their nice value. `/proc/PID/sched`'s
//! `ext.enabled` is the witness of each hand-over. RT and DEADLINE workers
//! stay above it, as the kernel orders its classes.

use std::io::{Read, Seek, SeekFrom};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::policy::Class;
use crate::record::RunStatus;
use crate::spec::ExtScheduler;
use crate::sys::child::{self, ChildSetup};
use crate::sys::proc::{self, Exit, Usage};
use crate::sys::sched::{self, SchedAttr};
use crate::sys::scx;

/// How long the program has to exit after SIGINT, and the kernel to
/// report the scheduler disabled after that, before SIGKILL / giving up.
const STOP_GRACE: Duration = Duration::from_secs(5);
/// How often the kernel's state is polled while waiting.
const POLL: Duration = Duration::from_millis(20);
/// The most of the program's output kept with the run.
const OUTPUT_TAIL_BYTES: u64 = 2048;

/// Why a run cannot go on: its status and reason, or the user stopped
/// schedlab (the signal) while the scheduler was loading.
pub enum StartError {
    Run(RunStatus, String),
    Interrupted(i32),
}

/// The program's scheduler, loaded.
pub struct Running {
    level: ExtScheduler,
    pid: i32,
    /// The program's stdout and stderr.
    output: std::fs::File,
    /// The scheduler's name, as the kernel reports it (`root/ops`).
    ops: String,
    loaded_in: Duration,
    /// Workers the scheduler took itself, and workers moved to SCHED_EXT.
    taken: usize,
    moved: usize,
    /// How the program ended, when it ended before `stop`.
    ended: Option<(Exit, Usage)>,
    stopped: bool,
}

/// What became of the scheduler, for the run's record.
pub struct Report {
    pub json: serde_json::Value,
    /// Why the run must count as failed (the scheduler did not last it).
    pub failure: Option<String>,
}

impl Running {
    /// Start `level`'s program and wait until the kernel has its scheduler
    /// enabled. `signals` are schedlab's control signals (a Ctrl-C while
    /// waiting stops the program and is returned).
    pub fn start(level: &ExtScheduler, signals: &libc::sigset_t) -> Result<Running, StartError> {
        let named = |m: String| format!("matrix.ext_scheduler = \"{}\": {m}", level.name);
        let skip = |m: String| StartError::Run(RunStatus::Skipped, named(m));
        let fail = |m: String| StartError::Run(RunStatus::Failed, named(m));
        if let Some(why) = scx::status().cannot_load() {
            return Err(skip(why));
        }
        let program = &level.command[0];
        let output = tempfile::tempfile()
            .map_err(|e| fail(format!("cannot make a file for its output: {e}")))?;
        let mut cmd = Command::new(program);
        cmd.args(&level.command[1..]).stdin(Stdio::null());
        let sink = |f: &std::fs::File| f.try_clone().map(Stdio::from);
        match (sink(&output), sink(&output)) {
            (Ok(out), Ok(err)) => {
                cmd.stdout(out).stderr(err);
            }
            (Err(e), _) | (_, Err(e)) => {
                return Err(fail(format!("cannot pass it an output file: {e}")));
            }
        }
        child::configure(
            &mut cmd,
            ChildSetup {
                unblock_signals: true,
                die_with_parent: true,
                own_process_group: true,
                ..ChildSetup::default()
            },
        );
        let began = Instant::now();
        let pid = match cmd.spawn() {
            Ok(c) => c.id() as i32,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(skip(format!(
                    "the program \"{program}\" is not installed (not found{})",
                    if program.contains('/') {
                        String::new()
                    } else {
                        format!(
                            " in PATH={}",
                            std::env::var("PATH").unwrap_or_else(|_| "(unset)".into())
                        )
                    }
                )));
            }
            Err(e) => return Err(fail(format!("cannot start \"{program}\": {e}"))),
        };
        let mut running = Running {
            level: level.clone(),
            pid,
            output,
            ops: String::new(),
            loaded_in: Duration::ZERO,
            taken: 0,
            moved: 0,
            ended: None,
            stopped: false,
        };
        let deadline = began + Duration::from_nanos(level.ready_timeout_ns);
        loop {
            if let (Some(state), Some(ops)) = scx::state_now()
                && state == "enabled"
            {
                running.ops = ops;
                running.loaded_in = began.elapsed();
                return Ok(running);
            }
            if let Ok(Some(ended)) = proc::try_reap(pid) {
                let exit = ended.0.describe();
                running.ended = Some(ended);
                let tail = running.output_tail();
                return Err(fail(format!(
                    "\"{program}\" ended ({exit}) before its scheduler was enabled{}",
                    tail_note(&tail)
                )));
            }
            if Instant::now() >= deadline {
                let tail = running.output_tail();
                let (state, _) = scx::state_now();
                drop(running);
                return Err(fail(format!(
                    "its scheduler was not enabled within {} s (sched_ext state: {}; \
                     ext_schedulers.NAME.ready_timeout_s allows longer){}",
                    level.ready_timeout_ns as f64 / 1e9,
                    state.as_deref().unwrap_or("unknown"),
                    tail_note(&tail)
                )));
            }
            if let Some(sig) = proc::pending_stop_signal_within(signals, POLL) {
                return Err(StartError::Interrupted(sig));
            }
        }
    }

    /// The scheduler's name as the kernel reports it.
    pub fn ops(&self) -> &str {
        &self.ops
    }

    /// Hand the fair-policy processes among `pids` (policy class per
    /// process in `classes`, nice in `nices`) to the scheduler: those it
    /// has not taken itself are moved to SCHED_EXT at their nice. Err is
    /// the run's failure.
    pub fn take_over(
        &mut self,
        pids: &[i32],
        classes: &[Class],
        nices: &[i32],
    ) -> Result<(), String> {
        for ((&pid, &class), &nice) in pids.iter().zip(classes).zip(nices) {
            if class != Class::Fair {
                continue;
            }
            match scx::task_on_ext(pid) {
                Some(true) => self.taken += 1,
                _ => {
                    sched::set_attr(pid, &SchedAttr::fair(scx::SCHED_EXT, nice)).map_err(|e| {
                        format!(
                            "the sched_ext scheduler \"{}\" did not take pid {pid}, and it could \
                             not be put under SCHED_EXT: {e}",
                            self.ops
                        )
                    })?;
                    if scx::task_on_ext(pid) != Some(true) {
                        return Err(format!(
                            "pid {pid} is under SCHED_EXT but the sched_ext scheduler \"{}\" \
                             does not schedule it (/proc/{pid}/sched ext.enabled is not 1)",
                            self.ops
                        ));
                    }
                    self.moved += 1;
                }
            }
        }
        Ok(())
    }

    /// The program ended during the run and was reaped by the run's wait.
    pub fn ended_during_run(&mut self, exit: Exit, usage: Usage) {
        self.ended = Some((exit, usage));
    }

    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Stop the program now that the run has ended; check the scheduler
    /// lasted the whole run.
    pub fn stop(mut self) -> Report {
        // Still loaded, still the same scheduler: it saw the whole run.
        let (state, ops) = scx::state_now();
        let lasted = self.ended.is_none()
            && state.as_deref() == Some("enabled")
            && ops.as_deref() == Some(self.ops.as_str());
        let (exit, usage, unloaded) = self.shut_down();
        let tail = self.output_tail();
        let failure = (!lasted).then(|| {
            format!(
                "the sched_ext scheduler \"{}\" of matrix.ext_scheduler = \"{}\" stopped during \
                 the run (program {}; sched_ext then {}{}){}",
                self.ops,
                self.level.name,
                exit.as_deref().unwrap_or("still running"),
                state.as_deref().unwrap_or("unknown"),
                match &ops {
                    Some(o) if *o != self.ops => format!(" with \"{o}\""),
                    _ => String::new(),
                },
                tail_note(&tail)
            )
        });
        // Its program and the program's group are gone, yet the kernel
        // still has a scheduler: something outside schedlab's reach holds
        // it (a pinned link, a process started outside the group). The
        // machine is not as it was, and the next runs will say so.
        let failure = failure.or_else(|| {
            (!unloaded).then(|| {
                format!(
                    "the sched_ext scheduler \"{}\" of matrix.ext_scheduler = \"{}\" was still \
                     loaded {} s after its program was stopped (sched_ext {}): something outside \
                     the program's process group holds it (a pinned link, or a process it started \
                     elsewhere); stop it by hand",
                    self.ops,
                    self.level.name,
                    STOP_GRACE.as_secs(),
                    scx::state_now().0.as_deref().unwrap_or("unknown"),
                )
            })
        });
        let json = serde_json::json!({
            "name": self.level.name,
            "command": self.level.command,
            "ops": self.ops,
            "load_ms": self.loaded_in.as_secs_f64() * 1e3,
            "workers_taken": self.taken,
            "workers_moved_to_sched_ext": self.moved,
            "cpu_ms": usage.map(|u| (u.utime_us + u.stime_us) as f64 / 1e3),
            "exit": exit,
            "unloaded": unloaded,
            "output_tail": tail,
        });
        Report { json, failure }
    }

    /// SIGINT to the program's process group, then SIGKILL to the group
    /// after [`STOP_GRACE`]; then wait for the kernel to report sched_ext
    /// disabled. Returns how the program ended, its usage, and whether
    /// sched_ext is disabled again.
    ///
    /// The whole group, because a program may be a wrapper that forks the
    /// scheduler (`sh -c 'scx_x; …'`, a launcher): a signal to the wrapper
    /// alone leaves the scheduler loaded. The group is signalled only while
    /// its leader, the program, is not reaped (alive or a zombie), which
    /// keeps the group's id from being reused by another process.
    fn shut_down(&mut self) -> (Option<String>, Option<Usage>, bool) {
        self.stopped = true;
        let mut ended = self.ended.take();
        if ended.is_none() {
            let _ = proc::kill_group(self.pid, libc::SIGINT);
            // The program has ended and the scheduler is unloaded, or the
            // grace is over.
            let until = Instant::now() + STOP_GRACE;
            while Instant::now() < until
                && !(proc::child_exited(self.pid).unwrap_or(true) && disabled())
            {
                std::thread::sleep(POLL);
            }
            // Whatever of the group is left (the program, or what it
            // started and did not stop).
            let _ = proc::kill_group(self.pid, libc::SIGKILL);
            ended = proc::reap(self.pid).ok();
        }
        let until = Instant::now() + STOP_GRACE;
        let unloaded = loop {
            if disabled() {
                break true;
            }
            if Instant::now() >= until {
                break false;
            }
            std::thread::sleep(POLL);
        };
        (
            ended.as_ref().map(|(e, _)| e.describe()),
            ended.map(|(_, u)| u),
            unloaded,
        )
    }

    /// The end of what the program printed.
    fn output_tail(&mut self) -> String {
        let len = self.output.seek(SeekFrom::End(0)).unwrap_or(0);
        let from = len.saturating_sub(OUTPUT_TAIL_BYTES);
        let mut bytes = Vec::new();
        if self.output.seek(SeekFrom::Start(from)).is_ok() {
            let _ = (&self.output)
                .take(OUTPUT_TAIL_BYTES)
                .read_to_end(&mut bytes);
        }
        String::from_utf8_lossy(&bytes).trim().to_string()
    }
}

impl Drop for Running {
    /// A run that ends early (an error, a skipped step) still stops the
    /// program.
    fn drop(&mut self) {
        if !self.stopped {
            self.shut_down();
        }
    }
}

/// Whether the kernel reports sched_ext disabled now.
fn disabled() -> bool {
    scx::state_now().0.as_deref() == Some("disabled")
}

/// "; its last output: …" (its last five lines that are not blank) or
/// nothing.
fn tail_note(tail: &str) -> String {
    let last: Vec<&str> = tail
        .lines()
        .rev()
        .filter(|l| !l.trim().is_empty())
        .take(5)
        .collect();
    if last.is_empty() {
        return String::new();
    }
    let lines: Vec<&str> = last.into_iter().rev().collect();
    format!("; its last output: {}", lines.join(" | "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_note_keeps_the_last_five_lines() {
        assert_eq!(tail_note(""), "");
        let text = (1..=8)
            .map(|i| format!("line {i}"))
            .collect::<Vec<_>>()
            .join("\n");
        assert_eq!(
            tail_note(&text),
            "; its last output: line 4 | line 5 | line 6 | line 7 | line 8"
        );
        // scx programs end with a dump framed by blank lines, then EXIT.
        let exit = "dump\n\n=====\n\n  \nEXIT: scx_bpf_error (test triggering error)";
        assert_eq!(
            tail_note(exit),
            "; its last output: dump | ===== | EXIT: scx_bpf_error (test triggering error)"
        );
        assert_eq!(tail_note("\n \n"), "");
    }
}
