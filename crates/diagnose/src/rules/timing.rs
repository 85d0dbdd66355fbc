//! Where an exchange's time went at the ends: the server thinking, the client
//! idling (before their message or inside it), or the round trips themselves.
//!
//! Times are measured at the capture point and corrected by the distance from
//! the capture point to the endpoint concerned (from the handshake), so the
//! same exchange gives the same answer captured at the client, the server or
//! in between.

use tcpdoctor_flow::{Connection, Dir, Exchange};

use super::idle::Pause;
use super::{Blame, Detail, Kind, Occurrence};
use crate::budget::{index, Part, Split};

/// Server think time worth a finding: at least this…
pub const MIN_THINK_NS: i64 = 20_000_000;
/// …and at least this share of the exchange.
pub const MIN_THINK_SHARE: f64 = 0.5;
/// Client idle time before its first request worth a finding.
pub const MIN_CLIENT_IDLE_NS: i64 = 20_000_000;
/// A round trip this long can dominate small exchanges.
pub const MIN_LATENCY_RTT_NS: i64 = 10_000_000;
/// Report the round trip when it is at least this share of the exchange time.
pub const MIN_LATENCY_SHARE: f64 = 0.5;

/// The server's own time in an exchange: from the request's last byte to
/// the response's first, less the round trip from the capture point to the
/// server (`before_response`), and the pauses inside the response that were
/// the server application's ([`super::idle`]: `inside_response`). Both are
/// the budget's `server` part, so the finding and the budget agree.
pub fn server_delay(
    conn: &Connection,
    ex: &Exchange,
    split: &Split,
    inside_ns: i64,
    longest: Pause,
) -> Option<Occurrence> {
    let (last, first) = (ex.request_last?, ex.response_first?);
    let think = split[index(Part::Server)];
    let dur = ex.duration_ns();
    if think < MIN_THINK_NS || (think as f64) < MIN_THINK_SHARE * dur as f64 {
        return None;
    }
    let inside = inside_ns.clamp(0, think);
    let before = think - inside;
    let mut frames = Vec::with_capacity(5);
    let mut notes = Vec::with_capacity(3);
    if before >= MIN_THINK_NS || inside == 0 {
        frames.push(last.frame);
        frames.extend(ex.request_acked.map(|m| m.frame));
        frames.push(first.frame);
        notes.push((last.frame, "request complete".to_string()));
        notes.push((
            first.frame,
            format!(
                "response starts: server thought {:.1} ms",
                before as f64 / 1e6
            ),
        ));
    }
    let (pause, from, to) = longest;
    if inside > 0 && from > 0 {
        frames.extend([from, to]);
        if !notes.iter().any(|(f, _)| *f == from) {
            notes.push((from, "server sends part of its response, then waits".into()));
        }
        notes.push((
            to,
            format!(
                "response continues after {:.1} ms, all acknowledged: server time",
                pause as f64 / 1e6
            ),
        ));
    }
    frames.sort_unstable();
    frames.dedup();
    Some(Occurrence {
        kind: Kind::ServerDelay,
        culprit: Blame::Side(Dir::ServerToClient),
        delay_ns: think,
        notes,
        frames,
        ladder_from: ex.request_first.map(|m| m.frame),
        ladder: None,
        span: None,
        detail: Detail::Timing {
            rtt_ns: conn.path_rtt_ns(),
            inside_ns: inside,
        },
    })
}

/// The client's own time in an exchange: after the handshake before its first
/// request (`before_request`), and the pauses inside a request that were the
/// client application's ([`super::idle`]: `inside_request`).
pub fn client_delay(
    conn: &Connection,
    ex: &Exchange,
    inside_ns: i64,
    longest: Pause,
) -> Option<Occurrence> {
    // Both leave the client and travel the same path: no correction needed.
    let before = match (ex.index, conn.handshake.ack, ex.request_first) {
        (0, Some(ack), Some(first)) => first.ts.since(ack.ts).max(0),
        _ => 0,
    };
    let idle = before + inside_ns.max(0);
    if idle < MIN_CLIENT_IDLE_NS {
        return None;
    }
    let mut frames = Vec::with_capacity(4);
    let mut notes = Vec::with_capacity(3);
    if let (true, Some(ack), Some(first)) = (before > 0, conn.handshake.ack, ex.request_first) {
        frames.extend([ack.frame, first.frame]);
        notes.push((ack.frame, "handshake complete".to_string()));
        notes.push((
            first.frame,
            format!("first request after {:.1} ms idle", before as f64 / 1e6),
        ));
    }
    let (pause, from, to) = longest;
    if inside_ns > 0 && from > 0 {
        frames.extend([from, to]);
        notes.push((
            to,
            format!(
                "request continues after {:.1} ms, all acknowledged: client time",
                pause as f64 / 1e6
            ),
        ));
    }
    frames.sort_unstable();
    frames.dedup();
    let ladder_from = if before > 0 {
        conn.handshake.first_syn.map(|m| m.frame)
    } else {
        ex.request_first.map(|m| m.frame)
    };
    Some(Occurrence {
        kind: Kind::ClientDelay,
        culprit: Blame::Side(Dir::ClientToServer),
        delay_ns: idle,
        frames,
        notes,
        ladder_from,
        ladder: None,
        span: None,
        detail: Detail::Timing {
            rtt_ns: conn.path_rtt_ns(),
            inside_ns: inside_ns.max(0),
        },
    })
}

