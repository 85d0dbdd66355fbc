//! Nagle's algorithm holding a write's tail until the peer's delayed ACK,
//! seen from the sending socket without a packet.
//!
//! No tracepoint fires when a segment leaves, but two say enough together:
//! `sock_send_length` counts every byte the process wrote, when it wrote
//! it, and `tcp_probe`, on each segment the socket receives, reads its
//! `snd_nxt` (the next byte to send) before the segment is processed. Bytes
//! written minus the advance of `snd_nxt` is what the socket holds unsent,
//! up to a constant: its least value over the connection is taken as
//! nothing held (a request-response socket sends everything between
//! requests).
//!
//! A hold is counted when a pure ACK (no payload: the peer had nothing to
//! send with it, so it waited for its delayed-ACK timer) reaches a socket
//! that, at that moment,
//! - holds bytes unsent, at most its last write (Nagle holds the tail of
//!   the write that found data in flight; more than that held is a send
//!   the host or a window delayed) and at most 64 KB,
//! - has data in flight (Nagle holds a small segment only while an earlier
//!   one is unacknowledged; a corked socket holds with nothing in flight),
//!   and more of it than the head of the last write that left: Linux's
//!   Nagle (Minshall's variant, `tcp_minshall_check`) holds a tail only
//!   while an earlier *small* segment is unacknowledged, and a write's head
//!   leaves as full segments. A tail held behind nothing but its own
//!   write's full segments was held by something else: `TCP_CORK` or
//!   `MSG_MORE` (the kernel's 200 ms cork timer), not Nagle,
//! - is not window-bound (the peer's window has room for the flight and
//!   the tail, and had on every segment since the write: a window that
//!   reopens releases what it held, with no small segment involved; the
//!   congestion window has room for a segment of 536 bytes more, and no
//!   loss recovery is under way),
//!
//! and the ACK came at least [`MIN_HOLD_NS`] and twice the smoothed round
//! trip after the last write: the tail waited on the peer's ACK timer, not
//! on distance. The ACK releases the tail; the wait was the time since the
//! write.
//!
//! Segments processed in the writing process's context (queued while it
//! held the socket, run when its write releases it) are read before that
//! write's own event: they update the count but do not move the floor.
//! Nor, at once, does a segment received on another CPU: `sock_send_length`
//! fires when the write returns, after its bytes left, so a segment read
//! between the two shows them sent before they were written, and would set
//! the floor one write too low (every later pause would then read as a
//! tail held). Such a floor waits [`FLOOR_RACE_NS`]: a write of at least
//! the dip in that time was its cause, and the floor stays.

use crate::decode::Probe;

/// A tail held for less than this did not wait on a delayed-ACK timer
/// (40 ms at least on Linux, 100–200 ms elsewhere): a busy host's own
/// scheduling delays a send by a few milliseconds.
pub const MIN_HOLD_NS: u64 = 20_000_000;

/// Nagle holds less than a segment; loopback's segments reach 64 KB.
pub const MAX_HELD_BYTES: i64 = 65_535;

/// A lower floor seen on a received segment waits this long for the write
/// whose bytes it may show sent before their event.
pub const FLOOR_RACE_NS: u64 = 5_000_000;

/// The smallest segment TCP sends (RFC 1122's default MSS): a congestion
/// window of `cwnd` segments has room for at least `cwnd × 536` bytes.
const MIN_MSS: u64 = 536;

/// `TCP_CA_Open`: no loss recovery.
const CA_OPEN: u8 = 0;

/// One socket's unsent bytes and the holds counted on it (in the JSON: the
/// holds, their waits and bytes summed).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Nagle {
    /// `snd_nxt` at the last received segment (none before the first).
    #[serde(skip)]
    last_nxt: Option<u32>,
    /// Bytes written minus bytes sent, since the first received segment.
    #[serde(skip)]
    backlog: i64,
    /// The least `backlog` seen: nothing held then.
    #[serde(skip)]
    floor: i64,
    /// A lower `backlog` seen on a received segment, and when: the floor
    /// once no write explains it within [`FLOOR_RACE_NS`].
    #[serde(skip)]
    pending_floor: Option<(i64, u64)>,
    #[serde(skip)]
    last_write_ns: u64,
    #[serde(skip)]
    last_write: u64,
    /// The write before the last one.
    #[serde(skip)]
    prev_write: u64,
    /// The write whose hold was counted (its time): one hold per write.
    #[serde(skip)]
    counted_ns: u64,
    /// A segment since the last write showed the peer's window too small
    /// for the flight and what was unsent: the window held the data then,
    /// whatever released it later.
    #[serde(skip)]
    window_short: bool,
    /// Holds seen, their waits summed, the bytes they held summed.
    pub holds: u64,
    pub hold_ns: u64,
    pub held_bytes: u64,
    /// What the last hold held, and what left at once before it: the rest
    /// of the last write, or the whole write before it.
    pub last_held: u64,
    pub last_sent_at_once: u64,
}

