//! Parser messages, the evaluator on handcrafted frames, and the compiled
//! programs run by a BPF interpreter against the evaluator (property tests).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;

use crate::ast::{Cmp, Dir, Expr, Net, Prim, Proto, Transport};
use crate::{interp, Filter, LinkType, SNAP};

// ---------------------------------------------------------------------------
// Frames built to order.

#[derive(Debug, Clone)]
enum L3 {
    V4 {
        /// Header length in 32-bit words (5 = no options; up to 15).
        ihl: u8,
        /// Flags and fragment offset field.
        frag: u16,
        proto: u8,
        src: Ipv4Addr,
        dst: Ipv4Addr,
    },
    V6 {
        next: u8,
        /// The fragment header's next header, when `next` is 44.
        frag_next: u8,
        src: Ipv6Addr,
        dst: Ipv6Addr,
    },
    /// Not IP: this ethertype, or this first byte on raw IP.
    Other(u16),
}

#[derive(Debug, Clone)]
struct Spec {
    l3: L3,
    sport: u16,
    dport: u16,
    payload: usize,
    /// VLAN tag protocol ids before the ethertype (Ethernet only).
    tags: Vec<u16>,
    /// Keep at most this many bytes (a snaplen).
    cut: Option<usize>,
}

fn ip_bytes(s: &Spec) -> (u16, Vec<u8>) {
    let mut l4 = Vec::new();
    l4.extend_from_slice(&s.sport.to_be_bytes());
    l4.extend_from_slice(&s.dport.to_be_bytes());
    l4.extend_from_slice(&[0x11; 16]);
    l4.extend(std::iter::repeat_n(0xab, s.payload));
    match &s.l3 {
        L3::V4 {
            ihl,
            frag,
            proto,
            src,
            dst,
        } => {
            let hl = usize::from(*ihl) * 4;
            let mut h = vec![0x01; hl.max(20)];
            h[0] = 0x40 | (ihl & 0x0f);
            h[1] = 0;
            let total = (h.len() + l4.len()) as u16;
            h[2..4].copy_from_slice(&total.to_be_bytes());
            h[4..6].copy_from_slice(&[0x12, 0x34]);
            h[6..8].copy_from_slice(&frag.to_be_bytes());
            h[8] = 64;
            h[9] = *proto;
            h[10..12].copy_from_slice(&[0, 0]);
            h[12..16].copy_from_slice(&src.octets());
            h[16..20].copy_from_slice(&dst.octets());
            h.extend(l4);
            (0x0800, h)
        }
        L3::V6 {
            next,
            frag_next,
            src,
            dst,
        } => {
            let mut h = vec![0u8; 40];
            h[0] = 0x60;
            let mut rest = Vec::new();
            if *next == 44 {
                rest.extend_from_slice(&[*frag_next, 0, 0, 0, 0, 0, 0, 1]);
            }
            rest.extend(l4);
            h[4..6].copy_from_slice(&(rest.len() as u16).to_be_bytes());
            h[6] = *next;
            h[7] = 64;
            h[8..24].copy_from_slice(&src.octets());
            h[24..40].copy_from_slice(&dst.octets());
            h.extend(rest);
            (0x86DD, h)
        }
        L3::Other(e) => {
            let mut b = vec![(*e >> 8) as u8, *e as u8];
            b.extend(l4);
            (*e, b)
        }
    }
}

fn frame(link: LinkType, s: &Spec) -> Vec<u8> {
    let (ethertype, ip) = ip_bytes(s);
    let mut f = Vec::new();
    match link {
        LinkType::Ethernet => {
            f.extend_from_slice(&[2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2]);
            for t in &s.tags {
                f.extend_from_slice(&t.to_be_bytes());
                f.extend_from_slice(&[0x00, 0x2a]);
            }
            f.extend_from_slice(&ethertype.to_be_bytes());
        }
        LinkType::LinuxSll => {
            f.extend_from_slice(&[0, 0, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0]);
            f.extend_from_slice(&ethertype.to_be_bytes());
        }
        LinkType::LinuxSll2 => {
            f.extend_from_slice(&ethertype.to_be_bytes());
            f.extend_from_slice(&[0, 0, 0, 0, 0, 2, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0]);
        }
        LinkType::Null | LinkType::Loop => {
            let family: u32 = match ethertype {
                0x0800 => 2,
                0x86DD => 30,
                _ => 7,
            };
            if link == LinkType::Null {
                f.extend_from_slice(&family.to_le_bytes());
            } else {
                f.extend_from_slice(&family.to_be_bytes());
            }
        }
        _ => {}
    }
    f.extend(ip);
    if let Some(c) = s.cut {
        f.truncate(c);
    }
    f
}

