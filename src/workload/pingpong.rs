//! The pingpong workload: two processes pass a token back and forth, the
//! method of `perf bench sched pipe`, to measure what a wake-up and a
//! context switch cost under a policy.
//!
//! Processes come in pairs, (0, 1), (2, 3), …: the even one is the
//! initiator, the odd one the echo. Each pair has two one-way channels, two
//! pipes (`transport = "pipe"`, the default, as perf) or two eventfd
//! counters (`"eventfd"`). One round trip: the initiator writes a token (a
//! 4-byte int on a pipe, as perf; an 8-byte count on an eventfd) and blocks
//! reading the reply; the echo, blocked reading, gets it and writes it
//! back. Every loop iteration of either end is one write and one read, as
//! in perf; the token is the round trip's sequence number and both ends
//! check it, so a lost or duplicated token is an error, never a faster run.
//!
//! The initiator decides when to stop, after `round_trips` or at the run's
//! common deadline (`duration_s`), and tells the echo: it closes its write
//! end (pipe: the echo reads end-of-file) or writes a stop value (eventfd,
//! which has no end-of-file). Neither end waits for ever when its peer
//! dies: a pipe end sees end-of-file or EPIPE; an eventfd end is ended by
//! the run's timeout.
//!
//! Both ends are measured. Each records, per exchange, its round-trip time
//! (from its write to its next read returning; one clock read per
//! iteration) into the histogram `round_trip`, the primary latency. The
//! initiator records one per round trip; the echo one fewer (its first
//! read follows no write of its own). Figures, per end: `round_trips`,
//! `round_trips_per_s`, and `usecs_per_op` = elapsed / round trips in µs,
//! perf's figure (the initiator's elapsed runs from its first write to its
//! last reply; the echo's from its loop's start to the stop).

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;

use anyhow::{Context, bail, ensure};
use serde::{Deserialize, Serialize};

use super::kind::{Entry, Kind, scale_stop, stop_cost_s};
use super::latency::Latency;
use super::modelled::ModelTask;
use super::wiring::{self, Wiring};
use super::{Deadline, Rates, Stop, WorkContext, WorkOutput, Workload, figures, per_second};
use crate::sys::proc::monotonic_ns;

/// How the two ends of a pair reach each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Transport {
    /// Two pipes, a 4-byte token (perf bench sched pipe).
    Pipe,
    /// Two eventfd counters in plain mode, an 8-byte count.
    Eventfd,
}

/// The transports' names in specs.
pub const TRANSPORTS: &[&str] = &["pipe", "eventfd"];

/// Ping-pong between pairs of processes. Work unit: round trips.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PingpongParams {
    pub stop: Stop,
    pub transport: Transport,
}

/// Which end of its pair a process is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// Writes first, waits for the reply, decides when to stop.
    Initiator,
    /// Echoes each token until told to stop.
    Echo,
}

/// The end process `index` of a run is: pairs are (0, 1), (2, 3), ….
pub fn side(index: usize) -> Side {
    if index.is_multiple_of(2) {
        Side::Initiator
    } else {
        Side::Echo
    }
}

/// On an eventfd, the stop value: above every token (a token is its
/// sequence number + 1, never 0, which would wake nobody).
const EVENTFD_STOP: u64 = 1 << 40;

/// One end's channels: what the peer writes to it, what it writes to the peer.
struct End {
    transport: Transport,
    rx: File,
    /// `None` once a pipe end has closed it to stop.
    tx: Option<File>,
}

/// Fill `buf` from `f`, retrying short reads and EINTR. `Ok(false)` at
/// end-of-file before the first byte; end-of-file within is an error.
fn read_full(f: &mut File, buf: &mut [u8]) -> io::Result<bool> {
    let mut got = 0;
    while got < buf.len() {
        match f.read(&mut buf[got..]) {
            Ok(0) if got == 0 => return Ok(false),
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("end-of-file after {got} of {} bytes", buf.len()),
                ));
            }
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

impl End {
    fn new(transport: Transport, rx: OwnedFd, tx: OwnedFd) -> End {
        End {
            transport,
            rx: File::from(rx),
            tx: Some(File::from(tx)),
        }
    }

