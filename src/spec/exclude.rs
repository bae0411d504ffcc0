//! `[[matrix.exclude]]`: combinations of the matrix's levels a campaign
//! leaves out, as GitHub Actions' `matrix.exclude` does. Each entry names
//! one level of one or more factors; a run whose condition has every one of
//! them is not planned:
//!
//! ```toml
//! [matrix]
//! workload = ["solo", "share"]
//! processes = [1, 2]
//! [[matrix.exclude]]
//! workload = "solo"
//! processes = 2
//! ```
//!
//! This module owns checking the entries against the validated levels
//! (each error names the entry and its key) and matching them against run
//! keys, whose `factor=level` parts they are written in.

use serde::{Deserialize, Serialize};

use super::{Cpus, Spec, SpecError};

/// One `[[matrix.exclude]]` entry: (factor, level) pairs, each level as the
/// run key writes it (`policy=fifo`, `cpus=0-1`, `processes=4`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exclusion {
    pub levels: Vec<(String, String)>,
}

impl Exclusion {
    /// Whether the run (or condition) with this key has every level of the
    /// entry.
    pub fn matches(&self, key: &str) -> bool {
        let parts: Vec<(&str, &str)> = key.split(';').filter_map(|p| p.split_once('=')).collect();
        self.matches_levels(&parts)
    }

    /// Whether a condition of these (factor, level) pairs has every level of
    /// the entry.
    fn matches_levels(&self, condition: &[(&str, &str)]) -> bool {
        self.levels
            .iter()
            .all(|(factor, level)| condition.iter().any(|(f, l)| f == factor && l == level))
    }
}

/// Whether some condition of the factors' levels (each factor swept, or
/// left out when it has none) is matched by no entry. The conditions are
/// counted like an odometer; their number is bounded by the run count's
/// own check.
fn any_condition_left(factors: &[(&str, Vec<String>)], entries: &[Exclusion]) -> bool {
    let swept: Vec<&(&str, Vec<String>)> = factors.iter().filter(|(_, l)| !l.is_empty()).collect();
    let mut at = vec![0usize; swept.len()];
    loop {
        let condition: Vec<(&str, &str)> = swept
            .iter()
            .zip(&at)
            .map(|((f, levels), &i)| (*f, levels[i].as_str()))
            .collect();
        if !entries.iter().any(|e| e.matches_levels(&condition)) {
            return true;
        }
        let mut d = 0;
        loop {
            if d == at.len() {
                return false;
            }
            at[d] += 1;
            if at[d] < swept[d].1.len() {
                break;
            }
            at[d] = 0;
            d += 1;
        }
    }
}

/// The factors an entry may name, with the labels of their levels in `spec`
/// as run keys write them ([`crate::plan::Run::factor_key`]); factors the
/// campaign does not sweep have no levels.
fn levels(spec: &Spec) -> Vec<(&'static str, Vec<String>)> {
    fn labels<T>(levels: &[T], label: impl Fn(&T) -> String) -> Vec<String> {
        levels.iter().map(label).collect()
    }
    vec![
        ("policy", labels(&spec.policies, |p| p.name().to_string())),
        ("workload", labels(&spec.workloads, |w| w.name.clone())),
        ("processes", labels(&spec.processes, u32::to_string)),
        ("priorities", labels(&spec.priorities, |p| p.name.clone())),
        ("cpus", labels(&spec.cpus, Cpus::label)),
        ("rt_runtime_us", labels(&spec.rt_runtime_us, i64::to_string)),
        ("slice_us", labels(&spec.slice_us, u32::to_string)),
        (
            "ext_scheduler",
            labels(&spec.ext_schedulers, |x| x.name.clone()),
        ),
        ("machine", labels(&spec.machines, |m| m.name.clone())),
    ]
}

/// Check the written entries against `spec`'s levels: every key a factor
/// the campaign sweeps, every value one of its levels, at least one pair
/// per entry, and at least one run left.
pub(super) fn validate(
    origin: &str,
    raw: &[toml::Table],
    spec: &Spec,
) -> Result<Vec<Exclusion>, SpecError> {
    let err = |key: String, message: String| SpecError::Invalid {
        origin: origin.to_string(),
        key,
        message,
    };
    let factors = levels(spec);
    let mut out = Vec::new();
    for (i, table) in raw.iter().enumerate() {
        let at = format!("matrix.exclude[{i}]");
        if table.is_empty() {
            return Err(err(
                at,
                "names no level; write one or more factor = level pairs".into(),
            ));
        }
        let mut pairs = Vec::new();
        for (factor, value) in table {
            let key = format!("{at}.{factor}");
            let Some((name, known)) = factors.iter().find(|(f, _)| f == factor) else {
                let all: Vec<&str> = factors.iter().map(|(f, _)| *f).collect();
                return Err(err(
                    key,
                    format!(
                        "\"{factor}\" is not a factor of the matrix; factors: {}",
                        all.join(", ")
                    ),
                ));
            };
            let level = written_level(name, value).map_err(|m| err(key.clone(), m))?;
            if !known.contains(&level) {
                let has = match known.is_empty() {
                    true => format!("the campaign does not sweep matrix.{name}"),
                    false => format!("matrix.{name} lists {}", known.join(", ")),
                };
                return Err(err(
                    key,
                    format!("\"{level}\" is not one of its levels: {has}"),
                ));
            }
            pairs.push((name.to_string(), level));
        }
        out.push(Exclusion { levels: pairs });
    }
    if !any_condition_left(&factors, &out) {
        return Err(err(
            "matrix.exclude".into(),
            "leaves no run: every combination of the matrix's levels is excluded".into(),
        ));
    }
    Ok(out)
}

