//! The C side of the fidelity benchmark's CPU rows: the pi and matmul
//! workloads' loops written in C with exactly the same arithmetic, and the
//! fork + exec + wait loop the launch row compares schedlab's worker start
//! against. They are compiled into the benchmark's temporary directory (pi
//! and fork+exec at `cc -O2`; matmul at the best the compiler does with the
//! same arithmetic, `-O3 -ffp-contract=off`, once for the instruction set
//! schedlab's own build uses and once with `-march=native`); each pins itself to the CPU it is given (`sched_setaffinity`,
//! -1: leave the affinity alone), times its own loop with CLOCK_MONOTONIC
//! and prints `key value` lines.
//!
//! pi (`workload::pi`): the Leibniz series in blocks of 2^20 terms, each
//! block summed on its own (`leibniz(start, count)`: sign flips, term
//! sign / (2k + 1)), block sums added up; the bound of each block is read
//! through a volatile (as `black_box` hides it from the compiler). Prints
//! `iterations`, `elapsed_ns` and `error` = |π − estimate|, which equals
//! the error of schedlab's run bit for bit (no fast-math: the same
//! operations in the same order round the same way; a unit test checks it,
//! the benchmark allows 1e-12 relative).
//!
//! matmul (`workload::matmul`): A[i][j] = ((7i + 3j) mod 17)/17 − 0.5,
//! B[i][j] = ((5i + 11j) mod 13)/13 − 0.5, C = A·B row-major in i-k-j
//! order (row of C zeroed, then C[i][·] += A[i][k]·B[k][·]), `restrict`
//! pointers (Rust's slices promise the compiler the same), and a compiler
//! barrier around every multiply (as `black_box` on A, B and C). Prints
//! `multiplies`, `elapsed_ns` and `checksum` = Σ C, which must equal
//! schedlab's `checksum` figure.
//!
//! forkexec: fork, exec the given program with its arguments (standard
//! output to /dev/null), wait for it; N times one after another. Prints
//! `count` and `elapsed_ns`, and fails if a child did not exit with 0.

use anyhow::{Context, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::exec;

const COMMON: &str = r#"#define _GNU_SOURCE
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void pin(int cpu) {
    if (cpu < 0) return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) {
        perror("sched_setaffinity");
        exit(2);
    }
}
"#;

const PI: &str = r#"
#include <math.h>
#define BLOCK ((uint64_t)1 << 20)

static double leibniz(uint64_t start, uint64_t count) {
    volatile uint64_t bound = start + count;
    uint64_t end = bound;
    double sign = start % 2 == 0 ? 1.0 : -1.0;
    double sum = 0.0;
    for (uint64_t k = start; k < end; k++) {
        sum += sign / (2.0 * (double)k + 1.0);
        sign = -sign;
    }
    return 4.0 * sum;
}

/* usage: pi ITERATIONS CPU */
int main(int argc, char **argv) {
    if (argc != 3) return 2;
    uint64_t n = strtoull(argv[1], NULL, 10);
    pin(atoi(argv[2]));
    uint64_t t0 = now_ns();
    double sum = 0.0;
    uint64_t next = 0;
    for (uint64_t left = n; left > 0;) {
        uint64_t c = left < BLOCK ? left : BLOCK;
        sum += leibniz(next, c);
        next += c;
        left -= c;
    }
    uint64_t t1 = now_ns();
    printf("iterations %llu\nelapsed_ns %llu\nerror %.17g\n", (unsigned long long)next,
           (unsigned long long)(t1 - t0), fabs(M_PI - sum));
    return 0;
}
"#;

const MATMUL: &str = r#"
static void multiply(size_t n, const double *restrict a, const double *restrict b,
                     double *restrict c) {
    for (size_t i = 0; i < n; i++) {
        double *restrict crow = c + i * n;
        for (size_t j = 0; j < n; j++) crow[j] = 0.0;
        for (size_t k = 0; k < n; k++) {
            double aik = a[i * n + k];
            const double *restrict brow = b + k * n;
            for (size_t j = 0; j < n; j++) crow[j] += aik * brow[j];
        }
    }
}

