//! Raw tracepoint records into [`Event`]s, by the field layout each
//! tracepoint's `format` file gave at startup ([`Layout`]). Every read is
//! bounds-checked: a record shorter than a field it needs is an
//! [`Anomaly::Truncated`], counted by the caller, never a panic.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use crate::format::{Field, Format};

/// The tracepoints `top` reads, in the order it opens them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// `tcp:tcp_probe`: every segment received on an established socket
    /// (cwnd, windows, srtt, snd_una/snd_nxt).
    Probe,
    /// `tcp:tcp_retransmit_skb`: a segment sent again.
    Retransmit,
    /// `tcp:tcp_retransmit_synack`: a listener sent a SYN-ACK again.
    SynackRetransmit,
    /// `tcp:tcp_cong_state_set`: Open, Disorder, CWR, Recovery, Loss.
    CongState,
    /// `tcp:tcp_send_reset`.
    SendReset,
    /// `tcp:tcp_receive_reset`.
    ReceiveReset,
    /// `tcp:tcp_destroy_sock`: the socket is freed.
    Destroy,
    /// `sock:inet_sock_set_state`: every TCP state change.
    SetState,
    /// `sock:sock_send_length`: a `send`/`write`/`sendfile` on a socket returned.
    SendLength,
    /// `sock:sock_recv_length`: a `recv`/`read` on a socket returned.
    RecvLength,
    /// `sock:sock_rcvqueue_full`: a receive queue was full (no socket named).
    RcvqueueFull,
    /// `sock:sock_exceed_buf_limit`: the protocol's memory limit was hit.
    ExceedBufLimit,
}

impl Kind {
    pub const ALL: [Kind; 12] = [
        Kind::Probe,
        Kind::Retransmit,
        Kind::SynackRetransmit,
        Kind::CongState,
        Kind::SendReset,
        Kind::ReceiveReset,
        Kind::Destroy,
        Kind::SetState,
        Kind::SendLength,
        Kind::RecvLength,
        Kind::RcvqueueFull,
        Kind::ExceedBufLimit,
    ];

    /// `(subsystem, name)` under `/sys/kernel/tracing/events`.
    pub fn tracepoint(self) -> (&'static str, &'static str) {
        match self {
            Kind::Probe => ("tcp", "tcp_probe"),
            Kind::Retransmit => ("tcp", "tcp_retransmit_skb"),
            Kind::SynackRetransmit => ("tcp", "tcp_retransmit_synack"),
            Kind::CongState => ("tcp", "tcp_cong_state_set"),
            Kind::SendReset => ("tcp", "tcp_send_reset"),
            Kind::ReceiveReset => ("tcp", "tcp_receive_reset"),
            Kind::Destroy => ("tcp", "tcp_destroy_sock"),
            Kind::SetState => ("sock", "inet_sock_set_state"),
            Kind::SendLength => ("sock", "sock_send_length"),
            Kind::RecvLength => ("sock", "sock_recv_length"),
            Kind::RcvqueueFull => ("sock", "sock_rcvqueue_full"),
            Kind::ExceedBufLimit => ("sock", "sock_exceed_buf_limit"),
        }
    }

    /// `sys:name`.
    pub fn label(self) -> String {
        let (s, n) = self.tracepoint();
        format!("{s}:{n}")
    }

    /// The fields this kind is decoded from; a missing one degrades the
    /// decoded event (its value reads `None`) and is reported at startup.
    fn wanted(self) -> &'static [Slot] {
        use Slot::*;
        const TUPLE: [Slot; 8] = [Sk, Sport, Dport, Family, Saddr, Daddr, Saddr6, Daddr6];
        match self {
            Kind::Probe => &[
                Sk, Sport, Dport, Family, Saddr, Daddr, SndNxt, SndUna, Cwnd, Ssthresh, SndWnd,
                Srtt, RcvWnd, DataLen, Cookie,
            ],
            Kind::Retransmit => &[
                Sk, Sport, Dport, Family, Saddr, Daddr, Saddr6, Daddr6, State, Err,
            ],
            Kind::SynackRetransmit | Kind::ReceiveReset | Kind::Destroy => &TUPLE,
            Kind::CongState => &[
                Sk, Sport, Dport, Family, Saddr, Daddr, Saddr6, Daddr6, CongState,
            ],
            Kind::SendReset => &[Sk, Saddr, Daddr, State],
            Kind::SetState => &[
                Sk, Sport, Dport, Family, Saddr, Daddr, Saddr6, Daddr6, OldState, NewState,
                Protocol,
            ],
            Kind::SendLength | Kind::RecvLength => &[Sk, Family, Protocol, Ret, Flags],
            Kind::RcvqueueFull => &[RmemAlloc, Truesize, Rcvbuf],
            Kind::ExceedBufLimit => &[MemKind],
        }
    }

    /// Whether the kernel can filter this tracepoint by port
    /// (`sport`/`dport` fields in host byte order).
    pub fn has_ports(self, layout: &Layout) -> bool {
        layout.field(Slot::Sport).is_some() && layout.field(Slot::Dport).is_some()
    }
}

