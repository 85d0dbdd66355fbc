//! Decoded events into connections and processes: sans-IO (time comes with
//! each event, process names are handed in), so every behaviour can be
//! driven by a synthetic event sequence in a test.
//!
//! A connection is keyed by its socket's kernel address (`skaddr`: the one
//! key every tracepoint shares, `sock_send_length` has no addresses); its
//! 4-tuple comes from the first event that carries one. Its process is the
//! one running when an event fired in process context (a `send`, `recv`,
//! `connect`, `listen` or `close` by the process itself); events fired in
//! softirq (received segments, retransmission timers) are charged to that
//! owner. Closed connections are reported once, then retired into the final
//! report (a bounded list) and the findings (folded as they retire).

use std::net::SocketAddr;

use rustc_hash::FxHashMap;
use serde::Serialize;

use crate::decode::{ca, state, Detail, Event, Io, Probe};
use crate::findings::{Findings, Peer};
use crate::nagle::Nagle;

/// Connections listed in the final report; the rest are counted.
pub const MAX_FINISHED: usize = 10_000;
/// Processes named and totalled; beyond, later ones are summed under pid 0.
pub const MAX_PROCS: usize = 100_000;
/// Sockets tracked at once (open, and seen only by address); beyond it the
/// oldest without an address are dropped, then the oldest closed.
pub const MAX_LIVE: usize = 65_536;

/// Which end of the connection this socket is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// It sent the SYN (`connect`).
    Client,
    /// Accepted from a listener.
    Server,
    /// The handshake was not seen: guessed from the ports (the lower one serves).
    ClientGuessed,
    ServerGuessed,
    Listener,
}

impl Role {
    pub fn is_server(self) -> bool {
        matches!(self, Role::Server | Role::ServerGuessed | Role::Listener)
    }

    pub fn name(self) -> &'static str {
        if self.is_server() {
            "server"
        } else {
            "client"
        }
    }

    pub fn peer(self) -> &'static str {
        if self.is_server() {
            "client"
        } else {
            "server"
        }
    }
}

/// How the owning process was learned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OwnerSource {
    /// A socket call the process made (send, recv, connect, listen, close).
    SocketCall,
    /// The socket table (`/proc/PID/fd` through sock_diag), looked up later.
    SocketTable,
}

/// Counters that grow (their difference over an interval is its rate).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counters {
    /// Bytes the process wrote (`sock_send_length`).
    pub sent: u64,
    pub writes: u64,
    /// Bytes the process read (`sock_recv_length`).
    pub received: u64,
    pub reads: u64,
    /// Bytes the peer acknowledged (snd_una advances, from `tcp_probe`).
    pub acked: u64,
    /// Segments received (`tcp_probe` hits; each sample with the window
    /// open counts `probe_every`).
    pub segments_in: u64,
    pub retransmits: u64,
}

impl Counters {
    pub fn minus(&self, o: &Counters) -> Counters {
        Counters {
            sent: self.sent.saturating_sub(o.sent),
            writes: self.writes.saturating_sub(o.writes),
            received: self.received.saturating_sub(o.received),
            reads: self.reads.saturating_sub(o.reads),
            acked: self.acked.saturating_sub(o.acked),
            segments_in: self.segments_in.saturating_sub(o.segments_in),
            retransmits: self.retransmits.saturating_sub(o.retransmits),
        }
    }

    pub fn add(&mut self, o: &Counters) {
        self.sent += o.sent;
        self.writes += o.writes;
        self.received += o.received;
        self.reads += o.reads;
        self.acked += o.acked;
        self.segments_in += o.segments_in;
        self.retransmits += o.retransmits;
    }
}