/// A level as written (a string, or an integer for the numeric factors) in
/// its run-key form.
fn written_level(factor: &str, value: &toml::Value) -> Result<String, String> {
    match (factor, value) {
        ("cpus", toml::Value::String(s)) => Cpus::parse(s).map(|c| c.label()),
        ("processes" | "rt_runtime_us" | "slice_us", toml::Value::Integer(n)) => Ok(n.to_string()),
        ("processes" | "rt_runtime_us" | "slice_us", other) => {
            Err(format!("must be an integer, got {other}"))
        }
        (_, toml::Value::String(s)) => Ok(s.clone()),
        (_, other) => Err(format!("must be a level's name (a string), got {other}")),
    }
}

#[cfg(test)]
mod tests {
    use crate::spec::load;

    const BASE: &str = "name = \"t\"\nrepetitions = 2\n[matrix]\npolicy = [\"other\", \"fifo\"]\n\
        workload = [\"a\", \"b\"]\nprocesses = [1, 2]\ncpus = [\"0\", \"0-1\"]\n\
        [workloads.a]\nkind = \"pi\"\niterations = 10\n[workloads.b]\nkind = \"pi\"\niterations = 10\n";

    fn keys(extra: &str) -> Vec<String> {
        let spec = load(&format!("{BASE}{extra}"), "t.toml", &[]).unwrap();
        crate::plan::expand(&spec, 1)
            .into_iter()
            .map(|r| r.key)
            .collect()
    }

    #[test]
    fn an_entry_leaves_out_the_runs_with_all_its_levels() {
        let all = keys("");
        assert_eq!(all.len(), 2 * 2 * 2 * 2 * 2);
        let some = keys(
            "[[matrix.exclude]]\nworkload = \"a\"\nprocesses = 2\n\
             [[matrix.exclude]]\npolicy = \"fifo\"\ncpus = \"0,1\"\n",
        );
        // (a, 2) is a quarter of the runs, (fifo, 0-1) another quarter,
        // (a, 2, fifo, 0-1) is in both.
        assert_eq!(some.len(), 32 - 8 - 8 + 2);
        for k in &some {
            assert!(
                !(k.contains("workload=a;") && k.contains("processes=2;")),
                "{k}"
            );
            assert!(
                !(k.contains("policy=fifo;") && k.contains("cpus=0-1;")),
                "{k}"
            );
        }
        let expected = all
            .iter()
            .filter(|k| !(k.contains("workload=a;") && k.contains("processes=2;")))
            .filter(|k| !(k.contains("policy=fifo;") && k.contains("cpus=0-1;")))
            .count();
        assert_eq!(some.len(), expected);
    }

    #[test]
    fn bad_entries_are_refused_naming_the_entry_and_key() {
        for (entry, key, words) in [
            ("foo = \"x\"", "matrix.exclude[0].foo", "not a factor"),
            (
                "workload = \"c\"",
                "matrix.exclude[0].workload",
                "lists a, b",
            ),
            (
                "processes = \"2\"",
                "matrix.exclude[0].processes",
                "integer",
            ),
            ("processes = 3", "matrix.exclude[0].processes", "lists 1, 2"),
            (
                "machine = \"g\"",
                "matrix.exclude[0].machine",
                "does not sweep",
            ),
            ("cpus = \"x\"", "matrix.exclude[0].cpus", ""),
        ] {
            let text = format!("{BASE}[[matrix.exclude]]\n{entry}\n");
            let e = load(&text, "t.toml", &[]).unwrap_err().to_string();
            assert!(e.contains(key) && e.contains(words), "{entry}: {e}");
        }
        let e = load(&format!("{BASE}[[matrix.exclude]]\n"), "t.toml", &[])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("matrix.exclude[0]") && e.contains("names no level"),
            "{e}"
        );
        let e = load(
            &format!("{BASE}[[matrix.exclude]]\npolicy = \"other\"\n[[matrix.exclude]]\npolicy = \"fifo\"\n"),
            "t.toml",
            &[],
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("matrix.exclude") && e.contains("no run"), "{e}");
    }
}
