//! RT bandwidth knobs on the real machine: change, restore, drop, and
//! recovery after a schedlab killed with SIGKILL.
//!
//! Root only: without root each test says why it did not run and is listed
//! below the test summary, and under `SCHEDLAB_REQUIRE_ROOT=1` it fails
//! (the rule of `common::require`). Every test
//! holds `KNOBS` for its whole length, so no two ever overlap, and a
//! `Fixture` puts the original values back by hand at the end even when an
//! assertion fails. -1 is never written.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

mod common;

use schedlab::sys::knobs::{self, JOURNAL_ENV, RtGuard};

static KNOBS: Mutex<()> = Mutex::new(());

/// Set in the child that plays the schedlab killed with SIGKILL.
const VICTIM_ENV: &str = "SCHEDLAB_KNOBS_TEST_VICTIM";
const VICTIM_READY: &str = "SCHEDLAB_VICTIM_READY";
const SYSCTL: &str = "/proc/sys/kernel/sched_rt_runtime_us";

fn read(path: &Path) -> i64 {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("parsing {}: {e}", path.display()))
}

fn write(path: &Path, value: i64) -> std::io::Result<()> {
    assert_ne!(value, -1, "the tests never write -1");
    std::fs::write(path, format!("{value}\n"))
}

struct Fixture {
    _dir: tempfile::TempDir,
    journal: PathBuf,
    sysctl: PathBuf,
    group: Option<PathBuf>,
    orig_sysctl: i64,
    orig_group: Option<i64>,
    // Dropped last: the knobs are put back before the next test may start.
    _lock: MutexGuard<'static, ()>,
}

/// The fixture, or `None` where the tests cannot run (reported by the
/// shared rule: a missing privilege fails under `SCHEDLAB_REQUIRE_ROOT=1`).
/// Points `SCHEDLAB_JOURNAL` at a fresh temporary directory.
fn fixture(test: &str) -> Option<Fixture> {
    let lock = KNOBS.lock().unwrap_or_else(|e| e.into_inner());
    let euid = schedlab::sys::proc::euid();
    if !common::require(
        euid == 0,
        format!("changing RT bandwidth needs root (euid is {euid})"),
    ) {
        return None;
    }
    let cap = knobs::capability();
    if !common::require(cap.can_change(), cap.explain()) {
        return None;
    }
    let sysctl = PathBuf::from(SYSCTL);
    let orig_sysctl = read(&sysctl);
    let period = read(Path::new("/proc/sys/kernel/sched_rt_period_us"));
    if !common::skip_unless(
        orig_sysctl != -1 && orig_sysctl > 500_000 && period >= orig_sysctl,
        format!(
            "the tests lower sched_rt_runtime_us from above 500000; it is \
             {orig_sysctl} / {period}"
        ),
    ) {
        return None;
    }
    let group = cap.root_group_knob.clone();
    let orig_group = group.as_deref().map(read);
    if !common::skip_unless(
        !orig_group.is_some_and(|g| g == -1 || g <= 500_000),
        format!("root group cpu.rt_runtime_us is {orig_group:?}, not above 500000"),
    ) {
        return None;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let journal = dir.path().join("rt-journal.json");
    // SAFETY: every test of this file holds KNOBS while it runs, so no other
    // thread of this process reads or writes the environment meanwhile.
    unsafe { std::env::set_var(JOURNAL_ENV, &journal) };
    println!("{test}: originals sysctl {orig_sysctl}, root group {orig_group:?}");
    Some(Fixture {
        _dir: dir,
        journal,
        sysctl,
        group,
        orig_sysctl,
        orig_group,
        _lock: lock,
    })
}

impl Fixture {
    fn values(&self) -> (i64, Option<i64>) {
        (read(&self.sysctl), self.group.as_deref().map(read))
    }

    fn originals(&self) -> (i64, Option<i64>) {
        (self.orig_sysctl, self.orig_group)
    }

    /// Sets both knobs by hand, group first (only used to lower).
    fn lower_by_hand(&self, value: i64) {
        if let Some(g) = &self.group {
            write(g, value).expect("lowering the root group");
        }
        write(&self.sysctl, value).expect("lowering the sysctl");
    }
}

impl Drop for Fixture {
    /// The safety net: originals back by hand (sysctl first when raising,
    /// group first when lowering), whatever happened in the test.
    fn drop(&mut self) {
        let (sysctl, group) = self.values();
        if (sysctl, group) == self.originals() {
            return;
        }
        eprintln!(
            "fixture: putting back sysctl {} (is {sysctl}), group {:?} (is {group:?})",
            self.orig_sysctl, self.orig_group
        );
        let sysctl_first = self.orig_sysctl >= sysctl;
        if sysctl_first {
            let _ = write(&self.sysctl, self.orig_sysctl);
        }
        if let (Some(g), Some(v)) = (&self.group, self.orig_group) {
            let _ = write(g, v);
        }
        if !sysctl_first {
            let _ = write(&self.sysctl, self.orig_sysctl);
        }
    }
}

/// Kills and reaps the child when dropped.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn set_then_restore_puts_originals_back_and_removes_the_journal() {
    let Some(fx) = fixture("set_then_restore") else {
        return;
    };
    let mut guard = RtGuard::acquire().expect("acquire");
    assert!(guard.recovered().is_none());
    assert_eq!(guard.journal_path(), fx.journal.as_path());
    // The journal is on disk before anything is touched.
    let j = knobs::read_journal(&fx.journal).unwrap().expect("journal");
    let rt = j.rt_bandwidth().expect("the RT setting is journaled");
    assert_eq!(rt.sched_rt_runtime_us, fx.orig_sysctl);
    assert_eq!(rt.root_group_rt_runtime_us, fx.orig_group);
    assert_eq!(j.pid, std::process::id() as i32);
    assert_eq!(fx.values(), fx.originals());

    guard.set_runtime(500_000).expect("set 500000");
    assert_eq!(fx.values(), (500_000, fx.group.as_ref().map(|_| 500_000)));
    assert_eq!(knobs::read_rt_bandwidth().unwrap().runtime_us, 500_000);

    guard.restore().expect("restore");
    assert_eq!(fx.values(), fx.originals());
    assert!(!fx.journal.exists(), "journal left behind");
}

