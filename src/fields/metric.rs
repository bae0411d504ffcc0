//! The metrics a report can analyse, with their names, units, which way is
//! better (for `schedlab compare`) and how each is obtained from a process
//! row: the fixed ones here, and one per field of the registry
//! ([`super::FIELDS`]), which `compare`, the report and the campaign's
//! precision rule all iterate.

use serde::{Serialize, Serializer};

use super::process::ReportProcess;
use super::{FIELD_COUNT, FIELDS, Field, FieldDef, FieldMetric};

/// A measured quantity. Per-process metrics are averaged over the processes
/// of a run to give the run's value; `makespan` is a property of the run.
/// Ordered as [`METRICS`] (by [`Metric::index`]), the order of a report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Metric {
    /// Wall time of a process, s.
    Wall,
    /// User CPU time, s.
    Utime,
    /// System CPU time, s.
    Stime,
    /// (user + system CPU) / wall time, %.
    CpuPct,
    /// Work done, in the workload's unit.
    Work,
    /// A per-process field of the registry ([`super::FIELDS`]) that has a
    /// metric: among them the context switches ([`Metric::Nvcsw`],
    /// [`Metric::Nivcsw`]), schedstat's run-queue wait ([`Metric::Wait`]),
    /// on-CPU time ([`Metric::Run`]) and time slices
    /// ([`Metric::Timeslices`]).
    Field(Field),
    /// Run makespan: barrier release to the last worker's end, s.
    Makespan,
    /// Median latency of a run (its workers' primary histograms pooled),
    /// µs. A metric of `compare` only, for campaigns that store latency;
    /// the report shows latency in its own section.
    LatencyP50,
    /// 99th-percentile latency of a run, µs (as [`Metric::LatencyP50`]).
    LatencyP99,
}

// The metrics of the rusage switches and the schedstat trio, named as the
// variants they were before they joined the registry (matched on like
// variants).
#[allow(non_upper_case_globals)]
impl Metric {
    /// Voluntary context switches.
    pub const Nvcsw: Metric = Metric::Field(Field::Nvcsw);
    /// Involuntary context switches (preemptions).
    pub const Nivcsw: Metric = Metric::Field(Field::Nivcsw);
    /// Run-queue wait (schedstat), ms.
    pub const Wait: Metric = Metric::Field(Field::WaitNs);
    /// On-CPU time (schedstat), s.
    pub const Run: Metric = Metric::Field(Field::RunNs);
    /// Time slices (schedstat).
    pub const Timeslices: Metric = Metric::Field(Field::Timeslices);
}

impl Ord for Metric {
    fn cmp(&self, other: &Metric) -> std::cmp::Ordering {
        self.index().cmp(&other.index())
    }
}

impl PartialOrd for Metric {
    fn partial_cmp(&self, other: &Metric) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Serialize for Metric {
    /// By its name ("wall", "nr_migrations").
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// Which way a metric improves: what `schedlab compare` calls better.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Times, latencies, switches, waits: less is better.
    LowerIsBetter,
    /// Throughput and work rates: more is better.
    HigherIsBetter,
}

impl Direction {
    /// "lower is better".
    pub fn words(self) -> &'static str {
        match self {
            Direction::LowerIsBetter => "lower is better",
            Direction::HigherIsBetter => "higher is better",
        }
    }

    /// Whether going from `from` to `to` is an improvement (None when
    /// equal or not finite).
    pub fn improved(self, from: f64, to: f64) -> Option<bool> {
        if !from.is_finite() || !to.is_finite() || from == to {
            return None;
        }
        Some(match self {
            Direction::LowerIsBetter => to < from,
            Direction::HigherIsBetter => to > from,
        })
    }
}

