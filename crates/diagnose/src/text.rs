//! Turning aggregates into findings a person can act on, and connections into summaries.

use std::net::SocketAddr;

use serde_json::json;
use tcpdoctor_flow::{Connection, Exchange, Mark};

use crate::budget::{Part, Split};
use crate::http::Software;
use crate::model::*;
use crate::rules::{Detail, Kind};
use crate::{round3, Aggregate, Heavy};

/// A window reopened this many round trips (and ms) after it filled, with
/// throughput this many times below rwnd/RTT, is paced by its reader.
const SLOW_READER_RTTS: f64 = 4.0;
const SLOW_READER_MIN_MS: f64 = 10.0;

fn ms(ns: i64) -> f64 {
    round3(ns as f64 / 1e6)
}

/// What an observed delayed-ACK wait matches.
pub fn delayed_ack_os(wait_ms: f64) -> &'static str {
    match wait_ms {
        w if (30.0..=70.0).contains(&w) => "Linux (40 ms minimum delayed-ACK timer)",
        w if (85.0..=125.0).contains(&w) => "macOS (~100 ms delayed-ACK timer)",
        w if (170.0..=230.0).contains(&w) => "Windows (200 ms delayed-ACK timer)",
        _ => "an unusual delayed-ACK timer",
    }
}

fn human_bytes(b: f64) -> String {
    if b >= 1e6 {
        format!("{:.2} MB", b / 1e6)
    } else if b >= 1e3 {
        format!("{:.1} KB", b / 1e3)
    } else {
        format!("{b:.0} B")
    }
}

