//! Where built kernels are kept and when one fits. schedlab's own cache is
//! `$XDG_CACHE_HOME/schedlab/kernels` (or `~/.cache/schedlab/kernels`);
//! `SCHEDLAB_KERNEL_CACHE` names a further one, only read, looked in first.
//! A kernel of recipe NAME lives in `<cache>/NAME-KEY/` (or `<cache>/NAME/`,
//! as `../shared/kernels` holds them) with its `bzImage`, `bzImage.sha256`,
//! `config`, both fragments and `source-version`. It fits when its fragments
//! are the repository's, its bzImage matches its sha256, its source version is
//! the installed package's (any, when the package is not installed), its
//! config is of that release and has every option the recipe asks for and
//! every option schedlab needs.

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

use super::config::{KernelConfig, unmet};
use super::image;
use super::recipe::{FRAGMENTS, Recipe, upstream};
use super::{Kernel, missing_options};

/// The variable naming a further, read-only cache, looked in first.
pub const ENV_EXTRA: &str = "SCHEDLAB_KERNEL_CACHE";

/// schedlab's own cache directory (it may not exist yet).
pub fn own_root() -> Result<PathBuf, String> {
    let base = match std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
        Some(x) => PathBuf::from(x),
        None => match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
            Some(home) => PathBuf::from(home).join(".cache"),
            None => {
                return Err(
                    "neither XDG_CACHE_HOME nor HOME is set: no cache directory for kernels"
                        .to_string(),
                );
            }
        },
    };
    Ok(base.join("schedlab").join("kernels"))
}

/// The caches to look in, in order: `SCHEDLAB_KERNEL_CACHE`'s, then schedlab's own.
pub fn roots() -> Vec<PathBuf> {
    let mut roots = Vec::new();
    if let Some(extra) = std::env::var_os(ENV_EXTRA).filter(|v| !v.is_empty()) {
        roots.push(PathBuf::from(extra));
    }
    if let Ok(own) = own_root() {
        roots.push(own);
    }
    roots
}

/// The directory in schedlab's own cache a build of `recipe` goes to.
pub fn entry_name(recipe: &Recipe, key: &str) -> String {
    format!("{}-{key}", recipe.name)
}

/// The outcome of looking for a recipe's kernel.
pub struct Lookup {
    /// The first entry that fits.
    pub found: Option<Kernel>,
    /// Why each existing entry that was looked at does not fit: "DIR: reason".
    pub rejected: Vec<String>,
}

/// Look for a kernel of `recipe` in every cache. `version`: the installed
/// source package's, when it is installed.
pub fn lookup(recipe: &Recipe, version: Option<&str>) -> Lookup {
    let mut rejected = Vec::new();
    for root in roots() {
        let mut dirs = vec![root.join(recipe.name)];
        if let Some(v) = version {
            dirs.insert(0, root.join(entry_name(recipe, &recipe.cache_key(v))));
        } else if let Ok(rd) = std::fs::read_dir(&root) {
            // Without the package, any build of this recipe may fit.
            let prefix = format!("{}-", recipe.name);
            let mut more: Vec<PathBuf> = rd
                .flatten()
                .filter(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    name.strip_prefix(&prefix)
                        .is_some_and(|k| k.len() == 16 && k.bytes().all(|b| b.is_ascii_hexdigit()))
                })
                .map(|e| e.path())
                .collect();
            more.sort();
            dirs.splice(0..0, more);
        }
        for dir in dirs {
            if !dir.join("bzImage").exists() {
                continue;
            }
            match check_entry(&dir, recipe, version) {
                Ok(kernel) => {
                    return Lookup {
                        found: Some(kernel),
                        rejected,
                    };
                }
                Err(why) => rejected.push(format!("{}: {why}", dir.display())),
            }
        }
    }
    Lookup {
        found: None,
        rejected,
    }
}

fn read(dir: &Path, file: &str) -> Result<String, String> {
    std::fs::read_to_string(dir.join(file)).map_err(|e| format!("cannot read {file}: {e}"))
}

/// The sha256 of a file's bytes, in hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Whether a cache entry fits `recipe`; the kernel when it does, else why not.
pub fn check_entry(dir: &Path, recipe: &Recipe, version: Option<&str>) -> Result<Kernel, String> {
    for (file, text) in FRAGMENTS {
        if read(dir, file)? != text {
            return Err(format!(
                "built from another {file} than the repository's kernels/{file}"
            ));
        }
    }
    let source_version = read(dir, "source-version")?
        .lines()
        .next()
        .map(str::trim)
        .unwrap_or("")
        .to_string();
    if source_version.is_empty() {
        return Err("its source-version is empty".to_string());
    }
    if let Some(v) = version
        && v != source_version
    {
        return Err(format!(
            "built from {} {source_version}, not the installed {v}",
            recipe.package
        ));
    }
    let bzimage = dir.join("bzImage");
    let bytes = std::fs::read(&bzimage).map_err(|e| format!("cannot read bzImage: {e}"))?;
    let want_sha = read(dir, "bzImage.sha256")?;
    let want_sha = want_sha.split_whitespace().next().unwrap_or("");
    if sha256_hex(&bytes) != want_sha {
        return Err("its bzImage does not match bzImage.sha256".to_string());
    }
    image::header(&bytes)?;
    let config = KernelConfig::parse(&read(dir, "config")?).map_err(|e| format!("config: {e}"))?;
    let release = config.release().unwrap_or("").to_string();
    if release != upstream(&source_version) {
        return Err(format!(
            "its config is of Linux {release:?}, not {}",
            upstream(&source_version)
        ));
    }
    let lacks = unmet(&config, &recipe.wants());
    if !lacks.is_empty() {
        return Err(format!(
            "its config lacks what the recipe asks for: {}",
            lacks.join(", ")
        ));
    }
    let needed = missing_options(&config);
    if !needed.is_empty() {
        return Err(format!(
            "its config lacks what schedlab needs: {}",
            needed.join(", ")
        ));
    }
    Ok(Kernel {
        name: recipe.name.to_string(),
        bzimage,
        config,
        release,
        source: format!("{} {source_version}", recipe.package),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_own_cache_follows_xdg_then_home() {
        // Only the pure part: the rule on given values, through a child's env.
        let out = std::process::Command::new("sh")
            .args([
                "-c",
                "echo ${XDG_CACHE_HOME:-$HOME/.cache}/schedlab/kernels",
            ])
            .output()
            .unwrap();
        let expected = String::from_utf8(out.stdout).unwrap();
        assert_eq!(own_root().unwrap(), PathBuf::from(expected.trim()));
    }
}
