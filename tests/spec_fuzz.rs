//! Adversarial specs against the spec loader and validator
//! (`schedlab::spec::load`) and the planner (`schedlab::plan::expand`):
//! random TOML built from the real key set with wrong types, out-of-range,
//! huge, negative and non-finite numbers, empty arrays, unicode and control
//! characters, deep nesting, duplicate keys and random bytes, plus random
//! `--set KEY=VALUE` overrides. Nothing may panic; every refusal must name a
//! key or say where; every accepted spec must expand to a bounded number of
//! runs with unique keys.
//!
//! Quick by default (part of `cargo test --release`). Longer:
//!
//! ```sh
//! SPEC_FUZZ_SECONDS=600 cargo test --release --test spec_fuzz -- --nocapture   # 10 minutes
//! PROPTEST_CASES=100000 cargo test --release --test spec_fuzz -- --nocapture   # a case count
//! SPEC_FUZZ_SEED=123 …                                                          # replay a seed
//! ```

use std::cell::Cell;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};
use schedlab::spec::{self, Spec, SpecError};

// ---------------------------------------------------------------- keys

const TOP: &[&str] = &[
    "name",
    "description",
    "repetitions",
    "order",
    "seed",
    "timeout_s",
    "cooldown_s",
    "workdir",
    "scale",
];
const MATRIX: &[&str] = &[
    "policy",
    "workload",
    "processes",
    "priorities",
    "cpus",
    "rt_runtime_us",
];
const WORKLOAD: &[&str] = &[
    "kind",
    "duration_s",
    "iterations",
    "bytes",
    "chunk_bytes",
    "sync",
    "rounds",
    "n",
    "multiplies",
    "hashes",
    "file_bytes",
    "block_bytes",
    "queue_depth",
    "read_pct",
    "direct",
];
const PRIORITIES: &[&str] = &["mode", "nice", "rt_priority", "weight"];
const DEADLINE: &[&str] = &["runtime_us", "deadline_us", "period_us"];
const HOG: &[&str] = &["policy", "rt_priority", "cpus"];
const WRR: &[&str] = &["quantum_ms", "mechanism"];
const WORKLOAD_NAMES: &[&str] = &[
    "pi", "copy", "mixed", "matmul", "hash", "aio", "w", "big", "x;y", "é", "",
];
const PRIORITY_NAMES: &[&str] = &[
    "uniform",
    "spread",
    "nonuniform",
    "mine",
    "weights",
    "a=b",
    "",
];

/// Words the validator knows, so that many cases get past the first check.
const WORDS: &[&str] = &[
    "other",
    "batch",
    "idle",
    "fifo",
    "rr",
    "deadline",
    "wrr",
    "OTHER",
    "pi",
    "copy",
    "mixed",
    "matmul",
    "hash",
    "aio",
    "uniform",
    "spread",
    "nonuniform",
    "list",
    "weights",
    "mine",
    "all",
    "0",
    "1",
    "0-1",
    "0,1",
    "1-0",
    "0-1023",
    "0-1024",
    "0-4294967295",
    "0-18446744073709551615",
    "99999999999999999999",
    "-1",
    "auto",
    "signals",
    "shuffled",
    "sequential",
    "none",
    "fsync_end",
    "fsync_each",
    "direct",
    "/tmp",
    "",
    " ",
    "\u{0}",
    "\u{7}\u{1b}[31m",
    "π≈3.14",
    "💥",
    "a;b=c",
];

const INTS: &[i64] = &[
    0,
    1,
    2,
    -1,
    -20,
    19,
    20,
    99,
    100,
    1000,
    1001,
    4096,
    4097,
    8192,
    8193,
    10_000,
    10_001,
    100_000,
    100_001,
    950_000,
    1_000_000,
    4_000_000,
    4_000_001,
    1_000_000_000,
    1_000_000_001,
    67_108_864,
    1 << 40,
    (1 << 40) + 1,
    i32::MAX as i64,
    i32::MIN as i64,
    u32::MAX as i64,
    i64::MAX,
    i64::MIN,
];

