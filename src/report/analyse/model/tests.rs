//! The unit tests of the model check (`super`), in their own file.

use super::*;
use crate::report::analyse::tests_settings;

const SPEC: &str = "name = \"m\"\nrepetitions = 3\n[matrix]\npolicy = [\"other\", \"fifo\"]\n\
                        workload = [\"pi\"]\nprocesses = [2]\npriorities = [\"spread\"]\ncpus = [\"0\"]\n\
                        [workloads.pi]\niterations = 20000000\n\
                        [priorities.spread]\nmode = \"spread\"\nnice = [-5, 5]\nrt_priority = [10, 20]\n";

fn machine() -> Machine {
    Machine::from_knobs("6.1.0", 2, crate::sim::Knobs::default(), 3_000_000)
}

/// The "measured" campaign: the model itself at a known pi speed, each
/// repetition's wall times stretched by 0.1 % more, and `tweak`
/// applied to every run of condition 1.
fn input(tweak: impl Fn(&mut ProcessRecord)) -> (ModelInput, f64) {
    let spec = crate::spec::load(SPEC, "m.toml", &[]).unwrap();
    let true_rate = 4.0e8;
    let mut p = ModelParams::new(machine(), UNCALIBRATED, "truth");
    p.rates.pi_iter_per_s = true_rate;
    let plan = crate::plan::expand(&spec, 1);
    let conditions = [Policy::Other, Policy::Fifo]
        .iter()
        .enumerate()
        .map(|(i, &policy)| {
            let runs: Vec<&Run> = plan.iter().filter(|r| r.policy == policy).collect();
            let measured = runs
                .iter()
                .enumerate()
                .map(|(k, run)| {
                    let mut procs = sim::simulate(run, &spec, &p).record.processes;
                    for pr in &mut procs {
                        pr.wall_ns = (pr.wall_ns as f64 * (1.0 + 0.001 * k as f64)) as u64;
                        if i == 1 {
                            tweak(pr);
                        }
                    }
                    MeasuredRun {
                        run_id: k as i64,
                        processes: procs,
                        others: Others::default(),
                    }
                })
                .collect();
            ConditionRuns {
                machine: None,
                condition: i,
                label: format!("pi, 2 processes, {}", policy.name()),
                policy: policy.name().into(),
                workload: "pi".into(),
                run: Some(runs[0].clone()),
                runs: measured,
            }
        })
        .collect();
    let input = ModelInput {
        spec,
        machine: machine(),
        machine_source: "test".into(),
        conditions,
    };
    (input, true_rate)
}

#[test]
fn calibrates_on_the_first_condition_and_predicts_the_model_s_own_runs() {
    let (input, true_rate) = input(|_| {});
    let c = check(&input, &tests_settings());
    assert_eq!(c.calibrations.len(), 1);
    let cal = &c.calibrations[0];
    assert!(cal.ok && cal.condition.ends_with("other"), "{cal:?}");
    let got: f64 = cal
        .parameter
        .split(['=', '/'])
        .nth(1)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!((got / true_rate - 1.0).abs() < 1e-3, "{}", cal.parameter);
    assert!(c.shortfalls.is_empty(), "{:?}", c.shortfalls);
    // Both conditions, each figure; calibration rows only on the first.
    for cond in 0..2 {
        let metrics: Vec<ModelMetric> = c
            .rows
            .iter()
            .filter(|r| r.condition == cond)
            .map(|r| r.metric)
            .collect();
        for m in [
            ModelMetric::Share,
            ModelMetric::Completion,
            ModelMetric::Makespan,
        ] {
            assert!(metrics.contains(&m), "{cond} {m:?}");
        }
    }
    assert!(c.rows.iter().all(|r| r.calibration == (r.condition == 0)));
    // Two classes of nice and of priority.
    assert!(c.rows.iter().any(|r| r.class == "nice -5"));
    assert!(c.rows.iter().any(|r| r.class == "prio 20"));
    for r in &c.rows {
        match r.rel_error {
            Some(e) => assert!(e.abs() < 0.003, "{r:?}"),
            None => assert_eq!((r.predicted, r.measured.mean), (0.0, 0.0), "{r:?}"),
        }
        assert!(r.predicted.is_finite() && r.measured.mean.is_finite());
    }
    assert!(c.findings.is_empty(), "{:?}", c.findings);
    // FIFO: the higher priority first, in every run.
    assert_eq!(c.orders.len(), 1);
    assert_eq!(c.orders[0].runs_matching, 3);
}

