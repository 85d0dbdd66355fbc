//! The receive-window ceiling.
//!
//! A sender may have at most the receiver's advertised window unacknowledged
//! (RFC 9293 §3.8.6). When bytes in flight sit at that window while the sender
//! still has data, every round trip moves one window: throughput = rwnd / RTT,
//! whatever the bandwidth. The rule measures, per direction, the time from a
//! segment that filled the window (no room for another full segment) to the
//! next new data, counted only while the receiver sent nothing (so the pause
//! is not the end of a message), and reports the connection when that time is
//! a large share of the transfer.

use tcpdoctor_flow::{Connection, Dir, Mark, SegKind, Segment, Seq};
use tcpdoctor_wire::Timestamp;

use crate::budget::{Claims, Part};
use crate::model::LadderRow;
use crate::round3;
use crate::rule::{self, Blame, Detail, Kind, Occurrence};
use crate::text::{human_bytes, human_rate, ms, Said, Words};
use serde_json::json;

/// Report when at least this share of the transfer was spent at the window…
pub const MIN_SHARE: f64 = 0.2;
/// …over at least this many stalls.
pub const MIN_STALLS: u64 = 4;

#[derive(Debug, Clone, Copy)]
struct Blocked {
    at: Mark,
    window: u32,
}

#[derive(Debug, Default)]
struct DirState {
    blocked: Option<Blocked>,
    first_data: Option<Timestamp>,
    last_data: Option<Timestamp>,
    bytes: u64,
    limited_ns: i64,
    stalls: u64,
    window_sum: u64,
    window_min: u32,
    first_stall: Option<(u64, u64)>,
    ladder: Option<Vec<LadderRow>>,
    acks: AckHistory,
    /// The receiver's newest ACK: relative ack, scaled window with
    /// [`HOLE`] set when it told of a hole ([`reports_hole`]).
    last_ack: (u32, u32),
    zero_during_stall: bool,
}

const ACK_HISTORY: usize = 8;
/// A window of this many segments or more is treated as unlimited.
const LARGE_WINDOW_SEGMENTS: u32 = 64;

/// Set in a stored window when its ACK told of a hole: a scaled window is
/// at most 65,535 << 14, below this bit.
const HOLE: u32 = 1 << 31;

/// The receiver's recent ACKs: (time, relative ack, scaled window with
/// [`HOLE`]), in a ring.
#[derive(Debug)]
struct AckHistory {
    entries: [(i64, u32, u32); ACK_HISTORY],
    len: usize,
    /// Where the next ACK goes.
    next: usize,
}

impl Default for AckHistory {
    fn default() -> Self {
        AckHistory {
            entries: [(0, 0, 0); ACK_HISTORY],
            len: 0,
            next: 0,
        }
    }
}

impl AckHistory {
    fn push(&mut self, ts: Timestamp, ack: u32, window: u32) {
        self.entries[self.next] = (ts.nanos(), ack, window);
        self.next = (self.next + 1) % ACK_HISTORY;
        self.len = (self.len + 1).min(ACK_HISTORY);
    }

    /// The ACK the sender of data ending at `end` knew: the newest seen at
    /// or before `ns`, unless the data overran that ACK's window by more
    /// than a segment. A sender never sends past the window it knows, so
    /// then it had a newer one, sooner than the capture point's distance
    /// to it said (that distance is the handshake's, which includes the
    /// sender's own time to answer a SYN-ACK; an ACK can release data
    /// faster). Which newer one is not known: the newest seen, the one that
    /// leaves the most room, so that a window is called full only when it
    /// was full whichever the sender had.
    fn known(&self, ns: i64, end: u32, mss: u32) -> Option<(u32, u32, bool)> {
        let at = |k: usize| self.entries[(self.next + ACK_HISTORY - k) % ACK_HISTORY];
        let known = (1..=self.len).map(at).find(|e| e.0 <= ns)?;
        let overran = end.wrapping_sub(known.1) > (known.2 & !HOLE).saturating_add(mss);
        let e = if overran { at(1) } else { known };
        Some((e.1, e.2 & !HOLE, e.2 & HOLE != 0))
    }
}

