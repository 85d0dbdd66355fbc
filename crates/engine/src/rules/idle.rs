//! Who is idle inside a message, and why: the sending application's own time.
//!
//! Inside a request or a response, a pause between two data segments of the
//! sender is one of two things. Either TCP held the data — Nagle (RFC 896)
//! until the small segment outstanding is acknowledged, the congestion window
//! (RFC 5681) until ACKs open it, the receive window (RFC 9293 §3.8.6) until
//! the receiver's update, a loss until the retransmission is acknowledged — or
//! the sending application had not written it yet.
//!
//! Everything TCP holds is released by an ACK reaching the sender. So when
//! all of the sender's data was acknowledged, the receiver's window had room
//! for a segment and nothing was sent again, and the next data still did not
//! follow that ACK at once, TCP held nothing at any moment of the pause (held
//! data would have left on that ACK, or on an earlier one, and then it would
//! not be the next data): the whole pause is the application's. That is the
//! server's time inside a response (a framework that flushes the headers and
//! then computes the body, a stream) or the client's inside a request (the
//! headers written, the body still being produced).
//!
//! Pacing (BBR, fq) also spaces a sender's segments without any ACK; it
//! only spaces data the sender already has, which leaves as whole segments.
//! So only a pause after a segment that ended a write — shorter than a whole
//! number of segments — is looked at: the end of what the application had
//! written so far.
//!
//! A pause after the end of a write that *no* ACK ended is the application's
//! too, when TCP could not have held the data: an ACK that reaches the
//! sender passes any capture point before the data it releases, so none
//! moved; Nagle holds a short segment until the outstanding data is
//! acknowledged; the window had room; and less than two segments in flight
//! fill no congestion window (it is never smaller but after a timeout, and
//! a timeout's re-send spoils the pause). This needs a capture that sees the
//! ACKs: on a connection whose other side was never captured (asymmetric
//! routing, a tap on one direction) no ACK seen proves nothing.
//!
//! A pause whose data did follow an ACK is left to the rules that name why it
//! was held (Nagle, congestion or receive window), or to the transfer.
//! Positions are seen at the capture point: an ACK seen there reaches the
//! sender, and the data it releases comes back, the capture point's round
//! trip to the sender later ([`Connection::distance_to`]), whatever the
//! vantage point.

use tcpdoctor_flow::{
    Connection, Dir, Resent, SegKind, Segment, Seq, MIN_PAUSE_NS, REACT_SLACK_NS,
};
use tcpdoctor_wire::Timestamp;

use crate::budget::{Claims, Part};
use crate::rule;

/// After a full-size segment, a pause this long with everything acknowledged
/// is not pacing (a segment at 1 Mbit/s takes 12 ms) nor the congestion
/// window (nothing was in flight): the sender held data it had, or had none.
const MIN_FULL_PAUSE_NS: i64 = 20_000_000;
/// Linux sends the partial tail of a corked socket (`TCP_CORK`) after at
/// most 200 ms (tcp(7)); a hold of a tail after full segments that long is
/// the cork's ceiling.
const CORK_HOLD_NS: std::ops::RangeInclusive<i64> = 190_000_000..=260_000_000;

/// One sending direction since its last new data.
#[derive(Debug, Default, Clone, Copy)]
struct DirState {
    /// The sender's last new data: capture time (ns; 0 before any), frame,
    /// relative sequence number just past it.
    last_ns: i64,
    last_frame: u64,
    last_end: u32,
    /// The last new data ended a write: shorter than a full segment (or than
    /// a whole number of them). A sender with more queued sends full segments;
    /// a pause after one is the congestion window, pacing or loss.
    last_partial: bool,
    /// When the receiver's ACK of everything up to `last_end` was seen (0: not yet).
    acked_ns: i64,
    /// Since the last new data: the sender sent something again, the receiver
    /// closed its window below a segment, or the receiver sent data (a new message).
    spoiled: bool,
    /// The highest ACK of this direction's data seen (relative), and when
    /// the last one that moved it was seen since the last new data (0: none).
    ack: u32,
    moved_ns: i64,
    /// The receiver's window had no room for another segment after the last new data.
    window_full: bool,
    /// Bytes unacknowledged after the last new data.
    in_flight: u32,
    /// The ACK number the last new data carried: how much of the peer's
    /// data the sender had received when it sent it.
    sent_ack: u32,
    /// Since the last new data, the data sent again: a re-send the
    /// receiver had already is no loss and explains no pause.
    resent: Resent,
}