#[test]
fn a_class_short_of_its_share_in_every_run_is_a_finding() {
    let (input, _) = input(|p| {
        if p.index == 1 {
            let run = p.kernel.get(Field::RunNs);
            p.kernel
                .set(Field::RunNs, run.map(|ns| (ns as f64 * 0.88) as u64));
        }
    });
    let c = check(&input, &tests_settings());
    let f: Vec<&String> = c
        .findings
        .iter()
        .filter(|f| f.contains("CPU share"))
        .collect();
    assert_eq!(f.len(), 1, "{:?}", c.findings);
    assert!(
        f[0].contains("got 0.88 of its predicted CPU share"),
        "{}",
        f[0]
    );
    assert!(f[0].contains("in all 3 runs"), "{}", f[0]);
    assert!(!f[0].contains("calibration"), "{}", f[0]);
    let row = c
        .rows
        .iter()
        .find(|r| r.condition == 1 && r.metric == ModelMetric::Share && r.runs_below == 3)
        .unwrap();
    assert_eq!(row.covered, Some(false));
    assert!(beyond_noise(row));
}

#[test]
fn a_miss_beside_busy_other_programs_shows_them_as_its_cause() {
    let short = |p: &mut ProcessRecord| {
        if p.index == 1 {
            let run = p.kernel.get(Field::RunNs);
            p.kernel
                .set(Field::RunNs, run.map(|ns| (ns as f64 * 0.88) as u64));
        }
    };
    let (mut input, _) = input(short);
    for (k, r) in input.conditions[1].runs.iter_mut().enumerate() {
        r.others = Others {
            cpu_pct: Some([4.0, 62.0, 58.0][k]),
            runnable: Some([0, 3, 1][k]),
        };
    }
    input.conditions[0].runs[0].others = Others {
        cpu_pct: Some(2.0),
        runnable: Some(0),
    };
    let c = check(&input, &tests_settings());
    let f: Vec<&String> = c
        .findings
        .iter()
        .filter(|f| f.contains("CPU share"))
        .collect();
    assert_eq!(f.len(), 1, "{:?}", c.findings);
    // The miss is still there, with its cause beside it.
    assert!(
        f[0].contains("got 0.88 of its predicted CPU share"),
        "{}",
        f[0]
    );
    assert!(
        f[0].contains(
            "other programs took up to 62 % of the run's CPUs and had up to 3 runnable at release"
        ),
        "{}",
        f[0]
    );
    for r in &c.rows {
        let want = if r.condition == 1 {
            Others {
                cpu_pct: Some(62.0),
                runnable: Some(3),
            }
        } else {
            Others {
                cpu_pct: Some(2.0),
                runnable: Some(0),
            }
        };
        assert_eq!(r.others, want, "{r:?}");
    }
}

#[test]
fn quiet_other_programs_are_no_cause() {
    let (mut input, _) = input(|p| {
        if p.index == 1 {
            let run = p.kernel.get(Field::RunNs);
            p.kernel
                .set(Field::RunNs, run.map(|ns| (ns as f64 * 0.88) as u64));
        }
    });
    for r in &mut input.conditions[1].runs {
        r.others = Others {
            cpu_pct: Some(3.0),
            runnable: Some(1),
        };
    }
    let c = check(&input, &tests_settings());
    assert!(!c.findings.is_empty());
    assert!(
        c.findings.iter().all(|f| !f.contains("other programs")),
        "{:?}",
        c.findings
    );
}

