//! The command line: argument parsing (clap) and calls into the library.
//! No experiment logic lives here. clap is used here and nowhere else: the
//! library modules take plain option structs. `cli/policy.rs` holds the
//! arguments of `schedlab policy`.

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::spec::{self, SpecError, presets};
use crate::store::Store;
use crate::sys::{envinfo, probe};
use crate::{campaign, export, out, plan};

mod policy;
mod trace;

#[derive(Parser)]
#[command(
    name = "schedlab",
    version,
    about = "A Linux CPU-scheduler laboratory: run real workloads under every scheduling policy, measure what the \
             scheduler did to each process, keep every run in SQLite.",
    after_help = "Examples:\n  schedlab run --preset quick\n  schedlab report --format md\n  schedlab plan my-experiment.toml\n  \
                  schedlab compare --db base.db --vs cand.db\n  \
                  schedlab export --format csv > runs.csv\n  schedlab env"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a campaign (a spec file or a preset) and store every run; resumes
    /// a campaign that was interrupted.
    Run {
        #[command(flatten)]
        source: SpecSource,
        #[command(flatten)]
        db: DbArg,
        /// No progress output.
        #[arg(long, short)]
        quiet: bool,
        /// Run again the runs stored as failed, timed out or skipped.
        #[arg(long)]
        retry_failed: bool,
        /// Allow RT work with RT throttling disabled, or an RT hog on every CPU
        /// (both can freeze the machine).
        #[arg(long)]
        force: bool,
        /// Measure even while another schedlab measures on this machine
        /// (by default each run waits for the machine-wide measurement lock).
        #[arg(long)]
        allow_concurrent: bool,
    },
    /// Show the runs a spec expands to, how many are stored, and a time estimate,
    /// without running anything.
    Plan {
        #[command(flatten)]
        source: SpecSource,
        #[command(flatten)]
        db: DbArg,
        /// List every run in campaign order.
        #[arg(long)]
        list: bool,
        /// Check the spec as `run --force` would (RT throttling off, an RT
        /// hog on every CPU); without it plan refuses what run refuses.
        #[arg(long)]
        force: bool,
    },
    /// Built-in experiment specs.
    Preset {
        #[command(subcommand)]
        action: PresetAction,
    },
    /// Export stored runs: one row per process per run.
    Export {
        #[command(flatten)]
        db: DbArg,
        #[arg(long, value_enum, default_value = "csv")]
        format: ExportFormat,
        /// Only this campaign (see `schedlab campaigns`).
        #[arg(long)]
        campaign: Option<i64>,
        /// Write to this file instead of standard output (replaced whole; a
        /// device or FIFO is written through; "-" is standard output).
        #[arg(long, short)]
        output: Option<PathBuf>,
    },
    /// Merge the databases of many machines (or many runs) into one: every
    /// campaign, run, process, slice, latency histogram and environment,
    /// nothing twice. The sources are only read.
    #[command(
        after_help = "Campaigns are matched by their UUID and runs by their key: merging the same file twice \
                      adds nothing, and a campaign merged again after it ran further gets only its new runs. \
                      Each source is merged in one transaction.\n\nExamples:\n  \
                      schedlab merge host-a.db host-b.db -o fleet.db\n  \
                      schedlab report --db fleet.db --by host --format md"
    )]
    Merge {
        /// The databases to merge (read only; an older schema is read as it is).
        #[arg(required = true, value_name = "DB")]
        sources: Vec<PathBuf>,
        /// The database to merge into (created when missing; its campaigns are kept).
        #[arg(long, short, value_name = "DB")]
        output: PathBuf,
        /// No summary or progress output.
        #[arg(long, short)]
        quiet: bool,
    },
    /// List the campaigns in a database with their progress.
    Campaigns {
        #[command(flatten)]
        db: DbArg,
    },
    /// What this machine allows: kernel, CPUs, HZ, preemption, RT limits,
    /// cgroups, and which policies this user may set.
    Env {
        #[arg(long)]
        json: bool,
    },
    /// Show or change a process's scheduling policy, or start a command under
    /// one (like chrt and taskset, with the kernel's refusals explained).
    Policy {
        #[command(subcommand)]
        action: policy::PolicyCommand,
    },
    /// Kernel scheduling traces of runs stored with --trace.
    Trace {
        #[command(subcommand)]
        action: trace::TraceCommand,
    },
    /// Turn a campaign into statistics, findings, tables and charts: one
    /// self-contained HTML file, Markdown or JSON.
    Report(ReportArgs),
    /// Compare a candidate campaign with a baseline, condition by condition:
    /// ratios with confidence intervals, significance, better or worse.
    Compare(CompareArgs),
    /// Benchmarks of schedlab itself (figures, not tests).
    Bench {
        #[command(subcommand)]
        which: BenchCommand,
    },
    /// Internal: a worker process (started by `run`).
    #[command(name = "__worker", hide = true)]
    Worker { json: String },
}

#[derive(Subcommand)]
enum BenchCommand {
    /// schedlab's aio workload against fio with the same settings on the same file.
    Aio(AioBenchArgs),
    /// How exactly WRR (ext, fifo, signals), CFS nice and SCHED_DEADLINE deliver
    /// weighted shares of one CPU, with the dispatcher's overhead and lateness.
    Wrr(WrrBenchArgs),
    /// Time `report` over a synthetic database of 10,000 runs × 100 processes.
    Report(BenchReportArgs),
    /// schedlab's figures side by side with perf, cyclictest, hackbench and
    /// C loops, each row with the rule it must meet (exit 1 if a row fails).
    Fidelity(FidelityBenchArgs),
    /// What `--trace` costs (campaign wall time and run makespan, with and
    /// without, alternating) and how the trace agrees with schedstat and
    /// rusage (root).
    Trace(TraceBenchArgs),
}

