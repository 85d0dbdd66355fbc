//! The congestion window as the limit.
//!
//! A sender with more to send, whose bytes in flight sit below the receiver's
//! window, still has to stop when its congestion window is used up (RFC 5681):
//! it sends a flight, waits for ACKs, sends a bigger flight (slow start), or
//! after a loss a smaller one that regrows slowly. Each such wait is time the
//! transfer spent bound by the congestion window. The rule counts, per
//! direction, the pauses between flights of one transfer (the receiver sent
//! no data in between, the window had room, the data continues in place),
//! and reports connections where they are a large share of the transfer.
//!
//! A sender whose flights stop growing, with no loss and room left in the
//! receiver's window, is bound by something of its own: slow start doubles a
//! flight each round trip, and every congestion control grows it after that
//! (CUBIC by at least a twentieth a round trip before its first loss, Reno by
//! a segment). Flights of the same size, round after round, are the send
//! buffer's (`SO_SNDBUF`: the unacknowledged bytes fill it, and each ACK
//! frees room for as many new ones) — T-RAT's sender-window limit (Zhang et
//! al., SIGCOMM 2002). Those waits are a window's, the sender's own:
//! `send_buffer_limited`.

use tcpdoctor_flow::{Connection, Dir, SegKind, Segment};
use tcpdoctor_wire::Timestamp;

use crate::budget::{Claims, Part};
use crate::rule::{self, Blame, Detail, Kind, Occurrence};
use crate::text::{human_bytes, human_rate, ms, Said, Words};
use serde_json::json;

/// Report when the waits are at least this share of the transfer…
pub const MIN_SHARE: f64 = 0.2;
/// …over at least this many round trips.
pub const MIN_ROUNDS: u64 = 3;
/// A pause shorter than this share of the round trip is pacing within a flight.
const PAUSE_OF_RTT: f64 = 0.5;
/// A congestion-window wait lasts about a round trip (the flight's ACKs). A
/// pause of at least this many round trips and [`LONG_PAUSE_NS`] is a
/// retransmission timer or the application, not the window: at a capture
/// downstream of the loss, an RTO's retransmission looks like new data.
const MAX_PAUSE_RTTS: i64 = 2;
const LONG_PAUSE_NS: i64 = 200_000_000;
/// Flights within a segment of each other this many rounds in a row, before
/// any loss: the send buffer's, not a congestion window's.
pub const FLAT_ROUNDS: u32 = 4;

/// Flights of the same size in a row (bytes sent between two waits).
#[derive(Debug, Default, Clone, Copy)]
struct Run {
    len: u32,
    lo: u64,
    hi: u64,
    /// Where the run's first wait began.
    from: Option<Timestamp>,
    /// The run's waits, and the frames of its first.
    wait_ns: i64,
    first: Option<(u64, u64)>,
}

/// The waits found to be the send buffer's.
#[derive(Debug, Default)]
struct Buffered {
    wait_ns: i64,
    rounds: u64,
    flight: u64,
    first: Option<(u64, u64)>,
    /// Waits claimed since the last exchange ended.
    exchange_ns: i64,
}

#[derive(Debug, Default)]
struct DirState {
    /// Time, frame, relative end and length of the last data (new or sent again).
    last: Option<(Timestamp, u64, u32, u32)>,
    first_data: Option<Timestamp>,
    last_data: Option<Timestamp>,
    bytes: u64,
    wait_ns: i64,
    rounds: u64,
    peer_spoke: bool,
    /// The window had no room for another segment after the last send.
    window_full: bool,
    /// Something was sent again in this direction: later waits are the
    /// window regrowing after a loss, not slow start.
    lost: bool,
    after_loss: u64,
    max_in_flight: u32,
    first: Option<(u64, u64)>,
    /// `bytes` when the last wait ended a flight.
    flight_mark: u64,
    /// Flights of one size and the send buffer's waits, from the first wait
    /// with nothing lost (most connections have none: kept out of line).
    flights: Option<Box<Flights>>,
}

#[derive(Debug, Default)]
struct Flights {
    run: Run,
    buffered: Buffered,
}

impl Run {
    /// Whether a flight of `flight` bytes keeps the run's flights within a
    /// segment of each other.
    fn extends(&self, flight: u64, mss: u32) -> bool {
        self.len > 0 && self.hi.max(flight) - self.lo.min(flight) < u64::from(mss)
    }
}

