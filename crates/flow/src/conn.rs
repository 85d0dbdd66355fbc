//! Per-connection state and its update on each segment.

use std::net::SocketAddr;

use tcpdoctor_wire::{TcpOptions, TcpSegment, Timestamp};

use crate::messages::{Messages, Turn};
use crate::{Dir, SegKind, Segment, Seq, REACT_SLACK_NS};

/// A point in the capture: when, and which frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Mark {
    pub ts: Timestamp,
    pub frame: u64,
}

/// How the client/server roles were decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoleSource {
    /// The client sent the SYN.
    Syn,
    /// The handshake's SYN was not captured; the SYN-ACK sender is the server.
    SynAck,
    /// No handshake captured: the endpoint with the lower (well-known) port is the server.
    Port,
}

impl RoleSource {
    pub fn describe(self) -> &'static str {
        match self {
            RoleSource::Syn => "syn",
            RoleSource::SynAck => "syn-ack",
            RoleSource::Port => "port-guess",
        }
    }
}

/// The three-way handshake as captured.
#[derive(Debug, Clone, Copy, Default)]
pub struct Handshake {
    /// The last SYN before the SYN-ACK (the one the server answered).
    pub syn: Option<Mark>,
    pub first_syn: Option<Mark>,
    pub syn_count: u32,
    pub synack: Option<Mark>,
    /// The timestamp value (RFC 7323 TSval) the first SYN-ACK carried: the
    /// server's clock when it left, the anchor for [`Connection::distance_for`].
    pub synack_tsval: Option<u32>,
    /// The last SYN-ACK (a server that retried it after the client's ACK,
    /// its accept queue full, sends some after that ACK).
    pub last_synack: Option<Mark>,
    /// The last SYN-ACK before the client's ACK: the one that ACK answered.
    pub synack_before_ack: Option<Mark>,
    pub synack_count: u32,
    /// The client's ACK of the SYN-ACK.
    pub ack: Option<Mark>,
}

impl Handshake {
    /// Capture point → server → capture point (SYN to SYN-ACK); none when
    /// the capture's clock ran backwards between them.
    pub fn server_side_ns(&self) -> Option<i64> {
        Some(self.synack?.ts.since(self.syn?.ts)).filter(|&d| d >= 0)
    }

    /// [`Handshake::server_side_ns`] as a round-trip sample: none after a
    /// SYN was sent again, whose SYN-ACK may answer either (Karn's rule,
    /// RFC 6298 §3).
    fn server_side_sample(&self) -> Option<i64> {
        // (A SYN seen twice at once is one SYN captured twice, not a retry.)
        let retried = match (self.first_syn, self.syn) {
            (Some(a), Some(b)) => b.ts.since(a.ts) >= 1_000_000,
            _ => false,
        };
        if retried {
            return None;
        }
        self.server_side_ns()
    }

    /// Capture point → client → capture point (SYN-ACK to ACK).
    pub fn client_side_ns(&self) -> Option<i64> {
        // From the SYN-ACK that was answered: a retried one restarts it, one
        // re-sent after the ACK was not answered by it.
        Some(self.ack?.ts.since(self.synack_before_ack?.ts)).filter(|&d| d >= 0)
    }

    /// The full round trip between the endpoints, whatever the vantage point.
    pub fn rtt_ns(&self) -> Option<i64> {
        Some(self.server_side_ns()? + self.client_side_ns()?)
    }
}

/// The largest window scale (RFC 7323 §2.3).
const MAX_WINDOW_SHIFT: u32 = 14;
/// A sender's largest segment seen this many times, a little below the
/// segment size its handshake allows ([`FULL_SLACK`]), is its full size.
const FULL_SEEN: u32 = 4;
const FULL_SLACK: u32 = 64;
/// New segments ending exactly at the window's edge that reveal an unknown
/// window scale ([`ScaleGuess`]).
const EDGE_HITS: u8 = 4;
/// The receiver's last ACKs a sender's segment may have been sent under.
const GUESS_ACKS: usize = 4;

/// Without the handshake, the window scale of an endpoint, from its peer's
/// flights:
/// - bytes in flight never exceed the window, so the shift is at least the
///   least one (`floor`) under which the field covers every flight seen
///   against the newest ACK;
/// - a sender held by the window fills it to the byte: its new segments
///   end exactly at the edge of an ACK it had, the ACK's number plus its
///   field shifted by the scale. Seen at the receiver, that ACK need not be
///   the newest (those after it are still on their way to the sender), so
///   the last [`GUESS_ACKS`] count. The same shift at or above the floor
///   [`EDGE_HITS`] times, no other between, is the scale.
///
/// A sender held by anything else ends its flights at such an edge only
/// by chance, and not that often.
#[derive(Debug, Clone, Default, PartialEq)]
struct ScaleGuess {
    /// (ACK number, window field, when seen) of the endpoint's last
    /// distinct ACKs, a ring; `newest` indexes the last one.
    acks: [(Seq, u16, Timestamp); GUESS_ACKS],
    held: usize,
    newest: usize,
    floor: u8,
    candidate: u8,
    hits: u8,
    /// The least time from an ACK to the segment that ended at its edge:
    /// capture point → sender → capture point, for the ACK that released it.
    release_ns: Option<i64>,
}

impl ScaleGuess {
    /// The endpoint advertised `field` with `ack`, seen at `ts`.
    fn advertised(&mut self, ack: Seq, field: u16, ts: Timestamp) {
        let (last_ack, last_field, _) = self.acks[self.newest];
        if self.held > 0 && (last_ack, last_field) == (ack, field) {
            return;
        }
        self.newest = if self.held == 0 {
            0
        } else {
            (self.newest + 1) % GUESS_ACKS
        };
        self.acks[self.newest] = (ack, field, ts);
        self.held = (self.held + 1).min(GUESS_ACKS);
    }

    /// The peer sent new data up to `end`, seen at `ts`: the scale, once told.
    fn sent(&mut self, end: Seq, ts: Timestamp) -> Option<u8> {
        if self.held == 0 {
            return None;
        }
        let (ack, field, _) = self.acks[self.newest];
        if field == 0 || end <= ack {
            return None;
        }
        let flight = end.distance_from(ack);
        let field32 = u32::from(field);
        while flight > field32 << self.floor && u32::from(self.floor) < MAX_WINDOW_SHIFT {
            self.floor += 1;
        }
        // The newest ACK first: at the sender it is the one that counts.
        // A shift below the floor never matches: a candidate under it
        // starts over.
        let (edge, released) = (0..self.held).find_map(|i| {
            let (ack, field, at) = self.acks[(self.newest + GUESS_ACKS - i) % GUESS_ACKS];
            if field == 0 || end <= ack {
                return None;
            }
            let d = end.distance_from(ack);
            let q = d / u32::from(field);
            let shift = q.trailing_zeros();
            (d.is_multiple_of(u32::from(field))
                && q.is_power_of_two()
                && shift >= u32::from(self.floor)
                && shift <= MAX_WINDOW_SHIFT)
                .then_some((shift as u8, ts.since(at)))
        })?;
        if self.hits > 0 && edge == self.candidate {
            self.hits += 1;
        } else {
            self.candidate = edge;
            self.hits = 1;
            self.release_ns = None;
        }
        self.release_ns = Some(self.release_ns.map_or(released, |r| r.min(released)));
        (self.hits >= EDGE_HITS).then_some(self.candidate)
    }
}

/// A segment sent, for RTT samples. `ts` is `None` once its bytes were
/// retransmitted: an ACK of them is ambiguous (Karn's algorithm, RFC 6298 §3).
#[derive(Debug, Clone, Copy, Default)]
struct Sent {
    end: Seq,
    ts: Option<Timestamp>,
}

const SENT_RING: usize = 8;

/// The last [`SENT_RING`] segments sent, oldest first from `head`: only the
/// `len` held are ever read (or shown), so emptying it leaves the slots.
#[derive(Clone, Copy, Default)]
struct SentRing {
    slots: [Sent; SENT_RING],
    len: usize,
    head: usize,
}

impl std::fmt::Debug for SentRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries((0..self.len).map(|i| &self.slots[(self.head + i) % SENT_RING]))
            .finish()
    }
}

/// A data segment repeated within this time is a capture duplicate.
pub const DUPLICATE_NS: i64 = 200_000;

/// A data segment repeated within this time *with the same identity* (IPv4
/// identification, or the same option bytes — the same TSval — where the ID
/// is 0) is a capture duplicate too: a copy seen again at another hop, a few
/// packets later. A sender's re-send carries a new IP ID (each of Linux's,
/// Windows' and the BSDs' counters moves per packet) and, a millisecond on,
/// a new TSval.
pub const COPY_NS: i64 = 20_000_000;

/// Data segments remembered per direction to tell copies by (a burst of this
/// many seen at one hop, then again at another, is still caught).
const COPIES_KEPT: usize = 4;

/// A data segment remembered by [`Half::is_capture_copy`].
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SentSig {
    /// Sequence, acknowledgment, length, flags and window, packed ([`copy_sig`]).
    sig: u128,
    ts: Timestamp,
    /// The IP ID, or (where it is 0) a hash of the option bytes with the top
    /// bit set, or 0: nothing tells this segment from a re-send.
    ident: u32,
}

/// One direction of a connection: what one endpoint sent and advertised.
#[derive(Debug, Clone)]
pub struct Half {
    pub addr: SocketAddr,
    /// The base of relative sequence numbers (the ISN when the SYN was seen).
    pub base: Seq,
    pub(crate) base_known: bool,
    pub syn_seen: bool,
    pub mss: Option<u16>,
    /// The window scale option this endpoint sent in its SYN.
    pub window_scale_option: Option<u8>,
    /// The shift applied to this endpoint's windows; `None` when unknown.
    pub window_shift: Option<u8>,
    /// Without the handshake, the shift the peer's flights revealed
    /// ([`Half::infer_shift`]); the rules' windows use it.
    pub inferred_shift: Option<u8>,
    /// Without the handshake, what the peer's flights tell of this
    /// endpoint's window scale; `None` with the scale known (allocated only
    /// for a connection whose handshake was not seen).
    scale_guess: Option<Box<ScaleGuess>>,
    pub sack_permitted: bool,
    pub timestamps: bool,
    /// Highest sequence number sent (exclusive end).
    pub snd_max: Seq,
    pub(crate) snd_init: bool,
    /// Highest sequence number of this side's data acknowledged by the peer.
    pub una: Seq,
    pub(crate) una_init: bool,
    /// The window this endpoint last advertised, scaled.
    pub window: u32,
    pub packets: u64,
    pub data_packets: u64,
    /// Payload bytes sent for the first time.
    pub bytes: u64,
    pub retransmissions: u64,
    pub retransmitted_bytes: u64,
    pub keepalives: u64,
    /// Sequence jumps: data the capture did not see.
    pub gaps: u64,
    pub largest_segment: u32,
    /// Segments of exactly [`Half::largest_segment`] bytes seen (counting
    /// stops at [`FULL_SEEN`]).
    largest_count: u32,
    pub max_in_flight: u32,
    /// Smallest and largest window advertised after the handshake.
    pub window_min: Option<u32>,
    pub window_max: u32,
    pub fin: Option<Mark>,
    pub rst: Option<Mark>,
    /// The IP TTL (hop limit) of the first RST from this side: one that
    /// differs from [`Half::ttl`] was sent by something else on the path
    /// (a firewall or load balancer answering in this endpoint's name).
    pub rst_ttl: u8,
    /// Minimum time from this side's data to the peer's ACK of it, from ACKs
    /// that cover at least two full segments (those are never delayed,
    /// RFC 1122 §4.2.3.2 / RFC 5681 §4.2) or the handshake: the round trip
    /// between the capture point and the peer, without delayed-ACK waits.
    pub rtt_to_peer_ns: Option<i64>,
    pub rtt_samples: u32,
    /// Minimum time from this side's data (sent once) to the peer's first
    /// ACK of it, from any ACK, delayed or not: no ACK passes the capture
    /// point before the data it covers reached the peer, so this is never
    /// shorter than the round trip to the peer. An upper bound on it where
    /// [`Half::rtt_to_peer_ns`] has no sample ([`Connection::distance_bound`]).
    pub rtt_bound_ns: Option<i64>,
    /// The IP TTL (hop limit) of this endpoint's first segment seen.
    pub ttl: u8,
    /// A bare ACK (no data, SYN, FIN or RST) from this side was captured.
    /// A capture filtered to data keeps none, and then the numbers its
    /// packets skip are those ACKs.
    pub bare_ack_seen: bool,
    /// Data segments (and SYNs) seen twice within [`DUPLICATE_NS`]: a mirror
    /// port or a capture on two interfaces, not retransmissions. Dropped.
    pub duplicates: u64,
    /// The last data segments (and SYNs), newest at `copies_at`.
    copies: [SentSig; COPIES_KEPT],
    copies_at: u8,
    sent: SentRing,
    /// New data segments that were not a whole number of full segments:
    /// the end of what the application had written (see [`DeliveryRate`]).
    pub(crate) partials: u32,
    /// How fast the peer's ACKs showed this side's data arriving.
    pub rate: DeliveryRate,
    /// This side's IPv4 identification counter, as its packets show it.
    pub(crate) ip_ids: IpIds,
}

