//! Test support: plain files standing in for the knobs, and a sample
//! journal, for the journal, recovery and guard machinery without root.

use std::path::PathBuf;

use super::access::{GROUP_PERIOD, GROUP_RUNTIME, Knobs};
use super::journal::{JOURNAL_FORMAT, Journal};
use super::plan::Knob;
use super::setting::{RtOriginals, Setting};

pub(super) fn sample_journal() -> Journal {
    Journal {
        format: JOURNAL_FORMAT,
        pid: 4242,
        pid_start_ticks: Some(123_456),
        boot_id: Some("8c2d0f6e-0000-4000-8000-000000000000".into()),
        created_unix_s: 1_700_000_000,
        settings: vec![Setting::RtBandwidth(RtOriginals {
            sched_rt_runtime_us: 950_000,
            sched_rt_period_us: 1_000_000,
            root_group_rt_runtime_us: Some(950_000),
            root_group_rt_period_us: Some(1_000_000),
        })],
    }
}

/// Plain files standing in for the knobs, for the journal and ordering
/// machinery without root.
pub(super) struct Fake {
    pub(super) dir: tempfile::TempDir,
    pub(super) knobs: Knobs,
}

pub(super) fn fake(group: Option<i64>) -> Fake {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("runtime"), "950000\n").unwrap();
    std::fs::write(d.join("period"), "1000000\n").unwrap();
    let group_dir = group.map(|g| {
        let gd = d.join("cpu");
        std::fs::create_dir(&gd).unwrap();
        std::fs::write(gd.join(GROUP_RUNTIME), format!("{g}\n")).unwrap();
        std::fs::write(gd.join(GROUP_PERIOD), "1000000\n").unwrap();
        gd
    });
    let knobs = Knobs {
        sysctl_runtime: d.join("runtime"),
        sysctl_period: d.join("period"),
        group_dir,
    };
    Fake { dir, knobs }
}

impl Fake {
    pub(super) fn journal(&self) -> PathBuf {
        self.dir.path().join("state/rt-journal.json")
    }
    pub(super) fn values(&self) -> (i64, Option<i64>) {
        (
            self.knobs.read(Knob::Sysctl).unwrap(),
            self.knobs.read_group().unwrap().map(|g| g.runtime_us),
        )
    }
}
