//! The request workload (schbench style): groups of one messenger process
//! and `workers` worker processes exchanging requests over pipes in a
//! closed loop, measuring how long a woken worker waits for the CPU and
//! how long a request takes.
//!
//! This file owns the group layout (which process of a run is whose
//! messenger or worker, [`role`]), the pipes between them ([`Kind::wire`]),
//! the fixed-size messages they exchange ([`Msg`]), and the two loops.
//!
//! A group is `workers + 1` consecutive processes: process i belongs to
//! group i / (workers + 1), and the first of each group is its messenger.
//! Each worker has a request pipe from its messenger; the workers of a
//! group share one reply pipe to it (a message is 24 bytes, and writes of
//! at most PIPE_BUF bytes to a pipe are atomic, so replies never mix).
//!
//! The messenger sends every worker a request stamped with the
//! CLOCK_MONOTONIC send time, and whenever a reply from worker k arrives
//! sends worker k its next one, until each worker has had `requests` (or
//! the `duration_s` window since the run's release has passed: requests
//! out by then are still served); then it sends each worker an end message
//! carrying the count it sent and closes the request pipes. A worker, per
//! request: wake-up latency = now − send time (histogram `wakeup`), then
//! `request_us` of its own CPU time, request latency = completion − send
//! time (histogram `request`, the primary latency), then the reply. The
//! first requests wait for the worker's own start after release too.
//!
//! Failures end the group instead of hanging it: a worker whose messenger
//! died reads end-of-file without an end message, or fails to reply
//! (EPIPE); a messenger whose worker died fails to send to it (EPIPE), or
//! finds its request pipe without a reader while waiting for replies;
//! each returns an error naming the peer's process. (The parent closes its
//! copies of the pipes once every worker is spawned, see [`super::wiring`].)
//!
//! Figures: `requests` (a worker: requests served; the messenger: requests
//! sent) and `requests_per_s`. Work unit: requests, the same per process.
//! The messenger records no latency. Both ends verify the exchange: every
//! request is answered by the worker it went to, in order, a worker served
//! exactly what its end message says was sent, and its histograms and CPU
//! time burnt match the requests it served.

use super::kind::{Entry, Kind, scale_stop};
use super::latency::Latency;
use super::periodic::burn_cpu_ns;
use super::wiring::{self, Wiring};
use super::{Deadline, Rates, Stop, WorkContext, WorkOutput, Workload};
use super::{elapsed_ns, figures, per_second};
use crate::sys::fds;
use crate::sys::proc::monotonic_ns;
use anyhow::{Context, bail, ensure};
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::time::Instant;

/// Request/reply groups. Work unit: requests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestParams {
    /// Requests per worker, or the duration.
    pub stop: Stop,
    /// Worker processes per messenger.
    pub workers: u32,
    /// CPU time of work per request.
    pub request_us: u64,
}

/// Most workers a messenger serves.
pub const MAX_WORKERS: i64 = 1000;

/// A process's part in its group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Messenger {
        group: usize,
    },
    Worker {
        group: usize,
        /// The worker's number within its group, from 0.
        worker: u32,
        /// The process index of its messenger.
        messenger: usize,
    },
}

/// The role of process `index` in groups of one messenger and `workers`
/// workers. Pure.
pub fn role(index: usize, workers: u32) -> Role {
    let size = workers as usize + 1;
    let (group, pos) = (index / size, index % size);
    match pos {
        0 => Role::Messenger { group },
        _ => Role::Worker {
            group,
            worker: (pos - 1) as u32,
            messenger: group * size,
        },
    }
}

/// Bytes of every message (well under PIPE_BUF: writes are atomic).
pub const MSG_BYTES: usize = 24;

