//! Findings as they are folded: one aggregate per kind and culprit, and what
//! is folded into them when the report is made.

use std::net::SocketAddr;

use rustc_hash::FxHashMap;
use tcpdoctor_flow::Connection;

use crate::histogram::Histogram;
use crate::model::*;
use crate::rule::{Detail, Kind};
use crate::rules::{self, syn_flood::Flood};
use crate::Heavy;

/// Key of an aggregate: kind, and the culprit (clients by address only, since
/// their ports are ephemeral).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct AggKey {
    pub(crate) kind: Kind,
    pub(crate) role: &'static str,
    pub(crate) endpoint: SocketAddr,
}

/// Everything a finding needs, folded as occurrences arrive.
pub(crate) struct Aggregate {
    pub(crate) kind: Kind,
    pub(crate) culprit: Culprit,
    pub(crate) culprit_addr: SocketAddr,
    pub(crate) peer_role: &'static str,
    pub(crate) connections: u64,
    pub(crate) occurrences: u64,
    pub(crate) delays: Histogram,
    pub(crate) total_ns: i64,
    pub(crate) evidence: Vec<Evidence>,
    pub(crate) ladder: Option<Ladder>,
    /// The first occurrence's detail, and running sums for the rest.
    pub(crate) first: Detail,
    pub(crate) ack_wait: Histogram,
    pub(crate) after_ack: Histogram,
    pub(crate) window_sum: u64,
    pub(crate) window_min: u32,
    pub(crate) bytes: u64,
    pub(crate) transfer_ns: i64,
    pub(crate) stalls: u64,
    pub(crate) rtt_ns_min: Option<i64>,
    /// Kind-specific count: retries, probes, retransmissions, round trips.
    pub(crate) count: u64,
    /// Kind-specific flag count: unanswered setups, unreopened windows, losses upstream of the capture.
    pub(crate) flagged: u64,
    /// Server or client time inside the message (the rest of `total_ns` was before it).
    pub(crate) inside_ns: i64,
    /// The culprit's ports that refused connections.
    pub(crate) ports: Option<Box<rules::refused_reset::Ports>>,
    /// Round trips: handshakes (and their time), requests, further flights.
    pub(crate) handshakes: u64,
    pub(crate) handshake_ns: i64,
    pub(crate) requests: u64,
    pub(crate) flights: u64,
    /// The servers of the connections it was found on (for its prediction),
    /// and whether there were more than are kept.
    pub(crate) servers: Vec<SocketAddr>,
    pub(crate) servers_overflow: bool,
    /// Connections the culprit (a client) opened and never sent a request
    /// on: it opens connections ahead of use (filled in at the report).
    pub(crate) preconnects: u64,
    /// `tls_handshake`: handshakes by the certificate key their suite named
    /// (indexed by [`rules::tls::CertKey::index`]).
    pub(crate) tls_keys: [u32; 4],
}

impl Aggregate {
    pub(crate) fn new(
        kind: Kind,
        addr: SocketAddr,
        role: &'static str,
        first: Detail,
    ) -> Aggregate {
        Aggregate {
            kind,
            culprit: Culprit {
                endpoint: addr.to_string(),
                role,
            },
            culprit_addr: addr,
            peer_role: match role {
                "client" => "server",
                "server" => "client",
                _ => "endpoints",
            },
            connections: 0,
            occurrences: 0,
            delays: Histogram::default(),
            total_ns: 0,
            evidence: Vec::new(),
            ladder: None,
            first,
            ack_wait: Histogram::default(),
            after_ack: Histogram::default(),
            window_sum: 0,
            window_min: u32::MAX,
            bytes: 0,
            transfer_ns: 0,
            stalls: 0,
            rtt_ns_min: None,
            count: 0,
            flagged: 0,
            inside_ns: 0,
            ports: None,
            handshakes: 0,
            handshake_ns: 0,
            requests: 0,
            flights: 0,
            servers: Vec::new(),
            servers_overflow: false,
            preconnects: 0,
            tls_keys: [0; 4],
        }
    }
}

impl Aggregate {
    /// Takes in the servers another aggregate folded into this one was found on.
    fn merge_servers(&mut self, other: &Aggregate) {
        self.servers_overflow |= other.servers_overflow;
        for s in &other.servers {
            if !self.servers.contains(s) {
                if self.servers.len() < crate::whatif::MAX_AGG_SERVERS {
                    self.servers.push(*s);
                } else {
                    self.servers_overflow = true;
                }
            }
        }
    }
}