fn tcp4(src: [u8; 4], sport: u16, dst: [u8; 4], dport: u16) -> Spec {
    Spec {
        l3: L3::V4 {
            ihl: 5,
            frag: 0x4000,
            proto: 6,
            src: src.into(),
            dst: dst.into(),
        },
        sport,
        dport,
        payload: 10,
        tags: vec![],
        cut: None,
    }
}

fn tcp6(src: &str, sport: u16, dst: &str, dport: u16) -> Spec {
    Spec {
        l3: L3::V6 {
            next: 6,
            frag_next: 0,
            src: src.parse().unwrap(),
            dst: dst.parse().unwrap(),
        },
        sport,
        dport,
        payload: 10,
        tags: vec![],
        cut: None,
    }
}

const LINKS: [LinkType; 8] = [
    LinkType::Ethernet,
    LinkType::RawIp,
    LinkType::LinuxSll,
    LinkType::LinuxSll2,
    LinkType::Ipv4,
    LinkType::Ipv6,
    LinkType::Null,
    LinkType::Loop,
];

/// The compiled program passes Linux's checks and agrees with the evaluator.
fn agree(f: &Filter, link: LinkType, pkt: &[u8]) -> Result<(), String> {
    let prog = f.compile(link).map_err(|e| e.to_string())?;
    interp::check(&prog).map_err(|e| format!("{f}: rejected by the checker: {e}"))?;
    let want = if f.matches(link, pkt) { SNAP } else { 0 };
    let got = interp::run(&prog, pkt);
    if got != want {
        let listing: Vec<String> = prog
            .iter()
            .enumerate()
            .map(|(i, x)| format!("{i:4}: {x}"))
            .collect();
        return Err(format!(
            "{f} on {link:?} {pkt:02x?}: program says {got}, evaluator {want}\n{}",
            listing.join("\n")
        ));
    }
    Ok(())
}

fn keeps(filter: &str, link: LinkType, s: &Spec) -> bool {
    let f = Filter::parse(filter).unwrap();
    let pkt = frame(link, s);
    agree(&f, link, &pkt).unwrap();
    f.matches(link, &pkt)
}

// ---------------------------------------------------------------------------
// The parser.

fn err(text: &str) -> String {
    Filter::parse(text).unwrap_err().to_string()
}

#[test]
fn parse_errors_say_what_and_where() {
    assert_eq!(
        err("port eighty"),
        "expected a port number after 'port', found 'eighty' at column 6"
    );
    assert_eq!(
        err("port eighty and ("),
        "expected a port number after 'port', found 'eighty' at column 6"
    );
    assert_eq!(
        err("port 80 and ("),
        "expected a primitive (host, net, port, portrange, src, dst, tcp, udp, sctp, icmp, icmp6, ip, ip6), 'not' or '(', found the end at column 14"
    );
    assert_eq!(
        err("(tcp or udp"),
        "expected ')' to close the '(' at column 1, found the end at column 12"
    );
    assert_eq!(
        err("tcp)"),
        "unexpected ')' with no '(' before it at column 4"
    );
    assert_eq!(
        err("port 70000"),
        "expected a port number after 'port', found '70000' (ports are 0 to 65535) at column 6"
    );
    assert_eq!(
        err("host example.com"),
        "expected an IPv4 or IPv6 address after 'host', found 'example.com' (names are not resolved) at column 6"
    );
    assert_eq!(
        err("net 10.0.0.1/8"),
        "'10.0.0.1/8' has host bits set (the network is 10.0.0.0/8) at column 5"
    );
    assert_eq!(
        err("net 10.0.0.0/33"),
        "'10.0.0.0/33': the prefix length must be a number from 0 to 32 at column 5"
    );
    assert_eq!(
        err("ip6 host 10.0.0.1"),
        "'ip6' needs an IPv6 address, found '10.0.0.1' at column 10"
    );
    assert_eq!(
        err("tcp host 10.0.0.1"),
        "'tcp' cannot qualify 'host': only 'ip'/'ip6' qualify host and net, and 'tcp'/'udp'/'sctp' port and portrange at column 10"
    );
    assert_eq!(
        err("tcp & udp"),
        "unexpected '&' (write '&&' or 'and') at column 5"
    );
    assert_eq!(
        err("80"),
        "expected a primitive (host, net, port, portrange, src, dst, tcp, udp, sctp, icmp, icmp6, ip, ip6), 'not' or '(', found '80' (a number alone means nothing: write 'port 80') at column 1"
    );
    assert_eq!(
        err("tcp port 80 udp"),
        "expected 'and', 'or' or the end, found 'udp' at column 13"
    );
    assert_eq!(
        err("src"),
        "expected 'host', 'net', 'port' or 'portrange' after 'src', found the end at column 4"
    );
    assert_eq!(
        err("portrange 80"),
        "expected a port range like 8000-8080 after 'portrange', found '80' at column 11"
    );
    assert_eq!(
        err("port 80 or http"),
        "expected a port number after 'port' (implied), found 'http' at column 12"
    );
    assert_eq!(
        err("tcp and not"),
        "expected an expression after 'not', found the end at column 12"
    );
    assert!(err(&"(".repeat(200)).contains("nested too deeply"));
}

