//! Slow start after idle: a kept-alive connection that forgot its window.
//!
//! RFC 5681 §4.1 (and RFC 2861) tell a sender that has sent nothing for
//! longer than its retransmission timeout to restart from the restart window,
//! the initial window (10 segments, RFC 6928), since what it learnt of the
//! path may be stale. Linux does so (`net.ipv4.tcp_slow_start_after_idle=1`,
//! the default; `tcp_slow_start_after_idle_check`) for every congestion
//! control without its own `cong_control` — Reno and CUBIC, not BBR. On a
//! keep-alive connection whose window had grown, every response after an
//! idle spell then leaves in flights of 10, 20, 40… segments, one round trip
//! apart, though the previous response left in one.
//!
//! Per sending direction, the rule cuts the new data into flights (pauses of
//! at least half a round trip with no data from the receiver in between) and
//! remembers how large the window had grown: the largest flight or, after a
//! message sent in slow start (flights doubling), what slow start left it at
//! (see `end_message`). A message that starts after the sender was idle
//! longer than any retransmission timeout (200 ms, Linux's minimum, plus the
//! round trip) is a restart when its first flight is about an initial window
//! (or the connection's own first flight), far below the grown window, its
//! flights grow by doubling, it is not limited by the receive window and
//! nothing in it is lost. The time lost is the waits between its flights
//! beyond those the grown window would have needed.

use tcpdoctor_flow::{Connection, Dir, SegKind, Segment};

use crate::rule::{self, Blame, Detail, Kind, Occurrence};
use crate::text::{human_bytes, ms, Said, Words};
use serde_json::json;

/// The initial window, in segments (RFC 6928; Linux's default).
pub const INITIAL_WINDOW_SEGMENTS: u32 = 10;
/// Linux's minimum retransmission timeout (TCP_RTO_MIN).
pub const RTO_MIN_NS: i64 = 200_000_000;
/// A pause of at least this share of the round trip ends a flight.
const FLIGHT_GAP_OF_RTT: f64 = 0.5;
/// A wait for ACKs lasts about a round trip; longer ones are something else.
const MAX_FLIGHT_GAP_RTTS: i64 = 2;

/// A message that started after an idle spell longer than the RTO.
#[derive(Debug, Clone, Copy, Default)]
struct Restarted {
    idle_ns: i64,
    /// The last data before the idle spell, the first after it, the first of
    /// the second flight.
    frames: [u64; 3],
    /// The window the connection had grown to before (bytes, estimated).
    grown: u32,
    /// Flights so far.
    flights: u32,
    wait_ns: i64,
    bytes: u64,
    /// The receive window at the restart.
    window: u32,
    /// A loss, a full receive window, a pause that was not a round trip.
    spoiled: bool,
}

#[derive(Debug, Default)]
struct DirState {
    /// Time and frame of the last new data (0: none yet).
    last_ns: i64,
    last_frame: u64,
    /// The flight in progress, and the two before it in the same message.
    flight: u32,
    prev_flight: u32,
    prev_prev_flight: u32,
    /// Something of the message in progress was sent again.
    message_lost: bool,
    /// Flights of the message in progress, and the sizes of its first two.
    message_flights: u32,
    message_first: u32,
    message_second: u32,
    /// The largest window seen grown (bytes, estimated).
    grown: u32,
    /// The first flight of the connection, when it was cut by the window
    /// (the first message needed more): the sender's own initial window.
    initial: Option<u32>,
    first_message_done: bool,
    peer_spoke: bool,
    restart: Option<Restarted>,
    lost_ns: i64,
}

/// Per connection.
#[derive(Debug, Default)]
pub struct RestartState {
    dirs: [DirState; 2],
}

