//! Queues & backlog: where connections and packets wait before anyone looks
//! at them. A full listen queue drops handshakes, and the client's retry
//! comes 1 s later (the DESIGN's `listen_queue_overflow` and `syn_retransmit`).

use super::{ints, Ctx, Group, Scope, Spec, Verdict};

/// Linux's default somaxconn since 5.4.
const SUGGESTED_BACKLOG: i64 = 4096;

pub(super) const SPECS: &[Spec] = &[
    Spec {
        name: "net.core.somaxconn",
        group: Group::Queues,
        scope: Scope::Namespace,
        meaning: "cap on every listen() backlog: connections established but not yet accept()ed",
        absent: None,
        judge: somaxconn,
    },
    Spec {
        name: "net.ipv4.tcp_max_syn_backlog",
        group: Group::Queues,
        scope: Scope::Namespace,
        meaning: "half-open connections (SYN received, handshake not complete) kept per listener",
        absent: None,
        judge: tcp_max_syn_backlog,
    },
    Spec {
        name: "net.ipv4.tcp_syncookies",
        group: Group::Queues,
        scope: Scope::Namespace,
        meaning: "when the SYN queue is full, answer with a SYN cookie instead of dropping the SYN",
        absent: None,
        judge: tcp_syncookies,
    },
    Spec {
        name: "net.ipv4.tcp_abort_on_overflow",
        group: Group::Queues,
        scope: Scope::Namespace,
        meaning: "a full accept queue: 0 ignores the client's final ACK (it retries), 1 resets the connection",
        absent: None,
        judge: tcp_abort_on_overflow,
    },
    Spec {
        name: "net.core.netdev_max_backlog",
        group: Group::Queues,
        scope: Scope::Host,
        meaning: "received packets queued per CPU between the driver and TCP/IP; beyond it they are dropped",
        absent: None,
        judge: netdev_max_backlog,
    },
    Spec {
        name: "net.ipv4.ip_local_port_range",
        group: Group::Queues,
        scope: Scope::Namespace,
        meaning: "source ports for outgoing connections",
        absent: None,
        judge: ip_local_port_range,
    },
    Spec {
        name: "net.ipv4.tcp_tw_reuse",
        group: Group::Queues,
        scope: Scope::Namespace,
        meaning: "reuse a port in TIME_WAIT for a new outgoing connection when timestamps show it is safe (2: loopback only)",
        absent: None,
        judge: tcp_tw_reuse,
    },
];

fn syncookies_off(ctx: &Ctx<'_>) -> bool {
    ctx.int("net.ipv4.tcp_syncookies") == Some(0)
}

fn somaxconn(_: &Ctx<'_>, v: &str) -> Verdict {
    let Some(n) = super::int(v) else {
        return Verdict::ok();
    };
    if n < 1024 {
        return Verdict::warn(
            format!(
                "no listener can queue more than {n} connections waiting for accept(): in a burst the kernel drops the client's handshake and the client retries its SYN after 1 s, then 3 s (listen(2) backlogs above {n} are cut to {n})."
            ),
            Some(SUGGESTED_BACKLOG.to_string()),
        );
    }
    Verdict::ok_because(format!("listen() backlogs up to {n}"))
}

fn tcp_max_syn_backlog(ctx: &Ctx<'_>, v: &str) -> Verdict {
    let Some(n) = super::int(v) else {
        return Verdict::ok();
    };
    if n >= 256 {
        return Verdict::ok();
    }
    if syncookies_off(ctx) {
        return Verdict::warn(
            format!(
                "only {n} half-open connections per listener and syncookies are off: beyond that SYNs are dropped and clients wait 1 s, 3 s… to retry."
            ),
            Some(SUGGESTED_BACKLOG.to_string()),
        );
    }
    Verdict::note(
        format!(
            "only {n} half-open connections per listener: beyond that clients get SYN cookies, which lose TCP options unless timestamps are on."
        ),
        Some(SUGGESTED_BACKLOG.to_string()),
    )
}

fn tcp_syncookies(_: &Ctx<'_>, v: &str) -> Verdict {
    match super::int(v) {
        Some(0) => Verdict::warn(
            "syncookies are off: once the SYN queue is full (a flood, or a burst of clients) new SYNs are dropped and clients wait 1 s, 3 s… to retry.",
            Some("1".into()),
        ),
        Some(2) => Verdict::note(
            "SYN cookies for every connection, even with room in the queue: options such as window scaling and SACK survive only in the timestamp.",
            Some("1".into()),
        ),
        _ => Verdict::ok(),
    }
}

fn tcp_abort_on_overflow(_: &Ctx<'_>, v: &str) -> Verdict {
    if super::int(v) == Some(1) {
        return Verdict::note(
            "a client that completes its handshake while the accept queue is full gets a reset instead of a retry: a short burst turns into errors.",
            Some("0".into()),
        );
    }
    Verdict::ok()
}

