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
//! key's place in a process record's JSON, its report metric (if it has
//! one) and why it can be absent. A new field is then its reader, one row
//! here (with its [`Field`] variant) and a store migration that adds its
//! column. A reader is the read of the kernel's figure and the line that
//! sets the field from it: for rusage, `sys::proc::Usage` and
//! `record::rusage_fields`; for a program's tree, `sys::cgroup::taskstats`
//! (the exit record), `sys::cgroup::stats` (its sum over the tree's tasks)
//! and `launch::program` (the tree's fields). A field without a report
//! metric takes no room in a report's process rows ([`MetricFields`]).

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
    Nvcsw,
    Nivcsw,
    Minflt,
    Majflt,
    Inblock,
    Oublock,
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

/// Where a process record's JSON (a run's record as the guest sends it,
/// `machine::protocol`) has a field's key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordPlace {
    /// Among the usage, after `stime_us` and before `maxrss_kb`: where
    /// the rusage counters' keys were before the registry.
    Usage,
    /// After `latency`: every other field.
    Fields,
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
    /// Where a process record's JSON has its key.
    pub record: RecordPlace,
    /// Whether a process record's JSON has its key (null) when it was not
    /// measured: the schedstat trio's and the rusage counters' did before
    /// the registry. Every other field's key is left out then.
    pub json_null: bool,
    /// The report's metric (None: a report does not analyse it, as the
    /// page faults): its name, unit and place; words for sentences
    /// and titles, whether they are a plural noun, what it is (for
    /// `--metric`'s help) and whether a report analyses it when no
    /// `--metric` is given.
    pub metric: Option<FieldMetric>,
    pub label: &'static str,
    pub plural: bool,
    pub description: &'static str,
    pub by_default: bool,
    /// Why a process can lack it (a report's "not given" note), and the
    /// key of a program tree's `extra.command[].missing` (a run's record
    /// of why its tree lacks a figure) that says why a tree lacks it.
    pub absent: &'static str,
    pub tree_missing: &'static str,
    /// Why a program's tree lacks it when its run's record does not say;
    /// None: as any process ([`FieldDef::absent`]).
    pub tree_absent: Option<&'static str>,
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
        record: RecordPlace::Fields,
        json_null: false,
        metric: Some(FieldMetric::AS_STORED),
        label: "migrations between CPUs",
        plural: true,
        description: "Migrations between CPUs (/proc/PID/sched se.nr_migrations)",
        by_default: false,
        absent: "not read for a program's tree, an RT hog, or a kernel without \
                 CONFIG_SCHED_DEBUG's /proc/PID/sched",
        tree_missing: "nr_migrations",
        tree_absent: None,
    },
    FieldDef {
        field: Field::CpusUsed,
        name: "cpus_used",
        sql_type: "INTEGER",
        unit: "CPUs",
        direction: Lower,
        readers: &[Reader::Trace, Reader::Model],
        export: ExportPlace::End,
        record: RecordPlace::Fields,
        json_null: false,
        metric: Some(FieldMetric::AS_STORED),
        label: "CPUs used",
        plural: true,
        description: "Distinct CPUs the process's tasks ran on over its work (trace, model)",
        by_default: false,
        absent: "only a traced or simulated run gives it (no kernel counter says which CPUs a task ran on)",
        tree_missing: "cpus_used",
        tree_absent: None,
    },
    FieldDef {
        field: Field::LlcMigrations,
        name: "llc_migrations",
        sql_type: "INTEGER",
        unit: "",
        direction: Lower,
        readers: &[Reader::Trace],
        export: ExportPlace::End,
        record: RecordPlace::Fields,
        json_null: false,
        metric: Some(FieldMetric::AS_STORED),
        label: "migrations across an LLC",
        plural: true,
        description: "Migrations between CPUs of different last-level caches over its work (trace)",
        by_default: false,
        absent: "only a traced run of a machine whose CPU topology was recorded gives it",
        tree_missing: "llc_migrations",
        tree_absent: None,
    },
    FieldDef {
        field: Field::NodeMigrations,
        name: "node_migrations",
        sql_type: "INTEGER",
        unit: "",
        direction: Lower,
        readers: &[Reader::Trace],
        export: ExportPlace::End,
        record: RecordPlace::Fields,
        json_null: false,
        metric: Some(FieldMetric::AS_STORED),
        label: "migrations across a NUMA node",
        plural: true,
        description: "Migrations between CPUs of different NUMA nodes over its work (trace)",
        by_default: false,
        absent: "only a traced run of a machine whose CPU topology was recorded gives it",
        tree_missing: "node_migrations",
        tree_absent: None,
    },
    FieldDef {
        field: Field::RunNs,
        name: "run_ns",
        sql_type: "INTEGER",
        unit: "ns",
        direction: Lower,
        readers: &[Reader::Schedstat, Reader::Cgroup, Reader::Model],
        export: ExportPlace::After("nivcsw"),
        record: RecordPlace::Fields,
        json_null: true,
        metric: Some(FieldMetric {
            name: Some("run"),
            unit: Some("s"),
            scale: 1e-9,
            after: Some("wait"),
        }),
        label: "on-CPU time",
        plural: false,
        description: "On-CPU time (schedstat), s",
        by_default: true,
        absent: SCHEDSTAT_ABSENT,
        tree_missing: "cpu_usage_ns",
        tree_absent: None,
    },
    FieldDef {
        field: Field::WaitNs,
        name: "wait_ns",
        sql_type: "INTEGER",
        unit: "ns",
        direction: Lower,
        readers: &[Reader::Schedstat, Reader::Taskstats, Reader::Model],
        export: ExportPlace::After("run_ns"),
        record: RecordPlace::Fields,
        json_null: true,
        metric: Some(FieldMetric {
            name: Some("wait"),
            unit: Some("ms"),
            scale: 1e-6,
            after: Some("nivcsw"),
        }),
        label: "run-queue wait",
        plural: false,
        description: "Run-queue wait (schedstat), ms",
        by_default: true,
        absent: SCHEDSTAT_ABSENT,
        tree_missing: "run_queue_wait_ns",
        tree_absent: None,
    },
    FieldDef {
        field: Field::Timeslices,
        name: "timeslices",
        sql_type: "INTEGER",
        unit: "",
        direction: Lower,
        readers: &[Reader::Schedstat, Reader::Taskstats, Reader::Model],
        export: ExportPlace::After("wait_ns"),
        record: RecordPlace::Fields,
        json_null: true,
        metric: Some(FieldMetric {
            after: Some("run"),
            ..FieldMetric::AS_STORED
        }),
        label: "time slices",
        plural: true,
        description: "Time slices (schedstat)",
        by_default: true,
        absent: SCHEDSTAT_ABSENT,
        tree_missing: "timeslices",
        tree_absent: None,
    },
    FieldDef {
        field: Field::Nvcsw,
        name: "nvcsw",
        sql_type: "INTEGER",
        unit: "",
        direction: Lower,
        readers: &[Reader::Rusage, Reader::Taskstats, Reader::Model],
        export: ExportPlace::After("stime_us"),
        record: RecordPlace::Usage,
        json_null: true,
        metric: Some(FieldMetric {
            after: Some("cpu_pct"),
            ..FieldMetric::AS_STORED
        }),
        label: "voluntary context switches",
        plural: true,
        description: "Voluntary context switches",
        by_default: true,
        absent: NOT_RECORDED,
        tree_missing: "voluntary_switches",
        tree_absent: Some(TREE_NOT_SAID),
    },
    FieldDef {
        field: Field::Nivcsw,
        name: "nivcsw",
        sql_type: "INTEGER",
        unit: "",
        direction: Lower,
        readers: &[Reader::Rusage, Reader::Taskstats, Reader::Model],
        export: ExportPlace::After("nvcsw"),
        record: RecordPlace::Usage,
        json_null: true,
        metric: Some(FieldMetric {
            after: Some("nvcsw"),
            ..FieldMetric::AS_STORED
        }),
        label: "involuntary context switches",
        plural: true,
        description: "Involuntary context switches (preemptions)",
        by_default: true,
        absent: NOT_RECORDED,
        tree_missing: "involuntary_switches",
        tree_absent: Some(TREE_NOT_SAID),
    },
    FieldDef {
        field: Field::Minflt,
        name: "minflt",
        sql_type: "INTEGER",
        unit: "",
        direction: Lower,
        readers: &[Reader::Rusage, Reader::Taskstats, Reader::Model],
        export: ExportPlace::After("end_ns"),
        record: RecordPlace::Usage,
        json_null: true,
        metric: None,
        label: "minor page faults",
        plural: true,
        description: "Minor page faults (no I/O)",
        by_default: false,
        absent: NOT_RECORDED,
        tree_missing: "minor_faults",
        tree_absent: Some(TREE_NOT_SAID),
    },
    FieldDef {
        field: Field::Majflt,
        name: "majflt",
        sql_type: "INTEGER",
        unit: "",
        direction: Lower,
        readers: &[Reader::Rusage, Reader::Taskstats, Reader::Model],
        export: ExportPlace::After("minflt"),
        record: RecordPlace::Usage,
        json_null: true,
        metric: None,
        label: "major page faults",
        plural: true,
        description: "Major page faults (with I/O)",
        by_default: false,
        absent: NOT_RECORDED,
        tree_missing: "major_faults",
        tree_absent: Some(TREE_NOT_SAID),
    },
    FieldDef {
        field: Field::Inblock,
        name: "inblock",
        sql_type: "INTEGER",
        unit: "512-byte blocks",
        direction: Lower,
        readers: &[Reader::Rusage, Reader::Taskstats],
        export: ExportPlace::End,
        record: RecordPlace::Fields,
        json_null: false,
        metric: None,
        label: "blocks read from storage",
        plural: true,
        description: "Filesystem input operations in 512-byte blocks (rusage ru_inblock: \
                      bytes the process had read from storage, not from the page cache)",
        by_default: false,
        absent: IO_ABSENT,
        tree_missing: "read_blocks",
        tree_absent: None,
    },
    FieldDef {
        field: Field::Oublock,
        name: "oublock",
        sql_type: "INTEGER",
        unit: "512-byte blocks",
        direction: Lower,
        readers: &[Reader::Rusage, Reader::Taskstats],
        export: ExportPlace::End,
        record: RecordPlace::Fields,
        json_null: false,
        metric: None,
        label: "blocks written to storage",
        plural: true,
        description: "Filesystem output operations in 512-byte blocks (rusage ru_oublock: \
                      page-cache pages the process dirtied for storage, less those truncated \
                      before writeback)",
        by_default: false,
        absent: IO_ABSENT,
        tree_missing: "write_blocks",
        tree_absent: None,
    },
];

