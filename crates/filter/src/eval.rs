//! The filter run in userspace on one frame: what `analyze --filter` uses on
//! files, and the reference the compiled program is tested against.
//!
//! First the frame is located ([`View`]): where its IP header starts, which
//! fields were captured. Every test then looks only at captured bytes; a test
//! on a field the frame does not hold is false.

use std::net::IpAddr;

use tcpdoctor_wire::LinkType;

use crate::ast::{Dir, Expr, Net, Prim, Proto};

pub(crate) use tcpdoctor_wire::ethertype::{
    IPV4 as ETHERTYPE_IPV4, IPV6 as ETHERTYPE_IPV6, VLAN_TPIDS,
};
/// VLAN tags looked through on Ethernet: one, or two stacked (QinQ).
pub(crate) const MAX_VLAN_TAGS: usize = 2;
/// Address families of the BSD loopback header meaning IPv4 and IPv6.
pub(crate) const AF_INET: u32 = 2;
pub(crate) const AF_INET6: [u32; 4] = [10, 24, 28, 30];
/// IPv6 next header: fragment (RFC 8200 §4.5).
pub(crate) const IPV6_FRAGMENT: u8 = 44;

/// Where a frame's headers are, and which of them were captured.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct View {
    /// 4 or 6 by the link layer (ethertype, version nibble…), 0 if not IP.
    pub family: u8,
    /// 4 or 6 when the whole fixed IP header was captured, else 0.
    pub header: u8,
    /// Offset of the IP header.
    pub l3: usize,
    /// The transport protocol: IPv4 protocol; IPv6 next header, or the next
    /// header of a fragment header right after the fixed header (as
    /// tcpdump's `tcp`). `None` without a complete IP header.
    pub proto: Option<u8>,
    /// Offset of the transport header when its first 4 bytes (the ports)
    /// were captured and belong to this packet: not for IPv4 fragments past
    /// the first, nor for IPv6 fragments (the fragment header is not walked).
    pub l4: Option<usize>,
}

fn be16(f: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*f.get(at)?, *f.get(at + 1)?]))
}

fn be32(f: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes([
        *f.get(at)?,
        *f.get(at + 1)?,
        *f.get(at + 2)?,
        *f.get(at + 3)?,
    ]))
}

impl View {
    pub(crate) fn of(link: LinkType, f: &[u8]) -> View {
        let by_ethertype = |ethertype: u16, at: usize| match ethertype {
            ETHERTYPE_IPV4 => View::ipv4(f, at),
            ETHERTYPE_IPV6 => View::ipv6(f, at),
            _ => View::default(),
        };
        match link {
            LinkType::Ethernet => {
                let Some(mut ethertype) = be16(f, 12) else {
                    return View::default();
                };
                let mut at = 14;
                for _ in 0..MAX_VLAN_TAGS {
                    if !VLAN_TPIDS.contains(&ethertype) {
                        break;
                    }
                    let Some(inner) = be16(f, at + 2) else {
                        return View::default();
                    };
                    ethertype = inner;
                    at += 4;
                }
                by_ethertype(ethertype, at)
            }
            LinkType::LinuxSll => match be16(f, 14) {
                Some(e) if f.len() >= 16 => by_ethertype(e, 16),
                _ => View::default(),
            },
            LinkType::LinuxSll2 => match be16(f, 0) {
                Some(e) if f.len() >= 20 => by_ethertype(e, 20),
                _ => View::default(),
            },
            LinkType::RawIp => match f.first().map(|b| b >> 4) {
                Some(4) => View::ipv4(f, 0),
                Some(6) => View::ipv6(f, 0),
                _ => View::default(),
            },
            LinkType::Ipv4 => View::ipv4(f, 0),
            LinkType::Ipv6 => View::ipv6(f, 0),
            LinkType::Null | LinkType::Loop => {
                let Some(word) = be32(f, 0) else {
                    return View::default();
                };
                // The BSD loopback family is in the capturing host's byte
                // order (in network order for Loop); accept both for Null.
                let family =
                    |v: u32| word == v || (link == LinkType::Null && word == v.swap_bytes());
                if family(AF_INET) {
                    View::ipv4(f, 4)
                } else if AF_INET6.into_iter().any(family) {
                    View::ipv6(f, 4)
                } else {
                    View::default()
                }
            }
            LinkType::Unknown(_) => View::default(),
        }
    }

    /// An IP packet of `version` at `l3`: `Err` with what is known when its
    /// fixed header (`fixed` bytes) was not captured.
    fn ip_start(f: &[u8], l3: usize, version: u8, fixed: usize) -> Result<View, View> {
        let v = View {
            family: version,
            l3,
            ..View::default()
        };
        if f.len() < l3 + fixed {
            return Err(v);
        }
        Ok(View {
            header: version,
            ..v
        })
    }

