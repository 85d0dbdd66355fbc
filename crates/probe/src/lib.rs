//! Active TCP probes: SYN "ping" (as `hping3 -S`) and a TCP traceroute on one
//! fixed flow (as Paris traceroute), over raw sockets, IPv4 and IPv6.
//!
//! [`ping`] sends SYNs from one reserved source port and times each SYN-ACK or
//! RST against the SYN it answers (matched by acknowledgment number); every
//! SYN-ACK is reset so the target keeps no half-open connection. Without the
//! privilege for raw sockets it falls back to timing `connect()` and says so.
//!
//! [`trace`] sends TTL-limited SYNs that differ only in their sequence number:
//! the 5-tuple (and every other field a load balancer hashes) stays the same,
//! so every probe follows one path through ECMP. ICMP time-exceeded and
//! unreachable errors are matched to the probe by the TCP header they quote.
//!
//! OS access lives in `raw.rs`; building and parsing packets in `packet.rs`;
//! what `tcpdoctor ping` and `trace` print in [`report`]; a target pasted
//! as a URL in [`target`].
#![forbid(unsafe_code)]

pub mod packet;
mod raw;
pub mod report;
pub mod target;

use std::collections::VecDeque;
use std::fmt;
use std::io;
use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

pub use packet::IcmpKind;
use packet::{FLAG_ACK, FLAG_RST, FLAG_SYN};
use raw::{Incoming, RawProber};

/// Why probing could not run.
#[derive(Debug)]
pub enum ProbeError {
    /// Raw sockets are not allowed (not root, no CAP_NET_RAW).
    Permission(String),
    /// The target could not be parsed or resolved.
    Target(String),
    Io(io::Error),
}

impl fmt::Display for ProbeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProbeError::Permission(m) | ProbeError::Target(m) => f.write_str(m),
            ProbeError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ProbeError {}

impl From<io::Error> for ProbeError {
    fn from(e: io::Error) -> Self {
        ProbeError::Io(e)
    }
}

/// Which address family to prefer when a name resolves to both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Family {
    #[default]
    Any,
    V4,
    V6,
}

/// Parse `HOST:PORT`, `[V6]:PORT`, a bare IPv6 address or `HOST` (port 80) and resolve it.
pub fn resolve(target: &str, family: Family) -> Result<SocketAddr, ProbeError> {
    let err = |m: String| ProbeError::Target(format!("{target}: {m}"));
    let (host, port) = if let Some(rest) = target.strip_prefix('[') {
        let (h, after) = rest
            .split_once(']')
            .ok_or_else(|| err("missing ']'".into()))?;
        let port = match after.strip_prefix(':') {
            Some(p) => p.parse().map_err(|_| err(format!("bad port {p:?}")))?,
            None if after.is_empty() => 80,
            None => return Err(err("expected [ADDRESS]:PORT".into())),
        };
        (h.to_string(), port)
    } else if target.parse::<std::net::Ipv6Addr>().is_ok() {
        (target.to_string(), 80)
    } else {
        match target.rsplit_once(':') {
            Some((h, p)) => (
                h.to_string(),
                p.parse().map_err(|_| err(format!("bad port {p:?}")))?,
            ),
            None => (target.to_string(), 80),
        }
    };
    if host.is_empty() {
        return Err(err("no host".into()));
    }
    let addrs: Vec<SocketAddr> = (host.as_str(), port)
        .to_socket_addrs()
        .map_err(|e| err(format!("cannot resolve {host}: {e}")))?
        .collect();
    addrs
        .into_iter()
        .find(|a| match family {
            Family::Any => true,
            Family::V4 => a.is_ipv4(),
            Family::V6 => a.is_ipv6(),
        })
        .ok_or_else(|| err("no address of the requested family".into()))
}

/// An initial sequence number that differs between runs.
fn sequence_base() -> u32 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos() ^ (d.as_secs() as u32).rotate_left(16))
        .unwrap_or(0x5eed);
    t ^ std::process::id().rotate_left(8)
}

