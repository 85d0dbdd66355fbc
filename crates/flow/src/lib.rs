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
//! handshake is kept compact in its slot (160 bytes; a SYN flood's half-open
//! connections never grow beyond that), the rest get their full
//! [`Connection`] (1.3 KB more, boxed). A connection whose FINs were both
//! acknowledged is handed to [`Analyzer::close`] and freed at once (later
//! copies of its last ACK are counted as stray packets); a reset one once a
//! short grace period of capture time has passed; one whose FINs are not all
//! acknowledged stays open (its FIN is sent again, backing off). Connections idle longer than
//! [`Config::idle_timeout_ns`] (half-open ones: [`Config::half_open_timeout_ns`])
//! are closed the same way, and never more than [`Config::max_open`] are held.
//!
//! This crate performs no I/O and reads no clock: time arrives with packets.
#![forbid(unsafe_code)]

mod compact;
mod conn;
mod deadlines;
mod messages;
mod seq;

pub use conn::{Connection, DeliveryRate, Exchange, Half, Handshake, Mark, RoleSource};
pub use messages::message_prefix;
pub use seq::Seq;

/// Slack for a sender to react to an ACK, beyond the round trip to it and a
/// quarter of that round trip for jitter: data an ACK released leaves within
/// this; data later than that the sender did not have (or held on its own).
pub const REACT_SLACK_NS: i64 = 2_000_000;

/// Gaps between a sender's segments shorter than this are no pause:
/// serialization, scheduling, pacing. The data was moving.
pub const MIN_PAUSE_NS: i64 = 1_000_000;

use std::collections::VecDeque;

use compact::{tuple_hash, Core};
use deadlines::Deadlines;
use hashbrown::HashTable;
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
    /// The raw TCP option bytes (parse them only when needed:
    /// [`tcpdoctor_wire::TcpOptions::parse`]).
    pub options: &'a [u8],
    /// The IPv4 identification (0 for IPv6, or not known).
    pub ip_id: u16,
}

impl Segment<'_> {
    /// The timestamp value this segment carries (RFC 7323 §3 TSval), if any.
    #[inline]
    pub fn tsval(&self) -> Option<u32> {
        tcpdoctor_wire::TcpOptions::timestamps(self.options).map(|t| t.0)
    }

    /// Whether this ACK answers data sent before a re-send whose TSval was
    /// `resent_tsval`: it echoes an earlier timestamp (RFC 3522, the Eifel
    /// detection), so the original arrived and the re-send was spurious.
    #[inline]
    pub fn echoes_before(&self, resent_tsval: u32) -> bool {
        tcpdoctor_wire::TcpOptions::timestamps(self.options)
            .is_some_and(|(_, ecr)| ecr != 0 && Seq(ecr) < Seq(resent_tsval))
    }

    /// The duplicate the receiver reports with this ACK (D-SACK, RFC 2883
    /// §4): the first SACK block when it lies below the cumulative ACK or
    /// inside the second block. Data it covers reached the receiver twice,
    /// so a re-send of it was spurious. Relative to the data sender's base
    /// (`conn`'s half in the other direction); `None` without one.
    pub fn dsack(&self, conn: &Connection) -> Option<(u32, u32)> {
        if self.options.len() < 10 || !self.flags.ack() {
            return None;
        }
        let sack = tcpdoctor_wire::TcpOptions::parse(self.options).sack;
        let blocks = sack.as_slice();
        let &(l, r) = blocks.first()?;
        let base = conn.half(self.dir.reverse()).base;
        let (l, r) = (l.wrapping_sub(base.0), r.wrapping_sub(base.0));
        let below_ack = Seq(r) <= Seq(self.ack);
        let inside_second = blocks.get(1).is_some_and(|&(l2, r2)| {
            let (l2, r2) = (l2.wrapping_sub(base.0), r2.wrapping_sub(base.0));
            Seq(l) >= Seq(l2) && Seq(r) <= Seq(r2)
        });
        (Seq(l) < Seq(r) && (below_ack || inside_second)).then_some((l, r))
    }
}