/// What messenger and workers say to each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Msg {
    /// Messenger → worker: request number `seq` (from 1), sent at `sent_ns`.
    Request { worker: u32, seq: u64, sent_ns: u64 },
    /// Messenger → worker: no more requests; `count` were sent.
    End { worker: u32, count: u64 },
    /// Worker → messenger: request `seq` is done.
    Reply { worker: u32, seq: u64, sent_ns: u64 },
}

impl Msg {
    /// Tag (u32), worker (u32), two u64 fields; little-endian.
    pub fn encode(&self) -> [u8; MSG_BYTES] {
        let (tag, worker, a, b) = match *self {
            Msg::Request {
                worker,
                seq,
                sent_ns,
            } => (1u32, worker, seq, sent_ns),
            Msg::End { worker, count } => (2, worker, count, 0),
            Msg::Reply {
                worker,
                seq,
                sent_ns,
            } => (3, worker, seq, sent_ns),
        };
        let mut out = [0u8; MSG_BYTES];
        out[0..4].copy_from_slice(&tag.to_le_bytes());
        out[4..8].copy_from_slice(&worker.to_le_bytes());
        out[8..16].copy_from_slice(&a.to_le_bytes());
        out[16..24].copy_from_slice(&b.to_le_bytes());
        out
    }

    /// The message `encode` wrote; anything else is an error.
    pub fn decode(bytes: &[u8; MSG_BYTES]) -> anyhow::Result<Msg> {
        let u32_at = |i: usize| u32::from_le_bytes(bytes[i..i + 4].try_into().expect("4 bytes"));
        let u64_at = |i: usize| u64::from_le_bytes(bytes[i..i + 8].try_into().expect("8 bytes"));
        let (worker, a, b) = (u32_at(4), u64_at(8), u64_at(16));
        Ok(match u32_at(0) {
            1 => Msg::Request {
                worker,
                seq: a,
                sent_ns: b,
            },
            2 if b == 0 => Msg::End { worker, count: a },
            3 => Msg::Reply {
                worker,
                seq: a,
                sent_ns: b,
            },
            _ => bail!("not a request message: {bytes:02x?}"),
        })
    }
}

/// Read one whole message; `None` at end-of-file between messages.
fn read_msg(f: &mut File) -> io::Result<Option<[u8; MSG_BYTES]>> {
    let mut buf = [0u8; MSG_BYTES];
    let mut got = 0;
    while got < MSG_BYTES {
        match f.read(&mut buf[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("end-of-file {got} bytes into a message"),
                ));
            }
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(Some(buf))
}

/// How long the messenger waits for a reply before it checks that its
/// workers are still there.
const WATCH_MS: i32 = 100;

