//! Captures on `lo` and `any` (when root; skipped otherwise): timestamps,
//! the kernel filter, snap lengths, cooked frames. Each test sends UDP
//! datagrams with its own marker, as tests run side by side.

use std::net::UdpSocket;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::*;

fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

/// A capture, or `None` when not privileged to open one.
fn open(interface: &str, snaplen: u32, filter: Option<&str>) -> Option<Capture> {
    let f = filter.map(|f| Filter::parse(f).expect("parses"));
    match Capture::open(interface, snaplen, f.as_ref()) {
        Ok(c) => Some(c),
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => None,
        Err(e) => panic!("open {interface}: {e}"),
    }
}

/// Sends `payload` from a fresh UDP socket to 127.0.0.1:`port`.
fn send(port: u16, payload: &[u8]) {
    let s = UdpSocket::bind("127.0.0.1:0").expect("bind");
    s.send_to(payload, ("127.0.0.1", port)).expect("send");
}

/// A port nobody listens on (the datagram is still captured).
fn free_port() -> u16 {
    let s = UdpSocket::bind("127.0.0.1:0").expect("bind");
    s.local_addr().expect("addr").port()
}

/// UDP frames (data, orig_len, ts) that contain `marker`, read for up to
/// `window` (not the ICMP "port unreachable" that quotes them).
fn frames_with(cap: &mut Capture, marker: &[u8], window: Duration) -> Vec<(Vec<u8>, u32, i64)> {
    let end = Instant::now() + window;
    let mut out = Vec::new();
    let proto_at = if cap.link_type() == LinkType::Ethernet {
        23
    } else {
        9
    };
    while Instant::now() < end {
        if let Some(f) = cap.next_frame(Duration::from_millis(10)).expect("read") {
            let udp = f.data.get(proto_at) == Some(&17);
            if udp && f.data.windows(marker.len()).any(|w| w == marker) {
                out.push((f.data.to_vec(), f.orig_len, f.ts.nanos()));
            }
        }
    }
    out
}

#[test]
fn unknown_interface_is_a_clear_error() {
    let err = Capture::open("no-such-if0", 128, None)
        .err()
        .expect("an error");
    assert_eq!(err.kind(), io::ErrorKind::NotFound);
    assert_eq!(
        err.to_string(),
        "no interface named no-such-if0 in this network namespace"
    );
}

#[test]
fn loopback_frames_come_once_with_timestamps() {
    let Some(mut cap) = open("lo", 256, None) else {
        return;
    };
    assert_eq!(cap.link_type(), LinkType::Ethernet);
    let before = now_ns();
    send(free_port(), b"tcpdoctor-live-lo");
    let got = frames_with(&mut cap, b"tcpdoctor-live-lo", Duration::from_millis(300));
    // Sent and received on lo: one copy, not two.
    assert_eq!(got.len(), 1, "{got:?}");
    let (data, orig_len, ts) = &got[0];
    assert!(
        *ts >= before - 1_000_000 && *ts <= now_ns(),
        "timestamp {ts}"
    );
    assert_eq!(*orig_len as usize, data.len());
    assert_eq!(&data[12..14], &[0x08, 0x00], "an Ethernet header");
    assert!(cap.stats().expect("stats").received >= 1);
}

#[test]
fn the_kernel_filter_keeps_only_what_matches() {
    let (keep, drop) = (free_port(), free_port());
    let Some(mut cap) = open("lo", 512, Some(&format!("udp dst port {keep}"))) else {
        return;
    };
    send(drop, b"tcpdoctor-live-filter-drop");
    send(keep, b"tcpdoctor-live-filter-keep");
    let end = Instant::now() + Duration::from_millis(300);
    let mut kept = 0;
    while Instant::now() < end {
        if let Some(f) = cap.next_frame(Duration::from_millis(10)).expect("read") {
            // Nothing but the kept port gets through, whatever else is on lo.
            assert_eq!(u16::from_be_bytes([f.data[36], f.data[37]]), keep);
            assert!(!f.data.windows(4).any(|w| w == b"drop"));
            kept += 1;
        }
    }
    assert_eq!(kept, 1);
    // The kernel counts the outgoing copy on lo too (skipped here).
    let st = cap.stats().expect("stats");
    assert!(st.received >= 1 && st.dropped == 0, "{st:?}");
}