/// A sender's IPv4 identification, counted along its packets. Linux numbers
/// the packets of a connection one by one from a per-socket counter (a TSO
/// or GRO packet of n segments takes n numbers); once one packet of a
/// side is counted (a server's ACK of the request is enough: its SYN-ACK
/// comes from no connection's counter), a number skipped after a timer's
/// silence is a packet of this sender the capture did not see: lost before
/// the capture point. A host that numbers at random does not count up; one
/// that numbers all its connections from one counter (older systems, per
/// peer or for all) counts up while the others are quiet, and its other
/// connections in the capture show the numbers skipped (the tracker checks,
/// [`IpIds::skipped`], and marks the counter shared: nothing is read from
/// it).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct IpIds {
    next: u16,
    /// Packets counted (at most 255).
    run: u8,
    shared: bool,
    /// When the last packet counted was captured.
    last_ns: i64,
    /// The sender's packets just before the last one counted that the
    /// capture did not see.
    unseen: u16,
}

/// A number skipped after a silence at least this long is read as packets
/// lost (a retransmission timer's: Linux's is at least 200 ms); a shorter
/// one, as reordering.
pub(crate) const MIN_QUIET_NS: i64 = 150_000_000;

/// At most this many packets missing at once are read as lost; a larger
/// jump is another numbering.
const MAX_UNSEEN: u16 = 2;

impl IpIds {
    /// Counts a packet numbered `id` that took `segs` numbers: how many of
    /// the sender's packets before it the capture did not see.
    #[inline]
    pub(crate) fn step(&mut self, id: u16, segs: u16, ns: i64) -> u16 {
        let d = id.wrapping_sub(self.next);
        let unseen = if d != 0 && self.gap(d, ns) { d } else { 0 };
        // Any other break in the count (a skip without a timer's silence,
        // a number going back) is not one connection's counter on a clean
        // path: nothing is read from it again.
        if self.run > 0 && d != 0 && unseen == 0 {
            self.shared = true;
        }
        self.last_ns = ns;
        self.run = self.run.saturating_add(1);
        self.next = id.wrapping_add(segs);
        self.unseen = unseen;
        unseen
    }

    fn gap(&self, d: u16, ns: i64) -> bool {
        !self.shared
            && self.run >= 1
            && (1..=MAX_UNSEEN).contains(&d)
            && ns.saturating_sub(self.last_ns) >= MIN_QUIET_NS
    }

    /// The numbers `seg`, captured at `ns`, would skip, `[from, to)`: for
    /// the tracker to look for them among the host's other connections.
    #[inline]
    pub(crate) fn skipped(&self, seg: &TcpSegment<'_>, ns: i64) -> Option<(u16, u16)> {
        let d = seg.ip_id.wrapping_sub(self.next);
        (self.gap(d, ns) && !(seg.flags.syn() && seg.flags.ack()) && !seg.flags.rst())
            .then_some((self.next, seg.ip_id))
    }

    /// The last number this sender used, while counted.
    pub(crate) fn last(&self) -> Option<u16> {
        (self.run > 0).then(|| self.next.wrapping_sub(1))
    }

    /// The counter serves other connections too: read nothing from it.
    pub(crate) fn share(&mut self) {
        self.shared = true;
    }

    /// Counts `seg` (SYN-ACKs and resets come from no connection's counter
    /// on Linux: not counted). `smss`: the sender's segment size, 0 when
    /// unknown: a packet with data then starts the count again (it may
    /// have taken several numbers).
    #[inline]
    pub(crate) fn count(&mut self, seg: &TcpSegment<'_>, smss: u32, ns: i64) -> u16 {
        self.unseen = 0;
        if (seg.flags.syn() && seg.flags.ack()) || seg.flags.rst() {
            return 0;
        }
        if smss == 0 && seg.payload_len > 0 {
            *self = IpIds {
                shared: self.shared,
                ..IpIds::default()
            };
            return 0;
        }
        let segs = if seg.payload_len > smss {
            seg.payload_len.div_ceil(smss).min(u32::from(u16::MAX)) as u16
        } else {
            1
        };
        self.step(seg.ip_id, segs, ns)
    }
}

impl Half {
    /// Packets of this side just before its last one that the capture did
    /// not see, told by its IPv4 identification counting up one per packet
    /// of the connection (Linux, [`IpIds`]); 0 when it does not count so.
    #[inline]
    pub fn unseen_before_last(&self) -> u16 {
        self.ip_ids.unseen
    }

    /// A segment without data or SYN from this side: a bare ACK unless it
    /// is a FIN or RST.
    #[inline]
    fn note_bare_ack(&mut self, seg: &TcpSegment<'_>) {
        use tcpdoctor_wire::TcpFlags as F;
        if !self.bare_ack_seen && seg.flags.0 & (F::ACK | F::FIN | F::RST) == F::ACK {
            self.bare_ack_seen = true;
        }
    }

    pub(crate) fn new(addr: SocketAddr) -> Half {
        Half {
            addr,
            base: Seq(0),
            base_known: false,
            syn_seen: false,
            mss: None,
            window_scale_option: None,
            window_shift: None,
            inferred_shift: None,
            scale_guess: None,
            sack_permitted: false,
            timestamps: false,
            snd_max: Seq(0),
            snd_init: false,
            una: Seq(0),
            una_init: false,
            window: 0,
            packets: 0,
            data_packets: 0,
            bytes: 0,
            retransmissions: 0,
            retransmitted_bytes: 0,
            keepalives: 0,
            gaps: 0,
            largest_segment: 0,
            largest_count: 0,
            max_in_flight: 0,
            window_min: None,
            window_max: 0,
            fin: None,
            rst: None,
            rst_ttl: 0,
            bare_ack_seen: false,
            rtt_to_peer_ns: None,
            rtt_samples: 0,
            rtt_bound_ns: None,
            ttl: 0,
            duplicates: 0,
            copies: [SentSig::default(); COPIES_KEPT],
            copies_at: 0,
            sent: SentRing::default(),
            partials: 0,
            rate: DeliveryRate::default(),
            ip_ids: IpIds::default(),
        }
    }

    /// Back to [`Half::new`] in place, for a reused connection: the ring of
    /// segments sent is read only below its length, so it is not cleared.
    fn reset(&mut self, address: SocketAddr) {
        let Half {
            addr,
            base,
            base_known,
            syn_seen,
            mss,
            window_scale_option,
            window_shift,
            inferred_shift,
            scale_guess,
            sack_permitted,
            timestamps,
            snd_max,
            snd_init,
            una,
            una_init,
            window,
            packets,
            data_packets,
            bytes,
            retransmissions,
            retransmitted_bytes,
            keepalives,
            gaps,
            largest_segment,
            largest_count,
            max_in_flight,
            window_min,
            window_max,
            fin,
            rst,
            rst_ttl,
            rtt_to_peer_ns,
            rtt_samples,
            rtt_bound_ns,
            ttl,
            bare_ack_seen,
            duplicates,
            copies,
            copies_at,
            sent,
            partials,
            rate,
            ip_ids,
        } = self;
        *addr = address;
        *base = Seq(0);
        *base_known = false;
        *syn_seen = false;
        *mss = None;
        *window_scale_option = None;
        *window_shift = None;
        *inferred_shift = None;
        *scale_guess = None;
        *sack_permitted = false;
        *timestamps = false;
        *snd_max = Seq(0);
        *snd_init = false;
        *una = Seq(0);
        *una_init = false;
        *window = 0;
        *packets = 0;
        *data_packets = 0;
        *bytes = 0;
        *retransmissions = 0;
        *retransmitted_bytes = 0;
        *keepalives = 0;
        *gaps = 0;
        *largest_segment = 0;
        *largest_count = 0;
        *max_in_flight = 0;
        *window_min = None;
        *window_max = 0;
        *fin = None;
        *rst = None;
        *rst_ttl = 0;
        *rtt_to_peer_ns = None;
        *rtt_samples = 0;
        *rtt_bound_ns = None;
        *ttl = 0;
        *bare_ack_seen = false;
        *duplicates = 0;
        *copies = [SentSig::default(); COPIES_KEPT];
        *copies_at = 0;
        sent.len = 0;
        sent.head = 0;
        *partials = 0;
        *rate = DeliveryRate::default();
        *ip_ids = IpIds::default();
    }

    /// The shift of this endpoint's windows: the handshake's, else the one
    /// its peer's flights revealed ([`Half::infer_shift`]).
    #[inline]
    pub fn scale(&self) -> Option<u8> {
        self.window_shift.or(self.inferred_shift)
    }

    /// Without the handshake, the peer's flights tell the shift of this
    /// endpoint's windows ([`ScaleGuess`]); `end` is the end of a new data
    /// segment of the peer's. Once told, the rules' windows use it.
    #[cold]
    #[inline(never)]
    fn infer_shift(&mut self, end: Seq, ts: Timestamp) {
        if self.inferred_shift.is_some() {
            return;
        }
        let Some(g) = self.scale_guess.as_deref_mut() else {
            return;
        };
        if let Some(shift) = g.sent(end, ts) {
            self.inferred_shift = Some(shift);
            self.window = u32::from(g.acks[g.newest].1) << shift;
        }
    }

    /// Without the handshake, an ACK of this endpoint's for its
    /// [`ScaleGuess`].
    #[cold]
    #[inline(never)]
    fn guess_advertised(&mut self, seg: &TcpSegment<'_>, ts: Timestamp) {
        let flags = seg.flags;
        if self.inferred_shift.is_none() && flags.ack() && !flags.syn() && !flags.rst() {
            self.scale_guess
                .get_or_insert_default()
                .advertised(Seq(seg.ack), seg.window, ts);
        }
    }