    fn tx(&mut self) -> io::Result<&mut File> {
        self.tx
            .as_mut()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotConnected, "stopped already"))
    }

    /// Write token `seq` to the peer.
    fn send(&mut self, seq: u32) -> io::Result<()> {
        match self.transport {
            Transport::Pipe => self.tx()?.write_all(&seq.to_ne_bytes()),
            Transport::Eventfd => self.tx()?.write_all(&(u64::from(seq) + 1).to_ne_bytes()),
        }
    }

    /// The peer's next token, or `None` when it said stop.
    fn recv(&mut self) -> anyhow::Result<Option<u32>> {
        match self.transport {
            Transport::Pipe => {
                let mut b = [0u8; 4];
                Ok(read_full(&mut self.rx, &mut b)?.then_some(u32::from_ne_bytes(b)))
            }
            Transport::Eventfd => {
                let mut b = [0u8; 8];
                ensure!(
                    read_full(&mut self.rx, &mut b)?,
                    "end-of-file on an eventfd"
                );
                match u64::from_ne_bytes(b) {
                    EVENTFD_STOP => Ok(None),
                    v @ 1..=0x1_0000_0000 => Ok(Some((v - 1) as u32)),
                    v => bail!("unexpected count {v} on the eventfd (two writes at once?)"),
                }
            }
        }
    }

    /// Tell the peer to stop.
    fn stop(&mut self) -> io::Result<()> {
        match self.transport {
            Transport::Pipe => {
                drop(self.tx.take());
                Ok(())
            }
            Transport::Eventfd => self.tx()?.write_all(&EVENTFD_STOP.to_ne_bytes()),
        }
    }
}

/// What one end did.
#[derive(Debug)]
struct Exchanged {
    round_trips: u64,
    elapsed_ns: u64,
    latency: Latency,
}

/// The initiator's loop: round trips until `stop`, then tell the echo.
fn initiate(end: &mut End, stop: Stop, release_ns: Option<u64>) -> anyhow::Result<Exchanged> {
    let (limit, deadline) = match stop {
        Stop::Work(n) => (n, None),
        Stop::DurationNs(ns) => (u64::MAX, Some(Deadline::after(release_ns, ns))),
    };
    let mut latency = Latency::new();
    let start = monotonic_ns();
    let mut t = start;
    let mut done = 0u64;
    while done < limit && !deadline.is_some_and(Deadline::past) {
        let seq = done as u32;
        end.send(seq)
            .with_context(|| format!("sending token {done} to the echo end"))?;
        match end.recv().context("reading the echo end's reply")? {
            Some(v) if v == seq => {}
            Some(v) => bail!("the echo end replied {v} to token {seq}"),
            None => bail!("the echo end stopped after {done} round trips"),
        }
        let now = monotonic_ns();
        latency.record_ns(now - t);
        t = now;
        done += 1;
    }
    end.stop().context("telling the echo end to stop")?;
    Ok(Exchanged {
        round_trips: done,
        elapsed_ns: t - start,
        latency,
    })
}

/// The echo's loop: reply to every token until told to stop.
fn echo(end: &mut End) -> anyhow::Result<Exchanged> {
    let mut latency = Latency::new();
    let start = monotonic_ns();
    let mut last_write: Option<u64> = None;
    let mut done = 0u64;
    loop {
        let got = end.recv().context("reading the initiator's token")?;
        let now = monotonic_ns();
        let Some(seq) = got else {
            return Ok(Exchanged {
                round_trips: done,
                elapsed_ns: now - start,
                latency,
            });
        };
        ensure!(
            seq == done as u32,
            "token {seq} arrived where {} was due",
            done as u32
        );
        if let Some(w) = last_write {
            latency.record_ns(now - w);
        }
        end.send(seq)
            .with_context(|| format!("replying to token {done}"))?;
        last_write = Some(now);
        done += 1;
    }
}

