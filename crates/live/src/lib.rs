//! Live capture on one Linux network interface, without libpcap.
//!
//! [`Capture::open`] binds an `AF_PACKET` socket to an interface of the
//! **calling thread's** network namespace (enter another one with `setns`
//! first), and [`Capture::next_frame`] hands out each frame, sent or
//! received on that interface, with the kernel's nanosecond timestamp.
//! [`Capture::stats`] says how many frames the kernel dropped because the
//! reader fell behind: a capture with drops has holes, and a report built on
//! it must say so.
//!
//! ```no_run
//! use std::time::Duration;
//! let mut cap = tcpdoctor_live::Capture::open("eth0", 262_144)?;
//! while let Some(frame) = cap.next_frame(Duration::from_millis(100))? {
//!     println!("{} ns: {} of {} bytes", frame.ts.nanos(), frame.data.len(), frame.orig_len);
//! }
//! let stats = cap.stats()?;
//! println!("{} frames, {} dropped by the kernel", stats.received, stats.dropped);
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! Frames are Ethernet ([`Capture::link_type`]) on Ethernet and veth
//! interfaces. With segmentation offloads on, frames sent by the host are
//! TSO/GSO "super-segments" larger than the MTU, as tcpdump shows them.
//! One `recvmsg` per frame: at the rates of the lab (a few hundred thousand
//! frames per second at most) a large socket buffer absorbs the bursts.

use std::io;
use std::os::fd::OwnedFd;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub use tcpdoctor_wire::{LinkType, Timestamp};

mod sys;

/// Socket buffer asked for (the kernel may cap it): room for bursts while
/// the reader is descheduled.
const SOCKET_BUFFER: i32 = 64 << 20;

/// An open capture on one interface.
pub struct Capture {
    fd: OwnedFd,
    interface: String,
    snaplen: u32,
    buf: Vec<u8>,
    stats: Stats,
}

/// One captured frame, valid until the next call to [`Capture::next_frame`].
#[derive(Debug)]
pub struct Frame<'a> {
    /// When the kernel saw it (ns since the Unix epoch).
    pub ts: Timestamp,
    /// The captured bytes: at most the snaplen.
    pub data: &'a [u8],
    /// The frame's length on the wire.
    pub orig_len: u32,
}

/// Kernel counters since the capture was opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Frames that reached the socket, dropped ones included.
    pub received: u64,
    /// Frames the kernel dropped because the socket buffer was full.
    pub dropped: u64,
}

impl Capture {
    /// Opens a capture of every frame sent or received on `interface` (in the
    /// calling thread's network namespace), keeping at most `snaplen` bytes
    /// of each. Needs `CAP_NET_RAW`.
    pub fn open(interface: &str, snaplen: u32) -> io::Result<Capture> {
        let snaplen = snaplen.clamp(64, 262_144);
        let fd = sys::packet_socket().map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot open a packet socket (needs root or CAP_NET_RAW): {e}"),
            )
        })?;
        let ifindex = sys::interface_index(interface)?;
        sys::set_int(&fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1)?;
        // SO_RCVBUFFORCE goes past rmem_max with CAP_NET_ADMIN; fall back to
        // what an unprivileged socket may have.
        if sys::set_int(&fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, SOCKET_BUFFER).is_err() {
            sys::set_int(&fd, libc::SOL_SOCKET, libc::SO_RCVBUF, SOCKET_BUFFER)?;
        }
        sys::bind_interface(&fd, ifindex)?;
        Ok(Capture {
            fd,
            interface: interface.to_string(),
            snaplen,
            buf: vec![0; snaplen as usize],
            stats: Stats::default(),
        })
    }

    /// The interface name given to [`Capture::open`].
    pub fn interface(&self) -> &str {
        &self.interface
    }

    /// The link type of the frames (Ethernet).
    pub fn link_type(&self) -> LinkType {
        LinkType::Ethernet
    }

    /// The most bytes kept of a frame.
    pub fn snaplen(&self) -> u32 {
        self.snaplen
    }

    /// The next frame, waiting up to `timeout` for one; `None` if none came.
    pub fn next_frame(&mut self, timeout: Duration) -> io::Result<Option<Frame<'_>>> {
        let mut got = sys::receive(&self.fd, &mut self.buf)?;
        if got.is_none() {
            let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
            if sys::wait_readable(&self.fd, ms)? {
                got = sys::receive(&self.fd, &mut self.buf)?;
            }
        }
        let Some(r) = got else {
            return Ok(None);
        };
        let ns = r.ts_ns.unwrap_or_else(now_ns);
        Ok(Some(Frame {
            ts: Timestamp::from_nanos(ns),
            data: &self.buf[..r.copied],
            orig_len: u32::try_from(r.wire_len).unwrap_or(u32::MAX),
        }))
    }

    /// Frames received and dropped by the kernel since the capture was opened.
    pub fn stats(&mut self) -> io::Result<Stats> {
        let (packets, drops) = sys::packet_statistics(&self.fd)?;
        self.stats.received += u64::from(packets);
        self.stats.dropped += u64::from(drops);
        Ok(self.stats)
    }
}

fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_interface_is_a_clear_error() {
        // Either not root (socket refused) or no such interface: never a panic.
        let err = Capture::open("no-such-if0", 128).err();
        assert!(err.is_some());
    }

    #[test]
    fn loopback_frames_come_with_timestamps_when_root() {
        let Ok(mut cap) = Capture::open("lo", 256) else {
            return; // not root: nothing to test here
        };
        let before = now_ns();
        let sock = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
        let addr = sock.local_addr().expect("addr");
        sock.send_to(b"tcpdoctor-live", addr).expect("send");
        let mut seen = false;
        for _ in 0..50 {
            match cap.next_frame(Duration::from_millis(20)).expect("read") {
                Some(f) if f.data.windows(14).any(|w| w == b"tcpdoctor-live") => {
                    assert!(f.ts.nanos() >= before - 1_000_000_000);
                    assert_eq!(f.orig_len as usize, f.data.len());
                    seen = true;
                    break;
                }
                _ => {}
            }
        }
        assert!(seen, "the datagram sent over lo was not captured");
        let st = cap.stats().expect("stats");
        assert!(st.received >= 1);
    }
}