/// Whether this ACK tells of a hole in what the receiver holds: SACK blocks
/// above the cumulative ACK (RFC 2018), or a duplicate of the receiver's
/// previous ACK (same ack and window, no data: RFC 5681 §2). While a hole is
/// open the window's right edge (ack + window) stays where the hole pins it:
/// a sender stopped there waits on the lost segment's re-send, not on the
/// receiver's buffer.
fn reports_hole(conn: &Connection, seg: &Segment<'_>, previous: (u32, u32)) -> bool {
    if seg.len == 0 && previous == (seg.ack, seg.window) {
        return true;
    }
    let o = seg.options;
    // Timestamps alone (NOP, NOP, TS) fill 12 bytes; SACK needs 10 more.
    let may_sack = o.len() > 12 || (o.len() >= 10 && o[..4] != [1, 1, 8, 10]);
    if !may_sack {
        return false;
    }
    let base = conn.half(seg.dir.reverse()).base.0;
    tcpdoctor_wire::TcpOptions::parse(o)
        .sack
        .as_slice()
        .iter()
        .any(|&(_, r)| Seq(r.wrapping_sub(base)) > Seq(seg.ack))
}

#[derive(Debug, Default)]
pub struct WindowState {
    dirs: [DirState; 2],
}

impl WindowState {
    /// Whether the last data segment in `dir` filled the receiver's window.
    pub fn blocked(&self, dir: Dir) -> bool {
        self.dirs[dir.index()].blocked.is_some()
    }

    /// `ring` renders the recent packets for a ladder, when one is wanted.
    pub fn on_segment(
        &mut self,
        conn: &Connection,
        seg: &Segment<'_>,
        ring: impl FnOnce() -> Vec<LadderRow>,
        claims: &mut Claims,
    ) {
        // Every ACK is the receiver's side of the other direction: remember
        // what it told the sender, and when.
        if seg.flags.ack() && !seg.flags.syn() && !seg.flags.rst() {
            let other = &mut self.dirs[seg.dir.reverse().index()];
            let previous = (other.last_ack.0, other.last_ack.1 & !HOLE);
            let hole = if reports_hole(conn, seg, previous) {
                HOLE
            } else {
                0
            };
            other.last_ack = (seg.ack, seg.window | hole);
            // A window far above anything in flight cannot be the limit: no
            // history is needed (and what is kept would mislead, so drop it).
            if seg.window >= LARGE_WINDOW_SEGMENTS * conn.smss(seg.dir.reverse()) {
                other.acks.len = 0;
            } else {
                other.acks.push(seg.ts, seg.ack, other.last_ack.1);
            }
            // A zero window is its own finding: that stall is not counted here.
            if seg.window == 0 {
                other.zero_during_stall = true;
            }
        }
        if seg.len == 0 || seg.kind != SegKind::NewData {
            return;
        }
        // New data from the receiver ends the other direction's message.
        self.dirs[seg.dir.reverse().index()].blocked = None;
        let st = &mut self.dirs[seg.dir.index()];
        st.first_data.get_or_insert(seg.ts);
        st.last_data = Some(seg.ts);
        st.bytes += u64::from(seg.len);
        let zero = std::mem::take(&mut st.zero_during_stall);
        if let Some(b) = st.blocked.take().filter(|_| !zero) {
            claims.claim(stall_part(conn, seg.ts.since(b.at.ts)), b.at.ts, seg.ts);
            st.limited_ns += seg.ts.since(b.at.ts);
            st.stalls += 1;
            st.window_sum += u64::from(b.window);
            st.window_min = if st.stalls == 1 {
                b.window
            } else {
                st.window_min.min(b.window)
            };
            if st.first_stall.is_none() {
                st.first_stall = Some((b.at.frame, seg.frame));
            }
            if st.stalls == 3 && st.ladder.is_none() {
                st.ladder = Some(ring());
            }
        }
        let receiver = conn.half(seg.dir.reverse());
        let mss = conn.smss(seg.dir);
        if receiver.scale().is_none() {
            return;
        }
        // What the sender knew when it sent this segment: the receiver's ACKs
        // that had reached it, i.e. those seen here at least one round trip
        // between the capture point and the sender earlier. Seen from the
        // receiver, the newest ACKs are still on their way to the sender.
        // Without the handshake, the quickest an ACK released a segment to
        // its window's edge stands for it.
        let to_sender = conn
            .distance_to(seg.dir)
            .or_else(|| receiver.edge_release_ns())
            .unwrap_or(0);
        let known = st.acks.known(
            seg.ts.since(Timestamp::from_nanos(0)) - to_sender,
            seg.seq.wrapping_add(seg.len),
            mss,
        );
        let (in_flight, window, hole) = match known {
            Some((ack, window, hole)) => (
                seg.seq.wrapping_add(seg.len).wrapping_sub(ack),
                window,
                hole,
            ),
            None => (seg.in_flight, seg.peer_window, st.last_ack.1 & HOLE != 0),
        };
        // A window whose edge a hole pins is the loss's wait (the
        // retransmission rules'), however full it looks. Full means no room
        // for another segment of the size this sender sends: a full-sized
        // one, or where it never sent one (messages smaller than an MSS of
        // 64 KB on loopback) its largest.
        let sent = conn.half(seg.dir).largest_segment.max(seg.len);
        let full = mss.min(sent);
        if window > 0
            && !hole
            && in_flight <= window.saturating_add(mss)
            && in_flight.saturating_add(full) > window
        {
            st.blocked = Some(Blocked {
                at: Mark {
                    ts: seg.ts,
                    frame: seg.frame,
                },
                window,
            });
        }
    }