// ---------------------------------------------------------------- ping

/// How the round trips were timed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Method {
    /// SYN probes over a raw socket, from this source.
    RawSyn { source: SocketAddr },
    /// `connect()` timing (full handshake, then close), and why raw probes were not used.
    Connect { reason: String },
}

#[derive(Debug, Clone)]
pub struct PingConfig {
    pub target: SocketAddr,
    /// Probes to send; `None`: until stopped.
    pub count: Option<u64>,
    pub interval: Duration,
    /// How long to wait for the last probe's reply.
    pub timeout: Duration,
    /// Time `connect()` even when raw sockets are available.
    pub connect_only: bool,
}

/// What answered a probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyKind {
    /// SYN-ACK: the port is open.
    SynAck,
    /// RST: the host is there, the port closed.
    Rst,
    /// An ICMP error from `from` (counted as an error, not a reply).
    Icmp(IcmpKind),
    /// `connect()` completed.
    Connected,
    /// `connect()` was refused (an RST came back).
    Refused,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PingReply {
    /// Probe number, from 0.
    pub seq: u64,
    pub rtt: Duration,
    pub from: IpAddr,
    pub kind: ReplyKind,
    /// TCP flags of the reply (raw probes).
    pub flags: Option<u8>,
    pub ttl: Option<u8>,
    pub window: Option<u16>,
    /// Reply length in bytes, IP header included (raw probes).
    pub len: Option<usize>,
}

/// Summary of a ping run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PingStats {
    pub transmitted: u64,
    /// Probes answered by TCP (SYN-ACK, RST, connect).
    pub received: u64,
    /// Probes answered by an ICMP error.
    pub errors: u64,
    /// Of the answered probes, those answered by an RST: the port is closed.
    pub refused: u64,
    /// Round trips of the answered probes, in order of arrival.
    pub rtts: Vec<Duration>,
}

impl PingStats {
    pub fn loss(&self) -> f64 {
        if self.transmitted == 0 {
            0.0
        } else {
            1.0 - self.received as f64 / self.transmitted as f64
        }
    }
    fn ms(&self) -> impl Iterator<Item = f64> + '_ {
        self.rtts.iter().map(|d| d.as_secs_f64() * 1000.0)
    }
    /// (min, avg, max, mdev) in milliseconds; `None` without replies.
    pub fn summary_ms(&self) -> Option<(f64, f64, f64, f64)> {
        if self.rtts.is_empty() {
            return None;
        }
        let n = self.rtts.len() as f64;
        let min = self.ms().fold(f64::INFINITY, f64::min);
        let max = self.ms().fold(0.0, f64::max);
        let avg = self.ms().sum::<f64>() / n;
        let sq = self.ms().map(|x| x * x).sum::<f64>() / n;
        let mdev = (sq - avg * avg).max(0.0).sqrt();
        Some((min, avg, max, mdev))
    }
    pub fn median_ms(&self) -> Option<f64> {
        let mut v: Vec<f64> = self.ms().collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let m = v.len() / 2;
        Some(if v.len() % 2 == 1 {
            v[m]
        } else {
            (v[m - 1] + v[m]) / 2.0
        })
    }
}

/// Progress of a ping run, in order.
#[derive(Debug, Clone)]
pub enum PingEvent {
    Started(Method),
    Reply(PingReply),
}

/// Send probes until `count` or `stop`, reporting each reply as it arrives.
pub fn ping(
    config: &PingConfig,
    stop: &AtomicBool,
    mut on_event: impl FnMut(&PingEvent),
) -> Result<PingStats, ProbeError> {
    if config.connect_only {
        on_event(&PingEvent::Started(Method::Connect {
            reason: "asked for".into(),
        }));
        return Ok(ping_connect(config, stop, on_event));
    }
    match RawProber::open(config.target) {
        Ok(prober) => {
            on_event(&PingEvent::Started(Method::RawSyn { source: prober.src }));
            ping_raw(prober, config, stop, on_event)
        }
        Err(ProbeError::Permission(why)) => {
            on_event(&PingEvent::Started(Method::Connect { reason: why }));
            Ok(ping_connect(config, stop, on_event))
        }
        Err(e) => Err(e),
    }
}

