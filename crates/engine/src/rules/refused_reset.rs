//! Connections refused or reset: requests that never got an answer.
//!
//! A SYN answered by an RST (RFC 9293 §3.10.7.1: nothing listens on the
//! port; or a firewall rule such as `iptables -j REJECT --reject-with
//! tcp-reset` answering for it) is a refused connection: the client's
//! `connect()` fails at once with ECONNREFUSED and its request never leaves.
//!
//! An RST in the middle of a connection while the client waits for a
//! response (its request sent, no response byte yet, or data of its own not
//! yet acknowledged) costs the client that request: it reads ECONNRESET. The
//! server sends one when its application aborts the connection (`SO_LINGER`
//! 0, a crash, `close()` with unread data, RFC 2525 §2.17) or when a request
//! arrives on a connection it has already closed (a keep-alive timeout
//! racing the client's next request). An RST whose IP TTL differs from the
//! other packets of the endpoint it claims to come from was sent by
//! something else on the path: a firewall, a load balancer or an intrusion
//! prevention system cutting the connection in that endpoint's name.
//!
//! Neither costs time in the usual sense — the failure is fast — so these
//! findings are reported whatever share of the time they take
//! ([`Kind::is_failure`]): a request that failed outranks a slow one.

use tcpdoctor_flow::{Connection, Dir, Mark, Segment};

use crate::rule::{self, Blame, Detail, Kind, Occurrence};
use crate::text::{Said, Words};

/// How a connection ended, for its summary: (`end`, `ended_by`).
///
/// `end` is `refused` (the SYN answered by an RST), `unanswered` (SYNs and
/// nothing back), `rst`, `fin` (both sides closed) or `open` (the capture
/// ended first). `ended_by` names who sent the first RST (for `rst` and
/// `refused`) or the first FIN (`fin`): `client`, `server`, or `network`
/// when the RST's TTL says it came from the path; `None` otherwise.
pub fn end_state(conn: &Connection) -> (&'static str, Option<&'static str>) {
    let (c, s) = (&conn.client, &conn.server);
    let hs = &conn.handshake;
    let first = |a: Option<Mark>, b: Option<Mark>| match (a, b) {
        (Some(x), Some(y)) if y.ts < x.ts => Dir::ServerToClient,
        (Some(_), _) => Dir::ClientToServer,
        _ => Dir::ServerToClient,
    };
    if c.rst.is_some() || s.rst.is_some() {
        let by = first(c.rst, s.rst);
        let who = if injected(conn, by) {
            "network"
        } else {
            rule::endpoint_of(conn, by).1
        };
        let end = if refused(conn) { "refused" } else { "rst" };
        return (end, Some(who));
    }
    if hs.syn_count > 0
        && hs.synack_count == 0
        && c.data_packets + s.data_packets == 0
        && s.packets == 0
    {
        return ("unanswered", None);
    }
    if c.fin.is_some() && s.fin.is_some() {
        let by = first(c.fin, s.fin);
        return ("fin", Some(rule::endpoint_of(conn, by).1));
    }
    ("open", None)
}

/// The SYN was answered by an RST and no SYN-ACK: the connection was refused.
pub fn refused(conn: &Connection) -> bool {
    let hs = &conn.handshake;
    hs.syn_count > 0
        && hs.synack_count == 0
        && conn.server.rst.is_some()
        && conn.client.data_packets + conn.server.data_packets == 0
}

/// The first RST sent in `dir`'s name came with another TTL than that
/// endpoint's other packets: something on the path sent it.
fn injected(conn: &Connection, dir: Dir) -> bool {
    let h = conn.half(dir);
    h.rst.is_some() && h.ttl != 0 && h.rst_ttl != 0 && h.rst_ttl != h.ttl && h.packets > 1
}

/// Per connection: whether an RST cut a request short.
#[derive(Debug, Default)]
pub struct ResetState {
    /// The first RST seen, who it was in the name of, and whether the
    /// client was then waiting for a response.
    rst: Option<(Mark, Dir)>,
    /// The request that waited, from its first byte; its size.
    waiting_since: Option<Mark>,
    waiting_bytes: u64,
}

