//! Path MTU black holes: full-size segments that never arrive.
//!
//! A sender learns that its packets are too large for a link on the path
//! from the router's ICMP "fragmentation needed" (RFC 1191; "packet too
//! big", RFC 8201, for IPv6). When a firewall filters that ICMP, every
//! full-size segment is dropped without a word while small ones (the
//! handshake, the request, ACKs) pass: the sender retransmits the full-size
//! segment on its retransmission timer, backing off, until it gives up or,
//! with packetization-layer probing (RFC 4821; Linux
//! `net.ipv4.tcp_mtu_probing=1` after three timeouts), falls back to smaller
//! segments that get through.
//!
//! Seen on the sender's side of the drop, the packets say it outright: the
//! same data retransmitted at full size at least twice, never acknowledged,
//! then sent again in smaller segments. The loss rule measures that episode
//! (a retransmission timeout); this rule names it. Seen beyond the drop, the
//! retransmissions are invisible: the data arrives late — at least a second
//! after the peer's last segment, longer than three timeouts backing off
//! from 200 ms — and in segments of one size well below the MSS the
//! receiver announced, three of them or more in a row. Only beyond: a
//! capture on the sender's host or its link (its packets' TTL still the
//! initial one, no router crossed) sees every full-size try it makes, so
//! late small data there is the sender's own pace, not a drop.

use tcpdoctor_flow::{Connection, Dir, Mark, SegKind, Segment};
use tcpdoctor_wire::Timestamp;

use crate::budget::Part;
use crate::rule::{self, Blame, Detail, Kind, Occurrence};
use crate::text::{ms, Said, Words};
use serde_json::json;

/// Full-size segments retransmitted this many times, unacknowledged.
const MIN_BIG_RETRANSMISSIONS: u32 = 2;
/// Without a fallback to smaller segments (Linux's default,
/// `tcp_mtu_probing=0`): the same full-size segment sent again this many
/// times, never acknowledged, while the peer kept sending.
const MIN_NOFALLBACK_RETRANSMISSIONS: u32 = 3;
/// A "smaller" segment is at least this much below the full size…
const SMALLER_BY: u32 = 64;
/// …and no smaller than the minimum MSS (RFC 9293 §3.7.1: 536)…
const MIN_PROBE_LEN: u32 = 536;
/// …nor larger than a jumbo frame's segment: what fits a smaller link. (On
/// loopback or with segmentation offload, segments of any size below a
/// 64 KB MSS are the stack's batching, not a fallback.)
const MAX_PROBE_LEN: u32 = 8960;
/// Beyond the drop: the delay before the smaller segments, and how many.
const MIN_UNSEEN_STALL_NS: i64 = 1_000_000_000;
const MIN_UNITS: u32 = 3;

#[derive(Debug, Clone, Copy)]
struct Candidate {
    /// The smaller size, the stall before it, its first segment.
    len: u32,
    from: Timestamp,
    first: Mark,
    units: u32,
}

#[derive(Debug, Default)]
struct DirState {
    /// Full-size retransmissions since the receiver last acknowledged new data.
    big: u32,
    big_len: u32,
    big_seq: u32,
    big_first: Option<Mark>,
    /// The peer's last segment.
    peer_last: Option<Timestamp>,
    candidate: Option<Candidate>,
    /// Seen on the sender's side: the loss rule's timeout episode in this
    /// direction is this black hole (its sizes).
    relabel: Option<(u32, u32, u32)>,
    /// Found beyond the drop: no more of them on this connection.
    reported: bool,
    /// This side is inside a message: it sent data and the peer has sent
    /// none since.
    mid_message: bool,
    /// The peer sent data since this side's last: this side owes an answer.
    owes: bool,
    /// The peer sent something while the full-size segment went unanswered:
    /// the path carries its packets (and this side's small ones it answers),
    /// it is not down.
    peer_alive: bool,
}

/// Per connection.
#[derive(Debug, Default)]
pub struct MtuState {
    dirs: [DirState; 2],
}

