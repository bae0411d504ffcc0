//! Exports of stored runs for other tools: one row per process per run,
//! the columns [`COLUMNS`] followed by one `fig_<name>` column per workload
//! figure found in the exported rows (README's "Using the data" lists them
//! with their units), in one of three formats behind one trait,
//! [`Exporter`], as hyperfine's exporters: CSV (`csv.rs`), JSON (the same
//! rows as an array of objects with the same keys, one object per line;
//! `json.rs`) and Parquet (the same rows and columns, typed:
//! [`Column::kind`]; `parquet.rs`). Each column is defined once, in
//! [`COLUMNS`]: name, type, nullability and value; the per-process fields'
//! columns come from the field registry ([`crate::fields::FIELDS`]).
//!
//! Rows are written one at a time as the store reads them
//! ([`Exporter::row`]), so an export never holds a campaign in memory.

use anyhow::Result;
use serde_json::Value;
use std::io::Write;

mod csv;
mod json;
pub mod parquet;

use crate::fields::{ExportPlace, FIELDS, Field, FieldDef};
use crate::record::ProcessUsage;
use crate::store::{ExportLatency, ExportRow, ExportTrace, rq_wait_per_slice_us};
use std::sync::LazyLock;

/// The type of a column's values (Parquet: INT64, DOUBLE, STRING).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Int,
    Real,
    Text,
}

/// Whether a column may be empty (null).
pub const NULLABLE: bool = true;
pub const REQUIRED: bool = false;

/// One fixed column of an export, defined once: its name, the type of its
/// values, whether it may be empty, and how its value is taken from a row.
/// CSV's header, JSON's keys and Parquet's schema all come from [`COLUMNS`].
#[derive(Clone, Copy)]
pub struct Column {
    pub name: &'static str,
    pub kind: Kind,
    pub nullable: bool,
    value: Source,
}

/// Where a column's value comes from.
#[derive(Clone, Copy)]
enum Source {
    Row(fn(&ExportRow) -> Value),
    /// A per-process field of the registry.
    Field(Field),
}

impl Column {
    /// The column's value in row `r`.
    pub fn value(&self, r: &ExportRow) -> Value {
        match self.value {
            Source::Row(f) => f(r),
            Source::Field(f) => int(r.kernel.get(f).map(|v| v as i64)),
        }
    }
}

impl std::fmt::Debug for Column {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ({:?}, nullable {})",
            self.name, self.kind, self.nullable
        )
    }
}

const fn col(
    name: &'static str,
    kind: Kind,
    nullable: bool,
    value: fn(&ExportRow) -> Value,
) -> Column {
    Column {
        name,
        kind,
        nullable,
        value: Source::Row(value),
    }
}

/// The column of a registry field.
fn field_column(d: &FieldDef) -> Column {
    Column {
        name: d.name,
        kind: Kind::Int,
        nullable: NULLABLE,
        value: Source::Field(d.field),
    }
}

/// Every column of an export before its `fig_*` ones, in order: the fixed
/// ones ([`FIXED`]), each followed by the registry's fields placed after it
/// ([`ExportPlace::After`], each followed in turn by those placed after
/// it: where their columns were before the registry), then the fields
/// placed at the end.
pub static COLUMNS: LazyLock<Vec<Column>> = LazyLock::new(|| {
    fn with_followers(out: &mut Vec<Column>, c: Column) {
        out.push(c);
        for d in FIELDS
            .iter()
            .filter(|d| d.export == ExportPlace::After(c.name))
        {
            with_followers(out, field_column(d));
        }
    }
    let mut out = Vec::with_capacity(FIXED.len() + FIELDS.len());
    for &c in FIXED {
        with_followers(&mut out, c);
    }
    for d in FIELDS.iter().filter(|d| d.export == ExportPlace::End) {
        with_followers(&mut out, field_column(d));
    }
    assert_eq!(
        out.len(),
        FIXED.len() + FIELDS.len(),
        "each field's export column follows a column"
    );
    out
});