#[test]
fn a_mistyped_keyword_is_named_with_a_suggestion() {
    assert_eq!(
        err("hostt 10.0.0.1"),
        "unknown word 'hostt' (did you mean 'host'?) at column 1"
    );
    assert_eq!(
        err("port 80 and hostt 10.0.0.1"),
        "unknown word 'hostt' (did you mean 'host'?) at column 13"
    );
    assert_eq!(
        err("tcp and prot 80"),
        "unknown word 'prot' (did you mean 'port'?) at column 9"
    );
    // Not a typo of anything: the shorthand's own message.
    assert_eq!(
        err("port 80 or http"),
        "expected a port number after 'port' (implied), found 'http' at column 12"
    );
}

fn bytes(base: Proto, offset: u16, size: u8, mask: Option<u32>, op: Cmp, value: u32) -> Expr {
    Expr::Prim(Prim::Bytes {
        base,
        offset,
        size,
        mask,
        op,
        value,
    })
}

#[test]
fn byte_offset_tests_parse_as_tcpdump_writes_them() {
    assert_eq!(
        parsed("tcp[tcpflags] & tcp-syn != 0"),
        bytes(Proto::Tcp, 13, 1, Some(2), Cmp::Ne, 0)
    );
    assert_eq!(
        parsed("tcp[13] & (tcp-syn|tcp-ack) == tcp-syn"),
        bytes(Proto::Tcp, 13, 1, Some(0x12), Cmp::Eq, 2)
    );
    assert_eq!(
        parsed("tcp[13]=2"),
        bytes(Proto::Tcp, 13, 1, None, Cmp::Eq, 2)
    );
    assert_eq!(
        parsed("ip[2:2] > 576 and port 80"),
        and(
            bytes(Proto::Ip, 2, 2, None, Cmp::Gt, 576),
            port(Dir::SrcOrDst, 80)
        )
    );
    assert_eq!(
        parsed("not icmp[icmptype] = icmp-echo"),
        not(bytes(Proto::Icmp, 0, 1, None, Cmp::Eq, 8))
    );
    assert_eq!(
        parsed("udp[4:2] & 0xff00 <= 256"),
        bytes(Proto::Udp, 4, 2, Some(0xff00), Cmp::Le, 256)
    );
    let f = Filter::parse("tcp[tcpflags] & (tcp-syn|tcp-ack) == tcp-syn").unwrap();
    assert_eq!(f.to_string(), "tcp[13] & 18 = 2");
    assert_eq!(
        err("tcp[13] 2"),
        "expected '&' or a comparison (=, !=, <, <=, >, >=) after 'tcp[13]', found '2' at column 9"
    );
    assert_eq!(
        err("tcp[13:3] = 1"),
        "'tcp[13:3]': the size must be 1, 2 or 4 bytes at column 1"
    );
    assert!(err("eth[0] = 1").contains("byte offsets count from ip, ip6, tcp"));
    assert_eq!(
        err("tcp & udp"),
        "unexpected '&' (write '&&' or 'and') at column 5"
    );
}