impl ResetState {
    pub fn on_segment(&mut self, conn: &Connection, seg: &Segment<'_>) {
        if !seg.flags.rst() || self.rst.is_some() {
            return;
        }
        self.rst = Some((
            Mark {
                ts: seg.ts,
                frame: seg.frame,
            },
            seg.dir,
        ));
        // Waiting: a request with no response byte yet, or client data not
        // yet acknowledged (the server's ACK never came).
        if let Some(ex) = conn.current_exchange() {
            if ex.request_first.is_some() && ex.response_first.is_none() {
                self.waiting_since = ex.request_first;
                self.waiting_bytes = ex.request_bytes;
                return;
            }
        }
        // (Its FIN takes a sequence number: not a request.)
        let fin = u32::from(conn.client.fin.is_some());
        if conn.client.in_flight() > fin {
            self.waiting_since = conn
                .current_exchange()
                .and_then(|e| e.request_first)
                .or(Some(Mark {
                    ts: seg.ts,
                    frame: seg.frame,
                }));
            self.waiting_bytes = u64::from(conn.client.in_flight() - fin);
        }
    }
}

/// The occurrence of a refused connection, or of a reset that cost a request.
pub fn on_close(state: Option<&ResetState>, conn: &Connection, out: &mut Vec<Occurrence>) {
    if refused(conn) {
        let (Some(syn), Some(rst)) = (conn.handshake.first_syn, conn.server.rst) else {
            return;
        };
        out.push(Occurrence {
            kind: Kind::ConnectionRefused,
            culprit: Blame::Side(Dir::ServerToClient),
            delay_ns: rst.ts.since(syn.ts).max(0),
            frames: vec![syn.frame, rst.frame],
            notes: vec![
                (syn.frame, "SYN: the client asks to connect".to_string()),
                (
                    rst.frame,
                    "RST: refused, nothing accepts on this port".to_string(),
                ),
            ],
            ladder_from: Some(syn.frame),
            // A refused connection keeps no packets of its own (it is a
            // compact handshake): its two rows, from the connection.
            ladder: Some(refusal_ladder(conn, syn, rst)),
            span: None,
            detail: Detail::Failure(Failure {
                requests_lost: 1,
                rst_ttl: conn.server.rst_ttl,
                ttl: conn.server.ttl,
                request_bytes: 0,
                port: conn.server.addr.port(),
            }),
        });
        return;
    }
    let Some(st) = state else { return };
    let (Some((rst, dir)), Some(since)) = (st.rst, st.waiting_since) else {
        return;
    };
    let by_network = injected(conn, dir);
    // The client cutting its own request short is its choice, not a failure
    // done to it (its slowness, if any, is the other rules' business).
    if dir == Dir::ClientToServer && !by_network {
        return;
    }
    let culprit = if by_network {
        Blame::Network(Dir::ServerToClient)
    } else {
        Blame::Side(Dir::ServerToClient)
    };
    let h = conn.half(dir);
    out.push(Occurrence {
        kind: Kind::ConnectionReset,
        culprit,
        delay_ns: rst.ts.since(since.ts).max(0),
        frames: vec![since.frame, rst.frame],
        notes: vec![
            (since.frame, "request: waits for its response".to_string()),
            (
                rst.frame,
                if by_network {
                    format!(
                        "RST with TTL {} (the endpoint's packets: {}): sent by the path",
                        h.rst_ttl, h.ttl
                    )
                } else {
                    "RST: the connection is cut, the request lost".to_string()
                },
            ),
        ],
        ladder_from: Some(since.frame),
        ladder: None,
        span: None,
        detail: Detail::Failure(Failure {
            requests_lost: 1,
            rst_ttl: h.rst_ttl,
            ttl: h.ttl,
            request_bytes: st.waiting_bytes,
            port: conn.server.addr.port(),
        }),
    });
}

fn refusal_ladder(conn: &Connection, syn: Mark, rst: Mark) -> Vec<crate::model::LadderRow> {
    use crate::model::LadderRow;
    vec![
        LadderRow {
            frame: syn.frame,
            t_ms: 0.0,
            dir: "c>s",
            flags: "SYN".to_string(),
            seq: 0,
            ack: 0,
            len: 0,
            window: conn.client.window,
            note: Some("SYN: the client asks to connect".to_string()),
        },
        LadderRow {
            frame: rst.frame,
            t_ms: crate::round3(rst.ts.ms_since(syn.ts)),
            dir: "s>c",
            flags: "RST, ACK".to_string(),
            seq: 0,
            ack: 1,
            len: 0,
            window: 0,
            note: Some("RST: refused, nothing accepts on this port".to_string()),
        },
    ]
}

