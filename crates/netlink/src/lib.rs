//! Netlink (netlink(7)) as the live commands use it: one socket per dump,
//! and the reply read through checked views over bytes.
//!
//! [`sys`] holds the socket calls, the crate's only `unsafe` code. Everything
//! else is pure functions over byte slices, so every parser is unit-tested on
//! built or recorded bytes and fuzzed. The bytes are untrusted: a length that
//! points past the buffer ends the walk with an [`Error`], never a panic.
//!
//! Netlink is in host byte order (netlink(7)). Families build on this:
//! rtnetlink (routes, links, qdiscs) in `tcpdoctor-sysctl`, sock_diag (TCP
//! sockets) in `tcpdoctor-sockets`.

pub mod sys;

use std::cell::Cell;
use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::OwnedFd;
use std::time::Duration;

/// `struct nlmsghdr`: length, type, flags, sequence, port id.
pub const HEADER_LEN: usize = 16;

/// Message types every family shares (linux/netlink.h).
pub const NLMSG_NOOP: u16 = 1;
pub const NLMSG_ERROR: u16 = 2;
pub const NLMSG_DONE: u16 = 3;

pub const NLM_F_REQUEST: u16 = 0x1;
/// NLM_F_ROOT | NLM_F_MATCH: "everything".
pub const NLM_F_DUMP: u16 = 0x300;
/// The dump was interrupted by a change (netlink(7)): its content may be inconsistent.
pub const NLM_F_DUMP_INTR: u16 = 0x10;

/// Attribute type bits that are flags (NLA_F_NESTED, NLA_F_NET_BYTEORDER), not part of the type.
const NLA_TYPE_MASK: u16 = 0x3fff;

/// A malformed message or attribute: what and where (byte offset in the buffer given).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Error {
    pub offset: usize,
    pub what: &'static str,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at byte {}", self.what, self.offset)
    }
}

impl std::error::Error for Error {}

/// Checks that a message body holds its family's fixed header (`len` bytes:
/// `ifinfomsg`, `rtmsg`, `tcmsg`…) before the attributes; `what` says which
/// was short.
pub fn need_fixed(payload: &[u8], len: usize, what: &'static str) -> Result<(), Error> {
    if payload.len() < len {
        return Err(Error { offset: 0, what });
    }
    Ok(())
}

/// Netlink aligns every message and attribute to 4 bytes.
pub fn align(len: usize) -> usize {
    len.saturating_add(3) & !3
}

/// One message: its header fields and the bytes after the header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Message<'a> {
    /// Byte offset of the message in the buffer given.
    pub offset: usize,
    pub kind: u16,
    pub flags: u16,
    pub seq: u32,
    pub payload: &'a [u8],
}

/// The messages of one datagram (or of recorded datagrams laid end to end).
pub fn messages(buf: &[u8]) -> Messages<'_> {
    Messages {
        buf,
        offset: 0,
        failed: false,
    }
}

pub struct Messages<'a> {
    buf: &'a [u8],
    offset: usize,
    failed: bool,
}

impl<'a> Iterator for Messages<'a> {
    type Item = Result<Message<'a>, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.offset >= self.buf.len() {
            return None;
        }
        let at = self.offset;
        let rest = &self.buf[at..];
        let fail = |what| Some(Err(Error { offset: at, what }));
        self.failed = true;
        if rest.len() < HEADER_LEN {
            return fail("truncated message header");
        }
        let len = ne_u32(&rest[0..4]) as usize;
        if len < HEADER_LEN {
            return fail("message length below the header size");
        }
        if len > rest.len() {
            return fail("message length past the end of the buffer");
        }
        self.failed = false;
        self.offset = at.saturating_add(align(len));
        Some(Ok(Message {
            offset: at,
            kind: ne_u16(&rest[4..6]),
            flags: ne_u16(&rest[6..8]),
            seq: ne_u32(&rest[8..12]),
            payload: &rest[HEADER_LEN..len],
        }))
    }
}

/// One attribute (`struct nlattr`): its type without the flag bits, and value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attr<'a> {
    pub kind: u16,
    pub value: &'a [u8],
}