/// Everything seen of one socket.
#[derive(Debug, Clone, Serialize)]
pub struct Conn {
    pub id: u64,
    #[serde(skip)]
    pub sk: u64,
    /// The socket's cookie (`sock_cookie` of `tcp_probe`): the kernel's id
    /// of it for its whole life, as `sockets` (sock_diag) reports it too.
    pub cookie: Option<u64>,
    pub local: Option<SocketAddr>,
    pub remote: Option<SocketAddr>,
    pub role: Option<Role>,
    pub pid: Option<u32>,
    pub owner_source: Option<OwnerSource>,
    /// Looked up in the socket table once already (a socket no process
    /// holds, closed or never accepted, is not looked up every interval).
    #[serde(skip)]
    pub looked_up: bool,
    pub state: Option<&'static str>,
    #[serde(skip)]
    pub state_num: Option<i32>,
    pub first_ns: u64,
    pub last_ns: u64,
    pub closed_ns: Option<u64>,
    #[serde(skip)]
    pub destroyed: bool,
    pub totals: Counters,
    #[serde(skip)]
    pub shown: Counters,
    pub write_min: Option<u32>,
    pub write_max: u32,
    pub send_errors: u64,
    #[serde(skip)]
    pub last_una: Option<u32>,
    pub srtt_us: Option<u32>,
    pub srtt_min_us: Option<u32>,
    pub srtt_max_us: Option<u32>,
    pub cwnd: Option<u32>,
    pub ssthresh: Option<u32>,
    /// The peer's advertised window at the last received segment, and its minimum.
    pub snd_wnd: Option<u32>,
    pub snd_wnd_min: Option<u32>,
    /// Our advertised window at the last received segment, and its minimum.
    pub rcv_wnd: Option<u32>,
    pub rcv_wnd_min: Option<u32>,
    /// Segments received while the peer's window was 0.
    pub zero_window_segments: u64,
    /// Time the peer's window stayed 0: from the first segment showing it
    /// to the last before one showing it open (a lower bound: the segment
    /// that closed it shows the window before it).
    pub zero_window_ns: u64,
    #[serde(skip)]
    zw_since: Option<(u64, u64)>,
    /// Segments received with data in flight.
    pub in_flight_segments: u64,
    /// … of which with bytes in flight at >= 90% of the peer's window.
    pub window_bound_segments: u64,
    /// The samples behind `window_bound_segments` (each stands for
    /// `probe_every` segments).
    #[serde(skip)]
    pub window_bound_samples: u64,
    /// The last write found the send buffer full (`EAGAIN`) and none
    /// succeeded since: a non-blocking writer waiting for space.
    #[serde(skip)]
    pub waits_for_space: bool,
    /// Segments received with data in flight while the writer waited for
    /// space, everything written already sent, the peer's window open for
    /// another segment and no loss recovery: what was in flight was all the
    /// send buffer held.
    pub sndbuf_bound_segments: u64,
    /// The samples behind `sndbuf_bound_segments`.
    #[serde(skip)]
    pub sndbuf_bound_samples: u64,
    /// Retransmissions while in the Loss state (after an RTO).
    pub rto_retransmits: u64,
    pub syn_retransmits: u64,
    pub synack_retransmits: u64,
    pub retransmit_errors: u64,
    #[serde(skip)]
    pub ca_state: u8,
    /// Entries into Recovery (fast retransmit), Loss (RTO) and CWR (ECN / local congestion).
    pub recovery_episodes: u64,
    pub loss_episodes: u64,
    pub cwr_episodes: u64,
    pub state_changes: u64,
    pub resets_sent: u64,
    pub resets_received: u64,
    /// Nagle's holds ([`crate::nagle`]), and what the intervals showed of
    /// them (holds, their waits, their bytes).
    pub nagle: Nagle,
    #[serde(skip)]
    pub nagle_shown: (u64, u64, u64),
}

impl Conn {
    fn new(id: u64, sk: u64, now: u64) -> Conn {
        Conn {
            id,
            sk,
            cookie: None,
            local: None,
            remote: None,
            role: None,
            pid: None,
            owner_source: None,
            looked_up: false,
            state: None,
            state_num: None,
            first_ns: now,
            last_ns: now,
            closed_ns: None,
            destroyed: false,
            totals: Counters::default(),
            shown: Counters::default(),
            write_min: None,
            write_max: 0,
            send_errors: 0,
            last_una: None,
            srtt_us: None,
            srtt_min_us: None,
            srtt_max_us: None,
            cwnd: None,
            ssthresh: None,
            snd_wnd: None,
            snd_wnd_min: None,
            rcv_wnd: None,
            rcv_wnd_min: None,
            zero_window_segments: 0,
            zero_window_ns: 0,
            zw_since: None,
            in_flight_segments: 0,
            window_bound_segments: 0,
            window_bound_samples: 0,
            waits_for_space: false,
            sndbuf_bound_segments: 0,
            sndbuf_bound_samples: 0,
            rto_retransmits: 0,
            syn_retransmits: 0,
            synack_retransmits: 0,
            retransmit_errors: 0,
            ca_state: ca::OPEN,
            recovery_episodes: 0,
            loss_episodes: 0,
            cwr_episodes: 0,
            state_changes: 0,
            resets_sent: 0,
            resets_received: 0,
            nagle: Nagle::default(),
            nagle_shown: (0, 0, 0),
        }
    }

    pub fn tuple(&self) -> Option<(SocketAddr, SocketAddr)> {
        self.local.zip(self.remote)
    }

    /// Whether the connection did anything worth a line.
    pub fn active(&self) -> bool {
        self.totals != Counters::default()
            || self.state_changes > 0
            || self.resets_sent + self.resets_received + self.synack_retransmits > 0
    }

    fn matches_port(&self, port: u16) -> bool {
        self.local.is_some_and(|a| a.port() == port)
            || self.remote.is_some_and(|a| a.port() == port)
    }

    /// Takes the event's addresses when they are the first, or better ones:
    /// a connecting socket has no local port yet when it enters SYN-SENT.
    #[inline]
    fn learn_address(&mut self, ev: &Event) {
        let better =
            self.local.is_none_or(|l| l.port() == 0) || self.remote.is_some_and(|r| r.port() == 0);
        if better && !matches!(ev.detail, Detail::SynackRetransmit) {
            if let Some((l, r)) = ev.tuple {
                self.local = Some(l);
                self.remote = (r.port() != 0 || !r.ip().is_unspecified()).then_some(r);
                if self.role.is_none() && r.port() != 0 {
                    self.role = Some(if l.port() < r.port() {
                        Role::ServerGuessed
                    } else {
                        Role::ClientGuessed
                    });
                }
            }
        }
    }