    pub fn on_close(&mut self, conn: &Connection, out: &mut Vec<Occurrence>) {
        for d in [Dir::ClientToServer, Dir::ServerToClient] {
            let st = &mut self.dirs[d.index()];
            let (Some(first), Some(last)) = (st.first_data, st.last_data) else {
                continue;
            };
            let transfer = last.since(first);
            if st.stalls < MIN_STALLS
                || transfer <= 0
                || (st.limited_ns as f64) < MIN_SHARE * transfer as f64
            {
                continue;
            }
            let receiver = conn.half(d.reverse());
            let mean_window = (st.window_sum / st.stalls) as u32;
            // A receiver that never scaled its window and sits near 64 KB is
            // missing window scaling; one far below it has a small buffer.
            let hint = match receiver.window_scale_option {
                None if receiver.syn_seen && mean_window > 32_768 => Some("no_window_scaling"),
                _ => Some("small_receive_buffer"),
            };
            let (a, b) = st.first_stall.unwrap_or((0, 0));
            out.push(Occurrence {
                kind: Kind::ReceiveWindowLimited,
                culprit: Blame::Side(d.reverse()),
                delay_ns: st.limited_ns,
                frames: vec![a, b],
                notes: Vec::new(),
                ladder_from: None,
                ladder: st.ladder.take(),
                span: None,
                detail: Detail::Window(Window {
                    mean_window,
                    min_window: st.window_min,
                    mss: conn.smss(d),
                    rtt_ns: conn.path_rtt_ns(),
                    bytes: st.bytes,
                    transfer_ns: transfer,
                    stalls: st.stalls,
                    receive_buffer_hint: hint,
                }),
            });
        }
    }
}