/// Why a process lacks its block I/O counts.
const IO_ABSENT: &str = "not given by a kernel without per-task I/O accounting \
                         (CONFIG_TASK_IO_ACCOUNTING: no /proc/PID/io), nor by the model (which \
                         does no I/O), nor in rows stored before schema 16";

/// Why a process lacks a figure of `/proc/PID/schedstat` (a program's
/// tree says why in its own record: [`FieldDef::tree_missing`]).
const SCHEDSTAT_ABSENT: &str = "not recorded for this run (no /proc/PID/schedstat: a kernel \
                                without CONFIG_SCHED_INFO, or a database of an older schedlab)";

/// Why a process lacks a usage counter (its rusage has every one: a row
/// of a database that does not have it), or any figure not of a field.
pub const NOT_RECORDED: &str = "not recorded for this run";

/// Why a program's tree lacks a figure when its run does not say why
/// (its `extra.command[].missing` names none).
pub const TREE_NOT_SAID: &str = "not given for the program's tree (the run does not say why)";

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
        match self.metric {
            Some(FieldMetric { name: Some(n), .. }) => n,
            _ => self.name,
        }
    }

    /// Its metric's unit: [`FieldMetric::unit`], else the field's.
    pub const fn metric_unit(&self) -> &'static str {
        match self.metric {
            Some(FieldMetric { unit: Some(u), .. }) => u,
            _ => self.unit,
        }
    }

    /// Multiplies a stored value into its metric's unit.
    pub const fn metric_scale(&self) -> f64 {
        match self.metric {
            Some(m) => m.scale,
            None => 1.0,
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
    pub fn metric_value(self, v: &MetricFields) -> f64 {
        v.get(self)
            .map_or(f64::NAN, |x| x as f64 * self.def().metric_scale())
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
/// measured ones by name (flattened into a process record's JSON:
/// [`ProcessFields::in_record`]).
///
/// The values and a mask of the measured ones take 8 bytes a field, where
/// `Option<u64>`s take 16; a report's rows hold only the fields with a
/// metric ([`MetricFields`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ProcessFields {
    /// Field `i`'s value where measured, 0 where not (so that equal
    /// fields compare equal).
    values: [u64; FIELD_COUNT],
    /// Bit `i`: field `i` was measured.
    measured: u32,
}

const _: () = assert!(FIELD_COUNT <= u32::BITS as usize, "a bit per field");

impl ProcessFields {
    #[inline]
    pub fn get(&self, f: Field) -> Option<u64> {
        let i = f as usize;
        (self.measured >> i & 1 == 1).then_some(self.values[i])
    }

    pub fn set(&mut self, f: Field, v: Option<u64>) {
        let i = f as usize;
        self.values[i] = v.unwrap_or(0);
        self.measured = (self.measured & !(1 << i)) | (u32::from(v.is_some()) << i);
    }

    /// With `f` set to `v`.
    pub fn with(mut self, f: Field, v: Option<u64>) -> ProcessFields {
        self.set(f, v);
        self
    }

    /// Whether no field was measured.
    pub fn is_empty(&self) -> bool {
        self.measured == 0
    }

    /// Only the fields that have a report metric, as a report's process
    /// rows hold them ([`process::ReportProcess::kernel`]).
    pub fn of_metrics(&self) -> MetricFields {
        let mut m = MetricFields::default();
        for d in FIELDS.iter().filter(|d| d.metric.is_some()) {
            m.set(d.field, self.get(d.field));
        }
        m
    }

    /// The fields a process record's JSON has at `place` (to flatten into
    /// it): the measured ones, and a null for each unmeasured one whose
    /// key a record always has ([`FieldDef::json_null`]).
    pub fn in_record(&self, place: RecordPlace) -> InRecord<'_> {
        InRecord {
            fields: self,
            place,
        }
    }

    /// A map of the fields by name: of `place`'s, the measured ones and
    /// the unmeasured whose key a record has; else the measured ones.
    fn serialize_map<S: Serializer>(
        &self,
        s: S,
        place: Option<RecordPlace>,
    ) -> Result<S::Ok, S::Error> {
        let keyed = |d: &FieldDef| match place {
            Some(p) => d.record == p && (self.get(d.field).is_some() || d.json_null),
            None => self.get(d.field).is_some(),
        };
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
        self.serialize_map(s, None)
    }
}

/// How many fields have a report metric.
pub const METRIC_FIELD_COUNT: usize = {
    let (mut f, mut n) = (0, 0);
    while f < FIELD_COUNT {
        if FIELDS[f].metric.is_some() {
            n += 1;
        }
        f += 1;
    }
    n
};

/// Each field's slot in [`MetricFields`], in registry order among the
/// fields with a metric (`usize::MAX` for a field without one).
const METRIC_SLOT: [usize; FIELD_COUNT] = {
    let mut slots = [usize::MAX; FIELD_COUNT];
    let (mut f, mut n) = (0, 0);
    while f < FIELD_COUNT {
        if FIELDS[f].metric.is_some() {
            slots[f] = n;
            n += 1;
        }
        f += 1;
    }
    slots
};

/// The values of the fields of one process that have a report metric,
/// as a report's process rows hold them: a report holds millions of
/// rows, so a field no metric reads (the page faults, the block I/O
/// counts) takes no room in them. Reads and writes as
/// [`ProcessFields`]; a field without a metric reads as None.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MetricFields {
    values: [u64; METRIC_FIELD_COUNT],
    /// Bit `i`: slot `i` was measured.
    measured: u32,
}