const FLOATS: &[f64] = &[
    0.0,
    -0.0,
    0.01,
    0.1,
    0.099,
    1.0,
    1e-300,
    5e-324,
    604_800.0,
    604_800.1,
    1000.0,
    1000.1,
    10_000.0,
    1e308,
    -1.0,
    f64::NAN,
    f64::INFINITY,
    f64::NEG_INFINITY,
    f64::MAX,
    f64::MIN_POSITIVE,
];

// ---------------------------------------------------------------- values

fn arb_string() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => proptest::sample::select(WORDS).prop_map(str::to_string),
        1 => any::<String>(),
        1 => "[\\x00-\\x1f\\x7f;=\\[\\]{}\"'\\\\#. a-z0-9-]{0,12}",
        1 => (0usize..=1025, 0usize..=1100).prop_map(|(a, b)| format!("{a}-{b}")),
        1 => proptest::collection::vec(0usize..3000, 1..6).prop_map(|v| {
            v.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(",")
        }),
    ]
}

fn arb_int() -> impl Strategy<Value = i64> {
    prop_oneof![
        3 => proptest::sample::select(INTS),
        2 => -5i64..=5,
        2 => 0i64..=12_000,
        1 => any::<i64>(),
    ]
}

fn arb_float() -> impl Strategy<Value = f64> {
    prop_oneof![
        3 => proptest::sample::select(FLOATS),
        2 => 0.0f64..2.0,
        1 => any::<f64>(),
    ]
}

fn leaf() -> impl Strategy<Value = toml::Value> {
    prop_oneof![
        3 => arb_int().prop_map(toml::Value::Integer),
        2 => arb_float().prop_map(toml::Value::Float),
        3 => arb_string().prop_map(toml::Value::String),
        1 => any::<bool>().prop_map(toml::Value::Boolean),
        1 => Just(toml::Value::Datetime("1979-05-27T07:32:00Z".parse().unwrap())),
    ]
}

/// Any value, arrays and inline tables nested a few levels.
fn any_value() -> impl Strategy<Value = toml::Value> {
    leaf().prop_recursive(4, 24, 6, |inner| {
        prop_oneof![
            3 => proptest::collection::vec(inner.clone(), 0..6).prop_map(toml::Value::Array),
            1 => proptest::collection::btree_map(
                prop_oneof![proptest::sample::select(MATRIX).prop_map(str::to_string), arb_string()],
                inner,
                0..4
            )
            .prop_map(|m| toml::Value::Table(m.into_iter().collect())),
        ]
    })
}