#[test]
fn drop_without_restore_puts_originals_back() {
    let Some(fx) = fixture("drop_without_restore") else {
        return;
    };
    {
        let mut guard = RtGuard::acquire().expect("acquire");
        guard.set_runtime(500_000).expect("set 500000");
        assert_eq!(fx.values().0, 500_000);
    }
    assert_eq!(fx.values(), fx.originals());
    assert!(!fx.journal.exists(), "journal left behind");

    // A panic while the guard lives (unwinding runs Drop).
    let outcome = std::panic::catch_unwind(|| {
        let mut guard = RtGuard::acquire().expect("acquire");
        guard.set_runtime(400_000).expect("set 400000");
        panic!("a campaign that fails half-way");
    });
    assert!(outcome.is_err());
    assert_eq!(fx.values(), fx.originals());
    assert!(!fx.journal.exists(), "journal left behind");
}

/// Not a test on its own: the body of the child process that
/// `killed_schedlab_is_recovered` runs (with `--ignored --exact`) and kills
/// with SIGKILL. Ignored, so that it never counts as a passed test.
#[test]
#[ignore = "helper process of killed_schedlab_is_recovered, run by it"]
fn victim_helper() {
    // Run by hand (or by --include-ignored) it has nothing to do.
    if !common::skip_unless(
        std::env::var_os(VICTIM_ENV).is_some(),
        "a helper process that killed_schedlab_is_recovered runs, not a test",
    ) {
        return;
    }
    let mut guard = RtGuard::acquire().expect("victim: acquire");
    guard.set_runtime(300_000).expect("victim: set 300000");
    println!("{VICTIM_READY} {}", std::process::id());
    // Killed long before this ends; if not, the guard restores on drop.
    std::thread::sleep(Duration::from_secs(60));
    drop(guard);
}