#[test]
fn snaplen_cuts_frames_and_orig_len_stays_whole() {
    for filter in [None, Some("udp")] {
        let Some(mut cap) = open("lo", 64, filter) else {
            return;
        };
        let mut payload = b"tcpdoctor-live-snap".to_vec();
        payload.resize(1000, b'x');
        send(free_port(), &payload);
        // The marker is in the first 64 bytes: 14 + 20 + 8 + 19.
        let got = frames_with(&mut cap, b"tcpdoctor-live-snap", Duration::from_millis(300));
        assert_eq!(got.len(), 1, "{filter:?}");
        assert_eq!(got[0].0.len(), 64, "{filter:?}");
        assert_eq!(got[0].1, 14 + 20 + 8 + 1000, "{filter:?}");
    }
}

#[test]
fn any_gives_ip_packets_without_link_header() {
    let port = free_port();
    let Some(mut cap) = open("any", 256, Some(&format!("udp port {port}"))) else {
        return;
    };
    assert_eq!(cap.link_type(), LinkType::RawIp);
    send(port, b"tcpdoctor-live-any");
    let got = frames_with(&mut cap, b"tcpdoctor-live-any", Duration::from_millis(300));
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].0[0], 0x45, "starts with the IPv4 header");
    assert_eq!(got[0].1 as usize, 20 + 8 + 18);
}

#[test]
fn a_quiet_link_still_delivers_within_the_retire_timeout() {
    let port = free_port();
    let Some(mut cap) = open("lo", 256, Some(&format!("udp port {port}"))) else {
        return;
    };
    send(port, b"tcpdoctor-live-quiet");
    let start = Instant::now();
    let f = cap.next_frame(cap.delivery_delay()).expect("read");
    assert!(f.is_some(), "nothing within {:?}", start.elapsed());
}

#[test]
fn the_kernel_accepts_every_compiled_program() {
    let chain: Vec<String> = (1..=250).map(|p| format!("port {p}")).collect();
    let long = chain.join(" or ");
    for expr in [
        "tcp port 8080 and host 10.0.0.2",
        "not (udp or icmp) and src net 10.0.0.0/8",
        "ip6 and dst host 2001:db8::1 or portrange 1-1023",
        "src and dst net fe80::/10 and sctp src port 5",
        "icmp6 or icmp or ip or ip6",
        &long,
    ] {
        for iface in ["lo", "any"] {
            if open(iface, 128, Some(expr)).is_none() {
                return;
            }
        }
    }
}

#[test]
fn the_kernel_keeps_what_the_evaluator_keeps() {
    let ports = [free_port(), free_port(), free_port()];
    let exprs = [
        format!("udp port {}", ports[0]),
        format!("not udp dst port {} and (ip6 or udp)", ports[1]),
        format!(
            "dst portrange {}-{} or icmp",
            ports[0].min(ports[2]),
            ports[0].max(ports[2])
        ),
        "ip6 and src host ::1".to_string(),
        "net 127.0.0.0/8 and not icmp".to_string(),
    ];
    for iface in ["lo", "any"] {
        for expr in &exprs {
            let Some(mut all) = open(iface, 512, None) else {
                return;
            };
            let filter = Filter::parse(expr).expect("parses");
            let mut kept = open(iface, 512, Some(expr)).expect("root");
            let marker = format!("tcpdoctor-live-kernel-{iface}-{expr}");
            for &port in &ports {
                send(port, marker.as_bytes());
                if let Ok(s) = UdpSocket::bind("[::1]:0") {
                    let _ = s.send_to(marker.as_bytes(), ("::1", port));
                }
            }
            // Loopback delivers in softirq context, which a loaded machine can
            // defer: let every frame land in both rings before either is read,
            // so the two reads see the same frames.
            std::thread::sleep(Duration::from_millis(100));
            let window = Duration::from_millis(200);
            let contains = |d: &[u8]| d.windows(marker.len()).any(|w| w == marker.as_bytes());
            let read = |cap: &mut Capture| {
                let end = Instant::now() + window;
                let mut out = Vec::new();
                while Instant::now() < end {
                    if let Some(f) = cap.next_frame(Duration::from_millis(10)).expect("read") {
                        if contains(f.data) {
                            out.push(f.data.to_vec());
                        }
                    }
                }
                out
            };
            let everything = read(&mut all);
            let want: Vec<_> = everything
                .iter()
                .filter(|d| filter.matches(all.link_type(), d))
                .cloned()
                .collect();
            let got = read(&mut kept);
            assert!(everything.len() >= 3, "{iface}: {}", everything.len());
            assert_eq!(got, want, "{iface} '{expr}'");
        }
    }
}