/// One metric, defined once: every property of a [`Metric`] is read from
/// its row of [`METRICS`]. A new per-process field is a row of the field
/// registry ([`super::FIELDS`]), which gives its metric and its place; a
/// metric computed from the fixed columns is a variant of [`Metric`]
/// (before `Field`: the per-process metrics come first) and a row of
/// [`FIXED`].
#[derive(Clone, Copy)]
pub struct MetricDef {
    pub metric: Metric,
    /// The name used on the command line and in JSON.
    pub name: &'static str,
    /// What the metric is, with its unit: for help texts (`--metric`).
    pub description: &'static str,
    /// Words for sentences and titles.
    pub label: &'static str,
    /// Unit of the values ("" for counts; work's unit depends on the
    /// workload and is given separately).
    pub unit: &'static str,
    pub direction: Direction,
    /// Whether the label is a plural noun ("context switches are").
    pub plural: bool,
    /// A per-process metric's value in a process row (NaN where the row has
    /// none); None for a run's own metric and a field's.
    pub of_process: Option<fn(&ReportProcess) -> f64>,
    /// A field's metric: its value is the field's
    /// ([`ReportProcess::kernel`]), scaled into the metric's unit
    /// ([`Field::metric_value`]).
    pub field: Option<Field>,
    /// Whether a report analyses it when no `--metric` is given (the
    /// metrics of [`Metric::ALL`]); the others are chosen by name.
    pub by_default: bool,
}

const fn def(
    metric: Metric,
    name: &'static str,
    label: &'static str,
    unit: &'static str,
    direction: Direction,
    description: &'static str,
) -> MetricDef {
    MetricDef {
        metric,
        name,
        description,
        label,
        unit,
        direction,
        plural: false,
        of_process: None,
        field: None,
        by_default: true,
    }
}

/// The metric of a field, from its registry row.
const fn field_def(d: &FieldDef) -> MetricDef {
    MetricDef {
        metric: Metric::Field(d.field),
        name: d.metric_name(),
        description: d.description,
        label: d.label,
        unit: d.metric_unit(),
        direction: d.direction,
        plural: d.plural,
        of_process: None,
        field: Some(d.field),
        by_default: d.by_default,
    }
}

impl MetricDef {
    /// Read per process, from a process row.
    const fn per_process(mut self, f: fn(&ReportProcess) -> f64) -> MetricDef {
        self.of_process = Some(f);
        self
    }

    /// Analysed only when asked for by name.
    const fn on_request(mut self) -> MetricDef {
        self.by_default = false;
        self
    }
}

/// An optional count of a process row; NaN when absent.
fn opt(v: Option<i64>) -> f64 {
    v.map_or(f64::NAN, |x| x as f64)
}

use Direction::{HigherIsBetter as Higher, LowerIsBetter as Lower};

/// The metrics not of a field, in the order of [`Metric`]'s variants (the
/// fields' come among the per-process ones, each where its row places it,
/// see [`METRICS`]). Times (wall, CPU, makespan), like the fields' (switch
/// counts: each one a scheduling event that costs the process time;
/// on-CPU time, run-queue wait, slices, migrations), are better lower;
/// work done (in a fixed duration: a throughput) and CPU % (the share of
/// its lifetime a process spent running rather than waiting) are better
/// higher.
const FIXED: &[MetricDef] = &[
    def(
        Metric::Wall,
        "wall",
        "wall time",
        "s",
        Lower,
        "Wall time of a process, s",
    )
    .per_process(|p| p.wall_ns as f64 / 1e9),
    def(
        Metric::Utime,
        "utime",
        "user CPU time",
        "s",
        Lower,
        "User CPU time, s",
    )
    .per_process(|p| p.usage.utime_us as f64 / 1e6),
    def(
        Metric::Stime,
        "stime",
        "system CPU time",
        "s",
        Lower,
        "System CPU time, s",
    )
    .per_process(|p| p.usage.stime_us as f64 / 1e6),
    def(
        Metric::CpuPct,
        "cpu_pct",
        "CPU %",
        "%",
        Higher,
        "(user + system CPU) / wall time, %",
    )
    .per_process(|p| {
        if p.wall_ns > 0 {
            let cpu_s = (p.usage.utime_us + p.usage.stime_us) as f64 / 1e6;
            100.0 * cpu_s / (p.wall_ns as f64 / 1e9)
        } else {
            f64::NAN
        }
    }),
    def(
        Metric::Work,
        "work",
        "work done",
        "",
        Higher,
        "Work done, in the workload's unit",
    )
    .per_process(|p| opt(p.work)),
    def(
        Metric::Makespan,
        "makespan",
        "makespan",
        "s",
        Lower,
        "Run makespan: barrier release to the last worker's end, s",
    ),
    def(
        Metric::LatencyP50,
        "latency_p50",
        "per-run p50 latency",
        "µs",
        Lower,
        "Median latency of a run (its primary latency histogram), µs",
    )
    .on_request(),
    def(
        Metric::LatencyP99,
        "latency_p99",
        "per-run p99 latency",
        "µs",
        Lower,
        "99th-percentile latency of a run, µs",
    )
    .on_request(),
];

