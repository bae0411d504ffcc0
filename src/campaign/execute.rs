//! The seam where a run is carried out, and the campaign loop over it.
//!
//! [`Executor`] is "carry out one run" (as hyperfine's `Executor` is "run
//! one command"): on this machine's processes ([`super::machine`]) or in
//! the model. [`Opened`] is a campaign opened in its database with the runs
//! it has left; [`Opened::execute`] carries them out in campaign order
//! through any executor, stores each the moment it finishes, shows
//! progress, and stops cleanly on a stop signal. Neither knows which
//! executor it drives.

use anyhow::{Context, Result};

use crate::launch::Outcome;
use crate::locks;
use crate::plan::{Plan, Run};
use crate::progress::Progress;
use crate::record::{RunRecord, RunStatus};
use crate::spec::Spec;
use crate::store::{Campaign, Store};
use crate::sys::{envinfo, proc};
use crate::trace::Analysed;

use super::precision::{self, Precision};
use super::{Options, Summary, open_campaign};

/// Carries out the runs of a campaign.
pub trait Executor {
    /// Carry out one run: its record (and trace), or the stop signal that
    /// interrupted it (nothing of it is stored; it runs again on resume).
    fn execute(&mut self, run: &Run) -> Result<Outcome>;

    /// Between two runs (a real machine's cooldown): `Some(signal)` when a
    /// stop signal came meanwhile.
    fn between_runs(&mut self) -> Option<i32> {
        None
    }
}

/// A campaign open in its database, with the runs it has left. Holds the
/// database's runner lock: one runner per database.
pub struct Opened {
    pub store: Store,
    pub campaign: Campaign,
    /// Every run of the campaign, in campaign order.
    pub runs: Vec<Run>,
    /// Indices in `runs` of the runs not stored yet.
    pub pending: Vec<usize>,
    /// Whether the campaign was created now (not resumed).
    pub created: bool,
    /// `repetitions = "auto"`: the stopping rule, applied after each round.
    pub precision: Option<Precision>,
    _runner: locks::Held,
}

