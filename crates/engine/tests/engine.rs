//! The engine on real captures re-encoded in other link types, address
//! families and container formats: the diagnosis must not change.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use tcpdoctor_capture::write::PcapNgWriter;
use tcpdoctor_capture::CaptureReader;
use tcpdoctor_engine::model::Analysis;
use tcpdoctor_engine::{Engine, Options};
use tcpdoctor_wire::{LinkType, Timestamp};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(name)
}

/// Ethernet frames of a fixture: (timestamp, frame bytes, original length).
fn frames(name: &str) -> Vec<(Timestamp, Vec<u8>, u32)> {
    let bytes = std::fs::read(fixture(name)).unwrap();
    let mut r = CaptureReader::new(&bytes[..]).unwrap();
    let mut out = Vec::new();
    while let Some(p) = r.next_packet().unwrap() {
        assert_eq!(p.link, LinkType::Ethernet);
        out.push((p.ts, p.data.to_vec(), p.orig_len));
    }
    out
}

fn analyze(link: LinkType, frames: &[(Timestamp, Vec<u8>, u32)]) -> Analysis {
    let mut e = Engine::new(Options::default());
    for (ts, data, orig) in frames {
        e.push(*ts, link, data, *orig);
    }
    e.finish()
}

/// IPv4 → IPv6 with v4-mapped addresses, same TCP bytes.
fn to_ipv6(ip4: &[u8]) -> Vec<u8> {
    let ihl = usize::from(ip4[0] & 0xF) * 4;
    let total = usize::from(u16::from_be_bytes([ip4[2], ip4[3]]));
    let tcp = &ip4[ihl..];
    let mut v6 = vec![0x60, 0, 0, 0];
    v6.extend_from_slice(&((total - ihl) as u16).to_be_bytes());
    v6.extend_from_slice(&[6, ip4[8]]);
    for a in [&ip4[12..16], &ip4[16..20]] {
        v6.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0]);
        v6.extend_from_slice(a);
    }
    v6.extend_from_slice(tcp);
    v6
}

fn summary(a: &Analysis) -> Vec<(String, String, u64)> {
    a.findings
        .iter()
        .map(|f| {
            (
                f.kind.to_string(),
                f.culprit.role.to_string(),
                f.occurrences,
            )
        })
        .collect()
}

#[test]
fn same_diagnosis_across_link_types_families_and_formats() {
    let eth = frames("nginx-nodelay-off.server.pcap");
    let base = analyze(LinkType::Ethernet, &eth);
    assert_eq!(base.findings[0].kind, "nagle_delayed_ack");
    let expected = summary(&base);

    let raw: Vec<_> = eth
        .iter()
        .map(|(t, d, o)| (*t, d[14..].to_vec(), *o - 14))
        .collect();
    assert_eq!(summary(&analyze(LinkType::RawIp, &raw)), expected);

    // Linux cooked v2: protocol, reserved, ifindex, ARPHRD, type, addr len, addr.
    let sll2: Vec<_> = eth
        .iter()
        .map(|(t, d, o)| {
            let mut f = vec![
                0x08, 0x00, 0, 0, 0, 0, 0, 3, 0, 1, 4, 6, 2, 0, 0, 0, 0, 1, 0, 0,
            ];
            f.extend_from_slice(&d[14..]);
            (*t, f, *o + 6)
        })
        .collect();
    assert_eq!(summary(&analyze(LinkType::LinuxSll2, &sll2)), expected);

    // 802.1Q-tagged Ethernet.
    let vlan: Vec<_> = eth
        .iter()
        .map(|(t, d, o)| {
            let mut f = d[..12].to_vec();
            f.extend_from_slice(&[0x81, 0x00, 0x00, 0x2A]);
            f.extend_from_slice(&d[12..]);
            (*t, f, *o + 4)
        })
        .collect();
    assert_eq!(summary(&analyze(LinkType::Ethernet, &vlan)), expected);

    // IPv6, written as pcapng with nanosecond resolution and read back.
    let mut w = PcapNgWriter::new(Vec::new()).unwrap();
    let i = w.add_interface(LinkType::Ipv6, 0, 9).unwrap();
    for (t, d, _) in &eth {
        let v6 = to_ipv6(&d[14..]);
        w.write_packet(i, t.nanos() as u64, &v6, v6.len() as u32)
            .unwrap();
    }
    let bytes = w.into_inner();
    let mut r = CaptureReader::new(&bytes[..]).unwrap();
    let mut e = Engine::new(Options::default());
    while let Some(p) = r.next_packet().unwrap() {
        e.push(p.ts, p.link, p.data, p.orig_len);
    }
    let v6 = e.finish();
    assert_eq!(summary(&v6), expected);
    assert!(v6.findings[0].culprit.endpoint.starts_with("[2001:db8::"));
    // Connection N is Wireshark's tcp.stream N-1.
    let ev = &v6.findings[0].evidence[0];
    assert_eq!(ev.tcp_stream, ev.connection - 1);
    assert!(v6.findings[0]
        .wireshark_filter
        .starts_with(&format!("tcp.stream eq {}", ev.tcp_stream)));
}

