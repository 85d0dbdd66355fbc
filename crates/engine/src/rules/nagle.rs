//! Nagle's algorithm meeting a delayed ACK.
//!
//! The mechanism (RFC 896 Nagle, RFC 1122 §4.2.3.2 delayed ACK; Linux holds a
//! sub-MSS segment while an earlier sub-MSS segment is unacknowledged, the
//! "Minshall" variant):
//!
//! 1. sender S sends a small segment P1 (the response headers, say);
//! 2. S has more to send, but Nagle holds it until P1 is acknowledged;
//! 3. receiver R has nothing to send back yet, so it delays its ACK
//!    (~40 ms on Linux, ~200 ms on Windows, up to ~100 ms on macOS);
//! 4. the held data P2 leaves right after that ACK arrives.
//!
//! The rule looks for exactly that pattern, in terms that hold at any
//! vantage point: P2 continues P1's sequence, R sent no data in between,
//! R's ACK of P1 came later than the round trip to R explains by at least
//! [`MIN_ACK_WAIT_NS`], and P2 followed that ACK within the round trip to S
//! plus scheduling slack. The time lost is P1 → P2: without Nagle P2 would
//! have left right behind P1.

use tcpdoctor_flow::{Connection, Dir, Mark, SegKind, Segment, Seq, REACT_SLACK_NS};

use crate::budget::Part;
use crate::http::{classify, Software};
use crate::round3;
use crate::rule::{self, Blame, Detail, Kind, Occurrence};
use crate::text::{ms, Said, Words};
use serde_json::json;

/// An ACK that waited this long beyond the round trip was delayed on purpose.
/// Linux's minimum delayed-ACK timeout is 40 ms (TCP_DELACK_MIN); 15 ms leaves
/// room for hosts with shorter timers while staying far above scheduling noise.
pub const MIN_ACK_WAIT_NS: i64 = 15_000_000;

/// The most a tunnel's headers take from a path's segment size: IPsec in
/// tunnel mode, OpenVPN and WireGuard take 60-150 bytes, PPPoE 8, GRE 24.
const MAX_TUNNEL_OVERHEAD: u32 = 160;

#[derive(Debug, Clone, Copy)]
struct Pending {
    /// Relative sequence number just past P1.
    end: u32,
    at: Mark,
    len: u32,
    ack: Option<Mark>,
    peer_sent_data: bool,
}

#[derive(Debug, Default)]
pub struct NagleState {
    last: [Option<Pending>; 2],
    /// What each side's software is, from its first HTTP head (looked at once per side).
    software: [Option<Software>; 2],
    classified: [bool; 2],
    /// Relative sequence just past each side's last segment smaller than a
    /// full one (Linux's `snd_sml`), and the highest ACK of its data seen.
    small_end: [Option<u32>; 2],
    acked: [Option<u32>; 2],
    /// The side sent a small segment while an earlier small one was
    /// unacknowledged: Nagle is off on its socket, and holds nothing.
    nagle_off: [bool; 2],
}