#[derive(Args)]
struct TraceBenchArgs {
    /// Trials per side and workload.
    #[arg(long, default_value_t = 5)]
    trials: u32,
    /// The CPU the workers share.
    #[arg(long, default_value_t = 0)]
    cpu: usize,
}

#[derive(Args)]
struct FidelityBenchArgs {
    /// Fewer loops and one trial per row: well under a minute.
    #[arg(long)]
    quick: bool,
}

#[derive(Args)]
struct WrrBenchArgs {
    /// Weights of the workers, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,4,8,12,16,20")]
    weights: Vec<u32>,
    /// Seconds each way is measured.
    #[arg(long, default_value_t = 30.0)]
    seconds: f64,
    /// WRR quantum: slice = quantum × weight.
    #[arg(long, default_value_t = 10.0)]
    quantum_ms: f64,
    /// The CPU the workers share.
    #[arg(long, default_value_t = 0)]
    cpu: usize,
    /// Keep the runs in this database (default: a temporary one).
    #[arg(long)]
    db: Option<PathBuf>,
    /// Only these ways, comma-separated: ext, fifo, signals, nice, deadline
    /// (default: all; ext is skipped with its reason where it cannot run).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
}

#[derive(Args)]
struct AioBenchArgs {
    /// Size of the file both sides read and write.
    #[arg(long, default_value_t = 64 << 20)]
    file_bytes: u64,
    /// Bytes per operation.
    #[arg(long, default_value_t = 4096)]
    block_bytes: u64,
    /// Operations in flight.
    #[arg(long, default_value_t = 32)]
    queue_depth: u32,
    /// Percent of operations that are reads.
    #[arg(long, default_value_t = 100)]
    read_pct: u8,
    /// Go through the page cache instead of O_DIRECT.
    #[arg(long)]
    buffered: bool,
    /// Seconds per trial of each side.
    #[arg(long, default_value_t = 5.0)]
    duration_s: f64,
    /// Trials per side (alternating).
    #[arg(long, default_value_t = 5)]
    trials: u32,
    /// Directory for the test file (default: $TMPDIR).
    #[arg(long)]
    dir: Option<PathBuf>,
}

