//! The `command` workload as a [`Kind`]: how it stops, scales, prepares
//! (the run directory handed to `user`, then `setup`), what `plan` checks
//! on the machine (its programs), its cost estimate and, worker side, the
//! exec of the program.

use std::path::Path;
use std::time::Instant;

use super::params::{self, CommandParams};
use super::{exec, setup};
use crate::sys::cgroup::TreeGroups;
use crate::workload::kind::{Entry, Kind, Lacking, scale_amount};
use crate::workload::modelled::ModelTask;
use crate::workload::{Rates, Stop, WorkContext, WorkOutput, Workload};

/// CPU seconds assumed for one process of a program that runs to its own
/// exit (nothing tells how long a program takes before it ran): plan's
/// estimate counts 10 s per process and run. A `duration_s` is its cost.
pub const DEFAULT_ESTIMATE_S: f64 = 10.0;

impl Kind for CommandParams {
    fn name(&self) -> &'static str {
        "command"
    }

    /// One run of the program per process.
    fn work_unit(&self) -> &'static str {
        "runs"
    }

    /// `duration_s`, or one run of the program to its own exit.
    fn stop(&self) -> Stop {
        match self.duration_ns {
            Some(d) => Stop::DurationNs(d),
            None => Stop::Work(1),
        }
    }

    fn set_stop(&mut self, stop: Stop) {
        self.duration_ns = match stop {
            Stop::DurationNs(d) => Some(d),
            Stop::Work(_) => None,
        };
    }

    /// A duration scales; a program's own work cannot be scaled from
    /// outside, so a run to its exit stays one run.
    fn scaled(&self, f: f64) -> Workload {
        Workload::Command(CommandParams {
            duration_ns: self.duration_ns.map(|d| scale_amount(d, f)),
            ..self.clone()
        })
    }

    /// The default `cwd` is the run directory, made and removed as for
    /// the file workloads.
    fn needs_dir(&self) -> bool {
        true
    }

    fn disk_key(&self) -> &'static str {
        "argv"
    }

    /// [`CommandParams::prepare_in`] without a cgroup for the setup.
    fn prepare(&self, dir: &Path, until: Option<Instant>) -> anyhow::Result<()> {
        self.prepare_in(dir, until, None)
    }

    /// cyclictest's histogram (`parser = "cyclictest"` with `-h`), the
    /// only parser that gives one, is its wake-up latency.
    fn primary_latency(&self) -> Option<&'static str> {
        match self.parser.as_ref().map(|p| p.tool) {
            Some(super::parsers::Tool::Cyclictest) => Some("wakeup"),
            _ => None,
        }
    }

    /// Worker side: becomes the program; returns only when that failed.
    fn run(&self, ctx: &WorkContext) -> anyhow::Result<WorkOutput> {
        Err(exec::become_program(self, ctx))
    }

    /// `duration_s`, else [`DEFAULT_ESTIMATE_S`].
    fn estimate_cpu_s(&self, _rates: &Rates) -> f64 {
        self.duration_ns
            .map_or(DEFAULT_ESTIMATE_S, |d| d as f64 / 1e9)
    }

    /// The program's replay when it carries one (`replay`); else another
    /// program's CPU demand and blocking are unknown to the model.
    fn model(&self) -> ModelTask<'_> {
        match &self.replay {
            Some(r) => ModelTask::Replay(r),
            None => ModelTask::Unmodelled(
                "the model cannot represent another program (kind = \"command\"): its CPU \
                 demand and blocking are unknown to it (a `replay` table from schedlab \
                 synthesize lets it predict the program)"
                    .into(),
            ),
        }
    }

    /// The worker runs the program: its replay stays behind.
    fn lean(&self) -> Option<Workload> {
        self.replay.as_ref().map(|_| {
            Workload::Command(CommandParams {
                replay: None,
                ..self.clone()
            })
        })
    }

    /// A program stopped at release + `duration_s` runs that long.
    fn min_wall_s(&self) -> f64 {
        self.duration_ns.map_or(0.0, |d| d as f64 / 1e9)
    }

    /// Nothing says a program runs on the CPU until done.
    fn cpu_bound(&self) -> bool {
        false
    }

    /// Its programs (`argv`, `setup`) must be found as the run would look
    /// them up.
    fn check_machine(&self) -> Result<(), Lacking> {
        self.check_programs().map_err(|(key, e)| Lacking {
            key,
            message: e.to_string(),
        })
    }
}

