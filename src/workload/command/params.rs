//! A `command` workload's parameters: the serde description that travels
//! in specs, plans and the store ([`CommandParams`]), its parser from a
//! `[workloads.NAME]` table (every mistake named by its full key), and the
//! look-up of its program in PATH ([`resolve_program`]) that `plan` runs.
//!
//! ```toml
//! [workloads.build]
//! kind = "command"
//! argv = ["make", "-j2", "-C", "src"]     # no shell unless argv asks for one
//! setup = ["make", "-C", "src", "clean"]  # once per run, before the barrier
//! env = { CFLAGS = "-O2" }                 # added to the environment
//! cwd = "/abs/dir"                         # default: the run's own directory
//! stdin = "input.txt"                      # a file (relative to cwd); default none
//! duration_s = 10                          # SIGTERM at release + 10 s, SIGKILL after grace_s
//! grace_s = 5
//! ok_exit = [0]
//! end = "tree"                             # or "exit": the run ends with the program itself
//! user = "nobody"
//! parser = "hackbench"                     # figures of a standard benchmark
//! parser_from = "stdout"                   # where the parser reads (default: the tool's own)
//!
//! [workloads.build.figures.elapsed]
//! regex = 'Time: ([0-9.]+)'                # or json = "/jobs/0/read/bw"
//! from = "stdout"                          # stdout | stderr | a file relative to cwd
//! unit = "s"
//! better = "lower"
//! ```

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

use super::parsers::Tool;
use crate::workload::keys::{KeyError, Keys};

/// Any program run as a workload. Work unit: runs (one per process).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommandParams {
    /// The program (looked up in PATH unless it holds a `/`) and its
    /// arguments; no shell is involved.
    pub argv: Vec<String>,
    /// Added to (or replacing in) the environment schedlab runs in.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// The program's directory; `None`: the run's own directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
    /// A file (relative to the program's directory, or absolute) given as
    /// standard input; `None`: no input (end of file at once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdin: Option<PathBuf>,
    /// Run once per run before the barrier, outside the measured window,
    /// under the run's timeout; empty: none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub setup: Vec<String>,
    /// SIGTERM to the program's whole tree at release + this; `None`: the
    /// program runs until it exits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ns: Option<u64>,
    /// How long after SIGTERM the tree gets SIGKILL.
    pub grace_ns: u64,
    /// Exit statuses that count as success.
    pub ok_exit: Vec<u8>,
    /// When the program's run ends: once its whole tree has exited (the
    /// default), or once the program itself has (the rest of its tree is
    /// then killed, and the run's `extra.command` says so).
    #[serde(default, skip_serializing_if = "End::is_tree")]
    pub end: End,
    /// Run the program (and `setup`) as this user; `None`: as schedlab.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// Named figures taken from the program's output.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub figures: BTreeMap<String, FigureSpec>,
    /// A standard benchmark's parser and where it reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parser: Option<ParserSpec>,
    /// The program's synthesized replay (`replay`: the `[workloads.replay]`
    /// table `schedlab synthesize` writes, pasted): the model predicts the
    /// program from it. Not sent to the worker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<Box<crate::workload::replay::ReplayParams>>,
}

/// A `command` workload's `end` key: what ends its run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum End {
    /// The last process of the program's tree has exited.
    #[default]
    Tree,
    /// The program itself (the tree's top process) has exited; whatever
    /// of its tree is left is killed.
    Exit,
}

impl End {
    fn is_tree(&self) -> bool {
        *self == End::Tree
    }
}

/// Where a figure is read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    Stdout,
    Stderr,
    /// A file the program writes, relative to its directory (never outside it).
    File(PathBuf),
}

impl Source {
    /// "stdout", "stderr" or the file's path, for messages.
    pub fn label(&self) -> String {
        match self {
            Source::Stdout => "stdout".into(),
            Source::Stderr => "stderr".into(),
            Source::File(p) => p.display().to_string(),
        }
    }
}

/// How a figure is found in its source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pattern {
    /// A regular expression with exactly one capture group: the number.
    Regex(String),
    /// A JSON pointer (RFC 6901) into the source, parsed as JSON.
    Json(String),
}

/// Which way a figure improves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Better {
    Higher,
    Lower,
}

/// One `[workloads.NAME.figures.FIGURE]` table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FigureSpec {
    pub from: Source,
    pub pattern: Pattern,
    pub unit: String,
    pub better: Better,
}

/// `parser` and `parser_from`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParserSpec {
    pub tool: Tool,
    pub from: Source,
}

