//! Experiment specs: parse the TOML ([`raw`]), apply `--set` overrides
//! ([`overrides`]), and validate into a typed, checked [`Spec`]. Every error
//! names the key at fault and what is allowed there.

pub mod exclude;
pub mod machines;
pub mod overrides;
pub mod presets;
pub mod raw;
mod validate;

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

use crate::policy::{Deadline, Policy, PriorityMode};
use crate::workload::Workload;

pub use validate::{MAX_RUNS, check_scale, validate};

/// A user error in a spec or an override: which key, and what is wrong.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SpecError {
    #[error("{origin}: {message}")]
    Parse { origin: String, message: String },
    #[error("{origin}: {key}: {message}")]
    Invalid {
        origin: String,
        key: String,
        message: String,
    },
}

/// Run order of a campaign.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Order {
    /// Randomised with a recorded seed, so drift in the machine (thermal,
    /// other tenants) does not line up with one factor.
    Shuffled,
    Sequential,
}

/// Which CPUs the workers of a run may use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cpus {
    /// Every CPU schedlab itself may use.
    All,
    /// An explicit list (from "0", "0-1", "0,2-3").
    List(Vec<usize>),
}

/// The most CPUs a CPU list may name (the size of the kernel's default
/// `cpu_set_t`).
pub const MAX_CPUS_LISTED: usize = 1024;

impl Cpus {
    /// Parse "all" or a CPU list such as "0", "0-3" or "0,2-3".
    pub fn parse(s: &str) -> Result<Cpus, String> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("all") {
            return Ok(Cpus::All);
        }
        let too_many = || format!("\"{s}\" names more than {MAX_CPUS_LISTED} CPUs");
        let mut cpus = Vec::new();
        for part in s.split(',') {
            let part = part.trim();
            let num = |t: &str| {
                t.trim().parse::<usize>().map_err(|_| {
                    format!(
                        "\"{s}\" is not \"all\" or a CPU list such as \"0\", \"0-1\" or \"0,2-3\""
                    )
                })
            };
            match part.split_once('-') {
                Some((a, b)) => {
                    let (a, b) = (num(a)?, num(b)?);
                    if a > b {
                        return Err(format!("CPU range \"{part}\" runs backwards"));
                    }
                    // Checked before the range is listed: "0-4294967295"
                    // must be an error, not billions of entries.
                    if b - a >= MAX_CPUS_LISTED {
                        return Err(too_many());
                    }
                    cpus.extend(a..=b);
                }
                None => cpus.push(num(part)?),
            }
            // Repeated ranges ("0-1023,0-1023,…") stay bounded too.
            if cpus.len() > 2 * MAX_CPUS_LISTED {
                cpus.sort_unstable();
                cpus.dedup();
                if cpus.len() > MAX_CPUS_LISTED {
                    return Err(too_many());
                }
            }
        }
        cpus.sort_unstable();
        cpus.dedup();
        if cpus.len() > MAX_CPUS_LISTED {
            return Err(too_many());
        }
        Ok(Cpus::List(cpus))
    }

    /// The canonical label: "all" or a compact list such as "0-1,3".
    pub fn label(&self) -> String {
        match self {
            Cpus::All => "all".into(),
            Cpus::List(cpus) => {
                let mut parts = Vec::new();
                let mut i = 0;
                while i < cpus.len() {
                    let mut j = i;
                    while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
                        j += 1;
                    }
                    parts.push(if i == j {
                        cpus[i].to_string()
                    } else {
                        format!("{}-{}", cpus[i], cpus[j])
                    });
                    i = j + 1;
                }
                parts.join(",")
            }
        }
    }

    /// The concrete CPUs, given the CPUs schedlab may use. Err names the CPUs
    /// that are not available.
    pub fn resolve(&self, allowed: &[usize]) -> Result<Vec<usize>, String> {
        match self {
            Cpus::All => Ok(allowed.to_vec()),
            Cpus::List(cpus) => {
                let missing: Vec<usize> = cpus
                    .iter()
                    .copied()
                    .filter(|c| !allowed.contains(c))
                    .collect();
                if missing.is_empty() {
                    return Ok(cpus.clone());
                }
                // Compact both lists ("2-1000"), however many CPUs they name.
                let mut allowed = allowed.to_vec();
                allowed.sort_unstable();
                allowed.dedup();
                let (what, verb) = match missing.len() {
                    1 => ("CPU", "is"),
                    _ => ("CPUs", "are"),
                };
                Err(format!(
                    "{what} {} {verb} not available; this process may use CPUs {}",
                    Cpus::List(missing).label(),
                    Cpus::List(allowed).label()
                ))
            }
        }
    }
}