/// The fixed columns, in order; the fields' columns join them
/// ([`COLUMNS`]) and `fig_*` columns (all `Real`, nullable) follow them.
/// The first 21 columns of [`COLUMNS`] (these, the switches' after
/// `stime_us` and the schedstat fields' after `nivcsw`) are the original
/// ones; never reorder, only append.
/// README's "Using the data" documents this schema.
const FIXED: &[Column] = &[
    col("campaign", Kind::Int, REQUIRED, |r| Value::from(r.campaign)),
    col("run", Kind::Int, REQUIRED, |r| Value::from(r.run)),
    col("policy", Kind::Text, REQUIRED, |r| {
        Value::from(r.policy.as_str())
    }),
    col("workload", Kind::Text, REQUIRED, |r| {
        Value::from(r.workload.as_str())
    }),
    col("processes", Kind::Int, REQUIRED, |r| {
        Value::from(r.processes)
    }),
    col("priority_mode", Kind::Text, REQUIRED, |r| {
        Value::from(r.priority_mode.as_str())
    }),
    col("cpus", Kind::Text, REQUIRED, |r| {
        Value::from(r.cpus.as_str())
    }),
    col("rep", Kind::Int, REQUIRED, |r| Value::from(r.rep)),
    col("process_index", Kind::Int, NULLABLE, |r| {
        int(r.process_index)
    }),
    col("nice", Kind::Int, NULLABLE, |r| int(r.nice)),
    col("rt_priority", Kind::Int, NULLABLE, |r| int(r.rt_priority)),
    col("wall_ns", Kind::Int, NULLABLE, |r| int(r.wall_ns)),
    col("utime_us", Kind::Int, NULLABLE, |r| {
        usage(r, |u| u.utime_us)
    }),
    col("stime_us", Kind::Int, NULLABLE, |r| {
        usage(r, |u| u.stime_us)
    }),
    col("work", Kind::Int, NULLABLE, |r| int(r.work)),
    col("status", Kind::Text, REQUIRED, |r| {
        Value::from(r.status.as_str())
    }),
    col("campaign_name", Kind::Text, REQUIRED, |r| {
        Value::from(r.campaign_name.as_str())
    }),
    col("run_key", Kind::Text, REQUIRED, |r| {
        Value::from(r.run_key.as_str())
    }),
    col("seq", Kind::Int, REQUIRED, |r| Value::from(r.seq)),
    col("workload_kind", Kind::Text, REQUIRED, |r| {
        Value::from(r.workload_kind.as_str())
    }),
    col("scale", Kind::Real, NULLABLE, |r| real(Some(r.scale))),
    col("reason", Kind::Text, REQUIRED, |r| {
        Value::from(r.reason.as_str())
    }),
    col("makespan_ns", Kind::Int, NULLABLE, |r| int(r.makespan_ns)),
    col("cpu_util", Kind::Real, NULLABLE, |r| real(r.cpu_util)),
    col("pid", Kind::Int, NULLABLE, |r| int(r.pid)),
    col("start_ns", Kind::Int, NULLABLE, |r| int(r.start_ns)),
    col("end_ns", Kind::Int, NULLABLE, |r| int(r.end_ns)),
    col("maxrss_kb", Kind::Int, NULLABLE, |r| {
        given(r, |u| u.maxrss_kb)
    }),
    col("work_unit", Kind::Text, NULLABLE, |r| {
        text(r.work_unit.as_deref())
    }),
    col("exit", Kind::Text, NULLABLE, |r| text(r.exit.as_deref())),
    col("role", Kind::Text, NULLABLE, |r| text(r.role.as_deref())),
    col("rt_runtime_us", Kind::Int, NULLABLE, |r| {
        int(r.rt_runtime_us)
    }),
    col("cpu_list", Kind::Text, REQUIRED, |r| {
        Value::from(r.cpu_list.as_str())
    }),
    col("started_unix_ms", Kind::Int, REQUIRED, |r| {
        Value::from(r.started_unix_ms)
    }),
    col("load_avg_1m", Kind::Real, NULLABLE, |r| real(r.load_avg_1m)),
    col("environment_id", Kind::Int, REQUIRED, |r| {
        Value::from(r.environment_id)
    }),
    col("process_policy", Kind::Text, NULLABLE, |r| {
        text(r.process_policy.as_deref())
    }),
    col("weight", Kind::Int, NULLABLE, |r| int(r.weight)),
    col("dl_runtime_ns", Kind::Int, NULLABLE, |r| {
        int(r.dl_runtime_ns)
    }),
    col("dl_deadline_ns", Kind::Int, NULLABLE, |r| {
        int(r.dl_deadline_ns)
    }),
    col("dl_period_ns", Kind::Int, NULLABLE, |r| int(r.dl_period_ns)),
    col("ok", Kind::Int, NULLABLE, |r| int(r.ok.map(i64::from))),
    col("stderr_tail", Kind::Text, NULLABLE, |r| {
        text(r.stderr_tail.as_deref())
    }),
    col("extra_json", Kind::Text, REQUIRED, |r| {
        Value::from(r.extra_json.as_str())
    }),
    col("others_runnable", Kind::Int, NULLABLE, |r| {
        int(r.others_runnable)
    }),
    col("steal_pct", Kind::Real, NULLABLE, |r| real(r.steal_pct)),
    col("other_cpu_pct", Kind::Real, NULLABLE, |r| {
        real(r.other_cpu_pct)
    }),
    col("lat_count", Kind::Int, NULLABLE, |r| {
        int(r.latency.as_ref().map(|l| l.count as i64))
    }),
    col("lat_p50_us", Kind::Real, NULLABLE, |r| {
        lat_us(r, |l| l.p50_ns)
    }),
    col("lat_p90_us", Kind::Real, NULLABLE, |r| {
        lat_us(r, |l| l.p90_ns)
    }),
    col("lat_p99_us", Kind::Real, NULLABLE, |r| {
        lat_us(r, |l| l.p99_ns)
    }),
    col("lat_p999_us", Kind::Real, NULLABLE, |r| {
        lat_us(r, |l| l.p999_ns)
    }),
    col("lat_max_us", Kind::Real, NULLABLE, |r| {
        lat_us(r, |l| l.max_ns)
    }),
    col("rq_wait_per_slice_us", Kind::Real, NULLABLE, |r| {
        real(rq_wait_per_slice_us(&r.kernel))
    }),
    col("slice_us", Kind::Int, NULLABLE, |r| int(r.slice_us)),
    col("slice_ns", Kind::Int, NULLABLE, |r| int(r.slice_ns)),
    col("campaign_uuid", Kind::Text, REQUIRED, |r| {
        Value::from(r.campaign_uuid.as_str())
    }),
    col("hostname", Kind::Text, NULLABLE, |r| {
        text(r.hostname.as_deref())
    }),
    col("host_id", Kind::Text, NULLABLE, |r| {
        text(r.host_id.as_deref())
    }),
    col("kernel_release", Kind::Text, REQUIRED, |r| {
        Value::from(r.kernel_release.as_str())
    }),
    col("trace_lost_events", Kind::Int, NULLABLE, |r| {
        int(r.trace.as_ref().map(|t| t.lost_events))
    }),
    col("trace_usable", Kind::Int, NULLABLE, |r| {
        int(r.trace.as_ref().map(|t| i64::from(!t.unusable)))
    }),
    col("trace_slices", Kind::Int, NULLABLE, |r| {
        trace_int(r, |t| t.slices)
    }),
    col("trace_slice_p50_us", Kind::Real, NULLABLE, |r| {
        trace_scaled(r, |t| t.slice_p50_ns, 1e3)
    }),
    col("trace_slice_p99_us", Kind::Real, NULLABLE, |r| {
        trace_scaled(r, |t| t.slice_p99_ns, 1e3)
    }),
    col("trace_slice_max_us", Kind::Real, NULLABLE, |r| {
        trace_scaled(r, |t| t.slice_max_ns, 1e3)
    }),
    col("trace_oncpu_ms", Kind::Real, NULLABLE, |r| {
        trace_scaled(r, |t| t.oncpu_ns, 1e6)
    }),
    col("trace_preempted", Kind::Int, NULLABLE, |r| {
        trace_int(r, |t| t.preempted)
    }),
    col("trace_yielded", Kind::Int, NULLABLE, |r| {
        trace_int(r, |t| t.yielded)
    }),
    col("trace_voluntary", Kind::Int, NULLABLE, |r| {
        trace_int(r, |t| t.voluntary)
    }),
    col("trace_migrations", Kind::Int, NULLABLE, |r| {
        trace_int(r, |t| t.migrations)
    }),
    col("trace_wake_p50_us", Kind::Real, NULLABLE, |r| {
        trace_scaled(r, |t| t.wake_p50_ns, 1e3)
    }),
    col("trace_wake_p99_us", Kind::Real, NULLABLE, |r| {
        trace_scaled(r, |t| t.wake_p99_ns, 1e3)
    }),
    col("trace_work_oncpu_ms", Kind::Real, NULLABLE, |r| {
        trace_scaled(r, |t| t.work_oncpu_ns, 1e6)
    }),
    col("trace_work_switches", Kind::Int, NULLABLE, |r| {
        trace_int(r, |t| t.work_switches)
    }),
    col("ext_scheduler", Kind::Text, NULLABLE, |r| {
        text(r.ext_scheduler.as_deref())
    }),
    col("machine", Kind::Text, NULLABLE, |r| {
        text(r.machine.as_deref())
    }),
    col("interrupts", Kind::Int, NULLABLE, |r| int(r.interrupts)),
    col("softirqs", Kind::Int, NULLABLE, |r| int(r.softirqs)),
    col("cpu_freq_khz", Kind::Real, NULLABLE, |r| {
        real(r.cpu_freq_khz)
    }),
    col("throttle_count", Kind::Int, NULLABLE, |r| {
        int(r.throttle_count)
    }),
];