/// How long after SIGTERM the tree gets SIGKILL, unless `grace_s` says.
pub const DEFAULT_GRACE_S: f64 = 5.0;
/// The longest `grace_s`.
pub const MAX_GRACE_S: f64 = 600.0;
/// The longest figure name (it becomes a column, `fig_<name>`).
const MAX_FIGURE_NAME: usize = 64;

/// The keys of a command workload's table.
pub const KEYS: &[&str] = &[
    "argv",
    "env",
    "cwd",
    "stdin",
    "setup",
    "duration_s",
    "grace_s",
    "ok_exit",
    "end",
    "user",
    "figures",
    "parser",
    "parser_from",
    "replay",
];

/// The keys of one figure's table.
const FIGURE_KEYS: &[&str] = &["regex", "json", "from", "unit", "better"];

/// Parse a `[workloads.NAME]` table of kind `command`.
pub fn parse(k: &Keys) -> Result<CommandParams, KeyError> {
    k.only(KEYS)?;
    let argv = program_and_args(k, "argv")?.ok_or_else(|| {
        k.err(
            "argv",
            "is required: the program and its arguments, as an array of strings",
        )
    })?;
    let setup = program_and_args(k, "setup")?.unwrap_or_default();
    let env = environment(k)?;
    let cwd = match k.str("cwd")? {
        None => None,
        Some(c) => {
            let p = no_nul(k, "cwd", c)?;
            if !Path::new(c).is_absolute() {
                return Err(k.err(
                    "cwd",
                    format!("must be an absolute path, got \"{c}\" (leave it out for the run's own directory)"),
                ));
            }
            Some(p)
        }
    };
    let stdin = match k.str("stdin")? {
        None => None,
        Some("") => return Err(k.err("stdin", "must be a file's path, got an empty string")),
        Some(s) => Some(no_nul(k, "stdin", s)?),
    };
    let duration_ns = k.duration()?;
    let grace_ns = match k.float("grace_s")? {
        None => (DEFAULT_GRACE_S * 1e9) as u64,
        Some(g) if g > 0.0 && g <= MAX_GRACE_S => (g * 1e9).round() as u64,
        Some(g) => {
            return Err(k.err(
                "grace_s",
                format!("must be more than 0 and at most {MAX_GRACE_S} seconds, got {g}"),
            ));
        }
    };
    let ok_exit = ok_exit(k)?;
    let end = match k.choice("end", &["tree", "exit"], "tree")? {
        "exit" => End::Exit,
        _ => End::Tree,
    };
    let user = match k.str("user")? {
        None => None,
        Some(u) => Some(known_user(k, u)?),
    };
    let parser = parser(k)?;
    let figures = figures(k, parser.as_ref())?;
    let replay = replay(k)?;
    Ok(CommandParams {
        argv,
        env,
        cwd,
        stdin,
        setup,
        duration_ns,
        grace_ns,
        ok_exit,
        end,
        user,
        figures,
        parser,
        replay,
    })
}

/// `replay`: a replay workload's table (its `kind`, if given, "replay").
fn replay(k: &Keys) -> Result<Option<Box<crate::workload::replay::ReplayParams>>, KeyError> {
    let Some(t) = k.table("replay")? else {
        return Ok(None);
    };
    let r = k.nested("replay", t, "a command's replay");
    if let Some(kind) = r.str("kind")?
        && kind != "replay"
    {
        return Err(r.err(
            "kind",
            format!("must be \"replay\" (the table schedlab synthesize writes), got \"{kind}\""),
        ));
    }
    match (crate::workload::replay::ENTRY.parse)(&r)? {
        crate::workload::Workload::Replay(p) => Ok(Some(Box::new(p))),
        _ => Err(r.err("kind", "is not a replay")),
    }
}

fn no_nul(k: &Keys, key: &str, s: &str) -> Result<PathBuf, KeyError> {
    if s.contains('\0') {
        return Err(k.err(key, "must not contain a NUL character"));
    }
    Ok(PathBuf::from(s))
}

/// A program and its arguments: a non-empty array of strings, the first
/// non-empty, none holding NUL.
fn program_and_args(k: &Keys, key: &str) -> Result<Option<Vec<String>>, KeyError> {
    let Some(argv) = k.strings(key)? else {
        return Ok(None);
    };
    if argv.is_empty() {
        return Err(k.err(
            key,
            "must name a program: an empty array runs nothing (no shell is used; \
             [\"sh\", \"-c\", \"...\"] asks for one)",
        ));
    }
    if argv[0].is_empty() {
        return Err(k.err(key, "item 1 (the program) must not be empty"));
    }
    if let Some(i) = argv.iter().position(|a| a.contains('\0')) {
        return Err(k.err(key, format!("item {} contains a NUL character", i + 1)));
    }
    Ok(Some(argv))
}

