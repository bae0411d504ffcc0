//! The one rule for tests that cannot run everywhere, shared by the unit
//! tests and by `tests/`: a test that lacks what it needs must not be read
//! as a pass.
//!
//! Each such test asks first, and returns at once when told no:
//!
//! - [`require`]: a privilege (root, CAP_SYS_NICE, an RT or DEADLINE policy,
//!   write access to the RT knobs, mounts). With `SCHEDLAB_REQUIRE_ROOT=1`
//!   (CI sets it: it runs as root with every policy) a missing one fails
//!   the test instead.
//! - [`require_tool`]: a program the test drives (Chromium, fio). Fails the
//!   test when `SCHEDLAB_REQUIRE_ROOT=1` or `CI` is set.
//! - [`skip_unless`]: a fact of this machine that no privilege changes (no
//!   RT group scheduling, RT throttling disabled, a checkout that user
//!   `nobody` cannot reach). Never fails, but is reported like the others.
//!
//! A test that returns early is still shown as `ok` by the test harness
//! (stable Rust cannot mark a test ignored while it runs), so every skip is
//! reported twice, both on the real standard error, which the harness does
//! not capture (no `--nocapture` needed): a `SKIPPED` line when it happens,
//! and, when the test program exits, below its `test result:` line, the
//! count and list of the tests that reported `ok` without running.
//!
//! It also holds the synthetic fixtures the tests and `bench report` build
//! campaigns from ([`synth`]: a spec's runs measured by a simple model;
//! [`planted`]: a baseline and candidate with known effects for `compare`),
//! and the house rules checked over `src/` by unit tests: no function over
//! 150 lines, no file over 1,000 lines of code, no import against the
//! layers (`function_length`, `file_length`, `layers`).

#[cfg(test)]
mod file_length;
#[cfg(test)]
mod function_length;
#[cfg(test)]
mod layers;
pub mod planted;
pub mod synth;

use std::fmt::Display;
use std::io::Write;
use std::sync::{Mutex, Once};

/// Set to 1 where every privileged test must run (CI).
pub const REQUIRE_ROOT_ENV: &str = "SCHEDLAB_REQUIRE_ROOT";

/// (test, why) of every test of this program that did not run.
static SKIPPED: Mutex<Vec<(String, String)>> = Mutex::new(Vec::new());
static SUMMARY: Once = Once::new();

/// Whether `SCHEDLAB_REQUIRE_ROOT=1`.
pub fn root_required() -> bool {
    std::env::var_os(REQUIRE_ROOT_ENV).is_some_and(|v| v == "1")
}

/// Whether a test that needs a privilege may go on: true when `have`.
/// Otherwise panics with `why` under `SCHEDLAB_REQUIRE_ROOT=1`, else reports
/// the skip (see the module documentation) and returns false.
#[must_use = "return from the test when this is false"]
#[track_caller]
pub fn require(have: bool, why: impl Display) -> bool {
    if have {
        return true;
    }
    if root_required() {
        panic!(
            "{} cannot run here and {REQUIRE_ROOT_ENV}=1 forbids skipping it: {why}",
            test_name()
        );
    }
    skipped(why);
    false
}

/// Whether a test that drives an outside program may go on: like
/// [`require`], and fails the test when `CI` is set too.
#[must_use = "return from the test when this is false"]
#[track_caller]
pub fn require_tool(have: bool, why: impl Display) -> bool {
    if have {
        return true;
    }
    if root_required() || std::env::var_os("CI").is_some() {
        panic!(
            "{} cannot run here and CI or {REQUIRE_ROOT_ENV}=1 forbids skipping it: {why}",
            test_name()
        );
    }
    skipped(why);
    false
}

/// Whether a test that depends on a fact of this machine no privilege
/// changes may go on; reports the skip when not, but never fails.
#[must_use = "return from the test when this is false"]
pub fn skip_unless(have: bool, why: impl Display) -> bool {
    if !have {
        skipped(why);
    }
    have
}

/// The running test: the harness names each test's thread after it.
fn test_name() -> String {
    match std::thread::current().name() {
        Some(n) if n != "main" => n.to_string(),
        _ => "this test".to_string(),
    }
}

fn skipped(why: impl Display) {
    let test = test_name();
    let why = why.to_string();
    // Straight to the file descriptor: `eprintln!` would be captured and
    // shown only with --nocapture or when the test fails.
    let _ = std::io::stderr()
        .write_all(format!("SKIPPED {test}: did not run, yet reported ok: {why}\n").as_bytes());
    SKIPPED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((test, why));
    SUMMARY.call_once(|| {
        let _ = crate::sys::proc::at_exit(summary);
    });
}

/// Below the harness's own summary: what reported ok without running.
extern "C" fn summary() {
    let skipped = SKIPPED.lock().unwrap_or_else(|e| e.into_inner());
    if skipped.is_empty() {
        return;
    }
    let mut text = format!(
        "\nNOT RUN: {} of the tests counted as passed above did not run (they need what this \
         machine or user lacks; {REQUIRE_ROOT_ENV}=1 turns a missing privilege or program \
         into a failure):\n",
        skipped.len()
    );
    for (test, why) in skipped.iter() {
        text.push_str(&format!("    {test}: {why}\n"));
    }
    text.push('\n');
    let _ = std::io::stderr().write_all(text.as_bytes());
}
