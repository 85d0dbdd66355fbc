//! Loss and how it was recovered.
//!
//! A retransmission that follows a silence of the sender longer than any
//! duplicate-ACK or tail-loss-probe recovery would take was sent by the
//! retransmission timer: `retransmission_timeout` (RFC 6298; Linux's minimum
//! RTO is 200 ms, doubling on each retry — the "backoff chain"). Any other
//! retransmission was triggered by duplicate ACKs, SACK or a tail-loss probe:
//! `packet_loss` (RFC 5681 §3.2, RFC 6675, RFC 8985). An episode lasts from
//! the sender's stall to the ACK that covers the retransmitted data.
//!
//! Where the capture point sits matters: a retransmission that fills a hole
//! the capture never saw filled means the original was lost *before* the
//! capture point; one of a segment seen once already was lost after it.

use tcpdoctor_flow::{Connection, Dir, Mark, Resent, SegKind, Segment, Seq};
use tcpdoctor_wire::Timestamp;

use crate::budget::{Claims, Part};
use crate::rule::{self, Blame, Detail, Kind, Occurrence};
use crate::text::{ms, Said, Words};
use serde_json::json;

/// Linux never sets the RTO below 200 ms; a pause shorter than this before a
/// retransmission is fast recovery or a tail-loss probe.
pub const MIN_RTO_NS: i64 = 150_000_000;
const MAX_HOLES: usize = 8;
/// A segment numbered at most this many IP IDs before the one that went
/// past it was sent before it (overtaken on the path).
const MAX_OVERTAKEN: u16 = 64;

#[derive(Debug, Clone, Copy)]
struct Episode {
    timeout: bool,
    first: Mark,
    retransmissions: u32,
    /// Relative sequence just past the data retransmitted so far.
    end: u32,
    /// The data re-sent, until the receiver shows it had the originals.
    resent: Resent,
    /// When the episode's stall began: its claims start here.
    start: Timestamp,
    upstream: bool,
    /// The sender's last transmission in the episode.
    last_tx: Timestamp,
    /// Time the sender spent unable to send during the episode: what the loss cost.
    stall_ns: i64,
    /// Pauses shorter than this are pacing, not a stall.
    idle_ns: i64,
}

impl Episode {
    fn sent(&mut self, ts: Timestamp, claims: &mut Claims) {
        let gap = ts.since(self.last_tx);
        if gap > self.idle_ns {
            self.stall_ns += gap;
            claims.claim(Part::Retransmission, self.last_tx, ts);
        }
        self.last_tx = ts;
    }
}

/// The longest a retransmission timer's first wait may be on a path of a
/// short round trip: RFC 6298's initial and minimum RTO (Linux's is 200 ms).
const MAX_FIRST_RTO_NS: i64 = 1_000_000_000;

#[derive(Debug, Default)]
struct DirState {
    last_send: Option<Timestamp>,
    dupacks: u32,
    first_dupack: Option<Mark>,
    last_ack: u32,
    /// Sequence ranges the capture skipped (data it never saw), and the IP
    /// ID of the segment that skipped them.
    holes: Vec<(u32, u32, u16)>,
    /// Relative sequence just past the highest data seen.
    next: Option<u32>,
    last_len: Option<u32>,
    last_frame: u64,
    /// The receiver sent data since this side's last segment.
    peer_spoke: bool,
    /// The receiver's window was closed (below one segment) since this side's last segment.
    window_closed: bool,
    /// This side's last segment was a retransmission.
    last_resent: bool,
    episode: Option<Episode>,
    /// An episode whose covering ACK came with its re-sends unproven, and
    /// that ACK's frame: decided at the receiver's next ACK, which reports
    /// a duplicate's arrival (D-SACK, RFC 2883) when the original had
    /// arrived — Linux acknowledges the original first, then the copy.
    ending: Option<(Episode, u64)>,
    /// This side's last packet of any kind (an ACK too).
    last_packet: Option<Mark>,
    /// When the receiver last sent data.
    peer_data: Option<Timestamp>,
}