/// `env`: a table of strings; names without `=` or NUL.
fn environment(k: &Keys) -> Result<BTreeMap<String, String>, KeyError> {
    let Some(t) = k.table("env")? else {
        return Ok(BTreeMap::new());
    };
    let env = k.nested("env", t, "env");
    let mut out = BTreeMap::new();
    for (name, v) in t {
        if name.is_empty() || name.contains('=') || name.contains('\0') {
            return Err(env.err(
                name,
                "is not a possible environment variable name (empty, or with `=` or NUL)",
            ));
        }
        let value = env
            .str(name)?
            .ok_or_else(|| env.err(name, format!("must be a string, got {}", v.type_str())))?;
        if value.contains('\0') {
            return Err(env.err(name, "must not contain a NUL character"));
        }
        out.insert(name.clone(), value.to_string());
    }
    Ok(out)
}

/// `ok_exit`: exit statuses 0..=255, at least one; `[0]` when absent.
fn ok_exit(k: &Keys) -> Result<Vec<u8>, KeyError> {
    let Some(codes) = k.ints("ok_exit")? else {
        return Ok(vec![0]);
    };
    if codes.is_empty() {
        return Err(k.err(
            "ok_exit",
            "must list at least one exit status (leave it out for [0])",
        ));
    }
    let mut out = Vec::with_capacity(codes.len());
    for c in codes {
        let code = u8::try_from(c).map_err(|_| {
            k.err(
                "ok_exit",
                format!("exit statuses are 0 to 255, got {c} (a death by signal is never ok)"),
            )
        })?;
        out.push(code);
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// `user`: a user this machine's user database knows.
fn known_user(k: &Keys, name: &str) -> Result<String, KeyError> {
    match crate::sys::user::lookup(name) {
        Ok(Some(_)) => Ok(name.to_string()),
        Ok(None) => Err(k.err("user", format!("no user \"{name}\" on this machine"))),
        Err(e) => Err(k.err("user", format!("cannot look up user \"{name}\": {e}"))),
    }
}

/// A figure's or a parser's source: `stdout`, `stderr`, or a path
/// relative to the program's directory that stays inside it.
fn source(k: &Keys, key: &str, s: &str) -> Result<Source, KeyError> {
    match s {
        "stdout" => return Ok(Source::Stdout),
        "stderr" => return Ok(Source::Stderr),
        "" => {
            return Err(k.err(
                key,
                "must be stdout, stderr or a file's path relative to cwd, got an empty string",
            ));
        }
        _ => {}
    }
    let path = no_nul(k, key, s)?;
    if path.is_absolute() {
        return Err(k.err(
            key,
            format!("\"{s}\" is absolute: a file the program writes is named relative to its cwd"),
        ));
    }
    if escapes(&path) {
        return Err(k.err(key, format!("\"{s}\" leads outside the program's cwd")));
    }
    Ok(Source::File(path))
}

/// Whether relative `path` climbs above its start with `..` (judged on its
/// words alone: symbolic links are not followed).
pub fn escapes(path: &Path) -> bool {
    let mut depth = 0i64;
    for c in path.components() {
        match c {
            Component::ParentDir => {
                depth -= 1;
                if depth < 0 {
                    return true;
                }
            }
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            Component::RootDir | Component::Prefix(_) => return true,
        }
    }
    false
}

/// `parser` and `parser_from`.
fn parser(k: &Keys) -> Result<Option<ParserSpec>, KeyError> {
    let from = k.str("parser_from")?;
    let Some(name) = k.str("parser")? else {
        if from.is_some() {
            return Err(k.err(
                "parser_from",
                "says where `parser` reads, but no parser is given",
            ));
        }
        return Ok(None);
    };
    let tool = Tool::from_name(name).ok_or_else(|| {
        k.err(
            "parser",
            format!(
                "unknown parser \"{name}\"; known: {}",
                Tool::ALL.map(Tool::name).join(", ")
            ),
        )
    })?;
    let from = match from {
        Some(f) => source(k, "parser_from", f)?,
        None => tool.default_from(),
    };
    Ok(Some(ParserSpec { tool, from }))
}

/// Whether `name` can be a figure's name: a lowercase letter, then
/// lowercase letters, digits and underscores (it becomes `fig_<name>`).
pub fn valid_figure_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && name.len() <= MAX_FIGURE_NAME
}

/// `[workloads.NAME.figures.*]`.
fn figures(
    k: &Keys,
    parser: Option<&ParserSpec>,
) -> Result<BTreeMap<String, FigureSpec>, KeyError> {
    let Some(t) = k.table("figures")? else {
        return Ok(BTreeMap::new());
    };
    let figs = k.nested("figures", t, "figures");
    let mut out = BTreeMap::new();
    for name in t.keys() {
        if !valid_figure_name(name) {
            return Err(figs.err(
                name,
                format!(
                    "a figure's name is a lowercase letter, then lowercase letters, digits and \
                     underscores, at most {MAX_FIGURE_NAME} long"
                ),
            ));
        }
        if let Some(p) = parser.filter(|p| p.tool.claims(name)) {
            return Err(figs.err(
                name,
                format!(
                    "the {} parser gives a figure of this name already; name yours otherwise",
                    p.tool.name()
                ),
            ));
        }
        let ft = figs
            .table(name)?
            .ok_or_else(|| figs.err(name, "must be a table"))?;
        let f = figs.nested(name, ft, format!("figure `{name}`"));
        out.insert(name.clone(), figure(&f)?);
    }
    Ok(out)
}

/// One figure's table.
fn figure(f: &Keys) -> Result<FigureSpec, KeyError> {
    f.only(FIGURE_KEYS)?;
    let pattern = match (f.str("regex")?, f.str("json")?) {
        (Some(_), Some(_)) => {
            return Err(f.err("regex", "give either regex or json, not both"));
        }
        (None, None) => {
            return Err(f.err(
                "regex",
                "is required (or json): how the figure is found in its source",
            ));
        }
        (Some(r), None) => {
            let re = regex::Regex::new(r).map_err(|e| f.err("regex", e.to_string()))?;
            let groups = re.captures_len() - 1;
            if groups != 1 {
                return Err(f.err(
                    "regex",
                    format!(
                        "must have exactly one capture group (the number), has {groups}; \
                         write other groups as (?:...)"
                    ),
                ));
            }
            Pattern::Regex(r.to_string())
        }
        (None, Some(j)) => {
            if !j.starts_with('/') {
                return Err(f.err(
                    "json",
                    format!(
                        "a JSON pointer starts with `/`, such as \"/jobs/0/read/bw\"; got \"{j}\""
                    ),
                ));
            }
            Pattern::Json(j.to_string())
        }
    };
    let from = source(f, "from", f.str("from")?.unwrap_or("stdout"))?;
    let unit = f
        .str("unit")?
        .ok_or_else(|| {
            f.err(
                "unit",
                "is required: the unit the figure is in, such as unit = \"s\" \
                 (unit = \"\" for a count)",
            )
        })?
        .to_string();
    let better = match f.str("better")? {
        Some("higher") => Better::Higher,
        Some("lower") => Better::Lower,
        Some(b) => {
            return Err(f.err(
                "better",
                format!("unknown value \"{b}\"; allowed: higher, lower"),
            ));
        }
        None => {
            return Err(f.err(
                "better",
                "is required: which way is better, such as better = \"lower\" for a \
                 time (better = \"higher\" for a rate)",
            ));
        }
    };
    Ok(FigureSpec {
        from,
        pattern,
        unit,
        better,
    })
}

/// Why a program cannot be run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProgramError {
    #[error("no program given (argv is empty)")]
    None,
    #[error("program \"{program}\" is not in PATH ({path}){install}")]
    NotInPath {
        program: String,
        path: String,
        /// How to install a standard tool ("; apt-get install rt-tests"),
        /// else empty.
        install: String,
    },
    #[error("program {path} does not exist")]
    Missing { path: String },
    #[error("program {path} is not an executable file")]
    NotExecutable { path: String },
    #[error(
        "program \"{program}\" is a relative path, which needs an explicit cwd (the run's own \
         directory does not exist before the run)"
    )]
    RelativeWithoutCwd { program: String },
    #[error(
        "{path} does not exist; make it first: schedlab does not create the directory a spec names"
    )]
    CwdMissing { path: String },
    #[error("{path} is not a directory")]
    CwdNotDirectory { path: String },
}

