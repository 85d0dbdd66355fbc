//! Loss recovery & timers: how fast a lost segment is noticed and repaired,
//! and how long a dead peer or an unanswered SYN keeps a caller waiting.

use super::{Ctx, Group, Scope, Spec, Verdict};
use crate::units::duration;

/// Linux's minimum RTO, 200 ms (TCP_RTO_MIN; RFC 6298 (2.4) asks for 1 s).
const RTO_MIN_MS: u64 = 200;
/// The first SYN's timeout, 1 s (TCP_TIMEOUT_INIT, RFC 6298 (2.1)).
const SYN_RTO_MS: u64 = 1000;
/// Linux's maximum RTO, 120 s (TCP_RTO_MAX), unless tcp_rto_max_ms says otherwise.
const RTO_MAX_MS: u64 = 120_000;

pub(super) const SPECS: &[Spec] = &[
    Spec {
        name: "net.ipv4.tcp_sack",
        group: Group::Timers,
        scope: Scope::Namespace,
        meaning: "selective acknowledgements (RFC 2018): the receiver says exactly which segments arrived, so several losses are repaired in one round trip",
        absent: None,
        judge: tcp_sack,
    },
    Spec {
        name: "net.ipv4.tcp_timestamps",
        group: Group::Timers,
        scope: Scope::Namespace,
        meaning: "timestamp option (RFC 7323): round-trip samples on every ACK, PAWS protection against old duplicates",
        absent: None,
        judge: tcp_timestamps,
    },
    Spec {
        name: "net.ipv4.tcp_recovery",
        group: Group::Timers,
        scope: Scope::Namespace,
        meaning: "RACK loss detection (RFC 8985, bit 1): a segment is lost when a later one was delivered long enough ago",
        absent: None,
        judge: tcp_recovery,
    },
    Spec {
        name: "net.ipv4.tcp_rto_min_us",
        group: Group::Timers,
        scope: Scope::Namespace,
        meaning: "lowest retransmission timeout, µs (200 ms by default; a route's rto_min overrides it)",
        absent: Some("absent: not on this kernel (the minimum RTO is 200 ms, per route `rto_min`)"),
        judge: tcp_rto_min_us,
    },
    Spec {
        name: "net.ipv4.tcp_rto_max_ms",
        group: Group::Timers,
        scope: Scope::Namespace,
        meaning: "largest retransmission timeout, ms (120 s by default): the doubling of the timeout stops there",
        absent: Some("absent: not on this kernel (the maximum RTO is 120 s)"),
        judge: |_, _| Verdict::ok(),
    },
    Spec {
        name: "net.ipv4.tcp_retries2",
        group: Group::Timers,
        scope: Scope::Namespace,
        meaning: "retransmissions of unacknowledged data before the connection is given up (the timeout doubles each time)",
        absent: None,
        judge: tcp_retries2,
    },
    Spec {
        name: "net.ipv4.tcp_syn_retries",
        group: Group::Timers,
        scope: Scope::Namespace,
        meaning: "SYN retransmissions before connect() fails (after 1 s, then 2 s, 4 s…)",
        absent: None,
        judge: tcp_syn_retries,
    },
    Spec {
        name: "net.ipv4.tcp_synack_retries",
        group: Group::Timers,
        scope: Scope::Namespace,
        meaning: "SYN-ACK retransmissions for a handshake the client has not completed",
        absent: None,
        judge: tcp_synack_retries,
    },
    Spec {
        name: "net.ipv4.tcp_mtu_probing",
        group: Group::Timers,
        scope: Scope::Namespace,
        meaning: "packetization-layer path MTU discovery (RFC 4821): gets past a path that drops large packets without an ICMP error",
        absent: None,
        judge: tcp_mtu_probing,
    },
    Spec {
        name: "net.ipv4.tcp_keepalive_time",
        group: Group::Timers,
        scope: Scope::Namespace,
        meaning: "idle seconds before keep-alive probes start, on sockets that enable SO_KEEPALIVE",
        absent: None,
        judge: tcp_keepalive_time,
    },
    Spec {
        name: "net.ipv4.tcp_fin_timeout",
        group: Group::Timers,
        scope: Scope::Namespace,
        meaning: "seconds an orphaned connection waits in FIN_WAIT_2 for the peer's FIN",
        absent: None,
        judge: |_, _| Verdict::ok(),
    },
];

/// How long Linux retransmits before giving up after `retries` timeouts that
/// start at `rto_base` ms and double up to `rto_max` ms (tcp_model_timeout,
/// net/ipv4/tcp_timer.c: linear once the doubling reaches the maximum).
pub(crate) fn give_up_ms(retries: u32, rto_base: u64, rto_max: u64) -> u64 {
    let rto_base = rto_base.max(1);
    // Capped so that 2 << thresh cannot overflow on absurd inputs.
    let thresh = (rto_max / rto_base).max(1).ilog2().min(40);
    if retries <= thresh {
        ((2u64 << retries) - 1).saturating_mul(rto_base)
    } else {
        ((2u64 << thresh) - 1)
            .saturating_mul(rto_base)
            .saturating_add(u64::from(retries - thresh).saturating_mul(rto_max))
    }
}

