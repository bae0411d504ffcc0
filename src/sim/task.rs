//! What a simulated task does: a small program the engine asks for its
//! next action each time the previous one is done. Programs know nothing
//! of scheduling; they see the virtual time and the CPU they have used,
//! and record what the real worker records (work, wake-up latencies).
//!
//! - [`Program::Burn`]: CPU until an amount is used or a time passes (pi,
//!   hash, matmul, page-cache copy, an RT or fair hog).
//! - [`Program::Cycle`]: rounds of CPU bursts and blocking I/O served in a
//!   fixed time (mixed, copy with fsync or O_DIRECT).
//! - [`Program::Periodic`]: sleep to an absolute release, run, account the
//!   activation as `workload::periodic` does.
//! - [`Program::Ping`]: one end of a pingpong pair, woken by its peer.
//! - [`Program::Script`]: a fixed list of actions (a replayed task, see
//!   [`super::replay`]).

use crate::workload::latency::Latency;
use crate::workload::periodic;

/// What a task does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Use this much CPU time.
    Cpu(u64),
    /// Use the CPU until this absolute time (a duration-mode loop).
    CpuUntil(u64),
    /// Sleep until this absolute time (an absolute timer).
    Sleep(u64),
    /// Block for this long (an I/O served by a device).
    Io(u64),
    /// Give task `id` a token, waking it if it waits (instantaneous).
    Signal(usize),
    /// Close the channel to task `id`: its waits return at once.
    Close(usize),
    /// Block until a token arrives (or the channel is closed).
    Wait,
    Exit,
}

/// What a program sees when asked for its next action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ctx {
    pub now: u64,
    /// CPU used by the program's own `Cpu`/`CpuUntil` actions so far.
    pub work_cpu_ns: u64,
    /// The last `Wait` returned because the channel was closed.
    pub closed: bool,
}

/// One step of a [`Cycle`] round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Cpu(u64),
    Io(u64),
}

/// A task's behaviour.
#[derive(Debug, Clone)]
pub enum Program {
    Burn(Burn),
    Cycle(Cycle),
    Periodic(Periodic),
    Ping(Ping),
    Script(Script),
}

impl Program {
    pub fn next(&mut self, ctx: Ctx) -> Action {
        match self {
            Program::Burn(b) => b.next(),
            Program::Cycle(c) => c.next(ctx),
            Program::Periodic(p) => p.next(ctx),
            Program::Ping(p) => p.next(ctx),
            Program::Script(s) => s.next(),
        }
    }
}

/// A fixed list of actions, then exit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Script {
    pub actions: Vec<Action>,
    /// Actions handed out so far.
    pub done: usize,
}

impl Script {
    pub fn new(actions: Vec<Action>) -> Script {
        Script { actions, done: 0 }
    }

    fn next(&mut self) -> Action {
        match self.actions.get(self.done) {
            Some(&a) => {
                self.done += 1;
                a
            }
            None => Action::Exit,
        }
    }
}

/// CPU until `cpu_ns` is used, or until `until_ns`.
#[derive(Debug, Clone)]
pub struct Burn {
    pub cpu_ns: Option<u64>,
    pub until_ns: Option<u64>,
    started: bool,
}

impl Burn {
    pub fn amount(cpu_ns: u64) -> Burn {
        Burn {
            cpu_ns: Some(cpu_ns),
            until_ns: None,
            started: false,
        }
    }

    pub fn until(until_ns: u64) -> Burn {
        Burn {
            cpu_ns: None,
            until_ns: Some(until_ns),
            started: false,
        }
    }

    fn next(&mut self) -> Action {
        if self.started {
            return Action::Exit;
        }
        self.started = true;
        match (self.cpu_ns, self.until_ns) {
            (Some(ns), _) => Action::Cpu(ns),
            (None, Some(t)) => Action::CpuUntil(t),
            (None, None) => Action::Exit,
        }
    }
}

/// Rounds of steps: a fixed count, or until a time (checked before each
/// round, as the real loops check their deadline).
#[derive(Debug, Clone)]
pub struct Cycle {
    pub steps: Vec<Step>,
    pub rounds: Option<u64>,
    pub until_ns: Option<u64>,
    pub done_rounds: u64,
    /// Steps of the current round already issued.
    at: usize,
}

impl Cycle {
    pub fn new(steps: Vec<Step>, rounds: Option<u64>, until_ns: Option<u64>) -> Cycle {
        Cycle {
            steps,
            rounds,
            until_ns,
            done_rounds: 0,
            at: 0,
        }
    }