#[test]
fn others_take_the_most_of_each_and_name_only_what_was_measured() {
    let most = Others::most([
        Others {
            cpu_pct: None,
            runnable: Some(2),
        },
        Others {
            cpu_pct: Some(12.5),
            runnable: None,
        },
        Others::default(),
    ]);
    assert_eq!(
        most,
        Others {
            cpu_pct: Some(12.5),
            runnable: Some(2)
        }
    );
    assert_eq!(Others::most([]), Others::default());
    assert_eq!(Others::default().cause(), None);
    let cpu_only = Others {
        cpu_pct: Some(40.0),
        runnable: Some(0),
    };
    assert_eq!(
        cpu_only.cause().as_deref(),
        Some("other programs took up to 40 % of the run's CPUs")
    );
    let runnable_only = Others {
        cpu_pct: None,
        runnable: Some(OTHERS_RUNNABLE_NOTE),
    };
    assert_eq!(
        runnable_only.cause().as_deref(),
        Some("other programs had up to 2 runnable at release")
    );
    assert!(
        !Others {
            cpu_pct: Some(OTHER_CPU_NOTE_PCT - 0.1),
            runnable: Some(OTHERS_RUNNABLE_NOTE - 1),
        }
        .disturbing()
    );
}

#[test]
fn a_command_workload_is_named_instead_of_predicted() {
    let spec = crate::spec::load(
            "[matrix]\nworkload = [\"c\"]\n[workloads.c]\nkind = \"command\"\nargv = [\"sh\", \"-c\", \"true\"]\n",
            "t.toml",
            &[],
        )
        .unwrap();
    let w = crate::plan::expand(&spec, 1).remove(0).workload.workload;
    let base = ModelParams::new(machine(), UNCALIBRATED, "t");
    let err = calibrate_workload(&w, Policy::Other, "x", &[], &base).unwrap_err();
    assert!(err.contains("command"), "{err}");
}

/// A p50 wake-up of 88 µs calibrates a 38 µs timer cost on an OTHER
/// condition (its 50 µs timer slack is simulated) and 88 µs on FIFO.
#[test]
fn periodic_calibration_leaves_out_the_timer_slack() {
    let spec = crate::spec::load(
        "[matrix]\nworkload = [\"periodic\"]\n[workloads.periodic]\nperiod_us = 5000\n",
        "t.toml",
        &[],
    )
    .unwrap();
    let w = crate::plan::expand(&spec, 1).remove(0).workload.workload;
    let base = ModelParams::new(machine(), UNCALIBRATED, "t");
    let sched = ProcSched::fair(Policy::Other, 0);
    let mut pr = crate::testing::synth::synthetic_process(0, sched, 1_000_000, 10);
    pr.figures.insert("wakeup_p50_us".into(), 88.0);
    let procs = [pr];
    let cost = |policy| {
        calibrate_workload(&w, policy, "x", &procs, &base)
            .unwrap()
            .0
            .wake
            .timer_wakeup_ns
    };
    assert_eq!(cost(Policy::Other), 38_000);
    assert_eq!(cost(Policy::Batch), 38_000);
    assert_eq!(cost(Policy::Fifo), 88_000);
}

