//! The registry of per-process fields ([`FIELDS`]) and the metrics a report
//! analyses ([`metric`]). Both sit below the store, the campaign, the
//! report, `compare` and the exports, which all iterate them.
//!
//! A field is one optional count per process, measured by a reader (the
//! kernel's per-process accounting, the trace, the model) and carried in
//! [`ProcessFields`] from the launcher to the store and from the store to
//! the exports and the report. Each row of [`FIELDS`] says everything the
//! layers above need: its `processes` column and SQL type, its unit and
//! which way is better, who fills it, its export column and place, its
//! report metric and why it can be absent. A new field is then its reader,
//! one row here (with its [`Field`] variant) and a store migration that
//! adds its column.

pub mod metric;
pub mod process;

use serde::de::{IgnoredAny, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use metric::Direction;

/// One per-process field; its row of [`FIELDS`] is `field as usize`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Field {
    NrMigrations,
    CpusUsed,
    LlcMigrations,
    NodeMigrations,
    RunNs,
    WaitNs,
    Timeslices,
}

/// Who fills a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Reader {
    /// `getrusage`/`wait4` of the process.
    Rusage,
    /// `/proc/PID/schedstat` and `/proc/PID/sched`.
    Schedstat,
    /// taskstats exit records of a program's tree.
    Taskstats,
    /// The accounting of the worker's own cgroup.
    Cgroup,
    /// The run's kernel trace (`--trace`).
    Trace,
    /// The model's predicted timeline (`schedlab simulate`).
    Model,
}

/// Where a field's export column sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportPlace {
    /// Right after the named column (a fixed one or another field's):
    /// where a column put there before the registry stays, so existing
    /// exports keep their order.
    After(&'static str),
    /// After every fixed column, before the figures: every new field.
    End,
}

/// A field's report metric, as `compare`, the report and `--metric` name
/// and show it: its name and unit (the field's unless given), the factor
/// from the field's unit to the metric's, and where it sits among the
/// metrics.
#[derive(Debug, Clone, Copy)]
pub struct FieldMetric {
    /// The metric's name; None: the field's. The schedstat trio keep the
    /// names their metrics had before the registry ("run", "wait").
    pub name: Option<&'static str>,
    /// The metric's unit; None: the field's.
    pub unit: Option<&'static str>,
    /// Multiplies a stored value into the metric's unit (1e-6: ns to ms).
    pub scale: f64,
    /// The metric it follows in [`metric::METRICS`] (and so in a report),
    /// by name; None: after the per-process metrics not of a field, in
    /// registry order.
    pub after: Option<&'static str>,
}

impl FieldMetric {
    /// A metric named as its field and in its unit, after the per-process
    /// metrics not of a field.
    pub const AS_STORED: FieldMetric = FieldMetric {
        name: None,
        unit: None,
        scale: 1.0,
        after: None,
    };
}

/// One field, defined once.
#[derive(Debug, Clone, Copy)]
pub struct FieldDef {
    pub field: Field,
    /// The `processes` column, the export column, the JSON key of a
    /// process record and the metric's name on the command line.
    pub name: &'static str,
    /// The column's SQL type (its migration declares it so).
    pub sql_type: &'static str,
    /// Unit of the values ("" for counts).
    pub unit: &'static str,
    pub direction: Direction,
    /// Who fills it, in order of preference.
    pub readers: &'static [Reader],
    pub export: ExportPlace,
    /// Whether a process record's JSON has its key (null) when it was not
    /// measured: the schedstat trio's did before the registry. Every other
    /// field's key is left out then.
    pub json_null: bool,
    /// The report's metric: its name, unit and place; words for sentences
    /// and titles, whether they are a plural noun, what it is (for
    /// `--metric`'s help) and whether a report analyses it when no
    /// `--metric` is given.
    pub metric: FieldMetric,
    pub label: &'static str,
    pub plural: bool,
    pub description: &'static str,
    pub by_default: bool,
    /// Why a process can lack it (a report's "not given" note), and the
    /// key of a program tree's `extra.command[].missing` (a run's record
    /// of why its tree lacks a figure) that says why a tree lacks it.
    pub absent: &'static str,
    pub tree_missing: &'static str,
}

use Direction::LowerIsBetter as Lower;

