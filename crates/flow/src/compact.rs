//! What the tracker keeps for every connection, and the compact form of a
//! connection that has shown only a plain handshake.
//!
//! A SYN, then its SYN-ACK, then the ACK of that — each once, without data —
//! or a SYN refused by an RST-ACK: that is all a SYN flood's half-open
//! connections, a port scan's probes and an idle pool's connections ever
//! show. Their handful of values fit in the slot itself (with the tuple and
//! the connection's id, 144 bytes). The first other packet expands the
//! connection into the full [`Connection`], built exactly as tracking it in
//! full from its first packet would have (the compact form records only
//! handshakes whose full state it can rebuild), and the analyzer is then
//! shown the segments it has not seen yet. A connection that closes compact
//! is rebuilt for [`Analyzer::close`](crate::Analyzer::close).

use std::net::{IpAddr, SocketAddr};

use tcpdoctor_wire::{TcpFlags, TcpSegment, Timestamp};

use std::hash::Hasher;

use rustc_hash::FxHasher;

use crate::conn::{
    copy_ident, copy_sig, Connection, Half, Handshake, IpIds, Mark, RoleSource, SentSig,
};
use crate::ConnBox;
use crate::{Dir, SegKind, Segment, Seq};

/// Per slot: the connection's identity and tuple (used to find it), and
/// while it has no full state, its compact handshake.
#[derive(Debug, Clone)]
pub(crate) struct Core {
    /// The connection's id; 0 for a free slot (ids count from 1).
    pub(crate) id: u64,
    client_ip: IpAddr,
    server_ip: IpAddr,
    client_port: u16,
    server_port: u16,
    /// The compact handshake; unused (`step` 0) once the connection is full.
    c: Compact,
}

/// A plain handshake: the SYN (always), its SYN-ACK (`step` ≥ 2) and the ACK
/// of that (`step` 3), each seen once; or the SYN refused by an RST-ACK
/// (`step` 2 with `reset`: a closed port).
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
    /// The SYN-ACK's TSval (when `timestamps[1]`).
    synack_tsval: u32,
    /// The first nonzero TTL each side sent.
    ttl: [u8; 2],
    /// What tells the SYN and the SYN-ACK from copies of them ([`copy_ident`]).
    ident: [u32; 2],
    /// The client's IPv4 identification, counted (the SYN-ACK is not).
    ip_ids: IpIds,
    /// The SYN.
    syn: Mark,
    /// The SYN-ACK, or the RST.
    answer: Mark,
    ack: Mark,
    last_ts: Timestamp,
}

/// A segment of a compact connection, replayed: the fields [`Segment`] reports.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Replayed {
    frame: u64,
    ts: Timestamp,
    client_to_server: bool,
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
            dir: if self.client_to_server {
                Dir::ClientToServer
            } else {
                Dir::ServerToClient
            },
            seq: self.seq,
            len: 0,
            ack: self.ack,
            flags: TcpFlags(self.flags),
            window: self.window,
            kind: if self.flags & TcpFlags::SYN != 0 {
                SegKind::Syn
            } else {
                SegKind::Ack
            },
            acked: 0,
            in_flight: 0,
            peer_window: self.peer_window,
            payload: &[],
            options: &[],
            ip_id: 0,
        }
    }
}

/// Whether `seg` can start a compact connection: a bare SYN without data.
pub(crate) fn is_plain_syn(seg: &TcpSegment<'_>) -> bool {
    const CONTROL: u16 = TcpFlags::SYN | TcpFlags::ACK | TcpFlags::FIN | TcpFlags::RST;
    // Its acknowledgment field is reported as is (no ISN of the peer to make
    // it relative to): a zero one is what the compact form records.
    seg.flags.0 & CONTROL == TcpFlags::SYN
        && seg.payload_len == 0
        && seg.ack == 0
        && (seg.src, seg.src_port) != (seg.dst, seg.dst_port)
}

/// The client's identification counter after its SYN.
fn first_id(syn: &TcpSegment<'_>, ts: Timestamp) -> IpIds {
    let mut ids = IpIds::default();
    ids.count(syn, 0, ts.nanos());
    ids
}