/// The fixed metrics read per process (they come first in [`FIXED`]).
const FIXED_PER_PROCESS: usize = {
    let mut n = 0;
    while FIXED[n].of_process.is_some() {
        n += 1;
    }
    n
};

/// How many fields have a metric.
const FIELD_METRICS: usize = {
    let (mut f, mut n) = (0, 0);
    while f < FIELD_COUNT {
        if FIELDS[f].metric.is_some() {
            n += 1;
        }
        f += 1;
    }
    n
};

/// Where each metric sits in [`METRICS`].
struct Layout {
    defs: [MetricDef; FIXED.len() + FIELD_METRICS],
    /// The index of each metric of [`FIXED`], by its row there.
    fixed: [usize; FIXED.len()],
    /// The index of each field's metric, by field (`usize::MAX` for a
    /// field without one).
    fields: [usize; FIELD_COUNT],
}

const fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

impl Layout {
    /// The metric of field row `f` next, then the fields' placed after it.
    const fn push_field(&mut self, n: &mut usize, f: usize) {
        self.defs[*n] = field_def(&FIELDS[f]);
        self.fields[f] = *n;
        *n += 1;
        self.push_after(n, FIELDS[f].metric_name());
    }

    /// The metrics of the fields placed after metric `name` next (each
    /// followed by its own followers), in registry order.
    const fn push_after(&mut self, n: &mut usize, name: &str) {
        let mut f = 0;
        while f < FIELD_COUNT {
            if let Some(FieldMetric {
                after: Some(after), ..
            }) = FIELDS[f].metric
                && same(after, name)
            {
                self.push_field(n, f);
            }
            f += 1;
        }
    }

    /// The row of [`FIXED`] `i` next.
    const fn push_fixed(&mut self, n: &mut usize, i: usize) {
        self.defs[*n] = FIXED[i];
        self.fixed[i] = *n;
        *n += 1;
    }

    /// The fixed per-process metrics, each followed by the fields' placed
    /// after it; the fields' placed nowhere; then the run's own.
    const fn of_metrics() -> Layout {
        let mut l = Layout {
            defs: [FIXED[0]; FIXED.len() + FIELD_METRICS],
            fixed: [usize::MAX; FIXED.len()],
            fields: [usize::MAX; FIELD_COUNT],
        };
        let mut n = 0;
        let mut i = 0;
        while i < FIXED_PER_PROCESS {
            l.push_fixed(&mut n, i);
            l.push_after(&mut n, FIXED[i].name);
            i += 1;
        }
        let mut f = 0;
        while f < FIELD_COUNT {
            if let Some(FieldMetric { after: None, .. }) = FIELDS[f].metric {
                l.push_field(&mut n, f);
            }
            f += 1;
        }
        while i < FIXED.len() {
            l.push_fixed(&mut n, i);
            i += 1;
        }
        assert!(
            n == l.defs.len(),
            "each field's metric follows a per-process metric"
        );
        l
    }
}

const LAYOUT: Layout = Layout::of_metrics();
const FIXED_INDEX: [usize; FIXED.len()] = LAYOUT.fixed;
const FIELD_INDEX: [usize; FIELD_COUNT] = LAYOUT.fields;

/// Every metric, indexed by [`Metric::index`]: the per-process ones not
/// of a field, each followed by the fields' placed after it
/// ([`super::FieldMetric::after`]: the schedstat trio's after `nivcsw`,
/// where they were before the registry), then the other fields', then the
/// run's own.
pub const METRICS: &[MetricDef] = &LAYOUT.defs;

