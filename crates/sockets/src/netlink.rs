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
/// Set on a dump's messages when the table changed while it was walked:
/// a socket may then be missing or listed twice (`linux/netlink.h`).
pub use tcpdoctor_netlink::NLM_F_DUMP_INTR;
use tcpdoctor_netlink::{ne_u32, NLMSG_DONE, NLMSG_ERROR, NLMSG_NOOP};

use tcpdoctor_netlink::HEADER_LEN as NLMSG_HDRLEN;
/// `struct inet_diag_req_v2`: family, protocol, ext, pad, states, sockid (48).
pub const REQ_V2_LEN: usize = 56;
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
pub fn dump_request(family: u8, states: u32, seq: u32) -> Vec<u8> {
    tcpdoctor_netlink::dump_request(SOCK_DIAG_BY_FAMILY, seq, &request_body(family, states))
}

/// The `struct inet_diag_req_v2` of [`dump_request`].
pub fn request_body(family: u8, states: u32) -> [u8; REQ_V2_LEN] {
    let mut req = [0u8; REQ_V2_LEN];
    req[0] = family;
    req[1] = IPPROTO_TCP;
    req[2] = EXTENSIONS;
    req[4..8].copy_from_slice(&states.to_ne_bytes());
    // The sockid stays zero: a dump matches on states only.
    req
}

/// What is wrong with a reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Malformed {
    /// A message header or its declared length is impossible.
    Netlink(tcpdoctor_netlink::Error),
    /// A socket message shorter than `struct inet_diag_msg`.
    ShortDiag { at: usize, len: usize },
}

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Malformed::Netlink(e) => write!(f, "netlink: {e}"),
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
    Messages {
        inner: tcpdoctor_netlink::messages(buf),
        failed: false,
    }
}

/// Iterator over the messages of a reply buffer; stops after the first
/// malformed one.
pub struct Messages<'a> {
    inner: tcpdoctor_netlink::Messages<'a>,
    failed: bool,
}

impl<'a> Iterator for Messages<'a> {
    type Item = Result<Message<'a>, Malformed>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let m = match self.inner.next()? {
            Ok(m) => m,
            Err(e) => return Some(Err(Malformed::Netlink(e))),
        };
        Some(Ok(match m.kind {
            SOCK_DIAG_BY_FAMILY => match DiagMsg::new(m.payload) {
                Some(msg) => Message::Socket {
                    msg,
                    interrupted: m.flags & NLM_F_DUMP_INTR != 0,
                },
                None => {
                    self.failed = true;
                    return Some(Err(Malformed::ShortDiag {
                        at: m.offset,
                        len: m.payload.len(),
                    }));
                }
            },
            NLMSG_DONE => Message::Done,
            NLMSG_ERROR => Message::Error(m.payload.get(..4).map_or(0, |b| ne_u32(b) as i32)),
            NLMSG_NOOP => Message::Other(NLMSG_NOOP),
            other => Message::Other(other),
        }))
    }
}

fn u32_ne(b: &[u8], off: usize) -> u32 {
    ne_u32(&b[off..])
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
    /// The socket's cookie (`idiag_cookie`: two 32-bit halves, the low one
    /// first), the kernel's unique id of a socket for its whole life: the
    /// `sock_cookie` of the TCP tracepoints (`tcpdoctor top`) names the same.
    pub fn cookie(&self) -> u64 {
        u64::from(u32_ne(self.fixed, 44)) | (u64::from(u32_ne(self.fixed, 48)) << 32)
    }
    /// The attributes (`INET_DIAG_*`) that follow the fixed part.
    pub fn attrs(&self) -> Attrs<'a> {
        Attrs {
            inner: tcpdoctor_netlink::attrs(self.attrs, 0),
        }
    }
}

/// Iterator over `struct nlattr` TLVs: (type, payload). Stops at the first
/// attribute whose length does not fit.
pub struct Attrs<'a> {
    inner: tcpdoctor_netlink::Attrs<'a>,
}

impl<'a> Iterator for Attrs<'a> {
    type Item = (u16, &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        let a = self.inner.next()?.ok()?;
        Some((a.kind, a.value))
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