/// Address equality as plain integers.
#[inline(always)]
fn same_ip(a: &IpAddr, b: &IpAddr) -> bool {
    match (a, b) {
        (IpAddr::V4(a), IpAddr::V4(b)) => a.to_bits() == b.to_bits(),
        (IpAddr::V6(a), IpAddr::V6(b)) => a.to_bits() == b.to_bits(),
        _ => false,
    }
}

fn bits(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(a) => u128::from(a.to_bits()),
        IpAddr::V6(a) => a.to_bits(),
    }
}

/// The hash of a connection's tuple: the same for both directions (the
/// lower (address, port) goes first).
#[inline]
pub(crate) fn tuple_hash(a: (IpAddr, u16), b: (IpAddr, u16)) -> u64 {
    let mut h = FxHasher::default();
    match (a.0, b.0) {
        (IpAddr::V4(x), IpAddr::V4(y)) => {
            let x = u64::from(x.to_bits()) << 16 | u64::from(a.1);
            let y = u64::from(y.to_bits()) << 16 | u64::from(b.1);
            h.write_u64(x.min(y));
            h.write_u64(x.max(y));
        }
        (x, y) => {
            let x = (bits(x), a.1);
            let y = (bits(y), b.1);
            let (lo, hi) = if x <= y { (x, y) } else { (y, x) };
            h.write_u128(lo.0);
            h.write_u128(hi.0);
            h.write_u32(u32::from(lo.1) << 16 | u32::from(hi.1));
        }
    }
    h.finish()
}

impl Core {
    /// The core of a connection tracked in full.
    pub(crate) fn full(conn: &Connection) -> Core {
        Core {
            id: conn.id,
            client_ip: conn.client.addr.ip(),
            server_ip: conn.server.addr.ip(),
            client_port: conn.client.addr.port(),
            server_port: conn.server.addr.port(),
            c: Compact::default(),
        }
    }

    /// A compact connection opened by `syn` ([`is_plain_syn`]), seen at `mark`.
    pub(crate) fn compact(id: u64, mark: Mark, syn: &TcpSegment<'_>) -> Core {
        let o = syn.options();
        Core {
            id,
            client_ip: syn.src,
            server_ip: syn.dst,
            client_port: syn.src_port,
            server_port: syn.dst_port,
            c: Compact {
                step: 1,
                isn: [syn.seq, 0],
                flags: [syn.flags.0, 0],
                window: [syn.window, 0, 0],
                mss: [o.mss, None],
                window_scale: [o.window_scale, None],
                sack_permitted: [o.sack_permitted, false],
                timestamps: [o.timestamps.is_some(), false],
                ttl: [syn.ttl, 0],
                ident: [copy_ident(syn), 0],
                ip_ids: first_id(syn, mark.ts),
                syn: mark,
                last_ts: mark.ts,
                ..Compact::default()
            },
        }
    }

    /// The direction of `seg` if it belongs to this connection. Both ends the
    /// same: every segment counts as the client's.
    #[inline(always)]
    pub(crate) fn dir_of(&self, seg: &TcpSegment<'_>) -> Option<Dir> {
        if seg.src_port == self.client_port
            && seg.dst_port == self.server_port
            && same_ip(&seg.src, &self.client_ip)
            && same_ip(&seg.dst, &self.server_ip)
        {
            Some(Dir::ClientToServer)
        } else if seg.src_port == self.server_port
            && seg.dst_port == self.client_port
            && same_ip(&seg.src, &self.server_ip)
            && same_ip(&seg.dst, &self.client_ip)
        {
            Some(Dir::ServerToClient)
        } else {
            None
        }
    }

    /// The hash of the connection's tuple (see [`tuple_hash`]).
    pub(crate) fn hash(&self) -> u64 {
        tuple_hash(
            (self.client_ip, self.client_port),
            (self.server_ip, self.server_port),
        )
    }

    fn client(&self) -> SocketAddr {
        SocketAddr::new(self.client_ip, self.client_port)
    }

    fn server(&self) -> SocketAddr {
        SocketAddr::new(self.server_ip, self.server_port)
    }

    /// Capture time of the last segment of a compact connection.
    pub(crate) fn last_ts(&self) -> Timestamp {
        self.c.last_ts
    }

    /// A compact connection refused by an RST.
    pub(crate) fn is_closed(&self) -> bool {
        self.c.reset
    }