/// A value of about the right shape for most keys (a list of strings or
/// integers, a number, a word), else anything.
fn value_for(section: &'static str, key: &'static str, noisy: bool) -> BoxedStrategy<toml::Value> {
    let valid: &'static [&'static str] = match (section, key) {
        ("hog", "policy") => &["fifo", "rr", "other"],
        (_, "policy") => &["other", "batch", "idle", "fifo", "rr", "deadline", "wrr"],
        (_, "workload" | "kind") => &["pi", "copy", "mixed", "matmul", "hash", "aio", "w"],
        (_, "priorities" | "mode") => {
            &["uniform", "spread", "nonuniform", "list", "weights", "mine"]
        }
        (_, "cpus") => &["all", "0", "1", "0-1", "0,1"],
        (_, "order") => &["shuffled", "sequential"],
        (_, "sync") => &["none", "fsync_end", "fsync_each", "direct"],
        (_, "mechanism") => &["auto", "ext", "fifo", "signals"],
        _ => &["x"],
    };
    let word = move || {
        prop_oneof![
            4 => proptest::sample::select(valid).prop_map(str::to_string),
            1 => arb_string(),
        ]
    };
    let words = move || {
        proptest::collection::vec(word().prop_map(toml::Value::String), 0..5)
            .prop_map(toml::Value::Array)
    };
    let ints = || {
        proptest::collection::vec(arb_int().prop_map(toml::Value::Integer), 0..5)
            .prop_map(toml::Value::Array)
    };
    let small =
        |lo: i64, hi: i64| prop_oneof![3 => lo..=hi, 1 => arb_int()].prop_map(toml::Value::Integer);
    let typed: BoxedStrategy<toml::Value> = match (section, key) {
        ("hog", "policy" | "cpus") => word().prop_map(toml::Value::String).boxed(),
        ("hog", "rt_priority") => small(1, 99).boxed(),
        (_, "policy" | "workload" | "priorities" | "cpus") => words().boxed(),
        (_, "repetitions") => small(1, 5).boxed(),
        (_, "read_pct") => small(0, 100).boxed(),
        (_, "queue_depth") => small(1, 64).boxed(),
        (_, "n") => small(1, 300).boxed(),
        (_, "iterations" | "bytes" | "hashes" | "rounds" | "multiplies") => {
            small(1, 100_000).boxed()
        }
        (_, "processes" | "rt_runtime_us") => prop_oneof![
            3 => ints(),
            1 => (1i64..=200, 1i64..=200).prop_map(|(a, n)| {
                toml::Value::Array((a..a + n).map(toml::Value::Integer).collect())
            }),
        ]
        .boxed(),
        (_, "nice" | "weight" | "rt_priority") => {
            prop_oneof![arb_int().prop_map(toml::Value::Integer), ints()].boxed()
        }
        (_, "timeout_s" | "cooldown_s" | "scale" | "duration_s" | "quantum_ms") => prop_oneof![
            3 => arb_float().prop_map(toml::Value::Float),
            1 => arb_int().prop_map(toml::Value::Integer),
        ]
        .boxed(),
        (_, "direct") => any::<bool>().prop_map(toml::Value::Boolean).boxed(),
        (_, "order" | "kind" | "sync" | "mode" | "mechanism") => {
            word().prop_map(toml::Value::String).boxed()
        }
        (_, "name" | "description" | "workdir") => {
            arb_string().prop_map(toml::Value::String).boxed()
        }
        (_, "runtime_us") => prop_oneof![
            arb_int().prop_map(toml::Value::Integer),
            Just(toml::Value::String("auto".into())),
            arb_float().prop_map(toml::Value::Float),
        ]
        .boxed(),
        _ => arb_int().prop_map(toml::Value::Integer).boxed(),
    };
    if noisy {
        prop_oneof![30 => typed, 1 => any_value()].boxed()
    } else {
        typed
    }
}

/// A table of some of `keys` (and sometimes a key that is not one).
fn table_of(
    section: &'static str,
    keys: &'static [&'static str],
    noisy: bool,
) -> BoxedStrategy<toml::Table> {
    let entry = proptest::sample::select(keys)
        .prop_flat_map(move |k| (Just(k.to_string()), value_for(section, k, noisy)));
    let stray = (arb_string(), any_value());
    let stray_weight = if noisy { 1 } else { 0 };
    proptest::collection::vec(
        prop_oneof![60 => entry, stray_weight => stray],
        0..keys.len().min(7) + 1,
    )
    .prop_map(|v| v.into_iter().collect())
    .boxed()
}

/// Named sub-tables (`[workloads.NAME]`, `[priorities.NAME]`).
fn named_tables(
    section: &'static str,
    names: &'static [&'static str],
    keys: &'static [&'static str],
    noisy: bool,
) -> BoxedStrategy<toml::Table> {
    proptest::collection::vec(
        (
            prop_oneof![4 => proptest::sample::select(names).prop_map(str::to_string), 1 => arb_string()],
            table_of(section, keys, noisy),
        ),
        0..4,
    )
    .prop_map(|v| {
        v.into_iter()
            .map(|(n, t)| (n, toml::Value::Table(t)))
            .collect()
    })
    .boxed()
}

/// A whole spec as a TOML table: top-level keys and the sections. Noisy
/// specs have a value of any type here and there and stray keys; the others
/// have values of the right type (in or out of range), to reach the checks
/// after parsing.
fn spec_table() -> impl Strategy<Value = toml::Table> {
    prop_oneof![3 => spec_table_of(false), 2 => spec_table_of(true)]
}

