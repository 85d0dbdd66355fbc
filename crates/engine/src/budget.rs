//! The latency budget: an exchange's duration split into named parts that add
//! up to it exactly.
//!
//! An exchange's timeline is cut at its milestones — first SYN, the answered
//! SYN, the handshake ACK, first and last request byte, first response byte,
//! last response byte — into phases that cover it without overlap. Rules
//! *claim* the intervals they explain (a Nagle hold, a window stall, a
//! retransmission wait); within each phase, claimed time goes to the claiming
//! cause and the rest to the phase's own part (setup, client idle, transfer;
//! the wait for the response splits into the round trip to the server and the
//! server's own time). Claims never overlap: the earlier one wins.

use rustc_hash::FxHashMap;
use std::net::SocketAddr;

use tcpdoctor_flow::{Connection, DeliveryRate, Dir, Exchange};
use tcpdoctor_wire::Timestamp;

/// Where time goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Part {
    /// Waiting for a lost SYN or SYN-ACK to be sent again.
    SynRetry,
    /// The handshake's round trip.
    Setup,
    /// The client idle between the handshake and its first request.
    ClientIdle,
    /// Round trips between the capture point and the server.
    Network,
    /// The server's own time between request and response.
    Server,
    /// Data held by Nagle until the peer's delayed ACK.
    NagleDelayedAck,
    /// Waiting for lost data to be sent again, and for the congestion
    /// window the loss cut to grow back (its waits between flights).
    Retransmission,
    /// Waiting for the receiver's window to open: full, and reopened by the
    /// ACK of what filled it (its size, or the sender's send buffer,
    /// bounding the transfer).
    Window,
    /// Waiting for ACKs with the congestion window used up.
    CongestionWait,
    /// Moving the request and response bytes, beyond what the path's
    /// delivery rate explains ([`Part::Bandwidth`]): pauses no mechanism
    /// explains.
    Transfer,
    /// A TLS handshake's round trips and the client's part of it.
    TlsHandshake,
    /// The server's part of a TLS handshake: its key exchange and signature.
    TlsKeyExchange,
    /// Round-trip time above the path's base (the least seen on it): packets
    /// waiting in a queue on the path.
    Queueing,
    /// Moving a message's bytes at the fastest rate the path delivered
    /// them ([`tcpdoctor_flow::DeliveryRate`]), or back to back with no
    /// pause between segments: the bottleneck's bandwidth.
    Bandwidth,
    /// A message waiting on another connection between the same two hosts:
    /// it resumed as soon as that connection closed (FTP's "226 Transfer
    /// complete" after its data connection). That connection's own budget
    /// and findings tell where its time went.
    OtherConnection,
    /// Waiting for the receiving application to read: a zero window, or a
    /// full one that reopened far later than a round trip (the reader's
    /// pace, not the window's size). Last: new parts come last, as the
    /// Parquet tables' columns do.
    ReaderWait,
}

pub const PARTS: usize = 16;

impl Part {
    pub const ALL: [Part; PARTS] = [
        Part::SynRetry,
        Part::Setup,
        Part::ClientIdle,
        Part::Network,
        Part::Server,
        Part::NagleDelayedAck,
        Part::Retransmission,
        Part::Window,
        Part::CongestionWait,
        Part::Transfer,
        Part::TlsHandshake,
        Part::TlsKeyExchange,
        Part::Queueing,
        Part::Bandwidth,
        Part::OtherConnection,
        Part::ReaderWait,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Part::SynRetry => "syn_retry_wait",
            Part::Setup => "connection_setup",
            Part::ClientIdle => "client_idle",
            Part::Network => "network",
            Part::Server => "server",
            Part::NagleDelayedAck => "nagle_delayed_ack",
            Part::Retransmission => "retransmission_wait",
            Part::Window => "window_wait",
            Part::CongestionWait => "congestion_wait",
            Part::Transfer => "transfer",
            Part::TlsHandshake => "tls_handshake",
            Part::TlsKeyExchange => "tls_key_exchange",
            Part::Queueing => "queueing",
            Part::Bandwidth => "bandwidth",
            Part::OtherConnection => "other_connection",
            Part::ReaderWait => "reader_wait",
        }
    }
}

/// Nanoseconds per part, in [`Part::ALL`] order.
pub type Split = [i64; PARTS];

/// More claims than this in one exchange are merged into the last one.
const MAX_CLAIMS: usize = 8192;

