//! Taskstats exit records over generic netlink (family `TASKSTATS`):
//! a listener registered for every CPU receives one record per task that
//! exits anywhere on the machine, with the task's run-queue wait
//! (`cpu_delay_total`, the scheduler's `sched_info.run_delay`, filled
//! whatever `kernel.task_delayacct` says), context switches, CPU times and
//! parent.
//!
//! Framing, attributes and the family look-up are the `netlink-packet-*`
//! crates'; what is written here is the family's payload (the register
//! request, and the nested attributes of an exit event) and the decoding
//! of `struct taskstats`, a C struct read by field offsets
//! (`include/uapi/linux/taskstats.h`; the offsets have not moved since
//! version 1 and fields were only appended, so a record shorter than a
//! field leaves that field None). Every field read here is filled for each
//! task at its exit whatever `CONFIG_TASK_XACCT` says (`bacct_add_tsk`,
//! `delayacct_add_tsk`, the switches), except the storage I/O bytes
//! (`xacct_add_tsk`), which are 0 on a kernel without per-task I/O
//! accounting.

use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use netlink_packet_core::{
    DecodeError, DefaultNla, Emitable, NLM_F_REQUEST, NetlinkMessage, NetlinkPayload, NlasIterator,
    ParseableParametrized,
};
use netlink_packet_generic::ctrl::nlas::GenlCtrlAttrs;
use netlink_packet_generic::ctrl::{GenlCtrl, GenlCtrlCmd};
use netlink_packet_generic::{GenlFamily, GenlHeader, GenlMessage};
use netlink_sys::{Socket, SocketAddr, protocols::NETLINK_GENERIC};

const CMD_GET: u8 = 1;
const CMD_NEW: u8 = 2;
const TYPE_PID: u16 = 1;
const TYPE_STATS: u16 = 3;
const TYPE_AGGR_PID: u16 = 4;
const CMD_ATTR_REGISTER_CPUMASK: u16 = 3;
/// The receive buffer asked for: every exit on the machine comes here.
const RCVBUF_BYTES: usize = 8 << 20;

/// One task's exit, as far as this kernel's struct goes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ExitRecord {
    /// The task (thread) id.
    pub tid: i32,
    /// Its thread group (process); None before struct version 12.
    pub tgid: Option<i32>,
    /// Its parent process when it exited.
    pub ppid: i32,
    /// When it started, seconds since the epoch (`ac_btime`).
    pub btime_s: u32,
    pub comm: String,
    pub exit_code: u32,
    /// Times the task ran on a CPU, and the nanoseconds it waited on a run
    /// queue (both zero when the kernel keeps no delay record).
    pub cpu_count: u64,
    pub cpu_delay_ns: u64,
    pub utime_us: u64,
    pub stime_us: u64,
    /// The task's own minor and major page faults (`ac_minflt`,
    /// `ac_majflt`: its `min_flt`/`maj_flt`, not its children's).
    pub minflt: u64,
    pub majflt: u64,
    pub nvcsw: Option<u64>,
    pub nivcsw: Option<u64>,
    /// The task's storage I/O (`read_bytes`, `write_bytes`,
    /// `cancelled_write_bytes`: what its rusage block counts are made of,
    /// rounded down to KiB by taskstats); 0 without `CONFIG_TASK_XACCT` and
    /// `CONFIG_TASK_IO_ACCOUNTING` (see [`crate::sys::proc::io_accounted`]).
    pub read_bytes: Option<u64>,
    pub write_bytes: Option<u64>,
    pub cancelled_write_bytes: Option<u64>,
    /// The scheduling policy it exited under (`ac_sched`: the task's
    /// `policy`, as `sched_setscheduler` numbers it), which a program may
    /// have changed for itself (`chrt`).
    pub policy: Option<u32>,
}

fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(off..off + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], off: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(off..off + 8)?.try_into().ok()?))
}