impl NagleState {
    /// Returns a delayed-ACK wait this segment revealed: (the ACK sender's
    /// direction, its wait beyond the round trip).
    pub fn on_segment(
        &mut self,
        conn: &Connection,
        seg: &Segment<'_>,
        out: &mut Vec<Occurrence>,
    ) -> Option<(Dir, i64)> {
        let d = seg.dir;
        let mut delayed_ack = None;
        let r = d.reverse();
        // This segment is the receiver's side of the other direction's pending P1.
        if seg.flags.ack() && self.acked[r.index()].is_none_or(|a| Seq(seg.ack) > Seq(a)) {
            self.acked[r.index()] = Some(seg.ack);
        }
        if let Some(p) = self.last[r.index()].as_mut() {
            if seg.len > 0 && matches!(seg.kind, SegKind::NewData | SegKind::Retransmission) {
                p.peer_sent_data = true;
            }
            if seg.flags.ack() && p.ack.is_none() && Seq(seg.ack) >= Seq(p.end) {
                p.ack = Some(Mark {
                    ts: seg.ts,
                    frame: seg.frame,
                });
                // A pure ACK of one small segment, from a receiver with nothing
                // to send: how long it waited is its delayed-ACK timer.
                // Only with the round trip to it known: without, the wait
                // and the round trip are one figure (a 45 ms path would read
                // as Linux's 40 ms timer).
                let distance = conn.distance_to(d);
                if let (0, false, Some(distance)) = (seg.len, p.peer_sent_data, distance) {
                    let wait = seg.ts.since(p.at.ts) - distance;
                    if p.len < 2 * conn.smss(r) && wait >= MIN_ACK_WAIT_NS {
                        delayed_ack = Some((d, wait));
                    }
                }
            }
        }
        if seg.len == 0 {
            return delayed_ack;
        }
        match seg.kind {
            SegKind::NewData => {}
            SegKind::Retransmission => {
                self.last[d.index()] = None;
                return delayed_ack;
            }
            _ => return delayed_ack,
        }
        self.note_small(conn, seg);
        if !self.classified[d.index()] {
            if let Some(sw) = classify(seg.payload) {
                self.software[d.index()] = Some(sw);
                self.classified[d.index()] = true;
            }
        }
        // P2 candidates only: P1 acknowledged, continued in place, the peer silent.
        if let Some(p) = self.last[d.index()] {
            if p.ack.is_some()
                && p.end == seg.seq
                && !p.peer_sent_data
                && !self.nagle_off[d.index()]
            {
                if let Some(o) = check(conn, &p, seg, self.software[d.index()]) {
                    out.push(o);
                }
            }
        }
        self.last[d.index()] = Some(Pending {
            end: seg.seq.wrapping_add(seg.len),
            at: Mark {
                ts: seg.ts,
                frame: seg.frame,
            },
            len: seg.len,
            ack: None,
            peer_sent_data: false,
        });
        delayed_ack
    }
}

impl NagleState {
    /// New data smaller than a full segment, sent while the sender's last
    /// small one is not yet acknowledged (seen so at any capture point: the
    /// ACK, seen later, reached the sender later still), proves Nagle off
    /// on its socket: Linux holds such a segment until that ACK (the
    /// Minshall check). A segment carrying the FIN is sent regardless.
    #[inline]
    fn note_small(&mut self, conn: &Connection, seg: &Segment<'_>) {
        let i = seg.dir.index();
        // Only a segment of at most half the full size is surely small: a
        // full one can come out a little short of the announced MSS (options
        // beyond the timestamps, a tunnel), and without a SYN's MSS the full
        // size is the largest segment seen so far, which receive offload
        // can double.
        let small = seg.len <= conn.smss(seg.dir) / 2;
        if !small || seg.flags.fin() {
            return;
        }
        if let (Some(end), false) = (self.small_end[i], self.nagle_off[i]) {
            if self.acked[i].is_none_or(|a| Seq(a) < Seq(end)) {
                self.nagle_off[i] = true;
            }
        }
        self.small_end[i] = Some(seg.seq.wrapping_add(seg.len));
    }
}

/// Whether `d`'s segment size is known from a SYN (the peer's announced
/// MSS), not guessed from the segments seen.
fn mss_announced(conn: &Connection, d: Dir) -> bool {
    conn.half(d.reverse()).mss.is_some_and(|m| m > 0)
}

