//! TLS handshakes: told by their record headers, and folded into the
//! exchange they open.
//!
//! A TLS connection begins with a handshake: ClientHello, the server's flight
//! (ServerHello, certificate, its key share signed with the certificate's
//! key), and for TLS 1.2 a second round (the client's key exchange and
//! Finished, the server's Finished) — RFC 5246 §7.3; TLS 1.3 needs one round
//! trip (RFC 8446 §2). Each round is a request and a response to the
//! connection tracker. Record headers tell them apart (RFC 8446 §5.1: content
//! type 22 is a handshake record; application data is 23): an exchange whose
//! request begins with a handshake record is a handshake round, not a request
//! of the application; so is a client flight of only change_cipher_spec and
//! Finished, when the server answers it before the request comes (TLS 1.3's
//! session tickets).
//!
//! Handshake rounds are not counted as exchanges: their time is put in the
//! budget of the application exchange that follows (a connection's first
//! request waits for its TLS handshake as it does for the TCP one), as the
//! `tls_handshake` part, and the server's share of it — between the end of a
//! client flight reaching the server and the server's answer, its key
//! exchange and signature — as `tls_key_exchange`. The endpoints' own time in
//! a handshake, when at least [`MIN_HANDSHAKE_NS`], is an occurrence of
//! `tls_handshake`, blamed on the server (key exchange) or the client (its
//! processing between flights), whichever took more; the handshake's round
//! trips are counted by `network_latency` with the others.

use tcpdoctor_flow::{Connection, Dir, Exchange, SegKind, Segment};
use tcpdoctor_wire::Timestamp;

use crate::budget::{index, Claims, Part, Split};
use crate::round3;
use crate::rule::{self, Blame, Detail, Kind, Occurrence};
use crate::text::{ms, Said, Words};
use serde_json::json;

/// The endpoints' own time in a handshake below this is not reported: a
/// full handshake costs each side some CPU (an ECDSA P-256 signature tens of
/// µs, a TLS library's key schedule and certificate parsing a few hundred),
/// an RSA-2048 signature about 1 ms, RSA-4096 several.
pub const MIN_HANDSHAKE_NS: i64 = 2_000_000;
/// The client's own time in a handshake blamed on it at least.
pub const MIN_CLIENT_NS: i64 = 5_000_000;

/// Whether `p` starts with a TLS record header: a content type of
/// change_cipher_spec, alert, handshake or application data, a 3.x version
/// (SSL 3.0 to TLS 1.3's legacy 3.3) and a length within the record limit.
pub fn looks_like_record(p: &[u8]) -> bool {
    p.len() >= 5
        && (20..=23).contains(&p[0])
        && p[1] == 3
        && p[2] <= 4
        && u16::from_be_bytes([p[3], p[4]]) <= (1 << 14) + 2048
}

/// How many leading payload bytes the rule reads: the record header and the
/// handshake message type.
pub fn payload_needed(p: &[u8]) -> usize {
    if looks_like_record(p) {
        p.len().min(6)
    } else {
        0
    }
}

/// The content type of the record `p` starts, if it starts one.
fn record_type(p: &[u8]) -> Option<u8> {
    looks_like_record(p).then(|| p[0])
}

const CHANGE_CIPHER_SPEC: u8 = 20;
const HANDSHAKE: u8 = 22;
const APPLICATION_DATA: u8 = 23;
/// A client flight that starts with change_cipher_spec and is no larger than
/// this is only the handshake's end: CCS (6 bytes) and an encrypted Finished
/// (58–74 bytes in TLS 1.3, less in a resumed TLS 1.2 session). With a
/// request of any size behind it, it is larger.
const MAX_FINISHED_FLIGHT: u64 = 96;

/// Per connection.
#[derive(Debug, Default)]
pub struct TlsState {
    /// Direction of the last new data seen.
    last_dir: Option<Dir>,
    /// The record type the request in progress began with.
    request_record: Option<u8>,
    /// The request in progress, begun with a handshake record, carries
    /// application data after it: TLS False Start (RFC 7918) — the client's
    /// last handshake flight and its first request leave together.
    false_start: bool,
    /// The client's first data: a TLS record (`Some(true)`), or not.
    tls: Option<bool>,
    pending: Option<Pending>,
}

