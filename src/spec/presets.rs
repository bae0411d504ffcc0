//! Built-in experiment specs, one per seed report (and the standard
//! benchmarks), shipped inside the binary. The `homework` preset's C
//! programs (`presets/homework/*.c`) are written into its spec here, each
//! as the `setup` of a command workload that compiles it.

/// A preset: its name, one line on what it reproduces, and its TOML.
pub struct Preset {
    pub name: &'static str,
    pub summary: &'static str,
    pub toml: &'static str,
    /// Traced wherever this user may trace ([`auto_trace`]), so that the
    /// report opens with pictures of what the scheduler did.
    pub traced_where_permitted: bool,
}

/// A command workload `[workloads.<name>-c]` running the C program
/// `presets/homework/<name>.c` with `args`; its `setup` writes the source
/// into the run's directory and compiles it with `cc` (after `$prep`, a
/// shell line); `$figures` is TOML text of its figures.
macro_rules! c_program {
    ($name:literal, $args:literal, $prep:literal, $figures:literal) => {
        concat!(
            "\n[workloads.",
            $name,
            "-c]\nkind = \"command\"\nargv = [\"sh\", \"-c\", \"exec ./",
            $name,
            " ",
            $args,
            "\"]\nsetup = [\"sh\", \"-c\", '''\n",
            $prep,
            "\ncat > ",
            $name,
            ".c <<'SCHEDLAB_C_SOURCE'\n",
            include_str!(concat!("../../presets/homework/", $name, ".c")),
            "SCHEDLAB_C_SOURCE\ncc -O2 -o ",
            $name,
            " ",
            $name,
            ".c\n''']\n",
            $figures
        )
    };
}

const HOMEWORK: &str = concat!(
    include_str!("../../presets/homework.toml"),
    c_program!("pi", "100000000", ":", ""),
    // Its rate beside the built-in copy's figure of the same name.
    c_program!(
        "rw",
        "1024000 1024",
        "head -c 1024000 /dev/urandom > input",
        "[workloads.rw-c.figures.mb_per_s]\nregex = 'MB/s ([0-9.]+)'\nunit = \"MB/s\"\n\
         better = \"higher\"\n"
    ),
);

pub const PRESETS: &[Preset] = &[
    Preset {
        name: "quick",
        summary: "a first look in about a minute: 2 and 4 CPU-bound processes on CPU 0 under OTHER, FIFO, RR",
        toml: include_str!("../../presets/quick.toml"),
        traced_where_permitted: true,
    },
    Preset {
        name: "policies",
        summary: "seed 000: pi / copy / mixed under OTHER, FIFO, RR with 5, 20, 200 processes, 10 repetitions",
        toml: include_str!("../../presets/policies.toml"),
        traced_where_permitted: false,
    },
    Preset {
        name: "priorities",
        summary: "seed 001: the same workloads with uniform and non-uniform priorities, 10, 50, 100 processes, 3 repetitions",
        toml: include_str!("../../presets/priorities.toml"),
        traced_where_permitted: false,
    },
    Preset {
        name: "rt-throttle",
        summary: "seed 004: aio throughput beside an RT CPU hog as sched_rt_runtime_us goes from 1,000,000 to 100,000 µs",
        toml: include_str!("../../presets/rt-throttle.toml"),
        traced_where_permitted: false,
    },
    Preset {
        name: "wrr-weights",
        summary: "seed 002: WRR weights 1..20 on one CPU (hashes in 30 s, time for 2M hashes) against CFS nice and DEADLINE",
        toml: include_str!("../../presets/wrr-weights.toml"),
        traced_where_permitted: false,
    },
    Preset {
        name: "wrr-classes",
        summary: "seed 003: WRR foreground 100 ms / background 10 ms slices on one CPU against CFS nice",
        toml: include_str!("../../presets/wrr-classes.toml"),
        traced_where_permitted: false,
    },
    Preset {
        name: "matmul",
        summary: "seed 003: matrix multiply n = 75/100/150 × 20..100 processes under NORMAL/FIFO/RR/WRR on one CPU",
        toml: include_str!("../../presets/matmul.toml"),
        traced_where_permitted: false,
    },
    Preset {
        name: "eevdf-slice",
        summary: "wake-up latency of a periodic task beside two CPU hogs on CPU 0 against its EEVDF slice, 0.1 to 10 ms (Linux 6.12+)",
        toml: include_str!("../../presets/eevdf-slice.toml"),
        traced_where_permitted: false,
    },
    Preset {
        name: "benchmarks",
        summary: "hackbench, perf bench sched messaging, cyclictest and stress-ng (Debian's packages) under OTHER, BATCH and FIFO on CPU 0",
        toml: include_str!("../../presets/benchmarks.toml"),
        traced_where_permitted: false,
    },
    Preset {
        name: "kernels",
        summary: "CFS (a Debian 6.1 guest) against EEVDF (a Debian 6.12 guest) and this machine: nice 0/5 hogs, periodic tasks, ping-pong on CPU 0",
        toml: include_str!("../../presets/kernels.toml"),
        traced_where_permitted: false,
    },
    Preset {
        name: "topology",
        summary: "a periodic task beside 8 fair CPU hogs, free on a guest of 2 sockets × 2 cores × 2 SMT threads with 2 NUMA nodes (Debian 6.12)",
        toml: include_str!("../../presets/topology.toml"),
        traced_where_permitted: false,
    },
    Preset {
        name: "homework",
        summary: "seed 000's CPU- and I/O-bound programs in C, compiled by setup with cc, beside the built-in pi and copy under OTHER, FIFO, RR",
        toml: HOMEWORK,
        traced_where_permitted: false,
    },
];

