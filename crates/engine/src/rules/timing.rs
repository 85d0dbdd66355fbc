//! Where an exchange's time went at the ends: the server thinking, the client
//! idling (before their message or inside it), or the round trips themselves.
//!
//! Times are measured at the capture point and corrected by the distance from
//! the capture point to the endpoint concerned (from the handshake), so the
//! same exchange gives the same answer captured at the client, the server or
//! in between.

use tcpdoctor_flow::{Connection, Dir, Exchange};

use super::idle::Pause;
use crate::budget::{index, Part, Split};
use crate::rule::{self, Blame, Detail, Kind, Occurrence};
use crate::text::{ms, Said, Words};
use serde_json::json;

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
    cork_holds: u32,
    close_wait: i64,
) -> Option<Occurrence> {
    let (last, first) = (ex.request_last?, ex.response_first?);
    let think = split[index(Part::Server)];
    if think < MIN_THINK_NS {
        return None;
    }
    let dur = ex.duration_ns();
    if (think as f64) < MIN_THINK_SHARE * dur as f64 {
        return None;
    }
    // The wait for a close-delimited response's FIN is the server's, after
    // the response (counted with the pauses inside it).
    let close = close_wait.clamp(0, think);
    let inside = (inside_ns + close).clamp(0, think);
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
        detail: Detail::Timing(Timing {
            rtt_ns: conn.path_rtt_ns(),
            inside_ns: inside,
            cork_holds,
            close_ns: close,
            expect: false,
        }),
    })
}

/// The client's own time in an exchange: after the handshake before its first
/// request (`before_request`), and the pauses inside a request that were the
/// client application's ([`super::idle`]: `inside_request`).
///
/// `unclaimed_idle`: the budget's `client_idle`, the time after the
/// handshake no mechanism claimed (a request lost on its way and sent again
/// by the timer is that wait's, not the client's).
pub fn client_delay(
    conn: &Connection,
    ex: &Exchange,
    inside_ns: i64,
    longest: Pause,
    expect_unanswered: bool,
    unclaimed_idle: i64,
) -> Option<Occurrence> {
    // Both leave the client and travel the same path: no correction needed.
    let before = match (ex.index, conn.handshake.ack, ex.request_first) {
        (0, Some(ack), Some(first)) => first.ts.since(ack.ts).max(0).min(unclaimed_idle),
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
        detail: Detail::Timing(Timing {
            rtt_ns: conn.path_rtt_ns(),
            inside_ns: inside_ns.max(0),
            cork_holds: 0,
            close_ns: 0,
            expect: expect_unanswered && inside_ns > 0,
        }),
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
    /// The round trip is a bound ([`rule::round_trip`]).
    bounded: bool,
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
        duration_ns: i64,
    ) {
        let Some((rtt, bounded)) = rule::round_trip(conn) else {
            return;
        };
        self.bounded |= bounded;
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
        self.requests += u64::from(net > 0 && net.saturating_mul(2) >= rtt);
        self.total_ns += duration_ns;
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
        let Some((rtt, _)) = rule::round_trip(conn) else {
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
            detail: Detail::Latency(Latency {
                rtt_ns: rtt,
                handshakes: self.handshakes,
                handshake_ns: self.handshake_ns,
                requests: self.requests,
                flights: ((flights + rtt / 2) / rtt.max(1)) as u64,
                exchanges: self.exchanges,
                tls_rounds: self.tls_rounds,
                tls_ns: self.tls_ns,
                bounded: self.bounded,
            }),
        });
    }
}

