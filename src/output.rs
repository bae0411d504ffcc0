//! An output a command writes (`-o` of `trace export`, `export`, `report`,
//! `compare`), and the checks of `merge -o`: what the argument names, and
//! writing it so that what was there is never destroyed.
//!
//! [`Target::parse`] decides from the argument alone, before any work:
//! `-` is standard output; a character device or a FIFO (`/dev/null`, a
//! terminal, a named pipe) is written through and never replaced; a
//! regular file, or a name not yet taken, is replaced whole; everything
//! else is refused naming the path: a directory, a block device, a socket,
//! a dangling symbolic link, and every file of a SQLite database (the
//! database itself, known by its header, and its `-wal`, `-shm`, `-journal`
//! and `-runner.lock`, which a write would make into a corrupt database).
//!
//! A replaced file is written into a directory of its own beside it, made
//! and marked like a run directory ([`crate::launch::rundir`]: a marker
//! naming the directory, locked while it lives), synced, renamed over the
//! target, and the directory removed; on an error, or when the writer is
//! dropped uncommitted, the directory goes with everything in it. A
//! schedlab killed while writing leaves its directory with a free lock:
//! the next command writing into that directory, and the next start of
//! schedlab in it, remove such leftovers, and only those provably made by a
//! schedlab that is gone.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use thiserror::Error;

use crate::launch::rundir::{self, OwnedDir};
use crate::out;

/// Name prefix of the directories that hold an output being written.
const TEMP_PREFIX: &str = ".schedlab-output-";

/// What [`sqlite_kind`] calls a database (the one SQLite file `merge -o`
/// may name).
const DATABASE: &str = "a SQLite database";
/// The first 16 bytes of every SQLite database.
const SQLITE_HEADER: &[u8; 16] = b"SQLite format 3\0";
/// The first 4 bytes of a SQLite write-ahead log (big- or little-endian
/// checksums).
const WAL_MAGIC: [[u8; 4]; 2] = [[0x37, 0x7f, 0x06, 0x82], [0x37, 0x7f, 0x06, 0x83]];
/// The first 8 bytes of a SQLite rollback journal.
const JOURNAL_MAGIC: [u8; 8] = [0xd9, 0xd5, 0x05, 0xf9, 0x20, 0xa1, 0x63, 0xd7];

/// The files SQLite (and schedlab's runner lock) keep beside a database,
/// by the suffix of their name, and what each is.
const SIDE_FILES: [(&str, &str); 4] = [
    ("-wal", "the write-ahead log"),
    ("-shm", "the shared-memory index"),
    ("-journal", "the rollback journal"),
    ("-runner.lock", "the runner lock"),
];

/// Why an output argument is refused (before anything is written),
/// naming the flag that gave it (`-o`, `--rt-app`, …) and its path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputError {
    pub flag: &'static str,
    pub path: String,
    pub refusal: Refusal,
}

/// What is wrong with an output argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    Directory,
    Special { kind: &'static str },
    NotForDatabase { kind: &'static str },
    DanglingLink,
    DatabaseFile { what: String },
    NoDirectory { dir: String },
    NotAFileName,
    DatabaseToStdout,
}

impl std::fmt::Display for OutputError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (flag, path) = (self.flag, &self.path);
        match &self.refusal {
            Refusal::DatabaseToStdout => write!(
                f,
                "{flag} - (standard output) cannot hold a database: name a file"
            ),
            Refusal::Special { kind } => write!(
                f,
                "cannot write {flag} {path}: it is a {kind}; only a regular file, a character \
                 device or a FIFO can be written"
            ),
            r => write!(f, "cannot write {flag} {path}: {}", r.reason()),
        }
    }
}

impl std::error::Error for OutputError {}

impl OutputError {
    fn new(flag: &'static str, path: String, refusal: Refusal) -> OutputError {
        OutputError {
            flag,
            path,
            refusal,
        }
    }
}

/// Where an output goes, decided from its argument (`-o`, `--rt-app`, …:
/// the flag that gave it, which its messages name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `-o -`.
    Stdout,
    /// A character device or a FIFO: opened and written, never replaced.
    Through { flag: &'static str, path: PathBuf },
    /// A regular file (or a new name): replaced whole. `file` is where the
    /// file really is (a symbolic link's target), `given` the argument.
    Replace {
        flag: &'static str,
        given: PathBuf,
        file: PathBuf,
    },
}