/// A connected initiator and echo in this process (calibration, tests).
fn end_pair(transport: Transport) -> anyhow::Result<(End, End)> {
    let channel = || -> anyhow::Result<(OwnedFd, OwnedFd)> {
        Ok(match transport {
            Transport::Pipe => crate::sys::proc::pipe()?,
            Transport::Eventfd => {
                let e = crate::sys::fds::eventfd(false)?;
                (e.try_clone()?, e)
            }
        })
    };
    let (to_echo_r, to_echo_w) = channel()?;
    let (to_init_r, to_init_w) = channel()?;
    Ok((
        End::new(transport, to_init_r, to_echo_w),
        End::new(transport, to_echo_r, to_init_w),
    ))
}

/// Seconds per round trip of two threads of this process ping-ponging
/// over pipes for `duration_ns` (`Rates::wake_round_trip_s`): two pipe
/// writes, two reads and two wake-ups.
pub fn calibrate_round_trip(duration_ns: u64) -> anyhow::Result<f64> {
    let (mut a, mut b) = end_pair(Transport::Pipe)?;
    let peer = std::thread::spawn(move || echo(&mut b));
    let ours = initiate(&mut a, Stop::DurationNs(duration_ns), None);
    drop(a); // end-of-file for the echo even if the loop failed
    let theirs = peer
        .join()
        .map_err(|_| anyhow::anyhow!("the calibration's echo thread panicked"))?;
    let ours = ours?;
    theirs?;
    ensure!(
        ours.round_trips > 0,
        "no round trip in {duration_ns} ns of calibration"
    );
    Ok(ours.elapsed_ns as f64 / 1e9 / ours.round_trips as f64)
}

/// The report of one end.
fn output(ex: Exchanged) -> WorkOutput {
    let usecs_per_op = ex.elapsed_ns as f64 / 1e3 / ex.round_trips.max(1) as f64;
    WorkOutput {
        work: ex.round_trips,
        elapsed_ns: ex.elapsed_ns,
        figures: figures([
            ("round_trips", ex.round_trips as f64),
            (
                "round_trips_per_s",
                per_second(ex.round_trips as f64, ex.elapsed_ns),
            ),
            ("usecs_per_op", usecs_per_op),
        ]),
        latency: [("round_trip".to_string(), ex.latency.encode())].into(),
    }
}

/// Worker side of one end, given its two channels (read, write).
fn run(
    p: &PingpongParams,
    index: usize,
    fds: Vec<OwnedFd>,
    release_ns: Option<u64>,
) -> anyhow::Result<WorkOutput> {
    let n = fds.len();
    let [rx, tx]: [OwnedFd; 2] = fds.try_into().map_err(|_| {
        anyhow::anyhow!("pingpong worker {index} was given {n} channels instead of 2")
    })?;
    let mut end = End::new(p.transport, rx, tx);
    let ex = match side(index) {
        Side::Initiator => initiate(&mut end, p.stop, release_ns)?,
        Side::Echo => echo(&mut end)?,
    };
    if let Stop::Work(want) = p.stop {
        ensure!(
            ex.round_trips == want,
            "{} round trips instead of {want}",
            ex.round_trips
        );
    }
    Ok(output(ex))
}