/// The words of a `server_delay` finding: why, the fix, its details.
pub(crate) fn server_words(s: &Said<'_>) -> Words {
    let (a, typical, total, ep) = (s.a, s.typical, s.total, s.ep);
    let rtt = a.rtt_ns_min.map(ms);
    let rtt_text = rtt.map_or("unknown".to_string(), |r| format!("{r:.2} ms"));
    let (before, inside) = (a.total_ns - a.inside_ns, a.inside_ns);
    let place = where_(before, inside, "response");
    // The same partial tail held ~200 ms after full segments in most
    // exchanges, everything acknowledged: a socket left corked.
    if a.stalls > 0 && a.stalls * 2 >= a.occurrences && inside.saturating_mul(2) >= a.total_ns {
        return cork_words(s, place, before, inside);
    }
    if a.transfer_ns.saturating_mul(2) >= a.total_ns {
        return close_words(s, before, inside);
    }
    let how = match place {
        "inside_response" => format!(
            "started each response at once and then paused inside it, {typical:.1} ms per exchange \
             (median): the first part of the response (typically the headers) left and was \
             acknowledged, and the rest followed only after a pause with nothing unacknowledged, the \
             receive window open and nothing lost — TCP held nothing back, the application had not \
             written the rest yet. Servers that send the headers first and then compute the body \
             (chunked encoding, streaming, frameworks that flush early) look like this"
        ),
        "before_and_inside_response" => format!(
            "took {typical:.1} ms per exchange (median) of its own time: {bef:.0} ms in all between the \
             complete request and the first response byte, and {ins:.0} ms inside responses, pausing \
             with everything acknowledged, the receive window open and nothing lost",
            bef = ms(before),
            ins = ms(inside),
        ),
        _ => format!(
            "received each request completely and then took {typical:.1} ms (median) before the \
             first byte of its response, beyond the round trip ({rtt_text})"
        ),
    };
    let explanation = format!(
        "{ep} (server) {how}; {occ} exchange(s) on {conns} connection(s), {total:.0} ms in all. The \
         packets are on time: the time is spent in the server application (or what it waits on: a \
         database, a backend, a lock, a full thread pool).",
        occ = a.occurrences,
        conns = a.connections,
    );
    let fix = if place == "before_response" {
        format!(
            "Look inside the server at {ep}: its request log with timings, a profile of the handler, and \
             what it calls (database, upstreams). The network is not the cause; tuning TCP will not help."
        )
    } else {
        format!(
            "Look inside the server at {ep} at what runs between writing the first part of the response \
             (the headers) and the rest: the handler's slow step (a query, an upstream call, rendering) \
             is there. Make that step faster or cache its result; if it cannot be, compute it before \
             sending the headers, so that time-to-first-byte, logs and timeouts show the delay honestly \
             instead of a response that stalls half-way. The network is not the cause; tuning TCP will \
             not help."
        )
    };
    (
        explanation,
        fix,
        json!({"think_ms": typical, "rtt_ms": rtt, "where": place,
               "before_response_ms": ms(before), "inside_response_ms": ms(inside)}),
    )
}

/// A server whose socket stays corked (`TCP_CORK`): the partial tail of
/// each response leaves on the kernel's 200 ms ceiling.
fn cork_words(s: &Said<'_>, place: &str, before: i64, inside: i64) -> Words {
    let (a, typical, total, ep) = (s.a, s.typical, s.total, s.ep);
    let rtt = a.rtt_ns_min.map(ms);
    let explanation = format!(
        "{ep} (server) held the last, partial segment of its responses for about 200 ms: {holds} \
         time(s) on {conns} connection(s) the full-size segments of a response left at once and were \
         acknowledged, the receive window was open and nothing was lost, and the short tail followed \
         only {typical:.0} ms (median) later. TCP held it, not the application: a socket with \
         TCP_CORK set sends only full segments and pushes a partial one when it is uncorked, or \
         after a 200 ms ceiling (tcp(7)). The server corks its socket and does not uncork it at the \
         end of each response. {total:.0} ms in all.",
        holds = a.stalls,
        conns = a.connections,
    );
    let fix = format!(
        "At {ep}: clear TCP_CORK after writing each response (`setsockopt(fd, IPPROTO_TCP, \
         TCP_CORK, 0)`, then set it again for the next one), or drop the cork and pass MSG_MORE on \
         every write but the last; TCP_NODELAY alone does not release a corked tail. nginx does \
         this itself with `tcp_nopush on` (it uncorks at the end of the response)."
    );
    (
        explanation,
        fix,
        json!({"think_ms": typical, "rtt_ms": rtt, "where": place, "cause": "cork",
               "cork_holds": a.stalls,
               "before_response_ms": ms(before), "inside_response_ms": ms(inside)}),
    )
}