#[derive(Subcommand)]
enum PresetAction {
    /// List the built-in presets.
    List,
    /// Print a preset as TOML, to start a spec from.
    Show { name: String },
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ExportFormat {
    Csv,
    Json,
    /// Typed columns, for DuckDB, Polars, pandas, Spark (needs -o).
    Parquet,
}

#[derive(Args)]
struct SpecSource {
    /// The experiment spec (TOML).
    spec: Option<PathBuf>,
    /// Use a built-in preset instead of a file (`schedlab preset list`).
    #[arg(long, conflicts_with = "spec")]
    preset: Option<String>,
    /// Multiply the work per process by F (e.g. 0.01 for a quick look).
    #[arg(long, value_name = "F")]
    scale: Option<f64>,
    /// Override a key of the spec, e.g. --set repetitions=3 --set 'matrix.processes=[2,4]'.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Record the kernel's scheduling events of every run (tracefs; root),
    /// stored with the run: the same as --set trace=true.
    #[arg(long)]
    trace: bool,
}

#[derive(Args)]
struct DbArg {
    /// The SQLite database.
    #[arg(long, default_value = "schedlab.db", env = "SCHEDLAB_DB")]
    db: PathBuf,
}

/// A loaded spec with where it came from.
struct Loaded {
    spec: spec::Spec,
    origin: String,
    text: String,
    overrides: Vec<String>,
}

impl SpecSource {
    fn load(&self) -> Result<Loaded> {
        let (origin, text) = match (&self.spec, &self.preset) {
            (Some(path), None) => (out::path(path), spec::read_file(path)?),
            (None, Some(name)) => {
                let p = presets::find(name).ok_or_else(|| SpecError::Invalid {
                    origin: "--preset".into(),
                    key: name.clone(),
                    message: format!("no such preset; available: {}", presets::names()),
                })?;
                (format!("preset {name}"), p.toml.to_string())
            }
            _ => {
                return Err(SpecError::Parse {
                    origin: "schedlab".into(),
                    message: "give a spec file or --preset NAME (see `schedlab preset list`)"
                        .into(),
                }
                .into());
            }
        };
        let mut overrides = self.set.clone();
        if let Some(f) = self.scale {
            spec::check_scale(f).map_err(|message| SpecError::Parse {
                origin: "--scale".into(),
                message,
            })?;
            overrides.push(format!("scale={f:?}"));
        }
        if self.trace {
            overrides.push("trace=true".to_string());
        }
        let mut spec = spec::load(&text, &origin, &overrides)?;
        if let Some(path) = &self.spec {
            let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
            spec.resolve_workdir(dir.unwrap_or(std::path::Path::new(".")));
        }
        Ok(Loaded {
            spec,
            origin,
            text,
            overrides,
        })
    }
}

/// Parse the command line, run it, and return the process exit code.
pub fn main() -> i32 {
    let cli = Cli::parse();
    if let Command::Worker { json } = &cli.command {
        return crate::worker::main(json);
    }
    if let Command::Run { .. } = &cli.command {
        // Ctrl-C, TERM and HUP are taken synchronously by the campaign loop;
        // blocked from the very start, none that arrives while the spec is
        // loaded, the database opened or the machine calibrated is lost or
        // kills schedlab without cleanup: it stays pending until the loop
        // looks, which then stops before the first run (exit 128+N).
        if let Err(e) = crate::sys::proc::block_control_signals() {
            note!("error: cannot block signals: {e}");
            return 1;
        }
    }
    // A schedlab killed while it had changed a kernel setting left a journal:
    // put the machine back before doing anything else.
    // A command that changes nothing on the machine goes on with a warning
    // when that fails (an unreadable journal must not block `env` or
    // `report`); one that would change settings refuses.
    match crate::sys::knobs::recover_leftover() {
        Ok(Some(warning)) => note!("warning: {}", out::esc_lines(&warning)),
        Ok(None) => {}
        Err(e) => {
            let changes = changes_machine(&cli.command);
            note!(
                "{}: could not restore kernel settings left changed by an earlier schedlab: {}",
                if changes { "error" } else { "warning" },
                out::esc_lines(&format!("{e:#}"))
            );
            if changes {
                return 1;
            }
        }
    }
    // A schedlab killed while writing an output here left its temporary.
    crate::output::sweep(Path::new("."));
    let result = dispatch(cli.command).and_then(|code| {
        out::stdout().flush()?;
        Ok(code)
    });
    match result {
        Ok(code) => code,
        // Whoever read our standard output has stopped reading (`| head`):
        // nothing is wrong, and nobody is listening. ripgrep's rule, made
        // exact: the standard-output writer records the EPIPE it met, since
        // the error chain may have lost the io::Error on the way (serde_json)
        // and an EPIPE on another pipe (a worker's) is a real error.
        Err(_) if out::stdout_closed() => 0,
        Err(e) => {
            note!("error: {}", out::esc_lines(&format!("{e:#}")));
            if e.downcast_ref::<SpecError>().is_some()
                || e.downcast_ref::<crate::report::compare::CompareError>()
                    .is_some()
            {
                2
            } else {
                1
            }
        }
    }
}

/// Whether a command may change kernel settings, tracefs or the scheduler
/// (it then must not start while a leftover journal is unrestored).
fn changes_machine(command: &Command) -> bool {
    matches!(command, Command::Run { .. } | Command::Bench { .. })
}

fn dispatch(command: Command) -> Result<i32> {
    match command {
        Command::Run {
            source,
            db,
            quiet,
            retry_failed,
            force,
            allow_concurrent,
        } => cmd_run(
            &source,
            &db.db,
            campaign::Options {
                db: db.db.clone(),
                quiet,
                retry_failed,
                force,
                allow_concurrent,
            },
        ),
        Command::Plan {
            source,
            db,
            list,
            force,
        } => cmd_plan(&source, &db.db, list, force),
        Command::Preset {
            action: PresetAction::List,
        } => {
            for p in presets::PRESETS {
                outln!("{:<12} {}", p.name, p.summary)?;
            }
            Ok(0)
        }
        Command::Preset {
            action: PresetAction::Show { name },
        } => {
            let p = presets::find(&name).ok_or_else(|| SpecError::Invalid {
                origin: "preset show".into(),
                key: name.clone(),
                message: format!("no such preset; available: {}", presets::names()),
            })?;
            write!(out::stdout(), "{}", p.toml)?;
            Ok(0)
        }
        Command::Export {
            db,
            format,
            campaign,
            output,
        } => {
            let store = Store::open_existing(&db.db)?;
            let target = match &output {
                Some(path) => crate::output::Target::parse(path)?,
                None => crate::output::Target::Stdout,
            };
            if format == ExportFormat::Parquet
                && (output.is_none()
                    || (target.is_stdout() && std::io::IsTerminal::is_terminal(&std::io::stdout())))
            {
                return Err(SpecError::Parse {
                    origin: "--format parquet".into(),
                    message:
                        "Parquet is a binary file: name it with -o, e.g. -o runs.parquet (-o - \
                              writes it to standard output, not to a terminal)"
                            .into(),
                }
                .into());
            }
            // Two streamed passes: the figure names make the header, then
            // the rows go out as they are read.
            let figures = store.export_figure_names(campaign)?;
            let mut w = std::io::BufWriter::new(target.open()?);
            if format == ExportFormat::Parquet {
                let mut exporter = export::parquet::ParquetExporter::begin(&mut w, figures)?;
                store.for_each_export_row(campaign, |r| exporter.row(r))?;
                exporter
                    .finish()
                    .with_context(|| format!("cannot write -o {}", target.shown()))?;
            } else {
                let format = match format {
                    ExportFormat::Csv => export::Format::Csv,
                    ExportFormat::Json => export::Format::Json,
                    ExportFormat::Parquet => unreachable!("Parquet is written above"),
                };
                let mut exporter = export::Exporter::begin(&mut w, format, figures)?;
                store.for_each_export_row(campaign, |r| exporter.row(r))?;
                exporter.finish()?;
            }
            w.into_inner().map_err(|e| e.into_error())?.commit()?;
            Ok(0)
        }
        Command::Merge {
            sources,
            output,
            quiet,
        } => crate::merge::run(&crate::merge::MergeOptions {
            sources,
            output,
            quiet,
        }),
        Command::Campaigns { db } => {
            let store = Store::open_existing(&db.db)?;
            outln!(
                "{:>4}  {:<20} {:<16} {:>8} {:>6} {:>6} {:>7} {:>9} {:>8}",
                "id",
                "name",
                "host",
                "planned",
                "ok",
                "failed",
                "timeout",
                "skipped",
                "scale"
            )?;
            for c in store.campaigns()? {
                outln!(
                    "{:>4}  {:<20} {:<16} {:>8} {:>6} {:>6} {:>7} {:>9} {:>8}",
                    c.campaign.id,
                    out::esc(&c.campaign.name),
                    out::esc(c.campaign.hostname.as_deref().unwrap_or("?")),
                    c.campaign.planned_runs,
                    c.ok,
                    c.failed,
                    c.timed_out,
                    c.skipped,
                    c.campaign.scale
                )?;
            }
            Ok(0)
        }
        Command::Env { json } => {
            let env = envinfo::capture();
            let privs = probe::probe();
            let scx = crate::sys::scx::status();
            if json {
                let mut value: serde_json::Value =
                    serde_json::from_str(&envinfo::render_json(&env, &privs))?;
                value["sched_ext"] = serde_json::json!({
                    "state": scx.state,
                    "ops": scx.ops,
                    "may_load_bpf": scx.may_load_bpf.is_ok(),
                    "ext_mechanism": scx.unavailable().map_or_else(
                        || "available".to_string(),
                        |why| format!("absent: {why}")
                    ),
                    "installed": scx.installed,
                });
                outln!("{}", serde_json::to_string_pretty(&value)?)?;
            } else {
                write!(out::stdout(), "{}", envinfo::render_text(&env, &privs))?;
                outln!("rt bandwidth")?;
                for line in crate::sys::knobs::capability_from(&env).explain().lines() {
                    outln!("  {line}")?;
                }
                outln!("sched_ext")?;
                for line in scx.render_text().lines() {
                    outln!("  {line}")?;
                }
            }
            Ok(0)
        }
        Command::Policy { action } => policy::run(action),
        Command::Trace { action } => trace::run(action),
        Command::Report(args) => crate::report::run(args.options()),
        Command::Compare(args) => crate::report::compare::run(args.options()),
        Command::Bench {
            which: BenchCommand::Report(args),
        } => crate::bench::report::run(args.options()),
        Command::Bench {
            which: BenchCommand::Fidelity(a),
        } => {
            crate::bench::fidelity::run(crate::bench::fidelity::FidelityOptions { quick: a.quick })
        }
        Command::Bench {
            which: BenchCommand::Trace(a),
        } => {
            crate::bench::trace::run(crate::bench::trace::TraceBenchOptions {
                trials: a.trials,
                cpu: a.cpu,
            })?;
            Ok(0)
        }
        Command::Bench {
            which: BenchCommand::Wrr(a),
        } => {
            crate::bench::wrr::run(crate::bench::wrr::WrrBenchOptions {
                weights: a.weights,
                seconds: a.seconds,
                quantum_ms: a.quantum_ms,
                cpu: a.cpu,
                db: a.db,
                only: a.only,
            })?;
            Ok(0)
        }
        Command::Bench {
            which: BenchCommand::Aio(a),
        } => {
            let defaults = crate::bench::aio::AioBenchOptions::default();
            crate::bench::aio::run(crate::bench::aio::AioBenchOptions {
                file_bytes: a.file_bytes,
                block_bytes: a.block_bytes,
                queue_depth: a.queue_depth,
                read_pct: a.read_pct,
                direct: !a.buffered,
                duration_s: a.duration_s,
                trials: a.trials,
                dir: a.dir.unwrap_or(defaults.dir),
            })?;
            Ok(0)
        }
        Command::Worker { .. } => unreachable!("handled before dispatch"),
    }
}

fn cmd_run(source: &SpecSource, db: &Path, opts: campaign::Options) -> Result<i32> {
    let l = source.load()?;
    let quiet = opts.quiet;
    let s = campaign::run(&l.spec, &l.origin, &l.text, &l.overrides, &opts)?;
    let [ok, failed, timed_out, skipped] = s.by_status;
    if !quiet {
        note!(
            "campaign {}: {} runs this time (ok {ok}, failed {failed}, timed out {timed_out}, skipped {skipped}); \
             {} were stored before",
            s.campaign.id,
            s.ran,
            s.already_done
        );
    }
    if let Some(sig) = s.interrupted {
        note!(
            "interrupted by {}: finished runs are stored in {}; run the same command again to resume",
            crate::sys::proc::signal_name(sig),
            out::path(db)
        );
        return Ok(128 + sig);
    }
    // Runs that failed or timed out are stored with their reasons, but a
    // script must not take the campaign for a success.
    if failed + timed_out > 0 {
        return Ok(EXIT_RUNS_FAILED);
    }
    Ok(0)
}

/// Exit code of `run` when the campaign ended but runs failed or timed out.
pub const EXIT_RUNS_FAILED: i32 = 3;

fn cmd_plan(source: &SpecSource, db: &Path, list: bool, force: bool) -> Result<i32> {
    let l = source.load()?;
    let campaign::Preview {
        env,
        done,
        seed,
        runs,
        rates,
        estimate_s: est,
        ..
    } = campaign::preview(&l.spec, &l.origin, db, force)?;
    let s = &l.spec;
    let pending: Vec<&plan::Run> = runs.iter().filter(|r| !done.contains(&r.key)).collect();
    outln!("campaign     {} ({})", out::esc(&s.name), l.origin)?;
    if !s.description.is_empty() {
        outln!("             {}", out::esc(&s.description))?;
    }
    outln!(
        "policies     {}",
        s.policies
            .iter()
            .map(|p| p.name())
            .collect::<Vec<_>>()
            .join(", ")
    )?;
    outln!(
        "workloads    {}",
        s.workloads
            .iter()
            .map(|w| out::esc(&w.name))
            .collect::<Vec<_>>()
            .join(", ")
    )?;
    outln!(
        "processes    {}",
        s.processes
            .iter()
            .map(|p| p.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    )?;
    outln!(
        "priorities   {}",
        s.priorities
            .iter()
            .map(|p| out::esc(&p.name))
            .collect::<Vec<_>>()
            .join(", ")
    )?;
    outln!(
        "cpus         {}",
        s.cpus
            .iter()
            .map(|c| c.label())
            .collect::<Vec<_>>()
            .join(", ")
    )?;
    let joined = |v: Vec<String>| v.join(", ");
    if !s.rt_runtime_us.is_empty() {
        outln!(
            "rt runtimes  {} µs",
            joined(s.rt_runtime_us.iter().map(|v| v.to_string()).collect())
        )?;
    }
    if !s.slice_us.is_empty() {
        outln!(
            "slices       {} µs (EEVDF, asked by the workers)",
            joined(s.slice_us.iter().map(|v| v.to_string()).collect())
        )?;
    }
    if !s.ext_schedulers.is_empty() {
        let levels = s
            .ext_schedulers
            .iter()
            .map(|x| match x.loads() {
                false => x.name.clone(),
                true if x.command.join(" ") == x.name => x.name.clone(),
                true => format!("{} ({})", x.name, x.command.join(" ")),
            })
            .collect();
        outln!(
            "sched_ext    {} (started before each run of its condition, stopped after)",
            joined(levels)
        )?;
    }
    if let Some(h) = &s.hog {
        let who = if h.is_rt() {
            format!("1 {} at RT priority {}", h.policy.name(), h.rt_priority)
        } else {
            format!("{} {} at nice {}", h.count, h.policy.name(), h.nice)
        };
        outln!("hogs         {who} on cpus {}", h.cpus.label())?;
    }
    if s.trace {
        outln!(
            "trace        every run's sched_switch, wake-ups, migrations and exits (tracefs, \
             schedlab's own instance; stored with the run)"
        )?;
    }
    outln!("repetitions  {}", s.repetitions)?;
    outln!("scale        {}", s.scale)?;
    outln!(
        "order        {}",
        match (s.order, seed) {
            (spec::Order::Sequential, _) => "sequential".to_string(),
            (spec::Order::Shuffled, Some(seed)) => format!("shuffled, seed {seed}"),
            (spec::Order::Shuffled, None) =>
                "shuffled, seed drawn when the campaign starts".to_string(),
        }
    )?;
    outln!(
        "runs         {} ({} stored in {}, {} to run)",
        runs.len(),
        runs.len() - pending.len(),
        out::path(db),
        pending.len()
    )?;
    if pending.is_empty() {
        outln!("estimate     nothing left to run")?;
    } else {
        outln!(
            "estimate     {} for the runs left (from a {:.0} M iterations/s pi calibration on this machine; \
             I/O and contention make real runs longer)",
            crate::progress::human_duration(est),
            rates.pi_iter_per_s / 1e6
        )?;
    }
    if list {
        if seed.is_none() && s.order == spec::Order::Shuffled {
            outln!(
                "(listing in sequential order: the shuffle seed is drawn when the campaign starts)"
            )?;
        }
        let runs = if seed.is_none() {
            plan::expand(
                &spec::Spec {
                    order: spec::Order::Sequential,
                    ..s.clone()
                },
                0,
            )
        } else {
            runs.clone()
        };
        for r in &runs {
            let mark = if done.contains(&r.key) { "stored" } else { "" };
            outln!("{:>5}  {:<70} {mark}", r.seq, out::esc(&r.label()))?;
        }
    }
    for p in probe::probe().policies.iter().filter(|p| !p.allowed) {
        if l.spec.policies.iter().any(|sp| sp.name() == p.policy) {
            outln!(
                "warning      {} runs will be skipped: {}",
                p.policy,
                p.detail
            )?;
        }
    }
    let all: Vec<&plan::Run> = runs.iter().collect();
    for w in plan::short_work_warnings(&all, &rates, campaign::slices_of(&env)) {
        outln!("warning      {}", out::esc(&w))?;
    }
    Ok(0)
}

// ------------------------------------- report and bench report ---

/// Output format of `schedlab report` (see [`crate::report::Format`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FormatArg {
    /// One self-contained HTML file with charts (no network, no scripts).
    Html,
    /// Markdown: findings and tables, for the terminal or a lab report.
    Md,
    /// JSON: every statistic, for scripts.
    Json,
}

impl From<FormatArg> for crate::report::Format {
    fn from(f: FormatArg) -> Self {
        match f {
            FormatArg::Html => crate::report::Format::Html,
            FormatArg::Md => crate::report::Format::Md,
            FormatArg::Json => crate::report::Format::Json,
        }
    }
}

/// A metric on the command line (see [`crate::report::Metric`]; the names
/// are [`crate::report::Metric::name`]'s).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
#[value(rename_all = "snake_case")]
pub enum MetricArg {
    /// Wall time of a process, s.
    Wall,
    /// User CPU time, s.
    Utime,
    /// System CPU time, s.
    Stime,
    /// (user + system CPU) / wall time, %.
    CpuPct,
    /// Voluntary context switches.
    Nvcsw,
    /// Involuntary context switches (preemptions).
    Nivcsw,
    /// Run-queue wait (schedstat), ms.
    Wait,
    /// On-CPU time (schedstat), s.
    Run,
    /// Time slices (schedstat).
    Timeslices,
    /// Work done, in the workload's unit.
    Work,
    /// Run makespan: barrier release to the last worker's end, s.
    Makespan,
}

impl From<MetricArg> for crate::report::Metric {
    fn from(m: MetricArg) -> Self {
        use crate::report::Metric;
        match m {
            MetricArg::Wall => Metric::Wall,
            MetricArg::Utime => Metric::Utime,
            MetricArg::Stime => Metric::Stime,
            MetricArg::CpuPct => Metric::CpuPct,
            MetricArg::Nvcsw => Metric::Nvcsw,
            MetricArg::Nivcsw => Metric::Nivcsw,
            MetricArg::Wait => Metric::Wait,
            MetricArg::Run => Metric::Run,
            MetricArg::Timeslices => Metric::Timeslices,
            MetricArg::Work => Metric::Work,
            MetricArg::Makespan => Metric::Makespan,
        }
    }
}

/// Arguments of `schedlab report`.
#[derive(Debug, Clone, Args)]
#[command(
    after_help = "Output: HTML is written to report.html unless -o says otherwise; Markdown and JSON go to \
                        standard output unless -o names a file (\"-o -\" always means standard output). Without \
                        --format, the format follows the -o extension (.md, .json, else HTML).\n\n\
                        Examples:\n  schedlab report --db results.db -o report.html\n  \
                        schedlab report --db results.db --format md\n  \
                        schedlab report --db results.db --format json > summary.json\n  \
                        schedlab report --db results.db --campaign 3 --metric wall,nivcsw\n  \
                        schedlab report --db fleet.db --by host --format md"
)]
pub struct ReportArgs {
    /// The SQLite database.
    #[arg(long, default_value = "schedlab.db", env = "SCHEDLAB_DB")]
    pub db: PathBuf,
    /// Campaign to report on (default: the latest; `schedlab campaigns` lists them).
    #[arg(long)]
    pub campaign: Option<i64>,
    /// Output format (default: from the -o extension, else html).
    #[arg(long, value_enum)]
    pub format: Option<FormatArg>,
    /// Output file, or "-" for standard output (default: report.html for HTML, standard output otherwise).
    #[arg(long, short)]
    pub output: Option<PathBuf>,
    /// Only these metrics, comma-separated (default: all).
    #[arg(long, value_enum, value_delimiter = ',', value_name = "METRIC,...")]
    pub metric: Vec<MetricArg>,
    /// Base seed of the bootstrap intervals (recorded in the report).
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub bootstrap_seed: u64,
    /// Most bootstrap resamples per interval (fewer for very large conditions; recorded).
    #[arg(long, default_value_t = 2000, value_name = "N", value_parser = clap::value_parser!(u64).range(100..=1_000_000))]
    pub resamples: u64,
    /// The WRR run whose slices the Gantt chart shows (default: the first ok WRR run).
    #[arg(long, value_name = "RUN_ID")]
    pub gantt_run: Option<i64>,
    /// The traced run whose per-CPU timeline the Trace section draws (default: the first usable traced run).
    #[arg(long, value_name = "RUN_ID")]
    pub timeline_run: Option<i64>,
    /// The part of that run's trace drawn, from its start: FROM..TO with units (default: 0s..250ms).
    #[arg(long, value_name = "FROM..TO", value_parser = crate::report::window::parse_window)]
    pub window: Option<crate::report::window::TimeWindow>,
    /// One spec run on many machines: report every campaign of the
    /// campaign's spec (from `schedlab merge`), with the host or the
    /// kernel release as a factor.
    #[arg(long, value_enum)]
    pub by: Option<ByArg>,
}

