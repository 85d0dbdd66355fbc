//! What in a socket's state explains latency: the flags, each with the
//! mechanism, the numbers that show it and the fix. Pure functions of a
//! [`Socket`] and the namespace's buffer sysctls.
//!
//! Each rule states what it requires, so that a flag is never a guess:
//! `nagle_on` needs the socket options (root), the others only what the
//! netlink dump gives.

use serde::Serialize;

use crate::{Socket, State};

/// Kernel settings the judgments compare against, read from the namespace
/// the sockets live in (`/proc/sys/net/ipv4/*` is per network namespace).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Context {
    /// `net.ipv4.tcp_rmem`: min, default (every autotuned socket starts its
    /// receive buffer here), max.
    pub tcp_rmem: Option<[u32; 3]>,
    /// `net.ipv4.tcp_wmem`, likewise for the send buffer.
    pub tcp_wmem: Option<[u32; 3]>,
}

impl Context {
    /// Reads the sysctls of the calling thread's network namespace.
    pub fn of_namespace() -> Context {
        let read = |p: &str| {
            std::fs::read_to_string(p)
                .ok()
                .and_then(|t| parse_triple(&t))
        };
        Context {
            tcp_rmem: read("/proc/sys/net/ipv4/tcp_rmem"),
            tcp_wmem: read("/proc/sys/net/ipv4/tcp_wmem"),
        }
    }
}

/// `4096\t131072\t6291456\n` → [4096, 131072, 6291456].
pub fn parse_triple(t: &str) -> Option<[u32; 3]> {
    let mut it = t.split_whitespace().map(|w| w.parse::<u32>().ok());
    let v = [it.next()??, it.next()??, it.next()??];
    it.next().is_none().then_some(v)
}

/// The kinds of flag (extend only by adding).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FlagKind {
    /// TCP_NODELAY off on a socket exchanging small messages both ways.
    NagleOn,
    /// The peer's receive window bounded the transfer for much of its busy time.
    RwndLimited,
    /// Our send buffer bounded the transfer for much of its busy time.
    SndbufLimited,
    /// A receive buffer set below the kernel's default: the window is pinned small.
    SmallRcvbuf,
    /// Segments lost and sent again.
    Retransmissions,
    /// A listener's accept queue is full.
    AcceptQueueFull,
}

impl FlagKind {
    pub fn name(self) -> &'static str {
        match self {
            FlagKind::NagleOn => "nagle_on",
            FlagKind::RwndLimited => "rwnd_limited",
            FlagKind::SndbufLimited => "sndbuf_limited",
            FlagKind::SmallRcvbuf => "small_rcvbuf",
            FlagKind::Retransmissions => "retransmissions",
            FlagKind::AcceptQueueFull => "accept_queue_full",
        }
    }
}

/// One flag on one socket.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Flag {
    pub kind: FlagKind,
    /// The mechanism, with this socket's numbers.
    pub message: String,
    pub fix: String,
}

/// A share of busy time is flagged from here…
pub const LIMITED_SHARE: f64 = 0.20;
/// …when the limited time is at least this long (µs): a connection busy for
/// a few milliseconds says little.
pub const LIMITED_MIN_US: u64 = 10_000;
/// Retransmitted bytes, as a share of bytes sent, flagged from here.
pub const RETRANS_SHARE: f64 = 0.01;

/// Every flag that applies to `s`.
pub fn flags(s: &Socket, cx: &Context) -> Vec<Flag> {
    let mut out = Vec::new();
    nagle(s, &mut out);
    limited(s, &mut out);
    small_rcvbuf(s, cx, &mut out);
    retransmissions(s, &mut out);
    accept_queue(s, &mut out);
    out
}