/// A wait: where it began and ended, and the frames on either side.
type Wait = (Timestamp, Timestamp, (u64, u64));

impl DirState {
    fn congestion_wait(&mut self, (from, to, frames): Wait, claims: &mut Claims) {
        self.wait_ns += to.since(from);
        self.rounds += 1;
        self.after_loss += u64::from(self.lost);
        self.first.get_or_insert(frames);
        // After a loss the window was cut (to one segment after a timeout):
        // its waits while it grows back are the loss's cost, and go with the
        // loss's own wait. Without the loss the flights would not have shrunk.
        let part = if self.lost {
            Part::Retransmission
        } else {
            Part::CongestionWait
        };
        claims.claim(part, from, to);
    }

    /// A wait after a flight the run of flights of one size takes in: the
    /// congestion window's until the run is [`FLAT_ROUNDS`] long, then (its
    /// earlier waits too) the send buffer's.
    fn wait_in_run(&mut self, wait: Wait, flight: u64, claims: &mut Claims) {
        let (from, to, frames) = wait;
        let pause = to.since(from);
        let f = self.flights.get_or_insert_with(Box::default);
        let r = &mut f.run;
        if r.len == 0 {
            *r = Run {
                lo: flight,
                hi: flight,
                from: Some(from),
                first: Some(frames),
                ..Run::default()
            };
        }
        r.len += 1;
        r.lo = r.lo.min(flight);
        r.hi = r.hi.max(flight);
        r.wait_ns += pause;
        let b = &mut f.buffered;
        if r.len >= FLAT_ROUNDS {
            b.flight = b.flight.max(r.hi);
        }
        match r.len.cmp(&FLAT_ROUNDS) {
            std::cmp::Ordering::Less => self.congestion_wait(wait, claims),
            std::cmp::Ordering::Equal => {
                // The run's earlier waits were the send buffer's too.
                b.wait_ns += r.wait_ns;
                b.exchange_ns += r.wait_ns;
                b.rounds += u64::from(FLAT_ROUNDS);
                b.first = b.first.or(r.first);
                let (earlier, since) = (r.wait_ns - pause, r.from);
                self.wait_ns -= earlier;
                self.rounds -= u64::from(FLAT_ROUNDS - 1);
                if self.rounds == 0 {
                    self.first = None;
                }
                if let Some(since) = since {
                    claims.recolor(Part::CongestionWait, Part::Window, since);
                }
                claims.claim(Part::Window, from, to);
            }
            std::cmp::Ordering::Greater => {
                b.wait_ns += pause;
                b.exchange_ns += pause;
                b.rounds += 1;
                claims.claim(Part::Window, from, to);
            }
        }
    }
}

#[derive(Debug, Default)]
pub struct CongestionState {
    dirs: [DirState; 2],
}

