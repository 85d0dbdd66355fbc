//! A token-bucket policer on the path, told from a bottleneck queue.
//!
//! A policer (a token bucket that drops what exceeds its rate, after Flach
//! et al., "An Internet-Wide Analysis of Traffic Policing", SIGCOMM 2016)
//! and a bottleneck link both deliver a transfer at a fixed rate and both
//! drop packets. They differ before the drop: a bottleneck queues what it
//! cannot send at once, so the round trip rises until the queue overflows; a
//! policer has no queue — it drops the packet that finds the bucket empty,
//! and the round trip stays at the path's base up to the loss. And a
//! policer's losses come when the delivery rate reaches its token rate, not
//! at random: each loss event meets the same ceiling, the rate falls below it
//! as the sender backs off, and climbs back to it before the next loss.
//!
//! The rule measures, per direction and per exchange:
//! - the round trip as a loop through both endpoints, from TCP timestamps
//!   (RFC 7323: the time from a TSval seen at the capture point to the first
//!   segment of the peer that echoes it, both ways), which places a queue
//!   anywhere on the path whatever the capture point;
//! - loss events (a retransmission, or a gap the capture point saw: data lost
//!   upstream of it), at most one per round trip;
//! - the delivery rate per round trip, from the bytes the receiver
//!   acknowledges.
//!
//! Policed: at most a quarter of the loss events after a rise of the round
//! trip; at least [`MIN_EVENTS`] loss episodes (a loss within
//! [`EPISODE_ROUNDS`] round trips of the one before continues its episode),
//! and the delivery rate in the round trip before each episode's first loss
//! within ±20% of their median (a fixed ceiling) for three quarters of them;
//! that ceiling at or above the 80th percentile of all the round trips'
//! rates since the first loss (losses come at the ceiling) and
//! the rate below 3/4 of it in some of them (the sender backed off and came
//! back). The loss occurrences of a policed transfer are folded into one
//! `policer` occurrence.

use tcpdoctor_flow::{Connection, Dir, Exchange, SegKind, Segment, Seq};
use tcpdoctor_wire::{TcpOptions, Timestamp};

use crate::rule::{self, Blame, Detail, Kind, Occurrence};
use crate::text::{human_bytes, human_rate, ms, Said, Words};
use serde_json::json;

/// Loss episodes a policed transfer shows at least.
pub const MIN_EVENTS: usize = 3;
/// A loss this many round trips or fewer after the one before belongs to
/// its episode: one round trip to repair it, one for the ACKs that end the
/// repair, and then a round trip of the sender's own.
const EPISODE_ROUNDS: i64 = 3;
/// A round trip above its least by a quarter of it before a loss is a queue
/// filling, and by this much at least (the jitter of a quiet path)…
const MIN_RISE_NS: i64 = 3_000_000;
/// …and by this much at most, whatever the base: a queue of 15 KB at
/// 10 Mbit/s adds 8-10 ms before its losses, a quarter of a 32 ms path; read
/// as no queue, nothing else kept it from the policer's name. A policer's
/// losses show rises of 4 ms or less (lab captures, a compile's load beside).
/// A path that jitters more leaves a policer named `packet_loss`, the safe side.
const MAX_RISE_NS: i64 = 5_000_000;
/// At most this share of the loss events may follow a rise.
const MAX_RISEN_SHARE: f64 = 0.25;
/// The delivery rate before a loss is the ceiling's within this ratio…
const CEILING_SPREAD: f64 = 0.2;
/// …for at least this share of the loss events.
const MIN_AT_CEILING: f64 = 0.75;
/// Round trips kept per transfer after its first loss, and loss events.
const MAX_BINS: usize = 4096;
const MAX_EVENTS: usize = 256;

/// Capture point → an endpoint → capture point, timed by TCP timestamps: a
/// TSval sent towards the endpoint and the first of its segments echoing it.
#[derive(Debug, Default, Clone, Copy)]
struct Leg {
    timing: Option<(u32, Timestamp)>,
    last_val: u32,
    /// The least sample of the current and of the previous round trip.
    cur_min: i64,
    prev_min: i64,
    round_start: i64,
    /// The least sample seen.
    min: i64,
}

