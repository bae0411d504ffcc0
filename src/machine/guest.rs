//! One booted guest, seen from the host: QEMU started as schedlab's child
//! (killed by the kernel if schedlab dies, in a process group of its own,
//! its pid kept in a directory schedlab owns so that the next start can
//! remove what a SIGKILL left), the guest's hello with its environment, and
//! runs asked for and answered one at a time. A guest that dies or stops
//! answering fails the run in progress with the tail of its console, and
//! the next run boots a new one.

use anyhow::{Context, Result, bail};
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use super::protocol::{self, ToGuest, ToHost};
use super::qemu;
use crate::launch::Outcome;
use crate::launch::rundir::OwnedDir;
use crate::plan::Run;
use crate::record::RunStatus;
use crate::spec::machines::{Accel, Guest, MachineLevel};
use crate::sys::child::{self, ChildSetup};
use crate::sys::envinfo::{EnvSnapshot, GuestEnv};
use crate::sys::proc;
use crate::workload::command::figures;

/// Name prefix of a guest's directory in the work directory.
pub const DIR_PREFIX: &str = "schedlab-guest-";
/// The file in a guest's directory that holds QEMU's pid.
pub const PID_FILE: &str = "qemu.pid";
/// The most of the console shown in an error.
const CONSOLE_TAIL_LINES: usize = 25;

/// What a guest needs to boot.
pub struct BootPlan<'a> {
    pub level: &'a MachineLevel,
    pub guest: &'a Guest,
    pub kernel: &'a Path,
    /// Where the kernel came from (recipe and source, or the user's path).
    pub kernel_source: String,
    pub image: &'a Path,
    pub workdir: &'a Path,
    pub qemu_version: String,
    /// The accelerator to boot under (resolved: never Auto).
    pub accel: Accel,
    pub boot_limit: Duration,
}

/// A guest that answered hello.
pub struct Session {
    qemu: Child,
    to_guest: ChildStdin,
    from_guest: Receiver<std::io::Result<Option<ToHost>>>,
    dir: OwnedDir,
    /// The guest's environment, with what the host adds.
    pub env: EnvSnapshot,
    pub accel: Accel,
    /// Host time from QEMU's start to the guest's hello.
    pub boot_time: Duration,
}

/// How waiting for the guest ended.
enum Waited {
    Message(ToHost),
    /// A stop signal came.
    Stopped(i32),
    /// QEMU ended or closed the channel.
    Ended,
    TimedOut,
}

/// How a boot ended.
pub enum Booted {
    Up(Box<Session>),
    Stopped(i32),
}