fn spec_table_of(noisy: bool) -> impl Strategy<Value = toml::Table> {
    (
        table_of("", TOP, noisy),
        proptest::option::weighted(0.9, table_of("matrix", MATRIX, noisy)),
        named_tables("workloads", WORKLOAD_NAMES, WORKLOAD, noisy),
        named_tables("priorities", PRIORITY_NAMES, PRIORITIES, noisy),
        proptest::option::weighted(0.2, table_of("deadline", DEADLINE, noisy)),
        proptest::option::weighted(0.2, table_of("hog", HOG, noisy)),
        proptest::option::weighted(0.2, table_of("wrr", WRR, noisy)),
    )
        .prop_map(
            |(mut top, matrix, workloads, priorities, deadline, hog, wrr)| {
                let mut put = |k: &str, t: Option<toml::Table>| {
                    if let Some(t) = t {
                        top.insert(k.into(), toml::Value::Table(t));
                    }
                };
                put("matrix", matrix);
                put("workloads", (!workloads.is_empty()).then_some(workloads));
                put("priorities", (!priorities.is_empty()).then_some(priorities));
                put("deadline", deadline);
                put("hog", hog);
                put("wrr", wrr);
                top
            },
        )
}

/// What is done to the rendered TOML text before it is loaded.
#[derive(Debug, Clone)]
enum Mutation {
    None,
    /// Insert text (random characters, bytes made text) at a fraction of the length.
    Insert(f64, String),
    /// Repeat a line: duplicate keys and tables.
    DuplicateLine(f64),
    /// Cut the text short.
    Truncate(f64),
    /// Append a key whose value is arrays or inline tables nested this deep.
    DeepNesting(usize, bool),
    /// Replace the text with this.
    Replace(String),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        16 => Just(Mutation::None),
        2 => (0.0f64..1.0, prop_oneof![
            any::<String>(),
            proptest::collection::vec(any::<u8>(), 0..16)
                .prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
            Just("\n[matrix]\n".to_string()),
            Just("\nname = \"dup\"\n".to_string()),
            Just("\n[[workloads]]\n".to_string()),
            Just("\"\"\"".to_string()),
        ]).prop_map(|(at, s)| Mutation::Insert(at, s)),
        2 => (0.0f64..1.0).prop_map(Mutation::DuplicateLine),
        1 => (0.0f64..1.0).prop_map(Mutation::Truncate),
        1 => (1usize..3000, any::<bool>()).prop_map(|(d, arr)| Mutation::DeepNesting(d, arr)),
        1 => prop_oneof![
            any::<String>(),
            "[a-z_.=\\[\\]\"{} 0-9\n,-]{0,80}",
        ].prop_map(Mutation::Replace),
    ]
}

/// Byte index at fraction `at` of `s`, moved back to a char boundary.
fn boundary(s: &str, at: f64) -> usize {
    let mut i = ((s.len() as f64) * at) as usize;
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i.min(s.len())
}

fn apply(text: String, m: &Mutation) -> String {
    match m {
        Mutation::None => text,
        Mutation::Insert(at, s) => {
            let i = boundary(&text, *at);
            format!("{}{s}{}", &text[..i], &text[i..])
        }
        Mutation::DuplicateLine(at) => {
            let lines: Vec<&str> = text.lines().collect();
            if lines.is_empty() {
                return text;
            }
            let k = ((lines.len() as f64) * at) as usize % lines.len();
            let mut out: Vec<&str> = lines.clone();
            out.insert(k, lines[k]);
            out.join("\n")
        }
        Mutation::Truncate(at) => text[..boundary(&text, *at)].to_string(),
        Mutation::DeepNesting(d, arr) => {
            let (open, close) = if *arr { ("[", "]") } else { ("{a=", "}") };
            format!("deep = {}1{}\n{text}", open.repeat(*d), close.repeat(*d))
        }
        Mutation::Replace(s) => s.clone(),
    }
}