impl Leg {
    fn sample(&mut self, ns: i64, now: i64, round: i64) {
        if now - self.round_start >= round {
            self.prev_min = self.cur_min;
            self.cur_min = 0;
            self.round_start = now;
        }
        let least = |v: i64| if v == 0 { ns } else { v.min(ns) };
        self.cur_min = least(self.cur_min);
        self.min = least(self.min);
    }

    /// The leg as the last round trip or two saw it (0: never timed).
    fn recent(&self) -> i64 {
        match (self.cur_min, self.prev_min) {
            (0, p) => p,
            (c, 0) => c,
            (c, p) => c.min(p),
        }
    }
}

/// A loss event: when, the delivery rate of the round trip before it, the
/// round trip's rise above its least, and the bytes acknowledged by then.
#[derive(Debug, Clone, Copy)]
struct Event {
    ts: i64,
    rate: f64,
    rise: i64,
    acked: u64,
    bins: usize,
}

/// What a transfer keeps once it lost something.
#[derive(Debug, Default)]
struct Lossy {
    events: Vec<Event>,
    /// Delivery rate of each round trip since the first loss (bytes/s).
    bins: Vec<f64>,
    /// The loss occurrences of this direction, held until the verdict.
    held: Vec<Occurrence>,
}

#[derive(Debug, Default)]
struct DirState {
    /// Relative sequence just past the highest data seen.
    next: Option<u32>,
    /// Bytes acknowledged (of this direction's data), in all, and when the
    /// transfer began.
    acked: u64,
    acked_start: u64,
    first_data: Option<Timestamp>,
    last_data: Option<Timestamp>,
    bin_start: i64,
    bin_bytes: u64,
    /// The last complete round trip's delivery rate.
    last_rate: f64,
    last_event: i64,
    /// The receiver's cumulative ACK (relative), and where the last loss
    /// event's recovery ends (the highest data sent then): losses before
    /// that are the same event.
    una: u32,
    recover: Option<u32>,
    lossy: Option<Box<Lossy>>,
}

impl DirState {
    fn ack(&mut self, bytes: u32, now: i64, round: i64) {
        self.acked += u64::from(bytes);
        if round <= 0 {
            return;
        }
        if self.bin_start == 0 {
            self.bin_start = now;
        }
        while now - self.bin_start >= round {
            // Idle round trips (nothing acknowledged) are the application's,
            // not a rate.
            if self.bin_bytes > 0 {
                self.last_rate = self.bin_bytes as f64 * 1e9 / round as f64;
                if let Some(l) = self.lossy.as_mut().filter(|l| l.bins.len() < MAX_BINS) {
                    l.bins.push(self.last_rate);
                }
            }
            self.bin_bytes = 0;
            self.bin_start += round;
            if now - self.bin_start > 64 * round {
                self.bin_start = now;
            }
        }
        self.bin_bytes += u64::from(bytes);
    }
}

/// A message this large in one direction is a transfer a policer could
/// bound: from then on the connection's round trips, rates and losses are
/// measured. (A policer's first drops come once its burst is spent, and a
/// verdict needs [`MIN_EVENTS`] loss events, one per round trip at most:
/// smaller messages never show one. Most connections carry none this large
/// and cost the rule nothing more than this count.)
const BULK_BYTES: u64 = 16 * 1024;

#[derive(Debug, Default)]
pub struct PolicerState {
    /// Bytes of the message in progress, and the direction sending it.
    message: u64,
    message_dir: Option<Dir>,
    /// From the first bulk message on: what the rule measures (apart, so
    /// that connections without one stay small).
    bulk: Option<Box<Measure>>,
}

#[derive(Debug, Default)]
struct Measure {
    dirs: [DirState; 2],
    /// Legs to the endpoint that sends in each direction.
    legs: [Leg; 2],
    /// The policer's rate found in each direction by the last verdict (0: none).
    policed_rate: [f64; 2],
    /// Policed transfers, reported when the connection closes (with the
    /// congestion-window waits the policer's losses caused).
    pending: Vec<Occurrence>,
}