impl RestartState {
    /// `window_blocked`: the receive-window rule found the sender's last
    /// segment filled the receiver's window.
    pub fn on_segment(
        &mut self,
        conn: &Connection,
        seg: &Segment<'_>,
        window_blocked: bool,
        out: &mut Vec<Occurrence>,
    ) {
        if seg.len == 0 {
            return;
        }
        let d = seg.dir;
        self.dirs[d.reverse().index()].peer_spoke = true;
        let st = &mut self.dirs[d.index()];
        match seg.kind {
            SegKind::NewData => {}
            SegKind::Retransmission => {
                st.message_lost = true;
                if let Some(r) = st.restart.as_mut() {
                    r.spoiled = true;
                }
                return;
            }
            _ => return,
        }
        let now = seg.ts.nanos();
        let (last_ns, last_frame) = (st.last_ns, st.last_frame);
        st.last_ns = now;
        st.last_frame = seg.frame;
        let Some(rtt) = conn.path_rtt_ns().filter(|_| last_ns != 0) else {
            st.flight = st.flight.saturating_add(seg.len);
            st.message_flights = st.message_flights.max(1);
            return;
        };
        let gap = now - last_ns;
        let smss = conn.smss(d);
        if gap >= RTO_MIN_NS + rtt {
            // Idle past any retransmission timeout: the message before has
            // ended; this one may restart from the initial window.
            st.end_message(conn, d, out);
            let iw = (INITIAL_WINDOW_SEGMENTS * smss).max(st.initial.unwrap_or(0));
            st.restart = (st.grown > iw).then(|| Restarted {
                idle_ns: gap,
                frames: [last_frame, seg.frame, 0],
                grown: st.grown,
                flights: 1,
                window: seg.peer_window,
                ..Restarted::default()
            });
            st.flight = seg.len;
            st.message_flights = 1;
        } else if gap as f64 >= FLIGHT_GAP_OF_RTT * rtt as f64 && gap >= 1_000_000 {
            if st.peer_spoke {
                // A new message after a short pause: no restart.
                st.end_message(conn, d, out);
                st.message_flights = 1;
            } else {
                // The next flight of the same message.
                st.next_flight();
                if let Some(r) = st.restart.as_mut() {
                    r.flights += 1;
                    if r.flights == 2 {
                        r.frames[2] = seg.frame;
                    }
                    r.wait_ns += gap;
                    r.spoiled |= window_blocked || gap > MAX_FLIGHT_GAP_RTTS.saturating_mul(rtt);
                }
            }
            st.flight = seg.len;
        } else {
            st.flight = st.flight.saturating_add(seg.len);
            st.message_flights = st.message_flights.max(1);
        }
        st.peer_spoke = false;
        if let Some(r) = st.restart.as_mut() {
            r.bytes += u64::from(seg.len);
        }
    }

    /// Ends the messages in progress.
    pub fn on_close(&mut self, conn: &Connection, out: &mut Vec<Occurrence>) {
        for d in [Dir::ClientToServer, Dir::ServerToClient] {
            self.dirs[d.index()].end_message(conn, d, out);
        }
    }

    /// The time the restarts cost on this connection (so that the round
    /// trips they added are not counted again as the path's latency).
    pub fn lost_ns(&self) -> i64 {
        self.dirs.iter().map(|s| s.lost_ns).sum()
    }
}

impl DirState {
    /// A flight ended and another began in the same message.
    fn next_flight(&mut self) {
        match self.message_flights {
            1 => self.message_first = self.flight,
            2 => self.message_second = self.flight,
            _ => {}
        }
        self.prev_prev_flight = self.prev_flight;
        self.prev_flight = self.flight;
        self.grown = self.grown.max(self.flight);
        self.message_flights += 1;
    }

