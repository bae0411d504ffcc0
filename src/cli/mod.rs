//! The command line: the [`Cli`] type, [`main`] with the global error and
//! exit-code handling, and one file per command, each with its arguments
//! (clap) and a `run` that calls into the library. No experiment logic
//! lives here. clap is used here and nowhere else: the library modules
//! take plain option structs, and clap parses straight into the domain's
//! enums (`values.rs`).

use anyhow::Result;
use clap::{Parser, Subcommand};
use std::io::Write;
use std::path::Path;

use crate::out;
use crate::spec::SpecError;

mod bench;
mod campaigns;
mod compare;
mod completions;
mod env;
mod export;
mod kernel;
mod man;
mod merge;
mod plan;
mod policy;
mod preset;
mod report;
mod run;
mod simulate;
mod source;
mod synthesize;
mod trace;
mod values;

pub use run::EXIT_RUNS_FAILED;

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
    Run(run::RunArgs),
    /// Run a campaign in the model of this machine's scheduler instead of on
    /// it (EEVDF, RT with throttling, DEADLINE, WRR as documented) and store
    /// it like a measured one: `compare --db measured.db --vs simulated.db`
    /// is then the prediction error.
    Simulate(simulate::SimulateArgs),
    /// Show the runs a spec expands to, how many are stored, and a time estimate,
    /// without running anything.
    Plan(plan::PlanArgs),
    /// Built-in experiment specs.
    Preset {
        #[command(subcommand)]
        action: preset::PresetCommand,
    },
    /// Export stored runs: one row per process per run.
    Export(export::ExportArgs),
    /// Merge the databases of many machines (or many runs) into one: every
    /// campaign, run, process, slice, latency histogram and environment,
    /// nothing twice. The sources are only read.
    Merge(merge::MergeArgs),
    /// List the campaigns in a database with their progress.
    Campaigns(campaigns::CampaignsArgs),
    /// What this machine allows: kernel, CPUs, HZ, preemption, RT limits,
    /// cgroups, and which policies this user may set.
    Env(env::EnvArgs),
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
    Report(report::ReportArgs),
    /// A replay of one traced run (any workload): its tree of tasks, their
    /// CPU bursts, sleeps, wake-ups and forks as a spec with a `kind =
    /// "replay"` workload (and rt-app JSON); --check runs it and prints
    /// replay against original, each figure with its rule and verdict.
    Synthesize(synthesize::SynthesizeArgs),
    /// Guest kernels for machine campaigns: list the recipes and the cache,
    /// build one from Debian's source, check a bzImage of your own.
    Kernel {
        #[command(subcommand)]
        action: kernel::KernelCommand,
    },
    /// Compare a candidate campaign with a baseline, condition by condition:
    /// ratios with confidence intervals, significance, better or worse.
    Compare(compare::CompareArgs),
    /// Benchmarks of schedlab itself (figures, not tests).
    Bench {
        #[command(subcommand)]
        which: bench::BenchCommand,
    },
    /// A completion script for a shell (bash, zsh, fish), on standard output.
    Completions(completions::CompletionsArgs),
    /// The manual page (roff) on standard output, or with --dir a page per
    /// command written into a directory.
    Man(man::ManArgs),
    /// Internal: a worker process (started by `run`).
    #[command(name = "__worker", hide = true)]
    Worker { json: String },
    /// Internal: schedlab inside a guest it booted (started by the guest's
    /// init), serving the host's runs over the guest's channel.
    #[command(name = "__guest-agent", hide = true)]
    GuestAgent,
    /// Internal: the guard of a cgroup session's trees (started by schedlab
    /// itself; acts when its standard input ends).
    #[command(name = "__watchdog", hide = true)]
    Watchdog { parents: Vec<std::path::PathBuf> },
}

/// The command line as people use it, for completions and manual pages:
/// [`Cli`]'s, without the hidden worker mode (clap_complete's bash script
/// would offer it).
fn visible_command() -> clap::Command {
    use clap::CommandFactory;
    let full = Cli::command();
    let visible: Vec<clap::Command> = full
        .get_subcommands()
        .filter(|c| !c.is_hide_set())
        .cloned()
        .collect();
    let mut cmd = clap::Command::new("schedlab")
        .version(env!("CARGO_PKG_VERSION"))
        .subcommand_required(true)
        .subcommands(visible);
    if let Some(about) = full.get_about() {
        cmd = cmd.about(about.clone());
    }
    if let Some(after) = full.get_after_help() {
        cmd = cmd.after_help(after.clone());
    }
    cmd
}

/// Parse the command line, run it, and return the process exit code.
pub fn main() -> i32 {
    crate::sys::cgroup::enable_watchdog();
    let cli = Cli::parse();
    if let Command::Worker { json } = &cli.command {
        return crate::worker::main(json);
    }
    if let Command::Watchdog { parents } = &cli.command {
        return crate::sys::cgroup::watchdog_main(parents);
    }
    let campaign = match &cli.command {
        Command::Run { .. } | Command::GuestAgent => true,
        Command::Synthesize(a) => a.runs_campaign(),
        _ => false,
    };
    if campaign {
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
                || e.downcast_ref::<crate::compare::CompareError>().is_some()
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
    matches!(
        command,
        Command::Run { .. } | Command::Bench { .. } | Command::GuestAgent | Command::Synthesize(_)
    )
}

fn dispatch(command: Command) -> Result<i32> {
    match command {
        Command::Run(a) => run::run(a),
        Command::Simulate(a) => simulate::run(a),
        Command::Plan(a) => plan::run(a),
        Command::Preset { action } => preset::run(action),
        Command::Export(a) => export::run(a),
        Command::Merge(a) => merge::run(a),
        Command::Campaigns(a) => campaigns::run(a),
        Command::Env(a) => env::run(a),
        Command::Policy { action } => policy::run(action),
        Command::Trace { action } => trace::run(action),
        Command::Report(a) => report::run(a),
        Command::Synthesize(a) => synthesize::run(a),
        Command::Compare(a) => compare::run(a),
        Command::Kernel { action } => kernel::run(action),
        Command::Bench { which } => bench::run(which),
        Command::Completions(a) => completions::run(a),
        Command::Man(a) => man::run(a),
        // `main` starts a worker before anything else; here for completeness.
        Command::Worker { json } => Ok(crate::worker::main(&json)),
        Command::GuestAgent => crate::machine::agent::serve().map(|()| 0),
        Command::Watchdog { parents } => Ok(crate::sys::cgroup::watchdog_main(&parents)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_well_formed() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
        visible_command().debug_assert();
    }

    #[test]
    fn the_visible_command_is_the_cli_without_the_worker() {
        use clap::CommandFactory;
        let names = |c: &clap::Command| -> Vec<String> {
            c.get_subcommands()
                .map(|s| s.get_name().to_string())
                .collect()
        };
        let full = Cli::command();
        let visible = visible_command();
        let mut expected = names(&full);
        expected.retain(|n| !n.starts_with("__"));
        assert_eq!(names(&visible), expected);
        assert!(expected.len() > 10);
        assert_eq!(
            visible.get_about().map(|a| a.to_string()),
            full.get_about().map(|a| a.to_string())
        );
    }
}
