//! The kernel recipes schedlab builds itself: which Debian source package,
//! the repository's fragments (`kernels/*.fragment`, compiled in), the
//! options a version may lack, and the cache key of a build.

use sha2::{Digest, Sha256};
use std::path::PathBuf;
use std::process::Command;

use super::config::{Want, parse_fragment};

/// The fragments merged over `tinyconfig` + `kvm_guest.config`, in order:
/// (file name, text). The same for every recipe.
pub const FRAGMENTS: [(&str, &str); 2] = [
    (
        "base.fragment",
        include_str!("../../../kernels/base.fragment"),
    ),
    (
        "topology.fragment",
        include_str!("../../../kernels/topology.fragment"),
    ),
];

/// A kernel schedlab knows how to build.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Recipe {
    /// "debian-6.12".
    pub name: &'static str,
    /// The Debian package holding the source tarball: "linux-source-6.12".
    pub package: &'static str,
    /// What it is, for `schedlab kernel list`.
    pub about: &'static str,
    /// Options of the fragments this version lacks (olddefconfig drops them):
    /// not set in its config, and not an error.
    pub allowed_absent: &'static [&'static str],
    /// About how many lines `make bzImage` prints (one per compiled or
    /// linked object), for the progress bar; a build that prints more only
    /// waits at the end of the bar.
    pub expected_make_lines: u64,
}

pub const RECIPES: [Recipe; 2] = [
    Recipe {
        name: "debian-6.1",
        package: "linux-source-6.1",
        about: "Linux 6.1 (long-term, before EEVDF): CFS",
        // 6.1 has no sched_ext; its BPF JIT and kprobes need what tinyconfig
        // lacks there (as /work/shared/kernels/debian-6.1/absent-options).
        allowed_absent: &[
            "BPF_JIT",
            "BPF_JIT_ALWAYS_ON",
            "BPF_JIT_DEFAULT_ON",
            "KPROBES",
            "KPROBE_EVENTS",
            "SCHED_CLASS_EXT",
        ],
        expected_make_lines: 1900,
    },
    Recipe {
        name: "debian-6.12",
        package: "linux-source-6.12",
        about: "Linux 6.12: EEVDF with sched_ext",
        allowed_absent: &[],
        expected_make_lines: 2100,
    },
];

impl Recipe {
    /// The kernel release it builds: "6.12" of "linux-source-6.12".
    pub fn release(&self) -> &'static str {
        self.package.trim_start_matches("linux-source-")
    }
}

/// CONFIG_HZ of every recipe's build: the `CONFIG_HZ_N=y` of the fragments.
pub fn fragment_hz() -> Option<u32> {
    FRAGMENTS.iter().find_map(|(_, text)| {
        text.lines().find_map(|l| {
            l.trim()
                .strip_prefix("CONFIG_HZ_")?
                .strip_suffix("=y")?
                .parse()
                .ok()
        })
    })
}

/// The recipe of a name, if any.
pub fn find(name: &str) -> Option<&'static Recipe> {
    RECIPES.iter().find(|r| r.name == name)
}