#[test]
fn byte_offset_tests_read_the_header_they_name() {
    let syn = |flags: u8, link: LinkType, v6: bool| {
        let s = Spec {
            l3: if v6 {
                L3::V6 {
                    next: 6,
                    frag_next: 0,
                    src: V6[0].parse().unwrap(),
                    dst: V6[1].parse().unwrap(),
                }
            } else {
                L3::V4 {
                    ihl: 6,
                    frag: 0,
                    proto: 6,
                    src: V4[0].into(),
                    dst: V4[1].into(),
                }
            },
            sport: 40000,
            dport: 80,
            payload: 0,
            tags: vec![],
            cut: None,
        };
        let mut f = frame(link, &s);
        // The transport header is the frame's last 20 bytes.
        let at = f.len() - 20 + 13;
        f[at] = flags;
        f
    };
    for link in [LinkType::Ethernet, LinkType::RawIp, LinkType::LinuxSll] {
        for v6 in [false, true] {
            let check = |filter: &str, flags: u8| {
                let f = Filter::parse(filter).unwrap();
                let pkt = syn(flags, link, v6);
                agree(&f, link, &pkt).unwrap();
                f.matches(link, &pkt)
            };
            assert!(check("tcp[tcpflags] & tcp-syn != 0", 0x02));
            assert!(check("tcp[tcpflags] & tcp-syn != 0", 0x12));
            assert!(!check("tcp[tcpflags] & tcp-syn != 0", 0x10));
            assert!(check("tcp[13] & (tcp-syn|tcp-ack) == tcp-syn", 0x02));
            assert!(!check("tcp[13] & (tcp-syn|tcp-ack) == tcp-syn", 0x12));
            assert!(check("tcp[2:2] = 80", 0));
            assert!(check("tcp[0:4] = 0x9c400050", 0));
            assert!(!check("udp[2:2] = 80", 0));
            // Past what was captured: false.
            assert!(!check("tcp[60] = 0", 0));
            let ip = if v6 { "ip6[6] = 6" } else { "ip[9] = 6" };
            assert!(check(ip, 0));
            assert!(check(
                if v6 {
                    "not ip[9] = 6"
                } else {
                    "ip[0] & 0xf = 6"
                },
                0
            ));
        }
    }
}

fn parsed(text: &str) -> Expr {
    Filter::parse(text).unwrap().expr().clone()
}

fn port(dir: Dir, p: u16) -> Expr {
    Expr::Prim(Prim::Port {
        proto: None,
        dir,
        lo: p,
        hi: p,
    })
}

fn proto(p: Proto) -> Expr {
    Expr::Prim(Prim::Proto(p))
}

fn and(a: Expr, b: Expr) -> Expr {
    Expr::And(Box::new(a), Box::new(b))
}

fn or(a: Expr, b: Expr) -> Expr {
    Expr::Or(Box::new(a), Box::new(b))
}

fn not(a: Expr) -> Expr {
    Expr::Not(Box::new(a))
}

#[test]
fn and_and_or_have_equal_precedence_left_to_right_and_not_binds_tightest() {
    // pcap-filter(7): "Alternation and concatenation have equal precedence
    // and associate left to right."
    assert_eq!(
        parsed("tcp or udp and port 53"),
        and(
            or(proto(Proto::Tcp), proto(Proto::Udp)),
            port(Dir::SrcOrDst, 53)
        )
    );
    assert_eq!(
        parsed("port 53 and tcp || udp"),
        or(
            and(port(Dir::SrcOrDst, 53), proto(Proto::Tcp)),
            proto(Proto::Udp)
        )
    );
    assert_eq!(
        parsed("not tcp and udp"),
        and(not(proto(Proto::Tcp)), proto(Proto::Udp))
    );
    assert_eq!(
        parsed("!(tcp && ip6)"),
        not(and(proto(Proto::Tcp), proto(Proto::Ip6)))
    );
    assert_eq!(parsed("  "), Expr::All);
}

#[test]
fn shorthand_repeats_the_previous_qualifiers() {
    assert_eq!(
        parsed("port 80 or 443"),
        or(port(Dir::SrcOrDst, 80), port(Dir::SrcOrDst, 443))
    );
    assert_eq!(
        parsed("tcp dst port 80 or 8080"),
        parsed("tcp dst port 80 or tcp dst port 8080")
    );
    assert_eq!(
        parsed("host 10.0.0.1 and not 10.0.0.2"),
        parsed("host 10.0.0.1 and not host 10.0.0.2")
    );
    assert_eq!(parsed("10.0.0.1"), parsed("host 10.0.0.1"));
    assert_eq!(
        parsed("10.0.0.0/8 or 2001:db8::/32"),
        parsed("net 10.0.0.0/8 or net 2001:db8::/32")
    );
    assert_eq!(parsed("src 10.0.0.1"), parsed("src host 10.0.0.1"));
    assert_eq!(parsed("src or dst port 80"), parsed("port 80"));
    assert_eq!(parsed("dst and src port 80"), port(Dir::SrcAndDst, 80));
    // `src or dst` is a qualifier only when a kind or value follows.
    assert_eq!(
        parsed("src port 1 or dst port 2"),
        or(port(Dir::Src, 1), port(Dir::Dst, 2))
    );
    assert_eq!(
        parsed("portrange 9000-8000"),
        Expr::Prim(Prim::Port {
            proto: None,
            dir: Dir::SrcOrDst,
            lo: 8000,
            hi: 9000
        })
    );
}