/// Intervals rules have explained, waiting for their exchange to end.
#[derive(Debug, Default)]
pub struct Claims {
    list: Vec<(Part, i64, i64)>,
    clipped: Vec<(Part, i64, i64)>,
    /// When another connection between the same two hosts last closed (ns;
    /// 0: none): set before each segment's rules run. A sender that resumes
    /// right after it was waiting on that connection (FTP's "226" after its
    /// data connection), not thinking.
    pub closed_elsewhere_ns: i64,
}

impl Claims {
    /// Emptied, its memory kept.
    pub fn clear(&mut self) {
        self.list.clear();
        self.clipped.clear();
    }

    pub fn claim(&mut self, part: Part, from: Timestamp, to: Timestamp) {
        let (a, b) = (from.nanos(), to.nanos());
        if b <= a {
            return;
        }
        let full = self.list.len() >= MAX_CLAIMS;
        if let Some(last) = self.list.last_mut() {
            if (last.0 == part && a <= last.2) || full {
                last.2 = last.2.max(b);
                return;
            }
        }
        self.list.push((part, a, b));
    }

    /// Takes back what `part` claimed from `from` on (a rule that learnt
    /// later it had no cause: a re-send the receiver reports it had).
    pub fn retract(&mut self, part: Part, from: Timestamp) {
        let a = from.nanos();
        self.list.retain_mut(|c| {
            if c.0 == part && c.2 > a {
                c.2 = a;
            }
            c.2 > c.1
        });
    }

    /// Gives `to` what `from` claimed since `since` (a rule that learnt
    /// later whose the waits were).
    pub fn recolor(&mut self, from: Part, to: Part, since: Timestamp) {
        let a = since.nanos();
        for c in &mut self.list {
            if c.0 == from && c.1 >= a {
                c.0 = to;
            }
        }
    }

    /// Whether the latest claim ends at `to`: a rule explained the interval
    /// that ends there (rules claim a pause when the segment ending it arrives).
    pub fn ends_at(&self, to: Timestamp) -> bool {
        self.list.last().is_some_and(|c| c.2 == to.nanos())
    }

    /// The exchange's budget; claims that end before its end are consumed.
    /// `base` is the path's base round trip ([`Base`]): the handshake's and
    /// the wait's round trips above it are queueing.
    pub fn split(&mut self, conn: &Connection, ex: &Exchange, base: Base) -> Option<Split> {
        let (start, end) = (ex.start()?.ts.nanos(), ex.end()?.ts.nanos());
        if end < start {
            return None;
        }
        let to_server = to_server(conn, ex, &base);
        let excess = base.excess(conn, to_server);
        if self.list.is_empty() && ex.setup.is_none() {
            return Some(Self::plain(
                conn,
                ex,
                (base, excess),
                (start, end),
                to_server,
            ));
        }
        // Phase boundaries, each clamped to be no earlier than the one before.
        let hs = &conn.handshake;
        let t = |m: Option<tcpdoctor_flow::Mark>, or: i64| m.map_or(or, |m| m.ts.nanos());
        let req_first = t(ex.request_first, start);
        let req_last = t(ex.request_last, req_first);
        let resp_first = t(ex.response_first, end);
        let mut cuts = [(0i64, Part::Transfer); 6];
        let mut n = 0;
        if ex.setup.is_some() {
            cuts[0] = (t(hs.first_syn, start), Part::SynRetry);
            cuts[1] = (t(hs.syn, start), Part::Setup);
            cuts[2] = (t(hs.ack, start), Part::ClientIdle);
            n = 3;
        }
        // The request's transfer is the first phase marked `Transfer`.
        let request_phase = n;
        for c in [
            (req_first, Part::Transfer),
            (req_last, Part::Server),
            (resp_first, Part::Transfer),
        ] {
            cuts[n] = c;
            n += 1;
        }
        let cuts = &cuts[..n];
        let mut phases = [(0i64, 0i64, Part::Transfer); 6];
        let mut at = start;
        for (i, &(from, part)) in cuts.iter().enumerate() {
            let from = from.clamp(at, end);
            let to = cuts.get(i + 1).map_or(end, |c| c.0).clamp(from, end);
            phases[i] = (from, to, part);
            at = to;
        }
        let phases = &phases[..n];
        // Claims, earliest first, clipped to the exchange and to each other.
        self.clipped.clear();
        if !self.list.is_empty() {
            self.list.sort_by_key(|c| c.1);
            let mut cursor = start;
            for &(part, a, b) in &self.list {
                let (a, b) = (a.max(cursor), b.min(end));
                if b > a {
                    self.clipped.push((part, a, b));
                    cursor = b;
                }
            }
        }
        let mut split: Split = [0; PARTS];
        for (i, &(from, to, part)) in phases.iter().enumerate() {
            let mut claimed = 0;
            for &(cpart, a, b) in &self.clipped {
                let overlap = b.min(to) - a.max(from);
                if overlap > 0 {
                    split[index(cpart)] += overlap;
                    claimed += overlap;
                }
            }
            let rest = to - from - claimed;
            match part {
                Part::Server => {
                    // The wait for the response: first the round trip (the
                    // path's base, then queueing above it), then the server.
                    let net = rest.min(to_server);
                    let queue = excess.queueing(net, to_server);
                    split[index(Part::Queueing)] += queue;
                    split[index(Part::Network)] += net - queue;
                    split[index(Part::Server)] += rest - net;
                }
                Part::Setup => {
                    let rtt = conn.path_rtt_ns().unwrap_or(0);
                    let queue = Excess::above_base(rest, rtt, excess.round_trip);
                    split[index(Part::Queueing)] += queue;
                    split[index(Part::Setup)] += rest - queue;
                }
                Part::Transfer => {
                    let dir = if i == request_phase {
                        Dir::ClientToServer
                    } else {
                        Dir::ServerToClient
                    };
                    let moving = base.moving(conn, ex, dir, rest);
                    split[index(Part::Bandwidth)] += moving;
                    split[index(Part::Transfer)] += rest - moving;
                }
                _ => split[index(part)] += rest,
            }
        }
        if !self.list.is_empty() {
            self.list.retain(|c| c.2 > end);
        }
        Some(split)
    }
}