/// Decodes `struct taskstats` (native endianness, the kernel's layout).
/// None when it is too short for the fields every version has.
pub fn decode_taskstats(b: &[u8]) -> Option<ExitRecord> {
    let comm = b.get(80..112)?;
    let comm_len = comm.iter().position(|&c| c == 0).unwrap_or(comm.len());
    let version = u16::from_ne_bytes(b.get(0..2)?.try_into().ok()?);
    Some(ExitRecord {
        tid: u32_at(b, 128)? as i32,
        tgid: (version >= 12)
            .then(|| u32_at(b, 368).map(|t| t as i32))
            .flatten(),
        ppid: u32_at(b, 132)? as i32,
        btime_s: u32_at(b, 136)?,
        comm: String::from_utf8_lossy(&comm[..comm_len]).into_owned(),
        exit_code: u32_at(b, 4)?,
        cpu_count: u64_at(b, 16)?,
        cpu_delay_ns: u64_at(b, 24)?,
        utime_us: u64_at(b, 152)?,
        stime_us: u64_at(b, 160)?,
        minflt: u64_at(b, 168)?,
        majflt: u64_at(b, 176)?,
        nvcsw: u64_at(b, 272),
        nivcsw: u64_at(b, 280),
        read_bytes: u64_at(b, 248),
        write_bytes: u64_at(b, 256),
        cancelled_write_bytes: u64_at(b, 264),
        policy: b.get(112).map(|&p| u32::from(p)),
    })
}

/// The TASKSTATS family's messages: a request (command and attributes
/// out) or an event (the exit records in).
#[derive(Debug, Clone)]
struct Taskstats {
    cmd: u8,
    nlas: Vec<DefaultNla>,
    records: Vec<ExitRecord>,
}

impl GenlFamily for Taskstats {
    fn family_name() -> &'static str {
        "TASKSTATS"
    }
    fn command(&self) -> u8 {
        self.cmd
    }
    fn version(&self) -> u8 {
        1
    }
}

impl Emitable for Taskstats {
    fn buffer_len(&self) -> usize {
        self.nlas.as_slice().buffer_len()
    }
    fn emit(&self, buffer: &mut [u8]) {
        self.nlas.as_slice().emit(buffer)
    }
}

impl ParseableParametrized<[u8], GenlHeader> for Taskstats {
    fn parse_with_param(buf: &[u8], header: GenlHeader) -> Result<Self, DecodeError> {
        Ok(Taskstats {
            cmd: header.cmd,
            nlas: Vec::new(),
            records: parse_exit_attributes(buf)?,
        })
    }
}

/// The records of an exit event: each `AGGR_PID` holds a `PID` and a
/// `STATS`; `AGGR_TGID` (a whole thread group's sum, sent besides its
/// threads' own records) is skipped, so nothing is counted twice.
pub fn parse_exit_attributes(buf: &[u8]) -> Result<Vec<ExitRecord>, DecodeError> {
    let mut out = Vec::new();
    for nla in NlasIterator::new(buf) {
        let nla = nla?;
        if nla.kind() != TYPE_AGGR_PID {
            continue;
        }
        for inner in NlasIterator::new(nla.value()) {
            let inner = inner?;
            if inner.kind() == TYPE_STATS {
                let rec = decode_taskstats(inner.value())
                    .ok_or_else(|| DecodeError::from("struct taskstats too short"))?;
                out.push(rec);
            } else if inner.kind() != TYPE_PID {
                continue;
            }
        }
    }
    Ok(out)
}

fn genl_socket() -> Result<Socket> {
    let mut s = Socket::new(NETLINK_GENERIC).context("opening a generic netlink socket")?;
    s.bind_auto().context("binding a generic netlink socket")?;
    s.connect(&SocketAddr::new(0, 0))
        .context("connecting a generic netlink socket")?;
    Ok(s)
}

fn send<F>(s: &Socket, msg: GenlMessage<F>) -> Result<()>
where
    F: GenlFamily + Emitable + std::fmt::Debug,
{
    let mut nl = NetlinkMessage::from(msg);
    nl.header.flags = NLM_F_REQUEST | netlink_packet_core::NLM_F_ACK;
    nl.finalize();
    let mut buf = vec![0u8; nl.buffer_len()];
    nl.serialize(&mut buf);
    s.send(&buf, 0)
        .context("sending a generic netlink request")?;
    Ok(())
}

