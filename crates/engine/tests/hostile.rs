//! Hostile shapes through the public API: a SYN flood keeps the open state
//! bounded, connections summarised early still count, the cap on open
//! connections says when it bites, and keeping handshakes compact changes no
//! analysis.

#![allow(clippy::unwrap_used)]

use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;

use tcpdoctor_capture::CaptureReader;
use tcpdoctor_engine::model::Analysis;
use tcpdoctor_engine::{Engine, FlowConfig, Options};
use tcpdoctor_wire::{LinkType, TcpFlags, TcpSegment, Timestamp};

const SERVER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 80);
const MSS_WS: &[u8] = &[2, 4, 5, 0xB4, 1, 3, 3, 7];

/// A SYN from source `n` (a distinct address and port each).
fn syn(n: u32, isn: u32, options_raw: &'static [u8]) -> TcpSegment<'static> {
    TcpSegment {
        src: IpAddr::V4(Ipv4Addr::from(0xC612_0000 | (n & 0x1_FFFF))),
        dst: IpAddr::V4(SERVER),
        ttl: 64,
        ip_id: 0,
        src_port: 1024 + (n >> 17) as u16,
        dst_port: 80,
        seq: isn,
        ack: 0,
        flags: TcpFlags(TcpFlags::SYN),
        window: 512,
        options_raw,
        payload_len: 0,
        payload: &[],
        length_clamped: false,
    }
}

/// One client's SYN to each of `ports` ports of the server, `per_ms` a
/// millisecond, each refused with an RST-ACK: (ms, segment).
fn port_scan(ports: u32, per_ms: u32) -> Vec<(i64, TcpSegment<'static>)> {
    let mut scan = Vec::new();
    for p in 0..ports {
        let mut s = syn(7, p * 31, &[]);
        s.dst_port = 1 + p as u16;
        let mut rst = s.clone();
        std::mem::swap(&mut rst.src, &mut rst.dst);
        std::mem::swap(&mut rst.src_port, &mut rst.dst_port);
        rst.flags = TcpFlags(TcpFlags::RST | TcpFlags::ACK);
        rst.seq = 0;
        rst.ack = s.seq.wrapping_add(1);
        let t = i64::from(p / per_ms);
        scan.extend([(t, s), (t, rst)]);
    }
    scan
}

fn at_ms(ms: i64) -> Timestamp {
    Timestamp::from_nanos(1_700_000_000_000_000_000 + ms * 1_000_000)
}

fn json(a: &Analysis) -> serde_json::Value {
    serde_json::to_value(a).unwrap()
}

#[test]
fn a_flood_of_a_million_syns_keeps_open_state_bounded() {
    // 1,000 SYNs a second for 1,000 s, none answered: each is half-open for
    // 75 s, so about 75,000 are open at once, whatever the flood's length.
    let mut e = Engine::new(Options::default());
    let (mut most_open, mut most_bytes) = (0, 0);
    for n in 0..1_000_000u32 {
        let s = syn(n, n.wrapping_mul(2_654_435_761), &[]);
        e.push_segment(at_ms(i64::from(n)), LinkType::Ethernet, 54, &s);
        if n % 1000 == 999 {
            most_open = most_open.max(e.open_connections());
            most_bytes = most_bytes.max(e.state_bytes());
        }
    }
    assert!(most_open <= 75_001, "{most_open} open at once");
    // Compact connections: the slot, the table, the deadline queue, slack for
    // growth. Well under 64 MB; a full state per connection would be 230 MB.
    assert!(
        most_bytes < most_open * 400 + (1 << 20),
        "{most_bytes} bytes for {most_open} open connections"
    );
    let a = e.finish();
    // Summarised as they expired: every one still counts.
    assert_eq!(a.capture.connections, 1_000_000);
    assert_eq!(a.capture.connections_closed_early, 0);
    assert!(a.capture.peak_open_connections <= 75_001);
    // And it is named: one flood, 2^17 distinct sources (±3%), never answered.
    assert!(a.minor_findings.is_empty());
    assert_eq!(a.findings.len(), 1, "{:?}", a.findings);
    let f = &json(&a)["findings"][0];
    assert_eq!(f["kind"], "syn_flood");
    assert_eq!(f["culprit"]["endpoint"], "10.0.0.80:80");
    assert_eq!(f["details"]["half_open"], 1_000_000);
    assert_eq!(f["details"]["share_answered"], 0.0);
    let sources = f["details"]["distinct_sources"].as_f64().unwrap();
    assert!((sources - 131_072.0).abs() < 131_072.0 * 0.03, "{sources}");
}

#[test]
fn half_open_connections_summarised_early_still_count() {
    // 2,000 clients over 400 s; every tenth SYN is retried 1 s and 3 s
    // later, unanswered; one in five is answered and completed, one in seven
    // refused. Expired 75 s after their last packet or kept to the end, the
    // analysis is the same.
    let mut frames = Vec::new();
    for n in 0..2000u32 {
        let t = i64::from(n) * 200;
        let isn = n.wrapping_mul(7919);
        let s = syn(n, isn, MSS_WS);
        frames.push((t, s.clone()));
        if n % 10 == 0 {
            frames.push((t + 1000, s.clone()));
            frames.push((t + 3000, s.clone()));
        } else if n % 5 == 0 {
            let mut sa = s.clone();
            std::mem::swap(&mut sa.src, &mut sa.dst);
            std::mem::swap(&mut sa.src_port, &mut sa.dst_port);
            sa.flags = TcpFlags(TcpFlags::SYN | TcpFlags::ACK);
            sa.ack = isn.wrapping_add(1);
            sa.seq = 5000;
            frames.push((t + 1, sa));
            let mut ack = s.clone();
            ack.flags = TcpFlags(TcpFlags::ACK);
            ack.seq = isn.wrapping_add(1);
            ack.ack = 5001;
            ack.options_raw = &[];
            frames.push((t + 2, ack));
        } else if n % 7 == 0 {
            let mut rst = s.clone();
            std::mem::swap(&mut rst.src, &mut rst.dst);
            std::mem::swap(&mut rst.src_port, &mut rst.dst_port);
            rst.flags = TcpFlags(TcpFlags::RST | TcpFlags::ACK);
            rst.seq = 0;
            rst.ack = isn.wrapping_add(1);
            rst.options_raw = &[];
            frames.push((t + 1, rst));
        }
    }
    frames.sort_by_key(|f| f.0);
    let run = |flow: FlowConfig| {
        let mut e = Engine::new(Options {
            flow,
            ..Options::default()
        });
        for (t, s) in &frames {
            e.push_segment(at_ms(*t), LinkType::Ethernet, 60, s);
        }
        e.finish()
    };
    let bounded = run(FlowConfig::default());
    let kept = run(FlowConfig {
        half_open_timeout_ns: i64::MAX / 4,
        idle_timeout_ns: i64::MAX / 4,
        compact_handshakes: false,
        ..FlowConfig::default()
    });
    assert!(bounded.capture.peak_open_connections < 600);
    // Kept to the end: all but the refused ones (freed after their grace period).
    assert!(kept.capture.peak_open_connections > 1700);
    assert_eq!(bounded.capture.connections, 2000);
    // Failed requests are listed first: the refusals, and the SYNs retried
    // and never answered (a failure of their own, not a setup delay).
    let kind = |k: &str| bounded.findings.iter().position(|f| f.kind == k).unwrap();
    let (refused, unanswered) = (kind("connection_refused"), kind("connection_unanswered"));
    assert!(refused < 2 && unanswered < 2);
    assert_eq!(bounded.findings[refused].connections, 228);
    assert_eq!(bounded.findings[unanswered].connections, 200);
    assert_eq!(
        bounded.findings[unanswered].details["requests_lost"],
        serde_json::json!(200)
    );
    assert!(!bounded.findings.iter().any(|f| f.kind == "syn_retransmit"));
    let (mut a, mut b) = (json(&bounded), json(&kept));
    for v in [&mut a, &mut b] {
        v["capture"]["peak_open_connections"] = 0.into();
    }
    assert_eq!(a, b);
}

#[test]
fn the_cap_on_open_connections_closes_the_idlest_early_and_says_so() {
    let mut e = Engine::new(Options {
        flow: FlowConfig {
            max_open: 100,
            ..FlowConfig::default()
        },
        ..Options::default()
    });
    for n in 0..1000u32 {
        e.push_segment(at_ms(i64::from(n)), LinkType::Ethernet, 54, &syn(n, n, &[]));
        assert!(e.open_connections() <= 100);
    }
    let a = e.finish();
    assert_eq!(a.capture.connections, 1000);
    assert_eq!(a.capture.connections_closed_early, 900);
    assert_eq!(a.capture.peak_open_connections, 100);
    assert_eq!(a.capture.warnings.len(), 1);
    let w = &a.capture.warnings[0];
    assert!(w.contains("--max-open-connections 100"), "{w}");
    assert!(w.contains("900 were closed early"), "{w}");
}

#[test]
fn compact_handshakes_change_no_analysis_of_the_fixtures() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.to_string_lossy();
            n.ends_with(".pcap") || n.ends_with(".pcapng")
        })
        .collect();
    names.sort();
    assert!(names.len() >= 20);
    for path in names {
        let bytes = std::fs::read(&path).unwrap();
        let run = |compact_handshakes: bool| {
            let mut e = Engine::new(Options {
                flow: FlowConfig {
                    compact_handshakes,
                    ..FlowConfig::default()
                },
                ..Options::default()
            });
            let mut r = CaptureReader::new(&bytes[..]).unwrap();
            while let Some(p) = r.next_packet().unwrap() {
                e.push(p.ts, p.link, p.data, p.orig_len);
            }
            json(&e.finish())
        };
        assert_eq!(run(true), run(false), "{}", path.display());
    }
}