impl Target {
    /// What `FLAG ARG` (`-o ARG`, `--rt-app ARG`) names, or why it cannot
    /// be written, naming `flag`.
    pub fn parse(flag: &'static str, arg: &Path) -> Result<Target, OutputError> {
        if arg.as_os_str() == "-" {
            return Ok(Target::Stdout);
        }
        let shown = out::path(arg);
        let refuse = |refusal| Err(OutputError::new(flag, shown.clone(), refusal));
        let meta = match std::fs::metadata(arg) {
            Ok(m) => Some(m),
            Err(_) if std::fs::symlink_metadata(arg).is_ok_and(|m| m.is_symlink()) => {
                return refuse(Refusal::DanglingLink);
            }
            Err(_) => None,
        };
        if let Some(m) = &meta {
            let t = m.file_type();
            if t.is_dir() {
                return refuse(Refusal::Directory);
            }
            if t.is_char_device() || t.is_fifo() {
                return Ok(Target::Through {
                    flag,
                    path: arg.to_path_buf(),
                });
            }
            let kind = if t.is_block_device() {
                Some("block device")
            } else if t.is_socket() {
                Some("socket")
            } else if !t.is_file() {
                Some("special file")
            } else {
                None
            };
            if let Some(kind) = kind {
                return refuse(Refusal::Special { kind });
            }
        }
        // A symbolic link to a regular file: the file is replaced, the link
        // stays a link.
        let file = match &meta {
            Some(_) => std::fs::canonicalize(arg).unwrap_or_else(|_| arg.to_path_buf()),
            None => arg.to_path_buf(),
        };
        if let Some(what) = database_file(&file) {
            return refuse(Refusal::DatabaseFile { what });
        }
        let name_ok = file
            .file_name()
            .is_some_and(|n| n != "." && n != ".." && !n.is_empty());
        if !name_ok {
            return refuse(Refusal::NotAFileName);
        }
        let dir = parent_dir(&file);
        if !dir.is_dir() {
            return refuse(Refusal::NoDirectory {
                dir: out::path(dir),
            });
        }
        Ok(Target::Replace {
            flag,
            given: arg.to_path_buf(),
            file,
        })
    }

    /// The target for messages: "standard output", or the path as given.
    pub fn shown(&self) -> String {
        match self {
            Target::Stdout => "standard output".into(),
            Target::Through { path, .. } => out::path(path),
            Target::Replace { given, .. } => out::path(given),
        }
    }

    /// The flag that named it, for messages ("-o" for standard output).
    pub fn flag(&self) -> &'static str {
        match self {
            Target::Stdout => "-o",
            Target::Through { flag, .. } | Target::Replace { flag, .. } => flag,
        }
    }

    pub fn is_stdout(&self) -> bool {
        *self == Target::Stdout
    }

    /// Start writing. A file to replace gets its temporary directory beside
    /// it (after removing the leftovers of dead schedlabs there); a device
    /// or FIFO is opened (a FIFO waits for its reader, as a shell's `>`).
    pub fn open(&self) -> Result<Output> {
        let (flag, shown) = (self.flag(), self.shown());
        let sink = match self {
            Target::Stdout => Sink::Stdout,
            Target::Through { path, .. } => Sink::Through(
                OpenOptions::new()
                    .write(true)
                    .custom_flags(libc::O_NOCTTY)
                    .open(path)
                    .with_context(|| format!("cannot write {flag} {shown}"))?,
            ),
            Target::Replace { file, .. } => {
                let dir = parent_dir(file);
                sweep(dir);
                let name = file.file_name().expect("checked by parse");
                let owned =
                    OwnedDir::create_named(dir, &format!("{TEMP_PREFIX}{}-", std::process::id()))
                        .with_context(|| format!("cannot write {flag} {shown}"))?;
                let temp = owned.path().join(name);
                // Mode 0666 before the umask, like any file a command
                // creates; an existing file's mode is kept at commit.
                let f = OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o666)
                    .open(&temp)
                    .with_context(|| format!("cannot write {flag} {shown}"))?;
                Sink::Replace {
                    file: f,
                    temp,
                    target: file.clone(),
                    _dir: owned,
                }
            }
        };
        Ok(Output { flag, shown, sink })
    }
}