/// The explanation, fix and details of a finding of either kind.
pub(crate) fn words(s: &Said<'_>) -> Words {
    let a = s.a;
    let ep = &a.culprit.endpoint;
    let conns = a.connections;
    let typical = a.delays.quantile_ms(0.5);
    let (rst_ttl, ttl) = match a.first {
        Detail::Failure(Failure { rst_ttl, ttl, .. }) => (rst_ttl, ttl),
        _ => (0, 0),
    };
    let port = ep.rsplit(':').next().unwrap_or("PORT");
    let ports = a.ports.as_deref().filter(|p| p.distinct > 1);
    if let (Kind::ConnectionRefused, Some(ports)) = (a.kind, ports) {
        return refused_on_ports(a, ports, typical);
    }
    if a.kind == Kind::ConnectionRefused {
        let explanation = format!(
            "{conns} connection attempt(s) to {ep} were refused: each SYN was answered by an RST \
             (after {typical:.2} ms, median), so connect() failed with \"connection refused\" and \
             the request{s} never left the client. Nothing accepts connections on that port — the \
             server is not running, listens on another address or port — or a firewall rejects \
             them in its name (iptables `REJECT --reject-with tcp-reset`).",
            s = if conns == 1 { "" } else { "s" },
        );
        let fix = format!(
            "Start the server or point the client at the right address: on the server, `ss -ltn \
             'sport = :{port}'` shows whether anything listens on port {port} (and on which \
             address: 127.0.0.1 is not reachable from elsewhere); `iptables -S` / `nft list \
             ruleset` shows rules that reject."
        );
        let details = serde_json::json!({"requests_lost": a.count, "rst_ttl": rst_ttl});
        return (explanation, fix, details);
    }
    let by_path = a.culprit.role == "network";
    let who = if by_path {
        format!(
            "Something on the path between the endpoints sent the RST in the server's name: its \
             TTL ({rst_ttl}) differs from that of the server's own packets ({ttl}) — a firewall, \
             load balancer or intrusion prevention system cutting the connection."
        )
    } else {
        format!(
            "The server {ep} sent the RST itself (its TTL matches its other packets): its \
             application aborted the connection (SO_LINGER 0, a crash or a killed worker, \
             close() with the request unread, RFC 2525 §2.17), or the request arrived on a \
             connection it had already closed (its keep-alive timeout racing the client's next \
             request)."
        )
    };
    let explanation = format!(
        "{n} request(s) on {conns} connection(s) got no response: the connection was reset while \
         the client waited (for {typical:.1} ms, median), and the client read \"connection reset \
         by peer\". {who}",
        n = a.count,
    );
    let fix = if by_path {
        "Find the device that resets (capture on both sides of each hop: the RST appears where it \
         is sent) and its rule or idle timeout; TCP keep-alives shorter than its idle timeout \
         keep long-lived connections alive through it."
            .to_string()
    } else {
        format!(
            "Look at {ep}'s logs at the times of the resets (the evidence frames): crashes, \
             request-size limits, workers recycled mid-request. A keep-alive server should close \
             idle connections only after the client's own idle timeout, and clients retry \
             idempotent requests that fail on a reused connection."
        )
    };
    let details = serde_json::json!({
        "requests_lost": a.count,
        "by_path": by_path,
        "rst_ttl": rst_ttl,
        "endpoint_ttl": ttl,
    });
    (explanation, fix, details)
}

/// A refused connection or a reset that cost a request.
#[derive(Debug, Clone)]
pub struct Failure {
    pub requests_lost: u32,
    /// The RST's TTL and that of the endpoint's other packets (equal
    /// when it sent the RST itself).
    pub rst_ttl: u8,
    pub ttl: u8,
    /// Bytes of the request that got no answer.
    pub request_bytes: u64,
    /// The server's port.
    pub port: u16,
}

impl rule::Fold for Failure {
    fn fold(self, a: &mut crate::Aggregate) {
        if a.kind == Kind::ConnectionRefused {
            a.ports
                .get_or_insert_with(Default::default)
                .insert(self.port);
        }
        a.count += u64::from(self.requests_lost);
        a.flagged += u64::from(self.rst_ttl != self.ttl);
    }
}

