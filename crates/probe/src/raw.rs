//! Raw sockets: send hand-built TCP segments to one target with a chosen TTL
//! and receive the TCP replies and ICMP errors that concern them.
//!
//! The source port is reserved by a TCP socket bound to it and never
//! connected: no other connection can take it, and the kernel answers any
//! SYN-ACK arriving on it with an RST (no listener, no connection), so no
//! half-open connection stays behind at the target. The probe code sends its
//! own RST as well, which does not depend on that.

use std::io::{self, IoSliceMut};
use std::net::{IpAddr, SocketAddr, SocketAddrV4, SocketAddrV6, UdpSocket};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::socket::{
    bind, getsockname, recvmsg, sendto, setsockopt, socket, sockopt, AddressFamily,
    ControlMessageOwned, MsgFlags, SockFlag, SockProtocol, SockType, SockaddrIn, SockaddrIn6,
    SockaddrLike, SockaddrStorage,
};
use nix::sys::time::TimeSpec;

use crate::packet::{self, IcmpReply, TcpReply};
use crate::ProbeError;

/// A reply that concerns our flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Incoming {
    Tcp(TcpReply),
    Icmp(IcmpReply),
}

pub struct RawProber {
    tcp: OwnedFd,
    icmp: OwnedFd,
    /// Holds the source port (see the module comment).
    _reserved: OwnedFd,
    pub src: SocketAddr,
    pub dst: SocketAddr,
    buf: Vec<u8>,
}

fn family(a: &SocketAddr) -> AddressFamily {
    if a.is_ipv4() {
        AddressFamily::Inet
    } else {
        AddressFamily::Inet6
    }
}

fn permission(e: Errno) -> ProbeError {
    if e == Errno::EPERM || e == Errno::EACCES {
        ProbeError::Permission("raw sockets need root or CAP_NET_RAW".to_string())
    } else {
        ProbeError::Io(io::Error::from(e))
    }
}

