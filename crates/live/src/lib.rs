//! Live capture on Linux, without libpcap.
//!
//! [`Capture::open`] opens an `AF_PACKET` socket on an interface of the
//! **calling thread's** network namespace (enter another one with `setns`
//! first), or on all of them (`any`), optionally with a [`Filter`] that the
//! kernel runs (compiled to classic BPF, attached before the socket is bound,
//! so no unfiltered frame slips in). [`Capture::next_frame`] hands out each
//! frame, sent or received, with the kernel's nanosecond timestamp.
//! [`Capture::stats`] says how many frames the kernel dropped because the
//! reader fell behind: a capture with drops has holes, and a report built on
//! it must say so.
//!
//! ```no_run
//! use std::time::Duration;
//! let filter = tcpdoctor_filter::Filter::parse("tcp port 8080").expect("parses");
//! let mut cap = tcpdoctor_live::Capture::open("eth0", 262_144, Some(&filter))?;
//! while let Some(frame) = cap.next_frame(Duration::from_millis(100))? {
//!     println!("{} ns: {} of {} bytes", frame.ts.nanos(), frame.data.len(), frame.orig_len);
//! }
//! let stats = cap.stats()?;
//! println!("{} frames, {} dropped by the kernel", stats.received, stats.dropped);
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! # How
//!
//! Frames arrive in a TPACKET_V3 ring shared with the kernel ([`RING_BLOCKS`]
//! blocks of [`BLOCK_SIZE`] bytes): the kernel packs frames into a block and
//! hands the block over when it is full or [`RETIRE_MS`] after its first
//! frame, so a quiet link still delivers; the reader walks the block and
//! gives it back when it moves on. No system call per frame: `poll` only
//! when the ring is empty. With a filter, the kernel keeps at most `snaplen`
//! bytes of a frame (the program returns it); without one, the frame is cut
//! here.
//!
//! # Link types
//!
//! - An Ethernet, veth or loopback interface: frames from the Ethernet
//!   header ([`LinkType::Ethernet`]). With segmentation offloads on, frames
//!   sent by the host are TSO/GSO "super-segments" larger than the MTU, as
//!   tcpdump shows them. The outgoing copy of a loopback frame is skipped
//!   (it is also received), as libpcap does.
//! - `any`, and interfaces without an Ethernet header (tun, ipip, WireGuard…):
//!   a "cooked" socket whose frames start at the IP header
//!   ([`LinkType::RawIp`]); frames that are not IPv4 or IPv6 (ARP…) are
//!   skipped. On `any`, a packet that crosses two interfaces is seen on
//!   each, as with `tcpdump -i any`.
//!
//! VLAN tags stripped by the kernel (the usual case) are not put back.

use std::io;
use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

pub use tcpdoctor_filter::Filter;
use tcpdoctor_wire::ethertype::{IPV4 as ETHERTYPE_IPV4, IPV6 as ETHERTYPE_IPV6};
pub use tcpdoctor_wire::{LinkType, Timestamp};

pub mod signal;
mod sys;

/// Bytes per ring block.
pub const BLOCK_SIZE: u32 = 1 << 20;
/// Blocks in the ring: 32 MiB in all, a few hundred milliseconds of a busy
/// link for a reader that is descheduled.
pub const RING_BLOCKS: u32 = 32;
/// A block that has frames is handed over at most this long after it was
/// opened, full or not.
pub const RETIRE_MS: u32 = 20;

/// `ARPHRD_ETHER`, `ARPHRD_LOOPBACK` (<linux/if_arp.h>).
const ARPHRD_ETHER: u16 = 1;
const ARPHRD_LOOPBACK: u16 = 772;
/// `PACKET_OUTGOING` (<linux/if_packet.h>): sent by this host.
const PACKET_OUTGOING: u8 = 4;

// struct tpacket_block_desc / tpacket_hdr_v1 (<linux/if_packet.h>).
const BLOCK_NUM_PKTS: usize = 12;
const BLOCK_FIRST_PKT: usize = 16;
// struct tpacket3_hdr.
const PKT_NEXT_OFFSET: usize = 0;
const PKT_SEC: usize = 4;
const PKT_NSEC: usize = 8;
const PKT_SNAPLEN: usize = 12;
const PKT_LEN: usize = 16;
const PKT_MAC: usize = 24;
/// The `struct sockaddr_ll` after the header: TPACKET_ALIGN(sizeof(struct tpacket3_hdr)).
const PKT_SLL: usize = 48;
const SLL_PROTOCOL: usize = 2;
const SLL_HATYPE: usize = 8;
const SLL_PKTTYPE: usize = 10;

/// An open capture.
pub struct Capture {
    // Unmapped before the socket is closed (fields drop in order).
    ring: sys::Ring,
    fd: OwnedFd,
    interface: String,
    link: LinkType,
    cooked: bool,
    snaplen: u32,
    cursor: Cursor,
    stats: Stats,
}

