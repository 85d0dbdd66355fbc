//! A streaming reader for pcap and pcapng captures.
//!
//! It reads from any [`std::io::Read`] (a file, or stdin so that
//! `tcpdump -w - | tcpdoctor analyze -` works) through one reusable buffer and
//! hands out borrowed packets: no allocation per packet.
//!
//! Written here rather than taken from a crate because the reader is on the
//! hot path (a 160 MB capture must be read in a few tens of milliseconds),
//! because snaplen-truncated captures and per-interface timestamp resolution
//! must be accepted, and because every error must name its byte offset.
//!
//! Supported: pcap with microsecond or nanosecond timestamps in either byte
//! order; pcapng sections in either byte order, several interfaces with
//! their own link type, `if_tsresol` and `if_tsoffset`, Enhanced, Simple and
//! (obsolete) Packet Blocks; other blocks are skipped.
#![forbid(unsafe_code)]

use std::fmt;
use std::io::{self, Read};

pub use decompress::{decompressed, Compression, DecompressError};
pub use tcpdoctor_wire::{LinkType, Timestamp};

mod decompress;

/// A record longer than this is corruption, not a packet.
const MAX_RECORD: usize = 16 << 20;
const INITIAL_BUF: usize = 1 << 20;

/// Which container format the input is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Pcap { nanosecond: bool, big_endian: bool },
    PcapNg,
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Format::Pcap { nanosecond, .. } => {
                write!(
                    f,
                    "pcap ({} timestamps)",
                    if *nanosecond { "ns" } else { "µs" }
                )
            }
            Format::PcapNg => f.write_str("pcapng"),
        }
    }
}

/// One captured packet, borrowed from the reader's buffer.
#[derive(Debug, Clone, Copy)]
pub struct Packet<'a> {
    pub ts: Timestamp,
    pub link: LinkType,
    /// The captured bytes (at most the snapshot length).
    pub data: &'a [u8],
    /// The length of the packet on the wire.
    pub orig_len: u32,
    /// Byte offset of the packet's record in the input.
    pub offset: u64,
}

/// What went wrong, for scripts and for the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The input is not a pcap or pcapng capture at all.
    NotACapture,
    /// A capture variant this reader does not handle.
    Unsupported,
    /// The input ends in the middle of a record: everything before it was read.
    Truncated,
    /// A record's fields are impossible: nothing after it can be trusted.
    Corrupt,
    /// Reading failed.
    Io,
}

/// An error with the byte offset where it was found.
#[derive(Debug)]
pub struct CaptureError {
    pub kind: ErrorKind,
    pub offset: u64,
    pub detail: String,
}

impl fmt::Display for CaptureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at byte {}: {}", self.offset, self.detail)
    }
}

impl std::error::Error for CaptureError {}

#[derive(Debug, Clone, Copy)]
struct Interface {
    link: LinkType,
    snaplen: u32,
    /// Timestamp units per second, as a power: `Dec(n)` is 10^-n s, `Bin(n)` 2^-n s.
    resolution: Resolution,
    offset_s: i64,
}

#[derive(Debug, Clone, Copy)]
enum Resolution {
    Dec(u8),
    Bin(u8),
}

impl Resolution {
    fn to_nanos(self, units: u64) -> i64 {
        // The common cases (µs, ns) stay in 64-bit arithmetic.
        if let Resolution::Dec(n @ 0..=9) = self {
            if let Some(ns) = units.checked_mul(10u64.pow(u32::from(9 - n))) {
                return i64::try_from(ns).unwrap_or(i64::MAX);
            }
        }
        let ns: u128 = match self {
            Resolution::Dec(n) if n <= 9 => u128::from(units) * 10u128.pow(u32::from(9 - n)),
            Resolution::Dec(n) => u128::from(units) / 10u128.pow(u32::from(n.min(38) - 9)),
            Resolution::Bin(n) => (u128::from(units) * 1_000_000_000) >> u32::from(n.min(127)),
        };
        i64::try_from(ns).unwrap_or(i64::MAX)
    }
}

enum State {
    Pcap {
        swapped: bool,
        nanos: bool,
        link: LinkType,
    },
    PcapNg {
        big_endian: bool,
        interfaces: Vec<Interface>,
    },
}

// pcapng block types (pcapng draft §11.1).
const SECTION_HEADER: u32 = 0x0A0D_0D0A;
/// The section header's type reads the same in either byte order.
const SECTION_HEADER_RAW: [u8; 4] = [0x0A, 0x0D, 0x0D, 0x0A];
const INTERFACE_DESCRIPTION: u32 = 1;
const OBSOLETE_PACKET: u32 = 2;
const SIMPLE_PACKET: u32 = 3;
const ENHANCED_PACKET: u32 = 6;