impl MetricFields {
    #[inline]
    pub fn get(&self, f: Field) -> Option<u64> {
        let i = *METRIC_SLOT.get(f as usize)?;
        (i != usize::MAX && self.measured >> i & 1 == 1).then(|| self.values[i])
    }

    /// Sets `f`, which must have a metric (a row holds no other).
    pub fn set(&mut self, f: Field, v: Option<u64>) {
        let i = METRIC_SLOT[f as usize];
        assert!(i != usize::MAX, "{} has no report metric", f.name());
        self.values[i] = v.unwrap_or(0);
        self.measured = (self.measured & !(1 << i)) | (u32::from(v.is_some()) << i);
    }

    /// With `f` set to `v`.
    pub fn with(mut self, f: Field, v: Option<u64>) -> MetricFields {
        self.set(f, v);
        self
    }
}

impl From<MetricFields> for ProcessFields {
    fn from(m: MetricFields) -> ProcessFields {
        let mut out = ProcessFields::default();
        for d in FIELDS.iter().filter(|d| d.metric.is_some()) {
            out.set(d.field, m.get(d.field));
        }
        out
    }
}

/// The fields of one place of a process record's JSON
/// ([`ProcessFields::in_record`]).
pub struct InRecord<'a> {
    fields: &'a ProcessFields,
    place: RecordPlace,
}

