//! `schedlab bench replay`: how close a synthesized replay comes to the
//! program it stands for. Each standard program (hackbench, schbench,
//! `perf bench sched pipe`, cyclictest, a `make -j2` of the small C
//! project under `bench/replay/cproject`) is run traced under OTHER on
//! CPU 0, FIFO on CPU 0 (short, under a 30 s run timeout; RT throttling
//! stays as it is) and OTHER free on every CPU, synthesized, replayed
//! under the same condition (traced), and every figure of
//! [`crate::synth::fidelity`] printed with its rule and verdict, then a
//! summary line per case. Nothing is asserted: the verdicts are figures.
//! The replayer's own CPU per step is measured once per condition by a
//! traced calibration replay ([`calibrate`]) and taken off the bursts. A
//! program missing from PATH is named as not measured. Needs root.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::campaign::{self, Options};
use crate::store::Store;
use crate::synth::calibrate::{self, StepCost};
use crate::synth::{self, check, fidelity};

pub struct ReplayBenchOptions {
    /// Keep the campaigns in this database (default: a temporary one).
    pub db: Option<PathBuf>,
    /// Only the cases whose label contains one of these (all when empty).
    pub cases: Vec<String>,
}

/// (policy, cpus, run timeout in s): the conditions every case runs under.
const CONDITIONS: [(&str, &str, u64); 3] = [
    ("other", "0", 120),
    ("fifo", "0", 30),
    ("other", "all", 120),
];

/// The C project `make -j2` builds.
fn cproject() -> PathBuf {
    Path::new(crate::REPO_DIR).join("bench/replay/cproject")
}

/// (label, argv as TOML array text).
fn cases(build_dir: &Path) -> Result<Vec<(&'static str, String)>> {
    Ok(vec![
        (
            "hackbench",
            r#"["hackbench", "-g", "2", "-f", "4", "-l", "200"]"#.into(),
        ),
        (
            "schbench",
            r#"["schbench", "-m", "1", "-t", "2", "-r", "1", "-n", "2"]"#.into(),
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

fn spec_text(label: &str, argv: &str, (policy, cpus, timeout_s): (&str, &str, u64)) -> String {
    format!(
        "name = \"bench-replay {label} {policy} cpus {cpus}\"\nrepetitions = 1\ncooldown_s = 0\n\
         timeout_s = {timeout_s}\ntrace = true\n[matrix]\npolicy = [\"{policy}\"]\n\
         cpus = [\"{cpus}\"]\n\
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

/// Whether `program` is an executable file on PATH.
fn on_path(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|p| {
        std::env::split_paths(&p).any(|d| {
            std::fs::metadata(d.join(program)).is_ok_and(|m| {
                use std::os::unix::fs::PermissionsExt;
                m.is_file() && m.permissions().mode() & 0o111 != 0
            })
        })
    })
}

/// The replayer's step costs measured under each condition (by its first
/// original's run), as (policy, cpus) → costs.
type Costs = std::collections::HashMap<(String, String), StepCost>;

/// The step costs under `cond`: measured once (a traced calibration replay
/// under `orig`'s condition), then reused by every case.
fn step_cost(
    db: &Path,
    orig: &synth::Read,
    cond: (&str, &str, u64),
    known: &mut Costs,
) -> Result<StepCost> {
    let key = (cond.0.to_string(), cond.1.to_string());
    if let Some(c) = known.get(&key) {
        return Ok(*c);
    }
    let (c, id) = calibrate::measure(orig, db)?;
    outln!(
        "the replayer's own CPU per step under {}, cpus {} (traced calibration replay, run {id}): {}",
        cond.0.to_uppercase(),
        cond.1,
        c.describe()
    )?;
    known.insert(key, c);
    Ok(c)
}

/// One case under one condition: its figures printed; the summary line.
fn one(
    db: &Path,
    label: &str,
    argv: &str,
    cond: (&str, &str, u64),
    rate: f64,
    costs: &mut Costs,
) -> Result<String> {
    let text = spec_text(label, argv, cond);
    let what = format!("{label}, {}, cpus {}", cond.0.to_uppercase(), cond.1);
    let orig = match original(db, &text) {
        Ok(r) => r,
        Err(e) => {
            outln!("{what}: the original did not run: {e:#}\n")?;
            return Ok(format!("{what}: the original did not run"));
        }
    };
    let cost = match step_cost(db, &orig, cond, costs) {
        Ok(c) => c,
        Err(e) => {
            outln!("{what}: the step calibration did not run: {e:#}\n")?;
            return Ok(format!("{what}: the step calibration did not run"));
        }
    };
    let tasks = synth::to_tasks_less(&orig.recording, rate, &cost);
    let replay_text = synth::spec_text(&orig.source, &tasks, &orig.recording, rate)?;
    outln!(
        "{what}: original run {}, {} tasks, {} external wake-ups",
        orig.source.run_id,
        tasks.len(),
        orig.recording.external_wakeups
    )?;
    Ok(
        match check::run_and_compare(&orig, &replay_text, "bench replay", db, false) {
            Ok(c) => {
                outln!("replay run {}:", c.run_id)?;
                outln!("{}", fidelity::render(&c.rows))?;
                format!("{what}: {}", fidelity::summary(&c.rows))
            }
            Err(e) => {
                outln!("the replay did not run: {e:#}\n")?;
                format!("{what}: the replay did not run")
            }
        },
    )
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
    outln!(
        "pi loop {rate:.4e} iterations per CPU second; the replayer's own CPU per step is \
         measured under each condition (a traced calibration replay) and taken off the bursts\n"
    )?;
    let mut costs = Costs::new();
    let mut summary = Vec::new();
    let chosen = cases(&build)?
        .into_iter()
        .filter(|(l, _)| o.cases.is_empty() || o.cases.iter().any(|c| l.contains(c.as_str())));
    for (label, argv) in chosen {
        // The programs a case needs: its own, and a build's compiler.
        let program = label.split(' ').next().unwrap_or(label);
        let needs: &[&str] = match program {
            "make" => &["make", "cc"],
            _ => &[program],
        };
        if let Some(missing) = needs.iter().find(|p| !on_path(p)) {
            outln!("{label}: {missing} is not on PATH: not measured\n")?;
            summary.push(format!("{label}: not measured ({missing} is not on PATH)"));
            continue;
        }
        for cond in CONDITIONS {
            summary.push(one(&db, label, &argv, cond, rate, &mut costs)?);
        }
    }
    outln!("summary:")?;
    for l in &summary {
        outln!("  {l}")?;
    }
    outln!("campaigns kept in {}", crate::out::path(&db))?;
    Ok(())
}