/// The kernel's number for the TASKSTATS family.
fn family_id(s: &Socket) -> Result<u16> {
    let mut msg = GenlMessage::from_payload(GenlCtrl {
        cmd: GenlCtrlCmd::GetFamily,
        nlas: vec![GenlCtrlAttrs::FamilyName("TASKSTATS".to_string())],
    });
    msg.finalize();
    send(s, msg)?;
    let mut buf = vec![0u8; 16 << 10];
    let n = recv(s, &mut buf).context("asking for the TASKSTATS family")?;
    let mut off = 0;
    while off < n {
        let m = NetlinkMessage::<GenlMessage<GenlCtrl>>::deserialize(&buf[off..n])
            .map_err(|e| anyhow!("decoding the family reply: {e}"))?;
        match &m.payload {
            NetlinkPayload::InnerMessage(g) => {
                if let Some(id) = g.payload.nlas.iter().find_map(|a| match a {
                    GenlCtrlAttrs::FamilyId(id) => Some(*id),
                    _ => None,
                }) {
                    return Ok(id);
                }
            }
            NetlinkPayload::Error(e) => {
                if let Some(code) = e.code {
                    bail!(family_refusal(code.get()))
                }
            }
            _ => {}
        }
        if m.header.length == 0 {
            break;
        }
        off += m.header.length as usize;
    }
    bail!("the kernel did not name the TASKSTATS family")
}

/// Why the kernel answered the TASKSTATS family look-up with the netlink
/// error `code` (a negative errno), in words: a kernel without taskstats
/// (no such family) is the common case, named by its option.
fn family_refusal(code: i32) -> String {
    match code.checked_neg() {
        Some(libc::ENOENT) => {
            "this kernel has no taskstats (built without CONFIG_TASKSTATS)".to_string()
        }
        Some(errno) if errno > 0 => format!(
            "the kernel refused to name the TASKSTATS family: {}",
            std::io::Error::from_raw_os_error(errno)
        ),
        _ => format!("the kernel answered the TASKSTATS family look-up with error {code}"),
    }
}

fn recv(s: &Socket, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut slice = &mut buf[..];
    s.recv(&mut slice, 0)
}

/// Every exit record received since the listener started, and whether
/// the kernel dropped some (the socket's buffer overflowed).
#[derive(Debug, Default)]
pub struct ExitLog {
    pub records: Vec<(u64, ExitRecord)>,
    pub lost: u64,
    next_seq: u64,
}

impl ExitLog {
    /// The sequence number the next record will get.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }
    /// Forgets records before `seq` (no tree started before it is left).
    pub fn prune_before(&mut self, seq: u64) {
        self.records.retain(|(s, _)| *s >= seq);
    }
}

/// A registered exit listener, read by a thread of its own into an
/// [`ExitLog`] until dropped.
pub struct ExitListener {
    log: Arc<Mutex<ExitLog>>,
    drained: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ExitListener {
    /// Registers for the exits on every online CPU
    /// (`/sys/devices/system/cpu/online`, already in the kernel's cpulist
    /// format) and starts reading.
    pub fn start_online() -> Result<ExitListener> {
        let online = "/sys/devices/system/cpu/online";
        let mask = std::fs::read_to_string(online).with_context(|| format!("reading {online}"))?;
        Self::start(mask.trim())
    }

    /// Registers for the exits on the CPUs of `cpulist` ("0-3,6") and
    /// starts reading.
    pub fn start(cpulist: &str) -> Result<ExitListener> {
        let s = genl_socket()?;
        let id = family_id(&s)?;
        let _ = s.set_rx_buf_sz(RCVBUF_BYTES);
        let mask = format!("{cpulist}\0");
        let mut msg = GenlMessage::from_payload(Taskstats {
            cmd: CMD_GET,
            nlas: vec![DefaultNla::new(
                CMD_ATTR_REGISTER_CPUMASK,
                mask.into_bytes(),
            )],
            records: Vec::new(),
        });
        msg.set_resolved_family_id(id);
        msg.finalize();
        send(&s, msg).context("registering a taskstats listener")?;
        // The ack (or a refusal: no privilege, a bad mask).
        let mut buf = vec![0u8; 16 << 10];
        let n = recv(&s, &mut buf).context("registering a taskstats listener")?;
        if let Ok(m) = NetlinkMessage::<GenlMessage<Taskstats>>::deserialize(&buf[..n])
            && let NetlinkPayload::Error(e) = &m.payload
            && let Some(code) = e.code
        {
            bail!(
                "the kernel refused the taskstats listener: {}",
                std::io::Error::from_raw_os_error(code.get().saturating_neg())
            );
        }
        s.set_non_blocking(true)
            .context("making the taskstats socket non-blocking")?;
        let log = Arc::new(Mutex::new(ExitLog::default()));
        let drained = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (log, drained, stop) = (log.clone(), drained.clone(), stop.clone());
            std::thread::Builder::new()
                .name("taskstats".into())
                .spawn(move || read_loop(&s, id, &log, &drained, &stop))
                .context("starting the taskstats reader")?
        };
        Ok(ExitListener {
            log,
            drained,
            stop,
            thread: Some(thread),
        })
    }

