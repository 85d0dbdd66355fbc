//! Buffers & windows: how much a connection may have in flight. Throughput is
//! at most window / RTT, and the window is a share of the socket buffer
//! (see [`crate::window`]); the seed case (an upload at 1–2 MSS per round
//! trip) ended here: tcp_rmem, rmem_max, tcp_adv_win_scale and a listener's
//! SO_RCVBUF.

use super::{ints, Ctx, Group, Scope, Spec, Verdict};
use crate::units::bytes;
use crate::window::{self, at_rtts, LONG_FAT_WINDOW, UNSCALED_MAX};

/// Buffer sizes suggested by the fixes: 16 MB allows an 8 MB window, 1.3 Gbit/s at 50 ms.
const SUGGESTED_MAX: i64 = 16 << 20;
/// Linux's own starting receive buffer (tcp_rmem[1]) since 4.20.
const SUGGESTED_RMEM_START: i64 = 131_072;

pub(super) const SPECS: &[Spec] = &[
    Spec {
        name: "net.ipv4.tcp_rmem",
        group: Group::Buffers,
        scope: Scope::Namespace,
        meaning: "TCP receive buffer per socket: min, start, max bytes; autotuning grows it up to max, and a share of it is the window advertised",
        absent: None,
        judge: tcp_rmem,
    },
    Spec {
        name: "net.core.rmem_max",
        group: Group::Buffers,
        scope: Scope::Host,
        meaning: "largest SO_RCVBUF an application may set; a socket that sets SO_RCVBUF is no longer autotuned",
        absent: None,
        judge: rmem_max,
    },
    Spec {
        name: "net.core.rmem_default",
        group: Group::Buffers,
        scope: Scope::Host,
        meaning: "starting receive buffer of non-TCP sockets (UDP, raw); TCP starts from tcp_rmem instead",
        absent: None,
        judge: |_, _| Verdict::ok(),
    },
    Spec {
        name: "net.ipv4.tcp_adv_win_scale",
        group: Group::Buffers,
        scope: Scope::Namespace,
        meaning: "share of the receive buffer advertised as window, the rest kept for overhead (ignored since Linux 6.6)",
        absent: None,
        judge: tcp_adv_win_scale,
    },
    Spec {
        name: "net.ipv4.tcp_moderate_rcvbuf",
        group: Group::Buffers,
        scope: Scope::Namespace,
        meaning: "receive-buffer autotuning: grows each connection's buffer toward tcp_rmem max as the path needs",
        absent: None,
        judge: tcp_moderate_rcvbuf,
    },
    Spec {
        name: "net.ipv4.tcp_window_scaling",
        group: Group::Buffers,
        scope: Scope::Namespace,
        meaning: "window scale option (RFC 7323): windows above 64 KB",
        absent: None,
        judge: tcp_window_scaling,
    },
    Spec {
        name: "net.ipv4.tcp_wmem",
        group: Group::Buffers,
        scope: Scope::Namespace,
        meaning: "TCP send buffer per socket: min, start, max bytes; unacknowledged data must fit in it, so it bounds what a sender has in flight",
        absent: None,
        judge: tcp_wmem,
    },
    Spec {
        name: "net.core.wmem_max",
        group: Group::Buffers,
        scope: Scope::Host,
        meaning: "largest SO_SNDBUF an application may set; a socket that sets SO_SNDBUF is no longer autotuned",
        absent: None,
        judge: wmem_max,
    },
    Spec {
        name: "net.core.wmem_default",
        group: Group::Buffers,
        scope: Scope::Host,
        meaning: "starting send buffer of non-TCP sockets; TCP starts from tcp_wmem instead",
        absent: None,
        judge: |_, _| Verdict::ok(),
    },
    Spec {
        name: "net.ipv4.tcp_notsent_lowat",
        group: Group::Buffers,
        scope: Scope::Namespace,
        meaning: "bytes written but not yet sent that a socket accepts before poll() stops reporting it writable",
        absent: None,
        judge: tcp_notsent_lowat,
    },
    Spec {
        name: "net.ipv4.tcp_autocorking",
        group: Group::Buffers,
        scope: Scope::Namespace,
        meaning: "small writes made while earlier packets still wait in the qdisc or NIC are merged into fuller segments",
        absent: None,
        judge: tcp_autocorking,
    },
    Spec {
        name: "net.ipv4.tcp_low_latency",
        group: Group::Buffers,
        scope: Scope::Host,
        meaning: "obsolete: no effect since Linux 4.14",
        absent: Some("absent: removed from this namespace or kernel; it had no effect since Linux 4.14"),
        judge: |_, _| Verdict::ok_because("no effect since Linux 4.14, whatever its value"),
    },
];