    /// Takes `pid` as the owner when the event is a call the process made
    /// itself; returns it when it is a new owner.
    #[inline]
    fn learn_owner(&mut self, pid: u32, ev: &Event) -> Option<u32> {
        let by_process = ev.in_process_context()
            && pid != 0
            && match ev.detail {
                Detail::Send(_) | Detail::Recv(_) => true,
                Detail::SetState { old, new, .. } => {
                    new == state::SYN_SENT || new == state::LISTEN || old == state::ESTABLISHED
                }
                _ => false,
            };
        if by_process && self.pid != Some(pid) {
            self.pid = Some(pid);
            self.owner_source = Some(OwnerSource::SocketCall);
            return Some(pid);
        }
        None
    }

    /// Applies what the event says of the connection; a sampled segment or
    /// read stands for `probe_every`.
    #[inline]
    fn apply(&mut self, time_ns: u64, probe_every: u64, ev: &Event) {
        match ev.detail {
            Detail::Probe(p) => self.on_probe(time_ns, &p, probe_every, !ev.in_process_context()),
            Detail::Retransmit { state: st, err } => self.on_retransmit(st, err),
            Detail::SynackRetransmit => self.on_synack_retransmit(ev.tuple),
            Detail::CongState(Some(s)) => self.on_cong_state(s),
            Detail::CongState(None) => {}
            Detail::SendReset { .. } => self.resets_sent += 1,
            Detail::ReceiveReset => self.resets_received += 1,
            Detail::Destroy => {
                self.destroyed = true;
                self.closed_ns.get_or_insert(time_ns);
            }
            Detail::SetState { old, new, .. } => self.on_set_state(time_ns, old, new),
            Detail::Send(io) => self.on_send(time_ns, &io),
            Detail::Recv(io) => {
                // Reads are sampled with the segments: one stands for
                // probe_every.
                if io.bytes() > 0 {
                    self.totals.received += io.bytes() * probe_every;
                    self.totals.reads += probe_every;
                }
            }
            Detail::RcvqueueFull { .. } | Detail::ExceedBufLimit { .. } => {}
        }
    }

    /// A received segment (`tcp_probe`): acknowledged bytes, RTT, windows
    /// and what bounded the flight.
    #[inline]
    fn on_probe(&mut self, time_ns: u64, p: &Probe, probe_every: u64, in_softirq: bool) {
        if let Some(k) = p.cookie.filter(|&k| k != 0) {
            self.cookie.get_or_insert(k);
        }
        self.nagle.segment(time_ns, p, self.ca_state, in_softirq);
        // A sample with the window open stands for probe_every
        // segments; every zero-window segment is traced.
        let weight = if p.snd_wnd == Some(0) { 1 } else { probe_every };
        self.totals.segments_in += weight;
        if let Some(una) = p.snd_una {
            if let Some(last) = self.last_una {
                let d = una.wrapping_sub(last);
                // Only forward moves within a window (a reordered
                // sample reads as a huge jump).
                if d < 1 << 30 {
                    self.totals.acked += u64::from(d);
                }
            }
            if self.last_una.is_none_or(|l| una.wrapping_sub(l) < 1 << 31) {
                self.last_una = Some(una);
            }
        }
        if let Some(s) = p.srtt_us.filter(|&s| s > 0) {
            self.srtt_us = Some(s);
            self.srtt_min_us = Some(self.srtt_min_us.map_or(s, |m| m.min(s)));
            self.srtt_max_us = Some(self.srtt_max_us.map_or(s, |m| m.max(s)));
        }
        self.cwnd = p.cwnd.or(self.cwnd);
        self.ssthresh = p.ssthresh.or(self.ssthresh);
        if let Some(w) = p.snd_wnd {
            self.snd_wnd = Some(w);
            self.snd_wnd_min = Some(self.snd_wnd_min.map_or(w, |m| m.min(w)));
        }
        if let Some(w) = p.rcv_wnd {
            self.rcv_wnd = Some(w);
            self.rcv_wnd_min = Some(self.rcv_wnd_min.map_or(w, |m| m.min(w)));
        }
        if let (Some(nxt), Some(una), Some(wnd)) = (p.snd_nxt, p.snd_una, p.snd_wnd) {
            self.on_flight(time_ns, nxt.wrapping_sub(una), wnd, weight, in_softirq);
        }
    }

    /// The bytes in flight and the peer's window at a received segment:
    /// time at zero window, and whether the window or the send buffer
    /// bounded the flight.
    #[inline]
    fn on_flight(&mut self, time_ns: u64, flight: u32, wnd: u32, weight: u64, in_softirq: bool) {
        if wnd == 0 {
            self.zero_window_segments += 1;
            let since = self.zw_since.map_or(time_ns, |(s, _)| s);
            self.zw_since = Some((since, time_ns));
        } else if let Some((s, last)) = self.zw_since.take() {
            self.zero_window_ns += last.saturating_sub(s);
        }
        if flight > 0 && flight < 1 << 31 {
            self.in_flight_segments += weight;
            if wnd > 0 && u64::from(flight) * 10 >= u64::from(wnd) * 9 {
                self.window_bound_segments += weight;
                self.window_bound_samples += 1;
            }
            if self.waits_for_space
                && in_softirq
                && self.ca_state == ca::OPEN
                && self.nagle.unsent() <= SNDBUF_SLACK
                && u64::from(flight) + SNDBUF_SLACK as u64 <= u64::from(wnd)
            {
                self.sndbuf_bound_segments += weight;
                self.sndbuf_bound_samples += 1;
            }
        }
    }