/// The factor `report --by` adds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ByArg {
    /// The machine (hostname; with its host id when two share a name).
    Host,
    /// The kernel release (`uname -r`).
    Kernel,
}

impl ReportArgs {
    /// The library's options: format from --format or the -o extension,
    /// destination from -o, every metric when none is named.
    pub fn options(&self) -> crate::report::RunOptions {
        use crate::report::{Format, Metric, Options, RunOptions, destination};
        let format = Format::resolve(self.format.map(Format::from), self.output.as_deref());
        RunOptions {
            db: self.db.clone(),
            format,
            destination: destination(self.output.as_deref(), format),
            analysis: Options {
                campaign: self.campaign,
                metrics: if self.metric.is_empty() {
                    Metric::ALL.to_vec()
                } else {
                    self.metric.iter().map(|&m| Metric::from(m)).collect()
                },
                bootstrap_seed: self.bootstrap_seed,
                resamples: self.resamples as usize,
                gantt_run: self.gantt_run,
                timeline_run: self.timeline_run,
                timeline_window: self.window,
                by: self.by.map(|b| match b {
                    ByArg::Host => crate::store::RunFactor::Host,
                    ByArg::Kernel => crate::store::RunFactor::Kernel,
                }),
            },
        }
    }
}

/// An environment field on the command line (see
/// [`crate::report::compare::EnvField`]; the names are its names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
#[value(rename_all = "snake_case")]
pub enum EnvFieldArg {
    /// The machine (hostname).
    Host,
    /// Kernel release.
    Kernel,
    /// CPU model.
    Cpu,
    /// CPUs online.
    Cpus,
    /// Timer frequency.
    Hz,
    /// Preemption model.
    Preemption,
    /// sched_rt_runtime_us / sched_rt_period_us.
    RtLimits,
    /// sched_rr_timeslice_ms.
    RrTimeslice,
    /// sched_ext state.
    SchedExt,
    /// cgroup version.
    Cgroup,
    /// Virtualisation.
    Virtualisation,
    /// schedlab version.
    Schedlab,
}