/* usage: matmul N MULTIPLIES CPU */
int main(int argc, char **argv) {
    if (argc != 4) return 2;
    size_t n = strtoull(argv[1], NULL, 10);
    uint64_t m = strtoull(argv[2], NULL, 10);
    pin(atoi(argv[3]));
    double *a = malloc(n * n * sizeof *a), *b = malloc(n * n * sizeof *b);
    double *c = calloc(n * n, sizeof *c);
    if (!a || !b || !c) return 3;
    for (size_t x = 0; x < n * n; x++) {
        size_t i = x / n, j = x % n;
        a[x] = (double)((i * 7 + j * 3) % 17) / 17.0 - 0.5;
        b[x] = (double)((i * 5 + j * 11) % 13) / 13.0 - 0.5;
    }
    uint64_t t0 = now_ns();
    for (uint64_t r = 0; r < m; r++) {
        __asm__ volatile("" : : "r"(a), "r"(b), "r"(c) : "memory");
        multiply(n, a, b, c);
        __asm__ volatile("" : : "r"(c) : "memory");
    }
    uint64_t t1 = now_ns();
    double sum = 0.0;
    for (size_t x = 0; x < n * n; x++) sum += c[x];
    printf("multiplies %llu\nelapsed_ns %llu\nchecksum %.17g\n", (unsigned long long)m,
           (unsigned long long)(t1 - t0), sum);
    return 0;
}
"#;

const FORKEXEC: &str = r#"
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

/* usage: forkexec COUNT CPU PROGRAM [ARGS...] */
int main(int argc, char **argv) {
    if (argc < 4) return 2;
    long count = atol(argv[1]);
    pin(atoi(argv[2]));
    uint64_t t0 = now_ns();
    for (long i = 0; i < count; i++) {
        pid_t pid = fork();
        if (pid < 0) { perror("fork"); return 1; }
        if (pid == 0) {
            int null = open("/dev/null", O_WRONLY);
            if (null >= 0) dup2(null, 1);
            execv(argv[3], argv + 3);
            _exit(127);
        }
        int status;
        if (waitpid(pid, &status, 0) != pid) { perror("waitpid"); return 1; }
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "child %ld: %s ended with status %d\n", i, argv[3], status);
            return 1;
        }
    }
    uint64_t t1 = now_ns();
    printf("count %ld\nelapsed_ns %llu\n", count, (unsigned long long)(t1 - t0));
    return 0;
}
"#;

/// The compiled programs.
#[derive(Debug, Clone)]
pub struct CLoops {
    pub pi: PathBuf,
    /// `-O3`, for the instruction set of schedlab's build (x86-64's
    /// baseline: SSE2, as ours).
    pub matmul: PathBuf,
    /// `-O3 -march=native`: this CPU's widest vectors (AVX), which a
    /// portable build of schedlab does not use.
    pub matmul_native: PathBuf,
    pub forkexec: PathBuf,
    /// `cc --version`'s first line.
    pub compiler: String,
}

/// Compile the programs into `dir`. Without `-ffp-contract=off` GCC fuses
/// multiply-adds at `-march=native`, a different arithmetic (the checksum
/// moves), so both matmul builds keep every product and sum as ours does.
/// Err: why not (the compiler's complaint).
pub fn compile(dir: &Path) -> Result<CLoops, String> {
    let version = exec::run(Command::new("cc").arg("--version"), Duration::from_secs(30))
        .map_err(|e| format!("{e:#}"))?;
    version.check("cc --version")?;
    let build = |name: &str, body: &str, flags: &[&str]| -> Result<PathBuf, String> {
        let src = dir.join(format!("{name}.c"));
        let bin = dir.join(name);
        std::fs::write(&src, format!("{COMMON}{body}"))
            .map_err(|e| format!("writing {}: {e}", src.display()))?;
        let mut cmd = Command::new("cc");
        cmd.args(flags).arg("-o").arg(&bin).arg(&src);
        let ran = exec::run(&mut cmd, Duration::from_secs(120)).map_err(|e| format!("{e:#}"))?;
        ran.check(&format!("cc {} {name}.c", flags.join(" ")))?;
        Ok(bin)
    };
    Ok(CLoops {
        pi: build("pi", PI, &["-O2", "-lm"])?,
        matmul: build("matmul", MATMUL, &MATMUL_FLAGS)?,
        matmul_native: build("matmul_native", MATMUL, &MATMUL_NATIVE_FLAGS)?,
        forkexec: build("forkexec", FORKEXEC, &["-O2"])?,
        compiler: version
            .stdout
            .lines()
            .next()
            .unwrap_or("cc")
            .trim()
            .to_string(),
    })
}

