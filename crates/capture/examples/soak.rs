//! Writes an endless-looking capture of HTTP keep-alive traffic, deterministically, for soak
//! tests: `analyze -` on far more bytes than fit in memory, never stored.
//!
//! `cargo run --release -p tcpdoctor-capture --example soak -- SIZE [--split N DIR]`
//!
//! SIZE is how much capture to write, in bytes (`K`, `M`, `G` suffixes: powers of 1024); the
//! connections open when it is reached run to their end, so a little more comes out. Without
//! `--split` the classic pcap goes to standard output; with it the same packets, byte for
//! byte, go into N files `DIR/part-000.pcap`… of about SIZE/N each (as `tcpdump -C` cuts a
//! capture), each with its own file header.
//!
//! 64 client connections (from 1,000 hosts) are open at any time to 10.0.0.80:80, each for 8 to 12 GET
//! exchanges with a 32 KiB response (1448-byte segments, an ACK every second segment, 1 ms
//! round trip), then closed with FIN. One connection in 20 of each of these kinds is unhealthy:
//!
//! - `nagle`: from the second exchange on, the server sends its 238-byte header alone and the
//!   body only after the client's delayed ACK, 40 ms later (Nagle x delayed ACK);
//! - `loss`: in the third exchange the sixth segment is lost before the capture point (the
//!   client sends duplicate ACKs with SACK, the server retransmits after the third), and in the
//!   fifth the last segment is lost after it (seen once, retransmitted 200 ms later by the timer);
//! - `zero_window`: in the second exchange the client closes its window after eleven segments,
//!   the server probes after 200 ms, and the client opens it again after 300 ms.
//!
//! At the end a line on standard error says what was written:
//! `soak: bytes B packets P connections C nagle N loss L zero_window Z`.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::net::Ipv4Addr;
use std::path::PathBuf;

use tcpdoctor_capture::write::PcapWriter;
use tcpdoctor_wire::{LinkType, Timestamp};

const FIN: u8 = 0x01;
const SYN: u8 = 0x02;
const PSH: u8 = 0x08;
const ACK: u8 = 0x10;

const SERVER: (Ipv4Addr, u16) = (Ipv4Addr::new(10, 0, 0, 80), 80);
/// 2026-01-01T00:00:00Z.
const T0_NS: i64 = 1_767_225_600_000_000_000;
const US: i64 = 1_000;
const MS: i64 = 1_000_000;
/// Round trip seen from the capture point.
const RTT: i64 = MS;
/// Time on the wire of one full segment (1 Gbit/s).
const SER: i64 = 12 * US;
const MSS: usize = 1448;
const LANES: u64 = 64;
const BODY: usize = 32 * 1024;
/// The client's window field (x 2^7 = 256 KiB): never the limit.
const CLIENT_WIN: u16 = 2048;
const SERVER_WIN: u16 = 509;

const GET: &[u8] = b"GET /index.html HTTP/1.1\r\nHost: soak.example\r\nUser-Agent: soak/1\r\n\r\n";
const SYN_OPTS: &[u8] = &[2, 4, 0x05, 0xB4, 1, 1, 4, 2, 1, 3, 3, 7];

/// xorshift64*: the same sequence everywhere.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Healthy,
    Nagle,
    Loss,
    ZeroWindow,
}

/// Which bytes a segment carries: none, a slice of the request, or of the response.
#[derive(Clone, Copy)]
enum Data {
    None,
    Req,
    Resp(usize, usize),
}

/// One packet of a connection, relative sequence numbers (the ISN is 0).
#[derive(Clone, Copy)]
struct Ev {
    t: i64,
    from_client: bool,
    seq: u32,
    ack: u32,
    flags: u8,
    window: u16,
    opts: &'static [u8],
    sack: Option<(u32, u32)>,
    data: Data,
}

struct Conn {
    client: (Ipv4Addr, u16),
    client_isn: u32,
    server_isn: u32,
    evs: VecDeque<Ev>,
}

