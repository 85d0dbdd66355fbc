//! Writes hostile-shape benchmark captures, deterministically (same bytes on every run).
//!
//! `cargo run --release -p tcpdoctor-capture --example hostile -- SHAPE OUT.pcap [COUNT]`
//!
//! - `syn-flood`: COUNT (default 300,000) SYNs to one server (10.0.0.80:80) from distinct
//!   sources (198.18.0.0/15, random ports and ISNs) over 300 s, never answered: hping3-style
//!   SYNs (window 512, no options), 54-byte frames.
//! - `port-scan`: one scanner (198.18.0.7:54321) sends SYNs to COUNT (default 20,000) ports of
//!   10.0.0.80 in random order over 2 s, nmap-style (MSS 1460); closed ports answer with
//!   RST-ACK, the few open ones (22, 80, 443) with a SYN-ACK that the scanner resets.
//! - `one-request`: COUNT (default 1,000,000) connections from 1,000 clients to 10.0.0.80:80,
//!   one starting every 100 µs, each a handshake, a 35-byte GET, a 79-byte response that ACKs
//!   it, and FIN/FIN/ACK: 8 packets, 0.5 ms round trip, 0.2 ms server time.
//!
//! Frames are Ethernet/IPv4/TCP with correct checksums; the file is classic pcap with
//! nanosecond timestamps.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::net::Ipv4Addr;

use tcpdoctor_capture::write::PcapWriter;
use tcpdoctor_wire::{LinkType, Timestamp};

const FIN: u16 = 0x01;
const SYN: u16 = 0x02;
const RST: u16 = 0x04;
const PSH: u16 = 0x08;
const ACK: u16 = 0x10;

const SERVER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 80);
/// 2026-01-01T00:00:00Z: captures start at a fixed time.
const T0_NS: i64 = 1_767_225_600_000_000_000;

const GET: &[u8] = b"GET / HTTP/1.1\r\nHost: benchmark\r\n\r\n";
const RESPONSE: &[u8] =
    b"HTTP/1.1 200 OK\r\nServer: nginx\r\nContent-Length: 16\r\n\r\nhello, benchmark";

/// xorshift64*: small, fast, the same sequence everywhere.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// One TCP segment to write.
struct Seg<'a> {
    src: (Ipv4Addr, u16),
    dst: (Ipv4Addr, u16),
    seq: u32,
    ack: u32,
    flags: u16,
    window: u16,
    ttl: u8,
    options: &'a [u8],
    payload: &'a [u8],
}

struct Out {
    w: PcapWriter<BufWriter<File>>,
    frame: Vec<u8>,
    packets: u64,
    ip_id: u16,
    /// Frames held back to be written in time order ([`Out::hold`]).
    held: Vec<(i64, Vec<u8>)>,
}

fn sum16(mut acc: u32, bytes: &[u8]) -> u32 {
    let mut chunks = bytes.chunks_exact(2);
    for c in &mut chunks {
        acc += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        acc += u32::from(*last) << 8;
    }
    acc
}

fn fold(mut acc: u32) -> u16 {
    while acc > 0xFFFF {
        acc = (acc & 0xFFFF) + (acc >> 16);
    }
    !(acc as u16)
}

impl Out {
    fn create(path: &str) -> std::io::Result<Out> {
        let file = BufWriter::with_capacity(1 << 20, File::create(path)?);
        Ok(Out {
            w: PcapWriter::new(file, LinkType::Ethernet, 262_144)?,
            frame: Vec::with_capacity(1600),
            packets: 0,
            ip_id: 1,
            held: Vec::new(),
        })
    }

    fn write(&mut self, ns: i64, s: &Seg<'_>) -> std::io::Result<()> {
        self.build(s);
        self.packets += 1;
        self.w.write_packet(
            Timestamp::from_nanos(T0_NS + ns),
            &self.frame,
            self.frame.len() as u32,
        )
    }

    /// Builds the frame and keeps it for [`Out::flush_held`].
    fn hold(&mut self, ns: i64, s: &Seg<'_>) {
        self.build(s);
        self.held.push((ns, self.frame.clone()));
    }