    /// A retransmitted segment (`tcp_retransmit_skb`), or a failure to send one.
    #[inline]
    fn on_retransmit(&mut self, st: Option<i32>, err: i32) {
        if err != 0 {
            self.retransmit_errors += 1;
        } else if st == Some(state::SYN_SENT) {
            self.syn_retransmits += 1;
        } else {
            self.totals.retransmits += 1;
            if self.ca_state == ca::LOSS {
                self.rto_retransmits += 1;
            }
        }
    }

    /// A SYN-ACK retransmitted by a listener.
    #[inline]
    fn on_synack_retransmit(&mut self, tuple: Option<(SocketAddr, SocketAddr)>) {
        self.synack_retransmits += 1;
        self.role = Some(Role::Listener);
        self.state = Some("listen");
        // The request's (local, client) tuple is not the listener's.
        if let Some((l, _)) = tuple {
            self.local = Some(l);
            self.remote = None;
        }
    }

    /// A congestion-avoidance state change, counting the episodes entered.
    #[inline]
    fn on_cong_state(&mut self, s: u8) {
        if s != self.ca_state {
            match s {
                ca::RECOVERY => self.recovery_episodes += 1,
                ca::LOSS => self.loss_episodes += 1,
                ca::CWR => self.cwr_episodes += 1,
                _ => {}
            }
        }
        self.ca_state = s;
    }

    /// A TCP state change: the state, the role it shows, the close.
    #[inline]
    fn on_set_state(&mut self, time_ns: u64, old: i32, new: i32) {
        self.state_changes += 1;
        self.state_num = Some(new);
        self.state = Some(state::name(new));
        match (old, new) {
            (_, state::SYN_SENT) => self.role = Some(Role::Client),
            (state::CLOSE | state::LISTEN, state::SYN_RECV) => self.role = Some(Role::Server),
            (_, state::LISTEN) => self.role = Some(Role::Listener),
            _ => {}
        }
        if new == state::CLOSE {
            self.closed_ns.get_or_insert(time_ns);
        }
    }

    /// A write by the process (`sock_send_length`), or its failure.
    #[inline]
    fn on_send(&mut self, time_ns: u64, io: &Io) {
        if io.ret < 0 {
            self.send_errors += 1;
            self.waits_for_space |= io.ret == -EAGAIN;
        } else if io.bytes() > 0 {
            self.waits_for_space = false;
            let n = io.bytes();
            self.totals.sent += n;
            self.totals.writes += 1;
            self.nagle.write(time_ns, n);
            let n = u32::try_from(n).unwrap_or(u32::MAX);
            self.write_min = Some(self.write_min.map_or(n, |m| m.min(n)));
            self.write_max = self.write_max.max(n);
        }
    }
}

/// A process's name, read from `/proc` when it was first seen.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ProcName {
    pub command: String,
    pub cmdline: String,
    /// Its cgroup (v2: the path of `0::`; else the first hierarchy's),
    /// empty when unknown: the service or container it runs in.
    pub cgroup: String,
}

/// Counts of the whole trace.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Stats {
    pub events: u64,
    /// Samples the kernel dropped (ring full): holes in every count below.
    pub lost: u64,
    /// Times the kernel throttled sampling (events missed, uncounted).
    pub throttled: u64,
    /// `kernel.perf_event_max_sample_rate` when the trace began.
    pub max_sample_rate: Option<u64>,
    pub truncated: u64,
    pub unknown_type: u64,
    pub other_family: u64,
    pub bad_records: u64,
    /// Events of a socket not (yet) tied to an address when it was dropped.
    pub unmatched: u64,
    pub rcvqueue_full: u64,
    pub exceed_buf_limit_send: u64,
    pub exceed_buf_limit_receive: u64,
    /// RSTs the kernel sent for segments that matched no socket (a closed port).
    pub resets_without_socket: u64,
    pub connections_seen: u64,
    pub connections_unlisted: u64,
    /// `tcp_destroy_sock` and `inet_sock_set_state` events: destroys without
    /// any state change mean the latter are being suppressed (see [`Stats::notes`]).
    pub destroys: u64,
    pub state_events: u64,
    /// Intervals in which `tcp_probe` was sampled (one segment in N).
    pub probe_sampled_intervals: u64,
}

impl Stats {
    /// What the counts say about the trace itself.
    pub fn notes(&self) -> Vec<String> {
        let mut n = Vec::new();
        if self.destroys >= 5 && self.state_events == 0 {
            n.push(format!(
                "{} sockets were destroyed but no sock:inet_sock_set_state event arrived: a BPF \
                 program attached to that tracepoint through perf (tcplife, tcpstates) that \
                 returns 0 hides its events from every other reader; client/server roles are \
                 then guessed from the ports and processes come from socket calls only",
                self.destroys
            ));
        }
        if self.throttled > 0 {
            let rate = self
                .max_sample_rate
                .map_or_else(|| "?".to_string(), |r| r.to_string());
            n.push(format!(
                "the kernel throttled sampling {} times (kernel.perf_event_max_sample_rate = \
                 {rate}): events of those moments were missed and not counted; raise it \
                 (sysctl -w kernel.perf_event_max_sample_rate=...) or trace one --port",
                self.throttled
            ));
        }
        if self.probe_sampled_intervals > 0 {
            n.push(format!(
                "tcp:tcp_probe and sock:sock_recv_length were sampled in {} interval(s) \
                 (segments arrived fast): segment counts and bytes read are estimates, SRTT, \
                 CWND and windows those of the last sample, and a connection with few segments \
                 may have none (--probe-every 1 takes every segment and read)",
                self.probe_sampled_intervals
            ));
        }
        if self.lost > 0 {
            n.push(format!(
                "the kernel dropped {} samples (a ring was full): counts are lower bounds; \
                 raise --ring-pages",
                self.lost
            ));
        }
        n
    }
}