/// A pcapng block whose whole length is in the buffer.
#[derive(Debug, Clone, Copy)]
struct Block {
    btype: u32,
    /// The whole block, header and trailing length included.
    len: usize,
    big_endian: bool,
    /// Input offset of the block.
    offset: u64,
    /// Where the body (after type and length) starts in the buffer, and its length.
    body_at: usize,
    body_len: usize,
}

/// A packet found in a block: where its bytes lie in the buffer.
struct Found {
    ts: Timestamp,
    link: LinkType,
    at: usize,
    cap: usize,
    orig_len: u32,
}

/// Reads packets one at a time from a pcap or pcapng stream.
pub struct CaptureReader<R> {
    src: R,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    eof: bool,
    /// Input offset of `buf[start]`.
    offset: u64,
    format: Format,
    state: State,
}

impl<R: Read> CaptureReader<R> {
    /// Reads the file header and detects the format.
    pub fn new(src: R) -> Result<Self, CaptureError> {
        let mut r = CaptureReader {
            src,
            buf: vec![0; INITIAL_BUF],
            start: 0,
            end: 0,
            eof: false,
            offset: 0,
            format: Format::PcapNg,
            state: State::PcapNg {
                big_endian: false,
                interfaces: Vec::new(),
            },
        };
        let have = r.fill(24)?;
        if have == 0 {
            return Err(r.err(ErrorKind::NotACapture, "the input is empty".into()));
        }
        if have < 4 {
            return Err(r.err(
                ErrorKind::NotACapture,
                format!("only {have} bytes: not a capture"),
            ));
        }
        let magic = [r.buf[0], r.buf[1], r.buf[2], r.buf[3]];
        match magic {
            [0xD4, 0xC3, 0xB2, 0xA1] | [0xA1, 0xB2, 0xC3, 0xD4] | [0x4D, 0x3C, 0xB2, 0xA1]
            | [0xA1, 0xB2, 0x3C, 0x4D] => r.pcap_header(magic)?,
            [0x0A, 0x0D, 0x0D, 0x0A] => {
                r.format = Format::PcapNg;
                // The first block is a section header; read it like any block.
            }
            [0x34, 0xCD, 0xB2, 0xA1] | [0xA1, 0xB2, 0xCD, 0x34] => {
                return Err(r.err(
                    ErrorKind::Unsupported,
                    "modified (Kuznetzov) pcap format is not supported; convert it with `editcap -F pcap`".into(),
                ))
            }
            _ => {
                return Err(r.err(
                    ErrorKind::NotACapture,
                    format!(
                        "not a pcap or pcapng capture (starts with {:02x} {:02x} {:02x} {:02x})",
                        magic[0], magic[1], magic[2], magic[3]
                    ),
                ))
            }
        }
        Ok(r)
    }

    pub fn format(&self) -> Format {
        self.format
    }

    /// The link type of a pcap file, or of the first pcapng interface seen so far.
    pub fn link_type(&self) -> Option<LinkType> {
        match &self.state {
            State::Pcap { link, .. } => Some(*link),
            State::PcapNg { interfaces, .. } => interfaces.first().map(|i| i.link),
        }
    }

    /// Input bytes consumed so far.
    pub fn position(&self) -> u64 {
        self.offset
    }

    fn pcap_header(&mut self, magic: [u8; 4]) -> Result<(), CaptureError> {
        if self.end - self.start < 24 {
            return Err(self.err(
                ErrorKind::Truncated,
                "pcap file header is shorter than 24 bytes".into(),
            ));
        }
        let swapped = magic[0] == 0xA1; // big-endian file
        let nanos = matches!(magic, [0x4D, 0x3C, 0xB2, 0xA1] | [0xA1, 0xB2, 0x3C, 0x4D]);
        let h = &self.buf[self.start..self.start + 24];
        let rd = |at: usize| read_u32(h, at, swapped);
        // The upper bits of the link-type field carry FCS information (pcap spec §4).
        let link = LinkType::from_raw(rd(20) & 0x0FFF_FFFF);
        self.format = Format::Pcap {
            nanosecond: nanos,
            big_endian: swapped,
        };
        self.state = State::Pcap {
            swapped,
            nanos,
            link,
        };
        self.consume(24);
        Ok(())
    }