/// A server whose responses end only at its close, and which closes late.
fn close_words(s: &Said<'_>, before: i64, inside: i64) -> Words {
    let (a, typical, total, ep) = (s.a, s.typical, s.total, s.ep);
    let rtt = a.rtt_ns_min.map(ms);
    let close = ms(a.transfer_ns);
    let explanation = format!(
        "{ep} (server) sends responses whose end is the connection's close — no Content-Length, not \
         chunked (HTTP/1.0 style, RFC 9112 §6.3) — and closes {typical:.0} ms (median) after the last \
         byte: until its FIN arrives the client cannot know the response is complete, so every such \
         exchange waits for it. {occ} exchange(s) on {conns} connection(s), {close:.0} ms of waiting \
         for the close, {total:.0} ms of server time in all.",
        occ = a.occurrences,
        conns = a.connections,
    );
    let fix = format!(
        "At {ep}: frame the responses — send `Content-Length` (or `Transfer-Encoding: chunked` when \
         the length is not known in advance), which also lets the connection be kept alive; or close \
         the connection (shutdown) as soon as the last byte is written instead of lingering \
         (a worker that closes only when it is recycled, a proxy waiting for its upstream's close)."
    );
    (
        explanation,
        fix,
        json!({"think_ms": typical, "rtt_ms": rtt, "where": "close_delimited",
               "close_wait_ms": close,
               "before_response_ms": ms(before), "inside_response_ms": ms(inside)}),
    )
}

/// A client that opens connections ahead of its requests (some carried
/// none at all): the idle before a first request is a pre-connect's, and no
/// request waited on it.
fn preconnected(a: &crate::Aggregate) -> bool {
    let before = a.total_ns - a.inside_ns;
    a.preconnects > 0 && before.saturating_mul(2) >= a.total_ns
}

/// Pre-connects are reported apart (nobody waited), the rest by share.
pub(crate) fn client_standing(a: &crate::Aggregate) -> rule::Standing {
    if preconnected(a) {
        rule::Standing::Minor
    } else {
        rule::Standing::ByShare
    }
}

fn preconnect_words(s: &Said<'_>, before: i64, inside: i64) -> Words {
    let (a, typical, total, ep) = (s.a, s.typical, s.total, s.ep);
    let explanation = format!(
        "The client {ep} opens connections ahead of its requests: {n} of its connections completed \
         a handshake and never carried a request at all, and on {occ} others the first request came \
         {typical:.0} ms (median) after the handshake, {total:.0} ms in all. That is a browser's \
         pre-connect or a pool opening connections before use: no request waited on that idle, so \
         it is nobody's loss (the requests' own time starts when they are sent).",
        n = a.preconnects,
        occ = a.occurrences,
    );
    let fix =
        "Nothing to fix for latency. Idle pre-connected connections cost the server a socket \
               each until they are used or closed; a pool can open fewer."
            .to_string();
    (
        explanation,
        fix,
        json!({"idle_ms": typical, "where": "before_request", "cause": "preconnect",
               "preconnects": a.preconnects,
               "before_request_ms": ms(before), "inside_request_ms": ms(inside)}),
    )
}

/// A client waiting for a `100 Continue` the server never sends.
fn expect_words(s: &Said<'_>, place: &str, before: i64, inside: i64) -> Words {
    let (a, typical, total, ep) = (s.a, s.typical, s.total, s.ep);
    let server = s.server;
    let explanation = format!(
        "The client {ep} sent its request headers with `Expect: 100-continue` and held the body back \
         until the server said `100 Continue` (RFC 9110 §10.1.1); the server {server} never said it, so \
         the client waited out its own timeout — {typical:.0} ms (median; curl waits 1 s) — before \
         sending the body anyway. {n} request(s), {total:.0} ms in all. The time is the client's \
         choice to wait, made long by a server that does not answer the expectation.",
        n = a.flagged,
    );
    let fix = format!(
        "Either side: the client can stop asking for small bodies (curl `-H 'Expect:'`, or a shorter \
         `--expect100-timeout`; libcurl adds the header itself to POSTs over 1 MB), or the server \
         ({server}) can answer `100 Continue` (most do; a handler reading the body does it in some \
         frameworks, and proxies should pass it on)."
    );
    (
        explanation,
        fix,
        json!({"idle_ms": typical, "where": place, "cause": "expect_100_continue",
               "before_request_ms": ms(before), "inside_request_ms": ms(inside)}),
    )
}

