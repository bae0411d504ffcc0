//! Guest kernel recipes end to end through `schedlab kernel`: the cache key,
//! a cache of built kernels that fits (`$SCHEDLAB_KERNEL_CACHE`, else
//! `../shared/kernels` beside the repository, else the kernels are built
//! here: a fresh machine must work), the configuration read out of a real
//! bzImage, and bad input refused with its path and what it lacks.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use schedlab::machine::kernel::{KernelConfig, RECIPES, image, recipe::FRAGMENTS};

/// Each recipe's name and, when listed as cached, its bzImage.
type Rows = Vec<(String, Option<PathBuf>)>;
type Listing = (String, Rows);

fn schedlab(args: &[&str], env: &[(&str, &Path)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_schedlab"));
    c.args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("schedlab runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The read-only cache to use: `$SCHEDLAB_KERNEL_CACHE`, else the shared
/// kernels beside the repository; `None`: build into schedlab's own.
fn given_cache() -> Option<PathBuf> {
    if let Some(c) = std::env::var_os("SCHEDLAB_KERNEL_CACHE").filter(|c| !c.is_empty()) {
        return Some(PathBuf::from(c));
    }
    let shared = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/kernels");
    shared.is_dir().then_some(shared)
}

/// `schedlab kernel list` with the given cache; each recipe's bzImage path
/// when listed as cached.
fn list(cache: Option<&Path>, xdg: Option<&Path>) -> (String, Rows) {
    let mut env = Vec::new();
    if let Some(c) = cache {
        env.push(("SCHEDLAB_KERNEL_CACHE", c));
    }
    if let Some(x) = xdg {
        env.push(("XDG_CACHE_HOME", x));
    }
    let out = schedlab(&["kernel", "list", "--verbose"], &env);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    let rows = RECIPES
        .iter()
        .map(|r| {
            let line = stdout
                .lines()
                .find(|l| l.split_whitespace().next() == Some(r.name))
                .unwrap_or_else(|| panic!("no line for {}: {stdout}", r.name));
            let path = line
                .contains(" cached ")
                .then(|| {
                    line.split(" at ")
                        .nth(1)
                        .unwrap()
                        .split(" (key")
                        .next()
                        .unwrap()
                })
                .map(PathBuf::from);
            (r.name.to_string(), path)
        })
        .collect();
    (stdout, rows)
}

#[test]
fn each_recipes_key_is_the_sha256_of_both_fragments_and_its_source_version() {
    for r in RECIPES {
        let version = "6.99.1-1~test";
        let mut input = Vec::new();
        for (file, text) in FRAGMENTS {
            let on_disk = std::fs::read_to_string(
                Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("kernels")
                    .join(file),
            )
            .unwrap();
            assert_eq!(on_disk, text, "kernels/{file} is the one compiled in");
            input.extend_from_slice(text.as_bytes());
        }
        input.extend_from_slice(format!("{} {version}\n", r.package).as_bytes());
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("input");
        std::fs::write(&file, &input).unwrap();
        let out = Command::new("sha256sum").arg(&file).output().unwrap();
        let sum = text(&out.stdout);
        assert_eq!(r.cache_key(version), sum[..16], "{}", r.name);
    }
}

/// Both recipes' kernels, from the given cache or, without one, built into
/// schedlab's own cache (as a fresh machine or a user's CI must): the
/// listing and each one's bzImage when cached and usable.
/// Once per test binary: the tests run in parallel and must not build twice.
fn cached_kernels() -> (String, Rows) {
    static ONCE: std::sync::OnceLock<Listing> = std::sync::OnceLock::new();
    ONCE.get_or_init(cached_kernels_now).clone()
}

fn cached_kernels_now() -> (String, Rows) {
    let cache = given_cache();
    if cache.is_none() {
        for r in RECIPES {
            // A no-op when schedlab's own cache already holds a fitting build.
            let out = schedlab(&["kernel", "build", r.name], &[]);
            assert!(out.status.success(), "{}", text(&out.stderr));
        }
    }
    list(cache.as_deref(), None)
}

#[test]
fn both_recipes_are_cached_and_usable_and_their_images_carry_their_config() {
    let (stdout, rows) = cached_kernels();
    for (name, path) in rows {
        let bzimage = path.unwrap_or_else(|| panic!("{name} is not cached and usable: {stdout}"));
        // IKCONFIG out of the real (xz-compressed) image equals the config beside it.
        let data = std::fs::read(&bzimage).unwrap();
        let embedded = image::config_of_bzimage(&data)
            .unwrap()
            .unwrap_or_else(|| panic!("{} has no IKCONFIG", bzimage.display()));
        let beside = std::fs::read_to_string(bzimage.with_file_name("config")).unwrap();
        assert_eq!(
            KernelConfig::parse(&embedded).unwrap(),
            KernelConfig::parse(&beside).unwrap(),
            "{name}"
        );
        let check = schedlab(&["kernel", "check", bzimage.to_str().unwrap()], &[]);
        assert!(check.status.success(), "{}", text(&check.stderr));
        assert!(
            text(&check.stdout).contains("NR_CPUS 64"),
            "{}",
            text(&check.stdout)
        );
    }
}

#[test]
fn a_cached_kernel_of_other_fragments_or_a_changed_image_is_refused() {
    let (_, rows) = cached_kernels();
    let src = rows[1]
        .1
        .clone()
        .expect("debian-6.12 cached")
        .with_file_name("");
    let tmp = tempfile::tempdir().unwrap();
    let xdg = tmp.path().join("xdg");
    let copy = tmp.path().join("cache").join("debian-6.12");
    std::fs::create_dir_all(&copy).unwrap();
    for f in std::fs::read_dir(&src).unwrap() {
        let f = f.unwrap();
        std::fs::copy(f.path(), copy.join(f.file_name())).unwrap();
    }
    let cache_copy = tmp.path().join("cache");
    let (stdout, rows) = list(Some(&cache_copy), Some(&xdg));
    assert!(rows[1].1.is_some(), "the copy fits: {stdout}");

    let fragment = copy.join("topology.fragment");
    let original = std::fs::read_to_string(&fragment).unwrap();
    std::fs::write(&fragment, original.replace("NR_CPUS=64", "NR_CPUS=8")).unwrap();
    let (stdout, rows) = list(Some(&cache_copy), Some(&xdg));
    assert!(rows[1].1.is_none(), "{stdout}");
    assert!(
        stdout.contains("built from another topology.fragment"),
        "{stdout}"
    );

    std::fs::write(&fragment, original).unwrap();
    let mut image = std::fs::read(copy.join("bzImage")).unwrap();
    let last = image.len() - 1;
    image[last] ^= 1;
    std::fs::write(copy.join("bzImage"), image).unwrap();
    let (stdout, rows) = list(Some(&cache_copy), Some(&xdg));
    assert!(rows[1].1.is_none(), "{stdout}");
    assert!(stdout.contains("does not match bzImage.sha256"), "{stdout}");
}

#[test]
fn a_file_that_is_not_a_bzimage_is_refused_naming_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("not-a-kernel");
    std::fs::write(&path, vec![b'x'; 8192]).unwrap();
    let out = schedlab(&["kernel", "check", path.to_str().unwrap()], &[]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(path.to_str().unwrap()) && stderr.contains("\"HdrS\" at offset 0x202"),
        "{stderr}"
    );
    let missing = dir.path().join("nowhere/bzImage");
    let out = schedlab(&["kernel", "check", missing.to_str().unwrap()], &[]);
    let stderr = text(&out.stderr);
    assert!(stderr.contains(missing.to_str().unwrap()), "{stderr}");
}

#[test]
fn a_kernel_lacking_options_schedlab_needs_is_refused_naming_them() {
    // A bzImage whose kernel cannot be read (no compression known) with its
    // config beside it, that config lacking two options.
    let dir = tempfile::tempdir().unwrap();
    let mut data = vec![0u8; 4096];
    data[0x1f1] = 4;
    data[0x202..0x206].copy_from_slice(b"HdrS");
    data[0x206..0x208].copy_from_slice(&0x020fu16.to_le_bytes());
    data[0x24c..0x250].copy_from_slice(&64u32.to_le_bytes());
    let path = dir.path().join("bzImage");
    std::fs::write(&path, &data).unwrap();
    let mut config = String::from("# Linux/x86 6.12.1 Kernel Configuration\n");
    for o in schedlab::machine::kernel::REQUIRED {
        if o != "IO_URING" {
            config.push_str(&format!(
                "CONFIG_{o}={}\n",
                if o == "VIRTIO_CONSOLE" { "m" } else { "y" }
            ));
        }
    }
    std::fs::write(dir.path().join("config"), &config).unwrap();
    let out = schedlab(&["kernel", "check", path.to_str().unwrap()], &[]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("CONFIG_VIRTIO_CONSOLE (is m)")
            && stderr.contains("CONFIG_IO_URING (not set)")
            && stderr.contains(dir.path().join("config").to_str().unwrap()),
        "{stderr}"
    );
}