/// What the user asked to see.
#[derive(Debug, Clone, Copy, Default)]
pub struct Filter {
    pub port: Option<u16>,
    pub pid: Option<u32>,
}

/// `-EAGAIN` from a write: the send buffer was full (Linux's value).
const EAGAIN: i32 = 11;

/// Unsent bytes below one smallest segment (536) count as none, and the
/// peer's window must have room for one more: a send-buffer bound
/// connection's buffer holds nothing but the flight.
const SNDBUF_SLACK: i64 = 536;

pub struct Tracker {
    filter: Filter,
    live: FxHashMap<u64, Box<Conn>>,
    next_id: u64,
    pub stats: Stats,
    pub names: FxHashMap<u32, ProcName>,
    unnamed: Vec<u32>,
    /// Closed connections whose socket address was taken by a new one
    /// before the interval ended: reported with the interval, then retired.
    closing: Vec<Conn>,
    finished: Vec<Conn>,
    /// Per process: the counters of its connections already retired.
    retired: FxHashMap<u32, ProcAcc>,
    findings: Findings,
    /// Who owns which (local, remote): to name the process at the other end
    /// of a connection when both ends are on this host. Bounded.
    owners: FxHashMap<(SocketAddr, SocketAddr), (u32, Role)>,
    pub first_ns: Option<u64>,
    pub last_ns: u64,
    /// The latest event time when the last interval ended.
    interval_mark_ns: u64,
    /// Received segments one `tcp_probe` sample with the window open stands
    /// for (1: every segment is traced), and reads one `sock_recv_length`
    /// sample stands for; zero-window samples stand for one.
    pub probe_every: u32,
    /// Whether `tcp_cong_state_set` is traced: then a retransmission that
    /// led to no Recovery, Loss or CWR episode is known to have repaired
    /// nothing (see [`Findings::add`]).
    pub states_traced: bool,
}

impl Tracker {
    pub fn new(filter: Filter) -> Tracker {
        Tracker {
            filter,
            live: FxHashMap::default(),
            next_id: 1,
            stats: Stats::default(),
            names: FxHashMap::default(),
            unnamed: Vec::new(),
            closing: Vec::new(),
            finished: Vec::new(),
            retired: FxHashMap::default(),
            findings: Findings::default(),
            owners: FxHashMap::default(),
            first_ns: None,
            last_ns: 0,
            interval_mark_ns: 0,
            probe_every: 1,
            states_traced: false,
        }
    }

    /// Feeds one event; `pid` is the sampled process (thread group).
    pub fn handle(&mut self, time_ns: u64, pid: u32, ev: &Event) {
        self.count(time_ns, ev);
        if !self.admit(ev) {
            return;
        }
        // The kernel reuses a freed socket's memory: a socket starting a new
        // life at the address of a closed one is a new connection.
        let new_life = matches!(ev.detail, Detail::SetState { old, new, .. }
            if old == state::CLOSE || new == state::SYN_SENT || (old == state::LISTEN && new == state::SYN_RECV));
        // After tcp_destroy_sock the memory is free: anything later at that
        // address is another socket (even when no state change was seen).
        let reborn = |c: &Conn| {
            (c.destroyed && !matches!(ev.detail, Detail::Destroy))
                || (new_life && (c.closed_ns.is_some() || c.state_num == Some(state::CLOSE)))
        };
        // A socket being born at an address whose earlier events never got
        // an address (another socket's writes, filtered out by port in the
        // kernel, its destroy too): those were not this connection's.
        if new_life && self.live.get(&ev.sk).is_some_and(|c| c.local.is_none()) {
            self.live.remove(&ev.sk);
            self.stats.unmatched += 1;
        }
        let probe_every = u64::from(self.probe_every.max(1));
        // The common case, a live connection's next event, looks it up once.
        let c = match self.live.get_mut(&ev.sk) {
            Some(c) if !reborn(c) => c,
            _ => {
                self.start(ev.sk, time_ns, reborn);
                let Some(c) = self.live.get_mut(&ev.sk) else {
                    return;
                };
                c
            }
        };
        c.last_ns = c.last_ns.max(time_ns);
        c.learn_address(ev);
        let learned_owner = c.learn_owner(pid, ev);
        c.apply(time_ns, probe_every, ev);
        if let Some(pid) = learned_owner {
            let at = c.tuple().zip(c.role);
            self.note_owner(pid, at);
        }
    }