    /// With the window scale told by the peer's flights
    /// ([`Half::inferred_shift`]), the least time seen from one of this
    /// endpoint's ACKs to the peer's segment that ended at its window's
    /// edge: at most the round trip from the capture point to the peer and
    /// back (the peer sent it on that ACK, or later).
    pub fn edge_release_ns(&self) -> Option<i64> {
        self.inferred_shift?;
        self.scale_guess.as_ref()?.release_ns
    }

    /// Bytes sent and not yet acknowledged.
    pub fn in_flight(&self) -> u32 {
        if self.snd_init && self.una_init {
            self.snd_max.distance_from(self.una)
        } else {
            0
        }
    }

    /// The MSS this endpoint announced, else the largest segment it sent
    /// below 9000 bytes, else Ethernet's 1460.
    fn mss_or_guess(&self) -> u32 {
        match self.mss {
            Some(m) if m > 0 => u32::from(m),
            _ if self.largest_segment > 0 && self.largest_segment <= 9000 => self.largest_segment,
            _ => 1460,
        }
    }

    fn rel(&self, s: Seq) -> u32 {
        s.0.wrapping_sub(self.base.0)
    }

    pub(crate) fn remember(&mut self, end: Seq, ts: Timestamp, retransmitted: bool) {
        let at = (self.sent.head + self.sent.len) % SENT_RING;
        self.sent.slots[at] = Sent {
            end,
            ts: (!retransmitted).then_some(ts),
        };
        if self.sent.len < SENT_RING {
            self.sent.len += 1;
        } else {
            self.sent.head = (self.sent.head + 1) % SENT_RING;
        }
        // A retransmission taints earlier entries covering the same bytes (Karn).
        if retransmitted {
            for i in 0..self.sent.len {
                let e = &mut self.sent.slots[(self.sent.head + i) % SENT_RING];
                if e.end >= end {
                    e.ts = None;
                }
            }
        }
    }

    /// The send time of the segment ending exactly at `ack`, if it was sent once;
    /// drops entries the ACK covers.
    fn acked_sample(&mut self, ack: Seq) -> Option<Timestamp> {
        let mut found = None;
        while self.sent.len > 0 {
            let e = self.sent.slots[self.sent.head];
            if e.end > ack {
                break;
            }
            if e.end == ack {
                found = e.ts;
            }
            self.sent.head = (self.sent.head + 1) % SENT_RING;
            self.sent.len -= 1;
        }
        found
    }
}

/// Full segments in a delivery-rate sample: enough to span the bursts of
/// delayed ACKs and receive offload, few enough to fit in one flight.
const RATE_SEGMENTS: u32 = 8;

/// An ACK as the delivery rate takes it in.
struct Sample {
    ack_ns: i64,
    frame: u64,
    /// When the last byte it covered was seen sent (if sent once, ending at the ACK).
    sent_ns: Option<i64>,
    acked: u32,
    /// A sample spans at least this many bytes and this long (a round trip).
    min_bytes: u32,
    min_ns: i64,
    /// The sender's short segments and re-sent ones so far.
    partials: u32,
}

/// The fastest rate the peer's ACKs showed one side's data arriving
/// (bytes over time), after the delivery rate of BBR (Cheng et al.,
/// draft-cheng-iccrg-delivery-rate-estimation): each sample spans at least
/// a round trip (so a sender's bursts and pacing gaps average out) and
/// [`RATE_SEGMENTS`] full segments of ACKed data, over the longer of the time
/// between the ACKs and the time between the data they acknowledged was seen,
/// so ACKs bunched on the way back (ACK compression) do not read as a faster
/// path. A sample during which the sender sent a segment short of full (the
/// end of a write: the application had no more) measures the application,
/// not the path, and is not taken; nor is one during which the sender, with
/// everything acknowledged, sent its next data more than a round trip after
/// the ACK that emptied the pipe (it had nothing to send: application-limited,
/// as BBR marks its samples), nor one with a segment sent again (an
/// ACK filling a hole covers bytes that arrived before the sample began).
/// The best sample is the path's bottleneck
/// rate for this connection: a message moving no faster than that is the
/// bandwidth's time.
#[derive(Debug, Clone, Copy, Default)]
pub struct DeliveryRate {
    /// The open sample: its first ACK's capture time, and the capture time
    /// of the data that ACK covered (ns; 0 when none is open, or unknown).
    ack_ns: i64,
    sent_ns: i64,
    bytes: u32,
    /// The sender's short and re-sent segments when the sample opened.
    partials: u32,
    /// The open sample's first ACK (frame number).
    from_frame: u64,
    /// When the peer last acknowledged everything sent (ns; 0: never).
    emptied_ns: i64,
    /// The fastest sample: bytes over nanoseconds (0 ns: none yet), and
    /// the frames of the ACKs it spans.
    best_bytes: u32,
    best_ns: i64,
    best_frames: (u64, u64),
}

impl DeliveryRate {
    /// Takes in an ACK of `acked` new bytes at `ack_ns`, whose last byte
    /// was seen sent at `sent_ns` (when sent once and ending at the ACK).
    #[inline]
    fn on_ack(&mut self, s: Sample) {
        let Sample {
            ack_ns, partials, ..
        } = s;
        let open = self.ack_ns != 0;
        // Where the data's send times are not known (more segments in
        // flight than remembered, or sent twice), the ACKs' times alone.
        let sent_ns = s.sent_ns.unwrap_or(0);
        if open {
            self.bytes = self.bytes.saturating_add(s.acked);
            let sent_elapsed = if sent_ns != 0 && self.sent_ns != 0 {
                sent_ns.saturating_sub(self.sent_ns)
            } else {
                0
            };
            let elapsed = ack_ns.saturating_sub(self.ack_ns).max(sent_elapsed);
            if self.bytes < s.min_bytes || elapsed < s.min_ns {
                return;
            }
            let faster = self.best_ns == 0
                || u128::from(self.bytes) * self.best_ns as u128
                    > u128::from(self.best_bytes) * elapsed as u128;
            if partials == self.partials && elapsed > 0 && faster {
                self.best_bytes = self.bytes;
                self.best_ns = elapsed;
                self.best_frames = (self.from_frame, s.frame);
            }
        }
        *self = DeliveryRate {
            ack_ns,
            sent_ns,
            bytes: 0,
            partials,
            from_frame: s.frame,
            ..*self
        };
    }

    /// Whether new data sent at `now_ns` with nothing in flight left later
    /// than the ACK that emptied the pipe could have released it (a round
    /// trip, a quarter more, and [`crate::REACT_SLACK_NS`]): the sender had
    /// nothing to send meanwhile.
    #[inline]
    fn idled(&self, now_ns: i64, round_trip: i64) -> bool {
        let released_by = round_trip + round_trip / 4 + crate::REACT_SLACK_NS;
        self.emptied_ns != 0 && now_ns.saturating_sub(self.emptied_ns) > released_by
    }

    /// The fastest sample, as bytes over nanoseconds.
    #[inline]
    pub fn best(&self) -> Option<(u32, i64)> {
        (self.best_ns > 0).then_some((self.best_bytes, self.best_ns))
    }

    /// The frames of the two ACKs the fastest sample spans: the bytes the
    /// second acknowledged beyond the first, over the time between them (or
    /// between the data they acknowledged, when longer).
    pub fn best_frames(&self) -> Option<(u64, u64)> {
        (self.best_ns > 0).then_some(self.best_frames)
    }

    /// How long `bytes` take at the fastest sample's rate.
    pub fn time_for(rate: (u32, i64), bytes: u64) -> i64 {
        let (b, ns) = rate;
        // In floating point: an integer division of this width is a call.
        (bytes as f64 * ns as f64 / f64::from(b.max(1))) as i64
    }

    /// The faster of two rates.
    pub fn faster(a: Option<(u32, i64)>, b: Option<(u32, i64)>) -> Option<(u32, i64)> {
        match (a, b) {
            // The same sample (a path's fastest, met again on its connection).
            (Some(x), Some(y)) if x == y => Some(x),
            (Some(x), Some(y)) => {
                if u128::from(x.0) * y.1 as u128 >= u128::from(y.0) * x.1 as u128 {
                    Some(x)
                } else {
                    Some(y)
                }
            }
            (x, None) => x,
            (None, y) => y,
        }
    }
}

/// A request (client data) and the response that followed it (server data).
#[derive(Debug, Clone, Copy, Default)]
pub struct Exchange {
    /// 0-based index within the connection.
    pub index: u32,
    /// For a connection's first exchange, the first SYN when the handshake
    /// was captured: a fresh connection's request waits for its setup too.
    pub setup: Option<Mark>,
    pub request_first: Option<Mark>,
    pub request_last: Option<Mark>,
    pub request_bytes: u64,
    /// The server's first ACK covering the whole request.
    pub request_acked: Option<Mark>,
    pub response_first: Option<Mark>,
    /// The timestamp value (RFC 7323 TSval) of the response's first segment:
    /// the server's clock when it left ([`Connection::distance_for`]).
    pub response_tsval: Option<u32>,
    pub response_last: Option<Mark>,
    pub response_bytes: u64,
    /// Per direction ([`Dir::index`]): the message's gaps between one
    /// segment and the next shorter than [`crate::MIN_PAUSE_NS`], summed — the
    /// time its bytes were moving back to back, not pausing.
    pub train_ns: [i64; 2],
    /// Per direction: the message's last segment was full and left room in
    /// the receiver's window for another (the sender had more queued and
    /// nothing held it but the congestion window or pacing).
    open: [bool; 2],
    request_end: Seq,
}

impl Exchange {
    /// The first SYN for a connection's first exchange (when captured), else
    /// the first request byte (or response byte, for a server speaking first).
    #[inline]
    pub fn start(&self) -> Option<Mark> {
        self.start_mark().copied()
    }

    #[inline]
    pub fn end(&self) -> Option<Mark> {
        self.end_mark().copied()
    }

    /// [`Exchange::start`] by reference (the marks are not copied to be chosen).
    #[inline]
    fn start_mark(&self) -> Option<&Mark> {
        match (&self.setup, &self.request_first) {
            (Some(m), _) | (None, Some(m)) => Some(m),
            (None, None) => self.response_first.as_ref(),
        }
    }

    /// [`Exchange::end`] by reference.
    #[inline]
    fn end_mark(&self) -> Option<&Mark> {
        self.response_last.as_ref().or(self.request_last.as_ref())
    }

    /// Both a request and a response were seen.
    pub fn is_complete(&self) -> bool {
        self.request_first.is_some() && self.response_first.is_some()
    }

    /// Adds the gap from the message's last segment to `now` to its train
    /// when it was no pause: shorter than [`crate::MIN_PAUSE_NS`], or new
    /// data continuing a flight ([`Exchange::open`]) within half a round
    /// trip — the spacing of the path or of the sender's pacing, too soon
    /// for a congestion window's wait (an ACK's round trip).
    #[inline]
    fn moved(&mut self, dir: Dir, last: Option<Mark>, now: Mark, flow: Flow) {
        let d = dir.index();
        if let Some(last) = last {
            let gap = now.ts.since(last.ts);
            let paced = flow.new && self.open[d] && gap.saturating_mul(2) < flow.round_trip;
            if gap >= 0 && (gap < crate::MIN_PAUSE_NS || paced) {
                self.train_ns[d] += gap;
            }
        }
        self.open[d] = flow.open_after;
    }