impl From<EnvFieldArg> for crate::report::compare::EnvField {
    fn from(f: EnvFieldArg) -> Self {
        use crate::report::compare::EnvField;
        match f {
            EnvFieldArg::Host => EnvField::Host,
            EnvFieldArg::Kernel => EnvField::Kernel,
            EnvFieldArg::Cpu => EnvField::Cpu,
            EnvFieldArg::Cpus => EnvField::Cpus,
            EnvFieldArg::Hz => EnvField::Hz,
            EnvFieldArg::Preemption => EnvField::Preemption,
            EnvFieldArg::RtLimits => EnvField::RtLimits,
            EnvFieldArg::RrTimeslice => EnvField::RrTimeslice,
            EnvFieldArg::SchedExt => EnvField::SchedExt,
            EnvFieldArg::Cgroup => EnvField::Cgroup,
            EnvFieldArg::Virtualisation => EnvField::Virtualisation,
            EnvFieldArg::Schedlab => EnvField::Schedlab,
        }
    }
}

/// Arguments of `schedlab compare`.
#[derive(Debug, Clone, Args)]
#[command(
    after_help = "The baseline is --db (its latest campaign, or --campaign N); the candidate is --vs (its latest \
                  campaign, or --vs-campaign N), or --vs-campaign N of --db. Campaigns whose specs differ are \
                  refused (the differences listed) unless --force. HTML is written to compare.html unless -o says \
                  otherwise; Markdown and JSON go to standard output unless -o names a file.\n\n\
                  Examples:\n  schedlab compare --db base.db --vs cand.db\n  \
                  schedlab compare --db all.db --campaign 3 --vs-campaign 7 -o cmp.html\n  \
                  schedlab compare --db base.db --vs cand.db --format md --expect kernel\n  \
                  schedlab compare --db base.db --vs cand.db --format json > cmp.json\n  \
                  schedlab compare --db base.db --vs cand.db --margin 2% --fail-on regression"
)]
pub struct CompareArgs {
    /// The baseline's database.
    #[arg(long, default_value = "schedlab.db", env = "SCHEDLAB_DB")]
    pub db: PathBuf,
    /// The baseline campaign (default: the latest of --db).
    #[arg(long, value_name = "N")]
    pub campaign: Option<i64>,
    /// The candidate's database (default: --db).
    #[arg(long, value_name = "CANDIDATE_DB")]
    pub vs: Option<PathBuf>,
    /// The candidate campaign (default: the latest of --vs).
    #[arg(long, value_name = "N")]
    pub vs_campaign: Option<i64>,
    /// Output format (default: from the -o extension, else html).
    #[arg(long, value_enum)]
    pub format: Option<FormatArg>,
    /// Output file, or "-" for standard output (default: compare.html for HTML, standard output otherwise).
    #[arg(long, short)]
    pub output: Option<PathBuf>,
    /// Only these metrics, comma-separated (default: all).
    #[arg(long, value_enum, value_delimiter = ',', value_name = "METRIC,...")]
    pub metric: Vec<MetricArg>,
    /// Compare campaigns whose specs differ (the differences are listed first).
    #[arg(long)]
    pub force: bool,
    /// Environment fields meant to differ (e.g. kernel); any other difference is flagged.
    #[arg(long, value_enum, value_delimiter = ',', value_name = "FIELD,...")]
    pub expect: Vec<EnvFieldArg>,
    /// Base seed of the bootstrap intervals (recorded in the output).
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub bootstrap_seed: u64,
    /// Most bootstrap resamples per interval (recorded).
    #[arg(long, default_value_t = 2000, value_name = "N", value_parser = clap::value_parser!(u64).range(100..=1_000_000))]
    pub resamples: u64,
    /// Equivalence margin (e.g. 2%): each row is equivalent within it, different, or neither shown (default: the spec's compare_margin_pct).
    #[arg(long, value_name = "PCT", value_parser = crate::report::compare::parse_margin_pct)]
    pub margin: Option<f64>,
    /// Exit with code 4 when a metric is worse beyond the margin with significance (CI use).
    #[arg(long, value_name = "WHAT", value_parser = ["regression"])]
    pub fail_on: Option<String>,
}