/// Every field, in the order of [`Field`]'s variants. Append only: the
/// order is the export's for fields placed at its end.
pub const FIELDS: &[FieldDef] = &[
    FieldDef {
        field: Field::NrMigrations,
        name: "nr_migrations",
        sql_type: "INTEGER",
        unit: "",
        direction: Lower,
        readers: &[Reader::Schedstat],
        export: ExportPlace::After("machine"),
        json_null: false,
        metric: FieldMetric::AS_STORED,
        label: "migrations between CPUs",
        plural: true,
        description: "Migrations between CPUs (/proc/PID/sched se.nr_migrations)",
        by_default: false,
        absent: "not read for a program's tree, an RT hog, or a kernel without \
                 CONFIG_SCHED_DEBUG's /proc/PID/sched",
        tree_missing: "nr_migrations",
    },
    FieldDef {
        field: Field::CpusUsed,
        name: "cpus_used",
        sql_type: "INTEGER",
        unit: "CPUs",
        direction: Lower,
        readers: &[Reader::Trace, Reader::Model],
        export: ExportPlace::End,
        json_null: false,
        metric: FieldMetric::AS_STORED,
        label: "CPUs used",
        plural: true,
        description: "Distinct CPUs the process's tasks ran on over its work (trace, model)",
        by_default: false,
        absent: "only a traced or simulated run gives it (no kernel counter says which CPUs a task ran on)",
        tree_missing: "cpus_used",
    },
    FieldDef {
        field: Field::LlcMigrations,
        name: "llc_migrations",
        sql_type: "INTEGER",
        unit: "",
        direction: Lower,
        readers: &[Reader::Trace],
        export: ExportPlace::End,
        json_null: false,
        metric: FieldMetric::AS_STORED,
        label: "migrations across an LLC",
        plural: true,
        description: "Migrations between CPUs of different last-level caches over its work (trace)",
        by_default: false,
        absent: "only a traced run of a machine whose CPU topology was recorded gives it",
        tree_missing: "llc_migrations",
    },
    FieldDef {
        field: Field::NodeMigrations,
        name: "node_migrations",
        sql_type: "INTEGER",
        unit: "",
        direction: Lower,
        readers: &[Reader::Trace],
        export: ExportPlace::End,
        json_null: false,
        metric: FieldMetric::AS_STORED,
        label: "migrations across a NUMA node",
        plural: true,
        description: "Migrations between CPUs of different NUMA nodes over its work (trace)",
        by_default: false,
        absent: "only a traced run of a machine whose CPU topology was recorded gives it",
        tree_missing: "node_migrations",
    },
    FieldDef {
        field: Field::RunNs,
        name: "run_ns",
        sql_type: "INTEGER",
        unit: "ns",
        direction: Lower,
        readers: &[Reader::Schedstat, Reader::Cgroup, Reader::Model],
        export: ExportPlace::After("nivcsw"),
        json_null: true,
        metric: FieldMetric {
            name: Some("run"),
            unit: Some("s"),
            scale: 1e-9,
            after: Some("wait"),
        },
        label: "on-CPU time",
        plural: false,
        description: "On-CPU time (schedstat), s",
        by_default: true,
        absent: SCHEDSTAT_ABSENT,
        tree_missing: "cpu_usage_ns",
    },
    FieldDef {
        field: Field::WaitNs,
        name: "wait_ns",
        sql_type: "INTEGER",
        unit: "ns",
        direction: Lower,
        readers: &[Reader::Schedstat, Reader::Taskstats, Reader::Model],
        export: ExportPlace::After("run_ns"),
        json_null: true,
        metric: FieldMetric {
            name: Some("wait"),
            unit: Some("ms"),
            scale: 1e-6,
            after: Some("nivcsw"),
        },
        label: "run-queue wait",
        plural: false,
        description: "Run-queue wait (schedstat), ms",
        by_default: true,
        absent: SCHEDSTAT_ABSENT,
        tree_missing: "run_queue_wait_ns",
    },
    FieldDef {
        field: Field::Timeslices,
        name: "timeslices",
        sql_type: "INTEGER",
        unit: "",
        direction: Lower,
        readers: &[Reader::Schedstat, Reader::Taskstats, Reader::Model],
        export: ExportPlace::After("wait_ns"),
        json_null: true,
        metric: FieldMetric {
            after: Some("run"),
            ..FieldMetric::AS_STORED
        },
        label: "time slices",
        plural: true,
        description: "Time slices (schedstat)",
        by_default: true,
        absent: SCHEDSTAT_ABSENT,
        tree_missing: "timeslices",
    },
];

/// Why a process lacks a figure of `/proc/PID/schedstat` (a program's
/// tree says why in its own record: [`FieldDef::tree_missing`]).
const SCHEDSTAT_ABSENT: &str = "not recorded for this run (no /proc/PID/schedstat: a kernel \
                                without CONFIG_SCHED_INFO, or a database of an older schedlab)";

/// How many fields there are.
pub const FIELD_COUNT: usize = FIELDS.len();

// Each row of FIELDS is its variant's.
const _: () = {
    let mut i = 0;
    while i < FIELDS.len() {
        assert!(
            FIELDS[i].field as usize == i,
            "FIELDS follows Field's order"
        );
        i += 1;
    }
};