/// Data a sender sent again, until the receiver shows it already had the
/// originals: by reporting the re-sent bytes as duplicates (D-SACK, RFC
/// 2883), or by acknowledging them with an echo of an earlier timestamp than
/// the first re-send's (RFC 3522, the Eifel detection). While some re-sent
/// byte is unproven, the re-send may have been needed (a loss).
#[derive(Debug, Default, Clone, Copy)]
pub struct Resent {
    /// The span of the re-sends not yet proven spurious (relative; empty: none).
    lo: u32,
    hi: u32,
    /// The first re-send's timestamp value.
    tsval: Option<u32>,
}

impl Resent {
    /// A re-send: its bytes join the span (bytes between two re-sends that
    /// were not re-sent are never reported back, and keep it unproven).
    pub fn add(&mut self, seg: &Segment<'_>) {
        let end = seg.seq.wrapping_add(seg.len);
        if self.lo == self.hi {
            *self = Resent {
                lo: seg.seq,
                hi: end,
                tsval: seg.tsval(),
            };
        } else {
            if Seq(seg.seq) < Seq(self.lo) {
                self.lo = seg.seq;
            }
            if Seq(end) > Seq(self.hi) {
                self.hi = end;
            }
        }
    }

    /// Some re-sent byte is not proven spurious.
    pub fn unproven(&self) -> bool {
        self.lo != self.hi
    }

    /// An ACK of the re-sent direction: what it proves. Inline: nearly
    /// always nothing was re-sent.
    #[inline]
    pub fn on_ack(&mut self, conn: &Connection, seg: &Segment<'_>) {
        if self.unproven() {
            self.proven_by(conn, seg);
        }
    }

    #[inline(never)]
    fn proven_by(&mut self, conn: &Connection, seg: &Segment<'_>) {
        if let Some((l, r)) = seg.dsack(conn) {
            if Seq(l) <= Seq(self.lo) && Seq(r) > Seq(self.lo) {
                self.lo = if Seq(r) >= Seq(self.hi) { self.hi } else { r };
            }
        }
        let echoes = self.tsval.is_some_and(|tv| seg.echoes_before(tv));
        if echoes && Seq(seg.ack) >= Seq(self.hi) {
            self.lo = self.hi;
        }
    }
}

/// Receives what the tracker sees. `Conn` is per-connection analyzer state.
pub trait Analyzer {
    type Conn: Default;

    /// Called for every segment after the connection state was updated. The
    /// segments of a plain handshake kept compact ([`Connection::is_compact`])
    /// come later: just before the segment that shows more (with the state as
    /// it was after them), or at the close ([`Analyzer::compact_segment`]).
    fn segment(&mut self, conn: &Connection, state: &mut Self::Conn, seg: &Segment<'_>);

    /// Called when an exchange is over (the next request started, or the connection ended).
    fn exchange(&mut self, conn: &Connection, state: &mut Self::Conn, ex: &Exchange);

    /// Called once per connection, when it is closed and freed (or at the end of the capture).
    fn close(&mut self, conn: &Connection, state: &mut Self::Conn);

    /// Called instead of [`Analyzer::segment`] with the segments of a
    /// connection that closes while still a compact handshake
    /// ([`Connection::is_compact`]), just before [`Analyzer::close`]. They go to
    /// [`Analyzer::segment`] unless the analyzer has nothing to learn from them.
    fn compact_segment(&mut self, conn: &Connection, state: &mut Self::Conn, seg: &Segment<'_>) {
        self.segment(conn, state, seg);
    }
}

/// A capture clock stepping back further than this starts another stretch
/// of capture ([`Tracker::push`]): a connection's idle and grace periods are
/// timed by its own stretch's clock.
pub const CLOCK_STEP_BACK_NS: i64 = 1_000_000_000;

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
    /// Capture time a reset connection stays around for trailing segments
    /// (one whose FINs were both acknowledged is freed at once).
    pub close_grace_ns: i64,
    /// The most connections held at once. When a new connection would exceed
    /// it, connections already closed are freed before their grace period
    /// ends, then the open one whose idle deadline comes first (half-open
    /// ones come due sooner) is closed early: summarised like any other, and
    /// counted ([`Tracker::closed_early`]).
    ///
    /// The ceiling this sets: about 200 bytes per compact connection, about
    /// 4.5 KB per connection with data (its full state and a diagnosis's).
    pub max_open: usize,
    /// Keep connections that have shown only a plain handshake in compact
    /// form ([`Connection::is_compact`]); `false` tracks every connection in
    /// full from its first packet (same results, more memory: for tests and
    /// measurements).
    pub compact_handshakes: bool,
}