/// A field `top` reads, whatever a kernel calls it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    Sk,
    Sport,
    Dport,
    Family,
    Saddr,
    Daddr,
    Saddr6,
    Daddr6,
    State,
    OldState,
    NewState,
    Err,
    CongState,
    Protocol,
    Ret,
    Flags,
    SndNxt,
    SndUna,
    Cwnd,
    Ssthresh,
    SndWnd,
    Srtt,
    RcvWnd,
    DataLen,
    RmemAlloc,
    Truesize,
    Rcvbuf,
    MemKind,
    Cookie,
}

const SLOTS: usize = 29;

impl Slot {
    fn names(self) -> &'static [&'static str] {
        match self {
            Slot::Sk => &["skaddr", "sk"],
            Slot::Sport => &["sport"],
            Slot::Dport => &["dport"],
            Slot::Family => &["family"],
            Slot::Saddr => &["saddr"],
            Slot::Daddr => &["daddr"],
            Slot::Saddr6 => &["saddr_v6"],
            Slot::Daddr6 => &["daddr_v6"],
            Slot::State => &["state"],
            Slot::OldState => &["oldstate"],
            Slot::NewState => &["newstate"],
            Slot::Err => &["err"],
            Slot::CongState => &["cong_state"],
            Slot::Protocol => &["protocol"],
            Slot::Ret => &["ret"],
            Slot::Flags => &["flags"],
            Slot::SndNxt => &["snd_nxt"],
            Slot::SndUna => &["snd_una"],
            Slot::Cwnd => &["snd_cwnd"],
            Slot::Ssthresh => &["ssthresh"],
            Slot::SndWnd => &["snd_wnd"],
            Slot::Srtt => &["srtt"],
            Slot::RcvWnd => &["rcv_wnd"],
            Slot::DataLen => &["data_len"],
            Slot::RmemAlloc => &["rmem_alloc"],
            Slot::Truesize => &["truesize"],
            Slot::Rcvbuf => &["sk_rcvbuf"],
            Slot::MemKind => &["kind"],
            Slot::Cookie => &["sock_cookie"],
        }
    }
}

/// Where a field sits in a raw record, as every event reads it: four
/// bytes, beside the other slots' (a [`Field`] carries its name and
/// declaration too, and reading it went through both).
#[derive(Debug, Clone, Copy, Default)]
struct Spot {
    offset: u32,
    /// 0: the format has no such field.
    size: u8,
    signed: bool,
    /// The field's bits in a little-endian word read at its offset (0: a
    /// width no integer has).
    mask: u64,
}

impl Spot {
    fn of(f: Option<&Field>) -> Spot {
        match f {
            // A width no integer has (0, or past 255, as 255) reads as a
            // truncated record, as a field of 3 bytes does.
            Some(f) => Spot {
                offset: u32::try_from(f.offset).unwrap_or(u32::MAX),
                size: match u8::try_from(f.size) {
                    Ok(0) | Err(_) => u8::MAX,
                    Ok(n) => n,
                },
                signed: f.signed,
                mask: match f.size {
                    1 => 0xff,
                    2 => 0xffff,
                    4 => 0xffff_ffff,
                    8 => u64::MAX,
                    _ => 0,
                },
            },
            None => Spot::default(),
        }
    }

