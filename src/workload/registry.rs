//! Every workload kind, registered once: the spec's `kind` names and their
//! parsers, looked up by name. The list itself is made with the
//! [`Workload`] enum from the one list of kinds in `workload/mod.rs`.

use super::Workload;
use super::keys::{KeyError, Keys};
use super::kind::Entry;

/// The registered kinds, in the order help and errors list them.
pub const KINDS: &[Entry] = super::ENTRIES;

/// The kinds' names.
pub fn names() -> Vec<&'static str> {
    KINDS.iter().map(|e| e.name).collect()
}

/// The registration of kind `name`.
pub fn find(name: &str) -> Option<&'static Entry> {
    KINDS.iter().find(|e| e.name == name)
}

/// Parse table `[workloads.NAME]` (already resolved to `kind`).
pub fn parse(name: &str, kind: &str, table: &toml::Table) -> Result<Workload, KeyError> {
    let entry = find(kind).ok_or_else(|| KeyError {
        key: format!("workloads.{name}.kind"),
        message: format!("unknown workload kind \"{kind}\""),
    })?;
    (entry.parse)(&Keys::new(name, kind, table))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_parses_its_defaults_and_names_itself() {
        let empty = toml::Table::new();
        // A command has no default program.
        let command: toml::Table = "argv = [\"true\"]".parse().unwrap();
        // Nor a replay default tasks.
        let replay: toml::Table = "tasks = [{ name = \"t0\", ops = [] }]".parse().unwrap();
        for e in KINDS {
            let table = match e.name {
                "command" => &command,
                "replay" => &replay,
                _ => &empty,
            };
            let w = parse(e.name, e.name, table).unwrap();
            assert_eq!(w.kind(), e.name);
            // Each kind's serialised tag is its name.
            let json = serde_json::to_value(&w).unwrap();
            assert_eq!(json["kind"], e.name);
        }
        let mut names = names();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), KINDS.len());
    }
}
