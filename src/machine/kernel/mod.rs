//! Guest kernels: the recipes schedlab builds from Debian's source packages
//! (`recipe`), the cache of built ones (`cache`), building (`build`), and a
//! user's own bzImage checked for what schedlab needs (`image`, `config`).
//! [`resolve`] turns a spec's `kernel` (a recipe name or a path) into a
//! [`Kernel`] ready to boot.

pub mod build;
pub mod cache;
pub mod config;
pub mod image;
pub mod recipe;

use anyhow::{Result, anyhow, bail};
use std::path::{Path, PathBuf};

pub use config::KernelConfig;
pub use recipe::{RECIPES, Recipe};

/// A kernel ready to boot.
#[derive(Clone, Debug)]
pub struct Kernel {
    /// "debian-6.12", or the user's path as given.
    pub name: String,
    pub bzimage: PathBuf,
    /// Its parsed `.config`.
    pub config: KernelConfig,
    /// E.g. "6.12.117" (from the config's header).
    pub release: String,
    /// "linux-source-6.12 6.12.117-1~deb12u1" or "user bzImage /path".
    pub source: String,
}

/// The options schedlab needs in a guest, built in (`=y`): a bootable 64-bit
/// guest with an initramfs and a serial and virtio console, devtmpfs, ACPI
/// and NUMA for the topology QEMU declares, and what schedlab reads and
/// uses inside (schedstats, POSIX timers, io_uring, file locks, cgroups,
/// the config in /proc).
pub const REQUIRED: [&str; 35] = [
    "64BIT",
    "SMP",
    "PRINTK",
    "TTY",
    "SERIAL_8250",
    "SERIAL_8250_CONSOLE",
    "VIRTIO_PCI",
    "VIRTIO_CONSOLE",
    "BLK_DEV_INITRD",
    "RD_GZIP",
    "BINFMT_ELF",
    "BINFMT_SCRIPT",
    "PROC_FS",
    "PROC_SYSCTL",
    "SYSFS",
    "DEVTMPFS",
    "DEVTMPFS_MOUNT",
    "TMPFS",
    "FUTEX",
    "EPOLL",
    "HIGH_RES_TIMERS",
    "POSIX_TIMERS",
    "SCHED_INFO",
    "SCHEDSTATS",
    "IO_URING",
    "FILE_LOCKING",
    "CGROUPS",
    "CGROUP_SCHED",
    "IKCONFIG",
    "IKCONFIG_PROC",
    "ACPI",
    "NUMA",
    "ACPI_NUMA",
    "SCHED_SMT",
    "SCHED_MC",
];

/// The options of [`REQUIRED`] that `config` lacks (not built in), by name:
/// "CONFIG_VIRTIO_CONSOLE".
pub fn missing_options(config: &KernelConfig) -> Vec<String> {
    REQUIRED
        .iter()
        .filter(|o| config.get(o) != Some("y"))
        .map(|o| format!("CONFIG_{o}"))
        .collect()
}

