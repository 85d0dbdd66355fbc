//! The analysis result: what `--format json` prints (schema 1).
//!
//! This is a stable interface. Fields are only ever added; `kind` values
//! only ever extended. Times are milliseconds (floats), frame numbers are
//! 1-based as Wireshark numbers them, endpoints are `IP:PORT` (`[v6]:PORT`).

use std::net::SocketAddr;

use serde::{Serialize, Serializer};

/// Serializes a value with its `Display` form (`IP:PORT`, `[v6]:PORT`).
fn display<T: std::fmt::Display, S: Serializer>(v: &T, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(v)
}

/// The whole document.
#[derive(Debug, Clone, Serialize)]
pub struct Analysis {
    pub schema: u32,
    pub capture: CaptureSummary,
    pub connections: Vec<ConnectionSummary>,
    /// Causes that cost at least 1% of the time, largest first.
    pub findings: Vec<Finding>,
    /// Causes seen that cost less than that: real, but not why things are slow.
    pub minor_findings: Vec<Finding>,
}

#[derive(Debug, Clone, Serialize, Default)]
pub struct CaptureSummary {
    /// Every record in the capture, decodable or not.
    pub packets: u64,
    pub tcp_packets: u64,
    pub connections: u64,
    /// Connections held in memory at once, at most.
    pub peak_open_connections: u64,
    /// Connections closed before they ended or idled out because more than
    /// `--max-open-connections` were open at once (also said in `warnings`).
    /// They are summarised and counted like the others.
    pub connections_closed_early: u64,
    /// The connections listed under `connections` (the ones that lost the most time).
    pub connections_listed: u64,
    /// The total every finding's `share_of_time` is of (ms): the complete
    /// exchanges' time plus the time findings lost outside them (setup that
    /// never led to an exchange, a transfer cut short); the capture's span
    /// when there is neither. Time two findings explain at once is counted
    /// once, so the shares add up to at most 1.
    pub share_total_ms: f64,
    pub duration_ms: f64,
    /// Unix time of the first packet, seconds.
    pub start_unix: f64,
    pub bytes_on_wire: u64,
    pub link_types: Vec<String>,
    /// TCP segments of no connection seen with a handshake or data (e.g.
    /// ACKs or RSTs trailing a connection that was already closed).
    pub stray_tcp_packets: u64,
    /// Frames that carry no TCP (ARP, UDP, ICMP…).
    pub non_tcp: u64,
    /// IP fragments (not reassembled, not analysed).
    pub fragments: u64,
    /// Frames that could not be decoded, by reason. Never silently dropped.
    pub undecodable: Vec<Count>,
    /// Complete request/response exchanges and their latency at the capture point.
    pub exchanges: u64,
    pub exchange_latency_ms: Option<Percentiles>,
    /// Where the time of a typical (median) exchange went, and per server.
    pub latency_budget: Option<LatencyBudget>,
    /// Delayed-ACK timers observed, per ACK sender (clients by address).
    pub delayed_ack: Vec<DelayedAck>,
    /// Where the capture was taken, as most connections tell it.
    pub vantage: Option<Vantage>,
    /// Data segments and SYNs captured twice (mirror ports, two hops), dropped.
    pub duplicates: u64,
    /// Problems with the capture itself (truncation, corruption), in plain words.
    pub warnings: Vec<String>,
}

/// An endpoint's delayed-ACK timer, from pure ACKs of one small segment that
/// waited beyond the round trip.
#[derive(Debug, Clone, Serialize)]
pub struct DelayedAck {
    pub endpoint: String,
    pub role: &'static str,
    pub acks: u64,
    /// Median wait beyond the round trip.
    pub typical_ms: f64,
    /// The stack it matches: Linux (40 ms minimum), macOS (~100 ms), Windows (200 ms).
    pub matches: &'static str,
}

