//! The messaging workload: groups of senders and receivers exchanging
//! small messages, hackbench's process mode (`hackbench -g G -f F -l L`).
//!
//! A group has `receivers` receivers and `senders` senders (hackbench's
//! `-f` is both); a run's processes form `processes / group size` groups.
//! Within a group the first `receivers` indices are the receivers, then
//! come the senders (hackbench starts its receivers first). Each receiver
//! has one channel, a connected pair of Unix stream sockets (`transport =
//! "socket"`, hackbench's default) or a pipe (`"pipe"`, `hackbench -p`):
//! it reads from one end, and every sender of its group holds the other.
//! Each sender writes `loops` rounds; a round is one message of
//! `message_bytes` to every receiver of its group in turn. Each receiver
//! reads senders × loops messages from its channel, a message at a time
//! (a read for what is missing of the current message, as hackbench).
//! Short reads and writes are continued, so messages stay whole however
//! the stream splits them.
//!
//! The work is messages, sent or received: `loops × receivers` for a
//! sender, `loops × senders` for a receiver. The result is the time to
//! finish, each process's elapsed and the run's makespan (hackbench's
//! "Time"); only a fixed number of loops is supported (no `duration_s`).
//! Each sender fills its messages with one byte value of its own, and a
//! receiver checks the byte count and the sum of the bytes it got, so a
//! lost or torn message fails the run. Figures: `messages`,
//! `messages_per_s`.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;

use anyhow::{Context, bail, ensure};
use serde::{Deserialize, Serialize};

use super::kind::{Entry, Kind, scale_stop, stop_cost_s};
use super::wiring::{self, Wiring};
use super::{Rates, Stop, WorkContext, WorkOutput, Workload, figures, per_second};
use crate::sys::proc::monotonic_ns;

/// What carries a receiver's messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Transport {
    /// A connected pair of Unix stream sockets (hackbench's default).
    Socket,
    /// A pipe (hackbench -p).
    Pipe,
}

/// The transports' names in specs.
pub const TRANSPORTS: &[&str] = &["socket", "pipe"];

/// The largest message: a pipe write up to PIPE_BUF (4096) is atomic.
pub const MAX_MESSAGE_BYTES: i64 = 4096;

/// The most senders or receivers in a group.
pub const MAX_PER_GROUP: i64 = 1000;

/// Groups of senders and receivers. Work unit: messages; the stop is
/// always `Stop::Work(loops)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessagingParams {
    pub stop: Stop,
    pub senders: u32,
    pub receivers: u32,
    pub message_bytes: u32,
    pub transport: Transport,
}

/// What process `index` of a run is in its group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The `nth` receiver of group `group`.
    Receiver { group: usize, nth: usize },
    /// The `nth` sender of group `group`.
    Sender { group: usize, nth: usize },
}

impl MessagingParams {
    fn group(&self) -> usize {
        self.senders as usize + self.receivers as usize
    }

    /// The role of process `index`: receivers first in each group.
    pub fn role(&self, index: usize) -> Role {
        let (group, pos) = (index / self.group(), index % self.group());
        let receivers = self.receivers as usize;
        if pos < receivers {
            Role::Receiver { group, nth: pos }
        } else {
            Role::Sender {
                group,
                nth: pos - receivers,
            }
        }
    }

    /// The run index of receiver `nth` of `group`.
    fn receiver_index(&self, group: usize, nth: usize) -> usize {
        group * self.group() + nth
    }

    /// The run index of sender `nth` of `group`.
    fn sender_index(&self, group: usize, nth: usize) -> usize {
        group * self.group() + self.receivers as usize + nth
    }

    fn loops(&self) -> anyhow::Result<u64> {
        match self.stop {
            Stop::Work(n) => Ok(n),
            Stop::DurationNs(_) => bail!(
                "the messaging workload runs a fixed number of loops (hackbench's method), not for a duration"
            ),
        }
    }

    /// Messages process `index` sends or receives.
    pub fn messages_of(&self, index: usize) -> u64 {
        let loops = match self.stop {
            Stop::Work(n) => n,
            Stop::DurationNs(_) => 0,
        };
        let peers = match self.role(index) {
            Role::Receiver { .. } => self.senders,
            Role::Sender { .. } => self.receivers,
        };
        loops.saturating_mul(u64::from(peers))
    }
}