    /// Writes the held frames in time order (stable: ties keep their order).
    fn flush_held(&mut self) -> std::io::Result<()> {
        let mut held = std::mem::take(&mut self.held);
        held.sort_by_key(|h| h.0);
        for (ns, frame) in held {
            self.packets += 1;
            self.w.write_packet(
                Timestamp::from_nanos(T0_NS + ns),
                &frame,
                frame.len() as u32,
            )?;
        }
        Ok(())
    }

    fn build(&mut self, s: &Seg<'_>) {
        let f = &mut self.frame;
        f.clear();
        f.extend_from_slice(&[0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x08, 0x00]);
        let tcp_len = 20 + s.options.len();
        let total = 20 + tcp_len + s.payload.len();
        let ip_at = f.len();
        f.extend_from_slice(&[0x45, 0]);
        f.extend_from_slice(&(total as u16).to_be_bytes());
        f.extend_from_slice(&self.ip_id.to_be_bytes());
        self.ip_id = self.ip_id.wrapping_add(1);
        f.extend_from_slice(&[0x40, 0, s.ttl, 6, 0, 0]);
        f.extend_from_slice(&s.src.0.octets());
        f.extend_from_slice(&s.dst.0.octets());
        let ip_sum = fold(sum16(0, &f[ip_at..ip_at + 20]));
        f[ip_at + 10..ip_at + 12].copy_from_slice(&ip_sum.to_be_bytes());
        let tcp_at = f.len();
        f.extend_from_slice(&s.src.1.to_be_bytes());
        f.extend_from_slice(&s.dst.1.to_be_bytes());
        f.extend_from_slice(&s.seq.to_be_bytes());
        f.extend_from_slice(&s.ack.to_be_bytes());
        f.extend_from_slice(&((((tcp_len / 4) as u16) << 12) | s.flags).to_be_bytes());
        f.extend_from_slice(&s.window.to_be_bytes());
        f.extend_from_slice(&[0, 0, 0, 0]);
        f.extend_from_slice(s.options);
        f.extend_from_slice(s.payload);
        // RFC 9293 §3.1: the checksum covers a pseudo-header, the header and the payload.
        let mut pseudo = [0u8; 12];
        pseudo[..4].copy_from_slice(&s.src.0.octets());
        pseudo[4..8].copy_from_slice(&s.dst.0.octets());
        pseudo[9] = 6;
        pseudo[10..12].copy_from_slice(&((tcp_len + s.payload.len()) as u16).to_be_bytes());
        let tcp_sum = fold(sum16(sum16(0, &pseudo), &f[tcp_at..]));
        f[tcp_at + 16..tcp_at + 18].copy_from_slice(&tcp_sum.to_be_bytes());
        // Ethernet pads short frames to 60 bytes (the IP length still says what was sent).
        if f.len() < 60 {
            f.resize(60, 0);
        }
    }

    fn finish(self) -> std::io::Result<u64> {
        self.w.into_inner().flush()?;
        Ok(self.packets)
    }
}

/// SYNs from distinct sources, never answered.
fn syn_flood(out: &mut Out, count: u64) -> std::io::Result<()> {
    let mut rng = Rng(0x5EED_0001);
    let span_ns: i64 = 300_000_000_000;
    let step = span_ns / count.max(1) as i64;
    for i in 0..count {
        // 198.18.0.0/15 (RFC 2544, benchmarking): the 2^17 addresses in a scrambled order
        // (an odd multiplier is a bijection mod 2^17), then again with higher ports, so
        // every (address, port) is used once.
        let host = (i as u32).wrapping_mul(0x9E37_79B1) & 0x1_FFFF;
        let src = Ipv4Addr::from(0xC612_0000 | host);
        let round = (i >> 17) as u16 % 3;
        let port = 1024 + round * 21_000 + rng.below(21_000) as u16;
        let jitter = rng.below(step.max(1) as u64) as i64;
        out.write(
            i as i64 * step + jitter / 2,
            &Seg {
                src: (src, port),
                dst: (SERVER, 80),
                seq: rng.next() as u32,
                ack: 0,
                flags: SYN,
                window: 512,
                ttl: 64 - rng.below(16) as u8,
                options: &[],
                payload: &[],
            },
        )?;
    }
    Ok(())
}