#[derive(Debug, Clone, Serialize)]
pub struct Vantage {
    /// `client`, `server`, `between` or `unknown`.
    pub place: &'static str,
    /// `ttl`, `handshake`, or why it could not be told.
    pub from: &'static str,
    pub connections: u64,
    pub of: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct LatencyBudget {
    /// The exchanges around the median (its latency bucket, ±0.4%): their mean budget.
    pub median: BudgetLine,
    /// Every exchange, averaged: the mean budget.
    pub mean: BudgetLine,
    /// Per server endpoint (mean budget), the slowest in total first; at most 20.
    pub servers: Vec<ServerBudget>,
}

/// A budget's parts, `{part: ms}` in JSON, parts with no time left out.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BudgetParts(pub Vec<(&'static str, f64)>);

impl BudgetParts {
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, f64)> + '_ {
        self.0.iter().copied()
    }

    pub fn get(&self, part: &str) -> Option<f64> {
        self.0.iter().find(|(k, _)| *k == part).map(|(_, v)| *v)
    }
}

impl Serialize for BudgetParts {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct BudgetLine {
    pub exchanges: u64,
    /// The parts' sum: the exchanges' mean duration.
    pub total_ms: f64,
    pub parts_ms: BudgetParts,
}

#[derive(Debug, Clone, Serialize)]
pub struct ServerBudget {
    #[serde(serialize_with = "display")]
    pub server: SocketAddr,
    pub exchanges: u64,
    pub total_ms: f64,
    pub parts_ms: BudgetParts,
}

#[derive(Debug, Clone, Serialize)]
pub struct Count {
    pub reason: String,
    pub count: u64,
    /// The first frame with this problem.
    pub first_frame: u64,
}

#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct Percentiles {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
    pub mean: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct ConnectionSummary {
    /// 1-based, in order of first appearance.
    pub id: u64,
    /// Wireshark's `tcp.stream` for this connection (`id` − 1).
    pub tcp_stream: u64,
    #[serde(serialize_with = "display")]
    pub client: SocketAddr,
    #[serde(serialize_with = "display")]
    pub server: SocketAddr,
    /// How the client was told from the server: `syn`, `syn-ack` or `port-guess`.
    pub roles_from: &'static str,
    pub first_frame: u64,
    pub start_ms: f64,
    pub duration_ms: f64,
    /// SYN to ACK at the capture point: the full round trip between the endpoints.
    pub handshake_rtt_ms: Option<f64>,
    /// The part of the handshake RTT between the capture point and the client (SYN-ACK → ACK).
    pub handshake_client_side_ms: Option<f64>,
    /// The part between the capture point and the server (SYN → SYN-ACK).
    pub handshake_server_side_ms: Option<f64>,
    /// Round trip between the endpoints without delayed-ACK waits.
    pub rtt_ms: Option<f64>,
    pub syn_retransmissions: u32,
    pub packets: u64,
    pub exchanges: u64,
    pub exchange_latency_ms: Option<ExchangeStats>,
    /// The slowest exchanges (up to 5), in order, each split into its phases.
    pub slowest_exchanges: Vec<ExchangeSummary>,
    pub bytes: Directions<u64>,
    pub retransmissions: Directions<u64>,
    pub max_in_flight: Directions<u32>,
    /// The fastest each side's data was delivered, over a round trip and at
    /// least 8 full segments, by the peer's ACKs: the path's bandwidth as
    /// this connection saw it (Mbit/s); null without a full sample.
    pub delivery_rate_mbit_s: Directions<Option<f64>>,
    /// The two ACKs (frame numbers) the fastest delivery spans: the bytes the
    /// second acknowledged beyond the first, over the time between them.
    pub delivery_rate_frames: Directions<Option<(u64, u64)>>,
    /// What bounded the rate of the connection's transfers each way
    /// ([`RateLimit`]); null where no message that way was larger than the
    /// initial congestion window.
    pub rate_limit: Directions<Option<RateLimit>>,
    pub mss: Directions<Option<u16>>,
    /// Window scale shift per side; null when the handshake was not captured.
    pub window_scale: Directions<Option<u8>>,
    /// Smallest window each receiver advertised after the handshake (scaled bytes).
    pub min_window: Directions<Option<u32>>,
    /// How the connection ended: `refused` (its SYN answered by an RST),
    /// `unanswered` (SYNs and nothing back), `rst`, `fin` (both sides
    /// closed), `open` (the capture ended first).
    pub end: &'static str,
    /// Who sent the first RST (`refused`, `rst`) or FIN (`fin`): `client`,
    /// `server`, or `network` for an RST whose TTL differs from the other
    /// packets of the endpoint it names; null for `open` and `unanswered`.
    pub ended_by: Option<&'static str>,
    /// Where the capture was taken: `client`, `server`, `between` or `unknown`.
    pub vantage: &'static str,
    /// How that was told: `ttl`, `handshake`, or why it could not be.
    pub vantage_from: &'static str,
    /// Data segments and SYNs captured twice (mirror ports) and dropped.
    pub duplicates: u64,
    /// Time lost to the findings on this connection.
    pub time_lost_ms: f64,
}

/// One request and its response, at the capture point.
#[derive(Debug, Clone, Serialize)]
pub struct ExchangeSummary {
    /// 0-based index within the connection.
    pub index: u32,
    /// Milliseconds since the capture started.
    pub start_ms: f64,
    pub duration_ms: f64,
    pub request_bytes: u64,
    pub response_bytes: u64,
    /// First to last request byte.
    pub request_ms: Option<f64>,
    /// Last request byte to the server's ACK of the whole request.
    pub request_ack_ms: Option<f64>,
    /// Last request byte to first response byte: server time plus a round trip.
    pub wait_ms: Option<f64>,
    /// First to last response byte.
    pub response_ms: Option<f64>,
    /// The exchange's start to its first request byte: on a fresh
    /// connection's first exchange the setup (from the SYN), else 0.
    /// `setup_ms + request_ms + wait_ms + response_ms = duration_ms`
    /// (`request_ack_ms` is within `wait_ms`).
    pub setup_ms: Option<f64>,
    /// Where the time went: parts that add up to `duration_ms` (see docs/latency-budget.md).
    pub budget_ms: BudgetParts,
    /// request first, request last, request ACK, response first, response last (null when absent).
    pub frames: [Option<u64>; 5],
}

/// A complete exchange with its connection ([`crate::Engine::drain_rows`]).
#[derive(Debug, Clone, Serialize)]
pub struct ExchangeRow {
    pub connection: u64,
    #[serde(serialize_with = "display")]
    pub client: SocketAddr,
    #[serde(serialize_with = "display")]
    pub server: SocketAddr,
    pub exchange: ExchangeSummary,
}

/// Connections closed and exchanges completed since the last drain
/// ([`crate::Engine::drain_rows`]): every one, not just the listed ones.
#[derive(Debug, Clone, Default)]
pub struct Rows {
    pub connections: Vec<ConnectionSummary>,
    pub exchanges: Vec<ExchangeRow>,
}

/// One bin of the exchange-latency distribution
/// ([`crate::Engine::finish_with_distribution`]); not part of the JSON document.
#[derive(Debug, Clone, Serialize)]
pub struct LatencyBin {
    pub low_ms: f64,
    pub high_ms: f64,
    pub count: u64,
    /// Where these exchanges' time went, summed over them.
    pub parts_ms: BudgetParts,
}

/// What bounded a connection's transfers one way, after the taxonomy of
/// T-RAT (Zhang, Breslau, Paxson, Shenker, SIGCOMM 2002), from the time the
/// critical path gave each limit while the messages moved: `application`
/// (the sender paused with nothing held by TCP), `receive_window` (waiting
/// for the receiver's window), `congestion` (waiting for ACKs with the
/// congestion window used up), `loss` (waiting for lost data to be sent
/// again), `bandwidth` (moving at the path's delivery rate), `unexplained`
/// (pauses no mechanism explains). The largest names the limit.
#[derive(Debug, Clone, Serialize)]
pub struct RateLimit {
    pub limit: &'static str,
    /// The messages counted (larger than the initial window) and their bytes.
    pub transfers: u32,
    pub bytes: u64,
    /// Time per limit over those messages (ms), limits with no time left out.
    pub limits_ms: BudgetParts,
}

/// A value per direction, named by who sends.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Directions<T> {
    pub client_to_server: T,
    pub server_to_client: T,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct ExchangeStats {
    pub mean: f64,
    pub max: f64,
}

/// Who is responsible.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Culprit {
    pub endpoint: String,
    /// `client`, `server` or `network`.
    pub role: &'static str,
}

