//! Restoring what a schedlab that died (kill -9, a crash, a power loss)
//! left changed: every journal whose holder is gone is restored and
//! removed; one from an earlier boot is removed without writing anything.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::access::Knobs;
use super::journal::{
    Holder, Journal, holder_state, journal_candidates, read_journal, remove_journal,
    trace_journal_candidates, try_lock,
};
use super::procs::{boot_id, pid_alive, self_pid};

/// Restores and removes the leftover journal `j` at `path` (lock held).
pub(super) fn recover_locked(knobs: &Knobs, path: &Path, j: &Journal) -> Result<String> {
    if holder_state(j, boot_id().as_deref(), self_pid()) == Holder::EarlierBoot {
        remove_journal(path)?;
        return Ok(format!(
            "removed {} left by schedlab pid {} in an earlier boot; kernel settings do not \
             survive a reboot, so nothing was written ({}; the journal recorded {})",
            path.display(),
            j.pid,
            j.current(knobs),
            j.originals()
        ));
    }
    let restored = j.restore(knobs).with_context(|| {
        format!(
            "{} was left by schedlab pid {} that did not exit cleanly and could not be \
             restored; the journal is kept",
            path.display(),
            j.pid
        )
    })?;
    remove_journal(path)?;
    let what = if restored.is_empty() {
        format!("found {} already in place", j.originals())
    } else {
        format!("restored {}", restored.join(", "))
    };
    Ok(format!(
        "{what} left by schedlab pid {} that did not exit cleanly (journal {})",
        j.pid,
        path.display()
    ))
}

/// Restores and removes a journal at `path` left by a schedlab that is gone;
/// `None` when there is none or its holder is alive.
pub(super) fn recover_one(knobs: &Knobs, path: &Path) -> Result<Option<String>> {
    let Some(_lock) = try_lock(path)? else {
        return Ok(None);
    };
    let Some(j) = read_journal(path)? else {
        return Ok(None);
    };
    if holder_state(&j, boot_id().as_deref(), self_pid()) == Holder::Alive {
        return Ok(None);
    }
    recover_locked(knobs, path, &j).map(Some)
}

/// For every start of schedlab: if a journal was left by a schedlab that
/// died (kill -9, crash, power loss), put back the values it records (and
/// kill and remove the worker cgroups it records, `sys::cgroup`),
/// remove it, and return a warning for the caller to print. `Ok(None)` when
/// there is nothing to do (no journal, or its schedlab is still running).
pub fn recover_leftover() -> Result<Option<String>> {
    let all: Vec<PathBuf> = journal_candidates()
        .into_iter()
        .chain(trace_journal_candidates())
        .collect();
    let mut notes: Vec<String> = all
        .iter()
        .flat_map(|p| remove_stale_temporaries(p))
        .collect();
    let candidates: Vec<PathBuf> = all.into_iter().filter(|p| p.exists()).collect();
    let knobs = Knobs::system();
    for path in candidates {
        notes.extend(recover_one(&knobs, &path)?);
    }
    // The workers' cgroups of a schedlab that died (their own journals,
    // one per session): processes left in them are killed.
    notes.extend(crate::sys::cgroup::recover_leftover()?);
    Ok((!notes.is_empty()).then(|| notes.join("\n")))
}