fn rto_max_ms(ctx: &Ctx<'_>) -> u64 {
    ctx.int("net.ipv4.tcp_rto_max_ms")
        .filter(|&m| m > 0)
        .map_or(RTO_MAX_MS, |m| m as u64)
}

fn tcp_sack(_: &Ctx<'_>, v: &str) -> Verdict {
    if super::int(v) != Some(0) {
        return Verdict::ok();
    }
    Verdict::warn(
        "SACK is off: the sender learns of one lost segment per round trip (NewReno, RFC 6582), so a burst of losses costs a round trip each or ends in a retransmission timeout; RACK and tail loss probes need SACK too.",
        Some("1".into()),
    )
}

fn tcp_timestamps(_: &Ctx<'_>, v: &str) -> Verdict {
    match super::int(v) {
        Some(0) => Verdict::warn(
            "timestamps are off: no round-trip sample from ACKs of retransmitted data (Karn's rule), the receiver measures the round trip only once per window (its buffer autotuning reacts slower), PAWS (RFC 7323 §5) cannot reject old duplicates once sequence numbers wrap (every 34 s at 1 Gbit/s), and tcp_tw_reuse has nothing to go on.",
            Some("1".into()),
        ),
        Some(2) => Verdict::ok_because("on, without a random offset per connection"),
        _ => Verdict::ok(),
    }
}

fn tcp_recovery(_: &Ctx<'_>, v: &str) -> Verdict {
    match super::int(v) {
        Some(n) if n & 1 == 0 => Verdict::note(
            "RACK is off: losses are found by counting duplicate ACKs only, so a lost segment near the end of a burst waits for a timeout.",
            Some((n | 1).to_string()),
        ),
        _ => Verdict::ok(),
    }
}

fn tcp_rto_min_us(_: &Ctx<'_>, v: &str) -> Verdict {
    let Some(us) = super::int(v) else {
        return Verdict::ok();
    };
    let ms = us as f64 / 1000.0;
    if us > (RTO_MIN_MS * 1000) as i64 {
        return Verdict::warn(
            format!(
                "raised: every retransmission timeout waits at least {} (default 200 ms), so a lost tail or a lost retransmission stalls the connection that long.",
                duration(ms / 1000.0)
            ),
            Some((RTO_MIN_MS * 1000).to_string()),
        );
    }
    if us < (RTO_MIN_MS * 1000) as i64 {
        return Verdict::note(
            format!(
                "lowered to {}: faster recovery from lost tails, but spurious retransmissions when the round trip jumps by more than that.",
                duration(ms / 1000.0)
            ),
            None,
        );
    }
    Verdict::ok()
}

/// A retry count (0–255), and how long its retries last in seconds: the
/// first after `first_rto_ms`, each wait doubled up to the RTO ceiling.
fn retries(ctx: &Ctx<'_>, v: &str, first_rto_ms: u64) -> Option<(i64, f64)> {
    let n = super::int(v).filter(|&n| (0..=255).contains(&n))?;
    let ms = give_up_ms(n as u32, first_rto_ms, rto_max_ms(ctx));
    Some((n, ms as f64 / 1000.0))
}

fn tcp_retries2(ctx: &Ctx<'_>, v: &str) -> Verdict {
    let Some((n, t)) = retries(ctx, v, RTO_MIN_MS) else {
        return Verdict::ok();
    };
    let text = format!(
        "a connection whose peer stops answering is given up after ≈ {} ({n} retransmissions, from a 200 ms timeout; longer when the RTO is higher)",
        duration(t)
    );
    if n < 8 {
        return Verdict::note(
            format!("{text}: a network outage that long resets connections."),
            Some("15".into()),
        );
    }
    Verdict::ok_because(text)
}

fn tcp_syn_retries(ctx: &Ctx<'_>, v: &str) -> Verdict {
    let Some((n, t)) = retries(ctx, v, SYN_RTO_MS) else {
        return Verdict::ok();
    };
    let text = format!(
        "connect() to a host that does not answer fails after ≈ {}; each lost SYN costs 1 s, then 2 s, 4 s…",
        duration(t)
    );
    if n < 2 {
        return Verdict::note(
            format!("{text}: one or two lost packets fail the connection."),
            Some("6".into()),
        );
    }
    Verdict::ok_because(text)
}

fn tcp_synack_retries(ctx: &Ctx<'_>, v: &str) -> Verdict {
    let Some((_, t)) = retries(ctx, v, SYN_RTO_MS) else {
        return Verdict::ok();
    };
    Verdict::ok_because(format!(
        "a half-open connection is kept ≈ {} while its SYN-ACK is retried",
        duration(t)
    ))
}