const OVERRIDE_KEYS: &[&str] = &[
    "name",
    "repetitions",
    "order",
    "seed",
    "timeout_s",
    "cooldown_s",
    "scale",
    "workdir",
    "matrix.policy",
    "matrix.workload",
    "matrix.processes",
    "matrix.priorities",
    "matrix.cpus",
    "matrix.rt_runtime_us",
    "workloads.pi.iterations",
    "workloads.pi.duration_s",
    "workloads.copy.bytes",
    "workloads.copy.chunk_bytes",
    "workloads.aio.queue_depth",
    "workloads.w.kind",
    "priorities.mine.mode",
    "priorities.mine.weight",
    "deadline.runtime_us",
    "hog.cpus",
    "wrr.quantum_ms",
    "matrix",
    "workloads",
    "matrix.policy.x",
    "",
    ".",
    "a..b",
];

/// `--set KEY=VALUE` strings: a real or odd key, and a TOML value or any text.
fn overrides() -> impl Strategy<Value = Vec<String>> {
    let value = prop_oneof![
        3 => any_value().prop_map(|v| {
            // Render the value the way a user would type it.
            let mut t = toml::Table::new();
            t.insert("v".into(), v);
            toml::to_string(&t)
                .map(|s| s.trim().trim_start_matches("v = ").to_string())
                .unwrap_or_default()
        }),
        1 => any::<String>(),
        1 => Just(String::new()),
    ];
    let key = prop_oneof![
        4 => proptest::sample::select(OVERRIDE_KEYS).prop_map(str::to_string),
        1 => any::<String>(),
    ];
    let assignment = prop_oneof![
        8 => (key, value).prop_map(|(k, v)| format!("{k}={v}")),
        1 => any::<String>(),
    ];
    prop_oneof![
        3 => Just(Vec::new()),
        2 => proptest::collection::vec(assignment, 1..4),
    ]
}

#[derive(Debug, Clone)]
struct Case {
    text: String,
    overrides: Vec<String>,
}

fn case() -> impl Strategy<Value = Case> {
    (spec_table(), mutation(), overrides()).prop_map(|(table, m, overrides)| {
        let text = toml::to_string(&table).unwrap_or_default();
        Case {
            text: apply(text, &m),
            overrides,
        }
    })
}

// ---------------------------------------------------------------- property

#[derive(Default)]
struct Tally {
    cases: Cell<u64>,
    accepted: Cell<u64>,
    parse_errors: Cell<u64>,
    invalid: Cell<u64>,
    runs_max: Cell<usize>,
}

fn bump(c: &Cell<u64>) {
    c.set(c.get() + 1);
}

/// Load a case and check everything that must hold of the outcome.
fn check(c: &Case, tally: &Tally) -> Result<(), TestCaseError> {
    bump(&tally.cases);
    match spec::load(&c.text, "fuzz.toml", &c.overrides) {
        Err(e) => {
            let shown = e.to_string();
            if tally.cases.get() <= env_u64("SPEC_FUZZ_SHOW").unwrap_or(0) {
                eprintln!("--- {:?}\n{}\n=> {shown}", c.overrides, c.text);
            }
            match &e {
                SpecError::Parse { origin, message } => {
                    bump(&tally.parse_errors);
                    prop_assert!(!origin.is_empty(), "{shown}");
                    prop_assert!(!message.trim().is_empty(), "empty parse error: {e:?}");
                    // Says where: a line and column from the text, or the
                    // key whose value does not fit.
                    let says_where = message.contains("line ")
                        || message.contains('`')
                        || message.contains("key")
                        || message.contains("field");
                    prop_assert!(says_where, "parse error without a place: {message}");
                }
                SpecError::Invalid {
                    origin,
                    key,
                    message,
                } => {
                    bump(&tally.invalid);
                    prop_assert!(!origin.is_empty(), "{shown}");
                    prop_assert!(
                        !key.trim().is_empty() || !c.overrides.is_empty(),
                        "no key: {e:?}"
                    );
                    prop_assert!(!message.trim().is_empty(), "empty message: {e:?}");
                }
            }
        }
        Ok(s) => {
            bump(&tally.accepted);
            check_accepted(&s, tally)?;
        }
    }
    Ok(())
}

