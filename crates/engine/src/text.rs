//! Turning aggregates into findings a person can act on, and connections into summaries.

use std::net::SocketAddr;

use serde_json::json;
use tcpdoctor_flow::{Connection, Dir, Exchange, Mark};

use crate::budget::{Part, Split};
use crate::model::*;
use crate::rules;
use crate::{round3, Aggregate, Heavy};
pub(crate) use tcpdoctor_units::bytes_f64 as human_bytes;

pub(crate) fn ms(ns: i64) -> f64 {
    round3(ns as f64 / 1e6)
}

pub(crate) fn human_rate(bytes_per_s: f64) -> String {
    tcpdoctor_units::rate(bytes_per_s * 8.0)
}

/// A display filter that shows one instance: Wireshark's `tcp.stream` of the
/// connection (connection N is stream N−1: both count connections in order of
/// first appearance), between two frames. Without evidence, the endpoints.
fn filter(ev: Option<&Evidence>, client: &str, server: &str) -> String {
    if let Some(ev) = ev {
        let mut f = format!("tcp.stream eq {}", ev.connection.saturating_sub(1));
        if let (Some(lo), Some(hi)) = (ev.frames.iter().min(), ev.frames.iter().max()) {
            f.push_str(&format!(" && frame.number >= {lo} && frame.number <= {hi}"));
        }
        return f;
    }
    let parse = |s: &str| s.parse::<SocketAddr>().ok();
    let (Some(c), Some(s)) = (parse(client), parse(server)) else {
        return String::new();
    };
    let ip = |a: SocketAddr| match a {
        SocketAddr::V4(_) => format!("ip.addr == {}", a.ip()),
        SocketAddr::V6(_) => format!("ipv6.addr == {}", a.ip()),
    };
    format!(
        "{} && {} && tcp.port == {} && tcp.port == {}",
        ip(c),
        ip(s),
        c.port(),
        s.port()
    )
}

/// What a rule's `words` get: the finding's aggregate and what every
/// finding says (typical and total delay, share, culprit endpoint and role,
/// the peer's role, the ladder's server).
#[derive(Clone, Copy)]
pub(crate) struct Said<'a> {
    pub a: &'a Aggregate,
    pub typical: f64,
    pub total: f64,
    pub share: f64,
    pub ep: &'a String,
    pub role: &'static str,
    pub peer: &'static str,
    pub server: &'a String,
}

/// A finding's explanation, fix and `details`.
pub(crate) type Words = (String, String, serde_json::Value);

/// Nothing to say (a detail of another kind: cannot happen).
pub(crate) fn no_words() -> Words {
    (String::new(), String::new(), json!({}))
}

pub(crate) fn finding(
    a: Aggregate,
    denominator_ns: f64,
    predicted_after_fix: Option<Prediction>,
) -> Finding {
    let total = ms(a.total_ns);
    // Time two findings explained at once is counted once in the total
    // (`claim_once`): a typical occurrence cannot have cost more than that.
    let typical = round3(a.delays.quantile_ms(0.5)).min(total);
    let share = if denominator_ns > 0.0 {
        round3((a.total_ns as f64 / denominator_ns).min(1.0))
    } else {
        0.0
    };
    let ep = a.culprit.endpoint.clone();
    let role = a.culprit.role;
    let peer = a.peer_role;
    let (client, server) = a
        .ladder
        .as_ref()
        .map(|l| (l.client.clone(), l.server.clone()))
        .unwrap_or_default();
    let wireshark_filter = filter(a.evidence.first(), &client, &server);
    let said = Said {
        a: &a,
        typical,
        total,
        share,
        ep: &ep,
        role,
        peer,
        server: &server,
    };
    // Each rule says its own finding (rules/*.rs, `words`), next to how it detects it.
    let (explanation, fix, details) = rules::words(a.kind, &said);
    Finding {
        kind: a.kind.name(),
        culprit: a.culprit,
        connections: a.connections,
        occurrences: a.occurrences,
        typical_delay_ms: typical,
        total_delay_ms: total,
        share_of_time: share,
        evidence: a.evidence,
        wireshark_filter,
        explanation,
        fix,
        details,
        ladder: a.ladder,
        predicted_after_fix,
    }
}

