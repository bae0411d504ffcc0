//! Built-in experiment specs, one per seed report, shipped inside the binary.

/// A preset: its name, one line on what it reproduces, and its TOML.
pub struct Preset {
    pub name: &'static str,
    pub summary: &'static str,
    pub toml: &'static str,
}

pub const PRESETS: &[Preset] = &[
    Preset {
        name: "quick",
        summary: "a first look in about two minutes: 2 and 4 CPU-bound processes on CPU 0 under OTHER, FIFO, RR",
        toml: include_str!("../../presets/quick.toml"),
    },
    Preset {
        name: "policies",
        summary: "seed 000: pi / copy / mixed under OTHER, FIFO, RR with 5, 20, 200 processes, 10 repetitions",
        toml: include_str!("../../presets/policies.toml"),
    },
    Preset {
        name: "priorities",
        summary: "seed 001: the same workloads with uniform and non-uniform priorities, 10, 50, 100 processes, 3 repetitions",
        toml: include_str!("../../presets/priorities.toml"),
    },
    Preset {
        name: "rt-throttle",
        summary: "seed 004: aio throughput beside an RT CPU hog as sched_rt_runtime_us goes from 1,000,000 to 100,000 µs",
        toml: include_str!("../../presets/rt-throttle.toml"),
    },
    Preset {
        name: "wrr-weights",
        summary: "seed 002: WRR weights 1..20 on one CPU (hashes in 30 s, time for 2M hashes) against CFS nice and DEADLINE",
        toml: include_str!("../../presets/wrr-weights.toml"),
    },
    Preset {
        name: "wrr-classes",
        summary: "seed 003: WRR foreground 100 ms / background 10 ms slices on one CPU against CFS nice",
        toml: include_str!("../../presets/wrr-classes.toml"),
    },
    Preset {
        name: "matmul",
        summary: "seed 003: matrix multiply n = 75/100/150 × 20..100 processes under NORMAL/FIFO/RR/WRR on one CPU",
        toml: include_str!("../../presets/matmul.toml"),
    },
    Preset {
        name: "eevdf-slice",
        summary: "wake-up latency of a periodic task beside two CPU hogs on CPU 0 against its EEVDF slice, 0.1 to 10 ms (Linux 6.12+)",
        toml: include_str!("../../presets/eevdf-slice.toml"),
    },
];

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
    fn every_preset_is_a_valid_spec() {
        for p in PRESETS {
            let spec = crate::spec::load(p.toml, p.name, &[])
                .unwrap_or_else(|e| panic!("{}: {e}", p.name));
            assert_eq!(spec.name, p.name);
        }
    }
}
