//! Diagnosis rules. Each rule watches one connection's segments and reports
//! [`Occurrence`]s; the engine aggregates them into findings.
//!
//! A rule is one file: its per-connection state (kept in the engine's
//! `Heavy`, called from `Diagnoser::segment`, `exchange` or `close`), the
//! occurrences it reports, and `words` — the finding's explanation, fix and
//! `details`, next to the detection they describe. Adding one: a [`Kind`]
//! (and its name), a [`Detail`] variant if it measures something of its own,
//! the file, its hooks in `lib.rs`, a line in `text::finding`'s dispatch (the
//! match is exhaustive: the compiler asks for it), and its verdict sentence
//! in the `report` crate.

pub mod congestion;
pub mod idle;
pub mod listen_queue;
pub mod nagle;
pub mod path_mtu;
pub mod receive_window;
pub mod refused_reset;
pub mod retransmission;
pub mod setup;
pub mod slow_start_after_idle;
pub mod syn_flood;
pub mod timing;
pub mod tls;
pub mod zero_window;

use tcpdoctor_flow::{Connection, Dir};

use crate::http::Software;
use crate::model::LadderRow;

/// The finding vocabulary (the README's "What it finds" table and JSON
/// schema); extended only by adding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    NagleDelayedAck,
    ReceiveWindowLimited,
    ZeroWindow,
    RetransmissionTimeout,
    PacketLoss,
    SynRetransmit,
    ServerDelay,
    ClientDelay,
    NetworkLatency,
    CongestionLimited,
    SlowStartAfterIdle,
    PathMtuBlackhole,
    ListenQueueOverflow,
    SynFlood,
    TlsHandshake,
    ConnectionRefused,
    ConnectionReset,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::NagleDelayedAck => "nagle_delayed_ack",
            Kind::ReceiveWindowLimited => "receive_window_limited",
            Kind::ZeroWindow => "zero_window",
            Kind::RetransmissionTimeout => "retransmission_timeout",
            Kind::PacketLoss => "packet_loss",
            Kind::SynRetransmit => "syn_retransmit",
            Kind::ServerDelay => "server_delay",
            Kind::ClientDelay => "client_delay",
            Kind::NetworkLatency => "network_latency",
            Kind::CongestionLimited => "congestion_limited",
            Kind::SlowStartAfterIdle => "slow_start_after_idle",
            Kind::PathMtuBlackhole => "path_mtu_blackhole",
            Kind::ListenQueueOverflow => "listen_queue_overflow",
            Kind::SynFlood => "syn_flood",
            Kind::TlsHandshake => "tls_handshake",
            Kind::ConnectionRefused => "connection_refused",
            Kind::ConnectionReset => "connection_reset",
        }
    }

    /// A request failed (rather than waited): reported whatever its share of
    /// the time, before the delays.
    pub fn is_failure(self) -> bool {
        matches!(self, Kind::ConnectionRefused | Kind::ConnectionReset)
    }

    pub fn bit(self) -> u32 {
        1 << (self as u32)
    }
}

/// Whether the kind named so is a failed request ([`Kind::is_failure`]).
pub fn failure_name(name: &str) -> bool {
    matches!(name, "connection_refused" | "connection_reset")
}

/// One instance of a mechanism costing time.
#[derive(Debug, Clone)]
pub struct Occurrence {
    pub kind: Kind,
    /// Who is responsible.
    pub culprit: Blame,
    pub delay_ns: i64,
    pub frames: Vec<u64>,
    /// Notes for the ladder: (frame, note).
    pub notes: Vec<(u64, String)>,
    /// Start the ladder at this frame if it is still in the recent-packet ring.
    pub ladder_from: Option<u64>,
    /// A ladder captured by the rule itself (for findings decided at close).
    pub ladder: Option<Vec<LadderRow>>,
    /// The interval this occurrence explains, for the latency budget.
    pub span: Option<(
        crate::budget::Part,
        tcpdoctor_wire::Timestamp,
        tcpdoctor_wire::Timestamp,
    )>,
    pub detail: Detail,
}

/// Who an occurrence blames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Blame {
    /// The endpoint that sends in this direction (`ClientToServer`: the client).
    Side(Dir),
    /// The path. The direction names the data that suffered, for the report.
    Network(Dir),
}