/// The prefix of a workload figure's column.
pub const FIGURE_PREFIX: &str = "fig_";

/// An export's file format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Csv,
    Json,
    /// Typed columns in a binary file.
    Parquet,
}

impl Format {
    pub const ALL: [Format; 3] = [Format::Csv, Format::Json, Format::Parquet];

    /// The name on the command line (`--format csv`).
    pub fn name(self) -> &'static str {
        match self {
            Format::Csv => "csv",
            Format::Json => "json",
            Format::Parquet => "parquet",
        }
    }

    /// Whether the format is binary (no use on a terminal).
    pub fn binary(self) -> bool {
        self == Format::Parquet
    }

    /// Start an export in this format whose rows carry these figures (the
    /// union over the rows to come): writes what comes before the first
    /// row (CSV's header, JSON's opening bracket).
    pub fn begin<'a>(
        self,
        out: &'a mut (dyn Write + Send),
        figure_names: Vec<String>,
    ) -> Result<Box<dyn Exporter + 'a>> {
        Ok(match self {
            Format::Csv => Box::new(csv::CsvExporter::begin(out, figure_names)?),
            Format::Json => Box::new(json::JsonExporter::begin(out, figure_names)?),
            Format::Parquet => Box::new(parquet::ParquetExporter::begin(out, figure_names)?),
        })
    }
}