/// The messenger's side: `replies` is the group's reply pipe, `requests`
/// the request pipe of each worker; `index` is the messenger's process
/// index (worker k is process index + 1 + k).
pub fn messenger(
    p: &RequestParams,
    replies: OwnedFd,
    requests: Vec<OwnedFd>,
    index: usize,
    release_ns: Option<u64>,
) -> anyhow::Result<WorkOutput> {
    let mut replies = File::from(replies);
    let mut requests: Vec<File> = requests.into_iter().map(File::from).collect();
    let n = requests.len();
    ensure!(n > 0, "a messenger without workers");
    let who = |k: usize| format!("worker {k} (process {})", index + 1 + k);
    let (quota, deadline) = match p.stop {
        Stop::Work(q) => (q, None),
        Stop::DurationNs(d) => (u64::MAX, Some(Deadline::after(release_ns, d))),
    };
    let more = |sent: u64| sent < quota && !deadline.is_some_and(Deadline::past);
    let send = |f: &mut File, msg: Msg, k: usize| -> anyhow::Result<()> {
        f.write_all(&msg.encode())
            .with_context(|| format!("sending to {}: it died or failed", who(k)))
    };

    let mut sent = vec![0u64; n];
    let mut outstanding: Vec<Option<u64>> = vec![None; n];
    let (mut open, mut received) = (0usize, 0u64);
    let start = Instant::now();
    for k in 0..n {
        if more(0) {
            let msg = Msg::Request {
                worker: k as u32,
                seq: 1,
                sent_ns: monotonic_ns(),
            };
            send(&mut requests[k], msg, k)?;
            (sent[k], outstanding[k]) = (1, Some(1));
            open += 1;
        }
    }
    while open > 0 {
        if !fds::wait_readable(replies.as_fd(), WATCH_MS).context("waiting for replies")? {
            // Quiet: a worker may have died with its request unanswered.
            for (k, f) in requests.iter().enumerate() {
                if fds::pipe_reader_gone(f.as_fd())? {
                    bail!(
                        "{} closed its request pipe while {open} requests were unanswered: it died or failed",
                        who(k)
                    );
                }
            }
            continue;
        }
        let bytes = read_msg(&mut replies)
            .context("reading replies")?
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "every worker of the group (processes {}..={}) closed the reply pipe while \
                     {open} requests were unanswered: they died or failed",
                    index + 1,
                    index + n
                )
            })?;
        let Msg::Reply { worker, seq, .. } = Msg::decode(&bytes)? else {
            bail!("a worker sent something other than a reply: {bytes:02x?}");
        };
        let k = worker as usize;
        ensure!(
            k < n && outstanding[k] == Some(seq),
            "a reply from worker {worker} to request {seq}, which is not unanswered"
        );
        outstanding[k] = None;
        open -= 1;
        received += 1;
        if more(sent[k]) {
            let seq = sent[k] + 1;
            let msg = Msg::Request {
                worker,
                seq,
                sent_ns: monotonic_ns(),
            };
            send(&mut requests[k], msg, k)?;
            (sent[k], outstanding[k]) = (seq, Some(seq));
            open += 1;
        }
    }
    for (k, f) in requests.iter_mut().enumerate() {
        let msg = Msg::End {
            worker: k as u32,
            count: sent[k],
        };
        send(f, msg, k)?;
    }
    drop(requests); // end-of-file for every worker
    let elapsed = elapsed_ns(start);
    let total: u64 = sent.iter().sum();
    ensure!(
        received == total,
        "request check failed: {total} requests sent, {received} answered"
    );
    if let Stop::Work(q) = p.stop {
        ensure!(
            sent.iter().all(|&s| s == q),
            "request check failed: sent {sent:?}, {q} to each worker"
        );
    }
    Ok(WorkOutput {
        work: total,
        elapsed_ns: elapsed,
        figures: figures([
            ("requests", total as f64),
            ("requests_per_s", per_second(total as f64, elapsed)),
        ]),
        latency: Default::default(),
    })
}

