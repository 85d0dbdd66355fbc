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
use std::collections::BinaryHeap;
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

/// One connection's packets, in order: (offset from its start, which packet).
const ONE_REQUEST: [(i64, u8); 8] = [
    (0, 0),         // SYN
    (250_000, 1),   // SYN-ACK (capture point halfway: 0.25 ms each way)
    (500_000, 2),   // ACK
    (510_000, 3),   // GET
    (960_000, 4),   // response (0.2 ms server time), ACKs the GET
    (1_220_000, 5), // client FIN, ACKs the response
    (1_470_000, 6), // server FIN
    (1_720_000, 7), // client ACK
];

fn one_request(out: &mut Out, count: u64) -> std::io::Result<()> {
    let mut rng = Rng(0x5EED_0003);
    let syn_opts: &[u8] = &[2, 4, 0x05, 0xB4, 4, 2, 1, 1, 1, 3, 3, 7];
    let synack_opts: &[u8] = &[2, 4, 0x05, 0xB4, 1, 1, 4, 2, 1, 3, 3, 7];
    // Per connection: client (address, port), client ISN, server ISN.
    let conn = |i: u64, rng: &mut Rng| {
        let client = Ipv4Addr::new(198, 18, (i % 1000 / 250) as u8, (i % 250) as u8 + 1);
        let port = 10_000 + (i / 1000 % 50_000) as u16;
        (client, port, rng.next() as u32, rng.next() as u32)
    };
    let mut pending: BinaryHeap<Reverse<(i64, u64, u8)>> = BinaryHeap::new();
    let start = |i: u64| i as i64 * 100_000;
    if count > 0 {
        pending.push(Reverse((start(0), 0, 0)));
    }
    // Connections in flight: (id, client, port, client ISN, server ISN), oldest first.
    let mut live: std::collections::VecDeque<(u64, Ipv4Addr, u16, u32, u32)> = Default::default();
    while let Some(Reverse((t, id, step))) = pending.pop() {
        if step == 0 {
            let (c, p, ci, si) = conn(id, &mut rng);
            live.push_back((id, c, p, ci, si));
            if id + 1 < count {
                let next = start(id + 1) + rng.below(50_000) as i64;
                pending.push(Reverse((next, id + 1, 0)));
            }
        }
        let Some(&(_, c, p, ci, si)) = live.iter().find(|l| l.0 == id) else {
            continue;
        };
        let client = (c, p);
        let server = (SERVER, 80);
        let (req, resp) = (GET.len() as u32, RESPONSE.len() as u32);
        let seg = match step {
            0 => Seg {
                src: client,
                dst: server,
                seq: ci,
                ack: 0,
                flags: SYN,
                window: 64_240,
                ttl: 64,
                options: syn_opts,
                payload: &[],
            },
            1 => Seg {
                src: server,
                dst: client,
                seq: si,
                ack: ci.wrapping_add(1),
                flags: SYN | ACK,
                window: 65_160,
                ttl: 64,
                options: synack_opts,
                payload: &[],
            },
            2 => Seg {
                src: client,
                dst: server,
                seq: ci.wrapping_add(1),
                ack: si.wrapping_add(1),
                flags: ACK,
                window: 502,
                ttl: 64,
                options: &[],
                payload: &[],
            },
            3 => Seg {
                src: client,
                dst: server,
                seq: ci.wrapping_add(1),
                ack: si.wrapping_add(1),
                flags: PSH | ACK,
                window: 502,
                ttl: 64,
                options: &[],
                payload: GET,
            },
            4 => Seg {
                src: server,
                dst: client,
                seq: si.wrapping_add(1),
                ack: ci.wrapping_add(1 + req),
                flags: PSH | ACK,
                window: 509,
                ttl: 64,
                options: &[],
                payload: RESPONSE,
            },
            5 => Seg {
                src: client,
                dst: server,
                seq: ci.wrapping_add(1 + req),
                ack: si.wrapping_add(1 + resp),
                flags: FIN | ACK,
                window: 502,
                ttl: 64,
                options: &[],
                payload: &[],
            },
            6 => Seg {
                src: server,
                dst: client,
                seq: si.wrapping_add(1 + resp),
                ack: ci.wrapping_add(2 + req),
                flags: FIN | ACK,
                window: 509,
                ttl: 64,
                options: &[],
                payload: &[],
            },
            _ => Seg {
                src: client,
                dst: server,
                seq: ci.wrapping_add(2 + req),
                ack: si.wrapping_add(2 + resp),
                flags: ACK,
                window: 502,
                ttl: 64,
                options: &[],
                payload: &[],
            },
        };
        out.write(t, &seg)?;
        let now = ONE_REQUEST[usize::from(step)].0;
        if let Some(&(dt, next)) = ONE_REQUEST.get(usize::from(step) + 1) {
            let jitter = rng.below(5_000) as i64;
            pending.push(Reverse((t + (dt - now) + jitter, id, next)));
        } else {
            live.retain(|l| l.0 != id);
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