    /// Counts the event in the trace's totals and moves the trace's clock.
    #[inline]
    fn count(&mut self, time_ns: u64, ev: &Event) {
        self.stats.events += 1;
        match ev.detail {
            // Destroys of every port reach here (see `kernel_filter`).
            Detail::Destroy if ev.tuple.is_none_or(|(l, r)| self.port_ok(l, r)) => {
                self.stats.destroys += 1
            }
            Detail::SetState { .. } => self.stats.state_events += 1,
            _ => {}
        }
        self.first_ns.get_or_insert(time_ns);
        self.last_ns = self.last_ns.max(time_ns);
    }

    /// Whether the event goes on to a connection; events of none (buffer
    /// limits, other protocols and ports, no socket, a freed socket never
    /// seen) are counted or dropped here.
    #[inline]
    fn admit(&mut self, ev: &Event) -> bool {
        match ev.detail {
            Detail::RcvqueueFull { .. } => {
                self.stats.rcvqueue_full += 1;
                return false;
            }
            Detail::ExceedBufLimit { receive } => {
                if receive {
                    self.stats.exceed_buf_limit_receive += 1;
                } else {
                    self.stats.exceed_buf_limit_send += 1;
                }
                return false;
            }
            Detail::Send(io) | Detail::Recv(io) if !io.is_tcp() => return false,
            Detail::SetState { protocol, .. } if protocol.is_some_and(|p| p != 6) => return false,
            _ => {}
        }
        if ev.sk == 0 {
            if matches!(ev.detail, Detail::SendReset { .. }) {
                let ours = ev.tuple.is_some_and(|(l, r)| self.port_ok(l, r));
                if ours || self.filter.port.is_none() {
                    self.stats.resets_without_socket += 1;
                }
            }
            return false;
        }
        // A freed socket's last events: nothing to start a connection with.
        let closing = matches!(ev.detail, Detail::Destroy)
            || matches!(ev.detail, Detail::SetState { new, .. } if new == state::CLOSE);
        if closing && !self.live.contains_key(&ev.sk) {
            return false;
        }
        if let Some((l, r)) = ev.tuple {
            if !self.port_ok(l, r) {
                // Filtered in the kernel where the tracepoint has ports; the
                // rest (tcp_send_reset, every socket's destroy) here. Another
                // port's destroy frees an address whose unaddressed reads and
                // writes were that socket's; a connection of the port found
                // there was born after it (the destroy, from another CPU,
                // read later) and stays.
                let later = matches!(ev.detail, Detail::Destroy)
                    && self.live.get(&ev.sk).is_some_and(|c| c.local.is_some());
                if !later {
                    self.live.remove(&ev.sk);
                }
                return false;
            }
        }
        true
    }

    /// Records a process just learned to own a connection (at its
    /// (local, remote) with its role, when known), and queues it for naming.
    #[inline]
    fn note_owner(&mut self, pid: u32, at: Option<((SocketAddr, SocketAddr), Role)>) {
        if let Some((t, role)) = at {
            if self.owners.len() >= MAX_LIVE {
                self.owners.clear();
            }
            self.owners.insert(t, (pid, role));
        }
        if !self.names.contains_key(&pid) && !self.unnamed.contains(&pid) {
            self.unnamed.push(pid);
        }
    }

    /// A connection at `sk` from `now` on: the one there retires to
    /// `closing` when `reborn` says the socket started a new life.
    fn start(&mut self, sk: u64, now: u64, reborn: impl Fn(&Conn) -> bool) {
        if self.live.get(&sk).is_some_and(|c| reborn(c)) {
            if let Some(mut old) = self.live.remove(&sk).map(|b| *b) {
                old.closed_ns.get_or_insert(old.last_ns);
                if self.closing.len() < MAX_LIVE {
                    self.closing.push(old);
                } else {
                    self.retire(old);
                }
            }
        }
        if !self.live.contains_key(&sk) {
            if self.live.len() >= MAX_LIVE {
                self.make_room();
            }
            let id = self.next_id;
            self.next_id += 1;
            self.live.insert(sk, Box::new(Conn::new(id, sk, now)));
        }
    }

    fn port_ok(&self, l: SocketAddr, r: SocketAddr) -> bool {
        self.filter
            .port
            .is_none_or(|p| l.port() == p || r.port() == p)
    }

    /// Drops sockets never tied to an address, oldest first; then retires
    /// the oldest closed ones.
    fn make_room(&mut self) {
        let mut blind: Vec<(u64, u64)> = self
            .live
            .values()
            .filter(|c| c.local.is_none())
            .map(|c| (c.last_ns, c.sk))
            .collect();
        blind.sort_unstable();
        for (_, sk) in blind.iter().take(MAX_LIVE / 8) {
            self.live.remove(sk);
            self.stats.unmatched += 1;
        }
        if self.live.len() >= MAX_LIVE {
            let mut closed: Vec<(u64, u64)> = self
                .live
                .values()
                .filter(|c| c.closed_ns.is_some())
                .map(|c| (c.last_ns, c.sk))
                .collect();
            closed.sort_unstable();
            for (_, sk) in closed.into_iter().take(MAX_LIVE / 8) {
                if let Some(c) = self.live.remove(&sk) {
                    self.retire(*c);
                }
            }
        }
    }