impl CongestionState {
    /// `window_blocked`: the receive-window rule found the sender's last
    /// segment filled the receiver's window (as the sender saw it).
    pub fn on_segment(
        &mut self,
        conn: &Connection,
        seg: &Segment<'_>,
        window_blocked: bool,
        claims: &mut Claims,
    ) {
        if seg.len == 0 {
            return;
        }
        self.dirs[seg.dir.reverse().index()].peer_spoke = true;
        let st = &mut self.dirs[seg.dir.index()];
        // A re-send counts as the flights' data too: after a timeout the
        // sender re-sends in slow start from one segment, flight by flight,
        // and a re-send that continues the one before it in place waited on
        // the window regrowing. One that does not (a hole filled, the first
        // re-send after a timeout) breaks the flight: the loss rule's.
        let new = match seg.kind {
            SegKind::Retransmission => {
                st.lost = true;
                false
            }
            SegKind::NewData => true,
            _ => return,
        };
        if new {
            st.first_data.get_or_insert(seg.ts);
            st.last_data = Some(seg.ts);
            st.bytes += u64::from(seg.len);
            st.max_in_flight = st.max_in_flight.max(seg.in_flight);
        }
        let before = st.bytes - if new { u64::from(seg.len) } else { 0 };
        let mss = conn.smss(seg.dir);
        let paused = st.last.filter(|l| seg.ts.since(l.0) >= 1_000_000);
        if let (Some((prev, prev_frame, prev_end, prev_len)), Some(rtt)) =
            (paused, paused.and_then(|_| conn.path_rtt_ns()))
        {
            let pause = seg.ts.since(prev);
            // A flight cut by the congestion window ends on a full segment; a
            // short one ends a write (or is Nagle's, a rule of its own).
            let full = prev_len >= mss && prev_len % mss == 0;
            let continues =
                prev_end == seg.seq && full && !st.peer_spoke && !st.window_full && !window_blocked;
            let long = pause >= LONG_PAUSE_NS && pause >= MAX_PAUSE_RTTS.saturating_mul(rtt);
            if continues && !long && pause as f64 >= PAUSE_OF_RTT * rtt as f64 && pause >= 1_000_000
            {
                let flight = before.saturating_sub(st.flight_mark);
                st.flight_mark = before;
                // Room for the flight and a segment more (a zero window has none).
                let room = flight + u64::from(mss) <= u64::from(seg.peer_window);
                let wait = (prev, seg.ts, (prev_frame, seg.frame));
                let extends = st
                    .flights
                    .as_ref()
                    .is_some_and(|f| f.run.extends(flight, mss));
                if !st.lost && room && extends {
                    st.wait_in_run(wait, flight, claims);
                } else {
                    if let Some(f) = st.flights.as_mut() {
                        f.run = Run::default();
                    }
                    if !st.lost && room {
                        st.wait_in_run(wait, flight, claims);
                    } else {
                        st.congestion_wait(wait, claims);
                    }
                }
            }
        }
        st.window_full = seg.peer_window > 0 && seg.in_flight.saturating_add(mss) > seg.peer_window;
        st.last = Some((seg.ts, seg.frame, seg.seq.wrapping_add(seg.len), seg.len));
        st.peer_spoke = false;
    }

    /// The send buffer's waits claimed since the last call, per direction
    /// (for the exchange's rate limit).
    pub fn take_exchange(&mut self) -> [i64; 2] {
        let mut out = [0; 2];
        for (o, st) in out.iter_mut().zip(&mut self.dirs) {
            if let Some(f) = st.flights.as_mut() {
                *o = std::mem::take(&mut f.buffered.exchange_ns);
            }
        }
        out
    }

    pub fn on_close(&mut self, conn: &Connection, out: &mut Vec<Occurrence>) {
        for d in [Dir::ClientToServer, Dir::ServerToClient] {
            let st = &self.dirs[d.index()];
            let (Some(first), Some(last)) = (st.first_data, st.last_data) else {
                continue;
            };
            let transfer = last.since(first);
            let occurrence = |kind, culprit, delay_ns, first: Option<(u64, u64)>, detail| {
                let (a, b) = first.unwrap_or((0, 0));
                Occurrence {
                    kind,
                    culprit,
                    delay_ns,
                    frames: vec![a, b],
                    notes: Vec::new(),
                    ladder_from: None,
                    ladder: None,
                    span: None,
                    detail,
                }
            };
            if let Some(b) = st.flights.as_ref().map(|f| &f.buffered) {
                if bound(b.rounds, b.wait_ns, transfer) {
                    let detail = Detail::SendBuffer(SendBuffer {
                        rounds: b.rounds,
                        flight: b.flight,
                        bytes: st.bytes,
                        transfer_ns: transfer,
                        rtt_ns: conn.path_rtt_ns(),
                    });
                    let kind = Kind::SendBufferLimited;
                    out.push(occurrence(kind, Blame::Side(d), b.wait_ns, b.first, detail));
                }
            }
            if bound(st.rounds, st.wait_ns, transfer) {
                let detail = Detail::Congestion(Congestion {
                    rounds: st.rounds,
                    after_loss: st.after_loss,
                    max_in_flight: st.max_in_flight,
                    bytes: st.bytes,
                    transfer_ns: transfer,
                    rtt_ns: conn.path_rtt_ns(),
                });
                let kind = Kind::CongestionLimited;
                out.push(occurrence(
                    kind,
                    Blame::Network(d),
                    st.wait_ns,
                    st.first,
                    detail,
                ));
            }
        }
    }
}

/// Waits worth a finding: at least [`MIN_ROUNDS`] of them, and at least
/// [`MIN_SHARE`] of the transfer's time.
fn bound(rounds: u64, wait_ns: i64, transfer_ns: i64) -> bool {
    rounds >= MIN_ROUNDS && transfer_ns > 0 && wait_ns as f64 >= MIN_SHARE * transfer_ns as f64
}

