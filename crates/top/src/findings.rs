//! Findings from what the kernel reported per connection, in `analyze`'s
//! vocabulary where the mechanism is the same. Tracepoints carry no
//! packets: evidence is connection ids and counts, not frame numbers, and
//! no finding claims time lost it did not measure.
//!
//! Rules (each on one connection, folded per kind, culprit and process):
//! - `retransmission_timeout`: the socket entered the Loss state
//!   (`tcp_cong_state_set` → `TCP_CA_Loss`: the retransmission timer fired).
//! - `packet_loss`: segments retransmitted outside the Loss state (fast
//!   retransmit, SACK recovery, tail-loss probes); with the congestion
//!   states traced, only in a connection that went through Recovery or CWR.
//! - `syn_retransmit`: a SYN sent again (`tcp_retransmit_skb` in SYN-SENT),
//!   or a listener's SYN-ACK sent again (`tcp_retransmit_synack`).
//! - `connection_reset`: an RST sent on or received by a connection.
//! - `zero_window`: the peer advertised a window of 0 for >= 10 ms in all
//!   (timed from the received segments that show it).
//! - `receive_window_limited`: on >= 10 received segments (>= 3 samples when
//!   `tcp_probe` is sampled: one sample stands for `probe_every` segments)
//!   and >= 20% of those with data in flight, the bytes in flight were at
//!   >= 90% of the peer's advertised window.
//!
//! - `send_buffer_limited`: on at least 10 received segments (3 samples)
//!   and a fifth of those with data in flight, a non-blocking writer waited
//!   for buffer space (its last write returned `EAGAIN`) with everything it
//!   wrote already sent, the peer's window open for another segment and no
//!   loss recovery: the flight was the send buffer. (A blocking writer's
//!   wait shows no event until its write returns: not seen.)
//!
//! - `nagle_delayed_ack`: on >= [`MIN_NAGLE_HOLDS`] pure ACKs, the socket
//!   held a write's tail unsent with data in flight and room in both
//!   windows, since its last write at least 20 ms and two round trips
//!   earlier ([`crate::nagle`]).

use std::collections::BTreeMap;
use std::net::SocketAddr;

use rustc_hash::FxHashMap;
use serde::Serialize;

use crate::tracker::{Conn, ProcName, Role};

/// A zero window shorter than this in all is the receiver keeping pace
/// with a fast sender (loopback fills a buffer in microseconds), not a stall.
pub const ZERO_WINDOW_MIN_NS: u64 = 10_000_000;

/// `receive_window_limited` needs this many samples at the window (with
/// `--probe-every 1` the rule's 10 segments are 10 samples).
pub const MIN_BOUND_SAMPLES: u64 = 3;

/// A connection's Nagle holds are named from this many on (one may be a
/// peer that had nothing to say for a while).
pub const MIN_NAGLE_HOLDS: u64 = 3;

/// Distinct (kind, endpoint, process) kept apart.
const MAX_KEYS: usize = 10_000;

/// Evidence kept per finding.
const MAX_EVIDENCE: usize = 10;

