//! The records schedlab's sched_ext WRR scheduler (`ext/src/bpf/wrr.bpf.c`)
//! shares with user space: a turn as its ring buffer reports it, a group's
//! map value, why sched_ext ended it, and all it reported once unloaded.
//! Pure byte layouts, built with or without the `ext` feature, so their
//! tests run in every build; loading the scheduler is the ext crate's (`ext/src/sys/scx_wrr.rs`).

/// Size of `struct wrr_turn` in wrr.bpf.c.
pub const TURN_BYTES: usize = 56;
/// Size of `struct wrr_group` in wrr.bpf.c.
pub const GROUP_BYTES: usize = 80;

/// sched_ext's `SCX_EXIT_ERROR` (`enum scx_exit_kind`): kinds from here on
/// are errors (the BPF scheduler's, or the watchdog's).
pub const SCX_EXIT_ERROR: i32 = 1024;

/// How a turn ended (`WRR_END_*` in wrr.bpf.c).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnEnd {
    /// The slice was used up.
    Expired,
    /// No task of the worker's tree was left runnable (the last one went
    /// to sleep, or a task other than the worker's process exited).
    Blocked,
    /// The worker's process exited, no other task of its tree runnable.
    Exited,
    /// A task of the tree left sched_ext (the scheduler was unloaded, or
    /// its policy changed).
    Left,
}

/// One turn of one worker, as the BPF scheduler reported it: the turn of
/// the worker's group (its process and every task its tree forked), under
/// the worker's pid. Times are CLOCK_MONOTONIC ns (`bpf_ktime_get_ns`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Turn {
    pub pid: i32,
    pub cpu: u32,
    /// When a task of the group started running with a fresh turn.
    pub start_ns: u64,
    /// When the turn was used up, the group had no runnable task left (it
    /// blocked or exited), or it left.
    pub end_ns: u64,
    /// The group's CPU time over the turn (its tasks' sum_exec_runtime
    /// over their runs in it).
    pub cpu_ns: u64,
    /// The worker's slice.
    pub slice_ns: u64,
    /// The CPU time this turn aimed at: the slice minus what the group's
    /// turns since it last forfeited one got beyond it (plus what they fell
    /// short), within ±½ slice.
    pub target_ns: u64,
    pub end: TurnEnd,
    /// Times a task of the group was put on the CPU in this turn: more
    /// than 1 when a higher class preempted it and it resumed its slice,
    /// or when the group's tasks took the turn in succession.
    pub runs: u32,
}

/// A `struct wrr_turn` record from the ring buffer; None if malformed.
pub fn parse_turn(data: &[u8]) -> Option<Turn> {
    if data.len() < TURN_BYTES {
        return None;
    }
    let u32_at = |o: usize| u32::from_ne_bytes(data[o..o + 4].try_into().unwrap_or([0; 4]));
    let u64_at = |o: usize| u64::from_ne_bytes(data[o..o + 8].try_into().unwrap_or([0; 8]));
    let end = match u32_at(48) {
        0 => TurnEnd::Expired,
        1 => TurnEnd::Blocked,
        2 => TurnEnd::Exited,
        3 => TurnEnd::Left,
        _ => return None,
    };
    Some(Turn {
        pid: u32_at(0) as i32,
        cpu: u32_at(4),
        start_ns: u64_at(8),
        end_ns: u64_at(16),
        cpu_ns: u64_at(24),
        slice_ns: u64_at(32),
        target_ns: u64_at(40),
        end,
        runs: u32_at(52),
    })
}

/// One worker the scheduler is loaded for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Worker {
    pub pid: i32,
    pub slice_ns: u64,
    /// The CPU it is pinned to (its tree's turns are taken there).
    pub cpu: u32,
}

/// A `struct wrr_group` value: the worker's slice, pid, queue index and
/// CPU, and an empty turn.
pub fn group_value(w: &Worker, index: u32) -> [u8; GROUP_BYTES] {
    let mut v = [0u8; GROUP_BYTES];
    v[..8].copy_from_slice(&w.slice_ns.to_ne_bytes());
    v[8..12].copy_from_slice(&w.pid.to_ne_bytes());
    v[12..16].copy_from_slice(&index.to_ne_bytes());
    v[16..20].copy_from_slice(&w.cpu.to_ne_bytes());
    v
}

/// Why sched_ext ended the scheduler (`struct scx_exit_info`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExitInfo {
    /// `enum scx_exit_kind`: 64 (SCX_EXIT_UNREG) when schedlab unloaded it.
    pub kind: i32,
    pub code: i64,
    pub reason: String,
    pub msg: String,
}

