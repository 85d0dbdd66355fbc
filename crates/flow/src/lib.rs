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
//! Memory is bounded by concurrently open connections: a connection that is
//! closed (FIN both ways, or RST) is handed to [`Analyzer::close`] and freed
//! once a short grace period of capture time has passed, and connections idle
//! longer than [`Config::idle_timeout_ns`] are closed the same way.
//!
//! This crate performs no I/O and reads no clock: time arrives with packets.

mod conn;
mod seq;

pub use conn::{Connection, Exchange, Half, Handshake, Mark, RoleSource};
pub use seq::Seq;

use std::collections::VecDeque;
use std::net::IpAddr;

use rustc_hash::FxHashMap;
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
    /// Capture time a reset connection stays around for trailing segments (a
    /// connection whose FINs were both acknowledged is freed at once).
    pub close_grace_ns: i64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            idle_timeout_ns: 300 * 1_000_000_000,
            close_grace_ns: 1_000_000_000,
        }
    }
}

/// Normalized 4-tuple: the lower (address, port) first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Key {
    a: u128,
    b: u128,
    pa: u16,
    pb: u16,
}

fn addr_bits(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(v4) => u128::from(u32::from(v4)),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

impl Key {
    /// The key of `seg`'s connection, and whether `seg` comes from the lower
    /// (address, port) of the tuple (or both ends are the same).
    fn of(seg: &TcpSegment<'_>) -> (Key, bool) {
        let s = (addr_bits(seg.src), seg.src_port);
        let d = (addr_bits(seg.dst), seg.dst_port);
        let from_lo = s <= d;
        let (lo, hi) = if from_lo { (s, d) } else { (d, s) };
        let key = Key {
            a: lo.0,
            b: hi.0,
            pa: lo.1,
            pb: hi.1,
        };
        (key, from_lo)
    }
}

struct Slot<C> {
    conn: Connection,
    state: C,
}

/// Tracks every TCP connection in a capture and drives an [`Analyzer`].
///
/// Connection state lives in a slab whose slots are reused once a connection
/// is freed: no allocation per connection, and a new connection lands in
/// memory that is likely still in cache.
pub struct Tracker<A: Analyzer> {
    table: FxHashMap<Key, u32>,
    /// The last key looked up and its slot (cleared when that connection is freed).
    last: Option<(Key, u32)>,
    slots: Vec<Slot<A::Conn>>,
    free: Vec<u32>,
    /// Closed connections waiting out their grace period, oldest first.
    closing: VecDeque<(Timestamp, Key, u64)>,
    config: Config,
    analyzer: A,
    next_id: u64,
    last_sweep: Timestamp,
    now: Timestamp,
    peak_open: usize,
    /// Capture time between idle sweeps: a tenth of the idle timeout.
    sweep_every_ns: i64,
}

impl<A: Analyzer> Tracker<A> {
    pub fn new(analyzer: A, config: Config) -> Self {
        Tracker {
            table: FxHashMap::default(),
            last: None,
            slots: Vec::new(),
            free: Vec::new(),
            closing: VecDeque::new(),
            config,
            analyzer,
            next_id: 1,
            last_sweep: Timestamp::default(),
            now: Timestamp::default(),
            peak_open: 0,
            sweep_every_ns: config.idle_timeout_ns / 10,
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

    fn slot(&self, key: &Key) -> Option<&Slot<A::Conn>> {
        self.table.get(key).map(|&i| &self.slots[i as usize])
    }

    /// Feeds one decoded segment captured at `ts` as frame number `frame`.
    pub fn push(&mut self, frame: u64, ts: Timestamp, seg: &TcpSegment<'_>) {
        if ts > self.now {
            self.now = ts;
        }
        self.expire();
        let (key, from_lo) = Key::of(seg);
        let flags = seg.flags;
        if flags.syn() && !flags.ack() {
            // A SYN on a tuple whose connection is over (or carries another ISN
            // after data flowed) is port reuse: close the old one first.
            if self.slot(&key).is_some_and(|s| s.conn.is_reused_by(seg)) {
                self.finish_key(key);
            }
        }
        let index = match self.last {
            // Nearly half the segments of a capture follow one of their own
            // connection (a request and its ACK, a response): no lookup.
            Some((k, i)) if k == key => i as usize,
            _ => self.lookup(key, frame, ts, seg, from_lo),
        };
        let Slot { conn, state } = &mut self.slots[index];
        let was_closed = conn.is_closed();
        let analyzer = &mut self.analyzer;
        conn.update(frame, ts, seg, from_lo, |c, ev| match ev {
            conn::Event::Segment(s) => analyzer.segment(c, state, s),
            conn::Event::Exchange(e) => analyzer.exchange(c, state, e),
        });
        // Finished implies closed: one check for the common, open case.
        if conn.is_closed() {
            if conn.is_finished() {
                self.finish_key(key);
            } else if !was_closed {
                let id = conn.id;
                self.closing.push_back((ts, key, id));
            }
        }
    }

    /// The slot of `key`'s connection, a new one if it has none; remembered
    /// as the last one used.
    fn lookup(
        &mut self,
        key: Key,
        frame: u64,
        ts: Timestamp,
        seg: &TcpSegment<'_>,
        from_lo: bool,
    ) -> usize {
        let index = match self.table.get(&key) {
            Some(&i) => i,
            None => {
                let id = self.next_id;
                self.next_id += 1;
                let conn = Connection::new(id, frame, ts, seg, from_lo);
                let i = match self.free.pop() {
                    Some(i) => {
                        // Reuse the slot in place: no slot-sized temporary.
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
                self.table.insert(key, i);
                self.peak_open = self.peak_open.max(self.table.len());
                i
            }
        };
        self.last = Some((key, index));
        index as usize
    }

    /// Closes every connection still open and returns the analyzer.
    pub fn finish(mut self) -> A {
        let mut keys: Vec<(u64, Key)> = self
            .table
            .iter()
            .map(|(k, &i)| (self.slots[i as usize].conn.id, *k))
            .collect();
        keys.sort_unstable_by_key(|(id, _)| *id);
        for (_, k) in keys {
            self.finish_key(k);
        }
        self.analyzer
    }

    fn finish_key(&mut self, key: Key) {
        if let Some(i) = self.table.remove(&key) {
            if self.last.is_some_and(|(k, _)| k == key) {
                self.last = None;
            }
            let Slot { conn, state } = &mut self.slots[i as usize];
            let analyzer = &mut self.analyzer;
            if let Some(ex) = conn.take_exchange() {
                analyzer.exchange(conn, state, &ex);
            }
            analyzer.close(conn, state);
            self.free.push(i);
        }
    }

    /// Frees what is due: closed connections past their grace period, idle
    /// ones at each sweep. Most packets have nothing due: checked inline.
    #[inline]
    fn expire(&mut self) {
        let grace_over = self
            .closing
            .front()
            .is_some_and(|c| self.now.since(c.0) >= self.config.close_grace_ns);
        if grace_over || self.now.since(self.last_sweep) >= self.sweep_every_ns {
            self.expire_due();
        }
    }

    #[cold]
    #[inline(never)]
    fn expire_due(&mut self) {
        while let Some(&(closed_at, key, id)) = self.closing.front() {
            if self.now.since(closed_at) < self.config.close_grace_ns {
                break;
            }
            self.closing.pop_front();
            if self
                .slot(&key)
                .is_some_and(|s| s.conn.id == id && s.conn.is_closed())
            {
                self.finish_key(key);
            }
        }
        // Idle sweep, at most once per tenth of the idle timeout of capture time.
        if self.now.since(self.last_sweep) >= self.sweep_every_ns {
            self.last_sweep = self.now;
            let limit = self.config.idle_timeout_ns;
            let now = self.now;
            let idle: Vec<Key> = self
                .table
                .iter()
                .filter(|(_, &i)| now.since(self.slots[i as usize].conn.last_ts) >= limit)
                .map(|(k, _)| *k)
                .collect();
            for k in idle {
                self.finish_key(k);
            }
        }
    }
}

#[cfg(test)]
mod tests;