impl rule::Rule for ResetState {
    #[inline]
    fn on_segment(&mut self, _: &mut rule::SegmentCx<'_>, conn: &Connection, seg: &Segment<'_>) {
        ResetState::on_segment(self, conn, seg);
    }

    fn on_close(&mut self, cx: &mut rule::CloseCx<'_>, conn: &Connection) {
        on_close(Some(self), conn, cx.out);
    }

    fn on_close_light(cx: &mut rule::CloseCx<'_>, conn: &Connection) {
        on_close(None, conn, cx.out);
    }
}

/// The verdict's sentence of a `connection_refused` or `connection_reset`
/// finding: what failed (a failure's share of the time is not the point).
pub(crate) fn cause(c: &rule::Cause<'_>) -> String {
    let (ep, role, kind) = (c.ep, c.role, c.f.kind);
    let n = c.num("requests_lost").unwrap_or(0.0) as u64;
    if kind == Kind::ConnectionRefused.name() {
        return format!(
            "connection refused by {ep}: {n} connection attempt(s) answered by an RST — nothing \
             accepts connections on that port, or a firewall rejects them ({kind})"
        );
    }
    let who = if role == "network" {
        format!(
            "by a device on the path in the name of {ep} (its RST's TTL differs from the server's)"
        )
    } else {
        format!("by {ep} ({role})")
    };
    format!("connections reset {who}: {n} request(s) got no response ({kind})")
}

/// A failed request is reported whatever time it took, before the delays.
pub(crate) fn standing(_: &crate::Aggregate) -> rule::Standing {
    rule::Standing::Major
}

/// The ports of one server that refused connections: refusals are one
/// finding per server address, so that a port scan is one finding, not one
/// per port.
#[derive(Default)]
pub(crate) struct Ports {
    /// One bit per port, made when a second port is seen.
    seen: Option<Box<[u64; 1024]>>,
    first: Option<u16>,
    /// The first few ports, in order.
    pub sample: Vec<u16>,
    pub distinct: u32,
}

/// Ports listed in a finding's words, at most.
const PORT_SAMPLE: usize = 10;

impl Ports {
    fn insert(&mut self, port: u16) {
        let first = *self.first.get_or_insert(port);
        if port == first && self.distinct > 0 {
            return;
        }
        if self.distinct == 0 {
            self.distinct = 1;
            self.sample.push(port);
            return;
        }
        let seen = self.seen.get_or_insert_with(|| {
            let mut bits = Box::new([0u64; 1024]);
            bits[usize::from(first) / 64] |= 1 << (first % 64);
            bits
        });
        let (word, bit) = (usize::from(port) / 64, 1u64 << (port % 64));
        if seen[word] & bit == 0 {
            seen[word] |= bit;
            self.distinct += 1;
            if self.sample.len() < PORT_SAMPLE {
                self.sample.push(port);
            }
        }
    }
}

/// Refusals on several ports of one server: a client trying ports (a scan,
/// or a wrong port list), not one service down.
fn refused_on_ports(a: &crate::Aggregate, ports: &Ports, typical: f64) -> Words {
    let ep = &a.culprit.endpoint;
    let ip = ep.trim_end_matches(":*");
    let conns = a.connections;
    let list: Vec<String> = ports.sample.iter().map(u16::to_string).collect();
    let more = if ports.distinct as usize > ports.sample.len() {
        ", …"
    } else {
        ""
    };
    let explanation = format!(
        "{conns} connection attempt(s) to {ip} on {n} different ports ({list}{more}) were refused: \
         each SYN was answered by an RST (after {typical:.2} ms, median). Nothing accepts \
         connections on those ports, or a firewall rejects them in the server's name. Many ports \
         from one client in a short time is a port scan (or a client walking a list of ports): \
         it costs the scanner, not the server's users.",
        n = ports.distinct,
        list = list.join(", "),
    );
    let fix = format!(
        "If the client should reach one of these ports, start its server or point the client at \
         the right port (`ss -ltn` on {ip} lists what listens). If it is a scan, it needs no \
         fix here; a firewall that drops rather than rejects makes it slower."
    );
    let details = serde_json::json!({
        "requests_lost": a.count,
        "rst_ttl": match a.first {
            Detail::Failure(Failure { rst_ttl, .. }) => rst_ttl,
            _ => 0,
        },
        "ports": ports.distinct,
        "ports_sample": ports.sample,
    });
    (explanation, fix, details)
}
