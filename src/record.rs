//! What a finished run produced: pure data passed from the launcher to the
//! store and from the store to exports and reports.

use serde::{Deserialize, Serialize, Serializer};
use std::collections::BTreeMap;

use crate::fields::{Field, RecordPlace};

use crate::plan::Run;
use crate::policy::ProcSched;
use crate::sys::envinfo::EnvSnapshot;
pub use crate::sys::proc::Usage;

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Ok,
    Failed,
    TimedOut,
    Skipped,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Ok => "ok",
            RunStatus::Failed => "failed",
            RunStatus::TimedOut => "timed_out",
            RunStatus::Skipped => "skipped",
        }
    }

    pub fn parse(s: &str) -> Option<RunStatus> {
        [
            RunStatus::Ok,
            RunStatus::Failed,
            RunStatus::TimedOut,
            RunStatus::Skipped,
        ]
        .into_iter()
        .find(|r| r.as_str() == s)
    }
}

/// One worker process of a run. Its JSON (the guest's protocol) has the
/// usage and the registry's fields flat at its own level, each field's
/// key where its [`crate::fields::FieldDef::record`] puts it
/// ([`RecordJson`]).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ProcessRecord {
    pub index: u32,
    /// "worker" (measured) or "hog" (an RT CPU hog run beside the workers).
    pub role: String,
    pub pid: i32,
    pub sched: ProcSched,
    /// Start and finish of the work, in ns after the barrier was released
    /// (None when the worker did not report, e.g. it crashed).
    pub start_ns: Option<u64>,
    pub end_ns: Option<u64>,
    /// Wall time from barrier release to the end of the work, or to the
    /// process's exit when it did not report.
    pub wall_ns: u64,
    /// Resource usage over the measured window (flattened: the JSON shape
    /// keeps `utime_us`, `stime_us`, `maxrss_kb` at this level).
    #[serde(flatten)]
    pub usage: ProcessUsage,
    pub work: Option<u64>,
    pub work_unit: String,
    pub figures: BTreeMap<String, f64>,
    /// Latency histograms by name, HdrHistogram V2 encoded (see
    /// `workload::latency`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub latency: BTreeMap<String, Vec<u8>>,
    /// The per-process fields of the registry over its measured window
    /// (rusage's switches and page faults; schedstat's `run_ns`,
    /// `wait_ns`, `timeslices`, read after exit and before reaping;
    /// `nr_migrations`, …), each None where not measured (flattened: at
    /// this level, the measured ones, and the rusage counters and the
    /// schedstat trio null when not measured, as before the registry).
    #[serde(flatten, default)]
    pub kernel: KernelCounts,
    /// The EEVDF slice the kernel reported for the process (OTHER, BATCH,
    /// IDLE; Linux 6.12+), read back after it was set, in ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slice_ns: Option<u64>,
    /// "exit code 0", "killed by signal 9 (SIGKILL)", …
    pub exit: String,
    pub ok: bool,
    /// The last lines the worker wrote to stderr, when it failed.
    pub stderr_tail: String,
}

/// A process's resource usage as recorded: its CPU times always; its
/// peak memory None where the kernel could not give it (a `command`
/// worker's tree without a memory group; the run's
/// `extra.command[].missing` says why), never 0 in its place. Its
/// switches and page faults are fields of the registry
/// ([`ProcessRecord::kernel`], [`rusage_fields`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessUsage {
    pub utime_us: u64,
    pub stime_us: u64,
    pub maxrss_kb: Option<u64>,
}

impl From<Usage> for ProcessUsage {
    fn from(u: Usage) -> ProcessUsage {
        ProcessUsage {
            utime_us: u.utime_us,
            stime_us: u.stime_us,
            maxrss_kb: Some(u.maxrss_kb),
        }
    }
}

/// The per-process fields of the registry ([`crate::fields::FIELDS`]),
/// each None where it was not measured (hogs, a program's tree, an
/// untraced run, older databases).
pub type KernelCounts = crate::fields::ProcessFields;

/// `k` with the registry's fields that rusage gives (the switches, page
/// faults and block I/O) set from `u`: a built-in workload's rusage has
/// every one, the block counts where the kernel accounts them.
pub fn rusage_fields(k: KernelCounts, u: &Usage) -> KernelCounts {
    k.with(Field::Nvcsw, Some(u.nvcsw))
        .with(Field::Nivcsw, Some(u.nivcsw))
        .with(Field::Minflt, Some(u.minflt))
        .with(Field::Majflt, Some(u.majflt))
        .with(Field::Inblock, u.inblock)
        .with(Field::Oublock, u.oublock)
}