impl DirState {
    fn spoiled(&self) -> bool {
        self.spoiled || self.resent.unproven()
    }
}

/// The longest pause counted in an exchange: (ns, frame before it, frame after it).
pub type Pause = (i64, u64, u64);

/// Per connection: the application time found inside the exchange in progress.
#[derive(Debug, Default)]
pub struct IdleState {
    dirs: [DirState; 2],
    /// Application time inside the exchange in progress, per sending direction.
    inside_ns: [i64; 2],
    longest: [Pause; 2],
    /// Of those pauses, how many held a partial tail after full-size
    /// segments for the cork's ceiling.
    cork_holds: [u32; 2],
}

impl IdleState {
    pub fn on_segment(&mut self, conn: &Connection, seg: &Segment<'_>, claims: &mut Claims) {
        let d = seg.dir;
        // As the receiver of the other direction.
        let other = &mut self.dirs[d.reverse().index()];
        if other.last_ns != 0 {
            if seg.len > 0 || seg.flags.rst() {
                other.spoiled = true;
            } else if seg.flags.ack() && !seg.flags.syn() {
                if other.acked_ns == 0 && Seq(seg.ack) >= Seq(other.last_end) {
                    other.acked_ns = seg.ts.nanos();
                }
                if Seq(seg.ack) > Seq(other.ack) {
                    other.ack = seg.ack;
                    other.moved_ns = seg.ts.nanos();
                }
                other.resent.on_ack(conn, seg);
                if seg.window < conn.smss(d.reverse()) {
                    // The window closing on a sender that had filled it:
                    // blocked since its last segment, on the receiver (the
                    // zero-window rule times the stall from here).
                    if other.window_full
                        && !other.spoiled()
                        && inside_message(conn, d.reverse(), other.last_frame)
                    {
                        let from = Timestamp::from_nanos(other.last_ns);
                        let part = super::receive_window::stall_part(conn, seg.ts.since(from));
                        claims.claim(part, from, seg.ts);
                    }
                    other.spoiled = true;
                }
            }
        }
        if seg.len == 0 {
            return;
        }
        let st = &mut self.dirs[d.index()];
        match seg.kind {
            SegKind::NewData => {}
            SegKind::Retransmission => {
                st.resent.add(seg);
                return;
            }
            SegKind::KeepAliveOrProbe => {
                st.spoiled = true;
                return;
            }
            _ => return,
        }
        let prev = *st;
        let smss = conn.smss(d);
        // With the peer's MSS unknown (no handshake), only a segment below
        // the guess is surely short.
        let mss_known = conn.half(d.reverse()).mss.is_some();
        let partial = seg.len < smss || (mss_known && !seg.len.is_multiple_of(smss));
        *st = DirState {
            last_ns: seg.ts.nanos(),
            last_frame: seg.frame,
            last_end: seg.seq.wrapping_add(seg.len),
            last_partial: partial,
            acked_ns: 0,
            spoiled: false,
            ack: prev.ack,
            moved_ns: 0,
            window_full: seg.peer_window > 0
                && seg.in_flight.saturating_add(smss) > seg.peer_window,
            in_flight: seg.in_flight,
            sent_ack: seg.ack,
            resent: Resent::default(),
        };
        // The common case: data following data, or a pause TCP may explain.
        // After full segments only a long pause counts: a shorter one can be
        // pacing.
        let gap = seg.ts.nanos() - prev.last_ns;
        if prev.last_ns == 0 || prev.spoiled() || prev.last_end != seg.seq || gap < MIN_PAUSE_NS {
            return;
        }
        if self.answered_later(conn, seg, &prev, claims) {
            return;
        }
        if prev.acked_ns != 0 && (prev.last_partial || gap >= MIN_FULL_PAUSE_NS) {
            let corked = !prev.last_partial && partial && CORK_HOLD_NS.contains(&gap);
            if let Some(part) = self.pause(conn, seg, &prev, claims) {
                self.cork_holds[d.index()] += u32::from(corked && part != Part::OtherConnection);
                return;
            }
        }
        if prev.moved_ns != 0 {
            Self::released(conn, seg, &prev, claims);
        } else if prev.acked_ns == 0
            && prev.last_partial
            && !prev.window_full
            && prev.in_flight < 2 * smss
        {
            self.unreleased(conn, seg, &prev, claims);
        }
    }