#[test]
fn killed_schedlab_is_recovered() {
    let Some(fx) = fixture("killed_schedlab_is_recovered") else {
        return;
    };
    let exe = std::env::current_exe().expect("test binary");
    let child = Command::new(exe)
        .args([
            "victim_helper",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(VICTIM_ENV, "1")
        .env(JOURNAL_ENV, &fx.journal)
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawning the victim");
    let mut victim = KillOnDrop(child);
    let pid = victim.0.id() as i32;
    let stdout = victim.0.stdout.take().unwrap();
    let ready = BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .any(|l| l.contains(VICTIM_READY));
    assert!(ready, "the victim did not get ready");
    assert_eq!(fx.values(), (300_000, fx.group.as_ref().map(|_| 300_000)));

    // While it lives, nobody else may change the settings or "recover" them.
    let err = format!("{:#}", RtGuard::acquire().unwrap_err());
    assert!(err.contains(&format!("schedlab pid {pid}")), "{err}");
    assert!(knobs::recover_leftover().unwrap().is_none());
    assert_eq!(fx.values().0, 300_000);

    // kill -9: no Drop runs, the journal stays.
    drop(victim);
    assert_eq!(fx.values().0, 300_000);
    let j = knobs::read_journal(&fx.journal).unwrap().expect("journal");
    assert_eq!(j.pid, pid);

    let warning = knobs::recover_leftover()
        .expect("recover")
        .expect("a warning");
    println!("warning: {warning}");
    assert!(
        warning.contains(&format!(
            "restored sched_rt_runtime_us {} (was 300000)",
            fx.orig_sysctl
        )),
        "{warning}"
    );
    if let Some(g) = fx.orig_group {
        assert!(
            warning.contains(&format!("cpu.rt_runtime_us {g} (was 300000)")),
            "{warning}"
        );
    }
    assert!(
        warning.contains(&format!(
            "left by schedlab pid {pid} that did not exit cleanly"
        )),
        "{warning}"
    );
    assert_eq!(fx.values(), fx.originals());
    assert!(!fx.journal.exists());
    assert!(knobs::recover_leftover().unwrap().is_none());
}

#[test]
fn hand_written_leftover_is_recovered() {
    let Some(fx) = fixture("hand_written_leftover") else {
        return;
    };
    let j = knobs::Journal {
        format: knobs::JOURNAL_FORMAT,
        pid: i32::MAX, // above pid_max: certainly dead
        pid_start_ticks: None,
        boot_id: None,
        created_unix_s: 0,
        settings: vec![knobs::Setting::RtBandwidth(knobs::RtOriginals {
            sched_rt_runtime_us: fx.orig_sysctl,
            sched_rt_period_us: read(Path::new("/proc/sys/kernel/sched_rt_period_us")),
            root_group_rt_runtime_us: fx.orig_group,
            root_group_rt_period_us: fx
                .group
                .as_ref()
                .map(|g| read(&g.with_file_name("cpu.rt_period_us"))),
        })],
    };
    std::fs::write(&fx.journal, j.to_json()).unwrap();
    fx.lower_by_hand(300_000);
    let warning = knobs::recover_leftover().unwrap().expect("a warning");
    assert!(
        warning.contains(&format!(
            "restored sched_rt_runtime_us {} (was 300000)",
            fx.orig_sysctl
        )),
        "{warning}"
    );
    assert!(
        warning.contains("left by schedlab pid 2147483647"),
        "{warning}"
    );
    assert_eq!(fx.values(), fx.originals());
    assert!(!fx.journal.exists());
}

/// A journal in format 1, as a schedlab from before the journal was
/// generic leaves it when killed with SIGKILL (`tests/fixtures/
/// rt-journal-v1.json`, with this machine's originals put in), is restored
/// by this one.
#[test]
fn leftover_of_an_older_schedlab_is_recovered() {
    let Some(fx) = fixture("leftover_of_an_older_schedlab") else {
        return;
    };
    let fixture = include_str!("fixtures/rt-journal-v1.json");
    let mut v: serde_json::Value = serde_json::from_str(fixture).unwrap();
    assert_eq!(v["format"], 1);
    assert_eq!(v["pid"], i32::MAX); // above pid_max: certainly dead
    v["sched_rt_runtime_us"] = fx.orig_sysctl.into();
    v["sched_rt_period_us"] = read(Path::new("/proc/sys/kernel/sched_rt_period_us")).into();
    v["root_group_rt_runtime_us"] = fx.orig_group.into();
    v["root_group_rt_period_us"] = fx
        .group
        .as_ref()
        .map(|g| read(&g.with_file_name("cpu.rt_period_us")))
        .into();
    std::fs::write(
        &fx.journal,
        serde_json::to_string_pretty(&v).unwrap() + "\n",
    )
    .unwrap();
    fx.lower_by_hand(300_000);
    let warning = knobs::recover_leftover().unwrap().expect("a warning");
    assert!(
        warning.contains(&format!(
            "restored sched_rt_runtime_us {} (was 300000)",
            fx.orig_sysctl
        )),
        "{warning}"
    );
    if let Some(g) = fx.orig_group {
        assert!(
            warning.contains(&format!("cpu.rt_runtime_us {g} (was 300000)")),
            "{warning}"
        );
    }
    assert!(
        warning.contains("left by schedlab pid 2147483647"),
        "{warning}"
    );
    assert_eq!(fx.values(), fx.originals());
    assert!(!fx.journal.exists());
}

#[test]
fn refusals_are_explained_and_change_nothing() {
    let Some(fx) = fixture("refusals") else {
        return;
    };
    let mut guard = RtGuard::acquire().expect("acquire");
    let period = guard.original().period_us;

    let e = format!("{:#}", guard.set_runtime(period + 1).unwrap_err());
    assert!(
        e.contains(&(period + 1).to_string()) && e.contains(&period.to_string()),
        "{e}"
    );
    let e = format!("{:#}", guard.set_runtime(-2).unwrap_err());
    assert!(e.contains("-2"), "{e}");
    if fx.group.is_some() {
        let e = format!("{:#}", guard.set_runtime(0).unwrap_err());
        assert!(e.contains("may not have an RT runtime of 0"), "{e}");
    }
    assert_eq!(fx.values(), fx.originals());

    // 3%: below the fair server's 5% per CPU on Linux 6.12+, so the sysctl
    // write is refused with EBUSY after the group was lowered, and the group
    // is put back. On kernels without the fair server it is accepted.
    match guard.set_runtime(30_000) {
        Ok(()) => {
            println!("refusals: 30000 accepted (no fair server reservation)");
            assert_eq!(fx.values().0, 30_000);
        }
        Err(e) => {
            let e = format!("{e:#}");
            println!("refusals: {e}");
            assert!(e.contains("EBUSY") && e.contains("30000"), "{e}");
            assert_eq!(fx.values(), fx.originals());
        }
    }
    guard.set_runtime(500_000).expect("set 500000");
    guard.restore().expect("restore");
    assert_eq!(fx.values(), fx.originals());
}

/// Removes the test's child cgroup (its RT time released first).
struct ChildCgroup(PathBuf);

impl Drop for ChildCgroup {
    fn drop(&mut self) {
        let _ = std::fs::write(self.0.join("cpu.rt_runtime_us"), "0\n");
        if let Err(e) = std::fs::remove_dir(&self.0) {
            eprintln!("could not remove {}: {e}", self.0.display());
        }
    }
}

#[test]
fn child_cgroup_reservation_blocks_lowering_with_an_explanation() {
    let Some(fx) = fixture("child_cgroup") else {
        return;
    };
    if !common::skip_unless(
        fx.group.is_some(),
        "no RT group scheduling (no root cgroup cpu.rt_runtime_us)",
    ) {
        return;
    }
    let group = fx.group.clone().unwrap();
    let dir = group.with_file_name(format!("schedlab-knobs-test-{}", std::process::id()));
    let created = std::fs::create_dir(&dir);
    if !common::require(
        created.is_ok(),
        format!("cannot create {}: {created:?}", dir.display()),
    ) {
        return;
    }
    let child = ChildCgroup(dir);
    let reserved = write(&child.0.join("cpu.rt_runtime_us"), 600_000);
    if !common::require(
        reserved.is_ok(),
        format!("cannot reserve RT time in the child cgroup: {reserved:?}"),
    ) {
        return;
    }
    let cap = knobs::capability();
    assert!(
        cap.rt_child_groups.iter().any(|c| c.path == child.0),
        "{cap:?}"
    );
    assert!(cap.explain().contains("600000/"), "{}", cap.explain());

    let mut guard = RtGuard::acquire().expect("acquire");
    let e = format!("{:#}", guard.set_runtime(500_000).unwrap_err());
    println!("child_cgroup: {e}");
    assert!(e.contains(&format!("{} 600000/", child.0.display())), "{e}");
    assert_eq!(fx.values(), fx.originals());
    guard.set_runtime(700_000).expect("above the child's share");
    guard.restore().expect("restore");
    drop(child);
    assert_eq!(fx.values(), fx.originals());
}