fn human_rate(bytes_per_s: f64) -> String {
    let bits = bytes_per_s * 8.0;
    if bits >= 1e9 {
        format!("{:.2} Gbit/s", bits / 1e9)
    } else if bits >= 1e6 {
        format!("{:.2} Mbit/s", bits / 1e6)
    } else {
        format!("{:.0} kbit/s", bits / 1e3)
    }
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

pub(crate) fn finding(a: Aggregate, denominator_ns: f64) -> Finding {
    let typical = round3(a.delays.quantile_ms(0.5));
    let total = ms(a.total_ns);
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
    let (explanation, fix, details) = match (a.kind, &a.first) {
        (
            Kind::NagleDelayedAck,
            Detail::Nagle {
                small_len,
                software,
                ..
            },
        ) => {
            let wait = round3(a.ack_wait.quantile_ms(0.5));
            let after = round3(a.after_ack.quantile_ms(0.5));
            let rtt = a.rtt_ns_min.map(ms);
            let what = if role == "server" {
                "response"
            } else {
                "request"
            };
            let rtt_text = rtt.map_or("unknown".to_string(), |r| format!("{r:.2} ms"));
            let explanation = format!(
                "{ep} ({role}) sends each {what} in two parts: a small segment ({small_len} B), then the rest only after the \
                 {peer} acknowledges it. Nagle's algorithm (RFC 896) is on at {ep}: it holds back a segment smaller than \
                 the MSS while an earlier small one is unacknowledged. The {peer} has nothing to send yet, so it delays \
                 its ACK (RFC 1122 §4.2.3.2): the ACK waits {wait:.1} ms beyond the round trip ({rtt_text}), which matches \
                 {timer}, and the held data leaves {after:.2} ms after it. This happened {occ} times on {conns} connection(s), \
                 {typical:.1} ms each, {total:.0} ms in all. The first {what} on a connection is usually spared: a new Linux \
                 connection starts in quick-ACK mode.",
                timer = delayed_ack_os(wait),
                occ = a.occurrences,
                conns = a.connections,
            );
            let fix = nagle_fix(&ep, role, *software);
            let details = json!({
                "ack_delay_ms": wait,
                "delayed_ack_timer": delayed_ack_os(wait),
                "held_after_ack_ms": after,
                "small_segment_bytes": small_len,
                "rtt_ms": rtt,
                "software": software.map(software_name),
            });
            (explanation, fix, details)
        }
        (
            Kind::ReceiveWindowLimited,
            Detail::Window {
                mss,
                receive_buffer_hint,
                ..
            },
        ) => {
            let window = a.window_sum.checked_div(a.stalls).unwrap_or(0) as f64;
            let mss = f64::from(*mss);
            let rtt = a.rtt_ns_min.map(ms);
            let ceiling = rtt.filter(|r| *r > 0.0).map(|r| window / (r / 1e3));
            let transfer_s = a.transfer_ns as f64 / 1e9;
            let tput = if transfer_s > 0.0 {
                a.bytes as f64 / transfer_s
            } else {
                0.0
            };
            let at_window = if a.transfer_ns > 0 {
                round3(a.total_ns as f64 / a.transfer_ns as f64)
            } else {
                0.0
            };
            // The window explains the throughput only when each stall lasts
            // about a round trip (throughput ≈ rwnd/RTT). A window that
            // reopens far later than the round trip is reopened by the
            // receiving application reading, slowly.
            let stall_ms = ms(a.total_ns / a.stalls.max(1) as i64);
            let slow_reader = matches!((rtt, ceiling), (Some(r), Some(c))
                if stall_ms >= SLOW_READER_RTTS * r && stall_ms >= SLOW_READER_MIN_MS
                    && tput * SLOW_READER_RTTS < c);
            let cause = if slow_reader {
                Some("slow_reader")
            } else {
                *receive_buffer_hint
            };
            let explanation = if slow_reader {
                format!(
                    "{ep} ({role}) reads slowly: the {peer} fills its receive window (about {w}, {wmss:.1} × MSS \
                     {mss:.0} B) and then waits until {ep} reopens it, every {stall_ms:.1} ms on average, {x:.0} times \
                     the round trip ({r:.2} ms) — {stalls} times, {pct:.0}% of the transfer. The window is not what \
                     limits the transfer: at rwnd/RTT it would carry {ceil}, and the transfer moved {bytes} in \
                     {secs:.2} s ({tput}). The receiver acknowledges at once but frees buffer space only as its \
                     application reads, a few KB at a time (a printer, a busy consumer, a reader blocked on \
                     something else).",
                    w = human_bytes(window),
                    wmss = window / mss.max(1.0),
                    x = stall_ms / rtt.unwrap_or(1.0).max(1e-3),
                    r = rtt.unwrap_or(0.0),
                    stalls = a.stalls,
                    pct = at_window * 100.0,
                    ceil = human_rate(ceiling.unwrap_or(0.0)),
                    bytes = human_bytes(a.bytes as f64),
                    secs = transfer_s,
                    tput = human_rate(tput),
                )
            } else {
                format!(
                "{ep} ({role}) advertises a receive window of about {w} ({wmss:.1} × MSS {mss:.0} B) while the {peer} has \
                 more to send: bytes in flight sat at that window for {pct:.0}% of the transfer, {stalls} times the \
                 sender stopped until an ACK opened the window. {ceil}The transfer moved {bytes} in {secs:.2} s \
                 ({tput}). A sender may not have more than the receiver's window unacknowledged (RFC 9293 §3.8.6), \
                 so each round trip moves one window, whatever the bandwidth.",
                w = human_bytes(window),
                wmss = window / mss.max(1.0),
                pct = at_window * 100.0,
                stalls = a.stalls,
                ceil = match (rtt, ceiling) {
                    (Some(r), Some(c)) => format!("With a round trip of {r:.1} ms that caps throughput at rwnd/RTT = {}. ", human_rate(c)),
                    _ => String::new(),
                },
                bytes = human_bytes(a.bytes as f64),
                secs = transfer_s,
                tput = human_rate(tput),
                )
            };
            let fix = if slow_reader {
                format!(
                    "The receiving application at {ep} reads too slowly: find what it waits on between reads (a \
                     device, disk, a lock, a busy thread, back-pressure from downstream) and read promptly — larger \
                     reads, a dedicated reader thread, or a queue in the application. A larger receive buffer \
                     would not raise the throughput (the window is already larger than the path needs at this \
                     pace); it only absorbs a longer burst."
                )
            } else {
                window_fix(&ep, *receive_buffer_hint, rtt)
            };
            let details = json!({
                "window_bytes": window.round(),
                "window_min_bytes": a.window_min,
                "window_mss": round3(window / mss.max(1.0)),
                "mss": mss,
                "rtt_ms": rtt,
                "ceiling_bytes_per_sec": ceiling.map(f64::round),
                "throughput_bytes_per_sec": tput.round(),
                "bytes": a.bytes,
                "transfer_ms": ms(a.transfer_ns),
                "stalls": a.stalls,
                "share_of_transfer": at_window,
                "reopen_interval_ms": stall_ms,
                "cause": cause,
            });
            (explanation, fix, details)
        }
        (Kind::SynRetransmit, Detail::Setup { vantage, .. }) => {
            let where_ = match *vantage {
                "server" => "This capture was taken at the server, which saw the SYN and did not answer it: \
                             the server (its listen backlog, a local firewall) dropped it."
                    .to_string(),
                "client" => "This capture was taken at the client: it cannot tell a SYN lost on the way from \
                             one the server ignored; a capture at the server can."
                    .to_string(),
                "between" => "This capture was taken between the endpoints: a SYN seen here and not answered \
                              was lost beyond this point or ignored by the server."
                    .to_string(),
                _ => "Where this capture was taken cannot be told from the packets (TTLs at their initial \
                      values, endpoints microseconds apart), so neither can whether the path lost the SYN or \
                      the server ignored it: if it was taken at the server, the server ignored it."
                    .to_string(),
            };
            let explanation = format!(
                "Connection setup to {ep} waited for a retransmitted SYN or SYN-ACK {occ} time(s), {typical:.0} ms \
                 each ({retries} retries in all): the first SYN or its SYN-ACK was lost or not answered, and the \
                 client's initial retransmission timeout (1 s on Linux, RFC 6298 2.1; 3 s on older stacks) had to \
                 expire. {unanswered}{where_}",
                occ = a.occurrences,
                retries = a.count,
                unanswered = if a.flagged > 0 {
                    format!("{} connection attempt(s) were never answered. ", a.flagged)
                } else {
                    String::new()
                },
            );
            let fix = format!(
                "Find where SYNs to {ep} are dropped: the server's listen backlog (`ss -lnt` Recv-Q against \
                 somaxconn, `nstat -az TcpExtListenDrops TcpExtListenOverflows`), SYN cookies or rate limits \
                 (iptables/nftables, `net.ipv4.tcp_max_syn_backlog`), or loss on the path (capture at both ends). \
                 Clients that cannot wait 1 s can connect in parallel or keep connections alive."
            );
            let details = json!({"retries": a.count, "unanswered": a.flagged});
            (explanation, fix, details)
        }
        (Kind::ServerDelay, _) => {
            let rtt = a.rtt_ns_min.map(ms);
            let rtt_text = rtt.map_or("unknown".to_string(), |r| format!("{r:.2} ms"));
            let (before, inside) = (a.total_ns - a.inside_ns, a.inside_ns);
            let place = where_(before, inside, "response");
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
        (Kind::ClientDelay, _) => {
            let (before, inside) = (a.total_ns - a.inside_ns, a.inside_ns);
            let place = where_(before, inside, "request");
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
        (Kind::NetworkLatency, _) => {
            let rtt = a.rtt_ns_min.map(ms).unwrap_or(0.0);
            // One handshake per one or two exchanges: connection reuse saves a
            // third to a half of the round trips.
            let new_connections = a.handshakes > 0 && a.handshakes * 2 >= a.count;
            let cause = if new_connections {
                "new_connections"
            } else {
                "round_trips"
            };
            let trips = a.handshakes + a.requests + a.flights;
            let mut which = Vec::new();
            if a.handshakes > 0 {
                which.push(format!("{} handshake(s)", a.handshakes));
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
            let explanation = format!(
                "The round trip between the endpoints is {rtt:.1} ms, and round trips make up most of the \
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
                         trip ({:.0} ms in all) before its request can leave.",
                        ms(a.handshake_ns)
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
                       "handshake_ms": ms(a.handshake_ns), "exchanges": a.count, "cause": cause}),
            )
        }
        (Kind::ZeroWindow, _) => {
            let explanation = format!(
                "{ep} ({role}) advertised a zero receive window {occ} time(s): its application stopped reading, the \
                 socket's receive buffer filled, and the {peer} had to stop sending and probe (RFC 9293 §3.8.6.1; \
                 {probes} probes seen) until the window reopened. Stalled {typical:.1} ms each (median), {total:.0} ms \
                 in all.{open}",
                occ = a.occurrences,
                probes = a.count,
                open = if a.flagged > 0 {
                    format!(" {} time(s) the window had not reopened when the capture ended.", a.flagged)
                } else {
                    String::new()
                },
            );
            let fix = format!(
                "The reader at {ep} is too slow: find why its application does not read (blocked on disk, a busy \
                 thread, back-pressure from elsewhere) and read more promptly; a larger receive buffer only delays \
                 the stall."
            );
            (
                explanation,
                fix,
                json!({"probes": a.count, "not_reopened": a.flagged}),
            )
        }
        (Kind::RetransmissionTimeout | Kind::PacketLoss, _) => {
            let rtt = a.rtt_ns_min.map(ms);
            let timeout = a.kind == Kind::RetransmissionTimeout;
            let how = if timeout {
                "only by the retransmission timer (RFC 6298: Linux waits at least 200 ms, then doubles the wait on \
                 every further loss of the same data), because too few duplicate ACKs came back to trigger fast \
                 retransmit — typically the last segments of a transfer, or everything in flight, were lost"
            } else {
                "by fast retransmit or SACK recovery (RFC 5681 §3.2, RFC 6675), within about a round trip"
            };
            let explanation = format!(
                "Packets between the endpoints were lost and recovered {how}. {occ} loss episode(s) on {conns} \
                 connection(s), {count} retransmissions, {typical:.1} ms lost each (median), {total:.0} ms in all \
                 (round trip {rtt}).{upstream}",
                occ = a.occurrences,
                conns = a.connections,
                count = a.count,
                rtt = rtt.map_or("unknown".to_string(), |r| format!("{r:.2} ms")),
                upstream = if a.flagged > 0 {
                    format!(
                        " In {} episode(s) the capture never saw the original segment: it was lost before the capture point.",
                        a.flagged
                    )
                } else {
                    String::new()
                },
            );
            let fix = if timeout {
                "Find the lossy hop (interface errors and drops: `ip -s link`, `nstat -az | grep -i -e retrans -e drop`, \
                 switch counters; capture at both ends to see on which side packets disappear). Tail losses recover \
                 faster with RACK-TLP (Linux default); a lower RTO minimum (`ip route … rto_min`) shortens the wait on \
                 low-latency paths."
                    .to_string()
            } else {
                "Find the lossy hop (`ip -s link` errors/drops, queue overflows on a router or the sender's qdisc, \
                 Wi-Fi); check that SACK is on (`net.ipv4.tcp_sack`) and consider BBR on lossy long paths."
                    .to_string()
            };
            (
                explanation,
                fix,
                json!({"retransmissions": a.count, "lost_before_capture": a.flagged, "rtt_ms": rtt}),
            )
        }
        (Kind::CongestionLimited, Detail::Congestion { max_in_flight, .. }) => {
            let rtt = a.rtt_ns_min.map(ms);
            let transfer_s = a.transfer_ns as f64 / 1e9;
            let tput = if transfer_s > 0.0 {
                a.bytes as f64 / transfer_s
            } else {
                0.0
            };
            let explanation = format!(
                "Transfers to or from {ep} were bound by the sender's congestion window, not by the receiver's \
                 window: the sender sent a flight, then waited for ACKs with room left in the receive window, \
                 {rounds} times ({total:.0} ms in all, {pct:.0}% of the transfers' time; at most {inflight} in \
                 flight; round trip {rtt}). That is slow start on a fresh connection, or the window regrowing after \
                 a loss (RFC 5681). The transfers moved {bytes} at {tput}.",
                rounds = a.count,
                pct = if a.transfer_ns > 0 { a.total_ns as f64 / a.transfer_ns as f64 * 100.0 } else { 0.0 },
                inflight = human_bytes(f64::from(*max_in_flight)),
                rtt = rtt.map_or("unknown".to_string(), |r| format!("{r:.1} ms")),
                bytes = human_bytes(a.bytes as f64),
                tput = human_rate(tput),
            );
            let fix = "Avoid paying slow start per transfer: keep connections alive and reuse them (HTTP keep-alive, \
                       connection pools); on Linux keep `net.ipv4.tcp_slow_start_after_idle=0` for long-lived idle \
                       connections; a larger initial window (`ip route … initcwnd 20`) helps short transfers on long \
                       paths. If losses shrink the window, fix the loss, and consider BBR \
                       (`net.ipv4.tcp_congestion_control=bbr`)."
                .to_string();
            (
                explanation,
                fix,
                json!({"rounds": a.count, "max_in_flight_bytes": max_in_flight, "rtt_ms": rtt,
                       "throughput_bytes_per_sec": tput.round()}),
            )
        }
        (
            Kind::SlowStartAfterIdle,
            Detail::Restart {
                restart_flight,
                grown_flight,
                mss,
                ..
            },
        ) => {
            let rtt = a.rtt_ns_min.map(ms);
            let idle = ms(a.transfer_ns / a.occurrences.max(1) as i64);
            let mss = (*mss).max(1);
            let explanation = format!(
                "{ep} ({role}) restarts from its initial window after each idle spell: {occ} message(s) on \
                 {conns} connection(s) began after {idle:.0} ms (typical) with nothing sent, longer than the \
                 retransmission timeout, and left in a first flight of {first} ({fs} segments) though the window \
                 had grown to about {grown} ({gs} segments) before; the rest followed in flights doubling once \
                 a round trip (slow start), with no loss and the receive window open. {rounds} waits between \
                 flights, {extra} of them more than the grown window needed: {typical:.1} ms lost per message, \
                 {total:.0} ms in all (round trip {rtt_text}). RFC 5681 §4.1 lets a sender idle longer than its \
                 RTO restart from the initial window; Linux does so when `net.ipv4.tcp_slow_start_after_idle` \
                 is 1 (the default) with Reno or CUBIC (BBR keeps its rate).",
                occ = a.occurrences,
                conns = a.connections,
                first = human_bytes(f64::from(*restart_flight)),
                fs = restart_flight.div_ceil(mss),
                grown = human_bytes(f64::from(*grown_flight)),
                gs = grown_flight.div_ceil(mss),
                rounds = a.stalls,
                extra = a.count,
                rtt_text = rtt.map_or("unknown".to_string(), |r| format!("{r:.1} ms")),
            );
            let fix = format!(
                "On the sender {ep}: `sysctl -w net.ipv4.tcp_slow_start_after_idle=0` (persist it in \
                 /etc/sysctl.d/), so a kept-alive connection keeps its window across idle spells. Per route \
                 instead, a larger initial window (`ip route change … initcwnd 20`) shortens each restart; BBR \
                 (`net.ipv4.tcp_congestion_control=bbr`) does not restart."
            );
            (
                explanation,
                fix,
                json!({"idle_ms": idle, "restart_flight_bytes": restart_flight,
                       "grown_flight_bytes": grown_flight, "flight_waits": a.stalls,
                       "extra_round_trips": a.count, "bytes": a.bytes, "rtt_ms": rtt}),
            )
        }
        (
            Kind::PathMtuBlackhole,
            Detail::Blackhole {
                big_len,
                small_len,
                seen,
                ..
            },
        ) => {
            let rtt = a.rtt_ns_min.map(ms);
            let how = if *seen {
                format!(
                    "the sender sent {big_len}-byte segments, retransmitted them {n} time(s) on its \
                     retransmission timer (backing off) and never had them acknowledged, then sent the same data \
                     in {small_len}-byte segments, which were",
                    n = a.count,
                )
            } else {
                format!(
                    "this capture, beyond the drop, never saw the full-size ({big_len}-byte) segments: the data \
                     arrived only after a stall, in {small_len}-byte segments — well below the MSS the receiver \
                     announced — which were"
                )
            };
            let explanation = format!(
                "Full-size packets towards the {peer} side of {ep} vanish on the path while small ones pass: {how} \
                 acknowledged at once. A link on the path has a smaller MTU and the ICMP \"fragmentation needed\" \
                 (RFC 1191; IPv6 \"packet too big\", RFC 8201) that should tell the sender never reaches it, \
                 usually because a firewall filters ICMP: a path MTU black hole. {occ} time(s) on {conns} \
                 connection(s), {typical:.0} ms each (median), {total:.0} ms in all (round trip {rtt_text}); \
                 without packetization-layer probing (RFC 4821) the connection never recovers.",
                peer = if peer == "endpoints" { "client" } else { peer },
                occ = a.occurrences,
                conns = a.connections,
                rtt_text = rtt.map_or("unknown".to_string(), |r| format!("{r:.2} ms")),
            );
            let fix = "Let ICMP type 3 code 4 (\"fragmentation needed\"; ICMPv6 type 2) through every firewall \
                       on the path, so path MTU discovery works. Where that cannot be done, clamp the MSS on the \
                       router in front of the small link (`iptables -t mangle -A FORWARD -p tcp --tcp-flags SYN,RST \
                       SYN -j TCPMSS --clamp-mss-to-pmtu`), or lower the MTU/MSS on the sender's route (`ip route \
                       change … mtu 1400` / `advmss`), and let Linux senders probe (`net.ipv4.tcp_mtu_probing=1`)."
                .to_string();
            (
                explanation,
                fix,
                json!({"lost_segment_bytes": big_len, "passing_segment_bytes": small_len,
                       "full_size_retransmissions": a.count, "retransmissions_seen": seen,
                       "rtt_ms": rtt}),
            )
        }
        (Kind::ListenQueueOverflow, _) => {
            let explanation = format!(
                "{ep} (server) did not accept() its connections fast enough: its accept queue (the listen \
                 backlog) was full. {syn}{acks}{occ} time(s) on {conns} connection(s), {typical:.0} ms each \
                 (median), {total:.0} ms in all. Linux drops a SYN while the queue is full (the client retries \
                 after 1 s, then 3 s) and ignores the final ACK of a handshake it cannot queue, and the request \
                 that follows it: the client thinks the connection open, the server acknowledges nothing until a \
                 retransmission arrives when there is room.",
                syn = if a.count > 0 {
                    format!("{} SYN(s) had to be sent again. ", a.count)
                } else {
                    String::new()
                },
                acks = if a.flagged > 0 {
                    format!(
                        "{} connection(s) had their handshake ACK and request ignored; those requests waited \
                         {:.0} ms in all before the server took them. ",
                        a.flagged,
                        ms(a.inside_ns)
                    )
                } else {
                    String::new()
                },
                occ = a.occurrences,
                conns = a.connections,
            );
            let fix = format!(
                "At {ep}: accept connections faster (a dedicated accept loop or thread, more workers, no \
                 blocking work before accept()), and raise the backlog: the `listen()` backlog argument (nginx \
                 `listen … backlog=4096`, Java `ServerSocket(port, backlog)`) and its ceiling \
                 `net.core.somaxconn` (and `net.ipv4.tcp_max_syn_backlog`). `nstat -az TcpExtListenOverflows \
                 TcpExtListenDrops` and `ss -lnt` (Recv-Q against Send-Q) show the queue overflowing."
            );
            (
                explanation,
                fix,
                json!({"syn_drops": a.count, "ack_drops": a.flagged,
                       "accept_wait_ms": ms(a.inside_ns)}),
            )
        }
        (Kind::ConnectionRefused | Kind::ConnectionReset, _) => {
            crate::rules::refused_reset::words(&a)
        }
        _ => (String::new(), String::new(), json!({})),
    };
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
    }
}

/// Where an endpoint's own time was: before its message, inside it, or both
/// (each at least a tenth).
fn where_(before: i64, inside: i64, message: &str) -> &'static str {
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

fn software_name(s: Software) -> &'static str {
    match s {
        Software::Nginx => "nginx",
        Software::JdkHttpServer => "jdk-httpserver",
        Software::OtherHttpServer => "http-server",
        Software::HttpClient => "http-client",
    }
}