impl Attr<'_> {
    pub fn u32(&self) -> Option<u32> {
        (self.value.len() >= 4).then(|| ne_u32(&self.value[..4]))
    }

    pub fn u64(&self) -> Option<u64> {
        (self.value.len() >= 8).then(|| ne_u64(&self.value[..8]))
    }

    /// A NUL-terminated string (the terminator and anything after it dropped).
    pub fn string(&self) -> String {
        let end = self
            .value
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(self.value.len());
        String::from_utf8_lossy(&self.value[..end]).into_owned()
    }

    /// An IPv4 or IPv6 address, by the value's length.
    pub fn ip(&self) -> Option<IpAddr> {
        ip_from(self.value)
    }
}

/// The attributes in `buf` (a message body after its fixed header, or a
/// nested attribute's value). `base` is only for error offsets.
pub fn attrs(buf: &[u8], base: usize) -> Attrs<'_> {
    Attrs {
        buf,
        offset: 0,
        base,
        failed: false,
    }
}

pub struct Attrs<'a> {
    buf: &'a [u8],
    offset: usize,
    base: usize,
    failed: bool,
}

impl<'a> Iterator for Attrs<'a> {
    type Item = Result<Attr<'a>, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        // Fewer than 4 bytes left is alignment slack, not an attribute.
        if self.failed || self.offset.saturating_add(4) > self.buf.len() {
            return None;
        }
        let at = self.offset;
        let rest = &self.buf[at..];
        let len = ne_u16(&rest[0..2]) as usize;
        if len < 4 || len > rest.len() {
            self.failed = true;
            return Some(Err(Error {
                offset: self.base.saturating_add(at),
                what: "attribute length out of bounds",
            }));
        }
        self.offset = at.saturating_add(align(len));
        Some(Ok(Attr {
            kind: ne_u16(&rest[2..4]) & NLA_TYPE_MASK,
            value: &rest[4..len],
        }))
    }
}

/// What one datagram of a dump reply holds for the request `seq`.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Chunk<'a> {
    /// Payloads of the messages of type `want`.
    pub payloads: Vec<&'a [u8]>,
    /// NLMSG_DONE seen: the dump is complete.
    pub done: bool,
    /// NLMSG_ERROR with a non-zero code (a negative errno).
    pub error: Option<i32>,
    /// A message flagged NLM_F_DUMP_INTR: the table changed while dumping.
    pub interrupted: bool,
}

/// Sorts one received datagram of a dump: the messages of type `want` and
/// sequence `seq`, the end of the dump, an error, an interruption. Messages
/// of other sequences (a stale reply) are skipped.
pub fn scan(datagram: &[u8], seq: u32, want: u16) -> Result<Chunk<'_>, Error> {
    let mut chunk = Chunk::default();
    for m in messages(datagram) {
        let m = m?;
        if m.seq != seq {
            continue;
        }
        if m.flags & NLM_F_DUMP_INTR != 0 {
            chunk.interrupted = true;
        }
        match m.kind {
            NLMSG_DONE => {
                chunk.done = true;
                break;
            }
            NLMSG_ERROR => {
                // struct nlmsgerr: int error, then the request's header.
                let code = m.payload.get(0..4).map(|b| ne_u32(b) as i32).unwrap_or(0);
                if code != 0 {
                    chunk.error = Some(code);
                }
                chunk.done = true;
                break;
            }
            k if k == want => chunk.payloads.push(m.payload),
            _ => {}
        }
    }
    Ok(chunk)
}

/// Reply buffer: a dump datagram is at most 32 KiB (the kernel caps
/// `max_recvmsg_len` there); room for several never truncates one.
const RECEIVE_BUFFER: usize = 1 << 18;

/// Dumps redone when the kernel flags them interrupted, at most.
const DUMP_TRIES: usize = 3;

/// One netlink socket that dumps tables, the careful way every command uses:
/// a receive timeout (a kernel that never answers is an error, not a hang),
/// a sequence number per request (stale replies are skipped), and a dump the
/// kernel flags as interrupted (the table changed meanwhile) redone.
pub struct Dumper {
    fd: OwnedFd,
    seq: Cell<u32>,
}