impl CompareArgs {
    /// The library's options.
    pub fn options(&self) -> crate::report::compare::RunOptions {
        use crate::report::compare::{CompareOptions, RunOptions};
        use crate::report::{Format, Metric, Options};
        let format = Format::resolve(self.format.map(Format::from), self.output.as_deref());
        let destination = match self.output.as_deref() {
            Some(p) if p.as_os_str() == "-" => None,
            Some(p) => Some(p.to_path_buf()),
            None if format == Format::Html => Some(PathBuf::from("compare.html")),
            None => None,
        };
        RunOptions {
            db: self.db.clone(),
            campaign: self.campaign,
            vs: self.vs.clone(),
            vs_campaign: self.vs_campaign,
            format,
            destination,
            compare: CompareOptions {
                analysis: Options {
                    campaign: None,
                    metrics: if self.metric.is_empty() {
                        Metric::ALL.to_vec()
                    } else {
                        self.metric.iter().map(|&m| Metric::from(m)).collect()
                    },
                    bootstrap_seed: self.bootstrap_seed,
                    resamples: self.resamples as usize,
                    gantt_run: None,
                    by: None,
                    timeline_run: None,
                    timeline_window: None,
                },
                force: self.force,
                expect: self.expect.iter().map(|&f| f.into()).collect(),
                margin_pct: self.margin,
            },
            fail_on_regression: self.fail_on.is_some(),
        }
    }
}