impl DirState {
    /// An ACK of this direction's data (RFC 5681 §2: a duplicate ACK
    /// acknowledges nothing new, carries no data and comes with data in
    /// flight). An ACK past the retransmitted data ends the episode.
    #[inline]
    fn on_ack(
        &mut self,
        conn: &Connection,
        seg: &Segment<'_>,
        out: &mut Vec<Occurrence>,
        claims: &mut Claims,
    ) {
        let sender = seg.dir.reverse();
        if let Some((mut ep, frame)) = self.ending.take() {
            ep.resent.on_ack(conn, seg);
            if ep.resent.unproven() {
                out.push(build(sender, ep, Some(frame), conn));
            } else {
                claims.retract(Part::Retransmission, ep.start);
            }
        }
        if let Some(ep) = self.episode.as_mut() {
            ep.resent.on_ack(conn, seg);
        }
        if seg.acked > 0 {
            self.dupacks = 0;
            self.first_dupack = None;
            if let Some(mut ep) = self.episode.filter(|ep| Seq(seg.ack) >= Seq(ep.end)) {
                self.episode = None;
                if !ep.resent.unproven() {
                    // Every byte re-sent had arrived before (the receiver
                    // reports the duplicates, RFC 2883, or its ACK answers
                    // the originals, RFC 3522): the timer or the probe fired
                    // early and nothing was lost; the wait was for this ACK,
                    // on whatever held it.
                    claims.retract(Part::Retransmission, ep.start);
                } else {
                    // Waiting for this ACK with nothing to send is part of the cost.
                    ep.sent(seg.ts, claims);
                    self.ending = Some((ep, seg.frame));
                }
            }
        } else if seg.len == 0 && seg.ack == self.last_ack && conn.half(sender).in_flight() > 0 {
            self.dupacks += 1;
            self.first_dupack.get_or_insert(Mark {
                ts: seg.ts,
                frame: seg.frame,
            });
        }
        self.last_ack = seg.ack;
        // A window too small for a full segment: the sender's pauses and
        // probes from here on are flow control, not loss.
        if seg.window < 9000 && seg.window < conn.smss(sender) {
            self.window_closed = true;
        }
    }

    /// A data segment of this direction.
    #[inline]
    fn on_data(
        &mut self,
        conn: &Connection,
        seg: &Segment<'_>,
        out: &mut Vec<Occurrence>,
        claims: &mut Claims,
    ) {
        let end = seg.seq.wrapping_add(seg.len);
        let silence = self.last_send.map_or(0, |t| seg.ts.since(t));
        let rtt = conn.path_rtt_ns().unwrap_or(0);
        // Only the retransmission timer leaves a sender silent this long with
        // data outstanding and the window open (RFC 6298 §5); duplicate ACKs,
        // SACK and tail-loss probes act within a round trip or two.
        let timer_silence =
            silence >= MIN_RTO_NS && silence >= rtt.saturating_mul(5) / 2 && !self.window_closed;
        if timer_silence {
            // Fast recovery that stalled until the timer fired: report the
            // fast part; what follows is a timeout.
            if let Some(ep) = self.episode.filter(|e| !e.timeout) {
                out.push(build(seg.dir, ep, None, conn));
                self.episode = None;
            }
        }
        match seg.kind {
            SegKind::Retransmission => {
                self.retransmitted(conn, seg, end, timer_silence, rtt, claims)
            }
            SegKind::NewData => {
                if let Some(ep) = self.episode.as_mut() {
                    ep.sent(seg.ts, claims);
                }
                let unseen = conn.half(seg.dir).unseen_before_last() > 0
                    && self.lost_unseen(conn, seg, rtt, out, claims);
                if timer_silence && !unseen {
                    self.resumed_after_silence(conn, seg, silence, out, claims);
                }
                self.note_hole(conn, seg);
            }
            _ => {}
        }
        if self.next.is_none_or(|n| Seq(end) > Seq(n)) {
            self.next = Some(end);
        }
        self.last_send = Some(seg.ts);
        self.last_resent = seg.kind == SegKind::Retransmission;
        self.last_len = Some(seg.len);
        self.last_frame = seg.frame;
        self.peer_spoke = false;
        self.window_closed = false;
    }