/// The recipes' names, for errors: "debian-6.1, debian-6.12".
pub fn names() -> String {
    RECIPES
        .iter()
        .map(|r| r.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Every option the fragments ask for.
pub fn fragment_wants() -> Vec<Want> {
    FRAGMENTS
        .iter()
        .flat_map(|(file, text)| {
            parse_fragment(text)
                .unwrap_or_else(|e| panic!("kernels/{file} is compiled in and parses: {e}"))
        })
        .collect()
}

impl Recipe {
    /// The fragments' options this recipe's config must meet (those it may
    /// lack left out).
    pub fn wants(&self) -> Vec<Want> {
        let mut wants = fragment_wants();
        wants.retain(|w| !self.allowed_absent.contains(&w.name.as_str()));
        wants
    }

    /// The source tarball the package installs.
    pub fn source_tar(&self) -> PathBuf {
        PathBuf::from(format!("/usr/src/{}.tar.xz", self.package))
    }

    /// The cache key: the first 16 hex digits of sha256 over both
    /// fragments and "PACKAGE VERSION" (as `scripts/vm-test` keys its
    /// kernel by its fragment and source version).
    pub fn cache_key(&self, source_version: &str) -> String {
        let mut h = Sha256::new();
        for (_, text) in FRAGMENTS {
            h.update(text.as_bytes());
        }
        h.update(format!("{} {source_version}\n", self.package).as_bytes());
        let digest = h.finalize();
        digest[..8].iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The version of the installed source package (dpkg), or `None` when it
    /// is not installed (or this is not a Debian system).
    pub fn installed_version(&self) -> Option<String> {
        let out = Command::new("dpkg-query")
            .args(["-W", "-f=${db:Status-Abbrev} ${Version}", self.package])
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| installed_of(&String::from_utf8_lossy(&out.stdout)))
            .flatten()
    }

    /// What to tell a user whose machine lacks the source package.
    pub fn install_hint(&self) -> String {
        format!(
            "{} is not installed: install Debian's source package with `apt-get install {}`",
            self.package, self.package
        )
    }
}

/// The version in dpkg-query's "${db:Status-Abbrev} ${Version}" when the
/// package is installed: "ii  6.12.117-1~deb12u1" (the abbreviation is three
/// characters, "ii ", then the space before the version).
fn installed_of(text: &str) -> Option<String> {
    let mut words = text.split_whitespace();
    let (status, version) = (words.next()?, words.next()?);
    (status == "ii").then(|| version.to_string())
}

/// The upstream release of a Debian version: "6.12.117" of "6.12.117-1~deb12u1".
pub fn upstream(version: &str) -> &str {
    version.split('-').next().unwrap_or(version)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recipe_names_its_release_and_the_fragments_their_hz() {
        assert_eq!(find("debian-6.12").unwrap().release(), "6.12");
        assert_eq!(fragment_hz(), Some(1000));
    }

    #[test]
    fn both_fragments_parse_and_ask_for_what_a_guest_needs() {
        let wants = fragment_wants();
        for name in ["64BIT", "SCHED_CLASS_EXT", "NR_CPUS", "NUMA", "IKCONFIG"] {
            assert!(wants.iter().any(|w| w.name == name), "{name}");
        }
        let r612 = find("debian-6.12").unwrap();
        assert_eq!(r612.wants().len(), wants.len());
        let r61 = find("debian-6.1").unwrap();
        assert!(!r61.wants().iter().any(|w| w.name == "SCHED_CLASS_EXT"));
        // Every option a recipe may lack is one the fragments ask for.
        for r in RECIPES {
            for a in r.allowed_absent {
                assert!(wants.iter().any(|w| w.name == *a), "{}: {a}", r.name);
            }
        }
    }

    #[test]
    fn an_installed_packages_version_is_read_without_the_status_padding() {
        assert_eq!(
            installed_of("ii  6.12.117-1~deb12u1").as_deref(),
            Some("6.12.117-1~deb12u1")
        );
        assert_eq!(installed_of("rc  6.1.192-2"), None);
        assert_eq!(installed_of("un  "), None);
        assert_eq!(installed_of(""), None);
    }

    #[test]
    fn the_upstream_release_is_before_the_debian_revision() {
        assert_eq!(upstream("6.12.117-1~deb12u1"), "6.12.117");
        assert_eq!(upstream("6.1.192-2"), "6.1.192");
        assert_eq!(upstream("6.1.192"), "6.1.192");
    }

    #[test]
    fn the_key_changes_with_the_version_and_the_package() {
        let a = find("debian-6.12").unwrap();
        let b = find("debian-6.1").unwrap();
        assert_eq!(a.cache_key("1"), a.cache_key("1"));
        assert_eq!(a.cache_key("1").len(), 16);
        assert_ne!(a.cache_key("1"), a.cache_key("2"));
        assert_ne!(a.cache_key("1"), b.cache_key("1"));
    }
}