    /// The field as an unsigned integer (host byte order, as the kernel
    /// wrote it), `None` when the format has no such field, [`Anomaly::Truncated`] when the record is
    /// too short for it or it is not 1, 2, 4 or 8 bytes wide.
    #[inline(always)]
    fn uint(self, raw: &[u8]) -> Result<Option<u64>, Anomaly> {
        if self.size == 0 {
            return Ok(None);
        }
        let o = self.offset as usize;
        // Most fields have 8 bytes of the record from their offset on: one
        // load and a mask, whatever their width.
        #[cfg(target_endian = "little")]
        if let Some(w) = raw.get(o..).and_then(|r| r.first_chunk::<8>()) {
            if self.mask != 0 {
                return Ok(Some(u64::from_le_bytes(*w) & self.mask));
            }
        }
        let v = match self.size {
            1 => raw.get(o).map(|&b| u64::from(b)),
            2 => raw
                .get(o..o + 2)
                .map(|b| u64::from(u16::from_ne_bytes([b[0], b[1]]))),
            4 => raw
                .get(o..o + 4)
                .map(|b| u64::from(u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))),
            8 => raw
                .get(o..o + 8)
                .and_then(|b| b.try_into().ok())
                .map(u64::from_ne_bytes),
            _ => None,
        };
        v.map(Some).ok_or(Anomaly::Truncated)
    }

    /// The field as a signed integer: sign-extended from its width when the
    /// format says it is signed.
    #[inline(always)]
    fn int(self, raw: &[u8]) -> Result<Option<i64>, Anomaly> {
        Ok(self.uint(raw)?.map(|v| {
            if !self.signed || self.size >= 8 {
                return v as i64;
            }
            let shift = 64 - 8 * u32::from(self.size);
            ((v << shift) as i64) >> shift
        }))
    }
}

/// Where one tracepoint's fields are, from its `format` file.
#[derive(Debug, Clone)]
pub struct Layout {
    pub kind: Kind,
    pub id: u32,
    fields: [Option<Field>; SLOTS],
    /// The same fields' places, read on every event.
    spots: [Spot; SLOTS],
    common_flags: Spot,
    /// Fields this kernel's format does not have (named as `top` looks for them).
    pub missing: Vec<&'static str>,
}

impl Layout {
    /// The layout of `kind` from its parsed format; `None` without an id.
    pub fn new(kind: Kind, format: &Format) -> Option<Layout> {
        let mut fields: [Option<Field>; SLOTS] = Default::default();
        let mut missing = Vec::new();
        for &slot in kind.wanted() {
            let f = format.any_field(slot.names()).cloned();
            // The IPv6 arrays are only wanted where the addresses are
            // 4-byte arrays; a sockaddr (`saddr[28]`) holds either.
            // The cookie is an extra (kernels before 5.x have none).
            if f.is_none() && !matches!(slot, Slot::Saddr6 | Slot::Daddr6 | Slot::Cookie) {
                missing.push(slot.names()[0]);
            }
            if f.is_none() && matches!(slot, Slot::Saddr6 | Slot::Daddr6) {
                let v4_only = format.field("saddr").is_some_and(|s| s.size == 4);
                if v4_only {
                    missing.push(slot.names()[0]);
                }
            }
            fields[slot as usize] = f;
        }
        Some(Layout {
            kind,
            id: format.id?,
            spots: std::array::from_fn(|i| Spot::of(fields[i].as_ref())),
            fields,
            common_flags: Spot::of(format.field("common_flags")),
            missing,
        })
    }

    pub fn field(&self, slot: Slot) -> Option<&Field> {
        self.fields[slot as usize].as_ref()
    }

    #[inline(always)]
    fn uint(&self, raw: &[u8], slot: Slot) -> Result<Option<u64>, Anomaly> {
        self.spots[slot as usize].uint(raw)
    }

    #[inline(always)]
    fn int(&self, raw: &[u8], slot: Slot) -> Result<Option<i64>, Anomaly> {
        self.spots[slot as usize].int(raw)
    }

    #[inline]
    fn u32(&self, raw: &[u8], slot: Slot) -> Result<Option<u32>, Anomaly> {
        Ok(self.uint(raw, slot)?.map(|v| v as u32))
    }