/// How long capture point → server → capture point took when `ex`'s
/// response left the server ([`Connection::distance_for`]).
///
/// Without a round trip of its own (no handshake captured, no ACK
/// that cannot have been delayed), the connection's path is no
/// shorter than the least round trip its other connections showed.
/// Without those either, when the server's packets crossed a router
/// before the capture point (a path of unknown length between), the
/// round trip is no longer than the quickest the server ever
/// acknowledged the client's data ([`Connection::distance_bound`]):
/// the path may have taken all of that, and the server is blamed only
/// for what lies beyond it. On the server's own link the wait is the
/// server's.
fn to_server(conn: &Connection, ex: &Exchange, base: &Base) -> i64 {
    conn.distance_for(ex)
        .or(base.to_server)
        .or_else(|| crate::rule::server_bound(conn))
        .unwrap_or(0)
}

impl Claims {
    /// The common case: nothing claimed, no handshake in the exchange —
    /// request transfer, the wait (round trip, then server), response transfer.
    fn plain(
        conn: &Connection,
        ex: &Exchange,
        (base, excess): (Base, Excess),
        span: (i64, i64),
        to_server: i64,
    ) -> Split {
        let (start, end) = span;
        let t = |m: Option<tcpdoctor_flow::Mark>, or: i64| m.map_or(or, |m| m.ts.nanos());
        let req_last = t(ex.request_last, start).clamp(start, end);
        let resp_first = t(ex.response_first, end).clamp(req_last, end);
        let wait = resp_first - req_last;
        let net = wait.min(to_server);
        let queue = excess.queueing(net, to_server);
        let mut split: Split = [0; PARTS];
        let request = req_last - start;
        let response = end - resp_first;
        let moving_request = base.moving(conn, ex, Dir::ClientToServer, request);
        let moving_response = base.moving(conn, ex, Dir::ServerToClient, response);
        split[index(Part::Bandwidth)] = moving_request + moving_response;
        split[index(Part::Transfer)] = request - moving_request + response - moving_response;
        split[index(Part::Queueing)] = queue;
        split[index(Part::Network)] = net - queue;
        split[index(Part::Server)] = wait - net;
        split
    }
}

/// The least round trips seen on a path (client address to server address),
/// across its connections: what propagation costs there. A connection whose
/// round trips are longer waited that much longer in queues on the way.
#[derive(Debug, Clone, Copy, Default)]
pub struct Base {
    /// The least handshake round trip (SYN to ACK, whatever the vantage).
    pub round_trip: Option<i64>,
    /// The least distance from the capture point to the server and back.
    pub to_server: Option<i64>,
    /// The fastest delivery rate seen each way (client to server, server to
    /// client), as bytes over nanoseconds ([`DeliveryRate`]).
    pub rate: [Option<(u32, i64)>; 2],
}