    /// A compact connection whose handshake is not complete (see
    /// [`Connection::is_half_open`]).
    pub(crate) fn is_half_open(&self) -> bool {
        self.c.step < 3 && !self.c.reset
    }

    /// A SYN on this compact connection's tuple starts a new connection if
    /// this one was refused; any other SYN is a retry, for the full state.
    pub(crate) fn is_reused_by_syn(&self) -> bool {
        self.c.reset
    }

    /// Records `seg`, travelling in `dir`, if it is the next packet of the
    /// compact handshake; `false` if the connection needs its full state.
    pub(crate) fn push(
        &mut self,
        frame: u64,
        ts: Timestamp,
        seg: &TcpSegment<'_>,
        dir: Dir,
    ) -> bool {
        const SYN_ACK: u16 = TcpFlags::SYN | TcpFlags::ACK;
        const RST_ACK: u16 = TcpFlags::RST | TcpFlags::ACK;
        const CONTROL: u16 = TcpFlags::SYN | TcpFlags::ACK | TcpFlags::FIN | TcpFlags::RST;
        let c = &mut self.c;
        let flags = seg.flags.0;
        if seg.payload_len != 0 || c.reset {
            return false;
        }
        let mark = Mark { ts, frame };
        match c.step {
            // The SYN-ACK answering the SYN, or the RST-ACK refusing it: either
            // acknowledges exactly the SYN.
            1 if dir == Dir::ServerToClient
                && matches!(flags & CONTROL, SYN_ACK | RST_ACK)
                && seg.ack == c.isn[0].wrapping_add(1) =>
            {
                c.reset = flags & TcpFlags::RST != 0;
                c.isn[1] = seg.seq;
                c.flags[1] = flags;
                c.window[1] = seg.window;
                c.ttl[1] = seg.ttl;
                c.ident[1] = copy_ident(seg);
                c.answer = mark;
                if !c.reset {
                    let o = seg.options();
                    c.mss[1] = o.mss;
                    c.window_scale[1] = o.window_scale;
                    c.sack_permitted[1] = o.sack_permitted;
                    c.timestamps[1] = o.timestamps.is_some();
                    c.synack_tsval = o.timestamps.map_or(0, |t| t.0);
                }
            }
            // The ACK completing it: a bare ACK, both sequence numbers one past
            // the ISNs, and a window that is open (a zero window is the zero
            // window rule's business from its first packet on).
            2 if dir == Dir::ClientToServer
                && flags == TcpFlags::ACK
                && seg.seq == c.isn[0].wrapping_add(1)
                && seg.ack == c.isn[1].wrapping_add(1)
                && seg.window != 0 =>
            {
                c.window[2] = seg.window;
                if c.ttl[0] == 0 {
                    c.ttl[0] = seg.ttl;
                }
                c.ip_ids.count(seg, 0, ts.nanos());
                c.ack = mark;
            }
            _ => return false,
        }
        c.step += 1;
        if ts > c.last_ts {
            c.last_ts = ts;
        }
        true
    }

    /// The full state of a compact connection, as [`Connection::update`]
    /// would have built it from the same segments.
    pub(crate) fn expand(&self, spare: &mut Vec<ConnBox>) -> Box<Connection> {
        let (client, server) = (self.client(), self.server());
        let mut conn = match spare.pop() {
            Some(mut b) => {
                b.reset_empty(self.id, RoleSource::Syn, client, server, self.c.syn);
                b
            }
            None => Box::new(Connection::empty(
                self.id,
                RoleSource::Syn,
                client,
                server,
                self.c.syn,
            )),
        };
        self.fill(&mut conn);
        conn
    }