    /// The next packet, `Ok(None)` at a clean end of input.
    pub fn next_packet(&mut self) -> Result<Option<Packet<'_>>, CaptureError> {
        match self.state {
            State::Pcap { .. } => self.next_pcap(),
            State::PcapNg { .. } => self.next_pcapng(),
        }
    }

    fn next_pcap(&mut self) -> Result<Option<Packet<'_>>, CaptureError> {
        let State::Pcap {
            swapped,
            nanos,
            link,
        } = self.state
        else {
            return Ok(None);
        };
        let have = self.fill(16)?;
        if have == 0 {
            return Ok(None);
        }
        if have < 16 {
            return Err(self.err(
                ErrorKind::Truncated,
                format!("capture ends inside a packet record header ({have} of 16 bytes)"),
            ));
        }
        let [sec, frac, incl, orig] =
            record_header(&self.buf[self.start..self.start + 16], swapped);
        let incl = incl as usize;
        if incl > MAX_RECORD {
            return Err(self.err(
                ErrorKind::Corrupt,
                format!("packet record claims {incl} captured bytes: the file is corrupt"),
            ));
        }
        let have = self.fill(16 + incl)?;
        if have < 16 + incl {
            return Err(self.err(
                ErrorKind::Truncated,
                format!(
                    "capture ends inside a packet ({} of {incl} bytes present)",
                    have - 16
                ),
            ));
        }
        let frac_ns = if nanos {
            i64::from(frac)
        } else {
            i64::from(frac) * 1000
        };
        let ts = Timestamp::from_nanos(i64::from(sec) * 1_000_000_000 + frac_ns);
        let offset = self.offset;
        let s = self.start + 16;
        self.consume(16 + incl);
        Ok(Some(Packet {
            ts,
            link,
            data: &self.buf[s..s + incl],
            orig_len: orig,
            offset,
        }))
    }

    /// One pcapng block a step: a section header resets the byte order and the
    /// interfaces, an interface description adds one, a packet block is handed
    /// out, anything else is skipped (pcapng draft §3, §4). Out of line: the
    /// classic format's path keeps its registers.
    #[inline(never)]
    fn next_pcapng(&mut self) -> Result<Option<Packet<'_>>, CaptureError> {
        loop {
            let Some(block) = self.pcapng_block()? else {
                return Ok(None);
            };
            let found = match block.btype {
                SECTION_HEADER => {
                    self.start_section(block);
                    None
                }
                INTERFACE_DESCRIPTION => {
                    self.add_interface(block)?;
                    None
                }
                ENHANCED_PACKET | OBSOLETE_PACKET => Some(self.packet_block(block)?),
                SIMPLE_PACKET => Some(self.simple_packet_block(block)?),
                _ => {
                    self.consume(block.len);
                    None
                }
            };
            if let Some(p) = found {
                self.consume(block.len);
                return Ok(Some(Packet {
                    ts: p.ts,
                    link: p.link,
                    data: &self.buf[p.at..p.at + p.cap],
                    orig_len: p.orig_len,
                    offset: block.offset,
                }));
            }
        }
    }

    /// The next block's type and length, with the whole block in the buffer;
    /// `Ok(None)` at a clean end of input. A section header's own byte-order
    /// magic decides how its length is read; every other block is read in the
    /// byte order of its section.
    fn pcapng_block(&mut self) -> Result<Option<Block>, CaptureError> {
        let have = self.fill(12)?;
        if have == 0 {
            return Ok(None);
        }
        if have < 12 {
            return Err(self.err(
                ErrorKind::Truncated,
                format!("capture ends inside a block header ({have} of 12 bytes)"),
            ));
        }
        let head = &self.buf[self.start..self.start + 12];
        let (big_endian, min, what) = if head[0..4] == SECTION_HEADER_RAW {
            let big_endian = match [head[8], head[9], head[10], head[11]] {
                [0x1A, 0x2B, 0x3C, 0x4D] => true,
                [0x4D, 0x3C, 0x2B, 0x1A] => false,
                _ => {
                    return Err(self.err(
                        ErrorKind::Corrupt,
                        "pcapng section header has an invalid byte-order magic".into(),
                    ))
                }
            };
            (big_endian, 28, "section header block")
        } else {
            let State::PcapNg { big_endian, .. } = self.state else {
                return Ok(None);
            };
            (big_endian, 12, "block")
        };
        let btype = read_u32(head, 0, big_endian);
        let len = read_u32(head, 4, big_endian) as usize;
        self.check_block_len(len, min)?;
        self.need(len, what)?;
        Ok(Some(Block {
            btype,
            len,
            big_endian,
            offset: self.offset,
            body_at: self.start + 8,
            body_len: len - 12,
        }))
    }

    /// A section header block: a new byte order, and no interfaces yet.
    fn start_section(&mut self, block: Block) {
        self.state = State::PcapNg {
            big_endian: block.big_endian,
            interfaces: Vec::new(),
        };
        self.consume(block.len);
    }

    /// An interface description block: packets name it by its position.
    fn add_interface(&mut self, block: Block) -> Result<(), CaptureError> {
        let iface = self.parse_idb(block.body_at, block.body_len, block.big_endian)?;
        if let State::PcapNg { interfaces, .. } = &mut self.state {
            interfaces.push(iface);
        }
        self.consume(block.len);
        Ok(())
    }

    /// An enhanced packet block, or the obsolete packet block (a 16-bit
    /// interface id and a drop count where the enhanced one has a 32-bit id).
    fn packet_block(&self, block: Block) -> Result<Found, CaptureError> {
        let Block {
            btype,
            big_endian: be,
            body_at,
            body_len,
            ..
        } = block;
        if body_len < 20 {
            return Err(self.err(ErrorKind::Corrupt, "packet block too short".into()));
        }
        let b = &self.buf[body_at..body_at + body_len];
        let iface_id = if btype == ENHANCED_PACKET {
            read_u32(b, 0, be) as usize
        } else {
            usize::from(read_u16(b, 0, be))
        };
        let (hi, lo) = (read_u32(b, 4, be), read_u32(b, 8, be));
        let cap = read_u32(b, 12, be) as usize;
        let orig_len = read_u32(b, 16, be);
        if cap > body_len - 20 {
            return Err(self.err(
                ErrorKind::Corrupt,
                format!(
                    "packet block claims {cap} captured bytes but holds {}",
                    body_len - 20
                ),
            ));
        }
        let iface = self.interface(iface_id)?;
        let units = (u64::from(hi) << 32) | u64::from(lo);
        let ts = Timestamp::from_nanos(
            iface
                .resolution
                .to_nanos(units)
                .saturating_add(iface.offset_s.saturating_mul(1_000_000_000)),
        );
        Ok(Found {
            ts,
            link: iface.link,
            at: body_at + 20,
            cap,
            orig_len,
        })
    }

    /// A simple packet block: no timestamp, interface 0; the captured length
    /// is the smaller of the original length and the snaplen.
    fn simple_packet_block(&self, block: Block) -> Result<Found, CaptureError> {
        if block.body_len < 4 {
            return Err(self.err(ErrorKind::Corrupt, "simple packet block too short".into()));
        }
        let orig_len = read_u32(&self.buf[block.body_at..], 0, block.big_endian);
        let iface = self.interface(0)?;
        let mut cap = (orig_len as usize).min(block.body_len - 4);
        if iface.snaplen != 0 {
            cap = cap.min(iface.snaplen as usize);
        }
        Ok(Found {
            ts: Timestamp::from_nanos(0),
            link: iface.link,
            at: block.body_at + 4,
            cap,
            orig_len,
        })
    }

    fn interface(&self, id: usize) -> Result<Interface, CaptureError> {
        match &self.state {
            State::PcapNg { interfaces, .. } => interfaces.get(id).copied().ok_or_else(|| {
                self.err(
                    ErrorKind::Corrupt,
                    format!(
                        "packet names interface {id}, but only {} were described",
                        interfaces.len()
                    ),
                )
            }),
            State::Pcap { .. } => Err(self.err(ErrorKind::Corrupt, "no interface".into())),
        }
    }

    fn parse_idb(&self, at: usize, len: usize, be: bool) -> Result<Interface, CaptureError> {
        if len < 8 {
            return Err(self.err(
                ErrorKind::Corrupt,
                "interface description block too short".into(),
            ));
        }
        let b = &self.buf[at..at + len];
        let mut iface = Interface {
            link: LinkType::from_raw(u32::from(read_u16(b, 0, be))),
            snaplen: read_u32(b, 4, be),
            resolution: Resolution::Dec(6),
            offset_s: 0,
        };
        let mut opts = &b[8..];
        while opts.len() >= 4 {
            let code = read_u16(opts, 0, be);
            let olen = usize::from(read_u16(opts, 2, be));
            let padded = (olen + 3) & !3;
            if code == 0 || opts.len() < 4 + padded {
                break;
            }
            let v = &opts[4..4 + olen];
            match (code, olen) {
                (9, 1) => {
                    iface.resolution = if v[0] & 0x80 != 0 {
                        Resolution::Bin(v[0] & 0x7F)
                    } else {
                        Resolution::Dec(v[0])
                    }
                }
                (14, 8) => {
                    let raw = if be {
                        u64::from_be_bytes([v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]])
                    } else {
                        u64::from_le_bytes([v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]])
                    };
                    iface.offset_s = raw as i64;
                }
                _ => {}
            }
            opts = &opts[4 + padded..];
        }
        Ok(iface)
    }

    fn check_block_len(&self, len: usize, min: usize) -> Result<(), CaptureError> {
        if len < min || !len.is_multiple_of(4) || len > MAX_RECORD {
            return Err(self.err(
                ErrorKind::Corrupt,
                format!("pcapng block length {len} is impossible: the file is corrupt"),
            ));
        }
        Ok(())
    }

    fn need(&mut self, len: usize, what: &str) -> Result<(), CaptureError> {
        let have = self.fill(len)?;
        if have < len {
            return Err(self.err(
                ErrorKind::Truncated,
                format!("capture ends inside a {what} ({have} of {len} bytes present)"),
            ));
        }
        Ok(())
    }

    fn err(&self, kind: ErrorKind, detail: String) -> CaptureError {
        CaptureError {
            kind,
            offset: self.offset,
            detail,
        }
    }

    fn consume(&mut self, n: usize) {
        self.start += n;
        self.offset += n as u64;
    }

    /// Makes at least `n` bytes available from `start` if the input has them;
    /// returns how many are available (less than `n` only at end of input).
    /// Inline: nearly every call finds the bytes already buffered.
    #[inline(always)]
    fn fill(&mut self, n: usize) -> Result<usize, CaptureError> {
        if self.end - self.start >= n || self.eof {
            return Ok(self.end - self.start);
        }
        self.refill(n)
    }

    /// [`Self::fill`] when the buffer runs short: moves what is left to the
    /// front and reads until `n` bytes are there or the input ends.
    #[cold]
    #[inline(never)]
    fn refill(&mut self, n: usize) -> Result<usize, CaptureError> {
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.buf.len() < n {
            self.buf.resize(n.next_power_of_two(), 0);
        }
        while self.end < n {
            match self.src.read(&mut self.buf[self.end..]) {
                Ok(0) => {
                    self.eof = true;
                    break;
                }
                Ok(k) => self.end += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    let offset = self.offset + self.end as u64;
                    // Damaged compressed data is the capture's fault, not the
                    // reading's: it is reported like a damaged record.
                    if let Some(d) = e
                        .get_ref()
                        .and_then(|inner| inner.downcast_ref::<DecompressError>())
                    {
                        return Err(CaptureError {
                            kind: if d.truncated {
                                ErrorKind::Truncated
                            } else {
                                ErrorKind::Corrupt
                            },
                            offset,
                            detail: d.to_string(),
                        });
                    }
                    return Err(CaptureError {
                        kind: ErrorKind::Io,
                        offset,
                        detail: format!("read failed: {e}"),
                    });
                }
            }
        }
        Ok(self.end - self.start)
    }
}

