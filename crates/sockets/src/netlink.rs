//! `NETLINK_SOCK_DIAG` messages as bytes: the dump request for TCP sockets,
//! and the reply's messages read through checked views. Pure functions over
//! byte slices; the socket that carries them lives in `sys.rs`.
//!
//! Layouts are those of `linux/netlink.h` (`struct nlmsghdr`, `struct nlattr`
//! / `rtattr`), `linux/sock_diag.h` and `linux/inet_diag.h`
//! (`struct inet_diag_req_v2`, `struct inet_diag_msg`). Netlink headers are in
//! host byte order; the ports and addresses of `inet_diag_sockid` are in
//! network byte order. Every length is checked before it is used: a reply
//! that is short or inconsistent yields [`Malformed`], never a panic.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// `NETLINK_SOCK_DIAG` (`linux/netlink.h`).
pub const NETLINK_SOCK_DIAG: i32 = 4;
/// `SOCK_DIAG_BY_FAMILY` (`linux/sock_diag.h`): the message type of both the
/// request and each socket in the reply.
pub const SOCK_DIAG_BY_FAMILY: u16 = 20;
const NLMSG_NOOP: u16 = 1;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 0x1;
/// `NLM_F_ROOT | NLM_F_MATCH`.
const NLM_F_DUMP: u16 = 0x300;
/// Set on a dump's messages when the table changed while it was walked:
/// a socket may then be missing or listed twice (`linux/netlink.h`).
pub const NLM_F_DUMP_INTR: u16 = 0x10;

const NLMSG_HDRLEN: usize = 16;
/// `struct inet_diag_req_v2`: family, protocol, ext, pad, states, sockid (48).
const REQ_V2_LEN: usize = 56;
/// Bytes of one dump request.
pub const REQUEST_LEN: usize = NLMSG_HDRLEN + REQ_V2_LEN;
/// `struct inet_diag_msg`: family, state, timer, retrans, sockid (48),
/// expires, rqueue, wqueue, uid, inode.
pub const DIAG_MSG_LEN: usize = 72;

/// Attribute types of an `inet_diag_msg` (`enum` in `linux/inet_diag.h`).
pub const INET_DIAG_INFO: u16 = 2;
pub const INET_DIAG_CONG: u16 = 4;
pub const INET_DIAG_SKMEMINFO: u16 = 7;
pub const INET_DIAG_SHUTDOWN: u16 = 8;

/// The extensions asked for: `idiag_ext` holds `1 << (type - 1)` for each.
pub const EXTENSIONS: u8 = (1 << (INET_DIAG_INFO - 1))
    | (1 << (INET_DIAG_CONG - 1))
    | (1 << (INET_DIAG_SKMEMINFO - 1))
    | (1 << (INET_DIAG_SHUTDOWN - 1));

pub const AF_INET: u8 = 2;
pub const AF_INET6: u8 = 10;
const IPPROTO_TCP: u8 = 6;

/// The request for a dump of every TCP socket of `family` (`AF_INET` or
/// `AF_INET6`) whose state is in `states` (bit `1 << state`, as
/// `idiag_states`), with tcp_info, congestion control, socket memory and
/// shutdown state. A dump is per family: the kernel has no `AF_UNSPEC`
/// handler for `SOCK_DIAG_BY_FAMILY`.
pub fn dump_request(family: u8, states: u32, seq: u32) -> [u8; REQUEST_LEN] {
    let mut b = [0u8; REQUEST_LEN];
    b[0..4].copy_from_slice(&(REQUEST_LEN as u32).to_ne_bytes());
    b[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    b[6..8].copy_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    b[8..12].copy_from_slice(&seq.to_ne_bytes());
    // nlmsg_pid 0: the kernel fills in our port id.
    b[16] = family;
    b[17] = IPPROTO_TCP;
    b[18] = EXTENSIONS;
    b[20..24].copy_from_slice(&states.to_ne_bytes());
    // The sockid stays zero: a dump matches on states only.
    b
}

/// What is wrong with a reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Malformed {
    /// A message header or its declared length runs past the bytes received.
    Truncated { at: usize },
    /// A message declares a length below its own header.
    BadLength { at: usize, len: u32 },
    /// A socket message shorter than `struct inet_diag_msg`.
    ShortDiag { at: usize, len: usize },
}

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Malformed::Truncated { at } => write!(f, "netlink message truncated at byte {at}"),
            Malformed::BadLength { at, len } => {
                write!(f, "netlink message at byte {at} declares length {len}")
            }
            Malformed::ShortDiag { at, len } => {
                write!(
                    f,
                    "inet_diag message at byte {at} has {len} bytes, fewer than 72"
                )
            }
        }
    }
}

