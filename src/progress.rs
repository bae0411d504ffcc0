//! Progress of a campaign on the terminal: a bar with ETA weighted by each
//! run's estimated duration when stderr is a terminal, one line per run
//! otherwise (CI logs), nothing with --quiet. The bar is redrawn only between
//! runs: no ticker thread wakes up while workers are measured.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::plan::Run;

pub struct Progress {
    bar: Option<ProgressBar>,
    lines: bool,
    total: usize,
    /// Cumulative estimated ms before each run.
    offsets_ms: Vec<u64>,
}

impl Progress {
    pub fn new(estimates_s: &[f64], quiet: bool) -> Progress {
        let mut offsets_ms = Vec::with_capacity(estimates_s.len() + 1);
        let mut acc = 0u64;
        for e in estimates_s {
            offsets_ms.push(acc);
            acc += (e * 1000.0).max(1.0) as u64;
        }
        offsets_ms.push(acc);
        let interactive = crate::sys::proc::stderr_is_tty() && std::env::var_os("CI").is_none();
        let bar = (!quiet && interactive && !estimates_s.is_empty()).then(|| {
            let bar = ProgressBar::with_draw_target(Some(acc), ProgressDrawTarget::stderr());
            bar.set_style(
                ProgressStyle::with_template(
                    "{prefix} [{bar:30}] {percent:>3}% ETA {eta} {wide_msg}",
                )
                .expect("static template")
                .progress_chars("=> "),
            );
            bar
        });
        Progress {
            bar,
            lines: !quiet && !interactive,
            total: estimates_s.len(),
            offsets_ms,
        }
    }

    pub fn start(&mut self, i: usize, run: &Run) {
        if let Some(bar) = &self.bar {
            bar.set_prefix(format!("run {}/{}", i + 1, self.total));
            bar.set_message(crate::out::esc(&run.label()).into_owned());
            bar.set_position(self.offsets_ms[i]);
        }
    }

    pub fn finish(&mut self, i: usize, run: &Run, outcome: &str) {
        if let Some(bar) = &self.bar {
            bar.set_position(self.offsets_ms[i + 1]);
            if !outcome.starts_with("ok") {
                bar.println(format!(
                    "run {}/{} {}: {}",
                    i + 1,
                    self.total,
                    crate::out::esc(&run.label()),
                    crate::out::esc(outcome)
                ));
            }
        } else if self.lines {
            // Never fails: a closed standard error must not stop a campaign.
            note!(
                "run {}/{} {}: {}",
                i + 1,
                self.total,
                crate::out::esc(&run.label()),
                crate::out::esc(outcome)
            );
        }
    }

    /// A line of its own (above the bar, or among the run lines).
    pub fn note(&mut self, line: &str) {
        if let Some(bar) = &self.bar {
            bar.println(crate::out::esc(line));
        } else if self.lines {
            note!("{}", crate::out::esc(line));
        }
    }

    pub fn done(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}