/// The words of a `client_delay` finding: why, the fix, its details.
pub(crate) fn client_words(s: &Said<'_>) -> Words {
    let (a, typical, total, ep) = (s.a, s.typical, s.total, s.ep);
    let (before, inside) = (a.total_ns - a.inside_ns, a.inside_ns);
    let place = where_(before, inside, "request");
    if a.flagged * 2 > a.occurrences {
        return expect_words(s, place, before, inside);
    }
    if preconnected(a) {
        return preconnect_words(s, before, inside);
    }
    let explanation = match place {
        "inside_request" => format!(
            "The client {ep} paused inside its request{s}, {typical:.1} ms (median), {occ} time(s), \
             {total:.0} ms in all: the first part of the request left and was acknowledged, and the \
             rest followed only later, with nothing unacknowledged, the server's window open and nothing \
             lost — TCP held nothing back, the client application had not written it yet (a body still \
             being produced or read from disk, a request streamed as it is built).",
            s = if a.occurrences > 1 { "s" } else { "" },
            occ = a.occurrences,
        ),
        _ => format!(
            "The client {ep} completed the handshake and then waited {typical:.1} ms (median) before \
             sending its request{inside}, {occ} time(s), {total:.0} ms in all. Nothing on the network or \
             the server delays this: the client connects first and prepares its request afterwards (DNS, \
             TLS setup in the application, building the request, a connection pool opening connections \
             ahead of use).",
            inside = if inside > 0 {
                format!(" (and paused {:.0} ms in all inside requests)", ms(inside))
            } else {
                String::new()
            },
            occ = a.occurrences,
        ),
    };
    let fix = if place == "inside_request" {
        format!(
            "Look at the client {ep}: what it does between writing the first part of a request and the \
             rest. Build the whole request (headers and body) before sending it, or make the step that \
             produces the body faster."
        )
    } else {
        format!(
            "Look at the client {ep}: what it does between connect() and its first write. Prepare the \
             request before connecting, or reuse kept-alive connections."
        )
    };
    (
        explanation,
        fix,
        json!({"idle_ms": typical, "where": place,
               "before_request_ms": ms(before), "inside_request_ms": ms(inside)}),
    )
}

/// The words of a `network_latency` finding: why, the fix, its details.
/// One handshake per one or two exchanges: connection reuse saves a third
/// to a half of the round trips.
fn new_connections(a: &crate::Aggregate) -> bool {
    a.handshakes > 0 && a.handshakes * 2 >= a.count
}

/// What the fix of a `network_latency` finding removes: the handshakes
/// (connection reuse), or every round trip (a server next to the client: a
/// bound no fix reaches).
pub(crate) fn latency_fix_choice(a: &crate::Aggregate) -> usize {
    usize::from(!new_connections(a))
}

pub(crate) fn latency_words(s: &Said<'_>) -> Words {
    let (a, total, share) = (s.a, s.total, s.share);
    let rtt = a.rtt_ns_min.map(ms).unwrap_or(0.0);
    let new_connections = new_connections(a);
    let cause = if new_connections {
        "new_connections"
    } else {
        "round_trips"
    };
    let trips = a.handshakes + a.stalls + a.requests + a.flights;
    let mut which = Vec::new();
    if a.handshakes > 0 {
        which.push(format!("{} handshake(s)", a.handshakes));
    }
    if a.stalls > 0 {
        which.push(format!("{} TLS handshake round trip(s)", a.stalls));
    }
    if a.requests > 0 {
        which.push(format!("{} request/response", a.requests));
    }
    if a.flights > 0 {
        which.push(format!(
            "{} further flight(s) of responses larger than the congestion window",
            a.flights
        ));
    }
    let is = if a.flagged > 0 { "is at most" } else { "is" };
    let bound = if a.flagged > 0 {
        " (no handshake or undelayed ACK captured: the quickest the server ever acknowledged the \
         client's data, beyond a router)"
    } else {
        ""
    };
    let explanation = format!(
        "The round trip between the endpoints {is} {rtt:.1} ms{bound}, and round trips make up most of the \
         exchanges' time: {trips} on {conns} connection(s) ({which}), {total:.0} ms in all ({pct:.0}% of \
         the time {n} exchanges took).{setup} The server answers promptly; each request simply waits \
         for the path.",
        which = which.join(", "),
        conns = a.connections,
        n = a.count,
        pct = share * 100.0,
        setup = if new_connections {
            format!(
                " Most exchanges open a connection of their own, so each pays the TCP handshake's round \
                 trip ({:.0} ms in all){} before its request can leave{}.",
                ms(a.handshake_ns),
                if a.stalls > 0 {
                    format!(" and its TLS handshake's ({:.0} ms)", ms(a.transfer_ns))
                } else {
                    String::new()
                },
                if a.flights > 0 {
                    ", and starts cold: its congestion window begins at the initial 10 segments \
                     and doubles per round trip (slow start, RFC 5681), so a response larger than \
                     that comes in flights a round trip apart"
                } else {
                    ""
                }
            )
        } else {
            String::new()
        },
    );
    let fix = if new_connections {
        "Reuse connections: HTTP keep-alive and a connection pool in the client (curl: one invocation \
         for several URLs, or `--keepalive`; libraries: a shared session/client object; nginx as a \
         proxy: `keepalive` in the upstream block), so only the first request pays the handshake. Then \
         fewer round trips or shorter ones: batch or multiplex requests (HTTP/2), move the client and \
         server closer (region, CDN, cache), check the route (`tcpdoctor trace`)."
            .to_string()
    } else {
        "Fewer round trips or shorter ones: batch requests or pipeline them (HTTP/2 multiplexing), keep \
         connections alive (no new handshake per request), move the client and server closer (region, \
         CDN, cache), and check the route (`tcpdoctor trace`, traceroute --tcp) for detours."
            .to_string()
    };
    (
        explanation,
        fix,
        json!({"rtt_ms": rtt, "round_trips": trips, "handshake_round_trips": a.handshakes,
               "request_round_trips": a.requests, "flight_round_trips": a.flights,
               "handshake_ms": ms(a.handshake_ns), "exchanges": a.count, "cause": cause,
               "tls_round_trips": a.stalls, "tls_handshake_ms": ms(a.transfer_ns),
               "rtt_is_bound": a.flagged > 0}),
    )
}