/// Arguments of `schedlab bench report`.
#[derive(Debug, Clone, Args)]
pub struct BenchReportArgs {
    /// Keep the synthetic database at this path (default: a temporary file,
    /// removed afterwards). An existing file is replaced.
    #[arg(long)]
    pub db: Option<PathBuf>,
    /// Repetitions per condition; 40 conditions, half with 50 and half with
    /// 150 processes (default 250: 10,000 runs, 1,000,000 process rows).
    #[arg(long, default_value_t = 250)]
    pub repetitions: u32,
    /// Write the three reports into this directory (default: discard them).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

impl BenchReportArgs {
    pub fn options(&self) -> crate::bench::report::BenchReportOptions {
        crate::bench::report::BenchReportOptions {
            db: self.db.clone(),
            repetitions: self.repetitions,
            out: self.out.clone(),
        }
    }
}

#[cfg(test)]
mod report_args_tests {
    use super::*;
    use crate::report::{Format, Metric};

    #[test]
    fn metric_arguments_are_the_metrics_by_name() {
        let args = MetricArg::value_variants();
        assert_eq!(args.len(), Metric::ALL.len());
        for (a, m) in args.iter().zip(Metric::ALL) {
            assert_eq!(Metric::from(*a), m);
            assert_eq!(a.to_possible_value().unwrap().get_name(), m.name());
        }
    }

