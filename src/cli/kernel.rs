//! `schedlab kernel`: the guest kernels of machine campaigns. `list` shows
//! each recipe and whether a cached build fits, `build NAME` builds one
//! into schedlab's cache (about 10 min on two CPUs), `check PATH` reads a
//! user's own bzImage and names what it lacks.

use anyhow::Result;
use clap::Subcommand;
use std::path::PathBuf;

use crate::machine::kernel::{self, RECIPES, cache, recipe};
use crate::out::esc;

#[derive(Subcommand)]
pub(super) enum KernelCommand {
    /// Each recipe, its source package and whether a cached build fits
    /// (SCHEDLAB_KERNEL_CACHE first, then schedlab's cache).
    List {
        /// Also say why each cached build that does not fit was refused.
        #[arg(long)]
        verbose: bool,
    },
    /// Build a recipe's kernel from Debian's source package into schedlab's
    /// cache, unless a cached build fits (about 10 min on two CPUs).
    Build {
        /// The recipe: debian-6.1 or debian-6.12.
        name: String,
        /// Build even when a cached build fits.
        #[arg(long)]
        force: bool,
        /// No progress bar or lines.
        #[arg(long, short)]
        quiet: bool,
    },
    /// Read a bzImage of your own: its release, where its configuration
    /// comes from, and every option schedlab needs that it lacks.
    Check {
        /// The bzImage.
        path: PathBuf,
    },
}

pub(super) fn run(c: KernelCommand) -> Result<i32> {
    match c {
        KernelCommand::List { verbose } => list(verbose),
        KernelCommand::Build { name, force, quiet } => build(&name, force, quiet),
        KernelCommand::Check { path } => {
            let given = path.to_string_lossy().into_owned();
            let k = kernel::user_kernel(&path, &given)?;
            outln!(
                "{}: Linux {}, {} config options, NR_CPUS {}, every option schedlab needs",
                esc(&given),
                esc(&k.release),
                k.config.len(),
                k.config
                    .nr_cpus()
                    .map_or_else(|| "unknown".to_string(), |n| n.to_string())
            )?;
            Ok(0)
        }
    }
}

fn list(verbose: bool) -> Result<i32> {
    let roots: Vec<String> = cache::roots()
        .iter()
        .map(|r| r.display().to_string())
        .collect();
    outln!("caches, in order: {}", esc(&roots.join(", ")))?;
    for r in &RECIPES {
        let version = r.installed_version();
        let lookup = cache::lookup(r, version.as_deref());
        let source = match &version {
            Some(v) => format!("{} {v}", r.package),
            None => format!("{} not installed", r.package),
        };
        match &lookup.found {
            Some(k) => outln!(
                "{:<12} cached   Linux {} from {} at {} (key {})",
                r.name,
                esc(&k.release),
                esc(&k.source),
                esc(&k.bzimage.display().to_string()),
                r.cache_key(k.source.rsplit(' ').next().unwrap_or("")),
            )?,
            None => outln!(
                "{:<12} not built ({}; `schedlab kernel build {}`{})",
                r.name,
                esc(&source),
                r.name,
                if version.is_none() {
                    format!(" needs `apt-get install {}`", r.package)
                } else {
                    String::new()
                }
            )?,
        }
        outln!("{:<12} {}", "", r.about)?;
        if verbose || lookup.found.is_none() {
            for why in &lookup.rejected {
                outln!("{:<12} refused {}", "", esc(why))?;
            }
        }
    }
    Ok(0)
}

fn build(name: &str, force: bool, quiet: bool) -> Result<i32> {
    let Some(r) = recipe::find(name) else {
        anyhow::bail!(
            "no kernel recipe {:?}: the recipes are {}",
            esc(name),
            recipe::names()
        );
    };
    if !force {
        let version = r.installed_version();
        if let Some(k) = cache::lookup(r, version.as_deref()).found {
            outln!(
                "{}: a cached build fits: {} ({}); --force builds anew",
                r.name,
                esc(&k.bzimage.display().to_string()),
                esc(&k.source)
            )?;
            return Ok(0);
        }
    }
    let dir = kernel::build::build(r, quiet)?;
    let version = r.installed_version();
    let k = cache::check_entry(&dir, r, version.as_deref()).map_err(|e| {
        anyhow::anyhow!(
            "the kernel just built in {} does not fit: {e}",
            dir.display()
        )
    })?;
    outln!(
        "{}: Linux {} from {}: {}",
        r.name,
        esc(&k.release),
        esc(&k.source),
        esc(&k.bzimage.display().to_string())
    )?;
    Ok(0)
}
