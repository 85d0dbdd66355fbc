//! The live TCP sockets of the current network namespace, as the kernel sees
//! them, with who holds them and how they are configured, flagged where
//! their state explains latency.
//!
//! - The sockets come from one `NETLINK_SOCK_DIAG` dump per address family
//!   (`netlink.rs`: request building and reply parsing over bytes), each
//!   with `tcp_info`, its congestion control, socket memory (`SO_RCVBUF` and
//!   `SO_SNDBUF` as the kernel applies them: readable without root) and
//!   shutdown state.
//! - The owning process comes from `/proc/PID/fd` (`procfs.rs`), and the
//!   socket options (`TCP_NODELAY`, `TCP_CORK`, …) from a duplicate of the
//!   owner's descriptor (`pidfd_getfd`, Linux 5.6: root or `CAP_SYS_PTRACE`
//!   for other users' processes), both in one pass on two threads
//!   (`owners.rs`). Every system call is in `sys.rs`, the crate's only
//!   `unsafe` code.
//! - `judge.rs` turns these into flags (Nagle on a request/response socket,
//!   time limited by the peer's window or our send buffer, a pinned small
//!   receive buffer, retransmissions, a full accept queue) with the
//!   mechanism and the fix; `text.rs` groups sockets for people.
//!
//! What cannot be read for lack of privilege is left `None` and named in
//! [`Snapshot::could_not_read`]; it never makes the snapshot fail.

use std::io;
use std::net::SocketAddr;

use serde::Serialize;

pub mod judge;
pub mod netlink;
pub(crate) mod owners;
pub mod procfs;
mod sys;
#[cfg(test)]
mod tests;
pub mod text;

pub use judge::{Context, Flag, FlagKind};
pub use netlink::{ShortName, SkMemInfo};
pub use tcpdoctor_tcpinfo::TcpInfo;

/// A TCP state (`linux/tcp_states.h`), named as `ss` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum State {
    Established,
    SynSent,
    SynRecv,
    FinWait1,
    FinWait2,
    TimeWait,
    Closed,
    CloseWait,
    LastAck,
    Listen,
    Closing,
    /// A state this program does not know (`TCP_NEW_SYN_RECV` is reported as
    /// [`State::SynRecv`], as `ss` does).
    Unknown(u8),
}

impl State {
    /// Every named state, in kernel order.
    pub const ALL: [State; 11] = [
        State::Established,
        State::SynSent,
        State::SynRecv,
        State::FinWait1,
        State::FinWait2,
        State::TimeWait,
        State::Closed,
        State::CloseWait,
        State::LastAck,
        State::Listen,
        State::Closing,
    ];

    pub fn from_kernel(v: u8) -> State {
        match v {
            1 => State::Established,
            2 => State::SynSent,
            3 | 12 => State::SynRecv,
            4 => State::FinWait1,
            5 => State::FinWait2,
            6 => State::TimeWait,
            7 => State::Closed,
            8 => State::CloseWait,
            9 => State::LastAck,
            10 => State::Listen,
            11 => State::Closing,
            other => State::Unknown(other),
        }
    }

    /// The `idiag_states` bits that select this state (`TCP_NEW_SYN_RECV`,
    /// a connection request not yet accepted, goes with SYN-RECV).
    pub fn mask(self) -> u32 {
        match self {
            State::SynRecv => (1 << 3) | (1 << 12),
            State::Unknown(v) => 1u32.checked_shl(u32::from(v)).unwrap_or(0),
            s => 1 << (State::ALL.iter().position(|&a| a == s).unwrap_or(0) + 1),
        }
    }

    /// The name `ss` uses in its state filter (`listen` for LISTEN, which
    /// `ss` spells `listening` in filters).
    pub fn name(self) -> &'static str {
        match self {
            State::Established => "established",
            State::SynSent => "syn-sent",
            State::SynRecv => "syn-recv",
            State::FinWait1 => "fin-wait-1",
            State::FinWait2 => "fin-wait-2",
            State::TimeWait => "time-wait",
            State::Closed => "closed",
            State::CloseWait => "close-wait",
            State::LastAck => "last-ack",
            State::Listen => "listen",
            State::Closing => "closing",
            State::Unknown(_) => "unknown",
        }
    }

    /// The state named `name` (`ss` names; `listening` is accepted too).
    pub fn parse(name: &str) -> Option<State> {
        let name = name.to_ascii_lowercase();
        if name == "listening" {
            return Some(State::Listen);
        }
        State::ALL.into_iter().find(|s| s.name() == name)
    }
}

