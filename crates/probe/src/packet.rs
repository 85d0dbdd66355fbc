//! Probe packets built and replies parsed: TCP segments with their checksum,
//! ICMP/ICMPv6 errors with the TCP header they quote. No I/O.

use std::net::{IpAddr, Ipv6Addr};

use tcpdoctor_wire::{Ipv4Packet, Ipv6Packet, TcpHeader};

pub const PROTO_TCP: u8 = 6;
pub const FLAG_FIN: u8 = 0x01;
pub const FLAG_SYN: u8 = 0x02;
pub const FLAG_RST: u8 = 0x04;
pub const FLAG_ACK: u8 = 0x10;

/// Length of the probe's TCP header: 20 bytes and an MSS option.
pub const SYN_LEN: usize = 24;

/// A TCP header with no payload; `mss` adds the MSS option (SYN only).
pub fn tcp_segment(
    src: IpAddr,
    dst: IpAddr,
    sport: u16,
    dport: u16,
    seq: u32,
    flags: u8,
    mss: Option<u16>,
) -> Vec<u8> {
    let len = if mss.is_some() { SYN_LEN } else { 20 };
    let mut t = vec![0u8; len];
    t[0..2].copy_from_slice(&sport.to_be_bytes());
    t[2..4].copy_from_slice(&dport.to_be_bytes());
    t[4..8].copy_from_slice(&seq.to_be_bytes());
    t[12] = ((len / 4) as u8) << 4;
    t[13] = flags;
    let window: u16 = if flags & FLAG_RST != 0 { 0 } else { 64240 };
    t[14..16].copy_from_slice(&window.to_be_bytes());
    if let Some(mss) = mss {
        t[20] = 2;
        t[21] = 4;
        t[22..24].copy_from_slice(&mss.to_be_bytes());
    }
    let sum = tcp_checksum(src, dst, &t);
    t[16..18].copy_from_slice(&sum.to_be_bytes());
    t
}

/// The TCP checksum over the pseudo-header (RFC 9293 §3.1, RFC 8200 §8.1) and the segment.
pub fn tcp_checksum(src: IpAddr, dst: IpAddr, segment: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    let mut add = |b: &[u8]| {
        for pair in b.chunks(2) {
            let hi = u32::from(pair[0]) << 8;
            let lo = pair.get(1).copied().map_or(0, u32::from);
            sum += hi | lo;
        }
    };
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            add(&s.octets());
            add(&d.octets());
            add(&[0, PROTO_TCP]);
            add(&(segment.len() as u16).to_be_bytes());
        }
        (s, d) => {
            add(&v6(s).octets());
            add(&v6(d).octets());
            add(&(segment.len() as u32).to_be_bytes());
            add(&[0, 0, 0, PROTO_TCP]);
        }
    }
    add(segment);
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

fn v6(a: IpAddr) -> Ipv6Addr {
    match a {
        IpAddr::V4(a) => a.to_ipv6_mapped(),
        IpAddr::V6(a) => a,
    }
}

/// A TCP segment received from the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpReply {
    pub from: IpAddr,
    pub sport: u16,
    pub dport: u16,
    pub seq: u32,
    pub ack: u32,
    pub flags: u8,
    pub window: u16,
    /// IPv4 TTL or IPv6 hop limit of the reply.
    pub ttl: Option<u8>,
    /// Length of the packet as received (IP header included for IPv4).
    pub len: usize,
}

/// Parse what an IPv4 raw TCP socket delivers: the IP header and the segment.
pub fn parse_tcp4(buf: &[u8]) -> Option<TcpReply> {
    let ip = Ipv4Packet::new_checked(buf).ok()?;
    if ip.protocol() != PROTO_TCP || ip.fragment_offset() != 0 {
        return None;
    }
    let mut r = parse_tcp(ip.payload(), IpAddr::V4(ip.src()))?;
    r.ttl = Some(ip.ttl());
    r.len = buf.len();
    Some(r)
}

/// Parse what an IPv6 raw TCP socket delivers: the segment alone.
pub fn parse_tcp6(buf: &[u8], from: Ipv6Addr) -> Option<TcpReply> {
    let mut r = parse_tcp(buf, IpAddr::V6(from))?;
    r.len = buf.len() + 40;
    Some(r)
}

fn parse_tcp(seg: &[u8], from: IpAddr) -> Option<TcpReply> {
    let t = TcpHeader::new_checked(seg).ok()?;
    Some(TcpReply {
        from,
        sport: t.src_port(),
        dport: t.dst_port(),
        seq: t.seq(),
        ack: t.ack(),
        flags: (t.flags().0 & 0xff) as u8,
        window: t.window(),
        ttl: None,
        len: seg.len(),
    })
}