/// How many metrics are read per process.
const fn count_per_process() -> usize {
    let mut n = 0;
    let mut i = 0;
    while i < METRICS.len() {
        if METRICS[i].of_process.is_some() || METRICS[i].field.is_some() {
            n += 1;
        }
        i += 1;
    }
    n
}

/// Number of per-process metrics (they come first in [`Metric`]).
pub const PER_PROCESS: usize = count_per_process();

/// Whether a report can analyse metric `i` of [`METRICS`]: by default, or
/// (`by_default` false) when chosen by name. The latency percentiles are
/// `compare`'s alone.
const fn selectable(i: usize, by_default: bool) -> bool {
    let d = &METRICS[i];
    let latency = matches!(d.metric, Metric::LatencyP50 | Metric::LatencyP99);
    !latency && (d.by_default || !by_default)
}

const fn count_selectable(by_default: bool) -> usize {
    let (mut i, mut n) = (0, 0);
    while i < METRICS.len() {
        if selectable(i, by_default) {
            n += 1;
        }
        i += 1;
    }
    n
}

const fn selected<const N: usize>(by_default: bool) -> [Metric; N] {
    let mut out = [Metric::Wall; N];
    let (mut i, mut n) = (0, 0);
    while i < METRICS.len() {
        if selectable(i, by_default) {
            out[n] = METRICS[i].metric;
            n += 1;
        }
        i += 1;
    }
    out
}

// Each row of METRICS is its metric's (`metric.index()` indexes it), and
// the per-process metrics come first (their slots are their indices).
const _: () = {
    let mut i = 0;
    while i < METRICS.len() {
        assert!(
            METRICS[i].metric.index() == i,
            "METRICS follows Metric's order"
        );
        assert!(
            (i < PER_PROCESS) == (METRICS[i].of_process.is_some() || METRICS[i].field.is_some()),
            "per-process metrics first"
        );
        i += 1;
    }
};

impl Metric {
    /// Every metric, for arrays indexed by [`Metric::index`].
    pub const COUNT: usize = METRICS.len();

    /// This metric's row of [`METRICS`] (and its slot in arrays of every
    /// metric's value). A field without a metric has none: no `Metric`
    /// names it (`Metric::Field` of such a field is never made).
    pub const fn index(self) -> usize {
        // The rows of FIXED.
        let row = match self {
            Metric::Field(f) => return FIELD_INDEX[f as usize],
            Metric::Wall => 0,
            Metric::Utime => 1,
            Metric::Stime => 2,
            Metric::CpuPct => 3,
            Metric::Work => 4,
            Metric::Makespan => 5,
            Metric::LatencyP50 => 6,
            Metric::LatencyP99 => 7,
        };
        FIXED_INDEX[row]
    }

    /// The metrics a report analyses when none is chosen.
    pub const ALL: [Metric; count_selectable(true)] = selected(true);

    /// The metrics a report or `compare` can be asked for by name
    /// (`--metric`): those of [`Metric::ALL`] and the ones analysed only on
    /// request (the latency percentiles are added by `compare` itself).
    pub const CHOOSABLE: [Metric; count_selectable(false)] = selected(false);

    /// This metric's row of [`METRICS`].
    pub fn def(self) -> &'static MetricDef {
        &METRICS[self.index()]
    }

    pub fn name(self) -> &'static str {
        self.def().name
    }

    pub fn description(self) -> &'static str {
        self.def().description
    }

    pub fn label(self) -> &'static str {
        self.def().label
    }

    pub fn unit(self) -> &'static str {
        self.def().unit
    }

    /// Which way the metric improves (see [`METRICS`]).
    pub fn direction(self) -> Direction {
        self.def().direction
    }

    pub fn plural(self) -> bool {
        self.def().plural
    }

    /// Whether the metric is measured per process (all but makespan and
    /// the latency percentiles).
    pub fn per_process(self) -> bool {
        self.process_slot().is_some()
    }

    /// Index among the per-process metrics (`None` for the run's own).
    pub fn process_slot(self) -> Option<usize> {
        let d = self.def();
        (d.of_process.is_some() || d.field.is_some()).then_some(self.index())
    }

    /// The latency percentiles `compare` adds for campaigns that store
    /// latency histograms (not in [`Metric::ALL`], which a report analyses).
    pub const LATENCY: [Metric; 2] = [Metric::LatencyP50, Metric::LatencyP99];

    /// The comma-separated list of names, for messages.
    pub fn names() -> String {
        Metric::CHOOSABLE.map(|m| m.name()).join(", ")
    }

    pub fn parse(s: &str) -> Option<Metric> {
        Metric::CHOOSABLE.into_iter().find(|m| m.name() == s.trim())
    }
}