/// What one occurrence measured.
#[derive(Debug, Clone)]
pub struct Timing {
    pub rtt_ns: Option<i64>,
    /// Of the delay, the pauses inside the message (the rest was before it).
    pub inside_ns: i64,
    /// Of those pauses, partial tails held for the cork's ceiling (~200 ms).
    pub cork_holds: u32,
    /// Of the delay, the wait for a close-delimited response's FIN.
    pub close_ns: i64,
    /// A client pause inside a request that asked for `100 Continue` and
    /// got none: the wait for it.
    pub expect: bool,
}

/// What one occurrence measured.
#[derive(Debug, Clone)]
pub struct Latency {
    pub rtt_ns: i64,
    /// Exchanges that opened their connection (a handshake round trip each), and its time.
    pub handshakes: u64,
    pub handshake_ns: i64,
    /// Exchanges whose wait for the response held (at least half) a round trip.
    pub requests: u64,
    /// Further flights of responses larger than the congestion window.
    pub flights: u64,
    /// TLS handshake round trips, and their time on the network.
    pub tls_rounds: u64,
    pub tls_ns: i64,
    pub exchanges: u64,
    /// The round trip is a bound ([`rule::round_trip`]), not a measurement.
    pub bounded: bool,
}

impl rule::Fold for Timing {
    fn fold(self, a: &mut crate::Aggregate) {
        a.rtt_ns_min = rule::min_opt(a.rtt_ns_min, self.rtt_ns);
        a.inside_ns += self.inside_ns;
        a.stalls += u64::from(self.cork_holds);
        a.transfer_ns += self.close_ns;
        a.flagged += u64::from(self.expect);
    }
}

impl rule::Fold for Latency {
    fn fold(self, a: &mut crate::Aggregate) {
        a.stalls += self.tls_rounds;
        a.transfer_ns += self.tls_ns;
        a.rtt_ns_min = rule::min_opt(a.rtt_ns_min, Some(self.rtt_ns));
        a.count += self.exchanges;
        a.handshakes += self.handshakes;
        a.handshake_ns += self.handshake_ns;
        a.requests += self.requests;
        a.flights += self.flights;
        // Connections whose round trip is a bound.
        a.flagged += u64::from(self.bounded);
    }
}

impl LatencyState {
    fn client(&self, cx: &mut rule::ExchangeCx<'_>, conn: &Connection, ex: &Exchange, idle: i64) {
        let c = Dir::ClientToServer.index();
        let (inside, longest) = (cx.inside[c], cx.longest[c]);
        if let Some(o) = client_delay(conn, ex, inside, longest, cx.expect_unanswered, idle) {
            cx.out.push(o);
        }
    }
}