impl Opened {
    /// Lock `opts.db` for this runner (`what` says who holds it), open it,
    /// find or create the campaign of `spec` (whose runs `plan` holds) on
    /// the machine `env` describes, forget its failed runs when asked, and
    /// list the rest.
    pub fn open(
        spec: &Spec,
        plan: Plan,
        spec_toml: &str,
        overrides: &[String],
        opts: &Options,
        env: &envinfo::EnvSnapshot,
        what: &str,
    ) -> Result<Opened> {
        // Before anything is made beside it: a device, a directory or
        // another database's side file cannot hold a database.
        crate::output::check_database_arg("--db", &opts.db)?;
        let db_lock = locks::database_lock_path(&opts.db);
        let runner = locks::try_take(&db_lock, &locks::holder_note(what))
            .with_context(|| format!("cannot lock {}", db_lock.display()))?
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "{} is being written by {}; wait for it to finish (or stop it), or use another --db",
                    opts.db.display(),
                    locks::holder(&db_lock)
                )
            })?;
        let mut store = Store::open(&opts.db)?;
        let host = crate::store::Host::of(env);
        let (campaign, runs, created) =
            open_campaign(&mut store, &host, spec, plan, spec_toml, overrides)?;
        if opts.retry_failed {
            let n = store.forget_runs(
                campaign.id,
                &[RunStatus::Failed, RunStatus::TimedOut, RunStatus::Skipped],
            )?;
            if n > 0 && !opts.quiet {
                note!("retrying {n} failed, timed-out or skipped runs");
            }
        }
        let done = store.finished_keys(campaign.id)?;
        let pending = (0..runs.len())
            .filter(|&i| !done.contains(&runs[i].key))
            .collect();
        Ok(Opened {
            store,
            campaign,
            runs,
            pending,
            created,
            precision: Precision::of(spec),
            _runner: runner,
        })
    }

    /// The runs left, in campaign order.
    pub fn pending_runs(&self) -> Vec<&Run> {
        self.pending.iter().map(|&i| &self.runs[i]).collect()
    }

    /// A summary of nothing run yet.
    pub fn summary(&self) -> Summary {
        Summary {
            campaign: self.campaign.clone(),
            ran: 0,
            already_done: self.runs.len() - self.pending.len(),
            by_status: [0; 4],
            not_needed: 0,
            interrupted: None,
        }
    }

    /// Carry out the runs left through `exec`, storing each as it
    /// finishes; a stop signal in `signals` ends the loop between runs.
    pub fn execute(
        &mut self,
        exec: &mut dyn Executor,
        progress: &mut Progress,
        signals: &libc::sigset_t,
    ) -> Result<Summary> {
        let mut summary = self.summary();
        if self.pending.is_empty() {
            // A stop signal that came during set-up still counts.
            summary.interrupted = proc::pending_stop_signal(signals);
        }
        let mut round = 0;
        let mut stopped: Vec<String> = Vec::new();
        let mut executed = 0;
        for (i, &index) in self.pending.iter().enumerate() {
            let run = &self.runs[index];
            if let Some(p) = &self.precision {
                if run.rep != round {
                    round = run.rep;
                    stopped = self.round_begins(p, round, progress)?;
                }
                if stopped.iter().any(|c| c == run.condition_key()) {
                    summary.not_needed += 1;
                    continue;
                }
            }
            let stop = proc::pending_stop_signal(signals).or_else(|| match executed {
                0 => None,
                _ => exec.between_runs(),
            });
            executed += 1;
            if let Some(sig) = stop {
                summary.interrupted = Some(sig);
                break;
            }
            progress.start(i, run);
            match exec.execute(run)? {
                Outcome::Interrupted(sig) => {
                    summary.interrupted = Some(sig);
                    break;
                }
                Outcome::Done(mut rec, trace) => {
                    // Derived before the store's transaction: it only persists.
                    let trace = trace.as_deref().map(|cap| Analysed::of_run(cap, &rec));
                    if let Some(a) = &trace {
                        crate::trace::placement::fill(&mut rec, a);
                    }
                    self.store
                        .insert_run_traced(self.campaign.id, &rec, trace.as_ref())?;
                    summary.ran += 1;
                    summary.by_status[status_index(rec.status)] += 1;
                    progress.finish(i, run, &describe(&rec));
                }
                Outcome::Predicted(mut rec, p) => {
                    let p = *p;
                    let trace = Analysed::predicted(&p.capture, p.derived, &p.windows);
                    crate::trace::placement::fill(&mut rec, &trace);
                    self.store
                        .insert_run_traced(self.campaign.id, &rec, Some(&trace))?;
                    summary.ran += 1;
                    summary.by_status[status_index(rec.status)] += 1;
                    progress.finish(i, run, &describe(&rec));
                }
            }
        }
        if let (Some(p), None) = (&self.precision, summary.interrupted) {
            self.round_begins(p, u32::MAX, progress)?;
        }
        progress.done();
        Ok(summary)
    }

    /// Before round `round` of an auto campaign (`u32::MAX`: at its end):
    /// show each condition's current half-width, and return the conditions
    /// that stopped before it. Recomputed from the stored runs.
    fn round_begins(
        &self,
        p: &Precision,
        round: u32,
        progress: &mut Progress,
    ) -> Result<Vec<String>> {
        let states = p.load(&self.store, self.campaign.id)?;
        let stopped: Vec<String> = precision::stopped_before(&states, round)
            .into_iter()
            .map(str::to_string)
            .collect();
        // A round that no condition needs shows nothing new.
        let runs_any = round == u32::MAX || stopped.len() < states.len();
        if round > 1 && runs_any {
            let head = match round {
                u32::MAX => "precision at the end:".to_string(),
                r => format!("precision before round {r}:"),
            };
            progress.note(&head);
            for c in &states {
                progress.note(&format!("  {}: {}", c.condition, precision::describe(c)));
            }
        }
        Ok(stopped)
    }
}

