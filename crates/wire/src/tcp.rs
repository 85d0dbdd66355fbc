//! TCP header (RFC 9293 §3.1) and options (MSS, RFC 7323 window scale and
//! timestamps, RFC 2018 SACK).

use crate::{be16, be32, DecodeError, Layer};

/// A checked view of a TCP header including its options.
#[derive(Debug, Clone, Copy)]
pub struct TcpHeader<'a> {
    buf: &'a [u8],
}

impl<'a> TcpHeader<'a> {
    /// Checks that the data offset is sane and the captured bytes hold the
    /// whole header, options included.
    pub fn new_checked(buf: &'a [u8]) -> Result<Self, DecodeError> {
        if buf.len() < 20 {
            return Err(DecodeError::Truncated(Layer::Tcp));
        }
        let hlen = usize::from(buf[12] >> 4) * 4;
        if hlen < 20 {
            return Err(DecodeError::Malformed(Layer::Tcp, "data offset below 5"));
        }
        if buf.len() < hlen {
            return Err(DecodeError::Truncated(Layer::Tcp));
        }
        Ok(TcpHeader { buf })
    }

    pub fn src_port(&self) -> u16 {
        be16(self.buf, 0)
    }
    pub fn dst_port(&self) -> u16 {
        be16(self.buf, 2)
    }
    pub fn seq(&self) -> u32 {
        be32(self.buf, 4)
    }
    pub fn ack(&self) -> u32 {
        be32(self.buf, 8)
    }
    pub fn header_len(&self) -> usize {
        usize::from(self.buf[12] >> 4) * 4
    }
    pub fn flags(&self) -> TcpFlags {
        TcpFlags(be16(self.buf, 12) & 0x01FF)
    }
    pub fn window(&self) -> u16 {
        be16(self.buf, 14)
    }
    /// The option bytes after the fixed header.
    pub fn options_raw(&self) -> &'a [u8] {
        &self.buf[20..self.header_len()]
    }
    /// Parsed options. Malformed option bytes end the parse; what was read stays.
    pub fn options(&self) -> TcpOptions {
        TcpOptions::parse(&self.buf[20..self.header_len()])
    }
}

/// TCP control bits.
#[derive(Clone, Copy, PartialEq, Eq, Default)]
pub struct TcpFlags(pub u16);

impl TcpFlags {
    pub const FIN: u16 = 0x001;
    pub const SYN: u16 = 0x002;
    pub const RST: u16 = 0x004;
    pub const PSH: u16 = 0x008;
    pub const ACK: u16 = 0x010;

    pub fn fin(self) -> bool {
        self.0 & Self::FIN != 0
    }
    pub fn syn(self) -> bool {
        self.0 & Self::SYN != 0
    }
    pub fn rst(self) -> bool {
        self.0 & Self::RST != 0
    }
    pub fn psh(self) -> bool {
        self.0 & Self::PSH != 0
    }
    pub fn ack(self) -> bool {
        self.0 & Self::ACK != 0
    }
}

impl std::fmt::Debug for TcpFlags {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_string())
    }
}

impl std::fmt::Display for TcpFlags {
    /// Wireshark-like: `SYN, ACK`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names = [
            (Self::SYN, "SYN"),
            (Self::FIN, "FIN"),
            (Self::RST, "RST"),
            (Self::PSH, "PSH"),
            (Self::ACK, "ACK"),
        ];
        let mut first = true;
        for (bit, name) in names {
            if self.0 & bit != 0 {
                if !first {
                    f.write_str(", ")?;
                }
                f.write_str(name)?;
                first = false;
            }
        }
        Ok(())
    }
}

/// Up to four SACK blocks (RFC 2018 §3: at most 4 fit, 3 with timestamps).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SackBlocks {
    len: u8,
    blocks: [(u32, u32); 4],
}

impl SackBlocks {
    pub fn as_slice(&self) -> &[(u32, u32)] {
        &self.blocks[..usize::from(self.len)]
    }
}

/// The options a TCP analyzer needs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TcpOptions {
    pub mss: Option<u16>,
    /// Window scale shift count (RFC 7323 §2.3; values above 14 are used as 14).
    pub window_scale: Option<u8>,
    pub sack_permitted: bool,
    pub sack: SackBlocks,
    /// (TSval, TSecr), RFC 7323 §3.
    pub timestamps: Option<(u32, u32)>,
    /// An option had an impossible length; parsing stopped there.
    pub malformed: bool,
}

impl TcpOptions {
    /// The timestamps option alone (TSval, TSecr), read straight from the
    /// layout every common stack sends on data segments (NOP, NOP,
    /// timestamps: RFC 7323 Appendix A) and parsed in full otherwise.
    #[inline]
    pub fn timestamps(b: &[u8]) -> Option<(u32, u32)> {
        if b.len() >= 12 && b[..4] == [1, 1, 8, 10] {
            return Some((be32(b, 4), be32(b, 8)));
        }
        if b.is_empty() {
            return None;
        }
        TcpOptions::parse(b).timestamps
    }

    pub fn parse(b: &[u8]) -> TcpOptions {
        // The layout Linux sends on every SYN and SYN-ACK (MSS, SACK
        // permitted, timestamps, NOP, window scale), read straight: what the
        // walk below makes of it.
        if b.len() == 20 && b[..2] == [2, 4] && b[4..8] == [4, 2, 8, 10] && b[16..19] == [1, 3, 3] {
            return TcpOptions {
                mss: Some(be16(b, 2)),
                window_scale: Some(b[19].min(14)),
                sack_permitted: true,
                sack: SackBlocks::default(),
                timestamps: Some((be32(b, 8), be32(b, 12))),
                malformed: false,
            };
        }
        Self::walk(b)
    }

    fn walk(mut b: &[u8]) -> TcpOptions {
        let mut o = TcpOptions::default();
        while let Some(&kind) = b.first() {
            match kind {
                0 => break,
                1 => {
                    b = &b[1..];
                    continue;
                }
                _ => {}
            }
            let Some(&len) = b.get(1) else {
                o.malformed = true;
                break;
            };
            let len = usize::from(len);
            if len < 2 || len > b.len() {
                o.malformed = true;
                break;
            }
            let body = &b[2..len];
            match (kind, body.len()) {
                (2, 2) => o.mss = Some(be16(body, 0)),
                (3, 1) => o.window_scale = Some(body[0].min(14)),
                (4, 0) => o.sack_permitted = true,
                (5, n) if n % 8 == 0 && n <= 32 => {
                    for (i, chunk) in body.chunks_exact(8).enumerate() {
                        o.sack.blocks[i] = (be32(chunk, 0), be32(chunk, 4));
                        o.sack.len = (i + 1) as u8;
                    }
                }
                (8, 8) => o.timestamps = Some((be32(body, 0), be32(body, 4))),
                (2..=5 | 8, _) => o.malformed = true,
                _ => {}
            }
            b = &b[len..];
        }
        o
    }
}