/// Nagle's algorithm (RFC 896, Linux `tcp_nagle_check`) holds a segment
/// smaller than the MSS while an earlier small segment is unacknowledged.
/// That costs a round trip plus the peer's delayed-ACK timer (RFC 1122
/// §4.2.3.2: up to 500 ms; ~40 ms on Linux, 200 ms on Windows) whenever a
/// message leaves in more than one write and the peer, having nothing to say
/// yet, delays its ACK: the request/response pattern. Judged as
/// request/response when, on an established socket with TCP_NODELAY off:
/// - data went both ways (bytes received and bytes acknowledged > 0, at
///   least one data segment in): the peer talks too, so it is waiting for
///   our answer, not streaming to us;
/// - at least two data segments went out: Nagle can only hold a segment
///   behind an earlier one;
/// - the average data segment sent is below the MSS: we send small
///   messages, the segments Nagle holds (a bulk sender's segments are full,
///   and Nagle never holds a full segment).
fn nagle(s: &Socket, out: &mut Vec<Flag>) {
    let (Some(o), Some(t)) = (s.options, &s.tcp_info) else {
        return;
    };
    if s.state != State::Established || o.tcp_nodelay {
        return;
    }
    let (Some(acked), Some(received), Some(segs_in), Some(segs_out), Some(sent)) = (
        t.bytes_acked,
        t.bytes_received,
        t.data_segs_in,
        t.data_segs_out,
        t.bytes_sent,
    ) else {
        return;
    };
    if acked == 0 || received == 0 || segs_in == 0 || segs_out < 2 || t.snd_mss == 0 {
        return;
    }
    let per_segment = sent / u64::from(segs_out);
    if per_segment >= u64::from(t.snd_mss) {
        return;
    }
    let who = s.process.and_then(|p| p.command);
    let fix = match who.as_ref().map(|c| c.as_str()) {
        Some("nginx") => "nginx: `tcp_nodelay on;` (the default; http, server or location block)".to_string(),
        Some("java") => "Java: Socket.setTcpNoDelay(true); the JDK's HttpServer: \
                         -Dsun.net.httpserver.nodelay=true"
            .to_string(),
        _ => "set TCP_NODELAY on this socket (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, 1)), or write \
              each message in one call (writev, or TCP_CORK around the parts)"
            .to_string(),
    };
    // Caught in the act: a small segment unacknowledged and bytes written
    // but not sent, which is what Nagle holding data looks like.
    let now = match t.notsent_bytes {
        Some(held) if held > 0 && t.unacked > 0 => format!(
            "; right now {} written and not sent behind {} unacknowledged segment{}",
            bytes(u64::from(held)),
            t.unacked,
            if t.unacked == 1 { "" } else { "s" }
        ),
        _ => String::new(),
    };
    out.push(Flag {
        kind: FlagKind::NagleOn,
        message: format!(
            "Nagle on (TCP_NODELAY off) on a request/response socket: data both ways ({} in, {} \
             out in {} segments of {} on average, below the MSS of {} B){now}. A message written in \
             two parts (headers, then body) has its second part held until the first is ACKed, \
             and the peer delays that ACK (~40 ms on Linux, 200 ms on Windows): one stall per \
             exchange",
            bytes(received),
            bytes(acked),
            segs_out,
            bytes(per_segment),
            t.snd_mss,
        ),
        fix,
    });
}