#[inline]
fn read_u32(b: &[u8], at: usize, big_endian: bool) -> u32 {
    let a: [u8; 4] = b[at..at + 4].try_into().unwrap_or_default();
    if big_endian {
        u32::from_be_bytes(a)
    } else {
        u32::from_le_bytes(a)
    }
}

/// A pcap record header's four words (seconds, fraction, captured and
/// original lengths): the byte order tested once for all four.
#[inline]
fn record_header(b: &[u8], big_endian: bool) -> [u32; 4] {
    let Ok(h) = <&[u8; 16]>::try_from(b) else {
        return [0; 4];
    };
    let word = |i: usize| [h[i], h[i + 1], h[i + 2], h[i + 3]];
    if big_endian {
        [0, 4, 8, 12].map(|i| u32::from_be_bytes(word(i)))
    } else {
        [0, 4, 8, 12].map(|i| u32::from_le_bytes(word(i)))
    }
}

#[inline]
fn read_u16(b: &[u8], at: usize, big_endian: bool) -> u16 {
    let a: [u8; 2] = b[at..at + 2].try_into().unwrap_or_default();
    if big_endian {
        u16::from_be_bytes(a)
    } else {
        u16::from_le_bytes(a)
    }
}

pub mod write;

#[cfg(test)]
mod tests;