    /// A retransmission: the next of the episode, or the first of a new one
    /// (timed from the sender's silence, or from the first duplicate ACK).
    fn retransmitted(
        &mut self,
        conn: &Connection,
        seg: &Segment<'_>,
        end: u32,
        timer_silence: bool,
        rtt: i64,
        claims: &mut Claims,
    ) {
        // Data the receiver had already acknowledged, sent again: spurious
        // (a timer that fired early, an ACK delayed or lost). The receiver
        // had it: no loss, nothing waited for it.
        if Seq(end) <= Seq(self.last_ack) {
            return;
        }
        let hole = self
            .holes
            .iter()
            .find(|&&(a, b, _)| Seq(seg.seq) >= Seq(a) && Seq(seg.seq) < Seq(b));
        // Data filling a hole with an IP ID just before that of the segment
        // that skipped it left before that segment: the original, delayed
        // on the path and overtaken, not a re-send (senders number their
        // packets counting up, per connection or per host; a re-send comes
        // later and takes a later number). Nothing was lost.
        if let Some(&(_, _, after)) = hole {
            let before = after.wrapping_sub(seg.ip_id);
            if seg.ip_id != 0 && after != 0 && (1..=MAX_OVERTAKEN).contains(&before) {
                return;
            }
        }
        let upstream = hole.is_some();
        match self.episode.as_mut() {
            Some(ep) => {
                ep.sent(seg.ts, claims);
                ep.resent.add(seg);
                ep.retransmissions += 1;
                if Seq(end) > Seq(ep.end) {
                    ep.end = end;
                }
                ep.upstream |= upstream;
            }
            None if self.window_closed => {
                // A probe or a resend into a window that just reopened: not loss.
            }
            None if !awaited(conn, seg.dir) => {
                // A push re-sent to a peer that does not acknowledge it (a
                // phone asleep, a host gone): lost or not, nobody waited.
            }
            None => {
                // Timed from what set it off: the sender's last segment
                // before a timer's silence, or the first duplicate ACK. With
                // neither, after new data, a probe or a reordering timer
                // (RFC 8985) re-sent the tail: the wait began at the sender's
                // last segment (a pause of under half a round trip is not
                // claimed, below). After a re-send, this one is the same
                // recovery going on, timed from itself as before.
                let start = match (timer_silence, self.first_dupack) {
                    (true, _) => self.last_send.unwrap_or(seg.ts),
                    (false, Some(m)) => m.ts,
                    (false, None) if !self.last_resent => self.last_send.unwrap_or(seg.ts),
                    (false, None) => seg.ts,
                };
                let mut ep = Episode {
                    resent: Resent::default(),
                    start,
                    timeout: timer_silence,
                    first: Mark {
                        ts: seg.ts,
                        frame: seg.frame,
                    },
                    retransmissions: 1,
                    end,
                    upstream,
                    last_tx: start,
                    stall_ns: 0,
                    idle_ns: (rtt / 2).max(2_000_000),
                };
                ep.resent.add(seg);
                ep.sent(seg.ts, claims);
                self.episode = Some(ep);
            }
        }
    }

    /// A stall in the middle of a transfer, seen downstream of the loss: the
    /// sender went silent after a full-size segment, the receiver sent
    /// nothing that would end a message, and the data resumed exactly where
    /// it stopped, after a retransmission timeout's worth of silence. The
    /// capture never saw the lost packets.
    #[cold]
    fn resumed_after_silence(
        &mut self,
        conn: &Connection,
        seg: &Segment<'_>,
        silence: i64,
        out: &mut Vec<Occurrence>,
        claims: &mut Claims,
    ) {
        let Some(prev_len) = self.last_len else {
            return;
        };
        let mss = conn.smss(seg.dir);
        let mid_transfer = prev_len >= mss && prev_len % mss == 0 && !self.peer_spoke;
        let resumed_in_place = self.next == Some(seg.seq);
        if !mid_transfer || !resumed_in_place || self.episode.is_some() {
            return;
        }
        // Loss is named only where the packets show it. Captured at the
        // sender, a lost segment would be seen sent twice: a silence there
        // is the sender holding data. The timer re-sends the first segment
        // it lost, full-size mid-transfer; a partial tail after the silence
        // is data the sender held with everything acknowledged (a corked
        // socket, the application), not a retransmission.
        let at_sender = crate::text::vantage(conn).0 == rule::endpoint_of(conn, seg.dir).1;
        if at_sender || seg.len < mss || !rule::unseen_loss_possible(conn) {
            return;
        }
        if let Some(prev) = self.last_send {
            claims.claim(Part::Retransmission, prev, seg.ts);
        }
        out.push(Occurrence {
            kind: Kind::RetransmissionTimeout,
            culprit: Blame::Network(seg.dir),
            delay_ns: silence,
            frames: vec![self.last_frame, seg.frame],
            notes: vec![(seg.frame, "data resumes after a timeout's silence".into())],
            ladder_from: Some(self.last_frame),
            ladder: None,
            span: None,
            detail: Detail::Loss(Loss {
                retransmissions: 0,
                upstream: true,
                recovered: true,
                unanswered: false,
                rtt_ns: conn.path_rtt_ns(),
            }),
        });
    }