/// A workload under the name the matrix uses for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NamedWorkload {
    pub name: String,
    pub workload: Workload,
}

/// A validated experiment spec.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Spec {
    pub name: String,
    pub description: String,
    /// Runs per condition; with `auto_repetitions`, the most
    /// (`max_repetitions`).
    pub repetitions: u32,
    /// `repetitions = "auto"`: repeat each condition in rounds until its
    /// primary metric is precise enough (absent: exactly `repetitions`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_repetitions: Option<AutoRepetitions>,
    pub order: Order,
    /// None: a fresh seed is drawn when the campaign is created and stored.
    pub seed: Option<u64>,
    pub timeout_ns: u64,
    pub cooldown_ns: u64,
    /// Hold `/dev/cpu_dma_latency` at this many µs during each run (as
    /// cyclictest holds it at 0): no CPU sleeps deeper while workers run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_dma_latency_us: Option<u32>,
    /// Record the kernel's scheduling events of every run (tracefs), stored
    /// with the run (`trace = true`, or `run --trace`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub trace: bool,
    pub workdir: Option<PathBuf>,
    /// Work per process is multiplied by this (recorded with the campaign).
    pub scale: f64,
    /// The default equivalence margin of `schedlab compare` against this
    /// campaign, % (`--margin` overrides it); analysis only, not compared
    /// between specs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compare_margin_pct: Option<f64>,
    pub policies: Vec<Policy>,
    pub workloads: Vec<NamedWorkload>,
    pub processes: Vec<u32>,
    pub priorities: Vec<PriorityMode>,
    pub cpus: Vec<Cpus>,
    /// Values of `sched_rt_runtime_us` to run under (a factor of the
    /// matrix); empty: the setting is left as it is.
    pub rt_runtime_us: Vec<i64>,
    /// EEVDF slices (µs) the workers ask for (OTHER and BATCH), a factor
    /// of the campaign; empty when not swept (the kernel's default slice).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slice_us: Vec<u32>,
    /// sched_ext schedulers to run the workers under (`matrix.ext_scheduler`),
    /// a factor of the campaign; empty when not swept (none is loaded).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ext_schedulers: Vec<ExtScheduler>,
    /// Machine levels (`matrix.machine`): this machine ("host") and guests
    /// schedlab boots, a factor of the campaign; empty when not swept
    /// (every run on this machine).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub machines: Vec<machines::MachineLevel>,
    /// `[[matrix.exclude]]`: combinations of levels not run (empty: the
    /// whole product).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude: Vec<exclude::Exclusion>,
    pub deadline: Deadline,
    pub hog: Option<Hog>,
    pub wrr: WrrSettings,
}

/// `repetitions = "auto"`: each condition runs in rounds until the 95 %
/// interval of its primary metric's mean is within `target_ci_pct` % of the
/// mean ([`crate::stats::sequential::StopRule`]), after at least
/// `min_repetitions` and at most `Spec::repetitions` runs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct AutoRepetitions {
    pub target_ci_pct: f64,
    pub min_repetitions: u32,
}

impl AutoRepetitions {
    /// The stopping rule.
    pub fn rule(&self) -> crate::stats::sequential::StopRule {
        crate::stats::sequential::StopRule {
            target_ci_pct: self.target_ci_pct,
            min_n: self.min_repetitions as usize,
        }
    }
}

/// A level of `matrix.ext_scheduler`: no sched_ext scheduler ("none"), or a
/// program that loads one, started before each run of its condition and
/// stopped after.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExtScheduler {
    /// The level's name, as the matrix lists it.
    pub name: String,
    /// The program and its arguments; empty for "none".
    pub command: Vec<String>,
    /// How long the program may take to load its scheduler.
    pub ready_timeout_ns: u64,
}

impl ExtScheduler {
    /// The level without a scheduler.
    pub const NONE: &'static str = "none";

    /// Whether this level loads a scheduler.
    pub fn loads(&self) -> bool {
        !self.command.is_empty()
    }
}

