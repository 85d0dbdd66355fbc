//! What each exchange would have taken without a part of its critical path,
//! and the paths' base round trips the budget measures queueing against.
//!
//! Every finding names the parts of the budget its fix removes
//! ([`crate::rules::fix_parts`]: a Nagle hold, a window wait, the server's
//! time…). For each distinct set of parts, every complete exchange whose
//! budget holds 1 ms or more of it is counted twice, per server endpoint: as it took,
//! and with those parts taken out. A finding's prediction is then read from
//! the servers its connections talked to: the latency of those exchanges
//! after its fix, and of every exchange in the capture (the ones it did not
//! touch unchanged). Nothing is invented: the parts are the packets' own
//! budget.

use std::net::{IpAddr, SocketAddr};

use rustc_hash::FxHashMap;
use tcpdoctor_flow::Connection;

use crate::budget::{index, Base, Part, Split, PARTS};
use crate::histogram::Histogram;
use crate::model::{Prediction, PredictionLine};
use crate::round3;
use crate::rules::{self, Kind};

/// Paths (client address, server address) whose base is kept, at most.
const MAX_PATHS: usize = 65_536;
/// Servers counted apart per set of parts, at most (the rest in the totals only).
const MAX_SERVERS: usize = 1024;
/// An exchange whose budget holds less than this of a fix's parts is not
/// counted as touched by it (left as it took: at most this much off).
const MIN_TOUCH_NS: i64 = 1_000_000;
/// Servers an aggregate remembers; past that its prediction is the capture's.
pub(crate) const MAX_AGG_SERVERS: usize = 16;

/// A path: its client and server addresses, as 128-bit numbers (IPv4 as
/// mapped IPv6): compared in two instructions.
type Path = (u128, u128);

fn path(conn: &Connection) -> Path {
    fn bits(ip: IpAddr) -> u128 {
        match ip {
            IpAddr::V4(v4) => v4.to_ipv6_mapped().to_bits(),
            IpAddr::V6(v6) => v6.to_bits(),
        }
    }
    (bits(conn.client.addr.ip()), bits(conn.server.addr.ip()))
}

/// The base round trips of every path seen.
#[derive(Default)]
pub(crate) struct Bases {
    /// Each path's place in `bases`.
    map: FxHashMap<Path, usize>,
    bases: Vec<Base>,
    /// Per path, the last connection on it to close (its first FIN or RST
    /// seen): when (ns), which connection, and how many were open then.
    closes: Vec<(i64, u64, u32)>,
    /// Per path, its connections seen and not yet closed.
    open: Vec<u32>,
    /// The path last asked about, and its place: connections come in runs
    /// on one path.
    last: Option<(Path, usize)>,
}

impl Bases {
    /// Takes in the connection's round trips and gives its path's base.
    /// `at` is the connection's own note of its path's place, found on its
    /// first call (a connection's path never changes).
    pub(crate) fn learn(&mut self, at: &mut Option<usize>, conn: &Connection) -> Base {
        let i = match *at {
            Some(i) => i,
            None => match self.place(conn) {
                Some(i) => {
                    *at = Some(i);
                    i
                }
                None => return Base::default(),
            },
        };
        let b = &mut self.bases[i];
        b.learn(conn);
        *b
    }

    /// Counts `conn` among its path's open connections (once, on its first
    /// segment), noting its path's place.
    pub(crate) fn opened(&mut self, at: &mut Option<usize>, conn: &Connection) {
        if at.is_none() {
            *at = self.place(conn);
        }
        if let Some(i) = *at {
            self.open[i] += 1;
        }
    }

    /// Notes that `conn` (counted by [`Self::opened`]) closed at `ns`: its
    /// first FIN or RST.
    pub(crate) fn closed(&mut self, at: Option<usize>, conn: &Connection, ns: i64) {
        if let Some(i) = at {
            self.closes[i] = (ns, conn.id, self.open[i]);
            self.open[i] = self.open[i].saturating_sub(1);
        }
    }