#[test]
fn canonical_text_parses_back() {
    for text in [
        "tcp port 8080 and host 10.0.0.2",
        "not (udp or icmp) and src net 10.0.0.0/8",
        "ip6 and dst host 2001:db8::1 or portrange 1-1023",
        "src and dst net fe80::/10 and sctp src port 5",
        "",
    ] {
        let f = Filter::parse(text).unwrap();
        assert_eq!(Filter::parse(&f.to_string()).unwrap(), f, "{text} -> {f}");
    }
    let f = Filter::parse("not (tcp or udp and port 53) and (ip or ip6 and not icmp)").unwrap();
    assert_eq!(
        f.to_string(),
        "not (tcp or udp and port 53) and (ip or ip6 and not icmp)"
    );
    // As deep as the parser allows: the canonical text is no deeper.
    let deep = format!("{}port 80 or !80 or !0", "!".repeat(100));
    let f = Filter::parse(&deep).unwrap();
    assert_eq!(Filter::parse(&f.to_string()).unwrap(), f);
}

// ---------------------------------------------------------------------------
// Matching handcrafted frames (each also checked against the program).

#[test]
fn ports_hosts_and_protocols_on_every_link_type() {
    let s = tcp4([10, 0, 0, 1], 40000, [10, 0, 0, 2], 8080);
    for link in [
        LinkType::Ethernet,
        LinkType::RawIp,
        LinkType::LinuxSll,
        LinkType::LinuxSll2,
        LinkType::Ipv4,
        LinkType::Null,
        LinkType::Loop,
    ] {
        assert!(
            keeps("tcp port 8080 and host 10.0.0.2", link, &s),
            "{link:?}"
        );
        assert!(keeps("src host 10.0.0.1 and dst port 8080", link, &s));
        assert!(!keeps("dst host 10.0.0.1", link, &s));
        assert!(!keeps("udp port 8080", link, &s));
        assert!(keeps("ip and not ip6", link, &s));
        assert!(keeps("net 10.0.0.0/8", link, &s));
        assert!(!keeps("net 10.1.0.0/16", link, &s));
        assert!(keeps("portrange 8000-8100", link, &s));
        assert!(!keeps("src portrange 8000-8100", link, &s));
        assert!(keeps("src and dst net 10.0.0.0/24", link, &s));
    }
    let s6 = tcp6("2001:db8::1", 443, "2001:db8::2", 50000);
    for link in [
        LinkType::Ethernet,
        LinkType::RawIp,
        LinkType::Ipv6,
        LinkType::LinuxSll,
    ] {
        assert!(keeps("ip6 and tcp src port 443", link, &s6));
        assert!(keeps("host 2001:db8::2 and net 2001:db8::/32", link, &s6));
        assert!(!keeps("host 10.0.0.2 or ip", link, &s6));
        assert!(keeps("src net 2001:db8::/127", link, &s6));
        assert!(!keeps("dst net 2001:db8::/127", link, &s6));
    }
}

#[test]
fn ipv4_options_and_fragments() {
    let mut s = tcp4([10, 0, 0, 1], 1234, [10, 0, 0, 2], 80);
    s.l3 = L3::V4 {
        ihl: 9,
        frag: 0,
        proto: 6,
        src: [10, 0, 0, 1].into(),
        dst: [10, 0, 0, 2].into(),
    };
    assert!(
        keeps("tcp dst port 80", LinkType::Ethernet, &s),
        "options skipped"
    );
    // First fragment (more-fragments set, offset 0): ports readable.
    s.l3 = L3::V4 {
        ihl: 5,
        frag: 0x2000,
        proto: 17,
        src: [10, 0, 0, 1].into(),
        dst: [10, 0, 0, 2].into(),
    };
    assert!(keeps("udp port 80", LinkType::Ethernet, &s));
    // A later fragment: still udp, but no ports (as tcpdump).
    s.l3 = L3::V4 {
        ihl: 5,
        frag: 0x00b9,
        proto: 17,
        src: [10, 0, 0, 1].into(),
        dst: [10, 0, 0, 2].into(),
    };
    assert!(keeps("udp and host 10.0.0.2", LinkType::Ethernet, &s));
    assert!(!keeps("port 80", LinkType::Ethernet, &s));
    assert!(keeps("not port 80", LinkType::Ethernet, &s));
    // A header length under 20 bytes is malformed: no ports.
    s.l3 = L3::V4 {
        ihl: 3,
        frag: 0,
        proto: 6,
        src: [10, 0, 0, 1].into(),
        dst: [10, 0, 0, 2].into(),
    };
    assert!(!keeps("port 80", LinkType::RawIp, &s));
}