/// The primary metric of a workload: the one figure of a run that
/// `repetitions = "auto"` makes precise. Work stopped by an amount
/// (iterations, bytes, round trips, a command that runs to its end): the
/// run's makespan, release to the last worker's end (s, lower is better).
/// Work stopped by a duration: the work done, the mean over the run's
/// workers (higher is better), since the makespan is then the duration.
pub fn primary(w: &crate::workload::Workload) -> Metric {
    match w.stop() {
        crate::workload::Stop::DurationNs(_) => Metric::Work,
        crate::workload::Stop::Work(_) => Metric::Makespan,
    }
}

/// The per-process metric values of a process row, indexed by
/// [`Metric::process_slot`]; NaN where the row has no value (schedstat
/// missing, zero wall time for CPU %).
pub fn process_values(p: &ReportProcess) -> [f64; PER_PROCESS] {
    let mut v = [f64::NAN; PER_PROCESS];
    for (slot, d) in METRICS.iter().take(PER_PROCESS).enumerate() {
        if let Some(f) = d.of_process {
            v[slot] = f(p);
        } else if let Some(f) = d.field {
            v[slot] = f.metric_value(&p.kernel);
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_follow_the_enum_order() {
        for (i, d) in METRICS.iter().enumerate().take(PER_PROCESS) {
            assert_eq!(d.metric.process_slot(), Some(i));
            assert!(d.metric.per_process());
        }
        assert_eq!(Metric::Makespan.process_slot(), None);
        for m in Metric::LATENCY {
            assert_eq!(m.process_slot(), None);
            assert!(!Metric::ALL.contains(&m), "a report never analyses {m:?}");
            assert_eq!(m.direction(), Direction::LowerIsBetter);
            assert_eq!(m.unit(), "µs");
            assert_eq!(serde_json::to_value(m).unwrap(), m.name());
        }
        assert_eq!(Metric::parse("cpu_pct"), Some(Metric::CpuPct));
        assert_eq!(Metric::parse("bogus"), None);
        // Per process, chosen by name, not in a default report.
        let m = Metric::parse("nr_migrations").unwrap();
        assert!(m.per_process() && Metric::CHOOSABLE.contains(&m) && !Metric::ALL.contains(&m));
        assert_eq!(m.direction(), Direction::LowerIsBetter);
        assert!(Metric::names().starts_with("wall, utime"));
    }

    /// The schedstat trio's metrics, now the registry's, keep their names,
    /// units and places (after `nivcsw`, as before the registry), and the
    /// other fields' follow `work`.
    #[test]
    fn the_fields_metrics_keep_their_names_units_and_places() {
        let names: Vec<&str> = METRICS.iter().map(|d| d.name).collect();
        // A new field's metric without a place comes after these, before
        // the run's own.
        assert_eq!(
            names[..14].join(","),
            "wall,utime,stime,cpu_pct,nvcsw,nivcsw,wait,run,timeslices,work,nr_migrations,\
             cpus_used,llc_migrations,node_migrations"
        );
        assert_eq!(
            names[names.len() - 3..],
            ["makespan", "latency_p50", "latency_p99"]
        );
        let units: Vec<&str> = [Metric::Wait, Metric::Run, Metric::Timeslices]
            .map(Metric::unit)
            .to_vec();
        assert_eq!(units, ["ms", "s", ""]);
        assert_eq!(Metric::parse("wait"), Some(Metric::Field(Field::WaitNs)));
        assert_eq!(Metric::parse("run_ns"), None, "the metric keeps its name");
        // The page faults are fields without a metric.
        assert_eq!(Metric::parse("minflt"), None);
        assert!(METRICS.iter().all(|d| d.field != Some(Field::Majflt)));
        assert_eq!(Metric::Nivcsw.label(), "involuntary context switches");
        assert!(Metric::Nvcsw.plural() && Metric::ALL.contains(&Metric::Nvcsw));
        assert_eq!(Metric::Run.label(), "on-CPU time");
        assert!(Metric::Timeslices.plural() && !Metric::Wait.plural());
        assert_eq!(
            Metric::ALL[6..9],
            [Metric::Wait, Metric::Run, Metric::Timeslices]
        );
    }

    #[test]
    fn times_and_counts_are_better_lower_rates_higher() {
        use Direction::*;
        let want = [
            ("wall", LowerIsBetter),
            ("utime", LowerIsBetter),
            ("stime", LowerIsBetter),
            ("cpu_pct", HigherIsBetter),
            ("nvcsw", LowerIsBetter),
            ("nivcsw", LowerIsBetter),
            ("wait", LowerIsBetter),
            ("run", LowerIsBetter),
            ("timeslices", LowerIsBetter),
            ("work", HigherIsBetter),
            ("makespan", LowerIsBetter),
        ];
        assert_eq!(
            want.len(),
            Metric::ALL.len(),
            "every metric has a direction here"
        );
        for (name, d) in want {
            assert_eq!(Metric::parse(name).unwrap().direction(), d, "{name}");
        }
        assert_eq!(Metric::Wall.direction().improved(2.0, 1.0), Some(true));
        assert_eq!(Metric::Wall.direction().improved(1.0, 2.0), Some(false));
        assert_eq!(Metric::Work.direction().improved(1.0, 2.0), Some(true));
        assert_eq!(Metric::Work.direction().improved(2.0, 1.0), Some(false));
        assert_eq!(Metric::Work.direction().improved(2.0, 2.0), None);
        assert_eq!(Metric::Wall.direction().improved(f64::NAN, 2.0), None);
        assert_eq!(
            serde_json::to_value(Direction::LowerIsBetter).unwrap(),
            "lower_is_better"
        );
    }

    #[test]
    fn the_primary_metric_is_makespan_for_an_amount_and_work_for_a_duration() {
        let load = |t: &str| {
            crate::spec::load(t, "t.toml", &[]).unwrap().workloads[0]
                .workload
                .clone()
        };
        let amount = load("[matrix]\nworkload = [\"pi\"]\n[workloads.pi]\niterations = 1000\n");
        let timed = load("[matrix]\nworkload = [\"pi\"]\n[workloads.pi]\nduration_s = 1\n");
        assert_eq!(primary(&amount), Metric::Makespan);
        assert_eq!(primary(&timed), Metric::Work);
    }

    #[test]
    fn values_of_a_process() {
        let p = ReportProcess {
            run_id: 1,
            process_index: 0,
            nice: Some(0),
            rt_priority: None,
            wall_ns: 2_000_000_000,
            usage: crate::fields::process::ReportUsage {
                utime_us: 1_500_000,
                stime_us: 500_000,
            },
            work: Some(1000),
            end_ns: Some(2_000_000_000),
            kernel: crate::fields::MetricFields::default()
                .with(Field::Nvcsw, Some(3))
                .with(Field::Nivcsw, Some(40))
                .with(Field::NrMigrations, Some(4))
                .with(Field::RunNs, Some(2_000_000_000))
                .with(Field::WaitNs, Some(5_000_000)),
        };
        let v = process_values(&p);
        assert_eq!(v[0], 2.0);
        assert_eq!(v[3], 100.0);
        assert_eq!((v[4], v[5]), (3.0, 40.0));
        assert_eq!(v[6], 5.0);
        assert_eq!(v[7], 2.0);
        assert!(v[8].is_nan());
        assert_eq!(v[9], 1000.0);
        assert_eq!(
            v[Metric::Field(Field::NrMigrations).process_slot().unwrap()],
            4.0
        );
        assert!(v[Metric::Field(Field::CpusUsed).process_slot().unwrap()].is_nan());
    }
}