    /// When another connection between `conn`'s hosts last closed, if it
    /// and `conn` were the only ones open between them then (0: none such).
    /// One of many connections closing (a proxy's pool) says nothing of
    /// what `conn` waited on; the second of two (FTP's data connection)
    /// may be it.
    #[inline]
    pub(crate) fn closed_elsewhere(&self, at: Option<usize>, conn: &Connection) -> i64 {
        at.map_or(0, |i| other_close(self.closes[i], conn.id))
    }

    /// The place of `conn`'s path in `bases`, made if new (`None` when
    /// [`MAX_PATHS`] are kept and it is not one of them).
    fn place(&mut self, conn: &Connection) -> Option<usize> {
        let key = path(conn);
        if let Some((k, i)) = self.last {
            if k == key {
                return Some(i);
            }
        }
        if self.map.len() >= MAX_PATHS && !self.map.contains_key(&key) {
            return None;
        }
        let (bases, closes, open) = (&mut self.bases, &mut self.closes, &mut self.open);
        let i = *self.map.entry(key).or_insert_with(|| {
            bases.push(Base::default());
            closes.push((0, 0, 0));
            open.push(0);
            bases.len() - 1
        });
        self.last = Some((key, i));
        Some(i)
    }
}

/// A path's last close, `(ns, connection, open then)`, as seen by
/// connection `id`: its time if it was another connection's and at most two
/// were open, else 0.
fn other_close((ns, closer, open): (i64, u64, u32), id: u64) -> i64 {
    if closer != id && open <= 2 {
        ns
    } else {
        0
    }
}

/// Exchanges as they took and without one set of parts.
#[derive(Default, Clone)]
struct Pair {
    before: Histogram,
    after: Histogram,
}

impl Pair {
    fn merge(&mut self, other: &Pair) {
        self.before.merge(&other.before);
        self.after.merge(&other.after);
    }
}

/// Every set of parts some finding's fix removes, each as a bit mask of
/// [`Part::ALL`] indices; and the exchanges counted for each, per server.
pub(crate) struct WhatIfs {
    masks: Vec<u16>,
    /// Per part, the masks that hold it (their indices, as bits): the sets
    /// an exchange may have touched, without a look at the others.
    by_part: [u64; PARTS],
    /// Per server (the first [`MAX_SERVERS`]; row 0 holds the rest): a pair
    /// per mask.
    rows: Vec<Vec<Pair>>,
    slots: FxHashMap<SocketAddr, usize>,
    /// The server last counted and its row: exchanges come in runs per server.
    last: Option<(SocketAddr, usize)>,
}

fn mask(parts: &[Part]) -> u16 {
    parts.iter().fold(0, |m, p| m | 1 << index(*p))
}

impl Default for WhatIfs {
    fn default() -> Self {
        let mut masks = Vec::new();
        for k in Kind::ALL {
            for set in rules::fix_parts(*k) {
                let m = mask(set);
                if m != 0 && !masks.contains(&m) {
                    masks.push(m);
                }
            }
        }
        assert!(masks.len() <= 64, "a mask's index is a bit of a u64");
        let mut by_part = [0u64; PARTS];
        for (i, &m) in masks.iter().enumerate() {
            for (p, b) in by_part.iter_mut().enumerate() {
                if m & 1 << p != 0 {
                    *b |= 1 << i;
                }
            }
        }
        WhatIfs {
            rows: vec![vec![Pair::default(); masks.len()]],
            masks,
            by_part,
            slots: FxHashMap::default(),
            last: None,
        }
    }
}

impl WhatIfs {
    /// The row of `server`'s counts.
    fn row(&mut self, server: SocketAddr) -> usize {
        if let Some((_, r)) = self.last.filter(|(s, _)| *s == server) {
            return r;
        }
        let r = match self.slots.get(&server) {
            Some(&r) => r,
            None if self.slots.len() < MAX_SERVERS => {
                self.rows.push(vec![Pair::default(); self.masks.len()]);
                let r = self.rows.len() - 1;
                self.slots.insert(server, r);
                r
            }
            None => 0,
        };
        self.last = Some((server, r));
        r
    }