/// A policed transfer, as measured.
#[derive(Debug, Clone)]
pub struct Policed {
    /// The delivery rate at the losses: the policer's rate (bytes/s).
    pub rate: f64,
    /// Bytes delivered per second between the first loss and the last.
    pub goodput: f64,
    pub events: u64,
    pub retransmissions: u64,
    /// Median rise of the round trip before a loss.
    pub rise_ns: i64,
    /// The least loop round trip.
    pub rtt_ns: i64,
    pub bytes: u64,
    pub transfer_ns: i64,
}

impl rule::Fold for Policed {
    fn fold(self, a: &mut crate::Aggregate) {
        a.count += self.events;
        a.flagged += self.retransmissions;
        a.bytes += self.bytes;
        a.transfer_ns += self.transfer_ns;
        a.rtt_ns_min = rule::min_opt(a.rtt_ns_min, Some(self.rtt_ns).filter(|&r| r > 0));
    }
}

fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

impl Measure {
    fn round(&self, conn: &Connection) -> i64 {
        let loop_min = self.legs[0].min + self.legs[1].min;
        if self.legs[0].min > 0 && self.legs[1].min > 0 {
            loop_min
        } else {
            conn.path_rtt_ns().unwrap_or(0)
        }
    }

    fn timestamps(&mut self, conn: &Connection, seg: &Segment<'_>) {
        if !(conn.client.timestamps && conn.server.timestamps) || seg.options.is_empty() {
            return;
        }
        let Some((val, ecr)) = TcpOptions::timestamps(seg.options) else {
            return;
        };
        let now = seg.ts.nanos();
        let round = self.round(conn).max(1_000_000);
        // This segment's sender answers a TSval sent towards it.
        let me = &mut self.legs[seg.dir.index()];
        if let Some((v, t)) = me.timing {
            if Seq(ecr) >= Seq(v) {
                me.timing = None;
                me.sample(seg.ts.since(t), now, round);
            }
        }
        // The peer's answer to this one is timed, one at a time; only while
        // data is on its way (an idle sender's answer waits for its
        // application).
        // (At the receiver's capture point its ACK acknowledges all it has
        // seen: nothing is in flight, yet the peer's next data is on its
        // way while it sent some within the last round trip.)
        let sending = self.dirs[seg.dir.reverse().index()]
            .last_data
            .is_some_and(|t| now - t.nanos() < round);
        let peer = &mut self.legs[seg.dir.reverse().index()];
        if peer.timing.is_none() && val != peer.last_val {
            let busy = seg.len > 0 || sending || conn.half(seg.dir.reverse()).in_flight() > 0;
            if busy {
                peer.timing = Some((val, seg.ts));
                peer.last_val = val;
            }
        }
    }

    /// Runs after the loss rule and those that rename its occurrences: holds
    /// the loss occurrences of a transfer until its verdict.
    pub(crate) fn on_segment(
        &mut self,
        conn: &Connection,
        seg: &Segment<'_>,
        out: &mut Vec<Occurrence>,
        ring: &crate::Ring,
    ) {
        self.timestamps(conn, seg);
        let round = self.round(conn);
        let now = seg.ts.nanos();
        if seg.flags.ack() {
            let peer = &mut self.dirs[seg.dir.reverse().index()];
            if Seq(seg.ack) > Seq(peer.una) {
                peer.una = seg.ack;
            }
            if seg.acked > 0 {
                peer.ack(seg.acked, now, round);
            }
        }
        if !out.is_empty() {
            self.hold(out, Some(ring));
        }
        if seg.len == 0 || !matches!(seg.kind, SegKind::NewData | SegKind::Retransmission) {
            return;
        }
        let loop_now = self.legs[0].recent() + self.legs[1].recent();
        let loop_min = self.legs[0].min + self.legs[1].min;
        let timed = self.legs[0].min > 0 && self.legs[1].min > 0;
        let st = &mut self.dirs[seg.dir.index()];
        st.first_data.get_or_insert(seg.ts);
        st.last_data = Some(seg.ts);
        let end = seg.seq.wrapping_add(seg.len);
        let gap = seg.kind == SegKind::NewData && st.next.is_some_and(|n| Seq(seg.seq) > Seq(n));
        if st.next.is_none_or(|n| Seq(end) > Seq(n)) {
            st.next = Some(end);
        }
        let lost = seg.kind == SegKind::Retransmission || gap;
        let recovering = st.recover.is_some_and(|r| Seq(st.una) < Seq(r));
        if !lost || !timed || round <= 0 || recovering || now - st.last_event < round {
            return;
        }
        st.last_event = now;
        // The data sent before this loss was noticed: its recovery is this event's.
        st.recover = st.next;
        let l = st.lossy.get_or_insert_with(Default::default);
        if l.events.len() < MAX_EVENTS {
            l.events.push(Event {
                ts: now,
                rate: st.last_rate,
                rise: (loop_now - loop_min).max(0),
                acked: st.acked,
                bins: l.bins.len(),
            });
        }
    }