/// The words of a `congestion_limited` finding: why, the fix, its details.
pub(crate) fn words(s: &Said<'_>) -> Words {
    let (a, total, ep) = (s.a, s.total, s.ep);
    let Detail::Congestion(Congestion { max_in_flight, .. }) = &a.first else {
        return crate::text::no_words();
    };
    let rtt = a.rtt_ns_min.map(ms);
    let transfer_s = a.transfer_ns as f64 / 1e9;
    let tput = if transfer_s > 0.0 {
        a.bytes as f64 / transfer_s
    } else {
        0.0
    };
    let slow_start = is_slow_start(a);
    let why = if slow_start {
        format!(
            "That is slow start: {n} of the {rounds} waits came before anything was sent again, while \
             the window grew from its initial size (Linux: 10 segments, `initcwnd`), doubling each \
             round trip (RFC 5681) — a new connection pays these round trips on every transfer larger \
             than its window.",
            n = a.count - a.flagged,
            rounds = a.count,
        )
    } else {
        format!(
            "That is the window regrowing after a loss: {n} of the {rounds} waits came after a \
             segment was sent again, the window cut and growing back by about a segment per round \
             trip (RFC 5681).",
            n = a.flagged,
            rounds = a.count,
        )
    };
    let explanation = format!(
        "Transfers to or from {ep} were bound by the sender's congestion window, not by the receiver's \
         window: the sender sent a flight, then waited for ACKs with room left in the receive window, \
         {rounds} times ({total:.0} ms in all, {pct:.0}% of the transfers' time; at most {inflight} in \
         flight; round trip {rtt}). {why} The transfers moved {bytes} at {tput}.",
        rounds = a.count,
        pct = if a.transfer_ns > 0 { a.total_ns as f64 / a.transfer_ns as f64 * 100.0 } else { 0.0 },
        inflight = human_bytes(f64::from(*max_in_flight)),
        rtt = rtt.map_or("unknown".to_string(), |r| format!("{r:.1} ms")),
        bytes = human_bytes(a.bytes as f64),
        tput = human_rate(tput),
    );
    let fix = if slow_start {
        "Avoid paying slow start per transfer: keep connections alive and reuse them (HTTP keep-alive, \
         connection pools), so that later transfers start with the window grown; on Linux keep \
         `net.ipv4.tcp_slow_start_after_idle=0` for long-lived idle connections; a larger initial window \
         on the sender's route (`ip route change … initcwnd 20`, or more for large transfers on long \
         paths) lets a new connection send more in its first round trip."
    } else {
        "Fix the loss that cut the window (see the loss findings: a queue overflowing, a lossy link); \
         a sender with a loss-tolerant congestion control recovers faster (BBR: \
         `net.ipv4.tcp_congestion_control=bbr`); keep connections alive so the window grown is reused."
    }
    .to_string();
    (
        explanation,
        fix,
        json!({"cause": if slow_start { "slow_start" } else { "after_loss" },
               "rounds": a.count, "rounds_after_loss": a.flagged,
               "max_in_flight_bytes": max_in_flight, "rtt_ms": rtt,
               "throughput_bytes_per_sec": tput.round()}),
    )
}

/// What one occurrence measured.
#[derive(Debug, Clone)]
pub struct Congestion {
    pub rounds: u64,
    /// Of the rounds, those after a loss (the window regrowing).
    pub after_loss: u64,
    pub max_in_flight: u32,
    pub bytes: u64,
    pub transfer_ns: i64,
    pub rtt_ns: Option<i64>,
}

impl rule::Fold for Congestion {
    fn fold(self, a: &mut crate::Aggregate) {
        a.count += self.rounds;
        a.flagged += self.after_loss;
        a.bytes += self.bytes;
        a.transfer_ns += self.transfer_ns;
        a.rtt_ns_min = rule::min_opt(a.rtt_ns_min, self.rtt_ns);
    }
}

impl rule::Rule for CongestionState {
    #[inline]
    fn on_segment(&mut self, cx: &mut rule::SegmentCx<'_>, conn: &Connection, seg: &Segment<'_>) {
        CongestionState::on_segment(self, conn, seg, cx.window_blocked, cx.claims);
    }