/// A worker's side: `requests` from its messenger (process `messenger`),
/// `replies` the group's reply pipe; `worker` is its number in the group.
pub fn worker(
    p: &RequestParams,
    requests: OwnedFd,
    replies: OwnedFd,
    worker: u32,
    messenger: usize,
) -> anyhow::Result<WorkOutput> {
    let mut requests = File::from(requests);
    let mut replies = File::from(replies);
    let mut wakeup = Latency::new();
    let mut latency = Latency::new();
    let (mut served, mut cpu_ns) = (0u64, 0u64);
    let start = Instant::now();
    let sent = loop {
        let Some(bytes) = read_msg(&mut requests).with_context(|| {
            format!("reading requests from the messenger (process {messenger})")
        })?
        else {
            bail!(
                "the messenger (process {messenger}) closed the request pipe without an end \
                 message after {served} requests: it died or failed"
            );
        };
        let woke = monotonic_ns();
        match Msg::decode(&bytes)? {
            Msg::Request {
                worker: to,
                seq,
                sent_ns,
            } => {
                ensure!(
                    to == worker && seq == served + 1,
                    "worker {worker} got request {seq} for worker {to} after serving {served}"
                );
                wakeup.record_ns(woke.saturating_sub(sent_ns));
                cpu_ns += burn_cpu_ns(p.request_us * 1000)?;
                latency.record_ns(monotonic_ns().saturating_sub(sent_ns));
                let reply = Msg::Reply {
                    worker,
                    seq,
                    sent_ns,
                };
                replies.write_all(&reply.encode()).with_context(|| {
                    format!("replying to the messenger (process {messenger}): it died or failed")
                })?;
                served += 1;
            }
            Msg::End { worker: to, count } if to == worker => break count,
            other => bail!("worker {worker} got {other:?} from its messenger"),
        }
    };
    let elapsed = elapsed_ns(start);
    ensure!(
        sent == served && wakeup.count() == served && latency.count() == served,
        "request check failed: the messenger sent {sent} requests, worker {worker} served \
         {served} and recorded {} wake-ups and {} latencies",
        wakeup.count(),
        latency.count()
    );
    let owed = served.saturating_mul(p.request_us * 1000);
    ensure!(
        cpu_ns >= owed,
        "request check failed: {served} requests of {} µs used only {cpu_ns} ns of CPU",
        p.request_us
    );
    Ok(WorkOutput {
        work: served,
        elapsed_ns: elapsed,
        figures: figures([
            ("requests", served as f64),
            ("requests_per_s", per_second(served as f64, elapsed)),
        ]),
        latency: [("wakeup", &wakeup), ("request", &latency)]
            .into_iter()
            .map(|(k, h)| (k.to_string(), h.encode()))
            .collect(),
    })
}

impl Kind for RequestParams {
    fn name(&self) -> &'static str {
        "request"
    }
    fn work_unit(&self) -> &'static str {
        "requests"
    }
    fn stop(&self) -> Stop {
        self.stop
    }
    fn set_stop(&mut self, stop: Stop) {
        self.stop = stop;
    }
    /// Scales the requests per worker or the duration, never the group.
    fn scaled(&self, f: f64) -> Workload {
        Workload::Request(RequestParams {
            stop: scale_stop(self.stop, f),
            ..self.clone()
        })
    }
    fn group_size(&self) -> u32 {
        self.workers + 1
    }
    /// Per group: a request pipe from the messenger to each worker, one
    /// reply pipe from all its workers. The messenger gets the reply
    /// pipe's read end then the request pipes' write ends in worker order;
    /// a worker gets its request pipe's read end then the reply pipe's
    /// write end.
    fn wire(&self, processes: usize) -> anyhow::Result<Wiring> {
        let size = self.group_size() as usize;
        ensure!(
            processes.is_multiple_of(size),
            "request groups have {size} processes (a messenger and {} workers); {processes} is not a multiple",
            self.workers
        );
        let mut w = Wiring::default();
        for first in (0..processes).step_by(size) {
            let (reply_r, reply_w) = w.pipe()?;
            w.give(first, reply_r);
            for k in 0..self.workers as usize {
                let (req_r, req_w) = w.pipe()?;
                w.give(first, req_w);
                w.give(first + 1 + k, req_r);
                w.give(first + 1 + k, reply_w);
            }
        }
        Ok(w)
    }
    fn primary_latency(&self) -> Option<&'static str> {
        Some("request")
    }
    fn run(&self, ctx: &WorkContext) -> anyhow::Result<WorkOutput> {
        let mut fds = wiring::take(&ctx.fds)?.into_iter();
        match role(ctx.index, self.workers) {
            Role::Messenger { .. } => {
                let replies = fds.next().context("the messenger has no reply pipe")?;
                let requests: Vec<OwnedFd> = fds.collect();
                ensure!(
                    requests.len() == self.workers as usize,
                    "the messenger got {} request pipes for {} workers",
                    requests.len(),
                    self.workers
                );
                messenger(self, replies, requests, ctx.index, ctx.release_ns)
            }
            Role::Worker {
                worker: k,
                messenger: m,
                ..
            } => match (fds.next(), fds.next(), fds.next()) {
                (Some(req), Some(rep), None) => worker(self, req, rep, k, m),
                _ => bail!("worker {k} needs exactly its request and reply pipes"),
            },
        }
    }
    /// Seconds of CPU per process averaged over a group: each worker's
    /// `requests × request_us`, the messenger's share counted as nothing
    /// (a pipe write and read per request), so × workers / (workers + 1).
    /// A duration costs its duration.
    fn estimate_cpu_s(&self, _rates: &Rates) -> f64 {
        estimate_cpu_s(self)
    }
    /// It wakes, works briefly and waits for its peers again.
    fn cpu_bound(&self) -> bool {
        false
    }
}

