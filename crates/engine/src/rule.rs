//! What a rule is and what it reports, shared by the rules and by the
//! registry that runs them ([`crate::rules`]): the hooks a rule implements
//! ([`Rule`]) with the contexts they see, an [`Occurrence`] — its [`Kind`],
//! [`Blame`] and [`Detail`] —, how a detail adds into its finding's sums
//! ([`Fold`]), where a finding is reported ([`Standing`]) and what a verdict
//! sentence reads ([`Cause`]).
//!
//! A rule's file imports these from here, never from the registry; the
//! registry (`rules/mod.rs`) imports the rules and this module. [`Detail`]
//! holds each rule's detail struct, and [`ExchangeCx`] two values the `idle`
//! and `tls` rules make, so this module names those types in their files.

use tcpdoctor_flow::{Connection, Dir, Exchange, Segment};

use crate::budget::{Claims, Split};
use crate::model::{Finding, LadderRow};
use crate::rules::{
    congestion, idle, listen_queue, nagle, path_mtu, policer, queueing, receive_window,
    refused_reset, retransmission, setup, slow_start_after_idle, syn_flood, timing, tls,
    zero_window,
};

/// What a rule sees of the engine while a segment passes, besides the
/// connection and the segment; filled in as the rules run, in registry order.
pub(crate) struct SegmentCx<'a> {
    /// The occurrences found on this segment.
    pub out: &'a mut Vec<Occurrence>,
    /// Intervals explained so far, for the exchange's latency budget.
    pub claims: &'a mut Claims,
    /// The connection's recent packets, for a ladder a rule keeps itself.
    pub ring: &'a crate::Ring,
    /// The receive window was full in the segment's direction before it
    /// (the receive-window rule's state, read by the engine first).
    pub window_blocked: bool,
    /// A delayed ACK the Nagle rule saw: the ACK's sender and its wait.
    pub delayed_ack: Option<(Dir, i64)>,
}

/// What a rule sees at an exchange: before its budget is split
/// ([`Rule::on_exchange`]: what it finds there is in the budget), and with it
/// ([`Rule::on_budget`], complete exchanges only).
pub(crate) struct ExchangeCx<'a> {
    pub out: &'a mut Vec<Occurrence>,
    /// Pauses inside the request and the response ([`idle`]), and the longest.
    pub inside: [i64; 2],
    pub longest: [idle::Pause; 2],
    /// Of those pauses, the partial tails held for the cork's ceiling.
    pub cork_holds: [u32; 2],
    /// The exchange's budget (zero before [`Rule::on_budget`]).
    pub split: Split,
    /// The TLS handshake this exchange opened with, if it did.
    pub tls: Option<tls::Opened>,
    /// The base round trips of the connection's path.
    pub base: crate::budget::Base,
    /// A close-delimited response: how long the server took to close after
    /// its last byte (the exchange ends at its FIN).
    pub close_wait: i64,
    /// The request asked for `100 Continue` and none came.
    pub expect_unanswered: bool,
    /// The exchange's duration ([`Exchange::duration_ns`]; 0 before
    /// [`Rule::on_budget`]).
    pub duration_ns: i64,
}

/// What a rule sees when its connection closes.
pub(crate) struct CloseCx<'a> {
    pub out: &'a mut Vec<Occurrence>,
    /// The time restarts from the initial window cost (the restart rule's).
    pub restart_lost_ns: i64,
}