#[test]
fn ipv6_fragment_header_gives_the_protocol_but_no_ports() {
    let mut s = tcp6("::1", 80, "::2", 9);
    s.l3 = L3::V6 {
        next: 44,
        frag_next: 6,
        src: "::1".parse().unwrap(),
        dst: "::2".parse().unwrap(),
    };
    assert!(keeps("tcp", LinkType::Ethernet, &s));
    assert!(!keeps("tcp port 80", LinkType::Ethernet, &s));
    // Hop-by-hop options (0) are not walked.
    s.l3 = L3::V6 {
        next: 0,
        frag_next: 0,
        src: "::1".parse().unwrap(),
        dst: "::2".parse().unwrap(),
    };
    assert!(!keeps("tcp or udp or port 80", LinkType::Ethernet, &s));
    assert!(keeps("ip6 and host ::2", LinkType::Ethernet, &s));
}

#[test]
fn vlan_tags_are_looked_through_up_to_two() {
    let mut s = tcp4([192, 168, 1, 1], 5000, [192, 168, 1, 2], 80);
    s.tags = vec![0x8100];
    assert!(keeps("tcp port 80", LinkType::Ethernet, &s));
    s.tags = vec![0x88a8, 0x8100];
    assert!(keeps(
        "tcp port 80 and host 192.168.1.2",
        LinkType::Ethernet,
        &s
    ));
    s.tags = vec![0x8100, 0x8100, 0x8100];
    assert!(!keeps("tcp or ip", LinkType::Ethernet, &s));
    assert!(keeps("not ip", LinkType::Ethernet, &s));
}

#[test]
fn truncated_frames_fail_only_the_tests_on_missing_fields() {
    let mut s = tcp4([10, 0, 0, 1], 1234, [10, 0, 0, 2], 80);
    s.cut = Some(14 + 20 + 2); // the source port only
    assert!(keeps("tcp and host 10.0.0.2", LinkType::Ethernet, &s));
    assert!(!keeps("port 1234", LinkType::Ethernet, &s));
    assert!(keeps("not port 80", LinkType::Ethernet, &s));
    s.cut = Some(14 + 19);
    assert!(keeps("ip", LinkType::Ethernet, &s));
    assert!(!keeps("tcp or host 10.0.0.2", LinkType::Ethernet, &s));
    s.cut = Some(13);
    assert!(!keeps("ip or ip6", LinkType::Ethernet, &s));
    assert!(keeps("", LinkType::Ethernet, &s));
}

#[test]
fn icmp_is_ipv4_and_icmp6_is_ipv6() {
    let mut s = tcp4([10, 0, 0, 1], 0, [10, 0, 0, 2], 0);
    s.l3 = L3::V4 {
        ihl: 5,
        frag: 0,
        proto: 1,
        src: [10, 0, 0, 1].into(),
        dst: [10, 0, 0, 2].into(),
    };
    assert!(keeps("icmp", LinkType::RawIp, &s));
    assert!(!keeps("icmp6 or port 0", LinkType::RawIp, &s));
    let mut s6 = tcp6("::1", 0, "::2", 0);
    s6.l3 = L3::V6 {
        next: 58,
        frag_next: 0,
        src: "::1".parse().unwrap(),
        dst: "::2".parse().unwrap(),
    };
    assert!(keeps("icmp6", LinkType::RawIp, &s6));
    assert!(!keeps("icmp", LinkType::RawIp, &s6));
}

#[test]
fn non_ip_frames_match_nothing_but_negations() {
    let mut s = tcp4([10, 0, 0, 1], 80, [10, 0, 0, 2], 80);
    s.l3 = L3::Other(0x0806);
    assert!(!keeps(
        "ip or ip6 or tcp or port 80 or host 10.0.0.1",
        LinkType::Ethernet,
        &s
    ));
    assert!(keeps("not ip", LinkType::Ethernet, &s));
    s.l3 = L3::Other(0x0000);
    assert!(!keeps("ip or ip6", LinkType::RawIp, &s));
    assert!(!Filter::parse("ip")
        .unwrap()
        .matches(LinkType::Unknown(147), &[0x45; 60]));
}