impl CommandParams {
    /// Hands the run directory to `user` (when the program runs in it as
    /// another user, it must be able to write there), then runs `setup`,
    /// inside a cgroup of `trees` when given (see `setup::run`).
    pub fn prepare_in(
        &self,
        dir: &Path,
        until: Option<Instant>,
        trees: Option<&TreeGroups>,
    ) -> anyhow::Result<()> {
        if let (Some(name), None) = (&self.user, &self.cwd) {
            let ids = crate::sys::user::lookup(name)?
                .ok_or_else(|| anyhow::anyhow!("no user \"{name}\" on this machine"))?;
            std::os::unix::fs::chown(dir, Some(ids.uid), Some(ids.gid)).map_err(|e| {
                anyhow::anyhow!("handing run directory {} to {name}: {e}", dir.display())
            })?;
        }
        let cwd = self.cwd.as_deref().unwrap_or(dir);
        setup::run(self, cwd, until, trees)
    }
}

/// The command workload's registration.
pub const ENTRY: Entry = Entry {
    name: "command",
    parse: |k| params::parse(k).map(Workload::Command),
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::keys::Keys;

    fn workload(text: &str) -> Workload {
        let t: toml::Table = text.parse().unwrap();
        (ENTRY.parse)(&Keys::new("w", "command", &t)).unwrap()
    }

    const RATES: Rates = Rates {
        pi_iter_per_s: 1.0,
        hash_per_s: 1.0,
        flops_per_s: 1.0,
        copy_bytes_per_s: 1.0,
        wake_round_trip_s: 1.0,
    };

    #[test]
    fn stop_scale_and_estimate() {
        let w = workload("argv = [\"true\"]");
        assert_eq!(
            (w.kind(), w.work_unit(), w.needs_dir(), w.cpu_bound()),
            ("command", "runs", true, false)
        );
        assert_eq!(w.stop(), Stop::Work(1));
        assert_eq!(w.scaled(0.1), w);
        assert_eq!(w.estimate_cpu_s(&RATES), DEFAULT_ESTIMATE_S);
        assert_eq!(w.min_wall_s(), 0.0);
        let d = workload("argv = [\"true\"]\nduration_s = 4");
        assert_eq!(d.stop(), Stop::DurationNs(4_000_000_000));
        assert_eq!(d.scaled(0.25).stop(), Stop::DurationNs(1_000_000_000));
        assert_eq!(d.estimate_cpu_s(&RATES), 4.0);
        assert_eq!(d.min_wall_s(), 4.0);
        assert_eq!(d.with_stop(Stop::Work(1)), w);
        assert_eq!(w.with_stop(Stop::DurationNs(4_000_000_000)), d);
        // Its serialised tag is its kind, as every workload's.
        let json = serde_json::to_value(&d).unwrap();
        assert_eq!(json["kind"], "command");
        assert_eq!(serde_json::from_value::<Workload>(json).unwrap(), d);
    }

    #[test]
    fn the_machine_check_names_the_missing_program() {
        let w = workload("argv = [\"schedlab-no-such-bench\", \"-x\"]");
        let l = w.check_machine().unwrap_err();
        assert_eq!(l.key, "argv");
        assert!(
            l.message
                .contains("\"schedlab-no-such-bench\" is not in PATH"),
            "{}",
            l.message
        );
        workload("argv = [\"sh\"]").check_machine().unwrap();
    }

    #[test]
    fn only_cyclictest_has_a_primary_latency() {
        let w = workload("argv = [\"cyclictest\"]\nparser = \"cyclictest\"");
        assert_eq!(w.primary_latency(), Some("wakeup"));
        let w = workload("argv = [\"schbench\"]\nparser = \"schbench\"");
        assert_eq!(w.primary_latency(), None);
        assert_eq!(workload("argv = [\"true\"]").primary_latency(), None);
    }

    #[test]
    fn prepare_runs_setup_in_the_run_directory() {
        let dir = tempfile::tempdir().unwrap();
        let w = workload("argv = [\"true\"]\nsetup = [\"touch\", \"ready\"]");
        w.prepare(dir.path(), None).unwrap();
        assert!(dir.path().join("ready").exists());
    }

    #[test]
    fn prepare_hands_the_run_directory_to_the_user() {
        if !crate::testing::require(
            crate::sys::proc::euid() == 0,
            "handing a directory to another user needs root",
        ) {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let w =
            workload("argv = [\"true\"]\nuser = \"nobody\"\nsetup = [\"touch\", \"by-nobody\"]");
        w.prepare(dir.path(), None).unwrap();
        let nobody = crate::sys::user::lookup("nobody").unwrap().unwrap();
        use std::os::unix::fs::MetadataExt;
        assert_eq!(std::fs::metadata(dir.path()).unwrap().uid(), nobody.uid);
        // The setup ran as nobody: its file is nobody's.
        let made = std::fs::metadata(dir.path().join("by-nobody")).unwrap();
        assert_eq!((made.uid(), made.gid()), (nobody.uid, nobody.gid));
    }
}