impl Serialize for ProcessRecord {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let p = self;
        RecordJson {
            index: p.index,
            role: &p.role,
            pid: p.pid,
            sched: &p.sched,
            start_ns: p.start_ns,
            end_ns: p.end_ns,
            wall_ns: p.wall_ns,
            utime_us: p.usage.utime_us,
            stime_us: p.usage.stime_us,
            usage_fields: p.kernel.in_record(RecordPlace::Usage),
            maxrss_kb: p.usage.maxrss_kb,
            work: p.work,
            work_unit: &p.work_unit,
            figures: &p.figures,
            latency: &p.latency,
            fields: p.kernel.in_record(RecordPlace::Fields),
            slice_ns: p.slice_ns,
            exit: &p.exit,
            ok: p.ok,
            stderr_tail: &p.stderr_tail,
        }
        .serialize(s)
    }
}

/// A [`ProcessRecord`]'s JSON, key by key: the registry's fields at their
/// places ([`RecordPlace`]), where their keys were before the registry.
#[derive(Serialize)]
struct RecordJson<'a> {
    index: u32,
    role: &'a str,
    pid: i32,
    sched: &'a ProcSched,
    start_ns: Option<u64>,
    end_ns: Option<u64>,
    wall_ns: u64,
    utime_us: u64,
    stime_us: u64,
    #[serde(flatten)]
    usage_fields: crate::fields::InRecord<'a>,
    maxrss_kb: Option<u64>,
    work: Option<u64>,
    work_unit: &'a str,
    figures: &'a BTreeMap<String, f64>,
    #[serde(skip_serializing_if = "no_latency")]
    latency: &'a BTreeMap<String, Vec<u8>>,
    #[serde(flatten)]
    fields: crate::fields::InRecord<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    slice_ns: Option<u64>,
    exit: &'a str,
    ok: bool,
    stderr_tail: &'a str,
}

fn no_latency(l: &&BTreeMap<String, Vec<u8>>) -> bool {
    l.is_empty()
}

/// A finished (or skipped) run with everything measured about it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub run: Run,
    pub status: RunStatus,
    pub reason: String,
    /// Barrier release to the last worker's end, ns.
    pub makespan_ns: Option<u64>,
    /// Σ(user + system CPU) / (makespan × CPUs the run could use).
    pub cpu_util: Option<f64>,
    /// CPUs the workers were allowed on.
    pub cpu_list: Vec<usize>,
    /// Wall-clock start of the run, Unix ms.
    pub started_unix_ms: i64,
    pub env: EnvSnapshot,
    pub processes: Vec<ProcessRecord>,
    /// Time slices handed out by schedlab's own scheduler (WRR), if any.
    pub slices: Vec<SliceRow>,
    /// Policy-specific facts about the run (JSON object).
    pub extra: serde_json::Value,
    /// What other programs did on the machine during the run.
    pub interference: Interference,
}

/// Other programs' activity around a run (never schedlab's own processes).
/// None where it was not measured (skipped runs, runs too short for
/// `/proc/stat`'s clock ticks, databases from before it was recorded).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Interference {
    /// Runnable tasks (threads) on the machine just before barrier release,
    /// outside the run's processes and schedlab itself.
    pub others_runnable: Option<u32>,
    /// Steal time of the CPUs the run used, in % of their time over the run.
    pub steal_pct: Option<f64>,
    /// Busy time of those CPUs beyond what the run's processes and schedlab
    /// used, in % of their time over the run.
    pub other_cpu_pct: Option<f64>,
    /// Hardware interrupts on the run's CPUs over the run
    /// (`/proc/interrupts` delta).
    #[serde(default)]
    pub interrupts: Option<u64>,
    /// Softirqs on the run's CPUs over the run (`/proc/softirqs` delta).
    #[serde(default)]
    pub softirqs: Option<u64>,
    /// The run's CPUs' clock (cpufreq `scaling_cur_freq`), kHz: the mean of
    /// the readings at release and at the end. None without cpufreq.
    #[serde(default)]
    pub cpu_freq_khz: Option<f64>,
    /// Thermal throttling events on the run's CPUs over the run; None
    /// where the kernel exposes no counters.
    #[serde(default)]
    pub throttle_count: Option<u64>,
}

/// One slice of schedlab's own scheduler, times after barrier release.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SliceRow {
    pub process_index: u32,
    pub cpu: u32,
    pub planned_start_ns: u64,
    pub planned_end_ns: u64,
    pub actual_end_ns: u64,
    pub cpu_ns: u64,
}