impl Serialize for State {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// A process holding a socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Process {
    pub pid: u32,
    /// `/proc/PID/comm` (null when it could not be read: the process exited).
    pub command: Option<ShortName>,
}

/// The socket options that matter for latency, read from the owner's
/// descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SockOptions {
    /// Nagle's algorithm off (RFC 896; RFC 1122 §4.2.3.4).
    pub tcp_nodelay: bool,
    /// Partial segments held until uncorked or 200 ms (Linux).
    pub tcp_cork: bool,
    /// The kernel's current quick-ACK mode: not a sticky setting, Linux
    /// leaves it on its own when it sees an interactive exchange.
    pub tcp_quickack: bool,
    /// The receive and send buffer limits in bytes, as the kernel applies
    /// them: twice what `setsockopt` asked for.
    pub so_rcvbuf: u32,
    pub so_sndbuf: u32,
    /// 0: unset (the `net.ipv4.tcp_notsent_lowat` sysctl applies).
    pub tcp_notsent_lowat: u32,
    /// What `TCP_CONGESTION` reads; taken from the same dump (one system
    /// call fewer per socket).
    pub congestion: Option<ShortName>,
}

/// One socket.
#[derive(Debug, Clone, Serialize)]
pub struct Socket {
    pub local: SocketAddr,
    pub remote: SocketAddr,
    pub state: State,
    /// The socket's inode (0 for TIME_WAIT and connection requests, which no
    /// descriptor refers to).
    pub inode: u32,
    /// The kernel's id of the socket for its whole life (`sock_gen_cookie`),
    /// the one `tcpdoctor top` reports for a connection.
    pub cookie: u64,
    pub uid: u32,
    /// Bytes not yet read by the application / sent and not acknowledged;
    /// for a listener, connections waiting for `accept()` / the backlog.
    pub recv_q: u32,
    pub send_q: u32,
    /// The process holding it (the one doing the I/O when several do).
    pub process: Option<Process>,
    /// Other processes holding it.
    pub also_held_by: Vec<Process>,
    pub options: Option<SockOptions>,
    pub congestion: Option<ShortName>,
    /// Socket memory (`INET_DIAG_SKMEMINFO`).
    pub memory: Option<SkMemInfo>,
    /// `shutdown()` so far: null, "rd", "wr" or "rdwr".
    pub shutdown: Option<&'static str>,
    pub tcp_info: Option<TcpInfo>,
    pub flags: Vec<Flag>,
    /// The descriptor number in `process` (for `pidfd_getfd`).
    #[serde(skip)]
    pub fd: Option<u32>,
}

impl Socket {
    /// The socket a dump message describes.
    pub fn from_diag(msg: &netlink::DiagMsg<'_>) -> Socket {
        let mut s = Socket {
            local: msg.local(),
            remote: msg.remote(),
            state: State::from_kernel(msg.state()),
            inode: msg.inode(),
            cookie: msg.cookie(),
            uid: msg.uid(),
            recv_q: msg.rqueue(),
            send_q: msg.wqueue(),
            process: None,
            also_held_by: Vec::new(),
            options: None,
            congestion: None,
            memory: None,
            shutdown: None,
            tcp_info: None,
            flags: Vec::new(),
            fd: None,
        };
        for (kind, payload) in msg.attrs() {
            match kind {
                netlink::INET_DIAG_INFO => s.tcp_info = TcpInfo::parse(payload),
                netlink::INET_DIAG_CONG => s.congestion = ShortName::parse(payload),
                netlink::INET_DIAG_SKMEMINFO => s.memory = SkMemInfo::parse(payload),
                netlink::INET_DIAG_SHUTDOWN => {
                    // RCV_SHUTDOWN 1, SEND_SHUTDOWN 2.
                    s.shutdown = match payload.first().map(|b| b & 3) {
                        Some(1) => Some("rd"),
                        Some(2) => Some("wr"),
                        Some(3) => Some("rdwr"),
                        _ => None,
                    }
                }
                _ => {}
            }
        }
        s
    }

    /// Every process holding it.
    pub fn holders(&self) -> impl Iterator<Item = &Process> {
        self.process.iter().chain(&self.also_held_by)
    }
}

/// Which sockets to list.
#[derive(Debug, Clone)]
pub struct Query {
    /// `idiag_states` bits (`State::mask`); `u32::MAX` for all.
    pub states: u32,
    /// Local or remote port.
    pub port: Option<u16>,
    /// Held by this process.
    pub pid: Option<u32>,
    /// Only who holds each socket: no options read, and everything on the
    /// calling thread. For a caller that asks every second and must keep its
    /// memory flat (`top`): each new thread leaves an allocator arena and a
    /// cached stack resident behind it.
    pub owners_only: bool,
}

