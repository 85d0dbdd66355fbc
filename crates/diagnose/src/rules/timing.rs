//! Where an exchange's time went at the ends: the server thinking, the client
//! idling, or the round trip itself.
//!
//! Times are measured at the capture point and corrected by the distance from
//! the capture point to the endpoint concerned (from the handshake), so the
//! same exchange gives the same answer captured at the client, the server or
//! in between.

use tcpdoctor_flow::{Connection, Dir, Exchange};

use super::{Blame, Detail, Kind, Occurrence};

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

/// The server's think time: request complete to response start, less the trip
/// from the capture point to the server and back.
pub fn server_delay(conn: &Connection, ex: &Exchange) -> Option<Occurrence> {
    let (last, first) = (ex.request_last?, ex.response_first?);
    let think = first.ts.since(last.ts) - conn.distance_to(Dir::ServerToClient).unwrap_or(0);
    let dur = ex.duration_ns();
    if think < MIN_THINK_NS || (think as f64) < MIN_THINK_SHARE * dur as f64 {
        return None;
    }
    let mut frames = vec![last.frame];
    frames.extend(ex.request_acked.map(|m| m.frame));
    frames.push(first.frame);
    Some(Occurrence {
        kind: Kind::ServerDelay,
        culprit: Blame::Side(Dir::ServerToClient),
        delay_ns: think,
        notes: vec![
            (last.frame, "request complete".into()),
            (
                first.frame,
                format!(
                    "response starts: server thought {:.1} ms",
                    think as f64 / 1e6
                ),
            ),
        ],
        frames,
        ladder_from: ex.request_first.map(|m| m.frame),
        ladder: None,
        span: None,
        detail: Detail::Timing {
            rtt_ns: conn.path_rtt_ns(),
        },
    })
}

/// The client waiting after the handshake before sending its first request.
pub fn client_delay(conn: &Connection, ex: &Exchange) -> Option<Occurrence> {
    if ex.index != 0 {
        return None;
    }
    let (ack, first) = (conn.handshake.ack?, ex.request_first?);
    // Both leave the client and travel the same path: no correction needed.
    let idle = first.ts.since(ack.ts);
    if idle < MIN_CLIENT_IDLE_NS {
        return None;
    }
    Some(Occurrence {
        kind: Kind::ClientDelay,
        culprit: Blame::Side(Dir::ClientToServer),
        delay_ns: idle,
        frames: vec![ack.frame, first.frame],
        notes: vec![
            (ack.frame, "handshake complete".into()),
            (
                first.frame,
                format!("first request after {:.1} ms idle", idle as f64 / 1e6),
            ),
        ],
        ladder_from: conn.handshake.first_syn.map(|m| m.frame),
        ladder: None,
        span: None,
        detail: Detail::Timing {
            rtt_ns: conn.path_rtt_ns(),
        },
    })
}

/// Per connection: how much of the exchanges' time was round trips.
#[derive(Debug, Default)]
pub struct LatencyState {
    network_ns: i64,
    total_ns: i64,
    exchanges: u64,
    first: Option<(u64, u64)>,
}

impl LatencyState {
    pub fn on_exchange(&mut self, conn: &Connection, ex: &Exchange) {
        let Some(rtt) = conn.path_rtt_ns() else {
            return;
        };
        let dur = ex.duration_ns();
        // Each request/response needs at least one round trip.
        self.network_ns += rtt.min(dur);
        self.total_ns += dur;
        self.exchanges += 1;
        if self.first.is_none() {
            if let (Some(a), Some(b)) = (ex.request_first, ex.response_last) {
                self.first = Some((a.frame, b.frame));
            }
        }
    }

    pub fn on_close(&mut self, conn: &Connection, out: &mut Vec<Occurrence>) {
        let Some(rtt) = conn.path_rtt_ns() else {
            return;
        };
        if rtt < MIN_LATENCY_RTT_NS
            || self.exchanges == 0
            || (self.network_ns as f64) < MIN_LATENCY_SHARE * self.total_ns as f64
        {
            return;
        }
        let (a, b) = self.first.unwrap_or((0, 0));
        out.push(Occurrence {
            kind: Kind::NetworkLatency,
            culprit: Blame::Network(Dir::ClientToServer),
            delay_ns: self.network_ns,
            frames: vec![a, b],
            notes: Vec::new(),
            ladder_from: None,
            ladder: None,
            span: None,
            detail: Detail::Latency {
                rtt_ns: rtt,
                round_trips: self.exchanges,
            },
        });
    }
}
