#![allow(clippy::unwrap_used)]

use std::path::Path;

use tcpdoctor_capture::CaptureReader;

use super::*;

/// Frames of a fixture recorded by the lab with real Linux TCP.
fn frames(name: &str) -> Vec<(Timestamp, LinkType, Vec<u8>, u32)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(name);
    let bytes = std::fs::read(path).unwrap();
    let mut r = CaptureReader::new(&bytes[..]).unwrap();
    let mut out = Vec::new();
    while let Some(p) = r.next_packet().unwrap() {
        out.push((p.ts, p.link, p.data.to_vec(), p.orig_len));
    }
    out
}

/// Feeds a fixture in `n` intervals, as if each were one second of a watch.
fn watch(name: &str, n: usize, metrics: Option<Metrics>) -> (Vec<Interval>, Watcher) {
    let frames = frames(name);
    let mut w = Watcher::new(metrics);
    let mut out = Vec::new();
    let per = frames.len().div_ceil(n);
    for (i, chunk) in frames.chunks(per).enumerate() {
        for (ts, link, data, orig) in chunk {
            w.push(*ts, *link, data, *orig);
        }
        out.push(w.tick((i + 1) as f64, KernelCounters::default()));
    }
    (out, w)
}

#[test]
fn the_nagle_stall_shows_in_an_interval_before_the_end() {
    let (ivs, w) = watch("nginx-nodelay-off.server.pcap", 4, None);
    let first = ivs
        .iter()
        .position(|iv| iv.findings.iter().any(|f| f.kind == "nagle_delayed_ack"))
        .expect("nagle_delayed_ack in some interval");
    assert!(
        first < ivs.len() - 1,
        "shown while traffic flows, not only at the end"
    );
    let f = &ivs[first].findings[0];
    assert_eq!(f.kind, "nagle_delayed_ack");
    assert_eq!(f.culprit.role, "server");
    // Every frame is counted in exactly one interval.
    let total: u64 = ivs.iter().map(|iv| iv.packets).sum();
    assert_eq!(total, w.frames());
    // Every exchange completed while watching is in one interval; those the
    // end of the watch completes (connections closed by `finish`) are only
    // in the analysis.
    let exchanges: u64 = ivs.iter().map(|iv| iv.exchanges).sum();
    let a = w.finish();
    assert!(exchanges > 0 && exchanges <= a.capture.exchanges);
    assert!(a.findings.iter().any(|f| f.kind == "nagle_delayed_ack"));
}

#[test]
fn latency_percentiles_and_top_servers_describe_the_interval() {
    let (ivs, _) = watch("nginx-nodelay-off.server.pcap", 2, None);
    let busy = ivs.iter().find(|iv| iv.exchanges > 0).unwrap();
    let l = busy.exchange_latency_ms.unwrap();
    assert!(l.p50 <= l.p90 && l.p90 <= l.p99 && l.p99 <= l.max);
    // Nagle against a 40 ms delayed ACK: the slow exchanges wait ~40 ms.
    assert!(l.max > 30.0, "max {}", l.max);
    let top = &busy.top_servers[0];
    assert_eq!(top.exchanges, busy.exchanges, "one server in this capture");
    assert!(top.max_ms == l.max);
}

#[test]
fn nagle_stays_quiet_when_the_server_sets_nodelay() {
    let (ivs, w) = watch("nginx-nodelay-on.client.pcap", 3, None);
    for iv in &ivs {
        assert!(
            iv.findings.iter().all(|f| f.kind != "nagle_delayed_ack"),
            "{:?}",
            iv.findings
        );
        assert_eq!(iv.kernel_drops, 0);
    }
    assert!(ivs.iter().map(|iv| iv.exchanges).sum::<u64>() > 0);
    // What the last interval said is what the analysis says.
    let live: Vec<&str> = ivs
        .last()
        .unwrap()
        .findings
        .iter()
        .map(|f| f.kind)
        .collect();
    let a = w.finish();
    assert!(a.findings.iter().all(|f| f.kind != "nagle_delayed_ack"));
    for kind in live {
        assert!(a.findings.iter().any(|f| f.kind == kind), "{kind}");
    }
}

#[test]
fn kernel_drops_are_per_interval_and_total() {
    let mut w = Watcher::new(None);
    let a = w.tick(
        1.0,
        KernelCounters {
            received: 10,
            dropped: 3,
        },
    );
    let b = w.tick(
        2.0,
        KernelCounters {
            received: 20,
            dropped: 5,
        },
    );
    assert_eq!((a.kernel_drops, a.kernel_drops_total), (3, 3));
    assert_eq!((b.kernel_drops, b.kernel_drops_total), (2, 5));
    assert!(a.exchange_latency_ms.is_none());
    let json = serde_json::to_value(&b).unwrap();
    for key in [
        "interval",
        "findings",
        "exchange_latency_ms",
        "packets",
        "kernel_drops",
    ] {
        assert!(json.get(key).is_some(), "{key} missing");
    }
}