    /// Takes this connection's loss occurrences out of `out`, each with its
    /// ladder (the packets around it are in the ring now).
    #[cold]
    fn hold(&mut self, out: &mut Vec<Occurrence>, ring: Option<&crate::Ring>) {
        let mut i = 0;
        while i < out.len() {
            let o = &out[i];
            let d = match (o.kind, o.culprit) {
                (Kind::PacketLoss | Kind::RetransmissionTimeout, Blame::Network(d)) => d,
                _ => {
                    i += 1;
                    continue;
                }
            };
            let Some(l) = self.dirs[d.index()].lossy.as_mut() else {
                i += 1;
                continue;
            };
            let mut o = out.remove(i);
            if let (None, Some(ring)) = (&o.ladder, ring) {
                o.ladder = Some(ring.rows(o.ladder_from, &o.notes));
            }
            l.held.push(o);
        }
    }

    /// The verdicts of the transfers so far: a policed one's held losses
    /// become one `policer` occurrence, the others' go out as they were.
    pub(crate) fn conclude(&mut self, out: &mut Vec<Occurrence>) {
        let rtt = self.legs[0].min + self.legs[1].min;
        for d in [Dir::ClientToServer, Dir::ServerToClient] {
            self.policed_rate[d.index()] = 0.0;
            let st = &mut self.dirs[d.index()];
            let transfer = match (st.first_data, st.last_data) {
                (Some(a), Some(b)) => b.since(a),
                _ => 0,
            };
            st.first_data = None;
            st.last_data = None;
            let moved = st.acked - st.acked_start;
            st.acked_start = st.acked;
            let Some(mut l) = st.lossy.take() else {
                continue;
            };
            let verdict = judge(&mut l, rtt);
            let Some(mut p) = verdict else {
                out.append(&mut l.held);
                continue;
            };
            if l.held.is_empty() {
                continue;
            }
            p.transfer_ns = transfer;
            self.policed_rate[d.index()] = p.rate;
            let mut frames = Vec::new();
            let mut delay = 0;
            let mut retransmissions = 0;
            for o in &l.held {
                delay += o.delay_ns;
                if let Detail::Loss(x) = &o.detail {
                    retransmissions += u64::from(x.retransmissions);
                }
            }
            p.retransmissions = retransmissions;
            // What the policer cost: the transfer beyond the time it takes
            // at the policed rate (a shaper's), at least the loss stalls.
            let at_rate = (moved as f64 * 1e9 / p.rate) as i64;
            let delay = (transfer - at_rate).max(delay);
            frames.extend(l.held.first().and_then(|o| o.frames.first().copied()));
            frames.extend(l.held.last().and_then(|o| o.frames.last().copied()));
            frames.dedup();
            let first = l.held.swap_remove(0);
            self.pending.push(Occurrence {
                kind: Kind::Policer,
                culprit: Blame::Network(d),
                delay_ns: delay,
                frames,
                notes: Vec::new(),
                ladder_from: None,
                ladder: first.ladder,
                span: None,
                detail: Detail::Policed(p),
            });
        }
    }
}