    #[test]
    fn env_field_arguments_are_the_fields_by_name() {
        use crate::report::compare::EnvField;
        let args = EnvFieldArg::value_variants();
        assert_eq!(args.len(), EnvField::ALL.len());
        for (a, f) in args.iter().zip(EnvField::ALL) {
            assert_eq!(EnvField::from(*a), f);
            assert_eq!(a.to_possible_value().unwrap().get_name(), f.name());
        }
    }

    #[test]
    fn compare_arguments_become_plain_options() {
        let cli = Cli::try_parse_from([
            "schedlab",
            "compare",
            "--db",
            "a.db",
            "--vs",
            "b.db",
            "--metric",
            "wall,nivcsw",
            "--expect",
            "kernel,hz",
            "--force",
        ])
        .unwrap();
        let Command::Compare(args) = cli.command else {
            panic!("not compare")
        };
        let o = args.options();
        assert_eq!(o.format, Format::Html);
        assert_eq!(o.destination, Some(PathBuf::from("compare.html")));
        assert_eq!(o.vs, Some(PathBuf::from("b.db")));
        assert_eq!((o.campaign, o.vs_campaign), (None, None));
        assert_eq!(o.compare.analysis.metrics, [Metric::Wall, Metric::Nivcsw]);
        assert!(o.compare.force);
        use crate::report::compare::EnvField;
        assert_eq!(o.compare.expect, [EnvField::Kernel, EnvField::Hz]);
        let cli = Cli::try_parse_from([
            "schedlab",
            "compare",
            "--db",
            "all.db",
            "--campaign",
            "3",
            "--vs-campaign",
            "7",
            "-o",
            "c.json",
        ])
        .unwrap();
        let Command::Compare(args) = cli.command else {
            panic!("not compare")
        };
        let o = args.options();
        assert_eq!((o.campaign, o.vs_campaign, o.vs), (Some(3), Some(7), None));
        assert_eq!(o.format, Format::Json);
        assert_eq!(o.compare.analysis.metrics, Metric::ALL);
        assert!(!o.compare.force);
    }

    #[test]
    fn report_arguments_become_plain_options() {
        let cli = Cli::try_parse_from([
            "schedlab",
            "report",
            "--db",
            "x.db",
            "-o",
            "r.MD",
            "--metric",
            "wall,makespan",
        ])
        .unwrap();
        let Command::Report(args) = cli.command else {
            panic!("not report")
        };
        let o = args.options();
        assert_eq!(o.format, Format::Md);
        assert_eq!(o.destination, Some(PathBuf::from("r.MD")));
        assert_eq!(o.analysis.metrics, [Metric::Wall, Metric::Makespan]);
        assert_eq!(o.analysis.resamples, 2000);
        let cli = Cli::try_parse_from(["schedlab", "report", "--db", "x.db", "-o", "-"]).unwrap();
        let Command::Report(args) = cli.command else {
            panic!("not report")
        };
        let o = args.options();
        assert_eq!((o.format, o.destination), (Format::Html, None));
        assert_eq!(o.analysis.metrics, Metric::ALL);
    }
}