    /// New data after a timer's silence of the sender, whose IPv4
    /// identification skips the packets it sent before (Linux numbers a
    /// connection's packets one by one): they were lost before the capture
    /// point, and this is the timer re-sending them. The first segment of a
    /// message shows no hole in the sequence numbers, only this; a request
    /// lost on its way to a router's capture would otherwise read as the
    /// client's own time, a response lost on its way to the client's as the
    /// server's. Whether it named the loss.
    #[cold]
    fn lost_unseen(
        &mut self,
        conn: &Connection,
        seg: &Segment<'_>,
        rtt: i64,
        out: &mut Vec<Occurrence>,
        claims: &mut Claims,
    ) -> bool {
        let Some(last) = self.last_packet else {
            return false;
        };
        let quiet = seg.ts.since(last.ts);
        let timer = quiet >= MIN_RTO_NS && quiet >= rtt.saturating_mul(5) / 2;
        // Data that follows the peer's, which came after the silence began,
        // sooner than any timer fires answers it (an acknowledgement of a
        // broker's delivery): what it re-sent could not have left before
        // what it answers arrived. Hosts that number all their packets from
        // one counter skip numbers in any silence.
        let answers = self
            .peer_data
            .is_some_and(|t| t > last.ts && seg.ts.since(t) < MIN_RTO_NS);
        // At the sender, nothing it sent can be lost before the capture.
        let at_sender = crate::text::vantage(conn).0 == rule::endpoint_of(conn, seg.dir).1;
        if !timer
            || !awaited(conn, seg.dir)
            || answers
            || self.window_closed
            || self.episode.is_some()
            || at_sender
            || !rule::unseen_loss_possible(conn)
        {
            return false;
        }
        // The timer waited at most its longest first wait (RFC 6298's
        // 1 s floor, or three round trips) for each packet missed, doubling
        // (2^n − 1 in all); the silence before the lost packets left was
        // the sender's own.
        let n = conn.half(seg.dir).unseen_before_last();
        let rto = MAX_FIRST_RTO_NS.max(rtt.saturating_mul(3));
        let waited = quiet.min(rto.saturating_mul((1i64 << n.min(8)) - 1));
        claims.claim(
            Part::Retransmission,
            Timestamp::from_nanos(seg.ts.nanos() - waited),
            seg.ts,
        );
        let note = if waited < quiet {
            format!(
                "sent again: IP ID skips {n} packet(s) the capture never saw; the timer waited at most {:.0} ms of the {:.0} ms silence",
                waited as f64 / 1e6,
                quiet as f64 / 1e6
            )
        } else {
            format!(
                "sent again after {:.0} ms: IP ID skips {n} packet(s) the capture never saw",
                quiet as f64 / 1e6
            )
        };
        out.push(Occurrence {
            kind: Kind::RetransmissionTimeout,
            culprit: Blame::Network(seg.dir),
            delay_ns: waited,
            frames: vec![last.frame, seg.frame],
            notes: vec![(seg.frame, note)],
            ladder_from: Some(last.frame),
            ladder: None,
            span: None,
            detail: Detail::Loss(Loss {
                retransmissions: 0,
                upstream: true,
                recovered: true,
                unanswered: false,
                rtt_ns: conn.path_rtt_ns(),
            }),
        });
        true
    }

    /// Data beyond what was seen before: the capture missed the bytes between.
    #[inline]
    fn note_hole(&mut self, conn: &Connection, seg: &Segment<'_>) {
        // Before any data, the next byte follows the sender's SYN, if seen.
        let next = self
            .next
            .or_else(|| conn.half(seg.dir).syn_seen.then_some(1));
        if let Some(next) = next {
            if Seq(seg.seq) > Seq(next) {
                if self.holes.len() == MAX_HOLES {
                    self.holes.remove(0);
                }
                self.holes.push((next, seg.seq, seg.ip_id));
            }
        }
    }
}

/// Whether anyone waited for `dir`'s data now. Server data that answers no
/// request (a delivery, pushed work, a notification after the exchange
/// before it ended) was awaited by nobody: its loss, seen or not, is no
/// one's wait. A greeting (the first data of a connection whose opening was
/// captured), a request and a response are awaited; on a connection picked
/// up mid-stream, server data before any request is a push like the others.
fn awaited(conn: &Connection, dir: Dir) -> bool {
    dir == Dir::ClientToServer
        || conn
            .current_exchange()
            .is_some_and(|e| e.request_first.is_some() || e.index == 0 && e.setup.is_some())
}