    fn ipv4(f: &[u8], l3: usize) -> View {
        let mut v = match View::ip_start(f, l3, 4, 20) {
            Ok(v) => v,
            Err(short) => return short,
        };
        v.proto = Some(f[l3 + 9]);
        let fragment_offset = u16::from_be_bytes([f[l3 + 6], f[l3 + 7]]) & 0x1FFF;
        let ihl = usize::from(f[l3] & 0x0F) * 4;
        if fragment_offset == 0 && ihl >= 20 && f.len() >= l3 + ihl + 4 {
            v.l4 = Some(l3 + ihl);
        }
        v
    }

    fn ipv6(f: &[u8], l3: usize) -> View {
        let mut v = match View::ip_start(f, l3, 6, 40) {
            Ok(v) => v,
            Err(short) => return short,
        };
        let next = f[l3 + 6];
        if next == IPV6_FRAGMENT {
            v.proto = f.get(l3 + 40).copied();
        } else {
            v.proto = Some(next);
            if f.len() >= l3 + 44 {
                v.l4 = Some(l3 + 40);
            }
        }
        v
    }
}

pub(crate) fn matches(e: &Expr, link: LinkType, frame: &[u8]) -> bool {
    let view = View::of(link, frame);
    eval(e, &view, frame)
}

fn eval(e: &Expr, v: &View, f: &[u8]) -> bool {
    match e {
        Expr::All => true,
        Expr::Prim(p) => prim(p, v, f),
        Expr::Not(a) => !eval(a, v, f),
        Expr::And(a, b) => eval(a, v, f) && eval(b, v, f),
        Expr::Or(a, b) => eval(a, v, f) || eval(b, v, f),
    }
}

fn prim(p: &Prim, v: &View, f: &[u8]) -> bool {
    match *p {
        Prim::Proto(proto) => match proto {
            Proto::Ip => v.family == 4,
            Proto::Ip6 => v.family == 6,
            Proto::Tcp => v.proto == Some(6),
            Proto::Udp => v.proto == Some(17),
            Proto::Sctp => v.proto == Some(132),
            Proto::Icmp => v.header == 4 && v.proto == Some(1),
            Proto::Icmp6 => v.header == 6 && v.proto == Some(58),
        },
        Prim::Host(dir, addr) => {
            let full = if addr.is_ipv4() { 32 } else { 128 };
            address(dir, &Net::containing(addr, full), v, f)
        }
        Prim::Net(dir, net) => address(dir, &net, v, f),
        Prim::Port { proto, dir, lo, hi } => {
            let proto_ok = match (proto, v.proto) {
                (Some(t), Some(p)) => p == t.number(),
                (None, Some(p)) => matches!(p, 6 | 17 | 132),
                (_, None) => false,
            };
            let Some(l4) = v.l4.filter(|_| proto_ok) else {
                return false;
            };
            let (Some(src), Some(dst)) = (be16(f, l4), be16(f, l4 + 2)) else {
                return false;
            };
            let hit = |port: u16| (lo..=hi).contains(&port);
            either(dir, hit(src), hit(dst))
        }
        Prim::Bytes {
            base,
            offset,
            size,
            mask,
            op,
            value,
        } => {
            let Some(start) = header_start(base, v) else {
                return false;
            };
            let at = start + usize::from(offset);
            let got = match size {
                1 => f.get(at).map(|&b| u32::from(b)),
                2 => be16(f, at).map(u32::from),
                _ => be32(f, at),
            };
            got.is_some_and(|x| op.holds(x & mask.unwrap_or(u32::MAX), value))
        }
    }
}

/// Where the header a byte-offset test counts from starts, if the packet
/// has it: the IP header for `ip`/`ip6`, the transport header (where ports
/// are read) for the others, of that protocol.
pub(crate) fn header_start(base: Proto, v: &View) -> Option<usize> {
    match base {
        Proto::Ip => (v.header == 4).then_some(v.l3),
        Proto::Ip6 => (v.header == 6).then_some(v.l3),
        Proto::Tcp => v.l4.filter(|_| v.proto == Some(6)),
        Proto::Udp => v.l4.filter(|_| v.proto == Some(17)),
        Proto::Sctp => v.l4.filter(|_| v.proto == Some(132)),
        Proto::Icmp => v.l4.filter(|_| v.header == 4 && v.proto == Some(1)),
        Proto::Icmp6 => v.l4.filter(|_| v.header == 6 && v.proto == Some(58)),
    }
}

fn address(dir: Dir, net: &Net, v: &View, f: &[u8]) -> bool {
    let (family, src, dst) = match net.addr() {
        IpAddr::V4(_) => (4, v.l3 + 12, v.l3 + 16),
        IpAddr::V6(_) => (6, v.l3 + 8, v.l3 + 24),
    };
    if v.header != family {
        return false;
    }
    let words = net.words();
    let hit = |at: usize| {
        words.iter().enumerate().all(|(i, &(w, mask))| {
            mask == 0 || be32(f, at + 4 * i).is_some_and(|got| got & mask == w & mask)
        })
    };
    either(dir, hit(src), hit(dst))
}

fn either(dir: Dir, src: bool, dst: bool) -> bool {
    match dir {
        Dir::Src => src,
        Dir::Dst => dst,
        Dir::SrcOrDst => src || dst,
        Dir::SrcAndDst => src && dst,
    }
}