/// [`Config::max_open`] by default: at most about 50 MB of half-open
/// connections (a SYN flood), about 1.2 GB if every one of them carries data.
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

/// One connection: its identity and tuple (and its compact handshake while
/// it has no full state), its full state, its analyzer state.
struct Slot<C> {
    core: Core,
    full: Option<Box<Connection>>,
    state: C,
}

impl<C> Slot<C> {
    fn last_ts(&self) -> Timestamp {
        self.full
            .as_ref()
            .map_or(self.core.last_ts(), |c| c.last_ts)
    }

    fn is_closed(&self) -> bool {
        self.full
            .as_ref()
            .map_or(self.core.is_closed(), |c| c.is_closed())
    }

    fn is_half_open(&self) -> bool {
        self.full
            .as_ref()
            .map_or(self.core.is_half_open(), |c| c.is_half_open())
    }
}

/// A connection's full state in its box: spare ones are kept boxed, to be
/// reused without allocating.
pub(crate) type ConnBox = Box<Connection>;

/// Full-state boxes kept for reuse, at most.
const SPARE_FULL: usize = 1024;

/// Tracks every TCP connection in a capture and drives an [`Analyzer`].
///
/// Connection state lives in a slab whose slots are reused once a connection
/// is freed, and the full states' boxes too: no allocation per connection in
/// the steady state. The hash table holds slot numbers only (the tuple is in
/// the slot). Idle connections are found through a queue of deadlines, each
/// connection in it once: no scan of the table.
pub struct Tracker<A: Analyzer> {
    table: HashTable<u32>,
    /// Slots used lately, by their ports ([`recent_key`]): the connections
    /// in turn on a busy link (and a connection's segments in a row) are
    /// found without hashing the tuple. An entry is a hint, checked against
    /// the slot's tuple and that it is open.
    recent: [u32; RECENT],
    slots: Vec<Slot<A::Conn>>,
    free: Vec<u32>,
    /// Closed connections waiting out their grace period, oldest first.
    closing: VecDeque<(Timestamp, u32, u64)>,
    /// When each open connection falls idle, earliest first. An entry is
    /// checked when due: a connection seen since is queued again for its new
    /// deadline; one freed since is dropped.
    deadlines: Deadlines,
    /// No closed connection's grace period and no deadline ends before this
    /// capture time (ns): packets before it have nothing to free, without a
    /// look at either queue. Lowered as entries are queued; `i64::MIN` when
    /// a queue's first entry may have changed otherwise.
    wake_ns: i64,
    spare: Vec<ConnBox>,
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
            recent: [u32::MAX; RECENT],
            slots: Vec::new(),
            free: Vec::new(),
            closing: VecDeque::new(),
            deadlines: Deadlines::default(),
            wake_ns: i64::MIN,
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

    /// Connections held in memory that are not closed: those closed by FIN or
    /// RST but still waiting out their grace period (which passes only as
    /// packets arrive) are left out. One pass over the table: for a live view.
    pub fn unclosed_connections(&self) -> usize {
        self.table
            .iter()
            .filter(|&&i| !self.slots[i as usize].is_closed())
            .count()
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
            + self.deadlines.bytes()
            + (self.full_open + self.spare.len()) * size_of::<Connection>()
    }