impl MtuState {
    /// Runs after the loss rule, whose occurrences in `out` it may rename.
    pub fn on_segment(&mut self, conn: &Connection, seg: &Segment<'_>, out: &mut Vec<Occurrence>) {
        let d = seg.dir;
        {
            let other = &mut self.dirs[d.reverse().index()];
            other.peer_last = Some(seg.ts);
            if seg.len > 0 {
                other.mid_message = false;
                other.owes = true;
            }
            if seg.acked > 0 {
                other.big = 0;
                other.big_first = None;
                other.peer_alive = false;
            } else if other.big > 0 {
                other.peer_alive = true;
            }
            if other.relabel.is_some() {
                relabel(other, d.reverse(), conn, out);
            }
        }
        if seg.len == 0 {
            return;
        }
        let st = &mut self.dirs[d.index()];
        let full = conn.smss(d);
        // Late data is a loss only if someone waited for it: the rest of a
        // message under way, or a server's answer to the client's. A client
        // starting a new message after a quiet spell (a person typing into
        // a form, a publisher's next message) kept nobody waiting.
        let awaited = st.mid_message || (d == Dir::ServerToClient && st.owes);
        st.mid_message = true;
        st.owes = false;
        match seg.kind {
            SegKind::Retransmission if seg.len + SMALLER_BY > full => {
                // Full size again: not (or no longer) a smaller size passing.
                st.candidate = None;
                if st.big == 0 || seg.seq != st.big_seq {
                    st.big = 0;
                    st.peer_alive = false;
                    st.big_seq = seg.seq;
                    st.big_first = Some(Mark {
                        ts: seg.ts,
                        frame: seg.frame,
                    });
                }
                st.big += 1;
                st.big_len = st.big_len.max(seg.len);
                return;
            }
            SegKind::Retransmission | SegKind::NewData => {}
            _ => return,
        }
        // On the sender's side: the same data, smaller, after full-size tries.
        if st.big >= MIN_BIG_RETRANSMISSIONS
            && seg.seq == st.big_seq
            && seg.len >= MIN_PROBE_LEN
            && seg.len + SMALLER_BY <= st.big_len
        {
            st.relabel = Some((st.big_len, seg.len, st.big));
            st.big = 0;
            relabel(st, d, conn, out);
            return;
        }
        if st.reported || seg.kind != SegKind::NewData {
            return;
        }
        if let Some(c) = st.candidate.as_mut() {
            if seg.len.is_multiple_of(c.len) {
                c.units += seg.len / c.len;
            } else if seg.len > c.len {
                st.candidate = None;
                return;
            } else {
                // The remainder that ends the data: the run is over.
                c.units += 1;
                if c.units < MIN_UNITS {
                    st.candidate = None;
                    return;
                }
            }
            if c.units >= MIN_UNITS {
                let c = *c;
                st.candidate = None;
                st.reported = true;
                out.push(unseen(conn, d, c));
                return;
            }
            return;
        }
        // Beyond the drop: late, and smaller than the receiver's MSS.
        let Some(from) = st.peer_last else {
            return;
        };
        if awaited
            && seg.ts.since(from) >= MIN_UNSEEN_STALL_NS
            // Captured before any router, the capture sees every full-size try.
            && crate::text::crossed_router(conn.half(d).ttl)
            && conn.half(d.reverse()).mss.is_some()
            && seg.len >= MIN_PROBE_LEN
            && seg.len <= MAX_PROBE_LEN
            && seg.len + SMALLER_BY <= full
        {
            st.candidate = Some(Candidate {
                len: seg.len,
                from,
                first: Mark {
                    ts: seg.ts,
                    frame: seg.frame,
                },
                units: 1,
            });
        }
    }

    /// Renames the loss rule's occurrences found at close: a fallback seen,
    /// or none — the same full-size segment sent again and again, never
    /// acknowledged, while the peer kept talking (a path that is down would
    /// carry nothing from it either).
    pub fn on_close(&mut self, conn: &Connection, out: &mut [Occurrence]) {
        for d in [Dir::ClientToServer, Dir::ServerToClient] {
            let st = &mut self.dirs[d.index()];
            // A segment no larger than any link must carry (IPv4's 576-byte
            // minimum MTU: 536 bytes of data) fits every path: its re-sends
            // are some other loss (a dead peer, a lost NAT mapping).
            let could_be_too_big = st.big_len >= MIN_PROBE_LEN + SMALLER_BY;
            if st.relabel.is_none()
                && st.big >= MIN_NOFALLBACK_RETRANSMISSIONS
                && st.peer_alive
                && could_be_too_big
            {
                st.relabel = Some((st.big_len, 0, st.big));
            }
            relabel(st, d, conn, out);
        }
    }
}