    /// Counts one complete exchange of `server` with its budget: its
    /// duration and that duration's bucket ([`Histogram::bucket`]).
    /// `slow_start_ns` is what its largest message would take on a new
    /// connection's congestion window alone (0 when the window had grown):
    /// a window's or a loss's wait taken out of the transfer leaves at least that.
    /// Out of line: its loops keep their registers (inlined in the
    /// exchange's code, every touched set saved and restored the caller's).
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    pub(crate) fn record(
        &mut self,
        server: SocketAddr,
        at: &mut Option<usize>,
        (duration, bucket): (i64, usize),
        split: &Split,
        slow_start_ns: impl Fn() -> i64,
        policed_ns: impl Fn() -> i64,
    ) {
        // A fix that takes a receive window's or a loss's wait out of the
        // message's transfer leaves at least slow start's round trips on a new
        // connection: without the loss, the window still grows from its first
        // flight. (A fix of the congestion window's own waits, a larger initial
        // window or a warm connection, is not bound by that.)
        let in_transfer = 1u16 << index(Part::Window)
            | 1u16 << index(Part::ReaderWait)
            | 1u16 << index(Part::Retransmission);
        // The message's bytes moving (at the path's rate or slower): a policer's parts.
        let moving_bits = 1u16 << index(Part::Transfer) | 1u16 << index(Part::Bandwidth);
        // The sets holding a part this exchange holds: a set none of its
        // parts is in touched nothing (most sets, on most exchanges). The
        // message's moving time alone touches no set: every message moves,
        // and a fix that takes it (a policer's, a send buffer's) takes it
        // with the waits that name the mechanism. In the same pass, the time
        // held by the parts other than moving: most exchanges hold too little
        // of it for any fix to show.
        let mut candidates = 0u64;
        let mut held = 0i64;
        for (i, (&v, &sets)) in split.iter().zip(&self.by_part).enumerate() {
            if moving_bits & 1 << i == 0 {
                held += v;
                if v > 0 {
                    candidates |= sets;
                }
            }
        }
        if held < MIN_TOUCH_NS {
            return;
        }
        let mut row = None;
        let mut slow_start = None;
        // In mask order, as every mask in turn would be.
        while candidates != 0 {
            let i = candidates.trailing_zeros() as usize;
            candidates &= candidates - 1;
            let m = self.masks[i];
            let mut removed = 0;
            let mut bits = m;
            while bits != 0 {
                removed += split[bits.trailing_zeros() as usize];
                bits &= bits - 1;
            }
            // A part worth less than this touched nothing a fix would show.
            if removed < MIN_TOUCH_NS {
                continue;
            }
            let mut after = (duration - removed).max(0);
            if m & moving_bits == moving_bits {
                // A policer shaping instead: the message's transfer, with its
                // losses and window waits, becomes the message at its rate.
                let policed_ns = policed_ns();
                if policed_ns <= 0 {
                    continue;
                }
                after = (after + policed_ns).min(duration);
            }
            let slow_start_ns = if m & in_transfer != 0 {
                *slow_start.get_or_insert_with(&slow_start_ns)
            } else {
                0
            };
            if slow_start_ns > 0 {
                // The message's transfer becomes at least slow start's round
                // trips (never more than it took); the rest of the exchange
                // stays as the fix leaves it (setup, the wait for the
                // response: less what the fix takes of those, the server's
                // time for one).
                let transfer_bits = MOVING.iter().fold(0u16, |b, p| b | 1 << index(*p));
                let (mut moving, mut rest) = (0, 0);
                for (i, &v) in split.iter().enumerate() {
                    if transfer_bits & 1 << i != 0 {
                        moving += v;
                    } else if m & 1 << i == 0 {
                        rest += v;
                    }
                }
                after = after.max(rest + slow_start_ns.min(moving));
            }
            let r = *row.get_or_insert_with(|| match *at {
                Some(r) => r,
                None => {
                    let r = self.row(server);
                    *at = Some(r);
                    r
                }
            });
            let pair = &mut self.rows[r][i];
            pair.before.record_in(bucket, duration);
            pair.after.record(after);
        }
    }