/// One message of a reply.
#[derive(Debug, Clone, Copy)]
pub enum Message<'a> {
    /// A socket (`SOCK_DIAG_BY_FAMILY`); `interrupted` when the kernel set
    /// `NLM_F_DUMP_INTR`.
    Socket { msg: DiagMsg<'a>, interrupted: bool },
    /// The end of the dump.
    Done,
    /// `NLMSG_ERROR` with its (negative) errno; 0 is an acknowledgement.
    Error(i32),
    /// Anything else (`NLMSG_NOOP`, types this reader does not know).
    Other(u16),
}

/// The messages of one `recv()` worth of reply.
pub fn messages(buf: &[u8]) -> Messages<'_> {
    Messages { buf, at: 0 }
}

/// Iterator over the messages of a reply buffer; stops after the first
/// malformed one.
pub struct Messages<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Iterator for Messages<'a> {
    type Item = Result<Message<'a>, Malformed>;

    fn next(&mut self) -> Option<Self::Item> {
        let at = self.at;
        let rest = self.buf.get(at..)?;
        if rest.is_empty() {
            return None;
        }
        // Whatever happens below, a malformed message ends the iteration.
        self.at = self.buf.len();
        let Some(hdr) = rest.get(..NLMSG_HDRLEN) else {
            return Some(Err(Malformed::Truncated { at }));
        };
        let len = u32_ne(hdr, 0);
        let kind = u16_ne(hdr, 4);
        let flags = u16_ne(hdr, 6);
        if (len as usize) < NLMSG_HDRLEN {
            return Some(Err(Malformed::BadLength { at, len }));
        }
        let Some(payload) = rest.get(NLMSG_HDRLEN..len as usize) else {
            return Some(Err(Malformed::Truncated { at }));
        };
        // NLMSG_ALIGN: the next message starts at a multiple of 4.
        self.at = at.saturating_add(align4(len as usize)).min(self.buf.len());
        Some(Ok(match kind {
            SOCK_DIAG_BY_FAMILY => match DiagMsg::new(payload) {
                Some(msg) => Message::Socket {
                    msg,
                    interrupted: flags & NLM_F_DUMP_INTR != 0,
                },
                None => {
                    self.at = self.buf.len();
                    return Some(Err(Malformed::ShortDiag {
                        at,
                        len: payload.len(),
                    }));
                }
            },
            NLMSG_DONE => Message::Done,
            NLMSG_ERROR => Message::Error(payload.get(..4).map_or(0, |b| i32_ne(b, 0))),
            NLMSG_NOOP => Message::Other(NLMSG_NOOP),
            other => Message::Other(other),
        }))
    }
}

fn align4(n: usize) -> usize {
    n.saturating_add(3) & !3
}

fn u16_ne(b: &[u8], off: usize) -> u16 {
    u16::from_ne_bytes([b[off], b[off + 1]])
}

fn u32_ne(b: &[u8], off: usize) -> u32 {
    u32::from_ne_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}

fn i32_ne(b: &[u8], off: usize) -> i32 {
    i32::from_ne_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}

/// A checked view of one `struct inet_diag_msg` and its attributes. After
/// [`DiagMsg::new`] no accessor can panic.
#[derive(Debug, Clone, Copy)]
pub struct DiagMsg<'a> {
    fixed: &'a [u8; DIAG_MSG_LEN],
    attrs: &'a [u8],
}

impl<'a> DiagMsg<'a> {
    /// `None` when `payload` is shorter than `struct inet_diag_msg`.
    pub fn new(payload: &'a [u8]) -> Option<DiagMsg<'a>> {
        let (fixed, attrs) = payload.split_first_chunk::<DIAG_MSG_LEN>()?;
        Some(DiagMsg { fixed, attrs })
    }

    pub fn family(&self) -> u8 {
        self.fixed[0]
    }
    /// `TCP_ESTABLISHED` = 1 … (`linux/tcp_states.h`).
    pub fn state(&self) -> u8 {
        self.fixed[1]
    }
    /// Which timer is pending: 0 none, 1 retransmit, 2 keep-alive, 3
    /// TIME_WAIT, 4 zero-window probe.
    pub fn timer(&self) -> u8 {
        self.fixed[2]
    }
    /// Retransmissions of the pending timer (`icsk_retransmits`).
    pub fn retrans(&self) -> u8 {
        self.fixed[3]
    }
    pub fn local(&self) -> SocketAddr {
        SocketAddr::new(
            self.addr(8),
            u16::from_be_bytes([self.fixed[4], self.fixed[5]]),
        )
    }
    pub fn remote(&self) -> SocketAddr {
        SocketAddr::new(
            self.addr(24),
            u16::from_be_bytes([self.fixed[6], self.fixed[7]]),
        )
    }
    fn addr(&self, off: usize) -> IpAddr {
        let mut a = [0u8; 16];
        a.copy_from_slice(&self.fixed[off..off + 16]);
        if self.family() == AF_INET6 {
            IpAddr::V6(Ipv6Addr::from(a))
        } else {
            IpAddr::V4(Ipv4Addr::new(a[0], a[1], a[2], a[3]))
        }
    }
    /// Milliseconds until the pending timer fires.
    pub fn expires_ms(&self) -> u32 {
        u32_ne(self.fixed, 52)
    }
    /// Bytes received and not read by the application; for a listener, the
    /// connections waiting in its accept queue.
    pub fn rqueue(&self) -> u32 {
        u32_ne(self.fixed, 56)
    }
    /// Bytes sent and not acknowledged; for a listener, its backlog (the
    /// accept queue's limit).
    pub fn wqueue(&self) -> u32 {
        u32_ne(self.fixed, 60)
    }
    pub fn uid(&self) -> u32 {
        u32_ne(self.fixed, 64)
    }
    /// The socket's inode number, as `/proc/PID/fd/N` shows `socket:[inode]`
    /// (0 for TIME_WAIT and request sockets, which no descriptor refers to).
    pub fn inode(&self) -> u32 {
        u32_ne(self.fixed, 68)
    }
    /// The attributes (`INET_DIAG_*`) that follow the fixed part.
    pub fn attrs(&self) -> Attrs<'a> {
        Attrs { rest: self.attrs }
    }
}

