//! The unit tests of the store's traces (`super`), in their own file.

use super::*;
use crate::testing::synth;
use crate::trace::derive::derive;
use crate::trace::derive::tests::*;
use crate::trace::summary;

/// A database with a synthetic campaign, and the id of one of its runs.
fn store_with_run() -> (tempfile::TempDir, Store, i64) {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("t.db")).unwrap();
    synth::create(&mut store, &synth::SynthConfig::small()).unwrap();
    let run: i64 = store
        .conn
        .query_row("SELECT MIN(id) FROM runs WHERE status = 'ok'", [], |r| {
            r.get(0)
        })
        .unwrap();
    (dir, store, run)
}

fn sample() -> Capture {
    let mut cap = capture(
        1_000_000,
        2_000_000,
        &[10, 11],
        vec![
            sw(1_100_000, 0, 0, 0, 10),
            sw(1_200_000, 0, 10, PREEMPTED, 11),
            sw(1_300_000, 0, 11, SLEEPING, 10),
            waking(1_400_000, 1, 10, 11, 1),
            wakeup(1_400_500, 1, 10, 11, 1),
            sw(1_450_000, 1, 0, 0, 11),
            migrate(1_500_000, 0, 10, 0, 1),
            sw(1_600_000, 1, 11, YIELDED, 0),
        ],
    );
    cap.tasks[1].comm = "wörker \"b\"".into();
    cap
}

#[test]
fn a_saved_trace_loads_back_equal() {
    let (_dir, mut store, run) = store_with_run();
    let cap = sample();
    store.save_trace(run, &Analysed::new(&cap, &[])).unwrap();
    assert_eq!(store.load_trace(run).unwrap(), cap);
    // Saving again replaces it.
    store.save_trace(run, &Analysed::new(&cap, &[])).unwrap();
    assert_eq!(store.load_trace(run).unwrap(), cap);
    let d = derive(&cap);
    assert_eq!(store.trace_slices(run, None).unwrap(), d.slices);
    assert_eq!(store.trace_wakeups(run).unwrap(), d.wakeups);
    let t = store.run_trace(run).unwrap().unwrap();
    assert_eq!(t.processes, summary::processes(&cap, &d));
    assert_eq!(t.cpus, summary::cpus(&cap, &d));
    assert!(!t.info.unusable);
    assert_eq!(t.info.event_count, 8);
    assert_eq!(store.campaign_traces(1).unwrap(), vec![t]);
}

#[test]
fn a_window_selects_the_slices_overlapping_it() {
    let (_dir, mut store, run) = store_with_run();
    store
        .save_trace(run, &Analysed::new(&sample(), &[]))
        .unwrap();
    let s = store
        .trace_slices(run, Some((1_250_000, 1_420_000)))
        .unwrap();
    // 11 on CPU 0 (1.2–1.3 ms) and 10 on CPU 0 from 1.3 ms.
    assert_eq!(s.len(), 2, "{s:?}");
    assert!(s.iter().all(|s| s.cpu == 0));
}

#[test]
fn lost_events_mark_the_trace_unusable() {
    let (_dir, mut store, run) = store_with_run();
    let mut cap = sample();
    cap.lost_events = 3;
    store.save_trace(run, &Analysed::new(&cap, &[])).unwrap();
    let info = store.trace_info(run).unwrap().unwrap();
    assert!(info.unusable);
    assert_eq!(info.lost_events, 3);
}

