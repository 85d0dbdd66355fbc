//! Link layers: strip the frame down to its layer-3 payload and protocol.

use crate::{be16, DecodeError, Layer};

pub(crate) use crate::ethertype::{IPV4 as ETHERTYPE_IPV4, IPV6 as ETHERTYPE_IPV6};
use crate::ethertype::{
    QINQ as ETHERTYPE_QINQ, QINQ_OLD as ETHERTYPE_QINQ_OLD, VLAN as ETHERTYPE_VLAN,
};
/// More stacked tags than this is not a real frame.
const MAX_VLAN_TAGS: usize = 8;

/// A capture's link-layer header type, as numbered by tcpdump.org's
/// LINKTYPE_ registry (shared by pcap and pcapng).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LinkType {
    /// BSD loopback: 4-byte address family in the capturing host's byte order.
    Null,
    Ethernet,
    /// Raw IP, version from the first nibble (LINKTYPE_RAW, and DLT_RAW 12/14).
    RawIp,
    /// OpenBSD loopback: 4-byte address family in network byte order.
    Loop,
    /// Linux cooked capture v1 (`tcpdump -i any`).
    LinuxSll,
    /// Linux cooked capture v2 (`tcpdump -i any -y LINUX_SLL2`, newer libpcap).
    LinuxSll2,
    Ipv4,
    Ipv6,
    Unknown(u32),
}

impl LinkType {
    pub fn from_raw(raw: u32) -> LinkType {
        match raw {
            0 => LinkType::Null,
            1 => LinkType::Ethernet,
            12 | 14 | 101 => LinkType::RawIp,
            108 => LinkType::Loop,
            113 => LinkType::LinuxSll,
            228 => LinkType::Ipv4,
            229 => LinkType::Ipv6,
            276 => LinkType::LinuxSll2,
            other => LinkType::Unknown(other),
        }
    }

    pub fn to_raw(self) -> u32 {
        match self {
            LinkType::Null => 0,
            LinkType::Ethernet => 1,
            LinkType::RawIp => 101,
            LinkType::Loop => 108,
            LinkType::LinuxSll => 113,
            LinkType::Ipv4 => 228,
            LinkType::Ipv6 => 229,
            LinkType::LinuxSll2 => 276,
            LinkType::Unknown(raw) => raw,
        }
    }

    /// Whether [`crate::decode`] understands this link type.
    pub fn is_supported(self) -> bool {
        !matches!(self, LinkType::Unknown(_))
    }

    pub fn name(self) -> &'static str {
        match self {
            LinkType::Null => "BSD loopback",
            LinkType::Ethernet => "Ethernet",
            LinkType::RawIp => "raw IP",
            LinkType::Loop => "OpenBSD loopback",
            LinkType::LinuxSll => "Linux cooked (SLL)",
            LinkType::LinuxSll2 => "Linux cooked v2 (SLL2)",
            LinkType::Ipv4 => "raw IPv4",
            LinkType::Ipv6 => "raw IPv6",
            LinkType::Unknown(_) => "unknown",
        }
    }
}

/// Returns the ethertype-equivalent protocol and the layer-3 bytes, or `None`
/// when the frame is well formed but not IP.
pub(crate) fn strip(link: LinkType, f: &[u8]) -> Result<Option<(u16, &[u8])>, DecodeError> {
    let trunc = DecodeError::Truncated(Layer::Link);
    match link {
        LinkType::Ethernet => {
            if f.len() < 14 {
                return Err(trunc);
            }
            let mut ethertype = be16(f, 12);
            let mut at = 14;
            let mut tags = 0;
            while matches!(
                ethertype,
                ETHERTYPE_VLAN | ETHERTYPE_QINQ | ETHERTYPE_QINQ_OLD
            ) {
                tags += 1;
                if tags > MAX_VLAN_TAGS {
                    return Err(DecodeError::Malformed(Layer::Link, "too many VLAN tags"));
                }
                if f.len() < at + 4 {
                    return Err(trunc);
                }
                ethertype = be16(f, at + 2);
                at += 4;
            }
            Ok(ip_or_none(ethertype, &f[at..]))
        }
        LinkType::LinuxSll => {
            // packet type, ARPHRD, address length, 8 address bytes, protocol.
            if f.len() < 16 {
                return Err(trunc);
            }
            Ok(ip_or_none(be16(f, 14), &f[16..]))
        }
        LinkType::LinuxSll2 => {
            // protocol, reserved, ifindex, ARPHRD, packet type, address length, 8 address bytes.
            if f.len() < 20 {
                return Err(trunc);
            }
            Ok(ip_or_none(be16(f, 0), &f[20..]))
        }
        LinkType::RawIp => by_version(f),
        LinkType::Ipv4 => Ok(Some((ETHERTYPE_IPV4, f))),
        LinkType::Ipv6 => Ok(Some((ETHERTYPE_IPV6, f))),
        LinkType::Null | LinkType::Loop => {
            if f.len() < 4 {
                return Err(trunc);
            }
            let raw = [f[0], f[1], f[2], f[3]];
            // The byte order of DLT_NULL is the capturing host's; accept both.
            let family = if link == LinkType::Loop {
                u32::from_be_bytes(raw)
            } else {
                let le = u32::from_le_bytes(raw);
                if le <= 0xFFFF {
                    le
                } else {
                    u32::from_be_bytes(raw)
                }
            };
            let rest = &f[4..];
            Ok(match family {
                2 => Some((ETHERTYPE_IPV4, rest)),
                // AF_INET6 differs: 24 NetBSD/OpenBSD, 28 FreeBSD, 30 macOS, 10 Linux.
                10 | 24 | 28 | 30 => Some((ETHERTYPE_IPV6, rest)),
                _ => None,
            })
        }
        LinkType::Unknown(raw) => Err(DecodeError::UnsupportedLink(raw)),
    }
}

fn ip_or_none(ethertype: u16, rest: &[u8]) -> Option<(u16, &[u8])> {
    matches!(ethertype, ETHERTYPE_IPV4 | ETHERTYPE_IPV6).then_some((ethertype, rest))
}

fn by_version(f: &[u8]) -> Result<Option<(u16, &[u8])>, DecodeError> {
    match f.first().map(|b| b >> 4) {
        None => Err(DecodeError::Truncated(Layer::Link)),
        Some(4) => Ok(Some((ETHERTYPE_IPV4, f))),
        Some(6) => Ok(Some((ETHERTYPE_IPV6, f))),
        Some(_) => Err(DecodeError::Malformed(
            Layer::Link,
            "raw IP with unknown version",
        )),
    }
}