impl rule::Rule for LatencyState {
    fn on_exchange(&mut self, cx: &mut rule::ExchangeCx<'_>, conn: &Connection, ex: &Exchange) {
        // A complete exchange's, once its budget tells what was claimed.
        if !ex.is_complete() {
            self.client(cx, conn, ex, i64::MAX);
        }
    }

    fn on_budget(&mut self, cx: &mut rule::ExchangeCx<'_>, conn: &Connection, ex: &Exchange) {
        // Only a connection's first exchange holds time before its request.
        let budgeted = ex.index == 0 && ex.setup.is_some() && cx.split.iter().any(|&p| p != 0);
        let idle = if budgeted {
            cx.split[index(Part::ClientIdle)]
        } else {
            i64::MAX
        };
        self.client(cx, conn, ex, idle);
        let s = Dir::ServerToClient.index();
        if let Some(o) = server_delay(
            conn,
            ex,
            &cx.split,
            cx.inside[s],
            cx.longest[s],
            cx.cork_holds[s],
            cx.close_wait,
        ) {
            cx.out.push(o);
        }
        let tls = cx
            .tls
            .map(|t| (t.rounds, super::tls::network_ns(&cx.split, &t)));
        LatencyState::on_exchange(self, conn, ex, &cx.split, tls, cx.duration_ns);
    }

    fn on_close(&mut self, cx: &mut rule::CloseCx<'_>, conn: &Connection) {
        let congestion = cx.out.iter().any(|o| o.kind == Kind::CongestionLimited);
        LatencyState::on_close(self, conn, congestion, cx.restart_lost_ns, cx.out);
    }
}

/// The verdict's sentence of a `server_delay` finding.
pub(crate) fn server_cause(c: &rule::Cause<'_>) -> String {
    let (ep, role, typ) = (c.ep, c.role, &c.typ);
    if c.str("cause") == Some("cork") {
        return format!(
            "{ep} ({role}) leaves its socket corked (TCP_CORK): the partial tail of each response \
             waits ~{typ}, the kernel's 200 ms ceiling"
        );
    }
    if c.str("where") == Some("inside_response") {
        return format!(
            "{ep} ({role}) sends the start of each response (the headers) at once and the rest ~{typ} \
             later, with nothing left to acknowledge (application time inside the response)"
        );
    }
    format!("{ep} ({role}) takes ~{typ} to start each response after the request has arrived (application time)")
}

/// The verdict's sentence of a `client_delay` finding.
pub(crate) fn client_cause(c: &rule::Cause<'_>) -> String {
    format!(
        "the client {} waits ~{} before sending what it controls",
        c.ep, c.typ
    )
}

/// The verdict's sentence of a `network_latency` finding.
pub(crate) fn latency_cause(c: &rule::Cause<'_>) -> String {
    if c.str("cause") == Some("new_connections") {
        return format!(
            "most requests open a connection of their own and wait for two round trips (the handshake's \
             and their own), ~{} per connection",
            c.typ
        );
    }
    format!("the round trip itself is ~{} of each exchange", c.typ)
}

/// Where an endpoint's own time was: before its message, inside it, or both
/// (each at least a tenth).
pub(crate) fn where_(before: i64, inside: i64, message: &str) -> &'static str {
    // Wide: a capture's timestamps may be anything.
    let (before, inside) = (i128::from(before), i128::from(inside));
    let total = (before + inside).max(1);
    match (before * 10 >= total, inside * 10 >= total, message) {
        (true, true, "response") => "before_and_inside_response",
        (false, true, "response") => "inside_response",
        (_, _, "response") => "before_response",
        (true, true, _) => "before_and_inside_request",
        (false, true, _) => "inside_request",
        _ => "before_request",
    }
}

#[cfg(test)]
mod tests {
    use super::where_;

    #[test]
    fn where_the_time_was_holds_for_any_timestamps() {
        // Found by fuzzing: sums of a hostile capture's gaps near i64::MAX.
        let huge = i64::MAX / 2;
        assert_eq!(where_(huge, huge, "response"), "before_and_inside_response");
        assert_eq!(where_(0, huge, "request"), "inside_request");
        assert_eq!(where_(huge, 1, "response"), "before_response");
        assert_eq!(where_(0, 0, "request"), "before_request");
    }
}