/// One format's writer of an export: [`Format::begin`], then
/// [`Exporter::row`] for each row as the store reads it, then
/// [`Exporter::finish`].
pub trait Exporter {
    /// Write one row (a format may buffer it).
    fn row(&mut self, r: &ExportRow) -> Result<()>;
    /// Write what is buffered and what closes the file; returns the rows
    /// written.
    fn finish(self: Box<Self>) -> Result<u64>;
}

/// Every column of an export whose rows have these figures.
pub fn header(figure_names: &[String]) -> Vec<String> {
    COLUMNS
        .iter()
        .map(|c| c.name.to_string())
        .chain(figure_names.iter().map(|f| format!("{FIGURE_PREFIX}{f}")))
        .collect()
}

fn int(v: Option<i64>) -> Value {
    v.map_or(Value::Null, Value::from)
}

fn real(v: Option<f64>) -> Value {
    v.and_then(serde_json::Number::from_f64)
        .map_or(Value::Null, Value::Number)
}

fn text(v: Option<&str>) -> Value {
    v.map_or(Value::Null, Value::from)
}

/// The values of the fixed columns of a row, in [`COLUMNS`] order.
fn fixed(r: &ExportRow) -> Vec<Value> {
    COLUMNS.iter().map(|c| c.value(r)).collect()
}

/// A resource usage counter of the row's process.
fn usage(r: &ExportRow, field: fn(&ProcessUsage) -> u64) -> Value {
    int(r.usage.as_ref().map(|u| field(u) as i64))
}

/// A usage figure of the row's process that the kernel may not have given
/// (a program's tree): empty where it did not, never 0.
fn given(r: &ExportRow, field: fn(&ProcessUsage) -> Option<u64>) -> Value {
    int(r.usage.as_ref().and_then(field).map(|v| v as i64))
}

/// A count of the row's process in the run's trace.
fn trace_int(r: &ExportRow, field: fn(&ExportTrace) -> Option<i64>) -> Value {
    int(r.trace.as_ref().and_then(field))
}

/// A time of the row's process in the run's trace, ns divided by `per`
/// (1e3: µs, 1e6: ms).
fn trace_scaled(r: &ExportRow, field: fn(&ExportTrace) -> Option<i64>, per: f64) -> Value {
    real(r.trace.as_ref().and_then(field).map(|v| v as f64 / per))
}

/// A percentile of the row's primary latency, in microseconds.
fn lat_us(r: &ExportRow, field: fn(&ExportLatency) -> i64) -> Value {
    real(r.latency.as_ref().map(|l| field(l) as f64 / 1e3))
}