/// Where an endpoint sits in a connection.
pub fn endpoint_of(conn: &Connection, side: Dir) -> (std::net::SocketAddr, &'static str) {
    match side {
        Dir::ClientToServer => (conn.client.addr, "client"),
        Dir::ServerToClient => (conn.server.addr, "server"),
    }
}

/// Kind-specific measurements.
#[derive(Debug, Clone)]
pub enum Detail {
    Nagle {
        /// The peer's ACK wait beyond the round trip: its delayed-ACK timer.
        ack_wait_ns: i64,
        /// From the ACK to the held data at the capture point.
        after_ack_ns: i64,
        small_len: u32,
        held_len: u32,
        software: Option<Software>,
        rtt_ns: Option<i64>,
    },
    Setup {
        /// Where the capture was taken, as far as the packets tell.
        vantage: &'static str,
        syn_retries: u32,
        synack_retries: u32,
        answered: bool,
    },
    Timing {
        rtt_ns: Option<i64>,
        /// Of the delay, the pauses inside the message (the rest was before it).
        inside_ns: i64,
    },
    Latency {
        rtt_ns: i64,
        /// Exchanges that opened their connection (a handshake round trip each), and its time.
        handshakes: u64,
        handshake_ns: i64,
        /// Exchanges whose wait for the response held (at least half) a round trip.
        requests: u64,
        /// Further flights of responses larger than the congestion window.
        flights: u64,
        /// TLS handshake round trips, and their time on the network.
        tls_rounds: u64,
        tls_ns: i64,
        exchanges: u64,
    },
    ZeroWindow {
        probes: u32,
        reopened: bool,
    },
    Loss {
        retransmissions: u32,
        upstream: bool,
        recovered: bool,
        rtt_ns: Option<i64>,
    },
    Congestion {
        rounds: u64,
        max_in_flight: u32,
        bytes: u64,
        transfer_ns: i64,
        rtt_ns: Option<i64>,
    },
    Window {
        mean_window: u32,
        min_window: u32,
        mss: u32,
        rtt_ns: Option<i64>,
        bytes: u64,
        transfer_ns: i64,
        stalls: u64,
        receive_buffer_hint: Option<&'static str>,
    },
    Restart {
        /// The sender's idle spell before the message.
        idle_ns: i64,
        /// The message's first flight, and the window grown before (bytes).
        restart_flight: u32,
        grown_flight: u32,
        /// Waits between its flights, and those the grown window would not have needed.
        rounds: u64,
        extra_rounds: u64,
        bytes: u64,
        mss: u32,
        rtt_ns: Option<i64>,
    },
    Listen {
        /// SYNs retried, the handshake's ACK (and request) ignored, and how
        /// long the request waited for the server to take it.
        syn_drops: u32,
        ack_dropped: bool,
        accept_wait_ns: i64,
    },
    Tls {
        /// The server's key exchange, the client's processing between
        /// flights (the rest of the handshake is round trips).
        server_ns: i64,
        client_ns: i64,
        network_ns: i64,
        /// Handshake round trips (2 for a full TLS 1.2 handshake, 1 for TLS 1.3).
        rounds: u32,
        rtt_ns: Option<i64>,
    },
    /// A flooded endpoint (made when the report is, from [`syn_flood::Floods`]).
    Flood {
        attempts: u64,
        half_open: u64,
        one_shot: u64,
        answered: u64,
        refused: u64,
        sources: u64,
        first_ns: i64,
        last_ns: i64,
        /// Legitimate connections to the target whose SYN had to be retried.
        delayed: u64,
    },
    /// A refused connection or a reset that cost a request.
    Failure {
        requests_lost: u32,
        /// The RST's TTL and that of the endpoint's other packets (equal
        /// when it sent the RST itself).
        rst_ttl: u8,
        ttl: u8,
        /// Bytes of the request that got no answer.
        request_bytes: u64,
    },
    Blackhole {
        /// The segment size that never got through, the one that did.
        big_len: u32,
        small_len: u32,
        /// Full-size retransmissions seen (0 beyond the drop).
        retransmissions: u32,
        /// The retransmissions were seen (the capture is on the sender's side).
        seen: bool,
        rtt_ns: Option<i64>,
    },
}