    /// Feeds one decoded segment captured at `ts` as frame number `frame`.
    pub fn push(&mut self, frame: u64, ts: Timestamp, seg: &TcpSegment<'_>) {
        // The clock is the latest time seen, through the few packets a
        // capture writes out of order; a step back of seconds is another
        // stretch of capture (files merged out of time order, interfaces
        // whose clocks differ), whose connections would be past their idle
        // deadline the moment they opened if timed by the later stretch.
        if ts > self.now || ts.nanos() < self.now.nanos().saturating_sub(CLOCK_STEP_BACK_NS) {
            self.now = ts;
        }
        self.expire();
        let syn_only = seg.flags.syn() && !seg.flags.ack();
        // Most segments are found among the recent slots: no lookup.
        let i = self.recent[recent_key(seg)];
        // A freed slot keeps its tuple: only an open one (id not 0) is it.
        let open = self.slots.get(i as usize).is_some_and(|s| s.core.id != 0);
        let recent = if open {
            self.used(i, seg, syn_only)
        } else {
            None
        };
        let (index, dir) = match recent {
            Some(hit) => hit,
            None => match self.lookup(frame, ts, seg) {
                Some(hit) => hit,
                // The segment opened a compact connection: nothing more to do.
                None => return,
            },
        };
        self.check_counter(index, dir, ts, seg);
        let Some(Slot { core, full, state }) = self.slots.get_mut(index) else {
            return;
        };
        let analyzer = &mut self.analyzer;
        let conn = match full {
            Some(conn) => conn,
            None => {
                if core.push(frame, ts, seg, dir) {
                    if core.is_closed() {
                        // Refused (RST-ACK): kept for trailing segments like any reset one.
                        self.closing.push_back((ts, index as u32, core.id));
                        self.wake_ns = self.wake_ns.min(self.grace_end(ts));
                    }
                    return;
                }
                // More than a plain handshake: the full state, and the analyzer
                // sees the segments it has not seen yet.
                self.full_open += 1;
                expand(core, full, state, analyzer, &mut self.spare)
            }
        };
        let was_over = conn.is_closed() && conn.is_over();
        conn.update(frame, ts, seg, dir, |c, ev| match ev {
            conn::Event::Segment(s) => analyzer.segment(c, state, s),
            conn::Event::Exchange(e) => analyzer.exchange(c, state, e),
        });
        // Over implies closed: one check for the common, open case. A
        // connection whose FINs are not all acknowledged yet stays open: its
        // FINs are retried for minutes, with the backoff of any timeout.
        // Both FINs acknowledged: freed at once (what follows is a copy or a
        // stray, counted as such); a reset one waits out its grace period.
        if conn.is_closed() && !was_over && conn.is_over() {
            if conn.is_finished() {
                self.finish_slot(index as u32);
            } else {
                let id = conn.id;
                self.closing.push_back((ts, index as u32, id));
                self.wake_ns = self.wake_ns.min(self.grace_end(ts));
            }
        }
    }

    /// A packet whose IPv4 identification skips numbers after a silence
    /// ([`conn::IpIds`]): when one of the sender's other connections used
    /// them, the host numbers its connections from one counter, and the
    /// skip is that connection's packets, not a loss. Rare (a silence and a
    /// skip): the open connections are searched then.
    #[inline]
    fn check_counter(&mut self, index: usize, dir: Dir, ts: Timestamp, seg: &TcpSegment<'_>) {
        let Some(conn) = self.slots.get(index).and_then(|s| s.full.as_deref()) else {
            return;
        };
        let Some((from, to)) = conn.half(dir).ip_ids.skipped(seg, ts.nanos()) else {
            return;
        };
        let shared = self.slots.iter().enumerate().any(|(j, s)| {
            j != index
                && s.core.id != 0
                && s.full.as_deref().is_some_and(|c| {
                    [&c.client, &c.server].iter().any(|h| {
                        h.addr.ip() == seg.src
                            && h.ip_ids
                                .last()
                                .is_some_and(|l| l.wrapping_sub(from) < to.wrapping_sub(from))
                    })
                })
        });
        if shared {
            if let Some(conn) = self.slots[index].full.as_deref_mut() {
                conn.half_mut(dir).ip_ids.share();
            }
        }
    }