/// Removes the temporary files of journal `path` (`.NAME.PID.tmp`, see
/// `write_journal_exclusive`) whose writer is gone: a schedlab killed after
/// writing one and before renaming it into place had changed nothing yet
/// (settings change only once the journal is in place). A file whose
/// writer is alive, or that is not named so, is left alone. Returns a note
/// per file removed.
fn remove_stale_temporaries(path: &Path) -> Vec<String> {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Vec::new();
    };
    let prefix = format!(".{}.", name.to_string_lossy());
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut notes = Vec::new();
    for entry in entries.flatten() {
        let file = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = file
            .strip_prefix(&prefix)
            .and_then(|rest| rest.strip_suffix(".tmp"))
            .and_then(|pid| pid.parse::<i32>().ok())
        else {
            continue;
        };
        // The writer as the file names it, and as its content (when whole)
        // identifies it: pid, start time, boot.
        let content = std::fs::read_to_string(entry.path())
            .ok()
            .and_then(|t| Journal::from_json(&t).ok());
        let gone = match &content {
            Some(j) if j.pid == pid => {
                holder_state(j, boot_id().as_deref(), i32::MIN) != Holder::Alive
            }
            Some(_) => false,
            None => pid != self_pid() && !pid_alive(pid, None),
        };
        if gone && std::fs::remove_file(entry.path()).is_ok() {
            notes.push(format!(
                "removed {}, a journal being written by schedlab pid {pid} when it died (nothing \
                 had been changed yet)",
                entry.path().display()
            ));
        }
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::knobs::fake::{fake, sample_journal};
    use crate::sys::knobs::guard::RtGuard;
    use crate::sys::knobs::plan::Knob;

    #[test]
    fn stale_temporary_journals_of_dead_writers_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rt-journal.json");
        let tmp = |pid: i32| dir.path().join(format!(".rt-journal.json.{pid}.tmp"));
        // A dead writer (no such pid), whole and cut short.
        let mut dead = sample_journal();
        dead.pid = i32::MAX;
        dead.boot_id = boot_id();
        std::fs::write(tmp(i32::MAX), dead.to_json()).unwrap();
        std::fs::write(tmp(i32::MAX - 1), "{\"format\": 1, \"pi").unwrap();
        // A live writer: a child of this test, with its real start time.
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let live_pid = child.id() as i32;
        let mut live = sample_journal();
        live.pid = live_pid;
        live.pid_start_ticks = super::super::procs::process_start_ticks(live_pid);
        live.boot_id = boot_id();
        std::fs::write(tmp(live_pid), live.to_json()).unwrap();
        // Not ours by name.
        std::fs::write(dir.path().join(".other.json.1.tmp"), "x").unwrap();
        let notes = remove_stale_temporaries(&path);
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(
            notes[0].contains("nothing had been changed yet"),
            "{notes:?}"
        );
        assert!(!tmp(i32::MAX).exists() && !tmp(i32::MAX - 1).exists());
        assert!(tmp(live_pid).exists());
        assert!(dir.path().join(".other.json.1.tmp").exists());
    }

    #[test]
    fn fake_leftover_is_recovered() {
        let f = fake(Some(950_000));
        std::fs::create_dir_all(f.journal().parent().unwrap()).unwrap();
        let mut j = sample_journal();
        j.pid = i32::MAX;
        j.boot_id = boot_id();
        std::fs::write(f.journal(), j.to_json()).unwrap();
        f.knobs.write(Knob::RootGroup, 300_000).unwrap();
        f.knobs.write(Knob::Sysctl, 300_000).unwrap();
        let note = recover_one(&f.knobs, &f.journal()).unwrap().unwrap();
        assert!(
            note.starts_with(
                "restored sched_rt_runtime_us 950000 (was 300000), root cpu cgroup \
                 cpu.rt_runtime_us 950000 (was 300000) left by schedlab pid 2147483647 \
                 that did not exit cleanly"
            ),
            "{note}"
        );
        assert_eq!(f.values(), (950_000, Some(950_000)));
        assert!(!f.journal().exists());
        assert_eq!(recover_one(&f.knobs, &f.journal()).unwrap(), None);

        // acquire() recovers a leftover before journaling, so the modified
        // values are never taken for originals.
        std::fs::write(f.journal(), j.to_json()).unwrap();
        f.knobs.write(Knob::RootGroup, 400_000).unwrap();
        f.knobs.write(Knob::Sysctl, 400_000).unwrap();
        let g = RtGuard::acquire_at(f.knobs.clone(), f.journal()).unwrap();
        assert!(g.recovered().unwrap().contains("(was 400000)"));
        assert_eq!(g.original().runtime_us, 950_000);
        drop(g);

        // A journal from an earlier boot: nothing is written.
        j.boot_id = Some("an-earlier-boot".into());
        std::fs::write(f.journal(), j.to_json()).unwrap();
        f.knobs.write(Knob::Sysctl, 800_000).unwrap();
        let note = recover_one(&f.knobs, &f.journal()).unwrap().unwrap();
        assert!(note.contains("earlier boot"), "{note}");
        assert_eq!(f.values(), (800_000, Some(950_000)));
        assert!(!f.journal().exists());
    }

    /// A journal left by a schedlab from before the journal was generic
    /// (format 1, the fixture byte for byte) is restored and removed.
    #[test]
    fn fake_format_1_leftover_is_recovered() {
        let f = fake(Some(950_000));
        std::fs::create_dir_all(f.journal().parent().unwrap()).unwrap();
        let v1 = include_str!("../../../tests/fixtures/rt-journal-v1.json");
        std::fs::write(f.journal(), v1).unwrap();
        f.knobs.write(Knob::RootGroup, 300_000).unwrap();
        f.knobs.write(Knob::Sysctl, 300_000).unwrap();
        let note = recover_one(&f.knobs, &f.journal()).unwrap().unwrap();
        assert!(
            note.starts_with(
                "restored sched_rt_runtime_us 950000 (was 300000), root cpu cgroup \
                 cpu.rt_runtime_us 950000 (was 300000) left by schedlab pid 2147483647 \
                 that did not exit cleanly"
            ),
            "{note}"
        );
        assert_eq!(f.values(), (950_000, Some(950_000)));
        assert!(!f.journal().exists());
    }
}