/// Where the reader is in the ring.
#[derive(Debug, Clone, Copy, Default)]
struct Cursor {
    block: usize,
    /// Whether `block` is ours and being read.
    held: bool,
    /// Frames of the block not read yet, and where the next one starts.
    left: u32,
    offset: usize,
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
    /// Frames that passed the filter, dropped ones included.
    pub received: u64,
    /// Frames the kernel dropped because the ring was full.
    pub dropped: u64,
    /// How many times the ring filled up (every block waiting for the
    /// reader); frames were dropped until the reader gave a block back.
    pub ring_full: u64,
}

/// Where a frame lies in the held block, and its metadata.
struct Found {
    start: usize,
    len: usize,
    ts_ns: i64,
    orig_len: u32,
}

impl Capture {
    /// Opens a capture of every frame sent or received on `interface` (in the
    /// calling thread's network namespace; `any` for all its interfaces)
    /// that `filter` keeps, keeping at most `snaplen` bytes of each. Needs
    /// `CAP_NET_RAW`.
    ///
    /// Errors: no such interface (kind `NotFound`: "no interface named X in
    /// this network namespace"), no privileges, a filter the kernel cannot
    /// run (kind `InvalidInput`, message starting with "filter:").
    pub fn open(interface: &str, snaplen: u32, filter: Option<&Filter>) -> io::Result<Capture> {
        let snaplen = snaplen.clamp(64, 262_144);
        let (ifindex, cooked) = if interface == "any" {
            (0, true)
        } else {
            let index = sys::interface_index(interface)?;
            let hw = sys::hardware_type(interface)?;
            (index, !matches!(hw, ARPHRD_ETHER | ARPHRD_LOOPBACK))
        };
        let link = if cooked {
            LinkType::RawIp
        } else {
            LinkType::Ethernet
        };
        let program = match filter {
            Some(f) => Some(kernel_program(f, link, snaplen)?),
            None => None,
        };
        // Protocol 0: the socket receives nothing until it is bound, after
        // the filter is attached.
        let fd = sys::packet_socket(cooked).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot open a packet socket (needs root or CAP_NET_RAW): {e}"),
            )
        })?;
        sys::use_tpacket_v3(&fd)?;
        if let Some(p) = &program {
            sys::attach_filter(&fd, p).map_err(|e| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("filter: the kernel refused the program: {e}"),
                )
            })?;
        }
        let ring = sys::Ring::new(&fd, BLOCK_SIZE, RING_BLOCKS, RETIRE_MS).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "cannot set up a {} MiB capture ring: {e}",
                    (BLOCK_SIZE as usize * RING_BLOCKS as usize) >> 20
                ),
            )
        })?;
        sys::bind_interface(&fd, ifindex)?;
        Ok(Capture {
            ring,
            fd,
            interface: interface.to_string(),
            link,
            cooked,
            snaplen,
            cursor: Cursor::default(),
            stats: Stats::default(),
        })
    }

    /// The interface name given to [`Capture::open`].
    pub fn interface(&self) -> &str {
        &self.interface
    }

    /// The link type of the frames: Ethernet, or raw IP on `any` and on
    /// interfaces without an Ethernet header.
    pub fn link_type(&self) -> LinkType {
        self.link
    }

    /// The most bytes kept of a frame.
    pub fn snaplen(&self) -> u32 {
        self.snaplen
    }

    /// How late a frame can be handed out after the kernel captured it
    /// (a quiet link's block is handed over [`RETIRE_MS`] after it opened).
    /// To read everything captured up to now, read until
    /// `next_frame(capture.delivery_delay())` returns `None`.
    pub fn delivery_delay(&self) -> Duration {
        Duration::from_millis(u64::from(RETIRE_MS) * 2 + 10)
    }

    /// The next frame, waiting up to `timeout` for one; `None` if none came
    /// (or a signal interrupted the wait). The clock is read only when the
    /// ring is empty and `timeout` is not zero.
    pub fn next_frame(&mut self, timeout: Duration) -> io::Result<Option<Frame<'_>>> {
        let mut deadline = None;
        let found = loop {
            if let Some(f) = self.advance() {
                break f;
            }
            // The ring is empty: wait for the kernel to hand a block over.
            if timeout.is_zero() {
                return Ok(None);
            }
            let now = Instant::now();
            let until = *deadline.get_or_insert(now + timeout);
            if now >= until {
                return Ok(None);
            }
            let ms = (until - now)
                .as_nanos()
                .div_ceil(1_000_000)
                .min(i32::MAX as u128) as i32;
            match sys::wait(&self.fd, ms)? {
                sys::Wait::Ready => {
                    if let Some(e) = sys::take_error(&self.fd)? {
                        return Err(e);
                    }
                }
                sys::Wait::TimedOut => {}
                sys::Wait::Interrupted => return Ok(None),
            }
        };
        let data = self
            .ring
            .user_block(self.cursor.block)
            .and_then(|b| b.get(found.start..found.start + found.len))
            .unwrap_or_default();
        Ok(Some(Frame {
            ts: Timestamp::from_nanos(found.ts_ns),
            data,
            orig_len: found.orig_len,
        }))
    }

    /// Moves to the next frame worth handing out, giving blocks back to the
    /// kernel as they are finished; `None` when the ring has nothing more.
    fn advance(&mut self) -> Option<Found> {
        loop {
            let c = self.cursor;
            if c.held && c.left == 0 {
                self.ring.release(c.block);
                self.cursor = Cursor {
                    block: (c.block + 1) % self.ring.blocks(),
                    ..Cursor::default()
                };
                continue;
            }
            let block = self.ring.user_block(c.block)?;
            if !c.held {
                self.cursor = Cursor {
                    block: c.block,
                    held: true,
                    left: ne32(block, BLOCK_NUM_PKTS).unwrap_or(0),
                    offset: ne32(block, BLOCK_FIRST_PKT).unwrap_or(0) as usize,
                };
                continue;
            }
            let at = c.offset;
            let pkt = parse_packet(block, at);
            self.cursor.left -= 1;
            match pkt {
                Some((next, pkt)) => {
                    self.cursor.offset = at + next;
                    if next == 0 {
                        self.cursor.left = 0;
                    }
                    if let Some(found) = self.keep(pkt) {
                        return Some(found);
                    }
                }
                // A header we cannot read: give up on the rest of the block.
                None => self.cursor.left = 0,
            }
        }
    }

    /// Whether a frame is handed out, and how much of it.
    fn keep(&self, p: Packet) -> Option<Found> {
        // The outgoing copy of a loopback frame: it is received too.
        if p.pkttype == PACKET_OUTGOING && p.hatype == ARPHRD_LOOPBACK {
            return None;
        }
        if self.cooked && !matches!(p.protocol, ETHERTYPE_IPV4 | ETHERTYPE_IPV6) {
            return None;
        }
        Some(Found {
            start: p.start,
            len: p.caplen.min(self.snaplen as usize),
            ts_ns: p.ts_ns,
            orig_len: p.orig_len,
        })
    }

    /// Frames received and dropped by the kernel since the capture was opened.
    pub fn stats(&mut self) -> io::Result<Stats> {
        let (packets, drops, freezes) = sys::packet_statistics(&self.fd)?;
        self.stats.received += u64::from(packets);
        self.stats.dropped += u64::from(drops);
        self.stats.ring_full += u64::from(freezes);
        Ok(self.stats)
    }
}