/// Handshake rounds waiting for the application exchange they open.
#[derive(Debug, Clone, Copy)]
struct Pending {
    first: Exchange,
    rounds: u32,
    client_ns: i64,
    last_end: Timestamp,
}

/// What [`TlsState::on_exchange`] made of an exchange.
pub enum Step {
    /// Not TLS, or an exchange after the handshake's first.
    Plain,
    /// A handshake round: not an exchange of the application.
    Handshake,
    /// The first exchange after a handshake, stretched back to its start.
    Opened(Box<Exchange>, Opened),
}

/// The handshake an exchange paid for.
#[derive(Debug, Clone, Copy)]
pub struct Opened {
    pub rounds: u32,
    /// The client's time between the server's flight and its next one.
    pub client_ns: i64,
    /// The handshake's first segment.
    pub frame: u64,
}

impl TlsState {
    #[inline]
    pub fn on_segment(&mut self, seg: &Segment<'_>) {
        // Not TLS: decided by the client's first data, for good.
        if self.tls == Some(false) || seg.kind != SegKind::NewData {
            return;
        }
        if self.last_dir == Some(seg.dir) {
            if seg.dir == Dir::ClientToServer
                && self.request_record == Some(HANDSHAKE)
                && record_type(seg.payload) == Some(APPLICATION_DATA)
            {
                self.false_start = true;
            }
            return;
        }
        self.on_message_start(seg);
    }

    /// New data in the other direction than the last: a message starts.
    #[cold]
    fn on_message_start(&mut self, seg: &Segment<'_>) {
        self.last_dir = Some(seg.dir);
        if seg.dir == Dir::ClientToServer {
            let record = record_type(seg.payload);
            let tls = *self.tls.get_or_insert(record == Some(HANDSHAKE));
            self.request_record = record.filter(|_| tls);
            self.false_start = false;
        }
    }

    /// Classifies a completed exchange and claims its handshake time.
    pub fn on_exchange(&mut self, conn: &Connection, ex: &Exchange, claims: &mut Claims) -> Step {
        let (Some(req_first), Some(req_last), Some(resp_first), Some(resp_last)) = (
            ex.request_first,
            ex.request_last,
            ex.response_first,
            ex.response_last,
        ) else {
            return Step::Plain;
        };
        let to_server = conn.distance_to(Dir::ServerToClient).unwrap_or(0);
        let to_client = conn.distance_to(Dir::ClientToServer).unwrap_or(0);
        let turnaround = |p: &Pending, claims: &mut Claims| {
            claims.claim(Part::TlsHandshake, p.last_end, req_first.ts);
            (req_first.ts.since(p.last_end) - to_client).max(0)
        };
        // A False Start flight is the request itself: the exchange of the
        // application that the handshake opens.
        let round = self.request_record == Some(HANDSHAKE) && !self.false_start;
        let finished = self.request_record == Some(CHANGE_CIPHER_SPEC)
            && ex.request_bytes <= MAX_FINISHED_FLIGHT;
        if round || finished {
            let mut p = self.pending.unwrap_or(Pending {
                first: *ex,
                rounds: 0,
                client_ns: 0,
                last_end: req_first.ts,
            });
            if self.pending.is_some() {
                p.client_ns += turnaround(&p, claims);
            }
            // The flight's transfer and its way to the server, the server's
            // answer, the answer's transfer.
            let at_server =
                Timestamp::from_nanos(req_last.ts.nanos() + to_server).min(resp_first.ts);
            claims.claim(Part::TlsHandshake, req_first.ts, at_server);
            claims.claim(Part::TlsKeyExchange, at_server, resp_first.ts);
            claims.claim(Part::TlsHandshake, resp_first.ts, resp_last.ts);
            // The client waits for each flight it starts with a handshake
            // message (ClientHello, its key exchange); TLS 1.3's server
            // sends its session tickets after the client's Finished unasked.
            p.rounds += u32::from(round);
            p.last_end = resp_last.ts;
            self.pending = Some(p);
            return Step::Handshake;
        }
        // Most connections have no handshake pending: not taken (a copy).
        if self.pending.is_none() {
            return Step::Plain;
        }
        let Some(p) = self.pending.take() else {
            return Step::Plain;
        };
        let client_ns = p.client_ns + turnaround(&p, claims);
        let mut opened = *ex;
        opened.setup = p.first.setup;
        if opened.setup.is_none() {
            opened.request_first = p.first.request_first;
        }
        Step::Opened(
            Box::new(opened),
            Opened {
                rounds: p.rounds,
                client_ns,
                frame: p.first.request_first.map_or(0, |m| m.frame),
            },
        )
    }
}