/// min, start, max of tcp_rmem / tcp_wmem.
fn triple(v: &str) -> Option<(i64, i64, i64)> {
    match ints(v)?.as_slice() {
        [a, b, c] => Some((*a, *b, *c)),
        _ => None,
    }
}

fn tcp_rmem(ctx: &Ctx<'_>, v: &str) -> Verdict {
    let Some((min, start, max)) = triple(v) else {
        return Verdict::ok_because("not three numbers: left unjudged");
    };
    let share = ctx.share();
    let scaling = ctx.scaling();
    let max_u = max.max(0) as u64;
    let w = window::window(max_u, share.ratio, scaling);
    let mut text = format!(
        "largest receive window ≈ {} ({} max buffer {}",
        bytes(w),
        bytes(max_u),
        share.how
    );
    let capped_by_scaling = !scaling && window::window(max_u, share.ratio, true) > UNSCALED_MAX;
    if capped_by_scaling {
        text.push_str(", capped at 64 KB because tcp_window_scaling is 0");
    }
    text.push_str(&format!("): {}.", at_rtts(w)));
    if w < LONG_FAT_WINDOW {
        text.push_str(
            " A sender to this host cannot fill a long fat path: throughput = window / RTT.",
        );
        if capped_by_scaling {
            // The fix is on tcp_window_scaling, not here.
            return Verdict::warn(text, None);
        }
        let set = format!(
            "{min} {} {}",
            start.clamp(SUGGESTED_RMEM_START, SUGGESTED_MAX),
            SUGGESTED_MAX
        );
        return Verdict::warn(text, Some(set));
    }
    if start < 65_536 {
        let sw = window::window(start.max(0) as u64, share.ratio, scaling);
        text.push_str(&format!(
            " But connections start with a {} buffer (≈ {} window, {} at 50 ms): autotuning needs several round trips to grow it, so short uploads go at the small window.",
            bytes(start.max(0) as u64),
            bytes(sw),
            crate::units::rate(window::throughput(sw, 50))
        ));
        return Verdict::note(text, Some(format!("{min} {SUGGESTED_RMEM_START} {max}")));
    }
    Verdict::ok_because(text)
}

/// rmem_max / wmem_max: what an application that sets the buffer itself gets.
fn buffer_cap(ctx: &Ctx<'_>, v: &str, option: &str, examples: &str, autotuned: &str) -> Verdict {
    let Some(n) = super::int(v) else {
        return Verdict::ok();
    };
    // setsockopt(SO_RCVBUF / SO_SNDBUF, n) gives a buffer of 2n (socket(7)), capped at 2 × max.
    let buffer = (n.max(0) as u64).saturating_mul(2);
    let share = if option == "SO_RCVBUF" {
        ctx.share().ratio
    } else {
        0.5
    };
    // Judged as if window scaling were on: without it every window is 64 KB
    // whatever the buffer, and that is tcp_window_scaling's finding.
    let w = window::window(buffer, share, true);
    let mut text = format!(
        "an application that sets {option} ({examples}) gets at most {} of buffer, ≈ {} {}: {}; and it gives up autotuning ({autotuned}).",
        bytes(buffer),
        bytes(w),
        if option == "SO_RCVBUF" { "of window" } else { "in flight" },
        at_rtts(w)
    );
    if !ctx.scaling() && w > UNSCALED_MAX {
        text.push_str(" (64 KB at most here while tcp_window_scaling is 0.)");
    }
    if w < LONG_FAT_WINDOW {
        return Verdict::note(text, Some(SUGGESTED_MAX.to_string()));
    }
    Verdict::ok_because(text)
}

