//! Building a recipe's kernel into schedlab's own cache: unpack Debian's
//! source tarball into a temporary directory there, configure it
//! (`tinyconfig`, `kvm_guest.config`, the repository's fragments merged,
//! `olddefconfig`), check every option asked for is really set, `make
//! bzImage` with a progress bar fed by make's lines, and move the result
//! into `<cache>/NAME-KEY/` whole (a build that fails or is interrupted
//! leaves no entry; its temporary directory is removed on the way out).

use anyhow::{Context, Result, anyhow, bail};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use super::cache::{self, sha256_hex};
use super::config::{KernelConfig, unmet};
use super::recipe::{FRAGMENTS, Recipe};

/// The tools a build runs, each with the Debian package that has it.
const TOOLS: [(&str, &str); 8] = [
    ("make", "make"),
    ("gcc", "gcc"),
    ("flex", "flex"),
    ("bison", "bison"),
    ("bc", "bc"),
    ("pahole", "dwarves"),
    ("tar", "tar"),
    ("xz", "xz-utils"),
];
/// Headers the build compiles against, with their packages.
const HEADERS: [(&str, &str); 2] = [
    ("/usr/include/gelf.h", "libelf-dev"),
    ("/usr/include/openssl/ssl.h", "libssl-dev"),
];

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
}

/// What the machine lacks to build `recipe`, as one error naming the Debian
/// packages to install.
pub fn check_prerequisites(recipe: &Recipe) -> Result<String> {
    let Some(version) = recipe.installed_version() else {
        bail!("cannot build {}: {}", recipe.name, recipe.install_hint());
    };
    let tar = recipe.source_tar();
    if !tar.is_file() {
        bail!(
            "cannot build {}: {} is installed but {} is missing (reinstall it: `apt-get install --reinstall {}`)",
            recipe.name,
            recipe.package,
            tar.display(),
            recipe.package
        );
    }
    let mut lacking: Vec<&str> = TOOLS
        .iter()
        .filter(|(tool, _)| !on_path(tool))
        .map(|&(_, pkg)| pkg)
        .collect();
    lacking.extend(
        HEADERS
            .iter()
            .filter(|(h, _)| !Path::new(h).exists())
            .map(|&(_, pkg)| pkg),
    );
    if !lacking.is_empty() {
        bail!(
            "cannot build {}: this machine lacks build tools: `apt-get install {}`",
            recipe.name,
            lacking.join(" ")
        );
    }
    Ok(version)
}

/// Run one step in `dir`, its output appended to `log`; on failure the
/// error names the step and carries the log's last lines.
fn step(dir: &Path, log: &Path, what: &str, argv: &[&str]) -> Result<()> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .with_context(|| format!("cannot write {}", log.display()))?;
    let status = Command::new(argv[0])
        .args(&argv[1..])
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(file.try_clone()?)
        .stderr(file)
        .status()
        .with_context(|| format!("cannot start {}", argv[0]))?;
    if !status.success() {
        bail!("{what} failed ({status}): {}", tail(log));
    }
    Ok(())
}

/// The last lines of a log, for an error.
fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let last = lines[lines.len().saturating_sub(15)..].join("\n");
    format!("{}\n(the whole log: {})", last, log.display())
}

/// Shows a build's progress: a bar on a terminal, a line per tenth
/// otherwise (CI logs), nothing when quiet.
struct Meter {
    bar: Option<ProgressBar>,
    lines: bool,
    expected: u64,
    shown_tenths: u64,
    started: Instant,
    name: String,
}

impl Meter {
    fn new(name: &str, expected: u64, quiet: bool) -> Meter {
        let interactive = crate::sys::proc::stderr_is_tty() && std::env::var_os("CI").is_none();
        let bar = (!quiet && interactive).then(|| {
            let bar = ProgressBar::with_draw_target(Some(expected), ProgressDrawTarget::stderr());
            bar.set_style(
                ProgressStyle::with_template(
                    "{prefix} [{bar:30}] {pos}/{len} objects {elapsed} ETA {eta} {wide_msg}",
                )
                .expect("static template")
                .progress_chars("=> "),
            );
            bar.set_prefix(format!("building {name}"));
            bar
        });
        Meter {
            bar,
            lines: !quiet && !interactive,
            expected,
            shown_tenths: 0,
            started: Instant::now(),
            name: name.to_string(),
        }
    }