fn check_accepted(s: &Spec, tally: &Tally) -> Result<(), TestCaseError> {
    let levels = s.rt_runtime_us.len().max(1);
    let expected = s.repetitions as u64
        * (s.policies.len()
            * s.workloads.len()
            * s.processes.len()
            * s.priorities.len()
            * s.cpus.len()
            * levels) as u64;
    prop_assert!(
        expected <= schedlab::spec::MAX_RUNS,
        "accepted a spec of {expected} runs"
    );
    let runs = schedlab::plan::expand(s, s.seed.unwrap_or(7));
    prop_assert_eq!(runs.len() as u64, expected);
    tally.runs_max.set(tally.runs_max.get().max(runs.len()));
    let mut keys: Vec<&str> = runs.iter().map(|r| r.key.as_str()).collect();
    keys.sort_unstable();
    let n = keys.len();
    keys.dedup();
    prop_assert_eq!(keys.len(), n, "two runs share a key");
    // What `plan` and `run` compute from every run must not panic either.
    let rates = schedlab::workload::Rates {
        pi_iter_per_s: 1e8,
        hash_per_s: 1e5,
        flops_per_s: 1e9,
        copy_bytes_per_s: 1e9,
        wake_round_trip_s: 10e-6,
    };
    let refs: Vec<&schedlab::plan::Run> = runs.iter().take(64).collect();
    for r in &refs {
        let _ = r.label();
        let _ = r.workload.workload.disk_bytes(r.processes);
        let _ = r.workload.workload.memory_bytes();
        let _ = schedlab::campaign::run_need(s, r);
        let _ = r.cpus.resolve(&[0, 1]);
    }
    let est = schedlab::plan::estimates(s, &refs, 2, &rates, 1_000_000);
    prop_assert!(est.iter().all(|e| !e.is_nan()), "NaN estimate: {est:?}");
    // The spec round-trips through its stored form.
    let json = serde_json::to_string(s).unwrap();
    let back: Spec = serde_json::from_str(&json).unwrap();
    let _ = back;
    Ok(())
}

// ---------------------------------------------------------------- runner

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

/// Run `check` over generated cases: `PROPTEST_CASES` of them (default
/// 300), or batches until `SPEC_FUZZ_SECONDS` have passed.
#[test]
fn malformed_specs_never_panic_and_errors_say_where() {
    let seed = env_u64("SPEC_FUZZ_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
    });
    let seconds = env_u64("SPEC_FUZZ_SECONDS");
    let batch = env_u64("PROPTEST_CASES").unwrap_or(if seconds.is_some() { 2000 } else { 300 });
    eprintln!(
        "spec_fuzz: seed {seed} (SPEC_FUZZ_SEED={seed} replays), {batch} cases{}",
        match seconds {
            Some(s) => format!(" per batch for {s} s"),
            None => String::new(),
        }
    );
    let tally = Tally::default();
    let start = Instant::now();
    let mut round = 0u64;
    loop {
        let mut bytes = [0u8; 32];
        bytes[..8].copy_from_slice(&seed.to_le_bytes());
        bytes[8..16].copy_from_slice(&round.to_le_bytes());
        let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &bytes);
        let config = Config {
            cases: batch as u32,
            failure_persistence: None,
            max_shrink_iters: 2000,
            ..Config::default()
        };
        let mut runner = TestRunner::new_with_rng(config, rng);
        if let Err(e) = runner.run(&case(), |c| check(&c, &tally)) {
            panic!("spec_fuzz: seed {seed}, round {round}: {e}");
        }
        round += 1;
        match seconds {
            Some(s) if start.elapsed() < Duration::from_secs(s) => continue,
            _ => break,
        }
    }
    eprintln!(
        "spec_fuzz: {} specs tried in {:.1} s ({} accepted, {} parse errors, {} invalid), 0 panics; largest accepted plan {} runs",
        tally.cases.get(),
        start.elapsed().as_secs_f64(),
        tally.accepted.get(),
        tally.parse_errors.get(),
        tally.invalid.get(),
        tally.runs_max.get()
    );
}

// ---------------------------------------------------------------- regressions
// Each found by the generator above (or by reading the validator while
// writing it) and fixed in src/spec/.

fn load(text: &str) -> Result<Spec, SpecError> {
    spec::load(text, "r.toml", &[])
}