fn rmem_max(ctx: &Ctx<'_>, v: &str) -> Verdict {
    buffer_cap(
        ctx,
        v,
        "SO_RCVBUF",
        "nginx `listen … rcvbuf=`, Java setReceiveBufferSize",
        "up to tcp_rmem max",
    )
}

fn wmem_max(ctx: &Ctx<'_>, v: &str) -> Verdict {
    buffer_cap(
        ctx,
        v,
        "SO_SNDBUF",
        "nginx `listen … sndbuf=`, Java setSendBufferSize",
        "up to tcp_wmem max",
    )
}

fn tcp_adv_win_scale(ctx: &Ctx<'_>, v: &str) -> Verdict {
    if let Some(k) = ctx.kernel().filter(|k| k.at_least(6, 6)) {
        return Verdict::ok_because(format!(
            "ignored on Linux {}.{}: since 6.6 each connection measures the share of its buffer that is payload, starting at ½",
            k.major, k.minor
        ));
    }
    let Some(_) = super::int(v) else {
        return Verdict::ok();
    };
    let share = ctx.share();
    let text = format!(
        "{} of each receive buffer is advertised as window",
        window::fraction(share.ratio)
    );
    if share.ratio < 0.5 {
        return Verdict::note(
            format!("only {text}: windows are smaller than the buffers suggest"),
            Some("1".into()),
        );
    }
    Verdict::ok_because(text)
}

fn tcp_moderate_rcvbuf(ctx: &Ctx<'_>, v: &str) -> Verdict {
    if super::int(v) != Some(0) {
        return Verdict::ok();
    }
    let start = ctx
        .raw("net.ipv4.tcp_rmem")
        .and_then(triple)
        .map(|(_, s, _)| s.max(0) as u64);
    let text = match start {
        Some(s) => {
            let w = window::window(s, ctx.share().ratio, ctx.scaling());
            format!(
                "autotuning is off: every connection keeps tcp_rmem's starting buffer ({}), a window of ≈ {}: {}.",
                bytes(s),
                bytes(w),
                at_rtts(w)
            )
        }
        None => "autotuning is off: every connection keeps tcp_rmem's starting buffer.".into(),
    };
    Verdict::warn(text, Some("1".into()))
}

fn tcp_window_scaling(_: &Ctx<'_>, v: &str) -> Verdict {
    if super::int(v) != Some(0) {
        return Verdict::ok();
    }
    Verdict::warn(
        format!(
            "window scaling is off: this host does not offer the option in its handshakes, so windows stay at most 64 KB both ways: {}.",
            at_rtts(UNSCALED_MAX)
        ),
        Some("1".into()),
    )
}

fn tcp_wmem(_: &Ctx<'_>, v: &str) -> Verdict {
    let Some((min, start, max)) = triple(v) else {
        return Verdict::ok_because("not three numbers: left unjudged");
    };
    // A send buffer holds data until it is acknowledged, with per-packet
    // overhead: Linux sizes it at twice the congestion window (tcp_sndbuf_expand).
    // Window scaling bounds the peer's window, not this buffer: judged there.
    let w = window::window(max.max(0) as u64, 0.5, true);
    let text = format!(
        "at most ≈ {} in flight per connection (about half of the {} max buffer): {}.",
        bytes(w),
        bytes(max.max(0) as u64),
        at_rtts(w)
    );
    if w < LONG_FAT_WINDOW {
        return Verdict::warn(
            format!("{text} This host cannot send fast over a long fat path."),
            Some(format!("{min} {start} {SUGGESTED_MAX}")),
        );
    }
    Verdict::ok_because(text)
}

fn tcp_notsent_lowat(_: &Ctx<'_>, v: &str) -> Verdict {
    let Some(n) = super::int(v) else {
        return Verdict::ok();
    };
    if n < 0 || n >= i64::from(u32::MAX) {
        return Verdict::ok_because(
            "unlimited (default): an application may queue a whole send buffer of unsent data, and what it writes next waits behind it; 16–128 KB keeps that queue short for interactive streams (HTTP/2 priorities)",
        );
    }
    Verdict::ok_because(format!(
        "{}: applications are told to wait once that much is queued unsent, which keeps new data close to the wire",
        bytes(n as u64)
    ))
}