/// Every value of a row: the fixed columns, then one per figure name
/// (null where the row lacks that figure).
pub fn values(r: &ExportRow, figure_names: &[String]) -> Vec<Value> {
    let mut v = fixed(r);
    v.extend(figure_names.iter().map(|f| real(r.figures.get(f).copied())));
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::KernelCounts;

    pub(super) fn row() -> ExportRow {
        ExportRow {
            campaign: 1,
            campaign_name: "c".into(),
            run: 2,
            run_key: "k".into(),
            seq: 0,
            policy: "fifo".into(),
            workload: "pi".into(),
            workload_kind: "pi".into(),
            processes: 2,
            priority_mode: "uniform".into(),
            cpus: "0".into(),
            cpu_list: "0".into(),
            rep: 1,
            scale: 0.5,
            rt_runtime_us: None,
            status: "ok".into(),
            reason: String::new(),
            makespan_ns: Some(10),
            cpu_util: Some(0.5),
            started_unix_ms: 1_700_000_000_000,
            load_avg_1m: Some(0.25),
            environment_id: 1,
            extra_json: r#"{"parent":"deadline"}"#.into(),
            others_runnable: Some(2),
            steal_pct: None,
            other_cpu_pct: Some(1.5),
            interrupts: Some(1234),
            softirqs: Some(567),
            cpu_freq_khz: None,
            throttle_count: None,
            process_index: Some(0),
            role: Some("worker".into()),
            pid: Some(42),
            process_policy: Some("fifo".into()),
            nice: None,
            rt_priority: Some(50),
            weight: None,
            dl_runtime_ns: None,
            dl_deadline_ns: None,
            dl_period_ns: None,
            start_ns: Some(1),
            end_ns: Some(9),
            wall_ns: Some(9),
            usage: Some(ProcessUsage {
                utime_us: 3,
                stime_us: 0,
                maxrss_kb: Some(100),
            }),
            work: Some(1000),
            work_unit: Some("iterations".into()),
            figures: [("pi_error".to_string(), 1e-9)].into_iter().collect(),
            exit: Some("exit code 0".into()),
            ok: Some(true),
            latency: None,
            slice_us: None,
            slice_ns: None,
            trace: None,
            ext_scheduler: None,
            machine: None,
            stderr_tail: Some(String::new()),
            campaign_uuid: "c0ffee00-0000-4000-8000-000000000001".into(),
            hostname: Some("host-a".into()),
            host_id: None,
            kernel_release: "6.18.0".into(),
            kernel: KernelCounts::default()
                .with(Field::Nvcsw, Some(1))
                .with(Field::Nivcsw, Some(0))
                .with(Field::Minflt, Some(5))
                .with(Field::Majflt, Some(0))
                .with(Field::RunNs, Some(3000))
                .with(Field::WaitNs, Some(10))
                .with(Field::Timeslices, Some(1)),
        }
    }

    /// The registry's fields' columns sit where the columns of the same
    /// names were before it: the schedstat trio among the original 21,
    /// `nr_migrations` after `machine`, the later fields at the end.
    #[test]
    fn the_fields_columns_keep_their_places() {
        let names: Vec<&str> = COLUMNS.iter().map(|c| c.name).collect();
        assert_eq!(
            names[..21].join(","),
            "campaign,run,policy,workload,processes,priority_mode,cpus,rep,process_index,nice,\
             rt_priority,wall_ns,utime_us,stime_us,nvcsw,nivcsw,run_ns,wait_ns,timeslices,work,status"
        );
        let at = |n: &str| names.iter().position(|&c| c == n).unwrap();
        assert_eq!(at("nr_migrations"), at("machine") + 1);
        // The page faults between end_ns and maxrss_kb, as before.
        assert_eq!(
            names[at("end_ns")..=at("maxrss_kb")],
            ["end_ns", "minflt", "majflt", "maxrss_kb"]
        );
        assert_eq!(at("interrupts"), at("nr_migrations") + 1);
        // After the last fixed column, in registry order (a new field's
        // comes after them).
        assert_eq!(
            names[at("throttle_count") + 1..][..3],
            ["cpus_used", "llc_migrations", "node_migrations"]
        );
        let text = export(Format::Csv, &[row()], &[]);
        let cells: Vec<&str> = text.lines().nth(1).unwrap().split(',').collect();
        assert_eq!(cells[16..19], ["3000", "10", "1"]);
        let rq = cells[at("rq_wait_per_slice_us")].parse::<f64>().unwrap();
        assert!((rq - 0.01).abs() < 1e-12, "{rq}");
    }

    fn export(format: Format, rows: &[ExportRow], figures: &[&str]) -> String {
        let mut out = Vec::new();
        let names = figures.iter().map(|f| f.to_string()).collect();
        let mut e = format.begin(&mut out, names).unwrap();
        for r in rows {
            e.row(r).unwrap();
        }
        assert_eq!(e.finish().unwrap(), rows.len() as u64);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn every_column_has_the_type_of_its_values() {
        let mut empty = row();
        empty.process_index = None;
        empty.usage = None;
        empty.pid = None;
        empty.hostname = None;
        for r in [row(), empty] {
            for (c, v) in COLUMNS.iter().zip(fixed(&r)) {
                let (name, kind, nullable) = (c.name, &c.kind, &c.nullable);
                let fits = match (kind, &v) {
                    (_, Value::Null) => *nullable,
                    (Kind::Int, Value::Number(n)) => n.is_i64(),
                    (Kind::Real, Value::Number(_)) => true,
                    (Kind::Text, Value::String(_)) => true,
                    _ => false,
                };
                assert!(fits, "{name}: {v:?} is not {kind:?} (nullable {nullable})");
            }
        }
    }

    #[test]
    fn header_and_fields_line_up() {
        assert_eq!(fixed(&row()).len(), COLUMNS.len());
        let text = export(Format::Csv, &[row()], &["mflops", "pi_error"]);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with(
            "campaign,run,policy,workload,processes,priority_mode,cpus,rep,process_index"
        ));
        // The existing columns keep their order; a field placed at the
        // end follows them, in registry order, before the figures.
        assert!(lines[0].contains(
            ",nr_migrations,interrupts,softirqs,cpu_freq_khz,throttle_count,cpus_used,\
             llc_migrations,node_migrations,"
        ));
        let at_end: Vec<&str> = FIELDS
            .iter()
            .filter(|d| d.export == ExportPlace::End)
            .map(|d| d.name)
            .collect();
        assert!(
            lines[0].ends_with(&format!(",{},fig_mflops,fig_pi_error", at_end.join(","))),
            "{}",
            lines[0]
        );
        // The JSON of extra_json is one quoted cell.
        let cells: Vec<&str> = lines[1].split(',').collect();
        assert_eq!(cells.len(), COLUMNS.len() + 2);
        let col = |name: &str| cells[COLUMNS.iter().position(|c| c.name == name).unwrap()];
        assert_eq!(col("rt_priority"), "50");
        assert_eq!(col("nice"), "");
        assert_eq!(col("work"), "1000");
        assert_eq!(col("status"), "ok");
        assert_eq!(col("ok"), "1");
        assert_eq!(col("load_avg_1m"), "0.25");
        assert_eq!(col("others_runnable"), "2");
        assert_eq!(col("interrupts"), "1234");
        assert_eq!(col("softirqs"), "567");
        assert_eq!(col("cpu_freq_khz"), "");
        assert_eq!(col("steal_pct"), "");
        assert_eq!(col("extra_json"), r#""{""parent"":""deadline""}""#);
        assert_eq!(cells[COLUMNS.len()], "", "no mflops figure");
        assert_eq!(cells[COLUMNS.len() + 1].parse::<f64>().unwrap(), 1e-9);
    }

    #[test]
    fn json_rows_are_objects_with_the_csv_columns() {
        let text = export(Format::Json, &[row(), row()], &["mflops", "pi_error"]);
        let v: Value = serde_json::from_str(&text).unwrap();
        let rows = v.as_array().unwrap();
        assert_eq!(rows.len(), 2);
        let keys: Vec<&String> = rows[0].as_object().unwrap().keys().collect();
        assert_eq!(keys.len(), COLUMNS.len() + 2);
        assert!(
            text.lines()
                .nth(1)
                .unwrap()
                .starts_with(r#"{"campaign":1,"run":2,"#)
        );
        assert_eq!(rows[0]["fig_mflops"], Value::Null);
        assert_eq!(rows[0]["fig_pi_error"].as_f64(), Some(1e-9));
        assert_eq!(rows[0]["rt_priority"], 50);
        assert_eq!(rows[0]["nice"], Value::Null);
        let empty: Value = serde_json::from_str(&export(Format::Json, &[], &[])).unwrap();
        assert_eq!(empty, serde_json::json!([]));
    }
}