impl Kind for PingpongParams {
    fn name(&self) -> &'static str {
        "pingpong"
    }
    fn work_unit(&self) -> &'static str {
        "round_trips"
    }
    fn stop(&self) -> Stop {
        self.stop
    }
    fn set_stop(&mut self, stop: Stop) {
        self.stop = stop;
    }
    fn scaled(&self, f: f64) -> Workload {
        Workload::Pingpong(PingpongParams {
            stop: scale_stop(self.stop, f),
            ..self.clone()
        })
    }
    fn group_size(&self) -> u32 {
        2
    }
    /// Per pair, two one-way channels; each end gets (its read end, its
    /// write end).
    fn wire(&self, processes: usize) -> anyhow::Result<Wiring> {
        ensure!(
            processes.is_multiple_of(2),
            "pingpong runs in pairs, got {processes} processes"
        );
        let mut w = Wiring::default();
        for pair in 0..processes / 2 {
            let (init, echo) = (2 * pair, 2 * pair + 1);
            let ((to_echo_r, to_echo_w), (to_init_r, to_init_w)) = match self.transport {
                Transport::Pipe => (w.pipe()?, w.pipe()?),
                Transport::Eventfd => {
                    let (a, b) = (w.counter()?, w.counter()?);
                    ((a, a), (b, b))
                }
            };
            w.give(init, to_init_r);
            w.give(init, to_echo_w);
            w.give(echo, to_echo_r);
            w.give(echo, to_init_w);
        }
        Ok(w)
    }
    fn primary_latency(&self) -> Option<&'static str> {
        Some("round_trip")
    }
    fn run(&self, ctx: &WorkContext) -> anyhow::Result<WorkOutput> {
        run(self, ctx.index, wiring::take(&ctx.fds)?, ctx.release_ns)
    }
    /// Cost model: a round trip costs the pair one calibrated
    /// `wake_round_trip_s` of CPU (two writes, two reads, two wake-ups),
    /// half on each end. Two ends sharing one CPU then take round trips ×
    /// `wake_round_trip_s`, which the plan's estimate gives them; ends on
    /// separate CPUs also wait for each other, so a spread run may take up
    /// to twice its estimate.
    fn estimate_cpu_s(&self, rates: &Rates) -> f64 {
        stop_cost_s(self.stop, rates.wake_round_trip_s / 2.0)
    }
    fn model(&self) -> ModelTask<'_> {
        ModelTask::Pingpong
    }
    /// It wakes, works briefly and waits for its peers again.
    fn cpu_bound(&self) -> bool {
        false
    }
}

