//! TCP connection tracking over decoded segments.
//!
//! The [`Tracker`] keeps one [`Connection`] per 4-tuple and turns each
//! captured segment into a [`Segment`] event with the context a diagnosis
//! needs: direction, relative sequence numbers, what the segment is (new data,
//! retransmission, pure ACK…), bytes in flight, the receiver's scaled window.
//! It also cuts each connection into [`Exchange`]s — a request (client data)
//! followed by its response (server data) — with their timings.
//!
//! Analysis plugs in through the [`Analyzer`] trait, which keeps its own state
//! inside each connection's slot so that there is one hash lookup per packet.
//!
//! Memory is bounded by concurrently open connections, and what each costs
//! follows what it has shown: a connection that has shown only a plain
//! handshake is kept compact (160 bytes with its slot, a SYN flood's
//! half-open connections never grow beyond that), the rest in full (about
//! 1.2 KB more, boxed). A connection that is closed (FIN both ways, or RST) is
//! handed to [`Analyzer::close`] and freed once a short grace period of
//! capture time has passed; connections idle longer than
//! [`Config::idle_timeout_ns`] (half-open ones: [`Config::half_open_timeout_ns`])
//! are closed the same way, and never more than [`Config::max_open`] are held.
//!
//! This crate performs no I/O and reads no clock: time arrives with packets.

mod conn;
mod seq;

pub use conn::{Connection, Exchange, Half, HalfRef, Handshake, Mark, RoleSource};
pub use seq::Seq;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::hash::Hasher;
use std::net::IpAddr;

use conn::FullBox;
use hashbrown::HashTable;
use rustc_hash::FxHasher;
use tcpdoctor_wire::{TcpSegment, Timestamp};

/// Which way a segment travels. The client is the SYN sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dir {
    ClientToServer,
    ServerToClient,
}

impl Dir {
    pub fn index(self) -> usize {
        match self {
            Dir::ClientToServer => 0,
            Dir::ServerToClient => 1,
        }
    }

    pub fn reverse(self) -> Dir {
        match self {
            Dir::ClientToServer => Dir::ServerToClient,
            Dir::ServerToClient => Dir::ClientToServer,
        }
    }
}

/// What a segment is, from its sender's sequence space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SegKind {
    /// SYN or SYN-ACK.
    Syn,
    /// Carries payload beyond the highest sequence sent so far.
    NewData,
    /// Carries payload entirely below the highest sequence sent so far.
    Retransmission,
    /// One byte (or none) just below the next sequence number while data is
    /// all acknowledged: a keep-alive (RFC 1122 §4.2.3.6) or a window probe.
    KeepAliveOrProbe,
    /// No payload.
    Ack,
}

/// One segment, as seen by the tracker.
#[derive(Debug, Clone, Copy)]
pub struct Segment<'a> {
    /// 1-based frame number in the capture.
    pub frame: u64,
    pub ts: Timestamp,
    pub dir: Dir,
    /// Sequence number relative to the sender's initial sequence number.
    pub seq: u32,
    /// Payload length from the IP header.
    pub len: u32,
    /// Acknowledgment number relative to the receiver's initial sequence number.
    pub ack: u32,
    pub flags: tcpdoctor_wire::TcpFlags,
    /// The window this segment advertises, scaled (bytes).
    pub window: u32,
    pub kind: SegKind,
    /// Bytes of the peer's data this segment newly acknowledges.
    pub acked: u32,
    /// Sender's bytes in flight after this segment (highest sent − highest acknowledged).
    pub in_flight: u32,
    /// The receive window the peer last advertised to this segment's sender (scaled).
    pub peer_window: u32,
    /// The captured payload bytes (possibly truncated by the snaplen).
    pub payload: &'a [u8],
}

/// Receives what the tracker sees. `Conn` is per-connection analyzer state.
pub trait Analyzer {
    type Conn: Default;