/// The directory a file is in ("." for a bare name).
fn parent_dir(file: &Path) -> &Path {
    match file.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// Whether the first bytes of the file at `path` are one of SQLite's:
/// what it is, if so.
fn sqlite_kind(path: &Path) -> Option<&'static str> {
    let mut head = [0_u8; 16];
    let mut f = File::open(path).ok()?;
    let mut got = 0;
    while got < head.len() {
        match f.read(&mut head[got..]) {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    if got == 16 && &head == SQLITE_HEADER {
        Some(DATABASE)
    } else if got >= 4 && WAL_MAGIC.iter().any(|m| head[..4] == *m) {
        Some("a SQLite write-ahead log")
    } else if got >= 8 && head[..8] == JOURNAL_MAGIC {
        Some("a SQLite rollback journal")
    } else {
        None
    }
}

/// What `file` is to a SQLite database, if anything: the database itself
/// or one of its files by content, or a side file of a database beside it
/// by name (`x.db-wal` while `x.db` is a database).
fn database_file(file: &Path) -> Option<String> {
    let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let side = SIDE_FILES.iter().find_map(|(suffix, what)| {
        let base = file.with_file_name(name.strip_suffix(suffix)?);
        let is_db = std::fs::metadata(&base).is_ok_and(|m| m.is_file())
            && sqlite_kind(&base) == Some(DATABASE);
        is_db.then(|| format!("{what} of database {}", out::path(&base)))
    });
    side.or_else(|| {
        std::fs::metadata(file)
            .is_ok_and(|m| m.is_file())
            .then(|| sqlite_kind(file))
            .flatten()
            .map(str::to_string)
    })
}

/// The checks of an output that is to be a database (`schedlab merge -o`,
/// named by `flag`): made before anything is created beside it. A
/// database (or a new name) is accepted; standard output, a directory, a
/// device, a FIFO and the side files of another database are refused
/// naming the flag and the path.
pub fn check_database_target(flag: &'static str, arg: &Path) -> Result<(), OutputError> {
    let refuse = |refusal| Err(OutputError::new(flag, out::path(arg), refusal));
    match Target::parse(flag, arg) {
        Ok(Target::Stdout) => refuse(Refusal::DatabaseToStdout),
        Ok(Target::Through { path, .. }) => refuse(Refusal::NotForDatabase {
            kind: if std::fs::metadata(&path).is_ok_and(|m| m.file_type().is_fifo()) {
                "FIFO"
            } else {
                "character device"
            },
        }),
        Ok(Target::Replace { .. }) => Ok(()),
        Err(OutputError {
            refusal: Refusal::DatabaseFile { what },
            ..
        }) if what == DATABASE => Ok(()),
        Err(e) => Err(e),
    }
}

/// Why a `--db` that a command creates or writes (`run`, `simulate`) is
/// refused: what [`check_database_target`] refuses for `merge -o`, named
/// by the flag.
#[derive(Debug, Error, PartialEq, Eq)]
#[error("cannot use {flag} {path}: {reason}")]
pub struct DatabaseArgError {
    pub flag: &'static str,
    pub path: String,
    pub reason: String,
}

/// [`check_database_target`] for the database argument `flag` (`--db`):
/// made before anything is created beside it (the runner lock, SQLite's
/// journal), so that a device never gets files beside it in `/dev` and
/// another database's write-ahead log never becomes a database.
pub fn check_database_arg(flag: &'static str, arg: &Path) -> Result<(), DatabaseArgError> {
    check_database_target(flag, arg).map_err(|e| DatabaseArgError {
        flag,
        path: out::path(arg),
        reason: e.refusal.reason(),
    })
}

impl Refusal {
    /// Why, without the "cannot write FLAG PATH" in front.
    fn reason(&self) -> String {
        match self {
            Refusal::Directory => "it is a directory".into(),
            Refusal::Special { kind } => format!("it is a {kind}"),
            Refusal::NotForDatabase { kind } => {
                format!("it is a {kind}, which cannot hold a database")
            }
            Refusal::DanglingLink => "it is a symbolic link to a file that does not exist".into(),
            Refusal::DatabaseFile { what } => format!("it is {what}; choose another file"),
            Refusal::NoDirectory { dir } => format!("directory {dir} does not exist"),
            Refusal::NotAFileName => "not a file name".into(),
            Refusal::DatabaseToStdout => {
                "standard output cannot hold a database: name a file".into()
            }
        }
    }
}

/// Removes, in `dir`, the temporary directories of outputs whose schedlab
/// is gone (proved by their marker and its free lock, never by name
/// alone). Returns what was removed.
pub fn remove_leftovers(dir: &Path) -> Vec<PathBuf> {
    rundir::remove_leftovers_named(dir, TEMP_PREFIX)
}

/// [`remove_leftovers`], saying what was removed: at every start of
/// schedlab (its working directory) and before each output is written (the
/// output's directory).
pub fn sweep(dir: &Path) {
    for d in remove_leftovers(dir) {
        note!(
            "removed {}, an output being written by a schedlab that was killed",
            out::path(&d)
        );
    }
}

enum Sink {
    Stdout,
    Through(File),
    Replace {
        file: File,
        temp: PathBuf,
        target: PathBuf,
        // Removed with the temporary file in it when the output is dropped
        // uncommitted (or after the rename, empty).
        _dir: OwnedDir,
    },
}

/// An output being written: [`Write`] to it, then [`Output::commit`].
/// Dropped without a commit, a replaced file is left as it was. Every
/// error names the output.
pub struct Output {
    flag: &'static str,
    shown: String,
    sink: Sink,
}

impl Output {
    /// The output for messages ("standard output", or the path as given).
    pub fn shown(&self) -> &str {
        &self.shown
    }

    fn name_error(&self, e: io::Error) -> io::Error {
        io::Error::new(
            e.kind(),
            format!("cannot write {} {}: {e}", self.flag, self.shown),
        )
    }

    /// Finish: flush; a replaced file is synced, given the old file's mode
    /// and renamed over it.
    pub fn commit(mut self) -> Result<()> {
        self.flush()?;
        let (flag, shown) = (self.flag, self.shown.clone());
        let Sink::Replace {
            file, temp, target, ..
        } = &self.sink
        else {
            return Ok(());
        };
        let io =
            |e: io::Error| anyhow::Error::from(e).context(format!("cannot write {flag} {shown}"));
        if let Ok(m) = std::fs::metadata(target) {
            file.set_permissions(std::fs::Permissions::from_mode(m.permissions().mode()))
                .map_err(io)?;
        }
        file.sync_all().map_err(io)?;
        std::fs::rename(temp, target).map_err(io)?;
        // The rename itself is on disk once the directory is; some file
        // systems cannot sync a directory, and the file is in place anyway.
        if let Ok(d) = File::open(parent_dir(target)) {
            let _ = d.sync_all();
        }
        Ok(())
    }
}

impl Write for Output {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let r = match &mut self.sink {
            Sink::Stdout => return out::stdout().write(buf),
            Sink::Through(f) | Sink::Replace { file: f, .. } => f.write(buf),
        };
        r.map_err(|e| self.name_error(e))
    }

    fn flush(&mut self) -> io::Result<()> {
        let r = match &mut self.sink {
            Sink::Stdout => return out::stdout().flush(),
            Sink::Through(f) | Sink::Replace { file: f, .. } => f.flush(),
        };
        r.map_err(|e| self.name_error(e))
    }
}

/// The target of a resolved destination given by `flag`: a path, or None
/// for standard output.
pub fn target_of(flag: &'static str, destination: Option<&Path>) -> Result<Target, OutputError> {
    destination.map_or(Ok(Target::Stdout), |d| Target::parse(flag, d))
}

/// Write `bytes` to `target` whole ([`Target::open`], [`Output::commit`]).
pub fn write_all(target: &Target, bytes: &[u8]) -> Result<()> {
    let mut o = target.open()?;
    o.write_all(bytes)?;
    o.commit()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    fn refusal(arg: &Path) -> String {
        Target::parse("-o", arg).unwrap_err().to_string()
    }

    fn sqlite_db(path: &Path) {
        let c = rusqlite::Connection::open(path).unwrap();
        c.execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE t (x); INSERT INTO t VALUES (1);")
            .unwrap();
        // Kept open so that the -wal and -shm exist for the test.
        std::mem::forget(c);
    }

    #[test]
    fn a_file_is_replaced_whole_keeping_its_mode_and_leaving_nothing_beside_it() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("run.pftrace");
        std::fs::write(&p, b"old").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).unwrap();
        let t = Target::parse("-o", &p).unwrap();
        assert!(matches!(&t, Target::Replace { file, .. } if file.ends_with("run.pftrace")));
        let mut o = t.open().unwrap();
        o.write_all(b"new ").unwrap();
        // Until the commit the old file is what is there.
        assert_eq!(std::fs::read(&p).unwrap(), b"old");
        assert_eq!(names(d.path()).len(), 2, "{:?}", names(d.path()));
        o.write_all(b"contents").unwrap();
        o.commit().unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new contents");
        assert_eq!(names(d.path()), ["run.pftrace"]);
        let mode = std::fs::metadata(&p).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o640);
        // A new file: 0666 less the umask, not a temporary file's 0600.
        let q = d.path().join("new.json");
        write_all(&Target::parse("-o", &q).unwrap(), b"{}").unwrap();
        let mode = std::fs::metadata(&q).unwrap().permissions().mode();
        assert_ne!(mode & 0o044, 0, "mode {mode:o}");
    }

    #[test]
    fn an_output_dropped_before_its_commit_leaves_the_old_file_and_nothing_else() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("r.csv");
        std::fs::write(&p, b"earlier good output").unwrap();
        let mut o = Target::parse("-o", &p).unwrap().open().unwrap();
        o.write_all(b"half").unwrap();
        drop(o);
        assert_eq!(std::fs::read(&p).unwrap(), b"earlier good output");
        assert_eq!(names(d.path()), ["r.csv"]);
    }

    #[test]
    fn a_symbolic_link_stays_a_link_to_the_replaced_file() {
        let d = tempfile::tempdir().unwrap();
        let real = d.path().join("real.md");
        std::fs::write(&real, "old").unwrap();
        let link = d.path().join("link.md");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        write_all(&Target::parse("-o", &link).unwrap(), b"new").unwrap();
        assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
        assert_eq!(std::fs::read(&real).unwrap(), b"new");
        let dangling = d.path().join("dangling");
        std::os::unix::fs::symlink(d.path().join("gone"), &dangling).unwrap();
        assert!(refusal(&dangling).contains("symbolic link"));
    }

    #[test]
    fn a_character_device_is_written_through_and_stays_a_device() {
        let null = Path::new("/dev/null");
        let t = Target::parse("-o", null).unwrap();
        assert_eq!(
            t,
            Target::Through {
                flag: "-o",
                path: null.to_path_buf()
            }
        );
        write_all(&t, &[7; 100_000]).unwrap();
        assert!(
            std::fs::metadata(null)
                .unwrap()
                .file_type()
                .is_char_device()
        );
    }

    #[test]
    fn a_failing_write_names_the_output() {
        // /dev/full: every write fails with ENOSPC. Asserted to be written
        // through before anything is written, so that a broken parse
        // cannot replace the device.
        let t = Target::parse("-o", Path::new("/dev/full")).unwrap();
        assert!(matches!(t, Target::Through { .. }), "{t:?}");
        let err = format!("{:#}", write_all(&t, &[1; 10_000]).unwrap_err());
        assert!(
            err.contains("cannot write -o /dev/full") && err.contains("No space left"),
            "{err}"
        );
        assert!(
            std::fs::metadata("/dev/full")
                .unwrap()
                .file_type()
                .is_char_device()
        );
    }

    #[test]
    fn a_failing_write_leaves_the_earlier_file_whole_and_nothing_beside_it() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("report.html");
        std::fs::write(&p, b"earlier good output").unwrap();
        let mut o = Target::parse("-o", &p).unwrap().open().unwrap();
        // As on a full disk: the temporary's writes fail with ENOSPC.
        let Sink::Replace { file, .. } = &mut o.sink else {
            unreachable!()
        };
        *file = OpenOptions::new().write(true).open("/dev/full").unwrap();
        let err = o.write_all(&[1; 10_000]).unwrap_err().to_string();
        assert!(
            err.contains(&format!("cannot write -o {}", p.display())) && err.contains("No space"),
            "{err}"
        );
        drop(o);
        assert_eq!(std::fs::read(&p).unwrap(), b"earlier good output");
        assert_eq!(names(d.path()), ["report.html"]);
    }

    #[test]
    fn a_fifo_is_written_through_to_its_reader() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("pipe");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let t = Target::parse("-o", &fifo).unwrap();
        assert!(matches!(t, Target::Through { .. }));
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read(fifo).unwrap())
        };
        write_all(&t, b"through the pipe").unwrap();
        assert_eq!(reader.join().unwrap(), b"through the pipe");
        assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
        assert_eq!(names(d.path()), ["pipe"]);
    }

    #[test]
    fn standard_output_is_a_dash() {
        assert_eq!(Target::parse("-o", Path::new("-")).unwrap(), Target::Stdout);
        assert_eq!(Target::Stdout.shown(), "standard output");
        // A file named "-" in a directory is a file.
        assert!(matches!(
            Target::parse("-o", Path::new("./-")).unwrap(),
            Target::Replace { .. }
        ));
    }

    #[test]
    fn directories_and_missing_directories_are_refused_by_name() {
        let d = tempfile::tempdir().unwrap();
        let err = refusal(d.path());
        assert!(
            err.contains("-o") && err.contains("is a directory"),
            "{err}"
        );
        let missing = d.path().join("no/such/dir/run.pftrace");
        let err = refusal(&missing);
        assert!(
            err.contains("-o") && err.contains("no/such/dir") && err.contains("does not exist"),
            "{err}"
        );
    }

    /// A refusal and a failed write name the flag that gave the path,
    /// not always `-o`.
    #[test]
    fn a_refusal_and_a_failed_write_name_the_flag_given() {
        let d = tempfile::tempdir().unwrap();
        let missing = d.path().join("no/such/r.json");
        let err = Target::parse("--rt-app", &missing).unwrap_err();
        assert_eq!(err.flag, "--rt-app");
        let err = err.to_string();
        assert!(
            err.starts_with(&format!("cannot write --rt-app {}: ", missing.display()))
                && err.contains("does not exist"),
            "{err}"
        );
        let err = Target::parse("--rt-app", d.path()).unwrap_err().to_string();
        assert!(err.starts_with("cannot write --rt-app "), "{err}");
        let t = Target::parse("--dir", Path::new("/dev/full")).unwrap();
        let err = format!("{:#}", write_all(&t, &[1; 10_000]).unwrap_err());
        assert!(err.contains("cannot write --dir /dev/full"), "{err}");
        let err = check_database_target("-o", Path::new("-"))
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "-o - (standard output) cannot hold a database: name a file"
        );
    }

    #[test]
    fn every_file_of_a_database_is_refused_naming_it() {
        let d = tempfile::tempdir().unwrap();
        let db = d.path().join("a.db");
        sqlite_db(&db);
        assert!(d.path().join("a.db-wal").exists() && d.path().join("a.db-shm").exists());
        let err = refusal(&db);
        assert!(
            err.contains("a.db") && err.contains("a SQLite database"),
            "{err}"
        );
        for (suffix, what) in SIDE_FILES {
            let side = d.path().join(format!("a.db{suffix}"));
            let err = refusal(&side);
            assert!(
                err.contains(&format!("-o {}", side.display()))
                    && err.contains(what)
                    && err.contains("of database"),
                "{suffix}: {err}"
            );
        }
        // A copied WAL is still a WAL, by its content.
        let copy = d.path().join("copied");
        std::fs::copy(d.path().join("a.db-wal"), &copy).unwrap();
        assert!(refusal(&copy).contains("write-ahead log"));
        // A name like a side file without a database beside it is a file.
        let lone = d.path().join("notes-journal");
        assert!(matches!(
            Target::parse("-o", &lone).unwrap(),
            Target::Replace { .. }
        ));
    }

    #[test]
    fn a_database_target_refuses_what_cannot_hold_a_database() {
        let d = tempfile::tempdir().unwrap();
        let db = d.path().join("a.db");
        sqlite_db(&db);
        assert_eq!(check_database_target("-o", &db), Ok(()));
        assert_eq!(
            check_database_target("-o", &d.path().join("new.db")),
            Ok(())
        );
        assert_eq!(
            check_database_target("-o", Path::new("-")),
            Err(OutputError::new(
                "-o",
                "-".into(),
                Refusal::DatabaseToStdout
            ))
        );
        let err = check_database_target("-o", Path::new("/dev/null"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("/dev/null") && err.contains("character device"),
            "{err}"
        );
        let err = check_database_target("-o", d.path())
            .unwrap_err()
            .to_string();
        assert!(err.contains("is a directory"), "{err}");
        let err = check_database_target("-o", &d.path().join("a.db-wal"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("write-ahead log"), "{err}");
    }

    #[test]
    fn a_database_argument_is_refused_naming_its_flag() {
        let d = tempfile::tempdir().unwrap();
        let db = d.path().join("a.db");
        sqlite_db(&db);
        assert_eq!(check_database_arg("--db", &db), Ok(()));
        assert_eq!(check_database_arg("--db", &d.path().join("new.db")), Ok(()));
        for (arg, says) in [
            (
                d.path().join("a.db-wal"),
                "it is the write-ahead log of database",
            ),
            (
                d.path().join("a.db-shm"),
                "it is the shared-memory index of database",
            ),
            (
                d.path().join("a.db-runner.lock"),
                "it is the runner lock of database",
            ),
            (PathBuf::from("/dev/full"), "it is a character device"),
            (d.path().to_path_buf(), "it is a directory"),
            (d.path().join("no/such.db"), "does not exist"),
        ] {
            let e = check_database_arg("--db", &arg).unwrap_err().to_string();
            let head = format!("cannot use --db {}: ", arg.display());
            assert!(e.starts_with(&head) && e.contains(says), "{e}");
        }
    }

    #[test]
    fn leftovers_of_dead_writers_are_removed_and_a_live_writer_s_kept() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("out.csv");
        std::fs::write(&p, b"good").unwrap();
        // A live writer, then one killed mid-write: its lock released, its
        // directory kept.
        let mut live = Target::parse("-o", &p).unwrap().open().unwrap();
        live.write_all(b"live").unwrap();
        let mut dead = Target::parse("-o", &p).unwrap().open().unwrap();
        dead.write_all(&[0; 4096]).unwrap();
        let Sink::Replace { _dir, file, .. } = std::mem::replace(&mut dead.sink, Sink::Stdout)
        else {
            unreachable!()
        };
        drop(file);
        let left = _dir.abandon();
        assert!(left.exists());
        // A look-alike someone else made: no marker.
        let lookalike = d.path().join(format!("{TEMP_PREFIX}1-abc"));
        std::fs::create_dir(&lookalike).unwrap();
        std::fs::write(lookalike.join("out.csv"), "theirs").unwrap();
        assert_eq!(remove_leftovers(d.path()), vec![left.clone()]);
        assert!(!left.exists() && lookalike.exists());
        assert_eq!(names(d.path()).len(), 3, "{:?}", names(d.path()));
        live.commit().unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"live");
        assert_eq!(names(d.path()), [".schedlab-output-1-abc", "out.csv"]);
    }

    #[test]
    fn opening_an_output_removes_the_leftovers_beside_it() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("t.pftrace");
        let mut dead = Target::parse("-o", &p).unwrap().open().unwrap();
        let Sink::Replace { _dir, .. } = std::mem::replace(&mut dead.sink, Sink::Stdout) else {
            unreachable!()
        };
        let left = _dir.abandon();
        write_all(&Target::parse("-o", &p).unwrap(), b"x").unwrap();
        assert!(!left.exists());
        assert_eq!(names(d.path()), ["t.pftrace"]);
    }
}