fn netdev_max_backlog(_: &Ctx<'_>, v: &str) -> Verdict {
    match super::int(v) {
        Some(n) if n < 1000 => Verdict::note(
            format!("only {n} packets per CPU: bursts above it are dropped before TCP sees them (see /proc/net/softnet_stat, 2nd column)."),
            Some("1000".into()),
        ),
        _ => Verdict::ok(),
    }
}

fn ip_local_port_range(_: &Ctx<'_>, v: &str) -> Verdict {
    let Some([lo, hi]) = ints(v)
        .as_deref()
        .and_then(|x| <[i64; 2]>::try_from(x).ok())
    else {
        return Verdict::ok();
    };
    let ports = (hi - lo + 1).max(0);
    // A closed connection holds its port in TIME_WAIT for 60 s (TCP_TIMEWAIT_LEN).
    let text = format!(
        "{ports} ports: one client can open about {} new connections per second to the same server address and port while TIME_WAIT holds each port 60 s",
        ports / 60
    );
    if ports < 10_000 {
        return Verdict::warn(
            format!("only {text}; beyond that connect() fails with EADDRNOTAVAIL or waits."),
            Some("32768 60999".into()),
        );
    }
    Verdict::ok_because(text)
}

fn tcp_tw_reuse(ctx: &Ctx<'_>, v: &str) -> Verdict {
    match super::int(v) {
        Some(0) => Verdict::note(
            "off: a client that opens many short connections to one server waits for TIME_WAIT (60 s) to free each port.",
            Some("1".into()),
        ),
        Some(1) if ctx.int("net.ipv4.tcp_timestamps") == Some(0) => Verdict::note(
            "on, but without effect: reuse needs timestamps and tcp_timestamps is 0.",
            None,
        ),
        _ => Verdict::ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::one;
    use crate::Severity;

    #[test]
    fn small_somaxconn_warns() {
        let s = one([("net.core.somaxconn", "64")], "net.core.somaxconn");
        assert_eq!(s.severity, Severity::Warn);
        assert!(s.judgement.expect("j").contains("more than 64"));
        assert_eq!(s.fix.as_deref(), Some("sysctl -w net.core.somaxconn=4096"));
        assert_eq!(
            one([("net.core.somaxconn", "4096")], "net.core.somaxconn").severity,
            Severity::Ok
        );
    }

    #[test]
    fn syn_backlog_depends_on_syncookies() {
        let off = one(
            [
                ("net.ipv4.tcp_max_syn_backlog", "64"),
                ("net.ipv4.tcp_syncookies", "0"),
            ],
            "net.ipv4.tcp_max_syn_backlog",
        );
        assert_eq!(off.severity, Severity::Warn);
        let on = one(
            [
                ("net.ipv4.tcp_max_syn_backlog", "64"),
                ("net.ipv4.tcp_syncookies", "1"),
            ],
            "net.ipv4.tcp_max_syn_backlog",
        );
        assert_eq!(on.severity, Severity::Note);
    }

    #[test]
    fn syncookies_off_warns() {
        let s = one(
            [("net.ipv4.tcp_syncookies", "0")],
            "net.ipv4.tcp_syncookies",
        );
        assert_eq!(s.severity, Severity::Warn);
        assert_eq!(
            s.fix.as_deref(),
            Some("sysctl -w net.ipv4.tcp_syncookies=1")
        );
    }

    #[test]
    fn narrow_port_range_warns() {
        let s = one(
            [("net.ipv4.ip_local_port_range", "40000\t40999")],
            "net.ipv4.ip_local_port_range",
        );
        assert_eq!(s.severity, Severity::Warn);
        assert!(s.judgement.expect("j").contains("1000 ports"));
        assert_eq!(
            s.fix.as_deref(),
            Some("sysctl -w net.ipv4.ip_local_port_range='32768 60999'")
        );
        let d = one(
            [("net.ipv4.ip_local_port_range", "32768 60999")],
            "net.ipv4.ip_local_port_range",
        );
        assert_eq!(d.severity, Severity::Ok);
        assert!(d
            .judgement
            .expect("j")
            .contains("470 new connections per second"));
    }

    #[test]
    fn tw_reuse_without_timestamps() {
        let s = one(
            [
                ("net.ipv4.tcp_tw_reuse", "1"),
                ("net.ipv4.tcp_timestamps", "0"),
            ],
            "net.ipv4.tcp_tw_reuse",
        );
        assert_eq!(s.severity, Severity::Note);
        assert_eq!(
            one([("net.ipv4.tcp_tw_reuse", "2")], "net.ipv4.tcp_tw_reuse").severity,
            Severity::Ok
        );
    }
}