#[derive(Debug, Default)]
pub struct LossState {
    dirs: [DirState; 2],
}

impl LossState {
    pub fn on_segment(
        &mut self,
        conn: &Connection,
        seg: &Segment<'_>,
        out: &mut Vec<Occurrence>,
        claims: &mut Claims,
    ) {
        let d = seg.dir;
        // As the receiver of the other direction: ACKs, duplicates, recovery.
        let peer = &mut self.dirs[d.reverse().index()];
        if seg.flags.ack() && !seg.flags.syn() && !seg.flags.rst() {
            peer.on_ack(conn, seg, out, claims);
        }
        let mark = Mark {
            ts: seg.ts,
            frame: seg.frame,
        };
        if seg.len == 0 {
            self.dirs[d.index()].last_packet = Some(mark);
            return;
        }
        peer.peer_spoke = true;
        peer.peer_data = Some(seg.ts);
        // As the sender.
        let me = &mut self.dirs[d.index()];
        me.on_data(conn, seg, out, claims);
        me.last_packet = Some(mark);
    }

    /// An episode still open when the connection ends was never recovered:
    /// the data was not acknowledged for as long as the capture shows.
    pub fn on_close(&mut self, conn: &Connection, out: &mut Vec<Occurrence>) {
        for d in [Dir::ClientToServer, Dir::ServerToClient] {
            if let Some((ep, frame)) = self.dirs[d.index()].ending.take() {
                out.push(build(d, ep, Some(frame), conn));
            }
            if let Some(mut ep) = self.dirs[d.index()].episode.take() {
                if goodbye(conn, d, &ep) {
                    continue;
                }
                // The peer said nothing since the first re-send: it, or the
                // path to it, stopped answering.
                let heard = self.dirs[d.reverse().index()]
                    .last_packet
                    .is_some_and(|m| m.ts > ep.first.ts);
                ep.sent(conn.last_ts, &mut Claims::default());
                let mut o = build(d, ep, None, conn);
                if let Detail::Loss(l) = &mut o.detail {
                    l.unanswered = !heard;
                }
                out.push(o);
            }
        }
    }
}

/// Data never acknowledged that its sender closed right behind (its FIN
/// left before the first re-send): a goodbye — a TLS close_notify, a
/// protocol's QUIT — that nobody waits for, since the sender had finished;
/// the kernel re-sends it on its own after the application closed. The
/// first data of a connection whose opening was captured is not one: a
/// client that half-closes after its request still waits for the answer.
fn goodbye(conn: &Connection, d: Dir, ep: &Episode) -> bool {
    let half = conn.half(d);
    let closed_first = half.fin.is_some_and(|f| f.ts <= ep.first.ts);
    let first_request = half.syn_seen
        && conn.exchanges <= 1
        && conn
            .current_exchange()
            .is_none_or(|e| e.response_first.is_none());
    closed_first && !first_request
}

fn build(sender: Dir, ep: Episode, ack_frame: Option<u64>, conn: &Connection) -> Occurrence {
    let mut frames = vec![ep.first.frame];
    frames.extend(ack_frame);
    let what = if ep.timeout {
        "retransmitted by timeout"
    } else {
        "retransmitted (fast recovery)"
    };
    Occurrence {
        kind: if ep.timeout {
            Kind::RetransmissionTimeout
        } else {
            Kind::PacketLoss
        },
        culprit: Blame::Network(sender),
        delay_ns: ep.stall_ns,
        frames,
        notes: vec![(ep.first.frame, what.into())],
        ladder_from: None,
        ladder: None,
        span: None,
        detail: Detail::Loss(Loss {
            retransmissions: ep.retransmissions,
            upstream: ep.upstream,
            recovered: ack_frame.is_some(),
            unanswered: false,
            rtt_ns: conn.path_rtt_ns(),
        }),
    }
}