/// One scanner, COUNT ports, closed ones answer RST-ACK.
fn port_scan(out: &mut Out, count: u64) -> std::io::Result<()> {
    let mut rng = Rng(0x5EED_0002);
    let count = count.min(65_535) as u16;
    let mut ports: Vec<u16> = (1..=count).collect();
    // Fisher–Yates: nmap probes ports in random order.
    for i in (1..ports.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        ports.swap(i, j);
    }
    let scanner = (Ipv4Addr::new(198, 18, 0, 7), 54_321);
    let mss: &[u8] = &[2, 4, 0x05, 0xB4];
    let server_opts: &[u8] = &[2, 4, 0x05, 0xB4, 1, 1, 4, 2, 1, 3, 3, 7];
    let step: i64 = 2_000_000_000 / i64::from(count.max(1));
    for (i, &port) in ports.iter().enumerate() {
        let t = i as i64 * step;
        let isn = rng.next() as u32;
        let target = (SERVER, port);
        out.hold(
            t,
            &Seg {
                src: scanner,
                dst: target,
                seq: isn,
                ack: 0,
                flags: SYN,
                window: 1024,
                ttl: 52,
                options: mss,
                payload: &[],
            },
        );
        let rtt = 200_000 + rng.below(50_000) as i64;
        if matches!(port, 22 | 80 | 443) {
            let server_isn = rng.next() as u32;
            out.hold(
                t + rtt,
                &Seg {
                    src: target,
                    dst: scanner,
                    seq: server_isn,
                    ack: isn.wrapping_add(1),
                    flags: SYN | ACK,
                    window: 65_160,
                    ttl: 64,
                    options: server_opts,
                    payload: &[],
                },
            );
            out.hold(
                t + rtt + 20_000,
                &Seg {
                    src: scanner,
                    dst: target,
                    seq: isn.wrapping_add(1),
                    ack: 0,
                    flags: RST,
                    window: 0,
                    ttl: 52,
                    options: &[],
                    payload: &[],
                },
            );
        } else {
            out.hold(
                t + rtt,
                &Seg {
                    src: target,
                    dst: scanner,
                    seq: 0,
                    ack: isn.wrapping_add(1),
                    flags: RST | ACK,
                    window: 0,
                    ttl: 64,
                    options: &[],
                    payload: &[],
                },
            );
        }
    }
    out.flush_held()
}

const REQ: u32 = GET.len() as u32;
const RESP: u32 = RESPONSE.len() as u32;
const SYN_OPTS: &[u8] = &[2, 4, 0x05, 0xB4, 4, 2, 1, 1, 1, 3, 3, 7];
const SYNACK_OPTS: &[u8] = &[2, 4, 0x05, 0xB4, 1, 1, 4, 2, 1, 3, 3, 7];
const CLIENT: bool = true;
const SERVER_SENDS: bool = false;

/// One packet of a one-request connection: offset from the connection's start, whether the
/// client sends it, sequence number relative to the sender's ISN, acknowledgment number
/// relative to the receiver's ISN (`None`: zero), flags, window, options, payload.
type Step = (
    i64,
    bool,
    u32,
    Option<u32>,
    u16,
    u16,
    &'static [u8],
    &'static [u8],
);

/// One connection's packets, in order.
const ONE_REQUEST: [Step; 8] = [
    (0, CLIENT, 0, None, SYN, 64_240, SYN_OPTS, &[]),
    // The capture point is halfway: 0.25 ms each way.
    (
        250_000,
        SERVER_SENDS,
        0,
        Some(1),
        SYN | ACK,
        65_160,
        SYNACK_OPTS,
        &[],
    ),
    (500_000, CLIENT, 1, Some(1), ACK, 502, &[], &[]),
    (510_000, CLIENT, 1, Some(1), PSH | ACK, 502, &[], GET),
    // The response (0.2 ms server time) ACKs the GET.
    (
        960_000,
        SERVER_SENDS,
        1,
        Some(1 + REQ),
        PSH | ACK,
        509,
        &[],
        RESPONSE,
    ),
    // The client's FIN ACKs the response.
    (
        1_220_000,
        CLIENT,
        1 + REQ,
        Some(1 + RESP),
        FIN | ACK,
        502,
        &[],
        &[],
    ),
    (
        1_470_000,
        SERVER_SENDS,
        1 + RESP,
        Some(2 + REQ),
        FIN | ACK,
        509,
        &[],
        &[],
    ),
    (
        1_720_000,
        CLIENT,
        2 + REQ,
        Some(2 + RESP),
        ACK,
        502,
        &[],
        &[],
    ),
];