    /// Slot `i` and `seg`'s direction there, if `seg` belongs to its
    /// connection (and, a SYN, does not start a new one on its tuple).
    #[inline(always)]
    fn used(&self, i: u32, seg: &TcpSegment<'_>, syn_only: bool) -> Option<(usize, Dir)> {
        let slot = self.slots.get(i as usize)?;
        let dir = slot.core.dir_of(seg)?;
        (!(syn_only && reused_by(slot, seg))).then_some((i as usize, dir))
    }

    /// The slot of `seg`'s connection and `seg`'s direction, a new one if it
    /// has none (`None` if `seg` opened a compact one, which recorded it);
    /// noted among the recent slots. Out of line: most segments are
    /// found without it ([`Tracker::used`]).
    #[inline(never)]
    fn lookup(&mut self, frame: u64, ts: Timestamp, seg: &TcpSegment<'_>) -> Option<(usize, Dir)> {
        let hash = tuple_hash((seg.src, seg.src_port), (seg.dst, seg.dst_port));
        let slots = &self.slots;
        let mut dir = None;
        let found = self
            .table
            .find(hash, |&i| {
                dir = slots[i as usize].core.dir_of(seg);
                dir.is_some()
            })
            .copied();
        if let (Some(i), Some(dir)) = (found, dir) {
            // A SYN on a tuple whose connection is over (or carries another ISN
            // after data flowed) is port reuse: close the old one first.
            let syn_only = seg.flags.syn() && !seg.flags.ack();
            if !(syn_only && reused_by(&self.slots[i as usize], seg)) {
                self.recent[recent_key(seg)] = i;
                return Some((i as usize, dir));
            }
            self.finish_slot(i);
        }
        while self.table.len() >= self.config.max_open.max(1) {
            self.make_room();
        }
        let id = self.next_id;
        self.next_id += 1;
        let mark = Mark { ts, frame };
        let (core, full) = if self.config.compact_handshakes && compact::is_plain_syn(seg) {
            (Core::compact(id, mark, seg), None)
        } else {
            let conn = Connection::new(id, frame, ts, seg);
            self.full_open += 1;
            (Core::full(&conn), Some(boxed(&mut self.spare, conn)))
        };
        let compact = full.is_none();
        let i = match self.free.pop() {
            Some(i) => {
                let slot = &mut self.slots[i as usize];
                slot.core = core;
                slot.full = full;
                slot.state = A::Conn::default();
                i
            }
            None => {
                self.slots.push(Slot {
                    core,
                    full,
                    state: A::Conn::default(),
                });
                (self.slots.len() - 1) as u32
            }
        };
        let slots = &self.slots;
        self.table
            .insert_unique(hash, i, |&j| slots[j as usize].core.hash());
        self.peak_open = self.peak_open.max(self.table.len());
        // Queued for the earlier of the two timeouts: the segment that opened
        // the connection is not tracked yet (a SYN makes it half-open), and a
        // deadline may come early (it is then queued again), never late.
        let soonest = self
            .config
            .half_open_timeout_ns
            .min(self.config.idle_timeout_ns);
        let due = ts.nanos().saturating_add(soonest);
        self.deadlines.push((due, i, id));
        self.wake_ns = self.wake_ns.min(due);
        self.compact_deadlines();
        self.recent[recent_key(seg)] = i;
        if compact {
            return None;
        }
        let dir = self.slots[i as usize].core.dir_of(seg)?;
        Some((i as usize, dir))
    }

    /// How long the connection in `slot` may stay idle.
    fn timeout(&self, slot: &Slot<A::Conn>) -> i64 {
        if slot.is_half_open() {
            self.config.half_open_timeout_ns
        } else {
            self.config.idle_timeout_ns
        }
    }