#[test]
fn connection_list_is_bounded_but_counts_everything() {
    let eth = frames("nginx-nodelay-off.server.pcap");
    let mut e = Engine::new(Options {
        max_connections: 2,
        ..Options::default()
    });
    for (ts, d, o) in &eth {
        e.push(*ts, LinkType::Ethernet, d, *o);
    }
    let a = e.finish();
    assert_eq!(a.connections.len(), 2);
    assert_eq!(a.capture.connections, 5);
    assert!(a.connections.iter().all(|c| c.time_lost_ms > 1000.0));
}

#[test]
fn healthy_twin_is_quiet_for_every_rule() {
    for name in [
        "upload-default.client.pcap",
        "client-single-write.router.pcap",
    ] {
        let a = analyze(LinkType::Ethernet, &frames(name));
        assert!(a.findings.is_empty(), "{name}: {:?}", a.findings);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// Real packets with hostile bytes: the engine never panics and counts every frame.
    #[test]
    fn mutated_real_capture_never_panics(edits in proptest::collection::vec((0usize..4000, 0usize..1600, any::<u8>()), 1..200),
                                         cut in proptest::collection::vec((0usize..4000, 0usize..120), 0..50)) {
        let mut fr = frames("client-write-write.router.pcap");
        let n = fr.len();
        for (p, at, v) in edits {
            let d = &mut fr[p % n].1;
            let at = at % d.len();
            d[at] = v;
        }
        for (p, len) in cut {
            let d = &mut fr[p % n].1;
            d.truncate(len.min(d.len()));
        }
        let a = analyze(LinkType::Ethernet, &fr);
        prop_assert_eq!(a.capture.packets, n as u64);
    }
}

/// A synthetic exchange series, captured at the client across a long path:
/// the server sends a small head, then (Nagle on) the rest only after the
/// client's delayed ACK reaches it.
fn long_path(rtt_ms: i64, ack_delay_ms: i64, nagle: bool) -> Analysis {
    use tcpdoctor_wire::build::FrameSpec;
    use tcpdoctor_wire::TcpFlags;
    let c: std::net::IpAddr = "192.0.2.1".parse().unwrap();
    let s: std::net::IpAddr = "198.51.100.7".parse().unwrap();
    let spec = |from_client: bool, seq: u32, ack: u32, flags: u16, len: usize| FrameSpec {
        src: if from_client { c } else { s },
        dst: if from_client { s } else { c },
        src_port: if from_client { 50000 } else { 443 },
        dst_port: if from_client { 443 } else { 50000 },
        seq,
        ack,
        flags,
        window: 1000,
        mss: (flags & TcpFlags::SYN != 0).then_some(1460),
        window_scale: (flags & TcpFlags::SYN != 0).then_some(7),
        payload_len: len,
    };
    let a = TcpFlags::ACK;
    let pa = TcpFlags::ACK | TcpFlags::PSH;
    let mut pkts: Vec<(i64, Vec<u8>)> = vec![
        (0, spec(true, 100, 0, TcpFlags::SYN, 0).ethernet()),
        (
            rtt_ms * 1000,
            spec(false, 900, 101, TcpFlags::SYN | a, 0).ethernet(),
        ),
        (rtt_ms * 1000 + 20, spec(true, 101, 901, a, 0).ethernet()),
    ];
    let (mut cs, mut ss) = (101u32, 901u32);
    let mut t = rtt_ms * 1000 + 1000; // µs
    for _ in 0..6 {
        pkts.push((t, spec(true, cs, ss, pa, 50).ethernet()));
        cs += 50;
        t += rtt_ms * 1000; // request reaches the server, head comes back
        pkts.push((t, spec(false, ss, cs, pa, 200).ethernet()));
        ss += 200;
        if nagle {
            t += ack_delay_ms * 1000;
            pkts.push((t, spec(true, cs, ss, a, 0).ethernet()));
            t += rtt_ms * 1000; // the ACK goes out, the held body comes back
        } else {
            t += 30;
        }
        pkts.push((t, spec(false, ss, cs, pa, 600).ethernet()));
        ss += 600;
        t += 50;
        pkts.push((t, spec(true, cs, ss, a, 0).ethernet()));
        t += 5000;
    }
    let mut e = Engine::new(Options::default());
    for (us, f) in &pkts {
        e.push(
            Timestamp::from_nanos(1_700_000_000_000_000_000 + us * 1000),
            LinkType::Ethernet,
            f,
            f.len() as u32,
        );
    }
    e.finish()
}

#[test]
fn nagle_across_a_long_path_at_the_client() {
    let a = long_path(100, 40, true);
    let f = &a.findings[0];
    assert_eq!(f.kind, "nagle_delayed_ack");
    assert_eq!(f.culprit.endpoint, "198.51.100.7:443");
    assert_eq!(f.occurrences, 6);
    // Lost per exchange: the delayed-ACK timer plus a round trip.
    assert!(
        (f.typical_delay_ms - 140.0).abs() < 3.0,
        "{}",
        f.typical_delay_ms
    );
    let wait = f.details["ack_delay_ms"].as_f64().unwrap();
    assert!((wait - 40.0).abs() < 2.0, "{wait}");
    // A Windows peer: 200 ms.
    let w = long_path(30, 200, true);
    assert!(
        w.findings[0].explanation.contains("Windows"),
        "{}",
        w.findings[0].explanation
    );
}

#[test]
fn no_nagle_when_the_rest_follows_at_once() {
    let a = long_path(100, 40, false);
    let kinds: Vec<_> = a.findings.iter().map(|f| f.kind).collect();
    // Without the hold, what is left is the 100 ms path itself.
    assert_eq!(kinds, ["network_latency"]);
}

#[test]
fn no_nagle_when_the_ack_is_prompt() {
    // The client ACKs the head after 2 ms: no delayed ACK, nothing held for long.
    let a = long_path(100, 2, true);
    assert!(
        a.findings.iter().all(|f| f.kind != "nagle_delayed_ack"),
        "{:?}",
        a.findings
    );
}

/// A live view reads the engine while frames still arrive: the Nagle finding
/// shows before the capture ends, and every completed exchange is drained once.
#[test]
fn progress_and_drained_exchanges_while_frames_arrive() {
    let frames = frames("nginx-nodelay-off.server.pcap");
    let mut e = Engine::new(Options {
        live: true,
        ..Options::default()
    });
    let half = frames.len() / 2;
    let mut drained = 0u64;
    let mut servers = std::collections::BTreeSet::new();
    for (ts, data, orig) in &frames[..half] {
        e.push(*ts, LinkType::Ethernet, data, *orig);
    }
    let mid = e.progress();
    assert_eq!(mid.frames, half as u64);
    assert!(mid.open_connections > 0, "connections still open mid-way");
    let nagle = mid
        .findings
        .iter()
        .find(|f| f.kind == "nagle_delayed_ack")
        .expect("the Nagle stall shows before the capture ends");
    assert_eq!(nagle.culprit.role, "server");
    assert!(nagle.typical_delay_ms > 30.0 && nagle.typical_delay_ms < 60.0);
    for (server, ns) in e.drain_exchanges() {
        servers.insert(server.to_string());
        assert!(ns > 0);
        drained += 1;
    }
    assert_eq!(drained, mid.exchanges);
    assert_eq!(e.drain_exchanges().count(), 0, "drained once");
    for (ts, data, orig) in &frames[half..] {
        e.push(*ts, LinkType::Ethernet, data, *orig);
    }
    drained += e.drain_exchanges().count() as u64;
    let end = e.progress();
    assert_eq!(drained, end.exchanges);
    assert!(end.findings[0].total_delay_ms > nagle.total_delay_ms);
    let a = e.finish();
    assert!(a.capture.exchanges >= end.exchanges);
    assert_eq!(servers.len(), 1);
    assert!(a.findings[0].culprit.endpoint == *servers.iter().next().unwrap());
}

/// Without `live`, nothing is kept for draining (files do not pay for it).
#[test]
fn exchanges_are_not_kept_unless_live() {
    let mut e = Engine::new(Options::default());
    for (ts, data, orig) in &frames("nginx-nodelay-off.server.pcap") {
        e.push(*ts, LinkType::Ethernet, data, *orig);
    }
    assert!(e.progress().exchanges > 0);
    assert_eq!(e.drain_exchanges().count(), 0);
}