impl Serialize for InRecord<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.fields.serialize_map(s, Some(self.place))
    }
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
        // A field set then cleared is as one never set.
        let cleared = v.with(Field::Majflt, Some(9)).with(Field::Majflt, None);
        assert_eq!(cleared, v);
        assert_eq!(v.with(Field::Majflt, Some(0)).get(Field::Majflt), Some(0));
    }

    /// A report row's fields are those with a metric: the others (page
    /// faults, block I/O) are dropped, the rest read back as they were.
    #[test]
    fn a_report_row_keeps_only_the_fields_with_a_metric() {
        let v = ProcessFields::default()
            .with(Field::RunNs, Some(5))
            .with(Field::Nivcsw, Some(0))
            .with(Field::Oublock, Some(8));
        let m = v.of_metrics();
        assert_eq!(m.get(Field::RunNs), Some(5));
        assert_eq!(m.get(Field::Nivcsw), Some(0));
        assert_eq!((m.get(Field::Oublock), m.get(Field::WaitNs)), (None, None));
        assert_eq!(ProcessFields::from(m), v.with(Field::Oublock, None));
        assert_eq!(m.with(Field::RunNs, None).get(Field::RunNs), None);
        assert_eq!(
            METRIC_FIELD_COUNT,
            FIELDS.iter().filter(|d| d.metric.is_some()).count()
        );
    }
}