#[cold]
#[inline(never)]
fn check(
    conn: &Connection,
    p: &Pending,
    seg: &Segment<'_>,
    software: Option<Software>,
) -> Option<Occurrence> {
    let d = seg.dir;
    let ack = p.ack?;
    if p.end != seg.seq || p.peer_sent_data {
        return None;
    }
    let mss = conn.smss(d);
    // Nagle only holds data behind a segment smaller than the MSS. A tunnel
    // on the way (a VPN, PPPoE, GRE) can lower the sender's segment below
    // what the SYN announced: P1 within such an overhead of the MSS, with
    // the data after it an exact multiple of P1 (segments of P1's size,
    // merged by the capturing host's receive offload), was a full segment.
    let tunnel_full = mss_announced(conn, d)
        && p.len + MAX_TUNNEL_OVERHEAD >= mss
        && seg.len.is_multiple_of(p.len);
    if p.len.is_multiple_of(mss) || tunnel_full {
        return None;
    }
    let to_receiver = conn.distance_to(d.reverse());
    let to_sender = conn.distance_to(d).or(conn.path_rtt_ns()).unwrap_or(0);
    let ack_wait = ack.ts.since(p.at.ts) - to_receiver.unwrap_or(0);
    let after_ack = seg.ts.since(ack.ts);
    // How long the sender took to react to the ACK, without the trip to it and back.
    let reaction = (after_ack - to_sender).max(0);
    // Data that left the sender before the ACK could have reached it was
    // not released by that ACK.
    let before_ack_arrived = after_ack + REACT_SLACK_NS + to_sender / 4 < to_sender;
    if ack_wait < MIN_ACK_WAIT_NS
        || before_ack_arrived
        || reaction > REACT_SLACK_NS + to_sender / 4
        || reaction.saturating_mul(2) >= ack_wait
    {
        return None;
    }
    let delay = seg.ts.since(p.at.ts);
    let (sender, peer) = match d {
        Dir::ClientToServer => ("client", "server"),
        Dir::ServerToClient => ("server", "client"),
    };
    Some(Occurrence {
        kind: Kind::NagleDelayedAck,
        culprit: Blame::Side(d),
        delay_ns: delay,
        frames: vec![p.at.frame, ack.frame, seg.frame],
        notes: vec![
            (
                p.at.frame,
                format!("{sender} sends {} B, holds the rest (Nagle)", p.len),
            ),
            (
                ack.frame,
                format!(
                    "{peer} ACK after {:.1} ms (delayed ACK)",
                    ack.ts.ms_since(p.at.ts)
                ),
            ),
            (
                seg.frame,
                format!(
                    "held {} B leave {:.2} ms after the ACK",
                    seg.len,
                    after_ack as f64 / 1e6
                ),
            ),
        ],
        ladder_from: conn
            .current_exchange()
            .and_then(|e| e.start())
            .map(|m| m.frame),
        ladder: None,
        span: Some((Part::NagleDelayedAck, p.at.ts, seg.ts)),
        detail: Detail::Nagle(Nagle {
            ack_wait_ns: ack_wait,
            after_ack_ns: after_ack,
            small_len: p.len,
            held_len: seg.len,
            software,
            rtt_ns: conn.path_rtt_ns(),
        }),
    })
}

/// The words of a `nagle_delayed_ack` finding: why, the fix, its details.
pub(crate) fn words(s: &Said<'_>) -> Words {
    let (a, typical, total, ep, role, peer) = (s.a, s.typical, s.total, s.ep, s.role, s.peer);
    let Detail::Nagle(Nagle {
        small_len,
        software,
        ..
    }) = &a.first
    else {
        return crate::text::no_words();
    };
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
    let fix = nagle_fix(ep, role, *software);
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

/// What one occurrence measured.
#[derive(Debug, Clone)]
pub struct Nagle {
    /// The peer's ACK wait beyond the round trip: its delayed-ACK timer.
    pub ack_wait_ns: i64,
    /// From the ACK to the held data at the capture point.
    pub after_ack_ns: i64,
    pub small_len: u32,
    pub held_len: u32,
    pub software: Option<Software>,
    pub rtt_ns: Option<i64>,
}

impl rule::Fold for Nagle {
    fn fold(self, a: &mut crate::Aggregate) {
        a.ack_wait.record(self.ack_wait_ns);
        a.after_ack.record(self.after_ack_ns);
        a.rtt_ns_min = rule::min_opt(a.rtt_ns_min, self.rtt_ns);
    }
}

impl rule::Rule for NagleState {
    #[inline]
    fn on_segment(&mut self, cx: &mut rule::SegmentCx<'_>, conn: &Connection, seg: &Segment<'_>) {
        cx.delayed_ack = NagleState::on_segment(self, conn, seg, cx.out);
    }
}

/// The verdict's sentence of a `nagle_delayed_ack` finding.
pub(crate) fn cause(c: &rule::Cause<'_>) -> String {
    let what = if c.role == "server" {
        "response"
    } else {
        "request"
    };
    format!(
        "{} wait ~{} for a delayed ACK because {} ({}) sends each {what} in two segments with Nagle on",
        c.of_exchanges, c.typ, c.ep, c.role
    )
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

pub(crate) fn nagle_fix(ep: &str, role: &str, software: Option<Software>) -> String {
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

pub(crate) fn software_name(s: Software) -> &'static str {
    match s {
        Software::Nginx => "nginx",
        Software::JdkHttpServer => "jdk-httpserver",
        Software::OtherHttpServer => "http-server",
        Software::HttpClient => "http-client",
    }
}