#[test]
fn scans_retrying_clients_and_busy_servers_are_not_floods() {
    let kinds = |frames: &[(i64, TcpSegment<'static>)]| -> Vec<String> {
        let mut e = Engine::new(Options::default());
        for (t, s) in frames {
            e.push_segment(at_ms(*t), LinkType::Ethernet, 54, s);
        }
        let a = e.finish();
        a.findings
            .iter()
            .chain(&a.minor_findings)
            .map(|f| f.kind.to_string())
            .collect()
    };
    // A port scan: one SYN to each of 5,000 ports in 1 s, each refused.
    let scan = port_scan(5000, 5);
    // One refusal finding for the scanned server, not one per port.
    assert_eq!(kinds(&scan), ["connection_refused"]);
    // 500 clients that cannot reach a dead server: each SYN retried at 1 s
    // and 3 s, as a TCP stack does.
    let mut dead = Vec::new();
    for n in 0..500u32 {
        let s = syn(n, n * 7, MSS_WS);
        let t = i64::from(n) * 10;
        dead.extend([(t, s.clone()), (t + 1000, s.clone()), (t + 3000, s)]);
    }
    dead.sort_by_key(|f| f.0);
    let k = kinds(&dead);
    assert!(!k.contains(&"syn_flood".to_string()), "{k:?}");
    // A busy server: 2,000 clients connect at 200/s, each handshake
    // completed (SYN, SYN-ACK, ACK) and closed with a reset.
    let mut busy = Vec::new();
    for n in 0..2000u32 {
        let s = syn(n, n * 13, MSS_WS);
        let t = i64::from(n) * 5;
        let mut synack = s.clone();
        std::mem::swap(&mut synack.src, &mut synack.dst);
        std::mem::swap(&mut synack.src_port, &mut synack.dst_port);
        synack.flags = TcpFlags(TcpFlags::SYN | TcpFlags::ACK);
        synack.seq = n * 17;
        synack.ack = s.seq.wrapping_add(1);
        let mut ack = s.clone();
        ack.flags = TcpFlags(TcpFlags::ACK);
        ack.seq = s.seq.wrapping_add(1);
        ack.ack = synack.seq.wrapping_add(1);
        ack.options_raw = &[];
        let mut rst = ack.clone();
        rst.flags = TcpFlags(TcpFlags::RST | TcpFlags::ACK);
        busy.extend([(t, s), (t, synack), (t + 1, ack), (t + 2, rst)]);
    }
    let k = kinds(&busy);
    assert!(!k.contains(&"syn_flood".to_string()), "{k:?}");
    // The same 500 SYNs sent once each, unanswered: that is a flood.
    let once: Vec<_> = (0..500u32)
        .map(|n| (i64::from(n) * 10, syn(n, n * 7, &[])))
        .collect();
    assert_eq!(kinds(&once), ["syn_flood"]);
}

#[test]
fn a_port_scan_is_one_refusal_finding_for_the_server() {
    let mut e = Engine::new(Options::default());
    for (t, s) in port_scan(20_000, 10) {
        e.push_segment(at_ms(t), LinkType::Ethernet, 54, &s);
    }
    let a = e.finish();
    assert_eq!(a.findings.len(), 1, "{:?}", a.findings);
    let f = &json(&a)["findings"][0];
    assert_eq!(f["kind"], "connection_refused");
    assert_eq!(f["culprit"]["endpoint"], "10.0.0.80:*");
    assert_eq!(f["connections"], 20_000);
    assert_eq!(f["details"]["ports"], 20_000);
    assert_eq!(f["details"]["ports_sample"].as_array().unwrap().len(), 10);
    assert!(f["explanation"].as_str().unwrap().contains("port scan"));
}