fn ping_raw(
    mut p: RawProber,
    config: &PingConfig,
    stop: &AtomicBool,
    mut on_event: impl FnMut(&PingEvent),
) -> Result<PingStats, ProbeError> {
    let base = sequence_base();
    let mut sent_at: Vec<Instant> = Vec::new();
    let mut answered: Vec<bool> = Vec::new();
    let mut stats = PingStats::default();
    let mut next_send = Instant::now();
    let mut last_deadline = None;
    loop {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let more = config.count.is_none_or(|c| stats.transmitted < c);
        let now = Instant::now();
        if more && now >= next_send {
            let seq = base.wrapping_add(stats.transmitted as u32);
            sent_at.push(p.send(FLAG_SYN, seq, 64)?);
            answered.push(false);
            stats.transmitted += 1;
            next_send += config.interval;
            if config.count.is_some_and(|c| stats.transmitted >= c) {
                last_deadline = Some(Instant::now() + config.timeout);
            }
            continue;
        }
        let until = if more {
            next_send
        } else {
            match last_deadline {
                Some(d) if now < d && answered.iter().any(|a| !a) => d,
                _ => break,
            }
        };
        // Wake at least every 100 ms to notice `stop`.
        let until = until.min(now + Duration::from_millis(100));
        let Some((at, got)) = p.recv(until)? else {
            continue;
        };
        let (i, reply) = match got {
            Incoming::Tcp(t) => {
                let i = t.ack.wrapping_sub(base).wrapping_sub(1) as usize;
                if t.flags & FLAG_ACK == 0 || i >= sent_at.len() || answered[i] {
                    continue; // not an answer to a probe, or a duplicate
                }
                let kind = if t.flags & FLAG_RST != 0 {
                    ReplyKind::Rst
                } else if t.flags & FLAG_SYN != 0 {
                    // Leave nothing half-open at the target.
                    p.send(FLAG_RST, t.ack, 64)?;
                    ReplyKind::SynAck
                } else {
                    continue;
                };
                stats.received += 1;
                stats.refused += u64::from(kind == ReplyKind::Rst);
                (
                    i,
                    PingReply {
                        seq: i as u64,
                        rtt: at.duration_since(sent_at[i]),
                        from: t.from,
                        kind,
                        flags: Some(t.flags),
                        ttl: t.ttl,
                        window: Some(t.window),
                        len: Some(t.len),
                    },
                )
            }
            Incoming::Icmp(c) => {
                let i = c.seq.wrapping_sub(base) as usize;
                if i >= sent_at.len() || answered[i] {
                    continue;
                }
                stats.errors += 1;
                (
                    i,
                    PingReply {
                        seq: i as u64,
                        rtt: at.duration_since(sent_at[i]),
                        from: c.from,
                        kind: ReplyKind::Icmp(c.kind),
                        flags: None,
                        ttl: None,
                        window: None,
                        len: None,
                    },
                )
            }
        };
        answered[i] = true;
        if !matches!(reply.kind, ReplyKind::Icmp(_)) {
            stats.rtts.push(reply.rtt);
        }
        on_event(&PingEvent::Reply(reply));
    }
    Ok(stats)
}