    /// The log, shared with the reader.
    pub fn log(&self) -> &Arc<Mutex<ExitLog>> {
        &self.log
    }

    /// Returns once everything the kernel had queued when called has been
    /// read (two whole drains begun after the call), or after `timeout`.
    pub fn sync(&self, timeout: Duration) -> bool {
        let start = self.drained.load(Ordering::Acquire);
        let deadline = Instant::now() + timeout;
        while self.drained.load(Ordering::Acquire) < start + 2 {
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        true
    }
}

impl Drop for ExitListener {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn read_loop(
    s: &Socket,
    family: u16,
    log: &Mutex<ExitLog>,
    drained: &AtomicU64,
    stop: &AtomicBool,
) {
    let mut buf = vec![0u8; 64 << 10];
    while !stop.load(Ordering::Acquire) {
        loop {
            match recv(s, &mut buf) {
                Ok(n) => take_records(&buf[..n.min(buf.len())], family, log),
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                    if let Ok(mut l) = log.lock() {
                        l.lost += 1;
                    }
                }
                Err(_) => break,
            }
        }
        drained.fetch_add(1, Ordering::AcqRel);
        let mut pfd = libc::pollfd {
            fd: s.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd we own, for the socket this thread holds.
        unsafe { libc::poll(&mut pfd, 1, 20) };
    }
}

fn take_records(buf: &[u8], family: u16, log: &Mutex<ExitLog>) {
    let mut off = 0;
    while off + 16 <= buf.len() {
        let Ok(m) = NetlinkMessage::<GenlMessage<Taskstats>>::deserialize(&buf[off..]) else {
            return;
        };
        if let NetlinkPayload::InnerMessage(g) = &m.payload
            && m.header.message_type == family
            && g.payload.cmd == CMD_NEW
            && let Ok(mut l) = log.lock()
        {
            for r in &g.payload.records {
                let seq = l.next_seq;
                l.next_seq += 1;
                l.records.push((seq, r.clone()));
            }
        }
        let len = m.header.length as usize;
        if len == 0 {
            return;
        }
        off += (len + 3) & !3;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `struct taskstats` of version 16 (this kernel's) built field by
    /// field at the uapi offsets.
    fn sample_struct() -> Vec<u8> {
        let mut b = vec![0u8; 440];
        b[0..2].copy_from_slice(&16u16.to_ne_bytes());
        b[4..8].copy_from_slice(&768u32.to_ne_bytes()); // exit status 3 << 8
        b[16..24].copy_from_slice(&7u64.to_ne_bytes());
        b[24..32].copy_from_slice(&123_456u64.to_ne_bytes());
        b[80..82].copy_from_slice(b"sh");
        b[112] = 1; // SCHED_FIFO
        b[128..132].copy_from_slice(&4321u32.to_ne_bytes());
        b[132..136].copy_from_slice(&4000u32.to_ne_bytes());
        b[136..140].copy_from_slice(&1_700_000_000u32.to_ne_bytes());
        b[152..160].copy_from_slice(&1500u64.to_ne_bytes());
        b[160..168].copy_from_slice(&250u64.to_ne_bytes());
        b[168..176].copy_from_slice(&321u64.to_ne_bytes());
        b[176..184].copy_from_slice(&2u64.to_ne_bytes());
        b[248..256].copy_from_slice(&8192u64.to_ne_bytes());
        b[256..264].copy_from_slice(&1_048_576u64.to_ne_bytes());
        b[264..272].copy_from_slice(&4096u64.to_ne_bytes());
        b[272..280].copy_from_slice(&11u64.to_ne_bytes());
        b[280..288].copy_from_slice(&5u64.to_ne_bytes());
        b[368..372].copy_from_slice(&4320u32.to_ne_bytes());
        b
    }

    #[test]
    fn struct_taskstats_fields() {
        let r = decode_taskstats(&sample_struct()).unwrap();
        assert_eq!(
            r,
            ExitRecord {
                tid: 4321,
                tgid: Some(4320),
                ppid: 4000,
                btime_s: 1_700_000_000,
                comm: "sh".into(),
                exit_code: 768,
                cpu_count: 7,
                cpu_delay_ns: 123_456,
                utime_us: 1500,
                stime_us: 250,
                minflt: 321,
                majflt: 2,
                nvcsw: Some(11),
                nivcsw: Some(5),
                read_bytes: Some(8192),
                write_bytes: Some(1_048_576),
                cancelled_write_bytes: Some(4096),
                policy: Some(1),
            }
        );
        // An old, short struct: the switches are unknown, not zero.
        let mut short = sample_struct();
        short.truncate(200);
        short[0..2].copy_from_slice(&4u16.to_ne_bytes());
        let r = decode_taskstats(&short).unwrap();
        assert_eq!((r.nvcsw, r.tgid), (None, None));
        assert_eq!(r.read_bytes, None);
        assert_eq!(decode_taskstats(&short[..120]), None);
    }

    /// The attributes of a real exit event, captured on this machine's
    /// 6.18 kernel (struct version 16, 560 bytes) for `sh -c 'exit 3'`
    /// (pid 32249) by a plain netlink socket.
    #[test]
    #[cfg(target_endian = "little")]
    fn captured_exit_event_of_linux_6_18() {
        let bytes = include_bytes!("../../../tests/fixtures/taskstats-exit-6.18.bin");
        let recs = parse_exit_attributes(bytes).unwrap();
        assert_eq!(recs.len(), 1);
        let r = &recs[0];
        assert_eq!((r.tid, r.tgid), (32249, Some(32249)));
        assert_eq!(r.comm, "sh");
        assert_eq!(r.exit_code, 3 << 8);
        assert!(r.ppid > 1 && r.ppid != r.tid, "{r:?}");
        assert!(r.cpu_count >= 1, "{r:?}");
        assert!(r.nvcsw.is_some() && r.nivcsw.is_some());
        // Even `sh -c 'exit 3'` faults pages in (its exec at least).
        assert!(r.minflt > 0, "{r:?}");
        assert!(r.btime_s > 1_700_000_000, "{r:?}");
        // It ran, and exited, under SCHED_OTHER.
        assert_eq!(r.policy, Some(0));
    }

    fn nla(kind: u16, value: &[u8]) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&((4 + value.len()) as u16).to_ne_bytes());
        b.extend_from_slice(&kind.to_ne_bytes());
        b.extend_from_slice(value);
        while b.len() % 4 != 0 {
            b.push(0);
        }
        b
    }

    /// An exit event as the kernel nests it: AGGR_PID { PID, STATS } and,
    /// for a thread group's last thread, AGGR_TGID { TGID, STATS }, which
    /// is skipped.
    #[test]
    fn exit_event_attributes() {
        let stats = sample_struct();
        let aggr_pid = nla(
            TYPE_AGGR_PID,
            &[
                nla(TYPE_PID, &4321u32.to_ne_bytes()),
                nla(TYPE_STATS, &stats),
            ]
            .concat(),
        );
        let aggr_tgid = nla(
            5,
            &[nla(2, &4320u32.to_ne_bytes()), nla(TYPE_STATS, &stats)].concat(),
        );
        let recs = parse_exit_attributes(&[aggr_pid.clone(), aggr_tgid].concat()).unwrap();
        assert_eq!(recs.len(), 1);
        assert_eq!(recs[0].tid, 4321);
        // A STATS too short for a struct is an error, not a zero record.
        let bad = nla(TYPE_AGGR_PID, &nla(TYPE_STATS, &[0u8; 16]));
        assert!(parse_exit_attributes(&bad).is_err());
    }

    /// A kernel without taskstats answers the family look-up with ENOENT:
    /// the reason a run's `missing` carries names the kernel option, not
    /// the netlink message's bytes; other refusals say the errno in words.
    #[test]
    fn family_refusals_in_words() {
        assert_eq!(
            family_refusal(-libc::ENOENT),
            "this kernel has no taskstats (built without CONFIG_TASKSTATS)"
        );
        let eperm = family_refusal(-libc::EPERM);
        assert!(eperm.starts_with("the kernel refused to name the TASKSTATS family: "));
        assert!(eperm.contains("not permitted"), "{eperm}");
        assert_eq!(
            family_refusal(7),
            "the kernel answered the TASKSTATS family look-up with error 7"
        );
        assert!(family_refusal(i32::MIN).contains("error -2147483648"));
    }
}