    /// From [`Exchange::start`] to the last response byte, at the capture point.
    pub fn duration_ns(&self) -> i64 {
        match (self.start_mark(), self.end_mark()) {
            (Some(a), Some(b)) => b.ts.since(a.ts).max(0),
            _ => 0,
        }
    }
}

/// How a message's segment left, for [`Exchange::moved`].
#[derive(Debug, Clone, Copy)]
struct Flow {
    /// New data (not sent again).
    new: bool,
    /// Full-size, with room in the receiver's window for another after it.
    open_after: bool,
    /// The path's round trip (0: unknown).
    round_trip: i64,
}

impl Flow {
    /// `conn`'s segment of `len` bytes (`kind`) sent `dir`, just counted.
    #[inline]
    fn of(conn: &Connection, dir: Dir, kind: SegKind, len: u32) -> Flow {
        let smss = conn.smss[dir.index()].max(1);
        // Most segments are exactly full, the rest mostly short: the
        // division only for the few larger ones.
        let full = len == smss || (len > smss && len.is_multiple_of(smss));
        let open_after = full
            && conn.half(dir).in_flight().saturating_add(smss) <= conn.half(dir.reverse()).window;
        Flow {
            new: kind == SegKind::NewData,
            open_after,
            round_trip: conn.path_rtt.unwrap_or(0),
        }
    }
}

/// What [`Connection::update`] reports, by reference: no copies on the way.
pub(crate) enum Event<'e, 'a> {
    Segment(&'e Segment<'a>),
    Exchange(&'e Exchange),
}

/// One TCP connection.
#[derive(Debug, Clone)]
pub struct Connection {
    /// 1-based, in order of first appearance.
    pub id: u64,
    pub role_source: RoleSource,
    pub client: Half,
    pub server: Half,
    pub handshake: Handshake,
    pub first: Mark,
    pub last_ts: Timestamp,
    pub packets: u64,
    pub exchanges: u32,
    current: Option<Exchange>,
    /// Rebuilt from a compact handshake for its close ([`Connection::is_compact`]).
    pub(crate) compact: bool,
    /// Both FINs or an RST seen ([`Connection::is_closed`]), kept as a flag:
    /// it is asked for on every segment.
    pub(crate) closed: bool,
    /// [`Connection::smss`] per direction, refreshed when what it depends on changes.
    smss: [u32; 2],
    /// [`Connection::path_rtt_ns`] and [`Connection::distance_to`] (per
    /// direction), refreshed when the handshake or an RTT minimum changes:
    /// rules ask for them on most data segments.
    path_rtt: Option<i64>,
    distance: [Option<i64>; 2],
    /// The messages of a message broker's protocol, where it speaks one.
    messages: Messages,
    /// What the client's first data is ([`Connection::pause_ends_message`]).
    client_framing: Framing,
}

/// What a connection's first client data says of how its requests end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Framing {
    /// No client data yet.
    #[default]
    Unseen,
    /// An HTTP/1 request: its headers say where it ends, and a pause after
    /// them is inside it (a body still being produced).
    Http,
    /// Not captured (a snap length that keeps headers only): unknown.
    NotCaptured,
    /// Anything else: where a message ends is not told.
    Other,
}

/// HTTP/1 request methods (RFC 9110 §9, and PATCH), as a request line starts.
const HTTP_METHODS: [&[u8]; 9] = [
    b"GET ",
    b"POST ",
    b"PUT ",
    b"HEAD ",
    b"DELETE ",
    b"OPTIONS ",
    b"PATCH ",
    b"CONNECT ",
    b"TRACE ",
];

/// A client's pause that starts a message of its own, where the framing
/// does not tell ([`Connection::pause_ends_message`]): as long as a client
/// pause inside a request that `client_delay` would name.
const MESSAGE_PAUSE_NS: i64 = 20_000_000;

impl Framing {
    fn of(payload: &[u8]) -> Framing {
        if payload.is_empty() {
            Framing::NotCaptured
        } else if HTTP_METHODS.iter().any(|m| payload.starts_with(m)) {
            Framing::Http
        } else {
            Framing::Other
        }
    }
}

impl Connection {
    /// The connection `seg` opens, before `seg` is fed to [`Connection::update`].
    pub(crate) fn new(id: u64, frame: u64, ts: Timestamp, seg: &TcpSegment<'_>) -> Connection {
        let src = SocketAddr::new(seg.src, seg.src_port);
        let dst = SocketAddr::new(seg.dst, seg.dst_port);
        let (role_source, client, server) = if seg.flags.syn() && !seg.flags.ack() {
            (RoleSource::Syn, src, dst)
        } else if seg.flags.syn() {
            (RoleSource::SynAck, dst, src)
        } else if server_port_guess(seg.src_port, seg.dst_port) {
            (RoleSource::Port, dst, src)
        } else {
            (RoleSource::Port, src, dst)
        };
        Connection::empty(id, role_source, client, server, Mark { ts, frame })
    }

    /// A connection with nothing seen yet.
    pub(crate) fn empty(
        id: u64,
        role_source: RoleSource,
        client: SocketAddr,
        server: SocketAddr,
        first: Mark,
    ) -> Connection {
        Connection {
            id,
            role_source,
            client: Half::new(client),
            server: Half::new(server),
            handshake: Handshake::default(),
            first,
            last_ts: first.ts,
            packets: 0,
            exchanges: 0,
            current: None,
            compact: false,
            closed: false,
            smss: [1460; 2],
            path_rtt: None,
            distance: [None; 2],
            messages: Messages::default(),
            client_framing: Framing::Unseen,
        }
    }

    /// Back to [`Connection::empty`] in place, for a connection reused from
    /// a spare box (nothing is moved or copied whole).
    pub(crate) fn reset_empty(
        &mut self,
        id: u64,
        role_source: RoleSource,
        client: SocketAddr,
        server: SocketAddr,
        first: Mark,
    ) {
        let Connection {
            id: my_id,
            role_source: my_role,
            client: my_client,
            server: my_server,
            handshake,
            first: my_first,
            last_ts,
            packets,
            exchanges,
            current,
            compact,
            closed,
            smss,
            path_rtt,
            distance,
            messages,
            client_framing,
        } = self;
        *my_id = id;
        *my_role = role_source;
        my_client.reset(client);
        my_server.reset(server);
        *handshake = Handshake::default();
        *my_first = first;
        *last_ts = first.ts;
        *packets = 0;
        *exchanges = 0;
        *current = None;
        *compact = false;
        *closed = false;
        *smss = [1460; 2];
        *path_rtt = None;
        *distance = [None; 2];
        *messages = Messages::default();
        *client_framing = Framing::Unseen;
    }

    /// The largest payload the sender in `dir` puts in one segment (SMSS,
    /// RFC 9293 §3.7.1): the MSS its peer announced, less 12 bytes when both
    /// sides use timestamps (RFC 7323), as Linux counts it.
    pub fn smss(&self, dir: Dir) -> u32 {
        self.smss[dir.index()]
    }

    fn compute_smss(&self, dir: Dir) -> u32 {
        let (me, peer) = (self.half(dir), self.half(dir.reverse()));
        // A sender's segments are bounded by the peer's MSS and by its own
        // path (the MSS it announced says its link's MTU): both SYNs count.
        let base = match (peer.mss.filter(|&m| m > 0), me.mss.filter(|&m| m > 0)) {
            (Some(p), Some(m)) => u32::from(p.min(m)),
            (Some(p), None) => u32::from(p),
            (None, _) => me.mss_or_guess(),
        };
        let options = if me.timestamps && peer.timestamps {
            12
        } else {
            0
        };
        let smss = base.saturating_sub(options).max(1);
        // A sender whose segments all stop a little short of that (options
        // beyond the timestamps, a tunnel's header, a path MTU a little
        // lower) sends its full segments at the size it repeats.
        if me.largest_count >= FULL_SEEN
            && me.largest_segment < smss
            && me.largest_segment + FULL_SLACK >= smss
        {
            return me.largest_segment;
        }
        smss
    }

    pub(crate) fn half_mut(&mut self, dir: Dir) -> &mut Half {
        match dir {
            Dir::ClientToServer => &mut self.client,
            Dir::ServerToClient => &mut self.server,
        }
    }

    pub fn half(&self, dir: Dir) -> &Half {
        match dir {
            Dir::ClientToServer => &self.client,
            Dir::ServerToClient => &self.server,
        }
    }

    /// Nothing the other side of `dir` sent has been captured: no packet at
    /// all, data, ACK or SYN. Its sender's data then crossed a capture point
    /// that does not see its ACKs (asymmetric routing, a tap or a filter on
    /// one direction), and their absence proves nothing.
    pub fn seen_one_way(&self, dir: Dir) -> bool {
        self.half(dir.reverse()).packets == 0
    }

    /// Both FINs were sent and acknowledged: nothing more can follow but
    /// retransmissions.
    pub fn is_finished(&self) -> bool {
        let done = |h: &Half| h.fin.is_some() && h.una_init && h.una >= h.snd_max;
        done(&self.client) && done(&self.server)
    }

    /// Nothing but copies and retransmissions can follow: it was reset, or
    /// both FINs were acknowledged ([`Connection::is_finished`]). A
    /// connection closed by FINs one of which is not acknowledged yet is not
    /// over: that FIN is sent again, backing off like any timeout.
    pub fn is_over(&self) -> bool {
        self.client.rst.is_some() || self.server.rst.is_some() || self.is_finished()
    }

    /// Whether the connection carried a handshake or data (not just stray ACKs or RSTs).
    pub fn is_substantial(&self) -> bool {
        self.handshake.syn_count + self.handshake.synack_count > 0
            || self.client.data_packets + self.server.data_packets > 0
    }

    /// A handshake was seen, never completed, and no data flowed: a
    /// half-open connection (the SYN unanswered, or the SYN-ACK never
    /// acknowledged), which only SYN or SYN-ACK retries can still continue.
    pub fn is_half_open(&self) -> bool {
        self.handshake.syn_count + self.handshake.synack_count > 0
            && self.handshake.ack.is_none()
            && self.client.data_packets + self.server.data_packets == 0
            && !self.closed
    }