/// `cwd` must be a directory that exists: the program and its setup run
/// in it, and a missing one would otherwise fail every run as if the
/// program were missing (the exec's chdir reports ENOENT).
pub fn check_cwd(dir: &Path) -> Result<(), ProgramError> {
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(ProgramError::CwdNotDirectory {
            path: dir.display().to_string(),
        }),
        Err(_) => Err(ProgramError::CwdMissing {
            path: dir.display().to_string(),
        }),
    }
}

/// Where `program` (an `argv[0]`) is: taken as a path when it holds a `/`
/// (relative to `cwd`), otherwise looked up in `path` (a PATH value:
/// directories separated by `:`, an empty entry meaning the current
/// directory, as execvp does). The found file must be an executable
/// regular file (any execute bit).
pub fn resolve_program(
    program: &str,
    path: Option<&OsStr>,
    cwd: Option<&Path>,
) -> Result<PathBuf, ProgramError> {
    if program.contains('/') {
        let p = Path::new(program);
        let full = if p.is_absolute() {
            p.to_path_buf()
        } else {
            match cwd {
                Some(c) => c.join(p),
                None => {
                    return Err(ProgramError::RelativeWithoutCwd {
                        program: program.into(),
                    });
                }
            }
        };
        return match executable(&full) {
            Some(true) => Ok(full),
            Some(false) => Err(ProgramError::NotExecutable {
                path: full.display().to_string(),
            }),
            None => Err(ProgramError::Missing {
                path: full.display().to_string(),
            }),
        };
    }
    // execvp's default when PATH is unset.
    let default = OsString::from("/bin:/usr/bin");
    let path = path.unwrap_or(&default);
    for dir in std::env::split_paths(path) {
        let dir = if dir.as_os_str().is_empty() {
            cwd.map(Path::to_path_buf).unwrap_or_default()
        } else {
            dir
        };
        let candidate = dir.join(program);
        if executable(&candidate) == Some(true) {
            return Ok(candidate);
        }
    }
    Err(ProgramError::NotInPath {
        program: program.into(),
        path: path.to_string_lossy().into_owned(),
        install: debian_package(program)
            .map(|p| format!("; apt-get install {p}"))
            .unwrap_or_default(),
    })
}

