//! Connection setup that waited for a SYN or SYN-ACK to be sent again.
//!
//! A lost SYN is retried after the initial retransmission timeout: 1 s on
//! Linux and in RFC 6298 (2.1), 3 s on older stacks (RFC 1122), then doubling.
//! A SYN-ACK retried by the server means its SYN-ACK (or the client's ACK) was
//! lost. The time lost is from the first SYN to the SYN that was answered.

use tcpdoctor_flow::{Connection, Dir};

use super::{Blame, Detail, Kind, Occurrence};

/// A retry earlier than this after the first SYN is a duplicate, not a timeout.
const MIN_RETRY_NS: i64 = 100_000_000;

pub fn on_close(conn: &Connection, out: &mut Vec<Occurrence>) {
    let hs = &conn.handshake;
    let (Some(first), Some(last)) = (hs.first_syn, hs.syn) else {
        return;
    };
    let syn_wait = last.ts.since(first.ts);
    let synack_retries = hs.synack_count.saturating_sub(1);
    let (delay, frames, answered) = if hs.syn_count > 1 && syn_wait >= MIN_RETRY_NS {
        let mut frames = vec![first.frame, last.frame];
        frames.extend(hs.synack.map(|m| m.frame));
        (syn_wait, frames, hs.synack.is_some())
    } else if synack_retries > 0 && (hs.ack.is_some() || conn.client.data_packets > 0) {
        // (A SYN-ACK retried to a client that never answered and never
        // retried its SYN kept no request waiting: a forged SYN, or a
        // capture cut short. A SYN flood's half-open connections look so.)
        // The server sent its SYN-ACK again (it, or the client's ACK, was
        // lost): setup waited from the first SYN-ACK to the last.
        let (Some(first), Some(last)) = (hs.synack, hs.last_synack) else {
            return;
        };
        let wait = last.ts.since(first.ts);
        if wait < MIN_RETRY_NS {
            return;
        }
        let mut frames = vec![first.frame, last.frame];
        frames.extend(hs.ack.map(|m| m.frame));
        (wait, frames, hs.ack.is_some())
    } else {
        return;
    };
    // Captured at the server, a SYN seen and not answered was ignored by the
    // server itself (full backlog, a local firewall); elsewhere the packets
    // cannot tell a SYN lost on the way from one ignored.
    let vantage = crate::text::vantage(conn).0;
    let at_server = vantage == "server";
    let culprit = if at_server && hs.syn_count > 1 {
        Blame::Side(Dir::ServerToClient)
    } else {
        Blame::Network(Dir::ClientToServer)
    };
    out.push(Occurrence {
        kind: Kind::SynRetransmit,
        culprit,
        delay_ns: delay,
        frames,
        notes: Vec::new(),
        ladder_from: Some(first.frame),
        ladder: None,
        span: None,
        detail: Detail::Setup {
            vantage,
            syn_retries: hs.syn_count.saturating_sub(1),
            synack_retries,
            answered,
        },
    });
}