    /// Sets what the compact handshake recorded on `conn`, a connection with nothing seen yet.
    fn fill(&self, conn: &mut Connection) {
        let c = &self.c;
        let shifts = c.shifts();
        c.fill_syn(&mut conn.client, 0, shifts[0], c.syn);
        conn.client.ip_ids = c.ip_ids;
        let mut handshake = Handshake {
            syn: Some(c.syn),
            first_syn: Some(c.syn),
            syn_count: 1,
            ..Handshake::default()
        };
        if c.reset {
            // An RST is not a SYN: its sequence number is taken as one past the
            // (unseen) ISN; its ACK is not processed (RFC 9293 §3.10.7.3).
            let server = &mut conn.server;
            server.base = Seq(c.isn[1]).plus(u32::MAX);
            server.base_known = true;
            server.snd_max = Seq(c.isn[1]);
            server.snd_init = true;
            server.window = u32::from(c.window[1]);
            server.packets = 1;
            server.ttl = c.ttl[1];
            server.rst = Some(c.answer);
            server.rst_ttl = c.ttl[1];
            conn.closed = true;
        } else if c.step >= 2 {
            conn.client.una = Seq(c.isn[0]).plus(1);
            conn.client.una_init = true;
            c.fill_syn(&mut conn.server, 1, shifts[1], c.answer);
            handshake.synack = Some(c.answer);
            handshake.synack_tsval = c.timestamps[1].then_some(c.synack_tsval);
            handshake.last_synack = Some(c.answer);
            handshake.synack_before_ack = Some(c.answer);
            handshake.synack_count = 1;
        }
        if c.step >= 3 {
            let w = c.ack_window();
            let client = &mut conn.client;
            client.bare_ack_seen = true;
            client.window = w;
            client.window_min = Some(w);
            client.window_max = w;
            client.packets = 2;
            conn.server.una = Seq(c.isn[1]).plus(1);
            conn.server.una_init = true;
            handshake.ack = Some(c.ack);
        }
        conn.handshake = handshake;
        conn.packets = u64::from(c.step);
        conn.last_ts = c.last_ts;
        conn.refresh();
    }

    /// The segments recorded, as [`Connection::update`] reported them, and how many.
    pub(crate) fn replay(&self) -> ([Replayed; 3], usize) {
        let c = &self.c;
        let syn = Replayed {
            frame: c.syn.frame,
            ts: c.syn.ts,
            client_to_server: true,
            seq: 0,
            ack: 0,
            flags: c.flags[0],
            window: u32::from(c.window[0]),
            peer_window: 0,
        };
        let answer = Replayed {
            frame: c.answer.frame,
            ts: c.answer.ts,
            client_to_server: false,
            // The SYN-ACK's own ISN; the RST one past the ISN it implies.
            seq: u32::from(c.reset),
            ack: 1,
            flags: c.flags[1],
            window: u32::from(c.window[1]),
            peer_window: u32::from(c.window[0]),
        };
        let ack = Replayed {
            frame: c.ack.frame,
            ts: c.ack.ts,
            client_to_server: true,
            seq: 1,
            ack: 1,
            flags: TcpFlags::ACK,
            window: c.ack_window(),
            peer_window: u32::from(c.window[1]),
        };
        ([syn, answer, ack], usize::from(c.step))
    }
}

impl Compact {
    /// Window shifts (client, server) once the SYN-ACK is seen (RFC 7323
    /// §2.2: a SYN-ACK carries window scale only if the SYN did, so it alone
    /// tells whether scaling is on).
    /// Sets on `half` what its SYN (side 0, the client) or SYN-ACK (side 1)
    /// told: ISN, options, window, TTL, and the SYN as its one segment sent.
    fn fill_syn(&self, half: &mut Half, side: usize, shift: Option<u8>, syn: Mark) {
        half.base = Seq(self.isn[side]);
        half.base_known = true;
        half.syn_seen = true;
        half.mss = self.mss[side];
        half.window_scale_option = self.window_scale[side];
        half.window_shift = shift;
        half.sack_permitted = self.sack_permitted[side];
        half.timestamps = self.timestamps[side];
        half.snd_max = Seq(self.isn[side]).plus(1);
        half.snd_init = true;
        half.window = u32::from(self.window[side]);
        half.packets = 1;
        half.ttl = self.ttl[side];
        half.remember(half.snd_max, syn.ts, false);
        // The SYN-ACK acknowledges the SYN; the SYN acknowledges nothing.
        let ack = if side == 1 {
            self.isn[0].wrapping_add(1)
        } else {
            0
        };
        let sig = copy_sig(self.isn[side], ack, 0, self.flags[side], self.window[side]);
        half.sent_once(SentSig::new(sig, syn.ts, self.ident[side]));
    }

    fn shifts(&self) -> [Option<u8>; 2] {
        if self.step < 2 || self.reset {
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
}