impl Session {
    /// Start QEMU and wait for the guest's hello.
    pub fn boot(p: &BootPlan, signals: &libc::sigset_t) -> Result<Booted> {
        let dir = OwnedDir::create_named(p.workdir, DIR_PREFIX)
            .with_context(|| format!("making a guest's directory in {}", p.workdir.display()))?;
        let console = dir.path().join("console.log");
        let stderr = std::fs::File::create(dir.path().join("qemu.stderr"))?;
        let mut cmd = Command::new(qemu::QEMU);
        cmd.args(qemu::args(p.guest, p.accel, p.kernel, p.image, &console))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr);
        child::configure(
            &mut cmd,
            ChildSetup {
                unblock_signals: true,
                die_with_parent: true,
                own_process_group: true,
                ..ChildSetup::default()
            },
        );
        let started = Instant::now();
        let mut qemu = cmd
            .spawn()
            .with_context(|| format!("starting {} for machine \"{}\"", qemu::QEMU, p.level.name))?;
        std::fs::write(dir.path().join(PID_FILE), format!("{}\n", qemu.id()))?;
        let to_guest = qemu.stdin.take().context("QEMU's standard input")?;
        let from = qemu.stdout.take().context("QEMU's standard output")?;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("guest-channel".into())
            .spawn(move || {
                let mut r = BufReader::new(from);
                loop {
                    let m = protocol::receive::<ToHost>(&mut r);
                    let end = !matches!(m, Ok(Some(_)));
                    if tx.send(m).is_err() || end {
                        break;
                    }
                }
            })?;
        let mut s = Session {
            qemu,
            to_guest,
            from_guest: rx,
            dir,
            env: crate::sys::envinfo::capture(),
            accel: p.accel,
            boot_time: Duration::ZERO,
        };
        match s.wait(signals, p.boot_limit)? {
            Waited::Message(ToHost::Hello(env)) => {
                s.boot_time = started.elapsed();
                s.env = *env;
                s.env.guest = Some(GuestEnv {
                    machine: p.level.name.clone(),
                    accel: p.accel.name().to_string(),
                    qemu_version: p.qemu_version.clone(),
                    topology: p.guest.topology.label(),
                    numa_nodes: p.guest.numa_nodes,
                    memory_mib: p.guest.memory_mib,
                    kernel: p.kernel_source.clone(),
                    host: crate::sys::envinfo::hostname(),
                });
                Ok(Booted::Up(Box::new(s)))
            }
            Waited::Stopped(sig) => {
                s.kill();
                Ok(Booted::Stopped(sig))
            }
            Waited::Message(ToHost::Error(e)) => {
                let tail = s.kill();
                bail!(
                    "machine \"{}\": schedlab in the guest failed: {e}{tail}",
                    p.level.name
                )
            }
            Waited::Message(_) => {
                let tail = s.kill();
                bail!(
                    "machine \"{}\": the guest spoke before its hello{tail}",
                    p.level.name
                )
            }
            Waited::Ended => {
                let tail = s.kill();
                bail!("machine \"{}\": the guest did not boot{tail}", p.level.name)
            }
            Waited::TimedOut => {
                let tail = s.kill();
                bail!(
                    "machine \"{}\": the guest did not boot within {:.0} s under {}{tail}",
                    p.level.name,
                    p.boot_limit.as_secs_f64(),
                    p.accel.name()
                )
            }
        }
    }

    /// Carry out `run` in the guest, waiting at most `limit` (host time).
    /// A guest that dies or stops answering fails the run (the caller boots
    /// a new one for the next); a stop signal kills the guest and
    /// interrupts the run.
    pub fn run(
        &mut self,
        run: &Run,
        signals: &libc::sigset_t,
        limit: Duration,
    ) -> Result<(Outcome, bool)> {
        let started = crate::store::unix_ms();
        let sent = protocol::send(&mut self.to_guest, &ToGuest::Run(Box::new(run.clone())));
        let waited = match sent {
            Ok(()) => self.wait(signals, limit)?,
            Err(_) => Waited::Ended,
        };
        let failed = |s: &mut Session, why: String| {
            let tail = s.kill();
            let rec = crate::record::RunRecord {
                run: run.clone(),
                status: RunStatus::Failed,
                reason: format!("{why}{tail}"),
                makespan_ns: None,
                cpu_util: None,
                cpu_list: Vec::new(),
                started_unix_ms: started,
                env: s.env.clone(),
                processes: Vec::new(),
                slices: Vec::new(),
                extra: serde_json::json!({}),
                interference: Default::default(),
            };
            (Outcome::Done(Box::new(rec), None), false)
        };
        Ok(match waited {
            Waited::Message(ToHost::Record(mut rec, trace)) => {
                rec.env.guest = self.env.guest.clone();
                (Outcome::Done(rec, trace), true)
            }
            Waited::Message(ToHost::Error(e)) => {
                failed(self, format!("schedlab in the guest: {e}"))
            }
            Waited::Message(ToHost::Hello(_)) => {
                failed(self, "the guest said hello again (it rebooted)".into())
            }
            Waited::Stopped(sig) => {
                self.kill();
                (Outcome::Interrupted(sig), false)
            }
            Waited::Ended => failed(self, "the guest died during the run".into()),
            Waited::TimedOut => failed(
                self,
                format!(
                    "the guest did not answer within {:.0} s of host time",
                    limit.as_secs_f64()
                ),
            ),
        })
    }

    /// Ask the guest to power off and wait for QEMU (killed after a grace).
    pub fn shut_down(mut self) {
        let _ = protocol::send(&mut self.to_guest, &ToGuest::Bye);
        let end = Instant::now() + Duration::from_secs(20);
        while Instant::now() < end {
            if let Ok(Some(_)) = self.qemu.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.kill();
    }

    /// The console log's path (for errors and tests).
    pub fn console(&self) -> PathBuf {
        self.dir.path().join("console.log")
    }

    fn wait(&mut self, signals: &libc::sigset_t, limit: Duration) -> Result<Waited> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(sig) = proc::pending_stop_signal(signals) {
                return Ok(Waited::Stopped(sig));
            }
            match self.from_guest.recv_timeout(Duration::from_millis(100)) {
                Ok(Ok(Some(m))) => return Ok(Waited::Message(m)),
                Ok(Ok(None)) | Err(RecvTimeoutError::Disconnected) => return Ok(Waited::Ended),
                Ok(Err(e)) => {
                    let tail = self.kill();
                    bail!("the guest's channel: {e}{tail}")
                }
                Err(RecvTimeoutError::Timeout) if Instant::now() >= deadline => {
                    return Ok(Waited::TimedOut);
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
        }
    }

    /// Kill QEMU (if it still runs), reap it, and return the console's
    /// and QEMU's last lines for an error message.
    fn kill(&mut self) -> String {
        let _ = self.qemu.kill();
        let _ = self.qemu.wait();
        let mut out = String::new();
        // (the serial console ends its lines with \r\n: `lines` drops both)
        let tail = |p: &Path, n| figures::tail_lines(&std::fs::read(p).unwrap_or_default(), n);
        let console = tail(&self.console(), CONSOLE_TAIL_LINES);
        if !console.is_empty() {
            out.push_str(&format!("; the console's last lines:\n{console}"));
        }
        let stderr = tail(&self.dir.path().join("qemu.stderr"), 5);
        if !stderr.is_empty() {
            out.push_str(&format!("\nQEMU said:\n{stderr}"));
        }
        out
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Ok(None) = self.qemu.try_wait() {
            let _ = self.qemu.kill();
            let _ = self.qemu.wait();
        }
    }
}