    /// Closes every connection still open and returns the analyzer.
    pub fn finish(mut self) -> A {
        for i in self.open_by_id() {
            self.finish_slot(i);
        }
        self.analyzer
    }

    /// The slots of the open connections, in the order they opened (by id).
    fn open_by_id(&self) -> Vec<u32> {
        let ids = self.table.iter().map(|&i| self.slots[i as usize].core.id);
        let (Some(low), Some(high)) = (ids.clone().min(), ids.max()) else {
            return Vec::new();
        };
        let n = self.table.len();
        let span = usize::try_from(high - low).unwrap_or(usize::MAX);
        if span < 8 * n {
            // Ids are unique and dense enough: each one's place is its offset.
            let mut by_id = vec![u32::MAX; span + 1];
            for &i in self.table.iter() {
                by_id[(self.slots[i as usize].core.id - low) as usize] = i;
            }
            by_id.retain(|&i| i != u32::MAX);
            by_id
        } else {
            let mut open: Vec<(u64, u32)> = self
                .table
                .iter()
                .map(|&i| (self.slots[i as usize].core.id, i))
                .collect();
            open.sort_unstable_by_key(|&(id, _)| id);
            open.into_iter().map(|(_, i)| i).collect()
        }
    }

    /// Closes and frees the connection in slot `i`.
    fn finish_slot(&mut self, i: u32) {
        let Some(slot) = self.slots.get_mut(i as usize) else {
            return;
        };
        if slot.core.id == 0 {
            return;
        }
        let hash = slot.core.hash();
        if let Ok(entry) = self.table.find_entry(hash, |&j| j == i) {
            entry.remove();
        }
        let slot = &mut self.slots[i as usize];
        let analyzer = &mut self.analyzer;
        match slot.full.take() {
            Some(mut conn) => {
                if let Some(ex) = conn.take_exchange() {
                    analyzer.exchange(&conn, &mut slot.state, &ex);
                }
                analyzer.close(&conn, &mut slot.state);
                self.full_open -= 1;
                if self.spare.len() < SPARE_FULL {
                    self.spare.push(conn);
                }
            }
            None => close_compact(&slot.core, &mut slot.state, analyzer, &mut self.spare),
        }
        slot.core.id = 0;
        self.free.push(i);
    }

    /// Frees what is due: closed connections past their grace period, idle
    /// ones past their deadline. Most packets have nothing due: checked inline.
    #[inline]
    fn expire(&mut self) {
        if self.now.nanos() < self.wake_ns {
            return;
        }
        let grace_over = self
            .closing
            .front()
            .is_some_and(|c| self.now.since(c.0) >= self.config.close_grace_ns);
        let idle = self
            .deadlines
            .first_due()
            .is_some_and(|due| due <= self.now.nanos());
        if grace_over || idle {
            self.expire_due();
            self.wake_ns = i64::MIN;
        } else {
            let grace = self
                .closing
                .front()
                .map_or(i64::MAX, |c| self.grace_end(c.0));
            self.wake_ns = grace.min(self.deadlines.first_due().unwrap_or(i64::MAX));
        }
    }

    /// The first capture time at which a connection closed at `closed_at`
    /// is past its grace period, or a time no later (`now.since(closed_at)
    /// >= close_grace_ns` holds at no time before it).
    fn grace_end(&self, closed_at: Timestamp) -> i64 {
        closed_at.nanos().saturating_add(self.config.close_grace_ns)
    }

    #[cold]
    #[inline(never)]
    fn expire_due(&mut self) {
        while let Some(&(closed_at, i, id)) = self.closing.front() {
            if self.now.since(closed_at) < self.config.close_grace_ns {
                break;
            }
            self.closing.pop_front();
            if self.is_open(i, id) && self.slots[i as usize].is_closed() {
                self.finish_slot(i);
            }
        }
        while let Some(due) = self.deadlines.first_due() {
            if due > self.now.nanos() {
                break;
            }
            let Some((_, i, id)) = self.deadlines.pop() else {
                break;
            };
            if !self.is_open(i, id) {
                continue;
            }
            let slot = &self.slots[i as usize];
            let actual = slot.last_ts().nanos().saturating_add(self.timeout(slot));
            if actual <= self.now.nanos() {
                self.finish_slot(i);
            } else {
                self.deadlines.push_back_later((actual, i, id));
            }
        }
    }