/// How schedlab's weighted round robin runs: slice = quantum × weight.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct WrrSettings {
    pub quantum_ns: u64,
    /// None: the first mechanism this machine allows (ext, else FIFO, else
    /// signals).
    pub mechanism: Option<WrrMechanism>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WrrMechanism {
    /// Workers at SCHED_FIFO, raised in turn by a dispatcher thread per CPU.
    Fifo,
    /// SIGSTOP/SIGCONT, one worker running per CPU (no privilege needed).
    Signals,
    /// schedlab's sched_ext scheduler in the kernel (Linux 6.12+ with
    /// sched_ext, the `ext` feature, root).
    Ext,
}

/// CPU hogs that run beside the measured workers of every run, from
/// barrier release until the last worker ends: one real-time hog (FIFO or
/// RR), or `count` fair ones (OTHER or BATCH at `nice`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hog {
    pub policy: Policy,
    pub rt_priority: i32,
    pub cpus: Cpus,
    /// Fair hogs: their nice value.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub nice: i32,
    /// How many hogs (fair hogs only; an RT hog is one).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub count: u32,
}

impl Hog {
    /// A real-time hog (FIFO or RR), as opposed to fair ones.
    pub fn is_rt(&self) -> bool {
        self.policy.class() == crate::policy::Class::Realtime
    }
}

fn is_zero(v: &i32) -> bool {
    *v == 0
}

fn one() -> u32 {
    1
}

fn is_one(v: &u32) -> bool {
    *v == 1
}

/// The largest spec file read (64 MiB): the presets are a few KiB, but a
/// replay `schedlab synthesize` writes of a busy program is MiBs (`perf
/// bench sched pipe`'s 20,000 round trips: 1.4 MB), and a mistaken
/// `schedlab plan /dev/zero` must not read until memory runs out.
pub const MAX_SPEC_BYTES: u64 = 64 << 20;

/// Read a spec file: at most [`MAX_SPEC_BYTES`] (from any kind of file, so a
/// device or pipe cannot make it read forever), and UTF-8 text. A file that
/// cannot be a spec (too large, binary) is a spec error naming it; a file
/// that cannot be read is an I/O error.
pub fn read_file(path: &Path) -> anyhow::Result<String> {
    use anyhow::Context;
    use std::io::Read;
    let name = crate::out::path(path);
    let too_big = || SpecError::Parse {
        origin: name.clone(),
        message: format!(
            "larger than {} MiB, the most a spec file may be: is this a spec?",
            MAX_SPEC_BYTES >> 20
        ),
    };
    let file = std::fs::File::open(path).with_context(|| format!("cannot read spec {name}"))?;
    if let Ok(meta) = file.metadata()
        && meta.is_file()
        && meta.len() > MAX_SPEC_BYTES
    {
        return Err(too_big().into());
    }
    let mut bytes = Vec::new();
    file.take(MAX_SPEC_BYTES + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("cannot read spec {name}"))?;
    if bytes.len() as u64 > MAX_SPEC_BYTES {
        return Err(too_big().into());
    }
    String::from_utf8(bytes).map_err(|e| {
        SpecError::Parse {
            origin: name.clone(),
            message: format!(
                "not UTF-8 text (invalid byte at offset {}): a spec is a TOML file",
                e.utf8_error().valid_up_to()
            ),
        }
        .into()
    })
}

impl Spec {
    /// A relative `workdir` names a directory beside the spec file: joined
    /// to `spec_dir`, the directory of the file it was read from.
    pub fn resolve_workdir(&mut self, spec_dir: &Path) {
        if let Some(w) = &self.workdir
            && w.is_relative()
        {
            self.workdir = Some(spec_dir.join(w));
        }
    }
}