/// Iterator over `struct nlattr` TLVs: (type, payload). Stops at the first
/// attribute whose length does not fit.
pub struct Attrs<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for Attrs<'a> {
    type Item = (u16, &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        let hdr = self.rest.get(..4)?;
        let len = u16_ne(hdr, 0) as usize;
        // NLA_F_NESTED and NLA_F_NET_BYTEORDER ride in the top two bits.
        let kind = u16_ne(hdr, 2) & 0x3fff;
        let Some(payload) = self.rest.get(4..len).filter(|_| len >= 4) else {
            self.rest = &[];
            return None;
        };
        self.rest = self.rest.get(align4(len)..).unwrap_or(&[]);
        Some((kind, payload))
    }
}

/// `INET_DIAG_SKMEMINFO`: the socket's memory (`SK_MEMINFO_*` of
/// `linux/sock_diag.h`), in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct SkMemInfo {
    /// Bytes queued for reading (`sk_rmem_alloc`, with skb overhead).
    pub rmem_alloc: u32,
    /// The receive buffer limit (`sk_rcvbuf`): what SO_RCVBUF reads.
    pub rcvbuf: u32,
    pub wmem_alloc: u32,
    /// The send buffer limit (`sk_sndbuf`): what SO_SNDBUF reads.
    pub sndbuf: u32,
    pub fwd_alloc: u32,
    /// Bytes queued for sending, not yet acknowledged (`sk_wmem_queued`).
    pub wmem_queued: u32,
    pub optmem: u32,
    pub backlog: u32,
    /// Packets dropped on this socket (receive buffer full, filters).
    pub drops: Option<u32>,
}

impl SkMemInfo {
    /// At least the eight words every kernel since 3.x sends.
    pub fn parse(b: &[u8]) -> Option<SkMemInfo> {
        if b.len() < 32 {
            return None;
        }
        Some(SkMemInfo {
            rmem_alloc: u32_ne(b, 0),
            rcvbuf: u32_ne(b, 4),
            wmem_alloc: u32_ne(b, 8),
            sndbuf: u32_ne(b, 12),
            fwd_alloc: u32_ne(b, 16),
            wmem_queued: u32_ne(b, 20),
            optmem: u32_ne(b, 24),
            backlog: u32_ne(b, 28),
            drops: (b.len() >= 36).then(|| u32_ne(b, 32)),
        })
    }
}

/// A NUL-terminated name of at most 15 bytes (`TCP_CA_NAME_MAX`), kept
/// inline so that a socket costs no allocation.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub struct ShortName {
    bytes: [u8; 16],
    len: u8,
}

impl ShortName {
    /// The bytes up to the first NUL (at most 16), if they are UTF-8.
    pub fn parse(b: &[u8]) -> Option<ShortName> {
        let end = b.iter().position(|&c| c == 0).unwrap_or(b.len()).min(16);
        std::str::from_utf8(&b[..end]).ok()?;
        let mut bytes = [0u8; 16];
        bytes[..end].copy_from_slice(&b[..end]);
        Some(ShortName {
            bytes,
            len: end as u8,
        })
    }

    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.bytes[..self.len as usize]).unwrap_or("?")
    }
}

impl std::fmt::Debug for ShortName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.as_str().fmt(f)
    }
}

impl std::fmt::Display for ShortName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for ShortName {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}