fn nagle_fix(ep: &str, role: &str, software: Option<Software>) -> String {
    let tail = " (Shortening the peer's delayed ACK, e.g. TCP_QUICKACK, only hides it.)";
    if role == "client" {
        return format!(
            "The client at {ep} writes each request in two parts (headers, then body). Send the request in one write \
             (one buffer, or writev), or enable TCP_NODELAY on the client socket (setsockopt TCP_NODELAY; Java \
             socket.setTcpNoDelay(true)).{tail}"
        );
    }
    let specific = match software {
        Some(Software::Nginx) => format!(
            "This server is nginx: set `tcp_nodelay on;` (http, server or location block) for {ep}; it applies to \
             keep-alive connections. With `sendfile on`, `tcp_nopush on;` also sends headers and file together."
        ),
        Some(Software::JdkHttpServer) => format!(
            "This server is the JDK's com.sun.net.httpserver, which leaves Nagle on by default: start the JVM with \
             `-Dsun.net.httpserver.nodelay=true` for {ep}, or write headers and body in one call."
        ),
        _ => format!(
            "Enable TCP_NODELAY on the server socket at {ep} (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, 1); Java \
             setTcpNoDelay(true); nginx `tcp_nodelay on;`; JDK HttpServer `-Dsun.net.httpserver.nodelay=true`), or \
             write the response headers and body in one call (one buffer, or writev)."
        ),
    };
    format!("{specific}{tail}")
}

