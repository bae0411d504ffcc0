//! How two campaigns' validated specs differ: a key-path diff of their JSON
//! ("workloads[pi].workload.stop.iterations: 1000000 → 2000000"), so that
//! `compare` can refuse specs that differ and `--force` can list what does.

use serde::Serialize;
use serde_json::Value;

/// Keys of a spec that name or describe it, or say how to analyse it,
/// without changing what is run.
pub const IGNORED_KEYS: [&str; 3] = ["name", "description", "compare_margin_pct"];

/// One key whose value differs (None: the key is absent on that side).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SpecDifference {
    /// "processes[1]", "workloads[pi].workload.stop.iterations".
    pub path: String,
    pub baseline: Option<String>,
    pub candidate: Option<String>,
}

impl SpecDifference {
    /// "processes[1]: 4 → 8", "hog: (absent) → {…}".
    pub fn line(&self) -> String {
        let show = |v: &Option<String>| v.clone().unwrap_or_else(|| "(absent)".into());
        format!(
            "{}: {} → {}",
            self.path,
            show(&self.baseline),
            show(&self.candidate)
        )
    }
}

/// The differences between two specs given as JSON text, in key order;
/// [`IGNORED_KEYS`] at the top level are left out. Text that is not JSON is
/// compared as a whole.
pub fn spec_differences(baseline: &str, candidate: &str) -> Vec<SpecDifference> {
    let parse = |s: &str| serde_json::from_str::<Value>(s).unwrap_or(Value::String(s.into()));
    let (mut a, mut b) = (parse(baseline), parse(candidate));
    for v in [&mut a, &mut b] {
        if let Value::Object(m) = v {
            for k in IGNORED_KEYS {
                m.remove(k);
            }
        }
    }
    let mut out = Vec::new();
    diff(&a, &b, "", &mut out);
    out
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// A short rendering of a value for a difference line.
fn show(v: &Value) -> String {
    let s = match v {
        Value::String(s) => format!("\"{s}\""),
        other => other.to_string(),
    };
    const MAX: usize = 120;
    if s.chars().count() > MAX {
        let mut t: String = s.chars().take(MAX - 1).collect();
        t.push('…');
        t
    } else {
        s
    }
}

/// The name of each element when every element of both arrays is an
/// object with a distinct string "name" (workloads, priority modes).
fn names<'a>(a: &'a [Value], b: &'a [Value]) -> Option<(Vec<&'a str>, Vec<&'a str>)> {
    let of = |v: &'a [Value]| -> Option<Vec<&'a str>> {
        let n: Vec<&str> = v
            .iter()
            .map(|x| x.get("name").and_then(Value::as_str))
            .collect::<Option<_>>()?;
        let mut sorted = n.clone();
        sorted.sort_unstable();
        sorted.dedup();
        (sorted.len() == n.len()).then_some(n)
    };
    Some((of(a)?, of(b)?))
}

fn diff(a: &Value, b: &Value, path: &str, out: &mut Vec<SpecDifference>) {
    if a == b {
        return;
    }
    let at = |p: &str| {
        if p.is_empty() {
            "(spec)".to_string()
        } else {
            p.to_string()
        }
    };
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                let p = join(path, k);
                match (x.get(k), y.get(k)) {
                    (Some(u), Some(v)) => diff(u, v, &p, out),
                    (u, v) => out.push(SpecDifference {
                        path: p,
                        baseline: u.map(show),
                        candidate: v.map(show),
                    }),
                }
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            if let Some((nx, ny)) = names(x, y) {
                // Named elements: matched by name, in the baseline's order
                // then the candidate's new ones.
                let mut all: Vec<&str> = nx.clone();
                all.extend(ny.iter().filter(|n| !nx.contains(n)));
                for name in all {
                    let p = format!("{}[{name}]", at(path));
                    let u = nx.iter().position(|n| *n == name).map(|i| &x[i]);
                    let v = ny.iter().position(|n| *n == name).map(|i| &y[i]);
                    match (u, v) {
                        (Some(u), Some(v)) => diff(u, v, &p, out),
                        (u, v) => out.push(SpecDifference {
                            path: p,
                            baseline: u.map(show),
                            candidate: v.map(show),
                        }),
                    }
                }
                return;
            }
            // Lists of plain values (policies, process counts): the lists
            // themselves, which say more than element positions.
            if x.iter().chain(y).all(|v| !v.is_object() && !v.is_array()) {
                out.push(SpecDifference {
                    path: at(path),
                    baseline: Some(show(a)),
                    candidate: Some(show(b)),
                });
                return;
            }
            for i in 0..x.len().max(y.len()) {
                let p = format!("{}[{i}]", at(path));
                match (x.get(i), y.get(i)) {
                    (Some(u), Some(v)) => diff(u, v, &p, out),
                    (u, v) => out.push(SpecDifference {
                        path: p,
                        baseline: u.map(show),
                        candidate: v.map(show),
                    }),
                }
            }
        }
        _ => out.push(SpecDifference {
            path: at(path),
            baseline: Some(show(a)),
            candidate: Some(show(b)),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec_json(toml: &str) -> String {
        let spec = crate::spec::load(toml, "test", &[]).unwrap();
        serde_json::to_string(&spec).unwrap()
    }

    const BASE: &str = "name = \"a\"\nrepetitions = 3\n[matrix]\npolicy = [\"other\", \"fifo\"]\n\
                        workload = [\"pi\"]\nprocesses = [2, 4]\n[workloads.pi]\niterations = 1000000\n";

    #[test]
    fn equal_specs_and_names_alone_do_not_differ() {
        assert!(spec_differences(&spec_json(BASE), &spec_json(BASE)).is_empty());
        let renamed = BASE.replace("name = \"a\"", "name = \"b\"\ndescription = \"x\"");
        assert!(spec_differences(&spec_json(BASE), &spec_json(&renamed)).is_empty());
    }

    #[test]
    fn differences_are_key_paths_with_both_values() {
        let cand = BASE
            .replace("processes = [2, 4]", "processes = [2, 8]")
            .replace("iterations = 1000000", "iterations = 2000000")
            .replace("repetitions = 3", "repetitions = 5");
        let d = spec_differences(&spec_json(BASE), &spec_json(&cand));
        let lines: Vec<String> = d.iter().map(SpecDifference::line).collect();
        assert!(
            lines.contains(&"processes: [2,4] → [2,8]".to_string()),
            "{lines:?}"
        );
        assert!(
            lines.contains(&"repetitions: 3 → 5".to_string()),
            "{lines:?}"
        );
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("workloads[pi].") && l.contains("1000000 → 2000000")),
            "{lines:?}"
        );
        assert_eq!(d.len(), 3, "{lines:?}");
    }

    #[test]
    fn absent_keys_and_named_elements() {
        let a = r#"{"workloads":[{"name":"pi","n":1}],"x":1}"#;
        let b = r#"{"workloads":[{"name":"pi","n":1},{"name":"copy","n":2}],"y":"z"}"#;
        let lines: Vec<String> = spec_differences(a, b)
            .iter()
            .map(SpecDifference::line)
            .collect();
        assert_eq!(
            lines,
            [
                "workloads[copy]: (absent) → {\"n\":2,\"name\":\"copy\"}",
                "x: 1 → (absent)",
                "y: (absent) → \"z\""
            ]
        );
        // Not JSON: compared as text.
        assert_eq!(
            spec_differences("x", "y")[0].line(),
            "(spec): \"x\" → \"y\""
        );
    }
}