/// What a dump gave.
#[derive(Debug, Default)]
pub struct Dump {
    /// The payloads of every message of the type asked for, copied.
    pub payloads: Vec<Vec<u8>>,
    /// Still interrupted after every try: an entry may be missing or listed twice.
    pub interrupted: bool,
}

impl Dumper {
    /// A socket of `protocol` (`NETLINK_ROUTE`, `NETLINK_SOCK_DIAG`) whose
    /// receives time out after `timeout`.
    pub fn open(protocol: libc::c_int, timeout: Duration) -> io::Result<Dumper> {
        let fd = sys::socket(protocol)?;
        sys::set_receive_timeout(&fd, timeout)?;
        Ok(Dumper {
            fd,
            seq: Cell::new(1),
        })
    }

    /// One dump of request type `kind` with its fixed header `body`: the
    /// payloads of every `want` message. An error the kernel answers with
    /// is returned as its errno; a malformed reply as `InvalidData`.
    pub fn dump(&self, kind: u16, want: u16, body: &[u8]) -> io::Result<Dump> {
        let mut buf = vec![0u8; RECEIVE_BUFFER];
        let mut last = Dump::default();
        for _ in 0..DUMP_TRIES {
            let seq = self.seq.get();
            self.seq.set(seq.wrapping_add(1));
            sys::send_to_kernel(&self.fd, &dump_request(kind, seq, body))?;
            let mut out = Dump::default();
            loop {
                let n = sys::receive(&self.fd, &mut buf)?;
                if n == 0 {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "netlink: the dump ended without NLMSG_DONE",
                    ));
                }
                let chunk = scan(&buf[..n], seq, want)
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
                out.payloads
                    .extend(chunk.payloads.into_iter().map(<[u8]>::to_vec));
                out.interrupted |= chunk.interrupted;
                if let Some(code) = chunk.error {
                    return Err(io::Error::from_raw_os_error(code.saturating_neg()));
                }
                if chunk.done {
                    break;
                }
            }
            if !out.interrupted {
                return Ok(out);
            }
            last = out;
        }
        Ok(last)
    }
}

/// A dump request: header, then the family's fixed header `body`
/// (`rtmsg`, `ifinfomsg`, `tcmsg`, `inet_diag_req_v2`) with the fields that
/// select what to dump. The port id is 0: the kernel fills in ours.
pub fn dump_request(kind: u16, seq: u32, body: &[u8]) -> Vec<u8> {
    let len = HEADER_LEN + body.len();
    let mut m = Vec::with_capacity(align(len));
    m.extend_from_slice(&(len as u32).to_ne_bytes());
    m.extend_from_slice(&kind.to_ne_bytes());
    m.extend_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    m.extend_from_slice(&seq.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.extend_from_slice(body);
    m.resize(align(len), 0);
    m
}

pub fn ne_u16(b: &[u8]) -> u16 {
    let mut a = [0u8; 2];
    a.copy_from_slice(&b[..2]);
    u16::from_ne_bytes(a)
}

pub fn ne_u32(b: &[u8]) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[..4]);
    u32::from_ne_bytes(a)
}

pub fn ne_u64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_ne_bytes(a)
}