/// The pingpong workload's registration.
pub const ENTRY: Entry = Entry {
    name: "pingpong",
    parse: |k| {
        k.only(&["round_trips", "duration_s", "transport"])?;
        let transport = match k.choice("transport", TRANSPORTS, "pipe")? {
            "eventfd" => Transport::Eventfd,
            _ => Transport::Pipe,
        };
        Ok(Workload::Pingpong(PingpongParams {
            stop: k.stop("round_trips", 10_000)?,
            transport,
        }))
    },
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::keys::Keys;

    fn parse(text: &str) -> Result<Workload, crate::workload::keys::KeyError> {
        let t: toml::Table = text.parse().unwrap();
        (ENTRY.parse)(&Keys::new("pp", "pingpong", &t))
    }

    fn params(w: Workload) -> PingpongParams {
        match w {
            Workload::Pingpong(p) => p,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn keys_defaults_and_refusals() {
        let p = params(parse("").unwrap());
        assert_eq!(p.stop, Stop::Work(10_000));
        assert_eq!(p.transport, Transport::Pipe);
        let p = params(parse("duration_s = 0.5\ntransport = \"eventfd\"").unwrap());
        assert_eq!(p.stop, Stop::DurationNs(500_000_000));
        assert_eq!(p.transport, Transport::Eventfd);
        let e = parse("transport = \"futex\"").unwrap_err();
        assert_eq!(e.key, "workloads.pp.transport");
        assert!(
            e.message.contains("allowed: pipe, eventfd"),
            "{}",
            e.message
        );
        let e = parse("round_trips = 0").unwrap_err();
        assert_eq!(e.key, "workloads.pp.round_trips");
        let e = parse("round_trips = 5\nduration_s = 1").unwrap_err();
        assert!(e.message.contains("not both"), "{}", e.message);
        let e = parse("loops = 5").unwrap_err();
        assert_eq!(e.key, "workloads.pp.loops");
    }

    #[test]
    fn serde_scale_estimate_and_pairs() {
        let w = Workload::Pingpong(PingpongParams {
            stop: Stop::Work(1000),
            transport: Transport::Eventfd,
        });
        let s = serde_json::to_string(&w).unwrap();
        assert_eq!(
            s,
            r#"{"kind":"pingpong","stop":{"work":1000},"transport":"eventfd"}"#
        );
        assert_eq!(serde_json::from_str::<Workload>(&s).unwrap(), w);
        assert_eq!(params(w.scaled(0.25)).stop, Stop::Work(250));
        assert_eq!(params(w.scaled(1e-9)).stop, Stop::Work(1));
        assert_eq!((w.group_size(), w.work_unit()), (2, "round_trips"));
        assert_eq!(w.primary_latency(), Some("round_trip"));
        let rates = Rates {
            pi_iter_per_s: 1.0,
            hash_per_s: 1.0,
            flops_per_s: 1.0,
            copy_bytes_per_s: 1.0,
            wake_round_trip_s: 10e-6,
        };
        assert!((w.estimate_cpu_s(&rates) - 1000.0 * 5e-6).abs() < 1e-12);
        assert_eq!(
            w.with_stop(Stop::DurationNs(2_000_000_000))
                .estimate_cpu_s(&rates),
            2.0
        );
        assert_eq!(
            (0..5).map(side).collect::<Vec<_>>(),
            [
                Side::Initiator,
                Side::Echo,
                Side::Initiator,
                Side::Echo,
                Side::Initiator
            ]
        );
    }

    #[test]
    fn wiring_gives_each_end_its_read_then_write_channel() {
        for transport in [Transport::Pipe, Transport::Eventfd] {
            let p = PingpongParams {
                stop: Stop::Work(1),
                transport,
            };
            let w = p.wire(4).unwrap();
            let per_pair = if transport == Transport::Pipe { 4 } else { 2 };
            assert_eq!(w.held(), 2 * per_pair);
            for i in 0..4 {
                assert_eq!(w.fds_of(i).len(), 2);
            }
            let (init, echo) = (w.fds_of(2), w.fds_of(3));
            if transport == Transport::Eventfd {
                // One counter each way: the initiator writes where the echo reads.
                assert_eq!((init[1], echo[1]), (echo[0], init[0]));
            } else {
                let mut all = [init, echo].concat();
                all.sort_unstable();
                all.dedup();
                assert_eq!(all.len(), 4, "four pipe ends");
            }
            assert!(p.wire(3).is_err());
        }
    }

    fn exchange(transport: Transport, stop: Stop) -> (Exchanged, Exchanged) {
        let (mut a, mut b) = end_pair(transport).unwrap();
        let peer = std::thread::spawn(move || echo(&mut b).unwrap());
        let ours = initiate(&mut a, stop, None).unwrap();
        (ours, peer.join().unwrap())
    }

    #[test]
    fn both_transports_exchange_exactly_and_stop_the_echo() {
        for transport in [Transport::Pipe, Transport::Eventfd] {
            let (i, e) = exchange(transport, Stop::Work(500));
            assert_eq!((i.round_trips, e.round_trips), (500, 500), "{transport:?}");
            assert_eq!(i.latency.count(), 500);
            assert_eq!(e.latency.count(), 499);
            assert!(i.elapsed_ns > 0 && e.elapsed_ns > 0);
            let (i, e) = exchange(transport, Stop::DurationNs(5_000_000));
            assert!(i.round_trips > 0);
            assert_eq!(i.round_trips, e.round_trips);
            assert!(i.elapsed_ns >= 4_000_000, "{}", i.elapsed_ns);
        }
    }

    #[test]
    fn a_dead_peer_is_an_error_not_a_hang() {
        let (mut a, b) = end_pair(Transport::Pipe).unwrap();
        drop(b);
        let e = initiate(&mut a, Stop::Work(3), None).unwrap_err();
        assert!(format!("{e:#}").contains("token 0"), "{e:#}");
        let (a, mut b) = end_pair(Transport::Pipe).unwrap();
        drop(a);
        assert_eq!(echo(&mut b).unwrap().round_trips, 0);
    }

    #[test]
    fn figures_are_perfs() {
        let mut latency = Latency::new();
        latency.record_ns(4_000);
        let out = output(Exchanged {
            round_trips: 2000,
            elapsed_ns: 10_000_000,
            latency,
        });
        assert_eq!(out.work, 2000);
        assert_eq!(out.figures["round_trips"], 2000.0);
        assert_eq!(out.figures["usecs_per_op"], 5.0);
        assert_eq!(out.figures["round_trips_per_s"], 200_000.0);
        let h = Latency::decode(&out.latency["round_trip"]).unwrap();
        assert_eq!(h.count(), 1);
    }

    #[test]
    fn calibration_measures_a_round_trip() {
        let s = calibrate_round_trip(3_000_000).unwrap();
        assert!(s > 1e-8 && s < 1e-2, "{s}");
    }
}
