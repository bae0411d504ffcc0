//! `schedlab policy`: show and change the scheduling of a process, or start a
//! command under a policy — what `chrt` and `taskset` do, with every value
//! checked before a system call and every kernel refusal explained.
//!
//! This module owns what `policy get / set / exec` do once the command line
//! is parsed (the clap definitions are in `crate::cli`, which hands over a
//! plain [`PolicyArgs`]): checking the arguments into an [`Action`] by pure
//! functions (errors are [`SpecError`](crate::spec::SpecError)s, exit code
//! 2), then running it. The system calls come from [`crate::sys::sched`] and
//! /proc is read through [`crate::sys::procstat`]; a refusal is explained
//! from its errno plus what can be read about the target afterwards (owner,
//! rlimits, affinity, admitted DEADLINE bandwidth), again by a pure function
//! ([`explain`]).
//!
//! Files, one job each (durations with a unit are [`crate::units`]'s):
//! - `args.rs`: the argument types, as given ([`PolicyArgs`],
//!   [`SchedArgs`]) and checked ([`Action`], [`Request`], [`DlParams`]);
//! - `validate.rs`: request validation ([`validate_command`], [`validate`],
//!   [`resolve_cpus`], [`check_period_limits`]);
//! - `info.rs`: a process's scheduling as the kernel reports it
//!   ([`SchedInfo`], [`read_info`]) and its text ([`render_text`]);
//! - `explain.rs`: the kernel's refusals in words ([`explain`],
//!   [`RefusalContext`], [`Admission`]);
//! - `commands.rs`: the subcommands ([`run`]): `get`, `set`, and `exec` with
//!   its fork/exec, wait and signal forwarding.

mod args;
mod commands;
mod explain;
mod info;
mod validate;

pub use args::{
    Action, Change, DlParams, ExecOptions, GetOptions, PolicyArgs, Request, SchedArgs, SetOptions,
};
pub use commands::run;
pub use explain::{Admission, RefusalContext, Step, admission_text, explain};
pub use info::{SchedInfo, policy_names, read_info, render_text};
pub use validate::{
    DL_MIN_RUNTIME_NS, check_period_limits, resolve_cpus, validate, validate_change,
    validate_command, validate_pid,
};