    /// A pause after the end of a write that no ACK ended: no ACK moved
    /// while it lasted (at any capture point an ACK that reached the sender
    /// first passes there, before the data it released), so TCP released
    /// nothing. Nagle holds a short segment until the data outstanding is
    /// acknowledged, the receiver's window had room, and less than two
    /// segments in flight fill no congestion window (never below two but
    /// after a timeout, whose re-send spoils the pause): the data was not
    /// there to send. The sending application's time, whatever the round trip.
    #[cold]
    #[inline(never)]
    fn unreleased(
        &mut self,
        conn: &Connection,
        seg: &Segment<'_>,
        prev: &DirState,
        claims: &mut Claims,
    ) {
        // No ACK seen proves none passed only where the ACKs are captured.
        if conn.seen_one_way(seg.dir)
            || !inside_message(conn, seg.dir, prev.last_frame)
            || claims.ends_at(seg.ts)
        {
            return;
        }
        self.claim_app(seg, prev, claims);
    }

    /// A pause that an ACK ended, with nothing sent again: TCP held data it
    /// had until the ACK reached the sender, unless a rule named another
    /// reason (Nagle, loss). With the receiver's window full after the last
    /// segment, that ACK opened the window (the receiver's time, RFC 9293
    /// §3.8.6); with room in it, the congestion window let the data go
    /// (RFC 5681). Pauses of at least half a round trip are flights (slow
    /// start, a window grown no further, a slow reader's trickle); shorter
    /// ones are the ACK clock of a transfer at the path's rate.
    #[cold]
    #[inline(never)]
    fn released(conn: &Connection, seg: &Segment<'_>, prev: &DirState, claims: &mut Claims) {
        let Some(rtt) = conn.path_rtt_ns() else {
            return;
        };
        let now = seg.ts.nanos();
        if (now - prev.last_ns) * 2 < rtt
            || !inside_message(conn, seg.dir, prev.last_frame)
            || claims.ends_at(seg.ts)
        {
            return;
        }
        let to_sender = conn.distance_to(seg.dir).unwrap_or(rtt);
        if now > prev.moved_ns + to_sender + REACT_SLACK_NS + to_sender / 4 {
            return;
        }
        let part = if prev.window_full {
            Part::Window
        } else {
            Part::CongestionWait
        };
        claims.claim(part, Timestamp::from_nanos(prev.last_ns), seg.ts);
    }

    /// A pause after which the sender's data had all been acknowledged:
    /// whether it was the application's, or another connection's; the part
    /// claimed, if any.
    #[cold]
    #[inline(never)]
    fn pause(
        &mut self,
        conn: &Connection,
        seg: &Segment<'_>,
        prev: &DirState,
        claims: &mut Claims,
    ) -> Option<Part> {
        let d = seg.dir;
        // Another rule explained this very pause (Nagle, a window, loss).
        if !inside_message(conn, d, prev.last_frame) || claims.ends_at(seg.ts) {
            return None;
        }
        // Without a clean round trip, the quickest ACK of anything sent to
        // the sender bounds it from above: a pause longer than that after
        // the ACK of everything was not the ACK's doing either.
        let to_sender = conn
            .distance_to(d)
            .or(conn.path_rtt_ns())
            .or(conn.distance_bound(d))?;
        // Data released by the ACK of everything leaves as it reaches the sender.
        let released_by = prev.acked_ns + to_sender + REACT_SLACK_NS + to_sender / 4;
        let now = seg.ts.nanos();
        if now <= released_by {
            return None;
        }
        // Another connection between the same hosts closed during the
        // pause, and the data followed as soon as that could have reached
        // the sender: it waited on that connection (FTP's "226 Transfer
        // complete" after the data connection), whose own analysis tells
        // why it took the time. Nobody's think time here.
        let closed = claims.closed_elsewhere_ns;
        if closed > prev.last_ns && now <= closed + to_sender + REACT_SLACK_NS + to_sender / 4 {
            let from = Timestamp::from_nanos(prev.last_ns);
            claims.claim(Part::OtherConnection, from, seg.ts);
            return Some(Part::OtherConnection);
        }
        Some(self.claim_app(seg, prev, claims))
    }