    /// Whether slot `i` still holds connection `id`.
    fn is_open(&self, i: u32, id: u64) -> bool {
        self.slots[i as usize].core.id == id
    }

    /// Frees one connection to stay within [`Config::max_open`]: a closed one
    /// still in its grace period if any, else the open one nearest its idle
    /// deadline.
    #[cold]
    fn make_room(&mut self) {
        // The queues' first entries change.
        self.wake_ns = i64::MIN;
        while let Some((_, i, id)) = self.closing.pop_front() {
            if self.is_open(i, id) && self.slots[i as usize].is_closed() {
                self.grace_cut += 1;
                self.finish_slot(i);
                return;
            }
        }
        while let Some((due, i, id)) = self.deadlines.pop() {
            if !self.is_open(i, id) {
                continue;
            }
            let slot = &self.slots[i as usize];
            let actual = slot.last_ts().nanos().saturating_add(self.timeout(slot));
            if actual > due {
                // Seen since it was queued: queued again for when it is due.
                self.deadlines.push_back_later((actual, i, id));
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
                .retain(|&(_, i, id)| slots[i as usize].core.id == id);
        }
    }
}

/// Entries of [`Tracker`]'s `recent` (a power of two).
const RECENT: usize = 256;

/// Where `seg`'s connection is noted among the recent slots: its ports, the
/// same both ways (a client's ephemeral ports tell its connections apart).
#[inline]
fn recent_key(seg: &TcpSegment<'_>) -> usize {
    usize::from(seg.src_port ^ seg.dst_port) & (RECENT - 1)
}

/// Whether a SYN (without ACK) `seg` on the connection in `slot` starts a new one.
fn reused_by<C>(slot: &Slot<C>, seg: &TcpSegment<'_>) -> bool {
    match &slot.full {
        Some(conn) => conn.is_reused_by(seg),
        None => slot.core.is_reused_by_syn(),
    }
}

/// `conn` in a box from `spare` if there is one, else in a new box.
fn boxed(spare: &mut Vec<ConnBox>, conn: Connection) -> Box<Connection> {
    match spare.pop() {
        Some(mut b) => {
            *b = conn;
            b
        }
        None => Box::new(conn),
    }
}

/// Gives the compact connection `core` its full state in `full` and shows the
/// analyzer the segments it recorded; returns the full state.
#[cold]
#[inline(never)]
fn expand<'s, A: Analyzer>(
    core: &Core,
    full: &'s mut Option<Box<Connection>>,
    state: &mut A::Conn,
    analyzer: &mut A,
    spare: &mut Vec<ConnBox>,
) -> &'s mut Box<Connection> {
    let conn = full.insert(core.expand(spare));
    let (replay, n) = core.replay();
    for r in &replay[..n] {
        analyzer.segment(conn, state, &r.segment());
    }
    conn
}

/// Closes a connection that is still a compact handshake: rebuilt for the
/// analyzer ([`Connection::is_compact`]), its segments shown, then closed.
#[cold]
#[inline(never)]
fn close_compact<A: Analyzer>(
    core: &Core,
    state: &mut A::Conn,
    analyzer: &mut A,
    spare: &mut Vec<ConnBox>,
) {
    let mut conn = core.expand(spare);
    conn.compact = true;
    let (replay, n) = core.replay();
    for r in &replay[..n] {
        analyzer.compact_segment(&conn, state, &r.segment());
    }
    analyzer.close(&conn, state);
    if spare.len() < SPARE_FULL {
        spare.push(conn);
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_compact;