/// The reason of a run that exceeded `timeout_s`: how many of its
/// `workers` were still running and so killed (none when each had finished
/// and the run waited on other processes).
pub fn timeout_reason(timeout_s: f64, killed: usize, workers: usize) -> String {
    let what = match (killed, workers) {
        (0, 1) => "its worker had finished".to_string(),
        (0, n) => format!("each of its {n} workers had finished"),
        (1, 1) => "its worker was killed".to_string(),
        (k, n) if k == n => format!("all {n} of its workers were killed"),
        (1, n) => format!("1 of its {n} workers was killed"),
        (k, n) => format!("{k} of its {n} workers were killed"),
    };
    format!("the run exceeded timeout_s = {timeout_s} s; {what}")
}

#[cfg(test)]
mod tests {
    /// A copy of 8 MiB (`dd`, as the copy workload does: read a file,
    /// write another, through the page cache) fills the process's
    /// `oublock` with the 16,384 blocks of 512 bytes it dirtied, from
    /// rusage as `wait4` gives it (the reader of workers and hogs); its
    /// input, just written and so in the page cache, is read from memory,
    /// not from storage. A kernel without per-task I/O accounting gives
    /// neither.
    #[test]
    fn a_copy_fills_oublock_from_rusage() {
        use crate::fields::Field::{Inblock, Oublock};
        const BYTES: usize = 8 << 20;
        // Beside the test binary, on the disk the build is on (a tmpfs
        // file has no writeback, so no block is ever counted there).
        let exe = std::env::current_exe().unwrap();
        let dir = tempfile::tempdir_in(exe.parent().unwrap()).unwrap();
        let (input, output) = (dir.path().join("in"), dir.path().join("out"));
        std::fs::write(&input, vec![7u8; BYTES]).unwrap();
        // Reaped by wait4 (`reap`), which gives its rusage, not by `wait`.
        #[expect(clippy::zombie_processes, reason = "reaped by sys::proc::reap")]
        let child = std::process::Command::new("dd")
            .arg(format!("if={}", input.display()))
            .arg(format!("of={}", output.display()))
            .args(["bs=1M", "status=none"])
            .spawn()
            .unwrap();
        let (exit, usage) = crate::sys::proc::reap(child.id() as i32).unwrap();
        assert!(exit.success(), "{exit:?}");
        assert_eq!(std::fs::metadata(&output).unwrap().len(), BYTES as u64);
        let k = super::rusage_fields(super::KernelCounts::default(), &usage);
        if !crate::sys::proc::io_accounted() {
            assert_eq!((k.get(Inblock), k.get(Oublock)), (None, None));
            return;
        }
        let blocks = (BYTES / 512) as u64;
        let written = k.get(Oublock).unwrap();
        assert!(
            (blocks..=blocks + blocks / 16).contains(&written),
            "{written} blocks written for {blocks}"
        );
        assert!(k.get(Inblock).unwrap() < blocks / 2, "{k:?}");
    }

    #[test]
    fn a_timeout_reason_counts_its_killed_workers_in_plain_words() {
        let r = |k, n| super::timeout_reason(2.5, k, n);
        assert_eq!(
            r(0, 1),
            "the run exceeded timeout_s = 2.5 s; its worker had finished"
        );
        assert!(r(0, 3).ends_with("each of its 3 workers had finished"));
        assert!(r(1, 1).ends_with("its worker was killed"));
        assert!(r(1, 4).ends_with("1 of its 4 workers was killed"));
        assert!(r(2, 4).ends_with("2 of its 4 workers were killed"));
        assert!(r(4, 4).ends_with("all 4 of its workers were killed"));
    }

    use super::*;

    /// The usage is embedded flattened: a process keeps `utime_us`, …,
    /// `maxrss_kb` at its own level in JSON, as before `Usage` was shared.
    #[test]
    fn process_json_keeps_the_usage_fields_flat() {
        let sched = crate::policy::ProcSched::realtime(crate::policy::Policy::Fifo, 50);
        let mut p = crate::testing::synth::synthetic_process(0, sched, 9, 3);
        p.usage.maxrss_kb = Some(100);
        let v = serde_json::to_value(&p).unwrap();
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        for k in [
            "utime_us",
            "stime_us",
            "nvcsw",
            "nivcsw",
            "minflt",
            "majflt",
            "maxrss_kb",
        ] {
            assert!(keys.contains(&k), "{k} missing: {v}");
        }
        assert!(!keys.contains(&"usage"), "{v}");
        assert_eq!(v["utime_us"], 3);
        assert_eq!(v["maxrss_kb"], 100);
        let text = serde_json::to_string(&p).unwrap();
        let back: ProcessRecord = serde_json::from_str(&text).unwrap();
        assert_eq!(back, p);
        // A figure the kernel did not give is null, and comes back None.
        p.kernel.set(crate::fields::Field::Nvcsw, None);
        let v = serde_json::to_value(&p).unwrap();
        assert!(v["nvcsw"].is_null(), "{v}");
        let back: ProcessRecord = serde_json::from_value(v).unwrap();
        assert_eq!(back.kernel.get(crate::fields::Field::Nvcsw), None);
    }