/// What an ICMP error says happened to a probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IcmpKind {
    /// TTL / hop limit reached zero in transit.
    TimeExceeded,
    /// Destination unreachable, with the ICMP code and family (codes differ).
    Unreachable { v6: bool, code: u8 },
}

impl IcmpKind {
    /// traceroute's annotation: `!N`, `!H`, `!P`, `!X`…
    pub fn mark(self) -> String {
        match self {
            IcmpKind::TimeExceeded => String::new(),
            IcmpKind::Unreachable { v6: false, code } => match code {
                0 => "!N".into(),
                1 => "!H".into(),
                2 => "!P".into(),
                3 => "!p".into(),
                4 => "!F".into(),
                9 | 10 | 13 => "!X".into(),
                c => format!("!<{c}>"),
            },
            IcmpKind::Unreachable { v6: true, code } => match code {
                0 => "!N".into(),
                1 => "!X".into(),
                3 => "!H".into(),
                4 => "!p".into(),
                c => format!("!<{c}>"),
            },
        }
    }
}

/// An ICMP error quoting one of our TCP probes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IcmpReply {
    /// The router (or host) that sent the error.
    pub from: IpAddr,
    pub kind: IcmpKind,
    /// The quoted probe: its destination, ports and sequence number.
    pub dst: IpAddr,
    pub sport: u16,
    pub dport: u16,
    pub seq: u32,
}

/// Parse what an IPv4 raw ICMP socket delivers: IP header, ICMP header, quoted datagram.
pub fn parse_icmp4(buf: &[u8]) -> Option<IcmpReply> {
    let ip = Ipv4Packet::new_checked(buf).ok()?;
    let icmp = ip.payload();
    // RFC 792: type 11 time exceeded, type 3 destination unreachable.
    let kind = icmp_kind(icmp, 11, 3, false)?;
    let inner = Ipv4Packet::new_checked(&icmp[8..]).ok()?;
    if inner.protocol() != PROTO_TCP {
        return None;
    }
    let quoted = &icmp[8 + inner.header_len()..];
    let (sport, dport, seq) = quoted_tcp(quoted)?;
    Some(IcmpReply {
        from: IpAddr::V4(ip.src()),
        kind,
        dst: IpAddr::V4(inner.dst()),
        sport,
        dport,
        seq,
    })
}

/// Parse what an IPv6 raw ICMPv6 socket delivers: the ICMPv6 message alone.
pub fn parse_icmp6(icmp: &[u8], from: Ipv6Addr) -> Option<IcmpReply> {
    // RFC 4443: type 3 time exceeded, type 1 destination unreachable.
    let kind = icmp_kind(icmp, 3, 1, true)?;
    let inner = Ipv6Packet::new_checked(&icmp[8..]).ok()?;
    // Probes carry no extension headers.
    if inner.next_header() != PROTO_TCP {
        return None;
    }
    let (sport, dport, seq) = quoted_tcp(&icmp[8 + 40..])?;
    Some(IcmpReply {
        from: IpAddr::V6(from),
        kind,
        dst: IpAddr::V6(inner.dst()),
        sport,
        dport,
        seq,
    })
}

/// What an ICMP (or ICMPv6) error of at least its 8-byte header says, by
/// the version's type numbers; `None` for any other message.
fn icmp_kind(icmp: &[u8], time_exceeded: u8, unreachable: u8, v6: bool) -> Option<IcmpKind> {
    let (&kind, rest) = icmp.split_first()?;
    if icmp.len() < 8 {
        return None;
    }
    if kind == time_exceeded {
        Some(IcmpKind::TimeExceeded)
    } else if kind == unreachable {
        Some(IcmpKind::Unreachable { v6, code: rest[0] })
    } else {
        None
    }
}

/// Ports and sequence number from the first 8 bytes of a quoted TCP header
/// (all an ICMPv4 error is required to quote).
fn quoted_tcp(b: &[u8]) -> Option<(u16, u16, u32)> {
    if b.len() < 8 {
        return None;
    }
    Some((
        u16::from_be_bytes([b[0], b[1]]),
        u16::from_be_bytes([b[2], b[3]]),
        u32::from_be_bytes([b[4], b[5], b[6], b[7]]),
    ))
}