/// Frames that show one occurrence.
#[derive(Debug, Clone, Serialize)]
pub struct Evidence {
    pub connection: u64,
    /// Wireshark's `tcp.stream` of that connection (`connection` − 1).
    pub tcp_stream: u64,
    pub frames: Vec<u64>,
    pub delay_ms: f64,
}

/// One row of a ladder diagram (Wireshark's flow graph) of one exchange.
#[derive(Debug, Clone, Serialize)]
pub struct LadderRow {
    pub frame: u64,
    /// Milliseconds since the first row.
    pub t_ms: f64,
    /// `c>s` or `s>c`.
    pub dir: &'static str,
    pub flags: String,
    pub seq: u32,
    pub ack: u32,
    pub len: u32,
    pub window: u32,
    /// What this packet means in the finding, if anything.
    pub note: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Ladder {
    pub connection: u64,
    pub client: String,
    pub server: String,
    pub rows: Vec<LadderRow>,
}

/// A named cause with its evidence, cost and fix.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    /// One of the finding vocabulary ([`crate::rules::Kind`]): `nagle_delayed_ack`, `receive_window_limited`, …
    pub kind: &'static str,
    pub culprit: Culprit,
    pub connections: u64,
    pub occurrences: u64,
    pub typical_delay_ms: f64,
    pub total_delay_ms: f64,
    /// `total_delay_ms` over the time all exchanges in the capture took (0..1).
    pub share_of_time: f64,
    pub evidence: Vec<Evidence>,
    pub wireshark_filter: String,
    pub explanation: String,
    pub fix: String,
    /// Kind-specific measurements (see docs/json.md).
    pub details: serde_json::Value,
    pub ladder: Option<Ladder>,
    /// The latency after the fix: the exchanges' budgets with this finding's
    /// parts taken out. Null when no complete exchange held any of them (a
    /// failed request, setup that never led to one).
    pub predicted_after_fix: Option<Prediction>,
}