/// A rule's per-connection state and its hooks, each called in registry
/// order. All are optional.
pub(crate) trait Rule: Default {
    /// Every segment of the connection.
    #[inline]
    fn on_segment(&mut self, _cx: &mut SegmentCx<'_>, _conn: &Connection, _seg: &Segment<'_>) {}
    /// Every segment, after its occurrences are recorded (and their
    /// intervals claimed).
    #[inline]
    fn after_segment(&mut self, _claims: &mut Claims, _conn: &Connection, _seg: &Segment<'_>) {}
    /// Every exchange (complete or not), before its budget is split.
    #[inline]
    fn on_exchange(&mut self, _cx: &mut ExchangeCx<'_>, _conn: &Connection, _ex: &Exchange) {}
    /// Every complete exchange, with its budget.
    #[inline]
    fn on_budget(&mut self, _cx: &mut ExchangeCx<'_>, _conn: &Connection, _ex: &Exchange) {}
    /// The connection closed (or was evicted).
    #[inline]
    fn on_close(&mut self, _cx: &mut CloseCx<'_>, _conn: &Connection) {}
    /// A connection that closed as a plain handshake, without rule states.
    #[inline]
    fn on_close_light(_cx: &mut CloseCx<'_>, _conn: &Connection) {}
}

/// An occurrence's measurements, folded into its finding's running sums.
pub(crate) trait Fold {
    fn fold(self, a: &mut crate::Aggregate);
}

/// The finding vocabulary (docs/causes/README.md's "What it finds"
/// table, docs/json.md's schema); extended only by adding. The numbers are the bits
/// of a connection's kinds seen. A kind's name ([`Kind::name`]), fixes, words and
/// place in [`Kind::ALL`] are its entry's in the registry (`rules/mod.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    NagleDelayedAck = 0,
    ZeroWindow = 2,
    ConnectionRefused = 15,
    ConnectionReset = 16,
    RetransmissionTimeout = 3,
    PacketLoss = 4,
    PathMtuBlackhole = 11,
    CongestionLimited = 9,
    SendBufferLimited = 20,
    SlowStartAfterIdle = 10,
    ReceiveWindowLimited = 1,
    ServerDelay = 6,
    ClientDelay = 7,
    NetworkLatency = 8,
    QueueingDelay = 17,
    TlsHandshake = 14,
    SynRetransmit = 5,
    ConnectionUnanswered = 18,
    ListenQueueOverflow = 12,
    Policer = 19,
    SynFlood = 13,
}

impl Kind {
    /// A request failed (rather than waited): reported whatever its share of
    /// the time, before the delays.
    pub fn is_failure(self) -> bool {
        matches!(
            self,
            Kind::ConnectionRefused | Kind::ConnectionReset | Kind::ConnectionUnanswered
        )
    }

    pub fn bit(self) -> u32 {
        1 << (self as u32)
    }
}

/// Whether the kind named so is a failed request ([`Kind::is_failure`]).
pub fn failure_name(name: &str) -> bool {
    matches!(
        name,
        "connection_refused" | "connection_reset" | "connection_unanswered"
    )
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

/// Whether packets of `conn` can have been lost before the capture point
/// without the capture showing a try: not over loopback (it loses nothing),
/// and not in a capture that kept none of the connection's bare ACKs (not
/// even the handshake's): filtered to data, it hides what a lost packet
/// would leave (the sender's numbers skipped, its silences) behind ACKs
/// never kept.
pub(crate) fn unseen_loss_possible(conn: &Connection) -> bool {
    let loopback = conn.client.addr.ip().is_loopback() && conn.server.addr.ip().is_loopback();
    let filtered = !conn.client.bare_ack_seen && !conn.server.bare_ack_seen;
    !loopback && !filtered
}

/// At most how long capture point → server → capture point takes, for a
/// connection that measured no round trip of its own (no handshake captured,
/// no ACK that cannot have been delayed): the quickest the server ever
/// acknowledged the client's data ([`Connection::distance_bound`]), when the
/// server's packets crossed a router before the capture point. The path may
/// have taken all of it; on the server's own link it is the server's time.
pub(crate) fn server_bound(conn: &Connection) -> Option<i64> {
    if !crate::text::crossed_router(conn.server.ttl) {
        return None;
    }
    conn.distance_bound(Dir::ServerToClient)
}

/// The connection's round trip between the endpoints: measured, or else
/// bounded ([`server_bound`] and the client's side where known); with
/// whether it is the bound.
pub(crate) fn round_trip(conn: &Connection) -> Option<(i64, bool)> {
    if let Some(rtt) = conn.path_rtt_ns() {
        return Some((rtt, false));
    }
    let to_server = server_bound(conn)?;
    let to_client = conn.distance_to(Dir::ClientToServer).unwrap_or(0);
    Some((to_server + to_client, true))
}

/// The smaller of two optional values.
pub(crate) fn min_opt(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

/// What every verdict sentence says, for a rule's `cause`.
pub struct Cause<'a> {
    pub f: &'a Finding,
    pub ep: &'a str,
    pub role: &'static str,
    /// The typical delay, formatted.
    pub typ: String,
    /// How many of the capture's exchanges it hit ("40% of exchanges").
    pub of_exchanges: String,
}

impl Cause<'_> {
    /// A string of the finding's `details`.
    pub fn str(&self, key: &str) -> Option<&str> {
        self.f.details.get(key).and_then(|v| v.as_str())
    }

    /// A number of the finding's `details`.
    pub fn num(&self, key: &str) -> Option<f64> {
        self.f.details.get(key).and_then(|v| v.as_f64())
    }
}

/// Kind-specific measurements, one struct per rule's detail (in its file).
#[derive(Debug, Clone)]
pub enum Detail {
    Nagle(nagle::Nagle),
    ZeroWindow(zero_window::ZeroWindow),
    Failure(refused_reset::Failure),
    Loss(retransmission::Loss),
    Blackhole(path_mtu::Blackhole),
    Congestion(congestion::Congestion),
    SendBuffer(congestion::SendBuffer),
    Restart(slow_start_after_idle::Restart),
    Window(receive_window::Window),
    Timing(timing::Timing),
    Latency(timing::Latency),
    Queueing(queueing::Queueing),
    Tls(tls::Tls),
    Setup(setup::Setup),
    Unanswered(setup::Unanswered),
    Listen(listen_queue::Listen),
    Policed(policer::Policed),
    Flood(syn_flood::Flood),
}

impl Detail {
    /// Folds an occurrence's measurements into its finding's running sums.
    pub(crate) fn fold(self, a: &mut crate::Aggregate) {
        match self {
            Detail::Nagle(d) => Fold::fold(d, a),
            Detail::ZeroWindow(d) => Fold::fold(d, a),
            Detail::Failure(d) => Fold::fold(d, a),
            Detail::Loss(d) => Fold::fold(d, a),
            Detail::Blackhole(d) => Fold::fold(d, a),
            Detail::Congestion(d) => Fold::fold(d, a),
            Detail::SendBuffer(d) => Fold::fold(d, a),
            Detail::Restart(d) => Fold::fold(d, a),
            Detail::Window(d) => Fold::fold(d, a),
            Detail::Timing(d) => Fold::fold(d, a),
            Detail::Latency(d) => Fold::fold(d, a),
            Detail::Queueing(d) => Fold::fold(d, a),
            Detail::Tls(d) => Fold::fold(d, a),
            Detail::Setup(d) => Fold::fold(d, a),
            Detail::Unanswered(d) => Fold::fold(d, a),
            Detail::Listen(d) => Fold::fold(d, a),
            Detail::Policed(d) => Fold::fold(d, a),
            Detail::Flood(d) => Fold::fold(d, a),
        }
    }
}

/// Where a finding is reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Standing {
    /// Among the major findings when its share of the time is large enough.
    ByShare,
    /// Among the major findings whatever its share (a failed request, an
    /// endpoint overwhelmed).
    Major,
    /// Among the minor findings whatever its share (not the pattern).
    Minor,
}