fn tcp_mtu_probing(_: &Ctx<'_>, v: &str) -> Verdict {
    match super::int(v) {
        Some(0) => Verdict::ok_because(
            "off (default): on a path that drops full-size packets and filters the ICMP error (an MTU black hole) full-size segments are lost until the connection times out; 1 probes smaller sizes once that is suspected",
        ),
        Some(2) => Verdict::ok_because("always on: connections start at tcp_base_mss and probe upward"),
        _ => Verdict::ok(),
    }
}

fn tcp_keepalive_time(_: &Ctx<'_>, v: &str) -> Verdict {
    let Some(s) = super::int(v).filter(|&s| s > 0) else {
        return Verdict::ok();
    };
    let mut text = format!("probes start after {} idle", duration(s as f64));
    if s > 1800 {
        text.push_str(
            "; NAT and firewalls often forget idle flows after 5–30 min, so the first request after a long pause may stall or be reset: applications keep pooled connections alive with TCP_KEEPIDLE below that",
        );
    }
    Verdict::ok_because(text)
}

#[cfg(test)]
mod tests {
    use super::super::tests::one;
    use super::*;
    use crate::Severity;

    #[test]
    fn give_up_times_match_linux() {
        // tcp_retries2 = 15: 924.6 s (Documentation/networking/ip-sysctl.rst).
        assert_eq!(give_up_ms(15, 200, 120_000), 924_600);
        // tcp_syn_retries = 6: 127 s.
        assert_eq!(give_up_ms(6, 1000, 120_000), 127_000);
        assert_eq!(give_up_ms(0, 200, 120_000), 200);
        assert_eq!(give_up_ms(255, 1, 1), 256);
        assert!(give_up_ms(255, 1, u64::MAX) > 0);
    }

    #[test]
    fn sack_off_warns() {
        let s = one([("net.ipv4.tcp_sack", "0")], "net.ipv4.tcp_sack");
        assert_eq!(s.severity, Severity::Warn);
        assert!(s
            .judgement
            .expect("j")
            .contains("one lost segment per round trip"));
        assert_eq!(s.fix.as_deref(), Some("sysctl -w net.ipv4.tcp_sack=1"));
        assert_eq!(
            one([("net.ipv4.tcp_sack", "1")], "net.ipv4.tcp_sack").severity,
            Severity::Ok
        );
    }

    #[test]
    fn timestamps_off_warns() {
        let s = one(
            [("net.ipv4.tcp_timestamps", "0")],
            "net.ipv4.tcp_timestamps",
        );
        assert_eq!(s.severity, Severity::Warn);
        assert!(s.judgement.expect("j").contains("PAWS"));
        let two = one(
            [("net.ipv4.tcp_timestamps", "2")],
            "net.ipv4.tcp_timestamps",
        );
        assert_eq!(two.severity, Severity::Ok);
    }

    #[test]
    fn rto_min_raised_warns_lowered_notes() {
        let s = one(
            [("net.ipv4.tcp_rto_min_us", "1000000")],
            "net.ipv4.tcp_rto_min_us",
        );
        assert_eq!(s.severity, Severity::Warn);
        assert!(s.judgement.expect("j").contains("at least 1 s"));
        let s = one(
            [("net.ipv4.tcp_rto_min_us", "50000")],
            "net.ipv4.tcp_rto_min_us",
        );
        assert_eq!(s.severity, Severity::Note);
        assert!(s.judgement.expect("j").contains("50 ms"));
        let s = one(
            [("net.ipv4.tcp_rto_min_us", "200000")],
            "net.ipv4.tcp_rto_min_us",
        );
        assert_eq!(s.severity, Severity::Ok);
    }

    #[test]
    fn retries_in_seconds() {
        let s = one([("net.ipv4.tcp_retries2", "15")], "net.ipv4.tcp_retries2");
        assert_eq!(s.severity, Severity::Ok);
        assert!(s.judgement.expect("j").contains("≈ 15 min 25 s"));
        let s = one([("net.ipv4.tcp_retries2", "5")], "net.ipv4.tcp_retries2");
        assert_eq!(s.severity, Severity::Note);
        assert!(s.judgement.expect("j").contains("≈ 12.6 s"));
        let s = one(
            [("net.ipv4.tcp_syn_retries", "6")],
            "net.ipv4.tcp_syn_retries",
        );
        assert!(s.judgement.expect("j").contains("≈ 2 min 7 s"));
        // tcp_rto_max_ms (Linux 6.15+) shortens the tail.
        let s = one(
            [
                ("net.ipv4.tcp_retries2", "15"),
                ("net.ipv4.tcp_rto_max_ms", "60000"),
            ],
            "net.ipv4.tcp_retries2",
        );
        assert!(s.judgement.expect("j").contains("≈ 8 min 42 s"));
    }

    #[test]
    fn rack_off_is_a_note() {
        let s = one([("net.ipv4.tcp_recovery", "0")], "net.ipv4.tcp_recovery");
        assert_eq!(s.severity, Severity::Note);
        assert_eq!(s.fix.as_deref(), Some("sysctl -w net.ipv4.tcp_recovery=1"));
    }
}