/// Parse and validate a spec from TOML text. `origin` names the file or
/// preset in messages; `overrides` are `KEY=VALUE` strings from `--set`.
pub fn load(text: &str, origin: &str, overrides: &[String]) -> Result<Spec, SpecError> {
    let raw = if overrides.is_empty() {
        // Straight from the text, so parse errors carry line and column.
        toml::from_str::<raw::RawSpec>(text).map_err(|e| SpecError::Parse {
            origin: origin.to_string(),
            message: e.to_string().trim_end().to_string(),
        })?
    } else {
        let mut table: toml::Table =
            text.parse()
                .map_err(|e: toml::de::Error| SpecError::Parse {
                    origin: origin.to_string(),
                    message: e.to_string().trim_end().to_string(),
                })?;
        for o in overrides {
            overrides::apply(&mut table, o).map_err(|message| SpecError::Invalid {
                origin: "--set".into(),
                key: o.split('=').next().unwrap_or(o).trim().to_string(),
                message,
            })?;
        }
        raw::RawSpec::deserialize(toml::Value::Table(table.clone())).map_err(|e| {
            // A value of the wrong type carries no position once merged:
            // the merged spec written out and read again shows the line
            // with its key.
            let located = toml::to_string(&table)
                .ok()
                .and_then(|merged| toml::from_str::<raw::RawSpec>(&merged).err());
            SpecError::Parse {
                origin: format!("{origin} with --set overrides"),
                message: located
                    .map_or_else(|| e.to_string(), |l| format!("in the merged spec: {l}"))
                    .trim_end()
                    .to_string(),
            }
        })?
    };
    validate(raw, origin)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_override_of_the_wrong_type_is_refused_naming_its_key() {
        let text = "name = \"w\"\n[matrix]\npolicy = [\"other\"]\n";
        for (set, key) in [
            ("matrix=1", "matrix = 1"),
            ("hog=1", "hog = 1"),
            ("workloads=2", "workloads = 2"),
        ] {
            let e = load(text, "s.toml", &[set.to_string()])
                .unwrap_err()
                .to_string();
            assert!(e.contains(key) && e.contains("invalid type"), "{set}: {e}");
        }
    }

    #[test]
    fn a_relative_workdir_lies_beside_the_spec_file_and_an_absolute_one_stays() {
        let text = "name = \"w\"\nworkdir = \"runs\"\n";
        let mut spec = load(text, "s.toml", &[]).unwrap();
        spec.resolve_workdir(Path::new("/srv/specs"));
        assert_eq!(spec.workdir, Some(PathBuf::from("/srv/specs/runs")));
        let text = "name = \"w\"\nworkdir = \"/var/tmp\"\n";
        let mut spec = load(text, "s.toml", &[]).unwrap();
        spec.resolve_workdir(Path::new("/srv/specs"));
        assert_eq!(spec.workdir, Some(PathBuf::from("/var/tmp")));
    }

    /// `trace` is a boolean; a campaign without it keeps its identity (the
    /// key is not serialised when false).
    #[test]
    fn trace_key() {
        let base = "[matrix]\nworkload = [\"pi\"]\n";
        let off = load(base, "t.toml", &[]).unwrap();
        assert!(!off.trace);
        assert!(!serde_json::to_string(&off).unwrap().contains("trace"));
        let on = load(&format!("trace = true\n{base}"), "t.toml", &[]).unwrap();
        assert!(on.trace);
        let set = load(base, "t.toml", &["trace=true".to_string()]).unwrap();
        assert_eq!(set, on);
        let e = load(&format!("trace = \"yes\"\n{base}"), "t.toml", &[]).unwrap_err();
        assert!(e.to_string().contains("trace"), "{e}");
    }

    /// `compare_margin_pct`: a percentage in (0, 100), absent by default
    /// (a spec without it keeps its identity); a bad value names the key.
    #[test]
    fn compare_margin_pct_key() {
        let base = "[matrix]\nworkload = [\"pi\"]\n";
        let off = load(base, "t.toml", &[]).unwrap();
        assert_eq!(off.compare_margin_pct, None);
        assert!(
            !serde_json::to_string(&off)
                .unwrap()
                .contains("compare_margin")
        );
        let on = load(&format!("compare_margin_pct = 2.5\n{base}"), "t.toml", &[]).unwrap();
        assert_eq!(on.compare_margin_pct, Some(2.5));
        let json = serde_json::to_string(&on).unwrap();
        assert_eq!(crate::compare::analyse::spec_margin_pct(&json), Some(2.5));
        for bad in ["0", "100", "-1", "\"2%\""] {
            let e = load(
                &format!("compare_margin_pct = {bad}\n{base}"),
                "t.toml",
                &[],
            )
            .unwrap_err()
            .to_string();
            assert!(e.contains("compare_margin_pct"), "{bad}: {e}");
        }
    }

    /// `repetitions = "auto"` with its keys: defaults, the count becomes
    /// the most runs, a numeric count is unchanged (and keeps its
    /// identity), and every mistake names its key.
    #[test]
    fn auto_repetitions_keys() {
        let base = "[matrix]\nworkload = [\"pi\"]\n";
        let numeric = load(&format!("repetitions = 4\n{base}"), "t.toml", &[]).unwrap();
        assert_eq!((numeric.repetitions, numeric.auto_repetitions), (4, None));
        assert!(!serde_json::to_string(&numeric).unwrap().contains("auto"));
        let auto = load(
            &format!("repetitions = \"auto\"\ntarget_ci_pct = 2\n{base}"),
            "t.toml",
            &[],
        )
        .unwrap();
        assert_eq!(auto.repetitions, 50);
        assert_eq!(
            auto.auto_repetitions,
            Some(AutoRepetitions {
                target_ci_pct: 2.0,
                min_repetitions: 10
            })
        );
        let set = load(
            base,
            "t.toml",
            &[
                "repetitions=auto".to_string(),
                "target_ci_pct=2".to_string(),
                "min_repetitions=3".to_string(),
                "max_repetitions=8".to_string(),
            ],
        )
        .unwrap();
        assert_eq!(set.repetitions, 8);
        assert_eq!(set.auto_repetitions.unwrap().min_repetitions, 3);
        let bad = |text: &str, key: &str| {
            let e = load(&format!("{text}\n{base}"), "t.toml", &[])
                .unwrap_err()
                .to_string();
            assert!(e.contains(&format!(": {key}: ")), "{text}: {e}");
        };
        bad("repetitions = \"auto\"", "target_ci_pct");
        bad("repetitions = \"many\"", "repetitions");
        bad("repetitions = 0", "repetitions");
        bad("repetitions = 2.5", "repetitions");
        bad("repetitions = \"auto\"\ntarget_ci_pct = 0", "target_ci_pct");
        bad(
            "repetitions = \"auto\"\ntarget_ci_pct = 100",
            "target_ci_pct",
        );
        bad(
            "repetitions = \"auto\"\ntarget_ci_pct = 2\nmin_repetitions = 1",
            "min_repetitions",
        );
        bad(
            "repetitions = \"auto\"\ntarget_ci_pct = 2\nmin_repetitions = 12\nmax_repetitions = 11",
            "max_repetitions",
        );
        bad(
            "repetitions = \"auto\"\ntarget_ci_pct = 2\nmax_repetitions = 200000",
            "max_repetitions",
        );
        bad("repetitions = 5\ntarget_ci_pct = 2", "target_ci_pct");
        bad("min_repetitions = 5", "min_repetitions");
        bad("max_repetitions = 5", "max_repetitions");
    }

    /// `matrix.ext_scheduler`: "none", a command line, or a name of
    /// `[ext_schedulers]`; every mistake names its key.
    #[test]
    fn ext_scheduler_levels() {
        let spec = load(
            "[matrix]\nworkload = [\"pi\"]\n\
             ext_scheduler = [\"none\", \"scx_simple\", \"fifo\", \"/opt/scx_rusty --slice-us 5000\"]\n\
             [ext_schedulers.fifo]\ncommand = [\"scx_simple\", \"-f\"]\nready_timeout_s = 5\n",
            "t.toml",
            &[],
        )
        .unwrap();
        let levels: Vec<(&str, Vec<&str>, u64)> = spec
            .ext_schedulers
            .iter()
            .map(|x| {
                let cmd = x.command.iter().map(String::as_str).collect();
                (x.name.as_str(), cmd, x.ready_timeout_ns)
            })
            .collect();
        assert_eq!(
            levels,
            vec![
                ("none", vec![], 0),
                ("scx_simple", vec!["scx_simple"], 30_000_000_000),
                ("fifo", vec!["scx_simple", "-f"], 5_000_000_000),
                (
                    "/opt/scx_rusty --slice-us 5000",
                    vec!["/opt/scx_rusty", "--slice-us", "5000"],
                    30_000_000_000
                ),
            ]
        );
        assert!(!spec.ext_schedulers[0].loads() && spec.ext_schedulers[1].loads());
        // Not swept: not serialised, so older campaigns keep their identity.
        let plain = load("[matrix]\nworkload = [\"pi\"]\n", "t.toml", &[]).unwrap();
        assert!(plain.ext_schedulers.is_empty());
        assert!(
            !serde_json::to_string(&plain)
                .unwrap()
                .contains("ext_schedulers")
        );
        let bad = |text: &str, key: &str, says: &str| {
            let e = load(text, "t.toml", &[]).unwrap_err().to_string();
            assert!(e.contains(key) && e.contains(says), "{text}: {e}");
        };
        bad(
            "[matrix]\next_scheduler = []\n",
            "matrix.ext_scheduler",
            "at least one",
        );
        bad(
            "[matrix]\next_scheduler = [\" \"]\n",
            "matrix.ext_scheduler",
            "empty value",
        );
        bad(
            "[matrix]\next_scheduler = [\"none\", \"none\"]\n",
            "matrix.ext_scheduler",
            "none",
        );
        bad(
            "[ext_schedulers.a]\ncommand = [\"scx_simple\"]\n",
            "ext_schedulers.a",
            "matrix.ext_scheduler is not set",
        );
        bad(
            "[matrix]\next_scheduler = [\"none\"]\n[ext_schedulers.a]\ncommand = [\"x\"]\n",
            "ext_schedulers.a",
            "not listed",
        );
        bad(
            "[matrix]\next_scheduler = [\"a\"]\n[ext_schedulers.a]\ncommand = []\n",
            "ext_schedulers.a.command",
            "name the program",
        );
        bad(
            "[matrix]\next_scheduler = [\"a\"]\n[ext_schedulers.a]\ncommand = [\"x\"]\nready_timeout_s = 0\n",
            "ext_schedulers.a.ready_timeout_s",
            "more than 0",
        );
        bad(
            "[matrix]\next_scheduler = [\"none\"]\n[ext_schedulers.none]\ncommand = [\"x\"]\n",
            "ext_schedulers.none",
            "without a scheduler",
        );
        bad(
            "[matrix]\next_scheduler = [\"a\"]\n[ext_schedulers.a]\nprogram = \"x\"\n",
            "program",
            "unknown field",
        );
    }

    #[test]
    fn spec_files_are_text_of_bounded_size() {
        let dir = tempfile::tempdir().unwrap();
        let spec_error = |r: anyhow::Result<String>| {
            let e = r.unwrap_err();
            let message = format!("{e:#}");
            assert!(e.downcast_ref::<SpecError>().is_some(), "{message}");
            message
        };
        let bin = dir.path().join("bin.toml");
        std::fs::write(&bin, b"name = 1\n\xff\x00").unwrap();
        let m = spec_error(read_file(&bin));
        assert!(m.contains("bin.toml") && m.contains("UTF-8"), "{m}");
        let big = dir.path().join("big.toml");
        std::fs::write(&big, vec![b'#'; (MAX_SPEC_BYTES + 1) as usize]).unwrap();
        let m = spec_error(read_file(&big));
        assert!(m.contains("big.toml") && m.contains("64 MiB"), "{m}");
        // A device that never ends is read up to the limit, no further.
        let m = spec_error(read_file(Path::new("/dev/zero")));
        assert!(m.contains("/dev/zero") && m.contains("64 MiB"), "{m}");
        let ok = dir.path().join("ok.toml");
        std::fs::write(&ok, "name = \"x\"\n").unwrap();
        assert_eq!(read_file(&ok).unwrap(), "name = \"x\"\n");
        // Missing: an I/O error, not a spec error.
        let e = read_file(&dir.path().join("none.toml")).unwrap_err();
        assert!(e.downcast_ref::<SpecError>().is_none());
    }

    #[test]
    fn cpu_lists_parse_and_label() {
        assert_eq!(Cpus::parse("all").unwrap(), Cpus::All);
        assert_eq!(Cpus::parse("0").unwrap(), Cpus::List(vec![0]));
        assert_eq!(
            Cpus::parse("0,2-4, 3").unwrap(),
            Cpus::List(vec![0, 2, 3, 4])
        );
        assert_eq!(Cpus::parse("0,2-4").unwrap().label(), "0,2-4");
        assert!(Cpus::parse("x").unwrap_err().contains("CPU list"));
        assert!(Cpus::parse("3-1").unwrap_err().contains("backwards"));
    }

    #[test]
    fn cpus_resolve_against_allowed() {
        assert_eq!(Cpus::All.resolve(&[0, 1]).unwrap(), vec![0, 1]);
        assert_eq!(Cpus::List(vec![1]).resolve(&[0, 1]).unwrap(), vec![1]);
        let e = Cpus::List(vec![5]).resolve(&[0, 1]).unwrap_err();
        assert_eq!(e, "CPU 5 is not available; this process may use CPUs 0-1");
    }

    #[test]
    fn unavailable_cpus_are_named_compactly() {
        let Cpus::List(many) = Cpus::parse("0-1000").unwrap() else {
            unreachable!()
        };
        let e = Cpus::List(many).resolve(&[0, 1]).unwrap_err();
        assert_eq!(
            e,
            "CPUs 2-1000 are not available; this process may use CPUs 0-1"
        );
        let e = Cpus::parse("1,3,5-7")
            .unwrap()
            .resolve(&[0, 1, 2, 3])
            .unwrap_err();
        assert_eq!(
            e,
            "CPUs 5-7 are not available; this process may use CPUs 0-3"
        );
    }
}