impl Default for Query {
    fn default() -> Query {
        Query {
            states: u32::MAX,
            port: None,
            pid: None,
            owners_only: false,
        }
    }
}

/// Something that could not be read, and for how many.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Note {
    /// `process`, `options` or `dump`.
    pub what: &'static str,
    /// Processes or sockets concerned.
    pub count: u32,
    pub reason: String,
}

/// All sockets at one moment.
#[derive(Debug, Clone, Serialize)]
pub struct Snapshot {
    pub schema: u32,
    pub sockets: Vec<Socket>,
    pub could_not_read: Vec<Note>,
    /// Judgment inputs read from the namespace.
    #[serde(skip)]
    pub context: Context,
}

/// Takes a snapshot: dump, owners, options, flags. The `/proc` listing runs
/// while the kernel dumps the sockets, and the owners and options are read
/// on two threads for many sockets (`owners.rs`): each part is system calls,
/// and 10,000 sockets are ~100,000 of them.
pub fn snapshot(query: &Query) -> io::Result<Snapshot> {
    let mut notes = Vec::new();
    let mut sockets = Vec::new();
    let proc_dir = procfs::open_proc();
    let list_proc = || match proc_dir.as_ref() {
        Ok(dir) => procfs::list(dir),
        Err(_) => Err(io::Error::other("no /proc")),
    };
    let (dumped, listed) = if query.owners_only {
        (dump(query, &mut sockets, &mut notes), list_proc())
    } else {
        std::thread::scope(|scope| {
            let lister = scope.spawn(list_proc);
            let dumped = dump(query, &mut sockets, &mut notes);
            let listed = lister
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p));
            (dumped, listed)
        })
    };
    dumped?;
    match (&proc_dir, listed) {
        (Ok(dir), Ok(list)) => {
            let pass = if query.owners_only {
                owners::Pass::OWNERS
            } else {
                owners::Pass::FULL
            };
            let found = owners::walk(dir, &list, &sockets, query.pid, pass);
            owners::apply(&mut sockets, found, &list, &mut notes);
        }
        (Err(e), _) => notes.push(no_proc(e, sockets.len())),
        (_, Err(e)) => notes.push(no_proc(&e, sockets.len())),
    }
    if let Some(pid) = query.pid {
        sockets.retain(|s| s.holders().any(|p| p.pid == pid));
    }
    let context = Context::of_namespace();
    for s in &mut sockets {
        s.flags = judge::flags(s, &context);
    }
    Ok(Snapshot {
        schema: 1,
        sockets,
        could_not_read: notes,
        context,
    })
}

fn no_proc(e: &io::Error, sockets: usize) -> Note {
    Note {
        what: "process",
        count: sockets as u32,
        reason: format!("/proc could not be read ({e}): no process, no options"),
    }
}

/// A kernel that does not answer a dump within this is an error, not a hang.
const DUMP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

fn dump(query: &Query, out: &mut Vec<Socket>, notes: &mut Vec<Note>) -> io::Result<()> {
    let dumper = tcpdoctor_netlink::Dumper::open(netlink::NETLINK_SOCK_DIAG, DUMP_TIMEOUT)?;
    let mut interrupted = false;
    for family in [netlink::AF_INET, netlink::AF_INET6] {
        let body = netlink::request_body(family, query.states);
        let kind = netlink::SOCK_DIAG_BY_FAMILY;
        let d = match dumper.dump(kind, kind, &body) {
            Ok(d) => d,
            // No IPv6 in this kernel: nothing to list.
            Err(e) if family == netlink::AF_INET6 && e.raw_os_error() == Some(libc::ENOENT) => {
                continue
            }
            Err(e) => return Err(e),
        };
        interrupted |= d.interrupted;
        for p in &d.payloads {
            let msg = netlink::DiagMsg::new(p).ok_or_else(|| {
                let short = netlink::Malformed::ShortDiag {
                    at: 0,
                    len: p.len(),
                };
                io::Error::new(io::ErrorKind::InvalidData, short.to_string())
            })?;
            let port = query.port;
            if port.is_none_or(|p| msg.local().port() == p || msg.remote().port() == p) {
                out.push(Socket::from_diag(&msg));
            }
        }
    }
    if interrupted {
        notes.push(Note {
            what: "dump",
            count: 1,
            reason: "sockets changed while the kernel listed them (NLM_F_DUMP_INTR), three \
                     times in a row: one may be missing or listed twice"
                .into(),
        });
    }
    Ok(())
}
