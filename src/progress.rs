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

    pub fn done(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

/// "1 h 02 min", "3 min 20 s", "4.2 s".
pub fn human_duration(s: f64) -> String {
    if !s.is_finite() {
        return "unknown".into();
    }
    if s < 0.05 {
        // Nothing (an empty sum of f64 is -0.0), or less than shows.
        return "0 s".into();
    }
    if s < 60.0 {
        format!("{s:.1} s")
    } else if s < 3600.0 {
        format!("{} min {:02} s", (s / 60.0) as u64, (s % 60.0) as u64)
    } else {
        format!(
            "{} h {:02} min",
            (s / 3600.0) as u64,
            ((s % 3600.0) / 60.0) as u64
        )
    }
}

/// "1.5 GB": bytes with a decimal prefix, for messages.
pub fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 7] = ["B", "kB", "MB", "GB", "TB", "PB", "EB"];
    let mut v = b as f64;
    let mut i = 0;
    while v >= 1000.0 && i + 1 < UNITS.len() {
        v /= 1000.0;
        i += 1;
    }
    if i == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", UNITS[i])
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn durations_read_naturally() {
        assert_eq!(super::human_duration(4.24), "4.2 s");
        assert_eq!(super::human_duration(200.0), "3 min 20 s");
        assert_eq!(super::human_duration(3720.0), "1 h 02 min");
        // A finished campaign has nothing left: the sum of no estimates is -0.0.
        assert_eq!(super::human_duration([].iter().sum()), "0 s");
        assert_eq!(super::human_duration(0.0), "0 s");
    }
}