/// Whether a transfer's losses are a policer's (see the module's words).
fn judge(l: &mut Lossy, rtt: i64) -> Option<Policed> {
    let ev = &l.events;
    if ev.len() < MIN_EVENTS || rtt <= 0 {
        return None;
    }
    let threshold = (rtt / 4).clamp(MIN_RISE_NS, MAX_RISE_NS);
    let risen = ev.iter().filter(|e| e.rise >= threshold).count();
    if risen as f64 > MAX_RISEN_SHARE * ev.len() as f64 {
        return None;
    }
    // The ceiling is read before the first loss of each episode: a loss
    // within EPISODE_ROUNDS round trips of the one before continues its
    // episode, and the round trip before it held that loss's recovery or
    // the burst of ACKs that ended it (a cumulative ACK that jumps past the
    // repaired hole), not the sender's own rate.
    let episode = EPISODE_ROUNDS * rtt;
    let starts = || {
        ev.iter()
            .enumerate()
            .filter(move |&(i, e)| i == 0 || e.ts - ev[i - 1].ts > episode)
            .map(|(_, e)| e)
    };
    let mut rates: Vec<f64> = starts().map(|e| e.rate).filter(|&r| r > 0.0).collect();
    if rates.len() < MIN_EVENTS {
        return None;
    }
    let ceiling = median(&mut rates);
    let near = rates
        .iter()
        .filter(|&&r| (r - ceiling).abs() <= CEILING_SPREAD * ceiling)
        .count();
    if (near as f64) < MIN_AT_CEILING * starts().count() as f64 {
        return None;
    }
    let (first, last) = (ev[0], ev[ev.len() - 1]);
    let mut bins: Vec<f64> = l.bins[..last.bins.min(l.bins.len())].to_vec();
    if bins.len() < 2 * MIN_EVENTS {
        return None;
    }
    let below = bins.iter().filter(|&&r| r < 0.75 * ceiling).count();
    bins.sort_by(f64::total_cmp);
    // Not the 90th: the round trip after a recovery acknowledges what
    // arrived behind the hole at once (a spike of the delivery rate).
    let p80 = bins[(bins.len() * 4 / 5).min(bins.len() - 1)];
    if ceiling < 0.9 * p80 || below == 0 {
        return None;
    }
    let span = last.ts - first.ts;
    let goodput = if span > 0 {
        (last.acked - first.acked) as f64 * 1e9 / span as f64
    } else {
        0.0
    };
    let mut rises: Vec<f64> = ev.iter().map(|e| e.rise as f64).collect();
    Some(Policed {
        rate: ceiling,
        goodput,
        events: ev.len() as u64,
        retransmissions: 0,
        rise_ns: median(&mut rises) as i64,
        rtt_ns: rtt,
        bytes: last.acked - first.acked,
        transfer_ns: 0,
    })
}

impl rule::Rule for PolicerState {
    #[inline]
    fn on_segment(&mut self, cx: &mut rule::SegmentCx<'_>, conn: &Connection, seg: &Segment<'_>) {
        if self.bulk.is_none() {
            if seg.len == 0 {
                return;
            }
            if self.message_dir != Some(seg.dir) {
                self.message_dir = Some(seg.dir);
                self.message = 0;
            }
            self.message += u64::from(seg.len);
            if self.message < BULK_BYTES {
                return;
            }
        }
        let m = self.bulk.get_or_insert_with(|| {
            // The legs' least round trips so far: the handshake's, so that
            // a queue that filled before the first bulk message still shows
            // as a rise.
            let mut m = Box::<Measure>::default();
            for d in [Dir::ClientToServer, Dir::ServerToClient] {
                if let Some(ns) = conn.distance_to(d).filter(|&ns| ns > 0) {
                    m.legs[d.index()].min = ns;
                }
            }
            m
        });
        m.on_segment(conn, seg, cx.out, cx.ring);
    }

    fn on_exchange(&mut self, cx: &mut rule::ExchangeCx<'_>, _conn: &Connection, _ex: &Exchange) {
        if let Some(m) = self.bulk.as_mut() {
            m.conclude(cx.out);
        }
    }

