//! Per-connection state and its update on each segment.

use std::net::{IpAddr, SocketAddr};

use tcpdoctor_wire::{TcpFlags, TcpSegment, Timestamp};

use crate::{Dir, SegKind, Segment, Seq};

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
    /// The last SYN-ACK (the one answered, when the server retried it).
    pub last_synack: Option<Mark>,
    pub synack_count: u32,
    /// The client's ACK of the SYN-ACK.
    pub ack: Option<Mark>,
}

impl Handshake {
    /// Capture point → server → capture point (SYN to SYN-ACK).
    pub fn server_side_ns(&self) -> Option<i64> {
        Some(self.synack?.ts.since(self.syn?.ts))
    }

    /// Capture point → client → capture point (SYN-ACK to ACK).
    pub fn client_side_ns(&self) -> Option<i64> {
        // From the SYN-ACK that was answered: a retried one restarts it.
        Some(self.ack?.ts.since(self.last_synack?.ts))
    }

    /// The full round trip between the endpoints, whatever the vantage point.
    pub fn rtt_ns(&self) -> Option<i64> {
        Some(self.server_side_ns()? + self.client_side_ns()?)
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

/// A data segment repeated within this time is a capture duplicate.
pub const DUPLICATE_NS: i64 = 200_000;

/// One direction of a connection: what one endpoint sent and advertised.
#[derive(Debug, Clone)]
pub struct Half {
    pub addr: SocketAddr,
    /// The base of relative sequence numbers (the ISN when the SYN was seen).
    pub base: Seq,
    base_known: bool,
    pub syn_seen: bool,
    pub mss: Option<u16>,
    /// The window scale option this endpoint sent in its SYN.
    pub window_scale_option: Option<u8>,
    /// The shift applied to this endpoint's windows; `None` when unknown.
    pub window_shift: Option<u8>,
    pub sack_permitted: bool,
    pub timestamps: bool,
    /// Highest sequence number sent (exclusive end).
    pub snd_max: Seq,
    snd_init: bool,
    /// Highest sequence number of this side's data acknowledged by the peer.
    pub una: Seq,
    una_init: bool,
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
    pub max_in_flight: u32,
    /// Smallest and largest window advertised after the handshake.
    pub window_min: Option<u32>,
    pub window_max: u32,
    pub fin: Option<Mark>,
    pub rst: Option<Mark>,
    /// Minimum time from this side's data to the peer's ACK of it, from ACKs
    /// that cover at least two full segments (those are never delayed,
    /// RFC 1122 §4.2.3.2 / RFC 5681 §4.2) or the handshake: the round trip
    /// between the capture point and the peer, without delayed-ACK waits.
    pub rtt_to_peer_ns: Option<i64>,
    pub rtt_samples: u32,
    /// The IP TTL (hop limit) of this endpoint's first segment seen.
    pub ttl: u8,
    /// Data segments seen twice within [`DUPLICATE_NS`]: a mirror port or a
    /// capture on two interfaces, not retransmissions. Dropped.
    pub duplicates: u64,
    /// Sequence, acknowledgment, length, flags and window of the last data
    /// segment, packed; 0 before any.
    last_data_sig: u128,
    last_data_ts: Timestamp,
    sent: [Sent; SENT_RING],
    sent_len: usize,
    sent_head: usize,
}

impl Half {
    fn new(addr: SocketAddr) -> Half {
        Half {
            addr,
            base: Seq(0),
            base_known: false,
            syn_seen: false,
            mss: None,
            window_scale_option: None,
            window_shift: None,
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
            max_in_flight: 0,
            window_min: None,
            window_max: 0,
            fin: None,
            rst: None,
            rtt_to_peer_ns: None,
            rtt_samples: 0,
            ttl: 0,
            duplicates: 0,
            last_data_sig: 0,
            last_data_ts: Timestamp::default(),
            sent: [Sent::default(); SENT_RING],
            sent_len: 0,
            sent_head: 0,
        }
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

    fn remember(&mut self, end: Seq, ts: Timestamp, retransmitted: bool) {
        let at = (self.sent_head + self.sent_len) % SENT_RING;
        self.sent[at] = Sent {
            end,
            ts: (!retransmitted).then_some(ts),
        };
        if self.sent_len < SENT_RING {
            self.sent_len += 1;
        } else {
            self.sent_head = (self.sent_head + 1) % SENT_RING;
        }
        // A retransmission taints earlier entries covering the same bytes (Karn).
        if retransmitted {
            for i in 0..self.sent_len {
                let e = &mut self.sent[(self.sent_head + i) % SENT_RING];
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
        while self.sent_len > 0 {
            let e = self.sent[self.sent_head];
            if e.end > ack {
                break;
            }
            if e.end == ack {
                found = e.ts;
            }
            self.sent_head = (self.sent_head + 1) % SENT_RING;
            self.sent_len -= 1;
        }
        found
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
    pub response_last: Option<Mark>,
    pub response_bytes: u64,
    request_end: Seq,
}

impl Exchange {
    /// The first SYN for a connection's first exchange (when captured), else
    /// the first request byte (or response byte, for a server speaking first).
    pub fn start(&self) -> Option<Mark> {
        self.setup.or(self.request_first).or(self.response_first)
    }

    pub fn end(&self) -> Option<Mark> {
        self.response_last.or(self.request_last)
    }

    /// Both a request and a response were seen.
    pub fn is_complete(&self) -> bool {
        self.request_first.is_some() && self.response_first.is_some()
    }

    /// From [`Exchange::start`] to the last response byte, at the capture point.
    pub fn duration_ns(&self) -> i64 {
        match (self.start(), self.end()) {
            (Some(a), Some(b)) => b.ts.since(a.ts).max(0),
            _ => 0,
        }
    }
}

/// What [`Connection::update`] reports, by reference: no copies on the way.
pub(crate) enum Event<'e, 'a> {
    Segment(&'e Segment<'a>),
    Exchange(&'e Exchange),
}

/// One TCP connection.
///
/// What a connection costs follows what it has shown. While its packets are a
/// plain handshake — a SYN, then its SYN-ACK, then the ACK of that, each once
/// and without data — the connection is kept *compact*: the handful of values
/// those packets carry, about 150 bytes with its identity. A SYN flood's
/// half-open connections never grow beyond that. The first other packet (data,
/// a FIN or RST, a retry, anything unusual) *expands* it into the full state
/// ([`Half`] per direction, the [`Handshake`], the exchange in progress),
/// boxed, exactly as if it had been tracked in full from the start: the
/// compact form records only handshakes whose full state it can rebuild.
#[derive(Debug, Clone)]
pub struct Connection {
    /// 1-based, in order of first appearance.
    pub id: u64,
    pub role_source: RoleSource,
    pub first: Mark,
    pub last_ts: Timestamp,
    client_ip: IpAddr,
    server_ip: IpAddr,
    client_port: u16,
    server_port: u16,
    /// Both FINs or an RST seen ([`Connection::is_closed`]), kept as a flag:
    /// it is asked for on every segment.
    closed: bool,
    /// The handshake so far while `full` is `None`.
    compact: Compact,
    full: Option<Box<Full>>,
}

/// A plain handshake: the SYN (always), its SYN-ACK (`step` ≥ 2) and the ACK
/// of that (`step` 3), each seen once; or the SYN refused by an RST-ACK
/// (`step` 2 with `reset`: a closed port). Everything the full state would
/// hold after them follows from these values ([`Compact::expand`]).
#[derive(Debug, Clone, Copy, Default)]
struct Compact {
    step: u8,
    reset: bool,
    /// Initial sequence numbers: client, server (for a reset, the RST's sequence number).
    isn: [u32; 2],
    /// Flags of the SYN and of the answer (SYN-ACK or RST).
    flags: [u16; 2],
    /// Raw window fields of the SYN, the answer and the ACK.
    window: [u16; 3],
    /// Options of the SYN (client) and of the SYN-ACK (server).
    mss: [Option<u16>; 2],
    window_scale: [Option<u8>; 2],
    sack_permitted: [bool; 2],
    timestamps: [bool; 2],
    /// The first nonzero TTL each side sent.
    ttl: [u8; 2],
    /// The SYN-ACK, or the RST.
    answer: Mark,
    ack: Mark,
}

/// Everything else: what a connection keeps once it has shown more than a handshake.
#[derive(Debug, Clone)]
pub(crate) struct Full {
    client: Half,
    server: Half,
    handshake: Handshake,
    packets: u64,
    exchanges: u32,
    current: Option<Exchange>,
    /// [`Connection::smss`] per direction, refreshed when what it depends on changes.
    smss: [u32; 2],
    /// [`Connection::path_rtt_ns`] and [`Connection::distance_to`] (per
    /// direction), refreshed when the handshake or an RTT minimum changes:
    /// rules ask for them on most data segments.
    path_rtt: Option<i64>,
    distance: [Option<i64>; 2],
}

/// Full state kept between connections (boxes reused without allocating).
pub(crate) type FullBox = Box<Full>;

/// A [`Half`], borrowed from a connection's full state or rebuilt from its
/// compact handshake.
pub enum HalfRef<'a> {
    Borrowed(&'a Half),
    Rebuilt(Box<Half>),
}

impl std::ops::Deref for HalfRef<'_> {
    type Target = Half;
    fn deref(&self) -> &Half {
        match self {
            HalfRef::Borrowed(h) => h,
            HalfRef::Rebuilt(h) => h,
        }
    }
}

impl std::fmt::Debug for HalfRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
    }
}

/// A segment of a compact connection, replayed: the fields [`Segment`] reports.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Replayed {
    frame: u64,
    ts: Timestamp,
    dir: Dir,
    seq: u32,
    ack: u32,
    flags: u16,
    window: u32,
    peer_window: u32,
}

impl Replayed {
    pub(crate) fn segment(&self) -> Segment<'static> {
        Segment {
            frame: self.frame,
            ts: self.ts,
            dir: self.dir,
            seq: self.seq,
            len: 0,
            ack: self.ack,
            flags: tcpdoctor_wire::TcpFlags(self.flags),
            window: self.window,
            kind: if self.flags & tcpdoctor_wire::TcpFlags::SYN != 0 {
                SegKind::Syn
            } else {
                SegKind::Ack
            },
            acked: 0,
            in_flight: 0,
            peer_window: self.peer_window,
            payload: &[],
        }
    }
}

impl Full {
    fn new(client: SocketAddr, server: SocketAddr) -> Full {
        Full {
            client: Half::new(client),
            server: Half::new(server),
            handshake: Handshake::default(),
            packets: 0,
            exchanges: 0,
            current: None,
            smss: [1460; 2],
            path_rtt: None,
            distance: [None; 2],
        }
    }

    fn half(&self, dir: Dir) -> &Half {
        match dir {
            Dir::ClientToServer => &self.client,
            Dir::ServerToClient => &self.server,
        }
    }

    /// The largest payload the sender in `dir` puts in one segment (SMSS,
    /// RFC 9293 §3.7.1): the MSS its peer announced, less 12 bytes when both
    /// sides use timestamps (RFC 7323), as Linux counts it.
    fn compute_smss(&self, dir: Dir) -> u32 {
        let (me, peer) = (self.half(dir), self.half(dir.reverse()));
        let base = peer.mss.map_or(me.mss_or_guess(), u32::from);
        let options = if me.timestamps && peer.timestamps {
            12
        } else {
            0
        };
        base.saturating_sub(options).max(1)
    }

    /// Round trip between the endpoints: the handshake's if captured, else
    /// the sum of the two capture-point-to-peer minimums.
    fn compute_path_rtt(&self) -> Option<i64> {
        self.handshake
            .rtt_ns()
            .or_else(|| Some(self.client.rtt_to_peer_ns? + self.server.rtt_to_peer_ns?))
    }

    fn compute_distance(&self, side: Dir) -> Option<i64> {
        match side {
            Dir::ClientToServer => self
                .handshake
                .client_side_ns()
                .or(self.server.rtt_to_peer_ns),
            Dir::ServerToClient => self
                .handshake
                .server_side_ns()
                .or(self.client.rtt_to_peer_ns),
        }
    }

    fn refresh_rtt(&mut self) {
        self.path_rtt = self.compute_path_rtt();
        self.distance = [
            self.compute_distance(Dir::ClientToServer),
            self.compute_distance(Dir::ServerToClient),
        ];
    }

    fn refresh_smss(&mut self) {
        self.smss = [
            self.compute_smss(Dir::ClientToServer),
            self.compute_smss(Dir::ServerToClient),
        ];
    }
}

impl Compact {
    /// Whether the SYN was answered by a SYN-ACK.
    fn synack_seen(&self) -> bool {
        self.step >= 2 && !self.reset
    }

    /// Whether `seg`, travelling in `dir`, is the next packet of a plain
    /// handshake that the compact form can hold. `seg` is never the SYN
    /// (that one made the connection).
    fn accepts(&self, seg: &TcpSegment<'_>, dir: Dir) -> bool {
        const SYN_ACK: u16 = TcpFlags::SYN | TcpFlags::ACK;
        const RST_ACK: u16 = TcpFlags::RST | TcpFlags::ACK;
        const CONTROL: u16 = TcpFlags::SYN | TcpFlags::ACK | TcpFlags::FIN | TcpFlags::RST;
        let flags = seg.flags.0;
        if seg.payload_len != 0 || self.reset {
            return false;
        }
        match self.step {
            // The SYN-ACK answering the SYN, or the RST-ACK refusing it: either
            // acknowledges exactly the SYN.
            1 => {
                dir == Dir::ServerToClient
                    && matches!(flags & CONTROL, SYN_ACK | RST_ACK)
                    && seg.ack == self.isn[0].wrapping_add(1)
            }
            // The ACK completing it: a bare ACK, both sequence numbers one past
            // the ISNs, and a window that is open (a zero window is the zero
            // window rule's business from its first packet on).
            2 => {
                dir == Dir::ClientToServer
                    && flags == TcpFlags::ACK
                    && seg.seq == self.isn[0].wrapping_add(1)
                    && seg.ack == self.isn[1].wrapping_add(1)
                    && seg.window != 0
            }
            _ => false,
        }
    }

    /// Records `seg`, accepted by [`Compact::accepts`].
    fn push(&mut self, mark: Mark, seg: &TcpSegment<'_>) {
        match self.step {
            1 => {
                self.reset = seg.flags.rst();
                self.isn[1] = seg.seq;
                self.flags[1] = seg.flags.0;
                self.window[1] = seg.window;
                self.ttl[1] = seg.ttl;
                self.answer = mark;
                if !self.reset {
                    let o = seg.options();
                    self.mss[1] = o.mss;
                    self.window_scale[1] = o.window_scale;
                    self.sack_permitted[1] = o.sack_permitted;
                    self.timestamps[1] = o.timestamps.is_some();
                }
            }
            _ => {
                self.window[2] = seg.window;
                if self.ttl[0] == 0 {
                    self.ttl[0] = seg.ttl;
                }
                self.ack = mark;
            }
        }
        self.step += 1;
    }

    /// Window shifts (client, server) once the SYN-ACK is seen (RFC 7323
    /// §2.2: a SYN-ACK carries window scale only if the SYN did, so it alone
    /// tells whether scaling is on).
    fn shifts(&self) -> [Option<u8>; 2] {
        if !self.synack_seen() {
            return [None, None];
        }
        match self.window_scale[1] {
            None => [Some(0), Some(0)],
            Some(server) => [self.window_scale[0], Some(server)],
        }
    }

    /// The ACK's window, scaled.
    fn ack_window(&self) -> u32 {
        u32::from(self.window[2]) << self.shifts()[0].unwrap_or(0)
    }

    /// The full state after these packets, as [`Connection::update`] would
    /// have built it from them.
    fn expand(&self, first: Mark, client: SocketAddr, server: SocketAddr) -> Full {
        let mut f = Full::new(client, server);
        let shifts = self.shifts();
        let c = &mut f.client;
        c.base = Seq(self.isn[0]);
        c.base_known = true;
        c.syn_seen = true;
        c.mss = self.mss[0];
        c.window_scale_option = self.window_scale[0];
        c.window_shift = shifts[0];
        c.sack_permitted = self.sack_permitted[0];
        c.timestamps = self.timestamps[0];
        c.snd_max = Seq(self.isn[0]).plus(1);
        c.snd_init = true;
        c.window = u32::from(self.window[0]);
        c.packets = 1;
        c.ttl = self.ttl[0];
        c.remember(c.snd_max, first.ts, false);
        let mut handshake = Handshake {
            syn: Some(first),
            first_syn: Some(first),
            syn_count: 1,
            ..Handshake::default()
        };
        if self.reset {
            // An RST: not a SYN, so its sequence number is taken as one past
            // the (unseen) ISN; its ACK is not processed (RFC 9293 §3.10.7.3).
            let s = &mut f.server;
            s.base = Seq(self.isn[1]).plus(u32::MAX);
            s.base_known = true;
            s.snd_max = Seq(self.isn[1]);
            s.snd_init = true;
            s.window = u32::from(self.window[1]);
            s.packets = 1;
            s.ttl = self.ttl[1];
            s.rst = Some(self.answer);
        } else if self.step >= 2 {
            c.una = Seq(self.isn[0]).plus(1);
            c.una_init = true;
            let s = &mut f.server;
            s.base = Seq(self.isn[1]);
            s.base_known = true;
            s.syn_seen = true;
            s.mss = self.mss[1];
            s.window_scale_option = self.window_scale[1];
            s.window_shift = shifts[1];
            s.sack_permitted = self.sack_permitted[1];
            s.timestamps = self.timestamps[1];
            s.snd_max = Seq(self.isn[1]).plus(1);
            s.snd_init = true;
            s.window = u32::from(self.window[1]);
            s.packets = 1;
            s.ttl = self.ttl[1];
            s.remember(s.snd_max, self.answer.ts, false);
            handshake.synack = Some(self.answer);
            handshake.last_synack = Some(self.answer);
            handshake.synack_count = 1;
        }
        if self.step >= 3 {
            let w = self.ack_window();
            let c = &mut f.client;
            c.window = w;
            c.window_min = Some(w);
            c.window_max = w;
            c.packets = 2;
            f.server.una = Seq(self.isn[1]).plus(1);
            f.server.una_init = true;
            handshake.ack = Some(self.ack);
        }
        f.handshake = handshake;
        f.packets = u64::from(self.step);
        f.refresh_rtt();
        f.refresh_smss();
        f
    }

    /// The handshake as [`Connection::handshake`] tells it.
    fn handshake(&self, first: Mark) -> Handshake {
        let synack = self.synack_seen().then_some(self.answer);
        Handshake {
            syn: Some(first),
            first_syn: Some(first),
            syn_count: 1,
            synack,
            last_synack: synack,
            synack_count: u32::from(synack.is_some()),
            ack: (self.step >= 3).then_some(self.ack),
        }
    }

    /// The segments recorded, as [`Connection::update`] reported them.
    fn replay(&self, first: Mark) -> ([Replayed; 3], usize) {
        let syn = Replayed {
            frame: first.frame,
            ts: first.ts,
            dir: Dir::ClientToServer,
            seq: 0,
            ack: 0,
            flags: self.flags[0],
            window: u32::from(self.window[0]),
            peer_window: 0,
        };
        let answer = Replayed {
            frame: self.answer.frame,
            ts: self.answer.ts,
            dir: Dir::ServerToClient,
            // The SYN-ACK's own ISN; the RST one past the ISN it implies.
            seq: u32::from(self.reset),
            ack: 1,
            flags: self.flags[1],
            window: u32::from(self.window[1]),
            peer_window: u32::from(self.window[0]),
        };
        let ack = Replayed {
            frame: self.ack.frame,
            ts: self.ack.ts,
            dir: Dir::ClientToServer,
            seq: 1,
            ack: 1,
            flags: TcpFlags::ACK,
            window: self.ack_window(),
            peer_window: u32::from(self.window[1]),
        };
        ([syn, answer, ack], usize::from(self.step))
    }
}

/// `Some(full)` of a connection, for the methods that run only on full ones.
macro_rules! full {
    ($conn:expr) => {
        match $conn.full.as_deref_mut() {
            Some(f) => f,
            None => return,
        }
    };
}

impl Connection {
    /// The connection `seg` opens. With `compact`, a plain SYN starts it
    /// compact (and is then already recorded); anything else starts it full
    /// (in a box from `spare` if there is one), to be fed to
    /// [`Connection::update`].
    pub(crate) fn new(
        id: u64,
        frame: u64,
        ts: Timestamp,
        seg: &TcpSegment<'_>,
        compact: bool,
        spare: &mut Vec<FullBox>,
    ) -> Connection {
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
        let first = Mark { ts, frame };
        let mut conn = Connection {
            id,
            role_source,
            first,
            last_ts: ts,
            client_ip: client.ip(),
            server_ip: server.ip(),
            client_port: client.port(),
            server_port: server.port(),
            closed: false,
            compact: Compact::default(),
            full: None,
        };
        let flags = seg.flags.0;
        let plain_syn = flags & (TcpFlags::SYN | TcpFlags::ACK | TcpFlags::FIN | TcpFlags::RST)
            == TcpFlags::SYN
            && seg.payload_len == 0
            && seg.ack == 0
            && src != dst;
        if compact && plain_syn {
            let o = seg.options();
            conn.compact = Compact {
                step: 1,
                isn: [seg.seq, 0],
                flags: [flags, 0],
                window: [seg.window, 0, 0],
                mss: [o.mss, None],
                window_scale: [o.window_scale, None],
                sack_permitted: [o.sack_permitted, false],
                timestamps: [o.timestamps.is_some(), false],
                ttl: [seg.ttl, 0],
                ..Compact::default()
            };
        } else {
            conn.full = Some(boxed(spare.pop(), Full::new(client, server)));
        }
        conn
    }

    /// Whether the connection is still a compact handshake.
    #[inline]
    pub fn is_compact(&self) -> bool {
        self.full.is_none()
    }

    /// Records `seg` if it is the next packet of the compact handshake.
    #[inline]
    pub(crate) fn push_compact(&mut self, frame: u64, ts: Timestamp, seg: &TcpSegment<'_>) -> bool {
        if !self.compact.accepts(seg, self.dir(seg)) {
            return false;
        }
        self.compact.push(Mark { ts, frame }, seg);
        if ts > self.last_ts {
            self.last_ts = ts;
        }
        self.closed = self.compact.reset;
        true
    }

    /// Switches a compact connection to the full state; returns the segments
    /// recorded so far (and how many), for the analyzer that has not seen them.
    pub(crate) fn expand(&mut self, spare: Option<FullBox>) -> ([Replayed; 3], usize) {
        let replay = self.compact.replay(self.first);
        let full = self
            .compact
            .expand(self.first, self.client_addr(), self.server_addr());
        self.full = Some(boxed(spare, full));
        replay
    }

    /// The segments a compact connection recorded (none for a full one).
    pub(crate) fn compact_segments(&self) -> ([Replayed; 3], usize) {
        let (segments, n) = self.compact.replay(self.first);
        (segments, if self.is_compact() { n } else { 0 })
    }

    /// Gives back the full state's box, for reuse.
    pub(crate) fn take_full(&mut self) -> Option<FullBox> {
        self.full.take()
    }

    /// The direction of `seg`, one of this connection's. Both ends the same:
    /// every segment counts as the client's.
    #[inline]
    fn dir(&self, seg: &TcpSegment<'_>) -> Dir {
        if seg.src_port == self.client_port && seg.src == self.client_ip {
            Dir::ClientToServer
        } else {
            Dir::ServerToClient
        }
    }

    /// Whether `seg` belongs to this connection (either direction).
    #[inline]
    pub(crate) fn matches(&self, seg: &TcpSegment<'_>) -> bool {
        (seg.src_port == self.client_port
            && seg.dst_port == self.server_port
            && seg.src == self.client_ip
            && seg.dst == self.server_ip)
            || (seg.src_port == self.server_port
                && seg.dst_port == self.client_port
                && seg.src == self.server_ip
                && seg.dst == self.client_ip)
    }

    /// The two endpoints: what the tracker hashes.
    pub(crate) fn endpoints(&self) -> ((IpAddr, u16), (IpAddr, u16)) {
        (
            (self.client_ip, self.client_port),
            (self.server_ip, self.server_port),
        )
    }

    pub fn client_addr(&self) -> SocketAddr {
        SocketAddr::new(self.client_ip, self.client_port)
    }

    pub fn server_addr(&self) -> SocketAddr {
        SocketAddr::new(self.server_ip, self.server_port)
    }

    /// The address of the endpoint that sends in `dir`.
    pub fn addr(&self, dir: Dir) -> SocketAddr {
        match dir {
            Dir::ClientToServer => self.client_addr(),
            Dir::ServerToClient => self.server_addr(),
        }
    }

    /// The IP TTL (hop limit) of the first segment the endpoint sending in `dir` sent; 0 if none.
    pub fn ttl(&self, dir: Dir) -> u8 {
        match &self.full {
            Some(f) => f.half(dir).ttl,
            None => self.compact.ttl[dir.index()],
        }
    }

    pub fn client(&self) -> HalfRef<'_> {
        self.half(Dir::ClientToServer)
    }

    pub fn server(&self) -> HalfRef<'_> {
        self.half(Dir::ServerToClient)
    }

