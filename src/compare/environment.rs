//! Where the two campaigns ran, field by field (host, kernel, CPU, HZ,
//! preemption, RT limits, sched_ext, schedlab version, …), and which
//! differences the user did not say they meant (`--expect`).

use serde::Serialize;

use crate::store::ReportEnvironment;

/// A field of the environment that a comparison looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EnvField {
    Host,
    Kernel,
    Cpu,
    Cpus,
    Hz,
    Preemption,
    RtLimits,
    RrTimeslice,
    SchedExt,
    Cgroup,
    Virtualisation,
    Schedlab,
}

impl EnvField {
    pub const ALL: [EnvField; 12] = [
        EnvField::Host,
        EnvField::Kernel,
        EnvField::Cpu,
        EnvField::Cpus,
        EnvField::Hz,
        EnvField::Preemption,
        EnvField::RtLimits,
        EnvField::RrTimeslice,
        EnvField::SchedExt,
        EnvField::Cgroup,
        EnvField::Virtualisation,
        EnvField::Schedlab,
    ];

    /// The name on the command line (`--expect kernel,hz`) and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            EnvField::Host => "host",
            EnvField::Kernel => "kernel",
            EnvField::Cpu => "cpu",
            EnvField::Cpus => "cpus",
            EnvField::Hz => "hz",
            EnvField::Preemption => "preemption",
            EnvField::RtLimits => "rt_limits",
            EnvField::RrTimeslice => "rr_timeslice",
            EnvField::SchedExt => "sched_ext",
            EnvField::Cgroup => "cgroup",
            EnvField::Virtualisation => "virtualisation",
            EnvField::Schedlab => "schedlab",
        }
    }

    /// What the field is, for help texts (`--expect`).
    pub fn description(self) -> &'static str {
        match self {
            EnvField::Host => "The machine (hostname)",
            EnvField::Kernel => "Kernel release",
            EnvField::Cpu => "CPU model",
            EnvField::Cpus => "CPUs online",
            EnvField::Hz => "Timer frequency",
            EnvField::Preemption => "Preemption model",
            EnvField::RtLimits => "sched_rt_runtime_us / sched_rt_period_us",
            EnvField::RrTimeslice => "sched_rr_timeslice_ms",
            EnvField::SchedExt => "sched_ext state",
            EnvField::Cgroup => "cgroup version",
            EnvField::Virtualisation => "Virtualisation",
            EnvField::Schedlab => "schedlab version",
        }
    }

    /// Words for tables.
    pub fn label(self) -> &'static str {
        match self {
            EnvField::Host => "host (hostname)",
            EnvField::Kernel => "kernel",
            EnvField::Cpu => "CPU",
            EnvField::Cpus => "CPUs online",
            EnvField::Hz => "HZ",
            EnvField::Preemption => "preemption",
            EnvField::RtLimits => "RT limit (sched_rt_runtime_us / period)",
            EnvField::RrTimeslice => "RR time slice (ms)",
            EnvField::SchedExt => "sched_ext state",
            EnvField::Cgroup => "cgroup",
            EnvField::Virtualisation => "virtualisation",
            EnvField::Schedlab => "schedlab version",
        }
    }

    pub fn parse(s: &str) -> Option<EnvField> {
        EnvField::ALL.into_iter().find(|f| f.name() == s.trim())
    }

    /// The comma-separated list of names, for messages.
    pub fn names() -> String {
        EnvField::ALL.map(|f| f.name()).join(", ")
    }

    /// The field's value in one environment (`sched_ext`: its recorded
    /// state, None where the kernel had none or it was not recorded).
    fn value(self, e: &ReportEnvironment, sched_ext: Option<&str>) -> String {
        let o = |v: Option<i64>| v.map_or_else(|| "unknown".into(), |x| x.to_string());
        match self {
            EnvField::Host => e.hostname.clone().unwrap_or_else(|| "unknown".into()),
            EnvField::Kernel => e.kernel_release.clone(),
            EnvField::Cpu => e.cpu_model.clone(),
            EnvField::Cpus => e.cpus_online.to_string(),
            EnvField::Hz => o(e.hz),
            EnvField::Preemption => e.preempt_model.clone(),
            EnvField::RtLimits => {
                format!("{} / {}", o(e.sched_rt_runtime_us), o(e.sched_rt_period_us))
            }
            EnvField::RrTimeslice => o(e.sched_rr_timeslice_ms),
            EnvField::SchedExt => sched_ext.unwrap_or("none recorded").to_string(),
            EnvField::Cgroup => e.cgroup_version.clone(),
            EnvField::Virtualisation => e.virtualization.clone(),
            EnvField::Schedlab => e.schedlab_version.clone(),
        }
    }
}

/// The environments of one side's runs with the sched_ext state of each
/// (indexed like `environments`).
#[derive(Debug, Clone, Copy)]
pub struct SideEnvironments<'a> {
    pub environments: &'a [ReportEnvironment],
    pub sched_ext: &'a [Option<String>],
}