/// `tcpi_rwnd_limited` / `tcpi_sndbuf_limited` against `tcpi_busy_time`
/// (Linux 4.10, `tcp_chrono_*`): the time the sender had data but the peer's
/// window was full, or was not cwnd-limited, had sent everything queued, and
/// the application was blocked on a full send buffer.
fn limited(s: &Socket, out: &mut Vec<Flag>) {
    let Some(t) = &s.tcp_info else { return };
    let Some(busy) = t.busy_us.filter(|&b| b > 0) else {
        return;
    };
    let rtt_us = u64::from(t.rtt_us);
    if let Some(rwnd) = t.rwnd_limited_us {
        let share = rwnd as f64 / busy as f64;
        if share >= LIMITED_SHARE && rwnd >= LIMITED_MIN_US {
            let wnd = t.snd_wnd.map(u64::from);
            let mut now = match wnd {
                Some(w) => format!(
                    "; it advertises {} now{}",
                    bytes(w),
                    rate(w, rtt_us)
                        .map(|r| format!(
                            ", which at a {} round trip caps this transfer at ~{r}",
                            ms(rtt_us)
                        ))
                        .unwrap_or_default()
                ),
                None => String::new(),
            };
            if let Some(d) = t.delivery_rate_bytes_per_sec.filter(|&d| d > 0) {
                now += &format!(" (delivering ~{}/s)", bytes(d));
            }
            out.push(Flag {
                kind: FlagKind::RwndLimited,
                message: format!(
                    "rwnd_limited {:.0}% of busy time ({} of {}): the peer's receive window bounds \
                     this transfer: the sender waits for {} to open its window{now}",
                    share * 100.0,
                    secs(rwnd),
                    secs(busy),
                    s.remote,
                ),
                fix: format!(
                    "on the receiver {}: a receive buffer set small (SO_RCVBUF; nginx `listen … \
                     rcvbuf=`) pins its window: remove it or size it to bandwidth × round trip; \
                     otherwise raise net.ipv4.tcp_rmem's maximum there, or make the application \
                     read faster (a full receive queue closes the window too)",
                    s.remote
                ),
            });
        }
    }
    if let Some(sndbuf) = t.sndbuf_limited_us {
        let share = sndbuf as f64 / busy as f64;
        if share >= LIMITED_SHARE && sndbuf >= LIMITED_MIN_US {
            let size = s
                .options
                .map(|o| o.so_sndbuf)
                .or(s.memory.map(|m| m.sndbuf))
                .map(|b| {
                    format!(
                        "; the send buffer is {}{}",
                        bytes(u64::from(b)),
                        rate(u64::from(b), rtt_us)
                            .map(|r| format!(
                                ", which at a {} round trip moves at most ~{r}",
                                ms(rtt_us)
                            ))
                            .unwrap_or_default()
                    )
                })
                .unwrap_or_default();
            out.push(Flag {
                kind: FlagKind::SndbufLimited,
                message: format!(
                    "sndbuf_limited {:.0}% of busy time ({} of {}): the send buffer bounds it: \
                     everything queued was sent, the congestion window had room, and the \
                     application was waiting for buffer space{size}",
                    share * 100.0,
                    secs(sndbuf),
                    secs(busy),
                ),
                fix: "do not set SO_SNDBUF (autotuning grows the buffer up to net.ipv4.tcp_wmem's \
                      maximum), or set it to at least bandwidth × round trip; raise tcp_wmem's \
                      maximum if autotuning already reached it"
                    .to_string(),
            });
        }
    }
}

/// Every autotuned socket starts with a receive buffer of `tcp_rmem[1]`
/// (`tcp_init_sock`), inherited by accepted sockets from their listener,
/// and autotuning only grows it (`tcp_rcv_space_adjust`). A buffer below
/// that was set with SO_RCVBUF (the kernel keeps twice the value asked for
/// and stops autotuning: `SOCK_RCVBUF_LOCK`), or shrunk under memory
/// pressure (rare; `tcp_clamp_window`). The window advertised cannot exceed
/// the buffer's payload share, so a sender moves at most that per round trip.
fn small_rcvbuf(s: &Socket, cx: &Context, out: &mut Vec<Flag>) {
    let Some([_, default, _]) = cx.tcp_rmem else {
        return;
    };
    if !matches!(
        s.state,
        State::Established | State::Listen | State::SynRecv | State::CloseWait
    ) {
        return;
    }
    let Some(rcvbuf) = s
        .options
        .map(|o| o.so_rcvbuf)
        .or(s.memory.map(|m| m.rcvbuf))
    else {
        return;
    };
    if rcvbuf == 0 || rcvbuf >= default {
        return;
    }
    let t = s.tcp_info.as_ref();
    let window = match t
        .and_then(|t| t.rcv_wnd)
        .filter(|_| s.state != State::Listen)
    {
        Some(w) => format!("; it advertises {} now", bytes(u64::from(w))),
        None => String::new(),
    };
    let cap = t
        .filter(|_| s.state != State::Listen)
        .and_then(|t| {
            let w = t.rcv_wnd.map_or(rcvbuf / 2, |w| w.max(1));
            rate(u64::from(w), u64::from(t.rtt_us))
                .map(|r| format!(": a sender moves at most that per round trip, ~{r} at this socket's {} round trip", ms(u64::from(t.rtt_us))))
        })
        .unwrap_or_default();
    let whose = if s.state == State::Listen {
        "; every connection this listener accepts inherits it"
    } else {
        ""
    };
    out.push(Flag {
        kind: FlagKind::SmallRcvbuf,
        message: format!(
            "SO_RCVBUF {} pins the window: the receive buffer is {} (the kernel keeps twice what \
             SO_RCVBUF asks), below the {} (net.ipv4.tcp_rmem default) every autotuned socket \
             starts with, so the application set it and receive autotuning is off{window}{cap}{whose}",
            bytes(u64::from(rcvbuf / 2)),
            bytes(u64::from(rcvbuf)),
            bytes(u64::from(default)),
        ),
        fix: "do not set SO_RCVBUF (nginx: drop `rcvbuf=` from `listen`), or set it to at least \
              bandwidth × round trip"
            .to_string(),
    });
}