    /// Whether both FINs or an RST were seen.
    #[inline]
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Whether the connection showed no more than a plain handshake (a SYN,
    /// its SYN-ACK or an RST-ACK refusing it, the ACK) and was kept compact
    /// until it closed: it was rebuilt for [`Analyzer::close`](crate::Analyzer::close),
    /// and its segments are shown to [`Analyzer::segment`](crate::Analyzer::segment)
    /// just before that, not as they came.
    #[inline]
    pub fn is_compact(&self) -> bool {
        self.compact
    }

    /// Refreshes what is derived from the handshake, the options and the RTT samples.
    pub(crate) fn refresh(&mut self) {
        self.path_rtt = self.compute_path_rtt();
        self.distance = [
            self.compute_distance(Dir::ClientToServer),
            self.compute_distance(Dir::ServerToClient),
        ];
        self.smss = [
            self.compute_smss(Dir::ClientToServer),
            self.compute_smss(Dir::ServerToClient),
        ];
    }

    /// The exchange in progress, if any.
    pub fn current_exchange(&self) -> Option<&Exchange> {
        self.current.as_ref()
    }

    pub(crate) fn take_exchange(&mut self) -> Option<Exchange> {
        self.current.take()
    }

    /// Round trip between the endpoints: the handshake's if captured, else
    /// the sum of the two capture-point-to-peer minimums.
    #[inline]
    pub fn path_rtt_ns(&self) -> Option<i64> {
        self.path_rtt
    }

    fn compute_path_rtt(&self) -> Option<i64> {
        let hs = &self.handshake;
        hs.server_side_sample()
            .and_then(|s| Some(s + hs.client_side_ns()?))
            .or_else(|| Some(self.client.rtt_to_peer_ns? + self.server.rtt_to_peer_ns?))
    }

    pub fn duration_ns(&self) -> i64 {
        self.last_ts.since(self.first.ts).max(0)
    }

    /// Capture point → the endpoint that sends in `side` → capture point: its
    /// half of the handshake if captured, else the minimum clean ACK delay of
    /// the data sent to it.
    #[inline]
    pub fn distance_to(&self, side: Dir) -> Option<i64> {
        self.distance[side.index()]
    }

    /// Capture point → server → capture point when `ex`'s response left the
    /// server: the handshake's, corrected by how much longer (or shorter) the
    /// response took on its way back than the SYN-ACK, measured with the
    /// server's own timestamp clock (RFC 7323 TSval, 1 ms ticks): a queue
    /// that filled or drained since the handshake moves the round trip, and
    /// would otherwise read as the server's time (or hide it). Without
    /// timestamps on both, or when the clock does not tick in milliseconds,
    /// [`Self::distance_to`].
    #[inline]
    pub fn distance_for(&self, ex: &Exchange) -> Option<i64> {
        let distance = self.distance_to(Dir::ServerToClient);
        let hs = &self.handshake;
        // The exchange's and the handshake's marks first; the sample (the
        // most work) last.
        let (Some(first), Some(v), Some(synack), Some(v0)) = (
            ex.response_first,
            ex.response_tsval,
            hs.synack,
            hs.synack_tsval,
        ) else {
            return distance;
        };
        let Some(sample) = hs.server_side_sample() else {
            return distance;
        };
        const TICK_NS: i64 = 1_000_000;
        // A capture clock in whole milliseconds (or coarser) is no finer than
        // the server's: the difference would be its rounding.
        // (Divisibility of the magnitude: one multiplication, no division.)
        if synack.ts.nanos().unsigned_abs() % TICK_NS as u64 == 0
            && first.ts.nanos().unsigned_abs() % TICK_NS as u64 == 0
        {
            return distance;
        }
        let ticks = i64::from(v.wrapping_sub(v0) as i32);
        let span = first.ts.since(synack.ts);
        let longer = span - ticks * TICK_NS;
        // A queue that changed by more than a third of the time since the
        // handshake is a clock of another rate (older kernels tick at 100 or
        // 250 Hz, some at 1 MHz), or a server thinking between the ticks.
        if longer.abs() * 3 > span {
            return distance;
        }
        // Within a tick either way is the clock's resolution, not a queue.
        let longer = longer.signum() * (longer.abs() - TICK_NS).max(0);
        Some((sample + longer).max(0))
    }

    /// At most how long capture point → the endpoint that sends in `side` →
    /// capture point takes: [`Self::distance_to`] where known, else the
    /// quickest ACK (delayed or not) of the data sent to it
    /// ([`Half::rtt_bound_ns`]). Enough to tell that an ACK did *not*
    /// release data that left much later; never a measure of the path.
    #[inline]
    pub fn distance_bound(&self, side: Dir) -> Option<i64> {
        self.distance_to(side)
            .or(self.half(side.reverse()).rtt_bound_ns)
    }

    fn compute_distance(&self, side: Dir) -> Option<i64> {
        match side {
            Dir::ClientToServer => self
                .handshake
                .client_side_ns()
                .or(self.server.rtt_to_peer_ns),
            Dir::ServerToClient => self
                .handshake
                .server_side_sample()
                .or(self.client.rtt_to_peer_ns),
        }
    }

    /// A SYN on this tuple starts a new connection if this one is over or
    /// carries a different initial sequence number after data flowed.
    pub(crate) fn is_reused_by(&self, syn: &TcpSegment<'_>) -> bool {
        if self.is_closed() {
            return true;
        }
        let from_client = SocketAddr::new(syn.src, syn.src_port) == self.client.addr;
        let active = self.client.bytes + self.server.bytes > 0;
        from_client && self.client.syn_seen && Seq(syn.seq) != self.client.base && active
    }

    /// Updates the connection with one segment, as a sequence of named
    /// steps, and shows the segment (and any exchange it completes) to `emit`.
    pub(crate) fn update<'p>(
        &mut self,
        frame: u64,
        ts: Timestamp,
        seg: &TcpSegment<'p>,
        dir: Dir,
        mut emit: impl FnMut(&Connection, Event<'_, 'p>),
    ) {
        let mark = Mark { ts, frame };
        self.packets += 1;
        self.last_ts = self.last_ts.max(ts);
        let (me, peer) = match dir {
            Dir::ClientToServer => (&mut self.client, &mut self.server),
            Dir::ServerToClient => (&mut self.server, &mut self.client),
        };
        me.packets += 1;
        if me.ttl == 0 {
            me.ttl = seg.ttl;
        }
        if me.is_capture_copy(seg, ts) {
            return;
        }
        // How many numbers a TSO or GRO packet took: read off the MSS the handshake set.
        let smss = self.smss[dir.index()] * u32::from(peer.mss.is_some());
        me.ip_ids.count(seg, smss, ts.nanos());
        let mut refresh_rtt = false;
        let mut refresh_smss = false;
        if seg.flags.syn() {
            handshake_options(me, peer, &mut self.handshake, seg, mark);
            refresh_rtt = true;
            refresh_smss = true;
        } else if !me.base_known {
            // Mid-connection: relative numbers start before this segment.
            me.base = Seq(seg.seq).plus(u32::MAX);
            me.base_known = true;
        }
        me.advertise(seg, ts);
        let end = Seq(seg.seq).plus(seg.seq_len());
        let idle = me.in_flight() == 0;
        let (kind, new_bytes) = me.classify(seg, end);
        if peer.scale_guess.is_some() && kind == SegKind::NewData && seg.payload_len > 0 {
            peer.infer_shift(end, ts);
        }
        refresh_smss |= me.record_sent(seg, end, mark, kind, new_bytes);
        let smss = self.smss[dir.index()].max(1);
        // Most segments are exactly full: one comparison tells them.
        if new_bytes > 0
            && ((seg.payload_len != smss && !seg.payload_len.is_multiple_of(smss))
                || (idle && me.rate.idled(ts.nanos(), self.path_rtt.unwrap_or(0))))
        {
            me.partials = me.partials.wrapping_add(1);
        }
        if seg.flags.fin() || seg.flags.rst() {
            self.closed =
                (me.fin.is_some() && peer.fin.is_some()) || me.rst.is_some() || peer.rst.is_some();
        }
        let peer_smss = self.smss[dir.reverse().index()];
        let round_trip = self.path_rtt.unwrap_or(0);
        let (acked, sampled, acks_unseen) = peer.take_ack(seg, mark, peer_smss, round_trip);
        refresh_rtt |= sampled;
        if dir == Dir::ClientToServer && completes_handshake(&self.handshake, peer, seg) {
            self.handshake.ack = Some(mark);
            refresh_rtt = true;
        }
        me.max_in_flight = me.max_in_flight.max(me.in_flight());
        let peer_una = peer.una;

        if refresh_rtt {
            self.path_rtt = self.compute_path_rtt();
            self.distance = [
                self.compute_distance(Dir::ClientToServer),
                self.compute_distance(Dir::ServerToClient),
            ];
        }
        if refresh_smss {
            self.smss = [
                self.compute_smss(Dir::ClientToServer),
                self.compute_smss(Dir::ServerToClient),
            ];
        }
        // Bytes missed before a segment without data open no exchange: when
        // they were sent is unknown.
        let new_data = if kind == SegKind::Ack { 0 } else { new_bytes };
        self.early_end(dir, kind, new_data, acks_unseen, seg, ts, &mut emit);
        let response_began =
            self.exchange_milestones(dir, mark, kind, new_data, end, acked, peer_una, &mut emit);
        if response_began {
            if let Some(ex) = self.current.as_mut() {
                ex.response_tsval = TcpOptions::timestamps(seg.options_raw).map(|t| t.0);
            }
        }

        // What the halves tell is read only now (nothing above changed it
        // since): fewer values are held across the steps before.
        let (me, peer) = (self.half(dir), self.half(dir.reverse()));
        let event = Segment {
            frame,
            ts,
            dir,
            seq: me.rel(Seq(seg.seq)),
            len: seg.payload_len,
            ack: peer.rel(Seq(seg.ack)),
            flags: seg.flags,
            window: me.window,
            kind,
            acked,
            in_flight: me.in_flight(),
            peer_window: peer.window,
            payload: seg.payload,
            options: seg.options_raw,
            ip_id: seg.ip_id,
        };
        emit(self, Event::Segment(&event));
    }

