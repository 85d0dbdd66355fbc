//! Listen queue overflow: a server too slow to accept() its connections.
//!
//! A listening socket holds completed connections in its accept queue
//! (`listen(fd, backlog)`, bounded by `net.core.somaxconn`) until the
//! application accepts them. When it is full, Linux drops new SYNs (the
//! client retries after 1 s, 3 s…) and ignores the client's final handshake
//! ACK and what follows it (`tcp_abort_on_overflow=0`): the client believes
//! the connection open and sends its request, the server answers nothing —
//! no ACK at all — until a retransmission of the request arrives when the
//! queue has room, or it resends its SYN-ACK.
//!
//! A server that acknowledges nothing of a connection it has just answered
//! the SYN of, while the client retransmits, is that queue: captured at the
//! server, the ignored request is seen arriving; elsewhere, two
//! retransmissions in a row unanswered (a path that loses the same request
//! three times and left the handshake alone is unlikely).
//! So is a SYN-ACK sent again after the client's ACK was seen. Such a
//! connection's retransmission wait is renamed `listen_queue_overflow`; the
//! SYN retries to the same server are folded into it when the report is made
//! (they are the same full queue, seen earlier).

use tcpdoctor_flow::{Connection, Dir, SegKind, Segment};

use super::setup::Setup;
use crate::rule::{self, Blame, Detail, Kind, Occurrence};
use crate::text::{ms, Said, Words};
use serde_json::json;

/// Per connection, until the server first acknowledges the client's data.
#[derive(Debug, Default)]
pub struct ListenState {
    done: bool,
    /// The client sent data again before the server acknowledged any, how
    /// many times, and whether that is the full queue (see `on_segment`).
    retransmitted: bool,
    retransmissions: u32,
    ignored: bool,
    first_data_ns: i64,
    /// The server's first word after its SYN-ACK, where `ignored` was
    /// told: its frame and time.
    first_word: (u64, i64),
}

impl ListenState {
    /// Runs after the loss rule, whose occurrences in `out` it may rename.
    pub fn on_segment(&mut self, conn: &Connection, seg: &Segment<'_>, out: &mut [Occurrence]) {
        if self.done {
            // The loss rule reports an episode at the receiver's next ACK
            // after the one that ended it (a D-SACK may yet prove it
            // spurious): the request's re-sends may come after the first word.
            if self.ignored && !out.is_empty() {
                self.rename(out);
            }
            return;
        }
        match seg.dir {
            Dir::ClientToServer => {
                if seg.len == 0 {
                    return;
                }
                if self.first_data_ns == 0 {
                    self.first_data_ns = seg.ts.nanos();
                }
                if seg.kind == SegKind::Retransmission {
                    self.retransmitted = true;
                    self.retransmissions += 1;
                }
            }
            Dir::ServerToClient => {
                if seg.flags.syn() {
                    return;
                }
                // The server's first word after its SYN-ACK.
                self.done = true;
                if !self.retransmitted || seg.acked == 0 || conn.handshake.synack.is_none() {
                    return;
                }
                // Captured at the server, the request was seen arriving and
                // ignored. Elsewhere one lost request is the path's: the
                // server must have let two retransmissions go unanswered.
                if self.retransmissions < 2 && crate::text::vantage(conn).0 != "server" {
                    return;
                }
                self.ignored = true;
                self.first_word = (seg.frame, seg.ts.nanos());
                self.rename(out);
            }
        }
    }

    /// The request's re-sends (a loss episode that began before the
    /// server's first word) were the full queue's: renamed.
    fn rename(&self, out: &mut [Occurrence]) {
        let wait = self.first_word.1 - self.first_data_ns;
        for o in out.iter_mut() {
            if matches!(o.kind, Kind::RetransmissionTimeout | Kind::PacketLoss)
                && o.culprit == Blame::Network(Dir::ClientToServer)
                && o.frames.first().is_some_and(|&f| f < self.first_word.0)
            {
                o.kind = Kind::ListenQueueOverflow;
                o.culprit = Blame::Side(Dir::ServerToClient);
                o.detail = Detail::Listen(Listen {
                    syn_drops: 0,
                    ack_dropped: true,
                    accept_wait_ns: wait,
                });
            }
        }
    }