/// The filter as the kernel runs it: compiled for the capture's link type,
/// returning `snaplen` (the bytes the kernel keeps) instead of the whole
/// packet on a match.
fn kernel_program(f: &Filter, link: LinkType, snaplen: u32) -> io::Result<Vec<libc::sock_filter>> {
    let prog = f
        .compile(link)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("filter: {e}")))?;
    let ret_k = tcpdoctor_filter::bpf::RET | tcpdoctor_filter::bpf::K;
    Ok(prog
        .iter()
        .map(|i| libc::sock_filter {
            code: i.code,
            jt: i.jt,
            jf: i.jf,
            k: if i.code == ret_k && i.k != 0 {
                snaplen
            } else {
                i.k
            },
        })
        .collect())
}

/// One frame's header in a block.
struct Packet {
    start: usize,
    caplen: usize,
    orig_len: u32,
    ts_ns: i64,
    protocol: u16,
    hatype: u16,
    pkttype: u8,
}

fn ne32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn ne16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

/// The `tpacket3_hdr` at `at` (and the `sockaddr_ll` after it): the offset
/// of the next one (0 for the last), and the frame. `None` if it does not
/// fit in the block.
fn parse_packet(block: &[u8], at: usize) -> Option<(usize, Packet)> {
    let next = ne32(block, at + PKT_NEXT_OFFSET)? as usize;
    let sec = ne32(block, at + PKT_SEC)?;
    let nsec = ne32(block, at + PKT_NSEC)?;
    let caplen = ne32(block, at + PKT_SNAPLEN)? as usize;
    let orig_len = ne32(block, at + PKT_LEN)?;
    let start = at + usize::from(ne16(block, at + PKT_MAC)?);
    let sll = at + PKT_SLL;
    let protocol = u16::from_be_bytes(
        block
            .get(sll + SLL_PROTOCOL..sll + SLL_PROTOCOL + 2)?
            .try_into()
            .ok()?,
    );
    let hatype = ne16(block, sll + SLL_HATYPE)?;
    let pkttype = *block.get(sll + SLL_PKTTYPE)?;
    block.get(start..start.checked_add(caplen)?)?;
    Some((
        next,
        Packet {
            start,
            caplen,
            orig_len,
            ts_ns: i64::from(sec) * 1_000_000_000 + i64::from(nsec),
            protocol,
            hatype,
            pkttype,
        },
    ))
}

#[cfg(test)]
mod tests;