    /// Ends the exchange in progress before `seg` where the turn of
    /// direction does not tell it.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn early_end<'p>(
        &mut self,
        dir: Dir,
        kind: SegKind,
        new_data: u32,
        acks_unseen: bool,
        seg: &TcpSegment<'p>,
        ts: Timestamp,
        emit: &mut impl FnMut(&Connection, Event<'_, 'p>),
    ) {
        if dir == Dir::ClientToServer && new_data > 0 && kind == SegKind::NewData {
            if self.client_framing == Framing::Unseen {
                self.client_framing = Framing::of(seg.payload);
            }
            // Checked inline: most connections are HTTP or a broker's.
            if self.client_framing == Framing::Other && self.pause_ends_message(ts) {
                if let Some(done) = self.current.take() {
                    emit(self, Event::Exchange(&done));
                }
            }
        }
        // The server acknowledging client bytes the capture missed, after
        // its response began: the client sent another request, so the
        // server's next data answers that one, not the response before.
        if acks_unseen && dir == Dir::ServerToClient {
            if let Some(done) = self.current.take_if(|e| e.response_first.is_some()) {
                emit(self, Event::Exchange(&done));
            }
        }
        if new_data > 0 && kind == SegKind::NewData && !self.messages.is_other() {
            self.message_turn(dir, seg, emit);
        }
    }

    /// Whether new client data at `ts` starts a message of its own rather
    /// than continuing the request in progress, where the protocol does not
    /// tell where messages end (neither HTTP/1 nor a broker's protocol): the
    /// server acknowledged all of the request and sent nothing, and the
    /// client sent nothing more for [`MESSAGE_PAUSE_NS`] and longer than the
    /// ACK took to reach it (so TCP held nothing: the application had not
    /// written it). A heartbeat, a keystroke or mouse move sent to a remote
    /// desktop, a chat message, a second query of a multiplexed protocol:
    /// nobody waited through the pause before it. The caller has checked
    /// that the client's first data was no HTTP/1 request ([`Framing::Other`]).
    #[cold]
    fn pause_ends_message(&self, ts: Timestamp) -> bool {
        if !self.messages.is_other() {
            return false;
        }
        let Some(ex) = self.current.as_ref() else {
            return false;
        };
        let (Some(last), Some(acked), None) =
            (ex.request_last, ex.request_acked, ex.response_first)
        else {
            return false;
        };
        let d = Dir::ClientToServer;
        let Some(to_sender) = self
            .distance_to(d)
            .or(self.path_rtt_ns())
            .or(self.distance_bound(d))
        else {
            return false;
        };
        let now = ts.nanos();
        now - last.ts.nanos() >= MESSAGE_PAUSE_NS
            && now > acked.ts.nanos() + to_sender + REACT_SLACK_NS + to_sender / 4
    }

    /// Reads the messages of a broker's protocol in new data: where nobody
    /// waits on what the exchange in progress started, it ends here
    /// ([`Messages::on_data`]).
    #[cold]
    fn message_turn<'p>(
        &mut self,
        dir: Dir,
        seg: &TcpSegment<'p>,
        emit: &mut impl FnMut(&Connection, Event<'_, 'p>),
    ) {
        let response_begun = self
            .current
            .as_ref()
            .is_some_and(|e| e.response_first.is_some());
        let turn =
            self.messages
                .on_data(dir, seg.seq, seg.payload_len, seg.payload, response_begun);
        if turn == Turn::Ends {
            if let Some(done) = self.current.take() {
                emit(self, Event::Exchange(&done));
            }
        }
    }

    /// Exchange milestones: client data opens a request, server data answers
    /// it; the server's ACK covering the whole request is noted, and a
    /// retransmission of the response moves its end. Whether a response began.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn exchange_milestones<'p>(
        &mut self,
        dir: Dir,
        mark: Mark,
        kind: SegKind,
        new_bytes: u32,
        end: Seq,
        acked: u32,
        peer_una: Seq,
        emit: &mut impl FnMut(&Connection, Event<'_, 'p>),
    ) -> bool {
        let mut began = false;
        // A retransmission of the response ends the exchange later: the
        // response is not complete before its last byte got through.
        if kind == SegKind::Retransmission && dir == Dir::ServerToClient {
            if let Some(ex) = self.current.as_mut().filter(|e| e.response_first.is_some()) {
                let resent = Flow {
                    new: false,
                    open_after: false,
                    round_trip: 0,
                };
                ex.moved(dir, ex.response_last, mark, resent);
                ex.response_last = Some(mark);
            }
        }
        // Server data after the client closed its side once the response had
        // begun (a TLS alert or a goodbye answering the close) is waited for
        // by nobody: it neither extends that response nor opens an exchange.
        // A client that half-closes before any response still waits for it.
        let after_close = dir == Dir::ServerToClient
            && self.client.fin.is_some_and(|fin| {
                self.current
                    .as_ref()
                    .and_then(|e| e.response_first)
                    .is_some_and(|first| first.frame < fin.frame)
                    || self.exchanges > 0 && self.current.is_none()
            });
        if new_bytes > 0 && !after_close {
            let flow = Flow::of(self, dir, kind, new_bytes);
            let starts_request = dir == Dir::ClientToServer
                && self.current.is_none_or(|e| e.response_first.is_some());
            if starts_request || (dir == Dir::ServerToClient && self.current.is_none()) {
                if let Some(done) = self.current.take() {
                    emit(self, Event::Exchange(&done));
                }
                let setup = if self.exchanges == 0 {
                    self.handshake.first_syn
                } else {
                    None
                };
                self.current = Some(Exchange {
                    index: self.exchanges,
                    setup,
                    ..Exchange::default()
                });
                self.exchanges += 1;
            }
            if let Some(ex) = self.current.as_mut() {
                match dir {
                    Dir::ClientToServer => {
                        ex.request_first.get_or_insert(mark);
                        ex.moved(dir, ex.request_last, mark, flow);
                        ex.request_last = Some(mark);
                        ex.request_bytes += u64::from(new_bytes);
                        ex.request_end = end;
                        ex.request_acked = None;
                    }
                    Dir::ServerToClient => {
                        if ex.response_first.is_none() {
                            ex.response_first = Some(mark);
                            began = true;
                        }
                        ex.moved(dir, ex.response_last, mark, flow);
                        ex.response_last = Some(mark);
                        ex.response_bytes += u64::from(new_bytes);
                    }
                }
            }
        }
        if dir == Dir::ServerToClient && acked > 0 {
            if let Some(ex) = self.current.as_mut() {
                if ex.request_first.is_some()
                    && ex.request_acked.is_none()
                    && peer_una >= ex.request_end
                {
                    ex.request_acked = Some(mark);
                }
            }
        }
        began
    }
}

/// The options of a SYN or SYN-ACK, and the handshake's milestones.
/// Window scaling is on only if both SYNs carry the option, so the SYN-ACK
/// alone tells (RFC 7323 §2.2); MSS, SACK and timestamps are per side
/// (RFC 9293 §3.7.1, RFC 2018, RFC 7323 §3).
#[inline]
fn handshake_options(
    me: &mut Half,
    peer: &mut Half,
    hs: &mut Handshake,
    seg: &TcpSegment<'_>,
    mark: Mark,
) {
    let seq = Seq(seg.seq);
    let options = seg.options();
    if !me.syn_seen || me.base != seq {
        me.base = seq;
        me.base_known = true;
    }
    me.syn_seen = true;
    me.mss = options.mss.or(me.mss);
    me.window_scale_option = options.window_scale;
    me.sack_permitted = options.sack_permitted;
    me.timestamps = options.timestamps.is_some();
    if seg.flags.ack() {
        let scaling = options.window_scale.is_some();
        me.window_shift = Some(if scaling {
            options.window_scale.unwrap_or(0)
        } else {
            0
        });
        peer.window_shift = match (scaling, peer.syn_seen) {
            (false, _) => Some(0),
            (true, true) => peer.window_scale_option,
            (true, false) => None,
        };
        hs.synack_count += 1;
        hs.last_synack = Some(mark);
        if hs.ack.is_none() {
            hs.synack_before_ack = Some(mark);
        }
        if hs.synack.is_none() {
            hs.synack = Some(mark);
            hs.synack_tsval = options.timestamps.map(|t| t.0);
        }
    } else {
        hs.syn_count += 1;
        if hs.first_syn.is_none() {
            hs.first_syn = Some(mark);
        }
        if hs.synack.is_none() {
            hs.syn = Some(mark);
        }
    }
}