/// A periodic task beside two fair hogs under OTHER, then FIFO: the
/// "measured" runs are the model's own at a 28 µs timer cost, with
/// OTHER's wake-up inflated by queueing behind the hogs (as measured
/// on the machine: milliseconds).
#[test]
fn periodic_wakeup_is_calibrated_on_the_rt_condition() {
    let text = "name = \"p\"\nrepetitions = 3\n[matrix]\npolicy = [\"other\", \"fifo\"]\n\
                    workload = [\"periodic\"]\nprocesses = [1]\ncpus = [\"0\"]\n\
                    [workloads.periodic]\nperiod_us = 5000\nrun_us = 500\nduration_s = 0.5\n\
                    [hog]\npolicy = \"other\"\ncount = 2\ncpus = \"0\"\n";
    let spec = crate::spec::load(text, "p.toml", &[]).unwrap();
    let mut truth = ModelParams::new(machine(), UNCALIBRATED, "truth");
    truth.wake.timer_wakeup_ns = 28_000;
    let plan = crate::plan::expand(&spec, 1);
    let conditions: Vec<ConditionRuns> = [Policy::Other, Policy::Fifo]
        .iter()
        .enumerate()
        .map(|(i, &policy)| {
            let runs: Vec<&Run> = plan.iter().filter(|r| r.policy == policy).collect();
            let measured = runs
                .iter()
                .enumerate()
                .map(|(k, run)| {
                    let mut procs = sim::simulate(run, &spec, &truth).record.processes;
                    for pr in procs.iter_mut().filter(|p| p.role == "worker") {
                        let p50 = pr.figures.get("wakeup_p50_us").copied().unwrap();
                        let queued = if policy == Policy::Other { 3000.0 } else { 0.0 };
                        pr.figures
                            .insert("wakeup_p50_us".into(), p50 + queued + k as f64);
                    }
                    MeasuredRun {
                        run_id: (10 * i + k) as i64,
                        processes: procs,
                        others: Others::default(),
                    }
                })
                .collect();
            ConditionRuns {
                machine: None,
                condition: i,
                label: format!("periodic, 1 process, {}", policy.name()),
                policy: policy.name().into(),
                workload: "periodic".into(),
                run: Some(runs[0].clone()),
                runs: measured,
            }
        })
        .collect();
    let input = ModelInput {
        spec,
        machine: machine(),
        machine_source: "test".into(),
        conditions,
    };
    let c = check(&input, &tests_settings());
    assert_eq!(c.calibrations.len(), 1, "{:?}", c.calibrations);
    let cal = &c.calibrations[0];
    assert!(cal.ok, "{cal:?}");
    assert!(cal.condition.ends_with("fifo"), "{cal:?}");
    assert!(cal.basis.contains("FIFO/RR"), "{cal:?}");
    let wake = |cond: usize| {
        c.rows
            .iter()
            .find(|r| r.condition == cond && r.metric == ModelMetric::WakeupP50)
            .unwrap_or_else(|| panic!("no wake-up row for {cond}: {:?}", c.rows))
    };
    let fifo = wake(1);
    assert!(fifo.calibration, "{fifo:?}");
    assert!(!wake(0).calibration);
    assert!(c.rows.iter().all(|r| r.calibration == (r.condition == 1)));
    assert!(
        (fifo.predicted - fifo.measured.mean).abs() < 10.0,
        "FIFO predicted {} against measured {}",
        fifo.predicted,
        fifo.measured.mean
    );
    // Without the RT condition the first (OTHER) one is taken, as before.
    let mut only_other = input.clone();
    only_other.conditions.truncate(1);
    let c = check(&only_other, &tests_settings());
    assert!(c.calibrations[0].condition.ends_with("other"));
    assert_eq!(c.calibrations[0].basis, FIRST_BASIS);
}

#[test]
fn several_classes_of_one_figure_make_one_finding() {
    let (input, _) = input(|p| {
        let run = p.kernel.get(Field::RunNs);
        p.kernel.set(Field::RunNs, run.map(|ns| ns / 2))
    });
    let c = check(&input, &tests_settings());
    let f: Vec<&String> = c
        .findings
        .iter()
        .filter(|f| f.contains("CPU share"))
        .collect();
    assert_eq!(f.len(), 1, "{:?}", c.findings);
    assert!(
        f[0].contains("2 of 2 process classes got 0.50–0.50"),
        "{}",
        f[0]
    );
}

/// A condition whose runs were made on another machine (a guest level
/// beside the host) is simulated on that machine: here one that lets RT
/// tasks run 20 ms per second, so the FIFO condition's 2 × 50 ms of pi are
/// predicted seconds late, while the OTHER condition on the campaign's
/// machine still matches.
#[test]
fn a_condition_is_simulated_on_the_machine_its_runs_were_made_in() {
    let (mut input, _) = input(|_| {});
    input.conditions[1].machine = Some(Machine {
        rt_runtime_us: 20_000,
        ..machine()
    });
    let c = check(&input, &tests_settings());
    let makespan = |cond: usize| {
        c.rows
            .iter()
            .find(|r| r.condition == cond && r.metric == ModelMetric::Makespan)
            .and_then(|r| r.rel_error)
            .unwrap()
    };
    assert!(makespan(0).abs() < 0.003, "{}", makespan(0));
    assert!(makespan(1) > 1.0, "{}", makespan(1));
}