/// What a run or plan of preset `p` does about tracing, given the
/// overrides the user gave (`--trace` among them as `trace=true`) and
/// whether this process may trace ([`crate::sys::probe::trace_permission`]):
/// the override to add (`trace=true`) and the line to tell the user. A
/// `trace` the user set is left alone.
pub fn auto_trace(
    p: &Preset,
    overrides: &[String],
    permission: Result<(), String>,
) -> (Option<String>, Option<String>) {
    let set_by_user = overrides
        .iter()
        .any(|o| o.split_once('=').is_some_and(|(k, _)| k.trim() == "trace"));
    if !p.traced_where_permitted || set_by_user {
        return (None, None);
    }
    match permission {
        Ok(()) => (
            Some("trace=true".to_string()),
            Some(format!(
                "tracing every run: the {} preset traces where it may, so that the report opens with per-CPU \
                 timelines of what the scheduler did (--set trace=false turns it off)",
                p.name
            )),
        ),
        Err(why) => (
            None,
            Some(format!(
                "not tracing ({why}): the report opens with a chart instead of per-CPU timelines of what the \
                 scheduler did; sudo schedlab run --preset {} gives them",
                p.name
            )),
        ),
    }
}

pub fn find(name: &str) -> Option<&'static Preset> {
    PRESETS.iter().find(|p| p.name == name)
}

pub fn names() -> String {
    PRESETS
        .iter()
        .map(|p| p.name)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quick_traces_where_permitted_unless_the_user_says() {
        let quick = find("quick").unwrap();
        let (set, said) = auto_trace(quick, &[], Ok(()));
        assert_eq!(set.as_deref(), Some("trace=true"));
        assert!(said.unwrap().contains("--set trace=false"));
        let (set, said) = auto_trace(
            quick,
            &["repetitions=3".into()],
            Err("tracing needs root".into()),
        );
        assert_eq!(set, None);
        let said = said.unwrap();
        assert!(
            said.contains("tracing needs root")
                && said.contains("sudo schedlab run --preset quick"),
            "{said}"
        );
        // The user's own choice stands, and other presets are not traced.
        for own in ["trace=false", " trace = true"] {
            assert_eq!(auto_trace(quick, &[own.into()], Ok(())), (None, None));
        }
        assert_eq!(
            auto_trace(find("policies").unwrap(), &[], Ok(())),
            (None, None)
        );
        // The override is one the spec loader takes.
        let spec = crate::spec::load(quick.toml, "quick", &[set_or_default()]).unwrap();
        assert!(spec.trace);
    }

    fn set_or_default() -> String {
        auto_trace(find("quick").unwrap(), &[], Ok(())).0.unwrap()
    }

    #[test]
    fn every_preset_is_a_valid_spec() {
        for p in PRESETS {
            let spec = crate::spec::load(p.toml, p.name, &[])
                .unwrap_or_else(|e| panic!("{}: {e}", p.name));
            assert_eq!(spec.name, p.name);
        }
    }

    /// The homework preset carries each C program verbatim, in a setup
    /// that compiles it, and runs what it compiled.
    #[test]
    fn homework_carries_its_c_programs() {
        let spec: toml::Table = HOMEWORK.parse().unwrap();
        for (name, source) in [
            ("pi", include_str!("../../presets/homework/pi.c")),
            ("rw", include_str!("../../presets/homework/rw.c")),
        ] {
            let w = &spec["workloads"][&format!("{name}-c")];
            let setup = w["setup"][2].as_str().unwrap();
            assert!(setup.contains(source), "{name}.c is not in its setup");
            assert!(setup.ends_with(&format!("cc -O2 -o {name} {name}.c\n")));
            let argv = w["argv"][2].as_str().unwrap();
            assert!(argv.starts_with(&format!("exec ./{name} ")), "{argv}");
        }
    }
}