/// What names one transmission of a segment beside its numbers
/// ([`SentSig::ident`]): its IP ID, or where that is 0 (IPv6, and stacks
/// that send 0 with DF) a hash of its option bytes (FNV-1a: the TSval is in
/// them), or 0 without either.
#[inline]
pub(crate) fn copy_ident(seg: &TcpSegment<'_>) -> u32 {
    if seg.ip_id != 0 {
        return u32::from(seg.ip_id);
    }
    if seg.options_raw.is_empty() {
        return 0;
    }
    let h = seg.options_raw.iter().fold(0x811c_9dc5_u32, |h, &b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    h | 1 << 31
}

impl SentSig {
    pub(crate) fn new(sig: u128, ts: Timestamp, ident: u32) -> SentSig {
        SentSig { sig, ts, ident }
    }
}

/// What tells a segment from a capture's copy of it: sequence and
/// acknowledgment numbers, length, flags and window, packed.
#[inline]
pub(crate) fn copy_sig(seq: u32, ack: u32, len: u32, flags: u16, window: u16) -> u128 {
    u128::from(seq)
        | u128::from(ack) << 32
        | u128::from(len) << 64
        | u128::from(flags) << 96
        | u128::from(window) << 112
}

/// Whether the client's `seg` is the ACK of the SYN-ACK that completes the
/// three-way handshake (RFC 9293 §3.5).
#[inline]
fn completes_handshake(hs: &Handshake, server: &Half, seg: &TcpSegment<'_>) -> bool {
    // The handshake's ACK seen already first: so it is on nearly every segment.
    hs.ack.is_none()
        && seg.flags.ack()
        && !seg.flags.rst()
        && !seg.flags.syn()
        && hs.synack.is_some()
        && server.syn_seen
        && Seq(seg.ack) == server.base.plus(1)
}

impl Half {
    /// The same data segment (or SYN, or SYN-ACK) again within
    /// [`DUPLICATE_NS`] is a copy made by the capture setup (a SPAN port sees
    /// both ingress and egress), not something the sender did: no TCP stack
    /// retransmits that fast. So is one seen again within [`COPY_NS`] with
    /// the same IP ID (or, where the ID is 0, the same option bytes: the
    /// same TSval), a few packets later: the packet captured at two hops
    /// (its TTL differs), or on two interfaces. Counted. (Pure ACKs
    /// legitimately repeat: never copies.)
    #[inline]
    fn is_capture_copy(&mut self, seg: &TcpSegment<'_>, ts: Timestamp) -> bool {
        if seg.payload_len == 0 && !seg.flags.syn() {
            return false;
        }
        let sig = copy_sig(seg.seq, seg.ack, seg.payload_len, seg.flags.0, seg.window);
        let ident = copy_ident(seg);
        // Data that starts where this side's data ended is new: no copy
        // (nearly every segment; the others are looked up). Two identities
        // that differ are two transmissions however close (a re-send after an
        // ICMP "fragmentation needed" comes within microseconds); an unknown
        // one leaves time alone to tell.
        let new = self.snd_init && Seq(seg.seq) == self.snd_max;
        let copy = !new
            && self.copies.iter().any(|c| {
                c.sig == sig && {
                    let since = ts.since(c.ts);
                    if ident == 0 || c.ident == 0 {
                        since <= DUPLICATE_NS
                    } else {
                        c.ident == ident && since <= COPY_NS
                    }
                }
            });
        if copy {
            self.duplicates += 1;
            return true;
        }
        self.sent_once(SentSig { sig, ts, ident });
        false
    }

    /// Notes a segment sent as [`Half::is_capture_copy`] would have (also for
    /// a handshake rebuilt from its compact form).
    pub(crate) fn sent_once(&mut self, sent: SentSig) {
        self.copies_at = (self.copies_at + 1) % COPIES_KEPT as u8;
        self.copies[usize::from(self.copies_at)] = sent;
    }

    /// The window `seg` advertises, scaled (RFC 7323 §2.2: never on SYNs);
    /// the smallest and largest after the handshake are kept.
    ///
    /// Without the handshake the scale is unknown (a capture started after
    /// it): the window is then at most the field shifted by 14, the largest
    /// scale, and that bound is what the rules see — a field of 66 may be
    /// 66 bytes or 66 KB, so no window is taken for full that may not be —
    /// until the peer's flights reveal the shift ([`Half::infer_shift`]).
    /// A zero window is zero at any scale (and an RST's window is no
    /// window). The smallest and largest kept are the fields as sent, as
    /// Wireshark shows them then.
    #[inline]
    fn advertise(&mut self, seg: &TcpSegment<'_>, ts: Timestamp) -> u32 {
        let flags = seg.flags;
        let raw = u32::from(seg.window);
        let (window, shown) = match self.window_shift {
            _ if flags.syn() || flags.rst() => (raw, raw),
            Some(shift) => (raw << shift, raw << shift),
            None => (
                raw << self.inferred_shift.map_or(MAX_WINDOW_SHIFT, u32::from),
                raw,
            ),
        };
        if self.window_shift.is_none() {
            self.guess_advertised(seg, ts);
        }
        self.window = window;
        if !flags.syn() && !flags.rst() {
            self.window_min = Some(self.window_min.map_or(shown, |w| w.min(shown)));
            self.window_max = self.window_max.max(shown);
        }
        window
    }

    /// Where `seg` falls in this sender's sequence space (RFC 9293 §3.4):
    /// new data (beyond the highest sequence sent; a jump past it is data the
    /// capture missed), a retransmission (below it), or a keep-alive or window
    /// probe (one byte or none just below it with everything acknowledged,
    /// RFC 1122 §4.2.3.6). Returns the kind and the bytes sent for the first
    /// time (for a segment without data past the highest sequence sent, the
    /// bytes the capture missed before it).
    #[inline]
    fn classify(&mut self, seg: &TcpSegment<'_>, end: Seq) -> (SegKind, u32) {
        let seq = Seq(seg.seq);
        let len = seg.payload_len;
        if seg.flags.syn() {
            if !self.snd_init || end > self.snd_max {
                self.snd_max = end;
                self.snd_init = true;
            }
            (SegKind::Syn, 0)
        } else if len == 0 {
            let mut missed = 0;
            if !self.snd_init {
                self.snd_max = end;
                self.snd_init = true;
            } else if end > self.snd_max {
                // A segment without data (an ACK, a FIN) past the highest
                // sequence sent: the bytes before it were sent, and the capture
                // missed them, as for data past a gap. (An RST's sequence
                // number is not always the sender's: it proves nothing.)
                if seq > self.snd_max && !seg.flags.rst() {
                    self.gaps += 1;
                    missed = seq.distance_from(self.snd_max);
                }
                self.snd_max = end;
            }
            self.note_bare_ack(seg);
            (SegKind::Ack, missed)
        } else if !self.snd_init || seq >= self.snd_max {
            // Past a gap, the bytes the capture skipped were sent too (the
            // segment that fills it later is a retransmission): counted here.
            let mut new_bytes = len;
            if self.snd_init && seq > self.snd_max {
                self.gaps += 1;
                new_bytes = end.distance_from(self.snd_max);
            }
            self.snd_max = end;
            self.snd_init = true;
            (SegKind::NewData, new_bytes)
        } else if end <= self.snd_max {
            let all_acked = self.una_init && self.una >= self.snd_max.plus(u32::MAX);
            if len <= 1 && end == self.snd_max && all_acked {
                self.keepalives += 1;
                (SegKind::KeepAliveOrProbe, 0)
            } else {
                self.retransmissions += 1;
                self.retransmitted_bytes += u64::from(len);
                (SegKind::Retransmission, 0)
            }
        } else {
            // Overlaps old data and extends it: a retransmission carrying new bytes.
            let new_bytes = end.distance_from(self.snd_max);
            self.snd_max = end;
            self.retransmissions += 1;
            self.retransmitted_bytes += u64::from(len - new_bytes.min(len));
            (SegKind::Retransmission, new_bytes)
        }
    }

    /// Retransmission bookkeeping: counts what was sent, remembers its end and
    /// time for RTT samples (a retransmitted range gives none: Karn's
    /// algorithm, RFC 6298 §3), and notes FIN and RST. Returns whether the
    /// largest segment grew (the sender's MSS estimate changes).
    #[inline]
    fn record_sent(
        &mut self,
        seg: &TcpSegment<'_>,
        end: Seq,
        mark: Mark,
        kind: SegKind,
        new_bytes: u32,
    ) -> bool {
        let len = seg.payload_len;
        let flags = seg.flags;
        let mut larger = false;
        self.bytes += u64::from(new_bytes);
        if len > 0 {
            self.data_packets += 1;
            if len >= self.largest_segment {
                if len > self.largest_segment {
                    self.largest_segment = len;
                    self.largest_count = 1;
                    larger = true;
                } else if self.largest_count < FULL_SEEN {
                    self.largest_count += 1;
                    larger = self.largest_count == FULL_SEEN;
                }
            }
        }
        if len > 0 || flags.fin() || flags.syn() {
            self.remember(end, mark.ts, kind == SegKind::Retransmission);
        }
        if flags.fin() && self.fin.is_none() {
            self.fin = Some(mark);
        }
        if flags.rst() && self.rst.is_none() {
            self.rst = Some(mark);
            self.rst_ttl = seg.ttl;
        }
        larger
    }

    /// What `seg` (from the peer) acknowledges of this side's data: the
    /// bytes newly acknowledged, and whether it gave an RTT sample. Only ACKs
    /// that cannot have been delayed give samples: those covering two full
    /// segments (`peer_smss` is this side's segment size; RFC 1122
    /// §4.2.3.2, RFC 5681 §4.2) and the SYN-ACK's.
    #[inline]
    fn take_ack(
        &mut self,
        seg: &TcpSegment<'_>,
        mark: Mark,
        smss: u32,
        round_trip: i64,
    ) -> (u32, bool, bool) {
        let ts = mark.ts;
        let flags = seg.flags;
        if !flags.ack() || flags.rst() {
            return (0, false, false);
        }
        let a = Seq(seg.ack);
        if !self.una_init {
            self.una = a;
            self.una_init = true;
            return (0, false, false);
        }
        if a <= self.una {
            return (0, false, false);
        }
        if self.snd_init && a > self.snd_max {
            // Bytes the capture never saw (more than a FIN) were received.
            return (0, false, a.distance_from(self.snd_max) > 1);
        }
        let acked = a.distance_from(self.una);
        self.una = a;
        if a == self.snd_max {
            self.rate.emptied_ns = ts.nanos();
        }
        let immediate = acked >= 2 * smss || self.snd_max == a && flags.syn();
        let mut sampled = false;
        let sent = self.acked_sample(a);
        let sample = Sample {
            ack_ns: ts.nanos(),
            frame: mark.frame,
            sent_ns: sent.map(Timestamp::nanos),
            acked,
            min_bytes: RATE_SEGMENTS * smss.max(1),
            min_ns: round_trip,
            partials: self.partials.wrapping_add(self.retransmissions as u32),
        };
        self.rate.on_ack(sample);
        if let Some(sent_at) = sent.filter(|&t| t <= ts) {
            let sample = ts.since(sent_at);
            self.rtt_bound_ns = Some(self.rtt_bound_ns.map_or(sample, |m| m.min(sample)));
            if immediate {
                self.rtt_samples += 1;
                sampled = true;
                self.rtt_to_peer_ns = Some(self.rtt_to_peer_ns.map_or(sample, |m| m.min(sample)));
            }
        }
        (acked, sampled, false)
    }
}

/// Whether `src_port` looks like the server side of a connection whose
/// handshake was not captured: a port below 1024, or the lower of two ports
/// when only one is outside the ephemeral range.
fn server_port_guess(src_port: u16, dst_port: u16) -> bool {
    let known = |p: u16| {
        p < 1024
            || matches!(
                p,
                1080 | 3128
                    | 3306
                    | 5432
                    | 6379
                    | 8000
                    | 8008
                    | 8080
                    | 8081
                    | 8443
                    | 8888
                    | 9000
                    | 9090
                    | 9200
                    | 11211
                    | 27017
            )
    };
    match (known(src_port), known(dst_port)) {
        (true, false) => true,
        (false, true) => false,
        _ => src_port < dst_port,
    }
}

/// Each step of [`Connection::update`] on byte-built segments.
#[cfg(test)]
mod steps {
    use super::*;
    use tcpdoctor_wire::TcpFlags;

    const SYN: u16 = TcpFlags::SYN;
    const ACK: u16 = TcpFlags::ACK;
    const PSH: u16 = TcpFlags::PSH | TcpFlags::ACK;

    /// A connection's own counter (Linux): the SYN and the handshake's ACK
    /// count up by one; the request after a timer's silence skips the one
    /// the capture never saw. A TSO packet of three segments takes three
    /// numbers. A skip without a silence (another connection's packet, or
    /// reordering) stops the reading for good.
    #[test]
    fn ip_ids_skipped_after_a_silence_are_packets_lost_upstream() {
        const MS: i64 = 1_000_000;
        let mut ids = IpIds::default();
        assert_eq!(ids.step(100, 1, 0), 0);
        assert_eq!(ids.step(101, 1, 20 * MS), 0);
        assert_eq!(ids.step(103, 1, 240 * MS), 1);
        assert_eq!(ids.skipped(&seg(1, 1, PSH, 10, &[]), 500 * MS), None);
        assert_eq!(ids.step(104, 3, 241 * MS), 0);
        assert_eq!(ids.step(107, 1, 242 * MS), 0);
        assert_eq!(ids.last(), Some(107));
        // Not after a short pause: a shared or shuffled counter.
        let mut ids = IpIds::default();
        for (i, id) in [500u16, 501, 502].into_iter().enumerate() {
            assert_eq!(ids.step(id, 1, i as i64 * MS), 0);
        }
        assert_eq!(ids.step(504, 1, 3 * MS), 0);
        assert_eq!(ids.step(505, 1, 4 * MS), 0);
        assert_eq!(ids.step(507, 1, 400 * MS), 0);
        // A counter starting anew, and one wrapping around.
        let mut ids = IpIds::default();
        assert_eq!(ids.step(u16::MAX, 1, 0), 0);
        assert_eq!(ids.step(0, 1, MS), 0);
        assert_eq!(ids.step(2, 1, 300 * MS), 1);
    }

    /// A window of unknown scale: flights beyond the field at shift 0 rule
    /// it out; flights ending exactly at the edge of 63 << 10, four times,
    /// reveal shift 10. Seen at the receiver, the edge is that of an ACK
    /// before the newest. A sender whose flights stop short of every edge
    /// reveals nothing.
    #[test]
    fn flights_at_the_window_edge_reveal_an_unknown_scale() {
        let t = |n: u32| Timestamp::from_nanos(i64::from(n));
        let mut g = ScaleGuess::default();
        g.advertised(Seq(1000), 63, t(0));
        for end in [41_000, 61_000, 65_512] {
            assert_eq!(g.sent(Seq(end), t(100)), None);
        }
        assert_eq!((g.floor, g.candidate, g.hits), (10, 10, 1));
        let mut at = 1000;
        let mut told = None;
        for _ in 0..4 {
            // One ACK the sender had, one newer still on its way.
            g.advertised(Seq(at), 63, t(at));
            g.advertised(Seq(at + 1448), 63, t(at + 10));
            told = told.or(g.sent(Seq(at + 64_512), t(at + 30)));
            at += 2896;
        }
        assert_eq!((told, g.release_ns), (Some(10), Some(30)));

        let mut short = ScaleGuess::default();
        for i in 0..100 {
            short.advertised(Seq(i * 1448), 63, t(i));
            assert_eq!(short.sent(Seq(i * 1448 + 50_000 + i * 7), t(i)), None);
        }
        assert_eq!(short.floor, 10);

        let addr: SocketAddr = "10.0.0.2:80".parse().unwrap();
        let mut r = Half::new(addr);
        for i in 0..4 {
            let ack = Seq(i * 1448);
            r.scale_guess
                .get_or_insert_default()
                .advertised(ack, 63, t(i));
            r.infer_shift(ack.plus(64_512), t(i + 5));
        }
        assert_eq!(
            (r.scale(), r.window, r.edge_release_ns()),
            (Some(10), 64_512, Some(5))
        );
        let mut known = Half::new(addr);
        known.window_shift = Some(7);
        known.infer_shift(Seq(5000), t(0));
        assert_eq!((known.inferred_shift, known.scale()), (None, Some(7)));
    }

    fn seg(
        seq: u32,
        ack: u32,
        flags: u16,
        len: u32,
        options_raw: &'static [u8],
    ) -> TcpSegment<'static> {
        TcpSegment {
            src: "10.0.0.1".parse().unwrap(),
            dst: "10.0.0.2".parse().unwrap(),
            ttl: 64,
            ip_id: 0,
            src_port: 40000,
            dst_port: 80,
            seq,
            ack,
            flags: TcpFlags(flags),
            window: 1000,
            options_raw,
            payload_len: len,
            payload: &[],
            length_clamped: false,
        }
    }

    fn cls(h: &mut Half, s: &TcpSegment<'_>) -> (SegKind, u32) {
        h.classify(s, Seq(s.seq).plus(s.seq_len()))
    }

    fn sent(h: &mut Half, s: &TcpSegment<'_>, mark: Mark, kind: SegKind, new: u32) -> bool {
        h.record_sent(s, Seq(s.seq).plus(s.seq_len()), mark, kind, new)
    }

    fn half() -> Half {
        Half::new("10.0.0.1:40000".parse().unwrap())
    }

    fn at(ms: i64) -> Timestamp {
        Timestamp::from_nanos(ms * 1_000_000)
    }

    #[test]
    fn a_copy_within_200_us_is_the_capture_s_not_a_retransmission() {
        let mut h = half();
        let s = seg(1, 1, PSH, 100, &[]);
        assert!(!h.is_capture_copy(&s, at(0)));
        assert!(h.is_capture_copy(&s, Timestamp::from_nanos(150_000)));
        // Later, the same bytes are the sender's retransmission.
        assert!(!h.is_capture_copy(&s, at(300)));
        // Pure ACKs are never copies.
        assert!(!h.is_capture_copy(&seg(1, 1, ACK, 0, &[]), at(300)));
        assert!(!h.is_capture_copy(&seg(1, 1, ACK, 0, &[]), at(300)));
        // A SYN captured twice 1 µs apart is one SYN; again after 1 s, a retry.
        let syn = seg(7, 0, SYN, 0, &[]);
        assert!(!h.is_capture_copy(&syn, at(400)));
        assert!(h.is_capture_copy(&syn, Timestamp::from_nanos(400_001_000)));
        assert!(!h.is_capture_copy(&syn, at(1400)));
        assert_eq!(h.duplicates, 2);
    }

    #[test]
    fn a_copy_seen_again_at_another_hop_is_told_by_its_ip_id() {
        // nDPI's ftp-start-tls.pcap: three segments at TTL 63, then the same
        // three (same IP IDs) at TTL 61, 2-130 µs... and psiphon3.pcap's
        // copies 1-7 ms later, interleaved.
        let mut h = half();
        let burst = [(1, 0xf9d7), (513, 0xf9d8), (1025, 0xf9d9)].map(|(seq, id)| {
            let mut s = seg(seq, 1, PSH, 512, &[]);
            s.ip_id = id;
            s
        });
        for (i, s) in burst.iter().enumerate() {
            assert!(!h.is_capture_copy(s, at(i as i64)));
        }
        for (i, s) in burst.iter().enumerate() {
            let mut copy = s.clone();
            copy.ttl -= 2;
            assert!(h.is_capture_copy(&copy, at(7 + i as i64)), "copy {i}");
        }
        // The sender's re-send of the first, 10 ms on: a new IP ID.
        let mut resend = burst[0].clone();
        resend.ip_id = 0xf9da;
        assert!(!h.is_capture_copy(&resend, at(10)));
        // Where the ID is 0, the option bytes (the TSval) tell: a copy has
        // the same, a re-send a later TSval.
        let ts = |v: u8| [1, 1, 8, 10, 0, 0, 0, v, 0, 0, 0, 1];
        let (t1, t2) = (ts(1), ts(2));
        let mut a = seg(5000, 1, PSH, 100, &[]);
        a.options_raw = &t1;
        assert!(!h.is_capture_copy(&a, at(100)));
        assert!(h.is_capture_copy(&a, at(101)));
        let mut b = a.clone();
        b.options_raw = &t2;
        assert!(!h.is_capture_copy(&b, at(105)));
        // Two identities are two transmissions, even 50 µs apart.
        let mut quick = resend.clone();
        quick.ip_id = 0xf9db;
        assert!(!h.is_capture_copy(&quick, Timestamp::from_nanos(10_050_000)));
        // Beyond COPY_NS, the same identity is no copy (a counter wrapped).
        let mut late = burst[1].clone();
        late.ip_id = 0xf9d8;
        assert!(!h.is_capture_copy(&late, at(40)));
        assert_eq!(h.duplicates, 4);
    }

    /// A client SYN with `syn_options`, then the server's SYN-ACK with
    /// `synack_options`, through the handshake step: (client, server, handshake).
    fn handshake(
        syn_options: &'static [u8],
        synack_options: &'static [u8],
    ) -> (Half, Half, Handshake) {
        let (mut c, mut s, mut hs) = (half(), half(), Handshake::default());
        let syn = seg(100, 0, SYN, 0, syn_options);
        handshake_options(&mut c, &mut s, &mut hs, &syn, Mark::default());
        let synack = seg(500, 101, SYN | ACK, 0, synack_options);
        handshake_options(&mut s, &mut c, &mut hs, &synack, Mark::default());
        (c, s, hs)
    }

    #[test]
    fn scaling_needs_both_syns_and_never_scales_a_syn() {
        // SYN with wscale 7 (MSS 1460), SYN-ACK without: no scaling either way.
        let opts: &'static [u8] = &[2, 4, 5, 0xB4, 1, 3, 3, 7];
        let (c, s, hs) = handshake(opts, &[2, 4, 5, 0xB4]);
        assert_eq!((c.window_shift, s.window_shift), (Some(0), Some(0)));
        assert_eq!((hs.syn_count, hs.synack_count), (1, 1));
        assert_eq!(c.mss, Some(1460));
        // Both offer it: each side's own shift; windows on SYNs unscaled.
        let (mut c, s, _) = handshake(opts, &[1, 3, 3, 2]);
        assert_eq!((c.window_shift, s.window_shift), (Some(7), Some(2)));
        assert_eq!(
            c.advertise(&seg(100, 0, SYN, 0, opts), Timestamp::default()),
            1000
        );
        assert_eq!(
            c.advertise(&seg(101, 501, ACK, 0, &[]), Timestamp::default()),
            128_000
        );
        assert_eq!(c.window_min, Some(128_000));
    }

    #[test]
    fn sequence_space_new_data_gaps_retransmissions_and_keepalives() {
        let mut h = half();
        assert_eq!(
            cls(&mut h, &seg(1, 1, PSH, 100, &[])),
            (SegKind::NewData, 100)
        );
        // A jump past the highest sequence: data the capture missed, sent
        // too (its 100 bytes count with the segment's own).
        assert_eq!(
            cls(&mut h, &seg(201, 1, PSH, 100, &[])),
            (SegKind::NewData, 200)
        );
        assert_eq!(h.gaps, 1);
        assert_eq!(
            cls(&mut h, &seg(1, 1, PSH, 100, &[])),
            (SegKind::Retransmission, 0)
        );
        // Overlapping old data and extending it: 50 new bytes.
        assert_eq!(
            cls(&mut h, &seg(251, 1, PSH, 100, &[])),
            (SegKind::Retransmission, 50)
        );
        assert_eq!(h.retransmissions, 2);
        // Everything acknowledged: one byte just below the next sequence is a keep-alive.
        h.una = Seq(351);
        h.una_init = true;
        assert_eq!(
            cls(&mut h, &seg(350, 1, ACK, 1, &[])),
            (SegKind::KeepAliveOrProbe, 0)
        );
        assert_eq!(cls(&mut h, &seg(351, 1, ACK, 0, &[])), (SegKind::Ack, 0));
        // An ACK past the highest sequence: 100 bytes the capture missed,
        // counted as sent like those before data past a gap.
        assert_eq!(cls(&mut h, &seg(451, 1, ACK, 0, &[])), (SegKind::Ack, 100));
        assert_eq!(h.gaps, 2);
        // A FIN's own sequence number is not a gap; an RST's proves nothing.
        assert_eq!(
            cls(&mut h, &seg(451, 1, ACK | TcpFlags::FIN, 0, &[])),
            (SegKind::Ack, 0)
        );
        assert_eq!(
            cls(&mut h, &seg(9999, 0, TcpFlags::RST, 0, &[])),
            (SegKind::Ack, 0)
        );
        assert_eq!(h.gaps, 2);
    }

    #[test]
    fn only_acks_that_cannot_be_delayed_give_rtt_samples() {
        let mut h = half();
        h.snd_init = true;
        h.una = Seq(1);
        h.una_init = true;
        h.snd_max = Seq(1 + 3000);
        h.remember(Seq(1001), at(0), false);
        h.remember(Seq(3001), at(1), false);
        // One segment's ACK after 40 ms: possibly delayed, no sample.
        assert_eq!(
            h.take_ack(
                &seg(1, 1001, ACK, 0, &[]),
                Mark {
                    ts: at(40),
                    frame: 0
                },
                1000,
                0
            ),
            (1000, false, false)
        );
        // Two segments at once: a sample of 9 ms (sent at 1 ms).
        assert_eq!(
            h.take_ack(
                &seg(1, 3001, ACK, 0, &[]),
                Mark {
                    ts: at(10),
                    frame: 0
                },
                1000,
                0
            ),
            (2000, true, false)
        );
        assert_eq!(h.rtt_to_peer_ns, Some(9_000_000));
        // Old: nothing. Beyond what was seen sent: nothing acknowledged,
        // but bytes the capture missed were received (more than a FIN).
        assert_eq!(
            h.take_ack(
                &seg(1, 2001, ACK, 0, &[]),
                Mark {
                    ts: at(11),
                    frame: 0
                },
                1000,
                0
            ),
            (0, false, false)
        );
        assert_eq!(
            h.take_ack(
                &seg(1, 3002, ACK, 0, &[]),
                Mark {
                    ts: at(11),
                    frame: 0
                },
                1000,
                0
            ),
            (0, false, false)
        );
        assert_eq!(
            h.take_ack(
                &seg(1, 9001, ACK, 0, &[]),
                Mark {
                    ts: at(11),
                    frame: 0
                },
                1000,
                0
            ),
            (0, false, true)
        );
    }

    #[test]
    fn the_ack_of_the_syn_ack_completes_the_handshake() {
        let mut server = half();
        server.syn_seen = true;
        server.base = Seq(500);
        let hs = Handshake {
            synack: Some(Mark::default()),
            ..Handshake::default()
        };
        assert!(completes_handshake(
            &hs,
            &server,
            &seg(101, 501, ACK, 0, &[])
        ));
        assert!(!completes_handshake(
            &hs,
            &server,
            &seg(101, 502, ACK, 0, &[])
        ));
        assert!(!completes_handshake(
            &Handshake::default(),
            &server,
            &seg(101, 501, ACK, 0, &[])
        ));
        assert!(!completes_handshake(
            &hs,
            &server,
            &seg(101, 501, TcpFlags::RST | ACK, 0, &[])
        ));
    }

    #[test]
    fn sent_bookkeeping_counts_bytes_and_marks_fin_and_rst() {
        let mut h = half();
        let s = seg(1, 1, PSH, 1200, &[]);
        assert!(sent(&mut h, &s, Mark::default(), SegKind::NewData, 1200));
        assert!(!sent(
            &mut h,
            &seg(1201, 1, PSH, 800, &[]),
            Mark::default(),
            SegKind::NewData,
            800
        ));
        assert_eq!(
            (h.data_packets, h.bytes, h.largest_segment),
            (2, 2000, 1200)
        );
        sent(
            &mut h,
            &seg(2001, 1, TcpFlags::FIN | ACK, 0, &[]),
            Mark {
                ts: at(5),
                frame: 9,
            },
            SegKind::Ack,
            0,
        );
        assert_eq!(h.fin.map(|m| m.frame), Some(9));
        assert!(h.rst.is_none());
    }
}