/// hping3's flag letters: S, A, R, F…
pub fn flag_letters(flags: u8) -> String {
    let mut s = String::new();
    for (bit, c) in [
        (FLAG_SYN, 'S'),
        (FLAG_ACK, 'A'),
        (FLAG_RST, 'R'),
        (FLAG_FIN, 'F'),
        (0x08, 'P'),
        (0x20, 'U'),
    ] {
        if flags & bit != 0 {
            s.push(c);
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A checksum over data that includes a correct checksum folds to zero.
    #[test]
    fn checksum_verifies_v4_and_v6() {
        let (s4, d4): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let seg = tcp_segment(s4, d4, 40000, 80, 0x1234_5678, FLAG_SYN, Some(1460));
        assert_eq!(seg.len(), SYN_LEN);
        assert_eq!(tcp_checksum(s4, d4, &seg), 0);
        let (s6, d6): (IpAddr, IpAddr) = ("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap());
        let seg = tcp_segment(s6, d6, 40000, 443, 7, FLAG_RST, None);
        assert_eq!(seg.len(), 20);
        assert_eq!(tcp_checksum(s6, d6, &seg), 0);
    }

    /// A SYN-ACK as the IPv4 raw socket delivers it (captured from Linux).
    #[test]
    fn parses_syn_ack_v4() {
        let mut pkt = vec![
            0x45, 0, 0, 44, 0, 0, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 2, 10, 0, 0, 1,
        ];
        let seg = tcp_segment(
            "10.0.0.2".parse().unwrap(),
            "10.0.0.1".parse().unwrap(),
            80,
            40000,
            99,
            FLAG_SYN | FLAG_ACK,
            Some(1460),
        );
        pkt.extend_from_slice(&seg);
        let r = parse_tcp4(&pkt).unwrap();
        assert_eq!(
            (r.sport, r.dport, r.flags, r.ttl),
            (80, 40000, 0x12, Some(64))
        );
        assert_eq!(flag_letters(r.flags), "SA");
        assert!(parse_tcp4(&pkt[..30]).is_none());
    }

    #[test]
    fn parses_time_exceeded_v4_and_v6() {
        // ICMP time exceeded from 10.0.1.254 quoting a probe 10.0.0.1:40000 -> 10.0.4.2:80, seq 1000.
        let mut pkt = vec![
            0x45, 0, 0, 56, 0, 0, 0, 0, 64, 1, 0, 0, 10, 0, 1, 254, 10, 0, 0, 1,
        ];
        pkt.extend_from_slice(&[11, 0, 0, 0, 0, 0, 0, 0]);
        pkt.extend_from_slice(&[
            0x45, 0, 0, 44, 0, 0, 0x40, 0, 1, 6, 0, 0, 10, 0, 0, 1, 10, 0, 4, 2,
        ]);
        pkt.extend_from_slice(&[0x9c, 0x40, 0, 80, 0, 0, 0x03, 0xe8]);
        let r = parse_icmp4(&pkt).unwrap();
        assert_eq!(r.kind, IcmpKind::TimeExceeded);
        assert_eq!(r.from, "10.0.1.254".parse::<IpAddr>().unwrap());
        assert_eq!(r.dst, "10.0.4.2".parse::<IpAddr>().unwrap());
        assert_eq!((r.sport, r.dport, r.seq), (40000, 80, 1000));
        for cut in 0..pkt.len() {
            assert!(parse_icmp4(&pkt[..cut]).is_none() || cut >= 56);
        }

        let mut msg = vec![3, 0, 0, 0, 0, 0, 0, 0];
        let mut ip6 = vec![0x60, 0, 0, 0, 0, 24, 6, 1];
        ip6.extend_from_slice(&"fd00::1".parse::<Ipv6Addr>().unwrap().octets());
        ip6.extend_from_slice(&"fd00:4::2".parse::<Ipv6Addr>().unwrap().octets());
        msg.extend_from_slice(&ip6);
        msg.extend_from_slice(&[0x9c, 0x40, 0, 80, 0, 0, 0x03, 0xe9, 0, 0]);
        let r = parse_icmp6(&msg, "fd00:1::fe".parse().unwrap()).unwrap();
        assert_eq!(r.kind, IcmpKind::TimeExceeded);
        assert_eq!((r.sport, r.dport, r.seq), (40000, 80, 1001));
        assert_eq!(r.dst, "fd00:4::2".parse::<IpAddr>().unwrap());
        msg[0] = 1;
        msg[1] = 4;
        assert_eq!(
            parse_icmp6(&msg, "fd00::9".parse().unwrap())
                .unwrap()
                .kind
                .mark(),
            "!p"
        );
    }
}
