//! `schedlab bench replay`: how close a synthesized replay comes to the
//! program it stands for. Each standard program (hackbench, schbench,
//! `perf bench sched pipe`, cyclictest, a `make -j2` of the small C
//! project under `bench/replay/cproject`) is run traced under OTHER on
//! CPU 0, FIFO on CPU 0 (short, under a 30 s run timeout; RT throttling
//! stays as it is) and OTHER free on every CPU, synthesized, replayed
//! under the same condition (traced), and every figure of
//! [`crate::synth::fidelity`] printed with its rule and verdict, then a
//! summary line per case. A second run of the original is held to the
//! same rules against the first: how far the program itself strays
//! between runs on this machine (a figure outside its rule there is
//! outside it for any replay). Nothing is asserted: the verdicts are figures.
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

/// (label, argv as TOML array text). `rt`: the RT policy and priority of
/// the condition, if it is one: cyclictest sets its measuring thread's
/// policy itself (to OTHER without `-p`, whatever it inherited), so it is
/// told the condition's.
fn cases(build_dir: &Path, rt: Option<(&str, i32)>) -> Result<Vec<(&'static str, String)>> {
    let mut cyclictest = vec!["cyclictest", "-m", "-q", "-t1", "-i", "1000", "-l", "500"]
        .into_iter()
        .map(String::from)
        .collect::<Vec<_>>();
    if let Some((policy, prio)) = rt {
        cyclictest.extend(["-p".into(), prio.to_string(), format!("--policy={policy}")]);
    }
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
        ("cyclictest", serde_json::to_string(&cyclictest)?),
        (
            "make -j2",
            format!(
                "[\"make\", \"-s\", \"-B\", \"-j2\", \"-C\", {}]",
                serde_json::to_string(&build_dir.display().to_string())?
            ),
        ),
    ])
}

/// The RT policy and priority a condition's campaign gives its worker
/// (read from the bench's own spec), None for a fair policy.
fn rt_of<'a>(cond: (&'a str, &str, u64)) -> Result<Option<(&'a str, i32)>> {
    if !matches!(cond.0, "fifo" | "rr") {
        return Ok(None);
    }
    let spec = crate::spec::load(
        &spec_text("probe", r#"["true"]"#, cond),
        "bench replay",
        &[],
    )?;
    let prio = spec
        .priorities
        .first()
        .and_then(|p| p.assignment.value(crate::policy::Class::Realtime, 0, 1))
        .context("the bench's spec gives its RT worker no priority")?;
    Ok(Some((cond.0, prio)))
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

/// The original's spec under another name: a campaign of its own (the
/// same spec is the same campaign, already done).
fn again_spec(text: &str) -> String {
    text.replacen("name = \"bench-replay ", "name = \"bench-replay again ", 1)
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
    let replayed = match check::run_and_compare(&orig, &replay_text, "bench replay", db, false) {
        Ok(c) => {
            outln!("replay run {}:", c.run_id)?;
            outln!("{}", fidelity::render(&c.rows))?;
            fidelity::summary(&c.rows)
        }
        Err(e) => {
            outln!("the replay did not run: {e:#}\n")?;
            return Ok(format!("{what}: the replay did not run"));
        }
    };
    // The same figures for the program against itself: a second run of
    // the original, held to the same rules (how far the program strays
    // between two runs here, which no replay can be asked to beat).
    let again = match original(db, &again_spec(&text)) {
        Ok(again) => {
            let rows = fidelity::compare(
                &orig.recording,
                orig.source.makespan_ns,
                &again.recording,
                again.source.makespan_ns,
            );
            outln!(
                "the original again (run {}) against its first run, the same rules:",
                again.source.run_id
            )?;
            outln!("{}", fidelity::render(&rows))?;
            fidelity::summary(&rows)
        }
        Err(e) => {
            outln!("the original's second run did not run: {e:#}\n")?;
            "did not run".into()
        }
    };
    Ok(format!("{what}: replay {replayed}; original again {again}"))
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
    let chosen = cases(&build, None)?
        .into_iter()
        .filter(|(l, _)| o.cases.is_empty() || o.cases.iter().any(|c| l.contains(c.as_str())));
    for (label, _) in chosen {
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
            let argv = cases(&build, rt_of(cond)?)?
                .into_iter()
                .find(|(l, _)| *l == label)
                .map(|(_, a)| a)
                .context("a case without its argv")?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cyclictest_measures_under_the_conditions_policy() {
        let dir = Path::new("/tmp/b");
        let argv = |cond| {
            let c = cases(dir, rt_of(cond).unwrap()).unwrap();
            let a = &c.iter().find(|(l, _)| *l == "cyclictest").unwrap().1;
            serde_json::from_str::<Vec<String>>(a).unwrap()
        };
        let fifo = argv(CONDITIONS[1]);
        let at = fifo.iter().position(|a| a == "-p").unwrap();
        // The uniform priority mode's RT priority, the worker's.
        assert_eq!(fifo[at + 1], "50");
        assert!(fifo.contains(&"--policy=fifo".to_string()), "{fifo:?}");
        for cond in [CONDITIONS[0], CONDITIONS[2]] {
            assert!(!argv(cond).contains(&"-p".to_string()));
        }
        // Every argv is a TOML array the bench's spec loads, and the
        // second run of an original is a campaign of another name.
        for (label, a) in cases(dir, None).unwrap() {
            let text = spec_text(label, &a, CONDITIONS[0]);
            let first = crate::spec::load(&text, "t", &[]).unwrap();
            let again = crate::spec::load(&again_spec(&text), "t", &[]).unwrap();
            assert_ne!(first.name, again.name);
        }
    }
}