/// A budget as `{part: ms}`, parts with no time left out.
pub(crate) fn budget_parts(split: &Split, per: f64) -> BudgetParts {
    // Sized exactly: one allocation per list.
    let mut parts = Vec::with_capacity(split.iter().filter(|&&v| v > 0).count());
    for (p, &v) in Part::ALL.iter().zip(split) {
        if v > 0 {
            parts.push((p.name(), round3(v as f64 / per / 1e6)));
        }
    }
    BudgetParts(parts)
}

pub(crate) fn exchange_summary(e: &Exchange, split: &Split, t0_ns: i64) -> ExchangeSummary {
    let gap = |a: Option<Mark>, b: Option<Mark>| Some(ms(b?.ts.since(a?.ts)));
    ExchangeSummary {
        index: e.index,
        // Absolute here; made relative to the capture start in `Engine::finish`.
        start_ms: e.start().map_or(0.0, |m| ms((m.ts.nanos() - t0_ns).max(0))),
        duration_ms: ms(e.duration_ns()),
        request_bytes: e.request_bytes,
        response_bytes: e.response_bytes,
        request_ms: gap(e.request_first, e.request_last),
        request_ack_ms: gap(e.request_last, e.request_acked),
        wait_ms: gap(e.request_last, e.response_first),
        response_ms: gap(e.response_first, e.response_last),
        setup_ms: gap(e.start(), e.request_first),
        budget_ms: budget_parts(split, 1.0),
        frames: [
            e.request_first.map(|m| m.frame),
            e.request_last.map(|m| m.frame),
            e.request_acked.map(|m| m.frame),
            e.response_first.map(|m| m.frame),
            e.response_last.map(|m| m.frame),
        ],
    }
}

/// A TTL (hop limit) a host starts its packets with: 64 Linux and macOS,
/// 128 Windows, 255 some routers, 32 old systems. A packet still carrying
/// one crossed no router before the capture point.
pub(crate) fn initial_ttl(t: u8) -> bool {
    matches!(t, 32 | 64 | 128 | 255)
}

/// Whether a sender's packets, their TTL `t` (0: none seen), crossed a
/// router before the capture point: a path of unknown length lies between.
/// A TTL of 1 is one a host sent for its own link (eBGP's single-hop peers,
/// link-local protocols), not one a router left.
pub(crate) fn crossed_router(t: u8) -> bool {
    t > 1 && !initial_ttl(t)
}

/// Where the capture was taken, for one connection, and from what.
///
/// A host sends with an initial TTL (64 Linux/macOS, 128 Windows, 255 some
/// routers): a TTL still at that value was captured on the sending host or
/// its link; a decremented one crossed a router first. When both TTLs are
/// initial (one L2 segment), the handshake tells: the side the capture point
/// is close to answers its half of the handshake fastest.
pub fn vantage(conn: &Connection) -> (&'static str, &'static str) {
    let (c, s) = (conn.client.ttl, conn.server.ttl);
    match (initial_ttl(c), initial_ttl(s)) {
        (true, false) if s != 0 => return ("client", "ttl"),
        (false, true) if c != 0 => return ("server", "ttl"),
        (false, false) if c != 0 && s != 0 => return ("between", "ttl"),
        _ => {}
    }
    let hs = &conn.handshake;
    match (hs.client_side_ns(), hs.server_side_ns()) {
        (Some(cs), Some(ss)) => {
            let total = cs + ss;
            if total < 1_000_000 {
                ("unknown", "endpoints too close to tell")
            } else if cs * 5 < total {
                ("client", "handshake")
            } else if ss * 5 < total {
                ("server", "handshake")
            } else {
                ("between", "handshake")
            }
        }
        _ => ("unknown", "no handshake"),
    }
}

