//! Build script of `schedlab-ext`: compiles the sched_ext WRR scheduler
//! (`src/bpf/wrr.bpf.c`) with clang 16+ and generates its libbpf-rs
//! skeleton into OUT_DIR. Only the `ext` feature of schedlab builds this
//! crate, so schedlab without it builds on a machine without clang or
//! libelf.
//!
//! The BPF program is built against `src/bpf/vmlinux.h`, the types of a
//! Linux 6.12 kernel with sched_ext dumped from its BTF (`bpftool btf dump
//! file vmlinux format c`, as `scripts/vm-test` does for the kernel it
//! builds), because the machine that builds schedlab may run a kernel
//! without sched_ext. `SCHEDLAB_VMLINUX_H=/path/to/vmlinux.h` uses another
//! dump. Field accesses are CO-RE relocated when the program is loaded.
//! The compiler is `SCHEDLAB_BPF_CLANG` if set, else the first of clang-19,
//! clang-18, clang-17, clang-16 and clang that is version 16 or newer.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    ext::build();
}

mod ext {
    use std::env;
    use std::path::PathBuf;
    use std::process::Command;

    use libbpf_cargo::SkeletonBuilder;

    const SOURCE: &str = "src/bpf/wrr.bpf.c";
    const VMLINUX: &str = "src/bpf/vmlinux.h";
    const MIN_CLANG: u32 = 16;

    /// The major version `clang --version` reports, if it runs.
    fn clang_major(clang: &str) -> Option<u32> {
        let out = Command::new(clang).arg("--version").output().ok()?;
        let text = String::from_utf8_lossy(&out.stdout);
        let rest = text.split("clang version ").nth(1)?;
        rest.split('.').next()?.trim().parse().ok()
    }

    fn find_clang() -> Result<(String, u32), String> {
        if let Ok(c) = env::var("SCHEDLAB_BPF_CLANG") {
            return match clang_major(&c) {
                Some(v) if v >= MIN_CLANG => Ok((c, v)),
                Some(v) => Err(format!(
                    "SCHEDLAB_BPF_CLANG={c} is clang {v}; sched_ext's BPF needs clang {MIN_CLANG} or newer"
                )),
                None => Err(format!("SCHEDLAB_BPF_CLANG={c} does not run as clang")),
            };
        }
        let mut seen = Vec::new();
        for c in ["clang-19", "clang-18", "clang-17", "clang-16", "clang"] {
            match clang_major(c) {
                Some(v) if v >= MIN_CLANG => return Ok((c.to_string(), v)),
                Some(v) => seen.push(format!("{c} is version {v}")),
                None => {}
            }
        }
        let seen = if seen.is_empty() {
            "no clang found".to_string()
        } else {
            seen.join(", ")
        };
        Err(format!(
            "the `ext` feature compiles a sched_ext BPF scheduler and needs clang {MIN_CLANG} or newer \
             ({seen}): install clang-19 (Debian 12: apt-get install clang-19 llvm-19 libelf-dev \
             zlib1g-dev pkg-config) or set SCHEDLAB_BPF_CLANG, or build without --features ext"
        ))
    }

    pub fn build() {
        println!("cargo:rerun-if-changed={SOURCE}");
        println!("cargo:rerun-if-changed={VMLINUX}");
        println!("cargo:rerun-if-env-changed=SCHEDLAB_VMLINUX_H");
        println!("cargo:rerun-if-env-changed=SCHEDLAB_BPF_CLANG");
        let (clang, major) = find_clang().unwrap_or_else(|e| panic!("{e}"));
        let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
        // The header directory: vmlinux.h from the environment, or ours.
        let include = match env::var_os("SCHEDLAB_VMLINUX_H") {
            Some(h) => {
                let dir = out.join("vmlinux");
                std::fs::create_dir_all(&dir).expect("creating OUT_DIR/vmlinux");
                std::fs::copy(&h, dir.join("vmlinux.h")).unwrap_or_else(|e| {
                    panic!("SCHEDLAB_VMLINUX_H={}: {e}", PathBuf::from(&h).display())
                });
                dir
            }
            None => PathBuf::from("src/bpf"),
        };
        let skel = out.join("wrr.skel.rs");
        SkeletonBuilder::new()
            .source(SOURCE)
            .clang(&clang)
            .clang_args([
                "-I".into(),
                include.into_os_string(),
                "-Wall".into(),
                "-Wno-unused-function".into(),
            ])
            .build_and_generate(&skel)
            .unwrap_or_else(|e| panic!("building {SOURCE} with {clang}: {e:#}"));
        println!("cargo:rustc-env=SCHEDLAB_BPF_CLANG_USED={clang} {major}");
    }
}