    /// The schedstat trio, fields of the registry, keep their keys at the
    /// record's level, null when not measured (as before the registry);
    /// the other fields are left out then.
    #[test]
    fn process_json_keeps_the_schedstat_keys() {
        use crate::fields::Field;
        let sched = crate::policy::ProcSched::fair(crate::policy::Policy::Other, 0);
        let mut p = crate::testing::synth::synthetic_process(0, sched, 9, 3);
        p.kernel = KernelCounts::default().with(Field::RunNs, Some(7));
        let v = serde_json::to_value(&p).unwrap();
        assert_eq!(v["run_ns"], 7);
        assert!(v["wait_ns"].is_null() && v["timeslices"].is_null(), "{v}");
        let o = v.as_object().unwrap();
        assert!(o.contains_key("wait_ns") && o.contains_key("timeslices"));
        assert!(!o.contains_key("nr_migrations") && !o.contains_key("kernel"));
        let back: ProcessRecord = serde_json::from_value(v).unwrap();
        assert_eq!(back, p);
    }

    /// A process record's JSON text, key by key and in order, as the
    /// guest sends it to the host (`machine::protocol`): every key the
    /// usage and the registry give, where they were before either moved.
    #[test]
    fn process_json_keeps_its_keys_in_order() {
        use crate::fields::Field;
        let sched = crate::policy::ProcSched::fair(crate::policy::Policy::Other, 0);
        let mut p = crate::testing::synth::synthetic_process(1, sched, 9, 3);
        p.usage.maxrss_kb = Some(100);
        p.kernel.set(Field::Minflt, Some(4));
        p.latency.insert("wakeup".into(), vec![1, 2]);
        p.slice_ns = Some(3_000_000);
        p.kernel = p
            .kernel
            .with(Field::RunNs, Some(7))
            .with(Field::NrMigrations, Some(2))
            .with(Field::CpusUsed, Some(1));
        let full = serde_json::to_string(&p).unwrap();
        assert_eq!(full, FULL, "{full}");
        p.latency.clear();
        p.slice_ns = None;
        for f in [Field::NrMigrations, Field::CpusUsed, Field::RunNs] {
            p.kernel.set(f, None);
        }
        p.kernel.set(Field::Nvcsw, None);
        let bare = serde_json::to_string(&p).unwrap();
        assert_eq!(bare, BARE, "{bare}");
        for text in [full, bare] {
            let back: ProcessRecord = serde_json::from_str(&text).unwrap();
            assert_eq!(serde_json::to_string(&back).unwrap(), text);
        }
    }

    const FULL: &str = "{\"index\":1,\"role\":\"worker\",\"pid\":10001,\
     \"sched\":{\"policy\":\"other\",\"nice\":0,\"rt_priority\":null,\
     \"dl_runtime_ns\":null,\"dl_deadline_ns\":null,\"dl_period_ns\":null,\
     \"weight\":null},\"start_ns\":null,\"end_ns\":null,\"wall_ns\":9,\
     \"utime_us\":3,\"stime_us\":0,\"nvcsw\":0,\"nivcsw\":0,\"minflt\":4,\
     \"majflt\":0,\"maxrss_kb\":100,\"work\":null,\"work_unit\":\"\",\
     \"figures\":{},\"latency\":{\"wakeup\":[1,2]},\"nr_migrations\":2,\
     \"cpus_used\":1,\"run_ns\":7,\"wait_ns\":null,\"timeslices\":null,\
     \"slice_ns\":3000000,\"exit\":\"exit code 0\",\"ok\":true,\
     \"stderr_tail\":\"\"}";
    const BARE: &str = "{\"index\":1,\"role\":\"worker\",\"pid\":10001,\
     \"sched\":{\"policy\":\"other\",\"nice\":0,\"rt_priority\":null,\
     \"dl_runtime_ns\":null,\"dl_deadline_ns\":null,\"dl_period_ns\":null,\
     \"weight\":null},\"start_ns\":null,\"end_ns\":null,\"wall_ns\":9,\
     \"utime_us\":3,\"stime_us\":0,\"nvcsw\":null,\"nivcsw\":0,\"minflt\":4,\
     \"majflt\":0,\"maxrss_kb\":100,\"work\":null,\"work_unit\":\"\",\
     \"figures\":{},\"run_ns\":null,\"wait_ns\":null,\"timeslices\":null,\
     \"exit\":\"exit code 0\",\"ok\":true,\"stderr_tail\":\"\"}";
}