/// `st`: the connection's diagnosis state, if it needed one (see [`Heavy`]).
pub(crate) fn connection_summary(
    conn: &Connection,
    st: Option<&Heavy>,
    t0_ns: i64,
) -> ConnectionSummary {
    let hs = &conn.handshake;
    // A connection without a diagnosis state reads as a new one's (made
    // only for it).
    let idle;
    let st = match st {
        Some(h) => h,
        None => {
            idle = Heavy::default();
            &idle
        }
    };
    let (place, told_from) = vantage(conn);
    let (end, ended_by) = crate::rules::refused_reset::end_state(conn);
    ConnectionSummary {
        id: conn.id,
        tcp_stream: conn.id.saturating_sub(1),
        client: conn.client.addr,
        server: conn.server.addr,
        roles_from: conn.role_source.describe(),
        first_frame: conn.first.frame,
        // Absolute here; made relative to the capture start in `Engine::finish`.
        start_ms: ms((conn.first.ts.nanos() - t0_ns).max(0)),
        duration_ms: ms(conn.duration_ns()),
        handshake_rtt_ms: hs.rtt_ns().map(ms),
        handshake_client_side_ms: hs.client_side_ns().map(ms),
        handshake_server_side_ms: hs.server_side_ns().map(ms),
        rtt_ms: conn.path_rtt_ns().map(ms),
        syn_retransmissions: hs.syn_count.saturating_sub(1),
        packets: conn.packets,
        exchanges: st.exchanges,
        exchange_latency_ms: (st.exchanges > 0).then(|| ExchangeStats {
            mean: ms(st.exchange_sum_ns / st.exchanges as i64),
            max: ms(st.exchange_max_ns),
        }),
        slowest_exchanges: {
            let mut list: Vec<ExchangeSummary> = st
                .slowest
                .iter()
                .map(|(e, split)| exchange_summary(e, split, t0_ns))
                .collect();
            list.sort_by_key(|e| e.index);
            list
        },
        bytes: Directions {
            client_to_server: conn.client.bytes,
            server_to_client: conn.server.bytes,
        },
        retransmissions: Directions {
            client_to_server: conn.client.retransmissions,
            server_to_client: conn.server.retransmissions,
        },
        max_in_flight: Directions {
            client_to_server: conn.client.max_in_flight,
            server_to_client: conn.server.max_in_flight,
        },
        delivery_rate_mbit_s: Directions {
            client_to_server: mbit_s(conn.client.rate.best()),
            server_to_client: mbit_s(conn.server.rate.best()),
        },
        delivery_rate_frames: Directions {
            client_to_server: conn.client.rate.best_frames(),
            server_to_client: conn.server.rate.best_frames(),
        },
        rate_limit: Directions {
            client_to_server: st.limits.summary(Dir::ClientToServer),
            server_to_client: st.limits.summary(Dir::ServerToClient),
        },
        mss: Directions {
            client_to_server: conn.client.mss,
            server_to_client: conn.server.mss,
        },
        window_scale: Directions {
            client_to_server: conn.client.window_shift,
            server_to_client: conn.server.window_shift,
        },
        min_window: Directions {
            client_to_server: conn.client.window_min,
            server_to_client: conn.server.window_min,
        },
        end,
        ended_by,
        vantage: place,
        vantage_from: told_from,
        duplicates: conn.client.duplicates + conn.server.duplicates,
        time_lost_ms: ms(st.time_lost_ns),
    }
}

/// A delivery rate (bytes over nanoseconds) in Mbit/s, to 0.001.
fn mbit_s(rate: Option<(u32, i64)>) -> Option<f64> {
    rate.map(|(b, ns)| (f64::from(b) * 8_000.0 / ns as f64 * 1000.0).round() / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_router_crossed_is_a_ttl_below_its_initial_value() {
        // Decremented: Linux 64 → 52, Windows 128 → 88 (nDPI's mqtt and tls_2_reasms_b).
        assert!(crossed_router(52) && crossed_router(88) && crossed_router(2));
        // Initial values: the sender's own host or link; 0: no packet seen; 1: a host's
        // single-hop TTL (eBGP peers), which no router forwards.
        for t in [0, 1, 32, 64, 128, 255] {
            assert!(!crossed_router(t), "{t}");
        }
    }
}