impl ExitInfo {
    /// Whether the kernel ended the scheduler for an error (a BPF error,
    /// the watchdog's stall detection) rather than at schedlab's request.
    pub fn is_error(&self) -> bool {
        self.kind >= SCX_EXIT_ERROR
    }

    /// "reason: message", as the kernel put them.
    pub fn describe(&self) -> String {
        match (self.reason.is_empty(), self.msg.is_empty()) {
            (false, false) => format!("{} ({})", self.reason, self.msg),
            (false, true) => self.reason.clone(),
            (true, false) => self.msg.clone(),
            (true, true) => format!("exit kind {}", self.kind),
        }
    }
}

/// Everything the scheduler reported, after it was unloaded.
#[derive(Debug, Default)]
pub struct Unloaded {
    pub turns: Vec<Turn>,
    /// None if the scheduler never ran its exit callback.
    pub exit: Option<ExitInfo>,
    /// Turns the BPF side could not report (ring buffer full).
    pub lost_turns: u64,
    /// Tasks forked in a worker's tree that the BPF side could not put in
    /// its group (no memory for their task storage): they ran first come,
    /// first served.
    pub lost_members: u64,
    /// Records that could not be read.
    pub bad_records: u64,
    /// CPU time of the thread that read the ring buffer while the
    /// scheduler was attached (schedlab's only user-space work for this
    /// mechanism while it runs).
    pub reader_cpu_ns: u64,
    /// CPU time spent loading the scheduler (libbpf reading the kernel's
    /// BTF, the verifier) and attaching it, before the run.
    pub load_cpu_ns: u64,
    pub errors: Vec<String>,
}

/// A NUL-terminated C string in a fixed array.
pub fn c_text(chars: &[i8]) -> String {
    let bytes: Vec<u8> = chars
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(end: u32) -> Vec<u8> {
        let mut d = Vec::new();
        d.extend_from_slice(&4242u32.to_ne_bytes());
        d.extend_from_slice(&1u32.to_ne_bytes());
        for v in [100u64, 10_100, 9_990, 10_000, 9_500] {
            d.extend_from_slice(&v.to_ne_bytes());
        }
        d.extend_from_slice(&end.to_ne_bytes());
        d.extend_from_slice(&2u32.to_ne_bytes());
        d
    }

    #[test]
    fn parses_a_turn_record() {
        let t = parse_turn(&record(0)).unwrap();
        assert_eq!(
            t,
            Turn {
                pid: 4242,
                cpu: 1,
                start_ns: 100,
                end_ns: 10_100,
                cpu_ns: 9_990,
                slice_ns: 10_000,
                target_ns: 9_500,
                end: TurnEnd::Expired,
                runs: 2,
            }
        );
        assert_eq!(parse_turn(&record(1)).unwrap().end, TurnEnd::Blocked);
        assert_eq!(parse_turn(&record(3)).unwrap().end, TurnEnd::Left);
        assert_eq!(parse_turn(&record(9)), None);
        assert_eq!(parse_turn(&record(0)[..48]), None);
    }

    #[test]
    fn group_value_holds_slice_pid_index_and_cpu() {
        let w = Worker {
            pid: 4242,
            slice_ns: 30_000_000,
            cpu: 1,
        };
        let v = group_value(&w, 7);
        assert_eq!(u64::from_ne_bytes(v[..8].try_into().unwrap()), 30_000_000);
        assert_eq!(i32::from_ne_bytes(v[8..12].try_into().unwrap()), 4242);
        assert_eq!(u32::from_ne_bytes(v[12..16].try_into().unwrap()), 7);
        assert_eq!(u32::from_ne_bytes(v[16..20].try_into().unwrap()), 1);
        assert!(v[20..].iter().all(|&b| b == 0), "the turn starts empty");
    }

    #[test]
    fn exit_info_describes_itself() {
        let e = ExitInfo {
            kind: 1026,
            code: 0,
            reason: "runnable task stall".into(),
            msg: "pi[123] failed to run for 5.2s".into(),
        };
        assert!(e.is_error());
        assert_eq!(
            e.describe(),
            "runnable task stall (pi[123] failed to run for 5.2s)"
        );
        let unreg = ExitInfo {
            kind: 64,
            code: 0,
            reason: String::new(),
            msg: String::new(),
        };
        assert!(!unreg.is_error());
        assert_eq!(unreg.describe(), "exit kind 64");
        assert_eq!(c_text(&[104, 105, 0, 120]), "hi");
    }
}
