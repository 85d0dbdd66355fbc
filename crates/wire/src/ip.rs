//! IPv4 (RFC 791) and IPv6 (RFC 8200) views and the walk to the TCP header.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::tcp::TcpHeader;
use crate::{be16, DecodeError, Decoded, Layer, Skip, TcpSegment};

const PROTO_TCP: u8 = 6;

/// A checked view of an IPv4 header.
#[derive(Debug, Clone, Copy)]
pub struct Ipv4Packet<'a> {
    buf: &'a [u8],
}

impl<'a> Ipv4Packet<'a> {
    /// Checks version, header length and that the captured bytes hold the header.
    pub fn new_checked(buf: &'a [u8]) -> Result<Self, DecodeError> {
        if buf.len() < 20 {
            return Err(DecodeError::Truncated(Layer::Ipv4));
        }
        if buf[0] >> 4 != 4 {
            return Err(DecodeError::Malformed(Layer::Ipv4, "version is not 4"));
        }
        let ihl = usize::from(buf[0] & 0x0F) * 4;
        if ihl < 20 {
            return Err(DecodeError::Malformed(
                Layer::Ipv4,
                "header length below 20",
            ));
        }
        if buf.len() < ihl {
            return Err(DecodeError::Truncated(Layer::Ipv4));
        }
        Ok(Ipv4Packet { buf })
    }

    pub fn header_len(&self) -> usize {
        usize::from(self.buf[0] & 0x0F) * 4
    }

    pub fn total_len(&self) -> u16 {
        be16(self.buf, 2)
    }

    pub fn more_fragments(&self) -> bool {
        self.buf[6] & 0x20 != 0
    }

    pub fn fragment_offset(&self) -> u16 {
        be16(self.buf, 6) & 0x1FFF
    }

    pub fn ttl(&self) -> u8 {
        self.buf[8]
    }

    pub fn identification(&self) -> u16 {
        be16(self.buf, 4)
    }

    pub fn protocol(&self) -> u8 {
        self.buf[9]
    }

    pub fn src(&self) -> Ipv4Addr {
        Ipv4Addr::new(self.buf[12], self.buf[13], self.buf[14], self.buf[15])
    }

    pub fn dst(&self) -> Ipv4Addr {
        Ipv4Addr::new(self.buf[16], self.buf[17], self.buf[18], self.buf[19])
    }

    /// The payload length the sender put on the wire. A total length of 0 is
    /// what Linux writes on TSO super-segments: fall back to the captured bytes.
    pub fn payload_len(&self) -> Result<usize, DecodeError> {
        let total = usize::from(self.total_len());
        if total == 0 {
            return Ok(self.buf.len() - self.header_len());
        }
        total
            .checked_sub(self.header_len())
            .ok_or(DecodeError::Malformed(
                Layer::Ipv4,
                "total length below header length",
            ))
    }

    pub fn payload(&self) -> &'a [u8] {
        &self.buf[self.header_len()..]
    }
}

/// A checked view of an IPv6 fixed header.
#[derive(Debug, Clone, Copy)]
pub struct Ipv6Packet<'a> {
    buf: &'a [u8],
}

impl<'a> Ipv6Packet<'a> {
    pub fn new_checked(buf: &'a [u8]) -> Result<Self, DecodeError> {
        if buf.len() < 40 {
            return Err(DecodeError::Truncated(Layer::Ipv6));
        }
        if buf[0] >> 4 != 6 {
            return Err(DecodeError::Malformed(Layer::Ipv6, "version is not 6"));
        }
        Ok(Ipv6Packet { buf })
    }

    pub fn payload_len(&self) -> u16 {
        be16(self.buf, 4)
    }

    pub fn next_header(&self) -> u8 {
        self.buf[6]
    }

    pub fn hop_limit(&self) -> u8 {
        self.buf[7]
    }

    fn addr(&self, at: usize) -> Ipv6Addr {
        let mut a = [0u8; 16];
        a.copy_from_slice(&self.buf[at..at + 16]);
        Ipv6Addr::from(a)
    }

    pub fn src(&self) -> Ipv6Addr {
        self.addr(8)
    }

    pub fn dst(&self) -> Ipv6Addr {
        self.addr(24)
    }

    pub fn payload(&self) -> &'a [u8] {
        &self.buf[40..]
    }
}