/// The words of a `retransmission_timeout` / `packet_loss` finding: why, the fix, its details.
pub(crate) fn words(s: &Said<'_>) -> Words {
    let (a, typical, total) = (s.a, s.typical, s.total);
    let rtt = a.rtt_ns_min.map(ms);
    let timeout = a.kind == Kind::RetransmissionTimeout;
    let how = if timeout {
        "only by the retransmission timer (RFC 6298: Linux waits at least 200 ms, then doubles the wait on \
         every further loss of the same data), because too few duplicate ACKs came back to trigger fast \
         retransmit — typically the last segments of a transfer, or everything in flight, were lost"
    } else {
        "by fast retransmit or SACK recovery (RFC 5681 §3.2, RFC 6675), within about a round trip"
    };
    // Episodes the peer never answered: nothing came back after the first
    // re-send for as long as the capture shows.
    let unanswered = a.stalls;
    let lead = if timeout && unanswered == a.occurrences {
        "Data was sent again and again on the retransmission timer (RFC 6298: at least 200 ms, doubling on \
         each retry) and never acknowledged: the peer sent nothing back after the first re-send, for as \
         long as the capture shows. The peer, or the path to it, stopped answering — the host went down, \
         restarted or lost its address, or a NAT or firewall on the way forgot the connection (an idle \
         timeout shorter than the connection's quiet periods) and drops its packets. Not a loss that \
         recovered: the wait ends only when the sender gives up (Linux: about 15 minutes, \
         `net.ipv4.tcp_retries2`) or the application's own timeout does"
            .to_string()
    } else {
        format!("Packets between the endpoints were lost and recovered {how}")
    };
    let explanation = format!(
        "{lead}. {occ} loss episode(s) on {conns} connection(s), {count} retransmissions, {typical:.1} ms \
         lost each (median), {total:.0} ms in all (round trip {rtt}).{upstream}{never}",
        never = if unanswered > 0 && unanswered < a.occurrences {
            format!(
                " In {unanswered} episode(s) the peer never answered the re-sent data: nothing came back \
                 for as long as the capture shows (the peer or the path to it stopped answering)."
            )
        } else {
            String::new()
        },
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
    let fix = if timeout && unanswered == a.occurrences {
        format!(
            "Check that the peer is up and still reachable (`tcpdoctor ping {ep}` answers with an RST or a \
             SYN-ACK if anything is there); look for state on the path that expires (NAT, stateful firewalls, \
             load balancers and their idle timeouts) and keep connections busier than it forgets them (TCP \
             keepalive or application pings at a shorter interval), or reconnect after idling. Give the \
             application a timeout that abandons a silent connection and retries on a new one \
             (`TCP_USER_TIMEOUT`) instead of waiting out the re-sends.",
            ep = s.ep
        )
    } else if timeout {
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
        json!({"retransmissions": a.count, "lost_before_capture": a.flagged, "never_answered": unanswered,
               "rtt_ms": rtt}),
    )
}

/// What one occurrence measured.
#[derive(Debug, Clone)]
pub struct Loss {
    pub retransmissions: u32,
    pub upstream: bool,
    pub recovered: bool,
    /// Never recovered, and the peer sent nothing after the first re-send.
    pub unanswered: bool,
    pub rtt_ns: Option<i64>,
}

impl rule::Fold for Loss {
    fn fold(self, a: &mut crate::Aggregate) {
        a.count += u64::from(self.retransmissions);
        a.flagged += u64::from(self.upstream);
        // `stalls`: episodes the peer never answered.
        a.stalls += u64::from(self.unanswered);
        a.rtt_ns_min = rule::min_opt(a.rtt_ns_min, self.rtt_ns);
    }
}

impl rule::Rule for LossState {
    #[inline]
    fn on_segment(&mut self, cx: &mut rule::SegmentCx<'_>, conn: &Connection, seg: &Segment<'_>) {
        LossState::on_segment(self, conn, seg, cx.out, cx.claims);
    }

    fn on_close(&mut self, cx: &mut rule::CloseCx<'_>, conn: &Connection) {
        LossState::on_close(self, conn, cx.out);
    }
}

/// The verdict's sentence of a `retransmission_timeout` or `packet_loss` finding.
pub(crate) fn cause(c: &rule::Cause<'_>) -> String {
    let timeout = c.f.kind == Kind::RetransmissionTimeout.name();
    let never = c.num("never_answered").unwrap_or(0.0) as u64;
    if timeout && never > 0 && never == c.f.occurrences {
        return format!(
            "data was re-sent on the retransmission timer and never acknowledged: the peer, or the path to it, \
             stopped answering (~{} each, until the capture ended)",
            c.typ
        );
    }
    let by = if timeout {
        "only by the retransmission timer"
    } else {
        "by fast retransmit"
    };
    format!(
        "packets are lost on the path and recovered {by} (~{} each)",
        c.typ
    )
}