    fn on_close(&mut self, cx: &mut rule::CloseCx<'_>, _conn: &Connection) {
        if let Some(m) = self.bulk.as_mut() {
            m.on_close(cx);
        }
    }
}

impl Measure {
    fn on_close(&mut self, cx: &mut rule::CloseCx<'_>) {
        // The loss rule's last episodes, ended by the close: their ladder
        // is made when they are recorded.
        self.hold(cx.out, None);
        self.conclude(cx.out);
        if self.pending.is_empty() {
            return;
        }
        // A policed transfer's congestion window was cut by the policer's
        // drops: its waits for the window to regrow are the policer's.
        let mut i = 0;
        while i < cx.out.len() {
            let o = &cx.out[i];
            let into = match (o.kind, o.culprit) {
                (Kind::CongestionLimited, Blame::Network(d)) => self
                    .pending
                    .iter()
                    .position(|p| p.culprit == Blame::Network(d)),
                _ => None,
            };
            match into {
                Some(_) => {
                    // Counted in the policer's time (the transfer beyond
                    // what it takes at the policed rate).
                    cx.out.remove(i);
                }
                None => i += 1,
            }
        }
        cx.out.append(&mut self.pending);
    }
}

impl PolicerState {
    /// The time an exchange's larger message takes at the policer's rate
    /// found on this connection (0: none found): what its transfer becomes
    /// when the policer shapes instead. Out of line: asked of few exchanges.
    #[inline(never)]
    pub(crate) fn policed_ns(&self, ex: &Exchange) -> i64 {
        let Some(m) = self.bulk.as_deref() else {
            return 0;
        };
        let (bytes, d) = if ex.request_bytes >= ex.response_bytes {
            (ex.request_bytes, Dir::ClientToServer)
        } else {
            (ex.response_bytes, Dir::ServerToClient)
        };
        let rate = m.policed_rate[d.index()];
        if rate <= 0.0 {
            return 0;
        }
        (bytes as f64 * 1e9 / rate) as i64
    }
}

/// The words of a `policer` finding: why, the fix, its details.
pub(crate) fn words(s: &Said<'_>) -> Words {
    let (a, total, ep) = (s.a, s.total, s.ep);
    let Detail::Policed(p) = &a.first else {
        return crate::text::no_words();
    };
    let rtt = a.rtt_ns_min.map(ms);
    let explanation = format!(
        "Transfers to or from {ep} ran into a token-bucket policer: their delivery rate met the same \
         ceiling, {rate}, before each episode of loss ({events} loss events in all), fell below it as \
         the sender backed off and climbed back to it before the next. The round trip did not rise before the losses \
         (median rise {rise:.1} ms over a base of {rtt}): no queue filled — a bottleneck link queues \
         before it drops, a policer drops what exceeds its rate at once. {retx} retransmissions; the \
         transfers moved {bytes} at {goodput} between their first and last loss, below the policed \
         rate; {total:.0} ms waited on the losses.",
        rate = human_rate(p.rate),
        events = a.count,
        rise = ms(p.rise_ns),
        rtt = rtt.map_or("unknown".to_string(), |r| format!("{r:.1} ms")),
        retx = a.flagged,
        bytes = human_bytes(a.bytes as f64),
        goodput = human_rate(p.goodput),
    );
    let fix = format!(
        "Shape instead of police: where the rate is enforced (the provider's or your own edge), a \
         shaper with a queue (`tc qdisc … tbf rate R burst B latency 50ms`, or HTB) delays the excess \
         instead of dropping it; or keep the sender below the rate: pace it (`tc qdisc … fq maxrate`, \
         `SO_MAX_PACING_RATE`, BBR, which detects policers) at under {rate}; or raise the policer's \
         burst to at least a round trip's worth at its rate ({burst}).",
        rate = human_rate(p.rate),
        burst = human_bytes(p.rate * rtt.unwrap_or(0.0) / 1e3),
    );
    (
        explanation,
        fix,
        json!({"rate_bytes_per_sec": p.rate.round(), "goodput_bytes_per_sec": p.goodput.round(),
               "loss_events": a.count, "retransmissions": a.flagged,
               "rtt_rise_ms": ms(p.rise_ns), "rtt_ms": rtt}),
    )
}

