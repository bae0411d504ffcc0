//! Helpers shared by the end-to-end tests (`mod common;` in each file).
//!
//! Every test that needs a privilege, a program or a machine feature asks
//! through `schedlab::testing` (re-exported here) and returns when told
//! no: a missing privilege fails the test under `SCHEDLAB_REQUIRE_ROOT=1`
//! (CI), and every skip is reported on the real standard error and listed
//! below the test summary, so a skipped test is never read as a pass.

#![allow(dead_code, unused_imports)] // each test file uses some of these

use std::path::Path;
use std::process::{Command, Output};

/// The schedlab binary under test.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_schedlab")
}

/// Run schedlab in `dir` with plain (CI) progress and no database from the
/// environment.
pub fn schedlab(args: &[&str], dir: &Path) -> Output {
    Command::new(bin())
        .args(args)
        .current_dir(dir)
        .env("CI", "1")
        .env_remove("SCHEDLAB_DB")
        .output()
        .expect("run schedlab")
}

/// Run schedlab in `dir` with a journal and a temporary directory of its
/// own there (so nothing it records mixes with the machine's or another
/// test's), no database from the environment, and no standard input.
pub fn schedlab_isolated(args: &[&str], dir: &Path) -> Output {
    Command::new(bin())
        .args(args)
        .current_dir(dir)
        .env("SCHEDLAB_JOURNAL", dir.join("journal.json"))
        .env("TMPDIR", dir)
        .env_remove("SCHEDLAB_DB")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run schedlab")
}

/// Runs schedlab in `dir` with the machine's default journals (their
/// locks keep two schedlabs from tracing at once), `TMPDIR` in `dir`.
pub fn schedlab_default_journals(args: &[&str], dir: &Path) -> Output {
    Command::new(bin())
        .args(args)
        .current_dir(dir)
        .env("CI", "1")
        .env("TMPDIR", dir)
        .env_remove("SCHEDLAB_DB")
        .env_remove("SCHEDLAB_JOURNAL")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run schedlab")
}

/// Tests that measure real programs run one at a time within their test
/// binary, so that none disturbs another's figures.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether this process is root, as a `command` workload needs (a cgroup
/// per worker): the shared rule of [`require`].
#[must_use = "return from the test when this is false"]
#[track_caller]
pub fn root_for_commands() -> bool {
    require(
        schedlab::sys::proc::euid() == 0,
        "command workloads need root (a cgroup per worker)",
    )
}

/// Standard output then standard error, for messages.
pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

pub use schedlab::testing::{require, require_tool, skip_unless};

/// Where `setpriv` is, if anywhere.
pub fn setpriv() -> Option<&'static str> {
    ["/usr/bin/setpriv", "/bin/setpriv"]
        .into_iter()
        .find(|p| Path::new(p).exists())
}

/// Whether this process may use SCHED_FIFO (RT policies need root or
/// CAP_SYS_NICE): the shared rule of [`require`].
#[must_use = "return from the test when this is false"]
#[track_caller]
pub fn may_use_rt() -> bool {
    let privs = schedlab::sys::probe::probe();
    let fifo = privs.policy("fifo").expect("fifo is probed");
    require(
        fifo.allowed,
        format!(
            "SCHED_FIFO is not permitted for this user (needs root or CAP_SYS_NICE): {}",
            fifo.detail
        ),
    )
}

/// Whether this process is root and has `setpriv` to drop to user
/// `nobody`: the shared rule of [`require`].
#[must_use = "return from the test when this is false"]
#[track_caller]
pub fn root_with_setpriv() -> bool {
    let euid = schedlab::sys::proc::euid();
    require(
        euid == 0 && setpriv().is_some(),
        format!(
            "needs root (euid is {euid}) and setpriv (util-linux) to run schedlab as user nobody"
        ),
    )
}

/// Whether user `nobody` may execute `bin` (a checkout under a private
/// directory prevents it): a fact of this checkout, see [`skip_unless`].
/// Call after [`root_with_setpriv`].
#[must_use = "return from the test when this is false"]
pub fn nobody_can_run(bin: &str) -> bool {
    let ok = setpriv().is_some_and(|setpriv| {
        Command::new(setpriv)
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", bin])
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    });
    skip_unless(
        ok,
        format!("user nobody cannot execute {bin} (its directories are private)"),
    )
}

/// Where Chromium is, or None where the test may not run (the shared rule
/// of `require_tool`: fails when CI or `SCHEDLAB_REQUIRE_ROOT=1` is
/// set, else says why and is listed below the test summary).
pub fn chromium() -> Option<std::path::PathBuf> {
    let p = std::path::PathBuf::from("/usr/bin/chromium");
    require_tool(
        p.exists(),
        "/usr/bin/chromium is missing (apt-get install -y chromium)",
    )
    .then_some(p)
}

/// A headless screenshot of `url` in a window of `size` ("1280,2000"),
/// written to `png_path` and returned (Chromium must succeed).
pub fn screenshot(chrome: &Path, url: &str, size: &str, png_path: &Path) -> Vec<u8> {
    let profile = tempfile::tempdir().unwrap();
    let shot = headless(chrome, profile.path())
        .arg(format!("--screenshot={}", png_path.display()))
        .arg(format!("--window-size={size}"))
        .arg(url)
        .output()
        .expect("run chromium");
    assert!(shot.status.success(), "{}", text(&shot));
    std::fs::read(png_path).unwrap()
}

/// No line of Chromium's log (its stderr) reports a console error or an
/// uncaught exception of the page.
pub fn assert_no_console_errors(stderr: &[u8]) {
    let log = String::from_utf8_lossy(stderr);
    for bad in ["CONSOLE", "Uncaught", "ERROR:CONSOLE"] {
        let lines: Vec<&str> = log.lines().filter(|l| l.contains(bad)).collect();
        assert!(lines.is_empty(), "console errors: {lines:?}");
    }
}

/// The DOM Chromium builds from `url`, with no console error or uncaught
/// exception in its log.
pub fn dumped_dom(chrome: &Path, url: &str) -> String {
    let profile = tempfile::tempdir().unwrap();
    let dom = headless(chrome, profile.path())
        .args(["--enable-logging=stderr", "--v=0", "--dump-dom"])
        .arg(url)
        .output()
        .expect("run chromium");
    assert!(dom.status.success(), "{}", text(&dom));
    assert_no_console_errors(&dom.stderr);
    String::from_utf8_lossy(&dom.stdout).into_owned()
}

/// Base Chromium command line: headless, no network, no profile reuse.
pub fn headless(chrome: &Path, profile: &Path) -> Command {
    let mut c = Command::new(chrome);
    c.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
    ])
    .arg(format!("--user-data-dir={}", profile.display()));
    c
}