/// A connection in flight: which one, the client's address and port, and both ISNs.
#[derive(Clone, Copy)]
struct OneConn {
    id: u64,
    client: (Ipv4Addr, u16),
    client_isn: u32,
    server_isn: u32,
}

impl OneConn {
    /// Connection `i`: one of 1,000 clients, a port that moves on every 1,000 connections.
    fn new(i: u64, rng: &mut Rng) -> OneConn {
        let addr = Ipv4Addr::new(198, 18, (i % 1000 / 250) as u8, (i % 250) as u8 + 1);
        let port = 10_000 + (i / 1000 % 50_000) as u16;
        OneConn {
            id: i,
            client: (addr, port),
            client_isn: rng.next() as u32,
            server_isn: rng.next() as u32,
        }
    }

    /// When connection `i` starts, before its jitter: one every 100 µs.
    fn start(i: u64) -> i64 {
        i as i64 * 100_000
    }

    fn segment(&self, step: &Step) -> Seg<'static> {
        let &(_, from_client, seq, ack, flags, window, options, payload) = step;
        let server = (SERVER, 80);
        let (src, dst, own_isn, peer_isn) = if from_client {
            (self.client, server, self.client_isn, self.server_isn)
        } else {
            (server, self.client, self.server_isn, self.client_isn)
        };
        Seg {
            src,
            dst,
            seq: own_isn.wrapping_add(seq),
            ack: ack.map_or(0, |a| peer_isn.wrapping_add(a)),
            flags,
            window,
            ttl: 64,
            options,
            payload,
        }
    }
}

/// Many short connections interleaved: each packet of each connection is scheduled in one
/// queue by time, the next one after it (with up to 5 µs jitter) when it is written.
fn one_request(out: &mut Out, count: u64) -> std::io::Result<()> {
    let mut rng = Rng(0x5EED_0003);
    // (time, connection, step), earliest first.
    let mut pending: BinaryHeap<Reverse<(i64, u64, u8)>> = BinaryHeap::new();
    if count > 0 {
        pending.push(Reverse((OneConn::start(0), 0, 0)));
    }
    // Connections in flight, oldest first.
    let mut live: VecDeque<OneConn> = VecDeque::new();
    while let Some(Reverse((t, id, step))) = pending.pop() {
        if step == 0 {
            live.push_back(OneConn::new(id, &mut rng));
            if id + 1 < count {
                let next = OneConn::start(id + 1) + rng.below(50_000) as i64;
                pending.push(Reverse((next, id + 1, 0)));
            }
        }
        let Some(&conn) = live.iter().find(|l| l.id == id) else {
            continue;
        };
        let this = &ONE_REQUEST[usize::from(step)];
        out.write(t, &conn.segment(this))?;
        if let Some(next) = ONE_REQUEST.get(usize::from(step) + 1) {
            let jitter = rng.below(5_000) as i64;
            pending.push(Reverse((t + (next.0 - this.0) + jitter, id, step + 1)));
        } else {
            live.retain(|l| l.id != id);
        }
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(shape), Some(path)) = (args.get(1), args.get(2)) else {
        return Err("usage: hostile syn-flood|port-scan|one-request OUT.pcap [COUNT]".into());
    };
    let count = |default: u64| -> Result<u64, Box<dyn std::error::Error>> {
        Ok(match args.get(3) {
            Some(c) => c.parse()?,
            None => default,
        })
    };
    let mut out = Out::create(path)?;
    match shape.as_str() {
        "syn-flood" => syn_flood(&mut out, count(300_000)?)?,
        "port-scan" => port_scan(&mut out, count(20_000)?)?,
        "one-request" => one_request(&mut out, count(1_000_000)?)?,
        other => return Err(format!("unknown shape {other:?}").into()),
    }
    let packets = out.finish()?;
    eprintln!("{shape}: {packets} packets written to {path}");
    Ok(())
}