    /// The prediction for a finding whose fix removes `parts`, over the
    /// exchanges of `servers` (all of them when `None`); `all` is every
    /// complete exchange of the capture.
    pub(crate) fn predict(
        &self,
        parts: &[Part],
        servers: Option<&[SocketAddr]>,
        all: &Histogram,
    ) -> Option<Prediction> {
        let m = mask(parts);
        let i = self.masks.iter().position(|&x| x == m)?;
        let mut pair = Pair::default();
        match servers {
            None => {
                for row in &self.rows {
                    pair.merge(&row[i]);
                }
            }
            Some(list) => {
                for s in list {
                    if let Some(&r) = self.slots.get(s) {
                        pair.merge(&self.rows[r][i]);
                    }
                }
            }
        }
        if pair.before.count() == 0 {
            return None;
        }
        let line = |before: &dyn Fn(f64) -> f64, after: &dyn Fn(f64) -> f64| PredictionLine {
            before_p50_ms: round3(before(0.5)),
            before_p99_ms: round3(before(0.99)),
            p50_ms: round3(after(0.5)),
            p99_ms: round3(after(0.99)),
        };
        Some(Prediction {
            parts: parts.iter().map(|p| p.name()).collect(),
            exchanges: pair.before.count(),
            affected: line(&|q| pair.before.quantile_ms(q), &|q| {
                pair.after.quantile_ms(q)
            }),
            all: line(&|q| all.quantile_ms(q), &|q| {
                all.quantile_replacing(&pair.before, &pair.after, q)
            }),
        })
    }
}

/// The parts of a message's transfer: what slow start's round trips bound
/// from below when a fix takes a window's or a loss's wait out of it.
const MOVING: [Part; 6] = [
    Part::Transfer,
    Part::Bandwidth,
    Part::Window,
    Part::ReaderWait,
    Part::CongestionWait,
    Part::Retransmission,
];

/// Linux's initial congestion window (RFC 6928), in segments.
pub(crate) const INITIAL_WINDOW: u64 = 10;

/// The round trips slow start needs to send an exchange's largest message
/// on a connection's first exchange (the window doubling from the initial
/// one each round trip), in time; 0 on later exchanges or without a round trip.
/// Out of line: asked of few exchanges, and inlined its setup ran for all.
#[inline(never)]
pub(crate) fn slow_start_ns(conn: &Connection, ex: &tcpdoctor_flow::Exchange) -> i64 {
    let Some(rtt) = conn.path_rtt_ns() else {
        return 0;
    };
    if ex.index != 0 {
        return 0;
    }
    let (bytes, dir) = if ex.request_bytes >= ex.response_bytes {
        (ex.request_bytes, tcpdoctor_flow::Dir::ClientToServer)
    } else {
        (ex.response_bytes, tcpdoctor_flow::Dir::ServerToClient)
    };
    let flight = INITIAL_WINDOW * u64::from(conn.smss(dir).max(1));
    // Flights of 1, 2, 4… initial windows: after k rounds 2^k − 1 of them.
    let mut rounds = 0;
    while ((1u64 << rounds) - 1) * flight < bytes && rounds < 40 {
        rounds += 1;
    }
    rtt.saturating_mul(rounds)
}

/// Client addresses whose largest transfers are kept, at most.
const MAX_BULK_CLIENTS: usize = 16_384;
/// Transfers kept per client address.
const BULKS_PER_CLIENT: usize = 4;
/// Transfers smaller than this fill no queue worth naming.
const MIN_BULK_BYTES: u64 = 1_000_000;

/// Each client address's largest transfers, to name what filled a queue.
#[derive(Default)]
pub(crate) struct Bulks {
    map: FxHashMap<IpAddr, Vec<rules::queueing::Bulk>>,
}

impl Bulks {
    pub(crate) fn on_close(&mut self, conn: &Connection) {
        let bytes = conn.client.bytes + conn.server.bytes;
        if bytes < MIN_BULK_BYTES {
            return;
        }
        let ip = conn.client.addr.ip();
        if self.map.len() >= MAX_BULK_CLIENTS && !self.map.contains_key(&ip) {
            return;
        }
        let list = self.map.entry(ip).or_default();
        let b = rules::queueing::Bulk {
            connection: conn.id,
            server: conn.server.addr,
            bytes,
            start_ns: conn.first.ts.nanos(),
            end_ns: conn.last_ts.nanos(),
        };
        if list.len() < BULKS_PER_CLIENT {
            list.push(b);
        } else if let Some(least) = list.iter_mut().min_by_key(|x| x.bytes) {
            if least.bytes < bytes {
                *least = b;
            }
        }
    }