impl SideEnvironments<'_> {
    /// The distinct values of a field over the side's environments, in
    /// order ("6.1.0, 6.2.0" when the runs were made in two).
    fn values(&self, f: EnvField) -> String {
        let mut seen: Vec<String> = Vec::new();
        for (i, e) in self.environments.iter().enumerate() {
            let v = f.value(e, self.sched_ext.get(i).and_then(|s| s.as_deref()));
            if !seen.contains(&v) {
                seen.push(v);
            }
        }
        if seen.is_empty() {
            "no runs".into()
        } else {
            seen.join(", ")
        }
    }
}

/// One field of the two environments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EnvRow {
    pub field: EnvField,
    pub baseline: String,
    pub candidate: String,
    pub differs: bool,
    /// Named by `--expect`: a difference the user meant.
    pub expected: bool,
}

impl EnvRow {
    /// A difference nobody said they meant.
    pub fn unexpected(&self) -> bool {
        self.differs && !self.expected
    }
}

/// Every field of the two sides' environments.
pub fn environment_rows(
    baseline: SideEnvironments<'_>,
    candidate: SideEnvironments<'_>,
    expected: &[EnvField],
) -> Vec<EnvRow> {
    EnvField::ALL
        .iter()
        .map(|&field| {
            let (b, c) = (baseline.values(field), candidate.values(field));
            EnvRow {
                field,
                differs: b != c,
                baseline: b,
                candidate: c,
                expected: expected.contains(&field),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(kernel: &str, hz: i64) -> ReportEnvironment {
        ReportEnvironment {
            id: 1,
            runs: 3,
            kernel_release: kernel.into(),
            cpu_model: "cpu".into(),
            cpus_online: 2,
            hz: Some(hz),
            preempt_model: "full".into(),
            sched_rt_runtime_us: Some(950_000),
            sched_rt_period_us: Some(1_000_000),
            sched_rr_timeslice_ms: Some(100),
            cgroup_version: "v2".into(),
            virtualization: "kvm".into(),
            schedlab_version: "0.1.0".into(),
            hostname: None,
            fair_base_slice_ns: None,
            guest_machine: None,
            guest_accel: None,
            topology: None,
            cpu_topology: None,
        }
    }

    #[test]
    fn differences_are_flagged_unless_expected() {
        let (a, b) = ([env("6.1", 250)], [env("6.2", 1000)]);
        let none: [Option<String>; 1] = [None];
        let ext = [Some("enabled".to_string())];
        let rows = environment_rows(
            SideEnvironments {
                environments: &a,
                sched_ext: &none,
            },
            SideEnvironments {
                environments: &b,
                sched_ext: &ext,
            },
            &[EnvField::Kernel],
        );
        let by = |f: EnvField| rows.iter().find(|r| r.field == f).unwrap();
        assert!(by(EnvField::Kernel).differs && !by(EnvField::Kernel).unexpected());
        assert!(by(EnvField::Hz).unexpected());
        assert_eq!(by(EnvField::Hz).baseline, "250");
        assert_eq!(by(EnvField::SchedExt).baseline, "none recorded");
        assert_eq!(by(EnvField::SchedExt).candidate, "enabled");
        assert!(by(EnvField::SchedExt).unexpected());
        assert!(!by(EnvField::Cpu).differs);
        assert_eq!(by(EnvField::RtLimits).baseline, "950000 / 1000000");
        let unexpected: Vec<&str> = rows
            .iter()
            .filter(|r| r.unexpected())
            .map(|r| r.field.name())
            .collect();
        assert_eq!(unexpected, ["hz", "sched_ext"]);
    }

    #[test]
    fn another_host_is_flagged_unless_expected() {
        let (mut a, mut b) = (env("6.1", 250), env("6.1", 250));
        a.hostname = Some("alpha".into());
        b.hostname = Some("beta".into());
        let none: [Option<String>; 1] = [None];
        let (a, b) = ([a], [b]);
        let rows = |expect: &[EnvField]| {
            environment_rows(
                SideEnvironments {
                    environments: &a,
                    sched_ext: &none,
                },
                SideEnvironments {
                    environments: &b,
                    sched_ext: &none,
                },
                expect,
            )
        };
        let host = |rows: &[EnvRow]| {
            rows.iter()
                .find(|r| r.field == EnvField::Host)
                .cloned()
                .unwrap()
        };
        let flagged = host(&rows(&[]));
        assert_eq!(
            (flagged.baseline.as_str(), flagged.candidate.as_str()),
            ("alpha", "beta")
        );
        assert!(flagged.unexpected());
        assert!(!host(&rows(&[EnvField::Host])).unexpected());
    }

    #[test]
    fn field_names_round_trip() {
        for f in EnvField::ALL {
            assert_eq!(EnvField::parse(f.name()), Some(f));
            assert_eq!(serde_json::to_value(f).unwrap(), f.name());
        }
        assert_eq!(EnvField::parse("bogus"), None);
    }

    #[test]
    fn a_side_in_two_environments_lists_both() {
        let two = [env("6.1", 250), env("6.2", 250)];
        let ext = [None, None];
        let s = SideEnvironments {
            environments: &two,
            sched_ext: &ext,
        };
        assert_eq!(s.values(EnvField::Kernel), "6.1, 6.2");
        assert_eq!(s.values(EnvField::Hz), "250");
    }
}