/// The matmul reference: the compiler's best at our instruction set.
pub const MATMUL_FLAGS: [&str; 2] = ["-O3", "-ffp-contract=off"];
/// The same with this CPU's vectors.
pub const MATMUL_NATIVE_FLAGS: [&str; 3] = ["-O3", "-march=native", "-ffp-contract=off"];

/// Parse `key value` lines into numbers.
pub fn parse_figures(text: &str) -> Result<BTreeMap<String, f64>, String> {
    let mut out = BTreeMap::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let mut cols = line.split_whitespace();
        let (Some(k), Some(v), None) = (cols.next(), cols.next(), cols.next()) else {
            return Err(format!("unexpected line from a C loop: {line:?}"));
        };
        let v: f64 = v
            .parse()
            .map_err(|_| format!("unexpected value in a C loop's line {line:?}"))?;
        out.insert(k.to_string(), v);
    }
    Ok(out)
}

/// Run a compiled program with `args` (under `timeout`) and return its
/// figures, checking that `keys` are among them.
pub fn run(
    program: &Path,
    args: &[String],
    keys: &[&str],
    timeout: Duration,
) -> Result<BTreeMap<String, f64>, String> {
    let name = program
        .file_name()
        .map_or_else(|| "C loop".into(), |n| n.to_string_lossy().into_owned());
    let ran = exec::run(Command::new(program).args(args), timeout)
        .context("running a C loop")
        .map_err(|e| format!("{e:#}"))?;
    ran.check(&name)?;
    let figures = parse_figures(&ran.stdout)?;
    for k in keys {
        if !figures.contains_key(*k) {
            return Err(format!("{name} printed no {k}"));
        }
    }
    Ok(figures)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_are_key_value_lines() {
        let f = parse_figures("iterations 1000\nelapsed_ns 2500\nerror 0.00099999975\n").unwrap();
        assert_eq!(f["iterations"], 1000.0);
        assert_eq!(f["error"], 0.00099999975);
        assert!(parse_figures("iterations\n").is_err());
        assert!(parse_figures("a b c\n").is_err());
        assert!(parse_figures("a b\n").is_err());
    }

    /// The C loops compute what the Rust workloads compute, bit for bit.
    #[test]
    fn c_loops_match_the_workloads() {
        if !crate::testing::require_tool(exec::in_path("cc"), "cc not found (apt-get install gcc)")
        {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let c = compile(dir.path()).unwrap();
        let t = Duration::from_secs(60);
        // Over two blocks, so that the block sums matter.
        let n = crate::workload::pi::BLOCK + 12_345;
        let f = run(&c.pi, &[n.to_string(), "-1".into()], &["error"], t).unwrap();
        let mut series = crate::workload::pi::PiSeries::new();
        series.advance(n);
        assert_eq!(f["iterations"], n as f64);
        assert_eq!(f["error"], series.error());

        let (size, mults) = (37usize, 3u64);
        let f = run(
            &c.matmul,
            &[size.to_string(), mults.to_string(), "0".into()],
            &["checksum"],
            t,
        )
        .unwrap();
        let (a, b) = (
            crate::workload::matmul::matrix_a(size),
            crate::workload::matmul::matrix_b(size),
        );
        let mut prod = vec![0.0; size * size];
        crate::workload::matmul::multiply(size, &a, &b, &mut prod);
        assert_eq!(f["checksum"], prod.iter().sum::<f64>());

        let f = run(
            &c.forkexec,
            &["3".into(), "-1".into(), "/bin/true".into()],
            &["elapsed_ns"],
            t,
        )
        .unwrap();
        assert_eq!(f["count"], 3.0);
        let e = run(
            &c.forkexec,
            &["1".into(), "-1".into(), "/bin/false".into()],
            &[],
            t,
        )
        .unwrap_err();
        assert!(e.contains("ended with status"), "{e}");
    }
}
