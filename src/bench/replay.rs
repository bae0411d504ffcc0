//! `schedlab bench replay`: how close a synthesized replay comes to the
//! program it stands for. Each standard program (hackbench, `perf bench
//! sched pipe`, cyclictest, a `make -j2` of the small C project under
//! `bench/replay/cproject`) is run traced under OTHER on CPU 0 and free on
//! every CPU, synthesized, replayed under the same condition (traced), and
//! every figure of [`crate::synth::fidelity`] printed with its rule and
//! verdict. Nothing is asserted: the verdicts are figures. Needs root.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::campaign::{self, Options};
use crate::store::Store;
use crate::synth::{self, check, fidelity};

pub struct ReplayBenchOptions {
    /// Keep the campaigns in this database (default: a temporary one).
    pub db: Option<PathBuf>,
}

/// The C project `make -j2` builds.
fn cproject() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/replay/cproject")
}

/// (label, argv as TOML array text).
fn cases(build_dir: &Path) -> Result<Vec<(&'static str, String)>> {
    Ok(vec![
        (
            "hackbench",
            r#"["hackbench", "-g", "2", "-f", "4", "-l", "200"]"#.into(),
        ),
        (
            "perf bench sched pipe",
            r#"["perf", "bench", "sched", "pipe", "-l", "20000"]"#.into(),
        ),
        (
            "cyclictest",
            r#"["cyclictest", "-t1", "-i", "1000", "-l", "300", "-q"]"#.into(),
        ),
        (
            "make -j2",
            format!(
                "[\"make\", \"-s\", \"-B\", \"-j2\", \"-C\", {}]",
                serde_json::to_string(&build_dir.display().to_string())?
            ),
        ),
    ])
}

fn spec_text(label: &str, argv: &str, cpus: &str) -> String {
    format!(
        "name = \"bench-replay {label} cpus {cpus}\"\nrepetitions = 1\ncooldown_s = 0\n\
         timeout_s = 120\ntrace = true\n[matrix]\npolicy = [\"other\"]\ncpus = [\"{cpus}\"]\n\
         workload = [\"prog\"]\nprocesses = [1]\n[workloads.prog]\nkind = \"command\"\n\
         argv = {argv}\n"
    )
}

fn original(db: &Path, text: &str) -> Result<synth::Read> {
    let spec = crate::spec::load(text, "bench replay", &[])?;
    let opts = Options {
        db: db.to_path_buf(),
        quiet: true,
        retry_failed: false,
        force: false,
        allow_concurrent: false,
    };
    let s = campaign::run(&spec, "bench replay", text, &[], &opts)?;
    if let Some(sig) = s.interrupted {
        bail!("interrupted by signal {sig}");
    }
    let store = Store::open_existing(db)?;
    let id = *store
        .campaign_run_ids(s.campaign.id)?
        .last()
        .context("the campaign has no run")?;
    synth::read_run(&store, id, false)
}

pub fn run(o: ReplayBenchOptions) -> Result<()> {
    let temp = tempfile::tempdir()?;
    let db = o.db.unwrap_or_else(|| temp.path().join("bench-replay.db"));
    let build = temp.path().join("cproject");
    std::fs::create_dir_all(&build)?;
    let src = cproject();
    for e in std::fs::read_dir(&src).with_context(|| format!("the C project {}", src.display()))? {
        let e = e?;
        std::fs::copy(e.path(), build.join(e.file_name()))?;
    }
    let rate = synth::pi_rate()?;
    for (label, argv) in cases(&build)? {
        for cpus in ["0", "all"] {
            let text = spec_text(label, &argv, cpus);
            let what = format!("{label}, OTHER, cpus {cpus}");
            let orig = match original(&db, &text) {
                Ok(r) => r,
                Err(e) => {
                    outln!("{what}: the original did not run: {e:#}\n")?;
                    continue;
                }
            };
            let tasks = synth::to_tasks(&orig.recording, rate);
            let replay_text = synth::spec_text(&orig.source, &tasks, &orig.recording, rate)?;
            outln!(
                "{what}: original run {}, {} tasks, {} external wake-ups",
                orig.source.run_id,
                tasks.len(),
                orig.recording.external_wakeups
            )?;
            match check::run_and_compare(&orig, &replay_text, "bench replay", &db, false) {
                Ok(c) => {
                    outln!("replay run {}:", c.run_id)?;
                    outln!("{}", fidelity::render(&c.rows))?;
                }
                Err(e) => outln!("the replay did not run: {e:#}\n")?,
            }
        }
    }
    outln!("campaigns kept in {}", crate::out::path(&db))?;
    Ok(())
}