/// The byte value sender `nth` fills its messages with (never 0).
pub fn fill_byte(nth: usize) -> u8 {
    (nth % 255 + 1) as u8
}

/// The sum of the bytes a receiver gets: every sender's `loops` messages.
pub fn expected_sum(senders: u32, loops: u64, message_bytes: u32) -> u128 {
    let per_round: u128 = (0..senders as usize)
        .map(|s| u128::from(fill_byte(s)))
        .sum();
    per_round * u128::from(loops) * u128::from(message_bytes)
}

/// The sum of at most [`MAX_MESSAGE_BYTES`] bytes. It fits a u32 (4096 ×
/// 255), and summing in u32 lanes takes two thirds of the time of u64
/// lanes (23 against 33 ns for a 100-byte message here): every read pays
/// it, inside the measured window.
fn byte_sum(bytes: &[u8]) -> u32 {
    debug_assert!(bytes.len() <= MAX_MESSAGE_BYTES as usize);
    bytes.iter().map(|&b| u32::from(b)).sum()
}

/// What one process did.
struct Done {
    messages: u64,
    elapsed_ns: u64,
}

/// A sender: `loops` rounds of one message to each receiver in turn.
fn send(outs: &mut [File], loops: u64, message: &[u8]) -> anyhow::Result<Done> {
    let start = monotonic_ns();
    for round in 0..loops {
        for (r, out) in outs.iter_mut().enumerate() {
            // write_all continues short writes and retries EINTR.
            out.write_all(message)
                .with_context(|| format!("writing message {round} to receiver {r}"))?;
        }
    }
    Ok(Done {
        messages: loops * outs.len() as u64,
        elapsed_ns: monotonic_ns() - start,
    })
}

/// A receiver: `count` messages of `message_bytes`, one read per missing
/// part of the current message; returns the sum of the bytes.
fn receive(input: &mut File, count: u64, message_bytes: usize) -> anyhow::Result<(Done, u128)> {
    let mut buf = vec![0u8; message_bytes];
    let mut sum = 0u128;
    let start = monotonic_ns();
    for m in 0..count {
        let mut got = 0;
        while got < message_bytes {
            match input.read(&mut buf[got..]) {
                Ok(0) => bail!("the senders closed after {m} of {count} messages"),
                Ok(n) => {
                    sum += u128::from(byte_sum(&buf[got..got + n]));
                    got += n;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e).context(format!("reading message {m} of {count}")),
            }
        }
    }
    let done = Done {
        messages: count,
        elapsed_ns: monotonic_ns() - start,
    };
    Ok((done, sum))
}

fn run(p: &MessagingParams, index: usize, fds: Vec<OwnedFd>) -> anyhow::Result<WorkOutput> {
    let loops = p.loops()?;
    let done = match p.role(index) {
        Role::Receiver { .. } => {
            let n = fds.len();
            let [fd]: [OwnedFd; 1] = fds.try_into().map_err(|_| {
                anyhow::anyhow!("messaging receiver {index} was given {n} channels instead of 1")
            })?;
            let count = loops * u64::from(p.senders);
            let (done, sum) = receive(&mut File::from(fd), count, p.message_bytes as usize)?;
            let want = expected_sum(p.senders, loops, p.message_bytes);
            ensure!(
                sum == want,
                "the messages' bytes sum to {sum}, not {want}: a message was lost or torn"
            );
            done
        }
        Role::Sender { nth, .. } => {
            ensure!(
                fds.len() == p.receivers as usize,
                "messaging sender {index} was given {} channels instead of {}",
                fds.len(),
                p.receivers
            );
            let mut outs: Vec<File> = fds.into_iter().map(File::from).collect();
            let message = vec![fill_byte(nth); p.message_bytes as usize];
            send(&mut outs, loops, &message)?
        }
    };
    Ok(WorkOutput {
        work: done.messages,
        elapsed_ns: done.elapsed_ns,
        figures: figures([
            ("messages", done.messages as f64),
            (
                "messages_per_s",
                per_second(done.messages as f64, done.elapsed_ns),
            ),
        ]),
        latency: Default::default(),
    })
}