fn ping_connect(
    config: &PingConfig,
    stop: &AtomicBool,
    mut on_event: impl FnMut(&PingEvent),
) -> PingStats {
    let mut stats = PingStats::default();
    let mut next_send = Instant::now();
    while config.count.is_none_or(|c| stats.transmitted < c) && !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        if now < next_send {
            std::thread::sleep((next_send - now).min(Duration::from_millis(100)));
            continue;
        }
        next_send += config.interval;
        let seq = stats.transmitted;
        stats.transmitted += 1;
        let wait = config.timeout.max(config.interval);
        let t0 = Instant::now();
        let r = TcpStream::connect_timeout(&config.target, wait);
        let rtt = t0.elapsed();
        let kind = match r {
            Ok(_) => ReplyKind::Connected,
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => ReplyKind::Refused,
            Err(_) => continue,
        };
        stats.received += 1;
        stats.refused += u64::from(kind == ReplyKind::Refused);
        stats.rtts.push(rtt);
        on_event(&PingEvent::Reply(PingReply {
            seq,
            rtt,
            from: config.target.ip(),
            kind,
            flags: None,
            ttl: None,
            window: None,
            len: None,
        }));
    }
    stats
}

// ---------------------------------------------------------------- trace

#[derive(Debug, Clone)]
pub struct TraceConfig {
    pub target: SocketAddr,
    pub first_ttl: u8,
    pub max_hops: u8,
    /// Probes per hop (per round).
    pub probes: u8,
    /// How long to wait for each probe's answer, at most (see [`trace`]).
    pub wait: Duration,
    /// Probes in flight at once (as traceroute's `-N`, 16 by default).
    pub parallel: usize,
    /// Rounds over the path (as mtr's cycles): 1 for a plain traceroute.
    pub rounds: u32,
    /// Time from the start of one round to the start of the next.
    pub interval: Duration,
}

impl TraceConfig {
    pub fn new(target: SocketAddr) -> TraceConfig {
        TraceConfig {
            target,
            first_ttl: 1,
            max_hops: 30,
            probes: 3,
            wait: Duration::from_secs(2),
            parallel: 16,
            rounds: 1,
            interval: Duration::from_secs(1),
        }
    }
}

/// What answered one probe of a hop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HopReply {
    /// A router: the TTL ran out there.
    TimeExceeded,
    /// An ICMP unreachable (the trace stops).
    Unreachable(IcmpKind),
    /// The target answered: port open.
    SynAck,
    /// The target answered: port closed.
    Rst,
}