fn ev(t: i64, from_client: bool, seq: u32, ack: u32, flags: u8, data: Data) -> Ev {
    Ev {
        t,
        from_client,
        seq,
        ack,
        flags,
        window: if from_client { CLIENT_WIN } else { SERVER_WIN },
        opts: &[],
        sack: None,
        data,
    }
}

/// The response's bytes: a 238-byte header, then the body.
fn response() -> Vec<u8> {
    let mut r = format!(
        "HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\nDate: Thu, 01 Jan 2026 00:00:00 GMT\r\n\
         Content-Type: text/html\r\nContent-Length: {BODY}\r\nLast-Modified: Thu, 01 Jan 2026 \
         00:00:00 GMT\r\nConnection: keep-alive\r\nETag: \"soak\"\r\nAccept-Ranges: bytes\r\n\r\n"
    )
    .into_bytes();
    debug_assert_eq!(r.len(), 238);
    r.extend((0..BODY).map(|i| b"abcdefghijklmnopqrstuvwxyz0123456789\n"[i % 37]));
    r
}

/// One exchange's packets being written: the client's next sequence number (after the
/// request) and where the response starts in the server's.
struct Ex<'a> {
    evs: &'a mut Vec<Ev>,
    cnext: u32,
    sbase: u32,
}

impl Ex<'_> {
    /// The server sends response bytes `o..o + len`.
    fn data(&mut self, t: i64, (o, len): (usize, usize), flags: u8) {
        let seq = self.sbase + o as u32;
        let e = ev(t, false, seq, self.cnext, flags, Data::Resp(o, len));
        self.evs.push(e);
    }

    /// The client ACKs the response up to `upto`.
    fn ack(&self, t: i64, upto: usize) -> Ev {
        ev(
            t,
            true,
            self.cnext,
            self.sbase + upto as u32,
            ACK,
            Data::None,
        )
    }

    /// `segs[0]` is lost before the capture point: the next three arrive, the client sends a
    /// duplicate ACK with a SACK block for each, the retransmission comes a round trip after
    /// the third. Returns when the next segment leaves and how much is acknowledged.
    fn fast_retransmit(&mut self, at: i64, segs: &[(usize, usize)]) -> (i64, usize) {
        let mut t_dup = at;
        for (j, &(o, len)) in segs[1..4].iter().enumerate() {
            let ta = at + (j as i64 + 1) * SER;
            self.data(ta, (o, len), ACK);
            let mut d = self.ack(ta + 5 * US, segs[0].0);
            d.opts = &[1, 1, 5, 10];
            d.sack = Some((self.sbase + segs[1].0 as u32, self.sbase + (o + len) as u32));
            self.evs.push(d);
            t_dup = ta + 5 * US;
        }
        let tr = t_dup + RTT;
        self.data(tr, segs[0], ACK);
        let upto = segs[3].0 + segs[3].1;
        let a = self.ack(tr + 5 * US, upto);
        self.evs.push(a);
        (tr + SER, upto)
    }

    /// The application stopped reading: the ACK at `at` closes the window, the server probes
    /// (one byte below what it sent, no data), the window opens 300 ms later. Returns when the
    /// next segment leaves.
    fn zero_window(&mut self, at: i64, acked: usize) -> i64 {
        let mut a = self.ack(at + 5 * US, acked);
        a.window = 0;
        self.evs.push(a);
        let probe = at + 200 * MS;
        let seq = self.sbase + acked as u32 - 1;
        let p = ev(probe, false, seq, self.cnext, ACK, Data::None);
        self.evs.push(p);
        let mut pa = self.ack(probe + 5 * US, acked);
        pa.window = 0;
        self.evs.push(pa);
        let open = self.ack(at + 300 * MS, acked);
        self.evs.push(open);
        at + 300 * MS + RTT
    }
}