    /// Decodes one raw record (the `PERF_SAMPLE_RAW` bytes, which start
    /// with `common_type`).
    pub fn decode(&self, raw: &[u8]) -> Result<Event, Anomaly> {
        let mut ev = Event::blank(self.kind);
        self.decode_into(raw, &mut ev)?;
        Ok(ev)
    }

    /// [`decode`](Self::decode) into an event kept from one record to the
    /// next: its fields are written where they are (an event returned by
    /// value was copied twice on its way to the tracker, most of what a
    /// socket call's record cost). On an error `ev` holds part of the record.
    #[inline]
    pub fn decode_into(&self, raw: &[u8], ev: &mut Event) -> Result<(), Anomaly> {
        use Slot::*;
        ev.kind = self.kind;
        ev.flags = self.common_flags.uint(raw)?.unwrap_or(0) as u8;
        ev.sk = self.uint(raw, Sk)?.unwrap_or(0);
        // A socket call's record (most records) has no addresses: its
        // fields are written in place, not built and then copied.
        if let Kind::SendLength | Kind::RecvLength = self.kind {
            ev.tuple = None;
            ev.detail = self.io(raw)?;
            return Ok(());
        }
        ev.tuple = self.tuple(raw)?;
        ev.detail = self.detail(raw)?;
        Ok(())
    }

    #[inline(always)]
    fn io(&self, raw: &[u8]) -> Result<Detail, Anomaly> {
        use Slot::*;
        let io = Io {
            ret: self.int(raw, Ret)?.unwrap_or(0) as i32,
            flags: self.int(raw, Flags)?.unwrap_or(0) as i32,
            family: self.uint(raw, Family)?.map(|v| v as u16),
            protocol: self.uint(raw, Protocol)?.map(|v| v as u16),
        };
        Ok(if self.kind == Kind::SendLength {
            Detail::Send(io)
        } else {
            Detail::Recv(io)
        })
    }

    fn detail(&self, raw: &[u8]) -> Result<Detail, Anomaly> {
        use Slot::*;
        Ok(match self.kind {
            Kind::Probe => Detail::Probe(Probe {
                snd_nxt: self.u32(raw, SndNxt)?,
                snd_una: self.u32(raw, SndUna)?,
                cwnd: self.u32(raw, Cwnd)?,
                ssthresh: self.u32(raw, Ssthresh)?,
                snd_wnd: self.u32(raw, SndWnd)?,
                srtt_us: self.u32(raw, Srtt)?,
                rcv_wnd: self.u32(raw, RcvWnd)?,
                data_len: self.u32(raw, DataLen)?,
                cookie: self.uint(raw, Cookie)?,
            }),
            Kind::Retransmit => Detail::Retransmit {
                state: self.int(raw, State)?.map(|v| v as i32),
                err: self.int(raw, Err)?.unwrap_or(0) as i32,
            },
            Kind::SynackRetransmit => Detail::SynackRetransmit,
            Kind::CongState => Detail::CongState(self.uint(raw, CongState)?.map(|v| v as u8)),
            Kind::SendReset => Detail::SendReset {
                state: self.int(raw, State)?.map(|v| v as i32),
            },
            Kind::ReceiveReset => Detail::ReceiveReset,
            Kind::Destroy => Detail::Destroy,
            Kind::SetState => Detail::SetState {
                old: self.int(raw, OldState)?.unwrap_or(-1) as i32,
                new: self.int(raw, NewState)?.unwrap_or(-1) as i32,
                protocol: self.uint(raw, Protocol)?.map(|v| v as u16),
            },
            Kind::SendLength | Kind::RecvLength => self.io(raw)?,
            Kind::RcvqueueFull => Detail::RcvqueueFull {
                rmem_alloc: self.int(raw, RmemAlloc)?.unwrap_or(0),
                truesize: self.uint(raw, Truesize)?.unwrap_or(0),
                rcvbuf: self.int(raw, Rcvbuf)?.unwrap_or(0),
            },
            Kind::ExceedBufLimit => Detail::ExceedBufLimit {
                // SK_MEM_SEND 0, SK_MEM_RECV 1.
                receive: self.int(raw, MemKind)? == Some(1),
            },
        })
    }

