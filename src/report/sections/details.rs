//! The stored details of runs that some sections show beyond the analysis
//! (resolved plan entries, every process row, WRR slices, kernel traces and
//! their timelines, one run's or a set's over one span, and beside one the
//! model's prediction of its run from a simulated database):
//! which runs a
//! section asks for ([`Needs`]), and those details read once through the
//! store as plain data ([`RunDetails`]), so that preparing a section is a
//! pure function of loaded data.

use anyhow::{Context, Result, bail};
use serde_json::Value;
use std::collections::HashMap;

use crate::plan::Run;
use crate::record::{ProcessRecord, SliceRow};
use crate::report::window::TimeWindow;
use crate::store::{RunTrace, Store, TraceInfo};
use crate::trace::Task;
use crate::trace::derive::Slice;

/// The part of a trace drawn when no `--window` is given.
pub const DEFAULT_WINDOW_NS: u64 = 250_000_000;
/// Most slices a timeline draws; a window with more is cut (and says so).
pub const MAX_TIMELINE_SLICES: usize = 20_000;

/// The timeline a section asks for: a run (default: the first usable
/// traced run of the campaign) and a window of its trace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TimelineNeed {
    pub run: Option<i64>,
    pub window: Option<TimeWindow>,
    /// A simulated database whose prediction of the timeline run (same run
    /// key: condition and repetition) is drawn beside it.
    pub model_db: Option<std::path::PathBuf>,
}

/// The slices of one traced run in a window, for its timeline.
#[derive(Debug, Clone, PartialEq)]
pub struct Timeline {
    pub info: TraceInfo,
    /// Whether the run was chosen with --timeline-run.
    pub chosen: bool,
    /// Relative to the trace's start.
    pub window: TimeWindow,
    /// Overlapping the window, by CPU then start; at most
    /// [`MAX_TIMELINE_SLICES`].
    pub slices: Vec<Slice>,
    /// Slices overlapping the window in all.
    pub slices_total: usize,
    pub tasks: Vec<Task>,
    /// The repaired gaps overlapping the window (unattributed stretches).
    pub repairs: Vec<crate::trace::derive::Repair>,
}

/// Runs whose stored details a section reads, by kind of detail.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Needs {
    /// Runs whose resolved plan entry and policy facts are read.
    pub documents: Vec<i64>,
    /// Runs whose every process row (workers and RT hogs) is read.
    pub processes: Vec<i64>,
    /// Runs whose WRR slices are read.
    pub slices: Vec<i64>,
    /// The campaigns whose latency histograms are read (none: not read).
    pub latency_of: Vec<i64>,
    /// The campaigns whose traced runs' figures are read, with the process
    /// rows and (unless `latency_of` reads them all) latency histograms of
    /// those runs.
    pub traces_of: Vec<i64>,
    /// A traced run's slices in a window (needs `traces_of`).
    pub timeline: Option<TimelineNeed>,
    /// Sets of timelines drawn over one span (needs `traces_of`).
    pub timeline_sets: Vec<TimelineSetNeed>,
    /// Runs whose trace is recorded task by task as `schedlab synthesize`
    /// records it ([`crate::synth::read_run`]).
    pub recordings: Vec<i64>,
}

/// Timelines drawn together over one time span, e.g. one run of each
/// policy: `choices` are alternative lists of panels (e.g. one per process
/// count), each panel its candidate runs in order of preference. The
/// choice with the most panels that have a usable traced run is drawn, each
/// panel its first usable traced run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TimelineSetNeed {
    pub choices: Vec<Vec<Vec<i64>>>,
    /// Longest span drawn from each trace's start.
    pub max_span_ns: u64,
}

/// A drawn [`TimelineSetNeed`]: the choice made and each panel's timeline
/// (None: no usable traced run), every window starting at its trace's
/// start and at most `span_ns` long.
#[derive(Debug, Clone, PartialEq)]
pub struct TimelineSet {
    pub choice: usize,
    pub panels: Vec<Option<Timeline>>,
    /// The longest of the panels' traces, up to the need's `max_span_ns`.
    pub span_ns: u64,
}