/// The segments of a response as the server cuts them, (offset, length); `header_alone`:
/// the header in a segment of its own (what Nagle holds the body behind).
fn segments(resp_len: usize, header_alone: bool) -> Vec<(usize, usize)> {
    let mut segs = Vec::new();
    let mut off = 0;
    if header_alone {
        segs.push((0, 238));
        off = 238;
    }
    while off < resp_len {
        let len = MSS.min(resp_len - off);
        segs.push((off, len));
        off += len;
    }
    segs
}

/// The packets of one exchange whose request leaves at `t`; returns when the next may start.
fn exchange(evs: &mut Vec<Ev>, kind: Kind, k: u32, t: i64, resp_len: usize) -> i64 {
    let req = GET.len() as u32;
    let cseq = 1 + k * req;
    let sbase = 1 + k * resp_len as u32;
    evs.push(ev(t, true, cseq, sbase, PSH | ACK, Data::Req));
    let mut x = Ex {
        evs,
        cnext: cseq + req,
        sbase,
    };
    let nagle = kind == Kind::Nagle && k > 0;
    let segs = segments(resp_len, nagle);
    let mut at = t + RTT + 200 * US;
    let (mut acked, mut since_ack, mut i) = (0usize, 0, 0);
    if nagle {
        // The header alone; the client ACKs it after its delayed-ACK timer, and only then
        // does the body leave the server.
        x.data(at, segs[0], PSH | ACK);
        let a = x.ack(at + 40 * MS, segs[0].1);
        x.evs.push(a);
        (acked, at, i) = (segs[0].1, at + 40 * MS + RTT, 1);
    }
    while i < segs.len() {
        let (o, len) = segs[i];
        let last = i + 1 == segs.len();
        if kind == Kind::Loss && k == 2 && i == 5 && segs.len() > 9 {
            (at, acked) = x.fast_retransmit(at, &segs[i..]);
            (since_ack, i) = (0, i + 4);
            continue;
        }
        let flags = if last { PSH | ACK } else { ACK };
        x.data(at, (o, len), flags);
        if kind == Kind::Loss && k == 4 && last {
            // Seen here, lost after: no ACK; the timer sends it again 200 ms later.
            at += 200 * MS + RTT;
            x.data(at, (o, len), flags);
        }
        since_ack += 1;
        i += 1;
        if since_ack == 2 || last {
            (acked, since_ack) = (o + len, 0);
            if kind == Kind::ZeroWindow && k == 1 && i == 12 {
                at = x.zero_window(at, acked);
                continue;
            }
            let a = x.ack(at + 5 * US, acked);
            x.evs.push(a);
        }
        at += SER;
    }
    debug_assert_eq!(acked, resp_len);
    at + MS
}