/// Per connection: how much of the exchanges' time was round trips. An
/// exchange needs the handshake's round trip when it opens the connection,
/// one for its request and response, and one more for each further flight
/// of a response larger than the congestion window — the budget's
/// `connection_setup`, `network` and `congestion_wait` parts.
#[derive(Debug, Default)]
pub struct LatencyState {
    handshake_ns: i64,
    request_ns: i64,
    flight_ns: i64,
    total_ns: i64,
    exchanges: u64,
    handshakes: u64,
    requests: u64,
    tls_rounds: u64,
    tls_ns: i64,
    first: Option<[Option<u64>; 4]>,
}

impl LatencyState {
    /// `tls`: the TLS handshake the exchange paid for, its rounds and
    /// their time on the network (the rest was the endpoints').
    pub fn on_exchange(
        &mut self,
        conn: &Connection,
        ex: &Exchange,
        split: &Split,
        tls: Option<(u32, i64)>,
    ) {
        let Some(rtt) = conn.path_rtt_ns() else {
            return;
        };
        let (hs, net, flights) = (
            split[index(Part::Setup)],
            split[index(Part::Network)],
            split[index(Part::CongestionWait)],
        );
        self.handshake_ns += hs;
        self.request_ns += net;
        self.flight_ns += flights;
        self.handshakes += u64::from(hs > 0);
        if let Some((rounds, ns)) = tls {
            self.tls_rounds += u64::from(rounds);
            self.tls_ns += ns;
        }
        // Captured at the server, the request's round trip is outside the exchange.
        self.requests += u64::from(net > 0 && net * 2 >= rtt);
        self.total_ns += ex.duration_ns();
        self.exchanges += 1;
        if self.first.is_none() {
            let hs = &conn.handshake;
            let setup = ex.setup.is_some();
            self.first = Some([
                hs.syn.filter(|_| setup).map(|m| m.frame),
                hs.ack.filter(|_| setup).map(|m| m.frame),
                ex.request_first.map(|m| m.frame),
                ex.response_last.map(|m| m.frame),
            ]);
        }
    }

    /// `congestion_reported`: the congestion rule reported this connection,
    /// so the flights' waits are its finding's, not counted again here;
    /// `restart_ns`: the flights' waits that a restart from the initial window
    /// added ([`super::slow_start_after_idle`]), also that finding's.
    pub fn on_close(
        &mut self,
        conn: &Connection,
        congestion_reported: bool,
        restart_ns: i64,
        out: &mut Vec<Occurrence>,
    ) {
        let Some(rtt) = conn.path_rtt_ns() else {
            return;
        };
        let flights = if congestion_reported {
            0
        } else {
            (self.flight_ns - restart_ns).max(0)
        };
        let network = self.handshake_ns + self.tls_ns + self.request_ns + flights;
        if rtt < MIN_LATENCY_RTT_NS
            || self.exchanges == 0
            || network <= 0
            || (network as f64) < MIN_LATENCY_SHARE * self.total_ns as f64
        {
            return;
        }
        let frames = self
            .first
            .map(|f| f.iter().flatten().copied().collect())
            .unwrap_or_default();
        out.push(Occurrence {
            kind: Kind::NetworkLatency,
            culprit: Blame::Network(Dir::ClientToServer),
            delay_ns: network,
            frames,
            notes: Vec::new(),
            ladder_from: None,
            ladder: None,
            span: None,
            detail: Detail::Latency {
                rtt_ns: rtt,
                handshakes: self.handshakes,
                handshake_ns: self.handshake_ns,
                requests: self.requests,
                flights: ((flights + rtt / 2) / rtt.max(1)) as u64,
                exchanges: self.exchanges,
                tls_rounds: self.tls_rounds,
                tls_ns: self.tls_ns,
            },
        });
    }
}