#[test]
fn repairs_are_stored_with_the_slices_they_cut_and_judge_the_trace() {
    let (_dir, mut store, run) = store_with_run();
    // 10 runs on CPU 0 from 1.1 ms; the switch 10 → 11 was never
    // emitted: 10 last seen at 1.15 ms, 11 first at 1.25 ms.
    let mut cap = capture(
        1_000_000,
        2_000_000,
        &[10, 11],
        vec![
            sw(1_100_000, 0, 0, 0, 10),
            waking(1_150_000, 0, 10, 99, 0),
            waking(1_250_000, 0, 11, 99, 0),
            sw(1_300_000, 0, 11, SLEEPING, 0),
        ],
    );
    store
        .save_trace(run, &crate::trace::Analysed::new(&cap, &[]))
        .unwrap();
    let d = derive(&cap);
    assert_eq!(store.trace_repairs(run, None).unwrap(), d.repairs);
    assert_eq!(d.repairs.len(), 1);
    assert_eq!(store.trace_slices(run, None).unwrap(), d.slices);
    assert!(d.slices.iter().any(|s| s.end_repaired) && d.slices.iter().any(|s| s.start_repaired));
    // 100 µs unattributed against 100 µs on CPU: unusable, and says so.
    let info = store.trace_info(run).unwrap().unwrap();
    assert_eq!(info.verdict, Verdict::of(&cap, &d));
    assert!(info.unusable);
    assert!(info.caveat().unwrap().contains("never emitted"));
    let reason: Option<String> = store
        .conn
        .query_row(
            "SELECT unusable_reason FROM trace_captures WHERE run_id = ?1",
            [run],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(reason, info.verdict.reason());
    assert_eq!(
        store
            .trace_repairs(run, Some((1_400_000, 1_500_000)))
            .unwrap(),
        vec![]
    );
    // Within 1 % it is usable: a long stretch of 10 after the gap.
    cap.events.push(sw(1_400_000, 0, 0, 0, 10));
    cap.events.push(sw(1_990_000, 0, 10, SLEEPING, 0));
    cap.end_ns = 20_000_000;
    cap.events.push(sw(2_000_000, 1, 0, 0, 11));
    cap.events.push(sw(19_000_000, 1, 11, SLEEPING, 0));
    store
        .save_trace(run, &crate::trace::Analysed::new(&cap, &[]))
        .unwrap();
    let info = store.trace_info(run).unwrap().unwrap();
    assert!(!info.unusable, "{:?}", info.verdict);
    assert!(
        info.caveat()
            .unwrap()
            .starts_with(&format!("Run {run}'s trace: 1 sched_switch"))
    );
}

/// The rows a capture stored before the derivation blob (schema
/// migration 11) had in trace_slices, trace_wakeups and trace_repairs.
fn write_legacy_rows(store: &Store, run: i64, d: &crate::trace::derive::Derived) {
    let c = &store.conn;
    c.execute(
        "UPDATE trace_captures SET derived = NULL WHERE run_id = ?1",
        [run],
    )
    .unwrap();
    for s in &d.slices {
        let end = s.end.map(|e| match e {
            SwitchEnd::Preempted => "preempted",
            SwitchEnd::Yielded => "yielded",
            SwitchEnd::Blocked => "blocked",
            SwitchEnd::Exited => "exited",
            // Not in the rows' CHECK: the model's slices came with the blob.
            SwitchEnd::Throttled => unreachable!("no kernel trace ends a slice throttled"),
        });
        c.execute(
                "INSERT INTO trace_slices (run_id, pid, cpu, start_ns, end_ns, end_reason, start_clipped,
                     start_repaired, end_repaired) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                params![
                    run,
                    s.pid,
                    s.cpu,
                    i(s.start_ns),
                    i(s.end_ns),
                    end,
                    s.start_clipped,
                    s.start_repaired,
                    s.end_repaired
                ],
            )
            .unwrap();
    }
    for w in &d.wakeups {
        c.execute(
                "INSERT INTO trace_wakeups (run_id, pid, waker_pid, waking_ns, wakeup_ns, target_cpu, new,
                     switch_in_ns, cpu) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                params![
                    run,
                    w.pid,
                    w.waker_pid,
                    w.waking_ns.map(i),
                    w.wakeup_ns.map(i),
                    w.target_cpu,
                    w.new,
                    w.switch_in_ns.map(i),
                    w.cpu
                ],
            )
            .unwrap();
    }
    for r in &d.repairs {
        c.execute(
            "INSERT INTO trace_repairs (run_id, cpu, before_pid, after_pid, from_ns, to_ns)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![
                run,
                r.cpu,
                r.before_pid,
                r.after_pid,
                i(r.from_ns),
                i(r.to_ns)
            ],
        )
        .unwrap();
    }
}