    /// Drops the sockets never tied to an address that had no event during
    /// the whole interval. Writes and reads carry no ports, so every socket
    /// of the host that writes gets an entry; those of other ports never
    /// learn an address (their state changes are filtered out in the kernel)
    /// and, with no close seen either, would stay until the table is full.
    fn forget_blind(&mut self) {
        let since = self.interval_mark_ns;
        let before = self.live.len();
        self.live
            .retain(|_, c| c.local.is_some() || c.last_ns > since);
        self.stats.unmatched += (before - self.live.len()) as u64;
        self.interval_mark_ns = self.last_ns;
    }

    /// Processes seen since the last call whose names are not known yet.
    pub fn take_unnamed(&mut self) -> Vec<u32> {
        std::mem::take(&mut self.unnamed)
    }

    pub fn name(&mut self, pid: u32, name: ProcName) {
        if self.names.len() < MAX_PROCS {
            self.names.insert(pid, name);
        }
    }

    /// Connections with an address and no owner yet, not looked up before,
    /// for a lookup in the socket table (marked as looked up).
    pub fn ownerless(&mut self) -> Vec<(u64, SocketAddr, Option<SocketAddr>)> {
        self.live
            .values_mut()
            .filter(|c| c.pid.is_none() && !c.looked_up && c.active() && c.local.is_some())
            .filter_map(|c| {
                c.looked_up = true;
                Some((c.sk, c.local?, c.remote))
            })
            .collect()
    }

    /// Sets an owner found in the socket table.
    pub fn set_owner(&mut self, sk: u64, pid: u32) {
        if let Some(c) = self.live.get_mut(&sk) {
            if c.pid.is_none() {
                c.pid = Some(pid);
                c.owner_source = Some(OwnerSource::SocketTable);
                if !self.names.contains_key(&pid) && !self.unnamed.contains(&pid) {
                    self.unnamed.push(pid);
                }
            }
        }
    }

    fn visible(&self, c: &Conn) -> bool {
        c.local.is_some()
            && self.filter.port.is_none_or(|p| c.matches_port(p))
            && self.filter.pid.is_none_or(|p| c.pid == Some(p))
    }

    fn retire(&mut self, mut c: Conn) {
        if let Some((s, last)) = c.zw_since.take() {
            c.zero_window_ns += last.saturating_sub(s);
        }
        if !self.visible(&c) || !c.active() {
            if c.local.is_none() {
                self.stats.unmatched += 1;
            }
            return;
        }
        self.stats.connections_seen += 1;
        if let Some(pid) = c.pid {
            // Bounded: past MAX_PROCS processes, the rest are summed under pid 0.
            let pid = if self.retired.len() >= MAX_PROCS && !self.retired.contains_key(&pid) {
                0
            } else {
                pid
            };
            let e = self.retired.entry(pid).or_default();
            e.totals.add(&c.totals);
            e.connections += 1;
            e.rto_episodes += c.loss_episodes;
            e.resets += c.resets_sent + c.resets_received;
        }
        let peer = self.peer_of(&c);
        self.findings.add(&c, peer, self.states_traced);
        if self.finished.len() < MAX_FINISHED {
            self.finished.push(c);
        } else {
            self.stats.connections_unlisted += 1;
        }
    }

    fn register_owners(&mut self) {
        for c in self.live.values().map(|c| &**c).chain(self.closing.iter()) {
            if let (Some(pid), Some(t), Some(role)) = (c.pid, c.tuple(), c.role) {
                if self.owners.len() >= MAX_LIVE {
                    self.owners.clear();
                }
                self.owners.insert(t, (pid, role));
            }
        }
    }

    fn peer_of(&self, c: &Conn) -> Option<Peer> {
        let (l, r) = c.tuple()?;
        self.owners
            .get(&(r, l))
            .map(|&(pid, role)| Peer { pid, role })
    }

    /// The view of the interval that just ended; closed connections are
    /// retired after it.
    pub fn interval(&mut self, top: usize) -> Interval {
        let mut procs: FxHashMap<Option<u32>, ProcRow> = FxHashMap::default();
        let mut rows = Vec::new();
        for c in self.live.values().map(|c| &**c).chain(self.closing.iter()) {
            if !self.visible(c) {
                continue;
            }
            let d = c.totals.minus(&c.shown);
            let p = procs.entry(c.pid).or_insert_with(|| ProcRow {
                pid: c.pid,
                command: c
                    .pid
                    .and_then(|p| self.names.get(&p))
                    .map(|n| n.command.clone()),
                ..ProcRow::default()
            });
            p.connections += 1;
            p.delta.add(&d);
            p.rto_episodes += c.loss_episodes;
            p.resets += c.resets_sent + c.resets_received;
            if d != Counters::default() || c.closed_ns.is_some() {
                rows.push(ConnRow::of(c, d));
            }
        }
        rows.sort_by_key(|r| std::cmp::Reverse(r.delta.sent + r.delta.received + r.delta.acked));
        rows.truncate(top);
        let mut now = Findings::default();
        for c in self.live.values().map(|c| &**c).chain(self.closing.iter()) {
            let (n, (holds, ns, bytes)) = (&c.nagle, c.nagle_shown);
            if self.visible(c) && n.holds > holds {
                now.add_nagle(c, n.holds - holds, n.hold_ns - ns, n.held_bytes - bytes);
            }
        }
        let mut processes: Vec<ProcRow> = procs.into_values().collect();
        processes
            .sort_by_key(|p| std::cmp::Reverse(p.delta.sent + p.delta.received + p.delta.acked));
        processes.truncate(top);
        // Everything now counted as shown; closed sockets retire (after
        // every owner is known, for the findings about the other end).
        self.register_owners();
        let mut closed = Vec::new();
        for c in self.live.values_mut() {
            c.shown = c.totals;
            c.nagle_shown = (c.nagle.holds, c.nagle.hold_ns, c.nagle.held_bytes);
            if c.closed_ns.is_some() {
                closed.push(c.sk);
            }
        }
        for sk in closed {
            if let Some(c) = self.live.remove(&sk) {
                self.retire(*c);
            }
        }
        for c in std::mem::take(&mut self.closing) {
            self.retire(c);
        }
        self.forget_blind();
        Interval {
            processes,
            connections: rows,
            open: self.live.values().filter(|c| self.visible(c)).count() as u64,
            findings: now.finish(&self.names),
        }
    }