/// The words of a `receive_window_limited` finding: why, the fix, its details.
/// The budget part of one stall of `wait_ns`: a window that reopened
/// [`SLOW_READER_RTTS`] round trips and [`SLOW_READER_MIN_MS`] or more after
/// it filled was reopened by its reader (`reader_wait`: reading faster
/// takes it away); sooner, by the ACK of what filled it (`window_wait`: the
/// window's size).
pub(crate) fn stall_part(conn: &Connection, wait_ns: i64) -> Part {
    match conn.path_rtt_ns() {
        Some(rtt)
            if wait_ns >= SLOW_READER_RTTS_N.saturating_mul(rtt)
                && wait_ns as f64 >= SLOW_READER_MIN_MS * 1e6 =>
        {
            Part::ReaderWait
        }
        _ => Part::Window,
    }
}

/// Whether a `receive_window_limited` finding is its reader's: its stalls
/// last [`SLOW_READER_RTTS`] round trips and [`SLOW_READER_MIN_MS`] on
/// average, and its transfers move far below the window's rwnd/RTT. The
/// window explains the throughput only when each stall lasts about a round
/// trip; one that reopens far later is reopened by the application reading.
pub(crate) fn slow_reader(a: &crate::Aggregate) -> bool {
    let r = Rates::of(a);
    let stall_ms = ms(a.total_ns / a.stalls.max(1) as i64);
    matches!((r.rtt, r.ceiling), (Some(rtt), Some(c))
        if stall_ms >= SLOW_READER_RTTS * rtt && stall_ms >= SLOW_READER_MIN_MS
            && r.tput * SLOW_READER_RTTS < c)
}

/// A finding's window and rates: its mean window at a stall (bytes), the
/// least round trip (ms), the window's rwnd/RTT ceiling and the transfers'
/// throughput (bytes/s).
struct Rates {
    window: f64,
    rtt: Option<f64>,
    ceiling: Option<f64>,
    tput: f64,
}

impl Rates {
    fn of(a: &crate::Aggregate) -> Rates {
        let window = a.window_sum.checked_div(a.stalls).unwrap_or(0) as f64;
        let rtt = a.rtt_ns_min.map(ms);
        let transfer_s = a.transfer_ns as f64 / 1e9;
        Rates {
            window,
            rtt,
            ceiling: rtt.filter(|r| *r > 0.0).map(|r| window / (r / 1e3)),
            tput: if transfer_s > 0.0 {
                a.bytes as f64 / transfer_s
            } else {
                0.0
            },
        }
    }
}