    fn on_close(&mut self, cx: &mut rule::CloseCx<'_>, conn: &Connection) {
        CongestionState::on_close(self, conn, cx.out);
    }
}

/// What a `send_buffer_limited` occurrence measured.
#[derive(Debug, Clone)]
pub struct SendBuffer {
    pub rounds: u64,
    /// The largest of the flights of one size.
    pub flight: u64,
    pub bytes: u64,
    pub transfer_ns: i64,
    pub rtt_ns: Option<i64>,
}

impl rule::Fold for SendBuffer {
    fn fold(self, a: &mut crate::Aggregate) {
        a.count += self.rounds;
        a.bytes += self.bytes;
        a.transfer_ns += self.transfer_ns;
        a.rtt_ns_min = rule::min_opt(a.rtt_ns_min, self.rtt_ns);
    }
}

/// The words of a `send_buffer_limited` finding.
pub(crate) fn buffer_words(s: &Said<'_>) -> Words {
    let (a, total, ep) = (s.a, s.total, s.ep);
    let Detail::SendBuffer(SendBuffer { flight, .. }) = &a.first else {
        return crate::text::no_words();
    };
    let rtt = a.rtt_ns_min.map(ms);
    let transfer_s = a.transfer_ns as f64 / 1e9;
    let tput = if transfer_s > 0.0 {
        a.bytes as f64 / transfer_s
    } else {
        0.0
    };
    let explanation = format!(
        "{ep} sent its transfers in flights of the same size, {flight} each, {rounds} times in a row          with nothing lost and room left in the receiver's window, and waited a round trip for the          ACKs after each ({total:.0} ms in all, {pct:.0}% of the transfers' time; round trip {rtt}).          A congestion window does not stay put: slow start doubles it each round trip, and after          that it grows every round. A flight that stops growing with the network's consent is the          sender's send buffer (`SO_SNDBUF`): it holds every byte until the receiver acknowledges it,          so at most a buffer's worth is ever in flight, {per_rtt} per round trip. The transfers          moved {bytes} at {tput}.",
        flight = human_bytes(*flight as f64),
        rounds = a.count,
        pct = if a.transfer_ns > 0 { a.total_ns as f64 / a.transfer_ns as f64 * 100.0 } else { 0.0 },
        rtt = rtt.map_or("unknown".to_string(), |r| format!("{r:.1} ms")),
        per_rtt = human_bytes(*flight as f64),
        bytes = human_bytes(a.bytes as f64),
        tput = human_rate(tput),
    );
    let fix = "Let the sender's send buffer grow to the path's bandwidth × round trip: remove a fixed                `SO_SNDBUF` (setting it turns Linux's autotuning off; nginx: `sndbuf=` on `listen`;                Java: `setSendBufferSize`), or raise it, and let `net.ipv4.tcp_wmem`'s maximum allow                it. Then the congestion window is the limit, and it grows."
        .to_string();
    (
        explanation,
        fix,
        json!({"rounds": a.count, "flight_bytes": flight, "rtt_ms": rtt,
               "throughput_bytes_per_sec": tput.round()}),
    )
}

/// The verdict's sentence of a `send_buffer_limited` finding.
pub(crate) fn buffer_cause(c: &rule::Cause<'_>) -> String {
    format!(
        "the {} at {} sends no more than its send buffer holds per round trip (~{} per exchange):          SO_SNDBUF too small for the path",
        c.role, c.ep, c.typ
    )
}

/// Which of `congestion_limited`'s fix parts its fix removes: the window's
/// own waits in slow start; after a loss, the loss's (its waits are claimed
/// with the loss's, see [`DirState::congestion_wait`]).
pub(crate) fn fix_choice(a: &crate::Aggregate) -> usize {
    usize::from(!is_slow_start(a))
}

/// Most waits came before any loss: the window growing from its initial
/// size, not regrowing after a cut.
fn is_slow_start(a: &crate::Aggregate) -> bool {
    a.flagged * 4 <= a.count
}

/// The verdict's sentence of a `congestion_limited` finding.
pub(crate) fn cause(c: &rule::Cause<'_>) -> String {
    if c.str("cause") == Some("slow_start") {
        format!(
            "transfers wait on the congestion window in slow start (~{} per exchange): new connections \
             start small",
            c.typ
        )
    } else {
        format!(
            "transfers wait on the congestion window regrowing after losses (~{} per exchange)",
            c.typ
        )
    }
}