/// Retransmissions over the connection's life (`tcpi_total_retrans`,
/// `tcpi_bytes_retrans`) and the loss now (`tcpi_lost`, `tcpi_retransmits`:
/// an RTO being recovered).
fn retransmissions(s: &Socket, out: &mut Vec<Flag>) {
    let Some(t) = &s.tcp_info else { return };
    if s.state == State::Listen || t.total_retrans == 0 {
        return;
    }
    let share = match (t.bytes_retrans, t.bytes_sent) {
        (Some(r), Some(sent)) if sent > 0 => Some(r as f64 / sent as f64),
        _ => None,
    };
    let now = t.lost > 0 || t.retransmits > 0;
    if !now && share.is_none_or(|x| x < RETRANS_SHARE) {
        return;
    }
    let mut message = format!("{} retransmitted", segments(u64::from(t.total_retrans)));
    if let (Some(sh), Some(r)) = (share, t.bytes_retrans) {
        message += &format!(" ({}, {:.1}% of bytes sent)", bytes(r), sh * 100.0);
    }
    if t.lost > 0 {
        message += &format!("; {} considered lost now", segments(u64::from(t.lost)));
    }
    if t.retransmits > 0 {
        message += &format!(
            "; a retransmission timeout is being recovered ({} retries, backoff {})",
            t.retransmits, t.backoff
        );
    }
    message += ": the path drops packets (or the peer stopped answering); each loss costs a round \
                trip (fast retransmit) or a timeout of ≥200 ms (RTO) and halves the sending rate";
    out.push(Flag {
        kind: FlagKind::Retransmissions,
        message,
        fix: format!(
            "find where packets drop between {} and {}: `tcpdoctor diagnose` or a capture read \
             with `tcpdoctor analyze` locates the loss (packet_loss, retransmission_timeout); \
             look for interface drops, policers, a saturated link",
            s.local, s.remote
        ),
    });
}

/// For a listener, `idiag_rqueue` is the accept queue's length and
/// `idiag_wqueue` its limit (`min(backlog, net.core.somaxconn)`); the queue
/// is full from `rqueue >= wqueue` on (`sk_acceptq_is_full` refuses one
/// more when it is already above). Then the final ACK of a handshake is
/// dropped (with `tcp_abort_on_overflow` 0) and the client waits on its
/// SYN-ACK retransmission: 1 s, then 3 s, 7 s.
fn accept_queue(s: &Socket, out: &mut Vec<Flag>) {
    if s.state != State::Listen || s.send_q == 0 || s.recv_q < s.send_q {
        return;
    }
    out.push(Flag {
        kind: FlagKind::AcceptQueueFull,
        message: format!(
            "accept queue full: {} connections wait for accept() (backlog {}): new handshakes are \
             dropped and their clients wait for a SYN-ACK retry (1 s, 3 s, 7 s)",
            s.recv_q, s.send_q
        ),
        fix: "the application accepts too slowly (busy or blocked: look at it first) or the \
              backlog is too small: raise listen()'s backlog (nginx `listen … backlog=`) and \
              net.core.somaxconn"
            .to_string(),
    });
}

pub use tcpdoctor_units::bytes;

/// `window` bytes per `rtt_us`, as a rate (`None` without a round trip).
fn rate(window: u64, rtt_us: u64) -> Option<String> {
    if rtt_us == 0 {
        return None;
    }
    let per_sec = window.saturating_mul(1_000_000) / rtt_us;
    Some(format!("{}/s", bytes(per_sec)))
}

/// Microseconds as milliseconds, `0.25 ms`, `40 ms`.
pub fn ms(us: u64) -> String {
    let v = us as f64 / 1000.0;
    if v >= 10.0 {
        format!("{v:.0} ms")
    } else if v >= 1.0 {
        format!("{v:.1} ms")
    } else {
        format!("{v:.2} ms")
    }
}

/// Microseconds as seconds or milliseconds.
pub fn secs(us: u64) -> String {
    if us >= 1_000_000 {
        format!("{:.2} s", us as f64 / 1e6)
    } else {
        ms(us)
    }
}

/// `1 segment`, `2 segments`.
fn segments(n: u64) -> String {
    if n == 1 {
        "1 segment".into()
    } else {
        format!("{n} segments")
    }
}