#[test]
fn long_or_chains_need_long_jumps_and_still_agree() {
    // 300 ports: the first primitives' "true" target is over 255 instructions away.
    let text: Vec<String> = (1..=300).map(|p| format!("port {p}")).collect();
    let f = Filter::parse(&text.join(" or ")).unwrap();
    let prog = f.compile(LinkType::Ethernet).unwrap();
    assert!(prog.len() > 1000);
    assert!(prog
        .iter()
        .any(|i| i.code == crate::bpf::JMP | crate::bpf::JA && i.k > 255));
    interp::check(&prog).unwrap();
    for p in [1u16, 2, 150, 299, 300, 301, 8080] {
        let pkt = frame(
            LinkType::Ethernet,
            &tcp4([1, 1, 1, 1], 9999, [2, 2, 2, 2], p),
        );
        agree(&f, LinkType::Ethernet, &pkt).unwrap();
        assert_eq!(f.matches(LinkType::Ethernet, &pkt), (1..=300).contains(&p));
    }
    // The same chain negated and nested.
    let g = Filter::parse(&format!("not ({}) and tcp", text.join(" or "))).unwrap();
    let pkt = frame(
        LinkType::Ethernet,
        &tcp4([1, 1, 1, 1], 9999, [2, 2, 2, 2], 7),
    );
    agree(&g, LinkType::Ethernet, &pkt).unwrap();
}

#[test]
fn programs_too_long_for_the_kernel_are_an_error() {
    let text: Vec<String> = (0..1500).map(|i| format!("host 2001:db8::{i:x}")).collect();
    let f = Filter::parse(&text.join(" or ")).unwrap();
    let e = f.compile(LinkType::Ethernet).unwrap_err();
    assert!(e.to_string().contains("too long for the kernel"), "{e}");
    assert!(Filter::parse("tcp")
        .unwrap()
        .compile(LinkType::Unknown(9))
        .is_err());
}

#[test]
fn the_empty_filter_keeps_everything() {
    let f = Filter::parse("").unwrap();
    assert_eq!(f.compile(LinkType::Ethernet).unwrap().len(), 1);
    assert!(f.matches(LinkType::Ethernet, &[]));
}

// ---------------------------------------------------------------------------
// Property tests: random filters × random frames.

const V4: [[u8; 4]; 5] = [
    [10, 0, 0, 1],
    [10, 0, 0, 2],
    [10, 1, 2, 3],
    [192, 168, 1, 1],
    [172, 16, 0, 9],
];
const V6: [&str; 5] = [
    "2001:db8::1",
    "2001:db8::2",
    "2001:db8:1::1",
    "fe80::1",
    "::1",
];
const PORTS: [u16; 7] = [0, 22, 53, 80, 443, 8080, 65535];

fn addr4() -> impl Strategy<Value = Ipv4Addr> {
    prop_oneof![
        4 => prop::sample::select(V4.to_vec()).prop_map(Ipv4Addr::from),
        1 => any::<u32>().prop_map(Ipv4Addr::from),
    ]
}

fn addr6() -> impl Strategy<Value = Ipv6Addr> {
    prop_oneof![
        4 => prop::sample::select(V6.to_vec()).prop_map(|a| a.parse::<Ipv6Addr>().unwrap()),
        1 => any::<u128>().prop_map(Ipv6Addr::from),
    ]
}

fn addr() -> impl Strategy<Value = IpAddr> {
    prop_oneof![addr4().prop_map(IpAddr::V4), addr6().prop_map(IpAddr::V6)]
}

fn port_value() -> impl Strategy<Value = u16> {
    prop_oneof![4 => prop::sample::select(PORTS.to_vec()), 1 => any::<u16>()]
}

fn dir() -> impl Strategy<Value = Dir> {
    prop::sample::select(vec![Dir::Src, Dir::Dst, Dir::SrcOrDst, Dir::SrcAndDst])
}

