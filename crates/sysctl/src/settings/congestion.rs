//! Congestion: how a sender sizes its window to the path, and what the
//! queues on the way do to latency.

use super::{Ctx, Group, Scope, Spec, Verdict};

pub(super) const SPECS: &[Spec] = &[
    Spec {
        name: "net.ipv4.tcp_congestion_control",
        group: Group::Congestion,
        scope: Scope::Namespace,
        meaning: "congestion control of new connections (an application may pick another with TCP_CONGESTION, a route with congctl)",
        absent: None,
        judge: tcp_congestion_control,
    },
    Spec {
        name: "net.ipv4.tcp_available_congestion_control",
        group: Group::Congestion,
        scope: Scope::Namespace,
        meaning: "congestion controls loaded in the kernel",
        absent: None,
        judge: |_, _| Verdict::ok(),
    },
    Spec {
        name: "net.ipv4.tcp_allowed_congestion_control",
        group: Group::Congestion,
        scope: Scope::Host,
        meaning: "congestion controls unprivileged applications (and other namespaces) may choose",
        absent: None,
        judge: |_, _| Verdict::ok(),
    },
    Spec {
        name: "net.ipv4.tcp_slow_start_after_idle",
        group: Group::Congestion,
        scope: Scope::Namespace,
        meaning: "after idling longer than its RTO, a connection restarts from the initial window (RFC 5681 §4.1)",
        absent: None,
        judge: tcp_slow_start_after_idle,
    },
    Spec {
        name: "net.ipv4.tcp_ecn",
        group: Group::Congestion,
        scope: Scope::Namespace,
        meaning: "Explicit Congestion Notification (RFC 3168): routers mark packets instead of dropping them",
        absent: None,
        judge: tcp_ecn,
    },
    Spec {
        name: "net.ipv4.tcp_no_metrics_save",
        group: Group::Congestion,
        scope: Scope::Namespace,
        meaning: "0: a closing connection's ssthresh and RTT are remembered per destination and seed the next one",
        absent: None,
        judge: tcp_no_metrics_save,
    },
    Spec {
        name: "net.core.default_qdisc",
        group: Group::Congestion,
        scope: Scope::Host,
        meaning: "queueing discipline new network interfaces get",
        absent: None,
        judge: default_qdisc,
    },
];

fn tcp_congestion_control(ctx: &Ctx<'_>, v: &str) -> Verdict {
    if v != "reno" {
        return Verdict::ok();
    }
    // Suggest what this namespace may actually set: a new namespace may
    // choose only among the allowed ones.
    let offered = |name: &str| {
        ctx.raw(name)
            .map(|l| l.split_whitespace().map(str::to_string).collect::<Vec<_>>())
    };
    let pool = offered("net.ipv4.tcp_allowed_congestion_control")
        .or_else(|| offered("net.ipv4.tcp_available_congestion_control"))
        .unwrap_or_default();
    let better = ["cubic", "bbr"]
        .into_iter()
        .find(|c| pool.iter().any(|p| p == c))
        .unwrap_or("cubic");
    Verdict::note(
        "reno halves its window on every loss and regains one segment per round trip: on a long fat path a single loss costs many round trips at reduced speed.",
        Some(better.into()),
    )
}

fn tcp_slow_start_after_idle(ctx: &Ctx<'_>, v: &str) -> Verdict {
    if super::int(v) != Some(1) {
        return Verdict::ok();
    }
    // Linux skips the restart for congestion controls with their own
    // cong_control (tcp_slow_start_after_idle_check, net/ipv4/tcp_output.c): bbr.
    if ctx.congestion_control() == Some("bbr") {
        return Verdict::ok_because(
            "on, but bbr (the congestion control here) does not restart after idle",
        );
    }
    Verdict::note(
        "a keep-alive connection that idles longer than its RTO (200 ms or more) sends its next response from the initial window again: a response larger than ~14 KB after a pause takes extra round trips.",
        Some("0".into()),
    )
}

fn tcp_ecn(_: &Ctx<'_>, v: &str) -> Verdict {
    match super::int(v) {
        Some(0) => Verdict::ok_because("off"),
        Some(1) => {
            Verdict::ok_because("requested on outgoing connections and accepted on incoming ones")
        }
        Some(2) => Verdict::ok_because("accepted when the peer asks (default), not requested"),
        _ => Verdict::ok(),
    }
}

fn tcp_no_metrics_save(_: &Ctx<'_>, v: &str) -> Verdict {
    if super::int(v) == Some(0) {
        return Verdict::ok_because(
            "metrics are saved (default): after a lossy period, new connections to the same host may leave slow start early; `ip tcp_metrics show` lists them, `ip tcp_metrics flush` forgets them",
        );
    }
    Verdict::ok()
}

fn default_qdisc(_: &Ctx<'_>, v: &str) -> Verdict {
    match v {
        "pfifo_fast" | "pfifo" | "bfifo" => Verdict::note(
            format!("{v} is a plain FIFO without active queue management: under load, a device's queue (txqueuelen, 1000 packets by default) fills and every packet waits behind it; fq_codel keeps the queue short, fq also paces."),
            Some("fq_codel".into()),
        ),
        _ => Verdict::ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::one;
    use crate::Severity;

    #[test]
    fn slow_start_after_idle_matters_except_with_bbr() {
        let reno = one(
            [
                ("net.ipv4.tcp_slow_start_after_idle", "1"),
                ("net.ipv4.tcp_congestion_control", "reno"),
            ],
            "net.ipv4.tcp_slow_start_after_idle",
        );
        assert_eq!(reno.severity, Severity::Note);
        assert!(reno.judgement.expect("j").contains("initial window"));
        assert_eq!(
            reno.fix.as_deref(),
            Some("sysctl -w net.ipv4.tcp_slow_start_after_idle=0")
        );
        let bbr = one(
            [
                ("net.ipv4.tcp_slow_start_after_idle", "1"),
                ("net.ipv4.tcp_congestion_control", "bbr"),
            ],
            "net.ipv4.tcp_slow_start_after_idle",
        );
        assert_eq!(bbr.severity, Severity::Ok);
        let off = one(
            [("net.ipv4.tcp_slow_start_after_idle", "0")],
            "net.ipv4.tcp_slow_start_after_idle",
        );
        assert_eq!(off.severity, Severity::Ok);
    }

    #[test]
    fn reno_is_noted_with_an_allowed_alternative() {
        let s = one(
            [
                ("net.ipv4.tcp_congestion_control", "reno"),
                ("net.ipv4.tcp_allowed_congestion_control", "reno bbr"),
                (
                    "net.ipv4.tcp_available_congestion_control",
                    "reno bbr cubic",
                ),
            ],
            "net.ipv4.tcp_congestion_control",
        );
        assert_eq!(s.severity, Severity::Note);
        assert_eq!(
            s.fix.as_deref(),
            Some("sysctl -w net.ipv4.tcp_congestion_control=bbr")
        );
        let c = one(
            [("net.ipv4.tcp_congestion_control", "cubic")],
            "net.ipv4.tcp_congestion_control",
        );
        assert_eq!(c.severity, Severity::Ok);
    }

    #[test]
    fn fifo_default_qdisc_is_a_note() {
        let s = one(
            [("net.core.default_qdisc", "pfifo_fast")],
            "net.core.default_qdisc",
        );
        assert_eq!(s.severity, Severity::Note);
        assert_eq!(
            one(
                [("net.core.default_qdisc", "fq_codel")],
                "net.core.default_qdisc"
            )
            .severity,
            Severity::Ok
        );
    }
}
