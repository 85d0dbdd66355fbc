//! Connection setup that waited for a SYN or SYN-ACK to be sent again.
//!
//! A lost SYN is retried after the initial retransmission timeout: 1 s on
//! Linux and in RFC 6298 (2.1), 3 s on older stacks (RFC 1122), then doubling.
//! A SYN-ACK retried by the server means its SYN-ACK (or the client's ACK) was
//! lost. The time lost is from the first SYN to the SYN that was answered.

use tcpdoctor_flow::{Connection, Dir};

use crate::rule::{self, Blame, Detail, Kind, Occurrence};
use crate::text::{Said, Words};
use serde_json::json;

/// A retry earlier than this after the first SYN is a duplicate, not a timeout.
const MIN_RETRY_NS: i64 = 100_000_000;

pub fn on_close(conn: &Connection, out: &mut Vec<Occurrence>) {
    let hs = &conn.handshake;
    let (Some(first), Some(last)) = (hs.first_syn, hs.syn) else {
        return;
    };
    let syn_wait = last.ts.since(first.ts);
    let synack_retries = hs.synack_count.saturating_sub(1);
    if hs.syn_count > 1 && syn_wait >= MIN_RETRY_NS && hs.synack.is_none() {
        // Never answered: no SYN-ACK, no RST. Not a delay but a failure.
        if conn.server.packets == 0 && conn.server.rst.is_none() {
            out.push(unanswered(conn, first, last));
        }
        return;
    }
    // A connection that never carried a request (a browser's pre-connect,
    // a health check that only connects) kept nobody waiting for its setup.
    if conn.client.data_packets == 0 {
        return;
    }
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
        // Up to the SYN-ACK the client's ACK answered: one re-sent after
        // that ACK (the server ignoring it) is the listen queue's.
        let (Some(first), Some(last)) = (hs.synack, hs.synack_before_ack.or(hs.last_synack)) else {
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
        detail: Detail::Setup(Setup {
            vantage,
            syn_retries: hs.syn_count.saturating_sub(1),
            synack_retries,
            answered,
        }),
    });
}

/// A connection whose SYNs were never answered: the client retried and got
/// nothing back (no SYN-ACK, no RST) for as long as the capture shows.
fn unanswered(
    conn: &Connection,
    first: tcpdoctor_flow::Mark,
    last: tcpdoctor_flow::Mark,
) -> Occurrence {
    let hs = &conn.handshake;
    Occurrence {
        kind: Kind::ConnectionUnanswered,
        culprit: Blame::Network(Dir::ClientToServer),
        delay_ns: last.ts.since(first.ts).max(0),
        frames: vec![first.frame, last.frame],
        notes: vec![
            (first.frame, "SYN: the client asks to connect".to_string()),
            (
                last.frame,
                format!("SYN sent again ({} in all), still no answer", hs.syn_count),
            ),
        ],
        ladder_from: Some(first.frame),
        ladder: None,
        span: None,
        detail: Detail::Unanswered(Unanswered {
            syns: hs.syn_count,
            waited_ns: last.ts.since(first.ts).max(0),
        }),
    }
}

/// What one unanswered connection measured.
#[derive(Debug, Clone)]
pub struct Unanswered {
    pub syns: u32,
    pub waited_ns: i64,
}

impl rule::Fold for Unanswered {
    fn fold(self, a: &mut crate::Aggregate) {
        a.count += 1;
        a.stalls += u64::from(self.syns);
        a.transfer_ns = a.transfer_ns.max(self.waited_ns);
    }
}

/// The words of a `connection_unanswered` finding.
pub(crate) fn unanswered_words(s: &Said<'_>) -> Words {
    let (a, ep) = (s.a, s.ep);
    let longest = crate::text::ms(a.transfer_ns) / 1e3;
    let explanation = format!(
        "{n} connection attempt(s) to {ep} were never answered: the client sent its SYN {syns} \
         times in all and got neither a SYN-ACK nor an RST back, for up to {longest:.1} s in this \
         capture. The request{s} never left the client. Nothing at that address answers: the host \
         is down or unreachable, the address is wrong (DNS, a stale configuration), or a firewall \
         or security group silently drops the SYNs (a DROP rule, unlike a REJECT, sends nothing \
         back). A Linux client keeps retrying for about 127 s (6 retries, \
         `net.ipv4.tcp_syn_retries`) unless its own connect timeout gives up first.",
        n = a.count,
        syns = a.stalls,
        s = if a.count == 1 { "" } else { "s" },
    );
    let port = ep.rsplit(':').next().unwrap_or("PORT");
    let fix = format!(
        "Check that {ep} is the right address and that the host is up (`tcpdoctor ping {ep}` \
         answers with an RST or a SYN-ACK if anything is there); look for rules that drop SYNs to \
         port {port} on the way and on the host (`iptables -S`, `nft list ruleset`, cloud \
         security groups). Clients should use a connect timeout of a few seconds and fail over \
         rather than wait out the SYN retries."
    );
    let details = json!({"requests_lost": a.count, "syns": a.stalls,
                         "longest_wait_ms": crate::text::ms(a.transfer_ns)});
    (explanation, fix, details)
}