/// The owner of the other end of a connection, when it is on this host.
#[derive(Debug, Clone, Copy)]
pub struct Peer {
    pub pid: u32,
    pub role: Role,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FindingKind {
    ConnectionReset,
    RetransmissionTimeout,
    NagleDelayedAck,
    SynRetransmit,
    ZeroWindow,
    ReceiveWindowLimited,
    SendBufferLimited,
    PacketLoss,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Key {
    kind: FindingKind,
    endpoint: String,
    role: &'static str,
    pid: Option<u32>,
}

#[derive(Debug, Default)]
struct Acc {
    connections: u64,
    occurrences: u64,
    /// Kind-specific sums (retransmissions, episodes, segments).
    details: BTreeMap<&'static str, u64>,
    evidence: Vec<Evidence>,
}

/// One connection a finding rests on.
#[derive(Debug, Clone, Serialize)]
pub struct Evidence {
    pub connection: u64,
    pub local: Option<SocketAddr>,
    pub remote: Option<SocketAddr>,
    pub count: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Culprit {
    pub endpoint: String,
    pub role: &'static str,
}

#[derive(Debug, Clone, Serialize)]
pub struct Process {
    pub pid: u32,
    pub command: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    pub kind: FindingKind,
    pub culprit: Culprit,
    /// The process that owns the culprit's socket (for `network` culprits:
    /// the process whose data or connection waited).
    pub process: Option<Process>,
    pub connections: u64,
    pub occurrences: u64,
    pub details: BTreeMap<&'static str, u64>,
    pub evidence: Vec<Evidence>,
    pub explanation: String,
    pub fix: String,
}

#[derive(Debug, Default)]
pub struct Findings {
    acc: FxHashMap<Key, Acc>,
}

/// `packet_loss` occurrences of a connection with `fast` retransmissions
/// outside the Loss state: its Recovery episodes when the congestion-state
/// tracepoint saw them; else one. With the states traced, a retransmission
/// outside any Recovery, Loss or CWR episode repaired nothing: a tail-loss
/// probe that finds its segment lost ends in CWR (or Recovery, from the
/// SACKs it draws), one whose segment had arrived (the ACK was late: a busy
/// receiver, not the path) leaves the socket Open.
fn loss_occurrences(c: &Conn, fast: u64, states: bool) -> u64 {
    if fast == 0 || (states && c.recovery_episodes + c.cwr_episodes == 0) {
        0
    } else {
        c.recovery_episodes.max(1)
    }
}

fn ep(a: Option<SocketAddr>) -> String {
    a.map_or_else(|| "?".to_string(), |a| a.to_string())
}

impl Findings {
    /// One finding's counts from one connection (none when `occ` is 0).
    #[allow(clippy::too_many_arguments)]
    fn hit(
        &mut self,
        c: &Conn,
        kind: FindingKind,
        endpoint: Option<SocketAddr>,
        role: &'static str,
        pid: Option<u32>,
        occ: u64,
        details: &[(&'static str, u64)],
    ) {
        if occ == 0 {
            return;
        }
        let mut key = Key {
            kind,
            endpoint: ep(endpoint),
            role,
            pid,
        };
        // Bounded: past MAX_KEYS, new endpoints share one entry per kind and process.
        if self.acc.len() >= MAX_KEYS && !self.acc.contains_key(&key) {
            key.endpoint = "*".into();
        }
        let a = self.acc.entry(key).or_default();
        a.connections += 1;
        a.occurrences += occ;
        for &(k, v) in details {
            *a.details.entry(k).or_default() += v;
        }
        if a.evidence.len() < MAX_EVIDENCE {
            a.evidence.push(Evidence {
                connection: c.id,
                local: c.local,
                remote: c.remote,
                count: occ,
            });
        }
    }

    /// Nagle's holds on a connection: `holds` of them (all of the
    /// connection's, or an interval's), named once it has shown
    /// [`MIN_NAGLE_HOLDS`].
    pub fn add_nagle(&mut self, c: &Conn, holds: u64, hold_ns: u64, held_bytes: u64) {
        if c.nagle.holds < MIN_NAGLE_HOLDS {
            return;
        }
        let role = c.role.unwrap_or(Role::ClientGuessed);
        self.hit(
            c,
            FindingKind::NagleDelayedAck,
            c.local,
            role.name(),
            c.pid,
            holds,
            &[
                ("holds", holds),
                ("held_us", hold_ns / 1000),
                ("held_bytes", held_bytes),
                ("sent_at_once_bytes", c.nagle.last_sent_at_once),
            ],
        );
    }

    /// Folds one connection's counts in; `states` says whether the
    /// congestion-state tracepoint was traced.
    pub fn add(&mut self, c: &Conn, peer: Option<Peer>, states: bool) {
        let role = c.role.unwrap_or(Role::ClientGuessed);
        let mut hit = |kind,
                       endpoint: Option<SocketAddr>,
                       role,
                       pid,
                       occ: u64,
                       details: &[(&'static str, u64)]| {
            self.hit(c, kind, endpoint, role, pid, occ, details)
        };
        let fast = c.totals.retransmits.saturating_sub(c.rto_retransmits);
        hit(
            FindingKind::RetransmissionTimeout,
            c.local,
            "network",
            c.pid,
            c.loss_episodes,
            &[
                ("rto_episodes", c.loss_episodes),
                ("retransmissions", c.rto_retransmits),
            ],
        );
        let loss_occ = loss_occurrences(c, fast, states);
        hit(
            FindingKind::PacketLoss,
            c.local,
            "network",
            c.pid,
            loss_occ,
            &[
                ("retransmissions", fast),
                ("recovery_episodes", c.recovery_episodes),
            ],
        );
        hit(
            FindingKind::SynRetransmit,
            c.remote,
            "network",
            c.pid,
            c.syn_retransmits,
            &[("syn_retries", c.syn_retransmits)],
        );
        hit(
            FindingKind::SynRetransmit,
            c.local,
            "network",
            c.pid,
            c.synack_retransmits,
            &[("synack_retries", c.synack_retransmits)],
        );
        hit(
            FindingKind::ConnectionReset,
            c.local,
            role.name(),
            c.pid,
            c.resets_sent,
            &[("resets_sent", c.resets_sent)],
        );
        let peer_pid = peer.map(|p| p.pid);
        hit(
            FindingKind::ConnectionReset,
            c.remote,
            role.peer(),
            peer_pid,
            c.resets_received,
            &[("resets_received", c.resets_received)],
        );
        if c.zero_window_ns >= ZERO_WINDOW_MIN_NS {
            hit(
                FindingKind::ZeroWindow,
                c.remote,
                role.peer(),
                peer_pid,
                c.zero_window_segments,
                &[
                    ("zero_window_segments", c.zero_window_segments),
                    ("stalled_us", c.zero_window_ns / 1000),
                ],
            );
        }
        let bound = c.window_bound_segments;
        if bound_enough(bound, c.window_bound_samples, c.in_flight_segments) {
            hit(
                FindingKind::ReceiveWindowLimited,
                c.remote,
                role.peer(),
                peer_pid,
                1,
                &[
                    ("window_bound_segments", bound),
                    ("in_flight_segments", c.in_flight_segments),
                    ("min_window_bytes", u64::from(c.snd_wnd_min.unwrap_or(0))),
                ],
            );
        }
        let bound = c.sndbuf_bound_segments;
        if bound_enough(bound, c.sndbuf_bound_samples, c.in_flight_segments) {
            hit(
                FindingKind::SendBufferLimited,
                c.local,
                role.name(),
                c.pid,
                1,
                &[
                    ("sndbuf_bound_segments", bound),
                    ("in_flight_segments", c.in_flight_segments),
                    ("send_errors", c.send_errors),
                ],
            );
        }
        self.add_nagle(c, c.nagle.holds, c.nagle.hold_ns, c.nagle.held_bytes);
    }

    /// The findings, most severe kind first, then by occurrences.
    pub fn finish(self, names: &FxHashMap<u32, ProcName>) -> Vec<Finding> {
        let mut out: Vec<Finding> = self
            .acc
            .into_iter()
            .map(|(k, a)| {
                let process = k.pid.map(|pid| Process {
                    pid,
                    command: names.get(&pid).map(|n| n.command.clone()),
                });
                let who = process.as_ref().map_or_else(
                    || "a process not identified".to_string(),
                    |p| match &p.command {
                        Some(c) => format!("{c} (pid {})", p.pid),
                        None => format!("pid {}", p.pid),
                    },
                );
                let (explanation, fix) = words(k.kind, &k.endpoint, &who, &a);
                Finding {
                    kind: k.kind,
                    culprit: Culprit {
                        endpoint: k.endpoint,
                        role: k.role,
                    },
                    process,
                    connections: a.connections,
                    occurrences: a.occurrences,
                    details: a.details,
                    evidence: a.evidence,
                    explanation,
                    fix,
                }
            })
            .collect();
        out.sort_by(|a, b| {
            a.kind
                .cmp(&b.kind)
                .then(b.occurrences.cmp(&a.occurrences))
                .then(a.culprit.endpoint.cmp(&b.culprit.endpoint))
        });
        out
    }
}

/// A connection bound by a window or a buffer: on at least 10 segments and
/// a fifth of those with data in flight. Sampled segments are scaled up, so
/// at least [`MIN_BOUND_SAMPLES`] samples must have seen it: one sample is
/// never a finding.
fn bound_enough(segments: u64, samples: u64, in_flight: u64) -> bool {
    segments >= 10 && samples >= MIN_BOUND_SAMPLES && segments * 5 >= in_flight
}

fn d(a: &Acc, k: &str) -> u64 {
    a.details.get(k).copied().unwrap_or(0)
}

/// The explanation and the fix of a finding of `kind`.
fn words(kind: FindingKind, endpoint: &str, who: &str, a: &Acc) -> (String, String) {
    let conns = crate::text::plural(a.connections, "connection");
    match kind {
        FindingKind::RetransmissionTimeout => (
            format!(
                "{who} had its retransmission timer fire {} time(s) on {conns} from {endpoint} \
                 ({} retransmissions after the timeout): the loss was not repaired by fast \
                 retransmit, so the sender waited a whole RTO (>= 200 ms on Linux) each time",
                a.occurrences,
                d(a, "retransmissions")
            ),
            "find where the path drops packets (ip -s link, tc -s qdisc, drops on firewalls or \
             policers); tail loss on short responses is repaired faster with TLP (on by default, \
             net.ipv4.tcp_early_retrans)"
                .into(),
        ),
        FindingKind::PacketLoss => (
            format!(
                "{who} retransmitted {} times from {endpoint} on {conns} ({} recovery episodes): \
                 segments were lost on the path and repaired by fast retransmit / SACK, each \
                 costing about a round trip and a smaller congestion window",
                d(a, "retransmissions"),
                d(a, "recovery_episodes")
            ),
            "find where the path drops packets (ip -s link, tc -s qdisc, nstat TcpExtTCPLostRetransmit, \
             firewalls, policers, a full queue: shape or pace instead)"
                .into(),
        ),
        FindingKind::SynRetransmit => syn_retransmit_words(endpoint, who, &conns, a),
        FindingKind::ConnectionReset => reset_words(endpoint, who, &conns, a),
        FindingKind::NagleDelayedAck => nagle_words(endpoint, who, &conns, a),
        FindingKind::ZeroWindow => (
            format!(
                "{endpoint} ({who}) advertised a zero window on {conns}: the sender stalled for \
                 at least {:.1} ms in all ({} segments received at window 0): the application \
                 did not read fast enough",
                d(a, "stalled_us") as f64 / 1000.0,
                d(a, "zero_window_segments")
            ),
            "read the socket faster (or from a dedicated thread); a bigger receive buffer \
             (do not pin SO_RCVBUF small; net.ipv4.tcp_rmem) only buys time"
                .into(),
        ),
        FindingKind::SendBufferLimited => (
            format!(
                "{endpoint} ({who}) was held back by its own send buffer on {conns}: on {} of {} \
                 received segments with data in flight, its last write had found the buffer \
                 full (EAGAIN, {} in all) while everything written was already in flight, the \
                 peer's window had room and no loss was being recovered: the flight was all \
                 SO_SNDBUF holds, so throughput was send buffer / round trip",
                d(a, "sndbuf_bound_segments"),
                d(a, "in_flight_segments"),
                d(a, "send_errors")
            ),
            "let the send buffer autotune (remove a small SO_SNDBUF; nginx: `sndbuf=` in \
             `listen`), or set it to at least the bandwidth-delay product; raise \
             net.ipv4.tcp_wmem's maximum if autotuning stops there"
                .into(),
        ),
        FindingKind::ReceiveWindowLimited => (
            format!(
                "{endpoint} ({who}) limited {conns}: on {} of {} received segments with data in \
                 flight, the bytes in flight were at its advertised window (smallest {} bytes): \
                 throughput was window / round trip",
                d(a, "window_bound_segments"),
                d(a, "in_flight_segments"),
                d(a, "min_window_bytes")
            ),
            "let the receive buffer autotune (remove a small SO_RCVBUF / `listen … rcvbuf=`), \
             raise net.ipv4.tcp_rmem's maximum, or read faster"
                .into(),
        ),
    }
}

/// The words of a [`FindingKind::SynRetransmit`]: a listener's SYN-ACKs
/// sent again, or a client's SYNs.
fn syn_retransmit_words(endpoint: &str, who: &str, conns: &str, a: &Acc) -> (String, String) {
    if d(a, "synack_retries") > 0 {
        (
            format!(
                "the listener {endpoint} of {who} sent {} SYN-ACK(s) again: clients' final \
                 ACKs did not arrive in time (lost on the path, or the client gave up), so \
                 their connections waited 1 s, 2 s… for the retry",
                d(a, "synack_retries")
            ),
            "look for loss between clients and this server; if the accept queue is full \
             (tcpdoctor sockets --state listen), raise the backlog and accept faster"
                .into(),
        )
    } else {
        (
            format!(
                "{who} sent {} SYN(s) again to {endpoint} on {conns}: the SYN or its SYN-ACK \
                 was lost, or the server's SYN queue dropped it, and connection setup waited \
                 1 s, 3 s… for the retry",
                d(a, "syn_retries")
            ),
            "check that the server answers (a listener, no firewall DROP), its accept \
             queue (tcpdoctor sockets --state listen) and loss on the path"
                .into(),
        )
    }
}

/// The words of a [`FindingKind::ConnectionReset`]: resets sent, or received.
fn reset_words(endpoint: &str, who: &str, conns: &str, a: &Acc) -> (String, String) {
    if d(a, "resets_sent") > 0 {
        (
            format!(
                "{who} reset {conns} at {endpoint} ({} RSTs sent): the connection was \
                 aborted (closed with unread data, SO_LINGER 0, or a segment for a \
                 connection it no longer has)",
                d(a, "resets_sent")
            ),
            "read what the peer sent before closing; check the application's timeouts \
             and keep-alive limits against the peer's"
                .into(),
        )
    } else {
        (
            format!(
                "{endpoint} reset {conns} of {who} ({} RSTs received): the peer aborted it \
                 (a restart, an idle timeout, a load balancer, or unread data at close)",
                d(a, "resets_received")
            ),
            "compare the idle and keep-alive timeouts of both ends (the client's must be \
             shorter than the server's); check what the peer logged"
                .into(),
        )
    }
}

/// The words of a [`FindingKind::NagleDelayedAck`], with the average hold.
fn nagle_words(endpoint: &str, who: &str, conns: &str, a: &Acc) -> (String, String) {
    let holds = d(a, "holds").max(1);
    (
        format!(
            "{who} held the tail of its writes on {conns} from {endpoint} until the peer's \
             delayed ACK, {holds} time(s), {:.1} ms each on average: a {}-byte tail held \
             after {} bytes that left at once. Nagle's algorithm (TCP_NODELAY off) keeps a \
             small segment while an earlier one is unacknowledged, and the peer holds that \
             ACK for its delayed-ACK timer (40 ms on Linux) because it has nothing to send \
             yet",
            d(a, "held_us") as f64 / 1000.0 / holds as f64,
            d(a, "held_bytes") / holds,
            d(a, "sent_at_once_bytes") / a.connections.max(1),
        ),
        "set TCP_NODELAY on this socket (nginx: `tcp_nodelay on`; Java: \
         `Socket.setTcpNoDelay(true)`; Go sets it by default), or write each message in \
         one call (writev, one flush of a buffered writer)"
            .into(),
    )
}