fn window_fix(ep: &str, hint: Option<&'static str>, rtt_ms: Option<f64>) -> String {
    let need = rtt_ms
        .map(|r| {
            format!(
                " To fill 100 Mbit/s over {r:.1} ms the window must reach {}.",
                human_bytes(100e6 / 8.0 * r / 1e3)
            )
        })
        .unwrap_or_default();
    if hint == Some("no_window_scaling") {
        return format!(
            "{ep} did not offer window scaling in its SYN, so its window cannot exceed 64 KB: enable \
             net.ipv4.tcp_window_scaling=1 there and check that no middlebox strips the option.{need}"
        );
    }
    format!(
        "Raise the receive buffer at {ep}. A small SO_RCVBUF fixes the window size (and on Linux turns receive-buffer \
         autotuning off): in nginx remove `rcvbuf=` from `listen` or raise it (e.g. `listen … rcvbuf=1m;`); in code \
         drop the setsockopt(SO_RCVBUF) or raise it. Check net.ipv4.tcp_rmem (its max bounds autotuning), \
         net.core.rmem_max (bounds SO_RCVBUF) and net.ipv4.tcp_window_scaling=1.{need}"
    )
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

fn exchange_summary(e: &Exchange, split: &Split) -> ExchangeSummary {
    let gap = |a: Option<Mark>, b: Option<Mark>| Some(ms(b?.ts.since(a?.ts)));
    ExchangeSummary {
        index: e.index,
        // Absolute here; made relative to the capture start in `Engine::finish`.
        start_ms: e.start().map_or(0.0, |m| m.ts.nanos() as f64 / 1e6),
        duration_ms: ms(e.duration_ns()),
        request_bytes: e.request_bytes,
        response_bytes: e.response_bytes,
        request_ms: gap(e.request_first, e.request_last),
        request_ack_ms: gap(e.request_last, e.request_acked),
        wait_ms: gap(e.request_last, e.response_first),
        response_ms: gap(e.response_first, e.response_last),
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

/// Where the capture was taken, for one connection, and from what.
///
/// A host sends with an initial TTL (64 Linux/macOS, 128 Windows, 255 some
/// routers): a TTL still at that value was captured on the sending host or
/// its link; a decremented one crossed a router first. When both TTLs are
/// initial (one L2 segment), the handshake tells: the side the capture point
/// is close to answers its half of the handshake fastest.
pub fn vantage(conn: &Connection) -> (&'static str, &'static str) {
    let initial = |t: u8| matches!(t, 32 | 64 | 128 | 255);
    let (c, s) = (conn.client.ttl, conn.server.ttl);
    match (c != 0 && initial(c), s != 0 && initial(s)) {
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
pub(crate) fn connection_summary(conn: &Connection, st: Option<&Heavy>) -> ConnectionSummary {
    let hs = &conn.handshake;
    let idle = Heavy::default();
    let st = st.unwrap_or(&idle);
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
        start_ms: conn.first.ts.nanos() as f64 / 1e6,
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
                .map(|(e, split)| exchange_summary(e, split))
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