/// The stored details of some runs, by run id.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunDetails {
    /// The resolved plan entry (None when it is not a [`Run`], as in
    /// synthetic databases) and the policy-specific facts.
    pub documents: HashMap<i64, (Option<Run>, Value)>,
    /// Every process row, by process index.
    pub processes: HashMap<i64, Vec<ProcessRecord>>,
    /// WRR slices in the order they were handed out.
    pub slices: HashMap<i64, Vec<SliceRow>>,
    /// Every worker's primary latency histogram (ok runs).
    pub latency: Vec<crate::store::ProcessLatency>,
    /// The traced ok runs' figures, in run order.
    pub traces: Vec<RunTrace>,
    pub timeline: Option<Timeline>,
    /// The model's prediction of the timeline's run, over the same stretch
    /// after the release (when [`TimelineNeed::model_db`] asks for it).
    pub model_timeline: Option<Timeline>,
    /// One per [`Needs::timeline_sets`] (None: no usable traced run).
    pub timeline_sets: Vec<Option<TimelineSet>>,
    /// Each of [`Needs::recordings`]: its tree's recording, or why there
    /// is none (no trace, an unusable one, lost events).
    pub recordings: HashMap<i64, Result<crate::synth::record::Recording, String>>,
}

impl RunDetails {
    /// Read what `needs` asks for (nothing at all when it asks nothing).
    pub fn load(store: &Store, needs: &Needs) -> Result<RunDetails> {
        let mut d = RunDetails::default();
        if !needs.documents.is_empty() {
            d.documents = store
                .report_run_documents(&needs.documents)?
                .into_iter()
                .map(|(id, run, extra)| (id, (run, extra)))
                .collect();
        }
        if !needs.processes.is_empty() {
            for (id, records) in process_records_on_every_cpu(store, &needs.processes)? {
                add_records(&mut d.processes, id, records);
            }
        }
        for &id in &needs.slices {
            d.slices.insert(id, store.slices(id)?);
        }
        for &id in &needs.recordings {
            let r = crate::synth::read_run(store, id, false)
                .map(|r| r.recording)
                .map_err(|e| format!("{e:#}"));
            d.recordings.insert(id, r);
        }
        if !needs.latency_of.is_empty() {
            d.latency = store.campaign_latency(&needs.latency_of)?;
        }
        if !needs.traces_of.is_empty() {
            for &campaign in &needs.traces_of {
                d.traces.extend(store.campaign_traces(campaign)?);
            }
            let missing: Vec<i64> = d
                .traces
                .iter()
                .map(|t| t.info.run_id)
                .filter(|id| !d.processes.contains_key(id))
                .collect();
            if !missing.is_empty() {
                for (id, records) in store.report_process_records_by_run(&missing)? {
                    add_records(&mut d.processes, id, records);
                }
            }
            // The workload's own latency of the traced runs, to set beside
            // the trace's (read only when there are traced runs).
            if needs.latency_of.is_empty() && !d.traces.is_empty() {
                let traced: std::collections::HashSet<i64> =
                    d.traces.iter().map(|t| t.info.run_id).collect();
                d.latency = store
                    .campaign_latency(&needs.traces_of)?
                    .into_iter()
                    .filter(|l| traced.contains(&l.run_id))
                    .collect();
            }
            if let Some(need) = &needs.timeline {
                d.timeline = timeline(store, &d.traces, need, &needs.traces_of)?;
                if let Some(db) = &need.model_db {
                    d.model_timeline =
                        Some(model_twin(store, d.timeline.as_ref(), need.window, db)?);
                }
            }
            for need in &needs.timeline_sets {
                let set = match choose_set(&need.choices, &d.traces) {
                    Some((choice, infos)) => Some(timeline_set(store, choice, infos, need)?),
                    None => None,
                };
                d.timeline_sets.push(set);
            }
        }
        Ok(d)
    }

    /// The resolved plan entry of a run, if read and readable.
    pub fn plan(&self, run: i64) -> Option<&Run> {
        self.documents.get(&run).and_then(|(p, _)| p.as_ref())
    }

    /// The process rows of a run (none when not read).
    pub fn processes(&self, run: i64) -> &[ProcessRecord] {
        self.processes.get(&run).map_or(&[], Vec::as_slice)
    }
}