/// Round trips above a path's base, per connection.
#[derive(Debug, Clone, Copy, Default)]
pub struct Excess {
    pub round_trip: i64,
    pub to_server: i64,
}

impl Excess {
    /// Of `spent` waiting on a round trip that takes `loaded`, `excess` above
    /// its base: what lies beyond the base (the base is propagation, and is
    /// spent first).
    fn above_base(spent: i64, loaded: i64, excess: i64) -> i64 {
        if excess <= 0 {
            return 0;
        }
        (spent - (loaded - excess)).clamp(0, excess)
    }

    /// The queueing in `net` of a wait for the response (`to_server` the
    /// round trip to the server when the response left it,
    /// [`Connection::distance_for`]).
    fn queueing(&self, net: i64, to_server: i64) -> i64 {
        Self::above_base(net, to_server, self.to_server)
    }
}

/// Round trips within this of the base (or a quarter of it, whichever is
/// more) are the path's ordinary jitter, not a queue.
const MIN_QUEUEING_NS: i64 = 2_000_000;

impl Base {
    /// Takes in a connection's round trips.
    pub fn learn(&mut self, conn: &Connection) {
        fn least(v: &mut Option<i64>, x: Option<i64>) {
            if let Some(x) = x.filter(|&x| x > 0) {
                *v = Some(v.map_or(x, |v| v.min(x)));
            }
        }
        least(&mut self.round_trip, conn.path_rtt_ns());
        least(&mut self.to_server, conn.distance_to(Dir::ServerToClient));
        for (rate, half) in self.rate.iter_mut().zip([&conn.client, &conn.server]) {
            // Most connections never measure one: nothing to compare.
            if let Some(best) = half.rate.best() {
                *rate = DeliveryRate::faster(*rate, Some(best));
            }
        }
    }

    /// Of `spent` moving the message `dir` sends in `ex`, what its bytes
    /// take at the path's fastest delivery rate, after its first segment
    /// (whose arrival starts the transfer), or the time its segments
    /// followed each other with no pause ([`Exchange::train_ns`]) when that
    /// is longer: a train of segments no gap split was moving at the rate
    /// the path delivered it, whether or not a rate sample measured it.
    pub fn moving(&self, conn: &Connection, ex: &Exchange, dir: Dir, spent: i64) -> i64 {
        if spent <= 0 {
            return 0;
        }
        let half = conn.half(dir);
        let train = ex.train_ns[dir.index()];
        let Some(rate) = DeliveryRate::faster(half.rate.best(), self.rate[dir.index()]) else {
            return train.min(spent);
        };
        let bytes = match dir {
            Dir::ClientToServer => ex.request_bytes,
            Dir::ServerToClient => ex.response_bytes,
        };
        let at_rate = DeliveryRate::time_for(rate, bytes.saturating_sub(u64::from(conn.smss(dir))));
        at_rate.max(train).min(spent)
    }

    /// What `conn`'s round trips hold above the base: its handshake's, and
    /// `to_server`, the one an exchange's response took
    /// ([`Connection::distance_for`]).
    pub fn excess(&self, conn: &Connection, to_server: i64) -> Excess {
        fn above(base: Option<i64>, x: Option<i64>) -> i64 {
            match (base, x) {
                (Some(b), Some(x)) if x - b >= MIN_QUEUEING_NS.max(b / 4) => x - b,
                _ => 0,
            }
        }
        Excess {
            round_trip: above(self.round_trip, conn.path_rtt_ns()),
            to_server: above(self.to_server, Some(to_server).filter(|&d| d > 0)),
        }
    }
}

/// A part's place in a [`Split`]: [`Part::ALL`] lists the parts in declaration order.
pub fn index(p: Part) -> usize {
    p as usize
}

/// Budgets summed per server endpoint (mean = sum / count).
#[derive(Debug, Default)]
pub struct PerServer {
    map: FxHashMap<SocketAddr, (Split, u64)>,
    /// The last server added to, and its sums not yet folded into `map`:
    /// exchanges come in runs per server.
    last: Option<(SocketAddr, Split, u64)>,
}

/// At most this many servers are kept (the first seen).
const MAX_SERVERS: usize = 1024;

impl PerServer {
    pub fn add(&mut self, server: SocketAddr, split: &Split) {
        match &mut self.last {
            Some((addr, sums, n)) if *addr == server => {
                for (s, v) in sums.iter_mut().zip(split) {
                    *s += v;
                }
                *n += 1;
            }
            _ => {
                self.flush();
                self.last = Some((server, *split, 1));
            }
        }
    }