    /// (local, remote) of the event's socket. Three layouts exist: a
    /// `struct sockaddr_in6`-sized `saddr[28]` holding either family (port
    /// inside, network order); `saddr[4]` with `saddr_v6[16]` and the
    /// `sport`/`dport` fields (host order); and none (`sock_send_length`).
    fn tuple(&self, raw: &[u8]) -> Result<Option<(SocketAddr, SocketAddr)>, Anomaly> {
        use Slot::*;
        let (Some(sa), Some(da)) = (self.field(Saddr), self.field(Daddr)) else {
            return Ok(None);
        };
        let s = sa.bytes(raw).ok_or(Anomaly::Truncated)?;
        let d = da.bytes(raw).ok_or(Anomaly::Truncated)?;
        if sa.size >= 24 && da.size >= 24 {
            return Ok(sockaddr(s).zip(sockaddr(d)));
        }
        let family = self.uint(raw, Family)?;
        let (Some(sport), Some(dport)) = (self.uint(raw, Sport)?, self.uint(raw, Dport)?) else {
            return Ok(None);
        };
        let (sport, dport) = (sport as u16, dport as u16);
        let (src, dst) = if family == Some(AF_INET6) {
            let (Some(s6), Some(d6)) = (self.field(Saddr6), self.field(Daddr6)) else {
                return Ok(None);
            };
            let s6 = s6.bytes(raw).ok_or(Anomaly::Truncated)?;
            let d6 = d6.bytes(raw).ok_or(Anomaly::Truncated)?;
            (ip6(s6), ip6(d6))
        } else if family == Some(AF_INET) || family.is_none() {
            (ip4(s), ip4(d))
        } else {
            return std::result::Result::Err(Anomaly::Family);
        };
        Ok(src
            .zip(dst)
            .map(|(s, d)| (SocketAddr::new(s, sport), SocketAddr::new(d, dport))))
    }
}

pub const AF_INET: u64 = 2;
pub const AF_INET6: u64 = 10;

fn ip4(b: &[u8]) -> Option<IpAddr> {
    let a: [u8; 4] = b.get(..4)?.try_into().ok()?;
    Some(IpAddr::V4(Ipv4Addr::from(a)))
}

/// An IPv6 address; a v4-mapped one (`::ffff:a.b.c.d`, a dual-stack
/// socket talking IPv4) as the IPv4 address it is.
fn ip6(b: &[u8]) -> Option<IpAddr> {
    let a: [u8; 16] = b.get(..16)?.try_into().ok()?;
    Some(IpAddr::V6(Ipv6Addr::from(a)).to_canonical())
}

/// A `struct sockaddr_in` or `sockaddr_in6` as the kernel stores it in a
/// tracepoint: family in host order, port in network order.
fn sockaddr(b: &[u8]) -> Option<SocketAddr> {
    let family = u16::from_ne_bytes(b.get(..2)?.try_into().ok()?);
    let port = u16::from_be_bytes(b.get(2..4)?.try_into().ok()?);
    let ip = match u64::from(family) {
        AF_INET => ip4(b.get(4..8)?)?,
        AF_INET6 => ip6(b.get(8..24)?)?,
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// Why a record could not be decoded (counted, shown, never fatal).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Anomaly {
    /// Shorter than a field it should hold.
    Truncated,
    /// A `common_type` no opened tracepoint has.
    UnknownType,
    /// An address family other than IPv4 and IPv6.
    Family,
    /// A perf record shorter than its header says, or with a size of 0.
    BadRecord,
}

/// One decoded tracepoint record.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub kind: Kind,
    /// `common_flags`: irq/softirq context bits (`TRACE_FLAG_*`).
    pub flags: u8,
    /// The socket's kernel address (0 when the event has none): the key
    /// that ties `sock_send_length` (no addresses) to its connection.
    pub sk: u64,
    /// (local, remote).
    pub tuple: Option<(SocketAddr, SocketAddr)>,
    pub detail: Detail,
}

/// `TRACE_FLAG_HARDIRQ | TRACE_FLAG_SOFTIRQ | TRACE_FLAG_NMI`
/// (`include/linux/trace_events.h`): set when the event fired in interrupt
/// context, where the current task is whoever was interrupted.
const IRQ_FLAGS: u8 = 0x08 | 0x10 | 0x40;