/// The timeline's run and slices: the chosen run (it must be traced, in the
/// campaign), else the first usable traced run; None when there is none.
fn timeline(
    store: &Store,
    traces: &[RunTrace],
    need: &TimelineNeed,
    campaigns: &[i64],
) -> Result<Option<Timeline>> {
    let campaign = campaigns
        .iter()
        .map(i64::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    let info = match need.run {
        Some(id) => match traces.iter().find(|t| t.info.run_id == id) {
            Some(t) => t.info.clone(),
            None => {
                let ids: Vec<String> = traces
                    .iter()
                    .take(12)
                    .map(|t| t.info.run_id.to_string())
                    .collect();
                bail!(
                    "--timeline-run {id}: run {id} is not a traced ok run of campaign {campaign} ({})",
                    if ids.is_empty() {
                        "the campaign has none".to_string()
                    } else {
                        format!("traced runs: {}", ids.join(", "))
                    }
                )
            }
        },
        None => match traces.iter().find(|t| !t.info.unusable) {
            Some(t) => t.info.clone(),
            None => return Ok(None),
        },
    };
    let len_ns = info.end_ns.saturating_sub(info.start_ns);
    let window = match need.window {
        Some(w) if w.from_ns >= len_ns => bail!(
            "--window {}: run {}'s trace is only {} long",
            window_text(&w),
            info.run_id,
            crate::units::format_ns(len_ns)
        ),
        Some(w) => TimeWindow {
            from_ns: w.from_ns,
            to_ns: w.to_ns.min(len_ns),
        },
        None => TimeWindow {
            from_ns: 0,
            to_ns: DEFAULT_WINDOW_NS.min(len_ns.max(1)),
        },
    };
    load_window(store, info, window, need.run.is_some()).map(Some)
}

/// The model's prediction of `traced`'s run from the simulated database
/// `db`: its latest simulated run with the same run key, over the window
/// asked for (default: the first [`DEFAULT_WINDOW_NS`]) counted from the
/// workers' release as in the trace (a trace starts some time before it;
/// the model at 0, or a period before it when an RT hog warms up), up to
/// the simulated run's end: a prediction longer or shorter than the
/// traced run is shown as far as it goes.
fn model_twin(
    store: &Store,
    traced: Option<&Timeline>,
    asked: Option<TimeWindow>,
    db: &std::path::Path,
) -> Result<Timeline> {
    let shown = crate::out::path(db);
    let Some(traced) = traced else {
        bail!(
            "--model-timeline {shown}: the campaign has no traced run whose timeline it could be drawn beside"
        );
    };
    let run = traced.info.run_id;
    let key = store
        .run_key(run)?
        .ok_or_else(|| anyhow::anyhow!("run {run} vanished from the database"))?;
    let twin = Store::open_existing(db).with_context(|| format!("--model-timeline {shown}"))?;
    let Some(id) = twin.predicted_run(&key)? else {
        bail!(
            "--model-timeline {shown}: no simulated ok run of run {run}'s condition and repetition ({key}); \
             `schedlab simulate SPEC --db {shown}` with the spec of run {run}'s campaign makes one"
        );
    };
    let info = twin
        .trace_info(id)?
        .ok_or_else(|| anyhow::anyhow!("--model-timeline {shown}: run {id} has no timeline"))?;
    let since = |i: &TraceInfo| i.release_ns.map_or(0, |r| r.saturating_sub(i.start_ns));
    let (from_traced, from_model) = (since(&traced.info), since(&info));
    let shift = |t: u64| (t + from_model).saturating_sub(from_traced);
    let asked = asked.unwrap_or(TimeWindow {
        from_ns: 0,
        to_ns: DEFAULT_WINDOW_NS,
    });
    let len_ns = info.end_ns.saturating_sub(info.start_ns).max(1);
    let from_ns = shift(asked.from_ns).min(len_ns - 1);
    let window = TimeWindow {
        from_ns,
        to_ns: shift(asked.to_ns).clamp(from_ns + 1, len_ns),
    };
    load_window(&twin, info, window, true)
}

/// A run's records after those already held of it (moved in whole when
/// there are none).
fn add_records(held: &mut HashMap<i64, Vec<ProcessRecord>>, id: i64, records: Vec<ProcessRecord>) {
    match held.entry(id) {
        std::collections::hash_map::Entry::Vacant(e) => {
            e.insert(records);
        }
        std::collections::hash_map::Entry::Occupied(mut e) => e.get_mut().extend(records),
    }
}

/// [`Store::report_process_records_by_run`] of `ids`, in their order, the ids
/// split among up to `available_parallelism` threads with a read-only
/// connection each (the model section asks for every process of every
/// run); on `store` alone when there is no second connection.
fn process_records_on_every_cpu(
    store: &Store,
    ids: &[i64],
) -> Result<Vec<(i64, Vec<ProcessRecord>)>> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(8));
    let readers: Vec<Store> = if ids.len() >= 64 {
        (1..threads).map_while(|_| store.open_reader()).collect()
    } else {
        Vec::new()
    };
    if readers.is_empty() {
        return store.report_process_records_by_run(ids);
    }
    let chunk = ids.len().div_ceil(readers.len() + 1);
    let mut parts = ids.chunks(chunk);
    let first = parts.next().unwrap_or_default();
    std::thread::scope(|s| {
        let handles: Vec<_> = parts
            .zip(readers)
            .map(|(part, reader)| s.spawn(move || reader.report_process_records_by_run(part)))
            .collect();
        let mut out = store.report_process_records_by_run(first)?;
        for h in handles {
            let part = h
                .join()
                .map_err(|_| anyhow::anyhow!("a process reader thread panicked"))??;
            out.extend(part);
        }
        Ok(out)
    })
}