/// The verdict's sentence of a `policer` finding.
pub(crate) fn cause(c: &rule::Cause<'_>) -> String {
    let rate = c.num("rate_bytes_per_sec").unwrap_or(0.0);
    format!(
        "a token-bucket policer on the path drops what exceeds {} (no queue before the losses; ~{} \
         per transfer)",
        human_rate(rate),
        c.typ
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Reno sawtooth under a ceiling of 1 MB/s: the rate climbs from half
    /// of it each round trip and a loss comes at the ceiling.
    fn sawtooth(rise: i64, at_loss: impl Fn(usize) -> f64) -> Lossy {
        let mut l = Lossy::default();
        for i in 0..6 {
            for k in 0..10 {
                l.bins.push(500_000.0 + 50_000.0 * k as f64);
            }
            l.events.push(Event {
                ts: i as i64 * 400_000_000,
                rate: at_loss(i),
                rise,
                acked: i as u64 * 400_000,
                bins: l.bins.len(),
            });
        }
        l
    }

    #[test]
    fn losses_at_one_ceiling_without_a_queue_are_a_policer() {
        let p = judge(&mut sawtooth(0, |_| 950_000.0), 40_000_000).expect("policed");
        assert!((p.rate - 950_000.0).abs() < 1.0);
        assert_eq!(p.events, 6);
    }

    #[test]
    fn a_round_trip_rising_before_the_losses_is_a_queue() {
        assert!(judge(&mut sawtooth(30_000_000, |_| 950_000.0), 40_000_000).is_none());
    }

    /// A 15 KB queue at 10 Mbit/s on a 32 ms path: rises of 7.8-10 ms before
    /// its losses, under a quarter of the base (8 ms) for some of them. A
    /// rise of 5 ms is a queue on any path; one of 2 ms is none on this one.
    #[test]
    fn a_short_queue_on_a_long_path_is_a_queue() {
        let rtt = 32_000_000;
        assert!(judge(&mut sawtooth(7_800_000, |_| 950_000.0), rtt).is_none());
        assert!(judge(&mut sawtooth(5_000_000, |_| 950_000.0), 200_000_000).is_none());
        assert!(judge(&mut sawtooth(2_000_000, |_| 950_000.0), rtt).is_some());
    }

    /// What the lab's policer showed on a loaded machine: after slow start's
    /// loss, and after some later ones, a second loss one or two round trips
    /// on, whose round trip before held the first one's repair (a rate of
    /// 0.6, 2.0 or 0.03 of the ceiling). Read per loss, 6 of 9 sat at the
    /// ceiling, under the three quarters asked; read per episode, all did.
    #[test]
    fn a_loss_during_the_last_ones_repair_does_not_read_the_ceiling() {
        let mut l = sawtooth(0, |_| 1_000_000.0);
        let rtt = 40_000_000;
        let first = l.events[0];
        let ts = [(1, 0.6), (3, 2.0), (5, 0.03)].map(|(i, r)| {
            let e = l.events[i];
            Event {
                ts: e.ts + 80_000_000,
                rate: r * 1_000_000.0,
                ..e
            }
        });
        l.events.extend(ts);
        l.events.sort_by_key(|e| e.ts);
        assert_eq!(l.events[0].ts, first.ts);
        let p = judge(&mut l, rtt).expect("policed: every episode began at the ceiling");
        assert_eq!(p.events, 9);
        // The same losses 4 round trips apart: each its own episode, off the ceiling.
        for e in l.events.iter_mut().filter(|e| e.rate != 1_000_000.0) {
            e.ts += 80_000_000;
        }
        l.events.sort_by_key(|e| e.ts);
        assert!(judge(&mut l, rtt).is_none());
    }

    #[test]
    fn losses_at_any_rate_are_not_a_policer() {
        let rates = [
            300_000.0, 950_000.0, 600_000.0, 450_000.0, 800_000.0, 700_000.0,
        ];
        assert!(judge(&mut sawtooth(0, |i| rates[i]), 40_000_000).is_none());
    }
}