#[test]
fn metrics_count_time_lost_once_per_finding() {
    let metrics = Metrics::new();
    let registry = metrics.registry();
    let (ivs, w) = watch("nginx-nodelay-off.server.pcap", 5, Some(metrics));
    let text = Metrics::encode(&registry);
    let line = text
        .lines()
        .find(|l| l.starts_with("tcpdoctor_time_lost_seconds_total{kind=\"nagle_delayed_ack\""))
        .unwrap_or_else(|| panic!("no Nagle counter in\n{text}"));
    assert!(line.contains("role=\"server\""), "{line}");
    let value: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
    let last = ivs.last().unwrap();
    let nagle = last
        .findings
        .iter()
        .find(|f| f.kind == "nagle_delayed_ack")
        .unwrap();
    // The counter is the sum of the increases: the finding's total, once.
    assert!(
        (value - nagle.total_delay_ms / 1e3).abs() < 1e-6,
        "{value} vs {}",
        nagle.total_delay_ms
    );
    let packets: u64 = text
        .lines()
        .find(|l| l.starts_with("tcpdoctor_packets_total "))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap();
    assert_eq!(packets, w.frames());
    let exchanges: u64 = ivs.iter().map(|iv| iv.exchanges).sum();
    let count_line = text
        .lines()
        .find(|l| l.starts_with("tcpdoctor_exchange_duration_seconds_count{"))
        .unwrap();
    assert!(
        count_line.ends_with(&format!(" {exchanges}")),
        "{count_line}"
    );
    assert!(
        text.lines().any(|l| l
            .starts_with("tcpdoctor_exchange_duration_seconds_bucket{server=\"10.")
            && l.contains(",le=\"+Inf\"}")),
        "{text}"
    );
    assert!(text.ends_with("# EOF\n"));
}

#[test]
fn the_view_names_the_finding_and_the_drops() {
    let (ivs, _) = watch("nginx-nodelay-off.server.pcap", 2, None);
    let v = view::render(&ivs[1], "eth0");
    assert!(v.contains("nagle_delayed_ack"), "{v}");
    assert!(v.contains("no kernel drops"), "{v}");
    let mut w = Watcher::new(None);
    let iv = w.tick(
        1.0,
        KernelCounters {
            received: 9,
            dropped: 4,
        },
    );
    let v = view::render(&iv, "eth0");
    assert!(v.contains("KERNEL DROPPED 4"), "{v}");
    assert!(v.contains("no finding so far"), "{v}");
}

#[test]
fn connections_reset_at_the_end_are_not_counted_open() {
    // wrk's four connections end with FIN then RST and nothing follows: the
    // grace period for trailing segments never passes, but they are closed.
    let (ivs, _) = watch("nginx-nodelay-off.server.pcap", 1, None);
    assert_eq!(ivs.last().unwrap().open_connections, 0);
}

/// Prometheus' `histogram_quantile`: the bucket the rank falls in, and a
/// linear interpolation inside it (from 0 for the first bucket).
fn histogram_quantile(q: f64, buckets: &[(f64, f64)]) -> f64 {
    let total = buckets.last().unwrap().1;
    let rank = q * total;
    let mut prev = (0.0, 0.0);
    for &(le, cum) in buckets {
        if cum >= rank {
            if le.is_infinite() {
                return prev.0;
            }
            return prev.0 + (le - prev.0) * (rank - prev.1) / (cum - prev.1);
        }
        prev = (le, cum);
    }
    prev.0
}

#[test]
fn prometheus_quantiles_agree_with_the_live_view() {
    let metrics = Metrics::new();
    let registry = metrics.registry();
    let (ivs, _) = watch("nginx-nodelay-off.server.pcap", 1, Some(metrics));
    let live = ivs[0].exchange_latency_ms.unwrap();
    let text = Metrics::encode(&registry);
    let buckets: Vec<(f64, f64)> = text
        .lines()
        .filter(|l| l.starts_with("tcpdoctor_exchange_duration_seconds_bucket{"))
        .map(|l| {
            let le = l.split("le=\"").nth(1).unwrap().split('"').next().unwrap();
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().unwrap()
            };
            (le, l.rsplit(' ').next().unwrap().parse().unwrap())
        })
        .collect();
    assert!(buckets.len() > 100, "{text}");
    for (q, want) in [(0.5, live.p50), (0.9, live.p90), (0.99, live.p99)] {
        let got = histogram_quantile(q, &buckets) * 1e3;
        assert!(
            (got - want).abs() <= 0.1 * want,
            "q {q}: Prometheus {got:.3} ms, live view {want:.3} ms"
        );
    }
}