    /// The message in progress ended: what it tells of the window, and
    /// whether it was a restart.
    fn end_message(&mut self, conn: &Connection, d: Dir, out: &mut Vec<Occurrence>) {
        let (last, prev) = (self.flight, self.prev_flight);
        let first = if self.message_flights >= 2 {
            self.message_first
        } else {
            last
        };
        let second = if self.message_flights == 2 {
            last
        } else {
            self.message_second
        };
        // In slow start (RFC 5681 §3.1) each ACKed segment opens the window
        // by one while the window is used: Linux counts it used while at
        // least half is in flight (`tcp_is_cwnd_limited`). A message sent
        // in flights that doubled, without loss, leaves the window at twice
        // its next-to-last flight, plus its last one if that used at least
        // half of it. Otherwise the largest flight is all that is known.
        let slow_start = self.message_flights >= 2
            && !self.message_lost
            && (self.message_flights == 2
                || u64::from(prev) * 2 >= u64::from(self.prev_prev_flight) * 3);
        let grown = if slow_start {
            let cwnd = prev.saturating_mul(2);
            if last.saturating_mul(2) >= cwnd {
                cwnd.saturating_add(last)
            } else {
                cwnd.max(last)
            }
        } else {
            last
        };
        self.grown = self.grown.max(grown);
        if !self.first_message_done {
            self.first_message_done = true;
            if self.message_flights >= 2 {
                self.initial = Some(first);
            }
        }
        self.flight = 0;
        self.prev_flight = 0;
        self.prev_prev_flight = 0;
        self.message_lost = false;
        self.message_flights = 0;
        self.message_first = 0;
        self.message_second = 0;
        if let Some(r) = self.restart.take() {
            self.judge(conn, d, r, first, second, out);
        }
    }

    /// Whether a message that started after an idle spell restarted from the
    /// initial window: `first` and `second` are its first two flights.
    fn judge(
        &mut self,
        conn: &Connection,
        d: Dir,
        r: Restarted,
        first: u32,
        second: u32,
        out: &mut Vec<Occurrence>,
    ) {
        let smss = conn.smss(d);
        let iw = (INITIAL_WINDOW_SEGMENTS * smss).max(self.initial.unwrap_or(0));
        // Scaled windows are comparable with flights only with the scale known.
        let window_known = conn.half(d.reverse()).scale().is_some();
        if r.spoiled
            || r.flights < 2
            || first == 0
            || first > iw + smss
            || u64::from(r.grown) * 2 < u64::from(first) * 3
            || u64::from(second) * 2 < u64::from(first) * 3
            || (window_known && r.window < first.saturating_add(2 * smss))
        {
            return;
        }
        // Flights the grown window would have needed, and the waits beyond.
        let needed = r.bytes.div_ceil(u64::from(r.grown.max(1))).max(1);
        let waits = u64::from(r.flights - 1);
        let extra = waits.saturating_sub(needed - 1);
        if extra == 0 {
            return;
        }
        let delay = r.wait_ns * extra as i64 / waits as i64;
        self.lost_ns += delay;
        let [before, after, second] = r.frames;
        out.push(Occurrence {
            kind: Kind::SlowStartAfterIdle,
            culprit: Blame::Side(d),
            delay_ns: delay,
            frames: vec![before, after, second],
            notes: vec![
                (
                    after,
                    format!("after {:.0} ms idle", r.idle_ns as f64 / 1e6),
                ),
                (second, "second flight, a round trip later".to_string()),
            ],
            ladder_from: Some(after),
            ladder: None,
            span: None,
            detail: Detail::Restart(Restart {
                idle_ns: r.idle_ns,
                restart_flight: first,
                grown_flight: r.grown,
                rounds: waits,
                extra_rounds: extra,
                bytes: r.bytes,
                mss: smss,
                rtt_ns: conn.path_rtt_ns(),
            }),
        });
    }
}