    /// What the endpoint sending in `dir` sent and advertised.
    pub fn half(&self, dir: Dir) -> HalfRef<'_> {
        match &self.full {
            Some(f) => HalfRef::Borrowed(f.half(dir)),
            None => {
                let f = self.rebuilt();
                HalfRef::Rebuilt(Box::new(match dir {
                    Dir::ClientToServer => f.client,
                    Dir::ServerToClient => f.server,
                }))
            }
        }
    }

    fn rebuilt(&self) -> Full {
        self.compact
            .expand(self.first, self.client_addr(), self.server_addr())
    }

    /// The three-way handshake as captured.
    pub fn handshake(&self) -> Handshake {
        match &self.full {
            Some(f) => f.handshake,
            None => self.compact.handshake(self.first),
        }
    }

    /// Packets seen, duplicates included.
    pub fn packets(&self) -> u64 {
        match &self.full {
            Some(f) => f.packets,
            None => u64::from(self.compact.step),
        }
    }

    /// Data segments captured twice and dropped ([`Half::duplicates`]), both directions.
    pub fn duplicates(&self) -> u64 {
        self.full
            .as_ref()
            .map_or(0, |f| f.client.duplicates + f.server.duplicates)
    }

    /// Exchanges started.
    pub fn exchanges(&self) -> u32 {
        self.full.as_ref().map_or(0, |f| f.exchanges)
    }

    /// The largest payload the sender in `dir` puts in one segment (SMSS,
    /// RFC 9293 §3.7.1): the MSS its peer announced, less 12 bytes when both
    /// sides use timestamps (RFC 7323), as Linux counts it.
    #[inline]
    pub fn smss(&self, dir: Dir) -> u32 {
        match &self.full {
            Some(f) => f.smss[dir.index()],
            None => self.rebuilt().smss[dir.index()],
        }
    }

    /// Both FINs were sent and acknowledged: nothing more can follow but
    /// retransmissions.
    pub fn is_finished(&self) -> bool {
        let done = |h: &Half| h.fin.is_some() && h.una_init && h.una >= h.snd_max;
        self.full
            .as_ref()
            .is_some_and(|f| done(&f.client) && done(&f.server))
    }

    /// Whether the connection carried a handshake or data (not just stray ACKs or RSTs).
    pub fn is_substantial(&self) -> bool {
        match &self.full {
            Some(f) => {
                f.handshake.syn_count + f.handshake.synack_count > 0
                    || f.client.data_packets + f.server.data_packets > 0
            }
            None => true,
        }
    }

    /// A handshake was seen, never completed, and no data flowed: a
    /// half-open connection (the SYN unanswered, or the SYN-ACK never
    /// acknowledged), which only SYN or SYN-ACK retries can still continue.
    pub fn is_half_open(&self) -> bool {
        match &self.full {
            Some(f) => {
                f.handshake.syn_count + f.handshake.synack_count > 0
                    && f.handshake.ack.is_none()
                    && f.client.data_packets + f.server.data_packets == 0
                    && !self.closed
            }
            None => self.compact.step < 3 && !self.compact.reset,
        }
    }

    /// Whether both FINs or an RST were seen.
    #[inline]
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// The exchange in progress, if any.
    pub fn current_exchange(&self) -> Option<&Exchange> {
        self.full.as_ref().and_then(|f| f.current.as_ref())
    }

    pub(crate) fn take_exchange(&mut self) -> Option<Exchange> {
        self.full.as_mut().and_then(|f| f.current.take())
    }

    /// Round trip between the endpoints: the handshake's if captured, else
    /// the sum of the two capture-point-to-peer minimums.
    #[inline]
    pub fn path_rtt_ns(&self) -> Option<i64> {
        match &self.full {
            Some(f) => f.path_rtt,
            None => self.handshake().rtt_ns(),
        }
    }

    pub fn duration_ns(&self) -> i64 {
        self.last_ts.since(self.first.ts).max(0)
    }

    /// Capture point → the endpoint that sends in `side` → capture point: its
    /// half of the handshake if captured, else the minimum clean ACK delay of
    /// the data sent to it.
    #[inline]
    pub fn distance_to(&self, side: Dir) -> Option<i64> {
        match &self.full {
            Some(f) => f.distance[side.index()],
            None => self.rebuilt().distance[side.index()],
        }
    }

    /// A SYN on this tuple starts a new connection if this one is over or
    /// carries a different initial sequence number after data flowed.
    pub(crate) fn is_reused_by(&self, syn: &TcpSegment<'_>) -> bool {
        if self.is_closed() {
            return true;
        }
        let Some(f) = &self.full else {
            // A compact connection carried no data.
            return false;
        };
        let from_client = syn.src == self.client_ip && syn.src_port == self.client_port;
        let active = f.client.bytes + f.server.bytes > 0;
        from_client && f.client.syn_seen && Seq(syn.seq) != f.client.base && active
    }

    pub(crate) fn update<'p>(
        &mut self,
        frame: u64,
        ts: Timestamp,
        seg: &TcpSegment<'p>,
        mut emit: impl FnMut(&Connection, Event<'_, 'p>),
    ) {
        let dir = self.dir(seg);
        let mark = Mark { ts, frame };
        if ts > self.last_ts {
            self.last_ts = ts;
        }
        let f = full!(self);
        f.packets += 1;
        let flags = seg.flags;
        let (me, peer) = match dir {
            Dir::ClientToServer => (&mut f.client, &mut f.server),
            Dir::ServerToClient => (&mut f.server, &mut f.client),
        };
        me.packets += 1;
        if me.ttl == 0 {
            me.ttl = seg.ttl;
        }
        let seq = Seq(seg.seq);
        // The same data segment again within microseconds is a copy made by
        // the capture setup (a SPAN port sees both ingress and egress), not
        // something the sender did: no TCP stack retransmits that fast.
        if seg.payload_len > 0 {
            let sig = u128::from(seg.seq)
                | u128::from(seg.ack) << 32
                | u128::from(seg.payload_len) << 64
                | u128::from(flags.0) << 96
                | u128::from(seg.window) << 112;
            if me.last_data_sig == sig && ts.since(me.last_data_ts) <= DUPLICATE_NS {
                me.duplicates += 1;
                return;
            }
            me.last_data_sig = sig;
            me.last_data_ts = ts;
        }

        let mut refresh_smss = false;
        let mut refresh_rtt = false;
        // Handshake and options.
        if flags.syn() {
            refresh_smss = true;
            refresh_rtt = true;
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
            if flags.ack() {
                // RFC 7323 §2.2: a SYN-ACK carries window scale only if the SYN
                // did, so it alone tells whether scaling is on.
                let scaling = options.window_scale.is_some();
                me.window_shift = Some(options.window_scale.unwrap_or(0));
                peer.window_shift = match (scaling, peer.syn_seen) {
                    (false, _) => Some(0),
                    (true, true) => peer.window_scale_option,
                    (true, false) => None,
                };
                if !scaling {
                    me.window_shift = Some(0);
                }
                f.handshake.synack_count += 1;
                f.handshake.last_synack = Some(mark);
                if f.handshake.synack.is_none() {
                    f.handshake.synack = Some(mark);
                }
            } else {
                f.handshake.syn_count += 1;
                if f.handshake.first_syn.is_none() {
                    f.handshake.first_syn = Some(mark);
                }
                if f.handshake.synack.is_none() {
                    f.handshake.syn = Some(mark);
                }
            }
        } else if !me.base_known {
            me.base = seq.plus(u32::MAX);
            me.base_known = true;
        }

        // The window this segment advertises (RFC 7323 §2.2: never scaled on SYNs).
        let window = if flags.syn() {
            u32::from(seg.window)
        } else {
            u32::from(seg.window) << me.window_shift.unwrap_or(0)
        };
        me.window = window;
        if !flags.syn() && !flags.rst() {
            me.window_min = Some(me.window_min.map_or(window, |w| w.min(window)));
            me.window_max = me.window_max.max(window);
        }

        // Classify by the sender's sequence space.
        let len = seg.payload_len;
        let end = seq.plus(seg.seq_len());
        let mut new_bytes = 0u32;
        let kind = if flags.syn() {
            if !me.snd_init || end > me.snd_max {
                me.snd_max = end;
                me.snd_init = true;
            }
            SegKind::Syn
        } else if len == 0 {
            if !me.snd_init {
                me.snd_max = end;
                me.snd_init = true;
            } else if end > me.snd_max {
                me.snd_max = end;
            }
            SegKind::Ack
        } else if !me.snd_init || seq >= me.snd_max {
            if me.snd_init && seq > me.snd_max {
                me.gaps += 1;
            }
            me.snd_max = end;
            me.snd_init = true;
            new_bytes = len;
            SegKind::NewData
        } else if end <= me.snd_max {
            let all_acked = me.una_init && me.una >= me.snd_max.plus(u32::MAX);
            if len <= 1 && end == me.snd_max && all_acked {
                me.keepalives += 1;
                SegKind::KeepAliveOrProbe
            } else {
                me.retransmissions += 1;
                me.retransmitted_bytes += u64::from(len);
                SegKind::Retransmission
            }
        } else {
            // Overlaps old data and extends it: a retransmission carrying new bytes.
            new_bytes = end.distance_from(me.snd_max);
            me.snd_max = end;
            me.retransmissions += 1;
            me.retransmitted_bytes += u64::from(len - new_bytes.min(len));
            SegKind::Retransmission
        };
        if len > 0 {
            me.data_packets += 1;
            me.bytes += u64::from(new_bytes);
            if len > me.largest_segment {
                me.largest_segment = len;
                refresh_smss = true;
            }
        }
        if len > 0 || flags.fin() || flags.syn() {
            me.remember(end, ts, kind == SegKind::Retransmission);
        }
        if flags.fin() && me.fin.is_none() {
            me.fin = Some(mark);
        }
        if flags.rst() && me.rst.is_none() {
            me.rst = Some(mark);
        }
        if flags.fin() || flags.rst() {
            self.closed =
                (me.fin.is_some() && peer.fin.is_some()) || me.rst.is_some() || peer.rst.is_some();
        }

        // What this segment acknowledges of the peer's data.
        let mut acked = 0u32;
        if flags.ack() && !flags.rst() {
            let a = Seq(seg.ack);
            if !peer.una_init {
                peer.una = a;
                peer.una_init = true;
            } else if a > peer.una && (!peer.snd_init || a <= peer.snd_max) {
                acked = a.distance_from(peer.una);
                peer.una = a;
                // The peer sends segments of at most its SMSS (the MSS this side
                // announced, less the timestamp option when both use it).
                let peer_smss = f.smss[dir.reverse().index()];
                let immediate = acked >= 2 * peer_smss || peer.snd_max == a && flags.syn();
                if let Some(sent_at) = peer.acked_sample(a) {
                    if immediate {
                        let sample = ts.since(sent_at);
                        peer.rtt_samples += 1;
                        refresh_rtt = true;
                        peer.rtt_to_peer_ns =
                            Some(peer.rtt_to_peer_ns.map_or(sample, |m| m.min(sample)));
                    }
                }
            }
            if dir == Dir::ClientToServer
                && !flags.syn()
                && f.handshake.ack.is_none()
                && f.handshake.synack.is_some()
                && peer.syn_seen
                && a == peer.base.plus(1)
            {
                f.handshake.ack = Some(mark);
                refresh_rtt = true;
            }
        }
        let in_flight = me.in_flight();
        me.max_in_flight = me.max_in_flight.max(in_flight);
        let peer_window = peer.window;
        let rel_seq = me.rel(seq);
        let rel_ack = peer.rel(Seq(seg.ack));
        let peer_una = peer.una;

        if refresh_rtt {
            f.refresh_rtt();
        }
        if refresh_smss {
            f.refresh_smss();
        }
        // A retransmission of the response ends the exchange later: the
        // response is not complete before its last byte got through.
        if kind == SegKind::Retransmission && dir == Dir::ServerToClient {
            if let Some(ex) = f.current.as_mut().filter(|e| e.response_first.is_some()) {
                ex.response_last = Some(mark);
            }
        }
        // Exchanges: client data opens a request, server data answers it.
        if new_bytes > 0 {
            let starts_request =
                dir == Dir::ClientToServer && f.current.is_none_or(|e| e.response_first.is_some());
            if starts_request || (dir == Dir::ServerToClient && f.current.is_none()) {
                if let Some(done) = f.current.take() {
                    emit(self, Event::Exchange(&done));
                }
                let f = full!(self);
                let setup = if f.exchanges == 0 {
                    f.handshake.first_syn
                } else {
                    None
                };
                f.current = Some(Exchange {
                    index: f.exchanges,
                    setup,
                    ..Exchange::default()
                });
                f.exchanges += 1;
            }
            let f = full!(self);
            if let Some(ex) = f.current.as_mut() {
                match dir {
                    Dir::ClientToServer => {
                        ex.request_first.get_or_insert(mark);
                        ex.request_last = Some(mark);
                        ex.request_bytes += u64::from(new_bytes);
                        ex.request_end = end;
                        ex.request_acked = None;
                    }
                    Dir::ServerToClient => {
                        ex.response_first.get_or_insert(mark);
                        ex.response_last = Some(mark);
                        ex.response_bytes += u64::from(new_bytes);
                    }
                }
            }
        }
        if dir == Dir::ServerToClient && acked > 0 {
            let f = full!(self);
            if let Some(ex) = f.current.as_mut() {
                if ex.request_first.is_some()
                    && ex.request_acked.is_none()
                    && peer_una >= ex.request_end
                {
                    ex.request_acked = Some(mark);
                }
            }
        }

        let event = Segment {
            frame,
            ts,
            dir,
            seq: rel_seq,
            len,
            ack: rel_ack,
            flags,
            window,
            kind,
            acked,
            in_flight,
            peer_window,
            payload: seg.payload,
        };
        emit(self, Event::Segment(&event));
    }
}

/// `value` in `spare`'s box if there is one, else in a new box.
fn boxed(spare: Option<FullBox>, value: Full) -> FullBox {
    match spare {
        Some(mut b) => {
            *b = value;
            b
        }
        None => Box::new(value),
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