    /// Whether this connection showed the full queue: its SYN retries are the
    /// same queue's.
    pub fn overflowed(&self, conn: &Connection) -> bool {
        let hs = &conn.handshake;
        // A SYN-ACK sent again after the client's ACK: the server ignored
        // that ACK. It cost something only if a request waited behind it (a
        // browser's pre-connect that never carried one lost nothing).
        let synack_after_ack = matches!((hs.ack, hs.last_synack), (Some(a), Some(s)) if hs.synack_count > 1 && s.ts > a.ts)
            && conn.client.data_packets > 0;
        self.ignored || synack_after_ack
    }
}

/// Renames a connection's setup occurrence when the connection itself showed
/// the full queue.
pub fn on_close(state: &ListenState, conn: &Connection, out: &mut [Occurrence]) {
    if !state.overflowed(conn) {
        return;
    }
    for o in out.iter_mut() {
        if let (Kind::SynRetransmit, Detail::Setup(Setup { syn_retries, .. })) = (o.kind, &o.detail)
        {
            o.detail = Detail::Listen(Listen {
                syn_drops: *syn_retries,
                ack_dropped: false,
                accept_wait_ns: 0,
            });
            o.kind = Kind::ListenQueueOverflow;
            o.culprit = Blame::Side(Dir::ServerToClient);
        }
    }
}

/// The words of a `listen_queue_overflow` finding: why, the fix, its details.
pub(crate) fn words(s: &Said<'_>) -> Words {
    let (a, typical, total, ep) = (s.a, s.typical, s.total, s.ep);
    let explanation = format!(
        "{ep} (server) did not accept() its connections fast enough: its accept queue (the listen \
         backlog) was full. {syn}{acks}{occ} time(s) on {conns} connection(s), {typical:.0} ms each \
         (median), {total:.0} ms in all. Linux drops a SYN while the queue is full (the client retries \
         after 1 s, then 3 s) and ignores the final ACK of a handshake it cannot queue, and the request \
         that follows it: the client thinks the connection open, the server acknowledges nothing until a \
         retransmission arrives when there is room.",
        syn = if a.count > 0 {
            format!("{} SYN(s) had to be sent again. ", a.count)
        } else {
            String::new()
        },
        acks = if a.flagged > 0 {
            format!(
                "{} connection(s) had their handshake ACK and request ignored; those requests waited \
                 {:.0} ms in all before the server took them. ",
                a.flagged,
                ms(a.inside_ns)
            )
        } else {
            String::new()
        },
        occ = a.occurrences,
        conns = a.connections,
    );
    let fix = format!(
        "At {ep}: accept connections faster (a dedicated accept loop or thread, more workers, no \
         blocking work before accept()), and raise the backlog: the `listen()` backlog argument (nginx \
         `listen … backlog=4096`, Java `ServerSocket(port, backlog)`) and its ceiling \
         `net.core.somaxconn` (and `net.ipv4.tcp_max_syn_backlog`). `nstat -az TcpExtListenOverflows \
         TcpExtListenDrops` and `ss -lnt` (Recv-Q against Send-Q) show the queue overflowing."
    );
    (
        explanation,
        fix,
        json!({"syn_drops": a.count, "ack_drops": a.flagged,
               "accept_wait_ms": ms(a.inside_ns)}),
    )
}

/// What one occurrence measured.
#[derive(Debug, Clone)]
pub struct Listen {
    /// SYNs retried, the handshake's ACK (and request) ignored, and how
    /// long the request waited for the server to take it.
    pub syn_drops: u32,
    pub ack_dropped: bool,
    pub accept_wait_ns: i64,
}

impl rule::Fold for Listen {
    fn fold(self, a: &mut crate::Aggregate) {
        a.count += u64::from(self.syn_drops);
        a.flagged += u64::from(self.ack_dropped);
        a.inside_ns += self.accept_wait_ns;
    }
}

impl rule::Rule for ListenState {
    #[inline]
    fn on_segment(&mut self, cx: &mut rule::SegmentCx<'_>, conn: &Connection, seg: &Segment<'_>) {
        ListenState::on_segment(self, conn, seg, cx.out);
    }

    fn on_close(&mut self, cx: &mut rule::CloseCx<'_>, conn: &Connection) {
        on_close(self, conn, cx.out);
    }
}

/// The verdict's sentence of a `listen_queue_overflow` finding.
pub(crate) fn cause(c: &rule::Cause<'_>) -> String {
    format!(
        "{} ({}) accepts connections too slowly: its listen backlog overflows, SYNs and \
         handshake ACKs are dropped and connections wait ~{} to be taken",
        c.ep, c.role, c.typ
    )
}