impl Event {
    /// An event of `kind` holding nothing yet, for [`Layout::decode_into`] to fill.
    pub fn blank(kind: Kind) -> Event {
        Event {
            kind,
            flags: 0,
            sk: 0,
            tuple: None,
            detail: Detail::Destroy,
        }
    }

    /// Whether the event fired in process context, so that the sampled pid
    /// is the process that made the socket call.
    pub fn in_process_context(&self) -> bool {
        self.flags & IRQ_FLAGS == 0
    }
}

/// What `tcp_probe` reads from the socket on every received segment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Probe {
    pub snd_nxt: Option<u32>,
    pub snd_una: Option<u32>,
    pub cwnd: Option<u32>,
    pub ssthresh: Option<u32>,
    /// The peer's advertised window, bytes (scaled).
    pub snd_wnd: Option<u32>,
    /// `tp->srtt_us >> 3`: microseconds.
    pub srtt_us: Option<u32>,
    /// Our advertised window, bytes.
    pub rcv_wnd: Option<u32>,
    /// Payload of the received segment.
    pub data_len: Option<u32>,
    /// The socket's cookie (`sock_cookie`), where the kernel has it.
    pub cookie: Option<u64>,
}

/// A socket call's return (`sock_send_length` / `sock_recv_length`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Io {
    /// Bytes moved, or -errno.
    pub ret: i32,
    /// `MSG_*` flags; `MSG_PEEK` (2) moves nothing.
    pub flags: i32,
    pub family: Option<u16>,
    pub protocol: Option<u16>,
}

impl Io {
    /// Bytes that moved between the process and the socket, as the
    /// tracepoint's own format prints them.
    pub fn bytes(&self) -> u64 {
        if self.flags & 2 != 0 || self.ret <= 0 {
            0
        } else {
            self.ret as u64
        }
    }

    /// Whether this was a TCP socket (family IPv4/IPv6, protocol 6); an
    /// unreadable field counts as yes (the socket is matched by address later).
    pub fn is_tcp(&self) -> bool {
        self.protocol.is_none_or(|p| p == 6)
            && self
                .family
                .is_none_or(|f| u64::from(f) == AF_INET || u64::from(f) == AF_INET6)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Detail {
    Probe(Probe),
    Retransmit {
        state: Option<i32>,
        err: i32,
    },
    SynackRetransmit,
    CongState(Option<u8>),
    SendReset {
        state: Option<i32>,
    },
    ReceiveReset,
    Destroy,
    SetState {
        old: i32,
        new: i32,
        protocol: Option<u16>,
    },
    Send(Io),
    Recv(Io),
    RcvqueueFull {
        rmem_alloc: i64,
        truesize: u64,
        rcvbuf: i64,
    },
    ExceedBufLimit {
        receive: bool,
    },
}

/// TCP states (`include/net/tcp_states.h`).
pub mod state {
    pub const ESTABLISHED: i32 = 1;
    pub const SYN_SENT: i32 = 2;
    pub const SYN_RECV: i32 = 3;
    pub const CLOSE: i32 = 7;
    pub const LISTEN: i32 = 10;

    pub fn name(s: i32) -> &'static str {
        match s {
            1 => "established",
            2 => "syn-sent",
            3 => "syn-recv",
            4 => "fin-wait-1",
            5 => "fin-wait-2",
            6 => "time-wait",
            7 => "closed",
            8 => "close-wait",
            9 => "last-ack",
            10 => "listen",
            11 => "closing",
            12 => "new-syn-recv",
            _ => "unknown",
        }
    }
}

/// Congestion-avoidance states (`enum tcp_ca_state`).
pub mod ca {
    pub const OPEN: u8 = 0;
    pub const CWR: u8 = 2;
    pub const RECOVERY: u8 = 3;
    pub const LOSS: u8 = 4;
}

/// Finds a layout by the record's `common_type` (its first two bytes).
pub fn common_type(raw: &[u8]) -> Option<u32> {
    Some(u32::from(u16::from_ne_bytes(
        raw.get(..2)?.try_into().ok()?,
    )))
}

/// The record's `common_pid` (bytes 4–7: the thread the event fired in, 0
/// for a CPU's idle task).
pub fn common_pid(raw: &[u8]) -> Option<u32> {
    Some(u32::from_ne_bytes(raw.get(4..8)?.try_into().ok()?))
}