pub(crate) fn words(s: &Said<'_>) -> Words {
    let (a, ep, role, peer) = (s.a, s.ep, s.role, s.peer);
    let Detail::Window(Window {
        mss,
        receive_buffer_hint,
        ..
    }) = &a.first
    else {
        return crate::text::no_words();
    };
    let Rates {
        window,
        rtt,
        ceiling,
        tput,
    } = Rates::of(a);
    let transfer_s = a.transfer_ns as f64 / 1e9;
    let mss = f64::from(*mss);
    let at_window = if a.transfer_ns > 0 {
        round3(a.total_ns as f64 / a.transfer_ns as f64)
    } else {
        0.0
    };
    let stall_ms = ms(a.total_ns / a.stalls.max(1) as i64);
    let slow_reader = slow_reader(a);
    let cause = if slow_reader {
        Some("slow_reader")
    } else {
        *receive_buffer_hint
    };
    let explanation = if slow_reader {
        format!(
            "{ep} ({role}) reads slowly: the {peer} fills its receive window (about {w}, {wmss:.1} × MSS \
             {mss:.0} B) and then waits until {ep} reopens it, every {stall_ms:.1} ms on average, {x:.0} times \
             the round trip ({r:.2} ms) — {stalls} times, {pct:.0}% of the transfer. The window is not what \
             limits the transfer: at rwnd/RTT it would carry {ceil}, and the transfer moved {bytes} in \
             {secs:.2} s ({tput}). The receiver acknowledges at once but frees buffer space only as its \
             application reads, a few KB at a time (a printer, a busy consumer, a reader blocked on \
             something else).",
            w = human_bytes(window),
            wmss = window / mss.max(1.0),
            x = stall_ms / rtt.unwrap_or(1.0).max(1e-3),
            r = rtt.unwrap_or(0.0),
            stalls = a.stalls,
            pct = at_window * 100.0,
            ceil = human_rate(ceiling.unwrap_or(0.0)),
            bytes = human_bytes(a.bytes as f64),
            secs = transfer_s,
            tput = human_rate(tput),
        )
    } else {
        format!(
        "{ep} ({role}) advertises a receive window of about {w} ({wmss:.1} × MSS {mss:.0} B) while the {peer} has \
         more to send: bytes in flight sat at that window for {pct:.0}% of the transfer, {stalls} times the \
         sender stopped until an ACK opened the window. {ceil}The transfer moved {bytes} in {secs:.2} s \
         ({tput}). A sender may not have more than the receiver's window unacknowledged (RFC 9293 §3.8.6), \
         so each round trip moves one window, whatever the bandwidth.",
        w = human_bytes(window),
        wmss = window / mss.max(1.0),
        pct = at_window * 100.0,
        stalls = a.stalls,
        ceil = match (rtt, ceiling) {
            (Some(r), Some(c)) => format!("With a round trip of {r:.1} ms that caps throughput at rwnd/RTT = {}. ", human_rate(c)),
            _ => String::new(),
        },
        bytes = human_bytes(a.bytes as f64),
        secs = transfer_s,
        tput = human_rate(tput),
        )
    };
    let fix = if slow_reader {
        format!(
            "The receiving application at {ep} reads too slowly: find what it waits on between reads (a \
             device, disk, a lock, a busy thread, back-pressure from downstream) and read promptly — larger \
             reads, a dedicated reader thread, or a queue in the application. A larger receive buffer \
             would not raise the throughput (the window is already larger than the path needs at this \
             pace); it only absorbs a longer burst."
        )
    } else {
        window_fix(ep, *receive_buffer_hint, rtt)
    };
    let details = json!({
        "window_bytes": window.round(),
        "window_min_bytes": a.window_min,
        "window_mss": round3(window / mss.max(1.0)),
        "mss": mss,
        "rtt_ms": rtt,
        "ceiling_bytes_per_sec": ceiling.map(f64::round),
        "throughput_bytes_per_sec": tput.round(),
        "bytes": a.bytes,
        "transfer_ms": ms(a.transfer_ns),
        "stalls": a.stalls,
        "share_of_transfer": at_window,
        "reopen_interval_ms": stall_ms,
        "cause": cause,
    });
    (explanation, fix, details)
}

/// What one occurrence measured.
#[derive(Debug, Clone)]
pub struct Window {
    pub mean_window: u32,
    pub min_window: u32,
    pub mss: u32,
    pub rtt_ns: Option<i64>,
    pub bytes: u64,
    pub transfer_ns: i64,
    pub stalls: u64,
    pub receive_buffer_hint: Option<&'static str>,
}

impl rule::Fold for Window {
    fn fold(self, a: &mut crate::Aggregate) {
        a.window_sum += u64::from(self.mean_window) * self.stalls;
        a.window_min = a.window_min.min(self.min_window);
        a.bytes += self.bytes;
        a.transfer_ns += self.transfer_ns;
        a.stalls += self.stalls;
        a.rtt_ns_min = rule::min_opt(a.rtt_ns_min, self.rtt_ns);
    }
}

impl rule::Rule for WindowState {
    #[inline]
    fn on_segment(&mut self, cx: &mut rule::SegmentCx<'_>, conn: &Connection, seg: &Segment<'_>) {
        let ring = cx.ring;
        WindowState::on_segment(self, conn, seg, || ring.rows(None, &[]), cx.claims);
    }

    fn on_close(&mut self, cx: &mut rule::CloseCx<'_>, conn: &Connection) {
        WindowState::on_close(self, conn, cx.out);
    }
}