/// The words of a `slow_start_after_idle` finding: why, the fix, its details.
pub(crate) fn words(s: &Said<'_>) -> Words {
    let (a, typical, total, ep, role) = (s.a, s.typical, s.total, s.ep, s.role);
    let Detail::Restart(Restart {
        restart_flight,
        grown_flight,
        mss,
        ..
    }) = &a.first
    else {
        return crate::text::no_words();
    };
    let rtt = a.rtt_ns_min.map(ms);
    let idle = ms(a.transfer_ns / a.occurrences.max(1) as i64);
    let mss = (*mss).max(1);
    let explanation = format!(
        "{ep} ({role}) restarts from its initial window after each idle spell: {occ} message(s) on \
         {conns} connection(s) began after {idle:.0} ms (typical) with nothing sent, longer than the \
         retransmission timeout, and left in a first flight of {first} ({fs} segments) though the window \
         had grown to about {grown} ({gs} segments) before; the rest followed in flights doubling once \
         a round trip (slow start), with no loss and the receive window open. {rounds} waits between \
         flights, {extra} of them more than the grown window needed: {typical:.1} ms lost per message, \
         {total:.0} ms in all (round trip {rtt_text}). RFC 5681 §4.1 lets a sender idle longer than its \
         RTO restart from the initial window; Linux does so when `net.ipv4.tcp_slow_start_after_idle` \
         is 1 (the default) with Reno or CUBIC (BBR keeps its rate).",
        occ = a.occurrences,
        conns = a.connections,
        first = human_bytes(f64::from(*restart_flight)),
        fs = restart_flight.div_ceil(mss),
        grown = human_bytes(f64::from(*grown_flight)),
        gs = grown_flight.div_ceil(mss),
        rounds = a.stalls,
        extra = a.count,
        rtt_text = rtt.map_or("unknown".to_string(), |r| format!("{r:.1} ms")),
    );
    let fix = format!(
        "On the sender {ep}: `sysctl -w net.ipv4.tcp_slow_start_after_idle=0` (persist it in \
         /etc/sysctl.d/), so a kept-alive connection keeps its window across idle spells. Per route \
         instead, a larger initial window (`ip route change … initcwnd 20`) shortens each restart; BBR \
         (`net.ipv4.tcp_congestion_control=bbr`) does not restart."
    );
    (
        explanation,
        fix,
        json!({"idle_ms": idle, "restart_flight_bytes": restart_flight,
               "grown_flight_bytes": grown_flight, "flight_waits": a.stalls,
               "extra_round_trips": a.count, "bytes": a.bytes, "rtt_ms": rtt}),
    )
}

/// What one occurrence measured.
#[derive(Debug, Clone)]
pub struct Restart {
    /// The sender's idle spell before the message.
    pub idle_ns: i64,
    /// The message's first flight, and the window grown before (bytes).
    pub restart_flight: u32,
    pub grown_flight: u32,
    /// Waits between its flights, and those the grown window would not have needed.
    pub rounds: u64,
    pub extra_rounds: u64,
    pub bytes: u64,
    pub mss: u32,
    pub rtt_ns: Option<i64>,
}

impl rule::Fold for Restart {
    fn fold(self, a: &mut crate::Aggregate) {
        // Waits between flights, those the restart added, idle time.
        a.stalls += self.rounds;
        a.count += self.extra_rounds;
        a.bytes += self.bytes;
        a.transfer_ns += self.idle_ns;
        a.rtt_ns_min = rule::min_opt(a.rtt_ns_min, self.rtt_ns);
    }
}

impl rule::Rule for RestartState {
    #[inline]
    fn on_segment(&mut self, cx: &mut rule::SegmentCx<'_>, conn: &Connection, seg: &Segment<'_>) {
        RestartState::on_segment(self, conn, seg, cx.window_blocked, cx.out);
    }

    fn on_close(&mut self, cx: &mut rule::CloseCx<'_>, conn: &Connection) {
        RestartState::on_close(self, conn, cx.out);
        cx.restart_lost_ns = self.lost_ns();
    }
}

/// The verdict's sentence of a `slow_start_after_idle` finding.
pub(crate) fn cause(c: &rule::Cause<'_>) -> String {
    format!(
        "{} ({}) restarts from its initial window after each idle spell \
         (tcp_slow_start_after_idle), so each response after a pause pays extra round trips (~{} each)",
        c.ep, c.role, c.typ
    )
}