fn prim() -> impl Strategy<Value = Prim> {
    prop_oneof![
        prop::sample::select(vec![
            Proto::Ip,
            Proto::Ip6,
            Proto::Tcp,
            Proto::Udp,
            Proto::Sctp,
            Proto::Icmp,
            Proto::Icmp6
        ])
        .prop_map(Prim::Proto),
        (dir(), addr()).prop_map(|(d, a)| Prim::Host(d, a)),
        (dir(), addr(), 0u8..=128).prop_map(|(d, a, p)| Prim::Net(d, Net::containing(a, p))),
        (
            prop::option::of(prop::sample::select(vec![
                Transport::Tcp,
                Transport::Udp,
                Transport::Sctp
            ])),
            dir(),
            port_value(),
            prop_oneof![Just(None), port_value().prop_map(Some)]
        )
            .prop_map(|(proto, dir, a, b)| {
                let b = b.unwrap_or(a);
                Prim::Port {
                    proto,
                    dir,
                    lo: a.min(b),
                    hi: a.max(b),
                }
            }),
        (
            prop::sample::select(vec![
                Proto::Ip,
                Proto::Ip6,
                Proto::Tcp,
                Proto::Udp,
                Proto::Sctp,
                Proto::Icmp,
                Proto::Icmp6
            ]),
            prop_oneof![4 => 0u16..48, 1 => any::<u16>()],
            prop::sample::select(vec![1u8, 2, 4]),
            prop::option::of(prop_oneof![Just(0x12u32), Just(0x0f), any::<u32>()]),
            prop::sample::select(vec![Cmp::Eq, Cmp::Ne, Cmp::Lt, Cmp::Le, Cmp::Gt, Cmp::Ge]),
            prop_oneof![Just(0u32), Just(2), Just(0x11), Just(80), any::<u32>()],
        )
            .prop_map(|(base, offset, size, mask, op, value)| Prim::Bytes {
                base,
                offset,
                size,
                mask,
                op,
                value,
            }),
    ]
}

fn expr() -> impl Strategy<Value = Expr> {
    prim()
        .prop_map(Expr::Prim)
        .prop_recursive(5, 40, 2, |inner| {
            prop_oneof![
                inner.clone().prop_map(|e| Expr::Not(Box::new(e))),
                (inner.clone(), inner.clone())
                    .prop_map(|(a, b)| Expr::And(Box::new(a), Box::new(b))),
                (inner.clone(), inner).prop_map(|(a, b)| Expr::Or(Box::new(a), Box::new(b))),
            ]
        })
}

fn l3() -> impl Strategy<Value = L3> {
    let proto = prop_oneof![
        4 => prop::sample::select(vec![6u8, 17, 1, 132, 58, 44, 0]),
        1 => any::<u8>()
    ];
    prop_oneof![
        4 => (
            prop_oneof![4 => Just(5u8), 1 => 0u8..=15],
            prop_oneof![Just(0u16), Just(0x4000), Just(0x2000), any::<u16>()],
            proto.clone(),
            addr4(),
            addr4()
        )
            .prop_map(|(ihl, frag, proto, src, dst)| L3::V4 { ihl, frag, proto, src, dst }),
        3 => (proto.clone(), proto, addr6(), addr6())
            .prop_map(|(next, frag_next, src, dst)| L3::V6 { next, frag_next, src, dst }),
        1 => prop_oneof![Just(0x0806u16), Just(0x8100), Just(0x88cc), any::<u16>()].prop_map(L3::Other),
    ]
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        l3(),
        port_value(),
        port_value(),
        0usize..40,
        prop::collection::vec(prop::sample::select(vec![0x8100u16, 0x88a8, 0x9100]), 0..=3),
        prop::option::weighted(0.3, 0usize..120),
    )
        .prop_map(|(l3, sport, dport, payload, tags, cut)| Spec {
            l3,
            sport,
            dport,
            payload,
            tags,
            cut,
        })
}

/// A frame: built to a spec (then maybe damaged), or random bytes.
fn packet() -> impl Strategy<Value = (LinkType, Vec<u8>)> {
    let link = prop::sample::select(LINKS.to_vec());
    prop_oneof![
        6 => (link.clone(), spec(), prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..3))
            .prop_map(|(link, s, damage)| {
                let mut f = frame(link, &s);
                for (i, b) in damage {
                    if !f.is_empty() {
                        let at = i.index(f.len());
                        f[at] = b;
                    }
                }
                (link, f)
            }),
        1 => (link, prop::collection::vec(any::<u8>(), 0..100)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn compiled_programs_agree_with_the_evaluator(e in expr(), pkts in prop::collection::vec(packet(), 1..8)) {
        let f = Filter::from_expr(e);
        for (link, pkt) in pkts {
            if let Err(msg) = agree(&f, link, &pkt) {
                return Err(TestCaseError::fail(msg));
            }
        }
    }

    #[test]
    fn canonical_text_round_trips(e in expr()) {
        let f = Filter::from_expr(e);
        let text = f.to_string();
        prop_assert_eq!(Filter::parse(&text).map_err(|e| e.to_string()), Ok(f), "{}", text);
    }

    #[test]
    fn the_parser_never_panics(text in "[a-z0-9 ()!&|:./-]{0,60}") {
        let _ = Filter::parse(&text);
    }
}
