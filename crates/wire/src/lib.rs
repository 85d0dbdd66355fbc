//! Zero-copy, panic-free decoding of captured packets down to TCP.
//!
//! Captured traffic is untrusted input. Every view in this crate is built
//! with a checked constructor (`new_checked`) that verifies the buffer is long
//! enough for every accessor; after that no accessor can panic. [`decode`]
//! walks a link-layer frame to its TCP segment and returns either a
//! [`TcpSegment`], a reason the frame carries no TCP ([`Skip`]), or a
//! [`DecodeError`] naming the layer that was malformed.
//!
//! Pitfall handled here: the payload length of a segment comes from the IP
//! header, not from the captured length. Ethernet pads short frames (a pure
//! ACK would otherwise look like 6 bytes of data) and a snaplen truncates long
//! ones.
#![forbid(unsafe_code)]

pub mod build;
pub mod ethertype;
mod ip;
mod link;
mod tcp;
mod time;

pub use ip::{Ipv4Packet, Ipv6Packet};
pub use link::LinkType;
pub use tcp::{SackBlocks, TcpFlags, TcpHeader, TcpOptions};
pub use time::Timestamp;

use std::net::IpAddr;

/// A TCP segment decoded from a captured frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcpSegment<'a> {
    pub src: IpAddr,
    pub dst: IpAddr,
    /// IPv4 TTL or IPv6 hop limit.
    pub ttl: u8,
    /// The IPv4 identification field (RFC 791); 0 for IPv6. Linux counts
    /// it up by one per packet of a connection (RFC 6864 §4.1's atomic
    /// datagrams may carry any value; Linux's per-socket counter makes a
    /// gap a packet the capture did not see).
    pub ip_id: u16,
    pub src_port: u16,
    pub dst_port: u16,
    pub seq: u32,
    pub ack: u32,
    pub flags: TcpFlags,
    /// The raw 16-bit window field (unscaled).
    pub window: u16,
    /// The raw option bytes; parse them with [`TcpSegment::options`] (only
    /// when needed: most segments' options are never looked at).
    pub options_raw: &'a [u8],
    /// Payload length according to the IP header (what the sender sent).
    pub payload_len: u32,
    /// The captured part of the payload (may be shorter than `payload_len`).
    pub payload: &'a [u8],
    /// The IP header claimed more than the frame held on the wire (its
    /// original length): `payload_len` was cut to what the frame could
    /// carry ([`decode_frame`]), as Wireshark does ("total length exceeds
    /// packet length"). A malformed header, counted by the engine.
    pub length_clamped: bool,
}

impl TcpSegment<'_> {
    pub fn options(&self) -> TcpOptions {
        TcpOptions::parse(self.options_raw)
    }

    /// Sequence space consumed: payload plus one for SYN and for FIN (RFC 9293 §3.4).
    pub fn seq_len(&self) -> u32 {
        self.payload_len + u32::from(self.flags.syn()) + u32::from(self.flags.fin())
    }
}

/// Why a well-formed frame yielded no TCP segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skip {
    /// Not IP at all (ARP, LLDP, …).
    NotIp,
    /// IP, but another transport (UDP, ICMP, …).
    NotTcp,
    /// A non-first IP fragment, or a first fragment (not reassembled).
    Fragment,
}

/// The layer at which a frame stopped making sense.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layer {
    Link,
    Ipv4,
    Ipv6,
    Tcp,
}

/// A frame that could not be decoded. Counted and reported, never fatal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeError {
    /// The captured bytes end inside this layer's header.
    Truncated(Layer),
    /// A header field is impossible (bad version, header length, …).
    Malformed(Layer, &'static str),
    /// The capture's link type is not one this crate decodes.
    UnsupportedLink(u32),
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::Truncated(l) => write!(f, "{l:?} header truncated"),
            DecodeError::Malformed(l, what) => write!(f, "{l:?} header malformed: {what}"),
            DecodeError::UnsupportedLink(t) => write!(f, "unsupported link type {t}"),
        }
    }
}

impl std::error::Error for DecodeError {}

/// The outcome of decoding one frame.
pub type Decoded<'a> = Result<Result<TcpSegment<'a>, Skip>, DecodeError>;

/// Decode a captured frame of the given link type down to its TCP segment.
/// The IP header's length is believed ([`decode_frame`] holds it to the
/// frame's length on the wire).
pub fn decode(link: LinkType, frame: &[u8]) -> Decoded<'_> {
    decode_within(link, frame, usize::MAX)
}

/// [`decode`], held to the frame's length on the wire (`orig_len`, of the
/// whole frame): a segment whose IP header claims more than the frame carried
/// (a corrupt total length) keeps only what fits, and says so
/// ([`TcpSegment::length_clamped`]), as Wireshark does ("IPv4 total length
/// exceeds packet length"). A snaplen-cut frame is not affected: its original
/// length still covers what the header claims. An `orig_len` below the
/// captured length (a record header that lies) is not trusted.
#[inline]
pub fn decode_frame(link: LinkType, frame: &[u8], orig_len: u32) -> Decoded<'_> {
    let wire = orig_len as usize;
    decode_within(
        link,
        frame,
        if wire >= frame.len() {
            wire
        } else {
            usize::MAX
        },
    )
}

/// `wire`: the frame's length on the wire, or `usize::MAX` for no limit.
fn decode_within(link: LinkType, frame: &[u8], wire: usize) -> Decoded<'_> {
    let (ethertype, l3) = match link::strip(link, frame)? {
        Some(v) => v,
        None => return Ok(Err(Skip::NotIp)),
    };
    // What the wire carried from the IP header on.
    let room = wire.saturating_sub(frame.len() - l3.len());
    match ethertype {
        link::ETHERTYPE_IPV4 => ip::decode_v4(l3, room),
        link::ETHERTYPE_IPV6 => ip::decode_v6(l3, room),
        _ => Ok(Err(Skip::NotIp)),
    }
}

/// Read a big-endian u16 at `at`; callers have checked the length.
#[inline]
fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

#[inline]
fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

#[cfg(test)]
mod tests;