    fn flush(&mut self) {
        if let Some((server, split, n)) = self.last.take() {
            if self.map.len() >= MAX_SERVERS && !self.map.contains_key(&server) {
                return;
            }
            let e = self.map.entry(server).or_insert(([0; PARTS], 0));
            for (s, v) in e.0.iter_mut().zip(&split) {
                *s += v;
            }
            e.1 += n;
        }
    }

    pub fn sorted(&mut self) -> Vec<(SocketAddr, Split, u64)> {
        self.flush();
        let mut v: Vec<_> = self.map.iter().map(|(k, (s, n))| (*k, *s, *n)).collect();
        v.sort_by(|a, b| {
            let ta: i64 = a.1.iter().sum();
            let tb: i64 = b.1.iter().sum();
            tb.cmp(&ta).then(a.0.cmp(&b.0))
        });
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_indexed_in_list_order() {
        for (i, p) in Part::ALL.iter().enumerate() {
            assert_eq!(index(*p), i, "{}", p.name());
        }
    }
}

/// The rate limits a connection's transfers can meet, in [`Limits`] order
/// ([`crate::model::RateLimit`]).
pub const LIMIT_NAMES: [&str; 7] = [
    "application",
    "receive_window",
    "send_buffer",
    "congestion",
    "loss",
    "bandwidth",
    "unexplained",
];

/// Per connection and direction: the time each rate limit took while the
/// messages larger than the initial congestion window moved.
#[derive(Debug, Default, Clone, Copy)]
pub struct Limits {
    ns: [[i64; LIMIT_NAMES.len()]; 2],
    transfers: [u32; 2],
    bytes: [u64; 2],
}

impl Limits {
    /// Counts the larger message of `ex` (when larger than the initial
    /// window): its budget's parts while moving, and `inside`, the sending
    /// application's pauses inside it (per direction).
    /// `buffered`: of the window waits, those the send buffer's (per direction).
    pub fn note(
        &mut self,
        conn: &Connection,
        ex: &Exchange,
        split: &Split,
        (inside, buffered): ([i64; 2], [i64; 2]),
    ) {
        let (dir, bytes) = if ex.response_bytes >= ex.request_bytes {
            (Dir::ServerToClient, ex.response_bytes)
        } else {
            (Dir::ClientToServer, ex.request_bytes)
        };
        if bytes <= crate::whatif::INITIAL_WINDOW * u64::from(conn.smss(dir).max(1)) {
            return;
        }
        let d = dir.index();
        let window = split[index(Part::Window)] + split[index(Part::ReaderWait)];
        let buffer = buffered[d].clamp(0, window.max(0));
        // A send buffer lets the bytes out as the ACKs of the flight before
        // come back: the flights' own spreading is the buffer's too (what
        // `send_buffer_limited`'s fix takes away).
        let bandwidth = split[index(Part::Bandwidth)];
        let moved = if buffer > 0 { bandwidth.max(0) } else { 0 };
        let spent = [
            inside[d],
            window - buffer,
            buffer + moved,
            split[index(Part::CongestionWait)],
            split[index(Part::Retransmission)],
            bandwidth - moved,
            split[index(Part::Transfer)],
        ];
        for (sum, ns) in self.ns[d].iter_mut().zip(spent) {
            *sum += ns.max(0);
        }
        self.transfers[d] += 1;
        self.bytes[d] += bytes;
    }

    /// What bounded the transfers sent `dir`; none without a transfer, or
    /// without time spent moving it.
    pub fn summary(&self, dir: Dir) -> Option<crate::model::RateLimit> {
        let d = dir.index();
        let ns = &self.ns[d];
        let (at, &most) = ns
            .iter()
            .enumerate()
            .max_by_key(|&(i, v)| (*v, std::cmp::Reverse(i)))?;
        if self.transfers[d] == 0 || most <= 0 {
            return None;
        }
        let limits_ms = LIMIT_NAMES
            .iter()
            .zip(ns)
            .filter(|(_, &v)| v > 0)
            .map(|(&name, &v)| (name, crate::text::ms(v)))
            .collect();
        Some(crate::model::RateLimit {
            limit: LIMIT_NAMES[at],
            transfers: self.transfers[d],
            bytes: self.bytes[d],
            limits_ms: crate::model::BudgetParts(limits_ms),
        })
    }
}