fn tcp_autocorking(_: &Ctx<'_>, v: &str) -> Verdict {
    match super::int(v) {
        Some(0) => Verdict::ok_because("off: every small write may leave as its own packet"),
        _ => Verdict::ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::one;
    use crate::Severity;

    #[test]
    fn small_tcp_rmem_warns_with_the_bdp() {
        let s = one(
            [("net.ipv4.tcp_rmem", "4096 8192 16384")],
            "net.ipv4.tcp_rmem",
        );
        assert_eq!(s.severity, Severity::Warn);
        let j = s.judgement.expect("judgement");
        assert!(j.contains("≈ 8 KB"), "{j}");
        assert!(j.contains("6.55 Mbit/s at 10 ms"), "{j}");
        assert!(j.contains("1.31 Mbit/s at 50 ms"), "{j}");
        assert!(j.contains("655 kbit/s at 100 ms"), "{j}");
        assert_eq!(
            s.fix.as_deref(),
            Some("sysctl -w net.ipv4.tcp_rmem='4096 131072 16777216'")
        );
    }

    #[test]
    fn default_tcp_rmem_is_fine() {
        let s = one(
            [("net.ipv4.tcp_rmem", "4096 131072 6291456")],
            "net.ipv4.tcp_rmem",
        );
        assert_eq!(s.severity, Severity::Ok);
        assert!(s.judgement.expect("numbers").contains("≈ 3 MB"));
    }

    #[test]
    fn the_seed_case_on_an_old_kernel_counts_adv_win_scale() {
        // Kernel 3.10, tcp_rmem max 6 MB, tcp_adv_win_scale 2: ¾ of 6 MB = 4.5 MB.
        let mut snap = crate::Snapshot::from_pairs([
            ("net.ipv4.tcp_rmem", "4096 87380 6291456"),
            ("net.ipv4.tcp_adv_win_scale", "2"),
        ]);
        snap.kernel = crate::window::Kernel::parse("3.10.0");
        let got = crate::settings::judge(&snap);
        let r = got
            .iter()
            .find(|s| s.name == "net.ipv4.tcp_rmem")
            .expect("rmem");
        assert_eq!(r.severity, Severity::Ok);
        assert!(r.judgement.as_deref().expect("j").contains("≈ 4.5 MB"));
        assert!(r
            .judgement
            .as_deref()
            .expect("j")
            .contains("tcp_adv_win_scale 2"));
        let a = got
            .iter()
            .find(|s| s.name == "net.ipv4.tcp_adv_win_scale")
            .expect("adv");
        assert_eq!(
            a.judgement.as_deref(),
            Some("¾ of each receive buffer is advertised as window")
        );
    }

    #[test]
    fn negative_adv_win_scale_on_an_old_kernel_is_noted() {
        let mut snap = crate::Snapshot::from_pairs([("net.ipv4.tcp_adv_win_scale", "-2")]);
        snap.kernel = crate::window::Kernel::parse("5.10.0");
        let got = crate::settings::judge(&snap);
        let a = got
            .iter()
            .find(|s| s.name == "net.ipv4.tcp_adv_win_scale")
            .expect("adv");
        assert_eq!(a.severity, Severity::Note);
        assert!(a.judgement.as_deref().expect("j").contains("¼"));
    }

    #[test]
    fn adv_win_scale_is_ignored_since_6_6() {
        let s = one(
            [("net.ipv4.tcp_adv_win_scale", "-2")],
            "net.ipv4.tcp_adv_win_scale",
        );
        assert_eq!(s.severity, Severity::Ok);
        assert!(s.judgement.expect("j").contains("ignored on Linux 6.18"));
    }

    #[test]
    fn small_start_buffer_is_a_note() {
        let s = one(
            [("net.ipv4.tcp_rmem", "4096 8192 6291456")],
            "net.ipv4.tcp_rmem",
        );
        assert_eq!(s.severity, Severity::Note);
        assert_eq!(
            s.fix.as_deref(),
            Some("sysctl -w net.ipv4.tcp_rmem='4096 131072 6291456'")
        );
    }

    #[test]
    fn window_scaling_off_caps_at_64k() {
        let pairs = [
            ("net.ipv4.tcp_window_scaling", "0"),
            ("net.ipv4.tcp_rmem", "4096 131072 6291456"),
        ];
        let s = one(pairs, "net.ipv4.tcp_window_scaling");
        assert_eq!(s.severity, Severity::Warn);
        assert!(s.judgement.expect("j").contains("52.4 Mbit/s at 10 ms"));
        assert_eq!(
            s.fix.as_deref(),
            Some("sysctl -w net.ipv4.tcp_window_scaling=1")
        );
        // tcp_rmem then says why its window is 64 KB, and leaves the fix to window scaling.
        let r = one(pairs, "net.ipv4.tcp_rmem");
        assert_eq!(r.severity, Severity::Warn);
        assert!(r.judgement.expect("j").contains("capped at 64 KB"));
        assert_eq!(r.fix, None);
        let on = one(
            [("net.ipv4.tcp_window_scaling", "1")],
            "net.ipv4.tcp_window_scaling",
        );
        assert_eq!(on.severity, Severity::Ok);
    }

    #[test]
    fn rmem_max_bounds_applications_that_set_so_rcvbuf() {
        // Stock Linux: 212992 → 416 KB buffer → 208 KB window: 33 Mbit/s at 50 ms.
        let s = one([("net.core.rmem_max", "212992")], "net.core.rmem_max");
        assert_eq!(s.severity, Severity::Note);
        let j = s.judgement.expect("j");
        assert!(j.contains("416 KB of buffer"), "{j}");
        assert!(j.contains("≈ 208 KB of window"), "{j}");
        assert!(j.contains("34.1 Mbit/s at 50 ms"), "{j}");
        assert_eq!(
            s.fix.as_deref(),
            Some("sysctl -w net.core.rmem_max=16777216")
        );
        let big = one([("net.core.rmem_max", "4194304")], "net.core.rmem_max");
        assert_eq!(big.severity, Severity::Ok);
    }

    #[test]
    fn rmem_max_is_not_blamed_for_window_scaling_off() {
        let s = one(
            [
                ("net.core.rmem_max", "4194304"),
                ("net.ipv4.tcp_window_scaling", "0"),
            ],
            "net.core.rmem_max",
        );
        assert_eq!(s.severity, Severity::Ok);
        assert!(s.judgement.expect("j").contains("64 KB at most here"));
    }

    #[test]
    fn autotuning_off_warns_with_the_start_window() {
        let s = one(
            [
                ("net.ipv4.tcp_moderate_rcvbuf", "0"),
                ("net.ipv4.tcp_rmem", "4096 131072 6291456"),
            ],
            "net.ipv4.tcp_moderate_rcvbuf",
        );
        assert_eq!(s.severity, Severity::Warn);
        assert!(s.judgement.expect("j").contains("128 KB"));
    }

    #[test]
    fn small_tcp_wmem_warns() {
        let s = one(
            [("net.ipv4.tcp_wmem", "4096 8192 16384")],
            "net.ipv4.tcp_wmem",
        );
        assert_eq!(s.severity, Severity::Warn);
        assert_eq!(
            s.fix.as_deref(),
            Some("sysctl -w net.ipv4.tcp_wmem='4096 8192 16777216'")
        );
        let ok = one(
            [("net.ipv4.tcp_wmem", "4096 16384 4194304")],
            "net.ipv4.tcp_wmem",
        );
        assert_eq!(ok.severity, Severity::Ok);
    }

    #[test]
    fn notsent_lowat_unlimited_and_set() {
        let s = one(
            [("net.ipv4.tcp_notsent_lowat", "4294967295")],
            "net.ipv4.tcp_notsent_lowat",
        );
        assert!(s.judgement.expect("j").starts_with("unlimited"));
        let s = one(
            [("net.ipv4.tcp_notsent_lowat", "16384")],
            "net.ipv4.tcp_notsent_lowat",
        );
        assert!(s.judgement.expect("j").starts_with("16 KB"));
    }
}
