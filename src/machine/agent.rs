//! schedlab inside a guest (`schedlab __guest-agent`, started by the image's
//! `/init`): says hello with the guest's environment over the channel,
//! carries out each run the host asks for through the same
//! [`MachineExecutor`] a host campaign uses, with the guest's own cooldown
//! between runs, answers with the record, and returns when the host says
//! bye (the init then powers the guest off).

use anyhow::{Context, Result, bail};
use std::io::{BufReader, Write};
use std::path::{Path, PathBuf};

use super::image::{FORCE_PATH, SPEC_PATH};
use super::protocol::{self, PORT_NAME, ToGuest, ToHost};
use crate::campaign::{Executor, MachineExecutor, Options};
use crate::launch::Outcome;
use crate::plan::{Plan, Run};
use crate::spec::Spec;
use crate::sys::{envinfo, proc};

/// Serve the host until it says bye.
pub fn serve() -> Result<()> {
    let port = find_port(Path::new("/sys/class/virtio-ports"))?;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&port)
        .with_context(|| format!("opening the host's channel {}", port.display()))?;
    let mut out = file.try_clone()?;
    let mut input = BufReader::new(file);
    let spec: Spec = serde_json::from_slice(
        &std::fs::read(SPEC_PATH).with_context(|| format!("reading {SPEC_PATH}"))?,
    )
    .with_context(|| format!("{SPEC_PATH} is not a spec"))?;
    let env = envinfo::capture();
    let signals = proc::control_signals();
    proc::block(&signals).context("blocking signals")?;
    let runs: Vec<Run> = Plan::of(&spec).runs().to_vec();
    let pending: Vec<&Run> = runs.iter().collect();
    let opts = Options {
        db: PathBuf::from("/tmp/unused.db"),
        quiet: true,
        retry_failed: false,
        force: Path::new(FORCE_PATH).exists(),
        allow_concurrent: true,
    };
    for d in crate::launch::rundir::remove_leftovers(&crate::campaign::workdir_of(&spec)) {
        eprintln!("removed {}", d.display());
    }
    let mut exec = MachineExecutor::begin(
        &spec,
        &env,
        signals,
        &pending,
        &opts,
        "schedlab guest agent",
    )?
    .map_err(|sig| anyhow::anyhow!("stopped by {}", proc::signal_name(sig)))?;
    protocol::send(&mut out, &ToHost::Hello(Box::new(env)))?;
    let mut first = true;
    while let Some(msg) = protocol::receive::<ToGuest>(&mut input)? {
        let run = match msg {
            ToGuest::Bye => break,
            ToGuest::Run(run) => run,
        };
        if !first && let Some(sig) = exec.between_runs() {
            bail!("stopped by {}", proc::signal_name(sig));
        }
        first = false;
        let reply = match exec.execute(&run) {
            Ok(Outcome::Done(rec, trace)) => ToHost::Record(rec, trace),
            Ok(Outcome::Interrupted(sig)) => ToHost::Error(format!(
                "the guest's run was stopped by {}",
                proc::signal_name(sig)
            )),
            Ok(Outcome::Predicted(..)) => ToHost::Error("a guest does not simulate".into()),
            Err(e) => ToHost::Error(format!("{e:#}")),
        };
        protocol::send(&mut out, &reply)?;
        out.flush()?;
    }
    exec.finish()
}

/// The device of schedlab's port: the `/dev` node named like the directory
/// under `/sys/class/virtio-ports` whose `name` is [`PORT_NAME`].
fn find_port(class: &Path) -> Result<PathBuf> {
    let entries = std::fs::read_dir(class).with_context(|| {
        format!(
            "{} is missing: the guest kernel lacks CONFIG_VIRTIO_CONSOLE",
            class.display()
        )
    })?;
    for e in entries.flatten() {
        let name = std::fs::read_to_string(e.path().join("name")).unwrap_or_default();
        if name.trim() == PORT_NAME {
            return Ok(Path::new("/dev").join(e.file_name()));
        }
    }
    bail!("no virtio port named {PORT_NAME} under {}", class.display())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_port_is_found_by_its_name() {
        let dir = tempfile::tempdir().unwrap();
        for (dev, name) in [("vport0p1", "other.port"), ("vport0p2", PORT_NAME)] {
            std::fs::create_dir(dir.path().join(dev)).unwrap();
            std::fs::write(dir.path().join(dev).join("name"), format!("{name}\n")).unwrap();
        }
        assert_eq!(find_port(dir.path()).unwrap(), Path::new("/dev/vport0p2"));
        std::fs::remove_dir_all(dir.path().join("vport0p2")).unwrap();
        assert!(
            find_port(dir.path())
                .unwrap_err()
                .to_string()
                .contains(PORT_NAME)
        );
    }
}