    /// A pause after which the sender's data acknowledges peer data its
    /// data before the pause did not: it answers a message the peer had sent
    /// meanwhile, before the pause began (pipelined requests: MQTT's
    /// SUBSCRIBE after CONNECT, HTTP/1.1 pipelining, a request's later part
    /// answered on its own). The wait is that message's: from when it passed
    /// the capture point, the way to the sender and back (at most
    /// [`Connection::distance_to`], or [`rule::server_bound`]) and the
    /// sender's own time beyond it — not a pause in the middle of an answer.
    #[cold]
    #[inline(never)]
    fn answered_later(
        &mut self,
        conn: &Connection,
        seg: &Segment<'_>,
        prev: &DirState,
        claims: &mut Claims,
    ) -> bool {
        let d = seg.dir;
        let peer = &self.dirs[d.reverse().index()];
        let (sent, now) = (peer.last_ns, seg.ts.nanos());
        if !seg.flags.ack()
            || sent == 0
            || sent > prev.last_ns
            || Seq(peer.last_end) <= Seq(prev.sent_ack)
            || Seq(seg.ack) < Seq(peer.last_end)
            || !inside_message(conn, d, prev.last_frame)
            || claims.ends_at(seg.ts)
        {
            return false;
        }
        let distance = match d {
            Dir::ServerToClient => conn.distance_to(d).or_else(|| rule::server_bound(conn)),
            Dir::ClientToServer => conn.distance_to(d),
        };
        let Some(distance) = distance else {
            return false;
        };
        // The sender's own time: what the wait holds beyond the way there
        // and back, counted as any other pause of the application's.
        let own = (now - sent - distance).clamp(0, now - prev.last_ns);
        let path_until = now - own;
        let from = Timestamp::from_nanos(prev.last_ns);
        claims.claim(Part::Network, from, Timestamp::from_nanos(path_until));
        if own > 0 {
            self.claim_app_from(seg, prev, path_until, claims);
        }
        true
    }

    /// Claims the pause from `prev` to `seg` for the sending application.
    fn claim_app(&mut self, seg: &Segment<'_>, prev: &DirState, claims: &mut Claims) -> Part {
        self.claim_app_from(seg, prev, prev.last_ns, claims)
    }

    /// Claims the end of that pause, from `from`, for the sending application.
    fn claim_app_from(
        &mut self,
        seg: &Segment<'_>,
        prev: &DirState,
        from: i64,
        claims: &mut Claims,
    ) -> Part {
        let d = seg.dir;
        let part = match d {
            Dir::ServerToClient => Part::Server,
            Dir::ClientToServer => Part::ClientIdle,
        };
        claims.claim(part, Timestamp::from_nanos(from), seg.ts);
        let pause = seg.ts.nanos() - from;
        self.inside_ns[d.index()] += pause;
        if pause > self.longest[d.index()].0 {
            self.longest[d.index()] = (pause, prev.last_frame, seg.frame);
        }
        part
    }

    /// Per direction ([`Dir::index`]), `(pause, frame)` or zeros: the
    /// sender's pause that ended at `frame`, after a control record that
    /// began its message (a TLS rule's finding), was before its message
    /// (request or response), not inside it: taken out of the sums when they
    /// counted it (the longest pause ends there; a shorter one among others
    /// stays in, as before).
    #[cold]
    pub fn before_messages(&mut self, pauses: [(i64, u64); 2]) {
        for (i, (pause, frame)) in pauses.into_iter().enumerate() {
            if frame > 0 && self.longest[i].2 == frame {
                self.inside_ns[i] = (self.inside_ns[i] - pause).max(0);
                self.longest[i] = (0, 0, 0);
            }
        }
    }

    /// The application time found inside the exchange that just ended, per
    /// sending direction, its longest pause and its cork holds; starts the
    /// next exchange.
    pub fn take_exchange(&mut self) -> ([i64; 2], [Pause; 2], [u32; 2]) {
        let r = (self.inside_ns, self.longest, self.cork_holds);
        self.inside_ns = [0; 2];
        self.longest = [(0, 0, 0); 2];
        self.cork_holds = [0; 2];
        r
    }
}

/// Whether the sender's data up to `frame` lies inside one message of the
/// exchange in progress: the response, or the request before any response.
fn inside_message(conn: &Connection, d: Dir, frame: u64) -> bool {
    let Some(ex) = conn.current_exchange() else {
        return false;
    };
    let started = match d {
        Dir::ServerToClient => ex.response_first,
        Dir::ClientToServer if ex.response_first.is_none() => ex.request_first,
        Dir::ClientToServer => None,
    };
    started.is_some_and(|m| m.frame <= frame)
}

impl rule::Rule for IdleState {
    #[inline]
    fn after_segment(&mut self, claims: &mut Claims, conn: &Connection, seg: &Segment<'_>) {
        IdleState::on_segment(self, conn, seg, claims);
    }
}
