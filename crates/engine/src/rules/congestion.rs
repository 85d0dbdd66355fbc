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

use tcpdoctor_flow::{Connection, Dir, SegKind, Segment};
use tcpdoctor_wire::Timestamp;

use super::{Blame, Detail, Kind, Occurrence};
use crate::budget::{Claims, Part};
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

#[derive(Debug, Default)]
struct DirState {
    /// Time, frame, relative end and length of the last new data.
    last: Option<(Timestamp, u64, u32, u32)>,
    first_data: Option<Timestamp>,
    last_data: Option<Timestamp>,
    bytes: u64,
    wait_ns: i64,
    rounds: u64,
    peer_spoke: bool,
    /// The window had no room for another segment after the last send.
    window_full: bool,
    retransmitted: bool,
    /// Something was sent again in this direction: later waits are the
    /// window regrowing after a loss, not slow start.
    lost: bool,
    after_loss: u64,
    max_in_flight: u32,
    first: Option<(u64, u64)>,
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
        match seg.kind {
            SegKind::Retransmission => {
                st.retransmitted = true;
                st.lost = true;
                return;
            }
            SegKind::NewData => {}
            _ => return,
        }
        st.first_data.get_or_insert(seg.ts);
        st.last_data = Some(seg.ts);
        st.bytes += u64::from(seg.len);
        st.max_in_flight = st.max_in_flight.max(seg.in_flight);
        let mss = conn.smss(seg.dir);
        let paused = st.last.filter(|l| seg.ts.since(l.0) >= 1_000_000);
        if let (Some((prev, prev_frame, prev_end, prev_len)), Some(rtt)) =
            (paused, paused.and_then(|_| conn.path_rtt_ns()))
        {
            let pause = seg.ts.since(prev);
            // A flight cut by the congestion window ends on a full segment; a
            // short one ends a write (or is Nagle's, a rule of its own).
            let full = prev_len >= mss && prev_len % mss == 0;
            let continues = prev_end == seg.seq
                && full
                && !st.peer_spoke
                && !st.window_full
                && !window_blocked
                && !st.retransmitted;
            let long = pause >= LONG_PAUSE_NS && pause >= MAX_PAUSE_RTTS.saturating_mul(rtt);
            if continues && !long && pause as f64 >= PAUSE_OF_RTT * rtt as f64 && pause >= 1_000_000
            {
                st.wait_ns += pause;
                st.rounds += 1;
                st.after_loss += u64::from(st.lost);
                st.first.get_or_insert((prev_frame, seg.frame));
                claims.claim(Part::CongestionWait, prev, seg.ts);
            }
        }
        st.window_full = seg.peer_window > 0 && seg.in_flight.saturating_add(mss) > seg.peer_window;
        st.last = Some((seg.ts, seg.frame, seg.seq.wrapping_add(seg.len), seg.len));
        st.peer_spoke = false;
        st.retransmitted = false;
    }

    pub fn on_close(&mut self, conn: &Connection, out: &mut Vec<Occurrence>) {
        for d in [Dir::ClientToServer, Dir::ServerToClient] {
            let st = &self.dirs[d.index()];
            let (Some(first), Some(last)) = (st.first_data, st.last_data) else {
                continue;
            };
            let transfer = last.since(first);
            if st.rounds < MIN_ROUNDS
                || transfer <= 0
                || (st.wait_ns as f64) < MIN_SHARE * transfer as f64
            {
                continue;
            }
            let (a, b) = st.first.unwrap_or((0, 0));
            out.push(Occurrence {
                kind: Kind::CongestionLimited,
                culprit: Blame::Network(d),
                delay_ns: st.wait_ns,
                frames: vec![a, b],
                notes: Vec::new(),
                ladder_from: None,
                ladder: None,
                span: None,
                detail: Detail::Congestion(Congestion {
                    rounds: st.rounds,
                    after_loss: st.after_loss,
                    max_in_flight: st.max_in_flight,
                    bytes: st.bytes,
                    transfer_ns: transfer,
                    rtt_ns: conn.path_rtt_ns(),
                }),
            });
        }
    }
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

impl super::Fold for Congestion {
    fn fold(self, a: &mut crate::Aggregate) {
        a.count += self.rounds;
        a.flagged += self.after_loss;
        a.bytes += self.bytes;
        a.transfer_ns += self.transfer_ns;
        a.rtt_ns_min = super::min_opt(a.rtt_ns_min, self.rtt_ns);
    }
}

impl super::Rule for CongestionState {
    #[inline]
    fn on_segment(&mut self, cx: &mut super::SegmentCx<'_>, conn: &Connection, seg: &Segment<'_>) {
        CongestionState::on_segment(self, conn, seg, cx.window_blocked, cx.claims);
    }

    fn on_close(&mut self, cx: &mut super::CloseCx<'_>, conn: &Connection) {
        CongestionState::on_close(self, conn, cx.out);
    }
}

/// Most waits came before any loss: the window growing from its initial
/// size, not regrowing after a cut.
fn is_slow_start(a: &crate::Aggregate) -> bool {
    a.flagged * 4 <= a.count
}

/// The verdict's sentence of a `congestion_limited` finding.
pub(crate) fn cause(c: &super::Cause<'_>) -> String {
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