    /// Names, in each queueing finding, the largest transfer of its client
    /// that was under way at its first occurrence.
    pub(crate) fn name_fillers(
        &self,
        aggregates: &mut FxHashMap<crate::aggregate::AggKey, crate::Aggregate>,
    ) {
        for a in aggregates.values_mut() {
            if let crate::rule::Detail::Queueing(q) = &mut a.first {
                q.bulk = self.map.get(&q.client).and_then(|list| {
                    list.iter()
                        .filter(|b| b.start_ns <= q.at_ns && b.end_ns >= q.at_ns)
                        .max_by_key(|b| b.bytes)
                        .copied()
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: i64 = 1_000_000;

    #[test]
    fn only_the_other_of_two_open_connections_closing_counts() {
        // FTP: the control connection (1) sees its data connection (2) close.
        assert_eq!(other_close((5_000, 2, 2), 1), 5_000);
        // Its own close says nothing; nor does one of a pool of three or more.
        assert_eq!(other_close((5_000, 1, 2), 1), 0);
        assert_eq!(other_close((5_000, 2, 3), 1), 0);
        assert_eq!(other_close((5_000, 7, 40), 1), 0);
    }

    /// One exchange of 270 ms whose transfer waited 130 ms on a loss, with
    /// `slow_start` for what its message takes on a new connection's window;
    /// the predicted p50 after the loss's fix.
    fn after_loss_fix(slow_start: i64) -> f64 {
        let mut w = WhatIfs::default();
        let mut split: Split = [0; PARTS];
        split[index(Part::Network)] = 20 * MS;
        split[index(Part::Retransmission)] = 130 * MS;
        split[index(Part::CongestionWait)] = 90 * MS;
        split[index(Part::Transfer)] = 30 * MS;
        let d: i64 = split.iter().sum();
        let server = "10.0.0.2:80".parse().unwrap();
        w.record(
            server,
            &mut None,
            (d, Histogram::bucket(d)),
            &split,
            || slow_start,
            || 0,
        );
        let all = Histogram::default();
        let p = w.predict(&[Part::Retransmission], None, &all).unwrap();
        p.affected.p50_ms
    }

    #[test]
    fn a_loss_taken_out_of_a_first_transfer_leaves_slow_starts_round_trips() {
        // A new connection: the 250 ms of moving the message become at least
        // slow start's 160 ms, not the 120 ms left once the loss's wait is gone.
        let first = after_loss_fix(160 * MS);
        assert!((175.0..=185.0).contains(&first), "{first}");
        // A later exchange (its window grown): the loss's wait alone comes out.
        let later = after_loss_fix(0);
        assert!((135.0..=145.0).contains(&later), "{later}");
    }

    #[test]
    fn a_fix_of_the_servers_time_and_the_loss_leaves_no_slow_start_on_a_message_that_waited() {
        // A full accept queue's fix (the SYN retry, the loss, the server's
        // time): a first exchange of 490 ms, all of it the server's, with a
        // 1-byte response. Nothing of it moved a message: slow start's floor
        // bounds no transfer, and the server's time goes with the fix.
        let mut w = WhatIfs::default();
        let mut split: Split = [0; PARTS];
        split[index(Part::Server)] = 490 * MS;
        split[index(Part::Setup)] = MS / 10;
        let d: i64 = split.iter().sum();
        let server = "10.0.0.2:80".parse().unwrap();
        let parts = [Part::SynRetry, Part::Retransmission, Part::Server];
        w.record(
            server,
            &mut None,
            (d, Histogram::bucket(d)),
            &split,
            || 20 * MS,
            || 0,
        );
        let p = w.predict(&parts, None, &Histogram::default()).unwrap();
        assert!(p.affected.p50_ms < 1.0, "{:?}", p.affected);
    }
}