    fn phase(&self, what: &str) {
        if let Some(bar) = &self.bar {
            bar.set_message(what.to_string());
        } else if self.lines {
            note!("building {}: {what}", self.name);
        }
    }

    fn at(&mut self, done: u64, last: &str) {
        // Never past the end before make is: a build printing more than
        // expected waits at 99%.
        let shown = done.min(self.expected.saturating_sub(1));
        if let Some(bar) = &self.bar {
            bar.set_position(shown);
            bar.set_message(crate::out::esc(last).into_owned());
        } else if self.lines {
            let tenths = shown * 10 / self.expected.max(1);
            if tenths > self.shown_tenths {
                self.shown_tenths = tenths;
                note!(
                    "building {}: {}0% ({done} of about {} objects, {} s)",
                    self.name,
                    tenths,
                    self.expected,
                    self.started.elapsed().as_secs()
                );
            }
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// Whether a line of make's output is kbuild's "  CC      kernel/fork.o".
fn is_object_line(line: &str) -> bool {
    let Some(rest) = line.strip_prefix("  ") else {
        return false;
    };
    let mut words = rest.split_whitespace();
    matches!((words.next(), words.next()), (Some(tag), Some(_))
        if tag.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_' || b == b'-'))
}

/// `make -jN bzImage`, counting its object lines into the meter.
fn make_bzimage(src: &Path, log: &Path, meter: &mut Meter) -> Result<u64> {
    let jobs = std::thread::available_parallelism().map_or(1, |n| n.get());
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)?;
    let mut child = Command::new("make")
        .args([format!("-j{jobs}"), "bzImage".to_string()])
        .current_dir(src)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(file.try_clone()?)
        .spawn()
        .context("cannot start make")?;
    let stdout = child.stdout.take().expect("piped");
    let mut log_out = file;
    let mut count = 0u64;
    for line in BufReader::new(stdout).lines() {
        let line = line.context("reading make's output")?;
        // The log is for a person reading a failure: a write error must not
        // stop the build.
        let _ = writeln!(log_out, "{line}");
        if is_object_line(&line) {
            count += 1;
            meter.at(count, line.trim());
        }
    }
    let status = child.wait()?;
    if !status.success() {
        bail!("make bzImage failed ({status}): {}", tail(log));
    }
    Ok(count)
}

/// Build `recipe`'s kernel into schedlab's own cache; returns the entry's directory.
pub fn build(recipe: &Recipe, quiet: bool) -> Result<PathBuf> {
    let version = check_prerequisites(recipe)?;
    let root = cache::own_root().map_err(|e| anyhow!(e))?;
    std::fs::create_dir_all(&root)
        .with_context(|| format!("cannot create the kernel cache {}", root.display()))?;
    let key = recipe.cache_key(&version);
    let started = Instant::now();
    let work = tempfile::Builder::new()
        .prefix(&format!(".build-{}-", recipe.name))
        .tempdir_in(&root)
        .with_context(|| format!("cannot make a build directory in {}", root.display()))?;
    let src = work.path().join("src");
    std::fs::create_dir(&src)?;
    let log = work.path().join("build.log");
    let mut meter = Meter::new(recipe.name, recipe.expected_make_lines, quiet);
    meter.phase(&format!("unpacking {}", recipe.source_tar().display()));
    let tar = recipe.source_tar();
    let tar = tar.to_string_lossy();
    step(
        &src,
        &log,
        "unpacking the source",
        &["tar", "-xJf", &tar, "--strip-components=1"],
    )?;
    meter.phase("configuring");
    let mut fragment_paths = Vec::new();
    for (file, text) in FRAGMENTS {
        let p = work.path().join(file);
        std::fs::write(&p, text)?;
        fragment_paths.push(p.to_string_lossy().into_owned());
    }
    step(&src, &log, "make tinyconfig", &["make", "tinyconfig"])?;
    step(
        &src,
        &log,
        "make kvm_guest.config",
        &["make", "kvm_guest.config"],
    )?;
    let mut merge = vec!["scripts/kconfig/merge_config.sh", "-m", ".config"];
    merge.extend(fragment_paths.iter().map(String::as_str));
    step(&src, &log, "merging the fragments", &merge)?;
    step(&src, &log, "make olddefconfig", &["make", "olddefconfig"])?;
    let config_text = std::fs::read_to_string(src.join(".config"))?;
    let config = KernelConfig::parse(&config_text).map_err(|e| anyhow!(".config: {e}"))?;
    let lacks = unmet(&config, &recipe.wants());
    if !lacks.is_empty() {
        bail!(
            "the configuration of {} ({} {version}) lacks options of kernels/*.fragment \
             (olddefconfig drops what a dependency lacks): {}",
            recipe.name,
            recipe.package,
            lacks.join(", ")
        );
    }
    meter.phase("compiling");
    let objects = make_bzimage(&src, &log, &mut meter)?;
    meter.finish();
    let entry = finish_entry(
        recipe,
        &version,
        &root,
        &key,
        &src,
        &config_text,
        objects,
        started,
    )?;
    if !quiet {
        note!(
            "built {} ({} {version}) in {} s ({objects} objects): {}",
            recipe.name,
            recipe.package,
            started.elapsed().as_secs(),
            entry.display()
        );
    }
    Ok(entry)
}

/// Write the cache entry into a temporary directory beside it and rename it
/// into place (an old entry of the same key, which did not fit, is replaced).
#[allow(clippy::too_many_arguments)]
fn finish_entry(
    recipe: &Recipe,
    version: &str,
    root: &Path,
    key: &str,
    src: &Path,
    config_text: &str,
    objects: u64,
    started: Instant,
) -> Result<PathBuf> {
    let staging = tempfile::Builder::new()
        .prefix(&format!(".entry-{}-", recipe.name))
        .tempdir_in(root)?;
    let bzimage = std::fs::read(src.join("arch/x86/boot/bzImage"))
        .context("make succeeded but left no arch/x86/boot/bzImage")?;
    let dir = staging.path();
    std::fs::write(dir.join("bzImage"), &bzimage)?;
    std::fs::write(
        dir.join("bzImage.sha256"),
        format!("{}  bzImage\n", sha256_hex(&bzimage)),
    )?;
    std::fs::write(dir.join("config"), config_text)?;
    for (file, text) in FRAGMENTS {
        std::fs::write(dir.join(file), text)?;
    }
    std::fs::write(dir.join("source-version"), format!("{version}\n"))?;
    let absent: String = recipe
        .allowed_absent
        .iter()
        .map(|o| format!("CONFIG_{o}\n"))
        .collect();
    std::fs::write(dir.join("absent-options"), absent)?;
    std::fs::write(
        dir.join("build-info"),
        format!(
            "recipe {}\nsource {} {version}\nkey {key}\nmake_lines {objects}\nbuild_s {}\n",
            recipe.name,
            recipe.package,
            started.elapsed().as_secs()
        ),
    )?;
    let entry = root.join(cache::entry_name(recipe, key));
    if entry.exists() {
        // An entry of this very key that did not fit: schedlab's own.
        let old = tempfile::Builder::new()
            .prefix(&format!(".old-{}-", recipe.name))
            .tempdir_in(root)?;
        std::fs::rename(&entry, old.path().join("entry"))
            .with_context(|| format!("cannot move aside {}", entry.display()))?;
    }
    let kept = staging.keep();
    std::fs::rename(&kept, &entry)
        .with_context(|| format!("cannot move the build into {}", entry.display()))?;
    Ok(entry)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kbuild_object_lines_are_counted_and_others_not() {
        assert!(is_object_line("  CC      kernel/fork.o"));
        assert!(is_object_line("  AR      lib/lib.a"));
        assert!(is_object_line("  LD      vmlinux.o"));
        assert!(is_object_line("  HOSTCC  scripts/basic/fixdep"));
        assert!(is_object_line("  BTF     .btf.vmlinux.bin.o"));
        assert!(!is_object_line(
            "Kernel: arch/x86/boot/bzImage is ready  (#1)"
        ));
        assert!(!is_object_line("make[1]: Entering directory"));
        assert!(!is_object_line("  "));
        assert!(!is_object_line("    | ^~~~~"));
    }
}