impl HopReply {
    /// The path ends here: the target, or an unreachable.
    fn ends(self) -> bool {
        !matches!(self, HopReply::TimeExceeded)
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HopProbe {
    /// `None`: no answer within the wait (`*`).
    pub answer: Option<(IpAddr, Duration, HopReply)>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Hop {
    pub ttl: u8,
    /// Every probe of this hop, round after round.
    pub probes: Vec<HopProbe>,
}

impl Hop {
    /// The target answered (or an unreachable ended the path) at this hop.
    pub fn is_last(&self) -> bool {
        self.probes
            .iter()
            .any(|p| p.answer.is_some_and(|(_, _, k)| k.ends()))
    }

    /// Probes answered (by anything).
    pub fn answered(&self) -> usize {
        self.probes.iter().filter(|p| p.answer.is_some()).count()
    }

    /// Share of the probes never answered (0..1).
    pub fn loss(&self) -> f64 {
        if self.probes.is_empty() {
            return 0.0;
        }
        1.0 - self.answered() as f64 / self.probes.len() as f64
    }

    /// Round trips of the answered probes, in order.
    pub fn rtts(&self) -> Vec<Duration> {
        self.probes
            .iter()
            .filter_map(|p| p.answer.map(|a| a.1))
            .collect()
    }

    /// The addresses that answered, in order of first answer.
    pub fn addresses(&self) -> Vec<IpAddr> {
        let mut v: Vec<IpAddr> = Vec::new();
        for p in &self.probes {
            if let Some((a, _, _)) = p.answer {
                if !v.contains(&a) {
                    v.push(a);
                }
            }
        }
        v
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct TraceResult {
    /// Source address and port of the flow.
    pub source: SocketAddr,
    pub hops: Vec<Hop>,
    /// The target answered with SYN-ACK or RST.
    pub reached: bool,
    /// Rounds completed.
    pub rounds: u32,
    /// Stopped (Ctrl-C) before the end.
    pub interrupted: bool,
}

/// Progress of a trace.
#[derive(Debug, Clone)]
pub enum TraceEvent {
    /// The flow's source is known; probing starts.
    Started(SocketAddr),
    /// A hop's probes of the first round are all answered or given up,
    /// and so are those of every hop before it: hops come in order.
    HopDone(Hop),
    /// A round over the whole path is over (its number, from 1).
    RoundDone(u32),
}

/// How long a probe is waited for once a farther hop has answered: this many
/// times that answer's round trip (traceroute's `-w` NEAR factor), and at
/// least [`NEAR_MIN`]. A router that answers nothing is then given up on as
/// soon as the hops behind it have shown how long an answer takes.
const NEAR_FACTOR: u32 = 10;
const NEAR_MIN: Duration = Duration::from_millis(5);
/// How often a wait looks at the stop flag.
const TICK: Duration = Duration::from_millis(50);
/// The longest the target is left alone after a SYN-ACK (its reset's way
/// there), and how long for a SYN-ACK to a probe no longer awaited.
const TARGET_QUIET_MAX: Duration = Duration::from_millis(200);

/// One probe on its way.
#[derive(Debug, Clone, Copy)]
struct InFlight {
    seq: u32,
    ttl: u8,
    sent: Instant,
}

/// Trace the path to `config.target` with TTL-limited SYNs on one flow.
///
/// Up to [`TraceConfig::parallel`] probes are in flight at once, the nearest
/// hops first (as modern traceroutes and mtr do): a hop that answers nothing
/// costs one wait, shared with the hops probed beside it, not a wait per
/// probe. A probe is given up after [`TraceConfig::wait`], or sooner once a
/// farther hop has answered (see [`NEAR_FACTOR`]); once the target (or an
/// unreachable) answers at some TTL, farther TTLs are no longer probed.
/// With [`TraceConfig::rounds`] above 1, the path found is probed again,
/// round after round, for loss and jitter per hop (as mtr).
pub fn trace(
    config: &TraceConfig,
    stop: &AtomicBool,
    mut on_event: impl FnMut(&TraceEvent),
) -> Result<TraceResult, ProbeError> {
    if config.first_ttl == 0 || config.first_ttl > config.max_hops {
        return Err(ProbeError::Target(format!(
            "first TTL {} must be between 1 and the maximum hops {}",
            config.first_ttl, config.max_hops
        )));
    }
    let p = RawProber::open(config.target)?;
    on_event(&TraceEvent::Started(p.src));
    let mut tracer = Tracer::new(config, p);
    let mut result = TraceResult {
        source: tracer.p.src,
        hops: Vec::new(),
        reached: false,
        rounds: 0,
        interrupted: false,
    };
    for round in 0..config.rounds.max(1) {
        let round_start = Instant::now();
        if !tracer.round(round == 0, stop, &mut on_event)? {
            result.interrupted = true;
            break;
        }
        result.rounds = round + 1;
        on_event(&TraceEvent::RoundDone(round + 1));
        if round + 1 < config.rounds {
            sleep_until(round_start + config.interval, stop);
        }
    }
    let hops = tracer.into_hops();
    result.reached = hops
        .iter()
        .flat_map(|h| &h.probes)
        .any(|p| matches!(p.answer, Some((_, _, HopReply::SynAck | HopReply::Rst))));
    result.hops = hops;
    Ok(result)
}

/// Sleep until `next`, or until `stop` is set.
fn sleep_until(next: Instant, stop: &AtomicBool) {
    while Instant::now() < next && !stop.load(Ordering::Relaxed) {
        std::thread::sleep(TICK.min(next.saturating_duration_since(Instant::now())));
    }
}

/// When a probe is given up: after the wait, or sooner once a farther hop has answered.
fn deadline(config: &TraceConfig, nearest_beyond: &[Option<Duration>], f: &InFlight) -> Instant {
    let near = nearest_beyond[usize::from(f.ttl - config.first_ttl)]
        .map(|r| (r * NEAR_FACTOR).max(NEAR_MIN));
    f.sent + near.map_or(config.wait, |n| n.min(config.wait))
}

/// A trace under way: its flow, the hops so far, and the probes of the current round.
struct Tracer<'c> {
    config: &'c TraceConfig,
    p: RawProber,
    base: u32,
    span: usize,
    parallel: usize,
    hops: Vec<Hop>,
    /// The TTL at which the path ends, once known.
    last: Option<u8>,
    /// Until when the target may still hold a half-open connection of this
    /// flow: a SYN-ACK's reset reaches it a one-way trip later (the answer's
    /// round trip bounds that). A probe arriving before would meet it and be
    /// answered with an ACK naming the other probe, not its own SYN-ACK.
    target_busy_until: Option<Instant>,
    /// Hops of the first round reported so far.
    emitted: usize,
    counter: u32,
    /// Probes of this round still to send, nearest hops first.
    queue: VecDeque<u8>,
    inflight: Vec<InFlight>,
    /// The fastest answer so far from beyond each TTL (for NEAR).
    nearest_beyond: Vec<Option<Duration>>,
}

impl<'c> Tracer<'c> {
    /// A trace of `config` on the flow of `p`, no probe sent yet.
    fn new(config: &'c TraceConfig, p: RawProber) -> Self {
        let base = sequence_base() & 0xffff_0000;
        let span = usize::from(config.max_hops - config.first_ttl) + 1;
        let hops: Vec<Hop> = (0..span)
            .map(|i| Hop {
                ttl: config.first_ttl + i as u8,
                probes: Vec::new(),
            })
            .collect();
        Tracer {
            config,
            p,
            base,
            span,
            parallel: config.parallel.max(1),
            hops,
            last: None,
            target_busy_until: None,
            emitted: 0,
            counter: 0,
            queue: VecDeque::new(),
            inflight: Vec::new(),
            nearest_beyond: Vec::new(),
        }
    }

    /// One round over the path; false when `stop` ended it early.
    fn round(
        &mut self,
        first: bool,
        stop: &AtomicBool,
        on_event: &mut impl FnMut(&TraceEvent),
    ) -> Result<bool, ProbeError> {
        let config = self.config;
        self.queue = (config.first_ttl..=config.max_hops)
            .filter(|t| self.last.is_none_or(|l| *t <= l))
            .flat_map(|t| std::iter::repeat_n(t, usize::from(config.probes)))
            .collect();
        self.inflight = Vec::new();
        self.nearest_beyond = vec![None; self.span];
        while !self.queue.is_empty() || !self.inflight.is_empty() {
            if stop.load(Ordering::Relaxed) {
                return Ok(false);
            }
            self.send_probes()?;
            let until = self.next_wake();
            if let Some((at, got)) = self.p.recv(until)? {
                if let Some((seq, from, kind)) = self.answer(at, got)? {
                    self.record(at, seq, from, kind);
                }
            }
            self.give_up();
            if first {
                self.report_hops(on_event);
            }
        }
        Ok(true)
    }

    /// Send queued probes while fewer than `parallel` are in flight.
    fn send_probes(&mut self) -> Result<(), ProbeError> {
        while self.inflight.len() < self.parallel {
            let Some(ttl) = self.queue.pop_front() else {
                break;
            };
            if self.last.is_some_and(|l| ttl > l) {
                continue;
            }
            // At the target, one probe at a time: SYNs of one flow arriving
            // together meet each other's half-open state there.
            let busy = self.target_busy_until.is_some_and(|t| Instant::now() < t);
            if self.last.is_some_and(|l| ttl == l)
                && (busy || self.inflight.iter().any(|f| f.ttl >= ttl))
            {
                self.queue.push_front(ttl);
                break;
            }
            // The sequence number names the probe; nothing else in the flow changes.
            let seq = self.base | (u32::from(ttl) << 8) | (self.counter & 0xff);
            self.counter = self.counter.wrapping_add(1);
            let sent = self.p.send(FLAG_SYN, seq, ttl)?;
            self.inflight.push(InFlight { seq, ttl, sent });
        }
        Ok(())
    }

    /// Until when to wait for the next answer: the first probe's deadline.
    fn next_wake(&self) -> Instant {
        let next_deadline = self
            .inflight
            .iter()
            .map(|f| deadline(self.config, &self.nearest_beyond, f))
            .min();
        let next_deadline = match (next_deadline, self.target_busy_until) {
            (Some(d), Some(t)) if t > Instant::now() => Some(d.min(t)),
            (None, Some(t)) if t > Instant::now() => Some(t),
            (d, _) => d,
        };
        next_deadline.map_or(Instant::now(), |d| d.min(Instant::now() + TICK))
    }

    /// The probe (by sequence number) a packet answers, who answered, and how.
    fn answer(
        &mut self,
        at: Instant,
        got: Incoming,
    ) -> Result<Option<(u32, IpAddr, HopReply)>, ProbeError> {
        Ok(match got {
            Incoming::Icmp(c) => {
                let kind = match c.kind {
                    IcmpKind::TimeExceeded => HopReply::TimeExceeded,
                    k => HopReply::Unreachable(k),
                };
                Some((c.seq, c.from, kind))
            }
            Incoming::Tcp(t) if t.flags & FLAG_ACK != 0 => {
                let seq = t.ack.wrapping_sub(1);
                if t.flags & FLAG_RST != 0 {
                    Some((seq, t.from, HopReply::Rst))
                } else if t.flags & FLAG_SYN != 0 {
                    // Leave nothing half-open at the target; ask it
                    // nothing more until the reset has reached it.
                    self.p.send(FLAG_RST, t.ack, 64)?;
                    let round_trip = self
                        .inflight
                        .iter()
                        .find(|f| f.seq == t.ack.wrapping_sub(1))
                        .map_or(TARGET_QUIET_MAX, |f| at.duration_since(f.sent));
                    let quiet = at + round_trip.min(TARGET_QUIET_MAX);
                    self.target_busy_until =
                        Some(self.target_busy_until.map_or(quiet, |b| b.max(quiet)));
                    Some((seq, t.from, HopReply::SynAck))
                } else {
                    None
                }
            }
            Incoming::Tcp(_) => None,
        })
    }

    /// Record an answer to the probe `seq`, if it is still in flight.
    fn record(&mut self, at: Instant, seq: u32, from: IpAddr, kind: HopReply) {
        // Late answers to probes given up, or not ours: ignored.
        let Some(i) = self.inflight.iter().position(|f| f.seq == seq) else {
            return;
        };
        let f = self.inflight.swap_remove(i);
        let rtt = at.duration_since(f.sent);
        let at_ttl = usize::from(f.ttl - self.config.first_ttl);
        // An RST from the target while other probes of the flow
        // may have reached it too can be their doing (a SYN
        // meeting another's half-open connection): asked again.
        let crowded = self.inflight.iter().any(|g| g.ttl >= f.ttl);
        if kind == HopReply::Rst && crowded {
            self.queue.push_front(f.ttl);
        } else {
            self.hops[at_ttl].probes.push(HopProbe {
                answer: Some((from, rtt, kind)),
            });
            for n in self.nearest_beyond.iter_mut().take(at_ttl) {
                *n = Some(n.map_or(rtt, |r| r.min(rtt)));
            }
        }
        if kind.ends() && self.last.is_none_or(|l| f.ttl < l) {
            self.last = Some(f.ttl);
        }
        if matches!(kind, HopReply::SynAck | HopReply::Rst) {
            // The others at the target are asked again, one at a time.
            let l = self.last.unwrap_or(f.ttl);
            let queue = &mut self.queue;
            self.inflight.retain(|g| {
                if g.ttl == l {
                    queue.push_front(g.ttl);
                }
                g.ttl < l
            });
        }
    }

    /// Give up on probes past their deadline, and on those beyond the end.
    fn give_up(&mut self) {
        let now = Instant::now();
        let (config, last) = (self.config, self.last);
        let (hops, nearest_beyond) = (&mut self.hops, &self.nearest_beyond);
        self.inflight.retain(|f| {
            let beyond = last.is_some_and(|l| f.ttl > l);
            let expired = now >= deadline(config, nearest_beyond, f);
            if expired && !beyond {
                hops[usize::from(f.ttl - config.first_ttl)]
                    .probes
                    .push(HopProbe { answer: None });
            }
            !(expired || beyond)
        });
    }

    /// Report the first round's hops, in order, as they complete.
    fn report_hops(&mut self, on_event: &mut impl FnMut(&TraceEvent)) {
        let want = usize::from(self.config.probes);
        while self.emitted < self.span
            && self.last.is_none_or(|l| self.hops[self.emitted].ttl <= l)
            && self.hops[self.emitted].probes.len() >= want
        {
            on_event(&TraceEvent::HopDone(self.hops[self.emitted].clone()));
            self.emitted += 1;
        }
    }

    /// The hops up to the end of the path.
    fn into_hops(self) -> Vec<Hop> {
        let mut hops = self.hops;
        let end = self
            .last
            .map_or(self.span, |l| usize::from(l - self.config.first_ttl) + 1);
        hops.truncate(end);
        // A hop left incomplete by an interrupt is still shown if it has anything.
        while hops.last().is_some_and(|h| h.probes.is_empty()) {
            hops.pop();
        }
        hops
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets() {
        let a = resolve("127.0.0.1:8080", Family::Any).unwrap();
        assert_eq!(a, "127.0.0.1:8080".parse().unwrap());
        assert_eq!(
            resolve("[::1]:443", Family::Any).unwrap(),
            "[::1]:443".parse().unwrap()
        );
        assert_eq!(resolve("::1", Family::Any).unwrap().port(), 80);
        assert_eq!(resolve("127.0.0.1", Family::Any).unwrap().port(), 80);
        assert!(resolve("127.0.0.1:x", Family::Any).is_err());
        assert!(resolve("[::1", Family::Any).is_err());
        assert!(resolve("127.0.0.1:80", Family::V6).is_err());
        assert!(resolve(":80", Family::Any).is_err());
    }

    #[test]
    fn stats() {
        let s = PingStats {
            transmitted: 4,
            received: 3,
            errors: 0,
            refused: 0,
            rtts: [10, 20, 30].map(Duration::from_millis).to_vec(),
        };
        let (min, avg, max, mdev) = s.summary_ms().unwrap();
        assert_eq!((min, avg, max), (10.0, 20.0, 30.0));
        assert!((mdev - 8.165).abs() < 0.01);
        assert_eq!(s.median_ms(), Some(20.0));
        assert!((s.loss() - 0.25).abs() < 1e-9);
    }

    /// Without raw sockets the connect() fallback still measures (loopback, no root needed).
    #[test]
    fn connect_fallback_measures_loopback() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let target = l.local_addr().unwrap();
        let config = PingConfig {
            target,
            count: Some(3),
            interval: Duration::from_millis(10),
            timeout: Duration::from_secs(1),
            connect_only: true,
        };
        let mut replies = 0;
        let stats = ping(&config, &AtomicBool::new(false), |e| {
            if let PingEvent::Reply(r) = e {
                assert_eq!(r.kind, ReplyKind::Connected);
                replies += 1;
            }
        })
        .unwrap();
        assert_eq!((stats.transmitted, stats.received, replies), (3, 3, 3));
        drop(l);
    }
}