    /// The final report: every connection (retired and still open), per
    /// process totals, findings.
    pub fn finish(mut self) -> Final {
        self.register_owners();
        for c in std::mem::take(&mut self.closing) {
            self.retire(c);
        }
        let open: Vec<u64> = self.live.keys().copied().collect();
        for sk in open {
            if let Some(c) = self.live.remove(&sk) {
                self.retire(*c);
            }
        }
        let mut procs: FxHashMap<u32, ProcTotal> = FxHashMap::default();
        for (&pid, a) in &self.retired {
            let name = self.names.get(&pid).cloned().unwrap_or_default();
            procs.insert(
                pid,
                ProcTotal {
                    pid,
                    command: name.command,
                    cmdline: name.cmdline,
                    cgroup: (!name.cgroup.is_empty()).then_some(name.cgroup),
                    connections: a.connections,
                    totals: a.totals,
                    rto_episodes: a.rto_episodes,
                    resets: a.resets,
                },
            );
        }
        let mut processes: Vec<ProcTotal> = procs.into_values().collect();
        processes
            .sort_by_key(|p| std::cmp::Reverse(p.totals.sent + p.totals.received + p.totals.acked));
        let findings = self.findings.finish(&self.names);
        Final {
            stats: self.stats,
            processes,
            connections: self.finished,
            findings,
            names: self.names,
            duration_ns: self
                .last_ns
                .saturating_sub(self.first_ns.unwrap_or(self.last_ns)),
        }
    }
}

/// A process's retired connections, summed.
#[derive(Debug, Clone, Default)]
struct ProcAcc {
    totals: Counters,
    connections: u64,
    rto_episodes: u64,
    resets: u64,
}

/// One process in an interval.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ProcRow {
    pub pid: Option<u32>,
    pub command: Option<String>,
    pub connections: u64,
    #[serde(flatten)]
    pub delta: Counters,
    pub rto_episodes: u64,
    pub resets: u64,
}

/// One connection in an interval: its totals, what moved in the interval.
#[derive(Debug, Clone, Serialize)]
pub struct ConnRow {
    pub id: u64,
    pub pid: Option<u32>,
    pub local: Option<SocketAddr>,
    pub remote: Option<SocketAddr>,
    pub state: Option<&'static str>,
    pub delta: Counters,
    pub totals: Counters,
    pub srtt_us: Option<u32>,
    pub srtt_min_us: Option<u32>,
    pub cwnd: Option<u32>,
    pub snd_wnd: Option<u32>,
    pub rcv_wnd: Option<u32>,
    pub loss_episodes: u64,
    pub resets: u64,
    pub closed: bool,
}

impl ConnRow {
    fn of(c: &Conn, delta: Counters) -> ConnRow {
        ConnRow {
            id: c.id,
            pid: c.pid,
            local: c.local,
            remote: c.remote,
            state: c.state,
            delta,
            totals: c.totals,
            srtt_us: c.srtt_us,
            srtt_min_us: c.srtt_min_us,
            cwnd: c.cwnd,
            snd_wnd: c.snd_wnd,
            rcv_wnd: c.rcv_wnd,
            loss_episodes: c.loss_episodes,
            resets: c.resets_sent + c.resets_received,
            closed: c.closed_ns.is_some(),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Interval {
    pub processes: Vec<ProcRow>,
    pub connections: Vec<ConnRow>,
    pub open: u64,
    /// What the interval showed on connections still open: Nagle's holds
    /// (the other kinds are folded as connections close).
    pub findings: Vec<crate::findings::Finding>,
}

/// A process over the whole trace.
#[derive(Debug, Clone, Serialize)]
pub struct ProcTotal {
    pub pid: u32,
    pub command: String,
    pub cmdline: String,
    pub cgroup: Option<String>,
    pub connections: u64,
    #[serde(flatten)]
    pub totals: Counters,
    pub rto_episodes: u64,
    pub resets: u64,
}

pub struct Final {
    pub stats: Stats,
    pub processes: Vec<ProcTotal>,
    pub connections: Vec<Conn>,
    pub findings: Vec<crate::findings::Finding>,
    pub names: FxHashMap<u32, ProcName>,
    /// From the first event to the last.
    pub duration_ns: u64,
}