pub fn ip_from(b: &[u8]) -> Option<IpAddr> {
    match b.len() {
        4 => Some(IpAddr::V4(Ipv4Addr::new(b[0], b[1], b[2], b[3]))),
        16 => {
            let mut a = [0u8; 16];
            a.copy_from_slice(b);
            Some(IpAddr::V6(Ipv6Addr::from(a)))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // rtnetlink message types (linux/rtnetlink.h), as sample kinds.
    const RTM_NEWROUTE: u16 = 24;
    const RTM_GETROUTE: u16 = 26;
    const RTM_GETLINK: u16 = 18;

    #[test]
    fn request_is_aligned_and_says_dump() {
        let m = dump_request(RTM_GETROUTE, 7, &[2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(m.len(), 28);
        let parsed: Vec<_> = messages(&m).collect();
        assert_eq!(parsed.len(), 1);
        let msg = parsed[0].expect("valid");
        assert_eq!(msg.kind, RTM_GETROUTE);
        assert_eq!(msg.flags, NLM_F_REQUEST | NLM_F_DUMP);
        assert_eq!(msg.seq, 7);
        assert_eq!(msg.payload[0], 2);
        // An odd-sized body is padded to 4 bytes.
        assert_eq!(dump_request(RTM_GETLINK, 1, &[0; 5]).len(), 24);
    }

    #[test]
    fn truncated_and_oversized_messages_end_the_walk() {
        let m = dump_request(RTM_GETROUTE, 1, &[0; 12]);
        // Cut inside the payload: the length points past the end.
        let cut = &m[..20];
        let got: Vec<_> = messages(cut).collect();
        assert_eq!(got.len(), 1);
        assert!(got[0].is_err());
        // A length below the header size.
        let mut bad = m.clone();
        bad[0..4].copy_from_slice(&3u32.to_ne_bytes());
        assert!(messages(&bad).next().expect("one").is_err());
        assert_eq!(messages(&bad).count(), 1);
        // Half a header.
        assert!(messages(&m[..9]).next().expect("one").is_err());
    }

    #[test]
    fn attributes_stop_at_a_bad_length() {
        // Two attributes: type 3 "ab\0" (len 7, padded to 8), type 0x8004 (nested flag) u32 9.
        let mut b = vec![7, 0, 3, 0, b'a', b'b', 0, 0];
        b.extend_from_slice(&[8, 0, 4, 0x80, 9, 0, 0, 0]);
        let got: Vec<_> = attrs(&b, 0).map(|a| a.expect("valid")).collect();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].kind, 3);
        assert_eq!(got[0].string(), "ab");
        assert_eq!(got[1].kind, 4);
        assert_eq!(got[1].u32(), Some(9));
        // Length 200 in a 12-byte buffer.
        let bad = [200u8, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        let got: Vec<_> = attrs(&bad, 100).collect();
        assert_eq!(
            got,
            vec![Err(Error {
                offset: 100,
                what: "attribute length out of bounds"
            })]
        );
        // Length 2 (below the attribute header) is refused too.
        assert!(attrs(&[2, 0, 1, 0], 0).next().expect("one").is_err());
    }

    #[test]
    fn scan_sorts_done_error_and_interruption() {
        let mut d = Vec::new();
        let msg = |kind: u16, flags: u16, seq: u32, body: &[u8]| {
            let mut m = Vec::new();
            m.extend_from_slice(&((16 + body.len()) as u32).to_ne_bytes());
            m.extend_from_slice(&kind.to_ne_bytes());
            m.extend_from_slice(&flags.to_ne_bytes());
            m.extend_from_slice(&seq.to_ne_bytes());
            m.extend_from_slice(&0u32.to_ne_bytes());
            m.extend_from_slice(body);
            m
        };
        d.extend(msg(RTM_NEWROUTE, 2, 5, &[1, 2, 3, 4]));
        d.extend(msg(RTM_NEWROUTE, 2, 4, &[9, 9, 9, 9])); // stale sequence
        d.extend(msg(RTM_NEWROUTE, 2 | NLM_F_DUMP_INTR, 5, &[5, 6, 7, 8]));
        d.extend(msg(NLMSG_DONE, 2, 5, &[0, 0, 0, 0]));
        let c = scan(&d, 5, RTM_NEWROUTE).expect("valid");
        assert_eq!(c.payloads, vec![&[1u8, 2, 3, 4][..], &[5, 6, 7, 8][..]]);
        assert!(c.done && c.interrupted && c.error.is_none());

        let e = msg(NLMSG_ERROR, 0, 5, &(-13i32).to_ne_bytes());
        let c = scan(&e, 5, RTM_NEWROUTE).expect("valid");
        assert_eq!(c.error, Some(-13));
        assert!(c.done);
    }
}