/// `room`: the bytes the wire carried from this header on (`usize::MAX`: no
/// limit); a total length beyond it is held to it.
#[inline]
pub(crate) fn decode_v4(buf: &[u8], room: usize) -> Decoded<'_> {
    let ip = Ipv4Packet::new_checked(buf)?;
    if ip.protocol() != PROTO_TCP {
        return Ok(Err(Skip::NotTcp));
    }
    if ip.more_fragments() || ip.fragment_offset() != 0 {
        return Ok(Err(Skip::Fragment));
    }
    let l4_len = ip.payload_len()?;
    let held = room.saturating_sub(ip.header_len());
    tcp(
        IpAddr::V4(ip.src()),
        IpAddr::V4(ip.dst()),
        (ip.ttl(), ip.identification()),
        ip.payload(),
        (l4_len.min(held), l4_len > held),
    )
}

/// `room` as for [`decode_v4`].
#[inline]
pub(crate) fn decode_v6(buf: &[u8], room: usize) -> Decoded<'_> {
    let ip = Ipv6Packet::new_checked(buf)?;
    let mut next = ip.next_header();
    let mut rest = ip.payload();
    // A payload length of 0 means a jumbogram (RFC 2675) or a GSO capture.
    let mut remaining = match ip.payload_len() {
        0 => rest.len(),
        n => usize::from(n),
    };
    let held = room.saturating_sub(40);
    let clamped = remaining > held;
    remaining = remaining.min(held);
    // RFC 8200 §4: walk extension headers until TCP or something else.
    for _ in 0..16 {
        match next {
            PROTO_TCP => {
                return tcp(
                    IpAddr::V6(ip.src()),
                    IpAddr::V6(ip.dst()),
                    (ip.hop_limit(), 0),
                    rest,
                    (remaining, clamped),
                )
            }
            // Hop-by-hop, routing, destination options: (len + 1) * 8 bytes.
            0 | 43 | 60 | 51 => {
                if rest.len() < 2 {
                    return Err(DecodeError::Truncated(Layer::Ipv6));
                }
                let len = if next == 51 {
                    // Authentication header counts 4-byte units, minus 2 (RFC 4302).
                    (usize::from(rest[1]) + 2) * 4
                } else {
                    (usize::from(rest[1]) + 1) * 8
                };
                if rest.len() < len {
                    return Err(DecodeError::Truncated(Layer::Ipv6));
                }
                remaining = remaining.checked_sub(len).ok_or(DecodeError::Malformed(
                    Layer::Ipv6,
                    "extension header beyond payload",
                ))?;
                next = rest[0];
                rest = &rest[len..];
            }
            44 => {
                if rest.len() < 8 {
                    return Err(DecodeError::Truncated(Layer::Ipv6));
                }
                let offset_flags = be16(rest, 2);
                if offset_flags & 0xFFF9 != 0 {
                    return Ok(Err(Skip::Fragment));
                }
                // An atomic fragment (offset 0, M clear) carries the whole packet.
                remaining = remaining.checked_sub(8).ok_or(DecodeError::Malformed(
                    Layer::Ipv6,
                    "extension header beyond payload",
                ))?;
                next = rest[0];
                rest = &rest[8..];
            }
            _ => return Ok(Err(Skip::NotTcp)),
        }
    }
    Err(DecodeError::Malformed(
        Layer::Ipv6,
        "too many extension headers",
    ))
}

/// `(ttl, ip_id)`: the IP header's TTL or hop limit, and its identification.
fn tcp<'a>(
    src: IpAddr,
    dst: IpAddr,
    (ttl, ip_id): (u8, u16),
    buf: &'a [u8],
    (l4_len, length_clamped): (usize, bool),
) -> Decoded<'a> {
    let tcp = TcpHeader::new_checked(buf)?;
    let hlen = tcp.header_len();
    let payload_len = l4_len.checked_sub(hlen).ok_or(DecodeError::Malformed(
        Layer::Tcp,
        "header longer than IP payload",
    ))?;
    let captured = &buf[hlen..];
    let payload = &captured[..captured.len().min(payload_len)];
    Ok(Ok(TcpSegment {
        src,
        dst,
        ttl,
        ip_id,
        src_port: tcp.src_port(),
        dst_port: tcp.dst_port(),
        seq: tcp.seq(),
        ack: tcp.ack(),
        flags: tcp.flags(),
        window: tcp.window(),
        options_raw: tcp.options_raw(),
        payload_len: u32::try_from(payload_len)
            .map_err(|_| DecodeError::Malformed(Layer::Tcp, "payload too long"))?,
        payload,
        length_clamped,
    }))
}