/// The missing options with what the config has instead, for an error:
/// "CONFIG_VIRTIO_CONSOLE (is m), CONFIG_IO_URING (not set)".
pub fn describe_missing(config: &KernelConfig) -> String {
    missing_options(config)
        .iter()
        .map(|o| match config.get(o) {
            Some(v) => format!("{o} (is {v})"),
            None => format!("{o} (not set)"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether a spec's `kernel` is a path rather than a recipe name.
fn is_path(spec_kernel: &str) -> bool {
    spec_kernel.contains('/') || spec_kernel.starts_with('.') || spec_kernel.starts_with('~')
}

/// Is `spec_kernel` a known recipe name or a path to a bzImage? Validates
/// only (no building; a path's header is read).
pub fn check_name(spec_kernel: &str) -> Result<(), String> {
    if recipe::find(spec_kernel).is_some() {
        return Ok(());
    }
    if is_path(spec_kernel) {
        let data = read_head(Path::new(spec_kernel))?;
        return image::header(&data)
            .map(|_| ())
            .map_err(|e| format!("kernel {spec_kernel}: {e}"));
    }
    Err(format!(
        "kernel {spec_kernel:?} is neither a recipe ({}) nor a path to a bzImage (a path has a '/')",
        recipe::names()
    ))
}

fn read_head(path: &Path) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let mut f = std::fs::File::open(path)
        .map_err(|e| format!("kernel {}: cannot open it: {e}", path.display()))?;
    let mut head = Vec::new();
    f.by_ref()
        .take(4096)
        .read_to_end(&mut head)
        .map_err(|e| format!("kernel {}: cannot read it: {e}", path.display()))?;
    Ok(head)
}

/// Find a cached kernel (`SCHEDLAB_KERNEL_CACHE` first, then schedlab's
/// cache) or, for a recipe, build it when `build` and none fits; for a
/// path, read and check it.
pub fn resolve(spec_kernel: &str, build: bool, quiet: bool) -> Result<Kernel> {
    let Some(recipe) = recipe::find(spec_kernel) else {
        check_name(spec_kernel).map_err(|e| anyhow!(e))?;
        return user_kernel(Path::new(spec_kernel), spec_kernel);
    };
    let version = recipe.installed_version();
    let lookup = cache::lookup(recipe, version.as_deref());
    if let Some(kernel) = lookup.found {
        return Ok(kernel);
    }
    let why = if lookup.rejected.is_empty() {
        format!(
            "no cache holds it (looked in {})",
            cache::roots()
                .iter()
                .map(|r| r.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )
    } else {
        format!("no cached build fits: {}", lookup.rejected.join("; "))
    };
    if !build {
        bail!(
            "kernel {} is not built: {why}; build it with `schedlab kernel build {}`",
            recipe.name,
            recipe.name
        );
    }
    if !quiet {
        note!("kernel {}: {why}; building it", recipe.name);
    }
    let dir = build::build(recipe, quiet)?;
    let version = recipe.installed_version();
    cache::check_entry(&dir, recipe, version.as_deref()).map_err(|e| {
        anyhow!(
            "the kernel just built in {} does not fit: {e}",
            dir.display()
        )
    })
}

/// A user's own bzImage: its header checked, its config read from the image
/// (IKCONFIG) or from a `config` file beside it, and every option schedlab
/// needs present.
pub fn user_kernel(path: &Path, name: &str) -> Result<Kernel> {
    let data = std::fs::read(path)
        .map_err(|e| anyhow!("kernel {}: cannot read it: {e}", path.display()))?;
    let header = image::header(&data).map_err(|e| anyhow!("kernel {}: {e}", path.display()))?;
    let (text, from) = match image::config_of_bzimage(&data) {
        Ok(Some(text)) => (text, "its IKCONFIG".to_string()),
        embedded => {
            let why = match embedded {
                Err(e) => e,
                _ => "built without CONFIG_IKCONFIG".to_string(),
            };
            let beside = config_beside(path, header.release()).ok_or_else(|| {
                anyhow!(
                    "kernel {}: no configuration: from the image, {why}; and no config file beside it \
                     (put the kernel's .config at {})",
                    path.display(),
                    path.with_file_name("config").display()
                )
            })?;
            let text = std::fs::read_to_string(&beside).map_err(|e| {
                anyhow!(
                    "kernel {}: cannot read {}: {e}",
                    path.display(),
                    beside.display()
                )
            })?;
            (text, beside.display().to_string())
        }
    };
    let config = KernelConfig::parse(&text)
        .map_err(|e| anyhow!("kernel {}: its configuration ({from}): {e}", path.display()))?;
    if !missing_options(&config).is_empty() {
        bail!(
            "kernel {}: it lacks options schedlab needs in a guest (configuration from {from}): {}",
            path.display(),
            describe_missing(&config)
        );
    }
    let release = config
        .release()
        .or(header.release())
        .unwrap_or("unknown")
        .to_string();
    Ok(Kernel {
        name: name.to_string(),
        bzimage: path.to_path_buf(),
        config,
        release,
        source: format!("user bzImage {}", path.display()),
    })
}

/// A configuration file beside a bzImage: `config`, `.config`, or for
/// `vmlinuz-R` the `config-R` of /boot's naming.
fn config_beside(path: &Path, release: Option<&str>) -> Option<PathBuf> {
    let mut candidates = vec![
        path.with_file_name("config"),
        path.with_file_name(".config"),
    ];
    let file = path.file_name()?.to_string_lossy().into_owned();
    if let Some(r) = file.strip_prefix("vmlinuz-").or(release) {
        candidates.push(path.with_file_name(format!("config-{r}")));
    }
    candidates.into_iter().find(|c| c.is_file())
}

#[cfg(test)]
mod tests {
    use super::image::tests::{fake_bzimage, fake_kernel, gzip};
    use super::*;

    fn full_config() -> String {
        let mut text = "# Linux/x86 6.12.1 Kernel Configuration\n".to_string();
        for o in REQUIRED {
            text.push_str(&format!("CONFIG_{o}=y\n"));
        }
        text
    }

    fn image_of(config: &str) -> Vec<u8> {
        let kernel = fake_kernel(config);
        let mut stream = gzip(&kernel);
        stream.extend_from_slice(&(kernel.len() as u32).to_le_bytes());
        fake_bzimage(&stream, "6.12.1 (a@b) #1")
    }

    #[test]
    fn a_config_lacking_an_option_is_named() {
        let full = KernelConfig::parse(&full_config()).unwrap();
        assert!(missing_options(&full).is_empty());
        let text = full_config()
            .replace("CONFIG_VIRTIO_CONSOLE=y", "CONFIG_VIRTIO_CONSOLE=m")
            .replace("CONFIG_IO_URING=y\n", "");
        let partial = KernelConfig::parse(&text).unwrap();
        assert_eq!(
            missing_options(&partial),
            vec!["CONFIG_VIRTIO_CONSOLE", "CONFIG_IO_URING"]
        );
        assert_eq!(
            describe_missing(&partial),
            "CONFIG_VIRTIO_CONSOLE (is m), CONFIG_IO_URING (not set)"
        );
    }

    #[test]
    fn a_user_bzimage_is_read_with_its_ikconfig_or_refused_naming_what_it_lacks() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("good");
        std::fs::write(&good, image_of(&full_config())).unwrap();
        let k = user_kernel(&good, "x/good").unwrap();
        assert_eq!(k.release, "6.12.1");
        assert_eq!(k.name, "x/good");
        assert!(k.source.starts_with("user bzImage "));

        let lacking = dir.path().join("lacking");
        let text = full_config().replace("CONFIG_SCHEDSTATS=y\n", "");
        std::fs::write(&lacking, image_of(&text)).unwrap();
        let e = user_kernel(&lacking, "lacking").unwrap_err().to_string();
        assert!(
            e.contains("CONFIG_SCHEDSTATS (not set)") && e.contains("lacking"),
            "{e}"
        );
    }

    #[test]
    fn without_ikconfig_the_config_beside_the_image_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let kernel = vec![1u8; 5000];
        let mut stream = gzip(&kernel);
        stream.extend_from_slice(&(kernel.len() as u32).to_le_bytes());
        let path = dir.path().join("vmlinuz-6.12.1");
        std::fs::write(&path, fake_bzimage(&stream, "6.12.1 (a@b) #1")).unwrap();
        let e = user_kernel(&path, "p").unwrap_err().to_string();
        assert!(e.contains("built without CONFIG_IKCONFIG"), "{e}");
        std::fs::write(dir.path().join("config-6.12.1"), full_config()).unwrap();
        let k = user_kernel(&path, "p").unwrap();
        assert_eq!(k.config.get("NUMA"), Some("y"));
    }

    #[test]
    fn names_are_recipes_or_paths() {
        assert!(check_name("debian-6.12").is_ok());
        assert!(check_name("debian-6.1").is_ok());
        let e = check_name("debian-7").unwrap_err();
        assert!(e.contains("debian-6.1, debian-6.12"), "{e}");
        let e = check_name("/nonexistent/bzImage").unwrap_err();
        assert!(e.contains("/nonexistent/bzImage"), "{e}");
    }
}