/// The Debian package of a standard tool a command workload runs (the
/// benchmarks the parsers read, and the compiler the `homework` preset's
/// setup uses).
pub fn debian_package(program: &str) -> Option<&'static str> {
    Some(match program {
        "hackbench" | "cyclictest" => "rt-tests",
        "perf" => "linux-perf",
        "stress-ng" => "stress-ng",
        "fio" => "fio",
        "cc" | "gcc" => "gcc",
        "chrt" | "taskset" => "util-linux",
        _ => return None,
    })
}

/// Some(true) for an executable regular file, Some(false) for another
/// file, None when nothing is there.
fn executable(p: &Path) -> Option<bool> {
    let meta = std::fs::metadata(p).ok()?;
    Some(meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

impl CommandParams {
    /// The programs it runs: `argv`'s, then `setup`'s when there is one.
    pub fn programs(&self) -> Vec<&str> {
        [self.argv.first(), self.setup.first()]
            .into_iter()
            .flatten()
            .map(String::as_str)
            .collect()
    }

    /// The PATH the program is looked up in: `env`'s, else schedlab's.
    pub fn path_var(&self) -> Option<OsString> {
        match self.env.get("PATH") {
            Some(p) => Some(OsString::from(p)),
            None => std::env::var_os("PATH"),
        }
    }

    /// `argv`'s and `setup`'s programs, looked up as the run would: the
    /// key and the reason for the first that cannot be run.
    pub fn check_programs(&self) -> Result<(), (&'static str, ProgramError)> {
        let path = self.path_var();
        let cwd = self.cwd.as_deref();
        // Parsing refuses an empty argv; a stored description is read back
        // without that check.
        if let Some(dir) = cwd {
            check_cwd(dir).map_err(|e| ("cwd", e))?;
        }
        let program = self.argv.first().ok_or(("argv", ProgramError::None))?;
        resolve_program(program, path.as_deref(), cwd).map_err(|e| ("argv", e))?;
        if let Some(program) = self.setup.first() {
            resolve_program(program, path.as_deref(), cwd).map_err(|e| ("setup", e))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(text: &str) -> Result<CommandParams, KeyError> {
        let t: toml::Table = text.parse().unwrap();
        parse(&Keys::new("build", "command", &t))
    }

    fn err(text: &str) -> KeyError {
        parse_str(text).unwrap_err()
    }

    #[test]
    fn end_is_tree_or_exit_and_named_when_wrong() {
        let p = parse_str("argv = [\"x\"]\nend = \"exit\"").unwrap();
        assert_eq!(p.end, End::Exit);
        // The default is not written out: stored descriptions stay as they were.
        let json = serde_json::to_string(&parse_str("argv = [\"x\"]").unwrap()).unwrap();
        assert!(!json.contains("end"), "{json}");
        let back: CommandParams = serde_json::from_str(&json).unwrap();
        assert_eq!(back.end, End::Tree);
        let e = err("argv = [\"x\"]\nend = \"top\"");
        assert_eq!(e.key, "workloads.build.end");
        assert!(e.message.contains("tree, exit"), "{e:?}");
    }

    #[test]
    fn the_issue_example_parses_with_its_defaults() {
        let p = parse_str(
            r#"
            argv = ["make", "-j2", "-C", "src"]
            setup = ["make", "-C", "src", "clean"]
            [figures.elapsed]
            regex = 'Time: ([0-9.]+)'
            from = "stdout"
            unit = "s"
            better = "lower"
            "#,
        )
        .unwrap();
        assert_eq!(p.argv, ["make", "-j2", "-C", "src"]);
        assert_eq!(p.setup, ["make", "-C", "src", "clean"]);
        assert_eq!(p.ok_exit, [0]);
        assert_eq!(p.grace_ns, 5_000_000_000);
        assert_eq!(p.end, End::Tree);
        assert_eq!(
            (p.duration_ns, &p.cwd, &p.stdin, &p.user),
            (None, &None, &None, &None)
        );
        assert_eq!(
            p.figures["elapsed"],
            FigureSpec {
                from: Source::Stdout,
                pattern: Pattern::Regex("Time: ([0-9.]+)".into()),
                unit: "s".into(),
                better: Better::Lower,
            }
        );
        // It travels as JSON and comes back the same.
        let json = serde_json::to_string(&p).unwrap();
        assert_eq!(serde_json::from_str::<CommandParams>(&json).unwrap(), p);
    }

    #[test]
    fn every_key_parses() {
        let p = parse_str(
            r#"
            argv = ["fio", "--output-format=json", "job.fio"]
            env = { FOO = "1", PATH = "/usr/bin" }
            cwd = "/tmp"
            stdin = "in.txt"
            duration_s = 2.5
            grace_s = 1
            ok_exit = [3, 0, 3]
            user = "root"
            parser = "fio"
            parser_from = "out/fio.json"
            [figures.custom]
            json = "/jobs/0/read/bw"
            from = "stderr"
            unit = "KiB/s"
            better = "higher"
            "#,
        )
        .unwrap();
        assert_eq!(p.env["FOO"], "1");
        assert_eq!(p.cwd.as_deref(), Some(Path::new("/tmp")));
        assert_eq!(p.stdin.as_deref(), Some(Path::new("in.txt")));
        assert_eq!(p.duration_ns, Some(2_500_000_000));
        assert_eq!(p.grace_ns, 1_000_000_000);
        assert_eq!(p.ok_exit, [0, 3]);
        assert_eq!(p.user.as_deref(), Some("root"));
        assert_eq!(
            p.parser,
            Some(ParserSpec {
                tool: Tool::Fio,
                from: Source::File("out/fio.json".into())
            })
        );
        assert_eq!(
            p.figures["custom"].pattern,
            Pattern::Json("/jobs/0/read/bw".into())
        );
        assert_eq!(p.figures["custom"].from, Source::Stderr);
        assert_eq!(p.path_var(), Some(OsString::from("/usr/bin")));
    }

    #[test]
    fn argv_mistakes_name_argv() {
        for (text, want) in [
            ("", "is required"),
            ("argv = []", "must name a program"),
            ("argv = [\"\"]", "item 1 (the program) must not be empty"),
            (
                "argv = [\"ls\", 3]",
                "item 2 must be a string, got integer `3`",
            ),
            ("argv = \"ls -l\"", "must be an array of strings"),
            ("argv = [\"ls\", \"a\\u0000b\"]", "item 2 contains a NUL"),
        ] {
            let e = err(text);
            assert_eq!(e.key, "workloads.build.argv", "{text}");
            assert!(e.message.contains(want), "{text}: {}", e.message);
        }
        let e = err("argv = [\"ls\"]\nsetup = []");
        assert_eq!(e.key, "workloads.build.setup");
        let e = err("argv = [\"ls\"]\nshell = true");
        assert_eq!(e.key, "workloads.build.shell");
        assert!(
            e.message
                .starts_with("not a parameter of a command workload")
        );
    }

    #[test]
    fn other_key_mistakes_name_their_key() {
        for (text, key, want) in [
            (
                "env = { \"A=B\" = \"x\" }",
                "env.A=B",
                "not a possible environment",
            ),
            ("env = { A = 1 }", "env.A", "must be a string"),
            ("env = [\"A=1\"]", "env", "must be a table"),
            ("cwd = \"rel/dir\"", "cwd", "must be an absolute path"),
            ("stdin = \"\"", "stdin", "empty"),
            ("duration_s = 0", "duration_s", "more than zero"),
            ("duration_s = 1e9", "duration_s", "more than a week"),
            ("grace_s = 0", "grace_s", "more than 0 and at most 600"),
            ("grace_s = 601", "grace_s", "more than 0 and at most 600"),
            ("ok_exit = [256]", "ok_exit", "0 to 255, got 256"),
            ("ok_exit = [-1]", "ok_exit", "0 to 255, got -1"),
            ("ok_exit = []", "ok_exit", "at least one"),
            ("ok_exit = 0", "ok_exit", "must be an array of integers"),
            (
                "user = \"schedlab-no-such-user-42\"",
                "user",
                "no user \"schedlab-no-such-user-42\"",
            ),
            (
                "parser = \"iperf\"",
                "parser",
                "unknown parser \"iperf\"; known: schbench, cyclictest",
            ),
            (
                "parser_from = \"stdout\"",
                "parser_from",
                "no parser is given",
            ),
            (
                "parser = \"fio\"\nparser_from = \"/tmp/x.json\"",
                "parser_from",
                "absolute",
            ),
        ] {
            let e = err(&format!("argv = [\"ls\"]\n{text}"));
            assert_eq!(e.key, format!("workloads.build.{key}"), "{text}");
            assert!(e.message.contains(want), "{text}: {}", e.message);
        }
    }

    #[test]
    fn figure_mistakes_name_the_figure_key() {
        let fig = |body: &str| err(&format!("argv = [\"ls\"]\n[figures.elapsed]\n{body}"));
        let ok = "unit = \"s\"\nbetter = \"lower\"\n";
        for (body, key, want) in [
            (
                format!("regex = '([0-9'\n{ok}"),
                "regex",
                "regex parse error",
            ),
            (
                format!("regex = 'Time: [0-9]+'\n{ok}"),
                "regex",
                "exactly one capture group (the number), has 0",
            ),
            (format!("regex = '(a)(b)'\n{ok}"), "regex", "has 2"),
            (
                format!("json = \"jobs/0\"\n{ok}"),
                "json",
                "starts with `/`",
            ),
            (format!("json = \"\"\n{ok}"), "json", "starts with `/`"),
            (
                format!("regex = '(x)'\njson = \"/a\"\n{ok}"),
                "regex",
                "not both",
            ),
            (ok.to_string(), "regex", "is required (or json)"),
            (
                format!("regex = '(x)'\nfrom = \"/etc/passwd\"\n{ok}"),
                "from",
                "is absolute",
            ),
            (
                format!("regex = '(x)'\nfrom = \"a/../../x\"\n{ok}"),
                "from",
                "leads outside",
            ),
            (format!("regex = '(x)'\nfrom = \"\"\n{ok}"), "from", "empty"),
            // Issue 34: a missing unit or better is refused with an example.
            (
                "regex = '(x)'\nbetter = \"lower\"".into(),
                "unit",
                "is required: the unit the figure is in, such as unit = \"s\"",
            ),
            (
                "regex = '(x)'\nunit = \"s\"".into(),
                "better",
                "such as better = \"lower\" for a time (better = \"higher\" for a rate)",
            ),
            (
                "regex = '(x)'\nunit = \"s\"\nbetter = \"faster\"".into(),
                "better",
                "unknown value \"faster\"",
            ),
            (
                format!("regex = '(x)'\nform = \"stdout\"\n{ok}"),
                "form",
                "not a parameter of figure `elapsed`",
            ),
        ] {
            let e = fig(&body);
            assert_eq!(
                e.key,
                format!("workloads.build.figures.elapsed.{key}"),
                "{body}"
            );
            assert!(e.message.contains(want), "{body}: {}", e.message);
        }
        let e = err("argv = [\"ls\"]\n[figures.Elapsed]\nregex = '(x)'");
        assert_eq!(e.key, "workloads.build.figures.Elapsed");
        let e = err("argv = [\"ls\"]\nfigures = { elapsed = 3 }");
        assert_eq!(e.key, "workloads.build.figures.elapsed");
        assert!(e.message.contains("must be a table"), "{}", e.message);
    }

    #[test]
    fn a_figure_the_parser_gives_is_refused() {
        let e = err(
            "argv = [\"hackbench\"]\nparser = \"hackbench\"\n[figures.time_s]\n\
             regex = 'Time: ([0-9.]+)'\nunit = \"s\"\nbetter = \"lower\"",
        );
        assert_eq!(e.key, "workloads.build.figures.time_s");
        assert!(
            e.message.contains("the hackbench parser gives"),
            "{}",
            e.message
        );
        // Another name is fine.
        parse_str(
            "argv = [\"hackbench\"]\nparser = \"hackbench\"\n[figures.secs]\n\
             regex = 'Time: ([0-9.]+)'\nunit = \"s\"\nbetter = \"lower\"",
        )
        .unwrap();
    }

    #[test]
    fn sources_stay_inside_cwd() {
        assert!(!escapes(Path::new("out/x.json")));
        assert!(!escapes(Path::new("a/../b")));
        assert!(!escapes(Path::new("./x")));
        assert!(escapes(Path::new("../x")));
        assert!(escapes(Path::new("a/../../x")));
        assert!(escapes(Path::new("/x")));
    }

    #[test]
    fn figure_names_become_columns() {
        for good in ["elapsed", "p99_us", "a1"] {
            assert!(valid_figure_name(good), "{good}");
        }
        for bad in ["", "1a", "_a", "Elapsed", "a-b", "a b", &"a".repeat(65)] {
            assert!(!valid_figure_name(bad), "{bad}");
        }
    }

    #[test]
    fn a_cwd_that_is_missing_or_a_file_is_refused_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file");
        std::fs::write(&file, "x").unwrap();
        let gone = dir.path().join("gone");
        for (cwd, says) in [(&gone, "does not exist"), (&file, "is not a directory")] {
            let p = parse_str(&format!("argv = [\"true\"]\ncwd = \"{}\"", cwd.display())).unwrap();
            let (key, e) = p.check_programs().unwrap_err();
            assert_eq!(key, "cwd");
            let e = e.to_string();
            assert!(
                e.contains(&cwd.display().to_string()) && e.contains(says),
                "{e}"
            );
            assert!(!gone.exists(), "schedlab made the directory");
        }
        let p = parse_str(&format!(
            "argv = [\"true\"]\ncwd = \"{}\"",
            dir.path().display()
        ))
        .unwrap();
        p.check_programs().unwrap();
    }

    #[test]
    fn programs_are_found_in_path_or_taken_as_paths() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("tool");
        std::fs::write(&exe, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        let plain = dir.path().join("data");
        std::fs::write(&plain, "x").unwrap();
        let path = std::env::join_paths(["/nonexistent", dir.path().to_str().unwrap()]).unwrap();
        assert_eq!(resolve_program("tool", Some(&path), None).unwrap(), exe);
        assert_eq!(
            resolve_program("schedlab-missing", Some(&path), None).unwrap_err(),
            ProgramError::NotInPath {
                program: "schedlab-missing".into(),
                path: path.to_string_lossy().into_owned(),
                install: String::new(),
            }
        );
        // A standard tool's error says how to install it.
        assert_eq!(
            resolve_program("hackbench", Some(&path), None)
                .unwrap_err()
                .to_string(),
            format!(
                "program \"hackbench\" is not in PATH ({}); apt-get install rt-tests",
                path.to_string_lossy()
            )
        );
        // A file without an execute bit is not a program.
        assert!(resolve_program("data", Some(&path), None).is_err());
        // A `/` makes it a path, not a PATH look-up.
        assert_eq!(
            resolve_program(exe.to_str().unwrap(), None, None).unwrap(),
            exe
        );
        assert_eq!(
            resolve_program("./tool", None, Some(dir.path())).unwrap(),
            dir.path().join("./tool")
        );
        assert!(matches!(
            resolve_program("./tool", None, None),
            Err(ProgramError::RelativeWithoutCwd { .. })
        ));
        assert!(matches!(
            resolve_program(plain.to_str().unwrap(), None, None),
            Err(ProgramError::NotExecutable { .. })
        ));
        let e = resolve_program("/nonexistent/x", None, None).unwrap_err();
        assert_eq!(e.to_string(), "program /nonexistent/x does not exist");
        // Unset PATH: execvp's default.
        assert_eq!(
            resolve_program("sh", None, None).unwrap(),
            Path::new("/bin/sh")
        );
    }

    #[test]
    fn check_programs_names_the_key() {
        let p = parse_str("argv = [\"sh\", \"-c\", \"true\"]\nsetup = [\"schedlab-no-such-tool\"]")
            .unwrap();
        let (key, e) = p.check_programs().unwrap_err();
        assert_eq!(key, "setup");
        assert!(
            e.to_string()
                .contains("\"schedlab-no-such-tool\" is not in PATH"),
            "{e}"
        );
        let p = parse_str("argv = [\"schedlab-no-such-tool\"]").unwrap();
        assert_eq!(p.check_programs().unwrap_err().0, "argv");
        parse_str("argv = [\"sh\"]")
            .unwrap()
            .check_programs()
            .unwrap();
        let mut empty = parse_str("argv = [\"sh\"]").unwrap();
        empty.argv.clear();
        assert_eq!(empty.check_programs(), Err(("argv", ProgramError::None)));
    }
}