    /// Called for every segment after the connection state was updated.
    fn segment(&mut self, conn: &Connection, state: &mut Self::Conn, seg: &Segment<'_>);

    /// Called when an exchange is over (the next request started, or the connection ended).
    fn exchange(&mut self, conn: &Connection, state: &mut Self::Conn, ex: &Exchange);

    /// Called once per connection, when it is closed and freed (or at the end of the capture).
    fn close(&mut self, conn: &Connection, state: &mut Self::Conn);
}

/// Tracker settings.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// Capture time after which an idle connection is closed and freed.
    pub idle_timeout_ns: i64,
    /// Capture time after which a half-open connection (a handshake never
    /// completed, no data: [`Connection::is_half_open`]) is closed and freed.
    /// 75 s is past every retry a SYN or SYN-ACK can still get: Linux waits 1,
    /// 2, 4… s between SYN retries, 32 s before its last with the default 6
    /// (`tcp_syn_retries`), 64 s with 7; SYN-ACKs are retried 5 times, the
    /// last 16 s after the one before (`tcp_synack_retries`).
    pub half_open_timeout_ns: i64,
    /// Capture time a reset connection stays around for trailing segments (a
    /// connection whose FINs were both acknowledged is freed at once).
    pub close_grace_ns: i64,
    /// The most connections held at once. When a new connection would exceed
    /// it, connections already closed are freed before their grace period
    /// ends, then the one nearest its idle timeout (half-open ones first) is
    /// closed early: summarised like any other, and counted
    /// ([`Tracker::closed_early`]).
    pub max_open: usize,
    /// Keep connections that have shown only a plain handshake in compact
    /// form ([`Connection`]); `false` tracks every connection in full from
    /// its first packet (same results, more memory: for tests and measurements).
    pub compact_handshakes: bool,
}

/// [`Config::max_open`] by default: at most about 50 MB of half-open
/// connections, a few hundred MB if all of them carry data.
pub const DEFAULT_MAX_OPEN: usize = 250_000;

impl Default for Config {
    fn default() -> Self {
        Config {
            idle_timeout_ns: 300 * 1_000_000_000,
            half_open_timeout_ns: 75 * 1_000_000_000,
            close_grace_ns: 1_000_000_000,
            max_open: DEFAULT_MAX_OPEN,
            compact_handshakes: true,
        }
    }
}