    fn next(&mut self, ctx: Ctx) -> Action {
        if self.at == self.steps.len() && self.at > 0 {
            self.done_rounds += 1;
            self.at = 0;
        }
        if self.at == 0 {
            let more = match (self.rounds, self.until_ns) {
                (Some(n), _) => self.done_rounds < n,
                (None, Some(t)) => ctx.now < t,
                (None, None) => false,
            };
            if !more || self.steps.is_empty() {
                return Action::Exit;
            }
        }
        let step = self.steps[self.at];
        self.at += 1;
        match step {
            Step::Cpu(ns) => Action::Cpu(ns),
            Step::Io(ns) => Action::Io(ns),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PeriodicState {
    /// About to sleep until `next` (plus the timer wake-up cost).
    Sleep,
    /// Woken: the wake-up time is taken when it first runs.
    Woken,
    /// Ran its work.
    Ran,
}

/// A periodic task (`workload::periodic`): releases every `period_ns`
/// from `anchor + period`, a wake-up `timer_wakeup_ns` after its timer
/// expires ([`hrtimer_expiry_ns`]: at the release, or up to its timer
/// slack later), `run_ns` of CPU per activation.
#[derive(Debug, Clone)]
pub struct Periodic {
    pub period_ns: u64,
    pub run_ns: u64,
    pub timer_wakeup_ns: u64,
    /// The task's timer slack (0 for RT and DEADLINE tasks).
    pub timer_slack_ns: u64,
    /// The scheduler tick's period, whose interrupt expires a slack timer
    /// early ([`hrtimer_expiry_ns`]); 0: no tick considered.
    pub tick_ns: u64,
    pub quota: u64,
    pub end_ns: u64,
    pub next_release_ns: u64,
    pub done: u64,
    pub misses: u64,
    pub skipped: u64,
    pub min_slack_ns: Option<i64>,
    pub wakeup: Latency,
    pub completion: Latency,
    woke_ns: u64,
    state: PeriodicState,
}

impl Periodic {
    /// Releases from `anchor_ns + period`; `quota` activations (or
    /// `u64::MAX`) before `end_ns` (or `u64::MAX`).
    pub fn new(
        anchor_ns: u64,
        period_ns: u64,
        run_ns: u64,
        timer_wakeup_ns: u64,
        quota: u64,
        end_ns: u64,
    ) -> Periodic {
        let period_ns = period_ns.max(1);
        Periodic {
            period_ns,
            run_ns,
            timer_wakeup_ns,
            timer_slack_ns: 0,
            tick_ns: 0,
            quota,
            end_ns,
            next_release_ns: anchor_ns.saturating_add(period_ns),
            done: 0,
            misses: 0,
            skipped: 0,
            min_slack_ns: None,
            wakeup: Latency::new(),
            completion: Latency::new(),
            woke_ns: 0,
            state: PeriodicState::Sleep,
        }
    }

    /// Sleeps armed with `slack_ns` of timer slack, on a CPU whose tick
    /// comes every `tick_ns` (virtual time 0 on a tick).
    pub fn with_timer_slack(mut self, slack_ns: u64, tick_ns: u64) -> Periodic {
        self.timer_slack_ns = slack_ns;
        self.tick_ns = tick_ns;
        self
    }

    fn next(&mut self, ctx: Ctx) -> Action {
        match self.state {
            PeriodicState::Sleep => {
                if self.done >= self.quota || self.next_release_ns >= self.end_ns {
                    return Action::Exit;
                }
                self.state = PeriodicState::Woken;
                // An absolute sleep whose time has passed returns at once.
                let expiry =
                    hrtimer_expiry_ns(self.next_release_ns, self.timer_slack_ns, self.tick_ns);
                let at = expiry.saturating_add(self.timer_wakeup_ns);
                Action::Sleep(at.max(ctx.now))
            }
            PeriodicState::Woken => {
                self.woke_ns = ctx.now;
                self.state = PeriodicState::Ran;
                Action::Cpu(self.run_ns)
            }
            PeriodicState::Ran => {
                let a = periodic::account(
                    self.next_release_ns,
                    self.period_ns,
                    self.woke_ns,
                    ctx.now,
                    self.end_ns,
                );
                self.wakeup.record_ns(a.wakeup_ns);
                self.completion.record_ns(a.completion_ns);
                self.min_slack_ns =
                    Some(self.min_slack_ns.map_or(a.slack_ns, |m| m.min(a.slack_ns)));
                self.misses += a.misses();
                self.skipped += a.skipped;
                self.done += 1;
                self.next_release_ns = a.next_release_ns;
                self.state = PeriodicState::Sleep;
                self.next(ctx)
            }
        }
    }
}

/// When an hrtimer armed for `[soft_ns, soft_ns + slack_ns]` fires: at its
/// hard expiry `soft + slack` (the clock event is programmed for the
/// earliest hard expiry, `hrtimer_update_next_event`), unless another
/// timer interrupt on the CPU comes first within the range, for which
/// the scheduler tick is taken: `__hrtimer_run_queues` then runs every
/// timer whose soft expiry has passed. The tick is the periodic
/// `tick_sched_timer`, aligned to multiples of `tick_ns`
/// (kernel/time/tick-sched.c; the model's virtual time starts on one). A
/// CPU that idles with its tick stopped (NO_HZ) would fire at the hard
/// expiry even so; the model assumes the tick runs.
pub fn hrtimer_expiry_ns(soft_ns: u64, slack_ns: u64, tick_ns: u64) -> u64 {
    let hard = soft_ns.saturating_add(slack_ns);
    if slack_ns == 0 || tick_ns == 0 {
        return hard;
    }
    let tick = soft_ns.div_ceil(tick_ns).saturating_mul(tick_ns);
    tick.min(hard)
}

/// One end of a pingpong pair. The initiator writes (its hand-off CPU),
/// signals the echo and waits for the reply; the echo waits, hands off
/// and signals back. As `workload::pingpong` reads its clock once per
/// exchange, a round trip is the time between two reads returning (the
/// initiator's first from its first write; the echo's first read starts
/// none, so it records one fewer).
#[derive(Debug, Clone)]
pub struct Ping {
    pub initiator: bool,
    pub peer: usize,
    pub handoff_ns: u64,
    /// Initiator: round trips to do, or until `until_ns`.
    pub quota: u64,
    pub until_ns: u64,
    pub round_trips: u64,
    pub latency: Latency,
    pub first_ns: Option<u64>,
    pub last_ns: u64,
    /// The last clock read: where the next round trip starts.
    mark_ns: Option<u64>,
    state: u8,
}

impl Ping {
    pub fn new(initiator: bool, peer: usize, handoff_ns: u64, quota: u64, until_ns: u64) -> Ping {
        Ping {
            initiator,
            peer,
            handoff_ns,
            quota,
            until_ns,
            round_trips: 0,
            latency: Latency::new(),
            first_ns: None,
            last_ns: 0,
            mark_ns: None,
            state: 0,
        }
    }

    fn next(&mut self, ctx: Ctx) -> Action {
        self.first_ns.get_or_insert(ctx.now);
        self.last_ns = ctx.now;
        if self.initiator {
            self.next_initiator(ctx)
        } else {
            self.next_echo(ctx)
        }
    }

    /// States: 0 write, 1 signal, 2 wait, 3 reply read.
    fn next_initiator(&mut self, ctx: Ctx) -> Action {
        match self.state {
            0 => {
                if self.round_trips >= self.quota || ctx.now >= self.until_ns {
                    self.state = 4;
                    return Action::Close(self.peer);
                }
                self.mark_ns.get_or_insert(ctx.now);
                self.state = 1;
                Action::Cpu(self.handoff_ns)
            }
            1 => {
                self.state = 2;
                Action::Signal(self.peer)
            }
            2 => {
                self.state = 3;
                Action::Wait
            }
            3 => {
                if let Some(t) = self.mark_ns.replace(ctx.now) {
                    self.latency.record_ns(ctx.now.saturating_sub(t));
                }
                self.round_trips += 1;
                self.state = 0;
                self.next_initiator(ctx)
            }
            _ => Action::Exit,
        }
    }

    /// States: 0 wait, 1 got a token (or the end), 2 signal back.
    fn next_echo(&mut self, ctx: Ctx) -> Action {
        match self.state {
            0 => {
                self.state = 1;
                Action::Wait
            }
            1 => {
                if ctx.closed {
                    self.state = 3;
                    return Action::Exit;
                }
                if let Some(t) = self.mark_ns.replace(ctx.now) {
                    self.latency.record_ns(ctx.now.saturating_sub(t));
                }
                self.round_trips += 1;
                self.state = 2;
                Action::Cpu(self.handoff_ns)
            }
            2 => {
                self.state = 0;
                Action::Signal(self.peer)
            }
            _ => Action::Exit,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(now: u64) -> Ctx {
        Ctx {
            now,
            work_cpu_ns: 0,
            closed: false,
        }
    }

    #[test]
    fn burn_runs_once_then_exits() {
        let mut b = Program::Burn(Burn::amount(5));
        assert_eq!(b.next(ctx(0)), Action::Cpu(5));
        assert_eq!(b.next(ctx(5)), Action::Exit);
        let mut u = Program::Burn(Burn::until(100));
        assert_eq!(u.next(ctx(0)), Action::CpuUntil(100));
    }

    #[test]
    fn cycle_counts_rounds_and_stops_at_its_time() {
        let mut c = Cycle::new(vec![Step::Cpu(10), Step::Io(5)], Some(2), None);
        let got: Vec<Action> = (0..5).map(|i| c.next(ctx(i))).collect();
        assert_eq!(
            got,
            [
                Action::Cpu(10),
                Action::Io(5),
                Action::Cpu(10),
                Action::Io(5),
                Action::Exit
            ]
        );
        assert_eq!(c.done_rounds, 2);
        let mut d = Cycle::new(vec![Step::Cpu(10)], None, Some(15));
        assert_eq!(d.next(ctx(0)), Action::Cpu(10));
        assert_eq!(d.next(ctx(10)), Action::Cpu(10));
        assert_eq!(d.next(ctx(20)), Action::Exit);
        assert_eq!(d.done_rounds, 2);
    }

    /// Period 1 ms, 100 µs of work, a 5 µs timer cost: releases at 1, 2 ms;
    /// woken 7 µs late the first time (5 µs timer + 2 µs queued).
    #[test]
    fn periodic_accounts_each_activation() {
        let mut p = Periodic::new(0, 1_000_000, 100_000, 5_000, 2, u64::MAX);
        assert_eq!(p.next(ctx(0)), Action::Sleep(1_005_000));
        assert_eq!(p.next(ctx(1_007_000)), Action::Cpu(100_000));
        assert_eq!(p.next(ctx(1_107_000)), Action::Sleep(2_005_000));
        assert_eq!(p.next(ctx(2_005_000)), Action::Cpu(100_000));
        assert_eq!(p.next(ctx(2_105_000)), Action::Exit);
        assert_eq!(p.done, 2);
        assert_eq!(p.wakeup.count(), 2);
        // 7 µs, at the histogram's three significant digits.
        let max = p.wakeup.percentiles().max_ns;
        assert!((7_000..7_010).contains(&max), "{max}");
        assert_eq!(p.misses, 0);
    }

    /// A fair task's sleep carries 50 µs of slack: it fires at the hard
    /// expiry, or at a tick inside the range; RT (slack 0) at the release.
    #[test]
    fn timer_slack_defers_the_expiry_to_the_hard_end_or_a_tick() {
        // Release 1.000 ms, tick every 4 ms: no tick in [1.000, 1.050] ms.
        assert_eq!(hrtimer_expiry_ns(1_000_000, 50_000, 4_000_000), 1_050_000);
        // Release 3.980 ms: the tick at 4 ms comes first.
        assert_eq!(hrtimer_expiry_ns(3_980_000, 50_000, 4_000_000), 4_000_000);
        // On a tick: expires with it.
        assert_eq!(hrtimer_expiry_ns(8_000_000, 50_000, 4_000_000), 8_000_000);
        // No slack (RT, DEADLINE): at the release, whatever the tick.
        assert_eq!(hrtimer_expiry_ns(1_000_000, 0, 4_000_000), 1_000_000);
        let mut p = Periodic::new(0, 1_000_000, 100_000, 5_000, 1, u64::MAX)
            .with_timer_slack(50_000, 4_000_000);
        // 1 ms + 50 µs slack + 5 µs timer cost.
        assert_eq!(p.next(ctx(0)), Action::Sleep(1_055_000));
        assert_eq!(p.next(ctx(1_055_000)), Action::Cpu(100_000));
        assert_eq!(p.next(ctx(1_155_000)), Action::Exit);
        // Its wake-up latency counts the slack: 55 µs.
        let max = p.wakeup.percentiles().max_ns;
        assert!((55_000..55_100).contains(&max), "{max}");
    }

    /// Hand-offs of 10 µs: the initiator writes at 0, the echo (woken at
    /// 12 µs) replies at 22 µs, the initiator reads it at 25 µs: a 25 µs
    /// round trip; then the initiator closes and the echo ends.
    #[test]
    fn pingpong_ends_exchange_tokens() {
        const US: u64 = 1000;
        let mut i = Ping::new(true, 1, 10 * US, 1, u64::MAX);
        let mut e = Ping::new(false, 0, 10 * US, 0, u64::MAX);
        assert_eq!(e.next(ctx(0)), Action::Wait);
        assert_eq!(i.next(ctx(0)), Action::Cpu(10 * US));
        assert_eq!(i.next(ctx(10 * US)), Action::Signal(1));
        assert_eq!(i.next(ctx(10 * US)), Action::Wait);
        assert_eq!(e.next(ctx(12 * US)), Action::Cpu(10 * US));
        assert_eq!(e.next(ctx(22 * US)), Action::Signal(0));
        assert_eq!(e.next(ctx(22 * US)), Action::Wait);
        assert_eq!(i.next(ctx(25 * US)), Action::Close(1));
        assert_eq!(i.round_trips, 1);
        let rt = i.latency.quantile_ns(0.5);
        assert!((25 * US..25 * US + 25).contains(&rt), "{rt}");
        let closed = Ctx {
            closed: true,
            ..ctx(30 * US)
        };
        assert_eq!(e.next(closed), Action::Exit);
        assert_eq!(e.round_trips, 1);
    }
}