/// The local address the kernel would use to reach `dst`.
pub fn source_for(dst: SocketAddr) -> io::Result<IpAddr> {
    let any: SocketAddr = if dst.is_ipv4() {
        (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let u = UdpSocket::bind(any)?;
    u.connect(dst)?;
    Ok(u.local_addr()?.ip())
}

impl RawProber {
    pub fn open(dst: SocketAddr) -> Result<RawProber, ProbeError> {
        let fam = family(&dst);
        let flags = SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC;
        let tcp = socket(fam, SockType::Raw, flags, SockProtocol::Tcp).map_err(permission)?;
        if dst.is_ipv6() {
            // IPv6 raw sockets deliver no header: ask for the hop limit alongside.
            setsockopt(&tcp, sockopt::Ipv6RecvHopLimit, &true)
                .map_err(|e| ProbeError::Io(e.into()))?;
        }
        let icmp_proto = if dst.is_ipv4() {
            SockProtocol::Icmp
        } else {
            SockProtocol::IcmpV6
        };
        let icmp = socket(fam, SockType::Raw, flags, icmp_proto).map_err(permission)?;
        // Replies are timed when the kernel received them, not when this
        // process got to read them: on a busy machine the wake-up can take
        // longer than the round trip itself.
        for fd in [&tcp, &icmp] {
            setsockopt(fd, sockopt::ReceiveTimestampns, &true)
                .map_err(|e| ProbeError::Io(e.into()))?;
        }
        let src_ip = source_for(dst).map_err(|e| {
            ProbeError::Io(io::Error::new(
                e.kind(),
                format!("no route to {}: {e}", dst.ip()),
            ))
        })?;
        let reserved = socket(fam, SockType::Stream, SockFlag::SOCK_CLOEXEC, None)
            .map_err(|e| ProbeError::Io(e.into()))?;
        let local: SockaddrStorage = SocketAddr::new(src_ip, 0).into();
        bind(reserved.as_raw_fd(), &local).map_err(|e| ProbeError::Io(e.into()))?;
        let bound: SockaddrStorage =
            getsockname(reserved.as_raw_fd()).map_err(|e| ProbeError::Io(e.into()))?;
        let port = bound
            .as_sockaddr_in()
            .map(|a| a.port())
            .or_else(|| bound.as_sockaddr_in6().map(|a| a.port()))
            .ok_or_else(|| ProbeError::Io(io::Error::other("no local port")))?;
        Ok(RawProber {
            tcp,
            icmp,
            _reserved: reserved,
            src: SocketAddr::new(src_ip, port),
            dst,
            buf: vec![0u8; 4096],
        })
    }

    /// Send one TCP segment (SYN with an MSS option, or RST) with the given TTL /
    /// hop limit; returns the time it left.
    pub fn send(&self, flags: u8, seq: u32, ttl: u8) -> io::Result<Instant> {
        let mss = (flags & packet::FLAG_SYN != 0).then_some(1460);
        let seg = packet::tcp_segment(
            self.src.ip(),
            self.dst.ip(),
            self.src.port(),
            self.dst.port(),
            seq,
            flags,
            mss,
        );
        let ttl = i32::from(ttl);
        match self.dst {
            SocketAddr::V4(d) => {
                setsockopt(&self.tcp, sockopt::Ipv4Ttl, &ttl)?;
                let to = SockaddrIn::from(SocketAddrV4::new(*d.ip(), 0));
                self.sendto(&seg, &to)
            }
            SocketAddr::V6(d) => {
                setsockopt(&self.tcp, sockopt::Ipv6Ttl, &ttl)?;
                // The port of a raw IPv6 destination must be 0 (or the protocol).
                let to = SockaddrIn6::from(SocketAddrV6::new(*d.ip(), 0, 0, d.scope_id()));
                self.sendto(&seg, &to)
            }
        }
    }

    fn sendto(&self, seg: &[u8], to: &dyn SockaddrLike) -> io::Result<Instant> {
        loop {
            // Read the clock before sending: on a local path the answer can be
            // queued before `sendto` returns.
            let at = Instant::now();
            match sendto(self.tcp.as_raw_fd(), seg, to, MsgFlags::empty()) {
                Ok(_) => return Ok(at),
                Err(Errno::EINTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Wait until `until` for a reply concerning our flow; `None` on timeout.
    pub fn recv(&mut self, until: Instant) -> io::Result<Option<(Instant, Incoming)>> {
        loop {
            let now = Instant::now();
            if now >= until {
                return Ok(None);
            }
            let ms = until.duration_since(now).as_micros().div_ceil(1000);
            let timeout = PollTimeout::from(u16::try_from(ms).unwrap_or(u16::MAX));
            let mut fds = [
                PollFd::new(self.tcp.as_fd(), PollFlags::POLLIN),
                PollFd::new(self.icmp.as_fd(), PollFlags::POLLIN),
            ];
            match poll(&mut fds, timeout) {
                Ok(0) => continue,
                Ok(_) => {}
                Err(Errno::EINTR) => continue,
                Err(e) => return Err(e.into()),
            }
            let ready = [
                fds[0].revents().is_some_and(|r| !r.is_empty()),
                fds[1].revents().is_some_and(|r| !r.is_empty()),
            ];
            for (i, is_ready) in ready.into_iter().enumerate() {
                if !is_ready {
                    continue;
                }
                while let Some((at, got)) = self.read_one(i == 1)? {
                    if let Some(got) = got {
                        return Ok(Some((at, got)));
                    }
                }
            }
        }
    }

    /// One datagram from the TCP (or ICMP) socket: `None` when drained;
    /// `Some((t, None))` for traffic that is not ours.
    fn read_one(&mut self, icmp: bool) -> io::Result<Option<(Instant, Option<Incoming>)>> {
        let fd = if icmp { &self.icmp } else { &self.tcp };
        let mut hop_limit = None;
        let mut stamp = None;
        let mut iov = [IoSliceMut::new(&mut self.buf)];
        let mut cmsg = nix::cmsg_space!(i32, TimeSpec);
        let received = recvmsg::<SockaddrStorage>(
            fd.as_raw_fd(),
            &mut iov,
            Some(&mut cmsg),
            MsgFlags::empty(),
        )
        .map(|m| {
            if let Ok(cmsgs) = m.cmsgs() {
                for c in cmsgs {
                    match c {
                        ControlMessageOwned::Ipv6HopLimit(h) => {
                            hop_limit = u8::try_from(h).ok();
                        }
                        ControlMessageOwned::ScmTimestampns(t) => stamp = Some(t),
                        _ => {}
                    }
                }
            }
            (m.bytes, m.address)
        });
        let (n, from) = match received {
            Ok(r) => r,
            Err(Errno::EAGAIN) => return Ok(None),
            Err(Errno::EINTR) => return Ok(Some((Instant::now(), None))),
            Err(e) => return Err(e.into()),
        };
        let at = received_at(stamp, SystemTime::now(), Instant::now());
        let data = &self.buf[..n];
        let from6 = from
            .as_ref()
            .and_then(|a| a.as_sockaddr_in6())
            .map(|a| a.ip());
        let got = match (icmp, self.dst.is_ipv4(), from6) {
            (false, true, _) => packet::parse_tcp4(data).map(Incoming::Tcp),
            (false, false, Some(f)) => packet::parse_tcp6(data, f).map(|mut t| {
                t.ttl = hop_limit;
                Incoming::Tcp(t)
            }),
            (true, true, _) => packet::parse_icmp4(data).map(Incoming::Icmp),
            (true, false, Some(f)) => packet::parse_icmp6(data, f).map(Incoming::Icmp),
            _ => None,
        };
        let ours = got.filter(|g| match g {
            Incoming::Tcp(t) => {
                t.from == self.dst.ip() && t.sport == self.dst.port() && t.dport == self.src.port()
            }
            Incoming::Icmp(c) => {
                c.dst == self.dst.ip() && c.sport == self.src.port() && c.dport == self.dst.port()
            }
        });
        Ok(Some((at, ours)))
    }
}

/// When a datagram arrived, on the monotonic clock: the kernel's receive
/// stamp (wall clock) moved back from `now` by its age. Without a stamp, or
/// with one that is not a plausible age (the wall clock was set meanwhile),
/// the time it was read.
fn received_at(stamp: Option<TimeSpec>, wall_now: SystemTime, now: Instant) -> Instant {
    let Some(t) = stamp else { return now };
    let (Ok(secs), Ok(nanos)) = (u64::try_from(t.tv_sec()), u32::try_from(t.tv_nsec())) else {
        return now;
    };
    let Some(stamped) = UNIX_EPOCH.checked_add(Duration::new(secs, nanos)) else {
        return now;
    };
    match wall_now.duration_since(stamped) {
        Ok(age) if age < Duration::from_secs(1) => now.checked_sub(age).unwrap_or(now),
        _ => now,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kernel_stamp_moves_the_arrival_back_by_its_age() {
        let wall = UNIX_EPOCH + Duration::from_secs(1_000_000);
        let now = Instant::now();
        let stamp = TimeSpec::new(1_000_000 - 1, 980_000_000); // 20 ms before `wall`
        assert_eq!(
            received_at(Some(stamp), wall, now),
            now - Duration::from_millis(20)
        );
    }

    #[test]
    fn no_stamp_or_an_implausible_one_is_the_time_read() {
        let wall = UNIX_EPOCH + Duration::from_secs(1_000_000);
        let now = Instant::now();
        assert_eq!(received_at(None, wall, now), now);
        // Stamped after `now` (the wall clock went back) or long before it.
        let later = TimeSpec::new(1_000_001, 0);
        let long_ago = TimeSpec::new(999_990, 0);
        assert_eq!(received_at(Some(later), wall, now), now);
        assert_eq!(received_at(Some(long_ago), wall, now), now);
    }
}