fn status_index(s: RunStatus) -> usize {
    match s {
        RunStatus::Ok => 0,
        RunStatus::Failed => 1,
        RunStatus::TimedOut => 2,
        RunStatus::Skipped => 3,
    }
}

/// One line on a finished run.
fn describe(rec: &RunRecord) -> String {
    match rec.status {
        RunStatus::Ok => format!(
            "ok, makespan {:.3} s, CPU {:.0}%",
            rec.makespan_ns.unwrap_or(0) as f64 / 1e9,
            rec.cpu_util.unwrap_or(0.0) * 100.0
        ),
        s => format!("{}: {}", s.as_str(), rec.reason),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::synth;
    use std::path::Path;

    /// An executor that makes up records: ok runs with a makespan of the
    /// run's sequence number, or the outcomes it was told to give.
    struct Fake {
        executed: Vec<String>,
        /// Per call (in order): None = ok, Some(Err) = executor error,
        /// Some(Ok(sig)) = interrupted.
        script: Vec<Option<Result<i32, String>>>,
        gaps: usize,
        /// The makespan of an ok run.
        wall_ns: fn(&Run) -> u64,
    }

    impl Executor for Fake {
        fn execute(&mut self, run: &Run) -> Result<Outcome> {
            let step = self.script.get(self.executed.len()).cloned().flatten();
            self.executed.push(run.key.clone());
            match step {
                Some(Err(e)) => Err(anyhow::anyhow!(e)),
                Some(Ok(sig)) => Ok(Outcome::Interrupted(sig)),
                None => {
                    let env = synth::synthetic_env(2);
                    let p = synth::synthetic_process(
                        0,
                        crate::policy::ProcSched::fair(run.policy, 0),
                        (self.wall_ns)(run),
                        500,
                    );
                    let rec = synth::synthetic_record(run, &env, vec![0], 0, None, vec![p]);
                    Ok(Outcome::Done(Box::new(rec), None))
                }
            }
        }

        fn between_runs(&mut self) -> Option<i32> {
            self.gaps += 1;
            None
        }
    }

    fn fake(script: Vec<Option<Result<i32, String>>>) -> Fake {
        Fake {
            executed: Vec::new(),
            script,
            gaps: 0,
            wall_ns: |run| 1_000_000 * (run.seq as u64 + 1),
        }
    }

    const SPEC: &str = r#"
name = "seam"
repetitions = 2
[matrix]
policy = ["other", "batch"]
processes = [1]
workload = ["w"]
[workloads.w]
kind = "pi"
iterations = 1000
"#;

    fn open(dir: &Path, retry_failed: bool) -> Opened {
        open_spec(dir, retry_failed, SPEC)
    }

    fn open_spec(dir: &Path, retry_failed: bool, text: &str) -> Opened {
        let spec = crate::spec::load(text, "seam.toml", &[]).unwrap();
        let opts = Options {
            db: dir.join("seam.db"),
            quiet: true,
            retry_failed,
            force: false,
            allow_concurrent: true,
        };
        let env = synth::synthetic_env(2);
        // The runner lock of a campaign opened and dropped just before is
        // briefly held on by a child another test thread is forking (the
        // lock's descriptor lives in it until its exec): wait that out.
        let mut tries = 0;
        loop {
            match Opened::open(&spec, Plan::of(&spec), text, &[], &opts, &env, "test") {
                Ok(o) => return o,
                Err(e) if tries < 100 && format!("{e:#}").contains("is being written by") => {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                Err(e) => panic!("{e:#}"),
            }
        }
    }

    /// Carry out `o`'s runs through `exec`, quietly, with no signal.
    fn execute(o: &mut Opened, exec: &mut Fake) -> Result<Summary> {
        let progress = &mut Progress::new(&vec![0.0; o.pending.len()], true);
        o.execute(exec, progress, &proc::empty_signal_set())
    }

    #[test]
    fn every_run_is_executed_once_in_campaign_order_and_stored() {
        let d = tempfile::tempdir().unwrap();
        let mut o = open(d.path(), false);
        assert_eq!(o.pending.len(), 4);
        let mut exec = fake(vec![]);
        let s = execute(&mut o, &mut exec).unwrap();
        let order: Vec<String> = o.runs.iter().map(|r| r.key.clone()).collect();
        assert_eq!(exec.executed, order);
        assert_eq!((s.ran, s.by_status[0], s.interrupted), (4, 4, None));
        assert_eq!(exec.gaps, 3, "a gap between runs, none before the first");
        assert_eq!(o.store.finished_keys(o.campaign.id).unwrap().len(), 4);
    }

    /// `run`'s path expands the spec once: the machine check, the
    /// campaign's order, the stored count of planned runs and the loop all
    /// take that one plan; resuming expands it once again, no more.
    #[test]
    fn a_campaign_expands_its_spec_once() {
        let d = tempfile::tempdir().unwrap();
        let spec = crate::spec::load(SPEC, "seam.toml", &[]).unwrap();
        let opts = Options {
            db: d.path().join("seam.db"),
            quiet: true,
            retry_failed: false,
            force: false,
            allow_concurrent: true,
        };
        let env = synth::synthetic_env(2);
        for (round, expected_runs) in [(1, 4), (2, 0)] {
            crate::plan::PLANS_MADE.with(|n| n.set(0));
            let mut o =
                super::super::open_checked(&spec, "seam.toml", SPEC, &[], &opts, &env, "test")
                    .unwrap();
            let s = execute(&mut o, &mut fake(vec![])).unwrap();
            assert_eq!(s.ran, expected_runs, "round {round}");
            assert_eq!(o.campaign.planned_runs, 4);
            let made = crate::plan::PLANS_MADE.with(|n| n.get());
            assert_eq!(made, 1, "expansions of the spec in round {round}");
        }
    }

    #[test]
    fn an_interrupted_run_is_not_stored_and_the_campaign_resumes_with_it() {
        let d = tempfile::tempdir().unwrap();
        let interrupted_key = {
            let mut o = open(d.path(), false);
            let mut exec = fake(vec![None, Some(Ok(libc::SIGINT))]);
            let s = execute(&mut o, &mut exec).unwrap();
            assert_eq!((s.ran, s.interrupted), (1, Some(libc::SIGINT)));
            assert_eq!(exec.executed.len(), 2, "nothing after the interruption");
            exec.executed[1].clone()
        };
        let mut o = open(d.path(), false);
        assert_eq!(o.pending.len(), 3);
        assert!(!o.created);
        let mut exec = fake(vec![]);
        let s = execute(&mut o, &mut exec).unwrap();
        assert_eq!(
            exec.executed[0], interrupted_key,
            "resumes with the interrupted run"
        );
        assert_eq!((s.ran, s.already_done), (3, 1));
    }

    #[test]
    fn an_executor_error_keeps_what_was_stored_before_it() {
        let d = tempfile::tempdir().unwrap();
        let mut o = open(d.path(), false);
        let mut exec = fake(vec![None, None, Some(Err("the machine is gone".into()))]);
        let err = execute(&mut o, &mut exec).unwrap_err();
        assert!(format!("{err:#}").contains("the machine is gone"));
        assert_eq!(o.store.finished_keys(o.campaign.id).unwrap().len(), 2);
    }

    /// OTHER's makespan is steady, BATCH's alternates 1 s / 2 s.
    const AUTO: &str = r#"
name = "auto"
repetitions = "auto"
target_ci_pct = 5
min_repetitions = 3
max_repetitions = 12
[matrix]
policy = ["other", "batch"]
processes = [1]
workload = ["w"]
[workloads.w]
kind = "pi"
iterations = 1000
"#;

    fn auto_fake(script: Vec<Option<Result<i32, String>>>) -> Fake {
        Fake {
            wall_ns: |run| match run.policy {
                crate::policy::Policy::Other => 1_000_000_000 + 1_000_000 * (run.rep as u64 % 2),
                _ => 1_000_000_000 * (1 + run.rep as u64 % 2),
            },
            ..fake(script)
        }
    }

    /// Stored reps of each policy's condition.
    fn stored_reps(o: &Opened) -> (Vec<u32>, Vec<u32>) {
        let keys = o.store.finished_keys(o.campaign.id).unwrap();
        let reps = |p: &str| {
            let mut v: Vec<u32> = o
                .runs
                .iter()
                .filter(|r| r.policy.name() == p && keys.contains(&r.key))
                .map(|r| r.rep)
                .collect();
            v.sort_unstable();
            v
        };
        (reps("other"), reps("batch"))
    }

    /// `repetitions = "auto"`: rounds across both conditions; the steady
    /// one stops once the rule is met (10 runs), the noisy one runs to the
    /// most (12); the rest of the steady one's rounds are not run.
    #[test]
    fn auto_repetitions_stop_a_precise_condition_and_run_the_other_to_the_most() {
        let d = tempfile::tempdir().unwrap();
        let mut o = open_spec(d.path(), false, AUTO);
        assert_eq!(o.pending.len(), 24);
        let mut exec = auto_fake(vec![]);
        let s = execute(&mut o, &mut exec).unwrap();
        assert_eq!((s.ran, s.not_needed, s.interrupted), (22, 2, None));
        let (other, batch) = stored_reps(&o);
        assert_eq!(other, (1..=10).collect::<Vec<_>>());
        assert_eq!(batch, (1..=12).collect::<Vec<_>>());
        // Executed round by round.
        let rep_of = |k: &String| o.runs.iter().find(|r| &r.key == k).unwrap().rep;
        let reps: Vec<u32> = exec.executed.iter().map(rep_of).collect();
        assert!(reps.windows(2).all(|w| w[0] <= w[1]), "{reps:?}");
        assert_eq!(exec.gaps, 21, "no cool-down for a run not needed");
        let states = o
            .precision
            .as_ref()
            .unwrap()
            .load(&o.store, o.campaign.id)
            .unwrap();
        assert_eq!(states[0].state, precision::State::AtMax, "batch");
        assert_eq!(
            states[1].state,
            precision::State::Reached { after_round: 10 },
            "other"
        );
    }

    /// Interrupted in round 11 and resumed: the decisions are recomputed
    /// from the stored runs, and the campaign ends as if it had not
    /// stopped.
    #[test]
    fn an_interrupted_auto_campaign_resumes_with_the_same_decisions() {
        let d = tempfile::tempdir().unwrap();
        {
            let mut o = open_spec(d.path(), false, AUTO);
            let mut script = vec![None; 20];
            script.push(Some(Ok(libc::SIGINT)));
            let mut exec = auto_fake(script);
            let s = execute(&mut o, &mut exec).unwrap();
            assert_eq!((s.ran, s.interrupted), (20, Some(libc::SIGINT)));
        }
        let mut o = open_spec(d.path(), false, AUTO);
        assert!(!o.created);
        let mut exec = auto_fake(vec![]);
        let s = execute(&mut o, &mut exec).unwrap();
        assert_eq!((s.ran, s.not_needed, s.already_done), (2, 2, 20));
        let (other, batch) = stored_reps(&o);
        assert_eq!((other.len(), batch.len()), (10, 12));
    }

    #[test]
    fn retry_failed_runs_the_failed_ones_again() {
        let d = tempfile::tempdir().unwrap();
        {
            let mut o = open(d.path(), false);
            let env = synth::synthetic_env(2);
            let run = o.runs[1].clone();
            let mut rec = synth::synthetic_record(&run, &env, vec![0], 0, None, Vec::new());
            rec.status = RunStatus::Failed;
            o.store
                .insert_run_traced(o.campaign.id, &rec, None)
                .unwrap();
        }
        assert_eq!(open(d.path(), false).pending.len(), 3);
        assert_eq!(open(d.path(), true).pending.len(), 4);
    }
}