impl FieldDef {
    /// Its metric's name: [`FieldMetric::name`], else the field's.
    pub const fn metric_name(&self) -> &'static str {
        match self.metric.name {
            Some(n) => n,
            None => self.name,
        }
    }

    /// Its metric's unit: [`FieldMetric::unit`], else the field's.
    pub const fn metric_unit(&self) -> &'static str {
        match self.metric.unit {
            Some(u) => u,
            None => self.unit,
        }
    }
}

impl Field {
    /// This field's row of [`FIELDS`].
    pub const fn def(self) -> &'static FieldDef {
        &FIELDS[self as usize]
    }

    pub fn name(self) -> &'static str {
        self.def().name
    }

    /// Its value in a process's fields as its metric shows it (in the
    /// metric's unit), NaN where it was not measured.
    #[inline]
    pub fn metric_value(self, v: &ProcessFields) -> f64 {
        v.get(self)
            .map_or(f64::NAN, |x| x as f64 * self.def().metric.scale)
    }

    /// Every field, in registry order.
    pub fn all() -> impl Iterator<Item = Field> {
        FIELDS.iter().map(|d| d.field)
    }

    /// The field named `name` (its column).
    pub fn parse(name: &str) -> Option<Field> {
        FIELDS.iter().find(|d| d.name == name).map(|d| d.field)
    }
}

/// The values of every field of one process, each None where it was not
/// measured (see the field's `absent`). Serialised as a map of the
/// measured ones by name (flattened into a process record's JSON).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ProcessFields {
    values: [Option<u64>; FIELD_COUNT],
}

impl ProcessFields {
    pub fn get(&self, f: Field) -> Option<u64> {
        self.values[f as usize]
    }

    pub fn set(&mut self, f: Field, v: Option<u64>) {
        self.values[f as usize] = v;
    }

    /// With `f` set to `v`.
    pub fn with(mut self, f: Field, v: Option<u64>) -> ProcessFields {
        self.set(f, v);
        self
    }

    /// Whether no field was measured.
    pub fn is_empty(&self) -> bool {
        self.values.iter().all(Option::is_none)
    }
}

impl ProcessFields {
    /// A map of the measured fields by name and, with `nulls`, of the
    /// unmeasured ones whose [`FieldDef::json_null`] says so, as null.
    fn serialize_map<S: Serializer>(&self, s: S, nulls: bool) -> Result<S::Ok, S::Error> {
        let keyed = |d: &FieldDef| self.get(d.field).is_some() || (nulls && d.json_null);
        let mut map = s.serialize_map(Some(FIELDS.iter().filter(|d| keyed(d)).count()))?;
        for d in FIELDS.iter().filter(|d| keyed(d)) {
            map.serialize_entry(d.name, &self.get(d.field))?;
        }
        map.end()
    }
}

impl Serialize for ProcessFields {
    /// The measured fields only.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.serialize_map(s, false)
    }
}

/// A process record's fields (flattened into it, `serialize_with`): the
/// measured ones, and a null for each unmeasured one whose key a record
/// always has ([`FieldDef::json_null`]).
pub fn serialize_in_record<S: Serializer>(v: &ProcessFields, s: S) -> Result<S::Ok, S::Error> {
    v.serialize_map(s, true)
}

impl<'de> Deserialize<'de> for ProcessFields {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<ProcessFields, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ProcessFields;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a map of per-process fields")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<ProcessFields, A::Error> {
                let mut out = ProcessFields::default();
                // Flattened: the other keys of the record come through too.
                while let Some(key) = m.next_key::<String>()? {
                    match Field::parse(&key) {
                        Some(f) => out.set(f, m.next_value::<Option<u64>>()?),
                        None => {
                            m.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(out)
            }
        }
        d.deserialize_map(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_columns_and_every_field_says_why_it_can_be_absent() {
        let mut names: Vec<&str> = FIELDS.iter().map(|d| d.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), FIELDS.len());
        for d in FIELDS {
            assert!(d.name.chars().all(|c| c.is_ascii_lowercase() || c == '_'));
            assert_eq!(d.sql_type, "INTEGER", "ProcessFields holds counts");
            assert!(!d.readers.is_empty() && !d.absent.is_empty() && !d.label.is_empty());
            assert_eq!(Field::parse(d.name), Some(d.field));
        }
    }

    #[test]
    fn values_serialise_as_a_map_of_the_measured_ones() {
        let v = ProcessFields::default()
            .with(Field::NrMigrations, Some(4))
            .with(Field::CpusUsed, Some(2));
        let json = serde_json::to_value(v).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"nr_migrations": 4, "cpus_used": 2})
        );
        let back: ProcessFields = serde_json::from_value(
            serde_json::json!({"cpus_used": 2, "nr_migrations": 4, "x": [1]}),
        )
        .unwrap();
        assert_eq!(back, v);
        assert!(ProcessFields::default().is_empty());
    }
}