/// The slices, repairs and tasks of a traced run in `window`.
fn load_window(
    store: &Store,
    info: TraceInfo,
    window: TimeWindow,
    chosen: bool,
) -> Result<Timeline> {
    let span = (info.start_ns + window.from_ns, info.start_ns + window.to_ns);
    let (mut slices, repairs) = store.trace_window(info.run_id, span)?;
    let slices_total = slices.len();
    // Cut in time order, so that what is drawn is the start of the window.
    slices.sort_by_key(|s| (s.start_ns, s.cpu));
    slices.truncate(MAX_TIMELINE_SLICES);
    Ok(Timeline {
        tasks: store.trace_tasks(info.run_id)?,
        chosen,
        info,
        window,
        slices,
        slices_total,
        repairs,
    })
}

/// The choice of a [`TimelineSetNeed`] with the most panels that have a
/// usable traced run (the first such on ties), with each panel's first
/// usable traced run; None when no panel of any choice has one.
pub(crate) fn choose_set<'a>(
    choices: &[Vec<Vec<i64>>],
    traces: &'a [RunTrace],
) -> Option<(usize, Vec<Option<&'a TraceInfo>>)> {
    let usable = |id: i64| {
        traces
            .iter()
            .map(|t| &t.info)
            .find(|i| i.run_id == id && !i.unusable)
    };
    let mut best: Option<(usize, Vec<Option<&TraceInfo>>)> = None;
    for (k, panels) in choices.iter().enumerate() {
        let picked: Vec<Option<&TraceInfo>> = panels
            .iter()
            .map(|runs| runs.iter().find_map(|&id| usable(id)))
            .collect();
        let found = picked.iter().flatten().count();
        if found > 0
            && best
                .as_ref()
                .is_none_or(|(_, b)| b.iter().flatten().count() < found)
        {
            best = Some((k, picked));
        }
    }
    best
}

/// Each chosen panel's slices from its trace's start over the longest of
/// their traces (up to the need's span).
fn timeline_set(
    store: &Store,
    choice: usize,
    infos: Vec<Option<&TraceInfo>>,
    need: &TimelineSetNeed,
) -> Result<TimelineSet> {
    let longest = infos
        .iter()
        .flatten()
        .map(|i| i.end_ns.saturating_sub(i.start_ns))
        .max()
        .unwrap_or(0);
    let span_ns = round_up(longest.min(need.max_span_ns).max(1)).min(need.max_span_ns.max(1));
    let panels = infos
        .into_iter()
        .map(|info| {
            info.map(|i| {
                let len_ns = i.end_ns.saturating_sub(i.start_ns).max(1);
                let window = TimeWindow {
                    from_ns: 0,
                    to_ns: span_ns.min(len_ns),
                };
                load_window(store, i.clone(), window, false)
            })
            .transpose()
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(TimelineSet {
        choice,
        panels,
        span_ns,
    })
}

/// `ns` rounded up to two significant digits, for a span people read
/// (1.497 s → 1.5 s).
pub(crate) fn round_up(ns: u64) -> u64 {
    let step = 10u64.pow(ns.max(1).ilog10().saturating_sub(1));
    ns.div_ceil(step) * step
}

/// "0.5 s..1.5 s".
pub fn window_text(w: &TimeWindow) -> String {
    format!(
        "{}..{}",
        crate::units::format_ns(w.from_ns),
        crate::units::format_ns(w.to_ns)
    )
}