fn invalid_key(e: SpecError) -> String {
    match e {
        SpecError::Invalid { key, .. } => key,
        e => panic!("not a key error: {e}"),
    }
}

/// A CPU range was listed in full before its size was checked:
/// "0-4294967295" tried to allocate 32 GiB, "0-18446744073709551615" ran
/// out of memory.
#[test]
fn a_huge_cpu_range_is_refused_without_listing_it() {
    for cpus in [
        "0-4294967295",
        "0-18446744073709551615",
        "1-1025",
        "0-1023,2000-2999",
    ] {
        let t0 = Instant::now();
        let e = load(&format!("[matrix]\ncpus = [\"{cpus}\"]\n")).unwrap_err();
        assert!(e.to_string().contains("more than 1024 CPUs"), "{e}");
        assert_eq!(invalid_key(e), "matrix.cpus");
        assert!(t0.elapsed() < Duration::from_secs(1));
        let e = load(&format!("[hog]\ncpus = \"{cpus}\"\n")).unwrap_err();
        assert_eq!(invalid_key(e), "hog.cpus");
    }
    // Repeated ranges stay bounded as well; 1024 CPUs are still fine.
    let many = vec!["0-1023"; 5000].join(",");
    assert!(load(&format!("[matrix]\ncpus = [\"{many}\"]\n")).is_ok());
    assert!(load("[matrix]\ncpus = [\"0-1023\"]\n").is_ok());
}

/// A campaign of 100,000 repetitions × 10,000 process counts (10⁹ runs) was
/// accepted and then listed in memory by `plan::expand`.
#[test]
fn a_matrix_of_absurdly_many_runs_is_refused() {
    let counts: Vec<String> = (1..=10_000).map(|p| p.to_string()).collect();
    let text = format!(
        "repetitions = 100000\n[matrix]\nprocesses = [{}]\n",
        counts.join(",")
    );
    let t0 = Instant::now();
    let e = load(&text).unwrap_err();
    let m = e.to_string();
    assert!(
        m.contains("1000000000 runs") && m.contains("100000 repetitions × 10000 process counts"),
        "{m}"
    );
    assert_eq!(invalid_key(e), "matrix");
    assert!(t0.elapsed() < Duration::from_secs(2));
    // At the limit is fine.
    let s = load("repetitions = 100000\n").unwrap();
    assert_eq!(schedlab::plan::expand(&s, 1).len(), 100_000);
    let e = load("repetitions = 50001\n[matrix]\nprocesses = [1, 2]\n").unwrap_err();
    assert!(e.to_string().contains("100002 runs"), "{e}");
}

/// Names are parts of run keys: a workload named "w;processes=1;priorities=u"
/// beside a priority mode named "u;processes=2;priorities=x" gave two
/// different runs the same key (the second never ran: its key was taken).
#[test]
fn names_that_could_make_two_runs_share_a_key_are_refused() {
    let text = r#"
repetitions = 1
[matrix]
workload = ["w;processes=1;priorities=u", "w"]
processes = [1, 2]
priorities = ["x", "u;processes=2;priorities=x"]
[workloads."w;processes=1;priorities=u"]
kind = "pi"
[workloads.w]
kind = "pi"
[priorities.x]
mode = "uniform"
[priorities."u;processes=2;priorities=x"]
mode = "uniform"
"#;
    let e = load(text).unwrap_err();
    assert!(e.to_string().contains("\";\""), "{e}");
    assert_eq!(invalid_key(e), "matrix.workload");
    let e = load("[matrix]\npriorities = [\"a=b\"]\n[priorities.\"a=b\"]\nmode = \"uniform\"\n")
        .unwrap_err();
    assert_eq!(invalid_key(e), "matrix.priorities");
    // Unicode and control characters are fine (they reach the terminal escaped).
    assert!(
        load("[matrix]\nworkload = [\"p\\u0007\"]\n[workloads.\"p\\u0007\"]\nkind = \"pi\"\n")
            .is_ok()
    );
    assert!(load("[matrix]\nworkload = [\"π\"]\n[workloads.\"π\"]\nkind = \"pi\"\n").is_ok());
}