/// The handshake's time: the server's, the client's, the path's.
fn parts(split: &Split, o: &Opened) -> (i64, i64, i64) {
    let total = split[index(Part::TlsHandshake)] + split[index(Part::TlsKeyExchange)];
    let server = split[index(Part::TlsKeyExchange)];
    let client = o.client_ns.clamp(0, total - server);
    (server, client, total - server - client)
}

/// The handshake's round trips on the network: `network_latency`'s.
pub fn network_ns(split: &Split, o: &Opened) -> i64 {
    parts(split, o).2
}

/// The `tls_handshake` occurrence of an exchange that paid for a handshake:
/// the endpoints' own time in it (its round trips are `network_latency`'s),
/// blamed on the one that took more.
pub fn occurrence(conn: &Connection, split: &Split, o: &Opened) -> Option<Occurrence> {
    let (server, client, network) = parts(split, o);
    if server + client < MIN_HANDSHAKE_NS {
        return None;
    }
    let culprit = if server >= client {
        Blame::Side(Dir::ServerToClient)
    } else if client >= MIN_CLIENT_NS {
        Blame::Side(Dir::ClientToServer)
    } else {
        // A client process's own start-up (curl's ~1–3 ms per run) is not
        // a slow handshake.
        return None;
    };
    Some(Occurrence {
        kind: Kind::TlsHandshake,
        culprit,
        delay_ns: server + client,
        frames: vec![o.frame],
        notes: vec![(o.frame, "ClientHello".to_string())],
        ladder_from: Some(o.frame),
        ladder: None,
        span: None,
        detail: Detail::Tls(Tls {
            server_ns: server,
            client_ns: client,
            network_ns: network,
            rounds: o.rounds,
            rtt_ns: conn.path_rtt_ns(),
        }),
    })
}

