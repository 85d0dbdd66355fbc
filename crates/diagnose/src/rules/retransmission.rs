//! Loss and how it was recovered.
//!
//! A retransmission that follows a silence of the sender longer than any
//! duplicate-ACK or tail-loss-probe recovery would take was sent by the
//! retransmission timer: `retransmission_timeout` (RFC 6298; Linux's minimum
//! RTO is 200 ms, doubling on each retry — the "backoff chain"). Any other
//! retransmission was triggered by duplicate ACKs, SACK or a tail-loss probe:
//! `packet_loss` (RFC 5681 §3.2, RFC 6675, RFC 8985). An episode lasts from
//! the sender's stall to the ACK that covers the retransmitted data.
//!
//! Where the capture point sits matters: a retransmission that fills a hole
//! the capture never saw filled means the original was lost *before* the
//! capture point; one of a segment seen once already was lost after it.

use tcpdoctor_flow::{Connection, Dir, Mark, SegKind, Segment, Seq};
use tcpdoctor_wire::Timestamp;

use super::{Blame, Detail, Kind, Occurrence};

/// Linux never sets the RTO below 200 ms; a pause shorter than this before a
/// retransmission is fast recovery or a tail-loss probe.
pub const MIN_RTO_NS: i64 = 150_000_000;
const MAX_HOLES: usize = 8;

#[derive(Debug, Clone, Copy)]
struct Episode {
    timeout: bool,
    start: Mark,
    first: Mark,
    retransmissions: u32,
    /// Relative sequence just past the data retransmitted so far.
    end: u32,
    upstream: bool,
}

#[derive(Debug, Default)]
struct DirState {
    last_send: Option<Timestamp>,
    dupacks: u32,
    first_dupack: Option<Mark>,
    last_ack: u32,
    /// Sequence ranges the capture skipped (data it never saw).
    holes: Vec<(u32, u32)>,
    /// Relative sequence just past the highest data seen.
    next: Option<u32>,
    episode: Option<Episode>,
}

#[derive(Debug, Default)]
pub struct LossState {
    dirs: [DirState; 2],
}

impl LossState {
    pub fn on_segment(&mut self, conn: &Connection, seg: &Segment<'_>, out: &mut Vec<Occurrence>) {
        let d = seg.dir;
        // As the receiver of the other direction: ACKs, duplicates, recovery.
        {
            let st = &mut self.dirs[d.reverse().index()];
            if seg.flags.ack() && !seg.flags.syn() && !seg.flags.rst() {
                if seg.acked > 0 {
                    st.dupacks = 0;
                    st.first_dupack = None;
                    if let Some(ep) = st.episode {
                        if Seq(seg.ack) >= Seq(ep.end) {
                            st.episode = None;
                            out.push(occurrence(d.reverse(), ep, seg, conn));
                        }
                    }
                } else if seg.len == 0
                    && seg.ack == st.last_ack
                    && conn.half(d.reverse()).in_flight() > 0
                {
                    st.dupacks += 1;
                    st.first_dupack.get_or_insert(Mark {
                        ts: seg.ts,
                        frame: seg.frame,
                    });
                }
                st.last_ack = seg.ack;
            }
        }
        // As the sender.
        if seg.len == 0 {
            return;
        }
        let mark = Mark {
            ts: seg.ts,
            frame: seg.frame,
        };
        let st = &mut self.dirs[d.index()];
        let end = seg.seq.wrapping_add(seg.len);
        match seg.kind {
            SegKind::Retransmission => {
                let upstream = st
                    .holes
                    .iter()
                    .any(|&(a, b)| Seq(seg.seq) >= Seq(a) && Seq(seg.seq) < Seq(b));
                match st.episode.as_mut() {
                    Some(ep) => {
                        ep.retransmissions += 1;
                        if Seq(end) > Seq(ep.end) {
                            ep.end = end;
                        }
                        ep.upstream |= upstream;
                    }
                    None => {
                        let silence = st.last_send.map_or(0, |t| seg.ts.since(t));
                        let rtt = conn.path_rtt_ns().unwrap_or(0);
                        let timeout = silence >= MIN_RTO_NS.max(rtt * 5 / 2) && st.dupacks < 2;
                        let start = if timeout {
                            st.last_send.map_or(mark, |t| Mark {
                                ts: t,
                                frame: seg.frame,
                            })
                        } else {
                            st.first_dupack.unwrap_or(mark)
                        };
                        st.episode = Some(Episode {
                            timeout,
                            start,
                            first: mark,
                            retransmissions: 1,
                            end,
                            upstream,
                        });
                    }
                }
            }
            SegKind::NewData => {
                // Data beyond what was seen before: the capture missed the bytes between.
                if let Some(next) = st.next {
                    if Seq(seg.seq) > Seq(next) {
                        if st.holes.len() == MAX_HOLES {
                            st.holes.remove(0);
                        }
                        st.holes.push((next, seg.seq));
                    }
                }
            }
            _ => {}
        }
        if st.next.is_none_or(|n| Seq(end) > Seq(n)) {
            st.next = Some(end);
        }
        st.last_send = Some(seg.ts);
    }

    pub fn on_close(&mut self, conn: &Connection, out: &mut Vec<Occurrence>) {
        for d in [Dir::ClientToServer, Dir::ServerToClient] {
            if let Some(ep) = self.dirs[d.index()].episode.take() {
                let delay = conn.last_ts.since(ep.start.ts);
                out.push(build(d, ep, delay, None, conn));
            }
        }
    }
}

fn occurrence(sender: Dir, ep: Episode, ack: &Segment<'_>, conn: &Connection) -> Occurrence {
    build(sender, ep, ack.ts.since(ep.start.ts), Some(ack.frame), conn)
}

fn build(
    sender: Dir,
    ep: Episode,
    delay: i64,
    ack_frame: Option<u64>,
    conn: &Connection,
) -> Occurrence {
    let mut frames = vec![ep.first.frame];
    frames.extend(ack_frame);
    let what = if ep.timeout {
        "retransmitted by timeout"
    } else {
        "retransmitted (fast recovery)"
    };
    Occurrence {
        kind: if ep.timeout {
            Kind::RetransmissionTimeout
        } else {
            Kind::PacketLoss
        },
        culprit: Blame::Network(sender),
        delay_ns: delay.max(0),
        frames,
        notes: vec![(ep.first.frame, what.into())],
        ladder_from: None,
        ladder: None,
        detail: Detail::Loss {
            retransmissions: ep.retransmissions,
            upstream: ep.upstream,
            recovered: ack_frame.is_some(),
            rtt_ns: conn.path_rtt_ns(),
        },
    }
}