impl Kind for MessagingParams {
    fn name(&self) -> &'static str {
        "messaging"
    }
    fn work_unit(&self) -> &'static str {
        "messages"
    }
    fn stop(&self) -> Stop {
        self.stop
    }
    fn set_stop(&mut self, stop: Stop) {
        self.stop = stop;
    }
    /// Scales the loops (at least 1); the groups keep their shape.
    fn scaled(&self, f: f64) -> Workload {
        Workload::Messaging(MessagingParams {
            stop: scale_stop(self.stop, f),
            ..self.clone()
        })
    }
    fn group_size(&self) -> u32 {
        self.senders + self.receivers
    }
    fn buffer_bytes(&self) -> u64 {
        u64::from(self.message_bytes)
    }
    /// Per group, one channel per receiver: the receiver gets its read
    /// end, every sender of the group its write end (in receiver order).
    fn wire(&self, processes: usize) -> anyhow::Result<Wiring> {
        let g = self.group();
        ensure!(
            g > 0 && processes.is_multiple_of(g),
            "messaging runs in groups of {g}, got {processes} processes"
        );
        let mut w = Wiring::default();
        for group in 0..processes / g {
            for r in 0..self.receivers as usize {
                let (rd, wr) = match self.transport {
                    Transport::Socket => w.socketpair()?,
                    Transport::Pipe => w.pipe()?,
                };
                w.give(self.receiver_index(group, r), rd);
                for s in 0..self.senders as usize {
                    w.give(self.sender_index(group, s), wr);
                }
            }
        }
        Ok(w)
    }
    fn run(&self, ctx: &WorkContext) -> anyhow::Result<WorkOutput> {
        run(self, ctx.index, wiring::take(&ctx.fds)?)
    }
    /// Cost model: each message a process sends or receives costs it half
    /// a calibrated `wake_round_trip_s` (a write or a read with its share
    /// of wake-ups and switches) plus copying its bytes once at
    /// `copy_bytes_per_s`. A process's CPU time is then
    /// `loops × peers × (wake_round_trip_s / 2 + message_bytes /
    /// copy_bytes_per_s)`, peers being the receivers (sender) or senders
    /// (receiver); the estimate is the busier role's. Writers batch while the socket buffers have room, so
    /// this tends to overestimate.
    fn estimate_cpu_s(&self, rates: &Rates) -> f64 {
        let per_message =
            rates.wake_round_trip_s / 2.0 + f64::from(self.message_bytes) / rates.copy_bytes_per_s;
        let peers = f64::from(self.senders.max(self.receivers));
        stop_cost_s(self.stop, per_message * peers)
    }
    /// It wakes, works briefly and waits for its peers again.
    fn cpu_bound(&self) -> bool {
        false
    }
}