/// The verdict's sentence of a `connection_unanswered` finding.
pub(crate) fn unanswered_cause(c: &rule::Cause<'_>) -> String {
    let n = c.num("requests_lost").unwrap_or(0.0) as u64;
    format!(
        "{} never answers: {n} connection attempt(s) got no SYN-ACK and no RST — host down, wrong \
         address, or SYNs dropped by a firewall (connection_unanswered)",
        c.ep
    )
}

/// A failed connection is reported whatever time it took, before the delays.
pub(crate) fn unanswered_standing(_: &crate::Aggregate) -> rule::Standing {
    rule::Standing::Major
}

/// The words of a `syn_retransmit` finding: why, the fix, its details.
pub(crate) fn words(s: &Said<'_>) -> Words {
    let (a, typical, ep) = (s.a, s.typical, s.ep);
    let Detail::Setup(Setup { vantage, .. }) = &a.first else {
        return crate::text::no_words();
    };
    let where_ = match *vantage {
        "server" => "This capture was taken at the server, which saw the SYN and did not answer it: \
                     the server (its listen backlog, a local firewall) dropped it."
            .to_string(),
        "client" => "This capture was taken at the client: it cannot tell a SYN lost on the way from \
                     one the server ignored; a capture at the server can."
            .to_string(),
        "between" => "This capture was taken between the endpoints: a SYN seen here and not answered \
                      was lost beyond this point or ignored by the server."
            .to_string(),
        _ => "This connection's own packets cannot tell where the capture was taken (nothing from \
              the server to compare with, or TTLs at their initial values and endpoints microseconds \
              apart), so neither can they whether the path lost the SYN or the server ignored it. If \
              the capture was taken at the server (the vantage line tells it from the capture's other \
              connections, when they can), the server ignored it."
            .to_string(),
    };
    let explanation = format!(
        "Connection setup to {ep} waited for a retransmitted SYN or SYN-ACK {occ} time(s), {typical:.0} ms \
         each ({retries} retries in all): the first SYN or its SYN-ACK was lost or not answered, and the \
         client's initial retransmission timeout (1 s on Linux, RFC 6298 2.1; 3 s on older stacks) had to \
         expire. {unanswered}{where_}",
        occ = a.occurrences,
        retries = a.count,
        unanswered = if a.flagged > 0 {
            format!("{} connection attempt(s) were never answered. ", a.flagged)
        } else {
            String::new()
        },
    );
    let fix = format!(
        "Find where SYNs to {ep} are dropped: the server's listen backlog (`ss -lnt` Recv-Q against \
         somaxconn, `nstat -az TcpExtListenDrops TcpExtListenOverflows`), SYN cookies or rate limits \
         (iptables/nftables, `net.ipv4.tcp_max_syn_backlog`), or loss on the path (capture at both ends). \
         Clients that cannot wait 1 s can connect in parallel or keep connections alive."
    );
    let details = json!({"retries": a.count, "unanswered": a.flagged});
    (explanation, fix, details)
}

/// What one occurrence measured.
#[derive(Debug, Clone)]
pub struct Setup {
    /// Where the capture was taken, as far as the packets tell.
    pub vantage: &'static str,
    pub syn_retries: u32,
    pub synack_retries: u32,
    pub answered: bool,
}

impl rule::Fold for Setup {
    fn fold(self, a: &mut crate::Aggregate) {
        a.count += u64::from(self.syn_retries + self.synack_retries);
        a.flagged += u64::from(!self.answered);
    }
}

/// The setup rule keeps nothing per connection: the handshake is the connection's.
#[derive(Debug, Default)]
pub struct SetupState;

impl rule::Rule for SetupState {
    fn on_close(&mut self, cx: &mut rule::CloseCx<'_>, conn: &Connection) {
        on_close(conn, cx.out);
    }

    fn on_close_light(cx: &mut rule::CloseCx<'_>, conn: &Connection) {
        on_close(conn, cx.out);
    }
}

/// The verdict's sentence of a `syn_retransmit` finding.
pub(crate) fn cause(c: &rule::Cause<'_>) -> String {
    format!(
        "connection setup waits ~{} for a SYN or SYN-ACK retry",
        c.typ
    )
}