/// The words of a `tls_handshake` finding: why, the fix, its details.
pub(crate) fn words(s: &Said<'_>) -> Words {
    let (a, typical, total, ep, role, server) = (s.a, s.typical, s.total, s.ep, s.role, s.server);
    let n = a.occurrences.max(1);
    let per = |ns: i64| round3(ns as f64 / n as f64 / 1e6);
    let (kx, cl) = (per(a.inside_ns), per(a.transfer_ns));
    let rounds = round3(a.count as f64 / n as f64);
    let network = round3(a.handshake_ns as f64 / n as f64 / 1e6);
    let rtt = a.rtt_ns_min.map(ms);
    let version = if rounds >= 1.5 {
        "a full TLS 1.2 handshake: two round trips before the first request"
    } else {
        "a one-round-trip handshake (TLS 1.3, or a resumed TLS 1.2 session)"
    };
    let (cause, why, fix) = match role {
        "server" => (
            "key_exchange",
            format!(
                "most of it is {ep}'s own time between the client's flight and its answer — \
                 {kx:.2} ms per handshake: computing its key share and signing it with the \
                 certificate's private key (RSA keys of 3072–4096 bits cost milliseconds per \
                 signature; ECDSA P-256 or Ed25519 a few microseconds), or waiting on a hardware \
                 module or an OCSP lookup"
            ),
            format!(
                "At {ep}: sign with an ECDSA P-256 certificate (or serve one beside the RSA one: nginx \
                 takes several `ssl_certificate` lines) instead of a large RSA key; let clients resume \
                 sessions (`ssl_session_cache shared:SSL:10m; ssl_session_tickets on;`) so repeat \
                 handshakes skip the signature; enable TLS 1.3; and keep connections alive so each \
                 request does not pay a handshake. `openssl speed rsa4096 ecdsap256` shows the cost per \
                 signature on this CPU."
            ),
        ),
        _ => (
            "client",
            format!(
                "most of it is the client's own time between the server's flight and its next one — \
                 {cl:.2} ms per handshake: verifying the certificate chain, computing its key \
                 share, or a client that starts its TLS library cold (a new process per request)"
            ),
            format!(
                "At the client {ep}: reuse connections (keep-alive, a connection pool) and TLS sessions \
                 (session tickets), keep the process and its TLS context warm between requests, and \
                 check what it does between the server's handshake flight and its answer."
            ),
        ),
    };
    let explanation = format!(
        "{conns} connection(s) to {srv} opened with a TLS handshake ({version}) in which the endpoints \
         spent {typical:.2} ms (median) of their own time, {total:.0} ms in all, before the first request \
         could leave: {why}. Per handshake: \
         {network:.2} ms round trips, {kx:.2} ms the server's key exchange, {cl:.2} ms the \
         client's processing (means).",
        conns = a.connections,
        srv = if server.is_empty() { ep.clone() } else { server.clone() },
    );
    (
        explanation,
        fix,
        json!({"cause": cause, "handshakes": a.occurrences, "handshakes_seen": a.flagged,
               "round_trips": rounds,
               "key_exchange_ms": kx, "client_ms": cl, "network_ms": network,
               "rtt_ms": rtt}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_headers() {
        // ClientHello in a TLS 1.0 record (as TLS 1.3 clients send it).
        assert_eq!(record_type(&[22, 3, 1, 0, 200, 1]), Some(HANDSHAKE));
        assert_eq!(record_type(&[20, 3, 3, 0, 1, 1]), Some(CHANGE_CIPHER_SPEC));
        assert!(looks_like_record(&[23, 3, 3, 0x40, 0]));
        // HTTP, SSH, a record too long, a short payload.
        assert!(!looks_like_record(b"GET / HTTP/1.1"));
        assert!(!looks_like_record(b"SSH-2.0-OpenSSH"));
        assert!(!looks_like_record(&[22, 3, 3, 0xff, 0xff]));
        assert!(!looks_like_record(&[22, 3, 3]));
        assert_eq!(payload_needed(&[22, 3, 1, 0, 200, 1, 0, 0]), 6);
        assert_eq!(payload_needed(b"hello world"), 0);
    }
}

/// What one occurrence measured.
#[derive(Debug, Clone)]
pub struct Tls {
    /// The server's key exchange, the client's processing between
    /// flights (the rest of the handshake is round trips).
    pub server_ns: i64,
    pub client_ns: i64,
    pub network_ns: i64,
    /// Handshake round trips (2 for a full TLS 1.2 handshake, 1 for TLS 1.3).
    pub rounds: u32,
    pub rtt_ns: Option<i64>,
}

impl rule::Fold for Tls {
    fn fold(self, a: &mut crate::Aggregate) {
        a.handshake_ns += self.network_ns;
        a.inside_ns += self.server_ns;
        a.transfer_ns += self.client_ns;
        a.count += u64::from(self.rounds);
        a.rtt_ns_min = rule::min_opt(a.rtt_ns_min, self.rtt_ns);
    }
}

impl rule::Rule for TlsState {
    #[inline]
    fn on_segment(&mut self, _: &mut rule::SegmentCx<'_>, _: &Connection, seg: &Segment<'_>) {
        if seg.len > 0 {
            TlsState::on_segment(self, seg);
        }
    }

    fn on_budget(&mut self, cx: &mut rule::ExchangeCx<'_>, conn: &Connection, _: &Exchange) {
        if let Some(t) = cx.tls {
            cx.out.extend(occurrence(conn, &cx.split, &t));
        }
    }
}

/// The verdict's sentence of a `tls_handshake` finding.
pub(crate) fn cause(c: &rule::Cause<'_>) -> String {
    let (ep, role, typ) = (c.ep, c.role, &c.typ);
    match c.str("cause") {
        Some("key_exchange") => format!(
            "{ep} ({role}) takes ~{typ} per TLS handshake, most of it its own key exchange \
             (the certificate key's signature)"
        ),
        Some("client") => format!(
            "each TLS handshake takes ~{typ}, most of it the client's own processing between flights"
        ),
        _ => format!("each new connection pays a TLS handshake of ~{typ}, mostly round trips"),
    }
}

/// Slow handshakes that are fewer than half of the endpoint's (`flagged`:
/// its handshakes seen) are a busy moment, not its keys: a minor finding.
pub(crate) fn standing(a: &crate::Aggregate) -> rule::Standing {
    if a.occurrences * 2 < a.flagged {
        rule::Standing::Minor
    } else {
        rule::Standing::ByShare
    }
}