/// The messaging workload's registration.
pub const ENTRY: Entry = Entry {
    name: "messaging",
    parse: |k| {
        if !matches!(k.float("duration_s"), Ok(None)) {
            return Err(k.err(
                "duration_s",
                "a messaging workload runs a fixed number of loops (hackbench's method); give loops instead",
            ));
        }
        k.only(&[
            "senders",
            "receivers",
            "loops",
            "message_bytes",
            "transport",
        ])?;
        let per_group = |key: &str| -> Result<u32, super::keys::KeyError> {
            Ok(k.int_in(key, 1, MAX_PER_GROUP, 20, " processes per group")? as u32)
        };
        let transport = match k.choice("transport", TRANSPORTS, "socket")? {
            "pipe" => Transport::Pipe,
            _ => Transport::Socket,
        };
        Ok(Workload::Messaging(MessagingParams {
            stop: Stop::Work(k.positive_or("loops", 100)?),
            senders: per_group("senders")?,
            receivers: per_group("receivers")?,
            message_bytes: k.int_in(
                "message_bytes",
                1,
                MAX_MESSAGE_BYTES,
                100,
                " bytes (a pipe write is atomic up to 4096)",
            )? as u32,
            transport,
        }))
    },
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::keys::{KeyError, Keys};

    fn parse(text: &str) -> Result<Workload, KeyError> {
        let t: toml::Table = text.parse().unwrap();
        (ENTRY.parse)(&Keys::new("m", "messaging", &t))
    }

    fn params(w: Workload) -> MessagingParams {
        match w {
            Workload::Messaging(p) => p,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn keys_defaults_are_hackbenchs_and_refusals_name_the_key() {
        let p = params(parse("").unwrap());
        assert_eq!(
            p,
            MessagingParams {
                stop: Stop::Work(100),
                senders: 20,
                receivers: 20,
                message_bytes: 100,
                transport: Transport::Socket,
            }
        );
        let p = params(
            parse(
                "senders = 3\nreceivers = 2\nloops = 7\nmessage_bytes = 4096\ntransport = \"pipe\"",
            )
            .unwrap(),
        );
        assert_eq!(
            (p.senders, p.receivers, p.stop, p.message_bytes, p.transport),
            (3, 2, Stop::Work(7), 4096, Transport::Pipe)
        );
        for (text, key, part) in [
            ("duration_s = 5", "duration_s", "fixed number of loops"),
            ("message_bytes = 0", "message_bytes", "between 1 and 4096"),
            (
                "message_bytes = 4097",
                "message_bytes",
                "between 1 and 4096",
            ),
            ("senders = 0", "senders", "between 1 and 1000"),
            ("receivers = 1001", "receivers", "between 1 and 1000"),
            ("loops = 0", "loops", "positive"),
            ("transport = \"tcp\"", "transport", "allowed: socket, pipe"),
            ("round_trips = 1", "round_trips", "not a parameter"),
        ] {
            let e = parse(text).unwrap_err();
            assert_eq!(e.key, format!("workloads.m.{key}"), "{text}");
            assert!(e.message.contains(part), "{text}: {}", e.message);
        }
    }

    fn small(transport: Transport) -> MessagingParams {
        MessagingParams {
            stop: Stop::Work(50),
            senders: 2,
            receivers: 3,
            message_bytes: 100,
            transport,
        }
    }

    #[test]
    fn roles_receivers_first_in_each_group() {
        let p = small(Transport::Socket);
        let roles: Vec<Role> = (0..10).map(|i| p.role(i)).collect();
        assert_eq!(roles[0], Role::Receiver { group: 0, nth: 0 });
        assert_eq!(roles[2], Role::Receiver { group: 0, nth: 2 });
        assert_eq!(roles[3], Role::Sender { group: 0, nth: 0 });
        assert_eq!(roles[4], Role::Sender { group: 0, nth: 1 });
        assert_eq!(roles[5], Role::Receiver { group: 1, nth: 0 });
        assert_eq!(roles[9], Role::Sender { group: 1, nth: 1 });
        // A receiver gets one message per sender per loop, a sender sends
        // one per receiver per loop.
        assert_eq!(p.messages_of(0), 100);
        assert_eq!(p.messages_of(3), 150);
    }

    #[test]
    fn wiring_one_channel_per_receiver_shared_by_the_groups_senders() {
        for transport in [Transport::Socket, Transport::Pipe] {
            let p = small(transport);
            let w = p.wire(10).unwrap();
            assert_eq!(w.held(), 2 * 3 * 2, "two ends per receiver, two groups");
            for r in [0, 1, 2, 5, 6, 7] {
                assert_eq!(w.fds_of(r).len(), 1);
            }
            // Both senders of a group hold the same write ends, one per
            // receiver, and the other group's are different.
            assert_eq!(w.fds_of(3).len(), 3);
            assert_eq!(w.fds_of(3), w.fds_of(4));
            assert_ne!(w.fds_of(3), w.fds_of(8));
            assert!(p.wire(7).is_err());
        }
    }

    #[test]
    fn scale_serde_estimate() {
        let w = Workload::Messaging(small(Transport::Pipe));
        assert_eq!(w.group_size(), 5);
        assert_eq!(w.work_unit(), "messages");
        assert_eq!(params(w.scaled(0.1)).stop, Stop::Work(5));
        assert_eq!(params(w.scaled(0.0)).stop, Stop::Work(1));
        let s = serde_json::to_string(&w).unwrap();
        assert_eq!(
            s,
            r#"{"kind":"messaging","stop":{"work":50},"senders":2,"receivers":3,"message_bytes":100,"transport":"pipe"}"#
        );
        assert_eq!(serde_json::from_str::<Workload>(&s).unwrap(), w);
        let rates = Rates {
            pi_iter_per_s: 1.0,
            hash_per_s: 1.0,
            flops_per_s: 1.0,
            copy_bytes_per_s: 1e8,
            wake_round_trip_s: 10e-6,
        };
        // 50 loops × 3 peers × (5 µs + 1 µs).
        assert!((w.estimate_cpu_s(&rates) - 50.0 * 3.0 * 6e-6).abs() < 1e-12);
    }

    #[test]
    fn a_byte_sum_of_the_largest_message_does_not_overflow() {
        assert_eq!(byte_sum(&[255; MAX_MESSAGE_BYTES as usize]), 4096 * 255);
        assert_eq!(byte_sum(&[1, 2, 3]), 6);
        assert_eq!(byte_sum(&[]), 0);
    }

    #[test]
    fn expected_sums_and_fill_bytes() {
        assert_eq!(fill_byte(0), 1);
        assert_eq!(fill_byte(254), 255);
        assert_eq!(fill_byte(255), 1);
        assert_eq!(expected_sum(2, 50, 100), (1 + 2) * 50 * 100);
    }

    /// One group of `p` run as threads of this process over real channels.
    fn run_group(p: &MessagingParams) -> Vec<WorkOutput> {
        let mut receivers = Vec::new();
        let mut writers: Vec<OwnedFd> = Vec::new();
        for _ in 0..p.receivers {
            let (rd, wr): (OwnedFd, OwnedFd) = match p.transport {
                Transport::Socket => {
                    let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
                    (a.into(), b.into())
                }
                Transport::Pipe => crate::sys::proc::pipe().unwrap(),
            };
            receivers.push(rd);
            writers.push(wr);
        }
        let mut handles = Vec::new();
        for (i, rd) in receivers.into_iter().enumerate() {
            let p = p.clone();
            handles.push(std::thread::spawn(move || run(&p, i, vec![rd])));
        }
        for s in 0..p.senders as usize {
            let fds: Vec<OwnedFd> = writers.iter().map(|w| w.try_clone().unwrap()).collect();
            let p = p.clone();
            let index = p.receivers as usize + s;
            handles.push(std::thread::spawn(move || run(&p, index, fds)));
        }
        drop(writers);
        handles
            .into_iter()
            .map(|h| h.join().unwrap().unwrap())
            .collect()
    }

    #[test]
    fn a_group_delivers_every_message_on_both_transports() {
        for transport in [Transport::Socket, Transport::Pipe] {
            let mut p = small(transport);
            // Big messages on sockets split into short writes and reads.
            p.message_bytes = 4096;
            let outs = run_group(&p);
            let works: Vec<u64> = outs.iter().map(|o| o.work).collect();
            assert_eq!(works, [100, 100, 100, 150, 150], "{transport:?}");
            assert_eq!(outs[0].figures["messages"], 100.0);
            assert!(outs[3].figures["messages_per_s"] > 0.0);
        }
    }

    #[test]
    fn missing_senders_are_an_error_and_a_duration_is_refused() {
        let p = small(Transport::Pipe);
        let (rd, wr) = crate::sys::proc::pipe().unwrap();
        drop(wr);
        let e = run(&p, 0, vec![rd]).unwrap_err();
        assert!(format!("{e:#}").contains("after 0 of 100"), "{e:#}");
        let d = p.clone();
        let w = Workload::Messaging(d).with_stop(Stop::DurationNs(1));
        let Workload::Messaging(d) = w else { panic!() };
        let e = run(&d, 0, Vec::new()).unwrap_err();
        assert!(format!("{e:#}").contains("fixed number of loops"), "{e:#}");
    }
}
