//! A worker process's measured figures as the analyses read them (the
//! report, `compare`, the campaign's precision rule): the row type every
//! [`super::metric::MetricDef`] takes a value of. It sits here, beside the
//! registry, below the store that fills it from the `processes` table and
//! the report that reads it.

use super::MetricFields;

/// The measured figures of one worker process of an ok run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReportProcess {
    pub run_id: i64,
    pub process_index: i64,
    pub nice: Option<i64>,
    pub rt_priority: Option<i64>,
    pub wall_ns: i64,
    pub usage: ReportUsage,
    pub work: Option<i64>,
    /// End of the process's measured work after barrier release.
    pub end_ns: Option<i64>,
    /// The fields of the registry that have a metric (rusage's `nvcsw`
    /// and `nivcsw`, schedstat's `run_ns`, `wait_ns`, `timeslices`, the
    /// migrations, …); a field no metric reads (the page faults, the
    /// block I/O counts) takes no room here.
    pub kernel: MetricFields,
}

/// The part of a process's [`crate::record::ProcessUsage`] the report's
/// metrics use: its CPU times. A report holds a million of these for a
/// large campaign, so the peak memory, which no metric reads, is left out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReportUsage {
    pub utime_us: u64,
    pub stime_us: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A report holds a million rows: 248 bytes each before the schedstat
    /// trio and the switches joined the registry, as `Option<i64>`
    /// members; their slots in [`MetricFields`] (a value and a bit each,
    /// for the fields with a metric only) take less, and a new field
    /// without a metric adds nothing.
    #[test]
    #[cfg(target_pointer_width = "64")]
    fn a_process_row_takes_no_more_room_than_before_the_registry_held_schedstat() {
        assert!(
            std::mem::size_of::<ReportProcess>() <= 200,
            "{}",
            std::mem::size_of::<ReportProcess>()
        );
    }
}