/// SYN retries to a server whose accept queue was seen full are that queue's:
/// folded into its `listen_queue_overflow` finding.
pub(crate) fn fold_listen_queue(
    aggregates: &mut FxHashMap<AggKey, Aggregate>,
    max_evidence: usize,
) {
    let servers: Vec<SocketAddr> = aggregates
        .keys()
        .filter(|k| k.kind == Kind::ListenQueueOverflow)
        .map(|k| k.endpoint)
        .collect();
    for server in servers {
        let syn: Vec<AggKey> = aggregates
            .keys()
            .filter(|k| k.kind == Kind::SynRetransmit && k.endpoint == server)
            .cloned()
            .collect();
        for key in syn {
            let Some(s) = aggregates.remove(&key) else {
                continue;
            };
            let target = AggKey {
                kind: Kind::ListenQueueOverflow,
                role: "server",
                endpoint: server,
            };
            if let Some(agg) = aggregates.get_mut(&target) {
                agg.connections += s.connections;
                agg.occurrences += s.occurrences;
                agg.delays.merge(&s.delays);
                agg.total_ns += s.total_ns;
                agg.count += s.count;
                agg.merge_servers(&s);
                agg.evidence.extend(s.evidence);
                agg.evidence.truncate(max_evidence);
            }
        }
    }
}

/// Each flooded endpoint becomes a `syn_flood` finding; the SYN retries of
/// legitimate connections to it (dropped with the flood's SYNs) are its cost.
pub(crate) fn fold_syn_floods(
    aggregates: &mut FxHashMap<AggKey, Aggregate>,
    floods: &rules::syn_flood::Floods,
    max_evidence: usize,
) {
    for (target, t) in floods.flooded() {
        let mut agg = Aggregate::new(
            Kind::SynFlood,
            target,
            "network",
            Detail::Flood(Flood {
                attempts: t.attempts,
                half_open: t.half_open,
                one_shot: t.one_shot,
                answered: t.answered,
                refused: t.refused,
                sources: t.sources(),
                first_ns: t.first_ns,
                last_ns: t.last_ns,
                delayed: 0,
            }),
        );
        agg.connections = t.half_open;
        agg.occurrences = t.half_open;
        agg.evidence = t
            .samples
            .iter()
            .map(|&(connection, frame)| Evidence {
                connection,
                tcp_stream: connection.saturating_sub(1),
                frames: vec![frame],
                delay_ms: 0.0,
            })
            .collect();
        let retries: Vec<AggKey> = aggregates
            .keys()
            .filter(|k| k.kind == Kind::SynRetransmit && k.endpoint == target)
            .cloned()
            .collect();
        let mut delayed = 0;
        for key in retries {
            let Some(s) = aggregates.remove(&key) else {
                continue;
            };
            delayed += s.connections;
            agg.delays.merge(&s.delays);
            agg.total_ns += s.total_ns;
            agg.count += s.count;
            agg.merge_servers(&s);
            if agg.ladder.is_none() {
                agg.ladder = s.ladder;
            }
            // The legitimate clients' waits first: they are the cost.
            let mut ev = s.evidence;
            ev.append(&mut agg.evidence);
            ev.truncate(max_evidence);
            agg.evidence = ev;
        }
        if let Detail::Flood(Flood { delayed: d, .. }) = &mut agg.first {
            *d = delayed;
        }
        // Occurrences: the legitimate connections that waited, when some did
        // (the delays are theirs); else the flood's attempts.
        if delayed > 0 {
            agg.occurrences = delayed;
        }
        let key = AggKey {
            kind: Kind::SynFlood,
            role: "network",
            endpoint: target,
        };
        aggregates.insert(key, agg);
    }
}

/// Claims a closing connection's lost time once: findings may explain the
/// same interval (a window wait during a retransmission timeout), but the
/// connection cannot have lost more than it lasted. Beyond that, the excess is
/// taken from each finding of the connection in proportion. Returns the lost
/// time that lies outside the connection's complete exchanges (setup that
/// never led to one, a transfer cut short), which joins the total that
/// every share is of.
pub(crate) fn claim_once(
    h: &mut Heavy,
    conn: &Connection,
    aggregates: &mut FxHashMap<AggKey, Aggregate>,
) -> i64 {
    let lost: i64 = h.lost.iter().map(|(_, ns)| ns).sum();
    if lost <= 0 {
        return 0;
    }
    let counted = lost.min(conn.duration_ns().max(h.exchange_sum_ns));
    if counted < lost {
        let excess = lost - counted;
        for (key, ns) in &h.lost {
            if let Some(agg) = aggregates.get_mut(key) {
                let cut = (i128::from(excess) * i128::from(*ns) / i128::from(lost)) as i64;
                agg.total_ns -= cut;
            }
        }
        h.time_lost_ns = counted;
    }
    (counted - h.exchange_sum_ns).max(0)
}