/// What the exchanges would take with a finding's fix: the parts of their
/// critical path it removes, taken out of each exchange's budget.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Prediction {
    /// The budget parts the fix removes.
    pub parts: Vec<&'static str>,
    /// Complete exchanges whose budget held some of them (on the servers the
    /// finding's connections talked to).
    pub exchanges: u64,
    /// Those exchanges: as they took, and with the fix.
    pub affected: PredictionLine,
    /// Every complete exchange of the capture (the others unchanged).
    pub all: PredictionLine,
}

#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct PredictionLine {
    pub before_p50_ms: f64,
    pub before_p99_ms: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

/// What the engine has found so far ([`crate::Engine::progress`]).
#[derive(Debug, Clone, Serialize)]
pub struct Progress {
    pub frames: u64,
    pub tcp_packets: u64,
    pub bytes_on_wire: u64,
    /// Connections held that are not closed (closed ones waiting out their
    /// grace period are left out).
    pub open_connections: u64,
    pub closed_connections: u64,
    /// Complete request/response exchanges so far, and the time they took.
    pub exchanges: u64,
    pub exchange_time_ms: f64,
    /// Ordered by time lost, largest first; those under
    /// [`crate::Options::min_share`] of the time are in `minor_findings`.
    pub findings: Vec<LiveFinding>,
    pub minor_findings: Vec<LiveFinding>,
    pub exchanges_not_kept: u64,
}

/// A finding as it stands while traffic is still flowing.
#[derive(Debug, Clone, Serialize)]
pub struct LiveFinding {
    pub kind: &'static str,
    pub culprit: Culprit,
    pub connections: u64,
    pub occurrences: u64,
    pub typical_delay_ms: f64,
    pub total_delay_ms: f64,
    /// Of the exchanges' time so far (of the capture's span without exchanges).
    pub share_of_time: f64,
}