fn addr_bits(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(v4) => u128::from(u32::from(v4)),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

/// The hash of a connection's tuple: the same for both directions (the
/// lower (address, port) goes first).
#[inline]
fn tuple_hash(a: (IpAddr, u16), b: (IpAddr, u16)) -> u64 {
    let mut h = FxHasher::default();
    match (a.0, b.0) {
        (IpAddr::V4(x), IpAddr::V4(y)) => {
            let x = u64::from(u32::from(x)) << 16 | u64::from(a.1);
            let y = u64::from(u32::from(y)) << 16 | u64::from(b.1);
            h.write_u64(x.min(y));
            h.write_u64(x.max(y));
        }
        (x, y) => {
            let x = (addr_bits(x), a.1);
            let y = (addr_bits(y), b.1);
            let (lo, hi) = if x <= y { (x, y) } else { (y, x) };
            h.write_u128(lo.0);
            h.write_u128(hi.0);
            h.write_u32(u32::from(lo.1) << 16 | u32::from(hi.1));
        }
    }
    h.finish()
}

/// A connection and its analyzer state. A free slot's connection has id 0
/// (ids count from 1).
struct Slot<C> {
    conn: Connection,
    state: C,
}

/// A deadline in the idle queue: (capture time in ns, slot, connection id).
type Deadline = Reverse<(i64, u32, u64)>;

/// Full-state boxes kept for reuse, at most.
const SPARE_FULL: usize = 1024;

/// Tracks every TCP connection in a capture and drives an [`Analyzer`].
///
/// Connection state lives in a slab whose slots are reused once a connection
/// is freed: no allocation per connection, and a new connection lands in
/// memory that is likely still in cache. The hash table holds slot numbers
/// only (the tuple is in the slot). Idle connections are found through a
/// queue of deadlines, each connection in it once: no scan of the table.
pub struct Tracker<A: Analyzer> {
    table: HashTable<u32>,
    /// The slot of the last connection used: most segments follow one of their own.
    last: Option<u32>,
    slots: Vec<Slot<A::Conn>>,
    free: Vec<u32>,
    /// Closed connections waiting out their grace period, oldest first.
    closing: VecDeque<(Timestamp, u32, u64)>,
    /// When each open connection falls idle, earliest first. An entry is
    /// checked when due: a connection seen since is queued again for its new
    /// deadline; one freed since is dropped.
    deadlines: BinaryHeap<Deadline>,
    spare: Vec<FullBox>,
    config: Config,
    analyzer: A,
    next_id: u64,
    now: Timestamp,
    peak_open: usize,
    full_open: usize,
    closed_early: u64,
    grace_cut: u64,
}

impl<A: Analyzer> Tracker<A> {
    pub fn new(analyzer: A, config: Config) -> Self {
        Tracker {
            table: HashTable::new(),
            last: None,
            slots: Vec::new(),
            free: Vec::new(),
            closing: VecDeque::new(),
            deadlines: BinaryHeap::new(),
            spare: Vec::new(),
            config,
            analyzer,
            next_id: 1,
            now: Timestamp::default(),
            peak_open: 0,
            full_open: 0,
            closed_early: 0,
            grace_cut: 0,
        }
    }

    pub fn analyzer(&self) -> &A {
        &self.analyzer
    }

    pub fn analyzer_mut(&mut self) -> &mut A {
        &mut self.analyzer
    }

    /// Connections currently held in memory.
    pub fn open_connections(&self) -> usize {
        self.table.len()
    }

    /// The most connections held at once.
    pub fn peak_open_connections(&self) -> usize {
        self.peak_open
    }

    /// Open connections that hold their full state (the rest are compact handshakes).
    pub fn full_connections(&self) -> usize {
        self.full_open
    }

    /// Connections closed before they ended or idled out because
    /// [`Config::max_open`] were open.
    pub fn closed_early(&self) -> u64 {
        self.closed_early
    }

    /// Closed connections freed before their grace period was over because
    /// [`Config::max_open`] were open.
    pub fn grace_cut_short(&self) -> u64 {
        self.grace_cut
    }

    /// Bytes the tracker holds for connections (slots, table, queues, full
    /// states), as allocated; the analyzer's own per-connection state is extra.
    pub fn state_bytes(&self) -> usize {
        use std::mem::size_of;
        self.slots.capacity() * size_of::<Slot<A::Conn>>()
            + self.table.capacity() * (size_of::<u32>() + 1)
            + self.free.capacity() * size_of::<u32>()
            + self.closing.capacity() * size_of::<(Timestamp, u32, u64)>()
            + self.deadlines.capacity() * size_of::<Deadline>()
            + (self.full_open + self.spare.len()) * size_of::<conn::Full>()
    }

    /// Feeds one decoded segment captured at `ts` as frame number `frame`.
    pub fn push(&mut self, frame: u64, ts: Timestamp, seg: &TcpSegment<'_>) {
        if ts > self.now {
            self.now = ts;
        }
        self.expire();
        let syn_only = seg.flags.syn() && !seg.flags.ack();
        // Nearly half the segments of a capture follow one of their own
        // connection (a request and its ACK, a response): no lookup.
        let last = self.last.filter(|&i| {
            let c = &self.slots[i as usize].conn;
            c.matches(seg) && !(syn_only && c.is_reused_by(seg))
        });
        let index = match last {
            Some(i) => i as usize,
            None => match self.lookup(frame, ts, seg) {
                Some(i) => i,
                // The segment opened a compact connection: nothing more to do.
                None => return,
            },
        };
        let slot = &mut self.slots[index];
        let (conn, state) = (&mut slot.conn, &mut slot.state);
        let analyzer = &mut self.analyzer;
        if conn.is_compact() {
            if conn.push_compact(frame, ts, seg) {
                if conn.is_closed() {
                    // Refused (RST-ACK): kept for trailing segments like any reset one.
                    let id = conn.id;
                    self.closing.push_back((ts, index as u32, id));
                }
                return;
            }
            // More than a plain handshake: the full state, and the analyzer
            // sees the segments it has not seen yet.
            let (replay, n) = conn.expand(self.spare.pop());
            self.full_open += 1;
            for r in &replay[..n] {
                analyzer.segment(conn, state, &r.segment());
            }
        }
        let was_closed = conn.is_closed();
        conn.update(frame, ts, seg, |c, ev| match ev {
            conn::Event::Segment(s) => analyzer.segment(c, state, s),
            conn::Event::Exchange(e) => analyzer.exchange(c, state, e),
        });
        // Finished implies closed: one check for the common, open case.
        if conn.is_closed() {
            if conn.is_finished() {
                self.finish_slot(index as u32);
            } else if !was_closed {
                let id = conn.id;
                self.closing.push_back((ts, index as u32, id));
            }
        }
    }

    /// The slot of `seg`'s connection, a new one if it has none (`None` if
    /// `seg` opened a compact one, which recorded it); remembered as the last
    /// one used.
    fn lookup(&mut self, frame: u64, ts: Timestamp, seg: &TcpSegment<'_>) -> Option<usize> {
        let hash = tuple_hash((seg.src, seg.src_port), (seg.dst, seg.dst_port));
        let slots = &self.slots;
        let found = self
            .table
            .find(hash, |&i| slots[i as usize].conn.matches(seg))
            .copied();
        if let Some(i) = found {
            // A SYN on a tuple whose connection is over (or carries another ISN
            // after data flowed) is port reuse: close the old one first.
            let syn_only = seg.flags.syn() && !seg.flags.ack();
            if !(syn_only && self.slots[i as usize].conn.is_reused_by(seg)) {
                self.last = Some(i);
                return Some(i as usize);
            }
            self.finish_slot(i);
        }
        while self.table.len() >= self.config.max_open.max(1) {
            self.make_room();
        }
        let id = self.next_id;
        self.next_id += 1;
        let conn = Connection::new(
            id,
            frame,
            ts,
            seg,
            self.config.compact_handshakes,
            &mut self.spare,
        );
        let compact = conn.is_compact();
        if !compact {
            self.full_open += 1;
        }
        // Queued for the earlier of the two timeouts: the segment that opened
        // the connection is not tracked yet (a SYN makes it half-open), and a
        // deadline may come early (it is then queued again), never late.
        let soonest = self
            .config
            .half_open_timeout_ns
            .min(self.config.idle_timeout_ns);
        let due = ts.nanos().saturating_add(soonest);
        let i = match self.free.pop() {
            Some(i) => {
                let slot = &mut self.slots[i as usize];
                slot.conn = conn;
                slot.state = A::Conn::default();
                i
            }
            None => {
                self.slots.push(Slot {
                    conn,
                    state: A::Conn::default(),
                });
                (self.slots.len() - 1) as u32
            }
        };
        let slots = &self.slots;
        self.table.insert_unique(hash, i, |&j| {
            let (a, b) = slots[j as usize].conn.endpoints();
            tuple_hash(a, b)
        });
        self.peak_open = self.peak_open.max(self.table.len());
        self.deadlines.push(Reverse((due, i, id)));
        self.compact_deadlines();
        self.last = Some(i);
        (!compact).then_some(i as usize)
    }

    /// How long `conn` may stay idle.
    fn timeout(&self, conn: &Connection) -> i64 {
        if conn.is_half_open() {
            self.config.half_open_timeout_ns
        } else {
            self.config.idle_timeout_ns
        }
    }

    /// Closes every connection still open and returns the analyzer.
    pub fn finish(mut self) -> A {
        let mut open: Vec<(u64, u32)> = self
            .table
            .iter()
            .map(|&i| (self.slots[i as usize].conn.id, i))
            .collect();
        open.sort_unstable();
        for (_, i) in open {
            self.finish_slot(i);
        }
        self.analyzer
    }

    /// Closes and frees the connection in slot `i`.
    fn finish_slot(&mut self, i: u32) {
        let slot = &mut self.slots[i as usize];
        if slot.conn.id == 0 {
            return;
        }
        let (a, b) = slot.conn.endpoints();
        let hash = tuple_hash(a, b);
        if let Ok(entry) = self.table.find_entry(hash, |&j| j == i) {
            entry.remove();
        }
        if self.last == Some(i) {
            self.last = None;
        }
        let Slot { conn, state } = &mut self.slots[i as usize];
        let analyzer = &mut self.analyzer;
        // A compact connection's segments were not shown to the analyzer yet.
        let (replay, n) = conn.compact_segments();
        for r in &replay[..n] {
            analyzer.segment(conn, state, &r.segment());
        }
        if let Some(ex) = conn.take_exchange() {
            analyzer.exchange(conn, state, &ex);
        }
        analyzer.close(conn, state);
        conn.id = 0;
        if let Some(b) = conn.take_full() {
            self.full_open -= 1;
            if self.spare.len() < SPARE_FULL {
                self.spare.push(b);
            }
        }
        self.free.push(i);
    }

    /// Frees what is due: closed connections past their grace period, idle
    /// ones past their deadline. Most packets have nothing due: checked inline.
    #[inline]
    fn expire(&mut self) {
        let grace_over = self
            .closing
            .front()
            .is_some_and(|c| self.now.since(c.0) >= self.config.close_grace_ns);
        let idle = self
            .deadlines
            .peek()
            .is_some_and(|d| d.0 .0 <= self.now.nanos());
        if grace_over || idle {
            self.expire_due();
        }
    }

    #[cold]
    #[inline(never)]
    fn expire_due(&mut self) {
        while let Some(&(closed_at, i, id)) = self.closing.front() {
            if self.now.since(closed_at) < self.config.close_grace_ns {
                break;
            }
            self.closing.pop_front();
            if self.is_open(i, id) && self.slots[i as usize].conn.is_closed() {
                self.finish_slot(i);
            }
        }
        while let Some(&Reverse((due, i, id))) = self.deadlines.peek() {
            if due > self.now.nanos() {
                break;
            }
            self.deadlines.pop();
            if !self.is_open(i, id) {
                continue;
            }
            let conn = &self.slots[i as usize].conn;
            let actual = conn.last_ts.nanos().saturating_add(self.timeout(conn));
            if actual <= self.now.nanos() {
                self.finish_slot(i);
            } else {
                self.deadlines.push(Reverse((actual, i, id)));
            }
        }
    }

    /// Whether slot `i` still holds connection `id`.
    fn is_open(&self, i: u32, id: u64) -> bool {
        self.slots[i as usize].conn.id == id
    }

    /// Frees one connection to stay within [`Config::max_open`]: a closed one
    /// still in its grace period if any, else the open one nearest its idle
    /// deadline.
    #[cold]
    fn make_room(&mut self) {
        while let Some((_, i, id)) = self.closing.pop_front() {
            if self.is_open(i, id) && self.slots[i as usize].conn.is_closed() {
                self.grace_cut += 1;
                self.finish_slot(i);
                return;
            }
        }
        while let Some(Reverse((due, i, id))) = self.deadlines.pop() {
            if !self.is_open(i, id) {
                continue;
            }
            let conn = &self.slots[i as usize].conn;
            let actual = conn.last_ts.nanos().saturating_add(self.timeout(conn));
            if actual > due {
                // Seen since it was queued: queued again for when it is due.
                self.deadlines.push(Reverse((actual, i, id)));
                continue;
            }
            self.closed_early += 1;
            self.finish_slot(i);
            return;
        }
    }

    /// Drops the deadlines of connections already freed once they outnumber
    /// the open ones: the queue stays within twice the open connections.
    fn compact_deadlines(&mut self) {
        if self.deadlines.len() > 2 * self.table.len() + 1024 {
            let slots = &self.slots;
            self.deadlines
                .retain(|&Reverse((_, i, id))| slots[i as usize].conn.id == id);
        }
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_compact;