/// The verdict's sentence of a `receive_window_limited` finding.
pub(crate) fn cause(c: &rule::Cause<'_>) -> String {
    let (ep, role) = (c.ep, c.role);
    if c.str("cause") == Some("slow_reader") {
        let every = crate::fmt_ms(c.num("reopen_interval_ms").unwrap_or(0.0));
        return format!(
            "{ep} ({role}) reads slowly: its receive window fills and reopens only every ~{every} \
             (far beyond the round trip), as its application reads"
        );
    }
    let window = c
        .num("window_bytes")
        .map(|w| format!(" of ~{}", human_bytes(w)))
        .unwrap_or_default();
    format!(
        "{ep} ({role}) advertises a receive window{window}: bytes in flight are pinned at it, \
         so each round trip moves one window"
    )
}

/// A window reopened this many round trips (and ms) after it filled, with
/// throughput this many times below rwnd/RTT, is paced by its reader.
pub(crate) const SLOW_READER_RTTS: f64 = 4.0;
/// The same, as a whole number of round trips (for one stall's test).
const SLOW_READER_RTTS_N: i64 = SLOW_READER_RTTS as i64;
pub(crate) const SLOW_READER_MIN_MS: f64 = 10.0;

pub(crate) fn window_fix(ep: &str, hint: Option<&'static str>, rtt_ms: Option<f64>) -> String {
    let need = rtt_ms
        .map(|r| {
            format!(
                " To fill 100 Mbit/s over {r:.1} ms the window must reach {}.",
                human_bytes(100e6 / 8.0 * r / 1e3)
            )
        })
        .unwrap_or_default();
    if hint == Some("no_window_scaling") {
        return format!(
            "{ep} did not offer window scaling in its SYN, so its window cannot exceed 64 KB: enable \
             net.ipv4.tcp_window_scaling=1 there and check that no middlebox strips the option.{need}"
        );
    }
    format!(
        "Raise the receive buffer at {ep}. A small SO_RCVBUF fixes the window size (and on Linux turns receive-buffer \
         autotuning off): in nginx remove `rcvbuf=` from `listen` or raise it (e.g. `listen … rcvbuf=1m;`); in code \
         drop the setsockopt(SO_RCVBUF) or raise it. Check net.ipv4.tcp_rmem (its max bounds autotuning), \
         net.core.rmem_max (bounds SO_RCVBUF) and net.ipv4.tcp_window_scaling=1.{need}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn history(acks: &[(i64, u32, u32)]) -> AckHistory {
        let mut h = AckHistory::default();
        for &(ns, ack, window) in acks {
            h.push(Timestamp::from_nanos(ns), ack, window);
        }
        h
    }

    #[test]
    fn data_that_would_overrun_the_known_window_had_the_newest_ack() {
        // ACKs at 100 µs (edge 5792) and 200 µs (edge 8688), window 2896; the
        // sender's answer to an ACK is 20 µs, the handshake said 46 µs.
        let h = history(&[(100_000, 2896, 2896), (200_000, 5792, 2896)]);
        // Data ending at 8688, seen 20 µs after the second ACK: against the
        // first it overruns by 2896, so the second released it.
        assert_eq!(
            h.known(220_000 - 46_000, 8688, 1448),
            Some((5792, 2896, false))
        );
        // Data that keeps to the older ACK's window is judged against it.
        assert_eq!(
            h.known(220_000 - 46_000, 5792, 1448),
            Some((2896, 2896, false))
        );
        // Nothing known yet: no ACK at or before the cut-off.
        assert_eq!(h.known(50_000, 2896, 1448), None);
    }

    #[test]
    fn an_overrun_takes_the_newest_ack_not_the_first_that_fits() {
        // Seen at the receiver: ACKs every 100 µs advance 1448 each. Data
        // that overruns the cut-off's ACK is judged against the newest, the
        // most room the sender could have had, so the window reads full
        // only if it was full whichever ACK the sender had.
        let h = history(&[
            (100_000, 1448, 2896),
            (200_000, 2896, 2896),
            (300_000, 4344, 2896),
            (400_000, 5792, 2896),
        ]);
        assert_eq!(h.known(150_000, 7240, 1448), Some((5792, 2896, false)));
    }
}
