//! Queueing delay: round trips far above the path's base while something
//! fills a queue on it ("bufferbloat").
//!
//! Propagation is the least round trip a path ever shows; every millisecond
//! above it was spent waiting in a buffer (a router's, a modem's, a host's
//! qdisc). The budget splits each exchange's round trips at that base
//! ([`crate::budget::Base`]: the least seen on the same client and server
//! addresses, across connections); this rule reports the exchanges whose
//! queueing is a large part of their time. A deep queue fills when a bulk
//! transfer shares the bottleneck with small exchanges: the small ones wait
//! behind it. The fix is at the queue (active queue management, pacing), not
//! in the distance: "move closer" saves only the base.

use std::net::SocketAddr;

use tcpdoctor_flow::{Connection, Dir, Exchange};

use crate::budget::{index, Part};
use crate::rule::{self, Blame, Detail, Kind, Occurrence};
use crate::text::{human_bytes, ms, Said, Words};
use serde_json::json;

/// Queueing worth a finding in an exchange: at least this…
pub const MIN_QUEUEING_NS: i64 = 5_000_000;
/// …and at least this share of it.
pub const MIN_QUEUEING_SHARE: f64 = 0.25;

/// The largest transfer seen on a client's paths, a candidate for what
/// filled the queue (the engine keeps one per client address).
#[derive(Debug, Clone, Copy)]
pub struct Bulk {
    pub connection: u64,
    pub server: SocketAddr,
    pub bytes: u64,
    pub start_ns: i64,
    pub end_ns: i64,
}

/// What one occurrence measured.
#[derive(Debug, Clone)]
pub struct Queueing {
    /// The connection's round trip, and the path's base.
    pub loaded_ns: i64,
    pub base_ns: i64,
    pub client: std::net::IpAddr,
    pub at_ns: i64,
    /// The largest transfer of the client that overlapped the first
    /// occurrence (filled in when the report is made).
    pub bulk: Option<Bulk>,
}

impl rule::Fold for Queueing {
    fn fold(self, a: &mut crate::Aggregate) {
        a.rtt_ns_min = Some(a.rtt_ns_min.map_or(self.base_ns, |v| v.min(self.base_ns)));
        a.transfer_ns = a.transfer_ns.max(self.loaded_ns);
    }
}

/// The queueing rule keeps nothing per connection: the budget has the parts.
#[derive(Debug, Default)]
pub struct QueueingState;

impl rule::Rule for QueueingState {
    fn on_budget(&mut self, cx: &mut rule::ExchangeCx<'_>, conn: &Connection, ex: &Exchange) {
        let queue = cx.split[index(Part::Queueing)];
        let dur = cx.duration_ns;
        if queue < MIN_QUEUEING_NS || (queue as f64) < MIN_QUEUEING_SHARE * dur as f64 {
            return;
        }
        let loaded = conn.distance_for(ex).unwrap_or(0);
        let base = cx.base.to_server.unwrap_or(loaded);
        let hs = &conn.handshake;
        let mut frames: Vec<u64> = [hs.syn, hs.synack]
            .iter()
            .flatten()
            .map(|m| m.frame)
            .collect();
        frames.extend(
            [ex.request_last, ex.response_first]
                .iter()
                .flatten()
                .map(|m| m.frame),
        );
        let mut notes = Vec::new();
        if let (Some(first), Some(last)) = (ex.response_first, ex.request_last) {
            // The ladder starts at the request: the figures are this wait's
            // (the exchange's queueing may include its handshake's too).
            let ms = |ns: i64| ns as f64 / 1e6;
            notes.push((
                first.frame,
                format!(
                    "response {:.1} ms after the request: round trip {:.1} ms, {:.1} ms above \
                     the base ({:.1} ms) in a queue",
                    ms(first.ts.since(last.ts)),
                    ms(loaded),
                    ms((loaded - base).max(0)),
                    ms(base)
                ),
            ));
        }
        cx.out.push(Occurrence {
            kind: Kind::QueueingDelay,
            culprit: Blame::Network(Dir::ServerToClient),
            delay_ns: queue,
            frames,
            notes,
            ladder_from: ex.request_first.map(|m| m.frame),
            ladder: None,
            span: None,
            detail: Detail::Queueing(Queueing {
                loaded_ns: loaded,
                base_ns: base,
                client: conn.client.addr.ip(),
                at_ns: ex.start().map_or(0, |m| m.ts.nanos()),
                bulk: None,
            }),
        });
    }
}

/// The words of a `queueing_delay` finding: why, the fix, its details.
pub(crate) fn words(s: &Said<'_>) -> Words {
    let (a, typical, total, ep) = (s.a, s.typical, s.total, s.ep);
    let Detail::Queueing(q) = &a.first else {
        return crate::text::no_words();
    };
    let base = ms(a.rtt_ns_min.unwrap_or(q.base_ns));
    let loaded = ms(a.transfer_ns.max(q.loaded_ns));
    let bulk = match q.bulk {
        Some(b) => format!(
            " While it waited, connection {} moved {} to or from {} (the largest transfer of {} in \
             the capture at that time): a bulk flow like that keeps a deep queue full, and every small \
             packet behind it waits.",
            b.connection,
            human_bytes(b.bytes as f64),
            b.server,
            q.client
        ),
        None => " No transfer in this capture overlaps it: the queue was filled by traffic the \
                 capture does not show (other hosts behind the same link)."
            .to_string(),
    };
    let explanation = format!(
        "Exchanges with {ep} waited {typical:.1} ms each (median) in a queue on the path: their round \
         trip was up to {loaded:.1} ms while the path's base round trip — the least seen on it — is \
         {base:.1} ms. The difference is time packets spent in a buffer, not distance \
         (\"bufferbloat\"). {occ} exchange(s), {total:.0} ms in all.{bulk}",
        occ = a.occurrences,
    );
    let fix = format!(
        "Shorten the queue at the bottleneck instead of the distance (moving closer saves only the \
         {base:.1} ms base): active queue management on the link's egress (`tc qdisc replace dev IF root \
         fq_codel`, or `cake bandwidth RATE` on a shaped link, so the queue forms where it is managed), \
         pacing or a rate limit for the bulk flow (BBR, `SO_MAX_PACING_RATE`, `tc … tbf` with a small \
         `latency`), or the bulk transfer moved off the path of interactive traffic."
    );
    let details = json!({
        "base_rtt_ms": base,
        "loaded_rtt_ms": loaded,
        "bulk_connection": q.bulk.map(|b| b.connection),
        "bulk_bytes": q.bulk.map(|b| b.bytes),
    });
    (explanation, fix, details)
}

/// The verdict's sentence of a `queueing_delay` finding.
pub(crate) fn cause(c: &rule::Cause<'_>) -> String {
    let base = c.num("base_rtt_ms").unwrap_or(0.0);
    let loaded = c.num("loaded_rtt_ms").unwrap_or(0.0);
    format!(
        "packets to {} wait ~{} in a queue on the path (round trip {loaded:.1} ms against a base of \
         {base:.1} ms: bufferbloat)",
        c.ep, c.typ
    )
}