impl Nagle {
    /// Bytes written and not yet sent, as of the last received segment
    /// (its least value over the connection counts as none).
    pub fn unsent(&self) -> i64 {
        self.backlog - self.floor_now()
    }

    /// The floor, with a lower one still waiting counted (the fewer bytes
    /// read as held, the fewer holds named).
    fn floor_now(&self) -> i64 {
        self.pending_floor
            .map_or(self.floor, |(f, _)| f.min(self.floor))
    }

    /// The process wrote `n` bytes at `t`.
    pub fn write(&mut self, t: u64, n: u64) {
        if self.last_nxt.is_some() {
            self.backlog += n as i64;
        }
        // A floor seen just before this write's event, lower by at most
        // its bytes: the write's bytes seen leaving before it was read.
        if let Some((f, at)) = self.pending_floor {
            if t.saturating_sub(at) < FLOOR_RACE_NS && self.floor - f <= n as i64 {
                self.pending_floor = None;
            }
        }
        self.last_write_ns = t;
        self.window_short = false;
        self.prev_write = std::mem::replace(&mut self.last_write, n);
    }

    /// A segment was received at `t` (`in_softirq`: not in the writer's
    /// context). Returns whether it released a held tail.
    pub fn segment(&mut self, t: u64, p: &Probe, ca_state: u8, in_softirq: bool) -> bool {
        let Some(nxt) = p.snd_nxt else {
            return false;
        };
        let Some(prev) = self.last_nxt else {
            self.last_nxt = Some(nxt);
            return false;
        };
        let sent = nxt.wrapping_sub(prev);
        if sent >= 1 << 31 {
            // Older than the last one read (samples of two CPUs).
            return false;
        }
        self.last_nxt = Some(nxt);
        self.backlog -= i64::from(sent);
        if let Some((f, at)) = self.pending_floor {
            if t.saturating_sub(at) >= FLOOR_RACE_NS {
                self.floor = self.floor.min(f);
                self.pending_floor = None;
            }
        }
        if in_softirq && self.backlog < self.floor_now() {
            self.pending_floor = Some((self.backlog, t));
        }
        let unsent = self.backlog - self.floor_now();
        let (Some(una), Some(wnd)) = (p.snd_una, p.snd_wnd) else {
            return false;
        };
        let flight = u64::from(nxt.wrapping_sub(una));
        let hold = t.saturating_sub(self.last_write_ns);
        let srtt_ns = u64::from(p.srtt_us.unwrap_or(0)) * 1000;
        let room = p
            .cwnd
            .is_none_or(|c| flight + MIN_MSS <= u64::from(c) * MIN_MSS);
        // Something in flight besides the full segments of the last write's
        // head: a small segment Nagle waits on may be among it.
        let head = self.last_write.saturating_sub(unsent.max(0) as u64);
        let small_in_flight = flight > head;
        let held = in_softirq
            && p.data_len == Some(0)
            && ca_state == CA_OPEN
            && unsent > 0
            && unsent <= MAX_HELD_BYTES
            && unsent as u64 <= self.last_write
            && flight > 0
            && small_in_flight
            && flight < 1 << 30
            && u64::from(wnd) >= flight + unsent as u64
            && !self.window_short
            && room
            && hold >= MIN_HOLD_NS.max(2 * srtt_ns)
            && self.counted_ns != self.last_write_ns;
        if flight < 1 << 30 && u64::from(wnd) < flight + unsent.max(0) as u64 {
            self.window_short = true;
        }
        if held {
            self.counted_ns = self.last_write_ns;
            self.holds += 1;
            self.hold_ns += hold;
            self.held_bytes += unsent as u64;
            self.last_held = unsent as u64;
            let unsent = unsent as u64;
            self.last_sent_at_once = if unsent < self.last_write {
                self.last_write - unsent
            } else {
                self.prev_write
            };
        }
        held
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// A received segment: `nxt` and `una` relative to 1,000,000.
    fn seg(nxt: u32, una: u32, data_len: u32) -> Probe {
        Probe {
            snd_nxt: Some(1_000_000 + nxt),
            snd_una: Some(1_000_000 + una),
            cwnd: Some(10),
            ssthresh: None,
            snd_wnd: Some(65_535),
            srtt_us: Some(50),
            rcv_wnd: Some(65_535),
            data_len: Some(data_len),
            cookie: None,
        }
    }

    /// Request, then a 240-byte header and a 600-byte body written at
    /// once; `sent` of them had left when the peer's pure ACK came 40 ms
    /// later.
    fn response(n: &mut Nagle, t0: u64, base: u32, sent: u32, softirq: bool) -> bool {
        assert!(!n.segment(t0, &seg(base, base, 100), CA_OPEN, true));
        n.write(t0 + 10_000, 240);
        n.write(t0 + 20_000, 600);
        n.segment(t0 + 40 * MS, &seg(base + sent, base, 0), CA_OPEN, softirq)
    }

    #[test]
    fn a_tail_held_until_the_peers_delayed_ack_is_a_hold() {
        let mut n = Nagle::default();
        let mut base = 0;
        for i in 0..3 {
            assert!(
                response(&mut n, i * 100 * MS, base, 240, true),
                "response {i}"
            );
            base += 840;
        }
        assert_eq!(n.holds, 3);
        assert_eq!(n.held_bytes, 1800);
        assert_eq!(n.last_sent_at_once, 240);
        assert!((n.hold_ns / 3).abs_diff(40 * MS) < MS, "{}", n.hold_ns);
    }

    /// wrk with TCP_NODELAY under load: each 38-byte request leaves at
    /// once, but a segment received on another CPU shows it sent before
    /// the write's own event; the server, busy, answers after its
    /// delayed-ACK timer. Nothing was ever held.
    #[test]
    fn a_write_seen_sent_before_its_event_moves_no_floor() {
        let mut n = Nagle::default();
        assert!(!n.segment(0, &seg(0, 0, 100), CA_OPEN, true));
        let mut base = 0;
        for i in 0..5 {
            let t0 = (i + 1) * 100 * MS;
            // The request leaves; an ACK read on another CPU sees it sent
            // 20 µs before the write's event.
            assert!(!n.segment(t0, &seg(base + 38, base, 0), CA_OPEN, true));
            n.write(t0 + 20_000, 38);
            base += 38;
            // The next request, written at once after the response…
            n.write(t0 + 30 * MS, 38);
            // …left too; the server's delayed ACK of it, 45 ms later.
            assert!(
                !n.segment(t0 + 75 * MS, &seg(base + 38, base, 0), CA_OPEN, true),
                "request {i}"
            );
            base += 38;
        }
        assert_eq!(n.holds, 0);
        assert_eq!(n.unsent(), 0);
    }

    #[test]
    fn everything_sent_at_once_holds_nothing() {
        let mut n = Nagle::default();
        let mut base = 0;
        for i in 0..5 {
            assert!(!response(&mut n, i * 100 * MS, base, 840, true));
            base += 840;
        }
        assert_eq!(n.holds, 0);
    }

    #[test]
    fn a_hold_with_nothing_in_flight_is_not_nagles() {
        // A corked socket: the header was never sent either.
        let mut n = Nagle::default();
        let mut base = 0;
        for i in 0..3 {
            assert!(!response(&mut n, i * 100 * MS, base, 0, true));
            base += 840;
        }
        assert_eq!(n.holds, 0);
    }

    #[test]
    fn an_ack_that_came_soon_or_carried_data_is_not_a_delayed_ack() {
        let mut n = Nagle::default();
        assert!(!n.segment(0, &seg(0, 0, 100), CA_OPEN, true));
        n.write(10_000, 240);
        n.write(20_000, 600);
        // 10 ms later: a busy host's delay, not a delayed-ACK timer.
        assert!(!n.segment(10 * MS, &seg(240, 0, 0), CA_OPEN, true));
        // The next request, carrying the ACK: the peer did not wait.
        n.write(3 * MS, 600);
        assert!(!n.segment(40 * MS, &seg(840, 0, 80), CA_OPEN, true));
        // In loss recovery: the window, not Nagle.
        n.write(41 * MS, 600);
        assert!(!n.segment(90 * MS, &seg(1240, 840, 0), 4, true));
        assert_eq!(n.holds, 0);
    }

    /// A corked socket (TCP_CORK, MSG_MORE) writes 2,000 bytes: one full
    /// segment leaves, the 552-byte tail waits for the cork timer, and the
    /// peer's delayed ACK of that one segment comes 40 ms later. Nothing
    /// small was in flight, so Linux's Nagle would have sent the tail.
    #[test]
    fn a_tail_behind_its_own_full_segments_is_not_nagles() {
        let mut n = Nagle::default();
        for i in 0..3u32 {
            let t0 = u64::from(i) * 300 * MS;
            let base = i * 2000;
            assert!(!n.segment(t0, &seg(base, base, 100), CA_OPEN, true));
            n.write(t0 + 10_000, 2000);
            let held = n.segment(t0 + 40 * MS, &seg(base + 1448, base, 0), CA_OPEN, true);
            assert!(!held, "write {i}");
            // The cork timer sends the tail; the peer's next request comes.
            assert!(!n.segment(
                t0 + 260 * MS,
                &seg(base + 2000, base + 1448, 0),
                CA_OPEN,
                true
            ));
        }
        assert_eq!(n.holds, 0);
        // The same tail behind a small segment still in flight (a header
        // written before): Nagle's.
        let mut n = Nagle::default();
        assert!(!n.segment(0, &seg(0, 0, 100), CA_OPEN, true));
        n.write(10_000, 240);
        n.write(20_000, 2000);
        assert!(n.segment(40 * MS, &seg(240 + 1448, 0, 0), CA_OPEN, true));
        assert_eq!(n.last_held, 552);
        assert_eq!(n.last_sent_at_once, 1448);
    }

    #[test]
    fn more_held_than_the_last_write_is_not_nagles_tail() {
        // The header was not sent either: the whole response waited on
        // something else (the host, a window).
        let mut n = Nagle::default();
        assert!(!n.segment(0, &seg(0, 0, 100), CA_OPEN, true));
        n.write(10_000, 240);
        n.write(20_000, 600);
        assert!(!n.segment(40 * MS, &seg(100, 0, 0), CA_OPEN, true));
        assert_eq!(n.holds, 0);
    }

    #[test]
    fn a_segment_read_before_its_writers_event_does_not_lower_the_floor() {
        // A write's own event comes after the segments its release ran:
        // they see the write's bytes sent before they were counted written.
        let mut n = Nagle::default();
        let mut base = 0;
        assert!(!n.segment(0, &seg(0, 0, 100), CA_OPEN, true));
        n.write(10_000, 840);
        assert!(!n.segment(30_000, &seg(840, 0, 0), CA_OPEN, true));
        base += 840;
        // In the writer's context: 840 bytes sent, not yet written.
        assert!(!n.segment(MS, &seg(base + 840, base, 0), CA_OPEN, false));
        n.write(MS + 10_000, 840);
        base += 840;
        // Everything sent at once: no hold, even 40 ms later.
        assert!(!n.segment(41 * MS, &seg(base, base - 840, 0), CA_OPEN, true));
        assert_eq!(n.holds, 0);
    }

    #[test]
    fn a_tail_the_window_held_is_not_nagles() {
        // The peer's window closed after the header (a reader that fell
        // behind), then reopened: the ACK 40 ms after the write finds room,
        // but the window, not Nagle, held the tail.
        let mut n = Nagle::default();
        assert!(!n.segment(0, &seg(0, 0, 100), CA_OPEN, true));
        n.write(10_000, 240);
        n.write(20_000, 600);
        let mut shut = seg(240, 0, 0);
        shut.snd_wnd = Some(0);
        assert!(!n.segment(5 * MS, &shut, CA_OPEN, true));
        assert!(!n.segment(40 * MS, &seg(240, 0, 0), CA_OPEN, true));
        assert_eq!(n.holds, 0);
        // The next response, the window open throughout: Nagle's again.
        assert!(response(&mut n, 100 * MS, 840, 240, true));
        assert_eq!(n.holds, 1);
    }
}