#[test]
fn slices_wakeups_and_repairs_are_one_blob_not_rows() {
    let (_dir, mut store, run) = store_with_run();
    store
        .save_trace(run, &Analysed::new(&sample(), &[]))
        .unwrap();
    for t in ["trace_slices", "trace_wakeups", "trace_repairs"] {
        let n: i64 = store
            .conn
            .query_row(&format!("SELECT COUNT(*) FROM {t}"), [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 0, "{t}");
    }
    assert!(store.stored_derivation(run).unwrap().is_some());
}

#[test]
fn a_capture_stored_before_the_blob_reads_the_same_from_its_rows() {
    let (_dir, mut store, run) = store_with_run();
    // A repaired gap on CPU 0 (10 → 11 never emitted), a wake-up and a
    // slice on CPU 1.
    let cap = capture(
        1_000_000,
        2_000_000,
        &[10, 11],
        vec![
            sw(1_100_000, 0, 0, 0, 10),
            waking(1_150_000, 0, 10, 99, 0),
            waking(1_250_000, 0, 11, 99, 0),
            sw(1_300_000, 0, 11, SLEEPING, 0),
            waking(1_400_000, 1, 0, 10, 1),
            sw(1_450_000, 1, 0, 0, 10),
            sw(1_600_000, 1, 10, YIELDED, 0),
        ],
    );
    store.save_trace(run, &Analysed::new(&cap, &[])).unwrap();
    let windows = [
        None,
        Some((1_200_000, 1_420_000)),
        Some((1_250_000, 1_250_000)),
        Some((1_700_000, 1_800_000)),
    ];
    let read = |store: &Store| {
        windows
            .iter()
            .map(|w| {
                (
                    store.trace_slices(run, *w).unwrap(),
                    store.trace_repairs(run, *w).unwrap(),
                )
            })
            .collect::<Vec<_>>()
    };
    let from_blob = (read(&store), store.trace_wakeups(run).unwrap());
    let d = derive(&cap);
    assert!(!d.repairs.is_empty() && !d.wakeups.is_empty());
    assert_eq!(from_blob.0[0], (d.slices.clone(), d.repairs.clone()));
    assert_eq!(from_blob.1, d.wakeups);
    write_legacy_rows(&store, run, &d);
    assert!(store.stored_derivation(run).unwrap().is_none());
    assert_eq!((read(&store), store.trace_wakeups(run).unwrap()), from_blob);
    // Saving again replaces the rows with a blob.
    store.save_trace(run, &Analysed::new(&cap, &[])).unwrap();
    assert!(store.stored_derivation(run).unwrap().is_some());
    assert_eq!((read(&store), store.trace_wakeups(run).unwrap()), from_blob);
}

#[test]
fn a_predicted_timeline_is_stored_as_the_model_s_and_has_no_events_to_load() {
    let (_dir, mut store, run) = store_with_run();
    let pid: i32 = store
        .conn
        .query_row(
            "SELECT pid FROM processes WHERE run_id = ?1 ORDER BY process_index LIMIT 1",
            [run],
            |r| r.get(0),
        )
        .unwrap();
    // No events: the model's slices are given, not derived.
    let mut cap = capture(0, 10_000_000, &[pid], Vec::new());
    cap.release_ns = Some(0);
    let slice = |start_ns, end_ns, end| Slice {
        pid,
        cpu: 0,
        start_ns,
        end_ns,
        end,
        start_clipped: false,
        start_repaired: false,
        end_repaired: false,
    };
    let derived = crate::trace::derive::Derived {
        slices: vec![
            slice(0, 4_000_000, Some(SwitchEnd::Throttled)),
            slice(6_000_000, 9_000_000, Some(SwitchEnd::Exited)),
        ],
        ..Default::default()
    };
    let a = Analysed::predicted(&cap, derived.clone(), &[]);
    store.save_trace(run, &a).unwrap();
    assert_eq!(store.trace_slices(run, None).unwrap(), derived.slices);
    let info = store.trace_info(run).unwrap().unwrap();
    assert!(info.predicted && !info.unusable && info.caveat().is_none());
    assert_eq!(info.event_count, 0);
    let t = store.run_trace(run).unwrap().unwrap();
    assert_eq!(t.processes[0].oncpu_ns, 7_000_000);
    assert_eq!((t.processes[0].preempted, t.processes[0].voluntary), (1, 1));
    // Its capture has no kernel events: loading it (the trace export) refuses.
    let e = format!("{:#}", store.load_trace(run).unwrap_err());
    assert!(
        e.contains("simulated") && e.contains("--timeline-run"),
        "{e}"
    );
    // The export's trace columns are the kernel's only.
    let rows = store.export_rows(None).unwrap();
    assert!(
        rows.iter()
            .filter(|r| r.run == run)
            .all(|r| r.trace.is_none())
    );
    // A kernel capture stored over it is the kernel's again.
    store
        .save_trace(run, &Analysed::new(&sample(), &[]))
        .unwrap();
    assert!(!store.trace_info(run).unwrap().unwrap().predicted);
}

#[test]
fn an_untraced_run_has_no_trace() {
    let (_dir, store, run) = store_with_run();
    assert!(store.trace_info(run).unwrap().is_none());
    assert!(store.run_trace(run).unwrap().is_none());
    let e = store.load_trace(run).unwrap_err();
    assert!(format!("{e:#}").contains("has no trace"), "{e:#}");
}

#[test]
fn the_export_carries_each_process_trace_figures() {
    let (_dir, mut store, run) = store_with_run();
    let pid: i32 = store
        .conn
        .query_row(
            "SELECT pid FROM processes WHERE run_id = ?1 ORDER BY process_index LIMIT 1",
            [run],
            |r| r.get(0),
        )
        .unwrap();
    let cap = capture(
        0,
        10_000_000,
        &[pid],
        vec![
            sw(1_000_000, 0, 0, 0, pid),
            sw(3_000_000, 0, pid, PREEMPTED, 0),
            sw(4_000_000, 0, 0, 0, pid),
            sw(5_000_000, 0, pid, SLEEPING, 0),
        ],
    );
    store.save_trace(run, &Analysed::new(&cap, &[])).unwrap();
    let rows = store.export_rows(None).unwrap();
    let traced: Vec<_> = rows.iter().filter(|r| r.run == run).collect();
    let mine = traced
        .iter()
        .find(|r| r.pid == Some(i64::from(pid)))
        .unwrap();
    let t = mine.trace.as_ref().unwrap();
    assert_eq!(
        (t.slices, t.preempted, t.voluntary),
        (Some(2), Some(1), Some(1))
    );
    assert_eq!(t.oncpu_ns, Some(3_000_000));
    assert!(t.slice_max_ns.unwrap().abs_diff(2_000_000) < 2_000);
    assert!(!t.unusable && t.lost_events == 0);
    // The run's other processes: the run is traced, they were not seen.
    for r in traced.iter().filter(|r| r.pid != Some(i64::from(pid))) {
        assert_eq!(r.trace.as_ref().unwrap().slices, None);
    }
    assert!(
        rows.iter()
            .filter(|r| r.run != run)
            .all(|r| r.trace.is_none())
    );
}

#[test]
fn a_run_and_its_trace_are_stored_together_or_not_at_all() {
    let (_dir, mut store, run) = store_with_run();
    let (_, plan, _) = store.report_run_documents(&[run]).unwrap().pop().unwrap();
    let mut plan = plan.expect("synthetic runs keep their plan entry");
    // A key of its own, once; storing it a second time must fail.
    let processes: Vec<crate::record::ProcessRecord> = store
        .report_process_records(&[run])
        .unwrap()
        .into_iter()
        .map(|(_, p)| p)
        .collect();
    plan.key = "traced-run".into();
    let rec = || {
        synth::synthetic_record(
            &plan,
            &synth::synthetic_env(2),
            vec![0],
            0,
            None,
            processes.clone(),
        )
    };
    let cap = sample();
    let traced = Analysed::of_run(&cap, &rec());
    let id = store.insert_run_traced(1, &rec(), Some(&traced)).unwrap();
    assert_eq!(store.load_trace(id).unwrap(), cap);
    // The same key again fails: neither the run nor its trace is kept.
    let before: i64 = store
        .conn
        .query_row("SELECT COUNT(*) FROM trace_captures", [], |r| r.get(0))
        .unwrap();
    assert!(store.insert_run_traced(1, &rec(), Some(&traced)).is_err());
    let after: i64 = store
        .conn
        .query_row("SELECT COUNT(*) FROM trace_captures", [], |r| r.get(0))
        .unwrap();
    assert_eq!(before, after);
}

#[test]
fn a_merged_store_carries_the_trace_with_its_run() {
    let (_dir, mut src, run) = store_with_run();
    let cap = sample();
    src.save_trace(run, &Analysed::new(&cap, &[])).unwrap();
    let key: String = src
        .conn
        .query_row("SELECT run_key FROM runs WHERE id = ?1", [run], |r| {
            r.get(0)
        })
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut dst = Store::open(&dir.path().join("d.db")).unwrap();
    dst.merge_from(&src, |_, _| {}).unwrap();
    let id: i64 = dst
        .conn
        .query_row("SELECT id FROM runs WHERE run_key = ?1", [&key], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(dst.load_trace(id).unwrap(), cap);
    assert_eq!(
        dst.trace_slices(id, None).unwrap(),
        src.trace_slices(run, None).unwrap()
    );
    assert_eq!(dst.run_trace(id).unwrap().unwrap().processes.len(), 2);
}

#[test]
fn forgetting_a_run_forgets_its_trace() {
    let (_dir, mut store, run) = store_with_run();
    store
        .save_trace(run, &Analysed::new(&sample(), &[]))
        .unwrap();
    store
        .forget_runs(1, &[crate::record::RunStatus::Ok])
        .unwrap();
    for t in [
        "trace_captures",
        "trace_tasks",
        "trace_slices",
        "trace_processes",
    ] {
        let n: i64 = store
            .conn
            .query_row(&format!("SELECT COUNT(*) FROM {t}"), [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 0, "{t}");
    }
}

/// The trace tables' inserts number one placeholder per column, from
/// their column lists, and prepare against the schema.
#[test]
fn the_trace_inserts_number_one_placeholder_per_column() {
    use crate::store::tests::{assert_prepares_with_a_placeholder_per_column, migrated};
    let conn = migrated();
    for (sql, columns) in [
        (&*CAPTURE_INSERT, CAPTURE_COLUMNS),
        (&*PROCESS_TRACE_INSERT, PROCESS_TRACE_COLUMNS),
        (&*CPU_TRACE_INSERT, CPU_TRACE_COLUMNS),
    ] {
        assert_prepares_with_a_placeholder_per_column(&conn, sql, columns);
    }
    assert!(
        PROCESS_TRACE_INSERT.ends_with("?22, ?23)"),
        "{}",
        *PROCESS_TRACE_INSERT
    );
}