/// Connection `id`: its kind, and its packets from `start` on, in time order.
fn connection(id: u64, start: i64, resp_len: usize, rng: &mut Rng) -> (Kind, Conn) {
    let kind = match id % 20 {
        3 => Kind::Nagle,
        9 => Kind::Loss,
        15 => Kind::ZeroWindow,
        _ => Kind::Healthy,
    };
    // 1,000 client hosts; the port moves on every 1,000 connections.
    let client = (
        Ipv4Addr::new(10, 1, (id % 1000 / 250) as u8, (id % 250) as u8 + 1),
        32_768 + (id / 1000 % 28_000) as u16,
    );
    let mut evs = Vec::new();
    let mut syn = ev(start, true, 0, 0, SYN, Data::None);
    syn.window = 64_240;
    syn.opts = SYN_OPTS;
    evs.push(syn);
    let mut synack = ev(start + RTT, false, 0, 1, SYN | ACK, Data::None);
    synack.window = 65_160;
    synack.opts = SYN_OPTS;
    evs.push(synack);
    evs.push(ev(start + RTT + 20 * US, true, 1, 1, ACK, Data::None));
    let mut t = start + RTT + 50 * US;
    let n = 8 + (id % 5) as u32;
    for k in 0..n {
        t = exchange(&mut evs, kind, k, t, resp_len);
    }
    let (c, s) = (1 + n * GET.len() as u32, 1 + n * resp_len as u32);
    evs.push(ev(t, true, c, s, FIN | ACK, Data::None));
    evs.push(ev(t + RTT, false, s, c + 1, FIN | ACK, Data::None));
    evs.push(ev(t + RTT + 10 * US, true, c + 1, s + 1, ACK, Data::None));
    evs.sort_by_key(|e| e.t);
    let conn = Conn {
        client,
        client_isn: rng.next() as u32,
        server_isn: rng.next() as u32,
        evs: evs.into(),
    };
    (kind, conn)
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

/// An Ethernet/IPv4/TCP frame with correct checksums.
fn build(f: &mut Vec<u8>, c: &Conn, e: &Ev, resp: &[u8], ip_id: u16) {
    let (src, dst, isn, peer_isn) = if e.from_client {
        (c.client, SERVER, c.client_isn, c.server_isn)
    } else {
        (SERVER, c.client, c.server_isn, c.client_isn)
    };
    let payload: &[u8] = match e.data {
        Data::None => &[],
        Data::Req => GET,
        Data::Resp(o, l) => &resp[o..o + l],
    };
    let mut opts = [0u8; 12];
    let opts: &[u8] = match e.sack {
        Some((l, r)) => {
            opts[..4].copy_from_slice(e.opts);
            opts[4..8].copy_from_slice(&peer_isn.wrapping_add(l).to_be_bytes());
            opts[8..].copy_from_slice(&peer_isn.wrapping_add(r).to_be_bytes());
            &opts
        }
        None => e.opts,
    };
    f.clear();
    f.extend_from_slice(&[0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x08, 0x00]);
    let tcp_len = 20 + opts.len();
    let total = 20 + tcp_len + payload.len();
    let ip_at = f.len();
    f.extend_from_slice(&[0x45, 0]);
    f.extend_from_slice(&(total as u16).to_be_bytes());
    f.extend_from_slice(&ip_id.to_be_bytes());
    f.extend_from_slice(&[0x40, 0, 64, 6, 0, 0]);
    f.extend_from_slice(&src.0.octets());
    f.extend_from_slice(&dst.0.octets());
    let ip_sum = fold(sum16(0, &f[ip_at..ip_at + 20]));
    f[ip_at + 10..ip_at + 12].copy_from_slice(&ip_sum.to_be_bytes());
    let tcp_at = f.len();
    f.extend_from_slice(&src.1.to_be_bytes());
    f.extend_from_slice(&dst.1.to_be_bytes());
    f.extend_from_slice(&isn.wrapping_add(e.seq).to_be_bytes());
    let ack = if e.flags & ACK != 0 {
        peer_isn.wrapping_add(e.ack)
    } else {
        0
    };
    f.extend_from_slice(&ack.to_be_bytes());
    f.extend_from_slice(&[((tcp_len / 4) as u8) << 4, e.flags]);
    f.extend_from_slice(&e.window.to_be_bytes());
    f.extend_from_slice(&[0, 0, 0, 0]);
    f.extend_from_slice(opts);
    f.extend_from_slice(payload);
    let mut pseudo = [0u8; 12];
    pseudo[..4].copy_from_slice(&src.0.octets());
    pseudo[4..8].copy_from_slice(&dst.0.octets());
    pseudo[9] = 6;
    pseudo[10..12].copy_from_slice(&((tcp_len + payload.len()) as u16).to_be_bytes());
    let tcp_sum = fold(sum16(sum16(0, &pseudo), &f[tcp_at..]));
    f[tcp_at + 16..tcp_at + 18].copy_from_slice(&tcp_sum.to_be_bytes());
    if f.len() < 60 {
        f.resize(60, 0);
    }
}

/// Where the packets go: standard output, or N files cut at about equal sizes.
struct Sink {
    w: PcapWriter<Box<dyn Write>>,
    split: Option<(PathBuf, u64)>,
    file: u64,
    target: u64,
    bytes: u64,
}

impl Sink {
    fn open(path: Option<&PathBuf>, file: u64) -> std::io::Result<PcapWriter<Box<dyn Write>>> {
        let out: Box<dyn Write> = match path {
            Some(dir) => Box::new(BufWriter::with_capacity(
                1 << 20,
                File::create(dir.join(format!("part-{file:03}.pcap")))?,
            )),
            None => Box::new(BufWriter::with_capacity(1 << 20, std::io::stdout().lock())),
        };
        PcapWriter::new(out, LinkType::Ethernet, 262_144)
    }

    fn write(&mut self, ns: i64, frame: &[u8]) -> std::io::Result<()> {
        if let Some((dir, n)) = &self.split {
            if self.file + 1 < *n && self.bytes >= (self.file + 1) * self.target / *n {
                self.file += 1;
                let next = Sink::open(Some(dir), self.file)?;
                std::mem::replace(&mut self.w, next).into_inner().flush()?;
            }
        }
        self.bytes += 16 + frame.len() as u64;
        let len = frame.len() as u32;
        self.w
            .write_packet(Timestamp::from_nanos(T0_NS + ns), frame, len)
    }
}

fn size(s: &str) -> Result<u64, Box<dyn std::error::Error>> {
    let (num, mult) = match s.as_bytes().last() {
        Some(b'K' | b'k') => (&s[..s.len() - 1], 1 << 10),
        Some(b'M' | b'm') => (&s[..s.len() - 1], 1 << 20),
        Some(b'G' | b'g') => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    Ok(num.parse::<u64>()? * mult)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: soak SIZE [--split N DIR]";
    let target = size(args.get(1).ok_or(usage)?)?;
    let split = match args.get(2).map(String::as_str) {
        Some("--split") => {
            let n: u64 = args.get(3).ok_or(usage)?.parse()?;
            let dir = PathBuf::from(args.get(4).ok_or(usage)?);
            std::fs::create_dir_all(&dir)?;
            Some((dir, n.max(1)))
        }
        Some(_) => return Err(usage.into()),
        None => None,
    };
    let resp = response();
    let mut sink = Sink {
        w: Sink::open(split.as_ref().map(|s| &s.0), 0)?,
        split,
        file: 0,
        target,
        bytes: 24,
    };
    let mut rng = Rng(0x50A4_0001);
    let mut lanes: Vec<Option<Conn>> = (0..LANES).map(|_| None).collect();
    let mut heap = BinaryHeap::new();
    let mut next_id = 0u64;
    let mut counts = [0u64; 4];
    for lane in 0..LANES {
        let (kind, c) = connection(next_id, lane as i64 * 137 * US, resp.len(), &mut rng);
        counts[kind as usize] += 1;
        next_id += 1;
        heap.push(Reverse((c.evs[0].t, lane)));
        lanes[lane as usize] = Some(c);
    }
    let (mut frame, mut packets, mut ip_id) = (Vec::with_capacity(1600), 0u64, 0u16);
    while let Some(Reverse((_, lane))) = heap.pop() {
        let slot = &mut lanes[lane as usize];
        let Some(c) = slot.as_mut() else { continue };
        let Some(e) = c.evs.pop_front() else { continue };
        build(&mut frame, c, &e, &resp, ip_id);
        ip_id = ip_id.wrapping_add(1);
        packets += 1;
        match sink.write(e.t, &frame) {
            Err(err) if err.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
            r => r?,
        }
        if let Some(n) = c.evs.front() {
            heap.push(Reverse((n.t, lane)));
        } else if sink.bytes < target {
            let (kind, c) = connection(next_id, e.t + 2 * MS, resp.len(), &mut rng);
            counts[kind as usize] += 1;
            next_id += 1;
            heap.push(Reverse((c.evs[0].t, lane)));
            *slot = Some(c);
        } else {
            *slot = None;
        }
    }
    match sink.w.into_inner().flush() {
        Err(err) if err.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
        r => r?,
    }
    eprintln!(
        "soak: bytes {} packets {packets} connections {next_id} nagle {} loss {} zero_window {}",
        sink.bytes, counts[1], counts[2], counts[3]
    );
    Ok(())
}