/// See [`Kind::estimate_cpu_s`] of [`RequestParams`]. Pure.
pub fn estimate_cpu_s(p: &RequestParams) -> f64 {
    let w = f64::from(p.workers);
    match p.stop {
        Stop::Work(n) => n as f64 * p.request_us as f64 / 1e6 * w / (w + 1.0),
        Stop::DurationNs(d) => d as f64 / 1e9,
    }
}

/// The request workload's registration.
pub const ENTRY: Entry = Entry {
    name: "request",
    parse: |k| {
        k.only(&["workers", "request_us", "requests", "duration_s"])?;
        let workers = k.int_in("workers", 1, MAX_WORKERS, 4, " workers per messenger")?;
        let request_us = k.int_in("request_us", 0, 10_000_000, 100, " µs")?;
        Ok(Workload::Request(RequestParams {
            stop: k.stop("requests", 1000)?,
            workers: workers as u32,
            request_us: request_us as u64,
        }))
    },
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::proc::pipe;
    use crate::workload::keys::Keys;

    fn parse(text: &str) -> Result<Workload, crate::workload::keys::KeyError> {
        let t: toml::Table = text.parse().unwrap();
        (ENTRY.parse)(&Keys::new("r", "request", &t))
    }

    fn params(stop: Stop, workers: u32, request_us: u64) -> RequestParams {
        RequestParams {
            stop,
            workers,
            request_us,
        }
    }

    #[test]
    fn keys_defaults_and_errors_name_the_key() {
        assert_eq!(
            parse("").unwrap(),
            Workload::Request(params(Stop::Work(1000), 4, 100))
        );
        assert_eq!(
            parse("workers = 1\nrequest_us = 0\nduration_s = 2").unwrap(),
            Workload::Request(params(Stop::DurationNs(2_000_000_000), 1, 0))
        );
        let cases = [
            ("workers = 0", "workers", "between 1 and 1000"),
            ("workers = 1001", "workers", "between 1 and 1000"),
            ("request_us = -1", "request_us", "between 0 and"),
            ("requests = 0", "requests", "positive"),
            ("requests = 5\nduration_s = 1", "requests", "not both"),
            ("duration_s = 0", "duration_s", "more than zero"),
            ("period_us = 5", "period_us", "its parameters: workers"),
        ];
        for (text, key, msg) in cases {
            let e = parse(text).unwrap_err();
            assert_eq!(e.key, format!("workloads.r.{key}"), "{text}");
            assert!(e.message.contains(msg), "{text}: {}", e.message);
        }
    }

    #[test]
    fn groups_roles_scaling_estimate() {
        assert_eq!(role(0, 2), Role::Messenger { group: 0 });
        assert_eq!(
            role(2, 2),
            Role::Worker {
                group: 0,
                worker: 1,
                messenger: 0
            }
        );
        assert_eq!(role(3, 2), Role::Messenger { group: 1 });
        assert_eq!(
            role(4, 2),
            Role::Worker {
                group: 1,
                worker: 0,
                messenger: 3
            }
        );
        let w = Workload::Request(params(Stop::Work(1000), 3, 100));
        assert_eq!(w.group_size(), 4);
        assert_eq!(
            (w.kind(), w.work_unit(), w.primary_latency()),
            ("request", "requests", Some("request"))
        );
        assert_eq!(
            w.scaled(0.1),
            Workload::Request(params(Stop::Work(100), 3, 100))
        );
        // 1000 × 100 µs per worker, 3 of the 4 processes working.
        assert!((estimate_cpu_s(&params(Stop::Work(1000), 3, 100)) - 0.075).abs() < 1e-12);
        assert_eq!(
            estimate_cpu_s(&params(Stop::DurationNs(1_500_000_000), 3, 100)),
            1.5
        );
    }

    #[test]
    fn wiring_gives_each_process_its_pipes() {
        let w = params(Stop::Work(1), 2, 0).wire(6).unwrap();
        // Two groups of three: the messenger's reply end and two request
        // ends, each worker's request end and the shared reply end.
        assert_eq!(w.held(), 2 * (2 + 2 * 2));
        for first in [0, 3] {
            let m = w.fds_of(first);
            assert_eq!(m.len(), 3);
            let (a, b) = (w.fds_of(first + 1), w.fds_of(first + 2));
            assert_eq!((a.len(), b.len()), (2, 2));
            assert_eq!(a[1], b[1], "one reply pipe per group");
            assert_ne!(a[0], b[0]);
        }
        assert_ne!(w.fds_of(1)[1], w.fds_of(4)[1]);
        let e = params(Stop::Work(1), 2, 0).wire(4).unwrap_err();
        assert!(e.to_string().contains("not a multiple"), "{e}");
    }

    #[test]
    fn messages_round_trip_and_garbage_is_refused() {
        for m in [
            Msg::Request {
                worker: 7,
                seq: 1,
                sent_ns: u64::MAX,
            },
            Msg::End {
                worker: 0,
                count: 99,
            },
            Msg::Reply {
                worker: 999,
                seq: 12,
                sent_ns: 5,
            },
        ] {
            assert_eq!(Msg::decode(&m.encode()).unwrap(), m);
        }
        assert!(Msg::decode(&[0u8; MSG_BYTES]).is_err());
        let mut bad_end = Msg::End {
            worker: 0,
            count: 1,
        }
        .encode();
        bad_end[20] = 1;
        assert!(Msg::decode(&bad_end).is_err());
    }

    /// A group in threads of this process, over real pipes.
    struct Group {
        messenger: (OwnedFd, Vec<OwnedFd>),
        workers: Vec<(OwnedFd, OwnedFd)>,
    }

    fn group(n: usize) -> Group {
        let (reply_r, reply_w) = pipe().unwrap();
        let mut requests = Vec::new();
        let mut workers = Vec::new();
        for _ in 0..n {
            let (r, w) = pipe().unwrap();
            requests.push(w);
            workers.push((r, reply_w.try_clone().unwrap()));
        }
        Group {
            messenger: (reply_r, requests),
            workers,
        }
    }

    /// Workers `first`, `first + 1`, … of messenger 0, each in a thread.
    fn spawn_workers_from(
        p: &RequestParams,
        first: u32,
        workers: Vec<(OwnedFd, OwnedFd)>,
    ) -> Vec<std::thread::JoinHandle<anyhow::Result<WorkOutput>>> {
        (first..)
            .zip(workers)
            .map(|(k, (req, rep))| {
                let p = p.clone();
                std::thread::spawn(move || worker(&p, req, rep, k, 0))
            })
            .collect()
    }

    fn spawn_workers(
        p: &RequestParams,
        workers: Vec<(OwnedFd, OwnedFd)>,
    ) -> Vec<std::thread::JoinHandle<anyhow::Result<WorkOutput>>> {
        spawn_workers_from(p, 0, workers)
    }

    #[test]
    fn a_group_serves_every_request_once() {
        let p = params(Stop::Work(50), 3, 20);
        let g = group(3);
        let threads = spawn_workers(&p, g.workers);
        let m = messenger(&p, g.messenger.0, g.messenger.1, 0, None).unwrap();
        assert_eq!(m.work, 150);
        assert_eq!(m.figures["requests"], 150.0);
        assert!(m.latency.is_empty());
        for t in threads {
            let out = t.join().unwrap().unwrap();
            assert_eq!(out.work, 50);
            assert!(out.figures["requests_per_s"] > 0.0);
            let req = Latency::decode(&out.latency["request"]).unwrap();
            let wake = Latency::decode(&out.latency["wakeup"]).unwrap();
            assert_eq!((req.count(), wake.count()), (50, 50));
            // A request takes at least its 20 µs of CPU.
            assert!(req.quantile_ns(0.0) >= 20_000);
        }
    }

    #[test]
    fn a_duration_stops_sending_at_the_deadline() {
        let p = params(Stop::DurationNs(30_000_000), 2, 10);
        let g = group(2);
        let threads = spawn_workers(&p, g.workers);
        let t = Instant::now();
        let m = messenger(&p, g.messenger.0, g.messenger.1, 0, None).unwrap();
        assert!(t.elapsed().as_millis() >= 30);
        assert!(m.work >= 2);
        let served: u64 = threads
            .into_iter()
            .map(|t| t.join().unwrap().unwrap().work)
            .sum();
        assert_eq!(served, m.work);
        // Released long ago: the window is over, nothing is sent.
        let g = group(1);
        let threads = spawn_workers(&p, g.workers);
        let old = Some(monotonic_ns() - 1_000_000_000);
        let m = messenger(&p, g.messenger.0, g.messenger.1, 0, old).unwrap();
        assert_eq!(m.work, 0);
        assert_eq!(
            threads
                .into_iter()
                .next()
                .unwrap()
                .join()
                .unwrap()
                .unwrap()
                .work,
            0
        );
    }

    #[test]
    fn a_dead_worker_fails_its_messenger_and_a_dead_messenger_its_workers() {
        // Worker 1 is gone before anything is sent: sending to it fails.
        let p = params(Stop::Work(1_000_000), 2, 0);
        let mut g = group(2);
        drop(g.workers.pop());
        let live = spawn_workers(&p, g.workers);
        let e = messenger(&p, g.messenger.0, g.messenger.1, 4, None).unwrap_err();
        assert!(format!("{e:#}").contains("worker 1 (process 6)"), "{e:#}");
        // Its messenger gone, worker 0 fails too (end-of-file without an
        // end message, or a reply nobody reads).
        let e = live
            .into_iter()
            .next()
            .unwrap()
            .join()
            .unwrap()
            .unwrap_err();
        let e = format!("{e:#}");
        assert!(e.contains("messenger (process 0)"), "{e}");
        assert!(e.contains("died or failed"), "{e}");

        // Worker 0 dies with its first request unanswered while worker 1
        // goes on: the reply pipe stays open, and the messenger, once
        // worker 1 is done, finds worker 0's request pipe without a reader.
        let p = params(Stop::Work(20), 2, 0);
        let mut g = group(2);
        let live = spawn_workers_from(&p, 1, g.workers.split_off(1));
        let (req, rep) = g.workers.pop().unwrap();
        let dying = std::thread::spawn(move || {
            let mut f = File::from(req);
            let msg = read_msg(&mut f).unwrap();
            drop((f, rep));
            msg
        });
        let e = messenger(&p, g.messenger.0, g.messenger.1, 0, None).unwrap_err();
        assert!(dying.join().unwrap().is_some());
        let e = format!("{e:#}");
        assert!(
            e.contains("worker 0 (process 1) closed its request pipe"),
            "{e}"
        );
        // Worker 1 served its 20 but never got its end message.
        let e = live
            .into_iter()
            .next()
            .unwrap()
            .join()
            .unwrap()
            .unwrap_err();
        assert!(format!("{e:#}").contains("after 20 requests"), "{e:#}");
    }
}