/// The black hole seen beyond the drop: an occurrence of its own.
fn unseen(conn: &Connection, d: Dir, c: Candidate) -> Occurrence {
    let rtt = conn.path_rtt_ns().unwrap_or(0);
    let delay = (c.first.ts.since(c.from) - rtt).max(0);
    Occurrence {
        kind: Kind::PathMtuBlackhole,
        culprit: Blame::Network(d),
        delay_ns: delay,
        frames: vec![c.first.frame],
        notes: vec![(
            c.first.frame,
            format!(
                "first data after {:.0} ms, in {} B segments",
                c.first.ts.since(c.from) as f64 / 1e6,
                c.len
            ),
        )],
        ladder_from: Some(c.first.frame),
        ladder: None,
        span: Some((Part::Retransmission, c.from, c.first.ts)),
        detail: Detail::Blackhole(Blackhole {
            big_len: conn.smss(d),
            small_len: c.len,
            retransmissions: 0,
            seen: false,
            rtt_ns: conn.path_rtt_ns(),
        }),
    }
}

/// Renames the loss rule's timeout episode in direction `d` as the black hole.
fn relabel(st: &mut DirState, d: Dir, conn: &Connection, out: &mut [Occurrence]) {
    let Some((big, small, tries)) = st.relabel else {
        return;
    };
    for o in out.iter_mut() {
        if o.kind == Kind::RetransmissionTimeout && o.culprit == Blame::Network(d) {
            o.kind = Kind::PathMtuBlackhole;
            o.detail = Detail::Blackhole(Blackhole {
                big_len: big,
                small_len: small,
                retransmissions: tries,
                seen: true,
                rtt_ns: conn.path_rtt_ns(),
            });
            st.relabel = None;
        }
    }
}

/// The words of a `path_mtu_blackhole` finding: why, the fix, its details.
pub(crate) fn words(s: &Said<'_>) -> Words {
    let (a, typical, total, ep, peer) = (s.a, s.typical, s.total, s.ep, s.peer);
    let Detail::Blackhole(Blackhole {
        big_len,
        small_len,
        seen,
        ..
    }) = &a.first
    else {
        return crate::text::no_words();
    };
    let rtt = a.rtt_ns_min.map(ms);
    let how = if *seen && *small_len == 0 {
        format!(
            "the sender sent {big_len}-byte segments and retransmitted the same one {n} time(s) on \
             its retransmission timer (backing off), never acknowledged and never smaller, while the \
             {peer}'s packets kept arriving — the path is up for small packets. Linux does not fall \
             back to smaller segments by itself (`net.ipv4.tcp_mtu_probing=0`, the default): the \
             transfer never completes. The small packets (the handshake, the request, ACKs) were",
            n = a.count,
            peer = if peer == "endpoints" { "client" } else { peer },
        )
    } else if *seen {
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

/// What one occurrence measured.
#[derive(Debug, Clone)]
pub struct Blackhole {
    /// The segment size that never got through, the one that did.
    pub big_len: u32,
    pub small_len: u32,
    /// Full-size retransmissions seen (0 beyond the drop).
    pub retransmissions: u32,
    /// The retransmissions were seen (the capture is on the sender's side).
    pub seen: bool,
    pub rtt_ns: Option<i64>,
}

impl rule::Fold for Blackhole {
    fn fold(self, a: &mut crate::Aggregate) {
        a.count += u64::from(self.retransmissions);
        a.rtt_ns_min = rule::min_opt(a.rtt_ns_min, self.rtt_ns);
    }
}

impl rule::Rule for MtuState {
    #[inline]
    fn on_segment(&mut self, cx: &mut rule::SegmentCx<'_>, conn: &Connection, seg: &Segment<'_>) {
        MtuState::on_segment(self, conn, seg, cx.out);
    }

    fn on_close(&mut self, cx: &mut rule::CloseCx<'_>, conn: &Connection) {
        MtuState::on_close(self, conn, cx.out);
    }
}

/// The verdict's sentence of a `path_mtu_blackhole` finding.
pub(crate) fn cause(c: &rule::Cause<'_>) -> String {
    format!(
        "full-size packets from {} vanish on the path (an MTU black hole: ICMP 'fragmentation \
         needed' filtered) and the data waits ~{} for the sender to retry with smaller segments",
        c.ep, c.typ
    )
}
